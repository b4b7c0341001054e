/* Internals of the snapshot module, shared by its .c files. Not installed.
 *
 * Layout of a store (a bare git repository):
 *   objects/, refs/, HEAD, config    plain git; `git fsck` passes
 *   refs/sandpod/snapshots/<uuid>    one parentless commit per snapshot; the
 *                                    commit message holds the JSON record
 *   sandpod/lock                     flock()ed by every operation
 *   sandpod/statcache                the stat cache (see cache.c)
 *   sandpod/generation               bumped by gc, so that other processes
 *                                    drop what they cached in memory
 *
 * Trees are git trees with two twists that make them exact (see tree.c):
 * names git refuses or treats specially (`.git`, `.gitmodules`, ...) are
 * stored escaped, and a `~sandpod-meta` blob per folder records what a git
 * tree cannot (exact permission bits, fifos). An empty folder is the empty
 * tree. So two folders are equal exactly when their tree ids are equal,
 * which is what lets diff and restore skip unchanged subtrees unread. */
#ifndef SANDPOD_SNAP_INTERNAL_H
#define SANDPOD_SNAP_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "base.h"
#include "dir.h"
#include "json.h"
#include "sha1.h"
#include "sandpod/snapshot.h"

/* Folders nested deeper than this cannot be snapshotted (each level holds
 * an fd while it is walked). */
#define SNAP_MAX_DEPTH 256

/* Files up to this size are read whole; bigger ones are streamed, and
 * stored in sparse form when they have holes (see tree.c). Also the
 * largest file a patch shows. */
#define SNAP_SMALL_FILE ((uint64_t)8 << 20)

/* A hole shorter than this inside a big file is read as zeros: it saves
 * little, and each one costs an extent. */
#define SNAP_HOLE_MIN ((uint64_t)64 << 10)

/* A file with more extents than this (after the short holes are merged)
 * is stored whole, as the budget allows. */
#define SNAP_MAX_EXTENTS ((size_t)1 << 20)

/* Bytes of file data one operation may read or write when the caller
 * does not say (sp_snapstore_opts.max_data_bytes = 0). */
#define SNAP_DEFAULT_BUDGET ((uint64_t)16 << 30)

/* The per-folder metadata blob's name in a tree. No real name is stored
 * under it: escaping maps every name starting with '~' to "~~...". */
#define SNAP_META_NAME "~sandpod-meta"

/* ---------------------------------------------------------- sha1, oid -- */

typedef struct sp_oid {
    uint8_t id[20];
} sp_oid;

void sp_oid_hex(const sp_oid *id, char out[41]);
/* Parse exactly 40 hex digits; -1 when s is not that. */
int sp_oid_parse(sp_oid *id, const char *s, size_t len);
bool sp_oid_equal(const sp_oid *a, const sp_oid *b);
bool sp_oid_is_zero(const sp_oid *id);

/* ------------------------------------------------------- object store -- */

enum { SP_OBJ_COMMIT = 1, SP_OBJ_TREE = 2, SP_OBJ_BLOB = 3 };

/* The object store: loose objects are read and written here directly
 * (zlib + SHA-1), because libgit2's global init costs more than a whole
 * incremental snapshot (it loads the TLS CA bundle). Packed objects (after
 * a `git gc` by someone else, say) are read through libgit2, set up the
 * first time one is needed. */
typedef struct sp_odb {
    char *path; /* the store, absolute */
    int dirfd;  /* the store folder */
    int objfd;  /* objects/ */
    uint64_t written;
    uint8_t fanout[32]; /* bit set of objects/xx folders known to exist */
    sp_buf zbuf;        /* deflate output, reused */
    void *repo;         /* git_repository *, opened on first need */
    bool lg2_init;
    /* Hash only, write nothing: for the state a restore is about to
     * replace (every id it leaves in the tree is the target's). */
    bool dry;
    /* Remember what is written, for sp_odb_sync(). */
    bool track_writes;
    sp_strv pending; /* objects/ paths written since the last sync */
} sp_odb;

/* Open (and with `create`, create) the bare repository at path. */
int sp_odb_open(sp_odb *o, const char *path, bool create, sp_error **err);
void sp_odb_close(sp_odb *o);

/* Write an object unless it exists; *out receives its id. */
int sp_odb_write(sp_odb *o, int type, const void *data, size_t len, sp_oid *out, sp_error **err);

/* Write a blob of `size` bytes read from src (returns bytes, 0 at the end,
 * -1 with errno), streaming. A source that turns out to hold another
 * number of bytes gives SP_EINVAL with sys_errno EAGAIN. */
typedef ssize_t (*sp_odb_src)(void *ud, void *buf, size_t n);
int sp_odb_write_stream(sp_odb *o, uint64_t size, sp_odb_src src, void *ud, const char *display,
                        sp_oid *out, sp_error **err);
/* The same from a file's fd, `size` bytes as fstat said. */
int sp_odb_write_fd(sp_odb *o, int fd, uint64_t size, const char *display, sp_oid *out,
                    sp_error **err);

/* The size of an object, reading no more than its header. */
int sp_odb_object_size(sp_odb *o, const sp_oid *id, uint64_t *size, sp_error **err);

/* Read a whole object. *type receives its type. */
int sp_odb_read(sp_odb *o, const sp_oid *id, int *type, sp_buf *out, sp_error **err);

/* Stream a blob: sink gets (size, NULL, 0) first, then the bytes in
 * chunks; a negative return stops it. */
typedef int (*sp_odb_sink)(void *ud, uint64_t size, const void *p, size_t n, sp_error **err);
int sp_odb_blob_stream(sp_odb *o, const sp_oid *id, sp_odb_sink sink, void *ud, sp_error **err);
/* Stream a blob's content to fd. */
int sp_odb_blob_to_fd(sp_odb *o, const sp_oid *id, int fd, sp_error **err);

/* True when the object is present (loose, or packed). */
bool sp_odb_exists(sp_odb *o, const sp_oid *id);

/* The libgit2 repository (a git_repository *), opened on first use. */
int sp_odb_lg2(sp_odb *o, void **repo, sp_error **err);

/* True when objects/pack holds packs. */
bool sp_odb_has_packs(sp_odb *o);

/* Make the objects written since the last call durable (fsync each and
 * its folder; syncfs when there are many). */
int sp_odb_sync(sp_odb *o, sp_error **err);

/* Read the loose ref `name`; SP_ENOTFOUND when it is not a loose ref. */
int sp_ref_read_loose(sp_odb *o, const char *name, sp_oid *out, sp_error **err);

/* Refs: loose files, plus packed-refs for reading and deleting. */
typedef struct sp_refent {
    char *name;
    sp_oid id;
} sp_refent;
int sp_ref_create(sp_odb *o, const char *name, const sp_oid *id, sp_error **err);
int sp_ref_delete(sp_odb *o, const char *name, sp_error **err);
/* Every ref whose name starts with `prefix` (a folder, ending in '/'). */
int sp_ref_list(sp_odb *o, const char *prefix, sp_refent **out, size_t *n, sp_error **err);
void sp_refents_free(sp_refent *v, size_t n);

/* ------------------------------------------------------------- nodes -- */

/* What is known about one workspace entry: its stat data when it was last
 * looked at, and the id of its content (blob for files and symlinks, tree
 * for folders). The store keeps a tree of these in memory and, between
 * processes, in the stat cache. Children are sorted by name (bytewise). */
enum { SN_FILE = 1, SN_DIR = 2, SN_LINK = 3, SN_FIFO = 4, SN_OTHER = 5 /* socket, device */ };
enum {
    SN_RACY = 1,   /* stat data too recent to vouch for the content */
    SN_DIRTY = 2,  /* folder: its tree id must be computed again */
    SN_LINKED = 4, /* file with more than one name (st_nlink > 1) when last looked at */
    SN_SPARSE = 8, /* file stored in sparse form (its oid is that blob) */
};

typedef struct snode {
    struct snode *parent;
    struct snode **kids;
    uint32_t nkids, capkids;
    int wd; /* inotify watch of a folder, or -1 */
    uint8_t type, flags;
    uint16_t name_len;
    uint32_t mode; /* 07777 bits */
    uint64_t dev, ino, size;
    int64_t mtime_ns, ctime_ns;
    sp_oid oid;
    char name[];
} snode;

snode *sp_snode_new(const char *name, size_t len, int type);
/* Free a node and everything below it. `unwatch` (may be NULL) sees every
 * folder first, so the tracker can forget its watch. */
typedef void (*sp_snode_unwatch_fn)(void *ud, snode *dir);
void sp_snode_free(snode *n, sp_snode_unwatch_fn unwatch, void *ud);
/* The child called name, or NULL; *pos receives where it is or would go. */
snode *sp_snode_find(const snode *dir, const char *name, size_t len, uint32_t *pos);
void sp_snode_insert(snode *dir, uint32_t pos, snode *kid);
/* Take the child at pos out (not freed). */
snode *sp_snode_take(snode *dir, uint32_t pos);
/* Mark a node's folder and every folder above it for a new tree id. */
void sp_snode_dirty_up(snode *n);
/* Path of n relative to the root (caller frees); "." for the root. */
char *sp_snode_path(const snode *n);
/* Fill stat fields from st (and SN_LINKED from its link count). */
void sp_snode_set_stat(snode *n, const struct stat *st);
int sp_snode_type_of(mode_t m);
sp_fs_type sp_snode_fs_type(int type);

/* -------------------------------------------------------------- trees -- */

/* Escaping: a deterministic, invertible map from real names to names git
 * stores without complaint (tree.c explains which names are touched). */
bool sp_name_needs_escape(const char *name, size_t len);

/* Compute and write the tree of every folder marked SN_DIRTY below (and
 * including) dir, children first. */
int sp_tree_finalize(sp_odb *o, snode *dir, sp_error **err);

/* One entry of a stored folder, with its real name and exact mode. */
typedef struct sp_tentry {
    char *name;
    uint8_t type; /* SN_* */
    uint32_t mode;
    sp_oid oid;  /* zero for fifos */
    bool sparse; /* a file whose blob is in sparse form */
} sp_tentry;

typedef struct sp_tdir {
    sp_tentry *v; /* sorted by real name, bytewise */
    size_t n;
    uint32_t mode; /* the folder's own permission bits */
} sp_tdir;

/* Read a stored folder. SP_EINVAL for a tree this module did not write
 * (or a damaged one). */
int sp_tree_read(sp_tdir *out, sp_odb *o, const sp_oid *tree, sp_error **err);
void sp_tdir_dispose(sp_tdir *t);

/* The id of the empty tree. */
extern const sp_oid sp_empty_tree;

/* The sparse form of a file (tree.c describes it): its size and the data
 * extents, in order, then their bytes. */
typedef struct sp_extent {
    uint64_t off, len;
} sp_extent;

/* The text before the data of a file of `size` bytes with extents v. */
void sp_sparse_header(sp_buf *out, uint64_t size, const sp_extent *v, size_t n);

/* Where a reader of a file's sparse form is: in the header, then in its
 * extents. sp_sparse_next() copies header bytes into buf (their count), or
 * returns 0 with the next stretch of data to read: *off in the file, *len
 * (at most cap; 0 at the end). The caller reads it and adds what it got to
 * c->pos. */
typedef struct sp_sparse_cursor {
    const sp_buf *head;
    size_t head_off;
    const sp_extent *v;
    size_t n, at;
    uint64_t pos; /* bytes of v[at] read */
} sp_sparse_cursor;
size_t sp_sparse_next(sp_sparse_cursor *c, void *buf, size_t cap, uint64_t *off, size_t *len);

/* Read a blob in sparse form: `map` gets the size and every extent before
 * any data, `data` the bytes with their offsets in the file, in order. A
 * blob that is not well-formed gives SP_EINVAL naming `display`. */
typedef struct sp_sparse_sink {
    int (*map)(void *ud, uint64_t size, const sp_extent *v, size_t n, sp_error **err);
    int (*data)(void *ud, uint64_t off, const void *p, size_t n, sp_error **err);
    void *ud;
} sp_sparse_sink;
int sp_sparse_stream(sp_odb *o, const sp_oid *id, const sp_sparse_sink *sink, const char *display,
                     sp_error **err);

/* --------------------------------------------------------------- scan -- */

struct sp_track;

/* One walk of (part of) the workspace that brings nodes up to date. */
typedef struct sp_scan {
    sp_odb *odb;
    int64_t start_ns; /* coarse realtime when the walk began: newer stat data is racy */
    sp_snapstore_stats *stats;
    void (*progress)(void *ud, const sp_snapshot_progress *p);
    void *progress_ud;
    const char *phase;
    uint64_t next_progress;
    struct sp_track *track; /* add watches on the folders walked (may be NULL) */
    sp_buf path;            /* the path being looked at, for messages */
    unsigned depth;
    /* A file turned out to have another name we had not counted (new, or
     * its link count grew): the other names may have changed unseen. */
    bool new_links;
    uid_t euid; /* who we are, for restore's ownership rules */
    gid_t egid;
    bool durable;     /* restore: fsync what it writes */
    bool keep_setid;  /* restore: write the set-id bits of files too */
    uint64_t budget;  /* bytes of file data the operation may read, and write */
    bool trust_ids;   /* sp_snapstore_opts.trust_ids: same but ctime and racy is the same */
    uint64_t trusted; /* entries kept that way: their new stat data is for the cache */
} sp_scan;

/* SP_ETOOBIG for `path`, whose `need` bytes of file data would take an
 * operation past its budget. */
int sp_scan_over_budget(sp_error **err, const char *path, uint64_t need, uint64_t budget);

void sp_scan_init(sp_scan *sc, sp_odb *odb, sp_snapstore_stats *stats);
void sp_scan_dispose(sp_scan *sc);
int64_t sp_scan_now_coarse(void);

/* Bring the children of folder node `dir` up to date with the folder open
 * on dfd: new entries are added (and read), vanished ones removed, changed
 * ones read again; unchanged ones keep their ids without being read.
 * Folders below are walked too. */
int sp_scan_dir(sp_scan *sc, int dfd, snode *dir, sp_error **err);

/* Bring the single entry `name` of folder node `dir` (open on dfd) up to
 * date. With `deep`, a folder's contents are walked again too. */
int sp_scan_name(sp_scan *sc, int dfd, snode *dir, const char *name, bool deep, sp_error **err);

/* Free a child, telling the tracker. */
void sp_scan_drop(sp_scan *sc, snode *kid);

/* Path buffer helpers: push a name, pop back to a length. */
size_t sp_scan_push(sp_scan *sc, const char *name);
void sp_scan_pop(sp_scan *sc, size_t len);

/* -------------------------------------------------------------- cache -- */

/* Load the stat cache; NULL when there is none or it does not fit this
 * workspace (never an error: the cache only saves work). */
snode *sp_cache_load(int store_dirfd, const struct stat *root_st, uint64_t generation);
/* One of the two slots (0 or 1). */
snode *sp_cache_load_slot(int store_dirfd, int slot, const struct stat *root_st,
                          uint64_t generation, uint64_t *seq_out);
/* Remove the older slot (gc keeps only what the newer one names). */
void sp_cache_drop_older(int store_dirfd);
int sp_cache_save(int store_dirfd, const snode *root, const struct stat *root_st,
                  uint64_t generation, sp_error **err);

/* ------------------------------------------------------------ tracker -- */

typedef struct sp_track sp_track;

int sp_track_new(sp_track **out, sp_error **err);
void sp_track_free(sp_track *t);
int sp_track_fd(const sp_track *t);
/* Start watching folder node dir, open on dfd. A failure disables
 * tracking (the caller falls back to full walks); never an error. */
void sp_track_watch(sp_track *t, int dfd, snode *dir);
void sp_track_unwatch(void *t, snode *dir);
/* Read pending events into the dirty set. */
int sp_track_drain(sp_track *t, sp_error **err);
/* True when the tracker can vouch for everything it did not report. */
bool sp_track_ok(const sp_track *t);
void sp_track_reset(sp_track *t);
/* Before a full walk (which puts every watch in place again): forget the
 * events so far. */
void sp_track_begin_full(sp_track *t);

/* A path to stat again: relative, "." = the root's own attributes. */
typedef struct sp_track_dirty {
    char *path;
    bool deep; /* walk a folder's contents too */
} sp_track_dirty;

/* Read pending events, then hand out the dirty set (owned by the tracker
 * until sp_track_clear()): sorted, each path once, with every file known
 * to have other names. 1 when the tracker cannot vouch for what it did
 * not report: walk everything instead. */
int sp_track_changes(sp_track *t, const snode *root, const sp_track_dirty **out, size_t *n,
                     sp_error **err);
/* True when a proper ancestor of path is in the dirty set (sorted by
 * sp_track_changes()); with deep_only, only a deep one counts. */
bool sp_track_dirty_above(const sp_track *t, const char *path, bool deep_only);
/* Forget the dirty set. */
void sp_track_clear(sp_track *t);

/* ------------------------------------------------------------- rescan -- */

/* Bring the tree rooted at root (open on rootfd) up to date by looking
 * only at the paths the tracker saw change. 1 when that cannot be trusted
 * and a full walk must follow. */
int sp_rescan(sp_scan *sc, sp_track *t, int rootfd, snode *root, sp_error **err);

/* ------------------------------------------------------------ restore -- */

/* The set-id bits a file or fifo loses on its way out of the store (a
 * restore, an import, an export) unless the caller keeps them. */
#define SNAP_SETID_BITS 06000u

/* The bits an entry of type `type` with stored bits `mode` gets outside. */
/* The mode the workspace root is given on restore and export: never more
 * open than 0755, never set-id or sticky, always the owner's to use. */
#define SNAP_ROOT_MODE(m) (((m)&0755u) | 0700u)

static inline uint32_t sp_mode_out(int type, uint32_t mode, bool keep_setid)
{
    return type == SN_DIR || keep_setid ? mode : mode & ~SNAP_SETID_BITS;
}

/* Make the folder open on dfd, described by node dir, equal to tree. */
int sp_restore_dir(sp_scan *sc, int dfd, snode *dir, const sp_oid *tree, sp_error **err);

/* Before a restore changes anything: add to *bytes the file data it will
 * write to make dir (NULL: a folder not there yet) equal to tree, and fail
 * with SP_ETOOBIG at the file that takes it past sc->budget. Reads only
 * the trees that differ, and the headers of the blobs to write. */
int sp_restore_plan(sp_scan *sc, const snode *dir, const sp_oid *tree, uint64_t *bytes,
                    sp_error **err);

/* -------------------------------------------------------------- store -- */

struct sp_snapstore {
    char *root;  /* workspace, absolute */
    char *store; /* store, absolute */
    sp_fs *fs;
    int rootfd; /* O_RDONLY|O_DIRECTORY on the workspace root */
    struct stat root_st;
    sp_odb odb;
    int lockfd;     /* -1 only on a read-only store that never had a lock file */
    bool read_only; /* the store's filesystem is read-only: no new snapshots */
    snode *tree;    /* what is known about the workspace, or NULL */
    bool cache_dirty;
    uint64_t generation;
    sp_track *track;
    sp_snapstore_opts opts;
    sp_snapstore_stats stats;
    /* Folders sp_snapshot_read_entry() read last, parsed: reading many
     * entries of one big folder (apply) then costs a lookup each, not a
     * parse of the whole folder each. Trees never change under an id. */
    struct sp_tcache {
        sp_oid oid;
        sp_tdir t;
        bool set;
    } tcache[4];
    unsigned tcache_next;
};

/* Lock the store for an operation that writes it: SP_EREADONLY on a
 * read-only store, whose snapshots can still be listed, diffed, exported
 * and restored. */
int sp_snap_lock_write(sp_snapstore *s, sp_error **err);

/* Resolve a snapshot reference to its record. */
int sp_snap_resolve(sp_snapshot **out, sp_snapstore *s, const char *ref, sp_error **err);
/* The tree id of a snapshot's commit. */
int sp_snap_commit_tree(sp_odb *o, const char *commit_hex, sp_oid *tree, sp_error **err);
/* Create the commit and ref of a new snapshot of `tree`; counts (files,
 * bytes, ...) come from the node tree `counted` (may be NULL). */
int sp_snap_record(sp_snapshot **out, sp_snapstore *s, const sp_oid *tree, const snode *counted,
                   const char *tag, sp_error **err);
int sp_snap_lock(sp_snapstore *s, sp_error **err);
void sp_snap_unlock(sp_snapstore *s);
int sp_snap_check_tag(const char *tag, sp_error **err);

#endif
