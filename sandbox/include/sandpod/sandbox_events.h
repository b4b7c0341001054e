/**
 * @file sandpod/sandbox_events.h
 * @brief Recording what was done to a sandbox in its events.jsonl.
 *
 * A sandbox's state folder holds `events.jsonl`: one JSON object per line,
 * for the model tool calls (records `"event": "start"` and `"end"`) and
 * for commands run by other means, such as the CLI's `sh`, `exec` and `fs`
 * (`"event": "command"`). Every record has `"ts"` (UTC, RFC 3339) and
 * `"call"`: a number unique within the file that increases from one record
 * to the next, across processes and threads writing at the same time (the
 * start and end of one tool call share theirs).
 */
#ifndef SANDPOD_SANDBOX_EVENTS_H
#define SANDPOD_SANDBOX_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "sandpod/error.h"
#include "sandpod/sandbox.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SP_SANDBOX_EVENT_VERSION 1

/** One command's record. */
typedef struct sp_sandbox_event {
    unsigned version;
    /** What ran, e.g. "sh", "exec", "fs write" (required). */
    const char *command;
    /** Who ran it, e.g. "cli" (NULL: "library"). */
    const char *source;
    /** One line for a person, e.g. the command line (may be NULL; cut at
     *  500 bytes). */
    const char *summary;
    /** NULL-terminated paths it named (may be NULL). */
    const char *const *paths;
    /** It did what was asked. */
    bool ok;
    /** 0, or the sp_code of sandpod's failure. */
    int code;
    /** The exit status it ended with (the command's, or the CLI's). */
    int status;
    /** How long it took. */
    int64_t duration_ms;
} sp_sandbox_event;

#define SP_SANDBOX_EVENT_INIT                                                                      \
    {                                                                                              \
        .version = SP_SANDBOX_EVENT_VERSION                                                        \
    }

/**
 * Append a `"command"` record for `ev` to the sandbox's events.jsonl.
 *
 * @param call  when not NULL, set to the record's number
 * @return 0; SP_EINVAL for a bad version or no command; or the error of
 *         opening, locking or writing the file.
 */
int sp_sandbox_event_append(uint64_t *call, sp_sandbox *sb, const sp_sandbox_event *ev,
                            sp_error **err);

#ifdef __cplusplus
}
#endif

#endif
