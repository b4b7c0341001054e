/* What a session printed: waiting for it up to the caller's yield time,
 * capping it to the caller's budget (head and tail), and the end of a
 * session whose command exited. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "session_internal.h"

#define DEFAULT_YIELD_MS 250
#define DEFAULT_TOKENS   8000
#define BYTES_PER_TOKEN  4

static size_t count_nl(const char *p, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += p[i] == '\n';
    return k;
}

/* Cap the pending text to `budget` bytes, head and tail. The pending
 * buffer kept half of SP_SESSION_PENDING_BYTES at each end and budget is
 * at most that, so the slices below never reach its own marker. */
static char *cap_text(const char *t, size_t len, bool pending_cut, uint64_t total,
                      uint64_t total_lines, size_t budget, size_t *out_len, bool *truncated)
{
    if (!pending_cut && len <= budget) {
        *out_len = len;
        *truncated = false;
        return sp_xstrndup(t, len);
    }
    size_t h = sp_utf8_cut(t, len, budget / 2);
    size_t keep = budget - budget / 2;
    if (keep > len - h)
        keep = len - h;
    const char *tail = t + len - keep;
    while (keep && ((unsigned char)*tail & 0xc0) == 0x80) {
        tail++;
        keep--;
    }
    uint64_t omitted = total - h - keep;
    uint64_t kept_lines = count_nl(t, h) + count_nl(tail, keep);
    sp_buf b = SP_BUF_INIT;
    sp_buf_add(&b, t, h);
    if (h && t[h - 1] != '\n')
        sp_buf_addc(&b, '\n');
    sp_buf_printf(&b, "[... %llu bytes, %llu lines omitted ...]\n", (unsigned long long)omitted,
                  (unsigned long long)(total_lines > kept_lines ? total_lines - kept_lines : 0));
    sp_buf_add(&b, tail, keep);
    *out_len = b.len;
    *truncated = true;
    return sp_buf_steal(&b);
}

int sp_sess_clamp_yield(int ms)
{
    if (ms == 0)
        return DEFAULT_YIELD_MS;
    if (ms < 0)
        return 0;
    return ms > SP_SESSION_MAX_YIELD_MS ? SP_SESSION_MAX_YIELD_MS : ms;
}

size_t sp_sess_budget_bytes(size_t tokens)
{
    if (tokens == 0)
        tokens = DEFAULT_TOKENS;
    if (tokens > SP_SESSION_PENDING_BYTES / BYTES_PER_TOKEN)
        tokens = SP_SESSION_PENDING_BYTES / BYTES_PER_TOKEN;
    return tokens * BYTES_PER_TOKEN;
}

void sp_sess_note_add(char **note, const char *fmt, ...) SP_PRINTF(2, 3);
void sp_sess_note_add(char **note, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *m = sp_xvasprintf(fmt, ap);
    va_end(ap);
    if (*note) {
        char *j = sp_xasprintf("%s; %s", *note, m);
        free(*note);
        free(m);
        *note = j;
    } else {
        *note = m;
    }
}

/* Learn the session's host pid (for the exit handlers) once it runs. */
static void learn_pid(sp_sandbox *sb, session *s)
{
    if (s->pid_checked || sp_session_skip_pid_learning)
        return;
    int pid = s->io.ops->host_pid(s->io.impl);
    if (pid <= 0)
        return;
    /* Not ours yet (still before execve): look again next time, a few
     * times (a remote service's pids are never ours). */
    if (!sp_sess_registry_set_pid(s->reg, pid) && s->reg >= 0 && ++s->pid_tries < 20)
        return;
    s->host_pid = pid;
    s->pid_checked = true;
}

/* Wait up to yield_ms (or until the stream ends), then hand out what the
 * session printed. A session whose command exited is removed and freed. */
int sp_sess_collect(sp_session_output **out, sp_sandbox *sb, session *s, int yield_ms,
                    size_t budget, int64_t t0, char *note, sp_error **err)
{
    sp_session_table *t = sb->sessions;
    int64_t deadline = sp_now_ms() + yield_ms;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = (int64_t)ts.tv_nsec + (int64_t)yield_ms * 1000000;
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);

    pthread_mutex_lock(&t->mu);
    while (!s->ended && sp_now_ms() < deadline) {
        if (pthread_cond_timedwait(&t->cond, &t->mu, &ts) == ETIMEDOUT)
            break;
        t->early_wakeups++;
    }
    sp_capbuf taken = s->pending;
    sp_sess_pending_reset(s);
    bool ended = s->ended;
    size_t queued = s->inq.len - s->in.off;
    char *io_error = steal_pointer(&s->io_error);
    pthread_mutex_unlock(&t->mu);

    sp_session_output *o = sp_xcalloc(1, sizeof(*o));
    o->session_id = s->id;
    o->exit_code = -1;
    size_t plen = 0;
    bool pcut = false;
    char *ptext = sp_capbuf_text(&taken, &plen, &pcut);
    o->total_bytes = taken.total_bytes;
    o->output = cap_text(ptext, plen, pcut, taken.total_bytes, taken.total_lines, budget,
                         &o->output_len, &o->truncated);
    free(ptext);
    sp_capbuf_dispose(&taken);

    if (ended) {
        int code = -1;
        sp_error *ierr = NULL;
        int wr = s->io.ops->exited(&code, s->io.impl, io_error ? 0 : EXIT_WAIT_MS, &ierr);
        if (wr < 0 && wr != SP_ETIMEOUT && ierr && ierr->reason == SP_R_SERVICE) {
            /* The stream went with the service: no exit code to give,
             * and none to make up. Kill what can be reached from here. */
            int r = sp_err_set(err, SP_EPODMAN, ierr->sys_errno,
                               "session %d: lost the %s service (%s); the session is "
                               "gone and its command may still run in the container",
                               s->id, sb->lops->kind, ierr->message);
            sp_error_free(ierr);
            sp_sess_kill_trees(sb, &s, 1, NULL);
            sp_sess_detach(t, s);
            sp_sess_free(s);
            sp_session_output_free(o);
            free(io_error);
            free(note);
            return r;
        }
        sp_error_free(ierr);
        if (wr == SP_ETIMEOUT) {
            /* The stream broke while the command still runs: without a
             * stream nobody could talk to it again, so it goes. */
            sp_sess_note_add(&note, "lost the output stream of session %d (%s); it was killed",
                             s->id, io_error ? io_error : "closed early");
            sp_sess_kill_trees(sb, &s, 1, NULL);
        } else if (wr < 0) {
            /* No exit code: the agent went away first; closing the
             * connection (if it still listens) kills what is left. */
            sp_sess_note_add(&note, "lost the output stream of session %d (%s)", s->id,
                             io_error ? io_error : "closed early");
        } else if (io_error) {
            sp_sess_note_add(&note, "I/O error as session %d ended: %s", s->id, io_error);
        }
        o->exited = true;
        o->exit_code = code;
        sp_sess_detach(t, s);
        sp_sess_free(s);
    } else {
        if (queued)
            sp_sess_note_add(
                &note, "%zu bytes of input are still waiting: the command is not reading stdin",
                queued);
        if (io_error)
            sp_sess_note_add(&note, "%s", io_error);
        s->used_ms = sp_now_ms();
        learn_pid(sb, s);
    }
    free(io_error);
    o->note = note;
    o->wall_ms = sp_now_ms() - t0;
    *out = o;
    return 0;
}

void sp_session_output_free(sp_session_output *o)
{
    if (!o)
        return;
    free(o->output);
    free(o->note);
    free(o);
}
