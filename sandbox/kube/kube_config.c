/* Kubernetes credentials: in-cluster service-account files, a kubeconfig
 * read through kubectl (its JSON, so no YAML parser here), or explicit
 * values. Secrets are copied into owned buffers and never formatted into a
 * message. */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "kube.h"

extern char **environ;

#define KUBECTL_TIMEOUT_MS 15000
#define MAX_KUBECONFIG     (4u << 20)

void sp_kube_creds_dispose(sp_kube_creds *c)
{
    free(c->server);
    free(c->ns);
    if (c->token) {
        explicit_bzero(c->token, strlen(c->token));
        free(c->token);
    }
    free(c->token_file);
    free(c->ca_file);
    sp_buf_dispose(&c->ca_pem);
    sp_buf_dispose(&c->cert_pem);
    if (c->key_pem.data)
        explicit_bzero(c->key_pem.data, c->key_pem.len);
    sp_buf_dispose(&c->key_pem);
    memset(c, 0, sizeof(*c));
}

/* A small file's contents, trailing whitespace cut; NULL with errno set. */
static char *read_small(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    sp_buf b = SP_BUF_INIT;
    int r = sp_read_all(fd, &b, 1u << 20);
    int e = errno;
    close(fd);
    if (r < 0) {
        sp_buf_dispose(&b);
        errno = e;
        return NULL;
    }
    while (b.len && strchr(" \t\r\n", b.data[b.len - 1]))
        b.data[--b.len] = '\0';
    if (!b.data)
        sp_buf_adds(&b, "");
    return sp_buf_steal(&b);
}

/* http(s)://host[:port][/path]: a host, no credentials, nothing that
 * would split a request line. */
static bool server_ok(const char *s)
{
    if (!s || strcspn(s, " \t\r\n\"") != strlen(s))
        return false;
    const char *h = strncmp(s, "https://", 8) == 0  ? s + 8
                    : strncmp(s, "http://", 7) == 0 ? s + 7
                                                    : NULL;
    size_t hl = h ? strcspn(h, "/?#") : 0;
    return hl > 0 && !memchr(h, '@', hl) && h[hl] != '?' && h[hl] != '#';
}

static void set_server(sp_kube_creds *c, const char *s)
{
    size_t n = strlen(s);
    while (n && s[n - 1] == '/')
        n--;
    c->server = sp_xstrndup(s, n);
}

int sp_kube_creds_incluster(sp_kube_creds *out, const char *dir, sp_error **err)
{
    memset(out, 0, sizeof(*out));
    if (!dir)
        dir = SP_KUBE_SA_DIR;
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port)
        return sp_err_set(err, SP_ENOTFOUND, 0,
                          "kubernetes: not in a cluster (KUBERNETES_SERVICE_HOST/PORT are unset)");
    if (strspn(port, "0123456789") != strlen(port) || strlen(port) > 5 ||
        strcspn(host, "/ @?#") != strlen(host))
        return sp_err_set(err, SP_EINVAL, 0,
                          "kubernetes: KUBERNETES_SERVICE_HOST/PORT do not form an address");
    cleanup_free char *token = sp_xasprintf("%s/token", dir);
    cleanup_free char *ca = sp_xasprintf("%s/ca.crt", dir);
    cleanup_free char *nsf = sp_xasprintf("%s/namespace", dir);
    if (access(token, R_OK) < 0)
        return sp_err_errno(err, errno, "kubernetes: in-cluster token", token);
    if (access(ca, R_OK) < 0)
        return sp_err_errno(err, errno, "kubernetes: in-cluster CA", ca);
    cleanup_free char *ns = read_small(nsf);
    bool v6 = strchr(host, ':') != NULL;
    out->server = sp_xasprintf(v6 ? "https://[%s]:%s" : "https://%s:%s", host, port);
    out->ns = sp_xstrdup(ns && *ns ? ns : "default");
    out->token_file = steal_pointer(&token);
    out->ca_file = steal_pointer(&ca);
    return 0;
}

int sp_kube_creds_explicit(sp_kube_creds *out, const char *server, const char *token_file,
                           const char *ca_file, const char *ns, sp_error **err)
{
    memset(out, 0, sizeof(*out));
    if (!server_ok(server))
        return sp_err_set(err, SP_EINVAL, 0,
                          "kubernetes: the server must be an http(s):// URL: %.200s",
                          server ? server : "(none)");
    if (token_file && access(token_file, R_OK) < 0)
        return sp_err_errno(err, errno, "kubernetes: token file", token_file);
    if (ca_file && access(ca_file, R_OK) < 0)
        return sp_err_errno(err, errno, "kubernetes: CA file", ca_file);
    set_server(out, server);
    out->ns = sp_xstrdup(ns && *ns ? ns : "default");
    out->token_file = token_file ? sp_xstrdup(token_file) : NULL;
    out->ca_file = ca_file ? sp_xstrdup(ca_file) : NULL;
    return 0;
}

/* ------------------------------------------------------------ base64 -- */

static int b64_val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Standard base64 (whitespace skipped, padding optional) into out. */
static bool b64_decode(sp_buf *out, const char *s)
{
    uint32_t acc = 0;
    int bits = 0;
    bool pad = false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (strchr(" \t\r\n", *p))
            continue;
        if (*p == '=') {
            pad = true;
            continue;
        }
        int v = b64_val(*p);
        if (v < 0 || pad)
            return false;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            sp_buf_addc(out, (char)((acc >> bits) & 0xff));
        }
    }
    return bits < 6;
}

/* -------------------------------------------------------- kubeconfig -- */

/* The entry of array `list` whose "name" is name, its member `inner`. */
static const cJSON *named(const cJSON *root, const char *list, const char *name, const char *inner)
{
    const cJSON *a = sp_json_get(root, list);
    const cJSON *e;
    if (!cJSON_IsArray(a))
        return NULL;
    cJSON_ArrayForEach(e, a)
    {
        const char *n = sp_json_str(e, "name");
        if (name ? n && strcmp(n, name) == 0 : cJSON_GetArraySize(a) == 1)
            return cJSON_IsObject(sp_json_get(e, inner)) ? sp_json_get(e, inner) : NULL;
    }
    return NULL;
}

static int decode_field(sp_buf *out, const cJSON *o, const char *key, sp_error **err)
{
    const char *v = sp_json_str(o, key);
    if (!v)
        return 0;
    if (!b64_decode(out, v) || out->len == 0)
        return sp_err_set(err, SP_EINVAL, 0, "kubeconfig: %s is not base64", key);
    return 0;
}

int sp_kube_creds_parse_kubeconfig(sp_kube_creds *out, const char *json, size_t len, sp_error **err)
{
    memset(out, 0, sizeof(*out));
    cJSON *root = sp_json_parse(json, len);
    int rc = 0;
    if (!cJSON_IsObject(root)) {
        rc = sp_err_set(err, SP_EINVAL, 0, "kubeconfig: kubectl's answer is not a JSON object");
        goto done;
    }
    const char *cur = sp_json_str(root, "current-context");
    if (cur && !*cur)
        cur = NULL;
    const cJSON *ctx = named(root, "contexts", cur, "context");
    if (!ctx) {
        rc = sp_err_set(err, SP_ENOTFOUND, 0,
                        "kubeconfig: no current context (set one, or give a context)");
        goto done;
    }
    const cJSON *cluster = named(root, "clusters", sp_json_str(ctx, "cluster"), "cluster");
    const cJSON *user = named(root, "users", sp_json_str(ctx, "user"), "user");
    if (!cluster) {
        rc = sp_err_set(err, SP_EINVAL, 0, "kubeconfig: the context names no known cluster");
        goto done;
    }
    const char *server = sp_json_str(cluster, "server");
    if (!server_ok(server)) {
        rc = sp_err_set(err, SP_EINVAL, 0, "kubeconfig: the cluster has no http(s) server");
        goto done;
    }
    set_server(out, server);
    const char *ns = sp_json_str(ctx, "namespace");
    out->ns = sp_xstrdup(ns && *ns ? ns : "default");
    out->insecure = sp_json_bool(cluster, "insecure-skip-tls-verify", false);
    if ((rc = decode_field(&out->ca_pem, cluster, "certificate-authority-data", err)) < 0)
        goto done;
    const char *caf = sp_json_str(cluster, "certificate-authority");
    if (caf && *caf && !out->ca_pem.len)
        out->ca_file = sp_xstrdup(caf);
    if (user) {
        const char *uname = sp_json_str_or(ctx, "user", "?");
        const char *unsupported = sp_json_get(user, "exec")            ? "an exec credential plugin"
                                  : sp_json_get(user, "auth-provider") ? "an auth provider"
                                  : sp_json_get(user, "username")      ? "basic auth"
                                                                       : NULL;
        if (unsupported) {
            rc = sp_err_set(err, SP_EINVAL, 0, "kubeconfig: user %.100s uses %s, not supported yet",
                            uname, unsupported);
            goto done;
        }
        const char *tok = sp_json_str(user, "token");
        if (tok && *tok)
            out->token = sp_xstrdup(tok);
        const char *tf = sp_json_str(user, "tokenFile");
        if (tf && *tf && !out->token)
            out->token_file = sp_xstrdup(tf);
        if ((rc = decode_field(&out->cert_pem, user, "client-certificate-data", err)) < 0 ||
            (rc = decode_field(&out->key_pem, user, "client-key-data", err)) < 0)
            goto done;
        if (!out->cert_pem.len != !out->key_pem.len) {
            rc = sp_err_set(err, SP_EINVAL, 0,
                            "kubeconfig: user %.100s has a client certificate without its key, "
                            "or a key without its certificate",
                            uname);
            goto done;
        }
    }
done:
    cJSON_Delete(root);
    if (rc < 0)
        sp_kube_creds_dispose(out);
    return rc;
}

/* Run argv with stdout and stderr collected (bounded, with a deadline). */
static int run_capture(char *const argv[], sp_buf *out, sp_buf *errb, int *status, sp_error **err)
{
    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
        int e = errno;
        for (int i = 0; i < 2; i++) {
            if (po[i] >= 0)
                close(po[i]);
            if (pe[i] >= 0)
                close(pe[i]);
        }
        return sp_err_errno(err, e, "kubernetes", "pipe");
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    pid_t pid;
    int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(po[1]);
    close(pe[1]);
    if (e != 0) {
        close(po[0]);
        close(pe[0]);
        if (e == ENOENT)
            return sp_err_set(err, SP_ENOTFOUND, e,
                              "kubernetes: %s not found (install kubectl, or give the server, "
                              "token file and CA explicitly)",
                              argv[0]);
        return sp_err_errno(err, e, "kubernetes: running", argv[0]);
    }
    int64_t deadline = sp_now_ms() + KUBECTL_TIMEOUT_MS;
    struct pollfd p[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    int open_fds = 2, rc = 0;
    while (open_fds > 0) {
        int64_t left = deadline - sp_now_ms();
        if (left <= 0) {
            rc = sp_err_set(err, SP_ETIMEOUT, 0, "kubernetes: %s did not finish within %d ms",
                            argv[0], KUBECTL_TIMEOUT_MS);
            kill(pid, SIGKILL);
            break;
        }
        if (poll(p, 2, (int)left) < 0) {
            if (errno == EINTR)
                continue;
            rc = sp_err_errno(err, errno, "kubernetes", "poll");
            kill(pid, SIGKILL);
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !p[i].revents)
                continue;
            char buf[8192];
            ssize_t n = read(p[i].fd, buf, sizeof(buf));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                close(p[i].fd);
                p[i].fd = -1;
                open_fds--;
                continue;
            }
            sp_buf *b = i == 0 ? out : errb;
            if (b->len + (size_t)n <= MAX_KUBECONFIG)
                sp_buf_add(b, buf, (size_t)n);
        }
    }
    for (int i = 0; i < 2; i++) {
        if (p[i].fd >= 0)
            close(p[i].fd);
    }
    while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
    }
    return rc;
}

int sp_kube_creds_kubeconfig(sp_kube_creds *out, const char *kubectl, const char *kubeconfig,
                             const char *context, sp_error **err)
{
    memset(out, 0, sizeof(*out));
    const char *argv[16];
    size_t n = 0;
    argv[n++] = kubectl && *kubectl ? kubectl : "kubectl";
    const char *fixed[] = {"config", "view", "--raw", "--minify", "--flatten", "-o", "json"};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        argv[n++] = fixed[i];
    if (context && *context) {
        argv[n++] = "--context";
        argv[n++] = context;
    }
    if (kubeconfig && *kubeconfig) {
        argv[n++] = "--kubeconfig";
        argv[n++] = kubeconfig;
    }
    argv[n] = NULL;
    sp_buf o = SP_BUF_INIT, e = SP_BUF_INIT;
    int status = 0;
    int rc = run_capture((char *const *)argv, &o, &e, &status, err);
    if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        /* kubectl's first line says what is wrong ("context was not
         * found"); it never holds the secrets of a config it could not
         * use. */
        size_t l = e.data ? strcspn(e.data, "\n") : 0;
        if (l > 300)
            l = 300;
        rc = sp_err_set(err, SP_EINVAL, 0, "kubeconfig: kubectl config view failed: %.*s", (int)l,
                        l ? e.data : "no message");
    } else if (rc == 0) {
        rc = sp_kube_creds_parse_kubeconfig(out, o.data ? o.data : "", o.len, err);
    }
    if (o.data)
        explicit_bzero(o.data, o.len);
    sp_buf_dispose(&o);
    sp_buf_dispose(&e);
    return rc;
}
