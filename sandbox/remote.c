/* Sandboxes on another engine (sandbox/engine/remote.h): what the
 * engine-neutral calls do with a sandbox whose workload runs elsewhere.
 * The state folder, its lock and sandbox.json stay here; the workspace,
 * its snapshots and the tool suite are the peer's, beside the workload. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remote.h"
#include "sandbox_internal.h"
#include "seed.h"
#include "json.h"
#include "sha1.h"

static const sp_remote_ops *ops_for(sp_engine_kind kind)
{
    return kind == SP_ENGINE_KUBERNETES ? &sp_kube_remote_ops : NULL;
}

char *sp_remote_owner(const char *state_root)
{
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    sp_sha1 c;
    sp_sha1_init(&c);
    sp_sha1_update(&c, host, strlen(host) + 1);
    sp_sha1_update(&c, state_root, strlen(state_root));
    uint8_t d[20];
    sp_sha1_final(&c, d);
    char hex[17];
    for (int i = 0; i < 8; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    return sp_xstrdup(hex);
}

bool sp_sandbox_is_remote(const sp_sandbox *sb)
{
    return sb && sb->engine_kind != SP_ENGINE_PODMAN;
}

const char *sp_sandbox_engine(const sp_sandbox *sb)
{
    return sb->engine ? sb->engine : SP_ENGINE_LOCAL;
}

int sp_sandbox_not_local(const sp_sandbox *sb, const char *what, sp_error **err)
{
    return sp_err_set(err, SP_EINVAL, 0,
                      "sandbox %s runs on engine %s (%s)%s%s: %s needs a local sandbox; "
                      "use its tools (sandpod call, sandpod mcp) or sandpod exec",
                      sb->name, sp_sandbox_engine(sb), sp_engine_kind_name(sb->engine_kind),
                      sb->remote ? ", " : "", sb->remote ? sb->rops->where(sb->remote) : "", what);
}

/* The engine's handle, opened on first use. */
static sp_remote *handle(sp_sandbox *sb, sp_error **err)
{
    if (sb->remote)
        return sb->remote;
    sp_engine *e = NULL;
    int r = sp_engine_get(&e, sb->state_root, sb->engine, err);
    if (r < 0) {
        sp_err_wrap(err, r, "sandbox %s runs on engine %s", sb->name, sp_sandbox_engine(sb));
        return NULL;
    }
    if (e->kind != sb->engine_kind) {
        sp_err_set(err, SP_EINVAL, 0,
                   "sandbox %s was made on engine %s of kind %s; it is now of kind %s", sb->name,
                   e->name, sp_engine_kind_name(sb->engine_kind), sp_engine_kind_name(e->kind));
        sp_engine_free(e);
        return NULL;
    }
    sb->rops = ops_for(e->kind);
    r = sb->rops->open(&sb->remote, e, sb->remote_record, err);
    sp_engine_free(e);
    return r < 0 ? NULL : sb->remote;
}

/* ------------------------------------------------------------- create -- */

static int seed(sp_sandbox *sb, const sp_sandbox_opts *o, sp_error **err);

int sp_remote_create(sp_sandbox *sb, const sp_sandbox_opts *o, const sp_engine *e, sp_error **err)
{
    return sp_remote_create_seeded(sb, o, e, NULL, NULL, err);
}

/* With seed_fn, the workspace is what it makes (a fork's), not the mounts. */
int sp_remote_create_seeded(sp_sandbox *sb, const sp_sandbox_opts *o, const sp_engine *e,
                            sp_sandbox_seed_fn seed_fn, void *seed_data, sp_error **err)
{
    sb->engine = sp_xstrdup(e->name);
    sb->engine_kind = e->kind;
    sb->rops = ops_for(e->kind);
    if (!sb->rops)
        return sp_err_set(err, SP_EINVAL, 0, "engine %s: kind %s runs no sandboxes here", e->name,
                          sp_engine_kind_name(e->kind));
    sp_sandbox_opts ro = *o;
    ro.setup = NULL;  /* run below, as commands */
    ro.mounts = NULL; /* streamed below, into the peer */
    ro.n_mounts = 0;
    cleanup_free char *owner = sp_remote_owner(sb->state_root);
    sp_remote_spec c = {.engine = e, .name = sb->name, .owner = owner, .opts = &ro};
    int r = sb->rops->create(&sb->remote, &sb->remote_record, &c, err);
    if (r < 0)
        return r;
    /* What local code would take for a workspace on this host: nothing. */
    free(sb->workspace);
    sb->workspace = NULL;
    if (seed_fn ? (r = seed_fn(sb, seed_data, err)) < 0 : o->n_mounts && (r = seed(sb, o, err)) < 0)
        return r;
    for (size_t i = 0; o->setup && o->setup[i]; i++) {
        sp_run_result *res = NULL;
        sp_run_opts so = SP_RUN_OPTS_INIT;
        so.timeout_ms = o->setup_timeout_ms;
        if ((r = sp_sandbox_shell(&res, sb, o->setup[i], &so, err)) < 0)
            return sp_err_wrap(err, r, "setup command %zu", i + 1);
        int code = res->exit_code;
        if (code != 0) {
            int n = (int)(res->err_len > 400 ? 400 : res->err_len);
            r = sp_err_set(err, SP_EINVAL, 0, "setup command %zu (%s) exited with %d%s%.*s", i + 1,
                           o->setup[i], code, n ? ": " : "", n, res->err ? res->err : "");
            sp_run_result_free(res);
            return r;
        }
        sp_run_result_free(res);
    }
    /* The baseline, as a local create takes it: the prepared workspace. */
    char *out = NULL;
    r = sp_sandbox_rpc(sb, "tools/call", "{\"name\":\"snapshot\",\"arguments\":{\"tag\":\"base\"}}",
                       &out, err);
    if (r == 0 && (!out || !strstr(out, "\"isError\":false")))
        r = sp_err_set(err, SP_ERROR, 0, "the baseline snapshot of sandbox %s failed: %.300s",
                       sb->name, out ? out : "");
    free(out);
    return r;
}

/* A tar a thread writes into a pipe, streamed into the peer's import (all
 * or nothing there). The writer's error wins over the import's (a cut
 * archive is what the import saw of it). SIGPIPE is blocked in the
 * writer's thread: a write after the import gave up fails with EPIPE
 * rather than killing a process that did not ignore the signal. */
typedef struct piped_import {
    int fd;
    sp_remote_tar_writer write;
    void *data;
    sp_error *err;
    int rc;
} piped_import;

static void *piped_writer(void *arg)
{
    piped_import *j = arg;
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
    j->rc = j->write(j->fd, j->data, &j->err);
    close(j->fd); /* the end of the archive, or a cut the import refuses */
    /* A SIGPIPE our writes raised stays pending on this thread: take it. */
    struct timespec zero = {0, 0};
    while (sigtimedwait(&pipe_set, NULL, &zero) == SIGPIPE)
        ;
    return NULL;
}

int sp_remote_import_piped(sp_sandbox *sb, const char *tag, bool restore,
                           sp_remote_tar_writer write, void *data, sp_error **err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return sp_err_errno(err, errno, "pipe", NULL);
    piped_import j = {.fd = p[1], .write = write, .data = data};
    pthread_t th;
    if (pthread_create(&th, NULL, piped_writer, &j) != 0) {
        close(p[0]);
        close(p[1]);
        return sp_err_set(err, SP_ERROR, 0, "could not start the archive's writer thread");
    }
    char *res = NULL;
    sp_error *ie = NULL;
    int r = sp_remote_import(sb, p[0], tag, restore, &res, &ie);
    close(p[0]); /* a writer still going gets EPIPE and stops */
    pthread_join(th, NULL);
    free(res);
    if (j.rc < 0) {
        sp_error_free(ie);
        if (err)
            *err = j.err;
        else
            sp_error_free(j.err);
        return j.rc;
    }
    sp_error_free(j.err);
    if (r < 0) {
        if (err)
            *err = ie;
        else
            sp_error_free(ie);
    }
    return r;
}

/* Hydrate the mounts here, written as a snapshot archive. */
struct seed_src {
    const sp_sandbox_opts *o;
    const char *state_root;
    sp_hydrate_result *hr; /* read after the writer thread is joined */
};

static int seed_write(int fd, void *data, sp_error **err)
{
    struct seed_src *s = data;
    sp_hydrate_opts ho = SP_HYDRATE_OPTS_INIT;
    ho.allowed_roots = s->o->allowed_roots;
    ho.progress = s->o->progress;
    ho.progress_userdata = s->o->progress_userdata;
    return sp_seed_tar(&s->hr, fd, s->o->mounts, s->o->n_mounts, &ho, s->state_root, err);
}

static int seed(sp_sandbox *sb, const sp_sandbox_opts *o, sp_error **err)
{
    struct seed_src src = {o, sb->state_root, NULL};
    /* Tagged: what the mounts brought, before any setup command. */
    int r = sp_remote_import_piped(sb, "hydrated", true, seed_write, &src, err);
    if (r < 0) {
        sp_hydrate_result_free(src.hr);
        return sp_err_wrap(err, r, "seeding the workspace of sandbox %s", sb->name);
    }
    /* The hydration ran here: its result (what was left out) is ours. */
    sp_sandbox_record_mounts(&sb->cfg, o->mounts, o->n_mounts, src.hr);
    sp_hydrate_result_free(src.hr);
    for (size_t i = 0; i < sb->cfg.n_mounts; i++) {
        char *abs = realpath(sb->cfg.mounts[i].host_path, NULL);
        if (abs) {
            free((char *)sb->cfg.mounts[i].host_path);
            sb->cfg.mounts[i].host_path = abs;
        }
    }
    return 0;
}

/* What create leaves when it fails after the workload was made. */
void sp_remote_discard(sp_sandbox *sb)
{
    if (sb->remote)
        sb->rops->remove(sb->remote, NULL);
}

void sp_remote_free(sp_sandbox *sb)
{
    if (sb->remote)
        sb->rops->free(sb->remote);
    sb->remote = NULL;
    cJSON_Delete(sb->remote_record);
    sb->remote_record = NULL;
    free(sb->engine);
    sb->engine = NULL;
}

/* sandbox.json's engine keys, written and read. */
void sp_remote_config_json(const sp_sandbox *sb, cJSON *o)
{
    if (!sp_sandbox_is_remote(sb))
        return;
    cJSON_AddStringToObject(o, "engine", sb->engine);
    cJSON_AddStringToObject(o, "engine_kind", sp_engine_kind_name(sb->engine_kind));
    if (sb->remote_record)
        cJSON_AddItemToObject(o, "remote", cJSON_Duplicate(sb->remote_record, true));
}

int sp_remote_config_load(sp_sandbox *sb, const cJSON *o, const char *path, sp_error **err)
{
    const char *kind = sp_json_str(o, "engine_kind");
    if (!kind)
        return 0; /* made on the local engine */
    if (sp_engine_kind_parse(&sb->engine_kind, kind, NULL) < 0 ||
        !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "remote")) || !sp_json_str(o, "engine"))
        return sp_err_set(err, SP_EINVAL, 0,
                          "%s names engine kind %s without its record; the sandbox state is "
                          "damaged",
                          path, kind);
    sb->engine = sp_xstrdup(sp_json_str(o, "engine"));
    sb->remote_record = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(o, "remote"), true);
    sb->rops = ops_for(sb->engine_kind);
    free(sb->workspace);
    sb->workspace = NULL;
    return 0;
}

/* ------------------------------------------------------------ the peer -- */

int sp_sandbox_rpc_keyed(sp_sandbox *sb, const char *method, const char *params, const char *key,
                         char **result, sp_error **err)
{
    *result = NULL;
    if (!sp_sandbox_is_remote(sb))
        return sp_err_set(err, SP_EINVAL, 0,
                          "sandbox %s is local: its tools run in this process (sp_tools)",
                          sb ? sb->name : "(none)");
    if (!method || !*method)
        return sp_err_set(err, SP_EINVAL, 0, "no method given");
    sp_remote *r = handle(sb, err);
    if (!r)
        return SP_ERROR;
    return sb->rops->rpc(r, method, params, key, result, err);
}

int sp_sandbox_rpc(sp_sandbox *sb, const char *method, const char *params, char **result,
                   sp_error **err)
{
    return sp_sandbox_rpc_keyed(sb, method, params, NULL, result, err);
}

void sp_sandbox_rpc_cancel_key(sp_sandbox *sb, const char *key)
{
    if (sb && sb->remote && key)
        sb->rops->cancel(sb->remote, key);
}

void sp_sandbox_rpc_cancel(sp_sandbox *sb)
{
    if (sb && sb->remote)
        sb->rops->cancel(sb->remote, NULL);
}

/* ------------------------------------------------------------ commands -- */

typedef struct collect {
    sp_capbuf out, err;
} collect;

static void collect_out(void *ud, int stream, const void *data, size_t len)
{
    collect *c = ud;
    sp_capbuf_feed(stream == 2 ? &c->err : &c->out, data, len);
}

/* The wrapper that gives a command its folder and environment, as the
 * local REST path does, with the shell every image has; a batch command
 * then runs in a process group of its own, killed when it times out or
 * ends (SP_GROUP_WRAPPER): a pods/exec stream that closes kills nothing. */
#define REMOTE_PREFIX                                                                              \
    "cd -- \"$1\" || exit 125; shift; "                                                            \
    "while [ \"$1\" != -- ]; do export \"$1\"; shift; done; shift; "
#define REMOTE_WRAPPER       REMOTE_PREFIX "exec \"$@\""
#define REMOTE_GROUP_WRAPPER REMOTE_PREFIX SP_GROUP_WRAPPER

/* argv wrapped so that it runs in workdir with the sandbox's environment
 * plus extra (with token, in a process group of its own); SP_EINVAL for
 * another user than the sandbox's. */
static int wrap(sp_strv *w, sp_sandbox *sb, const char *const *argv, const char *workdir,
                const char *const *extra, const char *user, const char *token, sp_error **err)
{
    if (user && strcmp(user, sb->cfg.user) != 0)
        return sp_err_set(err, SP_EINVAL, 0,
                          "sandbox %s runs on engine %s: commands run as its user %s only",
                          sb->name, sp_sandbox_engine(sb), sb->cfg.user);
    sp_strv_push(w, sp_xstrdup("/bin/sh"));
    sp_strv_push(w, sp_xstrdup("-c"));
    sp_strv_push(w, sp_xstrdup(token ? REMOTE_GROUP_WRAPPER : REMOTE_WRAPPER));
    sp_strv_push(w, sp_xstrdup("sandpod"));
    sp_strv_push(w, sp_xstrdup(workdir ? workdir : sb->cfg.workdir));
    char **env = sp_sandbox_command_env(sb, extra);
    for (size_t i = 0; env[i]; i++)
        sp_strv_push(w, sp_xstrdup(env[i]));
    sp_strv_free(env);
    sp_strv_push(w, sp_xstrdup("--"));
    if (token)
        sp_strv_push(w, sp_xstrdup(token));
    for (size_t i = 0; argv[i]; i++)
        sp_strv_push(w, sp_xstrdup(argv[i]));
    return 0;
}

int sp_remote_stream_open(sp_remote_stream **out, sp_sandbox *sb, const char *const *argv,
                          const char *workdir, const char *const *env, const char *user, bool tty,
                          unsigned rows, unsigned cols, bool stdin_open, sp_error **err)
{
    *out = NULL;
    sp_remote *r = handle(sb, err);
    if (!r)
        return SP_ERROR;
    sp_strv w = {0};
    int rc = wrap(&w, sb, argv, workdir, env, user, NULL, err);
    sp_remote_cmd x = {.argv = (const char *const *)w.v,
                       .stdin_fd = stdin_open ? 0 : -1,
                       .out_fd = -1,
                       .tty = tty,
                       .rows = rows,
                       .cols = cols};
    if (rc == 0)
        rc = sb->rops->stream_open(out, r, &x, err);
    sp_strv_dispose(&w);
    return rc;
}

static void discard(void *ud, int stream, const void *data, size_t len)
{
    (void)ud, (void)stream, (void)data, (void)len;
}

/* A timed-out command's whole group, killed from a second exec: closing
 * the first one's stream ends nothing in the workload. Best effort. */
static void kill_group(sp_sandbox *sb, sp_remote *r, const char *token)
{
    cleanup_free char *script = sp_group_kill_script(token);
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    sp_remote_cmd x = {
        .argv = argv, .stdin_fd = -1, .out_fd = -1, .timeout_ms = 10000, .out = discard};
    int code = 0;
    bool timed_out = false;
    sb->rops->exec(r, &x, &code, &timed_out, NULL);
}

int sp_remote_exec(sp_run_result **out, sp_sandbox *sb, const char *const *argv,
                   const sp_run_opts *o, sp_error **err)
{
    *out = NULL;
    sp_remote *r = handle(sb, err);
    if (!r)
        return SP_ERROR;
    sp_strv w = {0};
    cleanup_free char *token = sp_cmd_token();
    int wr = wrap(&w, sb, argv, o->workdir, o->env, o->user, token, err);
    if (wr < 0) {
        sp_strv_dispose(&w);
        return wr;
    }
    collect c;
    sp_capbuf_init(&c.out, o->max_bytes, o->max_lines);
    sp_capbuf_init(&c.err, o->max_bytes, o->max_lines);
    sp_remote_cmd x = {.argv = (const char *const *)w.v,
                       .stdin_fd = -1,
                       .out_fd = -1,
                       .stdin_data = o->stdin_data,
                       .stdin_len = o->stdin_len,
                       .timeout_ms = o->timeout_ms,
                       .out = collect_out,
                       .ud = &c};
    int64_t start = sp_now_ms();
    int code = -1;
    bool timed_out = false;
    int rc = sb->rops->exec(r, &x, &code, &timed_out, err);
    if (rc == 0 && timed_out)
        kill_group(sb, r, token);
    if (rc == 0) {
        sp_run_result *res = sp_xcalloc(1, sizeof(*res));
        res->exit_code = timed_out ? 128 + SIGKILL : code;
        res->timed_out = timed_out;
        res->out_total = c.out.total_bytes;
        res->err_total = c.err.total_bytes;
        res->out = sp_capbuf_text(&c.out, &res->out_len, &res->out_truncated);
        res->err = sp_capbuf_text(&c.err, &res->err_len, &res->err_truncated);
        res->duration_ms = sp_now_ms() - start;
        *out = res;
    }
    sp_capbuf_dispose(&c.out);
    sp_capbuf_dispose(&c.err);
    sp_strv_dispose(&w);
    return rc;
}

/* ------------------------------------------------------ state, remove -- */

int sp_remote_status(sp_sandbox_status **out, sp_sandbox *sb, sp_error **err)
{
    *out = NULL;
    sp_remote *r = handle(sb, err);
    if (!r)
        return SP_ERROR;
    char *state = NULL;
    int rc = sb->rops->state(r, &state, NULL, err);
    if (rc < 0)
        return rc;
    sp_sandbox_status *st = sp_xcalloc(1, sizeof(*st));
    st->state = state;
    st->running = strcmp(state, "running") == 0;
    st->exit_code = -1;
    st->container = sp_xstrdup(sb->rops->where(r));
    st->host_uid = st->host_gid = -1;
    *out = st;
    return 0;
}

int sp_remote_remove(sp_sandbox *sb, sp_error **err)
{
    sp_remote *r = handle(sb, err);
    if (!r)
        return SP_ERROR;
    return sb->rops->remove(r, err);
}

int sp_sandbox_peer_command(sp_sandbox *sb, const char *const *args, int out_fd, int err_fd,
                            int *exit_code, sp_error **err)
{
    return sp_sandbox_peer_command_in(sb, args, -1, out_fd, err_fd, exit_code, err);
}

int sp_sandbox_peer_command_in(sp_sandbox *sb, const char *const *args, int in_fd, int out_fd,
                               int err_fd, int *exit_code, sp_error **err)
{
    *exit_code = -1;
    if (!sp_sandbox_is_remote(sb))
        return sp_err_set(err, SP_EINVAL, 0, "sandbox %s is local: it has no peer", sb->name);
    if (!args || !args[0])
        return sp_err_set(err, SP_EINVAL, 0, "no sandpod command given");
    sp_remote *r = handle(sb, err);
    if (!r)
        return SP_ERROR;
    if (in_fd < 0)
        return sb->rops->peer_command(r, args, out_fd, err_fd, exit_code, err);
    if (!sb->rops->peer_command_in)
        return sp_err_set(err, SP_EINVAL, 0, "engine %s cannot give a peer command its input",
                          sb->rops->kind);
    return sb->rops->peer_command_in(r, args, in_fd, out_fd, err_fd, exit_code, err);
}

int sp_remote_logs(sp_sandbox *sb, const sp_logs_opts *o, sp_logs_fn fn, void *ud, sp_error **err)
{
    sp_remote *r = handle(sb, err);
    if (!r)
        return SP_ERROR;
    if (!sb->rops->logs)
        return sp_sandbox_not_local(sb, "logs", err);
    int rc = sb->rops->logs(r, o, fn, ud, err);
    if (rc == SP_ENOTFOUND)
        return sp_err_wrap(err, rc, "sandbox %s: its workload is gone (%s)", sb->name,
                           sb->rops->where(r));
    return rc;
}

int sp_remote_import(sp_sandbox *sb, int fd, const char *tag, bool restore, char **result,
                     sp_error **err)
{
    sp_remote *r = handle(sb, err);
    if (!r)
        return SP_ERROR;
    return sb->rops->import_tar(r, fd, tag, restore, result, err);
}

int sp_remote_export(sp_sandbox *sb, const char *ref, bool gzip, int fd, sp_error **err)
{
    sp_remote *r = handle(sb, err);
    if (!r)
        return SP_ERROR;
    return sb->rops->export_tar(r, ref, gzip, fd, err);
}

int sp_remote_export_now(sp_sandbox *sb, int fd, sp_error **err)
{
    sp_remote *r = handle(sb, err);
    if (!r)
        return SP_ERROR;
    return sb->rops->export_now(r, fd, err);
}

/* ----------------------------------------------------------------- gc -- */

int sp_sandbox_gc_engine(sp_sandbox_orphans **out, const char *state_root, const char *engine,
                         bool dry_run, sp_error **err)
{
    *out = NULL;
    cleanup_free char *root = NULL;
    int r = sp_sandbox_resolve_root(&root, state_root, err);
    if (r < 0)
        return r;
    sp_engine *e = NULL;
    if ((r = sp_engine_get(&e, root, engine, err)) < 0)
        return r;
    const sp_remote_ops *ops = ops_for(e->kind);
    if (!ops) {
        r = sp_err_set(err, SP_EINVAL, 0,
                       "engine %s is local Podman: its containers are collected by plain gc",
                       e->name);
        sp_engine_free(e);
        return r;
    }
    cleanup_free char *owner = sp_remote_owner(root);
    cJSON *list = NULL;
    if ((r = ops->list(&list, e, owner, err)) < 0) {
        sp_engine_free(e);
        return r;
    }
    sp_sandbox_orphans *o = sp_xcalloc(1, sizeof(*o));
    size_t cap = (size_t)cJSON_GetArraySize(list);
    o->items = cap ? sp_xcalloc(cap, sizeof(*o->items)) : NULL;
    const cJSON *it;
    cJSON_ArrayForEach(it, list)
    {
        const char *name = sp_json_str_or(it, "name", "");
        const char *id = sp_json_str_or(it, "id", "");
        if (strcmp(sp_json_str_or(it, "state", ""), "removing") == 0)
            continue;
        char *why = NULL;
        cleanup_free char *dir = sp_xasprintf("%s/sandboxes/%s", root, name);
        cleanup_free char *js = sp_xasprintf("%s/sandbox.json", dir);
        if (!*name || !sp_sandbox_name_valid(name) || access(dir, F_OK) != 0) {
            why = sp_xasprintf("no sandbox named %s", *name ? name : "(none)");
        } else if (access(js, F_OK) != 0) {
            continue; /* being created: its create owns it */
        } else {
            sp_sandbox *sb = NULL;
            sp_sandbox_opts so = SP_SANDBOX_OPTS_INIT;
            so.state_root = root;
            if (sp_sandbox_open(&sb, name, &so, NULL) == 0) {
                const char *pod = sp_json_str(sb->remote_record, "pod");
                if (!sp_sandbox_is_remote(sb) || !sb->engine || strcmp(sb->engine, e->name) != 0 ||
                    !pod || strcmp(pod, id) != 0)
                    why = sp_xasprintf("sandbox %s owns another workload", name);
            }
            sp_sandbox_free(sb);
        }
        if (!why)
            continue;
        sp_sandbox_orphan *x = &o->items[o->n++];
        x->kind = SP_ORPHAN_POD;
        x->container = sp_xstrdup(id);
        x->state_dir = sp_xstrdup(dir);
        x->reason = why;
        if (!dry_run) {
            sp_error *re = NULL;
            if (ops->remove_id(e, id, &re) == 0 || (re && re->code == SP_ENOTFOUND))
                x->removed = true;
            else
                x->error = sp_xstrdup(re && re->message ? re->message : "failed");
            sp_error_free(re);
        }
    }
    cJSON_Delete(list);
    sp_engine_free(e);
    *out = o;
    return 0;
}
