/* The snapshot store: opening, locking, records, and the operations that
 * tie the walker, the trees and restore together.
 *
 * Every operation that writes the store or reads the workspace holds an
 * exclusive flock on sandpod/lock. A snapshot walks the workspace (reading
 * changed files into the store as it goes), computes the changed trees,
 * then writes a commit holding the record and, last, the ref naming it:
 * killed before the ref, a snapshot leaves only unreferenced objects. The
 * stat cache is written after that, atomically, and only ever names
 * objects that are in the store: gc keeps everything the cache names, and
 * bumps a generation number so that processes holding an older in-memory
 * tree drop it. */
#include "store_internal.h"

/* ----------------------------------------------------------- operations -- */

int sp_snapshot_create(sp_snapshot **out, sp_snapstore *s, const char *tag, sp_error **err)
{
    if (out)
        *out = NULL;
    int r;
    if (tag && (r = sp_snap_check_tag(tag, err)) < 0)
        return r;
    if ((r = sp_snap_lock_write(s, err)) < 0)
        return r;
    sp_scan sc;
    sp_snap_begin_op(s, &sc);
    if ((r = sp_snap_do_pause(s, err)) == 0) {
        r = sp_snap_refresh(s, &sc, err);
        r = sp_snap_do_unpause(s, r, err);
    }
    if (r == 0)
        r = sp_snap_record(out, s, &s->tree->oid, s->tree, tag, err);
    if (r == 0)
        sp_snap_save_cache_after(s);
    sp_snap_end_op(s, &sc);
    sp_snap_unlock(s);
    return r;
}

int sp_snapshot_restore(sp_snapshot **out, sp_snapstore *s, const char *ref, sp_error **err)
{
    if (out)
        *out = NULL;
    int r = sp_snap_lock(s, err);
    if (r < 0)
        return r;
    sp_scan sc;
    sp_snap_begin_op(s, &sc);
    sp_snapshot *snap = NULL;
    sp_oid tree;
    r = sp_snap_resolve(&snap, s, ref, err);
    if (r == 0)
        r = sp_snap_commit_tree(&s->odb, snap->commit, &tree, err);
    if (r == 0 && (r = sp_snap_do_pause(s, err)) == 0) {
        /* What is there now is about to be replaced: hash it, store none
         * of it. On success every id left in the tree is the target's; on
         * failure the tree is dropped. */
        s->odb.dry = true;
        r = sp_snap_refresh(s, &sc, err);
        s->odb.dry = s->read_only;
        if (r < 0)
            sp_snap_drop_tree(s);
        if (r == 0) {
            sc.phase = "restore";
            sc.durable = s->opts.durable;
            sc.keep_setid = s->opts.keep_setid;
            sc.next_progress = 1000;
            sc.path.len = 0;
            /* The budget is checked before anything changes. */
            uint64_t to_write = 0;
            r = sp_restore_plan(&sc, s->tree, &tree, &to_write, err);
            sc.path.len = 0;
            lseek(s->rootfd, 0, SEEK_SET);
            if (r == 0)
                r = sp_restore_dir(&sc, s->rootfd, s->tree, &tree, err);
            /* Folders whose files lost set-id bits are not the snapshot's
             * trees: their ids, for the stat cache and the next snapshot. */
            if (r == 0)
                r = sp_tree_finalize(&s->odb, s->tree, err);
            s->cache_dirty = true;
            if (r < 0)
                sp_snap_drop_tree(s); /* what is on disk now is for the next walk to find */
        }
        r = sp_snap_do_unpause(s, r, err);
    }
    if (r == 0)
        sp_snap_save_cache_after(s);
    sp_snap_end_op(s, &sc);
    sp_snap_unlock(s);
    if (r == 0 && out)
        *out = snap;
    else
        sp_snapshot_free(snap);
    return r;
}

int sp_snapshot_delete(sp_snapstore *s, const char *ref, sp_error **err)
{
    int r = sp_snap_lock_write(s, err);
    if (r < 0)
        return r;
    sp_snapshot *snap = NULL;
    r = sp_snap_resolve(&snap, s, ref, err);
    if (r == 0) {
        cleanup_free char *name = sp_xasprintf(SNAP_REF_PREFIX "%s", snap->id);
        r = sp_ref_delete(&s->odb, name, err);
    }
    sp_snapshot_free(snap);
    sp_snap_unlock(s);
    return r;
}

/* Used by diff.c: the tree of the live workspace, read like a snapshot. */
int sp_snap_live_tree(sp_snapstore *s, sp_oid *tree, sp_error **err);
int sp_snap_live_tree(sp_snapstore *s, sp_oid *tree, sp_error **err)
{
    /* The live tree's objects are written into the store to be compared. */
    if (s->read_only)
        return sp_err_set(err, SP_EREADONLY, EROFS,
                          "snapshot store %s is read-only: compare two snapshots instead of "
                          "a snapshot and the live workspace",
                          s->store);
    int r = sp_snap_lock(s, err);
    if (r < 0)
        return r;
    sp_scan sc;
    sp_snap_begin_op(s, &sc);
    if ((r = sp_snap_do_pause(s, err)) == 0) {
        r = sp_snap_refresh(s, &sc, err);
        r = sp_snap_do_unpause(s, r, err);
    }
    if (r == 0) {
        *tree = s->tree->oid;
        sp_snap_save_cache_after(s);
    }
    sp_snap_end_op(s, &sc);
    sp_snap_unlock(s);
    return r;
}
