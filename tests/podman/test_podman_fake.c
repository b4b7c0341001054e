/* Unit tests of the Podman client against a fake service: a forked child
 * serving canned (and broken) answers on a unix socket. Every case must end
 * in a clear error, never a crash, hang or leak. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "podman_internal.h"
#include "testutil.h"

static char *DIR_;
static char *SOCK;
static char *URL;
static pid_t SERVER = -1;
static sp_podman *P;

/* ----------------------------------------------------------- fake server -- */

static void put(int c, const void *data, size_t len)
{
    const char *d = data;
    while (len) {
        ssize_t n = send(c, d, len, MSG_NOSIGNAL);
        if (n <= 0)
            _exit(0);
        d += n;
        len -= (size_t)n;
    }
}

static void puts_(int c, const char *s)
{
    put(c, s, strlen(s));
}

static void answer(int c, int status, const char *ctype, const char *body)
{
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, ctype, strlen(body));
    put(c, head, (size_t)n);
    puts_(c, body);
}

static void json(int c, int status, const char *body)
{
    answer(c, status, "application/json", body);
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static const char UPGRADED[] = "HTTP/1.1 101 UPGRADED\r\n"
                               "Content-Type: application/vnd.docker.raw-stream\r\n"
                               "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n";

static void frame(int c, int stream, const char *data, size_t len)
{
    unsigned char h[8] = {(unsigned char)stream,
                          0,
                          0,
                          0,
                          (unsigned char)(len >> 24),
                          (unsigned char)(len >> 16),
                          (unsigned char)(len >> 8),
                          (unsigned char)len};
    put(c, h, 8);
    put(c, data, len);
}

static void route(int c, const char *method, const char *path)
{
    const char *p = path;
    if (strncmp(p, SP_PODMAN_API, strlen(SP_PODMAN_API)) == 0)
        p += strlen(SP_PODMAN_API);
    if (strcmp(p, "/_ping") == 0) {
        answer(c, 200, "text/plain", "OK");
    } else if (strcmp(p, "/version") == 0) {
        json(c, 200, "{\"Version\": \"4.3.1\", \"Components\": [");
    } else if (strncmp(p, "/containers/busygone?", 21) == 0) {
        /* Busy, yet removed: the retry finds no such container. */
        char *mark = tu_join(DIR_, "busy.gone");
        int fd = open(mark, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
        free(mark);
        if (fd >= 0) {
            close(fd);
            json(c, 500, "{\"message\":\"unlinkat /x/userdata/shm: device or resource busy\"}");
        } else {
            json(c, 404,
                 "{\"message\":\"no container with name or ID \\\"busygone\\\" found: "
                 "no such container\"}");
        }
    } else if (strncmp(p, "/containers/busyonce?", 21) == 0 ||
               strncmp(p, "/containers/busyever?", 21) == 0) {
        /* A delete that fails once (or always) on a busy shm mount. */
        char *mark = tu_join(DIR_, p[16] == 'o' ? "busy.once" : "busy.ever");
        int fd = open(mark, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
        bool first = fd >= 0;
        if (fd >= 0)
            close(fd);
        free(mark);
        if (first || p[16] == 'e')
            json(c, 500,
                 "{\"cause\":\"device or resource busy\",\"message\":\"removing container x "
                 "root filesystem: unlinkat /x/userdata/shm: device or resource busy\"}");
        else
            answer(c, 204, "text/plain", "");
    } else if (strcmp(p, "/containers/freezeonce/pause") == 0 ||
               strcmp(p, "/containers/freezeever/pause") == 0 ||
               strcmp(p, "/containers/stopped/pause") == 0) {
        /* runc's freezer giving up once (or always); a stopped container.
         * Each attempt leaves a numbered mark the test counts. */
        char kind = p[12] == 's' ? 's' : p[18], name[32];
        int k = 0, fd = -1;
        while (fd < 0 && k < 16) {
            snprintf(name, sizeof(name), "pause.%c.%d", kind, k++);
            char *mark = tu_join(DIR_, name);
            fd = open(mark, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
            free(mark);
        }
        if (fd >= 0)
            close(fd);
        if (kind == 's')
            json(c, 409, "{\"message\":\"\\\"stopped\\\" is not running\",\"response\":409}");
        else if (k == 1 || kind == 'e')
            json(c, 500, "{\"message\":\"runc: unable to freeze: OCI runtime error\"}");
        else
            answer(c, 204, "text/plain", "");
    } else if (strcmp(p, "/images/json") == 0) {
        /* An image removed while Podman lists: the first answer fails. */
        char *mark = tu_join(DIR_, "images.once");
        int fd = open(mark, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
        free(mark);
        if (fd >= 0) {
            close(fd);
            json(c, 500, "{\"cause\":\"image not known\",\"message\":\"3c2f: image not known\"}");
        } else {
            json(c, 200,
                 "[{\"Id\":\"sha256:abc\",\"RepoTags\":[\"localhost/x:1\"],"
                 "\"Created\":1,\"Size\":2}]");
        }
    } else if (strcmp(p, "/info") == 0) {
        json(c, 200,
             "{\"host\": {\"cgroupVersion\": \"v1\", \"security\": {\"rootless\": false}},"
             " \"store\": {\"graphRoot\": \"/var/lib/containers/storage\"}}");
    } else if (strcmp(p, "/containers/trunc/json") == 0) {
        puts_(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n"
                 "\r\n{\"Id\":\"abc\",\"State\":{");
    } else if (strcmp(p, "/containers/hang/json") == 0) {
        pause_ms(60000);
    } else if (strcmp(p, "/containers/slowbody/json") == 0) {
        puts_(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"Id\":");
        pause_ms(60000);
    } else if (strcmp(p, "/containers/boom/start") == 0) {
        json(c, 500, "{\"cause\":\"x\",\"message\":\"boom: something\\nbroke\",\"response\":500}");
    } else if (strcmp(p, "/containers/missing/json") == 0) {
        json(c, 404,
             "{\"cause\":\"no such container\",\"message\":\"no container with name or "
             "ID \\\"missing\\\" found: no such container\",\"response\":404}");
    } else if (strcmp(p, "/containers/html/json") == 0) {
        answer(c, 502, "text/html", "<html>bad gateway</html>");
    } else if (strcmp(p, "/containers/empty/json") == 0) {
        answer(c, 200, "application/json", "");
    } else if (strcmp(p, "/containers/chunked/json") == 0) {
        puts_(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                 "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                 "10\r\n{\"Id\":\"c1\",\"Name\r\n"
                 "2e\r\n\":\"n\",\"State\":{\"Status\":\"running\",\"Running\":tr\r\n"
                 "19\r\nue,\"Pid\":42},\"Config\":{}}\r\n"
                 "0\r\n\r\n");
    } else if (strcmp(p, "/containers/create") == 0) {
        json(c, 500,
             "{\"cause\":\"that name is already in use\",\"message\":\"creating "
             "container storage: the container name \\\"x\\\" is already in use\","
             "\"response\":500}");
    } else if (strncmp(p, "/containers/json", 16) == 0) {
        json(c, 200,
             "[{\"Id\":\"a1\",\"Names\":[\"n1\"],\"State\":\"running\",\"Pid\":7,"
             "\"Labels\":{\"k\":\"v\"}},{\"NoId\":1},"
             "{\"Id\":\"a2\",\"Names\":[],\"State\":\"paused\",\"Labels\":null}]");
    } else if (strncmp(p, "/containers/notjson/wait", 24) == 0) {
        json(c, 200, "\"abc\"");
    } else if (strncmp(p, "/containers/code/wait", 21) == 0) {
        json(c, 200, "137\n");
    } else if (strncmp(p, "/images/pull?reference=ok", 25) == 0) {
        puts_(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                 "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
        const char *lines[] = {"{\"stream\":\"Trying to pull ok...\\n\"}\n",
                               "{\"stream\":\"Writing manifest\\n\"}\n{\"images\":[\"sha\"],",
                               "\"id\":\"sha256abc\"}", NULL};
        for (int i = 0; lines[i]; i++) {
            char h[32];
            snprintf(h, sizeof(h), "%zx\r\n", strlen(lines[i]));
            puts_(c, h);
            puts_(c, lines[i]);
            puts_(c, "\r\n");
            pause_ms(5);
        }
        puts_(c, "0\r\n\r\n");
    } else if (strncmp(p, "/images/pull?reference=reg.example%2Fmissing", 44) == 0) {
        json(c, 200,
             "{\"stream\":\"Trying to pull reg.example/missing:latest...\\n\"}\n"
             "{\"error\":\"initializing source docker://reg.example/missing:latest: reading "
             "manifest latest in reg.example/missing: manifest unknown: manifest unknown\\n\"}\n");
    } else if (strncmp(p, "/images/pull?reference=127.0.0.1%3A5000%2Fplain", 47) == 0) {
        if (strstr(p, "&tlsVerify=false"))
            json(c, 200, "{\"stream\":\"Writing manifest\\n\"}\n{\"id\":\"plainid\"}\n");
        else
            json(c, 200,
                 "{\"error\":\"initializing source docker://127.0.0.1:5000/plain:latest: "
                 "pinging container registry 127.0.0.1:5000: Get \\\"https://127.0.0.1:5000/v2/"
                 "\\\": http: server gave HTTP response to HTTPS client\"}\n");
    } else if (strncmp(p, "/images/pull", 12) == 0) {
        json(c, 200,
             "{\"stream\":\"Trying to pull bad...\\n\"}\n"
             "{\"error\":\"pinging container registry: no route to host\"}\n");
    } else if (strcmp(p, "/exec/good/start") == 0) {
        /* The head and the first frame's start in one write, then frames
         * split at awkward places. */
        char first[sizeof(UPGRADED) + 4];
        memcpy(first, UPGRADED, sizeof(UPGRADED) - 1);
        memcpy(first + sizeof(UPGRADED) - 1, "\x01\x00\x00", 3);
        put(c, first, sizeof(UPGRADED) + 2);
        pause_ms(20);
        put(c, "\x00\x00\x00\x00\x0bhel", 8);
        pause_ms(20);
        put(c, "lo world", 8);
        frame(c, 2, "oops", 4);
        frame(c, 1, "", 0);
        frame(c, 3, "sys", 3);
        frame(c, 1, "!", 1);
    } else if (strcmp(p, "/exec/big/start") == 0) {
        puts_(c, UPGRADED);
        static char blob[200000];
        for (size_t i = 0; i < sizeof(blob); i++)
            blob[i] = (char)('a' + i % 26);
        frame(c, 1, blob, sizeof(blob));
        frame(c, 2, blob, 1000);
    } else if (strcmp(p, "/exec/cut/start") == 0) {
        puts_(c, UPGRADED);
        put(c,
            "\x01\x00\x00\x00\x00\x00\x00\x64"
            "0123456789",
            18);
    } else if (strcmp(p, "/exec/cuthdr/start") == 0) {
        puts_(c, UPGRADED);
        put(c, "\x01\x00\x00", 3);
    } else if (strcmp(p, "/exec/garbage/start") == 0) {
        puts_(c, UPGRADED);
        put(c, "\x07\x01\x02\x03\x00\x00\x00\x05hello", 13);
    } else if (strcmp(p, "/exec/tty/start") == 0) {
        puts_(c, UPGRADED);
        put(c, "raw\x01\x00\x00 bytes\r\n", 13);
    } else if (strcmp(p, "/exec/err/start") == 0) {
        puts_(c, "HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n"
                 "19\r\n{\"message\":\"container is \r\n"
                 "d\r\npaused\",\"x\":1\r\n"
                 "1\r\n}\r\n0\r\n\r\n");
    } else if (strcmp(p, "/exec/err404/start") == 0) {
        json(c, 404, "{\"message\":\"no exec session with ID err404 found\"}");
    } else if (strcmp(p, "/exec/hang/start") == 0) {
        pause_ms(60000);
    } else if (strcmp(p, "/exec/silent/start") == 0) {
        puts_(c, UPGRADED);
        pause_ms(60000);
    } else if (strcmp(p, "/exec/badhead/start") == 0) {
        puts_(c, "HTTP/1.1 2x0 OK\r\n\r\n");
    } else if (strcmp(p, "/exec/closed/start") == 0) {
        /* close without a word */
    } else if (strcmp(p, "/exec/echo/start") == 0) {
        puts_(c, UPGRADED);
        char buf[256];
        ssize_t n;
        while ((n = recv(c, buf, sizeof(buf), 0)) > 0)
            frame(c, 1, buf, (size_t)n);
        frame(c, 2, "eof", 3); /* stdin was closed: half-close worked */
    } else if (strncmp(p, "/containers/lg/logs?", 20) == 0) {
        /* Frames cut anywhere, a header included, as a slow stream
         * delivers them; the query comes back on stderr. */
        puts_(c, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                 "Connection: close\r\n\r\n");
        frame(c, 1, "hello\n", 6);
        unsigned char h[8] = {2, 0, 0, 0, 0, 0, 0, 0};
        size_t ql = strlen(p + 20);
        h[7] = (unsigned char)ql;
        put(c, h, 3);
        pause_ms(30);
        put(c, h + 3, 5);
        pause_ms(30);
        put(c, p + 20, ql);
        static char big[100000];
        memset(big, 'x', sizeof(big));
        frame(c, 1, big, sizeof(big));
    } else if (strcmp(p, "/exec/done/json") == 0) {
        json(c, 200, "{\"Running\":false,\"ExitCode\":42,\"Pid\":0}");
    } else if (strcmp(p, "/exec/run/json") == 0) {
        json(c, 200, "{\"Running\":true,\"ExitCode\":0,\"Pid\":99}");
    } else {
        char msg[512];
        snprintf(msg, sizeof(msg), "{\"message\":\"fake: no route for %s %s\"}", method, path);
        json(c, 404, msg);
    }
}

static void serve(int c)
{
    char buf[16384];
    size_t n = 0;
    char *end = NULL;
    while (!end && n < sizeof(buf) - 1) {
        ssize_t r = recv(c, buf + n, sizeof(buf) - 1 - n, 0);
        if (r <= 0)
            _exit(0);
        n += (size_t)r;
        buf[n] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    char method[16] = "", path[4096] = "";
    if (sscanf(buf, "%15s %4095s", method, path) != 2)
        _exit(0);
    /* Read (and ignore) a Content-Length body so the client never blocks. */
    const char *cl = strcasestr(buf, "Content-Length:");
    if (cl && end) {
        size_t want = strtoul(cl + 15, NULL, 10);
        size_t have = n - (size_t)(end + 4 - buf);
        while (have < want) {
            ssize_t r = recv(c, buf, sizeof(buf), 0);
            if (r <= 0)
                break;
            have += (size_t)r;
        }
    }
    route(c, method, path);
    shutdown(c, SHUT_WR);
    pause_ms(20);
    close(c);
    _exit(0);
}

static void server_main(int lfd)
{
    setpgid(0, 0);
    signal(SIGCHLD, SIG_IGN); /* no zombies */
    for (;;) {
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR)
                continue;
            _exit(1);
        }
        pid_t pid = fork();
        if (pid == 0) {
            close(lfd);
            serve(c);
        }
        close(c);
    }
}

static int setup(void **state)
{
    (void)state;
    DIR_ = tu_mkdtemp();
    SOCK = tu_join(DIR_, "fake.sock");
    URL = sp_xasprintf("unix://%s", SOCK);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    assert_true(strlen(SOCK) < sizeof(sa.sun_path));
    memcpy(sa.sun_path, SOCK, strlen(SOCK) + 1);
    assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(lfd, 64), 0);
    SERVER = fork();
    assert_true(SERVER >= 0);
    if (SERVER == 0)
        server_main(lfd);
    setpgid(SERVER, SERVER);
    close(lfd);

    sp_podman_opts o = SP_PODMAN_OPTS_INIT;
    o.url = URL;
    o.connect_timeout_ms = 1000;
    o.timeout_ms = 400;
    o.transfer_timeout_ms = 400;
    sp_error *err = NULL;
    if (sp_podman_open(&P, &o, &err) < 0)
        fail_msg("open fake: %s", err->message);
    assert_false(sp_podman_started_service(P));
    assert_string_equal(sp_podman_url(P), URL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sp_podman_free(P);
    if (SERVER > 0) {
        kill(-SERVER, SIGKILL);
        kill(SERVER, SIGKILL);
        waitpid(SERVER, NULL, 0);
    }
    tu_rmtree(DIR_);
    free(DIR_);
    free(SOCK);
    free(URL);
    return 0;
}

/* Expect a failure with `code` whose message holds `needle`. */
static void expect(int r, sp_error **errp, int code, const char *needle)
{
    sp_error *err = *errp;
    *errp = NULL;
    if (r != code)
        fail_msg("want %d (%s), got %d: %s", code, needle, r, err ? err->message : "(none)");
    assert_non_null(err);
    assert_int_equal(err->code, code);
    if (!strstr(err->message, needle))
        fail_msg("message lacks \"%s\": %s", needle, err->message);
    assert_null(strchr(err->message, '\n'));
    sp_error_free(err);
}

/* How many files in the fake's folder start with `prefix`. */
static int count_marks(const char *prefix)
{
    DIR *d = opendir(DIR_);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

/* ----------------------------------------------------------------- tests -- */

static void test_bodies(void **state)
{
    (void)state;
    sp_error *err = NULL;
    assert_int_equal(sp_podman_ping(P, &err), 0);

    /* A delete that hits a busy shm mount once is retried; one that keeps
     * hitting it says so. */
    assert_int_equal(sp_podman_container_delete(P, "busyonce", true, true, &err), 0);
    assert_int_equal(sp_podman_container_delete(P, "busygone", true, true, &err), 0);
    expect(sp_podman_container_delete(P, "busyever", true, true, &err), &err, SP_EPODMAN,
           "device or resource busy");
    err = NULL;

    /* A pause runc's freezer gives up on is retried (three times, then the
     * error stands); a container that is not running is asked once. */
    assert_int_equal(sp_podman_container_pause(P, "freezeonce", &err), 0);
    assert_int_equal(count_marks("pause.o."), 2);
    expect(sp_podman_container_pause(P, "freezeever", &err), &err, SP_EPODMAN, "unable to freeze");
    err = NULL;
    assert_int_equal(count_marks("pause.e."), 4);
    expect(sp_podman_container_pause(P, "stopped", &err), &err, SP_EPODMAN, "is not running");
    err = NULL;
    assert_int_equal(count_marks("pause.s."), 1);

    /* A list that fails on an image removed meanwhile is asked again. */
    sp_podman_image_info *imgs = NULL;
    size_t nimg = 0;
    assert_int_equal(sp_podman_image_list(&imgs, &nimg, P, &err), 0);
    assert_int_equal(nimg, 1);
    assert_string_equal(imgs[0].id, "abc");
    sp_podman_image_list_free(imgs, nimg);

    sp_podman_version *v = NULL;
    expect(sp_podman_get_version(&v, P, &err), &err, SP_EPODMAN,
           "version: the podman service sent malformed JSON");
    assert_null(v);
    err = NULL;

    sp_podman_container_info *info = NULL;
    expect(sp_podman_container_inspect(&info, P, "trunc", &err), &err, SP_EPODMAN,
           "closed the connection mid-answer");
    err = NULL;
    expect(sp_podman_container_inspect(&info, P, "missing", &err), &err, SP_ENOTFOUND,
           "inspect container missing: no container with name or ID \"missing\" found");
    err = NULL;
    expect(sp_podman_container_inspect(&info, P, "html", &err), &err, SP_EPODMAN,
           "answered HTTP 502: <html>bad gateway</html>");
    err = NULL;
    expect(sp_podman_container_inspect(&info, P, "empty", &err), &err, SP_EPODMAN, "empty answer");
    err = NULL;
    expect(sp_podman_container_start(P, "boom", &err), &err, SP_EPODMAN,
           "start container boom: boom: something broke");
    assert_null(info);

    /* A chunked body is fine. */
    err = NULL;
    assert_int_equal(sp_podman_container_inspect(&info, P, "chunked", &err), 0);
    assert_string_equal(info->id, "c1");
    assert_true(info->running);
    assert_int_equal(info->pid, 42);
    assert_null(info->labels[0]);
    sp_podman_container_info_free(info);

    /* 500 "already in use" is a name conflict. */
    sp_podman_container_spec spec = SP_PODMAN_CONTAINER_SPEC_INIT;
    spec.image = "img";
    spec.name = "x";
    char *id = NULL;
    expect(sp_podman_container_create(&id, NULL, P, &spec, &err), &err, SP_EEXISTS,
           "already in use");
    assert_null(id);

    /* Lists skip entries without an id. */
    sp_podman_containers *l = NULL;
    const char *labels[] = {"k=v", "other", NULL};
    assert_int_equal(sp_podman_container_list(&l, P, labels, NULL), 0);
    assert_int_equal(l->n, 2);
    assert_string_equal(l->items[0].name, "n1");
    assert_true(l->items[0].running);
    assert_string_equal(l->items[0].labels[0], "k=v");
    assert_null(l->items[1].name);
    assert_true(l->items[1].paused);
    assert_null(l->items[1].labels[0]);
    sp_podman_containers_free(l);

    int code = 0;
    err = NULL;
    expect(sp_podman_container_wait(&code, P, "notjson", NULL, 1000, &err), &err, SP_EPODMAN,
           "not an exit code");
    assert_int_equal(sp_podman_container_wait(&code, P, "code", "exited", 1000, NULL), 0);
    assert_int_equal(code, 137);
}

static void test_timeouts(void **state)
{
    (void)state;
    sp_error *err = NULL;
    sp_podman_container_info *info = NULL;
    int64_t t0 = sp_now_ms();
    expect(sp_podman_container_inspect(&info, P, "hang", &err), &err, SP_ETIMEOUT,
           "did not answer within 400ms");
    int64_t took = sp_now_ms() - t0;
    assert_true(took >= 350 && took < 3000);

    err = NULL;
    t0 = sp_now_ms();
    expect(sp_podman_container_inspect(&info, P, "slowbody", &err), &err, SP_ETIMEOUT,
           "did not answer within");
    assert_true(sp_now_ms() - t0 < 3000);

    sp_exec *e = NULL;
    err = NULL;
    t0 = sp_now_ms();
    expect(sp_podman_exec_start(&e, P, "hang", false, &err), &err, SP_ETIMEOUT,
           "start exec session hang: podman service at unix://");
    assert_true(sp_now_ms() - t0 < 3000);
    assert_null(e);

    /* A stream that stays silent: reads time out, the state survives. */
    assert_int_equal(sp_podman_exec_start(&e, P, "silent", false, NULL), 0);
    size_t n = 1;
    char buf[16];
    assert_int_equal(sp_exec_read(&n, NULL, e, buf, sizeof(buf), 0, NULL), SP_ETIMEOUT);
    assert_int_equal(n, 0);
    err = NULL;
    t0 = sp_now_ms();
    expect(sp_exec_read(&n, NULL, e, buf, sizeof(buf), 100, &err), &err, SP_ETIMEOUT, "no data");
    assert_true(sp_now_ms() - t0 >= 90);
    assert_false(sp_exec_buffered(e));
    sp_exec_free(e);

    /* exec wait gives up at its deadline. */
    err = NULL;
    int code = 0;
    expect(sp_podman_exec_wait(&code, P, "run", 50, &err), &err, SP_ETIMEOUT, "still runs");
    assert_int_equal(sp_podman_exec_wait(&code, P, "done", 50, NULL), 0);
    assert_int_equal(code, 42);
    sp_podman_exec_info xi;
    assert_int_equal(sp_podman_exec_inspect(&xi, P, "run", NULL), 0);
    assert_true(xi.running);
    assert_int_equal(xi.pid, 99);
}

static void read_all(sp_exec *e, sp_buf *out, sp_buf *errb, sp_buf *sys, size_t cap)
{
    char buf[65536];
    for (;;) {
        size_t n;
        int stream;
        sp_error *err = NULL;
        if (sp_exec_read(&n, &stream, e, buf, cap, 2000, &err) < 0)
            fail_msg("read: %s", err->message);
        if (n == 0)
            break;
        assert_true(n <= cap);
        sp_buf_add(stream == SP_EXEC_STDOUT ? out : stream == SP_EXEC_STDERR ? errb : sys, buf, n);
    }
}

static void test_streams(void **state)
{
    (void)state;
    sp_exec *e = NULL;
    sp_error *err = NULL;
    if (sp_podman_exec_start(&e, P, "good", false, &err) < 0)
        fail_msg("start: %s", err->message);
    assert_string_equal(sp_exec_id(e), "good");
    /* One byte at a time and in big reads give the same result. */
    for (size_t cap = 1; cap <= 4096; cap *= 4096) {
        if (cap > 1) {
            sp_exec_free(e);
            assert_int_equal(sp_podman_exec_start(&e, P, "good", false, NULL), 0);
        }
        sp_buf out = SP_BUF_INIT, eb = SP_BUF_INIT, sys = SP_BUF_INIT;
        read_all(e, &out, &eb, &sys, cap);
        assert_string_equal(out.data, "hello world!");
        assert_string_equal(eb.data, "oops");
        assert_string_equal(sys.data, "sys");
        sp_buf_dispose(&out);
        sp_buf_dispose(&eb);
        sp_buf_dispose(&sys);
        /* At the end, reads keep saying "ended". */
        size_t n = 7;
        char b[4];
        assert_int_equal(sp_exec_read(&n, NULL, e, b, sizeof(b), 100, NULL), 0);
        assert_int_equal(n, 0);
        assert_true(sp_exec_buffered(e));
    }
    sp_exec_free(e);

    /* Frames larger than the internal buffer. */
    assert_int_equal(sp_podman_exec_start(&e, P, "big", false, NULL), 0);
    sp_buf out = SP_BUF_INIT, eb = SP_BUF_INIT, sys = SP_BUF_INIT;
    read_all(e, &out, &eb, &sys, 65536);
    assert_int_equal(out.len, 200000);
    assert_int_equal(eb.len, 1000);
    assert_int_equal(out.data[199999], (char)('a' + 199999 % 26));
    sp_buf_dispose(&out);
    sp_buf_dispose(&eb);
    sp_buf_dispose(&sys);
    sp_exec_free(e);

    /* Raw TTY bytes pass untouched, NULs included. */
    assert_int_equal(sp_podman_exec_start(&e, P, "tty", true, NULL), 0);
    assert_true(sp_exec_is_tty(e));
    read_all(e, &out, &eb, &sys, 4);
    assert_int_equal(out.len, 13);
    assert_memory_equal(out.data, "raw\x01\x00\x00 bytes\r\n", 13);
    assert_null(eb.data);
    sp_buf_dispose(&out);
    sp_exec_free(e);

    /* stdin goes out, half-close reaches the service, output comes back. */
    assert_int_equal(sp_podman_exec_start(&e, P, "echo", false, NULL), 0);
    assert_int_equal(sp_exec_write_stdin(e, "ping", 4, NULL), 0);
    char b[16];
    size_t n;
    int st;
    assert_int_equal(sp_exec_read(&n, &st, e, b, sizeof(b), 2000, NULL), 0);
    assert_int_equal(n, 4);
    assert_memory_equal(b, "ping", 4);
    assert_int_equal(sp_exec_close_stdin(e, NULL), 0);
    assert_int_equal(sp_exec_close_stdin(e, NULL), 0);
    read_all(e, &out, &eb, &sys, 16);
    assert_string_equal(eb.data, "eof");
    sp_buf_dispose(&eb);
    sp_exec_free(e);
    sp_exec_free(NULL);
}

static void test_broken_streams(void **state)
{
    (void)state;
    sp_exec *e = NULL;
    sp_error *err = NULL;
    char buf[64];
    size_t n;

    /* The service dies in the middle of a frame. */
    assert_int_equal(sp_podman_exec_start(&e, P, "cut", false, NULL), 0);
    assert_int_equal(sp_exec_read(&n, NULL, e, buf, sizeof(buf), 2000, NULL), 0);
    assert_int_equal(n, 10);
    expect(sp_exec_read(&n, NULL, e, buf, sizeof(buf), 2000, &err), &err, SP_EPODMAN,
           "connection closed inside a frame (90 bytes missing)");
    err = NULL;
    expect(sp_exec_read(&n, NULL, e, buf, sizeof(buf), 2000, &err), &err, SP_EPODMAN,
           "broken by an earlier error");
    sp_exec_free(e);

    assert_int_equal(sp_podman_exec_start(&e, P, "cuthdr", false, NULL), 0);
    err = NULL;
    expect(sp_exec_read(&n, NULL, e, buf, sizeof(buf), 2000, &err), &err, SP_EPODMAN,
           "inside a frame header (3 of 8 bytes)");
    sp_exec_free(e);

    /* A 101 followed by garbage frame headers. */
    assert_int_equal(sp_podman_exec_start(&e, P, "garbage", false, NULL), 0);
    err = NULL;
    expect(sp_exec_read(&n, NULL, e, buf, sizeof(buf), 2000, &err), &err, SP_EPODMAN,
           "malformed frame header 07 01 02 03");
    sp_exec_free(e);

    /* Error answers instead of an upgrade, chunked or not. */
    err = NULL;
    expect(sp_podman_exec_start(&e, P, "err", false, &err), &err, SP_EPODMAN,
           "start exec session err: container is paused");
    assert_null(e);
    err = NULL;
    expect(sp_podman_exec_start(&e, P, "err404", false, &err), &err, SP_ENOTFOUND,
           "no exec session with ID err404 found");
    err = NULL;
    expect(sp_podman_exec_start(&e, P, "badhead", false, &err), &err, SP_EPODMAN,
           "bad status line");
    err = NULL;
    expect(sp_podman_exec_start(&e, P, "closed", false, &err), &err, SP_EPODMAN,
           "closed the connection before answering");
    assert_null(e);
}

static int64_t pull_lines;
static void on_progress(const char *line, void *ud)
{
    (void)ud;
    assert_null(strchr(line, '\n'));
    pull_lines++;
}

static void test_pull(void **state)
{
    (void)state;
    sp_error *err = NULL;
    char *id = NULL;
    pull_lines = 0;
    expect(sp_podman_image_pull(&id, P, "bad", on_progress, NULL, &err), &err, SP_EPODMAN,
           "pull bad: registry docker.io cannot be reached (no route to host)");
    assert_null(id);
    assert_int_equal(pull_lines, 1);
    pull_lines = 0;
    assert_int_equal(sp_podman_image_pull(&id, P, "ok", on_progress, NULL, NULL), 0);
    assert_string_equal(id, "sha256abc");
    assert_int_equal(pull_lines, 2);
    free(id);
}

/* The registry's reasons become one line each, with the code that fits;
 * --tls-verify=false reaches the service. */
static void test_pull_errors(void **state)
{
    (void)state;
    sp_error *err = NULL;
    char *id = NULL;
    sp_podman_pull_opts o = SP_PODMAN_PULL_OPTS_INIT;
    expect(sp_podman_image_pull_with(&id, P, "reg.example/missing", &o, &err), &err, SP_ENOTFOUND,
           "pull reg.example/missing: registry reg.example has no such image");
    expect(sp_podman_image_pull_with(&id, P, "127.0.0.1:5000/plain", &o, &err), &err, SP_EPODMAN,
           "pull 127.0.0.1:5000/plain: registry 127.0.0.1:5000 speaks plain HTTP, not HTTPS: if "
           "you trust it, pull with TLS verification off (--tls-verify=false)");
    assert_null(id);
    o.no_tls_verify = true;
    assert_int_equal(sp_podman_image_pull_with(&id, P, "127.0.0.1:5000/plain", &o, NULL), 0);
    assert_string_equal(id, "plainid");
    free(id);
}

/* The default policy pulls only references that name a registry host;
 * missing asks whether the image exists first; never never pulls. */
static void test_pull_policy(void **state)
{
    (void)state;
    bool pulled = true;
    sp_error *err = NULL;
    static const struct {
        const char *ref;
        sp_podman_pull_policy want;
    } cases[] = {
        {"docker.io/library/debian:12", SP_PODMAN_PULL_MISSING},
        {"127.0.0.1:5000/x:1", SP_PODMAN_PULL_MISSING},
        {"reg.example/a/b@sha256:00", SP_PODMAN_PULL_MISSING},
        {"localhost:5000/x", SP_PODMAN_PULL_MISSING},
        {"localhost/sandpod-busybox:latest", SP_PODMAN_PULL_NEVER},
        {"debian:12", SP_PODMAN_PULL_NEVER},
        {"library/debian", SP_PODMAN_PULL_NEVER},
        {"docker.io", SP_PODMAN_PULL_NEVER},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (sp_podman_pull_policy_for(cases[i].ref, SP_PODMAN_PULL_DEFAULT) != cases[i].want)
            fail_msg("default pull policy of %s is not %d", cases[i].ref, (int)cases[i].want);
    assert_int_equal(sp_podman_pull_policy_for("debian", SP_PODMAN_PULL_ALWAYS),
                     SP_PODMAN_PULL_ALWAYS);
    /* Would fail if they reached the service: "bad" always errs. */
    assert_int_equal(
        sp_podman_image_ensure(&pulled, P, "localhost/bad", SP_PODMAN_PULL_DEFAULT, NULL, NULL), 0);
    assert_false(pulled);
    assert_int_equal(sp_podman_image_ensure(&pulled, P, "bad", SP_PODMAN_PULL_DEFAULT, NULL, NULL),
                     0);
    assert_int_equal(
        sp_podman_image_ensure(&pulled, P, "bad/x:1", SP_PODMAN_PULL_DEFAULT, NULL, NULL), 0);
    assert_int_equal(
        sp_podman_image_ensure(&pulled, P, "reg.example/bad", SP_PODMAN_PULL_NEVER, NULL, NULL), 0);
    assert_false(pulled);
    /* A registry host: missing locally (404 here), so pulled. */
    expect(sp_podman_image_ensure(&pulled, P, "reg.example/missing", SP_PODMAN_PULL_DEFAULT, NULL,
                                  &err),
           &err, SP_ENOTFOUND, "has no such image");
    assert_int_equal(sp_podman_image_ensure(&pulled, P, "ok", SP_PODMAN_PULL_ALWAYS, NULL, NULL),
                     0);
    assert_true(pulled);
    expect(sp_podman_image_ensure(&pulled, P, "ok", (sp_podman_pull_policy)9, NULL, &err), &err,
           SP_EINVAL, "unknown pull policy 9");
}

static char log_text[8192];
static size_t log_len;
static void collect_log(sp_log_level level, const char *message, void *ud)
{
    assert_ptr_equal(ud, &log_len);
    int n = snprintf(log_text + log_len, sizeof(log_text) - log_len, "%s: %s\n",
                     sp_log_level_name(level), message);
    if (n > 0 && (size_t)n < sizeof(log_text) - log_len)
        log_len += (size_t)n;
}

/* The debug log: one line per request with method, path, status, bytes
 * and duration; query values and bodies never; nothing above the level
 * asked for, nothing once the handler is gone. */
static void test_debug_log(void **state)
{
    (void)state;
    log_len = 0;
    log_text[0] = '\0';
    sp_log_set_handler(collect_log, SP_LOG_DEBUG, &log_len);
    char *id = NULL;
    assert_int_equal(sp_podman_image_pull(&id, P, "ok", on_progress, NULL, NULL), 0);
    free(id);
    sp_podman_container_info *info = NULL;
    assert_int_equal(sp_podman_container_inspect(&info, P, "chunked", NULL), 0);
    sp_podman_container_info_free(info);
    assert_non_null(strstr(log_text, "debug: podman: POST /v4.0.0/libpod/images/pull?reference=..."
                                     "&tlsVerify=...&policy=...&quiet=... -> 200, "));
    assert_null(strstr(log_text, "reference=ok"));
    assert_non_null(strstr(log_text, "debug: podman: GET /v4.0.0/libpod/containers/chunked/json "
                                     "-> 200, 0 bytes sent, "));
    assert_non_null(strstr(log_text, " ms\n"));

    log_len = 0;
    log_text[0] = '\0';
    sp_log_set_handler(collect_log, SP_LOG_INFO, &log_len);
    assert_int_equal(sp_podman_ping(P, NULL), 0);
    assert_int_equal(log_len, 0);
    sp_log_set_handler(NULL, SP_LOG_DEBUG, NULL);
    assert_int_equal(sp_podman_ping(P, NULL), 0);
    assert_int_equal(log_len, 0);
}

struct logs_seen {
    char out[8], err[256];
    size_t out_len, err_len, x_count;
};
static int on_logs(int stream, const char *data, size_t len, void *ud)
{
    struct logs_seen *l = ud;
    for (size_t i = 0; i < len; i++) {
        if (stream == SP_EXEC_STDERR && l->err_len < sizeof(l->err) - 1)
            l->err[l->err_len++] = data[i];
        else if (stream == SP_EXEC_STDOUT && data[i] == 'x')
            l->x_count++;
        else if (stream == SP_EXEC_STDOUT && l->out_len < sizeof(l->out) - 1)
            l->out[l->out_len++] = data[i];
    }
    return 0;
}

/* Container logs: the options as the query, frames split across reads
 * (a header too) handed out by stream. */
static void test_logs(void **state)
{
    (void)state;
    struct logs_seen l = {0};
    sp_logs_opts o = SP_LOGS_OPTS_INIT;
    o.follow = true;
    o.tail = 3;
    o.timestamps = true;
    o.since = "1700000000";
    sp_error *err = NULL;
    if (sp_podman_container_logs(P, "lg", &o, on_logs, &l, &err) < 0)
        fail_msg("logs: %s", err->message);
    assert_string_equal(l.out, "hello\n");
    assert_string_equal(
        l.err, "stdout=true&stderr=true&follow=true&tail=3&timestamps=true&since=1700000000");
    assert_int_equal(l.x_count, 100000);
    memset(&l, 0, sizeof(l));
    assert_int_equal(sp_podman_container_logs(P, "lg", NULL, on_logs, &l, NULL), 0);
    assert_string_equal(l.err, "stdout=true&stderr=true");
    expect(sp_podman_container_logs(P, "nosuch", NULL, on_logs, &l, &err), &err, SP_ENOTFOUND,
           "logs of container nosuch");
}

/* The hint for a service that is not there: systemctl for the default
 * socket (--user when not root), podman system service for another, and
 * the repository's script only for a program in the build tree. */
static void test_start_hint(void **state)
{
    (void)state;
    const char *script = "/bin/sh"; /* any executable stands for the script */
    struct {
        const char *sock;
        bool root;
        const char *exe, *want;
    } cases[] = {
        {NULL, true, "/usr/bin/sandpod", "start it with 'systemctl start podman.socket'"},
        {"/run/podman/podman.sock", true, "/usr/bin/sandpod",
         "start it with 'systemctl start podman.socket'"},
        {NULL, false, "/usr/bin/sandpod", "start it with 'systemctl --user start podman.socket'"},
        {"/run/user/1000/podman/podman.sock", false, "/usr/bin/sandpod",
         "start it with 'systemctl --user start podman.socket'"},
        {"/tmp/x.sock", false, "/usr/bin/sandpod",
         "start it with 'podman system service --time=0 unix:///tmp/x.sock &'"},
        {NULL, true, "/src/build/sandpod",
         "start it with 'systemctl start podman.socket' (in this build tree: '/bin/sh start')"},
        {"/tmp/x.sock", true, "/src/build/tests/t",
         "start it with 'podman system service --time=0 unix:///tmp/x.sock &' (in this build "
         "tree: '/bin/sh start /tmp/x.sock')"},
        /* A sibling folder whose name starts alike is not the build tree. */
        {NULL, true, "/src/build2/sandpod", "start it with 'systemctl start podman.socket'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *h = sp_podman_start_hint_for(cases[i].sock, cases[i].root, "/run/user/1000",
                                           cases[i].exe, "/src/build", script);
        if (strcmp(h, cases[i].want) != 0)
            fail_msg("case %zu: got '%s'", i, h);
        free(h);
    }
    /* No script there: no mention of it, even in the build tree. */
    char *h = sp_podman_start_hint_for(NULL, true, NULL, "/src/build/sandpod", "/src/build",
                                       "/nonexistent/podman-service.sh");
    assert_string_equal(h, "start it with 'systemctl start podman.socket'");
    free(h);
    /* This test runs from the build tree: the real hint names the script. */
    h = sp_podman_start_hint(NULL);
    assert_non_null(strstr(h, "contrib/podman-service.sh start')"));
    free(h);
}

static void test_parser(void **state)
{
    (void)state;
    sp_http1_head h;
    const char *ok = "HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\nDATA";
    assert_int_equal(sp_http1_parse_head(&h, ok, strlen(ok), NULL), (int)strlen(ok) - 4);
    assert_int_equal(h.status, 101);
    assert_true(h.upgrade);
    assert_int_equal(h.content_length, -1);
    /* Incomplete heads ask for more, at any cut. */
    for (size_t i = 0; i < strlen(ok) - 4; i++)
        assert_int_equal(sp_http1_parse_head(&h, ok, i, NULL), 0);
    const char *lf = "HTTP/1.0 404 Not Found\ncontent-length:  12 \ntransfer-encoding: Chunked\n\n";
    assert_int_equal(sp_http1_parse_head(&h, lf, strlen(lf), NULL), (int)strlen(lf));
    assert_int_equal(h.status, 404);
    assert_int_equal(h.content_length, 12);
    assert_true(h.chunked);
    const char *bad[] = {
        "HTTP/2 200 OK\r\n\r\n",
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 600 X\r\n\r\n",
        "http/1.1 200 OK\r\n\r\n",
        "HTTP/1.1 200 OK\r\nNoColon\r\n\r\n",
        "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
        "HTTP/1.1 200 OK\r\n: empty\r\n\r\n",
        NULL,
    };
    for (int i = 0; bad[i]; i++) {
        sp_error *err = NULL;
        int r = sp_http1_parse_head(&h, bad[i], strlen(bad[i]), &err);
        if (r >= 0)
            fail_msg("accepted: %s", bad[i]);
        assert_int_equal(r, SP_EPODMAN);
        sp_error_free(err);
    }
    char nul[] = "HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n";
    assert_true(sp_http1_parse_head(&h, nul, sizeof(nul) - 1, NULL) < 0);
    /* A head that never ends is refused once it is too long. */
    size_t big = 70000;
    char *huge = sp_xmalloc(big);
    memset(huge, 'a', big);
    memcpy(huge, "HTTP/1.1 200 OK\r\nX: ", 20);
    assert_true(sp_http1_parse_head(&h, huge, big, NULL) < 0);
    free(huge);

    char c1[] = "4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\n\r\n";
    size_t len = 0;
    assert_int_equal(sp_http1_dechunk(c1, strlen(c1), &len, NULL), 0);
    assert_int_equal(len, 9);
    assert_memory_equal(c1, "Wikipedia", 9);
    char c2[] = "4\r\nWi";
    assert_int_equal(sp_http1_dechunk(c2, strlen(c2), &len, NULL), 1);
    char c3[] = "zz\r\nWiki\r\n";
    assert_true(sp_http1_dechunk(c3, strlen(c3), &len, NULL) < 0);
    char c4[] = "2\r\nabX\r\n0\r\n\r\n";
    assert_true(sp_http1_dechunk(c4, strlen(c4), &len, NULL) < 0);
    char c5[] = "ffffffffffffffffff\r\n";
    assert_true(sp_http1_dechunk(c5, strlen(c5), &len, NULL) < 0);
}

static void test_urls(void **state)
{
    (void)state;
    sp_podman_addr a;
    assert_int_equal(sp_podman_addr_parse(&a, "unix:///run/x.sock", NULL), 0);
    assert_string_equal(a.socket_path, "/run/x.sock");
    assert_string_equal(a.url, "unix:///run/x.sock");
    sp_podman_addr_dispose(&a);
    assert_int_equal(sp_podman_addr_parse(&a, "/run/y.sock", NULL), 0);
    assert_string_equal(a.url, "unix:///run/y.sock");
    sp_podman_addr_dispose(&a);
    assert_int_equal(sp_podman_addr_parse(&a, "tcp://127.0.0.1:8080", NULL), 0);
    assert_string_equal(a.host, "127.0.0.1");
    assert_int_equal(a.port, 8080);
    sp_podman_addr_dispose(&a);
    assert_int_equal(sp_podman_addr_parse(&a, "tcp://[::1]:9", NULL), 0);
    assert_string_equal(a.host, "::1");
    assert_string_equal(a.url, "tcp://[::1]:9");
    sp_podman_addr_dispose(&a);
    const char *bad[] = {"",
                         "ssh://core@host/run/podman.sock",
                         "unix://relative",
                         "tcp://host",
                         "tcp://host:0",
                         "tcp://host:70000",
                         "tcp://:80",
                         "tcp://[::1]",
                         "tcp://h:8x",
                         NULL};
    for (int i = 0; bad[i]; i++) {
        sp_error *err = NULL;
        if (sp_podman_addr_parse(&a, bad[i], &err) == 0)
            fail_msg("accepted: %s", bad[i]);
        sp_error_free(err);
    }
}

/* Discovery failures say what is wrong and how to fix it. */
static void test_discovery_errors(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    sp_podman *p = NULL;
    sp_error *err = NULL;

    sp_podman_opts o = SP_PODMAN_OPTS_INIT;
    char *nosock = tu_join(dir, "none.sock");
    o.url = nosock;
    o.connect_timeout_ms = 300;
    /* A socket that is not there fails at once: no "within" claimed. */
    expect(sp_podman_open(&p, &o, &err), &err, SP_EPODMAN, " is not answering: ");
    err = NULL;
    o.url = "tcp://127.0.0.1:1";
    expect(sp_podman_open(&p, &o, &err), &err, SP_EPODMAN,
           "podman service at tcp://127.0.0.1:1 is not answering");
    err = NULL;

    /* A socket that takes the connection and never answers: the wait. */
    char *mute = tu_join(dir, "mute.sock");
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", mute);
    assert_int_equal(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(ls, 4), 0);
    o.url = mute;
    expect(sp_podman_open(&p, &o, &err), &err, SP_EPODMAN, "did not answer within 300ms: ");
    err = NULL;
    close(ls);
    free(mute);
    o.url = "ftp://x";
    expect(sp_podman_open(&p, &o, &err), &err, SP_EINVAL, "unsupported podman url");
    assert_null(p);

    /* No service anywhere, and podman missing or broken. */
    if (getenv("SANDPOD_URL")) {
        print_message("SANDPOD_URL is set: start errors not checked\n");
    } else {
        o = (sp_podman_opts)SP_PODMAN_OPTS_INIT;
        o.private_service = true;
        o.state_root = dir;
        o.podman_path = "/nonexistent/podman";
        o.connect_timeout_ms = 300;
        err = NULL;
        expect(sp_podman_open(&p, &o, &err), &err, SP_EPODMAN,
               "podman is not installed: apt-get install podman runc catatonit");

        o.no_autostart = true;
        err = NULL;
        expect(sp_podman_open(&p, &o, &err), &err, SP_EPODMAN,
               "no podman service answered; start it with 'systemctl");
        o.no_autostart = false;

        /* A podman that dies at once: its own words come back. */
        tu_write(dir, "broken-podman", "#!/bin/sh\necho \"cannot start: $*\" >&2\nexit 1\n", 0755);
        char *broken = tu_join(dir, "broken-podman");
        o.podman_path = broken;
        o.runtime = "myruntime";
        err = NULL;
        expect(sp_podman_open(&p, &o, &err), &err, SP_EPODMAN,
               "podman service exited right after start: cannot start: --runtime myruntime "
               "system service --time=0 unix://");

        /* A podman that never listens: bounded wait. */
        tu_write(dir, "stuck-podman", "#!/bin/sh\nexec sleep 30\n", 0755);
        char *stuck = tu_join(dir, "stuck-podman");
        o.podman_path = stuck;
        o.start_timeout_ms = 400;
        err = NULL;
        int64_t t0 = sp_now_ms();
        expect(sp_podman_open(&p, &o, &err), &err, SP_EPODMAN, "did not answer within 400ms");
        assert_true(sp_now_ms() - t0 < 3000);
        char *pid = tu_read(dir, "podman.pid", NULL);
        assert_non_null(pid);
        pid_t sp = (pid_t)strtol(pid, NULL, 10);
        assert_true(sp > 1);
        kill(sp, SIGKILL);
        free(pid);
        free(broken);
        free(stuck);
    }
    free(nosock);
    tu_rmtree(dir);
    free(dir);
}

static void test_bad_args(void **state)
{
    (void)state;
    char *id = NULL;
    sp_error *err = NULL;
    sp_podman_exec_spec xs = SP_PODMAN_EXEC_SPEC_INIT;
    expect(sp_podman_exec_create(&id, P, "c", &xs, &err), &err, SP_EINVAL, "command is missing");
    sp_podman_container_spec cs = SP_PODMAN_CONTAINER_SPEC_INIT;
    cs.image = "img";
    const char *env[] = {"NOEQUALS", NULL};
    cs.env = env;
    err = NULL;
    expect(sp_podman_container_create(&id, NULL, P, &cs, &err), &err, SP_EINVAL,
           "env must be KEY=VALUE: NOEQUALS");
    cs.env = NULL;
    sp_podman_mount m = {"relative", "/workspace", false};
    cs.mounts = &m;
    cs.n_mounts = 1;
    err = NULL;
    expect(sp_podman_container_create(&id, NULL, P, &cs, &err), &err, SP_EINVAL, "absolute paths");
    cs.n_mounts = 0;
    sp_podman_rlimit rl = {"nofile", 10, 5};
    cs.rlimits = &rl;
    cs.n_rlimits = 1;
    err = NULL;
    expect(sp_podman_container_create(&id, NULL, P, &cs, &err), &err, SP_EINVAL,
           "bad rlimit nofile");
    err = NULL;
    expect(sp_podman_archive_get(P, "c", "/x", -1, &err), &err, SP_EINVAL, "bad fd");
    err = NULL;
    expect(sp_podman_exec_resize(P, "e", 0, 0, &err), &err, SP_EINVAL, "bad size");
    err = NULL;
    expect(sp_podman_image_import(NULL, P, 0, NULL, NULL, &err), &err, SP_EINVAL, "tag");
    err = NULL;
    expect(
        sp_podman_image_build_busybox(NULL, P, "localhost/x:y", "/nonexistent/busybox", true, &err),
        &err, SP_ENOTFOUND, "apt-get install busybox-static");
    err = NULL;
    expect(sp_podman_image_build_busybox(NULL, P, "localhost/x:y", "/etc/passwd", true, &err), &err,
           SP_EINVAL, "not a 64-bit ELF");
    assert_null(id);
    sp_podman_free(NULL);
    sp_podman_version_free(NULL);
    sp_podman_container_info_free(NULL);
    sp_podman_containers_free(NULL);
}

/* /info is slow on a real service: it is kept in the state root, keyed by
 * the URL and the socket's inode and change time. */
static void test_host_info_cache(void **state)
{
    (void)state;
    char *root = tu_mkdtemp();
    sp_podman_opts o = SP_PODMAN_OPTS_INIT;
    o.url = URL;
    o.state_root = root;
    sp_podman *a = NULL;
    sp_error *err = NULL;
    const sp_podman_host *h = NULL;
    assert_int_equal(sp_podman_open(&a, &o, &err), 0);
    assert_int_equal(sp_podman_host_info(&h, a, &err), 0);
    assert_false(h->rootless);
    assert_string_equal(h->graph_root, "/var/lib/containers/storage");
    sp_podman_free(a);
    /* The file is there, private; a second handle reads it, not /info: an
     * edit of a fact shows. */
    DIR *d = opendir(root);
    char *cache = NULL;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strncmp(de->d_name, "podman-host-", 12) == 0)
            cache = tu_join(root, de->d_name);
    closedir(d);
    assert_non_null(cache);
    struct stat st;
    assert_int_equal(stat(cache, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    size_t len = 0;
    char *text = tu_read(root, strrchr(cache, '/') + 1, &len);
    char *at = strstr(text, "\"rootless\":false");
    assert_non_null(at);
    memcpy(at, "\"rootless\":true ", 16);
    int fd = open(cache, O_WRONLY | O_TRUNC | O_CLOEXEC);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    assert_int_equal(sp_podman_open(&a, &o, &err), 0);
    assert_int_equal(sp_podman_host_info(&h, a, &err), 0);
    assert_true(h->rootless);
    sp_podman_free(a);
    /* Another key (a service restarted on a new socket): /info again. */
    at = strstr(text, URL);
    assert_non_null(at);
    at[strlen(URL) - 1] ^= 1;
    fd = open(cache, O_WRONLY | O_TRUNC | O_CLOEXEC);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    assert_int_equal(sp_podman_open(&a, &o, &err), 0);
    assert_int_equal(sp_podman_host_info(&h, a, &err), 0);
    assert_false(h->rootless);
    sp_podman_free(a);
    free(text);
    free(cache);
    tu_rmtree(root);
    free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parser),
        cmocka_unit_test(test_urls),
        cmocka_unit_test(test_bodies),
        cmocka_unit_test(test_timeouts),
        cmocka_unit_test(test_streams),
        cmocka_unit_test(test_broken_streams),
        cmocka_unit_test(test_pull),
        cmocka_unit_test(test_pull_errors),
        cmocka_unit_test(test_pull_policy),
        cmocka_unit_test(test_debug_log),
        cmocka_unit_test(test_logs),
        cmocka_unit_test(test_start_hint),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_discovery_errors),
        cmocka_unit_test(test_host_info_cache),
    };
    signal(SIGPIPE, SIG_DFL); /* the client must never raise it */
    return cmocka_run_group_tests(tests, setup, teardown);
}
