/* The tool suite's core: contexts, argument checking, the approval policy,
 * dispatch, result objects, events and cancellation. The handlers live in
 * tools_fs.c, tools_exec.c and tools_patch.c; the table in tools_specs.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs_json.h"
#include "tools_internal.h"

#define DEFAULT_OUTPUT_BYTES 8192
#define DEFAULT_OUTPUT_LINES 200
#define DEFAULT_TEXT_BYTES   65536
#define DEFAULT_LINE_BYTES   500
/* A path or key quoted in a message is cut to this many bytes. */
#define QUOTE_MAX 120

/* ------------------------------------------------------------ helpers -- */

static void oom(void)
{
    fputs("sandpod: out of memory\n", stderr);
    abort();
}

void *tx_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom();
    return p;
}

void *tx_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom();
    return p;
}

void *tx_realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom();
    return q;
}

char *tx_strdup(const char *s)
{
    return tx_strndup(s, strlen(s));
}

char *tx_strndup(const char *s, size_t n)
{
    char *p = tx_malloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *tx_asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        oom();
    return s;
}

static void tb_grow(tbuf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2)
            oom();
        cap *= 2;
    }
    b->data = tx_realloc(b->data, cap);
    b->cap = cap;
}

void tb_add(tbuf *b, const void *data, size_t len)
{
    tb_grow(b, len);
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
}

void tb_adds(tbuf *b, const char *s)
{
    tb_add(b, s, strlen(s));
}

void tb_addc(tbuf *b, char c)
{
    tb_add(b, &c, 1);
}

void tb_printf(tbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        oom();
    tb_add(b, s, (size_t)n);
    free(s);
}

char *tb_steal(tbuf *b)
{
    char *s = b->data ? b->data : tx_strdup("");
    b->data = NULL;
    b->len = b->cap = 0;
    return s;
}

void tb_free(tbuf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void sv_push(strvec *sv, char *owned)
{
    if (sv->n + 2 > sv->cap) {
        sv->cap = sv->cap ? sv->cap * 2 : 8;
        sv->v = tx_realloc(sv->v, sv->cap * sizeof(*sv->v));
    }
    sv->v[sv->n++] = owned;
    sv->v[sv->n] = NULL;
}

void sv_free(strvec *sv)
{
    for (size_t i = 0; i < sv->n; i++)
        free(sv->v[i]);
    free(sv->v);
    memset(sv, 0, sizeof(*sv));
}

static bool sv_has(const strvec *sv, const char *s)
{
    for (size_t i = 0; i < sv->n; i++)
        if (strcmp(sv->v[i], s) == 0)
            return true;
    return false;
}

static size_t count_lines(const char *s, size_t len)
{
    size_t n = 0;
    for (const char *p = s; (p = memchr(p, '\n', len - (size_t)(p - s))) != NULL; p++)
        n++;
    return n + (len && s[len - 1] != '\n' ? 1 : 0);
}

/* Back up over UTF-8 continuation bytes so a cut never splits a sequence. */
static size_t utf8_floor(const char *s, size_t len, size_t at)
{
    if (at >= len)
        return len;
    while (at > 0 && ((unsigned char)s[at] & 0xc0) == 0x80)
        at--;
    return at;
}

char *text_cap(const char *s, size_t len, size_t max_bytes, size_t max_lines, size_t *out_len,
               bool *cut)
{
    size_t lines = count_lines(s, len);
    if (len <= max_bytes && lines <= max_lines) {
        *cut = false;
        if (out_len)
            *out_len = len;
        return tx_strndup(s, len);
    }
    *cut = true;
    /* The head: half the bytes and half the lines. */
    size_t hb = max_bytes / 2, hl = max_lines / 2;
    size_t head = utf8_floor(s, len, hb < len ? hb : len);
    size_t nl = 0;
    for (size_t i = 0; i < head; i++) {
        if (s[i] == '\n' && ++nl >= hl) {
            head = i + 1;
            break;
        }
    }
    /* The tail: the other half, from the end. */
    size_t tb = max_bytes - hb, tl = max_lines - hl;
    size_t tail = len - head < tb ? len - head : tb;
    size_t start = len - tail;
    while (start < len && ((unsigned char)s[start] & 0xc0) == 0x80)
        start++;
    nl = 0;
    for (size_t i = len; i > start; i--) {
        if (s[i - 1] == '\n' && i != len && ++nl >= tl) {
            start = i;
            break;
        }
    }
    size_t omitted = start - head;
    size_t omitted_lines = count_lines(s + head, omitted);
    tbuf b = {0};
    tb_add(&b, s, head);
    if (head && s[head - 1] != '\n')
        tb_addc(&b, '\n');
    tb_printf(&b, "[... %zu bytes, %zu lines omitted ...]\n", omitted, omitted_lines);
    tb_add(&b, s + start, len - start);
    if (out_len)
        *out_len = b.len;
    return tb_steal(&b);
}

/* A short, printable quote of untrusted text for a message. */
static char *quote(const char *s, size_t len)
{
    size_t n = len > QUOTE_MAX ? utf8_floor(s, len, QUOTE_MAX) : len;
    char *clean = sp_json_sanitize(s, n);
    if (!clean)
        oom();
    if (n < len) {
        char *q = tx_asprintf("%s...", clean);
        free(clean);
        return q;
    }
    return clean;
}

int tools_error(sp_error **err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        sp_error *e = tx_calloc(1, sizeof(*e));
        e->code = code;
        if (vasprintf(&e->message, fmt, ap) < 0)
            oom();
        va_end(ap);
        *err = e;
    }
    return code;
}

/* ------------------------------------------------------------- a call -- */

static const char *code_hint(int code)
{
    switch (code) {
    case SP_ENOTFOUND:
        return "check the path with list_dir or glob";
    case SP_EESCAPE:
        return "paths are relative to the workspace (or start with /workspace/) and may not "
               "leave it";
    case SP_EDENIED:
        return "this path or action is refused by policy; do not retry it";
    case SP_EREADONLY:
        return "the workspace is read-only in this session";
    case SP_ETOOBIG:
        return "a size or count limit was hit; work in smaller pieces";
    case SP_EEXISTS:
        return "it already exists; read it first, or choose another name";
    case SP_ETIMEOUT:
        return "it took too long; try a smaller step or a longer timeout";
    default:
        return NULL;
    }
}

int call_fail(tool_call *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        oom();
    va_end(ap);
    free(c->error);
    c->error = s;
    c->code = code ? code : SP_ERROR;
    return c->code;
}

int call_fail_err(tool_call *c, int code, sp_error *err, const char *hint)
{
    const char *msg = err && err->message && *err->message ? err->message : sp_strerror(code);
    if (!hint)
        hint = code_hint(code);
    if (hint)
        call_fail(c, code, "%s; %s", msg, hint);
    else
        call_fail(c, code, "%s", msg);
    sp_error_free(err);
    return c->code;
}

void call_change(tool_call *c, const char *path, const char *action, uint64_t bytes)
{
    if (!c->changes)
        c->changes = cJSON_CreateArray();
    cJSON *o = cJSON_CreateObject();
    if (!c->changes || !o || !sp_json_add_string(o, "path", path) ||
        !sp_json_add_string(o, "action", action) || !sp_json_add_u64(o, "bytes", bytes) ||
        !cJSON_AddItemToArray(c->changes, o)) {
        cJSON_Delete(o);
        return;
    }
    if (strcmp(action, "deleted") != 0)
        c->bytes += bytes;
    call_path(c, path);
}

void call_path(tool_call *c, const char *path)
{
    if (path && !sv_has(&c->paths, path))
        sv_push(&c->paths, tx_strdup(path));
}

/* ----------------------------------------------------------- arguments -- */

const char *arg_str(const cJSON *args, const char *key, const char *def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, key);
    return cJSON_IsString(v) ? v->valuestring : def;
}

long long arg_int(const cJSON *args, const char *key, long long def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, key);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : def;
}

bool arg_bool(const cJSON *args, const char *key, bool def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, key);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

/* Keys are tracked this deep; a NUL deeper still is refused, named by the
 * deepest key known. */
#define NUL_DEPTH 32

int json_nul_check(const char *s, size_t len, char **msg)
{
    int depth = 0;
    const char *keys[NUL_DEPTH + 1] = {NULL};
    size_t key_lens[NUL_DEPTH + 1] = {0};
    const char *last = NULL;
    size_t last_len = 0;
    size_t i = 0;
    while (i < len) {
        char ch = s[i];
        if (ch == '"') {
            size_t start = ++i;
            bool nul = false;
            while (i < len && s[i] != '"') {
                if (s[i] == '\\') {
                    if (i + 5 < len && s[i + 1] == 'u' && memcmp(s + i + 2, "0000", 4) == 0)
                        nul = true;
                    i += 2;
                    continue;
                }
                i++;
            }
            size_t end = i < len ? i : len;
            i++;
            last = s + start;
            last_len = end - start;
            if (nul) {
                /* A key holding the NUL, or a value under the innermost key. */
                size_t j = i;
                while (j < len && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r'))
                    j++;
                bool is_key = j < len && s[j] == ':';
                const char *name = NULL;
                size_t name_len = 0;
                if (is_key) {
                    name = last;
                    name_len = last_len;
                } else {
                    for (int d = depth < NUL_DEPTH ? depth : NUL_DEPTH; d > 0 && !name; d--) {
                        name = keys[d];
                        name_len = key_lens[d];
                    }
                }
                char *q = name ? quote(name, name_len) : tx_strdup("?");
                *msg = tx_asprintf("argument '%s' holds a NUL character (\\u0000): paths and "
                                   "file text cannot contain NUL bytes; remove it",
                                   q);
                free(q);
                return SP_EINVAL;
            }
            continue;
        }
        if (ch == '{' || ch == '[') {
            depth++;
            if (depth >= 1 && depth <= NUL_DEPTH) {
                keys[depth] = NULL;
                key_lens[depth] = 0;
            }
        } else if (ch == '}' || ch == ']') {
            /* Unbalanced closers (invalid JSON, refused by the parser
             * later) must not drive the depth below zero. */
            if (depth > 0)
                depth--;
        } else if (ch == ':' && depth > 0 && depth <= NUL_DEPTH) {
            keys[depth] = last;
            key_lens[depth] = last_len;
        }
        i++;
    }
    return 0;
}

static const char *type_of(const cJSON *v)
{
    if (cJSON_IsString(v))
        return "a string";
    if (cJSON_IsBool(v))
        return "a boolean";
    if (cJSON_IsNumber(v))
        return "a number";
    if (cJSON_IsArray(v))
        return "an array";
    if (cJSON_IsObject(v))
        return "an object";
    return "null";
}

/* The accepted argument names of a schema, for messages. */
static char *prop_names(const cJSON *props)
{
    tbuf b = {0};
    const cJSON *p;
    cJSON_ArrayForEach(p, props)
    {
        if (b.len)
            tb_adds(&b, ", ");
        tb_adds(&b, p->string);
    }
    if (!b.len)
        tb_adds(&b, "no arguments");
    return tb_steal(&b);
}

static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xc0) != 0x80)
            n++;
    return n;
}

static int check_value(const cJSON *ps, const cJSON *v, const char *name, char **msg)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(ps, "type");
    const char *want = cJSON_IsString(type) ? type->valuestring : NULL;
    if (!want)
        return 0;
    if (strcmp(want, "string") == 0) {
        if (!cJSON_IsString(v))
            goto bad_type;
        const cJSON *en = cJSON_GetObjectItemCaseSensitive(ps, "enum");
        if (cJSON_IsArray(en)) {
            const cJSON *e;
            bool found = false;
            cJSON_ArrayForEach(e, en)
            {
                if (cJSON_IsString(e) && strcmp(e->valuestring, v->valuestring) == 0)
                    found = true;
            }
            if (!found) {
                char *opts = NULL;
                char *printed = cJSON_PrintUnformatted(en);
                opts = printed ? printed : tx_strdup("?");
                char *q = quote(v->valuestring, strlen(v->valuestring));
                *msg = tx_asprintf("argument '%s' must be one of %s, not \"%s\"", name, opts, q);
                free(q);
                free(opts);
                return SP_EINVAL;
            }
        }
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(ps, "minLength");
        const cJSON *mx = cJSON_GetObjectItemCaseSensitive(ps, "maxLength");
        size_t n = utf8_chars(v->valuestring);
        if (cJSON_IsNumber(mn) && (double)n < mn->valuedouble) {
            *msg = tx_asprintf("argument '%s' must not be empty", name);
            return SP_EINVAL;
        }
        if (cJSON_IsNumber(mx) && (double)n > mx->valuedouble) {
            *msg = tx_asprintf("argument '%s' is too long: %zu characters, at most %.0f", name, n,
                               mx->valuedouble);
            return SP_EINVAL;
        }
        return 0;
    }
    if (strcmp(want, "integer") == 0) {
        if (!cJSON_IsNumber(v))
            goto bad_type;
        double d = v->valuedouble;
        if (d != d || d < -9007199254740992.0 || d > 9007199254740992.0 ||
            d != (double)(long long)d) {
            *msg = tx_asprintf("argument '%s' must be a whole number, not %g", name, d);
            return SP_EINVAL;
        }
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(ps, "minimum");
        const cJSON *mx = cJSON_GetObjectItemCaseSensitive(ps, "maximum");
        if ((cJSON_IsNumber(mn) && d < mn->valuedouble) ||
            (cJSON_IsNumber(mx) && d > mx->valuedouble)) {
            if (cJSON_IsNumber(mn) && cJSON_IsNumber(mx))
                *msg = tx_asprintf("argument '%s' must be between %.0f and %.0f, not %.0f", name,
                                   mn->valuedouble, mx->valuedouble, d);
            else if (cJSON_IsNumber(mn))
                *msg = tx_asprintf("argument '%s' must be at least %.0f, not %.0f", name,
                                   mn->valuedouble, d);
            else
                *msg = tx_asprintf("argument '%s' must be at most %.0f, not %.0f", name,
                                   mx->valuedouble, d);
            return SP_EINVAL;
        }
        return 0;
    }
    if (strcmp(want, "boolean") == 0) {
        if (!cJSON_IsBool(v))
            goto bad_type;
        return 0;
    }
    if (strcmp(want, "object") == 0) {
        if (!cJSON_IsObject(v))
            goto bad_type;
        return 0;
    }
    return 0;
bad_type:
    *msg = tx_asprintf("argument '%s' must be %s, not %s", name,
                       strcmp(want, "integer") == 0   ? "an integer"
                       : strcmp(want, "boolean") == 0 ? "a boolean (true or false)"
                       : strcmp(want, "object") == 0  ? "an object"
                                                      : "a string",
                       type_of(v));
    return SP_EINVAL;
}

int schema_check(const cJSON *schema, const cJSON *args, const char *tool, char **msg)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
    if (!cJSON_IsObject(args)) {
        *msg =
            tx_asprintf("the arguments of %s must be a JSON object, not %s", tool, type_of(args));
        return SP_EINVAL;
    }
    const cJSON *a;
    cJSON_ArrayForEach(a, args)
    {
        const char *name = a->string ? a->string : "";
        char *q = quote(name, strlen(name));
        for (const cJSON *b = a->next; b; b = b->next) {
            if (b->string && strcmp(b->string, name) == 0) {
                *msg = tx_asprintf("argument '%s' is given twice", q);
                free(q);
                return SP_EINVAL;
            }
        }
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(props, name);
        if (!ps) {
            char *names = prop_names(props);
            *msg = tx_asprintf("unknown argument '%s' for %s (it takes: %s)", q, tool, names);
            free(names);
            free(q);
            return SP_EINVAL;
        }
        int r = cJSON_IsNull(a) ? 0 : check_value(ps, a, q, msg);
        free(q);
        if (r)
            return r;
    }
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(schema, "required");
    const cJSON *r;
    cJSON_ArrayForEach(r, req)
    {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, r->valuestring);
        if (!v || cJSON_IsNull(v)) {
            const cJSON *ps = cJSON_GetObjectItemCaseSensitive(props, r->valuestring);
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(ps, "type");
            const cJSON *d = cJSON_GetObjectItemCaseSensitive(ps, "description");
            *msg =
                tx_asprintf("missing required argument '%s' (%s%s%s)", r->valuestring,
                            cJSON_IsString(t) ? t->valuestring : "value",
                            cJSON_IsString(d) ? ": " : "", cJSON_IsString(d) ? d->valuestring : "");
            return SP_EINVAL;
        }
    }
    return 0;
}

/* ----------------------------------------------------------- policies -- */

int sp_tools_approval_parse(sp_tools_approval *out, const char *s)
{
    if (!s)
        return SP_EINVAL;
    if (strcmp(s, "never") == 0)
        *out = SP_APPROVAL_NEVER;
    else if (strcmp(s, "untrusted") == 0)
        *out = SP_APPROVAL_UNTRUSTED;
    else if (strcmp(s, "on-request") == 0)
        *out = SP_APPROVAL_ON_REQUEST;
    else
        return SP_EINVAL;
    return 0;
}

const char *sp_tools_approval_name(sp_tools_approval a)
{
    switch (a) {
    case SP_APPROVAL_NEVER:
        return "never";
    case SP_APPROVAL_UNTRUSTED:
        return "untrusted";
    case SP_APPROVAL_ON_REQUEST:
        return "on-request";
    }
    return "unknown";
}

int sp_tools_fs_mode_parse(sp_tools_fs_mode *out, const char *s)
{
    if (s && strcmp(s, "restricted") == 0)
        *out = SP_FS_MODE_RESTRICTED;
    else if (s && strcmp(s, "unrestricted") == 0)
        *out = SP_FS_MODE_UNRESTRICTED;
    else
        return SP_EINVAL;
    return 0;
}

static bool needs_approval(const sp_tools *t, const tool_def *d)
{
    switch (t->opts.approval) {
    case SP_APPROVAL_NEVER:
        return false;
    case SP_APPROVAL_UNTRUSTED:
        return d->tier != SP_TOOL_SAFE;
    case SP_APPROVAL_ON_REQUEST:
        return d->tier == SP_TOOL_DANGEROUS;
    }
    return true;
}

/* "shell: make test" for a person deciding. */
static char *summary_of(const tool_def *d, const cJSON *args)
{
    const char *v = d->summary_arg ? arg_str(args, d->summary_arg, NULL) : NULL;
    if (!v && strcmp(d->name, "apply_patch") == 0)
        v = arg_str(args, "patch", NULL);
    if (!v)
        return tx_strdup(d->name);
    /* One line: stop at the first newline. */
    const char *nl = strchr(v, '\n');
    size_t n = nl ? (size_t)(nl - v) : strlen(v);
    char *q = quote(v, n);
    char *s = tx_asprintf("%s: %s%s", d->name, q, nl ? " ..." : "");
    free(q);
    return s;
}

/* ------------------------------------------------------------- events -- */

static void now_rfc3339(char *buf, size_t size)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char base[32];
    strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, size, "%s.%03ldZ", base, ts.tv_nsec / 1000000);
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void emit_event(sp_tools *t, sp_tools_event *ev, const char *error)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *paths = cJSON_CreateArray();
    char ts[64];
    now_rfc3339(ts, sizeof(ts));
    bool ok = o && paths && sp_json_add_string(o, "ts", ts) &&
              sp_json_add_string(o, "event", ev->event) && sp_json_add_u64(o, "call", ev->call) &&
              sp_json_add_string(o, "tool", ev->tool) &&
              sp_json_add_string(o, "tier", sp_tool_tier_name(ev->tier)) &&
              sp_json_add_string(o, "sandbox", t->sb ? sp_sandbox_name(t->sb) : NULL);
    for (size_t i = 0; ok && ev->paths && ev->paths[i]; i++) {
        cJSON *s = sp_json_string(ev->paths[i]);
        ok = s && cJSON_AddItemToArray(paths, s);
        if (!ok)
            cJSON_Delete(s);
    }
    if (ok) {
        ok = cJSON_AddItemToObject(o, "paths", paths);
        if (ok)
            paths = NULL;
    }
    if (ok && strcmp(ev->event, "end") == 0) {
        ok = cJSON_AddBoolToObject(o, "ok", ev->ok) &&
             sp_json_add_string(o, "code", sp_json_code_name(ev->code)) &&
             sp_json_add_i64(o, "duration_ms", ev->duration_ms) &&
             sp_json_add_u64(o, "bytes", ev->bytes) &&
             cJSON_AddBoolToObject(o, "truncated", ev->truncated);
        if (ok && error)
            ok = sp_json_add_string(o, "error", error);
    }
    cJSON_Delete(paths);
    char *line = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!line)
        return;
    ev->json = line;
    if (t->events_fd >= 0) {
        /* One write per line, so concurrent writers (the CLI, another
         * server) never interleave inside a line. */
        size_t n = strlen(line);
        char *buf = tx_malloc(n + 1);
        memcpy(buf, line, n);
        buf[n] = '\n';
        ssize_t w;
        do
            w = write(t->events_fd, buf, n + 1);
        while (w < 0 && errno == EINTR);
        free(buf);
    }
    if (t->opts.on_event)
        t->opts.on_event(t->opts.event_userdata, ev);
    ev->json = NULL;
    free(line);
}

/* ----------------------------------------------------------- contexts -- */

static void copy_list(strvec *dst, const char *const *src)
{
    for (size_t i = 0; src && src[i]; i++)
        sv_push(dst, tx_strdup(src[i]));
}

static sp_tools *tools_new(const sp_tools_opts *opts)
{
    sp_tools *t = tx_calloc(1, sizeof(*t));
    sp_tools_opts o = SP_TOOLS_OPTS_INIT;
    if (opts)
        o = *opts;
    if (!o.max_output_bytes)
        o.max_output_bytes = DEFAULT_OUTPUT_BYTES;
    if (!o.max_output_lines)
        o.max_output_lines = DEFAULT_OUTPUT_LINES;
    if (!o.max_text_bytes)
        o.max_text_bytes = DEFAULT_TEXT_BYTES;
    if (!o.max_line_bytes)
        o.max_line_bytes = DEFAULT_LINE_BYTES;
    copy_list(&t->disabled, o.disabled);
    copy_list(&t->deny, o.deny);
    /* The context keeps its own copies; the caller's may go. */
    o.disabled = NULL;
    o.deny = NULL;
    o.events_path = NULL;
    o.snapshot_store = NULL;
    t->opts = o;
    t->events_fd = -1;
    pthread_mutex_init(&t->mu, NULL);
    pthread_mutex_init(&t->kill_mu, NULL);
    atomic_init(&t->cancelled, false);
    return t;
}

static int open_fs(sp_fs **out, sp_tools *t, const char *root, bool any, sp_error **err)
{
    sp_fs_opts fo = SP_FS_OPTS_INIT;
    fo.read_only = t->opts.read_only;
    fo.deny = t->deny.n ? (const char *const *)t->deny.v : NULL;
    fo.max_line_bytes = t->opts.max_line_bytes;
    if (any) {
        /* Absolute host paths are deep and long-named. */
        fo.max_path_depth = 255;
        fo.max_segment_len = 255;
    }
    return sp_fs_open(out, root, &fo, err);
}

static void open_events(sp_tools *t, const char *path)
{
    if (!path || !*path)
        return;
    t->events_path = tx_strdup(path);
    t->events_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
}

int sp_tools_open_sandbox(sp_tools **out, sp_sandbox *sb, const sp_tools_opts *opts, sp_error **err)
{
    *out = NULL;
    if (!sb)
        return tools_error(err, SP_EINVAL, "no sandbox given");
    if (opts && opts->fs_mode == SP_FS_MODE_UNRESTRICTED)
        return tools_error(err, SP_EINVAL,
                           "unrestricted fs_mode is only for a bare --root folder without a "
                           "container");
    sp_tools *t = tools_new(opts);
    t->sb = sb;
    t->root = tx_strdup(sp_sandbox_workspace(sb));
    int r = open_fs(&t->fs, t, t->root, false, err);
    if (r < 0) {
        sp_tools_free(t);
        return r;
    }
    const char *state = sp_sandbox_state_dir(sb);
    t->store_path = tx_asprintf("%s/snapshots.git", state);
    t->sb_name = tx_strdup(sp_sandbox_name(sb));
    /* The state root holds sandboxes/<name>: two levels up. */
    char *sr = tx_strdup(state);
    for (int i = 0; i < 2; i++) {
        char *slash = strrchr(sr, '/');
        if (slash && slash != sr)
            *slash = '\0';
    }
    t->state_root = sr;
    if (opts && opts->events_path)
        open_events(t, opts->events_path);
    else {
        char *p = tx_asprintf("%s/events.jsonl", state);
        open_events(t, p);
        free(p);
    }
    *out = t;
    return 0;
}

int sp_tools_open_root(sp_tools **out, const char *root, const sp_tools_opts *opts, sp_error **err)
{
    *out = NULL;
    sp_tools *t = tools_new(opts);
    char *abs = NULL;
    if (root && root[0] != '/') {
        char *cwd = getcwd(NULL, 0);
        abs = cwd ? tx_asprintf("%s/%s", cwd, root) : NULL;
        free(cwd);
    }
    t->root = abs ? abs : tx_strdup(root ? root : ".");
    int r = open_fs(&t->fs, t, t->root, false, err);
    if (r == 0 && t->opts.fs_mode == SP_FS_MODE_UNRESTRICTED)
        r = open_fs(&t->fs_any, t, "/", true, err);
    if (r < 0) {
        sp_tools_free(t);
        return r;
    }
    if (opts && opts->snapshot_store && *opts->snapshot_store)
        t->store_path = tx_strdup(opts->snapshot_store);
    if (opts && opts->events_path)
        open_events(t, opts->events_path);
    *out = t;
    return 0;
}

void sp_tools_free(sp_tools *t)
{
    if (!t)
        return;
    tools_sessions_kill(t);
    tools_store_close(t);
    sp_fs_free(t->fs);
    sp_fs_free(t->fs_any);
    free(t->root);
    free(t->store_path);
    sv_free(&t->disabled);
    sv_free(&t->deny);
    sv_free(&t->always);
    free(t->events_path);
    if (t->events_fd >= 0)
        close(t->events_fd);
    free(t->sessions);
    free(t->run_token);
    free(t->sb_name);
    free(t->state_root);
    free(t->podman_url);
    sp_sandbox_free(t->kill_sb);
    pthread_mutex_destroy(&t->mu);
    pthread_mutex_destroy(&t->kill_mu);
    free(t);
}

void sp_tools_set_approver(sp_tools *t, sp_tools_approve_fn fn, void *userdata)
{
    t->opts.approve = fn;
    t->opts.approve_userdata = userdata;
}

static bool available(const sp_tools *t, const tool_def *d)
{
    if ((d->needs & NEED_SANDBOX) && !t->sb)
        return false;
    if ((d->needs & NEED_STORE) && !t->store_path)
        return false;
    if ((d->needs & NEED_WRITE) && t->opts.read_only)
        return false;
    if ((d->needs & NEED_PATCH) && !tools_patch_available())
        return false;
    return true;
}

bool sp_tools_has(const sp_tools *t, const char *name)
{
    const tool_def *d = tool_find(name);
    return d && available(t, d) && !sv_has(&t->disabled, d->name);
}

/* ------------------------------------------------------------ results -- */

static char *result_text(sp_tools *t, tool_call *c)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        oom();
    bool ok = c->code == 0;
    char *msg;
    size_t mlen;
    if (ok) {
        mlen = c->message.len;
        msg = tb_steal(&c->message);
        /* Filesystem answers get a last cap; command output has its own
         * per-stream caps already. */
        if (!c->def || !(c->def->needs & NEED_SANDBOX)) {
            bool cut = false;
            char *capped = text_cap(msg, mlen, t->opts.max_text_bytes, SIZE_MAX, &mlen, &cut);
            free(msg);
            msg = capped;
            c->truncated |= cut;
        }
    } else {
        msg = tx_strdup(c->error ? c->error : sp_strerror(c->code));
        if (c->message.len) {
            /* Output gathered before the failure (a timed-out command). */
            char *both = tx_asprintf("%s\n%s", msg, c->message.data);
            free(msg);
            msg = both;
        }
    }
    bool fine = cJSON_AddBoolToObject(o, "ok", ok) && sp_json_add_string(o, "message", msg);
    free(msg);
    if (fine) {
        cJSON *v = c->value ? c->value : cJSON_CreateNull();
        c->value = NULL;
        fine = v && cJSON_AddItemToObject(o, "value", v);
    }
    fine = fine && cJSON_AddBoolToObject(o, "truncated", c->truncated);
    if (fine) {
        cJSON *ch = c->changes ? c->changes : cJSON_CreateArray();
        c->changes = NULL;
        fine = ch && cJSON_AddItemToObject(o, "changes", ch);
    }
    if (fine && !ok) {
        cJSON *e = cJSON_CreateObject();
        fine = e && cJSON_AddItemToObject(o, "error", e) &&
               sp_json_add_string(e, "code", sp_json_code_name(c->code)) &&
               sp_json_add_string(e, "message", c->error ? c->error : sp_strerror(c->code));
    }
    char *text = fine ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!text)
        oom();
    return text;
}

static void call_dispose(tool_call *c)
{
    tb_free(&c->message);
    cJSON_Delete(c->value);
    cJSON_Delete(c->changes);
    sv_free(&c->paths);
    free(c->error);
}

/* ----------------------------------------------------------- dispatch -- */

static void begin_running(sp_tools *t)
{
    pthread_mutex_lock(&t->mu);
    t->running = true;
    atomic_store(&t->cancelled, false);
    pthread_mutex_unlock(&t->mu);
}

static void end_running(sp_tools *t)
{
    pthread_mutex_lock(&t->mu);
    t->running = false;
    pthread_mutex_unlock(&t->mu);
}

/* Run a call whose arguments are `args` (parsed) or, for a freeform call,
 * `freeform`. Fills *result. */
static int dispatch(char **result, sp_tools *t, const char *name, const char *raw, size_t raw_len,
                    const cJSON *args, const char *freeform, size_t ff_len, const char *parse_error)
{
    tool_call c = {0};
    c.args_json = raw;
    const tool_def *d = tool_find(name);
    c.def = d;
    uint64_t call_no = ++t->calls;
    int64_t t0 = mono_ms();
    sp_tools_event ev = {0};

    if (!d) {
        call_fail(&c, SP_ENOTFOUND, "no tool named '%s'; the tools are listed by tools/list",
                  name ? name : "");
        goto out_noevent;
    }
    if (sv_has(&t->disabled, d->name)) {
        call_fail(&c, SP_EDENIED, "the %s tool is disabled in this session", d->name);
        goto out_noevent;
    }
    if (!available(t, d)) {
        if ((d->needs & NEED_WRITE) && t->opts.read_only)
            call_fail(&c, SP_EREADONLY, "%s is not available: the workspace is read-only", d->name);
        else if (d->needs & NEED_SANDBOX)
            call_fail(&c, SP_EINVAL,
                      "%s needs a sandbox (a container); this session works on a bare folder",
                      d->name);
        else if (d->needs & NEED_STORE)
            call_fail(&c, SP_EINVAL, "%s needs a snapshot store, and this session has none",
                      d->name);
        else
            call_fail(&c, SP_EINVAL, "%s is not available in this build", d->name);
        goto out_noevent;
    }

    /* Paths named by the arguments, for the start event. */
    const char *p0 = args ? arg_str(args, "path", NULL) : NULL;
    if (p0)
        call_path(&c, p0);
    ev.event = "start";
    ev.tool = d->name;
    ev.call = call_no;
    ev.tier = d->tier;
    ev.paths = (const char *const *)c.paths.v;
    emit_event(t, &ev, NULL);

    if (parse_error) {
        call_fail(&c, SP_EINVAL, "%s", parse_error);
        goto out;
    }
    if (freeform) {
        if (strcmp(d->name, "apply_patch") != 0) {
            call_fail(&c, SP_EINVAL, "%s takes JSON arguments, not freeform text", d->name);
            goto out;
        }
    } else {
        char *msg = NULL;
        if (schema_check(tool_schema(d), args, d->name, &msg) < 0) {
            call_fail(&c, SP_EINVAL, "%s", msg);
            free(msg);
            goto out;
        }
    }

    if (needs_approval(t, d) && !sv_has(&t->always, d->name)) {
        char *summary =
            freeform ? tx_asprintf("%s (freeform patch)", d->name) : summary_of(d, args);
        sp_tools_approval_request req = {d->name, d->tier, summary, raw ? raw : "{}"};
        sp_tools_verdict v = SP_VERDICT_DENY;
        bool asked = t->opts.approve != NULL;
        if (asked) {
            begin_running(t);
            v = t->opts.approve(t->opts.approve_userdata, &req);
            end_running(t);
            if (atomic_load(&t->cancelled))
                v = SP_VERDICT_DENY;
        }
        free(summary);
        if (v != SP_VERDICT_ALLOW && v != SP_VERDICT_ALLOW_ALWAYS) {
            if (!asked || v == SP_VERDICT_UNAVAILABLE)
                call_fail(&c, SP_EDENIED,
                          "%s needs approval under the '%s' approval policy (it is a %s tool) "
                          "and nobody can be asked here (no terminal, or a client without "
                          "elicitation support); do not retry: ask the user to run it or to "
                          "change the policy",
                          d->name, sp_tools_approval_name(t->opts.approval),
                          sp_tool_tier_name(d->tier));
            else
                call_fail(&c, SP_EDENIED,
                          "the user denied this %s call; do not retry it unchanged: ask the "
                          "user what to do instead",
                          d->name);
            goto out;
        }
        if (v == SP_VERDICT_ALLOW_ALWAYS)
            sv_push(&t->always, tx_strdup(d->name));
    }

    /* Every tool that changes files holds the sandbox's edit lock for the
     * whole call (tools_edit_lock()). */
    int lock = -1;
    if (((d->needs & NEED_WRITE) || freeform) && tools_edit_lock(&lock, t, &c) < 0)
        goto out;
    begin_running(t);
    if (freeform)
        tools_apply_patch(t, freeform, ff_len, &c);
    else
        d->fn(t, args, &c);
    end_running(t);
    tools_edit_unlock(lock);

out:
    ev.event = "end";
    ev.ok = c.code == 0;
    ev.code = c.code;
    ev.duration_ms = mono_ms() - t0;
    ev.truncated = c.truncated;
    ev.paths = (const char *const *)c.paths.v;
    ev.bytes = c.bytes + c.message.len;
    emit_event(t, &ev, c.code ? c.error : NULL);
out_noevent:;
    int code = c.code;
    *result = result_text(t, &c);
    call_dispose(&c);
    (void)raw_len;
    return code;
}

int sp_tools_call(char **result, sp_tools *t, const char *name, const char *args, size_t len)
{
    char *raw = args && len ? tx_strndup(args, len) : tx_strdup("{}");
    size_t raw_len = args && len ? len : 2;
    char *perr = NULL;
    cJSON *parsed = NULL;
    if (json_nul_check(raw, raw_len, &perr) == 0) {
        const char *end = NULL;
        parsed = cJSON_ParseWithLengthOpts(raw, raw_len, &end, false);
        /* Only whitespace may follow the object. */
        for (const char *p = end; parsed && p && p < raw + raw_len; p++) {
            if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') {
                cJSON_Delete(parsed);
                parsed = NULL;
            }
        }
        if (!parsed) {
            size_t at = end && end >= raw ? (size_t)(end - raw) : 0;
            char *q =
                quote(raw + (at < raw_len ? at : raw_len), raw_len - (at < raw_len ? at : raw_len));
            perr = tx_asprintf("the arguments are not valid JSON (near byte %zu: '%s'); send "
                               "one JSON object",
                               at, q);
            free(q);
        } else if (!cJSON_IsObject(parsed)) {
            perr = tx_asprintf("the arguments must be a JSON object, not %s", type_of(parsed));
        }
    }
    int r = dispatch(result, t, name, raw, raw_len, perr ? NULL : parsed, NULL, 0, perr);
    cJSON_Delete(parsed);
    free(perr);
    free(raw);
    return r;
}

int sp_tools_call_freeform(char **result, sp_tools *t, const char *name, const char *input,
                           size_t len)
{
    char *text = tx_strndup(input ? input : "", input ? len : 0);
    char *perr = NULL;
    if (memchr(input ? input : "", '\0', input ? len : 0))
        perr = tx_strdup("the input holds a NUL byte; patches are text");
    /* For the approval callback and events: the input as a JSON object. */
    cJSON *o = cJSON_CreateObject();
    char *raw = NULL;
    if (o && cJSON_AddStringToObject(o, "patch", text))
        raw = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    int r = dispatch(result, t, name, raw ? raw : "{}", raw ? strlen(raw) : 2, NULL,
                     perr ? NULL : text, perr ? 0 : len, perr);
    free(perr);
    free(raw);
    free(text);
    return r;
}

/* ------------------------------------------------------- cancellation -- */

/* Kill every process in the container that carries the call's token in
 * its environment, from a second handle: the first is busy on the
 * calling thread. Three rounds catch children forked during a round. */
static void kill_token(sp_tools *t, const char *token)
{
    pthread_mutex_lock(&t->kill_mu);
    if (!t->kill_sb && t->sb_name) {
        sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
        pthread_mutex_lock(&t->mu);
        char *url = t->podman_url ? tx_strdup(t->podman_url) : NULL;
        pthread_mutex_unlock(&t->mu);
        o.state_root = t->state_root;
        o.podman_url = url;
        if (sp_sandbox_open(&t->kill_sb, t->sb_name, &o, NULL) < 0)
            t->kill_sb = NULL;
        free(url);
    }
    if (t->kill_sb) {
        char *script = tx_asprintf(
            "k=SANDPOD_TOOL_CALL=%s; for i in 1 2 3; do "
            "for f in $(grep -l \"$k\" /proc/[0-9]*/environ 2>/dev/null); do "
            "n=${f#/proc/}; n=${n%%/environ}; [ \"$n\" = \"$$\" ] || kill -KILL \"$n\"; "
            "done 2>/dev/null; done; exit 0",
            token);
        sp_run_opts ro = SP_RUN_OPTS_INIT;
        ro.timeout_ms = 10000;
        sp_run_result *res = NULL;
        if (sp_sandbox_shell(&res, t->kill_sb, script, &ro, NULL) == 0)
            sp_run_result_free(res);
        free(script);
    }
    pthread_mutex_unlock(&t->kill_mu);
}

void sp_tools_cancel(sp_tools *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    if (!t->running) {
        pthread_mutex_unlock(&t->mu);
        return;
    }
    atomic_store(&t->cancelled, true);
    char *token = t->run_token ? tx_strdup(t->run_token) : NULL;
    pthread_mutex_unlock(&t->mu);
    if (token)
        kill_token(t, token);
    free(token);
}
