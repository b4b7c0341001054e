/* The tool suite of a sandbox on another engine: the approval policy,
 * the events, the disabled tools and the read-only mode are applied here,
 * where the person or model is (tools.c's dispatch); the call itself runs
 * in the sandpod peer beside the workload, reached with sp_sandbox_rpc()
 * as an MCP tools/call. Its answer (text + structuredContent) becomes
 * this call's result again, field for field. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

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
    t->root = sp_xstrdup(SP_PEER_WORKSPACE);
    /* The store is the peer's; the marker makes the snapshot tools offered. */
    t->store_path = sp_xstrdup("(the sandpod peer's)");
    return 0;
}

/* The running (solo) call only: reads beside it go on. */
void tools_remote_cancel(sp_tools *t)
{
    char key[sizeof(t->run_key)];
    pthread_mutex_lock(&t->mu);
    memcpy(key, t->run_key, sizeof(key));
    pthread_mutex_unlock(&t->mu);
    if (key[0])
        sp_sandbox_rpc_cancel_key(t->sb, key);
}

static void new_key(char out[33])
{
    uint8_t b[16] = {0};
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
        uint64_t x = (uint64_t)sp_now_ms() ^ (uint64_t)getpid() << 20 ^ (uint64_t)(uintptr_t)out;
        memcpy(b, &x, sizeof(x));
    }
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
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
    /* A solo call (a command, a write) is the one sp_tools_cancel() means:
     * its key is where the cancel finds it, set before it is sent, and a
     * cancel that came first means it is never sent. */
    bool solo = freeform || !tool_concurrent(d);
    char key[33];
    new_key(key);
    if (solo) {
        pthread_mutex_lock(&t->mu);
        memcpy(t->run_key, key, sizeof(key));
        pthread_mutex_unlock(&t->mu);
    }
    int rc =
        solo && atomic_load(&t->cancelled)
            ? sp_err_set(&err, SP_ERROR, 0, "the call was cancelled before it reached the peer")
            : sp_sandbox_rpc_keyed(t->sb, "tools/call", params, key, &res, &err);
    if (solo) {
        pthread_mutex_lock(&t->mu);
        t->run_key[0] = '\0';
        pthread_mutex_unlock(&t->mu);
    }
    free(params);
    if (rc < 0)
        return call_fail_err(c, rc, err, NULL);
    cJSON *r = sp_json_parse_exact(res, strlen(res));
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
        rc = call_fail_reason(c, sp_code_from_name(sp_json_str(e, "code")),
                              sp_reason_from_name(sp_json_str(e, "reason")), "%s",
                              sp_json_str_or(e, "message", text));
        /* Output gathered before the failure follows the message's first line. */
        const char *nl = strchr(text, '\n');
        if (nl && nl[1])
            sp_buf_adds(&c->message, nl + 1);
    }
    cJSON_Delete(r);
    return rc;
}
