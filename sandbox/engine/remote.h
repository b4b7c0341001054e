/* The boundary between the engine-neutral sandbox code (sandbox/remote/remote_kind.c)
 * and an engine that runs sandboxes elsewhere (sandbox/kube/kube_remote.c).
 * Internal: the sandbox module and the engines see it, nothing else.
 *
 * A remote sandbox has a state folder like a local one (sandbox.json, the
 * lock, events.jsonl) but no workspace on this machine: the workspace, its
 * snapshot store and sandpod's tool suite (the peer) are beside the
 * workload, reached through the engine. What the engine must keep to find
 * the sandbox again is its record, a JSON object stored in sandbox.json. */
#ifndef SANDPOD_ENGINE_REMOTE_H
#define SANDPOD_ENGINE_REMOTE_H

#include <stdbool.h>
#include <stddef.h>

#include <cJSON.h>

#include "sandpod/engine.h"
#include "sandpod/error.h"
#include "sandpod/sandbox.h"
#include "stream.h"

typedef struct sp_remote sp_remote;

typedef struct sp_remote_spec {
    const sp_engine *engine;
    const char *name;  /* the sandbox's */
    const char *owner; /* the state root's id (label sandpod.owner) */
    const sp_sandbox_opts *opts;
    int timeout_ms; /* until the workload is ready; 0: 5 minutes */
    /* Egress rules: the policy file's text (egress_dir.h) and the hosts
     * file's (may be NULL); NULL: no rules, no proxy. */
    const char *egress_policy;
    const char *egress_hosts;
} sp_remote_spec;

/* One command run in the workload. Its stdin is stdin_data (sent whole,
 * then closed), else what stdin_fd gives until its end, else none (-1).
 * Its stdout goes to out_fd when that is >= 0; the rest (and stdout when
 * out_fd is -1) to the callback as it comes. */
typedef struct sp_remote_cmd {
    const char *const *argv;
    int stdin_fd;
    const void *stdin_data;
    size_t stdin_len;
    int out_fd;
    bool tty;
    unsigned rows, cols;
    int timeout_ms; /* 0: none; then *timed_out and the stream is dropped */
    void (*out)(void *ud, int stream, const void *data, size_t len); /* 1 stdout, 2 stderr */
    void *ud;
} sp_remote_cmd;

typedef struct sp_remote_ops {
    const char *kind;
    /* Make the workload (and its peer), wait until it serves; *record gets
     * what open() needs. On failure nothing is left behind. */
    int (*create)(sp_remote **out, cJSON **record, const sp_remote_spec *c, sp_error **err);
    int (*open)(sp_remote **out, const sp_engine *e, const cJSON *record, sp_error **err);
    /* A JSON-RPC request to the peer (MCP plus sandpod's methods): result
     * receives the answer's "result" as JSON text; a JSON-RPC error is
     * SP_ERROR with its message. */
    int (*rpc)(sp_remote *r, const char *method, const char *params, const char *key, char **result,
               sp_error **err);
    /* Cancel the rpc running on another thread. */
    void (*cancel)(sp_remote *r, const char *key); /* key NULL: every request */
    /* Run a command in the workload; *exit_code its status. */
    int (*exec)(sp_remote *r, const sp_remote_cmd *x, int *exit_code, bool *timed_out,
                sp_error **err);
    /* Start x->argv (x->tty, rows, cols; stdin open when x->stdin_fd >= 0,
     * which is not read: the caller writes) as a command's stream whose
     * driving is the caller's (sp_sandbox_attach()). */
    int (*stream_open)(sp_stream *out, sp_remote *r, const sp_remote_cmd *x, sp_error **err);
    /* Run `sandpod ARGS...` in the peer's container (its store commands),
     * its stdout to out_fd and stderr to err_fd; *exit_code its status. */
    int (*peer_command)(sp_remote *r, const char *const *args, int out_fd, int err_fd,
                        int *exit_code, sp_error **err);
    /* Stream a snapshot archive from fd into the store as a new snapshot
     * (tag may be NULL), then, with restore, make the workspace exactly it
     * (all or nothing); *result (may be NULL) gets the peer's JSON line
     * {id, files, bytes}. */
    int (*import_tar)(sp_remote *r, int fd, const char *tag, bool restore, char **result,
                      sp_error **err);
    /* Write snapshot ref (NULL: a fresh one of the workspace) as tar (gzip:
     * compressed) to fd. */
    int (*export_tar)(sp_remote *r, const char *ref, bool gzip, int fd, sp_error **err);
    /* Write the workspace as it is now as a plain tar to fd, through a
     * snapshot that the store does not keep. */
    int (*export_now)(sp_remote *r, int fd, sp_error **err);
    /* "running", "pending", "failed", "succeeded", "missing"; *why (may be
     * NULL) one line when it is not running. */
    int (*state)(sp_remote *r, char **state, char **why, sp_error **err);
    /* Delete the workload (gone already is success). */
    int (*remove)(sp_remote *r, sp_error **err);
    /* Where it is, for people: "pod sp-box-x7k2q in namespace default". */
    const char *(*where)(const sp_remote *r);
    void (*free)(sp_remote *r);
    /* The workloads of owner on engine e: a JSON array of {name (the
     * sandbox's), id (the engine's), state}. */
    int (*list)(cJSON **out, const sp_engine *e, const char *owner, sp_error **err);
    /* Delete workload id of engine e. */
    int (*remove_id)(const sp_engine *e, const char *id, sp_error **err);
    /* What the workload's container printed (its pid 1, the agent), handed
     * to fn as it comes (stream SP_EXEC_STDOUT: the engine may merge
     * stderr into it); with o->follow until the workload ends. */
    int (*logs)(sp_remote *r, const sp_logs_opts *o, sp_logs_fn fn, void *ud, sp_error **err);
    /* peer_command with its stdin read from in_fd until its end. */
    int (*peer_command_in)(sp_remote *r, const char *const *args, int in_fd, int out_fd, int err_fd,
                           int *exit_code, sp_error **err);
    /* The egress proxy of a sandbox made with rules: put a new policy
     * (the policy file's text) in force, back once it is; write its
     * connection log (JSON lines) to fd (SP_ENOTFOUND: none yet). */
    int (*egress_set)(sp_remote *r, const char *policy, sp_error **err);
    int (*egress_log)(sp_remote *r, int fd, sp_error **err);
} sp_remote_ops;

extern const sp_remote_ops sp_kube_remote_ops;

/* The table of engines of kind k that run sandboxes elsewhere; NULL for
 * the local kind (remote.c). */
const sp_remote_ops *sp_remote_ops_for(sp_engine_kind k);
/* What labels this state root's workloads on an engine (label
 * sandpod.owner): a hash of the host name and the state root. */
char *sp_remote_owner(const char *state_root);

#endif
