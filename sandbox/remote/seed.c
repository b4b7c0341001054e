/* sp_seed_tar(): mounts -> hydrated temp folder -> snapshot -> tar on an
 * fd (sandbox/remote/seed.h). Going through a snapshot keeps one archive format
 * on both sides: what the peer imports is what `sandpod export` writes. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "seed.h"
#include "sandpod/snapshot.h"
#include "fdtree.h"

/* Hydrate, snapshot and export inside the temp folder `tmp`. */
static int seed_in(sp_hydrate_result **out, const char *tmp, int fd, const sp_mount *mounts,
                   size_t n, const sp_hydrate_opts *ho, sp_error **err)
{
    cleanup_free char *ws = sp_xasprintf("%s/ws", tmp);
    cleanup_free char *store = sp_xasprintf("%s/store", tmp);
    if (mkdir(ws, 0700) < 0)
        return sp_err_errno(err, errno, "mkdir", ws);
    int r = sp_hydrate(out, ws, mounts, n, ho, err);
    if (r < 0)
        return r;
    sp_snapstore *s = NULL;
    sp_snapshot *snap = NULL;
    r = sp_snapstore_open(&s, ws, store, NULL, err);
    if (r == 0)
        r = sp_snapshot_create(&snap, s, NULL, err);
    if (r == 0)
        r = sp_snapshot_export(s, snap->id, NULL, fd, SP_SNAPSHOT_TAR, err);
    sp_snapshot_free(snap);
    sp_snapstore_free(s);
    return r;
}

int sp_seed_tar(sp_hydrate_result **out, int fd, const sp_mount *mounts, size_t n,
                const sp_hydrate_opts *ho, const char *state_root, sp_error **err)
{
    if (out)
        *out = NULL;
    if (!state_root || !*state_root)
        return sp_err_set(err, SP_EINVAL, 0, "seed: no state root");
    int r = sp_state_root_check(state_root, true, err);
    if (r < 0)
        return r;
    char *tmp = sp_xasprintf("%s/seed-XXXXXX", state_root);
    if (!mkdtemp(tmp)) { /* made 0700 */
        r = sp_err_errno(err, errno, "mkdtemp", tmp);
        free(tmp);
        return r;
    }
    r = seed_in(out, tmp, fd, mounts, n, ho, err);
    /* Removed whatever happened; a removal that fails is an error of its
     * own only when the seed itself went well. */
    int dfd = open(state_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const char *leaf = strrchr(tmp, '/') + 1;
    sp_error *rm_err = NULL;
    int rr = dfd < 0 ? sp_err_errno(&rm_err, errno, "open", state_root)
                     : sp_tree_remove(dfd, leaf, 0, &rm_err);
    if (dfd >= 0)
        close(dfd);
    if (rr < 0 && r == 0) {
        sp_err_set(err, rr, 0, "seed: removing the temp folder %s: %s", tmp,
                   rm_err && rm_err->message ? rm_err->message : "failed");
        r = rr;
    }
    sp_error_free(rm_err);
    free(tmp);
    if (r < 0 && out) {
        sp_hydrate_result_free(*out);
        *out = NULL;
    }
    return r;
}
