/**
 * @file sandpod/patch.h
 * @brief apply_patch: multi-file patches applied atomically to the contained
 *        filesystem.
 *
 * Two formats are understood, and told apart on their own:
 *
 * - **The Codex envelope** (`*** Begin Patch` ... `*** End Patch`, with
 *   `*** Add File:`, `*** Delete File:`, `*** Update File:` + optional
 *   `*** Move to:`, `@@` chunks of ` `/`-`/`+` lines and `*** End of File`).
 *   It is matched leniently, as Codex does: markers may carry surrounding
 *   whitespace, and the lines of a chunk are looked
 *   for exactly first, then ignoring trailing whitespace, then ignoring
 *   leading and trailing whitespace, then with typographic dashes, quotes and
 *   spaces read as their ASCII forms. Chunks are found in order, each after
 *   the previous one; `@@ text` first moves past the next line that matches
 *   `text`.
 * - **Unified diffs** as `git diff` and `diff -u` write them (`a/` `b/`
 *   prefixes, `/dev/null` for new and deleted files, git's `new file mode`,
 *   `deleted file mode`, `old mode`/`new mode`, `rename from`/`rename to`,
 *   `copy from`/`copy to`, quoted names, `\ No newline at end of file`).
 *   Hunks are placed as `git apply` places them: byte for byte (no fuzz),
 *   at the line the header names or, when the numbers are off, at the
 *   nearest place the hunk's old lines occur (looking after first on a tie);
 *   a hunk starting at line 1 must match at the start of the file and one
 *   without context after its change at the end; no hunk may match lines an
 *   earlier one wrote. A file whose hunks have no context at all (diff -U0)
 *   is read as `git apply --unidiff-zero` reads it. The error names the hunk
 *   and why it fits nowhere.
 *
 * Either format may sit in a shell heredoc, as Codex accepts it:
 * `apply_patch <<'EOF'` (also `<<"EOF"`, `<<EOF`, `<<-EOF`, `applypatch`, or
 * a bare `<<'EOF'` line) ... `EOF`, and `cd DIR && apply_patch <<'EOF'`,
 * which takes the patch's relative paths in DIR (a folder inside the
 * workspace). The body is taken as written. Anything else before `<<`, or
 * after the closing line, is refused (SP_EINVAL, reason patch_parse).
 *
 * Either way the patch is all or nothing: every original is read and every
 * new content computed and checked in memory first; then every new file is
 * written to a hidden temp file beside its final place (creating missing
 * folders), and only when all are on disk are they renamed into place and
 * the deleted files unlinked. A failure before the first rename removes the
 * temp files and the folders it created, leaving the workspace as it was. A
 * rename or unlink that fails after others succeeded (an I/O error, or
 * another process changing the folder at that moment) makes the engine put
 * back the files it had already replaced or removed from their in-memory
 * originals; that restore is best effort and the error says when it failed
 * too. A crash during the rename phase can leave part of the patch applied.
 *
 * Paths obey the sp_fs rules (relative, or under /workspace; never `..` out
 * of the root, never through a symlink that leaves it).
 */
#ifndef SANDPOD_PATCH_H
#define SANDPOD_PATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "sandpod/error.h"
#include "sandpod/fs.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Patch formats. */
typedef enum sp_patch_format {
    SP_PATCH_AUTO = 0,    /**< detect: a `*** Begin Patch` line means Codex, else unified */
    SP_PATCH_CODEX = 1,   /**< the Codex apply_patch envelope */
    SP_PATCH_UNIFIED = 2, /**< `git diff` / `diff -u` output */
} sp_patch_format;

/** The name of a format: "auto", "codex", "unified". */
const char *sp_patch_format_name(sp_patch_format f);

#define SP_PATCH_OPTS_VERSION 1

/** Options for sp_fs_apply_patch() and sp_patch_parse(). */
typedef struct sp_patch_opts {
    unsigned version;
    /** Force a format instead of detecting it. */
    sp_patch_format format;
    /** Check everything (parse, read, match every hunk) but write nothing.
     *  Allowed on a read-only handle. */
    bool dry_run;
    /** Codex semantics for `*** Add File:` of an existing file and
     *  `*** Move to:` an existing file: replace it. By default both fail with
     *  SP_EEXISTS. Unified diffs never overwrite. */
    bool allow_overwrite;
} sp_patch_opts;

#define SP_PATCH_OPTS_INIT                                                                         \
    {                                                                                              \
        .version = SP_PATCH_OPTS_VERSION                                                           \
    }

/** What a patch does to one file. */
typedef enum sp_patch_action {
    SP_PATCH_ADD = 0,    /**< a new file */
    SP_PATCH_DELETE = 1, /**< a file removed */
    SP_PATCH_UPDATE = 2, /**< a file changed in place (content or mode) */
    SP_PATCH_MOVE = 3,   /**< a file renamed, maybe changed too */
    SP_PATCH_COPY = 4,   /**< a file copied, maybe changed too (git `copy from`) */
} sp_patch_action;

/** The name of an action: "add", "delete", "update", "move", "copy". */
const char *sp_patch_action_name(sp_patch_action a);

/** One file operation of a patch, in patch order. */
typedef struct sp_patch_file {
    sp_patch_action action;
    /** Normalized path the patch names (the source of a move or copy). */
    char *path;
    /** Destination of a move or copy, normalized; NULL otherwise. */
    char *new_path;
    /** Lines the operation adds and removes (for a Codex delete: the lines
     *  the file had; 0 from sp_patch_parse()). */
    size_t lines_added;
    size_t lines_removed;
    /** Size of the file as this operation leaves it (0 for a delete and
     *  from sp_patch_parse()). */
    size_t bytes_written;
    /** Permission bits the file is left with (0 for a delete; from
     *  sp_patch_parse(), the mode a git header sets, else 0). */
    unsigned mode;
} sp_patch_file;

/** The file operations of a patch. */
typedef struct sp_patch_result {
    sp_patch_format format; /**< the format that was applied (never AUTO) */
    bool dry_run;           /**< nothing was written */
    sp_patch_file *files;
    size_t n;
} sp_patch_result;

/** Free a result; accepts NULL. */
void sp_patch_result_free(sp_patch_result *r);

/**
 * Apply a patch to the files beneath `fs`'s root, atomically (see the file
 * comment for the exact guarantee).
 *
 * Operations apply in patch order, each seeing the effect of the earlier
 * ones (a file may be deleted and added again, or updated twice). An update
 * keeps the file's mode, owner and line endings (a file whose first line
 * ends in CRLF gets CRLF on the lines a Codex patch adds); a missing final
 * newline stays missing unless the patch changes the last line. A final
 * symlink is followed for updates while it stays inside the root; a delete
 * removes the link itself.
 *
 * @param out    receives the list of file operations; free with
 *               sp_patch_result_free(); NULL on failure
 * @param patch  the patch text (need not be NUL-terminated)
 * @param len    its length in bytes
 * @param opts   options, or NULL for the defaults
 * @return 0;
 *         SP_EINVAL for a patch that does not parse (the message gives the
 *         patch line and what was expected; reason patch_parse), for a Codex
 *         envelope with no file operation ("No files were modified.", as
 *         Codex says), for a hunk or chunk that does not apply (the message
 *         names it and where similar lines are; reason patch_conflict), for
 *         folders, non-regular files, binary and symlink diffs;
 *         SP_ENOTFOUND to update, delete or move a file that does not exist;
 *         SP_EEXISTS to add a file or move onto a file that exists;
 *         SP_EESCAPE for a path (or a heredoc's `cd DIR`) outside the
 *         workspace, directly or through a symlink; SP_ENOTFOUND or SP_EINVAL
 *         (reason not_directory) for a `cd DIR` that is missing or not a
 *         folder; SP_EDENIED for a path on the deny list; SP_EREADONLY on a
 *         read-only handle (unless dry_run); SP_ETOOBIG when a file is over
 *         the handle's read or write limits or the patch touches more than
 *         SP_PATCH_MAX_FILES files; SP_ERROR for I/O failures and for a
 *         file that another process changed while the patch was applied
 *         (then nothing was changed).
 */
int sp_fs_apply_patch(sp_patch_result **out, sp_fs *fs, const char *patch, size_t len,
                      const sp_patch_opts *opts, sp_error **err);

/** The most files one patch may change. */
#define SP_PATCH_MAX_FILES 1000

/**
 * Parse and check a patch without touching any filesystem: the format, the
 * grammar, and the paths (SP_EESCAPE for one that leaves the workspace
 * lexically). Only `opts->format` is used. The result lists the operations
 * with the counts the patch text alone gives.
 *
 * @return 0, SP_EINVAL (with the patch line), SP_EESCAPE
 */
int sp_patch_parse(sp_patch_result **out, const char *patch, size_t len, const sp_patch_opts *opts,
                   sp_error **err);

#ifdef __cplusplus
}
#endif

#endif
