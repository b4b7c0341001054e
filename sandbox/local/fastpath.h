/* The exec fast path, host side (fastpath.c): a command run by
 * sandpod-agent, pid 1 of the container, over a unix socket in the
 * sandbox's state folder (see sandbox/agent/protocol.h). Internal. */
#ifndef SANDPOD_FASTPATH_H
#define SANDPOD_FASTPATH_H

#include "sandbox_internal.h"
#include "engine/stream.h"

typedef struct sp_fast sp_fast;

typedef struct sp_fast_spec {
    const char *const *argv; /* NULL-terminated, required */
    const char *const *env;  /* extra "KEY=VALUE" entries */
    const char *workdir;
    bool tty;
    unsigned rows, cols;
    /* When the command returns, kill what it left in its process group. */
    bool kill_on_exit;
    /* A "KEY=VALUE" environment entry; kills also reach every process
     * carrying it (NULL = none). */
    const char *kill_marker;
} sp_fast_spec;

/* Host folder bind-mounted at /.sandpod/run (holds agent.sock). */
char *sp_fast_run_dir(const sp_sandbox *sb);
/* Connect to the sandbox's own agent (see its contract); 0, or -errno
 * (-EPERM: something else listens there). */
int sp_fast_connect(int *out, sp_sandbox *sb);
/* The exec path in force: the sandbox's setting, or under SP_EXEC_AUTO
 * $SANDPOD_EXEC_PATH (rest|fast). */
sp_exec_path sp_fast_mode(const sp_sandbox *sb);
/* Whether a command as `user` (NULL = the sandbox's) may take the fast
 * path under the sandbox's exec_path setting. */
bool sp_fast_wanted(const sp_sandbox *sb, const char *user);
/* Start a command through the agent. SP_ENOTFOUND (with *err set) when no
 * agent answers, so the caller can fall back to REST exec; SP_ETIMEOUT when
 * one accepted but did not start the command in time (a paused container);
 * SP_EPODMAN when it could not start it. */
int sp_fast_start(sp_fast **out, sp_sandbox *sb, const sp_fast_spec *spec, sp_error **err);
/* For poll(); data may also be buffered (sp_fast_buffered). */
int sp_fast_fd(const sp_fast *f);
bool sp_fast_buffered(const sp_fast *f);
/* Like sp_exec_read(): *n = 0 once the exit status arrived; SP_ETIMEOUT;
 * SP_EPODMAN when the agent went away first. */
int sp_fast_read(size_t *n, int *stream, sp_fast *f, void *buf, size_t cap, int timeout_ms,
                 sp_error **err);
/* Whether the exit status arrived, and the exit code (128+N for signal N). */
bool sp_fast_exited(const sp_fast *f, int *exit_code);
int sp_fast_write_stdin(sp_fast *f, const void *data, size_t len, sp_error **err);
int sp_fast_close_stdin(sp_fast *f, sp_error **err);
int sp_fast_resize(sp_fast *f, unsigned rows, unsigned cols, sp_error **err);
/* Send a signal to the command's process group. */
int sp_fast_signal(sp_fast *f, int signo, sp_error **err);
/* SIGKILL the command's whole tree and wait up to wait_ms for its end. */
void sp_fast_kill(sp_fast *f, int wait_ms);
/* The errno of the agent's execvp when the command could not be
 * executed (ENOENT: not found), else 0. */
int sp_fast_noexec(const sp_fast *f);
/* The command's pid on the host (from SCM_CREDENTIALS), 0 when unknown. */
int sp_fast_host_pid(const sp_fast *f);
/* Close the connection; the agent then kills whatever still runs. */
void sp_fast_free(sp_fast *f);
/* f as a command's stream (engine/stream.h), which owns it from then on. */
sp_stream sp_fast_stream(sp_fast *f);

#endif
