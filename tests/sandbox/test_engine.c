/* Unit tests for sandbox/engine/engines.c: engines.json read, checked, changed
 * atomically with unknown keys kept; a bad file refused and left alone. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "json.h"
#include "sandpod/engine.h"
#include "testutil.h"

static sp_engine *kube(const char *name)
{
    sp_engine *e = calloc(1, sizeof(*e));
    e->name = strdup(name);
    e->kind = SP_ENGINE_KUBERNETES;
    e->context = strdup("kind-kind");
    e->ns = strdup("sandpod");
    e->ttl_seconds = 600;
    return e;
}

/* Run call (which sets err), expect code and a message with needle;
 * err is freed and reset. */
#define expect_err(call, err, code, needle) expect_err_((call), &(err), (code), (needle))
static void expect_err_(int r, sp_error **err, int code, const char *needle)
{
    assert_int_equal(r, code);
    assert_non_null(*err);
    if (!strstr((*err)->message, needle))
        fail_msg("'%s' not in '%s'", needle, (*err)->message);
    sp_error_free(*err);
    *err = NULL;
}

static void test_defaults(void **state)
{
    (void)state;
    char *root = tu_mkdtemp();
    unsetenv("SANDPOD_ENGINE");
    sp_engine *e = NULL;
    sp_error *err = NULL;
    /* No file: "local" only, and nothing is written by reading. */
    assert_int_equal(sp_engine_get(&e, root, NULL, &err), 0);
    assert_string_equal(e->name, "local");
    assert_int_equal(e->kind, SP_ENGINE_PODMAN);
    sp_engine_free(e);
    assert_false(tu_exists(root, "engines.json"));
    sp_engine **v = NULL;
    char *def = NULL;
    assert_int_equal(sp_engine_list(&v, &def, root, &err), 0);
    assert_string_equal(v[0]->name, "local");
    assert_null(v[1]);
    assert_string_equal(def, "local");
    sp_engine_free(v[0]);
    free(v);
    free(def);
    expect_err(sp_engine_get(&e, root, "nope", &err), err, SP_ENOTFOUND, "engines: local");
    sp_engine_kind k;
    assert_int_equal(sp_engine_kind_parse(&k, "kubernetes", NULL), 0);
    assert_int_equal(k, SP_ENGINE_KUBERNETES);
    assert_string_equal(sp_engine_kind_name(SP_ENGINE_PODMAN), "podman");
    expect_err(sp_engine_kind_parse(&k, "nomad", &err), err, SP_EINVAL, "podman or kubernetes");
    tu_rmtree(root);
    free(root);
}

static void test_add_get_rm(void **state)
{
    (void)state;
    char *root = tu_mkdtemp();
    unsetenv("SANDPOD_ENGINE");
    sp_error *err = NULL;
    sp_engine *e = kube("cluster");
    assert_int_equal(sp_engine_add(root, e, false, &err), 0);
    struct stat st;
    char *path = tu_join(root, "engines.json");
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    expect_err(sp_engine_add(root, e, false, &err), err, SP_EEXISTS, "exists");
    assert_int_equal(sp_engine_add(root, e, true, &err), 0);
    sp_engine *g = NULL;
    assert_int_equal(sp_engine_get(&g, root, "cluster", &err), 0);
    assert_int_equal(g->kind, SP_ENGINE_KUBERNETES);
    assert_string_equal(g->context, "kind-kind");
    assert_string_equal(g->ns, "sandpod");
    assert_int_equal(g->ttl_seconds, 600);
    assert_null(g->server);
    sp_engine_free(g);
    sp_engine *b = kube("another-1");
    assert_int_equal(sp_engine_add(root, b, false, &err), 0);
    sp_engine_free(b);

    /* The default: the file's, then $SANDPOD_ENGINE over it. */
    assert_int_equal(sp_engine_set_default(root, "cluster", &err), 0);
    assert_int_equal(sp_engine_get(&g, root, NULL, &err), 0);
    assert_string_equal(g->name, "cluster");
    sp_engine_free(g);
    setenv("SANDPOD_ENGINE", "local", 1);
    assert_int_equal(sp_engine_get(&g, root, NULL, &err), 0);
    assert_string_equal(g->name, "local");
    sp_engine_free(g);
    setenv("SANDPOD_ENGINE", "another-1", 1);
    sp_engine **v = NULL;
    char *def = NULL;
    assert_int_equal(sp_engine_list(&v, &def, root, &err), 0);
    assert_string_equal(def, "another-1");
    assert_string_equal(v[0]->name, "local");
    assert_string_equal(v[1]->name, "another-1");
    assert_string_equal(v[2]->name, "cluster");
    assert_null(v[3]);
    for (size_t i = 0; v[i]; i++)
        sp_engine_free(v[i]);
    free(v);
    free(def);
    setenv("SANDPOD_ENGINE", "gone", 1);
    expect_err(sp_engine_get(&g, root, NULL, &err), err, SP_ENOTFOUND, "$SANDPOD_ENGINE");
    unsetenv("SANDPOD_ENGINE");
    expect_err(sp_engine_set_default(root, "zzz", &err), err, SP_ENOTFOUND, "zzz");

    /* Removing the default sends it back to local. */
    assert_int_equal(sp_engine_remove(root, "cluster", &err), 0);
    assert_int_equal(sp_engine_get(&g, root, NULL, &err), 0);
    assert_string_equal(g->name, "local");
    sp_engine_free(g);
    expect_err(sp_engine_remove(root, "cluster", &err), err, SP_ENOTFOUND, "cluster");
    assert_int_equal(sp_engine_set_default(root, "local", &err), 0);
    sp_engine_free(e);
    free(path);
    tu_rmtree(root);
    free(root);
}

static void test_refused(void **state)
{
    (void)state;
    char *root = tu_mkdtemp();
    sp_error *err = NULL;
    sp_engine *e = kube("local");
    expect_err(sp_engine_add(root, e, false, &err), err, SP_EINVAL, "built in");
    expect_err(sp_engine_add(root, e, true, &err), err, SP_EINVAL, "built in");
    expect_err(sp_engine_remove(root, "local", &err), err, SP_EINVAL, "built in");
    const char *bad_names[] = {"Upper", "-x", "a_b", "", "a.b", NULL};
    for (size_t i = 0; bad_names[i]; i++) {
        free(e->name);
        e->name = strdup(bad_names[i]);
        expect_err(sp_engine_add(root, e, false, &err), err, SP_EINVAL, "invalid engine name");
    }
    free(e->name);
    e->name = strdup("a234567890123456789012345678901234567890123456789012345678901234");
    expect_err(sp_engine_add(root, e, false, &err), err, SP_EINVAL, "at most 63");
    e->name[63] = '\0';
    assert_int_equal(sp_engine_add(root, e, false, &err), 0);
    free(e->ns);
    e->ns = strdup("Bad_NS");
    expect_err(sp_engine_add(root, e, true, &err), err, SP_EINVAL, "namespace");
    free(e->ns);
    e->ns = strdup("ends-");
    expect_err(sp_engine_add(root, e, true, &err), err, SP_EINVAL, "namespace");
    free(e->ns);
    e->ns = NULL;
    e->server = strdup("ftp://x");
    expect_err(sp_engine_add(root, e, true, &err), err, SP_EINVAL, "server");
    free(e->server);
    e->server = NULL;
    e->token_file = strdup("/t");
    expect_err(sp_engine_add(root, e, true, &err), err, SP_EINVAL, "takes a server");
    free(e->token_file);
    e->token_file = NULL;
    /* A Localhost seccomp profile is a path under the kubelet's folder;
     * what a Pod may lack is named from a closed list. */
    const char *bad_profiles[] = {"/abs.json", "../up.json", "a b.json", NULL};
    for (size_t i = 0; bad_profiles[i]; i++) {
        e->seccomp_profile = strdup(bad_profiles[i]);
        expect_err(sp_engine_add(root, e, true, &err), err, SP_EINVAL, "seccomp_profile");
        free(e->seccomp_profile);
    }
    e->seccomp_profile = strdup("profiles/sandpod.json");
    e->accept = strdup("userns,network");
    expect_err(sp_engine_add(root, e, true, &err), err, SP_EINVAL,
               "accept: 'network' is not a protection");
    free(e->accept);
    e->accept = strdup("seccomp,userns,netpol");
    assert_int_equal(sp_engine_add(root, e, true, &err), 0);
    sp_engine *g = NULL;
    assert_int_equal(sp_engine_get(&g, root, e->name, &err), 0);
    assert_string_equal(g->seccomp_profile, "profiles/sandpod.json");
    assert_string_equal(g->accept, "seccomp,userns,netpol");
    sp_engine_free(g);
    e->kind = SP_ENGINE_PODMAN;
    expect_err(sp_engine_add(root, e, true, &err), err, SP_EINVAL, "not a field of a podman");
    sp_engine_free(e);
    tu_rmtree(root);
    free(root);
}

/* A rewrite keeps what this version does not know. */
static void test_unknown_keys_kept(void **state)
{
    (void)state;
    char *root = tu_mkdtemp();
    unsetenv("SANDPOD_ENGINE");
    tu_write(root, "engines.json",
             "{\"future\": [1, 2],\n \"engines\": {\"c1\": {\"kind\": \"kubernetes\", "
             "\"server\": \"https://k:6443\", \"colour\": \"blue\", \"ttl\": -1}}}",
             0600);
    sp_error *err = NULL;
    sp_engine *g = NULL;
    assert_int_equal(sp_engine_get(&g, root, "c1", &err), 0);
    assert_string_equal(g->server, "https://k:6443");
    assert_int_equal(g->ttl_seconds, -1);
    /* Redefine c1: known keys change, "colour" stays; so does "future". */
    free(g->server);
    g->server = NULL;
    g->image = strdup("reg/sandpod:1");
    g->ttl_seconds = 0;
    assert_int_equal(sp_engine_add(root, g, true, &err), 0);
    sp_engine_free(g);
    char *text = tu_read(root, "engines.json", NULL);
    cJSON *doc = cJSON_Parse(text);
    assert_non_null(doc);
    const cJSON *c1 = sp_json_get(sp_json_get(doc, "engines"), "c1");
    assert_string_equal(sp_json_str(c1, "colour"), "blue");
    assert_string_equal(sp_json_str(c1, "image"), "reg/sandpod:1");
    assert_null(sp_json_get(c1, "server"));
    assert_null(sp_json_get(c1, "ttl"));
    assert_true(cJSON_IsArray(sp_json_get(doc, "future")));
    cJSON_Delete(doc);
    free(text);
    /* Nothing left beside it but the lock. */
    DIR *d = opendir(root);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.') {
            n++;
            if (strcmp(de->d_name, "engines.json") != 0 && strcmp(de->d_name, "engines.lock") != 0)
                fail_msg("left behind: %s", de->d_name);
        }
    closedir(d);
    assert_int_equal(n, 2);
    tu_rmtree(root);
    free(root);
}

/* Malformed files: an error naming the file and the field; every change
 * refused; the file byte for byte as it was. */
static void test_bad_files(void **state)
{
    (void)state;
    unsetenv("SANDPOD_ENGINE");
    static const struct {
        const char *text, *needle;
    } cases[] = {
        {"{not json", "not a JSON object"},
        {"[]", "not a JSON object"},
        {"{\"default\": 3}", "default: not a string"},
        {"{\"default\": \"x\"}", "default: no engine named 'x'"},
        {"{\"engines\": []}", "engines: not an object"},
        {"{\"engines\": {\"c\": 1}}", "engines.c: not an object"},
        {"{\"engines\": {\"c\": {}}}", "engines.c.kind: missing"},
        {"{\"engines\": {\"c\": {\"kind\": \"nomad\"}}}", "engines.c.kind"},
        {"{\"engines\": {\"c\": {\"kind\": \"kubernetes\", \"ttl\": 1.5}}}", "engines.c.ttl"},
        {"{\"engines\": {\"c\": {\"kind\": \"kubernetes\", \"ttl\": \"9\"}}}", "engines.c.ttl"},
        {"{\"engines\": {\"c\": {\"kind\": \"kubernetes\", \"namespace\": \"A\"}}}",
         "engines.c.namespace"},
        {"{\"engines\": {\"c\": {\"kind\": \"kubernetes\", \"server\": \"k:6443\"}}}",
         "engines.c.server"},
        {"{\"engines\": {\"c\": {\"kind\": \"kubernetes\", \"context\": 7}}}",
         "engines.c.context: not a string"},
        {"{\"engines\": {\"Bad\": {\"kind\": \"kubernetes\"}}}", "engines.Bad: invalid"},
        {"{\"engines\": {\"local\": {\"kind\": \"podman\"}}}", "engines.local"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *root = tu_mkdtemp();
        tu_write(root, "engines.json", cases[i].text, 0600);
        sp_error *err = NULL;
        sp_engine *g = NULL;
        int r = sp_engine_get(&g, root, "c", &err);
        assert_int_equal(r, SP_EINVAL);
        if (!strstr(err->message, cases[i].needle) || !strstr(err->message, "engines.json"))
            fail_msg("case %zu: '%s' not in '%s'", i, cases[i].needle, err->message);
        sp_error_free(err);
        err = NULL;
        sp_engine **v = NULL;
        assert_int_equal(sp_engine_list(&v, NULL, root, &err), SP_EINVAL);
        sp_error_free(err);
        err = NULL;
        sp_engine *e = kube("other");
        expect_err(sp_engine_add(root, e, false, &err), err, SP_EINVAL, cases[i].needle);
        err = NULL;
        expect_err(sp_engine_set_default(root, "local", &err), err, SP_EINVAL, "not changed");
        err = NULL;
        sp_engine_free(e);
        char *text = tu_read(root, "engines.json", NULL);
        assert_string_equal(text, cases[i].text);
        free(text);
        tu_rmtree(root);
        free(root);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),  cmocka_unit_test(test_add_get_rm),
        cmocka_unit_test(test_refused),   cmocka_unit_test(test_unknown_keys_kept),
        cmocka_unit_test(test_bad_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
