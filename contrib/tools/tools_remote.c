/* The tool suite of a sandbox on another engine: the approval policy,
 * the events, the disabled tools and the read-only mode are applied here,
 * where the person or model is (tools.c's dispatch); the call itself runs
 * in the sandpod peer beside the workload, reached with sp_sandbox_rpc()
 * as an MCP tools/call. Its answer (text + structuredContent) becomes
 * this call's result again, field for field. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fs_json.h"
#include "tools_internal.h"

int tools_open_remote(sp_tools *t, sp_sandbox *sb, sp_error **err)
{
    if (t->opts.fs_mode == SP_FS_MODE_UNRESTRICTED)
        return sp_err_set(err, SP_EINVAL, 0,
                          "sandbox %s runs on engine %s: the tools see its workspace only",
                          sp_sandbox_name(sb), sp_sandbox_engine(sb));
    if (t->deny.n)
        return sp_err_set(err, SP_EINVAL, 0,
                          "sandbox %s runs on engine %s: deny globs are not applied there yet",
                          sp_sandbox_name(sb), sp_sandbox_engine(sb));
    t->remote = true;
    t->root = sp_xstrdup("/workspace");
    /* The store is the peer's; the marker makes the snapshot tools offered. */
    t->store_path = sp_xstrdup("(the sandpod peer's)");
    return 0;
}

static int code_of(const char *name)
{
    for (int c = -1; c >= -40; c--)
        if (name && strcmp(sp_json_code_name(c), name) == 0)
            return c;
    return SP_ERROR;
}

static int reason_of(const char *name)
{
    for (int r = 0; r < 256; r++) {
        const char *n = sp_reason_name(r);
        if (!n || !*n)
            break;
        if (name && strcmp(n, name) == 0)
            return r;
    }
    return SP_R_NONE;
}

/* The running (solo) call is cancelled: the peer is told only when that
 * call is the one on the stream, not a read beside it; a solo call still
 * waiting for the stream wakes and gives up (stream_take()). */
void tools_remote_cancel(sp_tools *t)
{
    pthread_mutex_lock(&t->mu);
    bool on_stream = t->stream_busy && t->stream_solo;
    pthread_cond_broadcast(&t->stream_cond);
    pthread_mutex_unlock(&t->mu);
    if (on_stream)
        sp_sandbox_rpc_cancel(t->sb);
}

/* Wait for the peer stream; false when a solo call was cancelled while
 * it waited (it is then never sent). */
static bool stream_take(sp_tools *t, bool solo)
{
    pthread_mutex_lock(&t->mu);
    while (t->stream_busy && !(solo && atomic_load(&t->cancelled)))
        pthread_cond_wait(&t->stream_cond, &t->mu);
    bool go = !(solo && atomic_load(&t->cancelled));
    if (go) {
        t->stream_busy = true;
        t->stream_solo = solo;
    }
    pthread_mutex_unlock(&t->mu);
    return go;
}

static void stream_give(sp_tools *t)
{
    pthread_mutex_lock(&t->mu);
    t->stream_busy = false;
    pthread_cond_broadcast(&t->stream_cond);
    pthread_mutex_unlock(&t->mu);
}

int tools_remote_call(sp_tools *t, const tool_def *d, const char *raw, const char *freeform,
                      size_t ff_len, tool_call *c)
{
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "name", d->name);
    cJSON *args = NULL;
    if (freeform) {
        args = cJSON_CreateObject();
        char *text = sp_xstrndup(freeform, ff_len);
        cJSON_AddStringToObject(args, "input", text);
        free(text);
    } else {
        args = sp_json_parse(raw ? raw : "{}", raw ? strlen(raw) : 2);
    }
    if (!args)
        args = cJSON_CreateObject();
    cJSON_AddItemToObject(p, "arguments", args);
    char *params = cJSON_PrintUnformatted(p);
    cJSON_Delete(p);
    char *res = NULL;
    sp_error *err = NULL;
    bool solo = freeform || !tool_concurrent(d);
    if (!stream_take(t, solo)) {
        free(params);
        return call_fail(c, SP_ERROR, "the call was cancelled before it reached the peer");
    }
    int rc = sp_sandbox_rpc(t->sb, "tools/call", params, &res, &err);
    stream_give(t);
    free(params);
    if (rc < 0)
        return call_fail_err(c, rc, err, NULL);
    cJSON *r = sp_json_parse(res, strlen(res));
    free(res);
    const cJSON *sc = sp_json_get(r, "structuredContent");
    const cJSON *content = sp_json_get(r, "content");
    const cJSON *first = cJSON_GetArrayItem(content, 0);
    const char *text = sp_json_str_or(first, "text", "");
    if (!cJSON_IsObject(sc)) {
        rc = call_fail(c, SP_ERROR, "the sandpod peer answered %s without a result: %.200s",
                       d->name, text);
        cJSON_Delete(r);
        return rc;
    }
    c->truncated = sp_json_bool(sc, "truncated", false);
    cJSON *v = cJSON_DetachItemFromObjectCaseSensitive((cJSON *)sc, "value");
    if (v && !cJSON_IsNull(v))
        c->value = v;
    else
        cJSON_Delete(v);
    cJSON *ch = cJSON_DetachItemFromObjectCaseSensitive((cJSON *)sc, "changes");
    if (cJSON_IsArray(ch)) {
        const cJSON *it;
        cJSON_ArrayForEach(it, ch)
        {
            const char *path = sp_json_str(it, "path");
            if (path)
                call_path(c, path);
        }
        cJSON_Delete(c->changes);
        c->changes = ch;
    } else {
        cJSON_Delete(ch);
    }
    if (sp_json_bool(sc, "ok", false)) {
        sp_buf_adds(&c->message, text);
        c->bytes += strlen(text);
        rc = 0;
    } else {
        const cJSON *e = sp_json_get(sc, "error");
        rc = call_fail_reason(c, code_of(sp_json_str(e, "code")),
                              reason_of(sp_json_str(e, "reason")), "%s",
                              sp_json_str_or(e, "message", text));
        /* Output gathered before the failure follows the message's first line. */
        const char *nl = strchr(text, '\n');
        if (nl && nl[1])
            sp_buf_adds(&c->message, nl + 1);
    }
    cJSON_Delete(r);
    return rc;
}
