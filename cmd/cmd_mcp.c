/* sandpod mcp: serve the model tool suite over MCP on stdin/stdout, on an
 * existing sandbox, a bare folder, a sandbox made for the session, or the
 * one sandbox of a project folder.
 *
 * The server answers initialize and tools/list at once: a sandbox is made,
 * opened or started only at the first tools/call (sp_tools_open_later()),
 * so a client's health check costs nothing, and a large project's
 * hydration never delays the handshake. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "cli.h"
#include "mcp.h"
#include "sandpod/apply.h"
#include "sandpod/podman.h"
#include "sandpod/sandbox_snapshot.h"

enum {
    OPT_CREATE = 0x3200,
    OPT_KEEP,
    OPT_RM,
    OPT_WITH_DOTENV,
    OPT_VERBOSE,
    OPT_PROJECT,
    OPT_STRUCTURED,
    OPT_CHECK,
    OPT_FINISH,
};

extern char **environ;

const struct cli_spec cli_spec_mcp = {
    .name = "mcp",
    .fn = cmd_mcp,
    .summary = "Serve the tool suite to an agent over MCP (stdio)",
    .usage = CLI_USAGE("[OPTIONS] --project DIR [CREATE OPTIONS] [--with-dotenv]", "[OPTIONS] NAME",
                       "[OPTIONS] --root DIR [--store DIR] [--fs-mode MODE]",
                       "[OPTIONS] --create [CREATE OPTIONS] [--rm] [--with-dotenv]",
                       "--check [--project DIR]"),
    .description = "Serve the model tool suite to an agent over the Model Context Protocol\n"
                   "(revision " SP_MCP_PROTOCOL_VERSION
                   ", stdio transport: JSON-RPC messages, one per line, on\n"
                   "stdin and stdout; logs on stderr). With --project and --create, initialize\n"
                   "and tools/list are answered at once and the sandbox is made or started at the\n"
                   "first tool call, which waits for it (with progress notifications), so a\n"
                   "session that only lists tools makes and starts nothing.\n"
                   "\n"
                   "--project DIR serves the one sandbox of that folder: its name comes from the\n"
                   "folder's path (sandpod mcp --check --project DIR prints it), it is made from\n"
                   "DIR (with .gitignore honoured and .env* left out) by the first session that\n"
                   "calls a tool, and every later session reuses it. When the last session of\n"
                   "the project ends, the sandbox is stopped, or removed when nothing in it\n"
                   "changed since it was made. NAME is an existing sandbox (started when\n"
                   "stopped, left as it is at exit). --root DIR serves a bare folder with the\n"
                   "filesystem tools only, no container. --create makes a new sandbox for the\n"
                   "session; at exit it is stopped and kept (removed when nothing changed, or\n"
                   "with --rm). A Pod of the kubernetes engine cannot stop: it is left running.\n"
                   "Mounts of --project and --create leave out .env* files (at any depth) unless\n"
                   "--with-dotenv.\n"
                   "\n"
                   "Results carry sandpod's text as their content. Claude Code and Codex show the\n"
                   "model a result's structuredContent instead of its text whenever it is\n"
                   "present, so it is left out: the typed object is in _meta[\"sandpod/result\"].\n"
                   "--structured adds outputSchema and structuredContent for clients that want\n"
                   "them (the OpenAI Agents SDK shows the text either way).\n"
                   "\n"
                   "Register it with an agent, e.g.:\n"
                   "  claude mcp add sandpod -- sandpod mcp --project .",
    .groups = CLI_GROUPS(
        &cli_group_tools,
        CLI_OWN(
            CLI_VALUE("project", 0, "DIR", OPT_PROJECT, CLI_COMP_DIR,
                      "the one sandbox of the project folder DIR, reused by every session"),
            CLI_FLAG("create", 0, OPT_CREATE,
                     "a new sandbox for this session (see CREATE OPTIONS)"),
            CLI_FLAG("rm", 0, OPT_RM, "with --create: remove the sandbox at exit"),
            CLI_FLAG("keep", 0, OPT_KEEP,
                     "with --create: keep the sandbox at exit (the default; for older scripts)"),
            CLI_FLAG("with-dotenv", 0, OPT_WITH_DOTENV,
                     "with --create or --project: copy .env* files of the mounts too, and the "
                     "other credentials hydration leaves out (secrets=keep on every mount)"),
            CLI_FLAG("structured", 0, OPT_STRUCTURED,
                     "give tools an outputSchema and results structuredContent"),
            CLI_FLAG("check", 0, OPT_CHECK,
                     "say whether the server would start here (Podman, state root, agent, "
                     "project) and exit"),
            CLI_FLAG("verbose", 0, OPT_VERBOSE, "log requests to stderr"),
            CLI_VALUE("finish-session", 0, "NAME", OPT_FINISH, CLI_COMP_SANDBOX,
                      "internal: the detached process that stops or removes a session's "
                      "sandbox once the server (its fd 4) is gone")),
        CLI_TITLE("CREATE OPTIONS (with --create or --project; --state-root and --url apply to "
                  "NAME too):"),
        &cli_group_create, &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME", CLI_COMP_SANDBOX, NULL}),
    .notes = "The server stops at the end of stdin or on SIGINT/SIGTERM/SIGHUP; a hydration under\n"
             "way then stops and leaves nothing behind.",
    .exit_status = "0 ok, 1 error (with --check: a problem was found), 2 bad usage.",
};

static bool should_stop(void *ud)
{
    (void)ud;
    return cli_signal_caught() != 0;
}

/* Add .env* to the excludes of every mount (the arrays are new: the
 * parsed mounts keep theirs). NULL when out of memory. */
static const char ***leave_out_dotenv(struct cli_create *cc)
{
    const char ***v = calloc(cc->n_mounts, sizeof(*v));
    for (size_t i = 0; v && i < cc->n_mounts; i++) {
        size_t n = 0;
        while (cc->mounts[i].exclude && cc->mounts[i].exclude[n])
            n++;
        if (!(v[i] = calloc(n + 2, sizeof(char *)))) {
            while (i--)
                free(v[i]);
            free(v);
            return NULL;
        }
        for (size_t k = 0; k < n; k++)
            v[i][k] = cc->mounts[i].exclude[k];
        v[i][n] = ".env*";
        cc->mounts[i].exclude = v[i];
    }
    return v;
}

static bool is_conn_option(int opt)
{
    return opt == CLI_OPT_STATE_ROOT || opt == CLI_OPT_URL;
}

/* ------------------------------------------------------------ projects -- */

/* The sandbox name of a project folder (its real path): "p-", its base
 * name cut to what a name may hold, "-", and 10 hex digits of a hash of
 * the whole path, so that two folders of one base name differ. */
static char *project_name(const char *real)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)real; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    const char *base = strrchr(real, '/');
    base = base && base[1] ? base + 1 : "root";
    char clean[41];
    size_t n = 0;
    for (const char *p = base; *p && n < sizeof(clean) - 1; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-';
        clean[n++] = ok ? ch : '_';
    }
    clean[n] = '\0';
    char *name = NULL;
    if (asprintf(&name, "p-%s-%010llx", clean, (unsigned long long)(h & 0xffffffffffull)) < 0)
        return NULL;
    return name;
}

/* The mount spec for a project folder: the folder itself, .gitignore
 * honoured. Commas and backslashes in the path are escaped. */
static char *project_mount_spec(const char *real)
{
    sp_buf b = SP_BUF_INIT;
    sp_buf_adds(&b, "src=");
    for (const char *p = real; *p; p++) {
        if (*p == ',' || *p == '\\')
            sp_buf_addc(&b, '\\');
        sp_buf_addc(&b, *p);
    }
    sp_buf_adds(&b, ",gitignore");
    return b.data;
}

/* ------------------------------------------------------------- session -- */

typedef struct session {
    struct cli_create *cc;
    const char *name; /* NAME, the project's, or the one --create makes */
    bool project, create, rm;
    char *locks; /* --project: the state root's folder of session locks */
    int create_fd, users_fd;
    sp_sandbox *sb;   /* set by session_open() */
    bool made;        /* this session created it */
    const char *url;  /* --url, for the finisher */
    const char *root; /* the state root, for the finisher */
    int finisher_fd;  /* the write end of the finisher's pipe, or -1 */
    pid_t finisher;
    char *log;      /* where the finisher writes what it did */
    off_t log_from; /* the log's size when it started */

    pthread_mutex_t mu; /* guards what status() reads */
    bool hydrating;
    sp_hydrate_progress prog;
} session;

static void session_progress(void *ud, const sp_hydrate_progress *p)
{
    session *s = ud;
    pthread_mutex_lock(&s->mu);
    s->hydrating = true;
    s->prog = *p;
    s->prog.path = NULL;
    pthread_mutex_unlock(&s->mu);
}

static char *session_status(void *ud)
{
    session *s = ud;
    pthread_mutex_lock(&s->mu);
    sp_hydrate_progress p = s->prog;
    bool hydrating = s->hydrating;
    pthread_mutex_unlock(&s->mu);
    if (!hydrating)
        return sp_xasprintf("starting sandbox %s", s->name);
    if (p.phase == SP_HYDRATE_SCAN)
        return sp_xasprintf("copying the project into sandbox %s: %llu entries looked at", s->name,
                            (unsigned long long)p.files);
    if (p.phase == SP_HYDRATE_COPY)
        return sp_xasprintf("copying the project into sandbox %s: %llu of %llu files, %llu of "
                            "%llu MiB",
                            s->name, (unsigned long long)p.files, (unsigned long long)p.total_files,
                            (unsigned long long)(p.bytes >> 20),
                            (unsigned long long)(p.total_bytes >> 20));
    return sp_xasprintf("starting sandbox %s", s->name);
}

static int lock_file(int *fd, const char *dir, const char *name, const char *suffix, int how,
                     sp_error **err)
{
    cleanup_free char *path = sp_xasprintf("%s/%s.%s", dir, name, suffix);
    if (*fd < 0)
        *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (*fd < 0)
        return sp_err_errno(err, errno, "open", path);
    while (flock(*fd, how) < 0) {
        if (errno == EINTR && !(how & LOCK_NB))
            continue;
        if (errno == EWOULDBLOCK)
            return SP_EEXISTS;
        return sp_err_errno(err, errno, "lock", path);
    }
    return 0;
}

/* Start sb when it is not running. */
static int ensure_running(sp_sandbox *sb, sp_error **err)
{
    sp_sandbox_status *st = NULL;
    int r = sp_sandbox_status_get(&st, sb, err);
    if (r == 0 && !st->running) {
        fprintf(stderr, "sandpod mcp: starting sandbox %s\n", sp_sandbox_name(sb));
        r = sp_sandbox_start(sb, err);
    }
    sp_sandbox_status_free(st);
    return r;
}

static int create_for_session(session *s, sp_error **err)
{
    s->cc->opts.name = s->name;
    s->cc->opts.made_by = SP_MADE_BY_MCP;
    s->cc->opts.should_stop = should_stop;
    s->cc->opts.progress = session_progress;
    s->cc->opts.progress_userdata = s;
    int r = cli_create_sandbox(&s->sb, s->cc, err);
    if (r == 0) {
        s->made = true;
        fprintf(stderr, "sandpod mcp: created sandbox %s\n", s->name);
    }
    return r;
}

/* The end of a session is not ours to run: Codex sends the server's
 * process group SIGTERM and SIGKILL 200 ms later, Claude Code SIGINT,
 * SIGTERM and SIGKILL within half a second, and stopping a container takes
 * longer. So once the sandbox is there, a process of its own (a new
 * session, apart from the client's process group) waits for the server to
 * be gone — the pipe on its fd 4 reaches end of file however the server
 * ends, SIGKILL included — and then stops or removes the sandbox
 * (session_close). It holds the project's users lock on fd 3, the same
 * lock as the server's, so no other session's end sees it as the last one
 * before it has run. Called on a worker thread: posix_spawn() (no fork()
 * of a threaded process). */
static void spawn_finisher(session *s)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    int p[2];
    if (n <= 0 || pipe2(p, O_CLOEXEC) < 0) {
        fprintf(stderr,
                "sandpod mcp: warning: cannot start the session's finisher; sandbox %s "
                "stays as it is at exit\n",
                s->name);
        return;
    }
    self[n] = '\0';
    const char *argv[16];
    size_t a = 0;
    argv[a++] = "sandpod";
    argv[a++] = "mcp";
    cleanup_free char *spec = sp_xasprintf("%s:%s",
                                           s->project ? "project"
                                           : s->rm    ? "rm"
                                                      : "create",
                                           s->name);
    char *log = sp_xasprintf("%s/sessions/%s.log", s->root, s->name);
    struct stat lst;
    off_t log_from = lstat(log, &lst) == 0 && S_ISREG(lst.st_mode) ? lst.st_size : 0;
    argv[a++] = "--finish-session";
    argv[a++] = spec;
    argv[a++] = "--state-root";
    argv[a++] = s->root;
    if (s->url) {
        argv[a++] = "--url";
        argv[a++] = s->url;
    }
    argv[a] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID);
    /* Nothing of the client's: its pipes would stay open (Node waits for
     * them to close) and stdout is the protocol's. */
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
    posix_spawn_file_actions_adddup2(&fa, p[0], 4);
    if (s->users_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, s->users_fd, 3);
    else
        posix_spawn_file_actions_addopen(&fa, 3, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    int r = posix_spawn(&pid, self, &fa, &at, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(p[0]);
    if (r != 0) {
        close(p[1]);
        free(log);
        fprintf(stderr, "sandpod mcp: warning: cannot start the session's finisher: %s\n",
                strerror(r));
        return;
    }
    s->finisher_fd = p[1];
    s->finisher = pid;
    s->log = log;
    s->log_from = log_from;
}

/* What the finisher wrote to its log from offset `from` on, to stderr. */
static void show_log(const char *log, off_t from)
{
    cleanup_close int fd = log ? open(log, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
    if (fd < 0 || lseek(fd, from, SEEK_SET) < 0)
        return;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        if (fwrite(buf, 1, (size_t)n, stderr) != (size_t)n)
            break;
}

/* sp_tools_later.open: the first tool call's sandbox. */
static int session_open(void *ud, sp_sandbox **out, sp_error **err)
{
    session *s = ud;
    int r;
    if (s->sb) {
        *out = s->sb;
        return 0;
    }
    if (s->project) {
        /* One session at a time makes or starts the project's sandbox, and
         * each holds the users lock shared while it serves: the last one
         * to leave is the one that gets it exclusively (session_close). */
        if ((r = lock_file(&s->create_fd, s->locks, s->name, "create", LOCK_EX, err)) < 0)
            return r;
        r = lock_file(&s->users_fd, s->locks, s->name, "users", LOCK_SH, err);
        if (r == 0) {
            sp_error *e = NULL;
            sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
            o.state_root = s->cc->conn.state_root;
            o.podman_url = s->cc->conn.url;
            r = sp_sandbox_open(&s->sb, s->name, &o, &e);
            if (r == SP_ENOTFOUND) {
                sp_error_free(e);
                r = create_for_session(s, err);
            } else if (r < 0) {
                sp_err_give(err, e, r);
            } else {
                r = ensure_running(s->sb, err);
            }
        }
        flock(s->create_fd, LOCK_UN);
    } else if (s->create) {
        r = create_for_session(s, err);
    } else {
        sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
        o.state_root = s->cc->conn.state_root;
        o.podman_url = s->cc->conn.url;
        r = sp_sandbox_open(&s->sb, s->name, &o, err);
        if (r == 0)
            r = ensure_running(s->sb, err);
    }
    if (r < 0) {
        if (s->sb && !s->made) {
            sp_sandbox_free(s->sb);
            s->sb = NULL;
        }
        return r;
    }
    if (s->project || s->create)
        spawn_finisher(s);
    *out = s->sb;
    return 0;
}

/* Whether the workspace is as it was made: no change since the baseline. */
static bool unchanged(sp_sandbox *sb)
{
    sp_snapdiff *d = NULL;
    if (sp_sandbox_snapshot_diff(&d, sb, SP_SANDBOX_BASELINE_TAG, NULL, NULL, NULL) < 0 || !d)
        return false;
    bool none = d->n == 0;
    sp_snapdiff_free(d);
    return none;
}

/* At exit: a sandbox this kind of session owns is stopped, or removed when
 * nothing changed (a project's only by its last session). */
static int session_close(session *s)
{
    if (!s->sb || !(s->project || s->create))
        return 0;
    if (s->project) {
        sp_error *e = NULL;
        if (lock_file(&s->create_fd, s->locks, s->name, "create", LOCK_EX, &e) < 0) {
            sp_error_free(e);
            return 0;
        }
        /* Another session still serves it: leave it running. */
        if (lock_file(&s->users_fd, s->locks, s->name, "users", LOCK_EX | LOCK_NB, NULL) < 0)
            return 0;
    }
    const char *n = sp_sandbox_name(s->sb);
    sp_error *e = NULL;
    int r;
    if (s->rm || unchanged(s->sb)) {
        r = sp_sandbox_remove(s->sb, false, &e);
        if (r == 0)
            fprintf(stderr, "sandpod mcp: removed sandbox %s%s\n", n,
                    s->rm ? "" : " (nothing in it changed)");
    } else {
        /* A Pod has no stopped state: on such an engine it keeps running. */
        bool can_stop = sp_sandbox_stops(s->sb);
        r = can_stop ? sp_sandbox_stop(s->sb, 10, &e) : 0;
        if (r == 0)
            fprintf(stderr,
                    "sandpod mcp: sandbox %s is %s and kept with the session's work:\n"
                    "sandpod mcp:   sandpod diff %s     what changed\n"
                    "sandpod mcp:   sandpod apply %s    bring the changes into the host folder\n"
                    "sandpod mcp:   sandpod rm -f %s    remove it\n",
                    n, can_stop ? "stopped" : "running (its engine cannot stop it)", n, n, n);
    }
    if (r < 0) {
        cli_sp_error(r, e);
        return CLI_EXIT_ERROR;
    }
    sp_error_free(e);
    return 0;
}

/* `mcp --finish-session MODE:NAME`: wait for the server to be gone (end of
 * file on fd 4), then end its session (session_close). fd 3 holds the
 * project's users lock. */
static int finish_session(const char *spec, const struct cli_create *cc)
{
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    const char *colon = strchr(spec, ':');
    if (!colon)
        return cli_usage("mcp", "--finish-session takes MODE:NAME");
    cleanup_free char *mode = sp_xstrndup(spec, (size_t)(colon - spec));
    session s = {.cc = (struct cli_create *)cc,
                 .name = colon + 1,
                 .create_fd = -1,
                 .users_fd = -1,
                 .finisher_fd = -1};
    s.project = strcmp(mode, "project") == 0;
    s.rm = strcmp(mode, "rm") == 0;
    s.create = !s.project;
    if (!s.project && !s.rm && strcmp(mode, "create") != 0)
        return cli_usage("mcp", "--finish-session: unknown mode '%s'", mode);
    /* The server never writes: end of file says it is gone. */
    char buf[64];
    ssize_t n;
    while ((n = read(4, buf, sizeof(buf))) != 0 && (n > 0 || errno == EINTR))
        ;
    close(4);
    if (s.project)
        s.users_fd = 3;
    else
        close(3);
    char *root = NULL;
    sp_error *e = NULL;
    int r = sp_sandbox_state_root(&root, cc->conn.state_root, &e);
    if (r == 0) {
        s.locks = sp_xasprintf("%s/sessions", root);
        sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
        o.state_root = root;
        o.podman_url = cc->conn.url;
        r = sp_sandbox_open(&s.sb, s.name, &o, &e);
    }
    int rc = r < 0 ? cli_fail(false, r, e) : session_close(&s);
    if (s.create_fd >= 0)
        close(s.create_fd);
    if (s.users_fd >= 0)
        close(s.users_fd);
    sp_sandbox_free(s.sb);
    free(s.locks);
    free(root);
    return rc;
}

/* --------------------------------------------------------------- check -- */

static int check(const struct cli_create *cc, const char *project, const char *name)
{
    int problems = 0;
    char *root = NULL;
    sp_error *e = NULL;
    if (sp_sandbox_state_root(&root, cc->conn.state_root, &e) < 0) {
        printf("problem: state root: %s\n", e ? e->message : "cannot be found");
        problems++;
    } else {
        printf("ok: state root %s\n", root);
    }
    sp_error_free(e);
    e = NULL;
    /* The service a sandbox would use (started, as create would). */
    sp_podman *pm = NULL;
    sp_podman_opts po = SP_PODMAN_OPTS_INIT;
    po.url = cc->conn.url;
    po.state_root = root;
    if (sp_podman_open(&pm, &po, &e) < 0) {
        printf("problem: Podman: %s\n", e ? e->message : "no service answers");
        problems++;
    } else {
        printf("ok: Podman service %s%s\n", sp_podman_url(pm),
               sp_podman_started_service(pm) ? " (started now)" : "");
    }
    sp_podman_free(pm);
    sp_error_free(e);
    /* Not a problem for the server, but each command then costs a Podman
     * exec (~120 ms) instead of ~2 ms. */
    char *agent = NULL, *why = NULL;
    if (sp_sandbox_agent_path(&agent, &why) == 0)
        printf("ok: sandpod-agent %s (commands take the fast path)\n", agent);
    else
        printf("warning: %s: commands take the slow REST path (a Podman exec each)\n", why);
    free(agent);
    free(why);
    if (project) {
        printf("%s: project %s, sandbox %s\n", name ? "ok" : "problem", project,
               name ? name : "(none)");
        if (!name)
            problems++;
        else {
            sp_sandbox *sb = NULL;
            sp_sandbox_opts so = SP_SANDBOX_OPTS_INIT;
            so.state_root = cc->conn.state_root;
            e = NULL;
            if (sp_sandbox_open(&sb, name, &so, &e) == 0)
                printf("ok: sandbox %s exists and is reused\n", name);
            else
                printf("ok: sandbox %s is made at the first tool call\n", name);
            sp_sandbox_free(sb);
            sp_error_free(e);
        }
    }
    free(root);
    printf("%s\n", problems ? "the server would not work here" : "the server would start here");
    return problems ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}

/* ------------------------------------------------------------- command -- */

static char *random_name(void)
{
    unsigned char b[4] = {0};
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
        return NULL;
    return sp_xasprintf("mcp-%02x%02x%02x%02x", b[0], b[1], b[2], b[3]);
}

int cmd_mcp(int argc, char **argv)
{
    struct cli_tools tc;
    int rc = cli_tools_init(&tc, argc);
    if (rc)
        return rc;
    struct cli_create cc;
    if ((rc = cli_create_init(&cc, argc)) != 0) {
        cli_tools_dispose(&tc);
        return rc;
    }
    bool create = false, keep = false, rm = false, dotenv = false, verbose = false,
         create_opts = false, structured = false, checking = false;
    const char *project = NULL, *finish = NULL;
    char *real = NULL, *pname = NULL, *gen = NULL, *spec = NULL, *root = NULL;
    const char ***excl = NULL; /* per mount: its excludes plus .env* */
    sp_tools *t = NULL;
    session s = {.cc = &cc, .create_fd = -1, .users_fd = -1, .finisher_fd = -1};
    pthread_mutex_init(&s.mu, NULL);
    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_mcp, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        if (opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        int took = cli_tools_option(&tc, "mcp", opt, optarg);
        if (took == 0) {
            took = cli_create_option(&cc, "mcp", opt, optarg);
            if (took > 0 && !is_conn_option(opt))
                create_opts = true;
            if (took > 0 && (opt == CLI_OPT_MOUNT || opt == CLI_OPT_NAME) && project) {
                rc = cli_usage("mcp", "--project names the mount and the sandbox itself");
                goto done;
            }
        }
        if (took < 0) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        switch (opt) {
        case OPT_CREATE:
            create = true;
            break;
        case OPT_PROJECT:
            if (cc.n_mounts || cc.opts.name) {
                rc = cli_usage("mcp", "--project names the mount and the sandbox itself");
                goto done;
            }
            project = optarg;
            break;
        case OPT_KEEP:
            keep = true;
            break;
        case OPT_RM:
            rm = true;
            break;
        case OPT_WITH_DOTENV:
            dotenv = true;
            break;
        case OPT_STRUCTURED:
            structured = true;
            break;
        case OPT_CHECK:
            checking = true;
            break;
        case OPT_FINISH:
            finish = optarg;
            break;
        case OPT_VERBOSE:
            verbose = true;
            break;
        default: /* CLI_GETOPT_BAD */
            rc = CLI_EXIT_USAGE;
            goto done;
        }
    }
    if (finish) {
        rc = finish_session(finish, &cc);
        goto done;
    }
    const char *name = NULL;
    if (!create && !tc.root && !project && !checking) {
        if (optind >= argc) {
            rc = cli_usage("mcp", "missing sandbox NAME (or --project DIR, --root DIR, --create)");
            goto done;
        }
        name = argv[optind++];
    }
    if (optind < argc) {
        rc = cli_usage("mcp", "unexpected argument '%s'", argv[optind]);
        goto done;
    }
    if ((create && tc.root) || (project && (create || tc.root))) {
        rc = cli_usage("mcp", "--project, --create and --root exclude each other");
        goto done;
    }
    if (create_opts && !create && !project) {
        rc = cli_usage("mcp", "sandbox options such as --mount need --create or --project");
        goto done;
    }
    if ((keep || rm) && !create) {
        rc = cli_usage("mcp", "--%s goes with --create", keep ? "keep" : "rm");
        goto done;
    }
    if (dotenv && !create && !project) {
        rc = cli_usage("mcp", "--with-dotenv goes with --create or --project");
        goto done;
    }
    if (keep && rm) {
        rc = cli_usage("mcp", "--keep and --rm exclude each other");
        goto done;
    }
    if (project) {
        struct stat st;
        if (!(real = realpath(project, NULL)) || stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
            rc = cli_error("--project %s: %s", project, real ? "not a folder" : strerror(errno));
            goto done;
        }
        if (!(pname = project_name(real)) || !(spec = project_mount_spec(real))) {
            rc = cli_error("out of memory");
            goto done;
        }
        if (!checking && cli_create_option(&cc, "mcp", CLI_OPT_MOUNT, spec) < 0) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
    }
    if (checking) {
        rc = check(&cc, real, pname);
        goto done;
    }
    if (!dotenv && cc.n_mounts && !(excl = leave_out_dotenv(&cc))) {
        rc = cli_error("out of memory");
        goto done;
    }
    for (size_t i = 0; dotenv && i < cc.n_mounts; i++)
        cc.mounts[i].keep_secrets = true;
    if ((rc = cli_tools_check(&tc, "mcp", create || name || project)) != 0)
        goto done;

    cli_signals_catch();
    sp_error *err = NULL;
    int r;
    s.project = project != NULL;
    s.create = create;
    s.rm = rm;
    s.url = cc.conn.url;
    if (project) {
        s.name = pname;
        if ((r = sp_sandbox_state_root(&root, cc.conn.state_root, &err)) < 0) {
            rc = cli_fail(false, r, err);
            goto done;
        }
        s.locks = sp_xasprintf("%s/sessions", root);
        s.root = root;
        if (mkdir(root, 0700) < 0 && errno != EEXIST) {
            rc = cli_error("mkdir %s: %s", root, strerror(errno));
            goto done;
        }
        if (mkdir(s.locks, 0700) < 0 && errno != EEXIST) {
            rc = cli_error("mkdir %s: %s", s.locks, strerror(errno));
            goto done;
        }
    } else if (create) {
        if (!(s.name = cc.opts.name) && !(s.name = gen = random_name())) {
            rc = cli_error("cannot draw a random sandbox name");
            goto done;
        }
        if ((r = sp_sandbox_state_root(&root, cc.conn.state_root, &err)) < 0) {
            rc = cli_fail(false, r, err);
            goto done;
        }
        s.root = root;
        s.locks = sp_xasprintf("%s/sessions", root);
        if ((mkdir(root, 0700) < 0 && errno != EEXIST) ||
            (mkdir(s.locks, 0700) < 0 && errno != EEXIST)) {
            rc = cli_error("mkdir %s: %s", s.locks, strerror(errno));
            goto done;
        }
    } else {
        s.name = name;
    }
    if (name) {
        /* An existing sandbox: opened (and started) now, as cheap as it
         * is, so that the first call finds it ready. */
        sp_sandbox *sb = NULL;
        if ((r = session_open(&s, &sb, &err)) == 0)
            r = sp_tools_open_sandbox(&t, sb, &tc.opts, &err);
    } else if (s.name) {
        sp_tools_later later = {session_open, session_status, &s};
        r = sp_tools_open_later(&t, &later, &tc.opts, &err);
    } else {
        r = sp_tools_open_root(&t, tc.root, &tc.opts, &err);
    }
    if (r < 0) {
        rc = cli_fail(false, r, err);
        goto done;
    }
    if (verbose)
        fprintf(stderr, "sandpod mcp: serving %s on stdio (approval %s)\n",
                s.name ? s.name : tc.root, sp_tools_approval_name(tc.opts.approval));

    sp_mcp_opts mo = SP_MCP_OPTS_INIT;
    mo.verbose = verbose;
    mo.should_stop = should_stop;
    mo.server_version = SANDPOD_VERSION;
    mo.structured = structured;
    /* The model is the one who can tell the user where the work is: the
     * workspace is a copy, and nothing reaches their project by itself. */
    char hint[1024] = "";
    if (s.name && create && rm)
        snprintf(hint, sizeof(hint),
                 "This workspace is sandbox %s, a copy of the user's files that is "
                 "removed with everything you changed when this session ends.",
                 s.name);
    else if (s.name)
        snprintf(hint, sizeof(hint),
                 "This workspace is sandbox %s, a copy of the user's files: nothing you "
                 "change reaches their project until they run `sandpod apply %s` "
                 "(`sandpod diff %s` shows what changed). Tell the user this when "
                 "you finish.",
                 s.name, s.name, s.name);
    mo.instructions = hint[0] ? hint : NULL;
    r = sp_mcp_serve(t, STDIN_FILENO, STDOUT_FILENO, &mo, &err);
    if (r < 0) {
        /* The client went away: nothing to tell it, only to clean up. */
        if (verbose)
            cli_sp_error(r, err);
        sp_error_free(err);
    }
    rc = CLI_EXIT_OK;

done:
    sp_tools_free(t);
    /* The finisher ends the session once our end of its pipe closes. A
     * client may kill us any moment now (Claude Code closes stdin and
     * SIGKILLs half a second later), so the work is never ours: at the end
     * of the input we only wait for it and show what it said; stopped by a
     * signal we do not even wait. Without a finisher (it could not be
     * started), the session ends here. */
    if (s.finisher_fd >= 0) {
        close(s.finisher_fd);
        if (!cli_signal_caught()) {
            while (waitpid(s.finisher, NULL, 0) < 0 && errno == EINTR)
                ;
            show_log(s.log, s.log_from);
        }
    } else if (!finish && s.sb && session_close(&s) != 0) {
        rc = CLI_EXIT_ERROR;
    }
    if (s.create_fd >= 0)
        close(s.create_fd);
    if (s.users_fd >= 0)
        close(s.users_fd);
    for (size_t i = 0; excl && i < cc.n_mounts; i++)
        free(excl[i]);
    free(excl);
    sp_sandbox_free(s.sb);
    pthread_mutex_destroy(&s.mu);
    free(s.locks);
    free(s.log);
    free(root);
    free(real);
    free(pname);
    free(gen);
    free(spec);
    cli_create_dispose(&cc);
    cli_tools_dispose(&tc);
    return rc;
}
