/* The sandbox object: state folder, sandbox.json, container lifecycle. */
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
#include "tree.h"

#define SANDBOX_JSON_VERSION 1
#define DEFAULT_MEMORY       (1ull << 30)
#define DEFAULT_NANO_CPUS    1000000000ull
#define DEFAULT_PIDS         256
#define DEFAULT_TMPFS        (64ull << 20)

/* ------------------------------------------------------------- naming -- */

static char *generate_name(void)
{
    uint32_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != sizeof(r))
        r = (uint32_t)(sp_now_ms() ^ getpid());
    return sp_xasprintf("sp-%08x", r);
}

int sp_sandbox_resolve_root(char **out, const char *state_root, sp_error **err)
{
    if (state_root && *state_root) {
        *out = sp_xstrdup(state_root);
        return 0;
    }
    return sp_state_root(out, err);
}

/* mkdir -p for a host path we own (the state root): private. */
static int mkdirs(const char *path, sp_error **err)
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

static char **strv_dup(const char *const *v)
{
    sp_strv sv = {0};
    for (size_t i = 0; v && v[i]; i++)
        sp_strv_push(&sv, sp_xstrdup(v[i]));
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

static int load(sp_sandbox *sb, sp_error **err)
{
    cleanup_free char *path = sp_xasprintf("%s/sandbox.json", sb->state_dir);
    return sp_sandbox_config_load(sb, path, err);
}

int sp_sandbox_config_load(sp_sandbox *sb, const char *path, sp_error **err)
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
    c->memory_bytes = jnum_u64(o, "memory_bytes", DEFAULT_MEMORY);
    c->nano_cpus = jnum_u64(o, "nano_cpus", DEFAULT_NANO_CPUS);
    c->pids_limit = sp_json_int(o, "pids_limit", DEFAULT_PIDS);
    c->tmpfs_bytes = jnum_u64(o, "tmpfs_bytes", DEFAULT_TMPFS);
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
    sb->kind = sp_kind_for(sb->engine_kind);
    if (r == 0)
        r = sb->kind->load(sb, o, path, err);
    cJSON_Delete(o);
    return r;
}

/* ------------------------------------------------------------- handles -- */

static sp_sandbox *sandbox_new(const char *root, const char *name, const char *url)
{
    sp_sandbox *sb = sp_xcalloc(1, sizeof(*sb));
    sb->name = sp_xstrdup(name);
    sb->state_root = sp_xstrdup(root);
    sb->state_dir = sp_xasprintf("%s/sandboxes/%s", root, name);
    sb->workspace = sp_xasprintf("%s/workspace", sb->state_dir);
    sb->local_url = url ? sp_xstrdup(url) : NULL;
    sb->lops = sp_local_engine();
    sb->kind = sp_kind_for(SP_ENGINE_PODMAN);
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

int sp_sandbox_state_root(char **out, const char *state_root, sp_error **err)
{
    *out = NULL;
    return sp_sandbox_resolve_root(out, state_root, err);
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

int sp_sandbox_open_agent(sp_sandbox **out, const sp_sandbox_agent_opts *opts, sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_SANDBOX_AGENT_OPTS_VERSION, "sp_sandbox_agent_opts", err) < 0)
        return SP_EINVAL;
    if (!opts || !opts->workspace || opts->workspace[0] != '/')
        return sp_err_set(err, SP_EINVAL, 0, "the agent's workspace must be an absolute path");
    if (!opts->socket || !*opts->socket || opts->socket[strlen(opts->socket) - 1] == '/')
        return sp_err_set(err, SP_EINVAL, 0, "no agent socket path given");
    sp_sandbox *sb = sp_xcalloc(1, sizeof(*sb));
    sb->name = sp_xstrdup("workload");
    sb->workspace = sp_xstrdup(opts->workspace);
    sb->agent_socket = sp_xstrdup(opts->socket);
    sb->agent_uid = opts->uid < 0 ? (int64_t)geteuid() : opts->uid;
    sb->kind = sp_kind_for(SP_ENGINE_PODMAN);
    sb->lock_fd = -1;
    sb->cfg.workdir = sp_xstrdup(opts->workspace);
    sb->cfg.env = sp_xcalloc(1, sizeof(char *));
    sb->cfg.setup = sp_xcalloc(1, sizeof(char *));
    sb->cfg.agent = true;
    sb->cfg.exec_path = SP_EXEC_FAST; /* never a Podman exec */
    sb->cfg.host_uid = sb->cfg.host_gid = -1;
    *out = sb;
    return 0;
}

int sp_sandbox_open(sp_sandbox **out, const char *name, const sp_sandbox_opts *opts, sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_SANDBOX_OPTS_VERSION, "sp_sandbox_opts", err) < 0)
        return SP_EINVAL;
    if (!name || !sp_sandbox_name_valid(name))
        return sp_err_set(err, SP_EINVAL, 0, "invalid sandbox name: %s", name ? name : "(null)");
    cleanup_free char *root = NULL;
    int r = sp_sandbox_resolve_root(&root, opts ? opts->state_root : NULL, err);
    if (r < 0)
        return r;
    /* Whoever may write the state root decides what sandbox.json says
     * (which folder is the workspace): only ours is read. */
    sp_error *e = NULL;
    if ((r = sp_state_root_check(root, false, &e)) < 0 && r != SP_ENOTFOUND) {
        if (err)
            *err = e;
        else
            sp_error_free(e);
        return r;
    }
    sp_error_free(e);
    sp_sandbox *sb = sandbox_new(root, name, opts ? opts->podman_url : NULL);
    if ((r = load(sb, err)) < 0) {
        sp_sandbox_free(sb);
        return r;
    }
    if (opts && opts->exec_path)
        sb->cfg.exec_path = opts->exec_path;
    *out = sb;
    return 0;
}

/* ----------------------------------------------------------- container -- */

static int parse_user(const char *user, uid_t *uid, gid_t *gid)
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

/* After the container's pid 1 started, and before anything of the
 * workload runs: learn which host ids the container's user has (from pid
 * 1's uid_map and gid_map, the same whichever mode Podman runs in) and hand
 * the workspace and the agent's socket folder over when they changed. A
 * private user namespace (rootful userns=auto) gets a new range each time
 * the container is made anew, so a recreated sandbox moves its files from
 * the old range to the new one. */
static int hand_over_ids(sp_sandbox *sb, sp_local *p, sp_error **err)
{
    sp_sandbox_config *c = &sb->cfg;
    uid_t cuid;
    gid_t cgid;
    if (parse_user(c->user, &cuid, &cgid) < 0)
        return 0; /* a user name: the image knows it, we cannot */
    sp_container_info *info = NULL;
    int r = sb->lops->inspect(&info, p, sb->container_id, err);
    if (r < 0)
        return r;
    int pid = info->pid;
    sp_container_info_free(info);
    if (pid <= 0)
        return sp_err_set(err, SP_EPODMAN, 0, "the container of sandbox %s did not stay up",
                          sb->name);
    sb->init_pid = pid;
    sp_idmap um, gm;
    if ((r = sp_idmap_read(&um, &gm, pid, err)) < 0)
        return r;
    uint32_t hu, hg;
    if (!sp_idmap_to_host(&um, cuid, &hu) || !sp_idmap_to_host(&gm, cgid, &hg))
        return sp_err_set(err, SP_EINVAL, 0,
                          "user %s is outside the ids the container of sandbox %s maps", c->user,
                          sb->name);
    bool same = c->uid_map.n && sp_idmap_equal(&um, &c->uid_map) &&
                sp_idmap_equal(&gm, &c->gid_map) && c->host_uid == hu && c->host_gid == hg;
    if (!same && (geteuid() == 0 || hu != geteuid() || hg != getegid())) {
        cleanup_close int ws = open(sb->workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ws < 0)
            return sp_err_errno(err, errno, "open", sb->workspace);
        bool had = c->uid_map.n && c->gid_map.n;
        r = sp_ids_hand_over(NULL, ws, ".", had ? &c->uid_map : NULL, had ? &c->gid_map : NULL, &um,
                             &gm, hu, hg, err);
        if (r < 0)
            return sp_err_wrap(err, r, "give the workspace of sandbox %s to its user", sb->name);
    }
    if (c->agent) {
        cleanup_free char *agent_dir = sp_xasprintf("%s/agent", sb->state_dir);
        cleanup_close int ad = open(agent_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ad < 0 || fchownat(ad, "run", hu, hg, AT_SYMLINK_NOFOLLOW) < 0)
            return sp_err_errno(err, errno, "give the agent's folder to the container's user",
                                agent_dir);
    }
    c->uid_map = um;
    c->gid_map = gm;
    c->host_uid = hu;
    c->host_gid = hg;
    return 0;
}

static int ensure_image(sp_sandbox *sb, sp_local *p, sp_error **err)
{
    bool exists = false;
    int r = sb->lops->image_exists(&exists, p, sb->cfg.image, err);
    if (r < 0 || exists)
        return r;
    if (strcmp(sb->cfg.image, SP_DEFAULT_IMAGE) == 0)
        return sb->lops->image_build_default(p, err);
    return sp_err_set(err, SP_ENOTFOUND, 0,
                      "image %s is not present: pull it ('sandpod image pull %s', or create with "
                      "--pull missing) or build it ('sandpod image build')",
                      sb->cfg.image, sb->cfg.image);
}

/* Pull the image as opts->pull says, before a hydration that a failed
 * pull would waste; the service is not asked when nothing is to be
 * pulled. */
static int pull_image(sp_sandbox *sb, const sp_sandbox_opts *o, sp_error **err)
{
    if (sb->lops->pull_policy_for(sb->cfg.image, o->pull) == SP_PULL_NEVER)
        return 0;
    sp_local *p = sp_sandbox_local(sb, err);
    if (!p)
        return SP_EPODMAN;
    return sb->lops->image_ensure(p, sb->cfg.image, o->pull, o->pull_no_tls_verify,
                                  o->pull_progress, o->progress_userdata, err);
}

/* ------------------------------------------------------ the agent binary -- */

/* Where the lookup stands: the binary found (an fd and the path it was
 * found at), or why there is none and where one should go. */
typedef struct agent_found {
    int fd;
    char *path;
    char *refused; /* the first candidate that exists but is not used, and why */
    char *want;    /* where this library expects it */
    bool off;      /* SANDPOD_AGENT=none */
} agent_found;

static bool trusted_owner(const struct stat *st)
{
    return st->st_uid == 0 || st->st_uid == geteuid();
}

/* Why one step of a trusted path is not, or NULL when it is. A sticky
 * folder (/tmp) may be writable by all: others cannot rename or remove
 * what is not theirs in it, and the next step must be ours or root's. */
static char *untrusted_step(const char *path, const struct stat *st)
{
    if (!trusted_owner(st) && geteuid() == 0)
        return sp_xasprintf("%s is owned by uid %u, not by root", path, (unsigned)st->st_uid);
    if (!trusted_owner(st))
        return sp_xasprintf("%s is owned by uid %u, not by root or uid %u", path,
                            (unsigned)st->st_uid, (unsigned)geteuid());
    if ((st->st_mode & 022) && !(S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX)))
        return sp_xasprintf("%s is writable by group or others", path);
    return NULL;
}

/* Contract: *out = a read-only fd on the executable regular file `path`
 * names, only when nobody but root and us may change it: the file and
 * every folder from / down to it are owned by root or our euid and none is
 * writable by group or others (a sticky folder excepted, see
 * untrusted_step()). Someone who may write one folder on the way could
 * put a binary of theirs there, and every container would run it as pid
 * 1, seeing each command and its environment.
 *
 * Symbolic links on the way are resolved first; the real path is then
 * walked one component at a time from / with O_NOFOLLOW (a link swapped
 * in meanwhile is refused, not followed), and the file reached must be
 * the one the path named. The copy is read from *out, never by name.
 *
 * Returns 0; -1 when no such file exists (*why NULL); -1 with *why saying
 * what is wrong. */
static int open_trusted(int *out, char **why, const char *path)
{
    *out = -1;
    *why = NULL;
    cleanup_close int named = open(path, O_PATH | O_CLOEXEC);
    if (named < 0)
        return errno == ENOENT || errno == ENOTDIR
                   ? -1
                   : (*why = sp_xasprintf("%s: %s", path, strerror(errno)), -1);
    struct stat want;
    if (fstat(named, &want) < 0 || !S_ISREG(want.st_mode)) {
        *why = sp_xasprintf("%s is not a regular file", path);
        return -1;
    }
    char real[PATH_MAX];
    cleanup_free char *self = sp_xasprintf("/proc/self/fd/%d", named);
    ssize_t n = readlink(self, real, sizeof(real) - 1);
    if (n <= 0 || real[0] != '/') {
        *why = sp_xasprintf("%s: cannot tell its real path", path);
        return -1;
    }
    real[n] = '\0';

    cleanup_close int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (dir < 0 || fstat(dir, &st) < 0 || (*why = untrusted_step("/", &st)))
        return -1;
    char *name = real + 1;
    for (;;) {
        char *slash = strchr(name, '/');
        bool last = !slash;
        if (slash)
            *slash = '\0';
        /* O_NONBLOCK: a FIFO put there must not hang us (it is no match). */
        int fd =
            openat(dir, name,
                   (last ? O_RDONLY | O_NONBLOCK : O_PATH | O_DIRECTORY) | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            *why =
                sp_xasprintf("%s: %s", real, errno == ELOOP ? "changed under us" : strerror(errno));
            return -1;
        }
        close(dir);
        dir = fd;
        if (fstat(dir, &st) < 0 || (*why = untrusted_step(real, &st)))
            return -1;
        if (last)
            break;
        *slash = '/';
        name = slash + 1;
    }
    if (st.st_dev != want.st_dev || st.st_ino != want.st_ino) {
        *why = sp_xasprintf("%s changed under us", path);
        return -1;
    }
    if (!(st.st_mode & 0111)) {
        *why = sp_xasprintf("%s is not executable", path);
        return -1;
    }
    *out = steal_fd(&dir);
    return 0;
}

/* Try one candidate; when it is not used, note why (the first such). */
static void try_agent(agent_found *a, const char *path)
{
    char *why = NULL;
    if (open_trusted(&a->fd, &why, path) == 0) {
        a->path = sp_xstrdup(path);
        return;
    }
    /* "X is not used: X is ..." says X once. */
    size_t len = strlen(path);
    if (why && !a->refused)
        a->refused = strncmp(why, path, len) == 0 && why[len] == ' '
                         ? sp_xstrdup(why)
                         : sp_xasprintf("%s is not used: %s", path, why);
    free(why);
}

/* $SANDPOD_AGENT: the caller's choice, used as given. */
static void named_agent(agent_found *a, const char *e)
{
    if (strcmp(e, "none") == 0) {
        a->off = true;
        return;
    }
    struct stat st;
    cleanup_close int fd = open(e, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111)) {
        a->fd = steal_fd(&fd);
        a->path = sp_xstrdup(e);
    } else {
        a->refused = sp_xasprintf("SANDPOD_AGENT=%s is not an executable file", e);
    }
}

/* The folder of the file a path names (a copy), or NULL. */
static char *folder_of(const char *file)
{
    const char *slash = strrchr(file, '/');
    return file[0] == '/' && slash ? sp_xstrndup(file, (size_t)(slash - file)) : NULL;
}

/* <dir>/../libexec/sandpod/sandpod-agent, where `..` is dir's parent as
 * written: the install tree dir is in, even when dir is a link. */
static char *libexec_beside(const char *dir)
{
    const char *slash = strrchr(dir, '/');
    if (!slash)
        return NULL;
    return sp_xasprintf("%.*s/libexec/sandpod/sandpod-agent", (int)(slash - dir), dir);
}

/* The folder this library was loaded from; NULL when it is linked into the
 * program (sandpod itself), which /proc/self/exe covers. */
static const char lib_anchor = 0;
static char *library_folder(void)
{
    Dl_info info;
    struct link_map *map = NULL;
    if (!dladdr1(&lib_anchor, &info, (void **)&map, RTLD_DL_LINKMAP) || !map || !map->l_name ||
        !map->l_name[0] || !info.dli_fname)
        return NULL;
    return folder_of(info.dli_fname);
}

static char *program_folder(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return NULL;
    exe[n] = '\0';
    return folder_of(exe);
}

/* The agent binary to give a new container, the first found of:
 *   $SANDPOD_AGENT ("none" turns the fast path off; used as given, and
 *   nothing else is tried);
 *   ../libexec/sandpod/sandpod-agent from the folder of libsandpod.so;
 *   ../libexec/sandpod/sandpod-agent from the running program's folder;
 *   the configured install path;
 *   sandpod-agent beside the running program (a build tree run in place).
 * So an install tree is found wherever it was installed or moved to. All
 * but the first must pass open_trusted(). The library is never told where
 * a build folder is. */
static void find_agent(agent_found *a)
{
    *a = (agent_found){.fd = -1};
    cleanup_free char *lib = library_folder();
    cleanup_free char *bin = program_folder();
    char *cand[] = {lib ? libexec_beside(lib) : NULL, bin ? libexec_beside(bin) : NULL,
#ifdef SANDPOD_AGENT_INSTALL_PATH
                    sp_xstrdup(SANDPOD_AGENT_INSTALL_PATH),
#else
                    NULL,
#endif
                    bin ? sp_xasprintf("%s/sandpod-agent", bin) : NULL};
    size_t n = sizeof(cand) / sizeof(cand[0]);
    /* Where to put one: the first place in an install tree. */
    for (size_t i = 0; i + 1 < n && !a->want; i++)
        a->want = cand[i] ? sp_xstrdup(cand[i]) : NULL;
    const char *e = getenv("SANDPOD_AGENT");
    if (e && *e)
        named_agent(a, e);
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t k = 0; cand[i] && k < i; k++)
            seen = seen || (cand[k] && strcmp(cand[k], cand[i]) == 0);
        if (!(e && *e) && !a->path && cand[i] && !seen)
            try_agent(a, cand[i]);
    }
    for (size_t i = 0; i < n; i++)
        free(cand[i]);
}

static void agent_found_dispose(agent_found *a)
{
    if (a->fd >= 0)
        close(a->fd);
    free(a->path);
    free(a->refused);
    free(a->want);
}

int sp_sandbox_agent_path(char **path, char **why)
{
    *path = *why = NULL;
    agent_found a;
    find_agent(&a);
    if (a.path)
        *path = sp_xstrdup(a.path);
    else if (a.off)
        *why = sp_xstrdup("SANDPOD_AGENT=none turns it off");
    else
        *why = a.refused ? sp_xstrdup(a.refused) : sp_xstrdup("no sandpod-agent was found");
    agent_found_dispose(&a);
    return *path ? 0 : SP_ENOTFOUND;
}

/* Copy the agent into the state folder, so that the bind mount's source
 * stays put whatever happens to the build tree or a later install. */
static int copy_agent(int in, const char *dst, sp_error **err)
{
    cleanup_free char *tmp = sp_xasprintf("%s.%d", dst, (int)getpid());
    cleanup_close int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (out < 0)
        return sp_err_errno(err, errno, "create", tmp);
    char buf[65536];
    for (;;) {
        ssize_t n = read(in, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || (n > 0 && sp_write_all(out, buf, (size_t)n) < 0)) {
            int r = sp_err_errno(err, errno, "copy the agent to", tmp);
            unlink(tmp);
            return r;
        }
        if (n == 0)
            break;
    }
    if (fchmod(out, 0755) < 0 || rename(tmp, dst) < 0) {
        int r = sp_err_errno(err, errno, "install", dst);
        unlink(tmp);
        return r;
    }
    return 0;
}

static int install_agent(int fd, const char *dir, const char *bin, const char *run, sp_error **err)
{
    if ((mkdir(dir, 0700) < 0 && errno != EEXIST) || chmod(dir, 0700) < 0)
        return sp_err_errno(err, errno, "make the agent's folder", dir);
    int r = copy_agent(fd, bin, err);
    if (r < 0)
        return r;
    if (mkdir(run, 0700) < 0 && errno != EEXIST)
        return sp_err_errno(err, errno, "make the agent's socket folder", run);
    return 0;
}

/* Set up <state_dir>/agent/: the binary (ours, read-only in the
 * container) and run/, the socket folder, which hand_over_ids() gives to
 * the container's user. agent/ itself is 0700, so no other host user
 * reaches the socket. Records where the agent came from, or why there is
 * none (sandbox.json; sp_sandbox_exec_path()); *warning says so when
 * commands will take the slow path for want of one. */
static bool prepare_agent(sp_sandbox *sb, char **bin, char **run, char **warning)
{
    sp_sandbox_config *c = &sb->cfg;
    free(c->agent_source);
    free(c->agent_missing);
    c->agent_source = c->agent_missing = NULL;
    agent_found a;
    find_agent(&a);
    cleanup_free char *dir = sp_xasprintf("%s/agent", sb->state_dir);
    cleanup_free char *b = sp_xasprintf("%s/sandpod-agent", dir);
    cleanup_free char *r = sp_fast_run_dir(sb);
    sp_error *e = NULL;
    if (a.path && install_agent(a.fd, dir, b, r, &e) == 0) {
        c->agent_source = steal_pointer(&a.path);
        agent_found_dispose(&a);
        *bin = steal_pointer(&b);
        *run = steal_pointer(&r);
        return true;
    }
    cleanup_free char *why = NULL;
    if (a.off) {
        c->agent_missing = sp_xstrdup("SANDPOD_AGENT=none when the container was made");
    } else if (e) {
        why = sp_xasprintf("the agent %s could not be set up: %s", a.path, e->message);
        c->agent_missing = sp_xasprintf("the agent %s could not be set up when the container "
                                        "was made: %s",
                                        a.path, e->message);
    } else if (a.refused) {
        why = sp_xasprintf("no usable sandpod-agent (%s)", a.refused);
        c->agent_missing =
            sp_xasprintf("no usable sandpod-agent when the container was made: %s", a.refused);
    } else {
        why = sp_xstrdup("no sandpod-agent was found");
        c->agent_missing = sp_xstrdup("no sandpod-agent was found when the container was made");
    }
    if (why)
        *warning =
            sp_xasprintf("%s: commands in sandbox %s take the slow REST path (a Podman "
                         "exec each); set SANDPOD_AGENT=/path/to/sandpod-agent or install "
                         "it at %s",
                         why, sb->name, a.want ? a.want : "PREFIX/libexec/sandpod/sandpod-agent");
    sp_error_free(e);
    agent_found_dispose(&a);
    return false;
}

/* After a start, wait (briefly) until the agent listens, so the first
 * command already takes the fast path. A stale socket from an earlier run
 * refuses connections until the agent binds it anew. */
static void wait_agent(sp_sandbox *sb)
{
    if (!sb->cfg.agent)
        return;
    int64_t end = sp_now_ms() + 2000;
    while (sp_now_ms() < end) {
        int fd = -1;
        if (sp_fast_connect(&fd, sb) == 0) {
            close(fd);
            return;
        }
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Start the container, give the workspace to its user, then wait for the
 * agent (which binds its socket once its folder is its own). */
static int start_and_hand_over(sp_sandbox *sb, sp_local *p, sp_error **err)
{
    int r = sb->lops->start(p, sb->container_id, err);
    if (r < 0 && err && *err && strstr((*err)->message, "/dev/net/tun"))
        return sp_err_wrap(err, r,
                           "start container for sandbox %s (a rootless network needs "
                           "/dev/net/tun open to you: mode 0666, as Debian's udev makes it)",
                           sb->name);
    if (r < 0)
        return sp_err_wrap(err, r, "start container for sandbox %s", sb->name);
    if ((r = hand_over_ids(sb, p, err)) < 0)
        return r;
    wait_agent(sb);
    return 0;
}

static int create_container(sp_sandbox *sb, sp_error **err)
{
    sp_local *p = sp_sandbox_local(sb, err);
    if (!p)
        return SP_EPODMAN;
    sp_sandbox_sweep_orphans(sb->lops, p, sb->state_root);
    int r = ensure_image(sb, p, err);
    if (r < 0)
        return r;
    sp_sandbox_config *c = &sb->cfg;
    const sp_container_host *host = NULL;
    if ((r = sb->lops->host(&host, p, err)) < 0)
        return r;
    c->rootless = host->rootless;
    c->limits_apply = host->limits_apply;
    cleanup_free char *seccomp_file = sp_xasprintf("%s/seccomp.json", sb->state_dir);
    cleanup_free char *agent_bin = NULL;
    cleanup_free char *agent_run = NULL;
    cleanup_free char *agent_warning = NULL;
    sb->cfg.agent = prepare_agent(sb, &agent_bin, &agent_run, &agent_warning);
    sp_bind_mount mounts[3] = {{sb->workspace, SP_WORKSPACE_MOUNT, false},
                               {agent_bin, SPA_AGENT_PATH, true},
                               {agent_run, SPA_RUN_DIR, false}};
    sp_tmpfs tmp = {"/tmp", c->tmpfs_bytes, 01777, false};
    cleanup_free char *label_name = sp_xasprintf("sandpod.name=%s", sb->name);
    /* sp_sandbox_gc() finds orphans by the state folder that owns them. */
    cleanup_free char *label_state = sp_xasprintf("sandpod.state=%s", sb->state_dir);
    const char *labels[] = {"sandpod=1", label_name, label_state, NULL};
    /* The agent is init and serves commands; without it, a long sleep
     * under catatonit keeps the container up and commands come in through
     * exec. */
    const char *cmd[] = {"/bin/sleep", "2147483647", NULL};
    const char *agent_cmd[] = {SPA_AGENT_PATH, SPA_RUN_DIR, NULL};
    /* Sandboxes of different state roots may share a name; the container
     * name carries a hash of the state folder so that they never meet (and
     * the clean-up of a leftover below only ever hits our own). */
    uint32_t h = 2166136261u;
    for (const unsigned char *q = (const unsigned char *)sb->state_dir; *q; q++)
        h = (h ^ *q) * 16777619u;
    cleanup_free char *cname = sp_xasprintf("sandpod-%s-%08x", sb->name, h);

    sp_container_spec spec = SP_CONTAINER_SPEC_INIT;
    spec.name = cname;
    spec.image = c->image;
    spec.command = sb->cfg.agent ? agent_cmd : cmd;
    spec.env = (const char *const *)c->env;
    spec.workdir = c->workdir;
    spec.user = c->user;
    spec.mounts = mounts;
    spec.n_mounts = sb->cfg.agent ? 3 : 1;
    spec.tmpfs = &tmp;
    spec.n_tmpfs = 1;
    spec.network = c->network;
    spec.memory_bytes = c->memory_bytes == UINT64_MAX ? 0 : c->memory_bytes;
    spec.nano_cpus = c->nano_cpus == UINT64_MAX ? 0 : c->nano_cpus;
    spec.pids_limit = c->pids_limit;
    spec.writable_rootfs = c->writable_root;
    spec.cap_add = (const char *const *)c->cap_add;
    spec.labels = labels;
    spec.init = !sb->cfg.agent;
    spec.stop_timeout_s = 2;
    spec.userns = c->userns;
    spec.seccomp = c->seccomp;
    spec.seccomp_file = seccomp_file;

    /* A container left by an earlier, interrupted attempt holds the name. */
    sb->lops->remove(p, cname, NULL);
    char *id = NULL;
    char **warnings = NULL;
    r = sb->lops->create(&id, &warnings, p, &spec, err);
    if (r < 0)
        return sp_err_wrap(err, r, "create container for sandbox %s", sb->name);
    sp_strv_free(c->warnings);
    c->warnings = warnings;
    if (agent_warning) {
        sp_strv all = {0};
        for (char **w = warnings; w && *w; w++)
            sp_strv_push(&all, sp_xstrdup(*w));
        sp_strv_push(&all, steal_pointer(&agent_warning));
        sp_strv_free(c->warnings);
        c->warnings = sp_strv_steal(&all);
    }
    free(sb->container_id);
    sb->container_id = id;
    return start_and_hand_over(sb, p, err);
}

/* Setup output kept per stream, head and tail; the error quotes its tail,
 * on one line (its lines joined with "; "). */
#define SETUP_MAX_BYTES ((size_t)64 << 10)
#define SETUP_ERR_TAIL  1000

static void add_tail(sp_buf *b, const char *what, const char *s, size_t len)
{
    while (len && (s[len - 1] == '\n' || s[len - 1] == '\r'))
        len--;
    if (!len)
        return;
    size_t from = len > SETUP_ERR_TAIL ? len - SETUP_ERR_TAIL : 0;
    sp_buf_printf(b, "; %s%s: ", what, from ? " ends" : "");
    for (size_t i = from; i < len; i++) {
        if (s[i] == '\n')
            sp_buf_adds(b, "; ");
        else if (s[i] != '\r')
            sp_buf_addc(b, s[i]);
    }
}

/* Make the container and run the setup commands in it (see
 * sp_sandbox_opts.setup). With setup_network on a sandbox without network,
 * the container is made with the default network for setup and remade
 * without it after. */
static int create_and_set_up(sp_sandbox *sb, const sp_sandbox_opts *o, sp_error **err)
{
    sp_sandbox_config *c = &sb->cfg;
    bool any = o->setup && o->setup[0];
    sp_network want = c->network;
    bool lend = any && o->setup_network && want == SP_NET_NONE;
    if (lend)
        c->network = SP_NET_DEFAULT;
    int r = create_container(sb, err);
    c->network = want;
    for (size_t i = 0; r == 0 && any && o->setup[i]; i++) {
        sp_run_opts ro = SP_RUN_OPTS_INIT;
        ro.timeout_ms = o->setup_timeout_ms ? o->setup_timeout_ms : 600000;
        ro.max_bytes = SETUP_MAX_BYTES;
        ro.max_lines = SIZE_MAX;
        sp_run_result *res = NULL;
        if ((r = sp_sandbox_shell(&res, sb, o->setup[i], &ro, err)) < 0) {
            r = sp_err_wrap(err, r, "setup command %zu (%s)", i + 1, o->setup[i]);
            break;
        }
        if (o->setup_done)
            o->setup_done(o->setup_userdata, i, o->setup[i], res);
        if (res->exit_code != 0 || res->timed_out) {
            sp_buf b = SP_BUF_INIT;
            if (res->timed_out)
                sp_buf_printf(&b, "timed out after %d s", ro.timeout_ms / 1000);
            else
                sp_buf_printf(&b, "exited with code %d", res->exit_code);
            add_tail(&b, "stdout", res->out, res->out_len);
            add_tail(&b, "stderr", res->err, res->err_len);
            r = sp_err_set(err, res->timed_out ? SP_ETIMEOUT : SP_ERROR, 0,
                           "setup command %zu (%s) %.*s", i + 1, o->setup[i], (int)b.len, b.data);
            sp_buf_dispose(&b);
        }
        sp_run_result_free(res);
    }
    if (r == 0 && lend)
        r = create_container(sb, err);
    return r;
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

static int rm_tree(const char *path, sp_error **err);
static int rm_state_dir(sp_sandbox *sb, sp_error **err);

/* The last step of create, after hydration (and anything else that
 * prepares the workspace): snapshot the workspace as it was handed to the
 * container, tagged "base". `diff NAME` compares with it by default and
 * `apply` takes the changes since it back to the host.
 *
 * When no setup command ran, nothing of the workload has run yet (only the
 * agent, which never writes the workspace), so the read needs no pause:
 * pausing every new container cost a freeze/thaw per create and, under
 * load, runc's pause was seen to fail. After setup commands, something
 * they started may still write, so the container is paused as for any
 * snapshot. */
static int take_baseline(sp_sandbox *sb, bool ran_setup, bool seeded, sp_error **err)
{
    if (!ran_setup) {
        cleanup_free char *store = sp_xasprintf("%s/snapshots.git", sb->state_dir);
        sp_snapstore *s = NULL;
        /* A seed (a fork's restore) left the store's stat cache naming
         * every file it wrote; since then only the hand-over changed
         * owners (and so ctimes): trust those ids rather than read every
         * file again. */
        sp_snapstore_opts so = SP_SNAPSTORE_OPTS_INIT;
        so.trust_ids = seeded;
        int r = sp_snapstore_open(&s, sb->workspace, store, &so, err);
        if (r == 0)
            r = sp_snapshot_create(NULL, s, SP_SANDBOX_BASELINE_TAG, err);
        sp_snapstore_free(s);
        return r;
    }
    sp_sandbox_snap *h = NULL;
    int r = sp_sandbox_snapshot_open(&h, sb, NULL, err);
    if (r < 0)
        return r;
    r = sp_snapshot_create(NULL, sp_sandbox_snapshot_store(h), SP_SANDBOX_BASELINE_TAG, err);
    sp_sandbox_snapshot_close(h);
    return r;
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
        m->include = (const char *const *)strv_dup(req[i].include);
        m->exclude = (const char *const *)strv_dup(req[i].exclude);
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

int sp_sandbox_create(sp_sandbox **out, const sp_sandbox_opts *opts, sp_error **err)
{
    return sp_sandbox_create_seeded(out, opts, NULL, NULL, err);
}

static bool made_by_valid(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (s[n] < 0x20 || s[n] > 0x7e)
            return false;
    return n <= 64;
}

int sp_sandbox_create_seeded(sp_sandbox **out, const sp_sandbox_opts *opts, sp_sandbox_seed_fn seed,
                             void *seed_data, sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_SANDBOX_OPTS_VERSION, "sp_sandbox_opts", err) < 0)
        return SP_EINVAL;
    sp_sandbox_opts o;
    sp_sandbox_opts_take(&o, opts);
    if (o.made_by && !made_by_valid(o.made_by))
        return sp_err_set(err, SP_EINVAL, 0, "made_by is at most 64 printable ASCII characters");
    cleanup_free char *gen = o.name ? NULL : generate_name();
    const char *name = o.name ? o.name : gen;
    if (!sp_sandbox_name_valid(name))
        return sp_err_set(err, SP_EINVAL, 0,
                          "invalid sandbox name: %s (letters, digits, '_', '.', '-'; at most 63)",
                          name);
    const char *user = o.user ? o.user : SP_SANDBOX_DEFAULT_USER;
    uid_t uid;
    gid_t gid;
    if (parse_user(user, &uid, &gid) < 0)
        return sp_err_set(err, SP_EINVAL, 0, "user must be uid or uid:gid, not %s", user);
    if ((unsigned)o.exec_path > SP_EXEC_FAST)
        return sp_err_set(err, SP_EINVAL, 0, "unknown exec path %d", (int)o.exec_path);
    if ((unsigned)o.userns > SP_USERNS_HOST)
        return sp_err_set(err, SP_EINVAL, 0, "unknown user namespace mode %d", (int)o.userns);
    if ((unsigned)o.seccomp > SP_SECCOMP_UNCONFINED)
        return sp_err_set(err, SP_EINVAL, 0, "unknown seccomp mode %d", (int)o.seccomp);
    for (size_t i = 0; o.env_pass && o.env_pass[i]; i++)
        if (!*o.env_pass[i] || strchr(o.env_pass[i], '='))
            return sp_err_set(err, SP_EINVAL, 0, "a passed-through variable is a name: %s",
                              o.env_pass[i]);

    cleanup_free char *root = NULL;
    int r = sp_sandbox_resolve_root(&root, o.state_root, err);
    if (r < 0)
        return r;
    if ((r = sp_state_root_check(root, true, err)) < 0)
        return r;
    sp_engine *eng = NULL;
    if ((r = sp_engine_get(&eng, root, o.engine, err)) < 0)
        return r;
    if (eng->podman_url && !o.podman_url)
        o.podman_url = eng->podman_url;
    cleanup_free char *boxes = sp_xasprintf("%s/sandboxes", root);
    if ((r = mkdirs(boxes, err)) < 0) {
        sp_engine_free(eng);
        return r;
    }

    sp_sandbox *sb = sandbox_new(root, name, o.podman_url);
    sb->engine_kind = eng->kind;
    sb->kind = sp_kind_for(eng->kind);
    if (mkdir(sb->state_dir, 0700) < 0) {
        r = errno == EEXIST
                ? sp_err_set(err, SP_EEXISTS, EEXIST, "a sandbox named %s already exists", name)
                : sp_err_errno(err, errno, "mkdir", sb->state_dir);
        sp_sandbox_free(sb);
        sp_engine_free(eng);
        return r;
    }
    sp_sandbox_config *c = &sb->cfg;
    c->image = sp_xstrdup(o.image ? o.image : SP_DEFAULT_IMAGE);
    c->env = strv_dup(o.env);
    c->workdir = sp_xstrdup(o.workdir ? o.workdir : SP_WORKSPACE_MOUNT);
    c->user = sp_xstrdup(user);
    c->network = o.network;
    c->memory_bytes = o.memory_bytes ? o.memory_bytes : DEFAULT_MEMORY;
    c->nano_cpus = o.nano_cpus ? o.nano_cpus : DEFAULT_NANO_CPUS;
    c->pids_limit = o.pids_limit ? o.pids_limit : DEFAULT_PIDS;
    c->tmpfs_bytes = o.tmpfs_bytes ? o.tmpfs_bytes : DEFAULT_TMPFS;
    c->writable_root = o.writable_root;
    c->cap_add = strv_dup(o.cap_add);
    c->exec_path = o.exec_path;
    c->userns = o.userns;
    c->seccomp = o.seccomp;
    c->env_pass = strv_dup(o.env_pass);
    c->setup = strv_dup(o.setup);
    c->host_uid = c->host_gid = -1;
    sb->created_at = sp_now_rfc3339();
    sb->made_by = o.made_by ? sp_xstrdup(o.made_by) : NULL;

    if ((r = sp_sandbox_lock(sb, err)) < 0 ||
        (r = sb->kind->create(sb, &o, eng, seed, seed_data, err)) < 0 ||
        (r = sp_sandbox_save(sb, err)) < 0)
        goto fail;
    sp_engine_free(eng);
    sp_sandbox_unlock(sb);
    *out = sb;
    return 0;

fail:
    sp_engine_free(eng);
    sb->kind->discard(sb);
    sp_sandbox_unlock(sb);
    rm_state_dir(sb, NULL);
    sp_sandbox_free(sb);
    return r;
}

int sp_local_create(sp_sandbox *sb, const sp_sandbox_opts *o, const sp_engine *e,
                    sp_sandbox_seed_fn seed, void *seed_data, sp_error **err)
{
    (void)e;
    sp_sandbox_config *c = &sb->cfg;
    int r;
    if (mkdir(sb->workspace, 0755) < 0)
        return sp_err_errno(err, errno, "mkdir", sb->workspace);
    if ((r = pull_image(sb, o, err)) < 0)
        return r;
    if (seed) {
        if ((r = seed(sb, seed_data, err)) < 0)
            return r;
    } else if (o->n_mounts) {
        sp_hydrate_opts ho = SP_HYDRATE_OPTS_INIT;
        ho.allowed_roots = o->allowed_roots;
        ho.progress = o->progress;
        ho.progress_userdata = o->progress_userdata;
        ho.should_stop = o->should_stop;
        sp_hydrate_result *hr = NULL;
        r = sp_hydrate(&hr, sb->workspace, o->mounts, o->n_mounts, &ho, err);
        if (r == 0)
            sp_sandbox_record_mounts(c, o->mounts, o->n_mounts, hr);
        sp_hydrate_result_free(hr);
        if (r < 0)
            return r;
    }
    if ((r = sp_sandbox_save(sb, err)) < 0 || (r = create_and_set_up(sb, o, err)) < 0 ||
        (r = sp_sandbox_save(sb, err)) < 0)
        return r;
    return take_baseline(sb, o->setup && o->setup[0], seed != NULL, err);
}

void sp_local_discard(sp_sandbox *sb)
{
    if (sb->container_id && sb->local)
        sb->lops->remove(sb->local, sb->container_id, NULL);
}

/* Describe why the container is not running, for error messages. */
static char *why_down(const sp_container_info *info)
{
    if (!info)
        return sp_xstrdup("its container is gone");
    if (info->oom_killed)
        return sp_xasprintf("its container was killed for using too much memory (exit %d)",
                            info->exit_code);
    if (info->paused)
        return sp_xstrdup("its container is paused");
    return sp_xasprintf("its container is %s (exit %d)", info->state ? info->state : "stopped",
                        info->exit_code);
}

int sp_sandbox_require_running(sp_sandbox *sb, sp_error **err)
{
    /* Only the agent can tell, and its own errors say it went. */
    if (sb->agent_socket)
        return 0;
    sp_local *p = sp_sandbox_local(sb, err);
    if (!p)
        return SP_EPODMAN;
    if (!sb->container_id)
        return sp_err_set(err, SP_EPODMAN, 0, "sandbox %s has no container; run 'sandpod start %s'",
                          sb->name, sb->name);
    sp_container_info *info = NULL;
    sp_error *e = NULL;
    int r = sb->lops->inspect(&info, p, sb->container_id, &e);
    if (r < 0 && r != SP_ENOTFOUND) {
        if (err) {
            sp_error_free(*err);
            *err = e;
        } else {
            sp_error_free(e);
        }
        return r;
    }
    sp_error_free(e);
    if (info && info->running && !info->paused) {
        sp_container_info_free(info);
        return 0;
    }
    cleanup_free char *why = why_down(info);
    sp_container_info_free(info);
    return sp_err_set(err, SP_EPODMAN, 0, "sandbox %s is not running: %s; run 'sandpod start %s'",
                      sb->name, why, sb->name);
}

int sp_local_status(sp_sandbox_status **out, sp_sandbox *sb, sp_error **err)
{
    sp_local *p = sp_sandbox_local(sb, err);
    if (!p)
        return SP_EPODMAN;
    sp_sandbox_status *st = sp_xcalloc(1, sizeof(*st));
    st->rootless = sb->cfg.rootless;
    st->limits_apply = sb->cfg.limits_apply;
    st->host_uid = sb->cfg.host_uid;
    st->host_gid = sb->cfg.host_gid;
    sp_container_info *info = NULL;
    int r = sb->container_id ? sb->lops->inspect(&info, p, sb->container_id, err) : SP_ENOTFOUND;
    if (r == SP_ENOTFOUND) {
        if (err && *err) {
            sp_error_free(*err);
            *err = NULL;
        }
        st->state = sp_xstrdup("missing");
        st->exit_code = -1;
    } else if (r < 0) {
        free(st);
        return r;
    } else {
        st->state = sp_xstrdup(info->state ? info->state : "unknown");
        st->running = info->running && !info->paused;
        st->oom_killed = info->oom_killed;
        st->exit_code = info->exit_code;
        st->container = sp_xstrdup(info->id ? info->id : sb->container_id);
        st->pid = info->pid;
        sp_container_info_free(info);
    }
    *out = st;
    return 0;
}

void sp_sandbox_status_free(sp_sandbox_status *st)
{
    if (!st)
        return;
    free(st->state);
    free(st->container);
    free(st);
}

int sp_local_start(sp_sandbox *sb, sp_error **err)
{
    sp_local *p = sp_sandbox_local(sb, err);
    if (!p)
        return SP_EPODMAN;
    int r = sp_sandbox_lock(sb, err);
    if (r < 0)
        return r;
    sp_container_info *info = NULL;
    sp_error *e = NULL;
    r = sb->container_id ? sb->lops->inspect(&info, p, sb->container_id, &e) : SP_ENOTFOUND;
    sp_error_free(e);
    if (r == SP_ENOTFOUND) {
        /* Gone (removed by hand, lost with the host): make it again from
         * the saved configuration around the same workspace. */
        r = create_container(sb, err);
        if (r == 0)
            r = sp_sandbox_save(sb, err);
    } else if (r == 0 && info->paused) {
        r = sb->lops->unpause(p, sb->container_id, err);
    } else if (r == 0 && !info->running) {
        r = start_and_hand_over(sb, p, err);
        if (r == 0)
            r = sp_sandbox_save(sb, err);
        if (r < 0) {
            /* A container that cannot start again (its runtime state is
             * stale after a reboot) is replaced. */
            sp_error_free(err ? *err : NULL);
            if (err)
                *err = NULL;
            sb->lops->remove(p, sb->container_id, NULL);
            r = create_container(sb, err);
            if (r == 0)
                r = sp_sandbox_save(sb, err);
        }
    } else if (r < 0) {
        r = sp_err_set(err, SP_EPODMAN, 0, "inspect container of sandbox %s", sb->name);
    }
    sp_container_info_free(info);
    sp_sandbox_unlock(sb);
    return r;
}

int sp_local_stop(sp_sandbox *sb, int timeout_s, sp_error **err)
{
    sp_local *p = sp_sandbox_local(sb, err);
    if (!p)
        return SP_EPODMAN;
    if (!sb->container_id)
        return 0;
    sp_sandbox_sessions_close(sb);
    int r = sb->lops->stop(p, sb->container_id, timeout_s < 0 ? 10 : timeout_s, err);
    if (r == SP_ENOTFOUND) {
        if (err) {
            sp_error_free(*err);
            *err = NULL;
        }
        return 0;
    }
    return r;
}

int sp_local_restart(sp_sandbox *sb, sp_error **err)
{
    int r = sp_local_stop(sb, -1, err);
    return r < 0 ? r : sp_local_start(sb, err);
}

int sp_local_pause(sp_sandbox *sb, sp_error **err)
{
    sp_local *p = sp_sandbox_local(sb, err);
    if (!p)
        return SP_EPODMAN;
    /* Rootless Podman on cgroup v1 has no freezer to pause with: the
     * snapshot is taken while the workload runs, and callers say so
     * (sp_sandbox_pauses()). */
    if (!sp_local_pauses(sb))
        return 0;
    return sb->lops->pause(p, sb->container_id, err);
}

bool sp_local_pauses(sp_sandbox *sb)
{
    sp_local *p = sp_sandbox_local(sb, NULL);
    const sp_container_host *h = NULL;
    return !p || sb->lops->host(&h, p, NULL) < 0 || h->can_pause;
}

int sp_local_unpause(sp_sandbox *sb, sp_error **err)
{
    sp_local *p = sp_sandbox_local(sb, err);
    if (!p)
        return SP_EPODMAN;
    if (!sp_local_pauses(sb))
        return 0;
    return sb->lops->unpause(p, sb->container_id, err);
}

/* rm -rf of a folder in our state root; the workload may have written
 * anything below it, so sp_tree_remove() never follows a symlink. */
static int rm_tree(const char *path, sp_error **err)
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
static int rm_state_dir(sp_sandbox *sb, sp_error **err)
{
    sp_error *first = NULL;
    int r = rm_tree(sb->state_dir, &first);
    if (r < 0 && sb->cfg.rootless && geteuid() != 0 &&
        sb->lops->remove_tree(sb->state_dir, NULL) == 0)
        r = 0;
    if (r < 0 && err)
        *err = first;
    else
        sp_error_free(first);
    return r;
}

/* A kept workspace leaves the sandbox: no file in it keeps set-id bits
 * (a set-uid binary the workload made would run with its owner's power on
 * the host). Runs after the container is removed, so nothing the
 * workload runs changes the tree meanwhile. */
static int strip_setid(const sp_tree_entry *e, int when, void *ctx, sp_error **err)
{
    (void)ctx;
    if (when != SP_TREE_PRE || !S_ISREG(e->st->st_mode) || !(e->st->st_mode & (S_ISUID | S_ISGID)))
        return 0;
    if (fchmodat(e->parent_fd, e->name, e->st->st_mode & 0777, 0) < 0)
        return sp_err_errno(err, errno, "chmod", e->path);
    return 0;
}

int sp_local_remove(sp_sandbox *sb, bool keep_workspace, sp_error **err)
{
    int r;
    if (sb->container_id) {
        sp_local *p = sp_sandbox_local(sb, err);
        if (!p)
            return SP_EPODMAN;
        r = sb->lops->remove(p, sb->container_id, err);
        if (r < 0 && r != SP_ENOTFOUND)
            return r;
        if (err && *err) {
            sp_error_free(*err);
            *err = NULL;
        }
    }
    sp_fs_free(sb->fs);
    sb->fs = NULL;
    if (!keep_workspace)
        return 0;
    /* Move the workspace next to the state root's sandboxes folder so that
     * the state folder can go whole. */
    cleanup_free char *kept = sp_xasprintf("%s/kept-workspaces/%s", sb->state_root, sb->name);
    cleanup_free char *parent = sp_xasprintf("%s/kept-workspaces", sb->state_root);
    if ((r = mkdirs(parent, err)) < 0 || (r = rm_tree(kept, err)) < 0)
        return r;
    if (rename(sb->workspace, kept) < 0)
        return sp_err_errno(err, errno, "keep workspace", sb->workspace);
    /* The container is gone: nothing changes the tree under the walk. */
    cleanup_close int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pfd < 0)
        return sp_err_wrap(err, sp_err_errno(err, errno, "open", parent), "keep workspace %s",
                           kept);
    if ((r = sp_tree_walk(pfd, sb->name, strip_setid, NULL, err)) < 0)
        return sp_err_wrap(err, r, "keep workspace %s", kept);
    free(sb->workspace);
    sb->workspace = steal_pointer(&kept);
    return 0;
}

int sp_sandbox_remove(sp_sandbox *sb, bool keep_workspace, sp_error **err)
{
    int r = sp_sandbox_lock(sb, err);
    if (r < 0)
        return r;
    sp_sandbox_sessions_close(sb);
    if ((r = sb->kind->remove(sb, keep_workspace, err)) < 0) {
        sp_sandbox_unlock(sb);
        return r;
    }
    /* sandbox.json goes first: whatever of the rest cannot be removed, the
     * name is free again and `sandpod ls` no longer lists it. The lock is
     * held to the end: a folder without sandbox.json whose lock is free is
     * an incomplete sandbox, which gc and rm remove. */
    cleanup_free char *js = sp_xasprintf("%s/sandbox.json", sb->state_dir);
    if (unlink(js) < 0 && errno != ENOENT) {
        r = sp_err_errno(err, errno, "remove", js);
        sp_sandbox_unlock(sb);
        return r;
    }
    if ((r = rm_state_dir(sb, err)) < 0) {
        /* The name is taken until its folder is gone: move what is left
         * aside, so that it can be made anew and cleaned up later. */
        cleanup_free char *aside =
            sp_xasprintf("%s/removed-%s-%lld", sb->state_root, sb->name, (long long)sp_now_ms());
        if (rename(sb->state_dir, aside) == 0)
            r = sp_err_wrap(err, r,
                            "sandbox %s is removed, but some of its files could not be; "
                            "they are in %s",
                            sb->name, aside);
        else
            r = sp_err_wrap(err, r, "remove sandbox %s", sb->name);
    }
    sp_sandbox_unlock(sb);
    return r;
}

/* Contract: removes <root>/sandboxes/<name> only while it is a folder
 * (not a symlink) with no entry named sandbox.json, its lock is held by
 * us (taken without waiting, never broken) and, with min_age_s, it last
 * changed at least that long ago. Nothing below it is followed: it is
 * moved out of sandboxes/ by name, then removed through fds.
 *
 * Why an age as well as the lock: a create makes the folder a moment
 * before it takes the lock, and nothing on disk tells that moment from a
 * create killed in it. The move makes the worst case benign: a create
 * that was that slow finds its folder gone and fails, leaving nothing. */
int sp_sandbox_remove_incomplete(const char *name, const char *state_root, unsigned min_age_s,
                                 bool dry_run, sp_error **err)
{
    if (!name || !sp_sandbox_name_valid(name))
        return sp_err_set(err, SP_EINVAL, 0, "invalid sandbox name: %s", name ? name : "(null)");
    cleanup_free char *root = NULL;
    int r = sp_sandbox_resolve_root(&root, state_root, err);
    if (r < 0)
        return r;
    sp_error *e = NULL;
    if ((r = sp_state_root_check(root, false, &e)) < 0) {
        if (r != SP_ENOTFOUND)
            return sp_err_give(err, e, r);
        sp_error_free(e);
    }
    cleanup_free char *boxes = sp_xasprintf("%s/sandboxes", root);
    cleanup_close int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    cleanup_close int bfd =
        rfd < 0 ? -1 : openat(rfd, "sandboxes", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    cleanup_close int dfd =
        bfd < 0 ? -1 : openat(bfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
            return sp_err_set(err, SP_ENOTFOUND, errno, "no sandbox named %s", name);
        return sp_err_errno(err, errno, "open", boxes);
    }
    struct stat st;
    if (min_age_s && fstat(dfd, &st) == 0 && st.st_mtime > time(NULL) - (time_t)min_age_s)
        return sp_err_set(err, SP_ERROR, EWOULDBLOCK,
                          "sandbox %s is incomplete but its state folder changed less than %us "
                          "ago: a create may be starting",
                          name, min_age_s);
    /* A dry run makes no lock file; a removal makes one when the create
     * never did, so that a create that comes late waits for us. */
    cleanup_close int lfd =
        openat(dfd, "lock", O_RDWR | O_NOFOLLOW | O_CLOEXEC | (dry_run ? 0 : O_CREAT), 0600);
    if (lfd < 0 && !(dry_run && errno == ENOENT))
        return sp_err_errno(err, errno, "lock the state folder of", name);
    while (lfd >= 0 && flock(lfd, LOCK_EX | LOCK_NB) < 0) {
        if (errno == EWOULDBLOCK)
            return sp_err_set(err, SP_ERROR, EWOULDBLOCK,
                              "sandbox %s is being created (or removed): another sandpod "
                              "holds its lock",
                              name);
        if (errno != EINTR)
            return sp_err_errno(err, errno, "lock the state folder of", name);
    }
    if (fstatat(dfd, "sandbox.json", &st, AT_SYMLINK_NOFOLLOW) == 0)
        return sp_err_set(err, SP_EEXISTS, EEXIST,
                          "sandbox %s is complete (it has a sandbox.json), not incomplete", name);
    if (errno != ENOENT)
        return sp_err_errno(err, errno, "stat the sandbox.json of", name);
    if (dry_run)
        return 0;

    /* Out of sandboxes/ first: the name is free at once, and nothing that
     * still knows the folder by its path (a create that stalled before its
     * lock) writes into what we remove. */
    cleanup_free char *aside = sp_xasprintf("removed-%s-%lld", name, (long long)sp_now_ms());
    bool moved = renameat(bfd, name, rfd, aside) == 0;
    int pfd = moved ? rfd : bfd;
    const char *victim = moved ? aside : name;
    cleanup_free char *left = sp_xasprintf("%s/%s", moved ? root : boxes, victim);
    sp_error *first = NULL;
    r = sp_tree_remove(pfd, victim, 0, &first);
    /* Rootless: what a workload made as another id (a folder a failed
     * remove left) only goes from inside the caller's user namespace. */
    if (r < 0 && geteuid() != 0 && sp_local_engine()->remove_tree(left, NULL) == 0)
        r = 0;
    if (r < 0) {
        sp_err_give(err, first, r);
        return sp_err_wrap(err, r, "sandbox %s was incomplete; what could not be removed is in %s",
                           name, left);
    }
    sp_error_free(first);
    return 0;
}

int sp_sandbox_refresh_init_pid(sp_sandbox *sb)
{
    if (sb->init_pid_asked || !sb->container_id)
        return -1;
    sb->init_pid_asked = true;
    sp_local *p = sp_sandbox_local(sb, NULL);
    sp_container_info *info = NULL;
    if (!p || sb->lops->inspect(&info, p, sb->container_id, NULL) < 0)
        return -1;
    sb->init_pid = info->running ? info->pid : 0;
    sp_container_info_free(info);
    return 0;
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

/* The sandbox names under a state root, sorted: those whose folder holds
 * a sandbox.json (complete), or those whose folder holds none. */
static int list_names(char ***out, const char *state_root, bool complete, sp_error **err)
{
    *out = NULL;
    cleanup_free char *root = NULL;
    int r = sp_sandbox_resolve_root(&root, state_root, err);
    if (r < 0)
        return r;
    cleanup_free char *boxes = sp_xasprintf("%s/sandboxes", root);
    sp_strv sv = {0};
    sp_dirnames names = SP_DIRNAMES_INIT;
    cleanup_close int bfd = open(boxes, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (bfd >= 0 && sp_dir_read(&names, bfd, SP_DIR_BYNAME, 0) == 0) {
        for (size_t i = 0; i < names.n; i++) {
            const char *name = sp_dirnames_name(&names, i);
            if (name[0] == '.' || !sp_sandbox_name_valid(name))
                continue;
            cleanup_free char *js = sp_xasprintf("%s/sandbox.json", name);
            struct stat st;
            bool take = complete
                            ? faccessat(bfd, js, F_OK, 0) == 0
                            : fstatat(bfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                                  S_ISDIR(st.st_mode) &&
                                  fstatat(bfd, js, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
            if (take)
                sp_strv_push(&sv, sp_xstrdup(name));
        }
    }
    sp_dirnames_dispose(&names);
    *out = sp_strv_steal(&sv);
    return 0;
}

int sp_sandbox_list(char ***out, const char *state_root, sp_error **err)
{
    return list_names(out, state_root, true, err);
}

int sp_sandbox_list_incomplete(char ***out, const char *state_root, sp_error **err)
{
    return list_names(out, state_root, false, err);
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

int sp_local_image_pin(char **out, sp_sandbox *sb, sp_error **err)
{
    sp_local *p = sp_sandbox_local(sb, err);
    if (!p)
        return SP_EPODMAN;
    return sb->lops->image_id(out, p, sb->cfg.image, err);
}
