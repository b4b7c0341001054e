/* Commands run to completion in a sandbox: sp_sandbox_shell/exec.
 *
 * Every command is started through a small sh wrapper that puts it in a
 * process group of its own (setsid on a background job, which is never a
 * group leader and so never forks) and records the group id in /tmp. On
 * timeout a second exec kills that whole group, so background children
 * the command started go too. When the command returns, whatever it left
 * running in its group is killed as well: a tool call does not leak
 * processes (long-running servers belong in an interactive session).
 *
 * When the container runs sandpod-agent, a command instead goes over its
 * unix socket (fastpath.c): the agent gives it a process group of its own,
 * kills the group when it returns, and kills the whole tree on a KILL frame
 * (the timeout) or when the connection closes. No wrapper, no second exec. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "local_state.h"
#include "cmdio.h"
#include "procgroup.h"
#include "local_kind.h"
#include "sandbox_internal.h"

#define DEFAULT_TIMEOUT_MS 60000
/* After a kill, how long to wait for the stream to end. */
#define DRAIN_MS 3000

void sp_run_result_free(sp_run_result *r)
{
    if (!r)
        return;
    free(r->out);
    free(r->err);
    free(r);
}

/* Kill the command's process group from inside the container. */
static void kill_group(sp_sandbox *sb, const char *token)
{
    cleanup_free char *script = sp_group_kill_script(token);
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    sp_exec_spec spec = SP_EXEC_SPEC_INIT;
    spec.argv = argv;
    spec.user = sb->cfg.user;
    spec.attach_stdout = spec.attach_stderr = true;
    sp_stream e = {0};
    if (sp_local_exec(&e, sb->lops, sb->local, sb->container_id, &spec, NULL) < 0)
        return;
    char buf[512];
    size_t n;
    int64_t end = sp_now_ms() + DRAIN_MS;
    while (sp_now_ms() < end &&
           e.ops->read(&n, NULL, e.impl, buf, sizeof(buf), (int)(end - sp_now_ms()), NULL) == 0 &&
           n)
        ;
    /* Its exit code read, the kill's exec session leaves no process behind. */
    int code;
    e.ops->exited(&code, e.impl, DRAIN_MS, NULL);
    sp_stream_free(&e);
}

/* A command ended early (killed, or its stream lost): when the container
 * itself is down, say so, and how to bring it back, instead of handing
 * back the exit code of a kill nobody asked for. 0 while it still runs. */
static int cut_short(sp_sandbox *sb, sp_error **err)
{
    sp_error *why = NULL;
    int r = sp_sandbox_require_running(sb, &why);
    if (r == 0)
        return 0;
    if (err) {
        sp_error_free(*err);
        *err = why;
    } else {
        sp_error_free(why);
    }
    return sp_err_wrap(err, r, "the command was cut short");
}

/* Hand *e to the caller in place of what *err held; its code. */
static int replace_err(sp_error **err, sp_error **e)
{
    int code = (*e)->code;
    if (err) {
        sp_error_free(*err);
        *err = steal_pointer(e);
    }
    return code;
}

/* Drive the command's stream (sp_cmd_step(): stdin in slices between
 * reads, so input of any size streams with the output) and collect the
 * output until the stream ends; at the deadline kill the command (the
 * stream's kill, else its process group `token`) and drain for DRAIN_MS.
 * Returns 0 (the stream ended, or drained after a kill) or a read error. */
static int pump(sp_stream *c, sp_sandbox *sb, const char *token, const sp_run_opts *o,
                int64_t start, int timeout, sp_capbuf *cout, sp_capbuf *cerr, bool *timed_out,
                sp_error **err)
{
    /* A command that exits before it read its input ends the stream after
     * its exit: what is left unsent is moot. */
    sp_cmd_input in = {.data = o->stdin_data,
                       .len = o->stdin_data ? o->stdin_len : 0,
                       .close_after = true,
                       .closed = !o->stdin_data};
    int64_t deadline = timeout > 0 ? start + timeout : INT64_MAX;
    int r;
    for (;;) {
        int64_t now = sp_now_ms();
        if (now >= deadline && !*timed_out) {
            *timed_out = true;
            if (c->ops->kill(c->impl, 0))
                kill_group(sb, token);
            deadline = sp_now_ms() + DRAIN_MS;
            continue;
        }
        if (now >= deadline) {
            r = 0; /* killed, and the stream still did not end */
            break;
        }
        struct pollfd pfd = {.fd = c->ops->fd(c->impl), .events = sp_cmd_events(&in)};
        if (c->ops->buffered(c->impl))
            pfd.revents = POLLIN;
        else if (poll(&pfd, 1, deadline == INT64_MAX ? 1000 : (int)(deadline - now)) < 0)
            pfd.revents = 0; /* EINTR */
        r = sp_cmd_step(c, pfd.revents, &in, cout, cerr, 16, err);
        if (r < 0)
            break;
        if (r == SP_CMD_END) {
            r = 0;
            break;
        }
    }
    sp_error_free(in.error);
    return r;
}

/* Run a command through the agent. 0 with *out NULL: nothing ran, the
 * REST path is to be taken (sp_cmd_start_fast()). */
static int fast_exec(sp_run_result **out, sp_sandbox *sb, const char *const *argv,
                     const sp_run_opts *o, int timeout, sp_error **err)
{
    char **env = sp_sandbox_command_env(sb, o->env);
    sp_fast_spec spec = {.argv = argv,
                         .env = (const char *const *)env,
                         .workdir = o->workdir ? o->workdir : sb->cfg.workdir,
                         .kill_on_exit = true};
    int64_t start = sp_now_ms();
    sp_stream c = {0};
    int r = sp_cmd_start_fast(&c, sb, o->user, &spec, err);
    sp_strv_free(env);
    if (r < 0 || !c.ops)
        return r;

    sp_capbuf cout, cerr;
    sp_capbuf_init(&cout, o->max_bytes, o->max_lines);
    sp_capbuf_init(&cerr, o->max_bytes, o->max_lines);
    bool timed_out = false;
    r = pump(&c, sb, NULL, o, start, timeout, &cout, &cerr, &timed_out, err);
    if (r < 0) {
        /* The agent is pid 1: it goes when the container goes. */
        sp_error *down = NULL;
        if (cut_short(sb, &down) < 0)
            r = replace_err(err, &down);
        sp_error_free(down);
        goto done;
    }
    int code = -1;
    if (c.ops->exited(&code, c.impl, 0, NULL) < 0)
        code = 128 + SIGKILL;
    sp_run_result *res = sp_xcalloc(1, sizeof(*res));
    res->exit_code = code;
    res->timed_out = timed_out;
    res->out_total = cout.total_bytes;
    res->err_total = cerr.total_bytes;
    res->out = sp_capbuf_text(&cout, &res->out_len, &res->out_truncated);
    res->err = sp_capbuf_text(&cerr, &res->err_len, &res->err_truncated);
    res->duration_ms = sp_now_ms() - start;
    *out = res;
    r = 0;
done:
    sp_stream_free(&c); /* closing kills whatever is left */
    sp_capbuf_dispose(&cout);
    sp_capbuf_dispose(&cerr);
    return r;
}

int sp_sandbox_exec(sp_run_result **out, sp_sandbox *sb, const char *const *argv,
                    const sp_run_opts *opts, sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_RUN_OPTS_VERSION, "sp_run_opts", err) < 0)
        return SP_EINVAL;
    sp_run_opts o = SP_RUN_OPTS_INIT;
    if (opts)
        o = *opts;
    if (!argv || !argv[0])
        return sp_err_set(err, SP_EINVAL, 0, "exec: no command given");
    if (o.timeout_ms == 0)
        o.timeout_ms = DEFAULT_TIMEOUT_MS;
    return sb->kind->exec(out, sb, argv, &o, err);
}

int sp_local_run(sp_run_result **out, sp_sandbox *sb, const char *const *argv,
                 const sp_run_opts *opts, sp_error **err)
{
    sp_run_opts o = *opts;
    int timeout = o.timeout_ms;
    int r = fast_exec(out, sb, argv, &o, timeout, err);
    if (r < 0 || *out)
        return r;
    r = sp_sandbox_require_running(sb, err);
    if (r < 0)
        return r;

    cleanup_free char *token = sp_cmd_token();
    sp_strv wargv = {0};
    sp_strv_push(&wargv, sp_xstrdup("/bin/sh"));
    sp_strv_push(&wargv, sp_xstrdup("-c"));
    sp_strv_push(&wargv, sp_xstrdup(SP_GROUP_WRAPPER));
    sp_strv_push(&wargv, sp_xstrdup("sandpod"));
    sp_strv_push(&wargv, sp_xstrdup(token));
    for (size_t i = 0; argv[i]; i++)
        sp_strv_push(&wargv, sp_xstrdup(argv[i]));
    char **env = sp_sandbox_command_env(sb, o.env);

    sp_exec_spec spec = SP_EXEC_SPEC_INIT;
    spec.argv = (const char *const *)wargv.v;
    spec.env = (const char *const *)env;
    spec.workdir = o.workdir ? o.workdir : sb->cfg.workdir;
    spec.user = o.user ? o.user : sb->cfg.user;
    spec.attach_stdin = o.stdin_data != NULL;

    int64_t start = sp_now_ms();
    char *exec_id = NULL;
    sp_stream c = {0};
    sp_capbuf cout, cerr;
    sp_capbuf_init(&cout, o.max_bytes, o.max_lines);
    sp_capbuf_init(&cerr, o.max_bytes, o.max_lines);
    bool timed_out = false;

    r = sb->lops->exec_create(&exec_id, sb->local, sb->container_id, &spec, err);
    if (r < 0)
        goto done;
    r = sb->lops->exec_start(&c, sb->local, exec_id, false, false, err);
    if (r < 0)
        goto done;
    r = pump(&c, sb, token, &o, start, timeout, &cout, &cerr, &timed_out, NULL);
    if (r < 0) {
        sp_error *down = NULL;
        if (cut_short(sb, &down) < 0 && down->reason != SP_R_SERVICE) {
            r = replace_err(err, &down);
            sp_error_free(down);
            goto done;
        }
        sp_error_free(down);
        r = sp_err_set(err, SP_EPODMAN, 0,
                       "lost the %s service while running a command in sandbox %s; "
                       "the command may still be running",
                       sb->lops->kind, sb->name);
        goto done;
    }

    /* The stream also ends when the service dies; only the exit code
     * tells a finished command from a lost connection. */
    int code = -1;
    sp_error *werr = NULL;
    int wr = c.ops->exited(&code, c.impl, timed_out ? DRAIN_MS : 10000, &werr);
    if (wr < 0 && !timed_out) {
        r = sp_err_set(err, SP_EPODMAN, werr ? werr->sys_errno : 0,
                       "lost the %s service while running a command in sandbox %s (%s); "
                       "the command may still be running",
                       sb->lops->kind, sb->name, werr ? werr->message : "no exit code");
        sp_error_free(werr);
        goto done;
    }
    sp_error_free(werr);
    /* Killed by a signal, or no exit code at all: perhaps the container
     * went (a kill, the OOM killer, a stop from elsewhere). */
    if (!timed_out && (wr < 0 || code < 0 || code >= 128) && (r = cut_short(sb, err)) < 0)
        goto done;
    sp_run_result *res = sp_xcalloc(1, sizeof(*res));
    res->exit_code = wr == 0 ? code : 128 + SIGKILL;
    res->timed_out = timed_out;
    res->out_total = cout.total_bytes;
    res->err_total = cerr.total_bytes;
    res->out = sp_capbuf_text(&cout, &res->out_len, &res->out_truncated);
    res->err = sp_capbuf_text(&cerr, &res->err_len, &res->err_truncated);
    res->duration_ms = sp_now_ms() - start;
    *out = res;
    r = 0;

done:
    sp_stream_free(&c);
    free(exec_id);
    sp_capbuf_dispose(&cout);
    sp_capbuf_dispose(&cerr);
    sp_strv_dispose(&wargv);
    sp_strv_free(env);
    return r;
}

int sp_sandbox_shell(sp_run_result **out, sp_sandbox *sb, const char *command,
                     const sp_run_opts *opts, sp_error **err)
{
    if (!command)
        return sp_err_set(err, SP_EINVAL, 0, "shell: no command given");
    const char *argv[] = {"/bin/sh", "-c", command, NULL};
    return sp_sandbox_exec(out, sb, argv, opts, err);
}
