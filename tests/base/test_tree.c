/* The fd-based tree walker and remover (overlay/base/fdtree.h): order,
 * depth without limits, the fd budget, modes, and a workload that swaps
 * folders for symlinks or moves them while we work. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "testutil.h"
#include "fdtree.h"

/* fd budget of tree.c plus its one transient fd */
#define MAX_TREE_FDS 65

static int dir_fd(const char *dir)
{
    int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        fail_msg("open %s: %s", dir, strerror(errno));
    return fd;
}

static double secs_since(int64_t t0)
{
    return (double)(sp_now_ms() - t0) / 1000.0;
}

/* Each test: a scratch root with an fd on it, a folder outside it holding
 * a canary, and no fd left open at the end. */
typedef struct fx {
    char *root, *outside;
    int dfd;
    int fds0; /* open before the test, dfd included */
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof(*f));
    f->root = tu_mkdtemp();
    f->outside = tu_mkdtemp();
    tu_write(f->outside, "out-canary", "secret", 0644);
    f->dfd = dir_fd(f->root);
    f->fds0 = tu_count_fds();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    assert_int_equal(tu_count_fds(), f->fds0);
    close(f->dfd);
    tu_rmtree(f->root);
    tu_rmtree(f->outside);
    free(f->root);
    free(f->outside);
    free(f);
    return 0;
}

#define FIXTURE                                                                                    \
    fx *f = *state;                                                                                \
    const char *root = f->root, *outside = f->outside;                                             \
    int dfd = f->dfd;                                                                              \
    (void)outside

/* ------------------------------------------------ what a walk reports -- */

typedef struct event {
    int when;
    char *path;
    unsigned depth;
    bool dir, link, fd_ok;
} event;

typedef struct rec {
    event *v;
    size_t n, cap;
    const char *skip;   /* PRE of this path returns SP_TREE_SKIP */
    const char *stop;   /* PRE of this path stops the walk with -42 */
    bool count_only;    /* keep no events (deep walks) */
    size_t max_path;    /* longest path seen */
    unsigned max_depth; /* deepest entry seen */
    int max_fds;        /* most fds seen open (sampled) */
    size_t entries;     /* PREs */
} rec;

static void rec_free(rec *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->v[i].path);
    free(r->v);
    memset(r, 0, sizeof(*r));
}

/* Checks every entry against the contract, then records it. */
static int record(const sp_tree_entry *e, int when, void *ctx, sp_error **err)
{
    rec *r = ctx;
    struct stat now;
    assert_int_equal(fstatat(e->parent_fd, e->name, &now, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(now.st_ino == e->st->st_ino && now.st_dev == e->st->st_dev);
    if (S_ISDIR(e->st->st_mode)) {
        struct stat fst;
        assert_true(e->fd >= 0);
        assert_int_equal(fstat(e->fd, &fst), 0);
        assert_true(fst.st_ino == e->st->st_ino && fst.st_dev == e->st->st_dev);
    } else {
        assert_int_equal(e->fd, -1);
        assert_int_equal(when, SP_TREE_PRE);
    }
    if (when == SP_TREE_PRE) {
        r->entries++;
        size_t len = strlen(e->path);
        if (len > r->max_path)
            r->max_path = len;
        if (e->depth > r->max_depth)
            r->max_depth = e->depth;
        if (r->entries % 97 == 0) {
            int fds = tu_count_fds();
            if (fds > r->max_fds)
                r->max_fds = fds;
        }
    }
    if (!r->count_only) {
        if (r->n == r->cap) {
            r->cap = r->cap ? r->cap * 2 : 32;
            r->v = realloc(r->v, r->cap * sizeof(*r->v));
        }
        r->v[r->n++] = (event){
            when,      strdup(e->path), e->depth, S_ISDIR(e->st->st_mode), S_ISLNK(e->st->st_mode),
            e->fd >= 0};
    }
    if (when == SP_TREE_PRE && r->skip && strcmp(e->path, r->skip) == 0)
        return SP_TREE_SKIP;
    if (when == SP_TREE_PRE && r->stop && strcmp(e->path, r->stop) == 0)
        return sp_err_set(err, -42, 0, "stopped at %s", e->path);
    return 0;
}

/* For child processes, where cmocka's asserts cannot run: counts PREs. */
static int count(const sp_tree_entry *e, int when, void *ctx, sp_error **err)
{
    (void)e;
    (void)err;
    *(size_t *)ctx += when == SP_TREE_PRE;
    return 0;
}

static ssize_t find(const rec *r, int when, const char *path)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].when == when && strcmp(r->v[i].path, path) == 0)
            return (ssize_t)i;
    return -1;
}

static bool seen_below(const rec *r, const char *dir)
{
    size_t n = strlen(dir);
    for (size_t i = 0; i < r->n; i++)
        if (strncmp(r->v[i].path, dir, n) == 0 && r->v[i].path[n] == '/')
            return true;
    return false;
}

/* t/{a/{x, y/{z}}, b, l -> outside} */
static void make_small(const char *root, const char *outside)
{
    tu_mkdir(root, "t");
    tu_mkdir(root, "t/a");
    tu_write(root, "t/a/x", "x", 0644);
    tu_mkdir(root, "t/a/y");
    tu_write(root, "t/a/y/z", "z", 0644);
    tu_write(root, "t/b", "b", 0644);
    tu_symlink(outside, root, "t/l");
}

static void test_walk_order(void **state)
{
    FIXTURE;
    make_small(root, outside);
    sp_error *err = NULL;

    rec r = {0};
    assert_int_equal(sp_tree_walk(dfd, "t", record, &r, &err), 0);
    assert_null(err);
    const char *pres[] = {"t", "t/a", "t/a/x", "t/a/y", "t/a/y/z", "t/b", "t/l"};
    const char *dirs[] = {"t", "t/a", "t/a/y"};
    assert_int_equal(r.n, 7 + 3);
    assert_int_equal(find(&r, SP_TREE_PRE, "t"), 0);
    assert_int_equal(find(&r, SP_TREE_POST, "t"), (ssize_t)r.n - 1);
    for (size_t i = 0; i < 7; i++) {
        ssize_t at = find(&r, SP_TREE_PRE, pres[i]);
        assert_true(at >= 0);
        const char *slash = strrchr(pres[i], '/');
        unsigned depth = 0;
        for (const char *p = pres[i]; *p; p++)
            depth += *p == '/';
        assert_int_equal(r.v[at].depth, depth);
        if (!slash)
            continue;
        /* After its folder's PRE, before its folder's POST. */
        char *parent = strndup(pres[i], (size_t)(slash - pres[i]));
        assert_true(find(&r, SP_TREE_PRE, parent) < at);
        assert_true(find(&r, SP_TREE_POST, parent) > at);
        free(parent);
    }
    for (size_t i = 0; i < 3; i++) {
        ssize_t pre = find(&r, SP_TREE_PRE, dirs[i]), post = find(&r, SP_TREE_POST, dirs[i]);
        assert_true(pre >= 0 && post > pre && r.v[pre].dir && r.v[pre].fd_ok && r.v[post].fd_ok);
    }
    /* The symlink is an entry, never entered. */
    ssize_t l = find(&r, SP_TREE_PRE, "t/l");
    assert_true(r.v[l].link && !r.v[l].fd_ok);
    assert_false(seen_below(&r, "t/l"));
    rec_free(&r);

    /* SKIP: nothing below a, and no POST for it. */
    r.skip = "t/a";
    assert_int_equal(sp_tree_walk(dfd, "t", record, &r, &err), 0);
    assert_false(seen_below(&r, "t/a"));
    assert_int_equal(find(&r, SP_TREE_POST, "t/a"), -1);
    assert_true(find(&r, SP_TREE_PRE, "t/b") >= 0);
    rec_free(&r);

    /* A callback's error stops the walk at once, with its code and message. */
    r.stop = "t/a/y";
    assert_int_equal(sp_tree_walk(dfd, "t", record, &r, &err), -42);
    assert_string_equal(err->message, "stopped at t/a/y");
    sp_error_free(err);
    err = NULL;
    assert_string_equal(r.v[r.n - 1].path, "t/a/y");
    rec_free(&r);

    /* "." walks dirfd itself: its path is "", its entries have no prefix. */
    char *t = tu_join(root, "t");
    int tfd = dir_fd(t);
    assert_int_equal(sp_tree_walk(tfd, ".", record, &r, &err), 0);
    assert_string_equal(r.v[0].path, "");
    assert_true(find(&r, SP_TREE_PRE, "a/y/z") >= 0);
    assert_int_equal(find(&r, SP_TREE_POST, ""), (ssize_t)r.n - 1);
    rec_free(&r);
    /* A file or a symlink as the start: one PRE. */
    assert_int_equal(sp_tree_walk(tfd, "l", record, &r, &err), 0);
    assert_int_equal(r.n, 1);
    assert_true(r.v[0].link);
    rec_free(&r);
    close(tfd);
    free(t);
}

static void test_bad_and_missing_names(void **state)
{
    FIXTURE;
    tu_mkdir(root, "a");
    sp_error *err = NULL;
    rec r = {0};
    const char *bad[] = {"", "..", "a/", "a/b", "/a"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(sp_tree_walk(dfd, bad[i], record, &r, &err), SP_EINVAL);
        sp_error_free(err);
        err = NULL;
        assert_int_equal(sp_tree_remove(dfd, bad[i], 0, &err), SP_EINVAL);
        assert_non_null(strstr(err->message, "not one path component"));
        sp_error_free(err);
        err = NULL;
    }
    assert_int_equal(sp_tree_walk(dfd, "a", NULL, NULL, NULL), SP_EINVAL);
    assert_int_equal(r.n, 0);
    assert_true(tu_exists(root, "a"));
    /* Missing: a walk says so; a removal has nothing to do. */
    assert_int_equal(sp_tree_walk(dfd, "nope", record, &r, &err), SP_ENOTFOUND);
    assert_string_equal(err->message, "stat: nope: no such file or folder");
    sp_error_free(err);
    err = NULL;
    assert_int_equal(sp_tree_remove(dfd, "nope", 0, &err), 0);
    assert_null(err);
    assert_int_equal(sp_tree_remove(dfd, "nope", SP_TREE_KEEP_ROOT, NULL), 0);
}

/* ------------------------------------------------------------- depth -- */

static void test_remove_deep_chain(void **state)
{
    FIXTURE;
    enum { DEPTH = 10000 };
    tu_mkdeep(root, "deep", "d", DEPTH);
    sp_error *err = NULL;

    rec r = {.count_only = true};
    int64_t t0 = sp_now_ms();
    assert_int_equal(sp_tree_walk(dfd, "deep", record, &r, &err), 0);
    double walk_s = secs_since(t0);
    assert_int_equal(r.entries, 1 + DEPTH + DEPTH);
    assert_int_equal(r.max_depth, DEPTH);
    assert_true(r.max_fds <= f->fds0 + MAX_TREE_FDS);

    t0 = sp_now_ms();
    assert_int_equal(sp_tree_remove(dfd, "deep", 0, &err), 0);
    double rm_s = secs_since(t0);
    assert_null(err);
    assert_false(tu_exists(root, "deep"));
    print_message(
        "[   INFO   ] %d-deep chain: walk %.2f s, remove %.2f s, most fds %d (%d before)\n", DEPTH,
        walk_s, rm_s, r.max_fds, f->fds0);
}

static void test_remove_long_paths(void **state)
{
    FIXTURE;
    char seg[251];
    memset(seg, 'n', 250);
    seg[250] = '\0';
    unsigned depth = 3 * PATH_MAX / 251 + 2;
    tu_mkdeep(root, "long", seg, depth);
    sp_error *err = NULL;
    rec r = {.count_only = true};
    assert_int_equal(sp_tree_walk(dfd, "long", record, &r, &err), 0);
    assert_true(r.max_path > 3 * PATH_MAX);
    assert_int_equal(r.max_path, 4 + 251 * depth); /* long/seg/.../seg */
    assert_int_equal(sp_tree_remove(dfd, "long", 0, &err), 0);
    assert_false(tu_exists(root, "long"));
}

/* With RLIMIT_NOFILE at 32 the budget of 64 fds cannot be had: the walker
 * and the remover hold fewer. */
static void test_low_fd_limit(void **state)
{
    FIXTURE;
    enum { DEPTH = 2000 };
    tu_mkdeep(root, "deep", "d", DEPTH);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = {32, 32};
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            _exit(10);
        size_t n = 0;
        if (sp_tree_walk(dfd, "deep", count, &n, NULL) != 0 || n != 1 + 2 * DEPTH)
            _exit(11);
        sp_error *err = NULL;
        if (sp_tree_remove(dfd, "deep", 0, &err) != 0) {
            fprintf(stderr, "remove: %s\n", err ? err->message : "?");
            _exit(12);
        }
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_false(tu_exists(root, "deep"));
}

/* Every return path closes what it opened: a walk stopped deep down, one
 * that fails, removals. */
static void test_no_fd_leak(void **state)
{
    FIXTURE;
    tu_mkdeep(root, "deep", "d", 500);
    sp_error *err = NULL;
    rec r = {.count_only = true};
    char stop[4 + 2 * 300 + 1] = "deep";
    for (int i = 0; i < 300; i++)
        memcpy(stop + 4 + 2 * i, "/d", 3);
    r.stop = stop;
    assert_int_equal(sp_tree_walk(dfd, "deep", record, &r, &err), -42);
    sp_error_free(err);
    err = NULL;
    assert_int_equal(tu_count_fds(), f->fds0);
    assert_int_equal(sp_tree_walk(dfd, "gone", record, &r, &err), SP_ENOTFOUND);
    sp_error_free(err);
    err = NULL;
    assert_int_equal(sp_tree_remove(dfd, "deep", SP_TREE_KEEP_ROOT, &err), 0);
    assert_int_equal(sp_tree_remove(dfd, "deep", 0, &err), 0);
}

/* ------------------------------------------------------ modes, flags -- */

/* t/{f 0000, a 0000/{b 0500/{c 0100/{g}}, h}, k 0300/{m}} */
static int make_locked(int dfd, const char *top, mode_t top_mode)
{
    int ok = mkdirat(dfd, top, 0755) == 0;
    int t = openat(dfd, top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ok = ok && t >= 0 && mkdirat(t, "a", 0755) == 0 && mkdirat(t, "a/b", 0755) == 0 &&
         mkdirat(t, "a/b/c", 0755) == 0 && mkdirat(t, "k", 0755) == 0;
    const char *files[] = {"f", "a/h", "a/b/c/g", "k/m"};
    for (size_t i = 0; ok && i < 4; i++) {
        int fd = openat(t, files[i], O_WRONLY | O_CREAT | O_CLOEXEC, 0);
        ok = fd >= 0;
        close(fd);
    }
    ok = ok && fchmodat(t, "a/b/c", 0100, 0) == 0 && fchmodat(t, "a/b", 0500, 0) == 0 &&
         fchmodat(t, "a", 0, 0) == 0 && fchmodat(t, "k", 0300, 0) == 0 && fchmod(t, top_mode) == 0;
    close(t);
    return ok ? 0 : -1;
}

/* Folders of mode 0000, 0100, 0300, 0500 go; a kept start gets its mode
 * back. Returns 0 or the step that failed (run as root and as nobody). */
static int locked_round(int dfd)
{
    if (make_locked(dfd, "t", 0755) < 0 || make_locked(dfd, "kept", 0500) < 0)
        return 1;
    if (sp_tree_remove(dfd, "t", 0, NULL) != 0 ||
        faccessat(dfd, "t", F_OK, AT_SYMLINK_NOFOLLOW) == 0)
        return 2;
    if (sp_tree_remove(dfd, "kept", SP_TREE_KEEP_ROOT, NULL) != 0)
        return 3;
    struct stat st;
    if (fstatat(dfd, "kept", &st, AT_SYMLINK_NOFOLLOW) < 0 || (st.st_mode & 07777) != 0500 ||
        st.st_nlink != 2)
        return 4;
    return unlinkat(dfd, "kept", AT_REMOVEDIR) == 0 ? 0 : 5;
}

static void test_remove_locked_modes(void **state)
{
    FIXTURE;
    assert_int_equal(locked_round(dfd), 0);
    if (geteuid() == 0) {
        /* As root every mode is open to us; as nobody the chmods matter. */
        assert_int_equal(chmod(root, 0755), 0);
        assert_int_equal(mkdirat(dfd, "nobody", 0700), 0);
        assert_int_equal(fchownat(dfd, "nobody", 65534, 65534, 0), 0);
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
                _exit(20);
            int nfd = openat(dfd, "nobody", O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (nfd < 0)
                _exit(21);
            int r = locked_round(nfd);
            if (r)
                _exit(r);
            /* A walk does not change modes: a folder it may not read is an error. */
            sp_error *err = NULL;
            if (make_locked(nfd, "w", 0755) < 0)
                _exit(22);
            size_t n = 0;
            r = sp_tree_walk(nfd, "w", count, &n, &err);
            if (r != SP_EDENIED || !strstr(err->message, "open folder: w/"))
                _exit(23);
            _exit(sp_tree_remove(nfd, "w", 0, NULL) == 0 ? 0 : 24);
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
}

static void test_keep_root_and_links(void **state)
{
    FIXTURE;
    make_small(root, outside);
    sp_error *err = NULL;
    struct stat before, after;
    assert_int_equal(fstatat(dfd, "t", &before, 0), 0);
    assert_int_equal(sp_tree_remove(dfd, "t", SP_TREE_KEEP_ROOT, &err), 0);
    assert_int_equal(fstatat(dfd, "t", &after, 0), 0);
    assert_true(before.st_ino == after.st_ino && after.st_nlink == 2);
    assert_true(tu_exists(outside, "out-canary"));

    /* "." keeps the folder too, KEEP_ROOT or not. */
    make_small(root, outside);
    char *t = tu_join(root, "t");
    int tfd = dir_fd(t);
    assert_int_equal(sp_tree_remove(tfd, ".", 0, &err), 0);
    assert_int_equal(fstatat(dfd, "t", &after, 0), 0);
    assert_int_equal(after.st_nlink, 2);
    assert_false(tu_exists(root, "t/a"));
    close(tfd);
    free(t);

    /* A kept start must be a folder. */
    tu_write(root, "file", "x", 0644);
    assert_int_equal(sp_tree_remove(dfd, "file", SP_TREE_KEEP_ROOT, &err), SP_EINVAL);
    assert_string_equal(err->message, "delete: file: not a folder");
    sp_error_free(err);
    err = NULL;
    assert_true(tu_exists(root, "file"));

    /* A symlink as the start is unlinked, its target untouched. */
    tu_symlink(outside, root, "link");
    assert_int_equal(sp_tree_remove(dfd, "link", 0, &err), 0);
    assert_false(tu_exists(root, "link"));
    assert_true(tu_exists(outside, "out-canary"));
    assert_int_equal(sp_tree_remove(dfd, "t", 0, &err), 0);
    assert_int_equal(sp_tree_remove(dfd, "file", 0, &err), 0);
    assert_false(tu_exists(root, "t") || tu_exists(root, "file"));
}

/* -------------------------------------------- a folder that keeps growing -- */

static void test_remove_retries_growing_folder(void **state)
{
    FIXTURE;
    sp_error *err = NULL;
    sp_tree_test_before_rmdir = tu_grow_hook;

    /* Gains entries twice: read again and emptied again. */
    tu_mkdir(root, "t");
    tu_mkdir(root, "t/grow");
    tu_write(root, "t/grow/f", "f", 0644);
    tu_grow_left = 2;
    assert_int_equal(sp_tree_remove(dfd, "t", 0, &err), 0);
    assert_false(tu_exists(root, "t"));

    /* Gains entries every time: an error naming it, and everything else
     * still goes (best effort). */
    tu_mkdir(root, "t");
    tu_mkdir(root, "t/a");
    tu_write(root, "t/a/f", "f", 0644);
    tu_mkdir(root, "t/grow");
    tu_mkdeep(root, "t/z", "d", 3);
    tu_grow_left = 1000;
    assert_int_equal(sp_tree_remove(dfd, "t", 0, &err), SP_ERROR);
    assert_int_equal(err->sys_errno, ENOTEMPTY);
    assert_string_equal(err->message, "delete: t/grow: Directory not empty");
    sp_error_free(err);
    err = NULL;
    assert_true(tu_exists(root, "t/grow"));
    assert_false(tu_exists(root, "t/a") || tu_exists(root, "t/z"));

    sp_tree_test_before_rmdir = NULL;
    assert_int_equal(sp_tree_remove(dfd, "t", 0, &err), 0);
}

/* ------------------------------------------------------------- races -- */

#define OUT_FILES 16

/* Exchanges t/sub (a folder) and t/link (a symlink to outside) as fast as
 * it can until killed. Says on `ready` once it runs. */
static void racer(int dfd, int ready)
{
    int tfd = openat(dfd, "t", O_PATH | O_DIRECTORY | O_CLOEXEC);
    (void)!write(ready, "r", 1);
    for (;;)
        (void)renameat2(tfd, "sub", tfd, "link", RENAME_EXCHANGE);
}

static void make_race_tree(const char *root, const char *outside)
{
    tu_mkdir(root, "t");
    tu_mkdir(root, "t/sub");
    for (int i = 0; i < 8; i++) {
        char name[32];
        snprintf(name, sizeof(name), "t/sub/s%d", i);
        tu_write(root, name, "s", 0644);
    }
    tu_mkdeep(root, "t/sub/n", "d", 4);
    tu_symlink(outside, root, "t/link");
    tu_mkdir(root, "t/z");
    tu_write(root, "t/z/f", "f", 0644);
}

typedef struct outside_ids {
    struct stat st[OUT_FILES + 1];
    int hits;
} outside_ids;

/* A walk must never reach into the outside folder. */
static int never_outside(const sp_tree_entry *e, int when, void *ctx, sp_error **err)
{
    outside_ids *o = ctx;
    for (int i = 0; i <= OUT_FILES; i++)
        if (e->st->st_dev == o->st[i].st_dev && e->st->st_ino == o->st[i].st_ino)
            o->hits++;
    if (strstr(e->name, "out-"))
        o->hits++;
    return 0;
}

static void test_race_exchange(void **state)
{
    FIXTURE;
    outside_ids o = {0};
    assert_int_equal(stat(outside, &o.st[OUT_FILES]), 0);
    for (int i = 0; i < OUT_FILES; i++) {
        char name[32];
        snprintf(name, sizeof(name), "out-%d", i);
        tu_write(outside, name, "precious", 0600);
        char *p = tu_join(outside, name);
        assert_int_equal(stat(p, &o.st[i]), 0);
        free(p);
    }
    int64_t t0 = sp_now_ms();
    int rounds = 0, walk_errors = 0, remove_errors = 0;
    for (; rounds < 200 && sp_now_ms() - t0 < 30000; rounds++) {
        make_race_tree(root, outside);
        int pipefd[2];
        assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            racer(dfd, pipefd[1]);
        char c;
        assert_int_equal(read(pipefd[0], &c, 1), 1);
        close(pipefd[0]);
        close(pipefd[1]);
        sp_error *err = NULL;
        for (int i = 0; i < 3; i++) {
            if (sp_tree_walk(dfd, "t", never_outside, &o, &err) != 0 && walk_errors++ < 3)
                print_message("[   INFO   ] round %d, walk: %s\n", rounds, err->message);
            sp_error_free(err);
            err = NULL;
        }
        if (sp_tree_remove(dfd, "t", 0, &err) != 0 && remove_errors++ < 3)
            print_message("[   INFO   ] round %d, remove: %s\n", rounds, err->message);
        sp_error_free(err);
        err = NULL;
        kill(pid, SIGKILL);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        assert_int_equal(o.hits, 0);
        for (int i = 0; i < OUT_FILES; i++) {
            char name[32];
            snprintf(name, sizeof(name), "out-%d", i);
            char *s = tu_read(outside, name, NULL);
            if (!s || strcmp(s, "precious") != 0)
                fail_msg("round %d: outside file %s lost", rounds, name);
            free(s);
        }
        struct stat ost;
        assert_int_equal(stat(outside, &ost), 0);
        assert_int_equal(ost.st_mode, o.st[OUT_FILES].st_mode);
        /* With the racer gone, whatever is left goes. */
        assert_int_equal(sp_tree_remove(dfd, "t", 0, &err), 0);
        assert_false(tu_exists(root, "t"));
    }
    print_message("[   INFO   ] %d rounds in %.1f s; walks stopped by a change: %d, removals "
                  "that reported one: %d\n",
                  rounds, secs_since(t0), walk_errors, remove_errors);
    assert_true(rounds >= 20);
}

/* The workload moves a folder high up the tree, and puts a decoy in its
 * place, while the walk is deep down with the fds of those levels given
 * up: the walk must say so, never enter the decoy. */
typedef struct mover {
    rec r;
    const char *root;
    bool moved, saw_decoy;
} mover;

static int move_when_deep(const sp_tree_entry *e, int when, void *ctx, sp_error **err)
{
    mover *m = ctx;
    if (strcmp(e->name, "canary") == 0)
        m->saw_decoy = true;
    if (!m->moved && e->depth == 300) {
        char *t = tu_join(m->root, "t");
        char *five = tu_join(t, "d/d/d/d/d"), *away = tu_join(t, "moved");
        assert_int_equal(rename(five, away), 0);
        assert_int_equal(mkdir(five, 0755), 0);
        tu_write(five, "canary", "decoy", 0644);
        m->moved = true;
        free(t);
        free(five);
        free(away);
    }
    return record(e, when, &m->r, err);
}

static void test_walk_detects_moved_folder(void **state)
{
    FIXTURE;
    tu_mkdeep(root, "t", "d", 400);
    sp_error *err = NULL;
    mover m = {.r = {.count_only = true}, .root = root};
    assert_int_equal(sp_tree_walk(dfd, "t", move_when_deep, &m, &err), SP_ERROR);
    assert_true(m.moved);
    assert_false(m.saw_decoy);
    assert_string_equal(err->message, "folder changed during the walk: t/d/d/d/d/d");
    sp_error_free(err);
    err = NULL;
    assert_int_equal(tu_count_fds(), f->fds0);
    /* The decoy and what was moved are untouched. */
    assert_true(tu_exists(root, "t/d/d/d/d/d/canary"));
    assert_true(tu_exists(root, "t/moved/d/d/f"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_walk_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_and_missing_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_deep_chain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_long_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_low_fd_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_fd_leak, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_locked_modes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep_root_and_links, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_retries_growing_folder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_race_exchange, setup, teardown),
        cmocka_unit_test_setup_teardown(test_walk_detects_moved_folder, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
