/* One command's stream in a local container, whichever way it was
 * started, and the step that drives it (cmdio.c). Internal. */
#ifndef SANDPOD_CMDIO_H
#define SANDPOD_CMDIO_H

#include "fastpath.h"
#include "sandbox_internal.h"

/* A command's stream in the container, whichever way it was started:
 * through the agent (fast) or Podman's exec (rest); the other is NULL.
 * The handles stay the owner's to free. */
typedef struct sp_cmd {
    sp_fast *fast;
    sp_exec *rest;
} sp_cmd;

int sp_cmd_fd(const sp_cmd *c);
/* Output may sit in the stream's own buffer with nothing new on the fd. */
bool sp_cmd_buffered(const sp_cmd *c);
/* Like sp_exec_read(): *n = 0 once the stream ended; SP_ETIMEOUT. */
int sp_cmd_read(size_t *n, int *stream, sp_cmd *c, void *buf, size_t cap, int wait_ms,
                sp_error **err);
int sp_cmd_write_stdin(sp_cmd *c, const void *data, size_t len, sp_error **err);
int sp_cmd_close_stdin(sp_cmd *c, sp_error **err);

/* Input still to send: data[off..len), then stdin closed when close_after.
 * The owner may append (growing len, moving data) between steps. */
typedef struct sp_cmd_input {
    const char *data;
    size_t len, off;
    bool close_after;
    bool closed;     /* stdin was closed (or never opened) */
    sp_error *error; /* why a write failed (the rest was dropped); the owner frees it */
} sp_cmd_input;

bool sp_cmd_input_pending(const sp_cmd_input *in);
/* What to poll sp_cmd_fd() for. */
short sp_cmd_events(const sp_cmd_input *in);

enum { SP_CMD_IDLE = 0, SP_CMD_MORE = 1, SP_CMD_END = 2 };
/* One round of the loop: given what poll() reported for sp_cmd_fd(),
 * send the next slice of input (when writable), then read up to
 * max_reads chunks of output into out, stderr into errs (NULL: out).
 * SP_CMD_END: the stream ended; SP_CMD_MORE: output may remain, poll
 * without sleeping; SP_CMD_IDLE: nothing more now; or a read error. */
int sp_cmd_step(sp_cmd *c, short revents, sp_cmd_input *in, sp_capbuf *out, sp_capbuf *errs,
                int max_reads, sp_error **err);

/* Start a command through the agent when the sandbox's exec path allows
 * (see sp_fast_wanted()). 0 with *out set; 0 with *out NULL when the REST
 * path is to be taken (not wanted, or under SP_EXEC_AUTO no agent
 * answers); otherwise SP_EPODMAN (or another code) with *err, which says
 * how to start a container that is not running. */
int sp_cmd_start_fast(sp_fast **out, sp_sandbox *sb, const char *user, const sp_fast_spec *spec,
                      sp_error **err);

#endif
