/* Unit tests for the base helpers, path normalization and the state root
 * check. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "dir.h"
#include "event_log.h"
#include "json.h"
#include "lazy.h"
#include "sandpod/fs.h"
#include "sandpod/hydrate.h"
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
    /* EXDEV from a rename is a mount boundary, not an escape. */
    assert_int_equal(sp_code_from_errno(EXDEV), SP_ERROR);
    err = NULL;
    sp_err_errno(&err, EXDEV, "move into the workspace", "sub/f");
    assert_int_equal(err->code, SP_ERROR);
    assert_int_equal(err->reason, SP_R_CROSS_DEVICE);
    assert_string_equal(err->message,
                        "move into the workspace: sub/f: cannot move across file systems");
    sp_err_set(&err, SP_EESCAPE, EXDEV, "path escapes the workspace: ../x");
    assert_int_equal(err->reason, SP_R_NONE);
    sp_error_free(err);
    err = NULL;
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
    {
        /* A UTF-8 sequence fed in two pieces, the head filling between
         * them, and one cut by bytes: neither is split in the text. */
        sp_capbuf u;
        sp_capbuf_init(&u, 64, 100);
        char a[32];
        memset(a, 'a', 31);
        a[31] = '\xc3';
        sp_capbuf_feed(&u, a, 32);
        char b[101];
        b[0] = '\xa9';
        memset(b + 1, 'b', 100);
        sp_capbuf_feed(&u, b, sizeof(b));
        size_t n = 0;
        bool cut = false;
        char *t = sp_capbuf_text(&u, &n, &cut);
        assert_true(cut);
        assert_true(sp_utf8_valid(t, n));
        assert_true(strncmp(t, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n[... 3", 36) == 0);
        free(t);
        sp_capbuf_dispose(&u);
        sp_capbuf_init(&u, 64, 100);
        char e[200];
        for (int i = 0; i < 100; i++)
            memcpy(e + 2 * i, "\xc3\xa9", 2);
        sp_capbuf_feed(&u, e + 1, sizeof(e) - 1); /* odd start: one stray byte */
        t = sp_capbuf_text(&u, &n, &cut);
        assert_true(cut);
        assert_true(sp_utf8_valid(t + 1, n - 1));
        free(t);
        sp_capbuf_dispose(&u);
    }

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

/* ---------------------------------------------------- state root check -- */

static unsigned mode_of(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_mode & 07777;
}

/* sp_state_root_check(path, create) fails with `code` and a message holding
 * each of `a` and `b` (NULL: not checked). */
static void root_refused(const char *path, bool create, int code, const char *a, const char *b)
{
    sp_error *err = NULL;
    int r = sp_state_root_check(path, create, &err);
    if (r != code)
        fail_msg("state root %s: got %d (%s), wanted %d", path, r, err ? err->message : "-", code);
    assert_non_null(err);
    assert_non_null(strstr(err->message, path));
    if (a && !strstr(err->message, a))
        fail_msg("'%s' not in: %s", a, err->message);
    if (b && !strstr(err->message, b))
        fail_msg("'%s' not in: %s", b, err->message);
    assert_null(strchr(err->message, '\n'));
    sp_error_free(err);
}

static void root_ok(const char *path, bool create)
{
    sp_error *err = NULL;
    if (sp_state_root_check(path, create, &err) != 0)
        fail_msg("state root %s refused: %s", path, err->message);
}

/* The state root holds every sandbox's sandbox.json (with its -e values)
 * and snapshots: it is made private, and a root others own or may write
 * into is refused with a line that says what to do. */
static void test_state_root_check(void **state)
{
    (void)state;
    char *t = tu_mkdtemp();
    mode_t old_umask = umask(022);

    /* Missing: made 0700, parents too. */
    char *deep = tu_join(t, "a/b/root");
    root_refused(deep, false, SP_ENOTFOUND, "does not exist", NULL);
    root_ok(deep, true);
    char *a = tu_join(t, "a");
    char *ab = tu_join(t, "a/b");
    assert_int_equal(mode_of(deep), 0700);
    assert_int_equal(mode_of(ab), 0700);
    assert_int_equal(mode_of(a), 0700);
    root_ok(deep, false); /* again, as it is: fine */

    /* 0755 (older sandpod) is tightened; 0750 too. */
    char *open_root = tu_join(t, "open");
    assert_int_equal(mkdir(open_root, 0700), 0);
    assert_int_equal(chmod(open_root, 0755), 0);
    root_ok(open_root, true);
    assert_int_equal(mode_of(open_root), 0700);
    assert_int_equal(chmod(open_root, 0750), 0);
    root_ok(open_root, false);
    assert_int_equal(mode_of(open_root), 0700);

    /* Writable by others or the group: refused, left as it is. */
    assert_int_equal(chmod(open_root, 0777), 0);
    root_refused(open_root, true, SP_EDENIED, "writable by others (mode 0777)", "chmod 700 it");
    assert_int_equal(mode_of(open_root), 0777);
    assert_int_equal(chmod(open_root, 0770), 0);
    root_refused(open_root, true, SP_EDENIED, "writable by its group (mode 0770)", "chmod 700");
    assert_int_equal(chmod(open_root, 0703), 0);
    root_refused(open_root, false, SP_EDENIED, "writable by others (mode 0703)", NULL);
    assert_int_equal(chmod(open_root, 0700), 0);

    /* Owned by someone else: refused, whatever its mode. */
    char buf[64];
    if (geteuid() == 0) {
        char *foreign = tu_join(t, "foreign");
        assert_int_equal(mkdir(foreign, 0700), 0);
        assert_int_equal(chown(foreign, 1234, 1234), 0);
        root_refused(foreign, true, SP_EDENIED, "is owned by uid 1234, not you", "SANDPOD_HOME");
        assert_int_equal(mode_of(foreign), 0700);
        free(foreign);
    } else {
        snprintf(buf, sizeof(buf), "not you (uid %u)", (unsigned)geteuid());
        root_refused("/", false, SP_EDENIED, "is owned by uid 0", buf);
    }

    /* Not a folder. */
    tu_write(t, "file", "x", 0600);
    char *file = tu_join(t, "file");
    root_refused(file, true, SP_EINVAL, NULL, NULL);

    /* A symlink of our own is followed, and the folder it leads to judged:
     * a private one is fine, a 0755 one tightened, a 0777 one refused. */
    tu_symlink(open_root, t, "link");
    char *link = tu_join(t, "link");
    root_ok(link, true);
    assert_int_equal(chmod(open_root, 0755), 0);
    root_ok(link, false);
    assert_int_equal(mode_of(open_root), 0700);
    assert_int_equal(chmod(open_root, 0777), 0);
    root_refused(link, true, SP_EDENIED, "writable by others (mode 0777)", NULL);
    assert_int_equal(chmod(open_root, 0700), 0);
    /* A symlink above the root (a symlinked home folder) is followed. */
    char *below = tu_join(link, "sandpod");
    root_ok(below, true);
    assert_int_equal(mode_of(below), 0700);
    /* A dangling symlink is not made into a folder. */
    tu_symlink("nowhere", t, "dangling");
    char *dangling = tu_join(t, "dangling");
    sp_error *err = NULL;
    assert_true(sp_state_root_check(dangling, true, &err) < 0);
    sp_error_free(err);
    assert_false(tu_exists(t, "nowhere"));
    if (geteuid() == 0) {
        /* A link someone else planted is not followed, even to our folder. */
        assert_int_equal(lchown(link, 1234, 1234), 0);
        root_refused(link, true, SP_EDENIED, "symlink owned by uid 1234", NULL);
        /* root's own links are trusted (/home -> /data/home and the like). */
        assert_int_equal(lchown(link, 0, 0), 0);
        root_ok(link, false);
    }

    /* sp_workspace_create checks the root before it makes anything there. */
    assert_int_equal(chmod(open_root, 0777), 0);
    setenv("SANDPOD_HOME", open_root, 1);
    char *ws = NULL;
    err = NULL;
    assert_int_equal(sp_workspace_create(&ws, "box", &err), SP_EDENIED);
    assert_null(ws);
    assert_non_null(strstr(err->message, "chmod 700 it"));
    sp_error_free(err);
    assert_false(tu_exists(open_root, "sandboxes"));
    assert_int_equal(chmod(open_root, 0755), 0);
    err = NULL;
    assert_int_equal(sp_workspace_create(&ws, "box", &err), 0);
    assert_int_equal(mode_of(open_root), 0700);
    free(ws);
    unsetenv("SANDPOD_HOME");

    umask(old_umask);
    free(dangling);
    free(below);
    free(link);
    free(file);
    free(open_root);
    free(a);
    free(ab);
    free(deep);
    tu_rmtree(t);
    free(t);
}

/* The one folder reader: no "." or "..", the three orders, the bound,
 * rereading from the start, fds closed, errors with errno. */
static void test_dir_read(void **state)
{
    (void)state;
    char *d = tu_mkdtemp();
    tu_write(d, "b.txt", "x", 0644);
    tu_mkdir(d, "a");
    tu_write(d, "a.txt", "x", 0644);
    tu_symlink("nowhere", d, "c");
    int fds = tu_count_fds();
    sp_dirnames nm = SP_DIRNAMES_INIT;
    assert_int_equal(sp_dir_read_at(&nm, AT_FDCWD, d, SP_DIR_BYNAME, 0), 0);
    assert_int_equal(nm.n, 4);
    assert_string_equal(sp_dirnames_name(&nm, 0), "a");
    assert_int_equal(sp_dirnames_type(&nm, 0), DT_DIR);
    assert_string_equal(sp_dirnames_name(&nm, 1), "a.txt");
    assert_string_equal(sp_dirnames_name(&nm, 3), "c");
    assert_int_equal(sp_dirnames_type(&nm, 3), DT_LNK);
    /* git order: the folder "a" sorts as "a/", after "a.txt". */
    assert_int_equal(sp_dir_read_at(&nm, AT_FDCWD, d, SP_DIR_GITORDER, 0), 0);
    assert_string_equal(sp_dirnames_name(&nm, 0), "a.txt");
    assert_string_equal(sp_dirnames_name(&nm, 1), "a");
    /* The bound: more names than allowed is E2BIG and no names. */
    errno = 0;
    assert_int_equal(sp_dir_read_at(&nm, AT_FDCWD, d, SP_DIR_UNSORTED, 3), -1);
    assert_int_equal(errno, E2BIG);
    assert_int_equal(nm.n, 0);
    assert_int_equal(sp_dir_read_at(&nm, AT_FDCWD, d, SP_DIR_UNSORTED, 4), 0);
    assert_int_equal(nm.n, 4);
    /* The same fd read twice gives every name twice (it is rewound). */
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(sp_dir_read(&nm, fd, SP_DIR_UNSORTED, 0), 0);
    assert_int_equal(sp_dir_read(&nm, fd, SP_DIR_UNSORTED, 0), 0);
    assert_int_equal(nm.n, 4);
    close(fd);
    /* Not a folder, missing, a symlink (never followed). */
    cleanup_free char *file = tu_join(d, "b.txt");
    assert_int_equal(sp_dir_read_at(&nm, AT_FDCWD, file, SP_DIR_UNSORTED, 0), -1);
    assert_int_equal(errno, ENOTDIR);
    cleanup_free char *link = tu_join(d, "c");
    assert_int_equal(sp_dir_read_at(&nm, AT_FDCWD, link, SP_DIR_UNSORTED, 0), -1);
    assert_int_equal(nm.n, 0);
    tu_rmtree(file);
    assert_int_equal(sp_dir_read_at(&nm, AT_FDCWD, file, SP_DIR_UNSORTED, 0), -1);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(tu_count_fds(), fds);
    /* An empty folder. */
    cleanup_free char *a = tu_join(d, "a");
    assert_int_equal(sp_dir_read_at(&nm, AT_FDCWD, a, SP_DIR_BYNAME, 0), 0);
    assert_int_equal(nm.n, 0);
    sp_dirnames_dispose(&nm);
    sp_dirnames_dispose(&nm);
    tu_rmtree(d);
    free(d);
}

static void *json_init_thread(void *arg)
{
    (void)arg;
    sp_json_init();
    cJSON *j = sp_json_parse("{\"a\":1}", 7);
    int64_t v = sp_json_int(j, "a", -1);
    cJSON_Delete(j);
    return (void *)(intptr_t)v;
}

/* The one JSON helper set: defaults for missing and mistyped members,
 * int64 range, string arrays, add-or-fail, finish; the hooks set from
 * many threads at once. */
static void test_json(void **state)
{
    (void)state;
    pthread_t th[8];
    for (int i = 0; i < 8; i++)
        assert_int_equal(pthread_create(&th[i], NULL, json_init_thread, NULL), 0);
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(th[i], &r);
        assert_int_equal((intptr_t)r, 1);
    }
    const char *text =
        "{\"s\":\"x\",\"n\":42.9,\"big\":1e300,\"t\":true,\"f\":false,\"z\":null}junk";
    cJSON *j = sp_json_parse(text, strlen(text) - 4);
    assert_non_null(j);
    assert_null(sp_json_parse("{\"s\":", 5));
    assert_null(sp_json_parse(NULL, 0));
    assert_string_equal(sp_json_str(j, "s"), "x");
    assert_null(sp_json_str(j, "n"));
    assert_null(sp_json_str(j, "missing"));
    assert_string_equal(sp_json_str_or(j, "z", "-"), "-");
    char *dup = sp_json_strdup(j, "s");
    assert_string_equal(dup, "x");
    free(dup);
    assert_null(sp_json_strdup(j, "t"));
    assert_int_equal(sp_json_int(j, "n", -1), 42);
    assert_int_equal(sp_json_int(j, "big", -1), -1); /* no UB cast */
    assert_int_equal(sp_json_int(j, "s", -7), -7);
    assert_true(sp_json_num(j, "big", 0) > 1e299);
    assert_true(sp_json_bool(j, "t", false));
    assert_false(sp_json_bool(j, "f", true));
    assert_true(sp_json_bool(j, "n", true));
    assert_null(sp_json_get(NULL, "s"));
    assert_null(sp_json_str(NULL, "s"));
    const char *v[] = {"a", "b", NULL};
    cJSON *a = sp_json_strv(v);
    assert_int_equal(cJSON_GetArraySize(a), 2);
    assert_string_equal(cJSON_GetArrayItem(a, 1)->valuestring, "b");
    assert_true(sp_json_add(j, "arr", a));
    cJSON *empty = sp_json_strv(NULL);
    assert_int_equal(cJSON_GetArraySize(empty), 0);
    assert_false(sp_json_add(j, "x", NULL));
    /* An array is not an object: the item is freed, not leaked. */
    assert_false(sp_json_add(empty, NULL, cJSON_CreateString("y")));
    assert_null(sp_json_finish(empty, false));
    assert_ptr_equal(sp_json_finish(j, true), j);
    cJSON_Delete(j);
}

static char *ev_line(void *ud, uint64_t call)
{
    return sp_xasprintf("{\"call\":%llu,\"who\":%d}", (unsigned long long)call, *(int *)ud);
}

static void ev_append_n(const char *path, int who, int n)
{
    for (int i = 0; i < n; i++) {
        uint64_t call = 0;
        if (sp_events_append(path, &call, ev_line, &who, NULL) < 0 || call == 0)
            _exit(3);
    }
}

/* The numbers in an events file, in file order; torn or foreign lines
 * give -1. */
static size_t ev_calls(const char *path, long long *out, size_t max)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[256];
    size_t n = 0;
    while (n < max && fgets(line, sizeof(line), f)) {
        unsigned long long c;
        bool whole = strstr(line, "}\n") != NULL;
        out[n++] = whole && sscanf(line, "{\"call\":%llu,", &c) == 1 ? (long long)c : -1;
    }
    fclose(f);
    return n;
}

/* The events counter survives processes: two processes (and two threads in
 * each) appending at once get unique numbers that increase in file order;
 * a torn last line is closed and skipped; with the sequence file lost, the
 * last complete record says where to go on; an end record reuses its
 * start's number. */
static void *ev_thread(void *arg)
{
    ev_append_n(arg, 9, 100);
    return NULL;
}

static void test_events_counter(void **state)
{
    (void)state;
    char *d = tu_mkdtemp();
    char *path = tu_join(d, "events.jsonl");
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        assert_true(kids[k] >= 0);
        if (kids[k] == 0) {
            pthread_t th;
            if (pthread_create(&th, NULL, ev_thread, path) != 0)
                _exit(4);
            ev_append_n(path, k, 150);
            pthread_join(th, NULL);
            _exit(0);
        }
    }
    for (int k = 0; k < 2; k++) {
        int st = 0;
        assert_int_equal(waitpid(kids[k], &st, 0), kids[k]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    static long long calls[1000];
    size_t n = ev_calls(path, calls, 1000);
    assert_int_equal(n, 500);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(calls[i], (long long)i + 1);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);

    /* A writer killed mid-line, and the sequence file gone. */
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    assert_true(write(fd, "{\"call\":999,\"who", 16) == 16);
    close(fd);
    char *seq = tu_join(d, "events.jsonl.seq");
    assert_int_equal(unlink(seq), 0);
    assert_int_equal(sp_events_last_call(path), 500);
    uint64_t call = 0;
    int who = 5;
    assert_int_equal(sp_events_append(path, &call, ev_line, &who, NULL), 0);
    assert_int_equal(call, 501);
    /* The end of a call keeps its number. */
    assert_int_equal(sp_events_append(path, &call, ev_line, &who, NULL), 0);
    assert_int_equal(call, 501);
    call = 0;
    assert_int_equal(sp_events_append(path, &call, ev_line, &who, NULL), 0);
    assert_int_equal(call, 502);
    n = ev_calls(path, calls, 1000);
    assert_int_equal(n, 504);
    assert_int_equal(calls[500], -1); /* the torn line, closed */
    assert_int_equal(calls[501], 501);
    assert_int_equal(calls[502], 501);
    assert_int_equal(calls[503], 502);
    /* Never through a symlink. */
    char *link = tu_join(d, "link.jsonl");
    assert_int_equal(symlink(path, link), 0);
    call = 0;
    sp_error *err = NULL;
    assert_true(sp_events_append(link, &call, ev_line, &who, &err) < 0);
    sp_error_free(err);
    free(link);
    free(seq);
    free(path);
    tu_rmtree(d);
    free(d);
}

/* Collects lines as "a|b|" and stops at "stop". */
static int collect_line(const char *line, size_t len, void *ud, sp_error **err)
{
    (void)err;
    assert_int_equal(strlen(line), len);
    if (strcmp(line, "stop") == 0)
        return -42;
    sp_buf_add(ud, line, len);
    sp_buf_addc(ud, '|');
    return 0;
}

static void test_buf_lines(void **state)
{
    (void)state;
    sp_buf pend = SP_BUF_INIT, got = SP_BUF_INIT;
    /* Lines split across chunks, empty lines kept, the tail held back. */
    assert_int_equal(sp_buf_lines(&pend, "ab", 2, 100, collect_line, &got, NULL), 0);
    assert_int_equal(got.len, 0);
    assert_int_equal(sp_buf_lines(&pend, "c\n\nd", 4, 100, collect_line, &got, NULL), 0);
    assert_string_equal(got.data, "abc||");
    assert_string_equal(pend.data, "d");
    /* The callback's failure ends the feed and is returned. */
    assert_int_equal(sp_buf_lines(&pend, "\nstop\nx\n", 9, 100, collect_line, &got, NULL), -42);
    assert_string_equal(got.data, "abc||d|");
    /* An unfinished line over the limit. */
    sp_buf_dispose(&pend);
    pend = (sp_buf)SP_BUF_INIT;
    assert_int_equal(sp_buf_lines(&pend, "0123456789", 10, 8, collect_line, &got, NULL),
                     SP_ETOOBIG);
    sp_buf_dispose(&pend);
    sp_buf_dispose(&got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buf_lines),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_dir_read),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_buf),
        cmocka_unit_test(test_normalize),
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_lazy),
        cmocka_unit_test(test_state_root_check),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_events_counter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
