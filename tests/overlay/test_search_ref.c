/* Differential tests of glob and grep against their references, run live:
 *
 * - sp_fs_glob() against `bash -O globstar -O nullglob -c 'printf ...'`
 *   (bash 5: `*` and `**` skip names starting with '.', a trailing '/'
 *   keeps folders), the same sets of paths for many patterns;
 * - sp_fs_grep() against `rg` on a tree with .gitignore / .ignore /
 *   .git/info/exclude files, nested ignore files with `!`, anchored and
 *   folder-only lines, hidden files, a UTF-8 BOM and Unicode text: the same
 *   `path:line:text` lines, by default and with --no-ignore / --hidden /
 *   -g globs.
 *
 * A reference that is not installed skips its half with a note; under
 * CI=true it is a failure (contrib/setup.sh installs both). */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandpod/fs.h"

/* ----------------------------------------------------------- helpers -- */

/* Run argv in cwd with a clean, predictable environment; stdout to
 * out_path. Returns the exit status, or -1. */
static int run(const char *cwd, const char *out_path, char *const argv[])
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (chdir(cwd) < 0)
            _exit(126);
        int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (out < 0 || null < 0 || dup2(out, 1) < 0 || dup2(null, 2) < 0)
            _exit(126);
        /* No user configuration: rg reads RIPGREP_CONFIG_PATH and the
         * global git excludes under HOME; bash classes follow LC_ALL. */
        clearenv();
        setenv("PATH", "/usr/local/bin:/usr/bin:/bin", 1);
        setenv("HOME", cwd, 1);
        setenv("LC_ALL", "C", 1);
        execvp(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static bool have(const char *tool, const char *arg)
{
    char *argv[] = {(char *)tool, (char *)arg, NULL};
    char *dir = tu_mkdtemp();
    char *out = tu_join(dir, "out");
    bool ok = run(dir, out, argv) == 0;
    tu_rmtree(dir);
    free(out);
    free(dir);
    return ok;
}

/* A missing reference: skip with a note, except under CI. */
static bool need(const char *what, bool present)
{
    if (present)
        return true;
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0)
        fail_msg("%s is required under CI=true (contrib/setup.sh installs it)", what);
    print_message("note: %s is not installed; its comparison is skipped\n", what);
    return false;
}

/* A sorted, unique list of lines. */
typedef struct lines {
    char **v;
    size_t n;
} lines;

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void lines_add(lines *l, const char *s, size_t len)
{
    l->v = realloc(l->v, (l->n + 1) * sizeof(char *));
    assert_non_null(l->v);
    l->v[l->n] = strndup(s, len);
    assert_non_null(l->v[l->n]);
    l->n++;
}

static void lines_sort(lines *l)
{
    if (l->n)
        qsort(l->v, l->n, sizeof(char *), str_cmp);
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (k && strcmp(l->v[k - 1], l->v[i]) == 0) {
            free(l->v[i]);
            continue;
        }
        l->v[k++] = l->v[i];
    }
    l->n = k;
}

static void lines_free(lines *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/* Lines of a file; `trim_slash` drops one trailing '/' (bash marks
 * folders matched by `x/` that way). */
static void lines_read(lines *l, const char *dir, const char *rel, bool trim_slash)
{
    size_t len = 0;
    char *data = tu_read(dir, rel, &len);
    assert_non_null(data);
    const char *p = data, *end = data + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (trim_slash && n > 1 && p[n - 1] == '/')
            n--;
        if (n)
            lines_add(l, p, n);
        p = nl ? nl + 1 : end;
    }
    free(data);
    lines_sort(l);
}

static void expect_same(const char *what, const lines *ref, const lines *got)
{
    bool same = ref->n == got->n;
    for (size_t i = 0; same && i < ref->n; i++)
        same = strcmp(ref->v[i], got->v[i]) == 0;
    if (same)
        return;
    print_error("%s: the reference and sandpod differ\n", what);
    for (size_t i = 0; i < ref->n; i++)
        print_error("  ref: %s\n", ref->v[i]);
    for (size_t i = 0; i < got->n; i++)
        print_error("  got: %s\n", got->v[i]);
    fail_msg("%s: %zu reference lines, %zu from sandpod", what, ref->n, got->n);
}

typedef struct fixture {
    char *base; /* holds the tree and the outputs */
    char *dir;  /* the tree */
    sp_fs *fs;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    f->base = tu_mkdtemp();
    f->dir = tu_join(f->base, "tree");
    tu_mkdir(f->base, "tree");
    *state = f;
    return 0;
}

static void open_fs(fixture *f)
{
    sp_error *err = NULL;
    if (sp_fs_open(&f->fs, f->dir, NULL, &err) != 0)
        fail_msg("sp_fs_open: %s", err ? err->message : "?");
}

static int teardown(void **state)
{
    fixture *f = *state;
    sp_fs_free(f->fs);
    tu_rmtree(f->base);
    free(f->dir);
    free(f->base);
    free(f);
    return 0;
}

/* -------------------------------------------------------------- glob -- */

static void glob_tree(const char *d)
{
    static const char *const dirs[] = {
        "a",   "a/.hid",       "a/.hid/x",       "a/b",       "b",   "b/c",
        "b/d", ".d",           ".git",           ".git/info", "src", "src/.cache",
        "e",   "node_modules", "node_modules/p", "n1"};
    static const char *const files[] = {"a/x.c",          "a/1x",
                                        "a/.f",           "a/.hid/x/j",
                                        "a/b/c.txt",      "b/c/h.c",
                                        ".d/i",           ".e",
                                        ".git/HEAD",      ".git/info/exclude",
                                        "src/main.c",     "src/util.h",
                                        "src/.cache/z.c", "9lives.txt",
                                        "A.TXT",          "node_modules/p/index.js",
                                        "n1/c",           "x.c",
                                        "a/ y.c"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
        tu_mkdir(d, dirs[i]);
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        tu_write(d, files[i], "x\n", 0644);
}

/* Keep (want_git) or leave out the paths through a .git folder. */
static void filter_git(lines *l, bool want_git)
{
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++) {
        bool git = false;
        for (const char *c = l->v[i]; c && !git;) {
            git = strncmp(c, ".git", 4) == 0 && (c[4] == '/' || c[4] == '\0');
            c = strchr(c, '/');
            c = c ? c + 1 : NULL;
        }
        if (git != want_git)
            free(l->v[i]);
        else
            l->v[k++] = l->v[i];
    }
    l->n = k;
}

static void test_glob_vs_bash(void **state)
{
    fixture *f = *state;
    if (!need("bash", have("bash", "--version")))
        skip();
    glob_tree(f->dir);
    open_fs(f);
    static const char *const patterns[] = {
        "*",
        "**",
        "**/",
        "*/",
        ".*",
        ".*/**",
        "**/*.c",
        "**/.*",
        "a/**",
        "a/**/*",
        "a/.*",
        "[[:digit:]]*",
        "[[:upper:]]*",
        "[![:lower:]]*",
        "**/[[:alpha:]].c",
        "?",
        "a/?",
        ".git/",
        ".git/**",
        "{a,b}/**",
        "*/*/",
        "src/*.{c,h}",
        "**/c",
        "**/c/",
        "b/*/",
        "e/**",
        "[.]*",
        "\\.git",
        "a/[![:space:]]*",
        "node_modules/**/*.js",
        "**/*/",
        "a/.hid/**",
        "*/.*",
        "**/x*",
        "[[:alnum:]][[:punct:]]*",
        "a/**/",
        "**/**",
        "x*/",
        "n1/**",
        "*[[:space:]]*",
        "**/[[:space:]]*",
    };
    char *out = tu_join(f->base, "bash.txt");
    size_t n_pat = sizeof(patterns) / sizeof(patterns[0]);
    /* Each pattern twice: bash's default, then `shopt -s dotglob` against
     * hidden, where .git is left to patterns that spell it. */
    for (size_t i = 0; i < 2 * n_pat; i++) {
        const char *pat = patterns[i % n_pat];
        bool dotglob = i >= n_pat;
        char script[512];
        snprintf(script, sizeof(script), "printf '%%s\\n' %s", pat);
        char *argv[] = {"bash", "-O",      "globstar", "-O",   "nullglob",
                        "-O",   "dotglob", "-c",       script, NULL};
        if (!dotglob) {
            argv[5] = "-c";
            argv[6] = script;
            argv[7] = NULL;
        }
        assert_int_equal(run(f->dir, out, argv), 0);
        lines ref = {0}, got = {0};
        lines_read(&ref, f->base, "bash.txt", true);
        if (dotglob) {
            /* sandpod's dotglob keeps .git out of reach of wildcards: what
             * bash finds there without dotglob, nothing more (the tree has
             * no dot names inside .git). */
            filter_git(&ref, false);
            char *plain[] = {"bash", "-O", "globstar", "-O", "nullglob", "-c", script, NULL};
            assert_int_equal(run(f->dir, out, plain), 0);
            lines git = {0};
            lines_read(&git, f->base, "bash.txt", true);
            filter_git(&git, true);
            for (size_t k = 0; k < git.n; k++)
                lines_add(&ref, git.v[k], strlen(git.v[k]));
            lines_sort(&ref);
            lines_free(&git);
        }
        sp_fs_glob_opts o = SP_FS_GLOB_OPTS_INIT;
        o.hidden = dotglob;
        sp_fs_entries *e = NULL;
        sp_error *err = NULL;
        if (sp_fs_glob_ex(&e, f->fs, pat, &o, &err) != 0)
            fail_msg("glob '%s': %s", pat, err ? err->message : "?");
        for (size_t k = 0; k < e->n; k++)
            lines_add(&got, e->v[k].path, strlen(e->v[k].path));
        lines_sort(&got);
        char what[600];
        snprintf(what, sizeof(what), "glob '%s'%s", pat, dotglob ? " (dotglob)" : "");
        expect_same(what, &ref, &got);
        sp_fs_entries_free(e);
        lines_free(&ref);
        lines_free(&got);
    }
    print_message("%zu glob patterns compared with bash, with and without dotglob\n", n_pat);
    free(out);
}

/* -------------------------------------------------------------- grep -- */

#define BOM "\xef\xbb\xbf"

static void grep_tree(const char *d)
{
    static const char *const dirs[] = {
        ".git",  ".git/info", "build",  "sub", "other",    "other/sub", "nested", "nested/deeper",
        ".hdir", "logs",      "vendor", "gen", "gen/keep", "deep",      "deep/in"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
        tu_mkdir(d, dirs[i]);
    tu_write(d, ".git/HEAD", "ref: refs/heads/main\n", 0644);
    tu_write(d, ".git/info/exclude", "# local\nexcluded.txt\n", 0644);
    tu_write(d, ".gitignore",
             "*.log\n!keep.log\nbuild/\n/top.txt\nsub/anch.txt\nlogs/\ngen/\n!gen/keep/\n"
             "trailing.txt   \n\\#hash.txt\nsp\\ ace.txt\ndeep/**\n!deep/keep.txt\n",
             0644);
    tu_write(d, ".ignore", "by_ignore.txt\n!rescued.txt\n", 0644);
    tu_write(d, "nested/.gitignore", "*.md\n!keep.md\n/only_here.txt\nrescued.txt\n", 0644);
    static const char *const needles[] = {"a.txt",
                                          "app.log",
                                          "keep.log",
                                          "build/out.txt",
                                          "top.txt",
                                          "sub/top.txt",
                                          "sub/anch.txt",
                                          "other/sub/anch.txt",
                                          "excluded.txt",
                                          "by_ignore.txt",
                                          ".hidden.txt",
                                          ".hdir/x.txt",
                                          "nested/a.md",
                                          "nested/keep.md",
                                          "nested/b.txt",
                                          "nested/deeper/c.md",
                                          "nested/only_here.txt",
                                          "nested/deeper/only_here.txt",
                                          "nested/rescued.txt",
                                          "logs/l.txt",
                                          "sub/logs",
                                          "gen/keep/k.txt",
                                          "gen/g.txt",
                                          "trailing.txt",
                                          "#hash.txt",
                                          "sp ace.txt",
                                          "vendor/x.min.js",
                                          "vendor/x.js",
                                          "x.min.js",
                                          "x.js",
                                          "deep/a.txt",
                                          "deep/keep.txt",
                                          "deep/in/b.txt"};
    for (size_t i = 0; i < sizeof(needles) / sizeof(needles[0]); i++)
        tu_write(d, needles[i], "a needle here\nno\nNEEDLE upper\n", 0644);
    tu_write(d, "bom.txt", BOM "needle at the start\nneedle 2\n", 0644);
    tu_write(d, "bom_only.txt", BOM, 0644);
    tu_write(d, "uni.txt",
             "x \xd9\xa3 y\n"             /* ARABIC-INDIC DIGIT THREE */
             "na\xc3\xafve caf\xc3\xa9\n" /* naïve café */
             "word_\xc3\xa9\xc3\xa9\n"
             "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\n" /* 日本語 */
             "plain 42\n",
             0644);
    /* For the literal prefilter: case partners outside ASCII (U+017F LONG
     * S, U+212A KELVIN SIGN, U+1E9E CAPITAL SHARP S), optional parts. */
    tu_write(d, "fold.txt",
             "\xc5\xbf"
             "ocket_t one\n"
             "SOCKET_T two\n"
             "\xe2\x84\xaa"
             "ernel\n"
             "STRA\xe1\xba\x9e"
             "E\n"
             "color colour\n"
             "colour\n"
             "size_t n; ssize_t m\n"
             "x_t\n",
             0644);
}

typedef struct grep_case {
    const char *pattern;
    const char *path; /* NULL = the root */
    const char *const *globs;
    bool no_ignore, hidden, ci;
} grep_case;

/* rg's answer as "path:line:text" lines. */
static void rg_lines(fixture *f, const grep_case *c, lines *out)
{
    char *argv[32];
    size_t n = 0;
    argv[n++] = "rg";
    argv[n++] = "--no-heading";
    argv[n++] = "--with-filename";
    argv[n++] = "-n";
    argv[n++] = "--color=never";
    argv[n++] = "--no-messages";
    argv[n++] = "--no-config";
    if (c->no_ignore)
        argv[n++] = "--no-ignore";
    if (c->hidden)
        argv[n++] = "--hidden";
    if (c->ci)
        argv[n++] = "-i";
    for (size_t i = 0; c->globs && c->globs[i] && n < 24; i++) {
        argv[n++] = "-g";
        argv[n++] = (char *)c->globs[i];
    }
    argv[n++] = "-e";
    argv[n++] = (char *)c->pattern;
    if (c->path)
        argv[n++] = (char *)c->path;
    argv[n] = NULL;
    char *out_path = tu_join(f->base, "rg.txt");
    int rc = run(f->dir, out_path, argv);
    if (rc != 0 && rc != 1)
        fail_msg("rg '%s' exited %d", c->pattern, rc);
    lines_read(out, f->base, "rg.txt", false);
    free(out_path);
}

static void sp_lines(fixture *f, const grep_case *c, lines *out)
{
    sp_fs_grep_opts o = SP_FS_GREP_OPTS_INIT;
    o.path = c->path;
    o.globs = c->globs;
    o.no_ignore = c->no_ignore;
    o.hidden = c->hidden;
    o.case_insensitive = c->ci;
    sp_fs_matches *m = NULL;
    sp_error *err = NULL;
    if (sp_fs_grep(&m, f->fs, c->pattern, &o, &err) != 0)
        fail_msg("grep '%s': %s", c->pattern, err ? err->message : "?");
    for (size_t i = 0; i < m->n; i++) {
        char buf[4096];
        int len = snprintf(buf, sizeof(buf), "%s:%zu:%s", m->v[i].path, m->v[i].line_number,
                           m->v[i].line);
        lines_add(out, buf, (size_t)len);
    }
    lines_sort(out);
    sp_fs_matches_free(m);
}

static void test_grep_vs_rg(void **state)
{
    fixture *f = *state;
    if (!need("rg (ripgrep)", have("rg", "--version")))
        skip();
    grep_tree(f->dir);
    open_fs(f);
    static const char *const js[] = {"*.js", "!*.min.js", NULL};
    static const char *const js_rev[] = {"!*.min.js", "*.js", NULL};
    static const char *const no_vendor[] = {"!vendor", NULL};
    static const char *const txt_not_sub[] = {"*.txt", "!sub", NULL};
    static const char *const no_log[] = {"!*.log", NULL};
    static const char *const hidden_one[] = {".hidden.txt", NULL};
    static const char *const logs_in[] = {"*.log", NULL};
    const grep_case cases[] = {
        {"needle", NULL, NULL, false, false, false},
        {"needle", NULL, NULL, true, false, false},
        {"needle", NULL, NULL, false, true, false},
        {"needle", NULL, NULL, true, true, false},
        {"NEEDLE", NULL, NULL, false, false, true},
        {"needle", "nested", NULL, false, false, false},
        {"needle", "nested/deeper", NULL, false, false, false},
        {"^needle", NULL, NULL, false, false, false},
        {"^.", "bom_only.txt", NULL, false, false, false},
        {"\\d", NULL, NULL, false, false, false},
        {"^\\w+$", NULL, NULL, false, false, false},
        {"\\bcaf\xc3\xa9\\b", NULL, NULL, false, false, false},
        {"_\\w\\b", NULL, NULL, false, false, false},
        {"\\W\\d\\W", NULL, NULL, false, false, false},
        /* Patterns the literal prefilter takes (grep_literal.h). */
        {"socket", NULL, NULL, false, false, true},
        {"kernel", NULL, NULL, false, false, true},
        {"stra\xc3\x9f"
         "e",
         NULL, NULL, false, false, true},
        {"\\w+_t\\b", NULL, NULL, false, false, false},
        {"\\w+_t\\b", NULL, NULL, false, false, true},
        {"colou?r", NULL, NULL, false, false, false},
        {"(?:col)?our$", NULL, NULL, false, false, false},
        {"ne+dle\\s+h", NULL, NULL, false, false, false},
        {"^\\S+ needle", NULL, NULL, false, false, true},
        {"needle", NULL, js, false, false, false},
        {"needle", NULL, js_rev, false, false, false},
        {"needle", NULL, no_vendor, false, false, false},
        {"needle", NULL, txt_not_sub, false, false, false},
        {"needle", NULL, no_log, true, false, false},
        {"needle", NULL, hidden_one, false, false, false},
        {"needle", NULL, logs_in, false, false, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        lines ref = {0}, got = {0};
        rg_lines(f, &cases[i], &ref);
        sp_lines(f, &cases[i], &got);
        char what[300];
        snprintf(what, sizeof(what), "case %zu: grep '%s'%s%s%s%s%s", i, cases[i].pattern,
                 cases[i].path ? " in " : "", cases[i].path ? cases[i].path : "",
                 cases[i].no_ignore ? " --no-ignore" : "", cases[i].hidden ? " --hidden" : "",
                 cases[i].globs ? " with globs" : "");
        expect_same(what, &ref, &got);
        lines_free(&ref);
        lines_free(&got);
    }
    print_message("%zu grep cases compared with rg\n", sizeof(cases) / sizeof(cases[0]));

    /* Searching a subfolder, an anchored line of a parent's .gitignore
     * (`sub/anch.txt`) still applies, as in git. rg 13 and 14 drop it
     * there (BurntSushi/ripgrep#1757, #2770): sandpod keeps git's rule. */
    grep_case sub = {"needle", "sub", NULL, false, false, false};
    lines got = {0};
    sp_lines(f, &sub, &got);
    assert_int_equal(got.n, 2);
    assert_string_equal(got.v[0], "sub/logs:1:a needle here");
    assert_string_equal(got.v[1], "sub/top.txt:1:a needle here");
    lines_free(&got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_glob_vs_bash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grep_vs_rg, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
