/* Hydration, phase 1: walk every mount on fds we hold, apply the globs
 * and caps, and merge the mounts into one plan keyed by destination. */
#include "hydrate_internal.h"
#include "ignore.h"

/* --------------------------------------------------------------- plan -- */

static void pent_dispose(pent *e)
{
    free(e->dst);
    free(e->src);
    free(e->link);
}

void hyd_pvec_dispose(pvec *p)
{
    for (size_t i = 0; i < p->n; i++)
        pent_dispose(&p->v[i]);
    free(p->v);
    memset(p, 0, sizeof(*p));
}

static size_t pvec_push(pvec *p, const pent *e)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 256;
        p->v = sp_xrealloc(p->v, p->cap * sizeof(pent));
    }
    p->v[p->n] = *e;
    return p->n++;
}

static void pent_stat(pent *e, const struct stat *st)
{
    e->size = S_ISREG(st->st_mode) ? (uint64_t)st->st_size : 0;
    e->blocks = (uint64_t)st->st_blocks;
    e->atime = st->st_atim;
    e->mtime = st->st_mtim;
    e->mode = (uint32_t)st->st_mode;
    e->uid = (uint32_t)st->st_uid;
    e->gid = (uint32_t)st->st_gid;
    e->nlink = (uint32_t)st->st_nlink;
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

static size_t *hmap_slot(hmap *m, const pvec *g, const char *key)
{
    size_t mask = m->cap - 1;
    for (size_t i = (size_t)hash_str(key) & mask;; i = (i + 1) & mask) {
        if (m->slots[i] == SIZE_MAX || strcmp(g->v[m->slots[i]].dst, key) == 0)
            return &m->slots[i];
    }
}

static void hmap_grow(hmap *m, const pvec *g)
{
    size_t ocap = m->cap;
    size_t *old = m->slots;
    m->cap = ocap ? ocap * 2 : 1024;
    m->slots = sp_xmalloc(m->cap * sizeof(size_t));
    for (size_t i = 0; i < m->cap; i++)
        m->slots[i] = SIZE_MAX;
    for (size_t i = 0; i < ocap; i++)
        if (old[i] != SIZE_MAX)
            *hmap_slot(m, g, g->v[old[i]].dst) = old[i];
    free(old);
}

/* The live entry at `key`, or NULL. */
pent *hyd_hmap_get(hmap *m, pvec *g, const char *key)
{
    if (!m->cap)
        return NULL;
    size_t *s = hmap_slot(m, g, key);
    if (*s == SIZE_MAX || g->v[*s].dead)
        return NULL;
    return &g->v[*s];
}

static void hmap_put(hmap *m, const pvec *g, size_t idx)
{
    if ((m->n + 1) * 2 > m->cap)
        hmap_grow(m, g);
    size_t *s = hmap_slot(m, g, g->v[idx].dst);
    if (*s == SIZE_MAX)
        m->n++;
    *s = idx;
}

void hyd_add_skip(hyd *h, const char *dst, size_t mount, sp_hydrate_skip_reason r,
                  const char *detail)
{
    if (h->skips.n == h->skips.cap) {
        h->skips.cap = h->skips.cap ? h->skips.cap * 2 : 16;
        h->skips.v = sp_xrealloc(h->skips.v, h->skips.cap * sizeof(sp_hydrate_skip));
    }
    sp_hydrate_skip *s = &h->skips.v[h->skips.n++];
    s->path = sp_xstrdup(*dst ? dst : ".");
    s->mount = mount;
    s->reason = r;
    s->detail = detail ? sp_xstrdup(detail) : NULL;
}

void hyd_add_rewrite(hyd *h, const char *dst, size_t mount, const char *detail)
{
    if (h->rewrites.n == h->rewrites.cap) {
        h->rewrites.cap = h->rewrites.cap ? h->rewrites.cap * 2 : 8;
        h->rewrites.v = sp_xrealloc(h->rewrites.v, h->rewrites.cap * sizeof(sp_hydrate_rewrite));
    }
    sp_hydrate_rewrite *x = &h->rewrites.v[h->rewrites.n++];
    x->path = sp_xstrdup(dst);
    x->mount = mount;
    x->detail = sp_xstrdup(detail);
}

void hyd_add_override(hyd *h, const char *dst, size_t mount, long previous)
{
    if (h->ovr.n == h->ovr.cap) {
        h->ovr.cap = h->ovr.cap ? h->ovr.cap * 2 : 16;
        h->ovr.v = sp_xrealloc(h->ovr.v, h->ovr.cap * sizeof(sp_hydrate_override));
    }
    sp_hydrate_override *o = &h->ovr.v[h->ovr.n++];
    o->path = sp_xstrdup(*dst ? dst : ".");
    o->mount = mount;
    o->previous = previous;
}

void hyd_progress(hyd *h, sp_hydrate_phase phase, const char *path)
{
    if (!h->opts || !h->opts->progress)
        return;
    h->prog.phase = phase;
    h->prog.path = path;
    h->opts->progress(h->opts->progress_userdata, &h->prog);
}

int hyd_stopped(hyd *h, sp_error **err)
{
    const sp_hydrate_opts *o = h->opts;
    if (!o || o->version < 2 || !o->should_stop || !o->should_stop(o->progress_userdata))
        return 0;
    return sp_err_set(err, SP_ECANCELED, 0, "hydration stopped before it finished");
}

/* One mount being walked. */
typedef struct mwalk {
    hyd *h;
    size_t mount;
    const sp_mount *m;
    size_t skip; /* strlen of the mount path plus its '/', to get paths relative to the mount */
    sp_globset *excl, *incl;
    sp_ignore *ig;      /* the source's .gitignore files, with the gitignore option */
    sp_glob **anchored; /* includes with a '/' */
    size_t n_anchored;
    bool any_depth_include;
    size_t *allowed; /* indices into h->roots */
    size_t n_allowed;
    pvec p;
    sp_strv gitdirs; /* gitdirs that .git files name, relative to the mount */
    uint64_t bytes;
    struct {
        dev_t dev;
        ino_t ino;
    } chain[MAX_DEPTH + 2];
    unsigned nchain;
} mwalk;

static const char *mrel_of(const mwalk *w, const char *dst)
{
    return strlen(dst) >= w->skip ? dst + w->skip : "";
}

static bool selected(const mwalk *w, const char *mrel)
{
    return !w->incl || sp_globset_match(w->incl, mrel);
}

/* Could an include match below folder mrel? (Exclusion is checked apart.) */
static bool walkable(const mwalk *w, const char *mrel)
{
    if (!w->incl || w->any_depth_include || sp_globset_match(w->incl, mrel))
        return true;
    for (size_t i = 0; i < w->n_anchored; i++)
        if (sp_glob_could_match_below(w->anchored[i], mrel))
            return true;
    return false;
}

static void mark_needed(mwalk *w, size_t i)
{
    while (i != SIZE_MAX && !w->p.v[i].needed) {
        w->p.v[i].needed = true;
        i = w->p.v[i].parent;
    }
}

static size_t plan_push(mwalk *w, pent *e)
{
    bool needed = e->needed;
    e->needed = false;
    e->mount = w->mount;
    size_t idx = pvec_push(&w->p, e);
    if (needed)
        mark_needed(w, idx);
    return idx;
}

/* The credential rules for a regular file about to be planned at dst (a
 * followed symlink's target too, when given): true when it is left out
 * (and reported); else e->scrub says what its copy must lose. */
static bool secret_rule(mwalk *w, pent *e, const char *dst, const char *target)
{
    if (w->m->keep_secrets)
        return false;
    const char *detail = NULL;
    sp_secret_kind k = sp_secret_classify(dst, &detail);
    if (k != SP_SECRET_LEAVE_OUT && target) {
        const char *d2 = NULL;
        sp_secret_kind k2 = sp_secret_classify(target, &d2);
        if (k2 == SP_SECRET_LEAVE_OUT || k == SP_SECRET_NONE) {
            k = k2;
            detail = d2;
        }
    }
    if (k == SP_SECRET_LEAVE_OUT) {
        hyd_add_skip(w->h, dst, w->mount, SP_HYDRATE_SKIP_SECRET, detail);
        return true;
    }
    e->scrub = k;
    return false;
}

/* A `.git` file (a submodule's, a worktree's) names its gitdir: remember
 * it when it lies inside this mount, so that the gitdir's config is
 * rewritten like a .git folder's. Unreadable or odd files are ignored. */
static void note_gitdir(mwalk *w, int dfd, const char *name, const char *mrel)
{
    char buf[4096];
    cleanup_close int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
    if (n < 8 || strncmp(buf, "gitdir:", 7) != 0)
        return;
    buf[n] = '\0';
    char *v = buf + 7;
    v += strspn(v, " \t");
    v[strcspn(v, "\r\n")] = '\0';
    size_t len = strlen(v);
    while (len && (v[len - 1] == ' ' || v[len - 1] == '\t'))
        v[--len] = '\0';
    if (!len)
        return;
    cleanup_free char *joined = NULL;
    if (v[0] == '/') {
        const char *root = w->h->roots[w->h->mount_root[w->mount]].path;
        if (!hyd_path_within(v, root))
            return;
        joined = sp_xstrdup(hyd_path_below(v, root));
    } else {
        cleanup_free char *dir = hyd_dir_name(mrel);
        joined = hyd_join(dir, v);
    }
    char *norm = NULL;
    sp_error *e = NULL;
    if (sp_fs_path_normalize(&norm, joined, strlen(joined), &e) < 0) {
        sp_error_free(e);
        return;
    }
    if (strcmp(norm, ".") == 0)
        norm[0] = '\0';
    sp_strv_push(&w->gitdirs, norm);
}

/* The configs of the gitdirs noted by note_gitdir() are git configs. */
static void mark_gitdir_configs(mwalk *w, const char *dst_root)
{
    static const char *const names[] = {"config", "config.worktree"};
    for (size_t g = 0; g < w->gitdirs.n; g++) {
        cleanup_free char *dir = hyd_join(dst_root, w->gitdirs.v[g]);
        for (size_t k = 0; k < 2; k++) {
            cleanup_free char *cfg = hyd_join(dir, names[k]);
            for (size_t i = 0; i < w->p.n; i++) {
                pent *e = &w->p.v[i];
                if (e->type == SP_FS_FILE && e->scrub == SP_SECRET_NONE && strcmp(e->dst, cfg) == 0)
                    e->scrub = SP_SECRET_GITCONFIG;
            }
        }
    }
}

char *hyd_host_display(const hyd *h, int root, const char *rel)
{
    const char *r = h->roots[root].path;
    if (!*rel)
        return sp_xstrdup(r);
    return sp_xasprintf("%s%s%s", r, strcmp(r, "/") == 0 ? "" : "/", rel);
}

static int walk_dir(mwalk *w, int dfd, size_t dir_idx, int root, const char *src_dir,
                    const char *dst_dir, const char *host_dir, unsigned depth, sp_error **err);

/* Push folder `dst` (stat st, source root/src) and walk it through dfd. */
static int add_dir(mwalk *w, int dfd, const struct stat *st, size_t parent, int root,
                   const char *src, const char *dst, const char *host, unsigned depth,
                   sp_error **err)
{
    /* A mount that holds the workspace must not copy it into itself. */
    if (st->st_dev == w->h->ws_dev && st->st_ino == w->h->ws_ino) {
        hyd_add_skip(w->h, dst, w->mount, SP_HYDRATE_SKIP_LOOP, "the workspace itself");
        return 0;
    }
    for (unsigned i = 0; i < w->nchain; i++) {
        if (w->chain[i].dev == st->st_dev && w->chain[i].ino == st->st_ino) {
            hyd_add_skip(w->h, dst, w->mount, SP_HYDRATE_SKIP_LOOP, "a folder being copied");
            return 0;
        }
    }
    if (depth > MAX_DEPTH || w->nchain >= MAX_DEPTH + 1) {
        hyd_add_skip(w->h, dst, w->mount, SP_HYDRATE_SKIP_TOO_DEEP, NULL);
        return 0;
    }
    pent e = {0};
    e.dst = sp_xstrdup(dst);
    e.src = sp_xstrdup(src);
    e.root = root;
    e.parent = parent;
    e.type = SP_FS_DIR;
    pent_stat(&e, st);
    /* An empty folder is kept when no include is given or it matches one;
     * otherwise it appears only as the parent of something selected. */
    e.needed = selected(w, mrel_of(w, dst));
    size_t idx = plan_push(w, &e);
    w->chain[w->nchain].dev = st->st_dev;
    w->chain[w->nchain].ino = st->st_ino;
    w->nchain++;
    int rc = walk_dir(w, dfd, idx, root, src, dst, host, depth, err);
    w->nchain--;
    return rc;
}

/* A symlink met with follow_symlinks: copy what it points to when that
 * resolves inside an allowed root, else report and skip it. */
static int follow_link(mwalk *w, int dfd, const char *name, size_t parent, const char *dst,
                       const char *host_dir, unsigned depth, sp_error **err)
{
    hyd *h = w->h;
    cleanup_free char *target = hyd_read_link(dfd, name);
    if (!target)
        target = sp_xstrdup("");

    cleanup_free char *abs =
        strcmp(host_dir, "/") == 0 ? sp_xasprintf("/%s", name) : hyd_join(host_dir, name);
    cleanup_free char *resolved = realpath(abs, NULL);
    if (!resolved) {
        int e = errno;
        if (e == ELOOP)
            hyd_add_skip(h, dst, w->mount, SP_HYDRATE_SKIP_LOOP, target);
        else if (e == ENOENT || e == ENOTDIR)
            hyd_add_skip(h, dst, w->mount, SP_HYDRATE_SKIP_DANGLING, target);
        else
            return sp_err_errno(err, e, "resolve symlink", abs);
        return 0;
    }
    size_t ri = SIZE_MAX;
    for (size_t i = 0; i < w->n_allowed && ri == SIZE_MAX; i++)
        if (hyd_path_within(resolved, h->roots[w->allowed[i]].path))
            ri = w->allowed[i];
    if (ri == SIZE_MAX) {
        hyd_add_skip(h, dst, w->mount, SP_HYDRATE_SKIP_OUTSIDE, target);
        return 0;
    }
    const char *rel = hyd_path_below(resolved, h->roots[ri].path);
    cleanup_close int fd = hyd_open_beneath(h->roots[ri].fd, rel, O_PATH);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (errno == ENOENT) {
            hyd_add_skip(h, dst, w->mount, SP_HYDRATE_SKIP_DANGLING, target);
            return 0;
        }
        /* A symlink appeared on the checked path: the host changed under us. */
        return sp_err_errno(err, errno == ELOOP ? EXDEV : errno, "open symlink target", resolved);
    }
    const char *mrel = mrel_of(w, dst);
    if (S_ISDIR(st.st_mode)) {
        if (!walkable(w, mrel)) {
            h->excluded++;
            return 0;
        }
        cleanup_close int dirfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0)
            return sp_err_errno(err, errno, "open", resolved);
        return add_dir(w, dirfd, &st, parent, (int)ri, rel, dst, resolved, depth, err);
    }
    if (!selected(w, mrel)) {
        h->excluded++;
        return 0;
    }
    if (S_ISREG(st.st_mode)) {
        pent e = {0};
        if (secret_rule(w, &e, dst, resolved))
            return 0;
        e.dst = sp_xstrdup(dst);
        e.src = sp_xstrdup(rel);
        e.root = (int)ri;
        e.parent = parent;
        e.type = SP_FS_FILE;
        e.needed = true;
        pent_stat(&e, &st);
        plan_push(w, &e);
        w->bytes += e.size;
        h->prog.bytes += e.size;
        return 0;
    }
    if (S_ISLNK(st.st_mode))
        return sp_err_errno(err, EXDEV, "open symlink target", resolved);
    hyd_add_skip(h, dst, w->mount, SP_HYDRATE_SKIP_SPECIAL, sp_fs_type_name(SP_FS_OTHER));
    return 0;
}

static const char *special_name(mode_t m)
{
    if (S_ISFIFO(m))
        return "fifo";
    if (S_ISSOCK(m))
        return "socket";
    if (S_ISCHR(m))
        return "character device";
    if (S_ISBLK(m))
        return "block device";
    return "special file";
}

/* Walk the folder open as dfd, whose plan entry is dir_idx. src_dir is its
 * path below roots[root], dst_dir its destination, host_dir its absolute
 * host path (kept only with follow_symlinks, else NULL). */
static int walk_dir(mwalk *w, int dfd, size_t dir_idx, int root, const char *src_dir,
                    const char *dst_dir, const char *host_dir, unsigned depth, sp_error **err)
{
    hyd *h = w->h;
    sp_dirnames nm = SP_DIRNAMES_INIT;
    int rc = 0;
    if (sp_dir_read(&nm, dfd, SP_DIR_UNSORTED, 0) < 0) {
        cleanup_free char *disp = hyd_host_display(h, root, src_dir);
        rc = sp_err_errno(err, errno, "read folder", disp);
        goto done;
    }
    if (w->ig) {
        const char *mdir = mrel_of(w, dst_dir);
        sp_ignore_push(w->ig, NULL, dfd, *mdir ? mdir : ".", depth + 1, &nm);
    }
    for (size_t i = 0; i < nm.n && rc == 0; i++) {
        const char *name = sp_dirnames_name(&nm, i);
        cleanup_free char *dst = hyd_join(dst_dir, name);
        const char *mrel = mrel_of(w, dst);
        h->prog.files++;
        hyd_progress(h, SP_HYDRATE_SCAN, dst);
        if ((rc = hyd_stopped(h, err)) < 0)
            break;
        if (w->excl && sp_globset_match(w->excl, mrel)) {
            h->excluded++;
            continue;
        }
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT)
                continue; /* gone before we looked: not part of this copy */
            cleanup_free char *src = hyd_join(src_dir, name);
            cleanup_free char *disp = hyd_host_display(h, root, src);
            rc = sp_err_errno(err, errno, "stat", disp);
            break;
        }
        if (w->ig && sp_ignore_match(w->ig, mrel, S_ISDIR(st.st_mode))) {
            h->excluded++;
            continue;
        }
        cleanup_free char *src = hyd_join(src_dir, name);
        cleanup_free char *host = NULL;
        if (host_dir)
            host =
                strcmp(host_dir, "/") == 0 ? sp_xasprintf("/%s", name) : hyd_join(host_dir, name);

        if (S_ISDIR(st.st_mode)) {
            if (!walkable(w, mrel)) {
                h->excluded++;
                continue;
            }
            cleanup_close int cfd =
                openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (cfd < 0) {
                if (errno == ENOENT)
                    continue;
                cleanup_free char *disp = hyd_host_display(h, root, src);
                rc = sp_err_errno(err, errno, "open folder", disp);
                break;
            }
            if (fstat(cfd, &st) < 0) {
                cleanup_free char *disp = hyd_host_display(h, root, src);
                rc = sp_err_errno(err, errno, "stat", disp);
                break;
            }
            rc = add_dir(w, cfd, &st, dir_idx, root, src, dst, host, depth + 1, err);
            continue;
        }
        if (S_ISLNK(st.st_mode) && w->m->follow_symlinks) {
            rc = follow_link(w, dfd, name, dir_idx, dst, host_dir, depth + 1, err);
            continue;
        }
        if (!selected(w, mrel)) {
            h->excluded++;
            continue;
        }
        pent e = {0};
        e.parent = dir_idx;
        e.needed = true;
        if (S_ISREG(st.st_mode)) {
            e.type = SP_FS_FILE;
            if (secret_rule(w, &e, dst, NULL))
                continue;
            if (!w->m->keep_secrets && strcmp(name, ".git") == 0)
                note_gitdir(w, dfd, name, mrel);
        } else if (S_ISLNK(st.st_mode)) {
            e.link = hyd_read_link(dfd, name);
            if (!e.link) {
                if (errno == ENOENT)
                    continue;
                cleanup_free char *disp = hyd_host_display(h, root, src);
                rc = sp_err_errno(err, errno, "readlink", disp);
                break;
            }
            e.type = SP_FS_SYMLINK;
        } else {
            hyd_add_skip(h, dst, w->mount, SP_HYDRATE_SKIP_SPECIAL, special_name(st.st_mode));
            continue;
        }
        e.dst = steal_pointer(&dst);
        e.src = steal_pointer(&src);
        e.root = root;
        pent_stat(&e, &st);
        if (e.type == SP_FS_SYMLINK)
            e.size = strlen(e.link);
        plan_push(w, &e);
        if (e.type == SP_FS_FILE) {
            w->bytes += e.size;
            h->prog.bytes += e.size;
        }
    }
done:
    if (w->ig)
        sp_ignore_pop_to(w->ig, depth + 1);
    sp_dirnames_dispose(&nm);
    return rc;
}

/* Compile a mount's globs. Includes use a globset (a pattern without '/'
 * matches a name at any depth; a folder that matches includes its whole
 * tree), plus the anchored patterns alone to prune folders. */
static int compile_globs(mwalk *w, sp_error **err)
{
    const sp_mount *m = w->m;
    size_t ne = 0, ni = 0;
    while (m->exclude && m->exclude[ne])
        ne++;
    while (m->include && m->include[ni])
        ni++;
    int rc;
    if (ne && (rc = sp_globset_compile(&w->excl, (const char *const *)m->exclude, ne, err)) < 0)
        return sp_err_wrap(err, rc, "exclude");
    if (!ni)
        return 0;
    if ((rc = sp_globset_compile(&w->incl, (const char *const *)m->include, ni, err)) < 0)
        return sp_err_wrap(err, rc, "include");
    w->anchored = sp_xcalloc(ni, sizeof(sp_glob *));
    for (size_t i = 0; i < ni; i++) {
        const char *p = m->include[i];
        bool anchored = p[0] == '/';
        while (*p == '/')
            p++;
        size_t len = strlen(p);
        while (len && p[len - 1] == '/' && !(len >= 2 && p[len - 2] == '\\'))
            len--;
        cleanup_free char *t = sp_xstrndup(p, len);
        if (!anchored && !strchr(t, '/')) {
            w->any_depth_include = true;
            continue;
        }
        if ((rc = sp_glob_compile(&w->anchored[w->n_anchored], t, err)) < 0)
            return sp_err_wrap(err, rc, "include");
        w->n_anchored++;
    }
    return 0;
}

static void mwalk_dispose(mwalk *w)
{
    sp_globset_free(w->excl);
    sp_globset_free(w->incl);
    sp_ignore_free(w->ig);
    for (size_t i = 0; i < w->n_anchored; i++)
        sp_glob_free(w->anchored[i]);
    free(w->anchored);
    free(w->allowed);
    sp_strv_dispose(&w->gitdirs);
    hyd_pvec_dispose(&w->p);
}

/* Kill the live entry x of the global plan, and its subtree when a folder. */
static void kill_entry(hyd *h, size_t x)
{
    pent *e = &h->g.v[x];
    e->dead = true;
    if (e->type != SP_FS_DIR)
        return;
    size_t n = strlen(e->dst);
    for (size_t i = x + 1; i < h->g.n; i++) {
        pent *c = &h->g.v[i];
        if (!c->dead && (n == 0 || (strncmp(c->dst, e->dst, n) == 0 && c->dst[n] == '/')))
            c->dead = true;
    }
}

/* Add e to the global plan (taking its strings): folders merge into
 * folders, anything else replaces what was there (later mount wins). */
static void global_add(hyd *h, pent *e)
{
    pent *x = hyd_hmap_get(&h->map, &h->g, e->dst);
    if (x) {
        if (x->type == SP_FS_DIR && e->type == SP_FS_DIR) {
            if (!e->implied) {
                /* The later folder's metadata wins; its content merges. */
                free(x->src);
                x->src = steal_pointer(&e->src);
                x->root = e->root;
                x->mount = e->mount;
                x->implied = false;
                x->size = e->size;
                x->blocks = e->blocks;
                x->atime = e->atime;
                x->mtime = e->mtime;
                x->mode = e->mode;
                x->uid = e->uid;
                x->gid = e->gid;
            }
            pent_dispose(e);
            return;
        }
        hyd_add_override(h, e->dst, e->mount, (long)x->mount);
        kill_entry(h, (size_t)(x - h->g.v));
    }
    e->parent = SIZE_MAX;
    size_t idx = pvec_push(&h->g, e);
    hmap_put(&h->map, &h->g, idx);
}

/* Plan one mount: resolve it, walk it, check its cap, merge it. */
int hyd_plan_mount(hyd *h, size_t mi, const sp_mount *m, sp_error **err)
{
    mwalk w;
    memset(&w, 0, sizeof(w));
    w.h = h;
    w.mount = mi;
    w.m = m;
    const char *dst_root = h->mount_dst[mi];
    w.skip = *dst_root ? strlen(dst_root) + 1 : 0;
    if (m->gitignore)
        w.ig = sp_ignore_new_git();
    int rc = compile_globs(&w, err);
    if (rc < 0) {
        sp_err_wrap(err, rc, "mount %s", m->host_path);
        goto done;
    }

    size_t ri = h->mount_root[mi];
    if (h->n_allowed) {
        w.allowed = sp_xcalloc(h->n_allowed, sizeof(size_t));
        for (size_t i = 0; i < h->n_allowed; i++)
            w.allowed[w.n_allowed++] = i;
    } else {
        w.allowed = sp_xcalloc(1, sizeof(size_t));
        w.allowed[w.n_allowed++] = ri;
    }

    struct stat st;
    if (fstat(h->roots[ri].fd, &st) < 0) {
        rc = sp_err_errno(err, errno, "stat", h->roots[ri].path);
        goto done;
    }
    pent e = {0};
    e.dst = sp_xstrdup(dst_root);
    e.src = sp_xstrdup("");
    e.root = (int)ri;
    e.parent = SIZE_MAX;
    e.type = SP_FS_DIR;
    e.needed = true;
    pent_stat(&e, &st);
    size_t idx = plan_push(&w, &e);
    w.chain[0].dev = st.st_dev;
    w.chain[0].ino = st.st_ino;
    w.nchain = 1;
    rc = walk_dir(&w, h->roots[ri].fd, idx, (int)ri, "", dst_root,
                  m->follow_symlinks ? h->roots[ri].path : NULL, 0, err);
    if (rc < 0)
        goto done;
    mark_gitdir_configs(&w, dst_root);

    if (m->max_bytes && w.bytes > m->max_bytes) {
        char tot[64], cap[64];
        hyd_fmt_size_exact(tot, sizeof(tot), w.bytes);
        hyd_fmt_size_exact(cap, sizeof(cap), m->max_bytes);
        rc = sp_err_set(err, SP_ETOOBIG, EFBIG,
                        "mount %s: the selected files total %s, over its max-bytes of %s",
                        h->roots[ri].path, tot, cap);
        goto done;
    }

    /* Folders leading to the mount path exist in the workspace as plain
     * folders, unless a mount brings them. */
    if (*dst_root) {
        for (const char *s = strchr(dst_root, '/'); s; s = strchr(s + 1, '/')) {
            pent im = {0};
            im.dst = sp_xstrndup(dst_root, (size_t)(s - dst_root));
            im.root = -1;
            im.mount = mi;
            im.type = SP_FS_DIR;
            im.mode = S_IFDIR | 0755;
            im.implied = true;
            global_add(h, &im);
        }
    }
    for (size_t i = 0; i < w.p.n; i++) {
        pent *pe = &w.p.v[i];
        if (!pe->needed || !*pe->dst) {
            pent_dispose(pe);
            continue;
        }
        global_add(h, pe);
    }
    w.p.n = 0;

done:
    mwalk_dispose(&w);
    return rc;
}
