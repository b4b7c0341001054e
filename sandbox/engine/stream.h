/* One command's stream in a sandbox, whichever way it was started: one
 * table of operations and one implementation per kind of stream, each in
 * the file that owns it — the in-container agent (local/fastpath.c),
 * Podman's REST exec (podman/exec_stream.c, through the local engine's
 * exec_start) and a remote engine's exec (kube/kube_remote.c, through
 * sp_remote_ops.stream_open). The stream is chosen once, where the
 * command is started; attach.c, run.c and the sessions drive it through
 * the table and never ask which it is. Internal: the sandbox module and
 * the engines see it. */
#ifndef SANDPOD_ENGINE_STREAM_H
#define SANDPOD_ENGINE_STREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "sandpod/error.h"

typedef struct sp_stream_ops {
    /* For poll(); output may also sit in the stream's own buffer. */
    int (*fd)(const void *impl);
    bool (*buffered)(const void *impl);
    /* Up to cap bytes of output, *stream SP_EXEC_STDOUT or SP_EXEC_STDERR;
     * *n = 0 once the stream ended; SP_ETIMEOUT when nothing came. stream
     * may be NULL. */
    int (*read)(size_t *n, int *stream, void *impl, void *buf, size_t cap, int timeout_ms,
                sp_error **err);
    int (*write)(void *impl, const void *data, size_t len, sp_error **err);
    int (*close_stdin)(void *impl, sp_error **err);
    int (*resize)(void *impl, unsigned rows, unsigned cols, sp_error **err);
    /* The exit code (128+N for signal N) once the output ended: 0;
     * SP_ETIMEOUT while the command still runs after wait_ms; otherwise no
     * code is to be had (reason SP_R_SERVICE: the engine lost the command,
     * which may still run). */
    int (*exited)(int *code, void *impl, int wait_ms, sp_error **err);
    /* The errno of a command that could not be executed (ENOENT, EACCES),
     * else 0; known once the output ended or, through the agent, as soon
     * as it says so. */
    int (*noexec)(const void *impl);
    /* The command's pid on this host, 0 when unknown. */
    int (*host_pid)(void *impl);
    /* Signal the command's process group; kill its whole tree and wait up
     * to wait_ms for its end. 1 when the stream carries no signals (the
     * caller then reaches the process group another way). */
    int (*signal)(void *impl, int signo, sp_error **err);
    int (*kill)(void *impl, int wait_ms);
    /* Close the stream; NULL is fine. */
    void (*free)(void *impl);
} sp_stream_ops;

typedef struct sp_stream {
    const sp_stream_ops *ops; /* NULL: no stream */
    void *impl;
} sp_stream;

/* The signal and kill entries of a stream that carries no signals. */
static inline int sp_stream_no_signal(void *impl, int signo, sp_error **err)
{
    (void)impl, (void)signo, (void)err;
    return 1;
}

static inline int sp_stream_no_kill(void *impl, int wait_ms)
{
    (void)impl, (void)wait_ms;
    return 1;
}

static inline void sp_stream_free(sp_stream *s)
{
    if (s->ops)
        s->ops->free(s->impl);
    *s = (sp_stream){0};
}

#endif
