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

/* An image read_file returned (value {mode: "binary", mime, base64}) as
 * MCP image content, for the image types MCP clients show a model; NULL
 * for anything else. `value` is the value member's JSON text. */
static cJSON *image_content(const char *value, size_t len)
{
    static const char *const shown[] = {"image/png", "image/jpeg", "image/gif", "image/webp"};
    static const char mark[] = "\"mode\":\"binary\"";
    if (!value || !memmem(value, len, mark, sizeof(mark) - 1))
        return NULL;
    cJSON *v = sp_json_parse(value, len);
    const char *mime = sp_json_str(v, "mime"), *data = sp_json_str(v, "base64");
    cJSON *item = NULL;
    for (size_t i = 0; mime && data && i < sizeof(shown) / sizeof(shown[0]); i++) {
        if (strcmp(mime, shown[i]) != 0)
            continue;
        item = cJSON_CreateObject();
        if (item && !(cJSON_AddStringToObject(item, "type", "image") &&
                      cJSON_AddStringToObject(item, "data", data) &&
                      cJSON_AddStringToObject(item, "mimeType", mime))) {
            cJSON_Delete(item);
            item = NULL;
        }
        break;
    }
    cJSON_Delete(v);
    return item;
}

/* The message's first line alone, as JSON text: with the image beside it,
 * the base64 after that line would only cost the model tokens. */
static char *first_line(const char *msg)
{
    cJSON *m = sp_json_parse(msg, strlen(msg));
    const char *s = cJSON_IsString(m) ? m->valuestring : "";
    size_t n = strcspn(s, "\n");
    if (n && s[n - 1] == ':')
        n--;
    char *line = sp_xasprintf("%.*s; the image follows", (int)n, s);
    cJSON *out = cJSON_CreateString(line);
    char *text = out ? cJSON_PrintUnformatted(out) : NULL;
    cJSON_Delete(out);
    cJSON_Delete(m);
    free(line);
    return text;
}

/* The tools/call result for a tools result object (text, consumed):
 * {content: [{type: text, text: message}], structuredContent: the object
 * without its message, isError}. The text is cut apart rather than parsed
 * and printed again, which would turn integers past 2^53 into doubles. */
cJSON *mcp_call_result(char *result_text, bool structured)
{
    const char *end = result_text + strlen(result_text);
    const char *p = result_text;
    sp_buf sc = {0};
    char *msg = NULL;
    const char *value = NULL;
    size_t value_len = 0;
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
            if (starts_with(key, "\"value\":")) {
                value = val;
                value_len = (size_t)(vend - val);
            }
            if (sc.len > 1)
                sp_buf_addc(&sc, ',');
            sp_buf_add(&sc, key, (size_t)(vend - key));
        }
        p = vend < end && *vend == ',' ? vend + 1 : vend;
    }
    sp_buf_addc(&sc, '}');
    cJSON *image = ok ? image_content(value, value_len) : NULL;
    free(result_text);
    if (image && msg) {
        char *line = first_line(msg);
        if (line) {
            free(msg);
            msg = line;
        }
    }
    cJSON *r = cJSON_CreateObject();
    cJSON *content = cJSON_CreateArray();
    cJSON *item = cJSON_CreateObject();
    bool fine = r && content && item && cJSON_AddStringToObject(item, "type", "text") &&
                cJSON_AddRawToObject(item, "text", msg ? msg : "\"\"") &&
                cJSON_AddItemToArray(content, item);
    if (fine)
        item = NULL;
    if (fine && image) {
        fine = cJSON_AddItemToArray(content, image);
        if (fine)
            image = NULL;
    }
    fine = fine && cJSON_AddItemToObject(r, "content", content);
    if (fine)
        content = NULL;
    if (structured) {
        fine = fine && cJSON_AddRawToObject(r, "structuredContent", sc.data);
    } else {
        cJSON *meta = fine ? cJSON_AddObjectToObject(r, "_meta") : NULL;
        fine = meta && cJSON_AddRawToObject(meta, "sandpod/result", sc.data);
    }
    fine = fine && cJSON_AddBoolToObject(r, "isError", !ok);
    free(msg);
    sp_buf_dispose(&sc);
    cJSON_Delete(item);
    cJSON_Delete(image);
    cJSON_Delete(content);
    if (!fine) {
        cJSON_Delete(r);
        return NULL;
    }
    return r;
}

/* A tools/call refused before it reached the tools (a NUL in the
 * arguments): the same shapes as a tool failure. */
cJSON *mcp_refused_result(const char *message, bool structured)
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
    return text ? mcp_call_result(text, structured) : NULL;
}

char *mcp_unstructured_list(const char *list)
{
    cJSON *root = cJSON_Parse(list);
    cJSON *tool = NULL;
    bool ok = root != NULL;
    cJSON_ArrayForEach(tool, cJSON_GetObjectItemCaseSensitive(root, "tools"))
    {
        cJSON *schema = cJSON_DetachItemFromObjectCaseSensitive(tool, "outputSchema");
        if (!schema)
            continue;
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(tool, "_meta");
        if (!meta)
            meta = cJSON_AddObjectToObject(tool, "_meta");
        if (!meta || !cJSON_AddItemToObject(meta, "sandpod/outputSchema", schema)) {
            cJSON_Delete(schema);
            ok = false;
        }
    }
    char *out = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return out;
}
