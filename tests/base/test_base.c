/* Unit tests for the base helpers and path normalization. */
#include <string.h>

#include "base.h"
#include "lazy.h"
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
    /* A buffer that was only grown is still an empty string. */
    sp_buf_grow(&b, 100);
    s = sp_buf_steal(&b);
    assert_int_equal(strlen(s), 0);
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

static char *cap(const char *data, size_t len, size_t chunk, size_t mb, size_t ml, bool *trunc)
{
    sp_capbuf c;
    sp_capbuf_init(&c, mb, ml);
    for (size_t i = 0; i < len; i += chunk)
        sp_capbuf_feed(&c, data + i, len - i < chunk ? len - i : chunk);
    char *t = sp_capbuf_text(&c, NULL, trunc);
    sp_capbuf_dispose(&c);
    return t;
}

static void test_cap(void **state)
{
    (void)state;
    bool tr = true;
    char *t = cap("short\n", 6, 3, 0, 0, &tr);
    assert_string_equal(t, "short\n");
    assert_false(tr);
    free(t);
    t = cap("", 0, 1, 0, 0, &tr);
    assert_string_equal(t, "");
    assert_false(tr);
    free(t);

    /* 1000 lines over a 200-line cap: 100 head lines, 100 tail lines. */
    sp_buf b = SP_BUF_INIT;
    for (int i = 0; i < 1000; i++)
        sp_buf_printf(&b, "%d\n", i);
    for (size_t chunk = 1; chunk < 5000; chunk = chunk * 7 + 1) {
        t = cap(b.data, b.len, chunk, 8192, 200, &tr);
        assert_true(tr);
        assert_memory_equal(t, "0\n1\n", 4);
        assert_non_null(strstr(t, "\n99\n[... "));
        assert_non_null(strstr(t, " 800 lines omitted ...]\n900\n"));
        assert_int_equal(strlen(t) - strlen(strstr(t, "999\n")), strlen(t) - 4);
        free(t);
    }
    /* Bytes bind: one huge line keeps 4 KiB of each end. */
    sp_buf_dispose(&b);
    for (int i = 0; i < 100000; i++)
        sp_buf_addc(&b, (char)('a' + i % 26));
    t = cap(b.data, b.len, 4096, 8192, 200, &tr);
    assert_true(tr);
    assert_true(strlen(t) < 8192 + 64);
    assert_non_null(strstr(t, "bytes, 0 lines omitted"));
    assert_memory_equal(t + strlen(t) - 5, b.data + b.len - 5, 5);
    free(t);
    sp_buf_dispose(&b);
    /* Exactly at the cap: nothing left out. */
    for (int i = 0; i < 200; i++)
        sp_buf_adds(&b, "x\n");
    t = cap(b.data, b.len, 7, 8192, 200, &tr);
    assert_false(tr);
    assert_int_equal(strlen(t), 400);
    free(t);
    sp_buf_addc(&b, 'y');
    t = cap(b.data, b.len, 7, 8192, 200, &tr);
    assert_true(tr);
    free(t);
    sp_buf_dispose(&b);
}

/* Libraries loaded on first use: what a missing library or symbol says,
 * and that the outcome is kept. */
static void test_lazy(void **state)
{
    (void)state;
    static void *slot;
    static void **const slots[] = {&slot};
    static const char *const none[] = {"libsandpod-no-such-lib.so.7", NULL};
    static const char *const syms[] = {"zlibVersion", NULL};
    sp_lazy_lib missing = {.what = "libnothing",
                           .package = "libnothing1",
                           .sonames = none,
                           .symbols = syms,
                           .slots = slots};
    sp_error *err = NULL;
    assert_int_equal(sp_lazy_load(&missing, &err), SP_ENOTFOUND);
    assert_non_null(strstr(err->message, "libnothing is not installed"));
    assert_non_null(strstr(err->message, "libsandpod-no-such-lib.so.7")); /* dlopen's words */
    assert_non_null(strstr(err->message, "apt-get install libnothing1"));
    sp_error_free(err);
    err = NULL;
    assert_int_equal(sp_lazy_load(&missing, &err), SP_ENOTFOUND); /* kept */
    sp_error_free(err);

    static const char *const zlib[] = {"libz.so.1", NULL};
    static const char *const old_syms[] = {"zlibVersion", "deflateNoSuchThing", NULL};
    static void *slot2;
    static void **const slots2[] = {&slot, &slot2};
    sp_lazy_lib too_old = {
        .what = "zlib", .package = "zlib1g", .sonames = zlib, .symbols = old_syms, .slots = slots2};
    err = NULL;
    assert_int_equal(sp_lazy_load(&too_old, &err), SP_ENOTFOUND);
    assert_non_null(strstr(err->message, "has no deflateNoSuchThing"));
    sp_error_free(err);

    sp_lazy_lib fine = {
        .what = "zlib", .package = "zlib1g", .sonames = zlib, .symbols = syms, .slots = slots};
    slot = NULL;
    assert_int_equal(sp_lazy_load(&fine, NULL), 0);
    assert_non_null(slot);
    const char *(*version)(void) = (const char *(*)(void))slot;
    assert_true(version()[0] >= '1');

    /* The real ones load here (both are installed wherever sandpod builds). */
    assert_int_equal(sp_curl_load(NULL), 0);
    assert_int_equal(sp_archive_load(NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),    cmocka_unit_test(test_utf8), cmocka_unit_test(test_buf),
        cmocka_unit_test(test_normalize), cmocka_unit_test(test_cap),  cmocka_unit_test(test_lazy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
