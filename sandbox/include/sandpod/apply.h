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

/** The tag a fork gives its origin's baseline (its origin's origin's, for
 *  a fork of a fork): what the host folders it applies to held. */
#define SP_SANDBOX_ORIGIN_TAG "origin-base"

/**
 * Find the baseline snapshot of a sandbox's store: the one tagged
 * SP_SANDBOX_ORIGIN_TAG when there is one (a fork: what its origin was
 * made from, so diff and apply count the whole line of work against the
 * host folders), else the one tagged SP_SANDBOX_BASELINE_TAG.
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

/**
 * Why a change is held back: never written to the host folder. The way
 * back is a boundary: what a workload writes must never be something the
 * host's own tools later run or follow out of the project.
 */
typedef enum sp_apply_hold {
    SP_APPLY_HOLD_NONE = 0,
    /** In a version-control folder (`.git`, `.hg`, `.svn`, `.jj`, `.bzr`
     *  at any depth, any case; a `.git` file too), or in a folder the new
     *  side makes look like a git repository (HEAD with objects/ or
     *  commondir, which git would open as a bare repository): git runs
     *  what its config and hooks say. Never written. */
    SP_APPLY_HOLD_VCS,
    /** Configuration the host's tools act on when they meet the project
     *  (`.gitattributes`, `.gitmodules`, `.lfsconfig`, `.envrc`,
     *  `.vscode/`, `.idea/`, `.devcontainer/`, at any depth): written
     *  only when `allow_paths` names it. */
    SP_APPLY_HOLD_REVIEW,
    /** A symlink whose target leaves the host folder (absolute, or `..`
     *  above it): written only with `allow_links_out`. */
    SP_APPLY_HOLD_LINK_OUT,
    /** A fifo, socket or device: never written. */
    SP_APPLY_HOLD_SPECIAL,
    /** A folder the sandbox removed that still holds held-back entries:
     *  it stays. */
    SP_APPLY_HOLD_KEEPS,
} sp_apply_hold;

/** "version-control", "review", "link-out", "special", "keeps-held";
 *  "none". */
const char *sp_apply_hold_name(sp_apply_hold h);

/** A one-line reason for people: "a version-control folder: git runs
 *  what its config and hooks say", ... */
const char *sp_apply_hold_why(sp_apply_hold h);

typedef struct sp_apply_change {
    char *path; /**< relative to the host folder */
    sp_apply_action action;
    sp_fs_type type; /**< what is there after (the old type for a delete) */
    unsigned mode;   /**< the permission bits written (no set-id or sticky
                          bits, never more than the caller's umask allows) */
    /** The host already holds the result (both sides made the same
     *  change): nothing is written. */
    bool already;
    /** The permission bits the host folder had (0 for an add), so a
     *  change of the executable bit shows. */
    unsigned old_mode;
    /** Symlinks: the target written; else NULL. */
    char *target;
} sp_apply_change;

typedef struct sp_apply_conflict {
    char *path;   /**< relative to the host folder */
    char *reason; /**< "changed on the host", "deleted on the host", "added on both sides" */
} sp_apply_conflict;

/** Changes held back, grouped: a held folder is one entry for everything
 *  below it. */
typedef struct sp_apply_held {
    char *path; /**< relative to the host folder; the folder for a group */
    sp_apply_hold why;
    size_t count; /**< changed paths at or below `path` */
    char *detail; /**< link-out: the target; else NULL */
} sp_apply_held;

typedef struct sp_apply_result {
    char *to;   /**< the host folder, absolute */
    char *from; /**< the id of the snapshot the changes are counted from */
    sp_apply_change *changes;
    size_t n_changes;
    sp_apply_conflict *conflicts;
    size_t n_conflicts;
    size_t skipped; /**< changes held back (every entry of `held` counted) */
    bool applied;   /**< something was written (false: dry run, conflicts, or nothing to do) */
    char *patch;    /**< with `patch`: a unified diff for `git apply`, else NULL */
    /* Since version 2 of the options: */
    sp_apply_held *held; /**< what was held back, and why */
    size_t n_held;
    size_t filtered; /**< changes the mount's include/exclude/gitignore leave out */
    char *snapshot;  /**< the id of the snapshot whose content was applied */
    char *commit;    /**< with `branch`: the new commit's id, else NULL */
} sp_apply_result;

void sp_apply_result_free(sp_apply_result *r);

#define SP_SANDBOX_APPLY_OPTS_VERSION 2

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
    /** Write even over conflicts (the sandbox's version wins). Held-back
     *  paths stay held back. */
    bool force;
    /** Also make `patch`, and write nothing. */
    bool patch;
    /** The biggest file that is applied (0: 256 MiB); a bigger one fails
     *  the whole apply with SP_ETOOBIG. */
    size_t max_file_bytes;
    /* Version 2: */
    /** Apply the content of this snapshot (id, tag or prefix: the one
     *  `sandpod diff` reviewed) instead of a snapshot taken now. */
    const char *snapshot;
    /** NULL-terminated globs (the fs tools' dialect; one without '/'
     *  matches a name at any depth, a match covers a folder's contents)
     *  that let SP_APPLY_HOLD_REVIEW paths through. */
    const char *const *allow_paths;
    /** Write symlinks whose target leaves the host folder. */
    bool allow_links_out;
    /** Ignore the mount's include/exclude/gitignore filters (held-back
     *  paths stay held back). */
    bool all;
    /** Refuse (SP_ETOOBIG, nothing written) more changed paths than this
     *  (0: 200,000) or more bytes of new file content (0: 8 GiB). */
    uint64_t max_files;
    uint64_t max_bytes;
    /** Write the changes as one commit on this new branch of the git
     *  repository whose work tree holds the host folder, instead of into
     *  the folder: its parent is the repository's HEAD, and nothing of the
     *  work tree, index, HEAD, config or hooks is touched, so there are no
     *  conflicts (the user merges with their own git). The same paths are
     *  held back. SP_EEXISTS when the branch exists. */
    const char *branch;
    /** The commit message with `branch` (NULL: "sandpod apply"). */
    const char *message;
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
 * paused meanwhile) and deleted again, or through `opts->snapshot`; its
 * content is treated as hostile. Held back (listed in `held`, never
 * written): version-control folders and anything in a folder made to look
 * like a git repository; review paths (`.gitattributes`, `.envrc`,
 * `.vscode/`, ...) unless `allow_paths` names them; symlinks out of the
 * host folder unless `allow_links_out`; fifos, sockets and devices.
 * Changes the mount's own filters (include, exclude, gitignore, as
 * recorded at create) leave out are counted in `filtered` unless `all`.
 * Files are written with the permission bits the sandbox gave them less
 * set-id and sticky bits and less the caller's umask; as root, a new entry
 * takes its folder's owner and a replaced one keeps its owner. Symlinks are
 * written as symlinks, never followed; names are written only beneath the
 * host folder through fds opened without following symlinks, so a symlink
 * on the host is replaced or refused, never written through. A host path
 * that no longer matches the `from` snapshot (edited, deleted, or added on
 * both sides with other content; permission bits count by their
 * executable bits, as git does) is a conflict: all are listed and nothing
 * is written unless `force`. Writing goes through temporary names in
 * `<to>/.sandpod-apply.<pid>` renamed into place; on a failure what was
 * done is undone. Memory holds one file's content at a time.
 *
 * @param out  the result (also when conflicts stop it); free with
 *             sp_apply_result_free()
 * @return 0 (check `n_conflicts`: with conflicts and no `force` nothing
 *         was written); SP_ENOTFOUND (no baseline, no such snapshot, no
 *         host folder); SP_EINVAL (no host folder to default to, a bad
 *         allow_paths glob); SP_ETOOBIG (a file over max_file_bytes, more
 *         changes than max_files or max_bytes: nothing written);
 *         errno-style errors (everything undone)
 */
int sp_sandbox_apply(sp_apply_result **out, sp_sandbox *sb, const sp_sandbox_apply_opts *opts,
                     sp_error **err);

#ifdef __cplusplus
}
#endif

#endif
