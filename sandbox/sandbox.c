/* The sandbox object: state folder, sandbox.json, container lifecycle. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "agent/protocol.h"
#include "sandbox_internal.h"

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

/* mkdir -p for a host path we own (the state root). */
static int mkdirs(const char *path, sp_error **err)
{
    cleanup_free char *p = sp_xstrdup(path);
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0755) < 0 && errno != EEXIST)
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

static cJSON *strv_json(char **v)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; v && v[i]; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(v[i]));
    return a;
}

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

static void strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* Write sandbox.json atomically: temp file, fsync, rename. */
int sp_sandbox_save(sp_sandbox *sb, sp_error **err)
{
    const sp_sandbox_config *c = &sb->cfg;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "version", SANDBOX_JSON_VERSION);
    cJSON_AddStringToObject(o, "name", sb->name);
    cJSON_AddStringToObject(o, "image", c->image);
    if (sb->container_id)
        cJSON_AddStringToObject(o, "container_id", sb->container_id);
    cJSON_AddStringToObject(o, "created_at", sb->created_at ? sb->created_at : "");
    cJSON_AddStringToObject(o, "workspace", sb->workspace);
    cJSON_AddItemToObject(o, "env", strv_json(c->env));
    cJSON_AddStringToObject(o, "workdir", c->workdir);
    cJSON_AddStringToObject(o, "user", c->user);
    cJSON_AddNumberToObject(o, "network", c->network);
    cJSON_AddNumberToObject(o, "memory_bytes", (double)c->memory_bytes);
    cJSON_AddNumberToObject(o, "nano_cpus", (double)c->nano_cpus);
    cJSON_AddNumberToObject(o, "pids_limit", (double)c->pids_limit);
    cJSON_AddNumberToObject(o, "tmpfs_bytes", (double)c->tmpfs_bytes);
    cJSON_AddBoolToObject(o, "writable_root", c->writable_root);
    cJSON_AddItemToObject(o, "cap_add", strv_json(c->cap_add));
    static const char *const paths[] = {"auto", "rest", "fast"};
    cJSON_AddStringToObject(o, "exec_path", paths[c->exec_path <= SP_EXEC_FAST ? c->exec_path : 0]);
    cJSON_AddBoolToObject(o, "agent", c->agent);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text)
        abort();

    cleanup_free char *path = sp_xasprintf("%s/sandbox.json", sb->state_dir);
    cleanup_free char *tmp = sp_xasprintf("%s/.sandbox.json.%d", sb->state_dir, (int)getpid());
    int ret = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        ret = sp_err_errno(err, errno, "write", path);
        goto done;
    }
    if (sp_write_all(fd, text, strlen(text)) < 0 || sp_write_all(fd, "\n", 1) < 0 ||
        fsync(fd) < 0) {
        ret = sp_err_errno(err, errno, "write", path);
        close(fd);
        unlink(tmp);
        goto done;
    }
    close(fd);
    if (rename(tmp, path) < 0) {
        ret = sp_err_errno(err, errno, "write", path);
        unlink(tmp);
    }
done:
    free(text);
    return ret;
}

static const char *jstr(const cJSON *o, const char *k, const char *def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : def;
}

static double jnum(const cJSON *o, const char *k, double def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

/* Numbers in sandbox.json are doubles; UINT64_MAX ("no limit") becomes
 * 2^64, which does not convert back, so clamp. */
static uint64_t jnum_u64(const cJSON *o, const char *k, uint64_t def)
{
    double d = jnum(o, k, (double)def);
    if (d != d || d < 0)
        return def;
    if (d >= 18446744073709551615.0)
        return UINT64_MAX;
    return (uint64_t)d;
}

static int64_t jnum_i64(const cJSON *o, const char *k, int64_t def)
{
    double d = jnum(o, k, (double)def);
    if (d != d || d < -9.2e18 || d > 9.2e18)
        return def;
    return (int64_t)d;
}

static int load(sp_sandbox *sb, sp_error **err)
{
    cleanup_free char *path = sp_xasprintf("%s/sandbox.json", sb->state_dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
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
    cJSON *o = cJSON_ParseWithLength(b.data ? b.data : "", b.len);
    sp_buf_dispose(&b);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return sp_err_set(err, SP_EINVAL, 0, "%s is not valid JSON; the sandbox state is damaged",
                          path);
    }
    sp_sandbox_config *c = &sb->cfg;
    c->image = sp_xstrdup(jstr(o, "image", SP_PODMAN_DEFAULT_IMAGE));
    const char *cid = jstr(o, "container_id", NULL);
    sb->container_id = cid ? sp_xstrdup(cid) : NULL;
    sb->created_at = sp_xstrdup(jstr(o, "created_at", ""));
    c->env = json_strv(cJSON_GetObjectItemCaseSensitive(o, "env"));
    c->workdir = sp_xstrdup(jstr(o, "workdir", SP_WORKSPACE_MOUNT));
    c->user = sp_xstrdup(jstr(o, "user", SP_SANDBOX_DEFAULT_USER));
    c->memory_bytes = jnum_u64(o, "memory_bytes", DEFAULT_MEMORY);
    c->nano_cpus = jnum_u64(o, "nano_cpus", DEFAULT_NANO_CPUS);
    c->pids_limit = jnum_i64(o, "pids_limit", DEFAULT_PIDS);
    c->tmpfs_bytes = jnum_u64(o, "tmpfs_bytes", DEFAULT_TMPFS);
    int net = (int)jnum_i64(o, "network", 0);
    c->network = net >= 0 && net <= SP_PODMAN_NET_HOST ? (sp_podman_network)net : 0;
    const cJSON *wr = cJSON_GetObjectItemCaseSensitive(o, "writable_root");
    c->writable_root = cJSON_IsTrue(wr);
    c->cap_add = json_strv(cJSON_GetObjectItemCaseSensitive(o, "cap_add"));
    /* Sandboxes made before the fast path have neither key: REST it is. */
    const char *ep = jstr(o, "exec_path", "auto");
    c->exec_path = strcmp(ep, "rest") == 0   ? SP_EXEC_REST
                   : strcmp(ep, "fast") == 0 ? SP_EXEC_FAST
                                             : SP_EXEC_AUTO;
    c->agent = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "agent"));
    const char *ws = jstr(o, "workspace", NULL);
    free(sb->workspace);
    sb->workspace = ws ? sp_xstrdup(ws) : sp_xasprintf("%s/workspace", sb->state_dir);
    cJSON_Delete(o);
    return 0;
}

/* ------------------------------------------------------------- handles -- */

static sp_sandbox *sandbox_new(const char *root, const char *name, const char *url)
{
    sp_sandbox *sb = sp_xcalloc(1, sizeof(*sb));
    sb->name = sp_xstrdup(name);
    sb->state_root = sp_xstrdup(root);
    sb->state_dir = sp_xasprintf("%s/sandboxes/%s", root, name);
    sb->workspace = sp_xasprintf("%s/workspace", sb->state_dir);
    sb->podman_url = url ? sp_xstrdup(url) : NULL;
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
    sp_podman_free(sb->podman);
    free(sb->name);
    free(sb->state_root);
    free(sb->state_dir);
    free(sb->workspace);
    free(sb->podman_url);
    free(sb->container_id);
    free(sb->created_at);
    free(sb->cfg.image);
    free(sb->cfg.workdir);
    free(sb->cfg.user);
    strv_free(sb->cfg.env);
    strv_free(sb->cfg.cap_add);
    free(sb);
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

const char *sp_sandbox_created_at(const sp_sandbox *sb)
{
    return sb->created_at;
}

sp_fs *sp_sandbox_fs(sp_sandbox *sb, sp_error **err)
{
    if (!sb->fs && sp_fs_open(&sb->fs, sb->workspace, NULL, err) < 0)
        return NULL;
    return sb->fs;
}

sp_podman *sp_sandbox_podman(sp_sandbox *sb, sp_error **err)
{
    if (sb->podman)
        return sb->podman;
    sp_podman_opts o = SP_PODMAN_OPTS_INIT;
    o.url = sb->podman_url;
    o.state_root = sb->state_root;
    if (sp_podman_open(&sb->podman, &o, err) < 0)
        return NULL;
    return sb->podman;
}

int sp_sandbox_open(sp_sandbox **out, const char *name, const sp_sandbox_opts *opts, sp_error **err)
{
    *out = NULL;
    if (!name || !sp_sandbox_name_valid(name))
        return sp_err_set(err, SP_EINVAL, 0, "invalid sandbox name: %s", name ? name : "(null)");
    cleanup_free char *root = NULL;
    int r = sp_sandbox_resolve_root(&root, opts ? opts->state_root : NULL, err);
    if (r < 0)
        return r;
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

static uid_t chown_uid;
static gid_t chown_gid;

static int chown_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)flag;
    (void)ftw;
    if (st->st_uid != chown_uid || st->st_gid != chown_gid) {
        mode_t mode = st->st_mode;
        if (lchown(path, chown_uid, chown_gid) == 0 && !S_ISLNK(mode) && (mode & 06000))
            chmod(path, mode & 07777);
    }
    return 0;
}

/* As root, hand the workspace to the container's user so that it can write
 * there; the host tools, running as root, can still read and write all of
 * it, and they give new files the owner of their folder. */
static int give_workspace(sp_sandbox *sb, sp_error **err)
{
    uid_t uid;
    gid_t gid;
    if (geteuid() != 0 || parse_user(sb->cfg.user, &uid, &gid) < 0)
        return 0;
    chown_uid = uid;
    chown_gid = gid;
    if (nftw(sb->workspace, chown_one, 32, FTW_PHYS) < 0)
        return sp_err_errno(err, errno, "chown", sb->workspace);
    return 0;
}

static int ensure_image(sp_sandbox *sb, sp_podman *p, sp_error **err)
{
    bool exists = false;
    int r = sp_podman_image_exists(&exists, p, sb->cfg.image, err);
    if (r < 0 || exists)
        return r;
    if (strcmp(sb->cfg.image, SP_PODMAN_DEFAULT_IMAGE) == 0)
        return sp_podman_image_build_busybox(NULL, p, NULL, NULL, false, err);
    return sp_err_set(err, SP_ENOTFOUND, 0,
                      "image %s is not present; pull or import it first (no registry is used)",
                      sb->cfg.image);
}

/* The agent binary to give new containers: $SANDPOD_AGENT ("none" turns
 * the fast path off), the build tree, then the install path. */
static const char *find_agent(void)
{
    const char *e = getenv("SANDPOD_AGENT");
    if (e && *e)
        return strcmp(e, "none") != 0 && access(e, X_OK) == 0 ? e : NULL;
#ifdef SANDPOD_AGENT_BUILD_PATH
    if (access(SANDPOD_AGENT_BUILD_PATH, X_OK) == 0)
        return SANDPOD_AGENT_BUILD_PATH;
#endif
#ifdef SANDPOD_AGENT_INSTALL_PATH
    if (access(SANDPOD_AGENT_INSTALL_PATH, X_OK) == 0)
        return SANDPOD_AGENT_INSTALL_PATH;
#endif
    return NULL;
}

/* Copy the agent into the state folder, so that the bind mount's source
 * stays put whatever happens to the build tree or a later install. */
static int copy_agent(const char *src, const char *dst, sp_error **err)
{
    cleanup_close int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return sp_err_errno(err, errno, "open", src);
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
            int r = sp_err_errno(err, errno, "copy", src);
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

/* Set up <state_dir>/agent/: the binary (root's, read-only in the
 * container) and run/, the socket folder, which only the container's user
 * may enter. agent/ itself is 0700, so no other host user reaches the
 * socket. Only as root: without a user mapping we know, the container's
 * user could not bind there, and a folder others may enter would hand the
 * sandbox to every local user. */
static bool prepare_agent(sp_sandbox *sb, char **bin, char **run)
{
    const char *src = find_agent();
    uid_t uid;
    gid_t gid;
    if (!src || geteuid() != 0 || parse_user(sb->cfg.user, &uid, &gid) < 0)
        return false;
    cleanup_free char *dir = sp_xasprintf("%s/agent", sb->state_dir);
    cleanup_free char *b = sp_xasprintf("%s/sandpod-agent", dir);
    cleanup_free char *r = sp_fast_run_dir(sb);
    if ((mkdir(dir, 0700) < 0 && errno != EEXIST) || chmod(dir, 0700) < 0)
        return false;
    if (copy_agent(src, b, NULL) < 0)
        return false;
    if ((mkdir(r, 0700) < 0 && errno != EEXIST) || chown(r, uid, gid) < 0 || chmod(r, 0700) < 0)
        return false;
    *bin = steal_pointer(&b);
    *run = steal_pointer(&r);
    return true;
}

/* After a start, wait (briefly) until the agent listens, so the first
 * command already takes the fast path. A stale socket from an earlier run
 * refuses connections until the agent binds it anew. */
static void wait_agent(sp_sandbox *sb)
{
    if (!sb->cfg.agent)
        return;
    cleanup_free char *dir = sp_fast_run_dir(sb);
    cleanup_close int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/" SPA_SOCKET_NAME, dfd);
    int64_t end = sp_now_ms() + 2000;
    while (sp_now_ms() < end) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return;
        int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
        close(fd);
        if (r == 0)
            return;
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
}

static int create_container(sp_sandbox *sb, sp_error **err)
{
    sp_podman *p = sp_sandbox_podman(sb, err);
    if (!p)
        return SP_EPODMAN;
    sp_sandbox_sweep_orphans(p, sb->state_root);
    int r = ensure_image(sb, p, err);
    if (r < 0)
        return r;
    const sp_sandbox_config *c = &sb->cfg;
    cleanup_free char *agent_bin = NULL;
    cleanup_free char *agent_run = NULL;
    sb->cfg.agent = prepare_agent(sb, &agent_bin, &agent_run);
    sp_podman_mount mounts[3] = {{sb->workspace, SP_WORKSPACE_MOUNT, false},
                                 {agent_bin, SPA_AGENT_PATH, true},
                                 {agent_run, SPA_RUN_DIR, false}};
    sp_podman_tmpfs tmp = {"/tmp", c->tmpfs_bytes, 01777, false};
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

    sp_podman_container_spec spec = SP_PODMAN_CONTAINER_SPEC_INIT;
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

    /* A container left by an earlier, interrupted attempt holds the name. */
    sp_podman_container_delete(p, cname, true, true, NULL);
    char *id = NULL;
    r = sp_podman_container_create(&id, p, &spec, err);
    if (r < 0)
        return sp_err_wrap(err, r, "create container for sandbox %s", sb->name);
    free(sb->container_id);
    sb->container_id = id;
    r = sp_podman_container_start(p, id, err);
    if (r < 0)
        return sp_err_wrap(err, r, "start container for sandbox %s", sb->name);
    wait_agent(sb);
    return 0;
}

static char *now_rfc3339(void)
{
    char buf[64];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return sp_xstrdup(buf);
}

static void rm_tree(const char *path);

int sp_sandbox_create(sp_sandbox **out, const sp_sandbox_opts *opts, sp_error **err)
{
    *out = NULL;
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    if (opts)
        o = *opts;
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

    cleanup_free char *root = NULL;
    int r = sp_sandbox_resolve_root(&root, o.state_root, err);
    if (r < 0)
        return r;
    cleanup_free char *boxes = sp_xasprintf("%s/sandboxes", root);
    if ((r = mkdirs(boxes, err)) < 0)
        return r;

    sp_sandbox *sb = sandbox_new(root, name, o.podman_url);
    if (mkdir(sb->state_dir, 0755) < 0) {
        r = errno == EEXIST
                ? sp_err_set(err, SP_EEXISTS, EEXIST, "a sandbox named %s already exists", name)
                : sp_err_errno(err, errno, "mkdir", sb->state_dir);
        sp_sandbox_free(sb);
        return r;
    }
    sp_sandbox_config *c = &sb->cfg;
    c->image = sp_xstrdup(o.image ? o.image : SP_PODMAN_DEFAULT_IMAGE);
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
    sb->created_at = now_rfc3339();

    if ((r = sp_sandbox_lock(sb, err)) < 0)
        goto fail;
    if (mkdir(sb->workspace, 0755) < 0) {
        r = sp_err_errno(err, errno, "mkdir", sb->workspace);
        goto fail;
    }
    if (o.n_mounts) {
        sp_hydrate_opts ho = SP_HYDRATE_OPTS_INIT;
        ho.allowed_roots = o.allowed_roots;
        ho.progress = o.progress;
        ho.progress_userdata = o.progress_userdata;
        sp_hydrate_result *hr = NULL;
        r = sp_hydrate(&hr, sb->workspace, o.mounts, o.n_mounts, &ho, err);
        sp_hydrate_result_free(hr);
        if (r < 0)
            goto fail;
    }
    if ((r = give_workspace(sb, err)) < 0)
        goto fail;
    if ((r = sp_sandbox_save(sb, err)) < 0)
        goto fail;
    if ((r = create_container(sb, err)) < 0)
        goto fail;
    if ((r = sp_sandbox_save(sb, err)) < 0)
        goto fail;
    sp_sandbox_unlock(sb);
    *out = sb;
    return 0;

fail:
    if (sb->container_id && sb->podman)
        sp_podman_container_delete(sb->podman, sb->container_id, true, true, NULL);
    sp_sandbox_unlock(sb);
    rm_tree(sb->state_dir);
    sp_sandbox_free(sb);
    return r;
}

/* Describe why the container is not running, for error messages. */
static char *why_down(const sp_podman_container_info *info)
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
    sp_podman *p = sp_sandbox_podman(sb, err);
    if (!p)
        return SP_EPODMAN;
    if (!sb->container_id)
        return sp_err_set(err, SP_EPODMAN, 0, "sandbox %s has no container; run 'sandpod start %s'",
                          sb->name, sb->name);
    sp_podman_container_info *info = NULL;
    sp_error *e = NULL;
    int r = sp_podman_container_inspect(&info, p, sb->container_id, &e);
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
        sp_podman_container_info_free(info);
        return 0;
    }
    cleanup_free char *why = why_down(info);
    sp_podman_container_info_free(info);
    return sp_err_set(err, SP_EPODMAN, 0, "sandbox %s is not running: %s; run 'sandpod start %s'",
                      sb->name, why, sb->name);
}

int sp_sandbox_status_get(sp_sandbox_status **out, sp_sandbox *sb, sp_error **err)
{
    *out = NULL;
    sp_podman *p = sp_sandbox_podman(sb, err);
    if (!p)
        return SP_EPODMAN;
    sp_sandbox_status *st = sp_xcalloc(1, sizeof(*st));
    sp_podman_container_info *info = NULL;
    int r = sb->container_id ? sp_podman_container_inspect(&info, p, sb->container_id, err)
                             : SP_ENOTFOUND;
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
        sp_podman_container_info_free(info);
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

int sp_sandbox_start(sp_sandbox *sb, sp_error **err)
{
    sp_podman *p = sp_sandbox_podman(sb, err);
    if (!p)
        return SP_EPODMAN;
    int r = sp_sandbox_lock(sb, err);
    if (r < 0)
        return r;
    sp_podman_container_info *info = NULL;
    sp_error *e = NULL;
    r = sb->container_id ? sp_podman_container_inspect(&info, p, sb->container_id, &e)
                         : SP_ENOTFOUND;
    sp_error_free(e);
    if (r == SP_ENOTFOUND) {
        /* Gone (removed by hand, lost with the host): make it again from
         * the saved configuration around the same workspace. */
        r = create_container(sb, err);
        if (r == 0)
            r = sp_sandbox_save(sb, err);
    } else if (r == 0 && info->paused) {
        r = sp_podman_container_unpause(p, sb->container_id, err);
    } else if (r == 0 && !info->running) {
        r = sp_podman_container_start(p, sb->container_id, err);
        if (r == 0)
            wait_agent(sb);
        if (r < 0) {
            /* A container that cannot start again (its runtime state is
             * stale after a reboot) is replaced. */
            sp_error_free(err ? *err : NULL);
            if (err)
                *err = NULL;
            sp_podman_container_delete(p, sb->container_id, true, true, NULL);
            r = create_container(sb, err);
            if (r == 0)
                r = sp_sandbox_save(sb, err);
        }
    } else if (r < 0) {
        r = sp_err_set(err, SP_EPODMAN, 0, "inspect container of sandbox %s", sb->name);
    }
    sp_podman_container_info_free(info);
    sp_sandbox_unlock(sb);
    return r;
}

int sp_sandbox_stop(sp_sandbox *sb, int timeout_s, sp_error **err)
{
    sp_podman *p = sp_sandbox_podman(sb, err);
    if (!p)
        return SP_EPODMAN;
    if (!sb->container_id)
        return 0;
    sp_sandbox_sessions_close(sb);
    int r = sp_podman_container_stop(p, sb->container_id, timeout_s < 0 ? 10 : timeout_s, err);
    if (r == SP_ENOTFOUND) {
        if (err) {
            sp_error_free(*err);
            *err = NULL;
        }
        return 0;
    }
    return r;
}

int sp_sandbox_restart(sp_sandbox *sb, sp_error **err)
{
    int r = sp_sandbox_stop(sb, -1, err);
    return r < 0 ? r : sp_sandbox_start(sb, err);
}

int sp_sandbox_pause(sp_sandbox *sb, sp_error **err)
{
    sp_podman *p = sp_sandbox_podman(sb, err);
    if (!p)
        return SP_EPODMAN;
    return sp_podman_container_pause(p, sb->container_id, err);
}

int sp_sandbox_unpause(sp_sandbox *sb, sp_error **err)
{
    sp_podman *p = sp_sandbox_podman(sb, err);
    if (!p)
        return SP_EPODMAN;
    return sp_podman_container_unpause(p, sb->container_id, err);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

static int chmod_dir(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)ftw;
    if ((flag == FTW_D || flag == FTW_DNR) && (st->st_mode & 0700) != 0700)
        chmod(path, 0700);
    return 0;
}

/* rm -rf of a host folder we own; never follows symlinks. */
static void rm_tree(const char *path)
{
    nftw(path, chmod_dir, 32, FTW_PHYS);
    nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS);
}

int sp_sandbox_remove(sp_sandbox *sb, bool keep_workspace, sp_error **err)
{
    int r = sp_sandbox_lock(sb, err);
    if (r < 0)
        return r;
    sp_sandbox_sessions_close(sb);
    if (sb->container_id) {
        sp_podman *p = sp_sandbox_podman(sb, err);
        if (!p) {
            sp_sandbox_unlock(sb);
            return SP_EPODMAN;
        }
        r = sp_podman_container_delete(p, sb->container_id, true, true, err);
        if (r < 0 && r != SP_ENOTFOUND) {
            sp_sandbox_unlock(sb);
            return r;
        }
        if (err && *err) {
            sp_error_free(*err);
            *err = NULL;
        }
    }
    sp_fs_free(sb->fs);
    sb->fs = NULL;
    if (keep_workspace) {
        /* Move the workspace next to the state root's sandboxes folder so
         * that the state folder can go whole. */
        cleanup_free char *kept = sp_xasprintf("%s/kept-workspaces/%s", sb->state_root, sb->name);
        cleanup_free char *parent = sp_xasprintf("%s/kept-workspaces", sb->state_root);
        if ((r = mkdirs(parent, err)) < 0) {
            sp_sandbox_unlock(sb);
            return r;
        }
        rm_tree(kept);
        if (rename(sb->workspace, kept) < 0) {
            r = sp_err_errno(err, errno, "keep workspace", sb->workspace);
            sp_sandbox_unlock(sb);
            return r;
        }
        free(sb->workspace);
        sb->workspace = steal_pointer(&kept);
    }
    sp_sandbox_unlock(sb);
    rm_tree(sb->state_dir);
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int sp_sandbox_list(char ***out, const char *state_root, sp_error **err)
{
    *out = NULL;
    cleanup_free char *root = NULL;
    int r = sp_sandbox_resolve_root(&root, state_root, err);
    if (r < 0)
        return r;
    cleanup_free char *boxes = sp_xasprintf("%s/sandboxes", root);
    sp_strv sv = {0};
    DIR *d = opendir(boxes);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.' || !sp_sandbox_name_valid(de->d_name))
                continue;
            cleanup_free char *js = sp_xasprintf("%s/%s/sandbox.json", boxes, de->d_name);
            if (access(js, F_OK) == 0)
                sp_strv_push(&sv, sp_xstrdup(de->d_name));
        }
        closedir(d);
    }
    if (sv.n > 1)
        qsort(sv.v, sv.n, sizeof(char *), cmp_str);
    *out = sp_strv_steal(&sv);
    return 0;
}
