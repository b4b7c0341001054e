/**
 * @file sandpod/apply.h
 * @brief A sandbox's baseline, and bringing the workspace's changes back
 *        into a host folder.
 *
 * sp_sandbox_create() ends by taking a snapshot of the freshly prepared
 * workspace tagged SP_SANDBOX_BASELINE_TAG ("base"): what the container
 * was handed. Comparing the workspace with it says what the work inside
 * the sandbox changed.
 */
#ifndef SANDPOD_APPLY_H
#define SANDPOD_APPLY_H

#include "sandpod/sandbox_snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The tag of the snapshot every sp_sandbox_create() takes last. */
#define SP_SANDBOX_BASELINE_TAG "base"

/**
 * Find the baseline snapshot of a sandbox's store.
 *
 * @param out  receives the record; free with sp_snapshot_free()
 * @param sb   the sandbox (for the message)
 * @param s    its store (sp_sandbox_snapshot_store()); NULL for a sandbox
 *             that has none, which has no baseline
 * @return 0; SP_ENOTFOUND with a message saying so for a sandbox made
 *         before sandpod took baselines; sp_snapshot_get()'s errors
 */
int sp_sandbox_baseline(sp_snapshot **out, const sp_sandbox *sb, sp_snapstore *s, sp_error **err);

#ifdef __cplusplus
}
#endif

#endif
