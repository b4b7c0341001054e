/* Kubernetes credentials: in-cluster service-account files, a kubeconfig
 * read through kubectl (its JSON, so no YAML parser here), explicit
 * values, and exec credential plugins (run here, cached by the client).
 * Secrets are copied into owned buffers and never formatted into a
 * message. */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "kube.h"
#include "sha1.h"

extern char **environ;

#define KUBECTL_TIMEOUT_MS 15000
#define MAX_KUBECONFIG     (4u << 20)
#define EXEC_API_V1        "client.authentication.k8s.io/v1"
#define EXEC_API_V1BETA1   "client.authentication.k8s.io/v1beta1"

static void wipe_free(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

static void wipe_buf(sp_buf *b)
{
    if (b->data)
        explicit_bzero(b->data, b->len);
    sp_buf_dispose(b);
}

static void plugin_free(sp_kube_plugin *p)
{
    if (!p)
        return;
    free(p->api_version);
    sp_strv_free(p->argv);
    if (p->env) {
        for (char **e = p->env; *e; e++)
            explicit_bzero(*e, strlen(*e));
    }
    sp_strv_free(p->env);
    free(p->install_hint);
    free(p);
}

void sp_kube_plugin_cred_dispose(sp_kube_plugin_cred *c)
{
    wipe_free(c->token);
    sp_buf_dispose(&c->cert_pem);
    wipe_buf(&c->key_pem);
    memset(c, 0, sizeof(*c));
}

void sp_kube_creds_dispose(sp_kube_creds *c)
{
    free(c->server);
    free(c->ns);
    wipe_free(c->token);
    free(c->token_file);
    free(c->ca_file);
    sp_buf_dispose(&c->ca_pem);
    sp_buf_dispose(&c->cert_pem);
    wipe_buf(&c->key_pem);
    plugin_free(c->plugin);
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

/* A string array member (absent or null: none) pushed onto v. */
static bool push_strings(sp_strv *v, const cJSON *o, const char *key)
{
    const cJSON *a = sp_json_get(o, key), *e;
    if (!a || cJSON_IsNull(a))
        return true;
    if (!cJSON_IsArray(a))
        return false;
    cJSON_ArrayForEach(e, a)
    {
        if (!cJSON_IsString(e))
            return false;
        sp_strv_push(v, sp_xstrdup(e->valuestring));
    }
    return true;
}

/* users[].user.exec (client-go's ExecConfig). */
static int parse_plugin(sp_kube_plugin **out, const cJSON *ex, const char *uname, sp_error **err)
{
    const char *api = sp_json_str(ex, "apiVersion");
    const char *cmd = sp_json_str(ex, "command");
    const char *mode = sp_json_str(ex, "interactiveMode");
    if (!cJSON_IsObject(ex) || !cmd || !*cmd)
        return sp_err_set(err, SP_EINVAL, 0, "kubeconfig: user %.100s's exec plugin has no command",
                          uname);
    if (!api || (strcmp(api, EXEC_API_V1) != 0 && strcmp(api, EXEC_API_V1BETA1) != 0))
        return sp_err_set(err, SP_EINVAL, 0,
                          "kubeconfig: user %.100s's exec plugin speaks apiVersion %.100s; "
                          "sandpod speaks " EXEC_API_V1 " and " EXEC_API_V1BETA1,
                          uname, api ? api : "(none)");
    if (mode && strcmp(mode, "Always") == 0)
        return sp_err_set(err, SP_EINVAL, 0,
                          "kubeconfig: user %.100s's exec plugin needs a terminal "
                          "(interactiveMode Always); sandpod runs it without one",
                          uname);
    if (mode && strcmp(mode, "Never") != 0 && strcmp(mode, "IfAvailable") != 0)
        return sp_err_set(err, SP_EINVAL, 0,
                          "kubeconfig: user %.100s's exec plugin has interactiveMode %.50s", uname,
                          mode);
    sp_strv argv = {0}, env = {0};
    sp_strv_push(&argv, sp_xstrdup(cmd));
    bool ok = push_strings(&argv, ex, "args");
    const cJSON *ea = sp_json_get(ex, "env"), *e;
    if (ok && ea && !cJSON_IsNull(ea)) {
        ok = cJSON_IsArray(ea);
        cJSON_ArrayForEach(e, (ok ? ea : NULL))
        {
            const char *n = sp_json_str(e, "name"), *v = sp_json_str(e, "value");
            if (!n || !*n || strchr(n, '=') || !v) {
                ok = false;
                break;
            }
            sp_strv_push(&env, sp_xasprintf("%s=%s", n, v));
        }
    }
    if (!ok) {
        sp_strv_dispose(&argv);
        sp_strv_dispose(&env);
        return sp_err_set(err, SP_EINVAL, 0,
                          "kubeconfig: user %.100s's exec plugin has args or env of the wrong "
                          "shape (a list of strings; a list of {name, value})",
                          uname);
    }
    sp_kube_plugin *p = sp_xcalloc(1, sizeof(*p));
    p->api_version = sp_xstrdup(api);
    p->argv = sp_strv_steal(&argv);
    p->env = sp_strv_steal(&env);
    const char *hint = sp_json_str(ex, "installHint");
    if (hint && *hint) {
        /* One line for the error it goes into. */
        p->install_hint = sp_xstrndup(hint, sp_utf8_cut(hint, strlen(hint), 500));
        for (char *c = p->install_hint; *c; c++)
            if ((unsigned char)*c < 0x20)
                *c = ' ';
    }
    p->cluster_info = sp_json_bool(ex, "provideClusterInfo", false);
    *out = p;
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
        const char *unsupported = sp_json_get(user, "auth-provider") ? "an auth provider"
                                  : sp_json_get(user, "username")    ? "basic auth"
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
        const cJSON *ex = sp_json_get(user, "exec");
        if (ex && !cJSON_IsNull(ex) && (rc = parse_plugin(&out->plugin, ex, uname, err)) < 0)
            goto done;
    }
done:
    cJSON_Delete(root);
    if (rc < 0)
        sp_kube_creds_dispose(out);
    return rc;
}

/* How run_capture runs a program. */
typedef struct run_spec {
    char *const *argv;
    char *const *envp; /* NULL: ours */
    int timeout_ms;
    sp_buf *errb;     /* stderr collected here; NULL: to ours or /dev/null */
    bool show_stderr; /* with errb NULL: stderr is ours */
} run_spec;

/* Run argv with stdout collected (bounded, with a deadline), stdin
 * /dev/null. A program that is not there is SP_ENOTFOUND with *err left
 * unset: the caller words it. */
static int run_capture(const run_spec *rs, sp_buf *out, int *status, sp_error **err)
{
    char *const *argv = rs->argv;
    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    if (pipe2(po, O_CLOEXEC) < 0 || (rs->errb && pipe2(pe, O_CLOEXEC) < 0)) {
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
    if (rs->errb)
        posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    else if (!rs->show_stderr)
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    char *prog = sp_find_in_path(argv[0]);
    int e = prog ? posix_spawn(&pid, prog, &fa, NULL, argv, rs->envp ? rs->envp : environ) : ENOENT;
    free(prog);
    posix_spawn_file_actions_destroy(&fa);
    close(po[1]);
    if (pe[1] >= 0)
        close(pe[1]);
    if (e != 0) {
        close(po[0]);
        if (pe[0] >= 0)
            close(pe[0]);
        if (e == ENOENT)
            return SP_ENOTFOUND;
        return sp_err_errno(err, e, "kubernetes: running", argv[0]);
    }
    int64_t deadline = sp_now_ms() + rs->timeout_ms;
    struct pollfd p[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    int open_fds = pe[0] >= 0 ? 2 : 1, rc = 0;
    while (open_fds > 0) {
        int64_t left = deadline - sp_now_ms();
        if (left <= 0) {
            rc = sp_err_set(err, SP_ETIMEOUT, ETIMEDOUT,
                            "kubernetes: %s did not finish within %d ms", argv[0], rs->timeout_ms);
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
            sp_buf *b = i == 0 ? out : rs->errb;
            if (b->len + (size_t)n <= MAX_KUBECONFIG)
                sp_buf_add(b, buf, (size_t)n);
            explicit_bzero(buf, (size_t)n);
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
    run_spec rs = {(char *const *)argv, NULL, KUBECTL_TIMEOUT_MS, &e, false};
    int rc = run_capture(&rs, &o, &status, err);
    if (rc == SP_ENOTFOUND)
        rc = sp_err_set(err, SP_ENOTFOUND, ENOENT,
                        "kubernetes: %s not found (install kubectl, or give the server, "
                        "token file and CA explicitly)",
                        argv[0]);
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

/* ------------------------------------------------- exec credential plugins -- */

/* An RFC 3339 time (what Go's metav1.Time writes): ms since the epoch. */
static bool parse_time(const char *s, int64_t *ms)
{
    struct tm tm = {0};
    int n = 0;
    char t = 0;
    if (sscanf(s, "%4d-%2d-%2d%c%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &t,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 7 ||
        n != 19 || (t != 'T' && t != 't'))
        return false;
    const char *p = s + n;
    int64_t frac = 0, scale = 1000;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9'))
            return false;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (scale > 1) {
                scale /= 10;
                frac += (*p - '0') * scale;
            }
        }
    }
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh = 0, om = 0, k = 0;
        if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &k) != 2 || k != 5)
            return false;
        off = (int64_t)(oh * 60 + om) * 60 * (*p == '+' ? 1 : -1);
        p += 6;
    } else {
        return false;
    }
    if (*p || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
        tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
        return false;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t secs = timegm(&tm);
    if (secs == (time_t)-1)
        return false;
    *ms = ((int64_t)secs - off) * 1000 + frac;
    return true;
}

static bool printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return false;
    return true;
}

int sp_kube_plugin_parse(sp_kube_plugin_cred *out, const char *api_version, const char *json,
                         size_t len, sp_error **err)
{
    memset(out, 0, sizeof(*out));
    cJSON *j = sp_json_parse(json, len);
    const char *kind = sp_json_str(j, "kind");
    const char *api = sp_json_str(j, "apiVersion");
    const cJSON *st = sp_json_get(j, "status");
    const char *token = sp_json_str(st, "token");
    const char *cert = sp_json_str(st, "clientCertificateData");
    const char *key = sp_json_str(st, "clientKeyData");
    const char *exp = sp_json_str(st, "expirationTimestamp");
    if (token && !*token)
        token = NULL;
    int rc = 0;
    if (!cJSON_IsObject(j) || !kind || strcmp(kind, "ExecCredential") != 0 || !cJSON_IsObject(st))
        rc = sp_err_set(err, SP_EINVAL, 0,
                        "kubernetes: the exec credential plugin printed no ExecCredential with a "
                        "status");
    else if (!api || strcmp(api, api_version) != 0)
        rc = sp_err_set(err, SP_EINVAL, 0,
                        "kubernetes: the exec credential plugin answered apiVersion %.100s; its "
                        "kubeconfig asks for %.100s",
                        api && printable(api) ? api : "(none)", api_version);
    else if (!cert != !key || (cert && (!*cert || !*key)))
        rc = sp_err_set(err, SP_EINVAL, 0,
                        "kubernetes: the exec credential plugin returned a client certificate "
                        "without its key, or a key without its certificate");
    else if (!token && !cert)
        rc = sp_err_set(err, SP_EINVAL, 0,
                        "kubernetes: the exec credential plugin returned neither a token nor a "
                        "client certificate");
    else if (token && !printable(token))
        rc = sp_err_set(err, SP_EINVAL, 0,
                        "kubernetes: the exec credential plugin returned a token with control "
                        "characters");
    else if (exp && *exp && !parse_time(exp, &out->expires_ms))
        rc = sp_err_set(err, SP_EINVAL, 0,
                        "kubernetes: the exec credential plugin's expirationTimestamp is not an "
                        "RFC 3339 time");
    if (rc == 0) {
        out->token = token ? sp_xstrdup(token) : NULL;
        if (cert) {
            sp_buf_adds(&out->cert_pem, cert);
            sp_buf_adds(&out->key_pem, key);
        }
    } else {
        out->expires_ms = 0;
    }
    if (j) {
        /* The parsed tree held the secrets too. */
        cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "status"), *e;
        cJSON_ArrayForEach(e, (cJSON_IsObject(s) ? s : NULL))
        {
            if (cJSON_IsString(e))
                explicit_bzero(e->valuestring, strlen(e->valuestring));
        }
    }
    cJSON_Delete(j);
    return rc;
}

/* NAME=... entries with the same name. */
static bool same_name(const char *a, const char *b)
{
    size_t n = strcspn(a, "=");
    return strncmp(a, b, n) == 0 && b[n] == '=';
}

/* KUBERNETES_EXEC_INFO: what kubectl gives a plugin. */
static char *exec_info(const sp_kube_creds *c)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", "ExecCredential");
    cJSON_AddStringToObject(o, "apiVersion", c->plugin->api_version);
    cJSON *spec = cJSON_AddObjectToObject(o, "spec");
    cJSON_AddBoolToObject(spec, "interactive", false);
    if (c->plugin->cluster_info) {
        cJSON *cl = cJSON_AddObjectToObject(spec, "cluster");
        cJSON_AddStringToObject(cl, "server", c->server);
        if (c->ca_pem.len) {
            char *b = sp_xcalloc(1, 4 * ((c->ca_pem.len + 2) / 3) + 1);
            sp_base64_write(b, c->ca_pem.data, c->ca_pem.len);
            cJSON_AddStringToObject(cl, "certificate-authority-data", b);
            free(b);
        }
        if (c->insecure)
            cJSON_AddBoolToObject(cl, "insecure-skip-tls-verify", true);
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s)
        abort();
    char *r = sp_xasprintf("KUBERNETES_EXEC_INFO=%s", s);
    cJSON_free(s);
    return r;
}

int sp_kube_plugin_run(sp_kube_plugin_cred *out, const sp_kube_creds *c, int timeout_ms,
                       bool show_stderr, sp_error **err)
{
    memset(out, 0, sizeof(*out));
    const sp_kube_plugin *p = c->plugin;
    if (!p || !p->argv || !p->argv[0])
        return sp_err_set(err, SP_EINVAL, 0, "kubernetes: the credentials have no exec plugin");
    char *info = exec_info(c);
    sp_strv env = {0};
    for (char **e = environ; e && *e; e++) {
        bool replaced = same_name(*e, info);
        for (char **pe = p->env; !replaced && pe && *pe; pe++)
            replaced = same_name(*pe, *e);
        if (!replaced)
            sp_strv_push(&env, sp_xstrdup(*e));
    }
    for (char **pe = p->env; pe && *pe; pe++)
        sp_strv_push(&env, sp_xstrdup(*pe));
    sp_strv_push(&env, info);
    char **envp = sp_strv_steal(&env);
    run_spec rs = {p->argv, envp, timeout_ms > 0 ? timeout_ms : 60000, NULL, show_stderr};
    sp_buf o = SP_BUF_INIT;
    int status = 0;
    int rc = run_capture(&rs, &o, &status, err);
    const char *cmd = p->argv[0];
    if (rc == SP_ENOTFOUND)
        rc = sp_err_set(err, SP_ENOTFOUND, ENOENT,
                        "kubernetes: the exec credential plugin %.200s is not installed%s%s", cmd,
                        p->install_hint ? ": " : "", p->install_hint ? p->install_hint : "");
    else if (rc == 0 && WIFSIGNALED(status))
        rc = sp_err_set(err, SP_ERROR, 0,
                        "kubernetes: the exec credential plugin %.200s was killed by signal %d",
                        cmd, WTERMSIG(status));
    else if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        rc = sp_err_set(err, SP_ERROR, 0,
                        "kubernetes: the exec credential plugin %.200s exited with status %d%s",
                        cmd, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                        show_stderr ? "" : " (its messages show with debug logging)");
    else if (rc == 0)
        rc = sp_kube_plugin_parse(out, p->api_version, o.data ? o.data : "", o.len, err);
    wipe_buf(&o);
    for (char **e = envp; *e; e++)
        explicit_bzero(*e, strlen(*e));
    sp_strv_free(envp);
    return rc;
}
