/* A sorted, contained directory walk: getdents64 on fds we hold, fstatat
 * with AT_SYMLINK_NOFOLLOW, and openat(O_NOFOLLOW) to descend, so a symlink
 * is reported as an entry and never entered. */
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "fs_internal.h"

/* Deeper folders are not visited: each level holds an fd, and an attacker
 * can build trees far deeper than any real project. */
#define SP_WALK_MAX_DEPTH 256

struct names {
    sp_buf buf;   /* NUL-separated names */
    size_t *offs; /* offsets into buf */
    size_t n, cap;
};

/* Order names as their full paths sort bytewise: a folder compares as if
 * its name ended in '/', so "a.txt" comes before everything in "a/". A
 * pre-order walk then yields paths already in strcmp order, and a walk cut
 * short by a limit keeps the first paths of the sorted answer. Each name
 * is stored with its d_type in the byte before it. */
/* Character i of the name as it sorts: a folder's name has a '/' after it. */
static unsigned sort_char(const unsigned char *name, size_t len, bool dir, size_t i)
{
    if (i < len)
        return name[i];
    return i == len && dir ? '/' : 0;
}

static int cmp_names(const void *a, const void *b, void *arg)
{
    const unsigned char *base = arg;
    const unsigned char *x = base + *(const size_t *)a;
    const unsigned char *y = base + *(const size_t *)b;
    size_t xl = strlen((const char *)x), yl = strlen((const char *)y);
    bool xd = x[-1] == DT_DIR, yd = y[-1] == DT_DIR;
    for (size_t i = 0;; i++) {
        unsigned cx = sort_char(x, xl, xd, i), cy = sort_char(y, yl, yd, i);
        if (cx != cy || cx == 0)
            return (int)cx - (int)cy;
    }
}

static int read_names(int dfd, struct names *nm)
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
            break;
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
    if (nm->n > 1)
        qsort_r(nm->offs, nm->n, sizeof(size_t), cmp_names, nm->buf.data);
    return 0;
}

/* `rel` is the path as named (it may pass through symlinks); `real` is
 * where the folder really is, for the deny list, or NULL when no deny list
 * applies. */
static int walk_dir(sp_fs *fs, int dfd, const char *rel, const char *real, unsigned depth,
                    const sp_walk_opts *opts, sp_walk_fn fn, void *ctx, sp_error **err)
{
    struct names nm = {SP_BUF_INIT, NULL, 0, 0};
    int ret = SP_WALK_CONTINUE;
    if (read_names(dfd, &nm) < 0) {
        /* A folder that became unreadable or vanished mid-walk is skipped,
         * as find(1) would; the walk itself goes on. */
        goto done;
    }
    for (size_t i = 0; i < nm.n; i++) {
        const char *name = nm.buf.data + nm.offs[i];
        cleanup_free char *child = sp_path_join(rel, name);
        cleanup_free char *child_real = real ? sp_path_join(real, name) : NULL;
        if (sp_fs_denied(fs, child) || (child_real && sp_fs_denied(fs, child_real)))
            continue;
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* vanished */
        bool isdir = S_ISDIR(st.st_mode);
        if (isdir && opts->skip_git && strcmp(name, ".git") == 0)
            continue;
        int r = fn(ctx, dfd, name, child, &st, depth, err);
        if (r < 0 || r == SP_WALK_STOP) {
            ret = r;
            goto done;
        }
        if (!isdir || r == SP_WALK_SKIP)
            continue;
        if ((opts->max_depth && depth >= opts->max_depth) || depth >= SP_WALK_MAX_DEPTH)
            continue;
        int cfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (cfd < 0)
            continue; /* swapped for a symlink or removed meanwhile */
        r = walk_dir(fs, cfd, child, child_real, depth + 1, opts, fn, ctx, err);
        close(cfd);
        if (r < 0 || r == SP_WALK_STOP) {
            ret = r;
            goto done;
        }
    }
done:
    sp_buf_dispose(&nm.buf);
    free(nm.offs);
    return ret;
}

int sp_fs_walk(sp_fs *fs, const char *base_rel, const sp_walk_opts *opts, sp_walk_fn fn, void *ctx,
               sp_error **err)
{
    sp_walk_opts defaults = {0, false};
    if (!opts)
        opts = &defaults;
    int dfd = sp_fs_openat(fs, base_rel, O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0, true, err);
    if (dfd < 0)
        return dfd;
    cleanup_free char *real = NULL;
    if (fs->deny && !(real = sp_fs_fd_relpath(fs, dfd))) {
        close(dfd);
        return sp_err_set(err, SP_EDENIED, 0, "path is hidden by the deny list: %s", base_rel);
    }
    int r = walk_dir(fs, dfd, base_rel, real, 1, opts, fn, ctx, err);
    close(dfd);
    return r < 0 ? r : 0;
}

sp_fs_type sp_fs_type_of(mode_t m)
{
    if (S_ISREG(m))
        return SP_FS_FILE;
    if (S_ISDIR(m))
        return SP_FS_DIR;
    if (S_ISLNK(m))
        return SP_FS_SYMLINK;
    return SP_FS_OTHER;
}

const char *sp_fs_type_name(sp_fs_type t)
{
    switch (t) {
    case SP_FS_FILE:
        return "file";
    case SP_FS_DIR:
        return "dir";
    case SP_FS_SYMLINK:
        return "symlink";
    default:
        return "other";
    }
}
