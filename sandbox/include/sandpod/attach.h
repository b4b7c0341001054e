/**
 * @file sandpod/attach.h
 * @brief A command in a sandbox with its streams attached to the caller.
 *
 * What `sandpod exec` and `sandpod run` use: the command starts through the
 * sandbox's agent when it runs one (else Podman's exec, as
 * sp_sandbox_exec() does), and the caller moves bytes itself: poll
 * sp_attach_fd(), read output, write stdin, resize the terminal, then ask
 * for the exit code. Lines the container runtime prints when the command
 * cannot be executed at all never reach the caller: sp_attach_noexec()
 * says so instead.
 */
#ifndef SANDPOD_ATTACH_H
#define SANDPOD_ATTACH_H

#include <stdbool.h>
#include <stddef.h>

#include "sandpod/error.h"
#include "sandpod/sandbox.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A running attached command (opaque). */
typedef struct sp_attach sp_attach;

#define SP_ATTACH_OPTS_VERSION 1

/** Options of sp_sandbox_attach(); NULL means all defaults. */
typedef struct sp_attach_opts {
    unsigned version;
    /** Working folder in the container (default: the sandbox's workdir). */
    const char *workdir;
    /** Extra NULL-terminated "KEY=VALUE" entries. */
    const char *const *env;
    /** Run as this user instead of the sandbox's (takes the REST path). */
    const char *user;
    /** Give the command a terminal of rows x cols (0: 24 x 80). */
    bool tty;
    unsigned rows, cols;
    /** Keep its stdin open for sp_attach_write() (else it reads EOF). */
    bool stdin_open;
} sp_attach_opts;

#define SP_ATTACH_OPTS_INIT                                                                        \
    {                                                                                              \
        .version = SP_ATTACH_OPTS_VERSION                                                          \
    }

/**
 * Start argv[0] (looked up in the container's PATH) with argv.
 *
 * @param out   the command, freed with sp_attach_free()
 * @param sb    a running sandbox; it must outlive *out
 * @param argv  NULL-terminated, at least one entry
 * @return 0; SP_EINVAL (no command, bad options version), SP_EPODMAN (the
 *         service or the container is not there; the message says how to
 *         start it). A command that cannot be executed still starts: see
 *         sp_attach_noexec().
 */
int sp_sandbox_attach(sp_attach **out, sp_sandbox *sb, const char *const *argv,
                      const sp_attach_opts *opts, sp_error **err);

/** The descriptor to poll for input (POLLIN) and for room for stdin (POLLOUT). */
int sp_attach_fd(const sp_attach *a);

/** Output waits in the handle's own buffer: read without polling. */
bool sp_attach_buffered(const sp_attach *a);

/**
 * Read output, waiting up to timeout_ms (0: not at all, negative: no limit).
 *
 * @param n       bytes stored in buf; 0 once the command's output ended
 * @param stream  SP_EXEC_STDOUT or SP_EXEC_STDERR (may be NULL); a
 *                terminal's output is all SP_EXEC_STDOUT
 * @return 0; SP_ETIMEOUT when nothing came in time; SP_EPODMAN when the
 *         stream broke
 */
int sp_attach_read(size_t *n, int *stream, sp_attach *a, void *buf, size_t cap, int timeout_ms,
                   sp_error **err);

/** Send bytes to the command's stdin (blocks until the socket takes them). */
int sp_attach_write(sp_attach *a, const void *data, size_t len, sp_error **err);

/** End the command's stdin (it reads EOF). */
int sp_attach_close_stdin(sp_attach *a, sp_error **err);

/** Set the terminal size of a command started with tty. */
int sp_attach_resize(sp_attach *a, unsigned rows, unsigned cols, sp_error **err);

/**
 * Once sp_attach_read() reported the end: the exit code (128+N after
 * signal N), waiting up to timeout_ms for Podman to record it.
 *
 * @return 0; SP_EPODMAN or SP_ETIMEOUT when no exit code can be had
 */
int sp_attach_wait(int *exit_code, sp_attach *a, int timeout_ms, sp_error **err);

/**
 * Why the command could not be executed, once its output ended: ENOENT
 * (not found in the container), EACCES or another errno (found, but could
 * not be run), or 0 when it ran (its own exit code of 126 or 127 included).
 * The exit code is then 127 for ENOENT and 126 otherwise, as a shell's.
 */
int sp_attach_noexec(const sp_attach *a);

/** Free the handle (NULL is fine). A command still running through the agent
 *  is killed; one started through Podman's exec runs on to its end. */
void sp_attach_free(sp_attach *a);

#ifdef __cplusplus
}
#endif

#endif
