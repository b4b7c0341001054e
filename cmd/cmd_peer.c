/* sandpod peer: the halves of sandpod that run inside a sandbox's Pod
 * (sandbox/kube/render.c lays the Pod out). `serve` is the peer container's
 * process: the tool suite over the shared workspace, as MCP on a unix
 * socket in a folder only the peer mounts; `connect` relays stdio to that
 * socket (what a client runs through pods/exec); `install-agent` is the
 * init container's copy of sandpod-agent. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base.h"
#include "cli.h"
#include "mcp.h"
#include "peer_egress.h"
#include "peer_protections.h"
#include "peer_mux.h"

enum {
    OPT_ROOT = 0x3500,
    OPT_STORE,
    OPT_SOCKET,
    OPT_AGENT,
    OPT_AGENT_UID,
    OPT_VERBOSE,
    OPT_TAG,
    OPT_GZIP,
    OPT_NO_RESTORE,
    OPT_TRANSIENT,
};

static int cmd_peer(int argc, char **argv);

const struct cli_spec cli_spec_peer = {
    .name = "peer",
    .fn = cmd_peer,
    .summary = "The sandpod side of a Kubernetes sandbox (runs inside its Pod)",
    .usage = CLI_USAGE("serve --root DIR --store DIR --socket PATH [--agent PATH [--agent-uid UID]]"
                       " [--verbose]",
                       "connect --socket PATH", "install-agent DIR",
                       "import --root DIR --store DIR [--tag TAG] [--no-restore] < ARCHIVE",
                       "export --store DIR [--root DIR [--transient]] [--gzip] [REF] > ARCHIVE",
                       "egress-serve POLICY-DIR RUN-DIR PORT",
                       "egress-policy POLICY-DIR RUN-DIR < POLICY", "egress-log RUN-DIR"),
    .description = "What `sandpod render` puts in a Pod; not for use on a host.\n"
                   "\n"
                   "  serve          serve the tool suite over the folder DIR (filesystem tools,\n"
                   "                 apply_patch, and snapshots kept in the --store folder, which\n"
                   "                 must be outside DIR) as MCP on the unix socket PATH (made\n"
                   "                 0600; its folder should be one only the peer mounts), to\n"
                   "                 any number of connections at once, sharing one server (one\n"
                   "                 edit lane, the same sessions); each sees its own ids and\n"
                   "                 progress tokens. A client's calls are cancelled when it\n"
                   "                 disconnects, but for resumable ones: a request whose\n"
                   "                 params._meta has \"sandpod/call\": KEY (unique, at most 128\n"
                   "                 bytes) runs once per KEY; the same KEY again, on any\n"
                   "                 connection, gets the running call's answer or the finished\n"
                   "                 one's (kept 10 minutes or for the newest 256 KEYs), never a\n"
                   "                 second run. A client that leaves 16 MiB of answers unread\n"
                   "                 is disconnected. With --agent, also the command tools\n"
                   "                 (shell, exec_command, write_stdin), run by the workload's\n"
                   "                 sandpod-agent through its socket PATH; DIR must be where the\n"
                   "                 workload sees the workspace too (/workspace in a Pod).\n"
                   "                 Stops on SIGINT/SIGTERM.\n"
                   "\n"
                   "                 Each command connects anew and, before sending a byte,\n"
                   "                 refuses a socket name that is a symlink or not a socket,\n"
                   "                 or that is owned, or served, by another uid than the\n"
                   "                 workload's (--agent-uid, default: ours) or by this process.\n"
                   "                 This proves the listener runs as the workload's uid in our\n"
                   "                 user namespace: the workload could have replaced its agent\n"
                   "                 with a program of its own (it gains nothing it lacked), but\n"
                   "                 no other uid's socket, and nothing outside the shared\n"
                   "                 folder, is ever reached. Pids are never used: a command is\n"
                   "                 killed by the agent (a kill frame, or its connection\n"
                   "                 closing), not by signalling a pid.\n"
                   "  connect        relay stdin to the socket PATH and its answers to stdout,\n"
                   "                 until either side ends (a client runs this through\n"
                   "                 pods/exec)\n"
                   "  install-agent  copy sandpod-agent ($SANDPOD_AGENT, else the one beside this\n"
                   "                 program) into DIR as DIR/agent, mode 0555\n"
                   "  import         read a snapshot archive (tar, or tar compressed with gzip,\n"
                   "                 bzip2, xz or zstd) from stdin into the --store folder as a\n"
                   "                 new snapshot, then make the folder DIR exactly that snapshot\n"
                   "                 (with --no-restore: only the snapshot, DIR left alone).\n"
                   "                 All or nothing: a bad, truncated or escaping archive changes\n"
                   "                 nothing, and a restore failing half-way is rolled back to\n"
                   "                 what DIR held (kept as a snapshot first, removed after);\n"
                   "                 the store's snapshots are then as they were. Imports into\n"
                   "                 one store run one at a time (an flock on its\n"
                   "                 sandpod/peer.lock). Prints {\"id\", \"files\", \"bytes\"}.\n"
                   "  export         write snapshot REF of the --store folder as a tar to stdout\n"
                   "                 (not a terminal); without REF, a fresh snapshot of --root\n"
                   "                 DIR when given (with --transient, removed again after the\n"
                   "                 export: the store's snapshots stay as they were), else the\n"
                   "                 newest snapshot\n"
                   "  egress-serve   the proxy Pod of a sandbox with egress rules: write the\n"
                   "                 policy in $SANDPOD_EGRESS_POLICY (and the hosts file in\n"
                   "                 $SANDPOD_EGRESS_HOSTS) into POLICY-DIR, then become\n"
                   "                 sandpod-agent's egress proxy, its log and state in RUN-DIR,\n"
                   "                 taking TCP connections on PORT of every address\n"
                   "  egress-policy  replace the policy with the text on stdin; back when the\n"
                   "                 proxy has it in force (within 3 s, else an error)\n"
                   "  egress-log     the connection log, one JSON object a line (exit 3: none\n"
                   "                 yet)\n"
                   "  protections    what this container is kept from, as one JSON line\n"
                   "                 (user_namespace, uid_map, seccomp, no_new_privs, cap_eff;\n"
                   "                 keyctl and new_user_namespace: whether each was allowed\n"
                   "                 when tried); `protections network` also tries a TCP\n"
                   "                 connection to $KUBERNETES_SERVICE_HOST (direct_network:\n"
                   "                 reached, blocked or untested). `engine test` runs it in\n"
                   "                 its probe Pod, `create` in each sandbox's Pod",
    .groups = CLI_GROUPS(CLI_OWN(
        CLI_VALUE("root", 0, "DIR", OPT_ROOT, CLI_COMP_DIR,
                  "serve, import, export: the workspace folder"),
        CLI_VALUE("store", 0, "DIR", OPT_STORE, CLI_COMP_DIR,
                  "serve, import, export: the snapshot store (created when missing; outside "
                  "DIR)"),
        CLI_VALUE("socket", 0, "PATH", OPT_SOCKET, CLI_COMP_FILE, "the peer's unix socket"),
        CLI_VALUE("agent", 0, "PATH", OPT_AGENT, CLI_COMP_FILE,
                  "serve: the workload's agent socket (serves the command tools)"),
        CLI_VALUE("agent-uid", 0, "UID", OPT_AGENT_UID, CLI_COMP_NONE,
                  "serve: the uid the agent's socket and process must have (default: ours)"),
        CLI_FLAG("verbose", 0, OPT_VERBOSE, "serve: log connections and requests to stderr"),
        CLI_VALUE("tag", 0, "TAG", OPT_TAG, CLI_COMP_NONE, "import: the new snapshot's tag"),
        CLI_FLAG("gzip", 0, OPT_GZIP, "export: compress the archive with gzip"),
        CLI_FLAG("transient", 0, OPT_TRANSIENT,
                 "export: the fresh snapshot of --root DIR is not kept"),
        CLI_FLAG("no-restore", 0, OPT_NO_RESTORE,
                 "import: only add the snapshot to the store; the folder stays as it is"))),
    .operands =
        CLI_OPERANDS({"OP", CLI_COMP_CHOICES,
                      "serve|connect|install-agent|import|export|egress-serve|egress-policy|"
                      "egress-log"},
                     {"DIR", CLI_COMP_DIR, NULL}),
    .exit_status = "0 ok, 1 error, 2 bad usage.",
};

struct peer_args {
    const char *root, *store, *socket, *agent, *tag;
    bool no_restore;
    long long agent_uid; /* -1: ours */
    bool verbose, gzip, transient;
};

static bool should_stop(void *ud)
{
    (void)ud;
    return cli_signal_caught() != 0;
}

static int socket_address(struct sockaddr_un *sa, const char *path)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(sa->sun_path))
        return cli_error("socket path too long (at most %zu bytes): %s", sizeof(sa->sun_path) - 1,
                         path);
    memcpy(sa->sun_path, path, strlen(path) + 1);
    return 0;
}

/* Bind `path` as a listening socket only its owner may connect to. A
 * socket left by an earlier peer is replaced; anything else is refused. */
static int listen_on(int *out, const char *path)
{
    struct sockaddr_un sa;
    if (socket_address(&sa, path))
        return CLI_EXIT_ERROR;
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return cli_error("%s exists and is not a socket", path);
        if (unlink(path) < 0)
            return cli_error("removing the old socket %s: %s", path, strerror(errno));
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return cli_error("socket: %s", strerror(errno));
    mode_t old = umask(0177);
    int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    int e = errno;
    umask(old);
    if (r < 0 || chmod(path, 0600) < 0 || listen(fd, SOMAXCONN) < 0) {
        e = r < 0 ? e : errno;
        close(fd);
        return cli_error("listening on %s: %s", path, strerror(e));
    }
    *out = fd;
    return 0;
}

static int peer_serve(const struct peer_args *a)
{
    if (!a->root || !a->store || !a->socket)
        return cli_usage("peer", "serve needs --root DIR, --store DIR and --socket PATH");
    sp_tools_opts to = SP_TOOLS_OPTS_INIT;
    to.snapshot_store = a->store;
    sp_tools *t = NULL;
    sp_error *err = NULL;
    sp_sandbox *agent = NULL;
    int r;
    if (a->agent) {
        /* The workload must find the workspace where we name it. */
        char *cwd = a->root[0] == '/' ? NULL : getcwd(NULL, 0);
        char *abs = cwd ? sp_xasprintf("%s/%s", cwd, a->root) : sp_xstrdup(a->root);
        free(cwd);
        sp_sandbox_agent_opts ao = SP_SANDBOX_AGENT_OPTS_INIT;
        ao.workspace = abs;
        ao.socket = a->agent;
        ao.uid = a->agent_uid;
        r = sp_sandbox_open_agent(&agent, &ao, &err);
        if (r == 0 && (r = sp_tools_open_agent(&t, abs, agent, &to, &err)) < 0)
            sp_sandbox_free(agent);
        free(abs);
    } else {
        r = sp_tools_open_root(&t, a->root, &to, &err);
    }
    if (r < 0)
        return cli_fail(false, r, err);
    /* A tool answer can be megabytes (a 4 MiB file read is base64 in JSON
     * in JSON), built and freed in a few copies. With glibc's default,
     * adaptive threshold those copies come from the heap and stay in the
     * process after the call; the peer's memory limit is shared by every
     * call. Fixed at 256 KiB, each such buffer is its own mapping, given
     * back when freed. */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    cli_signals_catch();
    int lfd = -1;
    int rc = listen_on(&lfd, a->socket);
    if (rc) {
        sp_tools_free(t);
        sp_sandbox_free(agent);
        return rc;
    }
    if (a->verbose)
        fprintf(stderr, "sandpod peer: serving %s on %s\n", a->root, a->socket);
    sp_mcp_opts mo = SP_MCP_OPTS_INIT;
    mo.verbose = a->verbose;
    mo.should_stop = should_stop;
    mo.server_version = SANDPOD_VERSION;
    /* The peer's clients are sandpod's own (tools_remote.c, the sessions):
     * they read the typed object as structuredContent. */
    mo.structured = true;
    /* Every client shares the one server and tools context: a client that
     * comes back finds the same state (what was read, the edit lock, its
     * sessions and, by their "sandpod/call" keys, its calls). */
    if (peer_mux_serve(t, lfd, &mo, &err) < 0)
        rc = cli_fail(false, SP_ERROR, err);
    close(lfd);
    unlink(a->socket);
    sp_tools_free(t);
    sp_sandbox_free(agent);
    return rc;
}

/* Copy everything readable on `from` to `to`; 0, or the errno. */
static int pump(int from, int to, bool *eof)
{
    char buf[65536];
    ssize_t n = read(from, buf, sizeof(buf));
    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? 0 : errno;
    if (n == 0) {
        *eof = true;
        return 0;
    }
    return sp_write_all(to, buf, (size_t)n) < 0 ? (errno ? errno : EIO) : 0;
}

static int peer_connect(const struct peer_args *a)
{
    if (!a->socket)
        return cli_usage("peer", "connect needs --socket PATH");
    struct sockaddr_un sa;
    if (socket_address(&sa, a->socket))
        return CLI_EXIT_ERROR;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return cli_error("socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        return cli_error("connecting to the peer at %s: %s", a->socket, strerror(e));
    }
    signal(SIGPIPE, SIG_IGN);
    bool in_eof = false, peer_eof = false;
    int rc = 0;
    while (!peer_eof) {
        struct pollfd p[2] = {{fd, POLLIN, 0}, {in_eof ? -1 : STDIN_FILENO, POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            rc = cli_error("poll: %s", strerror(errno));
            break;
        }
        int e = 0;
        if (p[0].revents)
            e = pump(fd, STDOUT_FILENO, &peer_eof);
        if (!e && p[1].revents) {
            e = pump(STDIN_FILENO, fd, &in_eof);
            /* The request stream is over: the peer answers what it has,
             * then closes its side. */
            if (!e && in_eof)
                shutdown(fd, SHUT_WR);
        }
        if (e == EPIPE || e == ECONNRESET)
            break; /* either side went away: the session is over */
        if (e) {
            rc = cli_error("relaying to the peer: %s", strerror(e));
            break;
        }
    }
    close(fd);
    return rc;
}

/* The agent to install: $SANDPOD_AGENT, else sandpod-agent beside us. */
char *peer_agent_source(void)
{
    const char *env = getenv("SANDPOD_AGENT");
    if (env && *env)
        return strdup(env);
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return NULL;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return NULL;
    *slash = '\0';
    size_t len = strlen(self) + sizeof("/sandpod-agent");
    char *out = malloc(len);
    if (out)
        snprintf(out, len, "%s/sandpod-agent", self);
    return out;
}

/* The agent is small (a static binary of about a megabyte): read whole,
 * written atomically, so a copy cut short never looks installed. */
static int peer_install_agent(const char *dir)
{
    char *src = peer_agent_source();
    if (!src)
        return cli_error("cannot tell where sandpod-agent is: set SANDPOD_AGENT");
    int rc = 0;
    sp_buf b = {0};
    sp_error *err = NULL;
    char *dst = sp_xasprintf("%s/agent", dir);
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0 || sp_read_all(in, &b, 64u << 20) < 0)
        rc = cli_error("reading the agent %s: %s", src, strerror(errno));
    else if (sp_write_file_atomic(dst, b.data ? b.data : "", b.len, 0555, &err) < 0)
        rc = cli_fail(false, SP_ERROR, err);
    if (in >= 0)
        close(in);
    sp_buf_dispose(&b);
    free(dst);
    free(src);
    return rc;
}

/* ------------------------------------------------------ import, export -- */

/* Imports into one store run one at a time: an exclusive flock on
 * <store>/sandpod/peer.lock, held from the moment DIR is first read until
 * it is what the archive holds. (The peer's tools take no edit lock on a
 * bare folder, so this orders imports among themselves only.) Returns the
 * fd, or -1 after the error is printed. */
static int import_lock(sp_snapstore *s)
{
    char *path = sp_xasprintf("%s/sandpod/peer.lock", sp_snapstore_path(s));
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    int e = errno;
    if (fd >= 0) {
        while (flock(fd, LOCK_EX) < 0) {
            if (errno != EINTR) {
                e = errno;
                close(fd);
                fd = -1;
                break;
            }
        }
    }
    if (fd < 0)
        cli_error("locking %s: %s", path, strerror(e));
    free(path);
    return fd;
}

/* Delete a snapshot record we made; a failure is reported, not fatal. */
static void drop_snapshot(sp_snapstore *s, const char *id)
{
    sp_error *err = NULL;
    if (sp_snapshot_delete(s, id, &err) < 0)
        cli_sp_error(SP_ERROR, err);
    sp_error_free(err);
}

/* The archive becomes a snapshot first (the workspace untouched; a bad
 * archive leaves no record), then, under the lock, DIR is kept as a
 * snapshot and the import restored over it; a restore that fails
 * half-way restores DIR's own snapshot again. Both records go at the end:
 * the store lists what it listed before, plus the import. */
static int peer_import(const struct peer_args *a)
{
    if (!a->root || !a->store)
        return cli_usage("peer", "import needs --root DIR and --store DIR");
    if (isatty(STDIN_FILENO))
        return cli_usage("peer", "import reads an archive from stdin, not a terminal");
    sp_snapstore *s = NULL;
    sp_snapshot *imp = NULL, *pre = NULL;
    sp_error *err = NULL;
    int rc = 0, lock = -1;
    int r = sp_snapstore_open(&s, a->root, a->store, NULL, &err);
    if (r == 0)
        r = sp_snapshot_import(&imp, s, NULL, STDIN_FILENO, a->tag, &err);
    if (r < 0) {
        rc = cli_fail(false, r, err);
        err = NULL;
        goto done;
    }
    if (a->no_restore)
        goto print; /* the folder stays as it is */
    if ((lock = import_lock(s)) < 0) {
        rc = CLI_EXIT_ERROR;
        drop_snapshot(s, imp->id);
        goto done;
    }
    if ((r = sp_snapshot_create(&pre, s, NULL, &err)) < 0) {
        rc = cli_fail(false, r, err);
        err = NULL;
        drop_snapshot(s, imp->id);
        goto done;
    }
    if ((r = sp_snapshot_restore(NULL, s, imp->id, &err)) < 0) {
        rc = cli_fail(false, r, err);
        err = NULL;
        drop_snapshot(s, imp->id);
        if (sp_snapshot_restore(NULL, s, pre->id, &err) < 0) {
            cli_sp_error(SP_ERROR, err);
            cli_error("%s was left half-way; what it held is snapshot %s of %s", a->root, pre->id,
                      a->store);
            goto done; /* keep the record it can be restored from */
        }
        drop_snapshot(s, pre->id);
        goto done;
    }
    drop_snapshot(s, pre->id);
print:;
    cJSON *o = cJSON_CreateObject();
    if (o && !(cJSON_AddStringToObject(o, "id", imp->id) &&
               cJSON_AddNumberToObject(o, "files", (double)imp->files) &&
               cJSON_AddNumberToObject(o, "bytes", (double)imp->bytes))) {
        cJSON_Delete(o);
        o = NULL;
    }
    rc = cli_print_json(o);
done:
    sp_error_free(err);
    if (lock >= 0)
        close(lock);
    sp_snapshot_free(pre);
    sp_snapshot_free(imp);
    sp_snapstore_free(s);
    return rc;
}

/* The newest snapshot of the store, or NULL after an error. */
static char *newest_snapshot(sp_snapstore *s, sp_error **err)
{
    sp_snapshots *l = NULL;
    if (sp_snapshot_list(&l, s, err) < 0)
        return NULL;
    char *id = l->n ? sp_xstrdup(l->v[l->n - 1]->id) : NULL;
    if (!id)
        sp_err_set(err, SP_ENOTFOUND, 0, "no snapshot in %s", sp_snapstore_path(s));
    sp_snapshots_free(l);
    return id;
}

static int peer_export(const struct peer_args *a, const char *ref)
{
    if (!a->store)
        return cli_usage("peer", "export needs --store DIR");
    if (isatty(STDOUT_FILENO))
        return cli_usage("peer", "refusing to write an archive to a terminal");
    if (a->transient && (!a->root || ref))
        return cli_usage("peer", "--transient goes with --root DIR and no REF");
    /* Without --root the workspace is never read: an empty private folder
     * in the store stands in for it (a Pod's /tmp may be read-only). */
    char *tmp = sp_xasprintf("%s/sandpod/export-XXXXXX", a->store);
    if (!a->root && !mkdtemp(tmp)) {
        int e = errno;
        free(tmp);
        return cli_error("%s: %s", a->store, e == ENOENT ? "not a snapshot store" : strerror(e));
    }
    sp_snapstore_opts o = SP_SNAPSTORE_OPTS_INIT;
    o.no_create = !a->root;
    sp_snapstore *s = NULL;
    sp_snapshot *snap = NULL;
    sp_error *err = NULL;
    char *id = NULL;
    int r = sp_snapstore_open(&s, a->root ? a->root : tmp, a->store, &o, &err);
    if (r == 0 && !ref && a->root) {
        r = sp_snapshot_create(&snap, s, NULL, &err);
        if (r == 0)
            id = sp_xstrdup(snap->id);
    } else if (r == 0 && !ref) {
        id = newest_snapshot(s, &err);
        r = id ? 0 : SP_ENOTFOUND;
    } else if (r == 0) {
        r = sp_snapshot_get(&snap, s, ref, &err);
        if (r == 0)
            id = sp_xstrdup(snap->id);
    }
    if (r == 0)
        r = sp_snapshot_export(s, id, NULL, STDOUT_FILENO,
                               a->gzip ? SP_SNAPSHOT_TAR_GZ : SP_SNAPSHOT_TAR, &err);
    if (a->transient && snap) {
        sp_error *e = NULL;
        int d = sp_snapshot_delete(s, snap->id, &e);
        if (d < 0 && r == 0) {
            r = d;
            err = e;
        } else {
            sp_error_free(e);
        }
    }
    int rc = r < 0 ? cli_fail(false, r, err) : 0;
    free(id);
    sp_snapshot_free(snap);
    sp_snapstore_free(s);
    if (!a->root)
        rmdir(tmp);
    free(tmp);
    return rc;
}

/* import and export: the operands after OP are args[0..n). */
static int peer_io(const struct peer_args *a, const char *op, int n, char **args)
{
    if (a->socket || a->agent || a->verbose || a->agent_uid >= 0)
        return cli_usage("peer", "%s takes --root, --store%s", op,
                         op[0] == 'i' ? " and --tag" : ", --gzip and REF");
    if (op[0] == 'i') {
        if (a->gzip || a->transient)
            return cli_usage("peer", "--gzip and --transient go with export");
        if (n > 0)
            return cli_usage("peer", "unexpected argument '%s'", args[0]);
        return peer_import(a);
    }
    if (a->tag || a->no_restore)
        return cli_usage("peer", "--tag and --no-restore go with import");
    if (n > 1)
        return cli_usage("peer", "unexpected argument '%s'", args[1]);
    return peer_export(a, n ? args[0] : NULL);
}

static int cmd_peer(int argc, char **argv)
{
    struct peer_args a = {.agent_uid = -1};
    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_peer, argc, argv, 0)) != -1) {
        switch (opt) {
        case CLI_GETOPT_HELP:
            return CLI_EXIT_OK;
        case OPT_ROOT:
            a.root = optarg;
            break;
        case OPT_STORE:
            a.store = optarg;
            break;
        case OPT_SOCKET:
            a.socket = optarg;
            break;
        case OPT_AGENT:
            a.agent = optarg;
            break;
        case OPT_AGENT_UID:
            if (cli_parse_ll("peer", "--agent-uid", optarg, 0, UINT32_MAX - 1, &a.agent_uid))
                return CLI_EXIT_USAGE;
            break;
        case OPT_VERBOSE:
            a.verbose = true;
            break;
        case OPT_TAG:
            a.tag = optarg;
            break;
        case OPT_GZIP:
            a.gzip = true;
            break;
        case OPT_NO_RESTORE:
            a.no_restore = true;
            break;
        case OPT_TRANSIENT:
            a.transient = true;
            break;
        default:
            return CLI_EXIT_USAGE;
        }
    }
    if (optind >= argc)
        return cli_usage("peer",
                         "missing operation: serve, connect, install-agent, import, export or "
                         "egress-serve, egress-policy, egress-log");
    const char *op = argv[optind++];
    if (strcmp(op, "install-agent") == 0) {
        if (optind >= argc)
            return cli_usage("peer", "install-agent needs a folder DIR");
        if (optind + 1 < argc)
            return cli_usage("peer", "unexpected argument '%s'", argv[optind + 1]);
        if (a.root || a.store || a.socket || a.agent || a.agent_uid >= 0)
            return cli_usage("peer", "install-agent takes only DIR");
        return peer_install_agent(argv[optind]);
    }
    if (strcmp(op, "import") == 0 || strcmp(op, "export") == 0)
        return peer_io(&a, op, argc - optind, argv + optind);
    if (strcmp(op, "protections") == 0) {
        bool network = optind < argc && strcmp(argv[optind], "network") == 0;
        if (optind + network < argc)
            return cli_usage("peer", "unexpected argument '%s'", argv[optind + network]);
        return peer_protections(network);
    }
    if (strncmp(op, "egress-", 7) == 0 &&
        (strcmp(op + 7, "serve") == 0 || strcmp(op + 7, "policy") == 0 ||
         strcmp(op + 7, "log") == 0)) {
        if (a.root || a.store || a.socket || a.agent || a.agent_uid >= 0 || a.tag || a.gzip ||
            a.no_restore || a.transient || a.verbose)
            return cli_usage("peer", "%s takes no options", op);
        return peer_egress(op, argc - optind, argv + optind);
    }
    if (a.tag || a.gzip || a.no_restore || a.transient)
        return cli_usage("peer",
                         "--tag, --no-restore, --gzip and --transient go with import and export");
    if (optind < argc)
        return cli_usage("peer", "unexpected argument '%s'", argv[optind]);
    if (strcmp(op, "serve") == 0) {
        if (a.agent_uid >= 0 && !a.agent)
            return cli_usage("peer", "--agent-uid goes with --agent PATH");
        return peer_serve(&a);
    }
    if (strcmp(op, "connect") == 0) {
        if (a.root || a.store || a.verbose || a.agent || a.agent_uid >= 0)
            return cli_usage("peer", "connect takes only --socket PATH");
        return peer_connect(&a);
    }
    const char *ops[] = {"serve",        "connect",       "install-agent", "import",      "export",
                         "egress-serve", "egress-policy", "egress-log",    "protections", NULL};
    return cli_usage_near("peer", cli_suggest(op, ops), "unknown operation '%s'", op);
}
