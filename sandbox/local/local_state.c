/* What the local engine says of a sandbox's container, asked by the
 * command paths before they start one (local_state.h). */
#include <stdio.h>
#include <string.h>

#include "local_state.h"

/* Describe why the container is not running, for error messages. */
static char *why_down(const sp_container_info *info)
{
    if (!info)
        return sp_xstrdup("its container is gone");
    if (info->oom_killed)
        return sp_xasprintf("its container was killed for using too much memory (exit %d)",
                            info->exit_code);
    if (info->paused)
        return sp_xstrdup("its container is paused");
    return sp_xasprintf("its container is %s (exit %d)", info->state ? info->state : "stopped",
                        info->exit_code);
}

int sp_sandbox_require_running(sp_sandbox *sb, sp_error **err)
{
    /* Only the agent can tell, and its own errors say it went. */
    if (sb->agent_socket)
        return 0;
    sp_local *p = sp_sandbox_local(sb, err);
    if (!p)
        return SP_EPODMAN;
    if (!sb->container_id)
        return sp_err_set(err, SP_EPODMAN, 0, "sandbox %s has no container; run 'sandpod start %s'",
                          sb->name, sb->name);
    sp_container_info *info = NULL;
    sp_error *e = NULL;
    int r = sb->lops->inspect(&info, p, sb->container_id, &e);
    if (r < 0 && r != SP_ENOTFOUND) {
        if (err) {
            sp_error_free(*err);
            *err = e;
        } else {
            sp_error_free(e);
        }
        return r;
    }
    sp_error_free(e);
    if (info && info->running && !info->paused) {
        sp_container_info_free(info);
        return 0;
    }
    cleanup_free char *why = why_down(info);
    sp_container_info_free(info);
    return sp_err_set(err, SP_EPODMAN, 0, "sandbox %s is not running: %s; run 'sandpod start %s'",
                      sb->name, why, sb->name);
}

int sp_sandbox_refresh_init_pid(sp_sandbox *sb)
{
    if (sb->init_pid_asked || !sb->container_id)
        return -1;
    sb->init_pid_asked = true;
    sp_local *p = sp_sandbox_local(sb, NULL);
    sp_container_info *info = NULL;
    if (!p || sb->lops->inspect(&info, p, sb->container_id, NULL) < 0)
        return -1;
    sb->init_pid = info->running ? info->pid : 0;
    sp_container_info_free(info);
    return 0;
}
