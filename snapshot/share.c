/* Sharing a snapshot between two stores (a fork): the source store's
 * objects are hard-linked into the destination's, then the snapshot's ref
 * is written there.
 *
 * Why hard links and not git alternates: with alternates the fork would
 * read the origin's objects in place, and the origin's removal (or a gc
 * after a snapshot was deleted there) would take objects the fork still
 * needs. Objects are immutable files (written to a temporary and renamed
 * into place, never changed after), so a second name for each costs one
 * link() and keeps it alive as long as either store needs it; a gc on one
 * side only removes that side's name. Where linking is refused (another
 * filesystem, a store on a read-only one), the file is copied (reflinked
 * where the filesystem can). */
#include <fcntl.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "dir.h"
#include "store_internal.h"

static int copy_file_at(int sdir, int ddir, const char *name, sp_error **err)
{
    cleanup_close int in = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in < 0)
        return sp_err_errno(err, errno, "open", name);
    cleanup_free char *tmp = sp_xasprintf("tmp_obj_share_%s", name);
    unlinkat(ddir, tmp, 0);
    cleanup_close int out =
        openat(ddir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (out < 0)
        return sp_err_errno(err, errno, "create", tmp);
    int r = 0;
    if (ioctl(out, FICLONE, in) < 0) {
        char buf[65536];
        for (;;) {
            ssize_t n = read(in, buf, sizeof(buf));
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                r = sp_err_errno(err, errno, "read", name);
                break;
            }
            if (n == 0)
                break;
            if (sp_write_all(out, buf, (size_t)n) < 0) {
                r = sp_err_errno(err, errno, "write", tmp);
                break;
            }
        }
    }
    if (r == 0 && renameat(ddir, tmp, ddir, name) < 0)
        r = sp_err_errno(err, errno, "rename", tmp);
    if (r < 0)
        unlinkat(ddir, tmp, 0);
    return r;
}

/* Give every finished object file of folder `sub` of the source's objects/
 * a name in the destination's (a temporary being written is skipped). */
static int share_dir(int sobj, int dobj, const char *sub, uint64_t *count, sp_error **err)
{
    cleanup_close int sd = openat(sobj, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sd < 0)
        return errno == ENOENT ? 0 : sp_err_errno(err, errno, "open", sub);
    if (mkdirat(dobj, sub, 0755) < 0 && errno != EEXIST)
        return sp_err_errno(err, errno, "mkdir", sub);
    cleanup_close int dd = openat(dobj, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dd < 0)
        return sp_err_errno(err, errno, "open", sub);
    sp_dirnames names = SP_DIRNAMES_INIT;
    if (sp_dir_read(&names, sd, SP_DIR_UNSORTED, 0) < 0)
        return sp_err_errno(err, errno, "read", sub);
    int r = 0;
    bool copy = false;
    for (size_t i = 0; r == 0 && i < names.n; i++) {
        const char *name = sp_dirnames_name(&names, i);
        if (name[0] == '.' || strncmp(name, "tmp_", 4) == 0)
            continue;
        struct stat st;
        if (fstatat(sd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
            continue;
        if (!copy) {
            if (linkat(sd, name, dd, name, 0) == 0) {
                (*count)++;
                continue;
            }
            if (errno == EEXIST)
                continue;
            if (errno != EXDEV && errno != EPERM && errno != EROFS && errno != EMLINK) {
                r = sp_err_errno(err, errno, "link", name);
                break;
            }
            copy = true; /* the same answer for the rest: do not ask again */
        }
        if (faccessat(dd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
            continue;
        if ((r = copy_file_at(sd, dd, name, err)) == 0)
            (*count)++;
    }
    sp_dirnames_dispose(&names);
    return r;
}

static bool is_fanout(const char *n)
{
    return strlen(n) == 2 && strspn(n, "0123456789abcdef") == 2;
}

int sp_snapshot_share(sp_snapshot **out, sp_snapstore *dst, sp_snapstore *src, const char *ref,
                      sp_error **err)
{
    return sp_snapshot_share_tagged(out, dst, src, ref, NULL, err);
}

int sp_snapshot_share_tagged(sp_snapshot **out, sp_snapstore *dst, sp_snapstore *src,
                             const char *ref, const char *tag, sp_error **err)
{
    if (out)
        *out = NULL;
    if (tag) {
        int tr = sp_snap_check_tag(tag, err);
        if (tr < 0)
            return tr;
    }
    /* The source's lock keeps a gc there from removing objects while they
     * are being linked; the destination's orders this against its own
     * writers. */
    int r = sp_snap_lock(src, err);
    if (r < 0)
        return r;
    sp_snapshot *snap = NULL;
    if ((r = sp_snap_resolve(&snap, src, ref, err)) < 0) {
        sp_snap_unlock(src);
        return r;
    }
    if ((r = sp_snap_lock_write(dst, err)) < 0) {
        sp_snap_unlock(src);
        sp_snapshot_free(snap);
        return r;
    }
    uint64_t linked = 0;
    /* Read from the start (sp_dir_read() rewinds): a second share from
     * the same source handle sees the whole folder again. */
    sp_dirnames names = SP_DIRNAMES_INIT;
    if (sp_dir_read(&names, src->odb.objfd, SP_DIR_UNSORTED, 0) < 0)
        r = sp_err_errno(err, errno, "read", src->store);
    for (size_t i = 0; r == 0 && i < names.n; i++) {
        const char *name = sp_dirnames_name(&names, i);
        if (is_fanout(name) || strcmp(name, "pack") == 0)
            r = share_dir(src->odb.objfd, dst->odb.objfd, name, &linked, err);
    }
    sp_dirnames_dispose(&names);
    sp_oid id;
    if (r == 0 && sp_oid_parse(&id, snap->commit, strlen(snap->commit)) < 0)
        r = sp_err_set(err, SP_EINVAL, 0, "snapshot %s has a bad commit id", snap->id);
    cleanup_free char *name = sp_xasprintf(SNAP_REF_PREFIX "%s", snap->id);
    sp_snapshot *made = NULL;
    if (r == 0 && !sp_odb_exists(&dst->odb, &id)) {
        r = sp_err_set(err, SP_ERROR, 0, "snapshot %s: its commit did not reach store %s", snap->id,
                       dst->store);
    } else if (r == 0 && tag) {
        /* A record of its own over the same tree: a new id, the tag asked. */
        sp_oid tree;
        if ((r = sp_snap_commit_tree(&dst->odb, snap->commit, &tree, err)) == 0)
            r = sp_snap_record(&made, dst, &tree, NULL, tag, err);
    } else if (r == 0) {
        r = sp_ref_create(&dst->odb, name, &id, err);
    }
    sp_snap_unlock(dst);
    sp_snap_unlock(src);
    dst->stats = (sp_snapstore_stats){.objects_written = linked};
    if (r == 0 && out && made)
        *out = steal_pointer(&made);
    else if (r == 0 && out)
        r = sp_snap_resolve(out, dst, snap->id, err);
    sp_snapshot_free(made);
    sp_snapshot_free(snap);
    return r;
}
