/* The step that drives a command's stream (engine/stream.h), whichever
 * way it was started, and the start through the agent (cmdio.c).
 * Internal. */
#ifndef SANDPOD_CMDIO_H
#define SANDPOD_CMDIO_H

#include "fastpath.h"
#include "sandbox_internal.h"

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
/* What to poll the stream's fd for. */
short sp_cmd_events(const sp_cmd_input *in);

enum { SP_CMD_IDLE = 0, SP_CMD_MORE = 1, SP_CMD_END = 2 };
/* One round of the loop: given what poll() reported for the stream's fd,
 * send the next slice of input (when writable), then read up to
 * max_reads chunks of output into out, stderr into errs (NULL: out).
 * SP_CMD_END: the stream ended; SP_CMD_MORE: output may remain, poll
 * without sleeping; SP_CMD_IDLE: nothing more now; or a read error. */
int sp_cmd_step(sp_stream *c, short revents, sp_cmd_input *in, sp_capbuf *out, sp_capbuf *errs,
                int max_reads, sp_error **err);

/* Start a command through the agent when the sandbox's exec path allows
 * (see sp_fast_wanted()). 0 with *out the agent's stream; 0 with no
 * stream (out->ops NULL) when the REST path is to be taken (not wanted, or under SP_EXEC_AUTO no
 * agent answers); otherwise SP_EPODMAN (or another code) with *err, which says how to start a
 * container that is not running. */
int sp_cmd_start_fast(sp_stream *out, sp_sandbox *sb, const char *user, const sp_fast_spec *spec,
                      sp_error **err);

#endif
