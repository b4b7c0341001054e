/* A sandbox's snapshot store, with the container paused around the
 * store's reads and writes of the workspace (sandpod/sandbox_snapshot.h). */
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "json.h"
#include "sandbox_internal.h"
#include "sandpod/sandbox_snapshot.h"

struct sp_sandbox_snap {
    sp_sandbox *sb;
    sp_snapstore *store;
    bool paused;       /* we paused the container */
    bool ran_unpaused; /* an operation ran with it unfrozen */
};

/* Pause a running container; leave a stopped (or already paused) one. */
static int snap_pause(void *ud, sp_error **err)
{
    sp_sandbox_snap *h = ud;
    sp_sandbox_status *st = NULL;
    int r = sp_sandbox_status_get(&st, h->sb, err);
    if (r < 0)
        return r;
    if (st->state && strcmp(st->state, "running") == 0) {
        r = sp_sandbox_pause(h->sb, err);
        if (r == 0) {
            h->paused = true;
            h->ran_unpaused |= !sp_sandbox_pauses(h->sb);
        }
    }
    sp_sandbox_status_free(st);
    return r;
}

static int snap_unpause(void *ud, sp_error **err)
{
    sp_sandbox_snap *h = ud;
    if (!h->paused)
        return 0;
    h->paused = false;
    return sp_sandbox_unpause(h->sb, err);
}

int sp_sandbox_snapshot_open(sp_sandbox_snap **out, sp_sandbox *sb,
                             const sp_sandbox_snapshot_opts *opts, sp_error **err)
{
    *out = NULL;
    if (sp_sandbox_is_remote(sb))
        return sp_sandbox_not_local(sb, "snapshots through the library (use the snapshot tools)",
                                    err);
    int r =
        SP_OPTS_CHECK(opts, 1, SP_SANDBOX_SNAPSHOT_OPTS_VERSION, "sp_sandbox_snapshot_opts", err);
    if (r < 0)
        return r;
    if (!sb)
        return sp_err_set(err, SP_EINVAL, 0, "no sandbox given");
    sp_snapstore_opts so = SP_SNAPSTORE_OPTS_INIT;
    if (opts && opts->store) {
        if (opts->store->pause || opts->store->unpause || opts->store->userdata)
            return sp_err_set(err, SP_EINVAL, 0,
                              "the pause callbacks of a sandbox's store are the sandbox's");
        so = *opts->store;
    }
    sp_sandbox_snap *h = sp_xcalloc(1, sizeof(*h));
    h->sb = sb;
    so.pause = snap_pause;
    so.unpause = snap_unpause;
    so.userdata = h;
    cleanup_free char *store = sp_xasprintf("%s/snapshots.git", sp_sandbox_state_dir(sb));
    r = sp_snapstore_open(&h->store, sp_sandbox_workspace(sb), store, &so, err);
    if (r < 0) {
        free(h);
        return r;
    }
    *out = h;
    return 0;
}

sp_snapstore *sp_sandbox_snapshot_store(sp_sandbox_snap *h)
{
    return h ? h->store : NULL;
}

bool sp_sandbox_snapshot_ran_unpaused(sp_sandbox_snap *h)
{
    if (!h)
        return false;
    bool was = h->ran_unpaused;
    h->ran_unpaused = false;
    return was;
}

void sp_sandbox_snapshot_close(sp_sandbox_snap *h)
{
    if (!h)
        return;
    sp_snapstore_free(h->store);
    if (h->paused)
        (void)sp_sandbox_unpause(h->sb, NULL);
    free(h);
}

/* ------------------------------------------ archives, on any engine -- */

int sp_sandbox_snapshot_export_fd(sp_sandbox *sb, const char *ref, int fd,
                                  sp_snapshot_format format, sp_error **err)
{
    if (!ref || !*ref)
        return sp_err_set(err, SP_EINVAL, 0, "export: which snapshot? (an id, tag or prefix)");
    if (sp_sandbox_is_remote(sb))
        return sp_remote_export(sb, ref, format == SP_SNAPSHOT_TAR_GZ, fd, err);
    sp_sandbox_snap *h = NULL;
    int r = sp_sandbox_snapshot_open(&h, sb, NULL, err);
    if (r < 0)
        return r;
    sp_snapshot *snap = NULL;
    r = sp_snapshot_get(&snap, h->store, ref, err);
    if (r == 0)
        r = sp_snapshot_export(h->store, snap->id, NULL, fd, format, err);
    sp_snapshot_free(snap);
    sp_sandbox_snapshot_close(h);
    return r;
}

int sp_sandbox_snapshot_import_fd(char **id, sp_sandbox *sb, int fd, const char *tag,
                                  sp_error **err)
{
    if (id)
        *id = NULL;
    if (sp_sandbox_is_remote(sb)) {
        char *res = NULL;
        int r = sp_remote_import(sb, fd, tag, false, &res, err);
        if (r == 0 && id) {
            cJSON *o = sp_json_parse(res, strlen(res));
            const char *s = sp_json_str(o, "id");
            *id = s ? sp_xstrdup(s) : NULL;
            cJSON_Delete(o);
            if (!*id)
                r = sp_err_set(err, SP_ERROR, 0, "the peer's import said no id: %.200s", res);
        }
        free(res);
        return r;
    }
    sp_sandbox_snap *h = NULL;
    int r = sp_sandbox_snapshot_open(&h, sb, NULL, err);
    if (r < 0)
        return r;
    sp_snapshot *snap = NULL;
    r = sp_snapshot_import(&snap, h->store, NULL, fd, tag, err);
    if (r == 0 && id)
        *id = sp_xstrdup(snap->id);
    sp_snapshot_free(snap);
    sp_sandbox_snapshot_close(h);
    return r;
}
