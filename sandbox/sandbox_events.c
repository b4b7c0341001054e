/* A sandbox's events.jsonl: command records (sandpod/sandbox_events.h). */
#include <string.h>

#include "base.h"
#include "event_log.h"
#include "json.h"
#include "sandpod/sandbox_events.h"

#define SUMMARY_MAX 500

struct line_ctx {
    const sp_sandbox_event *ev;
    const char *sandbox;
};

static char *command_line(void *ud, uint64_t call)
{
    const struct line_ctx *x = ud;
    const sp_sandbox_event *ev = x->ev;
    char ts[64];
    sp_events_now(ts, sizeof(ts));
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "ts", ts);
    cJSON_AddStringToObject(o, "event", "command");
    cJSON_AddNumberToObject(o, "call", (double)call);
    cJSON_AddStringToObject(o, "source", ev->source ? ev->source : "library");
    cJSON_AddStringToObject(o, "sandbox", x->sandbox);
    cJSON_AddStringToObject(o, "command", ev->command);
    if (ev->summary) {
        size_t n = strlen(ev->summary);
        cleanup_free char *cut = sp_xstrndup(ev->summary, sp_utf8_cut(ev->summary, n, SUMMARY_MAX));
        cJSON_AddStringToObject(o, "summary", cut);
    }
    cJSON_AddItemToObject(o, "paths", sp_json_strv(ev->paths));
    cJSON_AddBoolToObject(o, "ok", ev->ok);
    cJSON_AddStringToObject(o, "code", sp_code_name(ev->code));
    cJSON_AddNumberToObject(o, "status", ev->status);
    cJSON_AddNumberToObject(o, "duration_ms", (double)ev->duration_ms);
    char *line = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return line;
}

int sp_sandbox_event_append(uint64_t *call, sp_sandbox *sb, const sp_sandbox_event *ev,
                            sp_error **err)
{
    if (call)
        *call = 0;
    if (SP_OPTS_CHECK(ev, 1, SP_SANDBOX_EVENT_VERSION, "sp_sandbox_event", err) < 0)
        return SP_EINVAL;
    if (!sb || !ev || !ev->command || !*ev->command)
        return sp_err_set(err, SP_EINVAL, 0, "event: no sandbox or no command given");
    sp_json_init();
    cleanup_free char *path = sp_xasprintf("%s/events.jsonl", sp_sandbox_state_dir(sb));
    struct line_ctx x = {ev, sp_sandbox_name(sb)};
    uint64_t n = 0;
    int r = sp_events_append(path, &n, command_line, &x, err);
    if (call)
        *call = n;
    return r;
}
