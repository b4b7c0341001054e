/**
 * @file hydrate_json.h
 * @brief JSON views of hydration results and mounts, shared by the CLI, the
 *        tool suite and the MCP server.
 *
 * Same rules as fs_json.h: every constructor returns a new cJSON value the
 * caller frees with cJSON_Delete(), or NULL when memory ran out; none takes
 * ownership of its argument; strings are sanitized to valid UTF-8.
 */
#ifndef SANDPOD_HYDRATE_JSON_H
#define SANDPOD_HYDRATE_JSON_H

#include <stdbool.h>

#include <cJSON.h>

#include "sandpod/hydrate.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * `{src, dst, include: [..], exclude: [..], max_bytes, follow_symlinks,
 * gitignore, secrets}`:
 * a mount as given (dst "." for the workspace root, max_bytes 0 = no cap,
 * secrets "strip" or "keep").
 */
cJSON *sp_json_mount(const sp_mount *m);

/**
 * The result of a hydration:
 * `{files, dirs, symlinks, bytes, excluded, hardlinks, reflinked, sparse,
 *   elapsed_ms,
 *   mounts: [{host_path, mount_path, files, dirs, symlinks, bytes}],
 *   skipped: [{path, mount, reason, detail}],
 *   rewritten: [{path, mount, detail}],
 *   overridden: [{path, mount, previous}]}`
 * where `reason` is sp_hydrate_skip_name() ("secret" for a file left out
 * because it holds credentials), `rewritten` lists the files copied with
 * their credentials taken out, and `previous` is the index of
 * the mount that lost, or -1 for what the workspace held before. With
 * `with_entries`, also `entries: [{path, type, size, mount}]` (every copied
 * entry, sorted by path).
 */
cJSON *sp_json_hydrate_result(const sp_hydrate_result *r, bool with_entries);

#ifdef __cplusplus
}
#endif

#endif
