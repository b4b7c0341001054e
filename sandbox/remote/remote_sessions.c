/* Interactive sessions (sandpod/session.h) on a sandbox of another engine.
 *
 * The sessions live in the peer beside the workload: it runs them through
 * the workload's agent and keeps them across dropped streams. A start is
 * the peer's exec_command tool, a write its write_stdin, a kill
 * write_stdin's kill; the answer's structured value is the session output.
 * This handle remembers which sessions it started (for sp_session_list()
 * and to end them when it is freed, as a local handle does); the output
 * stays in the peer until asked for.
 *
 * What the tools cannot carry is refused with SP_EINVAL rather than
 * dropped: extra environment, another user, a terminal size, stdin closed
 * at start, input that is not text (NUL bytes, invalid UTF-8), signals
 * other than an interrupt or a kill, and a resize. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "base.h"
#include "json.h"
#include "remote_kind.h"
#include "sandbox_internal.h"
#include "sandpod/session.h"

struct sp_rsess {
    int id;
    char *command;
    bool tty;
    int64_t started_ms, used_ms;
};

static int refuse(const sp_sandbox *sb, const char *what, sp_error **err)
{
    return sp_err_set(err, SP_EINVAL, 0,
                      "sandbox %s runs on engine %s: a session there cannot take %s (the peer's "
                      "exec_command and write_stdin tools have no such argument)",
                      sb->name, sb->engine, what);
}

static struct sp_rsess *find(sp_sandbox *sb, int id)
{
    for (size_t i = 0; i < sb->n_rsess; i++)
        if (sb->rsess[i].id == id)
            return &sb->rsess[i];
    return NULL;
}

static void forget(sp_sandbox *sb, int id)
{
    struct sp_rsess *s = find(sb, id);
    if (!s)
        return;
    free(s->command);
    size_t i = (size_t)(s - sb->rsess);
    memmove(s, s + 1, (sb->n_rsess - i - 1) * sizeof(*s));
    sb->n_rsess--;
}

/* The yield time as the tools take it: 0 = their default, a negative one
 * none at all, at most their maximum. */
static void add_yield(cJSON *a, int yield_ms, size_t max_tokens)
{
    if (yield_ms < 0)
        cJSON_AddNumberToObject(a, "yield_time_ms", 0);
    else if (yield_ms > 0)
        cJSON_AddNumberToObject(a, "yield_time_ms",
                                yield_ms > SP_SESSION_MAX_YIELD_MS ? SP_SESSION_MAX_YIELD_MS
                                                                   : yield_ms);
    if (max_tokens)
        cJSON_AddNumberToObject(a, "max_output_tokens",
                                (double)(max_tokens > 262144 ? 262144 : max_tokens));
}

/* Call tool `name` with args (taken) in the peer; *value its result's
 * value, or its error as ours (code and message kept). */
static int call_tool(cJSON **value, sp_sandbox *sb, const char *name, cJSON *args, sp_error **err)
{
    *value = NULL;
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "name", name);
    cJSON_AddItemToObject(req, "arguments", args);
    char *params = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    char *text = NULL;
    int r = sp_remote_rpc(sb, "tools/call", params, NULL, &text, err);
    free(params);
    if (r < 0)
        return r;
    cJSON *res = sp_json_parse_exact(text, strlen(text));
    free(text);
    const cJSON *sc = sp_json_get(res, "structuredContent");
    const cJSON *e = sp_json_get(sc, "error");
    if (sc && sp_json_bool(sc, "ok", false) && cJSON_IsObject(sp_json_get(sc, "value"))) {
        *value = cJSON_DetachItemFromObjectCaseSensitive((cJSON *)sc, "value");
    } else if (cJSON_IsObject(e)) {
        r = sp_err_from_json(err, e, "the session call failed");
    } else {
        r = sp_err_set(err, SP_ERROR, 0, "sandbox %s: the peer's %s gave no session", sb->name,
                       name);
    }
    cJSON_Delete(res);
    return r;
}

static sp_session_output *output_of(const cJSON *v, int64_t t0)
{
    sp_session_output *o = sp_xcalloc(1, sizeof(*o));
    o->session_id = (int)sp_json_int(v, "session_id", 0);
    const char *text = sp_json_str_or(v, "output", "");
    o->output_len = strlen(text);
    o->output = sp_xstrdup(text);
    o->truncated = sp_json_bool(v, "truncated", false);
    o->total_bytes = (uint64_t)sp_json_int(v, "total_bytes", 0);
    o->exited = !sp_json_bool(v, "running", true);
    o->exit_code = o->exited ? (int)sp_json_int(v, "exit_code", -1) : 0;
    const char *note = sp_json_str(v, "note");
    o->note = note ? sp_xstrdup(note) : NULL;
    o->wall_ms = sp_now_ms() - t0;
    return o;
}

int sp_remote_session_start(sp_session_output **out, sp_sandbox *sb, const char *command,
                            const sp_session_opts *o, sp_error **err)
{
    int64_t t0 = sp_now_ms();
    if (o->env && o->env[0])
        return refuse(sb, "extra environment", err);
    if (o->user)
        return refuse(sb, "another user", err);
    if (o->rows || o->cols)
        return refuse(sb, "a terminal size", err);
    if (o->close_stdin)
        return refuse(sb, "stdin closed at start (write with close_stdin instead)", err);
    cJSON *a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "cmd", command);
    cJSON_AddBoolToObject(a, "tty", !o->no_tty);
    if (o->workdir)
        cJSON_AddStringToObject(a, "workdir", o->workdir);
    add_yield(a, o->yield_time_ms, o->max_output_tokens);
    cJSON *v = NULL;
    int r = call_tool(&v, sb, "exec_command", a, err);
    if (r < 0)
        return r;
    *out = output_of(v, t0);
    cJSON_Delete(v);
    if (!(*out)->exited) {
        sb->rsess = sp_xrealloc(sb->rsess, (sb->n_rsess + 1) * sizeof(*sb->rsess));
        sb->rsess[sb->n_rsess++] =
            (struct sp_rsess){(*out)->session_id, sp_xstrdup(command), !o->no_tty, t0, t0};
    }
    return 0;
}

/* chars travel as a JSON string: text, without NUL bytes. */
static bool is_text(const char *s, size_t len)
{
    return !memchr(s, '\0', len) && sp_utf8_valid(s, len);
}

/* kill_it: end the session (out may then be NULL). */
static int write_or_kill(sp_session_output **out, sp_sandbox *sb, int session_id, const char *chars,
                         size_t len, const sp_session_write_opts *o, bool kill_it, sp_error **err)
{
    int64_t t0 = sp_now_ms();
    if (len && !is_text(chars, len))
        return refuse(sb, "input that is not text (NUL bytes or invalid UTF-8)", err);
    cJSON *a = cJSON_CreateObject();
    cJSON_AddNumberToObject(a, "session_id", session_id);
    if (len) {
        char *copy = sp_xstrndup(chars, len);
        cJSON_AddStringToObject(a, "chars", copy);
        free(copy);
    }
    if (o && o->close_stdin)
        cJSON_AddBoolToObject(a, "close_stdin", true);
    if (kill_it)
        cJSON_AddBoolToObject(a, "kill", true);
    add_yield(a, kill_it ? -1 : o ? o->yield_time_ms : 0, o ? o->max_output_tokens : 0);
    cJSON *v = NULL;
    int r = call_tool(&v, sb, "write_stdin", a, err);
    if (r == SP_ENOTFOUND || (r == 0 && !sp_json_bool(v, "running", true)) || kill_it)
        forget(sb, session_id);
    if (r < 0)
        return r;
    struct sp_rsess *s = find(sb, session_id);
    if (s)
        s->used_ms = t0;
    if (out)
        *out = output_of(v, t0);
    cJSON_Delete(v);
    return 0;
}

int sp_remote_session_write(sp_session_output **out, sp_sandbox *sb, int session_id,
                            const char *chars, size_t len, const sp_session_write_opts *o,
                            sp_error **err)
{
    return write_or_kill(out, sb, session_id, chars, len, o, false, err);
}

int sp_remote_session_kill(sp_sandbox *sb, int session_id, sp_error **err)
{
    return write_or_kill(NULL, sb, session_id, NULL, 0, NULL, true, err);
}

int sp_remote_session_signal(sp_sandbox *sb, int session_id, int signo, sp_error **err)
{
    if (signo == SIGKILL || signo == SIGTERM)
        return sp_remote_session_kill(sb, session_id, err);
    if (signo != SIGINT)
        return refuse(sb, "a signal other than SIGINT, SIGTERM or SIGKILL", err);
    sp_session_write_opts o = SP_SESSION_WRITE_OPTS_INIT;
    o.yield_time_ms = -1;
    return write_or_kill(NULL, sb, session_id, "\x03", 1, &o, false, err);
}

int sp_remote_session_resize(sp_sandbox *sb, int session_id, unsigned rows, unsigned cols,
                             sp_error **err)
{
    (void)session_id, (void)rows, (void)cols;
    return refuse(sb, "a new terminal size", err);
}

int sp_remote_session_list(sp_session_info **out, size_t *n_out, sp_sandbox *sb, sp_error **err)
{
    (void)err;
    *out = NULL;
    *n_out = sb->n_rsess;
    if (!sb->n_rsess)
        return 0;
    int64_t now = sp_now_ms();
    sp_session_info *v = sp_xcalloc(sb->n_rsess, sizeof(*v));
    for (size_t i = 0; i < sb->n_rsess; i++) {
        v[i].id = sb->rsess[i].id;
        v[i].command = sp_xstrdup(sb->rsess[i].command);
        v[i].tty = sb->rsess[i].tty;
        v[i].running = true; /* as far as this handle knows */
        v[i].age_ms = now - sb->rsess[i].started_ms;
        v[i].idle_ms = now - sb->rsess[i].used_ms;
    }
    *out = v;
    return 0;
}

void sp_remote_sessions_close(sp_sandbox *sb)
{
    /* Until the first failure: a peer that cannot be reached for one
     * would cost a timeout for each. */
    while (sb->n_rsess) {
        int id = sb->rsess[sb->n_rsess - 1].id;
        sp_error *e = NULL;
        int r = sp_remote_session_kill(sb, id, &e);
        bool gone = r == SP_ENOTFOUND;
        sp_error_free(e);
        if (r < 0 && !gone)
            break;
    }
    while (sb->n_rsess)
        forget(sb, sb->rsess[sb->n_rsess - 1].id);
    free(sb->rsess);
    sb->rsess = NULL;
}
