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

/** What applying does with one path of the host folder. */
typedef enum sp_apply_action {
    SP_APPLY_ADD = 0, /**< created */
    SP_APPLY_MODIFY,  /**< content, permission bits or type replaced */
    SP_APPLY_DELETE,  /**< removed */
} sp_apply_action;

/** "add", "modify", "delete". */
const char *sp_apply_action_name(sp_apply_action a);

typedef struct sp_apply_change {
    char *path; /**< relative to the host folder */
    sp_apply_action action;
    sp_fs_type type; /**< what is there after (the old type for a delete) */
    unsigned mode;   /**< the permission bits written (set-id bits dropped) */
    /** The host already holds the result (both sides made the same
     *  change): nothing is written. */
    bool already;
} sp_apply_change;

typedef struct sp_apply_conflict {
    char *path;   /**< relative to the host folder */
    char *reason; /**< "changed on the host", "deleted on the host", "added on both sides" */
} sp_apply_conflict;

typedef struct sp_apply_result {
    char *to;   /**< the host folder, absolute */
    char *from; /**< the id of the snapshot the changes are counted from */
    sp_apply_change *changes;
    size_t n_changes;
    sp_apply_conflict *conflicts;
    size_t n_conflicts;
    size_t skipped; /**< fifos and other entries that are not applied */
    bool applied;   /**< something was written (false: dry run, conflicts, or nothing to do) */
    char *patch;    /**< with `patch`: a unified diff for `git apply`, else NULL */
} sp_apply_result;

void sp_apply_result_free(sp_apply_result *r);

#define SP_SANDBOX_APPLY_OPTS_VERSION 1

typedef struct sp_sandbox_apply_opts {
    unsigned version;
    /** Count changes from this snapshot (id, tag or prefix); NULL: the
     *  baseline. The host folder is expected to hold it. */
    const char *from;
    /** The host folder to write; NULL: the first mount's source. */
    const char *to;
    /** The workspace folder whose changes go there ("." its root); NULL:
     *  where the first mount landed (its dst=), "." without mounts. */
    const char *subdir;
    /** Work out the changes and conflicts; write nothing. */
    bool dry_run;
    /** Write even over conflicts (the sandbox's version wins). */
    bool force;
    /** Also make `patch`, and write nothing. */
    bool patch;
    /** The biggest file that is applied (0: 256 MiB); a bigger one fails
     *  the whole apply with SP_ETOOBIG. */
    size_t max_file_bytes;
} sp_sandbox_apply_opts;

#define SP_SANDBOX_APPLY_OPTS_INIT                                                                 \
    {                                                                                              \
        .version = SP_SANDBOX_APPLY_OPTS_VERSION                                                   \
    }

/**
 * Bring the workspace's changes since the baseline (or `opts->from`) into
 * a host folder, all or nothing.
 *
 * The workspace is read through a snapshot taken now (the container is
 * paused meanwhile) and deleted again; its content is treated as hostile:
 * symlinks are written as symlinks, never followed; set-id bits are
 * dropped; names are written only beneath the host folder through fds
 * opened without following symlinks, so a symlink on the host is replaced
 * or refused, never written through. A host path that no longer matches
 * the `from` snapshot (edited, deleted, or added on both sides with other
 * content) is a conflict: all are listed and nothing is written unless
 * `force`. Writing goes through temporary names in
 * `<to>/.sandpod-apply.<pid>` renamed into place; on a failure what was
 * done is undone.
 *
 * @param out  the result (also when conflicts stop it); free with
 *             sp_apply_result_free()
 * @return 0 (check `n_conflicts`: with conflicts and no `force` nothing
 *         was written); SP_ENOTFOUND (no baseline, no such snapshot, no
 *         host folder); SP_EINVAL (no host folder to default to); SP_ETOOBIG;
 *         errno-style errors (everything undone)
 */
int sp_sandbox_apply(sp_apply_result **out, sp_sandbox *sb, const sp_sandbox_apply_opts *opts,
                     sp_error **err);

#ifdef __cplusplus
}
#endif

#endif
