/* Restore: make a folder equal to a stored tree, writing only what differs.
 *
 * Contract: every change is made relative to a folder fd obtained by
 * openat(O_DIRECTORY | O_NOFOLLOW) from the workspace root fd, one name at
 * a time. A symlink is never followed: where the snapshot has a folder and
 * the workspace has a symlink (say, one the container planted pointing
 * out), the symlink is unlinked and a real folder made in its place. Files
 * are written to a temp name in their folder and renamed over the old
 * name; symlinks likewise. Permission bits are set exactly with fchmod (a
 * folder is made writable for the time we change it when we are not
 * root), except that files and fifos get no set-id bits unless the caller
 * keeps them (sp_mode_out): a restore as root must not hand the workload
 * a set-id binary owned by someone else. Deletion never follows symlinks either. As root, new
 * entries get the owner of the folder they are made in, so the container's user can still change
 * them.
 *
 * A restore killed halfway leaves some entries old and some new, plus
 * perhaps a temp file; running it again looks at the workspace afresh,
 * finds exactly those differences (temp files are extra entries) and
 * finishes the job. Nothing is fsync'ed: a killed process loses nothing
 * the kernel already has. Timestamps are not restored. */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>

#include "fdtree.h"
#include "snap_internal.h"

static int fail_at(sp_scan *sc, int e, const char *what, sp_error **err)
{
    return sp_err_errno(err, e, what, sc->path.len ? sc->path.data : ".");
}

/* A temp name no one else picks: a random prefix per process, a counter.
 * Restores run in several threads at once (one store each): the seed is
 * made once and the counter is atomic, so no two calls get one name. */
static uint64_t temp_seed;
static pthread_once_t temp_seed_once = PTHREAD_ONCE_INIT;
static _Atomic uint64_t temp_counter;

static void make_temp_seed(void)
{
    if (getrandom(&temp_seed, sizeof(temp_seed), GRND_NONBLOCK) != sizeof(temp_seed))
        temp_seed = (uint64_t)sp_now_ms() * 2654435761u ^ (uint64_t)getpid() << 24;
}

static void temp_name(char out[48])
{
    pthread_once(&temp_seed_once, make_temp_seed);
    uint64_t n = atomic_fetch_add_explicit(&temp_counter, 1, memory_order_relaxed) + 1;
    snprintf(out, 48, ".sandpod-restore-%016llx",
             (unsigned long long)(temp_seed ^ n * 0x9e3779b97f4a7c15ull));
}

/* Remove (dfd, name) whatever it is, folders wholly, never following a
 * symlink (sp_tree_remove: iterative, no depth limit); errors name the
 * path in the workspace. */
static int rm_name(sp_scan *sc, int dfd, const char *name, sp_error **err)
{
    sp_error *e = NULL;
    int r = sp_tree_remove(dfd, name, 0, &e);
    if (r < 0 && e && e->sys_errno)
        r = fail_at(sc, e->sys_errno, "delete", err);
    else if (r < 0)
        r = sp_err_set(err, r, 0, "%s: %s", sc->path.len ? sc->path.data : ".",
                       e ? e->message : "cannot delete");
    sp_error_free(e);
    return r;
}

/* Rename tmp over name, clearing whatever is in the way (a folder cannot be
 * replaced by rename). */
static int place(sp_scan *sc, int dfd, const char *tmp, const char *name, sp_error **err)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        if (renameat(dfd, tmp, dfd, name) == 0)
            return 0;
        int e = errno;
        if (e != EISDIR && e != ENOTEMPTY && e != EEXIST && e != ENOTDIR) {
            unlinkat(dfd, tmp, 0);
            return fail_at(sc, e, "write", err);
        }
        int r = rm_name(sc, dfd, name, err);
        if (r < 0) {
            unlinkat(dfd, tmp, 0);
            return r;
        }
    }
    unlinkat(dfd, tmp, 0);
    return fail_at(sc, EBUSY, "write", err);
}

struct parent {
    int fd;
    struct stat st;
    bool root;  /* we are root */
    bool chown; /* give new entries the folder's owner (root, and it is not ours) */
};

static void set_node(sp_scan *sc, snode *n, const struct stat *st, const sp_tentry *te)
{
    sp_snode_set_stat(n, st);
    n->oid = te->oid;
    if (te->sparse)
        n->flags |= SN_SPARSE;
    else
        n->flags &= (uint8_t)~SN_SPARSE;
    if (n->mtime_ns >= sc->start_ns || n->ctime_ns >= sc->start_ns)
        n->flags |= SN_RACY;
    else
        n->flags &= (uint8_t)~SN_RACY;
}

/* A file in sparse form goes to a new (empty) file: its size first, so
 * everything not written is a hole, then each extent at its offset. */
static int sparse_map(void *ud, uint64_t size, const sp_extent *v, size_t n, sp_error **err)
{
    (void)v;
    (void)n;
    if (ftruncate(*(int *)ud, (off_t)size) < 0)
        return sp_err_errno(err, errno, "write", NULL); /* the caller names the file */
    return 0;
}

static int sparse_data(void *ud, uint64_t off, const void *p, size_t n, sp_error **err)
{
    int fd = *(int *)ud;
    const char *b = p;
    while (n > 0) {
        ssize_t w = pwrite(fd, b, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return sp_err_errno(err, w < 0 ? errno : EIO, "write", NULL);
        b += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

static int write_file(sp_scan *sc, const struct parent *p, const sp_tentry *te, snode *n,
                      sp_error **err)
{
    char tmp[48];
    temp_name(tmp);
    int fd = openat(p->fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return fail_at(sc, errno, "write", err);
    int r;
    if (te->sparse) {
        sp_sparse_sink sink = {sparse_map, sparse_data, &fd};
        r = sp_sparse_stream(sc->odb, &te->oid, &sink, sc->path.len ? sc->path.data : ".", err);
    } else {
        r = sp_odb_blob_to_fd(sc->odb, &te->oid, fd, err);
    }
    if (r < 0)
        r = sp_err_wrap(err, r, "restore %s", sc->path.len ? sc->path.data : ".");
    if (r == 0 && p->chown)
        (void)!fchown(fd, p->st.st_uid, p->st.st_gid);
    if (r == 0 && fchmod(fd, te->mode) < 0)
        r = fail_at(sc, errno, "chmod", err);
    if (r == 0 && sc->durable && fsync(fd) < 0)
        r = fail_at(sc, errno, "sync", err);
    if (r < 0) {
        close(fd);
        unlinkat(p->fd, tmp, 0);
        return r;
    }
    /* The stat data before the rename (which changes ctime): the entry is
     * racy either way, so the next walk reads it again. */
    struct stat st;
    if (r == 0 && fstat(fd, &st) < 0)
        r = fail_at(sc, errno, "stat", err);
    if (r == 0)
        r = place(sc, p->fd, tmp, te->name, err);
    close(fd);
    if (r == 0) {
        set_node(sc, n, &st, te);
        n->flags |= SN_RACY;
    }
    return r;
}

static int make_link(sp_scan *sc, const struct parent *p, const sp_tentry *te, snode *n,
                     sp_error **err)
{
    sp_buf target = SP_BUF_INIT;
    int type = 0;
    int r = sp_odb_read(sc->odb, &te->oid, &type, &target, err);
    if (r < 0)
        return r;
    if (type != SP_OBJ_BLOB || target.len == 0 || memchr(target.data, '\0', target.len)) {
        sp_buf_dispose(&target);
        return sp_err_set(err, SP_EINVAL, 0, "snapshot holds a bad symlink target: %s",
                          sc->path.data);
    }
    char tmp[48];
    temp_name(tmp);
    if (symlinkat(target.data, p->fd, tmp) < 0)
        r = fail_at(sc, errno, "symlink", err);
    sp_buf_dispose(&target);
    if (r < 0)
        return r;
    if (p->chown)
        (void)!fchownat(p->fd, tmp, p->st.st_uid, p->st.st_gid, AT_SYMLINK_NOFOLLOW);
    if ((r = place(sc, p->fd, tmp, te->name, err)) < 0)
        return r;
    struct stat st;
    if (fstatat(p->fd, te->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return fail_at(sc, errno, "stat", err);
    set_node(sc, n, &st, te);
    return 0;
}

static int make_fifo(sp_scan *sc, const struct parent *p, const sp_tentry *te, snode *n,
                     sp_error **err)
{
    for (int attempt = 0;; attempt++) {
        if (mkfifoat(p->fd, te->name, 0600) == 0)
            break;
        if (errno != EEXIST || attempt > 2)
            return fail_at(sc, errno, "mkfifo", err);
        int r = rm_name(sc, p->fd, te->name, err);
        if (r < 0)
            return r;
    }
    if (p->chown)
        (void)!fchownat(p->fd, te->name, p->st.st_uid, p->st.st_gid, AT_SYMLINK_NOFOLLOW);
    if (fchmodat(p->fd, te->name, te->mode, AT_SYMLINK_NOFOLLOW) < 0)
        return fail_at(sc, errno, "chmod", err);
    struct stat st;
    if (fstatat(p->fd, te->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return fail_at(sc, errno, "stat", err);
    set_node(sc, n, &st, te);
    return 0;
}

static int make_dir(sp_scan *sc, const struct parent *p, const sp_tentry *te, snode *n,
                    sp_error **err)
{
    for (int attempt = 0;; attempt++) {
        if (mkdirat(p->fd, te->name, 0700) == 0)
            break;
        if (errno != EEXIST || attempt > 2)
            return fail_at(sc, errno, "mkdir", err);
        int r = rm_name(sc, p->fd, te->name, err);
        if (r < 0)
            return r;
    }
    if (p->chown)
        (void)!fchownat(p->fd, te->name, p->st.st_uid, p->st.st_gid, AT_SYMLINK_NOFOLLOW);
    int cfd = openat(p->fd, te->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (cfd < 0)
        return fail_at(sc, errno, "open folder", err);
    struct stat st;
    if (fstat(cfd, &st) == 0)
        sp_snode_set_stat(n, &st);
    n->mode = 0700;
    n->oid = sp_empty_tree;
    n->flags |= SN_DIRTY;
    if (sc->track)
        sp_track_watch(sc->track, cfd, n);
    sc->depth++;
    int r = sp_restore_dir(sc, cfd, n, &te->oid, err);
    sc->depth--;
    close(cfd);
    return r;
}

static int create(sp_scan *sc, const struct parent *p, const sp_tentry *te, snode *n,
                  sp_error **err)
{
    sc->stats->paths_changed++;
    switch (te->type) {
    case SN_FILE:
        return write_file(sc, p, te, n, err);
    case SN_LINK:
        return make_link(sc, p, te, n, err);
    case SN_FIFO:
        return make_fifo(sc, p, te, n, err);
    default:
        return make_dir(sc, p, te, n, err);
    }
}

static int chmod_entry(sp_scan *sc, const struct parent *p, const sp_tentry *te, snode *n,
                       sp_error **err)
{
    sc->stats->paths_changed++;
    if (fchmodat(p->fd, te->name, te->mode, AT_SYMLINK_NOFOLLOW) < 0)
        return fail_at(sc, errno, "chmod", err);
    struct stat st;
    if (fstatat(p->fd, te->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return fail_at(sc, errno, "stat", err);
    if ((uint32_t)sp_snode_type_of(st.st_mode) != n->type)
        return fail_at(sc, EAGAIN, "chmod", err);
    /* The content is what it was: keep the id, take the new ctime. */
    sp_oid keep = n->oid;
    sp_tentry same = *te;
    same.oid = keep;
    set_node(sc, n, &st, &same);
    return 0;
}

static sp_tentry *find_te(const sp_tdir *td, const char *name)
{
    size_t lo = 0, hi = td->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(td->v[mid].name, name);
        if (c == 0)
            return &td->v[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static void progress(sp_scan *sc)
{
    if (sc->progress && sc->stats->paths_changed >= sc->next_progress) {
        sc->next_progress = sc->stats->paths_changed + 1000;
        sp_snapshot_progress pr = {sc->phase, sc->stats->entries, sc->stats->files_hashed,
                                   sc->stats->bytes_hashed, sc->stats->paths_changed};
        sc->progress(sc->progress_ud, &pr);
    }
}

int sp_restore_plan(sp_scan *sc, const snode *dir, const sp_oid *tree, uint64_t *bytes,
                    sp_error **err)
{
    if (dir && !(dir->flags & SN_DIRTY) && sp_oid_equal(&dir->oid, tree))
        return 0;
    if (sc->depth >= SNAP_MAX_DEPTH)
        return 0; /* the restore itself says so */
    sp_tdir td;
    int r = sp_tree_read(&td, sc->odb, tree, err);
    for (size_t j = 0; j < td.n && r == 0; j++) {
        const sp_tentry *te = &td.v[j];
        const snode *k = dir ? sp_snode_find(dir, te->name, strlen(te->name), NULL) : NULL;
        if (k && k->type != te->type)
            k = NULL;
        if (te->type == SN_FILE && k && sp_oid_equal(&k->oid, &te->oid))
            continue;
        if (te->type != SN_DIR && te->type != SN_FILE)
            continue;
        size_t pl = sp_scan_push(sc, te->name);
        if (te->type == SN_DIR) {
            sc->depth++;
            r = sp_restore_plan(sc, k, &te->oid, bytes, err);
            sc->depth--;
        } else {
            /* A sparse blob's size is its data and a few header lines. */
            uint64_t size = 0;
            r = sp_odb_object_size(sc->odb, &te->oid, &size, err);
            if (r == 0 && sc->budget && (size > sc->budget || *bytes > sc->budget - size))
                r = sp_scan_over_budget(err, sc->path.data, size, sc->budget);
            *bytes += size;
        }
        sp_scan_pop(sc, pl);
    }
    sp_tdir_dispose(&td);
    return r;
}

int sp_restore_dir(sp_scan *sc, int dfd, snode *dir, const sp_oid *tree, sp_error **err)
{
    if (!(dir->flags & SN_DIRTY) && sp_oid_equal(&dir->oid, tree))
        return 0;
    if (sc->depth >= SNAP_MAX_DEPTH)
        return sp_err_set(err, SP_ETOOBIG, 0, "folders nested deeper than %d levels: %s",
                          SNAP_MAX_DEPTH, sc->path.data);
    sp_tdir td;
    int r = sp_tree_read(&td, sc->odb, tree, err);
    if (r < 0)
        return r;
    struct parent p = {dfd, {0}, sc->euid == 0, false};
    if (fstat(dfd, &p.st) < 0) {
        r = fail_at(sc, errno, "stat", err);
        goto done;
    }
    p.chown = p.root && (p.st.st_uid != sc->euid || p.st.st_gid != sc->egid);
    /* Make the folder ours to change for now; its bits are set at the end. */
    if (!p.root && (p.st.st_mode & 0700) != 0700 &&
        fchmod(dfd, (p.st.st_mode & 07777) | 0700) < 0) {
        r = fail_at(sc, errno, "chmod", err);
        goto done;
    }

    /* Removals first: extra entries, and entries whose type changes. */
    for (uint32_t i = 0; i < dir->nkids && r == 0;) {
        snode *k = dir->kids[i];
        const sp_tentry *te = find_te(&td, k->name);
        if (te && te->type == k->type) {
            i++;
            continue;
        }
        size_t pl = sp_scan_push(sc, k->name);
        r = rm_name(sc, dfd, k->name, err);
        sp_scan_pop(sc, pl);
        if (r == 0) {
            sp_scan_drop(sc, sp_snode_take(dir, i));
            sc->stats->paths_changed++;
            progress(sc);
        }
    }

    /* Set when an entry ends up with other bits than the snapshot's (its
     * set-id bits left out): then this folder is not the snapshot's tree,
     * and its id is computed again from the nodes. */
    bool differs = false;
    for (size_t j = 0; j < td.n && r == 0; j++) {
        const sp_tentry *stored = &td.v[j];
        /* What is written: the stored entry with the bits it gets outside.
         * An entry that already equals the stored one is left as it is. */
        sp_tentry out = *stored;
        out.mode = sp_mode_out(stored->type, stored->mode, sc->keep_setid);
        const sp_tentry *te = &out;
        size_t nlen = strlen(te->name);
        uint32_t pos;
        snode *k = sp_snode_find(dir, te->name, nlen, &pos);
        size_t pl = sp_scan_push(sc, te->name);
        if (!k) {
            k = sp_snode_new(te->name, nlen, te->type);
            sp_snode_insert(dir, pos, k);
            r = create(sc, &p, te, k, err);
        } else if (te->type == SN_DIR) {
            if ((k->flags & SN_DIRTY) || !sp_oid_equal(&k->oid, &te->oid)) {
                int cfd = openat(dfd, te->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (cfd < 0 && errno == EACCES && !p.root) {
                    (void)fchmodat(dfd, te->name, 0700, AT_SYMLINK_NOFOLLOW);
                    cfd = openat(dfd, te->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                }
                if (cfd >= 0) {
                    sc->depth++;
                    r = sp_restore_dir(sc, cfd, k, &te->oid, err);
                    sc->depth--;
                    close(cfd);
                } else if (errno == ELOOP || errno == ENOTDIR || errno == ENOENT) {
                    /* Not the folder we saw any more: start it afresh. */
                    sp_scan_drop(sc, sp_snode_take(dir, pos));
                    k = sp_snode_new(te->name, nlen, te->type);
                    sp_snode_insert(dir, pos, k);
                    r = create(sc, &p, te, k, err);
                } else {
                    r = fail_at(sc, errno, "open folder", err);
                }
            }
        } else if (!sp_oid_equal(&k->oid, &te->oid)) {
            r = create(sc, &p, te, k, err);
        } else if (k->mode != stored->mode && k->mode != te->mode) {
            r = chmod_entry(sc, &p, te, k, err);
        }
        if (r == 0 && te->type != SN_DIR && k->mode != stored->mode)
            differs = true;
        sp_scan_pop(sc, pl);
        progress(sc);
    }
    if (r < 0) {
        sp_snode_dirty_up(dir);
        goto done;
    }
    /* Only when it differs: a chmod costs a syscall and an event. */
    uint32_t now_mode =
        (!p.root && (p.st.st_mode & 0700) != 0700) ? 0xffffffffu : (p.st.st_mode & 07777u);
    /* The workspace root is the host's folder too: whatever the workload
     * made of its mode, it comes back no more open than 0755 and with no
     * set-id or sticky bit (a world-writable root is writable by every
     * host user who can reach it). */
    uint32_t want = sc->depth == 0 ? SNAP_ROOT_MODE(td.mode) : td.mode;
    if (now_mode != want && fchmod(dfd, want) < 0) {
        r = fail_at(sc, errno, "chmod", err);
        goto done;
    }
    if (sc->durable && fsync(dfd) < 0) {
        r = fail_at(sc, errno, "sync", err);
        goto done;
    }
    dir->mode = want;
    if (want != td.mode)
        differs = true;
    for (uint32_t i = 0; i < dir->nkids && !differs; i++)
        if (dir->kids[i]->type == SN_DIR && (dir->kids[i]->flags & SN_DIRTY))
            differs = true;
    if (differs) {
        dir->flags |= SN_DIRTY; /* sp_tree_finalize() gives it its id */
    } else {
        dir->oid = *tree;
        dir->flags &= (uint8_t)~SN_DIRTY;
    }
done:
    if (r < 0 && !p.root && p.st.st_mode)
        (void)fchmod(dfd, p.st.st_mode & 07777);
    sp_tdir_dispose(&td);
    return r;
}
