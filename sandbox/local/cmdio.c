/* The one read/write step that drives a command's stream (any of
 * engine/stream.h), for run.c's pump() and the session reader thread, and
 * the start of a command through the agent.
 *
 * A step sends the next slice of stdin when the socket polled writable and
 * then reads whatever output is there, so input of any size streams while
 * the command prints: a command that writes before it has read all of its
 * input never deadlocks against us. A slice is far below what a socket that
 * polled writable takes (a unix socket reports POLLOUT with three quarters
 * of its send buffer free), so the write does not block either. */
#include <poll.h>
#include <sys/random.h>

#include "local_state.h"
#include "fastpath.h"
#include "cmdio.h"
#include "sandbox_internal.h"

/* Bytes of stdin sent per step. */
#define SLICE 16384

bool sp_cmd_input_pending(const sp_cmd_input *in)
{
    return !in->closed && (in->off < in->len || in->close_after);
}

short sp_cmd_events(const sp_cmd_input *in)
{
    return (short)(POLLIN | (sp_cmd_input_pending(in) ? POLLOUT : 0));
}

/* Send the next slice of input; close stdin once it is all sent (when
 * asked to). A write that fails means the command stopped reading: the
 * rest is dropped and stdin closed, and in->error says why. */
static void feed(sp_stream *c, sp_cmd_input *in)
{
    if (in->off < in->len) {
        size_t k = in->len - in->off < SLICE ? in->len - in->off : SLICE;
        sp_error *e = NULL;
        if (c->ops->write(c->impl, in->data + in->off, k, &e) < 0) {
            if (!in->error)
                in->error = e;
            else
                sp_error_free(e);
            in->off = in->len;
            in->close_after = true;
        } else {
            in->off += k;
        }
    }
    if (in->off == in->len && in->close_after && !in->closed) {
        in->closed = true;
        c->ops->close_stdin(c->impl, NULL);
    }
}

int sp_cmd_step(sp_stream *c, short revents, sp_cmd_input *in, sp_capbuf *out, sp_capbuf *errs,
                int max_reads, sp_error **err)
{
    if ((revents & POLLOUT) && sp_cmd_input_pending(in))
        feed(c, in);
    if (!(revents & (POLLIN | POLLHUP | POLLERR)) && !c->ops->buffered(c->impl))
        return SP_CMD_IDLE;
    char buf[65536];
    for (int i = 0; i < max_reads; i++) {
        size_t n = 0;
        int stream = SP_EXEC_STDOUT;
        sp_error *e = NULL;
        int r = c->ops->read(&n, &stream, c->impl, buf, sizeof(buf), 0, &e);
        if (r == SP_ETIMEOUT) {
            sp_error_free(e);
            return SP_CMD_IDLE;
        }
        if (r < 0) {
            if (err)
                *err = e;
            else
                sp_error_free(e);
            return r;
        }
        if (n == 0)
            return SP_CMD_END;
        sp_capbuf_feed(stream == SP_EXEC_STDERR && errs ? errs : out, buf, n);
    }
    return SP_CMD_MORE;
}

int sp_cmd_start_fast(sp_stream *out, sp_sandbox *sb, const char *user, const sp_fast_spec *spec,
                      sp_error **err)
{
    *out = (sp_stream){0};
    if (!sp_fast_wanted(sb, user)) {
        sp_log(SP_LOG_DEBUG, "exec path: podman's REST exec (%s)",
               sp_fast_mode(sb) == SP_EXEC_REST ? "the REST path is asked for"
               : !sb->cfg.agent                 ? "the sandbox runs no agent"
                                                : "another user than the agent's");
        return 0;
    }
    sp_error *ferr = NULL;
    sp_fast *f = NULL;
    int r = sp_fast_start(&f, sb, spec, &ferr);
    if (r == 0) {
        sp_log(SP_LOG_DEBUG, "exec path: the agent");
        *out = sp_fast_stream(f);
        return 0;
    }
    if (r == SP_ENOTFOUND && sp_fast_mode(sb) != SP_EXEC_FAST) {
        sp_log(SP_LOG_DEBUG, "exec path: podman's REST exec (no agent answers: %s)",
               ferr ? ferr->message : "?");
        sp_error_free(ferr);
        return 0;
    }
    /* A container that is not running says so (and how to bring it back)
     * better than a connection that failed or a start that timed out. */
    sp_error *why = NULL;
    if (sp_sandbox_require_running(sb, &why) < 0) {
        sp_error_free(ferr);
        ferr = steal_pointer(&why);
    }
    sp_error_free(why);
    if (err)
        *err = ferr;
    else
        sp_error_free(ferr);
    return r == SP_ETIMEOUT || r == SP_ENOTFOUND ? SP_EPODMAN : r;
}
