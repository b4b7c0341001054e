/**
 * @file snapshot_json.h
 * @brief JSON views of snapshot results, shared by the CLI, the model tool
 *        suite and the MCP server.
 *
 * Same conventions as fs_json.h: every constructor returns a new cJSON
 * value the caller frees with cJSON_Delete(), or NULL when memory ran out;
 * strings are sanitized UTF-8; 64-bit counts are exact integer literals;
 * permission bits are strings of four octal digits ("0644").
 */
#ifndef SANDPOD_SNAPSHOT_JSON_H
#define SANDPOD_SNAPSHOT_JSON_H

#include <cJSON.h>

#include "sandpod/snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

/** `{id, tag, commit, created_at, created_at_ns, root, store, files, dirs,
 *  symlinks, bytes}`; tag is null when there is none. */
cJSON *sp_json_snapshot(const sp_snapshot *s);

/** `{snapshots: [snapshot...], count}`, oldest first. */
cJSON *sp_json_snapshots(const sp_snapshots *l);

/** One change: `{path, change, old_type, new_type, old_mode, new_mode,
 *  content_changed}`; the old_* fields are left out for an added path and
 *  the new_* ones for a deleted path. `change` is one of "added",
 *  "modified", "deleted", "type_changed". */
cJSON *sp_json_snapshot_change(const sp_snapshot_change *c);

/** `{from, to, changes: [change...], count, added, modified, deleted,
 *  type_changed}` plus `patch` when the diff holds one. */
cJSON *sp_json_snapdiff(const sp_snapdiff *d);

/** `{entries, files_hashed, bytes_hashed, objects_written, paths_changed,
 *  full_walk, elapsed_ms}`: what an operation cost. */
cJSON *sp_json_snapstore_stats(const sp_snapstore_stats *st);

/** `{objects_removed, bytes_removed, objects_kept}`. */
cJSON *sp_json_snapstore_gc(const sp_snapstore_gc_result *r);

#ifdef __cplusplus
}
#endif

#endif
