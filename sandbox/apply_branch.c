/* `sandpod apply --branch NAME`: a sandbox's changes as one commit on a
 * new branch of the host's git repository (apply_internal.h).
 *
 * Contract: the only things written in the destination repository are
 * objects (blobs, trees, one commit) and the new ref refs/heads/NAME (with
 * its reflog, as `git branch` writes one). Its work tree, index, HEAD,
 * config and hooks are never written, and nothing of the repository runs:
 * libgit2 runs no hooks and applies no filters to the blobs written here
 * (their bytes are the snapshot's). Every path lands under the prefix of
 * `to` in the work tree and is checked component by component: empty, `.`,
 * `..` and every spelling git treats as `.git` (case, NTFS 8.3 names and
 * trailing dots or spaces, HFS+ ignorable code points) are refused before
 * anything is written, as is a symlink named like .gitmodules,
 * .gitattributes or .gitignore. An existing branch, or one HEAD names but
 * that is not born yet, is refused before anything is written too.
 *
 * Cost: the new tree is built with one tree builder per folder that holds
 * a change, seeded from HEAD's tree there; untouched folders keep their
 * tree ids and are never read. With the changes sorted so that each
 * folder's are together, the work is O(n log n) in the changes plus the
 * size of the touched folders. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <git2.h>
#include <git2/sys/path.h>

#include "apply_internal.h"
#include "base.h"

/* SP_ERROR with "WHAT: libgit2's message". */
static int lg2_fail(sp_error **err, const char *fmt, ...) SP_PRINTF(2, 3);
static int lg2_fail(sp_error **err, const char *fmt, ...)
{
    const git_error *e = git_error_last();
    va_list ap;
    va_start(ap, fmt);
    cleanup_free char *what = sp_xvasprintf(fmt, ap);
    va_end(ap);
    return sp_err_set(err, SP_ERROR, 0, "%s: %s", what, e && e->message ? e->message : "libgit2");
}

/* Rewrite an error's message with control characters and the invisible
 * or direction-changing code points shown as escapes: paths here are the
 * workload's names, and the message ends up on the user's terminal, where
 * such a name could hide or fake a line. */
static void escape_message(sp_error *e)
{
    if (!e || !e->message)
        return;
    sp_buf b = SP_BUF_INIT;
    for (const unsigned char *p = (const unsigned char *)e->message; *p;) {
        if (*p < 0x20 || *p == 0x7f) {
            sp_buf_printf(&b, "\\x%02x", *p++);
            continue;
        }
        if ((p[0] == 0xe2 && p[1] == 0x80 &&
             ((p[2] >= 0x8b && p[2] <= 0x8f) || (p[2] >= 0xaa && p[2] <= 0xae))) ||
            (p[0] == 0xe2 && p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xaf) ||
            (p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf)) {
            unsigned cp = ((p[0] & 0x0fu) << 12) | ((p[1] & 0x3fu) << 6) | (p[2] & 0x3fu);
            sp_buf_printf(&b, "\\u%04x", cp);
            p += 3;
            continue;
        }
        sp_buf_addc(&b, (char)*p++);
    }
    free(e->message);
    e->message = sp_buf_steal(&b);
}

/* ------------------------------------------------------------- paths -- */

/* The next character of `s` as HFS+ compares names: code points it
 * ignores (zero-width joiners, direction marks, the BOM) skipped, ASCII
 * folded to lower case; other bytes as they are. 0 at the end. */
static int hfs_next(const unsigned char **s, const unsigned char *end)
{
    while (*s < end) {
        const unsigned char *p = *s;
        if (end - p >= 3 && p[0] == 0xe2 &&
            ((p[1] == 0x80 && ((p[2] >= 0x8c && p[2] <= 0x8f) || (p[2] >= 0xaa && p[2] <= 0xae))) ||
             (p[1] == 0x81 && p[2] >= 0xaa && p[2] <= 0xaf))) {
            *s += 3;
            continue;
        }
        if (end - p >= 3 && p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf) {
            *s += 3;
            continue;
        }
        (*s)++;
        return *p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p;
    }
    return 0;
}

static bool hfs_is(const char *name, size_t len, const char *want)
{
    const unsigned char *s = (const unsigned char *)name, *end = s + len;
    for (const char *w = want; *w; w++)
        if (hfs_next(&s, end) != *w)
            return false;
    return hfs_next(&s, end) == 0;
}

/* What NTFS makes of the rest of a name: nothing when it is only dots and
 * spaces up to its end or to a ':' (an alternate data stream). */
static bool ntfs_tail_empty(const char *p, const char *end)
{
    for (; p < end && *p != ':'; p++)
        if (*p != '.' && *p != ' ')
            return false;
    return true;
}

/* A name some filesystem git protects against takes as `.git`. */
static bool is_dotgit(const char *name, size_t len)
{
    const char *end = name + len;
    if (len >= 4 && strncasecmp(name, ".git", 4) == 0 &&
        (len == 4 || name[4] == '\\' || ntfs_tail_empty(name + 4, end)))
        return true;
    /* The 8.3 short names NTFS gives .git: GIT~1, GIT~2, ... */
    if (len >= 5 && strncasecmp(name, "git~", 4) == 0 && name[4] >= '1' && name[4] <= '9') {
        const char *p = name + 5;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        if (ntfs_tail_empty(p, end))
            return true;
    }
    return hfs_is(name, len, ".git");
}

static bool is_git_special_file(const char *name, size_t len)
{
    static const git_path_gitfile kinds[] = {
        GIT_PATH_GITFILE_GITMODULES, GIT_PATH_GITFILE_GITATTRIBUTES, GIT_PATH_GITFILE_GITIGNORE};
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (git_path_is_gitfile(name, len, kinds[i], GIT_PATH_FS_GENERIC) > 0)
            return true;
    return false;
}

/* SP_EINVAL unless every component of `path` may be a name in a tree. */
static int check_path(const char *path, sp_error **err)
{
    const char *p = path;
    for (;;) {
        size_t len = strcspn(p, "/");
        if (len == 0 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
            return sp_err_set(err, SP_EINVAL, 0, "not a path for a commit: '%s'", path);
        if (is_dotgit(p, len))
            return sp_err_set(err, SP_EINVAL, 0, "path names a .git folder: '%s'", path);
        if (!p[len])
            return 0;
        p += len + 1;
    }
}

static const char *last_component(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* ------------------------------------------------------------ change -- */

struct item {
    char *path; /* in the work tree: the prefix of `to`, then rel */
    const sp_apply_git_change *c;
};

/* Bytewise, but with '/' before every other byte, so that a folder's
 * paths are together ("a", "a/b", "a.txt"). */
static int item_cmp(const void *pa, const void *pb)
{
    const unsigned char *a = (const unsigned char *)((const struct item *)pa)->path;
    const unsigned char *b = (const unsigned char *)((const struct item *)pb)->path;
    for (;; a++, b++) {
        int x = *a == '/' ? 1 : *a ? *a + 1 : 0;
        int y = *b == '/' ? 1 : *b ? *b + 1 : 0;
        if (x != y || !x)
            return x - y;
    }
}

struct build {
    git_repository *repo;
    const char *repo_path; /* the work tree, for messages */
    sp_snapstore *s;
    const char *snap_id;
    struct item *v;
};

/* Write the new side of `it` as a blob; *mode 0 when it is no file or
 * symlink (a folder: git has nothing for it). */
static int new_side(git_oid *id, git_filemode_t *mode, struct build *b, const struct item *it,
                    sp_error **err)
{
    *mode = 0;
    sp_snapshot_entry e;
    int r = sp_snapshot_read_entry(&e, b->s, b->snap_id, it->c->ws_path, SIZE_MAX, err);
    if (r < 0)
        return r;
    if (e.type == SP_FS_FILE || e.type == SP_FS_SYMLINK) {
        if (e.type == SP_FS_SYMLINK &&
            is_git_special_file(last_component(it->path), strlen(last_component(it->path))))
            r = sp_err_set(err, SP_EINVAL, 0, "a symlink git refuses: '%s'", it->path);
        else if (git_blob_create_from_buffer(id, b->repo, e.data, e.size) < 0)
            r = lg2_fail(err, "write %s in %s", it->path, b->repo_path);
        else
            *mode = e.type == SP_FS_SYMLINK ? GIT_FILEMODE_LINK
                    : e.mode & 0111         ? GIT_FILEMODE_BLOB_EXECUTABLE
                                            : GIT_FILEMODE_BLOB;
    } else if (e.type != SP_FS_DIR) {
        r = sp_err_set(err, SP_EINVAL, 0, "%s: not a file, symlink or folder in the snapshot",
                       it->c->ws_path);
    }
    sp_snapshot_entry_dispose(&e);
    return r;
}

static int remove_name(git_treebuilder *tb, const char *name, const char *where, sp_error **err)
{
    if (git_treebuilder_get(tb, name) && git_treebuilder_remove(tb, name) < 0)
        return lg2_fail(err, "remove %s%s", where, name);
    return 0;
}

/* The folder at v[lo].path[0..off) with the changes v[lo..hi) (each path
 * longer than off) applied to `base` (NULL: none there yet). *empty when
 * nothing is left in it; else *out is its new tree. */
static int build_dir(git_oid *out, bool *empty, struct build *b, const git_tree *base, size_t lo,
                     size_t hi, size_t off, sp_error **err)
{
    git_treebuilder *tb = NULL;
    char *name = NULL;
    cleanup_free char *where = sp_xstrndup(b->v[lo].path, off); /* "" or "dir/" */
    if (git_treebuilder_new(&tb, b->repo, base) < 0)
        return lg2_fail(err, "tree of '%s' in %s", where, b->repo_path);
    int r = 0;
    for (size_t i = lo; i < hi && r == 0;) {
        const char *rest = b->v[i].path + off;
        size_t len = strcspn(rest, "/");
        size_t j = i;
        while (j < hi && strncmp(b->v[j].path + off, rest, len) == 0 &&
               (b->v[j].path[off + len] == '/' || !b->v[j].path[off + len]))
            j++;
        free(name);
        name = sp_xstrndup(rest, len);
        size_t deeper = i;
        /* The change at this very name sorts first. */
        bool replaced = false;
        if (!rest[len]) {
            const struct item *it = &b->v[i];
            deeper = i + 1;
            git_oid id;
            git_filemode_t mode = 0;
            if (!it->c->remove && (r = new_side(&id, &mode, b, it, err)) < 0)
                break;
            const git_tree_entry *old = git_treebuilder_get(tb, name);
            if (mode) {
                if (git_treebuilder_insert(NULL, tb, name, &id, mode) < 0) {
                    r = lg2_fail(err, "add %s in %s", it->path, b->repo_path);
                    break;
                }
                replaced = true;
            } else if (old && git_tree_entry_type(old) == GIT_OBJECT_BLOB) {
                /* Removed, or a folder now. A folder or submodule here
                 * stays: its files come as changes of their own. */
                if ((r = remove_name(tb, name, where, err)) < 0)
                    break;
            }
        }
        if (deeper < j) {
            const git_tree_entry *old = git_treebuilder_get(tb, name);
            git_tree *sub = NULL;
            if (replaced || (old && git_tree_entry_filemode(old) == GIT_FILEMODE_COMMIT)) {
                /* What is under a file (it was a folder before) is gone
                 * with it; a submodule's files belong to its repository. */
                for (size_t k = deeper; k < j; k++)
                    if (!b->v[k].c->remove) {
                        r = sp_err_set(err, SP_EINVAL, 0,
                                       replaced ? "%s: under %s%s, which is a file in the snapshot"
                                                : "%s: inside submodule %s%s, which --branch "
                                                  "does not write",
                                       b->v[k].path, where, name);
                        break;
                    }
                i = j;
                continue;
            }
            if (old && git_tree_entry_type(old) == GIT_OBJECT_TREE &&
                git_tree_lookup(&sub, b->repo, git_tree_entry_id(old)) < 0) {
                r = lg2_fail(err, "read %s%s in %s", where, name, b->repo_path);
                break;
            }
            /* A file at this name in HEAD gives way to the folder. */
            git_oid id;
            bool gone = false;
            r = build_dir(&id, &gone, b, sub, deeper, j, off + len + 1, err);
            git_tree_free(sub);
            if (r < 0)
                break;
            if (gone)
                r = remove_name(tb, name, where, err);
            else if (git_treebuilder_insert(NULL, tb, name, &id, GIT_FILEMODE_TREE) < 0)
                r = lg2_fail(err, "add %s%s in %s", where, name, b->repo_path);
        }
        i = j;
    }
    free(name);
    if (r == 0) {
        *empty = git_treebuilder_entrycount(tb) == 0;
        if (git_treebuilder_write(out, tb) < 0)
            r = lg2_fail(err, "write tree '%s' in %s", where, b->repo_path);
    }
    git_treebuilder_free(tb);
    return r;
}

/* ------------------------------------------------------------ commit -- */

/* `to`'s path inside the work tree ("" or "a/b/"), or SP_EINVAL. */
static int to_prefix(char **out, const char *to, const char *workdir, sp_error **err)
{
    cleanup_free char *rto = realpath(to, NULL);
    if (!rto)
        return sp_err_errno(err, errno, "resolve", to);
    cleanup_free char *rwd = realpath(workdir, NULL);
    if (!rwd)
        return sp_err_errno(err, errno, "resolve", workdir);
    size_t n = strlen(rwd);
    if (strcmp(rwd, "/") == 0)
        n = 0;
    if (strncmp(rto, rwd, n) != 0 || (rto[n] != '/' && rto[n] != '\0'))
        return sp_err_set(err, SP_EINVAL, 0, "%s is not inside the work tree %s", to, rwd);
    const char *rel = rto + n + (rto[n] == '/');
    *out = *rel ? sp_xasprintf("%s/", rel) : sp_xstrdup("");
    return 0;
}

static int open_repo(git_repository **out, char **workdir, const char *to, sp_error **err)
{
    git_repository *repo = NULL;
    int g = git_repository_open_ext(&repo, to, 0, NULL);
    if (g == GIT_ENOTFOUND)
        return sp_err_set(err, SP_EINVAL, 0,
                          "--branch needs a git work tree: no git repository holds %s", to);
    if (g < 0)
        return lg2_fail(err, "open the git repository of %s", to);
    const char *wd = git_repository_workdir(repo);
    if (git_repository_is_bare(repo) || !wd) {
        int r = sp_err_set(err, SP_EINVAL, 0,
                           "--branch needs a git work tree: %s is in a bare repository (%s)", to,
                           git_repository_path(repo));
        git_repository_free(repo);
        return r;
    }
    size_t n = strlen(wd);
    *workdir = sp_xstrndup(wd, n > 1 && wd[n - 1] == '/' ? n - 1 : n);
    *out = repo;
    return 0;
}

/* SP_EEXISTS when the branch exists, or HEAD names it before its first
 * commit (creating it would move HEAD). */
static int check_branch(git_repository *repo, const char *refname, const char *branch,
                        const char *repo_path, sp_error **err)
{
    git_reference *ref = NULL;
    int g = git_reference_lookup(&ref, repo, refname);
    git_reference_free(ref);
    if (g == 0)
        return sp_err_set(err, SP_EEXISTS, 0, "branch %s already exists in %s", branch, repo_path);
    if (g != GIT_ENOTFOUND)
        return lg2_fail(err, "look up branch %s in %s", branch, repo_path);
    git_reference *head = NULL;
    if (git_reference_lookup(&head, repo, "HEAD") == 0) {
        bool same = git_reference_type(head) == GIT_REFERENCE_SYMBOLIC &&
                    strcmp(git_reference_symbolic_target(head), refname) == 0;
        git_reference_free(head);
        if (same)
            return sp_err_set(err, SP_EEXISTS, 0,
                              "branch %s already exists in %s (HEAD names it; it has no commit "
                              "yet)",
                              branch, repo_path);
    }
    return 0;
}

static int check_branch_name(const char *branch, sp_error **err)
{
    if (!branch || !*branch)
        return sp_err_set(err, SP_EINVAL, 0, "the branch name is empty");
    cleanup_free char *refname = sp_xasprintf("refs/heads/%s", branch);
    int valid = 0;
    /* git refuses these as branch names though they make valid refs. */
    if (branch[0] == '-' || strcmp(branch, "HEAD") == 0 ||
        git_reference_name_is_valid(&valid, refname) < 0 || !valid)
        return sp_err_set(err, SP_EINVAL, 0, "not a valid branch name: '%s'", branch);
    return 0;
}

/* HEAD's commit, or NULL for an unborn HEAD. */
static int head_commit(git_commit **out, git_repository *repo, const char *repo_path,
                       sp_error **err)
{
    *out = NULL;
    git_reference *head = NULL;
    int g = git_repository_head(&head, repo);
    if (g == GIT_EUNBORNBRANCH || g == GIT_ENOTFOUND)
        return 0;
    if (g < 0)
        return lg2_fail(err, "read HEAD of %s", repo_path);
    git_object *o = NULL;
    g = git_reference_peel(&o, head, GIT_OBJECT_COMMIT);
    git_reference_free(head);
    if (g < 0)
        return lg2_fail(err, "read HEAD's commit in %s", repo_path);
    *out = (git_commit *)o;
    return 0;
}

static int make_commit(git_oid *out, struct build *b, git_commit *parent, const git_oid *tree_id,
                       const char *message, sp_error **err)
{
    git_tree *tree = NULL;
    git_signature *sig = NULL;
    char *msg = NULL;
    int r = 0;
    if (git_tree_lookup(&tree, b->repo, tree_id) < 0) {
        r = lg2_fail(err, "read the new tree in %s", b->repo_path);
        goto done;
    }
    if (git_signature_default(&sig, b->repo) < 0 &&
        git_signature_now(&sig, "sandpod", "sandpod@localhost") < 0) {
        r = lg2_fail(err, "make a signature for %s", b->repo_path);
        goto done;
    }
    if (!message || !*message)
        message = "sandpod apply";
    size_t n = strlen(message);
    msg = sp_xasprintf("%s%s", message, message[n - 1] == '\n' ? "" : "\n");
    const git_commit *parents[1] = {parent};
    if (git_commit_create(out, b->repo, NULL, sig, sig, NULL, msg, tree, parent ? 1 : 0, parents) <
        0)
        r = lg2_fail(err, "write the commit in %s", b->repo_path);
done:
    free(msg);
    git_signature_free(sig);
    git_tree_free(tree);
    return r;
}

int sp_apply_branch(char **out_commit, const char *to, const char *branch, sp_snapstore *s,
                    const char *now_ref, const sp_apply_git_change *v, size_t n,
                    const char *message, sp_error **err)
{
    *out_commit = NULL;
    if (!to || to[0] != '/')
        return sp_err_set(err, SP_EINVAL, 0, "apply --branch: not an absolute folder: '%s'",
                          to ? to : "");
    if (git_libgit2_init() < 0)
        return lg2_fail(err, "libgit2");
    git_repository *repo = NULL;
    git_commit *parent = NULL;
    git_reference *ref = NULL;
    sp_snapshot *snap = NULL;
    char *workdir = NULL, *prefix = NULL, *refname = NULL;
    struct item *items = sp_xcalloc(n ? n : 1, sizeof(*items));
    size_t nitems = 0;
    int r = check_branch_name(branch, err);
    if (r < 0)
        goto done;
    refname = sp_xasprintf("refs/heads/%s", branch);
    if ((r = open_repo(&repo, &workdir, to, err)) < 0)
        goto done;
    if ((r = to_prefix(&prefix, to, workdir, err)) < 0)
        goto done;
    for (; nitems < n; nitems++) {
        items[nitems].c = &v[nitems];
        items[nitems].path = sp_xasprintf("%s%s", prefix, v[nitems].rel ? v[nitems].rel : "");
        if ((r = check_path(items[nitems].path, err)) < 0) {
            nitems++;
            goto done;
        }
    }
    qsort(items, nitems, sizeof(*items), item_cmp);
    for (size_t i = 1; i < nitems; i++)
        if (strcmp(items[i - 1].path, items[i].path) == 0) {
            r = sp_err_set(err, SP_EINVAL, 0, "path listed twice: '%s'", items[i].path);
            goto done;
        }
    if ((r = check_branch(repo, refname, branch, workdir, err)) < 0)
        goto done;
    if ((r = sp_snapshot_get(&snap, s, now_ref, err)) < 0)
        goto done;
    if ((r = head_commit(&parent, repo, workdir, err)) < 0)
        goto done;

    struct build b = {.repo = repo, .repo_path = workdir, .s = s, .snap_id = snap->id, .v = items};
    git_tree *base = NULL;
    if (parent && git_commit_tree(&base, parent) < 0) {
        r = lg2_fail(err, "read HEAD's tree in %s", workdir);
        goto done;
    }
    git_oid tree_id, commit_id;
    bool empty = false;
    if (nitems) {
        r = build_dir(&tree_id, &empty, &b, base, 0, nitems, 0, err);
    } else {
        /* No change: HEAD's tree, or the empty one (written: a repository
         * need not hold it). */
        git_treebuilder *tb = NULL;
        if (git_treebuilder_new(&tb, repo, base) < 0 || git_treebuilder_write(&tree_id, tb) < 0)
            r = lg2_fail(err, "write the tree in %s", workdir);
        git_treebuilder_free(tb);
    }
    git_tree_free(base);
    if (r < 0)
        goto done;
    if ((r = make_commit(&commit_id, &b, parent, &tree_id, message, err)) < 0)
        goto done;
    int g = git_reference_create(&ref, repo, refname, &commit_id, 0, "sandpod apply --branch");
    if (g == GIT_EEXISTS) {
        r = sp_err_set(err, SP_EEXISTS, 0, "branch %s already exists in %s", branch, workdir);
        goto done;
    }
    if (g < 0) {
        r = lg2_fail(err, "create branch %s in %s", branch, workdir);
        goto done;
    }
    char hex[GIT_OID_HEXSZ + 1];
    git_oid_tostr(hex, sizeof(hex), &commit_id);
    *out_commit = sp_xstrdup(hex);
done:
    for (size_t i = 0; i < nitems; i++)
        free(items[i].path);
    free(items);
    sp_snapshot_free(snap);
    git_reference_free(ref);
    git_commit_free(parent);
    git_repository_free(repo);
    free(workdir);
    free(prefix);
    free(refname);
    git_libgit2_shutdown();
    if (r < 0 && err)
        escape_message(*err);
    return r;
}
