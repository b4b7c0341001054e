/* A call's state (failures, changes, paths) and its arguments: typed
 * getters, the NUL check and the JSON-schema check. */
#include "tools_core.h"

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
    char *s = sp_xvasprintf(fmt, ap);
    va_end(ap);
    free(c->error);
    c->error = s;
    c->code = code ? code : SP_ERROR;
    c->reason = SP_R_NONE;
    return c->code;
}

int call_fail_reason(tool_call *c, int code, int reason, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = sp_xvasprintf(fmt, ap);
    va_end(ap);
    call_fail(c, code, "%s", s);
    free(s);
    c->reason = reason;
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
    c->reason = err ? err->reason : SP_R_NONE;
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
    if (path && !tools_sv_has(&c->paths, path))
        sp_strv_push(&c->paths, sp_xstrdup(path));
}

/* ----------------------------------------------------------- arguments -- */

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
                char *q = name ? tools_quote(name, name_len) : sp_xstrdup("?");
                *msg = sp_xasprintf("argument '%s' holds a NUL character (\\u0000): paths and "
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

const char *tools_type_of(const cJSON *v)
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
    sp_buf b = {0};
    const cJSON *p;
    cJSON_ArrayForEach(p, props)
    {
        if (b.len)
            sp_buf_adds(&b, ", ");
        sp_buf_adds(&b, p->string);
    }
    if (!b.len)
        sp_buf_adds(&b, "no arguments");
    return sp_buf_steal(&b);
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
                opts = printed ? printed : sp_xstrdup("?");
                char *q = tools_quote(v->valuestring, strlen(v->valuestring));
                *msg = sp_xasprintf("argument '%s' must be one of %s, not \"%s\"", name, opts, q);
                free(q);
                free(opts);
                return SP_EINVAL;
            }
        }
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(ps, "minLength");
        const cJSON *mx = cJSON_GetObjectItemCaseSensitive(ps, "maxLength");
        size_t n = utf8_chars(v->valuestring);
        if (cJSON_IsNumber(mn) && (double)n < mn->valuedouble) {
            *msg = sp_xasprintf("argument '%s' must not be empty", name);
            return SP_EINVAL;
        }
        if (cJSON_IsNumber(mx) && (double)n > mx->valuedouble) {
            *msg = sp_xasprintf("argument '%s' is too long: %zu characters, at most %.0f", name, n,
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
            *msg = sp_xasprintf("argument '%s' must be a whole number, not %g", name, d);
            return SP_EINVAL;
        }
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(ps, "minimum");
        const cJSON *mx = cJSON_GetObjectItemCaseSensitive(ps, "maximum");
        if ((cJSON_IsNumber(mn) && d < mn->valuedouble) ||
            (cJSON_IsNumber(mx) && d > mx->valuedouble)) {
            if (cJSON_IsNumber(mn) && cJSON_IsNumber(mx))
                *msg = sp_xasprintf("argument '%s' must be between %.0f and %.0f, not %.0f", name,
                                    mn->valuedouble, mx->valuedouble, d);
            else if (cJSON_IsNumber(mn))
                *msg = sp_xasprintf("argument '%s' must be at least %.0f, not %.0f", name,
                                    mn->valuedouble, d);
            else
                *msg = sp_xasprintf("argument '%s' must be at most %.0f, not %.0f", name,
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
    *msg = sp_xasprintf("argument '%s' must be %s, not %s", name,
                        strcmp(want, "integer") == 0   ? "an integer"
                        : strcmp(want, "boolean") == 0 ? "a boolean (true or false)"
                        : strcmp(want, "object") == 0  ? "an object"
                                                       : "a string",
                        tools_type_of(v));
    return SP_EINVAL;
}

int schema_check(const cJSON *schema, const cJSON *args, const char *tool, char **msg)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
    if (!cJSON_IsObject(args)) {
        *msg = sp_xasprintf("the arguments of %s must be a JSON object, not %s", tool,
                            tools_type_of(args));
        return SP_EINVAL;
    }
    const cJSON *a;
    cJSON_ArrayForEach(a, args)
    {
        const char *name = a->string ? a->string : "";
        char *q = tools_quote(name, strlen(name));
        for (const cJSON *b = a->next; b; b = b->next) {
            if (b->string && strcmp(b->string, name) == 0) {
                *msg = sp_xasprintf("argument '%s' is given twice", q);
                free(q);
                return SP_EINVAL;
            }
        }
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(props, name);
        if (!ps) {
            char *names = prop_names(props);
            *msg = sp_xasprintf("unknown argument '%s' for %s (it takes: %s)", q, tool, names);
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
            *msg = sp_xasprintf("missing required argument '%s' (%s%s%s)", r->valuestring,
                                cJSON_IsString(t) ? t->valuestring : "value",
                                cJSON_IsString(d) ? ": " : "",
                                cJSON_IsString(d) ? d->valuestring : "");
            return SP_EINVAL;
        }
    }
    return 0;
}
