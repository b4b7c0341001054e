/* Internals of hydration (hydrate*.c), shared by its files. Not installed.
 * The phases are described at the top of hydrate.c. */
#ifndef SANDPOD_HYDRATE_INTERNAL_H
#define SANDPOD_HYDRATE_INTERNAL_H

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "fs_internal.h"
#include "glob.h"
#include "sandpod/hydrate.h"
#include "dir.h"
#include "secrets.h"
#include "fdtree.h"

/* Deeper folders are skipped with a note: each level holds an fd. */
#define MAX_DEPTH 256
/* Bytes per copy_file_range call and size of the read/write buffer. */
#define CFR_CHUNK ((size_t)1 << 30)
#define RW_CHUNK  ((size_t)1 << 20)

/* Test hook: when > 0, the Nth rename of the commit fails with EIO, so the
 * rollback can be tested. Not part of the API. */
extern int sp_hydrate_test_fail_commit;

/* A stack of open folders along one path, so that walking a plan in
 * pre-order opens each folder once. Paths are relative to `base` ("" =
 * base); `key` tells apart several bases sharing one stack. */
typedef struct dstack {
    struct {
        char *path;
        int fd;
    } * v;
    size_t n, cap;
    int key;
} dstack;

/* One entry of a plan. Paths are relative and "" stands for the top. */
typedef struct pent {
    char *dst;  /* relative to the workspace */
    char *src;  /* relative to roots[root]; NULL for implied folders */
    char *link; /* symlink target, verbatim */
    int root;   /* index into hyd.roots, -1 for implied folders */
    size_t mount;
    size_t parent; /* per-mount plan only: parent entry, SIZE_MAX for none */
    uint64_t size;
    uint64_t blocks;
    struct timespec atime, mtime;
    uint32_t mode;
    uint32_t uid, gid;
    uint32_t nlink;
    sp_fs_type type;
    sp_secret_kind scrub; /* files: rewritten without credentials when copied */
    bool needed, dead, implied;
} pent;

/* A host folder we read from: an allowed root or a mount's source. */
typedef struct hroot {
    char *path; /* resolved, absolute */
    int fd;     /* O_PATH (allowed roots) or O_RDONLY (mount sources) folder */
} hroot;

typedef struct pvec {
    pent *v;
    size_t n, cap;
} pvec;

/* Destination path -> index into the global plan (open addressing). A
 * slot pointing at a dead entry counts as absent. */
typedef struct hmap {
    size_t *slots;
    size_t cap, n;
} hmap;

typedef struct skipv {
    sp_hydrate_skip *v;
    size_t n, cap;
} skipv;

typedef struct rewv {
    sp_hydrate_rewrite *v;
    size_t n, cap;
} rewv;

typedef struct ovrv {
    sp_hydrate_override *v;
    size_t n, cap;
} ovrv;

/* Everything one sp_hydrate() call holds. */
typedef struct hyd {
    const sp_hydrate_opts *opts;
    hroot *roots;
    size_t nroots;
    size_t n_allowed; /* roots[0..n_allowed) are opts->allowed_roots */
    char **mount_dst; /* normalized mount paths, "" = workspace root */
    size_t *mount_root;
    size_t nmounts;
    const sp_mount *mounts;
    uint64_t *copied; /* bytes copied per mount, checked against max_bytes again */
    pvec g;
    hmap map;
    skipv skips;
    rewv rewrites;
    ovrv ovr;
    uint64_t excluded;
    bool is_root;
    bool no_reflink, no_cfr;
    uint64_t reflinked, sparse;
    char *buf; /* RW_CHUNK bytes for read/write copies */
    sp_hydrate_progress prog;
    dev_t ws_dev;
    ino_t ws_ino;
    /* staging */
    int wsfd;
    int stage_parent; /* folder holding the staging folder */
    char *stage_name;
    int stagefd; /* the staging folder */
    int treefd;  /* stage/tree: the new content, laid out like the workspace */
    int trashfd; /* stage/trash: workspace entries moved aside during the commit */
} hyd;

enum jkind { J_MOVED, J_EXCHANGED, J_ASIDE };

typedef struct jent {
    enum jkind kind;
    char *path;  /* relative to the workspace (and to the staging tree) */
    char *trash; /* J_ASIDE: name in the trash folder */
} jent;

typedef struct journal {
    jent *v;
    size_t n, cap;
    unsigned long renames;
} journal;

/* fmt_size() plus the exact count when the short form rounds:
 * "1.5 MiB (1572864 bytes)", or "700 bytes". */
void hyd_fmt_size_exact(char *buf, size_t len, uint64_t v);

bool hyd_path_within(const char *p, const char *root);

/* The part of p below root ("" for root itself); p must be within root. */
const char *hyd_path_below(const char *p, const char *root);

/* Join with "" meaning the base itself. */
char *hyd_join(const char *dir, const char *name);

const char *hyd_base_name(const char *rel);

/* The parent part of rel as a new string ("" at the top). */
char *hyd_dir_name(const char *rel);

/* Contract: open `rel` beneath folder fd `dirfd`, one component at a time,
 * each with O_NOFOLLOW (intermediate ones as O_PATH|O_DIRECTORY): a symlink
 * anywhere on the way fails (ENOTDIR or ELOOP), and `.`/`..` components are
 * refused (EINVAL). A final symlink opened with O_PATH yields the link
 * itself; callers that accept O_PATH check the type. "" opens dirfd's
 * folder again. Returns an fd or -1 with errno set. */
int hyd_open_beneath(int dirfd, const char *rel, int flags);

/* The target of symlink name in dfd, malloc'd; NULL with errno. Heap, not
 * stack: the walks that call it recurse. */
char *hyd_read_link(int dfd, const char *name);

void hyd_dstack_dispose(dstack *s);

/* An fd (owned by the stack) on folder `dir` beneath `base`, opened without
 * following symlinks; -1 with errno on failure. */
int hyd_dstack_get(dstack *s, int base, int key, const char *dir);

void hyd_pvec_dispose(pvec *p);

/* The live entry at `key`, or NULL. */
pent *hyd_hmap_get(hmap *m, pvec *g, const char *key);

void hyd_add_override(hyd *h, const char *dst, size_t mount, long previous);

void hyd_add_skip(hyd *h, const char *dst, size_t mount, sp_hydrate_skip_reason r,
                  const char *detail);

void hyd_add_rewrite(hyd *h, const char *dst, size_t mount, const char *detail);

void hyd_progress(hyd *h, sp_hydrate_phase phase, const char *path);
/* SP_ECANCELED (with *err set) once the caller's should_stop says so, else 0. */
int hyd_stopped(hyd *h, sp_error **err);

char *hyd_host_display(const hyd *h, int root, const char *rel);

/* Plan one mount: resolve it, walk it, check its cap, merge it. */
int hyd_plan_mount(hyd *h, size_t mi, const sp_mount *m, sp_error **err);

int hyd_copy_all(hyd *h, sp_error **err);

void hyd_journal_dispose(journal *j);

int hyd_commit_dir(hyd *h, journal *j, int wdir, int sdir, const char *rel, unsigned depth,
                   sp_error **err);

/* Undo the commit, newest first. Returns false when something could not be
 * put back. */
bool hyd_rollback(hyd *h, journal *j);

/* The staging folder goes in the workspace's parent, so that renames move
 * entries in; when that parent is another filesystem (the workspace is a
 * mount point) or refuses us, it goes hidden inside the workspace. */
int hyd_stage_create(hyd *h, const char *workspace, sp_error **err);

void hyd_stage_remove(hyd *h);

#endif
