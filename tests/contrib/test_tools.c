/* Tests of the model tool suite (contrib/tools/tools.h) through its
 * dispatcher, on a scratch folder: every filesystem tool with good and bad
 * arguments, argument checking, the approval policy, events, output caps,
 * fs modes, snapshots and apply_patch. The command tools need a container
 * and are covered by tests/contrib/test_mcp_sandbox.py. */
#include "testutil.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs_json.h"
#include "tools.h"
#include "tools_internal.h"

typedef struct fixture {
    char *dir;     /* the root the tools see */
    char *outside; /* a folder beside it that must never change */
    sp_tools *t;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    char *base = tu_mkdtemp();
    f->dir = tu_join(base, "root");
    f->outside = tu_join(base, "outside");
    free(base);
    mkdir(f->dir, 0755);
    mkdir(f->outside, 0755);
    tu_write(f->outside, "secret.txt", "secret\n", 0644);
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
    char *base = strdup(f->dir);
    *strrchr(base, '/') = '\0';
    tu_rmtree(base);
    free(base);
    free(f->dir);
    free(f->outside);
    free(f);
    return 0;
}

/* Run a call; return the parsed result object (the caller frees it). */
static cJSON *call_ex(sp_tools *t, const char *tool, const char *args, int *code)
{
    char *res = NULL;
    int r = sp_tools_call(&res, t, tool, args, args ? strlen(args) : 0);
    assert_non_null(res);
    cJSON *o = cJSON_Parse(res);
    if (!o)
        fail_msg("result is not JSON: %s", res);
    free(res);
    /* Every result has the same shape. */
    assert_true(cJSON_IsBool(cJSON_GetObjectItem(o, "ok")));
    assert_true(cJSON_IsString(cJSON_GetObjectItem(o, "message")));
    assert_non_null(cJSON_GetObjectItem(o, "value"));
    assert_true(cJSON_IsBool(cJSON_GetObjectItem(o, "truncated")));
    assert_true(cJSON_IsArray(cJSON_GetObjectItem(o, "changes")));
    assert_int_equal(cJSON_IsTrue(cJSON_GetObjectItem(o, "ok")), r == 0);
    if (code)
        *code = r;
    return o;
}

static const char *msg_of(const cJSON *o)
{
    return cJSON_GetObjectItem(o, "message")->valuestring;
}

/* A successful call; returns its result. */
static cJSON *ok_call(sp_tools *t, const char *tool, const char *args)
{
    int r;
    cJSON *o = call_ex(t, tool, args, &r);
    if (r != 0)
        fail_msg("%s %s failed: %s", tool, args ? args : "", msg_of(o));
    return o;
}

/* A failing call with `code` whose message holds `needle`. */
static void bad_call(sp_tools *t, const char *tool, const char *args, int code, const char *needle)
{
    int r;
    cJSON *o = call_ex(t, tool, args, &r);
    if (r != code)
        fail_msg("%s %s: want %d, got %d: %s", tool, args ? args : "", code, r, msg_of(o));
    const cJSON *e = cJSON_GetObjectItem(o, "error");
    assert_true(cJSON_IsObject(e));
    assert_true(cJSON_IsString(cJSON_GetObjectItem(e, "code")));
    if (needle && !strstr(msg_of(o), needle))
        fail_msg("%s: message '%s' lacks '%s'", tool, msg_of(o), needle);
    cJSON_Delete(o);
}

static void assert_has(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("'%s' lacks '%s'", hay, needle);
}

static void assert_file(const char *dir, const char *rel, const char *want)
{
    char *got = tu_read(dir, rel, NULL);
    if (!got)
        fail_msg("%s is missing", rel);
    assert_string_equal(got, want);
    free(got);
}

/* ------------------------------------------------------------- specs -- */

static void test_specs(void **state)
{
    (void)state;
    sp_tools_format fmts[] = {SP_TOOLS_FORMAT_MCP, SP_TOOLS_FORMAT_OPENAI,
                              SP_TOOLS_FORMAT_OPENAI_FREEFORM, SP_TOOLS_FORMAT_ANTHROPIC};
    for (size_t i = 0; i < 4; i++) {
        char *s = sp_tools_specs(NULL, fmts[i]);
        assert_non_null(s);
        cJSON *o = cJSON_Parse(s);
        free(s);
        assert_non_null(o);
        cJSON *arr = fmts[i] == SP_TOOLS_FORMAT_MCP ? cJSON_GetObjectItem(o, "tools") : o;
        assert_true(cJSON_IsArray(arr));
        assert_true(cJSON_GetArraySize(arr) >= 16);
        const cJSON *it;
        cJSON_ArrayForEach(it, arr)
        {
            const char *name = cJSON_GetObjectItem(it, "name")->valuestring;
            assert_true(strlen(cJSON_GetObjectItem(it, "description")->valuestring) > 40);
            const cJSON *schema = NULL;
            const cJSON *type = cJSON_GetObjectItem(it, "type");
            switch (fmts[i]) {
            case SP_TOOLS_FORMAT_MCP:
                schema = cJSON_GetObjectItem(it, "inputSchema");
                assert_true(cJSON_IsObject(cJSON_GetObjectItem(it, "annotations")));
                break;
            case SP_TOOLS_FORMAT_ANTHROPIC:
                schema = cJSON_GetObjectItem(it, "input_schema");
                break;
            default:
                if (strcmp(type->valuestring, "custom") == 0) {
                    assert_int_equal(fmts[i], SP_TOOLS_FORMAT_OPENAI_FREEFORM);
                    assert_string_equal(name, "apply_patch");
                    const cJSON *fmt = cJSON_GetObjectItem(it, "format");
                    assert_string_equal(cJSON_GetObjectItem(fmt, "syntax")->valuestring, "lark");
                    assert_has(cJSON_GetObjectItem(fmt, "definition")->valuestring,
                               "*** Begin Patch");
                    continue;
                }
                assert_string_equal(type->valuestring, "function");
                schema = cJSON_GetObjectItem(it, "parameters");
                break;
            }
            assert_true(cJSON_IsObject(schema));
            assert_string_equal(cJSON_GetObjectItem(schema, "type")->valuestring, "object");
            assert_true(cJSON_IsFalse(cJSON_GetObjectItem(schema, "additionalProperties")));
        }
        cJSON_Delete(o);
    }
    sp_tools_format f;
    assert_int_equal(sp_tools_format_parse(&f, "anthropic"), 0);
    assert_int_equal(f, SP_TOOLS_FORMAT_ANTHROPIC);
    assert_true(sp_tools_format_parse(&f, "xml") < 0);
    assert_string_equal(sp_tools_names()[0], "list_dir");
}

static void test_context_tools(void **state)
{
    fixture *f = *state;
    /* A bare folder: no command tools, no snapshot tools without a store. */
    assert_true(sp_tools_has(f->t, "read_file"));
    assert_false(sp_tools_has(f->t, "shell"));
    assert_false(sp_tools_has(f->t, "exec_command"));
    assert_false(sp_tools_has(f->t, "snapshot"));
    assert_false(sp_tools_has(f->t, "nope"));
    bad_call(f->t, "shell", "{\"command\":\"ls\"}", SP_EINVAL, "needs a sandbox");
    bad_call(f->t, "snapshot", NULL, SP_EINVAL, "snapshot store");
    bad_call(f->t, "nope", NULL, SP_ENOTFOUND, "no tool named 'nope'");
    char *s = sp_tools_specs(f->t, SP_TOOLS_FORMAT_ANTHROPIC);
    assert_null(strstr(s, "\"shell\""));
    assert_non_null(strstr(s, "\"grep\""));
    free(s);
}

/* ---------------------------------------------------------- arguments -- */

static void test_arguments(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "a.txt", "one\n", 0644);
    bad_call(f->t, "read_file", "{\"path\":\"a.txt\",\"bogus\":1}", SP_EINVAL,
             "unknown argument 'bogus' for read_file (it takes: path,");
    bad_call(f->t, "read_file", "{}", SP_EINVAL, "missing required argument 'path'");
    bad_call(f->t, "read_file", "{\"path\":3}", SP_EINVAL, "'path' must be a string, not a number");
    bad_call(f->t, "read_file", "{\"path\":\"a.txt\",\"limit\":\"3\"}", SP_EINVAL,
             "'limit' must be an integer");
    bad_call(f->t, "read_file", "{\"path\":\"a.txt\",\"limit\":1.5}", SP_EINVAL, "whole number");
    bad_call(f->t, "read_file", "{\"path\":\"a.txt\",\"limit\":0}", SP_EINVAL,
             "between 1 and 5000, not 0");
    bad_call(f->t, "read_file", "{\"path\":\"a.txt\",\"mode\":\"all\"}", SP_EINVAL,
             "must be one of [\"slice\",\"indentation\"]");
    bad_call(f->t, "read_file", "{\"path\":\"\"}", SP_EINVAL, "must not be empty");
    bad_call(f->t, "read_file", "{\"path\":\"a.txt\",\"path\":\"b\"}", SP_EINVAL, "given twice");
    bad_call(f->t, "edit_file",
             "{\"path\":\"a.txt\",\"old_string\":\"x\",\"new_string\":\"y\","
             "\"replace_all\":\"yes\"}",
             SP_EINVAL, "boolean");
    bad_call(f->t, "read_file", "{\"path\":", SP_EINVAL, "not valid JSON");
    bad_call(f->t, "read_file", "[1,2]", SP_EINVAL, "must be a JSON object, not an array");
    bad_call(f->t, "read_file", "{\"path\":\"a.txt\"} x", SP_EINVAL, "not valid JSON");
    /* NUL characters: cJSON would cut the string there, so they are refused. */
    bad_call(f->t, "read_file", "{\"path\":\"a.txt\\u0000.png\"}", SP_EINVAL,
             "argument 'path' holds a NUL character");
    bad_call(f->t, "write_file", "{\"path\":\"b.txt\",\"content\":\"x\\u0000y\"}", SP_EINVAL,
             "argument 'content' holds a NUL");
    assert_false(tu_exists(f->dir, "b.txt"));
    /* An escaped backslash before u0000 is plain text. */
    cJSON *o = ok_call(f->t, "write_file", "{\"path\":\"c.txt\",\"content\":\"\\\\u0000\"}");
    cJSON_Delete(o);
    assert_file(f->dir, "c.txt", "\\u0000");
    /* null for an optional argument means the default; empty args = {}. */
    o = ok_call(f->t, "read_file", "{\"path\":\"a.txt\",\"limit\":null}");
    cJSON_Delete(o);
    o = ok_call(f->t, "list_dir", "");
    cJSON_Delete(o);
    o = ok_call(f->t, "list_dir", "  {}  \n");
    cJSON_Delete(o);
}

static void test_nul_scanner(void **state)
{
    (void)state;
    char *msg = NULL;
    const char *ok[] = {"{}", "{\"a\":\"\\\\u0000\"}", "{\"a\":\"\\u0001\"}", "{\"a\":[1,{}]}",
                        "\"\\u00000\"x"};
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(json_nul_check(ok[i], strlen(ok[i]), &msg), 0);
    const char *nested = "{\"params\":{\"arguments\":{\"path\":\"x\\u0000\"}}}";
    assert_int_equal(json_nul_check(nested, strlen(nested), &msg), SP_EINVAL);
    assert_has(msg, "'path'");
    free(msg);
    const char *key = "{\"pa\\u0000th\":\"x\"}";
    assert_int_equal(json_nul_check(key, strlen(key), &msg), SP_EINVAL);
    assert_has(msg, "'pa");
    free(msg);
    const char *arr = "{\"files\":[\"a\",\"b\\u0000\"]}";
    assert_int_equal(json_nul_check(arr, strlen(arr), &msg), SP_EINVAL);
    assert_has(msg, "'files'");
    free(msg);
}

/* ----------------------------------------------------------- list_dir -- */

static void test_list_dir(void **state)
{
    fixture *f = *state;
    tu_mkdir(f->dir, "src");
    tu_mkdir(f->dir, "src/deep");
    tu_write(f->dir, "src/deep/x.c", "x\n", 0644);
    tu_write(f->dir, "src/main.c", "int main;\n", 0644);
    tu_write(f->dir, "run.sh", "#!/bin/sh\n", 0755);
    tu_write(f->dir, "src.txt", "t\n", 0644);
    tu_symlink("../outside/secret.txt", f->dir, "link");
    char *fifo = tu_join(f->dir, "fifo");
    mkfifo(fifo, 0644);
    free(fifo);

    cJSON *o = ok_call(f->t, "list_dir", "{}");
    const char *m = msg_of(o);
    /* Tree order: a folder right before its contents (even before src.txt). */
    assert_has(m, "Absolute path: ");
    assert_has(m, "\nfifo?\nlink@ -> ../outside/secret.txt\nrun.sh*\nsrc/\n  deep/\n  main.c\n"
                  "src.txt\n");
    assert_null(strstr(m, "x.c")); /* depth 2 */
    cJSON *v = cJSON_GetObjectItem(o, "value");
    assert_int_equal(cJSON_GetObjectItem(v, "total")->valueint, 7);
    cJSON_Delete(o);

    o = ok_call(f->t, "list_dir", "{\"depth\":3,\"offset\":4,\"limit\":3}");
    m = msg_of(o);
    assert_has(m, "\nsrc/\n  deep/\n    x.c\nMore than 3 entries found; continue with offset=7\n");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(o, "truncated")));
    v = cJSON_GetObjectItem(o, "value");
    assert_int_equal(cJSON_GetObjectItem(v, "next_offset")->valueint, 7);
    assert_int_equal(cJSON_GetObjectItem(v, "total")->valueint, 8);
    cJSON_Delete(o);

    o = ok_call(f->t, "list_dir", "{\"path\":\"src\",\"depth\":1}");
    assert_has(msg_of(o), "deep/\nmain.c\n");
    cJSON_Delete(o);

    tu_mkdir(f->dir, "empty");
    o = ok_call(f->t, "list_dir", "{\"path\":\"/workspace/empty\"}");
    assert_has(msg_of(o), "(empty folder)");
    cJSON_Delete(o);

    bad_call(f->t, "list_dir", "{\"offset\":99}", SP_EINVAL, "past the end");
    bad_call(f->t, "list_dir", "{\"path\":\"run.sh\"}", SP_EINVAL, NULL);
    bad_call(f->t, "list_dir", "{\"path\":\"nope\"}", SP_ENOTFOUND, "list_dir or glob");
    bad_call(f->t, "list_dir", "{\"path\":\"..\"}", SP_EESCAPE, "may not leave it");
    bad_call(f->t, "list_dir", "{\"path\":\"link\"}", SP_EESCAPE, NULL);
    bad_call(f->t, "list_dir", "{\"depth\":0}", SP_EINVAL, "between 1 and 10");
}

/* ---------------------------------------------------------- read_file -- */

static void test_read_file(void **state)
{
    fixture *f = *state;
    char big[4096] = "";
    size_t used = 0;
    for (int i = 1; i <= 30; i++)
        used += (size_t)snprintf(big + used, sizeof(big) - used, "line %d\n", i);
    tu_write(f->dir, "n.txt", big, 0644);

    cJSON *o = ok_call(f->t, "read_file", "{\"path\":\"n.txt\",\"limit\":3}");
    assert_has(msg_of(o), "L1: line 1\nL2: line 2\nL3: line 3\n");
    assert_has(msg_of(o), "continue with offset=4");
    cJSON *v = cJSON_GetObjectItem(o, "value");
    assert_string_equal(cJSON_GetObjectItem(v, "content")->valuestring, "line 1\nline 2\nline 3\n");
    assert_int_equal(cJSON_GetObjectItem(v, "total_lines")->valueint, 30);
    assert_int_equal(cJSON_GetObjectItem(v, "next_offset")->valueint, 4);
    cJSON_Delete(o);

    /* offset is 1-based; 0 reads as 1. */
    o = ok_call(f->t, "read_file", "{\"path\":\"n.txt\",\"offset\":29}");
    assert_string_equal(msg_of(o), "L29: line 29\nL30: line 30\n");
    assert_false(cJSON_IsTrue(cJSON_GetObjectItem(o, "truncated")));
    cJSON_Delete(o);
    o = ok_call(f->t, "read_file", "{\"path\":\"n.txt\",\"offset\":0,\"limit\":1}");
    assert_has(msg_of(o), "L1: line 1\n");
    cJSON_Delete(o);
    bad_call(f->t, "read_file", "{\"path\":\"n.txt\",\"offset\":31}", SP_EINVAL,
             "past the end: n.txt has 30 lines");

    /* Long lines are cut with a marker. */
    char longl[2000];
    memset(longl, 'a', sizeof(longl) - 2);
    longl[sizeof(longl) - 2] = '\n';
    longl[sizeof(longl) - 1] = '\0';
    tu_write(f->dir, "long.txt", longl, 0644);
    o = ok_call(f->t, "read_file", "{\"path\":\"long.txt\"}");
    assert_has(msg_of(o), "[line cut: 1998 bytes]");
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "value"), "lines_cut")->valueint,
                     1);
    cJSON_Delete(o);

    /* Control characters cannot forge lines of the answer. */
    tu_write(f->dir, "ctl.txt", "a\rb\x1b[31m\tc\n", 0644);
    o = ok_call(f->t, "read_file", "{\"path\":\"ctl.txt\"}");
    assert_string_equal(msg_of(o), "L1: a\\x0db\\x1b[31m\tc\n");
    cJSON_Delete(o);

    tu_write(f->dir, "empty.txt", "", 0644);
    o = ok_call(f->t, "read_file", "{\"path\":\"empty.txt\"}");
    assert_has(msg_of(o), "(empty file)");
    cJSON_Delete(o);

    tu_write_n(f->dir, "bin.dat",
               "\x7f"
               "ELF\0\0\1",
               7, 0644);
    /* Not text: returned whole, as base64 with its media type. */
    o = ok_call(f->t, "read_file", "{\"path\":\"bin.dat\"}");
    v = cJSON_GetObjectItem(o, "value");
    assert_string_equal(cJSON_GetObjectItem(v, "mime")->valuestring, "application/x-elf");
    assert_string_equal(cJSON_GetObjectItem(v, "base64")->valuestring, "f0VMRgAAAQ==");
    assert_int_equal(cJSON_GetObjectItem(v, "size")->valueint, 7);
    assert_has(msg_of(o), "bin.dat is a binary file (application/x-elf, 7 bytes)");
    cJSON_Delete(o);
    bad_call(f->t, "read_file", "{\"path\":\"missing.txt\"}", SP_ENOTFOUND, "list_dir or glob");
    bad_call(f->t, "read_file", "{\"path\":\"../outside/secret.txt\"}", SP_EESCAPE, NULL);
    bad_call(f->t, "read_file", "{\"path\":\"/etc/passwd\"}", SP_EESCAPE, NULL);
    tu_mkdir(f->dir, "d");
    bad_call(f->t, "read_file", "{\"path\":\"d\"}", SP_EINVAL, NULL);
}

static void test_read_indentation(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "m.py",
             "import os\n"         /* 1 */
             "\n"                  /* 2 */
             "class A:\n"          /* 3 */
             "    # doc\n"         /* 4 */
             "    def f(self):\n"  /* 5 */
             "        x = 1\n"     /* 6 */
             "        if x:\n"     /* 7 */
             "            y = 2\n" /* 8 */
             "\n"                  /* 9 */
             "            z = 3\n" /* 10 */
             "        return x\n"  /* 11 */
             "\n"                  /* 12 */
             "    def g(self):\n"  /* 13 */
             "        pass\n"      /* 14 */
             "\n"                  /* 15 */
             "def top():\n"        /* 16 */
             "    return 1\n",     /* 17 */
             0644);
    /* The anchor's own block: the if and its body, blank line inside. */
    cJSON *o =
        ok_call(f->t, "read_file", "{\"path\":\"m.py\",\"offset\":8,\"mode\":\"indentation\"}");
    assert_string_equal(msg_of(o), "L7:         if x:\nL8:             y = 2\nL9: \n"
                                   "L10:             z = 3\n");
    cJSON *v = cJSON_GetObjectItem(o, "value");
    assert_int_equal(cJSON_GetObjectItem(v, "start_line")->valueint, 7);
    assert_int_equal(cJSON_GetObjectItem(v, "end_line")->valueint, 10);
    assert_int_equal(cJSON_GetObjectItem(v, "anchor_line")->valueint, 8);
    cJSON_Delete(o);
    /* One level up: the whole method, with the comment above it. */
    o = ok_call(f->t, "read_file",
                "{\"path\":\"m.py\",\"offset\":8,\"mode\":\"indentation\",\"max_levels\":1}");
    assert_has(msg_of(o), "L4:     # doc\nL5:     def f(self):\n");
    assert_has(msg_of(o), "L11:         return x\n");
    assert_null(strstr(msg_of(o), "L13"));
    cJSON_Delete(o);
    /* A header line as the anchor gives its own body. */
    o = ok_call(f->t, "read_file", "{\"path\":\"m.py\",\"offset\":16,\"mode\":\"indentation\"}");
    assert_string_equal(msg_of(o), "L16: def top():\nL17:     return 1\n");
    cJSON_Delete(o);
    /* A blank anchor stands for the next line with text. */
    o = ok_call(f->t, "read_file", "{\"path\":\"m.py\",\"offset\":12,\"mode\":\"indentation\"}");
    assert_has(msg_of(o), "L13:     def g(self):\nL14:         pass\n");
    cJSON_Delete(o);
    /* Braces: the closing line comes along. */
    tu_write(f->dir, "c.c", "int f(void)\n{\n    if (a) {\n        b();\n    }\n    return 0;\n}\n",
             0644);
    o = ok_call(f->t, "read_file", "{\"path\":\"c.c\",\"offset\":4,\"mode\":\"indentation\"}");
    assert_string_equal(msg_of(o), "L3:     if (a) {\nL4:         b();\nL5:     }\n");
    cJSON_Delete(o);
    /* A block longer than limit keeps the anchor in view. */
    o = ok_call(f->t, "read_file",
                "{\"path\":\"m.py\",\"offset\":8,\"mode\":\"indentation\",\"max_levels\":2,"
                "\"limit\":3}");
    assert_has(msg_of(o), "L8:");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(o, "truncated")));
    cJSON_Delete(o);
    bad_call(f->t, "read_file", "{\"path\":\"m.py\",\"offset\":40,\"mode\":\"indentation\"}",
             SP_EINVAL, "past the end");
}

/* ------------------------------------------------------------- writes -- */

static void test_write_file(void **state)
{
    fixture *f = *state;
    cJSON *o = ok_call(f->t, "write_file", "{\"path\":\"a/b/new.txt\",\"content\":\"hi\\n\"}");
    assert_has(msg_of(o), "created a/b/new.txt (3 bytes written)");
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "changes"), 0);
    assert_string_equal(cJSON_GetObjectItem(ch, "path")->valuestring, "a/b/new.txt");
    assert_string_equal(cJSON_GetObjectItem(ch, "action")->valuestring, "created");
    assert_int_equal(cJSON_GetObjectItem(ch, "bytes")->valueint, 3);
    cJSON_Delete(o);
    assert_file(f->dir, "a/b/new.txt", "hi\n");

    o = ok_call(f->t, "write_file",
                "{\"path\":\"a/b/new.txt\",\"content\":\"more\\n\","
                "\"mode\":\"append\"}");
    ch = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "changes"), 0);
    assert_string_equal(cJSON_GetObjectItem(ch, "action")->valuestring, "modified");
    cJSON_Delete(o);
    assert_file(f->dir, "a/b/new.txt", "hi\nmore\n");

    o = ok_call(f->t, "write_file", "{\"path\":\"/workspace/a/b/new.txt\",\"content\":\"x\"}");
    assert_has(msg_of(o), "replaced a/b/new.txt");
    cJSON_Delete(o);
    assert_file(f->dir, "a/b/new.txt", "x");

    bad_call(f->t, "write_file", "{\"path\":\"a/b/new.txt\",\"content\":\"y\",\"mode\":\"create\"}",
             SP_EEXISTS, "edit_file");
    bad_call(f->t, "write_file", "{\"path\":\"../outside/x\",\"content\":\"y\"}", SP_EESCAPE, NULL);
    bad_call(f->t, "write_file", "{\"path\":\"x.txt\"}", SP_EINVAL, "'content'");
    bad_call(f->t, "write_file", "{\"path\":\"bad.txt\",\"content\":\"\\udc00\"}", SP_EINVAL, NULL);
    assert_false(tu_exists(f->outside, "x"));
}

static void test_edit_file(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "e.txt", "alpha\nbeta\nalpha\n", 0644);
    bad_call(f->t, "edit_file",
             "{\"path\":\"e.txt\",\"old_string\":\"alpha\",\"new_string\":\"A\"}", SP_EINVAL,
             "so that it matches once"); /* the tool's hint, from the error's reason */
    bad_call(f->t, "edit_file",
             "{\"path\":\"e.txt\",\"old_string\":\"gamma\",\"new_string\":\"G\"}", SP_ENOTFOUND,
             "copy old_string exactly");
    bad_call(f->t, "edit_file",
             "{\"path\":\"nofile.txt\",\"old_string\":\"a\",\"new_string\":\"b\"}", SP_ENOTFOUND,
             NULL);
    bad_call(f->t, "edit_file", "{\"path\":\"e.txt\",\"old_string\":\"a\",\"new_string\":\"a\"}",
             SP_EINVAL, "the same");
    bad_call(f->t, "edit_file", "{\"path\":\"e.txt\",\"old_string\":\"\",\"new_string\":\"a\"}",
             SP_EINVAL, "must not be empty");
    assert_file(f->dir, "e.txt", "alpha\nbeta\nalpha\n");

    cJSON *o = ok_call(f->t, "edit_file",
                       "{\"path\":\"e.txt\",\"old_string\":\"beta\\n\",\"new_string\":\"\"}");
    assert_has(msg_of(o), "replaced 1 occurrence in e.txt");
    cJSON_Delete(o);
    o = ok_call(f->t, "edit_file",
                "{\"path\":\"e.txt\",\"old_string\":\"alpha\","
                "\"new_string\":\"omega\",\"replace_all\":true}");
    assert_has(msg_of(o), "replaced 2 occurrences");
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "changes"), 0);
    assert_int_equal(cJSON_GetObjectItem(ch, "bytes")->valueint, 12);
    cJSON_Delete(o);
    assert_file(f->dir, "e.txt", "omega\nomega\n");
}

static void test_insert(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "i.txt", "one\ntwo\n", 0644);
    cJSON *o = ok_call(f->t, "insert", "{\"path\":\"i.txt\",\"line\":1,\"text\":\"1.5\"}");
    assert_has(msg_of(o), "inserted 1 line after line 1 of i.txt");
    cJSON_Delete(o);
    o = ok_call(f->t, "insert", "{\"path\":\"i.txt\",\"line\":0,\"text\":\"zero\\n\"}");
    cJSON_Delete(o);
    o = ok_call(f->t, "insert", "{\"path\":\"i.txt\",\"line\":-1,\"text\":\"end\\nend2\"}");
    assert_has(msg_of(o), "inserted 2 lines at the end");
    cJSON_Delete(o);
    assert_file(f->dir, "i.txt", "zero\none\n1.5\ntwo\nend\nend2\n");
    bad_call(f->t, "insert", "{\"path\":\"i.txt\",\"line\":99,\"text\":\"x\"}", SP_EINVAL,
             "line number");
    bad_call(f->t, "insert", "{\"path\":\"i.txt\",\"line\":-2,\"text\":\"x\"}", SP_EINVAL,
             "at least -1");
    bad_call(f->t, "insert", "{\"path\":\"i.txt\",\"text\":\"x\"}", SP_EINVAL, "'line'");
}

static void test_delete_mkdir(void **state)
{
    fixture *f = *state;
    cJSON *o = ok_call(f->t, "mkdir", "{\"path\":\"p/q/r\"}");
    assert_has(msg_of(o), "created folder p/q/r");
    cJSON_Delete(o);
    o = ok_call(f->t, "mkdir", "{\"path\":\"p/q/r\"}");
    assert_has(msg_of(o), "already exists");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "changes")), 0);
    cJSON_Delete(o);
    bad_call(f->t, "mkdir", "{\"path\":\"x/y\",\"parents\":false}", SP_ENOTFOUND,
             "set parents to true");
    bad_call(f->t, "mkdir", "{\"path\":\"p\",\"parents\":false}", SP_EEXISTS, NULL);

    tu_write(f->dir, "p/q/r/f.txt", "f\n", 0644);
    bad_call(f->t, "delete", "{\"path\":\"p\"}", SP_EINVAL, "recursive");
    o = ok_call(f->t, "delete", "{\"path\":\"p/q/r/f.txt\"}");
    assert_has(msg_of(o), "deleted file p/q/r/f.txt");
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "changes"), 0);
    assert_string_equal(cJSON_GetObjectItem(ch, "action")->valuestring, "deleted");
    cJSON_Delete(o);
    o = ok_call(f->t, "delete", "{\"path\":\"p\",\"recursive\":true}");
    cJSON_Delete(o);
    assert_false(tu_exists(f->dir, "p"));
    /* A symlink goes, never its target. */
    tu_symlink("../outside/secret.txt", f->dir, "l");
    o = ok_call(f->t, "delete", "{\"path\":\"l\"}");
    cJSON_Delete(o);
    assert_true(tu_exists(f->outside, "secret.txt"));
    bad_call(f->t, "delete", "{\"path\":\".\",\"recursive\":true}", SP_EINVAL, NULL);
    bad_call(f->t, "delete", "{\"path\":\"gone\"}", SP_ENOTFOUND, NULL);
    bad_call(f->t, "delete", "{\"path\":\"../outside\",\"recursive\":true}", SP_EESCAPE, NULL);
    assert_true(tu_exists(f->outside, "secret.txt"));
}

/* -------------------------------------------------------------- reads -- */

static void test_stat_glob_grep(void **state)
{
    fixture *f = *state;
    tu_mkdir(f->dir, "src");
    tu_write(f->dir, "src/a.c", "int a = 1;\n// TODO fix\n", 0644);
    tu_write(f->dir, "src/b.h", "#define B (1+1)\n", 0640);
    tu_write(f->dir, "README.md", "todo: docs\n", 0644);
    tu_symlink("src/a.c", f->dir, "alink");

    cJSON *o = ok_call(f->t, "stat", "{\"path\":\"src/b.h\"}");
    assert_has(msg_of(o), "src/b.h: file, 16 bytes, mode 0640, modified ");
    cJSON *v = cJSON_GetObjectItem(o, "value");
    assert_string_equal(cJSON_GetObjectItem(v, "type")->valuestring, "file");
    cJSON_Delete(o);
    o = ok_call(f->t, "stat", "{\"path\":\"alink\"}");
    assert_has(msg_of(o), "symlink");
    assert_has(msg_of(o), "link to src/a.c");
    cJSON_Delete(o);
    bad_call(f->t, "stat", "{\"path\":\"nope\"}", SP_ENOTFOUND, NULL);

    o = ok_call(f->t, "glob", "{\"pattern\":\"**/*.{c,h}\"}");
    assert_string_equal(msg_of(o), "src/a.c\nsrc/b.h\n");
    cJSON_Delete(o);
    o = ok_call(f->t, "glob", "{\"pattern\":\"*.c\",\"path\":\"src\"}");
    assert_has(msg_of(o), "a.c");
    cJSON_Delete(o);
    o = ok_call(f->t, "glob", "{\"pattern\":\"*.zig\"}");
    assert_has(msg_of(o), "no paths match");
    cJSON_Delete(o);
    o = ok_call(f->t, "glob", "{\"pattern\":\"**\",\"limit\":1}");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(o, "truncated")));
    cJSON_Delete(o);

    o = ok_call(f->t, "grep", "{\"pattern\":\"todo\",\"case_insensitive\":true}");
    assert_string_equal(msg_of(o), "README.md:1:todo: docs\nsrc/a.c:2:// TODO fix\n");
    cJSON_Delete(o);
    o = ok_call(f->t, "grep", "{\"pattern\":\"TODO\",\"include\":\"*.md\"}");
    assert_has(msg_of(o), "no matches");
    cJSON_Delete(o);
    o = ok_call(f->t, "grep", "{\"pattern\":\"(1+1)\",\"fixed_string\":true}");
    assert_string_equal(msg_of(o), "src/b.h:1:#define B (1+1)\n");
    cJSON_Delete(o);
    o = ok_call(f->t, "grep", "{\"pattern\":\"[a-z]\",\"limit\":1}");
    assert_has(msg_of(o), "stopped after 1 match");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(o, "truncated")));
    cJSON_Delete(o);
    bad_call(f->t, "grep", "{\"pattern\":\"(\"}", SP_EINVAL, "fixed_string");
    bad_call(f->t, "grep", "{\"pattern\":\"x\",\"path\":\"../outside\"}", SP_EESCAPE, NULL);
}

/* --------------------------------------------------------- apply_patch -- */

static void test_apply_patch(void **state)
{
    fixture *f = *state;
    if (!sp_tools_has(f->t, "apply_patch"))
        skip();
    tu_write(f->dir, "p.txt", "one\ntwo\nthree\n", 0644);
    cJSON *o = ok_call(f->t, "apply_patch",
                       "{\"patch\":\"*** Begin Patch\\n*** Update File: p.txt\\n@@\\n one\\n-two\\n"
                       "+2\\n*** Add File: n/new.txt\\n+new\\n*** End Patch\\n\"}");
    assert_has(msg_of(o), "update p.txt");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "changes")), 2);
    cJSON_Delete(o);
    assert_file(f->dir, "p.txt", "one\n2\nthree\n");
    assert_file(f->dir, "n/new.txt", "new\n");

    /* The freeform form takes the patch text itself. */
    const char *patch = "*** Begin Patch\n*** Delete File: n/new.txt\n*** End Patch\n";
    char *res = NULL;
    assert_int_equal(sp_tools_call_freeform(&res, f->t, "apply_patch", patch, strlen(patch)), 0);
    free(res);
    assert_false(tu_exists(f->dir, "n/new.txt"));
    assert_int_equal(sp_tools_call_freeform(&res, f->t, "read_file", "x", 1), SP_EINVAL);
    free(res);

    /* All or nothing. */
    bad_call(f->t, "apply_patch",
             "{\"patch\":\"*** Begin Patch\\n*** Add File: ok.txt\\n+x\\n*** Update File: p.txt\\n"
             "@@\\n-nothere\\n+y\\n*** End Patch\\n\"}",
             SP_EINVAL, "nothing was changed");
    assert_false(tu_exists(f->dir, "ok.txt"));
    bad_call(f->t, "apply_patch",
             "{\"patch\":\"*** Begin Patch\\n*** Add File: ../x\\n+x\\n"
             "*** End Patch\\n\"}",
             SP_EESCAPE, NULL);
    bad_call(f->t, "apply_patch", "{\"patch\":\"garbage\"}", SP_EINVAL, NULL);
}

/* ------------------------------------------------------------- binary -- */

/* The error object of a failed call: code and reason. */
static void assert_error(const cJSON *o, const char *code, const char *reason)
{
    const cJSON *e = cJSON_GetObjectItem(o, "error");
    assert_true(cJSON_IsObject(e));
    assert_string_equal(cJSON_GetObjectItem(e, "code")->valuestring, code);
    assert_string_equal(cJSON_GetObjectItem(e, "reason")->valuestring, reason);
}

static void test_binary(void **state)
{
    fixture *f = *state;
    /* The first bytes of a real PNG: signature and the IHDR chunk. */
    static const unsigned char png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0,   0, 0,
                                        13,   'I', 'H', 'D', 'R',  0,    0,    0,    1,   0, 0,
                                        0,    1,   8,   6,   0,    0,    0,    0x1f, 0x15};
    tu_write_n(f->dir, "img.png", png, sizeof(png), 0644);
    cJSON *o = ok_call(f->t, "read_file", "{\"path\":\"img.png\"}");
    cJSON *v = cJSON_GetObjectItem(o, "value");
    assert_string_equal(cJSON_GetObjectItem(v, "mode")->valuestring, "binary");
    assert_string_equal(cJSON_GetObjectItem(v, "mime")->valuestring, "image/png");
    assert_string_equal(cJSON_GetObjectItem(v, "encoding")->valuestring, "base64");
    assert_int_equal(cJSON_GetObjectItem(v, "size")->valueint, sizeof(png));
    /* The same bytes come back through write_file's base64. */
    char *args = NULL;
    assert_true(asprintf(&args,
                         "{\"path\":\"copy.png\",\"encoding\":\"base64\",\"content\":\"%s\"}",
                         cJSON_GetObjectItem(v, "base64")->valuestring) > 0);
    cJSON_Delete(o);
    o = ok_call(f->t, "write_file", args);
    free(args);
    assert_int_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(o, "value"), "bytes_written")->valueint,
        sizeof(png));
    cJSON_Delete(o);
    size_t n = 0;
    char *got = tu_read(f->dir, "copy.png", &n);
    assert_int_equal(n, sizeof(png));
    assert_memory_equal(got, png, sizeof(png));
    free(got);

    /* Sniffing: magic numbers, else octet-stream; Latin-1 text is not UTF-8. */
    static const struct {
        const char *bytes;
        size_t len;
        const char *mime;
    } sniff[] = {
        {"\xff\xd8\xff\xe0\0\x10JFIF", 10, "image/jpeg"},
        {"GIF89a\1\0\1\0", 10, "image/gif"},
        {"RIFF\x24\0\0\0WEBPVP8 ", 16, "image/webp"},
        {"%PDF-1.7\n\xe2\xe3", 11, "application/pdf"},
        {"PK\3\4\x14\0\0\0", 8, "application/zip"},
        {"\x1f\x8b\x08\0\0\0\0\0", 8, "application/gzip"},
        {"\0asm\1\0\0\0", 8, "application/wasm"},
        {"caf\xe9 au lait\n", 13, "application/octet-stream"},
    };
    for (size_t i = 0; i < sizeof(sniff) / sizeof(sniff[0]); i++) {
        tu_write_n(f->dir, "s.bin", sniff[i].bytes, sniff[i].len, 0644);
        o = ok_call(f->t, "read_file", "{\"path\":\"s.bin\"}");
        assert_string_equal(
            cJSON_GetObjectItem(cJSON_GetObjectItem(o, "value"), "mime")->valuestring,
            sniff[i].mime);
        cJSON_Delete(o);
    }

    /* Strict base64: a bad one writes nothing and keeps the old file. */
    const char *bad[] = {"QUJD\n", "QUJ", "QU=D", "QR==", "QUJD====", "QUJ*", "Q===", NULL};
    tu_write(f->dir, "keep.bin", "old", 0644);
    for (size_t i = 0; bad[i]; i++) {
        char *q = NULL;
        cJSON *js = cJSON_CreateString(bad[i]);
        char *lit = cJSON_PrintUnformatted(js);
        cJSON_Delete(js);
        assert_true(asprintf(&q, "{\"path\":\"keep.bin\",\"encoding\":\"base64\",\"content\":%s}",
                             lit) > 0);
        free(lit);
        bad_call(f->t, "write_file", q, SP_EINVAL, "not valid base64");
        free(q);
        bad_call(f->t, "write_file",
                 "{\"path\":\"new.bin\",\"encoding\":\"base64\",\"content\":\"%%%%\"}", SP_EINVAL,
                 "nothing was written");
    }
    assert_file(f->dir, "keep.bin", "old");
    assert_false(tu_exists(f->dir, "new.bin"));
    o = ok_call(f->t, "write_file",
                "{\"path\":\"e.bin\",\"encoding\":\"base64\",\"content\":\"\"}");
    cJSON_Delete(o);
    assert_file(f->dir, "e.bin", "");
    bad_call(f->t, "write_file", "{\"path\":\"x\",\"encoding\":\"hex\",\"content\":\"00\"}",
             SP_EINVAL, "encoding");

    /* Text edits of a binary file say what works instead. */
    bad_call(f->t, "edit_file",
             "{\"path\":\"img.png\",\"old_string\":\"PNG\",\"new_string\":\"X\"}", SP_EINVAL,
             "write_file with encoding 'base64' replaces it whole");
    cJSON *r = call_ex(f->t, "insert", "{\"path\":\"img.png\",\"line\":0,\"text\":\"x\"}", NULL);
    assert_error(r, "invalid", "not_text");
    assert_true(strstr(msg_of(r), "sp_fs_read_bytes") == NULL);
    cJSON_Delete(r);
}

static void test_limits(void **state)
{
    fixture *f = *state;
    sp_tools_opts o = SP_TOOLS_OPTS_INIT;
    o.max_read_bytes = 16;
    o.max_write_bytes = 8;
    sp_tools *t = NULL;
    assert_int_equal(sp_tools_open_root(&t, f->dir, &o, NULL), 0);
    tu_write_n(f->dir, "big.bin", "\0\1\2\3\4\5\6\7\0\1\2\3\4\5\6\7\0", 17, 0644);
    tu_write_n(f->dir, "ok.bin", "\0\1\2\3\4\5\6\7\0\1\2\3\4\5\6\7", 16, 0644);
    cJSON *r = call_ex(t, "read_file", "{\"path\":\"big.bin\"}", NULL);
    assert_error(r, "too_big", "too_large");
    assert_has(msg_of(r), "over the read limit of 16 bytes");
    cJSON_Delete(r);
    cJSON_Delete(ok_call(t, "read_file", "{\"path\":\"ok.bin\"}"));
    r = call_ex(t, "write_file", "{\"path\":\"w.txt\",\"content\":\"123456789\"}", NULL);
    assert_error(r, "too_big", "too_large");
    cJSON_Delete(r);
    assert_false(tu_exists(f->dir, "w.txt"));
    cJSON_Delete(ok_call(t, "write_file", "{\"path\":\"w.txt\",\"content\":\"12345678\"}"));
    sp_tools_free(t);

    /* Version 1 of the options (before the limits) is still accepted;
     * an unknown version is not. */
    sp_tools_opts v1 = SP_TOOLS_OPTS_INIT;
    v1.version = 1;
    v1.max_text_bytes = 4096;
    assert_int_equal(sp_tools_open_root(&t, f->dir, &v1, NULL), 0);
    assert_int_equal(t->opts.max_read_bytes, 4u << 20);
    assert_int_equal(t->opts.max_text_bytes, 4096);
    assert_false(t->opts.no_stale_check);
    sp_tools_free(t);
    v1.version = SP_TOOLS_OPTS_VERSION + 1;
    sp_error *err = NULL;
    assert_int_equal(sp_tools_open_root(&t, f->dir, &v1, &err), SP_EINVAL);
    sp_error_free(err);
}

/* ------------------------------------------------------------ reasons -- */

static void test_reasons(void **state)
{
    fixture *f = *state;
    tu_mkdir(f->dir, "d");
    tu_mkdir(f->dir, "d/sub");
    tu_write(f->dir, "d/sub/x.txt", "x\n", 0644);
    tu_write(f->dir, "file.txt", "f\n", 0644);
    struct {
        const char *tool, *args, *code, *reason;
    } cases[] = {
        {"read_file", "{\"path\":\"d\"}", "invalid", "is_directory"},
        {"read_file", "{\"path\":\"file.txt/x\"}", "invalid", "not_directory"},
        {"delete", "{\"path\":\"d\"}", "invalid", "not_empty"},
        {"write_file", "{\"path\":\"file.txt\",\"content\":\"\",\"mode\":\"create\"}", "exists",
         "exists"},
        {"mkdir", "{\"path\":\"file.txt\"}", "exists", "exists"},
        {"edit_file", "{\"path\":\"d/sub/x.txt\",\"old_string\":\"q\",\"new_string\":\"r\"}",
         "not_found", "none"},
        {"read_file", "{\"path\":\"nope\"}", "not_found", "none"},
        {"apply_patch", "{\"patch\":\"*** Begin Patch\\n*** Frobnicate: x\\n*** End Patch\\n\"}",
         "invalid", "patch_parse"},
        {"apply_patch",
         "{\"patch\":\"*** Begin Patch\\n*** Update File: file.txt\\n@@\\n-absent\\n+y\\n"
         "*** End Patch\\n\"}",
         "invalid", "patch_conflict"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (!sp_tools_has(f->t, cases[i].tool))
            continue;
        int r = 0;
        cJSON *o = call_ex(f->t, cases[i].tool, cases[i].args, &r);
        assert_int_not_equal(r, 0);
        const cJSON *e = cJSON_GetObjectItem(o, "error");
        const char *code = cJSON_GetObjectItem(e, "code")->valuestring;
        const char *reason = cJSON_GetObjectItem(e, "reason")->valuestring;
        if (strcmp(code, cases[i].code) != 0 || strcmp(reason, cases[i].reason) != 0)
            fail_msg("%s %s: want %s/%s, got %s/%s: %s", cases[i].tool, cases[i].args,
                     cases[i].code, cases[i].reason, code, reason, msg_of(o));
        cJSON_Delete(o);
    }
}

/* -------------------------------------------------------------- stale -- */

/* Change a file behind the tools' back as the container would: same size
 * too, so only the times tell. */
static void touch_behind(const char *dir, const char *rel, const char *content)
{
    char *p = tu_join(dir, rel);
    struct timespec ts[2] = {{0, UTIME_OMIT}, {1000000000, 123456789}};
    tu_write(dir, rel, content, 0644);
    assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
    free(p);
}

static void test_stale(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "s.txt", "one\ntwo\n", 0644);
    /* Never read in this session: changes are allowed (see tools_stale.c). */
    cJSON_Delete(ok_call(f->t, "edit_file",
                         "{\"path\":\"s.txt\",\"old_string\":\"one\",\"new_string\":\"1\"}"));
    /* The tool's own write is what the model knows: a second edit is fine. */
    cJSON_Delete(ok_call(f->t, "edit_file",
                         "{\"path\":\"s.txt\",\"old_string\":\"two\",\"new_string\":\"2\"}"));

    cJSON_Delete(ok_call(f->t, "read_file", "{\"path\":\"s.txt\"}"));
    touch_behind(f->dir, "s.txt", "1\n3\n");
    const char *edits[][2] = {
        {"edit_file", "{\"path\":\"s.txt\",\"old_string\":\"1\",\"new_string\":\"one\"}"},
        {"insert", "{\"path\":\"s.txt\",\"line\":0,\"text\":\"zero\"}"},
        {"write_file", "{\"path\":\"s.txt\",\"content\":\"new\\n\"}"},
        {"apply_patch", "{\"patch\":\"*** Begin Patch\\n*** Update File: s.txt\\n@@\\n-1\\n+one\\n"
                        "*** End Patch\\n\"}"},
    };
    for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
        if (!sp_tools_has(f->t, edits[i][0]))
            continue;
        int r = 0;
        cJSON *o = call_ex(f->t, edits[i][0], edits[i][1], &r);
        assert_int_not_equal(r, 0);
        assert_error(o, "error", "stale");
        assert_has(msg_of(o), "s.txt changed on disk since you last read it");
        assert_has(msg_of(o), "read it again with read_file");
        cJSON_Delete(o);
        assert_file(f->dir, "s.txt", "1\n3\n");
    }
    /* A patch that applies in a folder (`cd sub &&`, Codex's heredoc form)
     * is checked against the files it names there. */
    tu_mkdir(f->dir, "sub");
    tu_write(f->dir, "sub/c.txt", "a\n", 0644);
    cJSON_Delete(ok_call(f->t, "read_file", "{\"path\":\"sub/c.txt\"}"));
    touch_behind(f->dir, "sub/c.txt", "b\n");
    {
        int r = 0;
        cJSON *o = call_ex(f->t, "apply_patch",
                           "{\"input\":\"cd sub && apply_patch <<'EOF'\\n*** Begin Patch\\n"
                           "*** Update File: c.txt\\n@@\\n-b\\n+c\\n*** End Patch\\nEOF\\n\"}",
                           &r);
        assert_int_not_equal(r, 0);
        assert_error(o, "error", "stale");
        cJSON_Delete(o);
        assert_file(f->dir, "sub/c.txt", "b\n");
    }
    /* Append and create do not build on the old content. */
    cJSON_Delete(ok_call(f->t, "write_file",
                         "{\"path\":\"s.txt\",\"content\":\"4\\n\",\"mode\":\"append\"}"));
    /* Reading again makes the edit possible. */
    touch_behind(f->dir, "s.txt", "1\n3\n");
    cJSON_Delete(ok_call(f->t, "read_file", "{\"path\":\"s.txt\",\"limit\":1}"));
    cJSON_Delete(ok_call(f->t, "edit_file",
                         "{\"path\":\"s.txt\",\"old_string\":\"3\",\"new_string\":\"2\"}"));
    assert_file(f->dir, "s.txt", "1\n2\n");

    /* Replaced by another file of the same size and times: the inode tells. */
    cJSON_Delete(ok_call(f->t, "read_file", "{\"path\":\"s.txt\"}"));
    tu_write(f->dir, "s2.txt", "1\n2\n", 0644);
    char *a = tu_join(f->dir, "s2.txt"), *b = tu_join(f->dir, "s.txt");
    assert_int_equal(rename(a, b), 0);
    free(a);
    free(b);
    bad_call(f->t, "insert", "{\"path\":\"s.txt\",\"line\":-1,\"text\":\"x\"}", SP_ERROR,
             "replaced by another file");

    /* A deleted file has no record: write_file creates it again. */
    cJSON_Delete(ok_call(f->t, "read_file", "{\"path\":\"s.txt\"}"));
    cJSON_Delete(ok_call(f->t, "delete", "{\"path\":\"s.txt\"}"));
    tu_write(f->dir, "s.txt", "container\n", 0644);
    cJSON_Delete(ok_call(f->t, "write_file", "{\"path\":\"s.txt\",\"content\":\"mine\\n\"}"));

    /* Binary reads count as reads. */
    tu_write_n(f->dir, "b.bin", "\0\1", 2, 0644);
    cJSON_Delete(ok_call(f->t, "read_file", "{\"path\":\"b.bin\"}"));
    tu_write_n(f->dir, "b.bin", "\0\1\2", 3, 0644);
    bad_call(f->t, "write_file",
             "{\"path\":\"b.bin\",\"encoding\":\"base64\",\"content\":\"AA==\"}", SP_ERROR,
             "size changed");

    /* The option turns it off. */
    sp_tools_opts o = SP_TOOLS_OPTS_INIT;
    o.no_stale_check = true;
    sp_tools *t = NULL;
    assert_int_equal(sp_tools_open_root(&t, f->dir, &o, NULL), 0);
    cJSON_Delete(ok_call(t, "read_file", "{\"path\":\"b.bin\"}"));
    tu_write_n(f->dir, "b.bin", "\0\1\2\3", 4, 0644);
    cJSON_Delete(ok_call(t, "write_file",
                         "{\"path\":\"b.bin\",\"encoding\":\"base64\",\"content\":\"AA==\"}"));
    sp_tools_free(t);
}

struct stale_thread {
    sp_tools *t;
    int id;
    int failures;
};

static void *stale_worker(void *arg)
{
    struct stale_thread *w = arg;
    char name[32];
    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof(name), "t%d_%d.txt", w->id, i % 40);
        tools_stale_note(w->t, w->t->fs, name);
        tool_call c = {0};
        if (tools_stale_check(w->t, w->t->fs, name, name, &c) != 0)
            w->failures++;
        free(c.error);
        if (i % 7 == 0)
            tools_stale_forget(w->t, w->t->fs, name);
    }
    return NULL;
}

/* The record map is shared by concurrent calls (the MCP server's threads). */
static void test_stale_threads(void **state)
{
    fixture *f = *state;
    for (int id = 0; id < 4; id++)
        for (int i = 0; i < 40; i++) {
            char name[32];
            snprintf(name, sizeof(name), "t%d_%d.txt", id, i);
            tu_write(f->dir, name, "x\n", 0644);
        }
    pthread_t th[4];
    struct stale_thread w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct stale_thread){f->t, i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, stale_worker, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].failures, 0);
    }
    assert_true(f->t->n_stale <= 160);
    /* And a change behind the back is still seen afterwards. */
    cJSON_Delete(ok_call(f->t, "read_file", "{\"path\":\"t0_1.txt\"}"));
    tu_write(f->dir, "t0_1.txt", "xy\n", 0644);
    bad_call(f->t, "edit_file", "{\"path\":\"t0_1.txt\",\"old_string\":\"x\",\"new_string\":\"y\"}",
             SP_ERROR, "changed on disk");
}

/* --------------------------------------------------------------- stat -- */

static void test_stat_fields(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "st.txt", "hello\n", 0640);
    char *p = tu_join(f->dir, "st.txt");
    /* A time whose nanoseconds a double cannot hold. */
    struct timespec ts[2] = {{1795600000, 123456789}, {1795600000, 987654321}};
    assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
    free(p);
    char *res = NULL;
    assert_int_equal(sp_tools_call(&res, f->t, "stat", "{\"path\":\"st.txt\"}", 17), 0);
    /* Exact integers in the result text, and after a re-parse. */
    assert_has(res, "\"mtime_ns\":1795600000987654321");
    assert_has(res, "\"atime_ns\":1795600000123456789");
    cJSON *o = sp_json_parse_exact(res, strlen(res));
    free(res);
    char *again = cJSON_PrintUnformatted(o);
    assert_has(again, "\"mtime_ns\":1795600000987654321");
    free(again);
    cJSON *v = cJSON_GetObjectItem(o, "value");
    assert_string_equal(cJSON_GetObjectItem(v, "permissions")->valuestring, "rw-r-----");
    assert_string_equal(cJSON_GetObjectItem(v, "modified")->valuestring, "2026-11-25T09:46:40Z");
    assert_string_equal(cJSON_GetObjectItem(v, "accessed")->valuestring, "2026-11-25T09:46:40Z");
    assert_true(cJSON_IsString(cJSON_GetObjectItem(v, "changed")));
    const cJSON *created = cJSON_GetObjectItem(v, "created");
    assert_true(cJSON_IsString(created) || cJSON_IsNull(created));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(v, "readable")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(v, "writable")));
    cJSON_Delete(o);

    /* Plain cJSON would have rounded: the reason for sp_json_parse_exact. */
    const char *text =
        "{\"a\":[1795600000987654321,-9007199254740993,1234567890123456,2.5e30,7],\"s\":\"9\"}";
    o = sp_json_parse_exact(text, strlen(text));
    again = cJSON_PrintUnformatted(o);
    assert_string_equal(again,
                        "{\"a\":[1795600000987654321,-9007199254740993,1234567890123456,2.5e+30,7],"
                        "\"s\":\"9\"}");
    free(again);
    cJSON_Delete(o);

    /* Read-only: nothing is writable. */
    sp_tools_opts ro = SP_TOOLS_OPTS_INIT;
    ro.read_only = true;
    sp_tools *t = NULL;
    assert_int_equal(sp_tools_open_root(&t, f->dir, &ro, NULL), 0);
    o = ok_call(t, "stat", "{\"path\":\"st.txt\"}");
    assert_false(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "value"), "writable")));
    cJSON_Delete(o);
    sp_tools_free(t);
}

/* Absolute symlinks the container made resolve as the container sees them. */
static void test_container_symlinks(void **state)
{
    fixture *f = *state;
    tu_mkdir(f->dir, "lib");
    tu_write(f->dir, "lib/x.txt", "in lib\n", 0644);
    tu_symlink("/workspace/lib/x.txt", f->dir, "y");
    tu_symlink("/usr/lib/os-release", f->dir, "img");
    cJSON *o = ok_call(f->t, "read_file", "{\"path\":\"y\"}");
    assert_has(msg_of(o), "L1: in lib");
    cJSON_Delete(o);
    o = ok_call(f->t, "stat", "{\"path\":\"img\"}");
    cJSON *v = cJSON_GetObjectItem(o, "value");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(v, "target_in_image")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(v, "target_escapes")));
    assert_has(msg_of(o), "link to /usr/lib/os-release (in the container's image");
    cJSON_Delete(o);
    o = ok_call(f->t, "stat", "{\"path\":\"y\"}");
    v = cJSON_GetObjectItem(o, "value");
    assert_false(cJSON_IsTrue(cJSON_GetObjectItem(v, "target_in_image")));
    assert_false(cJSON_IsTrue(cJSON_GetObjectItem(v, "target_escapes")));
    /* Access is what a read or write through the link reaches. */
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(v, "readable")));
    assert_has(msg_of(o), "readable and writable, link to /workspace/lib/x.txt");
    cJSON_Delete(o);
    bad_call(f->t, "read_file", "{\"path\":\"img\"}", SP_EESCAPE,
             "container's image: /usr/lib/os-release; only targets under /workspace/ are "
             "followed); the file tools reach the workspace only");
    bad_call(f->t, "write_file", "{\"path\":\"img\",\"content\":\"x\"}", SP_EESCAPE,
             "container's image");
    /* A write through a /workspace link lands inside. */
    cJSON_Delete(ok_call(f->t, "write_file", "{\"path\":\"y\",\"content\":\"new\\n\"}"));
    assert_file(f->dir, "lib/x.txt", "new\n");
}

/* ---------------------------------------------------------- snapshots -- */

static void test_snapshots(void **state)
{
    fixture *f = *state;
    char *store = tu_join(f->outside, "store.git");
    sp_tools_opts o = SP_TOOLS_OPTS_INIT;
    o.snapshot_store = store;
    sp_tools *t = NULL;
    assert_int_equal(sp_tools_open_root(&t, f->dir, &o, NULL), 0);
    assert_true(sp_tools_has(t, "snapshot"));
    tu_write(f->dir, "keep.txt", "v1\n", 0644);
    cJSON *r = ok_call(t, "list_snapshots", NULL);
    assert_has(msg_of(r), "no snapshots yet");
    cJSON_Delete(r);
    r = ok_call(t, "snapshot", "{\"tag\":\"first\"}");
    assert_has(msg_of(r), "(first)");
    cJSON_Delete(r);
    tu_write(f->dir, "keep.txt", "v2\n", 0644);
    tu_write(f->dir, "later.txt", "new\n", 0644);
    r = ok_call(t, "restore", "{\"snapshot\":\"first\"}");
    assert_has(msg_of(r), "deleted later.txt");
    assert_has(msg_of(r), "modified keep.txt");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r, "changes")), 2);
    cJSON_Delete(r);
    assert_file(f->dir, "keep.txt", "v1\n");
    assert_false(tu_exists(f->dir, "later.txt"));
    r = ok_call(t, "list_snapshots", "{}");
    assert_has(msg_of(r), "(first)");
    cJSON_Delete(r);
    bad_call(t, "restore", "{\"snapshot\":\"nosuch\"}", SP_ENOTFOUND, "list_snapshots");
    bad_call(t, "snapshot", "{\"tag\":\"\"}", SP_EINVAL, NULL);
    sp_tools_free(t);

    /* A configuration can leave them out. */
    const char *off[] = {"snapshot", "restore", "list_snapshots", NULL};
    o.disabled = off;
    assert_int_equal(sp_tools_open_root(&t, f->dir, &o, NULL), 0);
    assert_false(sp_tools_has(t, "snapshot"));
    bad_call(t, "snapshot", NULL, SP_EDENIED, "disabled");
    sp_tools_free(t);
    free(store);
}

/* ------------------------------------------------------ approval policy -- */

struct asked {
    int n;
    sp_tools_verdict answer;
    char tool[64];
    char summary[256];
    sp_tool_tier tier;
};

static sp_tools_verdict approver(void *ud, const sp_tools_approval_request *req)
{
    struct asked *a = ud;
    a->n++;
    snprintf(a->tool, sizeof(a->tool), "%s", req->tool);
    snprintf(a->summary, sizeof(a->summary), "%s", req->summary);
    a->tier = req->tier;
    assert_non_null(req->args_json);
    return a->answer;
}

static void test_approval(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "x.txt", "x\n", 0644);
    struct asked a = {0};
    sp_tools_opts o = SP_TOOLS_OPTS_INIT;
    o.approval = SP_APPROVAL_UNTRUSTED;
    o.approve = approver;
    o.approve_userdata = &a;
    sp_tools *t = NULL;
    assert_int_equal(sp_tools_open_root(&t, f->dir, &o, NULL), 0);

    /* untrusted: safe tools run without asking. */
    cJSON *r = ok_call(t, "read_file", "{\"path\":\"x.txt\"}");
    cJSON_Delete(r);
    assert_int_equal(a.n, 0);
    /* Cautious and dangerous ones ask; a denial changes nothing. */
    a.answer = SP_VERDICT_DENY;
    bad_call(t, "edit_file", "{\"path\":\"x.txt\",\"old_string\":\"x\",\"new_string\":\"y\"}",
             SP_EDENIED, "the user denied");
    assert_int_equal(a.n, 1);
    assert_string_equal(a.tool, "edit_file");
    assert_string_equal(a.summary, "edit_file: x.txt");
    assert_int_equal(a.tier, SP_TOOL_DANGEROUS); /* it overwrites: destructiveHint */
    assert_file(f->dir, "x.txt", "x\n");
    a.answer = SP_VERDICT_ALLOW;
    r = ok_call(t, "write_file", "{\"path\":\"y.txt\",\"content\":\"multi\\nline\"}");
    cJSON_Delete(r);
    assert_int_equal(a.n, 2);
    assert_int_equal(a.tier, SP_TOOL_DANGEROUS);
    /* Bad arguments are refused before anyone is asked. */
    bad_call(t, "write_file", "{\"path\":\"y.txt\"}", SP_EINVAL, NULL);
    assert_int_equal(a.n, 2);
    /* "always" is remembered per tool. */
    a.answer = SP_VERDICT_ALLOW_ALWAYS;
    r = ok_call(t, "mkdir", "{\"path\":\"m1\"}");
    cJSON_Delete(r);
    a.answer = SP_VERDICT_DENY;
    r = ok_call(t, "mkdir", "{\"path\":\"m2\"}");
    cJSON_Delete(r);
    assert_int_equal(a.n, 3);
    a.answer = SP_VERDICT_UNAVAILABLE;
    bad_call(t, "delete", "{\"path\":\"y.txt\"}", SP_EDENIED, "nobody can be asked");
    sp_tools_free(t);

    /* on-request: cautious (additive) tools run, dangerous ones ask. */
    a.n = 0;
    a.answer = SP_VERDICT_DENY;
    o.approval = SP_APPROVAL_ON_REQUEST;
    assert_int_equal(sp_tools_open_root(&t, f->dir, &o, NULL), 0);
    r = ok_call(t, "mkdir", "{\"path\":\"m3\"}");
    cJSON_Delete(r);
    assert_int_equal(a.n, 0);
    bad_call(t, "edit_file", "{\"path\":\"x.txt\",\"old_string\":\"x\",\"new_string\":\"z\"}",
             SP_EDENIED, NULL);
    assert_int_equal(a.n, 1);
    a.n = 0;
    bad_call(t, "delete", "{\"path\":\"x.txt\"}", SP_EDENIED, NULL);
    assert_int_equal(a.n, 1);
    sp_tools_free(t);

    /* A policy that asks, and nobody to ask. */
    o.approve = NULL;
    o.approval = SP_APPROVAL_UNTRUSTED;
    assert_int_equal(sp_tools_open_root(&t, f->dir, &o, NULL), 0);
    bad_call(t, "insert", "{\"path\":\"x.txt\",\"line\":0,\"text\":\"a\"}", SP_EDENIED,
             "'untrusted' approval policy");
    sp_tools_free(t);

    /* never (the default) asks nobody. */
    o.approve = approver;
    o.approval = SP_APPROVAL_NEVER;
    a.n = 0;
    assert_int_equal(sp_tools_open_root(&t, f->dir, &o, NULL), 0);
    r = ok_call(t, "delete", "{\"path\":\"x.txt\"}");
    cJSON_Delete(r);
    assert_int_equal(a.n, 0);
    sp_tools_free(t);

    sp_tools_approval p;
    assert_int_equal(sp_tools_approval_parse(&p, "on-request"), 0);
    assert_int_equal(p, SP_APPROVAL_ON_REQUEST);
    assert_true(sp_tools_approval_parse(&p, "sometimes") < 0);
}

/* ------------------------------------------------------------- events -- */

struct seen {
    int n;
    char lines[8][2048];
    bool end_ok[8];
    int end_code[8];
};

static void on_event(void *ud, const sp_tools_event *ev)
{
    struct seen *s = ud;
    if (s->n >= 8)
        return;
    assert_non_null(ev->json);
    snprintf(s->lines[s->n], sizeof(s->lines[0]), "%s", ev->json);
    s->end_ok[s->n] = ev->ok;
    s->end_code[s->n] = ev->code;
    if (strcmp(ev->event, "end") == 0)
        assert_true(ev->duration_ms >= 0);
    s->n++;
}

static void test_events(void **state)
{
    fixture *f = *state;
    struct seen s = {0};
    char *log = tu_join(f->outside, "events.jsonl");
    sp_tools_opts o = SP_TOOLS_OPTS_INIT;
    o.on_event = on_event;
    o.event_userdata = &s;
    o.events_path = log;
    sp_tools *t = NULL;
    assert_int_equal(sp_tools_open_root(&t, f->dir, &o, NULL), 0);
    cJSON *r = ok_call(t, "write_file", "{\"path\":\"ev.txt\",\"content\":\"12345\"}");
    cJSON_Delete(r);
    bad_call(t, "read_file", "{\"path\":\"nope.txt\"}", SP_ENOTFOUND, NULL);
    sp_tools_free(t);

    assert_int_equal(s.n, 4);
    assert_has(s.lines[0], "\"event\":\"start\"");
    assert_has(s.lines[0], "\"tool\":\"write_file\"");
    assert_has(s.lines[0], "\"paths\":[\"ev.txt\"]");
    assert_has(s.lines[0], "\"call\":1");
    assert_has(s.lines[1], "\"event\":\"end\"");
    assert_has(s.lines[1], "\"ok\":true");
    assert_has(s.lines[1], "\"code\":\"ok\"");
    assert_has(s.lines[1], "\"duration_ms\":");
    assert_has(s.lines[1], "\"truncated\":false");
    assert_true(s.end_ok[1]);
    assert_has(s.lines[3], "\"ok\":false");
    assert_has(s.lines[3], "\"code\":\"not_found\"");
    assert_has(s.lines[3], "\"call\":2");
    assert_has(s.lines[3], "\"error\":");
    assert_int_equal(s.end_code[3], SP_ENOTFOUND);

    /* The same lines, one per line, in the events file. */
    size_t len = 0;
    char *text = tu_read(f->outside, "events.jsonl", &len);
    assert_non_null(text);
    int lines = 0;
    for (char *p = text; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 4);
    char *first = strndup(text, strcspn(text, "\n"));
    assert_string_equal(first, s.lines[0]);
    free(first);
    free(text);
    free(log);
}

/* --------------------------------------------------------------- caps -- */

static char *cap_text(const char *s, size_t len, size_t max_bytes, size_t max_lines, size_t *n,
                      bool *cut)
{
    sp_capbuf c;
    sp_capbuf_init(&c, max_bytes, max_lines);
    sp_capbuf_feed(&c, s, len);
    char *t = sp_capbuf_text(&c, n, cut);
    sp_capbuf_dispose(&c);
    return t;
}

static void test_caps(void **state)
{
    fixture *f = *state;
    /* The final cap (base's sp_capbuf, as the dispatcher uses it) keeps a
     * head and a tail with a marker. */
    char buf[1000];
    for (int i = 0; i < 100; i++)
        memcpy(buf + i * 10, "123456789\n", 10);
    bool cut = false;
    size_t n = 0;
    char *c = cap_text(buf, sizeof(buf), 100, 1000, &n, &cut);
    assert_true(cut);
    assert_has(c, "[... ");
    assert_has(c, " bytes, ");
    assert_has(c, " lines omitted ...]\n");
    assert_true(strncmp(c, "123456789\n", 10) == 0);
    assert_true(n < 200);
    assert_string_equal(c + n - 10, "123456789\n");
    free(c);
    c = cap_text(buf, sizeof(buf), 5000, 10, &n, &cut);
    assert_true(cut);
    assert_has(c, "lines omitted");
    free(c);
    c = cap_text("abc", 3, 10, 10, &n, &cut);
    assert_false(cut);
    assert_string_equal(c, "abc");
    free(c);
    /* UTF-8 is never split. */
    char e[301];
    for (int i = 0; i < 150; i++)
        memcpy(e + 2 * i, "\xc3\xa9", 2);
    e[300] = 'x';
    for (size_t max = 64; max < 80; max++) {
        c = cap_text(e, sizeof(e), max, 10, &n, &cut);
        assert_true(cut);
        assert_true(sp_json_utf8_ok(c, n));
        free(c);
    }

    /* A small text cap cuts read_file at a line boundary and says where to go on. */
    char big[20000] = "";
    size_t used = 0;
    for (int i = 1; i <= 1000; i++)
        used += (size_t)snprintf(big + used, sizeof(big) - used, "row %d\n", i);
    tu_write(f->dir, "big.txt", big, 0644);
    sp_tools_opts o = SP_TOOLS_OPTS_INIT;
    o.max_text_bytes = 200;
    sp_tools *t = NULL;
    assert_int_equal(sp_tools_open_root(&t, f->dir, &o, NULL), 0);
    cJSON *r = ok_call(t, "read_file", "{\"path\":\"big.txt\",\"limit\":1000}");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(r, "truncated")));
    assert_has(msg_of(r), "continue with offset=");
    cJSON_Delete(r);
    /* Other answers are cut head-and-tail with the marker. */
    r = ok_call(t, "grep", "{\"pattern\":\"row\",\"limit\":1000}");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(r, "truncated")));
    assert_has(msg_of(r), "lines omitted ...]");
    assert_has(msg_of(r), "big.txt:1000:row 1000");
    cJSON_Delete(r);
    sp_tools_free(t);
}

/* ------------------------------------------------------------- modes -- */

static void test_read_only(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "r.txt", "r\n", 0644);
    sp_tools_opts o = SP_TOOLS_OPTS_INIT;
    o.read_only = true;
    const char *deny[] = {"*.secret", NULL};
    o.deny = deny;
    tu_write(f->dir, "k.secret", "k\n", 0644);
    sp_tools *t = NULL;
    assert_int_equal(sp_tools_open_root(&t, f->dir, &o, NULL), 0);
    assert_false(sp_tools_has(t, "write_file"));
    assert_false(sp_tools_has(t, "apply_patch"));
    assert_true(sp_tools_has(t, "read_file"));
    bad_call(t, "write_file", "{\"path\":\"r.txt\",\"content\":\"x\"}", SP_EREADONLY,
             "write_file is not available: the workspace is read-only");
    cJSON *r = ok_call(t, "read_file", "{\"path\":\"r.txt\"}");
    cJSON_Delete(r);
    bad_call(t, "read_file", "{\"path\":\"k.secret\"}", SP_EDENIED, NULL);
    r = ok_call(t, "list_dir", "{}");
    assert_null(strstr(msg_of(r), "k.secret"));
    cJSON_Delete(r);
    sp_tools_free(t);
}

static void test_unrestricted(void **state)
{
    fixture *f = *state;
    sp_tools_opts o = SP_TOOLS_OPTS_INIT;
    o.fs_mode = SP_FS_MODE_UNRESTRICTED;
    sp_tools *t = NULL;
    assert_int_equal(sp_tools_open_root(&t, f->dir, &o, NULL), 0);
    char *args = NULL;
    assert_true(asprintf(&args, "{\"path\":\"%s/secret.txt\"}", f->outside) > 0);
    cJSON *r = ok_call(t, "read_file", args);
    assert_has(msg_of(r), "L1: secret");
    cJSON_Delete(r);
    free(args);
    /* Relative paths start at the root and may climb out of it. */
    r = ok_call(t, "write_file", "{\"path\":\"../outside/made.txt\",\"content\":\"m\"}");
    assert_has(msg_of(r), "/outside/made.txt");
    cJSON_Delete(r);
    assert_file(f->outside, "made.txt", "m");
    r = ok_call(t, "list_dir", "{\"path\":\"../outside\",\"depth\":1}");
    assert_has(msg_of(r), "made.txt");
    cJSON_Delete(r);
    /* One record per file however it is named: absolute, relative with
     * `..`, or by apply_patch (which works beneath the root). */
    tu_write(f->dir, "u.txt", "u\n", 0644);
    assert_true(asprintf(&args, "{\"path\":\"%s/./u.txt\"}", f->dir) > 0);
    cJSON_Delete(ok_call(t, "read_file", args));
    free(args);
    tu_write(f->dir, "u.txt", "uu\n", 0644);
    bad_call(t, "edit_file",
             "{\"path\":\"../root/u.txt\",\"old_string\":\"u\",\"new_string\":\"v\"}", SP_ERROR,
             "changed on disk");
    if (sp_tools_has(t, "apply_patch"))
        bad_call(t, "apply_patch",
                 "{\"patch\":\"*** Begin Patch\\n*** Update File: u.txt\\n@@\\n-uu\\n+v\\n"
                 "*** End Patch\\n\"}",
                 SP_ERROR, "changed on disk");
    assert_file(f->dir, "u.txt", "uu\n");
    sp_tools_free(t);

    /* restricted (the default) refuses the same. */
    bad_call(f->t, "read_file", "{\"path\":\"/etc/hostname\"}", SP_EESCAPE, NULL);
    assert_int_equal(sp_tools_fs_mode_parse(&o.fs_mode, "restricted"), 0);
    assert_true(sp_tools_fs_mode_parse(&o.fs_mode, "open") < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_specs),
        cmocka_unit_test(test_nul_scanner),
        cmocka_unit_test_setup_teardown(test_context_tools, setup, teardown),
        cmocka_unit_test_setup_teardown(test_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_indentation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edit_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_insert, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_mkdir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stat_glob_grep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_apply_patch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshots, setup, teardown),
        cmocka_unit_test_setup_teardown(test_approval, setup, teardown),
        cmocka_unit_test_setup_teardown(test_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_caps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unrestricted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reasons, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stat_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_container_symlinks, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
