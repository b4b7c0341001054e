/* A local sandbox's container as its engine sees it, and what is done to
 * it: status, start (made again when gone), stop, pause, removal (the
 * local kind's lifecycle entries, kind.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "local_state.h"
#include "fdtree.h"
#include "local_kind.h"
#include "sandbox_internal.h"

int sp_local_status(sp_sandbox_status **out, sp_sandbox *sb, sp_error **err)
{
    sp_local *p = sp_sandbox_local(sb, err);
    if (!p)
        return SP_EPODMAN;
    sp_sandbox_status *st = sp_xcalloc(1, sizeof(*st));
    st->rootless = sb->cfg.rootless;
    st->limits_apply = sb->cfg.limits_apply;
    st->host_uid = sb->cfg.host_uid;
    st->host_gid = sb->cfg.host_gid;
    sp_container_info *info = NULL;
    int r = sb->container_id ? sb->lops->inspect(&info, p, sb->container_id, err) : SP_ENOTFOUND;
    if (r == SP_ENOTFOUND) {
        if (err && *err) {
            sp_error_free(*err);
            *err = NULL;
        }
        st->state = sp_xstrdup("missing");
        st->exit_code = -1;
    } else if (r < 0) {
        free(st);
        return r;
    } else {
        st->state = sp_xstrdup(info->state ? info->state : "unknown");
        st->running = info->running && !info->paused;
        st->oom_killed = info->oom_killed;
        st->exit_code = info->exit_code;
        st->container = sp_xstrdup(info->id ? info->id : sb->container_id);
        st->pid = info->pid;
        sp_container_info_free(info);
    }
    *out = st;
    return 0;
}

int sp_local_start(sp_sandbox *sb, sp_error **err)
{
    sp_local *p = sp_sandbox_local(sb, err);
    if (!p)
        return SP_EPODMAN;
    int r = sp_sandbox_lock(sb, err);
    if (r < 0)
        return r;
    sp_container_info *info = NULL;
    sp_error *e = NULL;
    r = sb->container_id ? sb->lops->inspect(&info, p, sb->container_id, &e) : SP_ENOTFOUND;
    sp_error_free(e);
    if (r == SP_ENOTFOUND) {
        /* Gone (removed by hand, lost with the host): make it again from
         * the saved configuration around the same workspace. */
        r = sp_local_make_container(sb, err);
        if (r == 0)
            r = sp_sandbox_save(sb, err);
    } else if (r == 0 && info->paused) {
        r = sb->lops->unpause(p, sb->container_id, err);
    } else if (r == 0 && !info->running) {
        r = sp_local_start_container(sb, p, err);
        if (r == 0)
            r = sp_sandbox_save(sb, err);
        if (r < 0) {
            /* A container that cannot start again (its runtime state is
             * stale after a reboot) is replaced. */
            sp_error_free(err ? *err : NULL);
            if (err)
                *err = NULL;
            sb->lops->remove(p, sb->container_id, NULL);
            r = sp_local_make_container(sb, err);
            if (r == 0)
                r = sp_sandbox_save(sb, err);
        }
    } else if (r < 0) {
        r = sp_err_set(err, SP_EPODMAN, 0, "inspect container of sandbox %s", sb->name);
    }
    sp_container_info_free(info);
    sp_sandbox_unlock(sb);
    return r;
}

int sp_local_stop(sp_sandbox *sb, int timeout_s, sp_error **err)
{
    sp_local *p = sp_sandbox_local(sb, err);
    if (!p)
        return SP_EPODMAN;
    if (!sb->container_id)
        return 0;
    sp_sandbox_sessions_close(sb);
    int r = sb->lops->stop(p, sb->container_id, timeout_s < 0 ? 10 : timeout_s, err);
    sp_local_egress_down(sb, p, false);
    if (r == SP_ENOTFOUND) {
        if (err) {
            sp_error_free(*err);
            *err = NULL;
        }
        return 0;
    }
    return r;
}

int sp_local_restart(sp_sandbox *sb, sp_error **err)
{
    int r = sp_local_stop(sb, -1, err);
    return r < 0 ? r : sp_local_start(sb, err);
}

int sp_local_pause(sp_sandbox *sb, sp_error **err)
{
    sp_local *p = sp_sandbox_local(sb, err);
    if (!p)
        return SP_EPODMAN;
    /* Rootless Podman on cgroup v1 has no freezer to pause with: the
     * snapshot is taken while the workload runs, and callers say so
     * (sp_sandbox_pauses()). */
    if (!sp_local_pauses(sb))
        return 0;
    return sb->lops->pause(p, sb->container_id, err);
}

bool sp_local_pauses(sp_sandbox *sb)
{
    sp_local *p = sp_sandbox_local(sb, NULL);
    const sp_container_host *h = NULL;
    return !p || sb->lops->host(&h, p, NULL) < 0 || h->can_pause;
}

int sp_local_unpause(sp_sandbox *sb, sp_error **err)
{
    sp_local *p = sp_sandbox_local(sb, err);
    if (!p)
        return SP_EPODMAN;
    if (!sp_local_pauses(sb))
        return 0;
    return sb->lops->unpause(p, sb->container_id, err);
}

/* A kept workspace leaves the sandbox: no file in it keeps set-id bits
 * (a set-uid binary the workload made would run with its owner's power on
 * the host). Runs after the container is removed, so nothing the
 * workload runs changes the tree meanwhile. */
static int strip_setid(const sp_tree_entry *e, int when, void *ctx, sp_error **err)
{
    (void)ctx;
    if (when != SP_TREE_PRE || !S_ISREG(e->st->st_mode) || !(e->st->st_mode & (S_ISUID | S_ISGID)))
        return 0;
    if (fchmodat(e->parent_fd, e->name, e->st->st_mode & 0777, 0) < 0)
        return sp_err_errno(err, errno, "chmod", e->path);
    return 0;
}

int sp_local_remove(sp_sandbox *sb, bool keep_workspace, sp_error **err)
{
    int r;
    if (sb->container_id) {
        sp_local *p = sp_sandbox_local(sb, err);
        if (!p)
            return SP_EPODMAN;
        r = sb->lops->remove(p, sb->container_id, err);
        if (r < 0 && r != SP_ENOTFOUND)
            return r;
        sp_local_egress_down(sb, p, true);
        if (err && *err) {
            sp_error_free(*err);
            *err = NULL;
        }
    }
    sp_fs_free(sb->fs);
    sb->fs = NULL;
    if (!keep_workspace)
        return 0;
    /* Move the workspace next to the state root's sandboxes folder so that
     * the state folder can go whole. */
    cleanup_free char *kept = sp_xasprintf("%s/kept-workspaces/%s", sb->state_root, sb->name);
    cleanup_free char *parent = sp_xasprintf("%s/kept-workspaces", sb->state_root);
    if ((r = sp_mkdirs(parent, err)) < 0 || (r = sp_rm_tree(kept, err)) < 0)
        return r;
    if (rename(sb->workspace, kept) < 0)
        return sp_err_errno(err, errno, "keep workspace", sb->workspace);
    /* The container is gone: nothing changes the tree under the walk. */
    cleanup_close int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pfd < 0)
        return sp_err_wrap(err, sp_err_errno(err, errno, "open", parent), "keep workspace %s",
                           kept);
    if ((r = sp_tree_walk(pfd, sb->name, strip_setid, NULL, err)) < 0)
        return sp_err_wrap(err, r, "keep workspace %s", kept);
    free(sb->workspace);
    sb->workspace = steal_pointer(&kept);
    return 0;
}
