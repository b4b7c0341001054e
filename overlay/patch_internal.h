/* Internals of apply_patch, shared by patch_parse.c (text to operations),
 * patch_text.c (operations on one file's bytes, in memory) and patch.c (the
 * plan over the workspace and the atomic commit). Not installed. */
#ifndef SANDPOD_PATCH_INTERNAL_H
#define SANDPOD_PATCH_INTERNAL_H

#include "fs_internal.h"
#include "sandpod/patch.h"

/* A piece of the patch text. */
typedef struct pp_text {
    const char *s;
    size_t len;
} pp_text;

/* One line of a chunk or hunk body: a view into the patch text, without
 * its line ending. */
typedef struct pp_bline {
    char op; /* ' ' context, '-' removed, '+' added */
    const char *s;
    size_t len;
    bool no_eol; /* unified: followed by "\ No newline at end of file" */
} pp_bline;

/* A Codex chunk or a unified hunk. */
typedef struct pp_hunk {
    size_t line_no; /* patch line of its header (or first line) */
    /* The header as written ("@@ -1,3 +1,4 @@", "@@ def f():"), for messages. */
    const char *header;
    size_t header_len;
    /* Codex: lines to move past first (`@@ text`), and `*** End of File`. */
    pp_text *contexts;
    size_t n_contexts;
    bool eof;
    /* Unified: the ranges of the header. */
    size_t old_start, old_count, new_start, new_count;
    pp_bline *lines;
    size_t n_lines;
    size_t added, removed;
} pp_hunk;

/* One file operation. */
typedef struct pp_op {
    sp_patch_action action;
    size_t line_no; /* patch line of the operation's first line */
    char *path;     /* normalized */
    char *new_path; /* normalized; MOVE and COPY */
    pp_hunk *hunks;
    size_t n_hunks;
    sp_buf content; /* Codex Add File: the new file */
    unsigned mode;  /* unified: permission bits a header sets (0 = none) */
    size_t added, removed;
} pp_op;

typedef struct pp_patch {
    sp_patch_format format;
    /* The folder a heredoc's `cd DIR &&` names, normalized (NULL: the
     * root); the paths of ops are already in it. */
    char *workdir;
    pp_op *ops;
    size_t n;
} pp_patch;

/* Parse `text` in format `fmt` (AUTO detects). */
int pp_parse(pp_patch *out, const char *text, size_t len, sp_patch_format fmt, sp_error **err);
void pp_patch_dispose(pp_patch *p);

/* Apply the chunks of a Codex Update File to `data` (the file's bytes),
 * appending the new content to `out`. `display` names the file in
 * messages. */
int pt_apply_codex(sp_buf *out, const char *data, size_t len, const pp_op *op, const char *display,
                   sp_error **err);

/* Apply the hunks of a unified diff to `data`, placed as git apply places
 * them. */
int pt_apply_unified(sp_buf *out, const char *data, size_t len, const pp_op *op,
                     const char *display, sp_error **err);

/* Number of lines in data (a last line without newline counts). */
size_t pt_count_lines(const char *data, size_t len);

/* Append a short, printable excerpt of s[0..len) for a one-line message:
 * at most `max` bytes, cut on a UTF-8 boundary, control bytes as '?'. */
void pt_excerpt(sp_buf *b, const char *s, size_t len, size_t max);

#endif
