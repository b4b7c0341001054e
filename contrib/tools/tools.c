/* The tool suite's core: result objects, dispatch and cancellation. The
 * handlers live in tools_fs.c, tools_exec.c and tools_patch.c; the table
 * in tools_table.c and its specs in tools_specs.c; contexts, arguments,
 * policies and events in tools_ctx.c, tools_args.c, tools_policy.c and
 * tools_events.c. */
#include "tools_core.h"

/* ------------------------------------------------------------ results -- */

static char *result_text(sp_tools *t, tool_call *c)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        abort();
    bool ok = c->code == 0;
    char *msg;
    size_t mlen;
    if (ok) {
        mlen = c->message.len;
        msg = sp_buf_steal(&c->message);
        /* Filesystem answers get a last cap; command output has its own
         * per-stream caps already. */
        if (!c->def || !(c->def->needs & NEED_SANDBOX)) {
            bool cut = false;
            sp_capbuf cap;
            sp_capbuf_init(&cap, t->opts.max_text_bytes, SIZE_MAX);
            sp_capbuf_feed(&cap, msg, mlen);
            char *capped = sp_capbuf_text(&cap, &mlen, &cut);
            sp_capbuf_dispose(&cap);
            free(msg);
            msg = capped;
            c->truncated |= cut;
        }
    } else {
        msg = sp_xstrdup(c->error ? c->error : sp_strerror(c->code));
        if (c->message.len) {
            /* Output gathered before the failure (a timed-out command). */
            char *both = sp_xasprintf("%s\n%s", msg, c->message.data);
            free(msg);
            msg = both;
        }
    }
    bool fine = cJSON_AddBoolToObject(o, "ok", ok) && sp_json_add_string(o, "message", msg);
    free(msg);
    if (fine) {
        cJSON *v = c->value ? c->value : cJSON_CreateNull();
        c->value = NULL;
        fine = v && cJSON_AddItemToObject(o, "value", v);
    }
    fine = fine && cJSON_AddBoolToObject(o, "truncated", c->truncated);
    if (fine) {
        cJSON *ch = c->changes ? c->changes : cJSON_CreateArray();
        c->changes = NULL;
        fine = ch && cJSON_AddItemToObject(o, "changes", ch);
    }
    if (fine && !ok) {
        cJSON *e = cJSON_CreateObject();
        fine = e && cJSON_AddItemToObject(o, "error", e) &&
               sp_json_add_string(e, "code", sp_json_code_name(c->code)) &&
               sp_json_add_string(e, "reason", sp_reason_name(c->reason)) &&
               sp_json_add_string(e, "message", c->error ? c->error : sp_strerror(c->code));
    }
    char *text = fine ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!text)
        abort();
    return text;
}

static void call_dispose(tool_call *c)
{
    sp_buf_dispose(&c->message);
    cJSON_Delete(c->value);
    cJSON_Delete(c->changes);
    sp_strv_dispose(&c->paths);
    free(c->error);
}

/* ----------------------------------------------------------- dispatch -- */

static void begin_running(sp_tools *t)
{
    pthread_mutex_lock(&t->mu);
    t->running = true;
    atomic_store(&t->cancelled, false);
    pthread_mutex_unlock(&t->mu);
}

static void end_running(sp_tools *t)
{
    pthread_mutex_lock(&t->mu);
    t->running = false;
    pthread_mutex_unlock(&t->mu);
}

/* Run a call whose arguments are `args` (parsed) or, for a freeform call,
 * `freeform`. Fills *result. */
static int dispatch(char **result, sp_tools *t, const char *name, const char *raw, size_t raw_len,
                    const cJSON *args, const char *freeform, size_t ff_len, const char *parse_error)
{
    tool_call c = {0};
    c.args_json = raw;
    const tool_def *d = tool_find(name);
    c.def = d;
    int64_t t0 = tools_mono_ms();
    sp_tools_event ev = {0};

    if (!d) {
        call_fail(&c, SP_ENOTFOUND, "no tool named '%s'; the tools are listed by tools/list",
                  name ? name : "");
        goto out_noevent;
    }
    if (tools_sv_has(&t->disabled, d->name)) {
        call_fail(&c, SP_EDENIED, "the %s tool is disabled in this session", d->name);
        goto out_noevent;
    }
    if (!tools_available(t, d)) {
        if ((d->needs & NEED_WRITE) && t->opts.read_only)
            call_fail(&c, SP_EREADONLY, "%s is not available: the workspace is read-only", d->name);
        else if (d->needs & NEED_SANDBOX)
            call_fail(&c, SP_EINVAL,
                      "%s needs a sandbox (a container); this session works on a bare folder",
                      d->name);
        else if (d->needs & NEED_STORE)
            call_fail(&c, SP_EINVAL, "%s needs a snapshot store, and this session has none",
                      d->name);
        else
            call_fail(&c, SP_EINVAL, "%s is not available in this build", d->name);
        goto out_noevent;
    }
    if (t->later) {
        /* The sandbox of a context made later: made now, or waited for. */
        sp_error *le = NULL;
        int lr = tools_later_wait(t, &le);
        if (lr < 0) {
            call_fail(&c, lr, "%s; the next call tries again", le ? le->message : sp_strerror(lr));
            sp_error_free(le);
            goto out_noevent;
        }
    }

    /* Paths named by the arguments, for the start event. */
    const char *p0 = args ? sp_json_str_or(args, "path", NULL) : NULL;
    if (p0)
        call_path(&c, p0);
    ev.event = "start";
    ev.tool = d->name;
    ev.call = 0; /* numbered by tools_emit_event */
    ev.tier = d->tier;
    ev.paths = (const char *const *)c.paths.v;
    tools_emit_event(t, &ev, NULL);

    if (parse_error) {
        call_fail(&c, SP_EINVAL, "%s", parse_error);
        goto out;
    }
    if (freeform) {
        if (strcmp(d->name, "apply_patch") != 0) {
            call_fail(&c, SP_EINVAL, "%s takes JSON arguments, not freeform text", d->name);
            goto out;
        }
    } else {
        char *msg = NULL;
        if (schema_check(tool_schema(d), args, d->name, &msg) < 0) {
            call_fail(&c, SP_EINVAL, "%s", msg);
            free(msg);
            goto out;
        }
    }

    if (tools_needs_approval(t, d) && !tools_sv_has(&t->always, d->name)) {
        char *summary =
            freeform ? sp_xasprintf("%s (freeform patch)", d->name) : tools_summary_of(d, args);
        sp_tools_approval_request req = {d->name, d->tier, summary, raw ? raw : "{}"};
        sp_tools_verdict v = SP_VERDICT_DENY;
        bool asked = t->opts.approve != NULL;
        if (asked) {
            begin_running(t);
            v = t->opts.approve(t->opts.approve_userdata, &req);
            end_running(t);
            if (atomic_load(&t->cancelled))
                v = SP_VERDICT_DENY;
        }
        free(summary);
        if (v != SP_VERDICT_ALLOW && v != SP_VERDICT_ALLOW_ALWAYS) {
            if (!asked || v == SP_VERDICT_UNAVAILABLE)
                call_fail(&c, SP_EDENIED,
                          "%s needs approval under the '%s' approval policy (it is a %s tool) "
                          "and nobody can be asked here (no terminal, or a client without "
                          "elicitation support); do not retry: ask the user to run it or to "
                          "change the policy",
                          d->name, sp_tools_approval_name(t->opts.approval),
                          sp_tool_tier_name(d->tier));
            else
                call_fail(&c, SP_EDENIED,
                          "the user denied this %s call; do not retry it unchanged: ask the "
                          "user what to do instead",
                          d->name);
            goto out;
        }
        if (v == SP_VERDICT_ALLOW_ALWAYS)
            sp_strv_push(&t->always, sp_xstrdup(d->name));
    }

    /* Every tool that changes files holds the sandbox's edit lock for the
     * whole call (tools_edit_lock()). */
    int lock = -1;
    if (((d->needs & NEED_WRITE) || freeform) && tools_edit_lock(&lock, t, &c) < 0)
        goto out;
    /* A concurrent (read-only) call may run beside another call of this
     * context: it leaves the cancellation state to that one. */
    bool solo = freeform || !tool_concurrent(d);
    if (solo)
        begin_running(t);
    if (t->remote)
        tools_remote_call(t, d, raw, freeform, ff_len, &c);
    else if (freeform)
        tools_apply_patch(t, freeform, ff_len, &c);
    else
        d->fn(t, args, &c);
    if (solo)
        end_running(t);
    tools_edit_unlock(lock);

out:
    ev.event = "end";
    ev.ok = c.code == 0;
    ev.code = c.code;
    ev.duration_ms = tools_mono_ms() - t0;
    ev.truncated = c.truncated;
    ev.paths = (const char *const *)c.paths.v;
    ev.bytes = c.bytes + c.message.len;
    tools_emit_event(t, &ev, c.code ? c.error : NULL);
out_noevent:;
    int code = c.code;
    *result = result_text(t, &c);
    call_dispose(&c);
    (void)raw_len;
    return code;
}

int sp_tools_call(char **result, sp_tools *t, const char *name, const char *args, size_t len)
{
    char *raw = args && len ? sp_xstrndup(args, len) : sp_xstrdup("{}");
    size_t raw_len = args && len ? len : 2;
    char *perr = NULL;
    cJSON *parsed = NULL;
    if (json_nul_check(raw, raw_len, &perr) == 0) {
        const char *end = NULL;
        parsed = cJSON_ParseWithLengthOpts(raw, raw_len, &end, false);
        /* Only whitespace may follow the object. */
        for (const char *p = end; parsed && p && p < raw + raw_len; p++) {
            if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') {
                cJSON_Delete(parsed);
                parsed = NULL;
            }
        }
        if (!parsed) {
            size_t at = end && end >= raw ? (size_t)(end - raw) : 0;
            char *q = tools_quote(raw + (at < raw_len ? at : raw_len),
                                  raw_len - (at < raw_len ? at : raw_len));
            perr = sp_xasprintf("the arguments are not valid JSON (near byte %zu: '%s'); send "
                                "one JSON object",
                                at, q);
            free(q);
        } else if (!cJSON_IsObject(parsed)) {
            perr =
                sp_xasprintf("the arguments must be a JSON object, not %s", tools_type_of(parsed));
        } else {
            /* Strict specs send null for an argument left out. */
            if (tool_find(name))
                tools_drop_nulls(parsed, tool_schema(tool_find(name)));
            if (name && strcmp(name, "apply_patch") == 0)
                perr = tools_patch_alias(parsed);
        }
    }
    int r = dispatch(result, t, name, raw, raw_len, perr ? NULL : parsed, NULL, 0, perr);
    cJSON_Delete(parsed);
    free(perr);
    free(raw);
    return r;
}

int sp_tools_call_freeform(char **result, sp_tools *t, const char *name, const char *input,
                           size_t len)
{
    char *text = sp_xstrndup(input ? input : "", input ? len : 0);
    char *perr = NULL;
    if (memchr(input ? input : "", '\0', input ? len : 0))
        perr = sp_xstrdup("the input holds a NUL byte; patches are text");
    /* For the approval callback and events: the input as a JSON object. */
    cJSON *o = cJSON_CreateObject();
    char *raw = NULL;
    if (o && cJSON_AddStringToObject(o, "input", text))
        raw = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    int r = dispatch(result, t, name, raw ? raw : "{}", raw ? strlen(raw) : 2, NULL,
                     perr ? NULL : text, perr ? 0 : len, perr);
    free(perr);
    free(raw);
    free(text);
    return r;
}

/* ------------------------------------------------------- cancellation -- */

/* Kill every process in the container that carries the call's token in
 * its environment, from a second handle: the first is busy on the
 * calling thread. Three rounds catch children forked during a round. */
static void kill_token(sp_tools *t, const char *token)
{
    pthread_mutex_lock(&t->kill_mu);
    if (!t->kill_sb && t->sb_name && !t->agent) {
        sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
        pthread_mutex_lock(&t->mu);
        char *url = t->podman_url ? sp_xstrdup(t->podman_url) : NULL;
        pthread_mutex_unlock(&t->mu);
        o.state_root = t->state_root;
        o.podman_url = url;
        if (sp_sandbox_open(&t->kill_sb, t->sb_name, &o, NULL) < 0)
            t->kill_sb = NULL;
        free(url);
    }
    /* An agent-only handle keeps no connection between commands: each
     * opens its own, so another thread may use it too. */
    sp_sandbox *ks = t->agent ? t->sb : t->kill_sb;
    if (ks) {
        char *script = sp_xasprintf(
            "k=SANDPOD_TOOL_CALL=%s; for i in 1 2 3; do "
            "for f in $(grep -l \"$k\" /proc/[0-9]*/environ 2>/dev/null); do "
            "n=${f#/proc/}; n=${n%%/environ}; [ \"$n\" = \"$$\" ] || kill -KILL \"$n\"; "
            "done 2>/dev/null; done; exit 0",
            token);
        sp_run_opts ro = SP_RUN_OPTS_INIT;
        ro.timeout_ms = 10000;
        sp_run_result *res = NULL;
        if (sp_sandbox_shell(&res, ks, script, &ro, NULL) == 0)
            sp_run_result_free(res);
        free(script);
    }
    pthread_mutex_unlock(&t->kill_mu);
}

void sp_tools_cancel(sp_tools *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    if (!t->running) {
        pthread_mutex_unlock(&t->mu);
        return;
    }
    atomic_store(&t->cancelled, true);
    char *token = t->run_token ? sp_xstrdup(t->run_token) : NULL;
    pthread_mutex_unlock(&t->mu);
    if (t->remote)
        tools_remote_cancel(t);
    if (token)
        kill_token(t, token);
    free(token);
}
