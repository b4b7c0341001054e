/* Hydration, phase 3: move the staged entries into the workspace,
 * journalled so that a failure part way is rolled back; and the staging
 * folder itself. */
#include "hydrate_internal.h"

int sp_hydrate_test_fail_commit = 0;

/* ------------------------------------------------------------- commit -- */

static void journal_add(journal *j, enum jkind k, const char *path, const char *trash)
{
    if (j->n == j->cap) {
        j->cap = j->cap ? j->cap * 2 : 64;
        j->v = sp_xrealloc(j->v, j->cap * sizeof(jent));
    }
    j->v[j->n].kind = k;
    j->v[j->n].path = sp_xstrdup(path);
    j->v[j->n].trash = trash ? sp_xstrdup(trash) : NULL;
    j->n++;
}

void hyd_journal_dispose(journal *j)
{
    for (size_t i = 0; i < j->n; i++) {
        free(j->v[i].path);
        free(j->v[i].trash);
    }
    free(j->v);
    memset(j, 0, sizeof(*j));
}

/* renameat2 that the test hook can make fail. */
static int do_rename(journal *j, int ofd, const char *oname, int nfd, const char *nname,
                     unsigned flags)
{
    j->renames++;
    if (sp_hydrate_test_fail_commit > 0 &&
        j->renames == (unsigned long)sp_hydrate_test_fail_commit) {
        errno = EIO;
        return -1;
    }
    return renameat2(ofd, oname, nfd, nname, flags);
}

/* Moving a folder to another parent needs write access to it (its ".."
 * changes): grant it for the move when we are not root. */
static int rename_dir_aware(hyd *h, journal *j, int ofd, const char *oname, int nfd,
                            const char *nname, unsigned flags)
{
    struct stat st;
    bool fix = !h->is_root && fstatat(ofd, oname, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
               S_ISDIR(st.st_mode) && !(st.st_mode & S_IWUSR);
    if (fix && fchmodat(ofd, oname, (st.st_mode & 07777) | S_IWUSR, 0) < 0)
        return -1;
    int r = do_rename(j, ofd, oname, nfd, nname, flags);
    int e = errno;
    /* Restore the mode wherever the folder now is. */
    if (fix)
        (void)fchmodat(r == 0 ? nfd : ofd, r == 0 ? nname : oname, st.st_mode & 07777, 0);
    errno = e;
    return r;
}

static int commit_one(hyd *h, journal *j, int wdir, int sdir, const char *name, const char *path,
                      unsigned depth, sp_error **err)
{
    struct stat sst, wst;
    if (fstatat(sdir, name, &sst, AT_SYMLINK_NOFOLLOW) < 0)
        return sp_err_errno(err, errno, "stat staged", path);
    h->prog.files++;
    hyd_progress(h, SP_HYDRATE_COMMIT, path);
    if (fstatat(wdir, name, &wst, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno != ENOENT)
            return sp_err_errno(err, errno, "stat", path);
        if (rename_dir_aware(h, j, sdir, name, wdir, name, RENAME_NOREPLACE) < 0)
            return sp_err_errno(err, errno, "move into the workspace", path);
        journal_add(j, J_MOVED, path, NULL);
        return 0;
    }
    if (S_ISDIR(sst.st_mode) && S_ISDIR(wst.st_mode)) {
        cleanup_close int wfd = openat(wdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (wfd >= 0) {
            if (!h->is_root && !(sst.st_mode & S_IWUSR))
                (void)fchmodat(sdir, name, (sst.st_mode & 07777) | S_IRWXU, 0);
            cleanup_close int sfd =
                openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sfd < 0)
                return sp_err_errno(err, errno, "open staged", path);
            return hyd_commit_dir(h, j, wfd, sfd, path, depth + 1, err);
        }
        if (errno != ELOOP && errno != ENOTDIR)
            return sp_err_errno(err, errno, "open", path);
        /* Swapped for a symlink meanwhile: replace it like any non-folder. */
    }
    pent *pe = hyd_hmap_get(&h->map, &h->g, path);
    hyd_add_override(h, path, pe ? pe->mount : 0, -1);
    if (rename_dir_aware(h, j, sdir, name, wdir, name, RENAME_EXCHANGE) == 0) {
        journal_add(j, J_EXCHANGED, path, NULL);
        return 0;
    }
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
        return sp_err_errno(err, errno, "replace in the workspace", path);
    /* No RENAME_EXCHANGE here: move the old entry aside, then the new one in. */
    char tname[32];
    snprintf(tname, sizeof(tname), "%zu", j->n);
    if (rename_dir_aware(h, j, wdir, name, h->trashfd, tname, RENAME_NOREPLACE) < 0)
        return sp_err_errno(err, errno, "move aside", path);
    journal_add(j, J_ASIDE, path, tname);
    if (rename_dir_aware(h, j, sdir, name, wdir, name, RENAME_NOREPLACE) < 0)
        return sp_err_errno(err, errno, "move into the workspace", path);
    return 0;
}

int hyd_commit_dir(hyd *h, journal *j, int wdir, int sdir, const char *rel, unsigned depth,
                   sp_error **err)
{
    if (depth > 4 * MAX_DEPTH)
        return sp_err_set(err, SP_ETOOBIG, 0, "too deep: %s", rel);
    sp_dirnames nm = SP_DIRNAMES_INIT;
    int rc = 0;
    if (sp_dir_read(&nm, sdir, SP_DIR_UNSORTED, 0) < 0)
        rc = sp_err_errno(err, errno, "read staged folder", *rel ? rel : ".");
    for (size_t i = 0; i < nm.n && rc == 0; i++) {
        cleanup_free char *path = hyd_join(rel, sp_dirnames_name(&nm, i));
        rc = commit_one(h, j, wdir, sdir, sp_dirnames_name(&nm, i), path, depth, err);
    }
    sp_dirnames_dispose(&nm);
    return rc;
}

/* Undo the commit, newest first. Returns false when something could not be
 * put back. */
bool hyd_rollback(hyd *h, journal *j)
{
    bool ok = true;
    for (size_t i = j->n; i-- > 0;) {
        jent *x = &j->v[i];
        cleanup_free char *dir = hyd_dir_name(x->path);
        const char *name = hyd_base_name(x->path);
        cleanup_close int wfd = hyd_open_beneath(h->wsfd, dir, O_PATH | O_DIRECTORY);
        cleanup_close int sfd = hyd_open_beneath(h->treefd, dir, O_PATH | O_DIRECTORY);
        if (wfd < 0 || sfd < 0) {
            ok = false;
            continue;
        }
        int r = 0;
        switch (x->kind) {
        case J_MOVED:
            r = renameat2(wfd, name, sfd, name, RENAME_NOREPLACE);
            break;
        case J_EXCHANGED:
            r = renameat2(wfd, name, sfd, name, RENAME_EXCHANGE);
            break;
        case J_ASIDE:
            /* The new entry may not have made it in. */
            if (renameat2(wfd, name, sfd, name, RENAME_NOREPLACE) < 0 && errno != ENOENT) {
                r = -1;
                break;
            }
            r = renameat2(h->trashfd, x->trash, wfd, name, RENAME_NOREPLACE);
            break;
        }
        if (r < 0)
            ok = false;
    }
    return ok;
}

/* ------------------------------------------------------------ staging -- */

/* Make a fresh, private folder in pfd; 0 or -1 with errno. */
static int mkstage(hyd *h, int pfd)
{
    for (int tries = 0; tries < 16; tries++) {
        unsigned char rnd[6];
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
            return -1;
        free(h->stage_name);
        h->stage_name = sp_xasprintf(".sandpod-hydrate-%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1],
                                     rnd[2], rnd[3], rnd[4], rnd[5]);
        if (mkdirat(pfd, h->stage_name, 0700) == 0)
            return 0;
        if (errno != EEXIST)
            break;
    }
    free(h->stage_name);
    h->stage_name = NULL;
    return -1;
}

/* The staging folder goes in the workspace's parent, so that renames move
 * entries in; when that parent is another filesystem (the workspace is a
 * mount point) or refuses us, it goes hidden inside the workspace. */
int hyd_stage_create(hyd *h, const char *workspace, sp_error **err)
{
    struct stat wst, pst;
    if (fstat(h->wsfd, &wst) < 0)
        return sp_err_errno(err, errno, "stat", workspace);
    h->stage_parent = openat(h->wsfd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (h->stage_parent >= 0) {
        bool usable = fstat(h->stage_parent, &pst) == 0 && pst.st_dev == wst.st_dev &&
                      pst.st_ino != wst.st_ino;
        if (!usable || mkstage(h, h->stage_parent) < 0) {
            close(h->stage_parent);
            h->stage_parent = -1;
        }
    }
    if (h->stage_parent < 0) {
        h->stage_parent = fcntl(h->wsfd, F_DUPFD_CLOEXEC, 0);
        if (h->stage_parent < 0)
            return sp_err_errno(err, errno, "open", workspace);
        if (mkstage(h, h->stage_parent) < 0)
            return sp_err_errno(err, errno, "create staging folder in", workspace);
    }
    h->stagefd =
        openat(h->stage_parent, h->stage_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (h->stagefd < 0)
        return sp_err_errno(err, errno, "open staging folder", h->stage_name);
    if (mkdirat(h->stagefd, "tree", 0700) < 0 || mkdirat(h->stagefd, "trash", 0700) < 0)
        return sp_err_errno(err, errno, "create staging folder", h->stage_name);
    h->treefd = openat(h->stagefd, "tree", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    h->trashfd = openat(h->stagefd, "trash", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (h->treefd < 0 || h->trashfd < 0)
        return sp_err_errno(err, errno, "open staging folder", h->stage_name);
    return 0;
}

void hyd_stage_remove(hyd *h)
{
    if (h->stage_parent >= 0 && h->stage_name)
        (void)sp_tree_remove(h->stage_parent, h->stage_name, 0, NULL);
}
