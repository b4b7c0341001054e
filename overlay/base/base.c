#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "base.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

const char *sp_version(void);
const char *sp_version(void)
{
    return SANDPOD_VERSION;
}

void sp_error_free(sp_error *err)
{
    if (!err)
        return;
    free(err->message);
    free(err);
}

const char *sp_strerror(int code)
{
    switch (code) {
    case SP_OK:
        return "ok";
    case SP_ERROR:
        return "error";
    case SP_EINVAL:
        return "invalid argument";
    case SP_ENOTFOUND:
        return "not found";
    case SP_EEXISTS:
        return "already exists";
    case SP_EESCAPE:
        return "escapes the workspace";
    case SP_ETOOBIG:
        return "too big";
    case SP_EPODMAN:
        return "podman error";
    case SP_ETIMEOUT:
        return "timed out";
    case SP_EREADONLY:
        return "read-only";
    case SP_EDENIED:
        return "denied";
    case SP_ECANCELED:
        return "cancelled";
    default:
        return "unknown error";
    }
}

static char *vformat(const char *fmt, va_list ap) SP_PRINTF(1, 0);
static char *vformat(const char *fmt, va_list ap)
{
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        abort();
    return s;
}

/* The reason an errno (or else the code) implies, where the error is made:
 * most errors come from a system call's errno. */
static int reason_of(int code, int e)
{
    switch (e) {
    case EISDIR:
        return SP_R_IS_DIRECTORY;
    case ENOTDIR:
        return SP_R_NOT_DIRECTORY;
    case ENOTEMPTY:
        return SP_R_NOT_EMPTY;
    case EEXIST:
        return SP_R_EXISTS;
    case EXDEV:
        /* openat2's RESOLVE_BENEATH also says EXDEV: that one is an escape. */
        return code == SP_EESCAPE ? SP_R_NONE : SP_R_CROSS_DEVICE;
    case EFBIG:
    case E2BIG:
    case ENAMETOOLONG:
        return SP_R_TOO_LARGE;
    default:
        break;
    }
    if (code == SP_EEXISTS)
        return SP_R_EXISTS;
    if (code == SP_ETOOBIG)
        return SP_R_TOO_LARGE;
    if (code == SP_EPODMAN)
        return SP_R_SERVICE;
    return SP_R_NONE;
}

int sp_err_set(sp_error **err, int code, int sys_errno, const char *fmt, ...)
{
    if (!err)
        return code;
    va_list ap;
    va_start(ap, fmt);
    char *msg = vformat(fmt, ap);
    va_end(ap);
    if (*err) {
        /* Never leak a previous error: the newest one wins. */
        sp_error_free(*err);
    }
    sp_error *e = sp_xcalloc(1, sizeof(*e));
    e->code = code;
    e->sys_errno = sys_errno;
    e->message = msg;
    e->reason = reason_of(code, sys_errno);
    *err = e;
    return code;
}

int sp_err_reason(sp_error **err, int reason, int code)
{
    if (err && *err)
        (*err)->reason = reason;
    return code;
}

const char *sp_reason_name(int reason)
{
    static const char *const names[] = {
        "none",        "is_directory",   "not_directory", "not_empty", "exists",
        "patch_parse", "patch_conflict", "too_large",     "stale",     "not_text",
        "not_unique",  "no_store",       "cross_device",  "service",   "elsewhere",
    };
    if (reason < 0 || (size_t)reason >= sizeof(names) / sizeof(names[0]))
        return "unknown";
    return names[reason];
}

int sp_err_give(sp_error **err, sp_error *e, int code)
{
    if (err)
        *err = e;
    else
        sp_error_free(e);
    return code;
}

int sp_err_wrap(sp_error **err, int code, const char *fmt, ...)
{
    if (!err || !*err)
        return code;
    va_list ap;
    va_start(ap, fmt);
    char *prefix = vformat(fmt, ap);
    va_end(ap);
    char *msg = sp_xasprintf("%s: %s", prefix, (*err)->message);
    free(prefix);
    free((*err)->message);
    (*err)->message = msg;
    return (*err)->code;
}

const char *sp_code_name(int code)
{
    /* Indexed by -code; the order follows sp_code, which never renumbers. */
    static const char *const names[] = {
        "ok",      "error",  "invalid", "not_found", "exists", "escape",
        "too_big", "podman", "timeout", "read_only", "denied", "cancelled",
    };
    if (code > 0 || (size_t)-code >= sizeof(names) / sizeof(names[0]))
        return "unknown";
    return names[-code];
}

int sp_code_from_name(const char *name)
{
    for (int c = SP_ERROR; name && strcmp(sp_code_name(c), "unknown") != 0; c--)
        if (strcmp(sp_code_name(c), name) == 0)
            return c;
    return SP_ERROR;
}

int sp_reason_from_name(const char *name)
{
    for (int r = SP_R_NONE; name && strcmp(sp_reason_name(r), "unknown") != 0; r++)
        if (strcmp(sp_reason_name(r), name) == 0)
            return r;
    return SP_R_NONE;
}

int sp_code_from_errno(int e)
{
    switch (e) {
    case ENOENT:
        return SP_ENOTFOUND;
    case EEXIST:
        return SP_EEXISTS;
    case EROFS:
        return SP_EREADONLY;
    case EACCES:
    case EPERM:
        return SP_EDENIED;
    case EFBIG:
    case ENAMETOOLONG:
    case E2BIG:
        return SP_ETOOBIG;
    case EINVAL:
    case EISDIR:
    case ENOTDIR:
    case ELOOP:
        return SP_EINVAL;
    case ETIMEDOUT:
        return SP_ETIMEOUT;
    default:
        return SP_ERROR;
    }
}

int sp_err_errno(sp_error **err, int e, const char *what, const char *path)
{
    const char *why;
    switch (e) {
    case ENOENT:
        why = "no such file or folder";
        break;
    case ENOTDIR:
        why = "not a folder";
        break;
    case EISDIR:
        why = "is a folder";
        break;
    case ENOSPC:
        why = "no space left on device";
        break;
    case EXDEV:
        /* A rename or link across a mount boundary: not an escape (openat2's
         * EXDEV for a path leaving the root is reported where it is met,
         * as SP_EESCAPE). */
        why = "cannot move across file systems";
        break;
    case ELOOP:
        why = "too many levels of symlinks";
        break;
    default:
        why = strerror(e);
        break;
    }
    if (path)
        return sp_err_set(err, sp_code_from_errno(e), e, "%s: %s: %s", what, path, why);
    return sp_err_set(err, sp_code_from_errno(e), e, "%s: %s", what, why);
}

void *sp_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        abort();
    return p;
}

void *sp_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        abort();
    return p;
}

void *sp_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        abort();
    return q;
}

char *sp_xstrdup(const char *s)
{
    return sp_xstrndup(s, strlen(s));
}

char *sp_xstrndup(const char *s, size_t n)
{
    char *p = sp_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *sp_xvasprintf(const char *fmt, va_list ap)
{
    return vformat(fmt, ap);
}

char *sp_xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = vformat(fmt, ap);
    va_end(ap);
    return s;
}

void sp_buf_grow(sp_buf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2)
            abort();
        cap *= 2;
    }
    b->data = sp_xrealloc(b->data, cap);
    b->cap = cap;
    /* Always a string, even before anything is added. */
    b->data[b->len] = '\0';
}

void sp_buf_add(sp_buf *b, const void *data, size_t len)
{
    sp_buf_grow(b, len);
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
}

void sp_buf_adds(sp_buf *b, const char *s)
{
    sp_buf_add(b, s, strlen(s));
}

char *sp_request_log_line(const char *who, const char *method, const char *path, long status,
                          int64_t sent, int64_t received, int64_t ms)
{
    sp_buf b = SP_BUF_INIT;
    const char *q = strchr(path, '?');
    sp_buf_add(&b, path, q ? (size_t)(q - path) : strlen(path));
    while (q && *q) {
        size_t k = strcspn(q + 1, "=&");
        sp_buf_addc(&b, *q);
        sp_buf_add(&b, q + 1, k);
        q += 1 + k;
        if (*q == '=')
            sp_buf_adds(&b, "=...");
        q = strchr(q, '&');
    }
    sp_buf_addc(&b, '\0');
    char *line = status > 0 ? sp_xasprintf("%s: %s %s -> %ld, %lld bytes sent, %lld received, "
                                           "%lld ms",
                                           who, method, b.data, status, (long long)sent,
                                           (long long)received, (long long)ms)
                            : sp_xasprintf("%s: %s %s -> no answer after %lld ms", who, method,
                                           b.data, (long long)ms);
    sp_buf_dispose(&b);
    return line;
}

int sp_buf_lines(sp_buf *pending, const void *data, size_t n, size_t max_partial,
                 int (*fn)(const char *line, size_t len, void *ud, sp_error **err), void *ud,
                 sp_error **err)
{
    sp_buf_add(pending, data, n);
    size_t start = 0;
    char *nl;
    int r = 0;
    while (!r && (nl = memchr(pending->data + start, '\n', pending->len - start))) {
        size_t l = (size_t)(nl - (pending->data + start));
        *nl = '\0';
        r = fn(pending->data + start, l, ud, err);
        start += l + 1;
    }
    memmove(pending->data, pending->data + start, pending->len - start);
    pending->len -= start;
    pending->data[pending->len] = '\0';
    if (!r && pending->len > max_partial)
        r = SP_ETOOBIG;
    return r;
}

void sp_buf_addc(sp_buf *b, char c)
{
    sp_buf_add(b, &c, 1);
}

void sp_buf_printf(sp_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = vformat(fmt, ap);
    va_end(ap);
    sp_buf_adds(b, s);
    free(s);
}

char *sp_buf_steal(sp_buf *b)
{
    sp_buf_grow(b, 0);
    char *d = b->data;
    b->data = NULL;
    b->len = b->cap = 0;
    return d;
}

void sp_buf_dispose(sp_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void sp_strv_push(sp_strv *sv, char *owned)
{
    if (sv->n + 1 >= sv->cap) {
        sv->cap = sv->cap ? sv->cap * 2 : 8;
        sv->v = sp_xrealloc(sv->v, sv->cap * sizeof(char *));
    }
    sv->v[sv->n++] = owned;
    sv->v[sv->n] = NULL;
}

char **sp_strv_steal(sp_strv *sv)
{
    char **v = sv->v ? sv->v : sp_xcalloc(1, sizeof(char *));
    sv->v = NULL;
    sv->n = sv->cap = 0;
    return v;
}

char **sp_strv_copy(const char *const *v)
{
    sp_strv sv = {0};
    for (size_t i = 0; v && v[i]; i++)
        sp_strv_push(&sv, sp_xstrdup(v[i]));
    return sp_strv_steal(&sv);
}

void sp_strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

void sp_strv_dispose(sp_strv *sv)
{
    for (size_t i = 0; i < sv->n; i++)
        free(sv->v[i]);
    free(sv->v);
    sv->v = NULL;
    sv->n = sv->cap = 0;
}

/* Returns the length of the UTF-8 sequence at s (1..4), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t len)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t n;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (len < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    if (cp >= 0xd800 && cp <= 0xdfff)
        return 0;
    return n;
}

bool sp_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        /* Fast path over ASCII, 8 bytes at a time. */
        while (i + 8 <= len) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (w & 0x8080808080808080ull)
                break;
            i += 8;
        }
        if (i >= len)
            break;
        size_t n = utf8_seq(p + i, len - i);
        if (!n)
            return false;
        i += n;
    }
    return true;
}

size_t sp_utf8_cut(const char *s, size_t len, size_t max)
{
    if (len <= max)
        return len;
    size_t n = max;
    /* Step back over continuation bytes so a code point is never split. */
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
        n--;
    return n;
}

int sp_write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int sp_read_all(int fd, sp_buf *b, size_t limit)
{
    char chunk[8192];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            return 0;
        if (b->len + (size_t)n > limit) {
            errno = EFBIG;
            return -1;
        }
        sp_buf_add(b, chunk, (size_t)n);
    }
}

int sp_write_file_atomic(const char *path, const void *data, size_t len, unsigned mode,
                         sp_error **err)
{
    cleanup_free char *tmp = sp_xasprintf("%s.%d.tmp", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0)
        return sp_err_errno(err, errno, "write", path);
    if (fchmod(fd, mode) < 0 || sp_write_all(fd, data, len) < 0 || fsync(fd) < 0) {
        int r = sp_err_errno(err, errno, "write", path);
        close(fd);
        unlink(tmp);
        return r;
    }
    close(fd);
    if (rename(tmp, path) < 0) {
        int r = sp_err_errno(err, errno, "write", path);
        unlink(tmp);
        return r;
    }
    return 0;
}

int64_t sp_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int sp_opts_check(const unsigned *version, unsigned min, unsigned max, const char *name,
                  sp_error **err)
{
    if (!version || (*version >= min && *version <= max))
        return 0;
    if (min == max)
        return sp_err_set(err, SP_EINVAL, 0,
                          "%s version %u is not supported (this library knows version %u)", name,
                          *version, max);
    return sp_err_set(err, SP_EINVAL, 0,
                      "%s version %u is not supported (this library knows %u to %u)", name,
                      *version, min, max);
}

char *sp_find_in_path(const char *name)
{
    if (strchr(name, '/'))
        return access(name, X_OK) == 0 ? sp_xstrdup(name) : NULL;
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
    while (*path) {
        size_t n = strcspn(path, ":");
        if (n) {
            char *cand = sp_xasprintf("%.*s/%s", (int)n, path, name);
            struct stat st;
            if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
                return cand;
            free(cand);
        }
        path += n;
        if (*path == ':')
            path++;
    }
    return NULL;
}
