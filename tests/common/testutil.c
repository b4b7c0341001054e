#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandpod/fs.h"
#include "sandpod/podman.h"
#include "fdtree.h"

char *tu_join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", a, b);
    return p;
}

char *tu_mkdtemp(void)
{
    const char *t = getenv("TMPDIR");
    char *tmpl = tu_join(t && *t ? t : "/tmp", "sandpod-test-XXXXXX");
    assert_non_null(mkdtemp(tmpl));
    return tmpl;
}

void tu_rmtree(const char *path)
{
    if (!path || !*path)
        return;
    char *dir = strdup(path);
    assert_non_null(dir);
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        dir[--n] = '\0';
    char *slash = strrchr(dir, '/');
    const char *name = slash ? slash + 1 : dir;
    const char *parent = !slash ? "." : slash == dir ? "/" : dir;
    if (slash && slash != dir)
        *slash = '\0';
    int dfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)sp_tree_remove(dfd, name, 0, NULL);
        close(dfd);
    }
    free(dir);
}

void tu_mkdeep(const char *dir, const char *top, const char *seg, unsigned depth)
{
    tu_mkdir(dir, top);
    char *p = tu_join(dir, top);
    int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        fail_msg("open %s: %s", p, strerror(errno));
    free(p);
    for (unsigned i = 0; i < depth; i++) {
        int f = openat(fd, "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (f < 0 || mkdirat(fd, seg, 0755) < 0)
            fail_msg("mkdeep level %u: %s", i, strerror(errno));
        close(f);
        int next = openat(fd, seg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (next < 0)
            fail_msg("mkdeep level %u: %s", i, strerror(errno));
        close(fd);
        fd = next;
    }
    close(fd);
}

int tu_grow_left;

void tu_grow_hook(int parent_fd, const char *name)
{
    if (strcmp(name, "grow") != 0 || tu_grow_left == 0)
        return;
    tu_grow_left--;
    int d = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    assert_true(d >= 0);
    char late[32];
    snprintf(late, sizeof(late), "late%d", tu_grow_left);
    int fd = openat(d, late, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    close(fd);
    close(d);
}

int tu_count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        n += de->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the one opendir holds */
}

void tu_write_n(const char *dir, const char *rel, const void *data, size_t len, unsigned mode)
{
    char *p = tu_join(dir, rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        fail_msg("open %s: %s", p, strerror(errno));
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    fchmod(fd, mode);
    close(fd);
    free(p);
}

void tu_write(const char *dir, const char *rel, const char *content, unsigned mode)
{
    tu_write_n(dir, rel, content, strlen(content), mode);
}

char *tu_read(const char *dir, const char *rel, size_t *len)
{
    char *p = tu_join(dir, rel);
    int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    free(p);
    if (fd < 0)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (n == cap)
            buf = realloc(buf, (cap *= 2) + 1);
        ssize_t r = read(fd, buf + n, cap - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

void tu_mkdir(const char *dir, const char *rel)
{
    char *p = tu_join(dir, rel);
    if (mkdir(p, 0755) < 0 && errno != EEXIST)
        fail_msg("mkdir %s: %s", p, strerror(errno));
    free(p);
}

void tu_symlink(const char *target, const char *dir, const char *rel)
{
    char *p = tu_join(dir, rel);
    if (symlink(target, p) < 0)
        fail_msg("symlink %s: %s", p, strerror(errno));
    free(p);
}

bool tu_exists(const char *dir, const char *rel)
{
    struct stat st;
    char *p = tu_join(dir, rel);
    bool r = lstat(p, &st) == 0;
    free(p);
    return r;
}

int tu_fsfx_setup(void **state)
{
    tu_fsfx *f = calloc(1, sizeof(*f));
    f->dir = tu_mkdtemp();
    f->outside = tu_mkdtemp();
    sp_error *err = NULL;
    if (sp_fs_open(&f->fs, f->dir, NULL, &err) < 0)
        fail_msg("sp_fs_open: %s", err ? err->message : "?");
    *state = f;
    return 0;
}

int tu_fsfx_teardown(void **state)
{
    tu_fsfx *f = *state;
    sp_fs_free(f->fs);
    tu_rmtree(f->dir);
    tu_rmtree(f->outside);
    free(f->dir);
    free(f->outside);
    free(f);
    return 0;
}

char *tu_need_podman_or_skip(void)
{
    sp_podman *p = NULL;
    sp_error *err = NULL;
    if (sp_podman_open(&p, NULL, &err) == 0 && sp_podman_ping(p, &err) == 0) {
        char *url = strdup(sp_podman_url(p));
        sp_podman_free(p);
        return url;
    }
    sp_podman_free(p);
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0) {
        fprintf(stderr, "podman is required under CI: %s\n", err->message);
        exit(1);
    }
    fprintf(stderr, "skipping: %s\n", err->message);
    sp_error_free(err);
    exit(77);
}

int tu_run_git(const char *store, const char *a1, const char *a2, const char *a3)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null >= 0 && !getenv("SP_TEST_VERBOSE")) {
            dup2(null, 1);
            dup2(null, 2);
        }
        char gd[4200];
        snprintf(gd, sizeof(gd), "--git-dir=%s", store);
        execlp("git", "git", gd, a1, a2, a3, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

int tu_git_in(const char *dir, const char *out, const char *a1, const char *a2, const char *a3,
              const char *a4)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (fd < 0 || null < 0 || dup2(fd, 1) < 0 || dup2(null, 2) < 0 || chdir(dir) < 0)
            _exit(126);
        clearenv();
        setenv("PATH", "/usr/local/bin:/usr/bin:/bin", 1);
        setenv("HOME", dir, 1);
        setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
        execlp("git", "git", a1, a2, a3, a4, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

bool tu_have_git(void)
{
    static int known = -1;
    if (known < 0)
        known = tu_run_git("/nonexistent", "--version", NULL, NULL) == 0;
    return known == 1;
}

void tu_assert_fsck(const char *store)
{
    if (!tu_have_git())
        return;
    int r = tu_run_git(store, "fsck", "--strict", "--no-dangling");
    if (r != 0)
        fail_msg("git fsck --strict failed (%d) on %s (rerun with SP_TEST_VERBOSE=1)", r, store);
}

/* ------------------------------------------------------- crash reports -- */

static const char *crash_context;

static void put_err(const char *s)
{
    ssize_t r = write(STDERR_FILENO, s, strlen(s));
    (void)r;
}

/* Async-signal-safe from here: write, vfork, execv, waitpid, raise. */
static void on_crash(int sig)
{
    char num[24];
    char *p = num + sizeof(num) - 1;
    *p = '\0';
    for (unsigned v = (unsigned)sig; p == num + sizeof(num) - 1 || v; v /= 10)
        *--p = (char)('0' + v % 10);
    put_err("\nCRASH: signal ");
    put_err(p);
    if (crash_context) {
        put_err("; in flight: ");
        put_err(crash_context);
    }
    put_err("\n");
    char pid[24];
    p = pid + sizeof(pid) - 1;
    *p = '\0';
    for (unsigned v = (unsigned)getpid(); v; v /= 10)
        *--p = (char)('0' + v % 10);
    /* vfork, not fork: fork's handlers take malloc's locks, which a
     * heap-corruption abort may hold. The child only execs. */
    pid_t c = vfork();
    if (c == 0) {
        /* gdb prints every thread's stack (debug builds: with lines). */
        dup2(STDERR_FILENO, STDOUT_FILENO);
        char *const argv[] = {
            "gdb", "-batch", "-nx", "-q", "-p", p, "-ex", "thread apply all bt 30", NULL};
        execv("/usr/bin/gdb", argv);
        put_err("CRASH: no /usr/bin/gdb for a backtrace\n");
        _exit(127);
    }
    if (c > 0)
        while (waitpid(c, NULL, 0) < 0 && errno == EINTR)
            ;
    signal(sig, SIG_DFL);
    raise(sig);
}

void tu_crash_reports(const char *context)
{
    crash_context = context;
    /* Let the child gdb attach under Yama's ptrace_scope=1. */
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#if defined(__SANITIZE_ADDRESS__)
    /* ASan reports faults itself, with more than a stack. */
    const int sigs[] = {SIGABRT};
#else
    const int sigs[] = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
#endif
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_crash;
        sa.sa_flags = SA_RESETHAND | SA_NODEFER;
        sigaction(sigs[i], &sa, NULL);
    }
}

int tu_children_of(pid_t parent, pid_t *first)
{
    DIR *d = opendir("/proc");
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        char path[300], buf[512] = "";
        snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        (void)!fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        /* pid (comm) state ppid: the comm may hold spaces, so after ')'. */
        const char *p = strrchr(buf, ')');
        int ppid = 0;
        if (p && sscanf(p + 1, " %*c %d", &ppid) == 1 && ppid == (int)parent) {
            if (first && n == 0)
                *first = (pid_t)strtol(de->d_name, NULL, 10);
            n++;
        }
    }
    closedir(d);
    return n;
}

unsigned tu_host_id(int pid, const char *which, unsigned inside)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/%s", pid, which);
    FILE *f = fopen(path, "re");
    if (!f)
        fail_msg("open %s: %s", path, strerror(errno));
    unsigned long in, out, count;
    while (fscanf(f, "%lu %lu %lu", &in, &out, &count) == 3)
        if (inside >= in && inside - in < count) {
            fclose(f);
            return (unsigned)(out + (inside - in));
        }
    fclose(f);
    fail_msg("%s maps no id %u", path, inside);
    return 0;
}
