/* Internals of the tool suite, shared by its files: the tool table, the
 * per-call state handlers fill in, and small helpers. cJSON is fine here:
 * this header is not installed. */
#ifndef SANDPOD_TOOLS_INTERNAL_H
#define SANDPOD_TOOLS_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "sandpod/sandbox_snapshot.h"
#include "sandpod/session.h"
#include "sandpod/snapshot.h"
#include "base.h"
#include "json.h"
#include "tools.h"

#define TOOLS_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* ------------------------------------------------------------ helpers -- */

/* Allocation, buffers, string lists, errors and output caps are base's
 * (base.h: sp_x*, sp_buf, sp_strv, sp_err_set, sp_capbuf). */

/* ------------------------------------------------------------- a call -- */

/* What one call builds up; the dispatcher turns it into the result object. */
typedef struct tool_call {
    const struct tool_def *def;
    const char *args_json; /* the raw argument text (NUL-terminated) */
    sp_buf message;        /* text for the model */
    cJSON *value;          /* structured answer, or NULL */
    cJSON *changes;        /* array of {path, action, bytes} */
    bool truncated;
    uint64_t bytes; /* output plus written, for events */
    sp_strv paths;  /* paths for events */
    int code;       /* 0 or the failure's sp_code */
    int reason;     /* the failure's sp_reason (SP_R_NONE when not known) */
    char *error;    /* the failure's message */
} tool_call;

/* Record a failure: `code` and a message (printf-style). Returns code. */
int call_fail(tool_call *c, int code, const char *fmt, ...) TOOLS_PRINTF(3, 4);
/* call_fail() with a reason (an sp_reason) for the result's error.reason. */
int call_fail_reason(tool_call *c, int code, int reason, const char *fmt, ...) TOOLS_PRINTF(4, 5);
/* Record a library failure (err is consumed; its reason is kept), adding `hint` (may be NULL)
 * and a generic recovery hint for the code when no hint is given. */
int call_fail_err(tool_call *c, int code, sp_error *err, const char *hint);
/* Note a file change: action "created", "modified", "deleted", "moved". */
void call_change(tool_call *c, const char *path, const char *action, uint64_t bytes);
/* Note a path for the events. */
void call_path(tool_call *c, const char *path);

/* ------------------------------------------------------------- tools -- */

/* What a tool needs to be offered. */
enum {
    NEED_SANDBOX = 1u << 0, /* a container: commands and sessions */
    NEED_STORE = 1u << 1,   /* a snapshot store */
    NEED_WRITE = 1u << 2,   /* a writable filesystem */
    NEED_PATCH = 1u << 3,   /* the apply_patch engine is built in */
};

typedef int (*tool_fn)(sp_tools *t, const cJSON *args, tool_call *c);
/* Build the approval summary line of a call (a malloc'd string). */
typedef char *(*tool_summary_fn)(const cJSON *args);

typedef struct tool_def {
    const char *name;
    const char *title;
    sp_tool_tier tier;
    unsigned needs;
    const char *description;
    const char *schema; /* JSON Schema text of the arguments */
    tool_fn fn;
    /* The argument that names the call for a person ("path", "command"). */
    const char *summary_arg;
    unsigned hints; /* HINT_*: the MCP annotations, which the tier follows */
} tool_def;

/* What a tool does (the MCP tool annotations). The tier follows from them:
 * read-only is safe; destructive or open-world is dangerous; the rest
 * (additive changes in a closed world) is cautious (tool_tier_of()). */
enum {
    HINT_READ_ONLY = 1u << 0,   /* changes nothing */
    HINT_DESTRUCTIVE = 1u << 1, /* may overwrite or delete what exists */
    HINT_IDEMPOTENT = 1u << 2,  /* a repeat with the same arguments changes nothing more */
    HINT_OPEN_WORLD = 1u << 3,  /* reaches beyond the workspace (commands, the network) */
};
sp_tool_tier tool_tier_of(unsigned hints);
/* Whether calls of the tool may run on other threads while any call of the
 * same context runs: read-only filesystem tools (no container, no store). */
bool tool_concurrent(const tool_def *d);

extern const tool_def tool_defs[];
extern const size_t n_tool_defs;
const tool_def *tool_find(const char *name);
/* Parsed schemas, one per tool_defs entry (parsed once, never freed). */
const cJSON *tool_schema(const tool_def *d);

/* The schema of the tool's MCP structuredContent (tools_schema.c). */
const cJSON *tool_output_schema(const tool_def *d);
/* A copy of an input schema in the strict form (every property required,
 * optional ones nullable, additionalProperties false, only keywords both
 * OpenAI and Anthropic strict modes take; the rest goes to descriptions). */
cJSON *tools_strict_schema(const cJSON *schema);
/* Drop the null members of args whose schema does not take null: a strict
 * spec's way of leaving an optional argument out. */
void tools_drop_nulls(cJSON *args, const cJSON *schema);

/* Whether apply_patch's engine is compiled in. */
bool tools_patch_available(void);
/* Apply a patch text (either form lands here). */
int tools_apply_patch(sp_tools *t, const char *patch, size_t len, tool_call *c);
/* apply_patch's JSON arguments as its schema names them: a "patch" (the
 * old name, kept as an alias) becomes "input". NULL, or why the
 * arguments are refused (both given with different texts). */
char *tools_patch_alias(cJSON *args);

/* Check args against a schema; on failure the message names the field. */
int schema_check(const cJSON *schema, const cJSON *args, const char *tool, char **msg);
/* Refuse raw JSON text holding \u0000 in a string; names the key. */
int json_nul_check(const char *text, size_t len, char **msg);

/* Argument getters: sp_json_str_or(), sp_json_int(), sp_json_bool()
 * (json.h), after schema_check, so types are right. */

/* -------------------------------------------------------- the context -- */

/* A context made by sp_tools_open_later(): where it stands. */
typedef enum { LATER_NONE, LATER_OPENING, LATER_READY } later_state;

struct sp_tools {
    sp_tools_opts opts;
    /* sp_tools_open_later(): the sandbox comes at the first call. */
    bool later;
    sp_tools_later later_fn;
    later_state later_state; /* under mu */
    pthread_cond_t later_cond;
    char *later_error; /* the last open's failure, under mu */
    sp_sandbox *sb;    /* borrowed; NULL for a bare folder */
    /* sb runs on another engine: calls go to its peer (tools_remote.c). */
    bool remote;
    /* sb is an agent-only handle (sp_tools_open_agent()): commands go to a
     * workload's agent, files and snapshots are the bare folder's. */
    bool agent;
    char *root;       /* host path of the workspace or folder */
    sp_fs *fs;        /* contained on root */
    sp_fs *fs_any;    /* unrestricted mode: on "/" */
    char *store_path; /* snapshot store, or NULL */
    sp_snapstore *store;
    sp_sandbox_snap *snap; /* the sandbox's store (t->store is its store) */
    sp_strv disabled;
    sp_strv deny;
    char *events_path;
    _Atomic uint64_t calls; /* numbers calls when there is no events file */
    sp_strv always;         /* tools allowed for good by the approver */
    int *sessions;          /* ids of the sessions we started */
    char **session_tokens;  /* their SANDPOD_TOOL_CALL tokens (owned) */
    size_t n_sessions, cap_sessions;

    /* Cancellation, shared with sp_tools_cancel() on another thread. */
    pthread_mutex_t mu;
    bool running;
    atomic_bool cancelled;
    char *run_token;  /* SANDPOD_TOOL_CALL value of a running shell */
    char run_key[33]; /* a remote sandbox: the request key of the running call */
    char *sb_name, *state_root, *podman_url;
    pthread_mutex_t kill_mu;
    sp_sandbox *kill_sb; /* a second handle for the kill, opened on demand */

    /* What the model last saw of each file (tools_stale.c), shared by
     * concurrent calls. */
    pthread_mutex_t stale_mu;
    struct stale_entry *stale;
    size_t n_stale, cap_stale;
};

/* For a context made by sp_tools_open_later(): make its sandbox unless
 * made (waiting while another thread makes it). 0 at once otherwise. */
int tools_later_wait(sp_tools *t, sp_error **err);

/* Handlers, by file. */
int tool_list_dir(sp_tools *t, const cJSON *a, tool_call *c);
int tool_read_file(sp_tools *t, const cJSON *a, tool_call *c);
int tool_write_file(sp_tools *t, const cJSON *a, tool_call *c);
int tool_edit_file(sp_tools *t, const cJSON *a, tool_call *c);
int tool_insert(sp_tools *t, const cJSON *a, tool_call *c);
int tool_delete(sp_tools *t, const cJSON *a, tool_call *c);
int tool_mkdir(sp_tools *t, const cJSON *a, tool_call *c);
int tool_stat(sp_tools *t, const cJSON *a, tool_call *c);
int tool_glob(sp_tools *t, const cJSON *a, tool_call *c);
int tool_grep(sp_tools *t, const cJSON *a, tool_call *c);
int tool_apply_patch(sp_tools *t, const cJSON *a, tool_call *c);
int tool_shell(sp_tools *t, const cJSON *a, tool_call *c);
int tool_exec_command(sp_tools *t, const cJSON *a, tool_call *c);
int tool_write_stdin(sp_tools *t, const cJSON *a, tool_call *c);
int tool_snapshot(sp_tools *t, const cJSON *a, tool_call *c);
int tool_restore(sp_tools *t, const cJSON *a, tool_call *c);
int tool_list_snapshots(sp_tools *t, const cJSON *a, tool_call *c);

/* The filesystem handle and path a tool path names under the fs_mode. In
 * unrestricted mode the path becomes absolute (relative ones are taken
 * from the root folder) and `*rel` is a malloc'd path below "/"; otherwise
 * *rel is the path itself (not copied). */
int fs_target(sp_fs **fs, const char **rel, char **owned, sp_tools *t, const char *path,
              tool_call *c);
/* Lexical normalization of an absolute path (`.` and `..` folded, as in
 * unrestricted mode): the result has no leading '/', "." for the root. */
char *tools_normalize_abs(const char *abs);
/* A path as the model should see it: relative to the workspace, or
 * absolute in unrestricted mode (malloc'd). */
char *fs_display(const sp_tools *t, const char *rel);

/* Serialise a call that changes files through a sandbox (tools_fs.c has
 * the contract): *fd receives the held lock, or -1 when none is needed.
 * Returns 0, or the failure recorded in c. */
int tools_edit_lock(int *fd, sp_tools *t, tool_call *c);
void tools_edit_unlock(int fd);

/* The stale-edit guard (tools_stale.c): a file the model read (or a tool
 * wrote) in this session may only be changed while it is as it was then.
 * `rel` is a path of `fs` as fs_target() gives it. */
typedef struct stale_state {
    bool ok; /* the file existed and was statted */
    uint64_t dev, ino, size;
    int64_t mtime_ns, ctime_ns;
} stale_state;
/* The file's state now (ok false when it cannot be statted). */
void tools_stale_probe(stale_state *s, sp_fs *fs, const char *rel);
/* Remember `s` as what the model saw of the file. */
void tools_stale_record(sp_tools *t, sp_fs *fs, const char *rel, const stale_state *s);
/* Probe and record: after a read, or after the tool's own write. */
void tools_stale_note(sp_tools *t, sp_fs *fs, const char *rel);
/* Forget a file (deleted by the tool). */
void tools_stale_forget(sp_tools *t, sp_fs *fs, const char *rel);
/* Refuse (reason stale, recorded in c) to change a file that differs from
 * what was recorded; 0 when it may be changed. `shown` names it. */
int tools_stale_check(sp_tools *t, sp_fs *fs, const char *rel, const char *shown, tool_call *c);
#ifdef SANDPOD_HAVE_PATCH
struct sp_patch_opts;
struct sp_patch_result;
/* tools_stale_check() for every file a patch would change or delete. */
int tools_stale_check_patch(sp_tools *t, const char *patch, size_t len,
                            const struct sp_patch_opts *po, tool_call *c);
/* tools_stale_note() for every file a patch left (forget the deleted). */
void tools_stale_note_patch(sp_tools *t, const struct sp_patch_result *res);
#endif
void tools_stale_dispose(sp_tools *t);

/* A sandbox on another engine (tools_remote.c): set the context up, run
 * one call in its peer, cancel the running one. */
int tools_open_remote(sp_tools *t, sp_sandbox *sb, sp_error **err);
int tools_remote_call(sp_tools *t, const tool_def *d, const char *raw, const char *freeform,
                      size_t ff_len, tool_call *c);
void tools_remote_cancel(sp_tools *t);

/* Session bookkeeping (tools_exec.c). */
void tools_sessions_kill(sp_tools *t);
/* Close the snapshot store (tools_exec.c). */
void tools_store_close(sp_tools *t);

#endif
