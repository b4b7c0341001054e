/* JSON views of snapshot results. Only the public API and cJSON. */
#include <stdio.h>

#include "fs_json.h"
#include "json.h"
#include "snapshot_json.h"

/* cJSON_AddItemToObject that owns (and frees) the item on failure. */
static bool add_mode(cJSON *obj, const char *key, unsigned mode)
{
    char buf[8];
    snprintf(buf, sizeof(buf), "%04o", mode & 07777u);
    return sp_json_add(obj, key, cJSON_CreateString(buf));
}

cJSON *sp_json_snapshot(const sp_snapshot *s)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok = sp_json_add_string(o, "id", s->id) && sp_json_add_string(o, "tag", s->tag) &&
              sp_json_add_string(o, "commit", s->commit) &&
              sp_json_add_string(o, "created_at", s->created_at) &&
              sp_json_add_i64(o, "created_at_ns", s->created_at_ns) &&
              sp_json_add_string(o, "root", s->root) && sp_json_add_string(o, "store", s->store) &&
              sp_json_add_u64(o, "files", s->files) && sp_json_add_u64(o, "dirs", s->dirs) &&
              sp_json_add_u64(o, "symlinks", s->symlinks) && sp_json_add_u64(o, "bytes", s->bytes);
    return sp_json_finish(o, ok);
}

cJSON *sp_json_snapshots(const sp_snapshots *l)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON *a = cJSON_AddArrayToObject(o, "snapshots");
    bool ok = a != NULL;
    for (size_t i = 0; ok && i < l->n; i++) {
        cJSON *it = sp_json_snapshot(l->v[i]);
        ok = it && cJSON_AddItemToArray(a, it);
        if (!ok)
            cJSON_Delete(it);
    }
    ok = ok && sp_json_add_u64(o, "count", l->n);
    return sp_json_finish(o, ok);
}

cJSON *sp_json_snapshot_change(const sp_snapshot_change *c)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok = sp_json_add_string(o, "path", c->path) &&
              sp_json_add_string(o, "change", sp_snapshot_change_name(c->kind));
    if (ok && c->kind != SP_CHANGE_ADDED)
        ok = sp_json_add_string(o, "old_type", sp_fs_type_name(c->old_type)) &&
             add_mode(o, "old_mode", c->old_mode);
    if (ok && c->kind != SP_CHANGE_DELETED)
        ok = sp_json_add_string(o, "new_type", sp_fs_type_name(c->new_type)) &&
             add_mode(o, "new_mode", c->new_mode);
    ok = ok && sp_json_add(o, "content_changed", cJSON_CreateBool(c->content_changed));
    return sp_json_finish(o, ok);
}

cJSON *sp_json_snapdiff(const sp_snapdiff *d)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok = sp_json_add_string(o, "from", d->from) && sp_json_add_string(o, "to", d->to);
    cJSON *a = ok ? cJSON_AddArrayToObject(o, "changes") : NULL;
    ok = a != NULL;
    for (size_t i = 0; ok && i < d->n; i++) {
        cJSON *it = sp_json_snapshot_change(&d->v[i]);
        ok = it && cJSON_AddItemToArray(a, it);
        if (!ok)
            cJSON_Delete(it);
    }
    ok = ok && sp_json_add_u64(o, "count", d->n) && sp_json_add_u64(o, "added", d->added) &&
         sp_json_add_u64(o, "modified", d->modified) && sp_json_add_u64(o, "deleted", d->deleted) &&
         sp_json_add_u64(o, "type_changed", d->type_changed);
    if (ok && d->patch)
        ok = sp_json_add_string(o, "patch", d->patch);
    return sp_json_finish(o, ok);
}

cJSON *sp_json_snapstore_stats(const sp_snapstore_stats *st)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok = sp_json_add_u64(o, "entries", st->entries) &&
              sp_json_add_u64(o, "files_hashed", st->files_hashed) &&
              sp_json_add_u64(o, "bytes_hashed", st->bytes_hashed) &&
              sp_json_add_u64(o, "objects_written", st->objects_written) &&
              sp_json_add_u64(o, "paths_changed", st->paths_changed) &&
              sp_json_add(o, "full_walk", cJSON_CreateBool(st->full_walk)) &&
              sp_json_add_i64(o, "elapsed_ms", st->elapsed_ms);
    return sp_json_finish(o, ok);
}

cJSON *sp_json_snapstore_gc(const sp_snapstore_gc_result *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok = sp_json_add_u64(o, "objects_removed", r->objects_removed) &&
              sp_json_add_u64(o, "bytes_removed", r->bytes_removed) &&
              sp_json_add_u64(o, "objects_kept", r->objects_kept);
    return sp_json_finish(o, ok);
}
