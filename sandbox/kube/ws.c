/* The WebSocket client (see ws.h). Every wait is a poll() on the
 * transport's fd bounded by a deadline, so a silent or vanished server is
 * an error, never a hang. */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "sha1.h"
#include "ws.h"

#define HEAD_MAX   (16u * 1024u)
#define RECV_CHUNK (64u * 1024u)
#define WS_GUID    "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

struct sp_ws {
    sp_ws_transport t;
    bool open;       /* the transport is usable */
    bool close_sent; /* we sent our close frame */
    int timeout_ms;
    char protocol[64];
    sp_ws_decoder dec;
    uint8_t *in; /* received, not yet decoded: in[pos..len) */
    size_t pos, len;
};

/* ------------------------------------------------------- fd transport -- */

static int fd_read(void *ctx, void *buf, size_t cap, size_t *n, sp_error **err)
{
    int fd = (int)(intptr_t)ctx;
    ssize_t r = recv(fd, buf, cap, 0);
    if (r >= 0) {
        *n = (size_t)r;
        return 0;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return SP_WS_AGAIN;
    return sp_err_errno(err, errno, "websocket: receive", NULL);
}

static int fd_write(void *ctx, const void *buf, size_t len, size_t *n, sp_error **err)
{
    int fd = (int)(intptr_t)ctx;
    ssize_t r = send(fd, buf, len, MSG_NOSIGNAL);
    if (r >= 0) {
        *n = (size_t)r;
        return 0;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return SP_WS_AGAIN;
    return sp_err_errno(err, errno, "websocket: send", NULL);
}

static int fd_fd(void *ctx)
{
    return (int)(intptr_t)ctx;
}

static void fd_close(void *ctx)
{
    close((int)(intptr_t)ctx);
}

sp_ws_transport sp_ws_transport_fd(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    return (sp_ws_transport){.ctx = (void *)(intptr_t)fd,
                             .read = fd_read,
                             .write = fd_write,
                             .fd = fd_fd,
                             .close = fd_close};
}

/* ------------------------------------------------------------- waiting -- */

static int64_t deadline_after(int timeout_ms)
{
    return timeout_ms < 0 ? -1 : sp_now_ms() + timeout_ms;
}

/* Wait for events on the transport's fd until deadline: 0 or SP_ETIMEOUT. */
static int wait_io(sp_ws *ws, short events, int64_t deadline, const char *what, sp_error **err)
{
    for (;;) {
        int ms = -1;
        if (deadline >= 0) {
            int64_t left = deadline - sp_now_ms();
            if (left <= 0)
                return sp_err_set(err, SP_ETIMEOUT, 0, "websocket: timed out %s", what);
            ms = left > 60000 ? 60000 : (int)left;
        }
        struct pollfd p = {.fd = ws->t.fd(ws->t.ctx), .events = events};
        int r = poll(&p, 1, ms);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return sp_err_errno(err, errno, "websocket: poll", NULL);
    }
}

static int send_raw(sp_ws *ws, const void *data, size_t len, int64_t deadline, sp_error **err)
{
    const uint8_t *p = data;
    while (len) {
        size_t n = 0;
        int r = ws->t.write(ws->t.ctx, p, len, &n, err);
        if (r < 0)
            return r;
        if (r == SP_WS_AGAIN) {
            if ((r = wait_io(ws, POLLOUT, deadline, "sending", err)) < 0)
                return r;
            continue;
        }
        p += n;
        len -= n;
    }
    return 0;
}

/* Read more bytes into ws->in (appending). 0, or an error; a peer that
 * closed is an error that says so. */
static int fill(sp_ws *ws, int64_t deadline, const char *what, sp_error **err)
{
    if (ws->pos == ws->len)
        ws->pos = ws->len = 0;
    if (ws->len == RECV_CHUNK) { /* compact: the decoder consumed a prefix */
        memmove(ws->in, ws->in + ws->pos, ws->len - ws->pos);
        ws->len -= ws->pos;
        ws->pos = 0;
    }
    for (;;) {
        size_t n = 0;
        int r = ws->t.read(ws->t.ctx, ws->in + ws->len, RECV_CHUNK - ws->len, &n, err);
        if (r < 0)
            return r;
        if (r == 0) {
            if (n == 0)
                return sp_err_set(err, SP_ERROR, 0,
                                  "websocket: the server closed the connection %s", what);
            ws->len += n;
            return 0;
        }
        if ((r = wait_io(ws, POLLIN, deadline, what, err)) < 0)
            return r;
    }
}

/* ----------------------------------------------------------- handshake -- */

int sp_ws_make_key(char out[25], sp_error **err)
{
    uint8_t raw[16];
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
        return sp_err_errno(err, errno, "websocket: getrandom", NULL);
    sp_base64_write(out, raw, sizeof(raw));
    return 0;
}

void sp_ws_accept_for(char out[29], const char *key)
{
    sp_sha1 c;
    uint8_t md[20];
    sp_sha1_init(&c);
    sp_sha1_update(&c, key, strlen(key));
    sp_sha1_update(&c, WS_GUID, strlen(WS_GUID));
    sp_sha1_final(&c, md);
    sp_base64_write(out, md, sizeof(md));
}

/* A header's value in a response head (lines end in CRLF or LF), trimmed;
 * NULL when absent. Writes at most cap-1 bytes to buf. A repeated header
 * is joined with ", " as HTTP allows. */
static const char *header_value(const char *head, const char *name, char *buf, size_t cap)
{
    size_t nl = strlen(name), used = 0;
    bool found = false;
    const char *line = strchr(head, '\n');
    while (line && line[1]) {
        line++;
        const char *end = strchr(line, '\n');
        if (!end)
            break;
        if ((size_t)(end - line) > nl && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1, *ve = end;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            int w = snprintf(buf + used, cap - used, "%s%.*s", found ? ", " : "", (int)(ve - v), v);
            if (w > 0)
                used = used + (size_t)w >= cap ? cap - 1 : used + (size_t)w;
            found = true;
        }
        line = end;
    }
    return found ? buf : NULL;
}

/* Whether a comma-separated header value lists tok (case-insensitive). */
static bool list_has(const char *v, const char *tok)
{
    size_t tl = strlen(tok);
    while (v && *v) {
        while (*v == ' ' || *v == '\t' || *v == ',')
            v++;
        size_t n = strcspn(v, ",");
        size_t m = n;
        while (m && (v[m - 1] == ' ' || v[m - 1] == '\t'))
            m--;
        if (m == tl && strncasecmp(v, tok, tl) == 0)
            return true;
        v += n;
    }
    return false;
}

/* Check a complete response head (NUL-terminated). */
static int check_answer(sp_ws *ws, const char *head, const char *key, const sp_ws_opts *o,
                        sp_error **err)
{
    const char *s = head + 9;
    if (strncmp(head, "HTTP/1.1 ", 9) != 0 || s[0] < '1' || s[0] > '5' || s[1] < '0' ||
        s[1] > '9' || s[2] < '0' || s[2] > '9')
        return sp_err_set(err, SP_ERROR, 0, "websocket: the server did not answer with HTTP/1.1");
    int status = (s[0] - '0') * 100 + (s[1] - '0') * 10 + (s[2] - '0');
    if (status != 101) {
        int code = status == 401 || status == 403 ? SP_EDENIED
                   : status == 404                ? SP_ENOTFOUND
                                                  : SP_ERROR;
        size_t rl = strcspn(s, "\r\n");
        return sp_err_set(err, code, 0, "websocket: the server refused the upgrade: %.*s",
                          (int)(rl > 200 ? 200 : rl), s);
    }
    char v[512];
    if (!list_has(header_value(head, "Upgrade", v, sizeof(v)), "websocket"))
        return sp_err_set(err, SP_ERROR, 0, "websocket: 101 answer without Upgrade: websocket");
    if (!list_has(header_value(head, "Connection", v, sizeof(v)), "upgrade"))
        return sp_err_set(err, SP_ERROR, 0, "websocket: 101 answer without Connection: upgrade");
    char want[29];
    sp_ws_accept_for(want, key);
    const char *acc = header_value(head, "Sec-WebSocket-Accept", v, sizeof(v));
    if (!acc || strcmp(acc, want) != 0)
        return sp_err_set(err, SP_ERROR, 0,
                          "websocket: the server's Sec-WebSocket-Accept does not match the key");
    if (header_value(head, "Sec-WebSocket-Extensions", v, sizeof(v)))
        return sp_err_set(err, SP_ERROR, 0,
                          "websocket: the server chose an extension that was not offered");
    const char *proto = header_value(head, "Sec-WebSocket-Protocol", v, sizeof(v));
    bool offered = o->protocols && o->protocols[0];
    if (!proto && offered)
        return sp_err_set(err, SP_ERROR, 0,
                          "websocket: the server accepted none of the offered subprotocols");
    if (proto) {
        bool ok = false;
        for (size_t i = 0; offered && o->protocols[i] && !ok; i++)
            ok = strcmp(o->protocols[i], proto) == 0;
        if (!ok)
            return sp_err_set(
                err, SP_ERROR, 0,
                "websocket: the server chose a subprotocol that was not offered: %.100s", proto);
        snprintf(ws->protocol, sizeof(ws->protocol), "%s", proto);
    }
    return 0;
}

/* A header value we send must not break the request. */
static bool header_safe(const char *v)
{
    return v && !strpbrk(v, "\r\n");
}

int sp_ws_handshake(sp_ws **out, sp_ws_transport t, const char *host, const char *path,
                    const sp_ws_opts *opts, sp_error **err)
{
    *out = NULL;
    sp_ws_opts o = opts ? *opts : (sp_ws_opts)SP_WS_OPTS_INIT;
    sp_ws *ws = sp_xcalloc(1, sizeof(*ws));
    ws->t = t;
    ws->open = true;
    ws->timeout_ms = o.timeout_ms > 0 ? o.timeout_ms : 30000;
    ws->in = sp_xmalloc(RECV_CHUNK);
    sp_ws_decoder_init(&ws->dec, o.max_message);
    sp_buf req = SP_BUF_INIT;
    int rc = 0;
    if (!header_safe(host) || !header_safe(path) || path[0] != '/' ||
        (o.bearer_token && !header_safe(o.bearer_token))) {
        rc = sp_err_set(err, SP_EINVAL, 0, "websocket: a line break in the host, path or token");
        goto done;
    }
    char key[25];
    if ((rc = sp_ws_make_key(key, err)) < 0)
        goto done;
    sp_buf_printf(&req,
                  "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n",
                  path, host, key);
    for (size_t i = 0; o.protocols && o.protocols[i]; i++) {
        size_t pl = strlen(o.protocols[i]);
        if (!header_safe(o.protocols[i]) || strchr(o.protocols[i], ',') || pl == 0 ||
            pl >= sizeof(ws->protocol)) {
            rc = sp_err_set(err, SP_EINVAL, 0, "websocket: a bad subprotocol name");
            goto done;
        }
        sp_buf_printf(&req, "Sec-WebSocket-Protocol: %s\r\n", o.protocols[i]);
    }
    if (o.bearer_token)
        sp_buf_printf(&req, "Authorization: Bearer %s\r\n", o.bearer_token);
    sp_buf_adds(&req, "\r\n");
    int64_t deadline = deadline_after(ws->timeout_ms);
    if ((rc = send_raw(ws, req.data, req.len, deadline, err)) < 0)
        goto done;
    /* Read the head; bytes past it are the first frames. */
    for (;;) {
        if (ws->len == RECV_CHUNK || ws->len > HEAD_MAX) {
            rc = sp_err_set(err, SP_ERROR, 0, "websocket: the answer's head is too long");
            goto done;
        }
        if ((rc = fill(ws, deadline, "during the handshake", err)) < 0)
            goto done;
        uint8_t *e = memmem(ws->in, ws->len, "\r\n\r\n", 4);
        if (!e)
            continue;
        size_t hl = (size_t)(e - ws->in) + 4;
        if (memchr(ws->in, '\0', hl)) {
            rc = sp_err_set(err, SP_ERROR, 0, "websocket: NUL byte in the answer's head");
            goto done;
        }
        cleanup_free char *head = sp_xstrndup((const char *)ws->in, hl);
        if ((rc = check_answer(ws, head, key, &o, err)) < 0)
            goto done;
        ws->pos = hl;
        break;
    }
    *out = steal_pointer(&ws);
done:
    sp_buf_dispose(&req);
    sp_ws_free(ws);
    return rc;
}

const char *sp_ws_protocol(const sp_ws *ws)
{
    return ws->protocol;
}

/* ------------------------------------------------------------ messages -- */

static void shut(sp_ws *ws)
{
    if (ws->open && ws->t.close)
        ws->t.close(ws->t.ctx);
    ws->open = false;
}

static int send_frame(sp_ws *ws, int opcode, bool fin, const void *data, size_t len,
                      int64_t deadline, sp_error **err)
{
    if (!ws->open)
        return sp_err_set(err, SP_ERROR, 0, "websocket: the connection is closed");
    sp_buf f = SP_BUF_INIT;
    int rc = sp_ws_encode(&f, opcode, fin, data, len, err);
    if (rc == 0)
        rc = send_raw(ws, f.data, f.len, deadline, err);
    sp_buf_dispose(&f);
    if (rc < 0 && rc != SP_EINVAL)
        shut(ws);
    return rc;
}

int sp_ws_send(sp_ws *ws, int opcode, const void *data, size_t len, size_t frag, sp_error **err)
{
    if (opcode != SP_WS_TEXT && opcode != SP_WS_BINARY)
        return sp_err_set(err, SP_EINVAL, 0, "websocket: only text or binary messages are sent");
    if (ws->close_sent)
        return sp_err_set(err, SP_ERROR, 0, "websocket: the connection is closing");
    if (frag == 0 || frag > len)
        frag = len;
    int64_t deadline = deadline_after(ws->timeout_ms);
    const uint8_t *p = data;
    size_t off = 0;
    do {
        size_t n = len - off < frag ? len - off : frag;
        int rc = send_frame(ws, off == 0 ? opcode : SP_WS_CONT, off + n == len, p + off, n,
                            deadline, err);
        if (rc < 0)
            return rc;
        off += n;
    } while (off < len);
    return 0;
}

int sp_ws_ping(sp_ws *ws, const void *data, size_t len, sp_error **err)
{
    return send_frame(ws, SP_WS_PING, true, data, len, deadline_after(ws->timeout_ms), err);
}

/* The next message of any kind. */
static int next_msg(sp_ws *ws, sp_ws_msg *out, int64_t deadline, sp_error **err)
{
    if (!ws->open)
        return sp_err_set(err, SP_ERROR, 0, "websocket: the connection is closed");
    for (;;) {
        size_t used = 0;
        int rc = sp_ws_decode(&ws->dec, ws->in + ws->pos, ws->len - ws->pos, &used, out, err);
        ws->pos += used;
        if (rc < 0) {
            if (ws->dec.fail_code && !ws->close_sent) {
                uint8_t cf[2] = {(uint8_t)(ws->dec.fail_code >> 8), (uint8_t)ws->dec.fail_code};
                send_frame(ws, SP_WS_CLOSE, true, cf, 2, sp_now_ms() + 1000, NULL);
            }
            shut(ws);
            return rc;
        }
        if (rc == 1)
            return 0;
        rc = fill(ws, deadline,
                  ws->dec.in_payload || ws->dec.msg_opcode ? "in the middle of a message"
                                                           : "between messages",
                  err);
        if (rc < 0) {
            if (rc != SP_ETIMEOUT)
                shut(ws);
            return rc;
        }
    }
}

int sp_ws_recv(sp_ws *ws, sp_ws_msg *out, int timeout_ms, sp_error **err)
{
    int64_t deadline = deadline_after(timeout_ms);
    for (;;) {
        int rc = next_msg(ws, out, deadline, err);
        if (rc < 0)
            return rc;
        if (out->opcode == SP_WS_PING) {
            if ((rc = send_frame(ws, SP_WS_PONG, true, out->data, out->len,
                                 deadline_after(ws->timeout_ms), err)) < 0)
                return rc;
            continue;
        }
        if (out->opcode == SP_WS_PONG)
            continue;
        if (out->opcode == SP_WS_CLOSE) {
            /* Echo the code (section 5.5.1); the server then closes TCP. */
            if (!ws->close_sent) {
                uint8_t cf[2] = {(uint8_t)(out->close_code >> 8), (uint8_t)out->close_code};
                bool has = out->close_code != SP_WS_CLOSE_NO_STATUS;
                send_frame(ws, SP_WS_CLOSE, true, cf, has ? 2 : 0, deadline_after(1000), NULL);
                ws->close_sent = true;
            }
            shut(ws);
        }
        return 0;
    }
}

int sp_ws_close(sp_ws *ws, unsigned code, const char *reason, sp_error **err)
{
    if (!ws->open)
        return 0;
    if (!sp_ws_close_code_valid(code))
        return sp_err_set(err, SP_EINVAL, 0, "websocket: invalid close code %u", code);
    uint8_t f[SP_WS_CONTROL_MAX];
    size_t rl = reason ? sp_utf8_cut(reason, strlen(reason), SP_WS_CONTROL_MAX - 2) : 0;
    f[0] = (uint8_t)(code >> 8);
    f[1] = (uint8_t)code;
    if (rl)
        memcpy(f + 2, reason, rl);
    int64_t deadline = deadline_after(ws->timeout_ms);
    int rc = send_frame(ws, SP_WS_CLOSE, true, f, 2 + rl, deadline, err);
    if (rc < 0)
        return rc;
    ws->close_sent = true;
    /* Drain until the server's close (data still in flight is dropped). */
    for (;;) {
        sp_ws_msg m;
        sp_error *e2 = NULL;
        rc = next_msg(ws, &m, deadline, &e2);
        if (rc < 0) {
            sp_error_free(e2);
            shut(ws);
            return 0; /* our close went out; how the server hung up is its business */
        }
        if (m.opcode == SP_WS_CLOSE) {
            shut(ws);
            return 0;
        }
    }
}

void sp_ws_free(sp_ws *ws)
{
    if (!ws)
        return;
    shut(ws);
    sp_ws_decoder_dispose(&ws->dec);
    free(ws->in);
    free(ws);
}

int sp_ws_fd(sp_ws *ws)
{
    return ws->open ? ws->t.fd(ws->t.ctx) : -1;
}

bool sp_ws_buffered(const sp_ws *ws)
{
    return ws->open && ws->pos < ws->len;
}
