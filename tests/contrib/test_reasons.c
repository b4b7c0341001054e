/* Errors carry a reason (sandpod/error.h) set where they are made, so
 * callers never match message text: one row per reason the library sets,
 * made by a real call, plus the names. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "sandpod.h"
#include "testutil.h"

static char *dir;
static sp_fs *fs;

static int r_is_directory(sp_error **err)
{
    return sp_fs_write(NULL, fs, "d", "x", 1, NULL, err);
}

static int r_not_directory(sp_error **err)
{
    sp_fs_entries *e = NULL;
    return sp_fs_list(&e, fs, "f/below", NULL, err);
}

static int r_exists(sp_error **err)
{
    sp_fs_write_opts o = SP_FS_WRITE_OPTS_INIT;
    o.mode = SP_FS_CREATE;
    return sp_fs_write(NULL, fs, "f", "x", 1, &o, err);
}

static int r_not_text(sp_error **err)
{
    sp_fs_text *t = NULL;
    return sp_fs_read(&t, fs, "bin", NULL, err);
}

static int r_not_unique(sp_error **err)
{
    return sp_fs_str_replace(NULL, fs, "f", "a", "b", false, err);
}

static int r_patch_parse(sp_error **err)
{
    sp_patch_result *r = NULL;
    const char *p = "*** Begin Patch\n*** Frobnicate File: f\n*** End Patch\n";
    return sp_fs_apply_patch(&r, fs, p, strlen(p), NULL, err);
}

static int r_patch_conflict(sp_error **err)
{
    sp_patch_result *r = NULL;
    const char *p = "*** Begin Patch\n*** Update File: f\n@@\n-zzz\n+y\n*** End Patch\n";
    return sp_fs_apply_patch(&r, fs, p, strlen(p), NULL, err);
}

static int r_too_large(sp_error **err)
{
    sp_fs *small = NULL;
    sp_fs_opts o = SP_FS_OPTS_INIT;
    o.max_write_bytes = 2;
    if (sp_fs_open(&small, dir, &o, err) < 0)
        return 0;
    int r = sp_fs_write(NULL, small, "big", "xyz", 3, NULL, err);
    sp_fs_free(small);
    return r;
}

static int r_no_store(sp_error **err)
{
    sp_snapstore *s = NULL;
    sp_snapstore_opts o = SP_SNAPSTORE_OPTS_INIT;
    o.no_create = true;
    char *store = tu_join(dir, "../no-store-here");
    int r = sp_snapstore_open(&s, dir, store, &o, err);
    free(store);
    return r;
}

static int r_service(sp_error **err)
{
    sp_podman *p = NULL;
    sp_podman_opts o = SP_PODMAN_OPTS_INIT;
    o.url = "unix:///nonexistent/podman.sock";
    o.no_autostart = true;
    int r = sp_podman_open(&p, &o, err);
    if (r == 0) {
        sp_podman_version *v = NULL;
        r = sp_podman_get_version(&v, p, err);
        sp_podman_free(p);
    }
    return r;
}

typedef struct row {
    int reason;
    int (*make)(sp_error **err);
} row;

static const row rows[] = {
    {SP_R_IS_DIRECTORY, r_is_directory},
    {SP_R_NOT_DIRECTORY, r_not_directory},
    {SP_R_EXISTS, r_exists},
    {SP_R_NOT_TEXT, r_not_text},
    {SP_R_NOT_UNIQUE, r_not_unique},
    {SP_R_PATCH_PARSE, r_patch_parse},
    {SP_R_PATCH_CONFLICT, r_patch_conflict},
    {SP_R_TOO_LARGE, r_too_large},
    {SP_R_NO_STORE, r_no_store},
    {SP_R_SERVICE, r_service},
};

static void test_reasons_set(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        sp_error *err = NULL;
        int r = rows[i].make(&err);
        if (r >= 0 || !err)
            fail_msg("row %s: the call did not fail (%d)", sp_reason_name(rows[i].reason), r);
        if (err->reason != rows[i].reason)
            fail_msg("want reason %s, got %s for \"%s\"", sp_reason_name(rows[i].reason),
                     sp_reason_name(err->reason), err->message);
        sp_error_free(err);
    }
}

static void test_reason_names(void **state)
{
    (void)state;
    static const char *const want[] = {
        "none",        "is_directory",   "not_directory", "not_empty", "exists",
        "patch_parse", "patch_conflict", "too_large",     "stale",     "not_text",
        "not_unique",  "no_store",       "cross_device",  "service",   "elsewhere",
    };
    for (int i = 0; i < (int)(sizeof(want) / sizeof(want[0])); i++)
        assert_string_equal(sp_reason_name(i), want[i]);
    assert_string_equal(sp_reason_name(-1), "unknown");
    assert_string_equal(sp_reason_name(SP_R_ELSEWHERE + 1), "unknown");
    /* Made from an errno where the error is made; kept by a wrap. */
    sp_error *err = NULL;
    sp_err_errno(&err, ENOTEMPTY, "remove", "x");
    assert_int_equal(err->reason, SP_R_NOT_EMPTY);
    sp_err_wrap(&err, SP_ERROR, "outer");
    assert_int_equal(err->reason, SP_R_NOT_EMPTY);
    sp_err_set(&err, SP_EINVAL, 0, "plain");
    assert_int_equal(err->reason, SP_R_NONE);
    assert_int_equal(sp_err_reason(&err, SP_R_STALE, SP_ERROR), SP_ERROR);
    assert_int_equal(err->reason, SP_R_STALE);
    sp_error_free(err);
    assert_int_equal(sp_err_reason(NULL, SP_R_STALE, SP_ERROR), SP_ERROR);
}

int main(void)
{
    dir = tu_mkdtemp();
    tu_write(dir, "f", "a a\n", 0644);
    tu_write_n(dir, "bin", "\0\1\2\3", 4, 0644);
    tu_mkdir(dir, "d");
    sp_error *err = NULL;
    if (sp_fs_open(&fs, dir, NULL, &err) < 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reasons_set),
        cmocka_unit_test(test_reason_names),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    sp_fs_free(fs);
    tu_rmtree(dir);
    free(dir);
    return rc;
}
