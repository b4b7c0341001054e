/* Path normalization and contained resolution beneath a root fd.
 *
 * This file is the security boundary of the host-side tools: every path a
 * tool names is turned into an fd here, and nothing else in the tree opens a
 * workspace path by name. */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "path.h"

#define MAX_SYMLINK_HOPS 40

int sp_fs_path_normalize(char **out, const char *path, size_t len, sp_error **err)
{
    *out = NULL;
    if (!path)
        return sp_err_set(err, SP_EINVAL, 0, "path is missing");
    if (memchr(path, '\0', len))
        return sp_err_set(err, SP_EINVAL, 0, "path contains a NUL byte");

    const char *p = path;
    const char *end = path + len;
    size_t mlen = strlen(SP_WORKSPACE_MOUNT);
    if (len > 0 && path[0] == '/') {
        if (len >= mlen && memcmp(path, SP_WORKSPACE_MOUNT, mlen) == 0 &&
            (len == mlen || path[mlen] == '/')) {
            p = path + mlen;
        } else {
            return sp_err_set(err, SP_EESCAPE, 0, "absolute path outside the workspace: %.*s",
                              (int)len, path);
        }
    }

    /* Lexical normalization: `.` and empty components vanish and `..` pops
     * the previous component, so the kernel never sees `..` at all. */
    sp_buf b = SP_BUF_INIT;
    while (p < end) {
        const char *slash = memchr(p, '/', (size_t)(end - p));
        const char *cend = slash ? slash : end;
        size_t clen = (size_t)(cend - p);
        if (clen == 0 || (clen == 1 && p[0] == '.')) {
            /* skip */
        } else if (clen == 2 && p[0] == '.' && p[1] == '.') {
            if (b.len == 0) {
                sp_buf_dispose(&b);
                return sp_err_set(err, SP_EESCAPE, 0, "path escapes the workspace: %.*s", (int)len,
                                  path);
            }
            char *last = memrchr(b.data, '/', b.len);
            b.len = last ? (size_t)(last - b.data) : 0;
            b.data[b.len] = '\0';
        } else {
            if (b.len)
                sp_buf_addc(&b, '/');
            sp_buf_add(&b, p, clen);
        }
        p = cend + (slash ? 1 : 0);
    }
    if (b.len == 0)
        sp_buf_adds(&b, ".");
    *out = sp_buf_steal(&b);
    return 0;
}

char *sp_path_join(const char *dir, const char *name)
{
    if (!dir || !*dir || strcmp(dir, ".") == 0)
        return sp_xstrdup(name);
    return sp_xasprintf("%s/%s", dir, name);
}

/* -1 unknown, 0 missing (ENOSYS or blocked), 1 present. */
static _Atomic int openat2_state = -1;

static long sys_openat2(int dirfd, const char *path, struct open_how *how)
{
    return syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
}

static int escape_error(sp_error **err, const char *rel)
{
    return sp_err_set(err, SP_EESCAPE, EXDEV, "path escapes the workspace: %s", rel);
}

const char *sp_fs_workspace_tail(const char *target)
{
    size_t mlen = strlen(SP_WORKSPACE_MOUNT);
    if (strncmp(target, SP_WORKSPACE_MOUNT, mlen) != 0 || (target[mlen] && target[mlen] != '/'))
        return NULL;
    const char *t = target + mlen;
    while (*t == '/')
        t++;
    return t;
}

int sp_fs_image_error(sp_error **err, const char *rel, const char *target)
{
    return sp_err_set(err, SP_EESCAPE, EXDEV,
                      "path escapes the workspace: %s (a symlink points into the container's "
                      "image: %s; only targets under " SP_WORKSPACE_MOUNT "/ are followed)",
                      rel, target);
}

/* The component walk used where openat2 is missing. Contract: every open is
 * relative to an fd we hold and uses O_NOFOLLOW; a symlink is read through
 * an O_PATH fd on the link itself (so it cannot be swapped between the check
 * and the read) and its target spliced into the remaining path; `..` pops
 * our own stack of folder fds and never passes the root; absolute targets
 * are resolved as the container sees them: one under /workspace/ restarts
 * at the root (our stack is popped to it), any other is refused as
 * pointing into the container's image. The kernel is never asked to
 * resolve more than one name. */
static int openat_walk(sp_fs *fs, const char *rel, int flags, mode_t mode, bool follow_last,
                       sp_error **err)
{
    int stack_cap = 16, depth = 0, hops = 0, ret = -1;
    int *stack = sp_xmalloc(sizeof(int) * (size_t)stack_cap);
    sp_buf rest = SP_BUF_INIT;
    sp_buf comp = SP_BUF_INIT;

    stack[0] = fcntl(fs->rootfd, F_DUPFD_CLOEXEC, 0);
    if (stack[0] < 0) {
        ret = sp_err_errno(err, errno, "open", rel);
        goto done;
    }
    sp_buf_adds(&rest, rel);

    for (;;) {
        /* Pop the next component off the front of rest. */
        char *r = rest.data;
        while (*r == '/')
            r++;
        if (*r == '\0') {
            /* Path ended on a folder (root, or after `..`/`.`): open it. */
            int fd = openat(stack[depth], ".", flags | O_CLOEXEC, mode);
            if (fd < 0)
                ret = sp_err_errno(err, errno, "open", rel);
            else
                ret = fd;
            goto done;
        }
        char *slash = strchr(r, '/');
        size_t clen = slash ? (size_t)(slash - r) : strlen(r);
        comp.len = 0;
        sp_buf_add(&comp, r, clen);
        char *after = r + clen;
        while (*after == '/')
            after++;
        bool last = *after == '\0';
        memmove(rest.data, after, strlen(after) + 1);
        rest.len = strlen(rest.data);

        if (strcmp(comp.data, ".") == 0)
            continue;
        if (strcmp(comp.data, "..") == 0) {
            if (depth == 0) {
                ret = escape_error(err, rel);
                goto done;
            }
            close(stack[depth--]);
            continue;
        }

        int fd;
        if (last && !(flags & O_PATH)) {
            fd = openat(stack[depth], comp.data, flags | O_NOFOLLOW | O_CLOEXEC, mode);
            if (fd >= 0) {
                ret = fd;
                goto done;
            }
            /* A final symlink shows as ELOOP under O_NOFOLLOW, or as ENOTDIR
             * when O_DIRECTORY is asked for too: look at the name itself. */
            int saved = errno;
            fd = -1;
            if (saved == ELOOP || saved == ENOTDIR) {
                fd = openat(stack[depth], comp.data, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                struct stat lst;
                if (fd >= 0 && (fstat(fd, &lst) < 0 || !S_ISLNK(lst.st_mode))) {
                    close(fd);
                    fd = -1;
                }
            }
            if (fd < 0) {
                ret = sp_err_errno(err, saved, "open", rel);
                goto done;
            }
            if (!follow_last) {
                close(fd);
                ret = sp_err_set(err, SP_EINVAL, ELOOP, "open: %s: is a symlink", rel);
                goto done;
            }
        } else {
            /* O_PATH: open the name itself and judge its type below. */
            fd = openat(stack[depth], comp.data,
                        (last ? flags & ~O_DIRECTORY : O_PATH) | O_NOFOLLOW | O_CLOEXEC, 0);
        }
        if (fd < 0) {
            ret = sp_err_errno(err, errno, "open", rel);
            goto done;
        }
        struct stat st;
        if (fstat(fd, &st) < 0) {
            ret = sp_err_errno(err, errno, "stat", rel);
            close(fd);
            goto done;
        }
        if (S_ISLNK(st.st_mode) && (!last || follow_last)) {
            if (++hops > MAX_SYMLINK_HOPS) {
                close(fd);
                ret = sp_err_errno(err, ELOOP, "open", rel);
                goto done;
            }
            char target[PATH_MAX];
            ssize_t n = readlinkat(fd, "", target, sizeof(target) - 1);
            close(fd);
            if (n < 0) {
                ret = sp_err_errno(err, errno, "readlink", rel);
                goto done;
            }
            target[n] = '\0';
            if (n == 0) {
                ret = escape_error(err, rel);
                goto done;
            }
            const char *tail = target;
            if (target[0] == '/') {
                /* The container made it: /workspace/... is the root, as the
                 * container sees it; anything else lies in its image. */
                tail = sp_fs_workspace_tail(target);
                if (!tail) {
                    ret = sp_fs_image_error(err, rel, target);
                    goto done;
                }
                while (depth > 0)
                    close(stack[depth--]);
            }
            /* Splice: rest = target + "/" + rest. */
            sp_buf nr = SP_BUF_INIT;
            sp_buf_adds(&nr, *tail ? tail : ".");
            if (rest.len) {
                sp_buf_addc(&nr, '/');
                sp_buf_add(&nr, rest.data, rest.len);
            }
            sp_buf_dispose(&rest);
            rest = nr;
            continue;
        }
        if (last) {
            if ((flags & O_DIRECTORY) && !S_ISDIR(st.st_mode)) {
                close(fd);
                ret = sp_err_errno(err, ENOTDIR, "open", rel);
                goto done;
            }
            ret = fd;
            goto done;
        }
        if (!S_ISDIR(st.st_mode)) {
            close(fd);
            ret = sp_err_errno(err, ENOTDIR, "open", rel);
            goto done;
        }
        if (depth + 1 >= stack_cap) {
            stack_cap *= 2;
            stack = sp_xrealloc(stack, sizeof(int) * (size_t)stack_cap);
        }
        stack[++depth] = fd;
    }

done:
    for (int i = 0; i <= depth; i++)
        if (stack[i] >= 0)
            close(stack[i]);
    free(stack);
    sp_buf_dispose(&rest);
    sp_buf_dispose(&comp);
    return ret;
}

/* Contract: returns an fd for `rel` that refers to an inode beneath the
 * root at the moment of the call, or an error; never an fd outside the root,
 * whatever symlinks exist or are being swapped concurrently. */
static int openat_contained(sp_fs *fs, const char *rel, int flags, mode_t mode, bool follow_last,
                            sp_error **err);

int sp_fs_openat(sp_fs *fs, const char *rel, int flags, mode_t mode, bool follow_last,
                 sp_error **err)
{
    int fd = openat_contained(fs, rel, flags, mode, follow_last, err);
    if (fd >= 0 && fs->deny) {
        int r = sp_fs_check_fd_denied(fs, fd, rel, err);
        if (r < 0) {
            close(fd);
            return r;
        }
    }
    return fd;
}

static int openat_contained(sp_fs *fs, const char *rel, int flags, mode_t mode, bool follow_last,
                            sp_error **err)
{
    if (!follow_last)
        flags |= O_NOFOLLOW;
    if (atomic_load_explicit(&openat2_state, memory_order_relaxed) != 0) {
        struct open_how how = {
            .flags = (uint64_t)(flags | O_CLOEXEC),
            .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
            .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
        };
        for (int attempt = 0; attempt < 32; attempt++) {
            long fd = sys_openat2(fs->rootfd, rel, &how);
            if (fd >= 0) {
                atomic_store_explicit(&openat2_state, 1, memory_order_relaxed);
                return (int)fd;
            }
            int e = errno;
            if (e == EAGAIN || e == EINTR)
                continue; /* a concurrent rename raced the lookup: retry */
            if (e == ENOSYS ||
                (e == EPERM && atomic_load_explicit(&openat2_state, memory_order_relaxed) < 0)) {
                atomic_store_explicit(&openat2_state, 0, memory_order_relaxed);
                break;
            }
            atomic_store_explicit(&openat2_state, 1, memory_order_relaxed);
            if (e == EXDEV) /* `..` past the root, or an absolute symlink: the walk judges */
                return openat_walk(fs, rel, flags & ~O_NOFOLLOW, mode, follow_last, err);
            if (e == ELOOP && !follow_last)
                return sp_err_set(err, SP_EINVAL, ELOOP, "open: %s: is a symlink", rel);
            return sp_err_errno(err, e, "open", rel);
        }
        if (atomic_load_explicit(&openat2_state, memory_order_relaxed) != 0)
            return sp_err_errno(err, EAGAIN, "open", rel);
    }
    return openat_walk(fs, rel, flags & ~O_NOFOLLOW, mode, follow_last, err);
}

/* Make sure folder `dir` exists beneath the root, creating it and its
 * missing parents (0755, owned like their parent when we are root). Each
 * level is resolved from the root again, so a symlink planted meanwhile is
 * judged like any other. Returns an O_PATH fd on the folder. */
static int ensure_dir(sp_fs *fs, const char *dir, unsigned depth, sp_error **err)
{
    sp_error *e = NULL;
    int fd = sp_fs_openat(fs, dir, O_PATH | O_DIRECTORY, 0, true, &e);
    if (fd >= 0 || e->sys_errno != ENOENT || depth > 4096) {
        if (fd < 0) {
            int code = e->code;
            if (err) {
                sp_error_free(*err);
                *err = e;
            } else {
                sp_error_free(e);
            }
            return code;
        }
        return fd;
    }
    sp_error_free(e);

    const char *slash = strrchr(dir, '/');
    cleanup_free char *parent = slash ? sp_xstrndup(dir, (size_t)(slash - dir)) : sp_xstrdup(".");
    const char *name = slash ? slash + 1 : dir;
    cleanup_close int pfd = ensure_dir(fs, parent, depth + 1, err);
    if (pfd < 0)
        return pfd;
    if (mkdirat(pfd, name, 0755) < 0 && errno != EEXIST)
        return sp_err_errno(err, errno, "mkdir", dir);
    struct stat pst;
    if (geteuid() == 0 && fstat(pfd, &pst) == 0)
        (void)!fchownat(pfd, name, pst.st_uid, pst.st_gid, AT_SYMLINK_NOFOLLOW);
    return sp_fs_openat(fs, dir, O_PATH | O_DIRECTORY, 0, true, err);
}

int sp_fs_open_parent(sp_fs *fs, const char *rel, bool mkparents, int *dirfd_out, char **name_out,
                      sp_error **err)
{
    *dirfd_out = -1;
    *name_out = NULL;
    if (strcmp(rel, ".") == 0)
        return sp_err_set(err, SP_EINVAL, 0, "the workspace root itself cannot be used here");

    const char *slash = strrchr(rel, '/');
    cleanup_free char *parent = slash ? sp_xstrndup(rel, (size_t)(slash - rel)) : sp_xstrdup(".");
    int fd = mkparents ? ensure_dir(fs, parent, 0, err)
                       : sp_fs_openat(fs, parent, O_PATH | O_DIRECTORY, 0, true, err);
    if (fd < 0)
        return fd;
    const char *name = slash ? slash + 1 : rel;
    if (fs->deny) {
        /* The folder may be reached through a symlink: judge the name at
         * its real place. */
        cleanup_free char *real = sp_fs_fd_relpath(fs, fd);
        cleanup_free char *full = real ? sp_path_join(real, name) : NULL;
        if (!full || sp_fs_denied(fs, full)) {
            close(fd);
            return sp_err_set(err, SP_EDENIED, 0, "path is hidden by the deny list: %s", rel);
        }
    }
    *dirfd_out = fd;
    *name_out = sp_xstrdup(name);
    return 0;
}
