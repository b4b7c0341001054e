/* The contained filesystem: reads, atomic writes, delete, mkdir, stat and
 * list, on the handle of fs_handle.c. Every name is resolved by path.c;
 * this file only ever calls *at() functions on fds it got from there, with
 * single names. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "fs_internal.h"
#include "fdtree.h"

int sp_fs_prepare(sp_fs *fs, const char *path, char **out, sp_error **err)
{
    *out = NULL;
    if (!path)
        return sp_err_set(err, SP_EINVAL, 0, "path is missing");
    char *rel = NULL;
    int r = sp_fs_path_normalize(&rel, path, strlen(path), err);
    if (r < 0)
        return r;
    if (sp_fs_denied(fs, rel)) {
        r = sp_err_set(err, SP_EDENIED, 0, "path is hidden by the deny list: %s", rel);
        free(rel);
        return r;
    }
    *out = rel;
    return 0;
}

int sp_fs_check_writable(const sp_fs *fs, const char *rel, sp_error **err)
{
    if (fs->opts.read_only)
        return sp_err_set(err, SP_EREADONLY, EROFS, "workspace is read-only: %s", rel);
    return 0;
}

int sp_fs_check_new_path(sp_fs *fs, const char *rel, sp_error **err)
{
    size_t len = strlen(rel);
    if (!sp_utf8_valid(rel, len))
        return sp_err_set(err, SP_EINVAL, 0, "path is not valid UTF-8: %s", rel);
    unsigned depth = 1;
    const char *seg = rel;
    for (const char *p = rel;; p++) {
        if (*p == '/' || *p == '\0') {
            size_t slen = (size_t)(p - seg);
            if (slen > fs->opts.max_segment_len)
                return sp_err_set(err, SP_ETOOBIG, ENAMETOOLONG, "name longer than %u bytes: %.*s",
                                  fs->opts.max_segment_len, (int)slen, seg);
            if (*p == '\0')
                break;
            depth++;
            seg = p + 1;
        }
    }
    if (depth > fs->opts.max_path_depth)
        return sp_err_set(err, SP_ETOOBIG, 0, "path deeper than %u folders: %s",
                          fs->opts.max_path_depth, rel);
    return 0;
}

/* Open an existing regular file for reading. O_NONBLOCK keeps a fifo
 * planted by the container from hanging us. */
static int open_regular(sp_fs *fs, const char *rel, struct stat *st, sp_error **err)
{
    int fd = sp_fs_openat(fs, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0, true, err);
    if (fd < 0)
        return fd;
    if (fstat(fd, st) < 0) {
        int r = sp_err_errno(err, errno, "stat", rel);
        close(fd);
        return r;
    }
    if (S_ISDIR(st->st_mode)) {
        close(fd);
        return sp_err_set(err, SP_EINVAL, EISDIR, "is a folder, not a file: %s", rel);
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        return sp_err_set(err, SP_EINVAL, 0, "not a regular file: %s", rel);
    }
    int r = sp_fs_check_fd_denied(fs, fd, rel, err);
    if (r < 0) {
        close(fd);
        return r;
    }
    return fd;
}

int sp_fs_slurp_fd(int fd, const char *display, size_t limit, sp_buf *out, sp_error **err)
{
    for (;;) {
        if (limit && out->len >= limit)
            break;
        size_t want = 65536;
        if (limit && limit - out->len < want)
            want = limit - out->len;
        sp_buf_grow(out, want);
        ssize_t n = read(fd, out->data + out->len, want);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return sp_err_errno(err, errno, "read", display);
        }
        if (n == 0)
            break;
        out->len += (size_t)n;
        out->data[out->len] = '\0';
    }
    return 0;
}

/* ------------------------------------------------------------- reading -- */

struct line_reader {
    size_t offset, limit, max_line;
    size_t line_no; /* index of the line being read */
    size_t cur_len; /* bytes of that line seen so far */
    size_t returned, cut;
    sp_buf out;
};

static bool in_range(const struct line_reader *lr)
{
    return lr->line_no >= lr->offset && lr->line_no - lr->offset < lr->limit;
}

static void end_line(struct line_reader *lr, bool newline)
{
    if (in_range(lr)) {
        if (lr->cur_len > lr->max_line) {
            sp_buf_printf(&lr->out, "… [line cut: %zu bytes]", lr->cur_len);
            lr->cut++;
        }
        if (newline)
            sp_buf_addc(&lr->out, '\n');
        lr->returned++;
    }
    lr->line_no++;
    lr->cur_len = 0;
}

static void feed(struct line_reader *lr, const char *p, size_t n)
{
    const char *end = p + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *seg_end = nl ? nl : end;
        size_t seg = (size_t)(seg_end - p);
        if (in_range(lr) && lr->cur_len < lr->max_line) {
            size_t room = lr->max_line - lr->cur_len;
            sp_buf_add(&lr->out, p, sp_utf8_cut(p, seg, room));
        }
        lr->cur_len += seg;
        if (!nl)
            break;
        end_line(lr, true);
        p = nl + 1;
    }
}

static int binary_error(sp_error **err, const char *rel, const char *why)
{
    return sp_err_reason(
        err, SP_R_NOT_TEXT,
        sp_err_set(err, SP_EINVAL, 0,
                   "%s is %s; read its bytes with sp_fs_read_bytes() ('sandpod fs cat', "
                   "'sandpod fs read --base64') instead",
                   rel, why));
}

static int read_text(sp_fs_text **out, sp_fs *fs, const char *rel, size_t offset, size_t limit,
                     sp_error **err)
{
    struct stat st;
    cleanup_close int fd = open_regular(fs, rel, &st, err);
    if (fd < 0)
        return fd;

    struct line_reader lr = {offset, limit, fs->opts.max_line_bytes, 0, 0, 0, 0, SP_BUF_INIT};
    char buf[65536 + 4];
    size_t carry = 0; /* bytes of an incomplete UTF-8 sequence kept for the next chunk */
    bool any = false, last_nl = false;
    int ret = 0;
    for (;;) {
        ssize_t n = read(fd, buf + carry, sizeof(buf) - 4 - carry);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            ret = sp_err_errno(err, errno, "read", rel);
            goto done;
        }
        size_t have = carry + (size_t)n;
        if (n == 0) {
            if (carry) {
                ret = binary_error(err, rel, "not valid UTF-8");
                goto done;
            }
            break;
        }
        any = true;
        if (memchr(buf + carry, '\0', (size_t)n)) {
            ret = binary_error(err, rel, "a binary file");
            goto done;
        }
        /* Keep a trailing partial sequence (at most 3 bytes) back. */
        size_t valid = have, back = 0;
        while (back < 3 && back < have && ((unsigned char)buf[have - 1 - back] & 0xc0) == 0x80)
            back++;
        if (back < have) {
            unsigned char lead = (unsigned char)buf[have - 1 - back];
            size_t need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
            if (lead >= 0xc0 && need > back + 1)
                valid = have - 1 - back;
        }
        if (!sp_utf8_valid(buf, valid)) {
            ret = binary_error(err, rel, "not valid UTF-8");
            goto done;
        }
        feed(&lr, buf, valid);
        last_nl = valid > 0 ? buf[valid - 1] == '\n' : last_nl;
        carry = have - valid;
        memmove(buf, buf + valid, carry);
    }
    if (any && (!last_nl || lr.cur_len > 0))
        end_line(&lr, false);

    sp_fs_text *t = sp_xcalloc(1, sizeof(*t));
    t->path = sp_xstrdup(rel);
    t->content_len = lr.out.len;
    t->content = lr.out.data ? sp_buf_steal(&lr.out) : sp_xstrdup("");
    t->total_lines = lr.line_no;
    t->offset = offset;
    t->limit = limit;
    t->lines = lr.returned;
    t->lines_cut = lr.cut;
    t->truncated = lr.line_no > offset && lr.line_no - offset > lr.returned;
    *out = t;
done:
    sp_buf_dispose(&lr.out);
    return ret;
}

int sp_fs_read(sp_fs_text **out, sp_fs *fs, const char *path, const sp_fs_read_opts *opts,
               sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_FS_READ_OPTS_VERSION, "sp_fs_read_opts", err) < 0)
        return SP_EINVAL;
    sp_fs_read_opts o = SP_FS_READ_OPTS_INIT;
    if (opts)
        o = *opts;
    cleanup_free char *rel = NULL;
    int r = sp_fs_prepare(fs, path, &rel, err);
    if (r < 0)
        return r;
    return read_text(out, fs, rel, o.offset, o.limit ? o.limit : fs->opts.read_line_limit, err);
}

int sp_fs_view(sp_fs_text **out, sp_fs *fs, const char *path, long start, long end, sp_error **err)
{
    *out = NULL;
    if (start < 1)
        return sp_err_set(err, SP_EINVAL, 0, "view range starts at line 1, not %ld", start);
    if (end != -1 && end < start)
        return sp_err_set(err, SP_EINVAL, 0, "view range %ld:%ld ends before it starts", start,
                          end);
    cleanup_free char *rel = NULL;
    int r = sp_fs_prepare(fs, path, &rel, err);
    if (r < 0)
        return r;
    size_t limit = end == -1 ? SIZE_MAX - (size_t)start : (size_t)(end - start + 1);
    r = read_text(out, fs, rel, (size_t)(start - 1), limit, err);
    if (r == 0 && start > 1 && (size_t)start > (*out)->total_lines) {
        /* As Anthropic's view_range and the read_file tool: a start past
         * the end is a mistake, not an empty answer. */
        size_t total = (*out)->total_lines;
        sp_fs_text_free(*out);
        *out = NULL;
        return sp_err_set(err, SP_EINVAL, 0,
                          "view range starts at line %ld, past the end: %s has %zu line%s", start,
                          rel, total, total == 1 ? "" : "s");
    }
    return r;
}

void sp_fs_text_free(sp_fs_text *t)
{
    if (!t)
        return;
    free(t->path);
    free(t->content);
    free(t);
}

int sp_fs_read_bytes(sp_fs_bytes **out, sp_fs *fs, const char *path, uint64_t offset, size_t limit,
                     sp_error **err)
{
    *out = NULL;
    cleanup_free char *rel = NULL;
    int r = sp_fs_prepare(fs, path, &rel, err);
    if (r < 0)
        return r;
    struct stat st;
    cleanup_close int fd = open_regular(fs, rel, &st, err);
    if (fd < 0)
        return fd;
    if (!limit || limit > fs->opts.max_read_bytes)
        limit = fs->opts.max_read_bytes;

    sp_buf b = SP_BUF_INIT;
    sp_buf_grow(&b, 0);
    if (offset > 0 && lseek(fd, (off_t)offset, SEEK_SET) < 0) {
        sp_buf_dispose(&b);
        return sp_err_errno(err, errno, "seek", rel);
    }
    /* Read one byte more than asked: it tells whether more exists even when
     * the file grows while we read. */
    r = sp_fs_slurp_fd(fd, rel, limit + 1, &b, err);
    if (r < 0) {
        sp_buf_dispose(&b);
        return r;
    }
    sp_fs_bytes *res = sp_xcalloc(1, sizeof(*res));
    res->path = sp_steal_ptr_(&rel);
    res->truncated = b.len > limit;
    res->len = res->truncated ? limit : b.len;
    res->data = (uint8_t *)sp_buf_steal(&b);
    res->data[res->len] = '\0';
    res->size = (uint64_t)st.st_size;
    res->offset = offset;
    *out = res;
    return 0;
}

void sp_fs_bytes_free(sp_fs_bytes *b)
{
    if (!b)
        return;
    free(b->path);
    free(b->data);
    free(b);
}

/* ------------------------------------------------------------- writing -- */

static int copy_fd(int from, int to, const char *display, sp_error **err)
{
    for (;;) {
        ssize_t n = copy_file_range(from, NULL, to, NULL, 1 << 30, 0);
        if (n == 0)
            return 0;
        if (n > 0)
            continue;
        if (errno == EINTR)
            continue;
        if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
            return sp_err_errno(err, errno, "write", display);
        break;
    }
    char buf[65536];
    for (;;) {
        ssize_t n = read(from, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return sp_err_errno(err, errno, "read", display);
        if (n == 0)
            return 0;
        if (sp_write_all(to, buf, (size_t)n) < 0)
            return sp_err_errno(err, errno, "write", display);
    }
}

int sp_fs_link_tmpfile(int tfd, int dirfd, const char *name)
{
    char proc[64];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", tfd);
    if (linkat(AT_FDCWD, proc, dirfd, name, AT_SYMLINK_FOLLOW) == 0)
        return 0;
    return linkat(tfd, "", dirfd, name, AT_EMPTY_PATH);
}

/* Replace (dirfd, name) atomically with prefix_fd's content (if >= 0)
 * followed by data. */
static int replace_at(sp_fs *fs, int dirfd, const char *name, const char *display, int prefix_fd,
                      const void *data, size_t len, bool must_not_exist, sp_error **err)
{
    struct stat st;
    bool exists = fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (exists && must_not_exist)
        return sp_err_set(err, SP_EEXISTS, EEXIST, "already exists: %s", display);
    if (exists && S_ISDIR(st.st_mode))
        return sp_err_set(err, SP_EINVAL, EISDIR, "is a folder, not a file: %s", display);
    struct stat pst;
    if (!exists && fstat(dirfd, &pst) < 0)
        return sp_err_errno(err, errno, "stat", display);

    uint64_t rnd = 0;
    if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
        rnd = (uint64_t)sp_now_ms() ^ ((uint64_t)getpid() << 32);
    char tmp[64];
    snprintf(tmp, sizeof(tmp), ".sandpod-%016llx.tmp", (unsigned long long)rnd);

    /* The data goes to an unnamed file (O_TMPFILE) that is given a name
     * only right before the rename, so a process killed while writing
     * leaves nothing in the folder; where the filesystem has no O_TMPFILE,
     * to a named temp file. */
    int ret = 0;
    int tfd = openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    bool unnamed = tfd >= 0, named = !unnamed;
    if (!unnamed)
        tfd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (tfd < 0)
        return sp_err_errno(err, errno, "write", display);
    if (prefix_fd >= 0 && (ret = copy_fd(prefix_fd, tfd, display, err)) < 0)
        goto fail;
    if (sp_write_all(tfd, data, len) < 0) {
        ret = sp_err_errno(err, errno, "write", display);
        goto fail;
    }
    mode_t mode = exists && S_ISREG(st.st_mode) ? (st.st_mode & 07777) : 0644;
    if (fchmod(tfd, mode) < 0) {
        ret = sp_err_errno(err, errno, "chmod", display);
        goto fail;
    }
    /* As root, keep the owner of a replaced file, and give a new one the
     * owner of its folder, so the container's user can still write it. */
    if (geteuid() == 0) {
        uid_t uid = exists ? st.st_uid : pst.st_uid;
        gid_t gid = exists ? st.st_gid : pst.st_gid;
        (void)!fchown(tfd, uid, gid);
        if (mode & 06000)
            (void)!fchmod(tfd, mode); /* chown clears setuid/setgid */
    }
    if (fsync(tfd) < 0) {
        ret = sp_err_errno(err, errno, "write", display);
        goto fail;
    }
    if (unnamed) {
        if (sp_fs_link_tmpfile(tfd, dirfd, tmp) < 0) {
            ret = sp_err_errno(err, errno, "write", display);
            goto fail;
        }
        named = true;
    }
    close(tfd);
    tfd = -1;
    if (renameat2(dirfd, tmp, dirfd, name, must_not_exist ? RENAME_NOREPLACE : 0) < 0) {
        ret = errno == EEXIST ? sp_err_set(err, SP_EEXISTS, EEXIST, "already exists: %s", display)
                              : sp_err_errno(err, errno, "rename", display);
        goto fail;
    }
    int dfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return 0;
fail:
    if (tfd >= 0)
        close(tfd);
    if (named)
        unlinkat(dirfd, tmp, 0);
    return ret;
}

int sp_fs_replace_at(sp_fs *fs, int dirfd, const char *name, const char *display, const void *data,
                     size_t len, bool must_not_exist, sp_error **err)
{
    return replace_at(fs, dirfd, name, display, -1, data, len, must_not_exist, err);
}

/* The outermost missing folder above `rel` (NULL when its parent exists):
 * what a write that creates parents must take away again when it fails. */
static char *first_missing_parent(sp_fs *fs, const char *rel)
{
    char *missing = NULL;
    cleanup_free char *dir = sp_xstrdup(rel);
    for (char *slash; (slash = strrchr(dir, '/'));) {
        *slash = '\0';
        int fd = sp_fs_openat(fs, dir, O_PATH | O_DIRECTORY, 0, true, NULL);
        if (fd >= 0)
            close(fd);
        if (fd != SP_ENOTFOUND)
            break;
        free(missing);
        missing = sp_xstrdup(dir);
    }
    return missing;
}

/* Remove the folders from `rel`'s parent up to `top` that a failed write
 * created; only empty ones go, so nothing another process put there is
 * lost. */
static void remove_new_parents(sp_fs *fs, const char *rel, const char *top)
{
    cleanup_free char *dir = sp_xstrdup(rel);
    size_t top_len = strlen(top);
    for (char *slash; (slash = strrchr(dir, '/')) && (size_t)(slash - dir) >= top_len;) {
        *slash = '\0';
        cleanup_close int dirfd = -1;
        cleanup_free char *name = NULL;
        if (sp_fs_open_parent(fs, dir, false, &dirfd, &name, NULL) == 0)
            (void)unlinkat(dirfd, name, AT_REMOVEDIR);
    }
}

int sp_fs_write_bytes(size_t *bytes_written, sp_fs *fs, const char *path, const void *data,
                      size_t len, const sp_fs_write_opts *opts, sp_error **err)
{
    if (bytes_written)
        *bytes_written = 0;
    if (SP_OPTS_CHECK(opts, 1, SP_FS_WRITE_OPTS_VERSION, "sp_fs_write_opts", err) < 0)
        return SP_EINVAL;
    sp_fs_write_opts o = SP_FS_WRITE_OPTS_INIT;
    if (opts)
        o = *opts;
    cleanup_free char *rel = NULL;
    int r = sp_fs_prepare(fs, path, &rel, err);
    if (r < 0)
        return r;
    if ((r = sp_fs_check_writable(fs, rel, err)) < 0)
        return r;
    if (len > fs->opts.max_write_bytes)
        return sp_err_set(err, SP_ETOOBIG, EFBIG,
                          "write of %zu bytes to %s is over the limit of %zu bytes", len, rel,
                          fs->opts.max_write_bytes);
    if (!data && len)
        return sp_err_set(err, SP_EINVAL, 0, "no data to write to %s", rel);

    /* Follow a final symlink lexically, re-resolving each hop from the
     * root: whatever the link says, the write lands beneath the root. */
    for (int hops = 0;; hops++) {
        cleanup_close int dirfd = -1;
        cleanup_free char *name = NULL;
        int pr = sp_fs_open_parent(fs, rel, false, &dirfd, &name, NULL);
        struct stat st;
        bool exists = pr == 0 && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
        if (!exists && (r = sp_fs_check_new_path(fs, rel, err)) < 0)
            return r;
        if (exists && S_ISLNK(st.st_mode)) {
            if (hops >= 40)
                return sp_err_errno(err, ELOOP, "write", rel);
            char target[PATH_MAX];
            ssize_t n = readlinkat(dirfd, name, target, sizeof(target) - 1);
            if (n <= 0)
                return sp_err_errno(err, n < 0 ? errno : EINVAL, "readlink", rel);
            target[n] = '\0';
            cleanup_free char *joined = NULL;
            if (target[0] == '/' && !sp_fs_workspace_tail(target)) {
                return sp_fs_image_error(err, rel, target);
            } else if (target[0] == '/') {
                joined = sp_xstrdup(target);
            } else {
                const char *slash = strrchr(rel, '/');
                joined = slash ? sp_xasprintf("%.*s/%s", (int)(slash - rel), rel, target)
                               : sp_xstrdup(target);
            }
            char *next = NULL;
            r = sp_fs_path_normalize(&next, joined, strlen(joined), err);
            if (r < 0)
                return sp_err_wrap(err, r, "symlink %s points outside", rel);
            free(rel);
            rel = next;
            if (sp_fs_denied(fs, rel))
                return sp_err_set(err, SP_EDENIED, 0, "path is hidden by the deny list: %s", rel);
            continue;
        }
        cleanup_free char *new_top = NULL;
        if (pr < 0) {
            /* Parent missing (or not a folder): create it if allowed. */
            if (o.no_create_parents)
                return sp_fs_open_parent(fs, rel, false, &dirfd, &name, err);
            new_top = first_missing_parent(fs, rel);
            r = sp_fs_open_parent(fs, rel, true, &dirfd, &name, err);
            if (r < 0) {
                if (new_top)
                    remove_new_parents(fs, rel, new_top);
                return r;
            }
            exists = false;
        }
        cleanup_close int prefix = -1;
        if (o.mode == SP_FS_APPEND && exists) {
            if (!S_ISREG(st.st_mode))
                return sp_err_set(err, SP_EINVAL, 0, "not a regular file: %s", rel);
            prefix = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
            if (prefix < 0)
                return sp_err_errno(err, errno, "open", rel);
        }
        r = replace_at(fs, dirfd, name, rel, prefix, data, len, o.mode == SP_FS_CREATE, err);
        if (r < 0) {
            if (new_top)
                remove_new_parents(fs, rel, new_top);
            return r;
        }
        if (bytes_written)
            *bytes_written = len;
        return 0;
    }
}

int sp_fs_write(size_t *bytes_written, sp_fs *fs, const char *path, const char *text, size_t len,
                const sp_fs_write_opts *opts, sp_error **err)
{
    if (text && !sp_utf8_valid(text, len))
        return sp_err_reason(
            err, SP_R_NOT_TEXT,
            sp_err_set(err, SP_EINVAL, 0,
                       "content for %s is not valid UTF-8; use write_bytes for binary data",
                       path ? path : "(null)"));
    return sp_fs_write_bytes(bytes_written, fs, path, text, len, opts, err);
}

/* -------------------------------------------------- delete and mkdir -- */

/* sp_tree_remove names paths from the folder it was given ("delete: x/y:
 * why"); say them from the workspace root, as every other message here
 * does, by putting rel's folder part before the path. */
static int path_from_root(sp_error **err, int code, const char *rel, const char *name)
{
    size_t dir_len = strlen(rel) - strlen(name);
    if (!err || !*err || dir_len == 0)
        return code;
    const char *msg = (*err)->message;
    const char *at = strstr(msg, ": ");
    if (!at)
        return code;
    at += 2;
    char *full = sp_xasprintf("%.*s%.*s%s", (int)(at - msg), msg, (int)dir_len, rel, at);
    free((*err)->message);
    (*err)->message = full;
    return code;
}

int sp_fs_delete(sp_fs *fs, const char *path, bool recursive, sp_error **err)
{
    cleanup_free char *rel = NULL;
    int r = sp_fs_prepare(fs, path, &rel, err);
    if (r < 0)
        return r;
    if (strcmp(rel, ".") == 0)
        return sp_err_set(err, SP_EINVAL, 0, "refusing to delete the workspace root");
    if ((r = sp_fs_check_writable(fs, rel, err)) < 0)
        return r;
    cleanup_close int dirfd = -1;
    cleanup_free char *name = NULL;
    if ((r = sp_fs_open_parent(fs, rel, false, &dirfd, &name, err)) < 0)
        return r;
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return sp_err_errno(err, errno, "delete", rel);
    if (!S_ISDIR(st.st_mode)) {
        if (unlinkat(dirfd, name, 0) < 0)
            return sp_err_errno(err, errno, "delete", rel);
        return 0;
    }
    if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0)
        return 0;
    if (errno != ENOTEMPTY && errno != EEXIST)
        return sp_err_errno(err, errno, "delete", rel);
    if (!recursive)
        return sp_err_set(err, SP_EINVAL, ENOTEMPTY,
                          "folder is not empty: %s (delete it recursively)", rel);
    /* Whatever the workload swaps in meanwhile is removed, never followed. */
    if ((r = sp_tree_remove(dirfd, name, 0, err)) < 0)
        return path_from_root(err, r, rel, name);
    return 0;
}

int sp_fs_mkdir(sp_fs *fs, const char *path, bool parents, bool exist_ok, sp_error **err)
{
    cleanup_free char *rel = NULL;
    int r = sp_fs_prepare(fs, path, &rel, err);
    if (r < 0)
        return r;
    if (strcmp(rel, ".") == 0)
        return exist_ok ? 0 : sp_err_set(err, SP_EEXISTS, EEXIST, "already exists: .");
    if ((r = sp_fs_check_writable(fs, rel, err)) < 0)
        return r;
    /* Limits apply to what gets created, so check them before any parent
     * is made; an existing folder is answered first. */
    int efd = sp_fs_openat(fs, rel, O_PATH, 0, false, NULL);
    if (efd < 0 && (r = sp_fs_check_new_path(fs, rel, err)) < 0)
        return r;
    if (efd >= 0)
        close(efd);
    cleanup_close int dirfd = -1;
    cleanup_free char *name = NULL;
    if ((r = sp_fs_open_parent(fs, rel, parents, &dirfd, &name, err)) < 0)
        return r;
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        bool isdir = S_ISDIR(st.st_mode);
        if (S_ISLNK(st.st_mode)) {
            int fd = sp_fs_openat(fs, rel, O_PATH | O_DIRECTORY, 0, true, NULL);
            isdir = fd >= 0;
            if (fd >= 0)
                close(fd);
        }
        if (isdir && exist_ok)
            return 0;
        return sp_err_set(err, SP_EEXISTS, EEXIST, "already exists: %s", rel);
    }
    if (mkdirat(dirfd, name, 0755) < 0) {
        if (errno == EEXIST && exist_ok)
            return 0;
        return sp_err_errno(err, errno, "mkdir", rel);
    }
    struct stat pst;
    if (geteuid() == 0 && fstat(dirfd, &pst) == 0)
        (void)!fchownat(dirfd, name, pst.st_uid, pst.st_gid, AT_SYMLINK_NOFOLLOW);
    return 0;
}

/* ------------------------------------------------------------ metadata -- */

static int64_t ts_ns(struct timespec t)
{
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Whether this process may access the file open as `fd` with `mode`:
 * asked of the inode itself through /proc, so no name is resolved again. */
static bool fd_access(int fd, int mode)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
    return faccessat(AT_FDCWD, p, mode, AT_EACCESS) == 0;
}

/* Birth time of (dirfd, name) ("" with AT_EMPTY_PATH: dirfd itself), when
 * the file system keeps one. */
static void fill_btime(sp_fs_info *s, int dirfd, const char *name, int flags)
{
    struct statx sx;
    if (statx(dirfd, name, flags, STATX_BTIME, &sx) == 0 && (sx.stx_mask & STATX_BTIME))
        s->btime_ns = (int64_t)sx.stx_btime.tv_sec * 1000000000 + sx.stx_btime.tv_nsec;
}

/* What this process may do with the file open as fd (for a symlink: with
 * its target, which is what a read or write through it reaches). */
static void fill_access(sp_fs *fs, sp_fs_info *s, int fd)
{
    if (fd < 0)
        return;
    s->readable = fd_access(fd, R_OK);
    s->writable = !fs->opts.read_only && fd_access(fd, W_OK);
}

/* An info from an lstat/fstat of the object; btime and access are filled
 * by the caller. */
static sp_fs_info *info_new(char *rel, const struct stat *st)
{
    sp_fs_info *s = sp_xcalloc(1, sizeof(*s));
    s->path = rel;
    s->type = sp_fs_type_of(st->st_mode);
    s->size = (uint64_t)st->st_size;
    s->mode = st->st_mode & 07777;
    s->mtime_ns = ts_ns(st->st_mtim);
    s->atime_ns = ts_ns(st->st_atim);
    s->ctime_ns = ts_ns(st->st_ctim);
    s->dev = (uint64_t)st->st_dev;
    s->ino = (uint64_t)st->st_ino;
    return s;
}

int sp_fs_stat(sp_fs_info **out, sp_fs *fs, const char *path, sp_error **err)
{
    *out = NULL;
    cleanup_free char *rel = NULL;
    int r = sp_fs_prepare(fs, path, &rel, err);
    if (r < 0)
        return r;
    struct stat st;
    if (strcmp(rel, ".") == 0) {
        if (fstat(fs->rootfd, &st) < 0)
            return sp_err_errno(err, errno, "stat", rel);
        sp_fs_info *s = info_new(sp_steal_ptr_(&rel), &st);
        fill_btime(s, fs->rootfd, "", AT_EMPTY_PATH);
        fill_access(fs, s, fs->rootfd);
        *out = s;
        return 0;
    }
    cleanup_close int dirfd = -1;
    cleanup_free char *name = NULL;
    if ((r = sp_fs_open_parent(fs, rel, false, &dirfd, &name, err)) < 0)
        return r;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return sp_err_errno(err, errno, "stat", rel);
    char *target = NULL;
    if (S_ISLNK(st.st_mode)) {
        char buf[PATH_MAX];
        ssize_t n = readlinkat(dirfd, name, buf, sizeof(buf) - 1);
        if (n < 0)
            return sp_err_errno(err, errno, "readlink", rel);
        target = sp_xstrndup(buf, (size_t)n);
    }
    /* The object itself for a file or folder; for a symlink, its target as
     * a read through it would reach it (never one in the image). */
    bool image = target && target[0] == '/' && !sp_fs_workspace_tail(target);
    cleanup_close int fd = !target ? openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC)
                           : image ? -1
                                   : sp_fs_openat(fs, rel, O_PATH, 0, true, NULL);
    sp_fs_info *s = info_new(sp_steal_ptr_(&rel), &st);
    fill_btime(s, dirfd, name, AT_SYMLINK_NOFOLLOW);
    fill_access(fs, s, fd);
    s->link_target = target;
    s->target_escapes = target && fd < 0;
    s->target_in_image = image;
    *out = s;
    return 0;
}

int sp_fs_stat_target(sp_fs_info **out, sp_fs *fs, const char *path, sp_error **err)
{
    *out = NULL;
    cleanup_free char *rel = NULL;
    int r = sp_fs_prepare(fs, path, &rel, err);
    if (r < 0)
        return r;
    cleanup_close int fd = sp_fs_openat(fs, rel, O_PATH, 0, true, err);
    if (fd < 0)
        return fd;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return sp_err_errno(err, errno, "stat", rel);
    sp_fs_info *s = info_new(sp_steal_ptr_(&rel), &st);
    fill_btime(s, fd, "", AT_EMPTY_PATH);
    fill_access(fs, s, fd);
    *out = s;
    return 0;
}

void sp_fs_info_free(sp_fs_info *st)
{
    if (!st)
        return;
    free(st->path);
    free(st->link_target);
    free(st);
}

bool sp_fs_exists(sp_fs *fs, const char *path)
{
    sp_fs_info *st = NULL;
    bool ok = sp_fs_stat(&st, fs, path, NULL) == 0;
    sp_fs_info_free(st);
    return ok;
}

struct list_ctx {
    sp_fs_entries *res;
    size_t cap, max;
    unsigned max_depth;
    size_t skip;        /* bytes of "path/" in root-relative paths */
    sp_globset *ignore; /* what not to list or enter */
    bool default_skip;  /* ignore holds the default folders: files never match */
};

/* The cache directory tagging convention (bford.info/cachedir): Cargo,
 * pip and others mark their caches so that tools can leave them out. */
static bool has_cachedir_tag(int dirfd, const char *name)
{
    static const char sig[] = "Signature: 8a477f597d28d172789f06886806bc55";
    cleanup_close int dfd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return false;
    cleanup_close int fd =
        openat(dfd, "CACHEDIR.TAG", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    char buf[sizeof(sig) - 1];
    return fd >= 0 && read(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf) &&
           memcmp(buf, sig, sizeof(buf)) == 0;
}

/* True when the entry is on the skip list: a folder then is not entered,
 * a file not listed. */
static bool list_skipped(const struct list_ctx *c, int dirfd, const char *name, const char *rel,
                         bool is_dir)
{
    if (!c->ignore || (c->default_skip && !is_dir))
        return false;
    if (sp_globset_match(c->ignore, strlen(rel) >= c->skip ? rel + c->skip : rel))
        return true;
    return c->default_skip && has_cachedir_tag(dirfd, name);
}

static int list_one(void *vctx, int dirfd, const char *name, const char *rel, const struct stat *st,
                    unsigned depth, sp_error **err)
{
    struct list_ctx *c = vctx;
    bool skipped = list_skipped(c, dirfd, name, rel, S_ISDIR(st->st_mode));
    if (skipped && !S_ISDIR(st->st_mode))
        return SP_WALK_CONTINUE;
    if (c->res->n >= c->max) {
        c->res->truncated = true;
        return SP_WALK_STOP;
    }
    if (c->res->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 64;
        c->res->v = sp_xrealloc(c->res->v, c->cap * sizeof(sp_fs_entry));
    }
    sp_fs_entry *e = &c->res->v[c->res->n++];
    memset(e, 0, sizeof(*e));
    e->name = sp_xstrdup(name);
    e->path = sp_xstrdup(rel);
    e->type = sp_fs_type_of(st->st_mode);
    e->size = (uint64_t)st->st_size;
    e->mode = st->st_mode & 07777;
    e->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    e->depth = depth;
    if (S_ISLNK(st->st_mode)) {
        char buf[PATH_MAX];
        ssize_t n = readlinkat(dirfd, name, buf, sizeof(buf) - 1);
        e->link_target = sp_xstrndup(buf, n > 0 ? (size_t)n : 0);
    }
    if (skipped) {
        e->contents_skipped = depth < c->max_depth;
        return SP_WALK_SKIP;
    }
    return SP_WALK_CONTINUE;
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const sp_fs_entry *)a)->path, ((const sp_fs_entry *)b)->path);
}

int sp_fs_list(sp_fs_entries **out, sp_fs *fs, const char *path, const sp_fs_list_opts *opts,
               sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_FS_LIST_OPTS_VERSION, "sp_fs_list_opts", err) < 0)
        return SP_EINVAL;
    sp_fs_list_opts o = SP_FS_LIST_OPTS_INIT;
    if (opts && opts->version >= 2)
        o = *opts;
    else if (opts) /* version 1 ends before `ignore` */
        memcpy(&o, opts, offsetof(sp_fs_list_opts, ignore));
    cleanup_free char *rel = NULL;
    int r = sp_fs_prepare(fs, path ? path : ".", &rel, err);
    if (r < 0)
        return r;
    static const char *const defaults[] = {SP_FS_LIST_SKIP_DEFAULT};
    const char *const *ignore = o.ignore ? o.ignore : defaults;
    size_t n_ignore = 0;
    if (o.ignore)
        while (o.ignore[n_ignore])
            n_ignore++;
    else
        n_ignore = sizeof(defaults) / sizeof(defaults[0]);
    struct list_ctx c = {
        .max = o.max_entries ? o.max_entries : 100000,
        .max_depth = o.depth ? o.depth : 1,
        .skip = strcmp(rel, ".") == 0 ? 0 : strlen(rel) + 1,
        .default_skip = !o.ignore,
    };
    if (n_ignore && (r = sp_globset_compile(&c.ignore, ignore, n_ignore, err)) < 0)
        return sp_err_wrap(err, r, "list ignore");
    sp_fs_entries *res = sp_xcalloc(1, sizeof(*res));
    c.res = res;
    sp_walk_opts wo = {.max_depth = c.max_depth};
    r = sp_fs_walk(fs, rel, &wo, list_one, &c, err);
    sp_globset_free(c.ignore);
    if (r < 0) {
        sp_fs_entries_free(res);
        if (err && *err && (*err)->sys_errno == ENOTDIR)
            return sp_err_set(err, SP_EINVAL, ENOTDIR, "not a folder: %s", rel);
        return r;
    }
    if (res->n)
        qsort(res->v, res->n, sizeof(sp_fs_entry), cmp_entry);
    *out = res;
    return 0;
}

void sp_fs_entries_free(sp_fs_entries *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->n; i++) {
        free(e->v[i].name);
        free(e->v[i].path);
        free(e->v[i].link_target);
    }
    free(e->v);
    free(e);
}
