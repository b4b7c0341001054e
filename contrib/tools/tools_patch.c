/* apply_patch, as a JSON tool ({"input": "..."}, Codex's argument name;
 * "patch" is accepted for it) and as a freeform tool (the patch text
 * itself), both over sp_fs_apply_patch().
 *
 * The engine is built when the library has it (SANDPOD_HAVE_PATCH, set by
 * the build); without it the tool is simply not offered. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs_json.h"
#include "tools_core.h"
#include "tools_internal.h"

#ifdef SANDPOD_HAVE_PATCH
#include "sandpod/patch.h"

bool tools_patch_available(void)
{
    return true;
}

static const char *change_action(sp_patch_action a)
{
    switch (a) {
    case SP_PATCH_ADD:
    case SP_PATCH_COPY:
        return "created";
    case SP_PATCH_DELETE:
        return "deleted";
    case SP_PATCH_MOVE:
        return "moved";
    default:
        return "modified";
    }
}

int tools_apply_patch(sp_tools *t, const char *patch, size_t len, tool_call *c)
{
    sp_patch_opts po = SP_PATCH_OPTS_INIT;
    /* Codex semantics: Add File and Move to replace an existing file. */
    po.allow_overwrite = true;
    sp_patch_result *res = NULL;
    sp_error *err = NULL;
    if (tools_stale_check_patch(t, patch, len, &po, c) < 0)
        return c->code;
    int r = sp_fs_apply_patch(&res, t->fs, patch, len, &po, &err);
    if (r < 0)
        return call_fail_err(c, r, err,
                             r == SP_EINVAL || r == SP_ENOTFOUND || r == SP_EEXISTS
                                 ? "nothing was changed; read the files again and rebuild the "
                                   "patch"
                                 : "nothing was changed");
    tools_stale_note_patch(t, res);
    sp_buf_printf(&c->message, "applied a %s patch to %zu file%s:\n",
                  sp_patch_format_name(res->format), res->n, res->n == 1 ? "" : "s");
    cJSON *files = cJSON_CreateArray();
    for (size_t i = 0; i < res->n; i++) {
        const sp_patch_file *f = &res->files[i];
        const char *act = change_action(f->action);
        char *p = fs_display(t, f->path);
        char *np = f->new_path ? fs_display(t, f->new_path) : NULL;
        sp_buf_printf(&c->message, "  %s %s", sp_patch_action_name(f->action), p);
        if (np)
            sp_buf_printf(&c->message, " -> %s", np);
        if (f->action != SP_PATCH_DELETE)
            sp_buf_printf(&c->message, " (+%zu -%zu)", f->lines_added, f->lines_removed);
        sp_buf_addc(&c->message, '\n');
        if (f->action == SP_PATCH_MOVE) {
            call_change(c, p, "deleted", 0);
            call_change(c, np, "created", f->bytes_written);
        } else {
            call_change(c, np ? np : p, act, f->bytes_written);
        }
        cJSON *o = cJSON_CreateObject();
        bool ok = o && sp_json_add_string(o, "action", sp_patch_action_name(f->action)) &&
                  sp_json_add_string(o, "path", p) && sp_json_add_string(o, "new_path", np) &&
                  sp_json_add_u64(o, "lines_added", f->lines_added) &&
                  sp_json_add_u64(o, "lines_removed", f->lines_removed) &&
                  sp_json_add_u64(o, "bytes_written", f->bytes_written);
        if (!ok || !files || !cJSON_AddItemToArray(files, o))
            cJSON_Delete(o);
        free(p);
        free(np);
    }
    cJSON *v = cJSON_CreateObject();
    if (v && sp_json_add_string(v, "format", sp_patch_format_name(res->format)) && files &&
        cJSON_AddItemToObject(v, "files", files))
        files = NULL;
    cJSON_Delete(files);
    c->value = v;
    sp_patch_result_free(res);
    return 0;
}

#else

bool tools_patch_available(void)
{
    return false;
}

int tools_apply_patch(sp_tools *t, const char *patch, size_t len, tool_call *c)
{
    (void)t;
    (void)patch;
    (void)len;
    return call_fail(c, SP_EINVAL, "apply_patch is not available in this build");
}

#endif

char *tools_patch_alias(cJSON *args)
{
    cJSON *alias = cJSON_GetObjectItemCaseSensitive(args, "patch");
    if (!alias)
        return NULL;
    if (!cJSON_IsString(alias) && !cJSON_IsNull(alias))
        return sp_xasprintf("argument 'patch' must be a string, not %s", tools_type_of(alias));
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(args, "input");
    if (input && !cJSON_IsNull(input) && !cJSON_IsNull(alias)) {
        if (cJSON_IsString(input) && strcmp(input->valuestring, alias->valuestring) == 0) {
            cJSON_DeleteItemFromObjectCaseSensitive(args, "patch");
            return NULL;
        }
        return sp_xstrdup("apply_patch got both 'input' and 'patch' with different texts; "
                          "'patch' is another name for 'input': send the patch once, as "
                          "'input'");
    }
    if (input) {
        /* One of them null: the other is the patch. */
        cJSON_DeleteItemFromObjectCaseSensitive(args, cJSON_IsNull(input) ? "input" : "patch");
        if (!cJSON_IsNull(input))
            return NULL;
    }
    cJSON *item = cJSON_DetachItemFromObjectCaseSensitive(args, "patch");
    if (item && !cJSON_AddItemToObject(args, "input", item)) {
        cJSON_Delete(item);
        return sp_xstrdup("out of memory");
    }
    return NULL;
}

int tool_apply_patch(sp_tools *t, const cJSON *a, tool_call *c)
{
    const char *patch = sp_json_str_or(a, "input", "");
    return tools_apply_patch(t, patch, strlen(patch), c);
}
