/**
 * @file sandpod/session.h
 * @brief Interactive sessions in a sandbox: the exec_command / write_stdin pair.
 *
 * A session is one command (`sh -c command`) running in the sandbox's
 * container, by default on a pseudo-terminal, that outlives the call that
 * started it. sp_session_start() starts it and collects its output for a
 * short while (the yield time); sp_session_write() sends input (or nothing,
 * to poll) and collects again. Each call returns what the command printed
 * since the previous call, capped to a head and a tail, and, once the
 * command has exited, its exit code; the session is then gone.
 *
 * Output is read continuously by a background thread of the sandbox handle,
 * so a command is never stalled by a full pipe between calls; what piles up
 * between calls is kept to a head and a tail of SP_SESSION_PENDING_BYTES.
 *
 * Limits: at most SP_SESSION_MAX sessions per handle; starting one more
 * kills the least recently used one (an exited one first) and says so in
 * the output's note. Session ids are small positive integers, counted
 * across the process and never reused.
 *
 * Ending: sp_session_kill(), sp_sandbox_stop(), sp_sandbox_remove() and
 * sp_sandbox_free() kill a session's whole process tree inside the
 * container (its process group, its terminal session, and any process that
 * still carries the session's SANDPOD_SESSION token in its environment).
 * When the owning process ends by exit() or by SIGINT, SIGTERM or SIGHUP,
 * every live session of the process is killed from the host; see
 * sp_session_kill_all_signal_safe() for the limits. The handlers are
 * installed when the first session starts: signals the program ignores stay
 * ignored; a handler the program had installed before is called after the
 * kill; one it installs later replaces sandpod's (call
 * sp_session_kill_all_signal_safe() from it). SIGKILL cannot be caught:
 * sessions of a process killed that way keep running until the sandbox is
 * stopped or removed.
 *
 * Threads: like sp_sandbox itself, one handle's sessions are used from one
 * thread at a time.
 */
#ifndef SANDPOD_SESSION_H
#define SANDPOD_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandpod/error.h"
#include "sandpod/sandbox.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Live sessions one sandbox handle keeps at most. */
#define SP_SESSION_MAX 64
/** Longest yield time a call accepts, in ms; longer ones are clamped. */
#define SP_SESSION_MAX_YIELD_MS 30000
/** Output kept between two calls: a head and a tail of this many bytes in all. */
#define SP_SESSION_PENDING_BYTES (1024u * 1024u)

#define SP_SESSION_OPTS_VERSION 1

/** How to start a session. Zero values select the defaults shown. */
typedef struct sp_session_opts {
    unsigned version;
    /** Run on plain pipes instead of a pseudo-terminal; stdout and stderr
     *  are then merged in arrival order. Default: a terminal. */
    bool no_tty;
    /** Working folder in the container (default: the sandbox's workdir). */
    const char *workdir;
    /** Extra NULL-terminated "KEY=VALUE" entries. */
    const char *const *env;
    /** Run as this user instead of the sandbox's. */
    const char *user;
    /** Terminal size (0 = 24 rows, 80 columns); ignored with no_tty. */
    unsigned rows, cols;
    /** How long to collect output before returning, in ms: 0 = 250;
     *  negative = do not wait; at most SP_SESSION_MAX_YIELD_MS. The call
     *  returns early when the command exits. */
    int yield_time_ms;
    /** Output cap in tokens of about 4 bytes: 0 = 8000; at most
     *  SP_SESSION_PENDING_BYTES / 4. The head and the tail are kept. */
    size_t max_output_tokens;
    /** Start with stdin at end-of-file, for commands that must not wait
     *  for input (on a terminal, a ^D is sent instead). */
    bool close_stdin;
} sp_session_opts;

#define SP_SESSION_OPTS_INIT                                                                       \
    {                                                                                              \
        .version = SP_SESSION_OPTS_VERSION                                                         \
    }

#define SP_SESSION_WRITE_OPTS_VERSION 1

/** How to write to a session. Zero values select the defaults shown. */
typedef struct sp_session_write_opts {
    unsigned version;
    /** As in sp_session_opts: 0 = 250 ms, negative = do not wait. */
    int yield_time_ms;
    /** As in sp_session_opts: 0 = 8000. */
    size_t max_output_tokens;
    /** After the characters, close stdin (end-of-file). On a terminal this
     *  sends ^D, which ends input only at the start of a line. */
    bool close_stdin;
} sp_session_write_opts;

#define SP_SESSION_WRITE_OPTS_INIT                                                                 \
    {                                                                                              \
        .version = SP_SESSION_WRITE_OPTS_VERSION                                                   \
    }

/** What one start or write call saw. */
typedef struct sp_session_output {
    int session_id;
    /** What the command printed since the previous call, capped (raw
     *  terminal bytes on a terminal), NUL-terminated. Never NULL. */
    char *output;
    size_t output_len;
    /** Part of the output was left out (a marker in the middle says how much). */
    bool truncated;
    /** Bytes the command printed since the previous call. */
    uint64_t total_bytes;
    /** The command has exited; the session is gone and its id unknown from now on. */
    bool exited;
    /** Valid when exited: the exit code, 128+N when killed by signal N,
     *  -1 when unknown. */
    int exit_code;
    /** Something the caller should know (a pruned session, input that was
     *  not sent), or NULL. */
    char *note;
    /** Time this call took, in ms. */
    int64_t wall_ms;
} sp_session_output;

/**
 * Start `sh -c command` as a session and collect its first output.
 *
 * @param out      receives the output; free with sp_session_output_free().
 *                 When the command already exited, out->exited is set.
 * @param command  the shell command
 * @param opts     options, or NULL for the defaults
 * @return 0; SP_EINVAL (no command); SP_EPODMAN (the container is not
 *         running, or the service failed)
 */
int sp_session_start(sp_session_output **out, sp_sandbox *sb, const char *command,
                     const sp_session_opts *opts, sp_error **err);

/**
 * Send characters to a session's stdin and collect its output.
 *
 * On a terminal "\x03" interrupts the foreground job (SIGINT through the
 * line discipline) and "\x04" at the start of a line is end-of-file.
 * Without a terminal, a write of exactly "\x03" sends SIGINT to the
 * command's process group instead of the byte.
 *
 * @param chars  bytes to send; may hold NULs
 * @param len    their count; 0 = only poll for output
 * @param opts   options, or NULL for the defaults
 * @return 0 (also when the command exited: see out->exited); SP_ENOTFOUND
 *         (no such session: it exited, was killed or pruned); SP_EINVAL
 *         (stdin already closed); SP_EPODMAN
 */
int sp_session_write(sp_session_output **out, sp_sandbox *sb, int session_id, const char *chars,
                     size_t len, const sp_session_write_opts *opts, sp_error **err);

/**
 * Change a session's terminal size (the command gets SIGWINCH).
 * @return 0; SP_ENOTFOUND; SP_EINVAL (no terminal, or a size of 0 or
 *         above 65535); SP_EPODMAN
 */
int sp_session_resize(sp_sandbox *sb, int session_id, unsigned rows, unsigned cols, sp_error **err);

/**
 * Send a signal to a session's process group (the command and the children
 * it did not move to other groups).
 * @return 0; SP_ENOTFOUND; SP_EINVAL (bad signal); SP_EPODMAN
 */
int sp_session_signal(sp_sandbox *sb, int session_id, int signo, sp_error **err);

/**
 * Kill a session's whole process tree in the container and forget it. Its
 * unread output is dropped.
 * @return 0; SP_ENOTFOUND; SP_EPODMAN (the kill could not be run; the
 *         session is forgotten all the same)
 */
int sp_session_kill(sp_sandbox *sb, int session_id, sp_error **err);

/** A live session, as sp_session_list() reports it. */
typedef struct sp_session_info {
    int id;
    char *command;
    bool tty;
    /** False once the command exited (the next write reports its exit code). */
    bool running;
    int64_t age_ms;  /**< since it started */
    int64_t idle_ms; /**< since the last start or write call on it */
    /** Output bytes waiting for the next write call. */
    uint64_t pending_bytes;
    /** Host pid of the command, 0 when unknown. */
    int host_pid;
} sp_session_info;

/**
 * List a handle's live sessions, oldest first.
 * @param out    receives the array (NULL when empty); free with sp_session_info_free()
 * @param n_out  receives the count
 * @return 0
 */
int sp_session_list(sp_session_info **out, size_t *n_out, sp_sandbox *sb, sp_error **err);

void sp_session_info_free(sp_session_info *v, size_t n);

/** Free an output; accepts NULL. */
void sp_session_output_free(sp_session_output *o);

/**
 * Kill, from the host, every live session this process started, in any
 * sandbox handle. Async-signal-safe: this is what the exit and signal
 * handlers installed with the first session call, exposed for programs
 * that install their own SIGINT/SIGTERM handlers later (which replaces
 * sandpod's) or that leave with _exit().
 *
 * It signals host pids the Podman service reported, so it works when the
 * service runs on this host in this pid namespace and as this user or root
 * (rootful Podman, or rootless Podman of the same user); each pid is checked
 * against the process start time recorded when the session started, so a
 * reused pid is never hit. With a remote service it does nothing.
 * Processes a session moved out of its terminal session and process group
 * (setsid) survive it; sp_session_kill() catches those too.
 */
void sp_session_kill_all_signal_safe(void);

#ifdef __cplusplus
}
#endif

#endif
