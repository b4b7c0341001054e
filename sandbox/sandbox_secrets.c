/* A sandbox's brokered secrets on the host side (sandpod/egress.h): what
 * create's options say, checked; the values read from this process's
 * environment or a file; stand-ins made; sandbox.json's record (names,
 * stand-ins, scopes: never a value); and the proxy's file, egress/secrets,
 * the only place a value is kept (mode 0600, its proxy's user's). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/protocol.h"
#include "egress_proxy.h"
#include "egress_secrets.h"
#include "json.h"
#include "sandbox_internal.h"
#include "sandpod/egress.h"

/* "NAME=REST" of list whose NAME is name, the REST parts, in order. */
static sp_egress_secret *find(sp_egress_secrets *s, const char *name, size_t n)
{
    for (size_t i = 0; i < s->n; i++)
        if (strlen(s->v[i].name) == n && strncmp(s->v[i].name, name, n) == 0)
            return &s->v[i];
    return NULL;
}

/* Split "NAME=REST": the name's length, REST. */
static const char *split(const char *item, const char *opt, size_t *n, sp_error **err)
{
    const char *eq = item ? strchr(item, '=') : NULL;
    if (!eq || eq == item || !eq[1]) {
        sp_err_set(err, SP_EINVAL, 0, "%s '%.200s': write NAME=%s", opt, item ? item : "",
                   strcmp(opt, "--secret") == 0       ? "env:VAR or NAME=file:PATH"
                   : strcmp(opt, "--secret-for") == 0 ? "HOST"
                                                      : "query,body");
        return NULL;
    }
    *n = (size_t)(eq - item);
    return eq + 1;
}

int sp_secret_value_read(unsigned char **value, size_t *len, const char *source, const char *name,
                         sp_error **err)
{
    *value = NULL;
    *len = 0;
    sp_buf b = SP_BUF_INIT;
    if (strncmp(source, "env:", 4) == 0) {
        const char *v = getenv(source + 4);
        if (!source[4] || !v)
            return sp_err_set(err, SP_EINVAL, 0,
                              "secret %s: the variable %s is not set in this environment", name,
                              source + 4);
        sp_buf_adds(&b, v);
    } else if (strncmp(source, "file:", 5) == 0) {
        cleanup_close int fd = open(source + 5, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
            return sp_err_errno(err, errno, "read secret", source + 5);
        if (!S_ISREG(st.st_mode))
            return sp_err_set(err, SP_EINVAL, 0, "secret %s: %s is not a regular file", name,
                              source + 5);
        if (sp_read_all(fd, &b, SP_SECRET_VALUE_MAX + 2) < 0) {
            sp_buf_dispose(&b);
            return sp_err_errno(err, errno, "read secret", source + 5);
        }
        /* One trailing newline, as `echo` and editors leave it. */
        if (b.len && b.data[b.len - 1] == '\n')
            b.len--;
        if (b.len && b.data[b.len - 1] == '\r')
            b.len--;
    } else {
        return sp_err_set(err, SP_EINVAL, 0,
                          "secret %s: '%.100s' is not env:VAR or file:PATH (a value itself "
                          "would show in the process list)",
                          name, source);
    }
    int rc = 0;
    if (b.len == 0)
        rc = sp_err_set(err, SP_EINVAL, 0, "secret %s: its value is empty", name);
    else if (b.len > SP_SECRET_VALUE_MAX)
        rc = sp_err_set(err, SP_EINVAL, 0, "secret %s: its value is over %d bytes", name,
                        SP_SECRET_VALUE_MAX);
    else if (memchr(b.data, '\n', b.len) || memchr(b.data, '\r', b.len) ||
             memchr(b.data, '\0', b.len))
        rc = sp_err_set(err, SP_EINVAL, 0,
                        "secret %s: its value holds a line break or NUL (it goes in HTTP "
                        "headers)",
                        name);
    if (rc < 0) {
        if (b.data)
            explicit_bzero(b.data, b.len);
        sp_buf_dispose(&b);
        return rc;
    }
    *len = b.len;
    *value = (unsigned char *)sp_buf_steal(&b);
    return 0;
}

int sp_sandbox_secrets_from_opts(sp_egress_secrets *out, const sp_sandbox_opts *o, bool read_values,
                                 sp_error **err)
{
    memset(out, 0, sizeof(*out));
    if (o->egress_ca && !o->secrets)
        return sp_err_set(err, SP_EINVAL, 0,
                          "--egress-ca is the CAs the egress proxy trusts for the HTTPS hosts "
                          "secrets go to: give --secret and --secret-for too");
    if (!o->secrets && !o->secret_for && !o->secret_in)
        return 0;
    int rc = 0;
    if (!o->allow && !o->deny)
        return sp_err_set(err, SP_EINVAL, 0,
                          "secrets are brokered by the sandbox's egress proxy: give egress "
                          "rules too (--allow HOST for each host a secret is for)");
    for (size_t i = 0; o->secrets && o->secrets[i]; i++) {
        size_t n;
        const char *src = split(o->secrets[i], "--secret", &n, err);
        if (!src)
            goto fail;
        cleanup_free char *name = sp_xstrndup(o->secrets[i], n);
        if (!sp_egress_secret_name_ok(name)) {
            rc = sp_err_set(err, SP_EINVAL, 0,
                            "--secret '%.100s': the name is a variable's ([A-Za-z_][A-Za-z0-9_]*, "
                            "not one sandpod sets)",
                            name);
            goto fail;
        }
        if (find(out, name, n)) {
            rc = sp_err_set(err, SP_EINVAL, 0, "--secret %s: given twice", name);
            goto fail;
        }
        out->v = sp_xrealloc(out->v, (out->n + 1) * sizeof(*out->v));
        sp_egress_secret *x = &out->v[out->n++];
        memset(x, 0, sizeof(*x));
        x->name = sp_xstrdup(name);
        x->standin = sp_xmalloc(SP_SECRET_STANDIN_LEN + 1);
        if (sp_egress_standin_new(x->standin) < 0) {
            rc = sp_err_errno(err, errno, "make a stand-in for secret", name);
            goto fail;
        }
        if (read_values &&
            (rc = sp_secret_value_read(&x->value, &x->value_len, src, name, err)) < 0)
            goto fail;
    }
    for (size_t i = 0; o->secret_for && o->secret_for[i]; i++) {
        size_t n;
        const char *scope = split(o->secret_for[i], "--secret-for", &n, err);
        if (!scope)
            goto fail;
        sp_egress_secret *x = find(out, o->secret_for[i], n);
        if (!x) {
            rc = sp_err_set(err, SP_EINVAL, 0, "--secret-for '%.200s': no --secret %.*s",
                            o->secret_for[i], (int)n, o->secret_for[i]);
            goto fail;
        }
        x->scopes = sp_xrealloc(x->scopes, (x->n_scopes + 1) * sizeof(*x->scopes));
        if ((rc = sp_egress_scope_parse(&x->scopes[x->n_scopes], scope, err)) < 0)
            goto fail;
        x->n_scopes++;
    }
    for (size_t i = 0; o->secret_in && o->secret_in[i]; i++) {
        size_t n;
        const char *where = split(o->secret_in[i], "--secret-in", &n, err);
        if (!where)
            goto fail;
        sp_egress_secret *x = find(out, o->secret_in[i], n);
        bool q = strcmp(where, "query") == 0 || strcmp(where, "query,body") == 0 ||
                 strcmp(where, "body,query") == 0;
        bool b = strcmp(where, "body") == 0 || strcmp(where, "query,body") == 0 ||
                 strcmp(where, "body,query") == 0;
        if (!x || (!q && !b)) {
            rc = sp_err_set(err, SP_EINVAL, 0, "--secret-in '%.200s': %s", o->secret_in[i],
                            x ? "write NAME=query, NAME=body or NAME=query,body"
                              : "no such --secret");
            goto fail;
        }
        x->in_query = x->in_query || q;
        x->in_body = x->in_body || b;
    }
    for (size_t i = 0; i < out->n; i++)
        if (!out->v[i].n_scopes) {
            rc = sp_err_set(err, SP_EINVAL, 0,
                            "secret %s is for no host: give --secret-for %s=HOST (a secret is "
                            "sent only where it is for)",
                            out->v[i].name, out->v[i].name);
            goto fail;
        }
    if (o->egress_ca && !sp_egress_secrets_over_tls(out)) {
        rc = sp_err_set(err, SP_EINVAL, 0,
                        "--egress-ca is for secrets over HTTPS, and every secret here is for "
                        "http:// hosts");
        goto fail;
    }
    return 0;
fail:
    if (rc == 0)
        rc = SP_EINVAL;
    sp_egress_secrets_dispose(out);
    return rc;
}

/* What o says of secret `name`: its source, or NULL. */
static const char *given_source(const sp_sandbox_opts *o, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; o->secrets && o->secrets[i]; i++)
        if (strncmp(o->secrets[i], name, n) == 0 && o->secrets[i][n] == '=')
            return o->secrets[i] + n + 1;
    return NULL;
}

int sp_sandbox_secrets_carry(sp_egress_secrets *out, const sp_sandbox *origin,
                             const sp_sandbox_opts *o, sp_error **err)
{
    memset(out, 0, sizeof(*out));
    const sp_egress_secrets *shape = &origin->cfg.secrets;
    if (o->secret_for || o->secret_in)
        return sp_err_set(err, SP_EINVAL, 0,
                          "--secret-for and --secret-in: a fork keeps the scopes of %s's secrets",
                          origin->name);
    for (size_t i = 0; o->secrets && o->secrets[i]; i++) {
        size_t n;
        if (!split(o->secrets[i], "--secret", &n, err))
            return SP_EINVAL;
        bool known = false;
        for (size_t k = 0; k < shape->n && !known; k++)
            known =
                strlen(shape->v[k].name) == n && strncmp(shape->v[k].name, o->secrets[i], n) == 0;
        if (!known)
            return sp_err_set(err, SP_EINVAL, 0,
                              "--secret %.*s: %s has no such secret (a fork takes values for its "
                              "origin's secrets only)",
                              (int)n, o->secrets[i], origin->name);
    }
    sp_egress_secrets have;
    int r = sp_sandbox_secrets_read(&have, origin->state_dir, err);
    if (r < 0)
        return sp_err_wrap(err, r, "the secrets of %s", origin->name);
    cJSON *j = sp_sandbox_secrets_json(shape);
    r = sp_sandbox_secrets_from_json(out, j, err);
    cJSON_Delete(j);
    for (size_t i = 0; r == 0 && i < out->n; i++) {
        sp_egress_secret *x = &out->v[i];
        if (sp_egress_standin_new(x->standin) < 0) {
            r = sp_err_errno(err, errno, "make a stand-in for secret", x->name);
            break;
        }
        const char *src = given_source(o, x->name);
        if (src) {
            r = sp_secret_value_read(&x->value, &x->value_len, src, x->name, err);
            continue;
        }
        for (size_t k = 0; k < have.n && !x->value; k++)
            if (strcmp(have.v[k].name, x->name) == 0) {
                x->value = sp_xmalloc(have.v[k].value_len);
                memcpy(x->value, have.v[k].value, have.v[k].value_len);
                x->value_len = have.v[k].value_len;
            }
        if (!x->value)
            r = sp_err_set(err, SP_EINVAL, 0,
                           "secret %s of %s needs a value here: --secret %s=env:VAR or "
                           "--secret %s=file:PATH",
                           x->name, origin->name, x->name, x->name);
    }
    sp_egress_secrets_dispose(&have);
    if (r < 0)
        sp_egress_secrets_dispose(out);
    return r;
}

cJSON *sp_sandbox_secrets_json(const sp_egress_secrets *s)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < s->n; i++) {
        const sp_egress_secret *x = &s->v[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", x->name);
        cJSON_AddStringToObject(o, "standin", x->standin);
        cJSON *f = cJSON_AddArrayToObject(o, "for");
        for (size_t j = 0; j < x->n_scopes; j++) {
            cleanup_free char *t =
                sp_xasprintf("%s%s", x->scopes[j].plain ? "http://" : "", x->scopes[j].rule.text);
            cJSON_AddItemToArray(f, cJSON_CreateString(t));
        }
        cJSON_AddBoolToObject(o, "in_query", x->in_query);
        cJSON_AddBoolToObject(o, "in_body", x->in_body);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

int sp_sandbox_secrets_from_json(sp_egress_secrets *s, const cJSON *a, sp_error **err)
{
    memset(s, 0, sizeof(*s));
    const cJSON *o;
    cJSON_ArrayForEach(o, a)
    {
        const char *name = sp_json_str(o, "name"), *standin = sp_json_str(o, "standin");
        if (!name || !standin || strlen(standin) != SP_SECRET_STANDIN_LEN) {
            sp_egress_secrets_dispose(s);
            return sp_err_set(err, SP_EINVAL, 0, "a secret's record is damaged");
        }
        s->v = sp_xrealloc(s->v, (s->n + 1) * sizeof(*s->v));
        sp_egress_secret *x = &s->v[s->n++];
        memset(x, 0, sizeof(*x));
        x->name = sp_xstrdup(name);
        x->standin = sp_xstrdup(standin);
        x->in_query = sp_json_bool(o, "in_query", false);
        x->in_body = sp_json_bool(o, "in_body", false);
        const cJSON *f;
        cJSON_ArrayForEach(f, sp_json_get(o, "for"))
        {
            if (!cJSON_IsString(f))
                continue;
            x->scopes = sp_xrealloc(x->scopes, (x->n_scopes + 1) * sizeof(*x->scopes));
            if (sp_egress_scope_parse(&x->scopes[x->n_scopes], f->valuestring, err) < 0) {
                sp_egress_secrets_dispose(s);
                return SP_EINVAL;
            }
            x->n_scopes++;
        }
    }
    return 0;
}

int sp_sandbox_secrets_write(const char *dir, const sp_egress_secrets *s, int64_t uid, int64_t gid,
                             sp_error **err)
{
    cleanup_free char *path = sp_xasprintf("%s/%s", dir, SP_EGRESS_SECRETS);
    cleanup_free char *tmp = sp_xasprintf("%s.%d.tmp", path, (int)getpid());
    char *text = sp_egress_secrets_text(s);
    size_t len = strlen(text);
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    int rc = 0;
    if (fd < 0 || fchmod(fd, 0600) < 0 || (uid >= 0 && fchown(fd, (uid_t)uid, (gid_t)gid) < 0) ||
        sp_write_all(fd, text, len) < 0 || fsync(fd) < 0 || rename(tmp, path) < 0) {
        rc = sp_err_errno(err, errno, "write the secrets of", dir);
        unlink(tmp);
    }
    if (fd >= 0)
        close(fd);
    explicit_bzero(text, len);
    free(text);
    return rc;
}

int sp_sandbox_secrets_read(sp_egress_secrets *s, const char *dir, sp_error **err)
{
    memset(s, 0, sizeof(*s));
    cleanup_free char *path = sp_xasprintf("%s/%s", dir, SP_EGRESS_SECRETS);
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT)
        return 0;
    sp_buf b = SP_BUF_INIT;
    if (fd < 0 || sp_read_all(fd, &b, 4u << 20) < 0) {
        sp_buf_dispose(&b);
        return sp_err_errno(err, errno, "read", path);
    }
    int rc = sp_egress_secrets_parse(s, b.data ? b.data : "", b.len, err);
    if (b.data)
        explicit_bzero(b.data, b.len);
    sp_buf_dispose(&b);
    if (rc < 0)
        sp_egress_secrets_dispose(s);
    return rc;
}

void sp_sandbox_secrets_ca_env(sp_strv *env, const char *const *user_env)
{
    /* Replace the default bundle: OpenSSL (and so Python's ssl, Ruby,
     * PHP), Go, curl, Python requests, git, pip, cargo, the AWS tools,
     * npm, Deno. Node.js takes extra CAs beside its own. */
    static const char *const bundle[] = {
        "SSL_CERT_FILE",     "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT",
        "CARGO_HTTP_CAINFO", "AWS_CA_BUNDLE",  "NPM_CONFIG_CAFILE",  "DENO_CERT"};
    size_t n = sizeof(bundle) / sizeof(bundle[0]);
    for (size_t i = 0; i <= n; i++) {
        const char *var = i < n ? bundle[i] : "NODE_EXTRA_CA_CERTS";
        size_t vl = strlen(var);
        bool set = false;
        for (const char *const *e = user_env; e && *e && !set; e++)
            set = strncmp(*e, var, vl) == 0 && (*e)[vl] == '=';
        if (!set)
            sp_strv_push(env, sp_xasprintf("%s=%s/%s", var, SPA_EGRESS_DIR,
                                           i < n ? SP_EGRESS_CA_BUNDLE : SP_EGRESS_CA));
    }
}

/* Read a PEM file of certificates (at most 8 MiB) onto b. */
static int read_pem(sp_buf *b, const char *path, const char *what, sp_error **err)
{
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return sp_err_errno(err, errno, what, path);
    if (!S_ISREG(st.st_mode))
        return sp_err_set(err, SP_EINVAL, 0, "%s %s: not a regular file", what, path);
    size_t at = b->len;
    if (sp_read_all(fd, b, 8u << 20) < 0)
        return sp_err_errno(err, errno, what, path);
    if (!memmem(b->data + at, b->len - at, "-----BEGIN CERTIFICATE-----", 27))
        return sp_err_set(err, SP_EINVAL, 0, "%s %s: no PEM certificate in it", what, path);
    if (b->data[b->len - 1] != '\n')
        sp_buf_addc(b, '\n');
    return 0;
}

int sp_sandbox_secrets_trust(const char *egress_dir, const char *extra, sp_error **err)
{
    static const char *const bundles[] = {"/etc/ssl/certs/ca-certificates.crt",
                                          "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"};
    sp_buf b = SP_BUF_INIT;
    const char *host = getenv("SSL_CERT_FILE");
    for (size_t i = 0; (!host || !*host) && i < sizeof(bundles) / sizeof(bundles[0]); i++)
        if (access(bundles[i], R_OK) == 0)
            host = bundles[i];
    int r = 0;
    if (host && *host)
        r = read_pem(&b, host, "read the host's CA bundle", err);
    size_t host_len = b.len;
    if (r == 0 && extra)
        r = read_pem(&b, extra, "--egress-ca", err);
    cleanup_free char *up = sp_xasprintf("%s/%s", egress_dir, SP_EGRESS_UPSTREAM_CA);
    cleanup_free char *mine = sp_xasprintf("%s/%s", egress_dir, SP_EGRESS_EXTRA_CA);
    if (r == 0 && extra && b.len > host_len)
        r = sp_write_file_atomic(mine, b.data + host_len, b.len - host_len, 0644, err);
    if (r == 0)
        r = sp_write_file_atomic(up, b.data ? b.data : "", b.len, 0644, err);
    sp_buf_dispose(&b);
    return r;
}

/* i of the secret called name in s, or s->n. */
static size_t index_of(const sp_egress_secrets *s, const char *name)
{
    size_t i = 0;
    while (i < s->n && strcmp(s->v[i].name, name) != 0)
        i++;
    return i;
}

int sp_sandbox_secret_set(sp_sandbox *sb, const char *name, const char *source, sp_error **err)
{
    int r = sp_sandbox_lock(sb, err);
    if (r < 0)
        return r;
    sp_egress_secrets cur = {0};
    unsigned char *value = NULL;
    size_t len = 0, at = index_of(&sb->cfg.secrets, name ? name : ""), k = 0;
    if (at == sb->cfg.secrets.n) {
        r = sp_err_set(err, SP_EINVAL, 0,
                       "sandbox %s has no secret %s (secrets are given at create: a new one "
                       "would have no stand-in in the workload's environment)",
                       sb->name, name ? name : "");
        goto out;
    }
    if ((source && (r = sp_secret_value_read(&value, &len, source, name, err)) < 0) ||
        (r = sp_sandbox_secrets_read(&cur, sb->state_dir, err)) < 0)
        goto out;
    if ((k = index_of(&cur, name)) == cur.n) {
        r = sp_err_set(err, SP_EINVAL, 0, "sandbox %s: the value of secret %s is missing", sb->name,
                       name);
        goto out;
    }
    if (source) {
        explicit_bzero(cur.v[k].value, cur.v[k].value_len);
        free(cur.v[k].value);
        cur.v[k].value = steal_pointer(&value);
        cur.v[k].value_len = len;
    } else {
        sp_egress_secrets_remove(&cur, k);
    }
    /* The proxy's first: ours is what a fork reads, so it follows only
     * what is in force. */
    if ((r = sb->kind->secrets_set(sb, &cur, err)) < 0 ||
        (r = sp_sandbox_secrets_write(sb->state_dir, &cur, -1, -1, err)) < 0)
        goto out;
    if (!source) {
        sp_egress_secrets_remove(&sb->cfg.secrets, at);
        r = sp_sandbox_save(sb, err);
    }
out:
    if (value)
        explicit_bzero(value, len);
    free(value);
    sp_egress_secrets_dispose(&cur);
    sp_sandbox_unlock(sb);
    return r;
}
