/* JSON views of fs results. Only the public API and cJSON: this file is
 * linked into the CLI, the tool suite and the MCP server alike. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs_json.h"
#include "base.h"
#include "json.h"
#include "sha1.h"

const char *sp_json_code_name(int code)
{
    return sp_code_name(code);
}

/* Length of the valid UTF-8 sequence at p (n bytes left), or 0 when the
 * byte at p does not start one. NUL counts as invalid: a cJSON string
 * cannot carry it. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    if (c == 0)
        return 0;
    if (c < 0x80)
        return 1;
    if (c < 0xc2)
        return 0; /* continuation byte or overlong 2-byte lead */
    if (c < 0xe0)
        return n >= 2 && (p[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c < 0xf0) {
        if (n < 3 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80)
            return 0;
        if (c == 0xe0 && p[1] < 0xa0)
            return 0; /* overlong */
        if (c == 0xed && p[1] >= 0xa0)
            return 0; /* UTF-16 surrogate */
        return 3;
    }
    if (c < 0xf5) {
        if (n < 4 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80)
            return 0;
        if (c == 0xf0 && p[1] < 0x90)
            return 0; /* overlong */
        if (c == 0xf4 && p[1] >= 0x90)
            return 0; /* past U+10FFFF */
        return 4;
    }
    return 0;
}

bool sp_json_utf8_ok(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        if (p[i] >= 0x01 && p[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = utf8_seq(p + i, len - i);
        if (k == 0)
            return false;
        i += k;
    }
    return true;
}

char *sp_json_sanitize(const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    /* Size first: a 64 MiB file must not cost four times that in memory. */
    size_t need = 1;
    for (size_t i = 0; i < len;) {
        size_t k = utf8_seq(p + i, len - i);
        if (need > SIZE_MAX - 4)
            return NULL;
        need += k ? k : 4;
        i += k ? k : 1;
    }
    char *out = malloc(need);
    if (!out)
        return NULL;
    size_t i = 0, o = 0;
    while (i < len) {
        size_t k = utf8_seq(p + i, len - i);
        if (k == 0) {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[p[i] >> 4];
            out[o++] = hex[p[i] & 0xf];
            i++;
        } else {
            memcpy(out + o, p + i, k);
            o += k;
            i += k;
        }
    }
    out[o] = '\0';
    return out;
}

cJSON *sp_json_string_n(const char *s, size_t len)
{
    if (!s)
        return cJSON_CreateNull();
    /* s need not be NUL-terminated at len, so cJSON gets a bounded copy. */
    char *clean = sp_json_sanitize(s, len);
    if (!clean)
        return NULL;
    cJSON *j = cJSON_CreateString(clean);
    free(clean);
    return j;
}

cJSON *sp_json_string(const char *s)
{
    return sp_json_string_n(s, s ? strlen(s) : 0);
}

static bool add_string_n(cJSON *obj, const char *key, const char *s, size_t len)
{
    return sp_json_add(obj, key, sp_json_string_n(s, len));
}

bool sp_json_add_string(cJSON *obj, const char *key, const char *s)
{
    return sp_json_add(obj, key, sp_json_string(s));
}

/* Doubles hold every integer up to 2^53 exactly. */
#define EXACT_DOUBLE_MAX ((uint64_t)1 << 53)

bool sp_json_add_u64(cJSON *obj, const char *key, uint64_t v)
{
    if (v <= EXACT_DOUBLE_MAX)
        return sp_json_add(obj, key, cJSON_CreateNumber((double)v));
    char buf[24];
    snprintf(buf, sizeof(buf), "%" PRIu64, v);
    return sp_json_add(obj, key, cJSON_CreateRaw(buf));
}

bool sp_json_add_i64(cJSON *obj, const char *key, int64_t v)
{
    if (v >= -(int64_t)EXACT_DOUBLE_MAX && v <= (int64_t)EXACT_DOUBLE_MAX)
        return sp_json_add(obj, key, cJSON_CreateNumber((double)v));
    char buf[24];
    snprintf(buf, sizeof(buf), "%" PRId64, v);
    return sp_json_add(obj, key, cJSON_CreateRaw(buf));
}

static bool add_bool(cJSON *obj, const char *key, bool v)
{
    return sp_json_add(obj, key, cJSON_CreateBool(v));
}

static bool add_mode(cJSON *obj, unsigned mode)
{
    char buf[8];
    snprintf(buf, sizeof(buf), "%04o", mode & 07777u);
    return sp_json_add(obj, "mode", cJSON_CreateString(buf));
}

/* `key: "2026-11-26T12:05:38Z"` (RFC 3339, UTC, to the second) for a time
 * in nanoseconds since the epoch. */
static bool add_time(cJSON *obj, const char *key, int64_t ns)
{
    int64_t sec = ns / 1000000000;
    if (ns % 1000000000 < 0)
        sec--; /* floor, for times before 1970 */
    time_t t = (time_t)sec;
    struct tm tm;
    char buf[64];
    if (gmtime_r(&t, &tm) && strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm) > 0)
        return sp_json_add(obj, key, cJSON_CreateString(buf));
    return true;
}

static bool add_mtime(cJSON *obj, int64_t ns)
{
    return add_time(obj, "mtime", ns) && sp_json_add_i64(obj, "mtime_ns", ns);
}

/* "rwxr-xr-x" from the permission bits, as ls shows them. */
static bool add_permissions(cJSON *obj, unsigned mode)
{
    static const char rwx[] = "rwx";
    char buf[10];
    for (int i = 0; i < 9; i++)
        buf[i] = mode & (0400u >> i) ? rwx[i % 3] : '-';
    buf[9] = '\0';
    return sp_json_add(obj, "permissions", cJSON_CreateString(buf));
}

cJSON *sp_json_error_code(int code, const char *message)
{
    return sp_json_error_reason(code, SP_R_NONE, message);
}

cJSON *sp_json_error_reason(int code, int reason, const char *message)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *e = cJSON_CreateObject();
    if (!o || !e) {
        cJSON_Delete(o);
        cJSON_Delete(e);
        return NULL;
    }
    bool ok = add_bool(o, "ok", false);
    if (!sp_json_add(o, "error", e))
        return sp_json_finish(o, false);
    ok = ok && sp_json_add_string(e, "code", sp_json_code_name(code)) &&
         sp_json_add_string(e, "reason", sp_reason_name(reason)) &&
         sp_json_add_string(e, "message", message ? message : sp_strerror(code));
    return sp_json_finish(o, ok);
}

cJSON *sp_json_error(const sp_error *err)
{
    if (!err)
        return sp_json_error_code(SP_ERROR, NULL);
    const char *msg = err->message && *err->message ? err->message : NULL;
    return sp_json_error_reason(err->code, err->reason, msg);
}

cJSON *sp_json_fs_text(const sp_fs_text *t)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok =
        sp_json_add_string(o, "path", t->path) &&
        add_string_n(o, "content", t->content ? t->content : "", t->content ? t->content_len : 0) &&
        sp_json_add_u64(o, "total_lines", t->total_lines) &&
        sp_json_add_u64(o, "offset", t->offset + 1) && sp_json_add_u64(o, "limit", t->limit) &&
        sp_json_add_u64(o, "lines", t->lines) && sp_json_add_u64(o, "lines_cut", t->lines_cut) &&
        add_bool(o, "truncated", t->truncated);
    if (ok && t->truncated)
        ok = sp_json_add_u64(o, "next_offset", (uint64_t)t->offset + t->lines + 1);
    return sp_json_finish(o, ok);
}

char *sp_base64_encode(const uint8_t *d, size_t n)
{
    if (n > (SIZE_MAX - 4) / 4 * 3)
        return NULL;
    char *out = malloc((n + 2) / 3 * 4 + 1);
    if (out)
        sp_base64_write(out, d, n);
    return out;
}

static int b64_value(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+')
        return 62;
    if (ch == '/')
        return 63;
    return -1;
}

int sp_base64_decode(uint8_t **out, size_t *out_len, const char *s, size_t len, char **why)
{
    *out = NULL;
    *out_len = 0;
    *why = NULL;
    if (len % 4) {
        *why = sp_xasprintf("its length %zu is not a multiple of 4 (padding '=' is required)", len);
        return SP_EINVAL;
    }
    size_t pad = 0;
    if (len && s[len - 1] == '=')
        pad = len >= 2 && s[len - 2] == '=' ? 2 : 1;
    uint8_t *d = sp_xmalloc(len / 4 * 3 + 1);
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = 0;
        for (size_t k = 0; k < 4; k++) {
            unsigned char ch = (unsigned char)s[i + k];
            int x = b64_value(ch);
            bool in_pad = i + k >= len - pad;
            if (in_pad ? ch != '=' : x < 0) {
                free(d);
                *why = ch >= 0x20 && ch < 0x7f
                           ? sp_xasprintf("'%c' at offset %zu is not in the base64 alphabet "
                                          "(A-Z a-z 0-9 + /, '=' only as final padding)",
                                          ch, i + k)
                           : sp_xasprintf("byte 0x%02x at offset %zu is not in the base64 "
                                          "alphabet (no whitespace or line breaks)",
                                          ch, i + k);
                return SP_EINVAL;
            }
            v = v << 6 | (uint32_t)(in_pad ? 0 : x);
        }
        size_t n = i + 4 == len ? 3 - pad : 3;
        /* Bits the padding drops must be zero: one encoding per byte string. */
        if ((n == 1 && (v & 0xffff)) || (n == 2 && (v & 0xff))) {
            free(d);
            *why = sp_xasprintf("the group at offset %zu has non-zero padding bits", i);
            return SP_EINVAL;
        }
        uint8_t b3[3] = {(uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
        memcpy(d + o, b3, n);
        o += n;
    }
    d[o] = 0;
    *out = d;
    *out_len = o;
    return 0;
}

/* Magic numbers of common binary formats, and the types they imply. */
struct magic {
    size_t at;
    const char *bytes;
    size_t len;
    const char *mime;
};

#define MAGIC(at, lit, mime)                                                                       \
    {                                                                                              \
        at, lit, sizeof(lit) - 1, mime                                                             \
    }

static const struct magic magics[] = {
    MAGIC(0, "\x89PNG\r\n\x1a\n", "image/png"),
    MAGIC(0, "\xff\xd8\xff", "image/jpeg"),
    MAGIC(0, "GIF87a", "image/gif"),
    MAGIC(0, "GIF89a", "image/gif"),
    MAGIC(0, "BM", "image/bmp"),
    MAGIC(0, "II*\0", "image/tiff"),
    MAGIC(0, "MM\0*", "image/tiff"),
    MAGIC(0, "\0\0\1\0", "image/x-icon"),
    MAGIC(0, "%PDF-", "application/pdf"),
    MAGIC(0, "PK\3\4", "application/zip"),
    MAGIC(0, "PK\5\6", "application/zip"),
    MAGIC(0, "\x1f\x8b", "application/gzip"),
    MAGIC(0, "BZh", "application/x-bzip2"),
    MAGIC(0, "\3757zXZ\0", "application/x-xz"),
    MAGIC(0, "\x28\xb5\x2f\xfd", "application/zstd"),
    MAGIC(0, "7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"),
    MAGIC(257, "ustar", "application/x-tar"),
    MAGIC(0, "\177ELF", "application/x-elf"),
    MAGIC(0, "\0asm", "application/wasm"),
    MAGIC(0, "\xca\xfe\xba\xbe", "application/java-vm"),
    MAGIC(0, "SQLite format 3\0", "application/vnd.sqlite3"),
    MAGIC(0, "wOFF", "font/woff"),
    MAGIC(0, "wOF2", "font/woff2"),
    MAGIC(0, "OggS", "audio/ogg"),
    MAGIC(0, "ID3", "audio/mpeg"),
    MAGIC(0, "fLaC", "audio/flac"),
};

const char *sp_mime_sniff(const uint8_t *d, size_t n)
{
    if (n >= 12 && memcmp(d, "RIFF", 4) == 0) {
        if (memcmp(d + 8, "WEBP", 4) == 0)
            return "image/webp";
        if (memcmp(d + 8, "WAVE", 4) == 0)
            return "audio/wav";
    }
    if (n >= 12 && memcmp(d + 4, "ftyp", 4) == 0) {
        if (memcmp(d + 8, "avif", 4) == 0)
            return "image/avif";
        if (memcmp(d + 8, "heic", 4) == 0)
            return "image/heic";
        return "video/mp4";
    }
    for (size_t i = 0; i < sizeof(magics) / sizeof(magics[0]); i++) {
        const struct magic *m = &magics[i];
        if (n >= m->at + m->len && memcmp(d + m->at, m->bytes, m->len) == 0)
            return m->mime;
    }
    return "application/octet-stream";
}

cJSON *sp_json_fs_bytes(const sp_fs_bytes *b)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    const char *data = b->data ? (const char *)b->data : "";
    size_t len = b->data ? b->len : 0;
    bool text = sp_json_utf8_ok(data, len);
    bool ok = sp_json_add_string(o, "path", b->path) && sp_json_add_u64(o, "size", b->size) &&
              sp_json_add_u64(o, "offset", b->offset) && sp_json_add_u64(o, "length", len) &&
              add_bool(o, "truncated", b->truncated) &&
              sp_json_add_string(o, "encoding", text ? "utf-8" : "base64");
    if (ok && text) {
        ok = add_string_n(o, "content", data, len);
    } else if (ok) {
        char *enc = sp_base64_encode((const uint8_t *)data, len);
        ok = enc && sp_json_add(o, "content", cJSON_CreateString(enc));
        free(enc);
    }
    return sp_json_finish(o, ok);
}

cJSON *sp_json_fs_info(const sp_fs_info *st)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok = sp_json_add_string(o, "path", st->path) &&
              sp_json_add_string(o, "type", sp_fs_type_name(st->type)) &&
              sp_json_add_u64(o, "size", st->size) && add_mode(o, st->mode) &&
              add_permissions(o, st->mode) && add_mtime(o, st->mtime_ns) &&
              add_time(o, "modified", st->mtime_ns) && add_time(o, "accessed", st->atime_ns) &&
              sp_json_add_i64(o, "atime_ns", st->atime_ns) &&
              add_time(o, "changed", st->ctime_ns) && sp_json_add_i64(o, "ctime_ns", st->ctime_ns);
    if (ok && st->btime_ns)
        ok = add_time(o, "created", st->btime_ns) && sp_json_add_i64(o, "btime_ns", st->btime_ns);
    else if (ok)
        ok = sp_json_add(o, "created", cJSON_CreateNull());
    ok = ok && add_bool(o, "readable", st->readable) && add_bool(o, "writable", st->writable);
    if (ok && st->type == SP_FS_SYMLINK)
        ok = sp_json_add_string(o, "link_target", st->link_target) &&
             add_bool(o, "target_escapes", st->target_escapes) &&
             add_bool(o, "target_in_image", st->target_in_image);
    return sp_json_finish(o, ok);
}

cJSON *sp_json_fs_entry(const sp_fs_entry *e)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok = sp_json_add_string(o, "name", e->name) && sp_json_add_string(o, "path", e->path) &&
              sp_json_add_string(o, "type", sp_fs_type_name(e->type)) &&
              sp_json_add_u64(o, "size", e->size);
    if (ok && e->mode)
        ok = add_mode(o, e->mode);
    if (ok && e->mtime_ns)
        ok = add_mtime(o, e->mtime_ns);
    if (ok && e->depth)
        ok = sp_json_add_u64(o, "depth", e->depth);
    if (ok && e->type == SP_FS_SYMLINK && e->link_target)
        ok = sp_json_add_string(o, "link_target", e->link_target);
    return sp_json_finish(o, ok);
}

/* A result object {KEY: [items...], "count": n, "truncated": t}: the shape
 * of every list answer. Returns the object for the caller to add to, or
 * NULL (everything freed) on failure. */
static cJSON *list_object(const char *key, const void *items, size_t n, size_t stride,
                          cJSON *(*conv)(const void *), bool truncated)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *a = cJSON_CreateArray();
    if (!o || !a) {
        cJSON_Delete(o);
        cJSON_Delete(a);
        return NULL;
    }
    if (!sp_json_add(o, key, a))
        return sp_json_finish(o, false);
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        cJSON *item = conv((const char *)items + i * stride);
        ok = item && cJSON_AddItemToArray(a, item);
        if (!ok)
            cJSON_Delete(item);
    }
    ok = ok && sp_json_add_u64(o, "count", n) && add_bool(o, "truncated", truncated);
    return sp_json_finish(o, ok);
}

static cJSON *entry_conv(const void *p)
{
    return sp_json_fs_entry(p);
}

static cJSON *match_conv(const void *p)
{
    return sp_json_fs_match(p);
}

cJSON *sp_json_fs_entries(const sp_fs_entries *e)
{
    return list_object("entries", e->v, e->n, sizeof(*e->v), entry_conv, e->truncated);
}

cJSON *sp_json_fs_match(const sp_fs_match *m)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok = sp_json_add_string(o, "path", m->path) &&
              sp_json_add_u64(o, "line_number", m->line_number) &&
              sp_json_add_string(o, "line", m->line ? m->line : "") &&
              sp_json_add_u64(o, "match_start", m->match_start) &&
              sp_json_add_u64(o, "match_end", m->match_end) &&
              sp_json_add_u64(o, "byte_offset", m->byte_offset);
    return sp_json_finish(o, ok);
}

cJSON *sp_json_fs_matches(const sp_fs_matches *m)
{
    cJSON *o = list_object("matches", m->v, m->n, sizeof(*m->v), match_conv, m->truncated);
    bool ok = o && sp_json_add_u64(o, "files_searched", m->files_searched) &&
              sp_json_add_u64(o, "files_skipped", m->files_skipped) &&
              sp_json_add_u64(o, "ignored", m->ignored);
    return o ? sp_json_finish(o, ok) : NULL;
}

cJSON *sp_json_fs_written(const char *path, size_t bytes_written)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok =
        sp_json_add_string(o, "path", path) && sp_json_add_u64(o, "bytes_written", bytes_written);
    return sp_json_finish(o, ok);
}
