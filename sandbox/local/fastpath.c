/* The exec fast path, host side: one unix-socket connection to
 * sandpod-agent (the container's pid 1) per command. See
 * sandbox/agent/protocol.h for the frames.
 *
 * The socket lives in <state_dir>/agent/run/, bind-mounted at
 * /.sandpod/run; the host connects to the same inode (sp_fast_connect()
 * says how it makes sure it is the agent's). A connect that fails
 * (no agent in this container, a stopped container's stale socket) is
 * SP_ENOTFOUND, which sends the caller to the REST path. */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "local_state.h"
#include "fastpath.h"
#include "agent/protocol.h"
#include "local_kind.h"
#include "sandbox_internal.h"

/* How long the agent may take to start a command once connected; longer
 * means a paused or overloaded container. */
#define START_WAIT_MS 5000
/* How long one frame may take to send. */
#define SEND_WAIT_MS 10000
#define READ_CHUNK   65536

struct sp_fast {
    int fd;
    char *box; /* sandbox name, for messages */
    /* Received bytes not yet handed out, from in_off. */
    uint8_t *in;
    size_t in_len, in_cap, in_off;
    bool eof;
    bool exited;
    int status;
    int pid;      /* in the container */
    int host_pid; /* from SCM_CREDENTIALS */
    int noexec;   /* errno of the agent's execvp, 0 = none */
    bool split;   /* the frame at in_off is the rest of one handed out in part */
};

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

char *sp_fast_run_dir(const sp_sandbox *sb)
{
    return sp_xasprintf("%s/agent/run", sb->state_dir);
}

sp_exec_path sp_fast_mode(const sp_sandbox *sb)
{
    if (sb->cfg.exec_path != SP_EXEC_AUTO)
        return sb->cfg.exec_path;
    /* For programs (and the CLI) that set nothing: the environment. */
    const char *e = getenv("SANDPOD_EXEC_PATH");
    if (e && strcmp(e, "rest") == 0)
        return SP_EXEC_REST;
    if (e && strcmp(e, "fast") == 0)
        return SP_EXEC_FAST;
    return SP_EXEC_AUTO;
}

sp_exec_path sp_sandbox_exec_path(char **reason, const sp_sandbox *sb)
{
    char *why = NULL;
    sp_exec_path path = sb->kind->exec_path(&why, sb);
    if (reason)
        *reason = why;
    else
        free(why);
    return path;
}

sp_exec_path sp_local_exec_path(char **reason, const sp_sandbox *sb)
{
    sp_exec_path path = SP_EXEC_REST;
    char *why = NULL;
    sp_exec_path mode = sp_fast_mode(sb);
    const char *by =
        sb->cfg.exec_path != SP_EXEC_AUTO ? "the sandbox's exec_path" : "SANDPOD_EXEC_PATH";
    if (sb->agent_socket) {
        path = SP_EXEC_FAST;
        why = sp_xasprintf("agent socket %s", sb->agent_socket);
    } else if (mode == SP_EXEC_REST) {
        why = sp_xasprintf("%s=rest", by);
    } else if (sb->cfg.agent) {
        path = SP_EXEC_FAST;
        why = sb->cfg.agent_source ? sp_xasprintf("agent %s", sb->cfg.agent_source)
                                   : sp_xstrdup("agent");
    } else if (mode == SP_EXEC_FAST) {
        /* sp_cmd_start_fast() then fails rather than fall back. */
        path = SP_EXEC_FAST;
        why = sp_xasprintf("%s=fast, but the container runs no agent: commands fail", by);
    } else {
        why = sp_xstrdup(sb->cfg.agent_missing ? sb->cfg.agent_missing
                                               : "the container was made without sandpod-agent");
    }
    *reason = why;
    return path;
}

bool sp_fast_wanted(const sp_sandbox *sb, const char *user)
{
    sp_exec_path mode = sp_fast_mode(sb);
    if (mode == SP_EXEC_REST)
        return false;
    if (mode == SP_EXEC_AUTO && !sb->cfg.agent)
        return false;
    /* The agent runs as the sandbox's user and cannot switch. */
    return !user || !sb->cfg.user || strcmp(user, sb->cfg.user) == 0;
}

/* ---------------------------------------------------------------- sending -- */

static int send_all(sp_fast *f, const void *data, size_t len, sp_error **err)
{
    const char *p = data;
    int64_t end = sp_now_ms() + SEND_WAIT_MS;
    while (len) {
        ssize_t w = send(f->fd, p, len, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            len -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN) {
            int left = (int)(end - sp_now_ms());
            struct pollfd pfd = {.fd = f->fd, .events = POLLOUT};
            if (left > 0 && poll(&pfd, 1, left) >= 0)
                continue;
            return sp_err_set(err, SP_ETIMEOUT, 0,
                              "the exec agent of sandbox %s takes no input (the command does "
                              "not read its stdin)",
                              f->box);
        }
        return sp_err_set(err, SP_EPODMAN, errno, "lost the exec agent of sandbox %s: %s", f->box,
                          strerror(errno));
    }
    return 0;
}

static int send_frame(sp_fast *f, int type, const void *payload, size_t len, sp_error **err)
{
    sp_log(SP_LOG_DEBUG, "agent: sent frame %c, %zu bytes", type, len);
    uint8_t h[SPA_HEADER_LEN];
    put32(h, (uint32_t)len);
    h[4] = (uint8_t)type;
    int r = send_all(f, h, sizeof(h), err);
    return r < 0 || !len ? r : send_all(f, payload, len, err);
}

static void add32(sp_buf *b, uint32_t v)
{
    uint8_t x[4];
    put32(x, v);
    sp_buf_add(b, x, 4);
}

static void add_str(sp_buf *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    add32(b, (uint32_t)n);
    sp_buf_add(b, s ? s : "", n);
}

static void add_strv(sp_buf *b, const char *const *v)
{
    uint32_t n = 0;
    while (v && v[n])
        n++;
    add32(b, n);
    for (uint32_t i = 0; i < n; i++)
        add_str(b, v[i]);
}

/* -------------------------------------------------------------- receiving -- */

/* Read what the socket has (waiting up to timeout_ms for something); with
 * creds, note the sender's pid of the first bytes. 0, SP_ETIMEOUT, or
 * SP_EPODMAN on a broken connection. EOF sets f->eof. */
static int fill(sp_fast *f, int timeout_ms, int *cred_pid)
{
    if (f->eof)
        return 0;
    struct pollfd pfd = {.fd = f->fd, .events = POLLIN};
    int pr = poll(&pfd, 1, timeout_ms);
    if (pr == 0)
        return SP_ETIMEOUT;
    if (pr < 0)
        return errno == EINTR ? SP_ETIMEOUT : SP_EPODMAN;
    if (f->in_off && f->in_off == f->in_len)
        f->in_len = f->in_off = 0;
    if (f->in_off > f->in_cap / 2) {
        memmove(f->in, f->in + f->in_off, f->in_len - f->in_off);
        f->in_len -= f->in_off;
        f->in_off = 0;
    }
    if (f->in_cap - f->in_len < READ_CHUNK) {
        f->in_cap = f->in_len + READ_CHUNK;
        f->in = sp_xrealloc(f->in, f->in_cap);
    }
    struct iovec iov = {f->in + f->in_len, f->in_cap - f->in_len};
    union {
        char buf[CMSG_SPACE(sizeof(struct ucred))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {0};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (cred_pid) {
        mh.msg_control = u.buf;
        mh.msg_controllen = sizeof(u.buf);
    }
    ssize_t got = recvmsg(f->fd, &mh, MSG_CMSG_CLOEXEC);
    if (got < 0)
        return errno == EAGAIN || errno == EINTR ? SP_ETIMEOUT : SP_EPODMAN;
    if (got == 0) {
        f->eof = true;
        return 0;
    }
    if (cred_pid && !*cred_pid) {
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
                struct ucred cr;
                memcpy(&cr, CMSG_DATA(c), sizeof(cr));
                *cred_pid = cr.pid;
            }
        }
    }
    f->in_len += (size_t)got;
    return 0;
}

/* The frame at in_off when it is whole: its type, payload and length. */
static bool whole_frame(const sp_fast *f, int *type, uint8_t **payload, size_t *len)
{
    size_t avail = f->in_len - f->in_off;
    if (avail < SPA_HEADER_LEN)
        return false;
    uint32_t n = get32(f->in + f->in_off);
    if (avail < SPA_HEADER_LEN + (size_t)n)
        return false;
    *type = f->in[f->in_off + 4];
    *payload = f->in + f->in_off + SPA_HEADER_LEN;
    *len = n;
    return true;
}

static bool frame_too_long(const sp_fast *f)
{
    return f->in_len - f->in_off >= SPA_HEADER_LEN && get32(f->in + f->in_off) > SPA_MAX_FRAME;
}

/* ------------------------------------------------------------------ start -- */

/* Connect to the socket `name` in the folder rd, by inode: the name is
 * opened O_PATH | O_NOFOLLOW (a symlink is -ELOOP), must be a socket (and
 * owned by uid `owner` unless it is -1), and connect() goes through that
 * fd (/proc/self/fd/N), so nothing is followed between the check and the
 * use. *cred gets the listener's SO_PEERCRED. */
static int connect_inode(int *out, struct ucred *cred, int rd, const char *name, int64_t owner)
{
    cleanup_close int sk = openat(rd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (sk < 0)
        return -errno;
    struct stat st;
    if (fstat(sk, &st) < 0)
        return -errno;
    if (S_ISLNK(st.st_mode))
        return -ELOOP;
    if (!S_ISSOCK(st.st_mode))
        return -ENOTSOCK;
    if (owner >= 0 && (int64_t)st.st_uid != owner)
        return -EPERM;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", sk);
    cleanup_close int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return -errno;
    socklen_t len = sizeof(*cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &len) < 0)
        return -errno;
    *out = steal_fd(&fd);
    return 0;
}

/* An agent-only handle's connect (sp_sandbox_open_agent()). The folder
 * holding the socket is shared with the workload (an emptyDir in a Pod),
 * which may put anything under the name: the folder and the name are
 * opened O_NOFOLLOW, the name must be a socket its uid owns, and the
 * listener must run as that uid and not be us. The pid SO_PEERCRED gives
 * is 0 when the agent's PID namespace is not ours (a Pod's containers):
 * it is never matched against anything. */
static int agent_connect(int *out, sp_sandbox *sb)
{
    const char *path = sb->agent_socket;
    const char *slash = strrchr(path, '/');
    cleanup_free char *dir = slash ? sp_xstrndup(path, (size_t)(slash - path)) : sp_xstrdup(".");
    cleanup_close int rd = open(*dir ? dir : "/", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rd < 0)
        return -errno;
    struct ucred cred;
    cleanup_close int fd = -1;
    int r = connect_inode(&fd, &cred, rd, slash ? slash + 1 : path, sb->agent_uid);
    if (r < 0)
        return r;
    if ((int64_t)cred.uid != sb->agent_uid || cred.pid == getpid())
        return -EPERM;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    *out = steal_fd(&fd);
    return 0;
}

/* Contract: connects to the socket *inode* in <state_dir>/agent/run and
 * only when the peer is the sandbox's own pid 1. The run folder is the
 * workload's (bind-mounted at /.sandpod/run), so the name agent.sock may be
 * anything at any moment: a symlink to another sandbox's socket or to the
 * Podman socket, a socket the workload bound itself. The folder is reached
 * from our own state folder with O_NOFOLLOW; the name is opened O_PATH |
 * O_NOFOLLOW and must be a socket; connect() goes through that fd
 * (/proc/self/fd/N), so nothing is followed between the check and the use;
 * then SO_PEERCRED must name the process that is pid 1 of the container
 * (the pid saved at start, asked from Podman again once per handle when it
 * differs: the container was restarted behind our back). */
int sp_fast_connect(int *out, sp_sandbox *sb)
{
    *out = -1;
    if (sb->agent_socket)
        return agent_connect(out, sb);
    cleanup_free char *agent_dir = sp_xasprintf("%s/agent", sb->state_dir);
    cleanup_close int ad = open(agent_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (ad < 0)
        return -errno;
    cleanup_close int rd = openat(ad, "run", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rd < 0)
        return -errno;
    struct ucred cred;
    cleanup_close int fd = -1;
    int r = connect_inode(&fd, &cred, rd, SPA_SOCKET_NAME, -1);
    if (r < 0)
        return r == -ELOOP ? -ENOTSOCK : r;
    if (cred.pid != sb->init_pid && sp_sandbox_refresh_init_pid(sb) < 0)
        return -ESRCH;
    if (cred.pid <= 0 || cred.pid != sb->init_pid)
        return -EPERM; /* not the sandbox's agent: never talk to it */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    *out = steal_fd(&fd);
    return 0;
}

int sp_fast_start(sp_fast **out, sp_sandbox *sb, const sp_fast_spec *spec, sp_error **err)
{
    *out = NULL;
    int fd = -1;
    int c = sp_fast_connect(&fd, sb);
    if (c < 0 && sb->agent_socket)
        return sp_err_set(err, SP_ENOTFOUND, -c, "cannot use the workload's agent at %s: %s",
                          sb->agent_socket,
                          c == -ELOOP      ? "it is a symbolic link"
                          : c == -ENOTSOCK ? "it is not a socket"
                          : c == -EPERM    ? "another uid than the workload's owns or serves it "
                                             "(or this process does)"
                          : c == -ENOENT   ? "no such socket (is the workload's agent running?)"
                                           : strerror(-c));
    if (c < 0)
        return sp_err_set(err, SP_ENOTFOUND, -c,
                          "the exec agent of sandbox %s does not answer (%s)", sb->name,
                          strerror(-c));
    sp_fast *f = sp_xcalloc(1, sizeof(*f));
    f->fd = fd;
    f->box = sp_xstrdup(sb->name);

    sp_buf req = SP_BUF_INIT;
    add32(&req, (spec->tty ? SPA_F_TTY : 0) | (spec->kill_on_exit ? SPA_F_KILL_ON_EXIT : 0));
    add32(&req, (uint32_t)(spec->rows & 0xffff) << 16 | (spec->cols & 0xffff));
    add_str(&req, spec->workdir);
    add_str(&req, spec->kill_marker);
    add_strv(&req, spec->argv);
    add_strv(&req, spec->env);
    int r = req.len > SPA_MAX_FRAME
                ? sp_err_set(err, SP_ETOOBIG, 0, "command and environment exceed %u bytes",
                             SPA_MAX_FRAME)
                : send_frame(f, SPA_REQUEST, req.data, req.len, err);
    sp_buf_dispose(&req);
    if (r < 0) {
        /* Nothing was started: let an automatic caller take the REST path. */
        if (r == SP_EPODMAN && err && *err)
            (*err)->code = r = SP_ENOTFOUND;
        goto fail;
    }

    /* The first frame: STARTED, sent by the command's process itself.
     * Until it comes nothing has run, so a lost connection is reported as
     * SP_ENOTFOUND (the agent cannot be used) and callers under
     * SP_EXEC_AUTO fall back to REST. */
    int64_t end = sp_now_ms() + START_WAIT_MS;
    int cred = 0;
    for (;;) {
        int type;
        uint8_t *p;
        size_t n;
        if (whole_frame(f, &type, &p, &n)) {
            sp_log(SP_LOG_DEBUG, "agent: received frame %c, %zu bytes", type, n);
            if (type == SPA_STARTED && n == 4) {
                f->pid = (int)get32(p);
                /* Across PID namespaces a pid names nothing of ours. */
                f->host_pid = sb->agent_socket ? 0 : cred;
                f->in_off += SPA_HEADER_LEN + n;
                break;
            }
            cleanup_free char *msg =
                type == SPA_FAILED ? sp_xstrndup((const char *)p, n) : sp_xstrdup("bad answer");
            r = sp_err_set(err, SP_EPODMAN, 0, "sandbox %s: the exec agent cannot run it: %s",
                           sb->name, msg);
            goto fail;
        }
        if (f->eof || frame_too_long(f)) {
            r = sp_err_set(err, SP_ENOTFOUND, 0,
                           "sandbox %s: the exec agent closed the connection before the command "
                           "started (too many processes?)",
                           sb->name);
            goto fail;
        }
        int left = (int)(end - sp_now_ms());
        if (left <= 0) {
            r = sp_err_set(err, SP_ETIMEOUT, 0,
                           "sandbox %s: the exec agent did not start the command within %d ms",
                           sb->name, START_WAIT_MS);
            goto fail;
        }
        int fr = fill(f, left, &cred);
        if (fr == SP_EPODMAN) {
            r = sp_err_set(err, SP_ENOTFOUND, errno,
                           "lost the exec agent of sandbox %s before the command started",
                           sb->name);
            goto fail;
        }
    }
    *out = f;
    return 0;
fail:
    sp_fast_free(f);
    return r;
}

/* ---------------------------------------------------------------- running -- */

int sp_fast_fd(const sp_fast *f)
{
    return f->fd;
}

bool sp_fast_buffered(const sp_fast *f)
{
    int type;
    uint8_t *p;
    size_t n;
    return whole_frame(f, &type, &p, &n) || (f->eof && !f->exited);
}

int sp_fast_read(size_t *out_len, int *stream, sp_fast *f, void *buf, size_t cap, int timeout_ms,
                 sp_error **err)
{
    *out_len = 0;
    int64_t end = timeout_ms < 0 ? INT64_MAX : sp_now_ms() + timeout_ms;
    bool tried = false;
    for (;;) {
        if (f->exited)
            return 0;
        int type;
        uint8_t *p;
        size_t n;
        while (whole_frame(f, &type, &p, &n)) {
            if (!f->split)
                sp_log(SP_LOG_DEBUG, "agent: received frame %c, %zu bytes", type, n);
            f->split = false;
            if (type == SPA_EXIT) {
                f->status = n == 4 ? (int)get32(p) : 0;
                f->exited = true;
                f->in_off += SPA_HEADER_LEN + n;
                return 0;
            }
            if (type == SPA_NOEXEC && n == 4)
                f->noexec = (int)get32(p);
            if ((type != SPA_STDOUT && type != SPA_STDERR) || n == 0) {
                f->in_off += SPA_HEADER_LEN + n;
                continue;
            }
            size_t k = n < cap ? n : cap;
            memcpy(buf, p, k);
            if (stream)
                *stream = type == SPA_STDOUT ? SP_EXEC_STDOUT : SP_EXEC_STDERR;
            *out_len = k;
            if (k == n) {
                f->in_off += SPA_HEADER_LEN + n;
            } else {
                /* Hand out the rest later: a shorter frame where the
                 * consumed bytes were. */
                f->in_off += k;
                put32(f->in + f->in_off, (uint32_t)(n - k));
                f->in[f->in_off + 4] = (uint8_t)type;
                f->split = true; /* its rest is not a frame of its own */
            }
            return 0;
        }
        if (f->eof || frame_too_long(f))
            return sp_err_set(err, SP_EPODMAN, 0,
                              "lost the exec agent of sandbox %s before the command ended "
                              "(was the container stopped?)",
                              f->box);
        int left = -1;
        if (timeout_ms >= 0) {
            int64_t l = end - sp_now_ms();
            left = l > 0 ? (int)l : 0;
            if (left == 0 && tried)
                return SP_ETIMEOUT;
        }
        tried = true;
        int r = fill(f, left, NULL);
        if (r == SP_EPODMAN)
            return sp_err_set(err, SP_EPODMAN, errno, "lost the exec agent of sandbox %s", f->box);
    }
}

bool sp_fast_exited(const sp_fast *f, int *exit_code)
{
    if (!f->exited)
        return false;
    if (exit_code) {
        if (WIFEXITED(f->status))
            *exit_code = WEXITSTATUS(f->status);
        else if (WIFSIGNALED(f->status))
            *exit_code = 128 + WTERMSIG(f->status);
        else
            *exit_code = -1;
    }
    return true;
}

int sp_fast_write_stdin(sp_fast *f, const void *data, size_t len, sp_error **err)
{
    const char *p = data;
    while (len) {
        size_t k = len < READ_CHUNK ? len : READ_CHUNK;
        int r = send_frame(f, SPA_STDIN, p, k, err);
        if (r < 0)
            return r;
        p += k;
        len -= k;
    }
    return 0;
}

int sp_fast_close_stdin(sp_fast *f, sp_error **err)
{
    return send_frame(f, SPA_STDIN_EOF, NULL, 0, err);
}

int sp_fast_resize(sp_fast *f, unsigned rows, unsigned cols, sp_error **err)
{
    uint8_t b[4];
    put32(b, (rows & 0xffff) << 16 | (cols & 0xffff));
    return send_frame(f, SPA_RESIZE, b, sizeof(b), err);
}

int sp_fast_signal(sp_fast *f, int signo, sp_error **err)
{
    uint8_t b[4];
    put32(b, (uint32_t)signo);
    return send_frame(f, SPA_SIGNAL, b, sizeof(b), err);
}

void sp_fast_kill(sp_fast *f, int wait_ms)
{
    if (!f || f->exited || f->eof)
        return;
    if (send_frame(f, SPA_KILL, NULL, 0, NULL) < 0)
        return;
    char buf[4096];
    int64_t end = sp_now_ms() + wait_ms;
    size_t n;
    while (!f->exited && sp_now_ms() < end &&
           sp_fast_read(&n, NULL, f, buf, sizeof(buf), (int)(end - sp_now_ms()), NULL) == 0)
        ;
}

int sp_fast_noexec(const sp_fast *f)
{
    return f->noexec;
}

int sp_fast_host_pid(const sp_fast *f)
{
    return f->host_pid;
}

void sp_fast_free(sp_fast *f)
{
    if (!f)
        return;
    if (f->fd >= 0)
        close(f->fd);
    free(f->in);
    free(f->box);
    free(f);
}

/* ----------------------------------------------------------- the stream -- */

static int a_fd(const void *f)
{
    return sp_fast_fd(f);
}

static bool a_buffered(const void *f)
{
    return sp_fast_buffered(f);
}

static int a_read(size_t *n, int *stream, void *f, void *buf, size_t cap, int timeout_ms,
                  sp_error **err)
{
    return sp_fast_read(n, stream, f, buf, cap, timeout_ms, err);
}

static int a_write(void *f, const void *data, size_t len, sp_error **err)
{
    return sp_fast_write_stdin(f, data, len, err);
}

static int a_close_stdin(void *f, sp_error **err)
{
    return sp_fast_close_stdin(f, err);
}

static int a_resize(void *f, unsigned rows, unsigned cols, sp_error **err)
{
    return sp_fast_resize(f, rows, cols, err);
}

/* The agent is pid 1: no exit frame means it went with the container. */
static int a_exited(int *code, void *f, int wait_ms, sp_error **err)
{
    (void)wait_ms;
    if (!sp_fast_exited(f, code))
        return sp_err_set(err, SP_EPODMAN, 0,
                          "lost the exec agent of sandbox %s before the command ended",
                          ((sp_fast *)f)->box);
    return 0;
}

static int a_noexec(const void *f)
{
    return sp_fast_noexec(f);
}

static int a_host_pid(void *f)
{
    return sp_fast_host_pid(f);
}

static int a_signal(void *f, int signo, sp_error **err)
{
    return sp_fast_signal(f, signo, err);
}

static int a_kill(void *f, int wait_ms)
{
    sp_fast_kill(f, wait_ms);
    return 0;
}

static void a_free(void *f)
{
    sp_fast_free(f);
}

static const sp_stream_ops agent_ops = {
    .fd = a_fd,
    .buffered = a_buffered,
    .read = a_read,
    .write = a_write,
    .close_stdin = a_close_stdin,
    .resize = a_resize,
    .exited = a_exited,
    .noexec = a_noexec,
    .host_pid = a_host_pid,
    .signal = a_signal,
    .kill = a_kill,
    .free = a_free,
};

sp_stream sp_fast_stream(sp_fast *f)
{
    return (sp_stream){&agent_ops, f};
}
