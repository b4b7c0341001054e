/* Internals of apply (sandbox/apply*.c). Not installed. */
#ifndef SANDPOD_APPLY_INTERNAL_H
#define SANDPOD_APPLY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "sandpod/error.h"
#include "sandpod/snapshot.h"

/* One change that passed apply's rules (protected paths, links out,
 * special files and the mount's filters are already held back), to be
 * written as a commit. */
typedef struct sp_apply_git_change {
    const char *ws_path; /* the path in the snapshot (relative to the workspace root) */
    const char *rel;     /* the path relative to the host folder `to` */
    bool remove;         /* deleted (or a folder now: its files come as their own changes) */
} sp_apply_git_change;

/* Write the changes as one commit on a new branch of the git repository
 * whose work tree holds `to` (an absolute folder), touching neither its
 * work tree, its index, its HEAD, its config nor its hooks
 * (apply_branch.c). The commit's parent is the repository's HEAD commit
 * (none for an unborn HEAD); its tree is HEAD's tree with each change
 * applied at `to`'s place in the work tree: the new side of a file or
 * symlink is read from snapshot `now_ref` of store `s` (mode 100755 when
 * any x bit is set, else 100644; a symlink is 120000 of its target); a
 * removal, or a new side that is a folder, deletes the file or symlink at
 * that path and leaves a folder or submodule there alone (its files come
 * as changes of their own; a folder left empty goes). Author and committer
 * are the repository's user.name and user.email, else
 * "sandpod <sandpod@localhost>"; `message` NULL or "" means
 * "sandpod apply". Each file is held in memory once, one at a time.
 *
 * *out_commit receives the new commit's 40 hex digits (free()).
 *
 * Returns 0; SP_EINVAL: no work tree holds `to` (none, or a bare
 * repository), an invalid branch name, a path with an empty, `.`, `..` or
 * `.git`-like component (any spelling git protects against), a path listed
 * twice, a symlink named like .gitmodules, a change under a path the
 * snapshot has as a file, or a file inside a submodule; SP_EEXISTS: the
 * branch exists (or HEAD names it before its first commit); SP_ENOTFOUND:
 * `now_ref` or a new side is not in the store; SP_ERROR: libgit2's errors.
 * The symlink, file and submodule cases and a missing new side are found
 * while the tree is built, every other refusal before anything is
 * written; after a late failure the repository holds at most objects
 * nothing refers to (git gc drops them), never the branch. */
int sp_apply_branch(char **out_commit, const char *to, const char *branch, sp_snapstore *s,
                    const char *now_ref, const sp_apply_git_change *v, size_t n,
                    const char *message, sp_error **err);

#endif
