/* apply_patch as a model tool: Codex's argument name (`input`, with `patch`
 * as an alias), the specs naming it as Codex's JSON tool does
 * (codex-rs create_apply_patch_json_tool: one required string property
 * `input`, no other, additionalProperties false), and the heredoc and empty
 * patch rules seen through the tool. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "tools.h"

typedef struct fixture {
    char *base, *dir;
    sp_tools *t;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    f->base = tu_mkdtemp();
    f->dir = tu_join(f->base, "root");
    mkdir(f->dir, 0755);
    sp_error *err = NULL;
    if (sp_tools_open_root(&f->t, f->dir, NULL, &err) < 0)
        fail_msg("open: %s", err ? err->message : "?");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    sp_tools_free(f->t);
    tu_rmtree(f->base);
    free(f->base);
    free(f->dir);
    free(f);
    return 0;
}

/* Call apply_patch with `args`; return the result's message; *code the
 * call's code. */
static char *call(fixture *f, const char *args, int *code)
{
    char *res = NULL;
    *code = sp_tools_call(&res, f->t, "apply_patch", args, strlen(args));
    cJSON *o = cJSON_Parse(res);
    if (!o)
        fail_msg("not JSON: %s", res);
    free(res);
    const cJSON *m = cJSON_GetObjectItem(o, "message");
    assert_true(cJSON_IsString(m));
    char *msg = strdup(m->valuestring);
    cJSON_Delete(o);
    return msg;
}

static void ok(fixture *f, const char *args)
{
    int code;
    char *m = call(f, args, &code);
    if (code != 0)
        fail_msg("%s failed: %s", args, m);
    free(m);
}

static void bad(fixture *f, const char *args, int want, const char *needle)
{
    int code;
    char *m = call(f, args, &code);
    if (code != want || !strstr(m, needle))
        fail_msg("%s: want %d and '%s', got %d: %s", args, want, needle, code, m);
    free(m);
}

static void assert_file(const char *dir, const char *rel, const char *want)
{
    size_t len = 0;
    char *got = tu_read(dir, rel, &len);
    if (!got || len != strlen(want) || memcmp(got, want, len) != 0)
        fail_msg("%s holds [%s], expected [%s]", rel, got ? got : "(missing)", want);
    free(got);
}

#define ADD(name, line) "*** Begin Patch\\n*** Add File: " name "\\n+" line "\\n*** End Patch\\n"

static void test_input_and_alias(void **state)
{
    fixture *f = *state;
    ok(f, "{\"input\": \"" ADD("a.txt", "a") "\"}");
    assert_file(f->dir, "a.txt", "a\n");
    /* The old name still works. */
    ok(f, "{\"patch\": \"" ADD("b.txt", "b") "\"}");
    assert_file(f->dir, "b.txt", "b\n");
    /* Both, the same text: fine. One of them null: the other counts. */
    ok(f, "{\"input\": \"" ADD("c.txt", "c") "\", \"patch\": \"" ADD("c.txt", "c") "\"}");
    assert_file(f->dir, "c.txt", "c\n");
    ok(f, "{\"input\": null, \"patch\": \"" ADD("d.txt", "d") "\"}");
    assert_file(f->dir, "d.txt", "d\n");
    ok(f, "{\"input\": \"" ADD("e.txt", "e") "\", \"patch\": null}");
    assert_file(f->dir, "e.txt", "e\n");
    /* Both, different: refused, nothing written. */
    bad(f, "{\"input\": \"" ADD("x.txt", "x") "\", \"patch\": \"" ADD("y.txt", "y") "\"}",
        SP_EINVAL, "both 'input' and 'patch' with different texts");
    assert_false(tu_exists(f->dir, "x.txt"));
    assert_false(tu_exists(f->dir, "y.txt"));
    bad(f, "{\"patch\": 7}", SP_EINVAL, "argument 'patch' must be a string, not a number");
    bad(f, "{}", SP_EINVAL, "missing required argument 'input'");
    bad(f, "{\"input\": \"" ADD("z.txt", "z") "\", \"diff\": \"\"}", SP_EINVAL,
        "unknown argument 'diff'");
    assert_false(tu_exists(f->dir, "z.txt"));
}

static void test_heredoc_and_empty(void **state)
{
    fixture *f = *state;
    tu_mkdir(f->dir, "sub");
    ok(f, "{\"input\": \"cd sub && apply_patch <<'EOF'\\n" ADD("in.txt", "i") "EOF\\n\"}");
    assert_file(f->dir, "sub/in.txt", "i\n");
    assert_false(tu_exists(f->dir, "in.txt"));
    bad(f, "{\"input\": \"cd sub; apply_patch <<'EOF'\\n" ADD("in2.txt", "i") "EOF\\n\"}",
        SP_EINVAL, "only '&&' may join 'cd DIR' and 'apply_patch'");
    bad(f, "{\"input\": \"cd ../.. && apply_patch <<'EOF'\\n" ADD("in2.txt", "i") "EOF\\n\"}",
        SP_EESCAPE, "cd ../..");
    bad(f, "{\"input\": \"*** Begin Patch\\n*** End Patch\"}", SP_EINVAL,
        "No files were modified.");
    /* The freeform form gets the same rules. */
    const char *empty = "*** Begin Patch\n*** End Patch\n";
    char *res = NULL;
    assert_int_equal(sp_tools_call_freeform(&res, f->t, "apply_patch", empty, strlen(empty)),
                     SP_EINVAL);
    assert_non_null(strstr(res, "No files were modified."));
    free(res);
}

/* The apply_patch entry of a spec list. */
static const cJSON *find_tool(const cJSON *list, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, list)
    {
        const cJSON *n = cJSON_GetObjectItem(t, "name");
        if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
            return t;
    }
    return NULL;
}

static void check_schema(const cJSON *schema)
{
    assert_string_equal(cJSON_GetObjectItem(schema, "type")->valuestring, "object");
    const cJSON *props = cJSON_GetObjectItem(schema, "properties");
    assert_int_equal(cJSON_GetArraySize(props), 1);
    const cJSON *input = cJSON_GetObjectItem(props, "input");
    assert_non_null(input);
    assert_string_equal(cJSON_GetObjectItem(input, "type")->valuestring, "string");
    assert_non_null(strstr(cJSON_GetObjectItem(input, "description")->valuestring,
                           "The entire contents of the apply_patch command"));
    const cJSON *req = cJSON_GetObjectItem(schema, "required");
    assert_int_equal(cJSON_GetArraySize(req), 1);
    assert_string_equal(cJSON_GetArrayItem(req, 0)->valuestring, "input");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(schema, "additionalProperties")));
}

static void test_specs(void **state)
{
    (void)state;
    static const struct {
        sp_tools_format fmt;
        const char *schema_key;
    } formats[] = {
        {SP_TOOLS_FORMAT_OPENAI, "parameters"},
        {SP_TOOLS_FORMAT_ANTHROPIC, "input_schema"},
        {SP_TOOLS_FORMAT_MCP, "inputSchema"},
    };
    for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
        char *text = sp_tools_specs(NULL, formats[i].fmt);
        assert_non_null(text);
        cJSON *o = cJSON_Parse(text);
        free(text);
        const cJSON *list = cJSON_IsArray(o) ? o : cJSON_GetObjectItem(o, "tools");
        const cJSON *ap = find_tool(list, "apply_patch");
        assert_non_null(ap);
        check_schema(cJSON_GetObjectItem(ap, formats[i].schema_key));
        const char *desc = cJSON_GetObjectItem(ap, "description")->valuestring;
        /* Codex's opening line, its envelope and its three headers. */
        assert_true(strncmp(desc, "Use the `apply_patch` tool to edit files.", 41) == 0);
        assert_non_null(strstr(desc, "*** Begin Patch\n"));
        assert_non_null(strstr(desc, "*** Add File: <path>"));
        assert_non_null(strstr(desc, "*** Delete File: <path>"));
        assert_non_null(strstr(desc, "*** Update File: <path>"));
        assert_non_null(strstr(desc, "*** Move to: <new path>"));
        if (formats[i].fmt == SP_TOOLS_FORMAT_OPENAI) {
            assert_string_equal(cJSON_GetObjectItem(ap, "type")->valuestring, "function");
            assert_true(cJSON_IsFalse(cJSON_GetObjectItem(ap, "strict")));
        }
        cJSON_Delete(o);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_input_and_alias, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heredoc_and_empty, setup, teardown),
        cmocka_unit_test(test_specs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
