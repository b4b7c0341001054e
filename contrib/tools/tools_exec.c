/* The command tools (shell, exec_command, write_stdin) and the snapshot
 * tools (snapshot, restore, list_snapshots).
 *
 * shell runs through sp_sandbox_shell(), which caps each stream and kills
 * the command's process group on timeout. To make a running command call
 * cancellable from another thread, the command's environment carries a
 * random SANDPOD_TOOL_CALL token: sp_tools_cancel() kills every process
 * holding the running call's token, through a second sandbox handle (see
 * tools.c). A session keeps the token of the exec_command that started it,
 * so cancelling a write_stdin to it kills the session too: the command the
 * call belongs to. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "fs_json.h"
#include "sandbox_json.h"
#include "snapshot_json.h"
#include "tools_internal.h"

/* Changes a restore lists at most. */
#define RESTORE_CHANGES_MAX 200
/* ...and names in its message. */
#define RESTORE_LINES_MAX 50

static char *make_token(void)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        r = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_sec;
    }
    return sp_xasprintf("%016" PRIx64, r);
}

/* A working folder for the container: relative ones are below /workspace
 * (an agent's workload sees the workspace where we do). */
static char *container_dir(const sp_tools *t, const char *workdir)
{
    if (!workdir || !*workdir)
        return NULL;
    if (workdir[0] == '/')
        return sp_xstrdup(workdir);
    return sp_xasprintf("%s/%s", t->agent ? t->root : SP_WORKSPACE_MOUNT, workdir);
}

static void format_secs(sp_buf *b, int64_t ms)
{
    sp_buf_printf(b, "%" PRId64 ".%02" PRId64 " s", ms / 1000, (ms % 1000) / 10);
}

/* ---------------------------------------------------- cancellation -- */

/* Make `token` the running call's (what sp_tools_cancel() kills) and
 * remember the Podman URL, so that a cancel on another thread can open its
 * own handle. Returns false when the call was cancelled already. */
static bool token_begin(sp_tools *t, char *token)
{
    if (!t->podman_url) {
        const char *url = sp_sandbox_service_url(t->sb, NULL);
        if (url) {
            pthread_mutex_lock(&t->mu);
            t->podman_url = sp_xstrdup(url);
            pthread_mutex_unlock(&t->mu);
        }
    }
    pthread_mutex_lock(&t->mu);
    bool cancelled = atomic_load(&t->cancelled);
    if (!cancelled)
        t->run_token = token;
    pthread_mutex_unlock(&t->mu);
    return !cancelled;
}

static void token_end(sp_tools *t)
{
    pthread_mutex_lock(&t->mu);
    t->run_token = NULL;
    pthread_mutex_unlock(&t->mu);
}

/* --------------------------------------------------------------- shell -- */

int tool_shell(sp_tools *t, const cJSON *a, tool_call *c)
{
    const char *command = sp_json_str_or(a, "command", "");
    char *workdir = container_dir(t, sp_json_str_or(a, "workdir", NULL));
    long long timeout = sp_json_int(a, "timeout_ms", t->opts.timeout_ms);
    if (workdir)
        call_path(c, workdir);

    char *token = make_token();
    char *env_tok = sp_xasprintf("SANDPOD_TOOL_CALL=%s", token);
    const char *env[] = {env_tok, NULL};
    bool cancelled = !token_begin(t, token);
    if (cancelled) {
        free(token);
        free(env_tok);
        free(workdir);
        return call_fail(c, SP_ERROR, "the call was cancelled before the command started");
    }

    sp_run_opts ro = SP_RUN_OPTS_INIT;
    ro.workdir = workdir;
    ro.env = env;
    ro.timeout_ms = (int)timeout;
    ro.max_bytes = t->opts.max_output_bytes;
    ro.max_lines = t->opts.max_output_lines;
    sp_run_result *res = NULL;
    sp_error *err = NULL;
    int r = sp_sandbox_shell(&res, t->sb, command, &ro, &err);

    token_end(t);
    free(token);
    free(env_tok);
    free(workdir);
    if (r < 0)
        return call_fail_err(c, r, err, NULL);

    cancelled = atomic_load(&t->cancelled);
    sp_buf_printf(&c->message, "Exit code: %d\nWall time: ", res->exit_code);
    format_secs(&c->message, res->duration_ms);
    sp_buf_adds(&c->message, "\nOutput:\n");
    if (res->out_len) {
        sp_buf_add(&c->message, res->out, res->out_len);
        if (res->out[res->out_len - 1] != '\n')
            sp_buf_addc(&c->message, '\n');
    }
    if (res->err_len) {
        sp_buf_adds(&c->message, "Stderr:\n");
        sp_buf_add(&c->message, res->err, res->err_len);
        if (res->err[res->err_len - 1] != '\n')
            sp_buf_addc(&c->message, '\n');
    }
    c->truncated = res->out_truncated || res->err_truncated;
    c->bytes += res->out_total + res->err_total;
    cJSON *v = sp_json_run_result(res);
    if (v)
        cJSON_AddBoolToObject(v, "cancelled", cancelled);
    c->value = v;
    if (cancelled)
        call_fail(c, SP_ERROR,
                  "the call was cancelled and the command was killed, with everything it "
                  "started; its output so far follows");
    else if (res->timed_out)
        call_fail(c, SP_ETIMEOUT,
                  "the command timed out after %lld ms and was killed, with everything it "
                  "started; its output so far follows. Raise timeout_ms, or run long jobs with "
                  "exec_command",
                  timeout);
    sp_run_result_free(res);
    return c->code;
}

/* ------------------------------------------------------------ sessions -- */

/* Sessions we started, with the token their processes carry (owned). */
static void track(sp_tools *t, int id, char *token)
{
    if (t->n_sessions == t->cap_sessions) {
        t->cap_sessions = t->cap_sessions ? t->cap_sessions * 2 : 8;
        t->sessions = sp_xrealloc(t->sessions, t->cap_sessions * sizeof(*t->sessions));
        t->session_tokens =
            sp_xrealloc(t->session_tokens, t->cap_sessions * sizeof(*t->session_tokens));
    }
    t->session_tokens[t->n_sessions] = token;
    t->sessions[t->n_sessions++] = id;
}

static void untrack(sp_tools *t, int id)
{
    for (size_t i = 0; i < t->n_sessions; i++) {
        if (t->sessions[i] == id) {
            free(t->session_tokens[i]);
            t->n_sessions--;
            t->sessions[i] = t->sessions[t->n_sessions];
            t->session_tokens[i] = t->session_tokens[t->n_sessions];
            return;
        }
    }
}

static char *session_token(const sp_tools *t, int id)
{
    for (size_t i = 0; i < t->n_sessions; i++)
        if (t->sessions[i] == id)
            return t->session_tokens[i];
    return NULL;
}

void tools_sessions_kill(sp_tools *t)
{
    for (size_t i = 0; i < t->n_sessions; i++) {
        if (t->sb)
            sp_session_kill(t->sb, t->sessions[i], NULL);
        free(t->session_tokens[i]);
    }
    t->n_sessions = 0;
    free(t->session_tokens);
    t->session_tokens = NULL;
    t->cap_sessions = 0;
    free(t->sessions);
    t->sessions = NULL;
}

/* The answer of exec_command and write_stdin. */
static void session_answer(sp_tools *t, tool_call *c, const sp_session_output *o)
{
    sp_buf_adds(&c->message, "Wall time: ");
    format_secs(&c->message, o->wall_ms);
    sp_buf_addc(&c->message, '\n');
    if (o->exited) {
        sp_buf_printf(&c->message, "Process exited with code %d\n", o->exit_code);
        untrack(t, o->session_id);
    } else {
        sp_buf_printf(&c->message,
                      "Process running with session ID %d (send input or poll with write_stdin)\n",
                      o->session_id);
    }
    if (o->note)
        sp_buf_printf(&c->message, "Note: %s\n", o->note);
    sp_buf_adds(&c->message, "Output:\n");
    sp_buf_add(&c->message, o->output, o->output_len);
    c->truncated = o->truncated;
    c->bytes += o->total_bytes;
    cJSON *v = cJSON_CreateObject();
    if (v) {
        if (o->exited)
            cJSON_AddNullToObject(v, "session_id");
        else
            sp_json_add_i64(v, "session_id", o->session_id);
        cJSON_AddBoolToObject(v, "running", !o->exited);
        if (o->exited)
            sp_json_add_i64(v, "exit_code", o->exit_code);
        else
            cJSON_AddNullToObject(v, "exit_code");
        cJSON *out = sp_json_string_n(o->output, o->output_len);
        if (out && !cJSON_AddItemToObject(v, "output", out))
            cJSON_Delete(out);
        cJSON_AddBoolToObject(v, "truncated", o->truncated);
        sp_json_add_u64(v, "total_bytes", o->total_bytes);
        sp_json_add_string(v, "note", o->note);
        sp_json_add_i64(v, "wall_ms", o->wall_ms);
    }
    c->value = v;
}

/* 0 from the model means "do not wait"; the library reads 0 as its default. */
static int yield_ms(const cJSON *a)
{
    long long y = sp_json_int(a, "yield_time_ms", 250);
    return y == 0 ? -1 : (int)y;
}

static int cancelled_fail(tool_call *c)
{
    return call_fail(c, SP_ERROR,
                     "the call was cancelled and its command was killed, with everything it "
                     "started");
}

int tool_exec_command(sp_tools *t, const cJSON *a, tool_call *c)
{
    const char *cmd = sp_json_str_or(a, "cmd", "");
    char *workdir = container_dir(t, sp_json_str_or(a, "workdir", NULL));
    char *token = make_token();
    char *env_tok = sp_xasprintf("SANDPOD_TOOL_CALL=%s", token);
    const char *env[] = {env_tok, NULL};
    sp_session_opts so = SP_SESSION_OPTS_INIT;
    so.no_tty = !sp_json_bool(a, "tty", true);
    so.workdir = workdir;
    so.env = env;
    so.yield_time_ms = yield_ms(a);
    so.max_output_tokens = (size_t)sp_json_int(a, "max_output_tokens", 8000);
    sp_session_output *o = NULL;
    sp_error *err = NULL;
    int r = SP_ERROR;
    if (token_begin(t, token)) {
        r = sp_session_start(&o, t->sb, cmd, &so, &err);
        token_end(t);
    }
    free(workdir);
    free(env_tok);
    bool cancelled = atomic_load(&t->cancelled);
    if (r < 0) {
        free(token);
        return cancelled && !err ? cancelled_fail(c) : call_fail_err(c, r, err, NULL);
    }
    if (cancelled && !o->exited) {
        /* A process started between the kill's rounds may live on. */
        sp_session_kill(t->sb, o->session_id, NULL);
        o->exited = true;
    }
    if (!o->exited)
        track(t, o->session_id, token);
    else
        free(token);
    session_answer(t, c, o);
    sp_session_output_free(o);
    return cancelled ? cancelled_fail(c) : 0;
}

int tool_write_stdin(sp_tools *t, const cJSON *a, tool_call *c)
{
    int id = (int)sp_json_int(a, "session_id", 0);
    const char *chars = sp_json_str_or(a, "chars", "");
    sp_error *err = NULL;
    int r;
    if (sp_json_bool(a, "kill", false)) {
        r = sp_session_kill(t->sb, id, &err);
        untrack(t, id);
        if (r < 0 && r != SP_EPODMAN)
            return call_fail_err(c, r, err, "the session has already ended");
        sp_error_free(err);
        sp_buf_printf(&c->message, "session %d killed, with everything it started\n", id);
        cJSON *v = cJSON_CreateObject();
        if (v) {
            sp_json_add_i64(v, "session_id", id);
            cJSON_AddBoolToObject(v, "killed", true);
        }
        c->value = v;
        return 0;
    }
    sp_session_write_opts wo = SP_SESSION_WRITE_OPTS_INIT;
    wo.yield_time_ms = yield_ms(a);
    wo.max_output_tokens = (size_t)sp_json_int(a, "max_output_tokens", 8000);
    wo.close_stdin = sp_json_bool(a, "close_stdin", false);
    sp_session_output *o = NULL;
    /* Cancelling this call kills the session: its processes carry the
     * token of the exec_command that started them. */
    char *token = session_token(t, id);
    r = SP_ERROR;
    if (!token || token_begin(t, token)) {
        r = sp_session_write(&o, t->sb, id, chars, strlen(chars), &wo, &err);
        if (token)
            token_end(t);
    }
    if (atomic_load(&t->cancelled)) {
        if (r == 0)
            sp_session_output_free(o);
        sp_error_free(err);
        sp_session_kill(t->sb, id, NULL);
        untrack(t, id);
        return cancelled_fail(c);
    }
    if (r < 0) {
        untrack(t, r == SP_ENOTFOUND ? id : -1);
        return call_fail_err(c, r, err,
                             r == SP_ENOTFOUND ? "the session has exited or was killed; start a "
                                                 "new one with exec_command"
                                               : NULL);
    }
    session_answer(t, c, o);
    sp_session_output_free(o);
    return 0;
}

/* ----------------------------------------------------------- snapshots -- */

/* Said after a snapshot or restore the container could not be paused for. */
static void unpaused_note(sp_tools *t, tool_call *c)
{
    if (sp_sandbox_snapshot_ran_unpaused(t->snap))
        sp_buf_adds(&c->message,
                    "note: the container kept running meanwhile (rootless Podman on "
                    "cgroup v1 cannot pause it); a file it wrote at that moment may be "
                    "caught part-way\n");
}

static int store_open(sp_tools *t, tool_call *c)
{
    if (t->store)
        return 0;
    sp_error *err = NULL;
    int r = t->sb && !t->agent ? sp_sandbox_snapshot_open(&t->snap, t->sb, NULL, &err)
                               : sp_snapstore_open(&t->store, t->root, t->store_path, NULL, &err);
    if (t->snap)
        t->store = sp_sandbox_snapshot_store(t->snap);
    if (r < 0) {
        t->store = NULL;
        return call_fail_err(c, r, err, NULL);
    }
    return 0;
}

void tools_store_close(sp_tools *t)
{
    if (t->snap)
        sp_sandbox_snapshot_close(t->snap); /* frees t->store */
    else
        sp_snapstore_free(t->store);
    t->snap = NULL;
    t->store = NULL;
}

static void describe(sp_buf *b, const sp_snapshot *s)
{
    sp_buf_printf(b, "%s", s->id);
    if (s->tag)
        sp_buf_printf(b, " (%s)", s->tag);
    sp_buf_printf(
        b, ", %s: %" PRIu64 " files, %" PRIu64 " folders, %" PRIu64 " symlinks, %" PRIu64 " bytes",
        s->created_at, s->files, s->dirs, s->symlinks, s->bytes);
}

int tool_snapshot(sp_tools *t, const cJSON *a, tool_call *c)
{
    if (store_open(t, c) < 0)
        return c->code;
    sp_snapshot *s = NULL;
    sp_error *err = NULL;
    int r = sp_snapshot_create(&s, t->store, sp_json_str_or(a, "tag", NULL), &err);
    if (r < 0)
        return call_fail_err(c, r, err, NULL);
    sp_buf_adds(&c->message, "snapshot ");
    describe(&c->message, s);
    sp_buf_adds(&c->message, "\nrestore it with restore {\"snapshot\": \"");
    sp_buf_adds(&c->message, s->id);
    sp_buf_adds(&c->message, "\"}\n");
    unpaused_note(t, c);
    c->value = sp_json_snapshot(s);
    sp_snapshot_free(s);
    return 0;
}

int tool_list_snapshots(sp_tools *t, const cJSON *a, tool_call *c)
{
    (void)a;
    if (store_open(t, c) < 0)
        return c->code;
    sp_snapshots *l = NULL;
    sp_error *err = NULL;
    int r = sp_snapshot_list(&l, t->store, &err);
    if (r < 0)
        return call_fail_err(c, r, err, NULL);
    for (size_t i = 0; i < l->n; i++) {
        describe(&c->message, l->v[i]);
        sp_buf_addc(&c->message, '\n');
    }
    if (l->n == 0)
        sp_buf_adds(&c->message, "no snapshots yet; take one with the snapshot tool\n");
    c->value = sp_json_snapshots(l);
    sp_snapshots_free(l);
    return 0;
}

static const char *restore_action(sp_snapshot_change_kind k)
{
    /* The diff runs from the snapshot to the workspace; a restore undoes it. */
    switch (k) {
    case SP_CHANGE_ADDED:
        return "deleted";
    case SP_CHANGE_DELETED:
        return "created";
    default:
        return "modified";
    }
}

int tool_restore(sp_tools *t, const cJSON *a, tool_call *c)
{
    const char *ref = sp_json_str_or(a, "snapshot", "");
    if (store_open(t, c) < 0)
        return c->code;
    sp_snapshot *s = NULL;
    sp_error *err = NULL;
    int r = sp_snapshot_get(&s, t->store, ref, &err);
    if (r < 0)
        return call_fail_err(c, r, err,
                             r == SP_ENOTFOUND ? "list the snapshots with list_snapshots" : NULL);
    /* What the restore will change, for the answer. */
    sp_snapdiff *d = NULL;
    if (sp_snapshot_diff(&d, t->store, s->id, NULL, NULL, NULL) < 0)
        d = NULL;
    sp_snapshot *done = NULL;
    r = sp_snapshot_restore(&done, t->store, s->id, &err);
    if (r < 0) {
        sp_snapdiff_free(d);
        sp_snapshot_free(s);
        return call_fail_err(c, r, err, NULL);
    }
    sp_snapstore_stats st;
    sp_snapstore_last_stats(t->store, &st);
    sp_buf_adds(&c->message, "restored snapshot ");
    describe(&c->message, done);
    sp_buf_printf(&c->message, "\n%" PRIu64 " paths changed\n", st.paths_changed);
    for (size_t i = 0; d && i < d->n; i++) {
        const char *act = restore_action(d->v[i].kind);
        if (i < RESTORE_CHANGES_MAX)
            call_change(c, d->v[i].path, act, 0);
        if (i < RESTORE_LINES_MAX)
            sp_buf_printf(&c->message, "  %s %s\n", act, d->v[i].path);
    }
    if (d && d->n > RESTORE_LINES_MAX)
        sp_buf_printf(&c->message, "  ... and %zu more\n", d->n - RESTORE_LINES_MAX);
    unpaused_note(t, c);
    c->truncated = d && d->n > RESTORE_CHANGES_MAX;
    cJSON *v = sp_json_snapshot(done);
    if (v)
        sp_json_add_u64(v, "paths_changed", st.paths_changed);
    c->value = v;
    sp_snapdiff_free(d);
    sp_snapshot_free(done);
    sp_snapshot_free(s);
    return 0;
}
