/* Codex's own apply-patch scenarios (tests/overlay/patch_scenarios/, from
 * codex-rs/apply-patch/tests/fixtures/scenarios, Apache-2.0; see the README
 * there), replayed through sandpod's apply_patch tool: for each, the input
 * files are copied to a fresh root, the patch is sent as the freeform tool
 * input and as the JSON tool's `input`, and the whole tree (files and
 * folders) must then be the scenario's expected tree, whether the patch
 * applied or not. */
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "tools.h"

#ifndef SCENARIOS_DIR
#error "SCENARIOS_DIR must name tests/overlay/patch_scenarios"
#endif

/* Scenarios whose expected tree sandpod does not produce, on purpose. */
static const struct {
    const char *name;
    const char *why;
} DIFFERENT[] = {
    {"015_failure_after_partial_success_leaves_changes",
     "Codex keeps the files written before the failing operation; sandpod's patches are all "
     "or nothing, so the tree stays as it was"},
};

/* A tree as sorted lines: "d path" for a folder, "f path\n<bytes>" for a
 * file. */
typedef struct tree {
    char **v;
    size_t n;
} tree;

static void tree_add(tree *t, char *s)
{
    t->v = realloc(t->v, (t->n + 1) * sizeof(char *));
    assert_non_null(t->v);
    t->v[t->n++] = s;
}

static void walk(tree *t, const char *top, const char *rel)
{
    char *dir = rel[0] ? tu_join(top, rel) : strdup(top);
    DIR *d = opendir(dir);
    if (!d) {
        free(dir);
        return; /* no input/ or expected/: an empty tree */
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char *r = rel[0] ? tu_join(rel, e->d_name) : strdup(e->d_name);
        char *full = tu_join(top, r);
        struct stat st;
        assert_int_equal(lstat(full, &st), 0);
        if (S_ISDIR(st.st_mode)) {
            size_t n = strlen(r) + 3;
            char *s = malloc(n);
            snprintf(s, n, "d %s", r);
            tree_add(t, s);
            walk(t, top, r);
        } else {
            size_t len = 0;
            char *data = tu_read(top, r, &len);
            assert_non_null(data);
            size_t n = strlen(r) + len + 4;
            char *s = malloc(n);
            int k = snprintf(s, n, "f %s\n", r);
            memcpy(s + k, data, len + 1);
            free(data);
            tree_add(t, s);
        }
        free(full);
        free(r);
    }
    closedir(d);
    free(dir);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static tree snapshot(const char *top)
{
    tree t = {NULL, 0};
    walk(&t, top, "");
    if (t.n)
        qsort(t.v, t.n, sizeof(char *), cmp_str);
    return t;
}

static void tree_free(tree *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i]);
    free(t->v);
}

static char *tree_text(const tree *t)
{
    size_t n = 1;
    for (size_t i = 0; i < t->n; i++)
        n += strlen(t->v[i]) + 2;
    char *s = calloc(1, n);
    size_t off = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t l = strlen(t->v[i]);
        memcpy(s + off, t->v[i], l);
        s[off + l] = '\n';
        off += l + 1;
    }
    return s;
}

/* Copy the files below src to dst. */
static void copy_tree(const char *src, const char *dst)
{
    tree t = snapshot(src);
    for (size_t i = 0; i < t.n; i++) {
        const char *rel = t.v[i] + 2;
        if (t.v[i][0] == 'd') {
            tu_mkdir(dst, rel);
        } else {
            char *nl = strchr(t.v[i], '\n');
            *nl = '\0';
            tu_write_n(dst, rel, nl + 1, strlen(nl + 1), 0644);
            *nl = '\n';
        }
    }
    tree_free(&t);
}

static const char *different(const char *name)
{
    for (size_t i = 0; i < sizeof(DIFFERENT) / sizeof(DIFFERENT[0]); i++)
        if (strcmp(DIFFERENT[i].name, name) == 0)
            return DIFFERENT[i].why;
    return NULL;
}

/* Run one scenario with the patch sent freeform (json false) or as
 * {"input": ...}. Returns whether the call succeeded. */
static bool replay(const char *name, bool json)
{
    char *sdir = tu_join(SCENARIOS_DIR, name);
    char *input = tu_join(sdir, "input");
    char *expected = tu_join(sdir, "expected");
    size_t plen = 0;
    char *patch = tu_read(sdir, "patch.txt", &plen);
    assert_non_null(patch);

    char *base = tu_mkdtemp();
    char *root = tu_join(base, "root");
    assert_int_equal(mkdir(root, 0755), 0);
    copy_tree(input, root);
    tree before = snapshot(root);

    sp_tools *t = NULL;
    sp_error *err = NULL;
    if (sp_tools_open_root(&t, root, NULL, &err) < 0)
        fail_msg("open: %s", err ? err->message : "?");
    char *res = NULL;
    int r;
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "input", patch);
        char *args = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        r = sp_tools_call(&res, t, "apply_patch", args, strlen(args));
        free(args);
    } else {
        r = sp_tools_call_freeform(&res, t, "apply_patch", patch, plen);
    }
    sp_tools_free(t);

    const char *why = different(name);
    tree got = snapshot(root);
    tree want = why ? before : snapshot(expected);
    char *g = tree_text(&got), *w = tree_text(&want);
    if (strcmp(g, w) != 0)
        fail_msg("scenario %s (%s): the tree is\n%s\nexpected\n%s\n(result: %s)", name,
                 json ? "json" : "freeform", g, w, res ? res : "");
    if (why)
        print_message("%s: differs from Codex on purpose: %s\n", name, why);
    free(g);
    free(w);
    tree_free(&got);
    if (!why)
        tree_free(&want);
    tree_free(&before);
    free(res);
    tu_rmtree(base);
    free(base);
    free(root);
    free(patch);
    free(input);
    free(expected);
    free(sdir);
    return r == 0;
}

static void test_scenarios(void **state)
{
    (void)state;
    DIR *d = opendir(SCENARIOS_DIR);
    assert_non_null(d);
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        names = realloc(names, (n + 1) * sizeof(char *));
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof(char *), cmp_str);
    assert_true(n >= 23);
    unsigned applied = 0;
    for (size_t i = 0; i < n; i++) {
        bool a = replay(names[i], false);
        bool b = replay(names[i], true);
        assert_int_equal(a, b);
        /* A scenario named "rejects"/"fails"/"requires" is a failure. */
        bool fails = strstr(names[i], "reject") || strstr(names[i], "fails") ||
                     strstr(names[i], "requires") || strstr(names[i], "failure");
        if (a == fails)
            fail_msg("scenario %s: the call %s", names[i], a ? "succeeded" : "failed");
        applied += a;
        free(names[i]);
    }
    free(names);
    print_message("%zu Codex scenarios replayed twice (freeform and JSON), %u applied, %zu "
                  "refused\n",
                  n, applied, n - applied);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scenarios),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
