/* The Kubernetes REST client (see kube.h): one libcurl easy handle per
 * client (connection reuse), TLS from the credentials, throttling honoured,
 * Status bodies turned into errors. */
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "kube.h"
#include "kube_exec.h"
#include "lazy_curl.h"

#define DEFAULT_TIMEOUT_MS      30000
#define DEFAULT_CONNECT_MS      5000
#define DEFAULT_RETRIES         5
#define DEFAULT_MAX_RETRY_MS    10000
#define MAX_BODY                (16u << 20)
#define RETRY_WITHOUT_HEADER_MS 1000
#define DEFAULT_PLUGIN_MS       60000

struct sp_kube {
    CURL *curl;
    sp_kube_creds c;
    sp_kube_opts o;
    /* The exec plugin's latest answer, used until it expires or a 401. */
    sp_kube_plugin_cred pc;
    bool have_pc;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

int sp_kube_open(sp_kube **out, sp_kube_creds *creds, const sp_kube_opts *opts, sp_error **err)
{
    *out = NULL;
    sp_kube_creds c = *creds;
    memset(creds, 0, sizeof(*creds));
    int rc = SP_OPTS_CHECK(opts, 1, SP_KUBE_OPTS_VERSION, "sp_kube_opts", err);
    if (rc == 0)
        rc = sp_curl_load(err);
    if (rc == 0 && !c.server)
        rc = sp_err_set(err, SP_EINVAL, 0, "kubernetes: no server in the credentials");
    CURL *h = rc == 0 ? curl_easy_init() : NULL;
    if (rc == 0 && !h)
        rc = sp_err_set(err, SP_ERROR, ENOMEM, "kubernetes: libcurl could not make a handle");
    if (rc < 0) {
        sp_kube_creds_dispose(&c);
        return rc;
    }
    pthread_once(&curl_once, curl_init_once);
    sp_kube *k = sp_xcalloc(1, sizeof(*k));
    k->curl = h;
    k->c = c;
    sp_kube_opts o = SP_KUBE_OPTS_INIT;
    if (opts)
        o = *opts;
    if (o.timeout_ms <= 0)
        o.timeout_ms = DEFAULT_TIMEOUT_MS;
    if (o.connect_timeout_ms <= 0)
        o.connect_timeout_ms = DEFAULT_CONNECT_MS;
    if (o.max_retries == 0)
        o.max_retries = DEFAULT_RETRIES;
    if (o.max_retries < 0)
        o.max_retries = 0;
    if (o.max_retry_after_ms <= 0)
        o.max_retry_after_ms = DEFAULT_MAX_RETRY_MS;
    if (o.plugin_timeout_ms <= 0)
        o.plugin_timeout_ms = DEFAULT_PLUGIN_MS;
    k->o = o;
    *out = k;
    return 0;
}

void sp_kube_free(sp_kube *k)
{
    if (!k)
        return;
    if (k->curl)
        curl_easy_cleanup(k->curl);
    sp_kube_creds_dispose(&k->c);
    sp_kube_plugin_cred_dispose(&k->pc);
    free(k);
}

const char *sp_kube_namespace(const sp_kube *k)
{
    return k->c.ns;
}

const char *sp_kube_server(const sp_kube *k)
{
    return k->c.server;
}

/* ------------------------------------------------------------ errors -- */

/* One printable line of at most max bytes. */
static void clean_line(char *dst, size_t cap, const char *s, size_t len)
{
    size_t n = sp_utf8_cut(s, len, cap - 1);
    for (size_t i = 0; i < n; i++)
        dst[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? ' ' : s[i];
    dst[n] = '\0';
}

int sp_kube_status_error(sp_error **err, long http_status, const char *body, size_t len,
                         const char *what)
{
    cJSON *j = body && len ? sp_json_parse(body, len) : NULL;
    const char *kind = j ? sp_json_str(j, "kind") : NULL;
    bool status = kind && strcmp(kind, "Status") == 0;
    const char *msg = status ? sp_json_str(j, "message") : NULL;
    const char *reason = status ? sp_json_str(j, "reason") : NULL;
    long code = status ? (long)sp_json_int(j, "code", http_status) : http_status;
    if (code < 100 || code > 599)
        code = http_status;
    int sp = SP_ERROR;
    switch (code) {
    case 400:
    case 422:
        sp = SP_EINVAL;
        break;
    case 401:
    case 403:
        sp = SP_EDENIED;
        break;
    case 404:
        sp = SP_ENOTFOUND;
        break;
    case 409:
        sp = SP_EEXISTS;
        break;
    case 429:
    case 504:
        sp = SP_ETIMEOUT;
        break;
    default:
        break;
    }
    char m[300], r[64];
    clean_line(m, sizeof(m), msg ? msg : "", msg ? strlen(msg) : 0);
    clean_line(r, sizeof(r), reason ? reason : "", reason ? strlen(reason) : 0);
    int rc;
    if (m[0])
        rc = sp_err_set(err, sp, 0, "%s: %s (%s, %ld)", what, m, r[0] ? r : "no reason", code);
    else if (body && len && !status) {
        clean_line(m, 200, body, len);
        rc = sp_err_set(err, sp, 0, "%s: the API server answered HTTP %ld: %s", what, code, m);
    } else
        rc = sp_err_set(err, sp, 0, "%s: the API server answered HTTP %ld%s%s", what, code,
                        r[0] ? " " : "", r);
    cJSON_Delete(j);
    return rc;
}

/* -------------------------------------------------------------- HTTP -- */

typedef struct xfer {
    sp_buf body;
    sp_buf line;
    long status;
    long retry_after_ms; /* -1: no header */
    CURL *curl;
    /* Streaming (watch): each line of a 2xx answer goes here. */
    int (*on_line)(const char *line, size_t len, void *ud, sp_error **err);
    /* Streaming (a log): the bytes of a 2xx answer as they come. */
    int (*on_data)(const char *data, size_t len, void *ud, sp_error **err);
    void *ud;
    int cb_code;
    sp_error *cb_err;
    bool too_big;
    /* > 0: the answer fails when nothing arrives for this long. */
    long stall_ms;
    int64_t last_data_ms;
    bool stalled;
} xfer;

/* libcurl calls this at least once a second, data or not. */
static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    xfer *x = ud;
    if (x->stall_ms > 0 && sp_now_ms() - x->last_data_ms > x->stall_ms) {
        x->stalled = true;
        return 1;
    }
    return 0;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ud)
{
    xfer *x = ud;
    size_t n = size * nmemb;
    x->last_data_ms = sp_now_ms();
    static const char name[] = "retry-after:";
    if (n > sizeof(name) && strncasecmp(data, name, sizeof(name) - 1) == 0) {
        const char *p = data + sizeof(name) - 1;
        const char *end = data + n;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        long v = 0;
        bool digits = false;
        while (p < end && *p >= '0' && *p <= '9' && v < 100000) {
            v = v * 10 + (*p++ - '0');
            digits = true;
        }
        /* An HTTP date instead of seconds: treat it as "soon". */
        x->retry_after_ms = digits ? v * 1000 : RETRY_WITHOUT_HEADER_MS;
    }
    return n;
}

static bool ok_status(xfer *x)
{
    if (!x->status)
        curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &x->status);
    return x->status >= 200 && x->status < 300;
}

/* Watch streams send empty lines as keep-alives: not events. */
static int line_cb(const char *line, size_t len, void *ud, sp_error **err)
{
    xfer *x = ud;
    return len ? x->on_line(line, len, x->ud, err) : 0;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *ud)
{
    xfer *x = ud;
    size_t n = size * nmemb;
    x->last_data_ms = sp_now_ms();
    if (x->on_data && ok_status(x)) {
        int r = x->on_data(data, n, x->ud, &x->cb_err);
        if (r != 0)
            x->cb_code = r;
        return r ? 0 : n;
    }
    if (x->on_line && ok_status(x)) {
        int r = sp_buf_lines(&x->line, data, n, MAX_BODY, line_cb, x, &x->cb_err);
        if (r == SP_ETOOBIG)
            x->too_big = true;
        else if (r != 0)
            x->cb_code = r;
        return r ? 0 : n;
    }
    if (x->body.len + n > MAX_BODY) {
        x->too_big = true;
        return 0;
    }
    sp_buf_add(&x->body, data, n);
    return n;
}

/* The path with query values elided: a selector may name things a log
 * should not hold. */
static void log_request(sp_kube *k, const char *method, const char *path, long status, int64_t sent,
                        int64_t got, int64_t ms)
{
    if (!k->o.log)
        return;
    char *line = sp_request_log_line("kubernetes", method, path, status, sent, got, ms);
    k->o.log(line, k->o.log_userdata);
    free(line);
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Run the exec plugin unless its last answer still holds. */
static int plugin_refresh(sp_kube *k, sp_error **err)
{
    if (!k->c.plugin || (k->have_pc && (k->pc.expires_ms == 0 || wall_ms() < k->pc.expires_ms)))
        return 0;
    sp_kube_plugin_cred_dispose(&k->pc);
    k->have_pc = false;
    int64_t t0 = sp_now_ms();
    int rc = sp_kube_plugin_run(&k->pc, &k->c, k->o.plugin_timeout_ms, k->o.log != NULL, err);
    if (k->o.log) {
        cleanup_free char *line = sp_xasprintf(
            "kubernetes: exec credential plugin %s: %s (%lld ms)", k->c.plugin->argv[0],
            rc == 0 ? "ok" : "failed", (long long)(sp_now_ms() - t0));
        k->o.log(line, k->o.log_userdata);
    }
    k->have_pc = rc == 0;
    return rc;
}

/* Whether a 401 is worth one more try: the credential can change. */
static bool may_reauth(sp_kube *k)
{
    if (k->c.token_file)
        return true;
    if (!k->c.plugin)
        return false;
    k->have_pc = false; /* the next request runs the plugin again */
    return true;
}

/* The bearer token for this request (*out NULL: none): the file's
 * current contents when there is one (rotation), else the fixed token,
 * else the exec plugin's. */
static int current_token(sp_kube *k, char **out, sp_error **err)
{
    *out = NULL;
    int rc = plugin_refresh(k, err);
    if (rc < 0)
        return rc;
    if (!k->c.token_file) {
        const char *t = k->c.token ? k->c.token : k->have_pc ? k->pc.token : NULL;
        *out = t ? sp_xstrdup(t) : NULL;
        return 0;
    }
    int fd = open(k->c.token_file, O_RDONLY | O_CLOEXEC);
    sp_buf b = SP_BUF_INIT;
    if (fd < 0 || sp_read_all(fd, &b, 64u << 10) < 0) {
        rc = sp_err_errno(err, errno, "kubernetes: reading the token", k->c.token_file);
        if (fd >= 0)
            close(fd);
        sp_buf_dispose(&b);
        return rc;
    }
    close(fd);
    while (b.len && strchr(" \t\r\n", b.data[b.len - 1]))
        b.data[--b.len] = '\0';
    /* A line break would end the Authorization header early. */
    for (size_t i = 0; i < b.len; i++) {
        if ((unsigned char)b.data[i] < 0x20 || b.data[i] == 0x7f) {
            explicit_bzero(b.data, b.len);
            sp_buf_dispose(&b);
            return sp_err_set(err, SP_EINVAL, 0,
                              "kubernetes: the token file %s holds more than one line or control "
                              "characters",
                              k->c.token_file);
        }
    }
    *out = b.data ? sp_buf_steal(&b) : sp_xstrdup("");
    return 0;
}

typedef struct req {
    const char *method;
    const char *path;
    const char *body;
    long timeout_ms; /* of this attempt */
    long stall_ms;   /* > 0: fail when nothing arrives for this long */
    int (*on_line)(const char *line, size_t len, void *ud, sp_error **err);
    void *ud;
} req;

static void set_tls(sp_kube *k, CURL *c)
{
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, k->c.insecure ? 0L : 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, k->c.insecure ? 0L : 2L);
    if (k->c.ca_pem.len) {
        struct curl_blob b = {k->c.ca_pem.data, k->c.ca_pem.len, CURL_BLOB_COPY};
        curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &b);
    } else if (k->c.ca_file) {
        curl_easy_setopt(c, CURLOPT_CAINFO, k->c.ca_file);
    }
    /* The plugin's certificate, else the kubeconfig's. */
    const sp_buf *cert = &k->c.cert_pem, *key = &k->c.key_pem;
    if (k->have_pc && k->pc.cert_pem.len) {
        cert = &k->pc.cert_pem;
        key = &k->pc.key_pem;
    }
    if (cert->len && key->len) {
        struct curl_blob cb = {cert->data, cert->len, CURL_BLOB_COPY};
        struct curl_blob kb = {key->data, key->len, CURL_BLOB_COPY};
        curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cb);
        curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
        curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &kb);
        curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
    }
}

/* One attempt. 0 with x->status set (any status), or a transport error. */
static int attempt(sp_kube *k, const req *r, xfer *x, const char *what, sp_error **err)
{
    CURL *c = k->curl;
    curl_easy_reset(c);
    x->curl = c;
    char ebuf[CURL_ERROR_SIZE] = "";
    int64_t t0 = sp_now_ms();
    cleanup_free char *url = sp_xasprintf("%s%s", k->c.server, r->path);
    cleanup_free char *token = NULL;
    int trc = current_token(k, &token, err);
    if (trc < 0)
        return trc;
    struct curl_slist *h = NULL;
    /* A log is text; its errors are still a Status (as kubectl asks). */
    h = curl_slist_append(h, x->on_data ? "Accept: application/json, */*"
                                        : "Accept: application/json");
    h = curl_slist_append(h, "Expect:");
    if (r->body)
        h = curl_slist_append(h, "Content-Type: application/json");
    char *auth = NULL;
    if (token && *token) {
        auth = sp_xasprintf("Authorization: Bearer %s", token);
        h = curl_slist_append(h, auth);
        explicit_bzero(auth, strlen(auth));
        explicit_bzero(token, strlen(token));
        free(auth);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)k->o.connect_timeout_ms);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, r->timeout_ms > 0 ? r->timeout_ms : 1L);
    x->stall_ms = r->stall_ms;
    x->last_data_ms = t0;
    x->stalled = false;
    if (r->stall_ms > 0) {
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, x);
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    }
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ebuf);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "sandpod/" SANDPOD_VERSION);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    set_tls(k, c);
    if (strcmp(r->method, "GET") == 0) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    } else if (r->body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(r->body));
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, r->body);
        if (strcmp(r->method, "POST") != 0)
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
    } else {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
    }
    CURLcode cc = curl_easy_perform(c);
    /* The header list held the token: wipe it before it is freed. */
    for (struct curl_slist *s = h; s; s = s->next)
        explicit_bzero(s->data, strlen(s->data));
    curl_slist_free_all(h);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &x->status);
    curl_off_t up = 0, down = 0;
    curl_easy_getinfo(c, CURLINFO_SIZE_UPLOAD_T, &up);
    curl_easy_getinfo(c, CURLINFO_SIZE_DOWNLOAD_T, &down);
    log_request(k, r->method, r->path, x->status, (int64_t)up, (int64_t)down, sp_now_ms() - t0);
    if (x->cb_code != 0)
        return 0; /* the caller looks at cb_code */
    if (x->too_big)
        return sp_err_set(err, SP_ETOOBIG, 0, "%s: the API server's answer exceeds %u bytes", what,
                          MAX_BODY);
    if (cc == CURLE_OK)
        return 0;
    const char *detail = ebuf[0] ? ebuf : curl_easy_strerror(cc);
    if (cc == CURLE_ABORTED_BY_CALLBACK && x->stalled)
        return sp_err_set(err, SP_ETIMEOUT, ETIMEDOUT, "%s: %s sent nothing for %ld ms", what,
                          k->c.server, x->stall_ms);
    if (cc == CURLE_OPERATION_TIMEDOUT)
        return sp_err_set(err, SP_ETIMEOUT, ETIMEDOUT, "%s: %s did not answer in time: %s", what,
                          k->c.server, detail);
    if (cc == CURLE_PEER_FAILED_VERIFICATION || cc == CURLE_SSL_CACERT_BADFILE ||
        cc == CURLE_SSL_CONNECT_ERROR || cc == CURLE_SSL_CERTPROBLEM)
        return sp_err_set(err, SP_EDENIED, 0, "%s: TLS with %s failed: %s", what, k->c.server,
                          detail);
    /* A stream the server ended (a watch) is not a transport error when
     * some answer came; the caller decides. */
    if ((x->on_line || x->on_data) && x->status >= 200 && x->status < 300 &&
        (cc == CURLE_PARTIAL_FILE || cc == CURLE_RECV_ERROR || cc == CURLE_GOT_NOTHING))
        return 0;
    return sp_err_set(err, SP_ERROR, 0, "%s: %s: %s", what, k->c.server, detail);
}

/* A request with the retries: 429/503 wait for Retry-After (bounded),
 * 401 once more with the token file re-read or the exec plugin rerun. On return x holds the last
 * answer; a >= 400 status is already turned into *err. */
static int perform(sp_kube *k, req *r, xfer *x, int timeout_ms, const char *what, sp_error **err)
{
    int64_t deadline = sp_now_ms() + (timeout_ms > 0 ? timeout_ms : k->o.timeout_ms);
    bool reauth = false;
    for (int tries = 0;; tries++) {
        sp_buf_dispose(&x->body);
        sp_buf_dispose(&x->line);
        x->status = 0;
        x->retry_after_ms = -1;
        int64_t left = deadline - sp_now_ms();
        if (left <= 0)
            return sp_err_set(err, SP_ETIMEOUT, ETIMEDOUT, "%s: no answer within the deadline",
                              what);
        r->timeout_ms = (long)left;
        int rc = attempt(k, r, x, what, err);
        if (rc < 0 || x->cb_code != 0)
            return rc;
        if (x->status == 401 && !reauth && may_reauth(k)) {
            reauth = true;
            continue;
        }
        if ((x->status == 429 || x->status == 503) && tries < k->o.max_retries) {
            long wait = x->retry_after_ms >= 0 ? x->retry_after_ms : RETRY_WITHOUT_HEADER_MS;
            if (wait > k->o.max_retry_after_ms)
                wait = k->o.max_retry_after_ms;
            if (sp_now_ms() + wait < deadline) {
                struct timespec ts = {wait / 1000, (wait % 1000) * 1000000L};
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
                }
                continue;
            }
        }
        if (x->status >= 400 || x->status < 100)
            return sp_kube_status_error(err, x->status, x->body.data, x->body.len, what);
        return 0;
    }
}

int sp_kube_call(sp_kube *k, const char *method, const char *path, const char *body, cJSON **out,
                 const char *what, sp_error **err)
{
    if (out)
        *out = NULL;
    req r = {.method = method, .path = path, .body = body};
    xfer x = {0};
    int rc = perform(k, &r, &x, 0, what, err);
    if (rc == 0 && out) {
        *out = x.body.len ? sp_json_parse(x.body.data, x.body.len) : NULL;
        if (!*out)
            rc = sp_err_set(err, SP_ERROR, 0, "%s: the API server sent no JSON (%zu bytes)", what,
                            x.body.len);
    }
    sp_buf_dispose(&x.body);
    sp_buf_dispose(&x.line);
    return rc;
}

/* -------------------------------------------------------------- Pods -- */

static char *esc(sp_kube *k, const char *s)
{
    char *e = curl_easy_escape(k->curl, s ? s : "", 0);
    if (!e)
        abort();
    char *r = sp_xstrdup(e);
    curl_free(e);
    return r;
}

static int check_name(const char *name, sp_error **err)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > 253 || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-.") != n)
        return sp_err_set(err, SP_EINVAL, 0, "kubernetes: not a valid Pod name: %.100s",
                          name ? name : "");
    return 0;
}

static char *pods_path(sp_kube *k)
{
    cleanup_free char *ns = esc(k, k->c.ns);
    return sp_xasprintf("/api/v1/namespaces/%s/pods", ns);
}

int sp_kube_pod_create(sp_kube *k, const char *pod_json, cJSON **out, sp_error **err)
{
    cleanup_free char *p = pods_path(k);
    cJSON *o = NULL;
    int rc = sp_kube_call(k, "POST", p, pod_json, &o, "kubernetes: create pod", err);
    if (out)
        *out = o;
    else
        cJSON_Delete(o);
    return rc;
}

int sp_kube_pod_get(sp_kube *k, const char *name, cJSON **out, sp_error **err)
{
    *out = NULL;
    int rc = check_name(name, err);
    if (rc < 0)
        return rc;
    cleanup_free char *base = pods_path(k);
    cleanup_free char *p = sp_xasprintf("%s/%s", base, name);
    cleanup_free char *what = sp_xasprintf("kubernetes: pod %s", name);
    return sp_kube_call(k, "GET", p, NULL, out, what, err);
}

int sp_kube_pod_log(sp_kube *k, const char *name, const sp_kube_log_query *q, sp_kube_data_fn fn,
                    void *userdata, sp_error **err)
{
    int rc = check_name(name, err);
    if (rc < 0)
        return rc;
    if (!q->container || check_name(q->container, err) < 0)
        return sp_err_set(err, SP_EINVAL, 0, "kubernetes: pod %s: no valid container name", name);
    cleanup_free char *base = pods_path(k);
    sp_buf p = {0};
    sp_buf_printf(&p, "%s/%s/log?container=%s", base, name, q->container);
    if (q->follow)
        sp_buf_printf(&p, "&follow=true");
    if (q->tail_lines >= 0)
        sp_buf_printf(&p, "&tailLines=%" PRId64, q->tail_lines);
    if (q->since_time) {
        cleanup_free char *t = esc(k, q->since_time);
        sp_buf_printf(&p, "&sinceTime=%s", t);
    }
    if (q->timestamps)
        sp_buf_printf(&p, "&timestamps=true");
    cleanup_free char *what = sp_xasprintf("kubernetes: log of pod %s", name);
    /* Followed, the log lasts as long as the container: no deadline. Not
     * followed, it lasts as long as it is long: no deadline either, but
     * a server that stops sending for the client's timeout has failed. */
    req r = {.method = "GET", .path = p.data, .stall_ms = q->follow ? 0 : k->o.timeout_ms};
    xfer x = {.on_data = fn, .ud = userdata};
    rc = perform(k, &r, &x, INT_MAX, what, err);
    if (rc == 0 && x.cb_code != 0) {
        rc = x.cb_code;
        if (err) {
            sp_error_free(*err);
            *err = x.cb_err;
            x.cb_err = NULL;
        }
    }
    sp_error_free(x.cb_err);
    sp_buf_dispose(&x.body);
    sp_buf_dispose(&x.line);
    sp_buf_dispose(&p);
    return rc;
}

int sp_kube_pod_delete(sp_kube *k, const char *name, int grace_seconds, sp_error **err)
{
    int rc = check_name(name, err);
    if (rc < 0)
        return rc;
    cleanup_free char *base = pods_path(k);
    cleanup_free char *p =
        grace_seconds >= 0 ? sp_xasprintf("%s/%s?gracePeriodSeconds=%d", base, name, grace_seconds)
                           : sp_xasprintf("%s/%s", base, name);
    cleanup_free char *what = sp_xasprintf("kubernetes: delete pod %s", name);
    return sp_kube_call(k, "DELETE", p, NULL, NULL, what, err);
}

static char *netpol_path(sp_kube *k, const char *name)
{
    cleanup_free char *ns = esc(k, k->c.ns);
    return sp_xasprintf("/apis/networking.k8s.io/v1/namespaces/%s/networkpolicies%s%s", ns,
                        name ? "/" : "", name ? name : "");
}

int sp_kube_netpol_create(sp_kube *k, const char *json, sp_error **err)
{
    cleanup_free char *p = netpol_path(k, NULL);
    return sp_kube_call(k, "POST", p, json, NULL, "kubernetes: create networkpolicy", err);
}

int sp_kube_netpol_delete(sp_kube *k, const char *name, sp_error **err)
{
    int rc = check_name(name, err);
    if (rc < 0)
        return rc;
    cleanup_free char *p = netpol_path(k, name);
    cleanup_free char *what = sp_xasprintf("kubernetes: delete networkpolicy %s", name);
    return sp_kube_call(k, "DELETE", p, NULL, NULL, what, err);
}

int sp_kube_pod_list(sp_kube *k, const char *label_selector, cJSON **out, sp_error **err)
{
    cleanup_free char *base = pods_path(k);
    cleanup_free char *sel = label_selector ? esc(k, label_selector) : NULL;
    cleanup_free char *p = sel ? sp_xasprintf("%s?labelSelector=%s", base, sel) : sp_xstrdup(base);
    int rc = sp_kube_call(k, "GET", p, NULL, out, "kubernetes: list pods", err);
    if (rc == 0 && !cJSON_IsArray(sp_json_get(*out, "items"))) {
        cJSON_Delete(*out);
        *out = NULL;
        rc = sp_err_set(err, SP_ERROR, 0, "kubernetes: list pods: the answer has no items");
    }
    return rc;
}

/* ------------------------------------------------------------- state -- */

static void copy_line(char *dst, size_t cap, const char *s)
{
    clean_line(dst, cap, s ? s : "", s ? strlen(s) : 0);
}

static bool is_failure_reason(const char *r)
{
    static const char *const bad[] = {
        "ErrImagePull",         "ImagePullBackOff",  "InvalidImageName",
        "ErrImageNeverPull",    "CrashLoopBackOff",  "CreateContainerConfigError",
        "CreateContainerError", "RunContainerError", NULL};
    for (size_t i = 0; r && bad[i]; i++) {
        if (strcmp(r, bad[i]) == 0)
            return true;
    }
    return false;
}

/* The first container (init containers first) waiting for a failure
 * reason, or terminated with one while the Pod failed. */
static void container_reason(sp_kube_pod_state *s, const cJSON *status)
{
    static const char *const lists[] = {"initContainerStatuses", "containerStatuses"};
    for (size_t l = 0; l < 2; l++) {
        const cJSON *a = sp_json_get(status, lists[l]);
        const cJSON *c;
        if (!cJSON_IsArray(a))
            continue;
        cJSON_ArrayForEach(c, a)
        {
            const cJSON *w = sp_json_get(sp_json_get(c, "state"), "waiting");
            const char *r = sp_json_str(w, "reason");
            if (is_failure_reason(r)) {
                copy_line(s->reason, sizeof(s->reason), r);
                copy_line(s->message, sizeof(s->message), sp_json_str(w, "message"));
                return;
            }
        }
    }
}

int sp_kube_pod_state_of(sp_kube_pod_state *out, const cJSON *pod, sp_error **err)
{
    memset(out, 0, sizeof(*out));
    const cJSON *meta = sp_json_get(pod, "metadata");
    if (!cJSON_IsObject(pod) || !cJSON_IsObject(meta))
        return sp_err_set(err, SP_ERROR, 0, "kubernetes: not a Pod object");
    copy_line(out->resource_version, sizeof(out->resource_version),
              sp_json_str(meta, "resourceVersion"));
    out->deleting = sp_json_str(meta, "deletionTimestamp") != NULL;
    const cJSON *st = sp_json_get(pod, "status");
    const char *phase = sp_json_str(st, "phase");
    static const char *const names[] = {"Pending", "Running", "Succeeded", "Failed"};
    for (int i = 0; phase && i < 4; i++) {
        if (strcmp(phase, names[i]) == 0)
            out->phase = (sp_kube_pod_phase)(i + 1);
    }
    const cJSON *conds = sp_json_get(st, "conditions");
    const cJSON *c;
    if (cJSON_IsArray(conds)) {
        cJSON_ArrayForEach(c, conds)
        {
            const char *t = sp_json_str(c, "type");
            const char *v = sp_json_str(c, "status");
            if (!t || !v)
                continue;
            if (strcmp(t, "Ready") == 0)
                out->ready = strcmp(v, "True") == 0;
            const char *r = sp_json_str(c, "reason");
            if (strcmp(t, "PodScheduled") == 0 && strcmp(v, "False") == 0 && r &&
                strcmp(r, "Unschedulable") == 0 && !out->reason[0]) {
                copy_line(out->reason, sizeof(out->reason), r);
                copy_line(out->message, sizeof(out->message), sp_json_str(c, "message"));
            }
        }
    }
    if (!out->reason[0])
        container_reason(out, st);
    if (!out->reason[0] && out->phase == SP_KUBE_POD_FAILED) {
        copy_line(out->reason, sizeof(out->reason), sp_json_str_or(st, "reason", "Failed"));
        copy_line(out->message, sizeof(out->message), sp_json_str(st, "message"));
    }
    return 0;
}

/* ------------------------------------------------------------ events -- */

char *sp_kube_events_pick(const cJSON *list)
{
    const cJSON *items = sp_json_get(list, "items");
    const cJSON *e, *best = NULL;
    bool best_warn = false;
    const char *best_ts = "";
    if (!cJSON_IsArray(items))
        return NULL;
    cJSON_ArrayForEach(e, items)
    {
        const char *reason = sp_json_str(e, "reason");
        const char *msg = sp_json_str(e, "message");
        if (!reason && !msg)
            continue;
        bool warn = strcmp(sp_json_str_or(e, "type", ""), "Warning") == 0;
        /* RFC 3339 in UTC sorts as text. */
        const char *ts = sp_json_str(e, "lastTimestamp");
        if (!ts)
            ts = sp_json_str_or(e, "eventTime", "");
        if (!best || (warn && !best_warn) || (warn == best_warn && strcmp(ts, best_ts) >= 0)) {
            best = e;
            best_warn = warn;
            best_ts = ts;
        }
    }
    if (!best)
        return NULL;
    char r[64], m[300];
    copy_line(r, sizeof(r), sp_json_str(best, "reason"));
    copy_line(m, sizeof(m), sp_json_str(best, "message"));
    if (!r[0])
        return sp_xstrdup(m);
    return m[0] ? sp_xasprintf("%s: %s", r, m) : sp_xstrdup(r);
}

int sp_kube_pod_events_line(sp_kube *k, const char *name, char **out, sp_error **err)
{
    *out = NULL;
    int rc = check_name(name, err);
    if (rc < 0)
        return rc;
    cleanup_free char *ns = esc(k, k->c.ns);
    cleanup_free char *sel = sp_xasprintf("involvedObject.name=%s", name);
    cleanup_free char *q = esc(k, sel);
    cleanup_free char *p = sp_xasprintf("/api/v1/namespaces/%s/events?fieldSelector=%s", ns, q);
    cJSON *list = NULL;
    rc = sp_kube_call(k, "GET", p, NULL, &list, "kubernetes: events", err);
    if (rc == 0)
        *out = sp_kube_events_pick(list);
    cJSON_Delete(list);
    return rc;
}

/* ------------------------------------------------------------- watch -- */

int sp_kube_watch_event_parse(sp_kube_event_type *type, const cJSON **object, const cJSON *ev,
                              sp_error **err)
{
    static const char *const names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};
    const char *t = sp_json_str(ev, "type");
    const cJSON *o = sp_json_get(ev, "object");
    if (!t || !cJSON_IsObject(o))
        return sp_err_set(err, SP_ERROR, 0, "kubernetes: a watch event without type or object");
    for (int i = 0; i < 5; i++) {
        if (strcmp(t, names[i]) == 0) {
            *type = (sp_kube_event_type)i;
            *object = o;
            return 0;
        }
    }
    return sp_err_set(err, SP_ERROR, 0, "kubernetes: a watch event of unknown type");
}

typedef struct watch {
    sp_kube_watch_fn fn;
    void *ud;
    char rv[64];
    bool gone; /* 410: relist */
    bool stopped;
    const char *name;
} watch;

#define WATCH_RELIST 2

static int on_event(const char *line, size_t len, void *ud, sp_error **err)
{
    watch *w = ud;
    cJSON *ev = sp_json_parse(line, len);
    sp_kube_event_type t;
    const cJSON *o;
    int rc = sp_kube_watch_event_parse(&t, &o, ev, err);
    if (rc < 0)
        goto done;
    if (t == SP_KUBE_ERROR) {
        long code = (long)sp_json_int(o, "code", 0);
        if (code == 410) {
            w->gone = true;
            rc = WATCH_RELIST;
        } else {
            char *txt = cJSON_PrintUnformatted(o);
            rc = sp_kube_status_error(err, code ? code : 500, txt, txt ? strlen(txt) : 0,
                                      "kubernetes: watch");
            free(txt);
        }
        goto done;
    }
    const char *rv = sp_json_str(sp_json_get(o, "metadata"), "resourceVersion");
    if (rv)
        copy_line(w->rv, sizeof(w->rv), rv);
    if (t == SP_KUBE_BOOKMARK)
        goto done;
    const char *n = sp_json_str(sp_json_get(o, "metadata"), "name");
    if (!n || strcmp(n, w->name) != 0)
        goto done;
    rc = w->fn(t, o, w->ud, err);
    if (rc > 0)
        w->stopped = true;
done:
    cJSON_Delete(ev);
    return rc;
}

/* List the Pod (by name) for its current state and the list's RV. */
static int relist(sp_kube *k, watch *w, const char *base, int timeout_ms, sp_error **err)
{
    cleanup_free char *sel = sp_xasprintf("metadata.name=%s", w->name);
    cleanup_free char *q = esc(k, sel);
    cleanup_free char *p = sp_xasprintf("%s?fieldSelector=%s", base, q);
    req r = {.method = "GET", .path = p};
    xfer x = {0};
    cJSON *list = NULL;
    int rc = perform(k, &r, &x, timeout_ms, "kubernetes: list pod", err);
    if (rc == 0 && !(list = sp_json_parse(x.body.data ? x.body.data : "", x.body.len)))
        rc = sp_err_set(err, SP_ERROR, 0, "kubernetes: list pod: not JSON");
    sp_buf_dispose(&x.body);
    sp_buf_dispose(&x.line);
    if (rc < 0)
        return rc;
    const char *rv = sp_json_str(sp_json_get(list, "metadata"), "resourceVersion");
    copy_line(w->rv, sizeof(w->rv), rv);
    const cJSON *items = sp_json_get(list, "items");
    const cJSON *pod = cJSON_IsArray(items) ? cJSON_GetArrayItem(items, 0) : NULL;
    rc = w->fn(pod ? SP_KUBE_ADDED : SP_KUBE_DELETED, pod, w->ud, err);
    if (rc > 0)
        w->stopped = true;
    cJSON_Delete(list);
    return rc < 0 ? rc : 0;
}

int sp_kube_pod_watch(sp_kube *k, const char *name, int timeout_ms, sp_kube_watch_fn fn,
                      void *userdata, sp_error **err)
{
    int rc = check_name(name, err);
    if (rc < 0)
        return rc;
    if (timeout_ms <= 0)
        timeout_ms = k->o.timeout_ms;
    int64_t deadline = sp_now_ms() + timeout_ms;
    cleanup_free char *base = pods_path(k);
    watch w = {.fn = fn, .ud = userdata, .name = name, .gone = true};
    int drops = 0;
    for (;;) {
        int64_t left = deadline - sp_now_ms();
        if (left <= 0)
            return sp_err_set(err, SP_ETIMEOUT, ETIMEDOUT,
                              "kubernetes: pod %s: no outcome within %d ms", name, timeout_ms);
        if (w.gone) {
            w.gone = false;
            if ((rc = relist(k, &w, base, (int)left, err)) < 0)
                return rc;
            if (w.stopped)
                return 0;
            continue;
        }
        cleanup_free char *sel = sp_xasprintf("metadata.name=%s", name);
        cleanup_free char *q = esc(k, sel);
        cleanup_free char *rv = esc(k, w.rv);
        long secs = (long)(left + 999) / 1000;
        cleanup_free char *p =
            sp_xasprintf("%s?watch=1&allowWatchBookmarks=true&fieldSelector=%s&resourceVersion=%s"
                         "&timeoutSeconds=%ld",
                         base, q, rv, secs);
        req r = {.method = "GET", .path = p, .on_line = on_event, .ud = &w};
        xfer x = {.on_line = on_event, .ud = &w};
        int64_t t0 = sp_now_ms();
        rc = perform(k, &r, &x, (int)left, "kubernetes: watch", err);
        int cb = x.cb_code;
        sp_error *cb_err = x.cb_err;
        sp_buf_dispose(&x.body);
        sp_buf_dispose(&x.line);
        if (cb < 0) {
            if (err) {
                sp_error_free(*err);
                *err = cb_err;
            } else {
                sp_error_free(cb_err);
            }
            return cb;
        }
        sp_error_free(cb_err);
        if (cb > 0 && w.stopped)
            return 0;
        if (cb == WATCH_RELIST)
            continue;
        if (rc < 0) {
            if (x.status == 410) {
                if (err) {
                    sp_error_free(*err);
                    *err = NULL;
                }
                w.gone = true;
                continue;
            }
            /* A dropped stream is not the end: rewatch from the last RV,
             * a few times in a row at most. */
            if (x.status == 0 && ++drops <= 5 && deadline - sp_now_ms() > 0) {
                if (err) {
                    sp_error_free(*err);
                    *err = NULL;
                }
                continue;
            }
            return rc;
        }
        /* The server ended the stream (timeoutSeconds or a drop): go on
         * from the last RV. A stream that ends at once, repeatedly, is
         * broken. */
        if (sp_now_ms() - t0 < 50 && ++drops > 20)
            return sp_err_set(err, SP_ERROR, 0,
                              "kubernetes: pod %s: the watch keeps ending at once", name);
    }
}

/* ------------------------------------------------------------- ready -- */

typedef struct ready {
    sp_kube_pod_state st;
    bool failed, gone;
} ready;

static int on_ready(sp_kube_event_type t, const cJSON *pod, void *ud, sp_error **err)
{
    ready *r = ud;
    if (t == SP_KUBE_DELETED || !pod) {
        r->gone = true;
        return 1;
    }
    if (sp_kube_pod_state_of(&r->st, pod, err) < 0)
        return SP_ERROR;
    if (r->st.phase == SP_KUBE_POD_RUNNING && r->st.ready)
        return 1;
    if (r->st.reason[0] || r->st.phase == SP_KUBE_POD_FAILED ||
        r->st.phase == SP_KUBE_POD_SUCCEEDED) {
        r->failed = true;
        return 1;
    }
    return 0;
}

int sp_kube_pod_wait_ready(sp_kube *k, const char *name, int timeout_ms, sp_error **err)
{
    ready r = {0};
    sp_error *werr = NULL;
    int rc = sp_kube_pod_watch(k, name, timeout_ms, on_ready, &r, &werr);
    if (rc == 0 && !r.failed && !r.gone)
        return 0;
    if (r.gone && rc == 0)
        return sp_err_set(err, SP_ENOTFOUND, 0, "kubernetes: pod %s was deleted", name);
    if (rc < 0 && rc != SP_ETIMEOUT) {
        if (err)
            *err = werr;
        else
            sp_error_free(werr);
        return rc;
    }
    /* Failed, or timed out: the Events say why in the cluster's words. */
    char *line = NULL;
    sp_error *eerr = NULL;
    sp_kube_pod_events_line(k, name, &line, &eerr);
    sp_error_free(eerr);
    cleanup_free char *own =
        !line && r.st.reason[0]
            ? (r.st.message[0] ? sp_xasprintf("%s: %s", r.st.reason, r.st.message)
                               : sp_xstrdup(r.st.reason))
            : NULL;
    const char *why = line ? line : own ? own : "no events";
    if (rc == SP_ETIMEOUT) {
        sp_error_free(werr);
        rc = sp_err_set(err, SP_ETIMEOUT, ETIMEDOUT,
                        "kubernetes: pod %s is not ready after %d ms: %s", name, timeout_ms, why);
    } else {
        rc = sp_err_set(err, SP_ERROR, 0, "kubernetes: pod %s cannot start: %s", name, why);
    }
    free(line);
    return rc;
}

/* ----------------------------------------------------------- pods/exec -- */

static void exec_tls(void *ud, void *curl)
{
    set_tls(ud, curl);
}

int sp_kube_exec_connect(sp_ws **out, sp_kube *k, const sp_kube_exec_spec *s, sp_error **err)
{
    *out = NULL;
    int rc = check_name(s->pod, err);
    if (rc < 0)
        return rc;
    if (!s->argv || !s->argv[0])
        return sp_err_set(err, SP_EINVAL, 0, "kubernetes: exec needs a command");
    sp_buf url = {0};
    cleanup_free char *base = pods_path(k);
    sp_buf_printf(&url, "%s%s/%s/exec?", k->c.server, base, s->pod);
    if (s->container) {
        cleanup_free char *c = esc(k, s->container);
        sp_buf_printf(&url, "container=%s&", c);
    }
    for (size_t i = 0; s->argv[i]; i++) {
        cleanup_free char *a = esc(k, s->argv[i]);
        sp_buf_printf(&url, "command=%s&", a);
    }
    sp_buf_printf(&url, "stdin=%s&stdout=true&stderr=%s&tty=%s", s->stdin_open ? "true" : "false",
                  s->tty ? "false" : "true", s->tty ? "true" : "false");
    for (int attempt = 0;; attempt++) {
        cleanup_free char *token = NULL;
        if ((rc = current_token(k, &token, err)) < 0)
            break;
        sp_ws_opts o = SP_WS_OPTS_INIT;
        o.protocols = s->protocols ? s->protocols : sp_kube_exec_protocols;
        o.bearer_token = token && *token ? token : NULL;
        o.timeout_ms = s->timeout_ms > 0 ? s->timeout_ms : k->o.timeout_ms;
        o.configure = exec_tls;
        o.configure_userdata = k;
        int64_t t0 = sp_now_ms();
        rc = sp_ws_connect(out, url.data, &o, err);
        if (token)
            explicit_bzero(token, strlen(token));
        if (k->o.log) {
            cleanup_free char *line = sp_xasprintf(
                "kubernetes: exec %s/%s %s: %s (%lld ms)", s->pod, s->container ? s->container : "",
                s->argv[0], rc == 0 ? sp_ws_protocol(*out) : "failed",
                (long long)(sp_now_ms() - t0));
            k->o.log(line, k->o.log_userdata);
        }
        /* A rotated token: read the file, or run the plugin, once more. */
        if (rc == SP_EDENIED && attempt == 0 && may_reauth(k)) {
            sp_error_free(*err);
            *err = NULL;
            continue;
        }
        break;
    }
    sp_buf_dispose(&url);
    return rc;
}
