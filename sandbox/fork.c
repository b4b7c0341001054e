/* sp_sandbox_fork(): a new sandbox from a snapshot of another, on the
 * origin's engine or any other.
 *
 * The workspace comes from the origin's snapshot store, never from the
 * origin's live folder (which the workload writes and may have filled with
 * symlinks, fifos or files still changing).
 *   - local to local: the new store gets the origin's objects as hard
 *     links and the snapshot's ref, and the snapshot is restored from
 *     there into the new, empty workspace through the store's restore
 *     (fds opened without following symlinks, set-id bits dropped);
 *   - where either store is not on this host (a remote sandbox's): the
 *     snapshot is exported as a tar (by the local store, or through the
 *     origin's kind) and streamed through a pipe straight into the new
 *     sandbox's import (all or nothing there), restored as above.
 * create then hands the workspace to the container's user as it does
 * after a hydration; the origin is only read. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "egress_proxy.h"
#include "kind.h"
#include "sandbox_internal.h"
#include "sandpod/apply.h"
#include "sandpod/fork.h"
#include "sandpod/sandbox_snapshot.h"

typedef struct fork_seed {
    sp_sandbox *origin;
    const char *snapshot; /* resolved (never NULL) where the origin's store is elsewhere */
} fork_seed;

/* The origin's record of its host folders, for `diff` and applying back. */
static void copy_mounts(sp_sandbox_config *dst, const sp_sandbox_config *src)
{
    dst->n_mounts = src->n_mounts;
    dst->mounts = src->n_mounts ? sp_xcalloc(src->n_mounts, sizeof(*dst->mounts)) : NULL;
    for (size_t i = 0; i < src->n_mounts; i++) {
        const sp_sandbox_mount *s = &src->mounts[i];
        sp_sandbox_mount *d = &dst->mounts[i];
        *d = *s;
        d->host_path = sp_xstrdup(s->host_path);
        d->mount_path = sp_xstrdup(s->mount_path);
        d->include = (const char *const *)sp_strv_copy(s->include);
        d->exclude = (const char *const *)sp_strv_copy(s->exclude);
        d->secrets_left_out = (const char *const *)sp_strv_copy(s->secrets_left_out);
        d->secrets_rewritten = (const char *const *)sp_strv_copy(s->secrets_rewritten);
    }
}

/* sb's store when it is on this host, read without pausing; SP_ENOTFOUND
 * when it has none yet (and !create); SP_EINVAL with reason
 * SP_R_ELSEWHERE when it is not on this host. */
static int open_store(sp_snapstore **out, sp_sandbox *sb, bool create, sp_error **err)
{
    sp_error *e = NULL;
    *out = sb->kind->store(sb, create, &e);
    return *out ? 0 : sp_err_give(err, e, e ? e->code : SP_ERROR);
}

/* Whether sb's store is on this host (made or not). */
static bool store_here(sp_sandbox *sb)
{
    sp_snapstore *s = NULL;
    sp_error *e = NULL;
    int r = open_store(&s, sb, false, &e);
    bool here = r == 0 || !e || e->reason != SP_R_ELSEWHERE;
    sp_snapstore_free(s);
    sp_error_free(e);
    return here;
}

int sp_sandbox_keep_origin_base(sp_snapstore *dst, sp_snapstore *src, sp_error **err)
{
    sp_snapshot *base = NULL;
    sp_error *e = NULL;
    int r = sp_snapshot_get(&base, src, SP_SANDBOX_ORIGIN_TAG, &e);
    if (r == SP_ENOTFOUND) {
        sp_error_free(e);
        e = NULL;
        r = sp_snapshot_get(&base, src, SP_SANDBOX_BASELINE_TAG, &e);
    }
    if (r == SP_ENOTFOUND) {
        sp_error_free(e);
        return 0;
    }
    if (r < 0)
        return sp_err_give(err, e, r);
    r = sp_snapshot_share_tagged(NULL, dst, src, base->id, SP_SANDBOX_ORIGIN_TAG, err);
    sp_snapshot_free(base);
    return r;
}

static int seed_from_snapshot(sp_sandbox *sb, void *data, sp_error **err)
{
    fork_seed *f = data;
    sp_snapstore *src = NULL, *dst = NULL;
    sp_snapshots *list = NULL;
    sp_snapshot *snap = NULL;
    int r = open_store(&src, f->origin, false, err);
    if (r == SP_ENOTFOUND)
        r = sp_err_set(err, SP_ENOTFOUND, 0,
                       "sandbox %s has no snapshots to fork from (take one with `sandpod "
                       "snapshot %s`)",
                       f->origin->name, f->origin->name);
    if (r < 0)
        goto out;
    const char *ref = f->snapshot;
    if (!ref) {
        if ((r = sp_snapshot_list(&list, src, err)) < 0)
            goto out;
        if (list->n == 0) {
            r = sp_err_set(err, SP_ENOTFOUND, 0,
                           "sandbox %s has no snapshots to fork from (take one with `sandpod "
                           "snapshot %s`)",
                           f->origin->name, f->origin->name);
            goto out;
        }
        ref = list->v[list->n - 1]->id;
    }
    if ((r = open_store(&dst, sb, true, err)) < 0)
        goto out;
    if ((r = sp_snapshot_share(&snap, dst, src, ref, err)) < 0) {
        if (r == SP_ENOTFOUND)
            sp_err_wrap(err, r, "fork sandbox %s", f->origin->name);
        goto out;
    }
    if ((r = sp_sandbox_keep_origin_base(dst, src, err)) < 0)
        goto out;
    r = sp_snapshot_restore(NULL, dst, snap->id, err);
out:
    sp_snapshot_free(snap);
    sp_snapshots_free(list);
    sp_snapstore_free(dst);
    sp_snapstore_free(src);
    return r;
}

/* The origin's snapshot (default: its newest) as a tar, to fd: from its
 * store where it is on this host, else from its kind's export (the
 * snapshot then resolved already). */
static int export_origin(int fd, void *data, sp_error **err)
{
    fork_seed *f = data;
    if (!store_here(f->origin))
        return f->origin->kind->snap_export(f->origin, f->snapshot, SP_SNAPSHOT_TAR, fd, err);
    sp_snapstore *src = NULL;
    sp_snapshots *list = NULL;
    int r = open_store(&src, f->origin, false, err);
    const char *ref = f->snapshot;
    if (r == 0 && !ref && (r = sp_snapshot_list(&list, src, err)) == 0) {
        if (list->n)
            ref = list->v[list->n - 1]->id;
        else
            r = SP_ENOTFOUND;
    }
    if (r == SP_ENOTFOUND && !f->snapshot)
        r = sp_err_set(err, SP_ENOTFOUND, 0,
                       "sandbox %s has no snapshots to fork from (take one with `sandpod "
                       "snapshot %s`)",
                       f->origin->name, f->origin->name);
    if (r == 0)
        r = sp_snapshot_export(src, ref, NULL, fd, SP_SNAPSHOT_TAR, err);
    sp_snapshots_free(list);
    sp_snapstore_free(src);
    return r;
}

/* What an origin was made from, on any engine: the id of its origin-base,
 * else of its base; NULL (and 0) when it has neither. A local origin's
 * store is only read, never paused. */
static int origin_base_id(char **id, sp_sandbox *origin, sp_error **err)
{
    *id = NULL;
    static const char *const tags[] = {SP_SANDBOX_ORIGIN_TAG, SP_SANDBOX_BASELINE_TAG};
    sp_snapstore *src = NULL;
    int r = 0;
    if (store_here(origin) && (r = open_store(&src, origin, false, err)) < 0)
        return r == SP_ENOTFOUND ? 0 : r;
    for (size_t i = 0; i < 2 && !*id && r == 0; i++) {
        sp_snapshot *rec = NULL;
        sp_error *e = NULL;
        r = src ? sp_snapshot_get(&rec, src, tags[i], &e)
                : sp_sandbox_snapshot_get(&rec, origin, tags[i], &e);
        if (r == 0)
            *id = sp_xstrdup(rec->id);
        if (r == SP_ENOTFOUND) {
            sp_error_free(e);
            r = 0;
        } else if (r < 0) {
            sp_err_give(err, e, 0);
        }
        sp_snapshot_free(rec);
    }
    sp_snapstore_free(src);
    return r;
}

/* The origin's snapshot `ref` as a tar, to fd, from either engine. */
typedef struct base_src {
    sp_sandbox *origin;
    const char *ref;
} base_src;

static int export_ref(int fd, void *data, sp_error **err)
{
    base_src *b = data;
    fork_seed f = {b->origin, b->ref};
    return export_origin(fd, &f, err);
}

/* A fork across engines (or on a remote one) keeps what its origin was
 * made from, as a local fork does (sp_sandbox_keep_origin_base()): the
 * origin's baseline travels as a second archive, into the fork's store
 * tagged origin-base, not restored. */
static int carry_origin_base(sp_sandbox *sb, sp_sandbox *origin, sp_error **err)
{
    char *id = NULL;
    int r = origin_base_id(&id, origin, err);
    if (r < 0 || !id)
        return r;
    base_src b = {origin, id};
    r = sp_sandbox_import_from(NULL, sb, SP_SANDBOX_ORIGIN_TAG, false, export_ref, &b, err);
    free(id);
    return r;
}

static int seed_fork(sp_sandbox *sb, void *data, sp_error **err)
{
    fork_seed *f = data;
    int r;
    if (store_here(sb) && store_here(f->origin)) {
        if ((r = seed_from_snapshot(sb, f, err)) < 0)
            return r;
    } else {
        if ((r = sp_sandbox_import_from(NULL, sb, NULL, true, export_origin, f, err)) < 0)
            return sp_err_wrap(err, r, "fork sandbox %s", f->origin->name);
        if ((r = carry_origin_base(sb, f->origin, err)) < 0)
            return sp_err_wrap(err, r, "fork sandbox %s: its baseline", f->origin->name);
    }
    /* The origin's host folders, for `diff` and `apply` back. */
    copy_mounts(&sb->cfg, &f->origin->cfg);
    return 0;
}

/* The newest snapshot of an origin whose store is elsewhere, as a fork
 * takes by default: asked through its kind, so that its store is only
 * read. */
static int newest_elsewhere(char **id, sp_sandbox *origin, sp_error **err)
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

int sp_sandbox_fork(sp_sandbox **out, sp_sandbox *origin, const char *snapshot,
                    const sp_sandbox_opts *opts, sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_SANDBOX_OPTS_VERSION, "sp_sandbox_opts", err) < 0)
        return SP_EINVAL;
    sp_sandbox_opts in;
    sp_sandbox_opts_take(&in, opts);
    if (in.n_mounts)
        return sp_err_set(err, SP_EINVAL, 0,
                          "a fork's workspace is the snapshot: no mounts (sandbox %s)",
                          origin->name);
    const sp_sandbox_config *c = &origin->cfg;
    sp_sandbox_opts o = in;
    o.state_root = in.state_root ? in.state_root : origin->state_root;
    o.image = in.image ? in.image : c->image;
    o.env = in.env ? in.env : (const char *const *)c->env;
    o.env_pass = in.env_pass ? in.env_pass : (const char *const *)c->env_pass;
    o.workdir = in.workdir ? in.workdir : c->workdir;
    o.user = in.user ? in.user : c->user;
    o.cap_add = in.cap_add ? in.cap_add : (const char *const *)c->cap_add;
    o.network = in.network ? in.network : c->network;
    o.memory_bytes = in.memory_bytes ? in.memory_bytes : c->memory_bytes;
    o.nano_cpus = in.nano_cpus ? in.nano_cpus : c->nano_cpus;
    o.pids_limit = in.pids_limit ? in.pids_limit : c->pids_limit;
    o.tmpfs_bytes = in.tmpfs_bytes ? in.tmpfs_bytes : c->tmpfs_bytes;
    o.writable_root = in.writable_root || c->writable_root;
    o.exec_path = in.exec_path ? in.exec_path : c->exec_path;
    o.userns = in.userns ? in.userns : c->userns;
    o.seccomp = in.seccomp ? in.seccomp : c->seccomp;
    /* On the origin's engine unless told otherwise. */
    if (!o.engine)
        o.engine = sp_sandbox_engine(origin);
    cleanup_free char *newest = NULL;
    if (!snapshot && !store_here(origin)) {
        int r = newest_elsewhere(&newest, origin, err);
        if (r < 0)
            return r;
        snapshot = newest;
    }
    /* The origin's egress policy comes along unless rules are given (its
     * hosts file too): a fork reaches no more than its origin. */
    sp_strv allow = {0}, deny = {0};
    cleanup_free char *hosts = NULL;
    if (!in.allow && !in.deny && c->egress) {
        sp_sandbox_egress_split(c->egress, &allow, &deny);
        o.allow = (const char *const *)sp_strv_steal(&allow);
        o.deny = (const char *const *)sp_strv_steal(&deny);
        hosts = sp_xasprintf("%s/egress/hosts", origin->state_dir);
        if (!in.egress_hosts && access(hosts, R_OK) == 0)
            o.egress_hosts = hosts;
    }
    /* And the CAs it was told to trust for secrets over HTTPS. */
    cleanup_free char *extra_ca =
        sp_xasprintf("%s/egress/%s", origin->state_dir, SP_EGRESS_EXTRA_CA);
    if (!in.egress_ca && c->secrets.n && access(extra_ca, R_OK) == 0)
        o.egress_ca = extra_ca;
    /* So do its secrets, with stand-ins of the fork's own (the origin's
     * mean nothing to the fork's proxy); the values stay in memory. */
    sp_egress_secrets carried = {0};
    int r = 0;
    if (c->secrets.n && (r = sp_sandbox_secrets_carry(&carried, origin, &in, err)) < 0)
        goto out;
    fork_seed f = {origin, snapshot};
    r = sp_sandbox_create_seeded(out, &o, c->secrets.n ? &carried : NULL, seed_fork, &f, err);
out:
    sp_egress_secrets_dispose(&carried);
    if (o.allow != in.allow) {
        sp_strv_free((char **)o.allow);
        sp_strv_free((char **)o.deny);
    }
    return r;
}
