/* Internals of the contained filesystem that fs.c defines, with the lower
 * pieces it stands on (fs_handle.h, path.h, walk.h): what the file tools
 * above it (fs_glob.c, grep.c, edit.c, patches, hydration) share. Not
 * installed. */
#ifndef SANDPOD_FS_INTERNAL_H
#define SANDPOD_FS_INTERNAL_H

#include <sys/stat.h>

#include "base.h"
#include "fs_handle.h"
#include "glob.h"
#include "path.h"
#include "sandpod/fs.h"
#include "walk.h"

/* Normalize a tool path and check it against the deny list: the first thing
 * every public operation does. *out is freed by the caller. */
int sp_fs_prepare(sp_fs *fs, const char *path, char **out, sp_error **err);

/* Check a path that a tool is about to create: UTF-8, depth and name-length
 * limits. */
int sp_fs_check_new_path(sp_fs *fs, const char *rel, sp_error **err);

/* Fail with SP_EREADONLY on a read-only handle. */
int sp_fs_check_writable(const sp_fs *fs, const char *rel, sp_error **err);

/* Read a whole regular file from an open fd (limit bytes at most; 0 = no
 * limit). */
int sp_fs_slurp_fd(int fd, const char *display, size_t limit, sp_buf *out, sp_error **err);

/* Give an unnamed file (opened with O_TMPFILE in dirfd) the name `name`
 * in dirfd: through /proc/self/fd, which needs no capability, else with
 * AT_EMPTY_PATH (which needs CAP_DAC_READ_SEARCH). Writers stage their data
 * unnamed so that a process killed while writing leaves nothing behind.
 * Returns 0, or -1 with errno set. */
int sp_fs_link_tmpfile(int tfd, int dirfd, const char *name);

/* Write data atomically to (dirfd, name): temp file, fsync, rename; keeps
 * the mode and owner of a file being replaced. */
int sp_fs_replace_at(sp_fs *fs, int dirfd, const char *name, const char *display, const void *data,
                     size_t len, bool must_not_exist, sp_error **err);

#endif
