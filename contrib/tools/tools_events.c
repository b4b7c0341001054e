/* Events: one JSON line per tool call, appended to events.jsonl. */
#include "tools_core.h"

/* ------------------------------------------------------------- events -- */

static void now_rfc3339(char *buf, size_t size)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char base[32];
    strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, size, "%s.%03ldZ", base, ts.tv_nsec / 1000000);
}

int64_t tools_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void tools_emit_event(sp_tools *t, sp_tools_event *ev, const char *error)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *paths = cJSON_CreateArray();
    char ts[64];
    now_rfc3339(ts, sizeof(ts));
    bool ok = o && paths && sp_json_add_string(o, "ts", ts) &&
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
        if (ok && error)
            ok = sp_json_add_string(o, "error", error);
    }
    cJSON_Delete(paths);
    char *line = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!line)
        return;
    ev->json = line;
    if (t->events_fd >= 0) {
        /* One write per line, so concurrent writers (the CLI, another
         * server) never interleave inside a line. */
        size_t n = strlen(line);
        char *buf = sp_xmalloc(n + 1);
        memcpy(buf, line, n);
        buf[n] = '\n';
        ssize_t w;
        do
            w = write(t->events_fd, buf, n + 1);
        while (w < 0 && errno == EINTR);
        free(buf);
    }
    if (t->opts.on_event)
        t->opts.on_event(t->opts.event_userdata, ev);
    ev->json = NULL;
    free(line);
}
