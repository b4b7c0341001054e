/* sp_sandbox_logs(): what the sandbox's container printed (its pid 1, the
 * agent), from Podman, running or stopped; of a remote sandbox, from its
 * engine. */
#include <stddef.h>
#include <string.h>

#include "local_kind.h"
#include "sandbox_internal.h"

int sp_sandbox_logs(sp_sandbox *sb, const sp_logs_opts *opts, sp_logs_fn fn, void *userdata,
                    sp_error **err)
{
    if (SP_OPTS_CHECK(opts, 1, SP_LOGS_OPTS_VERSION, "sp_logs_opts", err) < 0)
        return SP_EINVAL;
    sp_logs_opts o = SP_LOGS_OPTS_INIT;
    if (opts && opts->version == 1)
        /* A caller built against the first layout: its struct ends there. */
        memcpy(&o, opts, offsetof(sp_logs_opts, streams_apart));
    else if (opts)
        o = *opts;
    o.version = SP_LOGS_OPTS_VERSION;
    return sb->kind->logs(sb, &o, fn, userdata, err);
}

int sp_local_logs(sp_sandbox *sb, const sp_logs_opts *o, sp_logs_fn fn, void *userdata,
                  sp_error **err)
{
    sp_local *p = sp_sandbox_local(sb, err);
    if (!p)
        return SP_EPODMAN;
    if (!sb->container_id)
        return sp_err_set(err, SP_ENOTFOUND, 0,
                          "sandbox %s has no container, so no logs; run 'sandpod start %s'",
                          sb->name, sb->name);
    int r = sb->lops->logs(p, sb->container_id, o, fn, userdata, err);
    if (r == SP_ENOTFOUND)
        return sp_err_wrap(err, r, "sandbox %s: its container is gone; run 'sandpod start %s'",
                           sb->name, sb->name);
    return r;
}
