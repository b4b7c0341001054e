/* Store gc: mark what snapshots and the stat cache reach, prune the rest
 * (loose objects and packs). */
#include "store_internal.h"

/* ------------------------------------------------------------------ gc -- */

/* A set of object ids: open addressing on the first 8 bytes. */
struct oidset {
    sp_oid *v;
    uint8_t *used;
    size_t cap, n;
};

static uint64_t oid_hash(const sp_oid *id)
{
    uint64_t h;
    memcpy(&h, id->id, 8);
    return h;
}

static bool oidset_add(struct oidset *s, const sp_oid *id);

static void oidset_grow(struct oidset *s)
{
    struct oidset old = *s;
    s->cap = s->cap ? s->cap * 2 : 4096;
    s->v = sp_xcalloc(s->cap, sizeof(sp_oid));
    s->used = sp_xcalloc(s->cap, 1);
    s->n = 0;
    for (size_t i = 0; i < old.cap; i++)
        if (old.used[i])
            oidset_add(s, &old.v[i]);
    free(old.v);
    free(old.used);
}

/* Returns true when the id was new. */
static bool oidset_add(struct oidset *s, const sp_oid *id)
{
    if ((s->n + 1) * 2 > s->cap)
        oidset_grow(s);
    size_t i = (size_t)oid_hash(id) & (s->cap - 1);
    while (s->used[i]) {
        if (sp_oid_equal(&s->v[i], id))
            return false;
        i = (i + 1) & (s->cap - 1);
    }
    s->used[i] = 1;
    s->v[i] = *id;
    s->n++;
    return true;
}

static bool oidset_has(const struct oidset *s, const sp_oid *id)
{
    if (!s->cap)
        return false;
    size_t i = (size_t)oid_hash(id) & (s->cap - 1);
    while (s->used[i]) {
        if (sp_oid_equal(&s->v[i], id))
            return true;
        i = (i + 1) & (s->cap - 1);
    }
    return false;
}

/* Mark a tree and everything below it, meta blobs included. */
static int mark_tree(sp_odb *o, struct oidset *set, const sp_oid *tree, unsigned depth,
                     sp_error **err)
{
    if (!oidset_add(set, tree))
        return 0;
    if (depth > SNAP_MAX_DEPTH + 8)
        return sp_err_set(err, SP_ETOOBIG, 0, "trees nested too deep");
    sp_buf b = SP_BUF_INIT;
    int type = 0;
    int r = sp_odb_read(o, tree, &type, &b, err);
    if (r < 0)
        return r;
    const char *p = b.data, *end = b.data + b.len;
    while (r == 0 && p < end) {
        const char *nul = memchr(p, '\0', (size_t)(end - p));
        if (!nul || end - nul < 21)
            break;
        sp_oid id;
        memcpy(id.id, nul + 1, 20);
        bool sub = p[0] == '4';
        p = nul + 21;
        if (sub)
            r = mark_tree(o, set, &id, depth + 1, err);
        else
            oidset_add(set, &id);
    }
    sp_buf_dispose(&b);
    return r;
}

static int mark_nodes(sp_odb *o, struct oidset *set, const snode *n, sp_error **err)
{
    if (n->type == SN_DIR) {
        if (!(n->flags & SN_DIRTY)) {
            int r = mark_tree(o, set, &n->oid, 0, err);
            if (r < 0)
                return r;
        }
        for (uint32_t i = 0; i < n->nkids; i++) {
            int r = mark_nodes(o, set, n->kids[i], err);
            if (r < 0)
                return r;
        }
    } else if (n->type == SN_FILE || n->type == SN_LINK) {
        oidset_add(set, &n->oid);
    }
    return 0;
}

static bool is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return s[n] == '\0';
}

static bool has_suffix(const char *s, const char *suffix)
{
    size_t l = strlen(s), n = strlen(suffix);
    return l > n && strcmp(s + l - n, suffix) == 0;
}

/* Best effort: unlink the files in (dirfd, dir) whose names start with
 * prefix (when given) and end with suffix (when given); names starting
 * with '.' are kept unless the prefix says otherwise. False when the
 * folder cannot be listed. */
static bool unlink_matching(int dirfd, const char *dir, const char *prefix, const char *suffix)
{
    int fd = openat(dirfd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return false;
    sp_dirnames names = SP_DIRNAMES_INIT;
    bool ok = sp_dir_read(&names, fd, SP_DIR_UNSORTED, 0) == 0;
    for (size_t i = 0; ok && i < names.n; i++) {
        const char *nm = sp_dirnames_name(&names, i);
        if ((prefix && strncmp(nm, prefix, strlen(prefix)) != 0) ||
            (suffix && !has_suffix(nm, suffix)) || (nm[0] == '.' && (!prefix || prefix[0] != '.')))
            continue;
        unlinkat(fd, nm, 0);
    }
    sp_dirnames_dispose(&names);
    close(fd);
    return ok;
}

/* Remove unreachable loose objects and stale temp files. */
static int prune_loose(sp_snapstore *s, const struct oidset *keep, sp_snapstore_gc_result *res,
                       sp_error **err)
{
    for (int i = 0; i < 256; i++) {
        char dir[3];
        snprintf(dir, sizeof(dir), "%02x", i);
        int fd = openat(s->odb.objfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            continue;
        sp_dirnames names = SP_DIRNAMES_INIT;
        if (sp_dir_read(&names, fd, SP_DIR_UNSORTED, 0) < 0) {
            int e = errno;
            close(fd);
            return sp_err_errno(err, e, "list", dir);
        }
        for (size_t k = 0; k < names.n; k++) {
            const char *nm = sp_dirnames_name(&names, k);
            if (nm[0] == '.')
                continue;
            struct stat st;
            bool drop = strncmp(nm, "tmp_obj_", 8) == 0;
            if (!drop && strlen(nm) == 38 && is_hex(nm, 38)) {
                char hex[41];
                memcpy(hex, dir, 2);
                memcpy(hex + 2, nm, 39);
                sp_oid id;
                if (sp_oid_parse(&id, hex, 40) == 0 && !oidset_has(keep, &id)) {
                    drop = true;
                    res->objects_removed++;
                } else {
                    res->objects_kept++;
                }
            }
            if (drop) {
                if (fstatat(fd, nm, &st, AT_SYMLINK_NOFOLLOW) == 0)
                    res->bytes_removed += (uint64_t)st.st_size;
                unlinkat(fd, nm, 0);
            }
        }
        sp_dirnames_dispose(&names);
        close(fd);
        unlinkat(s->odb.objfd, dir, AT_REMOVEDIR); /* when empty */
    }
    memset(s->odb.fanout, 0, sizeof(s->odb.fanout));
    /* Streaming temp files live in objects/ itself. */
    unlink_matching(s->odb.objfd, ".", "tmp_obj_", NULL);
    return 0;
}

struct packscan {
    const struct oidset *keep;
    sp_odb *odb;
    uint64_t unreachable;
};

static int count_unreachable(const git_oid *id, void *payload)
{
    struct packscan *ps = payload;
    sp_oid o;
    memcpy(o.id, id->id, 20);
    if (!oidset_has(ps->keep, &o))
        ps->unreachable++;
    return 0;
}

static int lg2_fail(sp_error **err, const char *what)
{
    const git_error *e = git_error_last();
    return sp_err_set(err, SP_ERROR, 0, "%s: %s", what, e && e->message ? e->message : "libgit2");
}

/* Packs (made by someone's `git gc`, say) holding unreachable objects are
 * rewritten with only what is reachable. */
static int prune_packs(sp_snapstore *s, const struct oidset *keep, sp_snapstore_gc_result *res,
                       sp_error **err)
{
    if (!sp_odb_has_packs(&s->odb))
        return 0;
    void *vrepo = NULL;
    int r = sp_odb_lg2(&s->odb, &vrepo, err);
    if (r < 0)
        return r;
    git_repository *repo = vrepo;
    git_odb *db = NULL;
    if (git_repository_odb(&db, repo) < 0)
        return lg2_fail(err, "object database");
    struct packscan ps = {keep, &s->odb, 0};
    if (git_odb_foreach(db, count_unreachable, &ps) < 0) {
        git_odb_free(db);
        return lg2_fail(err, "list objects");
    }
    git_odb_free(db);
    if (ps.unreachable == 0)
        return 0;

    /* Old packs, to delete once the new one is in place. */
    sp_strv old = {0};
    sp_dirnames packs = SP_DIRNAMES_INIT;
    if (sp_dir_read_at(&packs, s->odb.objfd, "pack", SP_DIR_UNSORTED, 0) == 0) {
        for (size_t i = 0; i < packs.n; i++) {
            const char *name = sp_dirnames_name(&packs, i);
            if (has_suffix(name, ".pack"))
                sp_strv_push(&old, sp_xstrndup(name, strlen(name) - 5));
        }
    }
    sp_dirnames_dispose(&packs);

    git_packbuilder *pb = NULL;
    if (git_packbuilder_new(&pb, repo) < 0) {
        sp_strv_dispose(&old);
        return lg2_fail(err, "pack");
    }
    for (size_t i = 0; i < keep->cap && r == 0; i++) {
        if (!keep->used[i])
            continue;
        git_oid gid;
        memcpy(gid.id, keep->v[i].id, 20);
        if (git_packbuilder_insert(pb, &gid, NULL) < 0)
            r = lg2_fail(err, "pack");
    }
    cleanup_free char *packdir = sp_xasprintf("%s/objects/pack", s->store);
    if (r == 0 && git_packbuilder_write(pb, packdir, 0, NULL, NULL) < 0)
        r = lg2_fail(err, "write pack");
    cleanup_free char *newname = NULL;
    if (r == 0) {
        char hex[GIT_OID_HEXSZ + 1];
        git_oid_tostr(hex, sizeof(hex), git_packbuilder_hash(pb));
        newname = sp_xasprintf("pack-%s", hex);
    }
    git_packbuilder_free(pb);
    if (r == 0) {
        int pfd = openat(s->odb.objfd, "pack", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        for (size_t i = 0; i < old.n && pfd >= 0; i++) {
            if (strcmp(old.v[i], newname) == 0)
                continue;
            cleanup_free char *keepf = sp_xasprintf("%s.keep", old.v[i]);
            struct stat st;
            if (fstatat(pfd, keepf, &st, 0) == 0)
                continue;
            static const char *const exts[] = {".pack", ".idx", ".rev", ".bitmap"};
            for (size_t k = 0; k < 4; k++) {
                cleanup_free char *f = sp_xasprintf("%s%s", old.v[i], exts[k]);
                if (k == 0 && fstatat(pfd, f, &st, 0) == 0)
                    res->bytes_removed += (uint64_t)st.st_size;
                unlinkat(pfd, f, 0);
            }
        }
        if (pfd >= 0)
            close(pfd);
        res->objects_removed += ps.unreachable;
        /* libgit2 still maps the old packs. */
        git_repository_free(s->odb.repo);
        s->odb.repo = NULL;
    }
    sp_strv_dispose(&old);
    return r;
}

int sp_snapstore_gc(sp_snapstore_gc_result *out, sp_snapstore *s, sp_error **err)
{
    sp_snapstore_gc_result res = {0, 0, 0};
    int r = sp_snap_lock_write(s, err);
    if (r < 0)
        return r;
    struct oidset keep = {NULL, NULL, 0, 0};
    sp_refent *refs = NULL;
    size_t n = 0;
    uint64_t gen = sp_snap_read_generation(s);
    /* Only the newer stat cache is kept alive; the older slot goes first,
     * so that it can never name what this gc removes. */
    snode *cache = sp_cache_load(s->odb.dirfd, &s->root_st, gen);
    sp_cache_drop_older(s->odb.dirfd);
    if (gen != s->generation) {
        sp_snap_drop_tree(s);
        s->generation = gen;
    }
    r = sp_ref_list(&s->odb, SNAP_REF_PREFIX, &refs, &n, err);
    for (size_t i = 0; i < n && r == 0; i++) {
        sp_oid tree;
        char hex[41];
        sp_oid_hex(&refs[i].id, hex);
        oidset_add(&keep, &refs[i].id);
        r = sp_snap_commit_tree(&s->odb, hex, &tree, err);
        if (r == 0)
            r = mark_tree(&s->odb, &keep, &tree, 0, err);
    }
    /* What the stat cache (on disk, and ours in memory) names stays, so
     * it remains valid. */
    if (r == 0 && cache)
        r = mark_nodes(&s->odb, &keep, cache, err);
    if (r == 0 && s->tree)
        r = mark_nodes(&s->odb, &keep, s->tree, err);
    if (r == 0)
        r = prune_loose(s, &keep, &res, err);
    if (r == 0)
        r = prune_packs(s, &keep, &res, err);
    if (r == 0) {
        /* Stale ref locks of killed processes (we hold the store lock). */
        unlink_matching(s->odb.dirfd, SNAP_REF_PREFIX, NULL, ".lock");
        unlinkat(s->odb.dirfd, "packed-refs.lock", 0);
    }
    if (r == 0 && res.objects_removed) {
        /* Indexes git may have written name what is gone now; git rebuilds
         * them when it wants them. */
        unlinkat(s->odb.objfd, "info/commit-graph", 0);
        unlinkat(s->odb.objfd, "info/packs", 0);
        unlinkat(s->odb.objfd, "pack/multi-pack-index", 0);
        if (unlink_matching(s->odb.objfd, "info/commit-graphs", "", NULL))
            unlinkat(s->odb.objfd, "info/commit-graphs", AT_REMOVEDIR);
    }
    if (r == 0 && (r = sp_snap_write_generation(s, gen + 1, err)) == 0) {
        s->generation = gen + 1;
        if (cache)
            (void)sp_cache_save(s->odb.dirfd, cache, &s->root_st, gen + 1, NULL);
        if (s->tree)
            s->cache_dirty = true;
    }
    sp_snode_free(cache, NULL, NULL);
    sp_refents_free(refs, n);
    free(keep.v);
    free(keep.used);
    sp_snap_unlock(s);
    if (r == 0 && out)
        *out = res;
    return r;
}
