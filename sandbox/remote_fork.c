/* sp_sandbox_fork() of a sandbox on a remote engine: a new sandbox on the
 * same engine, with the origin's configuration, whose workspace starts as
 * the origin's snapshot. The snapshot leaves the origin's peer as a tar
 * (export_tar) and is streamed, through a pipe a thread fills, straight
 * into the new peer's import (all or nothing there); nothing is kept on
 * this machine. Then create takes the new sandbox's `base` snapshot, as it
 * does after a hydration. A failure anywhere fails the create, which
 * removes the new Pod and its state folder; the origin is only read. */
#include <string.h>

#include "sandbox_internal.h"
#include "sandpod/sandbox_snapshot.h"

typedef struct remote_fork {
    sp_sandbox *origin;
    const char *snapshot; /* the origin's snapshot (never NULL here) */
} remote_fork;

static int export_origin(int fd, void *data, sp_error **err)
{
    remote_fork *f = data;
    return sp_remote_export(f->origin, f->snapshot, false, fd, err);
}

int sp_remote_fork_seed(sp_sandbox *sb, void *data, sp_error **err)
{
    remote_fork *f = data;
    int r = sp_remote_import_piped(sb, NULL, export_origin, f, err);
    return r < 0 ? sp_err_wrap(err, r, "fork sandbox %s", f->origin->name) : 0;
}

/* The origin's newest snapshot, as a local fork takes by default: asked
 * of its peer (sp_sandbox_snapshot_list()), so that the origin's store is only
 * read, never given a snapshot of its own. */
static int newest_snapshot(char **id, sp_sandbox *origin, sp_error **err)
{
    *id = NULL;
    sp_snapshots *l = NULL;
    int r = sp_sandbox_snapshot_list(&l, origin, err);
    if (r < 0)
        return sp_err_wrap(err, r, "fork sandbox %s: its snapshots", origin->name);
    if (l->n > 0)
        *id = sp_xstrdup(l->v[l->n - 1]->id);
    sp_snapshots_free(l);
    if (!*id)
        return sp_err_set(err, SP_ENOTFOUND, 0,
                          "sandbox %s has no snapshots to fork from (take one with `sandpod "
                          "snapshot %s`)",
                          origin->name, origin->name);
    return 0;
}

int sp_remote_fork(sp_sandbox **out, sp_sandbox *origin, const char *snapshot,
                   const sp_sandbox_opts *o, sp_error **err)
{
    sp_sandbox_opts ro = *o;
    if (ro.engine && strcmp(ro.engine, sp_sandbox_engine(origin)) != 0)
        return sp_err_set(err, SP_EINVAL, 0,
                          "sandbox %s runs on engine %s: its forks run there too, not on %s",
                          origin->name, sp_sandbox_engine(origin), ro.engine);
    ro.engine = sp_sandbox_engine(origin);
    cleanup_free char *newest = NULL;
    if (!snapshot) {
        int r = newest_snapshot(&newest, origin, err);
        if (r < 0)
            return r;
        snapshot = newest;
    }
    remote_fork f = {.origin = origin, .snapshot = snapshot};
    return sp_sandbox_create_seeded(out, &ro, sp_remote_fork_seed, &f, err);
}
