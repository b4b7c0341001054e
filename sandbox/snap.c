/* A sandbox's snapshot store, with the container paused around the
 * store's reads and writes of the workspace (sandpod/sandbox_snapshot.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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
    if (sp_sandbox_is_remote(sb)) {
        /* Resolved first, as locally: a bad ref is the peer's not_found
         * (or ambiguous) error, before any byte is written. */
        sp_snapshot *snap = NULL;
        int r = sp_sandbox_snapshot_get(&snap, sb, ref, err);
        if (r == 0)
            r = sp_remote_export(sb, snap->id, format == SP_SNAPSHOT_TAR_GZ, fd, err);
        sp_snapshot_free(snap);
        return r;
    }
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

/* ----------------------------------- typed operations, on any engine -- */

/* A whole number of a record: the peer prints 64-bit ones exactly, which
 * sp_json_parse_exact() keeps as raw literals past 2^53. */
static int64_t rec_int(const cJSON *o, const char *key)
{
    const cJSON *v = sp_json_get(o, key);
    if (cJSON_IsRaw(v) && v->valuestring)
        return (int64_t)strtoll(v->valuestring, NULL, 10);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : 0;
}

static uint64_t rec_uint(const cJSON *o, const char *key)
{
    const cJSON *v = sp_json_get(o, key);
    if (cJSON_IsRaw(v) && v->valuestring)
        return (uint64_t)strtoull(v->valuestring, NULL, 10);
    return cJSON_IsNumber(v) && v->valuedouble > 0 ? (uint64_t)v->valuedouble : 0;
}

/* A record as sp_json_snapshot() prints it; NULL without an id. */
static sp_snapshot *rec_snapshot(const cJSON *o)
{
    if (!sp_json_str(o, "id"))
        return NULL;
    sp_snapshot *s = sp_xcalloc(1, sizeof(*s));
    s->id = sp_json_strdup(o, "id");
    s->tag = sp_json_strdup(o, "tag");
    s->commit = sp_xstrdup(sp_json_str_or(o, "commit", ""));
    s->root = sp_xstrdup(sp_json_str_or(o, "root", ""));
    s->store = sp_xstrdup(sp_json_str_or(o, "store", ""));
    s->created_at = sp_xstrdup(sp_json_str_or(o, "created_at", ""));
    s->created_at_ns = rec_int(o, "created_at_ns");
    s->files = rec_uint(o, "files");
    s->dirs = rec_uint(o, "dirs");
    s->symlinks = rec_uint(o, "symlinks");
    s->bytes = rec_uint(o, "bytes");
    return s;
}

static sp_fs_type rec_type(const cJSON *o, const char *key)
{
    const char *n = sp_json_str(o, key);
    for (int t = SP_FS_FILE; n && t <= SP_FS_OTHER; t++)
        if (strcmp(sp_fs_type_name((sp_fs_type)t), n) == 0)
            return (sp_fs_type)t;
    return SP_FS_OTHER;
}

static unsigned rec_mode(const cJSON *o, const char *key)
{
    const char *m = sp_json_str(o, key);
    return m ? (unsigned)strtoul(m, NULL, 8) & 07777u : 0;
}

/* A diff as sp_json_snapdiff() prints it. */
static sp_snapdiff *rec_diff(const cJSON *o)
{
    const cJSON *changes = sp_json_get(o, "changes");
    if (!sp_json_str(o, "from") || !cJSON_IsArray(changes))
        return NULL;
    sp_snapdiff *d = sp_xcalloc(1, sizeof(*d));
    d->from = sp_json_strdup(o, "from");
    d->to = sp_xstrdup(sp_json_str_or(o, "to", ""));
    d->patch = sp_json_strdup(o, "patch");
    size_t cap = (size_t)cJSON_GetArraySize(changes);
    d->v = cap ? sp_xcalloc(cap, sizeof(*d->v)) : NULL;
    const cJSON *c;
    cJSON_ArrayForEach(c, changes)
    {
        sp_snapshot_change *x = &d->v[d->n++];
        x->path = sp_xstrdup(sp_json_str_or(c, "path", ""));
        const char *kind = sp_json_str_or(c, "change", "");
        for (int k = SP_CHANGE_ADDED; k <= SP_CHANGE_TYPE_CHANGED; k++)
            if (strcmp(sp_snapshot_change_name((sp_snapshot_change_kind)k), kind) == 0)
                x->kind = (sp_snapshot_change_kind)k;
        x->old_type = rec_type(c, "old_type");
        x->new_type = rec_type(c, "new_type");
        x->old_mode = rec_mode(c, "old_mode");
        x->new_mode = rec_mode(c, "new_mode");
        x->content_changed = sp_json_bool(c, "content_changed", false);
    }
    d->added = rec_uint(o, "added");
    d->modified = rec_uint(o, "modified");
    d->deleted = rec_uint(o, "deleted");
    d->type_changed = rec_uint(o, "type_changed");
    return d;
}

/* Run `sandpod CMD [SUB] --root SP_PEER_WORKSPACE --store SP_PEER_STORE
 * --json ARGS...` in the peer of a remote sandbox; *out its JSON result.
 * A failure there is its error, code and reason kept. */
static int peer_json(cJSON **out, sp_sandbox *sb, const char *cmd, const char *sub,
                     const char *const *args, sp_error **err)
{
    *out = NULL;
    const char *argv[16];
    size_t n = 0;
    argv[n++] = cmd;
    if (sub)
        argv[n++] = sub;
    const char *common[] = {"--root", SP_PEER_WORKSPACE, "--store", SP_PEER_STORE, "--json"};
    for (size_t i = 0; i < sizeof(common) / sizeof(common[0]); i++)
        argv[n++] = common[i];
    for (size_t i = 0; args && args[i] && n + 1 < sizeof(argv) / sizeof(argv[0]); i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    int fd = memfd_create("sandpod-peer-json", MFD_CLOEXEC);
    if (fd < 0)
        return sp_err_errno(err, errno, "memfd_create", NULL);
    int code = -1;
    int r = sp_sandbox_peer_command(sb, argv, fd, -1, &code, err);
    sp_buf b = SP_BUF_INIT;
    char chunk[8192];
    ssize_t got;
    if (r == 0 && lseek(fd, 0, SEEK_SET) == 0)
        while ((got = read(fd, chunk, sizeof(chunk))) > 0)
            sp_buf_add(&b, chunk, (size_t)got);
    close(fd);
    if (r < 0) {
        sp_buf_dispose(&b);
        return r;
    }
    cJSON *j = b.data ? sp_json_parse_exact(b.data, b.len) : NULL;
    sp_buf_dispose(&b);
    const cJSON *e = sp_json_get(j, "error");
    if (code == 0 && cJSON_IsObject(j) && sp_json_bool(j, "ok", true)) {
        *out = j;
        return 0;
    }
    if (cJSON_IsObject(e)) {
        r = sp_err_from_json(err, e, "the peer's command failed");
    } else {
        r = sp_err_set(err, SP_ERROR, 0,
                       "sandbox %s: the peer's `sandpod %s` failed (exit status %d) and said "
                       "nothing readable",
                       sp_sandbox_name(sb), cmd, code);
    }
    cJSON_Delete(j);
    return r;
}

/* A local sandbox's store, opened with pausing for one operation. */
static int local_open(sp_sandbox_snap **h, sp_sandbox *sb, sp_error **err)
{
    return sp_sandbox_snapshot_open(h, sb, NULL, err);
}

/* The peer's record under `key` (NULL: the result itself). */
static int peer_record(sp_snapshot **out, sp_sandbox *sb, const char *cmd, const char *sub,
                       const char *const *args, const char *key, sp_error **err)
{
    cJSON *j = NULL;
    int r = peer_json(&j, sb, cmd, sub, args, err);
    if (r < 0)
        return r;
    sp_snapshot *s = rec_snapshot(key ? sp_json_get(j, key) : j);
    cJSON_Delete(j);
    if (!s)
        return sp_err_set(err, SP_ERROR, 0, "sandbox %s: the peer's `sandpod %s` gave no record",
                          sp_sandbox_name(sb), cmd);
    if (out)
        *out = s;
    else
        sp_snapshot_free(s);
    return 0;
}

static int check_ref(const char *ref, const char *what, sp_error **err)
{
    if (!ref || !*ref)
        return sp_err_set(err, SP_EINVAL, 0, "%s: which snapshot? (an id, tag or prefix)", what);
    return 0;
}

int sp_sandbox_snapshot_create(sp_snapshot **out, sp_sandbox *sb, const char *tag, sp_error **err)
{
    if (out)
        *out = NULL;
    if (sp_sandbox_is_remote(sb)) {
        /* --tag=T: an empty tag reaches the store's check, as locally. */
        cleanup_free char *opt = tag ? sp_xasprintf("--tag=%s", tag) : NULL;
        const char *args[] = {opt, NULL};
        return peer_record(out, sb, "snapshot", NULL, args, NULL, err);
    }
    sp_sandbox_snap *h = NULL;
    int r = local_open(&h, sb, err);
    if (r == 0)
        r = sp_snapshot_create(out, h->store, tag, err);
    sp_sandbox_snapshot_close(h);
    return r;
}

int sp_sandbox_snapshot_list(sp_snapshots **out, sp_sandbox *sb, sp_error **err)
{
    *out = NULL;
    if (sp_sandbox_is_remote(sb)) {
        cJSON *j = NULL;
        int r = peer_json(&j, sb, "snapshots", NULL, NULL, err);
        if (r < 0)
            return r;
        const cJSON *a = sp_json_get(j, "snapshots");
        sp_snapshots *l = sp_xcalloc(1, sizeof(*l));
        size_t cap = (size_t)cJSON_GetArraySize(a);
        l->v = cap ? sp_xcalloc(cap, sizeof(*l->v)) : NULL;
        const cJSON *it;
        cJSON_ArrayForEach(it, a)
        {
            sp_snapshot *s = rec_snapshot(it);
            if (s)
                l->v[l->n++] = s;
        }
        cJSON_Delete(j);
        if (!cJSON_IsArray(a) || l->n != cap) {
            sp_snapshots_free(l);
            return sp_err_set(err, SP_ERROR, 0,
                              "sandbox %s: the peer's `sandpod snapshots` gave no list",
                              sp_sandbox_name(sb));
        }
        *out = l;
        return 0;
    }
    sp_sandbox_snap *h = NULL;
    int r = local_open(&h, sb, err);
    if (r == 0)
        r = sp_snapshot_list(out, h->store, err);
    sp_sandbox_snapshot_close(h);
    return r;
}

int sp_sandbox_snapshot_get(sp_snapshot **out, sp_sandbox *sb, const char *ref, sp_error **err)
{
    *out = NULL;
    int r = check_ref(ref, "get", err);
    if (r < 0)
        return r;
    if (sp_sandbox_is_remote(sb)) {
        const char *args[] = {"--", ref, NULL};
        return peer_record(out, sb, "snapshots", NULL, args, NULL, err);
    }
    sp_sandbox_snap *h = NULL;
    r = local_open(&h, sb, err);
    if (r == 0)
        r = sp_snapshot_get(out, h->store, ref, err);
    sp_sandbox_snapshot_close(h);
    return r;
}

int sp_sandbox_snapshot_restore(sp_snapshot **out, sp_sandbox *sb, const char *ref, sp_error **err)
{
    if (out)
        *out = NULL;
    int r = check_ref(ref, "restore", err);
    if (r < 0)
        return r;
    if (sp_sandbox_is_remote(sb)) {
        const char *args[] = {"--", ref, NULL};
        return peer_record(out, sb, "restore", NULL, args, "restored", err);
    }
    sp_sandbox_snap *h = NULL;
    r = local_open(&h, sb, err);
    if (r == 0)
        r = sp_snapshot_restore(out, h->store, ref, err);
    sp_sandbox_snapshot_close(h);
    return r;
}

int sp_sandbox_snapshot_delete(sp_sandbox *sb, const char *ref, sp_error **err)
{
    int r = check_ref(ref, "delete", err);
    if (r < 0)
        return r;
    if (sp_sandbox_is_remote(sb)) {
        const char *args[] = {"--", ref, NULL};
        cJSON *j = NULL;
        r = peer_json(&j, sb, "snapshot", "rm", args, err);
        cJSON_Delete(j);
        return r;
    }
    sp_sandbox_snap *h = NULL;
    r = local_open(&h, sb, err);
    if (r == 0)
        r = sp_snapshot_delete(h->store, ref, err);
    sp_sandbox_snapshot_close(h);
    return r;
}

int sp_sandbox_snapshot_diff(sp_snapdiff **out, sp_sandbox *sb, const char *from, const char *to,
                             const sp_snapshot_diff_opts *opts, sp_error **err)
{
    *out = NULL;
    /* Checked before a store is opened or a peer asked. */
    int r = SP_OPTS_CHECK(opts, 1, SP_SNAPSHOT_DIFF_OPTS_VERSION, "sp_snapshot_diff_opts", err);
    if (r < 0 || (r = check_ref(from, "diff", err)) < 0)
        return r;
    if (sp_sandbox_is_remote(sb)) {
        char ctx[24];
        const char *args[8];
        size_t n = 0;
        if (opts && opts->patch) {
            args[n++] = "--patch";
            if (opts->context_lines) {
                snprintf(ctx, sizeof(ctx), "--unified=%u", opts->context_lines);
                args[n++] = ctx;
            }
        }
        args[n++] = "--";
        args[n++] = from;
        if (to)
            args[n++] = to;
        args[n] = NULL;
        cJSON *j = NULL;
        if ((r = peer_json(&j, sb, "diff", NULL, args, err)) < 0)
            return r;
        *out = rec_diff(j);
        cJSON_Delete(j);
        if (!*out)
            return sp_err_set(err, SP_ERROR, 0,
                              "sandbox %s: the peer's `sandpod diff` gave no diff",
                              sp_sandbox_name(sb));
        return 0;
    }
    sp_sandbox_snap *h = NULL;
    r = local_open(&h, sb, err);
    if (r == 0)
        r = sp_snapshot_diff(out, h->store, from, to, opts, err);
    sp_sandbox_snapshot_close(h);
    return r;
}
