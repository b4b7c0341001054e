/* The Podman client handle and its HTTP core: one libcurl easy handle per
 * sp_podman (kept for connection reuse), requests with bounded time, and the
 * mapping of service errors to sp_error. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "podman_internal.h"

#define DEFAULT_CONNECT_TIMEOUT_MS  5000u
#define DEFAULT_TIMEOUT_MS          60000u
#define DEFAULT_TRANSFER_TIMEOUT_MS 600000u

/* ------------------------------------------------------------ addresses -- */

/* --------------------------------------------------------------- handle -- */

int sp_podman_open(sp_podman **out, const sp_podman_opts *opts, sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_PODMAN_OPTS_VERSION, "sp_podman_opts", err) < 0)
        return SP_EINVAL;
    sp_podman_opts o = SP_PODMAN_OPTS_INIT;
    if (opts)
        o = *opts;
    if (!o.connect_timeout_ms)
        o.connect_timeout_ms = DEFAULT_CONNECT_TIMEOUT_MS;
    if (!o.timeout_ms)
        o.timeout_ms = DEFAULT_TIMEOUT_MS;
    if (!o.transfer_timeout_ms)
        o.transfer_timeout_ms = DEFAULT_TRANSFER_TIMEOUT_MS;
    int r = sp_podman_curl_init(err);
    if (r < 0)
        return r;

    sp_podman_addr a;
    bool started = false;
    r = sp_podman_find_or_start(&a, &started, &o, err);
    if (r < 0)
        return r;
    CURL *c = curl_easy_init();
    if (!c) {
        sp_podman_addr_dispose(&a);
        return sp_err_set(err, SP_ERROR, ENOMEM, "libcurl could not make a handle");
    }
    sp_podman *p = sp_xcalloc(1, sizeof(*p));
    p->curl = c;
    p->url = steal_pointer(&a.url);
    p->socket_path = steal_pointer(&a.socket_path);
    p->host = steal_pointer(&a.host);
    p->port = a.port;
    if (p->socket_path)
        p->base = sp_xstrdup("http://d");
    else if (strchr(p->host, ':'))
        p->base = sp_xasprintf("http://[%s]:%d", p->host, p->port);
    else
        p->base = sp_xasprintf("http://%s:%d", p->host, p->port);
    if (o.state_root && *o.state_root) {
        struct stat st;
        if (stat(o.state_root, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid())
            p->cache_dir = sp_xstrdup(o.state_root);
    }
    p->connect_timeout_ms = o.connect_timeout_ms;
    p->timeout_ms = o.timeout_ms;
    p->transfer_timeout_ms = o.transfer_timeout_ms;
    p->started = started;
    sp_podman_addr_dispose(&a);
    *out = p;
    return 0;
}

void sp_podman_free(sp_podman *p)
{
    if (!p)
        return;
    if (p->curl)
        curl_easy_cleanup(p->curl);
    free(p->url);
    free(p->socket_path);
    free(p->host);
    free(p->base);
    free(p->cache_dir);
    if (p->host_info) {
        free(p->host_info->seccomp_profile);
        free(p->host_info->graph_root);
        free(p->host_info);
    }
    free(p);
}

const char *sp_podman_url(const sp_podman *p)
{
    return p->url;
}

bool sp_podman_started_service(const sp_podman *p)
{
    return p->started;
}

char *sp_podman_escape(sp_podman *p, const char *s)
{
    char *e = curl_easy_escape(p->curl, s ? s : "", 0);
    if (!e)
        abort();
    char *r = sp_xstrdup(e);
    curl_free(e);
    return r;
}

/* ----------------------------------------------------------------- JSON -- */

int sp_podman_json(cJSON **out, const sp_buf *body, const char *what, sp_error **err)
{
    *out = NULL;
    if (!body->data || body->len == 0)
        return sp_err_set(err, SP_EPODMAN, 0, "%s: the podman service sent an empty answer", what);
    cJSON *j = sp_json_parse(body->data, body->len);
    if (!j)
        return sp_err_set(err, SP_EPODMAN, 0,
                          "%s: the podman service sent malformed JSON (%zu bytes)", what,
                          body->len);
    *out = j;
    return 0;
}

/* ---------------------------------------------------------------- errors -- */

/* Keep the service's text to one printable line of bounded length. */
static char *one_line(const char *s, size_t len)
{
    if (len > 1000)
        len = 1000;
    char *r = sp_xstrndup(s, len);
    for (char *c = r; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = ' ';
    size_t n = strlen(r);
    while (n && r[n - 1] == ' ')
        r[--n] = '\0';
    return r;
}

int sp_podman_call_json(sp_podman *p, const sp_http_req *req, cJSON **out, const char *what,
                        sp_error **err)
{
    *out = NULL;
    sp_http_resp resp = {0};
    int r = sp_podman_http(p, req, &resp, what, err);
    if (r == 0)
        r = sp_podman_json(out, &resp.body, what, err);
    sp_http_resp_dispose(&resp);
    return r;
}

int sp_podman_http_error(sp_error **err, long status, const char *body, size_t len,
                         const char *what)
{
    cJSON *j = body && len ? sp_json_parse(body, len) : NULL;
    const char *msg = j ? sp_json_str(j, "message") : NULL;
    const char *cause = j ? sp_json_str(j, "cause") : NULL;
    int code = SP_EPODMAN;
    if (status == 404)
        code = SP_ENOTFOUND;
    else if (status == 400)
        code = SP_EINVAL;
    /* Podman 4.3 answers some conflicts and lookups with 500; its "cause"
     * names them. */
    if (cause && strstr(cause, "already in use"))
        code = SP_EEXISTS;
    else if (cause && (strstr(cause, "no such") || strstr(cause, "not known")))
        code = SP_ENOTFOUND;
    int r;
    if (msg && *msg) {
        char *m = one_line(msg, strlen(msg));
        r = sp_err_set(err, code, 0, "%s: %s", what, m);
        free(m);
    } else if (body && len && !j) {
        char *m = one_line(body, len);
        r = sp_err_reason(
            err, SP_R_SERVICE,
            sp_err_set(err, code, 0, "%s: podman service answered HTTP %ld: %s", what, status, m));
        free(m);
    } else {
        r = sp_err_reason(
            err, SP_R_SERVICE,
            sp_err_set(err, code, 0, "%s: podman service answered HTTP %ld", what, status));
    }
    cJSON_Delete(j);
    return r;
}

/* ------------------------------------------------------------------ HTTP -- */

typedef struct xfer {
    CURL *curl;
    const sp_http_req *req;
    sp_buf *body;
    sp_buf line; /* partial line for on_line */
    bool too_big;
    int write_errno;
    int read_errno;
    int cb_code; /* on_line's failure */
    sp_error *cb_err;
    long status;
} xfer;

static bool is_2xx(xfer *x)
{
    if (!x->status)
        curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &x->status);
    return x->status >= 200 && x->status < 300;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *ud)
{
    xfer *x = ud;
    size_t n = size * nmemb;
    if (is_2xx(x) && x->req->download_fd >= 0) {
        if (sp_write_all(x->req->download_fd, data, n) < 0) {
            x->write_errno = errno;
            return 0;
        }
        return n;
    }
    if (is_2xx(x) && x->req->on_data) {
        int r = x->req->on_data(data, n, x->req->ud, &x->cb_err);
        if (r < 0) {
            x->cb_code = r;
            return 0;
        }
        return n;
    }
    if (is_2xx(x) && x->req->on_line) {
        int r = sp_buf_lines(&x->line, data, n, SP_PODMAN_MAX_BODY, x->req->on_line, x->req->ud,
                             &x->cb_err);
        if (r == SP_ETOOBIG)
            x->too_big = true;
        else if (r < 0)
            x->cb_code = r;
        return r < 0 ? 0 : n;
    }
    if (x->body->len + n > SP_PODMAN_MAX_BODY) {
        x->too_big = true;
        return 0;
    }
    sp_buf_add(x->body, data, n);
    return n;
}

static size_t on_read(char *buf, size_t size, size_t nmemb, void *ud)
{
    xfer *x = ud;
    for (;;) {
        ssize_t n = read(x->req->upload_fd, buf, size * nmemb);
        if (n >= 0)
            return (size_t)n;
        if (errno == EINTR)
            continue;
        x->read_errno = errno;
        return CURL_READFUNC_ABORT;
    }
}

void sp_http_resp_dispose(sp_http_resp *r)
{
    sp_buf_dispose(&r->body);
    r->status = 0;
}

static int transport_error(sp_podman *p, CURLcode rc, const char *ebuf, long timeout_ms,
                           const char *what, sp_error **err)
{
    cleanup_free char *detail = sp_podman_curl_detail(p->curl, rc, ebuf);
    switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
        return sp_err_reason(err, SP_R_SERVICE,
                             sp_err_set(err, SP_ETIMEOUT, ETIMEDOUT,
                                        "%s: podman service at %s did not answer within %ldms: %s",
                                        what, p->url, timeout_ms, detail));
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST: {
        cleanup_free char *hint =
            p->socket_path
                ? sp_podman_start_hint(p->socket_path)
                : sp_xasprintf("start it there with 'podman system service --time=0 %s'", p->url);
        return sp_err_set(err, SP_EPODMAN, 0, "%s: cannot connect to podman service at %s: %s; %s",
                          what, p->url, detail, hint);
    }
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
        return sp_err_set(err, SP_EPODMAN, 0,
                          "%s: podman service at %s closed the connection mid-answer: %s", what,
                          p->url, detail);
    default:
        return sp_err_set(err, SP_EPODMAN, 0, "%s: podman service at %s: %s", what, p->url, detail);
    }
}

void sp_podman_log_request(const char *method, const char *path, long status, int64_t sent,
                           int64_t received, int64_t ms)
{
    if (!sp_log_on(SP_LOG_DEBUG))
        return;
    char *line = sp_request_log_line("podman", method, path, status, sent, received, ms);
    sp_log(SP_LOG_DEBUG, "%s", line);
    free(line);
}

int sp_podman_http(sp_podman *p, const sp_http_req *req, sp_http_resp *resp, const char *what,
                   sp_error **err)
{
    int64_t t0 = sp_now_ms();
    CURL *c = p->curl;
    resp->status = 0;
    curl_easy_reset(c);
    char ebuf[CURL_ERROR_SIZE] = "";
    cleanup_free char *url = sp_xasprintf("%s%s", p->base, req->path);
    long timeout = req->timeout_ms > 0   ? req->timeout_ms
                   : req->timeout_ms < 0 ? 0 /* curl: none */
                                         : (long)p->timeout_ms;
    xfer x = {.curl = c, .req = req, .body = &resp->body};
    struct curl_slist *hdrs = NULL;

    curl_easy_setopt(c, CURLOPT_URL, url);
    if (p->socket_path)
        curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, p->socket_path);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)p->connect_timeout_ms);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ebuf);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "sandpod/" SANDPOD_VERSION);
    /* A 100-continue round trip only adds a delay on a local socket. */
    hdrs = curl_slist_append(hdrs, "Expect:");
    if (req->content_type) {
        char h[128];
        snprintf(h, sizeof(h), "Content-Type: %s", req->content_type);
        hdrs = curl_slist_append(hdrs, h);
    }

    const char *m = req->method ? req->method : "GET";
    if (req->upload_fd >= 0) {
        struct stat st;
        bool sized = fstat(req->upload_fd, &st) == 0 && S_ISREG(st.st_mode);
        off_t pos = sized ? lseek(req->upload_fd, 0, SEEK_CUR) : -1;
        curl_off_t size = sized && pos >= 0 && st.st_size >= pos ? st.st_size - pos : -1;
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(c, CURLOPT_READDATA, &x);
        if (strcmp(m, "PUT") == 0) {
            curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
            if (size >= 0)
                curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, size);
        } else {
            curl_easy_setopt(c, CURLOPT_POST, 1L);
            if (size >= 0)
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, size);
            else
                hdrs = curl_slist_append(hdrs, "Transfer-Encoding: chunked");
            if (strcmp(m, "POST") != 0)
                curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, m);
        }
    } else if (strcmp(m, "GET") == 0) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(m, "POST") == 0 || req->body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)req->body_len);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body ? req->body : "");
        if (strcmp(m, "POST") != 0)
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, m);
    } else {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, m);
        if (strcmp(m, "HEAD") == 0)
            curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);

    CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(hdrs);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
    if (sp_log_on(SP_LOG_DEBUG)) {
        curl_off_t up = 0, down = 0;
        curl_easy_getinfo(c, CURLINFO_SIZE_UPLOAD_T, &up);
        curl_easy_getinfo(c, CURLINFO_SIZE_DOWNLOAD_T, &down);
        sp_podman_log_request(m, req->path, resp->status, (int64_t)up, (int64_t)down,
                              sp_now_ms() - t0);
    }
    int r = 0;
    if (x.cb_code < 0) {
        if (err && x.cb_err) {
            sp_error_free(*err);
            *err = steal_pointer(&x.cb_err);
        } else {
            sp_err_set(err, x.cb_code, 0, "%s: stopped", what);
        }
        r = x.cb_code;
    } else if (x.too_big) {
        r = sp_err_reason(err, SP_R_SERVICE,
                          sp_err_set(err, SP_ETOOBIG, 0,
                                     "%s: podman service answer exceeds %zu bytes", what,
                                     SP_PODMAN_MAX_BODY));
    } else if (x.write_errno) {
        r = sp_err_errno(err, x.write_errno, what, "writing the answer");
    } else if (x.read_errno) {
        r = sp_err_errno(err, x.read_errno, what, "reading the upload");
    } else if (rc != CURLE_OK) {
        r = transport_error(p, rc, ebuf, timeout, what, err);
    } else if (resp->status >= 400) {
        r = sp_podman_http_error(err, resp->status, resp->body.data, resp->body.len, what);
    } else if (req->on_line && x.line.len) {
        /* The last line may lack its newline. */
        r = req->on_line(x.line.data, x.line.len, req->ud, &x.cb_err);
        if (r < 0 && err && x.cb_err) {
            sp_error_free(*err);
            *err = steal_pointer(&x.cb_err);
        }
        r = r < 0 ? r : 0;
    }
    sp_error_free(x.cb_err);
    sp_buf_dispose(&x.line);
    return r;
}

/* -------------------------------------------------------- ping & version -- */

int sp_podman_ping(sp_podman *p, sp_error **err)
{
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.path = SP_PODMAN_API "/_ping";
    req.timeout_ms = p->connect_timeout_ms;
    sp_http_resp resp = {0};
    int r = sp_podman_http(p, &req, &resp, "ping", err);
    if (r == 0 && (resp.body.len < 2 || memcmp(resp.body.data, "OK", 2) != 0))
        r = sp_err_set(err, SP_EPODMAN, 0, "ping: %s answered HTTP %ld but not as Podman does",
                       p->url, resp.status);
    sp_http_resp_dispose(&resp);
    return r;
}

void sp_podman_version_free(sp_podman_version *v)
{
    if (!v)
        return;
    free(v->version);
    free(v->api_version);
    free(v->os);
    free(v->arch);
    free(v->kernel);
    free(v->runtime);
    free(v);
}

int sp_podman_get_version(sp_podman_version **out, sp_podman *p, sp_error **err)
{
    *out = NULL;
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.path = SP_PODMAN_API "/version";
    cJSON *j = NULL;
    int r = sp_podman_call_json(p, &req, &j, "version", err);
    if (r == 0) {
        sp_podman_version *v = sp_xcalloc(1, sizeof(*v));
        v->version = sp_json_strdup(j, "Version");
        v->os = sp_json_strdup(j, "Os");
        v->arch = sp_json_strdup(j, "Arch");
        v->kernel = sp_json_strdup(j, "KernelVersion");
        const cJSON *comp;
        cJSON_ArrayForEach(comp, cJSON_GetObjectItemCaseSensitive(j, "Components"))
        {
            const char *name = sp_json_str(comp, "Name");
            if (!name)
                continue;
            const cJSON *det = cJSON_GetObjectItemCaseSensitive(comp, "Details");
            if (strcmp(name, "Podman Engine") == 0 && !v->api_version)
                v->api_version = sp_json_strdup(det, "APIVersion");
            else if (strncmp(name, "OCI Runtime", 11) == 0 && !v->runtime)
                v->runtime = sp_xstrdup(name);
        }
        if (!v->version) {
            sp_podman_version_free(v);
            r = sp_err_set(err, SP_EPODMAN, 0, "version: the answer names no version");
        } else {
            *out = v;
        }
    }
    cJSON_Delete(j);
    return r;
}

static bool has_string(const cJSON *a, const char *s)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, a)
    {
        if (cJSON_IsString(it) && strcmp(it->valuestring, s) == 0)
            return true;
    }
    return false;
}

/* /info costs Podman 150-300 ms (it asks runc, conmon and more for their
 * versions), more than everything else a create does. What sandpod needs
 * from it does not change while the service runs, so it is kept in the
 * state root, keyed by the URL and the socket's inode and change time (a
 * restarted service makes its socket anew). */
static char *host_cache_path(const sp_podman *p, char **key)
{
    struct stat st;
    if (!p->cache_dir || !p->socket_path || stat(p->socket_path, &st) < 0)
        return NULL;
    uint32_t h = 2166136261u;
    for (const unsigned char *q = (const unsigned char *)p->url; *q; q++)
        h = (h ^ *q) * 16777619u;
    *key = sp_xasprintf("%s %llu %lld.%09ld", p->url, (unsigned long long)st.st_ino,
                        (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
    return sp_xasprintf("%s/podman-host-%08x.json", p->cache_dir, h);
}

static cJSON *host_json(const sp_podman_host *h, const char *key)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "key", key);
    cJSON_AddBoolToObject(o, "rootless", h->rootless);
    cJSON_AddNumberToObject(o, "cgroup_version", h->cgroup_version);
    cJSON_AddBoolToObject(o, "limits_apply", h->limits_apply);
    cJSON_AddBoolToObject(o, "can_pause", h->can_pause);
    if (h->seccomp_profile)
        cJSON_AddStringToObject(o, "seccomp_profile", h->seccomp_profile);
    if (h->graph_root)
        cJSON_AddStringToObject(o, "graph_root", h->graph_root);
    return o;
}

static sp_podman_host *cached_host(const char *path, const char *key)
{
    cleanup_close int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    sp_buf b = SP_BUF_INIT;
    if (fd < 0 || sp_read_all(fd, &b, 1u << 16) < 0) {
        sp_buf_dispose(&b);
        return NULL;
    }
    cJSON *o = sp_json_parse(b.data ? b.data : "", b.len);
    sp_buf_dispose(&b);
    const char *k = sp_json_str(o, "key");
    sp_podman_host *h = NULL;
    if (k && strcmp(k, key) == 0) {
        h = sp_xcalloc(1, sizeof(*h));
        h->rootless = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "rootless"));
        const cJSON *cg = cJSON_GetObjectItemCaseSensitive(o, "cgroup_version");
        h->cgroup_version = cJSON_IsNumber(cg) && cg->valueint == 2 ? 2 : 1;
        h->limits_apply = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "limits_apply"));
        h->can_pause = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "can_pause"));
        h->seccomp_profile = sp_json_strdup(o, "seccomp_profile");
        h->graph_root = sp_json_strdup(o, "graph_root");
    }
    cJSON_Delete(o);
    return h;
}

int sp_podman_host_info(const sp_podman_host **out, sp_podman *p, sp_error **err)
{
    *out = NULL;
    if (p->host_info) {
        *out = p->host_info;
        return 0;
    }
    cleanup_free char *key = NULL;
    cleanup_free char *cache = host_cache_path(p, &key);
    if (cache && (p->host_info = cached_host(cache, key)) != NULL) {
        *out = p->host_info;
        return 0;
    }
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.path = SP_PODMAN_API "/info";
    cJSON *j = NULL;
    int r = sp_podman_call_json(p, &req, &j, "info", err);
    if (r < 0)
        return r;
    const cJSON *host = cJSON_GetObjectItemCaseSensitive(j, "host");
    const cJSON *sec = cJSON_GetObjectItemCaseSensitive(host, "security");
    sp_podman_host *h = sp_xcalloc(1, sizeof(*h));
    h->rootless = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sec, "rootless"));
    const char *cg = sp_json_str(host, "cgroupVersion");
    h->cgroup_version = cg && strcmp(cg, "v2") == 0 ? 2 : 1;
    const cJSON *ctl = cJSON_GetObjectItemCaseSensitive(host, "cgroupControllers");
    h->limits_apply = !h->rootless || (has_string(ctl, "memory") && has_string(ctl, "pids") &&
                                       has_string(ctl, "cpu"));
    h->can_pause = !(h->rootless && h->cgroup_version == 1);
    h->seccomp_profile = sp_json_strdup(sec, "seccompProfilePath");
    if (h->seccomp_profile && !*h->seccomp_profile) {
        free(h->seccomp_profile);
        h->seccomp_profile = NULL;
    }
    h->graph_root = sp_json_strdup(cJSON_GetObjectItemCaseSensitive(j, "store"), "graphRoot");
    cJSON_Delete(j);
    p->host_info = h;
    *out = h;
    if (cache) {
        cJSON *c = host_json(h, key);
        char *text = cJSON_PrintUnformatted(c);
        cJSON_Delete(c);
        if (text)
            (void)sp_write_file_atomic(cache, text, strlen(text), 0600, NULL);
        free(text);
    }
    return 0;
}

int sp_podman_graph_root(char **out, sp_podman *p, sp_error **err)
{
    *out = NULL;
    const sp_podman_host *h = NULL;
    int r = sp_podman_host_info(&h, p, err);
    if (r < 0)
        return r;
    if (!h->graph_root)
        return sp_err_set(err, SP_EPODMAN, 0, "info: the answer names no store.graphRoot");
    *out = sp_xstrdup(h->graph_root);
    return 0;
}
