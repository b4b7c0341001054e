/* Tests for sp_fs_str_replace() and sp_fs_insert(). */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sandpod/fs.h"

typedef tu_fsfx fixture;
#define setup    tu_fsfx_setup
#define teardown tu_fsfx_teardown

static void assert_content(const char *dir, const char *rel, const char *want)
{
    char *got = tu_read(dir, rel, NULL);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static void replace_ok(sp_fs *fs, const char *path, const char *old_str, const char *new_str,
                       bool all, size_t want_count)
{
    sp_error *err = NULL;
    size_t n = 99;
    int r = sp_fs_str_replace(&n, fs, path, old_str, new_str, all, &err);
    if (r < 0)
        fail_msg("str_replace: %d %s", r, err ? err->message : "?");
    assert_int_equal(n, want_count);
}

static void insert_ok(sp_fs *fs, const char *path, long line, const char *text)
{
    sp_error *err = NULL;
    int r = sp_fs_insert(fs, path, line, text, &err);
    if (r < 0)
        fail_msg("insert at %ld: %d %s", line, r, err ? err->message : "?");
}

/* Expect a failure with `code` whose message contains `needle`. */
static void expect_err(int r, sp_error *err, int code, const char *needle)
{
    assert_int_equal(r, code);
    assert_non_null(err);
    assert_int_equal(err->code, code);
    if (needle && !strstr(err->message, needle))
        fail_msg("message '%s' lacks '%s'", err->message, needle);
    sp_error_free(err);
}

static void test_replace_unique(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "f.txt", "one\ntwo\nthree\n", 0644);
    replace_ok(f->fs, "f.txt", "two", "2", false, 1);
    assert_content(f->dir, "f.txt", "one\n2\nthree\n");

    /* Multi-line old_str, growing replacement, /workspace prefix. */
    replace_ok(f->fs, "/workspace/f.txt", "one\n2\n", "uno\ndos\ndos y medio\n", false, 1);
    assert_content(f->dir, "f.txt", "uno\ndos\ndos y medio\nthree\n");

    /* Deleting text. */
    replace_ok(f->fs, "f.txt", "dos y medio\n", "", false, 1);
    assert_content(f->dir, "f.txt", "uno\ndos\nthree\n");

    /* NULL count pointer is fine. */
    assert_int_equal(sp_fs_str_replace(NULL, f->fs, "f.txt", "three", "tres", false, NULL), 0);
    assert_content(f->dir, "f.txt", "uno\ndos\ntres\n");

    /* UTF-8 content. */
    tu_mkdir(f->dir, "d");
    tu_write(f->dir, "d/u.txt", "caf\xc3\xa9 cr\xc3\xa8me\n", 0644);
    replace_ok(f->fs, "d/u.txt", "cr\xc3\xa8me",
               "br\xc3\xbbl\xc3\xa9"
               "e",
               false, 1);
    assert_content(f->dir, "d/u.txt",
                   "caf\xc3\xa9 br\xc3\xbbl\xc3\xa9"
                   "e\n");
}

static void test_replace_not_found(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "f.txt", "one\ntwo\n", 0644);
    sp_error *err = NULL;
    size_t n = 99;
    int r = sp_fs_str_replace(&n, f->fs, "f.txt", "zwei", "2", false, &err);
    assert_int_equal(n, 0);
    assert_int_equal(r, SP_ENOTFOUND);
    assert_string_equal(err->message, "old_str not found in f.txt");
    sp_error_free(err);
    assert_content(f->dir, "f.txt", "one\ntwo\n");

    err = NULL;
    r = sp_fs_str_replace(NULL, f->fs, "f.txt", "zwei", "2", true, &err);
    expect_err(r, err, SP_ENOTFOUND, "not found");

    /* A missing file is also "not found", with its own message. */
    err = NULL;
    r = sp_fs_str_replace(NULL, f->fs, "missing.txt", "a", "b", false, &err);
    assert_int_equal(r, SP_ENOTFOUND);
    sp_error_free(err);
    assert_false(tu_exists(f->dir, "missing.txt"));
}

static void test_replace_ambiguous(void **state)
{
    fixture *f = *state;
    const char *text = "a\nx = 1\nb\nc\nx = 1\nd\ne\nf\nx = 1\n";
    tu_write(f->dir, "f.txt", text, 0644);
    sp_error *err = NULL;
    int r = sp_fs_str_replace(NULL, f->fs, "f.txt", "x = 1", "x = 2", false, &err);
    assert_int_equal(r, SP_EINVAL);
    assert_string_equal(err->message,
                        "old_str matches 3 times in f.txt (lines 2, 5, 9); add surrounding lines "
                        "to make it unique or set replace_all");
    sp_error_free(err);
    assert_content(f->dir, "f.txt", text);

    /* Two on one line: the line is named once. */
    tu_write(f->dir, "g.txt", "aa\n", 0644);
    err = NULL;
    r = sp_fs_str_replace(NULL, f->fs, "g.txt", "a", "b", false, &err);
    expect_err(r, err, SP_EINVAL, "matches 2 times in g.txt (line 1);");

    /* Many: the list is cut. */
    tu_write(f->dir, "h.txt", "z\nz\nz\nz\nz\nz\nz\nz\nz\nz\nz\nz\n", 0644);
    err = NULL;
    r = sp_fs_str_replace(NULL, f->fs, "h.txt", "z", "y", false, &err);
    expect_err(r, err, SP_EINVAL,
               "matches 12 times in h.txt (lines 1, 2, 3, 4, 5, 6, 7, 8, 9, "
               "10, ...)");
}

static void test_replace_all(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "f.txt", "x = 1\ny\nx = 1 x = 1\n", 0644);
    replace_ok(f->fs, "f.txt", "x = 1", "x = 22", true, 3);
    assert_content(f->dir, "f.txt", "x = 22\ny\nx = 22 x = 22\n");

    /* Non-overlapping: "aaa" holds one "aa", then a lone "a". */
    tu_write(f->dir, "g.txt", "aaaa aaa", 0644);
    replace_ok(f->fs, "g.txt", "aa", "b", true, 3);
    assert_content(f->dir, "g.txt", "bb ba");

    /* replace_all with a single occurrence is fine. */
    replace_ok(f->fs, "g.txt", "ba", "c", true, 1);
    assert_content(f->dir, "g.txt", "bb c");
}

static void test_mode_preserved(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "secret.txt", "key=old\n", 0600);
    tu_write(f->dir, "run.sh", "#!/bin/sh\necho old\n", 0755);
    replace_ok(f->fs, "secret.txt", "old", "new", false, 1);
    insert_ok(f->fs, "run.sh", 1, "set -e");
    char *p = tu_join(f->dir, "secret.txt");
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    free(p);
    p = tu_join(f->dir, "run.sh");
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    free(p);
    assert_content(f->dir, "secret.txt", "key=new\n");
    assert_content(f->dir, "run.sh", "#!/bin/sh\nset -e\necho old\n");
}

static void test_read_only(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "f.txt", "one\n", 0644);
    sp_fs_opts o = SP_FS_OPTS_INIT;
    o.read_only = true;
    sp_fs *fs = NULL;
    assert_int_equal(sp_fs_open(&fs, f->dir, &o, NULL), 0);
    sp_error *err = NULL;
    int r = sp_fs_str_replace(NULL, fs, "f.txt", "one", "two", false, &err);
    expect_err(r, err, SP_EREADONLY, NULL);
    err = NULL;
    r = sp_fs_insert(fs, "f.txt", 0, "zero", &err);
    expect_err(r, err, SP_EREADONLY, NULL);
    assert_content(f->dir, "f.txt", "one\n");
    sp_fs_free(fs);
}

static void test_binary_refused(void **state)
{
    fixture *f = *state;
    tu_write_n(f->dir, "bin.dat", "abc\0def\n", 8, 0644);
    tu_write(f->dir, "latin1.txt", "caf\xe9\n", 0644);
    sp_error *err = NULL;
    int r = sp_fs_str_replace(NULL, f->fs, "bin.dat", "abc", "x", false, &err);
    assert_int_equal(err ? err->reason : -1, SP_R_NOT_TEXT); /* the tools' JSON says not_text */
    expect_err(r, err, SP_EINVAL, "bin.dat");
    err = NULL;
    r = sp_fs_str_replace(NULL, f->fs, "latin1.txt", "caf", "x", false, &err);
    expect_err(r, err, SP_EINVAL, "latin1.txt");
    err = NULL;
    r = sp_fs_insert(f->fs, "bin.dat", 0, "x", &err);
    expect_err(r, err, SP_EINVAL, "bin.dat");
    char *got = tu_read(f->dir, "latin1.txt", NULL);
    assert_string_equal(got, "caf\xe9\n");
    free(got);

    /* Arguments: empty old_str, invalid UTF-8 in new text, a folder. */
    tu_write(f->dir, "f.txt", "one\n", 0644);
    err = NULL;
    r = sp_fs_str_replace(NULL, f->fs, "f.txt", "", "x", false, &err);
    expect_err(r, err, SP_EINVAL, "old_str");
    err = NULL;
    r = sp_fs_str_replace(NULL, f->fs, "f.txt", "one", "\xff", false, &err);
    expect_err(r, err, SP_EINVAL, "UTF-8");
    err = NULL;
    r = sp_fs_insert(f->fs, "f.txt", 0, "\xc3", &err);
    expect_err(r, err, SP_EINVAL, "UTF-8");
    tu_mkdir(f->dir, "d");
    err = NULL;
    r = sp_fs_str_replace(NULL, f->fs, "d", "a", "b", false, &err);
    expect_err(r, err, SP_EINVAL, NULL);
    assert_content(f->dir, "f.txt", "one\n");
}

static void test_too_big(void **state)
{
    fixture *f = *state;
    sp_fs_opts o = SP_FS_OPTS_INIT;
    o.max_write_bytes = 16;
    sp_fs *fs = NULL;
    assert_int_equal(sp_fs_open(&fs, f->dir, &o, NULL), 0);
    tu_write(f->dir, "f.txt", "0123456789\n", 0644);
    sp_error *err = NULL;
    int r = sp_fs_str_replace(NULL, fs, "f.txt", "5", "five and more", false, &err);
    expect_err(r, err, SP_ETOOBIG, NULL);
    err = NULL;
    r = sp_fs_insert(fs, "f.txt", -1, "a long line of text", &err);
    expect_err(r, err, SP_ETOOBIG, NULL);
    assert_content(f->dir, "f.txt", "0123456789\n");
    replace_ok(fs, "f.txt", "5", "five", false, 1);
    assert_content(f->dir, "f.txt", "01234five6789\n");
    sp_fs_free(fs);
}

static void test_insert(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "f.txt", "a\nb\nc\n", 0644);
    insert_ok(f->fs, "f.txt", 0, "start");
    assert_content(f->dir, "f.txt", "start\na\nb\nc\n");
    insert_ok(f->fs, "f.txt", -1, "end\n");
    assert_content(f->dir, "f.txt", "start\na\nb\nc\nend\n");
    insert_ok(f->fs, "f.txt", 2, "mid1\nmid2");
    assert_content(f->dir, "f.txt", "start\na\nmid1\nmid2\nb\nc\nend\n");
    /* After the last line by number. */
    insert_ok(f->fs, "f.txt", 7, "last");
    assert_content(f->dir, "f.txt", "start\na\nmid1\nmid2\nb\nc\nend\nlast\n");
    insert_ok(f->fs, "f.txt", 1, "");
    assert_content(f->dir, "f.txt", "start\n\na\nmid1\nmid2\nb\nc\nend\nlast\n");
}

static void test_insert_out_of_range(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "f.txt", "a\nb\nc\n", 0644);
    sp_error *err = NULL;
    int r = sp_fs_insert(f->fs, "f.txt", 4, "x", &err);
    expect_err(r, err, SP_EINVAL, "has 3 lines");
    err = NULL;
    r = sp_fs_insert(f->fs, "f.txt", -2, "x", &err);
    expect_err(r, err, SP_EINVAL, NULL);
    assert_content(f->dir, "f.txt", "a\nb\nc\n");

    err = NULL;
    r = sp_fs_insert(f->fs, "missing.txt", 0, "x", &err);
    assert_int_equal(r, SP_ENOTFOUND);
    sp_error_free(err);
    assert_false(tu_exists(f->dir, "missing.txt"));
}

static void test_insert_no_final_newline(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "f.txt", "a\nb", 0644);
    insert_ok(f->fs, "f.txt", -1, "c");
    assert_content(f->dir, "f.txt", "a\nb\nc\n");

    tu_write(f->dir, "g.txt", "a\nb", 0644);
    insert_ok(f->fs, "g.txt", 2, "c");
    assert_content(f->dir, "g.txt", "a\nb\nc\n");

    /* In the middle the last line is left as it was. */
    tu_write(f->dir, "h.txt", "a\nb", 0644);
    insert_ok(f->fs, "h.txt", 1, "x");
    assert_content(f->dir, "h.txt", "a\nx\nb");
    insert_ok(f->fs, "h.txt", 0, "y");
    assert_content(f->dir, "h.txt", "y\na\nx\nb");

    sp_error *err = NULL;
    int r = sp_fs_insert(f->fs, "h.txt", 5, "x", &err);
    expect_err(r, err, SP_EINVAL, "has 4 lines");

    /* An empty file has no lines. */
    tu_write(f->dir, "e.txt", "", 0644);
    insert_ok(f->fs, "e.txt", 0, "first");
    assert_content(f->dir, "e.txt", "first\n");
    tu_write(f->dir, "e2.txt", "", 0644);
    insert_ok(f->fs, "e2.txt", -1, "only");
    assert_content(f->dir, "e2.txt", "only\n");
    err = NULL;
    tu_write(f->dir, "e3.txt", "", 0644);
    r = sp_fs_insert(f->fs, "e3.txt", 1, "x", &err);
    expect_err(r, err, SP_EINVAL, "has 0 lines");
}

static void test_symlinks(void **state)
{
    fixture *f = *state;
    /* A link inside the root: the target is edited, the link stays. */
    tu_write(f->dir, "real.txt", "one\n", 0644);
    tu_symlink("real.txt", f->dir, "link.txt");
    replace_ok(f->fs, "link.txt", "one", "two", false, 1);
    assert_content(f->dir, "real.txt", "two\n");
    char *p = tu_join(f->dir, "link.txt");
    struct stat st;
    assert_int_equal(lstat(p, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    free(p);

    /* A link out of the root is never read or written. */
    tu_write(f->outside, "victim.txt", "precious\n", 0644);
    char *victim = tu_join(f->outside, "victim.txt");
    tu_symlink(victim, f->dir, "out.txt");
    tu_symlink(f->outside, f->dir, "outdir");
    free(victim);
    sp_error *err = NULL;
    int r = sp_fs_str_replace(NULL, f->fs, "out.txt", "precious", "gone", false, &err);
    expect_err(r, err, SP_EESCAPE, NULL);
    err = NULL;
    r = sp_fs_insert(f->fs, "out.txt", 0, "gone", &err);
    expect_err(r, err, SP_EESCAPE, NULL);
    err = NULL;
    r = sp_fs_str_replace(NULL, f->fs, "outdir/victim.txt", "precious", "gone", false, &err);
    expect_err(r, err, SP_EESCAPE, NULL);
    err = NULL;
    r = sp_fs_insert(f->fs, "../victim.txt", 0, "gone", &err);
    assert_true(r < 0);
    sp_error_free(err);
    assert_content(f->outside, "victim.txt", "precious\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_replace_unique, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_not_found, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_ambiguous, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mode_preserved, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_too_big, setup, teardown),
        cmocka_unit_test_setup_teardown(test_insert, setup, teardown),
        cmocka_unit_test_setup_teardown(test_insert_out_of_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_insert_no_final_newline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlinks, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
