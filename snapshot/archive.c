/* Export a snapshot as a tar archive and import one as a new snapshot
 * (libarchive, pax format).
 *
 * Export writes "./" for the root (so its permission bits travel too),
 * then every entry in tree order with its real name, permission bits,
 * symlink target verbatim, the snapshot's time as mtime and owner
 * nobody:nogroup (65534:65534): GNU tar run as root keeps an archive's
 * owners, and what the workload wrote must not come out owned by root.
 * The set-id bits of files and fifos are left out unless the store keeps
 * them (sp_mode_out), for the same reason. Import builds a tree in the
 * store from an archive without ever touching the workspace; it refuses
 * absolute names and `..`, skips device nodes and sockets, turns a hard
 * link into a copy of its target, and drops set-id bits as export does. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <zlib.h>

#include "lazy_archive.h"
#include "snap_internal.h"

/* The owner of every exported entry: the overflow ids, which own nothing
 * on a usual system and are never root. */
#define EXPORT_UID   65534
#define EXPORT_GID   65534
#define EXPORT_UNAME "nobody"
#define EXPORT_GNAME "nogroup"

static int ar_error(sp_error **err, struct archive *a, const char *what)
{
    const char *m = archive_error_string(a);
    return sp_err_set(err, SP_ERROR, archive_errno(a) > 0 ? archive_errno(a) : 0, "%s: %s", what,
                      m ? m : "libarchive");
}

/* ------------------------------------------------------------- export -- */

struct exp {
    sp_snapstore *s;
    struct archive *a;
    time_t mtime;
    long mtime_ns;
    struct archive_entry *e;
};

/* What every header shares: name, type, bits, time, owner. */
static void set_common(struct exp *x, const char *path, unsigned type, uint32_t mode)
{
    archive_entry_clear(x->e);
    archive_entry_set_pathname(x->e, path);
    archive_entry_set_filetype(x->e, type);
    archive_entry_set_perm(x->e, mode);
    archive_entry_set_mtime(x->e, x->mtime, x->mtime_ns);
    archive_entry_set_uid(x->e, EXPORT_UID);
    archive_entry_set_gid(x->e, EXPORT_GID);
    archive_entry_set_uname(x->e, EXPORT_UNAME);
    archive_entry_set_gname(x->e, EXPORT_GNAME);
}

struct blob_sink {
    struct exp *x;
    const char *path;
    uint32_t mode;
};

static int write_file_entry(void *ud, uint64_t size, const void *p, size_t n, sp_error **err)
{
    struct blob_sink *b = ud;
    struct exp *x = b->x;
    if (!p) {
        set_common(x, b->path, AE_IFREG, b->mode);
        archive_entry_set_size(x->e, (la_int64_t)size);
        if (archive_write_header(x->a, x->e) < ARCHIVE_WARN)
            return ar_error(err, x->a, "export");
        return 0;
    }
    if (archive_write_data(x->a, p, n) < 0)
        return ar_error(err, x->a, "export");
    return 0;
}

/* A file in sparse form goes out as a sparse entry (GNU sparse 1.0 in
 * pax): only its data is stored. libarchive's writer wants the file's
 * bytes in order, holes included, and skips the holes' bytes itself, so
 * they are passed from a buffer of zeros; nothing of them is stored. */
static char zeros[1 << 18];

struct sparse_out {
    struct exp *x;
    const char *path;
    uint32_t mode;
    uint64_t pos; /* bytes of the file passed to libarchive */
};

static int sparse_out_map(void *ud, uint64_t size, const sp_extent *v, size_t n, sp_error **err)
{
    struct sparse_out *so = ud;
    struct exp *x = so->x;
    set_common(x, so->path, AE_IFREG, so->mode);
    archive_entry_set_size(x->e, (la_int64_t)size); /* before the map, which must fit in it */
    for (size_t i = 0; i < n; i++)
        archive_entry_sparse_add_entry(x->e, (la_int64_t)v[i].off, (la_int64_t)v[i].len);
    if (n == 0) /* all hole: an empty extent at the end, as GNU tar writes it */
        archive_entry_sparse_add_entry(x->e, (la_int64_t)size, 0);
    if (archive_write_header(x->a, x->e) < ARCHIVE_WARN)
        return ar_error(err, x->a, "export");
    return 0;
}

static int sparse_out_data(void *ud, uint64_t off, const void *p, size_t n, sp_error **err)
{
    struct sparse_out *so = ud;
    while (so->pos < off) {
        uint64_t gap = off - so->pos;
        size_t k = gap < sizeof(zeros) ? (size_t)gap : sizeof(zeros);
        if (archive_write_data(so->x->a, zeros, k) < 0)
            return ar_error(err, so->x->a, "export");
        so->pos += k;
    }
    if (archive_write_data(so->x->a, p, n) < 0)
        return ar_error(err, so->x->a, "export");
    so->pos += n;
    return 0;
}

static int put_header(struct exp *x, const char *path, unsigned type, uint32_t mode,
                      const char *link, sp_error **err)
{
    set_common(x, path, type, mode);
    archive_entry_set_size(x->e, 0);
    if (link)
        archive_entry_set_symlink(x->e, link);
    if (archive_write_header(x->a, x->e) < ARCHIVE_WARN)
        return ar_error(err, x->a, "export");
    return 0;
}

static int export_dir(struct exp *x, const sp_oid *tree, const char *prefix, unsigned depth,
                      sp_error **err)
{
    if (depth > SNAP_MAX_DEPTH + 8)
        return sp_err_set(err, SP_ETOOBIG, 0, "trees nested too deep");
    sp_tdir td;
    int r = sp_tree_read(&td, &x->s->odb, tree, err);
    if (r < 0)
        return r;
    if (depth == 0)
        r = put_header(x, "./", AE_IFDIR, SNAP_ROOT_MODE(td.mode), NULL, err);
    for (size_t i = 0; i < td.n && r == 0; i++) {
        const sp_tentry *e = &td.v[i];
        cleanup_free char *path = sp_xasprintf("%s%s", prefix, e->name);
        uint32_t mode = sp_mode_out(e->type, e->mode, x->s->opts.keep_setid);
        if (e->type == SN_FILE && e->sparse) {
            struct sparse_out so = {x, path, mode, 0};
            sp_sparse_sink sink = {sparse_out_map, sparse_out_data, &so};
            r = sp_sparse_stream(&x->s->odb, &e->oid, &sink, path, err);
        } else if (e->type == SN_FILE) {
            struct blob_sink b = {x, path, mode};
            r = sp_odb_blob_stream(&x->s->odb, &e->oid, write_file_entry, &b, err);
        } else if (e->type == SN_LINK) {
            sp_buf t = SP_BUF_INIT;
            int type = 0;
            r = sp_odb_read(&x->s->odb, &e->oid, &type, &t, err);
            if (r == 0)
                r = put_header(x, path, AE_IFLNK, 0777, t.data, err);
            sp_buf_dispose(&t);
        } else if (e->type == SN_FIFO) {
            r = put_header(x, path, AE_IFIFO, mode, NULL, err);
        } else {
            sp_tdir sub;
            if ((r = sp_tree_read(&sub, &x->s->odb, &e->oid, err)) < 0)
                break;
            mode = sub.mode;
            sp_tdir_dispose(&sub);
            cleanup_free char *dpath = sp_xasprintf("%s/", path);
            r = put_header(x, dpath, AE_IFDIR, mode, NULL, err);
            if (r == 0)
                r = export_dir(x, &e->oid, dpath, depth + 1, err);
        }
    }
    sp_tdir_dispose(&td);
    return r;
}

int sp_snapshot_export(sp_snapstore *s, const char *ref, const char *path, int fd,
                       sp_snapshot_format format, sp_error **err)
{
    if (!path && fd < 0)
        return sp_err_set(err, SP_EINVAL, 0, "export needs a file or an fd");
    if (format != SP_SNAPSHOT_TAR && format != SP_SNAPSHOT_TAR_GZ)
        return sp_err_set(err, SP_EINVAL, 0, "unknown export format %d", (int)format);
    int r = sp_archive_load(err);
    if (r < 0)
        return r;
    sp_snapshot *snap = NULL;
    sp_oid tree;
    r = sp_snap_resolve(&snap, s, ref, err);
    if (r == 0)
        r = sp_snap_commit_tree(&s->odb, snap->commit, &tree, err);
    if (r < 0) {
        sp_snapshot_free(snap);
        return r;
    }
    cleanup_free char *tmp = NULL;
    int out = fd;
    if (path) {
        uint64_t rnd = 0;
        if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
            rnd = (uint64_t)sp_now_ms() ^ (uint64_t)getpid();
        tmp = sp_xasprintf("%s.tmp-%016llx", path, (unsigned long long)rnd);
        out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (out < 0) {
            sp_snapshot_free(snap);
            return sp_err_errno(err, errno, "create", path);
        }
    }
    struct exp x = {s, archive_write_new(), (time_t)(snap->created_at_ns / 1000000000),
                    (long)(snap->created_at_ns % 1000000000), archive_entry_new()};
    archive_write_set_format_pax_restricted(x.a);
    if (format == SP_SNAPSHOT_TAR_GZ)
        archive_write_add_filter_gzip(x.a);
    archive_write_set_bytes_in_last_block(x.a, 1);
    if (archive_write_open_fd(x.a, out) != ARCHIVE_OK)
        r = ar_error(err, x.a, "export");
    if (r == 0)
        r = export_dir(&x, &tree, "", 0, err);
    if (archive_write_close(x.a) != ARCHIVE_OK && r == 0)
        r = ar_error(err, x.a, "export");
    archive_entry_free(x.e);
    archive_write_free(x.a);
    sp_snapshot_free(snap);
    if (path) {
        if (r == 0 && fsync(out) < 0)
            r = sp_err_errno(err, errno, "write", path);
        close(out);
        if (r == 0 && rename(tmp, path) < 0)
            r = sp_err_errno(err, errno, "rename", path);
        if (r < 0)
            unlink(tmp);
    }
    return r;
}

/* ------------------------------------------------------------- import -- */

/* Split an archive path into clean components; SP_EESCAPE for absolute
 * paths and `..`. An empty list is the root. */
static int split_path(const char *name, sp_strv *out, sp_error **err)
{
    if (name[0] == '/')
        return sp_err_set(err, SP_EESCAPE, 0, "archive entry has an absolute path: %s", name);
    const char *p = name;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == 2 && p[0] == '.' && p[1] == '.')
            return sp_err_set(err, SP_EESCAPE, 0, "archive entry leaves the root: %s", name);
        if (l > 255)
            return sp_err_set(err, SP_EINVAL, ENAMETOOLONG, "archive entry name too long: %s",
                              name);
        if (l && !(l == 1 && p[0] == '.'))
            sp_strv_push(out, sp_xstrndup(p, l));
        p += l;
        while (*p == '/')
            p++;
    }
    if (out->n > SNAP_MAX_DEPTH)
        return sp_err_set(err, SP_ETOOBIG, 0, "archive entry nested too deep: %s", name);
    return 0;
}

/* The folder node for comp[0..n), made (0755) where missing; a non-folder
 * in the way is replaced. */
static snode *dir_for(snode *root, char **comp, size_t n)
{
    snode *d = root;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(comp[i]);
        uint32_t pos;
        snode *k = sp_snode_find(d, comp[i], l, &pos);
        if (k && k->type != SN_DIR) {
            sp_snode_free(sp_snode_take(d, pos), NULL, NULL);
            k = NULL;
        }
        if (!k) {
            k = sp_snode_new(comp[i], l, SN_DIR);
            k->mode = 0755;
            k->flags |= SN_DIRTY;
            sp_snode_insert(d, pos, k);
        }
        d = k;
    }
    return d;
}

static snode *find_path(snode *root, char **comp, size_t n)
{
    snode *d = root;
    for (size_t i = 0; i < n && d; i++)
        d = d->type == SN_DIR ? sp_snode_find(d, comp[i], strlen(comp[i]), NULL) : NULL;
    return d;
}

static ssize_t ar_src(void *ud, void *buf, size_t n)
{
    la_ssize_t r = archive_read_data(ud, buf, n);
    if (r < 0) {
        errno = EIO;
        return -1;
    }
    return (ssize_t)r;
}

/* An archive's sparse entry over SNAP_SMALL_FILE goes into the store in
 * sparse form, as a snapshot stores such a file: libarchive gives the
 * data in blocks at their offsets; whatever of an extent no block covers
 * is zeros. */
struct ar_sparse {
    struct archive *a;
    sp_sparse_cursor c;
    const char *blk;
    size_t blk_len;
    uint64_t blk_off;
    bool eof;
};

static ssize_t ar_sparse_read(void *ud, void *buf, size_t n)
{
    struct ar_sparse *s = ud;
    uint64_t want = 0;
    size_t k = 0;
    size_t head = sp_sparse_next(&s->c, buf, n, &want, &k);
    if (head || !k)
        return (ssize_t)head;
    for (;;) {
        if (s->blk_len && s->blk_off + s->blk_len <= want)
            s->blk_len = 0; /* all of it before what is wanted */
        if (s->blk_len || s->eof)
            break;
        const void *b = NULL;
        size_t l = 0;
        la_int64_t o = 0;
        int r = archive_read_data_block(s->a, &b, &l, &o);
        if (r == ARCHIVE_EOF) {
            s->eof = true;
        } else if (r < ARCHIVE_WARN || o < 0) {
            errno = EIO;
            return -1;
        } else {
            s->blk = b;
            s->blk_len = l;
            s->blk_off = (uint64_t)o;
        }
    }
    if (s->blk_len && s->blk_off <= want) {
        size_t in = (size_t)(want - s->blk_off);
        if (k > s->blk_len - in)
            k = s->blk_len - in;
        memcpy(buf, s->blk + in, k);
    } else {
        if (s->blk_len && k > s->blk_off - want)
            k = (size_t)(s->blk_off - want);
        memset(buf, 0, k);
    }
    s->c.pos += k;
    return (ssize_t)k;
}

/* The data extents an archive entry of `size` bytes declares, in order
 * and apart (touching ones joined; none at all for a file that is one
 * hole). NULL when it is small, declares no map, a whole file, more than
 * SNAP_MAX_EXTENTS, or nonsense: then the entry is read whole. */
static sp_extent *entry_extents(struct archive_entry *e, uint64_t size, size_t *n_out)
{
    *n_out = 0;
    if (size <= SNAP_SMALL_FILE || archive_entry_sparse_count(e) <= 0)
        return NULL;
    size_t cnt = (size_t)archive_entry_sparse_reset(e), n = 0;
    if (cnt > SNAP_MAX_EXTENTS)
        return NULL;
    sp_extent *v = sp_xmalloc((cnt ? cnt : 1) * sizeof(*v));
    la_int64_t off, len;
    while (archive_entry_sparse_next(e, &off, &len) == ARCHIVE_OK) {
        uint64_t end = n ? v[n - 1].off + v[n - 1].len : 0;
        if (len == 0)
            continue;
        if (off < 0 || len < 0 || (uint64_t)off < end || (uint64_t)off > size ||
            (uint64_t)len > size - (uint64_t)off || n == cnt) {
            free(v);
            return NULL;
        }
        if (n && (uint64_t)off == end) {
            v[n - 1].len += (uint64_t)len;
            continue;
        }
        v[n].off = (uint64_t)off;
        v[n].len = (uint64_t)len;
        n++;
    }
    if (n == 1 && v[0].off == 0 && v[0].len == size) {
        free(v);
        return NULL;
    }
    *n_out = n;
    return v;
}

static void mark_dirty(snode *n)
{
    if (n->type != SN_DIR)
        return;
    n->flags |= SN_DIRTY;
    for (uint32_t i = 0; i < n->nkids; i++)
        mark_dirty(n->kids[i]);
}

struct import {
    uint64_t budget, read; /* bytes of file data */
};

static int import_entry(sp_snapstore *s, struct archive *a, struct archive_entry *e, snode *root,
                        struct import *im, sp_error **err)
{
    const char *name = archive_entry_pathname(e);
    if (!name)
        return sp_err_set(err, SP_EINVAL, 0, "archive entry without a name");
    sp_strv comp = {0};
    int r = split_path(name, &comp, err);
    if (r < 0)
        goto done;
    unsigned ftype = archive_entry_filetype(e);
    uint32_t mode = (uint32_t)archive_entry_perm(e) & 07777;
    const char *hard = archive_entry_hardlink(e);
    if (comp.n == 0) {
        if (ftype == AE_IFDIR)
            root->mode = mode;
        goto done;
    }
    int type = hard                ? SN_FILE
               : ftype == AE_IFREG ? SN_FILE
               : ftype == AE_IFDIR ? SN_DIR
               : ftype == AE_IFLNK ? SN_LINK
               : ftype == AE_IFIFO ? SN_FIFO
                                   : 0;
    if (!type)
        goto done; /* devices, sockets */
    snode *dir = dir_for(root, comp.v, comp.n - 1);
    const char *last = comp.v[comp.n - 1];
    size_t l = strlen(last);
    uint32_t pos;
    snode *old = sp_snode_find(dir, last, l, &pos);
    if (type == SN_DIR) {
        snode *d = dir_for(root, comp.v, comp.n);
        d->mode = mode;
        goto done;
    }
    snode *n = sp_snode_new(last, l, type);
    n->mode = type == SN_LINK ? 0777 : sp_mode_out(type, mode, s->opts.keep_setid);
    if (hard) {
        sp_strv hc = {0};
        r = split_path(hard, &hc, err);
        snode *t = r == 0 ? find_path(root, hc.v, hc.n) : NULL;
        sp_strv_dispose(&hc);
        if (r == 0 && (!t || t->type != SN_FILE))
            r = sp_err_set(err, SP_EINVAL, 0, "archive hard link to a missing file: %s -> %s", name,
                           hard);
        if (r == 0) {
            n->oid = t->oid;
            n->size = t->size;
            n->flags |= t->flags & SN_SPARSE;
        }
    } else if (type == SN_FILE) {
        la_int64_t ssize = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
        uint64_t size = ssize > 0 ? (uint64_t)ssize : 0, data = size;
        size_t nx = 0;
        sp_extent *v = entry_extents(e, size, &nx);
        if (v) {
            data = 0;
            for (size_t i = 0; i < nx; i++)
                data += v[i].len;
        }
        if (im->budget && (data > im->budget || im->read > im->budget - data))
            r = sp_scan_over_budget(err, name, data, im->budget);
        else if (v) {
            sp_buf head = SP_BUF_INIT;
            sp_sparse_header(&head, size, v, nx);
            struct ar_sparse src = {a, {&head, 0, v, nx, 0, 0}, NULL, 0, 0, false};
            r = sp_odb_write_stream(&s->odb, head.len + data, ar_sparse_read, &src, name, &n->oid,
                                    err);
            sp_buf_dispose(&head);
            n->flags |= SN_SPARSE;
        } else {
            r = sp_odb_write_stream(&s->odb, size, ar_src, a, name, &n->oid, err);
        }
        free(v);
        im->read += data;
        n->size = size;
    } else if (type == SN_LINK) {
        const char *t = archive_entry_symlink(e);
        if (!t || !*t)
            r = sp_err_set(err, SP_EINVAL, 0, "archive symlink without a target: %s", name);
        else
            r = sp_odb_write(&s->odb, SP_OBJ_BLOB, t, strlen(t), &n->oid, err);
    }
    if (r < 0) {
        free(n);
        goto done;
    }
    if (old)
        sp_snode_free(sp_snode_take(dir, pos), NULL, NULL);
    sp_snode_insert(dir, pos, n);
done:
    sp_strv_dispose(&comp);
    return r;
}

/* The decompressors import may use. libarchive runs an external program
 * (`gzip -d`, `lzop -d`, ...) for a filter it was built without and says
 * so with ARCHIVE_WARN; an archive from the workspace must not choose what
 * runs on the host, so such a filter is left out. */
enum { N_FILTERS = 4 };
static const char *const filter_names[N_FILTERS] = {"gzip", "bzip2", "xz", "zstd"};

static int add_filter(struct archive *a, int i)
{
    switch (i) {
    case 0:
        return archive_read_support_filter_gzip(a);
    case 1:
        return archive_read_support_filter_bzip2(a);
    case 2:
        return archive_read_support_filter_xz(a);
    default:
        return archive_read_support_filter_zstd(a);
    }
}

/* A reader of tar with in-process decompressors only; `refused` lists the
 * ones that would need a program. A filter that warns is registered all
 * the same, so the reader is made again without it. */
static struct archive *new_reader(sp_buf *refused)
{
    bool skip[N_FILTERS] = {false};
    for (;;) {
        struct archive *a = archive_read_new();
        bool again = false;
        archive_read_support_filter_none(a);
        for (int i = 0; i < N_FILTERS; i++) {
            if (skip[i])
                continue;
            int r = add_filter(a, i);
            if (r == ARCHIVE_WARN) {
                skip[i] = again = true;
                sp_buf_printf(refused, "%s%s", refused->len ? ", " : "", filter_names[i]);
            } else if (r != ARCHIVE_OK) {
                skip[i] = true; /* not built in at all: nothing registered */
            }
        }
        archive_read_support_format_tar(a);
        if (!again)
            return a;
        archive_read_free(a);
    }
}

/* An archive libarchive cannot open may be compressed with what we do not
 * run: say which compression is read. */
static int read_error(sp_error **err, struct archive *a, const sp_buf *refused)
{
    const char *m = archive_error_string(a);
    return sp_err_set(err, SP_ERROR, archive_errno(a) > 0 ? archive_errno(a) : 0,
                      "import: %s (archives are read plain or compressed with gzip, bzip2, xz or "
                      "zstd, in-process only%s%s)",
                      m ? m : "libarchive", refused->len ? "; here not: " : "",
                      refused->len ? refused->data : "");
}

/* ------------------------------------------------------ checked gzip -- */

/* libarchive's gzip reader skips a member's trailer unread: a corrupted
 * .tar.gz whose deflate data still decodes would import wrong bytes with
 * no error. Import reads its input through this source instead: gzip
 * input (each member of it) is inflated by zlib, which checks the CRC-32
 * and the length of every member; anything else reaches libarchive as it
 * is (bzip2 and xz check their own data). */
struct gz_src {
    int fd;
    bool owned, gz, member_done, eof;
    z_stream z;
    unsigned char in[1 << 16], out[1 << 16];
    size_t head;   /* bytes of in[] read while sniffing, passed on as they are */
    char why[160]; /* what went wrong reading, for import's error */
};

#define GZ_FAIL(a, g, code, ...)                                                                   \
    do {                                                                                           \
        snprintf((g)->why, sizeof((g)->why), __VA_ARGS__);                                         \
        archive_set_error((a), (code), "%s", (g)->why);                                            \
    } while (0)

static ssize_t src_fill(struct archive *a, struct gz_src *g)
{
    ssize_t n;
    do
        n = read(g->fd, g->in, sizeof(g->in));
    while (n < 0 && errno == EINTR);
    if (n < 0)
        GZ_FAIL(a, g, errno, "read: %s", strerror(errno));
    return n;
}

static la_ssize_t gz_read(struct archive *a, void *ud, const void **buf)
{
    struct gz_src *g = ud;
    if (!g->gz) {
        *buf = g->in;
        if (g->head) {
            ssize_t n = (ssize_t)g->head;
            g->head = 0;
            return n;
        }
        return src_fill(a, g);
    }
    g->z.next_out = g->out;
    g->z.avail_out = sizeof(g->out);
    while (g->z.avail_out == sizeof(g->out)) {
        if (g->z.avail_in == 0 && !g->eof) {
            ssize_t n = src_fill(a, g);
            if (n < 0)
                return ARCHIVE_FATAL;
            g->eof = n == 0;
            g->z.next_in = g->in;
            g->z.avail_in = (uInt)n;
        }
        if (g->member_done) {
            /* Zero bytes after a member (a tape tool's blocking) are
             * padding, as gzip -d takes them. */
            while (g->z.avail_in && *g->z.next_in == 0) {
                g->z.next_in++;
                g->z.avail_in--;
            }
            if (g->z.avail_in == 0 && !g->eof)
                continue;
            if (g->z.avail_in == 0 && g->eof)
                break; /* the end, after a whole member */
            /* Another member follows (gzip allows several). */
            if (inflateReset(&g->z) != Z_OK) {
                GZ_FAIL(a, g, EIO, "gzip: cannot start the next member");
                return ARCHIVE_FATAL;
            }
            g->member_done = false;
        }
        if (g->z.avail_in == 0 && g->eof) {
            GZ_FAIL(a, g, EIO, "truncated gzip input");
            return ARCHIVE_FATAL;
        }
        int zr = inflate(&g->z, Z_NO_FLUSH);
        if (zr == Z_STREAM_END) {
            g->member_done = true;
        } else if (zr != Z_OK && zr != Z_BUF_ERROR) {
            /* "incorrect data check" (CRC-32), "incorrect length check", ... */
            GZ_FAIL(a, g, EIO, "gzip: %s", g->z.msg ? g->z.msg : "corrupt data");
            return ARCHIVE_FATAL;
        }
    }
    *buf = g->out;
    return (la_ssize_t)(sizeof(g->out) - g->z.avail_out);
}

/* Open the import's input: PATH, else FD (not closed here). */
static int gz_open(struct gz_src **out, const char *path, int fd, sp_error **err)
{
    struct gz_src *g = sp_xcalloc(1, sizeof(*g));
    g->fd = fd;
    if (path && (g->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        int r = sp_err_errno(err, errno, "import: open", path);
        free(g);
        return r;
    }
    /* Sniff the magic bytes, reading until two are there or the input ends. */
    while (g->head < 2) {
        ssize_t n = read(g->fd, g->in + g->head, sizeof(g->in) - g->head);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int r = sp_err_errno(err, errno, "import: read", path ? path : "the archive");
            if (path)
                close(g->fd);
            free(g);
            return r;
        }
        if (n == 0)
            break;
        g->head += (size_t)n;
    }
    if (g->head >= 2 && g->in[0] == 0x1f && g->in[1] == 0x8b) {
        g->gz = true;
        if (inflateInit2(&g->z, 16 + MAX_WBITS) != Z_OK) {
            if (path)
                close(g->fd);
            free(g);
            return sp_err_set(err, SP_ERROR, ENOMEM, "zlib: cannot initialize");
        }
        g->z.next_in = g->in;
        g->z.avail_in = (uInt)g->head;
        g->head = 0;
    }
    g->owned = path != NULL;
    *out = g;
    return 0;
}

static void gz_close(struct gz_src *g)
{
    if (!g)
        return;
    if (g->gz)
        inflateEnd(&g->z);
    if (g->owned)
        close(g->fd);
    free(g);
}

int sp_snapshot_import(sp_snapshot **out, sp_snapstore *s, const char *path, int fd,
                       const char *tag, sp_error **err)
{
    if (out)
        *out = NULL;
    if (!path && fd < 0)
        return sp_err_set(err, SP_EINVAL, 0, "import needs a file or an fd");
    int r;
    if (tag && (r = sp_snap_check_tag(tag, err)) < 0)
        return r;
    if ((r = sp_archive_load(err)) < 0)
        return r;
    struct gz_src *src = NULL;
    if ((r = gz_open(&src, path, fd, err)) < 0)
        return r;
    sp_buf refused = SP_BUF_INIT;
    struct archive *a = new_reader(&refused);
    if (archive_read_open(a, src, NULL, gz_read, NULL) != ARCHIVE_OK) {
        r = read_error(err, a, &refused);
        sp_buf_dispose(&refused);
        archive_read_free(a);
        gz_close(src);
        return r;
    }
    if ((r = sp_snap_lock_write(s, err)) < 0) {
        sp_buf_dispose(&refused);
        archive_read_free(a);
        gz_close(src);
        return r;
    }
    snode *root = sp_snode_new("", 0, SN_DIR);
    root->mode = 0755;
    struct import im = {s->opts.max_data_bytes ? s->opts.max_data_bytes : SNAP_DEFAULT_BUDGET, 0};
    struct archive_entry *e;
    for (;;) {
        int ar = archive_read_next_header(a, &e);
        if (ar == ARCHIVE_EOF)
            break;
        if (ar < ARCHIVE_WARN) {
            r = ar_error(err, a, "import");
            break;
        }
        if ((r = import_entry(s, a, e, root, &im, err)) < 0)
            break;
    }
    /* The tar ends before its gzip member does: read the rest, so that the
     * member's CRC-32 and length are checked too. */
    const void *rest;
    la_ssize_t got = 1;
    while (r == 0 && src->gz && got > 0)
        got = gz_read(a, src, &rest);
    if (got < 0 || (r < 0 && src->why[0])) {
        /* A read of the input failed under libarchive or the store: its own
         * words say what. */
        if (err && *err) {
            sp_error_free(*err);
            *err = NULL;
        }
        r = sp_err_set(err, SP_ERROR, EIO, "import: %s", src->why);
    }
    if (r == 0) {
        mark_dirty(root);
        r = sp_tree_finalize(&s->odb, root, err);
    }
    if (r == 0)
        r = sp_snap_record(out, s, &root->oid, root, tag, err);
    sp_snap_unlock(s);
    sp_snode_free(root, NULL, NULL);
    sp_buf_dispose(&refused);
    archive_read_free(a);
    gz_close(src);
    return r;
}
