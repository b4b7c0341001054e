/* The list_dir, glob and grep tools' arguments: list_dir's `ignore`,
 * grep's `include` or `glob` (a glob or a list, '!' excludes), `hidden`,
 * `no_ignore`, the hint when only skipped files could have matched, and
 * '!' refused where nothing can be excluded. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools.h"
#include "tools_internal.h"

typedef struct fixture {
    char *base;
    char *dir;
    sp_tools *t;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    f->base = tu_mkdtemp();
    f->dir = tu_join(f->base, "root");
    tu_mkdir(f->base, "root");
    const char *d = f->dir;
    tu_mkdir(d, "node_modules");
    tu_mkdir(d, "node_modules/pkg");
    tu_write(d, "node_modules/pkg/index.js", "needle\n", 0644);
    tu_mkdir(d, "src");
    tu_write(d, "src/app.js", "needle\n", 0644);
    tu_write(d, "src/app.min.js", "needle\n", 0644);
    tu_write(d, ".env", "secret_needle\n", 0644);
    tu_write(d, ".gitignore", "dist/\n", 0644);
    tu_mkdir(d, "dist");
    tu_write(d, "dist/bundle.js", "needle\n", 0644);
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
    free(f->dir);
    free(f->base);
    free(f);
    return 0;
}

/* The message of a call, and whether it succeeded. */
static char *call(fixture *f, const char *tool, const char *args, bool want_ok)
{
    char *res = NULL;
    int r = sp_tools_call(&res, f->t, tool, args, strlen(args));
    assert_non_null(res);
    cJSON *o = cJSON_Parse(res);
    assert_non_null(o);
    if ((r == 0) != want_ok)
        fail_msg("%s %s: %s", tool, args, res);
    char *msg = strdup(cJSON_GetObjectItem(o, "message")->valuestring);
    cJSON_Delete(o);
    free(res);
    return msg;
}

#define HAS(s, sub)                                                                                \
    do {                                                                                           \
        if (!strstr((s), (sub)))                                                                   \
            fail_msg("'%s' not in:\n%s", (sub), (s));                                              \
    } while (0)
#define LACKS(s, sub)                                                                              \
    do {                                                                                           \
        if (strstr((s), (sub)))                                                                    \
            fail_msg("'%s' in:\n%s", (sub), (s));                                                  \
    } while (0)

static void test_list_dir_ignore(void **state)
{
    fixture *f = *state;
    char *m = call(f, "list_dir", "{\"depth\": 3}", true);
    HAS(m, "node_modules/ (not listed)");
    HAS(m, "pass ignore: []");
    LACKS(m, "index.js");
    HAS(m, "app.js");
    free(m);

    m = call(f, "list_dir", "{\"depth\": 3, \"ignore\": []}", true);
    HAS(m, "index.js");
    LACKS(m, "not listed");
    free(m);

    m = call(f, "list_dir", "{\"depth\": 3, \"ignore\": [\"*.min.js\", \"src\"]}", true);
    HAS(m, "index.js");
    HAS(m, "src/ (not listed)");
    LACKS(m, "app.min.js");
    free(m);

    m = call(f, "list_dir", "{\"ignore\": \"node_modules\"}", false);
    HAS(m, "must be an array of globs");
    free(m);
    m = call(f, "list_dir", "{\"ignore\": [3]}", false);
    HAS(m, "must hold strings");
    free(m);
}

static void test_grep_include(void **state)
{
    fixture *f = *state;
    /* rg's defaults: .env (hidden) and dist/ (.gitignore) are skipped. */
    char *m = call(f, "grep", "{\"pattern\": \"needle\"}", true);
    HAS(m, "src/app.js:1:");
    HAS(m, "node_modules/pkg/index.js:1:");
    LACKS(m, ".env");
    LACKS(m, "dist/");
    free(m);

    m = call(f, "grep", "{\"pattern\": \"needle\", \"include\": \"!*.min.js\"}", true);
    HAS(m, "src/app.js:1:");
    LACKS(m, "app.min.js");
    free(m);

    m = call(f, "grep",
             "{\"pattern\": \"needle\", \"include\": [\"*.js\", \"!node_modules\", "
             "\"!*.min.js\"], \"no_ignore\": true}",
             true);
    HAS(m, "src/app.js:1:");
    HAS(m, "dist/bundle.js:1:");
    LACKS(m, "index.js");
    LACKS(m, "min.js");
    free(m);

    m = call(f, "grep", "{\"pattern\": \"secret_needle\"}", true);
    HAS(m, "no matches");
    HAS(m, "hidden or .gitignore'd");
    free(m);
    m = call(f, "grep", "{\"pattern\": \"secret_needle\", \"hidden\": true}", true);
    HAS(m, ".env:1:secret_needle");
    free(m);

    m = call(f, "grep", "{\"pattern\": \"needle\", \"include\": 5}", false);
    HAS(m, "must be a glob or an array of globs");
    free(m);
    m = call(f, "grep", "{\"pattern\": \"needle\", \"include\": [\"!\"]}", false);
    HAS(m, "glob");
    free(m);
}

/* A '!' glob excludes in grep's include and in its `glob` (rg's name for
 * it); glob and list_dir, which cannot exclude, refuse one instead of
 * matching a literal '!' (nothing, silently); '\!' is the literal. */
static void test_bang_globs(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "!keep.js", "needle\n", 0644);
    /* rg's name and rules: with only '!' globs, every other file. */
    char *m = call(f, "grep", "{\"pattern\": \"needle\", \"glob\": \"!*.min.js\"}", true);
    HAS(m, "src/app.js:1:");
    HAS(m, "!keep.js:1:");
    HAS(m, "node_modules/pkg/index.js:1:");
    LACKS(m, "app.min.js");
    free(m);
    m = call(f, "grep", "{\"pattern\": \"needle\", \"glob\": [\"!*.min.js\", \"!src\"]}", true);
    HAS(m, "!keep.js:1:");
    HAS(m, "index.js:1:");
    LACKS(m, "src/app");
    free(m);
    m = call(f, "grep", "{\"pattern\": \"needle\", \"include\": \"\\\\!keep.js\"}", true);
    HAS(m, "!keep.js:1:");
    LACKS(m, "app.js");
    free(m);
    m = call(f, "grep", "{\"pattern\": \"needle\", \"include\": \"*.js\", \"glob\": \"!src\"}",
             false);
    HAS(m, "the same argument");
    free(m);

    m = call(f, "glob", "{\"pattern\": \"!*.js\"}", false);
    HAS(m, "'!*.js' starts with '!'");
    HAS(m, "grep, whose include takes '!' globs");
    free(m);
    m = call(f, "glob", "{\"pattern\": \"\\\\!*\"}", true);
    HAS(m, "!keep.js");
    LACKS(m, "src/");
    free(m);
    m = call(f, "list_dir", "{\"ignore\": [\"build\", \"!*.js\"]}", false);
    HAS(m, "'!*.js' starts with '!'");
    free(m);
    m = call(f, "list_dir", "{\"ignore\": [\"\\\\!keep.js\"]}", true);
    LACKS(m, "keep.js");
    HAS(m, "app.js");
    free(m);
}

static void test_glob_dirs(void **state)
{
    fixture *f = *state;
    char *m = call(f, "glob", "{\"pattern\": \"*/\"}", true);
    HAS(m, "src/");
    HAS(m, "dist/");
    LACKS(m, ".env");
    LACKS(m, ".gitignore");
    free(m);
    m = call(f, "glob", "{\"pattern\": \".*\"}", true);
    HAS(m, ".env");
    HAS(m, ".gitignore");
    free(m);
    /* dotglob: wildcards reach dot names, .git only when spelled. */
    tu_mkdir(f->dir, ".git");
    m = call(f, "glob", "{\"pattern\": \"*\", \"hidden\": true}", true);
    HAS(m, ".env");
    HAS(m, "src/");
    LACKS(m, ".git/");
    free(m);
    m = call(f, "glob", "{\"pattern\": \".g*/\", \"hidden\": true}", true);
    HAS(m, ".git/");
    free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_list_dir_ignore, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grep_include, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bang_globs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_glob_dirs, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
