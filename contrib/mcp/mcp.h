/**
 * @file mcp.h
 * @brief An MCP server (Model Context Protocol, revisions 2025-11-25,
 *        2025-06-18, 2025-03-26 and 2024-11-05) over the stdio transport,
 *        serving a tools context.
 *
 * Messages are JSON-RPC 2.0, one per line (newline-delimited JSON) on the
 * input fd, answers one per line on the output fd; lines may be several
 * MiB long. The server answers initialize (with version negotiation: the
 * client's revision when it is one of these, else the newest), ping,
 * tools/list (with annotations) and tools/call (one text content with the
 * message for the model, isError, and the typed object {ok, value,
 * truncated, changes[, error]} in _meta["sandpod/result"], or as
 * structuredContent matching each tool's outputSchema when opts ask for
 * it: see sp_mcp_opts.structured), handles notifications/cancelled (a
 * cancelled call gets no answer; a cancelled shell call kills its command)
 * and sends notifications/progress about once a second while a call whose
 * request carried params._meta.progressToken runs. When the approval
 * policy asks, it asks the user with elicitation/create if the client
 * declared elicitation; without it such calls are denied with a message
 * saying why.
 *
 * Concurrency: calls that change files or run commands (the lane) run one
 * at a time in arrival order, each after every earlier call has ended.
 * Read-only file tools (read_file, stat, list_dir, glob, grep) run on
 * other threads beside them: a read starts once every earlier call that
 * writes files (a file tool, not a command) has ended, so it sees those
 * writes, but it does not wait for an earlier shell or session call.
 *
 * Malformed input is answered with the JSON-RPC error codes -32700 (parse
 * error), -32600 (invalid request; batches are not supported), -32601
 * (unknown method) and -32602 (invalid params, unknown tool), and the
 * server keeps serving; bad tool arguments are a tool result with isError.
 * At most SP_MCP_MAX_QUEUED calls (and SP_MCP_MAX_QUEUED_BYTES of their
 * arguments) wait to start; a call past that is answered at once with the
 * error SP_MCP_BUSY ("server busy: ..."), so a client that floods requests
 * costs bounded memory and still gets exactly one answer per request. A
 * client that stops reading its answers stops the server from reading too
 * (its writes block), so nothing piles up there either. At the end of the
 * input every call already read is run and answered before the server
 * returns. Nothing but protocol messages is written to the output fd; logs
 * go to stderr.
 */
#ifndef SANDPOD_MCP_H
#define SANDPOD_MCP_H

#include <stdbool.h>

#include "sandpod/error.h"
#include "tools.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The protocol revision the server prefers (and answers an unknown one with). */
#define SP_MCP_PROTOCOL_VERSION "2025-11-25"

/** Tool calls that may wait to start; more are refused as busy. */
#define SP_MCP_MAX_QUEUED 256
/** Bytes of waiting calls (their arguments, as JSON) past which more are
 *  refused as busy; one call of any size may wait when none other does. */
#define SP_MCP_MAX_QUEUED_BYTES ((size_t)64 << 20)
/** The JSON-RPC error code of a call refused because too many wait. */
#define SP_MCP_BUSY (-32000)

#define SP_MCP_OPTS_VERSION 2

typedef struct sp_mcp_opts {
    unsigned version;
    /** Shown to the client as serverInfo (defaults: "sandpod", the library
     *  version). */
    const char *server_name;
    const char *server_version;
    /** Extra text for the initialize result's instructions (may be NULL). */
    const char *instructions;
    /** Log requests and notable events to stderr. */
    bool verbose;
    /** Polled at least four times a second; the server stops (as at the
     *  end of its input) once it returns true. May be NULL. */
    bool (*should_stop)(void *userdata);
    void *userdata;
    /* Version 2. */
    /** Give each tool an outputSchema and each tools/call result the typed
     *  object as structuredContent (MCP's structured output). Off by
     *  default: Claude Code and Codex then show the model
     *  JSON.stringify(structuredContent) in place of the text content, so
     *  sandpod's text (numbered lines, exit codes, how to recover) would
     *  never reach it. Off, the same object rides in the result's
     *  _meta["sandpod/result"] and each tool's schema in its
     *  _meta["sandpod/outputSchema"], which no client shows a model. */
    bool structured;
} sp_mcp_opts;

#define SP_MCP_OPTS_INIT                                                                           \
    {                                                                                              \
        .version = SP_MCP_OPTS_VERSION                                                             \
    }

/**
 * Serve `tools` on in_fd/out_fd until the input ends (then answer the
 * calls already read) or should_stop says so (then drop the waiting calls
 * and cancel the running one); wait for the calls that run, and return. The context's
 * approval callback is replaced by the server's for the duration.
 *
 * @return 0 at the end of the input; SP_ERROR when the output cannot be
 *         written (the client went away)
 */
int sp_mcp_serve(sp_tools *tools, int in_fd, int out_fd, const sp_mcp_opts *opts, sp_error **err);

#ifdef __cplusplus
}
#endif

#endif
