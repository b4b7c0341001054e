/* Disk faults (issue 8): a full filesystem and read-only folders under every
 * write path of the library. A small tmpfs, mounted by the test in a scratch
 * folder, fills up during an sp_fs write, an apply_patch, a hydration, a
 * snapshot whose store is on it, a restore into a workspace on it and a
 * sandbox creation; a read-only tmpfs or bind mount stands under a state
 * root, a snapshot store and a workspace. Each failure must be a negative
 * SP_E* code with a message that names the file or operation and the cause,
 * must lose nothing (the workspace is byte for byte as it was, a patch is all
 * or nothing, a store stays consistent and its snapshots restore exactly),
 * must leave no temp files, and the same operation must succeed once there
 * is room again.
 *
 * Needs root (mounts). Skips (exit 77) otherwise, or fails under CI=true. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandpod/fs.h"
#include "sandpod/hydrate.h"
#include "sandpod/patch.h"
#include "sandpod/sandbox.h"
#include "sandpod/snapshot.h"

#define NO_SPACE  "no space left on device"
#define READ_ONLY "read-only file system"
/* A Podman URL nothing listens on: the tests below must fail before any
 * container is asked for. */
#define NO_PODMAN "unix:///nonexistent/sandpod-faults-disk.sock"

struct fx {
    char *dir; /* scratch folder on the ordinary disk */
    char *mnt; /* dir/small, where the tests mount */
    char *mounts[4];
    int n_mounts;
};

/* ------------------------------------------------------------ helpers -- */

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    f->dir = tu_mkdtemp();
    f->mnt = tu_join(f->dir, "small");
    tu_mkdir(f->dir, "small");
    *state = f;
    return 0;
}

/* Unmounts whatever the test mounted, also after a failed assertion. */
static int teardown(void **state)
{
    struct fx *f = *state;
    for (int i = f->n_mounts - 1; i >= 0; i--) {
        if (umount2(f->mounts[i], MNT_DETACH) < 0)
            print_error("umount %s: %s\n", f->mounts[i], strerror(errno));
        free(f->mounts[i]);
    }
    tu_rmtree(f->dir);
    free(f->dir);
    free(f->mnt);
    free(f);
    return 0;
}

static void mount_tmpfs(struct fx *f, const char *path, const char *opts)
{
    if (mount("tmpfs", path, "tmpfs", 0, opts) < 0)
        fail_msg("mount tmpfs (%s) on %s: %s", opts, path, strerror(errno));
    f->mounts[f->n_mounts++] = strdup(path);
}

/* Resize a tmpfs (or make it read-only): the way these tests free space. */
static void remount(const char *path, unsigned long flags, const char *opts)
{
    if (mount("tmpfs", path, "tmpfs", MS_REMOUNT | flags, opts) < 0)
        fail_msg("remount %s (%s): %s", path, opts ? opts : "", strerror(errno));
}

/* A read-only view of `src` at `dst`. */
static void bind_ro(struct fx *f, const char *src, const char *dst)
{
    if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
        fail_msg("bind %s on %s: %s", src, dst, strerror(errno));
    f->mounts[f->n_mounts++] = strdup(dst);
    if (mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) < 0)
        fail_msg("remount %s read-only: %s", dst, strerror(errno));
}

/* Bytes that do not compress, so the store cannot squeeze them. */
static void write_random(const char *dir, const char *rel, size_t len, uint64_t seed)
{
    unsigned char *buf = malloc(len);
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (unsigned char)(x >> 24);
    }
    tu_write_n(dir, rel, buf, len, 0644);
    free(buf);
}

/* Fill the filesystem holding `dir` with `dir/name`; returns its size. */
static off_t fill(const char *dir, const char *name)
{
    char *p = tu_join(dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        fail_msg("open %s: %s", p, strerror(errno));
    char buf[4096];
    memset(buf, 'f', sizeof(buf));
    off_t total = 0;
    for (;;) {
        ssize_t n = write(fd, buf, sizeof(buf));
        if (n <= 0)
            break;
        total += n;
    }
    assert_int_equal(errno, ENOSPC);
    close(fd);
    free(p);
    return total;
}

/* Give back `bytes` of what fill() took. */
static void unfill(const char *dir, const char *name, off_t bytes)
{
    char *p = tu_join(dir, name);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_true(st.st_size >= bytes);
    assert_int_equal(truncate(p, st.st_size - bytes), 0);
    free(p);
}

static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct lines {
    char **v;
    size_t n, cap;
} lines;

static void lines_add(lines *l, const char *s)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = realloc(l->v, l->cap * sizeof(char *));
    }
    l->v[l->n++] = strdup(s);
}

/* One line per entry below dfd (type, mode, size, content hash or link
 * target), never following symlinks. */
static void manifest_dir(int dfd, const char *prefix, lines *out)
{
    DIR *d = fdopendir(dup(dfd));
    assert_non_null(d);
    lines names = {0};
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            lines_add(&names, e->d_name);
    closedir(d);
    if (names.n > 1)
        qsort(names.v, names.n, sizeof(char *), cmp_str);
    for (size_t i = 0; i < names.n; i++) {
        const char *nm = names.v[i];
        struct stat st;
        assert_int_equal(fstatat(dfd, nm, &st, AT_SYMLINK_NOFOLLOW), 0);
        char path[4096], line[8400];
        snprintf(path, sizeof(path), "%s%s", prefix, nm);
        if (S_ISREG(st.st_mode)) {
            int fd = openat(dfd, nm, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            assert_true(fd >= 0);
            char *buf = malloc((size_t)st.st_size + 1);
            size_t got = 0;
            ssize_t r;
            while ((r = read(fd, buf + got, (size_t)st.st_size + 1 - got)) > 0)
                got += (size_t)r;
            close(fd);
            snprintf(line, sizeof(line), "%s file %04o %zu %016llx", path, st.st_mode & 07777, got,
                     (unsigned long long)fnv(buf, got));
            free(buf);
        } else if (S_ISLNK(st.st_mode)) {
            char t[4096];
            ssize_t n = readlinkat(dfd, nm, t, sizeof(t) - 1);
            assert_true(n >= 0);
            t[n] = '\0';
            snprintf(line, sizeof(line), "%s link -> %s", path, t);
        } else if (S_ISDIR(st.st_mode)) {
            snprintf(line, sizeof(line), "%s dir %04o", path, st.st_mode & 07777);
        } else {
            snprintf(line, sizeof(line), "%s other %04o", path, st.st_mode & 07777);
        }
        lines_add(out, line);
        if (S_ISDIR(st.st_mode)) {
            int cfd = openat(dfd, nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            assert_true(cfd >= 0);
            char sub[4200];
            snprintf(sub, sizeof(sub), "%s/", path);
            manifest_dir(cfd, sub, out);
            close(cfd);
        }
        free(names.v[i]);
    }
    free(names.v);
}

/* The whole tree below `root` as text, one sorted line per entry. */
static char *manifest(const char *root)
{
    int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        fail_msg("open %s: %s", root, strerror(errno));
    lines l = {0};
    manifest_dir(fd, "", &l);
    close(fd);
    size_t total = 1;
    for (size_t i = 0; i < l.n; i++)
        total += strlen(l.v[i]) + 1;
    char *out = malloc(total);
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < l.n; i++) {
        at += (size_t)snprintf(out + at, total - at, "%s\n", l.v[i]);
        free(l.v[i]);
    }
    free(l.v);
    return out;
}

/* Compare two manifests, showing the first line that differs. */
static void assert_same_tree(const char *want, const char *got, const char *what)
{
    if (strcmp(want, got) == 0)
        return;
    const char *a = want, *b = got;
    while (*a || *b) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        if (la != lb || memcmp(a, b, la) != 0)
            fail_msg("%s changed:\n  want: %.*s\n  got:  %.*s", what, (int)la, a, (int)lb, b);
        a += la + (a[la] ? 1 : 0);
        b += lb + (b[lb] ? 1 : 0);
    }
}

static bool has_line(const char *m, const char *line, size_t len)
{
    for (const char *p = m; *p;) {
        size_t l = strcspn(p, "\n");
        if (l == len && memcmp(p, line, len) == 0)
            return true;
        p += l + (p[l] ? 1 : 0);
    }
    return false;
}

/* No temp file, staging folder or lock left behind anywhere below `root`
 * (the store's own lock file, sandpod/lock, is not a leftover). */
static void assert_no_temps(const char *root)
{
    char *m = manifest(root);
    for (const char *p = m; *p;) {
        size_t l = strcspn(p, "\n");
        size_t nl = strcspn(p, " ");
        const char *name = p;
        for (size_t i = 0; i < nl; i++)
            if (p[i] == '/')
                name = p + i + 1;
        size_t n = (size_t)(p + nl - name);
        bool temp = (n > 9 && memcmp(name, ".sandpod-", 9) == 0) ||
                    (n > 8 && memcmp(name, "tmp_obj_", 8) == 0) ||
                    (n > 5 && memcmp(name + n - 5, ".lock", 5) == 0) ||
                    memmem(name, n, ".tmp", 4) != NULL;
        if (temp)
            fail_msg("left behind in %s: %.*s", root, (int)l, p);
        p += l + (p[l] ? 1 : 0);
    }
    free(m);
}

static bool contains_nocase(const char *hay, const char *needle)
{
    return hay && strcasestr(hay, needle) != NULL;
}

/* The call failed with `code` (negative, and in err->code) and a message
 * naming `what` and saying `why`. The message is printed: its wording is
 * what a user sees. */
static void expect_fail(int r, sp_error *err, int code, const char *what, const char *why)
{
    if (r >= 0)
        fail_msg("expected failure %d, got %d (%s)", code, r, what);
    assert_non_null(err);
    print_message("    error %d: %s\n", r, err->message);
    if (r != code)
        fail_msg("expected code %d, got %d: %s", code, r, err->message);
    assert_int_equal(err->code, code);
    if (what && !strstr(err->message, what))
        fail_msg("message does not name %s: %s", what, err->message);
    if (why && !contains_nocase(err->message, why))
        fail_msg("message does not say \"%s\": %s", why, err->message);
}

/* The same check without printing, for sweeps that fail many times. */
static void expect_no_space(int r, sp_error *err, const char *what)
{
    if (r >= 0)
        fail_msg("%s: expected a failure, got %d", what, r);
    assert_non_null(err);
    if (r != SP_ERROR || err->code != SP_ERROR || err->sys_errno != ENOSPC ||
        !contains_nocase(err->message, NO_SPACE))
        fail_msg("%s: expected SP_ERROR / ENOSPC, got %d: %s", what, r, err->message);
}

/* Fill the filesystem of `dir` again, then free `keep` bytes of it. */
static void fill_but(const char *dir, off_t keep)
{
    char *p = tu_join(dir, "filler");
    unlink(p);
    free(p);
    off_t filled = fill(dir, "filler");
    unfill(dir, "filler", keep < filled ? keep : filled);
}

#define OK(call)                                                                                   \
    do {                                                                                           \
        sp_error *ok_err_ = NULL;                                                                  \
        int ok_r_ = (call);                                                                        \
        if (ok_r_ < 0)                                                                             \
            fail_msg("%s: %d %s", #call, ok_r_, ok_err_ ? ok_err_->message : "?");                 \
        sp_error_free(ok_err_);                                                                    \
    } while (0)
#define E (&ok_err_)

static void write_text(const char *dir, const char *rel, const char *s)
{
    tu_write(dir, rel, s, 0644);
}

/* ------------------------------------------------------------- sp_fs -- */

/* test_fs covers overwriting and appending to a file on a full disk. Here:
 * a new file in new folders (the folders must not stay), a new file with
 * SP_FS_CREATE, binary bytes, str_replace and insert; then the same calls
 * once there is room. */
static void test_fs_write_full(void **state)
{
    struct fx *f = *state;
    mount_tmpfs(f, f->mnt, "size=256k");
    char *ws = tu_join(f->mnt, "ws");
    tu_mkdir(f->mnt, "ws");
    tu_mkdir(ws, "src");
    write_text(ws, "src/main.c", "int main(void)\n{\n    return 0;\n}\n");
    write_text(ws, "notes.txt", "one\ntwo\n");
    sp_fs *fs = NULL;
    OK(sp_fs_open(&fs, ws, NULL, E));
    off_t filled = fill(f->mnt, "filler");
    char *before = manifest(ws);

    size_t big = 64 * 1024;
    char *data = malloc(big + 1);
    memset(data, 'x', big);
    data[big] = '\0';
    sp_error *err = NULL;
    int r = sp_fs_write(NULL, fs, "new/deep/file.txt", data, big, NULL, &err);
    expect_fail(r, err, SP_ERROR, "new/deep/file.txt", NO_SPACE);
    assert_int_equal(err->sys_errno, ENOSPC);
    sp_error_free(err), err = NULL;

    sp_fs_write_opts co = SP_FS_WRITE_OPTS_INIT;
    co.mode = SP_FS_CREATE;
    r = sp_fs_write_bytes(NULL, fs, "src/blob.bin", data, big, &co, &err);
    expect_fail(r, err, SP_ERROR, "src/blob.bin", NO_SPACE);
    sp_error_free(err), err = NULL;

    r = sp_fs_str_replace(NULL, fs, "src/main.c", "return 0;", data, false, &err);
    expect_fail(r, err, SP_ERROR, "src/main.c", NO_SPACE);
    sp_error_free(err), err = NULL;

    r = sp_fs_insert(fs, "notes.txt", 1, data, &err);
    expect_fail(r, err, SP_ERROR, "notes.txt", NO_SPACE);
    sp_error_free(err), err = NULL;

    char *after = manifest(ws);
    assert_same_tree(before, after, "workspace");
    free(after);
    assert_no_temps(f->mnt);

    /* Room again: every call goes through. */
    unfill(f->mnt, "filler", filled);
    OK(sp_fs_write(NULL, fs, "new/deep/file.txt", data, big, NULL, E));
    OK(sp_fs_write_bytes(NULL, fs, "src/blob.bin", data, big, &co, E));
    size_t n = 0;
    OK(sp_fs_str_replace(&n, fs, "src/main.c", "return 0;", "return 1;", false, E));
    assert_int_equal(n, 1);
    OK(sp_fs_insert(fs, "notes.txt", 1, "one and a half", E));
    char *s = tu_read(ws, "new/deep/file.txt", &n);
    assert_int_equal(n, big);
    assert_memory_equal(s, data, n);
    free(s);
    s = tu_read(ws, "src/main.c", NULL);
    assert_string_equal(s, "int main(void)\n{\n    return 1;\n}\n");
    free(s);
    s = tu_read(ws, "notes.txt", NULL);
    assert_string_equal(s, "one\none and a half\ntwo\n");
    free(s);
    assert_no_temps(f->mnt);
    free(before);
    free(data);
    sp_fs_free(fs);
    free(ws);
}

/* No inode left (blocks to spare): the temp file and new folders cannot be
 * created at all. */
static void test_fs_write_no_inodes(void **state)
{
    struct fx *f = *state;
    mount_tmpfs(f, f->mnt, "size=1m,nr_inodes=16");
    char *ws = tu_join(f->mnt, "ws");
    tu_mkdir(f->mnt, "ws");
    write_text(ws, "keep.txt", "precious\n");
    sp_fs *fs = NULL;
    OK(sp_fs_open(&fs, ws, NULL, E));
    int made = 0;
    for (;; made++) {
        char name[32];
        snprintf(name, sizeof(name), "inode%d", made);
        char *p = tu_join(f->mnt, name);
        int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        free(p);
        if (fd < 0) {
            assert_int_equal(errno, ENOSPC);
            break;
        }
        close(fd);
    }
    assert_true(made > 0);
    char *before = manifest(ws);

    sp_error *err = NULL;
    int r = sp_fs_write(NULL, fs, "keep.txt", "changed\n", 8, NULL, &err);
    expect_fail(r, err, SP_ERROR, "keep.txt", NO_SPACE);
    sp_error_free(err), err = NULL;
    r = sp_fs_write(NULL, fs, "a/b.txt", "new\n", 4, NULL, &err);
    expect_fail(r, err, SP_ERROR, "a", NO_SPACE);
    sp_error_free(err), err = NULL;
    r = sp_fs_mkdir(fs, "dir", false, false, &err);
    expect_fail(r, err, SP_ERROR, "dir", NO_SPACE);
    sp_error_free(err), err = NULL;

    char *after = manifest(ws);
    assert_same_tree(before, after, "workspace");
    free(after);
    assert_no_temps(f->mnt);

    /* Three inodes back: a folder, a file, and the temp file of an overwrite. */
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof(name), "inode%d", i);
        char *p = tu_join(f->mnt, name);
        assert_int_equal(unlink(p), 0);
        free(p);
    }
    OK(sp_fs_write(NULL, fs, "keep.txt", "changed\n", 8, NULL, E));
    OK(sp_fs_write(NULL, fs, "a/b.txt", "new\n", 4, NULL, E));
    char *s = tu_read(ws, "keep.txt", NULL);
    assert_string_equal(s, "changed\n");
    free(s);
    s = tu_read(ws, "a/b.txt", NULL);
    assert_string_equal(s, "new\n");
    free(s);
    assert_no_temps(f->mnt);
    free(before);
    sp_fs_free(fs);
    free(ws);
}

/* ------------------------------------------------------- apply_patch -- */

/* A patch that updates, adds, moves and deletes several files runs out of
 * space after some of its temp files are written: nothing changes. */
static void test_patch_full(void **state)
{
    struct fx *f = *state;
    mount_tmpfs(f, f->mnt, "size=512k");
    char *ws = tu_join(f->mnt, "ws");
    tu_mkdir(f->mnt, "ws");
    tu_mkdir(ws, "src");
    write_text(ws, "src/a.c", "a1\na2\na3\n");
    write_text(ws, "src/b.c", "b1\nb2\n");
    write_text(ws, "old.txt", "old\n");
    write_text(ws, "gone.txt", "gone\n");
    sp_fs *fs = NULL;
    OK(sp_fs_open(&fs, ws, NULL, E));

    /* Two small updates first, then a new file of ~48 KiB in new folders,
     * with room for ~16 KiB only. */
    size_t n_lines = 768;
    size_t cap = 4096 + n_lines * 64;
    char *patch = malloc(cap);
    size_t off = (size_t)snprintf(patch, cap,
                                  "*** Begin Patch\n"
                                  "*** Update File: src/a.c\n@@\n a1\n-a2\n+A2\n a3\n"
                                  "*** Update File: src/b.c\n@@\n b1\n+b1.5\n b2\n"
                                  "*** Update File: old.txt\n*** Move to: moved/new.txt\n"
                                  "@@\n-old\n+new\n"
                                  "*** Delete File: gone.txt\n"
                                  "*** Add File: gen/deep/big.txt\n");
    for (size_t i = 0; i < n_lines; i++)
        off += (size_t)snprintf(patch + off, cap - off, "+line %05zu %050d\n", i, 0);
    off += (size_t)snprintf(patch + off, cap - off, "*** End Patch\n");

    off_t filled = fill(f->mnt, "filler");
    unfill(f->mnt, "filler", 16 * 1024);
    char *before = manifest(ws);
    sp_patch_result *res = NULL;
    sp_error *err = NULL;
    int r = sp_fs_apply_patch(&res, fs, patch, off, NULL, &err);
    expect_fail(r, err, SP_ERROR, "gen/deep/big.txt", NO_SPACE);
    assert_null(res);
    sp_error_free(err), err = NULL;
    char *after = manifest(ws);
    assert_same_tree(before, after, "workspace");
    free(after);
    assert_no_temps(f->mnt);

    /* Room again: the whole patch applies. */
    unfill(f->mnt, "filler", filled - 16 * 1024);
    OK(sp_fs_apply_patch(&res, fs, patch, off, NULL, E));
    assert_int_equal(res->n, 5);
    sp_patch_result_free(res);
    char *s = tu_read(ws, "src/a.c", NULL);
    assert_string_equal(s, "a1\nA2\na3\n");
    free(s);
    s = tu_read(ws, "src/b.c", NULL);
    assert_string_equal(s, "b1\nb1.5\nb2\n");
    free(s);
    s = tu_read(ws, "moved/new.txt", NULL);
    assert_string_equal(s, "new\n");
    free(s);
    assert_false(tu_exists(ws, "old.txt"));
    assert_false(tu_exists(ws, "gone.txt"));
    size_t n = 0;
    s = tu_read(ws, "gen/deep/big.txt", &n);
    assert_int_equal(n, n_lines * 62);
    free(s);
    assert_no_temps(f->mnt);
    free(before);
    free(patch);
    sp_fs_free(fs);
    free(ws);
}

/* ---------------------------------------------------------- hydration -- */

static void make_source(const char *src)
{
    tu_mkdir(src, "lib");
    tu_mkdir(src, "lib/deep");
    tu_mkdir(src, "empty");
    write_text(src, "README", "hello\n");
    write_text(src, "lib/a.txt", "from the host\n");
    for (int i = 0; i < 6; i++) {
        char name[32];
        snprintf(name, sizeof(name), "lib/deep/blob%d.bin", i);
        write_random(src, name, 64 * 1024, (uint64_t)i + 1);
    }
    tu_symlink("lib/a.txt", src, "link");
}

/* Hydration into a workspace on a small tmpfs: the copy does not fit. */
static void test_hydrate_full(void **state)
{
    struct fx *f = *state;
    char *src = tu_join(f->dir, "src");
    tu_mkdir(f->dir, "src");
    make_source(src);
    mount_tmpfs(f, f->mnt, "size=256k");
    char *ws = tu_join(f->mnt, "ws");
    tu_mkdir(f->mnt, "ws");
    tu_mkdir(ws, "lib");
    write_text(ws, "README", "the workspace's own\n");
    write_text(ws, "lib/a.txt", "older\n");
    write_text(ws, "mine.txt", "untouched\n");
    char *before = manifest(ws);
    char *mnt_before = manifest(f->mnt);

    sp_mount m = {0};
    m.host_path = src;
    sp_hydrate_result *res = NULL;
    sp_error *err = NULL;
    int r = sp_hydrate(&res, ws, &m, 1, NULL, &err);
    expect_fail(r, err, SP_ERROR, "blob", NO_SPACE);
    assert_null(res);
    sp_error_free(err), err = NULL;
    /* Nothing half hydrated, no staging folder beside the workspace. */
    char *after = manifest(f->mnt);
    assert_same_tree(mnt_before, after, "the tmpfs");
    free(after);
    assert_no_temps(f->mnt);

    remount(f->mnt, 0, "size=2m");
    OK(sp_hydrate(&res, ws, &m, 1, NULL, E));
    sp_hydrate_result_free(res);
    char *s = tu_read(ws, "lib/a.txt", NULL);
    assert_string_equal(s, "from the host\n");
    free(s);
    s = tu_read(ws, "mine.txt", NULL);
    assert_string_equal(s, "untouched\n");
    free(s);
    char *want = manifest(src), *lib = tu_join(ws, "lib");
    char *got = manifest(lib), *wlib = tu_join(src, "lib");
    char *want_lib = manifest(wlib);
    assert_same_tree(want_lib, got, "lib");
    free(want), free(lib), free(got), free(wlib), free(want_lib);
    assert_no_temps(f->mnt);
    free(before);
    free(mnt_before);
    free(ws);
    free(src);
}

/* A sandbox whose state root is on a full disk: hydration fails before any
 * container is asked for, and the state root is as it was. */
static void test_sandbox_create_full(void **state)
{
    struct fx *f = *state;
    char *src = tu_join(f->dir, "src");
    tu_mkdir(f->dir, "src");
    make_source(src);
    mount_tmpfs(f, f->mnt, "size=256k,mode=0700"); /* a private state root */
    tu_mkdir(f->mnt, "sandboxes");
    tu_mkdir(f->mnt, "sandboxes/other");
    write_text(f->mnt, "sandboxes/other/sandbox.json", "{}\n");
    char *before = manifest(f->mnt);

    sp_mount m = {0};
    m.host_path = src;
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.name = "full";
    o.state_root = f->mnt;
    o.podman_url = NO_PODMAN;
    o.mounts = &m;
    o.n_mounts = 1;
    sp_sandbox *sb = NULL;
    sp_error *err = NULL;
    int r = sp_sandbox_create(&sb, &o, &err);
    expect_fail(r, err, SP_ERROR, "blob", NO_SPACE);
    assert_null(sb);
    sp_error_free(err);
    char *after = manifest(f->mnt);
    assert_same_tree(before, after, "state root");
    free(after);
    free(before);
    free(src);
}

/* ---------------------------------------------------------- snapshots -- */

/* The store is on the small tmpfs and fills up during a snapshot. */
static void test_snapshot_store_full(void **state)
{
    struct fx *f = *state;
    char *ws = tu_join(f->dir, "ws");
    tu_mkdir(f->dir, "ws");
    tu_mkdir(ws, "src");
    write_text(ws, "src/a.c", "int a;\n");
    write_text(ws, "README", "first\n");
    mount_tmpfs(f, f->mnt, "size=384k");
    char *store = tu_join(f->mnt, "store.git");
    sp_snapstore *s = NULL;
    OK(sp_snapstore_open(&s, ws, store, NULL, E));
    sp_snapshot *first = NULL;
    OK(sp_snapshot_create(&first, s, "first", E));
    char *m1 = manifest(ws);

    write_text(ws, "README", "second\n");
    tu_mkdir(ws, "data");
    for (int i = 0; i < 8; i++) {
        char name[32];
        snprintf(name, sizeof(name), "data/r%d.bin", i);
        write_random(ws, name, 64 * 1024, (uint64_t)i + 100);
    }
    char *m2 = manifest(ws);
    sp_snapshot *second = NULL;
    sp_error *err = NULL;
    int r = sp_snapshot_create(&second, s, "second", &err);
    expect_fail(r, err, SP_ERROR, store, NO_SPACE);
    assert_non_null(strstr(err->message, "data/r")); /* the file being stored */
    assert_null(second);
    sp_error_free(err), err = NULL;

    /* The workspace is untouched, the store consistent and without temp
     * files; it still lists only the first snapshot. */
    char *now = manifest(ws);
    assert_same_tree(m2, now, "workspace");
    free(now);
    tu_assert_fsck(store);
    assert_no_temps(store);
    sp_snapshots *l = NULL;
    OK(sp_snapshot_list(&l, s, E));
    assert_int_equal(l->n, 1);
    assert_string_equal(l->v[0]->id, first->id);
    sp_snapshots_free(l);

    /* A new handle (as another process would open it) sees the same. */
    sp_snapstore_free(s);
    s = NULL;
    OK(sp_snapstore_open(&s, ws, store, NULL, E));

    remount(f->mnt, 0, "size=2m");
    OK(sp_snapshot_create(&second, s, "second", E));
    tu_assert_fsck(store);
    OK(sp_snapshot_restore(NULL, s, "first", E));
    now = manifest(ws);
    assert_same_tree(m1, now, "restored first snapshot");
    free(now);
    OK(sp_snapshot_restore(NULL, s, "second", E));
    now = manifest(ws);
    assert_same_tree(m2, now, "restored second snapshot");
    free(now);
    assert_no_temps(store);
    sp_snapshot_free(first);
    sp_snapshot_free(second);
    sp_snapstore_free(s);
    free(m1);
    free(m2);
    free(store);
    free(ws);
}

/* Is every line of `got` one of `a` or one of `b` (path by path, either the
 * old or the new version, never a third, half-written one)? */
static void assert_each_old_or_new(const char *a, const char *b, const char *got)
{
    for (const char *p = got; *p;) {
        size_t l = strcspn(p, "\n");
        if (!has_line(a, p, l) && !has_line(b, p, l))
            fail_msg("neither before nor snapshot: %.*s", (int)l, p);
        p += l + (p[l] ? 1 : 0);
    }
}

/* A restore into a workspace on a full tmpfs (the store elsewhere). A
 * restore is not atomic (it can be run again instead): each path is left as
 * it was or as the snapshot has it, never half written. */
static void test_restore_full(void **state)
{
    struct fx *f = *state;
    mount_tmpfs(f, f->mnt, "size=512k");
    char *ws = tu_join(f->mnt, "ws");
    tu_mkdir(f->mnt, "ws");
    tu_mkdir(ws, "src");
    write_text(ws, "src/a.c", "int a;\n");
    write_text(ws, "src/b.c", "int b;\n");
    write_random(ws, "big1.bin", 96 * 1024, 1);
    write_random(ws, "big2.bin", 96 * 1024, 2);
    char *store = tu_join(f->dir, "store.git");
    sp_snapstore *s = NULL;
    OK(sp_snapstore_open(&s, ws, store, NULL, E));
    OK(sp_snapshot_create(NULL, s, "base", E));
    char *mbase = manifest(ws);

    /* Work since: the big files gone, others changed or new. */
    char *p = tu_join(ws, "big1.bin");
    unlink(p);
    free(p);
    p = tu_join(ws, "big2.bin");
    unlink(p);
    free(p);
    write_text(ws, "src/a.c", "int a = 1;\n");
    write_text(ws, "new.txt", "new\n");
    char *before = manifest(ws);
    off_t filled = fill(f->mnt, "filler");

    sp_error *err = NULL;
    int r = sp_snapshot_restore(NULL, s, "base", &err);
    expect_fail(r, err, SP_ERROR, "big", NO_SPACE);
    sp_error_free(err), err = NULL;
    char *now = manifest(ws);
    assert_each_old_or_new(before, mbase, now);
    free(now);
    assert_no_temps(f->mnt);
    tu_assert_fsck(store);

    unfill(f->mnt, "filler", filled);
    OK(sp_snapshot_restore(NULL, s, "base", E));
    now = manifest(ws);
    assert_same_tree(mbase, now, "restored workspace");
    free(now);
    assert_no_temps(f->mnt);
    sp_snapstore_free(s);
    free(before);
    free(mbase);
    free(store);
    free(ws);
}

/* ---------------------------------------------------------- read-only -- */

/* sp_sandbox_create under a read-only state root: a clear error, nothing
 * left, no Podman needed. Twice: an empty state root, and one that already
 * holds sandboxes. */
static void test_sandbox_create_readonly(void **state)
{
    struct fx *f = *state;
    mount_tmpfs(f, f->mnt, "size=64k");
    char *empty = tu_join(f->mnt, "empty");
    tu_mkdir(f->mnt, "empty");
    char *used = tu_join(f->mnt, "used");
    tu_mkdir(f->mnt, "used");
    tu_mkdir(used, "sandboxes");
    tu_mkdir(used, "sandboxes/other");
    write_text(used, "sandboxes/other/sandbox.json", "{}\n");
    remount(f->mnt, MS_RDONLY, NULL);
    char *before = manifest(f->mnt);

    const char *roots[] = {empty, used};
    for (int i = 0; i < 2; i++) {
        sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
        o.name = "box";
        o.state_root = roots[i];
        o.podman_url = NO_PODMAN;
        sp_sandbox *sb = NULL;
        sp_error *err = NULL;
        int r = sp_sandbox_create(&sb, &o, &err);
        expect_fail(r, err, SP_EREADONLY, roots[i], READ_ONLY);
        assert_int_equal(err->sys_errno, EROFS);
        assert_null(sb);
        sp_error_free(err);
    }
    char *after = manifest(f->mnt);
    assert_same_tree(before, after, "state roots");
    free(after);
    free(before);
    free(empty);
    free(used);
}

/* Snapshots into a store seen read-only: a clear error; the store is
 * unchanged and still whole. */
static void test_snapshot_store_readonly(void **state)
{
    struct fx *f = *state;
    char *ws = tu_join(f->dir, "ws");
    tu_mkdir(f->dir, "ws");
    write_text(ws, "a.txt", "a\n");
    char *store = tu_join(f->dir, "store.git");
    sp_snapstore *s = NULL;
    OK(sp_snapstore_open(&s, ws, store, NULL, E));
    OK(sp_snapshot_create(NULL, s, "first", E));
    sp_snapstore_free(s);
    s = NULL;
    write_text(ws, "a.txt", "changed\n");
    write_text(ws, "b.txt", "b\n");
    char *ro = tu_join(f->dir, "store-ro");
    tu_mkdir(f->dir, "store-ro");
    bind_ro(f, store, ro);
    char *store_before = manifest(store);
    char *ws_before = manifest(ws);

    /* A read-only store still serves reads: list, diff, export. */
    OK(sp_snapstore_open(&s, ws, ro, NULL, E));
    sp_snapshots *l = NULL;
    OK(sp_snapshot_list(&l, s, E));
    assert_int_equal(l->n, 1);
    sp_snapshots_free(l);
    sp_snapdiff *d = NULL;
    OK(sp_snapshot_diff(&d, s, "first", "first", NULL, E));
    sp_snapdiff_free(d);
    char *tar = tu_join(f->dir, "first.tar");
    OK(sp_snapshot_export(s, "first", tar, -1, SP_SNAPSHOT_TAR, E));
    unlink(tar);
    free(tar);

    /* Taking, deleting or collecting snapshots fails, saying why; so does
     * a diff with the live workspace (its objects would go to the store). */
    sp_error *err = NULL;
    int r = sp_snapshot_diff(&d, s, "first", NULL, NULL, &err);
    expect_fail(r, err, SP_EREADONLY, ro, "read-only");
    sp_error_free(err);
    err = NULL;
    r = sp_snapshot_create(NULL, s, "second", &err);
    expect_fail(r, err, SP_EREADONLY, ro, "read-only");
    assert_int_equal(err->sys_errno, EROFS);
    sp_error_free(err);
    err = NULL;
    r = sp_snapshot_delete(s, "first", &err);
    expect_fail(r, err, SP_EREADONLY, ro, "read-only");
    sp_error_free(err);
    err = NULL;
    sp_snapstore_gc_result gr;
    r = sp_snapstore_gc(&gr, s, &err);
    expect_fail(r, err, SP_EREADONLY, ro, "read-only");
    sp_error_free(err);
    char *ws_mid = manifest(ws);
    assert_same_tree(ws_before, ws_mid, "workspace");
    free(ws_mid);

    /* ... and a restore from it makes the workspace exact. */
    OK(sp_snapshot_restore(NULL, s, "first", E));
    char *ra = tu_read(ws, "a.txt", NULL);
    assert_string_equal(ra, "a\n");
    free(ra);
    assert_false(tu_exists(ws, "b.txt"));
    sp_snapstore_free(s);
    s = NULL;
    write_text(ws, "a.txt", "changed\n");
    write_text(ws, "b.txt", "b\n");
    char *now = manifest(store);
    assert_same_tree(store_before, now, "store");
    free(now);
    now = manifest(ws);
    assert_same_tree(ws_before, now, "workspace");
    free(now);
    tu_assert_fsck(store);

    /* Writable again: it works, and the first snapshot still restores. */
    OK(sp_snapstore_open(&s, ws, store, NULL, E));
    OK(sp_snapshot_create(NULL, s, "second", E));
    OK(sp_snapshot_restore(NULL, s, "first", E));
    char *a = tu_read(ws, "a.txt", NULL);
    assert_string_equal(a, "a\n");
    free(a);
    assert_false(tu_exists(ws, "b.txt"));
    tu_assert_fsck(store);
    sp_snapstore_free(s);
    free(store_before);
    free(ws_before);
    free(ro);
    free(store);
    free(ws);
}

/* sp_fs on a workspace seen read-only (the handle itself is writable):
 * every write fails with SP_EREADONLY and says so; reads work. */
static void test_fs_readonly_workspace(void **state)
{
    struct fx *f = *state;
    char *ws = tu_join(f->dir, "ws");
    tu_mkdir(f->dir, "ws");
    tu_mkdir(ws, "src");
    write_text(ws, "src/a.c", "int a;\n");
    write_text(ws, "notes.txt", "one\ntwo\n");
    char *ro = tu_join(f->dir, "ws-ro");
    tu_mkdir(f->dir, "ws-ro");
    bind_ro(f, ws, ro);
    char *before = manifest(ws);
    sp_fs *fs = NULL;
    OK(sp_fs_open(&fs, ro, NULL, E));

    sp_fs_text *t = NULL;
    OK(sp_fs_read(&t, fs, "notes.txt", NULL, E));
    assert_string_equal(t->content, "one\ntwo\n");
    sp_fs_text_free(t);
    sp_fs_entries *e = NULL;
    OK(sp_fs_list(&e, fs, ".", NULL, E));
    assert_int_equal(e->n, 2);
    sp_fs_entries_free(e);
    sp_fs_info *st = NULL;
    OK(sp_fs_stat(&st, fs, "src/a.c", E));
    assert_int_equal(st->size, 7);
    sp_fs_info_free(st);

    sp_error *err = NULL;
    int r = sp_fs_write(NULL, fs, "notes.txt", "x\n", 2, NULL, &err);
    expect_fail(r, err, SP_EREADONLY, "notes.txt", READ_ONLY);
    sp_error_free(err), err = NULL;
    sp_fs_write_opts ao = SP_FS_WRITE_OPTS_INIT;
    ao.mode = SP_FS_APPEND;
    r = sp_fs_write(NULL, fs, "notes.txt", "x\n", 2, &ao, &err);
    expect_fail(r, err, SP_EREADONLY, "notes.txt", READ_ONLY);
    sp_error_free(err), err = NULL;
    r = sp_fs_write(NULL, fs, "new/file.txt", "x\n", 2, NULL, &err);
    expect_fail(r, err, SP_EREADONLY, "new", READ_ONLY);
    sp_error_free(err), err = NULL;
    r = sp_fs_mkdir(fs, "dir", false, false, &err);
    expect_fail(r, err, SP_EREADONLY, "dir", READ_ONLY);
    sp_error_free(err), err = NULL;
    r = sp_fs_delete(fs, "src/a.c", false, &err);
    expect_fail(r, err, SP_EREADONLY, "src/a.c", READ_ONLY);
    sp_error_free(err), err = NULL;
    r = sp_fs_delete(fs, "src", true, &err);
    expect_fail(r, err, SP_EREADONLY, "src", READ_ONLY);
    sp_error_free(err), err = NULL;
    r = sp_fs_str_replace(NULL, fs, "src/a.c", "int a;", "int b;", false, &err);
    expect_fail(r, err, SP_EREADONLY, "src/a.c", READ_ONLY);
    sp_error_free(err), err = NULL;
    r = sp_fs_insert(fs, "notes.txt", -1, "three", &err);
    expect_fail(r, err, SP_EREADONLY, "notes.txt", READ_ONLY);
    sp_error_free(err), err = NULL;
    const char *patch = "*** Begin Patch\n*** Update File: src/a.c\n@@\n-int a;\n+int b;\n"
                        "*** Add File: added.txt\n+x\n*** End Patch\n";
    sp_patch_result *res = NULL;
    r = sp_fs_apply_patch(&res, fs, patch, strlen(patch), NULL, &err);
    expect_fail(r, err, SP_EREADONLY, "src/a.c", READ_ONLY);
    assert_null(res);
    sp_error_free(err), err = NULL;
    /* A dry run reads only: fine. */
    sp_patch_opts po = SP_PATCH_OPTS_INIT;
    po.dry_run = true;
    OK(sp_fs_apply_patch(&res, fs, patch, strlen(patch), &po, E));
    sp_patch_result_free(res);

    char *after = manifest(ws);
    assert_same_tree(before, after, "workspace");
    free(after);
    assert_no_temps(ws);
    sp_fs_free(fs);
    free(before);
    free(ro);
    free(ws);
}

/* -------------------------------------------------------------- sweeps -- */

/* The disk fills at every point of a multi-file patch in turn (one more
 * page of room each time): every failure leaves the workspace as it was,
 * until the patch fits. */
static void test_patch_full_sweep(void **state)
{
    struct fx *f = *state;
    mount_tmpfs(f, f->mnt, "size=256k");
    char *ws = tu_join(f->mnt, "ws");
    tu_mkdir(f->mnt, "ws");
    tu_mkdir(ws, "src");
    char patch[32768];
    size_t off = (size_t)snprintf(patch, sizeof(patch), "*** Begin Patch\n");
    for (int i = 0; i < 6; i++) {
        char name[32], body[6200];
        size_t bl = 0;
        for (int l = 0; l < 100; l++)
            bl += (size_t)snprintf(body + bl, sizeof(body) - bl, "file %d line %02d %040d\n", i, l,
                                   0);
        snprintf(name, sizeof(name), "src/f%d.txt", i);
        write_text(ws, name, body);
        off += (size_t)snprintf(patch + off, sizeof(patch) - off,
                                "*** Update File: %s\n@@\n file %d line 50 %040d\n"
                                "-file %d line 51 %040d\n+changed %d\n",
                                name, i, 0, i, 0, i);
    }
    for (int i = 0; i < 2; i++) {
        off += (size_t)snprintf(patch + off, sizeof(patch) - off, "*** Add File: new/n%d.txt\n", i);
        for (int l = 0; l < 100; l++)
            off += (size_t)snprintf(patch + off, sizeof(patch) - off, "+new %d %050d\n", l, 0);
    }
    off += (size_t)snprintf(patch + off, sizeof(patch) - off, "*** End Patch\n");
    sp_fs *fs = NULL;
    OK(sp_fs_open(&fs, ws, NULL, E));
    char *before = manifest(ws);

    int failures = 0;
    for (off_t room = 0;; room += 4096) {
        assert_true(room < 256 * 1024);
        fill_but(f->mnt, room);
        sp_patch_result *res = NULL;
        sp_error *err = NULL;
        int r = sp_fs_apply_patch(&res, fs, patch, off, NULL, &err);
        if (r == 0) {
            sp_patch_result_free(res);
            break;
        }
        expect_no_space(r, err, "apply_patch");
        sp_error_free(err);
        char *now = manifest(ws);
        assert_same_tree(before, now, "workspace after a failed patch");
        free(now);
        assert_no_temps(f->mnt);
        failures++;
    }
    print_message("    %d failed attempts, then the patch applied\n", failures);
    assert_true(failures >= 8); /* each of the eight new files failed once */
    for (int i = 0; i < 6; i++) {
        char name[32];
        snprintf(name, sizeof(name), "src/f%d.txt", i);
        char *c = tu_read(ws, name, NULL);
        char want[32];
        snprintf(want, sizeof(want), "\nchanged %d\n", i);
        assert_non_null(strstr(c, want));
        free(c);
    }
    assert_true(tu_exists(ws, "new/n1.txt"));
    assert_no_temps(f->mnt);
    free(before);
    sp_fs_free(fs);
    free(ws);
}

/* The store fills at every point of a snapshot in turn (objects, trees,
 * the commit, the ref, the stat cache): after each failure the store
 * passes fsck, lists only the earlier snapshot and holds no temp files;
 * once the snapshot fits, both restore exactly. */
static void test_snapshot_full_sweep(void **state)
{
    struct fx *f = *state;
    char *ws = tu_join(f->dir, "ws");
    tu_mkdir(f->dir, "ws");
    write_text(ws, "README", "first\n");
    mount_tmpfs(f, f->mnt, "size=256k");
    char *store = tu_join(f->mnt, "store.git");
    sp_snapstore *s = NULL;
    OK(sp_snapstore_open(&s, ws, store, NULL, E));
    sp_snapshot *first = NULL;
    OK(sp_snapshot_create(&first, s, "first", E));
    char *m1 = manifest(ws);
    write_text(ws, "README", "second\n");
    for (int d = 0; d < 4; d++) {
        char dir[16];
        snprintf(dir, sizeof(dir), "d%d", d);
        tu_mkdir(ws, dir);
        for (int i = 0; i < 5; i++) {
            char name[32];
            snprintf(name, sizeof(name), "d%d/f%d.bin", d, i);
            write_random(ws, name, 3000, (uint64_t)(d * 10 + i + 1));
        }
    }
    char *m2 = manifest(ws);

    int failures = 0, ref_failures = 0;
    sp_snapshot *second = NULL;
    for (int attempt = 0;; attempt++) {
        assert_true(attempt < 100);
        /* One page of room gets one object further each time, then to
         * the ref; but each attempt makes a new commit (a new id and
         * time), which leaves no page for the ref: two pages after a
         * while. */
        fill_but(f->mnt, 4096 * (attempt < 30 ? 1 : 2));
        sp_error *err = NULL;
        int r = sp_snapshot_create(&second, s, "second", &err);
        if (r == 0)
            break;
        expect_no_space(r, err, "snapshot");
        ref_failures += strstr(err->message, "ref") != NULL;
        sp_error_free(err);
        assert_null(second);
        tu_assert_fsck(store);
        assert_no_temps(store);
        sp_snapshots *l = NULL;
        OK(sp_snapshot_list(&l, s, E));
        assert_int_equal(l->n, 1);
        sp_snapshots_free(l);
        char *now = manifest(ws);
        assert_same_tree(m2, now, "workspace after a failed snapshot");
        free(now);
        failures++;
    }
    print_message("    %d failed attempts (%d writing the ref), then the snapshot fit\n", failures,
                  ref_failures);
    assert_true(failures >= 20); /* at least one per new file */
    assert_true(ref_failures >= 1);
    char *p = tu_join(f->mnt, "filler");
    unlink(p);
    free(p);
    tu_assert_fsck(store);
    OK(sp_snapshot_restore(NULL, s, "first", E));
    char *now = manifest(ws);
    assert_same_tree(m1, now, "restored first snapshot");
    free(now);
    OK(sp_snapshot_restore(NULL, s, "second", E));
    now = manifest(ws);
    assert_same_tree(m2, now, "restored second snapshot");
    free(now);
    sp_snapshot_free(first);
    sp_snapshot_free(second);
    sp_snapstore_free(s);
    free(m1);
    free(m2);
    free(store);
    free(ws);
}

/* A restore into a full workspace, one page more room each time: every
 * failure leaves each path old or new and no temp file, until it is done. */
static void test_restore_full_sweep(void **state)
{
    struct fx *f = *state;
    mount_tmpfs(f, f->mnt, "size=256k");
    char *ws = tu_join(f->mnt, "ws");
    tu_mkdir(f->mnt, "ws");
    tu_mkdir(ws, "d");
    for (int i = 0; i < 12; i++) {
        char name[32];
        snprintf(name, sizeof(name), i % 2 ? "d/f%d.bin" : "f%d.bin", i);
        write_random(ws, name, 6000, (uint64_t)i + 1);
    }
    char *store = tu_join(f->dir, "store.git");
    sp_snapstore *s = NULL;
    OK(sp_snapstore_open(&s, ws, store, NULL, E));
    OK(sp_snapshot_create(NULL, s, "base", E));
    char *mbase = manifest(ws);
    for (int i = 0; i < 12; i++) {
        char name[32];
        snprintf(name, sizeof(name), i % 2 ? "d/f%d.bin" : "f%d.bin", i);
        write_random(ws, name, 2000, (uint64_t)i + 100);
    }
    write_text(ws, "d/new.txt", "new\n");
    char *before = manifest(ws);

    int failures = 0;
    for (int attempt = 0;; attempt++) {
        assert_true(attempt < 60);
        /* A file of the snapshot takes two pages, the one it replaces one:
         * each attempt gets one file further. */
        fill_but(f->mnt, 2 * 4096);
        sp_error *err = NULL;
        int r = sp_snapshot_restore(NULL, s, "base", &err);
        if (r == 0)
            break;
        expect_no_space(r, err, "restore");
        sp_error_free(err);
        char *now = manifest(ws);
        assert_each_old_or_new(before, mbase, now);
        free(now);
        assert_no_temps(f->mnt);
        failures++;
    }
    print_message("    %d failed attempts, then the restore finished\n", failures);
    assert_true(failures >= 6);
    char *now = manifest(ws);
    assert_same_tree(mbase, now, "restored workspace");
    free(now);
    tu_assert_fsck(store);
    sp_snapstore_free(s);
    free(before);
    free(mbase);
    free(store);
    free(ws);
}

/* Hydration with a little more room each time: the copy fails at every
 * stage of the staging folder, and the workspace never changes. */
static void test_hydrate_full_sweep(void **state)
{
    struct fx *f = *state;
    char *src = tu_join(f->dir, "src");
    tu_mkdir(f->dir, "src");
    make_source(src);
    mount_tmpfs(f, f->mnt, "size=1m");
    char *ws = tu_join(f->mnt, "ws");
    tu_mkdir(f->mnt, "ws");
    write_text(ws, "README", "the workspace's own\n");
    char *before = manifest(ws);
    sp_mount m = {0};
    m.host_path = src;
    int failures = 0;
    for (off_t room = 0;; room += 16 * 1024) {
        assert_true(room < 1024 * 1024);
        fill_but(f->mnt, room);
        sp_hydrate_result *res = NULL;
        sp_error *err = NULL;
        int r = sp_hydrate(&res, ws, &m, 1, NULL, &err);
        if (r == 0) {
            sp_hydrate_result_free(res);
            break;
        }
        expect_no_space(r, err, "hydrate");
        sp_error_free(err);
        char *now = manifest(ws);
        assert_same_tree(before, now, "workspace after a failed hydration");
        free(now);
        assert_no_temps(f->mnt);
        failures++;
    }
    print_message("    %d failed attempts, then the hydration fit\n", failures);
    assert_true(failures >= 6); /* one per 64 KiB file at least */
    char *c = tu_read(ws, "lib/a.txt", NULL);
    assert_string_equal(c, "from the host\n");
    free(c);
    assert_no_temps(f->mnt);
    free(before);
    free(ws);
    free(src);
}

/* ---------------------------------------------------------------- main -- */

/* Can this process mount a tmpfs? Decided once, before any test: a test
 * that cannot mount skips (77), except under CI=true, where it fails. */
static void need_mounts_or_skip(void)
{
    const char *why = NULL;
    char *dir = NULL;
    if (geteuid() != 0) {
        why = "not root";
    } else {
        dir = tu_mkdtemp();
        if (mount("tmpfs", dir, "tmpfs", 0, "size=64k") < 0)
            why = strerror(errno);
        else
            umount2(dir, MNT_DETACH);
        rmdir(dir);
        free(dir);
    }
    if (!why)
        return;
    const char *ci = getenv("CI");
    bool in_ci = ci && strcmp(ci, "true") == 0;
    fprintf(stderr, "test_faults_disk: cannot mount a tmpfs (%s)%s\n", why,
            in_ci ? "; CI=true requires it" : "; skipping");
    exit(in_ci ? 1 : 77);
}

int main(void)
{
    need_mounts_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fs_write_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_write_no_inodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_patch_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hydrate_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sandbox_create_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_store_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restore_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sandbox_create_readonly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_store_readonly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_readonly_workspace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_patch_full_sweep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_full_sweep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restore_full_sweep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hydrate_full_sweep, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
