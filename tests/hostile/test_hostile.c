/* A hostile workload: an attacker inside a real sandbox keeps swapping
 * symlinks and folders under /workspace to point at the host (/, the state
 * folder, the snapshot store, canary files), and makes fifos, a huge sparse
 * file, a deep tree and names with newlines and invalid UTF-8, while the
 * host runs every filesystem tool, grep, glob, hydration, snapshot, restore,
 * diff and export against the same workspace in a loop.
 *
 * Fails on:
 *   - any returned content (tool answers, hydrated files, diffs, exports)
 *     holding the secret written into canary files outside the workspace;
 *   - any change in a sealed folder outside the workspace (every entry's
 *     type, mode, size, mtime and bytes are compared, not a hash of them);
 *   - any single host call taking more than 30 s (a watchdog aborts).
 *
 * About 1-2 minutes; `--long` (ctest's test_hostile_long, with
 * SANDPOD_LONG=1) runs the attacker for 10 minutes with a
 * 10 GiB sparse file (32 MiB otherwise; SP_HOSTILE_SPARSE=SIZE overrides). Skips (77) without
 * Podman unless CI=true. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sandpod/sandbox.h"
#include "sandpod/snapshot.h"
#include "testutil.h"

#define CALL_LIMIT_MS 30000

static char *podman_url; /* tu_need_podman_or_skip(): the shared service */
static char *state_root, *project, *outside, *sealed, *hydrate_dst, *export_dir;
static char secret[64];
static char sb_name[64];
static sp_sandbox *sb;
static bool long_run;
static int attack_s;
/* The attacker's sparse file. A snapshot reads (and compresses) every byte
 * of it, holes included, so its cost grows with the apparent size: 1 GiB
 * already takes over 30 s in a Debug build, which is why the short run
 * stays at 32 MiB and only the long run uses 10 GiB. */
static const char *sparse_size = "32M";

/* ------------------------------------------------------------ watchdog -- */

static _Atomic int64_t call_started; /* 0 = no call in flight */
static char call_name[128];
static atomic_bool watchdog_stop;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *watchdog(void *arg)
{
    (void)arg;
    while (!atomic_load(&watchdog_stop)) {
        int64_t t = atomic_load(&call_started);
        if (t && now_ms() - t > CALL_LIMIT_MS) {
            fprintf(stderr, "HANG: host call '%s' runs for more than %d ms\n", call_name,
                    CALL_LIMIT_MS);
            abort();
        }
        struct timespec ts = {0, 200 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void call_begin(const char *what, const char *path)
{
    snprintf(call_name, sizeof(call_name), "%s %s", what, path ? path : "");
    atomic_store(&call_started, now_ms());
}

static void call_end(void)
{
    int64_t took = now_ms() - atomic_load(&call_started);
    if (took > 5000)
        fprintf(stderr, "slow: host call '%s' took %lld ms\n", call_name, (long long)took);
    atomic_store(&call_started, 0);
}

/* --------------------------------------------------------- leak checks -- */

static unsigned long calls, refusals, leaks_checked;

static void no_secret(const void *data, size_t len, const char *what)
{
    leaks_checked++;
    if (data && len >= strlen(secret) && memmem(data, len, secret, strlen(secret)))
        fail_msg("LEAK: %s returned the content of a canary file", what);
}

static void note(int rc, sp_error **err)
{
    calls++;
    if (rc < 0) {
        refusals++;
        assert_non_null(*err);
        assert_non_null((*err)->message);
        no_secret((*err)->message, strlen((*err)->message), call_name);
    }
    sp_error_free(*err);
    *err = NULL;
}

/* Scan every regular file under dir (not following links) for the secret;
 * sparse and huge files only through their data extents, bounded. */
static void scan_tree(int dfd, const char *what, unsigned depth)
{
    if (depth > 300)
        return;
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0)
                scan_tree(sub, what, depth + 1);
        } else if (S_ISREG(st.st_mode)) {
            int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            if (fd < 0)
                continue;
            static char buf[65536]; /* recursion goes 200+ deep */
            off_t pos = 0, scanned = 0;
            while (scanned < (64 << 20)) {
                off_t data = lseek(fd, pos, SEEK_DATA);
                if (data < 0)
                    break;
                ssize_t n = pread(fd, buf, sizeof(buf), data);
                if (n <= 0)
                    break;
                no_secret(buf, (size_t)n, what);
                pos = data + n - (off_t)strlen(secret);
                if (pos <= data)
                    pos = data + n;
                scanned += n;
            }
            close(fd);
        }
    }
    closedir(d);
}

static void scan_path(const char *path, const char *what)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0)
        scan_tree(fd, what, 0);
}

/* ------------------------------------------------------------- sealing -- */

typedef struct text {
    char *s;
    size_t len, cap;
} text;

static void text_add(text *t, const void *data, size_t len)
{
    if (t->len + len + 1 > t->cap) {
        t->cap = (t->len + len + 1) * 2;
        t->s = realloc(t->s, t->cap);
        assert_non_null(t->s);
    }
    memcpy(t->s + t->len, data, len);
    t->len += len;
    t->s[t->len] = '\0';
}

/* Everything under dir, as one text: name, type, mode, size, mtime and
 * bytes of every entry; link targets verbatim. */
static void seal_walk(text *out, const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    char **names = NULL;
    size_t n = 0;
    while ((de = readdir(d)) != NULL) {
        names = realloc(names, (n + 1) * sizeof(*names));
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = i + 1; j < n; j++)
            if (strcmp(names[j], names[i]) < 0) {
                char *t = names[i];
                names[i] = names[j];
                names[j] = t;
            }
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(names[i], ".") == 0 || strcmp(names[i], "..") == 0) {
            free(names[i]);
            continue;
        }
        char *p = tu_join(dir, names[i]);
        struct stat st;
        char head[512];
        if (lstat(p, &st) < 0) {
            snprintf(head, sizeof(head), "%s: gone\n", p);
            text_add(out, head, strlen(head));
        } else {
            snprintf(head, sizeof(head), "%s: %o %lld %lld.%09ld\n", p, (unsigned)st.st_mode,
                     (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
            text_add(out, head, strlen(head));
            if (S_ISREG(st.st_mode)) {
                size_t len = 0;
                char *c = tu_read(dir, names[i], &len);
                if (c)
                    text_add(out, c, len);
                free(c);
            } else if (S_ISLNK(st.st_mode)) {
                char t[4096];
                ssize_t k = readlink(p, t, sizeof(t));
                if (k > 0)
                    text_add(out, t, (size_t)k);
            } else if (S_ISDIR(st.st_mode)) {
                seal_walk(out, p);
            }
        }
        free(p);
        free(names[i]);
    }
    free(names);
}

static char *seal(void)
{
    text t = {0};
    text_add(&t, "", 0);
    seal_walk(&t, sealed);
    seal_walk(&t, outside);
    return t.s;
}

static char *sealed_before;

static void check_sealed(const char *when)
{
    char *now = seal();
    if (strcmp(now, sealed_before) != 0)
        fail_msg("the sealed folders changed (%s)", when);
    free(now);
}

/* ----------------------------------------------------------- the setup -- */

static void write_canary(const char *dir, const char *rel)
{
    char content[256];
    snprintf(content, sizeof(content), "top secret: %s\nmore of it: %s\n", secret, secret);
    tu_write(dir, rel, content, 0644);
}

static int group_setup(void **state)
{
    (void)state;
    uint8_t rnd[12];
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        return -1;
    int k = snprintf(secret, sizeof(secret), "SPSECRET-");
    for (size_t i = 0; i < sizeof(rnd); i++)
        k += snprintf(secret + k, sizeof(secret) - (size_t)k, "%02x", rnd[i]);

    state_root = tu_mkdtemp();
    project = tu_mkdtemp();
    outside = tu_mkdtemp();
    sealed = tu_mkdtemp();
    hydrate_dst = tu_mkdtemp();
    export_dir = tu_mkdtemp();
    tu_write(project, "README.md", "a project\n", 0644);
    tu_mkdir(project, "src");
    tu_write(project, "src/main.c", "int main(void) { return 0; }\n", 0644);
    write_canary(outside, "secret.txt");
    tu_write(sealed, "keep.txt", "do not touch\n", 0644);
    write_canary(sealed, "canary.txt");
    tu_mkdir(sealed, "sub");
    tu_write(sealed, "sub/data.bin", "\x01\x02\x03", 0600);
    tu_symlink("../keep.txt", sealed, "sub/link");

    snprintf(sb_name, sizeof(sb_name), "hostile-%d", (int)getpid());
    sp_mount m = {0};
    m.host_path = project;
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.name = sb_name;
    o.state_root = state_root;
    o.podman_url = podman_url; /* the shared service */
    o.mounts = &m;
    o.n_mounts = 1;
    o.memory_bytes = 256ull << 20;
    o.pids_limit = 128;
    sp_error *err = NULL;
    if (sp_sandbox_create(&sb, &o, &err) < 0) {
        fprintf(stderr, "create: %s\n", err->message);
        return -1;
    }
    /* A canary inside the sandbox's own state folder, beside the workspace. */
    write_canary(sp_sandbox_state_dir(sb), "canary.txt");
    sealed_before = seal();
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    sp_error *err = NULL;
    if (sb && sp_sandbox_remove(sb, false, &err) < 0)
        fprintf(stderr, "remove: %s\n", err->message);
    sp_error_free(err);
    sp_sandbox_free(sb);
    const char *dirs[] = {state_root, project, outside, sealed, hydrate_dst, export_dir};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        if (dirs[i])
            tu_rmtree(dirs[i]);
        free((void *)dirs[i]);
    }
    free(sealed_before);
    return 0;
}

/* ------------------------------------------------------------ attacker -- */

typedef struct attacker {
    char *script;
    int rc;
    char out[512];
    char err[512];
} attacker;

static void *attack(void *arg)
{
    attacker *a = arg;
    sp_sandbox *mine = NULL;
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.state_root = state_root;
    o.podman_url = podman_url; /* the shared service */
    sp_error *err = NULL;
    a->rc = sp_sandbox_open(&mine, sb_name, &o, &err);
    if (a->rc == 0) {
        sp_run_opts ro = SP_RUN_OPTS_INIT;
        ro.timeout_ms = (attack_s + 60) * 1000;
        sp_run_result *r = NULL;
        a->rc = sp_sandbox_shell(&r, mine, a->script, &ro, &err);
        if (r) {
            snprintf(a->out, sizeof(a->out), "%.*s", (int)(r->out_len < 500 ? r->out_len : 500),
                     r->out);
            snprintf(a->err, sizeof(a->err), "%.*s", (int)(r->err_len < 500 ? r->err_len : 500),
                     r->err);
        }
        sp_run_result_free(r);
    }
    if (err)
        snprintf(a->err, sizeof(a->err), "%s", err->message);
    sp_error_free(err);
    sp_sandbox_free(mine);
    return NULL;
}

/* The attacker's shell loop. It knows the host paths of every target (as
 * a real workload could guess them) but never the secret. */
static char *attack_script(void)
{
    const char *st = sp_sandbox_state_dir(sb);
    char *s = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&s, &len);
    assert_non_null(f);
    fprintf(f,
            "cd /workspace || exit 1\n"
            "end=$(( $(date +%%s) + %d ))\n"
            "i=0\n"
            "p=deep; n=0; while [ $n -lt 200 ]; do p=$p/d; n=$((n+1)); done; mkdir -p $p\n"
            "touch \"$(printf 'new\\nline')\" \"$(printf 'bad\\377name')\" "
            "\"$(printf 'tab\\tand\\rcr')\"\n"
            "dd if=/dev/zero of=sparse bs=1 count=1 seek=%s 2>/dev/null\n"
            "while [ $(date +%%s) -lt $end ]; do\n"
            "  i=$((i+1))\n"
            "  ln -sfn / x; ln -sfn /workspace/../.. y; ln -sfn ../../../../../../../.. up\n"
            "  ln -sfn %s s; ln -sfn %s/canary.txt c; ln -sfn %s/snapshots.git g\n"
            "  ln -sfn %s z; ln -sfn %s/secret.txt o; ln -sfn ../canary.txt rc\n"
            "  ln -sfn ../snapshots.git rg; ln -sfn /proc/self/root pr; ln -sfn loop loop\n"
            "  rm -rf d; ln -sfn %s d; rm -f d; mkdir -p d/e; echo inside > d/a.txt\n"
            "  rm -rf w; mkdir w; echo w > w/f; rm -rf w; ln -sfn %s w\n"
            "  mv d d2 2>/dev/null; ln -sfn %s d; rm -f d; mv d2 d 2>/dev/null\n"
            "  rm -rf src; ln -sfn %s src; rm -f src; mkdir -p src; echo 'int x;' > src/main.c\n"
            "  [ -p fifo ] || mkfifo fifo\n"
            "  [ -p d/fifo ] || mkfifo d/fifo 2>/dev/null\n"
            "  [ -e sparse ] || dd if=/dev/zero of=sparse bs=1 count=1 seek=%s 2>/dev/null\n"
            "  [ -d deep ] || mkdir -p $p\n"
            "  [ $((i %% 50)) = 0 ] && { rm -rf deep; mkdir -p $p; }\n"
            "done\n"
            "echo iterations=$i\n",
            attack_s, sparse_size, st, st, st, sealed, outside, st, sealed, outside, st,
            sparse_size);
    fclose(f);
    return s;
}

/* ----------------------------------------------------------- host side -- */

static const char *const targets[] = {
    "x",
    "x/etc/passwd",
    "y",
    "up",
    "s",
    "s/canary.txt",
    "c",
    "g",
    "g/HEAD",
    "z",
    "z/canary.txt",
    "o",
    "rc",
    "rg",
    "rg/config",
    "pr",
    "pr/etc/hostname",
    "loop",
    "d",
    "d/a.txt",
    "d/e",
    "d/fifo",
    "w",
    "w/f",
    "w/canary.txt",
    "src/main.c",
    "fifo",
    "sparse",
    "deep",
    "new\nline",
    "bad\377name",
    "README.md",
    ".",
    "/workspace/s/canary.txt",
    "../canary.txt",
};
#define N_TARGETS (sizeof(targets) / sizeof(targets[0]))

static void host_fs_round(sp_fs *fs)
{
    sp_error *err = NULL;
    for (size_t i = 0; i < N_TARGETS; i++) {
        const char *t = targets[i];
        sp_fs_text *txt = NULL;
        call_begin("read", t);
        int rc = sp_fs_read(&txt, fs, t, NULL, &err);
        call_end();
        if (rc == 0)
            no_secret(txt->content, txt->content_len, call_name);
        sp_fs_text_free(txt);
        note(rc, &err);

        sp_fs_bytes *b = NULL;
        call_begin("read_bytes", t);
        rc = sp_fs_read_bytes(&b, fs, t, 0, 1 << 20, &err);
        call_end();
        if (rc == 0)
            no_secret(b->data, b->len, call_name);
        sp_fs_bytes_free(b);
        note(rc, &err);

        sp_fs_info *info = NULL;
        call_begin("stat", t);
        rc = sp_fs_stat(&info, fs, t, &err);
        call_end();
        sp_fs_info_free(info);
        note(rc, &err);

        sp_fs_entries *e = NULL;
        sp_fs_list_opts lo = SP_FS_LIST_OPTS_INIT;
        lo.depth = 3;
        lo.max_entries = 5000;
        call_begin("list", t);
        rc = sp_fs_list(&e, fs, t, &lo, &err);
        call_end();
        sp_fs_entries_free(e);
        note(rc, &err);
    }

    /* Writes and edits aimed through the links. */
    const char *wt[] = {"d/new.txt", "w/planted", "s/planted",  "x/tmp/planted", "c",
                        "o",         "rc",        "z/keep.txt", "src/main.c",    "d/e/f.txt"};
    for (size_t i = 0; i < sizeof(wt) / sizeof(wt[0]); i++) {
        call_begin("write", wt[i]);
        note(sp_fs_write(NULL, fs, wt[i], "host wrote\n", 11, NULL, &err), &err);
        call_end();
        call_begin("str_replace", wt[i]);
        note(sp_fs_str_replace(NULL, fs, wt[i], "e", "E", true, &err), &err);
        call_end();
        call_begin("mkdir", wt[i]);
        note(sp_fs_mkdir(fs, wt[i], true, true, &err), &err);
        call_end();
    }
    const char *dt[] = {"w", "d/e", "s/canary.txt", "z", "g/HEAD"};
    for (size_t i = 0; i < sizeof(dt) / sizeof(dt[0]); i++) {
        call_begin("delete", dt[i]);
        note(sp_fs_delete(fs, dt[i], true, &err), &err);
        call_end();
    }

    sp_fs_entries *e = NULL;
    call_begin("glob", "**");
    int rc = sp_fs_glob(&e, fs, "**", NULL, 20000, &err);
    call_end();
    sp_fs_entries_free(e);
    note(rc, &err);
    call_begin("glob", "*/*canary*");
    rc = sp_fs_glob(&e, fs, "{*,*/*,*/*/*}", NULL, 20000, &err);
    call_end();
    sp_fs_entries_free(e);
    note(rc, &err);

    sp_fs_matches *m = NULL;
    sp_fs_grep_opts go = SP_FS_GREP_OPTS_INIT;
    go.fixed_string = true;
    call_begin("grep", "secret");
    rc = sp_fs_grep(&m, fs, "SPSECRET", &go, &err);
    call_end();
    if (rc == 0) {
        for (size_t i = 0; i < m->n; i++)
            no_secret(m->v[i].line, strlen(m->v[i].line), "grep");
    }
    sp_fs_matches_free(m);
    note(rc, &err);
    go.fixed_string = false;
    go.max_matches = 5000;
    call_begin("grep", ".");
    rc = sp_fs_grep(&m, fs, "secret|.", &go, &err);
    call_end();
    if (rc == 0) {
        for (size_t i = 0; i < m->n; i++)
            no_secret(m->v[i].line, strlen(m->v[i].line), "grep");
    }
    sp_fs_matches_free(m);
    note(rc, &err);
}

static void host_hydrate_round(unsigned round)
{
    tu_rmtree(hydrate_dst);
    assert_int_equal(mkdir(hydrate_dst, 0755), 0);
    const char *allowed[] = {sp_sandbox_workspace(sb), NULL};
    sp_mount m = {0};
    m.host_path = sp_sandbox_workspace(sb);
    m.follow_symlinks = round % 2;
    const char *excl[] = {"sparse", NULL};
    if (round % 4 < 2)
        m.exclude = excl;
    sp_hydrate_opts ho = SP_HYDRATE_OPTS_INIT;
    ho.allowed_roots = allowed;
    sp_hydrate_result *r = NULL;
    sp_error *err = NULL;
    call_begin("hydrate", m.follow_symlinks ? "follow" : "verbatim");
    int rc = sp_hydrate(&r, hydrate_dst, &m, 1, &ho, &err);
    call_end();
    sp_hydrate_result_free(r);
    note(rc, &err);
    call_begin("scan hydrated", NULL);
    scan_path(hydrate_dst, "hydrate");
    call_end();
}

static sp_snapshot *first_snap;

static void host_snapshot_round(sp_snapstore *st, unsigned round)
{
    sp_error *err = NULL;
    sp_snapshot *snap = NULL;
    call_begin("snapshot", NULL);
    int rc = sp_snapshot_create(&snap, st, NULL, &err);
    call_end();
    note(rc, &err);
    if (rc == 0 && !first_snap)
        first_snap = snap;
    else
        sp_snapshot_free(snap);
    if (!first_snap)
        return;

    sp_snapdiff *d = NULL;
    sp_snapshot_diff_opts dopt = SP_SNAPSHOT_DIFF_OPTS_INIT;
    dopt.patch = true;
    call_begin("diff", first_snap->id);
    rc = sp_snapshot_diff(&d, st, first_snap->id, NULL, &dopt, &err);
    call_end();
    if (rc == 0 && d->patch)
        no_secret(d->patch, strlen(d->patch), "diff");
    sp_snapdiff_free(d);
    note(rc, &err);

    char *tar = tu_join(export_dir, "snap.tar");
    call_begin("export", first_snap->id);
    rc = sp_snapshot_export(st, first_snap->id, tar, -1, SP_SNAPSHOT_TAR, &err);
    call_end();
    note(rc, &err);
    call_begin("scan export", NULL);
    scan_path(export_dir, "export");
    call_end();
    unlink(tar);
    free(tar);

    if (round % 2 == 1) {
        call_begin("restore", first_snap->id);
        rc = sp_snapshot_restore(NULL, st, first_snap->id, &err);
        call_end();
        note(rc, &err);
    }
}

static void test_hostile_workload(void **state)
{
    (void)state;
    pthread_t wd;
    assert_int_equal(pthread_create(&wd, NULL, watchdog, NULL), 0);

    attacker a = {.script = attack_script()};
    pthread_t at;
    assert_int_equal(pthread_create(&at, NULL, attack, &a), 0);
    /* Let the attacker get going. */
    sleep(2);

    sp_error *err = NULL;
    sp_fs *fs = sp_sandbox_fs(sb, &err);
    if (!fs)
        fail_msg("fs: %s", err->message);
    char *store = tu_join(sp_sandbox_state_dir(sb), "snapshots.git");
    sp_snapstore *st = NULL;
    if (sp_snapstore_open(&st, sp_sandbox_workspace(sb), store, NULL, &err) < 0)
        fail_msg("snapstore: %s", err->message);
    free(store);

    int64_t end = now_ms() + (int64_t)attack_s * 1000;
    unsigned rounds = 0, max_rounds = long_run ? 100000 : 200;
    while (now_ms() < end && rounds < max_rounds) {
        host_fs_round(fs);
        host_hydrate_round(rounds);
        host_snapshot_round(st, rounds);
        check_sealed("during the attack");
        rounds++;
    }
    pthread_join(at, NULL);
    fprintf(stderr,
            "hostile: %u host rounds, %lu calls (%lu refused), %lu leak checks; attacker: "
            "rc=%d %s %s\n",
            rounds, calls, refusals, leaks_checked, a.rc, a.out, a.err);
    assert_int_equal(a.rc, 0);
    assert_non_null(strstr(a.out, "iterations="));
    assert_true(rounds >= 1);

    /* One quiet round after the attacker stopped, with its last traps set. */
    host_fs_round(fs);
    host_hydrate_round(1);
    host_snapshot_round(st, 1);
    check_sealed("after the attack");

    sp_snapshot_free(first_snap);
    first_snap = NULL;
    sp_snapstore_free(st);
    free(a.script);
    atomic_store(&watchdog_stop, true);
    pthread_join(wd, NULL);
}

int main(int argc, char **argv)
{
    /* test_hostile_long (--long) runs only with SANDPOD_LONG=1. */
    long_run = argc > 1 && strcmp(argv[1], "--long") == 0;
    const char *l = getenv("SANDPOD_LONG");
    if (long_run && !(l && strcmp(l, "1") == 0)) {
        fprintf(stderr, "skipping: the long hostile run needs SANDPOD_LONG=1\n");
        return 77;
    }
    attack_s = long_run ? 600 : 60;
    if (long_run)
        sparse_size = "10G";
    const char *sp = getenv("SP_HOSTILE_SPARSE");
    if (sp && *sp && strspn(sp, "0123456789KMG") == strlen(sp))
        sparse_size = sp;
    podman_url = tu_need_podman_or_skip();
    tu_crash_reports(call_name);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostile_workload),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
