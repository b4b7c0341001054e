/* Faults: sandpod killed with SIGKILL at many moments of a large write, an
 * apply_patch, a snapshot and a restore; and 100 tool calls racing on one
 * file of one sandbox (issue 8).
 *
 * The kill tests measure how long the operation takes when left alone and
 * spread the kill times over that span, from at once and 20 microseconds
 * to 95% of it; after each kill the workspace and the store must be whole
 * (a file old or new, never a mix; no temp file where the fs tools list;
 * `git fsck --strict` passes) and the operation must succeed when run
 * again. Victims: a forked child calling sp_fs_write_bytes() (24 MiB, over
 * the CLI's 4 MiB limit) and the built CLI (`fs write`, `fs patch`,
 * `snapshot`, `restore`), a separate process killed wherever it is.
 * tests/snapshot/test_snapshot.c already kills library snapshot/restore
 * loops; these add the CLI, writes and patches, restores killed and run
 * again between two very different snapshots, and restores of every
 * snapshot taken so far (each round in the long variant, at the end
 * otherwise; fsck after each kill reads every object they need).
 *
 * Modes (argv[1]): none = the kill tests, "parallel" = the concurrent
 * tool calls on a real sandbox (skips without Podman), "long" = the kill
 * tests with 60 kills each instead of 10, only under SANDPOD_LONG=1
 * (skips otherwise). SP_TEST_FILTER=PATTERN runs only matching tests.
 *
 * A forked child only ever calls the library or execv() and always ends
 * in _exit(): it never returns into cmocka. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

#include "sandpod/fs.h"
#include "sandpod/sandbox.h"
#include "sandpod/snapshot.h"
#include "testutil.h"

#ifndef SANDPOD_CLI
#error "SANDPOD_CLI (the path of the built sandpod binary) must be defined"
#endif

#define OK(call)                                                                                   \
    do {                                                                                           \
        sp_error *err_ = NULL;                                                                     \
        int r_ = (call);                                                                           \
        if (r_ != 0)                                                                               \
            fail_msg("%s: %d %s", #call, r_, err_ ? err_->message : "");                           \
        sp_error_free(err_);                                                                       \
    } while (0)

static bool long_mode;

/* Kills per operation. */
static int kills(void)
{
    return long_mode ? 60 : 10;
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The k-th of n kill delays over an operation that takes `dur_us`: the
 * first at once, the second after a few microseconds, the rest spread
 * quadratically (more of them early, where setup happens) up to 95%. */
static int64_t kill_delay(int k, int n, int64_t dur_us)
{
    if (k == 0)
        return 0;
    if (k == 1)
        return 20;
    double f = (double)k / (double)(n - 1);
    return (int64_t)((double)dur_us * 0.95 * f * f);
}

static void sleep_us(int64_t us)
{
    if (us <= 0)
        return;
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* --------------------------------------------------------- processes -- */

/* Start the CLI with argv (argv[0] is ignored), stdin from `in` (NULL =
 * /dev/null), stdout and stderr to /dev/null. */
static pid_t spawn_cli_in(const char *const *argv, const char *in)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        int ifd = in ? open(in, O_RDONLY | O_CLOEXEC) : null;
        if (null < 0 || ifd < 0)
            _exit(126);
        dup2(ifd, 0);
        if (!getenv("SP_TEST_VERBOSE")) {
            dup2(null, 1);
            dup2(null, 2);
        }
        execv(SANDPOD_CLI, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static pid_t spawn_cli(const char *const *argv)
{
    return spawn_cli_in(argv, NULL);
}

static int wait_status(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            fail_msg("waitpid: %s", strerror(errno));
    return st;
}

static int run_cli(const char *const *argv)
{
    int st = wait_status(spawn_cli(argv));
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ---------------------------------------------------------- manifests -- */

static uint64_t fnv(const void *data, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

typedef struct strbuf {
    char *data;
    size_t len, cap;
} strbuf;

static void sb_addf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_addf(strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    assert_true(n >= 0);
    if (b->len + (size_t)n + 1 > b->cap) {
        b->cap = (b->len + (size_t)n + 1) * 2;
        b->data = realloc(b->data, b->cap);
        assert_non_null(b->data);
    }
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static int name_cmp(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* One line per entry below `dir` (sorted, symlinks not followed): path,
 * type, permission bits, size and a hash of the content or link target. */
static void manifest_walk(strbuf *b, const char *dir, const char *rel)
{
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, name_cmp);
    if (n < 0)
        fail_msg("scandir %s: %s", dir, strerror(errno));
    for (int i = 0; i < n; i++) {
        const char *nm = names[i]->d_name;
        if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0) {
            free(names[i]);
            continue;
        }
        char *full = tu_join(dir, nm);
        char *r = *rel ? tu_join(rel, nm) : strdup(nm);
        struct stat st;
        if (lstat(full, &st) < 0)
            fail_msg("lstat %s: %s", full, strerror(errno));
        if (S_ISDIR(st.st_mode)) {
            sb_addf(b, "%s d %o\n", r, (unsigned)(st.st_mode & 07777));
            manifest_walk(b, full, r);
        } else if (S_ISLNK(st.st_mode)) {
            char t[4096];
            ssize_t k = readlink(full, t, sizeof(t));
            assert_true(k >= 0);
            sb_addf(b, "%s l %016llx\n", r, (unsigned long long)fnv(t, (size_t)k));
        } else if (S_ISREG(st.st_mode)) {
            size_t len = 0;
            char *c = tu_read(dir, nm, &len);
            assert_non_null(c);
            sb_addf(b, "%s f %o %zu %016llx\n", r, (unsigned)(st.st_mode & 07777), len,
                    (unsigned long long)fnv(c, len));
            free(c);
        } else {
            sb_addf(b, "%s other %o\n", r, (unsigned)(st.st_mode & 07777));
        }
        free(full);
        free(r);
        free(names[i]);
    }
    free(names);
}

static char *manifest(const char *dir)
{
    strbuf b = {0};
    sb_addf(&b, "%s", "");
    manifest_walk(&b, dir, "");
    return b.data;
}

/* Fail with the first differing line of two manifests. */
static void assert_same_tree(const char *want, const char *got, const char *what)
{
    if (strcmp(want, got) == 0)
        return;
    const char *w = want, *g = got;
    while (*w && *w == *g) {
        w++;
        g++;
    }
    while (w > want && w[-1] != '\n') {
        w--;
        g--;
    }
    fail_msg("%s: the tree differs at\n  wanted: %.*s\n  got:    %.*s", what, (int)strcspn(w, "\n"),
             w, (int)strcspn(g, "\n"), g);
}

/* No sandpod temp file is visible to the fs tools' list; except one that
 * holds exactly one of the `n` complete contents given: a kill
 * that lands between naming a finished temp file and renaming it (two
 * system calls; Linux has no link-and-replace) leaves the whole new
 * content under a temp name, never a part of it. Such a file is removed
 * after the check; returns how many there were. */
static int assert_no_temp_files_but(const char *root, char *const *complete, const size_t *len,
                                    size_t n)
{
    sp_fs *fs = NULL;
    OK(sp_fs_open(&fs, root, NULL, &err_));
    sp_fs_entries *e = NULL;
    sp_fs_list_opts lo = SP_FS_LIST_OPTS_INIT;
    lo.depth = 64;
    OK(sp_fs_list(&e, fs, ".", &lo, &err_));
    int whole = 0;
    for (size_t i = 0; i < e->n; i++) {
        if (strncmp(e->v[i].name, ".sandpod-", 9) != 0)
            continue;
        size_t got_len = 0;
        char *got = n ? tu_read(root, e->v[i].path, &got_len) : NULL;
        bool ok = false;
        for (size_t k = 0; got && k < n && !ok; k++)
            ok = got_len == len[k] && memcmp(got, complete[k], len[k]) == 0;
        free(got);
        if (!ok)
            fail_msg("a temp file is left in the workspace: %s", e->v[i].path);
        char *p = tu_join(root, e->v[i].path);
        unlink(p);
        free(p);
        whole++;
    }
    sp_fs_entries_free(e);
    sp_fs_free(fs);
    return whole;
}

static void assert_no_temp_files(const char *root)
{
    assert_no_temp_files_but(root, NULL, NULL, 0);
}

/* ----------------------------------------------------------- fixture -- */

struct fx {
    char *dir; /* scratch: ws/ and store/ */
    char *ws;
    char *store;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    f->dir = tu_mkdtemp();
    f->ws = tu_join(f->dir, "ws");
    f->store = tu_join(f->dir, "store");
    if (mkdir(f->ws, 0755) < 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    tu_rmtree(f->dir);
    free(f->dir);
    free(f->ws);
    free(f->store);
    free(f);
    return 0;
}

static uint64_t rng = 1;
static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

/* Thousands of small files in 60 folders, some executable or private, a
 * few symlinks, and a 2 MiB binary file. */
static void build_tree(const char *ws)
{
    for (int d = 0; d < 60; d++) {
        char p[64];
        snprintf(p, sizeof(p), "d%02d", d);
        tu_mkdir(ws, p);
        for (int i = 0; i < 50; i++) {
            snprintf(p, sizeof(p), "d%02d/f%02d.txt", d, i);
            char c[128];
            int n = snprintf(c, sizeof(c), "folder %d file %d, base content\n", d, i);
            tu_write_n(ws, p, c, (size_t)n, i % 9 == 0 ? 0755 : i % 7 == 0 ? 0600 : 0644);
        }
    }
    tu_symlink("d00/f00.txt", ws, "link-in");
    tu_symlink("/etc/passwd", ws, "link-out");
    size_t big = 2u << 20;
    char *data = malloc(big);
    assert_non_null(data);
    for (size_t i = 0; i < big; i++)
        data[i] = (char)(i * 13 + (i >> 9));
    tu_write_n(ws, "blob.bin", data, big, 0644);
    free(data);
}

/* Change a good part of the tree: rewrite files, remove a folder, add a
 * folder of new files, change modes. */
static void churn(const char *ws, unsigned seed)
{
    rng = 0x9e3779b97f4a7c15ull ^ seed;
    for (int k = 0; k < 300; k++) {
        char p[64];
        snprintf(p, sizeof(p), "d%02u/f%02u.txt", rnd(60), rnd(50));
        if (!tu_exists(ws, p))
            continue;
        char c[128];
        int n = snprintf(c, sizeof(c), "churned by %u step %d\n", seed, k);
        tu_write_n(ws, p, c, (size_t)n, k % 5 == 0 ? 0700 : 0644);
    }
    char p[64];
    snprintf(p, sizeof(p), "d%02u", rnd(60));
    char *full = tu_join(ws, p);
    tu_rmtree(full);
    free(full);
    snprintf(p, sizeof(p), "new-%u", seed);
    tu_mkdir(ws, p);
    for (int i = 0; i < 50; i++) {
        snprintf(p, sizeof(p), "new-%u/n%02d", seed, i);
        char c[64];
        int n = snprintf(c, sizeof(c), "new %u %d\n", seed, i);
        tu_write_n(ws, p, c, (size_t)n, 0644);
    }
}

static void restore_api(const struct fx *f, const char *ref)
{
    sp_snapstore *s = NULL;
    OK(sp_snapstore_open(&s, f->ws, f->store, NULL, &err_));
    OK(sp_snapshot_restore(NULL, s, ref, &err_));
    sp_snapstore_free(s);
}

static bool snapshot_exists(const struct fx *f, const char *ref)
{
    sp_snapstore *s = NULL;
    OK(sp_snapstore_open(&s, f->ws, f->store, NULL, &err_));
    sp_snapshot *snap = NULL;
    sp_error *err = NULL;
    int r = sp_snapshot_get(&snap, s, ref, &err);
    if (r != 0 && r != SP_ENOTFOUND)
        fail_msg("snapshot get %s: %s", ref, err ? err->message : "");
    sp_error_free(err);
    sp_snapshot_free(snap);
    sp_snapstore_free(s);
    return r == 0;
}

static void snapshot_cli(const struct fx *f, const char *tag)
{
    const char *argv[] = {"sandpod", "snapshot", "--root", f->ws, "--store",
                          f->store,  "--tag",    tag,      NULL};
    assert_int_equal(run_cli(argv), 0);
}

/* ------------------------------------------------------------- write -- */

/* Content of generation `gen`: every 8-byte word names its generation and
 * offset, so a file made of two generations is told from either. */
static void fill_gen(unsigned char *buf, size_t len, uint64_t gen)
{
    for (size_t i = 0; i + 8 <= len; i += 8) {
        uint64_t w = (gen << 40) ^ (uint64_t)i ^ 0x5a5a000000000000ull;
        memcpy(buf + i, &w, 8);
    }
}

struct writer {
    const struct fx *f;
    sp_fs *fs;       /* the library victim's handle, raised limits */
    bool cli;        /* the victim is `sandpod fs --root WS write` */
    size_t size;     /* bytes per write */
    char *in;        /* the CLI's stdin file (outside the workspace) */
    const char *rel; /* the file written */
};

/* Start one write of `data` in a victim process. */
static pid_t start_write(const struct writer *w, const unsigned char *data)
{
    if (w->cli) {
        tu_write_n(w->f->dir, "next.bin", data, w->size, 0644);
        const char *argv[] = {"sandpod", "fs", "--root", w->f->ws, "write", w->rel, NULL};
        return spawn_cli_in(argv, w->in);
    }
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int r = sp_fs_write_bytes(NULL, w->fs, w->rel, data, w->size, NULL, NULL);
        _exit(r == 0 ? 0 : 3);
    }
    return pid;
}

static void finish_write(const struct writer *w, const unsigned char *data)
{
    int st = wait_status(start_write(w, data));
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* SIGKILL a write of w->size bytes at many moments: the file holds either
 * the old or the new content in full, nothing else changes, no temp file
 * is left where the fs tools list, and the write succeeds when run
 * again. */
static void kill_writes(const struct writer *w)
{
    const struct fx *f = w->f;
    unsigned char *cur = malloc(w->size), *next = malloc(w->size), *tmp;
    assert_non_null(cur);
    assert_non_null(next);
    tu_write(f->ws, "small.txt", "unrelated\n", 0644);
    uint64_t gen = 1;
    fill_gen(cur, w->size, gen);
    finish_write(w, cur);

    /* How long a write takes when left alone. */
    fill_gen(next, w->size, ++gen);
    int64_t t0 = now_us();
    finish_write(w, next);
    int64_t dur = now_us() - t0;
    tmp = cur;
    cur = next;
    next = tmp;

    int n = kills(), killed = 0, old_seen = 0, whole_temps = 0;
    for (int k = 0; k < n; k++) {
        fill_gen(next, w->size, gen + 1);
        pid_t pid = start_write(w, next);
        sleep_us(kill_delay(k, n, dur));
        kill(pid, SIGKILL);
        int st = wait_status(pid);
        if (WIFSIGNALED(st))
            killed++;
        else
            assert_int_equal(WEXITSTATUS(st), 0);

        size_t len = 0;
        char *got = tu_read(f->ws, w->rel, &len);
        assert_non_null(got);
        if (len == w->size && memcmp(got, cur, w->size) == 0) {
            old_seen++;
        } else if (len != w->size || memcmp(got, next, w->size) != 0) {
            size_t i = 0;
            while (i < len && i < w->size && got[i] == (char)cur[i] && got[i] == (char)next[i])
                i++;
            fail_msg("kill %d after %lld us: %s is neither the old nor the new content (%zu "
                     "bytes, differs from both at byte %zu)",
                     k, (long long)kill_delay(k, n, dur), w->rel, len, i);
        }
        free(got);
        char *whole[] = {(char *)next};
        whole_temps += assert_no_temp_files_but(f->ws, whole, &w->size, 1);
        char *small = tu_read(f->ws, "small.txt", NULL);
        assert_string_equal(small, "unrelated\n");
        free(small);

        /* Redone, the write succeeds. */
        finish_write(w, next);
        got = tu_read(f->ws, w->rel, &len);
        assert_int_equal(len, w->size);
        assert_memory_equal(got, next, w->size);
        free(got);
        tmp = cur;
        cur = next;
        next = tmp;
        gen++;
    }
    fprintf(stderr,
            "kill %s write: %d kills over %lld us, %d killed, %d left the old content, %d a "
            "whole new copy under a temp name\n",
            w->cli ? "CLI" : "library", n, (long long)dur, killed, old_seen, whole_temps);
    assert_true(killed >= 1); /* the kill at once always lands */
    free(cur);
    free(next);
}

/* A 24 MiB write through sp_fs (its limit raised), killed. */
static void test_kill_write(void **state)
{
    struct fx *f = *state;
    struct writer w = {.f = f, .size = 24u << 20, .rel = "big.bin"};
    sp_fs_opts o = SP_FS_OPTS_INIT;
    o.max_write_bytes = 64u << 20;
    OK(sp_fs_open(&w.fs, f->ws, &o, &err_));
    kill_writes(&w);
    sp_fs_free(w.fs);
}

/* `sandpod fs write` of 4 MiB (the CLI's limit) into a folder, killed. */
static void test_kill_write_cli(void **state)
{
    struct fx *f = *state;
    struct writer w = {.f = f, .cli = true, .size = 4u << 20, .rel = "sub/big.bin"};
    w.in = tu_join(f->dir, "next.bin");
    tu_mkdir(f->ws, "sub");
    kill_writes(&w);
    free(w.in);
}

/* ------------------------------------------------------------- patch -- */

#define PATCH_FILES 16

/* File i before (gen 0) or after (gen 1) the patch: 512 KiB of lines, the
 * first of which the patch changes. */
static char *patch_file_content(int i, int gen, size_t *len)
{
    strbuf b = {0};
    sb_addf(&b, gen ? "file %d changed by the patch\n" : "file %d first line\n", i);
    for (int l = 1; b.len < (512u << 10); l++)
        sb_addf(&b, "file %d line %d of filler text to make staging take a while\n", i, l);
    *len = b.len;
    return b.data;
}

static void patch_reset(const struct fx *f)
{
    for (int i = 0; i < PATCH_FILES; i++) {
        char rel[32];
        snprintf(rel, sizeof(rel), "p/f%02d.txt", i);
        size_t len;
        char *c = patch_file_content(i, 0, &len);
        tu_write_n(f->ws, rel, c, len, 0644);
        free(c);
    }
    tu_write(f->ws, "p/gone.txt", "to be deleted\n", 0644);
    char *added = tu_join(f->ws, "p/added.txt");
    unlink(added);
    free(added);
}

/* SIGKILL of `sandpod fs patch` updating 16 files of 512 KiB, adding one
 * and deleting one: each file is whole, old or new (a kill during the
 * renames may leave part of the patch applied, as documented), no temp
 * file is left, and from the old state the patch applies again. */
static void test_kill_patch_cli(void **state)
{
    struct fx *f = *state;
    tu_mkdir(f->ws, "p");
    strbuf pt = {0};
    sb_addf(&pt, "*** Begin Patch\n");
    for (int i = 0; i < PATCH_FILES; i++)
        sb_addf(&pt,
                "*** Update File: p/f%02d.txt\n@@\n-file %d first line\n+file %d changed by the "
                "patch\n",
                i, i, i);
    sb_addf(&pt, "*** Add File: p/added.txt\n+added\n*** Delete File: p/gone.txt\n*** End Patch\n");
    tu_write(f->dir, "change.patch", pt.data, 0644);
    free(pt.data);
    char *in = tu_join(f->dir, "change.patch");
    const char *argv[] = {"sandpod", "fs", "--root", f->ws, "patch", NULL};

    patch_reset(f);
    int64_t t0 = now_us();
    assert_int_equal(wait_status(spawn_cli_in(argv, in)), 0);
    int64_t dur = now_us() - t0;

    int n = kills(), killed = 0, partial = 0, whole_temps = 0;
    for (int k = 0; k < n; k++) {
        patch_reset(f);
        pid_t pid = spawn_cli_in(argv, in);
        sleep_us(kill_delay(k, n, dur));
        kill(pid, SIGKILL);
        int st = wait_status(pid);
        if (WIFSIGNALED(st))
            killed++;
        else
            assert_int_equal(WEXITSTATUS(st), 0);
        int news = 0;
        for (int i = 0; i < PATCH_FILES; i++) {
            char rel[32];
            snprintf(rel, sizeof(rel), "p/f%02d.txt", i);
            size_t len, l0, l1;
            char *got = tu_read(f->ws, rel, &len);
            char *c0 = patch_file_content(i, 0, &l0), *c1 = patch_file_content(i, 1, &l1);
            assert_non_null(got);
            bool is_old = len == l0 && memcmp(got, c0, l0) == 0;
            bool is_new = len == l1 && memcmp(got, c1, l1) == 0;
            if (!is_old && !is_new)
                fail_msg("kill %d: %s is neither its old nor its new content", k, rel);
            news += is_new;
            free(got);
            free(c0);
            free(c1);
        }
        partial += news > 0 && news < PATCH_FILES;
        /* A kill between naming a staged file and its rename leaves that
         * file's whole new content under a temp name, nothing partial. */
        char *whole[PATCH_FILES + 1];
        size_t whole_len[PATCH_FILES + 1];
        for (int i = 0; i < PATCH_FILES; i++)
            whole[i] = patch_file_content(i, 1, &whole_len[i]);
        whole[PATCH_FILES] = strdup("added\n");
        whole_len[PATCH_FILES] = strlen(whole[PATCH_FILES]);
        whole_temps += assert_no_temp_files_but(f->ws, whole, whole_len, PATCH_FILES + 1);
        for (int i = 0; i <= PATCH_FILES; i++)
            free(whole[i]);

        /* From the old state, the patch applies again. */
        patch_reset(f);
        assert_int_equal(wait_status(spawn_cli_in(argv, in)), 0);
        char *added = tu_read(f->ws, "p/added.txt", NULL);
        assert_string_equal(added, "added\n");
        free(added);
        assert_false(tu_exists(f->ws, "p/gone.txt"));
    }
    fprintf(stderr,
            "kill patch: %d kills over %lld us, %d killed, %d left part of the patch, %d a whole "
            "file under a temp name\n",
            n, (long long)dur, killed, partial, whole_temps);
    assert_true(killed >= 1);
    free(in);
}

/* ---------------------------------------------------------- snapshot -- */

struct good {
    char tag[32];
    char *m;
};

/* SIGKILL of `sandpod snapshot` on a tree of 3000 files: the workspace is
 * untouched, the store passes fsck, every earlier snapshot still restores
 * exactly, a snapshot the killed run finished is exact, and the snapshot
 * succeeds when taken again. */
static void test_kill_snapshot_cli(void **state)
{
    struct fx *f = *state;
    build_tree(f->ws);
    int n = kills();
    struct good *good = calloc((size_t)n + 2, sizeof(*good));
    size_t n_good = 0;
    snapshot_cli(f, "base");
    snprintf(good[n_good].tag, sizeof(good[0].tag), "base");
    good[n_good++].m = manifest(f->ws);

    /* How long a snapshot of a churned tree takes when left alone. */
    churn(f->ws, 1000);
    int64_t t0 = now_us();
    snapshot_cli(f, "measured");
    int64_t dur = now_us() - t0;
    snprintf(good[n_good].tag, sizeof(good[0].tag), "measured");
    good[n_good++].m = manifest(f->ws);

    int killed = 0, finished = 0;
    for (int k = 0; k < n; k++) {
        churn(f->ws, (unsigned)k + 1);
        char *before = manifest(f->ws);
        char tag[32], redo[32];
        snprintf(tag, sizeof(tag), "killed-%d", k);
        snprintf(redo, sizeof(redo), "redo-%d", k);
        const char *argv[] = {"sandpod", "snapshot", "--root", f->ws, "--store",
                              f->store,  "--tag",    tag,      NULL};
        pid_t pid = spawn_cli(argv);
        sleep_us(kill_delay(k, n, dur));
        kill(pid, SIGKILL);
        int st = wait_status(pid);
        if (WIFSIGNALED(st))
            killed++;
        else
            assert_int_equal(WEXITSTATUS(st), 0);

        /* A snapshot only reads the workspace. */
        char *after = manifest(f->ws);
        assert_same_tree(before, after, "workspace after a killed snapshot");
        free(after);
        tu_assert_fsck(f->store);

        /* Redone, the snapshot succeeds. */
        snapshot_cli(f, redo);
        bool done = snapshot_exists(f, tag);
        finished += done;

        /* The new snapshots are exact (the earlier ones are checked at the
         * end, and in every round in the long variant). */
        if (long_mode) {
            restore_api(f, good[n_good - 1].tag);
            char *prev = manifest(f->ws);
            assert_same_tree(good[n_good - 1].m, prev, good[n_good - 1].tag);
            free(prev);
        }
        if (done) {
            restore_api(f, tag);
            char *m = manifest(f->ws);
            assert_same_tree(before, m, tag);
            free(m);
        }
        restore_api(f, redo);
        char *m = manifest(f->ws);
        assert_same_tree(before, m, redo);
        free(m);
        snprintf(good[n_good].tag, sizeof(good[0].tag), "%s", redo);
        good[n_good++].m = before;
    }
    fprintf(stderr,
            "kill snapshot: %d kills over %lld us, %d killed, %d snapshots finished anyway\n", n,
            (long long)dur, killed, finished);
    assert_true(killed >= 1);
    /* At the end, every snapshot still restores exactly. */
    for (size_t i = 0; i < n_good; i++) {
        restore_api(f, good[i].tag);
        char *m = manifest(f->ws);
        assert_same_tree(good[i].m, m, good[i].tag);
        free(m);
        free(good[i].m);
    }
    free(good);
    tu_assert_fsck(f->store);
}

/* ----------------------------------------------------------- restore -- */

/* SIGKILL of `sandpod restore` between two very different snapshots, with
 * stray files to remove: the store passes fsck, the restore run again
 * yields exactly the snapshot's tree (nothing of the other one, no stray
 * or temp file), and the other snapshot still restores exactly. */
static void test_kill_restore_cli(void **state)
{
    struct fx *f = *state;
    build_tree(f->ws);
    snapshot_cli(f, "A");
    char *ma = manifest(f->ws);
    churn(f->ws, 500);
    char *link = tu_join(f->ws, "link-in");
    unlink(link);
    free(link);
    tu_mkdir(f->ws, "link-in"); /* a symlink became a folder */
    tu_write(f->ws, "link-in/inside", "x\n", 0644);
    snapshot_cli(f, "B");
    char *mb = manifest(f->ws);

    /* How long a restore from B to A takes when left alone. */
    const char *argv[] = {"sandpod", "restore", "--root", f->ws, "--store", f->store, "A", NULL};
    int64_t t0 = now_us();
    assert_int_equal(run_cli(argv), 0);
    int64_t dur = now_us() - t0;
    char *m = manifest(f->ws);
    assert_same_tree(ma, m, "A");
    free(m);
    restore_api(f, "B");

    /* Each round starts from B plus stray files and ends there. */
    int n = kills(), killed = 0, torn = 0;
    for (int k = 0; k < n; k++) {
        char p[64];
        snprintf(p, sizeof(p), "stray-%d", k);
        tu_mkdir(f->ws, p);
        snprintf(p, sizeof(p), "stray-%d/junk", k);
        tu_write(f->ws, p, "junk\n", 0600);
        char *from = manifest(f->ws);
        pid_t pid = spawn_cli(argv);
        sleep_us(kill_delay(k, n, dur));
        kill(pid, SIGKILL);
        int st = wait_status(pid);
        if (WIFSIGNALED(st))
            killed++;
        else
            assert_int_equal(WEXITSTATUS(st), 0);
        m = manifest(f->ws);
        torn += strcmp(m, ma) != 0 && strcmp(m, from) != 0;
        free(m);
        free(from);
        tu_assert_fsck(f->store);

        /* Redone, the restore yields exactly the snapshot. */
        assert_int_equal(run_cli(argv), 0);
        m = manifest(f->ws);
        assert_same_tree(ma, m, "a killed restore run again");
        free(m);
        assert_no_temp_files(f->ws);
        /* The other snapshot still restores exactly. */
        restore_api(f, "B");
        m = manifest(f->ws);
        assert_same_tree(mb, m, "B");
        free(m);
    }
    fprintf(stderr,
            "kill restore: %d kills over %lld us, %d killed, %d left a half-restored tree\n", n,
            (long long)dur, killed, torn);
    assert_true(killed >= 1);
    free(ma);
    free(mb);
}

/* ----------------------------------------------------- parallel calls -- */

static char *podman_url;

struct par {
    char *dir; /* scratch: inputs and outputs of the calls */
    char *state_root;
    char *project;
    char name[64];
    sp_sandbox *sb;
};

static int par_setup(void **state)
{
    struct par *p = calloc(1, sizeof(*p));
    p->dir = tu_mkdtemp();
    p->state_root = tu_mkdtemp();
    p->project = tu_mkdtemp();
    tu_write(p->project, "shared.txt", "header\nANCHOR\nfooter\n", 0644);
    snprintf(p->name, sizeof(p->name), "faults-kill-%d", (int)getpid());
    sp_mount mnt = {0};
    mnt.host_path = p->project;
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.name = p->name;
    o.state_root = p->state_root;
    o.podman_url = podman_url;
    o.mounts = &mnt;
    o.n_mounts = 1;
    o.memory_bytes = 128ull << 20;
    o.pids_limit = 128;
    sp_error *err = NULL;
    *state = p;
    if (sp_sandbox_create(&p->sb, &o, &err) < 0) {
        fprintf(stderr, "create: %s\n", err->message);
        sp_error_free(err);
        return -1;
    }
    return 0;
}

static int par_teardown(void **state)
{
    struct par *p = *state;
    sp_error *err = NULL;
    if (p->sb && sp_sandbox_remove(p->sb, false, &err) < 0) {
        fprintf(stderr, "remove: %s\n", err->message);
        sp_error_free(err);
    }
    sp_sandbox_free(p->sb);
    tu_rmtree(p->dir);
    tu_rmtree(p->state_root);
    tu_rmtree(p->project);
    free(p->dir);
    free(p->state_root);
    free(p->project);
    free(p);
    return 0;
}

#define N_EDITS 100
#define N_STATE 16
#define N_PROCS (N_EDITS + N_STATE)

struct job {
    char *argv[16];
    int argc;
    char *in; /* stdin file, or NULL */
    bool edit;
    pid_t pid;
    int status;
};

static void job_arg(struct job *j, const char *s)
{
    assert_true(j->argc < 15);
    j->argv[j->argc++] = strdup(s);
    j->argv[j->argc] = NULL;
}

static char *job_file(const struct par *p, int i, const char *what)
{
    char rel[64];
    snprintf(rel, sizeof(rel), "%s-%03d", what, i);
    return tu_join(p->dir, rel);
}

/* The i-th editing call: each adds the line "edit-NNN" to shared.txt by a
 * read-modify-write, through every editing path of the CLI. */
static void make_edit(struct job *j, const struct par *p, int i)
{
    char line[32], json[512];
    snprintf(line, sizeof(line), "edit-%03d", i);
    j->edit = true;
    job_arg(j, "sandpod");
    switch (i % 8) {
    case 0:
        snprintf(json, sizeof(json),
                 "{\"path\": \"shared.txt\", \"old_string\": \"ANCHOR\\n\", \"new_string\": "
                 "\"ANCHOR\\n%s\\n\"}",
                 line);
        job_arg(j, "call");
        job_arg(j, p->name);
        job_arg(j, "edit_file");
        job_arg(j, json);
        break;
    case 1:
        snprintf(json, sizeof(json), "{\"path\": \"shared.txt\", \"line\": -1, \"text\": \"%s\"}",
                 line);
        job_arg(j, "call");
        job_arg(j, p->name);
        job_arg(j, "insert");
        job_arg(j, json);
        break;
    case 2:
        snprintf(json, sizeof(json),
                 "{\"patch\": \"*** Begin Patch\\n*** Update File: shared.txt\\n@@\\n "
                 "ANCHOR\\n+%s\\n*** End Patch\\n\"}",
                 line);
        job_arg(j, "call");
        job_arg(j, p->name);
        job_arg(j, "apply_patch");
        job_arg(j, json);
        break;
    case 3:
        snprintf(json, sizeof(json),
                 "{\"path\": \"shared.txt\", \"content\": \"%s\\n\", \"mode\": \"append\"}", line);
        job_arg(j, "call");
        job_arg(j, p->name);
        job_arg(j, "write_file");
        job_arg(j, json);
        break;
    case 4: {
        char nw[64];
        snprintf(nw, sizeof(nw), "ANCHOR\n%s", line);
        job_arg(j, "fs");
        job_arg(j, p->name);
        job_arg(j, "edit");
        job_arg(j, "shared.txt");
        job_arg(j, "--old");
        job_arg(j, "ANCHOR");
        job_arg(j, "--new");
        job_arg(j, nw);
        break;
    }
    case 5:
        j->in = job_file(p, i, "in");
        snprintf(json, sizeof(json), "%s\n", line);
        tu_write(p->dir, strrchr(j->in, '/') + 1, json, 0644);
        job_arg(j, "fs");
        job_arg(j, p->name);
        job_arg(j, "insert");
        job_arg(j, "shared.txt");
        job_arg(j, "--line");
        job_arg(j, "0");
        break;
    case 6:
        j->in = job_file(p, i, "in");
        snprintf(json, sizeof(json),
                 "*** Begin Patch\n*** Update File: shared.txt\n@@\n ANCHOR\n+%s\n*** End Patch\n",
                 line);
        tu_write(p->dir, strrchr(j->in, '/') + 1, json, 0644);
        job_arg(j, "fs");
        job_arg(j, p->name);
        job_arg(j, "patch");
        break;
    default:
        j->in = job_file(p, i, "in");
        snprintf(json, sizeof(json), "%s\n", line);
        tu_write(p->dir, strrchr(j->in, '/') + 1, json, 0644);
        job_arg(j, "fs");
        job_arg(j, p->name);
        job_arg(j, "write");
        job_arg(j, "shared.txt");
        job_arg(j, "--mode");
        job_arg(j, "append");
        break;
    }
}

/* Calls that touch the sandbox's state: commands and its status. */
static void make_state(struct job *j, const struct par *p, int i)
{
    job_arg(j, "sandpod");
    switch (i % 4) {
    case 0:
        job_arg(j, "call");
        job_arg(j, p->name);
        job_arg(j, "shell");
        job_arg(j, "{\"command\": \"wc -l /workspace/shared.txt\"}");
        break;
    case 1:
        job_arg(j, "sh");
        job_arg(j, p->name);
        job_arg(j, "echo hi");
        break;
    case 2:
        job_arg(j, "exec");
        job_arg(j, p->name);
        job_arg(j, "true");
        break;
    default:
        job_arg(j, "inspect");
        job_arg(j, "--json");
        job_arg(j, p->name);
        break;
    }
}

static cJSON *read_json(const char *dir, const char *rel)
{
    char *text = tu_read(dir, rel, NULL);
    if (!text)
        fail_msg("cannot read %s/%s", dir, rel);
    cJSON *o = cJSON_Parse(text);
    if (!o)
        fail_msg("%s/%s does not parse as JSON:\n%s", dir, rel, text);
    free(text);
    return o;
}

/* 100 concurrent read-modify-write calls on one file of one sandbox (the
 * call tool suite and the fs command, every editing path), mixed with
 * calls that run commands or read its status: no update is lost, every
 * call exits 0, sandbox.json is unchanged, no temp file is left, and the
 * event log holds whole lines. */
static void test_parallel_calls(void **state)
{
    struct par *p = *state;
    const char *ws = sp_sandbox_workspace(p->sb);
    const char *sdir = sp_sandbox_state_dir(p->sb);
    cJSON *json_before = read_json(sdir, "sandbox.json");
    setenv("SANDPOD_HOME", p->state_root, 1);
    setenv("SANDPOD_URL", podman_url, 1);

    struct job *jobs = calloc(N_PROCS, sizeof(*jobs));
    for (int i = 0; i < N_EDITS; i++)
        make_edit(&jobs[i], p, i);
    for (int i = 0; i < N_STATE; i++)
        make_state(&jobs[N_EDITS + i], p, i);

    /* Every child waits on the gate, so all start together. */
    int gate[2];
    assert_int_equal(pipe2(gate, O_CLOEXEC), 0);
    for (int i = 0; i < N_PROCS; i++) {
        struct job *j = &jobs[i];
        char *out = job_file(p, i, "out"), *errf = job_file(p, i, "err");
        j->pid = fork();
        assert_true(j->pid >= 0);
        if (j->pid == 0) {
            close(gate[1]);
            char c;
            while (read(gate[0], &c, 1) < 0 && errno == EINTR)
                ;
            int in = open(j->in ? j->in : "/dev/null", O_RDONLY | O_CLOEXEC);
            int o = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            int e = open(errf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (in < 0 || o < 0 || e < 0)
                _exit(126);
            dup2(in, 0);
            dup2(o, 1);
            dup2(e, 2);
            execv(SANDPOD_CLI, j->argv);
            _exit(127);
        }
        free(out);
        free(errf);
    }
    close(gate[0]);
    close(gate[1]); /* go */

    /* Reap them all; a call that hangs (a deadlock) is killed after five
     * minutes so the test fails instead of hanging. */
    int64_t deadline = now_us() + 300ll * 1000000;
    int left = N_PROCS;
    bool hung = false;
    while (left > 0) {
        int st = 0;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid < 0 && errno == EINTR)
            continue;
        assert_true(pid >= 0);
        if (pid == 0) {
            if (now_us() > deadline && !hung) {
                hung = true;
                for (int i = 0; i < N_PROCS; i++)
                    if (jobs[i].pid > 0)
                        kill(jobs[i].pid, SIGKILL);
            }
            sleep_us(20000);
            continue;
        }
        for (int i = 0; i < N_PROCS; i++)
            if (jobs[i].pid == pid) {
                jobs[i].status = st;
                jobs[i].pid = 0;
                left--;
            }
    }
    assert_false(hung);

    /* Every call exited 0, or 1 with a clear one-line-per-error message. */
    int failed = 0;
    for (int i = 0; i < N_PROCS; i++) {
        struct job *j = &jobs[i];
        char rel[64];
        snprintf(rel, sizeof(rel), "err-%03d", i);
        char *errtext = tu_read(p->dir, rel, NULL);
        int code = WIFEXITED(j->status) ? WEXITSTATUS(j->status) : 128 + WTERMSIG(j->status);
        if (code != 0) {
            bool clear = code == 1 && errtext && strncmp(errtext, "sandpod: ", 9) == 0;
            snprintf(rel, sizeof(rel), "out-%03d", i);
            char *outtext = errtext && *errtext ? NULL : tu_read(p->dir, rel, NULL);
            fprintf(stderr, "call %d (%s %s) exited %d: %s\n", i, j->argv[1], j->argv[3], code,
                    outtext   ? outtext
                    : errtext ? errtext
                              : "(no output)");
            /* `call` answers {ok: false, error} on stdout instead. */
            cJSON *o = outtext ? cJSON_Parse(outtext) : NULL;
            if (o && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(o, "ok")) &&
                cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "error")))
                clear = code == 1;
            cJSON_Delete(o);
            free(outtext);
            if (j->edit || !clear)
                failed++;
        }
        free(errtext);
    }

    /* No lost update: each line once, and what was there before. */
    char *text = tu_read(ws, "shared.txt", NULL);
    assert_non_null(text);
    int lost = 0;
    for (int i = 0; i < N_EDITS; i++) {
        char line[32];
        snprintf(line, sizeof(line), "edit-%03d\n", i);
        const char *at = strstr(text, line);
        bool at_line_start = at && (at == text || at[-1] == '\n');
        if (!at_line_start || strstr(at + 1, line)) {
            fprintf(stderr, "edit-%03d is %s\n", i, at ? "there twice" : "lost");
            lost++;
        }
    }
    for (const char *keep = "header\n\0ANCHOR\n\0footer\n\0"; *keep; keep += strlen(keep) + 1) {
        const char *at = strstr(text, keep);
        assert_non_null(at);
        assert_null(strstr(at + 1, keep));
    }
    if (lost || failed)
        fail_msg("%d of %d concurrent edits were lost or doubled, %d calls failed; shared.txt:\n%s",
                 lost, N_EDITS, failed, text);
    free(text);

    /* sandbox.json parses and says the same; no temp file anywhere. */
    cJSON *json_after = read_json(sdir, "sandbox.json");
    assert_true(cJSON_Compare(json_before, json_after, true));
    cJSON_Delete(json_before);
    cJSON_Delete(json_after);
    assert_no_temp_files(ws);
    DIR *d = opendir(sdir);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)))
        if (strstr(de->d_name, ".tmp") || strncmp(de->d_name, ".sandpod-", 9) == 0)
            fail_msg("a temp file is left in the state folder: %s", de->d_name);
    closedir(d);

    /* The event log has whole JSON lines, a start and an end per call. */
    char *events = tu_read(sdir, "events.jsonl", NULL);
    assert_non_null(events);
    int lines = 0;
    for (char *s = events, *nl; (nl = strchr(s, '\n')); s = nl + 1) {
        *nl = '\0';
        cJSON *o = cJSON_Parse(s);
        if (!o)
            fail_msg("events.jsonl line %d is not JSON: %s", lines + 1, s);
        cJSON_Delete(o);
        lines++;
    }
    free(events);
    assert_true(lines >= 2 * (N_EDITS / 2));

    /* The sandbox still works. */
    sp_run_result *res = NULL;
    OK(sp_sandbox_shell(&res, p->sb, "grep -c edit- /workspace/shared.txt", NULL, &err_));
    assert_int_equal(res->exit_code, 0);
    char want[16];
    snprintf(want, sizeof(want), "%d\n", N_EDITS);
    assert_string_equal(res->out, want);
    sp_run_result_free(res);

    for (int i = 0; i < N_PROCS; i++) {
        for (int a = 0; a < jobs[i].argc; a++)
            free(jobs[i].argv[a]);
        free(jobs[i].in);
    }
    free(jobs);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    /* SP_TEST_FILTER=test_kill_patch* runs only the tests it matches. */
    if (getenv("SP_TEST_FILTER"))
        cmocka_set_test_filter(getenv("SP_TEST_FILTER"));
    if (strcmp(mode, "parallel") == 0) {
        podman_url = tu_need_podman_or_skip();
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_parallel_calls, par_setup, par_teardown),
        };
        int r = cmocka_run_group_tests_name("faults_kill_parallel", tests, NULL, NULL);
        free(podman_url);
        return r;
    }
    if (strcmp(mode, "long") == 0) {
        const char *l = getenv("SANDPOD_LONG");
        if (!l || strcmp(l, "1") != 0) {
            fprintf(stderr, "skipping: the long variant runs only with SANDPOD_LONG=1\n");
            return 77;
        }
        long_mode = true;
    } else if (*mode) {
        fprintf(stderr, "usage: %s [parallel | long]\n", argv[0]);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kill_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill_write_cli, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill_patch_cli, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill_snapshot_cli, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill_restore_cli, setup, teardown),
    };
    return cmocka_run_group_tests_name(long_mode ? "faults_kill_long" : "faults_kill", tests, NULL,
                                       NULL);
}
