/* A sandbox's baseline, and applying the workspace's changes back to a
 * host folder (sandpod/apply.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "dir.h"
#include "fdtree.h"
#include "apply_internal.h"
#include "sandbox_internal.h"
#include "sandpod/apply.h"
#include "sandpod/mount_filter.h"

int sp_sandbox_baseline(sp_snapshot **out, const sp_sandbox *sb, sp_snapstore *s, sp_error **err)
{
    *out = NULL;
    sp_error *e = NULL;
    int r = s ? sp_snapshot_get(out, s, SP_SANDBOX_ORIGIN_TAG, &e) : SP_ENOTFOUND;
    if (r == SP_ENOTFOUND && s) {
        sp_error_free(e);
        e = NULL;
        r = sp_snapshot_get(out, s, SP_SANDBOX_BASELINE_TAG, &e);
    }
    if (r == SP_ENOTFOUND) {
        sp_error_free(e);
        return sp_err_set(err, SP_ENOTFOUND, 0,
                          "sandbox %s has no baseline snapshot (tagged '%s'): it was made before "
                          "sandpod took one at create; name a snapshot instead",
                          sp_sandbox_name(sb), SP_SANDBOX_BASELINE_TAG);
    }
    return r < 0 ? sp_err_give(err, e, r) : r;
}

/* ------------------------------------------------------------- apply -- */

enum { DEFAULT_MAX_FILE = 256u << 20, DEFAULT_MAX_FILES = 200000 };
#define DEFAULT_MAX_BYTES (8ull << 30)

const char *sp_apply_action_name(sp_apply_action a)
{
    return a == SP_APPLY_ADD ? "add" : a == SP_APPLY_MODIFY ? "modify" : "delete";
}

const char *sp_apply_hold_name(sp_apply_hold h)
{
    switch (h) {
    case SP_APPLY_HOLD_VCS:
        return "version-control";
    case SP_APPLY_HOLD_REVIEW:
        return "review";
    case SP_APPLY_HOLD_LINK_OUT:
        return "link-out";
    case SP_APPLY_HOLD_SPECIAL:
        return "special";
    case SP_APPLY_HOLD_KEEPS:
        return "keeps-held";
    default:
        return "none";
    }
}

const char *sp_apply_hold_why(sp_apply_hold h)
{
    switch (h) {
    case SP_APPLY_HOLD_VCS:
        return "version-control data: git runs what its config and hooks say; never applied";
    case SP_APPLY_HOLD_REVIEW:
        return "configuration host tools act on; review it, then --allow-path PATTERN";
    case SP_APPLY_HOLD_LINK_OUT:
        return "a symlink out of the host folder; --allow-links-out writes it";
    case SP_APPLY_HOLD_SPECIAL:
        return "a fifo, socket or device; never applied";
    case SP_APPLY_HOLD_KEEPS:
        return "a deleted folder that keeps held-back or filtered entries; it stays";
    default:
        return "";
    }
}

void sp_apply_result_free(sp_apply_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_changes; i++) {
        free(r->changes[i].path);
        free(r->changes[i].target);
    }
    for (size_t i = 0; i < r->n_conflicts; i++) {
        free(r->conflicts[i].path);
        free(r->conflicts[i].reason);
    }
    for (size_t i = 0; i < r->n_held; i++) {
        free(r->held[i].path);
        free(r->held[i].detail);
    }
    free(r->changes);
    free(r->conflicts);
    free(r->held);
    free(r->to);
    free(r->from);
    free(r->patch);
    free(r->snapshot);
    free(r->commit);
    free(r);
}

/* Grow a result array by one, doubling: apply is linear in its changes. */
#define PUSH(arr, n, cap)                                                                          \
    ((n) == (cap)                                                                                  \
         ? ((cap) = (cap) ? (cap)*2 : 16, (arr) = sp_xrealloc((arr), (cap) * sizeof(*(arr))))      \
         : (arr),                                                                                  \
     &(arr)[(n)++])

/* The host folder: its root fd, and a trash folder in it for temporary
 * names and for what is replaced or removed until the end. */
struct host {
    int root;
    int trash;
    char trash_name[64];
    unsigned seq;
    unsigned umask;
};

/* What was done, to undo it in reverse on a failure. */
enum undo_op { U_CREATED, U_MOVED, U_MKDIR, U_RMDIR, U_CHMOD };
struct undo {
    enum undo_op op;
    char *path;     /* relative to the host root */
    char trash[24]; /* U_MOVED: where the old entry went */
    unsigned mode;  /* U_RMDIR, U_CHMOD: the old bits */
};

/* Open the parent folder of `path` beneath the host root without
 * following a symlink anywhere; *leaf points into path. */
static int open_parent(const struct host *h, const char *path, const char **leaf)
{
    int fd = dup(h->root);
    const char *p = path;
    for (;;) {
        const char *slash = strchr(p, '/');
        if (!slash)
            break;
        char comp[NAME_MAX + 1];
        size_t len = (size_t)(slash - p);
        if (len == 0 || len > NAME_MAX || (len == 1 && p[0] == '.') ||
            (len == 2 && p[0] == '.' && p[1] == '.')) {
            close(fd);
            errno = EINVAL;
            return -1;
        }
        memcpy(comp, p, len);
        comp[len] = '\0';
        int next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(fd);
        if (next < 0) {
            errno = e;
            return -1;
        }
        fd = next;
        p = slash + 1;
    }
    if (!*p || strcmp(p, ".") == 0 || strcmp(p, "..") == 0 || strlen(p) > NAME_MAX) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    *leaf = p;
    return fd;
}

/* ------------------------------------------------------------ rules -- */

static bool name_is(const char *p, size_t len, const char *w)
{
    return strlen(w) == len && strncasecmp(p, w, len) == 0;
}

/* The length of the prefix of rel up to and including the first
 * component for which `pred` holds, or 0. */
static size_t first_component(const char *rel, bool (*pred)(const char *, size_t))
{
    for (const char *p = rel;;) {
        size_t len = strcspn(p, "/");
        if (pred(p, len))
            return (size_t)(p - rel) + len;
        if (!p[len])
            return 0;
        p += len + 1;
    }
}

/* Version-control folders: what their tools read from them they run
 * (hooks, core.fsmonitor, filters). Any case: a case-insensitive host
 * filesystem would take `.GIT` for `.git`. */
static bool is_vcs(const char *p, size_t len)
{
    return name_is(p, len, ".git") || name_is(p, len, ".hg") || name_is(p, len, ".svn") ||
           name_is(p, len, ".jj") || name_is(p, len, ".bzr");
}

/* Files and folders the host's tools act on when they meet the project. */
static bool is_review(const char *p, size_t len)
{
    static const char *const names[] = {".gitattributes", ".gitmodules", ".lfsconfig",   ".envrc",
                                        ".vscode",        ".idea",       ".devcontainer"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (len == strlen(names[i]) && memcmp(p, names[i], len) == 0)
            return true;
    return false;
}

/* Whether a symlink at rel (relative to the host folder) with this
 * target leaves the host folder: absolute, or `..` above its root. */
static bool link_leaves(const char *rel, const char *target)
{
    if (target[0] == '/' || !target[0])
        return true;
    long depth = 0; /* of the link's folder */
    for (const char *s = strchr(rel, '/'); s; s = strchr(s + 1, '/'))
        depth++;
    for (const char *p = target; *p;) {
        size_t len = strcspn(p, "/");
        if (len == 2 && p[0] == '.' && p[1] == '.') {
            if (--depth < 0)
                return true;
        } else if (len && !(len == 1 && p[0] == '.')) {
            depth++;
        }
        p += len;
        while (*p == '/')
            p++;
    }
    return false;
}

/* --------------------------------------------------------------- items -- */

/* One changed path, with both sides' kind from the diff. */
struct item {
    char *path;      /* in the workspace */
    const char *rel; /* in the host folder (points into path) */
    bool has_old, has_new;
    sp_fs_type old_type, new_type;
    unsigned old_mode, new_mode;
    char *target; /* the new side's symlink target */
    sp_apply_hold hold;
    size_t hold_len; /* the held group's root: rel[0..hold_len) */
    bool filtered;
    bool already;
};

static void item_dispose(struct item *it)
{
    free(it->path);
    free(it->target);
}

static bool applies(const struct item *it)
{
    return !it->hold && !it->filtered;
}

static int read_side(sp_snapstore *s, const char *ref, const char *path, size_t max,
                     sp_snapshot_entry *e, bool *present, sp_error **err)
{
    sp_error *ee = NULL;
    int r = sp_snapshot_read_entry(e, s, ref, path, max, &ee);
    *present = r == 0;
    if (r == SP_ENOTFOUND) {
        sp_error_free(ee);
        return 0;
    }
    return r < 0 ? sp_err_give(err, ee, r) : r;
}

static void add_conflict(sp_apply_result *res, size_t *cap, const char *path, const char *reason)
{
    sp_apply_conflict *c = PUSH(res->conflicts, res->n_conflicts, *cap);
    c->path = sp_xstrdup(path);
    c->reason = sp_xstrdup(reason);
}

/* Whether the entry at (dfd, leaf) exists with this type. */
static bool has_at(int dfd, const char *leaf, mode_t type)
{
    struct stat st;
    return dfd >= 0 && fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
           (st.st_mode & S_IFMT) == type;
}

/* What the planner shares. */
struct planner {
    sp_snapstore *s;
    const char *from, *now;
    const char *subdir;
    struct host *host;
    size_t max;
    sp_apply_result *res;
    size_t cap_conflicts, cap_held;
    /* The folders above the item at hand and whether each looks like a
     * git directory on the new side or the host (tree order: a stack). */
    struct gd {
        char *rel;
        bool git;
    } * gd;
    size_t n_gd, cap_gd;
    int root_git; /* the host folder itself looks like a git directory: -1 not yet asked */
};

/* Whether `ws` (a folder of the new side, at `rel` on the host) holds
 * what makes git open a folder as a repository: HEAD, and objects/ or a
 * commondir file. Either side counts: what apply writes joins what the
 * host has. */
static bool looks_like_gitdir(struct planner *p, const char *ws, const char *rel)
{
    static const char *const need[] = {"HEAD", "objects", "commondir"};
    const char *leaf;
    cleanup_free char *probe = sp_xasprintf("%s/x", rel);
    /* rel's fd, or -1 */
    cleanup_close int hfd =
        strcmp(rel, ".") == 0 ? dup(p->host->root) : open_parent(p->host, probe, &leaf);
    bool there[3];
    for (size_t i = 0; i < 3; i++) {
        cleanup_free char *path =
            strcmp(ws, ".") ? sp_xasprintf("%s/%s", ws, need[i]) : sp_xstrdup(need[i]);
        sp_snapshot_entry e;
        bool dir = i == 1;
        there[i] = (sp_snapshot_stat_entry(&e, p->s, p->now, path, NULL) == 0 &&
                    e.type == (dir ? SP_FS_DIR : SP_FS_FILE)) ||
                   has_at(hfd, need[i], dir ? S_IFDIR : S_IFREG);
    }
    return there[0] && (there[1] || there[2]);
}

/* The length of the first folder above (or at, for a folder) rel that
 * looks like a git directory, or 0. */
static size_t gitdir_above(struct planner *p, const struct item *it)
{
    size_t depth = 0;
    size_t found = 0;
    for (const char *q = it->rel;; depth++) {
        size_t len = strcspn(q, "/");
        bool last = !q[len];
        if (last && !(it->has_new && it->new_type == SP_FS_DIR))
            break;
        size_t plen = (size_t)(q - it->rel) + len;
        /* The stack entry at this depth, if it is this folder. */
        if (depth < p->n_gd &&
            !(strlen(p->gd[depth].rel) == plen && memcmp(p->gd[depth].rel, it->rel, plen) == 0)) {
            for (size_t k = depth; k < p->n_gd; k++)
                free(p->gd[k].rel);
            p->n_gd = depth;
        }
        if (depth == p->n_gd) {
            struct gd *g = PUSH(p->gd, p->n_gd, p->cap_gd);
            g->rel = sp_xstrndup(it->rel, plen);
            size_t ws_extra = (size_t)(it->rel - it->path);
            cleanup_free char *ws = sp_xstrndup(it->path, ws_extra + plen);
            g->git = looks_like_gitdir(p, ws, g->rel);
        }
        if (p->gd[depth].git && !found)
            found = plen;
        if (last)
            break;
        q += len + 1;
    }
    return found;
}

/* The names that make a folder a git directory, or that git reads from
 * one: at the root of a host folder that (with what apply writes) looks
 * like a git directory, these are held back. */
static bool is_gitdir_part(const char *p, size_t len)
{
    static const char *const names[] = {"HEAD",      "config",  "objects", "refs",
                                        "commondir", "hooks",   "info",    "packed-refs",
                                        "worktrees", "modules", "index"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (len == strlen(names[i]) && memcmp(p, names[i], len) == 0)
            return true;
    return false;
}

/* Decide whether an item is held back, and why. */
static int judge(struct planner *p, struct item *it, sp_mount_filter *allow, bool links_out,
                 sp_error **err)
{
    size_t n;
    if ((n = first_component(it->rel, is_vcs)) || (n = gitdir_above(p, it))) {
        it->hold = SP_APPLY_HOLD_VCS;
        it->hold_len = n;
        return 0;
    }
    size_t first = strcspn(it->rel, "/");
    if (is_gitdir_part(it->rel, first)) {
        if (p->root_git < 0) {
            size_t ws_len = (size_t)(it->rel - it->path);
            cleanup_free char *ws = ws_len ? sp_xstrndup(it->path, ws_len - 1) : sp_xstrdup(".");
            p->root_git = looks_like_gitdir(p, ws, ".");
        }
        if (p->root_git) {
            it->hold = SP_APPLY_HOLD_VCS;
            it->hold_len = first;
            return 0;
        }
    }
    if ((it->has_new && it->new_type == SP_FS_OTHER) ||
        (!it->has_new && it->old_type == SP_FS_OTHER)) {
        it->hold = SP_APPLY_HOLD_SPECIAL;
        it->hold_len = strlen(it->rel);
        return 0;
    }
    if ((n = first_component(it->rel, is_review)) &&
        !(allow && sp_mount_filter_selects(allow, it->rel, false))) {
        it->hold = SP_APPLY_HOLD_REVIEW;
        it->hold_len = n;
        return 0;
    }
    if (it->has_new && it->new_type == SP_FS_SYMLINK) {
        sp_snapshot_entry e;
        bool present;
        int r = read_side(p->s, p->now, it->path, PATH_MAX, &e, &present, err);
        if (r < 0)
            return r;
        it->target = present ? steal_pointer(&e.data) : sp_xstrdup("");
        sp_snapshot_entry_dispose(&e);
        if (!links_out && link_leaves(it->rel, it->target)) {
            it->hold = SP_APPLY_HOLD_LINK_OUT;
            it->hold_len = strlen(it->rel);
        }
    }
    return 0;
}

/* Compare a host file with a side's content as it streams by. */
struct cmp {
    int fd;
    bool differs;
    int rerr; /* errno of a failed read of the host file */
};

static int cmp_piece(void *ud, const void *data, size_t len)
{
    struct cmp *c = ud;
    char buf[65536];
    const char *d = data;
    while (len) {
        size_t want = len < sizeof(buf) ? len : sizeof(buf);
        ssize_t n = read(c->fd, buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            c->rerr = errno;
            return SP_ERROR;
        }
        if (n == 0 || memcmp(buf, d, (size_t)n) != 0) {
            c->differs = true;
            return SP_ERROR;
        }
        d += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Compare what the host holds at rel with one side of the item: type,
 * the executable bits (what git tracks of a mode), and the bytes, read
 * from the host in pieces against the side's content. */
static int host_same(struct planner *p, const struct item *it, bool new_side, bool *same,
                     sp_error **err)
{
    *same = false;
    bool want = new_side ? it->has_new : it->has_old;
    sp_fs_type type = new_side ? it->new_type : it->old_type;
    unsigned mode = new_side ? it->new_mode : it->old_mode;
    const char *leaf;
    cleanup_close int dfd = open_parent(p->host, it->rel, &leaf);
    struct stat st;
    bool hp = dfd >= 0 && fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!hp && errno != ENOENT && errno != ENOTDIR && errno != ELOOP)
        return sp_err_errno(err, errno, "read", it->rel);
    if (!hp || !want) {
        *same = hp == want;
        return 0;
    }
    sp_fs_type ht = S_ISDIR(st.st_mode)   ? SP_FS_DIR
                    : S_ISREG(st.st_mode) ? SP_FS_FILE
                    : S_ISLNK(st.st_mode) ? SP_FS_SYMLINK
                                          : SP_FS_OTHER;
    if (ht != type)
        return 0;
    if (ht == SP_FS_DIR || ht == SP_FS_OTHER) {
        *same = true;
        return 0;
    }
    if (ht == SP_FS_FILE && (st.st_mode & 0111) != (mode & 0111))
        return 0;
    if (ht == SP_FS_SYMLINK) {
        sp_snapshot_entry e;
        bool present;
        int r = read_side(p->s, new_side ? p->now : p->from, it->path, PATH_MAX, &e, &present, err);
        if (r < 0)
            return r;
        char buf[PATH_MAX + 1];
        ssize_t n = readlinkat(dfd, leaf, buf, sizeof(buf));
        *same = present && n >= 0 && (size_t)n == e.size && memcmp(buf, e.data, e.size) == 0;
        sp_snapshot_entry_dispose(&e);
        return 0;
    }
    sp_snapshot_entry e;
    int r = sp_snapshot_stat_entry(&e, p->s, new_side ? p->now : p->from, it->path, err);
    if (r < 0)
        return r;
    if (e.size > p->max)
        return sp_err_set(err, SP_ETOOBIG, 0, "%s: %zu bytes, over the limit of %zu", it->rel,
                          e.size, p->max);
    if (e.size != (size_t)st.st_size)
        return 0;
    struct cmp c = {.fd = openat(dfd, leaf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
    if (c.fd < 0)
        return sp_err_errno(err, errno, "read", it->rel);
    sp_error *ce = NULL;
    r = sp_snapshot_stream_entry(p->s, new_side ? p->now : p->from, it->path, cmp_piece, &c, &ce);
    char extra;
    /* Equal so far: the host file must also end where the side does. */
    bool ends = r == 0 && !c.differs && read(c.fd, &extra, 1) == 0;
    int rerr = c.rerr;
    close(c.fd);
    if (rerr) {
        sp_error_free(ce);
        return sp_err_errno(err, rerr, "read", it->rel);
    }
    if (r < 0 && !c.differs) {
        if (err)
            *err = ce;
        else
            sp_error_free(ce);
        return r;
    }
    sp_error_free(ce);
    *same = ends;
    return 0;
}

/* Compare the host with what the `from` side says it holds. */
static int check_host(struct planner *p, struct item *it, sp_error **err)
{
    bool same_old, same_new;
    int r = host_same(p, it, false, &same_old, err);
    if (r < 0)
        return r;
    if (same_old)
        return 0;
    /* A parent that is not a folder on the host. */
    const char *leaf;
    int dfd = open_parent(p->host, it->rel, &leaf);
    if (dfd < 0 && (errno == ENOTDIR || errno == ELOOP)) {
        add_conflict(p->res, &p->cap_conflicts, it->rel, "a parent on the host is not a folder");
        return 0;
    }
    bool hp = false;
    if (dfd >= 0) {
        struct stat st;
        hp = fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0;
        close(dfd);
    }
    if ((r = host_same(p, it, true, &same_new, err)) < 0)
        return r;
    if (same_new)
        it->already = true;
    else
        add_conflict(p->res, &p->cap_conflicts, it->rel,
                     !it->has_old ? "added on both sides"
                     : !hp        ? "deleted on the host"
                                  : "changed on the host");
    return 0;
}

struct commit {
    struct host *h;
    struct undo *log;
    size_t n;
};

static void log_push(struct commit *c, enum undo_op op, const char *path, const char *trash,
                     unsigned mode)
{
    c->log = sp_xrealloc(c->log, (c->n + 1) * sizeof(*c->log));
    struct undo *u = &c->log[c->n++];
    memset(u, 0, sizeof(*u));
    u->op = op;
    u->path = sp_xstrdup(path);
    if (trash)
        snprintf(u->trash, sizeof(u->trash), "%s", trash);
    u->mode = mode;
}

/* Move the host entry at path (not a folder) into the trash. */
static int move_away(struct commit *c, int dfd, const char *leaf, const char *path)
{
    char t[24];
    snprintf(t, sizeof(t), "o%u", c->h->seq++);
    if (renameat(dfd, leaf, c->h->trash, t) < 0)
        return -1;
    log_push(c, U_MOVED, path, t, 0);
    return 0;
}

/* Remove what the host holds at path: a folder (empty by now) or anything else. */
static int remove_host(struct commit *c, const char *path)
{
    const char *leaf;
    cleanup_close int dfd = open_parent(c->h, path, &leaf);
    if (dfd < 0)
        return errno == ENOENT ? 0 : -1;
    struct stat st;
    if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return move_away(c, dfd, leaf, path);
    if (unlinkat(dfd, leaf, AT_REMOVEDIR) < 0)
        return -1;
    log_push(c, U_RMDIR, path, NULL, st.st_mode & 07777);
    return 0;
}

/* The owner an entry written at (dfd, leaf) takes when we are root: the
 * replaced entry's, else its folder's. Never root's by accident in
 * somebody else's project. */
static void take_owner(int fd, int dfd, const char *leaf, bool is_link, const struct stat *old)
{
    if (geteuid() != 0)
        return;
    struct stat st;
    if (old)
        st = *old;
    else if (fstat(dfd, &st) < 0)
        return;
    if (is_link)
        (void)fchownat(dfd, leaf, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW);
    else
        (void)fchown(fd, st.st_uid, st.st_gid);
}

/* Write a file's content as it streams from the new side. */
struct wr {
    int fd;
    int werr; /* errno of a failed write */
};

static int write_piece(void *ud, const void *data, size_t len)
{
    struct wr *w = ud;
    const char *d = data;
    while (len) {
        ssize_t n = write(w->fd, d, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            w->werr = errno;
            return SP_ERROR;
        }
        d += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Make the host hold the new side of an item; a file's content streams
 * from the store, never whole in memory. */
static int write_host(struct commit *c, sp_snapstore *s, const char *now, const struct item *it,
                      unsigned mode, sp_error **err)
{
    const char *leaf;
    cleanup_close int dfd = open_parent(c->h, it->rel, &leaf);
    if (dfd < 0)
        return sp_err_errno(err, errno, "apply", it->rel);
    struct stat st;
    bool present = fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!present && errno != ENOENT)
        return sp_err_errno(err, errno, "apply", it->rel);
    if (it->new_type == SP_FS_DIR) {
        if (!present) {
            if (mkdirat(dfd, leaf, mode) < 0)
                return sp_err_errno(err, errno, "apply", it->rel);
            log_push(c, U_MKDIR, it->rel, NULL, 0);
            cleanup_close int fd =
                openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0 || fchmod(fd, mode) < 0)
                return sp_err_errno(err, errno, "apply", it->rel);
            take_owner(fd, dfd, leaf, false, NULL);
            return 0;
        }
        if ((st.st_mode & 07777) == mode)
            return 0;
        cleanup_close int fd = openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fchmod(fd, mode) < 0)
            return sp_err_errno(err, errno, "apply", it->rel);
        log_push(c, U_CHMOD, it->rel, NULL, st.st_mode & 07777);
        return 0;
    }
    char t[24];
    snprintf(t, sizeof(t), "n%u", c->h->seq++);
    if (it->new_type == SP_FS_SYMLINK) {
        if (symlinkat(it->target, c->h->trash, t) < 0)
            return sp_err_errno(err, errno, "apply", it->rel);
        struct stat parent;
        if (present)
            take_owner(-1, c->h->trash, t, true, &st);
        else if (fstat(dfd, &parent) == 0)
            take_owner(-1, c->h->trash, t, true, &parent);
    } else {
        cleanup_close int fd =
            openat(c->h->trash, t, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
            return sp_err_errno(err, errno, "apply", it->rel);
        struct wr w = {fd, 0};
        int r = sp_snapshot_stream_entry(s, now, it->path, write_piece, &w, err);
        if (w.werr)
            return sp_err_errno(err, w.werr, "apply", it->rel);
        if (r < 0)
            return r;
        if (fchmod(fd, mode) < 0)
            return sp_err_errno(err, errno, "apply", it->rel);
        /* The owner a new file takes is its destination folder's. */
        struct stat parent;
        if (present)
            take_owner(fd, dfd, leaf, false, &st);
        else if (fstat(dfd, &parent) == 0)
            take_owner(fd, dfd, leaf, false, &parent);
    }
    if (present && move_away(c, dfd, leaf, it->rel) < 0)
        return sp_err_errno(err, errno, "apply", it->rel);
    if (renameat2(c->h->trash, t, dfd, leaf, RENAME_NOREPLACE) < 0)
        return sp_err_errno(err, errno, "apply", it->rel);
    log_push(c, U_CREATED, it->rel, NULL, 0);
    return 0;
}

/* Undo the log in reverse, as far as it goes. */
static void undo_all(struct commit *c)
{
    for (size_t i = c->n; i-- > 0;) {
        const struct undo *u = &c->log[i];
        const char *leaf;
        int dfd = open_parent(c->h, u->path, &leaf);
        if (dfd < 0)
            continue;
        switch (u->op) {
        case U_CREATED:
            if (unlinkat(dfd, leaf, 0) < 0 && errno == EISDIR)
                unlinkat(dfd, leaf, AT_REMOVEDIR);
            break;
        case U_MOVED:
            renameat(c->h->trash, u->trash, dfd, leaf);
            break;
        case U_MKDIR:
            unlinkat(dfd, leaf, AT_REMOVEDIR);
            break;
        case U_RMDIR:
            mkdirat(dfd, leaf, u->mode & 0777);
            break;
        case U_CHMOD: {
            int fd = openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd >= 0) {
                fchmod(fd, u->mode);
                close(fd);
            }
            break;
        }
        }
        close(dfd);
    }
}

/* Empty and remove the trash folder. */
static void trash_remove(struct host *h)
{
    if (h->trash < 0)
        return;
    sp_dirnames names = SP_DIRNAMES_INIT;
    if (sp_dir_read(&names, h->trash, SP_DIR_UNSORTED, 0) == 0)
        for (size_t i = 0; i < names.n; i++)
            unlinkat(h->trash, sp_dirnames_name(&names, i), 0);
    sp_dirnames_dispose(&names);
    close(h->trash);
    h->trash = -1;
    unlinkat(h->root, h->trash_name, AT_REMOVEDIR);
}

static int commit_items(struct host *h, sp_snapstore *s, const char *now, struct item *v, size_t n,
                        sp_error **err)
{
    snprintf(h->trash_name, sizeof(h->trash_name), ".sandpod-apply.%ld", (long)getpid());
    if (mkdirat(h->root, h->trash_name, 0700) < 0)
        return sp_err_errno(err, errno, "mkdir", h->trash_name);
    h->trash = openat(h->root, h->trash_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (h->trash < 0) {
        int r = sp_err_errno(err, errno, "open", h->trash_name);
        unlinkat(h->root, h->trash_name, AT_REMOVEDIR);
        return r;
    }
    struct commit c = {h, NULL, 0};
    int r = 0;
    /* Removals first, deepest first: a folder's contents go before it. */
    for (size_t i = n; i-- > 0 && r == 0;) {
        struct item *it = &v[i];
        if (!applies(it) || it->already ||
            (it->has_new && it->has_old && it->old_type == it->new_type))
            continue;
        if (remove_host(&c, it->rel) < 0)
            r = sp_err_errno(err, errno, "apply", it->rel);
    }
    for (size_t i = 0; i < n && r == 0; i++) {
        struct item *it = &v[i];
        if (applies(it) && !it->already && it->has_new)
            r = write_host(&c, s, now, it, it->new_mode & 0777 & ~h->umask, err);
    }
    if (r < 0)
        undo_all(&c);
    for (size_t i = 0; i < c.n; i++)
        free(c.log[i].path);
    free(c.log);
    trash_remove(h);
    return r;
}

/* The workspace folder whose changes go to the host, the host folder,
 * and the mount that joined them (NULL when the caller named others). */
static int pick_target(const sp_sandbox *sb, const sp_sandbox_apply_opts *o, char **to,
                       char **subdir, const sp_sandbox_mount **mount, sp_error **err)
{
    size_t nm = 0;
    const sp_sandbox_mount *m = sp_sandbox_mounts(sb, &nm);
    const char *dst = o->subdir ? o->subdir : nm ? m[0].mount_path : ".";
    const char *dir = o->to ? o->to : nm ? m[0].host_path : NULL;
    if (!dir)
        return sp_err_set(err, SP_EINVAL, 0,
                          "sandbox %s was made without a mount: name the host folder to write",
                          sp_sandbox_name(sb));
    while (dst[0] == '.' && dst[1] == '/')
        dst += 2;
    size_t len = strlen(dst);
    while (len > 1 && dst[len - 1] == '/')
        len--;
    *subdir = sp_xstrndup(dst, len);
    if (strcmp(*subdir, "") == 0) {
        free(*subdir);
        *subdir = sp_xstrdup(".");
    }
    *to = realpath(dir, NULL);
    if (!*to)
        return sp_err_errno(err, errno, "host folder", dir);
    *mount = NULL;
    for (size_t i = 0; i < nm && !*mount; i++)
        if (strcmp(m[i].mount_path, *subdir) == 0 && strcmp(m[i].host_path, *to) == 0)
            *mount = &m[i];
    return 0;
}

/* The path of a workspace change in the host folder, or NULL when it is
 * outside `subdir` (or is subdir itself). */
static const char *under(const char *path, const char *subdir)
{
    if (strcmp(subdir, ".") == 0)
        return path;
    size_t n = strlen(subdir);
    return strncmp(path, subdir, n) == 0 && path[n] == '/' ? path + n + 1 : NULL;
}

static bool removes_dir(const struct item *it)
{
    return it->has_old && it->old_type == SP_FS_DIR && (!it->has_new || it->new_type != SP_FS_DIR);
}

/* Whether b lies below folder a (both relative to the host folder). */
static bool below(const char *a, const char *b)
{
    size_t n = strlen(a);
    return strncmp(a, b, n) == 0 && b[n] == '/';
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A folder the sandbox deleted goes only when everything the host holds
 * in it goes too. Its items are v[i+1 .. end) (tree order keeps them
 * together). An entry the apply keeps (held back, filtered, or a
 * deleted folder that itself stays) keeps the folder; an entry the host
 * made that the mount would not have brought in (ignored by git, say)
 * too; anything else the host added is a conflict. */
static void check_dir_emptied(struct planner *p, sp_mount_filter *filter, struct item *v, size_t n,
                              size_t i)
{
    struct item *dir = &v[i];
    size_t end = i + 1;
    bool keeps = false;
    while (end < n && below(dir->rel, v[end].rel)) {
        if (!applies(&v[end]) && v[end].has_old)
            keeps = true;
        end++;
    }
    /* The names the apply removes from the folder itself. */
    size_t len = strlen(dir->rel), ng = 0;
    const char **gone = sp_xcalloc(end - i, sizeof(*gone));
    for (size_t j = i + 1; j < end; j++)
        if (applies(&v[j]) && v[j].has_old && !strchr(v[j].rel + len + 1, '/'))
            gone[ng++] = v[j].rel + len + 1;
    qsort(gone, ng, sizeof(*gone), name_cmp);
    const char *leaf;
    cleanup_close int dfd = open_parent(p->host, dir->rel, &leaf);
    int fd = dfd < 0 ? -1 : openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d && fd >= 0)
        close(fd);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
            strcmp(de->d_name, p->host->trash_name) == 0)
            continue;
        const char *key = de->d_name;
        if (bsearch(&key, gone, ng, sizeof(*gone), name_cmp))
            continue;
        cleanup_free char *path = sp_xasprintf("%s/%s", dir->rel, de->d_name);
        if (filter && !sp_mount_filter_selects(filter, path, de->d_type == DT_DIR))
            keeps = true;
        else
            add_conflict(p->res, &p->cap_conflicts, path,
                         "added on the host in a folder the sandbox deleted");
    }
    if (d)
        closedir(d);
    free(gone);
    if (keeps) {
        dir->hold = SP_APPLY_HOLD_KEEPS;
        dir->hold_len = strlen(dir->rel);
    }
}

static void add_change(sp_apply_result *res, size_t *cap, const struct item *it, unsigned umask_)
{
    sp_apply_change *ch = PUSH(res->changes, res->n_changes, *cap);
    memset(ch, 0, sizeof(*ch));
    ch->path = sp_xstrdup(it->rel);
    ch->action = !it->has_old ? SP_APPLY_ADD : !it->has_new ? SP_APPLY_DELETE : SP_APPLY_MODIFY;
    ch->type = it->has_new ? it->new_type : it->old_type;
    ch->mode = it->has_new ? it->new_mode & 0777 & ~umask_ : 0;
    ch->old_mode = it->has_old ? it->old_mode & 0777 : 0;
    ch->already = it->already;
    ch->target = it->target ? sp_xstrdup(it->target) : NULL;
}

/* List a held item, as one entry per held folder. */
static void add_held(struct planner *p, const struct item *it)
{
    sp_apply_result *res = p->res;
    res->skipped++;
    for (size_t k = res->n_held, seen = 0; k-- > 0 && seen < 4; seen++) {
        sp_apply_held *h = &res->held[k];
        if (h->why == it->hold && strlen(h->path) == it->hold_len &&
            memcmp(h->path, it->rel, it->hold_len) == 0) {
            h->count++;
            return;
        }
    }
    sp_apply_held *h = PUSH(res->held, res->n_held, p->cap_held);
    h->path = sp_xstrndup(it->rel, it->hold_len);
    h->why = it->hold;
    h->count = 1;
    h->detail = it->hold == SP_APPLY_HOLD_LINK_OUT && it->target ? sp_xstrdup(it->target) : NULL;
}

/* The caller's umask, without changing it (umask(2) would, for every
 * thread): Linux shows it in /proc/self/status. */
static unsigned current_umask(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    unsigned m = 022;
    if (f) {
        char line[256];
        while (fgets(line, sizeof(line), f))
            if (sscanf(line, "Umask: %o", &m) == 1)
                break;
        fclose(f);
    }
    return m & 0777;
}

/* A recorded mount as hydration's struct, for its filters. */
static void mount_of(sp_mount *m, const sp_sandbox_mount *sm)
{
    memset(m, 0, sizeof(*m));
    m->host_path = sm->host_path;
    m->mount_path = sm->mount_path;
    m->include = sm->include;
    m->exclude = sm->exclude;
    m->gitignore = sm->gitignore;
}

struct plan_opts {
    const sp_sandbox_mount *mount; /* whose filters apply, or NULL */
    sp_mount_filter *allow;        /* allow_paths, as includes */
    bool links_out;
    bool branch; /* a commit, not the work tree: the host's files do not matter */
    uint64_t max_files, max_bytes;
};

/* Collect the items, judge each, check the host for conflicts. */
static int plan(struct planner *p, const struct plan_opts *po, struct item **items, size_t *n_items,
                sp_error **err)
{
    sp_snapdiff *d = NULL;
    int r = sp_snapshot_diff(&d, p->s, p->from, p->now, NULL, err);
    if (r < 0)
        return r;
    struct item *v = d->n ? sp_xcalloc(d->n, sizeof(*v)) : NULL;
    size_t n = 0;
    for (size_t i = 0; i < d->n; i++) {
        const sp_snapshot_change *ch = &d->v[i];
        const char *rel = under(ch->path, p->subdir);
        if (!rel)
            continue;
        struct item *it = &v[n++];
        it->path = sp_xstrdup(ch->path);
        it->rel = it->path + (rel - ch->path);
        it->has_old = ch->kind != SP_CHANGE_ADDED;
        it->has_new = ch->kind != SP_CHANGE_DELETED;
        it->old_type = ch->old_type;
        it->new_type = ch->new_type;
        it->old_mode = ch->old_mode;
        it->new_mode = ch->new_mode;
    }
    sp_snapdiff_free(d);
    *items = v;
    *n_items = n;
    if (n > po->max_files)
        return sp_err_set(err, SP_ETOOBIG, 0,
                          "%zu changed paths, over the limit of %llu (--max-files); nothing "
                          "written",
                          n, (unsigned long long)po->max_files);
    sp_mount_filter *filter = NULL;
    if (po->mount) {
        sp_mount m;
        mount_of(&m, po->mount);
        if ((r = sp_mount_filter_new(&filter, &m, p->host->root, err)) < 0)
            return r;
    }
    uint64_t bytes = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        struct item *it = &v[i];
        if ((r = judge(p, it, po->allow, po->links_out, err)) < 0)
            break;
        if (!it->hold && filter)
            it->filtered = !sp_mount_filter_selects(
                filter, it->rel, (it->has_new ? it->new_type : it->old_type) == SP_FS_DIR);
    }
    /* A folder an include did not name is kept when something under it
     * is applied (items after it in tree order, the nearest first). */
    const struct item *next_applied = NULL;
    for (size_t i = n; i-- > 0 && r == 0;) {
        struct item *it = &v[i];
        if (it->filtered && it->has_new && it->new_type == SP_FS_DIR && next_applied &&
            below(it->rel, next_applied->rel))
            it->filtered = false;
        if (applies(it))
            next_applied = it;
    }
    for (size_t i = 0; i < n && r == 0; i++) {
        struct item *it = &v[i];
        if (!applies(it))
            continue;
        if (!po->branch && (r = check_host(p, it, err)) < 0)
            break;
        if (it->has_new && it->new_type == SP_FS_FILE && !it->already) {
            sp_snapshot_entry e;
            if ((r = sp_snapshot_stat_entry(&e, p->s, p->now, it->path, err)) < 0)
                break;
            if (e.size > p->max)
                r = sp_err_set(err, SP_ETOOBIG, 0, "%s: %zu bytes, over the limit of %zu", it->rel,
                               e.size, p->max);
            bytes += e.size;
        }
    }
    if (r == 0 && bytes > po->max_bytes)
        r = sp_err_set(err, SP_ETOOBIG, 0,
                       "%llu bytes of changed files, over the limit of %llu (--max-bytes); "
                       "nothing written",
                       (unsigned long long)bytes, (unsigned long long)po->max_bytes);
    /* Deepest first, so a folder sees what its sub-folders keep. */
    for (size_t i = n; i-- > 0 && r == 0 && !po->branch;)
        if (applies(&v[i]) && removes_dir(&v[i]) && !v[i].already)
            check_dir_emptied(p, filter, v, n, i);
    sp_mount_filter_free(filter);
    size_t cap_changes = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        if (v[i].hold)
            add_held(p, &v[i]);
        else if (v[i].filtered)
            p->res->filtered++;
        else
            add_change(p->res, &cap_changes, &v[i], p->host->umask);
    }
    return r;
}

/* The two states an apply compares and the store that holds them: the
 * sandbox's own (a local sandbox; `now` is a snapshot taken for the apply
 * and deleted after), or, for a sandbox on another engine, a private store
 * in its state folder that both are imported into from the peer's
 * archives (removed after). */
struct sides {
    sp_sandbox_snap *h; /* local */
    sp_snapstore *s;
    int state_fd; /* remote: the state folder, */
    char *tmp;    /* and the private folder's name in it */
    sp_snapshot *from, *now;
    char *from_id; /* remote: the peer's id of `from` */
    char *now_id;  /* remote: the peer's id of `now` (a named snapshot) */
    bool keep_now; /* `now` is the caller's snapshot: not deleted after */
};

static int local_sides(struct sides *sd, sp_sandbox *sb, const char *from, const char *snapshot,
                       sp_error **err)
{
    sp_snapstore_opts so = SP_SNAPSTORE_OPTS_INIT;
    so.no_create = true;
    sp_sandbox_snapshot_opts sso = SP_SANDBOX_SNAPSHOT_OPTS_INIT;
    sso.store = &so;
    int r = sp_sandbox_snapshot_open(&sd->h, sb, &sso, err);
    if (r == SP_ENOTFOUND && !from) {
        if (err) {
            sp_error_free(*err);
            *err = NULL;
        }
        return sp_sandbox_baseline(&sd->from, sb, NULL, err);
    }
    if (r < 0)
        return r;
    sd->s = sp_sandbox_snapshot_store(sd->h);
    r = from ? sp_snapshot_get(&sd->from, sd->s, from, err)
             : sp_sandbox_baseline(&sd->from, sb, sd->s, err);
    sd->keep_now = snapshot != NULL;
    if (r == 0)
        r = snapshot ? sp_snapshot_get(&sd->now, sd->s, snapshot, err)
                     : sp_snapshot_create(&sd->now, sd->s, "apply", err);
    return r;
}

/* Snapshot ref of the remote sandbox (NULL: its workspace now) into the
 * private store, through an unnamed file in the private folder. */
static int import_side(struct sides *sd, sp_sandbox *sb, const char *ref, sp_snapshot **out,
                       sp_error **err)
{
    cleanup_close int fd = openat(sd->state_fd, sd->tmp, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return sp_err_errno(err, errno, "a temporary file in", sd->tmp);
    int r = sb->kind->snap_export(sb, ref, SP_SNAPSHOT_TAR, fd, err);
    if (r == 0 && lseek(fd, 0, SEEK_SET) < 0)
        r = sp_err_errno(err, errno, "lseek", sd->tmp);
    if (r == 0)
        r = sp_snapshot_import(out, sd->s, NULL, fd, NULL, err);
    return r;
}

static int remote_sides(struct sides *sd, sp_sandbox *sb, const char *from, const char *snapshot,
                        sp_error **err)
{
    sd->state_fd = open(sb->state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sd->state_fd < 0)
        return sp_err_errno(err, errno, "open", sb->state_dir);
    cleanup_free char *path = sp_xasprintf("%s/apply-XXXXXX", sb->state_dir);
    if (!mkdtemp(path))
        return sp_err_errno(err, errno, "mkdtemp", path);
    sd->tmp = sp_xstrdup(strrchr(path, '/') + 1);
    cleanup_free char *ws = sp_xasprintf("%s/ws", path);
    cleanup_free char *store = sp_xasprintf("%s/store", path);
    if (mkdir(ws, 0700) < 0)
        return sp_err_errno(err, errno, "mkdir", ws);
    /* The ref resolved by the peer first: a bad one is its not_found. A
     * fork's baseline is what its origin was made from, when it has it. */
    sp_snapshot *rec = NULL;
    int r = SP_ENOTFOUND;
    if (!from) {
        sp_error *e = NULL;
        r = sp_sandbox_snapshot_get(&rec, sb, SP_SANDBOX_ORIGIN_TAG, &e);
        if (r < 0 && r != SP_ENOTFOUND) {
            return sp_err_give(err, e, r);
        }
        sp_error_free(e);
    }
    if (r == SP_ENOTFOUND)
        r = sp_sandbox_snapshot_get(&rec, sb, from ? from : SP_SANDBOX_BASELINE_TAG, err);
    if (r == SP_ENOTFOUND && !from) {
        if (err) {
            sp_error_free(*err);
            *err = NULL;
        }
        r = sp_sandbox_baseline(&rec, sb, NULL, err);
    }
    if (r < 0)
        return r;
    sd->from_id = sp_xstrdup(rec->id);
    sp_snapshot_free(rec);
    rec = NULL;
    if (snapshot) {
        if ((r = sp_sandbox_snapshot_get(&rec, sb, snapshot, err)) < 0)
            return r;
        sd->now_id = sp_xstrdup(rec->id);
        sp_snapshot_free(rec);
    }
    if ((r = sp_snapstore_open(&sd->s, ws, store, NULL, err)) == 0 &&
        (r = import_side(sd, sb, sd->from_id, &sd->from, err)) < 0)
        r = sp_err_wrap(err, r, "snapshot %.12s of sandbox %s", sd->from_id, sb->name);
    if (r == 0 && (r = import_side(sd, sb, sd->now_id, &sd->now, err)) < 0)
        r = sd->now_id ? sp_err_wrap(err, r, "snapshot %.12s of sandbox %s", sd->now_id, sb->name)
                       : sp_err_wrap(err, r, "the workspace of sandbox %s", sb->name);
    return r;
}

static void sides_dispose(struct sides *sd)
{
    if (sd->now && sd->h && !sd->keep_now)
        sp_snapshot_delete(sd->s, sd->now->id, NULL);
    sp_snapshot_free(sd->now);
    sp_snapshot_free(sd->from);
    if (sd->h)
        sp_sandbox_snapshot_close(sd->h); /* frees sd->s */
    else
        sp_snapstore_free(sd->s);
    if (sd->tmp)
        sp_tree_remove(sd->state_fd, sd->tmp, 0, NULL);
    free(sd->tmp);
    free(sd->from_id);
    free(sd->now_id);
    if (sd->state_fd >= 0)
        close(sd->state_fd);
}

/* The patch holds what apply would write, nothing held back. */
struct patch_sel {
    const struct item *v;
    size_t n, i;
};

static bool patch_selects(void *ud, const char *path)
{
    struct patch_sel *ps = ud;
    /* Both lists are in tree order: walk them together. */
    while (ps->i < ps->n && strcmp(ps->v[ps->i].path, path) != 0)
        ps->i++;
    return ps->i < ps->n && applies(&ps->v[ps->i]);
}

/* The applied items as one commit on a new branch (apply_branch.c). */
static int commit_branch(sp_apply_result *res, const sp_sandbox_apply_opts *o, sp_snapstore *s,
                         const char *now, const struct item *v, size_t n, sp_error **err)
{
    sp_apply_git_change *ch = n ? sp_xcalloc(n, sizeof(*ch)) : NULL;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (applies(&v[i]))
            ch[m++] = (sp_apply_git_change){v[i].path, v[i].rel, !v[i].has_new};
    int r =
        m ? sp_apply_branch(&res->commit, res->to, o->branch, s, now, ch, m, o->message, err) : 0;
    free(ch);
    res->applied = r == 0 && m > 0;
    return r;
}

int sp_sandbox_apply(sp_apply_result **out, sp_sandbox *sb, const sp_sandbox_apply_opts *opts,
                     sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_SANDBOX_APPLY_OPTS_VERSION, "sp_sandbox_apply_opts", err) < 0)
        return SP_EINVAL;
    sp_sandbox_apply_opts o = SP_SANDBOX_APPLY_OPTS_INIT;
    if (opts && opts->version == 1)
        /* A caller built against the first layout: its struct ends there. */
        memcpy(&o, opts, offsetof(sp_sandbox_apply_opts, snapshot));
    else if (opts)
        o = *opts;
    size_t max = o.max_file_bytes ? o.max_file_bytes : DEFAULT_MAX_FILE;
    sp_apply_result *res = sp_xcalloc(1, sizeof(*res));
    cleanup_free char *subdir = NULL;
    struct plan_opts po = {
        .links_out = o.allow_links_out,
        .max_files = o.max_files ? o.max_files : DEFAULT_MAX_FILES,
        .max_bytes = o.max_bytes ? o.max_bytes : DEFAULT_MAX_BYTES,
        .branch = o.branch != NULL,
    };
    sp_mount_filter *allow = NULL;
    int r = 0;
    if (o.allow_paths && o.allow_paths[0]) {
        sp_mount am = {.include = o.allow_paths};
        if ((r = sp_mount_filter_new(&allow, &am, -1, err)) < 0)
            r = sp_err_wrap(err, r, "allow path");
    }
    if (r == 0)
        r = pick_target(sb, &o, &res->to, &subdir, &po.mount, err);
    if (r == 0 && o.patch && strcmp(subdir, ".") != 0)
        r = sp_err_set(err, SP_EINVAL, 0,
                       "a patch is made for a mount at the workspace root, not at %s", subdir);
    if (r < 0) {
        sp_mount_filter_free(allow);
        sp_apply_result_free(res);
        return r;
    }
    po.allow = allow;
    if (o.all)
        po.mount = NULL;
    struct host host = {.root = -1, .trash = -1, .umask = current_umask()};
    snprintf(host.trash_name, sizeof(host.trash_name), ".sandpod-apply.%ld", (long)getpid());
    host.root = open(res->to, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (host.root < 0) {
        r = sp_err_errno(err, errno, "open", res->to);
        sp_mount_filter_free(allow);
        sp_apply_result_free(res);
        return r;
    }
    struct sides sd = {.state_fd = -1};
    /* The sandbox's own store; where it is not on this host, a private
     * one filled from its archives. */
    sp_error *se = NULL;
    r = local_sides(&sd, sb, o.from, o.snapshot, &se);
    if (r < 0 && se && se->reason == SP_R_ELSEWHERE) {
        sp_error_free(se);
        se = NULL;
        r = remote_sides(&sd, sb, o.from, o.snapshot, &se);
    }
    if (r < 0)
        sp_err_give(err, se, r);
    else
        sp_error_free(se);
    struct item *items = NULL;
    size_t n = 0;
    struct planner p = {.subdir = subdir, .host = &host, .max = max, .res = res, .root_git = -1};
    if (r == 0) {
        /* A remote snapshot's id is the peer's, not the private store's. */
        res->from = sp_xstrdup(sd.from_id ? sd.from_id : sd.from->id);
        res->snapshot = sp_xstrdup(sd.now_id ? sd.now_id : sd.now->id);
        p.s = sd.s;
        p.from = sd.from->id;
        p.now = sd.now->id;
        r = plan(&p, &po, &items, &n, err);
    }
    if (r == 0 && o.patch) {
        sp_snapdiff *d = NULL;
        sp_snapshot_diff_opts dopts = SP_SNAPSHOT_DIFF_OPTS_INIT;
        struct patch_sel ps = {items, n, 0};
        dopts.patch = true;
        dopts.patch_select = patch_selects;
        dopts.patch_select_userdata = &ps;
        r = sp_snapshot_diff(&d, sd.s, sd.from->id, sd.now->id, &dopts, err);
        if (r == 0)
            res->patch = sp_xstrdup(d->patch ? d->patch : "");
        sp_snapdiff_free(d);
    }
    bool todo = false;
    for (size_t i = 0; i < n; i++)
        todo |= applies(&items[i]) && !items[i].already;
    if (r == 0 && o.branch && !o.dry_run && !o.patch) {
        r = commit_branch(res, &o, sd.s, sd.now->id, items, n, err);
    } else if (r == 0 && !o.dry_run && !o.patch && todo && (!res->n_conflicts || o.force)) {
        r = commit_items(&host, sd.s, sd.now->id, items, n, err);
        res->applied = r == 0;
    }
    for (size_t i = 0; i < n; i++)
        item_dispose(&items[i]);
    free(items);
    for (size_t i = 0; i < p.n_gd; i++)
        free(p.gd[i].rel);
    free(p.gd);
    sides_dispose(&sd);
    sp_mount_filter_free(allow);
    close(host.root);
    if (r < 0) {
        sp_apply_result_free(res);
        return r;
    }
    *out = res;
    return 0;
}
