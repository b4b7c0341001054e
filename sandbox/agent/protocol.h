/* The wire protocol between sandpod (host) and sandpod-agent (pid 1 in the
 * container). Not installed.
 *
 * One SOCK_STREAM connection per command. Every message is a frame:
 *
 *     u32 length (big-endian, of the payload) | u8 type | payload
 *
 * The host sends one REQUEST first, then any of STDIN, STDIN_EOF, RESIZE,
 * SIGNAL, KILL. The agent answers STARTED (sent by the command's own
 * process with SCM_CREDENTIALS, so the host learns its host pid), then
 * STDOUT / STDERR as output arrives, and EXIT last; a command that could
 * not be executed sends NOEXEC (the errno of execvp) before its EXIT. Closing the connection
 * from the host kills the command's whole process tree.
 *
 * REQUEST payload: u32 flags | u16 rows | u16 cols | str workdir |
 * str kill_marker | u32 argc | argc x str | u32 envc | envc x str, where
 * str is u32 length + bytes (no NUL). kill_marker ("" = none) is a
 * "KEY=VALUE" environment entry: on a kill, every process whose environment
 * holds it dies too (which catches processes that called setsid). */
#ifndef SANDPOD_AGENT_PROTOCOL_H
#define SANDPOD_AGENT_PROTOCOL_H

#define SPA_SOCKET_NAME "agent.sock"
/* Where the folder holding the socket and the agent binary appear in the
 * container. */
#define SPA_RUN_DIR    "/.sandpod/run"
#define SPA_AGENT_PATH "/.sandpod/agent"
/* Where a sandbox with an egress policy mounts its proxy's socket folder
 * (read-only): the agent then relays 127.0.0.1:SP_EGRESS_PORT to it. */
#define SPA_EGRESS_DIR "/.sandpod/egress"

#define SPA_HEADER_LEN 5
/* No frame may be longer: the agent drops a connection that sends one. */
#define SPA_MAX_FRAME (1u << 20)
#define SPA_MAX_ARGS  4096

enum {
    /* host -> agent */
    SPA_REQUEST = 'R',
    SPA_STDIN = 'I',
    SPA_STDIN_EOF = 'E',
    SPA_RESIZE = 'W', /* u16 rows, u16 cols */
    SPA_SIGNAL = 'S', /* u32 signal, to the command's process group */
    SPA_KILL = 'K',   /* SIGKILL to the whole tree */
    /* agent -> host */
    SPA_STARTED = 'P', /* u32 pid in the container */
    SPA_STDOUT = 'O',
    SPA_STDERR = 'D',
    SPA_EXIT = 'X',   /* u32 wait status */
    SPA_FAILED = 'F', /* a message: the command could not be started */
    SPA_NOEXEC = 'N', /* u32 errno: execvp failed (sent by the child, before EXIT) */
};

enum {
    SPA_F_TTY = 1u << 0,
    /* When the command returns, kill what it left in its process group. */
    SPA_F_KILL_ON_EXIT = 1u << 1,
};

#endif
