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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egress_dir.h"
#include "procgroup.h"
#include "remote.h"
#include "remote_kind.h"
#include "sandbox_internal.h"
#include "seed.h"
#include "json.h"
#include "sha1.h"

const sp_remote_ops *sp_remote_ops_for(sp_engine_kind kind)
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

int sp_remote_refuse(const sp_sandbox *sb, const char *what, sp_error **err)
{
    return sp_err_reason(
        err, SP_R_ELSEWHERE,
        sp_err_set(err, SP_EINVAL, 0,
                   "sandbox %s runs on engine %s (%s)%s%s: %s needs a local sandbox; "
                   "use its tools (sandpod call, sandpod mcp) or sandpod exec",
                   sb->name, sp_sandbox_engine(sb), sp_engine_kind_name(sb->engine_kind),
                   sb->remote ? ", " : "", sb->remote ? sb->rops->where(sb->remote) : "", what));
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
    sb->rops = sp_remote_ops_for(e->kind);
    r = sb->rops->open(&sb->remote, e, sb->remote_record, err);
    sp_engine_free(e);
    return r < 0 ? NULL : sb->remote;
}

/* ------------------------------------------------------------- egress -- */

/* The hosts file given at create, read whole, and kept in the state folder
 * as a local sandbox keeps it (forks and templates take it from there). */
static int egress_hosts_keep(sp_buf *text, sp_sandbox *sb, const char *path, sp_error **err)
{
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || sp_read_all(fd, text, 1u << 20) < 0)
        return sp_err_errno(err, errno, "read the egress hosts file", path);
    cleanup_free char *dir = sp_xasprintf("%s/egress", sb->state_dir);
    cleanup_free char *keep = sp_xasprintf("%s/hosts", dir);
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return sp_err_errno(err, errno, "mkdir", dir);
    return sp_write_file_atomic(keep, text->data ? text->data : "", text->len, 0644, err);
}

static int secrets_set(sp_sandbox *sb, const sp_egress_secrets *values, sp_error **err)
{
    (void)values;
    return sp_remote_refuse(sb, "brokered secrets", err);
}

static int egress_set(sp_sandbox *sb, sp_error **err)
{
    sp_remote *r = handle(sb, err);
    if (!r)
        return SP_ERROR;
    cleanup_free char *policy = sp_egress_policy_text(sb->cfg.egress);
    int rc = sb->rops->egress_set(r, policy, err);
    return rc < 0 ? sp_err_wrap(err, rc, "sandbox %s", sb->name) : 0;
}

/* The log, fetched whole into an anonymous file: read it to its end
 * (`sandpod network --log --follow` fetches again for what came since). */
static int egress_log(int *fd, sp_sandbox *sb, sp_error **err)
{
    *fd = -1;
    sp_remote *r = handle(sb, err);
    if (!r)
        return SP_ERROR;
    int f = memfd_create("sandpod-egress-log", MFD_CLOEXEC);
    if (f < 0)
        return sp_err_errno(err, errno, "memfd_create", NULL);
    int rc = sb->rops->egress_log(r, f, err);
    if (rc < 0 || lseek(f, 0, SEEK_SET) < 0) {
        close(f);
        return rc < 0 ? sp_err_wrap(err, rc, "sandbox %s", sb->name)
                      : sp_err_errno(err, errno, "lseek", NULL);
    }
    *fd = f;
    return 0;
}

/* ------------------------------------------------------------- create -- */

static int seed(sp_sandbox *sb, const sp_sandbox_opts *o, sp_error **err);

/* With seed_fn, the workspace is what it makes (a fork's), not the mounts. */
static int create(sp_sandbox *sb, const sp_sandbox_opts *o, const sp_engine *e,
                  sp_sandbox_seed_fn seed_fn, void *seed_data, sp_error **err)
{
    sb->engine = sp_xstrdup(e->name);
    sb->engine_kind = e->kind;
    sb->rops = sp_remote_ops_for(e->kind);
    if (!sb->rops)
        return sp_err_set(err, SP_EINVAL, 0, "engine %s: kind %s runs no sandboxes here", e->name,
                          sp_engine_kind_name(e->kind));
    if (sb->cfg.secrets.n)
        return sp_err_set(err, SP_EINVAL, 0,
                          "engine %s: brokered secrets (--secret) are not built for the %s "
                          "engine yet; a local sandbox has them",
                          e->name, sp_engine_kind_name(e->kind));
    sp_sandbox_opts ro = *o;
    ro.setup = NULL;  /* run below, as commands */
    ro.mounts = NULL; /* streamed below, into the peer */
    ro.n_mounts = 0;
    /* A bad mount fails here, before a Pod is made for it. */
    int r = 0;
    if (!seed_fn && o->n_mounts) {
        sp_hydrate_opts ho = SP_HYDRATE_OPTS_INIT;
        ho.allowed_roots = o->allowed_roots;
        if ((r = sp_hydrate_check(o->mounts, o->n_mounts, &ho, err)) < 0)
            return sp_err_wrap(err, r, "seeding the workspace of sandbox %s", sb->name);
    }
    cleanup_free char *owner = sp_remote_owner(sb->state_root);
    sp_remote_spec c = {.engine = e, .name = sb->name, .owner = owner, .opts = &ro};
    /* Egress rules: the proxy starts with the policy setup may use (wider
     * with --setup-allow), narrowed once setup is done. */
    bool widen = sb->cfg.egress && o->setup && o->setup[0] && o->setup_allow && o->setup_allow[0];
    cleanup_free char *policy = NULL;
    sp_buf hosts = SP_BUF_INIT;
    if (sb->cfg.egress) {
        sp_strv wide = {0};
        for (char **l = sb->cfg.egress; *l; l++)
            sp_strv_push(&wide, sp_xstrdup(*l));
        for (size_t i = 0; widen && o->setup_allow[i]; i++)
            sp_strv_push(&wide, sp_xasprintf("allow %s", o->setup_allow[i]));
        policy = sp_egress_policy_text(wide.v);
        sp_strv_dispose(&wide);
        if (o->egress_hosts && (r = egress_hosts_keep(&hosts, sb, o->egress_hosts, err)) < 0)
            return r;
        c.egress_policy = policy;
        c.egress_hosts = o->egress_hosts ? (hosts.data ? hosts.data : "") : NULL;
    }
    r = sb->rops->create(&sb->remote, &sb->remote_record, &c, err);
    sp_buf_dispose(&hosts);
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
    if (widen && (r = egress_set(sb, err)) < 0)
        return sp_err_wrap(err, r, "narrowing the egress policy after setup");
    /* The baseline, as a local create takes it: the prepared workspace. */
    char *out = NULL;
    r = sp_remote_rpc(sb, "tools/call", "{\"name\":\"snapshot\",\"arguments\":{\"tag\":\"base\"}}",
                      NULL, &out, err);
    if (r == 0 && (!out || !strstr(out, "\"isError\":false")))
        r = sp_err_set(err, SP_ERROR, 0, "the baseline snapshot of sandbox %s failed: %.300s",
                       sb->name, out ? out : "");
    free(out);
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
    int r = sp_sandbox_import_from(NULL, sb, "hydrated", true, seed_write, &src, err);
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
static void discard(sp_sandbox *sb)
{
    if (sb->remote)
        sb->rops->remove(sb->remote, NULL);
}

static void release(sp_sandbox *sb)
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
static void save(const sp_sandbox *sb, cJSON *o)
{
    cJSON_AddStringToObject(o, "engine", sb->engine);
    cJSON_AddStringToObject(o, "engine_kind", sp_engine_kind_name(sb->engine_kind));
    if (sb->remote_record)
        cJSON_AddItemToObject(o, "remote", cJSON_Duplicate(sb->remote_record, true));
}

static int load(sp_sandbox *sb, const cJSON *o, const char *path, sp_error **err)
{
    const char *kind = sp_json_str_or(o, "engine_kind", "");
    if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "remote")) || !sp_json_str(o, "engine"))
        return sp_err_set(err, SP_EINVAL, 0,
                          "%s names engine kind %s without its record; the sandbox state is "
                          "damaged",
                          path, kind);
    sb->engine = sp_xstrdup(sp_json_str(o, "engine"));
    sb->remote_record = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(o, "remote"), true);
    sb->rops = sp_remote_ops_for(sb->engine_kind);
    sb->lops = NULL; /* never the local engine's */
    free(sb->workspace);
    sb->workspace = NULL;
    return 0;
}

/* ------------------------------------------------------------ the peer -- */

int sp_remote_rpc(sp_sandbox *sb, const char *method, const char *params, const char *key,
                  char **result, sp_error **err)
{
    sp_remote *r = handle(sb, err);
    if (!r)
        return SP_ERROR;
    return sb->rops->rpc(r, method, params, key, result, err);
}

static void rpc_cancel(sp_sandbox *sb, const char *key)
{
    if (sb->remote)
        sb->rops->cancel(sb->remote, key);
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

static int attach(sp_attach **out, sp_sandbox *sb, const char *const *argv, const sp_attach_opts *o,
                  sp_error **err)
{
    sp_remote *r = handle(sb, err);
    if (!r)
        return SP_ERROR;
    sp_strv w = {0};
    int rc = wrap(&w, sb, argv, o->workdir, o->env, o->user, NULL, err);
    sp_remote_cmd x = {.argv = (const char *const *)w.v,
                       .stdin_fd = o->stdin_open ? 0 : -1,
                       .out_fd = -1,
                       .tty = o->tty,
                       .rows = o->rows,
                       .cols = o->cols};
    sp_stream rs = {0};
    if (rc == 0)
        rc = sb->rops->stream_open(&rs, r, &x, err);
    sp_strv_dispose(&w);
    if (rc == 0)
        *out = sp_attach_new(sb, rs, o->tty);
    return rc;
}

static void drop(void *ud, int stream, const void *data, size_t len)
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
        .argv = argv, .stdin_fd = -1, .out_fd = -1, .timeout_ms = 10000, .out = drop};
    int code = 0;
    bool timed_out = false;
    sb->rops->exec(r, &x, &code, &timed_out, NULL);
}

static int exec(sp_run_result **out, sp_sandbox *sb, const char *const *argv, const sp_run_opts *o,
                sp_error **err)
{
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

static int status(sp_sandbox_status **out, sp_sandbox *sb, sp_error **err)
{
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

/* Nothing to do while the Pod runs: a Pod is not started again. */
static int start(sp_sandbox *sb, sp_error **err)
{
    sp_sandbox_status *st = NULL;
    int r = status(&st, sb, err);
    if (r < 0)
        return r;
    if (!st->running)
        r = sp_err_set(err, SP_EPODMAN, 0,
                       "sandbox %s runs on engine %s and its Pod is %s: a Pod is not started "
                       "again; `sandpod rm --force %s` and create it anew",
                       sb->name, sp_sandbox_engine(sb), st->state ? st->state : "unknown",
                       sb->name);
    sp_sandbox_status_free(st);
    return r;
}

/* A Pod has no stopped or paused state: what stop, pause and restart
 * would do to its workload, said in one line. */
static int no_such_state(sp_sandbox *sb, const char *op, sp_error **err)
{
    return sp_err_set(err, SP_EINVAL, 0,
                      "sandbox %s runs on engine %s: its Pod cannot %s (a Pod has no stopped or "
                      "paused state); keep its work with `sandpod template save %s TEMPLATE` or "
                      "`sandpod export`, then `sandpod rm --force %s`",
                      sb->name, sp_sandbox_engine(sb), op, sb->name, sb->name);
}

static int stop(sp_sandbox *sb, int timeout_s, sp_error **err)
{
    (void)timeout_s;
    return no_such_state(sb, "stop", err);
}

static int restart(sp_sandbox *sb, sp_error **err)
{
    return no_such_state(sb, "restart", err);
}

static int pause_(sp_sandbox *sb, sp_error **err)
{
    return no_such_state(sb, "pause", err);
}

static int unpause(sp_sandbox *sb, sp_error **err)
{
    return no_such_state(sb, "unpause", err);
}

static bool pauses(sp_sandbox *sb)
{
    (void)sb;
    return false; /* a Pod has no freezer to ask */
}

static bool stops(const sp_sandbox *sb)
{
    (void)sb;
    return false;
}

static int remove_(sp_sandbox *sb, bool keep_workspace, sp_error **err)
{
    if (keep_workspace)
        return sp_remote_refuse(sb, "keeping the workspace", err);
    sp_remote *r = handle(sb, err);
    if (!r)
        return SP_ERROR;
    return sb->rops->remove(r, err);
}

static sp_fs *fs(sp_sandbox *sb, sp_error **err)
{
    sp_remote_refuse(sb, "a filesystem handle on the workspace", err);
    return NULL;
}

static sp_exec_path exec_path(char **why, const sp_sandbox *sb)
{
    *why = sp_xasprintf("sandbox on engine %s: commands go through that engine",
                        sp_sandbox_engine(sb));
    return SP_EXEC_REST;
}

int sp_remote_peer_command(sp_sandbox *sb, const char *const *args, int in_fd, int out_fd,
                           int err_fd, int *exit_code, sp_error **err)
{
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

static int logs(sp_sandbox *sb, const sp_logs_opts *o, sp_logs_fn fn, void *ud, sp_error **err)
{
    sp_remote *r = handle(sb, err);
    if (!r)
        return SP_ERROR;
    if (!sb->rops->logs)
        return sp_remote_refuse(sb, "logs", err);
    /* The engine's log is one stream: its lines have no stream to tell. */
    if (o->streams_apart)
        return sp_err_set(err, SP_EINVAL, 0,
                          "the log of sandbox %s (engine %s) merges stdout and stderr: it has "
                          "no streams to tell apart",
                          sb->name, sp_sandbox_engine(sb));
    int rc = sb->rops->logs(r, o, fn, ud, err);
    if (rc == SP_ENOTFOUND)
        return sp_err_wrap(err, rc, "sandbox %s: its workload is gone (%s)", sb->name,
                           sb->rops->where(r));
    return rc;
}

/* ---------------------------------------------------------- snapshots -- */

static int snap_open(sp_sandbox_snap **out, sp_sandbox *sb, const sp_sandbox_snapshot_opts *o,
                     sp_error **err)
{
    (void)out, (void)o;
    return sp_remote_refuse(sb, "its snapshot store on this host", err);
}

static int snap_export(sp_sandbox *sb, const char *ref, sp_snapshot_format format, int fd,
                       sp_error **err)
{
    sp_remote *r = handle(sb, err);
    if (!r)
        return SP_ERROR;
    return ref ? sb->rops->export_tar(r, ref, format == SP_SNAPSHOT_TAR_GZ, fd, err)
               : sb->rops->export_now(r, fd, err);
}

static int snap_import(char **id, sp_sandbox *sb, int fd, const char *tag, bool restore,
                       sp_error **err)
{
    sp_remote *r = handle(sb, err);
    if (!r)
        return SP_ERROR;
    char *res = NULL;
    int rc = sb->rops->import_tar(r, fd, tag, restore, &res, err);
    if (rc == 0 && id) {
        cJSON *o = sp_json_parse(res, strlen(res));
        const char *s = sp_json_str(o, "id");
        *id = s ? sp_xstrdup(s) : NULL;
        cJSON_Delete(o);
        if (!*id)
            rc = sp_err_set(err, SP_ERROR, 0, "the peer's import said no id: %.200s", res);
    }
    free(res);
    return rc;
}

static sp_snapstore *store(sp_sandbox *sb, bool create_it, sp_error **err)
{
    (void)create_it;
    sp_remote_refuse(sb, "its snapshot store on this host", err);
    return NULL;
}

static int image_pin(char **out, sp_sandbox *sb, sp_error **err)
{
    (void)sb, (void)err;
    *out = sp_xstrdup(""); /* the engine pulls its own; none kept */
    return 0;
}

const sp_kind sp_kind_remote = {
    .name = "remote",
    .load = load,
    .save = save,
    .release = release,
    .create = create,
    .discard = discard,
    .remove = remove_,
    .status = status,
    .start = start,
    .stop = stop,
    .restart = restart,
    .pause = pause_,
    .unpause = unpause,
    .pauses = pauses,
    .stops = stops,
    .logs = logs,
    .fs = fs,
    .exec_path = exec_path,
    .exec = exec,
    .attach = attach,
    .session_start = sp_remote_session_start,
    .session_write = sp_remote_session_write,
    .session_signal = sp_remote_session_signal,
    .session_resize = sp_remote_session_resize,
    .session_kill = sp_remote_session_kill,
    .session_list = sp_remote_session_list,
    .sessions_close = sp_remote_sessions_close,
    .snap_open = snap_open,
    .snap_create = sp_remote_snap_create,
    .snap_list = sp_remote_snap_list,
    .snap_get = sp_remote_snap_get,
    .snap_restore = sp_remote_snap_restore,
    .snap_delete = sp_remote_snap_delete,
    .snap_diff = sp_remote_snap_diff,
    .snap_export = snap_export,
    .snap_import = snap_import,
    .store = store,
    .image_pin = image_pin,
    .rpc = sp_remote_rpc,
    .rpc_cancel = rpc_cancel,
    .egress_set = egress_set,
    .egress_log = egress_log,
    .secrets_set = secrets_set,
    .peer_command = sp_remote_peer_command,
};
