/* The one fd-based tree walker and the one tree remover (DESIGN.md: "the
 * host never follows a path the workload can change"). Internal; not
 * installed.
 *
 * Both work on (dirfd, name): name is one component ("." for dirfd
 * itself), never a path. They never follow a symlink, never build a path
 * longer than one component for a system call, never use "..", keep their
 * state on the heap (no recursion, no depth or PATH_MAX limit) and hold at
 * most about 64 fds whatever the depth (fewer when the process runs out:
 * EMFILE makes them hold fewer). A folder whose fd was given up is reopened
 * from its nearest open ancestor one name at a time and must still be the
 * same (dev, ino); if the workload moved it, the walk or removal reports
 * "folder changed during the walk: PATH" (SP_ERROR) instead of acting
 * anywhere else.
 *
 * Messages are one line, "what: path: why", with path relative to dirfd
 * (it starts with name; "." stands for dirfd itself). */
#ifndef SANDPOD_FDTREE_H
#define SANDPOD_FDTREE_H

#include <sys/stat.h>

#include "base.h"

/* What a callback is told about one entry. Every pointer and fd is valid
 * only during the call; the callback must not close the fds. */
typedef struct sp_tree_entry {
    int parent_fd;         /* folder fd holding the entry (the caller's dirfd for the start) */
    const char *name;      /* its name in parent_fd */
    const char *path;      /* relative to dirfd, for messages: "" for ".", else name/... */
    const struct stat *st; /* lstat data; for a folder, fstat of fd */
    unsigned depth;        /* 0 = the start */
    int fd;                /* folders: an O_RDONLY|O_DIRECTORY|O_NOFOLLOW fd on it; else -1 */
} sp_tree_entry;

enum { SP_TREE_PRE = 1, SP_TREE_POST = 2 };

/* Returned from PRE for a folder: do not descend (and no POST for it). */
#define SP_TREE_SKIP 1

/* A callback: < 0 stops the walk with that code (the callback sets *err);
 * 0 continues; SP_TREE_SKIP from PRE skips a folder's content. */
typedef int (*sp_tree_fn)(const sp_tree_entry *e, int when, void *ctx, sp_error **err);

/* Walk (dirfd, name) in pre-order: PRE for every entry (the start first),
 * POST for each folder after its content. Names within a folder come in
 * the order the file system gives them. A symlink is an entry, never
 * entered. An entry that vanishes before it is looked at is skipped, and
 * so is the POST of a folder that vanished meanwhile; a folder replaced by
 * another at its name gives "folder changed during the walk".
 *
 * In POST, (parent_fd, name) was checked to still name fd just before the
 * call.
 *
 * Returns 0; a callback's code; SP_EINVAL for no fn or a name that is not one
 * component; SP_ENOTFOUND when (dirfd, name) is missing; SP_ERROR when a
 * folder changed; or the code of a failed stat/open/read. Stops at the
 * first error. */
int sp_tree_walk(int dirfd, const char *name, sp_tree_fn fn, void *ctx, sp_error **err);

/* Keep the start folder (empty it only). Implied by name ".". */
#define SP_TREE_KEEP_ROOT 1u

/* rm -rf of (dirfd, name), never following a symlink: a file or symlink is
 * unlinked, a folder emptied then removed. Folders we cannot read, search
 * or write are made 0700 first (a kept start gets its mode back). A folder
 * that gains entries while it is emptied is read again and emptied again,
 * a few times. A missing name is success.
 *
 * Best effort, like rm -rf: an entry that cannot be removed does not stop
 * the removal of the others. Returns 0 when everything is gone, else the
 * first error met (its path names what could not be removed): the code
 * mapped from errno, SP_ERROR for a folder that changed, SP_EINVAL for a
 * name that is not one component or a kept start that is not a folder.
 * err may be NULL. */
int sp_tree_remove(int dirfd, const char *name, unsigned flags, sp_error **err);

/* Test hook, not part of the API: when set, called by sp_tree_remove just
 * before each folder is removed, with that folder's parent fd and name. */
extern void (*sp_tree_test_before_rmdir)(int parent_fd, const char *name);

#endif
