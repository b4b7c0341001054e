/* Podman as the local engine (sandbox/engine/local.h): the neutral table
 * over the Podman client, and the one accessor that hands a sandbox's
 * Podman connection to a library user (sp_sandbox_podman()). */
#include "engine/local.h"
#include "podman_internal.h"
#include "sandbox_internal.h"

static sp_podman *P(sp_local *l)
{
    return (sp_podman *)l;
}

static int l_open(sp_local **out, const char *url, const char *state_root, bool no_autostart,
                  sp_error **err)
{
    sp_podman_opts o = SP_PODMAN_OPTS_INIT;
    o.url = url;
    o.state_root = state_root;
    o.no_autostart = no_autostart;
    sp_podman *p = NULL;
    int r = sp_podman_open(&p, &o, err);
    *out = (sp_local *)p;
    return r;
}

static void l_free(sp_local *l)
{
    sp_podman_free(P(l));
}

static const char *l_url(const sp_local *l)
{
    return sp_podman_url((const sp_podman *)l);
}

static int l_host(const sp_container_host **out, sp_local *l, sp_error **err)
{
    return sp_podman_host_info(out, P(l), err);
}

static int l_image_exists(bool *out, sp_local *l, const char *ref, sp_error **err)
{
    return sp_podman_image_exists(out, P(l), ref, err);
}

static int l_image_id(char **out, sp_local *l, const char *ref, sp_error **err)
{
    return sp_podman_image_id(out, P(l), ref, err);
}

static int l_image_ensure(sp_local *l, const char *ref, sp_pull_policy policy, bool no_tls_verify,
                          sp_progress_fn progress, void *userdata, sp_error **err)
{
    sp_podman_pull_opts po = SP_PODMAN_PULL_OPTS_INIT;
    po.no_tls_verify = no_tls_verify;
    po.progress = progress;
    po.userdata = userdata;
    return sp_podman_image_ensure(NULL, P(l), ref, policy, &po, err);
}

static int l_image_build_default(sp_local *l, sp_error **err)
{
    return sp_podman_image_build_busybox(NULL, P(l), NULL, NULL, false, err);
}

static int l_create(char **id, char ***warnings, sp_local *l, const sp_container_spec *spec,
                    sp_error **err)
{
    return sp_podman_container_create(id, warnings, P(l), spec, err);
}

static int l_start(sp_local *l, const char *id, sp_error **err)
{
    return sp_podman_container_start(P(l), id, err);
}

static int l_stop(sp_local *l, const char *id, int timeout_s, sp_error **err)
{
    return sp_podman_container_stop(P(l), id, timeout_s, err);
}

static int l_pause(sp_local *l, const char *id, sp_error **err)
{
    return sp_podman_container_pause(P(l), id, err);
}

static int l_unpause(sp_local *l, const char *id, sp_error **err)
{
    return sp_podman_container_unpause(P(l), id, err);
}

static int l_remove(sp_local *l, const char *id, sp_error **err)
{
    return sp_podman_container_delete(P(l), id, true, true, err);
}

static int l_inspect(sp_container_info **out, sp_local *l, const char *id, sp_error **err)
{
    return sp_podman_container_inspect(out, P(l), id, err);
}

static int l_list(sp_containers **out, sp_local *l, const char *const *labels, sp_error **err)
{
    return sp_podman_container_list(out, P(l), labels, err);
}

static int l_logs(sp_local *l, const char *id, const sp_logs_opts *opts, sp_logs_fn fn,
                  void *userdata, sp_error **err)
{
    return sp_podman_container_logs(P(l), id, opts, fn, userdata, err);
}

static int l_exec_create(char **exec_id, sp_local *l, const char *container,
                         const sp_exec_spec *spec, sp_error **err)
{
    return sp_podman_exec_create(exec_id, P(l), container, spec, err);
}

static int l_exec_start(sp_stream *out, sp_local *l, const char *exec_id, bool tty, bool noexec,
                        sp_error **err)
{
    return sp_podman_exec_stream(out, P(l), exec_id, tty, noexec, err);
}

static void l_reap_lost(sp_sandbox_orphans *o, sp_local *l, const char *name_prefix,
                        double min_age_s, bool dry_run)
{
    sp_podman_reap_lost(o, P(l), name_prefix, min_age_s, dry_run);
}

const sp_local_ops sp_podman_local_ops = {
    .kind = "podman",
    .open = l_open,
    .free = l_free,
    .url = l_url,
    .host = l_host,
    .remove_tree = sp_podman_unshare_remove,
    .image_exists = l_image_exists,
    .image_id = l_image_id,
    .image_ensure = l_image_ensure,
    .image_build_default = l_image_build_default,
    .pull_policy_for = sp_podman_pull_policy_for,
    .create = l_create,
    .start = l_start,
    .stop = l_stop,
    .pause = l_pause,
    .unpause = l_unpause,
    .remove = l_remove,
    .inspect = l_inspect,
    .list = l_list,
    .logs = l_logs,
    .exec_create = l_exec_create,
    .exec_start = l_exec_start,
    .reap_lost = l_reap_lost,
};

sp_podman *sp_sandbox_podman(sp_sandbox *sb, sp_error **err)
{
    sp_local *l = sp_sandbox_local(sb, err);
    if (!l)
        return NULL;
    if (sb->lops != &sp_podman_local_ops) {
        sp_err_set(err, SP_EINVAL, 0, "sandbox %s does not run on Podman", sb->name);
        return NULL;
    }
    return P(l);
}
