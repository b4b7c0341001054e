/* Names to addresses for the egress proxy, without the name service switch
 * (the proxy is the static sandpod-agent, and must not load NSS modules):
 * a hosts file first, then DNS over UDP to the nameservers of a
 * resolv.conf. Only A and AAAA; a truncated answer is used as far as it
 * goes (the proxy needs one address, not all). Internal to the library. */
#ifndef SANDPOD_EGRESS_RESOLVE_H
#define SANDPOD_EGRESS_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#define SP_EGRESS_MAX_ADDRS 16

typedef struct sp_egress_addrs {
    struct sockaddr_storage a[SP_EGRESS_MAX_ADDRS]; /* AF_INET or AF_INET6, port 0 */
    size_t n;
} sp_egress_addrs;

/*
 * Contract: fill *out with the addresses of `name` (a host name, not an
 * address literal): every line of `hosts_file` (may be NULL) that names it
 * (case-insensitive), else the A then AAAA records the first nameserver of
 * `resolv_conf` that answers in time gives (each nameserver gets
 * `timeout_ms`). Answers are taken only from the address queried, on a
 * socket connected to it, with the query's random id and question.
 *
 * @return 0 with out->n >= 1; -1 with a one-line reason in why ("no such
 *         name", "no answer from 10.0.0.1 in 2000 ms", ...)
 */
int sp_egress_resolve(sp_egress_addrs *out, const char *name, const char *hosts_file,
                      const char *resolv_conf, int timeout_ms, char *why, size_t why_len);

/* An address literal (IPv4 dotted quad, or IPv6 without a zone) as a
 * sockaddr with port 0; false when s is none. */
bool sp_egress_parse_literal(struct sockaddr_storage *ss, const char *s);
/* The address (not the port) as text; "?" when it cannot be shown. */
void sp_egress_addr_text(const struct sockaddr_storage *ss, char *buf, size_t cap);

/* For tests and the fuzzer: the addresses of the A and AAAA records in one
 * DNS answer `msg` to a query with `id` for `name`; -1 when it is not such
 * an answer, else the number appended to *out. */
int sp_egress_dns_parse(sp_egress_addrs *out, const unsigned char *msg, size_t len, unsigned id,
                        const char *name, int *rcode);

#endif
