/* A sandbox's baseline, and applying the workspace's changes back to a
 * host folder (sandpod/apply.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "tree.h"
#include "sandbox_internal.h"
#include "sandpod/apply.h"

int sp_sandbox_baseline(sp_snapshot **out, const sp_sandbox *sb, sp_snapstore *s, sp_error **err)
{
    *out = NULL;
    sp_error *e = NULL;
    int r = s ? sp_snapshot_get(out, s, SP_SANDBOX_BASELINE_TAG, &e) : SP_ENOTFOUND;
    if (r == SP_ENOTFOUND) {
        sp_error_free(e);
        return sp_err_set(err, SP_ENOTFOUND, 0,
                          "sandbox %s has no baseline snapshot (tagged '%s'): it was made before "
                          "sandpod took one at create; name a snapshot instead",
                          sp_sandbox_name(sb), SP_SANDBOX_BASELINE_TAG);
    }
    if (r < 0) {
        if (err)
            *err = e;
        else
            sp_error_free(e);
    }
    return r;
}

/* ------------------------------------------------------------- apply -- */

enum { DEFAULT_MAX_FILE = 256u << 20 };

const char *sp_apply_action_name(sp_apply_action a)
{
    return a == SP_APPLY_ADD ? "add" : a == SP_APPLY_MODIFY ? "modify" : "delete";
}

void sp_apply_result_free(sp_apply_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_changes; i++)
        free(r->changes[i].path);
    for (size_t i = 0; i < r->n_conflicts; i++) {
        free(r->conflicts[i].path);
        free(r->conflicts[i].reason);
    }
    free(r->changes);
    free(r->conflicts);
    free(r->to);
    free(r->from);
    free(r->patch);
    free(r);
}

/* The host folder: its root fd, and a trash folder in it for temporary
 * names and for what is replaced or removed until the end. */
struct host {
    int root;
    int trash;
    char trash_name[64];
    unsigned seq;
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

/* What the host holds at path: *present false when nothing (or no parent
 * folder); `e` gets its type, mode and (up to max bytes) content. A parent
 * that is not a folder gives -1 with errno ENOTDIR or ELOOP. */
static int host_read(const struct host *h, const char *path, size_t max, bool *present,
                     sp_snapshot_entry *e)
{
    memset(e, 0, sizeof(*e));
    *present = false;
    const char *leaf;
    cleanup_close int dfd = open_parent(h, path, &leaf);
    if (dfd < 0)
        return errno == ENOENT ? 0 : -1;
    struct stat st;
    if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -1;
    *present = true;
    e->mode = st.st_mode & 07777;
    if (S_ISDIR(st.st_mode)) {
        e->type = SP_FS_DIR;
        return 0;
    }
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
        e->type = SP_FS_OTHER;
        return 0;
    }
    if ((uint64_t)st.st_size > max) {
        errno = EFBIG;
        return -1;
    }
    e->data = sp_xcalloc(1, (size_t)st.st_size + 1);
    if (S_ISLNK(st.st_mode)) {
        e->type = SP_FS_SYMLINK;
        ssize_t n = readlinkat(dfd, leaf, e->data, (size_t)st.st_size + 1);
        if (n < 0)
            return -1;
        e->size = (size_t)n;
        return 0;
    }
    e->type = SP_FS_FILE;
    cleanup_close int fd = openat(dfd, leaf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, e->data + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    e->size = got;
    return 0;
}

/* Whether two entries are the same for applying: type, and for files and
 * symlinks the bytes, for files also the rwx bits. */
static bool same(bool a_present, const sp_snapshot_entry *a, bool b_present,
                 const sp_snapshot_entry *b)
{
    if (a_present != b_present)
        return false;
    if (!a_present)
        return true;
    if (a->type != b->type)
        return false;
    if (a->type == SP_FS_DIR || a->type == SP_FS_OTHER)
        return true;
    if (a->type == SP_FS_FILE && (a->mode & 0777) != (b->mode & 0777))
        return false;
    return a->size == b->size && memcmp(a->data, b->data, a->size) == 0;
}

/* One path to apply, with both sides from the store. */
struct item {
    char *path;      /* in the workspace */
    const char *rel; /* in the host folder (points into path) */
    sp_snapshot_entry old, nw;
    bool has_old, has_new;
    bool already;
};

static void item_dispose(struct item *it)
{
    free(it->path);
    sp_snapshot_entry_dispose(&it->old);
    sp_snapshot_entry_dispose(&it->nw);
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
    if (r < 0) {
        if (err)
            *err = ee;
        else
            sp_error_free(ee);
    }
    return r;
}

static void add_conflict(sp_apply_result *res, const char *path, const char *reason)
{
    res->conflicts = sp_xrealloc(res->conflicts, (res->n_conflicts + 1) * sizeof(*res->conflicts));
    res->conflicts[res->n_conflicts].path = sp_xstrdup(path);
    res->conflicts[res->n_conflicts].reason = sp_xstrdup(reason);
    res->n_conflicts++;
}

/* Compare the host with what the `from` side says it holds. */
static int check_host(const struct host *h, struct item *it, size_t max, sp_apply_result *res,
                      sp_error **err)
{
    sp_snapshot_entry he;
    bool hp;
    if (host_read(h, it->rel, max, &hp, &he) < 0) {
        int e = errno;
        sp_snapshot_entry_dispose(&he);
        if (e == ENOTDIR || e == ELOOP) {
            add_conflict(res, it->rel, "a parent on the host is not a folder");
            return 0;
        }
        return sp_err_errno(err, e, "read", it->rel);
    }
    if (!same(hp, &he, it->has_old, &it->old)) {
        if (same(hp, &he, it->has_new, &it->nw))
            it->already = true;
        else
            add_conflict(res, it->rel,
                         !it->has_old ? "added on both sides"
                         : !hp        ? "deleted on the host"
                                      : "changed on the host");
    }
    sp_snapshot_entry_dispose(&he);
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

/* Make the host hold the new side of an item. */
static int write_host(struct commit *c, const struct item *it, unsigned mode)
{
    const char *leaf;
    cleanup_close int dfd = open_parent(c->h, it->rel, &leaf);
    if (dfd < 0)
        return -1;
    struct stat st;
    bool present = fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!present && errno != ENOENT)
        return -1;
    if (it->nw.type == SP_FS_DIR) {
        if (!present) {
            if (mkdirat(dfd, leaf, mode) < 0)
                return -1;
            log_push(c, U_MKDIR, it->rel, NULL, 0);
            cleanup_close int fd =
                openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            return fd < 0 ? -1 : fchmod(fd, mode);
        }
        if ((st.st_mode & 07777) == mode)
            return 0;
        cleanup_close int fd = openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fchmod(fd, mode) < 0)
            return -1;
        log_push(c, U_CHMOD, it->rel, NULL, st.st_mode & 07777);
        return 0;
    }
    char t[24];
    snprintf(t, sizeof(t), "n%u", c->h->seq++);
    if (it->nw.type == SP_FS_SYMLINK) {
        if (symlinkat(it->nw.data, c->h->trash, t) < 0)
            return -1;
    } else {
        cleanup_close int fd =
            openat(c->h->trash, t, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
            return -1;
        size_t done = 0;
        while (done < it->nw.size) {
            ssize_t n = write(fd, it->nw.data + done, it->nw.size - done);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return -1;
            done += (size_t)n;
        }
        if (fchmod(fd, mode) < 0)
            return -1;
    }
    if (present && move_away(c, dfd, leaf, it->rel) < 0)
        return -1;
    if (renameat2(c->h->trash, t, dfd, leaf, RENAME_NOREPLACE) < 0)
        return -1;
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
    DIR *d = fdopendir(dup(h->trash));
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)))
            if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                unlinkat(h->trash, de->d_name, 0);
        closedir(d);
    }
    close(h->trash);
    h->trash = -1;
    unlinkat(h->root, h->trash_name, AT_REMOVEDIR);
}

static int commit_items(struct host *h, struct item *v, size_t n, sp_error **err)
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
    const char *failed = NULL;
    /* Removals first, deepest first: a folder's contents go before it. */
    for (size_t i = n; i-- > 0 && !failed;) {
        struct item *it = &v[i];
        if (it->already || (it->has_new && it->has_old && it->old.type == it->nw.type))
            continue;
        if (remove_host(&c, it->rel) < 0)
            failed = it->rel;
    }
    for (size_t i = 0; i < n && !failed; i++) {
        struct item *it = &v[i];
        if (!it->already && it->has_new && write_host(&c, it, it->nw.mode & 01777) < 0)
            failed = it->rel;
    }
    if (failed) {
        r = sp_err_errno(err, errno, "apply", failed);
        undo_all(&c);
    }
    for (size_t i = 0; i < c.n; i++)
        free(c.log[i].path);
    free(c.log);
    trash_remove(h);
    return r;
}

/* The workspace folder whose changes go to the host, and the host folder. */
static int pick_target(const sp_sandbox *sb, const sp_sandbox_apply_opts *o, char **to,
                       char **subdir, sp_error **err)
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
    return it->has_old && it->old.type == SP_FS_DIR && (!it->has_new || it->nw.type != SP_FS_DIR);
}

/* A folder the sandbox deleted must hold, on the host, only entries the
 * apply deletes too: anything else is new on the host, a conflict. */
static void check_dir_emptied(const struct host *h, const struct item *v, size_t n, size_t i,
                              sp_apply_result *res)
{
    const char *leaf;
    cleanup_close int dfd = open_parent(h, v[i].rel, &leaf);
    if (dfd < 0)
        return;
    int fd = openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    size_t len = strlen(v[i].rel);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        bool known = false;
        for (size_t j = i + 1; j < n && !known; j++)
            known = strncmp(v[j].rel, v[i].rel, len) == 0 && v[j].rel[len] == '/' &&
                    strcmp(v[j].rel + len + 1, de->d_name) == 0 && v[j].has_old;
        if (!known) {
            cleanup_free char *p = sp_xasprintf("%s/%s", v[i].rel, de->d_name);
            add_conflict(res, p, "added on the host in a folder the sandbox deleted");
        }
    }
    closedir(d);
}

static void add_change(sp_apply_result *res, const struct item *it)
{
    res->changes = sp_xrealloc(res->changes, (res->n_changes + 1) * sizeof(*res->changes));
    sp_apply_change *ch = &res->changes[res->n_changes++];
    ch->path = sp_xstrdup(it->rel);
    ch->action = !it->has_old ? SP_APPLY_ADD : !it->has_new ? SP_APPLY_DELETE : SP_APPLY_MODIFY;
    ch->type = it->has_new ? it->nw.type : it->old.type;
    ch->mode = it->has_new ? it->nw.mode & 01777 : 0;
    ch->already = it->already;
}

/* Collect the items, check the host for conflicts. */
static int plan(sp_snapstore *s, const char *from, const char *now, const char *subdir,
                struct host *host, size_t max, sp_apply_result *res, struct item **items,
                size_t *n_items, sp_error **err)
{
    sp_snapdiff *d = NULL;
    int r = sp_snapshot_diff(&d, s, from, now, NULL, err);
    if (r < 0)
        return r;
    struct item *v = d->n ? sp_xcalloc(d->n, sizeof(*v)) : NULL;
    size_t n = 0;
    for (size_t i = 0; i < d->n && r == 0; i++) {
        const sp_snapshot_change *ch = &d->v[i];
        const char *rel = under(ch->path, subdir);
        if (!rel)
            continue;
        struct item *it = &v[n];
        it->path = sp_xstrdup(ch->path);
        it->rel = it->path + (rel - ch->path);
        r = read_side(s, from, it->path, max, &it->old, &it->has_old, err);
        if (r == 0)
            r = read_side(s, now, it->path, max, &it->nw, &it->has_new, err);
        n++;
        if (r < 0)
            break;
        if ((it->has_new && it->nw.type == SP_FS_OTHER) ||
            (!it->has_new && it->old.type == SP_FS_OTHER)) {
            res->skipped++;
            item_dispose(it);
            n--;
            continue;
        }
        r = check_host(host, it, max, res, err);
    }
    sp_snapdiff_free(d);
    for (size_t i = 0; i < n && r == 0; i++) {
        if (removes_dir(&v[i]) && !v[i].already)
            check_dir_emptied(host, v, n, i, res);
        add_change(res, &v[i]);
    }
    *items = v;
    *n_items = n;
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
};

static int local_sides(struct sides *sd, sp_sandbox *sb, const char *from, sp_error **err)
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
    if (r == 0)
        r = sp_snapshot_create(&sd->now, sd->s, "apply", err);
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
    int r = ref ? sp_remote_export(sb, ref, false, fd, err) : sp_remote_export_now(sb, fd, err);
    if (r == 0 && lseek(fd, 0, SEEK_SET) < 0)
        r = sp_err_errno(err, errno, "lseek", sd->tmp);
    if (r == 0)
        r = sp_snapshot_import(out, sd->s, NULL, fd, NULL, err);
    return r;
}

static int remote_sides(struct sides *sd, sp_sandbox *sb, const char *from, sp_error **err)
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
    /* The ref resolved by the peer first: a bad one is its not_found. */
    sp_snapshot *rec = NULL;
    int r = sp_sandbox_snapshot_get(&rec, sb, from ? from : SP_SANDBOX_BASELINE_TAG, err);
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
    if ((r = sp_snapstore_open(&sd->s, ws, store, NULL, err)) == 0 &&
        (r = import_side(sd, sb, sd->from_id, &sd->from, err)) < 0)
        r = sp_err_wrap(err, r, "snapshot %.12s of sandbox %s", sd->from_id, sb->name);
    if (r == 0 && (r = import_side(sd, sb, NULL, &sd->now, err)) < 0)
        r = sp_err_wrap(err, r, "the workspace of sandbox %s", sb->name);
    return r;
}

static void sides_dispose(struct sides *sd)
{
    if (sd->now && sd->h)
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
    if (sd->state_fd >= 0)
        close(sd->state_fd);
}

int sp_sandbox_apply(sp_apply_result **out, sp_sandbox *sb, const sp_sandbox_apply_opts *opts,
                     sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_SANDBOX_APPLY_OPTS_VERSION, "sp_sandbox_apply_opts", err) < 0)
        return SP_EINVAL;
    sp_sandbox_apply_opts o = SP_SANDBOX_APPLY_OPTS_INIT;
    if (opts)
        o = *opts;
    size_t max = o.max_file_bytes ? o.max_file_bytes : DEFAULT_MAX_FILE;
    sp_apply_result *res = sp_xcalloc(1, sizeof(*res));
    cleanup_free char *subdir = NULL;
    int r = pick_target(sb, &o, &res->to, &subdir, err);
    if (r < 0) {
        sp_apply_result_free(res);
        return r;
    }
    if (o.patch && strcmp(subdir, ".") != 0) {
        sp_apply_result_free(res);
        return sp_err_set(err, SP_EINVAL, 0,
                          "a patch is made for a mount at the workspace root, not at %s", subdir);
    }
    struct host host = {.root = -1, .trash = -1};
    host.root = open(res->to, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (host.root < 0) {
        r = sp_err_errno(err, errno, "open", res->to);
        sp_apply_result_free(res);
        return r;
    }
    struct sides sd = {.state_fd = -1};
    r = sp_sandbox_is_remote(sb) ? remote_sides(&sd, sb, o.from, err)
                                 : local_sides(&sd, sb, o.from, err);
    struct item *items = NULL;
    size_t n = 0;
    if (r == 0) {
        /* A remote snapshot's id is the peer's, not the private store's. */
        res->from = sp_xstrdup(sd.from_id ? sd.from_id : sd.from->id);
        r = plan(sd.s, sd.from->id, sd.now->id, subdir, &host, max, res, &items, &n, err);
    }
    if (r == 0 && o.patch) {
        sp_snapdiff *d = NULL;
        sp_snapshot_diff_opts dopts = SP_SNAPSHOT_DIFF_OPTS_INIT;
        dopts.patch = true;
        r = sp_snapshot_diff(&d, sd.s, sd.from->id, sd.now->id, &dopts, err);
        if (r == 0)
            res->patch = sp_xstrdup(d->patch ? d->patch : "");
        sp_snapdiff_free(d);
    }
    bool todo = false;
    for (size_t i = 0; i < n; i++)
        todo |= !items[i].already;
    if (r == 0 && !o.dry_run && !o.patch && todo && (!res->n_conflicts || o.force)) {
        r = commit_items(&host, items, n, err);
        res->applied = r == 0;
    }
    for (size_t i = 0; i < n; i++)
        item_dispose(&items[i]);
    free(items);
    sides_dispose(&sd);
    close(host.root);
    if (r < 0) {
        sp_apply_result_free(res);
        return r;
    }
    *out = res;
    return 0;
}
