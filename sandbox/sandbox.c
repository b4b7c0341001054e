/* The sandbox object: its state folder, sandbox.json, its lock, and the
 * public calls that hand over to its kind (kind.h). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "agent/protocol.h"
#include "dir.h"
#include "json.h"
#include "local_kind.h"
#include "sandbox_internal.h"
#include "sandpod/apply.h"
#include "fdtree.h"

#define SANDBOX_JSON_VERSION 1

/* ------------------------------------------------------------- naming -- */

/* mkdir -p for a host path we own (the state root): private. */
int sp_mkdirs(const char *path, sp_error **err)
{
    cleanup_free char *p = sp_xstrdup(path);
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0700) < 0 && errno != EEXIST)
                return sp_err_errno(err, errno, "mkdir", p);
            *s = c;
            if (!c)
                break;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ locking -- */

int sp_sandbox_lock(sp_sandbox *sb, sp_error **err)
{
    if (sb->lock_depth++ > 0)
        return 0;
    cleanup_free char *path = sp_xasprintf("%s/lock", sb->state_dir);
    sb->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (sb->lock_fd < 0) {
        sb->lock_depth = 0;
        return sp_err_errno(err, errno, "lock", path);
    }
    while (flock(sb->lock_fd, LOCK_EX) < 0) {
        if (errno != EINTR) {
            int r = sp_err_errno(err, errno, "lock", path);
            close(sb->lock_fd);
            sb->lock_fd = -1;
            sb->lock_depth = 0;
            return r;
        }
    }
    return 0;
}

void sp_sandbox_unlock(sp_sandbox *sb)
{
    if (sb->lock_depth == 0 || --sb->lock_depth > 0)
        return;
    if (sb->lock_fd >= 0)
        close(sb->lock_fd); /* releases the flock */
    sb->lock_fd = -1;
}

int sp_sandbox_edit_lock(sp_sandbox *sb, sp_error **err)
{
    if (!sb->state_dir)
        return sp_err_set(err, SP_EINVAL, 0, "sandbox %s has no state folder to lock", sb->name);
    cleanup_free char *path = sp_xasprintf("%s/edit.lock", sb->state_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return sp_err_errno(err, errno, "lock the sandbox for an edit", path);
    while (flock(fd, LOCK_EX) < 0) {
        if (errno != EINTR) {
            int r = sp_err_errno(err, errno, "lock the sandbox for an edit", path);
            close(fd);
            return r;
        }
    }
    return fd;
}

void sp_sandbox_edit_unlock(int lock)
{
    if (lock >= 0)
        close(lock); /* releases the flock */
}

/* ---------------------------------------------------------- persisting -- */

static char **json_strv(const cJSON *a)
{
    sp_strv sv = {0};
    const cJSON *it;
    cJSON_ArrayForEach(it, a)
    {
        if (cJSON_IsString(it))
            sp_strv_push(&sv, sp_xstrdup(it->valuestring));
    }
    return sp_strv_steal(&sv);
}

static cJSON *mounts_json(const sp_sandbox_config *c)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < c->n_mounts; i++) {
        const sp_sandbox_mount *m = &c->mounts[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "host_path", m->host_path);
        cJSON_AddStringToObject(o, "mount_path", m->mount_path);
        cJSON_AddItemToObject(o, "include", sp_json_strv(m->include));
        cJSON_AddItemToObject(o, "exclude", sp_json_strv(m->exclude));
        cJSON_AddNumberToObject(o, "max_bytes", (double)m->max_bytes);
        cJSON_AddBoolToObject(o, "follow_symlinks", m->follow_symlinks);
        cJSON_AddBoolToObject(o, "gitignore", m->gitignore);
        cJSON_AddNumberToObject(o, "files", (double)m->files);
        cJSON_AddNumberToObject(o, "bytes", (double)m->bytes);
        cJSON_AddBoolToObject(o, "keep_secrets", m->keep_secrets);
        cJSON_AddItemToObject(o, "secrets_left_out", sp_json_strv(m->secrets_left_out));
        cJSON_AddItemToObject(o, "secrets_rewritten", sp_json_strv(m->secrets_rewritten));
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

static void mounts_free(sp_sandbox_config *c)
{
    for (size_t i = 0; i < c->n_mounts; i++) {
        sp_sandbox_mount *m = &c->mounts[i];
        free((char *)m->host_path);
        free((char *)m->mount_path);
        sp_strv_free((char **)m->include);
        sp_strv_free((char **)m->exclude);
        sp_strv_free((char **)m->secrets_left_out);
        sp_strv_free((char **)m->secrets_rewritten);
    }
    free(c->mounts);
    c->mounts = NULL;
    c->n_mounts = 0;
}

static cJSON *idmap_or_null(const sp_idmap *m)
{
    return m->n ? sp_idmap_json(m) : cJSON_CreateNull();
}

static const char *const userns_names[] = {"private", "host"};
static const char *const seccomp_names[] = {"sandpod", "podman", "unconfined"};

static int name_index(const char *const *names, size_t n, const char *s)
{
    for (size_t i = 0; s && i < n; i++)
        if (strcmp(names[i], s) == 0)
            return (int)i;
    return 0;
}

struct cJSON *sp_sandbox_config_json(const sp_sandbox *sb)
{
    const sp_sandbox_config *c = &sb->cfg;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "version", SANDBOX_JSON_VERSION);
    cJSON_AddStringToObject(o, "name", sb->name);
    cJSON_AddStringToObject(o, "image", c->image);
    if (sb->container_id)
        cJSON_AddStringToObject(o, "container_id", sb->container_id);
    cJSON_AddStringToObject(o, "created_at", sb->created_at ? sb->created_at : "");
    if (sb->made_by)
        cJSON_AddStringToObject(o, "made_by", sb->made_by);
    cJSON_AddStringToObject(o, "workspace", sb->workspace);
    cJSON_AddItemToObject(o, "env", sp_json_strv((const char *const *)c->env));
    cJSON_AddStringToObject(o, "workdir", c->workdir);
    cJSON_AddStringToObject(o, "user", c->user);
    cJSON_AddNumberToObject(o, "network", c->network);
    cJSON_AddNumberToObject(o, "memory_bytes", (double)c->memory_bytes);
    cJSON_AddNumberToObject(o, "nano_cpus", (double)c->nano_cpus);
    cJSON_AddNumberToObject(o, "pids_limit", (double)c->pids_limit);
    cJSON_AddNumberToObject(o, "tmpfs_bytes", (double)c->tmpfs_bytes);
    cJSON_AddBoolToObject(o, "writable_root", c->writable_root);
    cJSON_AddItemToObject(o, "cap_add", sp_json_strv((const char *const *)c->cap_add));
    static const char *const paths[] = {"auto", "rest", "fast"};
    cJSON_AddStringToObject(o, "exec_path", paths[c->exec_path <= SP_EXEC_FAST ? c->exec_path : 0]);
    cJSON_AddBoolToObject(o, "agent", c->agent);
    if (c->agent_source)
        cJSON_AddStringToObject(o, "agent_source", c->agent_source);
    if (c->agent_missing)
        cJSON_AddStringToObject(o, "agent_missing", c->agent_missing);
    cJSON_AddStringToObject(o, "userns", userns_names[c->userns <= SP_USERNS_HOST ? c->userns : 0]);
    cJSON_AddStringToObject(o, "seccomp",
                            seccomp_names[c->seccomp <= SP_SECCOMP_UNCONFINED ? c->seccomp : 0]);
    cJSON_AddItemToObject(o, "env_pass", sp_json_strv((const char *const *)c->env_pass));
    if (c->egress)
        cJSON_AddItemToObject(o, "egress", sp_json_strv((const char *const *)c->egress));
    if (c->secrets.n)
        cJSON_AddItemToObject(o, "secrets", sp_sandbox_secrets_json(&c->secrets));
    cJSON_AddItemToObject(o, "uid_map", idmap_or_null(&c->uid_map));
    cJSON_AddItemToObject(o, "gid_map", idmap_or_null(&c->gid_map));
    cJSON_AddNumberToObject(o, "host_uid", (double)c->host_uid);
    cJSON_AddNumberToObject(o, "host_gid", (double)c->host_gid);
    cJSON_AddBoolToObject(o, "rootless", c->rootless);
    cJSON_AddBoolToObject(o, "limits_apply", c->limits_apply);
    cJSON_AddItemToObject(o, "warnings", sp_json_strv((const char *const *)c->warnings));
    cJSON_AddItemToObject(o, "mounts", mounts_json(c));
    cJSON_AddNumberToObject(o, "init_pid", sb->init_pid);
    cJSON_AddItemToObject(o, "setup", sp_json_strv((const char *const *)c->setup));
    sb->kind->save(sb, o);
    return o;
}

/* Write sandbox.json atomically: temp file, fsync, rename. */
int sp_sandbox_save(sp_sandbox *sb, sp_error **err)
{
    cJSON *o = sp_sandbox_config_json(sb);
    sp_buf text = SP_BUF_INIT;
    char *js = cJSON_Print(o);
    cJSON_Delete(o);
    if (!js)
        abort();
    sp_buf_adds(&text, js);
    sp_buf_addc(&text, '\n');
    free(js);
    /* It may hold -e values: only its owner reads it. */
    cleanup_free char *path = sp_xasprintf("%s/sandbox.json", sb->state_dir);
    int r = sp_write_file_atomic(path, text.data, text.len, 0600, err);
    sp_buf_dispose(&text);
    return r;
}

/* Numbers in sandbox.json are doubles; UINT64_MAX ("no limit") becomes
 * 2^64, which does not convert back, so clamp. */
static uint64_t jnum_u64(const cJSON *o, const char *k, uint64_t def)
{
    double d = sp_json_num(o, k, (double)def);
    if (d != d || d < 0)
        return def;
    if (d >= 18446744073709551615.0)
        return UINT64_MAX;
    return (uint64_t)d;
}

int sp_sandbox_config_load(sp_sandbox *sb, const char *path, struct cJSON **json, sp_error **err)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return sp_err_set(err, SP_ENOTFOUND, ENOENT, "no sandbox named %s", sb->name);
        return sp_err_errno(err, errno, "read", path);
    }
    sp_buf b = SP_BUF_INIT;
    char chunk[8192];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof(chunk))) > 0)
        sp_buf_add(&b, chunk, (size_t)n);
    close(fd);
    cJSON *o = sp_json_parse(b.data ? b.data : "", b.len);
    sp_buf_dispose(&b);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return sp_err_set(err, SP_EINVAL, 0, "%s is not valid JSON; the sandbox state is damaged",
                          path);
    }
    sp_sandbox_config *c = &sb->cfg;
    c->image = sp_xstrdup(sp_json_str_or(o, "image", SP_DEFAULT_IMAGE));
    const char *cid = sp_json_str_or(o, "container_id", NULL);
    sb->container_id = cid ? sp_xstrdup(cid) : NULL;
    sb->created_at = sp_xstrdup(sp_json_str_or(o, "created_at", ""));
    const char *made_by = sp_json_str_or(o, "made_by", NULL);
    sb->made_by = made_by ? sp_xstrdup(made_by) : NULL;
    c->env = json_strv(cJSON_GetObjectItemCaseSensitive(o, "env"));
    c->workdir = sp_xstrdup(sp_json_str_or(o, "workdir", SP_WORKSPACE_MOUNT));
    c->user = sp_xstrdup(sp_json_str_or(o, "user", SP_SANDBOX_DEFAULT_USER));
    c->memory_bytes = jnum_u64(o, "memory_bytes", SP_SANDBOX_DEFAULT_MEMORY);
    c->nano_cpus = jnum_u64(o, "nano_cpus", SP_SANDBOX_DEFAULT_NANO_CPUS);
    c->pids_limit = sp_json_int(o, "pids_limit", SP_SANDBOX_DEFAULT_PIDS);
    c->tmpfs_bytes = jnum_u64(o, "tmpfs_bytes", SP_SANDBOX_DEFAULT_TMPFS);
    int net = (int)sp_json_int(o, "network", 0);
    c->network = net >= 0 && net <= SP_NET_HOST ? (sp_network)net : 0;
    const cJSON *wr = cJSON_GetObjectItemCaseSensitive(o, "writable_root");
    c->writable_root = cJSON_IsTrue(wr);
    c->cap_add = json_strv(cJSON_GetObjectItemCaseSensitive(o, "cap_add"));
    /* Sandboxes made before the fast path have neither key: REST it is. */
    const char *ep = sp_json_str_or(o, "exec_path", "auto");
    c->exec_path = strcmp(ep, "rest") == 0   ? SP_EXEC_REST
                   : strcmp(ep, "fast") == 0 ? SP_EXEC_FAST
                                             : SP_EXEC_AUTO;
    c->agent = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "agent"));
    /* Sandboxes made before these were recorded have neither. */
    const char *src = sp_json_str_or(o, "agent_source", NULL);
    c->agent_source = src ? sp_xstrdup(src) : NULL;
    const char *missing = sp_json_str_or(o, "agent_missing", NULL);
    c->agent_missing = missing ? sp_xstrdup(missing) : NULL;
    /* Sandboxes made before user namespaces have no "userns": they run in
     * the host's until they are recreated with --userns. */
    c->userns = (sp_userns)name_index(userns_names, 2, sp_json_str_or(o, "userns", "host"));
    c->seccomp = (sp_seccomp)name_index(seccomp_names, 3, sp_json_str_or(o, "seccomp", "podman"));
    c->env_pass = json_strv(cJSON_GetObjectItemCaseSensitive(o, "env_pass"));
    const cJSON *eg = cJSON_GetObjectItemCaseSensitive(o, "egress");
    c->egress = cJSON_IsArray(eg) ? json_strv(eg) : NULL;
    if (sp_sandbox_secrets_from_json(&c->secrets, cJSON_GetObjectItemCaseSensitive(o, "secrets"),
                                     NULL) < 0) {
        cJSON_Delete(o);
        return sp_err_set(err, SP_EINVAL, 0,
                          "%s holds a damaged secret; the sandbox state is "
                          "damaged",
                          path);
    }
    if (sp_idmap_from_json(&c->uid_map, cJSON_GetObjectItemCaseSensitive(o, "uid_map")) < 0 ||
        sp_idmap_from_json(&c->gid_map, cJSON_GetObjectItemCaseSensitive(o, "gid_map")) < 0) {
        cJSON_Delete(o);
        return sp_err_set(err, SP_EINVAL, 0, "%s holds a bad id map; the sandbox state is damaged",
                          path);
    }
    c->host_uid = sp_json_int(o, "host_uid", -1);
    c->host_gid = sp_json_int(o, "host_gid", -1);
    c->rootless = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "rootless"));
    const cJSON *la = cJSON_GetObjectItemCaseSensitive(o, "limits_apply");
    c->limits_apply = la ? cJSON_IsTrue(la) : true;
    c->warnings = json_strv(cJSON_GetObjectItemCaseSensitive(o, "warnings"));
    c->setup = json_strv(cJSON_GetObjectItemCaseSensitive(o, "setup"));
    /* Sandboxes made before mounts were recorded have none: nothing to show. */
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(o, "mounts");
    const cJSON *it;
    size_t nm = (size_t)cJSON_GetArraySize(ms);
    c->mounts = nm ? sp_xcalloc(nm, sizeof(*c->mounts)) : NULL;
    cJSON_ArrayForEach(it, ms)
    {
        if (!cJSON_IsObject(it) || !sp_json_str(it, "host_path"))
            continue;
        sp_sandbox_mount *m = &c->mounts[c->n_mounts++];
        m->host_path = sp_xstrdup(sp_json_str_or(it, "host_path", ""));
        m->mount_path = sp_xstrdup(sp_json_str_or(it, "mount_path", "."));
        m->include =
            (const char *const *)json_strv(cJSON_GetObjectItemCaseSensitive(it, "include"));
        m->exclude =
            (const char *const *)json_strv(cJSON_GetObjectItemCaseSensitive(it, "exclude"));
        m->max_bytes = jnum_u64(it, "max_bytes", 0);
        m->follow_symlinks = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "follow_symlinks"));
        m->gitignore = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "gitignore"));
        m->files = jnum_u64(it, "files", 0);
        m->bytes = jnum_u64(it, "bytes", 0);
        m->keep_secrets = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "keep_secrets"));
        m->secrets_left_out = (const char *const *)json_strv(
            cJSON_GetObjectItemCaseSensitive(it, "secrets_left_out"));
        m->secrets_rewritten = (const char *const *)json_strv(
            cJSON_GetObjectItemCaseSensitive(it, "secrets_rewritten"));
    }
    sb->init_pid = (int)sp_json_int(o, "init_pid", 0);
    const char *ws = sp_json_str_or(o, "workspace", NULL);
    free(sb->workspace);
    sb->workspace = ws ? sp_xstrdup(ws) : sp_xasprintf("%s/workspace", sb->state_dir);
    /* Made on another engine: sandbox.json names its kind. */
    const char *ek = sp_json_str(o, "engine_kind");
    int r = 0;
    if (ek && sp_engine_kind_parse(&sb->engine_kind, ek, NULL) < 0)
        r = sp_err_set(err, SP_EINVAL, 0,
                       "%s names engine kind %s, which this sandpod does not know; the sandbox "
                       "state is damaged",
                       path, ek);
    if (r == 0 && json)
        *json = o;
    else
        cJSON_Delete(o);
    return r;
}

/* ------------------------------------------------------------- handles -- */

sp_sandbox *sp_sandbox_new(const char *root, const char *name, const char *url, const sp_kind *kind)
{
    sp_sandbox *sb = sp_xcalloc(1, sizeof(*sb));
    sb->kind = kind;
    sb->name = sp_xstrdup(name);
    sb->state_root = sp_xstrdup(root);
    sb->state_dir = sp_xasprintf("%s/sandboxes/%s", root, name);
    sb->workspace = sp_xasprintf("%s/workspace", sb->state_dir);
    sb->local_url = url ? sp_xstrdup(url) : NULL;
    sb->lops = sp_local_engine();
    sb->lock_fd = -1;
    return sb;
}

void sp_sandbox_free(sp_sandbox *sb)
{
    if (!sb)
        return;
    sp_sandbox_sessions_close(sb);
    if (sb->lock_fd >= 0)
        close(sb->lock_fd);
    sp_fs_free(sb->fs);
    sb->kind->release(sb);
    free(sb->name);
    free(sb->state_root);
    free(sb->state_dir);
    free(sb->workspace);
    free(sb->local_url);
    free(sb->container_id);
    free(sb->created_at);
    free(sb->made_by);
    free(sb->agent_socket);
    free(sb->cfg.image);
    free(sb->cfg.workdir);
    free(sb->cfg.user);
    free(sb->cfg.agent_source);
    free(sb->cfg.agent_missing);
    sp_strv_free(sb->cfg.env);
    sp_strv_free(sb->cfg.cap_add);
    sp_strv_free(sb->cfg.env_pass);
    sp_strv_free(sb->cfg.egress);
    sp_egress_secrets_dispose(&sb->cfg.secrets);
    sp_strv_free(sb->cfg.warnings);
    sp_strv_free(sb->cfg.setup);
    mounts_free(&sb->cfg);
    free(sb);
}

const sp_sandbox_mount *sp_sandbox_mounts(const sp_sandbox *sb, size_t *n)
{
    *n = sb->cfg.n_mounts;
    return sb->cfg.mounts;
}

const char *sp_sandbox_name(const sp_sandbox *sb)
{
    return sb->name;
}

const char *sp_sandbox_workspace(const sp_sandbox *sb)
{
    return sb->workspace;
}

const char *sp_sandbox_state_dir(const sp_sandbox *sb)
{
    return sb->state_dir;
}

const char *sp_sandbox_container_id(const sp_sandbox *sb)
{
    return sb->container_id;
}

const char *sp_sandbox_image(const sp_sandbox *sb)
{
    return sb->cfg.image;
}

const char *sp_sandbox_made_by(const sp_sandbox *sb)
{
    return sb->made_by;
}

void sp_sandbox_opts_take(sp_sandbox_opts *o, const sp_sandbox_opts *in)
{
    sp_sandbox_opts d = SP_SANDBOX_OPTS_INIT;
    if (in && in->version == 1)
        /* A caller built against the first layout: its struct ends there. */
        memcpy(&d, in, offsetof(sp_sandbox_opts, should_stop));
    else if (in && in->version == 2)
        memcpy(&d, in, offsetof(sp_sandbox_opts, allow));
    else if (in && in->version == 3)
        memcpy(&d, in, offsetof(sp_sandbox_opts, secrets));
    else if (in)
        d = *in;
    d.version = SP_SANDBOX_OPTS_VERSION;
    *o = d;
}

const char *sp_sandbox_created_at(const sp_sandbox *sb)
{
    return sb->created_at;
}

const char *const *sp_sandbox_warnings(const sp_sandbox *sb)
{
    static const char *const none[] = {NULL};
    return sb->cfg.warnings ? (const char *const *)sb->cfg.warnings : none;
}

sp_fs *sp_sandbox_fs(sp_sandbox *sb, sp_error **err)
{
    return sb->kind->fs(sb, err);
}

sp_local *sp_sandbox_local(sp_sandbox *sb, sp_error **err)
{
    if (sb->local)
        return sb->local;
    if (sb->agent_socket) {
        sp_err_set(err, SP_EINVAL, 0,
                   "the workload behind the agent at %s has no engine service to ask",
                   sb->agent_socket);
        return NULL;
    }
    if (!sb->lops) {
        sp_err_set(err, SP_EINVAL, 0, "sandbox %s runs on engine %s, not the local one", sb->name,
                   sp_sandbox_engine(sb));
        return NULL;
    }
    if (sb->lops->open(&sb->local, sb->local_url, sb->state_root, false, err) < 0)
        return NULL;
    return sb->local;
}

const char *sp_sandbox_service_url(sp_sandbox *sb, sp_error **err)
{
    sp_local *l = sp_sandbox_local(sb, err);
    return l ? sb->lops->url(l) : NULL;
}

char *sp_now_rfc3339(void)
{
    char buf[64];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return sp_xstrdup(buf);
}

/* Remember what the workspace was hydrated from: the folders as resolved
 * and where they landed (from the result), their filters and caps (from
 * the request). */
void sp_sandbox_record_mounts(sp_sandbox_config *c, const sp_mount *req, size_t n,
                              const sp_hydrate_result *hr)
{
    c->mounts = n ? sp_xcalloc(n, sizeof(*c->mounts)) : NULL;
    c->n_mounts = n;
    for (size_t i = 0; i < n; i++) {
        sp_sandbox_mount *m = &c->mounts[i];
        const sp_hydrate_mount_stats *st = hr && i < hr->n_mounts ? &hr->mounts[i] : NULL;
        m->host_path = sp_xstrdup(st ? st->host_path : req[i].host_path);
        m->mount_path = sp_xstrdup(st                  ? st->mount_path
                                   : req[i].mount_path ? req[i].mount_path
                                                       : ".");
        m->include = (const char *const *)sp_strv_copy(req[i].include);
        m->exclude = (const char *const *)sp_strv_copy(req[i].exclude);
        m->max_bytes = req[i].max_bytes;
        m->follow_symlinks = req[i].follow_symlinks;
        m->gitignore = req[i].gitignore;
        m->files = st ? st->files : 0;
        m->bytes = st ? st->bytes : 0;
        m->keep_secrets = req[i].keep_secrets;
        /* Names only: what the user must know was left out or changed. */
        sp_strv out = {0}, rew = {0};
        for (size_t k = 0; hr && k < hr->n_skipped; k++)
            if (hr->skipped[k].mount == i && hr->skipped[k].reason == SP_HYDRATE_SKIP_SECRET)
                sp_strv_push(&out, sp_xstrdup(hr->skipped[k].path));
        for (size_t k = 0; hr && k < hr->n_rewritten; k++)
            if (hr->rewritten[k].mount == i)
                sp_strv_push(&rew, sp_xstrdup(hr->rewritten[k].path));
        m->secrets_left_out = (const char *const *)sp_strv_steal(&out);
        m->secrets_rewritten = (const char *const *)sp_strv_steal(&rew);
    }
}

void sp_sandbox_status_free(sp_sandbox_status *st)
{
    if (!st)
        return;
    free(st->state);
    free(st->container);
    free(st);
}

/* rm -rf of a folder in our state root; the workload may have written
 * anything below it, so sp_tree_remove() never follows a symlink. */
int sp_rm_tree(const char *path, sp_error **err)
{
    cleanup_free char *parent = sp_xstrdup(path);
    char *slash = strrchr(parent, '/');
    if (!slash || !slash[1])
        return sp_err_set(err, SP_EINVAL, 0, "not a folder to remove: %s", path);
    *slash = '\0';
    cleanup_close int pfd =
        open(*parent ? parent : "/", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pfd < 0)
        return errno == ENOENT ? 0 : sp_err_errno(err, errno, "remove", path);
    return sp_tree_remove(pfd, slash + 1, 0, err);
}

/* Rootless: what the workload made as another container id (a subuid)
 * only goes from inside the caller's user namespace. */
int sp_sandbox_rm_state_dir(sp_sandbox *sb, sp_error **err)
{
    sp_error *first = NULL;
    int r = sp_rm_tree(sb->state_dir, &first);
    if (r < 0 && sb->cfg.rootless && geteuid() != 0 &&
        sb->lops->remove_tree(sb->state_dir, NULL) == 0)
        r = 0;
    if (r < 0 && err)
        *err = first;
    else
        sp_error_free(first);
    return r;
}

char **sp_sandbox_command_env(const sp_sandbox *sb, const char *const *extra)
{
    sp_strv sv = {0};
    for (size_t i = 0; sb->cfg.env && sb->cfg.env[i]; i++)
        sp_strv_push(&sv, sp_xstrdup(sb->cfg.env[i]));
    for (size_t i = 0; sb->cfg.env_pass && sb->cfg.env_pass[i]; i++) {
        const char *v = getenv(sb->cfg.env_pass[i]);
        if (v)
            sp_strv_push(&sv, sp_xasprintf("%s=%s", sb->cfg.env_pass[i], v));
    }
    for (size_t i = 0; extra && extra[i]; i++)
        sp_strv_push(&sv, sp_xstrdup(extra[i]));
    return sp_strv_steal(&sv);
}

/* ------------------------------------- the public calls, by its kind -- */

int sp_sandbox_status_get(sp_sandbox_status **out, sp_sandbox *sb, sp_error **err)
{
    *out = NULL;
    return sb->kind->status(out, sb, err);
}

int sp_sandbox_start(sp_sandbox *sb, sp_error **err)
{
    return sb->kind->start(sb, err);
}

int sp_sandbox_stop(sp_sandbox *sb, int timeout_s, sp_error **err)
{
    return sb->kind->stop(sb, timeout_s, err);
}

int sp_sandbox_restart(sp_sandbox *sb, sp_error **err)
{
    return sb->kind->restart(sb, err);
}

int sp_sandbox_pause(sp_sandbox *sb, sp_error **err)
{
    return sb->kind->pause(sb, err);
}

int sp_sandbox_unpause(sp_sandbox *sb, sp_error **err)
{
    return sb->kind->unpause(sb, err);
}

bool sp_sandbox_pauses(sp_sandbox *sb)
{
    return sb->kind->pauses(sb);
}

bool sp_sandbox_stops(const sp_sandbox *sb)
{
    return sb->kind->stops(sb);
}

bool sp_sandbox_is_remote(const sp_sandbox *sb)
{
    return sb && sb->engine_kind != SP_ENGINE_PODMAN;
}

const char *sp_sandbox_engine(const sp_sandbox *sb)
{
    return sb->engine ? sb->engine : SP_ENGINE_LOCAL;
}

int sp_sandbox_rpc_keyed(sp_sandbox *sb, const char *method, const char *params, const char *key,
                         char **result, sp_error **err)
{
    *result = NULL;
    if (!sb)
        return sp_err_set(err, SP_EINVAL, 0, "no sandbox given");
    if (!method || !*method)
        return sp_err_set(err, SP_EINVAL, 0, "no method given");
    return sb->kind->rpc(sb, method, params, key, result, err);
}

int sp_sandbox_rpc(sp_sandbox *sb, const char *method, const char *params, char **result,
                   sp_error **err)
{
    return sp_sandbox_rpc_keyed(sb, method, params, NULL, result, err);
}

void sp_sandbox_rpc_cancel_key(sp_sandbox *sb, const char *key)
{
    if (sb && key)
        sb->kind->rpc_cancel(sb, key);
}

void sp_sandbox_rpc_cancel(sp_sandbox *sb)
{
    if (sb)
        sb->kind->rpc_cancel(sb, NULL);
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
    if (!args || !args[0])
        return sp_err_set(err, SP_EINVAL, 0, "no sandpod command given");
    return sb->kind->peer_command(sb, args, in_fd, out_fd, err_fd, exit_code, err);
}

int sp_sandbox_parse_user(const char *user, uid_t *uid, gid_t *gid)
{
    char *end = NULL;
    errno = 0;
    unsigned long u = strtoul(user, &end, 10);
    if (errno || end == user || (*end != ':' && *end != '\0'))
        return -1;
    unsigned long g = u;
    if (*end == ':') {
        const char *gs = end + 1;
        g = strtoul(gs, &end, 10);
        if (errno || end == gs || *end != '\0')
            return -1;
    }
    *uid = (uid_t)u;
    *gid = (gid_t)g;
    return 0;
}

void sp_sandbox_sessions_close(sp_sandbox *sb)
{
    sb->kind->sessions_close(sb);
}
