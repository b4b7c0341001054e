/**
 * @file sandpod/sandbox_snapshot.h
 * @brief A sandbox's snapshot store, with its container paused while the
 *        store reads or writes the workspace.
 *
 * A sandbox keeps its snapshots in `<state folder>/snapshots.git`. Opening
 * it through sp_sandbox_snapshot_open() (rather than sp_snapstore_open() on
 * sp_sandbox_workspace()) wires the store's pause callbacks to the
 * container: a running container is paused while a snapshot reads the
 * workspace and while a restore writes it, and resumed after, also when the
 * operation fails; a stopped or already paused container is left alone.
 * Use the sp_snapshot_* and sp_snapstore_* calls on the store it gives.
 */
#ifndef SANDPOD_SANDBOX_SNAPSHOT_H
#define SANDPOD_SANDBOX_SNAPSHOT_H

#include <stdbool.h>

#include "sandpod/error.h"
#include "sandpod/sandbox.h"
#include "sandpod/snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An open snapshot store of one sandbox. Not thread-safe. */
typedef struct sp_sandbox_snap sp_sandbox_snap;

#define SP_SANDBOX_SNAPSHOT_OPTS_VERSION 1

/** Options for sp_sandbox_snapshot_open(). */
typedef struct sp_sandbox_snapshot_opts {
    unsigned version;
    /**
     * The store's options (NULL: the defaults). Its `pause`, `unpause` and
     * `userdata` must be NULL: they are the sandbox's.
     */
    const sp_snapstore_opts *store;
} sp_sandbox_snapshot_opts;

#define SP_SANDBOX_SNAPSHOT_OPTS_INIT                                                              \
    {                                                                                              \
        .version = SP_SANDBOX_SNAPSHOT_OPTS_VERSION                                                \
    }

/**
 * Open (or, unless `opts->store->no_create`, create) the snapshot store of
 * sandbox `sb`.
 *
 * @param out   the handle, to free with sp_sandbox_snapshot_close()
 * @param sb    the sandbox; borrowed, must outlive the handle
 * @param opts  NULL for the defaults
 * @return 0; SP_EINVAL for a bad options version or pause callbacks set
 *         by the caller; SP_ENOTFOUND (reason SP_R_NO_STORE) for a missing
 *         store with no_create; or sp_snapstore_open()'s errors.
 */
int sp_sandbox_snapshot_open(sp_sandbox_snap **out, sp_sandbox *sb,
                             const sp_sandbox_snapshot_opts *opts, sp_error **err);

/** The store, for sp_snapshot_create() and the rest; owned by the handle. */
sp_snapstore *sp_sandbox_snapshot_store(sp_sandbox_snap *h);

/**
 * Whether an operation since the last call ran while the container kept
 * running because it cannot be paused (rootless Podman on cgroup v1, see
 * sp_sandbox_pauses()): a file it wrote at that moment may have been caught
 * part-way. Clears the flag.
 */
bool sp_sandbox_snapshot_ran_unpaused(sp_sandbox_snap *h);

/** Close the store, resuming the container if it is still paused by us.
 * Accepts NULL. */
void sp_sandbox_snapshot_close(sp_sandbox_snap *h);

/**
 * Write snapshot `ref` (id, tag or prefix) of the sandbox's store to `fd`
 * as an archive (sp_snapshot_export()'s format), on any engine: for a
 * sandbox of another engine the peer beside its workload writes it and it
 * streams here. Moves snapshots between engines with
 * sp_sandbox_snapshot_import_fd().
 */
int sp_sandbox_snapshot_export_fd(sp_sandbox *sb, const char *ref, int fd,
                                  sp_snapshot_format format, sp_error **err);

/**
 * Read an archive from `fd` into the sandbox's store as a new snapshot
 * (tag may be NULL), on any engine; the workspace is left as it is
 * (restore the snapshot to use it). *id (may be NULL) receives its id
 * (free()).
 */
int sp_sandbox_snapshot_import_fd(char **id, sp_sandbox *sb, int fd, const char *tag,
                                  sp_error **err);

/* --------------------------------------------- one call, any engine -- */

/*
 * The snapshot operations of a sandbox in one call each, on a sandbox of
 * any engine. A local sandbox's store is opened with pausing
 * (sp_sandbox_snapshot_open(), default options: the store is created when
 * missing), the operation runs, the store is closed. A remote sandbox's
 * store lives beside its workload, in the sandpod peer: the peer runs the
 * same operation there (`sandpod snapshot ... --json`, through
 * sp_sandbox_peer_command()) and its result comes back in the same
 * structs; its errors keep their code, reason and message (a ref naming no
 * snapshot is SP_ENOTFOUND, one naming several SP_EINVAL, on either
 * engine). A failed call changes nothing. `ref` is a snapshot id, a tag, or
 * a prefix of an id or commit (sp_snapshot_get()); NULL or empty is
 * SP_EINVAL. Records are freed with sp_snapshot_free() and
 * sp_snapshots_free(), diffs with sp_snapdiff_free(). On a remote sandbox
 * the record's `root` and `store` are the peer's (SP_PEER_WORKSPACE,
 * SP_PEER_STORE).
 */

/** Take a snapshot (sp_snapshot_create()); tag may be NULL, *out may be NULL. */
int sp_sandbox_snapshot_create(sp_snapshot **out, sp_sandbox *sb, const char *tag, sp_error **err);
/** Every snapshot, oldest first (sp_snapshot_list()). */
int sp_sandbox_snapshot_list(sp_snapshots **out, sp_sandbox *sb, sp_error **err);
/** One snapshot (sp_snapshot_get()). */
int sp_sandbox_snapshot_get(sp_snapshot **out, sp_sandbox *sb, const char *ref, sp_error **err);
/** Make the workspace equal to a snapshot (sp_snapshot_restore()); *out
 *  (may be NULL) is the restored record. */
int sp_sandbox_snapshot_restore(sp_snapshot **out, sp_sandbox *sb, const char *ref, sp_error **err);
/** Delete a snapshot's record (sp_snapshot_delete()). */
int sp_sandbox_snapshot_delete(sp_sandbox *sb, const char *ref, sp_error **err);
/**
 * What changed from snapshot `from` to `to`, or to the live workspace when
 * `to` is NULL (sp_snapshot_diff(); opts may be NULL).
 */
int sp_sandbox_snapshot_diff(sp_snapdiff **out, sp_sandbox *sb, const char *from, const char *to,
                             const sp_snapshot_diff_opts *opts, sp_error **err);

#ifdef __cplusplus
}
#endif

#endif
