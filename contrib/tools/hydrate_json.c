/* JSON views of hydration results. Public API and cJSON only. */
#include <stdint.h>

#include "fs_json.h"
#include "json.h"
#include "hydrate_json.h"

static bool push(cJSON *arr, cJSON *item)
{
    if (!item)
        return false;
    if (!cJSON_AddItemToArray(arr, item)) {
        cJSON_Delete(item);
        return false;
    }
    return true;
}

cJSON *sp_json_mount(const sp_mount *m)
{
    cJSON *o = cJSON_CreateObject();
    const char *dst = m->mount_path && *m->mount_path ? m->mount_path : ".";
    bool ok = o && sp_json_add_string(o, "src", m->host_path) &&
              sp_json_add_string(o, "dst", dst) &&
              sp_json_add(o, "include", sp_json_strv_map(m->include, sp_json_string)) &&
              sp_json_add(o, "exclude", sp_json_strv_map(m->exclude, sp_json_string)) &&
              sp_json_add_u64(o, "max_bytes", m->max_bytes) &&
              cJSON_AddBoolToObject(o, "follow_symlinks", m->follow_symlinks) &&
              cJSON_AddBoolToObject(o, "gitignore", m->gitignore) &&
              sp_json_add_string(o, "secrets", m->keep_secrets ? "keep" : "strip");
    return sp_json_finish(o, ok);
}

static cJSON *mount_stats(const sp_hydrate_mount_stats *s)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && sp_json_add_string(o, "host_path", s->host_path) &&
              sp_json_add_string(o, "mount_path", s->mount_path) &&
              sp_json_add_u64(o, "files", s->files) && sp_json_add_u64(o, "dirs", s->dirs) &&
              sp_json_add_u64(o, "symlinks", s->symlinks) && sp_json_add_u64(o, "bytes", s->bytes);
    return sp_json_finish(o, ok);
}

static cJSON *skip(const sp_hydrate_skip *s)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && sp_json_add_string(o, "path", s->path) &&
              sp_json_add_u64(o, "mount", s->mount) &&
              sp_json_add_string(o, "reason", sp_hydrate_skip_name(s->reason)) &&
              sp_json_add_string(o, "detail", s->detail);
    return sp_json_finish(o, ok);
}

static cJSON *rewrite(const sp_hydrate_rewrite *w)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && sp_json_add_string(o, "path", w->path) &&
              sp_json_add_u64(o, "mount", w->mount) && sp_json_add_string(o, "detail", w->detail);
    return sp_json_finish(o, ok);
}

static cJSON * override(const sp_hydrate_override *v)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && sp_json_add_string(o, "path", v->path) &&
              sp_json_add_u64(o, "mount", v->mount) &&
              sp_json_add_i64(o, "previous", (int64_t)v->previous);
    return sp_json_finish(o, ok);
}

static cJSON *entry(const sp_hydrate_entry *e)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && sp_json_add_string(o, "path", e->path) &&
              sp_json_add_string(o, "type", sp_fs_type_name(e->type)) &&
              sp_json_add_u64(o, "size", e->size) && sp_json_add_u64(o, "mount", e->mount);
    return sp_json_finish(o, ok);
}

cJSON *sp_json_hydrate_result(const sp_hydrate_result *r, bool with_entries)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok =
        sp_json_add_u64(o, "files", r->files) && sp_json_add_u64(o, "dirs", r->dirs) &&
        sp_json_add_u64(o, "symlinks", r->symlinks) && sp_json_add_u64(o, "bytes", r->bytes) &&
        sp_json_add_u64(o, "excluded", r->excluded) &&
        sp_json_add_u64(o, "hardlinks", r->hardlinks) &&
        sp_json_add_u64(o, "reflinked", r->reflinked) && sp_json_add_u64(o, "sparse", r->sparse) &&
        sp_json_add_i64(o, "elapsed_ms", r->elapsed_ms);
    /* The lists belong to o from the start, so a failure frees everything. */
    cJSON *mounts = ok ? cJSON_AddArrayToObject(o, "mounts") : NULL;
    cJSON *skipped = mounts ? cJSON_AddArrayToObject(o, "skipped") : NULL;
    cJSON *rewritten = skipped ? cJSON_AddArrayToObject(o, "rewritten") : NULL;
    cJSON *overridden = rewritten ? cJSON_AddArrayToObject(o, "overridden") : NULL;
    cJSON *entries = NULL;
    ok = overridden != NULL;
    if (ok && with_entries)
        ok = (entries = cJSON_AddArrayToObject(o, "entries")) != NULL;
    for (size_t i = 0; ok && i < r->n_mounts; i++)
        ok = push(mounts, mount_stats(&r->mounts[i]));
    for (size_t i = 0; ok && i < r->n_skipped; i++)
        ok = push(skipped, skip(&r->skipped[i]));
    for (size_t i = 0; ok && i < r->n_rewritten; i++)
        ok = push(rewritten, rewrite(&r->rewritten[i]));
    for (size_t i = 0; ok && i < r->n_overridden; i++)
        ok = push(overridden, override(&r->overridden[i]));
    for (size_t i = 0; ok && entries && i < r->n_entries; i++)
        ok = push(entries, entry(&r->entries[i]));
    return sp_json_finish(o, ok);
}
