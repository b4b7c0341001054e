/* The agent a new container runs as pid 1: sandpod-agent found where this
 * library or program is installed (only from a path nobody but root and us
 * can change) and copied into the sandbox's state folder, bind-mounted
 * from there (agent_install.h). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_install.h"
#include "fastpath.h"
#include "sandbox_internal.h"

/* Where the lookup stands: the binary found (an fd and the path it was
 * found at), or why there is none and where one should go. */
typedef struct agent_found {
    int fd;
    char *path;
    char *refused; /* the first candidate that exists but is not used, and why */
    char *want;    /* where this library expects it */
    bool off;      /* SANDPOD_AGENT=none */
} agent_found;

/* Any object of this library: its address says which file holds it. */
static const char lib_anchor = 0;

static bool trusted_owner(const struct stat *st)
{
    return st->st_uid == 0 || st->st_uid == geteuid();
}

/* Why one step of a trusted path is not, or NULL when it is. A sticky
 * folder (/tmp) may be writable by all: others cannot rename or remove
 * what is not theirs in it, and the next step must be ours or root's. */
static char *untrusted_step(const char *path, const struct stat *st)
{
    if (!trusted_owner(st) && geteuid() == 0)
        return sp_xasprintf("%s is owned by uid %u, not by root", path, (unsigned)st->st_uid);
    if (!trusted_owner(st))
        return sp_xasprintf("%s is owned by uid %u, not by root or uid %u", path,
                            (unsigned)st->st_uid, (unsigned)geteuid());
    if ((st->st_mode & 022) && !(S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX)))
        return sp_xasprintf("%s is writable by group or others", path);
    return NULL;
}

/* Contract: *out = a read-only fd on the executable regular file `path`
 * names, only when nobody but root and us may change it: the file and
 * every folder from / down to it are owned by root or our euid and none is
 * writable by group or others (a sticky folder excepted, see
 * untrusted_step()). Someone who may write one folder on the way could
 * put a binary of theirs there, and every container would run it as pid
 * 1, seeing each command and its environment.
 *
 * Symbolic links on the way are resolved first; the real path is then
 * walked one component at a time from / with O_NOFOLLOW (a link swapped
 * in meanwhile is refused, not followed), and the file reached must be
 * the one the path named. The copy is read from *out, never by name.
 *
 * Returns 0; -1 when no such file exists (*why NULL); -1 with *why saying
 * what is wrong. */
static int open_trusted(int *out, char **why, const char *path)
{
    *out = -1;
    *why = NULL;
    cleanup_close int named = open(path, O_PATH | O_CLOEXEC);
    if (named < 0)
        return errno == ENOENT || errno == ENOTDIR
                   ? -1
                   : (*why = sp_xasprintf("%s: %s", path, strerror(errno)), -1);
    struct stat want;
    if (fstat(named, &want) < 0 || !S_ISREG(want.st_mode)) {
        *why = sp_xasprintf("%s is not a regular file", path);
        return -1;
    }
    char real[PATH_MAX];
    cleanup_free char *self = sp_xasprintf("/proc/self/fd/%d", named);
    ssize_t n = readlink(self, real, sizeof(real) - 1);
    if (n <= 0 || real[0] != '/') {
        *why = sp_xasprintf("%s: cannot tell its real path", path);
        return -1;
    }
    real[n] = '\0';

    cleanup_close int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (dir < 0 || fstat(dir, &st) < 0 || (*why = untrusted_step("/", &st)))
        return -1;
    char *name = real + 1;
    for (;;) {
        char *slash = strchr(name, '/');
        bool last = !slash;
        if (slash)
            *slash = '\0';
        /* O_NONBLOCK: a FIFO put there must not hang us (it is no match). */
        int fd =
            openat(dir, name,
                   (last ? O_RDONLY | O_NONBLOCK : O_PATH | O_DIRECTORY) | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            *why =
                sp_xasprintf("%s: %s", real, errno == ELOOP ? "changed under us" : strerror(errno));
            return -1;
        }
        close(dir);
        dir = fd;
        if (fstat(dir, &st) < 0 || (*why = untrusted_step(real, &st)))
            return -1;
        if (last)
            break;
        *slash = '/';
        name = slash + 1;
    }
    if (st.st_dev != want.st_dev || st.st_ino != want.st_ino) {
        *why = sp_xasprintf("%s changed under us", path);
        return -1;
    }
    if (!(st.st_mode & 0111)) {
        *why = sp_xasprintf("%s is not executable", path);
        return -1;
    }
    *out = steal_fd(&dir);
    return 0;
}

/* Try one candidate; when it is not used, note why (the first such). */
static void try_agent(agent_found *a, const char *path)
{
    char *why = NULL;
    if (open_trusted(&a->fd, &why, path) == 0) {
        a->path = sp_xstrdup(path);
        return;
    }
    /* "X is not used: X is ..." says X once. */
    size_t len = strlen(path);
    if (why && !a->refused)
        a->refused = strncmp(why, path, len) == 0 && why[len] == ' '
                         ? sp_xstrdup(why)
                         : sp_xasprintf("%s is not used: %s", path, why);
    free(why);
}

/* $SANDPOD_AGENT: the caller's choice, used as given. */
static void named_agent(agent_found *a, const char *e)
{
    if (strcmp(e, "none") == 0) {
        a->off = true;
        return;
    }
    struct stat st;
    cleanup_close int fd = open(e, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111)) {
        a->fd = steal_fd(&fd);
        a->path = sp_xstrdup(e);
    } else {
        a->refused = sp_xasprintf("SANDPOD_AGENT=%s is not an executable file", e);
    }
}

/* The folder of the file a path names (a copy), or NULL. */
static char *folder_of(const char *file)
{
    const char *slash = strrchr(file, '/');
    return file[0] == '/' && slash ? sp_xstrndup(file, (size_t)(slash - file)) : NULL;
}

/* <dir>/../libexec/sandpod/sandpod-agent, where `..` is dir's parent as
 * written: the install tree dir is in, even when dir is a link. */
static char *libexec_beside(const char *dir)
{
    const char *slash = strrchr(dir, '/');
    if (!slash)
        return NULL;
    return sp_xasprintf("%.*s/libexec/sandpod/sandpod-agent", (int)(slash - dir), dir);
}

/* The folder this library was loaded from; NULL when it is linked into the
 * program (sandpod itself), which /proc/self/exe covers. */
static char *library_folder(void)
{
    Dl_info info;
    struct link_map *map = NULL;
    if (!dladdr1(&lib_anchor, &info, (void **)&map, RTLD_DL_LINKMAP) || !map || !map->l_name ||
        !map->l_name[0] || !info.dli_fname)
        return NULL;
    return folder_of(info.dli_fname);
}

static char *program_folder(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return NULL;
    exe[n] = '\0';
    return folder_of(exe);
}

/* The agent binary to give a new container, the first found of:
 *   $SANDPOD_AGENT ("none" turns the fast path off; used as given, and
 *   nothing else is tried);
 *   ../libexec/sandpod/sandpod-agent from the folder of libsandpod.so;
 *   ../libexec/sandpod/sandpod-agent from the running program's folder;
 *   the configured install path;
 *   sandpod-agent beside the running program (a build tree run in place).
 * So an install tree is found wherever it was installed or moved to. All
 * but the first must pass open_trusted(). The library is never told where
 * a build folder is. */
static void find_agent(agent_found *a)
{
    *a = (agent_found){.fd = -1};
    cleanup_free char *lib = library_folder();
    cleanup_free char *bin = program_folder();
    char *cand[] = {lib ? libexec_beside(lib) : NULL, bin ? libexec_beside(bin) : NULL,
#ifdef SANDPOD_AGENT_INSTALL_PATH
                    sp_xstrdup(SANDPOD_AGENT_INSTALL_PATH),
#else
                    NULL,
#endif
                    bin ? sp_xasprintf("%s/sandpod-agent", bin) : NULL};
    size_t n = sizeof(cand) / sizeof(cand[0]);
    /* Where to put one: the first place in an install tree. */
    for (size_t i = 0; i + 1 < n && !a->want; i++)
        a->want = cand[i] ? sp_xstrdup(cand[i]) : NULL;
    const char *e = getenv("SANDPOD_AGENT");
    if (e && *e)
        named_agent(a, e);
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t k = 0; cand[i] && k < i; k++)
            seen = seen || (cand[k] && strcmp(cand[k], cand[i]) == 0);
        if (!(e && *e) && !a->path && cand[i] && !seen)
            try_agent(a, cand[i]);
    }
    for (size_t i = 0; i < n; i++)
        free(cand[i]);
}

static void agent_found_dispose(agent_found *a)
{
    if (a->fd >= 0)
        close(a->fd);
    free(a->path);
    free(a->refused);
    free(a->want);
}

int sp_sandbox_agent_path(char **path, char **why)
{
    *path = *why = NULL;
    agent_found a;
    find_agent(&a);
    if (a.path)
        *path = sp_xstrdup(a.path);
    else if (a.off)
        *why = sp_xstrdup("SANDPOD_AGENT=none turns it off");
    else
        *why = a.refused ? sp_xstrdup(a.refused) : sp_xstrdup("no sandpod-agent was found");
    agent_found_dispose(&a);
    return *path ? 0 : SP_ENOTFOUND;
}

/* Copy the agent into the state folder, so that the bind mount's source
 * stays put whatever happens to the build tree or a later install. */
static int copy_agent(int in, const char *dst, sp_error **err)
{
    cleanup_free char *tmp = sp_xasprintf("%s.%d", dst, (int)getpid());
    cleanup_close int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (out < 0)
        return sp_err_errno(err, errno, "create", tmp);
    char buf[65536];
    for (;;) {
        ssize_t n = read(in, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || (n > 0 && sp_write_all(out, buf, (size_t)n) < 0)) {
            int r = sp_err_errno(err, errno, "copy the agent to", tmp);
            unlink(tmp);
            return r;
        }
        if (n == 0)
            break;
    }
    if (fchmod(out, 0755) < 0 || rename(tmp, dst) < 0) {
        int r = sp_err_errno(err, errno, "install", dst);
        unlink(tmp);
        return r;
    }
    return 0;
}

static int install_agent(int fd, const char *dir, const char *bin, const char *run, sp_error **err)
{
    if ((mkdir(dir, 0700) < 0 && errno != EEXIST) || chmod(dir, 0700) < 0)
        return sp_err_errno(err, errno, "make the agent's folder", dir);
    int r = copy_agent(fd, bin, err);
    if (r < 0)
        return r;
    if (mkdir(run, 0700) < 0 && errno != EEXIST)
        return sp_err_errno(err, errno, "make the agent's socket folder", run);
    return 0;
}

/* Set up <state_dir>/agent/: the binary (ours, read-only in the
 * container) and run/, the socket folder, which hand_over_ids() gives to
 * the container's user. agent/ itself is 0700, so no other host user
 * reaches the socket. Records where the agent came from, or why there is
 * none (sandbox.json; sp_sandbox_exec_path()); *warning says so when
 * commands will take the slow path for want of one. */
bool sp_agent_prepare(sp_sandbox *sb, char **bin, char **run, char **warning)
{
    sp_sandbox_config *c = &sb->cfg;
    free(c->agent_source);
    free(c->agent_missing);
    c->agent_source = c->agent_missing = NULL;
    agent_found a;
    find_agent(&a);
    cleanup_free char *dir = sp_xasprintf("%s/agent", sb->state_dir);
    cleanup_free char *b = sp_xasprintf("%s/sandpod-agent", dir);
    cleanup_free char *r = sp_fast_run_dir(sb);
    sp_error *e = NULL;
    if (a.path && install_agent(a.fd, dir, b, r, &e) == 0) {
        c->agent_source = steal_pointer(&a.path);
        agent_found_dispose(&a);
        *bin = steal_pointer(&b);
        *run = steal_pointer(&r);
        return true;
    }
    cleanup_free char *why = NULL;
    if (a.off) {
        c->agent_missing = sp_xstrdup("SANDPOD_AGENT=none when the container was made");
    } else if (e) {
        why = sp_xasprintf("the agent %s could not be set up: %s", a.path, e->message);
        c->agent_missing = sp_xasprintf("the agent %s could not be set up when the container "
                                        "was made: %s",
                                        a.path, e->message);
    } else if (a.refused) {
        why = sp_xasprintf("no usable sandpod-agent (%s)", a.refused);
        c->agent_missing =
            sp_xasprintf("no usable sandpod-agent when the container was made: %s", a.refused);
    } else {
        why = sp_xstrdup("no sandpod-agent was found");
        c->agent_missing = sp_xstrdup("no sandpod-agent was found when the container was made");
    }
    if (why)
        *warning =
            sp_xasprintf("%s: commands in sandbox %s take the slow REST path (a Podman "
                         "exec each); set SANDPOD_AGENT=/path/to/sandpod-agent or install "
                         "it at %s",
                         why, sb->name, a.want ? a.want : "PREFIX/libexec/sandpod/sandpod-agent");
    sp_error_free(e);
    agent_found_dispose(&a);
    return false;
}
