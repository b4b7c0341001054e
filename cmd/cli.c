/* Shared CLI helpers: error lines, exit codes, number parsing, input, JSON. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "fs_json.h"

__attribute__((format(printf, 1, 0))) static void vmessage(const char *fmt, va_list ap);
static void vmessage(const char *fmt, va_list ap)
{
    fflush(stdout);
    fputs("sandpod: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
    return CLI_EXIT_ERROR;
}

static bool usage_json;

void cli_usage_json(bool on)
{
    usage_json = on;
}

__attribute__((format(printf, 3, 0))) static int vusage(const char *cmd, const char *near,
                                                        const char *fmt, va_list ap);
static int vusage(const char *cmd, const char *near, const char *fmt, va_list ap)
{
    char msg[1024], hint[128];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (usage_json) {
        cJSON *o = cJSON_CreateObject();
        cJSON *e = NULL;
        if (o && (!cJSON_AddFalseToObject(o, "ok") || !(e = cJSON_AddObjectToObject(o, "error")) ||
                  !cJSON_AddStringToObject(e, "code", "usage") ||
                  !cJSON_AddStringToObject(e, "message", msg) ||
                  (near && !cJSON_AddStringToObject(e, "suggestion", near)))) {
            cJSON_Delete(o);
            o = NULL;
        }
        cli_print_json(o);
    }
    if (near)
        snprintf(hint, sizeof(hint), " (did you mean '%s'?)", near);
    else if (cmd)
        snprintf(hint, sizeof(hint), " (see 'sandpod %s --help')", cmd);
    else
        snprintf(hint, sizeof(hint), " (see 'sandpod --help')");
    fflush(stdout);
    fprintf(stderr, "sandpod: %s%s\n", msg, hint);
    return CLI_EXIT_USAGE;
}

int cli_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vusage(cmd, NULL, fmt, ap);
    va_end(ap);
    return rc;
}

int cli_usage_near(const char *cmd, const char *near, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vusage(cmd, near, fmt, ap);
    va_end(ap);
    return rc;
}

int cli_exit_code(int code)
{
    return code == SP_OK ? CLI_EXIT_OK : CLI_EXIT_ERROR;
}

int cli_sp_error(int code, const sp_error *err)
{
    const char *msg = err && err->message && *err->message ? err->message : sp_strerror(code);
    /* Messages name workspace paths, which the container controls. */
    fflush(stdout);
    fputs("sandpod: ", stderr);
    cli_put_name(stderr, msg);
    fputc('\n', stderr);
    return cli_exit_code(code);
}

int cli_parse_ll(const char *cmd, const char *what, const char *s, long long min, long long max,
                 long long *out)
{
    const char *p = s;
    /* strtoll skips leading space and accepts a sign; neither belongs in a
     * count, and "-0" or " 5" would otherwise slip through. */
    if (*p == '-' && min < 0)
        p++;
    if (*p < '0' || *p > '9') {
        cli_usage(cmd, "%s must be a whole number: '%s'", what, s);
        return -1;
    }
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0') {
        cli_usage(cmd, "%s must be a whole number: '%s'", what, s);
        return -1;
    }
    if (errno == ERANGE || v < min || v > max) {
        if (min == LLONG_MIN)
            cli_usage(cmd, "%s is out of range: '%s'", what, s);
        else if (max == LLONG_MAX)
            cli_usage(cmd, "%s must be at least %lld: '%s'", what, min, s);
        else
            cli_usage(cmd, "%s must be between %lld and %lld: '%s'", what, min, max, s);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_size(const char *cmd, const char *what, const char *s, size_t max, size_t *out)
{
    long long lim = max > (size_t)LLONG_MAX ? LLONG_MAX : (long long)max;
    long long v = 0;
    if (cli_parse_ll(cmd, what, s, 0, lim, &v) < 0)
        return -1;
    *out = (size_t)v;
    return 0;
}

int cli_read_fd(int fd, size_t max, char **out, size_t *len)
{
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf)
        return -1;
    for (;;) {
        if (n == cap) {
            if (cap > max) {
                free(buf);
                errno = EFBIG;
                return -1;
            }
            size_t ncap = cap * 2;
            char *nb = realloc(buf, ncap + 1);
            if (!nb) {
                free(buf);
                errno = ENOMEM;
                return -1;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            free(buf);
            errno = e;
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (n > max) {
        free(buf);
        errno = EFBIG;
        return -1;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

int cli_read_file(const char *path, size_t max, char **out, size_t *len)
{
    if (strcmp(path, "-") == 0)
        return cli_read_fd(STDIN_FILENO, max, out, len);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = cli_read_fd(fd, max, out, len);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

int cli_print_json(cJSON *v)
{
    if (!v)
        return cli_error("out of memory");
    char *s = isatty(STDOUT_FILENO) ? cJSON_Print(v) : cJSON_PrintUnformatted(v);
    cJSON_Delete(v);
    if (!s)
        return cli_error("out of memory");
    fputs(s, stdout);
    fputc('\n', stdout);
    cJSON_free(s);
    return CLI_EXIT_OK;
}

int cli_print_result(cJSON *v)
{
    if (v && cJSON_IsObject(v) && !cJSON_HasObjectItem(v, "ok")) {
        cJSON *ok = cJSON_CreateTrue();
        if (!ok) {
            cJSON_Delete(v);
            return cli_error("out of memory");
        }
        /* First, so that a reader of the one-line form sees it at once. */
        cJSON_AddItemToObject(v, "ok", ok);
        cJSON_DetachItemViaPointer(v, ok);
        cJSON_InsertItemInArray(v, 0, ok);
    }
    return cli_print_json(v);
}

int cli_json_error(int code, const sp_error *err)
{
    cJSON *j = err ? sp_json_error(err) : sp_json_error_code(code, sp_strerror(code));
    cli_print_json(j);
    return cli_sp_error(code, err);
}

/* The length of the well-formed UTF-8 sequence at p[0..n) (2-4 bytes; no
 * overlongs, surrogates or code points past U+10FFFF), or 0. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf; /* the range of the second byte */
    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        len = 2;
    } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        len = 3;
        if (p[0] == 0xe0)
            lo = 0xa0;
        else if (p[0] == 0xed)
            hi = 0x9f;
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        len = 4;
        if (p[0] == 0xf0)
            lo = 0x90;
        else if (p[0] == 0xf4)
            hi = 0x8f;
    } else {
        return 0;
    }
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return len;
}

/* Whether the UTF-8 sequence at p (n bytes, well formed) is a character
 * that reorders or hides what follows it on screen: the bidirectional
 * marks, embeddings, overrides and isolates (U+061C, U+200E, U+200F,
 * U+202A-U+202E, U+2066-U+2069), or a C1 control (U+0080-U+009F). */
static bool invisible_control(const unsigned char *p, size_t n)
{
    if (n == 2)
        return (p[0] == 0xc2 && p[1] < 0xa0) || (p[0] == 0xd8 && p[1] == 0x9c);
    if (n != 3 || p[0] != 0xe2)
        return false;
    return (p[1] == 0x80 && (p[2] == 0x8e || p[2] == 0x8f || (p[2] >= 0xaa && p[2] <= 0xae))) ||
           (p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xa9);
}

/* The code point of a well-formed 2- or 3-byte sequence. */
static unsigned code_point(const unsigned char *p, size_t n)
{
    return n == 2 ? ((p[0] & 0x1fu) << 6) | (p[1] & 0x3fu)
                  : ((p[0] & 0x0fu) << 12) | ((p[1] & 0x3fu) << 6) | (p[2] & 0x3fu);
}

void cli_put_name(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t len = strlen(s);
    for (size_t i = 0; i < len;) {
        unsigned char c = p[i];
        size_t plain = 0; /* a run written at once, not a fputc each */
        while (i + plain < len && p[i + plain] >= 0x20 && p[i + plain] < 0x7f &&
               p[i + plain] != '\\')
            plain++;
        if (plain) {
            fwrite(p + i, 1, plain, f);
            i += plain;
        } else if (c == '\\') {
            fputs("\\\\", f);
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(f, "\\x%02x", c);
            i++;
        } else {
            size_t n = utf8_seq(p + i, len - i);
            if (!n) {
                fprintf(f, "\\x%02x", c);
                i++;
            } else if (invisible_control(p + i, n)) {
                fprintf(f, "\\u%04x", code_point(p + i, n));
                i += n;
            } else {
                fwrite(p + i, 1, n, f);
                i += n;
            }
        }
    }
}

void cli_put_text(FILE *f, const char *data, size_t len, bool raw)
{
    if (!len)
        return;
    if (raw || !isatty(fileno(f))) {
        fwrite(data, 1, len, f);
        return;
    }
    const unsigned char *p = (const unsigned char *)data;
    size_t run = 0; /* start of the bytes not yet written that are safe */
    size_t i = 0;
    while (i < len) {
        unsigned char c = p[i];
        size_t n = 1;
        bool safe;
        if (c < 0x80) {
            safe = (c >= 0x20 && c != 0x7f) || c == '\n' || c == '\t' ||
                   (c == '\r' && i + 1 < len && p[i + 1] == '\n');
        } else {
            n = utf8_seq(p + i, len - i);
            /* C1 controls (CSI U+009B, OSC U+009D among them) and the
             * bidirectional overrides that reorder a line on screen. */
            safe = n > 0 && !invisible_control(p + i, n);
        }
        if (safe) {
            i += n;
            continue;
        }
        fwrite(p + run, 1, i - run, f);
        if (n == 2 || n == 3)
            fprintf(f, "\\u%04x", code_point(p + i, n));
        else
            fprintf(f, "\\x%02x", c);
        i += n ? n : 1;
        run = i;
    }
    fwrite(p + run, 1, len - run, f);
}

int cli_finish(int rc)
{
    cli_progress_finish(rc);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        int e = errno;
        /* A reader that went away is its own business, not ours to report. */
        if (e == EPIPE)
            return rc ? rc : CLI_EXIT_ERROR;
        cli_error("write error: stdout: %s", strerror(e));
        return CLI_EXIT_ERROR;
    }
    return rc;
}
