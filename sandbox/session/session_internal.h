/* Internals of interactive sessions, shared by their files. Not installed.
 *
 *   sessions.c        the public calls (start, write, signal, resize, kill, list)
 *   session_io.c      the table of a handle's sessions and its I/O thread
 *   session_output.c  waiting for and capping what a session printed
 *   session_kill.c    killing sessions' process trees
 *   session_registry.c  host pids of live sessions, for exit and signal handlers */
#ifndef SANDPOD_SESSION_INTERNAL_H
#define SANDPOD_SESSION_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "cmdio.h"
#include "sandbox_internal.h"
#include "sandpod/session.h"

#define ENV_TOKEN      "SANDPOD_SESSION"
#define TOKEN_LEN      16
#define REGISTRY_SLOTS 1024
/* How long a kill exec may take, and how long to wait for an exit code
 * after a stream ended. */
#define KILL_WAIT_MS 5000
#define EXIT_WAIT_MS 3000

typedef struct session {
    int id;
    char *token;
    char *command;
    char *user;
    sp_stream io; /* through the agent, or Podman's exec */
    bool tty;
    int host_pid;
    bool pid_checked; /* registration was attempted with a known pid */
    int pid_tries;    /* attempts so far while the pid was not yet ours */
    int reg;          /* registry slot, or -1 */
    int64_t started_ms;
    int64_t used_ms;
    /* Shared with the I/O thread; guarded by the table's mutex. */
    sp_capbuf pending;
    sp_buf inq;      /* stdin bytes not yet sent, from in.off */
    sp_cmd_input in; /* in.close_after: close stdin once inq is sent */
    bool ended;      /* the stream reached its end or broke */
    char *io_error;  /* why reading or writing failed, or NULL */
} session;

struct sp_session_table {
    pthread_mutex_t mu;
    /* Signalled when a session's stream ends: what sp_sess_collect()
     * waits for (with its yield time). Not after every round: a caller
     * waiting on a command that prints without pause was woken thousands
     * of times a second to find nothing to do. */
    pthread_cond_t cond;
    session *v[SP_SESSION_MAX];
    size_t n;
    int wake_fd;
    pthread_t thread;
    bool stop;
    uint64_t early_wakeups; /* collects woken before their time, for tests */
};

/* session_io.c */
int sp_sess_table_get(sp_session_table **out, sp_sandbox *sb, sp_error **err);
void sp_sess_pending_reset(session *s);
void sp_sess_free(session *s);
/* Wake the I/O thread (after queuing input, or a change to the table). */
void sp_sess_wake(sp_session_table *t);
/* Under the table's mutex. */
session *sp_sess_find(sp_session_table *t, int id);
/* Take a session out of the table (the I/O thread forgets it). */
void sp_sess_detach(sp_session_table *t, session *s);

/* session_output.c */
int sp_sess_clamp_yield(int ms);
size_t sp_sess_budget_bytes(size_t tokens);
void sp_sess_note_add(char **note, const char *fmt, ...) SP_PRINTF(2, 3);
/* Wait up to yield_ms (or until the stream ends), then hand out what the
 * session printed. A session whose command exited is removed and freed. */
int sp_sess_collect(sp_session_output **out, sp_sandbox *sb, session *s, int yield_ms,
                    size_t budget, int64_t t0, char *note, sp_error **err);

/* session_kill.c */
/* Run a short sh script in the container as `user` and wait for it. */
int sp_sess_run_script(sp_sandbox *sb, const char *user, const char *script, sp_error **err);
/* Kill sessions' whole process trees (see there). */
int sp_sess_kill_trees(sp_sandbox *sb, session **v, size_t n, sp_error **err);

/* session_registry.c */
/* Enter a session's token (its pid not known yet); the slot or -1. */
int sp_sess_registry_reserve(const char *token);
/* Record the leader's pid once it is known to be ours; false when not (yet). */
bool sp_sess_registry_set_pid(int slot, int pid);
void sp_sess_registry_remove(int slot);
/* The verified host pid of a registered session's leader, or 0. */
int sp_sess_registry_leader(int slot);
/* Kill from the host the groups and terminal sessions led by `leaders`
 * and every process carrying one of `tokens` (async-signal-safe). */
void sp_sess_host_kill(const int *leaders, size_t nl, const char *const *tokens, size_t nt);

#endif
