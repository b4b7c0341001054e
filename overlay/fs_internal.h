/* Internals of the contained filesystem, shared by path.c, fs.c, walk.c,
 * glob.c, grep.c and edit.c. Not installed. */
#ifndef SANDPOD_FS_INTERNAL_H
#define SANDPOD_FS_INTERNAL_H

#include <sys/stat.h>

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

/* Normalize a tool path and check it against the deny list: the first thing
 * every public operation does. *out is freed by the caller. */
int sp_fs_prepare(sp_fs *fs, const char *path, char **out, sp_error **err);

/* Check a path that a tool is about to create: UTF-8, depth and name-length
 * limits. */
int sp_fs_check_new_path(sp_fs *fs, const char *rel, sp_error **err);

/* True when `rel` is on the deny list. */
bool sp_fs_denied(const sp_fs *fs, const char *rel);

/* Where open fd `fd` really is, relative to the root ("." = the root);
 * NULL when that cannot be told (no /proc, or not beneath the root). */
char *sp_fs_fd_relpath(sp_fs *fs, int fd);

/* SP_EDENIED when open fd `fd` (reached through `rel`, maybe via symlinks)
 * is a file the deny list hides. */
int sp_fs_check_fd_denied(sp_fs *fs, int fd, const char *rel, sp_error **err);

/* Fail with SP_EREADONLY on a read-only handle. */
int sp_fs_check_writable(const sp_fs *fs, const char *rel, sp_error **err);

/* Read a whole regular file from an open fd (limit bytes at most; 0 = no
 * limit). */
int sp_fs_slurp_fd(int fd, const char *display, size_t limit, sp_buf *out, sp_error **err);

/* Write data atomically to (dirfd, name): temp file, fsync, rename; keeps
 * the mode and owner of a file being replaced. */
/* Give an unnamed file (opened with O_TMPFILE in dirfd) the name `name`
 * in dirfd: through /proc/self/fd, which needs no capability, else with
 * AT_EMPTY_PATH (which needs CAP_DAC_READ_SEARCH). Writers stage their data
 * unnamed so that a process killed while writing leaves nothing behind.
 * Returns 0, or -1 with errno set. */
int sp_fs_link_tmpfile(int tfd, int dirfd, const char *name);

int sp_fs_replace_at(sp_fs *fs, int dirfd, const char *name, const char *display, const void *data,
                     size_t len, bool must_not_exist, sp_error **err);

/* Walk a folder beneath the root in sorted order without following
 * symlinks. For every entry `fn` gets the folder's fd, the entry's name,
 * its path relative to the root, an lstat of it and its depth (1 for the
 * base folder's children). Return SP_WALK_CONTINUE, SP_WALK_SKIP (do not
 * descend into this folder) or SP_WALK_STOP; a negative value aborts the
 * walk with that code (the callback sets *err). Denied paths and `.git`
 * folders (with skip_git) are never shown. max_depth 0 = no limit. */
enum { SP_WALK_CONTINUE = 0, SP_WALK_SKIP = 1, SP_WALK_STOP = 2 };
typedef int (*sp_walk_fn)(void *ctx, int dirfd, const char *name, const char *rel,
                          const struct stat *st, unsigned depth, sp_error **err);
struct sp_dirnames;
typedef struct sp_walk_opts {
    unsigned max_depth;
    bool skip_git;
    /* Optional: called for every folder the walk reads, the base included
     * (depth 0), with its fd and all its names, before its entries. */
    void (*enter)(void *ctx, int dfd, const char *rel, unsigned depth,
                  const struct sp_dirnames *names);
    /* The callback's `st` holds only the type bits of st_mode where the
     * folder listing gives the type (d_type), which saves an fstatat per
     * entry; a callback that opens an entry must fstat the fd anyway,
     * since the entry may have changed since it was listed. */
    bool type_only;
} sp_walk_opts;
int sp_fs_walk(sp_fs *fs, const char *base_rel, const sp_walk_opts *opts, sp_walk_fn fn, void *ctx,
               sp_error **err);

/* The part of an absolute symlink target below SP_WORKSPACE_MOUNT ("" for
 * the mount itself), or NULL when the target lies elsewhere: in the
 * container's image, which the host never follows. */
const char *sp_fs_workspace_tail(const char *target);
/* SP_EESCAPE: symlink `rel` points into the container's image. */
int sp_fs_image_error(sp_error **err, const char *rel, const char *target);

/* Join a relative folder and a name ("." + "a" = "a"). */
char *sp_path_join(const char *dir, const char *name);

/* Type of an lstat mode. */
sp_fs_type sp_fs_type_of(mode_t m);

#endif
