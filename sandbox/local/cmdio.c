/* One command's stream, over the agent (sp_fast) or Podman's exec
 * (sp_exec), behind one interface, and the one read/write step that every
 * caller drives it with: run.c's pump() and the session reader thread.
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

int sp_cmd_fd(const sp_cmd *c)
{
    return c->fast ? sp_fast_fd(c->fast) : sp_exec_fd(c->rest);
}

bool sp_cmd_buffered(const sp_cmd *c)
{
    return c->fast ? sp_fast_buffered(c->fast) : sp_exec_buffered(c->rest);
}

int sp_cmd_read(size_t *n, int *stream, sp_cmd *c, void *buf, size_t cap, int wait_ms,
                sp_error **err)
{
    return c->fast ? sp_fast_read(n, stream, c->fast, buf, cap, wait_ms, err)
                   : sp_exec_read(n, stream, c->rest, buf, cap, wait_ms, err);
}

int sp_cmd_write_stdin(sp_cmd *c, const void *data, size_t len, sp_error **err)
{
    return c->fast ? sp_fast_write_stdin(c->fast, data, len, err)
                   : sp_exec_write_stdin(c->rest, data, len, err);
}

int sp_cmd_close_stdin(sp_cmd *c, sp_error **err)
{
    return c->fast ? sp_fast_close_stdin(c->fast, err) : sp_exec_close_stdin(c->rest, err);
}

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
static void feed(sp_cmd *c, sp_cmd_input *in)
{
    if (in->off < in->len) {
        size_t k = in->len - in->off < SLICE ? in->len - in->off : SLICE;
        sp_error *e = NULL;
        if (sp_cmd_write_stdin(c, in->data + in->off, k, &e) < 0) {
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
        sp_cmd_close_stdin(c, NULL);
    }
}

int sp_cmd_step(sp_cmd *c, short revents, sp_cmd_input *in, sp_capbuf *out, sp_capbuf *errs,
                int max_reads, sp_error **err)
{
    if ((revents & POLLOUT) && sp_cmd_input_pending(in))
        feed(c, in);
    if (!(revents & (POLLIN | POLLHUP | POLLERR)) && !sp_cmd_buffered(c))
        return SP_CMD_IDLE;
    char buf[65536];
    for (int i = 0; i < max_reads; i++) {
        size_t n = 0;
        int stream = SP_EXEC_STDOUT;
        sp_error *e = NULL;
        int r = sp_cmd_read(&n, &stream, c, buf, sizeof(buf), 0, &e);
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

int sp_cmd_start_fast(sp_fast **out, sp_sandbox *sb, const char *user, const sp_fast_spec *spec,
                      sp_error **err)
{
    *out = NULL;
    if (!sp_fast_wanted(sb, user)) {
        sp_log(SP_LOG_DEBUG, "exec path: podman's REST exec (%s)",
               sp_fast_mode(sb) == SP_EXEC_REST ? "the REST path is asked for"
               : !sb->cfg.agent                 ? "the sandbox runs no agent"
                                                : "another user than the agent's");
        return 0;
    }
    sp_error *ferr = NULL;
    int r = sp_fast_start(out, sb, spec, &ferr);
    if (r == 0) {
        sp_log(SP_LOG_DEBUG, "exec path: the agent");
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
