/* A sandbox's egress proxy: the only way out of a sandbox that has an
 * egress policy. Internal to sandpod; it runs as `sandpod-agent
 * --egress-proxy` in a container of its own beside the sandbox's (the
 * host's network, no capabilities, its own user namespace).
 *
 * How a connection gets here: the workload's network namespace has only a
 * loopback. Its agent (pid 1) listens on 127.0.0.1:SP_EGRESS_PORT, and
 * hands each connection it accepts, as a file descriptor (SCM_RIGHTS), to
 * this proxy over the unix socket RUN/proxy.sock, which both containers
 * mount. The proxy then speaks to the workload's own TCP socket: no relay
 * copies a byte, and nothing the workload sends is trusted: a message
 * without exactly one stream socket is dropped, and whatever the agent
 * (the workload's to control) does, the proxy decides every connection.
 *
 * On that socket: HTTP proxy requests (CONNECT host:port, and absolute
 * http:// URIs, one request per connection) and SOCKS5 (CONNECT, no
 * authentication), told apart by the first byte. The proxy resolves names
 * itself (egress_resolve.h), only names a rule allows
 * (sp_egress_may_resolve()), judges every address it would connect to
 * (sp_egress_decide(), with this host's own addresses, as they are now, added
 * as special), checks that a plain request's Host header names the URL's
 * authority and that a TLS ClientHello's server name, when there is one, is
 * the host the tunnel was asked for, and records every connection.
 *
 * Files (DIR is read-only to the proxy, RUN is its own):
 *   DIR/policy      "allow RULE" and "deny RULE" lines (egress_policy.h), read
 *                   anew within 100 ms of a change (an atomic rename); what a
 *                   new policy denies is cut from the open connections too
 *   DIR/hosts       optional: names the proxy resolves before DNS (hosts(5))
 *   RUN/proxy.sock  the socket the agent hands connections to
 *   RUN/connections.jsonl  one JSON line per connection, when it ends
 *   RUN/policy.loaded      the version of the policy in force (the "# version"
 *                          line of DIR/policy), so the host can wait for it
 *   DIR/secrets     optional: brokered secrets (egress_secrets.h)
 *   DIR/upstream-ca.pem    the CAs an HTTPS upstream a secret goes to must
 *                          chain to
 *   RUN/ca.pem, RUN/ca-bundle.pem  this proxy's CA (egress_tls.h), alone and
 *                          after DIR/upstream-ca.pem
 *   RUN/proxy.log   what the proxy says of itself (its container's log too) */
#ifndef SANDPOD_EGRESS_PROXY_H
#define SANDPOD_EGRESS_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The port the workload's agent listens on, on 127.0.0.1 and ::1. */
#define SP_EGRESS_PORT    3128
#define SP_EGRESS_SOCKET  "proxy.sock"
#define SP_EGRESS_LOG     "connections.jsonl"
#define SP_EGRESS_POLICY  "policy"
#define SP_EGRESS_HOSTS   "hosts"
#define SP_EGRESS_SECRETS "secrets"
#define SP_EGRESS_LOADED  "policy.loaded"
/* Brokered secrets over HTTPS (egress_tls.h): the CAs the proxy verifies
 * upstreams against (DIR, the host's), the extra ones the user gave (DIR,
 * the host's own copy), and the proxy's CA certificate, alone and after
 * the upstream ones (RUN, the proxy's; the workload reads them at
 * SPA_EGRESS_DIR). */
#define SP_EGRESS_UPSTREAM_CA "upstream-ca.pem"
#define SP_EGRESS_EXTRA_CA    "egress-ca.pem"
#define SP_EGRESS_CA          "ca.pem"
#define SP_EGRESS_CA_BUNDLE   "ca-bundle.pem"
/* The policy's first line names its version; the proxy writes the version
 * it put in force to RUN/policy.loaded, which the host waits for. */
#define SP_EGRESS_VERSION_LINE "# version "
#define SP_EGRESS_MAX_CONNS    256 /* default bound of open connections */
#define SP_EGRESS_HEAD_LIMIT   16384
/* A body taken whole to put a body secret in (--secret-in NAME=body). */
#define SP_EGRESS_BODY_LIMIT (1024 * 1024)

typedef struct sp_egress_proxy_opts {
    const char *dir;         /* the policy's folder */
    const char *run_dir;     /* the socket's and the log's folder */
    const char *resolv_conf; /* NULL: /etc/resolv.conf */
    unsigned max_conns;      /* 0: SP_EGRESS_MAX_CONNS */
    int connect_timeout_ms;  /* 0: 10000 */
    int head_timeout_ms;     /* time a client has to send its request; 0: 10000 */
    /* Also take TCP connections on this port of every address (0: only
     * the socket's handed ones): a proxy in a Pod of its own, which its
     * clients reach over the cluster's network (NetworkPolicy decides
     * who may). */
    uint16_t listen_port;
} sp_egress_proxy_opts;

/* Serve until killed. @return 1 (with a line on stderr) when it cannot
 * start: no socket, no policy. */
int sp_egress_proxy_run(const sp_egress_proxy_opts *o);

/* The agent's side: listen on 127.0.0.1 and ::1 at `port` and hand every
 * connection to the proxy at `socket_path`. Runs until killed.
 * @return 1 when it cannot listen at all */
int sp_egress_relay_run(uint16_t port, const char *socket_path);

/* A TCP listener on port of loopback (any: of every address) of family
 * (AF_INET, or AF_INET6 alone: IPV6_V6ONLY). @return the fd, or -1. */
int sp_egress_listen_tcp(int family, uint16_t port, bool any);

/* For tests and the fuzzer: the server name of the TLS ClientHello that
 * starts `buf` into name (NUL-terminated). @return 1 found; 0 a complete
 * ClientHello without one, or not TLS at all (*is_tls false); -1 it is
 * TLS but malformed, split over records, or starts with another record
 * than a handshake; -2 more bytes needed */
int sp_egress_sni(char *name, size_t cap, const unsigned char *buf, size_t len, int *is_tls);

#endif
