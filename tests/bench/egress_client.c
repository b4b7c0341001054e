/* The client (and the upstream servers) of tests/bench/bench_egress.sh.
 * Static, so that it runs in the busybox image of a sandbox and under
 * bubblewrap alike; no resolver: HOST is an IPv4 literal when direct, and
 * only a name in the CONNECT line when through a proxy.
 *
 *   egress_client connect N HOST PORT [--proxy P] [--warmup W]
 *       N sequential connections; each: TCP connect (directly, or to the
 *       proxy and `CONNECT HOST:PORT`, waiting for its 200), one byte sent
 *       and its echo read, close. Prints the per-connection latencies (µs)
 *       and their percentiles as JSON. `setup` is the part up to a usable
 *       tunnel (connect, or connect + CONNECT + 200), `total` adds the
 *       one-byte echo and the close.
 *   egress_client throughput BYTES HOST PORT [--proxy P] [--reps R]
 *       R times (default 3): one connection, BYTES read from a server that
 *       streams zeros, closed; prints MB/s (10^6 bytes/s) per rep as JSON,
 *       timed from the first byte asked for (after the tunnel is up) to
 *       the last byte read.
 *   egress_client flood N PROXY HOLD_S READY_FILE
 *       (for tests/cmd/test_egress_cli.sh) N connections to PROXY
 *       (IPV4:PORT) left open without a byte sent; a second later each is
 *       judged: held (silent), refused (an HTTP 503 came) or closed. Prints
 *       the counts as JSON, creates READY_FILE, holds them HOLD_S seconds.
 *   egress_client serve ADDR ECHO_PORT SOURCE_PORT
 *       the upstreams: an echo server and a source of zeros on ADDR, a
 *       thread per connection, until killed.
 *
 * P is HOST:PORT or http://[USER:PASS@]HOST:PORT (as in $HTTP_PROXY; the
 * credentials go in a Proxy-Authorization header); HOST there is an IPv4
 * literal or localhost. Before timing, the client waits (up to 5 s) until
 * the proxy's port accepts. Exits 1 with one line on stderr on any failure. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define READ_BUF (256 * 1024)

/* One line on stderr, with errno's text when it is set; exits 1. */
__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...)
{
    int e = errno;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "egress_client: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s%s\n", e ? ": " : "", e ? strerror(e) : "");
    exit(1);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct proxy {
    bool on;
    struct sockaddr_in sa;
    char auth[512]; /* "Proxy-Authorization: Basic ...\r\n" or "" */
} proxy;

static void base64(char *out, const unsigned char *in, size_t n)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[o++] = t[(v >> 18) & 63];
        out[o++] = t[(v >> 12) & 63];
        out[o++] = i + 1 < n ? t[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? t[v & 63] : '=';
    }
    out[o] = 0;
}

static void parse_addr(struct sockaddr_in *sa, const char *host, const char *port)
{
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    char *end;
    long p = strtol(port, &end, 10);
    errno = 0;
    if (*end || p <= 0 || p > 65535)
        die("bad port %s", port);
    sa->sin_port = htons((uint16_t)p);
    if (strcmp(host, "localhost") == 0)
        host = "127.0.0.1";
    errno = 0;
    if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
        die("not an IPv4 address: %s", host);
}

static void parse_proxy(proxy *px, const char *spec)
{
    char s[512];
    snprintf(s, sizeof(s), "%s", spec);
    char *p = s;
    if (strncmp(p, "http://", 7) == 0)
        p += 7;
    char *slash = strchr(p, '/');
    if (slash)
        *slash = 0;
    char *at = strrchr(p, '@');
    px->auth[0] = 0;
    if (at) {
        *at = 0;
        char enc[400];
        errno = 0;
        if (strlen(p) > 280)
            die("proxy credentials too long: %s", spec);
        /* USER:PASS as a URL writes them: percent-encoded. */
        char raw[300];
        size_t n = 0;
        for (const char *q = p; *q; q++) {
            unsigned v;
            if (q[0] == '%' && q[1] && q[2] && sscanf(q + 1, "%2x", &v) == 1) {
                raw[n++] = (char)v;
                q += 2;
            } else {
                raw[n++] = *q;
            }
        }
        base64(enc, (const unsigned char *)raw, n);
        snprintf(px->auth, sizeof(px->auth), "Proxy-Authorization: Basic %s\r\n", enc);
        p = at + 1;
    }
    char *colon = strrchr(p, ':');
    errno = 0;
    if (!colon)
        die("proxy without a port: %s", spec);
    *colon = 0;
    parse_addr(&px->sa, p, colon + 1);
    px->on = true;
}

static int tcp_connect(const struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket");
    if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0)
        die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static void write_all(int fd, const void *b, size_t n)
{
    for (size_t at = 0; at < n;) {
        ssize_t w = send(fd, (const char *)b + at, n - at, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("send");
        at += (size_t)w;
    }
}

/* A usable stream to host:port: direct, or a CONNECT tunnel whose 200 has
 * been read (and nothing past the reply's head: the servers speak only
 * when spoken to, or the source, whose bytes are counted by the caller). */
static int open_stream(const proxy *px, const char *host, const struct sockaddr_in *direct,
                       const char *port)
{
    if (!px->on)
        return tcp_connect(direct);
    int fd = tcp_connect(&px->sa);
    char req[1024];
    int n = snprintf(req, sizeof(req), "CONNECT %s:%s HTTP/1.1\r\nHost: %s:%s\r\n%s\r\n", host,
                     port, host, port, px->auth);
    write_all(fd, req, (size_t)n);
    /* The reply's head and nothing after it: peek at what has come, take
     * it up to the blank line (or all of it, when the blank line is not
     * there yet: it is all head). Two system calls when it comes whole. */
    char head[2048];
    size_t h = 0;
    for (bool done = false; !done;) {
        if (h >= sizeof(head) - 1) {
            errno = 0;
            die("the proxy's reply head is too long");
        }
        ssize_t r = recv(fd, head + h, sizeof(head) - 1 - h, MSG_PEEK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = 0;
            head[h] = 0;
            die("the proxy closed before its reply's end: %s", head);
        }
        size_t take = (size_t)r;
        /* The blank line may straddle what was taken before. */
        size_t from = h >= 3 ? h - 3 : 0;
        for (size_t i = from; i + 4 <= h + (size_t)r; i++)
            if (memcmp(head + i, "\r\n\r\n", 4) == 0) {
                take = i + 4 - h;
                done = true;
                break;
            }
        ssize_t got = recv(fd, head + h, take, MSG_WAITALL);
        if (got != (ssize_t)take)
            die("recv");
        h += take;
    }
    head[h] = 0;
    if (strncmp(head, "HTTP/1.1 200", 12) != 0 && strncmp(head, "HTTP/1.0 200", 12) != 0) {
        errno = 0;
        die("the proxy refused: %s", head);
    }
    return fd;
}

/* Until the proxy's port accepts (up to 5 s): srt starts its in-sandbox
 * listener (socat) in the background beside the command, which can run
 * before it listens. Untimed; the probe connection is closed at once. */
static void wait_proxy(const proxy *px)
{
    if (!px->on)
        return;
    for (int i = 0; i < 500; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            die("socket");
        int r = connect(fd, (const struct sockaddr *)&px->sa, sizeof(px->sa));
        int e = errno;
        close(fd);
        if (r == 0)
            return;
        if (e != ECONNREFUSED) {
            errno = e;
            die("connect to the proxy");
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    errno = ECONNREFUSED;
    die("the proxy does not listen");
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest rank on sorted v, as tests/bench/run.sh computes it. */
static double pct(const int64_t *v, size_t n, double q)
{
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return (double)v[i < n ? i : n - 1];
}

static void print_stats(const char *name, int64_t *v, size_t n, bool last)
{
    int64_t *s = malloc(n * sizeof(*s));
    memcpy(s, v, n * sizeof(*s));
    qsort(s, n, sizeof(*s), cmp_i64);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (double)s[i];
    printf("  \"%s\": {\"median_us\": %.1f, \"p90_us\": %.1f, \"p99_us\": %.1f, "
           "\"min_us\": %.1f, \"max_us\": %.1f, \"mean_us\": %.1f, \"samples_us\": [",
           name, n % 2 ? (double)s[n / 2] : ((double)s[n / 2 - 1] + (double)s[n / 2]) / 2,
           pct(s, n, 0.90), pct(s, n, 0.99), (double)s[0], (double)s[n - 1], sum / (double)n);
    for (size_t i = 0; i < n; i++)
        printf("%s%lld", i ? "," : "", (long long)v[i]);
    printf("]}%s\n", last ? "" : ",");
    free(s);
}

static int run_connect(long n, long warmup, const char *host, const char *port, const proxy *px)
{
    struct sockaddr_in direct = {0};
    if (!px->on)
        parse_addr(&direct, host, port);
    int64_t *setup = calloc((size_t)n, sizeof(int64_t)),
            *total = calloc((size_t)n, sizeof(int64_t));
    wait_proxy(px);
    for (long i = -warmup; i < n; i++) {
        int64_t t0 = now_ns();
        int fd = open_stream(px, host, &direct, port);
        int64_t t1 = now_ns();
        char b = 'x';
        write_all(fd, &b, 1);
        ssize_t r;
        do
            r = recv(fd, &b, 1, 0);
        while (r < 0 && errno == EINTR);
        if (r == 0)
            errno = 0;
        if (r != 1 || b != 'x')
            die("no echo");
        close(fd);
        int64_t t2 = now_ns();
        if (i >= 0) {
            /* Whole microseconds: the samples are printed as integers. */
            setup[i] = (t1 - t0) / 1000;
            total[i] = (t2 - t0) / 1000;
        }
    }
    printf("{\"mode\": \"connect\", \"n\": %ld, \"warmup\": %ld, \"proxy\": %s,\n", n, warmup,
           px->on ? "true" : "false");
    print_stats("setup", setup, (size_t)n, false);
    print_stats("total", total, (size_t)n, true);
    printf("}\n");
    return 0;
}

static int run_throughput(long long bytes, long reps, const char *host, const char *port,
                          const proxy *px)
{
    struct sockaddr_in direct = {0};
    if (!px->on)
        parse_addr(&direct, host, port);
    char *buf = malloc(READ_BUF);
    wait_proxy(px);
    printf("{\"mode\": \"throughput\", \"bytes\": %lld, \"proxy\": %s, \"mb_per_s\": [", bytes,
           px->on ? "true" : "false");
    for (long k = 0; k < reps; k++) {
        int fd = open_stream(px, host, &direct, port);
        int64_t t0 = now_ns();
        long long got = 0;
        while (got < bytes) {
            size_t want = bytes - got < READ_BUF ? (size_t)(bytes - got) : READ_BUF;
            ssize_t r = recv(fd, buf, want, 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r == 0)
                errno = 0;
            if (r <= 0)
                die("the source ended early");
            got += r;
        }
        int64_t t1 = now_ns();
        close(fd);
        printf("%s%.1f", k ? ", " : "", (double)bytes / ((double)(t1 - t0) / 1e9) / 1e6);
        fflush(stdout);
    }
    printf("]}\n");
    free(buf);
    return 0;
}

/* ------------------------------------------------------------ servers -- */

static void *echo_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char b[65536];
    for (;;) {
        ssize_t r = recv(fd, b, sizeof(b), 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        for (ssize_t at = 0; at < r;) {
            ssize_t w = send(fd, b + at, (size_t)(r - at), MSG_NOSIGNAL);
            if (w <= 0)
                goto out;
            at += w;
        }
    }
out:
    close(fd);
    return NULL;
}

static void *source_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    static const char zeros[READ_BUF];
    while (send(fd, zeros, sizeof(zeros), MSG_NOSIGNAL) > 0 || errno == EINTR)
        ;
    close(fd);
    return NULL;
}

typedef struct server {
    int fd;
    void *(*fn)(void *);
} server;

static void *accept_loop(void *arg)
{
    server *s = arg;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 256 * 1024);
    for (;;) {
        int c = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE)
                continue;
            die("accept");
        }
        int one = 1;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        pthread_t t;
        if (pthread_create(&t, &at, s->fn, (void *)(intptr_t)c) != 0)
            close(c);
    }
    return NULL;
}

static int listen_on(const char *addr, const char *port)
{
    struct sockaddr_in sa;
    parse_addr(&sa, addr, port);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 512) < 0)
        die("listen on port %s", port);
    return fd;
}

static int run_serve(const char *addr, const char *echo_port, const char *source_port)
{
    signal(SIGPIPE, SIG_IGN);
    static server e, s;
    e = (server){listen_on(addr, echo_port), echo_conn};
    s = (server){listen_on(addr, source_port), source_conn};
    pthread_t t;
    if (pthread_create(&t, NULL, accept_loop, &s) != 0)
        die("pthread_create");
    fprintf(stderr, "egress_client: serving echo on %s:%s, zeros on %s:%s\n", addr, echo_port, addr,
            source_port);
    accept_loop(&e);
    return 0;
}

static int run_flood(long n, const char *proxy_spec, long hold_s, const char *ready)
{
    char spec[128];
    snprintf(spec, sizeof(spec), "%s", proxy_spec);
    char *colon = strrchr(spec, ':');
    if (!colon)
        die("flood: PROXY is IPV4:PORT");
    *colon = 0;
    struct sockaddr_in sa;
    parse_addr(&sa, spec, colon + 1);
    int *fds = calloc((size_t)n, sizeof(int));
    if (!fds)
        die("calloc");
    long opened = 0, failed = 0;
    for (long i = 0; i < n; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (const struct sockaddr *)&sa, sizeof(sa)) == 0) {
            fds[opened++] = fd;
        } else {
            if (fd >= 0)
                close(fd);
            failed++;
        }
    }
    struct timespec one = {1, 0};
    nanosleep(&one, NULL);
    long held = 0, refused = 0, closed = 0;
    for (long i = 0; i < opened; i++) {
        char b[16];
        ssize_t r = recv(fds[i], b, sizeof(b) - 1, MSG_DONTWAIT | MSG_PEEK);
        if (r > 0 && memcmp(b, "HTTP/1.1 503", r < 12 ? (size_t)r : 12) == 0)
            refused++;
        else if (r == 0 || (r < 0 && errno != EAGAIN))
            closed++;
        else
            held++;
    }
    printf("{\"opened\":%ld,\"failed_to_open\":%ld,\"held\":%ld,\"refused\":%ld,\"closed\":%ld}\n",
           opened, failed, held, refused, closed);
    fflush(stdout);
    int rf = open(ready, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (rf >= 0)
        close(rf);
    struct timespec hold = {hold_s, 0};
    nanosleep(&hold, NULL);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: egress_client connect N HOST PORT [--proxy P] [--warmup W]\n"
                    "       egress_client throughput BYTES HOST PORT [--proxy P] [--reps R]\n"
                    "       egress_client flood N PROXY HOLD_S READY_FILE\n"
                    "       egress_client serve ADDR ECHO_PORT SOURCE_PORT\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage();
    if (strcmp(argv[1], "serve") == 0) {
        if (argc != 5)
            usage();
        return run_serve(argv[2], argv[3], argv[4]);
    }
    if (strcmp(argv[1], "flood") == 0) {
        if (argc != 6 || atol(argv[2]) <= 0)
            usage();
        return run_flood(atol(argv[2]), argv[3], atol(argv[4]), argv[5]);
    }
    if (argc < 5)
        usage();
    proxy px = {0};
    long warmup = 5, reps = 3;
    for (int i = 5; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--proxy") == 0)
            parse_proxy(&px, argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--warmup") == 0)
            warmup = atol(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--reps") == 0)
            reps = atol(argv[++i]);
        else
            usage();
    }
    long long count = atoll(argv[2]);
    if (count <= 0 || warmup < 0 || reps <= 0)
        usage();
    if (strcmp(argv[1], "connect") == 0)
        return run_connect((long)count, warmup, argv[3], argv[4], &px);
    if (strcmp(argv[1], "throughput") == 0)
        return run_throughput(count, reps, argv[3], argv[4], &px);
    usage();
}
