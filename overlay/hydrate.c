/* Hydration: copy host folders ("mounts") into a workspace, all or nothing.
 *
 * Three phases:
 *   1. plan   - resolve every mount against the allowed roots, walk it with
 *               getdents64 + fstatat(AT_SYMLINK_NOFOLLOW) on fds we hold,
 *               apply the globs (an excluded folder is never opened), check
 *               the byte caps, and merge the mounts into one plan keyed by
 *               destination path (later mount wins);
 *   2. copy   - create the plan in a private staging folder beside the
 *               workspace: FICLONE, else copy_file_range, else read/write,
 *               data extents only for sparse files; then folder metadata,
 *               deepest first;
 *   3. commit - move the staged entries into the workspace with renames
 *               (RENAME_EXCHANGE over existing entries), journalled so a
 *               failure part way is rolled back.
 * Any failure before the commit removes the staging folder and leaves the
 * workspace untouched.
 *
 * Host side, the contract is: no content is read from a file that does not
 * resolve inside an allowed root. Mount roots and followed symlink targets
 * are resolved with realpath() (the trusted caller chose the roots; the
 * workspace is not involved) and then opened from an allowed root's fd one
 * component at a time with O_NOFOLLOW, so the path that was checked is the
 * path that is opened, whatever symlinks are swapped in meanwhile. Every
 * other name is opened relative to its folder's fd with O_NOFOLLOW.
 *
 * Workspace side, every operation is an *at() call on a folder fd opened
 * with O_NOFOLLOW: symlinks in the workspace (the container may have planted
 * them) are replaced, never followed. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "fs_internal.h"
#include "glob.h"
#include "sandpod/hydrate.h"
#include "tree.h"

/* Deeper folders are skipped with a note: each level holds an fd. */
#define MAX_DEPTH 256
/* Bytes per copy_file_range call and size of the read/write buffer. */
#define CFR_CHUNK ((size_t)1 << 30)
#define RW_CHUNK  ((size_t)1 << 20)

/* Test hook: when > 0, the Nth rename of the commit fails with EIO, so the
 * rollback can be tested. Not part of the API. */
extern int sp_hydrate_test_fail_commit;
int sp_hydrate_test_fail_commit = 0;

/* ------------------------------------------------------------ helpers -- */

/* A human size for messages: "1.5 GiB". */
static void fmt_size(char *buf, size_t len, uint64_t v)
{
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
    if (v < 1024) {
        snprintf(buf, len, "%" PRIu64 " bytes", v);
        return;
    }
    double d = (double)v;
    size_t u = 0;
    while (d >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
        d /= 1024;
        u++;
    }
    snprintf(buf, len, "%.1f %s", d, units[u]);
}

/* fmt_size() plus the exact count when the short form rounds:
 * "1.5 MiB (1572864 bytes)", or "700 bytes". */
static void fmt_size_exact(char *buf, size_t len, uint64_t v)
{
    char h[32];
    fmt_size(h, sizeof(h), v);
    if (v < 1024)
        snprintf(buf, len, "%s", h);
    else
        snprintf(buf, len, "%s (%" PRIu64 " bytes)", h, v);
}

static bool path_within(const char *p, const char *root)
{
    size_t n = strlen(root);
    if (n == 1 && root[0] == '/')
        return true;
    return strncmp(p, root, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

/* The part of p below root ("" for root itself); p must be within root. */
static const char *path_below(const char *p, const char *root)
{
    size_t n = strlen(root);
    if (n == 1 && root[0] == '/')
        return p + 1;
    return p[n] == '/' ? p + n + 1 : p + n;
}

/* Join with "" meaning the base itself. */
static char *join(const char *dir, const char *name)
{
    if (!dir || !*dir)
        return sp_xstrdup(name);
    return sp_xasprintf("%s/%s", dir, name);
}

static const char *base_name(const char *rel)
{
    const char *s = strrchr(rel, '/');
    return s ? s + 1 : rel;
}

/* The parent part of rel as a new string ("" at the top). */
static char *dir_name(const char *rel)
{
    const char *s = strrchr(rel, '/');
    return s ? sp_xstrndup(rel, (size_t)(s - rel)) : sp_xstrdup("");
}

/* Contract: open `rel` beneath folder fd `dirfd`, one component at a time,
 * each with O_NOFOLLOW (intermediate ones as O_PATH|O_DIRECTORY): a symlink
 * anywhere on the way fails (ENOTDIR or ELOOP), and `.`/`..` components are
 * refused (EINVAL). A final symlink opened with O_PATH yields the link
 * itself; callers that accept O_PATH check the type. "" opens dirfd's
 * folder again. Returns an fd or -1 with errno set. */
static int open_beneath(int dirfd, const char *rel, int flags)
{
    if (!*rel)
        return openat(dirfd, ".", flags | O_CLOEXEC);
    int cur = dirfd;
    const char *p = rel;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        char comp[NAME_MAX + 1];
        if (len == 0 || len > NAME_MAX || (len == 1 && p[0] == '.') ||
            (len == 2 && p[0] == '.' && p[1] == '.')) {
            if (cur != dirfd)
                close(cur);
            errno = len > NAME_MAX ? ENAMETOOLONG : EINVAL;
            return -1;
        }
        memcpy(comp, p, len);
        comp[len] = '\0';
        int f = slash ? O_PATH | O_DIRECTORY : flags;
        int fd = openat(cur, comp, f | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        if (cur != dirfd)
            close(cur);
        if (fd < 0) {
            errno = e;
            return -1;
        }
        cur = fd;
        if (!slash)
            return cur;
        p = slash + 1;
    }
}

/* The target of symlink name in dfd, malloc'd; NULL with errno. Heap, not
 * stack: the walks that call it recurse. */
static char *read_link(int dfd, const char *name)
{
    char *buf = sp_xmalloc(PATH_MAX);
    ssize_t n = readlinkat(dfd, name, buf, PATH_MAX - 1);
    if (n < 0) {
        int e = errno;
        free(buf);
        errno = e;
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

/* Names of a folder, with their d_type in the byte before each name. */
typedef struct names {
    sp_buf buf;
    size_t *offs;
    size_t n, cap;
} names;

static void names_dispose(names *nm)
{
    sp_buf_dispose(&nm->buf);
    free(nm->offs);
    memset(nm, 0, sizeof(*nm));
}

static const char *names_at(const names *nm, size_t i)
{
    return nm->buf.data + nm->offs[i];
}

/* Read every name of an open folder (getdents64, 32 KiB at a time). Returns
 * 0 or -1 with errno. Never inlined: the buffer must not stay on the stack
 * of the recursive walks. */
__attribute__((noinline)) static int read_names(int dfd, names *nm)
{
    char chunk[32768] __attribute__((aligned(8)));
    for (;;) {
        long n = syscall(SYS_getdents64, dfd, chunk, sizeof(chunk));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            return 0;
        for (long off = 0; off < n;) {
            struct sp_dirent64 *d = (struct sp_dirent64 *)(chunk + off);
            off += d->d_reclen;
            const char *name = d->d_name;
            if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0')))
                continue;
            if (nm->n == nm->cap) {
                nm->cap = nm->cap ? nm->cap * 2 : 64;
                nm->offs = sp_xrealloc(nm->offs, nm->cap * sizeof(size_t));
            }
            unsigned char type = d->d_type;
            sp_buf_add(&nm->buf, &type, 1);
            nm->offs[nm->n++] = nm->buf.len;
            sp_buf_add(&nm->buf, name, strlen(name) + 1);
        }
    }
}

/* A stack of open folders along one path, so that walking a plan in
 * pre-order opens each folder once. Paths are relative to `base` ("" =
 * base); `key` tells apart several bases sharing one stack. */
typedef struct dstack {
    struct {
        char *path;
        int fd;
    } * v;
    size_t n, cap;
    int key;
} dstack;

static void dstack_clear(dstack *s)
{
    while (s->n) {
        s->n--;
        free(s->v[s->n].path);
        close(s->v[s->n].fd);
    }
}

static void dstack_dispose(dstack *s)
{
    dstack_clear(s);
    free(s->v);
    s->v = NULL;
    s->cap = 0;
}

static bool is_ancestor_or_self(const char *a, const char *p)
{
    size_t n = strlen(a);
    return strncmp(a, p, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

/* An fd (owned by the stack) on folder `dir` beneath `base`, opened without
 * following symlinks; -1 with errno on failure. */
static int dstack_get(dstack *s, int base, int key, const char *dir)
{
    if (s->key != key) {
        dstack_clear(s);
        s->key = key;
    }
    while (s->n && !is_ancestor_or_self(s->v[s->n - 1].path, dir)) {
        s->n--;
        free(s->v[s->n].path);
        close(s->v[s->n].fd);
    }
    if (!*dir)
        return base;
    int cur = s->n ? s->v[s->n - 1].fd : base;
    size_t done = s->n ? strlen(s->v[s->n - 1].path) : 0;
    while (dir[done] != '\0') {
        const char *p = dir + done + (done ? 1 : 0);
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        cleanup_free char *comp = sp_xstrndup(p, len);
        int fd = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return -1;
        if (s->n == s->cap) {
            s->cap = s->cap ? s->cap * 2 : 16;
            s->v = sp_xrealloc(s->v, s->cap * sizeof(*s->v));
        }
        done = (size_t)(p - dir) + len;
        s->v[s->n].path = sp_xstrndup(dir, done);
        s->v[s->n].fd = fd;
        s->n++;
        cur = fd;
    }
    return cur;
}

/* --------------------------------------------------------------- plan -- */

/* One entry of a plan. Paths are relative and "" stands for the top. */
typedef struct pent {
    char *dst;  /* relative to the workspace */
    char *src;  /* relative to roots[root]; NULL for implied folders */
    char *link; /* symlink target, verbatim */
    int root;   /* index into hyd.roots, -1 for implied folders */
    size_t mount;
    size_t parent; /* per-mount plan only: parent entry, SIZE_MAX for none */
    uint64_t size;
    uint64_t blocks;
    struct timespec atime, mtime;
    uint32_t mode;
    uint32_t uid, gid;
    uint32_t nlink;
    sp_fs_type type;
    bool needed, dead, implied;
} pent;

typedef struct pvec {
    pent *v;
    size_t n, cap;
} pvec;

static void pent_dispose(pent *e)
{
    free(e->dst);
    free(e->src);
    free(e->link);
}

static void pvec_dispose(pvec *p)
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

/* Destination path -> index into the global plan (open addressing). A
 * slot pointing at a dead entry counts as absent. */
typedef struct hmap {
    size_t *slots;
    size_t cap, n;
} hmap;

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
static pent *hmap_get(hmap *m, pvec *g, const char *key)
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

/* A host folder we read from: an allowed root or a mount's source. */
typedef struct hroot {
    char *path; /* resolved, absolute */
    int fd;     /* O_PATH (allowed roots) or O_RDONLY (mount sources) folder */
} hroot;

typedef struct skipv {
    sp_hydrate_skip *v;
    size_t n, cap;
} skipv;

typedef struct ovrv {
    sp_hydrate_override *v;
    size_t n, cap;
} ovrv;

/* Everything one sp_hydrate() call holds. */
typedef struct hyd {
    const sp_hydrate_opts *opts;
    hroot *roots;
    size_t nroots;
    size_t n_allowed; /* roots[0..n_allowed) are opts->allowed_roots */
    char **mount_dst; /* normalized mount paths, "" = workspace root */
    size_t *mount_root;
    size_t nmounts;
    const sp_mount *mounts;
    uint64_t *copied; /* bytes copied per mount, checked against max_bytes again */
    pvec g;
    hmap map;
    skipv skips;
    ovrv ovr;
    uint64_t excluded;
    bool is_root;
    bool no_reflink, no_cfr;
    uint64_t reflinked, sparse;
    char *buf; /* RW_CHUNK bytes for read/write copies */
    sp_hydrate_progress prog;
    dev_t ws_dev;
    ino_t ws_ino;
    /* staging */
    int wsfd;
    int stage_parent; /* folder holding the staging folder */
    char *stage_name;
    int stagefd; /* the staging folder */
    int treefd;  /* stage/tree: the new content, laid out like the workspace */
    int trashfd; /* stage/trash: workspace entries moved aside during the commit */
} hyd;

static void add_skip(hyd *h, const char *dst, size_t mount, sp_hydrate_skip_reason r,
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

static void add_override(hyd *h, const char *dst, size_t mount, long previous)
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

static void progress(hyd *h, sp_hydrate_phase phase, const char *path)
{
    if (!h->opts || !h->opts->progress)
        return;
    h->prog.phase = phase;
    h->prog.path = path;
    h->opts->progress(h->opts->progress_userdata, &h->prog);
}

/* One mount being walked. */
typedef struct mwalk {
    hyd *h;
    size_t mount;
    const sp_mount *m;
    size_t skip; /* strlen of the mount path plus its '/', to get paths relative to the mount */
    sp_globset *excl, *incl;
    sp_glob **anchored; /* includes with a '/' */
    size_t n_anchored;
    bool any_depth_include;
    size_t *allowed; /* indices into h->roots */
    size_t n_allowed;
    pvec p;
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

static char *host_display(const hyd *h, int root, const char *rel)
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
        add_skip(w->h, dst, w->mount, SP_HYDRATE_SKIP_LOOP, "the workspace itself");
        return 0;
    }
    for (unsigned i = 0; i < w->nchain; i++) {
        if (w->chain[i].dev == st->st_dev && w->chain[i].ino == st->st_ino) {
            add_skip(w->h, dst, w->mount, SP_HYDRATE_SKIP_LOOP, "a folder being copied");
            return 0;
        }
    }
    if (depth > MAX_DEPTH || w->nchain >= MAX_DEPTH + 1) {
        add_skip(w->h, dst, w->mount, SP_HYDRATE_SKIP_TOO_DEEP, NULL);
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
    cleanup_free char *target = read_link(dfd, name);
    if (!target)
        target = sp_xstrdup("");

    cleanup_free char *abs =
        strcmp(host_dir, "/") == 0 ? sp_xasprintf("/%s", name) : join(host_dir, name);
    cleanup_free char *resolved = realpath(abs, NULL);
    if (!resolved) {
        int e = errno;
        if (e == ELOOP)
            add_skip(h, dst, w->mount, SP_HYDRATE_SKIP_LOOP, target);
        else if (e == ENOENT || e == ENOTDIR)
            add_skip(h, dst, w->mount, SP_HYDRATE_SKIP_DANGLING, target);
        else
            return sp_err_errno(err, e, "resolve symlink", abs);
        return 0;
    }
    size_t ri = SIZE_MAX;
    for (size_t i = 0; i < w->n_allowed && ri == SIZE_MAX; i++)
        if (path_within(resolved, h->roots[w->allowed[i]].path))
            ri = w->allowed[i];
    if (ri == SIZE_MAX) {
        add_skip(h, dst, w->mount, SP_HYDRATE_SKIP_OUTSIDE, target);
        return 0;
    }
    const char *rel = path_below(resolved, h->roots[ri].path);
    cleanup_close int fd = open_beneath(h->roots[ri].fd, rel, O_PATH);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (errno == ENOENT) {
            add_skip(h, dst, w->mount, SP_HYDRATE_SKIP_DANGLING, target);
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
    add_skip(h, dst, w->mount, SP_HYDRATE_SKIP_SPECIAL, sp_fs_type_name(SP_FS_OTHER));
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
    names nm = {SP_BUF_INIT, NULL, 0, 0};
    int rc = 0;
    if (read_names(dfd, &nm) < 0) {
        cleanup_free char *disp = host_display(h, root, src_dir);
        rc = sp_err_errno(err, errno, "read folder", disp);
        goto done;
    }
    for (size_t i = 0; i < nm.n && rc == 0; i++) {
        const char *name = names_at(&nm, i);
        cleanup_free char *dst = join(dst_dir, name);
        const char *mrel = mrel_of(w, dst);
        h->prog.files++;
        progress(h, SP_HYDRATE_SCAN, dst);
        if (w->excl && sp_globset_match(w->excl, mrel)) {
            h->excluded++;
            continue;
        }
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT)
                continue; /* gone before we looked: not part of this copy */
            cleanup_free char *src = join(src_dir, name);
            cleanup_free char *disp = host_display(h, root, src);
            rc = sp_err_errno(err, errno, "stat", disp);
            break;
        }
        cleanup_free char *src = join(src_dir, name);
        cleanup_free char *host = NULL;
        if (host_dir)
            host = strcmp(host_dir, "/") == 0 ? sp_xasprintf("/%s", name) : join(host_dir, name);

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
                cleanup_free char *disp = host_display(h, root, src);
                rc = sp_err_errno(err, errno, "open folder", disp);
                break;
            }
            if (fstat(cfd, &st) < 0) {
                cleanup_free char *disp = host_display(h, root, src);
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
        } else if (S_ISLNK(st.st_mode)) {
            e.link = read_link(dfd, name);
            if (!e.link) {
                if (errno == ENOENT)
                    continue;
                cleanup_free char *disp = host_display(h, root, src);
                rc = sp_err_errno(err, errno, "readlink", disp);
                break;
            }
            e.type = SP_FS_SYMLINK;
        } else {
            add_skip(h, dst, w->mount, SP_HYDRATE_SKIP_SPECIAL, special_name(st.st_mode));
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
    names_dispose(&nm);
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
    for (size_t i = 0; i < w->n_anchored; i++)
        sp_glob_free(w->anchored[i]);
    free(w->anchored);
    free(w->allowed);
    pvec_dispose(&w->p);
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
    pent *x = hmap_get(&h->map, &h->g, e->dst);
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
        add_override(h, e->dst, e->mount, (long)x->mount);
        kill_entry(h, (size_t)(x - h->g.v));
    }
    e->parent = SIZE_MAX;
    size_t idx = pvec_push(&h->g, e);
    hmap_put(&h->map, &h->g, idx);
}

/* Plan one mount: resolve it, walk it, check its cap, merge it. */
static int plan_mount(hyd *h, size_t mi, const sp_mount *m, sp_error **err)
{
    mwalk w;
    memset(&w, 0, sizeof(w));
    w.h = h;
    w.mount = mi;
    w.m = m;
    const char *dst_root = h->mount_dst[mi];
    w.skip = *dst_root ? strlen(dst_root) + 1 : 0;
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

    if (m->max_bytes && w.bytes > m->max_bytes) {
        char tot[64], cap[64];
        fmt_size_exact(tot, sizeof(tot), w.bytes);
        fmt_size_exact(cap, sizeof(cap), m->max_bytes);
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

/* --------------------------------------------------------------- copy -- */

static int copy_range(hyd *h, int sfd, int dfd, uint64_t off, uint64_t len, const char *src_disp,
                      const char *dst_disp, sp_error **err)
{
    loff_t in = (loff_t)off, out = (loff_t)off;
    bool cfr = !h->no_cfr;
    while (len > 0) {
        if (cfr) {
            size_t want = len > CFR_CHUNK ? CFR_CHUNK : (size_t)len;
            ssize_t n = copy_file_range(sfd, &in, dfd, &out, want, 0);
            if (n > 0) {
                len -= (uint64_t)n;
                continue;
            }
            if (n == 0)
                return sp_err_set(err, SP_ERROR, 0, "file shrank while hydrating: %s", src_disp);
            if (errno == EINTR)
                continue;
            if (errno == ENOSYS || errno == EOPNOTSUPP || errno == EXDEV)
                h->no_cfr = true;
            if (errno == ENOSYS || errno == EOPNOTSUPP || errno == EXDEV || errno == EINVAL ||
                errno == EBADF || errno == ETXTBSY) {
                cfr = false;
                continue;
            }
            if (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)
                return sp_err_errno(err, errno, "write", dst_disp);
            return sp_err_errno(err, errno, "read", src_disp);
        }
        if (!h->buf)
            h->buf = sp_xmalloc(RW_CHUNK);
        size_t want = len > RW_CHUNK ? RW_CHUNK : (size_t)len;
        ssize_t n = pread(sfd, h->buf, want, in);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return sp_err_errno(err, errno, "read", src_disp);
        }
        if (n == 0)
            return sp_err_set(err, SP_ERROR, 0, "file shrank while hydrating: %s", src_disp);
        for (ssize_t w = 0; w < n;) {
            ssize_t k = pwrite(dfd, h->buf + w, (size_t)(n - w), out);
            if (k < 0) {
                if (errno == EINTR)
                    continue;
                return sp_err_errno(err, errno, "write", dst_disp);
            }
            w += k;
            out += k;
        }
        in += n;
        len -= (uint64_t)n;
    }
    return 0;
}

/* Copy the content of sfd (a regular file of `size` bytes) into the empty
 * file dfd: a reflink when the filesystem can, else data extents only for a
 * sparse file, else the whole range. */
static int copy_content(hyd *h, int sfd, int dfd, const struct stat *st, const char *src_disp,
                        const char *dst_disp, sp_error **err)
{
    uint64_t size = (uint64_t)st->st_size;
    if (size == 0)
        return 0;
    if (!h->no_reflink) {
        if (ioctl(dfd, FICLONE, sfd) == 0) {
            h->reflinked++;
            return 0;
        }
        if (errno == EOPNOTSUPP || errno == ENOTTY || errno == ENOSYS || errno == EXDEV ||
            errno == EINVAL)
            h->no_reflink = true;
    }
    if ((uint64_t)st->st_blocks * 512 < size) {
        off_t off = 0;
        bool seek_ok = true;
        while ((uint64_t)off < size) {
            off_t data = lseek(sfd, off, SEEK_DATA);
            if (data < 0) {
                if (errno == ENXIO)
                    break; /* only a hole is left */
                seek_ok = false;
                break;
            }
            off_t hole = lseek(sfd, data, SEEK_HOLE);
            if (hole < 0) {
                seek_ok = false;
                break;
            }
            if ((uint64_t)hole > size)
                hole = (off_t)size;
            if (hole > data) {
                int rc = copy_range(h, sfd, dfd, (uint64_t)data, (uint64_t)(hole - data), src_disp,
                                    dst_disp, err);
                if (rc < 0)
                    return rc;
            }
            off = hole;
        }
        if (seek_ok) {
            if (ftruncate(dfd, (off_t)size) < 0)
                return sp_err_errno(err, errno, "truncate", dst_disp);
            h->sparse++;
            return 0;
        }
        /* No SEEK_DATA here: copy everything, holes as zeros. */
        if (ftruncate(dfd, 0) < 0)
            return sp_err_errno(err, errno, "truncate", dst_disp);
    }
    return copy_range(h, sfd, dfd, 0, size, src_disp, dst_disp, err);
}

static int copy_file(hyd *h, pent *e, int spfd, int dpfd, sp_error **err)
{
    const char *sname = base_name(e->src);
    const char *dname = base_name(e->dst);
    /* O_NONBLOCK: a fifo swapped in since the scan must not hang us. */
    cleanup_close int sfd = openat(spfd, sname, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    cleanup_free char *sdisp = host_display(h, e->root, e->src);
    if (sfd < 0) {
        if (errno == ENOENT)
            return sp_err_set(err, SP_ENOTFOUND, ENOENT, "file vanished while hydrating: %s",
                              sdisp);
        return sp_err_errno(err, errno, "open", sdisp);
    }
    struct stat st;
    if (fstat(sfd, &st) < 0)
        return sp_err_errno(err, errno, "stat", sdisp);
    if (!S_ISREG(st.st_mode))
        return sp_err_set(err, SP_ERROR, 0, "file changed type while hydrating: %s", sdisp);
    /* Created with its final permission bits (less the umask; never the
     * set-id bits, which chown would clear): then, as with cp -a, chown
     * and chmod are only needed when the result differs, and each one
     * saved is an inode update per file. */
    cleanup_close int dfd = openat(
        dpfd, dname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, st.st_mode & 0777);
    struct stat dst;
    if (dfd < 0 || fstat(dfd, &dst) < 0)
        return sp_err_errno(err, errno, "create", e->dst);
    int rc = copy_content(h, sfd, dfd, &st, sdisp, e->dst, err);
    if (rc < 0)
        return rc;
    /* What was copied is what the file held when opened: a file that grew
     * since the scan still counts against the cap. */
    e->size = (uint64_t)st.st_size;
    uint64_t cap = h->mounts[e->mount].max_bytes;
    h->copied[e->mount] += e->size;
    if (cap && h->copied[e->mount] > cap) {
        char c[64];
        fmt_size_exact(c, sizeof(c), cap);
        return sp_err_set(err, SP_ETOOBIG, EFBIG,
                          "mount %s: files grew past its max-bytes of %s while hydrating, at %s",
                          h->roots[h->mount_root[e->mount]].path, c, sdisp);
    }
    if (h->is_root && (dst.st_uid != st.st_uid || dst.st_gid != st.st_gid) &&
        fchown(dfd, st.st_uid, st.st_gid) < 0)
        return sp_err_errno(err, errno, "chown", e->dst);
    if ((dst.st_mode & 07777) != (st.st_mode & 07777) && fchmod(dfd, st.st_mode & 07777) < 0)
        return sp_err_errno(err, errno, "chmod", e->dst);
    struct timespec ts[2] = {st.st_atim, st.st_mtim};
    if (futimens(dfd, ts) < 0)
        return sp_err_errno(err, errno, "set times", e->dst);
    h->prog.bytes += e->size;
    return 0;
}

static int copy_all(hyd *h, sp_error **err)
{
    dstack src = {NULL, 0, 0, -1}, dst = {NULL, 0, 0, 0};
    int rc = 0;
    h->prog.files = 0;
    h->prog.bytes = 0;
    for (size_t i = 0; i < h->g.n && rc == 0; i++) {
        pent *e = &h->g.v[i];
        if (e->dead)
            continue;
        cleanup_free char *ddir = dir_name(e->dst);
        int dpfd = dstack_get(&dst, h->treefd, 0, ddir);
        if (dpfd < 0) {
            rc = sp_err_errno(err, errno, "open staging folder", ddir);
            break;
        }
        const char *dname = base_name(e->dst);
        switch (e->type) {
        case SP_FS_DIR:
            if (mkdirat(dpfd, dname, 0700) < 0)
                rc = sp_err_errno(err, errno, "mkdir", e->dst);
            break;
        case SP_FS_SYMLINK: {
            if (symlinkat(e->link, dpfd, dname) < 0) {
                rc = sp_err_errno(err, errno, "symlink", e->dst);
                break;
            }
            if (h->is_root && fchownat(dpfd, dname, e->uid, e->gid, AT_SYMLINK_NOFOLLOW) < 0) {
                rc = sp_err_errno(err, errno, "chown", e->dst);
                break;
            }
            struct timespec ts[2] = {e->atime, e->mtime};
            if (utimensat(dpfd, dname, ts, AT_SYMLINK_NOFOLLOW) < 0)
                rc = sp_err_errno(err, errno, "set times", e->dst);
            break;
        }
        case SP_FS_FILE: {
            cleanup_free char *sdir = dir_name(e->src);
            int spfd = dstack_get(&src, h->roots[e->root].fd, e->root, sdir);
            if (spfd < 0) {
                cleanup_free char *disp = host_display(h, e->root, sdir);
                if (errno == ENOENT)
                    rc = sp_err_set(err, SP_ENOTFOUND, ENOENT,
                                    "folder vanished while hydrating: %s", disp);
                else
                    rc = sp_err_errno(err, errno, "open folder", disp);
                break;
            }
            rc = copy_file(h, e, spfd, dpfd, err);
            if (rc == 0) {
                h->prog.files++;
                progress(h, SP_HYDRATE_COPY, e->dst);
            }
            break;
        }
        default:
            break;
        }
    }
    dstack_dispose(&src);

    /* Folder metadata last, deepest first: filling a folder changes its
     * mtime, and a read-only folder could not be filled. */
    for (size_t i = h->g.n; i-- > 0 && rc == 0;) {
        pent *e = &h->g.v[i];
        if (e->dead || e->type != SP_FS_DIR)
            continue;
        cleanup_free char *ddir = dir_name(e->dst);
        int dpfd = dstack_get(&dst, h->treefd, 0, ddir);
        const char *dname = base_name(e->dst);
        if (dpfd < 0) {
            rc = sp_err_errno(err, errno, "open staging folder", ddir);
            break;
        }
        if (e->implied) {
            if (fchmodat(dpfd, dname, 0755, 0) < 0)
                rc = sp_err_errno(err, errno, "chmod", e->dst);
            continue;
        }
        if (h->is_root && fchownat(dpfd, dname, e->uid, e->gid, AT_SYMLINK_NOFOLLOW) < 0) {
            rc = sp_err_errno(err, errno, "chown", e->dst);
            break;
        }
        if (fchmodat(dpfd, dname, e->mode & 07777, 0) < 0) {
            rc = sp_err_errno(err, errno, "chmod", e->dst);
            break;
        }
        struct timespec ts[2] = {e->atime, e->mtime};
        if (utimensat(dpfd, dname, ts, AT_SYMLINK_NOFOLLOW) < 0)
            rc = sp_err_errno(err, errno, "set times", e->dst);
    }
    dstack_dispose(&dst);
    return rc;
}

/* ------------------------------------------------------------- commit -- */

enum jkind { J_MOVED, J_EXCHANGED, J_ASIDE };

typedef struct jent {
    enum jkind kind;
    char *path;  /* relative to the workspace (and to the staging tree) */
    char *trash; /* J_ASIDE: name in the trash folder */
} jent;

typedef struct journal {
    jent *v;
    size_t n, cap;
    unsigned long renames;
} journal;

static void journal_add(journal *j, enum jkind k, const char *path, const char *trash)
{
    if (j->n == j->cap) {
        j->cap = j->cap ? j->cap * 2 : 64;
        j->v = sp_xrealloc(j->v, j->cap * sizeof(jent));
    }
    j->v[j->n].kind = k;
    j->v[j->n].path = sp_xstrdup(path);
    j->v[j->n].trash = trash ? sp_xstrdup(trash) : NULL;
    j->n++;
}

static void journal_dispose(journal *j)
{
    for (size_t i = 0; i < j->n; i++) {
        free(j->v[i].path);
        free(j->v[i].trash);
    }
    free(j->v);
    memset(j, 0, sizeof(*j));
}

/* renameat2 that the test hook can make fail. */
static int do_rename(journal *j, int ofd, const char *oname, int nfd, const char *nname,
                     unsigned flags)
{
    j->renames++;
    if (sp_hydrate_test_fail_commit > 0 &&
        j->renames == (unsigned long)sp_hydrate_test_fail_commit) {
        errno = EIO;
        return -1;
    }
    return renameat2(ofd, oname, nfd, nname, flags);
}

/* Moving a folder to another parent needs write access to it (its ".."
 * changes): grant it for the move when we are not root. */
static int rename_dir_aware(hyd *h, journal *j, int ofd, const char *oname, int nfd,
                            const char *nname, unsigned flags)
{
    struct stat st;
    bool fix = !h->is_root && fstatat(ofd, oname, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
               S_ISDIR(st.st_mode) && !(st.st_mode & S_IWUSR);
    if (fix && fchmodat(ofd, oname, (st.st_mode & 07777) | S_IWUSR, 0) < 0)
        return -1;
    int r = do_rename(j, ofd, oname, nfd, nname, flags);
    int e = errno;
    /* Restore the mode wherever the folder now is. */
    if (fix)
        (void)fchmodat(r == 0 ? nfd : ofd, r == 0 ? nname : oname, st.st_mode & 07777, 0);
    errno = e;
    return r;
}

static int commit_dir(hyd *h, journal *j, int wdir, int sdir, const char *rel, unsigned depth,
                      sp_error **err);

static int commit_one(hyd *h, journal *j, int wdir, int sdir, const char *name, const char *path,
                      unsigned depth, sp_error **err)
{
    struct stat sst, wst;
    if (fstatat(sdir, name, &sst, AT_SYMLINK_NOFOLLOW) < 0)
        return sp_err_errno(err, errno, "stat staged", path);
    h->prog.files++;
    progress(h, SP_HYDRATE_COMMIT, path);
    if (fstatat(wdir, name, &wst, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno != ENOENT)
            return sp_err_errno(err, errno, "stat", path);
        if (rename_dir_aware(h, j, sdir, name, wdir, name, RENAME_NOREPLACE) < 0)
            return sp_err_errno(err, errno, "move into the workspace", path);
        journal_add(j, J_MOVED, path, NULL);
        return 0;
    }
    if (S_ISDIR(sst.st_mode) && S_ISDIR(wst.st_mode)) {
        cleanup_close int wfd = openat(wdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (wfd >= 0) {
            if (!h->is_root && !(sst.st_mode & S_IWUSR))
                (void)fchmodat(sdir, name, (sst.st_mode & 07777) | S_IRWXU, 0);
            cleanup_close int sfd =
                openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sfd < 0)
                return sp_err_errno(err, errno, "open staged", path);
            return commit_dir(h, j, wfd, sfd, path, depth + 1, err);
        }
        if (errno != ELOOP && errno != ENOTDIR)
            return sp_err_errno(err, errno, "open", path);
        /* Swapped for a symlink meanwhile: replace it like any non-folder. */
    }
    pent *pe = hmap_get(&h->map, &h->g, path);
    add_override(h, path, pe ? pe->mount : 0, -1);
    if (rename_dir_aware(h, j, sdir, name, wdir, name, RENAME_EXCHANGE) == 0) {
        journal_add(j, J_EXCHANGED, path, NULL);
        return 0;
    }
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
        return sp_err_errno(err, errno, "replace in the workspace", path);
    /* No RENAME_EXCHANGE here: move the old entry aside, then the new one in. */
    char tname[32];
    snprintf(tname, sizeof(tname), "%zu", j->n);
    if (rename_dir_aware(h, j, wdir, name, h->trashfd, tname, RENAME_NOREPLACE) < 0)
        return sp_err_errno(err, errno, "move aside", path);
    journal_add(j, J_ASIDE, path, tname);
    if (rename_dir_aware(h, j, sdir, name, wdir, name, RENAME_NOREPLACE) < 0)
        return sp_err_errno(err, errno, "move into the workspace", path);
    return 0;
}

static int commit_dir(hyd *h, journal *j, int wdir, int sdir, const char *rel, unsigned depth,
                      sp_error **err)
{
    if (depth > 4 * MAX_DEPTH)
        return sp_err_set(err, SP_ETOOBIG, 0, "too deep: %s", rel);
    names nm = {SP_BUF_INIT, NULL, 0, 0};
    int rc = 0;
    if (read_names(sdir, &nm) < 0)
        rc = sp_err_errno(err, errno, "read staged folder", *rel ? rel : ".");
    for (size_t i = 0; i < nm.n && rc == 0; i++) {
        cleanup_free char *path = join(rel, names_at(&nm, i));
        rc = commit_one(h, j, wdir, sdir, names_at(&nm, i), path, depth, err);
    }
    names_dispose(&nm);
    return rc;
}

/* Undo the commit, newest first. Returns false when something could not be
 * put back. */
static bool rollback(hyd *h, journal *j)
{
    bool ok = true;
    for (size_t i = j->n; i-- > 0;) {
        jent *x = &j->v[i];
        cleanup_free char *dir = dir_name(x->path);
        const char *name = base_name(x->path);
        cleanup_close int wfd = open_beneath(h->wsfd, dir, O_PATH | O_DIRECTORY);
        cleanup_close int sfd = open_beneath(h->treefd, dir, O_PATH | O_DIRECTORY);
        if (wfd < 0 || sfd < 0) {
            ok = false;
            continue;
        }
        int r = 0;
        switch (x->kind) {
        case J_MOVED:
            r = renameat2(wfd, name, sfd, name, RENAME_NOREPLACE);
            break;
        case J_EXCHANGED:
            r = renameat2(wfd, name, sfd, name, RENAME_EXCHANGE);
            break;
        case J_ASIDE:
            /* The new entry may not have made it in. */
            if (renameat2(wfd, name, sfd, name, RENAME_NOREPLACE) < 0 && errno != ENOENT) {
                r = -1;
                break;
            }
            r = renameat2(h->trashfd, x->trash, wfd, name, RENAME_NOREPLACE);
            break;
        }
        if (r < 0)
            ok = false;
    }
    return ok;
}

/* ------------------------------------------------------------ staging -- */

/* Make a fresh, private folder in pfd; 0 or -1 with errno. */
static int mkstage(hyd *h, int pfd)
{
    for (int tries = 0; tries < 16; tries++) {
        unsigned char rnd[6];
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
            return -1;
        free(h->stage_name);
        h->stage_name = sp_xasprintf(".sandpod-hydrate-%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1],
                                     rnd[2], rnd[3], rnd[4], rnd[5]);
        if (mkdirat(pfd, h->stage_name, 0700) == 0)
            return 0;
        if (errno != EEXIST)
            break;
    }
    free(h->stage_name);
    h->stage_name = NULL;
    return -1;
}

/* The staging folder goes in the workspace's parent, so that renames move
 * entries in; when that parent is another filesystem (the workspace is a
 * mount point) or refuses us, it goes hidden inside the workspace. */
static int stage_create(hyd *h, const char *workspace, sp_error **err)
{
    struct stat wst, pst;
    if (fstat(h->wsfd, &wst) < 0)
        return sp_err_errno(err, errno, "stat", workspace);
    h->stage_parent = openat(h->wsfd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (h->stage_parent >= 0) {
        bool usable = fstat(h->stage_parent, &pst) == 0 && pst.st_dev == wst.st_dev &&
                      pst.st_ino != wst.st_ino;
        if (!usable || mkstage(h, h->stage_parent) < 0) {
            close(h->stage_parent);
            h->stage_parent = -1;
        }
    }
    if (h->stage_parent < 0) {
        h->stage_parent = fcntl(h->wsfd, F_DUPFD_CLOEXEC, 0);
        if (h->stage_parent < 0)
            return sp_err_errno(err, errno, "open", workspace);
        if (mkstage(h, h->stage_parent) < 0)
            return sp_err_errno(err, errno, "create staging folder in", workspace);
    }
    h->stagefd =
        openat(h->stage_parent, h->stage_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (h->stagefd < 0)
        return sp_err_errno(err, errno, "open staging folder", h->stage_name);
    if (mkdirat(h->stagefd, "tree", 0700) < 0 || mkdirat(h->stagefd, "trash", 0700) < 0)
        return sp_err_errno(err, errno, "create staging folder", h->stage_name);
    h->treefd = openat(h->stagefd, "tree", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    h->trashfd = openat(h->stagefd, "trash", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (h->treefd < 0 || h->trashfd < 0)
        return sp_err_errno(err, errno, "open staging folder", h->stage_name);
    return 0;
}

static void stage_remove(hyd *h)
{
    if (h->stage_parent >= 0 && h->stage_name)
        (void)sp_tree_remove(h->stage_parent, h->stage_name, 0, NULL);
}

/* ------------------------------------------------------------- result -- */

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const sp_hydrate_entry *)a)->path, ((const sp_hydrate_entry *)b)->path);
}

static int cmp_skip(const void *a, const void *b)
{
    return strcmp(((const sp_hydrate_skip *)a)->path, ((const sp_hydrate_skip *)b)->path);
}

static int cmp_ovr(const void *a, const void *b)
{
    const sp_hydrate_override *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    if (c)
        return c;
    return x->previous < y->previous ? -1 : x->previous > y->previous;
}

static sp_hydrate_result *build_result(hyd *h)
{
    sp_hydrate_result *r = sp_xcalloc(1, sizeof(*r));
    r->n_mounts = h->nmounts;
    r->mounts = sp_xcalloc(h->nmounts, sizeof(sp_hydrate_mount_stats));
    for (size_t i = 0; i < h->nmounts; i++) {
        r->mounts[i].host_path = sp_xstrdup(h->roots[h->mount_root[i]].path);
        r->mounts[i].mount_path = sp_xstrdup(*h->mount_dst[i] ? h->mount_dst[i] : ".");
    }
    size_t live = 0;
    for (size_t i = 0; i < h->g.n; i++)
        live += !h->g.v[i].dead;
    r->entries = sp_xcalloc(live, sizeof(sp_hydrate_entry));
    for (size_t i = 0; i < h->g.n; i++) {
        pent *e = &h->g.v[i];
        if (e->dead)
            continue;
        sp_hydrate_entry *x = &r->entries[r->n_entries++];
        x->path = sp_xstrdup(e->dst);
        x->type = e->type;
        x->size = e->size;
        x->mount = e->mount;
        sp_hydrate_mount_stats *ms = &r->mounts[e->mount];
        switch (e->type) {
        case SP_FS_FILE:
            r->files++;
            r->bytes += e->size;
            ms->files++;
            ms->bytes += e->size;
            if (e->nlink > 1)
                r->hardlinks++;
            break;
        case SP_FS_DIR:
            r->dirs++;
            ms->dirs++;
            break;
        case SP_FS_SYMLINK:
            r->symlinks++;
            ms->symlinks++;
            break;
        default:
            break;
        }
    }
    if (r->n_entries > 1)
        qsort(r->entries, r->n_entries, sizeof(sp_hydrate_entry), cmp_entry);
    r->skipped = steal_pointer(&h->skips.v);
    r->n_skipped = h->skips.n;
    h->skips.n = 0;
    if (r->n_skipped > 1)
        qsort(r->skipped, r->n_skipped, sizeof(sp_hydrate_skip), cmp_skip);
    r->overridden = steal_pointer(&h->ovr.v);
    r->n_overridden = h->ovr.n;
    h->ovr.n = 0;
    if (r->n_overridden > 1)
        qsort(r->overridden, r->n_overridden, sizeof(sp_hydrate_override), cmp_ovr);
    r->excluded = h->excluded;
    r->reflinked = h->reflinked;
    r->sparse = h->sparse;
    return r;
}

void sp_hydrate_result_free(sp_hydrate_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_entries; i++)
        free(r->entries[i].path);
    for (size_t i = 0; i < r->n_skipped; i++) {
        free(r->skipped[i].path);
        free(r->skipped[i].detail);
    }
    for (size_t i = 0; i < r->n_overridden; i++)
        free(r->overridden[i].path);
    for (size_t i = 0; i < r->n_mounts; i++) {
        free(r->mounts[i].host_path);
        free(r->mounts[i].mount_path);
    }
    free(r->entries);
    free(r->skipped);
    free(r->overridden);
    free(r->mounts);
    free(r);
}

const char *sp_hydrate_skip_name(sp_hydrate_skip_reason r)
{
    switch (r) {
    case SP_HYDRATE_SKIP_SPECIAL:
        return "special";
    case SP_HYDRATE_SKIP_OUTSIDE:
        return "outside";
    case SP_HYDRATE_SKIP_DANGLING:
        return "dangling";
    case SP_HYDRATE_SKIP_LOOP:
        return "loop";
    case SP_HYDRATE_SKIP_TOO_DEEP:
        return "too_deep";
    default:
        return "unknown";
    }
}

/* -------------------------------------------------------------- roots -- */

static size_t add_root(hyd *h, char *path, int fd)
{
    h->roots = sp_xrealloc(h->roots, (h->nroots + 1) * sizeof(hroot));
    h->roots[h->nroots].path = path;
    h->roots[h->nroots].fd = fd;
    return h->nroots++;
}

/* Resolve the allowed roots and the mount sources and open them. */
static int resolve_roots(hyd *h, const sp_mount *mounts, size_t n, sp_error **err)
{
    const char *const *allowed = h->opts ? h->opts->allowed_roots : NULL;
    for (size_t i = 0; allowed && allowed[i]; i++) {
        char buf[PATH_MAX];
        if (!realpath(allowed[i], buf)) {
            if (errno == ENOENT)
                return sp_err_set(err, SP_ENOTFOUND, ENOENT, "allowed root not found: %s",
                                  allowed[i]);
            return sp_err_errno(err, errno, "allowed root", allowed[i]);
        }
        int fd = open(buf, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            if (errno == ENOTDIR)
                return sp_err_set(err, SP_EINVAL, ENOTDIR, "allowed root is not a folder: %s",
                                  allowed[i]);
            return sp_err_errno(err, errno, "allowed root", allowed[i]);
        }
        add_root(h, sp_xstrdup(buf), fd);
    }
    h->n_allowed = h->nroots;

    h->mount_root = sp_xcalloc(n, sizeof(size_t));
    h->copied = sp_xcalloc(n, sizeof(uint64_t));
    h->mounts = mounts;
    h->mount_dst = sp_xcalloc(n, sizeof(char *));
    h->nmounts = n;
    for (size_t i = 0; i < n; i++) {
        const sp_mount *m = &mounts[i];
        if (!m->host_path || !*m->host_path)
            return sp_err_set(err, SP_EINVAL, 0, "mount %zu has no host path", i + 1);
        const char *mp = m->mount_path ? m->mount_path : "";
        char *norm = NULL;
        int rc = sp_fs_path_normalize(&norm, mp, strlen(mp), err);
        if (rc < 0)
            return sp_err_wrap(err, rc, "mount %s: dst", m->host_path);
        if (strcmp(norm, ".") == 0)
            norm[0] = '\0';
        h->mount_dst[i] = norm;

        char buf[PATH_MAX];
        if (!realpath(m->host_path, buf)) {
            if (errno == ENOENT)
                return sp_err_set(err, SP_ENOTFOUND, ENOENT, "mount source not found: %s",
                                  m->host_path);
            return sp_err_errno(err, errno, "mount source", m->host_path);
        }
        int fd;
        if (h->n_allowed) {
            size_t ai = SIZE_MAX;
            for (size_t k = 0; k < h->n_allowed && ai == SIZE_MAX; k++)
                if (path_within(buf, h->roots[k].path))
                    ai = k;
            if (ai == SIZE_MAX) {
                if (strcmp(buf, m->host_path) == 0)
                    return sp_err_set(err, SP_EESCAPE, EXDEV,
                                      "mount source is outside the allowed roots: %s",
                                      m->host_path);
                return sp_err_set(err, SP_EESCAPE, EXDEV,
                                  "mount source is outside the allowed roots: %s (resolves to %s)",
                                  m->host_path, buf);
            }
            fd = open_beneath(h->roots[ai].fd, path_below(buf, h->roots[ai].path),
                              O_RDONLY | O_DIRECTORY);
        } else {
            fd = open(buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (fd < 0) {
            if (errno == ENOTDIR)
                return sp_err_set(err, SP_EINVAL, ENOTDIR, "mount source is not a folder: %s",
                                  m->host_path);
            if (errno == ELOOP)
                return sp_err_set(err, SP_EESCAPE, EXDEV,
                                  "mount source changed while resolving: %s", m->host_path);
            return sp_err_errno(err, errno, "mount source", m->host_path);
        }
        h->mount_root[i] = add_root(h, sp_xstrdup(buf), fd);
    }
    return 0;
}

static void hyd_dispose(hyd *h)
{
    for (size_t i = 0; i < h->nroots; i++) {
        free(h->roots[i].path);
        if (h->roots[i].fd >= 0)
            close(h->roots[i].fd);
    }
    free(h->roots);
    for (size_t i = 0; i < h->nmounts; i++)
        free(h->mount_dst ? h->mount_dst[i] : NULL);
    free(h->mount_dst);
    free(h->mount_root);
    free(h->copied);
    pvec_dispose(&h->g);
    free(h->map.slots);
    for (size_t i = 0; i < h->skips.n; i++) {
        free(h->skips.v[i].path);
        free(h->skips.v[i].detail);
    }
    free(h->skips.v);
    for (size_t i = 0; i < h->ovr.n; i++)
        free(h->ovr.v[i].path);
    free(h->ovr.v);
    free(h->buf);
    free(h->stage_name);
    int fds[] = {h->wsfd, h->stage_parent, h->stagefd, h->treefd, h->trashfd};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

int sp_hydrate(sp_hydrate_result **out, const char *workspace, const sp_mount *mounts, size_t n,
               const sp_hydrate_opts *opts, sp_error **err)
{
    if (out)
        *out = NULL;
    int64_t t0 = sp_now_ms();
    hyd h;
    memset(&h, 0, sizeof(h));
    h.opts = opts;
    h.wsfd = h.stage_parent = h.stagefd = h.treefd = h.trashfd = -1;
    h.is_root = geteuid() == 0;
    journal j = {NULL, 0, 0, 0};
    int rc = 0;

    if (opts && opts->version != SP_HYDRATE_OPTS_VERSION) {
        rc = sp_err_set(err, SP_EINVAL, 0, "sp_hydrate_opts version %u is not supported",
                        opts->version);
        goto done;
    }
    if (!workspace || (n && !mounts)) {
        rc = sp_err_set(err, SP_EINVAL, 0, "hydrate: workspace or mounts missing");
        goto done;
    }
    h.wsfd = open(workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (h.wsfd < 0) {
        if (errno == ENOENT)
            rc = sp_err_set(err, SP_ENOTFOUND, ENOENT, "workspace not found: %s", workspace);
        else
            rc = sp_err_errno(err, errno, "workspace", workspace);
        goto done;
    }
    struct stat wst;
    if (fstat(h.wsfd, &wst) < 0) {
        rc = sp_err_errno(err, errno, "stat", workspace);
        goto done;
    }
    h.ws_dev = wst.st_dev;
    h.ws_ino = wst.st_ino;
    rc = resolve_roots(&h, mounts, n, err);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = plan_mount(&h, i, &mounts[i], err);
    if (rc < 0)
        goto done;

    h.prog.total_files = 0;
    h.prog.total_bytes = 0;
    for (size_t i = 0; i < h.g.n; i++) {
        if (!h.g.v[i].dead && h.g.v[i].type == SP_FS_FILE) {
            h.prog.total_files++;
            h.prog.total_bytes += h.g.v[i].size;
        }
    }
    rc = stage_create(&h, workspace, err);
    if (rc == 0)
        rc = copy_all(&h, err);
    if (rc < 0)
        goto done;

    h.prog.files = 0;
    rc = commit_dir(&h, &j, h.wsfd, h.treefd, "", 0, err);
    if (rc < 0) {
        if (!rollback(&h, &j))
            sp_err_wrap(err, rc, "the workspace could not be fully restored after an error");
        goto done;
    }
    if (out) {
        *out = build_result(&h);
        (*out)->elapsed_ms = sp_now_ms() - t0;
    }

done:
    stage_remove(&h);
    journal_dispose(&j);
    hyd_dispose(&h);
    return rc;
}

/* --------------------------------------------------------- mount spec -- */

typedef struct mount_owned {
    sp_mount m; /* first: sp_mount_free() gets this pointer */
    char *host;
    char *dst;
    sp_strv inc, exc;
} mount_owned;

void sp_mount_free(sp_mount *m)
{
    if (!m)
        return;
    mount_owned *o = (mount_owned *)m;
    free(o->host);
    free(o->dst);
    sp_strv_dispose(&o->inc);
    sp_strv_dispose(&o->exc);
    free(o);
}

static bool starts_key(const char *s, const char *key)
{
    size_t n = strlen(key);
    return strncmp(s, key, n) == 0 && s[n] == '=';
}

static bool is_kv_spec(const char *s)
{
    static const char *const keys[] = {"src", "dst", "include", "exclude", "max-bytes"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (starts_key(s, keys[i]))
            return true;
    size_t n = strlen("follow-symlinks");
    return strncmp(s, "follow-symlinks", n) == 0 && (s[n] == '\0' || s[n] == ',' || s[n] == '=');
}

/* `\,` -> `,` and `\\` -> `\`; other backslashes stay. */
static char *unescape(const char *s, size_t len)
{
    sp_buf b = SP_BUF_INIT;
    sp_buf_add(&b, "", 0);
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\\' && i + 1 < len && (s[i + 1] == ',' || s[i + 1] == '\\'))
            i++;
        sp_buf_addc(&b, s[i]);
    }
    return sp_buf_steal(&b);
}

/* A whole number with an optional binary suffix: K, M, G, T, each
 * optionally followed by B or iB; a lone B too. Any case. */
static int parse_size(uint64_t *out, const char *s, size_t len)
{
    uint64_t v = 0;
    size_t i = 0;
    if (len == 0 || s[0] < '0' || s[0] > '9')
        return -1;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    char suf[4] = {0};
    if (len - i >= sizeof(suf))
        return -1;
    for (size_t k = 0; i + k < len; k++)
        suf[k] = (char)(s[i + k] | 0x20);
    static const char *const units = "kmgt";
    unsigned shift = 0;
    const char *rest = suf;
    const char *u = suf[0] ? strchr(units, suf[0]) : NULL;
    if (u) {
        shift = 10u * (unsigned)(u - units + 1);
        rest = suf + 1;
    }
    if (!(rest[0] == '\0' || strcmp(rest, "b") == 0 || (shift && strcmp(rest, "ib") == 0)))
        return -1;
    if (shift && v > (UINT64_MAX >> shift))
        return -1;
    *out = v << shift;
    return 0;
}

int sp_mount_spec_parse(sp_mount **out, const char *spec, sp_error **err)
{
    *out = NULL;
    if (!spec || !*spec)
        return sp_err_set(err, SP_EINVAL, 0, "mount spec is empty");
    mount_owned *o = sp_xcalloc(1, sizeof(*o));
    int rc = 0;
    if (!is_kv_spec(spec)) {
        o->host = sp_xstrdup(spec);
        goto done;
    }
    bool have_max = false, have_follow = false;
    const char *p = spec;
    while (rc == 0) {
        /* One item: up to a ',' outside braces and not escaped. */
        const char *q = p;
        int depth = 0;
        for (; *q; q++) {
            if (*q == '\\' && q[1]) {
                q++;
                continue;
            }
            if (*q == '{')
                depth++;
            else if (*q == '}' && depth > 0)
                depth--;
            else if (*q == ',' && depth == 0)
                break;
        }
        size_t len = (size_t)(q - p);
        const char *eq = memchr(p, '=', len);
        size_t klen = eq ? (size_t)(eq - p) : len;
        const char *val = eq ? eq + 1 : NULL;
        size_t vlen = eq ? len - klen - 1 : 0;
#define KEY(k) (klen == strlen(k) && strncmp(p, k, klen) == 0)
        if (len == 0) {
            rc = sp_err_set(err, SP_EINVAL, 0, "mount spec has an empty item: %s", spec);
        } else if (KEY("follow-symlinks")) {
            if (have_follow) {
                rc = sp_err_set(err, SP_EINVAL, 0, "mount spec repeats follow-symlinks: %s", spec);
            } else if (!val || (vlen == 4 && strncmp(val, "true", 4) == 0) ||
                       (vlen == 3 && strncmp(val, "yes", 3) == 0) || (vlen == 1 && val[0] == '1')) {
                o->m.follow_symlinks = true;
            } else if ((vlen == 5 && strncmp(val, "false", 5) == 0) ||
                       (vlen == 2 && strncmp(val, "no", 2) == 0) || (vlen == 1 && val[0] == '0')) {
                o->m.follow_symlinks = false;
            } else {
                rc = sp_err_set(err, SP_EINVAL, 0, "follow-symlinks takes true or false: %.*s",
                                (int)len, p);
            }
            have_follow = true;
        } else if (!val) {
            rc =
                sp_err_set(err, SP_EINVAL, 0, "mount spec item needs KEY=VALUE: %.*s", (int)len, p);
        } else if (vlen == 0) {
            rc = sp_err_set(err, SP_EINVAL, 0, "mount spec item has an empty value: %.*s", (int)len,
                            p);
        } else if (KEY("src")) {
            if (o->host)
                rc = sp_err_set(err, SP_EINVAL, 0, "mount spec repeats src: %s", spec);
            else
                o->host = unescape(val, vlen);
        } else if (KEY("dst")) {
            if (o->dst)
                rc = sp_err_set(err, SP_EINVAL, 0, "mount spec repeats dst: %s", spec);
            else
                o->dst = unescape(val, vlen);
        } else if (KEY("include")) {
            sp_strv_push(&o->inc, sp_xstrndup(val, vlen));
        } else if (KEY("exclude")) {
            sp_strv_push(&o->exc, sp_xstrndup(val, vlen));
        } else if (KEY("max-bytes")) {
            if (have_max)
                rc = sp_err_set(err, SP_EINVAL, 0, "mount spec repeats max-bytes: %s", spec);
            else if (parse_size(&o->m.max_bytes, val, vlen) < 0 || o->m.max_bytes == 0)
                rc = sp_err_set(err, SP_EINVAL, 0,
                                "max-bytes takes a size of at least 1, like 500K, 64M or 2G: "
                                "%.*s",
                                (int)vlen, val);
            have_max = true;
        } else {
            rc = sp_err_set(err, SP_EINVAL, 0,
                            "unknown mount spec key '%.*s' (keys: src, dst, include, exclude, "
                            "max-bytes, follow-symlinks)",
                            (int)klen, p);
        }
#undef KEY
        if (!*q)
            break;
        p = q + 1;
    }
    if (rc == 0 && !o->host)
        rc = sp_err_set(err, SP_EINVAL, 0, "mount spec has no src=PATH: %s", spec);

done:
    if (rc < 0) {
        sp_mount_free(&o->m);
        return rc;
    }
    o->m.host_path = o->host;
    o->m.mount_path = o->dst;
    /* sp_strv keeps its array NULL-terminated. */
    if (o->inc.n)
        o->m.include = (const char *const *)o->inc.v;
    if (o->exc.n)
        o->m.exclude = (const char *const *)o->exc.v;
    *out = &o->m;
    return 0;
}
