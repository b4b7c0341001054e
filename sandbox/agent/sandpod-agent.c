/* sandpod-agent: pid 1 of a sandbox's container and its fast way to run
 * commands.
 *
 * As init it reaps every zombie (SIGCHLD, waitpid(-1)) and, on SIGTERM,
 * SIGINT or SIGHUP, passes the signal on to every process and exits. As a
 * spawner it listens on SPA_RUN_DIR/agent.sock, a folder the host
 * bind-mounts from the sandbox's state folder, and runs one command per
 * connection (see protocol.h): in a session and process group of its own,
 * on pipes or a pseudo-terminal, streaming its output back, and killing
 * its whole tree when the connection closes.
 *
 * Contract: the agent runs as the container's user, with the container's
 * (empty) capability sets and no-new-privileges; it only fork()s and
 * execve()s what a connection asks for, exactly as the workload itself
 * could. It opens no path but its socket, /dev/ptmx and a pty, and /proc of
 * the processes it kills. A malformed or hostile connection can only end
 * its own connection: every length is checked against SPA_MAX_FRAME before
 * anything is allocated, and each connection is served by a forked process,
 * so a stuck client never blocks another one or init.
 *
 * Statically linked, plain libc, no name service calls, so it runs in any
 * image. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "egress_proxy.h"
#include "protocol.h"

extern char **environ;

#define READ_CHUNK     65536
#define STDIN_QUEUE    (1u << 20) /* stop reading the host while this much input waits */
#define REQUEST_WAIT   10000      /* ms a new connection has to send its request */
#define DRAIN_KILLED   2000       /* ms to collect output after the group was killed */
#define DRAIN_IDLE     100        /* ms of quiet that end output collection after an exit */
#define DRAIN_MAX      1000       /* ... and the most it may take */
#define SHUTDOWN_GRACE 1500       /* ms children get after a forwarded SIGTERM */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int send_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

static int send_frame(int fd, int type, const void *payload, size_t len)
{
    uint8_t h[SPA_HEADER_LEN];
    put32(h, (uint32_t)len);
    h[4] = (uint8_t)type;
    if (len <= 4096) {
        uint8_t b[SPA_HEADER_LEN + 4096];
        memcpy(b, h, sizeof(h));
        if (len)
            memcpy(b + sizeof(h), payload, len);
        return send_all(fd, b, sizeof(h) + len);
    }
    return send_all(fd, h, sizeof(h)) < 0 ? -1 : send_all(fd, payload, len);
}

/* -------------------------------------------------------------- killing -- */

/* pgrp and session of a process, from /proc/<pid>/stat (the name field may
 * hold anything, so parsing starts after its last ')'). */
static bool read_stat(long pid, long *ppid, long *pgrp, long *sess)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p)
        return false;
    char state;
    return sscanf(p + 1, " %c %ld %ld %ld", &state, ppid, pgrp, sess) == 4;
}

/* Whether /proc/<pid>/environ holds the entry `marker` exactly. */
static bool environ_has(long pid, const char *marker)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld/environ", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    size_t ml = strlen(marker) + 1; /* with its NUL */
    static char buf[65536 + 4096];
    size_t keep = 0;
    bool hit = false;
    bool at_start = true; /* buf[0] begins an entry */
    for (;;) {
        ssize_t r = read(fd, buf + keep, 65536);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            /* The last entry may lack its NUL at the end of the file. */
            buf[keep] = '\0';
            if (keep + 1 >= ml && at_start && memcmp(buf, marker, ml) == 0)
                hit = true;
            break;
        }
        size_t len = keep + (size_t)r;
        size_t i = 0;
        while (i < len) {
            char *nul = memchr(buf + i, '\0', len - i);
            if (!nul)
                break;
            size_t el = (size_t)(nul - (buf + i)) + 1;
            if (el == ml && memcmp(buf + i, marker, ml) == 0) {
                hit = true;
                break;
            }
            i += el;
        }
        if (hit)
            break;
        /* An entry cut by the read: keep it (up to the marker's length). */
        keep = len - i;
        if (keep > 4096) {
            keep = 0; /* longer than any marker: it cannot match */
            at_start = false;
            /* skip to the next entry boundary in the following reads */
        } else {
            memmove(buf, buf + i, keep);
            at_start = true;
        }
    }
    close(fd);
    return hit;
}

/* SIGKILL every child of this process, in waves, until none is left (or
 * 2 s pass): the connection's process is the subreaper of its command
 * (serve()), so whatever the command started comes here when its parent
 * dies, however it forked and whatever session, group or environment it
 * made itself; each killed child's children are the next wave. `command`
 * is killed but not reaped: its status is the caller's to take. */
static void kill_children(pid_t command)
{
    long self = (long)getpid();
    int64_t end = now_ms() + 2000;
    for (;;) {
        pid_t wave[256];
        size_t n = 0;
        DIR *d = opendir("/proc");
        if (!d)
            return;
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            char *e = NULL;
            long pid = strtol(de->d_name, &e, 10), ppid = 0, pgrp, sess;
            if (pid <= 1 || *e || pid == self || !read_stat(pid, &ppid, &pgrp, &sess) ||
                ppid != self)
                continue;
            kill((pid_t)pid, SIGKILL);
            if (pid != command && n < sizeof(wave) / sizeof(wave[0]))
                wave[n++] = (pid_t)pid;
        }
        closedir(d);
        if (!n || now_ms() > end)
            return;
        bool reaped = false;
        for (size_t i = 0; i < n; i++)
            reaped |= waitpid(wave[i], NULL, WNOHANG) == wave[i];
        if (!reaped)
            usleep(2000);
    }
}

/* SIGKILL a command's whole tree: its process group, its session (a
 * terminal session), every process carrying `marker` in its environment
 * (two passes over /proc catch what forked during the first), then every
 * process it left behind (kill_children(); command: its pid while it has
 * not been reaped, else 0). */
static void kill_tree(pid_t leader, const char *marker, pid_t command)
{
    if (leader > 0)
        kill(-leader, SIGKILL);
    long self = (long)getpid();
    for (int pass = 0; pass < 2; pass++) {
        DIR *d = opendir("/proc");
        if (!d)
            return;
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            char *end = NULL;
            long pid = strtol(de->d_name, &end, 10);
            if (pid <= 1 || *end || pid == self)
                continue;
            long ppid = 0, pgrp = 0, sess = 0;
            if (!read_stat(pid, &ppid, &pgrp, &sess))
                continue;
            if ((leader > 0 && (pgrp == leader || sess == leader)) ||
                (marker && *marker && environ_has(pid, marker)))
                kill((pid_t)pid, SIGKILL);
        }
        closedir(d);
    }
    kill_children(command);
}

/* ------------------------------------------------------------- requests -- */

typedef struct request {
    uint32_t flags;
    unsigned short rows, cols;
    char *workdir;
    char *marker;
    char **argv;
    char **env;
} request;

typedef struct cursor {
    const uint8_t *p;
    size_t left;
    bool bad;
} cursor;

static uint32_t take32(cursor *c)
{
    if (c->left < 4) {
        c->bad = true;
        return 0;
    }
    uint32_t v = get32(c->p);
    c->p += 4;
    c->left -= 4;
    return v;
}

static char *take_str(cursor *c)
{
    uint32_t n = take32(c);
    if (c->bad || n > c->left || memchr(c->p, '\0', n)) {
        c->bad = true;
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (!s) {
        c->bad = true;
        return NULL;
    }
    memcpy(s, c->p, n);
    s[n] = '\0';
    c->p += n;
    c->left -= n;
    return s;
}

static char **take_strv(cursor *c, bool need_one)
{
    uint32_t n = take32(c);
    /* Each string costs at least 4 bytes, which bounds n by the frame. */
    if (c->bad || n > SPA_MAX_ARGS || n > c->left / 4 || (need_one && n == 0)) {
        c->bad = true;
        return NULL;
    }
    char **v = calloc((size_t)n + 1, sizeof(char *));
    if (!v) {
        c->bad = true;
        return NULL;
    }
    for (uint32_t i = 0; i < n && !c->bad; i++)
        v[i] = take_str(c);
    return v;
}

static bool parse_request(request *r, const uint8_t *p, size_t len)
{
    cursor c = {p, len, false};
    r->flags = take32(&c);
    uint32_t size = take32(&c);
    r->rows = (unsigned short)(size >> 16);
    r->cols = (unsigned short)(size & 0xffff);
    r->workdir = take_str(&c);
    r->marker = take_str(&c);
    if (!c.bad)
        r->argv = take_strv(&c, true);
    if (!c.bad)
        r->env = take_strv(&c, false);
    return !c.bad && c.left == 0;
}

/* The command's environment: the agent's own (the container's), with the
 * request's entries replacing those of the same name. */
static char **make_env(char **extra, bool tty)
{
    size_t n = 0, m = 0;
    while (environ && environ[n])
        n++;
    while (extra && extra[m])
        m++;
    char **v = calloc(n + m + 2, sizeof(char *));
    if (!v)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(environ[i], '=');
        size_t kl = eq ? (size_t)(eq - environ[i]) + 1 : strlen(environ[i]);
        bool replaced = false;
        for (size_t j = 0; j < m && !replaced; j++)
            replaced = strncmp(extra[j], environ[i], kl) == 0;
        if (!replaced)
            v[k++] = environ[i];
    }
    for (size_t j = 0; j < m; j++)
        v[k++] = extra[j];
    bool has_term = false;
    for (size_t i = 0; i < k; i++)
        has_term |= strncmp(v[i], "TERM=", 5) == 0;
    if (tty && !has_term)
        v[k++] = "TERM=xterm";
    v[k] = NULL;
    return v;
}

/* ----------------------------------------------------------- the child -- */

/* Tell the host, with the kernel vouching for our pid (SCM_CREDENTIALS is
 * translated into the receiver's pid namespace), that the command runs. */
static void send_started(int conn)
{
    uint8_t f[SPA_HEADER_LEN + 4];
    put32(f, 4);
    f[4] = SPA_STARTED;
    put32(f + SPA_HEADER_LEN, (uint32_t)getpid());
    struct iovec iov = {f, sizeof(f)};
    union {
        char buf[CMSG_SPACE(sizeof(struct ucred))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof(u));
    struct msghdr mh = {0};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = u.buf;
    mh.msg_controllen = sizeof(u.buf);
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_CREDENTIALS;
    cm->cmsg_len = CMSG_LEN(sizeof(struct ucred));
    struct ucred cr = {getpid(), getuid(), getgid()};
    memcpy(CMSG_DATA(cm), &cr, sizeof(cr));
    while (sendmsg(conn, &mh, MSG_NOSIGNAL) < 0 && errno == EINTR)
        ;
}

static void child_exec(const request *r, int conn, int in_fd, int out_fd, int err_fd,
                       const char *slave)
{
    sigset_t none;
    sigemptyset(&none);
    for (int s = 1; s < NSIG; s++)
        signal(s, SIG_DFL);
    sigprocmask(SIG_SETMASK, &none, NULL);
    setsid();
    if (slave) {
        int fd = open(slave, O_RDWR); /* the session's controlling terminal */
        if (fd < 0)
            _exit(126);
        ioctl(fd, TIOCSCTTY, 0);
        in_fd = out_fd = err_fd = fd;
    }
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
        _exit(126);
    send_started(conn);
    if (r->workdir && *r->workdir && chdir(r->workdir) < 0) {
        dprintf(2, "sandpod-agent: cannot enter %s: %s\n", r->workdir, strerror(errno));
        _exit(126);
    }
    char **env = make_env(r->env, slave != NULL);
    if (!env)
        _exit(126);
    environ = env; /* execvp looks PATH up here */
    execvp(r->argv[0], r->argv);
    int e = errno;
    /* The host tells "not found" and "cannot run" from the command's own
     * 127 and 126 by this frame; the line is for hosts that do not. The
     * parent sends nothing before this process execs or dies. */
    uint8_t f[SPA_HEADER_LEN + 4];
    put32(f, 4);
    f[4] = SPA_NOEXEC;
    put32(f + SPA_HEADER_LEN, (uint32_t)e);
    send_all(conn, f, sizeof(f));
    dprintf(2, "sandpod-agent: %s: %s\n", r->argv[0], strerror(e));
    _exit(e == ENOENT ? 127 : 126);
}

/* ---------------------------------------------------------- a connection -- */

typedef struct conn_state {
    int fd;
    uint8_t *in;
    size_t in_len, in_cap;
    /* stdin bytes not yet written to the command */
    uint8_t *q;
    size_t q_len, q_off;
    bool want_eof;
    int stdin_fd; /* -1 once closed; the pty master with a terminal */
    int out[2];   /* stdout, stderr (out[1] = -1 with a terminal) */
    int master;
    pid_t pid;
    bool exited;
    int status;
    bool host_gone;
} conn_state;

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static void queue_stdin(conn_state *c, const uint8_t *p, size_t n)
{
    if (c->q_off && c->q_off == c->q_len)
        c->q_len = c->q_off = 0;
    uint8_t *nq = realloc(c->q, c->q_len + n);
    if (!nq)
        return; /* input dropped rather than the agent */
    c->q = nq;
    memcpy(c->q + c->q_len, p, n);
    c->q_len += n;
}

static void flush_stdin(conn_state *c)
{
    while (c->stdin_fd >= 0 && c->q_off < c->q_len) {
        ssize_t w = write(c->stdin_fd, c->q + c->q_off, c->q_len - c->q_off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            return;
        if (w <= 0) { /* the command closed its stdin */
            c->q_off = c->q_len;
            if (c->master < 0)
                close_fd(&c->stdin_fd);
            return;
        }
        c->q_off += (size_t)w;
    }
    if (c->q_off == c->q_len && c->want_eof && c->master < 0)
        close_fd(&c->stdin_fd);
}

/* Act on one frame from the host; false ends the connection. */
static bool on_frame(conn_state *c, int type, const uint8_t *p, size_t n, const request *r)
{
    switch (type) {
    case SPA_STDIN:
        if (c->stdin_fd >= 0 && !c->want_eof)
            queue_stdin(c, p, n);
        return true;
    case SPA_STDIN_EOF:
        c->want_eof = true;
        return true;
    case SPA_RESIZE:
        if (n == 4 && c->master >= 0) {
            struct winsize ws = {0};
            ws.ws_row = (unsigned short)(get32(p) >> 16);
            ws.ws_col = (unsigned short)(get32(p) & 0xffff);
            ioctl(c->master, TIOCSWINSZ, &ws);
        }
        return true;
    case SPA_SIGNAL:
        if (n == 4 && get32(p) > 0 && get32(p) < 65 && !c->exited)
            kill(-c->pid, (int)get32(p));
        return true;
    case SPA_KILL:
        kill_tree(c->exited ? 0 : c->pid, r->marker, c->exited ? 0 : c->pid);
        if (c->exited)
            kill(-c->pid, SIGKILL);
        return true;
    default:
        return false;
    }
}

/* Read what the host sent and act on every whole frame. */
static bool read_host(conn_state *c, const request *r)
{
    if (c->in_cap - c->in_len < READ_CHUNK) {
        size_t cap = c->in_len + READ_CHUNK;
        uint8_t *ni = realloc(c->in, cap);
        if (!ni)
            return false;
        c->in = ni;
        c->in_cap = cap;
    }
    ssize_t got = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
    if (got < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (got <= 0)
        return false;
    c->in_len += (size_t)got;
    size_t off = 0;
    bool ok = true;
    while (ok && c->in_len - off >= SPA_HEADER_LEN) {
        uint32_t n = get32(c->in + off);
        if (n > SPA_MAX_FRAME)
            return false;
        if (c->in_len - off < SPA_HEADER_LEN + (size_t)n)
            break;
        ok = on_frame(c, c->in[off + 4], c->in + off + SPA_HEADER_LEN, n, r);
        off += SPA_HEADER_LEN + n;
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
    return ok;
}

/* Read a whole first frame (the request) within REQUEST_WAIT ms. */
static uint8_t *read_request(int fd, size_t *len)
{
    uint8_t h[SPA_HEADER_LEN];
    size_t got = 0, want = sizeof(h);
    uint8_t *body = NULL;
    int64_t end = now_ms() + REQUEST_WAIT;
    while (got < want) {
        int left = (int)(end - now_ms());
        struct pollfd pfd = {fd, POLLIN, 0};
        if (left <= 0 || poll(&pfd, 1, left) <= 0)
            goto fail;
        uint8_t *dst = body ? body + (got - sizeof(h)) : h + got;
        size_t room = body ? want - got : sizeof(h) - got;
        ssize_t r = read(fd, dst, room);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            goto fail;
        got += (size_t)r;
        if (!body && got == sizeof(h)) {
            uint32_t n = get32(h);
            if (h[4] != SPA_REQUEST || n > SPA_MAX_FRAME || n == 0)
                goto fail;
            body = malloc(n);
            if (!body)
                goto fail;
            want = sizeof(h) + n;
        }
    }
    *len = want - sizeof(h);
    return body;
fail:
    free(body);
    return NULL;
}

static pid_t fork_retry(bool is_init);

static void serve(int fd)
{
    size_t len = 0;
    uint8_t *raw = read_request(fd, &len);
    request r = {0};
    if (!raw || !parse_request(&r, raw, len))
        _exit(0);
    free(raw);

    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    /* Whatever the command starts and leaves (a double fork, a setsid, an
     * emptied environment) comes to this process, not to init: a kill can
     * then find all of it (kill_children()). */
    prctl(PR_SET_CHILD_SUBREAPER, 1);

    conn_state c = {.fd = fd, .stdin_fd = -1, .out = {-1, -1}, .master = -1};
    int in_p[2] = {-1, -1}, out_p[2] = {-1, -1}, err_p[2] = {-1, -1};
    char slave[128] = "";
    bool tty = r.flags & SPA_F_TTY;
    if (tty) {
        c.master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (c.master < 0 || grantpt(c.master) < 0 || unlockpt(c.master) < 0 ||
            ptsname_r(c.master, slave, sizeof(slave)) != 0) {
            char m[160];
            int n = snprintf(m, sizeof(m), "no pseudo-terminal: %s", strerror(errno));
            send_frame(fd, SPA_FAILED, m, (size_t)n);
            _exit(0);
        }
        struct winsize ws = {0};
        ws.ws_row = r.rows ? r.rows : 24;
        ws.ws_col = r.cols ? r.cols : 80;
        ioctl(c.master, TIOCSWINSZ, &ws);
        c.stdin_fd = c.out[0] = c.master;
    } else if (pipe2(in_p, O_CLOEXEC) < 0 || pipe2(out_p, O_CLOEXEC) < 0 ||
               pipe2(err_p, O_CLOEXEC) < 0) {
        send_frame(fd, SPA_FAILED, "pipe failed", 11);
        _exit(0);
    }
    int sync[2];
    if (pipe2(sync, O_CLOEXEC) < 0) {
        send_frame(fd, SPA_FAILED, "pipe failed", 11);
        _exit(0);
    }
    c.pid = fork_retry(false);
    if (c.pid < 0) {
        char m[160];
        int n = snprintf(m, sizeof(m), "fork: %s", strerror(errno));
        send_frame(fd, SPA_FAILED, m, (size_t)n);
        _exit(0);
    }
    if (c.pid == 0) {
        close(sync[0]);
        child_exec(&r, fd, in_p[0], out_p[1], err_p[1], tty ? slave : NULL);
    }
    close(sync[1]);
    /* Nothing goes to the host before the child's STARTED frame: wait
     * until it execs (or dies), which closes the pipe. */
    char b;
    while (read(sync[0], &b, 1) < 0 && errno == EINTR)
        ;
    close(sync[0]);
    if (!tty) {
        close(in_p[0]);
        close(out_p[1]);
        close(err_p[1]);
        c.stdin_fd = in_p[1];
        c.out[0] = out_p[0];
        c.out[1] = err_p[0];
    }
    fcntl(c.stdin_fd, F_SETFL, fcntl(c.stdin_fd, F_GETFL) | O_NONBLOCK);

    static uint8_t buf[READ_CHUNK];
    int64_t drain_end = 0, idle_end = 0;
    for (;;) {
        if (c.exited && (c.out[0] < 0 && c.out[1] < 0))
            break;
        int64_t now = now_ms();
        if (c.exited && (now >= drain_end || (idle_end && now >= idle_end)))
            break;
        struct pollfd pfd[4];
        int kinds[4];
        nfds_t n = 0;
        if (!c.host_gone && c.q_len - c.q_off < STDIN_QUEUE) {
            pfd[n] = (struct pollfd){fd, POLLIN, 0};
            kinds[n++] = 0;
        }
        for (int k = 0; k < 2; k++) {
            if (c.out[k] >= 0) {
                short ev = POLLIN;
                if (k == 0 && c.master >= 0 && c.q_off < c.q_len)
                    ev |= POLLOUT;
                pfd[n] = (struct pollfd){c.out[k], ev, 0};
                kinds[n++] = 1 + k;
            }
        }
        if (c.master < 0 && c.stdin_fd >= 0 && c.q_off < c.q_len) {
            pfd[n] = (struct pollfd){c.stdin_fd, POLLOUT, 0};
            kinds[n++] = 3;
        }
        if (!c.exited) {
            pfd[n] = (struct pollfd){sfd, POLLIN, 0};
            kinds[n++] = 4;
        }
        int wait = -1;
        if (c.exited) {
            int64_t until = idle_end && idle_end < drain_end ? idle_end : drain_end;
            wait = (int)(until - now);
        }
        int pr = poll(pfd, n, wait);
        if (pr < 0 && errno != EINTR)
            break;
        for (nfds_t i = 0; pr > 0 && i < n; i++) {
            if (!pfd[i].revents)
                continue;
            if (kinds[i] == 0) {
                if (!read_host(&c, &r)) {
                    /* The host is gone or broke the protocol: the command
                     * and all it started go. */
                    c.host_gone = true;
                    kill_tree(c.exited ? 0 : c.pid, r.marker, c.exited ? 0 : c.pid);
                    if (c.exited)
                        kill(-c.pid, SIGKILL);
                }
                flush_stdin(&c);
            } else if (kinds[i] == 1 || kinds[i] == 2) {
                int k = kinds[i] - 1;
                if ((pfd[i].revents & POLLOUT) && c.master >= 0)
                    flush_stdin(&c);
                if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                    continue;
                ssize_t got = read(c.out[k], buf, sizeof(buf));
                if (got < 0 && (errno == EINTR || errno == EAGAIN))
                    continue;
                if (got <= 0) { /* EOF, or EIO once no one holds the terminal */
                    if (c.master >= 0 && k == 0) {
                        c.stdin_fd = -1;
                        c.master = -1;
                    }
                    close_fd(&c.out[k]);
                    continue;
                }
                if (!c.host_gone &&
                    send_frame(fd, k == 0 ? SPA_STDOUT : SPA_STDERR, buf, (size_t)got) < 0) {
                    c.host_gone = true;
                    kill_tree(c.exited ? 0 : c.pid, r.marker, c.exited ? 0 : c.pid);
                }
                if (c.exited)
                    idle_end = now_ms() + DRAIN_IDLE;
            } else if (kinds[i] == 3) {
                flush_stdin(&c);
            } else if (kinds[i] == 4) {
                struct signalfd_siginfo si;
                while (read(sfd, &si, sizeof(si)) > 0)
                    ;
                /* The command, and what it left behind (this process is
                 * their subreaper): every child is reaped, the command's
                 * status kept. */
                pid_t w;
                int st = 0;
                bool now_exited = false;
                while ((w = waitpid(-1, &st, WNOHANG)) > 0)
                    if (w == c.pid && !c.exited) {
                        c.status = st;
                        c.exited = now_exited = true;
                    }
                if (now_exited) {
                    int64_t t = now_ms();
                    if ((r.flags & SPA_F_KILL_ON_EXIT) || c.host_gone) {
                        /* What the command left goes too (its group, and
                         * whatever it started); its output then ends as the
                         * pipes close. */
                        kill(-c.pid, SIGKILL);
                        kill_children(0);
                        drain_end = t + DRAIN_KILLED;
                    } else {
                        drain_end = t + DRAIN_MAX;
                        idle_end = t + DRAIN_IDLE;
                    }
                }
            }
        }
        if (c.host_gone && c.exited)
            break;
    }
    if (!c.host_gone) {
        uint8_t st[4];
        put32(st, (uint32_t)c.status);
        send_frame(fd, SPA_EXIT, st, sizeof(st));
    }
    _exit(0);
}

/* ----------------------------------------------------------------- init -- */

static int listen_on(const char *dir)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dir, SPA_SOCKET_NAME);
    if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
        return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    unlink(sa.sun_path);
    mode_t old = umask(0077);
    int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (r < 0 || listen(fd, 128) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The egress relay (egress_proxy.h), a child of init, started again when
 * it ends (at most once a second: a relay that cannot listen is not
 * spun). */
static pid_t relay_pid = -1;
static int64_t relay_started;

static void start_relay(void)
{
    char sock[256];
    snprintf(sock, sizeof(sock), "%s/%s", SPA_EGRESS_DIR, SP_EGRESS_SOCKET);
    if (access(SPA_EGRESS_DIR, F_OK) != 0 || now_ms() - relay_started < 1000)
        return;
    relay_started = now_ms();
    pid_t p = fork();
    if (p == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        _exit(sp_egress_relay_run(SP_EGRESS_PORT, sock));
    }
    relay_pid = p;
}

static void reap(void)
{
    pid_t p;
    while ((p = waitpid(-1, NULL, WNOHANG)) > 0)
        if (p == relay_pid)
            relay_pid = -1;
}

/* fork(), retried for a while on EAGAIN: right after a command hit the
 * pids limit, its killed processes are still zombies waiting for init. */
static pid_t fork_retry(bool is_init)
{
    int64_t end = now_ms() + 2000;
    for (;;) {
        pid_t p = fork();
        if (p >= 0 || errno != EAGAIN || now_ms() >= end)
            return p;
        if (is_init)
            reap();
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Pass a stop signal on to every process we may signal, give them a
 * moment, then leave (the kernel kills what is left with pid 1). */
/* The container's log (sandpod logs NAME) says when commands could start. */
static void said_listening(const char *dir)
{
    dprintf(1, "sandpod-agent: ready, listening on %s/%s\n", dir, SPA_SOCKET_NAME);
}

static void shut_down(int sig)
{
    dprintf(1, "sandpod-agent: stopping on signal %d\n", sig);
    /* kill(-1) reaches every process we may signal: right for the init of
     * a pid namespace, a disaster anywhere else (a test run on the host). */
    if (getpid() == 1)
        kill(-1, sig);
    int64_t end = now_ms() + SHUTDOWN_GRACE;
    while (now_ms() < end) {
        pid_t p = waitpid(-1, NULL, WNOHANG);
        if (p < 0 && errno == ECHILD)
            break;
        if (p <= 0) {
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    _exit(0);
}

/* sandpod-agent --egress-proxy DIR RUN [--max-connections N] [--resolv-conf FILE]
 *               [--listen PORT] */
static int egress_proxy_main(int argc, char **argv)
{
    sp_egress_proxy_opts o = {.dir = argc > 3 ? argv[2] : NULL,
                              .run_dir = argc > 3 ? argv[3] : NULL};
    for (int i = 4; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--max-connections") == 0)
            o.max_conns = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--resolv-conf") == 0)
            o.resolv_conf = argv[i + 1];
        else if (strcmp(argv[i], "--listen") == 0 && strtoul(argv[i + 1], NULL, 10) - 1 < 65535)
            o.listen_port = (uint16_t)strtoul(argv[i + 1], NULL, 10);
        else
            o.dir = NULL;
    }
    if (!o.dir || argc % 2) {
        dprintf(2, "usage: sandpod-agent --egress-proxy POLICY-DIR RUN-DIR [--max-connections N] "
                   "[--resolv-conf FILE] [--listen PORT]\n");
        return 2;
    }
    return sp_egress_proxy_run(&o);
}

int main(int argc, char **argv)
{
    /* The egress proxy's container runs this binary too; the relay mode
     * alone is for tests (init starts the relay itself). */
    if (argc > 1 && strcmp(argv[1], "--egress-proxy") == 0)
        return egress_proxy_main(argc, argv);
    if (argc == 4 && strcmp(argv[1], "--egress-relay") == 0)
        return sp_egress_relay_run((uint16_t)strtoul(argv[2], NULL, 10), argv[3]);
    const char *dir = argc > 1 ? argv[1] : SPA_RUN_DIR;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    signal(SIGPIPE, SIG_IGN);
    /* Outside a container (tests), still reap what commands leave behind. */
    if (getpid() != 1)
        prctl(PR_SET_CHILD_SUBREAPER, 1);
    /* Without its socket (a folder it may not write), it is still init.
     * The host hands the folder over right after the start: keep trying,
     * often at first, then now and then. */
    int lfd = listen_on(dir);
    if (lfd >= 0)
        said_listening(dir);
    int64_t started = now_ms();
    start_relay();
    for (;;) {
        if (relay_pid < 0)
            start_relay();
        struct pollfd pfd[2] = {{sfd, POLLIN, 0}, {lfd, POLLIN, 0}};
        int wait = lfd >= 0                     ? (relay_pid < 0 && relay_started ? 1000 : -1)
                   : now_ms() - started < 10000 ? 5
                                                : 1000;
        int pr = poll(pfd, lfd >= 0 ? 2 : 1, wait);
        if (lfd < 0 && (lfd = listen_on(dir)) >= 0)
            said_listening(dir);
        if (pr <= 0)
            continue;
        if (pfd[0].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                if (si.ssi_signo == SIGCHLD)
                    reap();
                else
                    shut_down((int)si.ssi_signo);
            }
            reap();
        }
        if (lfd >= 0 && (pfd[1].revents & POLLIN)) {
            int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (c < 0)
                continue;
            pid_t p = fork_retry(true);
            if (p == 0) {
                close(lfd);
                close(sfd);
                sigset_t keep;
                sigemptyset(&keep);
                sigaddset(&keep, SIGCHLD);
                sigprocmask(SIG_SETMASK, &keep, NULL);
                signal(SIGTERM, SIG_DFL);
                signal(SIGINT, SIG_DFL);
                signal(SIGHUP, SIG_DFL);
                serve(c);
            }
            close(c); /* on a failed fork the host sees the connection end */
        }
    }
}
