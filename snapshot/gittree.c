/* Nodes (what is known about workspace entries) and their encoding as git
 * trees.
 *
 * A git tree cannot say everything a folder holds, so each stored folder is
 * a git tree plus, when needed, a blob named ~sandpod-meta:
 *
 *   - Names. git refuses `.git` in a tree, and `git fsck` fails a store
 *     whose trees hold a `.gitmodules` or `.gitattributes` it dislikes (or
 *     their HFS+/NTFS aliases). A name is stored as "~" + name when it
 *     starts with '.', '~', or a byte that may begin a Unicode character
 *     HFS+ ignores (0xE2, 0xEF), or holds '~' and a digit (an NTFS short
 *     name like GIT~1). The map is one-to-one: stored names beginning with
 *     '~' come only from escaped names, and no real name maps to
 *     ~sandpod-meta (its unescaped form does not need escaping).
 *   - Modes. git keeps 100644 or 100755 for a file and nothing for a
 *     folder. Files are stored with the git mode their owner-exec bit
 *     picks; any permission bits other than 0644/0755 for files and 0755
 *     for folders go into the meta blob, as do fifos (which have no git
 *     entry at all).
 *   - Empty folders are the empty tree.
 *
 *   - Sparse files. A file over SNAP_SMALL_FILE with holes is stored in
 *     sparse form: its blob is not the file's bytes but
 *
 *         "sandpod-sparse 1 SIZE N\n"      the file's size, N extents
 *         N lines "OFFSET LENGTH\n"        its data extents, in order
 *         the extents' bytes, in order     (the holes are not stored)
 *
 *     (numbers in decimal, LENGTH > 0, extents apart and inside SIZE),
 *     and the meta blob says so (a "z" record). A snapshot reads only the
 *     data (SEEK_DATA / SEEK_HOLE, holes under SNAP_HOLE_MIN read as
 *     zeros), a restore writes only the data and makes the rest holes.
 *     It is still a plain blob to git, so `git fsck --strict` passes.
 *
 * The meta blob is "sandpod-meta 1\n" followed by NUL-terminated records
 * sorted by name: ". MODE" (this folder's own bits), "m MODE NAME" (a
 * file's bits), "p MODE NAME" (a fifo); MODE in octal, NAME stored
 * (escaped). A folder with a sparse file has "sandpod-meta 2\n" instead,
 * which adds "z MODE NAME" (a file in sparse form, with its bits): a
 * reader that knows only version 1 refuses it rather than restore a
 * sparse blob as the file's bytes, and every other folder keeps the tree
 * id it always had. Everything is deterministic, so equal folders have
 * equal tree ids, subtrees included. */
#include <stdio.h>
#include <string.h>

#include "snap_internal.h"

/* 4b825dc642cb6eb9a060e54bf8d69288fbee4904 */
const sp_oid sp_empty_tree = {{0x4b, 0x82, 0x5d, 0xc6, 0x42, 0xcb, 0x6e, 0xb9, 0xa0, 0x60,
                               0xe5, 0x4b, 0xf8, 0xd6, 0x92, 0x88, 0xfb, 0xee, 0x49, 0x04}};

#define META_HEADER   "sandpod-meta 1\n"
#define META_HEADER_2 "sandpod-meta 2\n"
#define SPARSE_MAGIC  "sandpod-sparse 1 "

/* -------------------------------------------------------------- nodes -- */

snode *sp_snode_new(const char *name, size_t len, int type)
{
    snode *n = sp_xcalloc(1, sizeof(*n) + len + 1);
    memcpy(n->name, name, len);
    n->name[len] = '\0';
    n->name_len = (uint16_t)len;
    n->type = (uint8_t)type;
    n->wd = -1;
    return n;
}

void sp_snode_free(snode *n, sp_snode_unwatch_fn unwatch, void *ud)
{
    if (!n)
        return;
    if (n->type == SN_DIR) {
        if (unwatch)
            unwatch(ud, n);
        for (uint32_t i = 0; i < n->nkids; i++)
            sp_snode_free(n->kids[i], unwatch, ud);
        free(n->kids);
    }
    free(n);
}

static int cmp_name(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t m = alen < blen ? alen : blen;
    int c = memcmp(a, b, m);
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen ? 1 : 0;
}

snode *sp_snode_find(const snode *dir, const char *name, size_t len, uint32_t *pos)
{
    uint32_t lo = 0, hi = dir->nkids;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const snode *k = dir->kids[mid];
        int c = cmp_name(k->name, k->name_len, name, len);
        if (c == 0) {
            if (pos)
                *pos = mid;
            return dir->kids[mid];
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (pos)
        *pos = lo;
    return NULL;
}

void sp_snode_insert(snode *dir, uint32_t pos, snode *kid)
{
    if (dir->nkids == dir->capkids) {
        dir->capkids = dir->capkids ? dir->capkids * 2 : 8;
        dir->kids = sp_xrealloc(dir->kids, dir->capkids * sizeof(snode *));
    }
    memmove(dir->kids + pos + 1, dir->kids + pos, (dir->nkids - pos) * sizeof(snode *));
    dir->kids[pos] = kid;
    dir->nkids++;
    kid->parent = dir;
}

snode *sp_snode_take(snode *dir, uint32_t pos)
{
    snode *k = dir->kids[pos];
    memmove(dir->kids + pos, dir->kids + pos + 1, (dir->nkids - pos - 1) * sizeof(snode *));
    dir->nkids--;
    k->parent = NULL;
    return k;
}

void sp_snode_dirty_up(snode *n)
{
    for (snode *d = n->type == SN_DIR ? n : n->parent; d; d = d->parent)
        d->flags |= SN_DIRTY;
}

char *sp_snode_path(const snode *n)
{
    if (!n->parent)
        return sp_xstrdup(".");
    size_t len = 0;
    for (const snode *p = n; p->parent; p = p->parent)
        len += p->name_len + 1u;
    char *s = sp_xmalloc(len);
    size_t at = len - 1;
    s[at] = '\0';
    for (const snode *p = n; p->parent; p = p->parent) {
        at -= p->name_len;
        memcpy(s + at, p->name, p->name_len);
        if (at > 0)
            s[--at] = '/';
    }
    return s;
}

void sp_snode_set_stat(snode *n, const struct stat *st)
{
    if (S_ISREG(st->st_mode) && st->st_nlink > 1)
        n->flags |= SN_LINKED;
    else
        n->flags &= (uint8_t)~SN_LINKED;
    n->mode = st->st_mode & 07777;
    n->dev = (uint64_t)st->st_dev;
    n->ino = (uint64_t)st->st_ino;
    n->size = (uint64_t)st->st_size;
    n->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    n->ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

int sp_snode_type_of(mode_t m)
{
    if (S_ISREG(m))
        return SN_FILE;
    if (S_ISDIR(m))
        return SN_DIR;
    if (S_ISLNK(m))
        return SN_LINK;
    if (S_ISFIFO(m))
        return SN_FIFO;
    return 0;
}

sp_fs_type sp_snode_fs_type(int type)
{
    switch (type) {
    case SN_FILE:
        return SP_FS_FILE;
    case SN_DIR:
        return SP_FS_DIR;
    case SN_LINK:
        return SP_FS_SYMLINK;
    default:
        return SP_FS_OTHER;
    }
}

/* ----------------------------------------------------------- escaping -- */

bool sp_name_needs_escape(const char *name, size_t len)
{
    unsigned char c = (unsigned char)name[0];
    if (c == '.' || c == '~' || c == 0xe2 || c == 0xef)
        return true;
    for (size_t i = 0; i + 1 < len; i++)
        if (name[i] == '~' && name[i + 1] >= '0' && name[i + 1] <= '9')
            return true;
    return false;
}

/* --------------------------------------------------------------- write -- */

struct tent {
    const char *name; /* stored name */
    size_t len;
    bool esc; /* name is the real name; "~" goes before it */
    bool is_tree;
    const char *gitmode;
    const sp_oid *oid;
    const snode *k;
};

/* Character i of a stored name as git sorts it: a tree's name is followed
 * by '/'. */
static int tent_char(const struct tent *t, size_t i)
{
    size_t full = t->len + (t->esc ? 1 : 0);
    if (i < full) {
        if (t->esc)
            return i == 0 ? '~' : (unsigned char)t->name[i - 1];
        return (unsigned char)t->name[i];
    }
    if (i == full)
        return t->is_tree ? '/' : 0;
    return 0;
}

static int cmp_tent(const void *a, const void *b)
{
    const struct tent *x = a, *y = b;
    for (size_t i = 0;; i++) {
        int cx = tent_char(x, i), cy = tent_char(y, i);
        if (cx != cy || cx == 0)
            return cx - cy;
    }
}

static void add_stored(sp_buf *b, const struct tent *t)
{
    if (t->esc)
        sp_buf_addc(b, '~');
    sp_buf_add(b, t->name, t->len);
}

/* Compute and write the tree of one folder whose children's ids are all
 * known. */
static int write_dir(sp_odb *o, snode *dir, sp_error **err)
{
    size_t n = 0;
    struct tent *v = sp_xmalloc((dir->nkids + 1) * sizeof(*v));
    struct tent *meta = sp_xmalloc((dir->nkids + 1) * sizeof(*meta));
    size_t nmeta = 0;
    bool sparse = false;
    for (uint32_t i = 0; i < dir->nkids; i++) {
        snode *k = dir->kids[i];
        struct tent t = {k->name,
                         k->name_len,
                         sp_name_needs_escape(k->name, k->name_len),
                         k->type == SN_DIR,
                         NULL,
                         &k->oid,
                         k};
        switch (k->type) {
        case SN_FILE:
            t.gitmode = (k->mode & 0100) ? "100755" : "100644";
            if (k->mode != ((k->mode & 0100) ? 0755u : 0644u) || (k->flags & SN_SPARSE))
                meta[nmeta++] = t;
            if (k->flags & SN_SPARSE)
                sparse = true;
            break;
        case SN_DIR:
            t.gitmode = "40000";
            break;
        case SN_LINK:
            t.gitmode = "120000";
            break;
        case SN_FIFO:
            t.gitmode = NULL;
            meta[nmeta++] = t;
            break;
        default: /* sockets, devices: not kept */
            continue;
        }
        if (t.gitmode)
            v[n++] = t;
    }

    int ret = 0;
    sp_oid meta_oid;
    sp_buf b = SP_BUF_INIT;
    if (nmeta || dir->mode != 0755) {
        sp_buf_adds(&b, sparse ? META_HEADER_2 : META_HEADER);
        if (dir->mode != 0755) {
            sp_buf_printf(&b, ". %o", dir->mode);
            sp_buf_addc(&b, '\0');
        }
        /* Sorted by stored name: files and fifos only, so no '/' applies. */
        qsort(meta, nmeta, sizeof(*meta), cmp_tent);
        for (size_t i = 0; i < nmeta; i++) {
            const snode *k = meta[i].k;
            char kind = k->type == SN_FIFO ? 'p' : (k->flags & SN_SPARSE) ? 'z' : 'm';
            sp_buf_printf(&b, "%c %o ", kind, k->mode);
            add_stored(&b, &meta[i]);
            sp_buf_addc(&b, '\0');
        }
        if ((ret = sp_odb_write(o, SP_OBJ_BLOB, b.data, b.len, &meta_oid, err)) < 0)
            goto done;
        struct tent t = {
            SNAP_META_NAME, strlen(SNAP_META_NAME), false, false, "100644", &meta_oid, NULL};
        v[n++] = t;
    }
    qsort(v, n, sizeof(*v), cmp_tent);
    b.len = 0;
    for (size_t i = 0; i < n; i++) {
        sp_buf_adds(&b, v[i].gitmode);
        sp_buf_addc(&b, ' ');
        add_stored(&b, &v[i]);
        sp_buf_addc(&b, '\0');
        sp_buf_add(&b, v[i].oid->id, 20);
    }
    ret = sp_odb_write(o, SP_OBJ_TREE, b.data ? b.data : "", b.len, &dir->oid, err);
done:
    sp_buf_dispose(&b);
    free(v);
    free(meta);
    return ret;
}

int sp_tree_finalize(sp_odb *o, snode *dir, sp_error **err)
{
    if (!(dir->flags & SN_DIRTY))
        return 0;
    for (uint32_t i = 0; i < dir->nkids; i++) {
        snode *k = dir->kids[i];
        if (k->type == SN_DIR && (k->flags & SN_DIRTY)) {
            int r = sp_tree_finalize(o, k, err);
            if (r < 0)
                return r;
        }
    }
    int r = write_dir(o, dir, err);
    if (r == 0)
        dir->flags &= (uint8_t)~SN_DIRTY;
    return r;
}

/* ---------------------------------------------------------------- read -- */

static int bad_tree(sp_error **err, const sp_oid *tree, const char *why)
{
    char hex[41];
    sp_oid_hex(tree, hex);
    return sp_err_set(err, SP_EINVAL, 0, "not a sandpod snapshot tree (%s): %s", why, hex);
}

static int cmp_tentry(const void *a, const void *b)
{
    return strcmp(((const sp_tentry *)a)->name, ((const sp_tentry *)b)->name);
}

static char *unescape(const char *stored, size_t len)
{
    if (len > 0 && stored[0] == '~')
        return sp_xstrndup(stored + 1, len - 1);
    return sp_xstrndup(stored, len);
}

/* out->v holds the tree's entries sorted by name; fifos are appended. */
static int parse_meta(sp_tdir *out, const sp_buf *m, const sp_oid *tree, sp_error **err)
{
    size_t nfiles = out->n;
    size_t hl = strlen(META_HEADER);
    bool v2 = m->len >= hl && memcmp(m->data, META_HEADER_2, hl) == 0;
    if (m->len < hl || (!v2 && memcmp(m->data, META_HEADER, hl) != 0))
        return bad_tree(err, tree, "unknown metadata version");
    const char *p = m->data + hl, *end = m->data + m->len;
    while (p < end) {
        const char *rec_end = memchr(p, '\0', (size_t)(end - p));
        if (!rec_end)
            return bad_tree(err, tree, "metadata record");
        char kind = p[0];
        if (rec_end - p < 3 || p[1] != ' ')
            return bad_tree(err, tree, "metadata record");
        char *after = NULL;
        unsigned long mode = strtoul(p + 2, &after, 8);
        if (after == p + 2 || mode > 07777)
            return bad_tree(err, tree, "metadata mode");
        if (kind == '.') {
            out->mode = (uint32_t)mode;
        } else if (kind == 'm' || kind == 'p' || (kind == 'z' && v2)) {
            if (*after != ' ' || after + 1 >= rec_end)
                return bad_tree(err, tree, "metadata record");
            const char *nm = after + 1;
            size_t nl = (size_t)(rec_end - nm);
            cleanup_free char *real = unescape(nm, nl);
            if (kind == 'p') {
                out->v = sp_xrealloc(out->v, (out->n + 1) * sizeof(sp_tentry));
                sp_tentry *e = &out->v[out->n++];
                memset(e, 0, sizeof(*e));
                e->name = steal_pointer(&real);
                e->type = SN_FIFO;
                e->mode = (uint32_t)mode;
            } else {
                sp_tentry key = {.name = real};
                sp_tentry *e =
                    nfiles ? bsearch(&key, out->v, nfiles, sizeof(sp_tentry), cmp_tentry) : NULL;
                if (!e || e->type != SN_FILE)
                    return bad_tree(err, tree, "metadata names a missing file");
                e->mode = (uint32_t)mode;
                e->sparse = kind == 'z';
            }
        } else {
            return bad_tree(err, tree, "metadata record kind");
        }
        p = rec_end + 1;
    }
    return 0;
}

int sp_tree_read(sp_tdir *out, sp_odb *o, const sp_oid *tree, sp_error **err)
{
    memset(out, 0, sizeof(*out));
    out->mode = 0755;
    if (sp_oid_equal(tree, &sp_empty_tree))
        return 0;
    sp_buf b = SP_BUF_INIT;
    int type = 0;
    int r = sp_odb_read(o, tree, &type, &b, err);
    if (r < 0)
        return r;
    if (type != SP_OBJ_TREE) {
        sp_buf_dispose(&b);
        return bad_tree(err, tree, "not a tree");
    }
    sp_oid meta_oid;
    bool have_meta = false;
    size_t cap = 0;
    const char *p = b.data, *end = b.data + b.len;
    while (p < end) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        const char *nul = sp ? memchr(sp, '\0', (size_t)(end - sp)) : NULL;
        if (!sp || !nul || end - nul < 21) {
            r = bad_tree(err, tree, "truncated");
            goto fail;
        }
        const char *mstart = p;
        size_t mlen = (size_t)(sp - p);
        const char *nm = sp + 1;
        size_t nl = (size_t)(nul - nm);
        sp_oid id;
        memcpy(id.id, nul + 1, 20);
        p = nul + 21;
        int ty;
        uint32_t mode;
        if (mlen == 5 && memcmp(mstart, "40000", 5) == 0) {
            ty = SN_DIR;
            mode = 0755;
        } else if (mlen == 6 && memcmp(mstart, "120000", 6) == 0) {
            ty = SN_LINK;
            mode = 0777;
        } else if (mlen == 6 && memcmp(mstart, "100755", 6) == 0) {
            ty = SN_FILE;
            mode = 0755;
        } else if (mlen == 6 && memcmp(mstart, "100644", 6) == 0) {
            ty = SN_FILE;
            mode = 0644;
        } else {
            r = bad_tree(err, tree, "entry mode");
            goto fail;
        }
        if (nl == strlen(SNAP_META_NAME) && memcmp(nm, SNAP_META_NAME, nl) == 0 && ty == SN_FILE) {
            meta_oid = id;
            have_meta = true;
            continue;
        }
        if (out->n == cap) {
            cap = cap ? cap * 2 : 16;
            out->v = sp_xrealloc(out->v, cap * sizeof(sp_tentry));
        }
        sp_tentry *e = &out->v[out->n++];
        e->name = unescape(nm, nl);
        e->type = (uint8_t)ty;
        e->mode = mode;
        e->oid = id;
        e->sparse = false;
        if (!*e->name || strchr(e->name, '/') || strcmp(e->name, ".") == 0 ||
            strcmp(e->name, "..") == 0) {
            r = bad_tree(err, tree, "entry name");
            goto fail;
        }
    }
    if (out->n > 1)
        qsort(out->v, out->n, sizeof(sp_tentry), cmp_tentry);
    if (have_meta) {
        size_t before = out->n;
        b.len = 0;
        if ((r = sp_odb_read(o, &meta_oid, &type, &b, err)) < 0)
            goto fail;
        if ((r = parse_meta(out, &b, tree, err)) < 0)
            goto fail;
        if (out->n != before)
            qsort(out->v, out->n, sizeof(sp_tentry), cmp_tentry);
    }
    sp_buf_dispose(&b);
    return 0;
fail:
    sp_buf_dispose(&b);
    sp_tdir_dispose(out);
    return r;
}

void sp_tdir_dispose(sp_tdir *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].name);
    free(t->v);
    memset(t, 0, sizeof(*t));
}

/* -------------------------------------------------------- sparse form -- */

void sp_sparse_header(sp_buf *out, uint64_t size, const sp_extent *v, size_t n)
{
    sp_buf_printf(out, SPARSE_MAGIC "%llu %zu\n", (unsigned long long)size, n);
    for (size_t i = 0; i < n; i++)
        sp_buf_printf(out, "%llu %llu\n", (unsigned long long)v[i].off,
                      (unsigned long long)v[i].len);
}

/* The reader: lines first (into `line`), then the data routed to its
 * extents. */
struct sparse_rd {
    const sp_sparse_sink *sink;
    const char *display;
    char line[96];
    size_t line_len;
    bool have_header, in_data;
    uint64_t size, want; /* want: extents still to read, in the map */
    sp_extent *v;
    size_t n, cap, at; /* at: the extent the data is in */
    uint64_t pos;      /* bytes of v[at] done */
};

static int bad_sparse(struct sparse_rd *rd, sp_error **err, const char *why)
{
    return sp_err_set(err, SP_EINVAL, 0, "snapshot holds a damaged sparse file (%s): %s", why,
                      rd->display ? rd->display : "?");
}

/* A decimal number as the writer prints it: digits, no leading zero. */
static bool parse_u64(const char **p, const char *end, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    if (s >= end || *s < '0' || *s > '9' ||
        (*s == '0' && s + 1 < end && s[1] >= '0' && s[1] <= '9'))
        return false;
    for (; s < end && *s >= '0' && *s <= '9'; s++) {
        if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *p = s;
    *out = v;
    return true;
}

static int sparse_line(struct sparse_rd *rd, sp_error **err)
{
    const char *p = rd->line, *end = rd->line + rd->line_len;
    if (!rd->have_header) {
        size_t ml = strlen(SPARSE_MAGIC);
        uint64_t n;
        if (rd->line_len < ml || memcmp(p, SPARSE_MAGIC, ml) != 0)
            return bad_sparse(rd, err, "header");
        p += ml;
        if (!parse_u64(&p, end, &rd->size) || p >= end || *p++ != ' ' || !parse_u64(&p, end, &n) ||
            p != end)
            return bad_sparse(rd, err, "header");
        if (n > SNAP_MAX_EXTENTS || rd->size > (uint64_t)INT64_MAX)
            return bad_sparse(rd, err, "too big");
        rd->have_header = true;
        rd->want = n;
        return 0;
    }
    sp_extent x;
    if (!parse_u64(&p, end, &x.off) || p >= end || *p++ != ' ' || !parse_u64(&p, end, &x.len) ||
        p != end)
        return bad_sparse(rd, err, "extent");
    uint64_t prev_end = rd->n ? rd->v[rd->n - 1].off + rd->v[rd->n - 1].len : 0;
    if (x.len == 0 || x.off < prev_end || x.off > rd->size || x.len > rd->size - x.off)
        return bad_sparse(rd, err, "extent");
    if (rd->n == rd->cap) {
        rd->cap = rd->cap ? rd->cap * 2 : 64;
        rd->v = sp_xrealloc(rd->v, rd->cap * sizeof(sp_extent));
    }
    rd->v[rd->n++] = x;
    rd->want--;
    return 0;
}

static int sparse_sink(void *ud, uint64_t size, const void *p, size_t n, sp_error **err)
{
    struct sparse_rd *rd = ud;
    (void)size;
    const char *b = p;
    while (b && n > 0) {
        if (!rd->in_data) {
            const char *nl = memchr(b, '\n', n);
            size_t take = nl ? (size_t)(nl - b) : n;
            if (rd->line_len + take >= sizeof(rd->line))
                return bad_sparse(rd, err, "line too long");
            memcpy(rd->line + rd->line_len, b, take);
            rd->line_len += take;
            b += take;
            n -= take;
            if (!nl)
                break;
            b++;
            n--;
            int r = sparse_line(rd, err);
            rd->line_len = 0;
            if (r < 0)
                return r;
            if (rd->have_header && rd->want == 0) {
                rd->in_data = true;
                if ((r = rd->sink->map(rd->sink->ud, rd->size, rd->v, rd->n, err)) < 0)
                    return r;
            }
            continue;
        }
        while (rd->at < rd->n && rd->pos == rd->v[rd->at].len) {
            rd->at++;
            rd->pos = 0;
        }
        if (rd->at == rd->n)
            return bad_sparse(rd, err, "data past the extents");
        uint64_t left = rd->v[rd->at].len - rd->pos;
        size_t take = left < n ? (size_t)left : n;
        int r = rd->sink->data(rd->sink->ud, rd->v[rd->at].off + rd->pos, b, take, err);
        if (r < 0)
            return r;
        rd->pos += take;
        b += take;
        n -= take;
    }
    return 0;
}

int sp_sparse_stream(sp_odb *o, const sp_oid *id, const sp_sparse_sink *sink, const char *display,
                     sp_error **err)
{
    struct sparse_rd rd;
    memset(&rd, 0, sizeof(rd));
    rd.sink = sink;
    rd.display = display;
    int r = sp_odb_blob_stream(o, id, sparse_sink, &rd, err);
    if (r == 0) {
        while (rd.at < rd.n && rd.pos == rd.v[rd.at].len) {
            rd.at++;
            rd.pos = 0;
        }
        if (!rd.in_data || rd.at != rd.n)
            r = bad_sparse(&rd, err, "truncated");
    }
    free(rd.v);
    return r;
}
