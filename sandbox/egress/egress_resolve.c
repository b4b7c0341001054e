/* Names to addresses for the egress proxy: a hosts file, then DNS over UDP
 * (egress_resolve.h says why not getaddrinfo). */
#include "egress_resolve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define MAX_NAMESERVERS 3
#define DNS_TYPE_A      1
#define DNS_TYPE_AAAA   28
#define DNS_MAX_MSG     1232 /* what resolvers send over UDP without EDNS trouble */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void add_addr(sp_egress_addrs *out, const struct sockaddr_storage *ss)
{
    if (out->n < SP_EGRESS_MAX_ADDRS)
        out->a[out->n++] = *ss;
}

bool sp_egress_parse_literal(struct sockaddr_storage *ss, const char *s)
{
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, s, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        return true;
    }
    if (inet_pton(AF_INET6, s, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        return true;
    }
    return false;
}

/* name and want equal, any case, either one with a trailing dot. */
static bool same_name(const char *name, size_t n, const char *want)
{
    size_t w = strlen(want);
    if (n && name[n - 1] == '.')
        n--;
    if (w && want[w - 1] == '.')
        w--;
    return n == w && strncasecmp(name, want, n) == 0;
}

static void from_hosts(sp_egress_addrs *out, const char *path, const char *name)
{
    FILE *f = path ? fopen(path, "re") : NULL;
    if (!f)
        return;
    char line[1024];
    while (fgets(line, sizeof(line), f)) {
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *save = NULL;
        char *addr = strtok_r(line, " \t\r\n", &save);
        if (!addr)
            continue;
        struct sockaddr_storage ss;
        if (!sp_egress_parse_literal(&ss, addr))
            continue;
        for (char *h; (h = strtok_r(NULL, " \t\r\n", &save));)
            if (same_name(h, strlen(h), name)) {
                add_addr(out, &ss);
                break;
            }
    }
    fclose(f);
}

static size_t nameservers(struct sockaddr_storage *ns, const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = 0;
    char line[512];
    while (n < MAX_NAMESERVERS && fgets(line, sizeof(line), f)) {
        char *save = NULL;
        char *k = strtok_r(line, " \t\r\n", &save);
        char *v = k ? strtok_r(NULL, " \t\r\n", &save) : NULL;
        if (!v || strcmp(k, "nameserver") != 0)
            continue;
        char *pct = strchr(v, '%'); /* a zone: not for us */
        if (pct)
            continue;
        if (!sp_egress_parse_literal(&ns[n], v))
            continue;
        if (ns[n].ss_family == AF_INET)
            ((struct sockaddr_in *)&ns[n])->sin_port = htons(53);
        else
            ((struct sockaddr_in6 *)&ns[n])->sin6_port = htons(53);
        n++;
    }
    fclose(f);
    return n;
}

/* The query for `name` (already checked: labels of 1-63 bytes, at most 253). */
static size_t make_query(unsigned char *q, size_t cap, unsigned id, const char *name, int type)
{
    size_t len = strlen(name);
    if (len && name[len - 1] == '.')
        len--;
    if (len == 0 || len > 253 || cap < 12 + len + 2 + 4)
        return 0;
    unsigned char *p = q;
    *p++ = (unsigned char)(id >> 8);
    *p++ = (unsigned char)id;
    *p++ = 0x01; /* RD */
    *p++ = 0x00;
    *p++ = 0;
    *p++ = 1; /* one question */
    memset(p, 0, 6);
    p += 6;
    const char *s = name, *end = name + len;
    while (s < end) {
        const char *dot = memchr(s, '.', (size_t)(end - s));
        size_t l = (size_t)((dot ? dot : end) - s);
        if (l == 0 || l > 63)
            return 0;
        *p++ = (unsigned char)l;
        memcpy(p, s, l);
        p += l;
        s += l + (dot ? 1 : 0);
    }
    *p++ = 0;
    *p++ = (unsigned char)(type >> 8);
    *p++ = (unsigned char)type;
    *p++ = 0;
    *p++ = 1; /* IN */
    return (size_t)(p - q);
}

/* Read the name at *off (following compression pointers) into buf as
 * dotted text; *off moves past it in the message. false when malformed. */
static bool read_name(const unsigned char *m, size_t len, size_t *off, char *buf, size_t cap)
{
    size_t pos = *off, out = 0;
    bool jumped = false;
    for (int hops = 0; hops < 64; hops++) {
        if (pos >= len)
            return false;
        unsigned l = m[pos];
        if ((l & 0xc0) == 0xc0) {
            if (pos + 1 >= len)
                return false;
            if (!jumped)
                *off = pos + 2;
            jumped = true;
            pos = ((l & 0x3fu) << 8) | m[pos + 1];
            continue;
        }
        if (l & 0xc0)
            return false;
        if (l == 0) {
            if (!jumped)
                *off = pos + 1;
            if (buf) {
                if (out >= cap)
                    return false;
                buf[out] = '\0';
            }
            return true;
        }
        if (pos + 1 + l > len)
            return false;
        if (buf) {
            if (out + l + 2 > cap)
                return false;
            if (out)
                buf[out++] = '.';
            memcpy(buf + out, m + pos + 1, l);
            out += l;
        }
        pos += 1 + l;
    }
    return false;
}

int sp_egress_dns_parse(sp_egress_addrs *out, const unsigned char *m, size_t len, unsigned id,
                        const char *name, int *rcode)
{
    if (len < 12 || ((unsigned)m[0] << 8 | m[1]) != (id & 0xffff) || !(m[2] & 0x80) ||
        (m[2] & 0x78) != 0)
        return -1;
    unsigned qd = (unsigned)m[4] << 8 | m[5], an = (unsigned)m[6] << 8 | m[7];
    if (qd != 1)
        return -1;
    *rcode = m[3] & 0x0f;
    size_t off = 12;
    char q[300];
    if (!read_name(m, len, &off, q, sizeof(q)) || !same_name(q, strlen(q), name) || off + 4 > len)
        return -1;
    off += 4;
    int added = 0;
    for (unsigned i = 0; i < an; i++) {
        if (!read_name(m, len, &off, NULL, 0) || off + 10 > len)
            return added; /* truncated: what came so far */
        unsigned type = (unsigned)m[off] << 8 | m[off + 1];
        unsigned cls = (unsigned)m[off + 2] << 8 | m[off + 3];
        size_t rdlen = (size_t)m[off + 8] << 8 | m[off + 9];
        off += 10;
        if (off + rdlen > len)
            return added;
        struct sockaddr_storage ss;
        memset(&ss, 0, sizeof(ss));
        if (cls == 1 && type == DNS_TYPE_A && rdlen == 4) {
            struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
            in4->sin_family = AF_INET;
            memcpy(&in4->sin_addr, m + off, 4);
            add_addr(out, &ss);
            added++;
        } else if (cls == 1 && type == DNS_TYPE_AAAA && rdlen == 16) {
            struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
            in6->sin6_family = AF_INET6;
            memcpy(&in6->sin6_addr, m + off, 16);
            add_addr(out, &ss);
            added++;
        }
        off += rdlen;
    }
    return added;
}

static unsigned random_id(void)
{
    uint16_t v = 0;
    if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
        v = (uint16_t)(now_ms() ^ getpid());
    return v;
}

void sp_egress_addr_text(const struct sockaddr_storage *ss, char *buf, size_t cap)
{
    const void *a = ss->ss_family == AF_INET
                        ? (const void *)&((const struct sockaddr_in *)ss)->sin_addr
                        : (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr;
    if (!inet_ntop(ss->ss_family, a, buf, (socklen_t)cap))
        snprintf(buf, cap, "?");
}

/* Ask one nameserver for A and AAAA; 1 answered (out may still be empty:
 * *nx says whether it said NXDOMAIN), 0 no answer in time, -1 an error. */
static int ask(sp_egress_addrs *out, const struct sockaddr_storage *ns, const char *name,
               int timeout_ms, bool *nx)
{
    int fd = socket(ns->ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    socklen_t sl =
        ns->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    if (connect(fd, (const struct sockaddr *)ns, sl) < 0) {
        close(fd);
        return -1;
    }
    unsigned ids[2] = {random_id(), random_id()};
    const int types[2] = {DNS_TYPE_A, DNS_TYPE_AAAA};
    bool done[2] = {false, false};
    int rcodes[2] = {0, 0};
    sp_egress_addrs got[2] = {{.n = 0}, {.n = 0}};
    for (int i = 0; i < 2; i++) {
        unsigned char q[300];
        size_t ql = make_query(q, sizeof(q), ids[i], name, types[i]);
        if (ql == 0 || send(fd, q, ql, 0) != (ssize_t)ql) {
            close(fd);
            return -1;
        }
    }
    int64_t end = now_ms() + timeout_ms;
    while (!(done[0] && done[1])) {
        int64_t left = end - now_ms();
        if (left <= 0)
            break;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        unsigned char m[DNS_MAX_MSG * 4];
        ssize_t r = recv(fd, m, sizeof(m), 0);
        if (r <= 0)
            continue; /* ECONNREFUSED from an ICMP error: wait out the others */
        for (int i = 0; i < 2; i++) {
            if (done[i])
                continue;
            int rc = 0;
            sp_egress_addrs one = {.n = 0};
            if (sp_egress_dns_parse(&one, m, (size_t)r, ids[i], name, &rc) >= 0) {
                done[i] = true;
                rcodes[i] = rc;
                got[i] = one;
                break;
            }
        }
    }
    close(fd);
    if (!done[0] && !done[1])
        return 0;
    for (int i = 0; i < 2; i++)
        for (size_t k = 0; k < got[i].n; k++)
            add_addr(out, &got[i].a[k]);
    *nx = (done[0] && rcodes[0] == 3) || (done[1] && rcodes[1] == 3);
    return 1;
}

int sp_egress_resolve(sp_egress_addrs *out, const char *name, const char *hosts_file,
                      const char *resolv_conf, int timeout_ms, char *why, size_t why_len)
{
    out->n = 0;
    from_hosts(out, hosts_file, name);
    if (out->n)
        return 0;
    struct sockaddr_storage ns[MAX_NAMESERVERS];
    size_t n_ns = nameservers(ns, resolv_conf ? resolv_conf : "/etc/resolv.conf");
    if (n_ns == 0) {
        snprintf(why, why_len, "no nameserver in %s",
                 resolv_conf ? resolv_conf : "/etc/resolv.conf");
        return -1;
    }
    char last[INET6_ADDRSTRLEN] = "";
    for (size_t i = 0; i < n_ns; i++) {
        bool nx = false;
        int r = ask(out, &ns[i], name, timeout_ms, &nx);
        sp_egress_addr_text(&ns[i], last, sizeof(last));
        if (r == 1) {
            if (out->n)
                return 0;
            snprintf(why, why_len, nx ? "no such name" : "the name has no address");
            return -1;
        }
    }
    snprintf(why, why_len, "no answer from the nameserver %s in %d ms", last, timeout_ms);
    return -1;
}
