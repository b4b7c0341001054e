/* Fuzz target: what the Podman client makes of a hostile service's replies.
 *
 * The reply parsing of inspect, list, version and exec inspect lives inside
 * the request functions, so this target runs a fake service on a unix
 * socket (a thread of this process) that answers every request with the
 * fuzzed reply, and calls the real client functions against it.
 *
 * Input: byte 0 picks the call, byte 1 the HTTP status (and tty for
 * streams), the rest is the body. Call 6 sends the input verbatim as the
 * whole answer to a hijacked exec start (head parser, error bodies, chunked
 * decoding on the raw path). Properties: no crash, leak or hang (every call
 * ends within the client's timeouts); failures carry a message. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fuzz.h"
#include "podman_internal.h"

static char sock_dir[4096], sock_path[4200];
static int listen_fd = -1;
static sp_podman *P;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char *reply;
static size_t reply_len;

static void send_all(int c, const char *d, size_t len)
{
    while (len) {
        ssize_t n = send(c, d, len, MSG_NOSIGNAL);
        if (n <= 0)
            return;
        d += n;
        len -= (size_t)n;
    }
}

/* Read one request (head and Content-Length body), bounded in size and time. */
static bool read_request(int c, char *buf, size_t cap, size_t *len)
{
    *len = 0;
    size_t need = 0;
    for (;;) {
        struct pollfd pfd = {c, POLLIN, 0};
        if (poll(&pfd, 1, 3000) <= 0)
            return false;
        ssize_t n = recv(c, buf + *len, cap - 1 - *len, 0);
        if (n <= 0)
            return false;
        *len += (size_t)n;
        buf[*len] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        if (end && !need) {
            size_t head = (size_t)(end - buf) + 4;
            const char *cl = strcasestr(buf, "\r\nContent-Length:");
            size_t body = cl && cl < end ? strtoul(cl + 17, NULL, 10) : 0;
            need = head + body;
        }
        if (need && *len >= need)
            return true;
        if (*len >= cap - 1)
            return true;
    }
}

static void *serve(void *arg)
{
    (void)arg;
    static char req[65536];
    for (;;) {
        int c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR)
                continue;
            return NULL;
        }
        size_t len;
        if (read_request(c, req, sizeof(req), &len)) {
            if (strstr(req, "/_ping")) {
                static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                         "Content-Length: 2\r\nConnection: close\r\n\r\nOK";
                send_all(c, ok, sizeof(ok) - 1);
            } else {
                pthread_mutex_lock(&mu);
                send_all(c, reply, reply_len);
                pthread_mutex_unlock(&mu);
            }
        }
        shutdown(c, SHUT_WR);
        close(c);
    }
}

static void remove_sock_dir(void)
{
    unlink(sock_path);
    rmdir(sock_dir);
}

static void setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    snprintf(sock_dir, sizeof(sock_dir), "%s/sp-fuzz-pm-XXXXXX", fz_tmpdir());
    if (!mkdtemp(sock_dir))
        abort();
    atexit(remove_sock_dir);
    snprintf(sock_path, sizeof(sock_path), "%s/s", sock_dir);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(sock_path) >= sizeof(a.sun_path))
        abort();
    memcpy(a.sun_path, sock_path, strlen(sock_path) + 1);
    listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        listen(listen_fd, 16) < 0)
        abort();
    pthread_t t;
    if (pthread_create(&t, NULL, serve, NULL) != 0)
        abort();
    pthread_detach(t);

    char url[4300];
    snprintf(url, sizeof(url), "unix://%s", sock_path);
    sp_podman_opts o = SP_PODMAN_OPTS_INIT;
    o.url = url;
    o.no_autostart = true;
    o.connect_timeout_ms = 3000;
    o.timeout_ms = 3000;
    o.transfer_timeout_ms = 3000;
    sp_error *err = NULL;
    if (sp_podman_open(&P, &o, &err) < 0) {
        fprintf(stderr, "fake service: %s\n", err->message);
        abort();
    }
}

enum head { HEAD_NONE, HEAD_JSON, HEAD_UPGRADE };

static void set_reply(enum head kind, long status, const char *body, size_t len)
{
    char head[512];
    int hn = 0;
    if (kind == HEAD_JSON)
        hn = snprintf(head, sizeof(head),
                      "HTTP/1.1 %ld X\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                      status, len);
    else if (kind == HEAD_UPGRADE)
        hn = snprintf(head, sizeof(head),
                      "HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n");
    pthread_mutex_lock(&mu);
    free(reply);
    reply_len = (size_t)hn + len;
    reply = malloc(reply_len ? reply_len : 1);
    if (!reply)
        abort();
    memcpy(reply, head, (size_t)hn);
    if (len)
        memcpy(reply + hn, body, len);
    pthread_mutex_unlock(&mu);
}

static void check(int r, sp_error *err)
{
    if (r < 0)
        FZ_ASSERT(err && err->message && *err->message, "failure %d without a message", r);
}

static void drain(sp_exec *e)
{
    char buf[1024];
    for (int i = 0; i < 4096; i++) {
        size_t n = 0;
        int stream = 0;
        sp_error *err = NULL;
        int r = sp_exec_read(&n, &stream, e, buf, sizeof(buf), 2000, &err);
        check(r, err);
        sp_error_free(err);
        if (r < 0 || n == 0)
            return;
        FZ_ASSERT(n <= sizeof(buf), "read %zu bytes into %zu", n, sizeof(buf));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!P)
        setup();
    if (size < 2 || size > 65536)
        return 0;
    static const long statuses[] = {200, 200, 200, 201, 204, 400, 404, 409, 500, 101};
    unsigned op = data[0] % 7;
    long status = statuses[data[1] % 10];
    bool tty = data[1] & 0x80;
    const char *body = (const char *)data + 2;
    size_t len = size - 2;
    sp_error *err = NULL;
    int r = 0;

    switch (op) {
    case 0: {
        set_reply(HEAD_JSON, status, body, len);
        sp_podman_version *v = NULL;
        r = sp_podman_get_version(&v, P, &err);
        if (r == 0)
            FZ_ASSERT(v && v->version, "version without a version");
        sp_podman_version_free(v);
        break;
    }
    case 1: {
        set_reply(HEAD_JSON, status, body, len);
        sp_podman_container_info *i = NULL;
        r = sp_podman_container_inspect(&i, P, "c1", &err);
        if (r == 0)
            FZ_ASSERT(i && i->id && i->labels, "inspect without id or labels");
        sp_podman_container_info_free(i);
        break;
    }
    case 2: {
        set_reply(HEAD_JSON, status, body, len);
        sp_podman_containers *l = NULL;
        r = sp_podman_container_list(&l, P, NULL, &err);
        if (r == 0)
            for (size_t k = 0; k < l->n; k++)
                FZ_ASSERT(l->items[k].id && l->items[k].labels, "list item without id");
        sp_podman_containers_free(l);
        break;
    }
    case 3: {
        set_reply(HEAD_JSON, status, body, len);
        sp_podman_exec_info info;
        r = sp_podman_exec_inspect(&info, P, "e1", &err);
        break;
    }
    case 4: {
        set_reply(HEAD_JSON, status, body, len);
        int code = 0;
        r = sp_podman_container_wait(&code, P, "c1", NULL, 2000, &err);
        break;
    }
    case 5:
    case 6: {
        if (op == 5)
            set_reply(HEAD_UPGRADE, 101, body, len);
        else
            set_reply(HEAD_NONE, 0, (const char *)data + 1, size - 1);
        sp_exec *e = NULL;
        r = sp_podman_exec_start(&e, P, "e1", tty, &err);
        if (r == 0)
            drain(e);
        sp_exec_free(e);
        break;
    }
    }
    check(r, err);
    sp_error_free(err);
    return 0;
}
