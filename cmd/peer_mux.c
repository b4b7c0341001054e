/* The peer's multiplexer (peer_mux.h): sp_mcp_serve runs on a thread of
 * its own, reading and writing one end of a socketpair; this thread holds
 * the other end and every client connection, all non-blocking, in one
 * poll loop. Requests go to the server with internal ids (a counter) and
 * progress tokens equal to them; the server's answers and progress come
 * back to the client that asked, with its own id and token. Nothing here
 * ever blocks on one client: answers wait in the client's buffer (capped),
 * requests wait in the server's (the clients are not read while it is
 * full; the server reads eagerly and answers a flood as busy). */
#include "peer_mux.h"
#include "json.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base.h"
#include "cli.h"

/* Requests waiting to reach the server past which clients are not read. */
#define TO_SERVER_MAX ((size_t)8 << 20)

typedef struct client {
    int fd;
    unsigned serial;
    sp_buf in;
    sp_buf out;
    size_t out_off;
    size_t open;   /* calls of its own in the list */
    bool read_eof; /* it closed its side: answer what it asked, then close */
    bool dead;     /* dropped: freed at the end of the loop's round */
    struct client *next;
} client;

/* A request the server has (or, for an initialize waiting on the first
 * one, will answer from the cache: iid 0). */
typedef struct call {
    int64_t iid;
    client *to;   /* whom the answer goes to; NULL: gone (resumable) */
    cJSON *id;    /* the client's id */
    cJSON *token; /* the client's progressToken, or NULL */
    char *key;    /* "sandpod/call", or NULL */
    bool init;
    bool runs; /* tools/call: worth cancelling when its client goes */
    struct call *prev, *next;
} call;

/* A finished resumable call's answer. */
typedef struct kept {
    char *key;
    cJSON *answer;
    size_t bytes;
    int64_t at;
    struct kept *next;
} kept;

typedef struct mux {
    const sp_mcp_opts *opts;
    int sfd; /* our end of the server's socketpair */
    sp_buf from_server;
    sp_buf to_server;
    size_t to_server_off;
    client *clients;
    size_t n_clients;
    unsigned serial;
    call *calls, *calls_tail; /* oldest first: the server answers in about that order */
    int64_t next_iid;
    kept *kept_head, *kept_tail;
    size_t kept_n, kept_bytes;
    cJSON *init_result; /* the server's answer to the first initialize */
    bool init_sent, initialized_sent;
    bool stopping;
} mux;

static void logf_(const mux *m, const char *fmt, ...) CLI_PRINTF(2, 3);
static void logf_(const mux *m, const char *fmt, ...)
{
    if (!m->opts->verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("sandpod peer: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void call_free(call *c)
{
    cJSON_Delete(c->id);
    cJSON_Delete(c->token);
    free(c->key);
    free(c);
}

/* Calls are a list in the order they were made, unlinked in O(1), so a
 * flood of a hundred thousand requests costs linear time, not quadratic. */
static void call_link(mux *m, call *c)
{
    if (c->to)
        c->to->open++;
    c->next = NULL;
    c->prev = m->calls_tail;
    if (m->calls_tail)
        m->calls_tail->next = c;
    else
        m->calls = c;
    m->calls_tail = c;
}

static void call_unlink(mux *m, call *c)
{
    if (c->to)
        c->to->open--;
    if (c->prev)
        c->prev->next = c->next;
    else
        m->calls = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        m->calls_tail = c->prev;
    c->prev = c->next = NULL;
}

/* From the oldest: an answer is for one of the first calls still open. */
static call *call_by_iid(mux *m, int64_t iid)
{
    for (call *c = m->calls; c; c = c->next)
        if (c->iid == iid && iid)
            return c;
    return NULL;
}

static call *call_by_key(mux *m, const char *key)
{
    for (call *c = m->calls; c; c = c->next)
        if (c->key && strcmp(c->key, key) == 0)
            return c;
    return NULL;
}

static kept *kept_by_key(mux *m, const char *key)
{
    for (kept *k = m->kept_head; k; k = k->next)
        if (strcmp(k->key, key) == 0)
            return k;
    return NULL;
}

/* Drop the oldest answers past the bounds. */
static void kept_trim(mux *m)
{
    int64_t now = sp_now_ms();
    while (m->kept_head) {
        kept *k = m->kept_head;
        bool over = m->kept_n > PEER_MUX_KEEP_KEYS_MAX ||
                    (m->kept_bytes > PEER_MUX_KEEP_BYTES && m->kept_n > 1) ||
                    (m->kept_n > PEER_MUX_KEEP_KEYS && now - k->at >= PEER_MUX_KEEP_MS);
        if (!over)
            break;
        m->kept_head = k->next;
        if (!m->kept_head)
            m->kept_tail = NULL;
        m->kept_n--;
        m->kept_bytes -= k->bytes;
        free(k->key);
        cJSON_Delete(k->answer);
        free(k);
    }
}

static void keep_answer(mux *m, const char *key, const cJSON *answer, size_t bytes)
{
    kept *k = sp_xcalloc(1, sizeof(*k));
    k->key = sp_xstrdup(key);
    k->answer = cJSON_Duplicate(answer, true);
    k->bytes = bytes + strlen(key);
    k->at = sp_now_ms();
    if (m->kept_tail)
        m->kept_tail->next = k;
    else
        m->kept_head = k;
    m->kept_tail = k;
    m->kept_n++;
    m->kept_bytes += k->bytes;
    kept_trim(m);
}

/* Close `cl` (its memory goes in reap(): a caller up the stack may hold it). */
static void client_close(mux *m, client *cl)
{
    if (cl->dead)
        return;
    cl->dead = true;
    m->n_clients--;
    close(cl->fd);
    cl->fd = -1;
}

static void reap(mux *m)
{
    for (client **p = &m->clients; *p;) {
        client *cl = *p;
        if (!cl->dead) {
            p = &cl->next;
            continue;
        }
        *p = cl->next;
        sp_buf_dispose(&cl->in);
        sp_buf_dispose(&cl->out);
        free(cl);
    }
}

static void to_server(mux *m, const cJSON *msg)
{
    char *text = cJSON_PrintUnformatted(msg);
    if (!text)
        return;
    sp_buf_adds(&m->to_server, text);
    sp_buf_addc(&m->to_server, '\n');
    free(text);
}

static void cancel_in_server(mux *m, int64_t iid)
{
    cJSON *n = cJSON_CreateObject();
    cJSON_AddStringToObject(n, "jsonrpc", "2.0");
    cJSON_AddStringToObject(n, "method", "notifications/cancelled");
    cJSON *p = cJSON_AddObjectToObject(n, "params");
    cJSON_AddNumberToObject(p, "requestId", (double)iid);
    cJSON_AddStringToObject(p, "reason", "the client disconnected");
    to_server(m, n);
    cJSON_Delete(n);
}

/* The client is gone: its calls are cancelled, but for the resumable ones
 * (and the first initialize, whose answer every client needs). */
static void client_drop(mux *m, client *cl, const char *why)
{
    logf_(m, "client %u gone (%s; %zu of its requests open)", cl->serial, why, cl->open);
    for (call *c = m->calls, *next; c; c = next) {
        next = c->next;
        if (c->to != cl)
            continue;
        if (c->key || (c->init && c->iid)) {
            c->to = NULL;
            cl->open--;
            continue;
        }
        if (c->iid && c->runs)
            cancel_in_server(m, c->iid);
        call_unlink(m, c);
        call_free(c);
    }
    client_close(m, cl);
}

/* Queue `msg` for `cl`; false (and the client dropped) past its cap. */
static bool send_to(mux *m, client *cl, const cJSON *msg)
{
    if (cl->dead)
        return false;
    char *text = cJSON_PrintUnformatted(msg);
    if (!text)
        return true;
    size_t len = strlen(text);
    if (cl->out.len - cl->out_off + len + 1 > PEER_MUX_CLIENT_BUFFER) {
        free(text);
        client_drop(m, cl, "it does not read its answers");
        return false;
    }
    sp_buf_add(&cl->out, text, len);
    sp_buf_addc(&cl->out, '\n');
    free(text);
    return true;
}

static void send_error_to(mux *m, client *cl, const cJSON *id, int code, const char *text)
{
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "jsonrpc", "2.0");
    cJSON_AddItemToObject(e, "id", id ? cJSON_Duplicate(id, true) : cJSON_CreateNull());
    cJSON *err = cJSON_AddObjectToObject(e, "error");
    cJSON_AddNumberToObject(err, "code", code);
    cJSON_AddStringToObject(err, "message", text);
    send_to(m, cl, e);
    cJSON_Delete(e);
}

/* `answer` (a response, or the cached initialize result when `result` is
 * set) to `cl` with its own id. */
static void answer_to(mux *m, client *cl, const cJSON *id, const cJSON *answer, bool result)
{
    cJSON *a;
    if (result) {
        a = cJSON_CreateObject();
        cJSON_AddStringToObject(a, "jsonrpc", "2.0");
        cJSON_AddItemToObject(a, "id", cJSON_Duplicate(id, true));
        cJSON_AddItemToObject(a, "result", cJSON_Duplicate(answer, true));
    } else {
        a = cJSON_Duplicate(answer, true);
        cJSON_ReplaceItemInObjectCaseSensitive(a, "id", cJSON_Duplicate(id, true));
    }
    send_to(m, cl, a);
    cJSON_Delete(a);
}

static cJSON *meta_of(cJSON *msg)
{
    cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
    return cJSON_IsObject(params) ? cJSON_GetObjectItemCaseSensitive(params, "_meta") : NULL;
}

static bool valid_id(const cJSON *id)
{
    return cJSON_IsString(id) ||
           (cJSON_IsNumber(id) && id->valuedouble == (double)(int64_t)id->valuedouble);
}

static void client_initialize(mux *m, client *cl, cJSON *msg, const cJSON *id)
{
    if (m->init_result) {
        answer_to(m, cl, id, m->init_result, true);
        return;
    }
    call *c = sp_xcalloc(1, sizeof(*c));
    c->to = cl;
    c->id = cJSON_Duplicate(id, true);
    c->init = true;
    if (!m->init_sent) {
        /* The server asks only one client (none here): no elicitation. */
        cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
        cJSON *caps = cJSON_IsObject(params)
                          ? cJSON_GetObjectItemCaseSensitive(params, "capabilities")
                          : NULL;
        if (cJSON_IsObject(caps))
            cJSON_DeleteItemFromObjectCaseSensitive(caps, "elicitation");
        c->iid = ++m->next_iid;
        cJSON_ReplaceItemInObjectCaseSensitive(msg, "id", cJSON_CreateNumber((double)c->iid));
        to_server(m, msg);
        m->init_sent = true;
    }
    call_link(m, c);
}

static void client_request(mux *m, client *cl, cJSON *msg, const cJSON *id, const char *method)
{
    if (strcmp(method, "initialize") == 0) {
        client_initialize(m, cl, msg, id);
        return;
    }
    cJSON *meta = meta_of(msg);
    const cJSON *jkey =
        cJSON_IsObject(meta) ? cJSON_GetObjectItemCaseSensitive(meta, "sandpod/call") : NULL;
    const char *key = NULL;
    if (jkey) {
        if (!cJSON_IsString(jkey) || !jkey->valuestring[0] ||
            strlen(jkey->valuestring) > PEER_MUX_MAX_KEY) {
            send_error_to(m, cl, id, -32602,
                          "invalid params: _meta \"sandpod/call\" must be a string of 1 to 128 "
                          "bytes");
            return;
        }
        key = jkey->valuestring;
    }
    cJSON *tok =
        cJSON_IsObject(meta) ? cJSON_GetObjectItemCaseSensitive(meta, "progressToken") : NULL;
    if (key) {
        kept *k = kept_by_key(m, key);
        if (k) {
            logf_(m, "client %u: %s replayed", cl->serial, key);
            answer_to(m, cl, id, k->answer, false);
            return;
        }
        call *c = call_by_key(m, key);
        if (c) {
            /* Running: this connection takes over its answer. */
            logf_(m, "client %u: %s resumed", cl->serial, key);
            if (c->to)
                c->to->open--;
            c->to = cl;
            cl->open++;
            cJSON_Delete(c->id);
            c->id = cJSON_Duplicate(id, true);
            cJSON_Delete(c->token);
            c->token = tok ? cJSON_Duplicate(tok, true) : NULL;
            return;
        }
    }
    call *c = sp_xcalloc(1, sizeof(*c));
    c->iid = ++m->next_iid;
    c->to = cl;
    c->id = cJSON_Duplicate(id, true);
    c->key = key ? sp_xstrdup(key) : NULL;
    c->runs = strcmp(method, "tools/call") == 0;
    if (tok) {
        c->token = cJSON_Duplicate(tok, true);
        cJSON_ReplaceItemInObjectCaseSensitive(meta, "progressToken",
                                               cJSON_CreateNumber((double)c->iid));
    }
    cJSON_ReplaceItemInObjectCaseSensitive(msg, "id", cJSON_CreateNumber((double)c->iid));
    call_link(m, c);
    to_server(m, msg);
}

static void client_notification(mux *m, client *cl, cJSON *msg, const char *method)
{
    if (strcmp(method, "notifications/initialized") == 0) {
        if (m->initialized_sent)
            return;
        m->initialized_sent = true;
    } else if (strcmp(method, "notifications/cancelled") == 0) {
        cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
        const cJSON *rid =
            cJSON_IsObject(params) ? cJSON_GetObjectItemCaseSensitive(params, "requestId") : NULL;
        call *c = m->calls;
        while (c && !(c->to == cl && c->iid && !c->init && rid && cJSON_Compare(c->id, rid, true)))
            c = c->next;
        if (!c)
            return; /* not (or no longer) running: nothing to cancel */
        cJSON_ReplaceItemInObjectCaseSensitive(params, "requestId",
                                               cJSON_CreateNumber((double)c->iid));
        call_unlink(m, c); /* a cancelled call gets no answer */
        call_free(c);
    }
    to_server(m, msg);
}

/* One line from a client; false when the client was dropped. */
static int client_line(const char *line, size_t len, void *ud, sp_error **err)
{
    (void)err;
    void **pair = ud;
    mux *m = pair[0];
    client *cl = pair[1];
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
        i++;
    if (i == len)
        return 0;
    cJSON *msg = cJSON_ParseWithLength(line, len);
    if (!msg) {
        send_error_to(m, cl, NULL, -32700, "parse error: not valid JSON");
        return 0;
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");
    if (!cJSON_IsObject(msg)) {
        send_error_to(m, cl, NULL, -32600,
                      cJSON_IsArray(msg) ? "invalid request: batches are not supported"
                                         : "invalid request: a message is a JSON object");
    } else if (!method && id) {
        /* A client's answer: the server asks none of them anything. */
    } else if (!cJSON_IsString(method)) {
        send_error_to(m, cl, valid_id(id) ? id : NULL, -32600,
                      "invalid request: \"method\" must be a string");
    } else if (id && !valid_id(id)) {
        send_error_to(m, cl, NULL, -32600,
                      "invalid request: \"id\" must be a string or an integer");
    } else if (id) {
        cJSON *own = cJSON_Duplicate(id, true);
        client_request(m, cl, msg, own, method->valuestring);
        cJSON_Delete(own);
    } else {
        client_notification(m, cl, msg, method->valuestring);
    }
    cJSON_Delete(msg);
    return cl->dead ? 1 : 0; /* dropped: read no further */
}

/* Read what `cl` sent; false when it was dropped. */
static bool client_read(mux *m, client *cl)
{
    char buf[65536];
    ssize_t n = recv(cl->fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return true;
        client_drop(m, cl, strerror(errno));
        return false;
    }
    void *pair[2] = {m, cl};
    if (n == 0) {
        cl->read_eof = true;
        if (cl->in.len) /* a last line without its newline */
            client_line(cl->in.data, cl->in.len, pair, NULL);
        cl->in.len = 0;
        return !cl->dead;
    }
    /* An answer may drop the client while its lines are read (its buffer
     * overflows): client_line stops the reading then. */
    int r = sp_buf_lines(&cl->in, buf, (size_t)n, PEER_MUX_MAX_LINE, client_line, pair, NULL);
    if (cl->dead)
        return false;
    if (r == SP_ETOOBIG) {
        client_drop(m, cl, "a message longer than the limit");
        return false;
    }
    return true;
}

static bool client_write(mux *m, client *cl)
{
    size_t left = cl->out.len - cl->out_off;
    ssize_t n = send(cl->fd, cl->out.data + cl->out_off, left, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return true;
        client_drop(m, cl, strerror(errno));
        return false;
    }
    cl->out_off += (size_t)n;
    if (cl->out_off == cl->out.len) {
        cl->out.len = 0;
        cl->out_off = 0;
    }
    return true;
}

/* An answer from the server. */
static void server_answer(mux *m, cJSON *msg, size_t bytes)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    call *c = cJSON_IsNumber(id) ? call_by_iid(m, (int64_t)id->valuedouble) : NULL;
    if (!c)
        return; /* cancelled meanwhile */
    call_unlink(m, c);
    if (c->init) {
        const cJSON *res = cJSON_GetObjectItemCaseSensitive(msg, "result");
        if (res)
            m->init_result = cJSON_Duplicate(res, true);
        else
            m->init_sent = false; /* the next initialize tries again */
        if (c->to)
            answer_to(m, c->to, c->id, msg, false);
        for (call *w = m->calls, *next; w; w = next) {
            next = w->next;
            if (!w->init || w->iid)
                continue;
            call_unlink(m, w);
            answer_to(m, w->to, w->id, msg, false);
            call_free(w);
        }
        call_free(c);
        return;
    }
    if (c->key) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(msg, "error");
        const cJSON *code = e ? cJSON_GetObjectItemCaseSensitive(e, "code") : NULL;
        /* "Busy" did not run it: the same key may try again. */
        if (!(cJSON_IsNumber(code) && code->valueint == SP_MCP_BUSY))
            keep_answer(m, c->key, msg, bytes);
    }
    if (c->to)
        answer_to(m, c->to, c->id, msg, false);
    call_free(c);
}

static int server_line(const char *line, size_t len, void *ud, sp_error **err)
{
    (void)err;
    mux *m = ud;
    /* Exact: a result's integers past 2^53 (mtime_ns) reach the client as
     * the server wrote them. */
    cJSON *msg = sp_json_parse_exact(line, len);
    if (!msg)
        return 0;
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");
    if (!method) {
        server_answer(m, msg, len);
    } else if (cJSON_IsString(method) &&
               strcmp(method->valuestring, "notifications/progress") == 0) {
        cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
        const cJSON *tok = cJSON_IsObject(params)
                               ? cJSON_GetObjectItemCaseSensitive(params, "progressToken")
                               : NULL;
        call *c = cJSON_IsNumber(tok) ? call_by_iid(m, (int64_t)tok->valuedouble) : NULL;
        if (c && c->to && c->token) {
            cJSON_ReplaceItemInObjectCaseSensitive(params, "progressToken",
                                                   cJSON_Duplicate(c->token, true));
            send_to(m, c->to, msg);
        }
    }
    cJSON_Delete(msg);
    return 0;
}

struct server_thread {
    sp_tools *tools;
    int fd;
    const sp_mcp_opts *opts;
    int rc;
    sp_error *err;
};

static void *server_main(void *arg)
{
    struct server_thread *st = arg;
    st->rc = sp_mcp_serve(st->tools, st->fd, st->fd, st->opts, &st->err);
    /* Our end sees the end of the server's output. */
    shutdown(st->fd, SHUT_RDWR);
    return NULL;
}

static void accept_client(mux *m, int listen_fd)
{
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return; /* it went away before we took it */
    client *cl = sp_xcalloc(1, sizeof(*cl));
    cl->fd = fd;
    cl->serial = ++m->serial;
    cl->next = m->clients;
    m->clients = cl;
    m->n_clients++;
    logf_(m, "client %u connected", cl->serial);
}

/* Read the server's output; false at its end. */
static bool server_read(mux *m)
{
    char buf[65536];
    ssize_t n = recv(m->sfd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    if (n == 0)
        return false;
    /* The server's lines are bounded by what it was sent and by its tool
     * caps; a longer one cannot be routed and is skipped. */
    if (sp_buf_lines(&m->from_server, buf, (size_t)n, SIZE_MAX / 2, server_line, m, NULL) ==
        SP_ETOOBIG)
        m->from_server.len = 0;
    return true;
}

static void server_write(mux *m)
{
    size_t left = m->to_server.len - m->to_server_off;
    ssize_t n =
        send(m->sfd, m->to_server.data + m->to_server_off, left, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n <= 0)
        return;
    m->to_server_off += (size_t)n;
    if (m->to_server_off == m->to_server.len) {
        m->to_server.len = 0;
        m->to_server_off = 0;
    }
}

/* Is anything still owed to `cl`? */
static bool owed(const mux *m, const client *cl)
{
    if (cl->out.len > cl->out_off)
        return true;
    for (const call *c = m->calls; c; c = c->next)
        if (c->to == cl)
            return true;
    return false;
}

static void mux_loop(mux *m, int listen_fd)
{
    struct pollfd *p = NULL;
    client **who = NULL;
    size_t cap = 0;
    for (;;) {
        if (!m->stopping && m->opts->should_stop && m->opts->should_stop(m->opts->userdata)) {
            /* The server sees should_stop too; its end of input makes sure. */
            m->stopping = true;
            shutdown(m->sfd, SHUT_WR);
        }
        size_t need = m->n_clients + 2;
        if (need > cap) {
            cap = need * 2;
            p = sp_xrealloc(p, cap * sizeof(*p));
            who = sp_xrealloc(who, cap * sizeof(*who));
        }
        size_t n = 0;
        bool backlog = m->to_server.len - m->to_server_off > TO_SERVER_MAX;
        p[n++] = (struct pollfd){
            m->sfd, (short)(POLLIN | (!m->stopping && m->to_server.len ? POLLOUT : 0)), 0};
        p[n++] = (struct pollfd){
            m->stopping || m->n_clients >= PEER_MUX_MAX_CLIENTS ? -1 : listen_fd, POLLIN, 0};
        for (client *cl = m->clients; cl; cl = cl->next) {
            short ev = 0;
            if (!cl->read_eof && !backlog && !m->stopping && cl->open < PEER_MUX_CLIENT_CALLS)
                ev |= POLLIN;
            if (cl->out.len > cl->out_off)
                ev |= POLLOUT;
            who[n] = cl;
            p[n++] = (struct pollfd){cl->fd, ev, 0};
        }
        if (poll(p, n, 250) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[0].revents & POLLOUT)
            server_write(m);
        if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && !server_read(m))
            break; /* the server is done */
        if (p[1].revents & POLLIN)
            accept_client(m, listen_fd);
        for (size_t i = 2; i < n; i++) {
            client *cl = who[i];
            short rev = p[i].revents;
            if (cl->dead || !rev)
                continue;
            if ((rev & POLLIN) && !client_read(m, cl))
                continue;
            if ((rev & POLLOUT) && !client_write(m, cl))
                continue;
            if (rev & (POLLHUP | POLLERR)) {
                /* Gone both ways (not a half close): what it sent is read. */
                while (!cl->read_eof && client_read(m, cl))
                    ;
                if (!cl->dead)
                    client_drop(m, cl, "disconnected");
            }
        }
        for (client *cl = m->clients; cl; cl = cl->next) {
            if (!cl->dead && cl->read_eof && !owed(m, cl)) {
                logf_(m, "client %u done", cl->serial);
                client_close(m, cl);
            }
        }
        reap(m);
        kept_trim(m);
    }
    free(p);
    free(who);
}

int peer_mux_serve(sp_tools *tools, int listen_fd, const sp_mcp_opts *opts, sp_error **err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return sp_err_set(err, SP_ERROR, errno, "socketpair");
    struct server_thread st = {.tools = tools, .fd = sv[0], .opts = opts};
    pthread_t th;
    int e = pthread_create(&th, NULL, server_main, &st);
    if (e) {
        close(sv[0]);
        close(sv[1]);
        return sp_err_set(err, SP_ERROR, e, "starting the server thread");
    }
    signal(SIGPIPE, SIG_IGN); /* a write to a client gone is an error, not a signal */
    mux m = {.opts = opts, .sfd = sv[1]};
    mux_loop(&m, listen_fd);
    /* The server ends on its own (should_stop) or has ended; its output
     * is no longer read, and a write it still makes fails. */
    shutdown(sv[1], SHUT_RDWR);
    pthread_join(th, NULL);
    close(sv[0]);
    close(sv[1]);
    for (client *cl = m.clients; cl; cl = cl->next)
        client_close(&m, cl);
    reap(&m);
    while (m.calls) {
        call *c = m.calls;
        m.calls = c->next;
        call_free(c);
    }
    for (kept *k = m.kept_head, *next; k; k = next) {
        next = k->next;
        free(k->key);
        cJSON_Delete(k->answer);
        free(k);
    }
    cJSON_Delete(m.init_result);
    sp_buf_dispose(&m.from_server);
    sp_buf_dispose(&m.to_server);
    /* Stopped, the server's complaint is only about our end of its pipe. */
    if (st.rc < 0 && !m.stopping && err) {
        *err = st.err;
        return st.rc;
    }
    sp_error_free(st.err);
    return 0;
}
