/* Fuzz target: path normalization and contained resolution.
 *
 * A fixed tree (root/ beside outside/) holds every kind of hostile link:
 * relative and absolute escapes, links into /proc, loops, chains, links to
 * denied files, a fifo. The first input byte picks a filesystem call, the
 * rest is the path (or pattern) it gets. Properties checked on every run:
 *   - nothing a call returns holds the canary text of a file outside the
 *     root or of a denied file;
 *   - a normalized path is relative, has no `.`/`..`/empty component, and
 *     normalizing it again gives it back;
 *   - writes, mkdirs and deletes never change anything outside the root,
 *     nor a denied path inside it
 *     (then the tree is rebuilt, so every run starts from the same state).
 * Run it under tests/no_openat2 as well to cover the component walk. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fuzz.h"
#include "sandpod/fs.h"

#define CANARY "CANARY-7f3c9e-SECRET"

static char *base, *root, *outside;
static sp_fs *fs;
static char fingerprint[4096];

static void put(const char *dir, const char *rel, const char *content)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, content, strlen(content)) != (ssize_t)strlen(content))
        abort();
    close(fd);
}

static void mk(const char *dir, const char *rel)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    if (mkdir(p, 0755) < 0)
        abort();
}

static void ln(const char *target, const char *dir, const char *rel)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    if (symlink(target, p) < 0)
        abort();
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        return rmdir(path);
    return unlink(path);
}

static void rmtree(const char *path)
{
    nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS);
}

static void build_root(void)
{
    char abs_target[4096];
    if (mkdir(root, 0755) < 0)
        abort();
    put(root, "a.txt", "alpha\nsecond line\n");
    mk(root, "dir");
    put(root, "dir/b.txt", "beta\n");
    mk(root, "dir/sub");
    put(root, "dir/sub/c.txt", "gamma\n");
    mk(root, "empty");
    put(root, "bin.dat", "\x01\x02\x00\xff binary");
    ln("../..", root, "dir/up");
    ln("../../outside/secret.txt", root, "dir/up_secret");
    ln("dir/b.txt", root, "in_link");
    ln("dir", root, "dir_link");
    snprintf(abs_target, sizeof(abs_target), "%s/secret.txt", outside);
    ln(abs_target, root, "abs");
    ln(outside, root, "abs_dir");
    ln("/proc/self/root", root, "proc_root");
    ln("/proc/self/cwd", root, "proc_cwd");
    ln("loop", root, "loop");
    ln("chain2", root, "chain1");
    ln("dir/up/outside", root, "chain2");
    ln(".", root, "dot");
    ln("..", root, "dotdot");
    ln("/workspace/a.txt", root, "ws_abs");
    ln("../root/a.txt", root, "self_via_parent");
    put(root, "denied.txt", CANARY " denied\n");
    mk(root, "private");
    put(root, "private/key.txt", CANARY " private key\n");
    ln("denied.txt", root, "to_denied");
    ln("private/key.txt", root, "to_private");
    ln("private", root, "to_private_dir");
    char fifo[4096];
    snprintf(fifo, sizeof(fifo), "%s/fifo", root);
    if (mkfifo(fifo, 0644) < 0)
        abort();
}

/* Everything outside the root, as text: names, types, sizes, contents. */
static void take_fingerprint(char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    DIR *d = opendir(base);
    if (!d)
        abort();
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "base:%s;", de->d_name);
    closedir(d);
    const char *files[] = {"secret.txt", "dir/secret2.txt", "dir"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char p[4096], buf[256] = "";
        snprintf(p, sizeof(p), "%s/%s", outside, files[i]);
        struct stat st;
        if (lstat(p, &st) < 0) {
            len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s:missing;", files[i]);
            continue;
        }
        if (S_ISREG(st.st_mode)) {
            int fd = open(p, O_RDONLY | O_CLOEXEC);
            ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
            buf[n > 0 ? n : 0] = '\0';
            if (fd >= 0)
                close(fd);
        }
        len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s:%o:%lld:%s;", files[i],
                                (unsigned)st.st_mode, (long long)st.st_size, buf);
    }
    d = opendir(outside);
    if (!d)
        abort();
    while ((de = readdir(d)) != NULL)
        len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "out:%s;", de->d_name);
    closedir(d);
    /* Denied paths inside the root are off limits to the tools too. */
    char p[4096];
    snprintf(p, sizeof(p), "%s/private", root);
    d = opendir(p);
    while (d && (de = readdir(d)) != NULL)
        len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "private:%s;", de->d_name);
    if (d)
        closedir(d);
    const char *denied[] = {"denied.txt", "private/key.txt"};
    for (size_t i = 0; i < 2; i++) {
        char buf[256] = "";
        snprintf(p, sizeof(p), "%s/%s", root, denied[i]);
        int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
        buf[n > 0 ? n : 0] = '\0';
        if (fd >= 0)
            close(fd);
        len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s:%s;", denied[i], buf);
    }
}

static void cleanup(void)
{
    sp_fs_free(fs);
    if (base)
        rmtree(base);
}

static void open_fs(void)
{
    static const char *const deny[] = {"denied.txt", "private", NULL};
    sp_fs_opts o = SP_FS_OPTS_INIT;
    o.deny = deny;
    sp_error *err = NULL;
    sp_fs_free(fs);
    fs = NULL;
    if (sp_fs_open(&fs, root, &o, &err) < 0) {
        fprintf(stderr, "sp_fs_open: %s\n", err->message);
        abort();
    }
}

static void setup(void)
{
    /* Under tests/no_openat2 the fallback walk must be what runs. */
    if (getenv("SANDPOD_EXPECT_NO_OPENAT2")) {
        struct open_how how = {.flags = O_PATH, .resolve = RESOLVE_BENEATH};
        FZ_ASSERT(syscall(SYS_openat2, AT_FDCWD, ".", &how, sizeof(how)) < 0 && errno == ENOSYS,
                  "openat2 is not blocked");
    }
    char tmpl[4096];
    snprintf(tmpl, sizeof(tmpl), "%s/sp-fuzz-path-XXXXXX", fz_tmpdir());
    if (!mkdtemp(tmpl))
        abort();
    base = strdup(tmpl);
    size_t n = strlen(base) + 16;
    root = malloc(n);
    outside = malloc(n);
    snprintf(root, n, "%s/root", base);
    snprintf(outside, n, "%s/outside", base);
    if (mkdir(outside, 0755) < 0)
        abort();
    put(outside, "secret.txt", CANARY " outside\n");
    mk(outside, "dir");
    put(outside, "dir/secret2.txt", CANARY " outside too\n");
    build_root();
    take_fingerprint(fingerprint, sizeof(fingerprint));
    open_fs();
    atexit(cleanup);
}

static void no_canary(const void *data, size_t len, const char *what, const char *path)
{
    if (!data || len < strlen(CANARY))
        return;
    FZ_ASSERT(!memmem(data, len, CANARY, strlen(CANARY)), "%s(%s) returned a canary", what, path);
}

static void check_normalized(const char *in, size_t len)
{
    char *out = NULL;
    sp_error *err = NULL;
    if (sp_fs_path_normalize(&out, in, len, &err) < 0) {
        FZ_ASSERT(err && err->message && !out, "failure without a message");
        sp_error_free(err);
        return;
    }
    FZ_ASSERT(out && *out && out[0] != '/', "not relative: '%s'", out);
    if (strcmp(out, ".") != 0) {
        const char *p = out;
        for (;;) {
            const char *slash = strchr(p, '/');
            size_t cl = slash ? (size_t)(slash - p) : strlen(p);
            FZ_ASSERT(cl > 0 && !(cl == 1 && p[0] == '.') &&
                          !(cl == 2 && p[0] == '.' && p[1] == '.'),
                      "bad component in '%s'", out);
            if (!slash)
                break;
            p = slash + 1;
        }
    }
    char *again = NULL;
    FZ_ASSERT(sp_fs_path_normalize(&again, out, strlen(out), NULL) == 0 && strcmp(again, out) == 0,
              "not idempotent: '%s' -> '%s'", out, again ? again : "(error)");
    free(again);
    free(out);
}

static void check_entries(const sp_fs_entries *e, const char *what, const char *path)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->n; i++) {
        FZ_ASSERT(e->v[i].path && e->v[i].path[0] != '/', "%s(%s): absolute entry", what, path);
        FZ_ASSERT(strncmp(e->v[i].path, "denied.txt", 10) != 0 &&
                      strncmp(e->v[i].path, "private", 7) != 0,
                  "%s(%s): listed denied %s", what, path, e->v[i].path);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fs)
        setup();
    if (size < 1 || size > 4096)
        return 0;
    unsigned op = data[0] % 14;
    const char *raw = (const char *)data + 1;
    size_t rlen = size - 1;
    check_normalized(raw, rlen);
    char *path = fz_cstr(data + 1, rlen);
    sp_error *err = NULL;
    bool mutated = false;

    switch (op) {
    case 0:
        break;
    case 1: {
        sp_fs_text *t = NULL;
        if (sp_fs_read(&t, fs, path, NULL, &err) == 0)
            no_canary(t->content, t->content_len, "read", path);
        sp_fs_text_free(t);
        break;
    }
    case 2: {
        sp_fs_bytes *b = NULL;
        if (sp_fs_read_bytes(&b, fs, path, 0, 0, &err) == 0)
            no_canary(b->data, b->len, "read_bytes", path);
        sp_fs_bytes_free(b);
        break;
    }
    case 3: {
        sp_fs_info *st = NULL;
        if (sp_fs_stat(&st, fs, path, &err) == 0)
            FZ_ASSERT(st->path && st->path[0] != '/', "stat(%s): path %s", path, st->path);
        sp_fs_info_free(st);
        (void)sp_fs_exists(fs, path);
        break;
    }
    case 4: {
        sp_fs_entries *e = NULL;
        sp_fs_list_opts lo = SP_FS_LIST_OPTS_INIT;
        lo.depth = 4;
        if (sp_fs_list(&e, fs, path, &lo, &err) == 0)
            check_entries(e, "list", path);
        sp_fs_entries_free(e);
        break;
    }
    case 5: {
        sp_fs_entries *e = NULL;
        if (sp_fs_glob(&e, fs, path, NULL, 200, &err) == 0)
            check_entries(e, "glob", path);
        sp_fs_entries_free(e);
        break;
    }
    case 6: {
        sp_fs_entries *e = NULL;
        if (sp_fs_glob(&e, fs, "**", path, 200, &err) == 0)
            check_entries(e, "glob-base", path);
        sp_fs_entries_free(e);
        break;
    }
    case 7: {
        sp_fs_matches *m = NULL;
        sp_fs_grep_opts go = SP_FS_GREP_OPTS_INIT;
        go.path = path;
        if (sp_fs_grep(&m, fs, ".", &go, &err) == 0) {
            for (size_t i = 0; i < m->n; i++)
                no_canary(m->v[i].line, strlen(m->v[i].line), "grep", path);
        }
        sp_fs_matches_free(m);
        break;
    }
    case 8: {
        sp_fs_text *t = NULL;
        if (sp_fs_view(&t, fs, path, 1, -1, &err) == 0)
            no_canary(t->content, t->content_len, "view", path);
        sp_fs_text_free(t);
        break;
    }
    case 9:
        (void)sp_fs_write(NULL, fs, path, "written\n", 8, NULL, &err);
        mutated = true;
        break;
    case 10:
        (void)sp_fs_mkdir(fs, path, true, true, &err);
        mutated = true;
        break;
    case 11:
        (void)sp_fs_delete(fs, path, true, &err);
        mutated = true;
        break;
    case 12:
        (void)sp_fs_str_replace(NULL, fs, path, "e", "E", true, &err);
        mutated = true;
        break;
    case 13:
        (void)sp_fs_insert(fs, path, -1, "inserted", &err);
        mutated = true;
        break;
    }
    /* Messages quote the path, so only judge them when the path itself
     * does not hold the canary text. */
    if (err && !memmem(data, size, CANARY, strlen(CANARY)))
        FZ_ASSERT(err->message &&
                      !memmem(err->message, strlen(err->message), CANARY, strlen(CANARY)),
                  "error message holds a canary");
    sp_error_free(err);

    if (mutated) {
        char now[sizeof(fingerprint)];
        take_fingerprint(now, sizeof(now));
        FZ_ASSERT(strcmp(now, fingerprint) == 0,
                  "op %u on '%s' changed the outside or a denied path:\n%s\nvs\n%s", op, path,
                  fingerprint, now);
        rmtree(root);
        build_root();
        open_fs();
    }
    free(path);
    return 0;
}
