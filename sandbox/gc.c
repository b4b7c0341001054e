/* Orphaned containers: made by sandpod, owned by no sandbox any more.
 *
 * A container is an orphan when the state folder named by its
 * sandpod.state label is gone, or holds no sandbox.json, or a sandbox.json
 * that names another container (an interrupted create or recreate, a
 * process killed between the container and the save). A state folder whose
 * lock is held is busy — a create or a recreate may be half-way — and its
 * containers are left alone. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

#include "base.h"
#include "dir.h"
#include "json.h"
#include "sandpod/podman.h"
#include "sandbox_internal.h"
#include "sandpod/sandbox.h"

static const char *label_value(char **labels, const char *key)
{
    size_t n = strlen(key);
    for (char **l = labels; l && *l; l++)
        if (strncmp(*l, key, n) == 0 && (*l)[n] == '=')
            return *l + n + 1;
    return NULL;
}

/* The container id that <dir>/sandbox.json names; NULL when there is no
 * readable sandbox.json or it names none. */
static char *saved_container(const char *dir)
{
    cleanup_free char *path = sp_xasprintf("%s/sandbox.json", dir);
    sp_buf b = SP_BUF_INIT;
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 || sp_read_all(fd, &b, (size_t)1 << 20) < 0) {
        sp_buf_dispose(&b);
        return NULL;
    }
    cJSON *o = sp_json_parse(b.data ? b.data : "", b.len);
    sp_buf_dispose(&b);
    char *out = sp_json_strdup(o, "container_id");
    cJSON_Delete(o);
    return out;
}

static bool same_id(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), n = la < lb ? la : lb;
    return n >= 12 && strncmp(a, b, n) == 0;
}

/* Why the container is an orphan, or NULL when its sandbox owns it (or
 * may: the lock is held). */
static char *orphan_reason(const char *state, const char *id, const char *name)
{
    if (!state)
        return NULL;
    if (state[0] != '/')
        return NULL; /* not a label we wrote */
    cleanup_close int dfd = open(state, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return errno == ENOENT || errno == ENOTDIR ? sp_xstrdup("its state folder is gone") : NULL;
    cleanup_close int lfd = openat(dfd, "lock", O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (lfd >= 0 && flock(lfd, LOCK_EX | LOCK_NB) < 0)
        return NULL; /* busy: a create, start or remove is under way */
    cleanup_free char *saved = saved_container(state);
    if (!saved)
        return sp_xstrdup("its state folder has no sandbox.json naming a container");
    if (same_id(saved, id) || (name && strcmp(saved, name) == 0))
        return NULL;
    return sp_xasprintf("its sandbox now owns container %.12s", saved);
}

static sp_sandbox_orphan *add_item(sp_sandbox_orphans *o, sp_orphan_kind kind)
{
    o->items = sp_xrealloc(o->items, (o->n + 1) * sizeof(*o->items));
    sp_sandbox_orphan *it = &o->items[o->n++];
    memset(it, 0, sizeof(*it));
    it->kind = kind;
    return it;
}

/* Judge every sandpod container on the service (or, with `only`, those of
 * one state folder prefix) and remove the orphans unless dry_run. */
static int collect(sp_sandbox_orphans **out, sp_podman *p, const char *only, bool dry_run,
                   sp_error **err)
{
    const char *filter[] = {"sandpod=1", NULL};
    sp_podman_containers *list = NULL;
    int r = sp_podman_container_list(&list, p, filter, err);
    if (r < 0)
        return sp_err_wrap(err, r, "list sandpod containers");
    sp_sandbox_orphans *o = sp_xcalloc(1, sizeof(*o));
    for (size_t i = 0; i < list->n; i++) {
        const sp_podman_container_info *c = &list->items[i];
        const char *state = label_value(c->labels, "sandpod.state");
        if (!state) {
            o->unlabelled++;
            continue;
        }
        if (only && strncmp(state, only, strlen(only)) != 0)
            continue;
        char *why = orphan_reason(state, c->id, c->name);
        if (!why)
            continue;
        sp_sandbox_orphan *it = add_item(o, SP_ORPHAN_CONTAINER);
        it->container = sp_xstrdup(c->name ? c->name : c->id);
        it->state_dir = sp_xstrdup(state);
        it->reason = why;
        if (dry_run)
            continue;
        sp_error *e = NULL;
        int d = sp_podman_container_delete(p, c->id, true, true, &e);
        it->removed = d == 0 || d == SP_ENOTFOUND;
        if (!it->removed)
            it->error = sp_xstrdup(e ? e->message : sp_strerror(d));
        sp_error_free(e);
    }
    sp_podman_containers_free(list);
    *out = o;
    return 0;
}

/* ------------------------------------------------ what Podman lost -- */

/* A process of this user, from /proc. */
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
    sp_sandbox_orphan *it = add_item(o, kind);
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

void sp_sandbox_reap_lost(sp_sandbox_orphans *o, sp_podman *p, const char *name_prefix,
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

int sp_sandbox_gc(sp_sandbox_orphans **out, const char *podman_url, const char *state_root,
                  bool dry_run, sp_error **err)
{
    *out = NULL;
    sp_podman_opts po = SP_PODMAN_OPTS_INIT;
    po.url = podman_url;
    po.state_root = state_root;
    po.no_autostart = true; /* no service, no containers to collect */
    sp_podman *p = NULL;
    cleanup_free char *only = state_root ? sp_xasprintf("%s/sandboxes/", state_root) : NULL;
    int r = sp_podman_open(&p, &po, err);
    if (r == 0)
        r = collect(out, p, only, dry_run, err);
    if (r == 0)
        sp_sandbox_reap_lost(*out, p, "sandpod-", 60, dry_run);
    sp_podman_free(p);
    return r;
}

void sp_sandbox_sweep_orphans(sp_podman *p, const char *state_root)
{
    cleanup_free char *prefix = sp_xasprintf("%s/sandboxes/", state_root);
    sp_sandbox_orphans *o = NULL;
    if (collect(&o, p, prefix, false, NULL) == 0)
        sp_sandbox_orphans_free(o);
}

void sp_sandbox_orphans_free(sp_sandbox_orphans *o)
{
    if (!o)
        return;
    for (size_t i = 0; i < o->n; i++) {
        free(o->items[i].container);
        free(o->items[i].state_dir);
        free(o->items[i].reason);
        free(o->items[i].error);
    }
    free(o->items);
    free(o);
}
