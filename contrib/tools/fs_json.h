/**
 * @file fs_json.h
 * @brief JSON views of sandpod fs results, shared by the CLI, the model tool
 *        suite and the MCP server.
 *
 * Every `sp_json_*` constructor returns a new cJSON value that the caller
 * owns and frees with cJSON_Delete(), or NULL when memory ran out. None of
 * them takes ownership of its argument.
 *
 * Strings are always valid UTF-8, so printing never yields invalid JSON even
 * for names the container made up. Bytes that are not part of valid UTF-8,
 * and NUL bytes (which a cJSON string cannot hold), appear as the four
 * characters `\xNN` (lowercase hex): the byte values survive for a reader
 * who needs them, at the price of ambiguity with a name that really holds
 * a backslash followed by `x` and two hex digits. File contents that are not
 * text are never escaped this way: sp_json_fs_bytes() switches to base64.
 *
 * 64-bit counts beyond 2^53 (nanosecond times) are emitted as exact integer
 * literals rather than rounded doubles.
 */
#ifndef SANDPOD_FS_JSON_H
#define SANDPOD_FS_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "sandpod/error.h"
#include "sandpod/fs.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * A short, stable name for an error code, for machines: "error", "invalid",
 * "not_found", "exists", "escape", "too_big", "podman", "timeout",
 * "read_only", "denied", "cancelled"; "ok" for SP_OK and "unknown" for anything else.
 * These names are an interface: never rename one.
 */
const char *sp_json_code_name(int code);

/** True when s[0..len) is strict UTF-8 (no overlongs, surrogates or code
 *  points past U+10FFFF) and holds no NUL byte. */
bool sp_json_utf8_ok(const char *s, size_t len);

/**
 * A copy of s[0..len) that is valid UTF-8 without NUL bytes, with every
 * offending byte written as `\xNN`. Free with free(); NULL on no memory.
 */
char *sp_json_sanitize(const char *s, size_t len);

/** A JSON string made from s[0..len) after sp_json_sanitize(). */
cJSON *sp_json_string_n(const char *s, size_t len);

/** A JSON string from a C string; NULL `s` gives JSON null. */
cJSON *sp_json_string(const char *s);

/**
 * Add `key: s` to an object (`s` sanitized; NULL `s` adds null).
 * @return false when memory ran out
 */
bool sp_json_add_string(cJSON *obj, const char *key, const char *s);

/** Add an unsigned 64-bit integer exactly. @return false on no memory */
bool sp_json_add_u64(cJSON *obj, const char *key, uint64_t v);

/** Add a signed 64-bit integer exactly. @return false on no memory */
bool sp_json_add_i64(cJSON *obj, const char *key, int64_t v);

/**
 * `{"ok": false, "error": {"code": "escape", "message": "..."}}`; the
 * message falls back to sp_strerror() when the error has none.
 */
cJSON *sp_json_error(const sp_error *err);

/** sp_json_error() for a code and a message of the caller's own. */
cJSON *sp_json_error_code(int code, const char *message);

/**
 * `{"ok": false, "error": {"code", "reason", "message"}}`: `reason` is
 * sp_reason_name() of an sp_reason ("is_directory", "stale", ...; "none"
 * when nothing more is known). sp_json_error() and sp_json_error_code()
 * give the same shape.
 */
cJSON *sp_json_error_reason(int code, int reason, const char *message);

/**
 * `{path, content, total_lines, offset, limit, lines, lines_cut, truncated}`,
 * plus `next_offset` (the offset that continues the read) when truncated.
 * Offsets are 1-based line numbers, as the read_file tool's offset and
 * `sandpod fs read --offset` count (sp_fs_read_opts.offset is 0-based: the
 * JSON says sp_fs_text.offset + 1).
 */
cJSON *sp_json_fs_text(const sp_fs_text *t);

/**
 * `{path, size, offset, length, truncated, encoding, content}`: `encoding`
 * is "utf-8" with the bytes as a string when they are UTF-8 without NUL
 * bytes, else "base64" (RFC 4648, padded).
 */
cJSON *sp_json_fs_bytes(const sp_fs_bytes *b);

/**
 * `{path, type, size, mode, permissions, mtime, mtime_ns, modified,
 * accessed, atime_ns, changed, ctime_ns, created, [btime_ns], readable,
 * writable}` and, for a symlink, `link_target`, `target_escapes` and
 * `target_in_image`. `mode` is a string of four octal digits ("0644"),
 * `permissions` as ls shows them ("rw-r--r--"); the times without `_ns` are
 * RFC 3339 in UTC, to the second (`mtime` = `modified`, kept for old
 * readers); `created` is null (and `btime_ns` absent) when the file system
 * keeps no creation time; `*_ns` are exact integers. `readable` and
 * `writable` are what this process (the tools) may do.
 */
cJSON *sp_json_fs_info(const sp_fs_info *st);

/**
 * One entry: `{name, path, type, size, mode, mtime, mtime_ns, depth}` plus
 * `link_target` for symlinks. Fields the producer left unset (glob results:
 * mode, mtime and depth of 0) are omitted rather than shown as zero.
 */
cJSON *sp_json_fs_entry(const sp_fs_entry *e);

/** `{entries: [entry...], count, truncated}`. */
cJSON *sp_json_fs_entries(const sp_fs_entries *e);

/**
 * One match: `{path, line_number, line, match_start, match_end,
 * byte_offset}`. Offsets count bytes of the original line and file; they
 * no longer line up with `line` in the rare case its bytes needed escaping.
 */
cJSON *sp_json_fs_match(const sp_fs_match *m);

/** `{matches: [match...], count, truncated, files_searched, files_skipped}`. */
cJSON *sp_json_fs_matches(const sp_fs_matches *m);

/** RFC 4648 base64 (padded) of n bytes; free(). NULL when memory ran out. */
char *sp_base64_encode(const uint8_t *d, size_t n);

/**
 * Strict RFC 4648 base64 decoding: the standard alphabet, padding
 * required, no whitespace, zero padding bits (so each byte string has one
 * encoding).
 *
 * @param out      receives the bytes (plus a NUL not counted); free()
 * @param why      on failure, what is wrong and at which offset; free()
 * @return 0 or SP_EINVAL
 */
int sp_base64_decode(uint8_t **out, size_t *out_len, const char *s, size_t len, char **why);

/**
 * The media type of a file from its first bytes (magic numbers): image/png,
 * image/jpeg, image/gif, image/webp, application/pdf, application/zip,
 * application/gzip, application/x-elf, application/wasm, ... and
 * "application/octet-stream" for anything else. Static string.
 */
const char *sp_mime_sniff(const uint8_t *d, size_t n);

/** `{path, bytes_written}`: the answer to a write. */
cJSON *sp_json_fs_written(const char *path, size_t bytes_written);

#ifdef __cplusplus
}
#endif

#endif
