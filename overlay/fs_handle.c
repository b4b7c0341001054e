/* The contained filesystem's handle: the root it is opened on, its limits,
 * and what its deny list hides, by name and by where an open fd really is.
 * The ground that path resolution (path.c), the walk (walk.c) and the file
 * operations (fs.c) stand on. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "fs_handle.h"

int sp_fs_open(sp_fs **out, const char *root, const sp_fs_opts *opts, sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_FS_OPTS_VERSION, "sp_fs_opts", err) < 0)
        return SP_EINVAL;
    if (!root || !*root)
        return sp_err_set(err, SP_EINVAL, 0, "root folder is missing");
    int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return sp_err_errno(err, errno, "open root", root);

    sp_fs *fs = sp_xcalloc(1, sizeof(*fs));
    fs->rootfd = fd;
    fs->root = sp_xstrdup(root);
    sp_fs_opts o = SP_FS_OPTS_INIT;
    if (opts)
        o = *opts;
    if (!o.max_write_bytes)
        o.max_write_bytes = SP_FS_DEFAULT_MAX_WRITE;
    if (!o.max_read_bytes)
        o.max_read_bytes = SP_FS_DEFAULT_MAX_READ;
    if (!o.max_path_depth)
        o.max_path_depth = SP_FS_DEFAULT_DEPTH;
    if (!o.max_segment_len)
        o.max_segment_len = SP_FS_DEFAULT_SEGMENT;
    if (!o.read_line_limit)
        o.read_line_limit = SP_FS_DEFAULT_LINES;
    if (!o.max_line_bytes)
        o.max_line_bytes = SP_FS_DEFAULT_LINE_BYTES;
    o.deny = NULL; /* the compiled set is kept instead of the caller's array */
    fs->opts = o;
    if (opts && opts->deny) {
        size_t n = 0;
        while (opts->deny[n])
            n++;
        int r = sp_globset_compile(&fs->deny, opts->deny, n, err);
        if (r < 0) {
            sp_fs_free(fs);
            return sp_err_wrap(err, r, "deny list");
        }
    }
    *out = fs;
    return 0;
}

void sp_fs_free(sp_fs *fs)
{
    if (!fs)
        return;
    if (fs->rootfd >= 0)
        close(fs->rootfd);
    sp_globset_free(fs->deny);
    free(fs->root);
    free(fs);
}

const char *sp_fs_root(const sp_fs *fs)
{
    return fs->root;
}

int sp_fs_root_fd(const sp_fs *fs)
{
    return fs->rootfd;
}

bool sp_fs_denied(const sp_fs *fs, const char *rel)
{
    return fs->deny && strcmp(rel, ".") != 0 && sp_globset_match(fs->deny, rel);
}

char *sp_fs_fd_relpath(sp_fs *fs, int fd)
{
    char lp[64], rootp[PATH_MAX], fp[PATH_MAX];
    snprintf(lp, sizeof(lp), "/proc/self/fd/%d", fs->rootfd);
    ssize_t rn = readlink(lp, rootp, sizeof(rootp) - 1);
    snprintf(lp, sizeof(lp), "/proc/self/fd/%d", fd);
    ssize_t fn = readlink(lp, fp, sizeof(fp) - 1);
    if (rn <= 0 || fn <= 0)
        return NULL;
    rootp[rn] = fp[fn] = '\0';
    size_t l = (size_t)rn;
    if (strcmp(fp, rootp) == 0)
        return sp_xstrdup(".");
    if (l == 1 && rootp[0] == '/')
        return fp[0] == '/' && fp[1] ? sp_xstrdup(fp + 1) : NULL;
    if (strncmp(fp, rootp, l) != 0 || fp[l] != '/')
        return NULL;
    return sp_xstrdup(fp + l + 1);
}

/* The deny list is about what a file is, not what it is called: judge the
 * place an open fd really is (a symlink, or a folder reached through one,
 * must not hand out what the list hides). Fails closed when the place
 * cannot be told. */
int sp_fs_check_fd_denied(sp_fs *fs, int fd, const char *rel, sp_error **err)
{
    if (!fs->deny)
        return 0;
    cleanup_free char *real = sp_fs_fd_relpath(fs, fd);
    if (!real || sp_fs_denied(fs, real))
        return sp_err_set(err, SP_EDENIED, 0, "path is hidden by the deny list: %s", rel);
    return 0;
}
