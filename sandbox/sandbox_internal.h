/* Internals of the sandbox module. Not installed. */
#ifndef SANDPOD_SANDBOX_INTERNAL_H
#define SANDPOD_SANDBOX_INTERNAL_H

#include "base.h"
#include "egress_secrets.h"
#include "kind.h"
#include "log_internal.h"
#include "engine/local.h"
#include "sandpod/engine.h"
#include "sandpod/sandbox.h"
#include "sandpod/snapshot.h"

/* An id map as /proc/PID/uid_map writes it: container id, host id, count. */
#define SP_IDMAP_MAX 8
typedef struct sp_idmap_line {
    uint32_t inside, outside, count;
} sp_idmap_line;
typedef struct sp_idmap {
    sp_idmap_line l[SP_IDMAP_MAX];
    size_t n;
} sp_idmap;

/* ids.c: parse /proc's format (-1 when it is not that); map one id. */
int sp_idmap_parse(sp_idmap *m, const char *text);
bool sp_idmap_to_host(const sp_idmap *m, uint32_t inside, uint32_t *out);
bool sp_idmap_to_inside(const sp_idmap *m, uint32_t host, uint32_t *out);
bool sp_idmap_equal(const sp_idmap *a, const sp_idmap *b);
bool sp_idmap_is_identity(const sp_idmap *m);
/* The maps of process pid (its user namespace's), as this process sees
 * them. */
int sp_idmap_read(sp_idmap *uid, sp_idmap *gid, int pid, sp_error **err);
struct cJSON;
struct cJSON *sp_idmap_json(const sp_idmap *m);
int sp_idmap_from_json(sp_idmap *m, const struct cJSON *a);
/* Give every entry of the tree (dirfd, name) the owner it has in the
 * container under the new maps: a host id the old maps know keeps its
 * container id; any other (every one when old_u/old_g are NULL) becomes
 * uid/gid. Set-id bits survive the chown. *changed counts entries changed. */
int sp_ids_hand_over(uint64_t *changed, int dirfd, const char *name, const sp_idmap *old_u,
                     const sp_idmap *old_g, const sp_idmap *new_u, const sp_idmap *new_g,
                     uint32_t uid, uint32_t gid, sp_error **err);

/* What sandbox.json records: enough to recreate the container. */
typedef struct sp_sandbox_config {
    char *image;
    char **env; /* NULL-terminated, never NULL */
    char *workdir;
    char *user;
    sp_network network;
    uint64_t memory_bytes;
    uint64_t nano_cpus;
    int64_t pids_limit;
    uint64_t tmpfs_bytes;
    bool writable_root;
    char **cap_add;
    sp_exec_path exec_path;
    /* The container runs sandpod-agent as pid 1 (else catatonit + sleep). */
    bool agent;
    /* Where that agent was found when the container was made; or why it
     * has none (a phrase for sp_sandbox_exec_path()). NULL: not recorded. */
    char *agent_source;
    char *agent_missing;
    sp_userns userns;
    sp_seccomp seccomp;
    char **env_pass; /* names only; values come from the caller at each command */
    /* The container's id maps when the workspace was last handed over
     * (n == 0: never), and the host ids its user has under them. */
    sp_idmap uid_map, gid_map;
    int64_t host_uid, host_gid; /* -1: not known yet */
    /* Facts from the service at the last container create. */
    bool rootless;
    bool limits_apply;
    char **warnings; /* what Podman and sandpod warned about then */
    /* The setup commands that made the workspace what it is (never NULL). */
    char **setup;
    /* The egress policy: "allow RULE" and "deny RULE" lines (egress_policy.h),
     * in force through the sandbox's proxy; NULL: no policy (the network
     * is `network`'s). */
    char **egress;
    /* Brokered secrets: names, stand-ins and scopes, never a value (those
     * are in egress/secrets alone, sandbox_secrets.c). */
    sp_egress_secrets secrets;
    /* The host folders hydrated at create (strings owned here). */
    sp_sandbox_mount *mounts;
    size_t n_mounts;
} sp_sandbox_config;

/* What a sandbox gets when its options say nothing (sandbox.json too). */
#define SP_SANDBOX_DEFAULT_MEMORY    (1ull << 30)
#define SP_SANDBOX_DEFAULT_NANO_CPUS 1000000000ull
#define SP_SANDBOX_DEFAULT_PIDS      256
#define SP_SANDBOX_DEFAULT_TMPFS     (64ull << 20)

/* Interactive sessions of a handle (sessions.c). */
struct sp_session_table;
typedef struct sp_session_table sp_session_table;

struct sp_sandbox {
    char *name;
    char *state_root;
    char *state_dir;
    char *workspace;
    char *local_url; /* the local engine's; NULL: found */
    char *container_id;
    char *created_at;
    char *made_by; /* sp_sandbox_opts.made_by, or NULL */
    sp_sandbox_config cfg;
    sp_fs *fs;
    /* The local engine (opened on first use, sp_sandbox_local()). */
    const sp_local_ops *lops;
    sp_local *local;
    int lock_fd;
    unsigned lock_depth;
    sp_session_table *sessions; /* NULL until the first session starts */
    int init_pid;               /* host pid of the container's pid 1; 0 = unknown */
    bool init_pid_asked;        /* refreshed from Podman once for this handle */
    /* Agent-only handles (sp_sandbox_open_agent()): the agent's socket
     * path and the uid that must own it; NULL for a Podman sandbox. */
    char *agent_socket;
    int64_t agent_uid;
    /* Its kind (kind.h), chosen at open or create. */
    const sp_kind *kind;
    /* A sandbox on another engine (remote.c): its engine's name and kind,
     * the engine's record from sandbox.json, and the engine's handle
     * (opened on first use). engine NULL: the local engine. */
    char *engine;
    sp_engine_kind engine_kind;
    struct cJSON *remote_record;
    const struct sp_remote_ops *rops;
    struct sp_remote *remote;
    /* While create runs: the secrets with their values, for the kind to
     * hand to its proxy; NULL otherwise. */
    const sp_egress_secrets *new_secrets;
    /* The sessions this handle started in the peer (remote_sessions.c). */
    struct sp_rsess *rsess;
    size_t n_rsess;
};

/* Record the mounts a create hydrated (hr: what hydration reported, or
 * NULL: the requests as given). */
/* *o = the caller's opts (any version) with every later field zeroed. */
void sp_sandbox_opts_take(sp_sandbox_opts *o, const sp_sandbox_opts *in);

void sp_sandbox_record_mounts(sp_sandbox_config *c, const sp_mount *req, size_t n,
                              const sp_hydrate_result *hr);

int sp_sandbox_resolve_root(char **out, const char *state_root, sp_error **err);
/* sp_sandbox_create() with the workspace filled by seed (called with the
 * state folder made, under the sandbox's lock: for a local sandbox with
 * the empty workspace made, before the container exists; on a remote
 * engine once the workload serves, before its setup commands and its
 * `base` snapshot) in place of hydrating opts->mounts; a failing seed
 * fails the create, which removes everything it made. `carried`: the
 * secrets (with values and the new sandbox's stand-ins) a fork carries
 * from its origin, in place of opts->secrets; NULL: opts'. */
int sp_sandbox_create_seeded(sp_sandbox **out, const sp_sandbox_opts *opts,
                             const sp_egress_secrets *carried, sp_sandbox_seed_fn seed,
                             void *seed_data, sp_error **err);
/* snap.c: the archive write() makes, streamed through a pipe into sb's
 * import (kind.h's snap_import) as a new snapshot tagged tag, restored
 * into the workspace when `restore`; *id (may be NULL) its id. */
int sp_sandbox_import_from(char **id, sp_sandbox *sb, const char *tag, bool restore,
                           sp_tar_writer write, void *data, sp_error **err);
/* attach.c: the handle of a command started on stream io, which it owns. */
sp_attach *sp_attach_new(sp_sandbox *sb, sp_stream io, bool tty);
/* A handle on the sandbox `name` of state root `root` (nothing read yet)
 * of the given kind, until told otherwise. */
sp_sandbox *sp_sandbox_new(const char *root, const char *name, const char *url,
                           const sp_kind *kind);
/* "UID" or "UID:GID" (GID defaults to UID); -1 for anything else. */
int sp_sandbox_parse_user(const char *user, uid_t *uid, gid_t *gid);
/* mkdir -p for a host path we own (the state root): private. */
int sp_mkdirs(const char *path, sp_error **err);
/* rm -rf of a folder in our state root, never following a symlink. */
int sp_rm_tree(const char *path, sp_error **err);
/* Remove sb's state folder (rootless: from inside the user namespace what
 * the workload made as another id). */
int sp_sandbox_rm_state_dir(sp_sandbox *sb, sp_error **err);
/* flock the state folder's lock file; nests. */
int sp_sandbox_lock(sp_sandbox *sb, sp_error **err);
void sp_sandbox_unlock(sp_sandbox *sb);
int sp_sandbox_save(sp_sandbox *sb, sp_error **err);
/* sandbox_egress.c: the policy lines of o's rules, checked (NULL: none);
 * and policy lines split back into rules, for a fork. */
int sp_sandbox_egress_from_opts(char ***out, const sp_sandbox_opts *o, sp_error **err);

/* sandbox_secrets.c: o's secrets checked into *out, with their values when
 * read_values (from this process's environment or files), with new
 * stand-ins; none when o names none. */
int sp_sandbox_secrets_from_opts(sp_egress_secrets *out, const sp_sandbox_opts *o, bool read_values,
                                 sp_error **err);
/* The secrets a fork of origin (a sandbox or a template) carries into
 * *out: its origin's names and scopes with new stand-ins, each value from
 * o->secrets when it names the secret (NAME=env:VAR|file:PATH), else from
 * the origin's own values (a template has none). Refused: a secret with
 * no value, o->secrets naming one the origin lacks, o->secret_for or
 * o->secret_in (a fork keeps its origin's scopes). */
int sp_sandbox_secrets_carry(sp_egress_secrets *out, const sp_sandbox *origin,
                             const sp_sandbox_opts *o, sp_error **err);
/* A value from "env:VAR" or "file:PATH" (for secret `name`'s messages). */
int sp_secret_value_read(unsigned char **value, size_t *len, const char *source, const char *name,
                         sp_error **err);
/* sandbox.json's record of secrets (no values), and back. */
struct cJSON *sp_sandbox_secrets_json(const sp_egress_secrets *s);
int sp_sandbox_secrets_from_json(sp_egress_secrets *s, const struct cJSON *a, sp_error **err);
/* The proxy's file in folder dir (mode 0600, owned by uid:gid when >= 0),
 * written anew and renamed; and read back (none: an empty set). */
int sp_sandbox_secrets_write(const char *dir, const sp_egress_secrets *s, int64_t uid, int64_t gid,
                             sp_error **err);
int sp_sandbox_secrets_read(sp_egress_secrets *s, const char *dir, sp_error **err);
/* The variables that point the workload's TLS clients at the proxy's CA
 * (a bundle with it, or the CA alone where a variable adds to the
 * defaults), onto env; a variable the user's env sets is left to it. */
void sp_sandbox_secrets_ca_env(sp_strv *env, const char *const *user_env);
/* egress_dir/upstream-ca.pem: the host's CA bundle ($SSL_CERT_FILE, else
 * the first of Debian's, Fedora's, Alpine's), then extra (a PEM file the
 * user gave, also kept as egress_dir/egress-ca.pem; NULL: none). */
int sp_sandbox_secrets_trust(const char *egress_dir, const char *extra, sp_error **err);
void sp_sandbox_egress_split(char **lines, sp_strv *allow, sp_strv *deny);
/* sandbox.json's content, and reading one such file (sandbox.json, or a
 * template's template.json) into sb's configuration. */
/* The time now, RFC 3339 UTC ("2024-05-01T12:00:00Z"); free(). */
char *sp_now_rfc3339(void);
struct cJSON *sp_sandbox_config_json(const sp_sandbox *sb);
int sp_sandbox_config_load(sp_sandbox *sb, const char *path, struct cJSON **json, sp_error **err);
/* The environment of one command: the sandbox's, the passed-through
 * variables the caller has set, then extra ("KEY=VALUE"). Free with
 * sp_strv_free(). */
char **sp_sandbox_command_env(const sp_sandbox *sb, const char *const *extra);
/* End every interactive session of this handle. */
void sp_sandbox_sessions_close(sp_sandbox *sb);

/* sp_sandbox_gc() limited to the sandboxes of one state root, best effort:
 * what a create left when the service died under it (the container was
 * made, or started, but the answer never came and the clean-up could not
 * reach the service). Run before each create. */
void sp_sandbox_sweep_orphans(const sp_local_ops *ops, sp_local *l, const char *state_root);
/* The sandbox's connection to its local engine, opened on first use;
 * NULL (err set) for a remote or agent-only handle. */
sp_local *sp_sandbox_local(sp_sandbox *sb, sp_error **err);
/* Test hook (sessions.c): kill sessions through a container exec even when
 * the host could signal them directly. */
extern bool sp_session_container_kill_only;
/* Test hook (sessions.c): never learn a session's host pid, as when a
 * signal comes before the first poll; its processes must still be found
 * by their token. */
extern bool sp_session_skip_pid_learning;

/* fork.c: keep in store dst, tagged SP_SANDBOX_ORIGIN_TAG, what store
 * src's sandbox was made from (its own origin-base, else its base): apply
 * of a fork or of a sandbox made from a template counts its changes from
 * there, into the origin's host folders, so the winner of an experiment
 * can be brought back. A src without a baseline has nothing to keep (0). */
int sp_sandbox_keep_origin_base(sp_snapstore *dst, sp_snapstore *src, sp_error **err);

#endif
