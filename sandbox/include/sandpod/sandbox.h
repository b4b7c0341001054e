/**
 * @file sandpod/sandbox.h
 * @brief A sandbox: a workspace folder, a hardened Podman container that
 *        sees it at /workspace, and commands run inside.
 *
 * State lives in `<state root>/sandboxes/<name>/` (sandbox.json, written
 * atomically under a file lock; workspace/; snapshots.git/; events.jsonl),
 * so a sandbox created by one process can be opened by another.
 *
 * Commands: sp_sandbox_shell() and sp_sandbox_exec() run to completion (or
 * to their timeout, which kills the command's whole process group inside
 * the container) and return stdout and stderr separately, each capped to a
 * head and a tail. A non-zero exit is a result, not an error.
 *
 * An sp_sandbox is not thread-safe; use one per thread.
 */
#ifndef SANDPOD_SANDBOX_H
#define SANDPOD_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandpod/error.h"
#include "sandpod/fs.h"
#include "sandpod/hydrate.h"
#include "sandpod/container.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sp_sandbox sp_sandbox;

/** The user commands run as unless told otherwise: unprivileged. */
#define SP_SANDBOX_DEFAULT_USER "1000:1000"

#define SP_SANDBOX_OPTS_VERSION 4

/**
 * How commands reach the container. The fast path asks sandpod-agent, the
 * container's pid 1, over a unix socket in the sandbox's state folder (a
 * round trip of a few ms); the REST path creates a Podman exec for each
 * command (the OCI runtime's exec: 70-120 ms).
 */
typedef enum sp_exec_path {
    SP_EXEC_AUTO = 0, /**< the agent when it answers, else REST */
    SP_EXEC_REST = 1, /**< always Podman's REST exec */
    SP_EXEC_FAST = 2, /**< always the agent; an error when it does not answer */
} sp_exec_path;

/**
 * How to create a sandbox. Zero values select the hardened defaults: no
 * network, all capabilities dropped, no-new-privileges, read-only root with
 * a 64 MiB tmpfs /tmp, 1 GiB of memory, 1 CPU, 256 processes, user 1000:1000.
 */
struct sp_run_result; /* below, with the commands */

typedef struct sp_sandbox_opts {
    unsigned version;
    /** [A-Za-z0-9][A-Za-z0-9_.-]{0,62}; NULL = a generated "sp-xxxxxxxx". */
    const char *name;
    /** NULL = SP_PODMAN_DEFAULT_IMAGE, built offline when missing. */
    const char *image;
    /** Host folders to hydrate the workspace from. */
    const sp_mount *mounts;
    size_t n_mounts;
    /** NULL-terminated host roots mounts must stay inside (NULL = each
     *  mount's own folder). */
    const char *const *allowed_roots;
    /** NULL-terminated "KEY=VALUE" list for every command. */
    const char *const *env;
    /** Default working folder of commands (default /workspace). */
    const char *workdir;
    /** "uid:gid" commands run as (default SP_SANDBOX_DEFAULT_USER). */
    const char *user;
    sp_network network;
    uint64_t memory_bytes; /**< 0 = 1 GiB; UINT64_MAX = no limit */
    uint64_t nano_cpus;    /**< 0 = one CPU; UINT64_MAX = no limit */
    int64_t pids_limit;    /**< 0 = 256; -1 = no limit */
    uint64_t tmpfs_bytes;  /**< size of /tmp; 0 = 64 MiB */
    bool writable_root;    /**< keep a writable root filesystem */
    /** NULL-terminated capabilities to add back. */
    const char *const *cap_add;
    /** State root (default $SANDPOD_HOME, $XDG_DATA_HOME/sandpod, ~/.local/share/sandpod). */
    const char *state_root;
    /** Podman service URL (default: discovered, see sp_podman_open()). */
    const char *podman_url;
    /** Hydration progress, for long copies (may be NULL). */
    void (*progress)(void *userdata, const sp_hydrate_progress *p);
    void *progress_userdata;
    /** How commands, shells and sessions reach the container; saved in
     *  sandbox.json. sp_sandbox_open() uses a non-zero value here in place
     *  of the saved one for that handle. A container created without the
     *  agent (an older sandpod, or no agent binary found) always uses REST
     *  under SP_EXEC_AUTO. Under SP_EXEC_AUTO, $SANDPOD_EXEC_PATH=rest|fast
     *  forces a path (for the CLI and tests). The agent binary is the
     *  first found of: $SANDPOD_AGENT (used as given; "none": no agent),
     *  ../libexec/sandpod/sandpod-agent from the folder libsandpod.so was
     *  loaded from, the same from the running program's folder, the
     *  install path configured at build time, and sandpod-agent beside
     *  the running program; each of the last four only when it and every folder
     *  above it are owned by root or the caller and nobody else may write
     *  them (a sticky folder such as /tmp excepted). When none is found,
     *  sp_sandbox_warnings() says so and how to fix it;
     *  sp_sandbox_exec_path() tells which path commands take and why. */
    sp_exec_path exec_path;
    /** User namespace (default: private; SP_USERNS_HOST shares the
     *  host's ids with the workload, on purpose only). */
    sp_userns userns;
    /** Seccomp filter (default: sandpod's profile). */
    sp_seccomp seccomp;
    /** NULL-terminated names of variables whose values every command gets
     *  from the caller's environment at the time it runs; the values are
     *  stored nowhere (sandbox.json keeps the names). */
    const char *const *env_pass;
    /** NULL-terminated shell commands run once each, in order, after
     *  hydration (`sh -c`, as the sandbox's user, in its workdir). A command
     *  that exits non-zero or times out makes create fail, and nothing of
     *  the sandbox is left (container, state, workspace); the error holds
     *  the command's output. */
    const char *const *setup;
    /** Network for setup only: when the sandbox has no network, its
     *  container is made with Podman's default network for the setup
     *  commands, then made anew without it. The workspace (a bind mount)
     *  keeps what setup wrote there; what it wrote elsewhere (/tmp, a
     *  writable root) is gone with that first container. */
    bool setup_network;
    /** Per-command deadline in ms (0 = 600000; negative = none). */
    int setup_timeout_ms;
    /** Called after each setup command with its capped output (64 KiB
     *  per stream, head and tail), whatever its exit code (may be NULL). */
    void (*setup_done)(void *userdata, size_t index, const char *command,
                       const struct sp_run_result *res);
    void *setup_userdata;
    /** When to pull the image from its registry, before hydration (see
     *  sp_pull_policy; default: missing for a reference with a
     *  registry host, never for localhost/ and short names). */
    sp_pull_policy pull;
    /** Pull without TLS verification, from a plain-HTTP registry. */
    bool pull_no_tls_verify;
    /** Each line of a pull's progress (may be NULL); gets progress_userdata. */
    sp_progress_fn pull_progress;
    /** The engine to create on (sandpod/engine.h; NULL: the state root's
     *  default, normally "local"). A sandbox remembers its engine: open()
     *  and every later call ignore this. */
    const char *engine;
    /* Version 2. */
    /** Polled with progress_userdata while the workspace is hydrated; once
     *  it returns true, create stops, fails with SP_ECANCELED and leaves
     *  nothing behind. May be NULL. */
    bool (*should_stop)(void *userdata);
    /** Who made the sandbox for whom, saved in sandbox.json ("made_by"):
     *  "mcp" for a sandbox an MCP session made (`sandpod mcp --create` or
     *  --project), which `sandpod gc --kept` may collect; NULL for one a
     *  user made. At most 64 printable ASCII characters. */
    const char *made_by;
    /* Version 3. */
    /** Egress rules (sandpod/egress.h says their forms and how they are
     *  decided): NULL-terminated lists of what the workload may reach and
     *  what it may not (deny wins). When either is non-NULL, even empty,
     *  the sandbox's network is its egress proxy alone: `network` must be
     *  SP_NET_NONE (the default), and everything no rule allows is refused.
     *  NULL and NULL: no policy, the network is `network`'s. */
    const char *const *allow;
    const char *const *deny;
    /** A hosts(5) file whose names the proxy resolves before DNS (copied
     *  at create; NULL: none). Its addresses are judged like any other:
     *  a name listed at a private address still needs a rule naming it. */
    const char *egress_hosts;
    /** Allow rules in force only while the setup commands run (the
     *  sandbox keeps allow and deny alone): setup may reach a wider list
     *  than the workload. Needs allow or deny. */
    const char *const *setup_allow;
    /* Version 4. */
    /** Brokered secrets (sandpod/egress.h): "NAME=env:VAR" (the value of
     *  this process's VAR) or "NAME=file:PATH" (the file's content, one
     *  trailing newline dropped). The workload's $NAME holds a stand-in,
     *  a random value unique to the sandbox; its egress proxy puts the
     *  real value in place of the stand-in on requests to the hosts the
     *  secret is for, and refuses a request that carries it anywhere
     *  else. Needs egress rules (allow or deny). */
    const char *const *secrets;
    /** "NAME=SCOPE": a host a secret is for (every secret needs one):
     *  "api.example.com", "*.example.com", "api.example.com:8443" (HTTPS,
     *  port 443 when none is given), "http://HOST[:PORT]" (plain HTTP,
     *  port 80 when none is given). */
    const char *const *secret_for;
    /** "NAME=query", "NAME=body" or "NAME=query,body": where else than the
     *  headers the proxy puts a secret's value (a body is taken whole, at
     *  most 1 MiB, and sent with a Content-Length of its own). */
    const char *const *secret_in;
    /** A PEM file of CA certificates the egress proxy trusts, besides the
     *  host's own bundle, when it verifies an HTTPS host it brings a
     *  secret to (a private registry's CA, a corporate one). Copied at
     *  create; a fork keeps it. NULL: the host's alone. */
    const char *egress_ca;
} sp_sandbox_opts;

#define SP_SANDBOX_OPTS_INIT                                                                       \
    {                                                                                              \
        .version = SP_SANDBOX_OPTS_VERSION                                                         \
    }

/**
 * Create a sandbox: state folder, workspace hydrated from the mounts,
 * container created and started. On failure nothing is left behind.
 *
 * @return 0; SP_EEXISTS (name taken); SP_EINVAL (bad name or option);
 *         hydration errors (SP_EESCAPE, SP_ETOOBIG, ...); SP_EPODMAN
 */
int sp_sandbox_create(sp_sandbox **out, const sp_sandbox_opts *opts, sp_error **err);

/** The state root that sandboxes of `state_root` live in (NULL: the
 *  default, $SANDPOD_HOME, $XDG_DATA_HOME/sandpod or
 *  ~/.local/share/sandpod), as an absolute path in *out (free()). */
int sp_sandbox_state_root(char **out, const char *state_root, sp_error **err);

/** What sp_sandbox_opts.made_by said at create (NULL: a user made it). */
const char *sp_sandbox_made_by(const sp_sandbox *sb);

/**
 * Open an existing sandbox by name (state_root, podman_url and a non-zero
 * exec_path are the only fields of opts used; NULL = defaults). Does not
 * talk to Podman.
 *
 * @return 0; SP_ENOTFOUND
 */
int sp_sandbox_open(sp_sandbox **out, const char *name, const sp_sandbox_opts *opts,
                    sp_error **err);

#define SP_SANDBOX_AGENT_OPTS_VERSION 1

/** What sp_sandbox_open_agent() needs. */
typedef struct sp_sandbox_agent_opts {
    unsigned version;
    /** The workspace folder, at the same path as the workload sees it
     *  (/workspace in a Pod): relative working folders are below it. */
    const char *workspace;
    /** The agent's socket: a path in a folder the workload shares with us
     *  (/.sandpod/run/agent.sock in a Pod). */
    const char *socket;
    /** The workload's uid: the socket's owner and the agent's; -1 = ours. */
    int64_t uid;
} sp_sandbox_agent_opts;

#define SP_SANDBOX_AGENT_OPTS_INIT                                                                 \
    {                                                                                              \
        .version = SP_SANDBOX_AGENT_OPTS_VERSION, .uid = -1                                        \
    }

/**
 * A handle on a running workload's sandpod-agent alone, without Podman:
 * what `sandpod peer serve --agent` uses inside a Pod, where the agent is
 * pid 1 of another container. sp_sandbox_shell(), sp_sandbox_exec() and
 * the sp_session_* calls go through the agent only (never a Podman exec);
 * everything that needs Podman (status, stop, snapshots with pausing, the
 * edit lock) fails or is absent. Kills never use pids: the agent kills a
 * command's tree on a KILL frame or when its connection closes.
 *
 * Each command's connection checks, before sending a byte: the socket's
 * folder and name are opened O_NOFOLLOW (a symlink is refused), the name
 * is a socket owned by opts->uid, and the process listening on it runs as
 * opts->uid and is not this one (SO_PEERCRED's uid; its pid, which
 * across PID namespaces is 0, is never used otherwise).
 *
 * Does not connect yet. @return 0; SP_EINVAL
 */
int sp_sandbox_open_agent(sp_sandbox **out, const sp_sandbox_agent_opts *opts, sp_error **err);

/** Free a handle; accepts NULL. The sandbox itself stays. */
void sp_sandbox_free(sp_sandbox *sb);

const char *sp_sandbox_name(const sp_sandbox *sb);
/** Host path of the workspace folder; NULL for a sandbox on another
 *  engine (its workspace is beside its workload, not on this host). */
const char *sp_sandbox_workspace(const sp_sandbox *sb);
/** The engine the sandbox runs on ("local" unless made elsewhere). */
const char *sp_sandbox_engine(const sp_sandbox *sb);
/** Whether it runs on another engine than local Podman (a Kubernetes Pod).
 *  Commands (sp_sandbox_shell(), sp_sandbox_exec(), attach), status,
 *  removal, the tool suite (sp_sandbox_rpc(), which sp_tools uses), the
 *  typed snapshot calls (sp_sandbox_snapshot_create() ...), sessions
 *  (sandpod/session.h, within what the peer's tools carry), apply, fork
 *  (to and from any engine), templates and logs work; sp_sandbox_fs()
 *  (`sandpod fs NAME` runs in the peer instead), sp_sandbox_snapshot_open()
 *  (a local store handle), stop, restart and pause are SP_EINVAL saying
 *  so (a Pod has no stopped or paused state), with reason SP_R_ELSEWHERE
 *  where what is asked for is not on this host. For people (status
 *  lines): programs ask for the capability itself (sp_sandbox_stops(),
 *  sp_sandbox_workspace() NULL, SP_R_ELSEWHERE). */
bool sp_sandbox_is_remote(const sp_sandbox *sb);
/**
 * One JSON-RPC request to the sandpod peer beside a remote sandbox's
 * workload: the MCP methods (initialize is done already; tools/list,
 * tools/call) with params as JSON text (NULL: {}). *result receives the
 * answer's "result" as JSON text (free()). A dropped stream is opened again
 * and the request sent again under the same key: the peer runs it once.
 * Thread-safe: requests of one handle run one at a time.
 *
 * @return 0; SP_EINVAL for a local sandbox; SP_ERROR with the peer's
 *         message for a JSON-RPC error or an engine that cannot be reached
 */
int sp_sandbox_rpc(sp_sandbox *sb, const char *method, const char *params, char **result,
                   sp_error **err);

/** The longest request key. */
#define SP_RPC_KEY_MAX 128

/**
 * sp_sandbox_rpc() under a key of the caller's (1 to SP_RPC_KEY_MAX bytes,
 * unique per request): the peer runs a request once per key, so sending it
 * again (after this process restarted, say) gets the first run's answer;
 * and sp_sandbox_rpc_cancel_key() cancels just this request.
 */
int sp_sandbox_rpc_keyed(sp_sandbox *sb, const char *method, const char *params, const char *key,
                         char **result, sp_error **err);
/** Cancel the request of this key, running on another thread (or about
 *  to be sent: then it never is). */
void sp_sandbox_rpc_cancel_key(sp_sandbox *sb, const char *key);
/** Where the sandpod peer beside a remote sandbox's workload sees its
 *  workspace, and where it keeps the sandbox's snapshot store. */
#define SP_PEER_WORKSPACE "/workspace"
#define SP_PEER_STORE     "/sandpod/store"
/**
 * Run `sandpod ARGS...` in the container of the sandpod peer beside a
 * remote sandbox's workload, where its workspace is SP_PEER_WORKSPACE and
 * its store SP_PEER_STORE (the store commands: `diff --root /workspace --store
 * /sandpod/store base`, `snapshot rm ...`). Its stdout goes to out_fd and
 * its stderr to err_fd as they come; *exit_code is its status.
 *
 * @return 0 (whatever the status); SP_EINVAL for a local sandbox; the
 *         engine's errors when the command could not run
 */
int sp_sandbox_peer_command(sp_sandbox *sb, const char *const *args, int out_fd, int err_fd,
                            int *exit_code, sp_error **err);
/** sp_sandbox_peer_command() with the command's stdin read from in_fd
 *  until its end (-1: none), e.g. `fs write PATH`. */
int sp_sandbox_peer_command_in(sp_sandbox *sb, const char *const *args, int in_fd, int out_fd,
                               int err_fd, int *exit_code, sp_error **err);
/** Cancel every sp_sandbox_rpc() of this handle running on other threads
 *  (MCP notifications/cancelled); each returns an error soon after. */
void sp_sandbox_rpc_cancel(sp_sandbox *sb);
/** Host path of the sandbox's state folder. */
const char *sp_sandbox_state_dir(const sp_sandbox *sb);
/** Container id, or NULL if none was created yet. */
const char *sp_sandbox_container_id(const sp_sandbox *sb);
const char *sp_sandbox_image(const sp_sandbox *sb);
/** Creation time, RFC 3339 UTC. */
const char *sp_sandbox_created_at(const sp_sandbox *sb);
/**
 * Which way commands run as the sandbox's user reach its container now,
 * and why. Asks no engine: it reads what the handle knows (sandbox.json,
 * the handle's exec_path, $SANDPOD_EXEC_PATH).
 *
 * @param reason receives one line (free() it; may be NULL): "agent PATH"
 *        (where the agent was found when the container was made), "no
 *        sandpod-agent was found when the container was made",
 *        "SANDPOD_EXEC_PATH=rest", ...
 * @return SP_EXEC_FAST (through sandpod-agent) or SP_EXEC_REST (a Podman
 *         exec per command; also for a sandbox on another engine, whose
 *         commands go through that engine)
 */
sp_exec_path sp_sandbox_exec_path(char **reason, const sp_sandbox *sb);

/**
 * Where the agent of a container made now would come from (the lookup of
 * sp_sandbox_opts.exec_path), without making one: 0 and its path in *path,
 * or SP_ENOTFOUND and in *why the reason there is none ("no sandpod-agent
 * was found; ...", "SANDPOD_AGENT=none", a refused candidate). free() both.
 */
int sp_sandbox_agent_path(char **path, char **why);

/** What Podman and sandpod warned about when the container was last made
 *  (limits a rootless service dropped, a seccomp profile that could not be
 *  written, no sandpod-agent found): NULL-terminated, owned by the handle. */
const char *const *sp_sandbox_warnings(const sp_sandbox *sb);

/** A host folder the workspace was hydrated from, as sp_sandbox_create()
 *  recorded it (sandbox.json keeps it). Strings are owned by the handle. */
typedef struct sp_sandbox_mount {
    const char *host_path;      /**< resolved, absolute */
    const char *mount_path;     /**< where it landed in the workspace, "." = its root */
    const char *const *include; /**< NULL-terminated globs (empty: everything); never NULL */
    const char *const *exclude; /**< NULL-terminated globs; never NULL */
    uint64_t max_bytes;         /**< the cap on what it selects; 0 = none */
    bool follow_symlinks;
    bool gitignore;        /**< the source's git ignore rules applied */
    uint64_t files, bytes; /**< what it brought in at create */
    bool keep_secrets;     /**< `secrets=keep`: credentials were copied as they were */
    /** Files hydration left out because they hold credentials (paths
     *  relative to the workspace; names only, never content),
     *  NULL-terminated; never NULL. Empty for a sandbox whose hydration
     *  ran elsewhere (a kubernetes engine's) or made by an older sandpod. */
    const char *const *secrets_left_out;
    /** Files copied with their credentials taken out (a .git/config with
     *  a token in a remote URL, ...), as secrets_left_out. */
    const char *const *secrets_rewritten;
} sp_sandbox_mount;

/**
 * The host folders the sandbox was hydrated from at create, in order.
 *
 * @param n  receives their count: 0 for a sandbox made without mounts, or
 *           by a sandpod that did not record them yet
 * @return an array owned by the handle (NULL when *n is 0)
 */
const sp_sandbox_mount *sp_sandbox_mounts(const sp_sandbox *sb, size_t *n);

/**
 * Serialise a change to the workspace made from the host side: an
 * exclusive flock on `<state folder>/edit.lock`, held until
 * sp_sandbox_edit_unlock(). The tool suite (MCP, `sandpod call`) and
 * `sandpod fs NAME` hold it across every call that changes files
 * (write_file, edit_file, insert, delete, mkdir, apply_patch, restore), so
 * concurrent processes never lose one another's changes. The lock file is
 * outside the workspace: the container can neither see nor hold it, and
 * its own writes are not serialised.
 *
 * @return the lock (an fd) for sp_sandbox_edit_unlock(), or a negative SP_E*
 */
int sp_sandbox_edit_lock(sp_sandbox *sb, sp_error **err);
/** Release a lock from sp_sandbox_edit_lock(); negative values are ignored. */
void sp_sandbox_edit_unlock(int lock);

/** The contained filesystem on the workspace (opened on first use; owned
 *  by the sandbox). NULL with *err set on failure. */
sp_fs *sp_sandbox_fs(sp_sandbox *sb, sp_error **err);

/** The URL of the local engine's service this sandbox talks to (the
 *  connection is opened on first use), for another handle on the same
 *  service; NULL with *err set for a sandbox on another engine. Owned by
 *  the sandbox. */
const char *sp_sandbox_service_url(sp_sandbox *sb, sp_error **err);

/** What a sandbox's container is doing. */
typedef struct sp_sandbox_status {
    char *state; /**< "running", "paused", "exited", "created", "missing" */
    bool running;
    bool oom_killed;
    int exit_code;   /**< of the container's main process, once exited */
    char *container; /**< container id, or NULL when missing */
    int pid;         /**< host pid of the container's pid 1; 0 when not running */
    /** The Podman service runs rootless (keep-id: the workload is the caller). */
    bool rootless;
    /** Memory, CPU and pids limits are in force (a rootless service on
     *  cgroup v1 cannot set them; Podman drops them with a warning). */
    bool limits_apply;
    /** Host uid and gid of the container's user (-1 until first started). */
    int64_t host_uid, host_gid;
} sp_sandbox_status;

/** Ask Podman about the container. @param out free with sp_sandbox_status_free() */
int sp_sandbox_status_get(sp_sandbox_status **out, sp_sandbox *sb, sp_error **err);

void sp_sandbox_status_free(sp_sandbox_status *st);

/**
 * What the sandbox's container printed (its main process, the agent: when
 * it was ready, when it stopped), running or stopped, handed to fn as it
 * comes; with opts->follow until the container stops.
 *
 * @return 0; SP_ENOTFOUND when the sandbox has no container (start it
 *         again), SP_EPODMAN, or what fn returned to stop
 */
int sp_sandbox_logs(sp_sandbox *sb, const sp_logs_opts *opts, sp_logs_fn fn, void *userdata,
                    sp_error **err);

/**
 * Start the container. A container that is gone (removed, lost in a host
 * reboot) is recreated from the saved configuration; the workspace is kept.
 */
int sp_sandbox_start(sp_sandbox *sb, sp_error **err);
/** Stop the container (SIGTERM, SIGKILL after timeout_s; negative = 10 s). */
int sp_sandbox_stop(sp_sandbox *sb, int timeout_s, sp_error **err);
int sp_sandbox_restart(sp_sandbox *sb, sp_error **err);
/** Freeze / thaw the container (snapshots use this for consistency). */
/** Whether sp_sandbox_pause() really freezes the container: false for a
 *  rootless Podman service on cgroup v1 (no freezer), where it does
 *  nothing and snapshots are taken while the workload runs. */
bool sp_sandbox_pauses(sp_sandbox *sb);
/** Whether sp_sandbox_stop() keeps the sandbox to start again: false for
 *  a sandbox whose engine has no stopped state (a Pod), where stop and
 *  restart are SP_EINVAL saying so. */
bool sp_sandbox_stops(const sp_sandbox *sb);

int sp_sandbox_pause(sp_sandbox *sb, sp_error **err);
int sp_sandbox_unpause(sp_sandbox *sb, sp_error **err);

/**
 * Remove the container and the state folder. With keep_workspace, the
 * workspace folder stays where it is (its path is sp_sandbox_workspace())
 * and only the rest goes. The handle stays valid for getters only.
 */
int sp_sandbox_remove(sp_sandbox *sb, bool keep_workspace, sp_error **err);

/** Names of the sandboxes under a state root (NULL = default), sorted.
 *  @param out NULL-terminated; free each string and the array with free(). */
int sp_sandbox_list(char ***out, const char *state_root, sp_error **err);

/**
 * Names of the incomplete sandboxes under a state root (NULL = default),
 * sorted: state folders that hold no sandbox.json, left by a create that
 * was killed before it saved one (or one still under way; then its lock is
 * held). sp_sandbox_open() does not open them and sp_sandbox_list() does
 * not name them; sp_sandbox_remove_incomplete() removes them.
 *
 * @param out NULL-terminated; free each string and the array with free()
 */
int sp_sandbox_list_incomplete(char ***out, const char *state_root, sp_error **err);

/**
 * Remove an incomplete sandbox: the state folder
 * `<state root>/sandboxes/<name>/` while it holds no sandbox.json. Its lock
 * is taken without waiting and held until the folder is gone; the folder is
 * first moved out of sandboxes/ (to `<state root>/removed-<name>-<ms>`),
 * so the name is free at once, then removed without following a symlink.
 * A container the create made is not touched (sp_sandbox_gc() collects
 * it).
 *
 * @param state_root  NULL: the default
 * @param min_age_s   leave the folder alone unless it last changed at least
 *                    this many seconds ago (0: whatever its age). A create
 *                    makes the folder a moment before it takes the lock;
 *                    sp_sandbox_gc() waits a minute.
 * @param dry_run     judge only (take the lock and let it go): change nothing
 * @return 0 (removed; or, with dry_run, removable now); SP_ENOTFOUND (no
 *         such folder); SP_EEXISTS (it holds a sandbox.json: a sandbox, for
 *         sp_sandbox_remove()); SP_ERROR with sys_errno EWOULDBLOCK when
 *         its lock is held (a create is under way) or it is younger than
 *         min_age_s; SP_EINVAL (bad name); SP_EDENIED (a state root that is
 *         not private); removal errors, whose message says where what could
 *         not be removed was left
 */
int sp_sandbox_remove_incomplete(const char *name, const char *state_root, unsigned min_age_s,
                                 bool dry_run, sp_error **err);

/** What sp_sandbox_gc() found. */
typedef enum sp_orphan_kind {
    /** A container sandpod made that no sandbox owns any more. */
    SP_ORPHAN_CONTAINER,
    /** A sandpod container's conmon (and its `runc init`) that the
     *  service no longer knows: a service killed while it started the
     *  container. Found only when the service runs on this host. */
    SP_ORPHAN_RUNTIME,
    /** A `podman system service` whose socket's folder is gone: nobody
     *  can reach it (a private service of a deleted state root). */
    SP_ORPHAN_SERVICE,
    /** A Pod (of a kubernetes engine) sandpod made from this state root
     *  that no sandbox owns any more (sp_sandbox_gc_engine()). */
    SP_ORPHAN_POD,
    /** An incomplete sandbox: a state folder without sandbox.json whose
     *  lock is free and that has not changed for a minute (a create killed
     *  before it saved one). `container` is the sandbox's name. */
    SP_ORPHAN_INCOMPLETE,
    /** A sandbox an MCP session made and kept (made_by "mcp"), not running
     *  and unused for long (sp_sandbox_gc_kept()). `container` is the
     *  sandbox's name. */
    SP_ORPHAN_KEPT,
} sp_orphan_kind;

typedef struct sp_sandbox_orphan {
    sp_orphan_kind kind;
    char *container; /**< its name (for SP_ORPHAN_SERVICE: the socket URL) */
    char *state_dir; /**< the state folder its sandpod.state label names, or NULL */
    char *reason;    /**< why no sandbox owns it */
    int pid;         /**< the process (conmon, the service), or 0 */
    bool removed;    /**< false in a dry run, or when removal failed */
    char *error;     /**< why removal failed, or NULL */
} sp_sandbox_orphan;

typedef struct sp_sandbox_orphans {
    sp_sandbox_orphan *items;
    size_t n;
    /** Containers labelled sandpod=1 without a sandpod.state label (made
     *  before containers carried it): never touched, only counted. */
    size_t unlabelled;
    /** Incomplete sandboxes left alone: a create holds their lock, or their
     *  folder changed less than a minute ago. Only counted. */
    size_t incomplete_busy;
} sp_sandbox_orphans;

/**
 * Find and (unless dry_run) remove what sandpod left that nothing owns:
 * orphaned containers of every state root on the Podman service (their
 * state folder is gone, holds no sandbox.json, or names another container:
 * a create or recreate that was killed half-way; a sandbox whose lock is
 * held is busy and left alone); the conmon and `runc init` processes of
 * sandpod containers that the service lost (it was killed while starting
 * them; only for a service on this host, only processes of this user
 * older than a minute); Podman services of this user whose socket
 * folder is gone (older than a minute); and the incomplete sandboxes of the
 * state root (sp_sandbox_remove_incomplete() with a minute's age; those
 * left alone are counted in incomplete_busy). Does not start a Podman
 * service.
 *
 * @param out         free with sp_sandbox_orphans_free()
 * @param podman_url  the service, or NULL: $SANDPOD_URL, then discovery
 * @param state_root  NULL: judge the containers of every state root, and
 *                    the incomplete sandboxes of the default one; else
 *                    only the containers whose state folder lies beneath
 *                    this one (absolute) and its incomplete sandboxes, and
 *                    find the service as its sandboxes do
 * @return 0 (removal failures are reported per item); SP_EPODMAN
 */
int sp_sandbox_gc(sp_sandbox_orphans **out, const char *podman_url, const char *state_root,
                  bool dry_run, sp_error **err);
void sp_sandbox_orphans_free(sp_sandbox_orphans *o);

/** What sp_sandbox_gc_kept() collects: sp_sandbox_opts.made_by of the
 *  sandboxes MCP sessions make. */
#define SP_MADE_BY_MCP "mcp"

/**
 * Find and (unless dry_run) remove the sandboxes MCP sessions made and
 * kept (made_by SP_MADE_BY_MCP) that are not running and were last used
 * at least older_than_s seconds ago. Last used is the newest modification
 * time of the sandbox's sandbox.json (written at create and at every
 * start) and its events.jsonl (a line for every tool call and every CLI
 * command run in it). A sandbox whose lock is held
 * (a start, a remove under way), or whose container is running, paused or
 * in any state but exited, created or missing, is left alone; one whose
 * state cannot be had is left too, as an item with the error. Each is
 * judged and removed under its lock, taken without waiting.
 *
 * @param out         items of kind SP_ORPHAN_KEPT, reason saying why;
 *                    free with sp_sandbox_orphans_free()
 * @param podman_url  as sp_sandbox_open() takes it (NULL: found)
 * @param state_root  NULL: the default
 * @return 0 (failures are reported per item); SP_EINVAL; list errors
 */
int sp_sandbox_gc_kept(sp_sandbox_orphans **out, const char *podman_url, const char *state_root,
                       int64_t older_than_s, bool dry_run, sp_error **err);

/**
 * sp_sandbox_gc() for an engine that runs sandboxes elsewhere: its
 * workloads labelled with this state root's owner id (a Pod keeps the
 * label sandpod.owner) whose sandbox record is gone, or names another
 * workload, are removed (listed only when dry_run). A sandbox being
 * created (its folder without sandbox.json yet) is left alone. Items are
 * SP_ORPHAN_POD, `container` the workload's name.
 */
int sp_sandbox_gc_engine(sp_sandbox_orphans **out, const char *state_root, const char *engine,
                         bool dry_run, sp_error **err);

/* ------------------------------------------------------------ commands -- */

#define SP_RUN_OPTS_VERSION 1

typedef struct sp_run_opts {
    unsigned version;
    /** Working folder in the container (default: the sandbox's workdir). */
    const char *workdir;
    /** Extra NULL-terminated "KEY=VALUE" entries. */
    const char *const *env;
    /** Deadline in ms: 0 = 60000; negative = none. On timeout the command's
     *  process group is killed and timed_out is set. */
    int timeout_ms;
    /** Output caps per stream: bytes (0 = 8192) and lines (0 = 200); the
     *  head and the tail are kept. */
    size_t max_bytes;
    size_t max_lines;
    /** Data for the command's stdin (then EOF); NULL = empty stdin. */
    const void *stdin_data;
    size_t stdin_len;
    /** Run as this user instead of the sandbox's. */
    const char *user;
} sp_run_opts;

#define SP_RUN_OPTS_INIT                                                                           \
    {                                                                                              \
        .version = SP_RUN_OPTS_VERSION                                                             \
    }

/** The outcome of a command. */
typedef struct sp_run_result {
    char *out; /**< capped stdout, NUL-terminated (may hold other NULs) */
    size_t out_len;
    bool out_truncated;
    char *err; /**< capped stderr */
    size_t err_len;
    bool err_truncated;
    uint64_t out_total; /**< bytes the command wrote to stdout */
    uint64_t err_total;
    int exit_code; /**< 128+signal when killed; -1 when unknown */
    bool timed_out;
    int64_t duration_ms;
} sp_run_result;

/**
 * Run `sh -c command` in the sandbox.
 *
 * @return 0 (whatever the exit code); SP_EPODMAN when the container is not
 *         running (the message says why and how to recover) or the service
 *         fails; SP_EINVAL
 */
int sp_sandbox_shell(sp_run_result **out, sp_sandbox *sb, const char *command,
                     const sp_run_opts *opts, sp_error **err);

/** Run argv (NULL-terminated) without a shell. Same results as shell. */
int sp_sandbox_exec(sp_run_result **out, sp_sandbox *sb, const char *const *argv,
                    const sp_run_opts *opts, sp_error **err);

void sp_run_result_free(sp_run_result *r);

#ifdef __cplusplus
}
#endif

#endif
