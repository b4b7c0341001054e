/* apply_patch, part 3: the plan over the workspace and the atomic commit.
 *
 * Plan: every operation runs, in patch order, against a virtual view of
 * the files it names (path -> content, mode, exists), loaded through the
 * contained resolution of path.c on first use. Nothing is written; every
 * check that can fail (parse, paths, limits, matching) fails here.
 *
 * Commit: each file whose final state differs from the disk is written to
 * a temp file in its final folder (folders created as needed and
 * remembered), then, once all are staged and the originals are seen
 * unchanged since they were read, renamed into place; deleted files are
 * unlinked last. Any failure before the first rename removes the temp files
 * and the new folders. A failure after it puts back what was already
 * replaced or removed from the in-memory originals (best effort).
 *
 * Temp files are unnamed (O_TMPFILE) while they are written and get a name
 * only right before their rename, so a process killed while staging leaves
 * nothing in the workspace; beyond MAX_UNNAMED files (each holds an fd) or
 * on a filesystem without O_TMPFILE they are named from the start. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "patch_internal.h"

#define MAX_LINK_HOPS 40
#define TMP_NAME_LEN  48
#define MAX_UNNAMED   256

/* A file as the patch sees it. */
typedef struct vent {
    char *rel; /* where it lives, normalized */
    /* On disk when it was first looked at. */
    bool orig_exists, orig_link;
    char *orig_target; /* symlink target */
    char *orig;        /* regular file content */
    size_t orig_len;
    mode_t orig_mode;
    struct stat orig_st;
    /* As the operations so far leave it. */
    bool exists, is_link, changed;
    char *data; /* owned once changed */
    size_t len;
    mode_t mode;
    /* Commit. */
    bool write, del, staged, placed, removed;
    int dirfd; /* borrowed from the plan's folder cache */
    const char *name;
    int tfd; /* staged but still unnamed (O_TMPFILE), else -1 */
    char tmp[TMP_NAME_LEN];
} vent;

typedef struct dirent_fd {
    char *rel;
    int fd;
} dirent_fd;

typedef struct plan {
    sp_fs *fs;
    sp_patch_format format;
    bool allow_overwrite;
    vent **v;
    size_t n;
    dirent_fd *dirs;
    size_t n_dirs;
    sp_strv created; /* folders the commit made, in order */
} plan;

const char *sp_patch_format_name(sp_patch_format f)
{
    switch (f) {
    case SP_PATCH_AUTO:
        return "auto";
    case SP_PATCH_CODEX:
        return "codex";
    case SP_PATCH_UNIFIED:
        return "unified";
    }
    return "unknown";
}

const char *sp_patch_action_name(sp_patch_action a)
{
    switch (a) {
    case SP_PATCH_ADD:
        return "add";
    case SP_PATCH_DELETE:
        return "delete";
    case SP_PATCH_UPDATE:
        return "update";
    case SP_PATCH_MOVE:
        return "move";
    case SP_PATCH_COPY:
        return "copy";
    }
    return "unknown";
}

void sp_patch_result_free(sp_patch_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        free(r->files[i].path);
        free(r->files[i].new_path);
    }
    free(r->files);
    free(r);
}

/* Hand an error we inspected on to the caller. */
static int pass_err(sp_error **err, sp_error *e)
{
    int code = e ? e->code : SP_ERROR;
    if (err) {
        sp_error_free(*err);
        *err = e;
    } else {
        sp_error_free(e);
    }
    return code;
}

/* ------------------------------------------------------ virtual view -- */

static vent *find(const plan *p, const char *rel)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->v[i]->rel, rel) == 0)
            return p->v[i];
    return NULL;
}

static void vent_free(vent *v)
{
    if (!v)
        return;
    if (v->tfd >= 0)
        close(v->tfd);
    free(v->rel);
    free(v->orig_target);
    free(v->orig);
    free(v->data);
    free(v);
}

static const char *vdata(const vent *v, size_t *len)
{
    *len = v->changed ? v->len : v->orig_len;
    return v->changed ? v->data : v->orig;
}

/* Set new content (taken from buf) and mode. */
static void vset(vent *v, sp_buf *buf, mode_t mode)
{
    free(v->data);
    v->len = buf->len;
    v->data = sp_buf_steal(buf);
    v->changed = true;
    v->exists = true;
    v->is_link = false;
    v->mode = mode;
}

static void vremove(vent *v)
{
    free(v->data);
    v->data = NULL;
    v->len = 0;
    v->changed = true;
    v->exists = false;
    v->is_link = false;
}

/* Read what is at `rel` on disk into a new entry. Contract: only names
 * relative to an fd from sp_fs_open_parent() are touched, the final name
 * is never followed (a symlink is recorded as one), and a missing file or
 * parent is an entry that does not exist rather than an error. */
static int load(plan *p, const char *rel, vent **out, sp_error **err)
{
    sp_fs *fs = p->fs;
    vent *v = sp_xcalloc(1, sizeof(*v));
    v->rel = sp_xstrdup(rel);
    v->dirfd = -1;
    v->tfd = -1;
    cleanup_close int dirfd = -1;
    cleanup_close int fd = -1;
    cleanup_free char *name = NULL;
    sp_buf content = SP_BUF_INIT;
    sp_error *e = NULL;
    int r = sp_fs_open_parent(fs, rel, false, &dirfd, &name, &e);
    if (r < 0) {
        if (e && (e->sys_errno == ENOENT || e->sys_errno == ENOTDIR)) {
            sp_error_free(e);
            goto add;
        }
        r = pass_err(err, e);
        goto fail;
    }
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            goto add;
        r = sp_err_errno(err, errno, "stat", rel);
        goto fail;
    }
    if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlinkat(dirfd, name, target, sizeof(target) - 1);
        if (n <= 0) {
            r = sp_err_errno(err, n < 0 ? errno : EINVAL, "readlink", rel);
            goto fail;
        }
        v->orig_target = sp_xstrndup(target, (size_t)n);
        v->orig_link = true;
    } else if (S_ISDIR(st.st_mode)) {
        r = sp_err_set(err, SP_EINVAL, EISDIR, "is a folder, not a file: %s", rel);
        goto fail;
    } else if (!S_ISREG(st.st_mode)) {
        r = sp_err_set(err, SP_EINVAL, 0, "not a regular file: %s", rel);
        goto fail;
    } else {
        size_t limit = fs->opts.max_read_bytes;
        if ((uint64_t)st.st_size > limit) {
            r = sp_err_set(err, SP_ETOOBIG, EFBIG,
                           "file too big to patch: %s (%llu bytes, limit %zu)", rel,
                           (unsigned long long)st.st_size, limit);
            goto fail;
        }
        fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        struct stat fst;
        if (fd < 0 || fstat(fd, &fst) < 0) {
            r = sp_err_errno(err, errno, "read", rel);
            goto fail;
        }
        if (fst.st_ino != st.st_ino || fst.st_dev != st.st_dev) {
            r = sp_err_reason(
                err, SP_R_STALE,
                sp_err_set(err, SP_ERROR, EAGAIN, "%s changed while it was read", rel));
            goto fail;
        }
        if ((r = sp_fs_check_fd_denied(fs, fd, rel, err)) < 0)
            goto fail;
        /* One byte over the limit tells a file that grew since fstat. */
        if ((r = sp_fs_slurp_fd(fd, rel, limit + 1, &content, err)) < 0)
            goto fail;
        if (content.len > limit) {
            r = sp_err_set(err, SP_ETOOBIG, EFBIG, "file too big to patch: %s (over %zu bytes)",
                           rel, limit);
            goto fail;
        }
        sp_buf_add(&content, "", 0);
        v->orig_len = content.len;
        v->orig = sp_buf_steal(&content);
    }
    v->orig_exists = true;
    v->orig_st = st;
    v->orig_mode = st.st_mode & 07777;
add:
    v->exists = v->orig_exists;
    v->is_link = v->orig_link;
    v->mode = v->orig_mode;
    p->v = sp_xrealloc(p->v, (p->n + 1) * sizeof(vent *));
    p->v[p->n++] = v;
    *out = v;
    return 0;
fail:
    sp_buf_dispose(&content);
    vent_free(v);
    return r;
}

/* Where symlink `rel` -> `target` leads, as a normalized path. */
static int link_dest(char **out, const char *rel, const char *target, sp_error **err)
{
    cleanup_free char *joined = NULL;
    const char *slash = strrchr(rel, '/');
    if (target[0] == '/' || !slash)
        joined = sp_xstrdup(target);
    else
        joined = sp_xasprintf("%.*s/%s", (int)(slash - rel), rel, target);
    int r = sp_fs_path_normalize(out, joined, strlen(joined), err);
    if (r < 0)
        return sp_err_wrap(err, r, "symlink %s points outside", rel);
    return 0;
}

/* The entry for `rel`; with follow, final symlinks are followed (each hop
 * judged by the same rules as a path the patch names). */
static int lookup(plan *p, const char *rel, bool follow, vent **out, sp_error **err)
{
    cleanup_free char *cur = sp_xstrdup(rel);
    for (int hops = 0;; hops++) {
        if (sp_fs_denied(p->fs, cur))
            return sp_err_set(err, SP_EDENIED, 0, "path is hidden by the deny list: %s", cur);
        vent *v = find(p, cur);
        int r;
        if (!v && (r = load(p, cur, &v, err)) < 0)
            return r;
        if (!follow || !v->exists || !v->is_link) {
            *out = v;
            return 0;
        }
        if (hops >= MAX_LINK_HOPS)
            return sp_err_set(err, SP_EINVAL, ELOOP, "too many levels of symlinks: %s", rel);
        char *next = NULL;
        if ((r = link_dest(&next, cur, v->orig_target, err)) < 0)
            return r;
        free(cur);
        cur = next;
    }
}

/* Content of a file after the operation's chunks or hunks. */
static int transform(const plan *p, const pp_op *op, const vent *v, const char *display,
                     sp_buf *out, sp_error **err)
{
    size_t len = 0;
    const char *data = v && v->exists ? vdata(v, &len) : "";
    if (!data)
        data = "";
    if (p->format == SP_PATCH_CODEX)
        return pt_apply_codex(out, data, len, op, display, err);
    return pt_apply_unified(out, data, len, op, display, err);
}

/* git's exec bit on top of a file's mode. */
static mode_t with_exec(mode_t cur, unsigned want)
{
    if (want & 0111)
        return cur | ((cur & 0444) >> 2);
    return cur & ~(mode_t)0111;
}

static int op_add(plan *p, const pp_op *op, sp_patch_file *rf, sp_error **err)
{
    vent *v = NULL;
    int r = lookup(p, op->path, false, &v, err);
    if (r < 0)
        return r;
    if (v->exists) {
        if (p->format == SP_PATCH_UNIFIED)
            return sp_err_set(err, SP_EEXISTS, EEXIST, "already exists: %s", op->path);
        if (!p->allow_overwrite)
            return sp_err_set(err, SP_EEXISTS, EEXIST,
                              "already exists: %s (use '*** Update File:' to change it)", op->path);
        if ((r = lookup(p, op->path, true, &v, err)) < 0)
            return r;
    }
    sp_buf content = SP_BUF_INIT;
    if (p->format == SP_PATCH_CODEX)
        sp_buf_add(&content, op->content.data, op->content.len);
    else if ((r = transform(p, op, NULL, op->path, &content, err)) < 0)
        return r;
    mode_t mode = op->mode ? op->mode : v->exists ? v->mode : 0644;
    rf->lines_added = op->added;
    rf->bytes_written = content.len;
    rf->mode = mode;
    vset(v, &content, mode);
    return 0;
}

static int op_delete(plan *p, const pp_op *op, sp_patch_file *rf, sp_error **err)
{
    vent *v = NULL, *t = NULL;
    int r = lookup(p, op->path, false, &v, err);
    if (r < 0)
        return r;
    if (!v->exists)
        return sp_err_set(err, SP_ENOTFOUND, ENOENT, "no such file to delete: %s", op->path);
    if (p->format == SP_PATCH_UNIFIED) {
        /* The diff must remove exactly what the file holds. */
        if ((r = lookup(p, op->path, true, &t, err)) < 0)
            return r;
        sp_buf rest = SP_BUF_INIT;
        r = transform(p, op, t, op->path, &rest, err);
        size_t left = rest.len;
        sp_buf_dispose(&rest);
        if (r < 0)
            return r;
        if (left)
            return sp_err_set(err, SP_EINVAL, 0,
                              "the deletion of %s does not match the file: %zu bytes would remain",
                              op->path, left);
        rf->lines_removed = op->removed;
    } else if (!v->is_link) {
        size_t len = 0;
        const char *data = vdata(v, &len);
        rf->lines_removed = pt_count_lines(data ? data : "", len);
    }
    vremove(v);
    return 0;
}

static int op_update(plan *p, const pp_op *op, sp_patch_file *rf, sp_error **err)
{
    vent *v = NULL;
    int r = lookup(p, op->path, true, &v, err);
    if (r < 0)
        return r;
    if (!v->exists)
        return sp_err_set(err, SP_ENOTFOUND, ENOENT, "no such file to update: %s", op->path);
    sp_buf content = SP_BUF_INIT;
    if ((r = transform(p, op, v, op->path, &content, err)) < 0) {
        sp_buf_dispose(&content);
        return r;
    }
    mode_t mode = op->mode ? with_exec(v->mode, op->mode) : v->mode;
    rf->lines_added = op->added;
    rf->lines_removed = op->removed;
    rf->bytes_written = content.len;
    rf->mode = mode;
    vset(v, &content, mode);
    return 0;
}

/* Move (rename) or copy, with the chunks or hunks applied on the way. */
static int op_move(plan *p, const pp_op *op, sp_patch_file *rf, sp_error **err)
{
    bool copy = op->action == SP_PATCH_COPY;
    vent *src = NULL, *sc = NULL, *dst = NULL;
    int r = lookup(p, op->path, false, &src, err);
    if (r < 0)
        return r;
    sc = src;
    if (src->exists && src->is_link && (r = lookup(p, op->path, true, &sc, err)) < 0)
        return r;
    if (!src->exists || !sc->exists)
        return sp_err_set(err, SP_ENOTFOUND, ENOENT, "no such file to %s: %s",
                          copy ? "copy" : "move", op->path);
    sp_buf content = SP_BUF_INIT;
    if (op->n_hunks) {
        if ((r = transform(p, op, sc, op->path, &content, err)) < 0) {
            sp_buf_dispose(&content);
            return r;
        }
    } else {
        size_t len = 0;
        const char *data = vdata(sc, &len);
        sp_buf_add(&content, data ? data : "", len);
    }
    mode_t mode = op->mode ? with_exec(sc->mode, op->mode) : sc->mode;
    if ((r = lookup(p, op->new_path, false, &dst, err)) < 0)
        goto fail;
    if (dst->exists && dst != src) {
        if (p->format == SP_PATCH_UNIFIED || !p->allow_overwrite) {
            r = sp_err_set(err, SP_EEXISTS, EEXIST, "cannot %s %s to %s: it already exists",
                           copy ? "copy" : "move", op->path, op->new_path);
            goto fail;
        }
        if ((r = lookup(p, op->new_path, true, &dst, err)) < 0)
            goto fail;
    }
    rf->lines_added = op->added;
    rf->lines_removed = op->removed;
    rf->bytes_written = content.len;
    rf->mode = mode;
    if (dst == src && src == sc) {
        vset(dst, &content, mode); /* moved onto itself: an update */
        return 0;
    }
    vset(dst, &content, mode);
    if (!copy && src != dst)
        vremove(src);
    return 0;
fail:
    sp_buf_dispose(&content);
    return r;
}

/* A file about to be created: name limits, and folders on its way that
 * exist must be folders inside the root. */
static int check_new(plan *p, const vent *v, sp_error **err)
{
    int r = sp_fs_check_new_path(p->fs, v->rel, err);
    if (r < 0)
        return r;
    for (const char *s = strchr(v->rel, '/'); s; s = strchr(s + 1, '/')) {
        cleanup_free char *dir = sp_xstrndup(v->rel, (size_t)(s - v->rel));
        vent *pv = find(p, dir);
        if (pv && pv->exists)
            return sp_err_set(err, SP_EINVAL, ENOTDIR, "cannot create %s: %s is a file", v->rel,
                              dir);
        sp_error *e = NULL;
        int fd = sp_fs_openat(p->fs, dir, O_PATH | O_DIRECTORY, 0, true, &e);
        if (fd >= 0) {
            close(fd);
            continue;
        }
        if (e && e->sys_errno == ENOENT) {
            sp_error_free(e);
            return 0; /* the rest gets created */
        }
        if (e && e->sys_errno == ENOTDIR) {
            sp_error_free(e);
            if (pv)
                return sp_err_set(err, SP_EINVAL, ENOTDIR,
                                  "cannot create %s: %s is a file this patch deletes, and a file "
                                  "cannot become a folder in the same patch",
                                  v->rel, dir);
            return sp_err_set(err, SP_EINVAL, ENOTDIR, "cannot create %s: %s is not a folder",
                              v->rel, dir);
        }
        return pass_err(err, e);
    }
    return 0;
}

/* Decide what the commit must do for each entry, and check it can. */
static int finish_plan(plan *p, sp_error **err)
{
    size_t count = 0;
    for (size_t i = 0; i < p->n; i++) {
        vent *v = p->v[i];
        bool differs = v->changed && (!v->orig_exists || v->orig_link || v->len != v->orig_len ||
                                      v->mode != v->orig_mode ||
                                      (v->len && memcmp(v->data, v->orig, v->len) != 0));
        v->write = v->exists && !v->is_link && (!v->orig_exists || differs);
        v->del = !v->exists && v->orig_exists;
        if (v->write && v->len > p->fs->opts.max_write_bytes)
            return sp_err_set(err, SP_ETOOBIG, EFBIG,
                              "%s would be %zu bytes, over the write limit of %zu bytes", v->rel,
                              v->len, p->fs->opts.max_write_bytes);
        int r;
        if (v->write && !v->orig_exists && (r = check_new(p, v, err)) < 0)
            return r;
        count += v->write || v->del;
    }
    if (count > SP_PATCH_MAX_FILES)
        return sp_err_set(err, SP_ETOOBIG, 0, "the patch changes %zu files, more than %d", count,
                          SP_PATCH_MAX_FILES);
    return 0;
}

/* ------------------------------------------------------------ commit -- */

/* Make folder `dir` and its missing parents, remembering each one made.
 * Each level is resolved from the root again, as path.c's ensure_dir. */
static int make_dirs(plan *p, const char *dir, sp_error **err)
{
    size_t len = strlen(dir);
    for (size_t i = 0; i <= len; i++) {
        if (dir[i] != '/' && dir[i] != '\0')
            continue;
        cleanup_free char *prefix = sp_xstrndup(dir, i);
        sp_error *e = NULL;
        int fd = sp_fs_openat(p->fs, prefix, O_PATH | O_DIRECTORY, 0, true, &e);
        if (fd >= 0) {
            close(fd);
            continue;
        }
        if (!e || e->sys_errno != ENOENT)
            return pass_err(err, e);
        sp_error_free(e);
        cleanup_close int pfd = -1;
        cleanup_free char *name = NULL;
        int r = sp_fs_open_parent(p->fs, prefix, false, &pfd, &name, err);
        if (r < 0)
            return r;
        if (mkdirat(pfd, name, 0755) < 0) {
            if (errno == EEXIST)
                continue;
            return sp_err_errno(err, errno, "mkdir", prefix);
        }
        sp_strv_push(&p->created, sp_xstrdup(prefix));
        struct stat pst;
        if (geteuid() == 0 && fstat(pfd, &pst) == 0)
            (void)!fchownat(pfd, name, pst.st_uid, pst.st_gid, AT_SYMLINK_NOFOLLOW);
    }
    return 0;
}

/* An fd on folder `dir` (made first with create), shared by the files in
 * it for the whole commit. */
static int dir_fd(plan *p, const char *dir, bool create, int *out, sp_error **err)
{
    for (size_t i = 0; i < p->n_dirs; i++) {
        if (strcmp(p->dirs[i].rel, dir) == 0) {
            *out = p->dirs[i].fd;
            return 0;
        }
    }
    int r;
    if (create && strcmp(dir, ".") != 0 && (r = make_dirs(p, dir, err)) < 0)
        return r;
    int fd = sp_fs_openat(p->fs, dir, O_PATH | O_DIRECTORY, 0, true, err);
    if (fd < 0)
        return fd;
    p->dirs = sp_xrealloc(p->dirs, (p->n_dirs + 1) * sizeof(dirent_fd));
    p->dirs[p->n_dirs].rel = sp_xstrdup(dir);
    p->dirs[p->n_dirs].fd = fd;
    p->n_dirs++;
    *out = fd;
    return 0;
}

/* Point v->dirfd and v->name at the entry's folder and name. */
static int place(plan *p, vent *v, bool create, sp_error **err)
{
    const char *slash = strrchr(v->rel, '/');
    cleanup_free char *dir =
        slash ? sp_xstrndup(v->rel, (size_t)(slash - v->rel)) : sp_xstrdup(".");
    v->name = slash ? slash + 1 : v->rel;
    return dir_fd(p, dir, create, &v->dirfd, err);
}

static void tmp_name(char tmp[TMP_NAME_LEN])
{
    uint64_t rnd = 0;
    if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
        rnd = (uint64_t)sp_now_ms() ^ ((uint64_t)getpid() << 32);
    snprintf(tmp, TMP_NAME_LEN, ".sandpod-patch-%016llx.tmp", (unsigned long long)rnd);
}

/* Write data to a new temp file in dirfd: mode, owner (as root: `owner`'s
 * ids, or the folder's for a new file), fsync. With `unnamed`, the file
 * may be left unnamed: *unnamed receives its fd (tmp is then empty), or
 * -1 when it was named in tmp. */
static int stage(int dirfd, const char *display, const char *data, size_t len, mode_t mode,
                 const struct stat *owner, char tmp[TMP_NAME_LEN], int *unnamed, sp_error **err)
{
    tmp[0] = '\0';
    int tfd = -1;
    if (unnamed) {
        *unnamed = -1;
        tfd = openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    }
    if (tfd < 0) {
        tmp_name(tmp);
        tfd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    }
    if (tfd < 0) {
        tmp[0] = '\0';
        return sp_err_errno(err, errno, "write", display);
    }
    int r = 0;
    if (sp_write_all(tfd, data, len) < 0) {
        r = sp_err_errno(err, errno, "write", display);
        goto fail;
    }
    if (fchmod(tfd, mode) < 0) {
        r = sp_err_errno(err, errno, "chmod", display);
        goto fail;
    }
    /* As root, keep the owner of a replaced file and give a new one the
     * owner of its folder, so the container's user can still write it. */
    struct stat dst;
    if (geteuid() == 0 && (owner || fstat(dirfd, &dst) == 0)) {
        const struct stat *o = owner ? owner : &dst;
        (void)!fchown(tfd, o->st_uid, o->st_gid);
        if (mode & 06000)
            (void)!fchmod(tfd, mode); /* chown clears setuid/setgid */
    }
    if (fsync(tfd) < 0) {
        r = sp_err_errno(err, errno, "write", display);
        goto fail;
    }
    if (!tmp[0]) {
        *unnamed = tfd;
        return 0;
    }
    close(tfd);
    return 0;
fail:
    close(tfd);
    if (tmp[0])
        unlinkat(dirfd, tmp, 0);
    tmp[0] = '\0';
    return r;
}

/* Give a staged unnamed file its temp name, right before its rename. */
static int name_staged(vent *v)
{
    if (v->tfd < 0)
        return 0;
    tmp_name(v->tmp);
    if (sp_fs_link_tmpfile(v->tfd, v->dirfd, v->tmp) < 0) {
        v->tmp[0] = '\0';
        return -1;
    }
    close(v->tfd);
    v->tfd = -1;
    return 0;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    if (a->st_dev != b->st_dev || a->st_ino != b->st_ino ||
        (a->st_mode & S_IFMT) != (b->st_mode & S_IFMT))
        return false;
    if (S_ISLNK(a->st_mode))
        return true;
    return a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
           a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && (a->st_mode & 07777) == (b->st_mode & 07777);
}

/* Rename a staged temp over (dirfd, name); a new file must not have
 * appeared meanwhile. */
static int put_in_place(vent *v, bool noreplace)
{
    if (renameat2(v->dirfd, v->tmp, v->dirfd, v->name, noreplace ? RENAME_NOREPLACE : 0) == 0)
        return 0;
    if (!noreplace || errno != EINVAL)
        return -1;
    /* A filesystem without RENAME_NOREPLACE: check, then rename. */
    struct stat st;
    if (fstatat(v->dirfd, v->name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        errno = EEXIST;
        return -1;
    }
    return renameat(v->dirfd, v->tmp, v->dirfd, v->name);
}

/* Put an entry's original back: a regular file from memory, or the link. */
static bool restore(vent *v)
{
    char tmp[TMP_NAME_LEN];
    if (v->orig_link) {
        uint64_t rnd = 0;
        if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
            rnd = (uint64_t)sp_now_ms();
        snprintf(tmp, sizeof(tmp), ".sandpod-patch-%016llx.tmp", (unsigned long long)rnd);
        if (symlinkat(v->orig_target, v->dirfd, tmp) < 0)
            return false;
    } else if (stage(v->dirfd, v->rel, v->orig ? v->orig : "", v->orig_len, v->orig_mode,
                     &v->orig_st, tmp, NULL, NULL) < 0) {
        return false;
    }
    if (renameat(v->dirfd, tmp, v->dirfd, v->name) < 0) {
        unlinkat(v->dirfd, tmp, 0);
        return false;
    }
    return true;
}

/* Undo everything the commit did, newest first. `err` gets a note when
 * files had already changed. */
static void rollback(plan *p, sp_error **err)
{
    sp_buf failed = SP_BUF_INIT;
    bool touched = false;
    for (size_t i = p->n; i-- > 0;) {
        vent *v = p->v[i];
        bool ok = true;
        if (v->removed) {
            touched = true;
            ok = restore(v);
        } else if (v->placed) {
            touched = true;
            ok = v->orig_exists ? restore(v) : unlinkat(v->dirfd, v->name, 0) == 0;
        } else if (v->staged && v->tfd >= 0) {
            close(v->tfd);
            v->tfd = -1;
        } else if (v->staged && v->tmp[0]) {
            unlinkat(v->dirfd, v->tmp, 0);
        }
        if (!ok)
            sp_buf_printf(&failed, "%s%s", failed.len ? ", " : "", v->rel);
        v->placed = v->removed = v->staged = false;
    }
    for (size_t i = p->created.n; i-- > 0;) {
        cleanup_close int pfd = -1;
        cleanup_free char *name = NULL;
        if (sp_fs_open_parent(p->fs, p->created.v[i], false, &pfd, &name, NULL) == 0)
            unlinkat(pfd, name, AT_REMOVEDIR); /* fails, as it should, if not empty */
    }
    if (touched && err && *err) {
        char *msg = failed.len ? sp_xasprintf("%s; restoring the files already changed failed "
                                              "for: %s",
                                              (*err)->message, failed.data)
                               : sp_xasprintf("%s; the files already changed were restored",
                                              (*err)->message);
        free((*err)->message);
        (*err)->message = msg;
    }
    sp_buf_dispose(&failed);
}

static int commit(plan *p, sp_error **err)
{
    int r = 0;
    size_t unnamed = 0;
    /* Stage every new content beside its final place. */
    for (size_t i = 0; i < p->n && r == 0; i++) {
        vent *v = p->v[i];
        if (!v->write && !v->del)
            continue;
        if ((r = place(p, v, v->write, err)) < 0)
            break;
        if (v->write) {
            r = stage(v->dirfd, v->rel, v->data ? v->data : "", v->len, v->mode,
                      v->orig_exists ? &v->orig_st : NULL, v->tmp,
                      unnamed < MAX_UNNAMED ? &v->tfd : NULL, err);
            v->staged = r == 0;
            unnamed += v->tfd >= 0;
        }
    }
    /* Nothing may have changed since it was read. */
    for (size_t i = 0; i < p->n && r == 0; i++) {
        vent *v = p->v[i];
        if (!v->write && !v->del)
            continue;
        struct stat st;
        bool there = fstatat(v->dirfd, v->name, &st, AT_SYMLINK_NOFOLLOW) == 0;
        if (v->orig_exists && (!there || !same_file(&st, &v->orig_st)))
            r = sp_err_reason(
                err, SP_R_STALE,
                sp_err_set(err, SP_ERROR, EAGAIN,
                           "%s changed while the patch was being applied; nothing was changed",
                           v->rel));
        else if (!v->orig_exists && there)
            r = sp_err_set(err, SP_EEXISTS, EEXIST,
                           "%s appeared while the patch was being applied; nothing was changed",
                           v->rel);
    }
    /* The point of no return: renames, then deletes. */
    for (size_t i = 0; i < p->n && r == 0; i++) {
        vent *v = p->v[i];
        if (!v->write)
            continue;
        if (name_staged(v) < 0) {
            r = sp_err_errno(err, errno, "write", v->rel);
            break;
        }
        if (put_in_place(v, !v->orig_exists) < 0) {
            r = errno == EEXIST
                    ? sp_err_set(err, SP_EEXISTS, EEXIST,
                                 "%s appeared while the patch was being applied", v->rel)
                    : sp_err_errno(err, errno, "rename", v->rel);
            break;
        }
        v->placed = true;
        v->tmp[0] = '\0';
    }
    for (size_t i = 0; i < p->n && r == 0; i++) {
        vent *v = p->v[i];
        if (!v->del)
            continue;
        if (unlinkat(v->dirfd, v->name, 0) < 0 && errno != ENOENT) {
            r = sp_err_errno(err, errno, "delete", v->rel);
            break;
        }
        v->removed = true;
    }
    if (r < 0) {
        rollback(p, err);
        return r;
    }
    for (size_t i = 0; i < p->n_dirs; i++) {
        int dfd = openat(p->dirs[i].fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
    }
    return 0;
}

static void plan_dispose(plan *p)
{
    for (size_t i = 0; i < p->n; i++)
        vent_free(p->v[i]);
    free(p->v);
    for (size_t i = 0; i < p->n_dirs; i++) {
        close(p->dirs[i].fd);
        free(p->dirs[i].rel);
    }
    free(p->dirs);
    sp_strv_dispose(&p->created);
}

/* ------------------------------------------------------------ public -- */

static sp_patch_result *new_result(const pp_patch *pp, bool dry_run)
{
    sp_patch_result *res = sp_xcalloc(1, sizeof(*res));
    res->format = pp->format;
    res->dry_run = dry_run;
    res->n = pp->n;
    res->files = sp_xcalloc(pp->n ? pp->n : 1, sizeof(sp_patch_file));
    for (size_t i = 0; i < pp->n; i++) {
        const pp_op *op = &pp->ops[i];
        sp_patch_file *f = &res->files[i];
        f->action = op->action;
        f->path = sp_xstrdup(op->path);
        f->new_path = op->new_path ? sp_xstrdup(op->new_path) : NULL;
    }
    return res;
}

int sp_patch_parse(sp_patch_result **out, const char *patch, size_t len, const sp_patch_opts *opts,
                   sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_PATCH_OPTS_VERSION, "sp_patch_opts", err) < 0)
        return SP_EINVAL;
    if (!patch && len)
        return sp_err_set(err, SP_EINVAL, 0, "patch text is missing");
    pp_patch pp;
    int r = pp_parse(&pp, patch ? patch : "", len, opts ? opts->format : SP_PATCH_AUTO, err);
    if (r < 0)
        return r;
    sp_patch_result *res = new_result(&pp, true);
    for (size_t i = 0; i < pp.n; i++) {
        res->files[i].lines_added = pp.ops[i].added;
        res->files[i].lines_removed = pp.ops[i].removed;
        res->files[i].mode = pp.ops[i].mode;
    }
    pp_patch_dispose(&pp);
    *out = res;
    return 0;
}

/* `cd DIR &&` before the heredoc: DIR must be a folder inside the root
 * (a symlink to one is followed, as a shell would). */
static int check_workdir(sp_fs *fs, const char *dir, sp_error **err)
{
    sp_error *e = NULL;
    int fd = sp_fs_openat(fs, dir, O_RDONLY | O_DIRECTORY, 0, true, &e);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    int no = e ? e->sys_errno : 0;
    if (no == ENOENT) {
        sp_error_free(e);
        return sp_err_set(err, SP_ENOTFOUND, ENOENT,
                          "cd %s: no such folder in the workspace; nothing was changed", dir);
    }
    if (no == ENOTDIR) {
        sp_error_free(e);
        return sp_err_reason(
            err, SP_R_NOT_DIRECTORY,
            sp_err_set(err, SP_EINVAL, ENOTDIR, "cd %s: not a folder; nothing was changed", dir));
    }
    int r = pass_err(err, e);
    return sp_err_wrap(err, r, "cd %s", dir);
}

int sp_fs_apply_patch(sp_patch_result **out, sp_fs *fs, const char *patch, size_t len,
                      const sp_patch_opts *opts, sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_PATCH_OPTS_VERSION, "sp_patch_opts", err) < 0)
        return SP_EINVAL;
    if (!fs)
        return sp_err_set(err, SP_EINVAL, 0, "apply_patch: no filesystem handle");
    if (!patch && len)
        return sp_err_set(err, SP_EINVAL, 0, "patch text is missing");
    sp_patch_opts o = SP_PATCH_OPTS_INIT;
    if (opts)
        o = *opts;

    pp_patch pp;
    int r = pp_parse(&pp, patch ? patch : "", len, o.format, err);
    if (r < 0)
        return r;
    plan p;
    memset(&p, 0, sizeof(p));
    p.fs = fs;
    p.format = pp.format;
    p.allow_overwrite = o.allow_overwrite;
    sp_patch_result *res = new_result(&pp, o.dry_run);

    if (pp.workdir && (r = check_workdir(fs, pp.workdir, err)) < 0)
        goto done;
    if (!o.dry_run && pp.n && (r = sp_fs_check_writable(fs, pp.ops[0].path, err)) < 0)
        goto done;
    for (size_t i = 0; i < pp.n && r == 0; i++) {
        const pp_op *op = &pp.ops[i];
        sp_patch_file *f = &res->files[i];
        switch (op->action) {
        case SP_PATCH_ADD:
            r = op_add(&p, op, f, err);
            break;
        case SP_PATCH_DELETE:
            r = op_delete(&p, op, f, err);
            break;
        case SP_PATCH_UPDATE:
            r = op_update(&p, op, f, err);
            break;
        case SP_PATCH_MOVE:
        case SP_PATCH_COPY:
            r = op_move(&p, op, f, err);
            break;
        }
    }
    if (r == 0)
        r = finish_plan(&p, err);
    if (r == 0 && !o.dry_run)
        r = commit(&p, err);

done:
    plan_dispose(&p);
    pp_patch_dispose(&pp);
    if (r < 0) {
        sp_patch_result_free(res);
        return r;
    }
    *out = res;
    return 0;
}
