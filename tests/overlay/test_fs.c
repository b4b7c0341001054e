/* The contained filesystem: every operation and every bad input. Also run
 * under tests/no_openat2 so the component-walk fallback passes the same
 * assertions. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base.h"
#include "sandpod/fs.h"
#include "testutil.h"
#include "fdtree.h"

/* A call that must succeed; prints the error otherwise. */
#define OK(call)                                                                                   \
    do {                                                                                           \
        int r_ = (call);                                                                           \
        if (r_ != 0)                                                                               \
            fail_msg("%s gave %d: %s", #call, r_, err ? err->message : "");                        \
    } while (0)

struct fx {
    char *root;    /* the workspace */
    char *outside; /* a folder next to it holding secrets */
    sp_fs *fs;
};

#define SECRET "TOP-SECRET-CANARY"

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    f->root = tu_mkdtemp();
    f->outside = tu_mkdtemp();
    tu_write(f->outside, "secret.txt", SECRET "\n", 0644);
    tu_mkdir(f->outside, "dir");
    tu_write(f->outside, "dir/inner.txt", SECRET "\n", 0644);
    sp_error *err = NULL;
    OK(sp_fs_open(&f->fs, f->root, NULL, &err));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    /* The outside folder must be exactly as we left it. */
    size_t n = 0;
    char *s = tu_read(f->outside, "secret.txt", &n);
    assert_non_null(s);
    assert_string_equal(s, SECRET "\n");
    free(s);
    sp_fs_free(f->fs);
    tu_rmtree(f->root);
    tu_rmtree(f->outside);
    free(f->root);
    free(f->outside);
    free(f);
    return 0;
}

static void expect_code(int r, sp_error *err, int code, const char *needle)
{
    if (r != code)
        fail_msg("expected %d, got %d (%s)", code, r, err ? err->message : "no error");
    assert_non_null(err);
    if (needle && !strstr(err->message, needle))
        fail_msg("message '%s' lacks '%s'", err->message, needle);
    sp_error_free(err);
}

/* Run a call that must fail with `code` and a message containing needle;
 * uses and resets the caller's `err`. */
#define EXPECT(call, code, needle)                                                                 \
    do {                                                                                           \
        int r_ = (call);                                                                           \
        expect_code(r_, err, code, needle);                                                        \
        err = NULL;                                                                                \
    } while (0)

static void test_fallback_is_active(void **state)
{
    (void)state;
    if (!getenv("SANDPOD_EXPECT_NO_OPENAT2"))
        skip();
    errno = 0;
    assert_int_equal(syscall(SYS_openat2, AT_FDCWD, ".", NULL, 0), -1);
    assert_int_equal(errno, ENOSYS);
}

static void test_open_errors(void **state)
{
    struct fx *f = *state;
    sp_fs *fs = NULL;
    sp_error *err = NULL;
    char *missing = tu_join(f->root, "nope");
    EXPECT(sp_fs_open(&fs, missing, NULL, &err), SP_ENOTFOUND, "nope");
    free(missing);
    tu_write(f->root, "file", "x", 0644);
    char *file = tu_join(f->root, "file");
    err = NULL;
    EXPECT(sp_fs_open(&fs, file, NULL, &err), SP_EINVAL, NULL);
    free(file);
    assert_null(fs);
    const char *bad[] = {"[oops", NULL};
    sp_fs_opts o = SP_FS_OPTS_INIT;
    o.deny = bad;
    err = NULL;
    EXPECT(sp_fs_open(&fs, f->root, &o, &err), SP_EINVAL, "deny");
    assert_string_equal(sp_fs_root(f->fs), f->root);
    assert_true(sp_fs_root_fd(f->fs) >= 0);
}

static void test_read_slices(void **state)
{
    struct fx *f = *state;
    tu_write(f->root, "a.txt", "one\ntwo\nthree\nfour\n", 0644);
    sp_fs_text *t = NULL;
    sp_error *err = NULL;
    OK(sp_fs_read(&t, f->fs, "a.txt", NULL, &err));
    assert_string_equal(t->content, "one\ntwo\nthree\nfour\n");
    assert_int_equal(t->total_lines, 4);
    assert_int_equal(t->lines, 4);
    assert_false(t->truncated);
    assert_int_equal(t->limit, 2000);
    sp_fs_text_free(t);

    sp_fs_read_opts o = SP_FS_READ_OPTS_INIT;
    o.offset = 1;
    o.limit = 2;
    OK(sp_fs_read(&t, f->fs, "/workspace/a.txt", &o, &err));
    assert_string_equal(t->content, "two\nthree\n");
    assert_string_equal(t->path, "a.txt");
    assert_true(t->truncated);
    assert_int_equal(t->total_lines, 4);
    sp_fs_text_free(t);

    o.offset = 10;
    OK(sp_fs_read(&t, f->fs, "a.txt", &o, &err));
    assert_string_equal(t->content, "");
    assert_false(t->truncated);
    sp_fs_text_free(t);

    /* No final newline; empty file. */
    tu_write(f->root, "b.txt", "x\ny", 0644);
    OK(sp_fs_read(&t, f->fs, "b.txt", NULL, &err));
    assert_string_equal(t->content, "x\ny");
    assert_int_equal(t->total_lines, 2);
    sp_fs_text_free(t);
    tu_write(f->root, "empty", "", 0644);
    OK(sp_fs_read(&t, f->fs, "empty", NULL, &err));
    assert_int_equal(t->total_lines, 0);
    assert_string_equal(t->content, "");
    sp_fs_text_free(t);

    /* View ranges are 1-based and inclusive. */
    OK(sp_fs_view(&t, f->fs, "a.txt", 2, 3, &err));
    assert_string_equal(t->content, "two\nthree\n");
    sp_fs_text_free(t);
    OK(sp_fs_view(&t, f->fs, "a.txt", 3, -1, &err));
    assert_string_equal(t->content, "three\nfour\n");
    sp_fs_text_free(t);
    EXPECT(sp_fs_view(&t, f->fs, "a.txt", 0, 2, &err), SP_EINVAL, "line 1");
    err = NULL;
    EXPECT(sp_fs_view(&t, f->fs, "a.txt", 3, 2, &err), SP_EINVAL, NULL);
    /* Past the end: the start is an error (as the read_file tool's offset),
     * the end is clamped; line 1 of an empty file is fine. */
    EXPECT(sp_fs_view(&t, f->fs, "a.txt", 5, -1, &err), SP_EINVAL, "past the end: a.txt has 4");
    assert_null(t);
    OK(sp_fs_view(&t, f->fs, "a.txt", 4, 99, &err));
    assert_string_equal(t->content, "four\n");
    sp_fs_text_free(t);
    OK(sp_fs_view(&t, f->fs, "empty", 1, -1, &err));
    assert_string_equal(t->content, "");
    sp_fs_text_free(t);
}

static void test_read_long_lines_and_chunks(void **state)
{
    struct fx *f = *state;
    sp_fs_opts o = SP_FS_OPTS_INIT;
    o.max_line_bytes = 10;
    sp_fs *fs = NULL;
    sp_error *err = NULL;
    OK(sp_fs_open(&fs, f->root, &o, &err));
    /* 9 ASCII bytes then a 3-byte euro sign: the cut must not split it. */
    tu_write(f->root, "long.txt", "123456789\xe2\x82\xac tail\nshort\n", 0644);
    sp_fs_text *t = NULL;
    OK(sp_fs_read(&t, fs, "long.txt", NULL, &err));
    assert_int_equal(t->lines_cut, 1);
    assert_non_null(strstr(t->content, "123456789… [line cut: 17 bytes]\nshort\n"));
    sp_fs_text_free(t);
    sp_fs_free(fs);

    /* Multi-byte characters straddling every 64 KiB read boundary, and a
     * file of 200,000 lines read near its end. */
    sp_buf b = SP_BUF_INIT;
    for (int i = 0; i < 200000; i++)
        sp_buf_printf(&b, "line %d \xe2\x82\xac\n", i);
    tu_write_n(f->root, "big.txt", b.data, b.len, 0644);
    sp_fs_read_opts ro = SP_FS_READ_OPTS_INIT;
    ro.offset = 199998;
    OK(sp_fs_read(&t, f->fs, "big.txt", &ro, &err));
    assert_int_equal(t->total_lines, 200000);
    assert_string_equal(t->content, "line 199998 \xe2\x82\xac\nline 199999 \xe2\x82\xac\n");
    assert_false(t->truncated);
    sp_fs_text_free(t);
    sp_buf_dispose(&b);
}

static void test_read_errors(void **state)
{
    struct fx *f = *state;
    sp_fs_text *t = NULL;
    sp_error *err = NULL;
    tu_write_n(f->root, "bin", "ab\0cd", 5, 0644);
    EXPECT(sp_fs_read(&t, f->fs, "bin", NULL, &err), SP_EINVAL, "read_bytes");
    err = NULL;
    tu_write(f->root, "latin1", "caf\xe9\n", 0644);
    EXPECT(sp_fs_read(&t, f->fs, "latin1", NULL, &err), SP_EINVAL, "UTF-8");
    err = NULL;
    tu_write(f->root, "cut", "ok \xe2\x82", 0644); /* ends mid-sequence */
    EXPECT(sp_fs_read(&t, f->fs, "cut", NULL, &err), SP_EINVAL, "UTF-8");
    err = NULL;
    tu_mkdir(f->root, "d");
    EXPECT(sp_fs_read(&t, f->fs, "d", NULL, &err), SP_EINVAL, "folder");
    err = NULL;
    EXPECT(sp_fs_read(&t, f->fs, "missing", NULL, &err), SP_ENOTFOUND, "missing");
    err = NULL;
    /* A fifo planted in the workspace must not hang a read. */
    char *fifo = tu_join(f->root, "fifo");
    assert_int_equal(mkfifo(fifo, 0644), 0);
    free(fifo);
    EXPECT(sp_fs_read(&t, f->fs, "fifo", NULL, &err), SP_EINVAL, "regular");
    assert_null(t);
}

static void test_read_bytes(void **state)
{
    struct fx *f = *state;
    const char data[] = {'a', 0, 'b', (char)0xff, 'c', 'd'};
    tu_write_n(f->root, "bin", data, sizeof(data), 0644);
    sp_fs_bytes *b = NULL;
    sp_error *err = NULL;
    OK(sp_fs_read_bytes(&b, f->fs, "bin", 0, 0, &err));
    assert_int_equal(b->len, 6);
    assert_memory_equal(b->data, data, 6);
    assert_int_equal(b->size, 6);
    assert_false(b->truncated);
    sp_fs_bytes_free(b);
    OK(sp_fs_read_bytes(&b, f->fs, "bin", 2, 3, &err));
    assert_int_equal(b->len, 3);
    assert_memory_equal(b->data, data + 2, 3);
    assert_true(b->truncated);
    assert_int_equal(b->offset, 2);
    sp_fs_bytes_free(b);
    OK(sp_fs_read_bytes(&b, f->fs, "bin", 100, 0, &err));
    assert_int_equal(b->len, 0);
    assert_false(b->truncated);
    sp_fs_bytes_free(b);
}

static unsigned mode_of(const char *dir, const char *rel)
{
    struct stat st;
    char *p = tu_join(dir, rel);
    assert_int_equal(lstat(p, &st), 0);
    free(p);
    return st.st_mode & 07777;
}

static void test_write_modes(void **state)
{
    struct fx *f = *state;
    sp_error *err = NULL;
    size_t n = 0;
    OK(sp_fs_write(&n, f->fs, "new/deep/file.txt", "hello\n", 6, NULL, &err));
    assert_int_equal(n, 6);
    char *s = tu_read(f->root, "new/deep/file.txt", NULL);
    assert_string_equal(s, "hello\n");
    free(s);
    assert_int_equal(mode_of(f->root, "new/deep/file.txt"), 0644);

    sp_fs_write_opts o = SP_FS_WRITE_OPTS_INIT;
    o.mode = SP_FS_APPEND;
    OK(sp_fs_write(NULL, f->fs, "new/deep/file.txt", "world\n", 6, &o, &err));
    s = tu_read(f->root, "new/deep/file.txt", NULL);
    assert_string_equal(s, "hello\nworld\n");
    free(s);
    o.mode = SP_FS_CREATE;
    EXPECT(sp_fs_write(NULL, f->fs, "new/deep/file.txt", "x", 1, &o, &err), SP_EEXISTS, "exists");
    err = NULL;
    o.mode = SP_FS_APPEND; /* append creates a missing file */
    OK(sp_fs_write(NULL, f->fs, "appended", "a", 1, &o, &err));

    /* Overwrite keeps the mode of the file it replaces. */
    tu_write(f->root, "private", "old", 0600);
    tu_write(f->root, "script.sh", "old", 0755);
    OK(sp_fs_write(NULL, f->fs, "private", "new", 3, NULL, &err));
    OK(sp_fs_write(NULL, f->fs, "script.sh", "new", 3, NULL, &err));
    assert_int_equal(mode_of(f->root, "private"), 0600);
    assert_int_equal(mode_of(f->root, "script.sh"), 0755);

    o.mode = SP_FS_OVERWRITE;
    o.no_create_parents = true;
    EXPECT(sp_fs_write(NULL, f->fs, "nodir/x", "x", 1, &o, &err), SP_ENOTFOUND, NULL);
    err = NULL;

    /* Binary data through write_bytes; text through write must be UTF-8. */
    const char bin[] = {0, 1, (char)0xfe};
    OK(sp_fs_write_bytes(NULL, f->fs, "blob", bin, 3, NULL, &err));
    EXPECT(sp_fs_write(NULL, f->fs, "t", "\xff", 1, NULL, &err), SP_EINVAL, "UTF-8");
    err = NULL;
    tu_mkdir(f->root, "adir");
    EXPECT(sp_fs_write(NULL, f->fs, "adir", "x", 1, NULL, &err), SP_EINVAL, "folder");
    err = NULL;
    EXPECT(sp_fs_write(NULL, f->fs, ".", "x", 1, NULL, &err), SP_EINVAL, "root");

    /* No temp file is ever left behind. */
    sp_fs_entries *e = NULL;
    sp_fs_list_opts lo = SP_FS_LIST_OPTS_INIT;
    lo.depth = 8;
    OK(sp_fs_list(&e, f->fs, ".", &lo, &err));
    for (size_t i = 0; i < e->n; i++)
        assert_null(strstr(e->v[i].name, ".sandpod-"));
    sp_fs_entries_free(e);
}

static void test_write_limits(void **state)
{
    struct fx *f = *state;
    sp_fs_opts o = SP_FS_OPTS_INIT;
    o.max_write_bytes = 8;
    o.max_path_depth = 3;
    o.max_segment_len = 10;
    sp_fs *fs = NULL;
    sp_error *err = NULL;
    OK(sp_fs_open(&fs, f->root, &o, &err));
    EXPECT(sp_fs_write(NULL, fs, "big", "123456789", 9, NULL, &err), SP_ETOOBIG, "limit");
    err = NULL;
    EXPECT(sp_fs_write(NULL, fs, "a/b/c/d", "x", 1, NULL, &err), SP_ETOOBIG, "deeper");
    err = NULL;
    EXPECT(sp_fs_mkdir(fs, "a/b/c/d", true, true, &err), SP_ETOOBIG, "deeper");
    err = NULL;
    EXPECT(sp_fs_write(NULL, fs, "abcdefghijk", "x", 1, NULL, &err), SP_ETOOBIG, "longer");
    err = NULL;
    EXPECT(sp_fs_write(NULL, fs, "bad\xff", "x", 1, NULL, &err), SP_EINVAL, "UTF-8");
    err = NULL;
    OK(sp_fs_write(NULL, fs, "a/b/c", "x", 1, NULL, &err));
    /* Limits are for what the tools create: existing deep files stay usable. */
    sp_fs_free(fs);
    tu_mkdir(f->root, "a/b/c2");
    tu_mkdir(f->root, "a/b/c2/d");
    tu_write(f->root, "a/b/c2/d/very-long-existing-name", "ok", 0644);
    OK(sp_fs_open(&fs, f->root, &o, &err));
    OK(sp_fs_write(NULL, fs, "a/b/c2/d/very-long-existing-name", "new", 3, NULL, &err));
    sp_fs_free(fs);
}

static void test_read_only(void **state)
{
    struct fx *f = *state;
    sp_fs_opts o = SP_FS_OPTS_INIT;
    o.read_only = true;
    sp_fs *fs = NULL;
    sp_error *err = NULL;
    tu_write(f->root, "keep", "keep", 0644);
    OK(sp_fs_open(&fs, f->root, &o, &err));
    EXPECT(sp_fs_write(NULL, fs, "keep", "x", 1, NULL, &err), SP_EREADONLY, "read-only");
    err = NULL;
    EXPECT(sp_fs_delete(fs, "keep", false, &err), SP_EREADONLY, NULL);
    err = NULL;
    EXPECT(sp_fs_mkdir(fs, "d", true, true, &err), SP_EREADONLY, NULL);
    err = NULL;
    sp_fs_text *t = NULL;
    OK(sp_fs_read(&t, fs, "keep", NULL, &err));
    sp_fs_text_free(t);
    sp_fs_free(fs);
    char *s = tu_read(f->root, "keep", NULL);
    assert_string_equal(s, "keep");
    free(s);
}

static void test_delete_and_mkdir(void **state)
{
    struct fx *f = *state;
    sp_error *err = NULL;
    OK(sp_fs_mkdir(f->fs, "x/y/z", true, false, &err));
    EXPECT(sp_fs_mkdir(f->fs, "x/y/z", true, false, &err), SP_EEXISTS, NULL);
    err = NULL;
    OK(sp_fs_mkdir(f->fs, "x/y/z", true, true, &err));
    EXPECT(sp_fs_mkdir(f->fs, "q/r", false, true, &err), SP_ENOTFOUND, NULL);
    err = NULL;
    tu_write(f->root, "x/y/z/f", "f", 0644);
    tu_write(f->root, "x/file", "f", 0644);
    EXPECT(sp_fs_mkdir(f->fs, "x/file", true, true, &err), SP_EEXISTS, NULL);
    err = NULL;
    EXPECT(sp_fs_delete(f->fs, "x", false, &err), SP_EINVAL, "not empty");
    err = NULL;
    OK(sp_fs_delete(f->fs, "x/file", false, &err));
    assert_false(tu_exists(f->root, "x/file"));
    OK(sp_fs_delete(f->fs, "x", true, &err));
    assert_false(tu_exists(f->root, "x"));
    EXPECT(sp_fs_delete(f->fs, "x", true, &err), SP_ENOTFOUND, NULL);
    err = NULL;
    EXPECT(sp_fs_delete(f->fs, ".", true, &err), SP_EINVAL, "root");
    err = NULL;
    EXPECT(sp_fs_delete(f->fs, "/workspace/", true, &err), SP_EINVAL, "root");
    err = NULL;
    /* Deleting a link never touches what it points at, even recursively. */
    tu_symlink(f->outside, f->root, "out");
    OK(sp_fs_delete(f->fs, "out", true, &err));
    assert_true(tu_exists(f->outside, "dir/inner.txt"));
    /* A folder holding a link to outside: the link goes, the target stays. */
    tu_mkdir(f->root, "holder");
    tu_symlink(f->outside, f->root, "holder/out");
    OK(sp_fs_delete(f->fs, "holder", true, &err));
    assert_true(tu_exists(f->outside, "dir/inner.txt"));
    assert_false(tu_exists(f->root, "holder"));
}

/* A deep tree took one recursion level with a 16 KiB buffer per folder:
 * some 600 levels crashed the process. Paths past PATH_MAX broke it too. */
static void test_delete_deep_and_long(void **state)
{
    struct fx *f = *state;
    sp_error *err = NULL;
    tu_mkdeep(f->root, "deep", "d", 5000);
    OK(sp_fs_delete(f->fs, "deep", true, &err));
    assert_false(tu_exists(f->root, "deep"));

    char seg[201];
    memset(seg, 's', 200);
    seg[200] = '\0';
    tu_mkdir(f->root, "x");
    tu_mkdeep(f->root, "x/long", seg, 2 * PATH_MAX / 201);
    OK(sp_fs_delete(f->fs, "x/long", true, &err));
    assert_false(tu_exists(f->root, "x/long"));
    assert_true(tu_exists(f->root, "x"));
}

/* A folder that keeps filling while it is deleted: the rest goes, and the
 * error names it from the workspace root. */
static void test_delete_error_path(void **state)
{
    struct fx *f = *state;
    sp_error *err = NULL;
    tu_mkdir(f->root, "x");
    tu_mkdir(f->root, "x/y");
    tu_mkdir(f->root, "x/y/grow");
    tu_write(f->root, "x/y/other", "o", 0644);
    tu_grow_left = 1000;
    sp_tree_test_before_rmdir = tu_grow_hook;
    EXPECT(sp_fs_delete(f->fs, "x/y", true, &err), SP_ERROR,
           "delete: x/y/grow: Directory not empty");
    sp_tree_test_before_rmdir = NULL;
    assert_false(tu_exists(f->root, "x/y/other"));
    OK(sp_fs_delete(f->fs, "x/y", true, &err));
    assert_false(tu_exists(f->root, "x/y"));
}

static void test_stat_exists(void **state)
{
    struct fx *f = *state;
    sp_error *err = NULL;
    tu_write(f->root, "f", "12345", 0640);
    tu_mkdir(f->root, "d");
    tu_symlink("f", f->root, "ln");
    tu_symlink(f->outside, f->root, "out");
    tu_symlink("nowhere", f->root, "dangling");
    sp_fs_info *st = NULL;
    OK(sp_fs_stat(&st, f->fs, "f", &err));
    assert_int_equal(st->type, SP_FS_FILE);
    assert_int_equal(st->size, 5);
    assert_int_equal(st->mode, 0640);
    assert_true(st->mtime_ns > 0);
    assert_null(st->link_target);
    sp_fs_info_free(st);
    OK(sp_fs_stat(&st, f->fs, "d", &err));
    assert_int_equal(st->type, SP_FS_DIR);
    sp_fs_info_free(st);
    OK(sp_fs_stat(&st, f->fs, ".", &err));
    assert_int_equal(st->type, SP_FS_DIR);
    sp_fs_info_free(st);
    OK(sp_fs_stat(&st, f->fs, "ln", &err));
    assert_int_equal(st->type, SP_FS_SYMLINK);
    assert_string_equal(st->link_target, "f");
    assert_false(st->target_escapes);
    sp_fs_info_free(st);
    OK(sp_fs_stat(&st, f->fs, "out", &err));
    assert_int_equal(st->type, SP_FS_SYMLINK);
    assert_string_equal(st->link_target, f->outside);
    assert_true(st->target_escapes);
    sp_fs_info_free(st);
    assert_true(sp_fs_exists(f->fs, "f"));
    assert_true(sp_fs_exists(f->fs, "dangling"));
    assert_true(sp_fs_exists(f->fs, "out"));
    assert_false(sp_fs_exists(f->fs, "nope"));
    assert_false(sp_fs_exists(f->fs, "../etc"));
    assert_false(sp_fs_exists(f->fs, "out/secret.txt"));
    assert_string_equal(sp_fs_type_name(SP_FS_SYMLINK), "symlink");
}

static void test_list(void **state)
{
    struct fx *f = *state;
    sp_error *err = NULL;
    tu_write(f->root, "b.txt", "b", 0644);
    tu_write(f->root, "a.txt", "aa", 0755);
    tu_mkdir(f->root, "c");
    tu_write(f->root, "c/inner", "i", 0644);
    tu_mkdir(f->root, "c/d");
    tu_write(f->root, "c/d/deeper", "i", 0644);
    tu_symlink(f->outside, f->root, "out");
    sp_fs_entries *e = NULL;
    OK(sp_fs_list(&e, f->fs, NULL, NULL, &err));
    assert_int_equal(e->n, 4);
    assert_string_equal(e->v[0].name, "a.txt");
    assert_int_equal(e->v[0].size, 2);
    assert_int_equal(e->v[0].mode, 0755);
    assert_string_equal(e->v[1].name, "b.txt");
    assert_string_equal(e->v[2].name, "c");
    assert_int_equal(e->v[2].type, SP_FS_DIR);
    assert_string_equal(e->v[3].name, "out");
    assert_int_equal(e->v[3].type, SP_FS_SYMLINK);
    assert_string_equal(e->v[3].link_target, f->outside);
    sp_fs_entries_free(e);

    sp_fs_list_opts o = SP_FS_LIST_OPTS_INIT;
    o.depth = 2;
    OK(sp_fs_list(&e, f->fs, ".", &o, &err));
    assert_int_equal(e->n, 6); /* a.txt b.txt c c/d c/inner out */
    assert_string_equal(e->v[3].path, "c/d");
    assert_int_equal(e->v[3].depth, 2);
    for (size_t i = 0; i < e->n; i++)
        assert_null(strstr(e->v[i].path, "secret"));
    sp_fs_entries_free(e);

    o.depth = 0;
    o.max_entries = 2;
    OK(sp_fs_list(&e, f->fs, ".", &o, &err));
    assert_int_equal(e->n, 2);
    assert_true(e->truncated);
    sp_fs_entries_free(e);

    EXPECT(sp_fs_list(&e, f->fs, "b.txt", NULL, &err), SP_EINVAL, "not a folder");
    err = NULL;
    EXPECT(sp_fs_list(&e, f->fs, "out", NULL, &err), SP_EESCAPE, NULL);
    err = NULL;
    EXPECT(sp_fs_list(&e, f->fs, "zzz", NULL, &err), SP_ENOTFOUND, NULL);
}

/* Every way of naming something outside the root is refused, for reads,
 * writes, lists, stats and deletes alike. */
static void test_escapes(void **state)
{
    struct fx *f = *state;
    sp_error *err = NULL;
    char *rel_out = NULL;
    /* A relative path from root to outside/secret.txt through `..`. */
    rel_out = malloc(4096);
    snprintf(rel_out, 4096, "../%s/secret.txt", strrchr(f->outside, '/') + 1);

    tu_symlink(f->outside, f->root, "out_dir");
    char *secret = tu_join(f->outside, "secret.txt");
    tu_symlink(secret, f->root, "out_file");
    tu_symlink("chain2", f->root, "chain1");
    tu_symlink("out_file", f->root, "chain2");
    tu_symlink(rel_out, f->root, "rel_out");
    tu_symlink("/proc/self/root/etc/passwd", f->root, "magic");
    tu_mkdir(f->root, "sub");
    tu_symlink("../../../../../../../../../proc/self/root/etc/passwd", f->root, "sub/magic2");
    tu_symlink("nowhere/at/all", f->root, "dangling");

    const char *escaping[] = {
        "..",
        "../x",
        "a/../../x",
        "/etc/passwd",
        "/workspace/../etc/passwd",
        "out_dir/secret.txt",
        "out_file",
        "chain1",
        "rel_out",
        "magic",
        "sub/magic2",
        "out_dir/dir/inner.txt",
    };
    for (size_t i = 0; i < sizeof(escaping) / sizeof(escaping[0]); i++) {
        const char *p = escaping[i];
        sp_fs_text *t = NULL;
        sp_fs_bytes *b = NULL;
        int r = sp_fs_read(&t, f->fs, p, NULL, &err);
        if (r != SP_EESCAPE)
            fail_msg("read %s gave %d (%s)", p, r, err ? err->message : "-");
        sp_error_free(err);
        err = NULL;
        r = sp_fs_read_bytes(&b, f->fs, p, 0, 0, &err);
        if (r != SP_EESCAPE)
            fail_msg("read_bytes %s gave %d", p, r);
        sp_error_free(err);
        err = NULL;
        r = sp_fs_write(NULL, f->fs, p, "pwned", 5, NULL, &err);
        if (r != SP_EESCAPE)
            fail_msg("write %s gave %d (%s)", p, r, err ? err->message : "-");
        sp_error_free(err);
        err = NULL;
        assert_null(t);
        assert_null(b);
    }
    /* Writes below a link to an outside folder, and list/mkdir through it. */
    EXPECT(sp_fs_write(NULL, f->fs, "out_dir/new.txt", "x", 1, NULL, &err), SP_EESCAPE, "escapes");
    err = NULL;
    EXPECT(sp_fs_mkdir(f->fs, "out_dir/newdir", true, true, &err), SP_EESCAPE, NULL);
    err = NULL;
    EXPECT(sp_fs_delete(f->fs, "out_dir/secret.txt", false, &err), SP_EESCAPE, NULL);
    err = NULL;
    sp_fs_info *st = NULL;
    EXPECT(sp_fs_stat(&st, f->fs, "out_dir/secret.txt", &err), SP_EESCAPE, NULL);
    err = NULL;
    /* A dangling link: reading fails as not found; writing through it
     * creates the target inside the root. */
    sp_fs_text *t = NULL;
    EXPECT(sp_fs_read(&t, f->fs, "dangling", NULL, &err), SP_ENOTFOUND, NULL);
    err = NULL;
    OK(sp_fs_write(NULL, f->fs, "dangling", "made", 4, NULL, &err));
    char *s = tu_read(f->root, "nowhere/at/all", NULL);
    assert_string_equal(s, "made");
    free(s);
    /* Writing through an in-root link updates the target, keeps the link. */
    tu_write(f->root, "target.txt", "old", 0600);
    tu_symlink("target.txt", f->root, "inlink");
    OK(sp_fs_write(NULL, f->fs, "inlink", "new", 3, NULL, &err));
    s = tu_read(f->root, "target.txt", NULL);
    assert_string_equal(s, "new");
    free(s);
    assert_int_equal(mode_of(f->root, "target.txt"), 0600);
    sp_fs_info *li = NULL;
    OK(sp_fs_stat(&li, f->fs, "inlink", &err));
    assert_int_equal(li->type, SP_FS_SYMLINK);
    sp_fs_info_free(li);

    assert_false(tu_exists(f->outside, "new.txt"));
    assert_false(tu_exists(f->outside, "newdir"));
    free(secret);
    free(rel_out);
}

static void test_deny(void **state)
{
    struct fx *f = *state;
    const char *deny[] = {".env", "secrets/**", NULL};
    sp_fs_opts o = SP_FS_OPTS_INIT;
    o.deny = deny;
    sp_fs *fs = NULL;
    sp_error *err = NULL;
    tu_write(f->root, ".env", "API_KEY=" SECRET, 0600);
    tu_mkdir(f->root, "sub");
    tu_write(f->root, "sub/.env", "API_KEY=" SECRET, 0600);
    tu_mkdir(f->root, "secrets");
    tu_write(f->root, "secrets/key", SECRET, 0600);
    tu_write(f->root, "ok.txt", "fine\n", 0644);
    tu_symlink(".env", f->root, "alias");
    OK(sp_fs_open(&fs, f->root, &o, &err));
    sp_fs_text *t = NULL;
    EXPECT(sp_fs_read(&t, fs, ".env", NULL, &err), SP_EDENIED, "deny");
    err = NULL;
    EXPECT(sp_fs_read(&t, fs, "sub/.env", NULL, &err), SP_EDENIED, NULL);
    err = NULL;
    EXPECT(sp_fs_read(&t, fs, "secrets/key", NULL, &err), SP_EDENIED, NULL);
    err = NULL;
    EXPECT(sp_fs_read(&t, fs, "alias", NULL, &err), SP_EDENIED, NULL);
    err = NULL;
    EXPECT(sp_fs_write(NULL, fs, ".env", "x", 1, NULL, &err), SP_EDENIED, NULL);
    err = NULL;
    EXPECT(sp_fs_write(NULL, fs, "alias", "x", 1, NULL, &err), SP_EDENIED, NULL);
    err = NULL;
    assert_false(sp_fs_exists(fs, ".env"));
    sp_fs_entries *e = NULL;
    sp_fs_list_opts lo = SP_FS_LIST_OPTS_INIT;
    lo.depth = 5;
    OK(sp_fs_list(&e, fs, ".", &lo, &err));
    for (size_t i = 0; i < e->n; i++) {
        assert_null(strstr(e->v[i].path, ".env"));
        assert_null(strstr(e->v[i].path, "secrets/"));
    }
    sp_fs_entries_free(e);
    OK(sp_fs_read(&t, fs, "ok.txt", NULL, &err));
    sp_fs_text_free(t);

    /* Through a symlinked folder the deny list still holds: no grep, list,
     * write, mkdir or delete reaches what it hides. */
    tu_symlink("secrets", f->root, "to_secrets");
    sp_fs_matches *m = NULL;
    sp_fs_grep_opts go = SP_FS_GREP_OPTS_INIT;
    go.path = "to_secrets";
    EXPECT(sp_fs_grep(&m, fs, "SECRET", &go, &err), SP_EDENIED, NULL);
    go.path = "alias";
    EXPECT(sp_fs_grep(&m, fs, "SECRET", &go, &err), SP_EDENIED, NULL);
    go.path = NULL;
    OK(sp_fs_grep(&m, fs, "SECRET", &go, &err));
    assert_int_equal(m->n, 0);
    sp_fs_matches_free(m);
    EXPECT(sp_fs_list(&e, fs, "to_secrets", NULL, &err), SP_EDENIED, NULL);
    EXPECT(sp_fs_write(NULL, fs, "to_secrets/new", "x", 1, NULL, &err), SP_EDENIED, NULL);
    EXPECT(sp_fs_mkdir(fs, "to_secrets/d", true, true, &err), SP_EDENIED, NULL);
    EXPECT(sp_fs_delete(fs, "to_secrets/key", false, &err), SP_EDENIED, NULL);
    EXPECT(sp_fs_str_replace(NULL, fs, "alias", "API", "x", false, &err), SP_EDENIED, NULL);
    assert_false(sp_fs_exists(fs, "to_secrets/key"));
    sp_fs_entries *g = NULL;
    OK(sp_fs_glob(&g, fs, "**/key", NULL, 0, &err));
    assert_int_equal(g->n, 0);
    sp_fs_entries_free(g);
    sp_fs_free(fs);
    assert_true(tu_exists(f->root, "secrets/key"));
    assert_false(tu_exists(f->root, "secrets/new"));
    char *s = tu_read(f->root, ".env", NULL);
    assert_string_equal(s, "API_KEY=" SECRET);
    free(s);
}

static void test_names(void **state)
{
    struct fx *f = *state;
    sp_error *err = NULL;
    /* UTF-8 names are fine; invalid UTF-8 names that exist can be read. */
    OK(sp_fs_write(NULL, f->fs, "d\xc3\xa9j\xc3\xa0/\xe2\x82\xac.txt", "ok", 2, NULL, &err));
    tu_write(f->root, "bad\xff", "legacy\n", 0644);
    sp_fs_text *t = NULL;
    OK(sp_fs_read(&t, f->fs, "bad\xff", NULL, &err));
    assert_string_equal(t->content, "legacy\n");
    sp_fs_text_free(t);
    OK(sp_fs_delete(f->fs, "bad\xff", false, &err));
    /* Names with newlines and spaces. */
    OK(sp_fs_write(NULL, f->fs, "a b\nc", "x", 1, NULL, &err));
    assert_true(tu_exists(f->root, "a b\nc"));
}

/* A small tmpfs fills up during an overwrite: the error says so and the old
 * content is whole. */
static void test_full_disk(void **state)
{
    struct fx *f = *state;
    char *mnt = tu_join(f->root, "small");
    tu_mkdir(f->root, "small");
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=64k") < 0) {
        free(mnt);
        skip(); /* needs root (CI runs as root) */
    }
    sp_error *err = NULL;
    OK(sp_fs_write(NULL, f->fs, "small/keep.txt", "precious\n", 9, NULL, &err));
    size_t big = 256 * 1024;
    char *data = malloc(big);
    memset(data, 'x', big);
    int r = sp_fs_write(NULL, f->fs, "small/keep.txt", data, big, NULL, &err);
    assert_int_equal(r, SP_ERROR);
    assert_int_equal(err->sys_errno, ENOSPC);
    assert_non_null(strstr(err->message, "no space"));
    sp_error_free(err);
    err = NULL;
    sp_fs_write_opts o = SP_FS_WRITE_OPTS_INIT;
    o.mode = SP_FS_APPEND;
    r = sp_fs_write(NULL, f->fs, "small/keep.txt", data, big, &o, &err);
    assert_int_equal(r, SP_ERROR);
    sp_error_free(err);
    free(data);
    char *s = tu_read(f->root, "small/keep.txt", NULL);
    assert_string_equal(s, "precious\n");
    free(s);
    /* Nothing but the file is left: no temp files eat the space. */
    sp_fs_entries *e = NULL;
    OK(sp_fs_list(&e, f->fs, "small", NULL, &err));
    assert_int_equal(e->n, 1);
    sp_fs_entries_free(e);
    umount2(mnt, MNT_DETACH);
    free(mnt);
}

/* Absolute symlinks the container made, judged as the container sees
 * them: /workspace/... is the root, anything else is its image. */
static void test_container_links(void **state)
{
    struct fx *f = *state;
    sp_error *err = NULL;
    tu_mkdir(f->root, "lib");
    tu_write(f->root, "lib/x.txt", "x\n", 0644);
    tu_symlink("/workspace/lib/x.txt", f->root, "y");
    tu_symlink("/workspace", f->root, "ws");
    tu_symlink("/workspace/", f->root, "ws2");
    tu_symlink("/workspace/ws/lib/x.txt", f->root, "chain");
    tu_symlink("lib/x.txt", f->root, "relative");
    tu_symlink("/workspace/../etc/passwd", f->root, "dotdot");
    tu_symlink("/workspace/lib/../../etc", f->root, "dotdot2");
    tu_symlink("/workspace/loop", f->root, "loop");
    tu_symlink("/workspacex/lib/x.txt", f->root, "prefix");
    char *secret = tu_join(f->outside, "secret.txt");
    tu_symlink(secret, f->root, "img");
    free(secret);

    const char *good[] = {"y", "ws/lib/x.txt", "ws2/lib/x.txt", "chain", "relative", "ws/ws/ws/y",
                          NULL};
    for (size_t i = 0; good[i]; i++) {
        sp_fs_text *t = NULL;
        if (sp_fs_read(&t, f->fs, good[i], NULL, &err) != 0)
            fail_msg("%s: %s", good[i], err ? err->message : "?");
        assert_string_equal(t->content, "x\n");
        sp_fs_text_free(t);
    }
    sp_fs_info *st = NULL;
    OK(sp_fs_stat_target(&st, f->fs, "ws", &err));
    assert_int_equal(st->type, SP_FS_DIR);
    sp_fs_info_free(st);

    const char *image[] = {"img", "prefix", NULL};
    for (size_t i = 0; image[i]; i++) {
        sp_fs_text *t = NULL;
        EXPECT(sp_fs_read(&t, f->fs, image[i], NULL, &err), SP_EESCAPE, "container's image");
        EXPECT(sp_fs_write(NULL, f->fs, image[i], "pwned", 5, NULL, &err), SP_EESCAPE,
               "container's image");
        OK(sp_fs_stat(&st, f->fs, image[i], &err));
        assert_true(st->target_in_image);
        assert_true(st->target_escapes);
        sp_fs_info_free(st);
    }
    const char *escapes[] = {"dotdot", "dotdot2", NULL};
    for (size_t i = 0; escapes[i]; i++) {
        sp_fs_text *t = NULL;
        EXPECT(sp_fs_read(&t, f->fs, escapes[i], NULL, &err), SP_EESCAPE, "escapes");
        EXPECT(sp_fs_write(NULL, f->fs, escapes[i], "pwned", 5, NULL, &err), SP_EESCAPE, NULL);
        OK(sp_fs_stat(&st, f->fs, escapes[i], &err));
        assert_false(st->target_in_image);
        assert_true(st->target_escapes);
        sp_fs_info_free(st);
    }
    sp_fs_text *t = NULL;
    int r = sp_fs_read(&t, f->fs, "loop", NULL, &err);
    assert_true(r < 0);
    assert_int_equal(err->sys_errno, ELOOP);
    sp_error_free(err);
    err = NULL;

    /* Writes through a /workspace link land inside; stat keeps the link. */
    OK(sp_fs_write(NULL, f->fs, "y", "new\n", 4, NULL, &err));
    char *got = tu_read(f->root, "lib/x.txt", NULL);
    assert_string_equal(got, "new\n");
    free(got);
    OK(sp_fs_write(NULL, f->fs, "ws/lib/n.txt", "n\n", 2, NULL, &err));
    assert_true(tu_exists(f->root, "lib/n.txt"));
    OK(sp_fs_stat(&st, f->fs, "y", &err));
    assert_int_equal(st->type, SP_FS_SYMLINK);
    assert_false(st->target_escapes);
    assert_false(st->target_in_image);
    sp_fs_info_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fallback_is_active),
        cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_slices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_long_lines_and_chunks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_modes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_and_mkdir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_deep_and_long, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_error_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stat_exists, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_escapes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_container_links, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deny, setup, teardown),
        cmocka_unit_test_setup_teardown(test_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_disk, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
