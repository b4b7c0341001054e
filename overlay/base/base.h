/* Internal helpers shared by every module: errors, cleanup attributes, a
 * growable buffer, UTF-8 checks. Not installed. */
#ifndef SANDPOD_BASE_H
#define SANDPOD_BASE_H

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "sandpod/error.h"

#define SP_UNUSED       __attribute__((unused))
#define SP_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* Set *err (when err is non-NULL) and return code. The message is formatted
 * like printf. sys_errno may be 0. */
int sp_err_set(sp_error **err, int code, int sys_errno, const char *fmt, ...) SP_PRINTF(4, 5);

/* Prefix an existing error's message with context ("hydrate: ..."); returns
 * the error's code. */
int sp_err_wrap(sp_error **err, int code, const char *fmt, ...) SP_PRINTF(3, 4);
/* Hand an error a callee made in a local `e` to the caller's *err (or
 * free it when the caller passed NULL); returns code. */
int sp_err_give(sp_error **err, sp_error *e, int code);
/* Give *err (when there is one) a reason (sandpod/error.h) more precise
 * than what its errno implied; returns code, so it wraps a sp_err_set():
 * return sp_err_reason(err, SP_R_STALE, sp_err_set(err, ...)). */
int sp_err_reason(sp_error **err, int reason, int code);

/* Map an errno to the closest sp_code. */
int sp_code_from_errno(int e);
/* A code's stable snake_case name for JSON ("not_found"; "unknown" for
 * others); the tool results and events use it. */
const char *sp_code_name(int code);
/* The code of such a name (a peer's JSON error); SP_ERROR for others. */
int sp_code_from_name(const char *name);
/* The reason of an sp_reason_name() name; SP_R_NONE for others. */
int sp_reason_from_name(const char *name);

/* An executable named name (with a slash: that path) as an allocated
 * path, searched in $PATH (a default PATH when unset) as kubectl and
 * execvp do, but skipping what cannot be searched: a folder of PATH we
 * may not enter does not hide a later one, or make a missing program
 * "permission denied". NULL: none. */
char *sp_find_in_path(const char *name);

/* Set an error from errno with "what: path: strerror" and the mapped code. */
int sp_err_errno(sp_error **err, int e, const char *what, const char *path);

static inline void sp_cleanup_free_(void *p)
{
    free(*(void **)p);
}
static inline void sp_cleanup_close_(const int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}
#define cleanup_free  __attribute__((cleanup(sp_cleanup_free_)))
#define cleanup_close __attribute__((cleanup(sp_cleanup_close_)))

/* Hand ownership out of a cleanup variable. */
static inline void *sp_steal_ptr_(void *pp)
{
    void **p = pp;
    void *v = *p;
    *p = NULL;
    return v;
}
#define steal_pointer(pp) sp_steal_ptr_(pp)
static inline int steal_fd(int *fd)
{
    int v = *fd;
    *fd = -1;
    return v;
}

/* Allocation that aborts on out-of-memory: the library cannot recover from
 * it meaningfully and every caller would otherwise need a branch. */
void *sp_xmalloc(size_t n);
void *sp_xcalloc(size_t n, size_t size);
void *sp_xrealloc(void *p, size_t n);
char *sp_xstrdup(const char *s);
char *sp_xstrndup(const char *s, size_t n);
char *sp_xasprintf(const char *fmt, ...) SP_PRINTF(1, 2);
/* The same with a va_list. */
char *sp_xvasprintf(const char *fmt, va_list ap) SP_PRINTF(1, 0);

/* A growable byte buffer, always NUL-terminated. */
typedef struct sp_buf {
    char *data;
    size_t len;
    size_t cap;
} sp_buf;
#define SP_BUF_INIT                                                                                \
    {                                                                                              \
        NULL, 0, 0                                                                                 \
    }
void sp_buf_grow(sp_buf *b, size_t extra);
void sp_buf_add(sp_buf *b, const void *data, size_t len);
void sp_buf_adds(sp_buf *b, const char *s);
void sp_buf_addc(sp_buf *b, char c);
void sp_buf_printf(sp_buf *b, const char *fmt, ...) SP_PRINTF(2, 3);
char *sp_buf_steal(sp_buf *b);
void sp_buf_dispose(sp_buf *b);
/* One debug line for an HTTP request ("WHO: METHOD PATH -> STATUS, N bytes
 * sent, N received, N ms", or "no answer" when status is 0), with query
 * values left out (`?name=...`): they may name things a log should not
 * hold (a selector, a reference with credentials). Free the result. */
char *sp_request_log_line(const char *who, const char *method, const char *path, long status,
                          int64_t sent, int64_t received, int64_t ms);
/* A streamed body read line by line: append `data` to `pending` and call
 * `fn` with each whole line (NUL-terminated, without its '\n'; empty lines
 * too). Returns 0, the first non-zero value `fn` returned, or SP_ETOOBIG
 * when the unfinished line outgrows `max_partial`. */
int sp_buf_lines(sp_buf *pending, const void *data, size_t n, size_t max_partial,
                 int (*fn)(const char *line, size_t len, void *ud, sp_error **err), void *ud,
                 sp_error **err);

/* A growable array of owned strings. */
typedef struct sp_strv {
    char **v;
    size_t n;
    size_t cap;
} sp_strv;
void sp_strv_push(sp_strv *sv, char *owned);
void sp_strv_dispose(sp_strv *sv);
/* The NULL-terminated array (never NULL, empty when nothing was pushed);
 * the caller frees each string and the array. */
char **sp_strv_steal(sp_strv *sv);
/* A copy of the NULL-terminated v (NULL: an empty one); free with
 * sp_strv_free(). */
char **sp_strv_copy(const char *const *v);
/* Free a NULL-terminated array of strings and the array; accepts NULL. */
void sp_strv_free(char **v);

/* UTF-8 validity (strict: no overlongs, no surrogates). */
bool sp_utf8_valid(const char *s, size_t len);
/* Length of the longest prefix of s[0..len) that ends on a code point
 * boundary and is at most max bytes. */
size_t sp_utf8_cut(const char *s, size_t len, size_t max);

/* Read/write the whole of a buffer, retrying on EINTR and short counts. */
int sp_write_all(int fd, const void *data, size_t len);
/* Append all of fd to b; -1 with errno set on a read error, or EFBIG when
 * b would grow past limit bytes. */
int sp_read_all(int fd, sp_buf *b, size_t limit);
/* Replace the file at path (in a folder only we may write) with data:
 * a temp file beside it with `mode`, fsync, rename. */
int sp_write_file_atomic(const char *path, const void *data, size_t len, unsigned mode,
                         sp_error **err);

/* An output cap that keeps the head and the tail of a stream: at most
 * max_bytes and max_lines in all, half for each end, with a marker in the
 * middle saying what was left out. Fed incrementally, so a command that
 * prints gigabytes costs a fixed amount of memory. */
typedef struct sp_capbuf {
    size_t max_bytes, max_lines;
    sp_buf head;
    size_t head_lines;
    bool head_full;
    char *ring; /* the last tail_cap bytes seen after the head filled */
    size_t tail_cap, ring_pos, ring_len;
    uint64_t total_bytes, total_lines;
    bool last_nl; /* the last byte fed was '\n' */
} sp_capbuf;
#define SP_CAP_DEFAULT_BYTES 8192
#define SP_CAP_DEFAULT_LINES 200
void sp_capbuf_init(sp_capbuf *c, size_t max_bytes, size_t max_lines);
void sp_capbuf_feed(sp_capbuf *c, const char *data, size_t len);
/* The capped text (NUL-terminated, caller frees); *truncated tells whether
 * anything was left out. Resets nothing: call once, then dispose. */
char *sp_capbuf_text(sp_capbuf *c, size_t *len, bool *truncated);
void sp_capbuf_dispose(sp_capbuf *c);

/* The state root: $SANDPOD_HOME, else $XDG_DATA_HOME/sandpod, else
 * ~/.local/share/sandpod (also declared in the public sandpod/hydrate.h). */
int sp_state_root(char **out, sp_error **err);

/* One record of getdents64(2), which glibc neither wraps nor declares. */
struct sp_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* The one check of an options struct's version, at every public entry
 * point that takes one: NULL (the defaults) passes, and so does a version
 * from min to max; anything else is SP_EINVAL, "sp_x_opts version 9 is not
 * supported (this library knows 1 to 2)". Every opts struct starts with
 * `unsigned version`. */
int sp_opts_check(const unsigned *version, unsigned min, unsigned max, const char *name,
                  sp_error **err);
#define SP_OPTS_CHECK(opts, min, max, name, err)                                                   \
    sp_opts_check((opts) ? &(opts)->version : NULL, (min), (max), (name), (err))

/* Monotonic milliseconds. */
int64_t sp_now_ms(void);

#endif
