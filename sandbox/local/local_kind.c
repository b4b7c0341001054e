/* The local kind's table (kind.h): a sandbox around a workspace folder of
 * this host, in a container of the local engine. */
#include "local_kind.h"
#include "sandbox_internal.h"

static int load(sp_sandbox *sb, const struct cJSON *o, const char *path, sp_error **err)
{
    (void)sb, (void)o, (void)path, (void)err;
    return 0; /* every key of a local sandbox is the common configuration's */
}

static void save(const sp_sandbox *sb, struct cJSON *o)
{
    (void)sb, (void)o;
}

static void release(sp_sandbox *sb)
{
    if (sb->local)
        sb->lops->free(sb->local);
    sb->local = NULL;
}

static bool stops(const sp_sandbox *sb)
{
    (void)sb;
    return true;
}

static sp_fs *fs(sp_sandbox *sb, sp_error **err)
{
    if (!sb->fs && sp_fs_open(&sb->fs, sb->workspace, NULL, err) < 0)
        return NULL;
    return sb->fs;
}

/* Its tools run in this process, over the workspace folder. */
static int rpc(sp_sandbox *sb, const char *method, const char *params, const char *key,
               char **result, sp_error **err)
{
    (void)method, (void)params, (void)key, (void)result;
    return sp_err_set(err, SP_EINVAL, 0,
                      "sandbox %s is local: its tools run in this process (sp_tools)", sb->name);
}

static void rpc_cancel(sp_sandbox *sb, const char *key)
{
    (void)sb, (void)key;
}

static int peer_command(sp_sandbox *sb, const char *const *args, int in_fd, int out_fd, int err_fd,
                        int *exit_code, sp_error **err)
{
    (void)args, (void)in_fd, (void)out_fd, (void)err_fd, (void)exit_code;
    return sp_err_set(err, SP_EINVAL, 0, "sandbox %s is local: it has no peer", sb->name);
}

const sp_kind sp_kind_local = {
    .name = "local",
    .load = load,
    .save = save,
    .release = release,
    .create = sp_local_create,
    .discard = sp_local_discard,
    .remove = sp_local_remove,
    .status = sp_local_status,
    .start = sp_local_start,
    .stop = sp_local_stop,
    .restart = sp_local_restart,
    .pause = sp_local_pause,
    .unpause = sp_local_unpause,
    .pauses = sp_local_pauses,
    .stops = stops,
    .logs = sp_local_logs,
    .fs = fs,
    .exec_path = sp_local_exec_path,
    .exec = sp_local_run,
    .attach = sp_local_attach,
    .session_start = sp_local_session_start,
    .session_write = sp_local_session_write,
    .session_signal = sp_local_session_signal,
    .session_resize = sp_local_session_resize,
    .session_kill = sp_local_session_kill,
    .session_list = sp_local_session_list,
    .sessions_close = sp_local_sessions_close,
    .snap_open = sp_local_snap_open,
    .snap_create = sp_local_snap_create,
    .snap_list = sp_local_snap_list,
    .snap_get = sp_local_snap_get,
    .snap_restore = sp_local_snap_restore,
    .snap_delete = sp_local_snap_delete,
    .snap_diff = sp_local_snap_diff,
    .snap_export = sp_local_snap_export,
    .snap_import = sp_local_snap_import,
    .store = sp_local_store,
    .image_pin = sp_local_image_pin,
    .rpc = rpc,
    .rpc_cancel = rpc_cancel,
    .egress_set = sp_local_egress_set,
    .egress_log = sp_local_egress_log,
    .secrets_set = sp_local_egress_secrets_set,
    .peer_command = peer_command,
};
