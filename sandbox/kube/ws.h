/* A WebSocket client (RFC 6455) over a byte transport: the handshake,
 * subprotocol choice, automatic pongs, the close handshake, deadlines.
 * Internal to kube/; the Kubernetes engine reaches pods/exec through it.
 *
 * Why our own: Debian 12's libcurl (7.88) is built without its WebSocket
 * API, so libcurl only connects (CURLOPT_CONNECT_ONLY: TCP, TLS, client
 * certificates, proxies) and this file speaks HTTP/1.1 Upgrade and the
 * framing on curl_easy_send/curl_easy_recv. */
#ifndef SANDPOD_WS_H
#define SANDPOD_WS_H

#include <stdbool.h>
#include <stddef.h>

#include "base.h"
#include "ws_frame.h"

/* A byte transport. read/write move what they can without blocking and
 * return 0 with *n set (read: *n == 0 means the peer closed), SP_WS_AGAIN
 * when nothing can move now (the client then polls fd()), or a negative
 * code with *err set. close releases everything (also ctx). */
#define SP_WS_AGAIN 1
typedef struct sp_ws_transport {
    void *ctx;
    int (*read)(void *ctx, void *buf, size_t cap, size_t *n, sp_error **err);
    int (*write)(void *ctx, const void *buf, size_t len, size_t *n, sp_error **err);
    int (*fd)(void *ctx);
    void (*close)(void *ctx);
} sp_ws_transport;

/* A transport over a connected socket (or socketpair end), which it owns
 * and makes non-blocking. */
sp_ws_transport sp_ws_transport_fd(int fd);

typedef struct sp_ws_opts {
    /* Subprotocols offered, most preferred first; NULL-terminated, or NULL. */
    const char *const *protocols;
    /* Sent as "Authorization: Bearer <token>" when set. */
    const char *bearer_token;
    /* A CA bundle for https:// (NULL: the system's); TLS is always verified. */
    const char *ca_file;
    int timeout_ms;     /* the handshake, each send, close; 0: 30 s */
    size_t max_message; /* 0: SP_WS_DEFAULT_LIMIT */
    /* sp_ws_connect(): called with the libcurl handle (a CURL *) after
     * sandpod's settings, before it connects: client certificates, a CA
     * held in memory (the Kubernetes client's TLS settings). NULL: none. */
    void (*configure)(void *userdata, void *curl);
    void *configure_userdata;
} sp_ws_opts;
#define SP_WS_OPTS_INIT                                                                            \
    {                                                                                              \
        NULL, NULL, NULL, 0, 0, NULL, NULL                                                         \
    }

typedef struct sp_ws sp_ws;

/* Run the opening handshake for GET path on host (the Host header) over t,
 * which *out then owns (also on failure: t is closed). A server that picks
 * no offered protocol, or one not offered, fails the handshake. Errors:
 * SP_ETIMEOUT, SP_EDENIED (401/403), SP_ENOTFOUND (404), SP_ERROR. */
int sp_ws_handshake(sp_ws **out, sp_ws_transport t, const char *host, const char *path,
                    const sp_ws_opts *opts, sp_error **err);

/* Connect to url (http://, https://, ws:// or wss://) through libcurl
 * (CURLOPT_CONNECT_ONLY) and run the handshake. */
int sp_ws_connect(sp_ws **out, const char *url, const sp_ws_opts *opts, sp_error **err);

/* The subprotocol the server chose ("" when none was offered). */
const char *sp_ws_protocol(const sp_ws *ws);

/* Send one whole message (SP_WS_TEXT or SP_WS_BINARY), as frames of at
 * most frag bytes each (0: one frame). */
int sp_ws_send(sp_ws *ws, int opcode, const void *data, size_t len, size_t frag, sp_error **err);

/* Wait up to timeout_ms (-1: forever) for the next data message. Pings are
 * answered and pongs dropped on the way. A close from the server is
 * answered and returned as an SP_WS_CLOSE message; after that, and after
 * any error, the connection is closed. A connection lost mid-message, or
 * silence past the deadline (SP_ETIMEOUT), is an error. */
int sp_ws_recv(sp_ws *ws, sp_ws_msg *out, int timeout_ms, sp_error **err);

/* Send a close frame (code, reason) and wait for the server's close. */
int sp_ws_close(sp_ws *ws, unsigned code, const char *reason, sp_error **err);

/* Send a ping with payload (at most 125 bytes). */
int sp_ws_ping(sp_ws *ws, const void *data, size_t len, sp_error **err);

void sp_ws_free(sp_ws *ws);

/* For a caller's own poll(): the transport's fd, and whether bytes already
 * read wait in the buffer (then sp_ws_recv() may have a message without
 * the fd becoming readable). A receive that times out keeps the
 * connection and what it had read of a message. */
int sp_ws_fd(sp_ws *ws);
bool sp_ws_buffered(const sp_ws *ws);

/* Base64 of 16 random bytes, and the Sec-WebSocket-Accept a server must
 * answer for key: base64(SHA-1(key + the RFC 6455 GUID)). */
int sp_ws_make_key(char out[25], sp_error **err);
void sp_ws_accept_for(char out[29], const char *key);

#endif
