/* Diff between two snapshots, or a snapshot and the live workspace.
 *
 * Both sides are stored trees (the live workspace is read into one first,
 * as a snapshot would be), compared folder by folder; equal tree ids are
 * skipped unread, so the cost follows what differs. The unified patch text
 * comes from libgit2's diff of the two blobs, under headers we write
 * ourselves: git's own would show the escaped names and metadata blobs of
 * the store rather than the workspace. A file over SNAP_SMALL_FILE is not
 * read for the patch (a "Large files ... differ" line, as git writes
 * "Binary files ... differ"), so a patch's memory stays bounded by what it
 * shows. */
#include <stddef.h>
#include <string.h>

#include <git2.h>

#include "snap_internal.h"

int sp_snap_live_tree(sp_snapstore *s, sp_oid *tree, sp_error **err);

const char *sp_snapshot_change_name(sp_snapshot_change_kind k)
{
    switch (k) {
    case SP_CHANGE_ADDED:
        return "added";
    case SP_CHANGE_MODIFIED:
        return "modified";
    case SP_CHANGE_DELETED:
        return "deleted";
    case SP_CHANGE_TYPE_CHANGED:
        return "type_changed";
    }
    return "unknown";
}

struct side {
    int type; /* SN_*, 0 = absent */
    uint32_t mode;
    sp_oid oid;
    bool sparse; /* a file in sparse form */
};

struct dctx {
    sp_odb *odb;
    sp_snapdiff *d;
    size_t cap;
    /* For the patch: blob ids of each change's sides. */
    struct side *olds, *news;
};

static void emit(struct dctx *c, const char *path, sp_snapshot_change_kind kind,
                 const struct side *a, const struct side *b)
{
    sp_snapdiff *d = c->d;
    if (d->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 64;
        d->v = sp_xrealloc(d->v, c->cap * sizeof(*d->v));
        c->olds = sp_xrealloc(c->olds, c->cap * sizeof(*c->olds));
        c->news = sp_xrealloc(c->news, c->cap * sizeof(*c->news));
    }
    static const struct side none = {0, 0, {{0}}, false};
    if (!a)
        a = &none;
    if (!b)
        b = &none;
    sp_snapshot_change *ch = &d->v[d->n];
    memset(ch, 0, sizeof(*ch));
    ch->path = sp_xstrdup(path);
    ch->kind = kind;
    ch->old_type = a->type ? sp_snode_fs_type(a->type) : SP_FS_OTHER;
    ch->new_type = b->type ? sp_snode_fs_type(b->type) : SP_FS_OTHER;
    ch->old_mode = a->mode;
    ch->new_mode = b->mode;
    ch->content_changed =
        (a->type == SN_FILE || a->type == SN_LINK || b->type == SN_FILE || b->type == SN_LINK) &&
        !(a->type == b->type && sp_oid_equal(&a->oid, &b->oid));
    c->olds[d->n] = *a;
    c->news[d->n] = *b;
    d->n++;
    switch (kind) {
    case SP_CHANGE_ADDED:
        d->added++;
        break;
    case SP_CHANGE_MODIFIED:
        d->modified++;
        break;
    case SP_CHANGE_DELETED:
        d->deleted++;
        break;
    case SP_CHANGE_TYPE_CHANGED:
        d->type_changed++;
        break;
    }
}

static char *join(const char *dir, const char *name)
{
    return *dir ? sp_xasprintf("%s/%s", dir, name) : sp_xstrdup(name);
}

/* Every entry below tree as added (or deleted). */
static int emit_all(struct dctx *c, const sp_oid *tree, const char *path, bool added,
                    unsigned depth, sp_error **err)
{
    if (depth > SNAP_MAX_DEPTH + 8)
        return sp_err_set(err, SP_ETOOBIG, 0, "trees nested too deep");
    sp_tdir td;
    int r = sp_tree_read(&td, c->odb, tree, err);
    for (size_t i = 0; r == 0 && i < td.n; i++) {
        const sp_tentry *e = &td.v[i];
        cleanup_free char *p = join(path, e->name);
        struct side s = {e->type, e->mode, e->oid, e->sparse};
        sp_tdir sub = {0};
        if (e->type == SN_DIR) {
            if ((r = sp_tree_read(&sub, c->odb, &e->oid, err)) < 0)
                break;
            s.mode = sub.mode;
            sp_tdir_dispose(&sub);
        }
        emit(c, p, added ? SP_CHANGE_ADDED : SP_CHANGE_DELETED, added ? NULL : &s,
             added ? &s : NULL);
        if (e->type == SN_DIR)
            r = emit_all(c, &e->oid, p, added, depth + 1, err);
    }
    sp_tdir_dispose(&td);
    return r;
}

static int diff_dirs(struct dctx *c, const sp_oid *a, const sp_oid *b, const char *path,
                     unsigned depth, sp_error **err)
{
    if (sp_oid_equal(a, b))
        return 0;
    if (depth > SNAP_MAX_DEPTH + 8)
        return sp_err_set(err, SP_ETOOBIG, 0, "trees nested too deep");
    sp_tdir ta, tb;
    int r = sp_tree_read(&ta, c->odb, a, err);
    if (r < 0)
        return r;
    if ((r = sp_tree_read(&tb, c->odb, b, err)) < 0) {
        sp_tdir_dispose(&ta);
        return r;
    }
    if (ta.mode != tb.mode) {
        struct side sa = {SN_DIR, ta.mode, *a, false}, sb = {SN_DIR, tb.mode, *b, false};
        emit(c, *path ? path : ".", SP_CHANGE_MODIFIED, &sa, &sb);
    }
    size_t i = 0, j = 0;
    while (r == 0 && (i < ta.n || j < tb.n)) {
        int cmp = i >= ta.n ? 1 : j >= tb.n ? -1 : strcmp(ta.v[i].name, tb.v[j].name);
        const sp_tentry *ea = cmp <= 0 ? &ta.v[i] : NULL, *eb = cmp >= 0 ? &tb.v[j] : NULL;
        cleanup_free char *p = join(path, ea ? ea->name : eb->name);
        struct side sa = {0, 0, {{0}}, false}, sb = {0, 0, {{0}}, false};
        if (ea)
            sa = (struct side){ea->type, ea->mode, ea->oid, ea->sparse};
        if (eb)
            sb = (struct side){eb->type, eb->mode, eb->oid, eb->sparse};
        /* A folder's bits live in its own tree. */
        sp_tdir sub;
        if (ea && ea->type == SN_DIR && (!eb || eb->type != SN_DIR)) {
            if ((r = sp_tree_read(&sub, c->odb, &ea->oid, err)) < 0)
                break;
            sa.mode = sub.mode;
            sp_tdir_dispose(&sub);
        }
        if (eb && eb->type == SN_DIR && (!ea || ea->type != SN_DIR)) {
            if ((r = sp_tree_read(&sub, c->odb, &eb->oid, err)) < 0)
                break;
            sb.mode = sub.mode;
            sp_tdir_dispose(&sub);
        }
        if (!eb) {
            emit(c, p, SP_CHANGE_DELETED, &sa, NULL);
            if (ea->type == SN_DIR)
                r = emit_all(c, &ea->oid, p, false, depth + 1, err);
        } else if (!ea) {
            emit(c, p, SP_CHANGE_ADDED, NULL, &sb);
            if (eb->type == SN_DIR)
                r = emit_all(c, &eb->oid, p, true, depth + 1, err);
        } else if (ea->type != eb->type) {
            emit(c, p, SP_CHANGE_TYPE_CHANGED, &sa, &sb);
            if (ea->type == SN_DIR)
                r = emit_all(c, &ea->oid, p, false, depth + 1, err);
            if (r == 0 && eb->type == SN_DIR)
                r = emit_all(c, &eb->oid, p, true, depth + 1, err);
        } else if (ea->type == SN_DIR) {
            r = diff_dirs(c, &ea->oid, &eb->oid, p, depth + 1, err);
        } else if (!sp_oid_equal(&ea->oid, &eb->oid) || ea->mode != eb->mode) {
            emit(c, p, SP_CHANGE_MODIFIED, &sa, &sb);
        }
        if (cmp <= 0)
            i++;
        if (cmp >= 0)
            j++;
    }
    sp_tdir_dispose(&ta);
    sp_tdir_dispose(&tb);
    return r;
}

/* --------------------------------------------------------------- patch -- */

static unsigned git_mode(const struct side *s)
{
    switch (s->type) {
    case SN_FILE:
        return 0100000 | s->mode;
    case SN_LINK:
        return 0120000;
    case SN_FIFO:
        return 0010000 | s->mode;
    default:
        return 0040000 | s->mode;
    }
}

static int print_line(const git_diff_delta *delta, const git_diff_hunk *hunk,
                      const git_diff_line *line, void *payload)
{
    sp_buf *b = payload;
    switch (line->origin) {
    case GIT_DIFF_LINE_FILE_HDR:
        break; /* ours is written already */
    case GIT_DIFF_LINE_CONTEXT:
    case GIT_DIFF_LINE_ADDITION:
    case GIT_DIFF_LINE_DELETION:
        sp_buf_addc(b, line->origin);
        sp_buf_add(b, line->content, line->content_len);
        break;
    default:
        sp_buf_add(b, line->content, line->content_len);
        break;
    }
    return 0;
}

static int lg2_fail(sp_error **err, const char *what)
{
    const git_error *e = git_error_last();
    return sp_err_set(err, SP_ERROR, 0, "%s: %s", what, e && e->message ? e->message : "libgit2");
}

/* The patch of one path from side a to side b (either may be absent). */
/* A path for a patch header, as git writes it: `prefix` + path, and the
 * whole C-quoted when it holds control characters, '"' or '\\' — so a name
 * made by the workload cannot forge header lines. Bytes above 0x7f stay as
 * they are (git's core.quotePath=false). */
static char *header_name(const char *prefix, const char *path)
{
    bool quote = false;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++)
        if (*p < 0x20 || *p == 0x7f || *p == '"' || *p == '\\')
            quote = true;
    if (!quote)
        return sp_xasprintf("%s%s", prefix, path);
    sp_buf b = SP_BUF_INIT;
    sp_buf_addc(&b, '"');
    sp_buf_adds(&b, prefix);
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        switch (*p) {
        case '\a':
            sp_buf_adds(&b, "\\a");
            break;
        case '\b':
            sp_buf_adds(&b, "\\b");
            break;
        case '\t':
            sp_buf_adds(&b, "\\t");
            break;
        case '\n':
            sp_buf_adds(&b, "\\n");
            break;
        case '\v':
            sp_buf_adds(&b, "\\v");
            break;
        case '\f':
            sp_buf_adds(&b, "\\f");
            break;
        case '\r':
            sp_buf_adds(&b, "\\r");
            break;
        case '"':
            sp_buf_adds(&b, "\\\"");
            break;
        case '\\':
            sp_buf_adds(&b, "\\\\");
            break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                sp_buf_printf(&b, "\\%03o", *p);
            else
                sp_buf_addc(&b, (char)*p);
        }
    }
    sp_buf_addc(&b, '"');
    return sp_buf_steal(&b);
}

/* A file a patch does not show: over SNAP_SMALL_FILE bytes, or in sparse
 * form (which only files over that size take). Only the object's header
 * is read: a patch never loads a large blob. */
static int is_large(struct dctx *c, const struct side *s, bool *large, sp_error **err)
{
    if (s->type != SN_FILE)
        return 0;
    if (s->sparse) {
        *large = true;
        return 0;
    }
    uint64_t size = 0;
    int r = sp_odb_object_size(c->odb, &s->oid, &size, err);
    if (r == 0 && size > SNAP_SMALL_FILE)
        *large = true;
    return r;
}

static int patch_sides(struct dctx *c, const char *path, struct side a, struct side b,
                       unsigned context, sp_buf *out, sp_error **err)
{
    bool ablob = a.type == SN_FILE || a.type == SN_LINK;
    bool bblob = b.type == SN_FILE || b.type == SN_LINK;
    char *an = header_name("a/", path), *bn = header_name("b/", path);
    if (!ablob && !bblob) {
        if (a.type && b.type && a.mode != b.mode)
            sp_buf_printf(out, "diff --git %s %s\nold mode %06o\nnew mode %06o\n", an, bn,
                          git_mode(&a), git_mode(&b));
        free(an);
        free(bn);
        return 0;
    }
    sp_buf_printf(out, "diff --git %s %s\n", an, bn);
    if (!a.type)
        sp_buf_printf(out, "new file mode %06o\n", git_mode(&b));
    else if (!b.type)
        sp_buf_printf(out, "deleted file mode %06o\n", git_mode(&a));
    else if (git_mode(&a) != git_mode(&b))
        sp_buf_printf(out, "old mode %06o\nnew mode %06o\n", git_mode(&a), git_mode(&b));
    sp_buf da = SP_BUF_INIT, db = SP_BUF_INIT;
    int type, r = 0;
    if (a.type && b.type && sp_oid_equal(&a.oid, &b.oid))
        goto done;
    bool large = false;
    if ((r = is_large(c, &a, &large, err)) < 0 ||
        (!large && (r = is_large(c, &b, &large, err)) < 0))
        goto done;
    if (large) {
        sp_buf_printf(out, "Large files %s and %s differ\n", a.type ? an : "/dev/null",
                      b.type ? bn : "/dev/null");
        goto done;
    }
    if (a.type && (r = sp_odb_read(c->odb, &a.oid, &type, &da, err)) < 0)
        goto done;
    if (b.type && (r = sp_odb_read(c->odb, &b.oid, &type, &db, err)) < 0)
        goto done;
    void *repo = NULL;
    if ((r = sp_odb_lg2(c->odb, &repo, err)) < 0)
        goto done;
    git_diff_options o;
    git_diff_options_init(&o, GIT_DIFF_OPTIONS_VERSION);
    o.context_lines = context;
    git_patch *patch = NULL;
    if (git_patch_from_buffers(&patch, a.type ? da.data : NULL, da.len, a.type ? an : NULL,
                               b.type ? db.data : NULL, db.len, b.type ? bn : NULL, &o) < 0) {
        r = lg2_fail(err, "diff");
        goto done;
    }
    const git_diff_delta *delta = git_patch_get_delta(patch);
    if (delta && (delta->flags & GIT_DIFF_FLAG_BINARY)) {
        sp_buf_printf(out, "Binary files %s and %s differ\n", a.type ? an : "/dev/null",
                      b.type ? bn : "/dev/null");
    } else {
        sp_buf_printf(out, "--- %s\n+++ %s\n", a.type ? an : "/dev/null",
                      b.type ? bn : "/dev/null");
        if (git_patch_print(patch, print_line, out) < 0)
            r = lg2_fail(err, "diff");
    }
    git_patch_free(patch);
done:
    free(an);
    free(bn);
    sp_buf_dispose(&da);
    sp_buf_dispose(&db);
    return r;
}

static int patch_one(struct dctx *c, size_t i, unsigned context, sp_buf *out, sp_error **err)
{
    const sp_snapshot_change *ch = &c->d->v[i];
    struct side a = c->olds[i], b = c->news[i], none = {0, 0, {{0}}, false};
    if (ch->kind != SP_CHANGE_TYPE_CHANGED)
        return patch_sides(c, ch->path, a, b, context, out, err);
    /* As git shows it: the old entry deleted, the new one added. */
    int r = 0;
    if (a.type == SN_FILE || a.type == SN_LINK)
        r = patch_sides(c, ch->path, a, none, context, out, err);
    if (r == 0 && (b.type == SN_FILE || b.type == SN_LINK))
        r = patch_sides(c, ch->path, none, b, context, out, err);
    return r;
}

/* -------------------------------------------------------------- public -- */

static int side_tree(sp_snapstore *s, const char *ref, sp_oid *tree, char **name, sp_error **err)
{
    sp_snapshot *snap = NULL;
    int r = sp_snap_resolve(&snap, s, ref, err);
    if (r == 0)
        r = sp_snap_commit_tree(&s->odb, snap->commit, tree, err);
    if (r == 0)
        *name = sp_xstrdup(snap->commit);
    sp_snapshot_free(snap);
    return r;
}

int sp_snapshot_diff(sp_snapdiff **out, sp_snapstore *s, const char *from, const char *to,
                     const sp_snapshot_diff_opts *opts, sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_SNAPSHOT_DIFF_OPTS_VERSION, "sp_snapshot_diff_opts", err) < 0)
        return SP_EINVAL;
    sp_snapshot_diff_opts o = SP_SNAPSHOT_DIFF_OPTS_INIT;
    if (opts && opts->version == 1)
        /* A caller built against the first layout: its struct ends there. */
        memcpy(&o, opts, offsetof(sp_snapshot_diff_opts, patch_select));
    else if (opts)
        o = *opts;
    o.version = SP_SNAPSHOT_DIFF_OPTS_VERSION;
    sp_snapdiff *d = sp_xcalloc(1, sizeof(*d));
    sp_oid ta, tb;
    int r = side_tree(s, from, &ta, &d->from, err);
    if (r == 0) {
        if (to) {
            r = side_tree(s, to, &tb, &d->to, err);
        } else {
            r = sp_snap_live_tree(s, &tb, err);
            d->to = sp_xstrdup("workspace");
        }
    }
    struct dctx c = {&s->odb, d, 0, NULL, NULL};
    if (r == 0)
        r = diff_dirs(&c, &ta, &tb, "", 0, err);
    if (r == 0 && o.patch) {
        sp_buf b = SP_BUF_INIT;
        sp_buf_grow(&b, 1);
        for (size_t i = 0; i < d->n && r == 0; i++)
            if (!o.patch_select || o.patch_select(o.patch_select_userdata, d->v[i].path))
                r = patch_one(&c, i, o.context_lines ? o.context_lines : 3, &b, err);
        d->patch = sp_buf_steal(&b);
    }
    free(c.olds);
    free(c.news);
    if (r < 0) {
        sp_snapdiff_free(d);
        return r;
    }
    *out = d;
    return 0;
}

void sp_snapdiff_free(sp_snapdiff *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n; i++)
        free(d->v[i].path);
    free(d->v);
    free(d->from);
    free(d->to);
    free(d->patch);
    free(d);
}

/* ------------------------------------------------------ one entry -- */

void sp_snapshot_entry_dispose(sp_snapshot_entry *e)
{
    if (!e)
        return;
    free(e->data);
    memset(e, 0, sizeof(*e));
}

/* The entry called `name` in the stored folder `tree`. */
/* The folder `tree`, parsed, from the store's cache (read and cached
 * when missing). The result is owned by the cache. */
static int cached_tree(sp_snapstore *s, const sp_oid *tree, const sp_tdir **out, sp_error **err)
{
    size_t n = sizeof(s->tcache) / sizeof(s->tcache[0]);
    for (size_t i = 0; i < n; i++)
        if (s->tcache[i].set && sp_oid_equal(&s->tcache[i].oid, tree)) {
            *out = &s->tcache[i].t;
            return 0;
        }
    struct sp_tcache *c = &s->tcache[s->tcache_next++ % n];
    sp_tdir_dispose(&c->t);
    c->set = false;
    int r = sp_tree_read(&c->t, &s->odb, tree, err);
    if (r < 0)
        return r;
    c->oid = *tree;
    c->set = true;
    *out = &c->t;
    return 0;
}

/* The entry `name` (len bytes) of folder `tree`: a binary search, the
 * entries being sorted by name bytewise. */
static int entry_in(sp_snapstore *s, const sp_oid *tree, const char *name, size_t len,
                    sp_tentry *out, sp_error **err)
{
    const sp_tdir *t = NULL;
    int r = cached_tree(s, tree, &t, err);
    if (r < 0)
        return r;
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *m = t->v[mid].name;
        size_t ml = strlen(m);
        int c = memcmp(m, name, ml < len ? ml : len);
        if (c == 0)
            c = ml < len ? -1 : ml > len ? 1 : 0;
        if (c == 0) {
            *out = t->v[mid];
            out->name = NULL;
            return 0;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return SP_ENOTFOUND;
}

/* Find `path` in snapshot `ref`: its tree entry (the root: a folder) and
 * its permission bits. */
static int lookup(sp_snapstore *s, const char *ref, const char *path, sp_tentry *e, uint32_t *mode,
                  sp_error **err)
{
    sp_oid cur;
    char *name = NULL;
    int r = side_tree(s, ref, &cur, &name, err);
    free(name);
    if (r < 0)
        return r;
    *e = (sp_tentry){.type = SN_DIR};
    *mode = 0;
    const char *p = path;
    if (strcmp(p, ".") == 0)
        p = "";
    bool root = !*p;
    for (;;) {
        size_t len = strcspn(p, "/");
        if (len == 0) {
            if (*p)
                return sp_err_set(err, SP_EINVAL, 0, "bad path in a snapshot: %s", path);
            break; /* the root */
        }
        if (e->type != SN_DIR)
            return sp_err_set(err, SP_ENOTFOUND, 0, "%s: not in the snapshot", path);
        sp_error *ee = NULL;
        r = entry_in(s, &cur, p, len, e, &ee);
        if (r == SP_ENOTFOUND)
            return sp_err_set(err, SP_ENOTFOUND, 0, "%s: not in the snapshot", path);
        if (r < 0) {
            if (err)
                *err = ee;
            else
                sp_error_free(ee);
            return r;
        }
        cur = e->oid;
        *mode = e->mode;
        p += len;
        if (!*p)
            break;
        p++;
    }
    if (root || e->type == SN_DIR) {
        /* A folder's own bits are in its tree. */
        const sp_tdir *t = NULL;
        if ((r = cached_tree(s, &cur, &t, err)) < 0)
            return r;
        *mode = t->mode;
        e->oid = cur;
    }
    return 0;
}

/* Fill out's type, mode and size from a found entry. */
static int entry_stat(sp_snapstore *s, const char *path, const sp_tentry *e, uint32_t mode,
                      sp_snapshot_entry *out, sp_error **err)
{
    out->type = sp_snode_fs_type(e->type);
    out->mode = mode & 07777;
    if (e->type != SN_FILE && e->type != SN_LINK)
        return 0;
    if (e->sparse)
        return sp_err_set(err, SP_ETOOBIG, 0, "%s: a sparse file, too big to read here", path);
    uint64_t size = 0;
    int r = sp_odb_object_size(&s->odb, &e->oid, &size, err);
    out->size = (size_t)size;
    return r;
}

int sp_snapshot_stat_entry(sp_snapshot_entry *out, sp_snapstore *s, const char *ref,
                           const char *path, sp_error **err)
{
    memset(out, 0, sizeof(*out));
    sp_tentry e;
    uint32_t mode;
    int r = lookup(s, ref, path, &e, &mode, err);
    return r < 0 ? r : entry_stat(s, path, &e, mode, out, err);
}

struct stream_sink {
    int (*fn)(void *ud, const void *data, size_t len);
    void *ud;
};

static int stream_sink(void *ud, uint64_t size, const void *p, size_t n, sp_error **err)
{
    (void)size;
    (void)err;
    const struct stream_sink *ss = ud;
    return p && n ? ss->fn(ss->ud, p, n) : 0;
}

int sp_snapshot_stream_entry(sp_snapstore *s, const char *ref, const char *path,
                             int (*fn)(void *ud, const void *data, size_t len), void *ud,
                             sp_error **err)
{
    sp_tentry e;
    uint32_t mode;
    int r = lookup(s, ref, path, &e, &mode, err);
    if (r < 0)
        return r;
    if (e.type != SN_FILE)
        return sp_err_set(err, SP_EINVAL, 0, "%s: not a file in the snapshot", path);
    if (e.sparse)
        return sp_err_set(err, SP_ETOOBIG, 0, "%s: a sparse file, too big to read here", path);
    struct stream_sink ss = {fn, ud};
    r = sp_odb_blob_stream(&s->odb, &e.oid, stream_sink, &ss, err);
    if (r < 0 && err && !*err)
        sp_err_set(err, r, 0, "%s: the reader stopped", path);
    return r;
}

int sp_snapshot_read_entry(sp_snapshot_entry *out, sp_snapstore *s, const char *ref,
                           const char *path, size_t max_bytes, sp_error **err)
{
    memset(out, 0, sizeof(*out));
    sp_tentry e;
    uint32_t mode;
    int r = lookup(s, ref, path, &e, &mode, err);
    if (r == 0)
        r = entry_stat(s, path, &e, mode, out, err);
    if (r < 0 || (out->type != SP_FS_FILE && out->type != SP_FS_SYMLINK))
        return r;
    if (out->size > max_bytes)
        return sp_err_set(err, SP_ETOOBIG, 0, "%s: %zu bytes, over the limit of %zu", path,
                          out->size, max_bytes);
    sp_buf b = SP_BUF_INIT;
    int type = 0;
    if ((r = sp_odb_read(&s->odb, &e.oid, &type, &b, err)) < 0) {
        free(b.data);
        return r;
    }
    out->size = b.len;
    sp_buf_grow(&b, 1);
    b.data[b.len] = '\0';
    out->data = b.data;
    return 0;
}
