/**
 * @file sandpod/fork.h
 * @brief A new sandbox from a snapshot of another: the same configuration,
 *        its own container, a workspace equal to the snapshot.
 */
#ifndef SANDPOD_FORK_H
#define SANDPOD_FORK_H

#include "sandpod/error.h"
#include "sandpod/sandbox.h"
#include "sandpod/snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Fork sandbox `origin` at one of its snapshots into a new sandbox.
 *
 * The new sandbox gets the origin's configuration (image, env and the
 * passed-through names, workdir, user, network, limits, /tmp size,
 * writable root, capabilities, exec path, user namespace, seccomp, and the
 * record of the host folders it was hydrated from) and its own container.
 * Its snapshot store shares the origin's objects (hard links, see
 * sp_snapshot_share()) and holds the snapshot under the same id; its
 * workspace is that snapshot restored into an empty folder, then handed to
 * the container's user as at create. The origin's live workspace is never
 * read and its container is neither paused nor touched: only its snapshot
 * store is read, under the store's lock.
 *
 * @param origin    the sandbox to fork (an open handle)
 * @param snapshot  a snapshot id, tag or prefix (see sp_snapshot_get());
 *                  NULL = the newest snapshot
 * @param opts      name (NULL: generated), state_root, podman_url and
 *                  progress as for sp_sandbox_create(); image, env,
 *                  env_pass, workdir, user, cap_add (non-NULL), network,
 *                  memory_bytes, nano_cpus, pids_limit, tmpfs_bytes,
 *                  exec_path, userns, seccomp (non-zero) and writable_root
 *                  (true) replace the origin's; mounts must be empty
 * @return 0; SP_EEXISTS (name taken); SP_EINVAL (bad name, mounts given,
 *         ambiguous snapshot); SP_ENOTFOUND (no such snapshot, or the
 *         origin has none); the errors of sp_sandbox_create(). On failure
 *         nothing of the new sandbox is left.
 */
int sp_sandbox_fork(sp_sandbox **out, sp_sandbox *origin, const char *snapshot,
                    const sp_sandbox_opts *opts, sp_error **err);

#ifdef __cplusplus
}
#endif

#endif
