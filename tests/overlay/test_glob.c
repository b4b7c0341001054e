/* The glob dialect: matcher, compile errors, pruning, globsets and
 * sp_fs_glob() over a real tree. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "fs_internal.h"
#include "glob.h"
#include "sandpod/fs.h"

/* ------------------------------------------------------------ helpers -- */

static sp_glob *compile_ok(const char *pattern)
{
    sp_glob *g = NULL;
    sp_error *err = NULL;
    int rc = sp_glob_compile(&g, pattern, &err);
    if (rc != 0)
        print_error("compile '%s': %s\n", pattern, err ? err->message : "?");
    assert_int_equal(rc, 0);
    assert_non_null(g);
    sp_error_free(err);
    return g;
}

static void check_match(const char *pattern, const char *path, bool want, int line)
{
    sp_glob *g = compile_ok(pattern);
    bool got = sp_glob_match(g, path);
    sp_glob_free(g);
    if (got != want)
        fail_msg("line %d: '%s' against '%s': got %s", line, pattern, path,
                 got ? "match" : "no match");
}
#define YES(p, s) check_match((p), (s), true, __LINE__)
#define NO(p, s)  check_match((p), (s), false, __LINE__)

static void check_below(const char *pattern, const char *dir, bool want, int line)
{
    sp_glob *g = compile_ok(pattern);
    bool got = sp_glob_could_match_below(g, dir);
    sp_glob_free(g);
    if (got != want)
        fail_msg("line %d: could_match_below('%s', '%s'): got %d", line, pattern, dir, got);
}
#define BELOW(p, d)    check_below((p), (d), true, __LINE__)
#define NOTBELOW(p, d) check_below((p), (d), false, __LINE__)

static void check_compile_fails(const char *pattern, int line)
{
    sp_glob *g = NULL;
    sp_error *err = NULL;
    int rc = sp_glob_compile(&g, pattern, &err);
    if (rc != SP_EINVAL)
        fail_msg("line %d: compiling '%.60s' gave %d, want SP_EINVAL", line, pattern, rc);
    assert_null(g);
    assert_non_null(err);
    assert_int_equal(err->code, SP_EINVAL);
    assert_non_null(err->message);
    assert_true(strlen(err->message) > 0);
    sp_error_free(err);
}
#define BAD(p) check_compile_fails((p), __LINE__)

static char *repeat(const char *unit, size_t times, const char *tail)
{
    sp_buf b = SP_BUF_INIT;
    for (size_t i = 0; i < times; i++)
        sp_buf_adds(&b, unit);
    sp_buf_adds(&b, tail);
    return sp_buf_steal(&b);
}

/* ------------------------------------------------------------ matcher -- */

static void test_literal(void **state)
{
    (void)state;
    YES("a.c", "a.c");
    NO("a.c", "a.cc");
    NO("a.c", "b/a.c");
    YES("src/main.c", "src/main.c");
    NO("src/main.c", "src/main.h");
    NO("*.C", "x.c");
    NO("X", "x");
    YES("./a", "a");
    YES("a//b", "a/b");
    YES("a/./b", "a/b");
}

static void test_star(void **state)
{
    (void)state;
    YES("*.c", "main.c");
    YES("*.c", ".c");
    NO("*.c", "main.h");
    NO("*.c", "src/main.c");
    YES("*", "x");
    YES("*", ".hidden");
    YES("*.c", ".hidden.c");
    YES(".*", ".env");
    NO("*", "a/b");
    YES("a*b*c", "aXbYc");
    YES("a*b*c", "abc");
    YES("a*b*c", "abbbcbc");
    NO("a*b*c", "acb");
    YES("*/*", "a/b");
    NO("*/*", "a");
    NO("*/*", "a/b/c");
    YES("src/*", "src/x");
    YES("*x*", "x");
    YES("**.c", "x.c");
    NO("**.c", "d/x.c");
    YES("a**b", "aXYb");
    NO("a**b", "aX/b");
}

static void test_globstar(void **state)
{
    (void)state;
    YES("**", "a");
    YES("**", "a/b/c");
    YES("**", ".git/config");
    YES("**/*.c", "x.c");
    YES("**/*.c", "a/b/x.c");
    YES("**/*.c", ".hidden/x.c");
    NO("**/*.c", "a/b/x.h");
    YES("a/**/b", "a/b");
    YES("a/**/b", "a/x/b");
    YES("a/**/b", "a/x/y/b");
    NO("a/**/b", "a/x/y/c");
    NO("a/**/b", "b");
    NO("a/**/b", "x/a/b");
    YES("a/**", "a/x");
    YES("a/**", "a/x/y");
    YES("a/**", "a");
    NO("a/**", "b/x");
    YES("**/b/**", "b");
    YES("**/b/**", "x/b/y/z");
    NO("**/b/**", "x/c/y");
    YES("**/**/x", "x");
    YES("**/**/x", "a/b/x");
    YES("a/**/b/**/c", "a/b/c");
    YES("a/**/b/**/c", "a/1/b/2/3/c");
    YES("a/**/b/**/c", "a/b/b/b/c");
    NO("a/**/b/**/c", "a/c/b");
    YES("src/**/test_*.c", "src/a/b/test_x.c");
    NO("src/**/test_*.c", "src/a/b/x_test.c");
}

static void test_question(void **state)
{
    (void)state;
    YES("?.c", "a.c");
    NO("?.c", "ab.c");
    NO("?.c", ".c");
    YES("?.c", "\xc3\xa9.c");         /* é, 2 bytes */
    YES("?.c", "\xe6\x97\xa5.c");     /* 日, 3 bytes */
    YES("?.c", "\xf0\x9f\x98\x80.c"); /* 😀, 4 bytes */
    NO("??.c", "\xc3\xa9.c");
    YES("??", "a\xc3\xa9");
    NO("a?b", "a/b");
    YES("*?", "x");
    NO("*??", "x");
    YES("*\xc3\xa9", "x\xc3\xa9");
    /* A byte that is not UTF-8 counts as one character. */
    YES("?", "\xff");
    YES("a?c", "a\xff"
               "c");
    NO("?", "\xff\xfe");
}

static void test_class(void **state)
{
    (void)state;
    YES("[abc].c", "b.c");
    NO("[abc].c", "d.c");
    YES("[a-c]x", "bx");
    NO("[a-c]x", "dx");
    YES("[a-cx-z]", "y");
    YES("[!a-c]x", "dx");
    NO("[!a-c]x", "ax");
    YES("[^a]", "b");
    NO("[^a]", "a");
    YES("[]]", "]");
    NO("[]]", "a");
    YES("[]a]", "a");
    YES("[]a]", "]");
    NO("[!]]", "]");
    YES("[!]]", "x");
    YES("[a-]", "-");
    YES("[-a]", "-");
    YES("[\\]]", "]");
    YES("[\\-]", "-");
    NO("[\\-]", "\\");
    YES("x[*]", "x*");
    NO("x[*]", "xa");
    YES("[?]", "?");
    NO("[?]", "a");
    YES("[{]", "{");
    YES("[{,}]", ",");
    /* Members and ranges are code points, not bytes. */
    YES("[\xc3\xa9-\xc3\xab]", "\xc3\xaa"); /* [é-ë] ê */
    NO("[\xc3\xa9-\xc3\xab]", "e");
    YES("[!a]", "\xc3\xa9");                           /* one code point, not two */
    YES("[\xe6\x97\xa5\xe6\x9c\xac]", "\xe6\x9c\xac"); /* [日本] 本 */
    /* A reversed range matches nothing. */
    NO("[z-a]", "m");
    YES("[0-9][0-9]", "42");
    NO("[0-9][0-9]", "4x");
}

/* POSIX classes, as bash spells them; ASCII whatever the locale. */
static void test_posix_class(void **state)
{
    (void)state;
    YES("[[:digit:]]*", "1x");
    NO("[[:digit:]]*", "x1");
    YES("[[:alpha:]][[:alnum:]]", "a1");
    NO("[[:alpha:]]", "1");
    NO("[[:alpha:]]", "\xc3\xa9");
    YES("[![:space:]]x", "ax");
    NO("[![:space:]]x", " x");
    YES("[[:space:]]x", "\tx");
    YES("[[:upper:][:digit:]_]", "_");
    YES("[[:upper:][:digit:]_]", "Q");
    NO("[[:upper:][:digit:]_]", "q");
    YES("[[:xdigit:]]", "F");
    NO("[[:xdigit:]]", "g");
    YES("[[:punct:]]", "-");
    NO("[[:punct:]]", "a");
    YES("[a[:digit:]]", "a");
    YES("[a[:digit:]]", "7");
    /* Not a class name: matches nothing, like bash. */
    NO("[[:nope:]]", "n");
    /* "[:" without ":]" is plain members. */
    YES("[[:]", ":");
    BAD("[[:digit:]");
}

/* SP_GLOB_PERIOD and typed entries, each case checked with bash 5.2
 * (`shopt -s globstar`): see test_search_ref for the live comparison. */
static void check_entry(const char *pattern, unsigned flags, const char *path, bool is_dir,
                        bool want, int line)
{
    sp_glob *g = NULL;
    sp_error *err = NULL;
    if (sp_glob_compile_flags(&g, pattern, flags, &err) != 0)
        fail_msg("line %d: compile '%s': %s", line, pattern, err ? err->message : "?");
    bool got = sp_glob_match_entry(g, path, is_dir);
    sp_glob_free(g);
    if (got != want)
        fail_msg("line %d: '%s' vs %s '%s': want %s", line, pattern, is_dir ? "folder" : "file",
                 path, want ? "match" : "no match");
}
#define ENTRY(p, f, s, d, w) check_entry((p), (f), (s), (d), (w), __LINE__)

static void test_period_and_types(void **state)
{
    (void)state;
    unsigned P = SP_GLOB_PERIOD;
    ENTRY("*", P, ".e", false, false);
    ENTRY("*", 0, ".e", false, true);
    ENTRY(".*", P, ".e", false, true);
    ENTRY("?git", P, ".git", true, false);
    ENTRY("[.]*", P, ".e", false, false);
    ENTRY("\\.git", P, ".git", true, true);
    ENTRY("**", P, "a/.f", false, false);
    ENTRY("**", P, ".d/i", false, false);
    ENTRY("**/*", P, "a/.hid/x", true, false);
    ENTRY("**/.*", P, "a/.hid", true, true);
    ENTRY("a/.hid/**", P, "a/.hid/x/j", false, true);
    ENTRY(".*/**", P, ".d/i", false, true);
    /* A name the pattern follows with '/' must be a folder. */
    ENTRY(".*/**", P, ".e", false, false);
    ENTRY(".*/**", P, ".d", true, true);
    ENTRY("a/**", P, "a", true, true);
    ENTRY("a/**", P, "a", false, false);
    ENTRY("a/**", P, "a/g", false, true);
    ENTRY("a/**/", P, "a/g", false, false);
    ENTRY("a/**/", P, "a/b", true, true);
    /* A trailing '/': folders only. */
    ENTRY("*/", P, "b", true, true);
    ENTRY("*/", P, "g", false, false);
    ENTRY("**/", P, "b/c", true, true);
    ENTRY("**/", P, "b/c/h", false, false);
    ENTRY("{a,b/}", P, "b", false, false);
    ENTRY("{a,b/}", P, "a", false, true);
    /* Untyped matching stays lenient. */
    YES("*/", "g");
}

static void test_escape(void **state)
{
    (void)state;
    YES("\\*", "*");
    NO("\\*", "a");
    YES("\\?", "?");
    NO("\\?", "a");
    YES("\\[a]", "[a]");
    NO("\\[a]", "a");
    YES("\\{a,b}", "{a,b}");
    NO("\\{a,b}", "a");
    YES("a\\\\b", "a\\b");
    YES("\\a", "a");
    YES("{a\\,b,c}", "a,b");
    YES("{a\\,b,c}", "c");
    NO("{a\\,b,c}", "b");
    YES("{a\\}b,c}", "a}b");
    YES("\\*\\*", "**");
    NO("\\*\\*", "a");
    NO("\\*\\*/x", "a/b/x");
}

static void test_braces(void **state)
{
    (void)state;
    YES("{a,b}.c", "a.c");
    YES("{a,b}.c", "b.c");
    NO("{a,b}.c", "c.c");
    YES("{a,b{c,d}}x", "ax");
    YES("{a,b{c,d}}x", "bcx");
    YES("{a,b{c,d}}x", "bdx");
    NO("{a,b{c,d}}x", "bx");
    YES("{{{a}}}", "a");
    YES("{src,lib}/**/*.{c,h}", "lib/x/y.h");
    YES("{src,lib}/**/*.{c,h}", "src/a.c");
    NO("{src,lib}/**/*.{c,h}", "doc/a.c");
    YES("{a/b,c}/d", "a/b/d");
    YES("{a/b,c}/d", "c/d");
    NO("{a/b,c}/d", "a/d");
    YES("{**/,}x.c", "x.c");
    YES("{**/,}x.c", "a/b/x.c");
    YES("{,x}y", "y");
    YES("{,x}y", "xy");
    YES("a{}b", "ab");
    YES("a,b", "a,b");
    YES("a}", "a}");
    YES("}{a,b}", "}a");
    YES("{[,]x,y}", ",x");
    YES("{[,]x,y}", "y");
    YES("{*.c,*.h}", ".x.h");
    YES("*.{c,cc,cpp}", "a.cpp");
    NO("*.{c,cc,cpp}", "a.cp");
}

static void test_compile_errors(void **state)
{
    (void)state;
    sp_glob *g = NULL;
    assert_int_equal(sp_glob_compile(&g, "", NULL), SP_EINVAL);
    assert_null(g);
    assert_int_equal(sp_glob_compile(&g, NULL, NULL), SP_EINVAL);
    BAD("");
    BAD("[abc");
    BAD("x[");
    BAD("[]");
    BAD("[!]");
    BAD("a/[b/c]");
    BAD("[a\\");
    BAD("{a,b");
    BAD("{a,{b}");
    BAD("{a,b}{");
    BAD("a\\");
    BAD("{a,b\\}");
    BAD("{a,[b}]");

    /* Messages say what is wrong and quote the pattern, cut when long. */
    sp_error *err = NULL;
    assert_int_equal(sp_glob_compile(&g, "src/[ab", &err), SP_EINVAL);
    assert_string_equal(err->message, "glob has an unclosed '[': src/[ab");
    sp_error_free(err);
    err = NULL;
    char *longbad = repeat("x", 10000, "{");
    assert_int_equal(sp_glob_compile(&g, longbad, &err), SP_EINVAL);
    assert_non_null(strstr(err->message, "unclosed '{'"));
    assert_true(strlen(err->message) < 300);
    sp_error_free(err);
    free(longbad);

    /* 2^12 alternatives are allowed, 2^13 are not. */
    char *ok = repeat("{a,b}", 12, "");
    sp_glob_free(compile_ok(ok));
    free(ok);
    char *big = repeat("{a,b}", 13, "");
    BAD(big);
    free(big);
    /* The cap holds for alternatives listed in one group too. */
    char *wide = repeat("x,", 5000, "");
    char *grp = sp_xasprintf("{%s}", wide);
    BAD(grp);
    free(grp);
    free(wide);
    /* Deep nesting is refused instead of recursing without bound. */
    char *open = repeat("{", 100000, "a");
    char *deep = repeat("}", 100000, "");
    char *nested = sp_xasprintf("%s%s", open, deep);
    BAD(nested);
    free(nested);
    free(open);
    free(deep);
}

/* Patterns that blow up a backtracking matcher; these must return at once.
 * No timing assertion: a hang is the failure. */
static void test_pathological(void **state)
{
    (void)state;
    char *as = repeat("a", 20000, "");
    char *asb = repeat("a", 20000, "b");
    char *pat = repeat("a*", 30, "b");
    sp_glob *g = compile_ok(pat);
    assert_false(sp_glob_match(g, as));
    assert_true(sp_glob_match(g, asb));
    sp_glob_free(g);
    free(pat);

    pat = repeat("*a", 50, "*b");
    g = compile_ok(pat);
    assert_false(sp_glob_match(g, as));
    sp_glob_free(g);
    free(pat);

    pat = repeat("?*", 40, "c");
    g = compile_ok(pat);
    assert_false(sp_glob_match(g, as));
    sp_glob_free(g);
    free(pat);

    /* Many `**` against a deep path. */
    char *deep = repeat("a/", 500, "a");
    char *deepx = repeat("a/", 500, "x");
    pat = repeat("**/a/", 60, "**/x");
    g = compile_ok(pat);
    assert_false(sp_glob_match(g, deep));
    assert_true(sp_glob_match(g, deepx));
    assert_true(sp_glob_could_match_below(g, deep));
    sp_glob_free(g);
    free(pat);

    pat = repeat("**/*a*/", 60, "*b");
    g = compile_ok(pat);
    assert_false(sp_glob_match(g, deep));
    sp_glob_free(g);
    free(pat);

    /* Many alternatives times the longest name a folder can hold. */
    pat = repeat("{a,*}", 12, "*b");
    g = compile_ok(pat);
    assert_false(sp_glob_match(g, as + 20000 - 255));
    sp_glob_free(g);
    free(pat);

    free(as);
    free(asb);
    free(deep);
    free(deepx);
}

static void test_could_match_below(void **state)
{
    (void)state;
    BELOW("src/*.c", "");
    BELOW("src/*.c", ".");
    BELOW("src/*.c", "src");
    NOTBELOW("src/*.c", "node_modules");
    NOTBELOW("src/*.c", "src/sub");
    BELOW("**/*.c", "");
    BELOW("**/*.c", "node_modules/a/b");
    BELOW("a/**/b", "a");
    BELOW("a/**/b", "a/x/y");
    NOTBELOW("a/**/b", "b");
    BELOW("{src,lib}/*.c", "lib");
    NOTBELOW("{src,lib}/*.c", "doc");
    BELOW("*.c", "");
    NOTBELOW("*.c", "src");
    BELOW("src/main.c", "src");
    NOTBELOW("src/main.c", "src/main.c");
    BELOW("s*/x", "src");
    NOTBELOW("s*/x", "lib");
    NOTBELOW("a/b", "a/b");
    BELOW("a/**", "a/b");
    BELOW("a/**", "a");
    NOTBELOW("a/**", "b");
    BELOW("{a/b/c,d}", "a/b");
    NOTBELOW("{a/b/c,d}", "d");
}

/* ------------------------------------------------------------ globset -- */

static sp_globset *set_ok(const char *const *pats, size_t n)
{
    sp_globset *s = NULL;
    sp_error *err = NULL;
    int rc = sp_globset_compile(&s, pats, n, &err);
    if (rc != 0)
        print_error("globset: %s\n", err ? err->message : "?");
    assert_int_equal(rc, 0);
    sp_error_free(err);
    return s;
}

static void test_globset(void **state)
{
    (void)state;
    const char *pats[] = {"*.log",     "build", "/dist",         "docs/private",
                          "secret/**", ".env*", "node_modules/", "{tmp,cache}"};
    sp_globset *s = set_ok(pats, sizeof(pats) / sizeof(pats[0]));

    /* No '/': the name at any depth, and everything below it. */
    assert_true(sp_globset_match(s, "x.log"));
    assert_true(sp_globset_match(s, "a/b/x.log"));
    assert_true(sp_globset_match(s, "x.log/inner"));
    assert_true(sp_globset_match(s, "build"));
    assert_true(sp_globset_match(s, "build/x/y"));
    assert_true(sp_globset_match(s, "src/build/x.o"));
    assert_false(sp_globset_match(s, "builder"));
    assert_false(sp_globset_match(s, "src/rebuild/x"));
    assert_true(sp_globset_match(s, ".env"));
    assert_true(sp_globset_match(s, "cfg/.env.local"));
    assert_true(sp_globset_match(s, "a/cache/b"));
    assert_true(sp_globset_match(s, "tmp"));
    /* A trailing '/' does not anchor. */
    assert_true(sp_globset_match(s, "web/node_modules/pkg/index.js"));
    assert_true(sp_globset_match(s, "node_modules"));

    /* A leading '/' anchors to the root. */
    assert_true(sp_globset_match(s, "dist"));
    assert_true(sp_globset_match(s, "dist/a.js"));
    assert_false(sp_globset_match(s, "src/dist"));
    assert_false(sp_globset_match(s, "src/dist/a.js"));

    /* With '/': the full path or one of its ancestors. */
    assert_true(sp_globset_match(s, "docs/private"));
    assert_true(sp_globset_match(s, "docs/private/a/b"));
    assert_false(sp_globset_match(s, "x/docs/private"));
    assert_false(sp_globset_match(s, "docs"));
    assert_false(sp_globset_match(s, "docs/public"));
    assert_true(sp_globset_match(s, "secret/a"));
    assert_true(sp_globset_match(s, "secret"));
    assert_false(sp_globset_match(s, "x/secret/a"));

    assert_false(sp_globset_match(s, "src/main.c"));
    assert_false(sp_globset_match(s, ""));
    sp_globset_free(s);

    const char *deep[] = {"**/gen/*.c"};
    s = set_ok(deep, 1);
    assert_true(sp_globset_match(s, "a/b/gen/x.c"));
    assert_true(sp_globset_match(s, "gen/x.c/inner"));
    assert_false(sp_globset_match(s, "a/gen/x.h"));
    sp_globset_free(s);

    /* Empty and NULL sets match nothing. */
    s = set_ok(NULL, 0);
    assert_false(sp_globset_match(s, "anything"));
    sp_globset_free(s);
    assert_false(sp_globset_match(NULL, "anything"));
    sp_globset_free(NULL);
    sp_glob_free(NULL);

    /* One bad pattern fails the whole set. */
    const char *bad[] = {"ok", "[bad"};
    sp_error *err = NULL;
    s = NULL;
    assert_int_equal(sp_globset_compile(&s, bad, 2, &err), SP_EINVAL);
    assert_null(s);
    assert_non_null(err);
    sp_error_free(err);
}

/* ---------------------------------------------------------- sp_fs_glob -- */

typedef struct tree {
    char *root;
    char *outside;
    sp_fs *fs;
} tree;

static int tree_setup(void **state)
{
    tree *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    t->root = tu_mkdtemp();
    t->outside = tu_mkdtemp();
    const char *r = t->root;
    tu_write(t->outside, "secret.c", "int secret;\n", 0644);
    tu_write(r, "a.c", "int a;\n", 0644);
    tu_write(r, "b.txt", "b\n", 0644);
    tu_write(r, ".hidden.c", "\n", 0644);
    tu_mkdir(r, "a");
    tu_write(r, "a/x.c", "\n", 0644);
    tu_mkdir(r, "a-b");
    tu_write(r, "a-b/x.c", "\n", 0644);
    tu_mkdir(r, "src");
    tu_write(r, "src/main.c", "int main(void) { return 0; }\n", 0644);
    tu_write(r, "src/util.c", "\n", 0644);
    tu_write(r, "src/util.h", "\n", 0644);
    tu_mkdir(r, "src/sub");
    tu_write(r, "src/sub/deep.c", "\n", 0644);
    tu_mkdir(r, "node_modules");
    tu_mkdir(r, "node_modules/pkg");
    tu_write(r, "node_modules/pkg/index.c", "\n", 0644);
    tu_symlink(t->outside, r, "link");
    char *secret = tu_join(t->outside, "secret.c");
    tu_symlink(secret, r, "ln.c");
    free(secret);

    sp_error *err = NULL;
    int rc = sp_fs_open(&t->fs, t->root, NULL, &err);
    if (rc != 0)
        print_error("sp_fs_open: %s\n", err ? err->message : "?");
    assert_int_equal(rc, 0);
    sp_error_free(err);
    *state = t;
    return 0;
}

static int tree_teardown(void **state)
{
    tree *t = *state;
    sp_fs_free(t->fs);
    tu_rmtree(t->root);
    tu_rmtree(t->outside);
    free(t->root);
    free(t->outside);
    free(t);
    return 0;
}

static sp_fs_entries *glob_ok(tree *t, const char *pattern, const char *base, size_t max)
{
    sp_fs_entries *e = NULL;
    sp_error *err = NULL;
    int rc = sp_fs_glob(&e, t->fs, pattern, base, max, &err);
    if (rc != 0)
        print_error("sp_fs_glob '%s': %s\n", pattern, err ? err->message : "?");
    assert_int_equal(rc, 0);
    assert_non_null(e);
    sp_error_free(err);
    return e;
}

/* Compare paths in order against a NULL-terminated list. */
static void expect_paths(const sp_fs_entries *e, const char *const *want)
{
    size_t n = 0;
    while (want[n])
        n++;
    bool same = e->n == n;
    for (size_t i = 0; same && i < n; i++)
        same = strcmp(e->v[i].path, want[i]) == 0;
    if (!same) {
        for (size_t i = 0; i < e->n; i++)
            print_error("  got %s\n", e->v[i].path);
    }
    assert_int_equal(e->n, n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(e->v[i].path, want[i]);
}

static const sp_fs_entry *find(const sp_fs_entries *e, const char *path)
{
    for (size_t i = 0; i < e->n; i++)
        if (strcmp(e->v[i].path, path) == 0)
            return &e->v[i];
    return NULL;
}

static void test_fs_glob_recursive(void **state)
{
    tree *t = *state;
    sp_fs_entries *e = glob_ok(t, "**/*.c", NULL, 0);
    /* Sorted bytewise: '-' < '.' < '/', unlike a depth-first walk. */
    /* bash's rule: wildcards skip names starting with '.'. */
    const char *want[] = {
        "a-b/x.c",        "a.c",        "a/x.c", "ln.c", "node_modules/pkg/index.c", "src/main.c",
        "src/sub/deep.c", "src/util.c", NULL};
    expect_paths(e, want);
    assert_false(e->truncated);
    /* Nothing from behind the symlinked folder. */
    assert_null(find(e, "link/secret.c"));

    const sp_fs_entry *ln = find(e, "ln.c");
    assert_non_null(ln);
    assert_int_equal(ln->type, SP_FS_SYMLINK);
    assert_string_equal(ln->name, "ln.c");
    const sp_fs_entry *m = find(e, "src/main.c");
    assert_non_null(m);
    assert_int_equal(m->type, SP_FS_FILE);
    assert_string_equal(m->name, "main.c");
    assert_int_equal(m->size, strlen("int main(void) { return 0; }\n"));
    assert_int_equal(m->depth, 0);
    sp_fs_entries_free(e);
}

static void test_fs_glob_top_level(void **state)
{
    tree *t = *state;
    sp_fs_entries *e = glob_ok(t, "*", NULL, 0);
    const char *want[] = {"a", "a-b", "a.c", "b.txt", "link", "ln.c", "node_modules", "src", NULL};
    expect_paths(e, want);
    const sp_fs_entry *link = find(e, "link");
    assert_non_null(link);
    assert_int_equal(link->type, SP_FS_SYMLINK);
    assert_int_equal(find(e, "src")->type, SP_FS_DIR);
    sp_fs_entries_free(e);

    e = glob_ok(t, "src/*.{c,h}", NULL, 0);
    const char *want2[] = {"src/main.c", "src/util.c", "src/util.h", NULL};
    expect_paths(e, want2);
    sp_fs_entries_free(e);

    /* A symlinked folder is never entered, and is no folder for `x/`. */
    e = glob_ok(t, "link/**", NULL, 0);
    assert_int_equal(e->n, 0);
    sp_fs_entries_free(e);
    e = glob_ok(t, "*/", NULL, 0);
    expect_paths(e, (const char *const[]){"a", "a-b", "node_modules", "src", NULL});
    sp_fs_entries_free(e);
    e = glob_ok(t, "l*", NULL, 0);
    expect_paths(e, (const char *const[]){"link", "ln.c", NULL});
    sp_fs_entries_free(e);

    /* A name written with a leading '.' finds hidden entries. */
    e = glob_ok(t, ".*", NULL, 0);
    expect_paths(e, (const char *const[]){".hidden.c", NULL});
    sp_fs_entries_free(e);
    e = glob_ok(t, "{.h*,a.c}", NULL, 0);
    expect_paths(e, (const char *const[]){".hidden.c", "a.c", NULL});
    sp_fs_entries_free(e);

    e = glob_ok(t, "nothing/*.c", NULL, 0);
    assert_int_equal(e->n, 0);
    assert_false(e->truncated);
    sp_fs_entries_free(e);
}

static void test_fs_glob_base(void **state)
{
    tree *t = *state;
    /* Matched relative to the base, reported relative to the root. */
    sp_fs_entries *e = glob_ok(t, "*.c", "src", 0);
    const char *want[] = {"src/main.c", "src/util.c", NULL};
    expect_paths(e, want);
    sp_fs_entries_free(e);

    e = glob_ok(t, "**/*.c", "src", 0);
    const char *want2[] = {"src/main.c", "src/sub/deep.c", "src/util.c", NULL};
    expect_paths(e, want2);
    sp_fs_entries_free(e);

    e = glob_ok(t, "sub/*", "/workspace/src", 0);
    expect_paths(e, (const char *const[]){"src/sub/deep.c", NULL});
    sp_fs_entries_free(e);

    e = glob_ok(t, "src/*.c", "src", 0);
    assert_int_equal(e->n, 0);
    sp_fs_entries_free(e);

    e = glob_ok(t, "*.c", ".", 0);
    const char *want3[] = {"a.c", "ln.c", NULL};
    expect_paths(e, want3);
    sp_fs_entries_free(e);
}

static void test_fs_glob_truncated(void **state)
{
    tree *t = *state;
    sp_fs_entries *e = glob_ok(t, "**/*.c", NULL, 3);
    assert_int_equal(e->n, 3);
    assert_true(e->truncated);
    for (size_t i = 1; i < e->n; i++)
        assert_true(strcmp(e->v[i - 1].path, e->v[i].path) < 0);
    sp_fs_entries_free(e);

    /* Exactly as many matches as the limit is not truncation. */
    e = glob_ok(t, "src/*.c", NULL, 2);
    assert_int_equal(e->n, 2);
    assert_false(e->truncated);
    sp_fs_entries_free(e);
}

static void test_fs_glob_errors(void **state)
{
    tree *t = *state;
    sp_fs_entries *e = NULL;
    sp_error *err = NULL;
    assert_int_equal(sp_fs_glob(&e, t->fs, "[oops", NULL, 0, &err), SP_EINVAL);
    assert_null(e);
    assert_non_null(err);
    sp_error_free(err);
    err = NULL;

    assert_int_equal(sp_fs_glob(&e, t->fs, "", NULL, 0, &err), SP_EINVAL);
    assert_null(e);
    sp_error_free(err);
    err = NULL;

    assert_int_equal(sp_fs_glob(&e, t->fs, "*", "../..", 0, &err), SP_EESCAPE);
    assert_null(e);
    sp_error_free(err);
    err = NULL;

    int rc = sp_fs_glob(&e, t->fs, "*", "no/such/folder", 0, &err);
    assert_true(rc < 0);
    assert_null(e);
    sp_error_free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_literal),
        cmocka_unit_test(test_star),
        cmocka_unit_test(test_globstar),
        cmocka_unit_test(test_question),
        cmocka_unit_test(test_class),
        cmocka_unit_test(test_posix_class),
        cmocka_unit_test(test_period_and_types),
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_braces),
        cmocka_unit_test(test_compile_errors),
        cmocka_unit_test(test_pathological),
        cmocka_unit_test(test_could_match_below),
        cmocka_unit_test(test_globset),
        cmocka_unit_test_setup_teardown(test_fs_glob_recursive, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_fs_glob_top_level, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_fs_glob_base, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_fs_glob_truncated, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_fs_glob_errors, tree_setup, tree_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
