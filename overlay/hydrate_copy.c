/* Hydration, phase 2: create the plan in the staging folder (FICLONE,
 * else copy_file_range, else read/write; data extents only for sparse
 * files). */
#include "hydrate_internal.h"

/* --------------------------------------------------------------- copy -- */

static int copy_range(hyd *h, int sfd, int dfd, uint64_t off, uint64_t len, const char *src_disp,
                      const char *dst_disp, sp_error **err)
{
    loff_t in = (loff_t)off, out = (loff_t)off;
    bool cfr = !h->no_cfr;
    while (len > 0) {
        if (cfr) {
            size_t want = len > CFR_CHUNK ? CFR_CHUNK : (size_t)len;
            ssize_t n = copy_file_range(sfd, &in, dfd, &out, want, 0);
            if (n > 0) {
                len -= (uint64_t)n;
                continue;
            }
            if (n == 0)
                return sp_err_set(err, SP_ERROR, 0, "file shrank while hydrating: %s", src_disp);
            if (errno == EINTR)
                continue;
            if (errno == ENOSYS || errno == EOPNOTSUPP || errno == EXDEV)
                h->no_cfr = true;
            if (errno == ENOSYS || errno == EOPNOTSUPP || errno == EXDEV || errno == EINVAL ||
                errno == EBADF || errno == ETXTBSY) {
                cfr = false;
                continue;
            }
            if (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)
                return sp_err_errno(err, errno, "write", dst_disp);
            return sp_err_errno(err, errno, "read", src_disp);
        }
        if (!h->buf)
            h->buf = sp_xmalloc(RW_CHUNK);
        size_t want = len > RW_CHUNK ? RW_CHUNK : (size_t)len;
        ssize_t n = pread(sfd, h->buf, want, in);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return sp_err_errno(err, errno, "read", src_disp);
        }
        if (n == 0)
            return sp_err_set(err, SP_ERROR, 0, "file shrank while hydrating: %s", src_disp);
        for (ssize_t w = 0; w < n;) {
            ssize_t k = pwrite(dfd, h->buf + w, (size_t)(n - w), out);
            if (k < 0) {
                if (errno == EINTR)
                    continue;
                return sp_err_errno(err, errno, "write", dst_disp);
            }
            w += k;
            out += k;
        }
        in += n;
        len -= (uint64_t)n;
    }
    return 0;
}

/* Copy the content of sfd (a regular file of `size` bytes) into the empty
 * file dfd: a reflink when the filesystem can, else data extents only for a
 * sparse file, else the whole range. */
static int copy_content(hyd *h, int sfd, int dfd, const struct stat *st, const char *src_disp,
                        const char *dst_disp, sp_error **err)
{
    uint64_t size = (uint64_t)st->st_size;
    if (size == 0)
        return 0;
    if (!h->no_reflink) {
        if (ioctl(dfd, FICLONE, sfd) == 0) {
            h->reflinked++;
            return 0;
        }
        if (errno == EOPNOTSUPP || errno == ENOTTY || errno == ENOSYS || errno == EXDEV ||
            errno == EINVAL)
            h->no_reflink = true;
    }
    if ((uint64_t)st->st_blocks * 512 < size) {
        off_t off = 0;
        bool seek_ok = true;
        while ((uint64_t)off < size) {
            off_t data = lseek(sfd, off, SEEK_DATA);
            if (data < 0) {
                if (errno == ENXIO)
                    break; /* only a hole is left */
                seek_ok = false;
                break;
            }
            off_t hole = lseek(sfd, data, SEEK_HOLE);
            if (hole < 0) {
                seek_ok = false;
                break;
            }
            if ((uint64_t)hole > size)
                hole = (off_t)size;
            if (hole > data) {
                int rc = copy_range(h, sfd, dfd, (uint64_t)data, (uint64_t)(hole - data), src_disp,
                                    dst_disp, err);
                if (rc < 0)
                    return rc;
            }
            off = hole;
        }
        if (seek_ok) {
            if (ftruncate(dfd, (off_t)size) < 0)
                return sp_err_errno(err, errno, "truncate", dst_disp);
            h->sparse++;
            return 0;
        }
        /* No SEEK_DATA here: copy everything, holes as zeros. */
        if (ftruncate(dfd, 0) < 0)
            return sp_err_errno(err, errno, "truncate", dst_disp);
    }
    return copy_range(h, sfd, dfd, 0, size, src_disp, dst_disp, err);
}

/* The bytes to write for a file whose copy must lose its credentials
 * (e->scrub), read once from sfd so that what was checked is what is
 * written: 0 with *body holding the rewrite (reported) or the file as it
 * was; 1 when the file is left out instead (reported; e->dead is set);
 * or an error. */
static int scrub_file(hyd *h, pent *e, int sfd, const struct stat *st, sp_buf *body,
                      const char *sdisp, sp_error **err)
{
    const char *why = NULL;
    sp_buf raw = SP_BUF_INIT;
    sp_buf_add(&raw, "", 0);
    int rc = 0;
    if ((uint64_t)st->st_size > SP_SECRET_MAX_SCRUB) {
        why = "too large to check for credentials";
    } else if (sp_read_all(sfd, &raw, SP_SECRET_MAX_SCRUB) < 0) {
        if (errno != EFBIG) {
            rc = sp_err_errno(err, errno, "read", sdisp);
            goto done;
        }
        why = "too large to check for credentials";
    }
    if (!why) {
        int v = sp_secret_scrub(body, e->scrub, raw.data, raw.len);
        if (v < 0)
            why = sp_secret_unparsed_detail(e->scrub);
        else if (v == 1)
            hyd_add_rewrite(h, e->dst, e->mount, sp_secret_rewrite_detail(e->scrub));
        else
            sp_buf_add(body, raw.data, raw.len);
    }
    if (why) {
        hyd_add_skip(h, e->dst, e->mount, SP_HYDRATE_SKIP_SECRET, why);
        e->dead = true;
        rc = 1;
    }
done:
    sp_buf_dispose(&raw);
    return rc;
}

static int copy_file_from(hyd *h, pent *e, int sfd, const struct stat *st, const sp_buf *body,
                          int dpfd, const char *sdisp, sp_error **err);

static int copy_file(hyd *h, pent *e, int spfd, int dpfd, sp_error **err)
{
    const char *sname = hyd_base_name(e->src);
    /* O_NONBLOCK: a fifo swapped in since the scan must not hang us. */
    cleanup_close int sfd = openat(spfd, sname, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    cleanup_free char *sdisp = hyd_host_display(h, e->root, e->src);
    if (sfd < 0) {
        if (errno == ENOENT)
            return sp_err_set(err, SP_ENOTFOUND, ENOENT, "file vanished while hydrating: %s",
                              sdisp);
        return sp_err_errno(err, errno, "open", sdisp);
    }
    struct stat st;
    if (fstat(sfd, &st) < 0)
        return sp_err_errno(err, errno, "stat", sdisp);
    if (!S_ISREG(st.st_mode))
        return sp_err_set(err, SP_ERROR, 0, "file changed type while hydrating: %s", sdisp);
    if (e->scrub == SP_SECRET_NONE)
        return copy_file_from(h, e, sfd, &st, NULL, dpfd, sdisp, err);
    sp_buf body = SP_BUF_INIT;
    sp_buf_add(&body, "", 0);
    int rc = scrub_file(h, e, sfd, &st, &body, sdisp, err);
    if (rc == 0)
        rc = copy_file_from(h, e, sfd, &st, &body, dpfd, sdisp, err);
    sp_buf_dispose(&body);
    return rc < 0 ? rc : 0;
}

/* Create e's copy in dpfd from sfd (stat st), or from `body` when given. */
static int copy_file_from(hyd *h, pent *e, int sfd, const struct stat *st_in, const sp_buf *body,
                          int dpfd, const char *sdisp, sp_error **err)
{
    const char *dname = hyd_base_name(e->dst);
    struct stat st = *st_in;
    /* Created with its final permission bits (less the umask; never the
     * set-id bits, which chown would clear): then, as with cp -a, chown
     * and chmod are only needed when the result differs, and each one
     * saved is an inode update per file. */
    cleanup_close int dfd = openat(
        dpfd, dname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, st.st_mode & 0777);
    struct stat dst;
    if (dfd < 0 || fstat(dfd, &dst) < 0)
        return sp_err_errno(err, errno, "create", e->dst);
    if (body) {
        if (sp_write_all(dfd, body->data, body->len) < 0)
            return sp_err_errno(err, errno, "write", e->dst);
        e->size = body->len;
    } else {
        int rc = copy_content(h, sfd, dfd, &st, sdisp, e->dst, err);
        if (rc < 0)
            return rc;
        /* What was copied is what the file held when opened: a file that
         * grew since the scan still counts against the cap. */
        e->size = (uint64_t)st.st_size;
    }
    uint64_t cap = h->mounts[e->mount].max_bytes;
    h->copied[e->mount] += e->size;
    if (cap && h->copied[e->mount] > cap) {
        char c[64];
        hyd_fmt_size_exact(c, sizeof(c), cap);
        return sp_err_set(err, SP_ETOOBIG, EFBIG,
                          "mount %s: files grew past its max-bytes of %s while hydrating, at %s",
                          h->roots[h->mount_root[e->mount]].path, c, sdisp);
    }
    if (h->is_root && (dst.st_uid != st.st_uid || dst.st_gid != st.st_gid) &&
        fchown(dfd, st.st_uid, st.st_gid) < 0)
        return sp_err_errno(err, errno, "chown", e->dst);
    if ((dst.st_mode & 07777) != (st.st_mode & 07777) && fchmod(dfd, st.st_mode & 07777) < 0)
        return sp_err_errno(err, errno, "chmod", e->dst);
    struct timespec ts[2] = {st.st_atim, st.st_mtim};
    if (futimens(dfd, ts) < 0)
        return sp_err_errno(err, errno, "set times", e->dst);
    h->prog.bytes += e->size;
    return 0;
}

int hyd_copy_all(hyd *h, sp_error **err)
{
    dstack src = {NULL, 0, 0, -1}, dst = {NULL, 0, 0, 0};
    int rc = 0;
    h->prog.files = 0;
    h->prog.bytes = 0;
    for (size_t i = 0; i < h->g.n && rc == 0; i++) {
        pent *e = &h->g.v[i];
        if (e->dead)
            continue;
        cleanup_free char *ddir = hyd_dir_name(e->dst);
        int dpfd = hyd_dstack_get(&dst, h->treefd, 0, ddir);
        if (dpfd < 0) {
            rc = sp_err_errno(err, errno, "open staging folder", ddir);
            break;
        }
        const char *dname = hyd_base_name(e->dst);
        switch (e->type) {
        case SP_FS_DIR:
            if (mkdirat(dpfd, dname, 0700) < 0)
                rc = sp_err_errno(err, errno, "mkdir", e->dst);
            break;
        case SP_FS_SYMLINK: {
            if (symlinkat(e->link, dpfd, dname) < 0) {
                rc = sp_err_errno(err, errno, "symlink", e->dst);
                break;
            }
            if (h->is_root && fchownat(dpfd, dname, e->uid, e->gid, AT_SYMLINK_NOFOLLOW) < 0) {
                rc = sp_err_errno(err, errno, "chown", e->dst);
                break;
            }
            struct timespec ts[2] = {e->atime, e->mtime};
            if (utimensat(dpfd, dname, ts, AT_SYMLINK_NOFOLLOW) < 0)
                rc = sp_err_errno(err, errno, "set times", e->dst);
            break;
        }
        case SP_FS_FILE: {
            cleanup_free char *sdir = hyd_dir_name(e->src);
            int spfd = hyd_dstack_get(&src, h->roots[e->root].fd, e->root, sdir);
            if (spfd < 0) {
                cleanup_free char *disp = hyd_host_display(h, e->root, sdir);
                if (errno == ENOENT)
                    rc = sp_err_set(err, SP_ENOTFOUND, ENOENT,
                                    "folder vanished while hydrating: %s", disp);
                else
                    rc = sp_err_errno(err, errno, "open folder", disp);
                break;
            }
            rc = copy_file(h, e, spfd, dpfd, err);
            if (rc == 0) {
                h->prog.files++;
                hyd_progress(h, SP_HYDRATE_COPY, e->dst);
                rc = hyd_stopped(h, err);
            }
            break;
        }
        default:
            break;
        }
    }
    hyd_dstack_dispose(&src);

    /* Folder metadata last, deepest first: filling a folder changes its
     * mtime, and a read-only folder could not be filled. */
    for (size_t i = h->g.n; i-- > 0 && rc == 0;) {
        pent *e = &h->g.v[i];
        if (e->dead || e->type != SP_FS_DIR)
            continue;
        cleanup_free char *ddir = hyd_dir_name(e->dst);
        int dpfd = hyd_dstack_get(&dst, h->treefd, 0, ddir);
        const char *dname = hyd_base_name(e->dst);
        if (dpfd < 0) {
            rc = sp_err_errno(err, errno, "open staging folder", ddir);
            break;
        }
        if (e->implied) {
            if (fchmodat(dpfd, dname, 0755, 0) < 0)
                rc = sp_err_errno(err, errno, "chmod", e->dst);
            continue;
        }
        if (h->is_root && fchownat(dpfd, dname, e->uid, e->gid, AT_SYMLINK_NOFOLLOW) < 0) {
            rc = sp_err_errno(err, errno, "chown", e->dst);
            break;
        }
        if (fchmodat(dpfd, dname, e->mode & 07777, 0) < 0) {
            rc = sp_err_errno(err, errno, "chmod", e->dst);
            break;
        }
        struct timespec ts[2] = {e->atime, e->mtime};
        if (utimensat(dpfd, dname, ts, AT_SYMLINK_NOFOLLOW) < 0)
            rc = sp_err_errno(err, errno, "set times", e->dst);
    }
    hyd_dstack_dispose(&dst);
    return rc;
}
