/* One table per kind of sandbox. Internal: the sandbox module sees it.
 *
 * A sandbox's kind says where its workload, its workspace and its
 * snapshot store are, and so how every public call on it is done: on this
 * machine around a workspace folder of this host (local.c, over the local
 * engine of engine/local.h), or on another engine beside a peer that
 * holds the workspace (remote.c, over engine/remote.h). It is chosen once,
 * when a sandbox is made or opened (sp_kind_for()); the public sp_sandbox_*,
 * sp_session_* and snapshot calls check their arguments and hand over to
 * it, so nothing else asks which engine a sandbox is on. A new kind is a
 * new table; a capability a kind lacks is an entry that refuses in one line
 * (SP_EINVAL, with reason SP_R_ELSEWHERE where the workspace or its store
 * is not on this host), never a NULL the caller must test. */
#ifndef SANDPOD_KIND_H
#define SANDPOD_KIND_H

#include <stdbool.h>

#include "sandpod/attach.h"
#include "sandpod/engine.h"
#include "sandpod/fs.h"
#include "sandpod/sandbox.h"
#include "sandpod/sandbox_snapshot.h"
#include "sandpod/session.h"

struct cJSON;

/* A writer of a snapshot archive (tar) to fd (sp_sandbox_import_from()). */
typedef int (*sp_tar_writer)(int fd, void *data, sp_error **err);
/* Fills a new sandbox's workspace in place of hydrating the mounts (a
 * fork's, a template's); see sp_sandbox_create_seeded(). */
typedef int (*sp_sandbox_seed_fn)(sp_sandbox *sb, void *data, sp_error **err);

struct sp_egress_secrets;

typedef struct sp_kind {
    const char *name; /* "local", "remote" */

    /* sandbox.json: the kind's own keys, read into sb and written from it. */
    int (*load)(sp_sandbox *sb, const struct cJSON *o, const char *path, sp_error **err);
    void (*save)(const sp_sandbox *sb, struct cJSON *o);
    /* Free what the kind keeps in sb (its engine handle). */
    void (*release)(sp_sandbox *sb);

    /* Make the workspace (hydrated from o->mounts, or filled by seed), the
     * workload around it, its setup and its `base` snapshot. Called with
     * the state folder made and locked and sb->cfg filled; e is the engine
     * it runs on. On failure, discard() removes the workload; the caller
     * removes the state folder. */
    int (*create)(sp_sandbox *sb, const sp_sandbox_opts *o, const sp_engine *e,
                  sp_sandbox_seed_fn seed, void *seed_data, sp_error **err);
    void (*discard)(sp_sandbox *sb);
    /* Remove the workload (gone already is success); keep_workspace moves
     * the workspace aside first, where the kind has one here. The state
     * folder is the caller's. */
    int (*remove)(sp_sandbox *sb, bool keep_workspace, sp_error **err);

    int (*status)(sp_sandbox_status **out, sp_sandbox *sb, sp_error **err);
    int (*start)(sp_sandbox *sb, sp_error **err);
    int (*stop)(sp_sandbox *sb, int timeout_s, sp_error **err);
    int (*restart)(sp_sandbox *sb, sp_error **err);
    int (*pause)(sp_sandbox *sb, sp_error **err);
    int (*unpause)(sp_sandbox *sb, sp_error **err);
    /* Whether pause freezes the workload, and whether stop keeps it. */
    bool (*pauses)(sp_sandbox *sb);
    bool (*stops)(const sp_sandbox *sb);
    int (*logs)(sp_sandbox *sb, const sp_logs_opts *o, sp_logs_fn fn, void *ud, sp_error **err);
    /* The host folder handle on the workspace; NULL (err set) when the
     * workspace is not on this host. */
    sp_fs *(*fs)(sp_sandbox *sb, sp_error **err);

    /* Commands. exec: o is the caller's with the timeout resolved. */
    sp_exec_path (*exec_path)(char **why, const sp_sandbox *sb);
    int (*exec)(sp_run_result **out, sp_sandbox *sb, const char *const *argv, const sp_run_opts *o,
                sp_error **err);
    /* A command whose streams the caller drives (o checked, with its
     * terminal size resolved). */
    int (*attach)(sp_attach **out, sp_sandbox *sb, const char *const *argv, const sp_attach_opts *o,
                  sp_error **err);

    /* Interactive sessions (opts checked and defaulted by the caller). */
    int (*session_start)(sp_session_output **out, sp_sandbox *sb, const char *command,
                         const sp_session_opts *o, sp_error **err);
    int (*session_write)(sp_session_output **out, sp_sandbox *sb, int id, const char *chars,
                         size_t len, const sp_session_write_opts *o, sp_error **err);
    int (*session_signal)(sp_sandbox *sb, int id, int signo, sp_error **err);
    int (*session_resize)(sp_sandbox *sb, int id, unsigned rows, unsigned cols, sp_error **err);
    int (*session_kill)(sp_sandbox *sb, int id, sp_error **err);
    int (*session_list)(sp_session_info **out, size_t *n, sp_sandbox *sb, sp_error **err);
    void (*sessions_close)(sp_sandbox *sb);

    /* Snapshots (refs checked by the caller). */
    int (*snap_open)(sp_sandbox_snap **out, sp_sandbox *sb, const sp_sandbox_snapshot_opts *o,
                     sp_error **err);
    int (*snap_create)(sp_snapshot **out, sp_sandbox *sb, const char *tag, sp_error **err);
    int (*snap_list)(sp_snapshots **out, sp_sandbox *sb, sp_error **err);
    int (*snap_get)(sp_snapshot **out, sp_sandbox *sb, const char *ref, sp_error **err);
    int (*snap_restore)(sp_snapshot **out, sp_sandbox *sb, const char *ref, sp_error **err);
    int (*snap_delete)(sp_sandbox *sb, const char *ref, sp_error **err);
    int (*snap_diff)(sp_snapdiff **out, sp_sandbox *sb, const char *from, const char *to,
                     const sp_snapshot_diff_opts *o, sp_error **err);
    /* Snapshot ref (an id; NULL: the workspace as it is now, through a
     * snapshot the store does not keep) as a tar to fd. */
    int (*snap_export)(sp_sandbox *sb, const char *ref, sp_snapshot_format format, int fd,
                       sp_error **err);
    /* The archive read from fd, as a new snapshot tagged tag (may be
     * NULL); with restore, the workspace becomes exactly it (all or
     * nothing). *id (may be NULL) gets the new snapshot's id. */
    int (*snap_import)(char **id, sp_sandbox *sb, int fd, const char *tag, bool restore,
                       sp_error **err);
    /* The snapshot store on this host, opened for the sandbox's own
     * private use (apply, fork, templates); NULL with *err when the store
     * is not here (reason SP_R_ELSEWHERE): callers then go through
     * snap_export and snap_import. */
    sp_snapstore *(*store)(sp_sandbox *sb, bool create, sp_error **err);
    /* The image id a template pins (the engine's), or "" when the engine
     * pulls its own. */
    int (*image_pin)(char **out, sp_sandbox *sb, sp_error **err);

    /* The peer: sandpod's tool suite beside a remote workspace. */
    int (*rpc)(sp_sandbox *sb, const char *method, const char *params, const char *key,
               char **result, sp_error **err);
    void (*rpc_cancel)(sp_sandbox *sb, const char *key);
    /* Egress: put sb->cfg.egress in force now (the policy changed); open
     * the connection log for reading. */
    int (*egress_set)(sp_sandbox *sb, sp_error **err);
    int (*egress_log)(int *fd, sp_sandbox *sb, sp_error **err);
    /* Brokered secrets: put these values (every secret's) in force now. */
    int (*secrets_set)(sp_sandbox *sb, const struct sp_egress_secrets *values, sp_error **err);
    int (*peer_command)(sp_sandbox *sb, const char *const *args, int in_fd, int out_fd, int err_fd,
                        int *exit_code, sp_error **err);
} sp_kind;

extern const sp_kind sp_kind_local;
extern const sp_kind sp_kind_remote;

/* The kind that runs sandboxes on engines of kind k. */
const sp_kind *sp_kind_for(sp_engine_kind k);

#endif
