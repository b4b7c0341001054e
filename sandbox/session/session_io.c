/* The table of a handle's sessions and the one thread that does their
 * I/O: it reads every session's stream into a capped pending buffer and
 * writes queued stdin bytes, through the same step as run.c's commands
 * (sp_cmd_step()), so commands never block on a full pipe between calls
 * and callers only wait on a condition variable. The thread touches
 * nothing but the table and the streams; Podman requests stay on the
 * caller's thread, as an engine connection is not thread-safe. */
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>

#include "cmdio.h"
#include "session_internal.h"

#define READS_PER_ROUND 16

void sp_sess_pending_reset(session *s)
{
    sp_capbuf_init(&s->pending, SP_SESSION_PENDING_BYTES, SIZE_MAX / 4);
}

void sp_sess_free(session *s)
{
    if (!s)
        return;
    sp_sess_registry_remove(s->reg);
    sp_stream_free(&s->io);
    sp_capbuf_dispose(&s->pending);
    sp_buf_dispose(&s->inq);
    sp_error_free(s->in.error);
    free(s->io_error);
    free(s->token);
    free(s->command);
    free(s->user);
    free(s);
}

void sp_sess_wake(sp_session_table *t)
{
    uint64_t one = 1;
    ssize_t r = write(t->wake_fd, &one, sizeof(one));
    (void)r; /* a full counter already means "wake up" */
}

session *sp_sess_find(sp_session_table *t, int id)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i]->id == id)
            return t->v[i];
    return NULL;
}

/* Take a session out of the table (the I/O thread forgets it). */
void sp_sess_detach(sp_session_table *t, session *s)
{
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->n; i++) {
        if (t->v[i] == s) {
            memmove(&t->v[i], &t->v[i + 1], (t->n - i - 1) * sizeof(t->v[0]));
            t->n--;
            break;
        }
    }
    pthread_mutex_unlock(&t->mu);
    sp_sess_wake(t);
}

static void set_io_error(session *s, sp_error *e, const char *fallback)
{
    if (!s->io_error)
        s->io_error = sp_xstrdup(e && e->message ? e->message : fallback);
    sp_error_free(e);
}

/* The input as the stream's step sees it: what inq holds now. */
static sp_cmd_input *input(session *s)
{
    s->in.data = s->inq.data;
    s->in.len = s->inq.len;
    return &s->in;
}

/* One round of a session's I/O (sp_cmd_step(), as run.c's commands).
 * True when output may remain, so the next poll must not sleep. */
static bool step(sp_session_table *t, session *s, short revents)
{
    sp_error *e = NULL;
    int r = sp_cmd_step(&s->io, revents, input(s), &s->pending, NULL, READS_PER_ROUND, &e);
    if (s->in.error)
        set_io_error(s, steal_pointer(&s->in.error), "writing stdin failed");
    if (s->in.off == s->inq.len) {
        s->inq.len = 0;
        s->in.off = 0;
    }
    if (r < 0) {
        set_io_error(s, e, "the output stream broke");
        s->ended = true;
    } else if (r == SP_CMD_END) {
        s->ended = true;
    }
    if (s->ended)
        pthread_cond_broadcast(&t->cond);
    return r == SP_CMD_MORE;
}

static void *io_main(void *arg)
{
    sp_session_table *t = arg;
    struct pollfd pfd[SP_SESSION_MAX + 1];
    int ids[SP_SESSION_MAX + 1];
    bool busy = false;
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        nfds_t n = 0;
        pfd[n++] = (struct pollfd){.fd = t->wake_fd, .events = POLLIN};
        for (size_t i = 0; i < t->n; i++) {
            session *s = t->v[i];
            if (s->ended)
                continue;
            ids[n] = s->id;
            pfd[n++] =
                (struct pollfd){.fd = s->io.ops->fd(s->io.impl), .events = sp_cmd_events(input(s))};
        }
        pthread_mutex_unlock(&t->mu);
        int pr = poll(pfd, n, busy ? 0 : -1);
        pthread_mutex_lock(&t->mu);
        busy = false;
        if (pr < 0)
            continue; /* EINTR */
        if (pfd[0].revents) {
            uint64_t v;
            ssize_t r = read(t->wake_fd, &v, sizeof(v));
            (void)r;
        }
        for (nfds_t k = 1; k < n; k++) {
            session *s = sp_sess_find(t, ids[k]);
            if (!s || s->ended)
                continue;
            busy |= step(t, s, pfd[k].revents);
        }
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

int sp_sess_table_get(sp_session_table **out, sp_sandbox *sb, sp_error **err)
{
    if (sb->sessions) {
        *out = sb->sessions;
        return 0;
    }
    sp_session_table *t = sp_xcalloc(1, sizeof(*t));
    t->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (t->wake_fd < 0) {
        int r = sp_err_errno(err, errno, "eventfd", NULL);
        free(t);
        return r;
    }
    pthread_mutex_init(&t->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cond, &ca);
    pthread_condattr_destroy(&ca);
    /* The thread takes no signals: they belong to the program. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int pe = pthread_create(&t->thread, NULL, io_main, t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pe != 0) {
        close(t->wake_fd);
        pthread_mutex_destroy(&t->mu);
        pthread_cond_destroy(&t->cond);
        free(t);
        return sp_err_errno(err, pe, "start the session reader thread", NULL);
    }
    sb->sessions = t;
    *out = t;
    return 0;
}
