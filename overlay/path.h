/* Contained path resolution beneath the handle's root (path.c): the one
 * place a workspace path is turned into an fd. Not installed. */
#ifndef SANDPOD_PATH_H
#define SANDPOD_PATH_H

#include <stdbool.h>
#include <sys/stat.h>

#include "fs_handle.h"

/* Open `rel` (a normalized relative path, "." = the root) beneath the root.
 * `flags` are open(2) flags (O_CLOEXEC is added); with follow_last false a
 * final symlink is not followed (O_NOFOLLOW; with O_PATH the link itself is
 * opened). Symlinks met on the way are followed only while they stay
 * beneath the root; absolute targets and `..` past the root give SP_EESCAPE.
 * Returns the fd or a negative code with *err set; errno-style failures
 * carry sys_errno. `display` names the path in messages. */
int sp_fs_openat(sp_fs *fs, const char *rel, int flags, mode_t mode, bool follow_last,
                 sp_error **err);

/* Split `rel` into an fd on its parent folder and its last name (no '/').
 * Follows symlinks in the parent part as sp_fs_openat() does. With
 * `mkparents`, missing parent folders are created (0755). The root itself
 * has no parent: SP_EINVAL. *name_out points into a buffer the caller frees
 * with free(*name_out). */
int sp_fs_open_parent(sp_fs *fs, const char *rel, bool mkparents, int *dirfd_out, char **name_out,
                      sp_error **err);

/* The part of an absolute symlink target below SP_WORKSPACE_MOUNT ("" for
 * the mount itself), or NULL when the target lies elsewhere: in the
 * container's image, which the host never follows. */
const char *sp_fs_workspace_tail(const char *target);
/* SP_EESCAPE: symlink `rel` points into the container's image. */
int sp_fs_image_error(sp_error **err, const char *rel, const char *target);

/* Join a relative folder and a name ("." + "a" = "a"). */
char *sp_path_join(const char *dir, const char *name);

#endif
