/* The egress proxy's TLS, for brokered secrets over HTTPS (OpenSSL, linked
 * statically into sandpod-agent).
 *
 * A connection to a host that a secret is for is terminated here: the
 * workload's client gets a certificate for that host signed by this
 * proxy's own CA, and the proxy speaks TLS to the real host itself,
 * verifying it against the CAs the host handed over (DIR/upstream-ca.pem).
 *
 * The CA is made in memory when the proxy first needs it (a secret with a
 * TLS scope): an EC P-256 key that never touches a disk, a self-signed
 * certificate valid for a year. Each start of a proxy makes a new one, so
 * a sandbox, its forks and its re-creations never share one. Leaf
 * certificates are made per host on first use and kept (up to 256). */
#ifndef SANDPOD_EGRESS_TLS_H
#define SANDPOD_EGRESS_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct sp_egress_tls sp_egress_tls;
typedef struct ssl_st SSL;

/* A CA, a leaf key and the two contexts. upstream_ca: a PEM file of the
 * CAs an upstream's certificate must chain to (NULL or missing: OpenSSL's
 * default paths). @return NULL with why filled when OpenSSL fails. */
sp_egress_tls *sp_egress_tls_new(const char *upstream_ca, char *why, size_t cap);
void sp_egress_tls_free(sp_egress_tls *t);

/* The CA's certificate, PEM; the caller frees it. */
char *sp_egress_tls_ca_pem(const sp_egress_tls *t);

/* The server side on the workload's socket fd (non-blocking): a leaf for
 * host (a name, or an address when literal), ALPN http/1.1 only. The
 * client's server name, when it gives one, must be host. @return the
 * connection, or NULL with why filled. */
SSL *sp_egress_tls_accept(sp_egress_tls *t, int fd, const char *host, bool literal,
                          int64_t deadline_ms, char *why, size_t cap);

/* The client side on the upstream socket fd (non-blocking): SNI and the
 * certificate checked for host (the address when literal). @return the
 * connection, or NULL with why filled. */
SSL *sp_egress_tls_connect(sp_egress_tls *t, int fd, const char *host, bool literal,
                           int64_t deadline_ms, char *why, size_t cap);

/* Read up to n bytes by the deadline (CLOCK_MONOTONIC ms). @return bytes,
 * 0 at the peer's end, -1 on error or time out. */
ssize_t sp_egress_tls_read(SSL *s, void *buf, size_t n, int64_t deadline_ms);

/* Write all n bytes by the deadline. */
bool sp_egress_tls_write(SSL *s, const void *buf, size_t n, int64_t deadline_ms);

/* One step of a relay: SSL_read or SSL_write once. @return bytes moved,
 * 0 at the peer's end (reads), -1 on error, -2 when it would block (then
 * *want_read or *want_write says on what). */
ssize_t sp_egress_tls_step(SSL *s, bool write, void *buf, size_t n, bool *want_read,
                           bool *want_write);

/* Whether bytes are decrypted and waiting in s. */
bool sp_egress_tls_pending(SSL *s);

/* A close_notify if it goes at once, then free. NULL is fine. */
void sp_egress_tls_close(SSL *s);

#endif
