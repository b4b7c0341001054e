/* The glob dialect shared by the fs tools, hydration filters and deny lists.
 * Internal; not installed.
 *
 *   *      any run of characters except '/'
 *   **     as a whole component: zero or more components; elsewhere like *
 *   ?      exactly one character (one UTF-8 code point) except '/'
 *   [...]  a class: ranges a-z, POSIX classes [:digit:] (ASCII), negation
 *          with ! or ^, ] first is literal
 *   {a,b}  alternatives, may nest and may contain '/'
 *   \x     x literally
 *
 *   x/     (trailing '/') folders only, when the caller says what the entry is
 *
 * Paths are '/'-separated and relative (no leading '/'). A leading '.' is
 * matched by wildcards like any other character, unless SP_GLOB_PERIOD is
 * given. Matching is bytewise and case-sensitive. */
#ifndef SANDPOD_GLOB_H
#define SANDPOD_GLOB_H

#include <stdbool.h>
#include <stddef.h>

#include "sandpod/error.h"

typedef struct sp_glob sp_glob;

/* Compile a pattern. Errors (SP_EINVAL): an unclosed '[' or '{', a trailing
 * '\', an empty pattern, more than 4096 brace alternatives. */
int sp_glob_compile(sp_glob **out, const char *pattern, sp_error **err);

/* bash's rule (globstar, no dotglob): `*`, `?`, `[...]` and `**` never
 * match a name starting with '.'; only a component that itself starts with
 * a literal '.' (`.git`, `.*`, `\.x`) does. */
#define SP_GLOB_PERIOD 1u
/* The same rule for the name `.git` alone (bash's dotglob, with .git kept
 * out of reach of wildcards). */
#define SP_GLOB_PERIOD_GIT 2u
int sp_glob_compile_flags(sp_glob **out, const char *pattern, unsigned flags, sp_error **err);
void sp_glob_free(sp_glob *g);

/* True when the whole of `path` matches, taking any entry as possibly a
 * folder (a trailing '/' in the pattern is not checked). */
bool sp_glob_match(const sp_glob *g, const char *path);

/* The same for an entry whose type is known: a pattern ending in '/', or a
 * name the pattern follows with '/' ("a/" then a globstar, taking "a" alone), needs a
 * folder, as in bash. */
bool sp_glob_match_entry(const sp_glob *g, const char *path, bool is_dir);

/* True when some path strictly below folder `dir` ("a/b", or "" for the
 * base itself) could match: walks use it to skip folders. May answer true
 * when unsure; never false when a descendant could match. */
bool sp_glob_could_match_below(const sp_glob *g, const char *dir);

/* A set of globs where a pattern without '/' matches a name at any depth
 * (gitignore-like): used for deny lists and hydration excludes. */
typedef struct sp_globset sp_globset;
int sp_globset_compile(sp_globset **out, const char *const *patterns, size_t n, sp_error **err);
void sp_globset_free(sp_globset *s);
/* True when path, or any of its ancestors ("a" and "a/b" for "a/b/c"),
 * matches one pattern of the set. NULL set matches nothing. */
bool sp_globset_match(const sp_globset *s, const char *path);

#endif
