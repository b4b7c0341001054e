/* sp_fs_list(): the folders it does not enter (the default list, CACHEDIR.TAG,
 * per-call ignore globs), and old callers' options. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandpod/fs.h"

typedef tu_fsfx fixture;
#define setup    tu_fsfx_setup
#define teardown tu_fsfx_teardown

static void tree(const char *d)
{
    tu_mkdir(d, "src");
    tu_write(d, "src/main.c", "x\n", 0644);
    tu_write(d, "src/main.pyc", "x\n", 0644);
    tu_mkdir(d, "node_modules");
    tu_mkdir(d, "node_modules/pkg");
    tu_write(d, "node_modules/pkg/index.js", "x\n", 0644);
    tu_mkdir(d, ".git");
    tu_write(d, ".git/HEAD", "x\n", 0644);
    tu_mkdir(d, "src/__pycache__");
    tu_write(d, "src/__pycache__/m.pyc", "x\n", 0644);
    tu_mkdir(d, "target");
    tu_write(d, "target/CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n# cargo\n",
             0644);
    tu_write(d, "target/out.bin", "x\n", 0644);
    tu_mkdir(d, "faketag");
    tu_write(d, "faketag/CACHEDIR.TAG", "not a signature\n", 0644);
    tu_write(d, "faketag/kept.txt", "x\n", 0644);
    tu_write(d, "venv", "a file named like a skipped folder\n", 0644);
}

static sp_fs_entries *list_ok(sp_fs *fs, const char *path, const sp_fs_list_opts *o)
{
    sp_fs_entries *e = NULL;
    sp_error *err = NULL;
    if (sp_fs_list(&e, fs, path, o, &err) != 0)
        fail_msg("list %s: %s", path, err ? err->message : "?");
    return e;
}

static const sp_fs_entry *find(const sp_fs_entries *e, const char *path)
{
    for (size_t i = 0; i < e->n; i++)
        if (strcmp(e->v[i].path, path) == 0)
            return &e->v[i];
    return NULL;
}

static void test_default_skip(void **state)
{
    fixture *f = *state;
    tree(f->dir);
    sp_fs_list_opts o = SP_FS_LIST_OPTS_INIT;
    o.depth = 5;
    sp_fs_entries *e = list_ok(f->fs, ".", &o);
    /* Shown, marked, not entered. */
    const sp_fs_entry *nm = find(e, "node_modules");
    assert_non_null(nm);
    assert_true(nm->contents_skipped);
    assert_null(find(e, "node_modules/pkg"));
    assert_non_null(find(e, ".git"));
    assert_null(find(e, ".git/HEAD"));
    assert_true(find(e, "src/__pycache__")->contents_skipped);
    assert_null(find(e, "src/__pycache__/m.pyc"));
    /* A CACHEDIR.TAG with the signature marks a cache; without it, no. */
    assert_true(find(e, "target")->contents_skipped);
    assert_null(find(e, "target/out.bin"));
    assert_false(find(e, "faketag")->contents_skipped);
    assert_non_null(find(e, "faketag/kept.txt"));
    /* The default list names folders: a file called venv stays. */
    assert_non_null(find(e, "venv"));
    assert_non_null(find(e, "src/main.c"));
    assert_false(find(e, "src")->contents_skipped);
    sp_fs_entries_free(e);

    /* At depth 1 nothing would be entered anyway: no mark. */
    o.depth = 1;
    e = list_ok(f->fs, ".", &o);
    assert_false(find(e, "node_modules")->contents_skipped);
    sp_fs_entries_free(e);

    /* Asked by path, the folder itself is listed. */
    o.depth = 2;
    e = list_ok(f->fs, "node_modules", &o);
    assert_non_null(find(e, "node_modules/pkg/index.js"));
    sp_fs_entries_free(e);
}

static void test_ignore_globs(void **state)
{
    fixture *f = *state;
    tree(f->dir);
    sp_fs_list_opts o = SP_FS_LIST_OPTS_INIT;
    o.depth = 5;
    /* An empty list skips nothing. */
    const char *const none[] = {NULL};
    o.ignore = none;
    sp_fs_entries *e = list_ok(f->fs, ".", &o);
    assert_non_null(find(e, "node_modules/pkg/index.js"));
    assert_non_null(find(e, ".git/HEAD"));
    assert_non_null(find(e, "target/out.bin"));
    sp_fs_entries_free(e);

    /* Globs replace the default: files matching are left out, folders
     * shown but not entered; '/' anchors to the listed folder. */
    const char *const mine[] = {"*.pyc", "src/__pycache__", NULL};
    o.ignore = mine;
    e = list_ok(f->fs, ".", &o);
    assert_null(find(e, "src/main.pyc"));
    assert_non_null(find(e, "src/main.c"));
    assert_true(find(e, "src/__pycache__")->contents_skipped);
    assert_non_null(find(e, "node_modules/pkg/index.js"));
    sp_fs_entries_free(e);

    const char *const rel[] = {"__pycache__/", NULL};
    o.ignore = rel;
    e = list_ok(f->fs, "src", &o);
    assert_true(find(e, "src/__pycache__")->contents_skipped);
    sp_fs_entries_free(e);

    const char *const bad[] = {"[oops", NULL};
    o.ignore = bad;
    sp_fs_entries *x = NULL;
    sp_error *err = NULL;
    assert_int_equal(sp_fs_list(&x, f->fs, ".", &o, &err), SP_EINVAL);
    assert_null(x);
    assert_non_null(strstr(err->message, "ignore"));
    sp_error_free(err);
}

/* Callers built against version 1 options get the default list and keep
 * working (the struct ends before `ignore`). */
static void test_version_1(void **state)
{
    fixture *f = *state;
    tree(f->dir);
    struct {
        unsigned version, depth;
        size_t max_entries;
    } v1 = {1, 3, 0};
    sp_fs_entries *e = list_ok(f->fs, ".", (const sp_fs_list_opts *)(void *)&v1);
    assert_true(find(e, "node_modules")->contents_skipped);
    sp_fs_entries_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_default_skip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ignore_globs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_version_1, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
