/**
 * @file sandpod/snapshot.h
 * @brief Exact, incremental snapshots of a workspace folder.
 *
 * A snapshot store is a bare git repository kept outside the workspace (by
 * default `<sandbox state>/snapshots.git`). A snapshot captures the whole
 * workspace exactly: every file whether a .gitignore matches it or not, all
 * permission bits (0600, setgid, ...), symlinks verbatim (dangling ones and
 * ones pointing out of the workspace too, never followed), empty folders,
 * fifos, binary files, and `.git` folders at any depth with their contents
 * byte for byte. Restoring makes the workspace equal to the snapshot again
 * and removes everything created after it. Restore writes only beneath the
 * workspace root, through fds opened without following symlinks, so a
 * symlink planted where a folder used to be is replaced, never written
 * through.
 *
 * Cost grows with what changed. A stat cache in the store lets a one-shot
 * process (the CLI) find the changes with one stat walk of the tree, reading
 * only files whose stat data changed. A long-lived process can ask for
 * change tracking (`track_changes`): the workspace is watched with inotify
 * (which also sees what a container writes through a bind mount) and a
 * snapshot or restore only looks at the paths that changed, with a full
 * walk whenever tracking may have missed something (queue overflow, watch
 * limit, a garbage collection by another process).
 *
 * Snapshot records (id, time, commit, root, store, tag) live in the commit
 * message of a parentless commit referenced by
 * `refs/sandpod/snapshots/<id>`; the ref is written last, atomically, so a
 * process killed at any moment leaves a store that works and passes
 * `git fsck`. A restore killed halfway can simply be run again.
 *
 * Not captured: owners, timestamps (restored files get the current time, as
 * with git), extended attributes and ACLs, hard links (each name becomes its
 * own file), sockets and device nodes (skipped, and removed by a restore).
 *
 * An sp_snapstore is not thread-safe; use one per thread. Operations on one
 * store from several processes are serialized by a lock file in the store.
 */
#ifndef SANDPOD_SNAPSHOT_H
#define SANDPOD_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandpod/error.h"
#include "sandpod/fs.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sp_snapstore sp_snapstore;

/** Progress of a long scan or restore, for a progress line. */
typedef struct sp_snapshot_progress {
    const char *phase;      /**< "scan" or "restore" */
    uint64_t entries;       /**< workspace entries looked at so far */
    uint64_t files_hashed;  /**< files read because they changed (or were new) */
    uint64_t bytes_hashed;  /**< bytes read from those files */
    uint64_t paths_changed; /**< restore: entries written or removed so far */
} sp_snapshot_progress;

#define SP_SNAPSTORE_OPTS_VERSION 3

/** Options for sp_snapstore_open(). Zero values select the defaults. */
typedef struct sp_snapstore_opts {
    unsigned version;
    /**
     * Called before a snapshot reads or a restore writes the workspace, and
     * `unpause` after, also when the operation fails. The sandbox layer
     * wires these to pausing its container. A failing `pause` fails the
     * operation (and `unpause` is not called); a failing `unpause` fails it
     * too. Either may be NULL.
     */
    int (*pause)(void *userdata, sp_error **err);
    int (*unpause)(void *userdata, sp_error **err);
    void *userdata;
    /**
     * Watch the workspace with inotify for the lifetime of the handle, so
     * that snapshots and restores only look at changed paths. Meant for
     * long-lived processes. The first walk happens in sp_snapstore_open().
     * Drain events now and then with sp_snapstore_poll() (or poll
     * sp_snapstore_fd()) in a busy workspace so the kernel queue does not
     * overflow; an overflow only costs a full walk.
     */
    bool track_changes;
    /** Fail with SP_ENOTFOUND instead of creating a missing store. */
    bool no_create;
    /**
     * Survive a power loss too: flush the store's filesystem (syncfs)
     * before a snapshot's ref is written, and the workspace's after a
     * restore. Without it (the default, as with git's loose objects) a
     * store survives any process crash, but a power loss right after a
     * snapshot may leave that snapshot unreadable.
     */
    bool durable;
    /** Progress callback, called about every 1000 entries (may be NULL). */
    void (*progress)(void *userdata, const sp_snapshot_progress *p);
    void *progress_userdata;
    /* ----- version 2 ----- */
    /**
     * Keep the set-user-ID and set-group-ID bits (04000, 02000) of files
     * and fifos in what leaves the store. By default a restore and an
     * import drop them from the modes they write and an export from its
     * entries, so a binary the workload marked set-id never becomes one
     * that runs with the rights of whoever owns it on the host (a restore
     * as root, a `tar xf` as root). Snapshots always record the true bits:
     * a handle with this set restores them exactly. Folders keep theirs
     * either way; on a folder they only choose the group of new entries.
     * The sticky bit (01000) is always kept.
     */
    bool keep_setid;
    /**
     * The most bytes of file data one operation may read (a snapshot, a
     * diff with the live workspace, the walk before a restore, an import)
     * or write (a restore, counted before anything is written). Holes in
     * sparse files do not count. Past it the operation stops with
     * SP_ETOOBIG naming the file and the budget, and changes nothing in
     * the workspace. 0 selects the default, 16 GiB; UINT64_MAX is no limit.
     */
    uint64_t max_data_bytes;
    /* ----- version 3 ----- */
    /**
     * The caller vouches that since this store last looked at the
     * workspace (a restore, a snapshot) nothing changed a file's content:
     * only its owner or ctime may have moved (sandpod's fork hands a
     * freshly restored workspace to the container's user before any of
     * the workload ran). The next snapshot then keeps the stored id of
     * every file and symlink whose type, bits, device, inode, size and
     * mtime are those the store recorded, without reading it, even when
     * its stat data was too recent to vouch for it (racy) or its ctime
     * moved; anything else is read as always. It records the new stat
     * data, so later snapshots compare against it the usual way. Wrong if
     * the promise is broken; off by default.
     */
    bool trust_ids;
} sp_snapstore_opts;

#define SP_SNAPSTORE_OPTS_INIT                                                                     \
    {                                                                                              \
        .version = SP_SNAPSTORE_OPTS_VERSION                                                       \
    }

/**
 * Open the snapshot store of a workspace, creating a bare repository at
 * `store_dir` when it is missing.
 *
 * A store on a read-only filesystem opens for reading: list, get, export,
 * restore and diffs between snapshots work; create, delete, gc, import and
 * diffs with the live workspace fail with SP_EREADONLY.
 *
 * @param out        receives the handle; free with sp_snapstore_free()
 * @param workspace  the workspace folder (must exist)
 * @param store_dir  the store folder; must not be inside the workspace
 * @param opts       options, or NULL for the defaults
 * @return 0; SP_ENOTFOUND (no workspace; no store with no_create);
 *         SP_EINVAL (store inside the workspace, or a folder that is not a
 *         git repository); errno-style SP_ERROR
 */
int sp_snapstore_open(sp_snapstore **out, const char *workspace, const char *store_dir,
                      const sp_snapstore_opts *opts, sp_error **err);

/** Free a handle (writes the stat cache of a tracking handle); accepts NULL. */
void sp_snapstore_free(sp_snapstore *s);

/** The store folder, absolute. Owned by the handle. */
const char *sp_snapstore_path(const sp_snapstore *s);

/** The workspace folder, absolute. Owned by the handle. */
const char *sp_snapstore_workspace(const sp_snapstore *s);

/**
 * The inotify fd of a tracking handle (readable when events are pending),
 * or -1. Owned by the handle: poll it, never read it.
 */
int sp_snapstore_fd(const sp_snapstore *s);

/** Move pending change events into the handle (tracking handles only; a
 *  no-op otherwise). Cheap; call it when sp_snapstore_fd() is readable. */
int sp_snapstore_poll(sp_snapstore *s, sp_error **err);

/** Forget what tracking knows: the next operation walks the whole tree
 *  (still reading only files whose stat data changed). */
void sp_snapstore_invalidate(sp_snapstore *s);

/** What the last operation on a handle cost. */
typedef struct sp_snapstore_stats {
    uint64_t entries;         /**< entries stat'ed */
    uint64_t files_hashed;    /**< files read */
    uint64_t bytes_hashed;    /**< bytes read from them */
    uint64_t objects_written; /**< new objects in the store */
    uint64_t paths_changed;   /**< restore: entries written, changed or removed */
    bool full_walk;           /**< the whole tree was walked (vs. tracked changes) */
    int64_t elapsed_ms;
} sp_snapstore_stats;

/** Copy the stats of the last operation into *out. */
void sp_snapstore_last_stats(const sp_snapstore *s, sp_snapstore_stats *out);

/* ------------------------------------------------------------ records -- */

/** A snapshot record: enough to restore it later from another process
 *  (open the store at `store` on `root`, restore `id`). */
typedef struct sp_snapshot {
    char *id;              /**< UUID (version 4), lowercase */
    char *tag;             /**< human label, or NULL */
    char *commit;          /**< 40 hex digits */
    char *root;            /**< the workspace path when it was taken */
    char *store;           /**< the store path */
    char *created_at;      /**< RFC 3339, UTC, nanoseconds */
    int64_t created_at_ns; /**< nanoseconds since the epoch */
    uint64_t files;        /**< regular files */
    uint64_t dirs;         /**< folders, the root excluded */
    uint64_t symlinks;
    uint64_t bytes; /**< total size of the files */
} sp_snapshot;

void sp_snapshot_free(sp_snapshot *snap);

/** Every snapshot of a store, oldest first. */
typedef struct sp_snapshots {
    sp_snapshot **v;
    size_t n;
} sp_snapshots;

void sp_snapshots_free(sp_snapshots *l);

/**
 * Take a snapshot of the workspace.
 *
 * @param out  receives the record (may be NULL); free with sp_snapshot_free()
 * @param tag  an optional label: UTF-8 without control characters, at most
 *             200 bytes, not empty
 * Files over 8 MiB with holes are read and stored without their holes
 * (SEEK_DATA / SEEK_HOLE), and restored with them.
 *
 * @return 0; SP_EINVAL (bad tag); SP_ETOOBIG (folders nested deeper than
 *         256 levels, or more file data to read than `max_data_bytes`);
 *         errno-style errors for unreadable files; the pause callbacks'
 *         errors
 */
int sp_snapshot_create(sp_snapshot **out, sp_snapstore *s, const char *tag, sp_error **err);

/** List the snapshots of the store, oldest first. */
int sp_snapshot_list(sp_snapshots **out, sp_snapstore *s, sp_error **err);

/**
 * Find one snapshot. `ref` is a snapshot id, a tag, or a prefix (at least
 * 4 characters) of an id or of a commit id. An exact id wins over a tag,
 * and a tag over prefixes.
 *
 * @return 0; SP_ENOTFOUND; SP_EINVAL when `ref` names several snapshots
 *         (the message lists them)
 */
int sp_snapshot_get(sp_snapshot **out, sp_snapstore *s, const char *ref, sp_error **err);

/**
 * Make the workspace equal to a snapshot: content, types, permission bits,
 * symlinks, empty folders; entries that are not in the snapshot are
 * removed. Only what differs is written. Safe to run again after a crash.
 *
 * The set-id bits of files are left out unless the handle has
 * `keep_setid` (see sp_snapstore_opts).
 *
 * @param out  receives the restored snapshot's record (may be NULL)
 * @return 0; the errors of sp_snapshot_get(); SP_ETOOBIG (more file data
 *         to read or write than `max_data_bytes`: nothing is changed);
 *         errno-style errors
 */
int sp_snapshot_restore(sp_snapshot **out, sp_snapstore *s, const char *ref, sp_error **err);

/** Delete a snapshot's record; its data goes at the next sp_snapstore_gc().
 *  @return 0; the errors of sp_snapshot_get() */
int sp_snapshot_delete(sp_snapstore *s, const char *ref, sp_error **err);

/* ---------------------------------------------------------------- diff -- */

typedef enum sp_snapshot_change_kind {
    SP_CHANGE_ADDED = 0,
    SP_CHANGE_MODIFIED, /**< content or permission bits */
    SP_CHANGE_DELETED,
    SP_CHANGE_TYPE_CHANGED, /**< e.g. a file became a folder or a symlink */
} sp_snapshot_change_kind;

/** "added", "modified", "deleted", "type_changed". */
const char *sp_snapshot_change_name(sp_snapshot_change_kind k);

typedef struct sp_snapshot_change {
    char *path; /**< relative to the root */
    sp_snapshot_change_kind kind;
    sp_fs_type old_type, new_type; /**< meaningless for added / deleted sides */
    unsigned old_mode, new_mode;   /**< permission bits (07777); 0 where absent */
    bool content_changed;          /**< files and symlinks: the bytes differ */
} sp_snapshot_change;

typedef struct sp_snapdiff {
    char *from;            /**< commit id of the old side */
    char *to;              /**< commit id of the new side, or "workspace" */
    sp_snapshot_change *v; /**< in tree order: each folder's entries by name
                                (bytewise), a folder right before its contents */
    size_t n;
    size_t added, modified, deleted, type_changed;
    char *patch; /**< unified diff text when asked for, else NULL */
} sp_snapdiff;

#define SP_SNAPSHOT_DIFF_OPTS_VERSION 2

typedef struct sp_snapshot_diff_opts {
    unsigned version;
    /** Also produce a unified diff (binary files, and files over 8 MiB,
     *  are named, not shown: "Binary files ... differ", "Large files ...
     *  differ"). */
    bool patch;
    /** Lines of context in the patch (0 = 3). */
    unsigned context_lines;
    /* Version 2: */
    /** With `patch`: only the paths for which this returns true are in
     *  it (every change is still listed); NULL: all. */
    bool (*patch_select)(void *userdata, const char *path);
    void *patch_select_userdata;
} sp_snapshot_diff_opts;

#define SP_SNAPSHOT_DIFF_OPTS_INIT                                                                 \
    {                                                                                              \
        .version = SP_SNAPSHOT_DIFF_OPTS_VERSION                                                   \
    }

/**
 * What changed from snapshot `from` to snapshot `to`, or to the live
 * workspace when `to` is NULL (which reads the workspace like a snapshot,
 * pausing as a snapshot does). Every changed path is listed, folders and
 * the contents of added or deleted folders included.
 */
int sp_snapshot_diff(sp_snapdiff **out, sp_snapstore *s, const char *from, const char *to,
                     const sp_snapshot_diff_opts *opts, sp_error **err);
void sp_snapdiff_free(sp_snapdiff *d);

/** One entry of a snapshot, as sp_snapshot_read_entry() gives it. */
typedef struct sp_snapshot_entry {
    sp_fs_type type; /**< SP_FS_OTHER for a fifo */
    unsigned mode;   /**< permission bits as recorded (07777) */
    char *data;      /**< files: the content; symlinks: the target; else NULL
                          (NUL-terminated for convenience) */
    size_t size;     /**< bytes in data */
} sp_snapshot_entry;

/** Free what an entry holds (not the struct); accepts NULL. */
void sp_snapshot_entry_dispose(sp_snapshot_entry *e);

/**
 * Read the entry at `path` ("a/b.txt", relative to the root; "." is the
 * root) of snapshot `ref`.
 *
 * @return 0; SP_ENOTFOUND when the snapshot has no such path (or a
 *         component is not a folder); SP_ETOOBIG for a file over
 *         `max_bytes` (or stored sparse); sp_snapshot_get()'s errors
 */
int sp_snapshot_read_entry(sp_snapshot_entry *out, sp_snapstore *s, const char *ref,
                           const char *path, size_t max_bytes, sp_error **err);

/**
 * The type, permission bits and size of the entry at `path` of snapshot
 * `ref`, without its content (`data` stays NULL).
 *
 * @return 0; sp_snapshot_read_entry()'s errors (SP_ETOOBIG only for a
 *         sparse file)
 */
int sp_snapshot_stat_entry(sp_snapshot_entry *out, sp_snapstore *s, const char *ref,
                           const char *path, sp_error **err);

/**
 * Hand the content of the file at `path` of snapshot `ref` to `fn` in
 * pieces (at most 1 MiB each), never holding it whole: `fn` returns 0 to
 * go on, or a negative SP_E* code to stop (which is returned; set nothing
 * in *err then, or set it yourself first).
 *
 * @return 0; SP_EINVAL when the entry is not a file; SP_ETOOBIG for a file
 *         stored sparse; sp_snapshot_read_entry()'s other errors
 */
int sp_snapshot_stream_entry(sp_snapstore *s, const char *ref, const char *path,
                             int (*fn)(void *ud, const void *data, size_t len), void *ud,
                             sp_error **err);

/* ------------------------------------------------------ export, import -- */

typedef enum sp_snapshot_format {
    SP_SNAPSHOT_TAR = 0,    /**< pax tar */
    SP_SNAPSHOT_TAR_GZ = 1, /**< pax tar, gzip-compressed */
} sp_snapshot_format;

/**
 * Write a snapshot's tree as a tar archive: permission bits (without the
 * set-id bits of files unless the handle has `keep_setid`), symlinks, empty
 * folders and fifos, mtime = the snapshot's time, owner nobody:nogroup
 * (65534:65534), so that a root extracting it with owners kept makes
 * nothing owned by root. Written to `path` (atomically: a temp file renamed
 * into place) or, when `path` is NULL, to the open fd `fd` (not closed).
 */
int sp_snapshot_export(sp_snapstore *s, const char *ref, const char *path, int fd,
                       sp_snapshot_format format, sp_error **err);

/**
 * Read a tar archive (plain, or compressed with gzip, bzip2, xz or zstd;
 * detected) into a new snapshot without touching the workspace; `path`, or
 * the open fd `fd` when `path` is NULL. Decompression runs in this process
 * only: a compression libarchive would hand to an external program is
 * refused (SP_ERROR), never run. Entries with absolute
 * paths or `..` are refused with SP_EESCAPE; device nodes are skipped; a
 * hard link becomes a copy of its target; the set-id bits of files are
 * dropped unless the handle has `keep_setid`.
 *
 * @param out  receives the new record (may be NULL)
 */
int sp_snapshot_import(sp_snapshot **out, sp_snapstore *s, const char *path, int fd,
                       const char *tag, sp_error **err);

/* -------------------------------------------------------------- share -- */

/**
 * Make snapshot `ref` of store `src` a snapshot of store `dst` too (a
 * fork): every object of `src` gets a hard link in `dst` (a copy, or a
 * reflink, where linking is refused: another filesystem), then the
 * snapshot's ref is written in `dst` under the same id. Objects are
 * immutable, so the two stores share their data and stay independent: a
 * gc or a removal of one never takes what the other needs. Neither
 * workspace is read or written; restore the snapshot in `dst` to
 * materialise it. The record keeps the `root` and `store` it was taken in.
 *
 * @param out  receives the record as `dst` has it (may be NULL)
 * @return 0; the errors of sp_snapshot_get() on `src`; SP_EREADONLY for a
 *         read-only `dst`; errno-style errors
 */
int sp_snapshot_share(sp_snapshot **out, sp_snapstore *dst, sp_snapstore *src, const char *ref,
                      sp_error **err);

/**
 * sp_snapshot_share(), but the snapshot becomes a new record of `dst`
 * over the same content, with a new id and tag `tag` (NULL: as
 * sp_snapshot_share()). A fork keeps its origin's baseline this way.
 */
int sp_snapshot_share_tagged(sp_snapshot **out, sp_snapstore *dst, sp_snapstore *src,
                             const char *ref, const char *tag, sp_error **err);

/* ----------------------------------------------------------------- gc -- */

typedef struct sp_snapstore_gc_result {
    uint64_t objects_removed;
    uint64_t bytes_removed;
    uint64_t objects_kept;
} sp_snapstore_gc_result;

/**
 * Remove the data no snapshot needs any more: unreachable loose objects,
 * packs holding unreachable objects (rewritten with libgit2), temp files
 * and ref locks left by killed processes. What the stat cache names is
 * kept, so the next snapshot stays cheap. Other processes holding a
 * tracked tree in memory notice (a generation number) and walk again.
 *
 * @param out  receives counts (may be NULL)
 */
int sp_snapstore_gc(sp_snapstore_gc_result *out, sp_snapstore *s, sp_error **err);

#ifdef __cplusplus
}
#endif

#endif
