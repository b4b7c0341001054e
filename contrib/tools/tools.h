/**
 * @file tools.h
 * @brief The model-facing tool suite: tool specs, argument checking,
 *        dispatch, approval policy, output caps and events.
 *
 * An sp_tools context is made over a sandbox (every tool: files, commands,
 * sessions, snapshots) or over a bare folder (the filesystem tools only,
 * plus snapshots when a store is named). A call takes the tool's name and
 * its arguments as JSON text and answers with one JSON object:
 *
 *     {"ok": true|false, "message": "...", "value": ..., "truncated": bool,
 *      "changes": [{"path", "action", "bytes"}...],
 *      "error": {"code": "not_found", "reason": "none", "message": "..."}}
 *                                                        (failures only)
 *
 * `message` is the text meant for the model (a file's numbered lines, a
 * tree, a command's output); `value` holds the same answer as structured
 * data; `truncated` says that a cap cut something; `changes` lists the files
 * a call created, modified, moved or deleted and the bytes it wrote. Error
 * codes are the names of sp_json_code_name() ("invalid", "not_found",
 * "escape", ...): coarse and few; `reason` keeps the library's detail,
 * sp_reason_name() of sp_error.reason ("is_directory", "not_directory",
 * "not_empty", "exists", "patch_parse", "patch_conflict", "too_large",
 * "stale", "not_text", "not_unique", ...; "none" when nothing more is
 * known). Error messages say how to recover.
 *
 * Every call's arguments are checked against the tool's JSON Schema before
 * anything runs: required fields, types, ranges and enums; an unknown field
 * is refused with a message naming it; a NUL character (\u0000) in any
 * string is refused.
 *
 * Threads: one context is used by one thread at a time, except
 * sp_tools_cancel(), which another thread may call while a call runs, and
 * the read-only file tools (read_file, stat, list_dir, glob, grep), which
 * other threads may call beside any call of the context (the MCP server
 * does); the event callback may then be called from several threads. The
 * stale-edit records (see sp_tools_opts.no_stale_check), which read_file
 * writes, are guarded by their own mutex.
 * Specs (sp_tools_specs(), sp_tools_list()) are immutable and may be read
 * from any thread.
 */
#ifndef SANDPOD_TOOLS_H
#define SANDPOD_TOOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandpod/error.h"
#include "sandpod/fs.h"
#include "sandpod/sandbox.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sp_tools sp_tools;

/** How much harm a tool can do, which the approval policy acts on. */
typedef enum sp_tool_tier {
    SP_TOOL_SAFE = 0,      /**< reads only */
    SP_TOOL_CAUTIOUS = 1,  /**< modifies existing files (or the snapshot store) */
    SP_TOOL_DANGEROUS = 2, /**< creates, moves or deletes files, runs commands */
} sp_tool_tier;

/** "safe", "cautious", "dangerous". */
const char *sp_tool_tier_name(sp_tool_tier t);

/** When a call must be approved before it runs. */
typedef enum sp_tools_approval {
    /** Never ask: every call runs (the default). */
    SP_APPROVAL_NEVER = 0,
    /** Only safe (read-only) tools run without asking. */
    SP_APPROVAL_UNTRUSTED = 1,
    /** Safe and cautious tools run; dangerous ones ask first. */
    SP_APPROVAL_ON_REQUEST = 2,
} sp_tools_approval;

/** Parse "never", "untrusted" or "on-request". @return 0 or SP_EINVAL */
int sp_tools_approval_parse(sp_tools_approval *out, const char *s);
const char *sp_tools_approval_name(sp_tools_approval a);

/** Where filesystem tools may go. */
typedef enum sp_tools_fs_mode {
    /** Beneath the workspace (or --root folder) only. The default. */
    SP_FS_MODE_RESTRICTED = 0,
    /** Any absolute host path, as the process's user. Only for a bare
     *  folder without a container (sp_tools_open_root()), for trusted use:
     *  nothing contains the tools then. */
    SP_FS_MODE_UNRESTRICTED = 1,
} sp_tools_fs_mode;

/** Parse "restricted" or "unrestricted". @return 0 or SP_EINVAL */
int sp_tools_fs_mode_parse(sp_tools_fs_mode *out, const char *s);

/** The answer of an approval callback. */
typedef enum sp_tools_verdict {
    SP_VERDICT_DENY = 0,
    SP_VERDICT_ALLOW = 1,
    /** Allow this call and every later call of the same tool. */
    SP_VERDICT_ALLOW_ALWAYS = 2,
    /** Nobody could be asked (no terminal, a client without elicitation):
     *  denied, with a message that says so. */
    SP_VERDICT_UNAVAILABLE = 3,
} sp_tools_verdict;

/** What an approval callback is asked about. Valid during the callback. */
typedef struct sp_tools_approval_request {
    const char *tool;
    sp_tool_tier tier;
    /** One line for a person: "shell: rm -rf build", "write_file: a/b.txt". */
    const char *summary;
    /** The call's arguments as JSON text. */
    const char *args_json;
} sp_tools_approval_request;

typedef sp_tools_verdict (*sp_tools_approve_fn)(void *userdata,
                                                const sp_tools_approval_request *req);

/** One structured event: a call started or ended. Valid during the callback. */
typedef struct sp_tools_event {
    const char *event; /**< "start" or "end" */
    const char *tool;
    uint64_t call; /**< counts the context's calls from 1 */
    sp_tool_tier tier;
    bool ok;                  /**< end: the call succeeded */
    int code;                 /**< end: 0 or the sp_code of the failure */
    int64_t duration_ms;      /**< end */
    uint64_t bytes;           /**< end: bytes of output plus bytes written */
    bool truncated;           /**< end: a cap cut the output */
    const char *const *paths; /**< NULL-terminated paths the call named or touched */
    const char *json;         /**< the event as one JSON line, without a newline */
} sp_tools_event;

typedef void (*sp_tools_event_fn)(void *userdata, const sp_tools_event *ev);

/** 2 added max_read_bytes, max_write_bytes, timeout_ms and no_stale_check;
 *  version 1 structs (which end at max_line_bytes) are still accepted. */
#define SP_TOOLS_OPTS_VERSION 2

/** Options of a tools context. Zero values select the defaults shown. */
typedef struct sp_tools_opts {
    unsigned version;
    sp_tools_approval approval;
    /** Asked when the policy wants approval; NULL = such calls are denied
     *  with a message that says why. */
    sp_tools_approve_fn approve;
    void *approve_userdata;
    /** Called at the start and end of every call (may be NULL). */
    sp_tools_event_fn on_event;
    void *event_userdata;
    /** Append events here as JSON lines; NULL = `<state dir>/events.jsonl`
     *  for a sandbox, none for a bare folder. "" = none. */
    const char *events_path;
    /** See sp_tools_fs_mode; refused with a sandbox. */
    sp_tools_fs_mode fs_mode;
    /** NULL-terminated tool names to leave out ("snapshot", "shell", ...). */
    const char *const *disabled;
    /** Refuse every change to files (the write tools are left out). */
    bool read_only;
    /** NULL-terminated globs of paths the tools cannot see (see sp_fs_opts). */
    const char *const *deny;
    /** Snapshot store of a bare folder (NULL = no snapshot tools there). A
     *  sandbox always uses `<state dir>/snapshots.git`. */
    const char *snapshot_store;
    /** Caps per output stream of shell: bytes (0 = 8192), lines (0 = 200);
     *  head and tail are kept, with a marker saying what was left out. */
    size_t max_output_bytes;
    size_t max_output_lines;
    /** Cap on the text of one filesystem answer, in bytes (0 = 65536). */
    size_t max_text_bytes;
    /** Longest line read_file, grep and list_dir show (0 = 500 bytes). */
    unsigned max_line_bytes;
    /* Version 2. */
    /** Largest binary file read_file returns (as base64), in bytes (0 =
     *  4 MiB); a larger one fails with reason too_large. */
    size_t max_read_bytes;
    /** Largest file the write tools leave (write_file, edit_file, insert,
     *  apply_patch), in bytes (0 = 4 MiB); over it: reason too_large. */
    size_t max_write_bytes;
    /** Timeout of a shell call that gives no timeout_ms, in ms (0 = 60000). */
    unsigned timeout_ms;
    /** Turn the stale-edit check off: edit_file, insert, write_file
     *  (overwrite) and apply_patch then change files the model read before
     *  they changed on disk. See "Stale edits" in
     *  contrib/docs/tools-and-mcp.md. */
    bool no_stale_check;
} sp_tools_opts;

#define SP_TOOLS_OPTS_INIT                                                                         \
    {                                                                                              \
        .version = SP_TOOLS_OPTS_VERSION                                                           \
    }

/**
 * Make a context over a sandbox: every tool. The sandbox is borrowed: it
 * must outlive the context and not be used by another thread meanwhile.
 *
 * @return 0; SP_EINVAL (unrestricted fs_mode, bad options); the errors of
 *         opening the workspace
 */
int sp_tools_open_sandbox(sp_tools **out, sp_sandbox *sb, const sp_tools_opts *opts,
                          sp_error **err);

/**
 * Make a context over a bare folder: the filesystem tools (and snapshot
 * tools when opts->snapshot_store is set); no command tools.
 *
 * @return 0; SP_ENOTFOUND / SP_EINVAL for a bad root
 */
int sp_tools_open_root(sp_tools **out, const char *root, const sp_tools_opts *opts, sp_error **err);

/**
 * Make a context over a bare folder (as sp_tools_open_root()) whose
 * command tools (shell, exec_command, write_stdin) run through a
 * workload's agent: `agent` comes from sp_sandbox_open_agent() on the same
 * folder, and stays the caller's to free after the context. Snapshots are
 * taken without pausing the workload; no edit lock is taken (the caller
 * is the one process that edits).
 *
 * @return 0; SP_EINVAL (no agent, unrestricted fs_mode); the errors of
 *         sp_tools_open_root()
 */
int sp_tools_open_agent(sp_tools **out, const char *root, sp_sandbox *agent,
                        const sp_tools_opts *opts, sp_error **err);

/** Where a context made by sp_tools_open_later() gets its sandbox. */
typedef struct sp_tools_later {
    /** Make, or open and start, the sandbox. Called at the first call,
     *  on that call's thread, while every other call waits; once more at
     *  a later call if it failed. *sb stays the caller's: it must outlive
     *  the context. */
    int (*open)(void *userdata, sp_sandbox **sb, sp_error **err);
    /** How far `open` has got, for the calls that wait ("copying 1200 of
     *  5000 files"), malloc'd; may return NULL. The field may be NULL. */
    char *(*status)(void *userdata);
    void *userdata;
} sp_tools_later;

/**
 * Make a context over a sandbox that does not exist yet: it lists every
 * tool a sandbox context would, and gets its sandbox from later->open()
 * at the first call (an MCP session that only lists tools makes none).
 * Calls that come while it is made wait for it; when it fails, each of
 * them fails with its message. *later is copied.
 *
 * @return 0; SP_EINVAL (no later->open, unrestricted fs_mode)
 */
int sp_tools_open_later(sp_tools **out, const sp_tools_later *later, const sp_tools_opts *opts,
                        sp_error **err);

/** Whether calls can run at once: false while a context made by
 *  sp_tools_open_later() has no sandbox yet. */
bool sp_tools_ready(sp_tools *t);

/** While such a context's sandbox is being made: what later->status
 *  says, or a line saying that it is (malloc'd); NULL otherwise. */
char *sp_tools_pending_status(sp_tools *t);

/** Free a context; kills the sessions it started. Accepts NULL. */
void sp_tools_free(sp_tools *t);

/** Replace the approval callback (the MCP server installs its own). */
void sp_tools_set_approver(sp_tools *t, sp_tools_approve_fn fn, void *userdata);

/**
 * Run one call.
 *
 * @param result  receives the result object as JSON text (free()); set for
 *                tool failures too (ok false)
 * @param name    the tool's name
 * @param args    the arguments: a JSON object (NULL or "" = {})
 * @param len     bytes of args
 * @return 0 when the tool succeeded, else the sp_code of the failure
 *         (the result says the same); *result is always set
 */
int sp_tools_call(char **result, sp_tools *t, const char *name, const char *args, size_t len);

/**
 * Run a freeform call (an OpenAI custom tool): `input` is the raw text the
 * model wrote, e.g. a patch for apply_patch. Tools without a freeform form
 * answer SP_EINVAL.
 */
int sp_tools_call_freeform(char **result, sp_tools *t, const char *name, const char *input,
                           size_t len);

/**
 * Cancel the call running on another thread (not a read-only file tool
 * running beside it): a running shell command is killed (its partial
 * output is returned with ok false), so is the command of an exec_command
 * and the session a write_stdin talks to; a wait for approval is denied;
 * calls that end soon by themselves finish. Does
 * nothing when no call runs. May block for a few seconds while the kill
 * runs in the container.
 */
void sp_tools_cancel(sp_tools *t);

/** Whether the context offers a tool (enabled and available). */
bool sp_tools_has(const sp_tools *t, const char *name);

/** Spec formats. */
typedef enum sp_tools_format {
    /** The MCP tools/list result: {"tools": [{name, title, description,
     *  inputSchema, annotations}]}. */
    SP_TOOLS_FORMAT_MCP = 0,
    /** OpenAI Responses function tools: [{type:"function", name,
     *  description, parameters, strict:false}]. */
    SP_TOOLS_FORMAT_OPENAI = 1,
    /** As SP_TOOLS_FORMAT_OPENAI, but apply_patch as a freeform custom tool
     *  with a Lark grammar: {type:"custom", name, description, format:
     *  {type:"grammar", syntax:"lark", definition}}. */
    SP_TOOLS_FORMAT_OPENAI_FREEFORM = 2,
    /** Anthropic tools: [{name, description, input_schema}]. */
    SP_TOOLS_FORMAT_ANTHROPIC = 3,
    /** OpenAI Chat Completions tools, which vLLM, Ollama and most
     *  compatible servers take: [{type:"function", function:{name,
     *  description, parameters}}]. */
    SP_TOOLS_FORMAT_OPENAI_CHAT = 4,
} sp_tools_format;

/** Parse "mcp", "openai", "openai-chat", "openai-freeform" or "anthropic". */
int sp_tools_format_parse(sp_tools_format *out, const char *s);

/**
 * The specs of the tools a context offers (`t`), or of every tool the
 * suite has (`t` NULL), as JSON text (free()). NULL when memory ran out.
 */
char *sp_tools_specs(const sp_tools *t, sp_tools_format format);

#define SP_TOOLS_SPECS_OPTS_VERSION 1

typedef struct sp_tools_specs_opts {
    unsigned version;
    /** The strict form, valid under OpenAI's and Anthropic's strict tool
     *  rules: every property required, optional ones nullable (a null
     *  argument is read as left out), additionalProperties false in every
     *  object, and only the keywords both take (type, properties, required,
     *  additionalProperties, items, enum, anyOf, description); limits and
     *  defaults are written into the descriptions. OpenAI formats say
     *  strict: true, Anthropic's too. */
    bool strict;
} sp_tools_specs_opts;

#define SP_TOOLS_SPECS_OPTS_INIT                                                                   \
    {                                                                                              \
        .version = SP_TOOLS_SPECS_OPTS_VERSION                                                     \
    }

/** As sp_tools_specs(), with options (NULL = defaults). NULL for an
 *  unknown options version too. */
char *sp_tools_specs_ex(const sp_tools *t, sp_tools_format format, const sp_tools_specs_opts *opts);

/** The Lark grammar of apply_patch's freeform form (static). */
const char *sp_tools_patch_grammar(void);

/** Names of every tool of the suite, NULL-terminated (static). */
const char *const *sp_tools_names(void);

#ifdef __cplusplus
}
#endif

#endif
