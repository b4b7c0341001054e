/* What a Podman service lost: conmons of sandpod containers the service no
 * longer knows (it was killed while starting them) and services whose
 * socket folder is gone. Read from /proc; the gc's process part
 * (sp_local_ops.reap_lost). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dir.h"
#include "engine/local.h"
#include "podman_internal.h"

typedef struct proc {
    pid_t pid, ppid;
    char *args; /* argv, NUL-separated */
    size_t len;
    double age_s;
} proc;

static void proc_dispose(proc *pr)
{
    free(pr->args);
}

static double boot_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Read /proc/<name>; false when it is gone, not a process of this user, or
 * has no command line (a kernel thread). */
static bool proc_read(proc *pr, int procfd, const char *name)
{
    memset(pr, 0, sizeof(*pr));
    struct stat st;
    if (fstatat(procfd, name, &st, 0) < 0 || st.st_uid != geteuid())
        return false;
    cleanup_free char *stat_path = sp_xasprintf("%s/stat", name);
    cleanup_free char *cmd_path = sp_xasprintf("%s/cmdline", name);
    sp_buf b = SP_BUF_INIT;
    cleanup_close int sfd = openat(procfd, stat_path, O_RDONLY | O_CLOEXEC);
    if (sfd < 0 || sp_read_all(sfd, &b, 4096) < 0 || !b.len) {
        sp_buf_dispose(&b);
        return false;
    }
    sp_buf_addc(&b, '\0');
    /* pid (comm) state ppid ... starttime is field 22; comm may hold
     * spaces and parentheses, so count from the last ')'. */
    const char *p = strrchr(b.data, ')');
    int ppid = 0;
    unsigned long long start = 0;
    bool ok = p && sscanf(p + 1,
                          " %*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
                          "%*d %*d %llu",
                          &ppid, &start) == 2;
    sp_buf_dispose(&b);
    cleanup_close int cfd = ok ? openat(procfd, cmd_path, O_RDONLY | O_CLOEXEC) : -1;
    if (cfd < 0 || sp_read_all(cfd, &b, (size_t)1 << 20) < 0 || !b.len) {
        sp_buf_dispose(&b);
        return false;
    }
    if (b.data[b.len - 1] != '\0')
        sp_buf_addc(&b, '\0');
    pr->pid = (pid_t)strtol(name, NULL, 10);
    pr->ppid = ppid;
    pr->len = b.len;
    pr->args = sp_buf_steal(&b);
    pr->age_s = boot_seconds() - (double)start / (double)sysconf(_SC_CLK_TCK);
    return true;
}

static const char *proc_argv0_base(const proc *pr)
{
    const char *slash = strrchr(pr->args, '/');
    return slash ? slash + 1 : pr->args;
}

/* The argument after `flag`, or NULL. */
static const char *proc_arg_after(const proc *pr, const char *flag)
{
    for (const char *a = pr->args; a < pr->args + pr->len; a += strlen(a) + 1) {
        const char *next = a + strlen(a) + 1;
        if (strcmp(a, flag) == 0)
            return next < pr->args + pr->len ? next : NULL;
    }
    return NULL;
}

static const char *proc_last_arg(const proc *pr)
{
    const char *last = pr->args;
    for (const char *a = pr->args; a < pr->args + pr->len; a += strlen(a) + 1)
        last = a;
    return last;
}

/* Every process of this user, read once. */
typedef struct procs {
    proc *v;
    size_t n;
} procs;

static void procs_read(procs *ps)
{
    memset(ps, 0, sizeof(*ps));
    cleanup_close int procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    sp_dirnames pids = SP_DIRNAMES_INIT;
    if (procfd < 0 || sp_dir_read(&pids, procfd, SP_DIR_UNSORTED, 0) < 0)
        return;
    for (size_t i = 0; i < pids.n; i++) {
        const char *name = sp_dirnames_name(&pids, i);
        proc pr;
        if (name[0] < '1' || name[0] > '9' || !proc_read(&pr, procfd, name))
            continue;
        ps->v = sp_xrealloc(ps->v, (ps->n + 1) * sizeof(*ps->v));
        ps->v[ps->n++] = pr;
    }
    sp_dirnames_dispose(&pids);
}

static void procs_dispose(procs *ps)
{
    for (size_t i = 0; i < ps->n; i++)
        proc_dispose(&ps->v[i]);
    free(ps->v);
}

/* SIGKILL every process whose parent is `parent`. */
static void kill_children(const procs *ps, pid_t parent)
{
    for (size_t i = 0; i < ps->n; i++)
        if (ps->v[i].ppid == parent)
            kill(ps->v[i].pid, SIGKILL);
}

/* `runtime delete --force id`, waited for; the runtime path is the one
 * conmon was given. */
static void runtime_delete(const char *runtime, const char *id)
{
    if (runtime[0] != '/' || access(runtime, X_OK) < 0)
        return;
    char *const argv[] = {(char *)runtime, "delete", "--force", (char *)id, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    extern char **environ;
    if (posix_spawn(&pid, runtime, &fa, NULL, argv, environ) == 0)
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    posix_spawn_file_actions_destroy(&fa);
}

/* Add a process item (taking `why`) and, unless dry_run, send it signo;
 * false in a dry run. */
static bool add_process(sp_sandbox_orphans *o, sp_orphan_kind kind, const char *what, pid_t pid,
                        char *why, int signo, bool dry_run)
{
    sp_sandbox_orphan *it = sp_orphans_add(o, kind);
    it->container = sp_xstrdup(what);
    it->pid = pid;
    it->reason = why;
    if (dry_run)
        return false;
    it->removed = kill(pid, signo) == 0 || errno == ESRCH;
    if (!it->removed)
        it->error = sp_xasprintf("kill %d: %s", (int)pid, strerror(errno));
    return true;
}

/* A conmon of a sandpod container (its name starts with name_prefix, its
 * bundle lies in the service's store) that the service does not know. */
static void runtime_orphan(sp_sandbox_orphans *o, sp_podman *p, const procs *ps, const proc *pr,
                           const char *store, const char *name_prefix, bool dry_run)
{
    const char *id = proc_arg_after(pr, "-c"), *name = proc_arg_after(pr, "-n");
    const char *runtime = proc_arg_after(pr, "-r"), *bundle = proc_arg_after(pr, "-b");
    size_t sl = strlen(store);
    if (!id || !name || !runtime || !bundle || strncmp(name, name_prefix, strlen(name_prefix)) ||
        strncmp(bundle, store, sl) || bundle[sl] != '/')
        return;
    sp_podman_container_info *info = NULL;
    int r = sp_podman_container_inspect(&info, p, id, NULL);
    sp_podman_container_info_free(info);
    if (r != SP_ENOTFOUND)
        return;
    if (!dry_run)
        kill_children(ps, pr->pid);
    char *why = sp_xasprintf("Podman does not know this container, yet its conmon (pid %d) runs: "
                             "a service killed while it started the container left it",
                             (int)pr->pid);
    if (add_process(o, SP_ORPHAN_RUNTIME, name, pr->pid, why, SIGKILL, dry_run))
        runtime_delete(runtime, id);
}

/* A `podman ... system service ... unix://DIR/SOCKET` whose DIR is gone
 * (a service still starting has its folder, if not yet its socket). */
static void lost_service(sp_sandbox_orphans *o, const proc *pr, bool dry_run)
{
    const char *url = proc_last_arg(pr);
    const char *sys = proc_arg_after(pr, "system");
    if (!sys || strcmp(sys, "service") != 0 || strncmp(url, "unix:///", 8) != 0)
        return;
    cleanup_free char *dir = sp_xstrdup(url + 7);
    *strrchr(dir, '/') = '\0';
    struct stat st;
    if (!*dir || lstat(dir, &st) == 0 || errno != ENOENT)
        return;
    char *why = sp_xasprintf("a podman service (pid %d) whose socket folder is gone: nobody can "
                             "reach it",
                             (int)pr->pid);
    add_process(o, SP_ORPHAN_SERVICE, url, pr->pid, why, SIGTERM, dry_run);
}

void sp_podman_reap_lost(sp_sandbox_orphans *o, sp_podman *p, const char *name_prefix,
                         double min_age_s, bool dry_run)
{
    cleanup_free char *store = NULL;
    if (sp_podman_graph_root(&store, p, NULL) < 0)
        store = NULL; /* then only services */
    procs ps;
    procs_read(&ps);
    pid_t self = getpid();
    for (size_t i = 0; i < ps.n; i++) {
        const proc *pr = &ps.v[i];
        if (pr->pid == self || pr->age_s < min_age_s)
            continue;
        const char *base = proc_argv0_base(pr);
        if (store && strcmp(base, "conmon") == 0)
            runtime_orphan(o, p, &ps, pr, store, name_prefix, dry_run);
        else if (strcmp(base, "podman") == 0)
            lost_service(o, pr, dry_run);
    }
    procs_dispose(&ps);
}
