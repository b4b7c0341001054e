/* Snapshots of a sandbox on another engine: the store is the peer's,
 * beside the workload, and each operation is the peer's own `sandpod`
 * command on it, whose JSON answer becomes the library's typed records
 * (the remote kind's snapshot entries, kind.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base.h"
#include "json.h"
#include "remote_kind.h"
#include "sandbox_internal.h"

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
    int r = sp_remote_peer_command(sb, argv, -1, fd, -1, &code, err);
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

int sp_remote_snap_create(sp_snapshot **out, sp_sandbox *sb, const char *tag, sp_error **err)
{
    /* --tag=T: an empty tag reaches the store's check, as locally. */
    cleanup_free char *opt = tag ? sp_xasprintf("--tag=%s", tag) : NULL;
    const char *args[] = {opt, NULL};
    return peer_record(out, sb, "snapshot", NULL, args, NULL, err);
}

int sp_remote_snap_list(sp_snapshots **out, sp_sandbox *sb, sp_error **err)
{
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

int sp_remote_snap_get(sp_snapshot **out, sp_sandbox *sb, const char *ref, sp_error **err)
{
    const char *args[] = {"--", ref, NULL};
    return peer_record(out, sb, "snapshots", NULL, args, NULL, err);
}

int sp_remote_snap_restore(sp_snapshot **out, sp_sandbox *sb, const char *ref, sp_error **err)
{
    const char *args[] = {"--", ref, NULL};
    return peer_record(out, sb, "restore", NULL, args, "restored", err);
}

int sp_remote_snap_delete(sp_sandbox *sb, const char *ref, sp_error **err)
{
    const char *args[] = {"--", ref, NULL};
    cJSON *j = NULL;
    int r = peer_json(&j, sb, "snapshot", "rm", args, err);
    cJSON_Delete(j);
    return r;
}

int sp_remote_snap_diff(sp_snapdiff **out, sp_sandbox *sb, const char *from, const char *to,
                        const sp_snapshot_diff_opts *opts, sp_error **err)
{
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
    int r = peer_json(&j, sb, "diff", NULL, args, err);
    if (r < 0)
        return r;
    *out = rec_diff(j);
    cJSON_Delete(j);
    if (!*out)
        return sp_err_set(err, SP_ERROR, 0, "sandbox %s: the peer's `sandpod diff` gave no diff",
                          sp_sandbox_name(sb));
    return 0;
}
