/* The sorted, contained folder walk (walk.c). Not installed. */
#ifndef SANDPOD_WALK_H
#define SANDPOD_WALK_H

#include <stdbool.h>
#include <sys/stat.h>

#include "fs_handle.h"

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

/* Type of an lstat mode. */
sp_fs_type sp_fs_type_of(mode_t m);

#endif
