/* Internals of the Podman client shared by its files. Not installed. */
#ifndef SANDPOD_PODMAN_INTERNAL_H
#define SANDPOD_PODMAN_INTERNAL_H

#include <cjson/cJSON.h>
#include "lazy_curl.h"

#include "base.h"
#include "log_internal.h"
#include "json.h"
#include "sandpod/podman.h"
#include "sandpod/sandbox.h"

/* Every libpod path starts with this; 4.0.0 is the oldest API the service
 * must speak (Podman 4.3 serves any v4 prefix). */
#define SP_PODMAN_API "/v4.0.0/libpod"

/* Largest JSON answer kept in memory. */
#define SP_PODMAN_MAX_BODY ((size_t)64 << 20)

struct sp_podman {
    char *url;         /* canonical: unix:///path or tcp://host:port */
    char *socket_path; /* unix sockets only */
    char *host;        /* tcp only */
    int port;          /* tcp only */
    char *base;        /* "http://d" or "http://host:port" */
    CURL *curl;
    unsigned connect_timeout_ms;
    unsigned timeout_ms;
    unsigned transfer_timeout_ms;
    bool started;
    sp_podman_host *host_info; /* /info, asked once */
    char *cache_dir;           /* where /info is kept between processes, or NULL */
};

/* A parsed service URL. */
typedef struct sp_podman_addr {
    char *url;
    char *socket_path;
    char *host;
    int port;
} sp_podman_addr;

int sp_podman_addr_parse(sp_podman_addr *out, const char *url, sp_error **err);
void sp_podman_addr_dispose(sp_podman_addr *a);

/* One request. Paths start with '/', are already escaped and include the
 * query string. */
typedef struct sp_http_req {
    const char *method;
    const char *path;
    const char *body; /* NULL: no body (or upload_fd) */
    size_t body_len;
    const char *content_type;
    int upload_fd;   /* -1, or read the body from here to EOF */
    int download_fd; /* -1, or write a 2xx body here instead of buffering */
    /* Called with each complete line of a 2xx body (streamed JSON); a
     * negative return stops the transfer with that code. */
    int (*on_line)(const char *line, size_t len, void *ud, sp_error **err);
    void *ud;
    long timeout_ms; /* 0 = the handle's request timeout; negative = none */
    /* Called with each piece of a 2xx body as it comes (binary streams);
     * a negative return stops the transfer with that code. */
    int (*on_data)(const char *data, size_t len, void *ud, sp_error **err);
} sp_http_req;

#define SP_HTTP_REQ_INIT                                                                           \
    {                                                                                              \
        NULL, NULL, NULL, 0, NULL, -1, -1, NULL, NULL, 0, NULL                                     \
    }

typedef struct sp_http_resp {
    long status;
    sp_buf body;
} sp_http_resp;

/* Perform a request. 0 for statuses below 400 (resp->status says which);
 * an error for transport failures (SP_EPODMAN, SP_ETIMEOUT) and for 4xx/5xx
 * (mapped by sp_podman_http_error). `what` prefixes every message. */
int sp_podman_http(sp_podman *p, const sp_http_req *req, sp_http_resp *resp, const char *what,
                   sp_error **err);
void sp_http_resp_dispose(sp_http_resp *r);
/* Log one request at SP_LOG_DEBUG: method, path (query values left out),
 * status (0: none came), bytes each way, duration. Never a body. */
void sp_podman_log_request(const char *method, const char *path, long status, int64_t sent,
                           int64_t received, int64_t ms);

/* A one-line reason for a failed curl transfer (free()). */
char *sp_podman_curl_detail(CURL *c, int rc, const char *ebuf);

/* Map an HTTP error answer to an sp_error with the service's message. */
int sp_podman_http_error(sp_error **err, long status, const char *body, size_t len,
                         const char *what);

/* Parse a JSON body; SP_EPODMAN "malformed JSON" when it is not. */
/* sp_podman_http() then sp_podman_json() on the answer; the response is
 * disposed either way. */
int sp_podman_call_json(sp_podman *p, const sp_http_req *req, cJSON **out, const char *what,
                        sp_error **err);
int sp_podman_json(cJSON **out, const sp_buf *body, const char *what, sp_error **err);

/* A service's message as one line: trailing newlines cut, inner ones
 * folded to spaces (free()). */
char *sp_podman_one_line(const char *s);

/* Escape one path segment or query value (never NULL). */
char *sp_podman_escape(sp_podman *p, const char *s);

/* sandpod's seccomp profile made from Podman's default (its JSON text).
 * @param out  the profile's JSON text (free()) */
int sp_podman_seccomp_profile(char **out, const char *base, size_t len, sp_error **err);

/* The raw HTTP/1.1 side, for hijacked streams (see http1.c). */

/* Connect a fresh socket to the service, bounded by timeout_ms. */
int sp_podman_raw_connect(int *out_fd, const sp_podman *p, int timeout_ms, sp_error **err);

typedef struct sp_http1_head {
    int status;
    int64_t content_length; /* -1 when absent */
    bool chunked;
    bool upgrade; /* Connection: upgrade */
} sp_http1_head;

/* Parse an HTTP/1.x response head at buf[0..len). Returns the head's length
 * (through the blank line) when complete, 0 when more bytes are needed, or
 * a negative code for a malformed head. */
int sp_http1_parse_head(sp_http1_head *out, const char *buf, size_t len, sp_error **err);

/* Decode a chunked body in place: 0 when complete (decoded length in
 * *out_len), 1 when more bytes are needed, a negative code when malformed. */
int sp_http1_dechunk(char *buf, size_t len, size_t *out_len, sp_error **err);

/* Send a request on a raw socket and read the answer's head. On 101/200 the
 * stream is returned in *out with any bytes read past the head buffered.
 * Other answers are read to their end and mapped to an error. */
int sp_podman_hijack(sp_exec **out, sp_podman *p, const char *path, const char *body, bool tty,
                     const char *exec_id, const char *what, sp_error **err);

/* Service discovery and start (service.c). */
/* What to run to start the service on socket `sock` (NULL: this user's
 * default one): systemctl for the default socket (--user when not root),
 * `podman system service` for another, and the repository's script as
 * well when the running program lives in the build tree. free() it. */
char *sp_podman_start_hint(const char *sock);
/* The same from its inputs (for tests): root, $XDG_RUNTIME_DIR, the
 * running program, the build folder and the script. */
char *sp_podman_start_hint_for(const char *sock, bool root, const char *runtime_dir,
                               const char *exe, const char *build_dir, const char *script);
int sp_podman_find_or_start(sp_podman_addr *out, bool *started, const sp_podman_opts *o,
                            sp_error **err);
int sp_podman_curl_init(sp_error **err);

/* The process part of sp_sandbox_gc() on Podman, added to o: conmons (and
 * their children) of containers named name_prefix* in the service's store
 * that the service does not know, and services whose socket is gone; only
 * processes of this user at least min_age_s old (reap.c). */
void sp_podman_reap_lost(sp_sandbox_orphans *o, sp_podman *p, const char *name_prefix,
                         double min_age_s, bool dry_run);

/* Start exec session exec_id as a command's stream (engine/stream.h); with
 * noexec, a command the runtime could not execute is told by the stream's
 * noexec() and the runtime's lines about it are dropped (exec_stream.c). */
struct sp_stream;
int sp_podman_exec_stream(struct sp_stream *out, sp_podman *p, const char *exec_id, bool tty,
                          bool noexec, sp_error **err);

#endif
