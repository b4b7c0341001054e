/* Interactive sessions: sp_session_start/write/resize/signal/kill/list.
 *
 * Each session is one Podman exec with stdin attached, by default on a
 * pseudo-terminal. runc makes every exec process the leader of a terminal
 * session and process group of its own, so the command needs no setsid
 * wrapper: a small sh prologue records its pid in /tmp (so a later exec can
 * find the group) and execs `sh -c command` in place. The environment
 * variable SANDPOD_SESSION=<token> marks every process the session starts,
 * which lets a kill find even those that left the group.
 *
 * One background thread per sandbox handle reads every session's stream
 * into a capped pending buffer and writes queued stdin bytes, so commands
 * never block on a full pipe between calls and callers only wait on a
 * condition variable. The thread touches nothing but the table and the
 * streams; Podman requests (create, inspect, resize, the kill execs) stay
 * on the caller's thread, as sp_podman is not thread-safe.
 *
 * A process-wide registry of host pids lets exit and signal handlers kill
 * every live session when the owning process goes away (see
 * sp_session_kill_all_signal_safe()).
 *
 * When the container runs sandpod-agent, a session is instead one
 * connection to it (fastpath.c): the agent starts `sh -c command` in a
 * session of its own (on a pty or pipes), reports its host pid through
 * SCM_CREDENTIALS, and kills its tree (group, terminal session, and every
 * process carrying the token) on a KILL frame or when the connection
 * closes, which also covers an owner that dies by SIGKILL. */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>

#include "sandbox_internal.h"
#include "sandpod/session.h"

#define DEFAULT_YIELD_MS 250
#define DEFAULT_TOKENS   8000
#define BYTES_PER_TOKEN  4
#define DEFAULT_ROWS     24
#define DEFAULT_COLS     80
#define ENV_TOKEN        "SANDPOD_SESSION"
#define PIDFILE_FMT      "/tmp/.sandpod-session-%s.pid"
#define WRITE_CHUNK      4096
#define READS_PER_ROUND  16
/* How long a kill exec may take, and how long to wait for an exit code
 * after a stream ended. */
#define KILL_WAIT_MS   5000
#define EXIT_WAIT_MS   3000
#define REGISTRY_SLOTS 1024

/* $1 = token, $2/$3 = terminal rows/cols (0 = none), the rest = argv.
 * Stale pid files (their process is gone) are removed on the way; a file
 * still being written is non-empty only once complete, so it is skipped
 * rather than removed. */
static const char WRAPPER[] =
    "t=$1; r=$2; c=$3; shift 3; "
    "for f in /tmp/.sandpod-session-*.pid; do "
    "[ -s \"$f\" ] && read -r p < \"$f\" && ! [ -d \"/proc/$p\" ] && rm -f \"$f\"; "
    "done 2>/dev/null; "
    "echo $$ > /tmp/.sandpod-session-$t.pid 2>/dev/null; "
    "[ \"$r\" -gt 0 ] 2>/dev/null && stty rows \"$r\" cols \"$c\" 2>/dev/null; "
    "exec \"$@\"";

/* ------------------------------------------------------------- registry -- */

#define TOKEN_LEN 16

/* Host pids of live sessions of this process, for exit and signal handlers.
 * Lock-free reads (a handler cannot take a lock); writers hold reg_mu. A
 * slot is published by storing pid last and retired by clearing pid first.
 * A session is entered as soon as it starts with pid -1 (its token only):
 * its leader's pid is learned later, and a signal in between must still
 * find its processes by their token. */
typedef struct reg_slot {
    _Atomic int pid;
    _Atomic int owner;                /* getpid() of the process that started the session */
    _Atomic unsigned long long start; /* /proc/<pid>/stat starttime */
    char token[TOKEN_LEN + 1];        /* written before pid */
} reg_slot;

static reg_slot registry[REGISTRY_SLOTS];
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t handlers_once = PTHREAD_ONCE_INIT;

static const int caught_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define N_CAUGHT (sizeof(caught_signals) / sizeof(caught_signals[0]))
static struct sigaction previous[N_CAUGHT];

/* Async-signal-safe helpers from here to the handlers: no stdio, no
 * allocation, no locks. */

static size_t put_uint(char *p, unsigned long v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

static int open_proc(int pid, const char *leaf)
{
    char path[64];
    size_t n = 0;
    memcpy(path, "/proc/", 6);
    n = 6 + put_uint(path + 6, (unsigned long)pid);
    path[n++] = '/';
    size_t ll = strlen(leaf);
    memcpy(path + n, leaf, ll + 1);
    return open(path, O_RDONLY | O_CLOEXEC);
}

/* Read /proc/<pid>/<leaf> into buf (NUL-terminated); the byte count or -1. */
static ssize_t read_proc(int pid, const char *leaf, char *buf, size_t cap)
{
    int fd = open_proc(pid, leaf);
    if (fd < 0)
        return -1;
    size_t got = 0;
    while (got + 1 < cap) {
        ssize_t r = read(fd, buf + got, cap - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    return (ssize_t)got;
}

typedef struct proc_stat {
    long pgrp, session;
    unsigned long long start;
} proc_stat;

/* Parse /proc/<pid>/stat: fields after the last ')' (the name may hold
 * anything): 3 state, 4 ppid, 5 pgrp, 6 session, ... 22 starttime. */
static bool read_stat(int pid, proc_stat *st)
{
    char buf[1024];
    ssize_t n = read_proc(pid, "stat", buf, sizeof(buf));
    if (n <= 0)
        return false;
    char *p = NULL;
    for (ssize_t i = n - 1; i >= 0; i--) {
        if (buf[i] == ')') {
            p = buf + i + 1;
            break;
        }
    }
    if (!p)
        return false;
    unsigned long long field[23] = {0};
    int f = 2; /* the field just passed */
    while (*p && f < 22) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        f++;
        bool neg = *p == '-';
        if (neg)
            p++;
        unsigned long long v = 0;
        while (*p >= '0' && *p <= '9')
            v = v * 10 + (unsigned long long)(*p++ - '0');
        while (*p && *p != ' ')
            p++;
        field[f] = neg ? 0 : v;
    }
    if (f < 22)
        return false;
    st->pgrp = (long)field[5];
    st->session = (long)field[6];
    st->start = field[22];
    return true;
}

/* Whether a pid still names the process that had this start time. */
static bool same_process(int pid, unsigned long long start)
{
    proc_stat st;
    return pid > 0 && read_stat(pid, &st) && st.start == start;
}

#define ENV_PREFIX     ENV_TOKEN "="
#define ENV_PREFIX_LEN (sizeof(ENV_PREFIX) - 1)

/* Whether /proc/<pid>/environ holds SANDPOD_SESSION=<one of tokens>. Read
 * in chunks that overlap by one entry's length, so no match is split. */
static bool environ_has(int pid, const char *const *tokens, size_t nt)
{
    int fd = open_proc(pid, "environ");
    if (fd < 0)
        return false;
    const size_t whole = ENV_PREFIX_LEN + TOKEN_LEN;
    char buf[4096 + 64];
    size_t keep = 0;
    bool hit = false;
    for (;;) {
        ssize_t r = read(fd, buf + keep, 4096);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        size_t len = keep + (size_t)r;
        for (size_t i = 0; !hit && i + whole <= len; i++) {
            if (buf[i] != 'S' || memcmp(buf + i, ENV_PREFIX, ENV_PREFIX_LEN) != 0)
                continue;
            for (size_t k = 0; k < nt; k++)
                if (memcmp(buf + i + ENV_PREFIX_LEN, tokens[k], TOKEN_LEN) == 0)
                    hit = true;
        }
        if (hit)
            break;
        keep = len < whole - 1 ? len : whole - 1;
        memmove(buf, buf + len - keep, keep);
    }
    close(fd);
    return hit;
}

struct linux_dirent64_ {
    unsigned long long d_ino;
    long long d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static bool in_list(const int *v, size_t n, long x)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == x)
            return true;
    return false;
}

/* The inode of a process's pid namespace ("pid:[4026532123]"), or 0. */
static unsigned long long pidns_of(int pid)
{
    char path[64], link[64];
    memcpy(path, "/proc/", 6);
    size_t n = 6 + put_uint(path + 6, (unsigned long)pid);
    memcpy(path + n, "/ns/pid", 8);
    ssize_t l = readlink(path, link, sizeof(link) - 1);
    if (l <= 0)
        return 0;
    link[l] = '\0';
    const char *c = link;
    while (*c && (*c < '0' || *c > '9'))
        c++;
    unsigned long long v = 0;
    while (*c >= '0' && *c <= '9')
        v = v * 10 + (unsigned long long)(*c++ - '0');
    return v;
}

/* Kill, from the host, the process groups and terminal sessions led by
 * `leaders` (host pids checked just before) and every process whose
 * environment carries one of `tokens`. Two passes over /proc catch what
 * was forked during the first. */
static void host_kill(const int *leaders, size_t nl, const char *const *tokens, size_t nt)
{
    int me = (int)getpid();
    /* Only processes in the leaders' pid namespaces (their containers) can
     * belong to them, which spares reading every process on the host;
     * without a known leader, every process is looked at. */
    unsigned long long ns[REGISTRY_SLOTS];
    size_t nns = 0;
    bool any_ns = nl < nt;
    for (size_t i = 0; i < nl; i++) {
        unsigned long long v = pidns_of(leaders[i]);
        if (v == 0)
            any_ns = true;
        else if (!nns || ns[nns - 1] != v)
            ns[nns++] = v;
    }
    for (size_t i = 0; i < nl; i++)
        kill(-leaders[i], SIGKILL);
    for (int pass = 0; pass < 2; pass++) {
        int dfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
            break;
        char buf[2048] __attribute__((aligned(8)));
        for (;;) {
            long got = syscall(SYS_getdents64, dfd, buf, sizeof(buf));
            if (got <= 0)
                break;
            for (long off = 0; off < got;) {
                struct linux_dirent64_ *d = (struct linux_dirent64_ *)(buf + off);
                off += d->d_reclen;
                long pid = 0;
                const char *c = d->d_name;
                if (*c < '1' || *c > '9')
                    continue;
                while (*c >= '0' && *c <= '9')
                    pid = pid * 10 + (*c++ - '0');
                if (*c || pid == me || pid == 1)
                    continue;
                if (!any_ns) {
                    unsigned long long v = pidns_of((int)pid);
                    bool mine = false;
                    for (size_t k = 0; k < nns && !mine; k++)
                        mine = ns[k] == v;
                    if (!mine)
                        continue;
                }
                proc_stat st;
                if (!read_stat((int)pid, &st))
                    continue;
                if (in_list(leaders, nl, st.session) || in_list(leaders, nl, st.pgrp) ||
                    (nt && environ_has((int)pid, tokens, nt)))
                    kill((pid_t)pid, SIGKILL);
            }
        }
        close(dfd);
    }
    for (size_t i = 0; i < nl; i++)
        kill(leaders[i], SIGKILL);
}

void sp_session_kill_all_signal_safe(void)
{
    int saved = errno;
    int me = (int)getpid();
    int leaders[REGISTRY_SLOTS];
    const char *tokens[REGISTRY_SLOTS];
    size_t nl = 0, nt = 0;
    for (size_t i = 0; i < REGISTRY_SLOTS; i++) {
        int pid = atomic_load(&registry[i].pid);
        if (pid == 0 || atomic_load(&registry[i].owner) != me)
            continue;
        tokens[nt++] = registry[i].token;
        /* A leader not known yet is found by its token; one that is gone,
         * or whose pid now names another process, is left alone. */
        if (pid > 0 && same_process(pid, atomic_load(&registry[i].start)))
            leaders[nl++] = pid;
    }
    if (nt)
        host_kill(leaders, nl, tokens, nt);
    errno = saved;
}

static void on_exit_kill(void)
{
    sp_session_kill_all_signal_safe();
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    sp_session_kill_all_signal_safe();
    size_t i = 0;
    while (i < N_CAUGHT && caught_signals[i] != sig)
        i++;
    if (i == N_CAUGHT)
        return;
    const struct sigaction *old = &previous[i];
    if (old->sa_flags & SA_SIGINFO) {
        if (old->sa_sigaction)
            old->sa_sigaction(sig, si, uc);
    } else if (old->sa_handler == SIG_DFL) {
        /* Die the way the signal would have killed us. */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, NULL);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sig);
        raise(sig);
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    } else if (old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
    }
    errno = saved;
}

static void install_handlers(void)
{
    for (size_t i = 0; i < N_CAUGHT; i++) {
        struct sigaction old;
        if (sigaction(caught_signals[i], NULL, &old) < 0)
            continue;
        /* A signal the program ignores (like SIGINT for a background job)
         * stays ignored: it will not end the process. */
        if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN)
            continue;
        previous[i] = old;
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = on_signal;
        sa.sa_mask = old.sa_mask;
        /* Not SA_ONSTACK: an alternate stack may be too small for the scan. */
        sa.sa_flags = SA_SIGINFO | (old.sa_flags & (SA_RESTART | SA_NODEFER));
        sigaction(caught_signals[i], &sa, NULL);
    }
    atexit(on_exit_kill);
}

/* Publish a session's host pid once it is known to be ours: its
 * environment must carry the session's token (a pid from a service in
 * another pid namespace would name some unrelated local process). */
static int registry_reserve(const char *token)
{
    if (strlen(token) != TOKEN_LEN)
        return -1;
    pthread_once(&handlers_once, install_handlers);
    int slot = -1;
    pthread_mutex_lock(&reg_mu);
    for (int i = 0; i < REGISTRY_SLOTS; i++) {
        if (atomic_load(&registry[i].pid) == 0) {
            memcpy(registry[i].token, token, TOKEN_LEN + 1);
            atomic_store(&registry[i].owner, (int)getpid());
            atomic_store(&registry[i].start, 0ull);
            atomic_store(&registry[i].pid, -1);
            slot = i;
            break;
        }
    }
    pthread_mutex_unlock(&reg_mu);
    return slot;
}

/* Record the leader's pid in a reserved slot once it is known to be ours
 * (its environment carries the token). false when it is not (yet): a
 * process that has not reached execve still has runc's environment. */
static bool registry_set_pid(int slot, int pid)
{
    if (slot < 0 || pid <= 0)
        return false;
    const char *token = registry[slot].token;
    proc_stat st;
    if (!environ_has(pid, &token, 1) || !read_stat(pid, &st))
        return false;
    pthread_mutex_lock(&reg_mu);
    atomic_store(&registry[slot].start, st.start);
    atomic_store(&registry[slot].pid, pid);
    pthread_mutex_unlock(&reg_mu);
    return true;
}

static void registry_remove(int slot)
{
    if (slot < 0)
        return;
    pthread_mutex_lock(&reg_mu);
    atomic_store(&registry[slot].pid, 0);
    pthread_mutex_unlock(&reg_mu);
}

/* The verified host pid of a registered session's leader, or 0. */
static int registry_leader(int slot)
{
    if (slot < 0)
        return 0;
    int pid = atomic_load(&registry[slot].pid);
    return pid > 0 && same_process(pid, atomic_load(&registry[slot].start)) ? pid : 0;
}

/* -------------------------------------------------------------- sessions -- */

typedef struct session {
    int id;
    char *token;
    char *exec_id;
    char *command;
    char *user;
    sp_exec *stream;
    sp_fast *fast; /* instead of stream, on the fast path */
    int fd;
    bool tty;
    int host_pid;
    bool pid_checked; /* registration was attempted with a known pid */
    int pid_tries;    /* attempts so far while the pid was not yet ours */
    int reg;          /* registry slot, or -1 */
    int64_t started_ms;
    int64_t used_ms;
    /* Shared with the I/O thread; guarded by the table's mutex. */
    sp_capbuf pending;
    sp_buf inq; /* stdin bytes not yet sent, from inq_off */
    size_t inq_off;
    bool want_close; /* close stdin once inq is sent */
    bool stdin_closed;
    bool ended;     /* the stream reached its end or broke */
    char *io_error; /* why reading or writing failed, or NULL */
} session;

struct sp_session_table {
    pthread_mutex_t mu;
    pthread_cond_t cond; /* signalled after every I/O round */
    session *v[SP_SESSION_MAX];
    size_t n;
    int wake_fd;
    pthread_t thread;
    bool stop;
};

/* Ids count up across the process, so that one never names two sessions,
 * not even after a handle's sessions were closed (sp_sandbox_stop). */
static _Atomic int next_session_id = 1;

static char *make_token(void)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != sizeof(r))
        r = (uint64_t)sp_now_ms() ^ ((uint64_t)getpid() << 20) ^ (uint64_t)(uintptr_t)&r;
    return sp_xasprintf("%016llx", (unsigned long long)r);
}

static void pending_reset(session *s)
{
    sp_capbuf_init(&s->pending, SP_SESSION_PENDING_BYTES, SIZE_MAX / 4);
}

static void session_free(session *s)
{
    if (!s)
        return;
    registry_remove(s->reg);
    sp_exec_free(s->stream);
    sp_fast_free(s->fast);
    sp_capbuf_dispose(&s->pending);
    sp_buf_dispose(&s->inq);
    free(s->io_error);
    free(s->token);
    free(s->exec_id);
    free(s->command);
    free(s->user);
    free(s);
}

static void wake(sp_session_table *t)
{
    uint64_t one = 1;
    ssize_t r = write(t->wake_fd, &one, sizeof(one));
    (void)r; /* a full counter already means "wake up" */
}

static session *find(sp_session_table *t, int id)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i]->id == id)
            return t->v[i];
    return NULL;
}

/* Take a session out of the table (the I/O thread forgets it). */
static void detach(sp_session_table *t, session *s)
{
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->n; i++) {
        if (t->v[i] == s) {
            memmove(&t->v[i], &t->v[i + 1], (t->n - i - 1) * sizeof(t->v[0]));
            t->n--;
            break;
        }
    }
    pthread_mutex_unlock(&t->mu);
    wake(t);
}

static void set_io_error(session *s, sp_error *e, const char *fallback)
{
    if (!s->io_error)
        s->io_error = sp_xstrdup(e && e->message ? e->message : fallback);
    sp_error_free(e);
}

/* Read what the stream has, without waiting. True when data may remain
 * (the round's budget ran out), so the next poll must not sleep. */
static bool drain(session *s)
{
    char buf[16384];
    for (int i = 0; i < READS_PER_ROUND; i++) {
        size_t n = 0;
        sp_error *e = NULL;
        int r = s->fast ? sp_fast_read(&n, NULL, s->fast, buf, sizeof(buf), 0, &e)
                        : sp_exec_read(&n, NULL, s->stream, buf, sizeof(buf), 0, &e);
        if (r == SP_ETIMEOUT) {
            sp_error_free(e);
            return false;
        }
        if (r < 0) {
            set_io_error(s, e, "the output stream broke");
            s->ended = true;
            return false;
        }
        if (n == 0) {
            s->ended = true;
            return false;
        }
        sp_capbuf_feed(&s->pending, buf, n);
    }
    return true;
}

static void send_some(session *s)
{
    size_t left = s->inq.len - s->inq_off;
    if (left) {
        size_t k = left < WRITE_CHUNK ? left : WRITE_CHUNK;
        sp_error *e = NULL;
        int r = s->fast ? sp_fast_write_stdin(s->fast, s->inq.data + s->inq_off, k, &e)
                        : sp_exec_write_stdin(s->stream, s->inq.data + s->inq_off, k, &e);
        if (r < 0) {
            set_io_error(s, e, "writing stdin failed");
            s->inq_off = s->inq.len;
            s->want_close = false;
            s->stdin_closed = true;
        } else {
            s->inq_off += k;
        }
        if (s->inq_off == s->inq.len) {
            s->inq.len = 0;
            s->inq_off = 0;
        }
    }
    if (s->inq.len == 0 && s->want_close && !s->stdin_closed) {
        s->stdin_closed = true;
        if (s->fast)
            sp_fast_close_stdin(s->fast, NULL);
        else
            sp_exec_close_stdin(s->stream, NULL);
    }
}

static bool wants_out(const session *s)
{
    return s->inq.len > s->inq_off || (s->want_close && !s->stdin_closed);
}

static void *io_main(void *arg)
{
    sp_session_table *t = arg;
    struct pollfd pfd[SP_SESSION_MAX + 1];
    int ids[SP_SESSION_MAX + 1];
    bool busy = false;
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        nfds_t n = 0;
        pfd[n++] = (struct pollfd){.fd = t->wake_fd, .events = POLLIN};
        for (size_t i = 0; i < t->n; i++) {
            session *s = t->v[i];
            if (s->ended)
                continue;
            ids[n] = s->id;
            pfd[n++] = (struct pollfd){.fd = s->fd,
                                       .events = (short)(POLLIN | (wants_out(s) ? POLLOUT : 0))};
        }
        pthread_mutex_unlock(&t->mu);
        int pr = poll(pfd, n, busy ? 0 : -1);
        pthread_mutex_lock(&t->mu);
        busy = false;
        if (pr < 0)
            continue; /* EINTR */
        if (pfd[0].revents) {
            uint64_t v;
            ssize_t r = read(t->wake_fd, &v, sizeof(v));
            (void)r;
        }
        for (nfds_t k = 1; k < n; k++) {
            session *s = find(t, ids[k]);
            if (!s || s->ended)
                continue;
            if (pfd[k].revents & POLLOUT)
                send_some(s);
            /* Data can sit in the stream's own buffer with nothing new on
             * the socket, hence the second test. */
            bool buffered = s->fast ? sp_fast_buffered(s->fast) : sp_exec_buffered(s->stream);
            if (pfd[k].revents & (POLLIN | POLLHUP | POLLERR) || buffered)
                busy |= drain(s);
        }
        pthread_cond_broadcast(&t->cond);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

static int table_get(sp_session_table **out, sp_sandbox *sb, sp_error **err)
{
    if (sb->sessions) {
        *out = sb->sessions;
        return 0;
    }
    sp_session_table *t = sp_xcalloc(1, sizeof(*t));
    t->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (t->wake_fd < 0) {
        int r = sp_err_errno(err, errno, "eventfd", NULL);
        free(t);
        return r;
    }
    pthread_mutex_init(&t->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cond, &ca);
    pthread_condattr_destroy(&ca);
    /* The thread takes no signals: they belong to the program. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int pe = pthread_create(&t->thread, NULL, io_main, t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pe != 0) {
        close(t->wake_fd);
        pthread_mutex_destroy(&t->mu);
        pthread_cond_destroy(&t->cond);
        free(t);
        return sp_err_errno(err, pe, "start the session reader thread", NULL);
    }
    sb->sessions = t;
    *out = t;
    return 0;
}

/* ------------------------------------------------------- in-container ops -- */

/* Run a short sh script in the container as `user` and wait for it. */
static int run_script(sp_sandbox *sb, const char *user, const char *script, sp_error **err)
{
    sp_podman *p = sp_sandbox_podman(sb, err);
    if (!p)
        return SP_EPODMAN;
    if (!sb->container_id)
        return sp_err_set(err, SP_EPODMAN, 0, "sandbox %s has no container", sb->name);
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    sp_podman_exec_spec spec = SP_PODMAN_EXEC_SPEC_INIT;
    spec.argv = argv;
    spec.user = user;
    sp_exec *e = NULL;
    int r = sp_podman_exec(&e, p, sb->container_id, &spec, err);
    if (r < 0)
        return r;
    char buf[512];
    size_t n;
    int64_t end = sp_now_ms() + KILL_WAIT_MS;
    while (sp_now_ms() < end &&
           sp_exec_read(&n, NULL, e, buf, sizeof(buf), (int)(end - sp_now_ms()), NULL) == 0 && n)
        ;
    sp_exec_free(e);
    return 0;
}

bool sp_session_container_kill_only;
bool sp_session_skip_pid_learning;

/* Kill sessions' process trees through a container exec: for each, its
 * process group and terminal session (from the pid file), and every process
 * whose environment carries its token. One exec per distinct user, since an
 * unprivileged user can only signal its own processes. */
static int container_kill(sp_sandbox *sb, session **v, size_t n, sp_error **err)
{
    int ret = 0;
    bool done[SP_SESSION_MAX] = {false};
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        sp_buf toks = SP_BUF_INIT;
        for (size_t j = i; j < n; j++) {
            if (!done[j] && strcmp(v[j]->user, v[i]->user) == 0) {
                done[j] = true;
                sp_buf_printf(&toks, "%s%s", toks.len ? " " : "", v[j]->token);
            }
        }
        cleanup_free char *script = sp_xasprintf(
            "ids=; pat=; "
            "for t in %s; do f=/tmp/.sandpod-session-$t.pid; "
            "if read -r p < \"$f\"; then kill -KILL -$p; ids=\"$ids $p\"; fi; "
            "rm -f \"$f\"; pat=\"$pat|$t\"; done 2>/dev/null; "
            "pat=${pat#|}; self=$$; "
            "for f in $(grep -lE \"" ENV_TOKEN "=($pat)\" /proc/[0-9]*/environ 2>/dev/null); do "
            "n=${f#/proc/}; n=${n%%/environ}; [ \"$n\" = \"$self\" ] && continue; "
            "if read -r l < /proc/$n/stat; then l=${l##*) }; set -- $l; ids=\"$ids $4\"; fi; "
            "kill -KILL $n; done 2>/dev/null; "
            "for d in /proc/[0-9]*; do n=${d#/proc/}; [ \"$n\" = \"$self\" ] && continue; "
            "read -r l < $d/stat || continue; l=${l##*) }; set -- $l; "
            "for s in $ids; do case $s in 0|1) continue;; esac; "
            "if [ \"$3\" = \"$s\" ] || [ \"$4\" = \"$s\" ]; then "
            "kill -KILL $n; break; fi; done; done 2>/dev/null; exit 0",
            toks.data);
        sp_buf_dispose(&toks);
        const char *user = *v[i]->user ? v[i]->user : NULL;
        int r = run_script(sb, user, script, ret < 0 ? NULL : err);
        if (r < 0 && ret == 0)
            ret = r;
    }
    return ret;
}

/* Kill sessions' whole process trees: their process groups, terminal
 * sessions, and every process that carries their token (which catches
 * those that called setsid). From the host when the service is local and
 * the session's pid was verified (no exec needed, a few ms), else from
 * inside the container (an exec, a few hundred ms). */
static int kill_trees(sp_sandbox *sb, session **v, size_t n, sp_error **err)
{
    int leaders[SP_SESSION_MAX];
    const char *tokens[SP_SESSION_MAX];
    session *rest[SP_SESSION_MAX];
    size_t nl = 0, nr = 0;
    for (size_t i = 0; i < n && i < SP_SESSION_MAX; i++) {
        if (v[i]->fast) {
            /* The agent kills the tree; its exit frame says it is done. */
            sp_fast_kill(v[i]->fast, KILL_WAIT_MS);
            continue;
        }
        int leader = sp_session_container_kill_only ? 0 : registry_leader(v[i]->reg);
        if (leader) {
            leaders[nl] = leader;
            tokens[nl++] = v[i]->token;
        } else {
            rest[nr++] = v[i];
        }
    }
    if (nl)
        host_kill(leaders, nl, tokens, nl);
    return nr ? container_kill(sb, rest, nr, err) : 0;
}

/* ---------------------------------------------------------------- output -- */

static size_t count_nl(const char *p, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += p[i] == '\n';
    return k;
}

/* Cap the pending text to `budget` bytes, head and tail. The pending
 * buffer kept half of SP_SESSION_PENDING_BYTES at each end and budget is
 * at most that, so the slices below never reach its own marker. */
static char *cap_text(const char *t, size_t len, bool pending_cut, uint64_t total,
                      uint64_t total_lines, size_t budget, size_t *out_len, bool *truncated)
{
    if (!pending_cut && len <= budget) {
        *out_len = len;
        *truncated = false;
        return sp_xstrndup(t, len);
    }
    size_t h = sp_utf8_cut(t, len, budget / 2);
    size_t keep = budget - budget / 2;
    if (keep > len - h)
        keep = len - h;
    const char *tail = t + len - keep;
    while (keep && ((unsigned char)*tail & 0xc0) == 0x80) {
        tail++;
        keep--;
    }
    uint64_t omitted = total - h - keep;
    uint64_t kept_lines = count_nl(t, h) + count_nl(tail, keep);
    sp_buf b = SP_BUF_INIT;
    sp_buf_add(&b, t, h);
    if (h && t[h - 1] != '\n')
        sp_buf_addc(&b, '\n');
    sp_buf_printf(&b, "[... %llu bytes, %llu lines omitted ...]\n", (unsigned long long)omitted,
                  (unsigned long long)(total_lines > kept_lines ? total_lines - kept_lines : 0));
    sp_buf_add(&b, tail, keep);
    *out_len = b.len;
    *truncated = true;
    return sp_buf_steal(&b);
}

static int clamp_yield(int ms)
{
    if (ms == 0)
        return DEFAULT_YIELD_MS;
    if (ms < 0)
        return 0;
    return ms > SP_SESSION_MAX_YIELD_MS ? SP_SESSION_MAX_YIELD_MS : ms;
}

static size_t budget_bytes(size_t tokens)
{
    if (tokens == 0)
        tokens = DEFAULT_TOKENS;
    if (tokens > SP_SESSION_PENDING_BYTES / BYTES_PER_TOKEN)
        tokens = SP_SESSION_PENDING_BYTES / BYTES_PER_TOKEN;
    return tokens * BYTES_PER_TOKEN;
}

static void note_add(char **note, const char *fmt, ...) SP_PRINTF(2, 3);
static void note_add(char **note, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *m = NULL;
    if (vasprintf(&m, fmt, ap) < 0)
        abort();
    va_end(ap);
    if (*note) {
        char *j = sp_xasprintf("%s; %s", *note, m);
        free(*note);
        free(m);
        *note = j;
    } else {
        *note = m;
    }
}

/* Learn the session's host pid (for the exit handlers) once it runs. */
static void learn_pid(sp_sandbox *sb, session *s)
{
    if (s->pid_checked || (!sb->podman && !s->fast) || sp_session_skip_pid_learning)
        return;
    if (s->fast) {
        s->host_pid = sp_fast_host_pid(s->fast);
        s->pid_checked = true;
        registry_set_pid(s->reg, s->host_pid);
        return;
    }
    sp_podman_exec_info info;
    if (sp_podman_exec_inspect(&info, sb->podman, s->exec_id, NULL) < 0 || info.pid <= 0)
        return;
    /* Not ours yet (still before execve): look again next time, a few
     * times (a remote service's pids are never ours). */
    if (!registry_set_pid(s->reg, info.pid) && s->reg >= 0 && ++s->pid_tries < 20)
        return;
    s->host_pid = info.pid;
    s->pid_checked = true;
}

/* Wait up to yield_ms (or until the stream ends), then hand out what the
 * session printed. A session whose command exited is removed and freed. */
static int collect(sp_session_output **out, sp_sandbox *sb, session *s, int yield_ms, size_t budget,
                   int64_t t0, char *note, sp_error **err)
{
    sp_session_table *t = sb->sessions;
    int64_t deadline = sp_now_ms() + yield_ms;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = (int64_t)ts.tv_nsec + (int64_t)yield_ms * 1000000;
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);

    pthread_mutex_lock(&t->mu);
    while (!s->ended && sp_now_ms() < deadline) {
        if (pthread_cond_timedwait(&t->cond, &t->mu, &ts) == ETIMEDOUT)
            break;
    }
    sp_capbuf taken = s->pending;
    pending_reset(s);
    bool ended = s->ended;
    size_t queued = s->inq.len - s->inq_off;
    char *io_error = steal_pointer(&s->io_error);
    pthread_mutex_unlock(&t->mu);

    sp_session_output *o = sp_xcalloc(1, sizeof(*o));
    o->session_id = s->id;
    o->exit_code = -1;
    size_t plen = 0;
    bool pcut = false;
    char *ptext = sp_capbuf_text(&taken, &plen, &pcut);
    o->total_bytes = taken.total_bytes;
    o->output = cap_text(ptext, plen, pcut, taken.total_bytes, taken.total_lines, budget,
                         &o->output_len, &o->truncated);
    free(ptext);
    sp_capbuf_dispose(&taken);

    if (ended) {
        int code = -1;
        sp_podman_exec_info info = {0};
        bool running = false;
        if (s->fast) {
            if (!sp_fast_exited(s->fast, &code)) {
                /* The agent went away first; closing the connection (if
                 * it still listens) kills what is left. */
                note_add(&note, "lost the output stream of session %d (%s)", s->id,
                         io_error ? io_error : "closed early");
            }
        } else {
            sp_error *ierr = NULL;
            if (!sb->podman || sp_podman_exec_inspect(&info, sb->podman, s->exec_id, &ierr) < 0) {
                /* The stream went with the service: no exit code to give,
                 * and none to make up. Kill what can be reached from here. */
                int r = sp_err_set(err, SP_EPODMAN, ierr ? ierr->sys_errno : 0,
                                   "session %d: lost the podman service (%s); the session is "
                                   "gone and its command may still run in the container",
                                   s->id, ierr ? ierr->message : "no connection");
                sp_error_free(ierr);
                kill_trees(sb, &s, 1, NULL);
                detach(t, s);
                session_free(s);
                sp_session_output_free(o);
                free(io_error);
                free(note);
                return r;
            }
            running = info.running;
            if (running && !io_error) /* the stream ended a moment before the exit was recorded */
                running =
                    sp_podman_exec_wait(&code, sb->podman, s->exec_id, EXIT_WAIT_MS, NULL) != 0;
            else if (!running)
                code = info.exit_code;
        }
        if (running) {
            /* The stream broke while the command still runs: without a
             * stream nobody could talk to it again, so it goes. */
            note_add(&note, "lost the output stream of session %d (%s); it was killed", s->id,
                     io_error ? io_error : "closed early");
            kill_trees(sb, &s, 1, NULL);
        } else if (io_error && !s->fast) {
            note_add(&note, "I/O error as session %d ended: %s", s->id, io_error);
        }
        o->exited = true;
        o->exit_code = code;
        detach(t, s);
        session_free(s);
    } else {
        if (queued)
            note_add(&note,
                     "%zu bytes of input are still waiting: the command is not reading stdin",
                     queued);
        if (io_error)
            note_add(&note, "%s", io_error);
        s->used_ms = sp_now_ms();
        learn_pid(sb, s);
    }
    free(io_error);
    o->note = note;
    o->wall_ms = sp_now_ms() - t0;
    *out = o;
    return 0;
}

void sp_session_output_free(sp_session_output *o)
{
    if (!o)
        return;
    free(o->output);
    free(o->note);
    free(o);
}

/* ----------------------------------------------------------------- public -- */

/* Make room for one more session: an exited one goes first, else the one
 * idle the longest. */
static char *prune(sp_sandbox *sb, sp_session_table *t)
{
    pthread_mutex_lock(&t->mu);
    session *victim = NULL;
    for (size_t i = 0; i < t->n; i++) {
        session *s = t->v[i];
        if (!victim || (s->ended && !victim->ended) ||
            (s->ended == victim->ended && s->used_ms < victim->used_ms))
            victim = s;
    }
    bool ended = victim->ended;
    pthread_mutex_unlock(&t->mu);
    int64_t idle = sp_now_ms() - victim->used_ms;
    char *note =
        sp_xasprintf("pruned session %d (%.60s%s, %s, idle %lld.%llds) to stay within %d "
                     "sessions",
                     victim->id, victim->command, strlen(victim->command) > 60 ? "..." : "",
                     ended ? "exited" : "killed", (long long)(idle / 1000),
                     (long long)(idle % 1000 / 100), SP_SESSION_MAX);
    detach(t, victim);
    if (!ended)
        kill_trees(sb, &victim, 1, NULL);
    session_free(victim);
    return note;
}

static char **session_env(const sp_sandbox *sb, const char *const *extra, const char *token)
{
    cleanup_free char *tok = sp_xasprintf(ENV_TOKEN "=%s", token);
    sp_strv sv = {0};
    for (size_t i = 0; extra && extra[i]; i++)
        sp_strv_push(&sv, sp_xstrdup(extra[i]));
    sp_strv_push(&sv, steal_pointer(&tok));
    char **more = sp_strv_steal(&sv);
    char **env = sp_sandbox_command_env(sb, (const char *const *)more);
    sp_strv_free(more);
    return env;
}

int sp_session_start(sp_session_output **out, sp_sandbox *sb, const char *command,
                     const sp_session_opts *opts, sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_SESSION_OPTS_VERSION, "sp_session_opts", err) < 0)
        return SP_EINVAL;
    int64_t t0 = sp_now_ms();
    sp_session_opts o = SP_SESSION_OPTS_INIT;
    if (opts)
        o = *opts;
    if (!command || !*command)
        return sp_err_set(err, SP_EINVAL, 0, "session: no command given");
    bool tty = !o.no_tty;
    unsigned rows = o.rows ? o.rows : DEFAULT_ROWS;
    unsigned cols = o.cols ? o.cols : DEFAULT_COLS;
    if (tty && (rows > 0xffff || cols > 0xffff))
        return sp_err_set(err, SP_EINVAL, 0, "session: bad terminal size %ux%u", rows, cols);
    const char *user = o.user ? o.user : sb->cfg.user;
    bool fast = sp_fast_wanted(sb, o.user);
    int r = fast ? 0 : sp_sandbox_require_running(sb, err);
    if (r < 0)
        return r;
    sp_session_table *t = NULL;
    if ((r = table_get(&t, sb, err)) < 0)
        return r;

    char *note = t->n >= SP_SESSION_MAX ? prune(sb, t) : NULL;

    char *token = make_token();
    sp_fast *f = NULL;
    if (fast) {
        const char *argv[] = {"/bin/sh", "-c", command, NULL};
        char **env = session_env(sb, o.env, token);
        cleanup_free char *marker = sp_xasprintf(ENV_TOKEN "=%s", token);
        sp_fast_spec fs = {.argv = argv,
                           .env = (const char *const *)env,
                           .workdir = o.workdir ? o.workdir : sb->cfg.workdir,
                           .tty = tty,
                           .rows = rows,
                           .cols = cols,
                           .kill_marker = marker};
        sp_error *ferr = NULL;
        r = sp_fast_start(&f, sb, &fs, &ferr);
        sp_strv_free(env);
        if (r == SP_ENOTFOUND && sp_fast_mode(sb) != SP_EXEC_FAST) {
            sp_error_free(ferr); /* no agent answers: the REST path */
            fast = false;
            r = sp_sandbox_require_running(sb, err);
        } else if (r < 0) {
            if (sp_sandbox_require_running(sb, NULL) < 0) {
                sp_error_free(ferr);
                sp_sandbox_require_running(sb, err);
            } else if (err) {
                *err = ferr;
            } else {
                sp_error_free(ferr);
            }
            r = r == SP_ETIMEOUT || r == SP_ENOTFOUND ? SP_EPODMAN : r;
        }
        if (r < 0) {
            free(token);
            free(note);
            return r;
        }
    }
    if (fast) {
        session *s = sp_xcalloc(1, sizeof(*s));
        s->token = token;
        s->command = sp_xstrdup(command);
        s->user = sp_xstrdup(user ? user : "");
        s->fast = f;
        s->fd = sp_fast_fd(f);
        s->tty = tty;
        s->reg = registry_reserve(token);
        s->host_pid = sp_fast_host_pid(f);
        s->started_ms = s->used_ms = sp_now_ms();
        pending_reset(s);
        if (o.close_stdin) {
            if (tty)
                sp_buf_addc(&s->inq, '\x04');
            s->want_close = !tty;
        }
        pthread_mutex_lock(&t->mu);
        s->id = atomic_fetch_add(&next_session_id, 1);
        t->v[t->n++] = s;
        pthread_mutex_unlock(&t->mu);
        wake(t);
        return collect(out, sb, s, clamp_yield(o.yield_time_ms), budget_bytes(o.max_output_tokens),
                       t0, note, err);
    }
    char rs[16], cs[16];
    snprintf(rs, sizeof(rs), "%u", tty ? rows : 0);
    snprintf(cs, sizeof(cs), "%u", tty ? cols : 0);
    const char *argv[] = {"/bin/sh", "-c",      WRAPPER, "sandpod", token, rs,
                          cs,        "/bin/sh", "-c",    command,   NULL};
    char **env = session_env(sb, o.env, token);
    sp_podman_exec_spec spec = SP_PODMAN_EXEC_SPEC_INIT;
    spec.argv = argv;
    spec.env = (const char *const *)env;
    spec.workdir = o.workdir ? o.workdir : sb->cfg.workdir;
    spec.user = user;
    spec.tty = tty;
    spec.attach_stdin = true;
    spec.attach_stdout = spec.attach_stderr = true;

    char *exec_id = NULL;
    sp_exec *e = NULL;
    r = sp_podman_exec_create(&exec_id, sb->podman, sb->container_id, &spec, err);
    if (r == 0)
        r = sp_podman_exec_start(&e, sb->podman, exec_id, tty, err);
    sp_strv_free(env);
    if (r < 0) {
        sp_err_wrap(err, r, "start session in sandbox %s", sb->name);
        free(exec_id);
        free(token);
        free(note);
        return r;
    }
    /* The wrapper already set the size with stty, before the command could
     * look; this covers images without stty. */
    if (tty)
        sp_podman_exec_resize(sb->podman, exec_id, rows, cols, NULL);

    session *s = sp_xcalloc(1, sizeof(*s));
    s->token = token;
    s->exec_id = exec_id;
    s->command = sp_xstrdup(command);
    s->user = sp_xstrdup(user ? user : "");
    s->stream = e;
    s->fd = sp_exec_fd(e);
    s->tty = tty;
    s->reg = registry_reserve(token);
    s->started_ms = s->used_ms = sp_now_ms();
    pending_reset(s);
    if (o.close_stdin) {
        if (tty)
            sp_buf_addc(&s->inq, '\x04');
        s->want_close = !tty;
    }

    pthread_mutex_lock(&t->mu);
    s->id = atomic_fetch_add(&next_session_id, 1);
    t->v[t->n++] = s;
    pthread_mutex_unlock(&t->mu);
    wake(t);
    return collect(out, sb, s, clamp_yield(o.yield_time_ms), budget_bytes(o.max_output_tokens), t0,
                   note, err);
}

static int no_session(sp_sandbox *sb, int id, sp_error **err)
{
    return sp_err_set(err, SP_ENOTFOUND, 0,
                      "no session %d in sandbox %s (it exited, was killed or was pruned)", id,
                      sb->name);
}

/* Look a session up; the table's thread never frees sessions, so the
 * pointer stays valid on the caller's thread. */
static session *lookup(sp_sandbox *sb, int id)
{
    sp_session_table *t = sb->sessions;
    if (!t)
        return NULL;
    pthread_mutex_lock(&t->mu);
    session *s = find(t, id);
    pthread_mutex_unlock(&t->mu);
    return s;
}

int sp_session_signal(sp_sandbox *sb, int session_id, int signo, sp_error **err)
{
    if (signo <= 0 || signo >= 65)
        return sp_err_set(err, SP_EINVAL, 0, "session %d: bad signal %d", session_id, signo);
    session *s = lookup(sb, session_id);
    if (!s)
        return no_session(sb, session_id, err);
    if (s->fast) {
        /* Frames from this thread and the I/O thread must not interleave. */
        pthread_mutex_lock(&sb->sessions->mu);
        int r = s->ended ? 0 : sp_fast_signal(s->fast, signo, err);
        pthread_mutex_unlock(&sb->sessions->mu);
        return r < 0 ? sp_err_wrap(err, r, "signal session %d", session_id) : 0;
    }
    int leader = sp_session_container_kill_only ? 0 : registry_leader(s->reg);
    if (leader) {
        kill(-leader, signo);
        return 0;
    }
    /* The group from the pid file; failing that, every process that
     * carries the token. */
    cleanup_free char *script = sp_xasprintf(
        "f=/tmp/.sandpod-session-%s.pid; "
        "if read -r p < \"$f\" && [ -d /proc/$p ]; then kill -%d -$p; else "
        "for f in $(grep -l \"" ENV_TOKEN "=%s\" /proc/[0-9]*/environ); do "
        "n=${f#/proc/}; n=${n%%/environ}; [ \"$n\" = \"$$\" ] || kill -%d $n; done; fi "
        "2>/dev/null; exit 0",
        s->token, signo, s->token, signo);
    int r = run_script(sb, *s->user ? s->user : NULL, script, err);
    if (r < 0)
        return sp_err_wrap(err, r, "signal session %d", session_id);
    return 0;
}

int sp_session_write(sp_session_output **out, sp_sandbox *sb, int session_id, const char *chars,
                     size_t len, const sp_session_write_opts *opts, sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_SESSION_WRITE_OPTS_VERSION, "sp_session_write_opts", err) < 0)
        return SP_EINVAL;
    int64_t t0 = sp_now_ms();
    sp_session_write_opts o = SP_SESSION_WRITE_OPTS_INIT;
    if (opts)
        o = *opts;
    if (!chars && len)
        return sp_err_set(err, SP_EINVAL, 0, "session %d: no characters given", session_id);
    session *s = lookup(sb, session_id);
    if (!s)
        return no_session(sb, session_id, err);
    sp_session_table *t = sb->sessions;
    char *note = NULL;
    if (!s->tty && len == 1 && chars[0] == '\x03') {
        /* No line discipline to turn ^C into SIGINT: do its job. */
        int r = sp_session_signal(sb, session_id, SIGINT, err);
        if (r < 0)
            return r;
        len = 0;
    }
    pthread_mutex_lock(&t->mu);
    bool ended = s->ended;
    bool closed = s->stdin_closed || (s->want_close && !s->tty);
    if (!ended && closed && len) {
        pthread_mutex_unlock(&t->mu);
        return sp_err_set(err, SP_EINVAL, 0, "stdin of session %d is closed", session_id);
    }
    if (!ended) {
        if (len)
            sp_buf_add(&s->inq, chars, len);
        if (o.close_stdin) {
            if (s->tty)
                sp_buf_addc(&s->inq, '\x04');
            else
                s->want_close = true;
        }
    }
    pthread_mutex_unlock(&t->mu);
    if (ended && len)
        note_add(&note, "session %d had exited; the input was not sent", session_id);
    else if (len || o.close_stdin)
        wake(t);
    return collect(out, sb, s, clamp_yield(o.yield_time_ms), budget_bytes(o.max_output_tokens), t0,
                   note, err);
}

int sp_session_resize(sp_sandbox *sb, int session_id, unsigned rows, unsigned cols, sp_error **err)
{
    session *s = lookup(sb, session_id);
    if (!s)
        return no_session(sb, session_id, err);
    if (!s->tty)
        return sp_err_set(err, SP_EINVAL, 0, "session %d has no terminal to resize", session_id);
    if (!rows || !cols || rows > 0xffff || cols > 0xffff)
        return sp_err_set(err, SP_EINVAL, 0, "session %d: bad terminal size %ux%u", session_id,
                          rows, cols);
    if (s->fast) {
        pthread_mutex_lock(&sb->sessions->mu);
        int r = s->ended ? 0 : sp_fast_resize(s->fast, rows, cols, err);
        pthread_mutex_unlock(&sb->sessions->mu);
        return r < 0 ? sp_err_wrap(err, r, "resize session %d", session_id) : 0;
    }
    sp_podman *p = sp_sandbox_podman(sb, err);
    if (!p)
        return SP_EPODMAN;
    int r = sp_podman_exec_resize(p, s->exec_id, rows, cols, err);
    if (r < 0)
        return sp_err_wrap(err, r, "resize session %d", session_id);
    return 0;
}

int sp_session_kill(sp_sandbox *sb, int session_id, sp_error **err)
{
    session *s = lookup(sb, session_id);
    if (!s)
        return no_session(sb, session_id, err);
    detach(sb->sessions, s);
    int r = kill_trees(sb, &s, 1, err);
    session_free(s);
    if (r < 0)
        return sp_err_wrap(err, r, "kill session %d", session_id);
    return 0;
}

int sp_session_list(sp_session_info **out, size_t *n_out, sp_sandbox *sb, sp_error **err)
{
    (void)err;
    *out = NULL;
    *n_out = 0;
    sp_session_table *t = sb->sessions;
    if (!t)
        return 0;
    int64_t now = sp_now_ms();
    pthread_mutex_lock(&t->mu);
    if (t->n) {
        sp_session_info *v = sp_xcalloc(t->n, sizeof(*v));
        for (size_t i = 0; i < t->n; i++) {
            const session *s = t->v[i];
            v[i].id = s->id;
            v[i].command = sp_xstrdup(s->command);
            v[i].tty = s->tty;
            v[i].running = !s->ended;
            v[i].age_ms = now - s->started_ms;
            v[i].idle_ms = now - s->used_ms;
            v[i].pending_bytes = s->pending.total_bytes;
            v[i].host_pid = s->host_pid;
        }
        *out = v;
        *n_out = t->n;
    }
    pthread_mutex_unlock(&t->mu);
    return 0;
}

void sp_session_info_free(sp_session_info *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i].command);
    free(v);
}

void sp_sandbox_sessions_close(sp_sandbox *sb)
{
    sp_session_table *t = sb->sessions;
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    session *v[SP_SESSION_MAX];
    size_t n = t->n;
    memcpy(v, t->v, n * sizeof(v[0]));
    size_t live = 0;
    session *running[SP_SESSION_MAX];
    for (size_t i = 0; i < n; i++)
        if (!v[i]->ended)
            running[live++] = v[i];
    t->n = 0;
    t->stop = true;
    pthread_mutex_unlock(&t->mu);
    wake(t);
    pthread_join(t->thread, NULL);
    if (live)
        kill_trees(sb, running, live, NULL);
    for (size_t i = 0; i < n; i++)
        session_free(v[i]);
    close(t->wake_fd);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cond);
    free(t);
    sb->sessions = NULL;
}
