/* Hijacked HTTP streams: exec start and container attach.
 *
 * Why not libcurl here: after `101 UPGRADED` the connection stops being
 * HTTP and becomes a bidirectional byte stream. libcurl 7.88 has no API to
 * hand an upgraded connection over (CURLOPT_CONNECT_ONLY cannot send the
 * request, and a write callback cannot write back); the websocket API is
 * for websockets only. So these requests speak HTTP/1.1 directly on a
 * socket of their own: write one request, parse the answer's head with the
 * small strict parser below, then keep the socket as the stream. Every wait
 * is a poll() with a deadline, so a silent or vanished service gives an
 * error instead of a hang. */
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "podman_internal.h"

#define HEAD_MAX       (64u * 1024u)   /* largest response head accepted */
#define ERR_BODY_MAX   (1024u * 1024u) /* largest error body read */
#define STREAM_BUF_CAP (64u * 1024u)

struct sp_exec {
    int fd;
    bool tty;
    bool eof;
    bool stdin_closed;
    bool broken; /* a protocol error happened; the stream is unusable */
    char *id;
    char *url; /* for messages */
    unsigned io_timeout_ms;
    char *buf; /* bytes received but not yet returned */
    size_t pos;
    size_t len;
    size_t frame_left; /* payload bytes of the current frame still unread */
    int frame_stream;
    /* For the debug log when the stream ends. */
    char *path;
    int status;
    int64_t t0, sent, received;
};

/* ------------------------------------------------------------- deadlines -- */

static int64_t deadline_after(int timeout_ms)
{
    return timeout_ms < 0 ? -1 : sp_now_ms() + timeout_ms;
}

static int remaining(int64_t deadline)
{
    if (deadline < 0)
        return -1;
    int64_t left = deadline - sp_now_ms();
    if (left <= 0)
        return 0;
    return left > INT32_MAX ? INT32_MAX : (int)left;
}

/* Wait for `events` on fd. 1 when ready, 0 at the deadline, <0 on error. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        struct pollfd pfd = {fd, events, 0};
        int n = poll(&pfd, 1, remaining(deadline));
        if (n > 0)
            return 1;
        if (n == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

/* -------------------------------------------------------------- connect -- */

static int connect_unix(int *out_fd, const char *path, int64_t deadline, sp_error **err)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    size_t n = strlen(path);
    if (n >= sizeof(sa.sun_path))
        return sp_err_set(err, SP_ETOOBIG, ENAMETOOLONG, "socket path is too long: %s", path);
    memcpy(sa.sun_path, path, n + 1);
    cleanup_close int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return sp_err_errno(err, errno, "socket", NULL);
    for (;;) {
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            break;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN) { /* backlog full: a busy or stuck service */
            if (remaining(deadline) == 0)
                return sp_err_set(err, SP_ETIMEOUT, ETIMEDOUT,
                                  "cannot connect to podman service at unix://%s: backlog full",
                                  path);
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        if (errno == EINPROGRESS) {
            int w = wait_fd(fd, POLLOUT, deadline);
            int soerr = 0;
            socklen_t sl = sizeof(soerr);
            if (w == 0)
                return sp_err_set(err, SP_ETIMEOUT, ETIMEDOUT,
                                  "cannot connect to podman service at unix://%s: timed out", path);
            if (w < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
                soerr = errno;
            if (soerr == 0)
                break;
            errno = soerr;
        }
        int e = errno;
        cleanup_free char *hint = sp_podman_start_hint(path);
        return sp_err_set(err, SP_EPODMAN, e,
                          "cannot connect to podman service at unix://%s: %s; %s", path,
                          strerror(e), hint);
    }
    *out_fd = steal_fd(&fd);
    return 0;
}

static int connect_tcp(int *out_fd, const char *host, int port, int64_t deadline, sp_error **err)
{
    char portstr[16];
    snprintf(portstr, sizeof(portstr), "%d", port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int g = getaddrinfo(host, portstr, &hints, &res);
    if (g != 0)
        return sp_err_set(err, SP_EPODMAN, 0, "cannot resolve podman host %s: %s", host,
                          gai_strerror(g));
    int last = ECONNREFUSED;
    bool timed_out = false;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd =
            socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0) {
            last = errno;
            continue;
        }
        int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (rc < 0 && errno == EINPROGRESS) {
            int w = wait_fd(fd, POLLOUT, deadline);
            int soerr = 0;
            socklen_t sl = sizeof(soerr);
            if (w == 0) {
                timed_out = true;
                soerr = ETIMEDOUT;
            } else if (w < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0) {
                soerr = errno;
            }
            rc = soerr ? -1 : 0;
            errno = soerr;
        }
        if (rc == 0) {
            freeaddrinfo(res);
            *out_fd = fd;
            return 0;
        }
        last = errno;
        close(fd);
        if (timed_out)
            break;
    }
    freeaddrinfo(res);
    return sp_err_set(err, timed_out ? SP_ETIMEOUT : SP_EPODMAN, last,
                      "cannot connect to podman service at tcp://%s:%d: %s", host, port,
                      strerror(last));
}

int sp_podman_raw_connect(int *out_fd, const sp_podman *p, int timeout_ms, sp_error **err)
{
    *out_fd = -1;
    int64_t deadline = deadline_after(timeout_ms);
    if (p->socket_path)
        return connect_unix(out_fd, p->socket_path, deadline, err);
    return connect_tcp(out_fd, p->host, p->port, deadline, err);
}

/* ------------------------------------------------------------ I/O helpers -- */

static int send_all(int fd, const void *data, size_t len, int64_t deadline, const char *what,
                    sp_error **err)
{
    const char *d = data;
    while (len) {
        ssize_t n = send(fd, d, len, MSG_NOSIGNAL);
        if (n > 0) {
            d += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int w = wait_fd(fd, POLLOUT, deadline);
            if (w == 0)
                return sp_err_set(err, SP_ETIMEOUT, ETIMEDOUT,
                                  "%s: the podman service stopped reading", what);
            if (w < 0)
                return sp_err_errno(err, errno, what, NULL);
            continue;
        }
        return sp_err_set(err, SP_EPODMAN, errno,
                          "%s: connection to the podman service was lost: %s", what,
                          strerror(errno));
    }
    return 0;
}

/* Receive once into buf. *got = 0 means EOF. */
static int recv_some(int fd, void *buf, size_t cap, size_t *got, int64_t deadline, const char *what,
                     sp_error **err)
{
    *got = 0;
    for (;;) {
        ssize_t n = recv(fd, buf, cap, 0);
        if (n >= 0) {
            *got = (size_t)n;
            return 0;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int w = wait_fd(fd, POLLIN, deadline);
            if (w == 0)
                return sp_err_set(err, SP_ETIMEOUT, ETIMEDOUT,
                                  "%s: no data from the podman service in time", what);
            if (w < 0)
                return sp_err_errno(err, errno, what, NULL);
            continue;
        }
        return sp_err_set(err, SP_EPODMAN, errno,
                          "%s: connection to the podman service was lost: %s", what,
                          strerror(errno));
    }
}

/* ---------------------------------------------------------- head parser -- */

static bool token_has(const char *v, size_t vlen, const char *tok)
{
    size_t tl = strlen(tok);
    for (size_t i = 0; i + tl <= vlen; i++)
        if (strncasecmp(v + i, tok, tl) == 0)
            return true;
    return false;
}

int sp_http1_parse_head(sp_http1_head *out, const char *buf, size_t len, sp_error **err)
{
    memset(out, 0, sizeof(*out));
    out->content_length = -1;
    /* Find the end of the head: an empty line (CRLF or bare LF). */
    size_t end = 0;
    bool found = false;
    for (size_t i = 0; i < len; i++) {
        if (buf[i] == '\0')
            return sp_err_set(err, SP_EPODMAN, 0, "malformed HTTP answer: NUL byte in the head");
        if (buf[i] != '\n')
            continue;
        if (i + 1 < len && buf[i + 1] == '\n') {
            end = i + 2;
            found = true;
            break;
        }
        if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n') {
            end = i + 3;
            found = true;
            break;
        }
    }
    if (!found) {
        if (len >= HEAD_MAX)
            return sp_err_set(err, SP_EPODMAN, 0, "malformed HTTP answer: head exceeds %u bytes",
                              HEAD_MAX);
        return 0;
    }
    /* Status line: HTTP/1.x SSS reason */
    if (end < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || (buf[7] != '0' && buf[7] != '1') ||
        buf[8] != ' ' || buf[9] < '1' || buf[9] > '5' || buf[10] < '0' || buf[10] > '9' ||
        buf[11] < '0' || buf[11] > '9' || (buf[12] != ' ' && buf[12] != '\r' && buf[12] != '\n'))
        return sp_err_set(err, SP_EPODMAN, 0, "malformed HTTP answer: bad status line");
    out->status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
    const char *line = memchr(buf, '\n', end);
    line++;
    while (line < buf + end) {
        const char *nl = memchr(line, '\n', (size_t)(buf + end - line));
        size_t ll = (size_t)(nl - line);
        if (ll && line[ll - 1] == '\r')
            ll--;
        if (ll == 0)
            break;
        const char *colon = memchr(line, ':', ll);
        if (!colon || colon == line)
            return sp_err_set(err, SP_EPODMAN, 0, "malformed HTTP answer: bad header line");
        size_t nl_ = (size_t)(colon - line);
        for (size_t i = 0; i < nl_; i++)
            if (line[i] == ' ' || line[i] == '\t')
                return sp_err_set(err, SP_EPODMAN, 0,
                                  "malformed HTTP answer: space in a header name");
        const char *v = colon + 1;
        const char *ve = line + ll;
        while (v < ve && (*v == ' ' || *v == '\t'))
            v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        size_t vl = (size_t)(ve - v);
        if (nl_ == 14 && strncasecmp(line, "Content-Length", 14) == 0) {
            if (vl == 0 || vl > 18)
                return sp_err_set(err, SP_EPODMAN, 0, "malformed HTTP answer: bad Content-Length");
            int64_t cl = 0;
            for (size_t i = 0; i < vl; i++) {
                if (v[i] < '0' || v[i] > '9')
                    return sp_err_set(err, SP_EPODMAN, 0,
                                      "malformed HTTP answer: bad Content-Length");
                cl = cl * 10 + (v[i] - '0');
            }
            if (out->content_length >= 0 && out->content_length != cl)
                return sp_err_set(err, SP_EPODMAN, 0,
                                  "malformed HTTP answer: conflicting Content-Length");
            out->content_length = cl;
        } else if (nl_ == 17 && strncasecmp(line, "Transfer-Encoding", 17) == 0) {
            if (token_has(v, vl, "chunked"))
                out->chunked = true;
        } else if (nl_ == 10 && strncasecmp(line, "Connection", 10) == 0) {
            if (token_has(v, vl, "upgrade"))
                out->upgrade = true;
        }
        line = nl + 1;
    }
    return (int)end;
}

/* 0: complete (decoded in place), 1: incomplete, <0: malformed. */
int sp_http1_dechunk(char *buf, size_t len, size_t *out_len, sp_error **err)
{
    size_t in = 0, outp = 0;
    *out_len = 0;
    for (;;) {
        size_t size = 0, digits = 0;
        while (in < len && buf[in] != '\r' && buf[in] != '\n' && buf[in] != ';') {
            char c = buf[in];
            int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
            if (d < 0 || digits >= 15)
                return sp_err_set(err, SP_EPODMAN, 0, "malformed chunked body: bad chunk size");
            size = size * 16 + (size_t)d;
            digits++;
            in++;
        }
        const char *nl = in < len ? memchr(buf + in, '\n', len - in) : NULL;
        if (!nl)
            return 1;
        if (digits == 0)
            return sp_err_set(err, SP_EPODMAN, 0, "malformed chunked body: empty chunk size");
        in = (size_t)(nl - buf) + 1;
        if (size == 0) {
            *out_len = outp;
            return 0; /* trailers, if any, are ignored */
        }
        if (len - in < size + 1)
            return 1;
        memmove(buf + outp, buf + in, size);
        outp += size;
        in += size;
        if (buf[in] == '\r')
            in++;
        if (in >= len)
            return 1;
        if (buf[in] != '\n')
            return sp_err_set(err, SP_EPODMAN, 0, "malformed chunked body: missing CRLF");
        in++;
    }
}

/* ------------------------------------------------------------------ hijack -- */

/* Read an error answer's body to its end (bounded) and map it. */
static int read_error_body(int fd, const sp_http1_head *h, sp_buf *b, size_t head_len,
                           int64_t deadline, const char *what, sp_error **err)
{
    /* b holds the head and possibly part of the body. */
    size_t have = b->len - head_len;
    for (;;) {
        if (h->content_length >= 0 && have >= (uint64_t)h->content_length)
            break;
        if (h->chunked) {
            cleanup_free char *copy = sp_xstrndup(b->data + head_len, have);
            size_t dl;
            int dr = sp_http1_dechunk(copy, have, &dl, NULL);
            if (dr <= 0)
                break;
        }
        if (have > ERR_BODY_MAX)
            break;
        char tmp[4096];
        size_t got;
        int r = recv_some(fd, tmp, sizeof(tmp), &got, deadline, what, err);
        if (r < 0)
            return r;
        if (got == 0)
            break;
        sp_buf_add(b, tmp, got);
        have += got;
    }
    char *body = b->data + head_len;
    size_t blen = have;
    if (h->content_length >= 0 && blen > (uint64_t)h->content_length)
        blen = (size_t)h->content_length;
    if (h->chunked && sp_http1_dechunk(body, blen, &blen, NULL) != 0)
        blen = 0;
    return sp_podman_http_error(err, h->status, body, blen, what);
}

int sp_podman_hijack(sp_exec **out, sp_podman *p, const char *path, const char *body, bool tty,
                     const char *exec_id, const char *what, sp_error **err)
{
    *out = NULL;
    int64_t t0 = sp_now_ms();
    int64_t deadline = deadline_after((int)p->timeout_ms);
    cleanup_close int fd = -1;
    int r = sp_podman_raw_connect(&fd, p, (int)p->connect_timeout_ms, err);
    if (r < 0)
        return sp_err_wrap(err, r, "%s", what);
    size_t blen = body ? strlen(body) : 0;
    cleanup_free char *req = sp_xasprintf("POST %s HTTP/1.1\r\n"
                                          "Host: d\r\n"
                                          "User-Agent: sandpod/" SANDPOD_VERSION "\r\n"
                                          "Content-Type: application/json\r\n"
                                          "Content-Length: %zu\r\n"
                                          "Connection: Upgrade\r\n"
                                          "Upgrade: tcp\r\n"
                                          "\r\n"
                                          "%s",
                                          path, blen, body ? body : "");
    r = send_all(fd, req, strlen(req), deadline, what, err);
    if (r < 0)
        return r;

    sp_buf b = SP_BUF_INIT;
    sp_http1_head h;
    size_t head_len = 0;
    for (;;) {
        int pr = sp_http1_parse_head(&h, b.data ? b.data + head_len : "", b.len - head_len, err);
        if (pr < 0) {
            sp_buf_dispose(&b);
            return sp_err_wrap(err, pr, "%s", what);
        }
        if (pr > 0) {
            if (h.status >= 100 && h.status < 200 && h.status != 101) {
                head_len += (size_t)pr; /* interim answer (100 Continue): skip it */
                continue;
            }
            head_len += (size_t)pr;
            break;
        }
        char tmp[4096];
        size_t got;
        r = recv_some(fd, tmp, sizeof(tmp), &got, deadline, what, err);
        if (r < 0) {
            sp_buf_dispose(&b);
            if (r == SP_ETIMEOUT)
                return sp_err_set(err, SP_ETIMEOUT, ETIMEDOUT,
                                  "%s: podman service at %s did not answer within %ums", what,
                                  p->url, p->timeout_ms);
            return r;
        }
        if (got == 0) {
            sp_buf_dispose(&b);
            return sp_err_set(err, SP_EPODMAN, 0,
                              "%s: podman service at %s closed the connection before answering",
                              what, p->url);
        }
        sp_buf_add(&b, tmp, got);
    }

    bool stream = h.status == 101 || (h.status == 200 && !h.chunked && h.content_length < 0);
    if (!stream) {
        sp_podman_log_request("POST", path, h.status, (int64_t)strlen(req), (int64_t)b.len,
                              sp_now_ms() - t0);
        if (h.status >= 400)
            r = read_error_body(fd, &h, &b, head_len, deadline, what, err);
        else
            r = sp_err_set(err, SP_EPODMAN, 0,
                           "%s: podman service answered HTTP %d instead of a stream", what,
                           h.status);
        sp_buf_dispose(&b);
        return r;
    }

    sp_exec *e = sp_xcalloc(1, sizeof(*e));
    e->fd = steal_fd(&fd);
    e->tty = tty;
    e->id = exec_id ? sp_xstrdup(exec_id) : NULL;
    e->url = sp_xstrdup(p->url);
    e->io_timeout_ms = p->timeout_ms;
    e->path = sp_xstrdup(path);
    e->status = h.status;
    e->t0 = t0;
    e->sent = (int64_t)strlen(req);
    e->received = (int64_t)b.len;
    e->buf = sp_xmalloc(STREAM_BUF_CAP);
    size_t extra = b.len - head_len;
    /* Bytes that came with the head belong to the stream. */
    if (extra > STREAM_BUF_CAP)
        e->buf = sp_xrealloc(e->buf, extra);
    memcpy(e->buf, b.data + head_len, extra);
    e->len = extra;
    sp_buf_dispose(&b);
    *out = e;
    return 0;
}

/* ------------------------------------------------------------------ sp_exec -- */

const char *sp_exec_id(const sp_exec *e)
{
    return e->id;
}

bool sp_exec_is_tty(const sp_exec *e)
{
    return e->tty;
}

int sp_exec_fd(const sp_exec *e)
{
    return e->fd;
}

bool sp_exec_buffered(const sp_exec *e)
{
    size_t have = e->len - e->pos;
    if (e->eof || e->broken)
        return true;
    if (e->tty || e->frame_left)
        return have > 0;
    return have >= 8;
}

void sp_exec_free(sp_exec *e)
{
    if (!e)
        return;
    if (e->fd >= 0)
        close(e->fd);
    /* A stream is one request: logged once its bytes are known. */
    sp_podman_log_request("POST", e->path, e->status, e->sent, e->received, sp_now_ms() - e->t0);
    free(e->path);
    free(e->id);
    free(e->url);
    free(e->buf);
    free(e);
}

static int stream_broken(sp_exec *e, sp_error **err, const char *fmt, ...) SP_PRINTF(3, 4);
static int stream_broken(sp_exec *e, sp_error **err, const char *fmt, ...)
{
    e->broken = true;
    va_list ap;
    va_start(ap, fmt);
    char *m = sp_xvasprintf(fmt, ap);
    va_end(ap);
    int r = sp_err_set(err, SP_EPODMAN, 0, "exec stream from %s: %s", e->url, m);
    free(m);
    return r;
}

/* Receive more bytes into the internal buffer. */
static int fill(sp_exec *e, int64_t deadline, sp_error **err)
{
    if (e->pos == e->len) {
        e->pos = e->len = 0;
    } else if (e->pos > 0) {
        memmove(e->buf, e->buf + e->pos, e->len - e->pos);
        e->len -= e->pos;
        e->pos = 0;
    }
    size_t cap = e->len < STREAM_BUF_CAP ? STREAM_BUF_CAP : e->len + 4096;
    e->buf = sp_xrealloc(e->buf, cap);
    size_t got;
    int r = recv_some(e->fd, e->buf + e->len, cap - e->len, &got, deadline, "exec stream", err);
    if (r < 0) {
        if (r != SP_ETIMEOUT)
            e->broken = true;
        return r;
    }
    if (got == 0)
        e->eof = true;
    e->len += got;
    e->received += (int64_t)got;
    return 0;
}

int sp_exec_read(size_t *out_len, int *out_stream, sp_exec *e, void *buf, size_t cap,
                 int timeout_ms, sp_error **err)
{
    *out_len = 0;
    if (out_stream)
        *out_stream = SP_EXEC_STDOUT;
    if (e->broken)
        return sp_err_set(err, SP_EPODMAN, 0, "exec stream from %s is broken by an earlier error",
                          e->url);
    if (!buf || cap == 0)
        return sp_err_set(err, SP_EINVAL, 0, "exec read: empty buffer");
    int64_t deadline = deadline_after(timeout_ms);

    if (e->tty) {
        if (e->len > e->pos) {
            size_t n = e->len - e->pos < cap ? e->len - e->pos : cap;
            memcpy(buf, e->buf + e->pos, n);
            e->pos += n;
            *out_len = n;
            return 0;
        }
        if (e->eof)
            return 0;
        size_t got;
        int r = recv_some(e->fd, buf, cap, &got, deadline, "exec stream", err);
        if (r < 0) {
            if (r != SP_ETIMEOUT)
                e->broken = true;
            return r;
        }
        if (got == 0)
            e->eof = true;
        e->received += (int64_t)got;
        *out_len = got;
        return 0;
    }

    for (;;) {
        if (e->frame_left == 0) {
            while (e->len - e->pos < 8) {
                if (e->eof) {
                    if (e->len == e->pos)
                        return 0;
                    return stream_broken(e, err,
                                         "connection closed inside a frame header (%zu of 8 bytes)",
                                         e->len - e->pos);
                }
                int r = fill(e, deadline, err);
                if (r < 0)
                    return r;
            }
            const unsigned char *h = (const unsigned char *)e->buf + e->pos;
            if (h[0] > SP_EXEC_SYSERR || h[1] || h[2] || h[3])
                return stream_broken(e, err,
                                     "malformed frame header %02x %02x %02x %02x %02x %02x %02x "
                                     "%02x",
                                     h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]);
            e->frame_stream = h[0];
            e->frame_left = (size_t)h[4] << 24 | (size_t)h[5] << 16 | (size_t)h[6] << 8 | h[7];
            e->pos += 8;
            if (e->frame_left == 0)
                continue;
        }
        size_t want = e->frame_left < cap ? e->frame_left : cap;
        if (out_stream)
            *out_stream = e->frame_stream;
        if (e->len > e->pos) {
            size_t n = e->len - e->pos < want ? e->len - e->pos : want;
            memcpy(buf, e->buf + e->pos, n);
            e->pos += n;
            e->frame_left -= n;
            *out_len = n;
            return 0;
        }
        if (e->eof)
            return stream_broken(e, err, "connection closed inside a frame (%zu bytes missing)",
                                 e->frame_left);
        /* Nothing buffered: read the payload straight into the caller's buffer. */
        size_t got;
        int r = recv_some(e->fd, buf, want, &got, deadline, "exec stream", err);
        if (r < 0) {
            if (r != SP_ETIMEOUT)
                e->broken = true;
            return r;
        }
        if (got == 0) {
            e->eof = true;
            continue;
        }
        e->frame_left -= got;
        *out_len = got;
        return 0;
    }
}

int sp_exec_write_stdin(sp_exec *e, const void *data, size_t len, sp_error **err)
{
    if (e->stdin_closed)
        return sp_err_set(err, SP_EINVAL, 0, "exec stdin is already closed");
    e->sent += (int64_t)len;
    return send_all(e->fd, data, len, deadline_after((int)e->io_timeout_ms), "exec stdin", err);
}

int sp_exec_close_stdin(sp_exec *e, sp_error **err)
{
    if (e->stdin_closed)
        return 0;
    e->stdin_closed = true;
    if (shutdown(e->fd, SHUT_WR) < 0 && errno != ENOTCONN)
        return sp_err_errno(err, errno, "close exec stdin", NULL);
    return 0;
}
