/* The registry of live sessions' host pids, and the kills that exit and
 * signal handlers run from it (sp_session_kill_all_signal_safe()). */
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>

#include "session_internal.h"

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
void sp_sess_host_kill(const int *leaders, size_t nl, const char *const *tokens, size_t nt)
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
        sp_sess_host_kill(leaders, nl, tokens, nt);
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
int sp_sess_registry_reserve(const char *token)
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
bool sp_sess_registry_set_pid(int slot, int pid)
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

void sp_sess_registry_remove(int slot)
{
    if (slot < 0)
        return;
    pthread_mutex_lock(&reg_mu);
    atomic_store(&registry[slot].pid, 0);
    pthread_mutex_unlock(&reg_mu);
}

/* The verified host pid of a registered session's leader, or 0. */
int sp_sess_registry_leader(int slot)
{
    if (slot < 0)
        return 0;
    int pid = atomic_load(&registry[slot].pid);
    return pid > 0 && same_process(pid, atomic_load(&registry[slot].start)) ? pid : 0;
}
