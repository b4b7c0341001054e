/* Opening a store, its lock and generation number, and the per-operation
 * bookkeeping (refresh, stat cache, pausing the writer). */
#include "store_internal.h"

/* ---------------------------------------------------------------- util -- */

static char *abs_path(const char *p)
{
    sp_buf b = SP_BUF_INIT;
    if (p[0] != '/') {
        char cwd[PATH_MAX];
        if (getcwd(cwd, sizeof(cwd)))
            sp_buf_adds(&b, cwd);
    }
    /* Lexically clean: drop "." and empty components (".." is kept as is:
     * this names a folder for records, it does not resolve anything). */
    const char *s = p;
    while (*s) {
        while (*s == '/')
            s++;
        const char *e = strchr(s, '/');
        size_t l = e ? (size_t)(e - s) : strlen(s);
        if (l && !(l == 1 && s[0] == '.')) {
            sp_buf_addc(&b, '/');
            sp_buf_add(&b, s, l);
        }
        s += l;
    }
    if (!b.len)
        sp_buf_addc(&b, '/');
    return sp_buf_steal(&b);
}

uint64_t sp_snap_read_generation(sp_snapstore *s)
{
    char buf[32] = {0};
    int fd = openat(s->odb.dirfd, GEN_NAME, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    return n > 0 ? strtoull(buf, NULL, 10) : 0;
}

int sp_snap_write_generation(sp_snapstore *s, uint64_t gen, sp_error **err)
{
    char buf[32], tmp[64];
    int l = snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)gen);
    snprintf(tmp, sizeof(tmp), GEN_NAME ".tmp.%ld", (long)getpid());
    int fd = openat(s->odb.dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return sp_err_errno(err, errno, "write", GEN_NAME);
    int r = sp_write_all(fd, buf, (size_t)l);
    close(fd);
    if (r < 0 || renameat(s->odb.dirfd, tmp, s->odb.dirfd, GEN_NAME) < 0) {
        int e = errno;
        unlinkat(s->odb.dirfd, tmp, 0);
        return sp_err_errno(err, e, "write", GEN_NAME);
    }
    return 0;
}

int sp_snap_lock(sp_snapstore *s, sp_error **err)
{
    if (s->lockfd < 0)
        return 0; /* a read-only store without a lock file: no writer */
    while (flock(s->lockfd, LOCK_EX) < 0) {
        if (errno != EINTR)
            return sp_err_errno(err, errno, "lock", s->store);
    }
    return 0;
}

void sp_snap_unlock(sp_snapstore *s)
{
    if (s->lockfd >= 0)
        flock(s->lockfd, LOCK_UN);
}

int sp_snap_lock_write(sp_snapstore *s, sp_error **err)
{
    if (s->read_only)
        return sp_err_set(err, SP_EREADONLY, EROFS,
                          "snapshot store %s is read-only: snapshots can be listed, compared, "
                          "exported and restored, not added or removed",
                          s->store);
    return sp_snap_lock(s, err);
}

/* Is the folder open on fd inside (or equal to) the folder whose stat is
 * root? Walks up with ".." to the filesystem root. */
static bool inside(int fd, const struct stat *root)
{
    int cur = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    bool in = false;
    for (int depth = 0; cur >= 0 && depth < 4096; depth++) {
        struct stat st;
        if (fstat(cur, &st) < 0)
            break;
        if (st.st_dev == root->st_dev && st.st_ino == root->st_ino) {
            in = true;
            break;
        }
        int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        struct stat ust;
        if (up < 0 || fstat(up, &ust) < 0 || (ust.st_dev == st.st_dev && ust.st_ino == st.st_ino)) {
            if (up >= 0)
                close(up);
            break;
        }
        close(cur);
        cur = up;
    }
    if (cur >= 0)
        close(cur);
    return in;
}

/* The store must not be visible to the container: refuse one in the
 * workspace (its nearest existing ancestor decides for a new one). */
static int check_store_outside(const char *store, const struct stat *root_st, sp_error **err)
{
    cleanup_free char *p = sp_xstrdup(store);
    for (;;) {
        int fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
            bool in = inside(fd, root_st);
            close(fd);
            if (in)
                return sp_err_set(err, SP_EINVAL, 0,
                                  "snapshot store must be outside the workspace: %s", store);
            return 0;
        }
        char *slash = strrchr(p, '/');
        if (!slash || slash == p)
            return 0;
        *slash = '\0';
    }
}

/* ---------------------------------------------------------------- open -- */

void sp_snap_drop_tree(sp_snapstore *s)
{
    sp_snode_free(s->tree, s->track ? sp_track_unwatch : NULL, s->track);
    s->tree = NULL;
    s->cache_dirty = false;
    if (s->track)
        sp_track_reset(s->track);
}

void sp_snap_begin_op(sp_snapstore *s, sp_scan *sc)
{
    memset(&s->stats, 0, sizeof(s->stats));
    s->stats.elapsed_ms = sp_now_ms();
    s->odb.written = 0;
    sp_scan_init(sc, &s->odb, &s->stats);
    sc->budget = s->opts.max_data_bytes ? s->opts.max_data_bytes : SNAP_DEFAULT_BUDGET;
    sc->progress = s->opts.progress;
    sc->progress_ud = s->opts.progress_userdata;
    sc->trust_ids = s->opts.trust_ids;
}

void sp_snap_end_op(sp_snapstore *s, sp_scan *sc)
{
    s->stats.objects_written = s->odb.written;
    s->stats.elapsed_ms = sp_now_ms() - s->stats.elapsed_ms;
    sp_scan_dispose(sc);
}

/* Bring s->tree up to date with the workspace and compute its tree ids:
 * from tracked events when tracking can vouch for them, else with a full
 * stat walk. Objects for everything new are in the store afterwards. */
int sp_snap_refresh(sp_snapstore *s, sp_scan *sc, sp_error **err)
{
    uint64_t gen = sp_snap_read_generation(s);
    if (gen != s->generation) {
        sp_snap_drop_tree(s);
        s->generation = gen;
    }
    if (!s->tree) {
        s->tree = sp_cache_load(s->odb.dirfd, &s->root_st, gen);
        if (!s->tree) {
            s->tree = sp_snode_new("", 0, SN_DIR);
            s->tree->mode = 0755;
            s->tree->flags |= SN_DIRTY;
        }
        if (s->track)
            sp_track_reset(s->track);
    }
    uint64_t hashed = s->stats.files_hashed;
    int r = 1;
    if (s->track && sp_track_ok(s->track)) {
        sc->track = s->track;
        r = sp_rescan(sc, s->track, s->rootfd, s->tree, err);
    }
    if (r == 1) {
        s->stats.full_walk = true;
        if (s->track) {
            sp_track_begin_full(s->track);
            sc->track = s->track;
            sp_track_watch(s->track, s->rootfd, s->tree);
        }
        struct stat st;
        if (fstat(s->rootfd, &st) < 0) {
            r = sp_err_errno(err, errno, "stat", s->root);
        } else {
            if ((st.st_mode & 07777u) != s->tree->mode) {
                s->tree->mode = st.st_mode & 07777;
                s->tree->flags |= SN_DIRTY;
            }
            s->tree->ino = (uint64_t)st.st_ino;
            s->tree->dev = (uint64_t)st.st_dev;
            lseek(s->rootfd, 0, SEEK_SET);
            r = sp_scan_dir(sc, s->rootfd, s->tree, err);
        }
    }
    if (r < 0) {
        if (s->track)
            sp_track_reset(s->track);
        return r;
    }
    if ((s->tree->flags & SN_DIRTY) || s->stats.files_hashed != hashed || sc->trusted)
        s->cache_dirty = true;
    return sp_tree_finalize(&s->odb, s->tree, err);
}

static int save_cache(sp_snapstore *s, sp_error **err)
{
    if (!s->tree || !s->cache_dirty || s->read_only)
        return 0;
    int r = sp_cache_save(s->odb.dirfd, s->tree, &s->root_st, s->generation, err);
    if (r == 0)
        s->cache_dirty = false;
    return r;
}

/* After an operation that is done (a snapshot whose ref is written, a
 * finished restore), the stat cache only saves the next one work: failing
 * to write it (a full disk) must not turn that success into an error. A
 * slot torn that way fails its checksum and the other one is used. */
void sp_snap_save_cache_after(sp_snapstore *s)
{
    if (!s->track)
        (void)save_cache(s, NULL);
}

int sp_snap_do_pause(sp_snapstore *s, sp_error **err)
{
    if (!s->opts.pause)
        return 0;
    int r = s->opts.pause(s->opts.userdata, err);
    if (r < 0)
        return err && *err ? sp_err_wrap(err, r, "pause") : r;
    return 0;
}

/* Unpause, keeping the first error: ret is the operation's result. */
int sp_snap_do_unpause(sp_snapstore *s, int ret, sp_error **err)
{
    if (!s->opts.unpause)
        return ret;
    sp_error *e = NULL;
    int r = s->opts.unpause(s->opts.userdata, &e);
    if (r < 0 && ret == 0) {
        if (err) {
            *err = e;
            e = NULL;
            sp_err_wrap(err, r, "unpause");
        }
        ret = r;
    }
    sp_error_free(e);
    return ret;
}

int sp_snapstore_open(sp_snapstore **out, const char *workspace, const char *store_dir,
                      const sp_snapstore_opts *opts, sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_SNAPSTORE_OPTS_VERSION, "sp_snapstore_opts", err) < 0)
        return SP_EINVAL;
    if (!workspace || !*workspace)
        return sp_err_set(err, SP_EINVAL, 0, "workspace folder is missing");
    if (!store_dir || !*store_dir)
        return sp_err_set(err, SP_EINVAL, 0, "snapshot store folder is missing");
    sp_snapstore_opts o = SP_SNAPSTORE_OPTS_INIT;
    if (opts && opts->version == 1) {
        /* A caller built against the first layout: its struct ends there. */
        memcpy(&o, opts, offsetof(sp_snapstore_opts, keep_setid));
        o.version = SP_SNAPSTORE_OPTS_VERSION;
    } else if (opts && opts->version == 2) {
        memcpy(&o, opts, offsetof(sp_snapstore_opts, trust_ids));
        o.version = SP_SNAPSTORE_OPTS_VERSION;
    } else if (opts) {
        o = *opts;
    }
    sp_snapstore *s = sp_xcalloc(1, sizeof(*s));
    s->rootfd = s->lockfd = -1;
    s->odb.dirfd = s->odb.objfd = -1;
    s->opts = o;
    s->root = abs_path(workspace);
    s->store = abs_path(store_dir);
    int r = sp_fs_open(&s->fs, s->root, NULL, err);
    if (r < 0)
        goto fail;
    s->rootfd = openat(sp_fs_root_fd(s->fs), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->rootfd < 0 || fstat(s->rootfd, &s->root_st) < 0) {
        r = sp_err_errno(err, errno, "open workspace", s->root);
        goto fail;
    }
    if ((r = check_store_outside(s->store, &s->root_st, err)) < 0)
        goto fail;
    if ((r = sp_odb_open(&s->odb, s->store, !o.no_create, err)) < 0)
        goto fail;
    s->odb.track_writes = o.durable;
    {
        int sfd = fcntl(s->odb.dirfd, F_DUPFD_CLOEXEC, 3);
        bool in = sfd >= 0 && inside(sfd, &s->root_st);
        if (sfd >= 0)
            close(sfd);
        if (in) {
            r = sp_err_set(err, SP_EINVAL, 0, "snapshot store must be outside the workspace: %s",
                           s->store);
            goto fail;
        }
    }
    s->lockfd =
        openat(s->odb.dirfd, "sandpod/lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (s->lockfd < 0 && errno == EROFS) {
        /* A store on read-only media (a mounted backup, say) still serves
         * reads; its lock, if any, is taken shared by no one else. */
        s->read_only = true;
        s->lockfd = openat(s->odb.dirfd, "sandpod/lock", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (s->lockfd < 0 && errno == ENOENT)
            errno = 0;
        s->odb.dry = true; /* hash the workspace, store nothing */
    }
    if (s->lockfd < 0 && errno != 0) {
        r = sp_err_errno(err, errno, "lock snapshot store", s->store);
        goto fail;
    }
    s->generation = sp_snap_read_generation(s);
    /* Tracking only saves work: without inotify (out of instances, say)
     * every operation walks the tree, as a one-shot process does. */
    if (o.track_changes && sp_track_new(&s->track, NULL) == 0) {
        sp_scan sc;
        if ((r = sp_snap_lock(s, err)) < 0)
            goto fail;
        sp_snap_begin_op(s, &sc);
        r = sp_snap_refresh(s, &sc, err);
        if (r == 0)
            r = save_cache(s, err);
        sp_snap_end_op(s, &sc);
        sp_snap_unlock(s);
        if (r < 0)
            goto fail;
    }
    *out = s;
    return 0;
fail:
    sp_snapstore_free(s);
    return r;
}

void sp_snapstore_free(sp_snapstore *s)
{
    if (!s)
        return;
    if (s->track && s->tree && s->cache_dirty && s->lockfd >= 0 && sp_snap_lock(s, NULL) == 0) {
        if (sp_snap_read_generation(s) == s->generation)
            (void)save_cache(s, NULL);
        sp_snap_unlock(s);
    }
    sp_snode_free(s->tree, NULL, NULL);
    for (size_t i = 0; i < sizeof(s->tcache) / sizeof(s->tcache[0]); i++)
        sp_tdir_dispose(&s->tcache[i].t);
    sp_track_free(s->track);
    if (s->lockfd >= 0)
        close(s->lockfd);
    if (s->rootfd >= 0)
        close(s->rootfd);
    sp_odb_close(&s->odb);
    sp_fs_free(s->fs);
    free(s->root);
    free(s->store);
    free(s);
}

const char *sp_snapstore_path(const sp_snapstore *s)
{
    return s->store;
}

const char *sp_snapstore_workspace(const sp_snapstore *s)
{
    return s->root;
}

int sp_snapstore_fd(const sp_snapstore *s)
{
    return s->track ? sp_track_fd(s->track) : -1;
}

int sp_snapstore_poll(sp_snapstore *s, sp_error **err)
{
    return s->track ? sp_track_drain(s->track, err) : 0;
}

void sp_snapstore_invalidate(sp_snapstore *s)
{
    if (s->track)
        sp_track_reset(s->track);
}

void sp_snapstore_last_stats(const sp_snapstore *s, sp_snapstore_stats *out)
{
    *out = s->stats;
}
