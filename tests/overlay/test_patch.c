/* Tests for sp_fs_apply_patch() and sp_patch_parse(): the Codex envelope's
 * grammar and leniency, unified diffs applied strictly, atomicity (nothing
 * changes unless everything does, including when a rename fails midway),
 * containment, read-only handles. The differential test against git apply
 * is test_patch_git.c. */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandpod/fs.h"
#include "sandpod/patch.h"

typedef tu_fsfx fixture;
#define setup    tu_fsfx_setup
#define teardown tu_fsfx_teardown

static sp_patch_result *apply_opts(sp_fs *fs, const char *patch, const sp_patch_opts *o)
{
    sp_patch_result *res = NULL;
    sp_error *err = NULL;
    int r = sp_fs_apply_patch(&res, fs, patch, strlen(patch), o, &err);
    if (r < 0)
        fail_msg("apply_patch: %d %s\n--- patch:\n%s", r, err ? err->message : "?", patch);
    assert_non_null(res);
    return res;
}

static sp_patch_result *apply(sp_fs *fs, const char *patch)
{
    return apply_opts(fs, patch, NULL);
}

static void apply_free(sp_fs *fs, const char *patch)
{
    sp_patch_result_free(apply(fs, patch));
}

/* Expect a failure with `code` whose message contains `needle`. */
static void apply_err_opts(sp_fs *fs, const char *patch, const sp_patch_opts *o, int code,
                           const char *needle)
{
    sp_patch_result *res = (sp_patch_result *)1;
    sp_error *err = NULL;
    int r = sp_fs_apply_patch(&res, fs, patch, strlen(patch), o, &err);
    if (r != code)
        fail_msg("expected %d, got %d (%s)\n--- patch:\n%s", code, r,
                 err ? err->message : "no message", patch);
    assert_null(res);
    assert_non_null(err);
    assert_int_equal(err->code, code);
    if (needle && !strstr(err->message, needle))
        fail_msg("message '%s' lacks '%s'", err->message, needle);
    sp_error_free(err);
}

static void apply_err(sp_fs *fs, const char *patch, int code, const char *needle)
{
    apply_err_opts(fs, patch, NULL, code, needle);
}

static void assert_content(const char *dir, const char *rel, const char *want)
{
    size_t len = 0;
    char *got = tu_read(dir, rel, &len);
    if (!got)
        fail_msg("%s is missing", rel);
    if (len != strlen(want) || memcmp(got, want, len) != 0)
        fail_msg("%s holds\n[%s]\nexpected\n[%s]", rel, got, want);
    free(got);
}

static unsigned mode_of(const char *dir, const char *rel)
{
    char *p = tu_join(dir, rel);
    struct stat st;
    assert_int_equal(lstat(p, &st), 0);
    free(p);
    return st.st_mode & 07777;
}

/* No temp file of ours is left anywhere below dir. */
static void assert_no_temps(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (strncmp(e->d_name, ".sandpod-", 9) == 0)
            fail_msg("temp file left: %s/%s", dir, e->d_name);
        if (e->d_type == DT_DIR) {
            char *sub = tu_join(dir, e->d_name);
            assert_no_temps(sub);
            free(sub);
        }
    }
    closedir(d);
}

static const sp_patch_file *file_of(const sp_patch_result *r, size_t i)
{
    assert_true(i < r->n);
    return &r->files[i];
}

/* ------------------------------------------------------------ Codex -- */

static void test_codex_basic(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "del.txt", "gone\nsoon\n", 0644);
    tu_write(f->dir, "mod.txt", "line1\nline2\nline3\nline4\nline5\nline6\nline7\n", 0640);
    sp_patch_result *r = apply(f->fs, "*** Begin Patch\n"
                                      "*** Add File: nested/dir/new.txt\n"
                                      "+hello\n"
                                      "+world\n"
                                      "*** Delete File: del.txt\n"
                                      "*** Update File: mod.txt\n"
                                      "@@\n"
                                      " line1\n"
                                      "-line2\n"
                                      "+LINE2\n"
                                      "+line2.5\n"
                                      " line3\n"
                                      "@@\n"
                                      " line5\n"
                                      "-line6\n"
                                      " line7\n"
                                      "*** End Patch\n");
    assert_int_equal(r->format, SP_PATCH_CODEX);
    assert_false(r->dry_run);
    assert_int_equal(r->n, 3);
    const sp_patch_file *a = file_of(r, 0), *d = file_of(r, 1), *u = file_of(r, 2);
    assert_int_equal(a->action, SP_PATCH_ADD);
    assert_string_equal(a->path, "nested/dir/new.txt");
    assert_null(a->new_path);
    assert_int_equal(a->lines_added, 2);
    assert_int_equal(a->bytes_written, 12);
    assert_int_equal(a->mode, 0644);
    assert_int_equal(d->action, SP_PATCH_DELETE);
    assert_int_equal(d->lines_removed, 2);
    assert_int_equal(d->bytes_written, 0);
    assert_int_equal(u->action, SP_PATCH_UPDATE);
    assert_int_equal(u->lines_added, 2);
    assert_int_equal(u->lines_removed, 2);
    assert_int_equal(u->mode, 0640);
    sp_patch_result_free(r);

    assert_content(f->dir, "nested/dir/new.txt", "hello\nworld\n");
    assert_false(tu_exists(f->dir, "del.txt"));
    assert_content(f->dir, "mod.txt", "line1\nLINE2\nline2.5\nline3\nline4\nline5\nline7\n");
    assert_int_equal(mode_of(f->dir, "mod.txt"), 0640); /* mode kept */
    assert_no_temps(f->dir);

    /* The first chunk may go without "@@"; /workspace paths are fine. */
    apply_free(f->fs, "*** Begin Patch\n"
                      "*** Update File: /workspace/mod.txt\n"
                      " line1\n"
                      "-LINE2\n"
                      "+line2\n"
                      "*** End Patch");
    assert_content(f->dir, "mod.txt", "line1\nline2\nline2.5\nline3\nline4\nline5\nline7\n");
    assert_string_equal(sp_patch_action_name(SP_PATCH_COPY), "copy");
    assert_string_equal(sp_patch_format_name(SP_PATCH_UNIFIED), "unified");
}

static void test_codex_move(void **state)
{
    fixture *f = *state;
    tu_mkdir(f->dir, "old");
    tu_write(f->dir, "old/name.txt", "a\nb\nc\n", 0755);
    tu_write(f->dir, "keep.txt", "keep\n", 0644);
    sp_patch_result *r = apply(f->fs, "*** Begin Patch\n"
                                      "*** Update File: old/name.txt\n"
                                      "*** Move to: renamed/dir/name.txt\n"
                                      "@@\n"
                                      " a\n"
                                      "-b\n"
                                      "+B\n"
                                      "*** End Patch\n");
    assert_int_equal(r->files[0].action, SP_PATCH_MOVE);
    assert_string_equal(r->files[0].path, "old/name.txt");
    assert_string_equal(r->files[0].new_path, "renamed/dir/name.txt");
    sp_patch_result_free(r);
    assert_false(tu_exists(f->dir, "old/name.txt"));
    assert_true(tu_exists(f->dir, "old")); /* folders are left alone */
    assert_content(f->dir, "renamed/dir/name.txt", "a\nB\nc\n");
    assert_int_equal(mode_of(f->dir, "renamed/dir/name.txt"), 0755);

    /* A move without chunks is a plain rename. */
    apply_free(f->fs, "*** Begin Patch\n"
                      "*** Update File: renamed/dir/name.txt\n"
                      "*** Move to: plain.txt\n"
                      "*** End Patch\n");
    assert_content(f->dir, "plain.txt", "a\nB\nc\n");
    assert_false(tu_exists(f->dir, "renamed/dir/name.txt"));

    /* Onto an existing file: refused unless allow_overwrite (Codex). */
    const char *onto = "*** Begin Patch\n"
                       "*** Update File: plain.txt\n"
                       "*** Move to: keep.txt\n"
                       "@@\n"
                       "-a\n"
                       "+A\n"
                       "*** End Patch\n";
    apply_err(f->fs, onto, SP_EEXISTS, "cannot move plain.txt to keep.txt: it already exists");
    assert_content(f->dir, "keep.txt", "keep\n");
    sp_patch_opts o = SP_PATCH_OPTS_INIT;
    o.allow_overwrite = true;
    sp_patch_result_free(apply_opts(f->fs, onto, &o));
    assert_content(f->dir, "keep.txt", "A\nB\nc\n");
    assert_false(tu_exists(f->dir, "plain.txt"));

    /* Moving a missing file. */
    apply_err(f->fs,
              "*** Begin Patch\n*** Update File: nope.txt\n*** Move to: x.txt\n*** End Patch\n",
              SP_ENOTFOUND, "no such file to move: nope.txt");
}

static void test_codex_context_header(void **state)
{
    fixture *f = *state;
    const char *src = "class A:\n"
                      "    def f(self):\n"
                      "        return 1\n"
                      "class B:\n"
                      "    def f(self):\n"
                      "        return 1\n"
                      "    def g(self):\n"
                      "        return 1\n";
    tu_write(f->dir, "m.py", src, 0644);
    /* "@@ class B:" skips the identical lines of class A. */
    apply_free(f->fs, "*** Begin Patch\n"
                      "*** Update File: m.py\n"
                      "@@ class B:\n"
                      "     def f(self):\n"
                      "-        return 1\n"
                      "+        return 2\n"
                      "*** End Patch\n");
    assert_content(f->dir, "m.py",
                   "class A:\n    def f(self):\n        return 1\nclass B:\n    def f(self):\n"
                   "        return 2\n    def g(self):\n        return 1\n");
    /* Two "@@" lines in a row narrow down twice. */
    apply_free(f->fs, "*** Begin Patch\n"
                      "*** Update File: m.py\n"
                      "@@ class B:\n"
                      "@@     def g(self):\n"
                      "-        return 1\n"
                      "+        return 3\n"
                      "*** End Patch\n");
    assert_content(f->dir, "m.py",
                   "class A:\n    def f(self):\n        return 1\nclass B:\n    def f(self):\n"
                   "        return 2\n    def g(self):\n        return 3\n");
    /* Without the header, the first match wins. */
    apply_free(f->fs, "*** Begin Patch\n"
                      "*** Update File: m.py\n"
                      "@@\n"
                      "-        return 1\n"
                      "+        return 0\n"
                      "*** End Patch\n");
    assert_content(f->dir, "m.py",
                   "class A:\n    def f(self):\n        return 0\nclass B:\n    def f(self):\n"
                   "        return 2\n    def g(self):\n        return 3\n");
    /* A context line that is not there. */
    apply_err(f->fs, "*** Begin Patch\n*** Update File: m.py\n@@ class C:\n-x\n+y\n*** End Patch\n",
              SP_EINVAL,
              "chunk 1 of m.py (@@ class C:): its context line 'class C:' was not found");
    /* A unified-style header's numbers are ignored. */
    apply_free(f->fs, "*** Begin Patch\n"
                      "*** Update File: m.py\n"
                      "@@ -1,3 +1,3 @@\n"
                      "-class A:\n"
                      "+class AA:\n"
                      "*** End Patch\n");
    char *got = tu_read(f->dir, "m.py", NULL);
    assert_non_null(strstr(got, "class AA:\n"));
    free(got);
}

static void test_codex_end_of_file(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "t.txt", "end\nmiddle\nend\n", 0644);
    apply_free(f->fs, "*** Begin Patch\n"
                      "*** Update File: t.txt\n"
                      "@@\n"
                      "-end\n"
                      "+END\n"
                      "*** End of File\n"
                      "*** End Patch\n");
    assert_content(f->dir, "t.txt", "end\nmiddle\nEND\n");
    /* End of File means at the end. */
    apply_err(f->fs,
              "*** Begin Patch\n*** Update File: t.txt\n@@\n-middle\n+M\n*** End of File\n"
              "*** End Patch\n",
              SP_EINVAL, "was not found at the end of the file");
    /* Pure additions: at the end without context, after it with context. */
    apply_free(f->fs, "*** Begin Patch\n"
                      "*** Update File: t.txt\n"
                      "@@\n"
                      "+appended\n"
                      "*** End Patch\n");
    assert_content(f->dir, "t.txt", "end\nmiddle\nEND\nappended\n");
    apply_free(f->fs, "*** Begin Patch\n"
                      "*** Update File: t.txt\n"
                      "@@ middle\n"
                      "+after middle\n"
                      "*** End Patch\n");
    assert_content(f->dir, "t.txt", "end\nmiddle\nafter middle\nEND\nappended\n");
}

static void test_codex_whitespace(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "w.txt", "alpha   \n\tbeta\ngamma\n", 0644);
    /* Padded markers; no space after the colon; trailing whitespace in the
     * file but not the patch (second pass); indentation differs (third). */
    apply_free(f->fs, "  *** Begin Patch  \n"
                      "*** Update File:w.txt   \n"
                      "  @@  \n"
                      " alpha\n"
                      "-beta\n"
                      "+BETA\n"
                      " *** End Patch\n");
    assert_content(f->dir, "w.txt", "alpha   \nBETA\ngamma\n");

    /* Blank lines that end a chunk (spacing before the next marker) are
     * dropped when they do not match. */
    apply_free(f->fs, "*** Begin Patch\n"
                      "*** Update File: w.txt\n"
                      "@@\n"
                      "-gamma\n"
                      "+GAMMA\n"
                      "\n"
                      "\n"
                      "*** End Patch\n");
    assert_content(f->dir, "w.txt", "alpha   \nBETA\nGAMMA\n");

    /* Blank lines between file operations. */
    apply_free(f->fs, "*** Begin Patch\n"
                      "\n"
                      "*** Add File: b1.txt\n"
                      "+1\n"
                      "\n"
                      "*** Add File: b2.txt\n"
                      "+2\n"
                      "\n"
                      "*** End Patch\n"
                      "\n");
    assert_content(f->dir, "b1.txt", "1\n");
    assert_content(f->dir, "b2.txt", "2\n");
}

static void test_codex_heredoc(void **state)
{
    fixture *f = *state;
    apply_free(f->fs, "apply_patch <<'EOF'\n"
                      "*** Begin Patch\n"
                      "*** Add File: h1.txt\n"
                      "+one\n"
                      "*** End Patch\n"
                      "EOF\n");
    assert_content(f->dir, "h1.txt", "one\n");
    apply_free(f->fs, "\n<<\"PATCH\"\n"
                      "*** Begin Patch\n"
                      "*** Update File: h1.txt\n"
                      "-one\n"
                      "+two\n"
                      "*** End Patch\n"
                      "PATCH");
    assert_content(f->dir, "h1.txt", "two\n");
    apply_free(f->fs, "apply_patch <<EOF\n"
                      "*** Begin Patch\n"
                      "*** Delete File: h1.txt\n"
                      "*** End Patch\n"
                      "EOF\n");
    assert_false(tu_exists(f->dir, "h1.txt"));
    /* The closing word must match. */
    apply_err(f->fs,
              "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: x\n+x\n*** End Patch\nEND\n",
              SP_EINVAL,
              "patch line 6: the heredoc opened on line 1 is not closed: end the patch with a "
              "line 'EOF'");
    assert_false(tu_exists(f->dir, "x"));
    /* Codex's other spellings: applypatch, a space after <<, <<- (tabs
     * before the closing word), a closing line with spaces around it. */
    apply_free(f->fs, "applypatch << \"P\"\n*** Begin Patch\n*** Add File: h2.txt\n+2\n"
                      "*** End Patch\n\tP\n\n");
    assert_content(f->dir, "h2.txt", "2\n");
    apply_free(f->fs, "apply_patch <<-EOF\n*** Begin Patch\n*** Delete File: h2.txt\n"
                      "*** End Patch\n\t\tEOF\n");
    assert_false(tu_exists(f->dir, "h2.txt"));
    /* A context line " EOF" does not close the heredoc (a shell reads it
     * as part of the body too). */
    tu_write(f->dir, "s.sh", "cat <<EOF\nhi\nEOF\necho\n", 0644);
    apply_free(f->fs, "apply_patch <<EOF\n*** Begin Patch\n*** Update File: s.sh\n@@\n hi\n EOF\n"
                      "-echo\n+echo done\n*** End Patch\nEOF\n");
    assert_content(f->dir, "s.sh", "cat <<EOF\nhi\nEOF\necho done\n");
    /* Codex's lenient-parser tests: mismatched quotes are no heredoc; a
     * heredoc whose patch lacks its end marker fails on that. */
    apply_err(f->fs, "<<\"EOF'\n*** Begin Patch\n*** Add File: m.txt\n+m\n*** End Patch\nEOF\n",
              SP_EINVAL, "patch line 1: expected '*** Begin Patch', found '<<\"EOF''");
    apply_err(f->fs, "<<EOF\n*** Begin Patch\n*** Update File: s.sh\nEOF\n", SP_EINVAL,
              "the patch ends without '*** End Patch'");
    assert_false(tu_exists(f->dir, "m.txt"));
    /* A diff whose first line holds "<<" is no heredoc. */
    apply_free(f->fs, "diff --git a/x<<EOF b/x<<EOF\nnew file mode 100644\n--- /dev/null\n"
                      "+++ b/x<<EOF\n@@ -0,0 +1 @@\n+x\n");
    assert_content(f->dir, "x<<EOF", "x\n");
}

/* The outcomes of Codex's own unit tests (codex-rs/apply-patch lib.rs and
 * invocation.rs): the file before, the patch body, the file after. */
static void test_codex_unit_outcomes(void **state)
{
    fixture *f = *state;
    static const struct {
        const char *before, *body, *after;
    } cases[] = {
        {NULL, "*** Add File: t.txt\n+ab\n+cd\n", "ab\ncd\n"},
        {"foo\nbar\n", "*** Update File: t.txt\n@@\n foo\n-bar\n+baz\n", "foo\nbaz\n"},
        {"foo\nbar\nbaz\nqux\n",
         "*** Update File: t.txt\n@@\n foo\n-bar\n+BAR\n@@\n baz\n-qux\n+QUX\n",
         "foo\nBAR\nbaz\nQUX\n"},
        {"a\nb\nc\nd\ne\nf\n",
         "*** Update File: t.txt\n@@\n a\n-b\n+B\n@@\n c\n d\n-e\n+E\n@@\n f\n+g\n"
         "*** End of File\n",
         "a\nB\nc\nd\nE\nf\ng\n"},
        {"line1\nline2\nline3\n",
         "*** Update File: t.txt\n@@\n+after-context\n+second-line\n@@\n line1\n-line2\n-line3\n"
         "+line2-replacement\n",
         "line1\nline2-replacement\nafter-context\nsecond-line\n"},
        {"import asyncio  # local import \xe2\x80\x93 avoids top\xe2\x80\x91level dep\n",
         "*** Update File: t.txt\n@@\n-import asyncio  # local import - avoids top-level dep\n"
         "+import asyncio  # HELLO\n",
         "import asyncio  # HELLO\n"},
        {"foo\nbar\nbaz\n", "*** Update File: t.txt\n@@\n foo\n bar\n-baz\n+BAZ\n",
         "foo\nbar\nBAZ\n"},
        {"foo\nbar\nbaz\n", "*** Update File: t.txt\n@@\n+quux\n*** End of File\n",
         "foo\nbar\nbaz\nquux\n"},
        {"foo\nbar\nbaz\n", "*** Update File: t.txt\n@@\n-foo\n+FOO\n bar\n", "FOO\nbar\nbaz\n"},
        /* Codex's Windows-only CRLF tests: sandpod keeps CRLF everywhere. */
        {"a\r\nb\r\nc\r\n", "*** Update File: t.txt\n@@\n a\n-b\n+B\n@@\n c\n+d\n*** End of File\n",
         "a\r\nB\r\nc\r\nd\r\n"},
        {"foo\r\r\nbar\r\n", "*** Update File: t.txt\n@@\n+BAZ\n*** End of File\n",
         "foo\r\r\nbar\r\nBAZ\r\n"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (cases[i].before)
            tu_write(f->dir, "t.txt", cases[i].before, 0644);
        else if (tu_exists(f->dir, "t.txt"))
            tu_write(f->dir, "t.txt", "", 0644);
        char patch[1024];
        snprintf(patch, sizeof(patch), "*** Begin Patch\n%s*** End Patch\n", cases[i].body);
        sp_patch_opts o = SP_PATCH_OPTS_INIT;
        o.allow_overwrite = true;
        sp_patch_result_free(apply_opts(f->fs, patch, &o));
        assert_content(f->dir, "t.txt", cases[i].after);
    }
    /* Move (then the source is gone) and delete. */
    tu_write(f->dir, "src.txt", "line\n", 0644);
    apply_free(
        f->fs,
        "*** Begin Patch\n*** Update File: src.txt\n*** Move to: dst.txt\n@@\n-line\n+line2\n"
        "*** End Patch\n");
    assert_false(tu_exists(f->dir, "src.txt"));
    assert_content(f->dir, "dst.txt", "line2\n");
    apply_free(f->fs, "*** Begin Patch\n*** Delete File: dst.txt\n*** End Patch\n");
    assert_false(tu_exists(f->dir, "dst.txt"));
}

/* Anything but `apply_patch` or `cd DIR && apply_patch` before `<<` is
 * refused and changes nothing: Codex does not take it as a patch either
 * (its tests: cd with ';', '||', '|', two cd, echo before, cd with two
 * arguments, an argument to apply_patch, a command after the heredoc). */
static void test_codex_heredoc_refused(void **state)
{
    fixture *f = *state;
    static const char *const prefixes[] = {
        "cd foo; apply_patch",
        "cd foo || apply_patch",
        "cd foo | apply_patch",
        "cd foo && cd bar && apply_patch",
        "echo hi && apply_patch",
        "echo foo; cd foo && apply_patch",
        "cd foo bar && apply_patch",
        "apply_patch foo",
        "bash -lc 'apply_patch",
        "cat",
        "patch -p1",
        "sudo apply_patch",
        "cd $HOME && apply_patch",
        "cd ~/x && apply_patch",
        "cd \"$D\" && apply_patch",
        "cd && apply_patch",
        "cd 'foo && apply_patch",
        "apply_patch && apply_patch",
    };
    tu_mkdir(f->dir, "foo");
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        char patch[512];
        snprintf(patch, sizeof(patch),
                 "%s <<'EOF'\n*** Begin Patch\n*** Add File: r.txt\n+x\n*** End Patch\nEOF\n",
                 prefixes[i]);
        sp_patch_result *res = (sp_patch_result *)1;
        sp_error *err = NULL;
        int r = sp_fs_apply_patch(&res, f->fs, patch, strlen(patch), NULL, &err);
        if (r != SP_EINVAL || !err || err->reason != SP_R_PATCH_PARSE ||
            !strstr(err->message, "patch line 1: "))
            fail_msg("prefix [%s]: %d %s", prefixes[i], r, err ? err->message : "");
        sp_error_free(err);
        assert_null(res);
    }
    assert_false(tu_exists(f->dir, "r.txt"));
    assert_false(tu_exists(f->dir, "foo/r.txt"));
    /* A command after the heredoc. */
    apply_err(f->fs,
              "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: r.txt\n+x\n*** End Patch\nEOF\n"
              "echo done\n",
              SP_EINVAL, "patch line 7: text after the line 'EOF' that closes the heredoc");
    apply_err(f->fs,
              "apply_patch <<'EOF' && echo done\n*** Begin Patch\n*** Add File: r.txt\n+x\n"
              "*** End Patch\nEOF\n",
              SP_EINVAL, "expected '*** Begin Patch'");
    assert_false(tu_exists(f->dir, "r.txt"));
}

/* `cd DIR && apply_patch <<'EOF'` applies in DIR, as Codex does (its
 * tests: a bare word, 'single' and "double" quoted paths with spaces, a
 * Move to in the same folder). */
static void test_codex_heredoc_cd(void **state)
{
    fixture *f = *state;
    tu_mkdir(f->dir, "sub");
    tu_mkdir(f->dir, "sub/in");
    tu_mkdir(f->dir, "foo bar");
    tu_write(f->dir, "sub/old.txt", "before\n", 0644);
    tu_write(f->dir, "old.txt", "root\n", 0644);
    sp_patch_result *r = apply(f->fs, "cd sub && apply_patch <<'EOF'\n"
                                      "*** Begin Patch\n"
                                      "*** Add File: new.txt\n"
                                      "+hi\n"
                                      "*** Update File: old.txt\n"
                                      "*** Move to: renamed.txt\n"
                                      "@@\n"
                                      "-before\n"
                                      "+after\n"
                                      "*** End Patch\n"
                                      "EOF\n");
    assert_string_equal(file_of(r, 0)->path, "sub/new.txt");
    assert_string_equal(file_of(r, 1)->path, "sub/old.txt");
    assert_string_equal(file_of(r, 1)->new_path, "sub/renamed.txt");
    sp_patch_result_free(r);
    assert_content(f->dir, "sub/new.txt", "hi\n");
    assert_content(f->dir, "sub/renamed.txt", "after\n");
    assert_false(tu_exists(f->dir, "sub/old.txt"));
    assert_false(tu_exists(f->dir, "new.txt"));
    assert_content(f->dir, "old.txt", "root\n");

    apply_free(f->fs, "cd 'foo bar' && apply_patch <<EOF\n*** Begin Patch\n*** Add File: q1\n+1\n"
                      "*** End Patch\nEOF\n");
    assert_content(f->dir, "foo bar/q1", "1\n");
    apply_free(f->fs, "cd \"foo bar\" && applypatch <<\"EOF\"\n*** Begin Patch\n"
                      "*** Add File: q2\n+2\n*** End Patch\nEOF\n");
    assert_content(f->dir, "foo bar/q2", "2\n");
    /* A path under /workspace stays where it says; "cd ./sub/in/.." is sub. */
    apply_free(f->fs, "cd ./sub/in/.. && apply_patch <<EOF\n*** Begin Patch\n"
                      "*** Add File: /workspace/abs.txt\n+a\n*** Add File: in/rel.txt\n+r\n"
                      "*** End Patch\nEOF\n");
    assert_content(f->dir, "abs.txt", "a\n");
    assert_content(f->dir, "sub/in/rel.txt", "r\n");
    apply_free(f->fs, "cd /workspace/sub && apply_patch <<EOF\n*** Begin Patch\n"
                      "*** Delete File: in/rel.txt\n*** End Patch\nEOF\n");
    assert_false(tu_exists(f->dir, "sub/in/rel.txt"));
    /* A unified diff in a heredoc goes to the folder too. */
    apply_free(f->fs, "cd sub && apply_patch <<'EOF'\n--- a/new.txt\n+++ b/new.txt\n@@ -1 +1 @@\n"
                      "-hi\n+hello\nEOF\n");
    assert_content(f->dir, "sub/new.txt", "hello\n");
    /* A symlink to a folder inside is followed, as a shell would. */
    char *link = tu_join(f->dir, "lnk");
    assert_int_equal(symlink("sub", link), 0);
    free(link);
    apply_free(f->fs, "cd lnk && apply_patch <<EOF\n*** Begin Patch\n*** Add File: via.txt\n+v\n"
                      "*** End Patch\nEOF\n");
    assert_content(f->dir, "sub/via.txt", "v\n");

    /* Outside the workspace, missing, or not a folder: nothing changes. */
    static const char *const tail = " && apply_patch <<EOF\n*** Begin Patch\n*** Add File: z.txt\n"
                                    "+z\n*** End Patch\nEOF\n";
    char p[256];
    snprintf(p, sizeof(p), "cd ..%s", tail);
    apply_err(f->fs, p, SP_EESCAPE, "patch line 1: cd ..");
    snprintf(p, sizeof(p), "cd sub/../../x%s", tail);
    apply_err(f->fs, p, SP_EESCAPE, "cd sub/../../x");
    snprintf(p, sizeof(p), "cd /etc%s", tail);
    apply_err(f->fs, p, SP_EESCAPE, "cd /etc");
    snprintf(p, sizeof(p), "cd nope%s", tail);
    apply_err(f->fs, p, SP_ENOTFOUND, "cd nope: no such folder in the workspace");
    snprintf(p, sizeof(p), "cd old.txt%s", tail);
    apply_err(f->fs, p, SP_EINVAL, "cd old.txt: not a folder");
    char *out = tu_join(f->dir, "../outside-dir");
    mkdir(out, 0755);
    char *esc = tu_join(f->dir, "esc");
    assert_int_equal(symlink(out, esc), 0);
    snprintf(p, sizeof(p), "cd esc%s", tail);
    apply_err(f->fs, p, SP_EESCAPE, "cd esc");
    assert_false(tu_exists(out, "z.txt"));
    free(esc);
    tu_rmtree(out);
    free(out);
    assert_false(tu_exists(f->dir, "z.txt"));
    assert_false(tu_exists(f->dir, "sub/z.txt"));
    /* A path that climbs out of the folder but stays inside is fine; one
     * that leaves the workspace from it is not. */
    apply_free(f->fs, "cd sub && apply_patch <<EOF\n*** Begin Patch\n*** Add File: ../up.txt\n+u\n"
                      "*** End Patch\nEOF\n");
    assert_content(f->dir, "up.txt", "u\n");
    apply_err(f->fs,
              "cd sub && apply_patch <<EOF\n*** Begin Patch\n*** Add File: ../../x.txt\n"
              "+u\n*** End Patch\nEOF\n",
              SP_EESCAPE, NULL);
}

static void test_codex_parse_errors(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "a.txt", "a\n", 0644);
    apply_err(f->fs, "*** Begin Patch\n*** Add File: x.txt\n+x\n", SP_EINVAL,
              "patch line 3: the patch ends without '*** End Patch'");
    apply_err(f->fs, "hello\n*** Begin Patch\n*** End Patch\n", SP_EINVAL,
              "patch line 1: expected '*** Begin Patch', found 'hello'");
    apply_err(f->fs, "*** Begin Patch\n*** Frobnicate File: a.txt\n*** End Patch\n", SP_EINVAL,
              "patch line 2: expected '*** Add File:', '*** Delete File:', '*** Update File:' or "
              "'*** End Patch', found '*** Frobnicate File: a.txt'");
    apply_err(f->fs, "*** Begin Patch\n*** Update File: a.txt\n*** End Patch\n", SP_EINVAL,
              "patch line 2: Update File a.txt has no chunks");
    apply_err(f->fs, "*** Begin Patch\n*** Update File: a.txt\n@@\n*** End Patch\n", SP_EINVAL,
              "chunk 1 of a.txt has no lines");
    apply_err(f->fs, "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\nxyz\n*** End Patch\n",
              SP_EINVAL,
              "patch line 6: expected '@@' or a chunk line starting with ' ', '-' or '+' in "
              "a.txt, found 'xyz'");
    apply_err(f->fs, "*** Begin Patch\n*** Update File: a.txt\n@@\nxyz\n*** End Patch\n", SP_EINVAL,
              "patch line 4: expected a chunk line of a.txt starting with ' ', '-' or '+', found "
              "'xyz'");
    apply_err(f->fs, "*** Begin Patch\n*** Add File: n.txt\n+one\n\n+three\n*** End Patch\n",
              SP_EINVAL, "patch line 4: blank line inside Add File n.txt");
    apply_err(f->fs, "*** Begin Patch\n*** End Patch\n*** Add File: n.txt\n+x\n", SP_EINVAL,
              "patch line 3: unexpected text after '*** End Patch'");
    apply_err(f->fs, "*** Begin Patch\n*** Add File:\n+x\n*** End Patch\n", SP_EINVAL,
              "patch line 2: the file path is missing");
    apply_err(f->fs, "", SP_EINVAL, "not a patch");
    apply_err(f->fs, "just some text\n", SP_EINVAL, "not a patch");
    /* An empty envelope is an error, in Codex's words (its scenario
     * 005_rejects_empty_patch), also inside a heredoc. */
    apply_err(f->fs, "*** Begin Patch\n*** End Patch\n", SP_EINVAL, "No files were modified.");
    apply_err(f->fs, "  *** Begin Patch\n\n*** End Patch  \n", SP_EINVAL,
              "No files were modified.");
    apply_err(f->fs, "apply_patch <<'EOF'\n*** Begin Patch\n*** End Patch\nEOF\n", SP_EINVAL,
              "No files were modified.");
    sp_patch_result *r = (sp_patch_result *)1;
    sp_error *err = NULL;
    assert_int_equal(sp_patch_parse(&r, "*** Begin Patch\n*** End Patch", 29, NULL, &err),
                     SP_EINVAL);
    assert_null(r);
    assert_int_equal(err->reason, SP_R_PATCH_PARSE);
    sp_error_free(err);
    assert_content(f->dir, "a.txt", "a\n");
}

static void test_codex_not_applying(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "src.c",
             "int main(void)\n{\n    int x = 1;\n    int y = 2;\n    return x + y;\n}\n", 0644);
    apply_err(f->fs,
              "*** Begin Patch\n*** Update File: src.c\n@@ int main(void)\n     int x = 1;\n"
              "-    int y = 3;\n+    int y = 4;\n     return x + y;\n*** End Patch\n",
              SP_EINVAL,
              "chunk 1 of src.c (@@ int main(void)) does not apply: its 3 lines were not found "
              "after line 1; the closest match is at line 3, where 2 of its 3 lines agree; line 4 "
              "there is '    int y = 2;' where the chunk expects '    int y = 3;'");
    apply_err(f->fs,
              "*** Begin Patch\n*** Update File: src.c\n@@\n-nothing like it\n*** End Patch\n",
              SP_EINVAL, "none of its lines occur in the file");
    /* A file of blank lines: the typographic pass sees only empty keys
     * (once undefined behaviour, found by fuzz_patch). */
    tu_write(f->dir, "blank.txt", "\n\n\n", 0644);
    apply_err(f->fs, "*** Begin Patch\n*** Update File: blank.txt\n@@\n-x\n*** End Patch\n",
              SP_EINVAL, "none of its lines occur in the file");
    apply_err(f->fs, "*** Begin Patch\n*** Update File: missing.c\n@@\n-a\n*** End Patch\n",
              SP_ENOTFOUND, "no such file to update: missing.c");
    apply_err(f->fs, "*** Begin Patch\n*** Delete File: missing.c\n*** End Patch\n", SP_ENOTFOUND,
              "no such file to delete: missing.c");
    tu_mkdir(f->dir, "adir");
    apply_err(f->fs, "*** Begin Patch\n*** Delete File: adir\n*** End Patch\n", SP_EINVAL,
              "is a folder, not a file: adir");
    apply_err(f->fs, "*** Begin Patch\n*** Add File: adir\n+x\n*** End Patch\n", SP_EINVAL,
              "is a folder, not a file: adir");
    assert_content(f->dir, "src.c",
                   "int main(void)\n{\n    int x = 1;\n    int y = 2;\n    return x + y;\n}\n");
}

static void test_codex_crlf(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "win.txt", "one\r\ntwo\r\nthree\r\n", 0644);
    /* An LF patch on a CRLF file: the endings stay, added lines get CRLF. */
    apply_free(f->fs, "*** Begin Patch\n"
                      "*** Update File: win.txt\n"
                      "@@\n"
                      " one\n"
                      "-two\n"
                      "+2\n"
                      "+2.5\n"
                      "*** End Patch\n");
    assert_content(f->dir, "win.txt", "one\r\n2\r\n2.5\r\nthree\r\n");
    /* A CRLF patch works the same. */
    apply_free(f->fs, "*** Begin Patch\r\n"
                      "*** Update File: win.txt\r\n"
                      "@@\r\n"
                      "-three\r\n"
                      "+3\r\n"
                      "*** End Patch\r\n");
    assert_content(f->dir, "win.txt", "one\r\n2\r\n2.5\r\n3\r\n");
    /* Added files get LF. */
    apply_free(f->fs, "*** Begin Patch\r\n*** Add File: lf.txt\r\n+x\r\n*** End Patch\r\n");
    assert_content(f->dir, "lf.txt", "x\n");
}

static void test_codex_unicode(void **state)
{
    fixture *f = *state;
    /* U+2010 hyphen, U+201C/U+201D quotes, U+00A0 no-break space. */
    const char *src = "title \xe2\x80\x90 sub\n"
                      "say \xe2\x80\x9chi\xe2\x80\x9d\n"
                      "a\xc2\xa0"
                      "b\n"
                      "last\n";
    tu_write(f->dir, "u.txt", src, 0644);
    apply_free(f->fs, "*** Begin Patch\n"
                      "*** Update File: u.txt\n"
                      "@@\n"
                      " title - sub\n"
                      "-say \"hi\"\n"
                      "+say \"hello\"\n"
                      " a b\n"
                      "*** End Patch\n");
    /* Context lines are kept as the file has them, not as the patch. */
    assert_content(f->dir, "u.txt",
                   "title \xe2\x80\x90 sub\n"
                   "say \"hello\"\n"
                   "a\xc2\xa0"
                   "b\n"
                   "last\n");
}

static void test_codex_files(void **state)
{
    fixture *f = *state;
    /* An empty file, a file of one empty line. */
    apply_free(f->fs, "*** Begin Patch\n*** Add File: empty.txt\n*** Add File: nl.txt\n+\n"
                      "*** End Patch\n");
    assert_content(f->dir, "empty.txt", "");
    assert_content(f->dir, "nl.txt", "\n");
    /* Adding to an empty file. */
    apply_free(f->fs, "*** Begin Patch\n*** Update File: empty.txt\n@@\n+first\n*** End Patch\n");
    assert_content(f->dir, "empty.txt", "first\n");

    /* No final newline: kept when the end is untouched... */
    tu_write(f->dir, "nonl.txt", "a\nb\nc", 0644);
    apply_free(f->fs,
               "*** Begin Patch\n*** Update File: nonl.txt\n@@\n-a\n+A\n b\n*** End Patch\n");
    assert_content(f->dir, "nonl.txt", "A\nb\nc");
    /* ...also when the last line is only context... */
    apply_free(f->fs,
               "*** Begin Patch\n*** Update File: nonl.txt\n@@\n-b\n+B\n c\n*** End Patch\n");
    assert_content(f->dir, "nonl.txt", "A\nB\nc");
    /* ...and added when the patch changes the last line or adds after it. */
    apply_free(f->fs, "*** Begin Patch\n*** Update File: nonl.txt\n@@\n-c\n+C\n*** End Patch\n");
    assert_content(f->dir, "nonl.txt", "A\nB\nC\n");
    tu_write(f->dir, "nonl2.txt", "x", 0644);
    apply_free(f->fs, "*** Begin Patch\n*** Update File: nonl2.txt\n@@\n+y\n*** End Patch\n");
    assert_content(f->dir, "nonl2.txt", "x\ny\n");
    /* Removing every line leaves an empty file. */
    apply_free(f->fs,
               "*** Begin Patch\n*** Update File: nonl.txt\n@@\n-A\n-B\n-C\n*** End Patch\n");
    assert_content(f->dir, "nonl.txt", "");

    /* Add of an existing file: SP_EEXISTS, or Codex's overwrite. */
    const char *again = "*** Begin Patch\n*** Add File: nl.txt\n+new\n*** End Patch\n";
    apply_err(f->fs, again, SP_EEXISTS, "already exists: nl.txt (use '*** Update File:'");
    sp_patch_opts o = SP_PATCH_OPTS_INIT;
    o.allow_overwrite = true;
    tu_write(f->dir, "nl.txt", "\n", 0600);
    sp_patch_result_free(apply_opts(f->fs, again, &o));
    assert_content(f->dir, "nl.txt", "new\n");
    assert_int_equal(mode_of(f->dir, "nl.txt"), 0600);
}

static void test_codex_sequence(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "s.txt", "old\n", 0644);
    /* Each operation sees the ones before it. */
    sp_patch_result *r = apply(f->fs, "*** Begin Patch\n"
                                      "*** Delete File: s.txt\n"
                                      "*** Add File: s.txt\n"
                                      "+new\n"
                                      "*** Update File: s.txt\n"
                                      "@@\n"
                                      "-new\n"
                                      "+newer\n"
                                      "*** Add File: t.txt\n"
                                      "+t\n"
                                      "*** Update File: t.txt\n"
                                      "@@\n"
                                      "+t2\n"
                                      "*** Update File: t.txt\n"
                                      "*** Move to: u.txt\n"
                                      "@@\n"
                                      "+t3\n"
                                      "*** End Patch\n");
    assert_int_equal(r->n, 6);
    assert_int_equal(r->files[5].bytes_written, 8);
    sp_patch_result_free(r);
    assert_content(f->dir, "s.txt", "newer\n");
    assert_false(tu_exists(f->dir, "t.txt"));
    assert_content(f->dir, "u.txt", "t\nt2\nt3\n");
    /* A file this patch deletes cannot be updated after. */
    apply_err(f->fs,
              "*** Begin Patch\n*** Delete File: u.txt\n*** Update File: u.txt\n@@\n+x\n"
              "*** End Patch\n",
              SP_ENOTFOUND, "no such file to update: u.txt");
    assert_content(f->dir, "u.txt", "t\nt2\nt3\n");
}

/* ---------------------------------------------------------- unified -- */

static void test_unified_multi_hunk(void **state)
{
    fixture *f = *state;
    tu_mkdir(f->dir, "src");
    tu_write(f->dir, "src/x.c",
             "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\n18\n19\n20\n", 0644);
    sp_patch_result *r = apply(f->fs, "diff --git a/src/x.c b/src/x.c\n"
                                      "index 1234567..89abcde 100644\n"
                                      "--- a/src/x.c\n"
                                      "+++ b/src/x.c\n"
                                      "@@ -1,4 +1,5 @@\n"
                                      " 1\n"
                                      " 2\n"
                                      "+2.5\n"
                                      " 3\n"
                                      " 4\n"
                                      "@@ -14,7 +15,6 @@ int f(void)\n"
                                      " 14\n"
                                      " 15\n"
                                      " 16\n"
                                      "-17\n"
                                      " 18\n"
                                      " 19\n"
                                      " 20\n");
    assert_int_equal(r->format, SP_PATCH_UNIFIED);
    assert_int_equal(r->n, 1);
    assert_int_equal(r->files[0].action, SP_PATCH_UPDATE);
    assert_string_equal(r->files[0].path, "src/x.c");
    assert_int_equal(r->files[0].lines_added, 1);
    assert_int_equal(r->files[0].lines_removed, 1);
    sp_patch_result_free(r);
    assert_content(f->dir, "src/x.c",
                   "1\n2\n2.5\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n18\n19\n20\n");
}

static void test_unified_add_delete(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "old.txt", "bye\nnow\n", 0644);
    tu_write(f->dir, "empty-old.txt", "", 0644);
    sp_patch_result *r = apply(f->fs, "Some commit message that git apply ignores.\n"
                                      "\n"
                                      "diff --git a/bin/run.sh b/bin/run.sh\n"
                                      "new file mode 100755\n"
                                      "index 0000000..1111111\n"
                                      "--- /dev/null\n"
                                      "+++ b/bin/run.sh\n"
                                      "@@ -0,0 +1,2 @@\n"
                                      "+#!/bin/sh\n"
                                      "+echo hi\n"
                                      "diff --git a/old.txt b/old.txt\n"
                                      "deleted file mode 100644\n"
                                      "index 2222222..0000000\n"
                                      "--- a/old.txt\n"
                                      "+++ /dev/null\n"
                                      "@@ -1,2 +0,0 @@\n"
                                      "-bye\n"
                                      "-now\n"
                                      "diff --git a/empty.txt b/empty.txt\n"
                                      "new file mode 100644\n"
                                      "index 0000000..e69de29\n"
                                      "diff --git a/empty-old.txt b/empty-old.txt\n"
                                      "deleted file mode 100644\n"
                                      "index e69de29..0000000\n"
                                      "-- \n"
                                      "2.39.5\n");
    assert_int_equal(r->n, 4);
    assert_int_equal(r->files[0].action, SP_PATCH_ADD);
    assert_int_equal(r->files[0].mode, 0755);
    assert_int_equal(r->files[1].action, SP_PATCH_DELETE);
    assert_int_equal(r->files[1].lines_removed, 2);
    assert_int_equal(r->files[2].action, SP_PATCH_ADD);
    assert_string_equal(r->files[2].path, "empty.txt");
    assert_int_equal(r->files[3].action, SP_PATCH_DELETE);
    sp_patch_result_free(r);
    assert_content(f->dir, "bin/run.sh", "#!/bin/sh\necho hi\n");
    assert_int_equal(mode_of(f->dir, "bin/run.sh"), 0755);
    assert_false(tu_exists(f->dir, "old.txt"));
    assert_content(f->dir, "empty.txt", "");
    assert_false(tu_exists(f->dir, "empty-old.txt"));

    /* Adding what exists; deleting what differs from the diff. */
    apply_err(f->fs, "--- /dev/null\n+++ b/empty.txt\n@@ -0,0 +1 @@\n+x\n", SP_EEXISTS,
              "already exists: empty.txt");
    tu_write(f->dir, "d.txt", "one\ntwo\nthree\n", 0644);
    apply_err(f->fs, "--- a/d.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-one\n-two\n", SP_EINVAL,
              "the deletion of d.txt does not match the file: 6 bytes would remain");
    apply_err(f->fs, "--- a/nope.txt\n+++ b/nope.txt\n@@ -1 +1 @@\n-a\n+b\n", SP_ENOTFOUND,
              "no such file to update: nope.txt");
    assert_content(f->dir, "d.txt", "one\ntwo\nthree\n");
}

static void test_unified_rename_copy(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "a.txt", "1\n2\n3\n4\n5\n", 0755);
    tu_write(f->dir, "keep.txt", "k\n", 0644);
    sp_patch_result *r = apply(f->fs, "diff --git a/a.txt b/dir/b.txt\n"
                                      "similarity index 100%\n"
                                      "rename from a.txt\n"
                                      "rename to dir/b.txt\n");
    assert_int_equal(r->files[0].action, SP_PATCH_MOVE);
    assert_string_equal(r->files[0].new_path, "dir/b.txt");
    sp_patch_result_free(r);
    assert_false(tu_exists(f->dir, "a.txt"));
    assert_content(f->dir, "dir/b.txt", "1\n2\n3\n4\n5\n");
    assert_int_equal(mode_of(f->dir, "dir/b.txt"), 0755);

    apply_free(f->fs, "diff --git a/dir/b.txt b/c.txt\n"
                      "similarity index 80%\n"
                      "rename from dir/b.txt\n"
                      "rename to c.txt\n"
                      "index 1111111..2222222 100755\n"
                      "--- a/dir/b.txt\n"
                      "+++ b/c.txt\n"
                      "@@ -2,3 +2,3 @@\n"
                      " 2\n"
                      "-3\n"
                      "+three\n"
                      " 4\n");
    assert_false(tu_exists(f->dir, "dir/b.txt"));
    assert_content(f->dir, "c.txt", "1\n2\nthree\n4\n5\n");

    apply_free(f->fs, "diff --git a/c.txt b/d.txt\n"
                      "similarity index 90%\n"
                      "copy from c.txt\n"
                      "copy to d.txt\n"
                      "--- a/c.txt\n"
                      "+++ b/d.txt\n"
                      "@@ -1,2 +1,2 @@\n"
                      "-1\n"
                      "+one\n"
                      " 2\n");
    assert_content(f->dir, "c.txt", "1\n2\nthree\n4\n5\n");
    assert_content(f->dir, "d.txt", "one\n2\nthree\n4\n5\n");

    /* Renaming onto an existing file is refused. */
    apply_err(f->fs, "diff --git a/c.txt b/keep.txt\nrename from c.txt\nrename to keep.txt\n",
              SP_EEXISTS, "cannot move c.txt to keep.txt: it already exists");
}

static void test_unified_no_newline(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "n.txt", "a\nb", 0644);
    /* Change the last line, still without newline. */
    apply_free(f->fs, "--- a/n.txt\n+++ b/n.txt\n@@ -1,2 +1,2 @@\n a\n-b\n"
                      "\\ No newline at end of file\n+B\n\\ No newline at end of file\n");
    assert_content(f->dir, "n.txt", "a\nB");
    /* Add the final newline. */
    apply_free(f->fs, "--- a/n.txt\n+++ b/n.txt\n@@ -1,2 +1,2 @@\n a\n-B\n"
                      "\\ No newline at end of file\n+B\n");
    assert_content(f->dir, "n.txt", "a\nB\n");
    /* Remove it again, context-only last line. */
    apply_free(f->fs, "--- a/n.txt\n+++ b/n.txt\n@@ -1,2 +1,3 @@\n a\n+a2\n-B\n+B\n"
                      "\\ No newline at end of file\n");
    assert_content(f->dir, "n.txt", "a\na2\nB");
    /* A hunk that ignores the missing newline does not apply. */
    apply_err(f->fs, "--- a/n.txt\n+++ b/n.txt\n@@ -2,2 +2,2 @@\n a2\n-B\n+C\n", SP_EINVAL,
              "does not apply at line 2; line 3 lacks a newline at its end");
    /* A context line without newline on both sides. */
    apply_free(f->fs, "--- a/n.txt\n+++ b/n.txt\n@@ -1,3 +1,3 @@\n-a\n+A\n a2\n B\n"
                      "\\ No newline at end of file\n");
    assert_content(f->dir, "n.txt", "A\na2\nB");
}

static void test_unified_modes(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "s.sh", "echo\n", 0644);
    sp_patch_result *r =
        apply(f->fs, "diff --git a/s.sh b/s.sh\nold mode 100644\nnew mode 100755\n");
    assert_int_equal(r->files[0].action, SP_PATCH_UPDATE);
    assert_int_equal(r->files[0].mode, 0755);
    sp_patch_result_free(r);
    assert_int_equal(mode_of(f->dir, "s.sh"), 0755);
    assert_content(f->dir, "s.sh", "echo\n");
    apply_free(f->fs, "diff --git a/s.sh b/s.sh\nold mode 100755\nnew mode 100644\n"
                      "--- a/s.sh\n+++ b/s.sh\n@@ -1 +1 @@\n-echo\n+echo hi\n");
    assert_int_equal(mode_of(f->dir, "s.sh"), 0644);
    assert_content(f->dir, "s.sh", "echo hi\n");
    /* Links and submodules are not text. */
    apply_err(f->fs,
              "diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n"
              "@@ -0,0 +1 @@\n+target\n",
              SP_EINVAL, "patch line 2: symlink patches are not supported");
    apply_err(f->fs, "diff --git a/m b/m\nnew file mode 160000\n", SP_EINVAL,
              "submodule patches are not supported");
    apply_err(f->fs, "diff --git a/b.bin b/b.bin\nindex 1..2 100644\nGIT binary patch\nliteral 1\n",
              SP_EINVAL, "patch line 3: binary patches are not supported");
    apply_err(f->fs,
              "diff --git a/b.bin b/b.bin\nindex 1..2 100644\n"
              "Binary files a/b.bin and b/b.bin differ\n",
              SP_EINVAL, "binary patches are not supported");
}

static void test_unified_traditional(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "x.c", "int a;\nint b;\n", 0644);
    /* diff -u x.c x.c.new: timestamps, names without a/ b/. */
    apply_free(f->fs, "--- x.c\t2024-05-01 12:00:00.000000000 +0200\n"
                      "+++ x.c.new\t2024-05-01 12:01:00.000000000 +0200\n"
                      "@@ -1,2 +1,2 @@\n"
                      " int a;\n"
                      "-int b;\n"
                      "+int c;\n");
    assert_content(f->dir, "x.c", "int a;\nint c;\n");
    /* diff -ruN old new: the first component goes; the epoch marks a
     * file that did not exist. */
    apply_free(f->fs, "diff -ruN old/x.c new/x.c\n"
                      "--- old/x.c\t2024-05-01 12:00:00.000000000 +0000\n"
                      "+++ new/x.c\t2024-05-01 12:01:00.000000000 +0000\n"
                      "@@ -1,2 +1 @@\n"
                      "-int a;\n"
                      " int c;\n"
                      "diff -ruN old/sub/n.c new/sub/n.c\n"
                      "--- old/sub/n.c\t1970-01-01 01:00:00.000000000 +0100\n"
                      "+++ new/sub/n.c\t2024-05-01 12:01:00.000000000 +0000\n"
                      "@@ -0,0 +1 @@\n"
                      "+new\n");
    assert_content(f->dir, "x.c", "int c;\n");
    assert_content(f->dir, "sub/n.c", "new\n");
    /* Quoted names with octal escapes; --no-prefix. */
    apply_free(f->fs, "diff --git \"a/caf\\303\\251 au lait.txt\" \"b/caf\\303\\251 au lait.txt\"\n"
                      "new file mode 100644\n"
                      "--- /dev/null\n"
                      "+++ \"b/caf\\303\\251 au lait.txt\"\n"
                      "@@ -0,0 +1 @@\n"
                      "+cr\xc3\xa8me\n"
                      "diff --git sub/n.c sub/n.c\n"
                      "--- sub/n.c\n"
                      "+++ sub/n.c\n"
                      "@@ -1 +1 @@\n"
                      "-new\n"
                      "+newer\n"
                      "diff --git a/with space.txt b/with space.txt\n"
                      "new file mode 100644\n"
                      "--- /dev/null\n"
                      "+++ b/with space.txt\t\n"
                      "@@ -0,0 +1 @@\n"
                      "+s\n");
    assert_content(f->dir, "caf\xc3\xa9 au lait.txt", "cr\xc3\xa8me\n");
    assert_content(f->dir, "sub/n.c", "newer\n");
    assert_content(f->dir, "with space.txt", "s\n");
    /* An empty new file named only by its "diff --git" line, with a space. */
    apply_free(f->fs,
               "diff --git a/e f.txt b/e f.txt\nnew file mode 100644\nindex 0000000..e69de29\n");
    assert_content(f->dir, "e f.txt", "");
    /* A diff that went through a CRLF transport (every header line ends
     * in CR) is read without them. */
    tu_write(f->dir, "t.txt", "x\ny\n", 0644);
    apply_free(f->fs, "--- a/t.txt\r\n+++ b/t.txt\r\n@@ -1,2 +1,2 @@\r\n x\r\n-y\r\n+z\r\n");
    assert_content(f->dir, "t.txt", "x\nz\n");
    /* CRLF content is just content. */
    tu_write(f->dir, "w.txt", "a\r\nb\r\n", 0644);
    apply_free(f->fs, "--- a/w.txt\n+++ b/w.txt\n@@ -1,2 +1,2 @@\n a\r\n-b\r\n+c\r\n");
    assert_content(f->dir, "w.txt", "a\r\nc\r\n");
}

static void test_unified_strict(void **state)
{
    fixture *f = *state;
    char content[4096] = "";
    size_t off = 0;
    for (int i = 1; i <= 50; i++)
        off += (size_t)snprintf(content + off, sizeof(content) - off, "line %d\n", i);
    tu_mkdir(f->dir, "src");
    tu_write(f->dir, "src/x.c", content, 0644);
    /* Hunk 2 says line 10, but its context is at line 37: git apply
     * finds it there, and so does apply_patch (test_patch_offsets.c
     * checks many such cases against git itself). */
    const char *stale = "--- a/src/x.c\n+++ b/src/x.c\n"
                        "@@ -2,3 +2,3 @@\n line 2\n-line 3\n+LINE 3\n line 4\n"
                        "@@ -10,4 +10,5 @@\n line 37\n line 38\n+new\n line 39\n line 40\n";
    apply_free(f->fs, stale);
    char *moved = tu_read(f->dir, "src/x.c", NULL);
    assert_non_null(strstr(moved, "line 2\nLINE 3\nline 4\n"));
    assert_non_null(strstr(moved, "line 38\nnew\nline 39\n"));
    free(moved);
    tu_write(f->dir, "src/x.c", content, 0644);
    /* Differs only in whitespace. */
    apply_err(f->fs, "--- a/src/x.c\n+++ b/src/x.c\n@@ -5,2 +5,2 @@\n line  5\n-line 6\n+six\n",
              SP_EINVAL,
              "hunk 1 of src/x.c (@@ -5,2 +5,2 @@) does not apply at line 5; its lines match at "
              "line 5 only if whitespace and line endings are ignored");
    /* Nowhere at all: the first line that differs. */
    apply_err(f->fs, "--- a/src/x.c\n+++ b/src/x.c\n@@ -5,2 +5,2 @@\n line 5\n-line 66\n+six\n",
              SP_EINVAL,
              "does not apply at line 5; line 6 is 'line 6' where the hunk expects 'line 66', and "
              "its lines occur nowhere in the file");
    /* No trailing context: must match at the end of the file, as in git. */
    apply_err(f->fs, "--- a/src/x.c\n+++ b/src/x.c\n@@ -48,2 +48,2 @@\n line 48\n-line 49\n+x\n",
              SP_EINVAL,
              "it has no context after its change, so it must match at the end of the file (git "
              "apply requires it too), but its lines are at line 48 of 50");
    /* Starting at line 1: must match at the start. */
    apply_err(f->fs,
              "--- a/src/x.c\n+++ b/src/x.c\n@@ -1,3 +1,3 @@\n line 7\n-line 8\n+8\n line 9\n",
              SP_EINVAL,
              "a hunk that starts at line 1 must match at the start of the file (git apply "
              "requires it too), but its lines are at line 7");
    /* A hunk may not match what an earlier one wrote. */
    apply_err(f->fs,
              "--- a/src/x.c\n+++ b/src/x.c\n@@ -2,3 +2,3 @@\n line 2\n-line 3\n+3\n line 4\n"
              "@@ -3,3 +3,3 @@\n line 2\n-3\n+4\n line 4\n",
              SP_EINVAL,
              "hunk 2 of src/x.c (@@ -3,3 +3,3 @@) does not apply at line 3; its lines are only "
              "at line 2, which an earlier hunk of this diff already changed");
    /* A hunk longer than the file. */
    tu_write(f->dir, "short.txt", "a\nb\n", 0644);
    apply_err(f->fs, "--- a/short.txt\n+++ b/short.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n",
              SP_EINVAL, "the file has only 2 lines, the hunk needs 3");
    assert_content(f->dir, "src/x.c", content);
    /* -U0 hunks apply at their line. */
    apply_free(f->fs, "--- a/src/x.c\n+++ b/src/x.c\n@@ -20 +20 @@\n-line 20\n+twenty\n"
                      "@@ -30,0 +31 @@\n+after 30\n");
    char *got = tu_read(f->dir, "src/x.c", NULL);
    assert_non_null(strstr(got, "line 19\ntwenty\nline 21\n"));
    assert_non_null(strstr(got, "line 30\nafter 30\nline 31\n"));
    free(got);

    /* Parse errors name the patch line. */
    apply_err(f->fs, "--- a/src/x.c\n+++ b/src/x.c\n@@ -1,2 +1,2 @@\n line 1\n*bad\n", SP_EINVAL,
              "patch line 5: expected a line of hunk 1 of src/x.c starting with ' ', '-', '+' or "
              "'\\', found '*bad'");
    apply_err(f->fs, "--- a/src/x.c\n+++ b/src/x.c\n@@ -1,3 +1,3 @@\n line 1\n", SP_EINVAL,
              "patch line 4: hunk 1 of src/x.c ends early: 2 old and 2 new lines are missing");
    apply_err(f->fs, "--- a/src/x.c\n+++ b/src/x.c\n@@ -1,x +1 @@\n line 1\n", SP_EINVAL,
              "patch line 3: bad hunk header '@@ -1,x +1 @@'");
    apply_err(f->fs, "--- a/src/x.c\n+++ b/src/x.c\nline 1\n", SP_EINVAL,
              "patch line 3: expected a hunk header");
    apply_err(f->fs, "@@ -1 +1 @@\n-a\n+b\ndiff --git a/x b/x\n", SP_EINVAL,
              "patch line 1: hunk without '---' and '+++' file names before it");
    apply_err(f->fs, "diff --git a/p b/q\n--- a/p\n+++ b/q\n@@ -1 +1 @@\n-a\n+b\n", SP_EINVAL,
              "the old and new names differ (p, q) without a rename header");
    sp_patch_opts o = SP_PATCH_OPTS_INIT;
    o.format = SP_PATCH_UNIFIED;
    apply_err_opts(f->fs, "*** Begin Patch\n*** End Patch\n", &o, SP_EINVAL,
                   "no file changes found");
}

/* --------------------------------------------------------- atomicity -- */

static void test_atomic_failure(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "one.txt", "1\n", 0644);
    tu_write(f->dir, "two.txt", "2\n", 0644);
    /* The second file's chunk fails: the first and the new folder stay
     * as they were. */
    apply_err(f->fs,
              "*** Begin Patch\n"
              "*** Update File: one.txt\n@@\n-1\n+one\n"
              "*** Add File: brand/new/file.txt\n+x\n"
              "*** Delete File: two.txt\n"
              "*** Update File: two.txt\n@@\n-2\n+two\n"
              "*** End Patch\n",
              SP_ENOTFOUND, "no such file to update: two.txt");
    apply_err(f->fs,
              "*** Begin Patch\n"
              "*** Update File: one.txt\n@@\n-1\n+one\n"
              "*** Add File: brand/new/file.txt\n+x\n"
              "*** Update File: two.txt\n@@\n-3\n+three\n"
              "*** End Patch\n",
              SP_EINVAL, "chunk 1 of two.txt");
    assert_content(f->dir, "one.txt", "1\n");
    assert_content(f->dir, "two.txt", "2\n");
    assert_false(tu_exists(f->dir, "brand"));
    /* Same with a unified diff. */
    apply_err(f->fs,
              "--- a/one.txt\n+++ b/one.txt\n@@ -1 +1 @@\n-1\n+one\n"
              "--- a/two.txt\n+++ b/two.txt\n@@ -1 +1 @@\n-3\n+three\n",
              SP_EINVAL, "hunk 1 of two.txt (@@ -1 +1 @@) does not apply at line 1");
    assert_content(f->dir, "one.txt", "1\n");
    assert_no_temps(f->dir);
}

/* Set or clear the immutable flag; false when the filesystem cannot. */
static bool set_immutable(const char *dir, const char *rel, bool on)
{
    char *p = tu_join(dir, rel);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    free(p);
    if (fd < 0)
        return false;
    int flags = 0;
    bool ok = ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
    if (ok) {
        flags = on ? flags | FS_IMMUTABLE_FL : flags & ~FS_IMMUTABLE_FL;
        ok = ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
    }
    close(fd);
    return ok;
}

/* A rename or unlink that fails after others succeeded: what was already
 * replaced is put back. An immutable file makes the kernel refuse. */
static void test_rollback_after_rename(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "a.txt", "a\n", 0640);
    tu_write(f->dir, "b.txt", "b\n", 0644);
    tu_write(f->dir, "c.txt", "c\n", 0644);
    if (!set_immutable(f->dir, "b.txt", true))
        skip(); /* needs root and a filesystem with the flag (CI: ext4) */
    /* Renames: a.txt and d/new.txt land, then b.txt fails. */
    apply_err(f->fs,
              "*** Begin Patch\n"
              "*** Update File: a.txt\n@@\n-a\n+A\n"
              "*** Add File: d/new.txt\n+n\n"
              "*** Delete File: c.txt\n"
              "*** Update File: b.txt\n@@\n-b\n+B\n"
              "*** End Patch\n",
              SP_EDENIED,
              "rename: b.txt: Operation not permitted; the files already changed were "
              "restored");
    assert_content(f->dir, "a.txt", "a\n");
    assert_int_equal(mode_of(f->dir, "a.txt"), 0640);
    assert_content(f->dir, "c.txt", "c\n");
    assert_false(tu_exists(f->dir, "d"));
    /* Deletes come last: every rename is undone when one fails. */
    apply_err(f->fs,
              "*** Begin Patch\n"
              "*** Update File: a.txt\n@@\n-a\n+A\n"
              "*** Delete File: c.txt\n"
              "*** Delete File: b.txt\n"
              "*** Add File: e.txt\n+e\n"
              "*** End Patch\n",
              SP_EDENIED, "delete: b.txt");
    set_immutable(f->dir, "b.txt", false);
    assert_content(f->dir, "a.txt", "a\n");
    assert_content(f->dir, "b.txt", "b\n");
    assert_content(f->dir, "c.txt", "c\n");
    assert_false(tu_exists(f->dir, "e.txt"));
    assert_no_temps(f->dir);
}

/* The disk fills while new files are staged: nothing changes. */
static void test_full_disk(void **state)
{
    fixture *f = *state;
    tu_mkdir(f->dir, "small");
    char *mnt = tu_join(f->dir, "small");
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=64k") < 0) {
        free(mnt);
        skip(); /* needs root */
    }
    tu_write(f->dir, "small/keep.txt", "precious\n", 0644);
    size_t n = 200 * 1024;
    char *patch = malloc(n + 256);
    size_t off = (size_t)snprintf(patch, 256,
                                  "*** Begin Patch\n*** Update File: small/keep.txt\n@@\n"
                                  "-precious\n+changed\n*** Add File: small/sub/big.txt\n");
    for (size_t i = 0; i < n / 64; i++) {
        memset(patch + off, 'x', 64);
        patch[off] = '+';
        patch[off + 63] = '\n';
        off += 64;
    }
    memcpy(patch + off, "*** End Patch\n", 15);
    apply_err(f->fs, patch, SP_ERROR, "no space left on device");
    free(patch);
    assert_content(f->dir, "small/keep.txt", "precious\n");
    assert_false(tu_exists(f->dir, "small/sub"));
    assert_no_temps(f->dir);
    umount2(mnt, MNT_DETACH);
    free(mnt);
}

/* ------------------------------------------------------- containment -- */

static void test_escapes(void **state)
{
    fixture *f = *state;
    tu_write(f->outside, "secret.txt", "outside\n", 0644);
    tu_symlink(f->outside, f->dir, "out");
    char *target = tu_join(f->outside, "secret.txt");
    tu_symlink(target, f->dir, "link.txt");
    free(target);

    apply_err(f->fs, "*** Begin Patch\n*** Add File: ../x.txt\n+x\n*** End Patch\n", SP_EESCAPE,
              "patch line 2: path escapes the workspace: ../x.txt");
    apply_err(f->fs, "*** Begin Patch\n*** Update File: /etc/passwd\n@@\n-root\n*** End Patch\n",
              SP_EESCAPE, "absolute path outside the workspace: /etc/passwd");
    apply_err(f->fs,
              "*** Begin Patch\n*** Add File: ok.txt\n+x\n*** Update File: a/../../x\n"
              "@@\n+x\n*** End Patch\n",
              SP_EESCAPE, "patch line 4");
    apply_err(f->fs,
              "*** Begin Patch\n*** Update File: x.txt\n*** Move to: ../moved.txt\n*** End Patch\n",
              SP_EESCAPE, "path escapes the workspace");
    /* Through a folder symlink that leaves the root. */
    apply_err(f->fs, "*** Begin Patch\n*** Add File: out/new.txt\n+x\n*** End Patch\n", SP_EESCAPE,
              NULL);
    apply_err(f->fs,
              "*** Begin Patch\n*** Update File: out/secret.txt\n@@\n-outside\n+pwned\n"
              "*** End Patch\n",
              SP_EESCAPE, NULL);
    apply_err(f->fs, "*** Begin Patch\n*** Delete File: out/secret.txt\n*** End Patch\n",
              SP_EESCAPE, NULL);
    /* Through a final symlink that leaves the root. */
    apply_err(f->fs,
              "*** Begin Patch\n*** Update File: link.txt\n@@\n-outside\n+pwned\n"
              "*** End Patch\n",
              SP_EESCAPE, "symlink link.txt points outside");
    sp_patch_opts o = SP_PATCH_OPTS_INIT;
    o.allow_overwrite = true;
    apply_err_opts(f->fs, "*** Begin Patch\n*** Add File: link.txt\n+pwned\n*** End Patch\n", &o,
                   SP_EESCAPE, "symlink link.txt points outside");
    /* Unified diffs: prefixed and renamed paths. */
    apply_err(f->fs, "--- a/../../etc/x\n+++ b/../../etc/x\n@@ -1 +1 @@\n-a\n+b\n", SP_EESCAPE,
              "path escapes the workspace");
    apply_err(f->fs, "--- /dev/null\n+++ b/out/n.txt\n@@ -0,0 +1 @@\n+x\n", SP_EESCAPE, NULL);
    apply_err(f->fs, "diff --git a/ok b/x\nrename from ok\nrename to /etc/x\n", SP_EESCAPE,
              "absolute path outside the workspace: /etc/x");

    assert_content(f->outside, "secret.txt", "outside\n");
    assert_false(tu_exists(f->outside, "new.txt"));
    assert_false(tu_exists(f->outside, "n.txt"));
    assert_false(tu_exists(f->dir, "ok.txt"));
    /* Deleting the link itself is fine: the target stays. */
    apply_free(f->fs, "*** Begin Patch\n*** Delete File: link.txt\n*** End Patch\n");
    assert_false(tu_exists(f->dir, "link.txt"));
    assert_content(f->outside, "secret.txt", "outside\n");
}

static void test_symlinks_inside(void **state)
{
    fixture *f = *state;
    tu_mkdir(f->dir, "real");
    tu_write(f->dir, "real/t.txt", "t\n", 0644);
    tu_symlink("real/t.txt", f->dir, "l.txt");
    tu_symlink("real", f->dir, "rdir");
    /* Updates follow a link that stays inside; the link stays a link. */
    apply_free(f->fs, "*** Begin Patch\n*** Update File: l.txt\n@@\n-t\n+T\n*** End Patch\n");
    assert_content(f->dir, "real/t.txt", "T\n");
    char *lp = tu_join(f->dir, "l.txt");
    struct stat st;
    assert_int_equal(lstat(lp, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    free(lp);
    /* Folder links inside are fine too. */
    apply_free(f->fs, "*** Begin Patch\n*** Add File: rdir/n.txt\n+n\n*** End Patch\n");
    assert_content(f->dir, "real/n.txt", "n\n");
    /* A deny list hides paths from patches as from every tool. */
    sp_fs *fs = NULL;
    sp_error *err = NULL;
    const char *deny[] = {"secret*", NULL};
    sp_fs_opts fo = SP_FS_OPTS_INIT;
    fo.deny = deny;
    assert_int_equal(sp_fs_open(&fs, f->dir, &fo, &err), 0);
    tu_write(f->dir, "secret.env", "k=v\n", 0644);
    tu_symlink("secret.env", f->dir, "alias.env");
    apply_err(fs, "*** Begin Patch\n*** Update File: secret.env\n@@\n-k=v\n*** End Patch\n",
              SP_EDENIED, "deny list");
    apply_err(fs, "*** Begin Patch\n*** Update File: alias.env\n@@\n-k=v\n*** End Patch\n",
              SP_EDENIED, "deny list");
    apply_err(fs, "*** Begin Patch\n*** Add File: secret2\n+x\n*** End Patch\n", SP_EDENIED,
              "deny list");
    sp_fs_free(fs);
    assert_content(f->dir, "secret.env", "k=v\n");
}

static void test_read_only_and_dry_run(void **state)
{
    fixture *f = *state;
    tu_write(f->dir, "r.txt", "r\n", 0644);
    sp_fs *ro = NULL;
    sp_error *err = NULL;
    sp_fs_opts fo = SP_FS_OPTS_INIT;
    fo.read_only = true;
    assert_int_equal(sp_fs_open(&ro, f->dir, &fo, &err), 0);
    const char *patch = "*** Begin Patch\n*** Update File: r.txt\n@@\n-r\n+R\n"
                        "*** Add File: n/new.txt\n+n\n*** End Patch\n";
    apply_err(ro, patch, SP_EREADONLY, "workspace is read-only");
    /* A dry run checks everything and writes nothing, read-only or not. */
    sp_patch_opts o = SP_PATCH_OPTS_INIT;
    o.dry_run = true;
    sp_patch_result *r = apply_opts(ro, patch, &o);
    assert_true(r->dry_run);
    assert_int_equal(r->n, 2);
    assert_int_equal(r->files[0].bytes_written, 2);
    sp_patch_result_free(r);
    apply_err_opts(ro, "*** Begin Patch\n*** Update File: r.txt\n@@\n-x\n*** End Patch\n", &o,
                   SP_EINVAL, "does not apply");
    sp_fs_free(ro);
    r = apply_opts(f->fs, patch, &o);
    sp_patch_result_free(r);
    assert_content(f->dir, "r.txt", "r\n");
    assert_false(tu_exists(f->dir, "n"));
}

static void test_limits(void **state)
{
    fixture *f = *state;
    sp_fs *fs = NULL;
    sp_error *err = NULL;
    sp_fs_opts fo = SP_FS_OPTS_INIT;
    fo.max_write_bytes = 8;
    assert_int_equal(sp_fs_open(&fs, f->dir, &fo, &err), 0);
    apply_err(fs, "*** Begin Patch\n*** Add File: big.txt\n+123456789\n*** End Patch\n", SP_ETOOBIG,
              "big.txt would be 10 bytes, over the write limit of 8 bytes");
    sp_fs_free(fs);
    /* Name limits apply to the files a patch creates. */
    char patch[512];
    char name[100];
    memset(name, 'n', 90);
    name[90] = '\0';
    snprintf(patch, sizeof(patch), "*** Begin Patch\n*** Add File: %s\n+x\n*** End Patch\n", name);
    apply_err(f->fs, patch, SP_ETOOBIG, "name longer than 80 bytes");
    /* A file cannot become a folder in one patch. */
    tu_write(f->dir, "plain", "p\n", 0644);
    apply_err(f->fs,
              "*** Begin Patch\n*** Delete File: plain\n*** Add File: plain/x\n+x\n"
              "*** End Patch\n",
              SP_EINVAL, "cannot create plain/x: plain is a file this patch deletes");
    apply_err(f->fs, "*** Begin Patch\n*** Add File: plain/x\n+x\n*** End Patch\n", SP_EINVAL,
              "cannot create plain/x: plain is not a folder");
    assert_content(f->dir, "plain", "p\n");
}

static void test_parse_only(void **state)
{
    (void)state;
    sp_patch_result *r = NULL;
    sp_error *err = NULL;
    const char *p = "*** Begin Patch\n*** Add File: a\n+1\n+2\n*** Update File: b\n"
                    "*** Move to: c\n@@\n-x\n+y\n*** Delete File: /workspace/d\n*** End Patch\n";
    assert_int_equal(sp_patch_parse(&r, p, strlen(p), NULL, &err), 0);
    assert_int_equal(r->format, SP_PATCH_CODEX);
    assert_int_equal(r->n, 3);
    assert_int_equal(r->files[0].lines_added, 2);
    assert_int_equal(r->files[1].action, SP_PATCH_MOVE);
    assert_string_equal(r->files[1].new_path, "c");
    assert_string_equal(r->files[2].path, "d");
    sp_patch_result_free(r);
    const char *u = "diff --git a/x b/x\nnew file mode 100755\n--- /dev/null\n+++ b/x\n"
                    "@@ -0,0 +1 @@\n+x\n";
    assert_int_equal(sp_patch_parse(&r, u, strlen(u), NULL, &err), 0);
    assert_int_equal(r->format, SP_PATCH_UNIFIED);
    assert_int_equal(r->files[0].mode, 0755);
    sp_patch_result_free(r);
    /* Forcing the other format. */
    sp_patch_opts o = SP_PATCH_OPTS_INIT;
    o.format = SP_PATCH_CODEX;
    assert_int_equal(sp_patch_parse(&r, u, strlen(u), &o, &err), SP_EINVAL);
    assert_null(r);
    assert_non_null(strstr(err->message, "patch line 1: expected '*** Begin Patch'"));
    sp_error_free(err);
    err = NULL;
    const char *esc = "*** Begin Patch\n*** Delete File: ../../x\n*** End Patch\n";
    assert_int_equal(sp_patch_parse(&r, esc, strlen(esc), NULL, &err), SP_EESCAPE);
    sp_error_free(err);
    /* NUL bytes, a patch of only garbage: errors, never crashes. */
    const char nul[] = "*** Begin Patch\n*** Add File: a\0b\n+x\n*** End Patch\n";
    err = NULL;
    assert_int_equal(sp_patch_parse(&r, nul, sizeof(nul) - 1, NULL, &err), SP_EINVAL);
    sp_error_free(err);
    assert_int_equal(sp_patch_parse(&r, NULL, 0, NULL, NULL), SP_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_codex_basic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_codex_move, setup, teardown),
        cmocka_unit_test_setup_teardown(test_codex_context_header, setup, teardown),
        cmocka_unit_test_setup_teardown(test_codex_end_of_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_codex_whitespace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_codex_heredoc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_codex_heredoc_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_codex_unit_outcomes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_codex_heredoc_cd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_codex_parse_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_codex_not_applying, setup, teardown),
        cmocka_unit_test_setup_teardown(test_codex_crlf, setup, teardown),
        cmocka_unit_test_setup_teardown(test_codex_unicode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_codex_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_codex_sequence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unified_multi_hunk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unified_add_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unified_rename_copy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unified_no_newline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unified_modes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unified_traditional, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unified_strict, setup, teardown),
        cmocka_unit_test_setup_teardown(test_atomic_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rollback_after_rename, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_disk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_escapes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlinks_inside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_only_and_dry_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
        cmocka_unit_test(test_parse_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
