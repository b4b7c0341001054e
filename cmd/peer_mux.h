/* The peer's multiplexer: one MCP server (one tools context: the edit
 * lane, the stale-edit guard, exec_command sessions) shared by any number
 * of client connections on the peer's socket at once. Each client sees a
 * server of its own: its request ids, progress tokens and cancellations
 * are rewritten on the way in and restored on the way out; its initialize
 * is answered (the first one reaches the server, later ones get the
 * cached result). A request whose params._meta carries "sandpod/call":
 * KEY is resumable: the same KEY again (from any connection) takes over
 * the running call's answer, or replays the finished one, and never runs
 * it twice; a resumable call outlives its connection. Other calls of a
 * client that disconnects are cancelled. */
#ifndef SANDPOD_PEER_MUX_H
#define SANDPOD_PEER_MUX_H

#include <stdbool.h>
#include <stddef.h>

#include "mcp.h"

/** Answers waiting for a client that does not read them; past this the
 *  client is disconnected (the others are never held up by it). */
#define PEER_MUX_CLIENT_BUFFER ((size_t)16 << 20)
/** Requests of one client open at once (give or take what one read
 *  brings); past this the client is not read until some are answered, so
 *  a flood never queues ahead of the other clients. */
#define PEER_MUX_CLIENT_CALLS 256
/** The longest request line a client may send; longer: disconnected. */
#define PEER_MUX_MAX_LINE SP_MCP_MAX_QUEUED_BYTES
/** Clients served at once; more wait in the listen backlog. */
#define PEER_MUX_MAX_CLIENTS 128
/** The longest resumable key, in bytes. */
#define PEER_MUX_MAX_KEY 128
/** Finished resumable answers kept: the newest PEER_MUX_KEEP_KEYS (and
 *  every one younger than PEER_MUX_KEEP_MS, up to PEER_MUX_KEEP_KEYS_MAX),
 *  at most PEER_MUX_KEEP_BYTES in all. */
#define PEER_MUX_KEEP_KEYS     256
#define PEER_MUX_KEEP_KEYS_MAX 4096
#define PEER_MUX_KEEP_MS       (10 * 60 * 1000)
#define PEER_MUX_KEEP_BYTES    ((size_t)64 << 20)

/* Serve `tools` to every client that connects to the listening socket
 * `listen_fd`, until opts->should_stop says so (then the server stops as
 * sp_mcp_serve does). `opts` is sp_mcp_serve's (verbose also logs
 * connections). 0, or SP_ERROR with *err set. */
int peer_mux_serve(sp_tools *tools, int listen_fd, const sp_mcp_opts *opts, sp_error **err);

#endif
