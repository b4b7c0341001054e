/* Tests of workspace hydration from host folders (overlay/hydrate.c) and of
 * the state root helpers (overlay/state.c). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "sandpod/hydrate.h"
#include "testutil.h"

extern int sp_hydrate_test_fail_commit;

struct fx {
    char *root;
    char *src; /* a host folder to mount */
    char *ws;  /* the workspace */
    char *out; /* content that must never be copied */
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    f->root = tu_mkdtemp();
    f->src = tu_join(f->root, "src");
    f->ws = tu_join(f->root, "ws");
    f->out = tu_join(f->root, "outside");
    tu_mkdir(f->root, "src");
    tu_mkdir(f->root, "ws");
    tu_mkdir(f->root, "outside");
    tu_write(f->out, "secret", "TOPSECRET\n", 0644);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    tu_rmtree(f->root);
    free(f->root);
    free(f->src);
    free(f->ws);
    free(f->out);
    free(f);
    return 0;
}

#define OK(call)                                                                                   \
    do {                                                                                           \
        sp_error *e_ = NULL;                                                                       \
        int r_ = (call);                                                                           \
        if (r_ != 0)                                                                               \
            fail_msg("%s -> %d: %s", #call, r_, e_ ? e_->message : "?");                           \
        sp_error_free(e_);                                                                         \
    } while (0)

/* Hydrate with err captured; returns the code. */
static int hydrate(sp_hydrate_result **res, const char *ws, const sp_mount *m, size_t n,
                   const sp_hydrate_opts *o, sp_error **err)
{
    return sp_hydrate(res, ws, m, n, o, err);
}

static void expect_err(int rc, sp_error *err, int code, const char *needle)
{
    if (rc != code)
        fail_msg("wanted code %d, got %d (%s)", code, rc, err ? err->message : "no error");
    assert_non_null(err);
    if (needle && !strstr(err->message, needle))
        fail_msg("message '%s' lacks '%s'", err->message, needle);
    sp_error_free(err);
}

/* Run call (which stores its error in `err`) and check code and message. */
#define EXPECT(call, code, needle)                                                                 \
    do {                                                                                           \
        err = NULL;                                                                                \
        int r_ = (call);                                                                           \
        expect_err(r_, err, code, needle);                                                         \
        err = NULL;                                                                                \
    } while (0)

/* A listing of a tree: one line per entry with type, mode, size, mtime and
 * content (files) or target (links), sorted. Compares whole trees. */
static sp_strv listing_v;
static size_t listing_skip;
static int listing_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)flag;
    (void)ftw;
    sp_buf b = SP_BUF_INIT;
    const char *rel = strlen(path) > listing_skip ? path + listing_skip : ".";
    sp_buf_printf(&b, "%s %o %lld %lld.%09ld ", rel, st->st_mode, (long long)st->st_size,
                  S_ISDIR(st->st_mode) ? 0LL : (long long)st->st_mtim.tv_sec,
                  S_ISDIR(st->st_mode) ? 0L : st->st_mtim.tv_nsec);
    if (S_ISREG(st->st_mode) && st->st_size < 65536) {
        size_t len = 0;
        char *c = tu_read("/", path + 1, &len);
        if (c)
            sp_buf_add(&b, c, len);
        free(c);
    } else if (S_ISLNK(st->st_mode)) {
        char t[4096];
        ssize_t n = readlink(path, t, sizeof(t));
        if (n > 0)
            sp_buf_add(&b, t, (size_t)n);
    }
    sp_strv_push(&listing_v, sp_buf_steal(&b));
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *listing(const char *dir)
{
    listing_v = (sp_strv){NULL, 0, 0};
    listing_skip = strlen(dir) + 1;
    assert_int_equal(nftw(dir, listing_one, 64, FTW_PHYS), 0);
    qsort(listing_v.v, listing_v.n, sizeof(char *), cmp_str);
    sp_buf b = SP_BUF_INIT;
    for (size_t i = 0; i < listing_v.n; i++) {
        sp_buf_adds(&b, listing_v.v[i]);
        sp_buf_addc(&b, '\n');
    }
    sp_strv_dispose(&listing_v);
    return sp_buf_steal(&b);
}

/* No staging folder is left beside (or inside) the workspace. */
static void assert_no_staging(struct fx *f)
{
    char *l = listing(f->root);
    if (strstr(l, ".sandpod-hydrate-"))
        fail_msg("staging folder left behind:\n%s", l);
    free(l);
}

static void set_mtime(const char *dir, const char *rel, time_t sec)
{
    char *p = tu_join(dir, rel);
    struct timespec ts[2] = {{sec, 123456789}, {sec, 987654321}};
    assert_int_equal(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW), 0);
    free(p);
}

static struct stat lstat_of(const char *dir, const char *rel)
{
    struct stat st;
    char *p = tu_join(dir, rel);
    if (lstat(p, &st) < 0)
        fail_msg("lstat %s: %s", p, strerror(errno));
    free(p);
    return st;
}

static void assert_content(const char *dir, const char *rel, const char *want)
{
    char *c = tu_read(dir, rel, NULL);
    if (!c)
        fail_msg("missing %s/%s", dir, rel);
    assert_string_equal(c, want);
    free(c);
}

static const sp_hydrate_entry *find_entry(const sp_hydrate_result *r, const char *path)
{
    for (size_t i = 0; i < r->n_entries; i++)
        if (strcmp(r->entries[i].path, path) == 0)
            return &r->entries[i];
    return NULL;
}

static const sp_hydrate_skip *find_skip(const sp_hydrate_result *r, const char *path)
{
    for (size_t i = 0; i < r->n_skipped; i++)
        if (strcmp(r->skipped[i].path, path) == 0)
            return &r->skipped[i];
    return NULL;
}

/* ------------------------------------------------------------- tests -- */

static void test_copy_keeps_metadata(void **state)
{
    struct fx *f = *state;
    tu_mkdir(f->src, "bin");
    tu_mkdir(f->src, "empty");
    tu_mkdir(f->src, "deep");
    tu_mkdir(f->src, "deep/er");
    tu_mkdir(f->src, "ro");
    tu_write(f->src, "README.md", "# hello\n", 0644);
    tu_write(f->src, "bin/run.sh", "#!/bin/sh\necho hi\n", 0755);
    tu_write(f->src, "private", "p\n", 0600);
    tu_write(f->src, "deep/er/x.txt", "x\n", 0640);
    tu_write(f->src, "ro/file", "r\n", 0444);
    tu_write(f->src, "zero", "", 0644);
    /* Modes the umask would change, or creation cannot give. */
    mode_t old_umask = umask(022);
    tu_write(f->src, "shared", "s\n", 0666);
    bool root = geteuid() == 0;
    /* Unreadable by mode: only root reads it (another user's hydration
     * refuses an unreadable file: test_unreadable). */
    if (root)
        tu_write(f->src, "none", "n\n", 0000);
    tu_write(f->src, "setuid", "#!/bin/sh\n", 04755);
    tu_write(f->src, "sticky-ish", "t\n", 01777);
    if (root) {
        char *p = tu_join(f->src, "owned");
        tu_write(f->src, "owned", "o\n", 0640);
        assert_int_equal(chown(p, 1234, 5678), 0);
        free(p);
    }
    tu_symlink("README.md", f->src, "link-rel");
    tu_symlink("/etc/passwd", f->src, "link-abs");
    tu_symlink("nowhere", f->src, "link-dangling");
    set_mtime(f->src, "README.md", 1000000000);
    set_mtime(f->src, "bin/run.sh", 1100000000);
    set_mtime(f->src, "link-rel", 1200000000);
    set_mtime(f->src, "deep/er", 1300000000);
    set_mtime(f->src, "empty", 1400000000);
    char *ro = tu_join(f->src, "ro");
    chmod(ro, 0555);
    free(ro);
    set_mtime(f->src, "ro", 1500000000);

    sp_mount m = {f->src, NULL, NULL, NULL, 0, false, false, false};
    sp_hydrate_result *r = NULL;
    OK(hydrate(&r, f->ws, &m, 1, NULL, &e_));
    /* Before anything reads the copy and moves its atime. */
    assert_int_equal(lstat_of(f->ws, "README.md").st_atim.tv_nsec, 123456789);

    char *a = listing(f->src), *b = listing(f->ws);
    assert_string_equal(a, b);
    free(a);
    free(b);
    assert_int_equal(lstat_of(f->ws, "bin/run.sh").st_mode & 07777, 0755);
    assert_int_equal(lstat_of(f->ws, "private").st_mode & 07777, 0600);
    assert_int_equal(lstat_of(f->ws, "ro").st_mode & 07777, 0555);
    assert_int_equal(lstat_of(f->ws, "shared").st_mode & 07777, 0666);
    if (root)
        assert_int_equal(lstat_of(f->ws, "none").st_mode & 07777, 0000);
    assert_int_equal(lstat_of(f->ws, "setuid").st_mode & 07777, 04755);
    assert_int_equal(lstat_of(f->ws, "sticky-ish").st_mode & 07777, 01777);
    if (root) {
        struct stat o = lstat_of(f->ws, "owned");
        assert_int_equal(o.st_uid, 1234);
        assert_int_equal(o.st_gid, 5678);
        assert_int_equal(o.st_mode & 07777, 0640);
    }
    umask(old_umask);
    assert_int_equal(lstat_of(f->ws, "deep/er").st_mtim.tv_sec, 1300000000);
    assert_int_equal(lstat_of(f->ws, "empty").st_mtim.tv_sec, 1400000000);
    assert_int_equal(lstat_of(f->ws, "ro").st_mtim.tv_sec, 1500000000);
    assert_int_equal(lstat_of(f->ws, "link-rel").st_mtim.tv_sec, 1200000000);
    assert_int_equal(lstat_of(f->ws, "README.md").st_mtim.tv_nsec, 987654321);

    size_t files = 9 + 2 * root; /* "none" and "owned" */
    assert_int_equal(r->files, files);
    assert_int_equal(r->symlinks, 3);
    assert_int_equal(r->dirs, 5);
    assert_int_equal(r->bytes, 8 + 18 + 2 + 2 + 2 + 2 + 10 + 2 + (root ? 2 + 2 : 0));
    assert_int_equal(r->n_skipped, 0);
    assert_int_equal(r->n_overridden, 0);
    assert_int_equal(r->n_mounts, 1);
    assert_string_equal(r->mounts[0].mount_path, ".");
    assert_int_equal(r->mounts[0].files, files);
    assert_non_null(find_entry(r, "deep/er/x.txt"));
    assert_int_equal(find_entry(r, "link-abs")->type, SP_FS_SYMLINK);
    /* Sorted by path. */
    for (size_t i = 1; i < r->n_entries; i++)
        assert_true(strcmp(r->entries[i - 1].path, r->entries[i].path) < 0);
    sp_hydrate_result_free(r);
    assert_no_staging(f);
}

struct seen {
    sp_strv scanned;
    uint64_t calls, last_total_files, last_total_bytes;
    int phases;
};

static void record(void *ud, const sp_hydrate_progress *p)
{
    struct seen *s = ud;
    s->calls++;
    s->phases |= 1 << p->phase;
    if (p->phase == SP_HYDRATE_SCAN && p->path)
        sp_strv_push(&s->scanned, strdup(p->path));
    if (p->phase == SP_HYDRATE_COPY) {
        s->last_total_files = p->total_files;
        s->last_total_bytes = p->total_bytes;
        assert_true(p->files <= p->total_files);
    }
}

static void test_globs(void **state)
{
    struct fx *f = *state;
    tu_mkdir(f->src, "node_modules");
    tu_mkdir(f->src, "node_modules/pkg");
    tu_write(f->src, "node_modules/pkg/index.js", "big\n", 0644);
    tu_mkdir(f->src, "web");
    tu_mkdir(f->src, "web/node_modules");
    tu_write(f->src, "web/node_modules/x.js", "x\n", 0644);
    tu_write(f->src, "web/app.js", "app\n", 0644);
    tu_write(f->src, "web/notes.md", "n\n", 0644);
    tu_mkdir(f->src, "src");
    tu_mkdir(f->src, "src/sub");
    tu_mkdir(f->src, "src/emptydir");
    tu_write(f->src, "src/a.c", "a\n", 0644);
    tu_write(f->src, "src/sub/b.c", "b\n", 0644);
    tu_write(f->src, "src/sub/b.o", "o\n", 0644);
    tu_write(f->src, "README.md", "r\n", 0644);
    tu_mkdir(f->src, "other");
    tu_mkdir(f->src, "other/deeper");
    tu_write(f->src, "other/deeper/f.txt", "f\n", 0644);

    /* Excludes: `**` and any-depth patterns; excluded folders are not walked. */
    const char *exc[] = {"**/node_modules", "*.o", NULL};
    sp_mount m = {f->src, NULL, NULL, exc, 0, false, false, false};
    struct seen s = {{NULL, 0, 0}, 0, 0, 0, 0};
    sp_hydrate_opts o = SP_HYDRATE_OPTS_INIT;
    o.progress = record;
    o.progress_userdata = &s;
    sp_hydrate_result *r = NULL;
    OK(hydrate(&r, f->ws, &m, 1, &o, &e_));
    for (size_t i = 0; i < s.scanned.n; i++)
        if (strstr(s.scanned.v[i], "node_modules/"))
            fail_msg("walked into an excluded folder: %s", s.scanned.v[i]);
    assert_true(s.phases & (1 << SP_HYDRATE_SCAN));
    assert_true(s.phases & (1 << SP_HYDRATE_COPY));
    assert_int_equal(s.last_total_files, r->files);
    assert_int_equal(s.last_total_bytes, r->bytes);
    sp_strv_dispose(&s.scanned);
    assert_false(tu_exists(f->ws, "node_modules"));
    assert_false(tu_exists(f->ws, "web/node_modules"));
    assert_false(tu_exists(f->ws, "src/sub/b.o"));
    assert_true(tu_exists(f->ws, "src/sub/b.c"));
    assert_true(tu_exists(f->ws, "src/emptydir"));
    assert_true(tu_exists(f->ws, "other/deeper/f.txt"));
    assert_int_equal(r->excluded, 3);
    sp_hydrate_result_free(r);

    /* Includes: by name at any depth, or anchored; other folders pruned;
     * an empty folder is kept only when it matches an include. */
    tu_rmtree(f->ws);
    tu_mkdir(f->root, "ws");
    const char *inc[] = {"*.md", "src/**/*.c", "src/emptydir", NULL};
    const char *exc2[] = {"node_modules", NULL};
    sp_mount m2 = {f->src, NULL, inc, exc2, 0, false, false, false};
    s = (struct seen){{NULL, 0, 0}, 0, 0, 0, 0};
    OK(hydrate(&r, f->ws, &m2, 1, &o, &e_));
    char *l = listing(f->ws);
    for (size_t i = 0; i < s.scanned.n; i++)
        if (strstr(s.scanned.v[i], "node_modules/"))
            fail_msg("walked into an excluded folder: %s", s.scanned.v[i]);
    sp_strv_dispose(&s.scanned);
    assert_true(tu_exists(f->ws, "README.md"));
    assert_true(tu_exists(f->ws, "web/notes.md"));
    assert_true(tu_exists(f->ws, "src/a.c"));
    assert_true(tu_exists(f->ws, "src/sub/b.c"));
    assert_true(tu_exists(f->ws, "src/emptydir"));
    assert_false(tu_exists(f->ws, "src/sub/b.o"));
    assert_false(tu_exists(f->ws, "web/app.js"));
    assert_false(tu_exists(f->ws, "other"));
    assert_int_equal(r->files, 4);
    free(l);
    sp_hydrate_result_free(r);

    /* Anchored includes only: folders that cannot match are not walked. */
    tu_rmtree(f->ws);
    tu_mkdir(f->root, "ws");
    const char *inc3[] = {"src/sub/*.c", NULL};
    sp_mount m3 = {f->src, NULL, inc3, NULL, 0, false, false, false};
    s = (struct seen){{NULL, 0, 0}, 0, 0, 0, 0};
    OK(hydrate(&r, f->ws, &m3, 1, &o, &e_));
    for (size_t i = 0; i < s.scanned.n; i++)
        if (strncmp(s.scanned.v[i], "other/", 6) == 0 || strncmp(s.scanned.v[i], "web/", 4) == 0)
            fail_msg("walked a folder no include can match: %s", s.scanned.v[i]);
    sp_strv_dispose(&s.scanned);
    assert_int_equal(r->files, 1);
    assert_true(tu_exists(f->ws, "src/sub/b.c"));
    assert_false(tu_exists(f->ws, "src/a.c"));
    assert_false(tu_exists(f->ws, "src/emptydir"));
    sp_hydrate_result_free(r);

    /* A bad glob is refused before anything happens. */
    const char *bad[] = {"[oops", NULL};
    sp_mount m4 = {f->src, NULL, NULL, bad, 0, false, false, false};
    sp_error *err = NULL;
    EXPECT(hydrate(NULL, f->ws, &m4, 1, NULL, &err), SP_EINVAL, "exclude");
    assert_no_staging(f);
}

static void test_mount_path(void **state)
{
    struct fx *f = *state;
    tu_write(f->src, "a.txt", "a\n", 0644);
    char *src_mode = tu_join(f->src, "");
    chmod(f->src, 0750);
    free(src_mode);
    sp_mount m = {f->src, "/workspace/vendor/lib/", NULL, NULL, 0, false, false, false};
    sp_hydrate_result *r = NULL;
    OK(hydrate(&r, f->ws, &m, 1, NULL, &e_));
    assert_content(f->ws, "vendor/lib/a.txt", "a\n");
    assert_int_equal(lstat_of(f->ws, "vendor").st_mode & 07777, 0755);
    assert_int_equal(lstat_of(f->ws, "vendor/lib").st_mode & 07777, 0750);
    assert_string_equal(r->mounts[0].mount_path, "vendor/lib");
    assert_non_null(find_entry(r, "vendor"));
    assert_non_null(find_entry(r, "vendor/lib"));
    sp_hydrate_result_free(r);
}

static void test_dst_escape(void **state)
{
    struct fx *f = *state;
    tu_write(f->src, "a.txt", "a\n", 0644);
    tu_write(f->ws, "keep", "k\n", 0644);
    char *before = listing(f->root);
    const char *bad[] = {"../x", "a/../../x", "/etc", "/workspace/../x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sp_mount m = {f->src, bad[i], NULL, NULL, 0, false, false, false};
        sp_error *err = NULL;
        EXPECT(hydrate(NULL, f->ws, &m, 1, NULL, &err), SP_EESCAPE, NULL);
    }
    char *after = listing(f->root);
    assert_string_equal(before, after);
    free(before);
    free(after);
}

static void test_outside_allowed_roots(void **state)
{
    struct fx *f = *state;
    tu_mkdir(f->root, "allowed");
    char *allowed = tu_join(f->root, "allowed");
    tu_mkdir(allowed, "proj");
    tu_write(allowed, "proj/a.txt", "a\n", 0644);
    /* A symlinked parent that leads out of the allowed root. */
    tu_symlink(f->root, allowed, "up");
    char *via_link = tu_join(allowed, "up/outside");
    char *inside = tu_join(allowed, "proj");
    char *inside_via_dots = tu_join(allowed, "proj/../proj");
    const char *roots[] = {allowed, NULL};
    sp_hydrate_opts o = SP_HYDRATE_OPTS_INIT;
    o.allowed_roots = roots;
    sp_error *err = NULL;

    sp_mount m = {f->out, NULL, NULL, NULL, 0, false, false, false};
    EXPECT(hydrate(NULL, f->ws, &m, 1, &o, &err), SP_EESCAPE, "outside the allowed roots");
    err = NULL;
    m.host_path = via_link;
    EXPECT(hydrate(NULL, f->ws, &m, 1, &o, &err), SP_EESCAPE, "resolves to");
    assert_false(tu_exists(f->ws, "secret"));

    m.host_path = inside_via_dots;
    OK(hydrate(NULL, f->ws, &m, 1, &o, &e_));
    assert_content(f->ws, "a.txt", "a\n");

    /* A missing allowed root is an error, not a silent pass. */
    char *missing = tu_join(f->root, "nope");
    const char *roots2[] = {missing, NULL};
    o.allowed_roots = roots2;
    err = NULL;
    m.host_path = inside;
    EXPECT(hydrate(NULL, f->ws, &m, 1, &o, &err), SP_ENOTFOUND, "allowed root");
    free(missing);
    free(allowed);
    free(via_link);
    free(inside);
    free(inside_via_dots);
}

static void test_missing_mount(void **state)
{
    struct fx *f = *state;
    char *missing = tu_join(f->root, "nope");
    sp_mount m = {missing, NULL, NULL, NULL, 0, false, false, false};
    sp_error *err = NULL;
    EXPECT(hydrate(NULL, f->ws, &m, 1, NULL, &err), SP_ENOTFOUND, "nope");
    char *file = tu_join(f->out, "secret");
    m.host_path = file;
    err = NULL;
    EXPECT(hydrate(NULL, f->ws, &m, 1, NULL, &err), SP_EINVAL, "not a folder");
    m.host_path = f->src;
    err = NULL;
    EXPECT(hydrate(NULL, missing, &m, 1, NULL, &err), SP_ENOTFOUND, "workspace");
    sp_hydrate_opts o = SP_HYDRATE_OPTS_INIT;
    o.version = 99;
    err = NULL;
    EXPECT(hydrate(NULL, f->ws, &m, 1, &o, &err), SP_EINVAL, "version");
    /* No mounts at all: nothing to do, and that is fine. */
    sp_hydrate_result *r = NULL;
    OK(hydrate(&r, f->ws, NULL, 0, NULL, &e_));
    assert_int_equal(r->n_entries, 0);
    sp_hydrate_result_free(r);
    free(missing);
    free(file);
    assert_no_staging(f);
}

static void test_symlink_outside(void **state)
{
    struct fx *f = *state;
    char *secret = tu_join(f->out, "secret");
    tu_symlink(secret, f->src, "to-secret");
    tu_symlink("../outside/secret", f->src, "to-secret-rel");
    tu_symlink(f->out, f->src, "to-outside-dir");
    tu_write(f->src, "real.txt", "real\n", 0644);
    tu_mkdir(f->src, "dir");
    tu_write(f->src, "dir/in.txt", "in\n", 0644);
    tu_symlink("real.txt", f->src, "to-real");
    tu_symlink("dir", f->src, "to-dir");
    tu_symlink(".", f->src, "loop");
    tu_symlink("missing", f->src, "dangling");
    tu_mkdir(f->src, "sub");
    tu_symlink("..", f->src, "sub/up");

    /* Without follow_symlinks: links are copied verbatim, never followed. */
    sp_mount m = {f->src, NULL, NULL, NULL, 0, false, false, false};
    sp_hydrate_result *r = NULL;
    OK(hydrate(&r, f->ws, &m, 1, NULL, &e_));
    assert_true(S_ISLNK(lstat_of(f->ws, "to-secret").st_mode));
    char t[4096];
    char *p = tu_join(f->ws, "to-secret");
    ssize_t n = readlink(p, t, sizeof(t) - 1);
    free(p);
    assert_true(n > 0);
    t[n] = '\0';
    assert_string_equal(t, secret);
    assert_true(S_ISLNK(lstat_of(f->ws, "to-outside-dir").st_mode));
    assert_true(S_ISLNK(lstat_of(f->ws, "loop").st_mode));
    assert_int_equal(r->n_skipped, 0);
    sp_hydrate_result_free(r);

    /* With follow_symlinks: targets inside the mount are copied as content,
     * targets outside are skipped and reported, loops and dangling links
     * too. No byte of the outside file lands anywhere. */
    tu_rmtree(f->ws);
    tu_mkdir(f->root, "ws");
    m.follow_symlinks = true;
    OK(hydrate(&r, f->ws, &m, 1, NULL, &e_));
    assert_false(tu_exists(f->ws, "to-secret"));
    assert_false(tu_exists(f->ws, "to-secret-rel"));
    assert_false(tu_exists(f->ws, "to-outside-dir"));
    assert_true(S_ISREG(lstat_of(f->ws, "to-real").st_mode));
    assert_content(f->ws, "to-real", "real\n");
    assert_true(S_ISDIR(lstat_of(f->ws, "to-dir").st_mode));
    assert_content(f->ws, "to-dir/in.txt", "in\n");
    assert_false(tu_exists(f->ws, "loop"));
    assert_false(tu_exists(f->ws, "dangling"));
    assert_false(tu_exists(f->ws, "sub/up"));
    assert_int_equal(find_skip(r, "to-secret")->reason, SP_HYDRATE_SKIP_OUTSIDE);
    assert_string_equal(find_skip(r, "to-secret")->detail, secret);
    assert_int_equal(find_skip(r, "to-secret-rel")->reason, SP_HYDRATE_SKIP_OUTSIDE);
    assert_int_equal(find_skip(r, "to-outside-dir")->reason, SP_HYDRATE_SKIP_OUTSIDE);
    assert_int_equal(find_skip(r, "loop")->reason, SP_HYDRATE_SKIP_LOOP);
    assert_int_equal(find_skip(r, "sub/up")->reason, SP_HYDRATE_SKIP_LOOP);
    assert_int_equal(find_skip(r, "dangling")->reason, SP_HYDRATE_SKIP_DANGLING);
    assert_string_equal(sp_hydrate_skip_name(SP_HYDRATE_SKIP_OUTSIDE), "outside");
    char *l = listing(f->ws);
    assert_null(strstr(l, "TOPSECRET"));
    free(l);
    sp_hydrate_result_free(r);

    /* An allowed root that holds the target makes it followable. */
    tu_rmtree(f->ws);
    tu_mkdir(f->root, "ws");
    const char *roots[] = {f->src, f->out, NULL};
    sp_hydrate_opts o = SP_HYDRATE_OPTS_INIT;
    o.allowed_roots = roots;
    OK(hydrate(&r, f->ws, &m, 1, &o, &e_));
    assert_content(f->ws, "to-secret", "TOPSECRET\n");
    assert_content(f->ws, "to-outside-dir/secret", "TOPSECRET\n");
    assert_null(find_skip(r, "to-secret"));
    sp_hydrate_result_free(r);
    free(secret);
    assert_no_staging(f);
}

static void test_cap_exceeded(void **state)
{
    struct fx *f = *state;
    char big[3000];
    memset(big, 'b', sizeof(big));
    tu_write_n(f->src, "big1", big, sizeof(big), 0644);
    tu_write_n(f->src, "big2", big, sizeof(big), 0644);
    tu_mkdir(f->src, "skipme");
    tu_write_n(f->src, "skipme/huge", big, sizeof(big), 0644);
    tu_write(f->ws, "existing", "e\n", 0644);
    char *before = listing(f->ws);

    sp_mount m = {f->src, NULL, NULL, NULL, 5000, false, false, false};
    sp_error *err = NULL;
    EXPECT(hydrate(NULL, f->ws, &m, 1, NULL, &err), SP_ETOOBIG, "9000 bytes");
    err = NULL;
    EXPECT(hydrate(NULL, f->ws, &m, 1, NULL, &err), SP_ETOOBIG, "5000 bytes");
    char *after = listing(f->ws);
    assert_string_equal(before, after);
    free(after);
    assert_no_staging(f);

    /* Excluded files do not count; exactly the cap is fine. */
    const char *exc[] = {"skipme", NULL};
    m.exclude = exc;
    m.max_bytes = 6000;
    sp_hydrate_result *r = NULL;
    OK(hydrate(&r, f->ws, &m, 1, NULL, &e_));
    assert_int_equal(r->bytes, 6000);
    sp_hydrate_result_free(r);
    free(before);
}

/* Runs fn in a child that cannot read everything: as nobody when we are
 * root (root reads any file), else as ourselves. Returns the child's exit
 * status. */
static int run_unprivileged(struct fx *f, int (*fn)(struct fx *f))
{
    if (geteuid() == 0) {
        /* nobody must be able to reach the fixture and write the workspace. */
        chmod(f->root, 0755);
        chmod(f->src, 0755);
        assert_int_equal(chown(f->ws, 65534, 65534), 0);
    }
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0 && (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0))
            _exit(90);
        _exit(fn(f));
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static int child_unreadable_file(struct fx *f)
{
    sp_mount m = {f->src, NULL, NULL, NULL, 0, false, false, false};
    sp_error *err = NULL;
    int rc = sp_hydrate(NULL, f->ws, &m, 1, NULL, &err);
    if (rc != SP_EDENIED)
        return 1;
    if (!strstr(err->message, "locked.txt")) {
        fprintf(stderr, "message: %s\n", err->message);
        return 2;
    }
    sp_error_free(err);
    return 0;
}

static int child_unreadable_dir(struct fx *f)
{
    sp_mount m = {f->src, NULL, NULL, NULL, 0, false, false, false};
    sp_error *err = NULL;
    int rc = sp_hydrate(NULL, f->ws, &m, 1, NULL, &err);
    if (rc != SP_EDENIED)
        return 1;
    if (!strstr(err->message, "lockeddir")) {
        fprintf(stderr, "message: %s\n", err->message);
        return 2;
    }
    sp_error_free(err);
    /* Excluding the folder makes the same hydration work. */
    const char *exc[] = {"lockeddir", NULL};
    m.exclude = exc;
    if (sp_hydrate(NULL, f->ws, &m, 1, NULL, NULL) != 0)
        return 3;
    return 0;
}

static void test_unreadable(void **state)
{
    struct fx *f = *state;
    for (int i = 0; i < 20; i++) {
        char name[32];
        snprintf(name, sizeof(name), "f%02d.txt", i);
        tu_write(f->src, name, "readable\n", 0644);
    }
    tu_write(f->src, "locked.txt", "no\n", 0000);
    tu_write(f->ws, "existing", "e\n", 0644);
    char *before = listing(f->ws);
    assert_int_equal(run_unprivileged(f, child_unreadable_file), 0);
    char *after = listing(f->ws);
    assert_string_equal(before, after);
    free(after);
    assert_no_staging(f);

    char *locked = tu_join(f->src, "locked.txt");
    unlink(locked);
    free(locked);
    tu_mkdir(f->src, "lockeddir");
    tu_write(f->src, "lockeddir/x", "x\n", 0644);
    char *ld = tu_join(f->src, "lockeddir");
    chmod(ld, 0000);
    free(ld);
    assert_int_equal(run_unprivileged(f, child_unreadable_dir), 0);
    assert_true(tu_exists(f->ws, "f00.txt"));
    assert_false(tu_exists(f->ws, "lockeddir"));
    free(before);
    assert_no_staging(f);
}

/* Removes the host folders as soon as the first file is copied. */
static void vanish(void *ud, const sp_hydrate_progress *p)
{
    struct fx *f = ud;
    if (p->phase != SP_HYDRATE_COPY || p->files != 1)
        return;
    char *a = tu_join(f->src, "d1"), *b = tu_join(f->src, "d2");
    tu_rmtree(a);
    tu_rmtree(b);
    free(a);
    free(b);
}

static void test_vanished_folder(void **state)
{
    struct fx *f = *state;
    tu_mkdir(f->src, "d1");
    tu_mkdir(f->src, "d2");
    for (int i = 0; i < 10; i++) {
        char name[32];
        snprintf(name, sizeof(name), "d1/f%d", i);
        tu_write(f->src, name, "1\n", 0644);
        snprintf(name, sizeof(name), "d2/f%d", i);
        tu_write(f->src, name, "2\n", 0644);
    }
    tu_write(f->ws, "existing", "e\n", 0644);
    char *before = listing(f->ws);
    sp_mount m = {f->src, NULL, NULL, NULL, 0, false, false, false};
    sp_hydrate_opts o = SP_HYDRATE_OPTS_INIT;
    o.progress = vanish;
    o.progress_userdata = f;
    sp_error *err = NULL;
    EXPECT(hydrate(NULL, f->ws, &m, 1, &o, &err), SP_ENOTFOUND, "vanished while hydrating");
    char *after = listing(f->ws);
    assert_string_equal(before, after);
    free(before);
    free(after);
    assert_no_staging(f);
}

/* Says stop once the copy has made `after` files (or while scanning, with
 * after 0). */
struct stopper {
    uint64_t after;
    int asked;
    sp_hydrate_phase phase;
};

static bool stop_after(void *ud)
{
    struct stopper *st = ud;
    st->asked++;
    return st->phase == SP_HYDRATE_SCAN ? st->asked > 3 : false;
}

static void stop_progress(void *ud, const sp_hydrate_progress *p)
{
    struct stopper *st = ud;
    if (p->phase == SP_HYDRATE_COPY && p->files >= st->after)
        st->phase = SP_HYDRATE_SCAN; /* from now on, stop */
}

/* should_stop ends the call in either phase with SP_ECANCELED, and the
 * workspace is as it was. */
static void test_should_stop(void **state)
{
    struct fx *f = *state;
    for (int i = 0; i < 20; i++) {
        char name[32];
        snprintf(name, sizeof(name), "f%d", i);
        tu_write(f->src, name, "x\n", 0644);
    }
    tu_write(f->ws, "existing", "e\n", 0644);
    char *before = listing(f->ws);
    sp_mount m = {f->src, NULL, NULL, NULL, 0, false, false, false};
    for (int phase = 0; phase < 2; phase++) {
        struct stopper st = {.after = 5, .phase = phase ? SP_HYDRATE_COPY : SP_HYDRATE_SCAN};
        sp_hydrate_opts o = SP_HYDRATE_OPTS_INIT;
        o.progress = stop_progress;
        o.should_stop = stop_after;
        o.progress_userdata = &st;
        sp_error *err = NULL;
        EXPECT(hydrate(NULL, f->ws, &m, 1, &o, &err), SP_ECANCELED, "hydration stopped");
        assert_true(st.asked > 3);
        char *after = listing(f->ws);
        assert_string_equal(before, after);
        free(after);
        assert_no_staging(f);
    }
    free(before);
}

static void test_overlap(void **state)
{
    struct fx *f = *state;
    tu_mkdir(f->root, "src2");
    char *src2 = tu_join(f->root, "src2");
    tu_write(f->src, "README.md", "from one\n", 0644);
    tu_write(f->src, "one.txt", "1\n", 0644);
    tu_mkdir(f->src, "dir");
    tu_write(f->src, "dir/x", "x1\n", 0644);
    tu_write(f->src, "conf", "file in one\n", 0644);
    tu_mkdir(f->src, "tree");
    tu_write(f->src, "tree/leaf", "leaf\n", 0644);
    tu_write(src2, "README.md", "from two\n", 0600);
    tu_write(src2, "two.txt", "2\n", 0644);
    tu_mkdir(src2, "dir");
    tu_write(src2, "dir/y", "y2\n", 0644);
    tu_mkdir(src2, "conf");
    tu_write(src2, "conf/in", "dir in two\n", 0644);
    tu_write(src2, "tree", "now a file\n", 0644);

    sp_mount m[2] = {{f->src, NULL, NULL, NULL, 0, false, false, false},
                     {src2, NULL, NULL, NULL, 0, false, false, false}};
    sp_hydrate_result *r = NULL;
    OK(hydrate(&r, f->ws, m, 2, NULL, &e_));
    assert_content(f->ws, "README.md", "from two\n");
    assert_int_equal(lstat_of(f->ws, "README.md").st_mode & 07777, 0600);
    assert_content(f->ws, "one.txt", "1\n");
    assert_content(f->ws, "two.txt", "2\n");
    assert_content(f->ws, "dir/x", "x1\n");
    assert_content(f->ws, "dir/y", "y2\n");
    assert_content(f->ws, "conf/in", "dir in two\n");
    assert_content(f->ws, "tree", "now a file\n");
    assert_int_equal(r->n_overridden, 3);
    assert_string_equal(r->overridden[0].path, "README.md");
    assert_int_equal(r->overridden[0].mount, 1);
    assert_int_equal(r->overridden[0].previous, 0);
    assert_string_equal(r->overridden[1].path, "conf");
    assert_string_equal(r->overridden[2].path, "tree");
    assert_null(find_entry(r, "tree/leaf"));
    assert_int_equal(find_entry(r, "README.md")->mount, 1);
    assert_int_equal(find_entry(r, "dir/x")->mount, 0);
    assert_int_equal(r->mounts[0].files, 2);
    assert_int_equal(r->mounts[1].files, 5);
    sp_hydrate_result_free(r);

    /* The same mounts the other way round: the other one wins. */
    tu_rmtree(f->ws);
    tu_mkdir(f->root, "ws");
    sp_mount rev[2] = {m[1], m[0]};
    OK(hydrate(&r, f->ws, rev, 2, NULL, &e_));
    assert_content(f->ws, "README.md", "from one\n");
    assert_content(f->ws, "conf", "file in one\n");
    assert_content(f->ws, "tree/leaf", "leaf\n");
    sp_hydrate_result_free(r);
    free(src2);
}

static void test_existing_workspace(void **state)
{
    struct fx *f = *state;
    tu_write(f->src, "README.md", "new\n", 0644);
    tu_mkdir(f->src, "dir");
    tu_write(f->src, "dir/new", "n\n", 0644);
    tu_mkdir(f->src, "evil");
    tu_write(f->src, "evil/payload", "p\n", 0644);
    tu_write(f->ws, "README.md", "old\n", 0644);
    tu_write(f->ws, "keep.txt", "keep\n", 0644);
    tu_mkdir(f->ws, "dir");
    tu_write(f->ws, "dir/old", "o\n", 0644);
    /* A symlink in the workspace (the container could plant one) is
     * replaced, never written through. */
    tu_symlink(f->out, f->ws, "evil");

    sp_mount m = {f->src, NULL, NULL, NULL, 0, false, false, false};
    sp_hydrate_result *r = NULL;
    OK(hydrate(&r, f->ws, &m, 1, NULL, &e_));
    assert_content(f->ws, "README.md", "new\n");
    assert_content(f->ws, "keep.txt", "keep\n");
    assert_content(f->ws, "dir/old", "o\n");
    assert_content(f->ws, "dir/new", "n\n");
    assert_true(S_ISDIR(lstat_of(f->ws, "evil").st_mode));
    assert_false(tu_exists(f->out, "payload"));
    assert_int_equal(r->n_overridden, 2);
    assert_string_equal(r->overridden[0].path, "README.md");
    assert_int_equal(r->overridden[0].previous, -1);
    assert_string_equal(r->overridden[1].path, "evil");
    sp_hydrate_result_free(r);
    assert_no_staging(f);
}

static void test_commit_rollback(void **state)
{
    struct fx *f = *state;
    for (int i = 0; i < 6; i++) {
        char name[32];
        snprintf(name, sizeof(name), "new%d", i);
        tu_write(f->src, name, "n\n", 0644);
    }
    tu_write(f->src, "README.md", "new\n", 0644);
    tu_mkdir(f->src, "dir");
    tu_write(f->src, "dir/a", "a\n", 0644);
    tu_write(f->src, "dir/b", "b\n", 0644);
    tu_write(f->ws, "README.md", "old\n", 0644);
    tu_mkdir(f->ws, "dir");
    tu_write(f->ws, "dir/a", "old a\n", 0644);
    tu_write(f->ws, "keep", "k\n", 0644);
    char *before = listing(f->ws);
    sp_mount m = {f->src, NULL, NULL, NULL, 0, false, false, false};
    for (int k = 1; k <= 9; k++) {
        sp_hydrate_test_fail_commit = k;
        sp_error *err = NULL;
        EXPECT(hydrate(NULL, f->ws, &m, 1, NULL, &err), SP_ERROR, "Input/output error");
        char *after = listing(f->ws);
        assert_string_equal(before, after);
        free(after);
        assert_no_staging(f);
    }
    sp_hydrate_test_fail_commit = 0;
    OK(hydrate(NULL, f->ws, &m, 1, NULL, &e_));
    assert_content(f->ws, "dir/a", "a\n");
    free(before);
}

static void test_special_and_hardlinks(void **state)
{
    struct fx *f = *state;
    char *fifo = tu_join(f->src, "fifo");
    assert_int_equal(mkfifo(fifo, 0644), 0);
    free(fifo);
    char *sock = tu_join(f->src, "sock");
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
    assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(s);
    free(sock);
    tu_write(f->src, "a", "shared\n", 0644);
    char *a = tu_join(f->src, "a"), *b = tu_join(f->src, "b");
    assert_int_equal(link(a, b), 0);
    free(a);
    free(b);

    sp_mount m = {f->src, NULL, NULL, NULL, 0, false, false, false};
    sp_hydrate_result *r = NULL;
    OK(hydrate(&r, f->ws, &m, 1, NULL, &e_));
    assert_false(tu_exists(f->ws, "fifo"));
    assert_false(tu_exists(f->ws, "sock"));
    assert_int_equal(r->n_skipped, 2);
    assert_int_equal(find_skip(r, "fifo")->reason, SP_HYDRATE_SKIP_SPECIAL);
    assert_string_equal(find_skip(r, "fifo")->detail, "fifo");
    assert_string_equal(find_skip(r, "sock")->detail, "socket");
    assert_int_equal(r->hardlinks, 2);
    struct stat sa_ = lstat_of(f->ws, "a"), sb_ = lstat_of(f->ws, "b");
    assert_true(sa_.st_ino != sb_.st_ino);
    assert_int_equal(sa_.st_nlink, 1);
    tu_write(f->ws, "a", "changed\n", 0644);
    assert_content(f->ws, "b", "shared\n");
    sp_hydrate_result_free(r);
}

static void test_ten_thousand_files(void **state)
{
    struct fx *f = *state;
    char name[64];
    for (int d = 0; d < 100; d++) {
        snprintf(name, sizeof(name), "d%03d", d);
        tu_mkdir(f->src, name);
        for (int i = 0; i < 100; i++) {
            char rel[64], content[64];
            snprintf(rel, sizeof(rel), "d%03d/f%03d.txt", d, i);
            snprintf(content, sizeof(content), "file %d/%d\n", d, i);
            tu_write(f->src, rel, content, i % 7 ? 0644 : 0755);
        }
    }
    sp_mount m = {f->src, NULL, NULL, NULL, 0, false, false, false};
    sp_hydrate_result *r = NULL;
    int64_t t0 = sp_now_ms();
    OK(hydrate(&r, f->ws, &m, 1, NULL, &e_));
    int64_t ms = sp_now_ms() - t0;
    assert_int_equal(r->files, 10000);
    assert_int_equal(r->dirs, 100);
    assert_int_equal(r->n_entries, 10100);
    char *a = listing(f->src), *b = listing(f->ws);
    assert_string_equal(a, b);
    free(a);
    free(b);
    print_message("10,000 files hydrated in %lld ms\n", (long long)ms);
    sp_hydrate_result_free(r);
}

static void test_sparse_gib(void **state)
{
    struct fx *f = *state;
    const off_t size = (off_t)1 << 30;
    char *p = tu_join(f->src, "sparse.img");
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    assert_true(fd >= 0);
    /* Data at the start, in the middle (not block aligned) and at the end. */
    char chunk[70000];
    for (size_t i = 0; i < sizeof(chunk); i++)
        chunk[i] = (char)(i * 31 + 7);
    assert_int_equal(pwrite(fd, chunk, sizeof(chunk), 0), (ssize_t)sizeof(chunk));
    assert_int_equal(pwrite(fd, chunk, 5000, (off_t)512 * 1024 * 1024 + 123), (ssize_t)5000);
    assert_int_equal(pwrite(fd, "END", 3, size - 3), 3);
    close(fd);
    free(p);
    struct stat sst = lstat_of(f->src, "sparse.img");
    if ((off_t)sst.st_blocks * 512 >= size)
        skip(); /* this filesystem keeps no holes */

    sp_mount m = {f->src, NULL, NULL, NULL, 0, false, false, false};
    sp_hydrate_result *r = NULL;
    int64_t t0 = sp_now_ms();
    OK(hydrate(&r, f->ws, &m, 1, NULL, &e_));
    print_message("1 GiB sparse file hydrated in %lld ms\n", (long long)(sp_now_ms() - t0));
    assert_int_equal(r->bytes, (uint64_t)size);
    assert_true(r->sparse + r->reflinked == 1);
    sp_hydrate_result_free(r);

    struct stat dst = lstat_of(f->ws, "sparse.img");
    assert_int_equal(dst.st_size, size);
    assert_int_equal(dst.st_mode & 07777, 0640);
    /* Holes stayed holes. */
    assert_true((off_t)dst.st_blocks * 512 < (off_t)16 << 20);

    /* Byte for byte, the whole GiB. */
    char *sp_ = tu_join(f->src, "sparse.img"), *dp = tu_join(f->ws, "sparse.img");
    int a = open(sp_, O_RDONLY | O_CLOEXEC), b = open(dp, O_RDONLY | O_CLOEXEC);
    assert_true(a >= 0 && b >= 0);
    size_t bs = 4 << 20;
    char *x = malloc(bs), *y = malloc(bs);
    for (off_t off = 0; off < size; off += (off_t)bs) {
        ssize_t na = pread(a, x, bs, off), nb = pread(b, y, bs, off);
        assert_int_equal(na, nb);
        assert_true(na > 0);
        if (memcmp(x, y, (size_t)na) != 0)
            fail_msg("content differs in the 4 MiB block at %lld", (long long)off);
    }
    close(a);
    close(b);
    free(x);
    free(y);
    free(sp_);
    free(dp);
}

/* A folder of the workspace that is another file system (a mount point):
 * moving staged entries into it fails with EXDEV, which says so, and is
 * not mistaken for an escape. In a private mount namespace (root only). */
static int child_cross_device(struct fx *f)
{
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return 77;
    tu_mkdir(f->ws, "sub");
    cleanup_free char *sub = tu_join(f->ws, "sub");
    if (mount("tmpfs", sub, "tmpfs", 0, "size=1m") < 0)
        return 77;
    sp_mount m = {f->src, NULL, NULL, NULL, 0, false, false, false};
    sp_error *err = NULL;
    int rc = sp_hydrate(NULL, f->ws, &m, 1, NULL, &err);
    int ret = 0;
    if (rc == SP_EESCAPE || !err || err->reason != SP_R_CROSS_DEVICE ||
        !strstr(err->message, "cannot move across file systems") ||
        strstr(err->message, "escape")) {
        fprintf(stderr, "rc %d: %s\n", rc, err ? err->message : "no error");
        ret = 1;
    }
    sp_error_free(err);
    /* All or nothing: the workspace is as it was. */
    if (tu_exists(f->ws, "sub/f") || tu_exists(f->ws, "top"))
        ret = 2;
    umount(sub);
    return ret;
}

static void test_cross_device(void **state)
{
    struct fx *f = *state;
    if (geteuid() != 0)
        skip();
    tu_mkdir(f->src, "sub");
    tu_write(f->src, "sub/f", "f\n", 0644);
    tu_write(f->src, "top", "t\n", 0644);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(child_cross_device(f));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77)
        skip();
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_workspace_inside_mount(void **state)
{
    struct fx *f = *state;
    tu_write(f->src, "a", "a\n", 0644);
    tu_write(f->ws, "old", "o\n", 0644);
    /* Mount the folder that holds the workspace: it is not copied into itself. */
    sp_mount m = {f->root, NULL, NULL, NULL, 0, false, false, false};
    sp_hydrate_result *r = NULL;
    OK(hydrate(&r, f->ws, &m, 1, NULL, &e_));
    assert_content(f->ws, "src/a", "a\n");
    assert_content(f->ws, "outside/secret", "TOPSECRET\n");
    assert_false(tu_exists(f->ws, "ws"));
    const sp_hydrate_skip *s = find_skip(r, "ws");
    assert_non_null(s);
    assert_int_equal(s->reason, SP_HYDRATE_SKIP_LOOP);
    assert_string_equal(s->detail, "the workspace itself");
    sp_hydrate_result_free(r);
    assert_no_staging(f);
}

static void test_spec_parse(void **state)
{
    (void)state;
    sp_mount *m = NULL;
    OK(sp_mount_spec_parse(&m, "./my,project", &e_));
    assert_string_equal(m->host_path, "./my,project");
    assert_null(m->mount_path);
    assert_null(m->include);
    assert_null(m->exclude);
    assert_int_equal(m->max_bytes, 0);
    assert_false(m->follow_symlinks);
    sp_mount_free(m);

    OK(sp_mount_spec_parse(&m,
                           "src=/a\\,b,dst=vendor/x,include=*.{c,h},include=docs/**,"
                           "exclude=**/node_modules,exclude=a\\,b,max-bytes=64M,follow-symlinks",
                           &e_));
    assert_string_equal(m->host_path, "/a,b");
    assert_string_equal(m->mount_path, "vendor/x");
    assert_string_equal(m->include[0], "*.{c,h}");
    assert_string_equal(m->include[1], "docs/**");
    assert_null(m->include[2]);
    assert_string_equal(m->exclude[0], "**/node_modules");
    assert_string_equal(m->exclude[1], "a\\,b");
    assert_null(m->exclude[2]);
    assert_int_equal(m->max_bytes, 64ull << 20);
    assert_true(m->follow_symlinks);
    sp_mount_free(m);

    static const struct {
        const char *s;
        uint64_t v;
    } sizes[] = {{"1", 1},           {"10k", 10240}, {"2K", 2048},
                 {"3KiB", 3072},     {"4kb", 4096},  {"1G", 1ull << 30},
                 {"2T", 2ull << 40}, {"123B", 123},  {"18446744073709551615", UINT64_MAX}};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char spec[128];
        snprintf(spec, sizeof(spec), "max-bytes=%s,src=x", sizes[i].s);
        OK(sp_mount_spec_parse(&m, spec, &e_));
        assert_int_equal(m->max_bytes, sizes[i].v);
        assert_string_equal(m->host_path, "x");
        sp_mount_free(m);
    }
    OK(sp_mount_spec_parse(&m, "follow-symlinks=false,src=x", &e_));
    assert_false(m->follow_symlinks);
    assert_false(m->gitignore);
    sp_mount_free(m);
    OK(sp_mount_spec_parse(&m, "gitignore,src=x", &e_));
    assert_true(m->gitignore);
    sp_mount_free(m);
    OK(sp_mount_spec_parse(&m, "src=x,gitignore=no", &e_));
    assert_false(m->gitignore);
    assert_false(m->keep_secrets); /* the default strips */
    sp_mount_free(m);
    OK(sp_mount_spec_parse(&m, "secrets=keep,src=x", &e_));
    assert_true(m->keep_secrets);
    assert_string_equal(m->host_path, "x");
    sp_mount_free(m);
    OK(sp_mount_spec_parse(&m, "src=x,secrets=strip", &e_));
    assert_false(m->keep_secrets);
    sp_mount_free(m);

    static const struct {
        const char *spec, *needle;
    } bad[] = {
        {"", "empty"},
        {"src=", "empty value"},
        {"dst=x", "no src"},
        {"src=a,,dst=b", "empty item"},
        {"src=a,src=b", "repeats src"},
        {"src=a,color=red", "unknown mount spec key 'color'"},
        {"src=a,max-bytes=0", "max-bytes"},
        {"src=a,max-bytes=12X", "max-bytes"},
        {"src=a,max-bytes=-1", "max-bytes"},
        {"src=a,max-bytes=99999999999999999999", "max-bytes"},
        {"src=a,max-bytes=20000000000000000T", "max-bytes"},
        {"src=a,follow-symlinks=maybe", "follow-symlinks"},
        {"src=a,gitignore=maybe", "gitignore takes true or false"},
        {"src=a,gitignore,gitignore=false", "repeats gitignore"},
        {"src=a,dst", "KEY=VALUE"},
        {"src=a,secrets=maybe", "secrets takes strip (the default: credentials are left out) "
                                "or keep: secrets=maybe"},
        {"src=a,secrets=KEEP", "secrets takes strip"},
        {"src=a,secrets=keep,secrets=strip", "repeats secrets"},
        {"src=a,secrets", "KEY=VALUE"},
        {"src=a,secrets=", "empty value"},
        {"src=a,secret=keep", "unknown mount spec key 'secret'"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sp_error *err = NULL;
        m = NULL;
        int rc = sp_mount_spec_parse(&m, bad[i].spec, &err);
        if (rc != SP_EINVAL)
            fail_msg("spec '%s' gave %d", bad[i].spec, rc);
        assert_null(m);
        expect_err(rc, err, SP_EINVAL, bad[i].needle);
    }
    sp_mount_free(NULL);
    sp_hydrate_result_free(NULL);
}

static void test_spec_hydrates(void **state)
{
    struct fx *f = *state;
    tu_write(f->src, "a.c", "a\n", 0644);
    tu_write(f->src, "a.o", "o\n", 0644);
    char spec[4096];
    snprintf(spec, sizeof(spec), "src=%s,dst=code,exclude=*.o", f->src);
    sp_mount *m = NULL;
    OK(sp_mount_spec_parse(&m, spec, &e_));
    OK(hydrate(NULL, f->ws, m, 1, NULL, &e_));
    sp_mount_free(m);
    assert_content(f->ws, "code/a.c", "a\n");
    assert_false(tu_exists(f->ws, "code/a.o"));
}

/* Every byte of every file below dir, concatenated (symlink targets too). */
static sp_buf all_bytes_v;
static int all_bytes_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)flag;
    (void)ftw;
    if (S_ISREG(st->st_mode)) {
        size_t len = 0;
        char *c = tu_read("/", path + 1, &len);
        assert_non_null(c);
        sp_buf_add(&all_bytes_v, c, len);
        free(c);
    } else if (S_ISLNK(st->st_mode)) {
        char t[4096];
        ssize_t n = readlink(path, t, sizeof(t));
        if (n > 0)
            sp_buf_add(&all_bytes_v, t, (size_t)n);
    }
    sp_buf_add(&all_bytes_v, path, strlen(path));
    return 0;
}

static char *all_bytes(const char *dir, size_t *len)
{
    all_bytes_v = (sp_buf)SP_BUF_INIT;
    sp_buf_add(&all_bytes_v, "", 0);
    assert_int_equal(nftw(dir, all_bytes_one, 64, FTW_PHYS), 0);
    *len = all_bytes_v.len;
    return sp_buf_steal(&all_bytes_v);
}

static const sp_hydrate_rewrite *find_rewrite(const sp_hydrate_result *r, const char *path)
{
    for (size_t i = 0; i < r->n_rewritten; i++)
        if (strcmp(r->rewritten[i].path, path) == 0)
            return &r->rewritten[i];
    return NULL;
}

static void expect_secret_skip(const sp_hydrate_result *r, const char *path, const char *detail)
{
    const sp_hydrate_skip *k = find_skip(r, path);
    if (!k)
        fail_msg("%s is not listed as left out", path);
    assert_int_equal(k->reason, SP_HYDRATE_SKIP_SECRET);
    assert_string_equal(sp_hydrate_skip_name(k->reason), "secret");
    assert_string_equal(k->detail, detail);
}

/* A project with credentials where real ones keep theirs. */
static const char *const secret_tokens[] = {
    "TOKEN_GIT_1", "TOKEN_HDR_2",    "TOKEN_ENV_3", "TOKEN_KEY_4",     "XYZ_NPM_5",   "TOKEN_GD_6",
    "TOKEN_BAD_7", "TOKEN_DOCKER_8", "TOKEN_ENV_9", "TOKEN_VENDOR_10", "TOKEN_PEM_11"};

static void secret_project(const char *s)
{
    static const char *const dirs[] = {
        ".git", "wt",     "gitdirs",    "gitdirs/wt",      "broken", "broken/.git", ".docker",
        "app",  "vendor", "vendor/lib", "vendor/lib/.git", "certs",  "src",         "links"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
        tu_mkdir(s, dirs[i]);
    tu_write(s, ".git/HEAD", "ref: refs/heads/main\n", 0644);
    tu_write(s, ".git/config",
             "[core]\n\trepositoryformatversion = 0\n"
             "[remote \"origin\"]\n\turl = https://user:TOKEN_GIT_1@host/x.git\n"
             "\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
             "[http \"https://h/\"]\n\textraHeader = Authorization: Bearer TOKEN_HDR_2\n",
             0644);
    tu_write(s, ".env", "API_KEY=TOKEN_ENV_3\n", 0600);
    tu_write(s, ".env.example", "API_KEY=changeme\n", 0644);
    tu_write(s, "id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY-----\nTOKEN_KEY_4\n", 0600);
    tu_write(s, "id_ed25519.pub", "ssh-ed25519 AAAA me@host\n", 0644);
    tu_write(s, ".npmrc",
             "registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken=XYZ_NPM_5\n",
             0644);
    /* A worktree's .git file names a gitdir elsewhere in the mount. */
    tu_write(s, "wt/.git", "gitdir: ../gitdirs/wt\n", 0644);
    tu_write(s, "gitdirs/wt/config", "[remote \"o\"]\n\turl = https://TOKEN_GD_6@h/x\n", 0644);
    /* A git config this reader cannot parse stays out. */
    tu_write(s, "broken/.git/config", "[core] bare = true\n# TOKEN_BAD_7\n", 0644);
    tu_write(s, ".docker/config.json",
             "{\"auths\": {\"r.io\": {\"auth\": \"TOKEN_DOCKER_8\"}}, \"credsStore\": \"pass\"}",
             0644);
    tu_write(s, "app/.env.local", "X=TOKEN_ENV_9\n", 0644);
    tu_write(s, "vendor/lib/.git/config",
             "[Credential]\n\thelper = store\n[remote \"o\"]\n\turl = https://TOKEN_VENDOR_10@h/\n",
             0644);
    tu_write(s, "certs/tls.pem", "TOKEN_PEM_11\n", 0644);
    tu_write(s, "src/id_map.c", "int id;\n", 0644);
    /* Followed links: judged by their own name and by their target's. */
    tu_write(s, "links/real.txt", "not a secret\n", 0644);
    tu_symlink("real.txt", s, "links/.env");
    tu_symlink("../.env", s, "links/innocent.txt");
}

/* Nothing secret flows in by default (issue 28): no byte of any token
 * anywhere in the workspace, each left-out or rewritten file reported,
 * the rest (.env.example, a public key, source named id_*) copied; and
 * secrets=keep copies everything as it is. */
static void test_secrets_left_out(void **state)
{
    struct fx *f = *state;
    secret_project(f->src);
    char spec[4096];
    snprintf(spec, sizeof(spec), "src=%s,follow-symlinks", f->src);
    sp_mount *m = NULL;
    OK(sp_mount_spec_parse(&m, spec, &e_));
    sp_hydrate_result *r = NULL;
    OK(hydrate(&r, f->ws, m, 1, NULL, &e_));
    sp_mount_free(m);

    size_t len = 0;
    char *bytes = all_bytes(f->ws, &len);
    for (size_t i = 0; i < sizeof(secret_tokens) / sizeof(secret_tokens[0]); i++)
        if (memmem(bytes, len, secret_tokens[i], strlen(secret_tokens[i])))
            fail_msg("%s reached the workspace", secret_tokens[i]);
    free(bytes);

    assert_content(f->ws, ".env.example", "API_KEY=changeme\n");
    assert_content(f->ws, "id_ed25519.pub", "ssh-ed25519 AAAA me@host\n");
    assert_content(f->ws, "src/id_map.c", "int id;\n");
    assert_content(f->ws, ".git/config",
                   "[core]\n\trepositoryformatversion = 0\n"
                   "[remote \"origin\"]\n\turl = https://host/x.git\n"
                   "\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
                   "[http \"https://h/\"]\n");
    assert_content(f->ws, ".npmrc", "registry=https://registry.npmjs.org/\n");
    assert_content(f->ws, "gitdirs/wt/config", "[remote \"o\"]\n\turl = https://h/x\n");
    assert_content(f->ws, "vendor/lib/.git/config", "[remote \"o\"]\n\turl = https://h/\n");
    assert_content(f->ws, "wt/.git", "gitdir: ../gitdirs/wt\n");
    assert_false(tu_exists(f->ws, ".env"));
    assert_false(tu_exists(f->ws, "app/.env.local"));
    assert_false(tu_exists(f->ws, "id_ed25519"));
    assert_false(tu_exists(f->ws, "certs/tls.pem"));
    assert_false(tu_exists(f->ws, "broken/.git/config"));
    assert_false(tu_exists(f->ws, "links/.env"));
    assert_false(tu_exists(f->ws, "links/innocent.txt"));
    assert_content(f->ws, "links/real.txt", "not a secret\n");

    expect_secret_skip(r, ".env", ".env file");
    expect_secret_skip(r, "app/.env.local", ".env file");
    expect_secret_skip(r, "id_ed25519", "private key");
    expect_secret_skip(r, "certs/tls.pem", "key or certificate file");
    expect_secret_skip(r, "broken/.git/config", "git config that could not be parsed");
    expect_secret_skip(r, "links/.env", ".env file");
    expect_secret_skip(r, "links/innocent.txt", ".env file");
    assert_null(find_skip(r, ".env.example"));
    static const char *const rewritten[] = {".docker/config.json", ".git/config", ".npmrc",
                                            "gitdirs/wt/config", "vendor/lib/.git/config"};
    assert_int_equal(r->n_rewritten, 5);
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(r->rewritten[i].path, rewritten[i]); /* sorted */
        assert_int_equal(r->rewritten[i].mount, 0);
    }
    assert_string_equal(find_rewrite(r, ".git/config")->detail,
                        "credentials removed from .git/config");
    /* A rewritten file is an entry, with the size that was written. */
    bool seen = false;
    for (size_t i = 0; i < r->n_entries; i++) {
        if (strcmp(r->entries[i].path, ".npmrc") == 0) {
            assert_int_equal(r->entries[i].size, strlen("registry=https://registry.npmjs.org/\n"));
            seen = true;
        }
        if (strcmp(r->entries[i].path, "broken/.git/config") == 0)
            fail_msg("a left-out file is listed as copied");
    }
    assert_true(seen);
    sp_hydrate_result_free(r);

    /* secrets=keep: the copy is the source, byte for byte. */
    char *ws2 = tu_join(f->root, "ws2");
    tu_mkdir(f->root, "ws2");
    snprintf(spec, sizeof(spec), "src=%s,secrets=keep", f->src);
    OK(sp_mount_spec_parse(&m, spec, &e_));
    OK(hydrate(&r, ws2, m, 1, NULL, &e_));
    sp_mount_free(m);
    assert_int_equal(r->n_rewritten, 0);
    assert_int_equal(r->n_skipped, 0);
    sp_hydrate_result_free(r);
    char *want = listing(f->src), *got = listing(ws2);
    assert_string_equal(got, want);
    free(want);
    free(got);
    bytes = all_bytes(ws2, &len);
    for (size_t i = 0; i < sizeof(secret_tokens) / sizeof(secret_tokens[0]); i++)
        if (!memmem(bytes, len, secret_tokens[i], strlen(secret_tokens[i])))
            fail_msg("secrets=keep lost %s", secret_tokens[i]);
    free(bytes);
    free(ws2);
}

static void test_state_root(void **state)
{
    struct fx *f = *state;
    char *home = tu_join(f->root, "home");
    char *out = NULL;
    setenv("SANDPOD_HOME", home, 1);
    OK(sp_state_root(&out, &e_));
    assert_string_equal(out, home);
    free(out);
    setenv("SANDPOD_HOME", "relative/path", 1);
    sp_error *err = NULL;
    EXPECT(sp_state_root(&out, &err), SP_EINVAL, "absolute");
    unsetenv("SANDPOD_HOME");
    setenv("XDG_DATA_HOME", "/xdg", 1);
    OK(sp_state_root(&out, &e_));
    assert_string_equal(out, "/xdg/sandpod");
    free(out);
    setenv("XDG_DATA_HOME", "rel", 1);
    setenv("HOME", "/home/u", 1);
    OK(sp_state_root(&out, &e_));
    assert_string_equal(out, "/home/u/.local/share/sandpod");
    free(out);
    unsetenv("XDG_DATA_HOME");

    setenv("SANDPOD_HOME", home, 1);
    char *ws = NULL;
    OK(sp_workspace_create(&ws, "my-box_1.0", &e_));
    char *want = tu_join(home, "sandboxes/my-box_1.0/workspace");
    assert_string_equal(ws, want);
    struct stat st;
    assert_int_equal(stat(ws, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0755);
    assert_int_equal(stat(home, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    free(ws);
    OK(sp_workspace_create(&ws, "my-box_1.0", &e_)); /* again: fine */
    free(ws);
    free(want);
    const char *bad[] = {
        "",   "-x",  ".x",  "a/b",
        "..", "a b", "x\n", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err = NULL;
        EXPECT(sp_workspace_create(&ws, bad[i], &err), SP_EINVAL, "bad sandbox name");
        assert_null(ws);
        assert_false(sp_sandbox_name_valid(bad[i]));
    }
    assert_true(sp_sandbox_name_valid("a"));
    assert_true(sp_sandbox_name_valid("A9"));
    unsetenv("SANDPOD_HOME");
    free(home);
}

/* ------------------------------------------------------ gitignore -- */

/* The files (and symlinks) below dir, relative to it, sorted, one a line;
 * `.git` left out. */
static int file_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)flag;
    (void)ftw;
    const char *rel = path + listing_skip;
    if (strlen(path) <= listing_skip || S_ISDIR(st->st_mode) || strncmp(rel, ".git/", 5) == 0)
        return 0;
    sp_strv_push(&listing_v, sp_xasprintf("%s\n", rel));
    return 0;
}

static char *file_list(const char *dir)
{
    listing_v = (sp_strv){NULL, 0, 0};
    listing_skip = strlen(dir) + 1;
    assert_int_equal(nftw(dir, file_one, 64, FTW_PHYS), 0);
    if (listing_v.n)
        qsort(listing_v.v, listing_v.n, sizeof(char *), cmp_str);
    sp_buf b = SP_BUF_INIT;
    sp_buf_add(&b, "", 0);
    for (size_t i = 0; i < listing_v.n; i++)
        sp_buf_adds(&b, listing_v.v[i]);
    sp_strv_dispose(&listing_v);
    return sp_buf_steal(&b);
}

/* Lines of a file, sorted, as one string. */
static char *sorted_lines(const char *dir, const char *rel)
{
    size_t len = 0;
    char *c = tu_read(dir, rel, &len);
    assert_non_null(c);
    sp_strv v = {NULL, 0, 0};
    for (char *line = strtok(c, "\n"); line; line = strtok(NULL, "\n"))
        sp_strv_push(&v, sp_xstrdup(line));
    if (v.n)
        qsort(v.v, v.n, sizeof(char *), cmp_str);
    sp_buf b = SP_BUF_INIT;
    sp_buf_add(&b, "", 0);
    for (size_t i = 0; i < v.n; i++)
        sp_buf_printf(&b, "%s\n", v.v[i]);
    sp_strv_dispose(&v);
    free(c);
    return sp_buf_steal(&b);
}

/* Hydrate f->src with mount options `opts` into a fresh folder `ws` below
 * f->root; the files it got (file_list). */
static char *hydrate_files(struct fx *f, const char *ws, const char *opts)
{
    char spec[4096];
    /* secrets=keep: git's listing has the .env this test ignores or not. */
    snprintf(spec, sizeof(spec), "src=%s,secrets=keep,%s", f->src, opts);
    tu_mkdir(f->root, ws);
    char *dir = tu_join(f->root, ws);
    sp_mount *m = NULL;
    OK(sp_mount_spec_parse(&m, spec, &e_));
    OK(hydrate(NULL, dir, m, 1, NULL, &e_));
    sp_mount_free(m);
    char *got = file_list(dir);
    free(dir);
    return got;
}

/* The gitignore option copies exactly what git does not ignore: compared
 * with `git ls-files --others --exclude-standard` on a tree built from
 * gitignore(5)'s rules. */
static void test_gitignore_matches_git(void **state)
{
    struct fx *f = *state;
    if (!tu_have_git()) {
        print_message("note: git is not installed; skipped\n");
        return;
    }
    const char *s = f->src;
    assert_int_equal(tu_git_in(s, NULL, "init", "-q", NULL, NULL), 0);
    tu_write(s, ".gitignore",
             "# comment\n"
             "*.log\n"
             "!keep.log\n"
             "/build/\n"
             "doc/*.txt\n"
             "tmp/\n"
             "**/cache\n"
             "secret?.env\n"
             "abc/**\n"
             "!abc/keep\n"
             "logs/\n"
             "!logs/important\n"
             "\\#hash\n"
             "/*.md\n"
             "trail\\ \n"
             "dirfile/\n",
             0644);
    tu_write(s, ".git/info/exclude", "*.bak\n", 0644);
    static const char *const files[] = {
        "a.log",
        "keep.log",
        "sub/keep.log",
        "build/out.o",
        "src/build/x.c",
        "doc/a.txt",
        "doc/sub/b.txt",
        "tmp/t",
        "a/tmp",
        "x/tmp/y",
        "cache",
        "deep/er/cache/c",
        "secret1.env",
        "secret12.env",
        "abc/one",
        "abc/keep",
        "abc/d/two",
        "logs/important",
        "logs/other",
        "#hash",
        "hash",
        "README.md",
        "docs/x.md",
        "trail ",
        "trail",
        "dirfile",
        "z.bak",
        "sub/z.bak",
        "sub/important.log",
        "sub/local.txt",
        "sub/n/local.txt",
        "sub/m.o",
        "sub/deeper/x.o",
        "sub/deeper/y.o",
        "main.c",
        ".env",
        "sub/.hidden",
    };
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char *d = tu_join(s, files[i]);
        char *slash = strrchr(d, '/');
        *slash = '\0';
        char *cmd_dir = d;
        /* make the parents */
        for (char *p = cmd_dir + strlen(s) + 1; (p = strchr(p, '/')); p++) {
            *p = '\0';
            mkdir(cmd_dir, 0755);
            *p = '/';
        }
        mkdir(cmd_dir, 0755);
        free(d);
        tu_write(s, files[i], "x\n", 0644);
    }
    tu_write(s, "sub/.gitignore", "!important.log\n/local.txt\n*.o\n", 0644);
    tu_write(s, "sub/deeper/.gitignore", "!x.o\n", 0644);
    tu_symlink("main.c", s, "link.log");
    tu_symlink("main.c", s, "link.c");

    char *out = tu_join(f->root, "git.out");
    assert_int_equal(tu_git_in(s, out, "ls-files", "--others", "--exclude-standard", NULL), 0);
    char *want = sorted_lines(f->root, "git.out");
    free(out);
    /* The tree really exercises both sides. */
    assert_non_null(strstr(want, "sub/deeper/x.o\n"));
    assert_null(strstr(want, "sub/deeper/y.o\n"));

    char *got = hydrate_files(f, "ws1", "gitignore");
    assert_string_equal(got, want);
    /* .git itself comes along (for `git diff` in the sandbox). */
    assert_true(tu_exists(f->root, "ws1/.git/HEAD"));
    free(got);
    free(want);

    /* exclude first, then git's rules, then include: the include cannot
     * bring back what git ignores (link.log is *.log too). */
    got = hydrate_files(f, "ws2", "gitignore=true,include=*.log,exclude=sub");
    assert_string_equal(got, "keep.log\n");
    free(got);

    /* gitignore=false is the default: everything comes. */
    got = hydrate_files(f, "ws3", "gitignore=false");
    assert_non_null(strstr(got, "build/out.o\n"));
    assert_non_null(strstr(got, "sub/deeper/y.o\n"));
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_copy_keeps_metadata, setup, teardown),
        cmocka_unit_test_setup_teardown(test_globs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_should_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mount_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dst_escape, setup, teardown),
        cmocka_unit_test_setup_teardown(test_outside_allowed_roots, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_mount, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlink_outside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cap_exceeded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unreadable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vanished_folder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_overlap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_existing_workspace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_rollback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_special_and_hardlinks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ten_thousand_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sparse_gib, setup, teardown),
        cmocka_unit_test_setup_teardown(test_workspace_inside_mount, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cross_device, setup, teardown),
        cmocka_unit_test(test_spec_parse),
        cmocka_unit_test_setup_teardown(test_spec_hydrates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_secrets_left_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_root, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gitignore_matches_git, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
