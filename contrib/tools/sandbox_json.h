/**
 * @file sandbox_json.h
 * @brief JSON views of sandboxes and command results, shared by the CLI, the
 *        model tool suite and the MCP server.
 *
 * Like fs_json.h: every `sp_json_*` constructor returns a new cJSON value the
 * caller owns and frees with cJSON_Delete(), or NULL when memory ran out; none
 * takes ownership of its arguments; strings are valid UTF-8 (bytes that are
 * not appear as `\xNN`, see sp_json_sanitize()).
 */
#ifndef SANDPOD_SANDBOX_JSON_H
#define SANDPOD_SANDBOX_JSON_H

#include <stdbool.h>

#include <cJSON.h>

#include "sandpod/sandbox.h"

#ifdef __cplusplus
extern "C" {
#endif

/** "none", "default" or "host"; "unknown" for anything else. */
const char *sp_json_network_name(sp_network n);

/**
 * The outcome of a command: `{exit_code, timed_out, duration_ms, stdout,
 * stderr, stdout_truncated, stderr_truncated, stdout_bytes, stderr_bytes}`.
 * `stdout`/`stderr` are the capped texts; `*_bytes` count everything the
 * command wrote.
 */
cJSON *sp_json_run_result(const sp_run_result *r);

/** What sp_json_sandbox_ext() puts in; OR them together. */
enum {
    /** The `config` object. */
    SP_JSON_SANDBOX_CONFIG = 1 << 0,
    /** `env` values as given to `-e`; without it each is `KEY=***`. */
    SP_JSON_SANDBOX_SECRETS = 1 << 1,
};

/**
 * A sandbox: `{name, state, running, exit_code, oom_killed, container,
 * image, created_at, workspace, state_dir}`, and with SP_JSON_SANDBOX_CONFIG
 * a `config` object `{workdir, user, env, network, memory_bytes, nano_cpus,
 * pids_limit, tmpfs_bytes, writable_root, cap_add}`.
 *
 * `env` keeps each variable's name but not its value (`KEY=***`: values
 * passed with `-e` are often tokens and passwords) unless `flags` has
 * SP_JSON_SANDBOX_SECRETS; an entry without `=` is a bare name and is shown
 * as it is.
 *
 * `st` is what Podman said (sp_sandbox_status_get()); NULL gives state
 * "unknown", running false and exit_code null. `exit_code` is null unless
 * the container has exited. `created_at` (RFC 3339, UTC) and the config come
 * from the sandbox's sandbox.json; a field it lacks is null.
 */
cJSON *sp_json_sandbox_ext(const sp_sandbox *sb, const sp_sandbox_status *st, unsigned flags);

/** sp_json_sandbox_ext() with SP_JSON_SANDBOX_CONFIG when `config`: env
 *  values masked. */
cJSON *sp_json_sandbox(const sp_sandbox *sb, const sp_sandbox_status *st, bool config);

#ifdef __cplusplus
}
#endif

#endif
