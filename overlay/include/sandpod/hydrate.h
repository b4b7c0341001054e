/**
 * @file sandpod/hydrate.h
 * @brief Workspaces and their hydration from host folders.
 *
 * A sandbox starts as a copy of host folders ("mounts"). sp_hydrate() copies
 * what each mount selects (include/exclude globs, a byte cap, a symlink
 * policy) into a workspace folder, and never copies a byte from outside the
 * allowed host roots.
 *
 * Hydration is all or nothing: the mounts are planned first (a stat walk
 * that also checks every cap), copied into a private staging folder next to
 * the workspace, and only then moved into the workspace with renames. Any
 * failure before the move leaves the workspace exactly as it was; a failure
 * during the move (an I/O error on rename) is rolled back.
 *
 * Merging rules, applied in order of the mounts array:
 *   - folders merge; a file or symlink at the same path as an earlier one
 *     replaces it (later mount wins), and the result lists each override;
 *   - entries that already exist in the workspace at a hydrated path are
 *     replaced the same way (listed with previous = -1); folders that
 *     already exist keep their own mode and owner and receive the new
 *     entries.
 *
 * Nothing secret flows in by default: unless a mount says keep_secrets,
 * files that hold credentials (.env, private keys, ...) are left out and a
 * repository's git config, .npmrc, .pypirc and .docker/config.json are
 * copied without theirs; the result lists each (sp_mount.keep_secrets has
 * the rules).
 *
 * Copies keep file modes, access and modification times, symlinks (verbatim),
 * empty folders and sparse files (holes stay holes); owners too when the
 * caller is root. Hard links become separate files. Devices, fifos and
 * sockets are skipped with a note. Extended attributes and ACLs are not
 * copied. Nothing is fsync'ed: hydration is redone, not recovered, after a
 * crash.
 */
#ifndef SANDPOD_HYDRATE_H
#define SANDPOD_HYDRATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandpod/error.h"
#include "sandpod/fs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------- state root -- */

/**
 * The state root: `$SANDPOD_HOME`, else `$XDG_DATA_HOME/sandpod`, else
 * `$HOME/.local/share/sandpod` (the home folder from the password database
 * when HOME is unset). Nothing is created.
 *
 * @param out  receives the path; free()
 * @return 0; SP_EINVAL when SANDPOD_HOME is set but not absolute; SP_ERROR
 *         when no home folder can be found
 */
int sp_state_root(char **out, sp_error **err);

/**
 * Make sure `root` is private to the caller before anything is kept in it:
 * every sandbox's sandbox.json (with its `-e` values), snapshots and
 * workspace live there.
 *
 * With `create`, a missing root is made mode 0700, and so is each missing
 * parent. The folder is then opened without following a final symlink,
 * unless that symlink is owned by the caller or by root (symlinked home and
 * data folders are common; symlinks above the last component are followed
 * as usual), and judged by what it is, not by its path: it must be owned by
 * the caller's effective uid and writable by no one else. A folder the
 * caller owns that others may only read (0755, as sandpod made it before)
 * is tightened to 0700.
 *
 * @param root    the state root, as from sp_state_root()
 * @param create  make the root (and its parents) when missing
 * @return 0; SP_EDENIED for a root (or final symlink) owned by another uid
 *         or writable by its group or others, with a message that says what
 *         to do (`state root /x is writable by others (mode 0777); chmod 700
 *         it`); SP_ENOTFOUND when it is missing and `create` is false;
 *         SP_EINVAL when it is not a folder; errno-mapped codes from mkdir,
 *         open and chmod (SP_EREADONLY when a 0755 root on read-only media
 *         cannot be tightened)
 */
int sp_state_root_check(const char *root, bool create, sp_error **err);

/** True when `name` is a valid sandbox name: `[A-Za-z0-9][A-Za-z0-9_.-]{0,62}`. */
bool sp_sandbox_name_valid(const char *name);

/**
 * Create (if missing) the workspace of sandbox `name`:
 * `<state root>/sandboxes/<name>/workspace`, mode 0755. The state root is
 * checked (and made when missing) by sp_state_root_check(); the folders
 * below it are created 0755 when missing. An existing workspace folder is
 * fine.
 *
 * @param out_path  receives the workspace path; free()
 * @return 0; SP_EINVAL for a bad name; SP_EDENIED for a state root that is
 *         not private (see sp_state_root_check()); errno-mapped codes from
 *         mkdir
 */
int sp_workspace_create(char **out_path, const char *name, sp_error **err);

/* -------------------------------------------------------------- mounts -- */

/** One host folder to copy into the workspace. */
typedef struct sp_mount {
    /** The host folder (absolute, or relative to the current folder). */
    const char *host_path;
    /** Where it lands, relative to the workspace; NULL, "" or "." = the
     *  workspace root. `/workspace/...` is accepted; `..` that would leave
     *  the workspace is refused with SP_EESCAPE. */
    const char *mount_path;
    /** NULL-terminated globs (the fs tools' dialect) matched against paths
     *  relative to host_path. NULL or empty = everything. A file is copied
     *  when it or one of its folders matches an include; a pattern without
     *  '/' matches a name at any depth (`*.md`), one with '/' the whole
     *  relative path (`docs/[a-z]*.md`). A folder is not walked when no include can
     *  match below it. */
    const char *const *include;
    /** NULL-terminated globs, same matching: a matching file is left out and
     *  a matching folder is not even opened (`node_modules`, `build/cache`). */
    const char *const *exclude;
    /** Cap on the total size of the files this mount selects; 0 = no cap.
     *  Over it, hydration fails with SP_ETOOBIG before anything is copied. */
    uint64_t max_bytes;
    /** Follow symlinks whose target resolves inside an allowed root (the
     *  target's content is copied in place of the link); links that point
     *  elsewhere are skipped and reported. Off: links are copied verbatim,
     *  never followed. Following links is an option for trusted callers:
     *  the allowed roots are the only boundary. */
    bool follow_symlinks;
    /** Leave out what the source's own git ignore rules exclude, as
     *  `git status` reads them: every `.gitignore` in the tree (nested ones
     *  apply below their folder, `!` re-includes, a leading or middle `/`
     *  anchors, a trailing `/` matches folders only) and the root's
     *  `.git/info/exclude` (not those of folders above host_path, nor the
     *  user's global excludes). An ignored folder is not opened, so nothing
     *  under it comes back (git's rule too). `.git` itself is kept (git
     *  never ignores it; `exclude=.git` leaves it out). Applied after
     *  `exclude` and before `include`: an entry is copied when no exclude
     *  matches it, git does not ignore it, and an include (if any) selects it. */
    bool gitignore;
    /** Copy credentials as they are (`secrets=keep`). Off, the default:
     *  nothing secret flows in. At any depth, these regular files are left
     *  out (listed in sp_hydrate_result.skipped with SP_HYDRATE_SKIP_SECRET):
     *  `.env` and `.env.*` (not `.env.example`, `.env.sample`,
     *  `.env.template`, `.env.dist`), `.netrc`, `_netrc`,
     *  `.git-credentials`, ssh private keys (`id_*` without an extension,
     *  and `id_rsa*`, `id_dsa*`, `id_ecdsa*`, `id_ed25519*` but never
     *  `*.pub`), and `*.pem`, `*.key`, `*.p12`, `*.pfx` (any case). These
     *  are copied with their credentials taken out (listed in
     *  sp_hydrate_result.rewritten when something was):
     *    - a git config: `config` and `config.worktree` in a `.git` folder
     *      (at any depth, `.git/modules/...` too) and in a gitdir that a
     *      `.git` file names, when that gitdir is copied by the same mount:
     *      `[credential]` and `[credential "..."]` sections,
     *      `http.extraHeader` and `http.<url>.extraHeader`,
     *      `sendemail.smtpPass`, and the userinfo of `url`, `pushurl`,
     *      `insteadOf`, `pushInsteadOf` and `proxy` values and of
     *      `[url "..."]` and `[http "..."]` names (`user:password@`
     *      always; a bare `user@` in http(s) and ftp(s) URLs, where it is a
     *      token; `git@host:x` and `ssh://git@host/x` keep their user);
     *      everything else byte for byte;
     *    - `.npmrc`: lines whose key ends in `_auth`, `_authToken`,
     *      `password` or `username`, unless the value is a `${VAR}`;
     *    - `.pypirc`: `password` keys;
     *    - `.docker/config.json`: `auth`, `password`, `identitytoken` and
     *      `registrytoken` of every `auths` entry (`credHelpers` and
     *      `credsStore` stay).
     *  A file of these kinds that cannot be parsed, or is over 4 MiB, is
     *  left out (SP_HYDRATE_SKIP_SECRET) rather than copied raw. Symlinks
     *  copied as symlinks are not affected (their targets are paths);
     *  followed ones are judged by their name and their target's. */
    bool keep_secrets;
} sp_mount;

/**
 * Parse a mount SPEC, the syntax of `sandpod hydrate --mount` and
 * `sandpod create --mount`:
 *
 *     PATH
 *     src=PATH[,dst=DIR][,include=GLOB]...[,exclude=GLOB]...[,max-bytes=SIZE]
 *         [,follow-symlinks][,gitignore][,secrets=strip|keep]
 *
 * The key=value form is recognised when the SPEC starts with one of the
 * keys (`src=`, `dst=`, `include=`, `exclude=`, `max-bytes=`,
 * `follow-symlinks`, `gitignore`, `secrets=`); anything else is one PATH. Items are separated by
 * commas, except commas inside `{...}` (so `include=*.{c,h}` works) and
 * commas escaped as `\,`. In src and dst, `\,` and `\\` stand for `,` and
 * `\`; globs keep their backslashes (`\,` is a literal comma in a glob).
 * SIZE is a whole number with an optional binary suffix K, M, G or T
 * (optionally followed by B or iB, any case): `max-bytes=512M`.
 * `follow-symlinks` and `gitignore` may also be written `=true|false`.
 * `secrets=keep` sets keep_secrets; `secrets=strip` is the default.
 *
 * @param out  receives the mount; free with sp_mount_free()
 * @return 0; SP_EINVAL with a message naming the bad item
 */
int sp_mount_spec_parse(sp_mount **out, const char *spec, sp_error **err);

/** Free a mount made by sp_mount_spec_parse(); accepts NULL. */
void sp_mount_free(sp_mount *m);

/* ----------------------------------------------------------- hydration -- */

/** What sp_hydrate() is doing when it reports progress. */
typedef enum sp_hydrate_phase {
    SP_HYDRATE_SCAN = 0,   /**< walking the host folders */
    SP_HYDRATE_COPY = 1,   /**< copying into the staging folder */
    SP_HYDRATE_COMMIT = 2, /**< moving the copy into the workspace */
} sp_hydrate_phase;

/** A progress report. Totals are known from the copy phase on. */
typedef struct sp_hydrate_progress {
    sp_hydrate_phase phase;
    uint64_t files;       /**< entries seen (scan) or files copied (copy) */
    uint64_t bytes;       /**< bytes selected (scan) or copied (copy) */
    uint64_t total_files; /**< files to copy (0 while scanning) */
    uint64_t total_bytes; /**< bytes to copy (0 while scanning) */
    const char *path;     /**< the entry at hand, relative to the workspace, or NULL */
} sp_hydrate_progress;

#define SP_HYDRATE_OPTS_VERSION 2

/** Options for sp_hydrate(). */
typedef struct sp_hydrate_opts {
    unsigned version;
    /** NULL-terminated host folders that every mount's host_path, and every
     *  followed symlink target, must resolve inside. NULL = each mount's own
     *  (resolved) folder is its only allowed root. */
    const char *const *allowed_roots;
    /** Called often (after every entry) from the calling thread; the callee
     *  throttles. May be NULL. The library itself never prints. */
    void (*progress)(void *userdata, const sp_hydrate_progress *p);
    void *progress_userdata;
    /** Version 2. Polled (with progress_userdata) after every entry while
     *  scanning and copying; once it returns true the call stops, fails
     *  with SP_ECANCELED and leaves the workspace as it was. May be NULL. */
    bool (*should_stop)(void *userdata);
} sp_hydrate_opts;

#define SP_HYDRATE_OPTS_INIT                                                                       \
    {                                                                                              \
        .version = SP_HYDRATE_OPTS_VERSION                                                         \
    }

/** Why an entry was not copied (entries left out by the globs are not
 *  listed; they are counted in sp_hydrate_result.excluded). */
typedef enum sp_hydrate_skip_reason {
    SP_HYDRATE_SKIP_SPECIAL = 1,  /**< device, fifo or socket */
    SP_HYDRATE_SKIP_OUTSIDE = 2,  /**< followed symlink resolving outside the allowed roots */
    SP_HYDRATE_SKIP_DANGLING = 3, /**< followed symlink whose target is missing */
    SP_HYDRATE_SKIP_LOOP = 4,     /**< followed symlink looping back to a folder being copied */
    SP_HYDRATE_SKIP_TOO_DEEP = 5, /**< deeper than 256 folders */
    /** holds credentials (see sp_mount.keep_secrets); the detail says what
     *  it is: ".env file", "private key", "git config that could not be
     *  parsed", ... */
    SP_HYDRATE_SKIP_SECRET = 6,
} sp_hydrate_skip_reason;

/** A one-word name for a skip reason: "special", "outside", "dangling",
 *  "loop", "too_deep", "secret". */
const char *sp_hydrate_skip_name(sp_hydrate_skip_reason r);

/** An entry that was copied. */
typedef struct sp_hydrate_entry {
    char *path; /**< relative to the workspace */
    sp_fs_type type;
    uint64_t size; /**< files: bytes; symlinks: target length; folders: 0 */
    size_t mount;  /**< index of the mount it came from */
} sp_hydrate_entry;

/** An entry that was not copied, and why. */
typedef struct sp_hydrate_skip {
    char *path; /**< where it would have landed, relative to the workspace */
    size_t mount;
    sp_hydrate_skip_reason reason;
    char *detail; /**< e.g. "fifo", or the symlink's target; may be NULL */
} sp_hydrate_skip;

/** A file that was copied with credentials taken out of it (see
 *  sp_mount.keep_secrets). It is also among the entries, with the size of
 *  what was written. */
typedef struct sp_hydrate_rewrite {
    char *path; /**< relative to the workspace */
    size_t mount;
    char *detail; /**< what was taken out: "credentials removed from .git/config", ... */
} sp_hydrate_rewrite;

/** A path that a later mount (or the hydration itself) replaced. */
typedef struct sp_hydrate_override {
    char *path;    /**< relative to the workspace */
    size_t mount;  /**< the mount that won */
    long previous; /**< the mount that lost, or -1: what the workspace held before */
} sp_hydrate_override;

/** What one mount contributed (after overrides). */
typedef struct sp_hydrate_mount_stats {
    char *host_path;  /**< resolved */
    char *mount_path; /**< normalized, "." = the workspace root */
    uint64_t files, dirs, symlinks, bytes;
} sp_hydrate_mount_stats;

/** The result of sp_hydrate(). Lists are sorted by path. */
typedef struct sp_hydrate_result {
    uint64_t files, dirs, symlinks;
    uint64_t bytes;     /**< bytes of file content copied */
    uint64_t excluded;  /**< entries left out by the globs (a pruned folder counts once) */
    uint64_t hardlinks; /**< copied files that had other links on the host */
    uint64_t reflinked; /**< files cloned (FICLONE) rather than copied */
    uint64_t sparse;    /**< files copied extent by extent, holes kept */
    int64_t elapsed_ms;
    sp_hydrate_entry *entries; /**< everything copied (not the workspace root) */
    size_t n_entries;
    sp_hydrate_skip *skipped;
    size_t n_skipped;
    sp_hydrate_override *overridden;
    size_t n_overridden;
    sp_hydrate_mount_stats *mounts; /**< one per mount, in order */
    size_t n_mounts;
    sp_hydrate_rewrite *rewritten; /**< files copied with credentials taken out */
    size_t n_rewritten;
} sp_hydrate_result;

/**
 * Hydrate `workspace` (an existing folder) from `n` mounts.
 *
 * Host paths are resolved (symlinks included) and must land inside an
 * allowed root; the walk then opens every name relative to a folder fd with
 * O_NOFOLLOW, so a symlink swapped in during the copy is never followed.
 * Followed symlink targets are re-opened from an allowed root's fd one
 * component at a time, refusing any symlink on the way.
 *
 * The staging folder is created next to the workspace (in its parent, when
 * that is on the same filesystem and writable; else hidden inside the
 * workspace) and removed before returning.
 *
 * @param out        receives the result (free with sp_hydrate_result_free());
 *                   may be NULL
 * @param workspace  host path of the workspace folder
 * @param mounts     `n` mounts, applied in order (later wins)
 * @param opts       options, or NULL
 * @return 0; SP_ENOTFOUND (a mount source, allowed root or the workspace is
 *         missing); SP_EESCAPE (a host path outside the allowed roots, or a
 *         mount_path leaving the workspace); SP_EINVAL (a bad glob, a source
 *         that is not a folder); SP_ETOOBIG (a mount selects more than its
 *         max_bytes: the message gives the total and the cap); errno-mapped
 *         codes naming the file for I/O errors (SP_EDENIED for an unreadable
 *         file) and for entries that vanished or changed during the copy.
 *         On any error the workspace is as it was.
 */
int sp_hydrate(sp_hydrate_result **out, const char *workspace, const sp_mount *mounts, size_t n,
               const sp_hydrate_opts *opts, sp_error **err);

/**
 * Check `n` mounts as sp_hydrate() would begin: every allowed root and
 * mount source is resolved and opened (a source must be a folder inside an
 * allowed root) and every mount_path normalized. Nothing is read or copied.
 * A caller that must spend time before the copy (a sandbox made on a
 * remote engine first makes its Pod) asks first, so a bad mount costs
 * nothing.
 *
 * @return 0; or the error sp_hydrate() would give for the first bad mount
 *         (SP_ENOTFOUND, SP_EESCAPE, SP_EINVAL, errno-mapped codes).
 */
int sp_hydrate_check(const sp_mount *mounts, size_t n, const sp_hydrate_opts *opts, sp_error **err);

/** Free a result; accepts NULL. */
void sp_hydrate_result_free(sp_hydrate_result *r);

#ifdef __cplusplus
}
#endif

#endif
