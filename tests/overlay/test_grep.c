/* Tests for sp_fs_grep(). */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <dirent.h>
#include <pcre2.h>

#include "grep_literal.h"
#include "sandpod/fs.h"

typedef tu_fsfx fixture;
#define setup    tu_fsfx_setup
#define teardown tu_fsfx_teardown

static sp_fs_matches *grep_ok(sp_fs *fs, const char *pattern, const sp_fs_grep_opts *opts)
{
    sp_fs_matches *m = NULL;
    sp_error *err = NULL;
    int r = sp_fs_grep(&m, fs, pattern, opts, &err);
    if (r < 0)
        fail_msg("grep '%s': %d %s", pattern, r, err ? err->message : "?");
    assert_null(err);
    assert_non_null(m);
    return m;
}

static void test_literal(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "a.txt", "hello world\nfoo\nhello again\n", 0644);
    sp_fs_matches *m = grep_ok(f->fs, "hello", NULL);
    assert_int_equal(m->n, 2);
    assert_false(m->truncated);
    assert_int_equal(m->files_searched, 1);
    assert_int_equal(m->files_skipped, 0);
    assert_string_equal(m->v[0].path, "a.txt");
    assert_int_equal(m->v[0].line_number, 1);
    assert_string_equal(m->v[0].line, "hello world");
    assert_int_equal(m->v[0].match_start, 0);
    assert_int_equal(m->v[0].match_end, 5);
    assert_int_equal(m->v[0].byte_offset, 0);
    assert_int_equal(m->v[1].line_number, 3);
    assert_string_equal(m->v[1].line, "hello again");
    assert_int_equal(m->v[1].byte_offset, 16);
    sp_fs_matches_free(m);

    m = grep_ok(f->fs, "absent", NULL);
    assert_int_equal(m->n, 0);
    assert_false(m->truncated);
    sp_fs_matches_free(m);
}

static void test_regex(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "a.txt", "hello world\nfoo 42\nbar\n", 0644);
    sp_fs_matches *m = grep_ok(f->fs, "wor.d$", NULL);
    assert_int_equal(m->n, 1);
    assert_int_equal(m->v[0].line_number, 1);
    assert_int_equal(m->v[0].match_start, 6);
    assert_int_equal(m->v[0].match_end, 11);
    sp_fs_matches_free(m);

    m = grep_ok(f->fs, "^[a-z]+ \\d+$", NULL);
    assert_int_equal(m->n, 1);
    assert_int_equal(m->v[0].line_number, 2);
    assert_string_equal(m->v[0].line, "foo 42");
    assert_int_equal(m->v[0].byte_offset, 12);
    sp_fs_matches_free(m);

    /* ^ anchors at every line start (multiline). */
    m = grep_ok(f->fs, "^bar", NULL);
    assert_int_equal(m->n, 1);
    assert_int_equal(m->v[0].line_number, 3);
    sp_fs_matches_free(m);
}

static void test_case_insensitive(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "a.txt", "Hello\nHELLO\nhello\nbye\n", 0644);
    sp_fs_matches *m = grep_ok(f->fs, "hello", NULL);
    assert_int_equal(m->n, 1);
    assert_int_equal(m->v[0].line_number, 3);
    sp_fs_matches_free(m);

    sp_fs_grep_opts o = SP_FS_GREP_OPTS_INIT;
    o.case_insensitive = true;
    m = grep_ok(f->fs, "hello", &o);
    assert_int_equal(m->n, 3);
    sp_fs_matches_free(m);
}

static void test_fixed_string(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "a.txt", "axbbc x\na.b*c (x)\n", 0644);
    sp_fs_grep_opts o = SP_FS_GREP_OPTS_INIT;
    o.fixed_string = true;
    sp_fs_matches *m = grep_ok(f->fs, "a.b*c (x)", &o);
    assert_int_equal(m->n, 1);
    assert_int_equal(m->v[0].line_number, 2);
    assert_int_equal(m->v[0].match_start, 0);
    assert_int_equal(m->v[0].match_end, 9);
    sp_fs_matches_free(m);

    /* Unbalanced metacharacters are fine as a literal. */
    m = grep_ok(f->fs, "(x", &o);
    assert_int_equal(m->n, 1);
    sp_fs_matches_free(m);

    o.case_insensitive = true;
    m = grep_ok(f->fs, "A.B*C", &o);
    assert_int_equal(m->n, 1);
    sp_fs_matches_free(m);
}

/* Matches stay within a line, as in grep and rg: \s and negated classes
 * do not run over the newline into the next line. */
static void test_line_semantics(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "a.c", "size_t\nfoo_len;\nsize_t  bar_len;\n", 0644);
    sp_fs_matches *m = grep_ok(f->fs, "size_t\\s+\\w+_len", NULL);
    assert_int_equal(m->n, 1);
    assert_int_equal(m->v[0].line_number, 3);
    assert_string_equal(m->v[0].line, "size_t  bar_len;");
    sp_fs_matches_free(m);
    m = grep_ok(f->fs, "t[^x]+f", NULL);
    assert_int_equal(m->n, 0);
    sp_fs_matches_free(m);
}

static void test_glob_filter(void **state)
{
    fixture *f = *state;
    tu_mkdir(f->dir, "src");
    tu_mkdir(f->dir, "src/deep");
    tu_mkdir(f->dir, "docs");
    tu_write(f->dir, "top.c", "needle\n", 0644);
    tu_write(f->dir, "src/a.c", "needle\n", 0644);
    tu_write(f->dir, "src/b.h", "needle\n", 0644);
    tu_write(f->dir, "src/deep/c.c", "needle\n", 0644);
    tu_write(f->dir, "docs/a.md", "needle\n", 0644);

    sp_fs_grep_opts o = SP_FS_GREP_OPTS_INIT;
    o.glob = "**/*.c";
    sp_fs_matches *m = grep_ok(f->fs, "needle", &o);
    assert_int_equal(m->n, 3);
    assert_string_equal(m->v[0].path, "src/a.c");
    assert_string_equal(m->v[1].path, "src/deep/c.c");
    assert_string_equal(m->v[2].path, "top.c");
    sp_fs_matches_free(m);

    /* A glob without '/' matches names at any depth, as in rg. */
    o.glob = "*.c";
    m = grep_ok(f->fs, "needle", &o);
    assert_int_equal(m->n, 3);
    sp_fs_matches_free(m);

    /* A glob with '/' is relative to the searched folder; paths stay
     * relative to the root. */
    o.path = "src";
    o.glob = "*.c";
    m = grep_ok(f->fs, "needle", &o);
    assert_int_equal(m->n, 2);
    assert_string_equal(m->v[0].path, "src/a.c");
    assert_string_equal(m->v[1].path, "src/deep/c.c");
    sp_fs_matches_free(m);
    o.glob = "deep/*.c";
    m = grep_ok(f->fs, "needle", &o);
    assert_int_equal(m->n, 1);
    assert_string_equal(m->v[0].path, "src/deep/c.c");
    sp_fs_matches_free(m);

    o.path = "/workspace/src";
    o.glob = "{*.h,deep/*}";
    m = grep_ok(f->fs, "needle", &o);
    assert_int_equal(m->n, 2);
    assert_string_equal(m->v[0].path, "src/b.h");
    assert_string_equal(m->v[1].path, "src/deep/c.c");
    sp_fs_matches_free(m);

    o.path = NULL;
    o.glob = "docs/*.md";
    m = grep_ok(f->fs, "needle", &o);
    assert_int_equal(m->n, 1);
    assert_string_equal(m->v[0].path, "docs/a.md");
    assert_int_equal(m->files_searched, 1);
    sp_fs_matches_free(m);
}

static void test_single_file(void **state)
{
    fixture *f = *state;
    tu_mkdir(f->dir, "d");
    tu_write(f->dir, "d/a.txt", "needle\n", 0644);
    tu_write(f->dir, "d/b.txt", "needle\n", 0644);
    sp_fs_grep_opts o = SP_FS_GREP_OPTS_INIT;
    o.path = "d/b.txt";
    sp_fs_matches *m = grep_ok(f->fs, "needle", &o);
    assert_int_equal(m->n, 1);
    assert_string_equal(m->v[0].path, "d/b.txt");
    assert_int_equal(m->files_searched, 1);
    sp_fs_matches_free(m);

    sp_error *err = NULL;
    o.path = "d/missing.txt";
    m = NULL;
    assert_int_equal(sp_fs_grep(&m, f->fs, "needle", &o, &err), SP_ENOTFOUND);
    assert_null(m);
    assert_non_null(err);
    sp_error_free(err);
}

static void test_max_matches(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "a.txt", "x\nx\nx\nx\nx\n", 0644);
    tu_write(f->dir, "b.txt", "x\nx\nx\nx\nx\n", 0644);
    sp_fs_grep_opts o = SP_FS_GREP_OPTS_INIT;
    o.max_matches = 3;
    sp_fs_matches *m = grep_ok(f->fs, "x", &o);
    assert_int_equal(m->n, 3);
    assert_true(m->truncated);
    sp_fs_matches_free(m);

    /* Exactly as many matches as allowed is not truncated. */
    o.max_matches = 10;
    m = grep_ok(f->fs, "x", &o);
    assert_int_equal(m->n, 10);
    assert_false(m->truncated);
    sp_fs_matches_free(m);

    o.max_matches = 5;
    m = grep_ok(f->fs, "x", &o);
    assert_int_equal(m->n, 5);
    assert_true(m->truncated);
    sp_fs_matches_free(m);

    /* Default limit: 1000. */
    char *big = malloc(1500 * 2 + 1);
    for (int i = 0; i < 1500; i++)
        big[2 * i] = 'x', big[2 * i + 1] = '\n';
    big[3000] = '\0';
    tu_write(f->dir, "c.txt", big, 0644);
    free(big);
    m = grep_ok(f->fs, "x", NULL);
    assert_int_equal(m->n, 1000);
    assert_true(m->truncated);
    sp_fs_matches_free(m);
}

static void test_sorted(void **state)
{
    fixture *f = *state;
    tu_mkdir(f->dir, "b");
    tu_mkdir(f->dir, "a");
    tu_mkdir(f->dir, "a/b");
    tu_write(f->dir, "b/z.txt", "k\n", 0644);
    tu_write(f->dir, "a/y.txt", "k\nno\nk\n", 0644);
    tu_write(f->dir, "a.txt", "k\n", 0644);
    tu_write(f->dir, "a/b/c.txt", "k\n", 0644);
    tu_write(f->dir, "0.txt", "no\nk\n", 0644);
    sp_fs_matches *m = grep_ok(f->fs, "k", NULL);
    assert_int_equal(m->n, 6);
    assert_int_equal(m->files_searched, 5);
    const char *want[] = {"0.txt", "a.txt", "a/b/c.txt", "a/y.txt", "a/y.txt", "b/z.txt"};
    const size_t lines[] = {2, 1, 1, 1, 3, 1};
    for (size_t i = 0; i < 6; i++) {
        assert_string_equal(m->v[i].path, want[i]);
        assert_int_equal(m->v[i].line_number, lines[i]);
    }
    sp_fs_matches_free(m);
}

static void test_binary_skipped(void **state)
{
    fixture *f = *state;
    tu_write_n(f->dir, "bin.dat", "needle\0\1\2needle\n", 16, 0644);
    tu_write(f->dir, "text.txt", "needle\n", 0644);
    sp_fs_matches *m = grep_ok(f->fs, "needle", NULL);
    assert_int_equal(m->n, 1);
    assert_string_equal(m->v[0].path, "text.txt");
    assert_int_equal(m->files_searched, 1);
    assert_int_equal(m->files_skipped, 1);
    sp_fs_matches_free(m);

    /* A NUL after the first 8 KiB does not make a file binary. */
    size_t n = 10000;
    char *data = malloc(n);
    memset(data, 'a', n);
    memcpy(data, "needle\n", 7);
    data[9000] = '\0';
    tu_write_n(f->dir, "late.dat", data, n, 0644);
    free(data);
    m = grep_ok(f->fs, "needle", NULL);
    assert_int_equal(m->n, 2);
    assert_string_equal(m->v[0].path, "late.dat");
    sp_fs_matches_free(m);
}

static void test_git_skipped(void **state)
{
    fixture *f = *state;
    tu_mkdir(f->dir, ".git");
    tu_write(f->dir, ".git/config", "needle\n", 0644);
    tu_mkdir(f->dir, "sub");
    tu_mkdir(f->dir, "sub/.git");
    tu_write(f->dir, "sub/.git/HEAD", "needle\n", 0644);
    tu_write(f->dir, "sub/.gitignore", "needle\n", 0644);
    /* Hidden names are skipped by default, as in rg. */
    sp_fs_matches *m = grep_ok(f->fs, "needle", NULL);
    assert_int_equal(m->n, 0);
    assert_int_equal(m->ignored, 1); /* sub/.gitignore; .git folders are not even counted */
    sp_fs_matches_free(m);
    /* With hidden, .git folders still are. */
    sp_fs_grep_opts o = SP_FS_GREP_OPTS_INIT;
    o.hidden = true;
    m = grep_ok(f->fs, "needle", &o);
    assert_int_equal(m->n, 1);
    assert_string_equal(m->v[0].path, "sub/.gitignore");
    sp_fs_matches_free(m);
}

/* Recorded from rg 13: `\d` and `\w` are Unicode-aware, a BOM is not
 * part of line 1 (test_search_ref compares live where rg is installed). */
static void test_unicode_and_bom(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "u.txt", "x \xd9\xa3 y\nabc\n", 0644);
    tu_write(f->dir, "bom.txt", "\xef\xbb\xbfneedle\nneedle\n", 0644);
    sp_fs_matches *m = grep_ok(f->fs, "\\d", NULL);
    assert_int_equal(m->n, 1);
    assert_string_equal(m->v[0].path, "u.txt");
    assert_int_equal(m->v[0].match_start, 2);
    assert_int_equal(m->v[0].match_end, 4);
    sp_fs_matches_free(m);
    m = grep_ok(f->fs, "^\\w \\w \\w$", NULL);
    assert_int_equal(m->n, 1);
    sp_fs_matches_free(m);

    m = grep_ok(f->fs, "^needle$", NULL);
    assert_int_equal(m->n, 2);
    assert_string_equal(m->v[0].path, "bom.txt");
    assert_int_equal(m->v[0].line_number, 1);
    assert_string_equal(m->v[0].line, "needle");
    assert_int_equal(m->v[0].match_start, 0);
    assert_int_equal(m->v[0].byte_offset, 3); /* offsets stay file offsets */
    assert_int_equal(m->v[1].line_number, 2);
    assert_int_equal(m->v[1].byte_offset, 10);
    sp_fs_matches_free(m);
}

/* rg's -g rules: the last matching glob wins, '!' excludes, folders too. */
static void test_glob_negation(void **state)
{
    fixture *f = *state;
    tu_mkdir(f->dir, "vendor");
    tu_write(f->dir, "a.js", "needle\n", 0644);
    tu_write(f->dir, "a.min.js", "needle\n", 0644);
    tu_write(f->dir, "vendor/v.js", "needle\n", 0644);
    tu_write(f->dir, "n.txt", "needle\n", 0644);
    sp_fs_grep_opts o = SP_FS_GREP_OPTS_INIT;
    const char *const g1[] = {"*.js", "!*.min.js", NULL};
    o.globs = g1;
    sp_fs_matches *m = grep_ok(f->fs, "needle", &o);
    assert_int_equal(m->n, 2);
    assert_string_equal(m->v[0].path, "a.js");
    assert_string_equal(m->v[1].path, "vendor/v.js");
    sp_fs_matches_free(m);

    const char *const g2[] = {"!*.min.js", "*.js", NULL};
    o.globs = g2;
    m = grep_ok(f->fs, "needle", &o);
    assert_int_equal(m->n, 3);
    sp_fs_matches_free(m);

    /* `glob` is the first of the list; excluding a folder prunes it. */
    o.globs = NULL;
    o.glob = "!vendor";
    m = grep_ok(f->fs, "needle", &o);
    assert_int_equal(m->n, 3);
    assert_string_equal(m->v[2].path, "n.txt");
    sp_fs_matches_free(m);

    o.glob = "!";
    sp_error *err = NULL;
    assert_int_equal(sp_fs_grep(&m, f->fs, "needle", &o, &err), SP_EINVAL);
    assert_non_null(strstr(err->message, "glob"));
    sp_error_free(err);
}

/* Ignore files are read like everything else: never through a symlink
 * that leads out of the workspace (the walk's own fds, O_NOFOLLOW on every
 * component of .git/info/exclude). */
static void test_ignore_files_contained(void **state)
{
    fixture *f = *state;
    tu_mkdir(f->outside, "info");
    tu_write(f->outside, "info/exclude", "a.txt\n", 0644);
    tu_write(f->outside, "ign", "*\n", 0644);
    tu_symlink(f->outside, f->dir, ".git");
    char *ign = tu_join(f->outside, "ign");
    tu_symlink(ign, f->dir, ".gitignore");
    free(ign);
    tu_mkdir(f->dir, "sub");
    tu_mkdir(f->dir, "sub/.git");
    tu_symlink(f->outside, f->dir, "sub/.git/info");
    tu_write(f->dir, "a.txt", "needle\n", 0644);
    tu_write(f->dir, "sub/a.txt", "needle\n", 0644);
    sp_fs_matches *m = grep_ok(f->fs, "needle", NULL);
    assert_int_equal(m->n, 2);
    assert_string_equal(m->v[0].path, "a.txt");
    assert_string_equal(m->v[1].path, "sub/a.txt");
    sp_fs_matches_free(m);

    /* The same files inside the workspace are honoured. */
    char *link = tu_join(f->dir, "sub/.git/info");
    assert_int_equal(unlink(link), 0);
    free(link);
    tu_mkdir(f->dir, "sub/.git/info");
    tu_write(f->dir, "sub/.git/info/exclude", "a.txt\n", 0644);
    m = grep_ok(f->fs, "needle", NULL);
    assert_int_equal(m->n, 1);
    assert_string_equal(m->v[0].path, "a.txt");
    sp_fs_matches_free(m);
}

static void test_denied_skipped(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "secret.env", "needle\n", 0644);
    tu_write(f->dir, "ok.txt", "needle\n", 0644);
    const char *deny[] = {"*.env", NULL};
    sp_fs_opts fo = SP_FS_OPTS_INIT;
    fo.deny = deny;
    sp_fs *fs = NULL;
    assert_int_equal(sp_fs_open(&fs, f->dir, &fo, NULL), 0);
    sp_fs_matches *m = grep_ok(fs, "needle", NULL);
    assert_int_equal(m->n, 1);
    assert_string_equal(m->v[0].path, "ok.txt");
    sp_fs_matches_free(m);

    sp_fs_grep_opts o = SP_FS_GREP_OPTS_INIT;
    o.path = "secret.env";
    m = NULL;
    assert_int_equal(sp_fs_grep(&m, fs, "needle", &o, NULL), SP_EDENIED);
    assert_null(m);
    sp_fs_free(fs);
}

static void test_symlinks_not_followed(void **state)
{
    fixture *f = *state;
    tu_write(f->outside, "secret.txt", "needle TOPSECRET\n", 0644);
    char *secret = tu_join(f->outside, "secret.txt");
    tu_symlink(f->outside, f->dir, "out_dir");
    tu_symlink(secret, f->dir, "out_file.txt");
    tu_symlink("../../../../../../../../../../..", f->dir, "up");
    tu_write(f->dir, "real.txt", "needle here\n", 0644);
    tu_symlink("real.txt", f->dir, "alias.txt");
    tu_mkdir(f->dir, "sub");
    tu_symlink("..", f->dir, "sub/loop");
    free(secret);

    sp_fs_matches *m = grep_ok(f->fs, "needle", NULL);
    /* Only the real file: not the link to it, nothing outside, no loop. */
    assert_int_equal(m->n, 1);
    assert_string_equal(m->v[0].path, "real.txt");
    for (size_t i = 0; i < m->n; i++)
        assert_null(strstr(m->v[i].line, "TOPSECRET"));
    sp_fs_matches_free(m);

    m = grep_ok(f->fs, "TOPSECRET", NULL);
    assert_int_equal(m->n, 0);
    sp_fs_matches_free(m);

    /* Naming a link that leaves the root is an escape, not a search. */
    const char *escapes[] = {"out_dir", "out_file.txt", "up", "out_dir/secret.txt"};
    for (size_t i = 0; i < sizeof(escapes) / sizeof(*escapes); i++) {
        sp_fs_grep_opts o = SP_FS_GREP_OPTS_INIT;
        o.path = escapes[i];
        sp_error *err = NULL;
        m = NULL;
        int r = sp_fs_grep(&m, f->fs, "TOPSECRET", &o, &err);
        if (r >= 0)
            fail_msg("grep in %s succeeded with %zu matches", escapes[i], m ? m->n : 0);
        assert_null(m);
        assert_non_null(err);
        assert_null(strstr(err->message, "TOPSECRET"));
        sp_error_free(err);
    }
}

static void test_invalid_regex(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "a.txt", "abc\n", 0644);
    sp_fs_matches *m = NULL;
    sp_error *err = NULL;
    assert_int_equal(sp_fs_grep(&m, f->fs, "ab(c", NULL, &err), SP_EINVAL);
    assert_null(m);
    assert_non_null(err);
    assert_int_equal(err->code, SP_EINVAL);
    assert_string_equal(err->message, "invalid regex at offset 4: missing closing parenthesis");
    sp_error_free(err);

    err = NULL;
    assert_int_equal(sp_fs_grep(&m, f->fs, "a[", NULL, &err), SP_EINVAL);
    assert_non_null(strstr(err->message, "invalid regex at offset"));
    sp_error_free(err);

    /* Without an error object the code alone comes back. */
    assert_int_equal(sp_fs_grep(&m, f->fs, "*", NULL, NULL), SP_EINVAL);
    assert_null(m);
}

static void test_empty_matches(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "a.txt", "one\n\nthree\n", 0644);
    tu_write(f->dir, "b.txt", "no\nnewline", 0644);
    tu_write(f->dir, "empty.txt", "", 0644);
    const char *patterns[] = {"^", "$", "x*", "", "(?=)", "\\b|^"};
    for (size_t i = 0; i < sizeof(patterns) / sizeof(*patterns); i++) {
        sp_fs_matches *m = grep_ok(f->fs, patterns[i], NULL);
        /* Every line once; none past the final newline or in the empty file. */
        if (m->n != 5)
            fail_msg("pattern '%s': %zu matches", patterns[i], m->n);
        assert_string_equal(m->v[0].path, "a.txt");
        assert_int_equal(m->v[0].line_number, 1);
        assert_int_equal(m->v[1].line_number, 2);
        assert_string_equal(m->v[1].line, "");
        assert_int_equal(m->v[2].line_number, 3);
        assert_string_equal(m->v[3].path, "b.txt");
        assert_int_equal(m->v[4].line_number, 2);
        assert_string_equal(m->v[4].line, "newline");
        for (size_t j = 0; j < m->n; j++)
            assert_true(m->v[j].match_start <= m->v[j].match_end);
        assert_int_equal(m->files_searched, 3);
        sp_fs_matches_free(m);
    }
}

static void test_match_offsets(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "a.txt", "first\nabc needle def needle\nx\n", 0644);
    sp_fs_matches *m = grep_ok(f->fs, "needle", NULL);
    /* One match per line: the first on it. */
    assert_int_equal(m->n, 1);
    assert_int_equal(m->v[0].line_number, 2);
    assert_string_equal(m->v[0].line, "abc needle def needle");
    assert_int_equal(m->v[0].match_start, 4);
    assert_int_equal(m->v[0].match_end, 10);
    assert_int_equal(m->v[0].byte_offset, 10);
    sp_fs_matches_free(m);

    /* A match running over a newline is cut at the end of its line. */
    m = grep_ok(f->fs, "def needle\\nx", NULL);
    assert_int_equal(m->n, 1);
    assert_int_equal(m->v[0].line_number, 2);
    assert_int_equal(m->v[0].match_start, 11);
    assert_int_equal(m->v[0].match_end, 21);
    sp_fs_matches_free(m);

    /* Lines after a multi-line match are still searched. */
    m = grep_ok(f->fs, "st\\nabc|x", NULL);
    assert_int_equal(m->n, 2);
    assert_int_equal(m->v[0].line_number, 1);
    assert_int_equal(m->v[1].line_number, 3);
    sp_fs_matches_free(m);
}

static void test_utf8(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "u.txt", "x\nh\xc3\xa9llo w\xc3\xb6rld \xe2\x82\xac\n", 0644);
    sp_fs_matches *m = grep_ok(f->fs, "w\xc3\xb6rld", NULL);
    assert_int_equal(m->n, 1);
    assert_int_equal(m->v[0].line_number, 2);
    assert_int_equal(m->v[0].match_start, 7);
    assert_int_equal(m->v[0].match_end, 13);
    assert_int_equal(m->v[0].byte_offset, 9);
    sp_fs_matches_free(m);

    /* '.' is one code point, not one byte. */
    m = grep_ok(f->fs, "^h.llo", NULL);
    assert_int_equal(m->n, 1);
    assert_int_equal(m->v[0].match_end, 6);
    sp_fs_matches_free(m);

    m = grep_ok(f->fs, "d .$", NULL);
    assert_int_equal(m->n, 1);
    sp_fs_matches_free(m);

    sp_fs_grep_opts o = SP_FS_GREP_OPTS_INIT;
    o.case_insensitive = true;
    m = grep_ok(f->fs, "H\xc3\x89LLO W\xc3\x96RLD", &o);
    assert_int_equal(m->n, 1);
    sp_fs_matches_free(m);
}

static void test_invalid_utf8_file(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "bad.txt", "ok\nabc \xff\xfe needle \xc3\n\xed\xa0\x80 tail\n", 0644);
    sp_fs_matches *m = grep_ok(f->fs, "needle", NULL);
    assert_int_equal(m->n, 1);
    assert_int_equal(m->v[0].line_number, 2);
    assert_int_equal(m->v[0].match_start, 7);
    assert_int_equal(m->v[0].match_end, 13);
    assert_int_equal(m->files_skipped, 0);
    sp_fs_matches_free(m);

    m = grep_ok(f->fs, "tail$", NULL);
    assert_int_equal(m->n, 1);
    assert_int_equal(m->v[0].line_number, 3);
    sp_fs_matches_free(m);

    m = grep_ok(f->fs, "^.*$", NULL);
    assert_true(m->n >= 1);
    sp_fs_matches_free(m);
}

static void test_long_line_cut(void **state)
{
    fixture *f = *state;
    sp_fs_opts fo = SP_FS_OPTS_INIT;
    fo.max_line_bytes = 10;
    sp_fs *fs = NULL;
    assert_int_equal(sp_fs_open(&fs, f->dir, &fo, NULL), 0);
    /* 9 bytes, then a 2-byte code point straddling the cut. */
    tu_write(f->dir, "a.txt", "aaaaaaaaa\xc3\xa9 needle\nshort needle\n", 0644);
    sp_fs_matches *m = grep_ok(fs, "needle", NULL);
    assert_int_equal(m->n, 2);
    assert_string_equal(m->v[0].line, "aaaaaaaaa");
    assert_int_equal(m->v[0].match_start, 9);
    assert_int_equal(m->v[0].match_end, 9);
    assert_int_equal(m->v[0].byte_offset, 12);
    assert_string_equal(m->v[1].line, "short need");
    assert_int_equal(m->v[1].match_start, 6);
    assert_int_equal(m->v[1].match_end, 10);
    sp_fs_matches_free(m);
    sp_fs_free(fs);

    /* The default cut is 2000 bytes. */
    size_t n = 5000;
    char *line = malloc(n + 2);
    memset(line, 'b', n);
    memcpy(line + 10, "needle", 6);
    line[n] = '\n';
    line[n + 1] = '\0';
    tu_write(f->dir, "long.txt", line, 0644);
    free(line);
    m = grep_ok(f->fs, "needle", NULL);
    assert_int_equal(m->n, 3);
    assert_string_equal(m->v[2].path, "long.txt");
    assert_int_equal(strlen(m->v[2].line), 2000);
    assert_int_equal(m->v[2].match_start, 10);
    assert_int_equal(m->v[2].match_end, 16);
    sp_fs_matches_free(m);
}

static void test_bad_arguments(void **state)
{
    fixture *f = *state;
    sp_fs_matches *m = NULL;
    assert_int_equal(sp_fs_grep(&m, f->fs, NULL, NULL, NULL), SP_EINVAL);
    sp_fs_grep_opts o = SP_FS_GREP_OPTS_INIT;
    o.path = "../x";
    assert_true(sp_fs_grep(&m, f->fs, "x", &o, NULL) < 0);
    assert_null(m);
    o.path = NULL;
    o.glob = "[abc";
    sp_error *err = NULL;
    assert_int_equal(sp_fs_grep(&m, f->fs, "x", &o, &err), SP_EINVAL);
    assert_non_null(err);
    sp_error_free(err);
    sp_fs_matches_free(NULL);
}

/* The required literal of a pattern (the prefilter's): NULL = none. */
static void test_required_literal(void **state)
{
    (void)state;
    static const struct {
        const char *pattern;
        bool fixed, caseless;
        const char *want;
    } cases[] = {
        {"fcntl\\s*\\(", false, false, "fcntl"},
        {"\\w+_t\\b", false, false, "_t"},
        {"PTHREAD_MUTEX_INITIALIZER", false, false, "PTHREAD_MUTEX_INITIALIZER"},
        /* Ignoring case, k and s (and anything not ASCII) cut the run. */
        {"sockaddr_in6", false, true, "addr_in6"},
        {"Kelvin", true, true, "elvin"},
        {"caf\xc3\xa9s", false, true, "caf"},
        {"caf\xc3\xa9", false, false, "caf\xc3\xa9"},
        /* An optional atom is not required; a repeated one ends the run. */
        {"colou?r", false, false, "colo"},
        {"caf\xc3\xa9?x", false, false, "caf"},
        {"ab*c", false, false, "a"},
        {"x{2}yz", false, false, "yz"},
        {"x{0,3}yzw", false, false, "yzw"},
        {"ab+cd", false, false, "ab"},
        {"(foo)?barbaz", false, false, "barbaz"},
        {"(?:foobar)baz", false, false, "foobar"},
        {"(foobar)*baz", false, false, "baz"},
        {"(a|b)cde", false, false, "cde"},
        {"\\Qa.b\\E?cd", false, false, "a."},
        {"\\Qa(b\\E", false, false, "a(b"},
        {"a\\.b", false, false, "a.b"},
        {"[abc]def", false, false, "def"},
        {"[]x]yz", false, false, "yz"},
        {"[^]x]yz", false, false, "yz"},
        {"[[:alpha:]]+foo", false, false, "foo"},
        {"\\p{Lu}abc", false, false, "abc"},
        {"\\pLabc", false, false, "abc"},
        {"a.b*c", true, false, "a.b*c"},
        {"tab\\there", false, false, "tab\there"},
        /* Whatever is not understood: no literal. */
        {"foo|barbaz", false, false, NULL},
        {"(?i)abc", false, false, NULL},
        {"(?=x)abc", false, false, NULL},
        {"(?<n>ab)cd", false, false, NULL},
        {"(*UTF)abc", false, false, NULL},
        {"\\x41bc", false, false, NULL},
        {"(ab)c\\1", false, false, NULL},
        {"a{,3}bc", false, false, NULL},
        {"abc\\z", false, false, NULL},
        {"a{b", false, false, NULL},
        {"[abc", false, false, NULL},
        {"(abc", false, false, NULL},
        {"abc\\ndef", false, false, NULL},
        {"\\w+", false, false, NULL},
        {"ks", false, true, NULL},
    };
    sp_buf b = SP_BUF_INIT;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bool got =
            sp_grep_required_literal(&b, cases[i].pattern, cases[i].fixed, cases[i].caseless);
        if (!cases[i].want) {
            if (got)
                fail_msg("'%s': literal '%.*s', none expected", cases[i].pattern, (int)b.len,
                         b.data);
            assert_int_equal(b.len, 0);
            continue;
        }
        if (!got || b.len != strlen(cases[i].want) || memcmp(b.data, cases[i].want, b.len) != 0)
            fail_msg("'%s': literal '%.*s', want '%s'", cases[i].pattern, got ? (int)b.len : 0,
                     got ? b.data : "", cases[i].want);
    }
    sp_buf_dispose(&b);
}

/* The prefilter's case rule rests on this: under PCRE2's Unicode case
 * folding, the only non-ASCII partners of ASCII characters are U+212A
 * KELVIN SIGN (k) and U+017F LATIN SMALL LETTER LONG S (s). A PCRE2 that
 * adds one must fail here. */
static void test_ascii_case_partners(void **state)
{
    (void)state;
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    for (int ch = 0x20; ch < 0x7f; ch++) {
        char pat[16];
        snprintf(pat, sizeof(pat), "\\x{%x}", ch);
        int ec;
        PCRE2_SIZE eo;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP | PCRE2_CASELESS, &ec, &eo, NULL);
        assert_non_null(re);
        for (uint32_t c = 0x80; c < 0x110000; c++) {
            if (c >= 0xd800 && c < 0xe000)
                continue;
            unsigned char u[4];
            size_t n;
            if (c < 0x800) {
                u[0] = (unsigned char)(0xc0 | c >> 6);
                u[1] = (unsigned char)(0x80 | (c & 0x3f));
                n = 2;
            } else if (c < 0x10000) {
                u[0] = (unsigned char)(0xe0 | c >> 12);
                u[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
                u[2] = (unsigned char)(0x80 | (c & 0x3f));
                n = 3;
            } else {
                u[0] = (unsigned char)(0xf0 | c >> 18);
                u[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3f));
                u[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
                u[3] = (unsigned char)(0x80 | (c & 0x3f));
                n = 4;
            }
            if (pcre2_match(re, u, n, 0, PCRE2_ANCHORED, md, NULL) < 0)
                continue;
            bool known = (c == 0x212a && (ch == 'k' || ch == 'K')) ||
                         (c == 0x17f && (ch == 's' || ch == 'S'));
            if (!known)
                fail_msg("'%c' ignoring case matches U+%04X: grep_literal.c must cut there", ch,
                         (unsigned)c);
        }
        pcre2_code_free(re);
    }
    pcre2_match_data_free(md);
}

/* Lines of `m` as "path:line" joined by ' ', for one comparison. */
static char *where(const sp_fs_matches *m)
{
    sp_buf b = SP_BUF_INIT;
    for (size_t i = 0; i < m->n; i++)
        sp_buf_printf(&b, "%s%s:%zu", i ? " " : "", m->v[i].path, m->v[i].line_number);
    return sp_buf_steal(&b);
}

static void expect_where(sp_fs *fs, const char *pattern, bool ci, bool fixed, const char *want)
{
    sp_fs_grep_opts o = SP_FS_GREP_OPTS_INIT;
    o.case_insensitive = ci;
    o.fixed_string = fixed;
    sp_fs_matches *m = grep_ok(fs, pattern, &o);
    char *got = where(m);
    if (strcmp(got, want) != 0)
        fail_msg("grep%s%s '%s': got [%s], want [%s]", ci ? " -i" : "", fixed ? " -F" : "", pattern,
                 got, want);
    free(got);
    sp_fs_matches_free(m);
}

/* Matches that a prefilter on the wrong literal, or one that folds case
 * as ASCII does, would drop: each must still be found. */
static void test_prefilter_keeps_matches(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "case.txt",
             "\xc5\xbf"
             "ocket here\n" /* U+017F LONG S: matches s ignoring case */
             "SOCKET\n"
             "soc ket\n"
             "\xe2\x84\xaa"
             "ernel\n" /* U+212A KELVIN SIGN: matches k ignoring case */
             "KERNEL\n"
             "STRA\xe1\xba\x9e"
             "E\n" /* U+1E9E CAPITAL SHARP S, partner of U+00DF */
             "plain\n",
             0644);
    expect_where(f->fs, "socket", true, false, "case.txt:1 case.txt:2");
    expect_where(f->fs, "socket", true, true, "case.txt:1 case.txt:2");
    expect_where(f->fs, "kernel", true, false, "case.txt:4 case.txt:5");
    expect_where(f->fs, "kernel", true, true, "case.txt:4 case.txt:5");
    expect_where(f->fs, "\\bkernel\\b", true, false, "case.txt:4 case.txt:5");
    expect_where(f->fs,
                 "stra\xc3\x9f"
                 "e",
                 true, false, "case.txt:6");
    expect_where(f->fs, "socket", false, false, "");

    tu_write(f->dir, "opt.txt",
             "color\n"
             "colour\n"
             "ac\n"
             "bar alone\n"
             "yz\n"
             "a.c\n"
             "_t at the start\n"
             "size_t n;\n"
             "caf\xc3\xa9x y\n"
             "cafx\n",
             0644);
    expect_where(f->fs, "colou?r", false, false, "opt.txt:1 opt.txt:2");
    expect_where(f->fs, "ab*c", false, false, "opt.txt:3");
    expect_where(f->fs, "(foo)?bar", false, false, "opt.txt:4");
    expect_where(f->fs, "foo|bar", false, false, "opt.txt:4");
    expect_where(f->fs, "x{0}yz", false, false, "opt.txt:5");
    expect_where(f->fs, "\\Qa.b\\E?c", false, false, "opt.txt:6");
    expect_where(f->fs, "\\w+_t\\b", false, false, "opt.txt:8");
    expect_where(f->fs, "\\w*_t\\b", false, false, "opt.txt:7 opt.txt:8");
    expect_where(f->fs, "caf\xc3\xa9?x", false, false, "opt.txt:9 opt.txt:10");
    expect_where(f->fs, "^size_t", false, false, "opt.txt:8");
    expect_where(f->fs, "n;$", false, false, "opt.txt:8");
}

/* Prefiltered lines keep grep's line semantics: \b and ^ see the byte
 * before the line, $ its end, offsets are the file's. */
static void test_prefilter_line_context(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "l.txt", "xfoo_t\nfoo_t bar\n  foo_t\nfoo_tx\n", 0644);
    sp_fs_matches *m = grep_ok(f->fs, "\\bfoo_t\\b", NULL);
    assert_int_equal(m->n, 2);
    assert_int_equal(m->v[0].line_number, 2);
    assert_int_equal(m->v[0].byte_offset, 7);
    assert_int_equal(m->v[0].match_start, 0);
    assert_int_equal(m->v[0].match_end, 5);
    assert_int_equal(m->v[1].line_number, 3);
    assert_int_equal(m->v[1].match_start, 2);
    assert_int_equal(m->v[1].byte_offset, 19);
    sp_fs_matches_free(m);
    expect_where(f->fs, "^foo_t", false, false, "l.txt:2 l.txt:4");
    expect_where(f->fs, "foo_t$", false, false, "l.txt:1 l.txt:3");
    /* \s* stops at the line's end, as rg's lines do. */
    expect_where(f->fs, "foo_t\\s*bar", false, false, "l.txt:2");
    expect_where(f->fs, "foo_t\\s*\\w", false, false, "l.txt:2 l.txt:4");
}

static size_t open_fds(void)
{
    size_t n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* Files are searched by several threads, yet the answer, the place where
 * max_matches cuts it and the counts are those of a walk on one thread;
 * no fd is left open. Run many times to give a race its chance. */
static void test_threads_cut_like_one(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, ".gitignore", "*.skip\n", 0644);
    for (int i = 0; i < 200; i++) {
        char name[32];
        snprintf(name, sizeof(name), "f%03d.skip", i);
        tu_write(f->dir, name, "x\n", 0644);
        snprintf(name, sizeof(name), "f%03d.txt", i);
        if (i == 20)
            tu_write_n(f->dir, name, "x\n\0binary", 10, 0644);
        else
            tu_write(f->dir, name, "x\nx\nyes x\n", 0644);
    }
    size_t fds = open_fds();
    for (int round = 0; round < 20; round++) {
        sp_fs_grep_opts o = SP_FS_GREP_OPTS_INIT;
        o.max_matches = 250;
        sp_fs_matches *m = grep_ok(f->fs, "x", &o);
        /* f000..f083 minus the binary f020: 83 files of 3 matches = 249,
         * then the 250th is f084's first and its second proves more. */
        assert_int_equal(m->n, 250);
        assert_true(m->truncated);
        assert_string_equal(m->v[249].path, "f084.txt");
        assert_int_equal(m->v[249].line_number, 1);
        assert_string_equal(m->v[248].path, "f083.txt");
        assert_int_equal(m->v[248].line_number, 3);
        assert_int_equal(m->files_searched, 84);
        assert_int_equal(m->files_skipped, 1);
        assert_int_equal(m->ignored, 1 + 85); /* .gitignore, f000..f084.skip */
        sp_fs_matches_free(m);

        o.max_matches = 199 * 3;
        m = grep_ok(f->fs, "x", &o);
        assert_int_equal(m->n, 199 * 3);
        assert_false(m->truncated);
        assert_int_equal(m->files_searched, 199);
        assert_int_equal(m->files_skipped, 1);
        assert_int_equal(m->ignored, 201);
        for (size_t i = 1; i < m->n; i++)
            assert_true(strcmp(m->v[i - 1].path, m->v[i].path) <= 0);
        sp_fs_matches_free(m);

        o.max_matches = 0;
        m = grep_ok(f->fs, "yes", &o);
        assert_int_equal(m->n, 199);
        assert_false(m->truncated);
        sp_fs_matches_free(m);
        assert_int_equal(open_fds(), fds);
    }
}

/* Line numbers stay right across long files (the newline count works on
 * words, in rounds of 255). */
static void test_line_numbers_long_file(void **state)
{
    fixture *f = *state;
    sp_buf b = SP_BUF_INIT;
    for (int i = 1; i <= 6000; i++) {
        for (int k = 0; k < i % 23; k++)
            sp_buf_addc(&b, 'a' + (char)(k % 26));
        sp_buf_adds(&b, i % 7 == 0 ? " hit\n" : "\n");
    }
    tu_write(f->dir, "long.txt", b.data, 0644);
    sp_buf_dispose(&b);
    sp_fs_grep_opts o = SP_FS_GREP_OPTS_INIT;
    o.max_matches = 10000;
    const char *patterns[] = {"hit", "\\w*\\shit$", "[ ]hit"};
    for (size_t p = 0; p < sizeof(patterns) / sizeof(patterns[0]); p++) {
        sp_fs_matches *m = grep_ok(f->fs, patterns[p], &o);
        assert_int_equal(m->n, 6000 / 7);
        for (size_t i = 0; i < m->n; i++)
            assert_int_equal(m->v[i].line_number, 7 * (i + 1));
        sp_fs_matches_free(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_literal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_regex, setup, teardown),
        cmocka_unit_test_setup_teardown(test_case_insensitive, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fixed_string, setup, teardown),
        cmocka_unit_test_setup_teardown(test_line_semantics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_glob_filter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unicode_and_bom, setup, teardown),
        cmocka_unit_test_setup_teardown(test_glob_negation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ignore_files_contained, setup, teardown),
        cmocka_unit_test_setup_teardown(test_single_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_matches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sorted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_git_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_denied_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlinks_not_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_regex, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_matches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_match_offsets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_utf8, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_utf8_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_long_line_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
        cmocka_unit_test(test_required_literal),
        cmocka_unit_test(test_ascii_case_partners),
        cmocka_unit_test_setup_teardown(test_prefilter_keeps_matches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prefilter_line_context, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads_cut_like_one, setup, teardown),
        cmocka_unit_test_setup_teardown(test_line_numbers_long_file, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
