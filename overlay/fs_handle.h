/* The contained filesystem's handle (fs_handle.c): what it holds and what
 * its deny list hides. The ground of path.c, walk.c and fs.c. Not
 * installed. */
#ifndef SANDPOD_FS_HANDLE_H
#define SANDPOD_FS_HANDLE_H

#include <stdbool.h>

#include "base.h"
#include "glob.h"
#include "sandpod/fs.h"

struct sp_fs {
    int rootfd; /* O_PATH|O_DIRECTORY on the root */
    char *root;
    sp_fs_opts opts; /* with defaults filled in */
    sp_globset *deny;
};

/* Defaults for sp_fs_opts fields left at zero. */
#define SP_FS_DEFAULT_MAX_WRITE  (4u << 20)
#define SP_FS_DEFAULT_MAX_READ   (64u << 20)
#define SP_FS_DEFAULT_DEPTH      16u
#define SP_FS_DEFAULT_SEGMENT    80u
#define SP_FS_DEFAULT_LINES      2000u
#define SP_FS_DEFAULT_LINE_BYTES 2000u

/* True when `rel` is on the deny list. */
bool sp_fs_denied(const sp_fs *fs, const char *rel);

/* Where open fd `fd` really is, relative to the root ("." = the root);
 * NULL when that cannot be told (no /proc, or not beneath the root). */
char *sp_fs_fd_relpath(sp_fs *fs, int fd);

/* SP_EDENIED when open fd `fd` (reached through `rel`, maybe via symlinks)
 * is a file the deny list hides. */
int sp_fs_check_fd_denied(sp_fs *fs, int fd, const char *rel, sp_error **err);

#endif
