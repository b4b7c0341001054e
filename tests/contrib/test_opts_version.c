/* Every public entry point that takes an options struct refuses a version
 * it does not know, with SP_EINVAL and a message naming the struct and the
 * version, before it looks at anything else (and takes NULL as the
 * defaults). One row per entry point; a new one belongs here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp.h"
#include "sandpod.h"
#include "testutil.h"
#include "tools.h"

#define BAD 77u

static sp_fs *fs; /* a handle for the calls that need one */
static char *dir;

typedef struct row {
    const char *name; /* the entry point */
    const char *struct_name;
    int (*call)(sp_error **err); /* calls it with version BAD */
} row;

static int c_podman_open(sp_error **err)
{
    sp_podman *p = NULL;
    sp_podman_opts o = SP_PODMAN_OPTS_INIT;
    o.version = BAD;
    return sp_podman_open(&p, &o, err);
}

static int c_image_pull_with(sp_error **err)
{
    sp_podman_pull_opts o = SP_PODMAN_PULL_OPTS_INIT;
    o.version = BAD;
    return sp_podman_image_pull_with(NULL, NULL, "x", &o, err);
}

static int c_image_ensure(sp_error **err)
{
    sp_podman_pull_opts o = SP_PODMAN_PULL_OPTS_INIT;
    o.version = BAD;
    return sp_podman_image_ensure(NULL, NULL, "x", SP_PULL_ALWAYS, &o, err);
}

static int c_image_build(sp_error **err)
{
    sp_podman_build_opts o = SP_PODMAN_BUILD_OPTS_INIT;
    o.version = BAD;
    return sp_podman_image_build(NULL, NULL, dir, &o, err);
}

static int c_sandbox_create(sp_error **err)
{
    sp_sandbox *sb = NULL;
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.version = BAD;
    return sp_sandbox_create(&sb, &o, err);
}

static int c_sandbox_fork(sp_error **err)
{
    sp_sandbox *sb = NULL;
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.version = BAD;
    return sp_sandbox_fork(&sb, NULL, NULL, &o, err);
}

static int c_sandbox_create_from_template(sp_error **err)
{
    sp_sandbox *sb = NULL;
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.version = BAD;
    return sp_sandbox_create_from_template(&sb, "t", &o, err);
}

static int c_template_save(sp_error **err)
{
    sp_template_opts o = SP_TEMPLATE_OPTS_INIT;
    o.version = BAD;
    return sp_template_save(NULL, NULL, "t", &o, err);
}

static int c_template_list(sp_error **err)
{
    char **names = NULL;
    sp_template_opts o = SP_TEMPLATE_OPTS_INIT;
    o.version = BAD;
    return sp_template_list(&names, &o, err);
}

static int c_template_info_get(sp_error **err)
{
    sp_template_info *t = NULL;
    sp_template_opts o = SP_TEMPLATE_OPTS_INIT;
    o.version = BAD;
    return sp_template_info_get(&t, "t", &o, err);
}

static int c_template_remove(sp_error **err)
{
    sp_template_opts o = SP_TEMPLATE_OPTS_INIT;
    o.version = BAD;
    return sp_template_remove("t", &o, err);
}

static int c_sandbox_open(sp_error **err)
{
    sp_sandbox *sb = NULL;
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.version = BAD;
    return sp_sandbox_open(&sb, "x", &o, err);
}

static int c_sandbox_exec(sp_error **err)
{
    sp_run_result *r = NULL;
    sp_run_opts o = SP_RUN_OPTS_INIT;
    o.version = BAD;
    const char *argv[] = {"true", NULL};
    return sp_sandbox_exec(&r, NULL, argv, &o, err);
}

static int c_sandbox_shell(sp_error **err)
{
    sp_run_result *r = NULL;
    sp_run_opts o = SP_RUN_OPTS_INIT;
    o.version = BAD;
    return sp_sandbox_shell(&r, NULL, "true", &o, err);
}

static int c_session_start(sp_error **err)
{
    sp_session_output *out = NULL;
    sp_session_opts o = SP_SESSION_OPTS_INIT;
    o.version = BAD;
    return sp_session_start(&out, NULL, "true", &o, err);
}

static int c_session_write(sp_error **err)
{
    sp_session_output *out = NULL;
    sp_session_write_opts o = SP_SESSION_WRITE_OPTS_INIT;
    o.version = BAD;
    return sp_session_write(&out, NULL, 1, "x", 1, &o, err);
}

static int c_sandbox_snapshot_open(sp_error **err)
{
    sp_sandbox_snap *h = NULL;
    sp_sandbox_snapshot_opts o = SP_SANDBOX_SNAPSHOT_OPTS_INIT;
    o.version = BAD;
    return sp_sandbox_snapshot_open(&h, NULL, &o, err);
}

static int c_sandbox_apply(sp_error **err)
{
    sp_apply_result *r = NULL;
    sp_sandbox_apply_opts o = SP_SANDBOX_APPLY_OPTS_INIT;
    o.version = BAD;
    return sp_sandbox_apply(&r, NULL, &o, err);
}

static int c_hydrate(sp_error **err)
{
    sp_hydrate_result *r = NULL;
    sp_hydrate_opts o = SP_HYDRATE_OPTS_INIT;
    o.version = BAD;
    return sp_hydrate(&r, dir, NULL, 0, &o, err);
}

static int c_hydrate_check(sp_error **err)
{
    sp_hydrate_opts o = SP_HYDRATE_OPTS_INIT;
    o.version = BAD;
    return sp_hydrate_check(NULL, 0, &o, err);
}

static int c_sandbox_egress_change(sp_error **err)
{
    sp_egress_change_opts o = SP_EGRESS_CHANGE_OPTS_INIT;
    o.version = BAD;
    return sp_sandbox_egress_change(NULL, &o, err);
}

static int c_fs_open(sp_error **err)
{
    sp_fs *f = NULL;
    sp_fs_opts o = SP_FS_OPTS_INIT;
    o.version = BAD;
    return sp_fs_open(&f, dir, &o, err);
}

static int c_fs_read(sp_error **err)
{
    sp_fs_text *t = NULL;
    sp_fs_read_opts o = SP_FS_READ_OPTS_INIT;
    o.version = BAD;
    return sp_fs_read(&t, fs, "f", &o, err);
}

static int c_fs_write(sp_error **err)
{
    sp_fs_write_opts o = SP_FS_WRITE_OPTS_INIT;
    o.version = BAD;
    return sp_fs_write(NULL, fs, "new", "x", 1, &o, err);
}

static int c_fs_write_bytes(sp_error **err)
{
    sp_fs_write_opts o = SP_FS_WRITE_OPTS_INIT;
    o.version = BAD;
    return sp_fs_write_bytes(NULL, fs, "new", "x", 1, &o, err);
}

static int c_fs_list(sp_error **err)
{
    sp_fs_entries *e = NULL;
    sp_fs_list_opts o = SP_FS_LIST_OPTS_INIT;
    o.version = BAD;
    return sp_fs_list(&e, fs, ".", &o, err);
}

static int c_fs_glob_ex(sp_error **err)
{
    sp_fs_entries *e = NULL;
    sp_fs_glob_opts o = SP_FS_GLOB_OPTS_INIT;
    o.version = BAD;
    return sp_fs_glob_ex(&e, fs, "*", &o, err);
}

static int c_fs_grep(sp_error **err)
{
    sp_fs_matches *m = NULL;
    sp_fs_grep_opts o = SP_FS_GREP_OPTS_INIT;
    o.version = BAD;
    return sp_fs_grep(&m, fs, "x", &o, err);
}

static int c_fs_apply_patch(sp_error **err)
{
    sp_patch_result *r = NULL;
    sp_patch_opts o = SP_PATCH_OPTS_INIT;
    o.version = BAD;
    return sp_fs_apply_patch(&r, fs, "", 0, &o, err);
}

static int c_patch_parse(sp_error **err)
{
    sp_patch_result *r = NULL;
    sp_patch_opts o = SP_PATCH_OPTS_INIT;
    o.version = BAD;
    return sp_patch_parse(&r, "", 0, &o, err);
}

static int c_snapstore_open(sp_error **err)
{
    sp_snapstore *s = NULL;
    sp_snapstore_opts o = SP_SNAPSTORE_OPTS_INIT;
    o.version = BAD;
    return sp_snapstore_open(&s, dir, "/nonexistent/store", &o, err);
}

static int c_snapshot_diff(sp_error **err)
{
    sp_snapdiff *d = NULL;
    sp_snapshot_diff_opts o = SP_SNAPSHOT_DIFF_OPTS_INIT;
    o.version = BAD;
    return sp_snapshot_diff(&d, NULL, "a", "b", &o, err);
}

static int c_sandbox_snapshot_diff(sp_error **err)
{
    sp_snapdiff *d = NULL;
    sp_snapshot_diff_opts o = SP_SNAPSHOT_DIFF_OPTS_INIT;
    o.version = BAD;
    return sp_sandbox_snapshot_diff(&d, NULL, "a", "b", &o, err);
}

static int c_tools_open_sandbox(sp_error **err)
{
    sp_tools *t = NULL;
    sp_tools_opts o = SP_TOOLS_OPTS_INIT;
    o.version = BAD;
    return sp_tools_open_sandbox(&t, NULL, &o, err);
}

static int c_tools_open_root(sp_error **err)
{
    sp_tools *t = NULL;
    sp_tools_opts o = SP_TOOLS_OPTS_INIT;
    o.version = BAD;
    return sp_tools_open_root(&t, dir, &o, err);
}

static int c_tools_open_later(sp_error **err)
{
    sp_tools *t = NULL;
    sp_tools_opts o = SP_TOOLS_OPTS_INIT;
    o.version = BAD;
    return sp_tools_open_later(&t, NULL, &o, err);
}

static int c_mcp_serve(sp_error **err)
{
    sp_mcp_opts o = SP_MCP_OPTS_INIT;
    o.version = BAD;
    return sp_mcp_serve(NULL, -1, -1, &o, err);
}

static int c_sandbox_attach(sp_error **err)
{
    sp_attach *a = NULL;
    sp_attach_opts o = SP_ATTACH_OPTS_INIT;
    o.version = BAD;
    const char *argv[] = {"true", NULL};
    return sp_sandbox_attach(&a, NULL, argv, &o, err);
}

static int no_logs(int stream, const char *data, size_t len, void *userdata)
{
    (void)stream, (void)data, (void)len, (void)userdata;
    return 0;
}

static int c_sandbox_logs(sp_error **err)
{
    sp_logs_opts o = SP_LOGS_OPTS_INIT;
    o.version = BAD;
    return sp_sandbox_logs(NULL, &o, no_logs, NULL, err);
}

static int c_podman_container_logs(sp_error **err)
{
    sp_logs_opts o = SP_LOGS_OPTS_INIT;
    o.version = BAD;
    return sp_podman_container_logs(NULL, "x", &o, no_logs, NULL, err);
}

static int c_sandbox_open_agent(sp_error **err)
{
    sp_sandbox *sb = NULL;
    sp_sandbox_agent_opts o = SP_SANDBOX_AGENT_OPTS_INIT;
    o.version = BAD;
    o.workspace = dir;
    o.socket = "agent.sock";
    return sp_sandbox_open_agent(&sb, &o, err);
}

static int c_tools_open_agent(sp_error **err)
{
    sp_tools *t = NULL;
    sp_tools_opts o = SP_TOOLS_OPTS_INIT;
    o.version = BAD;
    return sp_tools_open_agent(&t, dir, NULL, &o, err);
}

static const row rows[] = {
    {"sp_sandbox_attach", "sp_attach_opts", c_sandbox_attach},
    {"sp_sandbox_logs", "sp_logs_opts", c_sandbox_logs},
    {"sp_podman_container_logs", "sp_logs_opts", c_podman_container_logs},
    {"sp_podman_open", "sp_podman_opts", c_podman_open},
    {"sp_podman_image_pull_with", "sp_podman_pull_opts", c_image_pull_with},
    {"sp_podman_image_ensure", "sp_podman_pull_opts", c_image_ensure},
    {"sp_podman_image_build", "sp_podman_build_opts", c_image_build},
    {"sp_sandbox_create", "sp_sandbox_opts", c_sandbox_create},
    {"sp_sandbox_fork", "sp_sandbox_opts", c_sandbox_fork},
    {"sp_sandbox_create_from_template", "sp_sandbox_opts", c_sandbox_create_from_template},
    {"sp_template_save", "sp_template_opts", c_template_save},
    {"sp_template_list", "sp_template_opts", c_template_list},
    {"sp_template_info_get", "sp_template_opts", c_template_info_get},
    {"sp_template_remove", "sp_template_opts", c_template_remove},
    {"sp_sandbox_open", "sp_sandbox_opts", c_sandbox_open},
    {"sp_sandbox_open_agent", "sp_sandbox_agent_opts", c_sandbox_open_agent},
    {"sp_sandbox_exec", "sp_run_opts", c_sandbox_exec},
    {"sp_sandbox_shell", "sp_run_opts", c_sandbox_shell},
    {"sp_session_start", "sp_session_opts", c_session_start},
    {"sp_session_write", "sp_session_write_opts", c_session_write},
    {"sp_sandbox_snapshot_open", "sp_sandbox_snapshot_opts", c_sandbox_snapshot_open},
    {"sp_sandbox_apply", "sp_sandbox_apply_opts", c_sandbox_apply},
    {"sp_hydrate", "sp_hydrate_opts", c_hydrate},
    {"sp_hydrate_check", "sp_hydrate_opts", c_hydrate_check},
    {"sp_sandbox_egress_change", "sp_egress_change_opts", c_sandbox_egress_change},
    {"sp_fs_open", "sp_fs_opts", c_fs_open},
    {"sp_fs_read", "sp_fs_read_opts", c_fs_read},
    {"sp_fs_write", "sp_fs_write_opts", c_fs_write},
    {"sp_fs_write_bytes", "sp_fs_write_opts", c_fs_write_bytes},
    {"sp_fs_list", "sp_fs_list_opts", c_fs_list},
    {"sp_fs_glob_ex", "sp_fs_glob_opts", c_fs_glob_ex},
    {"sp_fs_grep", "sp_fs_grep_opts", c_fs_grep},
    {"sp_fs_apply_patch", "sp_patch_opts", c_fs_apply_patch},
    {"sp_patch_parse", "sp_patch_opts", c_patch_parse},
    {"sp_snapstore_open", "sp_snapstore_opts", c_snapstore_open},
    {"sp_snapshot_diff", "sp_snapshot_diff_opts", c_snapshot_diff},
    {"sp_sandbox_snapshot_diff", "sp_snapshot_diff_opts", c_sandbox_snapshot_diff},
    {"sp_tools_open_sandbox", "sp_tools_opts", c_tools_open_sandbox},
    {"sp_tools_open_root", "sp_tools_opts", c_tools_open_root},
    {"sp_tools_open_later", "sp_tools_opts", c_tools_open_later},
    {"sp_tools_open_agent", "sp_tools_opts", c_tools_open_agent},
    {"sp_mcp_serve", "sp_mcp_opts", c_mcp_serve},
};

static void test_bad_version_refused(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        sp_error *err = NULL;
        int r = rows[i].call(&err);
        if (r != SP_EINVAL || !err)
            fail_msg("%s: a bad %s version gave %d, not SP_EINVAL", rows[i].name,
                     rows[i].struct_name, r);
        char want[128];
        snprintf(want, sizeof(want), "%s version %u is not supported", rows[i].struct_name, BAD);
        if (!strstr(err->message, want))
            fail_msg("%s: message \"%s\" does not say \"%s\"", rows[i].name, err->message, want);
        sp_error_free(err);
    }
    /* Nothing was made in the folder by any of them. */
    sp_fs_entries *e = NULL;
    sp_error *err = NULL;
    assert_int_equal(sp_fs_list(&e, fs, ".", NULL, &err), 0);
    assert_int_equal(e->n, 1); /* just "f" */
    sp_fs_entries_free(e);
}

/* The table covers every entry point a public header declares with an
 * options struct (counted from the headers by the build). */
static void test_table_complete(void **state)
{
    (void)state;
    assert_int_equal(sizeof(rows) / sizeof(rows[0]), SP_TEST_OPTS_ENTRY_POINTS);
}

/* The one INIT style: the current version, everything else zero. */
static void test_init_style(void **state)
{
    (void)state;
    sp_fs_list_opts l = SP_FS_LIST_OPTS_INIT;
    assert_int_equal(l.version, SP_FS_LIST_OPTS_VERSION);
    assert_int_equal(l.depth, 0);
    sp_snapstore_opts s = SP_SNAPSTORE_OPTS_INIT;
    assert_int_equal(s.version, SP_SNAPSTORE_OPTS_VERSION);
    /* A version-1 snapstore struct is still accepted. */
    s.version = 1;
    s.no_create = true;
    sp_snapstore *st = NULL;
    sp_error *err = NULL;
    char *store = tu_join(dir, "../opts-store-none");
    assert_int_equal(sp_snapstore_open(&st, dir, store, &s, &err), SP_ENOTFOUND);
    sp_error_free(err);
    free(store);
}

int main(void)
{
    dir = tu_mkdtemp();
    tu_write(dir, "f", "x\n", 0644);
    sp_error *err = NULL;
    if (sp_fs_open(&fs, dir, NULL, &err) < 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_version_refused),
        cmocka_unit_test(test_table_complete),
        cmocka_unit_test(test_init_style),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    sp_fs_free(fs);
    tu_rmtree(dir);
    free(dir);
    return rc;
}
