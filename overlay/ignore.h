/* Ignore files as ripgrep reads them (.gitignore, .ignore, .rgignore,
 * .git/info/exclude), for sp_fs_grep. Internal; not installed.
 *
 * A stack of frames, one per folder whose ignore files apply: the folders
 * from the root down to the searched one, then the folders a walk is in. */
#ifndef SANDPOD_IGNORE_H
#define SANDPOD_IGNORE_H

#include <stdbool.h>

#include "fs_internal.h"

typedef struct sp_ignore sp_ignore;

sp_ignore *sp_ignore_new(void);
/* git's own set (as `git status` reads them): .gitignore files only, plus
 * .git/info/exclude of the root folder ("."). */
sp_ignore *sp_ignore_new_git(void);
void sp_ignore_free(sp_ignore *ig);

/* Read the ignore files of folder `dfd` (at `dir`, relative to the root)
 * and push them as a frame for the entries deeper than `depth` (0 for the
 * folders at and above the walk's base). `names`, when known, are the
 * folder's names: files it lacks are not even tried. Unreadable, denied,
 * oversized or symlinked ignore files count as absent. `fs` may be NULL
 * (no deny list). */
void sp_ignore_push(sp_ignore *ig, sp_fs *fs, int dfd, const char *dir, unsigned depth,
                    const struct sp_dirnames *names);

/* Drop the frames of folders at `depth` or deeper: a pre-order walk has
 * left them once it shows an entry at that depth. */
void sp_ignore_pop_to(sp_ignore *ig, unsigned depth);

/* True when the ignore files say `rel` (relative to the root) is ignored.
 * As in rg: .rgignore before .ignore before .gitignore before
 * .git/info/exclude, at each kind the deepest folder first, in a file the
 * last matching line; a `!` line that matches first re-includes. */
bool sp_ignore_match(const sp_ignore *ig, const char *rel, bool is_dir);

#endif
