/* Walking the workspace: bring nodes up to date with what is on disk,
 * reading only entries whose stat data changed.
 *
 * Contract: every name is looked at relative to a folder fd we hold, with
 * fstatat(AT_SYMLINK_NOFOLLOW); folders are entered with
 * openat(O_DIRECTORY | O_NOFOLLOW) and files opened with O_NOFOLLOW |
 * O_NONBLOCK, then checked with fstat to be the inode we stat'ed (a name
 * swapped meanwhile is looked at again). A symlink is read with readlinkat
 * and stored as what it says, never followed. Nothing here writes to the
 * workspace.
 *
 * The stat rule: an entry keeps its content id without being read when its
 * type, permission bits, device, inode, size, mtime and ctime are all what
 * they were, and it was not "racy" then. Racy means its mtime or ctime was
 * not older than the moment the walk that read it began (the coarse clock
 * the kernel stamps files with): a write in the same clock tick after we
 * read it could leave all stat fields unchanged. Racy entries are read
 * again next time, as git does with its index. ctime cannot be set by a
 * user, so a content change always shows in it, whatever utimes() says.
 *
 * We do not reuse sp_fs_walk(): a snapshot needs each folder's children
 * together (to build its tree after them), the folder fds for reading, and
 * must fail on an unreadable folder rather than skip it (a restore would
 * otherwise delete what the snapshot missed). */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "snap_internal.h"

void sp_scan_init(sp_scan *sc, sp_odb *odb, sp_snapstore_stats *stats)
{
    memset(sc, 0, sizeof(*sc));
    sc->odb = odb;
    sc->stats = stats;
    sc->start_ns = sp_scan_now_coarse();
    sc->phase = "scan";
    sc->next_progress = 1000;
    sc->euid = geteuid();
    sc->egid = getegid();
}

void sp_scan_dispose(sp_scan *sc)
{
    sp_buf_dispose(&sc->path);
}

int64_t sp_scan_now_coarse(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

size_t sp_scan_push(sp_scan *sc, const char *name)
{
    size_t old = sc->path.len;
    if (old)
        sp_buf_addc(&sc->path, '/');
    sp_buf_adds(&sc->path, name);
    return old;
}

void sp_scan_pop(sp_scan *sc, size_t len)
{
    sc->path.len = len;
    if (sc->path.data)
        sc->path.data[len] = '\0';
}

static const char *cur_path(sp_scan *sc)
{
    return sc->path.len ? sc->path.data : ".";
}

void sp_scan_drop(sp_scan *sc, snode *kid)
{
    sp_snode_free(kid, sc->track ? sp_track_unwatch : NULL, sc->track);
}

static void progress(sp_scan *sc)
{
    sc->stats->entries++;
    if (sc->progress && sc->stats->entries >= sc->next_progress) {
        sc->next_progress = sc->stats->entries + 1000;
        sp_snapshot_progress p = {sc->phase, sc->stats->entries, sc->stats->files_hashed,
                                  sc->stats->bytes_hashed, sc->stats->paths_changed};
        sc->progress(sc->progress_ud, &p);
    }
}

/* What sp_snapstore_opts.trust_ids vouches for: the content is the same
 * when everything but ctime (an owner change moves it) is. */
static bool same_but_ctime(const snode *n, const struct stat *st)
{
    return n->type == sp_snode_type_of(st->st_mode) && n->mode == (st->st_mode & 07777u) &&
           n->dev == (uint64_t)st->st_dev && n->ino == (uint64_t)st->st_ino &&
           n->size == (uint64_t)st->st_size &&
           n->mtime_ns == (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

static bool same_stat(const snode *n, const struct stat *st)
{
    return same_but_ctime(n, st) &&
           n->ctime_ns == (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

static bool is_racy(const sp_scan *sc, const snode *n)
{
    /* Whole-second stamps (a filesystem without finer ones) could hide a
     * change anywhere within that second. */
    int64_t margin =
        (n->mtime_ns % 1000000000 == 0 && n->ctime_ns % 1000000000 == 0) ? (int64_t)2000000000 : 0;
    return n->mtime_ns >= sc->start_ns - margin || n->ctime_ns >= sc->start_ns - margin;
}

static void set_racy(const sp_scan *sc, snode *n)
{
    if (is_racy(sc, n))
        n->flags |= SN_RACY;
    else
        n->flags &= (uint8_t)~SN_RACY;
}

static int open_error(sp_scan *sc, int e, const char *what, sp_error **err)
{
    return sp_err_errno(err, e, what, cur_path(sc));
}

/* Read at most max bytes of a regular file into b; -1 with errno on
 * failure. A short read is the end of the file (the caller compares fstat
 * before and after, so a file that grows meanwhile is caught). */
static int read_upto(int fd, size_t max, sp_buf *b)
{
    while (b->len < max) {
        sp_buf_grow(b, max - b->len);
        size_t want = max - b->len;
        ssize_t n = read(fd, b->data + b->len, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        b->len += (size_t)n;
        if ((size_t)n < want)
            break;
    }
    return 0;
}

/* A human size for messages: "1.5 GiB". */
static void fmt_size(char *buf, size_t len, uint64_t v)
{
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double d = (double)v;
    size_t u = 0;
    while (d >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
        d /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%llu bytes", (unsigned long long)v);
    else
        snprintf(buf, len, "%.1f %s", d, units[u]);
}

int sp_scan_over_budget(sp_error **err, const char *path, uint64_t need, uint64_t budget)
{
    char a[32], b[32];
    fmt_size(a, sizeof(a), need);
    fmt_size(b, sizeof(b), budget);
    return sp_err_set(err, SP_ETOOBIG, EFBIG,
                      "%s: %s of file data would exceed the budget of %s per operation "
                      "(max_data_bytes, --max-data)",
                      path, a, b);
}

/* Would `need` more bytes of file data take the operation past its
 * budget? */
static int check_budget(sp_scan *sc, uint64_t need, sp_error **err)
{
    uint64_t done = sc->stats->bytes_hashed;
    if (sc->budget && (need > sc->budget || done > sc->budget - need))
        return sp_scan_over_budget(err, cur_path(sc), need, sc->budget);
    return 0;
}

/* The data extents of a file of `size` bytes open on fd, holes shorter
 * than SNAP_HOLE_MIN merged into the data around them (read as zeros).
 * *out is NULL when there are more than SNAP_MAX_EXTENTS. -1 with errno
 * on failure. A filesystem that knows no holes reports one extent. */
static int file_extents(int fd, uint64_t size, sp_extent **out, size_t *n_out)
{
    sp_extent *v = NULL;
    size_t n = 0, cap = 0;
    uint64_t off = 0;
    *out = NULL;
    *n_out = 0;
    while (off < size) {
        off_t d = lseek(fd, (off_t)off, SEEK_DATA);
        if (d < 0 && errno == ENXIO)
            break; /* only a hole from here on */
        if (d < 0)
            goto fail;
        if ((uint64_t)d >= size)
            break;
        off_t h = lseek(fd, d, SEEK_HOLE);
        if (h < 0)
            goto fail;
        uint64_t end = (uint64_t)h < size ? (uint64_t)h : size;
        while (end < size) {
            off_t d2 = lseek(fd, (off_t)end, SEEK_DATA);
            if (d2 < 0 && errno != ENXIO)
                goto fail;
            if (d2 < 0 || (uint64_t)d2 >= size || (uint64_t)d2 - end >= SNAP_HOLE_MIN)
                break;
            off_t h2 = lseek(fd, d2, SEEK_HOLE);
            if (h2 < 0)
                goto fail;
            end = (uint64_t)h2 < size ? (uint64_t)h2 : size;
        }
        if (n == SNAP_MAX_EXTENTS) {
            free(v);
            *n_out = SNAP_MAX_EXTENTS + 1;
            return 0;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            v = sp_xrealloc(v, cap * sizeof(*v));
        }
        v[n].off = (uint64_t)d;
        v[n].len = end - (uint64_t)d;
        n++;
        off = end;
    }
    *out = v;
    *n_out = n;
    return 0;
fail:
    free(v);
    return -1;
}

/* The bytes of a file's sparse form: the header, then its extents read
 * from the file. A file that shrinks ends the stream early, which the
 * store reports as a change (EAGAIN). */
struct sparse_src {
    int fd;
    sp_sparse_cursor c;
};

size_t sp_sparse_next(sp_sparse_cursor *c, void *buf, size_t cap, uint64_t *off, size_t *len)
{
    *len = 0;
    if (c->head_off < c->head->len) {
        size_t take = c->head->len - c->head_off;
        if (take > cap)
            take = cap;
        memcpy(buf, c->head->data + c->head_off, take);
        c->head_off += take;
        return take;
    }
    while (c->at < c->n && c->pos == c->v[c->at].len) {
        c->at++;
        c->pos = 0;
    }
    if (c->at == c->n)
        return 0;
    uint64_t left = c->v[c->at].len - c->pos;
    *off = c->v[c->at].off + c->pos;
    *len = left < cap ? (size_t)left : cap;
    return 0;
}

static ssize_t sparse_read(void *ud, void *buf, size_t n)
{
    struct sparse_src *s = ud;
    uint64_t off = 0;
    size_t len = 0;
    size_t head = sp_sparse_next(&s->c, buf, n, &off, &len);
    if (head || !len)
        return (ssize_t)head;
    ssize_t r = pread(s->fd, buf, len, (off_t)off);
    if (r > 0)
        s->c.pos += (uint64_t)r;
    return r;
}

/* Read a regular file (open on fd, st its fstat) into the store. Returns
 * 0, a negative error, or 1 when it changed while being read (the caller
 * looks at it again). *sparse tells whether it went in sparse form. */
static int hash_file(sp_scan *sc, int fd, const struct stat *st, sp_oid *out, bool *sparse,
                     sp_error **err)
{
    uint64_t size = (uint64_t)st->st_size;
    uint64_t data = size;
    sp_error *e = NULL;
    int r;
    *sparse = false;
    if (size <= SNAP_SMALL_FILE) {
        if ((r = check_budget(sc, size, err)) < 0)
            return r;
        sp_buf b = SP_BUF_INIT;
        sp_buf_grow(&b, (size_t)size + 1);
        /* Read one byte more than stat said: a file that grew is read
         * again rather than cut. */
        r = read_upto(fd, (size_t)size + 1, &b) < 0 ? open_error(sc, errno, "read", err) : 0;
        if (r == 0 && b.len != size) {
            sp_buf_dispose(&b);
            return 1;
        }
        if (r == 0 && (r = sp_odb_write(sc->odb, SP_OBJ_BLOB, b.data, b.len, out, err)) < 0)
            r = sp_err_wrap(err, r, "%s", cur_path(sc)); /* as a streamed file's error does */
        sp_buf_dispose(&b);
    } else {
        sp_extent *v = NULL;
        size_t n = 0;
        if (file_extents(fd, size, &v, &n) < 0)
            return open_error(sc, errno, "read", err);
        /* Holes, and not too many pieces: only the data is read. */
        *sparse = n <= SNAP_MAX_EXTENTS && !(n == 1 && v[0].off == 0 && v[0].len == size);
        if (*sparse) {
            data = 0;
            for (size_t i = 0; i < n; i++)
                data += v[i].len;
        }
        if ((r = check_budget(sc, data, err)) < 0) {
            free(v);
            return r;
        }
        if (*sparse) {
            sp_buf head = SP_BUF_INIT;
            sp_sparse_header(&head, size, v, n);
            struct sparse_src src = {fd, {&head, 0, v, n, 0, 0}};
            r = sp_odb_write_stream(sc->odb, head.len + data, sparse_read, &src, cur_path(sc), out,
                                    &e);
            sp_buf_dispose(&head);
        } else {
            lseek(fd, 0, SEEK_SET); /* SEEK_DATA moved it */
            r = sp_odb_write_fd(sc->odb, fd, size, cur_path(sc), out, &e);
        }
        free(v);
        if (r < 0 && e && e->sys_errno == EAGAIN) {
            sp_error_free(e);
            return 1;
        }
        if (r < 0) {
            if (err)
                *err = e;
            else
                sp_error_free(e);
            return r;
        }
    }
    if (r == 0) {
        sc->stats->files_hashed++;
        sc->stats->bytes_hashed += data;
    }
    return r;
}

/* Bring one entry up to date. `old` is what was known about the name (or
 * NULL); *out receives old updated in place when the type is the same, a
 * new node otherwise, or NULL when the entry vanished. Sets SN_DIRTY up
 * the tree when the entry's id or bits changed. */
static int look_at(sp_scan *sc, int dfd, const char *name, struct stat *st, snode *old, bool deep,
                   snode **out, sp_error **err)
{
    *out = NULL;
    size_t nlen = strlen(name);
    for (int attempt = 0;; attempt++) {
        if (attempt >= 8)
            return sp_err_set(err, SP_ERROR, EAGAIN, "entry keeps changing while being read: %s",
                              cur_path(sc));
        if (attempt > 0 && fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT)
                return 0;
            return open_error(sc, errno, "stat", err);
        }
        int type = sp_snode_type_of(st->st_mode);
        if (type == 0)
            type = SN_OTHER;
        snode *n = old && old->type == type ? old : sp_snode_new(name, nlen, type);
        bool fresh = n != old;

        if (type == SN_FILE || type == SN_LINK) {
            /* Another name of this file, somewhere, can change it with no
             * event here: the tracker must learn of every such file (see
             * sp_rescan). A link count change moves ctime, so an
             * unchanged entry has the count it had. */
            if (type == SN_FILE && st->st_nlink > 1 && (fresh || !(n->flags & SN_LINKED)))
                sc->new_links = true;
            if (!fresh && same_stat(n, st) && !(n->flags & SN_RACY)) {
                if (st->st_nlink > 1 && type == SN_FILE)
                    n->flags |= SN_LINKED; /* a node from the stat cache lacks it */
                *out = n;
                return 0;
            }
            if (!fresh && sc->trust_ids && same_but_ctime(n, st)) {
                sp_snode_set_stat(n, st);
                set_racy(sc, n);
                sc->trusted++;
                *out = n;
                return 0;
            }
            sp_oid id;
            bool sparse = false;
            struct stat st2 = *st;
            if (type == SN_LINK) {
                char target[PATH_MAX + 1];
                ssize_t tl = readlinkat(dfd, name, target, sizeof(target));
                if (tl < 0) {
                    int e = errno;
                    if (fresh)
                        free(n);
                    if (e == ENOENT || e == EINVAL)
                        continue; /* gone, or no longer a symlink */
                    return open_error(sc, e, "readlink", err);
                }
                int r = sp_odb_write(sc->odb, SP_OBJ_BLOB, target, (size_t)tl, &id, err);
                if (r < 0) {
                    if (fresh)
                        free(n);
                    return r;
                }
            } else {
                int fd =
                    openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
                if (fd < 0) {
                    int e = errno;
                    if (fresh)
                        free(n);
                    if (e == ENOENT || e == ELOOP || e == ENXIO)
                        continue; /* swapped or removed meanwhile */
                    return open_error(sc, e, "read", err);
                }
                int r = fstat(fd, &st2) < 0 ? open_error(sc, errno, "stat", err) : 0;
                if (r == 0 && (!S_ISREG(st2.st_mode) || st2.st_ino != st->st_ino))
                    r = 1;
                if (r == 0)
                    r = hash_file(sc, fd, &st2, &id, &sparse, err);
                struct stat st3;
                if (r == 0 && (fstat(fd, &st3) < 0 || st3.st_size != st2.st_size ||
                               st3.st_mtim.tv_nsec != st2.st_mtim.tv_nsec ||
                               st3.st_mtim.tv_sec != st2.st_mtim.tv_sec ||
                               st3.st_ctim.tv_nsec != st2.st_ctim.tv_nsec ||
                               st3.st_ctim.tv_sec != st2.st_ctim.tv_sec))
                    r = 1; /* written to while we read it */
                close(fd);
                if (r != 0) {
                    if (fresh)
                        free(n);
                    if (r > 0)
                        continue;
                    return r;
                }
            }
            bool changed = fresh || !sp_oid_equal(&n->oid, &id) || n->mode != (st2.st_mode & 07777);
            n->oid = id;
            sp_snode_set_stat(n, &st2);
            if (sparse)
                n->flags |= SN_SPARSE;
            else
                n->flags &= (uint8_t)~SN_SPARSE;
            set_racy(sc, n);
            if (changed)
                n->flags |= SN_DIRTY; /* parent's tree; cleared below */
            *out = n;
            return 0;
        }

        if (type == SN_FIFO || type == SN_OTHER) {
            bool changed = fresh || n->mode != (st->st_mode & 07777);
            sp_snode_set_stat(n, st);
            if (changed)
                n->flags |= SN_DIRTY;
            *out = n;
            return 0;
        }

        /* A folder. */
        if (sc->depth >= SNAP_MAX_DEPTH) {
            if (fresh)
                free(n);
            return sp_err_set(err, SP_ETOOBIG, 0, "folders nested deeper than %d levels: %s",
                              SNAP_MAX_DEPTH, cur_path(sc));
        }
        bool descend = deep || fresh || n->ino != (uint64_t)st->st_ino;
        if (!descend) {
            if (n->mode != (st->st_mode & 07777u))
                n->flags |= SN_DIRTY;
            sp_snode_set_stat(n, st);
            *out = n;
            return 0;
        }
        int cfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (cfd < 0) {
            int e = errno;
            if (fresh)
                free(n);
            if (e == ENOENT || e == ENOTDIR || e == ELOOP)
                continue;
            return open_error(sc, e, "open folder", err);
        }
        struct stat dst;
        if (fstat(cfd, &dst) < 0 || dst.st_ino != st->st_ino || dst.st_dev != st->st_dev) {
            close(cfd);
            if (fresh)
                free(n);
            continue;
        }
        if (n->mode != (dst.st_mode & 07777u) || fresh)
            n->flags |= SN_DIRTY;
        sp_snode_set_stat(n, &dst);
        if (sc->track)
            sp_track_watch(sc->track, cfd, n);
        sc->depth++;
        int r = sp_scan_dir(sc, cfd, n, err);
        sc->depth--;
        close(cfd);
        if (r < 0) {
            if (fresh)
                sp_scan_drop(sc, n);
            return r;
        }
        *out = n;
        return 0;
    }
}

/* ------------------------------------------------------------ folders -- */

int sp_scan_dir(sp_scan *sc, int dfd, snode *dir, sp_error **err)
{
    sp_dirnames nm = SP_DIRNAMES_INIT;
    if (sp_dir_read(&nm, dfd, SP_DIR_BYNAME, 0) < 0) {
        int e = errno;
        sp_dirnames_dispose(&nm);
        return open_error(sc, e, "list folder", err);
    }
    snode **kids = sp_xmalloc((nm.n ? nm.n : 1) * sizeof(snode *));
    uint32_t nk = 0, oi = 0;
    bool changed = false;
    int ret = 0;
    for (size_t i = 0; i < nm.n; i++) {
        const char *name = sp_dirnames_name(&nm, i);
        size_t nlen = strlen(name);
        /* Old children before this name are gone. */
        snode *old = NULL;
        while (oi < dir->nkids) {
            snode *k = dir->kids[oi];
            size_t m = k->name_len < nlen ? k->name_len : nlen;
            int c = memcmp(k->name, name, m);
            if (c == 0)
                c = k->name_len < nlen ? -1 : k->name_len > nlen ? 1 : 0;
            if (c > 0)
                break;
            oi++;
            if (c == 0) {
                old = k;
                break;
            }
            sp_scan_drop(sc, k);
            changed = true;
        }
        size_t pl = sp_scan_push(sc, name);
        progress(sc);
        struct stat st;
        snode *n = NULL;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
            ret = look_at(sc, dfd, name, &st, old, true, &n, err);
        } else if (errno != ENOENT) {
            ret = open_error(sc, errno, "stat", err);
        }
        sp_scan_pop(sc, pl);
        if (ret < 0) {
            /* Keep the tree whole: what was not walked stays as it was.
             * The old children left can outnumber the names read (entries
             * removed since), so kids, sized for those names, grows. */
            kids = sp_xrealloc(kids, (nk + 1 + (dir->nkids - oi)) * sizeof(snode *));
            if (old)
                kids[nk++] = old;
            for (; oi < dir->nkids; oi++)
                kids[nk++] = dir->kids[oi];
            for (size_t j = 0; j < nk; j++)
                kids[j]->parent = dir;
            free(dir->kids);
            dir->kids = kids;
            dir->nkids = dir->capkids = nk;
            /* The names after the failure were never compared: recompute
             * this folder's tree whatever happens next. */
            sp_snode_dirty_up(dir);
            goto done;
        }
        if (old && n != old) {
            sp_scan_drop(sc, old);
            changed = true;
        }
        if (!n)
            continue;
        if (n != old)
            changed = true;
        if (n->flags & SN_DIRTY) {
            changed = true;
            if (n->type != SN_DIR)
                n->flags &= (uint8_t)~SN_DIRTY;
        }
        n->parent = dir;
        kids[nk++] = n;
    }
    for (; oi < dir->nkids; oi++) {
        sp_scan_drop(sc, dir->kids[oi]);
        changed = true;
    }
    free(dir->kids);
    dir->kids = kids;
    dir->nkids = dir->capkids = nk;
    if (changed)
        sp_snode_dirty_up(dir);
done:
    sp_dirnames_dispose(&nm);
    return ret;
}

int sp_scan_name(sp_scan *sc, int dfd, snode *dir, const char *name, bool deep, sp_error **err)
{
    uint32_t pos;
    snode *old = sp_snode_find(dir, name, strlen(name), &pos);
    struct stat st;
    snode *n = NULL;
    progress(sc);
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        int r = look_at(sc, dfd, name, &st, old, deep, &n, err);
        if (r < 0)
            return r;
    } else if (errno != ENOENT) {
        return open_error(sc, errno, "stat", err);
    }
    if (old && n != old) {
        sp_scan_drop(sc, sp_snode_take(dir, pos));
        sp_snode_dirty_up(dir);
    }
    if (!n)
        return 0;
    if (n != old) {
        sp_snode_find(dir, name, strlen(name), &pos);
        sp_snode_insert(dir, pos, n);
        sp_snode_dirty_up(dir);
    }
    if (n->flags & SN_DIRTY) {
        if (n->type != SN_DIR)
            n->flags &= (uint8_t)~SN_DIRTY;
        sp_snode_dirty_up(dir);
    }
    return 0;
}
