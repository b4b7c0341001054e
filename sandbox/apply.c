/* A sandbox's baseline, and applying the workspace's changes back to a
 * host folder (sandpod/apply.h). */
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "sandpod/apply.h"

int sp_sandbox_baseline(sp_snapshot **out, const sp_sandbox *sb, sp_snapstore *s, sp_error **err)
{
    *out = NULL;
    sp_error *e = NULL;
    int r = s ? sp_snapshot_get(out, s, SP_SANDBOX_BASELINE_TAG, &e) : SP_ENOTFOUND;
    if (r == SP_ENOTFOUND) {
        sp_error_free(e);
        return sp_err_set(err, SP_ENOTFOUND, 0,
                          "sandbox %s has no baseline snapshot (tagged '%s'): it was made before "
                          "sandpod took one at create; name a snapshot instead",
                          sp_sandbox_name(sb), SP_SANDBOX_BASELINE_TAG);
    }
    if (r < 0) {
        if (err)
            *err = e;
        else
            sp_error_free(e);
    }
    return r;
}
