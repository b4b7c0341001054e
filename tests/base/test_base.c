/* Unit tests for the base helpers and path normalization. */
#include <string.h>

#include "base.h"
#include "sandpod/fs.h"
#include "testutil.h"

static void test_errors(void **state)
{
    (void)state;
    sp_error *err = NULL;
    assert_int_equal(sp_err_set(&err, SP_EINVAL, 0, "bad %s", "thing"), SP_EINVAL);
    assert_string_equal(err->message, "bad thing");
    assert_int_equal(sp_err_wrap(&err, SP_ERROR, "in %d", 3), SP_EINVAL);
    assert_string_equal(err->message, "in 3: bad thing");
    /* A second set replaces the first without leaking. */
    sp_err_set(&err, SP_EESCAPE, EXDEV, "x");
    assert_int_equal(err->code, SP_EESCAPE);
    assert_int_equal(err->sys_errno, EXDEV);
    sp_error_free(err);
    sp_error_free(NULL);
    assert_int_equal(sp_err_set(NULL, SP_ENOTFOUND, 0, "ignored"), SP_ENOTFOUND);
    assert_string_equal(sp_strerror(SP_EESCAPE), "escapes the workspace");
    assert_string_equal(sp_strerror(12345), "unknown error");
    assert_int_equal(sp_code_from_errno(ENOENT), SP_ENOTFOUND);
    assert_int_equal(sp_code_from_errno(EXDEV), SP_EESCAPE);
}

static void test_utf8(void **state)
{
    (void)state;
    assert_true(sp_utf8_valid("", 0));
    assert_true(sp_utf8_valid("plain ascii text that is long enough", 36));
    assert_true(sp_utf8_valid("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 15));
    assert_false(sp_utf8_valid("\xc3", 1));             /* truncated */
    assert_false(sp_utf8_valid("\xc0\xaf", 2));         /* overlong */
    assert_false(sp_utf8_valid("\xed\xa0\x80", 3));     /* surrogate */
    assert_false(sp_utf8_valid("\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
    assert_false(sp_utf8_valid("abcdefgh\xff", 9));     /* after the fast path */
    /* Cutting never splits a code point. */
    const char *s = "a\xe2\x82\xac"; /* a€ */
    assert_int_equal(sp_utf8_cut(s, 4, 2), 1);
    assert_int_equal(sp_utf8_cut(s, 4, 3), 1);
    assert_int_equal(sp_utf8_cut(s, 4, 4), 4);
}

static void test_buf(void **state)
{
    (void)state;
    sp_buf b = SP_BUF_INIT;
    for (int i = 0; i < 1000; i++)
        sp_buf_printf(&b, "%d,", i);
    assert_int_equal(strlen(b.data), b.len);
    assert_memory_equal(b.data, "0,1,2,", 6);
    char *s = sp_buf_steal(&b);
    assert_null(b.data);
    free(s);
    sp_strv sv = {0};
    sp_strv_push(&sv, sp_xstrdup("a"));
    sp_strv_push(&sv, sp_xstrdup("b"));
    assert_int_equal(sv.n, 2);
    assert_null(sv.v[2]);
    sp_strv_dispose(&sv);
}

static void norm_ok(const char *in, const char *want)
{
    char *out = NULL;
    sp_error *err = NULL;
    int r = sp_fs_path_normalize(&out, in, strlen(in), &err);
    if (r != 0)
        fail_msg("normalize %s: %s", in, err->message);
    assert_string_equal(out, want);
    free(out);
}

static void norm_fail(const char *in, size_t len, int code)
{
    char *out = NULL;
    sp_error *err = NULL;
    assert_int_equal(sp_fs_path_normalize(&out, in, len, &err), code);
    assert_null(out);
    assert_non_null(err);
    assert_non_null(err->message);
    sp_error_free(err);
}

static void test_normalize(void **state)
{
    (void)state;
    norm_ok("", ".");
    norm_ok(".", ".");
    norm_ok("./", ".");
    norm_ok("a", "a");
    norm_ok("a/b/../c", "a/c");
    norm_ok("a//b/./c/", "a/b/c");
    norm_ok("a/..", ".");
    norm_ok("/workspace", ".");
    norm_ok("/workspace/", ".");
    norm_ok("/workspace/src/x.c", "src/x.c");
    norm_ok("h\xc3\xa9llo/w\xc3\xb6rld", "h\xc3\xa9llo/w\xc3\xb6rld");
    norm_ok("...", "...");
    norm_ok("..a/b..", "..a/b..");
    norm_fail("..", 2, SP_EESCAPE);
    norm_fail("../etc/passwd", 13, SP_EESCAPE);
    norm_fail("a/../../b", 9, SP_EESCAPE);
    norm_fail("/workspace/..", 13, SP_EESCAPE);
    norm_fail("/etc/passwd", 11, SP_EESCAPE);
    norm_fail("/workspacex/a", 13, SP_EESCAPE);
    norm_fail("/", 1, SP_EESCAPE);
    norm_fail("a\0/../../etc", 12, SP_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_buf),
        cmocka_unit_test(test_normalize),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
