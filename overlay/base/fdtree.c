/* The tree walker and remover (fdtree.h): one iterative engine for both.
 *
 * Contract. The tree may belong to a workload that rewrites it while we
 * work, so:
 *  - Every system call takes an fd we hold and one name: the caller's
 *    start name, or a name getdents64 gave us. No path with a '/', no
 *    "..", so no symlink in the middle of a path is ever followed. A last
 *    component is never followed either: folders are opened with
 *    O_DIRECTORY | O_NOFOLLOW, everything else is looked at with
 *    AT_SYMLINK_NOFOLLOW or unlinked. A folder swapped for a symlink
 *    between lstat and open fails the open (ELOOP/ENOTDIR) and is looked
 *    at again as what it has become.
 *  - A folder we cannot open is made 0700 (remover only) through an
 *    O_PATH | O_NOFOLLOW fd checked to be a folder, then opened through
 *    that fd: the chmod never lands on a symlink's target.
 *  - Each level of the walk records its folder's (dev, ino) from fstat of
 *    the fd we opened. At most fd_cap of these fds are kept open; when a
 *    given-up one is needed again it is reopened from its nearest open
 *    ancestor, one name at a time, and every level on the way must match
 *    its record, or we stop working below it ("folder changed during the
 *    walk"). A folder's POST (walker) and rmdir (remover) first check that
 *    its name still names it.
 *  - The stack of levels lives on the heap: depth is bounded by memory
 *    only, never by the C stack, PATH_MAX or the fd limit. Paths are built
 *    in one growable buffer and used for messages only.
 *  - fds held: at most fd_cap (64, lowered when the process hits EMFILE)
 *    plus one transient O_PATH fd; all are closed on every return. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "dir.h"
#include "fdtree.h"

/* The most level fds kept open; the fewest we can work with (the top, the
 * one we open from, the one we open). */
#define TREE_MAX_FDS 64
#define TREE_MIN_FDS 3
/* Reads of a folder that keeps gaining entries, and looks at one entry
 * that keeps changing type (a cheap loop, and a workload flipping a name
 * between a folder and a symlink wins four looks now and then), before
 * giving up on it. */
#define TREE_ATTEMPTS 4
#define TREE_LOOKS    16
#define NONE          SIZE_MAX
#define DIR_FLAGS     (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

void (*sp_tree_test_before_rmdir)(int parent_fd, const char *name);

/* One folder on the path from the start to where the walk is. */
typedef struct level {
    int fd;    /* -1 while given up */
    dev_t dev; /* what fd was opened on */
    ino_t ino;
    struct stat st;    /* as given to PRE, and to POST */
    char *name;        /* in the level above (the caller's name for the start) */
    size_t path_len;   /* of its path in walker.path */
    sp_dirnames names; /* read up front */
    size_t pos;        /* the next entry in names */
    unsigned attempts; /* remover: reads of this folder so far */
    bool failed;       /* remover: something below stays */
    bool chmodded;     /* remover: the start's mode was changed ... */
    mode_t orig_mode;  /* ... from this */
} level;

typedef struct walker {
    int dirfd;
    sp_tree_fn fn;
    void *ctx;
    bool remove, keep_root;
    level *lv;
    size_t n, cap;
    size_t open[TREE_MAX_FDS]; /* levels holding an fd, shallowest first */
    size_t nopen, fd_cap;
    sp_buf path;
    sp_error **err;  /* walker: where the error goes */
    sp_error *first; /* remover: the first error, kept while it goes on */
    sp_error *soft;  /* remover: an entry that kept changing in level soft_in */
    size_t soft_in;
} walker;

static void path_cut(walker *w, size_t len)
{
    w->path.len = len;
    w->path.data[len] = '\0';
}

/* An error about the first len bytes of the path; what == NULL: the folder
 * there is not the one we walked. */
static sp_error *error_at(walker *w, size_t len, int e, const char *what)
{
    char saved = w->path.data[len];
    w->path.data[len] = '\0';
    const char *p = w->path.data[0] ? w->path.data : ".";
    sp_error *tmp = NULL;
    if (what)
        sp_err_errno(&tmp, e, what, p);
    else
        sp_err_set(&tmp, SP_ERROR, 0, "folder changed during the walk: %s", p);
    w->path.data[len] = saved;
    return tmp;
}

/* The walker stops on an error (a negative code); the remover keeps the
 * first one, marks level `in` as failed (its folder stays) and goes on
 * (0). */
static int report(walker *w, size_t in, sp_error *e)
{
    int code = e->code;
    if (!w->remove) {
        if (w->err) {
            sp_error_free(*w->err);
            *w->err = e;
        } else {
            sp_error_free(e);
        }
        return code;
    }
    if (!w->first) {
        w->first = e;
    } else {
        sp_error_free(e);
    }
    if (in != NONE)
        w->lv[in].failed = true;
    return 0;
}

static int fail_at(walker *w, size_t in, size_t len, int e, const char *what)
{
    return report(w, in, error_at(w, len, e, what));
}

static int fail(walker *w, size_t in, int e, const char *what)
{
    return fail_at(w, in, w->path.len, e, what);
}

/* ------------------------------------------------------ the fd budget -- */

static void open_add(walker *w, size_t lvl, int fd)
{
    size_t i = w->nopen;
    while (i > 0 && w->open[i - 1] > lvl) {
        w->open[i] = w->open[i - 1];
        i--;
    }
    w->open[i] = lvl;
    w->nopen++;
    w->lv[lvl].fd = fd;
}

static void open_drop(walker *w, size_t lvl)
{
    size_t i = w->nopen;
    while (i > 0 && w->open[i - 1] != lvl)
        i--;
    memmove(&w->open[i - 1], &w->open[i], (w->nopen - i) * sizeof(w->open[0]));
    w->nopen--;
    close(w->lv[lvl].fd);
    w->lv[lvl].fd = -1;
}

/* Give up one level's fd: never `busy` (about to be opened from) nor the
 * top. Among the rest, outside the innermost half of the budget, the one
 * whose loss leaves the smallest gap between open levels: the fds kept
 * spread over the whole depth, so a given-up level is never far from an
 * open ancestor and reopening costs little whatever the depth. */
static bool evict(walker *w, size_t busy)
{
    size_t top = w->n - 1, window = w->fd_cap / 2, best = NONE, best_gap = SIZE_MAX;
    for (int pass = 0; pass < 2 && best == NONE; pass++) {
        size_t end = w->nopen;
        if (pass == 0)
            end = w->nopen > window ? w->nopen - window : 0;
        for (size_t i = 0; i < end; i++) {
            size_t l = w->open[i];
            if (l == busy || l == top)
                continue;
            /* Levels shifted by one: 0 is the caller's dirfd. */
            size_t prev = i ? w->open[i - 1] + 1 : 0;
            size_t next = i + 1 < w->nopen ? w->open[i + 1] + 1 : w->n + 1;
            if (next - prev < best_gap) {
                best_gap = next - prev;
                best = l;
            }
        }
    }
    if (best == NONE)
        return false;
    open_drop(w, best);
    return true;
}

static int parent_fd(const walker *w, size_t from)
{
    return from == NONE ? w->dirfd : w->lv[from].fd;
}

/* openat from level `from` (NONE: the caller's dirfd). When the process is
 * out of fds, other levels' fds are given up and fewer kept from then on. */
static int open_from(walker *w, size_t from, const char *name, int flags)
{
    for (;;) {
        int fd = openat(parent_fd(w, from), name, flags | O_CLOEXEC);
        if (fd >= 0 || (errno != EMFILE && errno != ENFILE))
            return fd;
        int e = errno;
        if (!evict(w, from)) {
            errno = e;
            return -1;
        }
        if (w->fd_cap > w->nopen)
            w->fd_cap = w->nopen > TREE_MIN_FDS ? w->nopen : TREE_MIN_FDS;
    }
}

/* chmod the file an O_PATH fd holds (fchmod refuses O_PATH fds); the magic
 * link leads to that very inode, never through a symlink. */
static int chmod_pinned(int pathfd, mode_t mode)
{
    char proc[40];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pathfd);
    return chmod(proc, mode);
}

/* Open folder `name` of level `from` for a new level fd, making room in
 * the budget first. The remover makes a folder it may not open 0700 (and
 * says so in *chmodded). -1 with errno: ELOOP or ENOTDIR when name is not
 * a folder (any more). */
static int open_dir(walker *w, size_t from, const char *name, bool *chmodded)
{
    while (w->nopen >= w->fd_cap && evict(w, from))
        ;
    int fd = open_from(w, from, name, DIR_FLAGS);
    if (fd >= 0 || errno != EACCES || !w->remove)
        return fd;
    cleanup_close int pfd = open_from(w, from, name, O_PATH | O_NOFOLLOW);
    struct stat st;
    if (pfd < 0 || fstat(pfd, &st) < 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    if (chmod_pinned(pfd, (st.st_mode & 07777) | 0700) < 0) {
        errno = EACCES;
        return -1;
    }
    if (chmodded)
        *chmodded = true;
    return openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* Give level j an fd again, reopening from its nearest open ancestor one
 * name at a time, each level checked to be the folder it was. Returns
 * NONE, or the first level that could not be reopened (with *e = 0 when it
 * is gone or another folder, else the errno). */
static size_t reopen(walker *w, size_t j, int *e)
{
    size_t i = 0;
    for (size_t k = w->nopen; k-- > 0;)
        if (w->open[k] < j) {
            i = w->open[k] + 1;
            break;
        }
    for (; i <= j && w->lv[j].fd < 0; i++) {
        level *l = &w->lv[i];
        int fd = open_dir(w, i ? i - 1 : NONE, l->name, NULL);
        struct stat st;
        *e = fd < 0 && errno != ENOENT && errno != ELOOP && errno != ENOTDIR ? errno : 0;
        if (fd >= 0 && (fstat(fd, &st) < 0 || st.st_dev != l->dev || st.st_ino != l->ino)) {
            close(fd);
            fd = -1;
        }
        if (fd < 0)
            return i;
        open_add(w, i, fd);
    }
    return NONE;
}

/* --------------------------------------------------------- the levels -- */

/* Read every name of l's folder, from the start. -1 with errno. */
static int read_names(level *l)
{
    l->pos = 0;
    return sp_dir_read(&l->names, l->fd, SP_DIR_UNSORTED, 0);
}

static level *push(walker *w, int fd, const struct stat *st, const char *name)
{
    if (w->n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 64;
        w->lv = sp_xrealloc(w->lv, w->cap * sizeof(*w->lv));
    }
    level *l = &w->lv[w->n++];
    memset(l, 0, sizeof(*l));
    l->dev = st->st_dev;
    l->ino = st->st_ino;
    l->st = *st;
    l->name = sp_xstrdup(name);
    l->path_len = w->path.len;
    open_add(w, w->n - 1, fd);
    return l;
}

static void pop(walker *w)
{
    level *l = &w->lv[w->n - 1];
    if (w->soft && w->soft_in == w->n - 1) {
        sp_error_free(w->soft);
        w->soft = NULL;
    }
    if (l->fd >= 0)
        open_drop(w, w->n - 1);
    free(l->name);
    sp_dirnames_dispose(&l->names);
    w->n--;
    if (w->n) {
        w->lv[w->n - 1].failed |= l->failed;
        path_cut(w, w->lv[w->n - 1].path_len);
    } else {
        path_cut(w, 0);
    }
}

static int call(walker *w, int when, int pfd, const char *name, const struct stat *st, size_t depth,
                int fd)
{
    sp_tree_entry e = {pfd, name, w->path.data, st, (unsigned)depth, fd};
    return w->fn(&e, when, w->ctx, w->err);
}

/* ---------------------------------------------------------- the walk -- */

/* Handle entry `name` of level `from` (NONE: the start, in the caller's
 * dirfd): PRE, or unlink; a folder to descend into becomes the new top. */
static int visit(walker *w, size_t from, const char *name, unsigned char type)
{
    int pfd = parent_fd(w, from);
    size_t base = w->path.len, depth = from == NONE ? 0 : from + 1;
    if (base)
        sp_buf_addc(&w->path, '/');
    if (from != NONE || strcmp(name, ".") != 0)
        sp_buf_adds(&w->path, name);
    int r = 0;
    for (int look = 0;; look++) {
        if (look == TREE_LOOKS) {
            /* The remover tries again when the parent's rmdir finds the
             * entry still there (and reports this if that fails too). */
            if (w->remove && from != NONE) {
                sp_error_free(w->soft);
                w->soft = error_at(w, w->path.len, 0, NULL);
                w->soft_in = from;
            } else {
                r = fail(w, from, 0, NULL);
            }
            break;
        }
        /* d_type (or an open that just failed) says not a folder: one
         * unlink, no stat; it may be wrong, then we look. */
        if (w->remove && from != NONE && type != DT_DIR && type != DT_UNKNOWN) {
            if (unlinkat(pfd, name, 0) == 0 || errno == ENOENT)
                break;
            if (errno != EISDIR && errno != EPERM) {
                r = fail(w, from, errno, "delete");
                break;
            }
            type = DT_UNKNOWN;
        }
        struct stat st;
        if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT || (from == NONE && !w->remove))
                r = fail(w, from, errno, "stat");
            break;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (!w->remove) {
                r = call(w, SP_TREE_PRE, pfd, name, &st, depth, -1);
                break;
            }
            if (from == NONE && w->keep_root) {
                r = fail(w, from, ENOTDIR, "delete");
                break;
            }
            if (unlinkat(pfd, name, 0) == 0 || errno == ENOENT)
                break;
            if (errno != EISDIR) {
                r = fail(w, from, errno, "delete");
                break;
            }
            continue; /* a folder now */
        }
        bool chmodded = false;
        int fd = open_dir(w, from, name, &chmodded);
        if (fd < 0) {
            /* Swapped for something else: look again (the remover first
             * tries to unlink it as the non-folder it now is). */
            if (errno == ELOOP || errno == ENOTDIR) {
                type = DT_LNK;
                continue;
            }
            if (errno != ENOENT || (from == NONE && !w->remove))
                r = fail(w, from, errno, "open folder");
            break;
        }
        mode_t was = st.st_mode;
        if (fstat(fd, &st) < 0) {
            r = fail(w, from, errno, "stat");
            close(fd);
            break;
        }
        /* Entries go only from a folder we may write and search. */
        if (w->remove && (st.st_mode & 0700) != 0700 &&
            fchmod(fd, (st.st_mode & 07777) | 0700) == 0)
            chmodded = true;
        if (!w->remove) {
            r = call(w, SP_TREE_PRE, pfd, name, &st, depth, fd);
            if (r < 0 || r == SP_TREE_SKIP) {
                close(fd);
                r = r < 0 ? r : 0;
                break;
            }
        }
        level *l = push(w, fd, &st, name);
        if (chmodded && from == NONE) {
            l->chmodded = true;
            l->orig_mode = was;
        }
        if (read_names(l) < 0)
            return fail(w, w->n - 1, errno, "list folder");
        return 0;
    }
    path_cut(w, base);
    return r < 0 ? r : 0;
}

/* The remover gives up on level k, still not empty after TREE_ATTEMPTS
 * reads: because of an entry that kept changing in it, or else because it
 * kept gaining entries. */
static void fail_not_empty(walker *w, size_t k, int e)
{
    size_t parent = k ? k - 1 : NONE;
    if (w->soft && w->soft_in == k) {
        report(w, parent, w->soft);
        w->soft = NULL;
        return;
    }
    fail(w, parent, e, "delete");
}

/* The remover, at the end of the start folder it keeps: done once a new
 * read finds it empty (0 and *again when it is not, for another round). */
static void keep_root_done(walker *w, level *l, bool *again)
{
    if (!l->failed) {
        if (read_names(l) < 0) {
            fail(w, 0, errno, "list folder");
        } else if (l->names.n) {
            if (++l->attempts < TREE_ATTEMPTS) {
                *again = true;
                return;
            }
            fail_not_empty(w, 0, ENOTEMPTY);
        }
    }
    if (l->chmodded)
        (void)fchmod(l->fd, l->orig_mode & 07777);
}

/* The remover, at the end of a folder: remove it, or read it again when
 * it gained entries meanwhile (*again). */
static void rmdir_level(walker *w, size_t k, int pfd, bool *again)
{
    level *l = &w->lv[k];
    size_t parent = k ? k - 1 : NONE;
    if (l->failed)
        return;
    struct stat now;
    if (fstatat(pfd, l->name, &now, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno != ENOENT)
            fail(w, parent, errno, "stat");
        return;
    }
    /* Moved away and something else put in its place (before the check or
     * after it): the parent's rmdir finds the newcomer and reads the
     * parent again. */
    bool replaced = now.st_dev != l->dev || now.st_ino != l->ino;
    if (!replaced) {
        if (sp_tree_test_before_rmdir)
            sp_tree_test_before_rmdir(pfd, l->name);
        if (unlinkat(pfd, l->name, AT_REMOVEDIR) == 0 || errno == ENOENT)
            return;
        replaced = errno == ENOTDIR;
    }
    if (replaced) {
        if (k == 0)
            fail(w, parent, 0, NULL);
        return;
    }
    if ((errno == ENOTEMPTY || errno == EEXIST) && ++l->attempts < TREE_ATTEMPTS) {
        if (read_names(l) == 0) {
            *again = true;
            return;
        }
        fail(w, parent, errno, "list folder");
        return;
    }
    if (errno == ENOTEMPTY || errno == EEXIST)
        fail_not_empty(w, k, errno);
    else
        fail(w, parent, errno, "delete");
}

/* The top folder's entries are all handled: POST it (walker) or remove it
 * (remover), then pop it. Its parent must have an fd for that. */
static int finish(walker *w)
{
    size_t k = w->n - 1;
    if (k) {
        int e = 0;
        size_t bad = reopen(w, k - 1, &e);
        if (bad != NONE) {
            int r =
                fail_at(w, bad ? bad - 1 : NONE, w->lv[bad].path_len, e, e ? "open folder" : NULL);
            if (r < 0)
                return r;
            /* Nothing below it can be reached: go on above it. */
            while (w->n > bad)
                pop(w);
            return 0;
        }
    }
    level *l = &w->lv[k];
    int pfd = k ? w->lv[k - 1].fd : w->dirfd;
    bool again = false;
    int r = 0;
    if (w->remove && k == 0 && w->keep_root) {
        keep_root_done(w, l, &again);
    } else if (w->remove) {
        rmdir_level(w, k, pfd, &again);
    } else {
        struct stat now;
        if (fstatat(pfd, l->name, &now, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT)
                r = fail(w, NONE, errno, "stat");
        } else if (now.st_dev != l->dev || now.st_ino != l->ino) {
            r = fail(w, NONE, 0, NULL);
        } else {
            r = call(w, SP_TREE_POST, pfd, l->name, &l->st, k, l->fd);
        }
    }
    if (again)
        return 0;
    pop(w);
    return r < 0 ? r : 0;
}

static int run(walker *w, const char *name)
{
    int r = visit(w, NONE, name, DT_UNKNOWN);
    while (r >= 0 && w->n > 0) {
        level *top = &w->lv[w->n - 1];
        if (top->pos < top->names.n) {
            unsigned char type = sp_dirnames_type(&top->names, top->pos);
            const char *child = sp_dirnames_name(&top->names, top->pos);
            top->pos++;
            r = visit(w, w->n - 1, child, type);
        } else {
            r = finish(w);
        }
    }
    while (w->n)
        pop(w);
    return r;
}

static int tree_run(int dirfd, const char *name, sp_tree_fn fn, void *ctx, bool remove,
                    bool keep_root, sp_error **err)
{
    if (!name || !*name || strchr(name, '/') || strcmp(name, "..") == 0)
        return sp_err_set(err, SP_EINVAL, 0, "not one path component: %s", name ? name : "(null)");
    walker w = {.dirfd = dirfd, .fn = fn, .ctx = ctx, .remove = remove, .keep_root = keep_root};
    w.fd_cap = TREE_MAX_FDS;
    w.err = err;
    sp_buf_grow(&w.path, 0);
    int r = run(&w, name);
    free(w.lv);
    sp_buf_dispose(&w.path);
    sp_error_free(w.soft);
    if (w.first) {
        r = w.first->code;
        if (err) {
            sp_error_free(*err);
            *err = w.first;
        } else {
            sp_error_free(w.first);
        }
    }
    return r;
}

int sp_tree_walk(int dirfd, const char *name, sp_tree_fn fn, void *ctx, sp_error **err)
{
    if (!fn)
        return sp_err_set(err, SP_EINVAL, 0, "tree walk without a callback");
    return tree_run(dirfd, name, fn, ctx, false, false, err);
}

int sp_tree_remove(int dirfd, const char *name, unsigned flags, sp_error **err)
{
    bool keep = (flags & SP_TREE_KEEP_ROOT) || (name && strcmp(name, ".") == 0);
    return tree_run(dirfd, name, NULL, NULL, true, keep, err);
}
