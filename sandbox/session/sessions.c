/* Interactive sessions: sp_session_start/write/resize/signal/kill/list.
 *
 * Each session is one Podman exec with stdin attached, by default on a
 * pseudo-terminal. runc makes every exec process the leader of a terminal
 * session and process group of its own, so the command needs no setsid
 * wrapper: a small sh prologue records its pid in /tmp (so a later exec can
 * find the group) and execs `sh -c command` in place. The environment
 * variable SANDPOD_SESSION=<token> marks every process the session starts,
 * which lets a kill find even those that left the group.
 *
 * One background thread per sandbox handle does every session's I/O
 * (session_io.c), through the same interface and step as run.c's commands.
 *
 * A process-wide registry of host pids lets exit and signal handlers kill
 * every live session when the owning process goes away (see
 * sp_session_kill_all_signal_safe()).
 *
 * When the container runs sandpod-agent, a session is instead one
 * connection to it (fastpath.c): the agent starts `sh -c command` in a
 * session of its own (on a pty or pipes), reports its host pid through
 * SCM_CREDENTIALS, and kills its tree (group, terminal session, and every
 * process carrying the token) on a KILL frame or when the connection
 * closes, which also covers an owner that dies by SIGKILL. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "local_state.h"
#include "cmdio.h"
#include "procgroup.h"
#include "local_kind.h"
#include "session_internal.h"

#define DEFAULT_ROWS 24
#define DEFAULT_COLS 80

/* Ids count up across the process, so that one never names two sessions,
 * not even after a handle's sessions were closed (sp_sandbox_stop). */
static _Atomic int next_session_id = 1;

/* $1 = token, $2/$3 = terminal rows/cols (0 = none), the rest = argv.
 * Stale pid files (their process is gone) are removed on the way; a file
 * still being written is non-empty only once complete, so it is skipped
 * rather than removed. */
static const char WRAPPER[] =
    "t=$1; r=$2; c=$3; shift 3; "
    "for f in /tmp/.sandpod-session-*.pid; do "
    "[ -s \"$f\" ] && read -r p < \"$f\" && ! [ -d \"/proc/$p\" ] && rm -f \"$f\"; "
    "done 2>/dev/null; "
    "echo $$ > /tmp/.sandpod-session-$t.pid 2>/dev/null; "
    "[ \"$r\" -gt 0 ] 2>/dev/null && stty rows \"$r\" cols \"$c\" 2>/dev/null; "
    "exec \"$@\"";

/* Make room for one more session: an exited one goes first, else the one
 * idle the longest. */
static char *prune(sp_sandbox *sb, sp_session_table *t)
{
    pthread_mutex_lock(&t->mu);
    session *victim = NULL;
    for (size_t i = 0; i < t->n; i++) {
        session *s = t->v[i];
        if (!victim || (s->ended && !victim->ended) ||
            (s->ended == victim->ended && s->used_ms < victim->used_ms))
            victim = s;
    }
    bool ended = victim->ended;
    pthread_mutex_unlock(&t->mu);
    int64_t idle = sp_now_ms() - victim->used_ms;
    char *note =
        sp_xasprintf("pruned session %d (%.60s%s, %s, idle %lld.%llds) to stay within %d "
                     "sessions",
                     victim->id, victim->command, strlen(victim->command) > 60 ? "..." : "",
                     ended ? "exited" : "killed", (long long)(idle / 1000),
                     (long long)(idle % 1000 / 100), SP_SESSION_MAX);
    sp_sess_detach(t, victim);
    if (!ended)
        sp_sess_kill_trees(sb, &victim, 1, NULL);
    sp_sess_free(victim);
    return note;
}

static char **session_env(const sp_sandbox *sb, const char *const *extra, const char *token)
{
    cleanup_free char *tok = sp_xasprintf(ENV_TOKEN "=%s", token);
    sp_strv sv = {0};
    for (size_t i = 0; extra && extra[i]; i++)
        sp_strv_push(&sv, sp_xstrdup(extra[i]));
    sp_strv_push(&sv, steal_pointer(&tok));
    char **more = sp_strv_steal(&sv);
    char **env = sp_sandbox_command_env(sb, (const char *const *)more);
    sp_strv_free(more);
    return env;
}

int sp_local_session_start(sp_session_output **out, sp_sandbox *sb, const char *command,
                           const sp_session_opts *opts, sp_error **err)
{
    int64_t t0 = sp_now_ms();
    sp_session_opts o = *opts;
    bool tty = !o.no_tty;
    unsigned rows = o.rows ? o.rows : DEFAULT_ROWS;
    unsigned cols = o.cols ? o.cols : DEFAULT_COLS;
    const char *user = o.user ? o.user : sb->cfg.user;
    bool fast = sp_fast_wanted(sb, o.user);
    int r = fast ? 0 : sp_sandbox_require_running(sb, err);
    if (r < 0)
        return r;
    sp_session_table *t = NULL;
    if ((r = sp_sess_table_get(&t, sb, err)) < 0)
        return r;

    char *note = t->n >= SP_SESSION_MAX ? prune(sb, t) : NULL;

    char *token = sp_cmd_token();
    sp_stream io = {0};
    char **env = session_env(sb, o.env, token);
    const char *workdir = o.workdir ? o.workdir : sb->cfg.workdir;
    if (fast) {
        const char *argv[] = {"/bin/sh", "-c", command, NULL};
        cleanup_free char *marker = sp_xasprintf(ENV_TOKEN "=%s", token);
        sp_fast_spec fs = {.argv = argv,
                           .env = (const char *const *)env,
                           .workdir = workdir,
                           .tty = tty,
                           .rows = rows,
                           .cols = cols,
                           .kill_marker = marker};
        r = sp_cmd_start_fast(&io, sb, o.user, &fs, err);
        if (r == 0 && !io.ops)
            r = sp_sandbox_require_running(sb, err); /* no agent answers: the REST path */
    }
    if (r == 0 && !io.ops) {
        char rs[16], cs[16];
        snprintf(rs, sizeof(rs), "%u", tty ? rows : 0);
        snprintf(cs, sizeof(cs), "%u", tty ? cols : 0);
        const char *argv[] = {"/bin/sh", "-c",      WRAPPER, "sandpod", token, rs,
                              cs,        "/bin/sh", "-c",    command,   NULL};
        sp_exec_spec spec = SP_EXEC_SPEC_INIT;
        spec.argv = argv;
        spec.env = (const char *const *)env;
        spec.workdir = workdir;
        spec.user = user;
        spec.tty = tty;
        spec.attach_stdin = true;
        spec.attach_stdout = spec.attach_stderr = true;
        char *exec_id = NULL;
        r = sb->lops->exec_create(&exec_id, sb->local, sb->container_id, &spec, err);
        if (r == 0)
            r = sb->lops->exec_start(&io, sb->local, exec_id, tty, false, err);
        free(exec_id);
        if (r < 0)
            sp_err_wrap(err, r, "start session in sandbox %s", sb->name);
        /* The wrapper already set the size with stty, before the command
         * could look; this covers images without stty. */
        else if (tty)
            io.ops->resize(io.impl, rows, cols, NULL);
    }
    sp_strv_free(env);
    if (r < 0) {
        free(token);
        free(note);
        return r;
    }

    session *s = sp_xcalloc(1, sizeof(*s));
    s->token = token;
    s->command = sp_xstrdup(command);
    s->user = sp_xstrdup(user ? user : "");
    s->io = io;
    s->tty = tty;
    s->reg = sp_sess_registry_reserve(token);
    s->started_ms = s->used_ms = sp_now_ms();
    sp_sess_pending_reset(s);
    if (o.close_stdin) {
        if (tty)
            sp_buf_addc(&s->inq, '\x04');
        s->in.close_after = !tty;
    }

    pthread_mutex_lock(&t->mu);
    s->id = atomic_fetch_add(&next_session_id, 1);
    t->v[t->n++] = s;
    pthread_mutex_unlock(&t->mu);
    sp_sess_wake(t);
    return sp_sess_collect(out, sb, s, sp_sess_clamp_yield(o.yield_time_ms),
                           sp_sess_budget_bytes(o.max_output_tokens), t0, note, err);
}

static int no_session(sp_sandbox *sb, int id, sp_error **err)
{
    return sp_err_set(err, SP_ENOTFOUND, 0,
                      "no session %d in sandbox %s (it exited, was killed or was pruned)", id,
                      sb->name);
}

/* Look a session up; the table's thread never frees sessions, so the
 * pointer stays valid on the caller's thread. */
static session *lookup(sp_sandbox *sb, int id)
{
    sp_session_table *t = sb->sessions;
    if (!t)
        return NULL;
    pthread_mutex_lock(&t->mu);
    session *s = sp_sess_find(t, id);
    pthread_mutex_unlock(&t->mu);
    return s;
}

int sp_local_session_signal(sp_sandbox *sb, int session_id, int signo, sp_error **err)
{
    session *s = lookup(sb, session_id);
    if (!s)
        return no_session(sb, session_id, err);
    /* Frames from this thread and the I/O thread must not interleave. */
    pthread_mutex_lock(&sb->sessions->mu);
    int r = s->ended ? 0 : s->io.ops->signal(s->io.impl, signo, err);
    pthread_mutex_unlock(&sb->sessions->mu);
    if (r <= 0)
        return r < 0 ? sp_err_wrap(err, r, "signal session %d", session_id) : 0;
    int leader = sp_session_container_kill_only ? 0 : sp_sess_registry_leader(s->reg);
    if (leader) {
        kill(-leader, signo);
        return 0;
    }
    /* The group from the pid file; failing that, every process that
     * carries the token. */
    cleanup_free char *script = sp_xasprintf(
        "f=/tmp/.sandpod-session-%s.pid; "
        "if read -r p < \"$f\" && [ -d /proc/$p ]; then kill -%d -$p; else "
        "for f in $(grep -l \"" ENV_TOKEN "=%s\" /proc/[0-9]*/environ); do "
        "n=${f#/proc/}; n=${n%%/environ}; [ \"$n\" = \"$$\" ] || kill -%d $n; done; fi "
        "2>/dev/null; exit 0",
        s->token, signo, s->token, signo);
    r = sp_sess_run_script(sb, *s->user ? s->user : NULL, script, err);
    if (r < 0)
        return sp_err_wrap(err, r, "signal session %d", session_id);
    return 0;
}

int sp_local_session_write(sp_session_output **out, sp_sandbox *sb, int session_id,
                           const char *chars, size_t len, const sp_session_write_opts *opts,
                           sp_error **err)
{
    int64_t t0 = sp_now_ms();
    sp_session_write_opts o = *opts;
    session *s = lookup(sb, session_id);
    if (!s)
        return no_session(sb, session_id, err);
    sp_session_table *t = sb->sessions;
    char *note = NULL;
    if (!s->tty && len == 1 && chars[0] == '\x03') {
        /* No line discipline to turn ^C into SIGINT: do its job. */
        int r = sp_local_session_signal(sb, session_id, SIGINT, err);
        if (r < 0)
            return r;
        len = 0;
    }
    pthread_mutex_lock(&t->mu);
    bool ended = s->ended;
    bool closed = s->in.closed || (s->in.close_after && !s->tty);
    if (!ended && closed && len) {
        pthread_mutex_unlock(&t->mu);
        return sp_err_set(err, SP_EINVAL, 0, "stdin of session %d is closed", session_id);
    }
    if (!ended) {
        if (len)
            sp_buf_add(&s->inq, chars, len);
        if (o.close_stdin) {
            if (s->tty)
                sp_buf_addc(&s->inq, '\x04');
            else
                s->in.close_after = true;
        }
    }
    pthread_mutex_unlock(&t->mu);
    if (ended && len)
        sp_sess_note_add(&note, "session %d had exited; the input was not sent", session_id);
    else if (len || o.close_stdin)
        sp_sess_wake(t);
    return sp_sess_collect(out, sb, s, sp_sess_clamp_yield(o.yield_time_ms),
                           sp_sess_budget_bytes(o.max_output_tokens), t0, note, err);
}

int sp_local_session_resize(sp_sandbox *sb, int session_id, unsigned rows, unsigned cols,
                            sp_error **err)
{
    session *s = lookup(sb, session_id);
    if (!s)
        return no_session(sb, session_id, err);
    if (!s->tty)
        return sp_err_set(err, SP_EINVAL, 0, "session %d has no terminal to resize", session_id);
    if (!rows || !cols || rows > 0xffff || cols > 0xffff)
        return sp_err_set(err, SP_EINVAL, 0, "session %d: bad terminal size %ux%u", session_id,
                          rows, cols);
    pthread_mutex_lock(&sb->sessions->mu);
    int r = s->ended ? 0 : s->io.ops->resize(s->io.impl, rows, cols, err);
    pthread_mutex_unlock(&sb->sessions->mu);
    return r < 0 ? sp_err_wrap(err, r, "resize session %d", session_id) : 0;
}

int sp_local_session_kill(sp_sandbox *sb, int session_id, sp_error **err)
{
    session *s = lookup(sb, session_id);
    if (!s)
        return no_session(sb, session_id, err);
    sp_sess_detach(sb->sessions, s);
    int r = sp_sess_kill_trees(sb, &s, 1, err);
    sp_sess_free(s);
    if (r < 0)
        return sp_err_wrap(err, r, "kill session %d", session_id);
    return 0;
}

int sp_local_session_list(sp_session_info **out, size_t *n_out, sp_sandbox *sb, sp_error **err)
{
    (void)err;
    sp_session_table *t = sb->sessions;
    if (!t)
        return 0;
    int64_t now = sp_now_ms();
    pthread_mutex_lock(&t->mu);
    if (t->n) {
        sp_session_info *v = sp_xcalloc(t->n, sizeof(*v));
        for (size_t i = 0; i < t->n; i++) {
            const session *s = t->v[i];
            v[i].id = s->id;
            v[i].command = sp_xstrdup(s->command);
            v[i].tty = s->tty;
            v[i].running = !s->ended;
            v[i].age_ms = now - s->started_ms;
            v[i].idle_ms = now - s->used_ms;
            v[i].pending_bytes = s->pending.total_bytes;
            v[i].host_pid = s->host_pid;
        }
        *out = v;
        *n_out = t->n;
    }
    pthread_mutex_unlock(&t->mu);
    return 0;
}

void sp_session_info_free(sp_session_info *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i].command);
    free(v);
}

void sp_local_sessions_close(sp_sandbox *sb)
{
    sp_session_table *t = sb->sessions;
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    session *v[SP_SESSION_MAX];
    size_t n = t->n;
    memcpy(v, t->v, n * sizeof(v[0]));
    size_t live = 0;
    session *running[SP_SESSION_MAX];
    for (size_t i = 0; i < n; i++)
        if (!v[i]->ended)
            running[live++] = v[i];
    t->n = 0;
    t->stop = true;
    pthread_mutex_unlock(&t->mu);
    sp_sess_wake(t);
    pthread_join(t->thread, NULL);
    if (live)
        sp_sess_kill_trees(sb, running, live, NULL);
    for (size_t i = 0; i < n; i++)
        sp_sess_free(v[i]);
    close(t->wake_fd);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cond);
    free(t);
    sb->sessions = NULL;
}

/* ------------------------------------------------- the public calls -- */

int sp_session_start(sp_session_output **out, sp_sandbox *sb, const char *command,
                     const sp_session_opts *opts, sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_SESSION_OPTS_VERSION, "sp_session_opts", err) < 0)
        return SP_EINVAL;
    sp_session_opts o = SP_SESSION_OPTS_INIT;
    if (opts)
        o = *opts;
    if (!command || !*command)
        return sp_err_set(err, SP_EINVAL, 0, "session: no command given");
    if (!o.no_tty && (o.rows > 0xffff || o.cols > 0xffff))
        return sp_err_set(err, SP_EINVAL, 0, "session: bad terminal size %ux%u", o.rows, o.cols);
    return sb->kind->session_start(out, sb, command, &o, err);
}

int sp_session_write(sp_session_output **out, sp_sandbox *sb, int session_id, const char *chars,
                     size_t len, const sp_session_write_opts *opts, sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_SESSION_WRITE_OPTS_VERSION, "sp_session_write_opts", err) < 0)
        return SP_EINVAL;
    sp_session_write_opts o = SP_SESSION_WRITE_OPTS_INIT;
    if (opts)
        o = *opts;
    if (!chars && len)
        return sp_err_set(err, SP_EINVAL, 0, "session %d: no characters given", session_id);
    return sb->kind->session_write(out, sb, session_id, chars, len, &o, err);
}

int sp_session_signal(sp_sandbox *sb, int session_id, int signo, sp_error **err)
{
    if (signo <= 0 || signo >= 65)
        return sp_err_set(err, SP_EINVAL, 0, "session %d: bad signal %d", session_id, signo);
    return sb->kind->session_signal(sb, session_id, signo, err);
}

int sp_session_resize(sp_sandbox *sb, int session_id, unsigned rows, unsigned cols, sp_error **err)
{
    return sb->kind->session_resize(sb, session_id, rows, cols, err);
}

int sp_session_kill(sp_sandbox *sb, int session_id, sp_error **err)
{
    return sb->kind->session_kill(sb, session_id, err);
}

int sp_session_list(sp_session_info **out, size_t *n_out, sp_sandbox *sb, sp_error **err)
{
    *out = NULL;
    *n_out = 0;
    return sb->kind->session_list(out, n_out, sb, err);
}
