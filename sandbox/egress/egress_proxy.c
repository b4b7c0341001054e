/* The egress proxy (egress_proxy.h says what it is and where it runs). One
 * thread per connection, bounded; each connection's bytes go straight
 * between the workload's socket and the upstream one. */
#include "egress_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <limits.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "base.h"
#include "egress_policy.h"
#include "egress_resolve.h"
#include "egress_secrets.h"
#include "egress_tls.h"

#define PUMP_BUF       32768
#define PIPE_BYTES     (256 * 1024)
#define RESOLVE_MS     3000
#define WATCH_MS       100
#define MAX_RECEIVERS  16
#define THREAD_STACK   (256 * 1024)
#define TLS_RECORD_MAX (16384 + 5)
/* A terminated connection with nothing moving either way this long ends. */
#define TLS_IDLE_MS (10 * 60 * 1000)

/* The secrets, read with the policy; shared by the references made from
 * one read (a change of this host's addresses keeps them). Under g.mu. */
typedef struct secrets_ref {
    sp_egress_secrets s;
    unsigned refs;
} secrets_ref;

typedef struct policy_ref {
    sp_egress_policy p;
    secrets_ref *secrets; /* never NULL */
    unsigned refs;
    char version[64]; /* what its "# version" line says, for the host's wait */
} policy_ref;

typedef struct conn {
    int client, up;
    const char *proto; /* "http", "connect", "socks"; "none": no first byte; "refused": too many */
    char host[256];    /* as the client asked, lowercase for names */
    uint16_t port;
    bool literal;
    struct sockaddr_storage sa; /* what it connected to */
    char addr[INET6_ADDRSTRLEN];
    bool allowed;
    char why[512];                       /* the decision, or why it failed */
    char *rule;                          /* the deciding rule's text, or NULL */
    char secret[SP_SECRET_NAME_MAX + 1]; /* a secret whose stand-in it carried ("": none) */
    bool terminated;                     /* its TLS ended here (serve_terminated) */
    uint64_t up_bytes, down_bytes;
    int64_t started_ms;
    atomic_int cut; /* the watcher found the policy now denies it */
    char cut_why[512];
    struct conn *next_q; /* the pool's queue */
    struct conn *prev, *next;
} conn;

static struct {
    sp_egress_proxy_opts o;
    char policy_path[PATH_MAX], hosts_path[PATH_MAX], secrets_path[PATH_MAX];
    pthread_mutex_t mu;
    policy_ref *policy;
    struct stat policy_st;
    char *host_addrs; /* host_addresses(), as the policy in force has them */
    unsigned open, receivers;
    conn *live;
    int log_fd;
    /* Made when a secret with a TLS scope first arrives; never freed. */
    _Atomic(sp_egress_tls *) tls;
    bool ca_written;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .log_fd = -1};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void say(const char *fmt, ...) SP_PRINTF(1, 2);
static void say(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    dprintf(2, "sandpod-egress: %s\n", line);
}

/* ------------------------------------------------------------- policy -- */

/* This host's own addresses, one a line; NULL when they cannot be read.
 * Not the loopback ones: the built-in range holds them already, and
 * "127.0.0.1 is loopback" says more than "an address of this host". */
static char *host_addresses(void)
{
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) < 0)
        return NULL;
    size_t len = 0, cap = 256;
    char *out = sp_xmalloc(cap);
    out[0] = '\0';
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || (i->ifa_flags & IFF_LOOPBACK) ||
            (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
            continue;
        bool v4 = i->ifa_addr->sa_family == AF_INET;
        const struct in_addr *a4 = &((struct sockaddr_in *)i->ifa_addr)->sin_addr;
        const struct in6_addr *a6 = &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
        if (v4 ? (ntohl(a4->s_addr) >> 24) == 127 : IN6_IS_ADDR_LOOPBACK(a6))
            continue;
        char a[INET6_ADDRSTRLEN];
        if (!inet_ntop(i->ifa_addr->sa_family, v4 ? (const void *)a4 : (const void *)a6, a,
                       sizeof(a)))
            continue;
        size_t al = strlen(a);
        if (len + al + 2 > cap) {
            cap = 2 * cap + al;
            out = sp_xrealloc(out, cap);
        }
        memcpy(out + len, a, al);
        len += al;
        out[len++] = '\n';
        out[len] = '\0';
    }
    freeifaddrs(ifs);
    return out;
}

/* The host's own addresses (g.host_addrs) are special: a rule must name
 * them by network. */
static void add_host_addresses(sp_egress_policy *p)
{
    for (const char *l = g.host_addrs; l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) : strlen(l);
        char a[INET6_ADDRSTRLEN];
        if (n < sizeof(a)) {
            memcpy(a, l, n);
            a[n] = '\0';
            sp_error *e = NULL;
            if (sp_egress_policy_add_special(p, a, "an address of this host", &e) < 0)
                sp_error_free(e);
        }
        l += n + (nl ? 1 : 0);
    }
}

/* Write RUN/name (0644) anew from a and b; false when it cannot. */
static bool run_file(const char *name, const char *a, size_t al, const char *b, size_t bl)
{
    char tmp[PATH_MAX + 16], path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", g.o.run_dir, name);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return false;
    bool ok = fchmod(fd, 0644) == 0 && sp_write_all(fd, a, al) == 0 && sp_write_all(fd, b, bl) == 0;
    close(fd);
    if (!ok || rename(tmp, path) < 0) {
        unlink(tmp);
        return false;
    }
    return true;
}

/* The CA, made once, and its certificate where the sandbox reads it:
 * RUN/ca.pem alone, and RUN/ca-bundle.pem after the CAs the host trusts
 * (DIR/upstream-ca.pem), for the variables that replace a bundle. Before
 * the host hands RUN over, writing fails and is tried at the next load. */
static void tls_ready(void)
{
    char upstream[PATH_MAX];
    snprintf(upstream, sizeof(upstream), "%s/%s", g.o.dir, SP_EGRESS_UPSTREAM_CA);
    if (!atomic_load(&g.tls)) {
        char why[300];
        sp_egress_tls *t = sp_egress_tls_new(upstream, why, sizeof(why));
        if (!t) {
            say("no TLS for brokered secrets: %s", why);
            return;
        }
        atomic_store(&g.tls, t);
    }
    if (g.ca_written)
        return;
    char *pem = sp_egress_tls_ca_pem(atomic_load(&g.tls));
    sp_buf trusted = SP_BUF_INIT;
    cleanup_close int fd = open(upstream, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0 && sp_read_all(fd, &trusted, 8u << 20) < 0)
        trusted.len = 0;
    if (trusted.len && trusted.data[trusted.len - 1] != '\n')
        sp_buf_addc(&trusted, '\n');
    g.ca_written = pem && run_file(SP_EGRESS_CA, pem, strlen(pem), "", 0) &&
                   run_file(SP_EGRESS_CA_BUNDLE, trusted.data ? trusted.data : "", trusted.len, pem,
                            strlen(pem));
    if (!g.ca_written)
        say("cannot write the CA's certificate into %s yet: %s", g.o.run_dir, strerror(errno));
    sp_buf_dispose(&trusted);
    free(pem);
}

/* The secrets file beside the policy into r (none when there is none);
 * false (said why) when it cannot be read or holds a bad line. */
static bool load_secrets(policy_ref *r)
{
    r->secrets = sp_xcalloc(1, sizeof(*r->secrets));
    r->secrets->refs = 1;
    cleanup_close int fd = open(g.secrets_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT)
        return true;
    if (fd < 0 && errno == EACCES) {
        /* Not handed over yet (the host does once this proxy runs, then
         * writes a new policy version): none until then. */
        say("%s: not readable yet; no secrets in force", g.secrets_path);
        return true;
    }
    sp_buf text = SP_BUF_INIT;
    if (fd < 0 || sp_read_all(fd, &text, 4u << 20) < 0) {
        say("cannot read %s: %s", g.secrets_path, strerror(errno));
        sp_buf_dispose(&text);
        return false;
    }
    sp_error *e = NULL;
    int rc = sp_egress_secrets_parse(&r->secrets->s, text.data ? text.data : "", text.len, &e);
    if (text.data)
        explicit_bzero(text.data, text.len);
    sp_buf_dispose(&text);
    if (rc < 0) {
        say("%s: %s", g.secrets_path, e ? e->message : "bad secrets");
        sp_error_free(e);
        return false;
    }
    if (sp_egress_secrets_over_tls(&r->secrets->s))
        tls_ready();
    return true;
}

static void policy_ref_free(policy_ref *r)
{
    sp_egress_policy_dispose(&r->p);
    if (r->secrets && --r->secrets->refs == 0) {
        sp_egress_secrets_dispose(&r->secrets->s);
        free(r->secrets);
    }
    free(r);
}

/* Read the policy file (and the secrets beside it) into a new reference;
 * NULL (said why) when either is unreadable or holds a bad line: the old
 * policy stays. */
static policy_ref *load_policy(struct stat *st)
{
    cleanup_close int fd = open(g.policy_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    sp_buf text = SP_BUF_INIT;
    if (fd < 0 || fstat(fd, st) < 0 || sp_read_all(fd, &text, 1u << 20) < 0) {
        say("cannot read %s: %s", g.policy_path, strerror(errno));
        sp_buf_dispose(&text);
        return NULL;
    }
    policy_ref *r = sp_xcalloc(1, sizeof(*r));
    r->refs = 1;
    sp_error *e = NULL;
    int rc = sp_egress_policy_parse(&r->p, text.data ? text.data : "", text.len, r->version,
                                    sizeof(r->version), &e);
    sp_buf_dispose(&text);
    if (rc < 0) {
        say("%s: %s", g.policy_path, e ? e->message : "bad policy");
        sp_error_free(e);
        policy_ref_free(r);
        return NULL;
    }
    if (!load_secrets(r)) {
        policy_ref_free(r);
        return NULL;
    }
    add_host_addresses(&r->p);
    return r;
}

/* Tell the host which policy is in force: RUN/policy.loaded holds its
 * version (written anew and renamed, so never half). */
static void said_loaded(const policy_ref *r)
{
    char tmp[PATH_MAX + 8], path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", g.o.run_dir, SP_EGRESS_LOADED);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return;
    bool ok = dprintf(fd, "%s\n", r->version) > 0;
    close(fd);
    if (!ok || rename(tmp, path) < 0)
        unlink(tmp);
}

static policy_ref *policy_get(void)
{
    pthread_mutex_lock(&g.mu);
    policy_ref *r = g.policy;
    r->refs++;
    pthread_mutex_unlock(&g.mu);
    return r;
}

static void policy_put_locked(policy_ref *r)
{
    if (--r->refs == 0)
        policy_ref_free(r);
}

static void policy_put(policy_ref *r)
{
    pthread_mutex_lock(&g.mu);
    policy_put_locked(r);
    pthread_mutex_unlock(&g.mu);
}

static void set_why(conn *c, const sp_egress_decision *d)
{
    char *t = sp_egress_decision_text(d);
    snprintf(c->why, sizeof(c->why), "%s", t);
    free(t);
    free(c->rule);
    c->rule = d->rule ? sp_xstrdup(d->rule->text) : NULL;
}

/* Whether c's open connection is still allowed by p. Reads only what
 * does not change once connected; when not, the refusal goes to
 * c->cut_why (under g.mu) and the connection's own thread takes it. */
static bool still_allowed(conn *c, const sp_egress_policy *p)
{
    sp_egress_decision d;
    if ((!c->literal && !sp_egress_may_resolve(&d, p, c->host, c->port)) ||
        !sp_egress_decide(&d, p, c->literal ? NULL : c->host, (struct sockaddr *)&c->sa, c->port)) {
        char *t = sp_egress_decision_text(&d);
        snprintf(c->cut_why, sizeof(c->cut_why), "cut: the policy changed: %s", t);
        free(t);
        return false;
    }
    return true;
}

/* A socket that hears of this host's address changes, so that a new address
 * is special at once, not at the next look; -1 when there is none (then the
 * addresses are read every WATCH_MS). */
static int address_events(void)
{
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK,
                             .nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR};
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Whether this host's addresses are no longer g.host_addrs (which then
 * holds the new ones). */
static bool addresses_moved(void)
{
    char *now = host_addresses();
    if (!now || (g.host_addrs && strcmp(now, g.host_addrs) == 0)) {
        free(now);
        return false;
    }
    free(g.host_addrs);
    g.host_addrs = now;
    return true;
}

/* The rules of p (parsed once, so they parse again) with the host's
 * addresses as they are now. */
static policy_ref *with_new_addresses(const policy_ref *old)
{
    const sp_egress_policy *p = &old->p;
    policy_ref *r = sp_xcalloc(1, sizeof(*r));
    r->refs = 1;
    memcpy(r->version, old->version, sizeof(r->version));
    for (size_t i = 0; i < p->n_rules; i++) {
        sp_error *e = NULL;
        if (sp_egress_policy_add(&r->p, p->rules[i].text, p->rules[i].verdict, &e) < 0)
            sp_error_free(e);
    }
    pthread_mutex_lock(&g.mu);
    r->secrets = old->secrets;
    r->secrets->refs++;
    pthread_mutex_unlock(&g.mu);
    add_host_addresses(&r->p);
    return r;
}

/* Put r in force and cut the open connections it no longer allows; how many. */
static unsigned put_in_force(policy_ref *r)
{
    pthread_mutex_lock(&g.mu);
    policy_ref *old = g.policy;
    g.policy = r;
    policy_put_locked(old);
    unsigned cut = 0;
    for (conn *c = g.live; c; c = c->next)
        if (c->allowed && c->up >= 0 && !atomic_load(&c->cut) && !still_allowed(c, &r->p)) {
            atomic_store(&c->cut, 1);
            shutdown(c->client, SHUT_RDWR);
            shutdown(c->up, SHUT_RDWR);
            cut++;
        }
    pthread_mutex_unlock(&g.mu);
    return cut;
}

/* Every WATCH_MS, and whenever the host's addresses change: a changed
 * policy file is read, or the host's new addresses taken, and put in force;
 * the open connections it no longer allows are cut. Only this thread
 * replaces g.policy, so it reads it without the lock. */
static void *watcher(void *arg)
{
    (void)arg;
    int events = address_events();
    /* The first look: what changed between the first read and the socket. */
    for (bool look = true;; look = events < 0) {
        if (events >= 0) {
            struct pollfd p = {events, POLLIN, 0};
            if (poll(&p, 1, WATCH_MS) > 0) {
                /* Which change it was does not matter (nor an overflow,
                 * ENOBUFS): the addresses are read whole. */
                char buf[8192];
                while (recv(events, buf, sizeof(buf), 0) > 0 || errno == ENOBUFS)
                    ;
                look = true;
            }
        } else {
            struct timespec ts = {0, WATCH_MS * 1000000L};
            nanosleep(&ts, NULL);
        }
        bool moved = look && addresses_moved();
        struct stat st;
        bool edited =
            stat(g.policy_path, &st) == 0 &&
            !(st.st_ino == g.policy_st.st_ino && st.st_size == g.policy_st.st_size &&
              st.st_mtim.tv_sec == g.policy_st.st_mtim.tv_sec &&
              st.st_mtim.tv_nsec == g.policy_st.st_mtim.tv_nsec && st.st_dev == g.policy_st.st_dev);
        policy_ref *r = NULL;
        if (edited) {
            struct stat got;
            r = load_policy(&got);
            g.policy_st = r ? got : st; /* a bad file is not read again until it changes */
        }
        bool read = r != NULL;
        if (!r && moved)
            r = with_new_addresses(g.policy);
        if (!r)
            continue;
        unsigned cut = put_in_force(r);
        said_loaded(r);
        say("%s%s%s (%zu rules)%s", read ? "policy read anew" : "", read && moved ? ", " : "",
            moved ? "host addresses changed" : "", r->p.n_rules,
            cut ? "; open connections cut" : "");
    }
    return NULL;
}

/* ---------------------------------------------------------------- log -- */

/* s as a JSON string. A name the client sent may be any bytes: when s is
 * not UTF-8, its bytes from 0x80 up are written as \u0080 to \u00ff (each
 * byte one character), so that the line stays JSON, which is UTF-8. */
static void json_str(char *out, size_t cap, size_t *at, const char *s)
{
    bool utf8 = !s || sp_utf8_valid(s, strlen(s));
    if (*at < cap)
        out[(*at)++] = '"';
    for (; s && *s && *at + 8 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            *at += (size_t)snprintf(out + *at, cap - *at, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f || (ch >= 0x80 && !utf8))
            *at += (size_t)snprintf(out + *at, cap - *at, "\\u%04x", ch);
        else
            out[(*at)++] = (char)ch;
    }
    if (*at < cap)
        out[(*at)++] = '"';
}

static void log_conn(const conn *c)
{
    char line[2048];
    size_t at = 0;
    time_t secs = (time_t)(c->started_ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    at +=
        strftime(line, sizeof(line), "{\"event\":\"connection\",\"time\":\"%Y-%m-%dT%H:%M:%S", &tm);
    at += (size_t)snprintf(line + at, sizeof(line) - at,
                           ".%03dZ\",\"proto\":", (int)(c->started_ms % 1000));
    json_str(line, sizeof(line), &at, c->proto);
    at += (size_t)snprintf(line + at, sizeof(line) - at, ",\"host\":");
    json_str(line, sizeof(line), &at, c->host);
    at += (size_t)snprintf(line + at, sizeof(line) - at, ",\"port\":%u,\"addr\":", c->port);
    json_str(line, sizeof(line), &at, c->addr);
    at += (size_t)snprintf(line + at, sizeof(line) - at,
                           ",\"verdict\":\"%s\",\"up\":%llu,\"down\":%llu,\"ms\":%lld,\"rule\":",
                           c->allowed && !atomic_load(&c->cut) ? "allow" : "deny",
                           (unsigned long long)c->up_bytes, (unsigned long long)c->down_bytes,
                           (long long)(wall_ms() - c->started_ms));
    if (c->rule)
        json_str(line, sizeof(line), &at, c->rule);
    else
        at += (size_t)snprintf(line + at, sizeof(line) - at, "null");
    at += (size_t)snprintf(line + at, sizeof(line) - at, ",\"why\":");
    json_str(line, sizeof(line), &at, c->why);
    if (c->terminated)
        at += (size_t)snprintf(line + at, sizeof(line) - at, ",\"tls\":\"terminated\"");
    if (c->secret[0]) {
        at += (size_t)snprintf(line + at, sizeof(line) - at, ",\"secret\":");
        json_str(line, sizeof(line), &at, c->secret);
    }
    if (at + 2 >= sizeof(line))
        at = sizeof(line) - 3;
    line[at++] = '}';
    line[at++] = '\n';
    if (g.log_fd >= 0 && write(g.log_fd, line, at) < 0)
        say("cannot write the connection log: %s", strerror(errno));
}

/* ---------------------------------------------------------------- I/O -- */

/* Read at least one byte before the deadline; 0 at EOF, -1 on error or time out. */
static ssize_t read_by(int fd, void *buf, size_t cap, int64_t deadline, int flags)
{
    for (;;) {
        ssize_t r = recv(fd, buf, cap, flags);
        if (r >= 0)
            return r;
        if (errno != EAGAIN && errno != EINTR)
            return -1;
        int64_t left = deadline - mono_ms();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, (int)left);
    }
}

static bool read_exact(int fd, void *buf, size_t n, int64_t deadline)
{
    for (size_t at = 0; at < n;) {
        ssize_t r = read_by(fd, (char *)buf + at, n - at, deadline, 0);
        if (r <= 0)
            return false;
        at += (size_t)r;
    }
    return true;
}

static bool write_all(int fd, const void *buf, size_t n, int64_t deadline)
{
    for (size_t at = 0; at < n;) {
        ssize_t w = send(fd, (const char *)buf + at, n - at, MSG_NOSIGNAL);
        if (w > 0) {
            at += (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return false;
        int64_t left = deadline - mono_ms();
        if (left <= 0)
            return false;
        struct pollfd p = {fd, POLLOUT, 0};
        poll(&p, 1, (int)left);
    }
    return true;
}

/* ---------------------------------------------------------- decisions -- */

static void set_port(struct sockaddr_storage *ss, uint16_t port)
{
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = htons(port);
    else
        ((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

/* Connect within the deadline; the socket, or -1 with errno. */
static int connect_by(const struct sockaddr_storage *ss, int64_t deadline)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    socklen_t sl =
        ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    if (connect(fd, (const struct sockaddr *)ss, sl) < 0 && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    struct pollfd p = {fd, POLLOUT, 0};
    int64_t left = deadline - mono_ms();
    if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
        close(fd);
        errno = ETIMEDOUT;
        return -1;
    }
    int soerr = 0;
    socklen_t len = sizeof(soerr);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
    if (soerr) {
        close(fd);
        errno = soerr;
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

typedef enum { OPEN_OK, OPEN_DENIED, OPEN_NO_NAME, OPEN_FAILED, OPEN_TIMEOUT } open_result;

/* Decide on c->host:c->port and connect to the first address the policy
 * allows. Sets c->up, c->sa, c->addr, c->allowed and c->why. */
static open_result open_upstream(conn *c)
{
    struct sockaddr_storage lit;
    c->literal = sp_egress_parse_literal(&lit, c->host);
    policy_ref *pr = policy_get();
    const sp_egress_policy *p = &pr->p;
    sp_egress_decision d;
    sp_egress_addrs addrs = {.n = 0};
    open_result res = OPEN_DENIED;
    /* A stand-in in a name would leave in a lookup, or in the name the
     * upstream is asked for: whatever the rules say. */
    const sp_egress_secret *in_name =
        sp_egress_secrets_find(&pr->secrets->s, c->host, strlen(c->host));
    if (in_name || strstr(c->host, SP_SECRET_STANDIN_PREFIX)) {
        snprintf(c->secret, sizeof(c->secret), "%s", in_name ? in_name->name : "");
        snprintf(c->why, sizeof(c->why), "refused: the host name carries a secret's stand-in%s%s",
                 in_name ? ": " : "", in_name ? in_name->name : "");
        goto done;
    }
    if (c->literal) {
        addrs.a[addrs.n++] = lit;
    } else {
        if (!sp_egress_may_resolve(&d, p, c->host, c->port)) {
            set_why(c, &d);
            goto done;
        }
        char why[256];
        if (sp_egress_resolve(&addrs, c->host, g.hosts_path, g.o.resolv_conf, RESOLVE_MS, why,
                              sizeof(why)) < 0) {
            snprintf(c->why, sizeof(c->why), "cannot resolve %.200s: %.200s", c->host, why);
            res = OPEN_NO_NAME;
            goto done;
        }
    }
    /* Every address is judged; the first allowed one that answers wins.
     * With none allowed, the first address's refusal is the answer. */
    int64_t deadline = mono_ms() + g.o.connect_timeout_ms;
    bool any = false;
    int last_errno = 0;
    for (size_t i = 0; i < addrs.n; i++) {
        sp_egress_decision di;
        if (!sp_egress_decide(&di, p, c->literal ? NULL : c->host, (struct sockaddr *)&addrs.a[i],
                              c->port)) {
            if (!any && i == 0) {
                set_why(c, &di);
                sp_egress_addr_text(&addrs.a[i], c->addr, sizeof(c->addr));
            }
            continue;
        }
        any = true;
        set_port(&addrs.a[i], c->port);
        c->sa = addrs.a[i];
        sp_egress_addr_text(&addrs.a[i], c->addr, sizeof(c->addr));
        set_why(c, &di);
        int fd = connect_by(&addrs.a[i], deadline);
        if (fd >= 0) {
            c->allowed = true;
            pthread_mutex_lock(&g.mu);
            c->up = fd;
            /* A policy that changed while it connected still counts. */
            bool ok = still_allowed(c, &g.policy->p);
            pthread_mutex_unlock(&g.mu);
            if (!ok) {
                c->allowed = false;
                snprintf(c->why, sizeof(c->why), "%s", c->cut_why);
                free(c->rule);
                c->rule = NULL;
                goto done;
            }
            res = OPEN_OK;
            goto done;
        }
        last_errno = errno;
        if (errno == ETIMEDOUT)
            break;
    }
    if (any) {
        c->allowed = true;
        char decided_by[sizeof(c->why)];
        memcpy(decided_by, c->why, sizeof(decided_by));
        snprintf(c->why, sizeof(c->why), "%.300s; connect to %s port %u: %.100s", decided_by,
                 c->addr, c->port, strerror(last_errno));
        res = last_errno == ETIMEDOUT ? OPEN_TIMEOUT : OPEN_FAILED;
    }
done:
    policy_put(pr);
    return res;
}

/* ----------------------------------------------------------- TLS SNI -- */

int sp_egress_sni(char *name, size_t cap, const unsigned char *b, size_t len, int *is_tls)
{
    *is_tls = 0;
    name[0] = '\0';
    if (len < 1)
        return -2;
    if (b[0] < 0x14 || b[0] > 0x18)
        return 0; /* not a TLS record */
    if (len < 2)
        return -2;
    if (b[1] != 0x03) /* SSL 3.0 to TLS 1.3 all say 3.x here */
        return 0;
    *is_tls = 1;
    /* Another record first (an alert, change_cipher_spec, ...): servers may
     * skip it and read the ClientHello behind it (Go's crypto/tls and rustls
     * drop warning alerts before the handshake), which would go unchecked. */
    if (b[0] != 0x16)
        return -1;
    if (len < 5)
        return -2;
    size_t rec = (size_t)b[3] << 8 | b[4];
    if (rec > 16384 || rec < 4)
        return -1;
    if (len < 5 + rec)
        return -2;
    const unsigned char *h = b + 5, *end = b + 5 + rec;
    if (h[0] != 0x01)
        return -1; /* the first handshake message must be a ClientHello */
    size_t hl = (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
    if (4 + hl > rec)
        return -1; /* split over records: the server would see what we cannot */
    end = h + 4 + hl;
    const unsigned char *p = h + 4 + 2 + 32; /* version, random */
    if (p + 1 > end)
        return -1;
    p += 1 + p[0]; /* session id */
    if (p + 2 > end)
        return -1;
    p += 2 + ((size_t)p[0] << 8 | p[1]); /* cipher suites */
    if (p + 1 > end)
        return -1;
    p += 1 + p[0]; /* compression methods */
    if (p == end)
        return 0; /* no extensions */
    if (p + 2 > end)
        return -1;
    size_t el = (size_t)p[0] << 8 | p[1];
    p += 2;
    if (p + el != end)
        return -1;
    int found = 0;
    while (p < end) {
        if (p + 4 > end)
            return -1;
        unsigned type = (unsigned)p[0] << 8 | p[1];
        size_t l = (size_t)p[2] << 8 | p[3];
        p += 4;
        if (p + l > end)
            return -1;
        if (type == 0) { /* server_name */
            if (found || l < 2)
                return -1;
            const unsigned char *q = p + 2, *qe = p + l;
            if (2 + ((size_t)p[0] << 8 | p[1]) != l)
                return -1;
            while (q < qe) {
                if (q + 3 > qe)
                    return -1;
                size_t nl = (size_t)q[1] << 8 | q[2];
                if (q + 3 + nl > qe)
                    return -1;
                if (q[0] == 0) { /* host_name: one only */
                    if (found || nl == 0 || nl >= cap || memchr(q + 3, 0, nl))
                        return -1;
                    memcpy(name, q + 3, nl);
                    name[nl] = '\0';
                    found = 1;
                }
                q += 3 + nl;
            }
        }
        p += l;
    }
    return found;
}

#define same_host sp_egress_same_host

/* ------------------------------------------------------------- pumping -- */

typedef enum { BODY_NONE, BODY_LENGTH, BODY_CHUNKED, BODY_RAW } body_mode;

typedef struct body {
    body_mode mode;
    uint64_t left; /* LENGTH: bytes; CHUNKED: of the current chunk */
    int st;        /* CHUNKED: the parser's state */
    int digits;
    bool done;
} body;

enum {
    CH_SIZE,
    CH_EXT,
    CH_SIZE_LF,
    CH_DATA,
    CH_DATA_CR,
    CH_DATA_LF,
    CH_TR_START,
    CH_TRAILER,
    CH_END_LF
};

static int hexval(unsigned char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch = (unsigned char)(ch | 0x20);
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* How many of the n client bytes belong to the request body (and go
 * upstream); sets b->done at its end; -1 when the framing is malformed. */
static ssize_t body_take(body *b, const unsigned char *p, size_t n)
{
    if (b->done)
        return 0;
    switch (b->mode) {
    case BODY_NONE:
        b->done = true;
        return 0;
    case BODY_RAW:
        return (ssize_t)n;
    case BODY_LENGTH: {
        size_t k = n < b->left ? n : (size_t)b->left;
        b->left -= k;
        if (b->left == 0)
            b->done = true;
        return (ssize_t)k;
    }
    case BODY_CHUNKED:
        break;
    }
    size_t i = 0;
    while (i < n && !b->done) {
        unsigned char ch = p[i];
        switch (b->st) {
        case CH_SIZE: {
            int v = hexval(ch);
            if (v >= 0) {
                if (++b->digits > 15)
                    return -1;
                b->left = b->left * 16 + (uint64_t)v;
            } else if (b->digits && (ch == ';' || ch == ' ' || ch == '\t')) {
                b->st = CH_EXT;
            } else if (b->digits && ch == '\r') {
                b->st = CH_SIZE_LF;
            } else {
                return -1;
            }
            i++;
            break;
        }
        case CH_EXT:
            if (ch == '\r')
                b->st = CH_SIZE_LF;
            else if (ch == '\n')
                return -1;
            i++;
            break;
        case CH_SIZE_LF:
            if (ch != '\n')
                return -1;
            b->st = b->left ? CH_DATA : CH_TR_START;
            b->digits = 0;
            i++;
            break;
        case CH_DATA: {
            size_t k = n - i < b->left ? n - i : (size_t)b->left;
            i += k;
            b->left -= k;
            if (b->left == 0)
                b->st = CH_DATA_CR;
            break;
        }
        case CH_DATA_CR:
            if (ch != '\r')
                return -1;
            b->st = CH_DATA_LF;
            i++;
            break;
        case CH_DATA_LF:
            if (ch != '\n')
                return -1;
            b->st = CH_SIZE;
            i++;
            break;
        case CH_TR_START:
            b->st = ch == '\r' ? CH_END_LF : CH_TRAILER;
            i++;
            break;
        case CH_TRAILER:
            if (ch == '\n')
                b->st = CH_TR_START;
            i++;
            break;
        case CH_END_LF:
            if (ch != '\n')
                return -1;
            b->done = true;
            i++;
            break;
        }
    }
    return (ssize_t)i;
}

typedef struct buf {
    unsigned char d[PUMP_BUF];
    size_t at, end;
} buf;

/* A TLS alert (fatal, unrecognized_name) for a client whose ClientHello
 * names another host: its TLS library says so instead of a reset. */
static const unsigned char alert_unrecognized_name[] = {0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x70};

/* Move bytes both ways until both sides are done. Client bytes go through
 * the body filter (`pre` first: what came after the request head), and,
 * while sni_host is set, are held until the ClientHello's server name has
 * been checked against it (on a tunnel to an address, c->literal, a server
 * name is refused whatever it is). */
static void pump(conn *c, body *b, const unsigned char *pre, size_t pre_len, const char *sni_host)
{
    buf *cu = sp_xcalloc(1, sizeof(*cu)), *uc = sp_xcalloc(1, sizeof(*uc));
    unsigned char *hello = NULL;
    size_t hello_len = 0;
    bool sni_wait = sni_host != NULL;
    if (sni_wait)
        hello = sp_xmalloc(TLS_RECORD_MAX);
    bool client_eof = false, up_eof = false, up_shut = false, client_shut = false;
    bool failed = false;
    fcntl(c->client, F_SETFL, fcntl(c->client, F_GETFL) | O_NONBLOCK);
    /* Upstream to client through a pipe with splice(2): a download moves
     * without being copied through this process (a third of the CPU per
     * byte, measured by bench_egress). 256 KiB, not more: 256 connections
     * of 1 MiB pipes would meet the per-user pipe memory limit. Without a
     * pipe, through uc. */
    int pp[2] = {-1, -1};
    size_t in_pipe = 0, pipe_cap = 0;
    if (pipe2(pp, O_NONBLOCK | O_CLOEXEC) == 0) {
        fcntl(pp[1], F_SETPIPE_SZ, PIPE_BYTES);
        int sz = fcntl(pp[1], F_GETPIPE_SZ);
        pipe_cap = sz > 0 ? (size_t)sz : 65536;
    }

    /* Client bytes: into the hello buffer or through the body filter. */
#define TAKE_CLIENT(ptr, len)                                                                      \
    do {                                                                                           \
        const unsigned char *p_ = (ptr);                                                           \
        size_t n_ = (len);                                                                         \
        if (sni_wait) {                                                                            \
            memcpy(hello + hello_len, p_, n_);                                                     \
            hello_len += n_;                                                                       \
        } else {                                                                                   \
            ssize_t k_ = body_take(b, p_, n_);                                                     \
            if (k_ < 0) {                                                                          \
                failed = true;                                                                     \
                snprintf(c->why, sizeof(c->why), "a malformed chunked request body");              \
            } else {                                                                               \
                memcpy(cu->d + cu->end, p_, (size_t)k_);                                           \
                cu->end += (size_t)k_;                                                             \
            }                                                                                      \
        }                                                                                          \
    } while (0)

    if (pre_len)
        TAKE_CLIENT(pre, pre_len);
    while (!failed && !atomic_load(&c->cut)) {
        if (sni_wait && hello_len) {
            char name[256];
            int tls = 0;
            int r = sp_egress_sni(name, sizeof(name), hello, hello_len, &tls);
            if (r == -2 && hello_len >= TLS_RECORD_MAX)
                r = -1;
            if (r == -1 || (r == 1 && (c->literal || !same_host(name, sni_host)))) {
                if (r == -1)
                    snprintf(c->why, sizeof(c->why),
                             "refused: TLS that does not start with one whole, well-formed "
                             "ClientHello");
                else
                    snprintf(c->why, sizeof(c->why),
                             "refused: the TLS server name %.200s is not the host asked for", name);
                free(c->rule);
                c->rule = NULL;
                c->allowed = false;
                write_all(c->client, alert_unrecognized_name, sizeof(alert_unrecognized_name),
                          mono_ms() + 1000);
                break;
            }
            if (r != -2) {
                sni_wait = false;
                TAKE_CLIENT(hello, hello_len);
                hello_len = 0;
                continue;
            }
        }
        if (cu->at == cu->end)
            cu->at = cu->end = 0;
        bool client_done = client_eof || b->done;
        bool down_left = pp[0] >= 0 ? in_pipe > 0 : uc->at < uc->end;
        /* A request body the client left before its end will not be whole:
         * the upstream would wait for the rest as long as it cares to, and
         * this connection with it. */
        if (client_eof && !b->done && (b->mode == BODY_LENGTH || b->mode == BODY_CHUNKED))
            break;
        if (client_done && cu->at == cu->end && !up_shut && b->mode == BODY_RAW) {
            shutdown(c->up, SHUT_WR);
            up_shut = true;
        }
        if (up_eof && !down_left && !client_shut) {
            shutdown(c->client, SHUT_WR);
            client_shut = true;
        }
        bool http_done = b->mode != BODY_RAW && up_eof && !down_left;
        if ((client_done && up_eof && cu->at == cu->end && !down_left) || http_done)
            break;
        struct pollfd pf[2] = {{c->client, 0, 0}, {c->up, 0, 0}};
        size_t room = sni_wait ? TLS_RECORD_MAX - hello_len : sizeof(cu->d) - cu->end;
        if (!client_done && cu->at == cu->end && room)
            pf[0].events |= POLLIN;
        if (down_left)
            pf[0].events |= POLLOUT;
        if (!up_eof && (pp[0] >= 0 ? in_pipe < pipe_cap : uc->at == uc->end))
            pf[1].events |= POLLIN;
        if (cu->at < cu->end)
            pf[1].events |= POLLOUT;
        if (poll(pf, 2, WATCH_MS) < 0 && errno != EINTR)
            break;
        if (pf[0].revents & (POLLIN | POLLHUP | POLLERR) && (pf[0].events & POLLIN)) {
            unsigned char tmp[PUMP_BUF];
            ssize_t r = recv(c->client, tmp, room < sizeof(tmp) ? room : sizeof(tmp), 0);
            if (r > 0)
                TAKE_CLIENT(tmp, (size_t)r);
            else if (r == 0 || (errno != EAGAIN && errno != EINTR))
                client_eof = true;
        }
        if (pf[1].revents & (POLLIN | POLLHUP | POLLERR) && (pf[1].events & POLLIN)) {
            ssize_t r;
            if (pp[0] >= 0) {
                /* Into the pipe and on, no copy through this process. */
                r = splice(c->up, NULL, pp[1], NULL, pipe_cap - in_pipe,
                           SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
                if (r > 0)
                    in_pipe += (size_t)r;
            } else {
                r = recv(c->up, uc->d, sizeof(uc->d), 0);
                if (r > 0) {
                    uc->at = 0;
                    uc->end = (size_t)r;
                }
            }
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
                up_eof = true;
        }
        /* Sent at once, not after another poll: each wait costs a system
         * call, and the other side is writable nearly always. */
        while (cu->at < cu->end) {
            ssize_t w = send(c->up, cu->d + cu->at, cu->end - cu->at, MSG_NOSIGNAL);
            if (w <= 0)
                break;
            cu->at += (size_t)w;
            c->up_bytes += (uint64_t)w;
        }
        if (cu->at < cu->end && errno != EAGAIN && errno != EINTR)
            break;
        bool gone = false;
        while (pp[0] >= 0 ? in_pipe > 0 : uc->at < uc->end) {
            ssize_t w = pp[0] >= 0
                            ? splice(pp[0], NULL, c->client, NULL, in_pipe,
                                     SPLICE_F_NONBLOCK | SPLICE_F_MOVE)
                            : send(c->client, uc->d + uc->at, uc->end - uc->at, MSG_NOSIGNAL);
            if (w <= 0) {
                gone = w == 0 || (errno != EAGAIN && errno != EINTR);
                break;
            }
            if (pp[0] >= 0)
                in_pipe -= (size_t)w;
            else
                uc->at += (size_t)w;
            c->down_bytes += (uint64_t)w;
        }
        if (gone)
            break;
    }
#undef TAKE_CLIENT
    if (failed)
        c->allowed = false;
    if (pp[0] >= 0) {
        close(pp[0]);
        close(pp[1]);
    }
    free(hello);
    free(cu);
    free(uc);
}

/* ---------------------------------------------------------- protocols -- */

/* Whether the stand-ins in a request head (line and headers) may go where
 * c goes: each must be of a secret for c's host and port (over TLS or
 * not). When not, c->why and c->secret say which. */
static bool standins_may_go(conn *c, const void *head, size_t len, bool tls)
{
    policy_ref *pr = policy_get();
    bool ok = true;
    for (size_t i = 0; i < pr->secrets->s.n && ok; i++) {
        const sp_egress_secret *x = &pr->secrets->s.v[i];
        if (!memmem(head, len, x->standin, SP_SECRET_STANDIN_LEN) ||
            sp_egress_secret_for(x, c->host, c->port, tls))
            continue;
        ok = false;
        snprintf(c->secret, sizeof(c->secret), "%s", x->name);
        snprintf(c->why, sizeof(c->why),
                 "refused: the request carries the stand-in of secret %s, which is not for "
                 "%s%.200s:%u",
                 x->name, tls ? "" : "http://", c->host, c->port);
        free(c->rule);
        c->rule = NULL;
        c->allowed = false;
    }
    policy_put(pr);
    return ok;
}

/* The request head in *out (its line, then headers to the blank line):
 * the stand-ins of secrets for c's host put back to their values, in the
 * headers all of them, in the request line those that go in the query. */
static void put_secrets(conn *c, char **out, size_t *len, bool tls)
{
    policy_ref *pr = policy_get();
    if (!pr->secrets->s.n) {
        policy_put(pr);
        return;
    }
    char *line_end = memmem(*out, *len, "\r\n", 2);
    size_t ll = line_end ? (size_t)(line_end - *out) : *len;
    unsigned char *a = NULL, *b = NULL;
    size_t al = 0, bl = 0;
    size_t n = sp_egress_secrets_replace(&pr->secrets->s, c->host, c->port, tls, true, false, *out,
                                         ll, &a, &al);
    n += sp_egress_secrets_replace(&pr->secrets->s, c->host, c->port, tls, false, false, *out + ll,
                                   *len - ll, &b, &bl);
    if (n) {
        /* Which one, for the log (the first found). */
        const sp_egress_secret *x = sp_egress_secrets_find(&pr->secrets->s, *out, *len);
        snprintf(c->secret, sizeof(c->secret), "%s", x ? x->name : "?");
        explicit_bzero(*out, *len);
        free(*out);
        *out = sp_xmalloc(al + bl);
        memcpy(*out, a, al);
        memcpy(*out + al, b, bl);
        *len = al + bl;
    }
    explicit_bzero(a, al);
    explicit_bzero(b, bl);
    free(a);
    free(b);
    policy_put(pr);
}

/* The proxy's own answer: a status and one line of text. */
static size_t reply_text(char *out, size_t cap, int code, const char *reason, const char *msg)
{
    char body_text[900];
    int bl = snprintf(body_text, sizeof(body_text), "sandpod egress: %.800s\n", msg);
    int hl = snprintf(out, cap,
                      "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                      "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
                      code, reason, bl, body_text);
    return hl < 0 ? 0 : (size_t)hl < cap ? (size_t)hl : cap - 1;
}

static void http_reply(conn *c, int code, const char *reason, const char *msg)
{
    char head[1200];
    size_t n = reply_text(head, sizeof(head), code, reason, msg);
    write_all(c->client, head, n, mono_ms() + 2000);
}

/* The same inside a terminated tunnel. */
static void tls_reply(SSL *s, int code, const char *reason, const char *msg)
{
    char head[1200];
    size_t n = reply_text(head, sizeof(head), code, reason, msg);
    sp_egress_tls_write(s, head, n, mono_ms() + 2000);
}

/* host[:port] or [v6][:port]: into c->host (lowercase) and c->port. */
static bool parse_authority(conn *c, const char *a, size_t n, uint16_t default_port)
{
    const char *host = a, *colon = NULL;
    size_t hl;
    if (n && a[0] == '[') {
        const char *close_br = memchr(a, ']', n);
        if (!close_br)
            return false;
        host = a + 1;
        hl = (size_t)(close_br - host);
        if (close_br + 1 < a + n) {
            if (close_br[1] != ':')
                return false;
            colon = close_br + 1;
        }
        struct in6_addr tmp;
        char t[INET6_ADDRSTRLEN];
        if (hl >= sizeof(t))
            return false;
        memcpy(t, host, hl);
        t[hl] = '\0';
        if (inet_pton(AF_INET6, t, &tmp) != 1)
            return false;
    } else {
        colon = memchr(a, ':', n);
        hl = colon ? (size_t)(colon - a) : n;
    }
    if (hl == 0 || hl >= sizeof(c->host))
        return false;
    for (size_t i = 0; i < hl; i++)
        c->host[i] = (char)((host[i] >= 'A' && host[i] <= 'Z') ? host[i] | 0x20 : host[i]);
    c->host[hl] = '\0';
    c->port = default_port;
    if (colon) {
        const char *p = colon + 1, *e = a + n;
        if (p == e || e - p > 5)
            return false;
        unsigned v = 0;
        for (; p < e; p++) {
            if (*p < '0' || *p > '9')
                return false;
            v = v * 10 + (unsigned)(*p - '0');
        }
        if (v == 0 || v > 65535)
            return false;
        c->port = (uint16_t)v;
    }
    return true;
}

/* A header's name matches (case-insensitive) at line; its value in *v, *vl. */
static bool header_is(const char *line, size_t len, const char *name, const char **v, size_t *vl)
{
    size_t nl = strlen(name);
    if (len <= nl || line[nl] != ':' || strncasecmp(line, name, nl) != 0)
        return false;
    const char *p = line + nl + 1, *e = line + len;
    while (p < e && (*p == ' ' || *p == '\t'))
        p++;
    while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *v = p;
    *vl = (size_t)(e - p);
    return true;
}

/* No CR or LF but in CRLF pairs, no control characters but HTAB: servers
 * differ on them (many end a header line at a bare LF), and a header line
 * we did not see is a body framing we did not check (request smuggling). */
static bool head_bytes_ok(const char *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)h[i];
        if (ch == '\r' && i + 1 < n && h[i + 1] == '\n')
            i++;
        else if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            return false;
    }
    return true;
}

/* Is s[0..n) a token (RFC 9110), as a method and a header name must be? */
static bool is_token(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch && strchr("!#$%&'*+-.^_`|~", ch))))
            return false;
    }
    return true;
}

/* A header line whose name, up to the first ':', is a token: not
 * "Transfer-Encoding : chunked", which we would not take for the header and
 * a lenient server would; nor a folded line, which starts with a space. */
static bool header_name_ok(const char *l, size_t ll)
{
    const char *colon = memchr(l, ':', ll);
    return colon && is_token(l, (size_t)(colon - l));
}

/* A request head, parsed: its line's parts and what its headers say of
 * the host and the body's framing. */
typedef struct req_head {
    const char *h, *line_end;
    size_t len;
    size_t ml; /* the method: h[0..ml) */
    const char *target;
    size_t tl;
    char minor; /* HTTP/1.<minor> */
    int hosts, lengths;
    bool chunked;
    const char *hv; /* the Host header's value */
    size_t hvl;
    uint64_t clen;
    bool expect_continue; /* Expect: 100-continue */
} req_head;

/* The request line of the head h[0..len) (CRLF CRLF included). @return
 * NULL, or what is wrong (a 400). */
static const char *parse_line(req_head *r, const char *h, size_t len)
{
    memset(r, 0, sizeof(*r));
    r->h = h;
    r->len = len;
    if (!head_bytes_ok(h, len))
        return "a malformed or ambiguous request head";
    const char *line_end = memmem(h, len, "\r\n", 2);
    const char *sp1 = memchr(h, ' ', (size_t)(line_end - h));
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(line_end - sp1 - 1)) : NULL;
    /* The method a token, no tab anywhere: a server that splits the line at
     * any white space would find another target in "GET\thttp://evil/ ..."
     * (and an absolute one names the host it serves, whatever Host says). */
    if (!sp1 || !sp2 || !is_token(h, (size_t)(sp1 - h)) ||
        memchr(h, '\t', (size_t)(line_end - h)) || (size_t)(line_end - sp2 - 1) != 8 ||
        strncmp(sp2 + 1, "HTTP/1.", 7) != 0 || (sp2[8] != '0' && sp2[8] != '1'))
        return "not an HTTP/1 proxy request";
    r->line_end = line_end;
    r->ml = (size_t)(sp1 - h);
    r->target = sp1 + 1;
    r->tl = (size_t)(sp2 - r->target);
    r->minor = sp2[8];
    return NULL;
}

/* r's header lines one by one (their lengths in *ll): from l NULL, NULL
 * after the last. */
static const char *next_header(const req_head *r, const char *l, size_t *ll)
{
    l = l ? l + *ll + 2 : r->line_end + 2;
    if (l >= r->h + r->len - 2)
        return NULL;
    *ll = (size_t)((const char *)memmem(l, (size_t)(r->h + r->len - l), "\r\n", 2) - l);
    return l;
}

/* The headers: Host, and the body's framing, which must be one and
 * unambiguous. @return false (a 400) when they are not. */
static bool scan_headers(req_head *r)
{
    bool bad = false;
    size_t ll = 0;
    for (const char *l = NULL; (l = next_header(r, l, &ll)) != NULL;) {
        const char *v;
        size_t vl;
        if (!header_name_ok(l, ll))
            bad = true; /* obsolete folding, or not a header */
        else if (header_is(l, ll, "host", &v, &vl)) {
            r->hosts++;
            r->hv = v;
            r->hvl = vl;
        } else if (header_is(l, ll, "content-length", &v, &vl)) {
            uint64_t n = 0;
            if (vl == 0 || vl > 18)
                bad = true;
            for (size_t i = 0; i < vl; i++)
                if (v[i] < '0' || v[i] > '9')
                    bad = true;
                else
                    n = n * 10 + (uint64_t)(v[i] - '0');
            if (r->lengths++ && n != r->clen)
                bad = true;
            r->clen = n;
        } else if (header_is(l, ll, "transfer-encoding", &v, &vl)) {
            if (vl != 7 || strncasecmp(v, "chunked", 7) != 0 || r->chunked)
                bad = true;
            r->chunked = true;
        } else if (header_is(l, ll, "expect", &v, &vl)) {
            r->expect_continue = vl == 12 && strncasecmp(v, "100-continue", 12) == 0;
        }
    }
    return !bad && !(r->chunked && r->lengths);
}

/* Whether the Host header names host:port (default_port when it gives
 * none): one of them, or none in HTTP/1.0. */
static bool host_header_names(const req_head *r, const char *host, uint16_t port,
                              uint16_t default_port)
{
    conn hc = {.port = 0};
    return !(r->hosts > 1 || (r->hosts == 0 && r->minor == '1') ||
             (r->hosts == 1 && (!parse_authority(&hc, r->hv, r->hvl, default_port) ||
                                !same_host(hc.host, host) || hc.port != port)));
}

static body body_of(const req_head *r)
{
    body b = {.mode = r->chunked   ? BODY_CHUNKED
                      : r->lengths ? BODY_LENGTH
                                   : BODY_NONE,
              .left = r->clen};
    if (b.mode == BODY_LENGTH && r->clen == 0)
        b.mode = BODY_NONE;
    return b;
}

/* The head that goes upstream: `line` (CRLF included), r's headers but the
 * hop-by-hop and proxy ones, our own Connection: close. With body_len >= 0
 * (a body taken whole and changed), its framing is ours too: that
 * Content-Length, and no Transfer-Encoding or Expect. */
static char *upstream_head(const char *line, size_t line_len, const req_head *r, int64_t body_len,
                           size_t *len)
{
    static const char close_hdr[] = "Connection: close\r\n\r\n";
    char *out = sp_xmalloc(line_len + r->len + sizeof(close_hdr) + 48);
    memcpy(out, line, line_len);
    size_t at = line_len, ll = 0;
    for (const char *l = NULL; (l = next_header(r, l, &ll)) != NULL;) {
        const char *v;
        size_t vl;
        bool framing = header_is(l, ll, "content-length", &v, &vl) ||
                       header_is(l, ll, "transfer-encoding", &v, &vl) ||
                       header_is(l, ll, "expect", &v, &vl);
        if ((body_len < 0 || !framing) && !header_is(l, ll, "connection", &v, &vl) &&
            !header_is(l, ll, "proxy-connection", &v, &vl) &&
            !header_is(l, ll, "keep-alive", &v, &vl) &&
            !header_is(l, ll, "proxy-authorization", &v, &vl)) {
            memcpy(out + at, l, ll + 2);
            at += ll + 2;
        }
    }
    if (body_len >= 0)
        at += (size_t)sprintf(out + at, "Content-Length: %lld\r\n", (long long)body_len);
    memcpy(out + at, close_hdr, sizeof(close_hdr) - 1);
    *len = at + sizeof(close_hdr) - 1;
    return out;
}

/* How a request's body is read: from the client's socket or its TLS. */
typedef ssize_t (*body_reader)(void *ctx, void *dst, size_t n, int64_t deadline);

static ssize_t read_client(void *ctx, void *dst, size_t n, int64_t deadline)
{
    return read_by(((conn *)ctx)->client, dst, n, deadline, 0);
}

static ssize_t read_tls(void *ctx, void *dst, size_t n, int64_t deadline)
{
    return sp_egress_tls_read((SSL *)ctx, dst, n, deadline);
}

/* A chunked body, whole and checked (body_take()), without its framing. */
static void dechunk(sp_buf *out, const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint64_t size = 0;
        int d;
        while (i < n && (d = hexval(p[i])) >= 0)
            size = size * 16 + (uint64_t)d, i++;
        const unsigned char *lf = memchr(p + i, '\n', n - i); /* past extensions */
        if (!lf || size == 0)
            return;
        i = (size_t)(lf - p) + 1;
        if (size > n - i)
            return;
        sp_buf_add(out, p + i, (size_t)size);
        i += (size_t)size + 2; /* the data's CRLF */
    }
}

/* Whether a secret is for c's host and port (over TLS or not), one that
 * goes in bodies when in_body. */
static bool secret_for_conn(conn *c, bool tls, bool in_body)
{
    policy_ref *pr = policy_get();
    bool any = false;
    for (size_t i = 0; i < pr->secrets->s.n && !any; i++)
        any = (!in_body || pr->secrets->s.v[i].in_body) &&
              sp_egress_secret_for(&pr->secrets->s.v[i], c->host, c->port, tls);
    policy_put(pr);
    return any;
}

/* The body of a request to a host a body secret is for, taken whole (at
 * most SP_EGRESS_BODY_LIMIT bytes, pre first; chunks joined) with those
 * secrets' stand-ins put back to their values, into *out. @return 0; or
 * the status to answer (413, 400, or 0 with c->why set when the client
 * went away). A client that waits for 100 Continue is told to go on. */
static int take_body(conn *c, body *b, const unsigned char *pre, size_t pre_len, bool tls,
                     bool expect, body_reader rd, void *ctx, SSL *cs, sp_buf *out)
{
    sp_buf raw = SP_BUF_INIT;
    int status = 0;
    ssize_t k = body_take(b, pre, pre_len);
    if (k > 0)
        sp_buf_add(&raw, pre, (size_t)k);
    if (!b->done && expect && pre_len == 0) {
        static const char go_on[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (cs)
            sp_egress_tls_write(cs, go_on, sizeof(go_on) - 1, mono_ms() + 5000);
        else
            write_all(c->client, go_on, sizeof(go_on) - 1, mono_ms() + 5000);
    }
    int64_t deadline = mono_ms() + 60000;
    unsigned char tmp[PUMP_BUF];
    while (k >= 0 && !b->done && raw.len <= SP_EGRESS_BODY_LIMIT) {
        ssize_t r = rd(ctx, tmp, sizeof(tmp), deadline);
        if (r <= 0) {
            snprintf(c->why, sizeof(c->why), "the client left before the end of its request body");
            sp_buf_dispose(&raw);
            return 0;
        }
        if ((k = body_take(b, tmp, (size_t)r)) > 0)
            sp_buf_add(&raw, tmp, (size_t)k);
    }
    if (k < 0) {
        snprintf(c->why, sizeof(c->why), "a malformed chunked request body");
        status = 400;
    } else if (raw.len > SP_EGRESS_BODY_LIMIT) {
        snprintf(c->why, sizeof(c->why),
                 "a request body over %d bytes to a host a body secret is for (it is taken "
                 "whole to put the values in)",
                 SP_EGRESS_BODY_LIMIT);
        status = 413;
    }
    if (status == 0) {
        sp_buf plain = SP_BUF_INIT;
        if (b->mode == BODY_CHUNKED)
            dechunk(&plain, (const unsigned char *)raw.data, raw.len);
        else
            sp_buf_add(&plain, raw.data ? raw.data : "", raw.len);
        policy_ref *pr = policy_get();
        unsigned char *rep = NULL;
        size_t rl = 0;
        if (sp_egress_secrets_replace(&pr->secrets->s, c->host, c->port, tls, false, true,
                                      plain.data ? plain.data : "", plain.len, &rep, &rl) &&
            !c->secret[0]) {
            const sp_egress_secret *x =
                sp_egress_secrets_find(&pr->secrets->s, plain.data ? plain.data : "", plain.len);
            snprintf(c->secret, sizeof(c->secret), "%s", x ? x->name : "?");
        }
        policy_put(pr);
        sp_buf_add(out, rep, rl);
        explicit_bzero(rep, rl);
        free(rep);
        sp_buf_dispose(&plain);
    }
    sp_buf_dispose(&raw);
    return status;
}

/* Mark c refused (its why already says so). */
static void refuse(conn *c)
{
    free(c->rule);
    c->rule = NULL;
    c->allowed = false;
}

/* Send what b holds to s, as much as goes now; false when s failed. */
static bool tls_send(SSL *s, buf *b, uint64_t *count, bool *want_read, bool *want_write,
                     bool *progress)
{
    if (b->at == b->end)
        return true;
    ssize_t w = sp_egress_tls_step(s, true, b->d + b->at, b->end - b->at, want_read, want_write);
    if (w == -1 || w == 0)
        return false;
    if (w > 0) {
        b->at += (size_t)w;
        *count += (uint64_t)w;
        *progress = true;
    }
    return true;
}

/* The rest of a terminated connection: the request's body (what the
 * client sends after it is not passed on) up, the answer down, until the
 * upstream ends it (it was asked to: Connection: close). */
static void relay_tls(conn *c, SSL *cs, SSL *us, body *b, const unsigned char *pre, size_t pre_len)
{
    buf *cu = sp_xcalloc(1, sizeof(*cu)), *uc = sp_xcalloc(1, sizeof(*uc));
    ssize_t k = body_take(b, pre, pre_len);
    bool failed = k < 0;
    if (k > 0) {
        memcpy(cu->d, pre, (size_t)k);
        cu->end = (size_t)k;
    }
    bool up_eof = false;
    int64_t idle_end = mono_ms() + TLS_IDLE_MS;
    while (!failed && !atomic_load(&c->cut)) {
        bool progress = false, cr = false, cw = false, ur = false, uw = false;
        if (!b->done && cu->end == 0) {
            ssize_t r = sp_egress_tls_step(cs, false, cu->d, sizeof(cu->d), &cr, &cw);
            if (r > 0) {
                k = body_take(b, cu->d, (size_t)r);
                failed = k < 0;
                cu->end = k > 0 ? (size_t)k : 0;
                progress = true;
            } else if (r != -2) {
                snprintf(c->why + strlen(c->why), sizeof(c->why) - strlen(c->why),
                         "; the client left before the end of its request body");
                break;
            }
        }
        if (!tls_send(us, cu, &c->up_bytes, &ur, &uw, &progress))
            break;
        if (cu->at == cu->end)
            cu->at = cu->end = 0;
        if (!up_eof && uc->at == uc->end) {
            ssize_t r = sp_egress_tls_step(us, false, uc->d, sizeof(uc->d), &ur, &uw);
            if (r > 0) {
                uc->at = 0;
                uc->end = (size_t)r;
                progress = true;
            } else if (r != -2) {
                up_eof = true;
            }
        }
        if (!tls_send(cs, uc, &c->down_bytes, &cr, &cw, &progress))
            break;
        if (up_eof && uc->at == uc->end)
            break;
        if (progress) {
            idle_end = mono_ms() + TLS_IDLE_MS;
            continue;
        }
        /* Decrypted bytes already in hand are read without a wait. */
        if ((!b->done && cu->end == 0 && sp_egress_tls_pending(cs)) ||
            (!up_eof && uc->at == uc->end && sp_egress_tls_pending(us)))
            continue;
        if (mono_ms() > idle_end) {
            snprintf(c->why + strlen(c->why), sizeof(c->why) - strlen(c->why),
                     "; nothing moved for %d s", TLS_IDLE_MS / 1000);
            break;
        }
        struct pollfd pf[2] = {{c->client, (short)((cr ? POLLIN : 0) | (cw ? POLLOUT : 0)), 0},
                               {c->up, (short)((ur ? POLLIN : 0) | (uw ? POLLOUT : 0)), 0}};
        if (poll(pf, 2, WATCH_MS) < 0 && errno != EINTR)
            break;
    }
    if (failed) {
        snprintf(c->why, sizeof(c->why), "a malformed chunked request body");
        c->allowed = false;
    }
    free(cu);
    free(uc);
}

/* A tunnel to a host a secret with a TLS scope is for: its TLS ends here,
 * at a certificate of this proxy's CA for the tunnel's host (the sandbox
 * trusts the CA; egress_tls.h). One HTTP/1 request is read from it and
 * held to what a plain one is (origin-form, its Host the tunnel's, one
 * unambiguous framing, the stand-ins in it for this host), its secrets put
 * in, and it goes to the host over the proxy's own TLS, whose certificate
 * is verified; the answer comes back as it is. */
static void serve_terminated(conn *c, size_t pre_len)
{
    c->terminated = true;
    if (pre_len) {
        snprintf(c->why, sizeof(c->why),
                 "refused: bytes sent before the tunnel was established (this host's TLS is "
                 "terminated by the proxy)");
        refuse(c);
        return;
    }
    fcntl(c->client, F_SETFL, fcntl(c->client, F_GETFL) | O_NONBLOCK);
    fcntl(c->up, F_SETFL, fcntl(c->up, F_GETFL) | O_NONBLOCK);
    sp_egress_tls *t = atomic_load(&g.tls);
    char why[400];
    SSL *us = NULL, *cs = sp_egress_tls_accept(t, c->client, c->host, c->literal,
                                               mono_ms() + g.o.head_timeout_ms, why, sizeof(why));
    unsigned char *head = NULL;
    char *out = NULL;
    body b = {.mode = BODY_NONE};
    sp_buf whole = SP_BUF_INIT; /* a body taken whole (a body secret's host) */
    int64_t whole_len = -1;
    if (!cs) {
        snprintf(c->why, sizeof(c->why), "%s", why);
        if (strncmp(why, "refused:", 8) == 0)
            refuse(c);
        goto done;
    }
    head = sp_xmalloc(SP_EGRESS_HEAD_LIMIT);
    size_t got = 0;
    unsigned char *end = NULL;
    int64_t deadline = mono_ms() + g.o.head_timeout_ms;
    while (!(end = got >= 4 ? memmem(head, got, "\r\n\r\n", 4) : NULL) &&
           got < SP_EGRESS_HEAD_LIMIT) {
        ssize_t r = sp_egress_tls_read(cs, head + got, SP_EGRESS_HEAD_LIMIT - got, deadline);
        if (r <= 0) {
            snprintf(c->why, sizeof(c->why), "%s",
                     r == 0 ? "the client left before the end of its request head"
                            : "no complete request head in time");
            goto done;
        }
        got += (size_t)r;
    }
    if (!end) {
        snprintf(c->why, sizeof(c->why), "a request head over %d bytes", SP_EGRESS_HEAD_LIMIT);
        tls_reply(cs, 431, "Request Header Fields Too Large", c->why);
        goto done;
    }
    size_t head_len = (size_t)(end - head) + 4;
    req_head rh;
    const char *bad = parse_line(&rh, (const char *)head, head_len);
    if (!bad && (rh.tl == 0 || rh.target[0] != '/'))
        bad = "a request in a tunnel names its target as /path";
    if (!bad && !scan_headers(&rh))
        bad = "a malformed or ambiguous request head";
    if (bad) {
        snprintf(c->why, sizeof(c->why), "%s", bad);
        tls_reply(cs, 400, "Bad Request", c->why);
        goto done;
    }
    if (!host_header_names(&rh, c->host, c->port, 443)) {
        snprintf(c->why, sizeof(c->why),
                 "refused: the Host header does not name the tunnel's host %.200s:%u", c->host,
                 c->port);
        refuse(c);
        tls_reply(cs, 403, "Forbidden", c->why);
        goto done;
    }
    if (!standins_may_go(c, head, head_len, true)) {
        tls_reply(cs, 403, "Forbidden", c->why);
        goto done;
    }
    b = body_of(&rh);
    if (b.mode != BODY_NONE && secret_for_conn(c, true, true)) {
        int st = take_body(c, &b, head + head_len, got - head_len, true, rh.expect_continue,
                           read_tls, cs, cs, &whole);
        if (st)
            tls_reply(cs, st, st == 413 ? "Content Too Large" : "Bad Request", c->why);
        if (st || !b.done)
            goto done;
        whole_len = (int64_t)whole.len;
    }
    us = sp_egress_tls_connect(t, c->up, c->host, c->literal, mono_ms() + g.o.connect_timeout_ms,
                               why, sizeof(why));
    if (!us) {
        snprintf(c->why, sizeof(c->why), "%s", why);
        char msg[800];
        snprintf(msg, sizeof(msg), "connection to %.200s port %u: %.380s", c->host, c->port, why);
        tls_reply(cs, 502, "Bad Gateway", msg);
        goto done;
    }
    size_t at = 0;
    out = upstream_head((const char *)head, (size_t)(rh.line_end - rh.h) + 2, &rh, whole_len, &at);
    put_secrets(c, &out, &at, true);
    bool sent = sp_egress_tls_write(us, out, at, mono_ms() + 10000) &&
                (whole_len < 0 || sp_egress_tls_write(us, whole.data ? whole.data : "", whole.len,
                                                      mono_ms() + 30000));
    explicit_bzero(out, at);
    if (!sent) {
        snprintf(c->why + strlen(c->why), sizeof(c->why) - strlen(c->why),
                 "; the request could not be sent upstream");
        goto done;
    }
    c->up_bytes += at + (whole_len > 0 ? (uint64_t)whole_len : 0);
    if (whole_len >= 0) {
        body sent_whole = {.mode = BODY_NONE, .done = true};
        relay_tls(c, cs, us, &sent_whole, NULL, 0);
    } else {
        relay_tls(c, cs, us, &b, head + head_len, got - head_len);
    }
done:
    if (whole.data)
        explicit_bzero(whole.data, whole.len);
    sp_buf_dispose(&whole);
    free(out);
    free(head);
    sp_egress_tls_close(us);
    sp_egress_tls_close(cs);
}

static void serve_http(conn *c, unsigned char *head, size_t got, int64_t deadline)
{
    c->proto = "http";
    /* The request head, whole, within the limit and the time. */
    unsigned char *end = NULL;
    for (;;) {
        end = got >= 4 ? memmem(head, got, "\r\n\r\n", 4) : NULL;
        if (end || got >= SP_EGRESS_HEAD_LIMIT)
            break;
        ssize_t r = read_by(c->client, head + got, SP_EGRESS_HEAD_LIMIT - got, deadline, 0);
        if (r <= 0) {
            snprintf(c->why, sizeof(c->why), "%s",
                     r == 0 ? "the client left before the end of its request head"
                            : "no complete request head in time");
            return;
        }
        got += (size_t)r;
    }
    if (!end) {
        snprintf(c->why, sizeof(c->why), "a request head over %d bytes", SP_EGRESS_HEAD_LIMIT);
        http_reply(c, 431, "Request Header Fields Too Large", c->why);
        return;
    }
    size_t head_len = (size_t)(end - head) + 4;
    const char *h = (const char *)head;
    req_head rh;
    const char *bad_line = parse_line(&rh, h, head_len);
    if (bad_line) {
        snprintf(c->why, sizeof(c->why), "%s", bad_line);
        http_reply(c, 400, "Bad Request", c->why);
        return;
    }
    const char *target = rh.target;
    size_t tl = rh.tl;
    bool is_connect = rh.ml == 7 && strncmp(h, "CONNECT", 7) == 0;
    const char *path = "/";
    size_t path_len = 1;
    if (is_connect) {
        c->proto = "connect";
        if (!parse_authority(c, target, tl, 443)) {
            snprintf(c->why, sizeof(c->why), "CONNECT needs host:port");
            http_reply(c, 400, "Bad Request", c->why);
            return;
        }
    } else {
        if (tl >= 8 && strncasecmp(target, "https://", 8) == 0) {
            snprintf(c->why, sizeof(c->why),
                     "an https:// URL goes through CONNECT, not a plain request");
            http_reply(c, 400, "Bad Request", c->why);
            return;
        }
        if (tl < 7 || strncasecmp(target, "http://", 7) != 0) {
            snprintf(c->why, sizeof(c->why), "a proxy request needs an absolute http:// URL");
            http_reply(c, 400, "Bad Request", c->why);
            return;
        }
        const char *a = target + 7, *te = target + tl, *ae = a;
        while (ae < te && *ae != '/' && *ae != '?' && *ae != '#')
            ae++;
        if (memchr(a, '@', (size_t)(ae - a)) || !parse_authority(c, a, (size_t)(ae - a), 80)) {
            snprintf(c->why, sizeof(c->why), "a URL whose authority is not host[:port]");
            http_reply(c, 400, "Bad Request", c->why);
            return;
        }
        if (ae < te) {
            path = ae;
            path_len = (size_t)(te - ae);
        }
        if (*path != '/') {
            snprintf(c->why, sizeof(c->why), "a URL without a path");
            http_reply(c, 400, "Bad Request", c->why);
            return;
        }
    }

    /* Headers: Host must name the URL's authority; the body's framing must
     * be one, unambiguous. */
    if (!scan_headers(&rh)) {
        snprintf(c->why, sizeof(c->why), "a malformed or ambiguous request head");
        http_reply(c, 400, "Bad Request", c->why);
        return;
    }
    body b = {.mode = BODY_RAW};
    if (!is_connect) {
        if (!host_header_names(&rh, c->host, c->port, 80)) {
            snprintf(c->why, sizeof(c->why),
                     "refused: the Host header does not name the URL's host %.200s:%u", c->host,
                     c->port);
            http_reply(c, 403, "Forbidden", c->why);
            return;
        }
        b = body_of(&rh);
        if (!standins_may_go(c, h, head_len, false)) {
            http_reply(c, 403, "Forbidden", c->why);
            return;
        }
    }
    sp_buf whole = SP_BUF_INIT; /* a body taken whole (a body secret's host) */
    int64_t whole_len = -1;
    if (!is_connect && b.mode != BODY_NONE && secret_for_conn(c, false, true)) {
        int st = take_body(c, &b, head + head_len, got - head_len, false, rh.expect_continue,
                           read_client, c, NULL, &whole);
        if (st)
            http_reply(c, st, st == 413 ? "Content Too Large" : "Bad Request", c->why);
        if (st || !b.done) {
            sp_buf_dispose(&whole);
            return;
        }
        whole_len = (int64_t)whole.len;
    }

    open_result r = open_upstream(c);
    char msg[800];
    snprintf(msg, sizeof(msg), "connection to %.200s port %u: %.500s", c->host, c->port, c->why);
    if (r != OPEN_OK) {
        if (whole.data)
            explicit_bzero(whole.data, whole.len);
        sp_buf_dispose(&whole);
    }
    switch (r) {
    case OPEN_OK:
        break;
    case OPEN_DENIED:
        http_reply(c, 403, "Forbidden", msg);
        return;
    case OPEN_NO_NAME:
    case OPEN_FAILED:
        http_reply(c, 502, "Bad Gateway", msg);
        return;
    case OPEN_TIMEOUT:
        http_reply(c, 504, "Gateway Timeout", msg);
        return;
    }
    if (is_connect) {
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        if (!write_all(c->client, ok, sizeof(ok) - 1, mono_ms() + 5000))
            return;
        /* To a host a secret is for over TLS, the tunnel ends here. */
        if (atomic_load(&g.tls) && secret_for_conn(c, true, false))
            serve_terminated(c, got - head_len);
        else
            pump(c, &b, head + head_len, got - head_len, c->host);
        return;
    }
    /* The request upstream: origin-form, our own Connection: close, no
     * proxy headers. One request per connection: what a client sends
     * after the body is not passed on. */
    char line[SP_EGRESS_HEAD_LIMIT + 32];
    int n = snprintf(line, sizeof(line), "%.*s %.*s HTTP/1.%c\r\n", (int)rh.ml, h, (int)path_len,
                     path, rh.minor);
    size_t at = 0;
    char *out = upstream_head(line, (size_t)n, &rh, whole_len, &at);
    put_secrets(c, &out, &at, false);
    bool sent = write_all(c->up, out, at, mono_ms() + 10000) &&
                (whole_len < 0 ||
                 write_all(c->up, whole.data ? whole.data : "", whole.len, mono_ms() + 30000));
    if (c->secret[0])
        explicit_bzero(out, at);
    free(out);
    if (whole.data)
        explicit_bzero(whole.data, whole.len);
    sp_buf_dispose(&whole);
    if (sent)
        c->up_bytes += at + (whole_len > 0 ? (uint64_t)whole_len : 0);
    body sent_whole = {.mode = BODY_NONE, .done = true};
    if (sent)
        pump(c, whole_len >= 0 ? &sent_whole : &b, whole_len >= 0 ? NULL : head + head_len,
             whole_len >= 0 ? 0 : got - head_len, NULL);
}

static void socks_reply(conn *c, unsigned char code)
{
    unsigned char r[10] = {5, code, 0, 1, 0, 0, 0, 0, 0, 0};
    write_all(c->client, r, sizeof(r), mono_ms() + 2000);
}

static void serve_socks(conn *c, int64_t deadline)
{
    c->proto = "socks";
    unsigned char b[262];
    if (!read_exact(c->client, b, 2, deadline) || b[0] != 5 ||
        !read_exact(c->client, b + 2, b[1], deadline)) {
        snprintf(c->why, sizeof(c->why), "not a SOCKS5 greeting");
        return;
    }
    if (!memchr(b + 2, 0, b[1])) {
        static const unsigned char no[] = {5, 0xff};
        write_all(c->client, no, 2, deadline);
        snprintf(c->why, sizeof(c->why), "SOCKS5 without the no-authentication method");
        return;
    }
    static const unsigned char yes[] = {5, 0};
    if (!write_all(c->client, yes, 2, deadline) || !read_exact(c->client, b, 4, deadline) ||
        b[0] != 5) {
        snprintf(c->why, sizeof(c->why), "not a SOCKS5 request");
        return;
    }
    unsigned char cmd = b[1], atyp = b[3];
    if (atyp == 1 || atyp == 4) {
        size_t al = atyp == 1 ? 4 : 16;
        if (!read_exact(c->client, b, al + 2, deadline)) {
            snprintf(c->why, sizeof(c->why), "a short SOCKS5 request");
            return;
        }
        inet_ntop(atyp == 1 ? AF_INET : AF_INET6, b, c->host, sizeof(c->host));
        c->port = (uint16_t)(b[al] << 8 | b[al + 1]);
    } else if (atyp == 3) {
        if (!read_exact(c->client, b, 1, deadline) || b[0] == 0 ||
            !read_exact(c->client, b + 1, (size_t)b[0] + 2, deadline)) {
            snprintf(c->why, sizeof(c->why), "a short SOCKS5 request");
            return;
        }
        size_t nl = b[0];
        for (size_t i = 0; i < nl; i++)
            c->host[i] = (char)((b[1 + i] >= 'A' && b[1 + i] <= 'Z') ? b[1 + i] | 0x20 : b[1 + i]);
        c->host[nl] = '\0';
        if (strlen(c->host) != nl)
            c->host[0] = '\0'; /* a NUL inside: no name */
        c->port = (uint16_t)(b[1 + nl] << 8 | b[2 + nl]);
    } else {
        socks_reply(c, 8); /* address type not supported */
        snprintf(c->why, sizeof(c->why), "a SOCKS5 address type %u", atyp);
        return;
    }
    if (cmd != 1) {
        socks_reply(c, 7); /* command not supported: no BIND, no UDP */
        snprintf(c->why, sizeof(c->why), "refused: SOCKS5 command %u (only CONNECT is served)",
                 cmd);
        return;
    }
    if (c->port == 0) {
        socks_reply(c, 2);
        snprintf(c->why, sizeof(c->why), "refused: port 0");
        return;
    }
    switch (open_upstream(c)) {
    case OPEN_OK:
        break;
    case OPEN_DENIED:
        socks_reply(c, 2); /* connection not allowed by ruleset */
        return;
    case OPEN_NO_NAME:
        socks_reply(c, 4); /* host unreachable */
        return;
    case OPEN_FAILED:
        socks_reply(c, errno == ECONNREFUSED ? 5 : 4);
        return;
    case OPEN_TIMEOUT:
        socks_reply(c, 6); /* TTL expired: the nearest SOCKS has to a time out */
        return;
    }
    socks_reply(c, 0);
    body raw = {.mode = BODY_RAW};
    /* The server name is checked on a tunnel to an address too, as for
     * CONNECT: a name there would pick another site on an allowed address. */
    pump(c, &raw, NULL, 0, c->host);
}

static void *serve_conn(void *arg)
{
    conn *c = arg;
    int64_t deadline = mono_ms() + g.o.head_timeout_ms;
    unsigned char *head = sp_xmalloc(SP_EGRESS_HEAD_LIMIT);
    ssize_t r = read_by(c->client, head, 1, deadline, MSG_PEEK);
    if (r == 1 && head[0] == 5) {
        serve_socks(c, deadline);
    } else if (r == 1) {
        serve_http(c, head, 0, deadline);
    } else {
        c->proto = "none";
        snprintf(c->why, sizeof(c->why), "%s",
                 r == 0 ? "the client left without a request" : "no request in time");
    }
    free(head);
    pthread_mutex_lock(&g.mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        g.live = c->next;
    if (c->next)
        c->next->prev = c->prev;
    g.open--;
    pthread_mutex_unlock(&g.mu);
    if (atomic_load(&c->cut)) {
        snprintf(c->why, sizeof(c->why), "%s", c->cut_why);
        free(c->rule);
        c->rule = NULL;
    }
    log_conn(c); /* every connection, those that never said a word too */
    if (c->up >= 0)
        close(c->up);
    close(c->client);
    free(c->rule);
    free(c);
    return NULL;
}

static bool spawn(void *(*fn)(void *), void *arg)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, THREAD_STACK);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int rc = pthread_create(&t, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    return rc == 0;
}

/* The threads that serve connections: made as they are needed, at most
 * one per connection the proxy may hold, and kept waiting after (a thread
 * made per connection cost about 165 us of its setup).
 *
 * A connection is queued only if a waiting thread is sure to take it:
 * `idle` counts the threads in the wait, but a thread signalled and not yet
 * awake still counts there, so two connections handed over in that moment
 * would both have counted on one thread. `queued` is compared with `idle`
 * instead; had it not been, the second would wait behind whatever the first
 * thread took, and a slow client holds a thread for the head's 10 s. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    conn *head, *tail; /* waiting to be served, through next_q */
    unsigned idle, workers, queued;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void *worker(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&pool.mu);
        while (!pool.head) {
            pool.idle++;
            pthread_cond_wait(&pool.cv, &pool.mu);
            pool.idle--;
        }
        conn *c = pool.head;
        pool.head = c->next_q;
        if (!pool.head)
            pool.tail = NULL;
        pool.queued--;
        pthread_mutex_unlock(&pool.mu);
        serve_conn(c);
    }
    return NULL;
}

static bool submit(conn *c)
{
    pthread_mutex_lock(&pool.mu);
    c->next_q = NULL;
    if (pool.tail)
        pool.tail->next_q = c;
    else
        pool.head = c;
    pool.tail = c;
    pool.queued++;
    bool ok = true;
    if (pool.queued <= pool.idle) {
        pthread_cond_signal(&pool.cv);
    } else if (pool.workers < g.o.max_conns) {
        if (spawn(worker, NULL))
            pool.workers++;
        else if (pool.workers == 0)
            ok = false;
    } else if (pool.idle) {
        pthread_cond_signal(&pool.cv);
    }
    if (!ok) {
        pool.head = pool.tail = NULL;
        pool.queued = 0;
    }
    pthread_mutex_unlock(&pool.mu);
    return ok;
}

/* Take one connection the agent handed over, if it is a TCP stream. */
static void take(int fd)
{
    struct stat st;
    int type = 0, domain = 0, listening = 0;
    socklen_t l1 = sizeof(type), l2 = sizeof(domain), l3 = sizeof(listening);
    if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode) ||
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l1) < 0 || type != SOCK_STREAM ||
        getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l2) < 0 ||
        (domain != AF_INET && domain != AF_INET6) ||
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &l3) < 0 || listening) {
        close(fd);
        return;
    }
    conn *c = sp_xcalloc(1, sizeof(*c));
    c->client = fd;
    c->up = -1;
    c->started_ms = wall_ms();
    atomic_init(&c->cut, 0);
    pthread_mutex_lock(&g.mu);
    bool full = g.open >= g.o.max_conns;
    if (!full) {
        g.open++;
        c->next = g.live;
        if (g.live)
            g.live->prev = c;
        g.live = c;
    }
    pthread_mutex_unlock(&g.mu);
    if (full) {
        /* At once, not after a wait: the client learns it is refused. */
        c->proto = "refused";
        snprintf(c->why, sizeof(c->why),
                 "refused: %u connections are open, the most this sandbox may have", g.o.max_conns);
        static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
                                   "Content-Length: 0\r\n\r\n";
        unsigned char first;
        /* A SOCKS client gets a SOCKS refusal if its greeting is there already. */
        if (recv(fd, &first, 1, MSG_PEEK | MSG_DONTWAIT) == 1 && first == 5) {
            static const unsigned char no[] = {5, 0xff};
            send(fd, no, 2, MSG_NOSIGNAL | MSG_DONTWAIT);
        } else {
            send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        log_conn(c);
        close(fd);
        free(c);
        return;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    if (!submit(c)) {
        pthread_mutex_lock(&g.mu);
        g.open--;
        if (c->prev)
            c->prev->next = c->next;
        else
            g.live = c->next;
        if (c->next)
            c->next->prev = c->prev;
        pthread_mutex_unlock(&g.mu);
        close(fd);
        free(c);
    }
}

/* One unix connection from the agent: a byte and one descriptor per
 * message; anything else ends it. */
static void *receiver(void *arg)
{
    int u = (int)(intptr_t)arg;
    for (;;) {
        char byte;
        struct iovec iov = {&byte, 1};
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(sizeof(int))];
        } ctl;
        struct msghdr m = {.msg_iov = &iov,
                           .msg_iovlen = 1,
                           .msg_control = ctl.buf,
                           .msg_controllen = sizeof(ctl.buf)};
        ssize_t r = recvmsg(u, &m, MSG_CMSG_CLOEXEC);
        if (r <= 0)
            break;
        int fd = -1;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
            cm->cmsg_len == CMSG_LEN(sizeof(int)))
            memcpy(&fd, CMSG_DATA(cm), sizeof(int));
        else if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
            /* More than one: close them all, and the connection. */
            size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < n; i++) {
                int x;
                memcpy(&x, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                close(x);
            }
            break;
        }
        if ((m.msg_flags & MSG_CTRUNC) || fd < 0) {
            if (fd >= 0)
                close(fd);
            break;
        }
        take(fd);
    }
    close(u);
    pthread_mutex_lock(&g.mu);
    g.receivers--;
    pthread_mutex_unlock(&g.mu);
    return NULL;
}

/* Connections over TCP (--listen), when the proxy has a Pod of its own. */
static void *tcp_acceptor(void *arg)
{
    int l = (int)(intptr_t)arg;
    for (;;) {
        int fd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0) {
            take(fd);
        } else if (errno == EMFILE || errno == ENFILE) {
            struct timespec ts = {0, 50 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

/* As its container's pid 1, a stop's SIGTERM is ignored unless handled:
 * the connections end with the process. */
static void on_term(int sig)
{
    (void)sig;
    _exit(0);
}

int sp_egress_proxy_run(const sp_egress_proxy_opts *o)
{
    /* It holds brokered secrets' values: no core file of it, and no
     * ptrace by its own user. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    g.o = *o;
    if (!g.o.max_conns)
        g.o.max_conns = SP_EGRESS_MAX_CONNS;
    if (!g.o.connect_timeout_ms)
        g.o.connect_timeout_ms = 10000;
    if (!g.o.head_timeout_ms)
        g.o.head_timeout_ms = 10000;
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    snprintf(g.policy_path, sizeof(g.policy_path), "%s/%s", o->dir, SP_EGRESS_POLICY);
    snprintf(g.hosts_path, sizeof(g.hosts_path), "%s/%s", o->dir, SP_EGRESS_HOSTS);
    snprintf(g.secrets_path, sizeof(g.secrets_path), "%s/%s", o->dir, SP_EGRESS_SECRETS);
    g.host_addrs = host_addresses();
    g.policy = load_policy(&g.policy_st);
    if (!g.policy) {
        say("no policy: not serving");
        return 1;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", o->run_dir, SP_EGRESS_SOCKET) >=
        sizeof(sa.sun_path)) {
        say("the socket's path is too long: %s", o->run_dir);
        return 1;
    }
    /* The host hands the run folder to this container's user once the
     * container runs (its ids are not known before): until then, bind
     * fails, and is tried again for a while. */
    int l = -1;
    for (int64_t end = mono_ms() + 10000;;) {
        l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        unlink(sa.sun_path);
        /* The workload's agent, another user, connects: the socket is
         * everyone's; what it may do through it is the policy's. */
        mode_t old = umask(0);
        int br = l >= 0 ? bind(l, (struct sockaddr *)&sa, sizeof(sa)) : -1;
        umask(old);
        if (br == 0 && listen(l, 64) == 0)
            break;
        int e = errno;
        if (l >= 0)
            close(l);
        if (mono_ms() >= end) {
            say("cannot listen on %s: %s", sa.sun_path, strerror(e));
            return 1;
        }
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", o->run_dir, SP_EGRESS_LOG);
    g.log_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (g.log_fd < 0)
        say("cannot open %s: %s (connections go unrecorded)", path, strerror(errno));
    if (!spawn(watcher, NULL)) {
        say("cannot start the policy watcher");
        return 1;
    }
    if (g.o.listen_port) {
        int tl[2] = {sp_egress_listen_tcp(AF_INET, g.o.listen_port, true),
                     sp_egress_listen_tcp(AF_INET6, g.o.listen_port, true)};
        if (tl[0] < 0 && tl[1] < 0) {
            say("cannot listen on port %u: %s", g.o.listen_port, strerror(errno));
            return 1;
        }
        for (int i = 0; i < 2; i++)
            if (tl[i] >= 0 && !spawn(tcp_acceptor, (void *)(intptr_t)tl[i])) {
                say("cannot start the TCP listener");
                return 1;
            }
    }
    said_loaded(g.policy);
    char tcp[32] = "";
    if (g.o.listen_port)
        snprintf(tcp, sizeof(tcp), " and TCP port %u", g.o.listen_port);
    say("ready: %zu rules, at most %u connections, listening on %s%s", g.policy->p.n_rules,
        g.o.max_conns, sa.sun_path, tcp);
    for (;;) {
        int u = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        if (u < 0) {
            if (errno == EMFILE || errno == ENFILE) {
                struct timespec ts = {0, 50 * 1000000L};
                nanosleep(&ts, NULL);
            }
            continue;
        }
        pthread_mutex_lock(&g.mu);
        bool ok = g.receivers < MAX_RECEIVERS;
        if (ok)
            g.receivers++;
        pthread_mutex_unlock(&g.mu);
        if (!ok || !spawn(receiver, (void *)(intptr_t)u)) {
            if (ok) {
                pthread_mutex_lock(&g.mu);
                g.receivers--;
                pthread_mutex_unlock(&g.mu);
            }
            close(u);
        }
    }
}
