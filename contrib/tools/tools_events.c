/* Events: one JSON line per tool call, appended to events.jsonl. */
#include "event_log.h"
#include "tools_core.h"

/* ------------------------------------------------------------- events -- */

int64_t tools_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct emit {
    sp_tools *t;
    sp_tools_event *ev;
    const char *error;
    char ts[64]; /* one time for the file's line and the callback's */
};

/* The event as one JSON line, numbered `call`. */
static char *event_line(void *ud, uint64_t call)
{
    struct emit *x = ud;
    sp_tools *t = x->t;
    sp_tools_event *ev = x->ev;
    ev->call = call;
    cJSON *o = cJSON_CreateObject();
    cJSON *paths = cJSON_CreateArray();
    bool ok = o && paths && sp_json_add_string(o, "ts", x->ts) &&
              sp_json_add_string(o, "event", ev->event) && sp_json_add_u64(o, "call", ev->call) &&
              sp_json_add_string(o, "tool", ev->tool) &&
              sp_json_add_string(o, "tier", sp_tool_tier_name(ev->tier)) &&
              sp_json_add_string(o, "sandbox", t->sb ? sp_sandbox_name(t->sb) : NULL);
    for (size_t i = 0; ok && ev->paths && ev->paths[i]; i++) {
        cJSON *s = sp_json_string(ev->paths[i]);
        ok = s && cJSON_AddItemToArray(paths, s);
        if (!ok)
            cJSON_Delete(s);
    }
    if (ok) {
        ok = cJSON_AddItemToObject(o, "paths", paths);
        if (ok)
            paths = NULL;
    }
    if (ok && strcmp(ev->event, "end") == 0) {
        ok = cJSON_AddBoolToObject(o, "ok", ev->ok) &&
             sp_json_add_string(o, "code", sp_json_code_name(ev->code)) &&
             sp_json_add_i64(o, "duration_ms", ev->duration_ms) &&
             sp_json_add_u64(o, "bytes", ev->bytes) &&
             cJSON_AddBoolToObject(o, "truncated", ev->truncated);
        if (ok && x->error)
            ok = sp_json_add_string(o, "error", x->error);
    }
    cJSON_Delete(paths);
    char *line = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return line;
}

/* A start event takes the call's number: from the events file's counter,
 * which every process writing the file shares (sp_events_append), or, with
 * no file, from the context's own. The end event reuses it. */
void tools_emit_event(sp_tools *t, sp_tools_event *ev, const char *error)
{
    struct emit x = {t, ev, error, {0}};
    sp_events_now(x.ts, sizeof(x.ts));
    bool start = strcmp(ev->event, "start") == 0;
    uint64_t n = start ? 0 : ev->call;
    if (!t->events_path || sp_events_append(t->events_path, &n, event_line, &x, NULL) < 0) {
        if (start && n == 0)
            n = atomic_fetch_add(&t->calls, 1) + 1;
    }
    ev->call = n;
    if (!t->opts.on_event)
        return;
    char *line = event_line(&x, n);
    if (!line)
        return;
    ev->json = line;
    t->opts.on_event(t->opts.event_userdata, ev);
    ev->json = NULL;
    free(line);
}
