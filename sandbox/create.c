/* Sandboxes opened, made and removed: the name and the state folder, the
 * kind chosen once (kind.h), then the kind does the rest. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fdtree.h"
#include "json.h"
#include "sandbox_internal.h"

static char *generate_name(void)
{
    uint32_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != sizeof(r))
        r = (uint32_t)(sp_now_ms() ^ getpid());
    return sp_xasprintf("sp-%08x", r);
}

/* sandbox.json read, then the kind it names (local unless it names
 * another) reads its own keys. */
static int load(sp_sandbox *sb, sp_error **err)
{
    cleanup_free char *path = sp_xasprintf("%s/sandbox.json", sb->state_dir);
    cJSON *o = NULL;
    int r = sp_sandbox_config_load(sb, path, &o, err);
    if (r == 0) {
        sb->kind = sp_kind_for(sb->engine_kind);
        r = sb->kind->load(sb, o, path, err);
    }
    cJSON_Delete(o);
    return r;
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
    sp_sandbox *sb =
        sp_sandbox_new(root, name, opts ? opts->podman_url : NULL, sp_kind_for(SP_ENGINE_PODMAN));
    if ((r = load(sb, err)) < 0) {
        sp_sandbox_free(sb);
        return r;
    }
    if (opts && opts->exec_path)
        sb->cfg.exec_path = opts->exec_path;
    *out = sb;
    return 0;
}

int sp_sandbox_create(sp_sandbox **out, const sp_sandbox_opts *opts, sp_error **err)
{
    return sp_sandbox_create_seeded(out, opts, NULL, NULL, NULL, err);
}

static bool made_by_valid(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (s[n] < 0x20 || s[n] > 0x7e)
            return false;
    return n <= 64;
}

static int create_checked(sp_sandbox **out, sp_sandbox_opts *opts, const char *name,
                          const char *user, const sp_egress_secrets *secrets,
                          sp_sandbox_seed_fn seed, void *seed_data, sp_error **err);

int sp_sandbox_create_seeded(sp_sandbox **out, const sp_sandbox_opts *opts,
                             const sp_egress_secrets *carried, sp_sandbox_seed_fn seed,
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
    if (sp_sandbox_parse_user(user, &uid, &gid) < 0)
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
    char **egress = NULL;
    int r = sp_sandbox_egress_from_opts(&egress, &o, err);
    sp_strv_free(egress);
    if (r < 0)
        return r;
    if (carried) {
        if (carried->n && !o.allow && !o.deny)
            return sp_err_set(err, SP_EINVAL, 0,
                              "secrets are brokered by the sandbox's egress proxy: give egress "
                              "rules too");
        return create_checked(out, &o, name, user, carried, seed, seed_data, err);
    }
    sp_egress_secrets secrets;
    if ((r = sp_sandbox_secrets_from_opts(&secrets, &o, true, err)) < 0)
        return r;
    r = create_checked(out, &o, name, user, &secrets, seed, seed_data, err);
    sp_egress_secrets_dispose(&secrets);
    return r;
}

/* The rest of create, once the options are checked and the secrets'
 * values read. */
static int create_checked(sp_sandbox **out, sp_sandbox_opts *opts, const char *name,
                          const char *user, const sp_egress_secrets *secrets,
                          sp_sandbox_seed_fn seed, void *seed_data, sp_error **err)
{
    sp_sandbox_opts o = *opts;
    int r;

    cleanup_free char *root = NULL;
    r = sp_sandbox_resolve_root(&root, o.state_root, err);
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
    if ((r = sp_mkdirs(boxes, err)) < 0) {
        sp_engine_free(eng);
        return r;
    }

    sp_sandbox *sb = sp_sandbox_new(root, name, o.podman_url, sp_kind_for(eng->kind));
    sb->engine_kind = eng->kind;
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
    c->env = sp_strv_copy(o.env);
    c->workdir = sp_xstrdup(o.workdir ? o.workdir : SP_WORKSPACE_MOUNT);
    c->user = sp_xstrdup(user);
    c->network = o.network;
    c->memory_bytes = o.memory_bytes ? o.memory_bytes : SP_SANDBOX_DEFAULT_MEMORY;
    c->nano_cpus = o.nano_cpus ? o.nano_cpus : SP_SANDBOX_DEFAULT_NANO_CPUS;
    c->pids_limit = o.pids_limit ? o.pids_limit : SP_SANDBOX_DEFAULT_PIDS;
    c->tmpfs_bytes = o.tmpfs_bytes ? o.tmpfs_bytes : SP_SANDBOX_DEFAULT_TMPFS;
    c->writable_root = o.writable_root;
    c->cap_add = sp_strv_copy(o.cap_add);
    c->exec_path = o.exec_path;
    c->userns = o.userns;
    c->seccomp = o.seccomp;
    c->env_pass = sp_strv_copy(o.env_pass);
    c->setup = sp_strv_copy(o.setup);
    sp_sandbox_egress_from_opts(&c->egress, &o, NULL); /* checked above */
    if (secrets->n) {
        cJSON *j = sp_sandbox_secrets_json(secrets);
        sp_sandbox_secrets_from_json(&c->secrets, j, NULL);
        cJSON_Delete(j);
    }
    sb->new_secrets = secrets;
    c->host_uid = c->host_gid = -1;
    sb->created_at = sp_now_rfc3339();
    sb->made_by = o.made_by ? sp_xstrdup(o.made_by) : NULL;

    if ((r = sp_sandbox_lock(sb, err)) < 0 ||
        (r = sb->kind->create(sb, &o, eng, seed, seed_data, err)) < 0 ||
        (r = sp_sandbox_save(sb, err)) < 0)
        goto fail;
    sb->new_secrets = NULL;
    sp_engine_free(eng);
    sp_sandbox_unlock(sb);
    *out = sb;
    return 0;

fail:
    sb->new_secrets = NULL;
    sp_engine_free(eng);
    sb->kind->discard(sb);
    sp_sandbox_unlock(sb);
    sp_sandbox_rm_state_dir(sb, NULL);
    sp_sandbox_free(sb);
    return r;
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
    if ((r = sp_sandbox_rm_state_dir(sb, err)) < 0) {
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
