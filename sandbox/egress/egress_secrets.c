/* Brokered secrets (egress_secrets.h): scopes, the proxy's file, finding
 * and replacing stand-ins. */
#include "egress_secrets.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "base.h"

bool sp_egress_secret_name_ok(const char *name)
{
    static const char *const reserved[] = {"PATH",
                                           "HOME",
                                           "http_proxy",
                                           "https_proxy",
                                           "HTTP_PROXY",
                                           "HTTPS_PROXY",
                                           "ALL_PROXY",
                                           "all_proxy",
                                           "NO_PROXY",
                                           "no_proxy",
                                           "SSL_CERT_FILE",
                                           "REQUESTS_CA_BUNDLE",
                                           "NODE_EXTRA_CA_CERTS",
                                           "GIT_SSL_CAINFO",
                                           "CURL_CA_BUNDLE",
                                           NULL};
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > SP_SECRET_NAME_MAX || (name[0] >= '0' && name[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return false;
    }
    for (size_t i = 0; reserved[i]; i++)
        if (strcmp(name, reserved[i]) == 0)
            return false;
    return true;
}

int sp_egress_scope_parse(sp_egress_scope *out, const char *text, sp_error **err)
{
    memset(out, 0, sizeof(*out));
    const char *t = text ? text : "";
    if (strncmp(t, "http://", 7) == 0) {
        out->plain = true;
        t += 7;
    } else if (strstr(t, "://")) {
        return sp_err_set(err, SP_EINVAL, 0,
                          "--secret-for '%.200s': a scope is HOST[:PORT] (HTTPS) or "
                          "http://HOST[:PORT] (plain HTTP)",
                          text ? text : "");
    }
    size_t n = strlen(t);
    if (n && t[n - 1] == '/') /* http://host/ as a URL is written */
        n--;
    cleanup_free char *h = sp_xstrndup(t, n);
    sp_error *e = NULL;
    if (sp_egress_rule_parse(&out->rule, h, SP_EGRESS_ALLOW, &e) < 0) {
        int rc = sp_err_set(err, SP_EINVAL, 0, "--secret-for '%.200s': %s", text ? text : "",
                            e ? e->message : "not a host");
        sp_error_free(e);
        return rc;
    }
    /* No port given: the scheme's own, not every port. */
    if (out->rule.port_lo == 1 && out->rule.port_hi == 65535)
        out->rule.port_lo = out->rule.port_hi = out->plain ? 80 : 443;
    return 0;
}

static void scope_dispose(sp_egress_scope *s)
{
    sp_egress_rule_dispose(&s->rule);
}

static void secret_dispose(sp_egress_secret *x)
{
    free(x->name);
    free(x->standin);
    if (x->value)
        explicit_bzero(x->value, x->value_len);
    free(x->value);
    for (size_t j = 0; j < x->n_scopes; j++)
        scope_dispose(&x->scopes[j]);
    free(x->scopes);
}

bool sp_egress_secrets_over_tls(const sp_egress_secrets *s)
{
    for (size_t i = 0; i < s->n; i++)
        for (size_t k = 0; k < s->v[i].n_scopes; k++)
            if (!s->v[i].scopes[k].plain)
                return true;
    return false;
}

void sp_egress_secrets_remove(sp_egress_secrets *s, size_t i)
{
    secret_dispose(&s->v[i]);
    memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof(s->v[0]));
    s->n--;
}

void sp_egress_secrets_dispose(sp_egress_secrets *s)
{
    for (size_t i = 0; i < s->n; i++)
        secret_dispose(&s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static bool standin_ok(const char *s, size_t n)
{
    size_t pl = sizeof(SP_SECRET_STANDIN_PREFIX) - 1;
    if (n != SP_SECRET_STANDIN_LEN || strncmp(s, SP_SECRET_STANDIN_PREFIX, pl) != 0)
        return false;
    for (size_t i = pl; i < n; i++)
        if (hexval(s[i]) < 0)
            return false;
    return true;
}

/* One "secret ..." line's fields after the keyword. */
static int parse_line(sp_egress_secret *x, char *f[5], sp_error **err, unsigned line)
{
    if (!sp_egress_secret_name_ok(f[0]))
        return sp_err_set(err, SP_EINVAL, 0, "secrets line %u: '%.100s' is not a secret's name",
                          line, f[0]);
    if (!standin_ok(f[1], strlen(f[1])))
        return sp_err_set(err, SP_EINVAL, 0, "secrets line %u: a malformed stand-in", line);
    if (f[2][0] != 'h' || strspn(f[2], "hqb") != strlen(f[2]))
        return sp_err_set(err, SP_EINVAL, 0, "secrets line %u: where '%.10s' is not h[q][b]", line,
                          f[2]);
    size_t hl = strlen(f[3]);
    if (hl == 0 || hl % 2 || hl / 2 > SP_SECRET_VALUE_MAX)
        return sp_err_set(err, SP_EINVAL, 0, "secrets line %u: a malformed value", line);
    x->name = sp_xstrdup(f[0]);
    x->standin = sp_xstrdup(f[1]);
    x->in_query = strchr(f[2], 'q') != NULL;
    x->in_body = strchr(f[2], 'b') != NULL;
    x->value = sp_xmalloc(hl / 2);
    x->value_len = hl / 2;
    for (size_t i = 0; i < hl / 2; i++) {
        int a = hexval(f[3][2 * i]), b = hexval(f[3][2 * i + 1]);
        if (a < 0 || b < 0)
            return sp_err_set(err, SP_EINVAL, 0, "secrets line %u: a malformed value", line);
        x->value[i] = (unsigned char)(a << 4 | b);
    }
    char *save = NULL;
    for (char *sc = strtok_r(f[4], ",", &save); sc; sc = strtok_r(NULL, ",", &save)) {
        x->scopes = sp_xrealloc(x->scopes, (x->n_scopes + 1) * sizeof(*x->scopes));
        if (sp_egress_scope_parse(&x->scopes[x->n_scopes], sc, err) < 0)
            return sp_err_wrap(err, SP_EINVAL, "secrets line %u", line);
        x->n_scopes++;
    }
    if (!x->n_scopes)
        return sp_err_set(err, SP_EINVAL, 0, "secrets line %u: no scope", line);
    return 0;
}

int sp_egress_secrets_parse(sp_egress_secrets *s, const char *text, size_t len, sp_error **err)
{
    unsigned line = 0;
    for (const char *p = text, *end = text + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);
        line++;
        cleanup_free char *l = sp_xstrndup(p, ll);
        p += ll + (nl != NULL);
        if (!l[0] || l[0] == '#')
            continue;
        char *f[7] = {0}, *save = NULL;
        size_t nf = 0;
        for (char *t = strtok_r(l, " ", &save); t && nf < 7; t = strtok_r(NULL, " ", &save))
            f[nf++] = t;
        if (nf != 6 || strcmp(f[0], "secret") != 0)
            return sp_err_set(err, SP_EINVAL, 0,
                              "secrets line %u: not 'secret NAME STANDIN WHERE VALUE SCOPES'",
                              line);
        for (size_t i = 0; i < s->n; i++)
            if (strcmp(s->v[i].name, f[1]) == 0 || strcmp(s->v[i].standin, f[2]) == 0)
                return sp_err_set(err, SP_EINVAL, 0, "secrets line %u: '%.100s' twice", line, f[1]);
        s->v = sp_xrealloc(s->v, (s->n + 1) * sizeof(*s->v));
        sp_egress_secret *x = &s->v[s->n++];
        memset(x, 0, sizeof(*x));
        int rc = parse_line(x, f + 1, err, line);
        if (rc < 0)
            return rc;
    }
    return 0;
}

char *sp_egress_secrets_text(const sp_egress_secrets *s)
{
    sp_buf b = SP_BUF_INIT;
    sp_buf_adds(&b, "# sandpod secrets 1\n");
    for (size_t i = 0; i < s->n; i++) {
        const sp_egress_secret *x = &s->v[i];
        sp_buf_printf(&b, "secret %s %s h%s%s ", x->name, x->standin, x->in_query ? "q" : "",
                      x->in_body ? "b" : "");
        for (size_t j = 0; j < x->value_len; j++)
            sp_buf_printf(&b, "%02x", x->value[j]);
        for (size_t j = 0; j < x->n_scopes; j++)
            sp_buf_printf(&b, "%s%s%s", j ? "," : " ", x->scopes[j].plain ? "http://" : "",
                          x->scopes[j].rule.text);
        sp_buf_adds(&b, "\n");
    }
    return sp_buf_steal(&b);
}

bool sp_egress_secret_for(const sp_egress_secret *s, const char *host, uint16_t port, bool tls)
{
    for (size_t i = 0; i < s->n_scopes; i++)
        if (s->scopes[i].plain == !tls && sp_egress_rule_names(&s->scopes[i].rule, host, port))
            return true;
    return false;
}

const sp_egress_secret *sp_egress_secrets_find(const sp_egress_secrets *s, const void *buf,
                                               size_t len)
{
    for (size_t i = 0; i < s->n; i++)
        if (memmem(buf, len, s->v[i].standin, SP_SECRET_STANDIN_LEN))
            return &s->v[i];
    return NULL;
}

size_t sp_egress_secrets_replace(const sp_egress_secrets *s, const char *host, uint16_t port,
                                 bool tls, bool query, bool body, const void *buf, size_t len,
                                 unsigned char **out, size_t *out_len)
{
    sp_buf b = SP_BUF_INIT;
    size_t count = 0;
    const unsigned char *p = buf, *end = p + len;
    const size_t pl = sizeof(SP_SECRET_STANDIN_PREFIX) - 1;
    while (p < end) {
        const unsigned char *hit = memmem(p, (size_t)(end - p), SP_SECRET_STANDIN_PREFIX, pl);
        const sp_egress_secret *x = NULL;
        if (hit && (size_t)(end - hit) >= SP_SECRET_STANDIN_LEN)
            for (size_t i = 0; i < s->n && !x; i++) {
                const sp_egress_secret *c = &s->v[i];
                if (memcmp(hit, c->standin, SP_SECRET_STANDIN_LEN) == 0 &&
                    (!query || c->in_query) && (!body || c->in_body) &&
                    sp_egress_secret_for(c, host, port, tls))
                    x = c;
            }
        const unsigned char *upto = hit ? hit + (x ? 0 : pl) : end;
        sp_buf_add(&b, p, (size_t)(upto - p));
        if (x) {
            sp_buf_add(&b, x->value, x->value_len);
            count++;
            p = hit + SP_SECRET_STANDIN_LEN;
        } else {
            p = upto;
        }
    }
    *out_len = b.len;
    *out = (unsigned char *)sp_buf_steal(&b);
    if (!*out)
        *out = (unsigned char *)sp_xstrdup("");
    return count;
}

int sp_egress_standin_new(char out[SP_SECRET_STANDIN_LEN + 1])
{
    unsigned char r[20];
    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
        return -1;
    int n = snprintf(out, SP_SECRET_STANDIN_LEN + 1, "%s", SP_SECRET_STANDIN_PREFIX);
    for (size_t i = 0; i < sizeof(r); i++)
        snprintf(out + n + 2 * i, 3, "%02x", r[i]);
    explicit_bzero(r, sizeof(r));
    return 0;
}
