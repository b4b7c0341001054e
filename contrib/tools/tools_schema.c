/* Schemas around the tool table: the output schema of each tool's result
 * (MCP outputSchema), the strict form of an input schema (what OpenAI's
 * and Anthropic's strict tool modes accept), and the reading of a strict
 * call's nulls as absent arguments. */
#include <stdlib.h>
#include <string.h>

#include "fs_json.h"
#include "tools_core.h"

/* ------------------------------------------------------ output schemas -- */

/* clang-format off */
#define S_STR  "{\"type\": \"string\"}"
#define S_INT  "{\"type\": \"integer\"}"
#define S_BOOL "{\"type\": \"boolean\"}"
#define S_NSTR "{\"type\": [\"string\", \"null\"]}"
#define S_NINT "{\"type\": [\"integer\", \"null\"]}"
#define OBJ(props, req) "{\"type\": \"object\", \"properties\": {" props "}, \"required\": [" req "]}"
#define ARR(item) "{\"type\": \"array\", \"items\": " item "}"

static const char V_LIST_DIR[] = OBJ(
    "\"path\": " S_STR ", \"entries\": " ARR(OBJ("\"path\": " S_STR ", \"type\": " S_STR
    ", \"depth\": " S_INT ", \"size\": " S_INT ", \"executable\": " S_BOOL
    ", \"target\": " S_NSTR, "\"path\", \"type\"")) ", \"offset\": " S_INT ", \"count\": " S_INT
    ", \"total\": " S_INT ", \"truncated\": " S_BOOL, "\"path\", \"entries\"");
static const char V_READ_FILE[] = OBJ(
    "\"path\": " S_STR ", \"mode\": " S_STR ", \"start_line\": " S_INT ", \"end_line\": " S_INT
    ", \"total_lines\": " S_INT ", \"content\": " S_STR ", \"lines_cut\": " S_INT
    ", \"truncated\": " S_BOOL, "\"path\"");
static const char V_WRITE_FILE[] = OBJ(
    "\"path\": " S_STR ", \"bytes_written\": " S_INT ", \"created\": " S_BOOL, "\"path\"");
static const char V_EDIT_FILE[] = OBJ(
    "\"path\": " S_STR ", \"replaced\": " S_INT ", \"size\": " S_INT, "\"path\"");
static const char V_INSERT[] = OBJ(
    "\"path\": " S_STR ", \"line\": " S_INT ", \"lines_inserted\": " S_INT ", \"size\": " S_INT,
    "\"path\"");
static const char V_DELETE[] = OBJ("\"path\": " S_STR ", \"type\": " S_STR, "\"path\"");
static const char V_MKDIR[] = OBJ("\"path\": " S_STR ", \"created\": " S_BOOL, "\"path\"");
static const char V_STAT[] = OBJ(
    "\"path\": " S_STR ", \"type\": " S_STR ", \"size\": " S_INT ", \"mode\": " S_STR
    ", \"mtime\": " S_STR ", \"mtime_ns\": " S_INT ", \"target\": " S_NSTR, "\"path\", \"type\"");
static const char V_GLOB[] = OBJ(
    "\"entries\": " ARR(OBJ("\"name\": " S_STR ", \"path\": " S_STR ", \"type\": " S_STR
    ", \"size\": " S_INT, "\"path\"")) ", \"count\": " S_INT ", \"truncated\": " S_BOOL
    ", \"pattern\": " S_STR, "\"entries\"");
static const char V_GREP[] = OBJ(
    "\"matches\": " ARR(OBJ("\"path\": " S_STR ", \"line_number\": " S_INT ", \"line\": " S_STR
    ", \"match_start\": " S_INT ", \"match_end\": " S_INT ", \"byte_offset\": " S_INT,
    "\"path\"")) ", \"count\": " S_INT ", \"truncated\": " S_BOOL ", \"files_searched\": " S_INT
    ", \"files_skipped\": " S_INT, "\"count\"");
static const char V_APPLY_PATCH[] = OBJ(
    "\"format\": " S_STR ", \"files\": " ARR(OBJ("\"action\": " S_STR ", \"path\": " S_STR
    ", \"new_path\": " S_NSTR ", \"lines_added\": " S_INT ", \"lines_removed\": " S_INT
    ", \"bytes_written\": " S_INT, "\"action\", \"path\"")), "\"files\"");
static const char V_SHELL[] = OBJ(
    "\"exit_code\": " S_INT ", \"timed_out\": " S_BOOL ", \"duration_ms\": " S_INT
    ", \"stdout\": " S_STR ", \"stderr\": " S_STR ", \"stdout_truncated\": " S_BOOL
    ", \"stderr_truncated\": " S_BOOL ", \"stdout_bytes\": " S_INT ", \"stderr_bytes\": " S_INT
    ", \"cancelled\": " S_BOOL, "\"exit_code\"");
/* exec_command and write_stdin; write_stdin's kill answers {session_id, killed}. */
static const char V_SESSION[] = OBJ(
    "\"session_id\": " S_NINT ", \"running\": " S_BOOL ", \"exit_code\": " S_NINT
    ", \"output\": " S_STR ", \"truncated\": " S_BOOL ", \"total_bytes\": " S_INT
    ", \"note\": " S_NSTR ", \"wall_ms\": " S_INT ", \"killed\": " S_BOOL, "\"session_id\"");
#define SNAPSHOT_PROPS                                                                             \
    "\"id\": " S_STR ", \"tag\": " S_NSTR ", \"commit\": " S_NSTR ", \"created_at\": " S_STR        \
    ", \"created_at_ns\": " S_INT ", \"root\": " S_NSTR ", \"store\": " S_NSTR ", \"files\": "      \
    S_INT ", \"dirs\": " S_INT ", \"symlinks\": " S_INT ", \"bytes\": " S_INT
static const char V_SNAPSHOT[] = OBJ(SNAPSHOT_PROPS, "\"id\"");
static const char V_RESTORE[] = OBJ(SNAPSHOT_PROPS ", \"paths_changed\": " S_INT, "\"id\"");
static const char V_LIST_SNAPSHOTS[] = OBJ(
    "\"snapshots\": " ARR(OBJ(SNAPSHOT_PROPS, "\"id\"")) ", \"count\": " S_INT, "\"count\"");

/* Every result: {ok, value, truncated, changes[, error]}; `value` is null
 * when a call fails before it has anything to say. */
#define RESULT_HEAD                                                                                \
    "{\"type\": \"object\", \"properties\": {\"ok\": " S_BOOL ", \"value\": {\"anyOf\": ["
#define RESULT_TAIL                                                                                \
    ", {\"type\": \"null\"}]}, \"truncated\": " S_BOOL ", \"changes\": " ARR(OBJ(                   \
    "\"path\": " S_STR ", \"action\": {\"type\": \"string\", \"enum\": [\"created\", "              \
    "\"modified\", \"deleted\", \"moved\"]}, \"bytes\": " S_INT, "\"path\", \"action\""))           \
    ", \"error\": " OBJ("\"code\": " S_STR ", \"message\": " S_STR, "\"code\", \"message\"")        \
    "}, \"required\": [\"ok\", \"value\", \"truncated\", \"changes\"]}"
/* clang-format on */

static const struct {
    const char *tool;
    const char *value;
} value_schemas[] = {
    {"list_dir", V_LIST_DIR},
    {"read_file", V_READ_FILE},
    {"write_file", V_WRITE_FILE},
    {"edit_file", V_EDIT_FILE},
    {"insert", V_INSERT},
    {"delete", V_DELETE},
    {"mkdir", V_MKDIR},
    {"stat", V_STAT},
    {"glob", V_GLOB},
    {"grep", V_GREP},
    {"apply_patch", V_APPLY_PATCH},
    {"shell", V_SHELL},
    {"exec_command", V_SESSION},
    {"write_stdin", V_SESSION},
    {"snapshot", V_SNAPSHOT},
    {"restore", V_RESTORE},
    {"list_snapshots", V_LIST_SNAPSHOTS},
};

#define N_VALUE_SCHEMAS (sizeof(value_schemas) / sizeof(value_schemas[0]))
static cJSON *output_schemas[N_VALUE_SCHEMAS];
static pthread_once_t outputs_once = PTHREAD_ONCE_INIT;

static void parse_outputs(void)
{
    for (size_t i = 0; i < N_VALUE_SCHEMAS; i++) {
        char *text = sp_xasprintf(RESULT_HEAD "%s" RESULT_TAIL, value_schemas[i].value);
        output_schemas[i] = cJSON_Parse(text);
        free(text);
        if (!output_schemas[i] || !tool_find(value_schemas[i].tool))
            abort(); /* a broken literal: a bug, caught by every test */
    }
}

const cJSON *tool_output_schema(const tool_def *d)
{
    pthread_once(&outputs_once, parse_outputs);
    for (size_t i = 0; i < N_VALUE_SCHEMAS; i++)
        if (strcmp(value_schemas[i].tool, d->name) == 0)
            return output_schemas[i];
    return NULL;
}

/* ------------------------------------------------------ strict schemas -- */

/* Keywords a strict schema keeps; the rest (minimum, maxLength, default,
 * pattern, format, ...) is refused by one provider or the other, so it
 * moves into the description instead. */
static bool strict_keyword(const char *k)
{
    static const char *const keep[] = {"type",  "properties",  "required", "additionalProperties",
                                       "items", "description", "enum",     "anyOf",
                                       NULL};
    for (size_t i = 0; keep[i]; i++)
        if (strcmp(k, keep[i]) == 0)
            return true;
    return false;
}

static void append_note(sp_buf *b, const char *k, const cJSON *v)
{
    char *text = cJSON_PrintUnformatted(v);
    if (!text)
        return;
    sp_buf_printf(b, "%s%s %s", b->len ? ", " : "", k, text);
    free(text);
}

/* Make `type` accept null as well (and `enum`, when there is one). */
static void add_null(cJSON *s)
{
    cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (cJSON_IsString(type)) {
        cJSON *arr = cJSON_CreateArray();
        cJSON_AddItemToArray(arr, cJSON_CreateString(type->valuestring));
        cJSON_AddItemToArray(arr, cJSON_CreateString("null"));
        cJSON_ReplaceItemInObjectCaseSensitive(s, "type", arr);
    } else if (cJSON_IsArray(type)) {
        cJSON_AddItemToArray(type, cJSON_CreateString("null"));
    } else {
        cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
        if (cJSON_IsArray(any)) {
            cJSON *n = cJSON_CreateObject();
            cJSON_AddStringToObject(n, "type", "null");
            cJSON_AddItemToArray(any, n);
        }
    }
    cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (cJSON_IsArray(en))
        cJSON_AddItemToArray(en, cJSON_CreateNull());
}

/* Rewrite one schema node in place (see sp_tools_specs_opts.strict). */
static void strictify(cJSON *s)
{
    if (!cJSON_IsObject(s))
        return;
    sp_buf notes = {0};
    for (cJSON *k = s->child; k;) {
        cJSON *next = k->next;
        if (!strict_keyword(k->string)) {
            append_note(&notes, k->string, k);
            cJSON_Delete(cJSON_DetachItemViaPointer(s, k));
        }
        k = next;
    }
    if (notes.len) {
        cJSON *d = cJSON_GetObjectItemCaseSensitive(s, "description");
        char *desc = sp_xasprintf("%s%s(%s)", cJSON_IsString(d) ? d->valuestring : "",
                                  cJSON_IsString(d) ? " " : "", notes.data);
        cJSON *ds = cJSON_CreateString(desc);
        free(desc);
        if (d)
            cJSON_ReplaceItemInObjectCaseSensitive(s, "description", ds);
        else
            cJSON_AddItemToObject(s, "description", ds);
    }
    sp_buf_dispose(&notes);
    cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    strictify(items);
    cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    cJSON *alt;
    cJSON_ArrayForEach(alt, any)
    {
        strictify(alt);
    }
    cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    if (!cJSON_IsObject(props))
        return;
    cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    cJSON *all = cJSON_CreateArray();
    cJSON *p;
    cJSON_ArrayForEach(p, props)
    {
        bool required = false;
        cJSON *r;
        cJSON_ArrayForEach(r, req)
        {
            if (cJSON_IsString(r) && strcmp(r->valuestring, p->string) == 0)
                required = true;
        }
        strictify(p);
        if (!required)
            add_null(p);
        cJSON_AddItemToArray(all, cJSON_CreateString(p->string));
    }
    if (req)
        cJSON_ReplaceItemInObjectCaseSensitive(s, "required", all);
    else
        cJSON_AddItemToObject(s, "required", all);
    cJSON_DeleteItemFromObjectCaseSensitive(s, "additionalProperties");
    cJSON_AddFalseToObject(s, "additionalProperties");
}

cJSON *tools_strict_schema(const cJSON *schema)
{
    cJSON *s = cJSON_Duplicate(schema, true);
    if (s)
        strictify(s);
    return s;
}

/* ---------------------------------------------------------- strict calls -- */

static bool accepts_null(const cJSON *s)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (cJSON_IsString(type))
        return strcmp(type->valuestring, "null") == 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, type)
    {
        if (cJSON_IsString(t) && strcmp(t->valuestring, "null") == 0)
            return true;
    }
    return !type && !cJSON_GetObjectItemCaseSensitive(s, "anyOf");
}

void tools_drop_nulls(cJSON *args, const cJSON *schema)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
    if (!cJSON_IsObject(args) || !cJSON_IsObject(props))
        return;
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(schema, "required");
    for (cJSON *a = args->child; a;) {
        cJSON *next = a->next;
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(props, a->string);
        bool required = false;
        const cJSON *r;
        cJSON_ArrayForEach(r, req)
        {
            if (cJSON_IsString(r) && strcmp(r->valuestring, a->string) == 0)
                required = true;
        }
        if (ps && cJSON_IsNull(a) && !required && !accepts_null(ps)) {
            cJSON_Delete(cJSON_DetachItemViaPointer(args, a));
        } else if (ps && cJSON_IsObject(a)) {
            tools_drop_nulls(a, ps);
        } else if (ps && cJSON_IsArray(a)) {
            const cJSON *items = cJSON_GetObjectItemCaseSensitive(ps, "items");
            cJSON *it;
            cJSON_ArrayForEach(it, a)
            {
                tools_drop_nulls(it, items);
            }
        }
        a = next;
    }
}
