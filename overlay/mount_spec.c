/* Mount specs: "SRC[:DST]" and the key=value form, parsed into sp_mount. */
#include "hydrate_internal.h"

/* --------------------------------------------------------- mount spec -- */

typedef struct mount_owned {
    sp_mount m; /* first: sp_mount_free() gets this pointer */
    char *host;
    char *dst;
    sp_strv inc, exc;
} mount_owned;

void sp_mount_free(sp_mount *m)
{
    if (!m)
        return;
    mount_owned *o = (mount_owned *)m;
    free(o->host);
    free(o->dst);
    sp_strv_dispose(&o->inc);
    sp_strv_dispose(&o->exc);
    free(o);
}

static bool starts_key(const char *s, const char *key)
{
    size_t n = strlen(key);
    return strncmp(s, key, n) == 0 && s[n] == '=';
}

static bool starts_flag(const char *s, const char *flag)
{
    size_t n = strlen(flag);
    return strncmp(s, flag, n) == 0 && (s[n] == '\0' || s[n] == ',' || s[n] == '=');
}

static bool is_kv_spec(const char *s)
{
    static const char *const keys[] = {"src", "dst", "include", "exclude", "max-bytes", "secrets"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (starts_key(s, keys[i]))
            return true;
    return starts_flag(s, "follow-symlinks") || starts_flag(s, "gitignore");
}

/* A flag item: bare, or =true|yes|1, or =false|no|0. Once per spec. */
static int parse_flag(bool *out, bool *seen, const char *key, const char *item, size_t len,
                      const char *val, size_t vlen, const char *spec, sp_error **err)
{
    if (*seen)
        return sp_err_set(err, SP_EINVAL, 0, "mount spec repeats %s: %s", key, spec);
    *seen = true;
#define IS(w) (vlen == strlen(w) && strncmp(val, w, vlen) == 0)
    if (!val || IS("true") || IS("yes") || IS("1"))
        *out = true;
    else if (IS("false") || IS("no") || IS("0"))
        *out = false;
    else
        return sp_err_set(err, SP_EINVAL, 0, "%s takes true or false: %.*s", key, (int)len, item);
#undef IS
    return 0;
}

/* `\,` -> `,` and `\\` -> `\`; other backslashes stay. */
static char *unescape(const char *s, size_t len)
{
    sp_buf b = SP_BUF_INIT;
    sp_buf_add(&b, "", 0);
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\\' && i + 1 < len && (s[i + 1] == ',' || s[i + 1] == '\\'))
            i++;
        sp_buf_addc(&b, s[i]);
    }
    return sp_buf_steal(&b);
}

/* A whole number with an optional binary suffix: K, M, G, T, each
 * optionally followed by B or iB; a lone B too. Any case. */
static int parse_size(uint64_t *out, const char *s, size_t len)
{
    uint64_t v = 0;
    size_t i = 0;
    if (len == 0 || s[0] < '0' || s[0] > '9')
        return -1;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    char suf[4] = {0};
    if (len - i >= sizeof(suf))
        return -1;
    for (size_t k = 0; i + k < len; k++)
        suf[k] = (char)(s[i + k] | 0x20);
    static const char *const units = "kmgt";
    unsigned shift = 0;
    const char *rest = suf;
    const char *u = suf[0] ? strchr(units, suf[0]) : NULL;
    if (u) {
        shift = 10u * (unsigned)(u - units + 1);
        rest = suf + 1;
    }
    if (!(rest[0] == '\0' || strcmp(rest, "b") == 0 || (shift && strcmp(rest, "ib") == 0)))
        return -1;
    if (shift && v > (UINT64_MAX >> shift))
        return -1;
    *out = v << shift;
    return 0;
}

int sp_mount_spec_parse(sp_mount **out, const char *spec, sp_error **err)
{
    *out = NULL;
    if (!spec || !*spec)
        return sp_err_set(err, SP_EINVAL, 0, "mount spec is empty");
    mount_owned *o = sp_xcalloc(1, sizeof(*o));
    int rc = 0;
    if (!is_kv_spec(spec)) {
        o->host = sp_xstrdup(spec);
        goto done;
    }
    bool have_max = false, have_follow = false, have_gitignore = false, have_secrets = false;
    const char *p = spec;
    while (rc == 0) {
        /* One item: up to a ',' outside braces and not escaped. */
        const char *q = p;
        int depth = 0;
        for (; *q; q++) {
            if (*q == '\\' && q[1]) {
                q++;
                continue;
            }
            if (*q == '{')
                depth++;
            else if (*q == '}' && depth > 0)
                depth--;
            else if (*q == ',' && depth == 0)
                break;
        }
        size_t len = (size_t)(q - p);
        const char *eq = memchr(p, '=', len);
        size_t klen = eq ? (size_t)(eq - p) : len;
        const char *val = eq ? eq + 1 : NULL;
        size_t vlen = eq ? len - klen - 1 : 0;
#define KEY(k) (klen == strlen(k) && strncmp(p, k, klen) == 0)
        if (len == 0) {
            rc = sp_err_set(err, SP_EINVAL, 0, "mount spec has an empty item: %s", spec);
        } else if (KEY("follow-symlinks")) {
            rc = parse_flag(&o->m.follow_symlinks, &have_follow, "follow-symlinks", p, len, val,
                            vlen, spec, err);
        } else if (KEY("gitignore")) {
            rc = parse_flag(&o->m.gitignore, &have_gitignore, "gitignore", p, len, val, vlen, spec,
                            err);
        } else if (!val) {
            rc =
                sp_err_set(err, SP_EINVAL, 0, "mount spec item needs KEY=VALUE: %.*s", (int)len, p);
        } else if (vlen == 0) {
            rc = sp_err_set(err, SP_EINVAL, 0, "mount spec item has an empty value: %.*s", (int)len,
                            p);
        } else if (KEY("src")) {
            if (o->host)
                rc = sp_err_set(err, SP_EINVAL, 0, "mount spec repeats src: %s", spec);
            else
                o->host = unescape(val, vlen);
        } else if (KEY("dst")) {
            if (o->dst)
                rc = sp_err_set(err, SP_EINVAL, 0, "mount spec repeats dst: %s", spec);
            else
                o->dst = unescape(val, vlen);
        } else if (KEY("include")) {
            sp_strv_push(&o->inc, sp_xstrndup(val, vlen));
        } else if (KEY("exclude")) {
            sp_strv_push(&o->exc, sp_xstrndup(val, vlen));
        } else if (KEY("secrets")) {
            if (have_secrets)
                rc = sp_err_set(err, SP_EINVAL, 0, "mount spec repeats secrets: %s", spec);
            else if (vlen == 4 && strncmp(val, "keep", 4) == 0)
                o->m.keep_secrets = true;
            else if (vlen == 5 && strncmp(val, "strip", 5) == 0)
                o->m.keep_secrets = false;
            else
                rc = sp_err_set(err, SP_EINVAL, 0,
                                "secrets takes strip (the default: credentials are left out) "
                                "or keep: %.*s",
                                (int)len, p);
            have_secrets = true;
        } else if (KEY("max-bytes")) {
            if (have_max)
                rc = sp_err_set(err, SP_EINVAL, 0, "mount spec repeats max-bytes: %s", spec);
            else if (parse_size(&o->m.max_bytes, val, vlen) < 0 || o->m.max_bytes == 0)
                rc = sp_err_set(err, SP_EINVAL, 0,
                                "max-bytes takes a size of at least 1, like 500K, 64M or 2G: "
                                "%.*s",
                                (int)vlen, val);
            have_max = true;
        } else {
            rc = sp_err_set(err, SP_EINVAL, 0,
                            "unknown mount spec key '%.*s' (keys: src, dst, include, exclude, "
                            "max-bytes, follow-symlinks, gitignore, secrets)",
                            (int)klen, p);
        }
#undef KEY
        if (!*q)
            break;
        p = q + 1;
    }
    if (rc == 0 && !o->host)
        rc = sp_err_set(err, SP_EINVAL, 0, "mount spec has no src=PATH: %s", spec);

done:
    if (rc < 0) {
        sp_mount_free(&o->m);
        return rc;
    }
    o->m.host_path = o->host;
    o->m.mount_path = o->dst;
    /* sp_strv keeps its array NULL-terminated. */
    if (o->inc.n)
        o->m.include = (const char *const *)o->inc.v;
    if (o->exc.n)
        o->m.exclude = (const char *const *)o->exc.v;
    *out = &o->m;
    return 0;
}
