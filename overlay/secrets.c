/* Which files hold credentials, and the rewrites of .npmrc, .pypirc and
 * .docker/config.json without them (secrets.h; git configs are in
 * gitconfig_scrub.c). Names decide, never content: a rule must be one a
 * user can read in the README and predict. */
#include <string.h>
#include <strings.h>

#include <cJSON.h>

#include "secrets.h"

/* ------------------------------------------------------------ the rules -- */

static bool has_suffix_ci(const char *s, size_t n, const char *suf)
{
    size_t k = strlen(suf);
    return n >= k && strncasecmp(s + n - k, suf, k) == 0;
}

/* .env and .env.*, but not the templates projects commit on purpose. */
static bool is_dotenv(const char *b)
{
    static const char *const templates[] = {"example", "sample", "template", "dist"};
    if (strcmp(b, ".env") == 0)
        return true;
    if (strncmp(b, ".env.", 5) != 0)
        return false;
    for (size_t i = 0; i < sizeof(templates) / sizeof(templates[0]); i++)
        if (strcmp(b + 5, templates[i]) == 0)
            return false;
    return true;
}

/* An ssh private key by its name: id_<anything> without an extension
 * (id_rsa, id_ed25519, id_work), or a key type's name with any suffix but
 * .pub (id_rsa.old, id_ed25519_sk). id_map.c and id_test.go are source. */
static bool is_ssh_key(const char *b)
{
    static const char *const types[] = {"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"};
    size_t n = strlen(b);
    if (n <= 3 || strncmp(b, "id_", 3) != 0 || has_suffix_ci(b, n, ".pub"))
        return false;
    if (!strchr(b, '.'))
        return true;
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (strncmp(b, types[i], strlen(types[i])) == 0)
            return true;
    return false;
}

/* Is one of the folders of `path` (not its last component) named `name`? */
static bool has_folder(const char *path, const char *last, const char *name)
{
    size_t n = strlen(name);
    for (const char *s = path; s < last;) {
        const char *e = strchr(s, '/');
        if (!e || e >= last)
            break;
        if ((size_t)(e - s) == n && strncmp(s, name, n) == 0)
            return true;
        s = e + 1;
    }
    return false;
}

sp_secret_kind sp_secret_classify(const char *path, const char **detail)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    const char *why = NULL;
    if (is_dotenv(b))
        why = ".env file";
    else if (strcmp(b, ".netrc") == 0 || strcmp(b, "_netrc") == 0)
        why = "netrc credentials";
    else if (strcmp(b, ".git-credentials") == 0)
        why = "git credentials";
    else if (is_ssh_key(b))
        why = "private key";
    else if (has_suffix_ci(b, n, ".pem") || has_suffix_ci(b, n, ".key") ||
             has_suffix_ci(b, n, ".p12") || has_suffix_ci(b, n, ".pfx"))
        why = "key or certificate file";
    if (why) {
        *detail = why;
        return SP_SECRET_LEAVE_OUT;
    }
    if ((strcmp(b, "config") == 0 || strcmp(b, "config.worktree") == 0) &&
        has_folder(path, b, ".git"))
        return SP_SECRET_GITCONFIG;
    if (strcmp(b, ".npmrc") == 0)
        return SP_SECRET_NPMRC;
    if (strcmp(b, ".pypirc") == 0)
        return SP_SECRET_PYPIRC;
    if (strcmp(b, "config.json") == 0 && b - path >= 8 && strncmp(b - 8, ".docker/", 8) == 0 &&
        (b - path == 8 || b[-9] == '/'))
        return SP_SECRET_DOCKER;
    return SP_SECRET_NONE;
}

const char *sp_secret_rewrite_detail(sp_secret_kind k)
{
    switch (k) {
    case SP_SECRET_GITCONFIG:
        return "credentials removed from .git/config";
    case SP_SECRET_NPMRC:
        return "auth entries removed from .npmrc";
    case SP_SECRET_PYPIRC:
        return "passwords removed from .pypirc";
    case SP_SECRET_DOCKER:
        return "registry auths removed from .docker/config.json";
    default:
        return "credentials removed";
    }
}

const char *sp_secret_unparsed_detail(sp_secret_kind k)
{
    switch (k) {
    case SP_SECRET_GITCONFIG:
        return "git config that could not be parsed";
    case SP_SECRET_NPMRC:
        return ".npmrc that could not be parsed";
    case SP_SECRET_PYPIRC:
        return ".pypirc that could not be parsed";
    case SP_SECRET_DOCKER:
        return ".docker/config.json that could not be parsed";
    default:
        return "could not be parsed";
    }
}

/* ------------------------------------------------------------- rewrites -- */

typedef struct line {
    const char *s; /* the line, its '\n' included */
    size_t len;
    const char *t; /* after the leading blanks, without the line ending */
    size_t tlen;
    size_t indent;
} line;

/* The line at *pos, moving *pos past it; false at the end. */
static bool next_line(line *l, const char *in, size_t len, size_t *pos)
{
    if (*pos >= len)
        return false;
    const char *s = in + *pos;
    const char *nl = memchr(s, '\n', len - *pos);
    l->s = s;
    l->len = nl ? (size_t)(nl - s) + 1 : len - *pos;
    *pos += l->len;
    size_t e = l->len;
    if (e && s[e - 1] == '\n')
        e--;
    if (e && s[e - 1] == '\r')
        e--;
    size_t i = 0;
    while (i < e && (s[i] == ' ' || s[i] == '\t'))
        i++;
    l->indent = i;
    l->t = s + i;
    l->tlen = e - i;
    return true;
}

static void trim(const char **s, size_t *n)
{
    while (*n && ((*s)[0] == ' ' || (*s)[0] == '\t')) {
        (*s)++;
        (*n)--;
    }
    while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
        (*n)--;
}

static void unquote(const char **s, size_t *n)
{
    if (*n >= 2 && ((*s)[0] == '"' || (*s)[0] == '\'') && (*s)[*n - 1] == (*s)[0]) {
        (*s)++;
        *n -= 2;
    }
}

/* `${NAME}` alone: npm reads it from the environment; no secret in it. */
static bool env_reference(const char *v, size_t n)
{
    if (n < 4 || v[0] != '$' || v[1] != '{' || v[n - 1] != '}')
        return false;
    for (size_t i = 2; i < n - 1; i++)
        if (!((v[i] >= 'A' && v[i] <= 'Z') || (v[i] >= 'a' && v[i] <= 'z') ||
              (v[i] >= '0' && v[i] <= '9') || v[i] == '_'))
            return false;
    return true;
}

/* .npmrc (npm's ini): lines whose key ends in _auth, _authToken,
 * password or username go, unless their value is a ${VAR} reference. */
static int scrub_npmrc(sp_buf *o, const char *in, size_t len)
{
    size_t pos = 0;
    bool changed = false;
    line l;
    while (next_line(&l, in, len, &pos)) {
        const char *eq = l.tlen ? memchr(l.t, '=', l.tlen) : NULL;
        if (eq && l.t[0] != '#' && l.t[0] != ';' && l.t[0] != '[') {
            const char *k = l.t, *v = eq + 1;
            size_t kn = (size_t)(eq - l.t), vn = l.tlen - kn - 1;
            trim(&k, &kn);
            unquote(&k, &kn);
            if (kn >= 2 && k[kn - 2] == '[' && k[kn - 1] == ']')
                kn -= 2;
            trim(&v, &vn);
            unquote(&v, &vn);
            if ((has_suffix_ci(k, kn, "_auth") || has_suffix_ci(k, kn, "_authtoken") ||
                 has_suffix_ci(k, kn, "password") || has_suffix_ci(k, kn, "username")) &&
                !env_reference(v, vn)) {
                changed = true;
                continue;
            }
        }
        sp_buf_add(o, l.s, l.len);
    }
    return changed;
}

/* .pypirc (Python's configparser): `password` keys go, with the indented
 * lines that continue their value. */
static int scrub_pypirc(sp_buf *o, const char *in, size_t len)
{
    size_t pos = 0, blanks = 0, dropping = SIZE_MAX;
    const char *blank_from = NULL;
    bool changed = false;
    line l;
    while (next_line(&l, in, len, &pos)) {
        if (dropping != SIZE_MAX) {
            if (!l.tlen) {
                if (!blanks)
                    blank_from = l.s;
                blanks += l.len;
                continue;
            }
            if (l.indent > dropping) {
                blanks = 0; /* blank lines inside the dropped value */
                continue;
            }
            dropping = SIZE_MAX;
        }
        if (blanks) {
            sp_buf_add(o, blank_from, blanks);
            blanks = 0;
        }
        if (l.tlen && l.t[0] != '#' && l.t[0] != ';' && l.t[0] != '[') {
            size_t kn = 0;
            while (kn < l.tlen && l.t[kn] != '=' && l.t[kn] != ':')
                kn++;
            bool has_delim = kn < l.tlen;
            const char *k = l.t;
            trim(&k, &kn);
            if (has_delim && kn == 8 && strncasecmp(k, "password", 8) == 0) {
                dropping = l.indent;
                changed = true;
                continue;
            }
        }
        sp_buf_add(o, l.s, l.len);
    }
    if (blanks)
        sp_buf_add(o, blank_from, blanks);
    return changed;
}

/* .docker/config.json: auths.*.auth, password, identitytoken and
 * registrytoken go; credHelpers and credsStore name helpers and stay. */
static int scrub_docker(sp_buf *o, const char *in, size_t len)
{
    static const char *const keys[] = {"auth", "password", "identitytoken", "registrytoken"};
    cJSON *j = cJSON_ParseWithLength(in, len);
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return -1;
    }
    bool changed = false;
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j, "auths"))
    {
        for (size_t i = 0; cJSON_IsObject(e) && i < sizeof(keys) / sizeof(keys[0]); i++) {
            /* Any case: Docker's decoder matches keys without it. */
            while (cJSON_GetObjectItem(e, keys[i])) {
                cJSON_DeleteItemFromObject(e, keys[i]);
                changed = true;
            }
        }
    }
    int rc = changed;
    if (changed) {
        char *s = cJSON_Print(j);
        if (s) {
            sp_buf_adds(o, s);
            sp_buf_addc(o, '\n');
            free(s);
        } else {
            rc = -1;
        }
    }
    cJSON_Delete(j);
    return rc;
}

int sp_secret_scrub(sp_buf *out, sp_secret_kind k, const char *in, size_t len)
{
    sp_buf o = SP_BUF_INIT;
    sp_buf_add(&o, "", 0);
    int rc;
    switch (k) {
    case SP_SECRET_GITCONFIG:
        rc = sp_gitconfig_scrub(&o, in, len);
        break;
    case SP_SECRET_NPMRC:
        rc = memchr(in, '\0', len) ? -1 : scrub_npmrc(&o, in, len);
        break;
    case SP_SECRET_PYPIRC:
        rc = memchr(in, '\0', len) ? -1 : scrub_pypirc(&o, in, len);
        break;
    case SP_SECRET_DOCKER:
        rc = scrub_docker(&o, in, len);
        break;
    default:
        rc = 0;
        break;
    }
    if (rc == 1)
        sp_buf_add(out, o.data, o.len);
    sp_buf_dispose(&o);
    return rc;
}
