/* Hydration: copy host folders ("mounts") into a workspace, all or nothing.
 *
 * Three phases:
 *   1. plan   - resolve every mount against the allowed roots, walk it with
 *               getdents64 + fstatat(AT_SYMLINK_NOFOLLOW) on fds we hold,
 *               apply the globs (an excluded folder is never opened), check
 *               the byte caps, and merge the mounts into one plan keyed by
 *               destination path (later mount wins);
 *   2. copy   - create the plan in a private staging folder beside the
 *               workspace: FICLONE, else copy_file_range, else read/write,
 *               data extents only for sparse files; then folder metadata,
 *               deepest first;
 *   3. commit - move the staged entries into the workspace with renames
 *               (RENAME_EXCHANGE over existing entries), journalled so a
 *               failure part way is rolled back.
 * Any failure before the commit removes the staging folder and leaves the
 * workspace untouched.
 *
 * Host side, the contract is: no content is read from a file that does not
 * resolve inside an allowed root. Mount roots and followed symlink targets
 * are resolved with realpath() (the trusted caller chose the roots; the
 * workspace is not involved) and then opened from an allowed root's fd one
 * component at a time with O_NOFOLLOW, so the path that was checked is the
 * path that is opened, whatever symlinks are swapped in meanwhile. Every
 * other name is opened relative to its folder's fd with O_NOFOLLOW.
 *
 * Workspace side, every operation is an *at() call on a folder fd opened
 * with O_NOFOLLOW: symlinks in the workspace (the container may have planted
 * them) are replaced, never followed. */
#include "hydrate_internal.h"

/* ------------------------------------------------------------- result -- */

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const sp_hydrate_entry *)a)->path, ((const sp_hydrate_entry *)b)->path);
}

static int cmp_skip(const void *a, const void *b)
{
    return strcmp(((const sp_hydrate_skip *)a)->path, ((const sp_hydrate_skip *)b)->path);
}

static int cmp_rewrite(const void *a, const void *b)
{
    return strcmp(((const sp_hydrate_rewrite *)a)->path, ((const sp_hydrate_rewrite *)b)->path);
}

static int cmp_ovr(const void *a, const void *b)
{
    const sp_hydrate_override *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    if (c)
        return c;
    return x->previous < y->previous ? -1 : x->previous > y->previous;
}

static sp_hydrate_result *build_result(hyd *h)
{
    sp_hydrate_result *r = sp_xcalloc(1, sizeof(*r));
    r->n_mounts = h->nmounts;
    r->mounts = sp_xcalloc(h->nmounts, sizeof(sp_hydrate_mount_stats));
    for (size_t i = 0; i < h->nmounts; i++) {
        r->mounts[i].host_path = sp_xstrdup(h->roots[h->mount_root[i]].path);
        r->mounts[i].mount_path = sp_xstrdup(*h->mount_dst[i] ? h->mount_dst[i] : ".");
    }
    size_t live = 0;
    for (size_t i = 0; i < h->g.n; i++)
        live += !h->g.v[i].dead;
    r->entries = sp_xcalloc(live, sizeof(sp_hydrate_entry));
    for (size_t i = 0; i < h->g.n; i++) {
        pent *e = &h->g.v[i];
        if (e->dead)
            continue;
        sp_hydrate_entry *x = &r->entries[r->n_entries++];
        x->path = sp_xstrdup(e->dst);
        x->type = e->type;
        x->size = e->size;
        x->mount = e->mount;
        sp_hydrate_mount_stats *ms = &r->mounts[e->mount];
        switch (e->type) {
        case SP_FS_FILE:
            r->files++;
            r->bytes += e->size;
            ms->files++;
            ms->bytes += e->size;
            if (e->nlink > 1)
                r->hardlinks++;
            break;
        case SP_FS_DIR:
            r->dirs++;
            ms->dirs++;
            break;
        case SP_FS_SYMLINK:
            r->symlinks++;
            ms->symlinks++;
            break;
        default:
            break;
        }
    }
    if (r->n_entries > 1)
        qsort(r->entries, r->n_entries, sizeof(sp_hydrate_entry), cmp_entry);
    r->skipped = steal_pointer(&h->skips.v);
    r->n_skipped = h->skips.n;
    h->skips.n = 0;
    if (r->n_skipped > 1)
        qsort(r->skipped, r->n_skipped, sizeof(sp_hydrate_skip), cmp_skip);
    r->rewritten = steal_pointer(&h->rewrites.v);
    r->n_rewritten = h->rewrites.n;
    h->rewrites.n = 0;
    if (r->n_rewritten > 1)
        qsort(r->rewritten, r->n_rewritten, sizeof(sp_hydrate_rewrite), cmp_rewrite);
    r->overridden = steal_pointer(&h->ovr.v);
    r->n_overridden = h->ovr.n;
    h->ovr.n = 0;
    if (r->n_overridden > 1)
        qsort(r->overridden, r->n_overridden, sizeof(sp_hydrate_override), cmp_ovr);
    r->excluded = h->excluded;
    r->reflinked = h->reflinked;
    r->sparse = h->sparse;
    return r;
}

void sp_hydrate_result_free(sp_hydrate_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_entries; i++)
        free(r->entries[i].path);
    for (size_t i = 0; i < r->n_skipped; i++) {
        free(r->skipped[i].path);
        free(r->skipped[i].detail);
    }
    for (size_t i = 0; i < r->n_rewritten; i++) {
        free(r->rewritten[i].path);
        free(r->rewritten[i].detail);
    }
    for (size_t i = 0; i < r->n_overridden; i++)
        free(r->overridden[i].path);
    for (size_t i = 0; i < r->n_mounts; i++) {
        free(r->mounts[i].host_path);
        free(r->mounts[i].mount_path);
    }
    free(r->entries);
    free(r->skipped);
    free(r->rewritten);
    free(r->overridden);
    free(r->mounts);
    free(r);
}

const char *sp_hydrate_skip_name(sp_hydrate_skip_reason r)
{
    switch (r) {
    case SP_HYDRATE_SKIP_SPECIAL:
        return "special";
    case SP_HYDRATE_SKIP_OUTSIDE:
        return "outside";
    case SP_HYDRATE_SKIP_DANGLING:
        return "dangling";
    case SP_HYDRATE_SKIP_LOOP:
        return "loop";
    case SP_HYDRATE_SKIP_TOO_DEEP:
        return "too_deep";
    case SP_HYDRATE_SKIP_SECRET:
        return "secret";
    default:
        return "unknown";
    }
}

/* -------------------------------------------------------------- roots -- */

static size_t add_root(hyd *h, char *path, int fd)
{
    h->roots = sp_xrealloc(h->roots, (h->nroots + 1) * sizeof(hroot));
    h->roots[h->nroots].path = path;
    h->roots[h->nroots].fd = fd;
    return h->nroots++;
}

/* Resolve the allowed roots and the mount sources and open them. */
static int resolve_roots(hyd *h, const sp_mount *mounts, size_t n, sp_error **err)
{
    const char *const *allowed = h->opts ? h->opts->allowed_roots : NULL;
    for (size_t i = 0; allowed && allowed[i]; i++) {
        char buf[PATH_MAX];
        if (!realpath(allowed[i], buf)) {
            if (errno == ENOENT)
                return sp_err_set(err, SP_ENOTFOUND, ENOENT, "allowed root not found: %s",
                                  allowed[i]);
            return sp_err_errno(err, errno, "allowed root", allowed[i]);
        }
        int fd = open(buf, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            if (errno == ENOTDIR)
                return sp_err_set(err, SP_EINVAL, ENOTDIR, "allowed root is not a folder: %s",
                                  allowed[i]);
            return sp_err_errno(err, errno, "allowed root", allowed[i]);
        }
        add_root(h, sp_xstrdup(buf), fd);
    }
    h->n_allowed = h->nroots;

    h->mount_root = sp_xcalloc(n, sizeof(size_t));
    h->copied = sp_xcalloc(n, sizeof(uint64_t));
    h->mounts = mounts;
    h->mount_dst = sp_xcalloc(n, sizeof(char *));
    h->nmounts = n;
    for (size_t i = 0; i < n; i++) {
        const sp_mount *m = &mounts[i];
        if (!m->host_path || !*m->host_path)
            return sp_err_set(err, SP_EINVAL, 0, "mount %zu has no host path", i + 1);
        const char *mp = m->mount_path ? m->mount_path : "";
        char *norm = NULL;
        int rc = sp_fs_path_normalize(&norm, mp, strlen(mp), err);
        if (rc < 0)
            return sp_err_wrap(err, rc, "mount %s: dst", m->host_path);
        if (strcmp(norm, ".") == 0)
            norm[0] = '\0';
        h->mount_dst[i] = norm;

        char buf[PATH_MAX];
        if (!realpath(m->host_path, buf)) {
            if (errno == ENOENT)
                return sp_err_set(err, SP_ENOTFOUND, ENOENT, "mount source not found: %s",
                                  m->host_path);
            return sp_err_errno(err, errno, "mount source", m->host_path);
        }
        int fd;
        if (h->n_allowed) {
            size_t ai = SIZE_MAX;
            for (size_t k = 0; k < h->n_allowed && ai == SIZE_MAX; k++)
                if (hyd_path_within(buf, h->roots[k].path))
                    ai = k;
            if (ai == SIZE_MAX) {
                if (strcmp(buf, m->host_path) == 0)
                    return sp_err_set(err, SP_EESCAPE, EXDEV,
                                      "mount source is outside the allowed roots: %s",
                                      m->host_path);
                return sp_err_set(err, SP_EESCAPE, EXDEV,
                                  "mount source is outside the allowed roots: %s (resolves to %s)",
                                  m->host_path, buf);
            }
            fd = hyd_open_beneath(h->roots[ai].fd, hyd_path_below(buf, h->roots[ai].path),
                                  O_RDONLY | O_DIRECTORY);
        } else {
            fd = open(buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (fd < 0) {
            if (errno == ENOTDIR)
                return sp_err_set(err, SP_EINVAL, ENOTDIR, "mount source is not a folder: %s",
                                  m->host_path);
            if (errno == ELOOP)
                return sp_err_set(err, SP_EESCAPE, EXDEV,
                                  "mount source changed while resolving: %s", m->host_path);
            return sp_err_errno(err, errno, "mount source", m->host_path);
        }
        h->mount_root[i] = add_root(h, sp_xstrdup(buf), fd);
    }
    return 0;
}

static void hyd_dispose(hyd *h)
{
    for (size_t i = 0; i < h->nroots; i++) {
        free(h->roots[i].path);
        if (h->roots[i].fd >= 0)
            close(h->roots[i].fd);
    }
    free(h->roots);
    for (size_t i = 0; i < h->nmounts; i++)
        free(h->mount_dst ? h->mount_dst[i] : NULL);
    free(h->mount_dst);
    free(h->mount_root);
    free(h->copied);
    hyd_pvec_dispose(&h->g);
    free(h->map.slots);
    for (size_t i = 0; i < h->skips.n; i++) {
        free(h->skips.v[i].path);
        free(h->skips.v[i].detail);
    }
    free(h->skips.v);
    for (size_t i = 0; i < h->rewrites.n; i++) {
        free(h->rewrites.v[i].path);
        free(h->rewrites.v[i].detail);
    }
    free(h->rewrites.v);
    for (size_t i = 0; i < h->ovr.n; i++)
        free(h->ovr.v[i].path);
    free(h->ovr.v);
    free(h->buf);
    free(h->stage_name);
    int fds[] = {h->wsfd, h->stage_parent, h->stagefd, h->treefd, h->trashfd};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

int sp_hydrate_check(const sp_mount *mounts, size_t n, const sp_hydrate_opts *opts, sp_error **err)
{
    if (SP_OPTS_CHECK(opts, 1, SP_HYDRATE_OPTS_VERSION, "sp_hydrate_opts", err) < 0)
        return SP_EINVAL;
    if (n && !mounts)
        return sp_err_set(err, SP_EINVAL, 0, "hydrate: mounts missing");
    hyd h;
    memset(&h, 0, sizeof(h));
    h.opts = opts;
    h.wsfd = h.stage_parent = h.stagefd = h.treefd = h.trashfd = -1;
    int rc = resolve_roots(&h, mounts, n, err);
    hyd_dispose(&h);
    return rc;
}

int sp_hydrate(sp_hydrate_result **out, const char *workspace, const sp_mount *mounts, size_t n,
               const sp_hydrate_opts *opts, sp_error **err)
{
    if (out)
        *out = NULL;
    int64_t t0 = sp_now_ms();
    hyd h;
    memset(&h, 0, sizeof(h));
    h.opts = opts;
    h.wsfd = h.stage_parent = h.stagefd = h.treefd = h.trashfd = -1;
    h.is_root = geteuid() == 0;
    journal j = {NULL, 0, 0, 0};
    int rc = 0;

    if (SP_OPTS_CHECK(opts, 1, SP_HYDRATE_OPTS_VERSION, "sp_hydrate_opts", err) < 0) {
        rc = SP_EINVAL;
        goto done;
    }
    if (!workspace || (n && !mounts)) {
        rc = sp_err_set(err, SP_EINVAL, 0, "hydrate: workspace or mounts missing");
        goto done;
    }
    h.wsfd = open(workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (h.wsfd < 0) {
        if (errno == ENOENT)
            rc = sp_err_set(err, SP_ENOTFOUND, ENOENT, "workspace not found: %s", workspace);
        else
            rc = sp_err_errno(err, errno, "workspace", workspace);
        goto done;
    }
    struct stat wst;
    if (fstat(h.wsfd, &wst) < 0) {
        rc = sp_err_errno(err, errno, "stat", workspace);
        goto done;
    }
    h.ws_dev = wst.st_dev;
    h.ws_ino = wst.st_ino;
    rc = resolve_roots(&h, mounts, n, err);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = hyd_plan_mount(&h, i, &mounts[i], err);
    if (rc < 0)
        goto done;

    h.prog.total_files = 0;
    h.prog.total_bytes = 0;
    for (size_t i = 0; i < h.g.n; i++) {
        if (!h.g.v[i].dead && h.g.v[i].type == SP_FS_FILE) {
            h.prog.total_files++;
            h.prog.total_bytes += h.g.v[i].size;
        }
    }
    rc = hyd_stage_create(&h, workspace, err);
    if (rc == 0)
        rc = hyd_copy_all(&h, err);
    if (rc < 0)
        goto done;

    h.prog.files = 0;
    rc = hyd_commit_dir(&h, &j, h.wsfd, h.treefd, "", 0, err);
    if (rc < 0) {
        if (!hyd_rollback(&h, &j))
            sp_err_wrap(err, rc, "the workspace could not be fully restored after an error");
        goto done;
    }
    if (out) {
        *out = build_result(&h);
        (*out)->elapsed_ms = sp_now_ms() - t0;
    }

done:
    hyd_stage_remove(&h);
    hyd_journal_dispose(&j);
    hyd_dispose(&h);
    return rc;
}
