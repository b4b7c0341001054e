/* Finding a Podman service, or starting one on a private socket in the state
 * root. The started service is detached (double fork + setsid) so it
 * outlives the caller and is reused by later calls. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "podman_internal.h"

extern char **environ;

#define INSTALL_HINT "apt-get install podman runc catatonit"

char *sp_podman_start_hint_for(const char *sock, bool root, const char *runtime_dir,
                               const char *exe, const char *build_dir, const char *script)
{
    cleanup_free char *def = root          ? sp_xstrdup("/run/podman/podman.sock")
                             : runtime_dir ? sp_xasprintf("%s/podman/podman.sock", runtime_dir)
                                           : NULL;
    sp_buf b = SP_BUF_INIT;
    if (!sock || (def && strcmp(sock, def) == 0))
        sp_buf_printf(&b, "start it with 'systemctl %sstart podman.socket'", root ? "" : "--user ");
    else
        sp_buf_printf(&b, "start it with 'podman system service --time=0 unix://%s &'", sock);
    /* The repository's script exists only next to a build: say it there. */
    size_t bl = build_dir ? strlen(build_dir) : 0;
    if (exe && bl && strncmp(exe, build_dir, bl) == 0 && exe[bl] == '/' && script &&
        access(script, X_OK) == 0)
        sp_buf_printf(&b, " (in this build tree: '%s start%s%s')", script, sock ? " " : "",
                      sock ? sock : "");
    return sp_buf_steal(&b);
}

char *sp_podman_start_hint(const char *sock)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[n > 0 ? n : 0] = '\0';
#if defined(SANDPOD_BUILD_DIR) && defined(SANDPOD_SOURCE_DIR)
    const char *build = SANDPOD_BUILD_DIR,
               *script = SANDPOD_SOURCE_DIR "/contrib/podman-service.sh";
#else
    const char *build = NULL, *script = NULL;
#endif
    return sp_podman_start_hint_for(sock, geteuid() == 0, getenv("XDG_RUNTIME_DIR"), exe, build,
                                    script);
}

static int mkdir_p(const char *path, sp_error **err)
{
    cleanup_free char *p = sp_xstrdup(path);
    for (char *c = p + 1;; c++) {
        if (*c == '/' || *c == '\0') {
            char saved = *c;
            *c = '\0';
            if (mkdir(p, 0700) < 0 && errno != EEXIST)
                return sp_err_errno(err, errno, "create state folder", p);
            *c = saved;
            if (!saved)
                break;
        }
    }
    return 0;
}

int sp_podman_unshare_remove(const char *path, sp_error **err)
{
    cleanup_free char *podman = sp_find_in_path("podman");
    if (!podman)
        return sp_err_set(err, SP_ENOTFOUND, 0, "podman is not installed; remove %s by hand", path);
    pid_t pid = fork();
    if (pid < 0)
        return sp_err_errno(err, errno, "fork", "podman unshare");
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
            dup2(null, 2);
        }
        /* rm -rf never follows a symlink (coreutils walks with fts,
         * FTS_PHYSICAL, and openat). */
        execl(podman, "podman", "unshare", "rm", "-rf", "--", path, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    struct stat sb;
    if (lstat(path, &sb) == 0 || errno != ENOENT)
        return sp_err_set(err, SP_ERROR, 0,
                          "podman unshare rm -rf %s left it in place (exit %d); remove it by hand",
                          path, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static size_t discard(char *data, size_t size, size_t nmemb, void *ud)
{
    sp_buf *b = ud;
    if (b->len < 64)
        sp_buf_add(b, data, size * nmemb < 64 ? size * nmemb : 64);
    return size * nmemb;
}

/* Ping one address. 0 when it answers like Podman; otherwise *detail says
 * why not (free()). */
static int probe(const sp_podman_addr *a, unsigned timeout_ms, char **detail)
{
    *detail = NULL;
    sp_error *e = NULL;
    if (sp_podman_curl_init(&e) < 0) {
        *detail = sp_xstrdup(e->message);
        sp_error_free(e);
        return -1;
    }
    CURL *c = curl_easy_init();
    if (!c) {
        *detail = sp_xstrdup("libcurl could not make a handle");
        return -1;
    }
    char ebuf[CURL_ERROR_SIZE] = "";
    cleanup_free char *url = NULL;
    if (a->socket_path) {
        url = sp_xstrdup("http://d" SP_PODMAN_API "/_ping");
        curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, a->socket_path);
    } else if (strchr(a->host, ':')) {
        url = sp_xasprintf("http://[%s]:%d%s/_ping", a->host, a->port, SP_PODMAN_API);
    } else {
        url = sp_xasprintf("http://%s:%d%s/_ping", a->host, a->port, SP_PODMAN_API);
    }
    sp_buf body = SP_BUF_INIT;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ebuf);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK)
        *detail = sp_podman_curl_detail(c, rc, ebuf);
    curl_easy_cleanup(c);
    sp_buf_dispose(&body);
    if (rc != CURLE_OK)
        return rc == CURLE_OPERATION_TIMEDOUT ? -2 : -1;
    if (status != 200) {
        *detail =
            sp_xasprintf("answered HTTP %ld to a libpod ping (not a Podman 4 service?)", status);
        return -1;
    }
    return 0;
}

static bool is_socket(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* The last lines of a log, on one line, for an error message. */
static char *log_tail(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sp_xstrdup("(no log)");
    char buf[600];
    off_t end = lseek(fd, 0, SEEK_END);
    off_t start = end > (off_t)sizeof(buf) - 1 ? end - (off_t)sizeof(buf) + 1 : 0;
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, start);
    close(fd);
    if (n <= 0)
        return sp_xstrdup("(empty log)");
    buf[n] = '\0';
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t')
            buf[i] = ' ';
    char *s = buf;
    while (*s == ' ')
        s++;
    size_t len = strlen(s);
    while (len && s[len - 1] == ' ')
        s[--len] = '\0';
    return sp_xstrdup(s);
}

/* The service must not be told it is remote or socket-activated by what
 * the caller's environment happens to hold. */
static bool env_dropped(const char *kv)
{
    static const char *const drop[] = {
        "CONTAINER_HOST=", "CONTAINER_CONNECTION=", "LISTEN_FDS=", "LISTEN_PID=",
        "LISTEN_FDNAMES=", "NOTIFY_SOCKET=",        NULL};
    for (size_t i = 0; drop[i]; i++)
        if (strncmp(kv, drop[i], strlen(drop[i])) == 0)
            return true;
    return false;
}

typedef struct spawn_msg {
    int kind; /* 1: pid of the service, 2: errno of a failed exec/fork */
    int value;
} spawn_msg;

/* Start argv detached: its own session, stdin from /dev/null, stdout and
 * stderr appended to logpath, no fd but 0-2 inherited. Between fork and
 * exec only async-signal-safe calls are made (the caller may be threaded). */
static int spawn_detached(pid_t *out_pid, char *const argv[], char *const envp[],
                          const char *logpath, const char *cwd, sp_error **err)
{
    *out_pid = -1;
    int pfd[2] = {-1, -1};
    cleanup_close int logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (logfd < 0)
        return sp_err_errno(err, errno, "open podman service log", logpath);
    cleanup_close int nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (nullfd < 0)
        return sp_err_errno(err, errno, "open", "/dev/null");
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return sp_err_errno(err, errno, "start podman service", "pipe");
    long maxfd = sysconf(_SC_OPEN_MAX);
    if (maxfd < 0 || maxfd > 65536)
        maxfd = 65536;

    pid_t c1 = fork();
    if (c1 < 0) {
        int e = errno;
        close(pfd[0]);
        close(pfd[1]);
        return sp_err_errno(err, e, "start podman service", "fork");
    }
    if (c1 == 0) {
        setsid();
        pid_t c2 = fork();
        if (c2 != 0) {
            spawn_msg m = {c2 > 0 ? 1 : 2, c2 > 0 ? (int)c2 : errno};
            ssize_t w SP_UNUSED = write(pfd[1], &m, sizeof(m));
            _exit(c2 > 0 ? 0 : 1);
        }
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_DFL;
        for (int s = 1; s < NSIG; s++)
            sigaction(s, &sa, NULL);
        if (dup2(nullfd, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0) {
            spawn_msg m = {2, errno};
            ssize_t w SP_UNUSED = write(pfd[1], &m, sizeof(m));
            _exit(127);
        }
        if (cwd && chdir(cwd) < 0) {
            /* Not fatal: the service needs no particular cwd. */
        }
        /* Keep only 0-2 and the report pipe (which is CLOEXEC). */
        int keep = pfd[1];
        if (syscall(SYS_close_range, 3u, (unsigned)keep - 1, 0u) < 0 ||
            syscall(SYS_close_range, (unsigned)keep + 1, ~0u, 0u) < 0) {
            for (int fd = 3; fd < maxfd; fd++)
                if (fd != keep)
                    close(fd);
        }
        execve(argv[0], argv, envp);
        spawn_msg m = {2, errno};
        ssize_t w SP_UNUSED = write(pfd[1], &m, sizeof(m));
        _exit(127);
    }
    close(pfd[1]);
    int st;
    while (waitpid(c1, &st, 0) < 0 && errno == EINTR)
        ;
    pid_t pid = -1;
    int fail = 0;
    spawn_msg m;
    for (;;) {
        ssize_t n = read(pfd[0], &m, sizeof(m));
        if (n < 0 && errno == EINTR)
            continue;
        if (n != (ssize_t)sizeof(m))
            break; /* EOF: the exec succeeded and closed the pipe */
        if (m.kind == 1)
            pid = m.value;
        else
            fail = m.value ? m.value : EIO;
    }
    close(pfd[0]);
    if (fail)
        return sp_err_errno(err, fail, "start podman service", argv[0]);
    if (pid <= 0)
        return sp_err_set(err, SP_EPODMAN, 0, "start podman service: the launcher failed");
    *out_pid = pid;
    return 0;
}

static int lock_root(int *out_fd, const char *root, unsigned timeout_ms, sp_error **err)
{
    *out_fd = -1;
    cleanup_free char *path = sp_xasprintf("%s/podman.lock", root);
    cleanup_close int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return sp_err_errno(err, errno, "open lock", path);
    int64_t deadline = sp_now_ms() + timeout_ms;
    while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno != EWOULDBLOCK && errno != EINTR)
            return sp_err_errno(err, errno, "lock", path);
        if (sp_now_ms() >= deadline)
            return sp_err_set(err, SP_ETIMEOUT, ETIMEDOUT,
                              "another process holds %s for longer than %ums", path, timeout_ms);
        sleep_ms(50);
    }
    *out_fd = steal_fd(&fd);
    return 0;
}

/* Run `podman [--runtime R] system service --time=0 unix://<sock>` detached
 * and record its pid. */
static int launch(pid_t *out_pid, const char *podman, const sp_podman_opts *o, const char *root,
                  const char *sock, const char *logpath, sp_error **err)
{
    const char *runtime = o->runtime;
    cleanup_free char *runc = NULL;
    if (!runtime) {
        /* crun fails on some hosts Podman 4.3 runs on; runc works wherever
         * it is installed, so prefer it. */
        runc = sp_find_in_path("runc");
        runtime = runc ? "runc" : NULL;
    }
    cleanup_free char *listen = sp_xasprintf("unix://%s", sock);
    char *argv[8];
    int ac = 0;
    argv[ac++] = (char *)podman;
    if (runtime) {
        argv[ac++] = (char *)"--runtime";
        argv[ac++] = (char *)runtime;
    }
    argv[ac++] = (char *)"system";
    argv[ac++] = (char *)"service";
    argv[ac++] = (char *)"--time=0";
    argv[ac++] = listen;
    argv[ac] = NULL;

    sp_strv env = {0};
    for (char **e = environ; e && *e; e++)
        if (!env_dropped(*e))
            sp_strv_push(&env, sp_xstrdup(*e));
    if (!env.v)
        sp_strv_push(&env, sp_xstrdup("PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"));
    int r = spawn_detached(out_pid, argv, env.v, logpath, root, err);
    sp_strv_dispose(&env);
    if (r < 0)
        return r;
    cleanup_free char *pidpath = sp_xasprintf("%s/podman.pid", root);
    cleanup_close int pfd =
        open(pidpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (pfd >= 0) {
        char line[32];
        int n = snprintf(line, sizeof(line), "%d\n", (int)*out_pid);
        sp_write_all(pfd, line, (size_t)n);
    }
    return 0;
}

/* Wait until a just-started service answers, or fail early when it died. */
static int wait_ready(const sp_podman_addr *a, pid_t pid, const sp_podman_opts *o,
                      const char *logpath, sp_error **err)
{
    int64_t deadline = sp_now_ms() + o->start_timeout_ms;
    unsigned ping_ms = o->connect_timeout_ms < 1000 ? o->connect_timeout_ms : 1000;
    for (;;) {
        char *detail = NULL;
        if (is_socket(a->socket_path) && probe(a, ping_ms, &detail) == 0)
            return 0;
        if (kill(pid, 0) < 0 && errno == ESRCH) {
            free(detail);
            cleanup_free char *tail = log_tail(logpath);
            return sp_err_set(err, SP_EPODMAN, 0,
                              "podman service exited right after start: %s (log: %s)", tail,
                              logpath);
        }
        if (sp_now_ms() >= deadline) {
            cleanup_free char *tail = log_tail(logpath);
            int r = sp_err_set(err, SP_EPODMAN, ETIMEDOUT,
                               "podman service at %s did not answer within %ums of its start: "
                               "%s; log %s: %s",
                               a->url, o->start_timeout_ms, detail ? detail : "no socket yet",
                               logpath, tail);
            free(detail);
            return r;
        }
        free(detail);
        sleep_ms(50);
    }
}

/* Start a service on <root>/podman.sock unless another process just did. */
static int start_service(sp_podman_addr *out, bool *started, const sp_podman_opts *o,
                         const char *root, const char *tried, sp_error **err)
{
    cleanup_free char *podman = sp_find_in_path(o->podman_path ? o->podman_path : "podman");
    if (!podman)
        return sp_err_set(err, SP_EPODMAN, ENOENT,
                          "no podman service answered%s and podman is not installed: " INSTALL_HINT,
                          tried);
    int r = mkdir_p(root, err);
    if (r < 0)
        return r;
    cleanup_free char *sock = sp_xasprintf("%s/podman.sock", root);
    cleanup_free char *logpath = sp_xasprintf("%s/podman.log", root);
    sp_podman_addr a;
    r = sp_podman_addr_parse(&a, sock, err);
    if (r < 0)
        return r;
    cleanup_close int lockfd = -1;
    r = lock_root(&lockfd, root, o->start_timeout_ms, err);
    if (r < 0) {
        sp_podman_addr_dispose(&a);
        return r;
    }
    char *detail = NULL;
    if (is_socket(sock) && probe(&a, o->connect_timeout_ms, &detail) == 0) {
        *out = a;
        return 0;
    }
    free(detail);
    if (unlink(sock) < 0 && errno != ENOENT) {
        sp_podman_addr_dispose(&a);
        return sp_err_errno(err, errno, "remove stale podman socket", sock);
    }
    pid_t pid = -1;
    r = launch(&pid, podman, o, root, sock, logpath, err);
    if (r == 0)
        r = wait_ready(&a, pid, o, logpath, err);
    if (r < 0) {
        sp_podman_addr_dispose(&a);
        return r;
    }
    *out = a;
    *started = true;
    return 0;
}

int sp_podman_find_or_start(sp_podman_addr *out, bool *started, const sp_podman_opts *opts,
                            sp_error **err)
{
    memset(out, 0, sizeof(*out));
    *started = false;
    sp_podman_opts o = *opts;
    if (!o.start_timeout_ms)
        o.start_timeout_ms = 30000;

    const char *explicit_url = o.url;
    if (!explicit_url) {
        const char *e = getenv("SANDPOD_URL");
        if (e && *e)
            explicit_url = e;
    }
    if (explicit_url) {
        sp_podman_addr a;
        int r = sp_podman_addr_parse(&a, explicit_url, err);
        if (r < 0)
            return r;
        char *detail = NULL;
        int pr = probe(&a, o.connect_timeout_ms, &detail);
        if (pr == 0) {
            *out = a;
            return 0;
        }
        /* A refused connect fails at once: only a timeout took the time. */
        cleanup_free char *how =
            pr == -2 ? sp_xasprintf("did not answer within %ums", o.connect_timeout_ms)
                     : sp_xstrdup("is not answering");
        if (a.socket_path) {
            cleanup_free char *hint = sp_podman_start_hint(a.socket_path);
            r = sp_err_set(err, SP_EPODMAN, 0, "podman service at %s %s: %s; %s", a.url, how,
                           detail, hint);
        } else
            r = sp_err_set(err, SP_EPODMAN, 0,
                           "podman service at %s %s: %s; start it there "
                           "with podman system service --time=0 %s",
                           a.url, how, detail, a.url);
        free(detail);
        sp_podman_addr_dispose(&a);
        return r;
    }

    cleanup_free char *root = NULL;
    if (o.state_root && *o.state_root) {
        root = sp_xstrdup(o.state_root);
    } else {
        int sr = sp_state_root(&root, err);
        if (sr < 0)
            return sr;
    }

    sp_strv cands = {0};
    if (!o.private_service) {
        const char *ch = getenv("CONTAINER_HOST");
        if (ch && *ch)
            sp_strv_push(&cands, sp_xstrdup(ch));
        /* A non-root caller's own (rootless) service first: the rootful
         * socket is root's, and a caller who may reach it (group access)
         * would otherwise get rootful containers by accident. */
        const char *xrd = getenv("XDG_RUNTIME_DIR");
        if (geteuid() != 0 && xrd && *xrd == '/')
            sp_strv_push(&cands, sp_xasprintf("unix://%s/podman/podman.sock", xrd));
        sp_strv_push(&cands, sp_xstrdup("unix:///run/podman/podman.sock"));
        if (geteuid() == 0 && xrd && *xrd == '/')
            sp_strv_push(&cands, sp_xasprintf("unix://%s/podman/podman.sock", xrd));
    }
    sp_strv_push(&cands, sp_xasprintf("unix://%s/podman.sock", root));

    sp_buf tried = SP_BUF_INIT;
    int r = SP_EPODMAN;
    for (size_t i = 0; i < cands.n; i++) {
        sp_podman_addr a;
        if (sp_podman_addr_parse(&a, cands.v[i], NULL) < 0) {
            sp_buf_printf(&tried, "%s%s (unsupported)", tried.len ? ", " : "", cands.v[i]);
            continue;
        }
        if (a.socket_path && !is_socket(a.socket_path)) {
            sp_podman_addr_dispose(&a);
            continue;
        }
        char *detail = NULL;
        if (probe(&a, o.connect_timeout_ms, &detail) == 0) {
            *out = a;
            r = 0;
            break;
        }
        sp_buf_printf(&tried, "%s%s (%s)", tried.len ? ", " : "", a.url, detail);
        free(detail);
        sp_podman_addr_dispose(&a);
    }
    sp_strv_dispose(&cands);
    if (r == 0) {
        sp_buf_dispose(&tried);
        return 0;
    }
    cleanup_free char *tried_s =
        tried.len ? sp_xasprintf(" (tried %s)", tried.data) : sp_xstrdup("");
    sp_buf_dispose(&tried);
    if (o.no_autostart) {
        cleanup_free char *hint = sp_podman_start_hint(NULL);
        return sp_err_set(err, SP_EPODMAN, 0, "no podman service answered%s; %s", tried_s, hint);
    }
    return start_service(out, started, &o, root, tried_s, err);
}
