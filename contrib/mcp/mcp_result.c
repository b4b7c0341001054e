/* The tools/call result of the MCP server, made from a tools result
 * object: the message once, as text content, and the rest as
 * structuredContent. */
#include <stdlib.h>
#include <string.h>

#include "fs_json.h"
#include "mcp_internal.h"
#include "tools_internal.h"

/* The end of the JSON value at p (text cJSON printed, so valid). */
static const char *skip_value(const char *p, const char *end)
{
    int depth = 0;
    bool in_str = false;
    for (; p < end; p++) {
        char ch = *p;
        if (in_str) {
            if (ch == '\\')
                p++;
            else if (ch == '"') {
                in_str = false;
                if (depth == 0)
                    return p + 1;
            }
        } else if (ch == '"') {
            in_str = true;
        } else if (ch == '{' || ch == '[') {
            depth++;
        } else if (ch == '}' || ch == ']') {
            if (depth == 0)
                return p;
            if (--depth == 0)
                return p + 1;
        } else if (ch == ',' && depth == 0) {
            return p;
        }
    }
    return end;
}

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The tools/call result for a tools result object (text, consumed):
 * {content: [{type: text, text: message}], structuredContent: the object
 * without its message, isError}. The text is cut apart rather than parsed
 * and printed again, which would turn integers past 2^53 into doubles. */
cJSON *mcp_call_result(char *result_text)
{
    const char *end = result_text + strlen(result_text);
    const char *p = result_text;
    sp_buf sc = {0};
    char *msg = NULL;
    bool ok = false;
    sp_buf_addc(&sc, '{');
    if (*p == '{')
        p++;
    while (p < end && *p == '"') {
        const char *key = p;
        const char *colon = skip_value(p, end);
        if (colon >= end || *colon != ':')
            break;
        const char *val = colon + 1;
        const char *vend = skip_value(val, end);
        if (starts_with(key, "\"message\":")) {
            msg = sp_xstrndup(val, (size_t)(vend - val));
        } else {
            if (starts_with(key, "\"ok\":true"))
                ok = true;
            if (sc.len > 1)
                sp_buf_addc(&sc, ',');
            sp_buf_add(&sc, key, (size_t)(vend - key));
        }
        p = vend < end && *vend == ',' ? vend + 1 : vend;
    }
    sp_buf_addc(&sc, '}');
    free(result_text);
    cJSON *r = cJSON_CreateObject();
    cJSON *content = cJSON_CreateArray();
    cJSON *item = cJSON_CreateObject();
    bool fine = r && content && item && cJSON_AddStringToObject(item, "type", "text") &&
                cJSON_AddRawToObject(item, "text", msg ? msg : "\"\"") &&
                cJSON_AddItemToArray(content, item);
    if (fine)
        item = NULL;
    fine = fine && cJSON_AddItemToObject(r, "content", content);
    if (fine)
        content = NULL;
    fine = fine && cJSON_AddRawToObject(r, "structuredContent", sc.data) &&
           cJSON_AddBoolToObject(r, "isError", !ok);
    free(msg);
    sp_buf_dispose(&sc);
    cJSON_Delete(item);
    cJSON_Delete(content);
    if (!fine) {
        cJSON_Delete(r);
        return NULL;
    }
    return r;
}

/* A tools/call refused before it reached the tools (a NUL in the
 * arguments): the same shapes as a tool failure. */
cJSON *mcp_refused_result(const char *message)
{
    cJSON *sc = sp_json_error_code(SP_EINVAL, message);
    if (!sc)
        return NULL;
    cJSON_AddStringToObject(sc, "message", message);
    cJSON_AddNullToObject(sc, "value");
    cJSON_AddFalseToObject(sc, "truncated");
    cJSON_AddItemToObject(sc, "changes", cJSON_CreateArray());
    char *text = cJSON_PrintUnformatted(sc);
    cJSON_Delete(sc);
    return text ? mcp_call_result(text) : NULL;
}
