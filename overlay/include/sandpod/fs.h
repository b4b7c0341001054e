/**
 * @file sandpod/fs.h
 * @brief The contained host filesystem: file tools over a workspace folder.
 *
 * An sp_fs is opened on a root folder and every operation resolves its path
 * beneath an fd on that root (openat2 with RESOLVE_BENEATH, or a
 * component-by-component O_NOFOLLOW walk where openat2 is missing). No path,
 * `..` or symlink ever reaches outside the root, even while another process
 * (the container) swaps symlinks under it.
 *
 * Paths are relative to the root. `/workspace/...` (what the container sees)
 * is accepted and mapped to the root; other absolute paths, `..` that would
 * leave the root and NUL bytes are refused with SP_EESCAPE or SP_EINVAL.
 *
 * Results are heap objects owned by the caller and freed with their own
 * `_free` function, each of which accepts NULL. An sp_fs is not thread-safe;
 * use one per thread.
 */
#ifndef SANDPOD_FS_H
#define SANDPOD_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandpod/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Where a workspace root appears inside the container. */
#define SP_WORKSPACE_MOUNT "/workspace"

typedef struct sp_fs sp_fs;

#define SP_FS_OPTS_VERSION 1

/** Options for sp_fs_open(). Zero values select the defaults shown. */
typedef struct sp_fs_opts {
    unsigned version;
    /** Refuse every write with SP_EREADONLY. */
    bool read_only;
    /** NULL-terminated glob list of paths that stay invisible (reads, lists,
     *  greps and writes all behave as if they did not exist; SP_EDENIED when
     *  named directly). A pattern without '/' matches a name at any depth. */
    const char *const *deny;
    /** Largest single write, in bytes (default 4 MiB). */
    size_t max_write_bytes;
    /** Largest read_bytes answer, in bytes (default 64 MiB). */
    size_t max_read_bytes;
    /** Deepest path the tools may create, in components (default 16). */
    unsigned max_path_depth;
    /** Longest name the tools may create, in bytes (default 80). */
    unsigned max_segment_len;
    /** Default number of lines sp_fs_read() returns (default 2000). */
    unsigned read_line_limit;
    /** Lines longer than this many bytes are cut with a marker (default 2000). */
    unsigned max_line_bytes;
} sp_fs_opts;

#define SP_FS_OPTS_INIT                                                                            \
    {                                                                                              \
        .version = SP_FS_OPTS_VERSION                                                              \
    }

/**
 * Open a filesystem handle on `root`, which must be an existing folder.
 *
 * @param out   receives the handle; free with sp_fs_free()
 * @param root  host path of the root folder (absolute or relative to cwd)
 * @param opts  options, or NULL for the defaults
 * @return 0, SP_ENOTFOUND (no such folder), SP_EINVAL (not a folder)
 */
int sp_fs_open(sp_fs **out, const char *root, const sp_fs_opts *opts, sp_error **err);

/** Free a handle; accepts NULL. */
void sp_fs_free(sp_fs *fs);

/** The root as given to sp_fs_open(). Owned by the handle. */
const char *sp_fs_root(const sp_fs *fs);

/** The fd of the root folder (O_PATH). Owned by the handle. */
int sp_fs_root_fd(const sp_fs *fs);

/**
 * Check and normalize a tool path without touching the disk: refuses NUL
 * bytes (len is the length the caller believes the path has), absolute paths
 * outside SP_WORKSPACE_MOUNT and lexical `..` escapes.
 *
 * @param out  receives the normalized relative path ("." for the root); free()
 */
int sp_fs_path_normalize(char **out, const char *path, size_t len, sp_error **err);

/* ---------------------------------------------------------------- read -- */

/** Options for sp_fs_read(). */
typedef struct sp_fs_read_opts {
    unsigned version;
    /** First line to return, 0-based. */
    size_t offset;
    /** Number of lines to return; 0 = the handle's read_line_limit. */
    size_t limit;
} sp_fs_read_opts;
#define SP_FS_READ_OPTS_VERSION 1
#define SP_FS_READ_OPTS_INIT                                                                       \
    {                                                                                              \
        .version = SP_FS_READ_OPTS_VERSION                                                         \
    }

/** A slice of a UTF-8 text file. */
typedef struct sp_fs_text {
    char *path;         /**< normalized relative path */
    char *content;      /**< the returned lines, NUL-terminated */
    size_t content_len; /**< bytes in content */
    size_t total_lines; /**< lines in the whole file */
    size_t offset;      /**< first line returned, 0-based */
    size_t limit;       /**< line limit that applied */
    size_t lines;       /**< lines returned */
    size_t lines_cut;   /**< returned lines that were cut at max_line_bytes */
    bool truncated;     /**< lines exist after the slice */
} sp_fs_text;

/**
 * Read a UTF-8 text file, a slice of lines at a time.
 *
 * @return 0; SP_ENOTFOUND; SP_EINVAL for a folder or for a binary or
 *         non-UTF-8 file (the message points to sp_fs_read_bytes());
 *         SP_EESCAPE; SP_EDENIED
 */
int sp_fs_read(sp_fs_text **out, sp_fs *fs, const char *path, const sp_fs_read_opts *opts,
               sp_error **err);

/**
 * Read lines `start`..`end` (1-based, inclusive; end -1 = to the end of the
 * file): the view range of file tools. An end past the last line reads to
 * the end; a start past it (other than line 1 of an empty file) is
 * SP_EINVAL, as the read_file tool's offset. Otherwise the errors of
 * sp_fs_read().
 */
int sp_fs_view(sp_fs_text **out, sp_fs *fs, const char *path, long start, long end, sp_error **err);

void sp_fs_text_free(sp_fs_text *t);

/** Raw bytes of a file. */
typedef struct sp_fs_bytes {
    char *path;
    uint8_t *data; /**< len bytes (plus a NUL not counted) */
    size_t len;
    uint64_t size;   /**< size of the whole file */
    uint64_t offset; /**< byte offset of data */
    bool truncated;  /**< bytes exist after the returned ones */
} sp_fs_bytes;

/**
 * Read up to `limit` bytes from byte `offset` (limit 0 = to the end, capped
 * at the handle's max_read_bytes, with truncated set).
 */
int sp_fs_read_bytes(sp_fs_bytes **out, sp_fs *fs, const char *path, uint64_t offset, size_t limit,
                     sp_error **err);
void sp_fs_bytes_free(sp_fs_bytes *b);

/* --------------------------------------------------------------- write -- */

typedef enum sp_fs_write_mode {
    SP_FS_OVERWRITE = 0, /**< create or replace */
    SP_FS_CREATE = 1,    /**< fail with SP_EEXISTS if the file exists */
    SP_FS_APPEND = 2,    /**< add to the end (creating if missing) */
} sp_fs_write_mode;

typedef struct sp_fs_write_opts {
    unsigned version;
    sp_fs_write_mode mode;
    /** Fail with SP_ENOTFOUND instead of creating missing parent folders. */
    bool no_create_parents;
} sp_fs_write_opts;
#define SP_FS_WRITE_OPTS_VERSION 1
#define SP_FS_WRITE_OPTS_INIT                                                                      \
    {                                                                                              \
        .version = SP_FS_WRITE_OPTS_VERSION                                                        \
    }

/**
 * Write bytes atomically: a temp file in the same folder, fsync, rename. The
 * mode (and, as root, the owner) of a replaced file is kept; a new file gets
 * 0644. On any failure the old content stays whole. A final symlink is
 * followed when its target stays inside the root.
 *
 * @param bytes_written  when non-NULL, receives the bytes written
 * @return 0; SP_EREADONLY; SP_ETOOBIG (over max_write_bytes, path depth or
 *         name length); SP_EEXISTS (SP_FS_CREATE); SP_ENOTFOUND (missing
 *         parent with no_create_parents); SP_EESCAPE; SP_ERROR with
 *         sys_errno ENOSPC for a full disk
 */
int sp_fs_write_bytes(size_t *bytes_written, sp_fs *fs, const char *path, const void *data,
                      size_t len, const sp_fs_write_opts *opts, sp_error **err);

/** Like sp_fs_write_bytes() for text: refuses content that is not UTF-8. */
int sp_fs_write(size_t *bytes_written, sp_fs *fs, const char *path, const char *text, size_t len,
                const sp_fs_write_opts *opts, sp_error **err);

/**
 * Delete a file, a symlink (never its target) or, with `recursive`, a folder
 * and everything under it. The root itself is never deleted (SP_EINVAL).
 * A non-empty folder without `recursive` gives SP_EINVAL.
 */
int sp_fs_delete(sp_fs *fs, const char *path, bool recursive, sp_error **err);

/** Create a folder (mode 0755); `parents` creates missing ones; `exist_ok`
 *  accepts an existing folder. */
int sp_fs_mkdir(sp_fs *fs, const char *path, bool parents, bool exist_ok, sp_error **err);

/* ---------------------------------------------------------- metadata -- */

typedef enum sp_fs_type {
    SP_FS_FILE = 0,
    SP_FS_DIR,
    SP_FS_SYMLINK,
    SP_FS_OTHER, /**< fifo, socket, device */
} sp_fs_type;

/** The one-word name of a type: "file", "dir", "symlink", "other". */
const char *sp_fs_type_name(sp_fs_type t);

typedef struct sp_fs_info {
    char *path;
    sp_fs_type type;
    uint64_t size;
    unsigned mode;       /**< permission bits (07777) */
    int64_t mtime_ns;    /**< nanoseconds since the epoch */
    char *link_target;   /**< for a symlink: its target, verbatim; else NULL */
    bool target_escapes; /**< symlink whose target leaves the root or dangles */
    /* Appended fields (the struct is only ever made by the library). */
    uint64_t dev;     /**< device of the file system */
    uint64_t ino;     /**< inode number */
    int64_t atime_ns; /**< last access */
    int64_t ctime_ns; /**< last status change */
    int64_t btime_ns; /**< creation (birth) time; 0 when the file system does not keep it */
    bool readable;    /**< this process may read it (a symlink: its target, through it) */
    bool writable;    /**< this process may write it (false on a read-only handle) */
    /** A symlink whose absolute target lies outside SP_WORKSPACE_MOUNT: it
     *  points into the container's image and is never followed on the host
     *  (target_escapes is set too). */
    bool target_in_image;
} sp_fs_info;

/**
 * Stat a path without following a final symlink. A symlink's target is
 * judged as the container sees it: an absolute target under
 * SP_WORKSPACE_MOUNT/ lies in the workspace; any other absolute target
 * sets target_in_image.
 */
int sp_fs_stat(sp_fs_info **out, sp_fs *fs, const char *path, sp_error **err);

/**
 * Stat what a path names after following its symlinks (contained as every
 * open is): the file an edit would change. Same fields as sp_fs_stat();
 * link_target is NULL. @return as sp_fs_stat(), and SP_EESCAPE for a link
 * that leaves the workspace
 */
int sp_fs_stat_target(sp_fs_info **out, sp_fs *fs, const char *path, sp_error **err);
void sp_fs_info_free(sp_fs_info *st);

/** True when the path exists inside the root (a final symlink counts as
 *  existing). Escaping, denied and bad paths are false. */
bool sp_fs_exists(sp_fs *fs, const char *path);

/** One entry of a listing. */
typedef struct sp_fs_entry {
    char *name; /**< last component */
    char *path; /**< relative to the root */
    sp_fs_type type;
    uint64_t size;
    unsigned mode;
    int64_t mtime_ns;
    char *link_target; /**< symlinks only */
    unsigned depth;    /**< 1 for direct children */
    /** sp_fs_list: a folder the listing would have entered but skipped
     *  (see sp_fs_list_opts.ignore) */
    bool contents_skipped;
} sp_fs_entry;

typedef struct sp_fs_entries {
    sp_fs_entry *v;
    size_t n;
    bool truncated; /**< more entries existed than max_entries */
} sp_fs_entries;

typedef struct sp_fs_list_opts {
    unsigned version;
    /** Levels to descend: 0 or 1 = direct children only. */
    unsigned depth;
    /** Stop after this many entries (0 = 100000). */
    size_t max_entries;
    /* version 2 */
    /** Globs (NULL-terminated) of what not to list below `path`: a matching
     *  folder is shown but not entered (contents_skipped), a matching file
     *  is left out. Without '/' a glob matches a name at any depth, with
     *  '/' the path relative to `path`. NULL = the default: the folders
     *  named in SP_FS_LIST_SKIP_DEFAULT and any folder holding a
     *  CACHEDIR.TAG (Cargo's target/, ...); a list holding only NULL skips
     *  nothing. `path` itself is always listed. */
    const char *const *ignore;
} sp_fs_list_opts;
#define SP_FS_LIST_OPTS_VERSION 2
/** Folders sp_fs_list does not enter by default: version control, package
 *  caches and virtual environments, whose contents crowd out the project. */
#define SP_FS_LIST_SKIP_DEFAULT                                                                    \
    ".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache",  \
        ".pytest_cache", ".ruff_cache", ".gradle", ".terraform"
#define SP_FS_LIST_OPTS_INIT                                                                       \
    {                                                                                              \
        .version = SP_FS_LIST_OPTS_VERSION                                                         \
    }

/**
 * List a folder: entries sorted by path (bytewise). Symlinks are listed as
 * symlinks and never descended into.
 */
int sp_fs_list(sp_fs_entries **out, sp_fs *fs, const char *path, const sp_fs_list_opts *opts,
               sp_error **err);
void sp_fs_entries_free(sp_fs_entries *e);

/**
 * Paths matching a glob below `base` (NULL = the root), sorted. The dialect:
 * `*` any run of characters within a name, `**` as a whole component zero or
 * more folders, `?` one character, `[...]` a class (`!` or `^` negates,
 * ranges), `{a,b}` alternatives, `\` escapes. Matched against the path
 * relative to `base`. Symlinks are matched but never followed. Entries have
 * depth 0 and no mtime/mode.
 */
int sp_fs_glob(sp_fs_entries **out, sp_fs *fs, const char *pattern, const char *base,
               size_t max_entries, sp_error **err);

typedef struct sp_fs_glob_opts {
    unsigned version;
    /** Folder to match below (NULL = the root). */
    const char *base;
    /** Stop after this many paths (0 = 100000). */
    size_t max_entries;
    /** bash's `dotglob`: wildcards also match names starting with '.',
     *  except `.git`, which only a component spelling its dot matches. */
    bool hidden;
} sp_fs_glob_opts;
#define SP_FS_GLOB_OPTS_VERSION 1
#define SP_FS_GLOB_OPTS_INIT                                                                       \
    {                                                                                              \
        .version = SP_FS_GLOB_OPTS_VERSION                                                         \
    }

/** sp_fs_glob() with options (NULL = defaults). */
int sp_fs_glob_ex(sp_fs_entries **out, sp_fs *fs, const char *pattern, const sp_fs_glob_opts *opts,
                  sp_error **err);

/* ---------------------------------------------------------------- grep -- */

typedef struct sp_fs_grep_opts {
    unsigned version;
    /** Folder or file to search (NULL = the root). */
    const char *path;
    /** Only files matching this glob: a glob without '/' is matched against
     *  file names at any depth (`*.c`), one with '/' against the path
     *  relative to `path` (`src/[ab]*.c`). A leading '!' excludes instead
     *  (`!*.min.js`); it is the first of `globs`. */
    const char *glob;
    /** Stop after this many matches (0 = 1000). */
    size_t max_matches;
    bool case_insensitive;
    /** Treat the pattern as a literal string. */
    bool fixed_string;
    /* version 2 */
    /** More globs (NULL-terminated), after `glob`, with rg's `-g` rules:
     *  for each file and folder the last glob that matches decides ('!'
     *  excludes, and an excluded folder is not entered); when some glob
     *  without '!' exists, a file no glob matches is left out. A matching
     *  glob also overrides the hidden and ignore-file rules. */
    const char *const *globs;
    /** Also search what `.gitignore`, `.ignore`, `.rgignore` and
     *  `.git/info/exclude` (at and above `path`, and below it) name; by
     *  default they are honoured as rg honours them (no git repository
     *  needed). */
    bool no_ignore;
    /** Also search hidden files and folders (names starting with '.');
     *  `.git` folders stay skipped. */
    bool hidden;
} sp_fs_grep_opts;
#define SP_FS_GREP_OPTS_VERSION 2
#define SP_FS_GREP_OPTS_INIT                                                                       \
    {                                                                                              \
        .version = SP_FS_GREP_OPTS_VERSION                                                         \
    }

typedef struct sp_fs_match {
    char *path;         /**< relative to the root */
    size_t line_number; /**< 1-based */
    char *line;         /**< the line, without its newline, cut at max_line_bytes */
    size_t match_start; /**< byte offset of the match within line */
    size_t match_end;
    uint64_t byte_offset; /**< byte offset of the match within the file */
} sp_fs_match;

typedef struct sp_fs_matches {
    sp_fs_match *v;
    size_t n;
    bool truncated; /**< more matches existed than max_matches */
    size_t files_searched;
    size_t files_skipped; /**< binary or unreadable files */
    size_t ignored;       /**< hidden or ignore-file-named files and folders not searched */
} sp_fs_matches;

/**
 * Search file contents with a PCRE2 regex (JIT where available), in UTF
 * and UCP mode (`\w`, `\d`, `\b` are Unicode-aware, as in rg). Skips
 * binary files, `.git/` folders and denied paths, never follows symlinks;
 * by default also hidden entries and what ignore files name (see
 * sp_fs_grep_opts). A UTF-8 byte order mark is not part of line 1.
 * Results sorted by path then line. One match per line is reported.
 * Files are searched on up to 8 threads (the usable CPUs), all joined
 * before the call returns; they take no signals.
 *
 * @return 0; SP_EINVAL for a bad regex (the message gives the offset)
 */
int sp_fs_grep(sp_fs_matches **out, sp_fs *fs, const char *pattern, const sp_fs_grep_opts *opts,
               sp_error **err);
void sp_fs_matches_free(sp_fs_matches *m);

/* --------------------------------------------------------------- edits -- */

/**
 * Replace `old_str` with `new_str` in a text file. Without `replace_all` the
 * old string must occur exactly once: 0 matches gives SP_ENOTFOUND, several
 * give SP_EINVAL, and the message says how many and on which lines.
 *
 * @param replaced  when non-NULL, receives the number of replacements
 */
int sp_fs_str_replace(size_t *replaced, sp_fs *fs, const char *path, const char *old_str,
                      const char *new_str, bool replace_all, sp_error **err);

/**
 * Insert text after line `line` (1-based; 0 = at the start, -1 = at the
 * end). A missing final newline on `text` is added.
 */
int sp_fs_insert(sp_fs *fs, const char *path, long line, const char *text, sp_error **err);

#ifdef __cplusplus
}
#endif

#endif
