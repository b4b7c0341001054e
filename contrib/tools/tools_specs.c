/* The specs of the tool table in each client's format (MCP, OpenAI's
 * Responses and Chat Completions, Anthropic), with the strict and the
 * freeform variants: the text a client hands to a model. */
#include <stdlib.h>
#include <string.h>

#include "tools_internal.h"

/* The freeform grammar of apply_patch, in Lark syntax (what OpenAI's
 * custom tools take): the same envelope the JSON form documents. */
static const char PATCH_GRAMMAR[] =
    "start: begin_patch hunk+ end_patch\n"
    "begin_patch: \"*** Begin Patch\" LF\n"
    "end_patch: \"*** End Patch\" LF?\n"
    "\n"
    "hunk: add_hunk | delete_hunk | update_hunk\n"
    "add_hunk: \"*** Add File: \" filename LF add_line+\n"
    "delete_hunk: \"*** Delete File: \" filename LF\n"
    "update_hunk: \"*** Update File: \" filename LF change_move? change?\n"
    "\n"
    "filename: /(.+)/\n"
    "add_line: \"+\" /(.*)/ LF -> line\n"
    "\n"
    "change_move: \"*** Move to: \" filename LF\n"
    "change: (change_context | change_line)+ eof_line?\n"
    "change_context: (\"@@\" | \"@@ \" /(.+)/) LF\n"
    "change_line: (\"+\" | \"-\" | \" \") /(.*)/ LF\n"
    "eof_line: \"*** End of File\" LF\n"
    "\n"
    "%import common.LF\n";

const char *sp_tools_patch_grammar(void)
{
    return PATCH_GRAMMAR;
}

int sp_tools_format_parse(sp_tools_format *out, const char *s)
{
    static const struct {
        const char *name;
        sp_tools_format f;
    } names[] = {
        {"mcp", SP_TOOLS_FORMAT_MCP},
        {"openai", SP_TOOLS_FORMAT_OPENAI},
        {"openai-freeform", SP_TOOLS_FORMAT_OPENAI_FREEFORM},
        {"anthropic", SP_TOOLS_FORMAT_ANTHROPIC},
        {"openai-chat", SP_TOOLS_FORMAT_OPENAI_CHAT},
    };
    for (size_t i = 0; s && i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].f;
            return 0;
        }
    }
    return SP_EINVAL;
}

static cJSON *hint(const tool_def *d, unsigned h)
{
    return cJSON_CreateBool((d->hints & h) != 0);
}

/* The input schema in the form asked for. */
static cJSON *input_schema(const tool_def *d, bool strict)
{
    return strict ? tools_strict_schema(tool_schema(d)) : cJSON_Duplicate(tool_schema(d), true);
}

static cJSON *mcp_spec(const tool_def *d, bool strict)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *ann = cJSON_CreateObject();
    cJSON *meta = cJSON_CreateObject();
    const cJSON *out = tool_output_schema(d);
    bool ok = o && ann && meta && sp_json_add(o, "name", cJSON_CreateString(d->name)) &&
              sp_json_add(o, "title", cJSON_CreateString(d->title)) &&
              sp_json_add(o, "description", cJSON_CreateString(d->description)) &&
              sp_json_add(o, "inputSchema", input_schema(d, strict)) &&
              (!out || sp_json_add(o, "outputSchema", cJSON_Duplicate(out, true))) &&
              sp_json_add(ann, "title", cJSON_CreateString(d->title)) &&
              sp_json_add(ann, "readOnlyHint", hint(d, HINT_READ_ONLY)) &&
              sp_json_add(ann, "destructiveHint", hint(d, HINT_DESTRUCTIVE)) &&
              sp_json_add(ann, "idempotentHint", hint(d, HINT_IDEMPOTENT)) &&
              sp_json_add(ann, "openWorldHint", hint(d, HINT_OPEN_WORLD)) &&
              sp_json_add(meta, "sandpod/tier", cJSON_CreateString(sp_tool_tier_name(d->tier)));
    if (ok) {
        ok = sp_json_add(o, "annotations", ann) && sp_json_add(o, "_meta", meta);
        ann = meta = NULL;
    }
    cJSON_Delete(ann);
    cJSON_Delete(meta);
    return sp_json_finish(o, ok);
}

static cJSON *openai_spec(const tool_def *d, bool freeform, bool strict)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok;
    if (freeform && strcmp(d->name, "apply_patch") == 0) {
        cJSON *fmt = cJSON_CreateObject();
        char *desc =
            sp_xasprintf("Write the patch itself as the tool input, not JSON. %s", d->description);
        ok = fmt && sp_json_add(fmt, "type", cJSON_CreateString("grammar")) &&
             sp_json_add(fmt, "syntax", cJSON_CreateString("lark")) &&
             sp_json_add(fmt, "definition", cJSON_CreateString(PATCH_GRAMMAR)) &&
             sp_json_add(o, "type", cJSON_CreateString("custom")) &&
             sp_json_add(o, "name", cJSON_CreateString(d->name)) &&
             sp_json_add(o, "description", cJSON_CreateString(desc));
        if (ok)
            ok = sp_json_add(o, "format", fmt); /* sp_json_add() frees it on failure */
        else
            cJSON_Delete(fmt);
        free(desc);
    } else {
        ok = sp_json_add(o, "type", cJSON_CreateString("function")) &&
             sp_json_add(o, "name", cJSON_CreateString(d->name)) &&
             sp_json_add(o, "description", cJSON_CreateString(d->description)) &&
             sp_json_add(o, "parameters", input_schema(d, strict)) &&
             sp_json_add(o, "strict", cJSON_CreateBool(strict));
    }
    return sp_json_finish(o, ok);
}

/* Chat Completions: {type: "function", function: {name, description,
 * parameters[, strict]}}. */
static cJSON *openai_chat_spec(const tool_def *d, bool strict)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *f = cJSON_CreateObject();
    bool ok = o && f && sp_json_add(f, "name", cJSON_CreateString(d->name)) &&
              sp_json_add(f, "description", cJSON_CreateString(d->description)) &&
              sp_json_add(f, "parameters", input_schema(d, strict)) &&
              (!strict || sp_json_add(f, "strict", cJSON_CreateTrue())) &&
              sp_json_add(o, "type", cJSON_CreateString("function"));
    if (ok) {
        ok = sp_json_add(o, "function", f);
        f = NULL;
    }
    cJSON_Delete(f);
    return sp_json_finish(o, ok);
}

static cJSON *anthropic_spec(const tool_def *d, bool strict)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && sp_json_add(o, "name", cJSON_CreateString(d->name)) &&
              sp_json_add(o, "description", cJSON_CreateString(d->description)) &&
              sp_json_add(o, "input_schema", input_schema(d, strict)) &&
              (!strict || sp_json_add(o, "strict", cJSON_CreateTrue()));
    return sp_json_finish(o, ok);
}

char *sp_tools_specs(const sp_tools *t, sp_tools_format format)
{
    return sp_tools_specs_ex(t, format, NULL);
}

char *sp_tools_specs_ex(const sp_tools *t, sp_tools_format format, const sp_tools_specs_opts *opts)
{
    if (opts && opts->version != SP_TOOLS_SPECS_OPTS_VERSION)
        return NULL;
    bool strict = opts && opts->strict;
    cJSON *arr = cJSON_CreateArray();
    if (!arr)
        return NULL;
    bool ok = true;
    for (size_t i = 0; ok && i < n_tool_defs; i++) {
        const tool_def *d = &tool_defs[i];
        if (t ? !sp_tools_has(t, d->name) : ((d->needs & NEED_PATCH) && !tools_patch_available()))
            continue;
        cJSON *s = NULL;
        switch (format) {
        case SP_TOOLS_FORMAT_MCP:
            s = mcp_spec(d, strict);
            break;
        case SP_TOOLS_FORMAT_OPENAI:
        case SP_TOOLS_FORMAT_OPENAI_FREEFORM:
            s = openai_spec(d, format == SP_TOOLS_FORMAT_OPENAI_FREEFORM, strict);
            break;
        case SP_TOOLS_FORMAT_OPENAI_CHAT:
            s = openai_chat_spec(d, strict);
            break;
        case SP_TOOLS_FORMAT_ANTHROPIC:
            s = anthropic_spec(d, strict);
            break;
        }
        ok = s && cJSON_AddItemToArray(arr, s);
        if (!ok)
            cJSON_Delete(s);
    }
    cJSON *root = arr;
    if (ok && format == SP_TOOLS_FORMAT_MCP) {
        root = cJSON_CreateObject();
        ok = root && cJSON_AddItemToObject(root, "tools", arr);
        if (!ok) {
            cJSON_Delete(root);
            root = arr;
        }
    }
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return text;
}
