/* The libcurl transport for the WebSocket client: libcurl connects (TCP,
 * TLS with verification, client certificates, proxies) and stops there
 * (CURLOPT_CONNECT_ONLY); curl_easy_send/curl_easy_recv then carry the
 * Upgrade request and the frames, which libcurl 7.88 cannot speak itself. */
#include <stdio.h>
#include <string.h>

#include "lazy_curl.h"
#include "ws.h"

static int curl_fail(sp_error **err, CURLcode c, const char *what)
{
    int code = c == CURLE_OPERATION_TIMEDOUT ? SP_ETIMEOUT : SP_ERROR;
    return sp_err_set(err, code, 0, "websocket: %s: %s", what, curl_easy_strerror(c));
}

static int c_read(void *ctx, void *buf, size_t cap, size_t *n, sp_error **err)
{
    CURLcode c = curl_easy_recv(ctx, buf, cap, n);
    if (c == CURLE_AGAIN)
        return SP_WS_AGAIN;
    return c == CURLE_OK ? 0 : curl_fail(err, c, "receive");
}

static int c_write(void *ctx, const void *buf, size_t len, size_t *n, sp_error **err)
{
    CURLcode c = curl_easy_send(ctx, buf, len, n);
    if (c == CURLE_AGAIN)
        return SP_WS_AGAIN;
    return c == CURLE_OK ? 0 : curl_fail(err, c, "send");
}

static int c_fd(void *ctx)
{
    curl_socket_t s = CURL_SOCKET_BAD;
    if (curl_easy_getinfo(ctx, CURLINFO_ACTIVESOCKET, &s) != CURLE_OK)
        return -1;
    return (int)s;
}

static void c_close(void *ctx)
{
    curl_easy_cleanup(ctx);
}

/* Split url into the URL libcurl connects to (ws -> http), the Host header
 * and the request target. */
static int split_url(const char *url, char **conn, char **host, char **path, sp_error **err)
{
    const char *rest;
    const char *scheme;
    if (strncmp(url, "ws://", 5) == 0 || strncmp(url, "http://", 7) == 0) {
        scheme = "http";
        rest = url + (url[0] == 'w' ? 5 : 7);
    } else if (strncmp(url, "wss://", 6) == 0 || strncmp(url, "https://", 8) == 0) {
        scheme = "https";
        rest = url + (url[0] == 'w' ? 6 : 8);
    } else {
        return sp_err_set(err, SP_EINVAL, 0, "websocket: not an http(s) or ws(s) URL: %.200s", url);
    }
    size_t hl = strcspn(rest, "/?#");
    if (hl == 0 || memchr(rest, '@', hl))
        return sp_err_set(err, SP_EINVAL, 0, "websocket: no host (or credentials) in URL: %.200s",
                          url);
    *host = sp_xstrndup(rest, hl);
    const char *p = rest + hl;
    size_t pl = strcspn(p, "#");
    *path = p[0] == '/' ? sp_xstrndup(p, pl) : sp_xasprintf("/%.*s", (int)pl, p);
    *conn = sp_xasprintf("%s://%s/", scheme, *host);
    return 0;
}

int sp_ws_connect(sp_ws **out, const char *url, const sp_ws_opts *opts, sp_error **err)
{
    *out = NULL;
    int rc = sp_curl_load(err);
    if (rc < 0)
        return rc;
    cleanup_free char *conn = NULL, *host = NULL, *path = NULL;
    if ((rc = split_url(url, &conn, &host, &path, err)) < 0)
        return rc;
    CURL *c = curl_easy_init();
    if (!c)
        return sp_err_set(err, SP_ERROR, 0, "websocket: curl_easy_init failed");
    int timeout = opts && opts->timeout_ms > 0 ? opts->timeout_ms : 30000;
    curl_easy_setopt(c, CURLOPT_URL, conn);
    curl_easy_setopt(c, CURLOPT_CONNECT_ONLY, 1L);
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    /* Through a proxy, always a CONNECT tunnel: the Upgrade request is
     * ours to send and must reach the server as written. */
    curl_easy_setopt(c, CURLOPT_HTTPPROXYTUNNEL, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    if (opts && opts->ca_file)
        curl_easy_setopt(c, CURLOPT_CAINFO, opts->ca_file);
    if (opts && opts->configure)
        opts->configure(opts->configure_userdata, c);
    CURLcode cc = curl_easy_perform(c);
    if (cc != CURLE_OK) {
        rc = curl_fail(err, cc, url);
        curl_easy_cleanup(c);
        return rc;
    }
    sp_ws_transport t = {.ctx = c, .read = c_read, .write = c_write, .fd = c_fd, .close = c_close};
    return sp_ws_handshake(out, t, host, path, opts, err);
}
