/* Differential test of apply_patch against git.
 *
 * Each round makes random files (repeated lines, trailing spaces, missing
 * final newlines, empty files, CRLF files, names git must quote, exec
 * bits), stages them in a scratch repo, edits them at random (inserts,
 * deletes and replacements near the start, the middle and the end; new,
 * deleted, renamed and mode-changed files), and has `git diff --cached -M`
 * against the first tree write the patch. The patch is then applied to two copies of the
 * originals: one by sp_fs_apply_patch(), one by `git apply`. Both results
 * must be byte-for-byte the same, and the same as the edited files.
 *
 * Where the diff can be said unambiguously in the Codex format (every
 * hunk's old lines occur once in their file, files end with a newline, no
 * CR bytes), it is rewritten that way and applied through the Codex path
 * too, and must give the same contents.
 *
 * Wrong line numbers (test_offset_cases, test_offsets_random): hand-made
 * hunks whose headers are off (up, down, two hunks, repeated context, ties,
 * start and end of file, no final newline, CRLF, -U0) and random diffs
 * whose headers are moved by -8..8 lines, or whose file gained lines, are
 * applied by both: both refuse, or both give the same bytes.
 *
 * Fixed seed; SANDPOD_PATCH_ROUNDS changes the number of rounds (300) and
 * SANDPOD_PATCH_SEED the seed.
 * Exits 77 (skip) when git is missing. */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandpod/fs.h"
#include "sandpod/patch.h"

#define MAX_FILES 6

static uint64_t rng_state = 0x5eed5eedcafef00dull;

static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static size_t pick(size_t n)
{
    return (size_t)(rnd() % n);
}

static bool chance(unsigned percent)
{
    return pick(100) < percent;
}

/* Names, some of which git quotes ("caf\303\251", tab) or pads (space). */
static const char *const NAMES[] = {
    "a.txt",           "b.c",
    "src/main.c",      "src/util/h.h",
    "docs/read me.md", "caf\xc3\xa9.txt",
    "deep/x/y/z.txt",  "t\tab.txt",
    "Makefile",        "src/main2.c",
};
#define N_NAMES (sizeof(NAMES) / sizeof(NAMES[0]))

static const char *const WORDS[] = {
    "alpha", "beta",         "gamma",      "{",         "}",   "return 0;", "int x = 1;",
    "",      "    indented", "// comment", "foo(bar);", "end", "alpha  ",   "\tbeta",
};
#define N_WORDS (sizeof(WORDS) / sizeof(WORDS[0]))

/* A file: lines without endings, and how it ends. */
typedef struct tfile {
    char *name;
    char **lines;
    size_t n;
    bool final_nl, crlf, exec;
} tfile;

typedef struct tree {
    tfile f[MAX_FILES + 4];
    size_t n;
} tree;

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    assert_non_null(p);
    return p;
}

static void tfile_dispose(tfile *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->lines[i]);
    free(f->lines);
    free(f->name);
    memset(f, 0, sizeof(*f));
}

static void tree_dispose(tree *t)
{
    for (size_t i = 0; i < t->n; i++)
        tfile_dispose(&t->f[i]);
    t->n = 0;
}

static char *random_line(void)
{
    if (chance(25)) {
        char buf[32];
        snprintf(buf, sizeof(buf), "line %u", (unsigned)pick(1000));
        return xstrdup(buf);
    }
    return xstrdup(WORDS[pick(N_WORDS)]);
}

static void insert_lines(tfile *f, size_t at, size_t k)
{
    f->lines = realloc(f->lines, (f->n + k + 1) * sizeof(char *));
    assert_non_null(f->lines);
    memmove(f->lines + at + k, f->lines + at, (f->n - at) * sizeof(char *));
    for (size_t i = 0; i < k; i++)
        f->lines[at + i] = random_line();
    f->n += k;
}

static void delete_lines(tfile *f, size_t at, size_t k)
{
    for (size_t i = 0; i < k; i++)
        free(f->lines[at + i]);
    memmove(f->lines + at, f->lines + at + k, (f->n - at - k) * sizeof(char *));
    f->n -= k;
}

static void random_file(tfile *f, const char *name)
{
    memset(f, 0, sizeof(*f));
    f->name = xstrdup(name);
    size_t n = chance(8) ? 0 : 1 + pick(30);
    insert_lines(f, 0, n);
    f->final_nl = n == 0 || chance(80);
    f->crlf = chance(8);
    f->exec = chance(10);
}

static void copy_file(tfile *to, const tfile *from, const char *name)
{
    *to = *from;
    to->name = xstrdup(name);
    to->lines = malloc((from->n + 1) * sizeof(char *));
    assert_non_null(to->lines);
    for (size_t i = 0; i < from->n; i++)
        to->lines[i] = xstrdup(from->lines[i]);
}

/* Where an edit lands: near the start, the end, or anywhere. */
static size_t spot(size_t n)
{
    if (n == 0)
        return 0;
    switch (pick(3)) {
    case 0:
        return pick(n < 3 ? n : 3);
    case 1:
        return n - 1 - pick(n < 3 ? n : 3);
    default:
        return pick(n);
    }
}

static void edit_file(tfile *f)
{
    size_t edits = 1 + pick(3);
    for (size_t e = 0; e < edits; e++) {
        size_t at = spot(f->n);
        switch (pick(3)) {
        case 0: /* insert (possibly at the very end) */
            insert_lines(f, chance(20) ? f->n : at, 1 + pick(4));
            break;
        case 1: /* delete */
            if (f->n)
                delete_lines(f, at, 1 + pick(f->n - at < 4 ? f->n - at : 4));
            break;
        default: /* replace */
            if (f->n) {
                size_t k = 1 + pick(f->n - at < 3 ? f->n - at : 3);
                delete_lines(f, at, k);
                insert_lines(f, at, 1 + pick(3));
            }
            break;
        }
    }
    if (chance(15))
        f->final_nl = !f->final_nl;
    if (f->n == 0)
        f->final_nl = true;
}

static char *render(const tfile *f, size_t *len)
{
    size_t cap = 16;
    for (size_t i = 0; i < f->n; i++)
        cap += strlen(f->lines[i]) + 2;
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t off = 0;
    for (size_t i = 0; i < f->n; i++) {
        size_t l = strlen(f->lines[i]);
        memcpy(buf + off, f->lines[i], l);
        off += l;
        if (i + 1 < f->n || f->final_nl) {
            if (f->crlf)
                buf[off++] = '\r';
            buf[off++] = '\n';
        }
    }
    buf[off] = '\0';
    *len = off;
    return buf;
}

/* Write a tree below dir, creating folders. */
static void write_tree(const char *dir, const tree *t)
{
    for (size_t i = 0; i < t->n; i++) {
        const tfile *f = &t->f[i];
        char *path = tu_join(dir, f->name);
        for (char *s = strchr(path + strlen(dir) + 1, '/'); s; s = strchr(s + 1, '/')) {
            *s = '\0';
            mkdir(path, 0755);
            *s = '/';
        }
        free(path);
        size_t len;
        char *data = render(f, &len);
        tu_write_n(dir, f->name, data, len, f->exec ? 0755 : 0644);
        free(data);
    }
}

/* ------------------------------------------------------ running git -- */

/* Run argv in cwd with stdout to out_path (or /dev/null) and stderr to
 * err_path; returns the exit status, or -1. */
static int run(const char *cwd, const char *out_path, const char *err_path, char *const argv[])
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (cwd && chdir(cwd) < 0)
            _exit(126);
        int out = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int errfd = open(err_path ? err_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out < 0 || errfd < 0 || dup2(out, 1) < 0 || dup2(errfd, 2) < 0)
            _exit(126);
        execvp(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#define GIT(cwd, out, ...)                                                                         \
    do {                                                                                           \
        char *argv_[] = {"git", __VA_ARGS__, NULL};                                                \
        int rc_ = run(cwd, out, errlog, argv_);                                                    \
        if (rc_ != 0) {                                                                            \
            char *e_ = tu_read(base, "stderr.txt", NULL);                                          \
            fail_msg("git %s failed (%d): %s", argv_[1], rc_, e_ ? e_ : "");                       \
        }                                                                                          \
    } while (0)

static char *base, *errlog;

/* ------------------------------------------------------ tree compare -- */

typedef struct snap {
    char **paths;
    char **data;
    size_t *lens;
    bool *exec;
    size_t n;
} snap;

static void snap_add(snap *s, const char *rel, const char *dir)
{
    s->paths = realloc(s->paths, (s->n + 1) * sizeof(char *));
    s->data = realloc(s->data, (s->n + 1) * sizeof(char *));
    s->lens = realloc(s->lens, (s->n + 1) * sizeof(size_t));
    s->exec = realloc(s->exec, (s->n + 1) * sizeof(bool));
    s->paths[s->n] = xstrdup(rel);
    s->data[s->n] = tu_read(dir, rel, &s->lens[s->n]);
    assert_non_null(s->data[s->n]);
    char *p = tu_join(dir, rel);
    struct stat st;
    assert_int_equal(lstat(p, &st), 0);
    free(p);
    s->exec[s->n] = (st.st_mode & 0100) != 0;
    s->n++;
}

/* Every regular file below dir (empty folders do not count: git apply
 * removes the folders a delete empties, sandpod leaves them). */
static void snap_walk(snap *s, const char *dir, const char *rel)
{
    char *path = rel ? tu_join(dir, rel) : xstrdup(dir);
    DIR *d = opendir(path);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, ".git"))
            continue;
        char *sub = rel ? tu_join(rel, e->d_name) : xstrdup(e->d_name);
        if (e->d_type == DT_DIR)
            snap_walk(s, dir, sub);
        else
            snap_add(s, sub, dir);
        free(sub);
    }
    closedir(d);
    free(path);
}

static int cmp_idx(const void *a, const void *b, void *ctx)
{
    char **paths = ctx;
    return strcmp(paths[*(const size_t *)a], paths[*(const size_t *)b]);
}

static void snap_take(snap *s, const char *dir)
{
    memset(s, 0, sizeof(*s));
    snap_walk(s, dir, NULL);
    /* Sort all four arrays by path. */
    size_t *idx = malloc((s->n + 1) * sizeof(size_t));
    for (size_t i = 0; i < s->n; i++)
        idx[i] = i;
    qsort_r(idx, s->n, sizeof(size_t), cmp_idx, s->paths);
    snap t = {malloc((s->n + 1) * sizeof(char *)), malloc((s->n + 1) * sizeof(char *)),
              malloc((s->n + 1) * sizeof(size_t)), malloc((s->n + 1) * sizeof(bool)), s->n};
    for (size_t i = 0; i < s->n; i++) {
        t.paths[i] = s->paths[idx[i]];
        t.data[i] = s->data[idx[i]];
        t.lens[i] = s->lens[idx[i]];
        t.exec[i] = s->exec[idx[i]];
    }
    free(idx);
    free(s->paths);
    free(s->data);
    free(s->lens);
    free(s->exec);
    *s = t;
}

static void snap_dispose(snap *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->paths[i]);
        free(s->data[i]);
    }
    free(s->paths);
    free(s->data);
    free(s->lens);
    free(s->exec);
}

/* Same files, same bytes (and, with modes, same exec bits). */
static void snap_expect_equal(const snap *a, const snap *b, bool modes, const char *what,
                              unsigned round, const char *patch)
{
    bool ok = a->n == b->n;
    for (size_t i = 0; ok && i < a->n; i++)
        ok = !strcmp(a->paths[i], b->paths[i]) && a->lens[i] == b->lens[i] &&
             !memcmp(a->data[i], b->data[i], a->lens[i]) && (!modes || a->exec[i] == b->exec[i]);
    if (ok)
        return;
    fprintf(stderr, "round %u: %s differ\n--- patch:\n%s\n", round, what, patch);
    for (size_t i = 0; i < a->n; i++)
        fprintf(stderr, "  left  %s (%zu bytes, x=%d): [%s]\n", a->paths[i], a->lens[i], a->exec[i],
                a->data[i]);
    for (size_t i = 0; i < b->n; i++)
        fprintf(stderr, "  right %s (%zu bytes, x=%d): [%s]\n", b->paths[i], b->lens[i], b->exec[i],
                b->data[i]);
    fail();
}

/* ------------------------------------------- the diff as Codex text -- */

static char *unquote_name(const char *s)
{
    if (s[0] != '"')
        return xstrdup(s);
    char *out = malloc(strlen(s) + 1);
    size_t o = 0;
    for (const char *p = s + 1; *p && *p != '"'; p++) {
        if (*p != '\\') {
            out[o++] = *p;
            continue;
        }
        p++;
        if (*p == 't')
            out[o++] = '\t';
        else if (*p == 'n')
            out[o++] = '\n';
        else if (*p >= '0' && *p <= '7') {
            out[o++] = (char)(((p[0] - '0') << 6) | ((p[1] - '0') << 3) | (p[2] - '0'));
            p += 2;
        } else
            out[o++] = *p;
    }
    out[o] = '\0';
    return out;
}

/* The name after a git "--- a/" style prefix, or NULL for /dev/null. */
static char *diff_name(const char *line)
{
    const char *s = line + 4;
    if (!strncmp(s, "/dev/null", 9))
        return NULL;
    char *n = unquote_name(s);
    size_t l = strlen(n);
    if (l && n[l - 1] == '\t')
        n[l - 1] = '\0';
    memmove(n, n + 2, strlen(n + 2) + 1); /* a/ or b/ */
    return n;
}

static const tfile *find_file(const tree *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->f[i].name, name))
            return &t->f[i];
    return NULL;
}

static size_t occurrences(const tfile *f, char **pre, size_t np)
{
    size_t n = 0;
    for (size_t at = 0; at + np <= f->n; at++) {
        size_t j = 0;
        while (j < np && !strcmp(f->lines[at + j], pre[j]))
            j++;
        n += j == np;
    }
    return n;
}

typedef struct sbuf {
    char *s;
    size_t len, cap;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->s = realloc(b->s, b->cap);
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_adds(sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

/* Rewrite a git diff as a Codex patch; NULL when it cannot say the same
 * thing unambiguously. */
static char *to_codex(const char *diff, const tree *a, const tree *b)
{
    for (size_t i = 0; i < a->n; i++)
        if ((a->f[i].n && !a->f[i].final_nl) || a->f[i].crlf)
            return NULL;
    for (size_t i = 0; i < b->n; i++)
        if ((b->f[i].n && !b->f[i].final_nl) || b->f[i].crlf)
            return NULL;
    sbuf out = {NULL, 0, 0};
    sb_adds(&out, "*** Begin Patch\n");
    char *copy = xstrdup(diff);
    char *save = NULL;
    char *old_name = NULL, *new_name = NULL, *ren_from = NULL, *ren_to = NULL;
    bool is_new = false, is_del = false, ok = true;
    char **pre = NULL;
    size_t np = 0;
    const tfile *cur = NULL;
    sbuf chunk = {NULL, 0, 0};

/* Close the hunk being gathered: its old lines must occur once. */
#define FLUSH_HUNK()                                                                               \
    do {                                                                                           \
        if (chunk.len) {                                                                           \
            if (!cur || (np ? occurrences(cur, pre, np) != 1 : cur->n != 0))                       \
                ok = false;                                                                        \
            sb_adds(&out, "@@\n");                                                                 \
            sb_add(&out, chunk.s, chunk.len);                                                      \
            chunk.len = 0;                                                                         \
        }                                                                                          \
        for (size_t k_ = 0; k_ < np; k_++)                                                         \
            free(pre[k_]);                                                                         \
        np = 0;                                                                                    \
    } while (0)

    for (char *line = strtok_r(copy, "\n", &save); line && ok; line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, "diff --git ", 11)) {
            FLUSH_HUNK();
            free(old_name);
            free(new_name);
            free(ren_from);
            free(ren_to);
            old_name = new_name = ren_from = ren_to = NULL;
            is_new = is_del = false;
            cur = NULL;
        } else if (!strncmp(line, "new file mode", 13)) {
            is_new = true;
        } else if (!strncmp(line, "deleted file mode", 17)) {
            is_del = true;
        } else if (!strncmp(line, "rename from ", 12)) {
            ren_from = unquote_name(line + 12);
        } else if (!strncmp(line, "rename to ", 10)) {
            ren_to = unquote_name(line + 10);
            /* A pure rename has no "---" line: say it now. */
            sb_adds(&out, "*** Update File: ");
            sb_adds(&out, ren_from);
            sb_adds(&out, "\n*** Move to: ");
            sb_adds(&out, ren_to);
            sb_adds(&out, "\n");
            cur = find_file(a, ren_from);
        } else if (!strncmp(line, "--- ", 4)) {
            old_name = diff_name(line);
        } else if (!strncmp(line, "+++ ", 4)) {
            new_name = diff_name(line);
            if (is_new) {
                sb_adds(&out, "*** Add File: ");
                sb_adds(&out, new_name);
                sb_adds(&out, "\n");
            } else if (is_del) {
                sb_adds(&out, "*** Delete File: ");
                sb_adds(&out, old_name);
                sb_adds(&out, "\n");
            } else if (!ren_to) {
                sb_adds(&out, "*** Update File: ");
                sb_adds(&out, old_name);
                sb_adds(&out, "\n");
                cur = find_file(a, old_name);
            }
        } else if (!strncmp(line, "@@ ", 3)) {
            FLUSH_HUNK();
        } else if (line[0] == '+' && is_new) {
            sb_adds(&out, line);
            sb_adds(&out, "\n");
        } else if ((line[0] == ' ' || line[0] == '-' || line[0] == '+') && !is_del) {
            if (line[0] != '+') {
                pre = realloc(pre, (np + 1) * sizeof(char *));
                pre[np++] = xstrdup(line + 1);
            }
            sb_adds(&chunk, line);
            sb_adds(&chunk, "\n");
        }
    }
    FLUSH_HUNK();
#undef FLUSH_HUNK
    /* An empty new file and a deleted empty file have no "---" lines. */
    free(copy);
    free(old_name);
    free(new_name);
    free(ren_from);
    free(ren_to);
    free(pre);
    free(chunk.s);
    if (!ok || strstr(diff, "index 0000000..e69de29") || strstr(diff, "index e69de29..") ||
        strstr(diff, "old mode")) {
        free(out.s);
        return NULL;
    }
    sb_adds(&out, "*** End Patch\n");
    return out.s;
}

/* ------------------------------------------------------------- rounds -- */

static void clear_dir(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, ".git"))
            continue;
        char *p = tu_join(dir, e->d_name);
        tu_rmtree(p);
        free(p);
    }
    closedir(d);
}

static bool has_name(const tree *t, const char *name)
{
    return find_file(t, name) != NULL;
}

/* A name for a new file that neither tree uses yet (and that is not a
 * folder of another file in them), or NULL. */
static const char *free_name(const tree *a, const tree *b)
{
    for (int tries = 0; tries < 20; tries++) {
        const char *n = NAMES[pick(N_NAMES)];
        if (!has_name(a, n) && !has_name(b, n))
            return n;
    }
    return NULL;
}

static void test_against_git(void **state)
{
    (void)state;
    unsigned rounds = 300;
    const char *env = getenv("SANDPOD_PATCH_ROUNDS");
    if (env && *env)
        rounds = (unsigned)strtoul(env, NULL, 10);
    const char *seed = getenv("SANDPOD_PATCH_SEED");
    if (seed && *seed)
        rng_state = strtoull(seed, NULL, 0) | 1;

    char *repo = tu_join(base, "repo");
    assert_int_equal(mkdir(repo, 0755), 0);
    GIT(repo, NULL, "init", "-q");
    GIT(repo, NULL, "config", "core.autocrlf", "false");
    char *patch_path = tu_join(base, "patch.diff");
    char *tree_path = tu_join(base, "tree.txt");
    unsigned codex_rounds = 0, files_compared = 0, unidiff_zero = 0;

    for (unsigned round = 0; round < rounds; round++) {
        tree a = {.n = 0}, b = {.n = 0};
        size_t nfiles = 1 + pick(4);
        for (size_t i = 0; i < nfiles; i++) {
            const char *n = free_name(&a, &a);
            if (n)
                random_file(&a.f[a.n++], n);
        }
        for (size_t i = 0; i < a.n; i++) {
            unsigned what = (unsigned)pick(100);
            if (what < 10)
                continue; /* deleted */
            const char *name = a.f[i].name;
            if (what < 22) {
                const char *n = free_name(&a, &b);
                if (n)
                    name = n; /* renamed, maybe edited */
            }
            tfile *f = &b.f[b.n++];
            copy_file(f, &a.f[i], name);
            if (what >= 30 || (what >= 10 && what < 22 && chance(50)))
                edit_file(f);
            if (chance(10))
                f->exec = !f->exec;
        }
        if (chance(30)) {
            const char *n = free_name(&a, &b);
            if (n)
                random_file(&b.f[b.n++], n);
        }

        clear_dir(repo);
        write_tree(repo, &a);
        GIT(repo, NULL, "add", "-A");
        GIT(repo, tree_path, "write-tree");
        char *tree_id = tu_read(base, "tree.txt", NULL);
        assert_non_null(tree_id);
        tree_id[strcspn(tree_id, "\n")] = '\0';
        clear_dir(repo);
        write_tree(repo, &b);
        GIT(repo, NULL, "add", "-A");
        bool zero = chance(10);
        unidiff_zero += zero;
        char *ctx = zero ? "-U0" : chance(20) ? "-U1" : "-U3";
        GIT(repo, patch_path, "diff", "--cached", "-M", "--no-color", "--no-ext-diff", ctx,
            tree_id);
        free(tree_id);
        size_t plen = 0;
        char *patch = tu_read(base, "patch.diff", &plen);
        assert_non_null(patch);

        char name[64];
        snprintf(name, sizeof(name), "ours%u", round);
        char *ours = tu_join(base, name);
        snprintf(name, sizeof(name), "theirs%u", round);
        char *theirs = tu_join(base, name);
        snprintf(name, sizeof(name), "codex%u", round);
        char *codex = tu_join(base, name);
        assert_int_equal(mkdir(ours, 0755), 0);
        assert_int_equal(mkdir(theirs, 0755), 0);
        write_tree(ours, &a);
        write_tree(theirs, &a);

        if (plen) {
            sp_fs *fs = NULL;
            sp_error *err = NULL;
            assert_int_equal(sp_fs_open(&fs, ours, NULL, &err), 0);
            sp_patch_result *res = NULL;
            int r = sp_fs_apply_patch(&res, fs, patch, plen, NULL, &err);
            if (r < 0)
                fail_msg("round %u: apply_patch: %s\n--- patch:\n%s", round, err->message, patch);
            assert_int_equal(res->format, SP_PATCH_UNIFIED);
            sp_patch_result_free(res);
            sp_fs_free(fs);
            if (zero) {
                GIT(theirs, NULL, "apply", "--unidiff-zero", patch_path);
            } else {
                GIT(theirs, NULL, "apply", patch_path);
            }
        }
        snap so, st, sb;
        snap_take(&so, ours);
        snap_take(&st, theirs);
        snap_take(&sb, repo);
        snap_expect_equal(&so, &st, true, "sandpod and git apply", round, patch);
        snap_expect_equal(&so, &sb, true, "sandpod and the edited files", round, patch);
        files_compared += (unsigned)so.n;

        char *cx = plen ? to_codex(patch, &a, &b) : NULL;
        if (cx) {
            assert_int_equal(mkdir(codex, 0755), 0);
            write_tree(codex, &a);
            sp_fs *fs = NULL;
            sp_error *err = NULL;
            assert_int_equal(sp_fs_open(&fs, codex, NULL, &err), 0);
            sp_patch_result *res = NULL;
            int r = sp_fs_apply_patch(&res, fs, cx, strlen(cx), NULL, &err);
            if (r < 0)
                fail_msg("round %u: codex apply_patch: %s\n--- patch:\n%s\n--- from:\n%s", round,
                         err->message, cx, patch);
            assert_int_equal(res->format, SP_PATCH_CODEX);
            sp_patch_result_free(res);
            sp_fs_free(fs);
            snap sc;
            snap_take(&sc, codex);
            snap_expect_equal(&sc, &sb, false, "the Codex rewrite and the edited files", round, cx);
            snap_dispose(&sc);
            tu_rmtree(codex);
            codex_rounds++;
        }
        free(cx);
        snap_dispose(&so);
        snap_dispose(&st);
        snap_dispose(&sb);
        tu_rmtree(ours);
        tu_rmtree(theirs);
        free(ours);
        free(theirs);
        free(codex);
        free(patch);
        tree_dispose(&a);
        tree_dispose(&b);
    }
    print_message("%u rounds, %u files compared with git apply (%u rounds -U0), %u rounds also "
                  "as Codex patches\n",
                  rounds, files_compared, unidiff_zero, codex_rounds);
    free(patch_path);
    free(tree_path);
    free(repo);
}

/* ------------------------------------------------- wrong line numbers -- */

/* Apply `patch` to a file `f` holding `data`, once with apply_patch and
 * once with `git apply` (with --unidiff-zero when no hunk has context, as
 * apply_patch then reads it): both fail, or both succeed with the same
 * bytes. Returns whether they succeeded. */
static unsigned offset_cases, offset_applied;

static bool same_as_git(const char *what, const char *data, size_t dlen, const char *patch,
                        size_t plen)
{
    char *ours = tu_join(base, "o-ours"), *theirs = tu_join(base, "o-theirs");
    char *patch_path = tu_join(base, "o.diff");
    tu_rmtree(ours);
    tu_rmtree(theirs);
    assert_int_equal(mkdir(ours, 0755), 0);
    assert_int_equal(mkdir(theirs, 0755), 0);
    tu_write_n(ours, "f", data, dlen, 0644);
    tu_write_n(theirs, "f", data, dlen, 0644);
    tu_write_n(base, "o.diff", patch, plen, 0644);
    bool zero = true;
    for (const char *l = patch; l && zero; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        zero = *l != ' ';

    sp_fs *fs = NULL;
    sp_error *err = NULL;
    assert_int_equal(sp_fs_open(&fs, ours, NULL, &err), 0);
    sp_patch_result *res = NULL;
    int r = sp_fs_apply_patch(&res, fs, patch, plen, NULL, &err);
    sp_patch_result_free(res);
    sp_fs_free(fs);
    char *argv_zero[] = {"git", "apply", "--unidiff-zero", patch_path, NULL};
    char *argv_plain[] = {"git", "apply", patch_path, NULL};
    int rc = run(theirs, NULL, errlog, zero ? argv_zero : argv_plain);
    assert_true(rc == 0 || rc == 1);
    size_t lo = 0, lt = 0;
    char *got_o = tu_read(ours, "f", &lo), *got_t = tu_read(theirs, "f", &lt);
    if ((r == 0) != (rc == 0)) {
        char *e = tu_read(base, "stderr.txt", NULL);
        fail_msg("%s: apply_patch %s (%s) but git apply %s (%s)\n--- file:\n%.*s--- patch:\n%s",
                 what, r == 0 ? "applied it" : "failed", err ? err->message : "",
                 rc == 0 ? "applied it" : "failed", e ? e : "", (int)dlen, data, patch);
    }
    if (r < 0) {
        assert_non_null(err);
        assert_true(err->reason == SP_R_PATCH_CONFLICT || err->reason == SP_R_PATCH_PARSE);
        /* Nothing changed. */
        assert_true(lo == dlen && memcmp(got_o, data, dlen) == 0);
    } else if (lo != lt || memcmp(got_o, got_t, lo) != 0) {
        fail_msg("%s: apply_patch and git apply differ\n--- ours:\n%.*s--- git:\n%.*s--- "
                 "patch:\n%s",
                 what, (int)lo, got_o, (int)lt, got_t, patch);
    }
    sp_error_free(err);
    free(got_o);
    free(got_t);
    tu_rmtree(ours);
    tu_rmtree(theirs);
    free(ours);
    free(theirs);
    free(patch_path);
    offset_cases++;
    offset_applied += r == 0;
    return r == 0;
}

/* "l1\n" ... "l<n>\n". */
static char *numbered(size_t n)
{
    sbuf b = {NULL, 0, 0};
    for (size_t i = 1; i <= n; i++) {
        char line[32];
        snprintf(line, sizeof(line), "l%zu\n", i);
        sb_adds(&b, line);
    }
    sb_add(&b, "", 0);
    return b.s;
}

#define HDR "--- a/f\n+++ b/f\n"

static void check_case(const char *what, const char *data, const char *patch, int want)
{
    bool ok = same_as_git(what, data, strlen(data), patch, strlen(patch));
    if (want >= 0 && ok != (want == 1))
        fail_msg("%s: expected git apply to %s", what, want ? "apply it" : "refuse it");
}

/* Hand-made cases: hunks whose line numbers are off, in each way git
 * handles specially. want: 1 applies, 0 fails (as git decides). */
static void test_offset_cases(void **state)
{
    (void)state;
    char *f20 = numbered(20);
    check_case("exact", f20, HDR "@@ -5,3 +5,3 @@\n l5\n-l6\n+six\n l7\n", 1);
    check_case("offset down", f20, HDR "@@ -2,3 +2,3 @@\n l8\n-l9\n+nine\n l10\n", 1);
    check_case("offset up", f20, HDR "@@ -15,3 +15,3 @@\n l8\n-l9\n+nine\n l10\n", 1);
    check_case("far off", f20, HDR "@@ -300,3 +300,3 @@\n l8\n-l9\n+nine\n l10\n", 1);
    check_case("two hunks shifted", f20,
               HDR "@@ -1,3 +1,3 @@\n l1\n-l2\n+two\n l3\n@@ -9,3 +9,4 @@\n l12\n-l13\n+a\n+b\n"
                   " l14\n",
               1);
    check_case("second hunk before the first", f20,
               HDR "@@ -14,3 +14,3 @@\n l14\n-l15\n+x\n l16\n@@ -18,3 +18,3 @@\n l3\n-l4\n+y\n"
                   " l5\n",
               1);
    check_case("nowhere", f20, HDR "@@ -5,3 +5,3 @@\n l5\n-l66\n+x\n l7\n", 0);
    check_case("one of two hunks nowhere", f20,
               HDR "@@ -2,3 +2,3 @@\n l2\n-l3\n+x\n l4\n@@ -9,3 +9,3 @@\n l9\n-l99\n+y\n l11\n", 0);
    check_case("whitespace differs", f20, HDR "@@ -5,3 +5,3 @@\n l5 \n-l6\n+x\n l7\n", 0);
    check_case("start of file, off", f20, HDR "@@ -1,3 +1,3 @@\n l4\n-l5\n+x\n l6\n", 0);
    check_case("start of file, right", f20, HDR "@@ -1,3 +1,3 @@\n l1\n-l2\n+x\n l3\n", 1);
    check_case("context at start, header at 4", f20, HDR "@@ -4,3 +4,3 @@\n l1\n-l2\n+x\n l3\n", 1);
    check_case("end of file, off", f20, HDR "@@ -3,2 +3,2 @@\n l19\n-l20\n+x\n", 1);
    check_case("no trailing context, not at end", f20, HDR "@@ -9,2 +9,2 @@\n l9\n-l10\n+x\n", 0);
    check_case("overlapping an earlier hunk", f20,
               HDR "@@ -2,3 +2,3 @@\n l2\n-l3\n+x\n l4\n@@ -3,3 +3,3 @@\n l3\n-l4\n+y\n l5\n", 0);
    check_case("touching an earlier hunk", f20,
               HDR "@@ -2,3 +2,3 @@\n l2\n-l3\n+x\n l4\n@@ -6,3 +6,3 @@\n l5\n-l6\n+y\n l7\n", 1);
    free(f20);

    /* Repeated blocks: the nearest wins, the later one on a tie. */
    const char *rep = "a\nb\nc\nx1\nx2\nx3\nx4\na\nb\nc\ny1\ny2\ny3\ny4\ny5\na\nb\nc\nz\n";
    check_case("repeated, nearest after", rep, HDR "@@ -6,3 +6,3 @@\n a\n-b\n+B\n c\n", 1);
    check_case("repeated, nearest before", rep, HDR "@@ -11,3 +11,3 @@\n a\n-b\n+B\n c\n", 1);
    check_case("repeated, tie", rep, HDR "@@ -12,3 +12,3 @@\n a\n-b\n+B\n c\n", 1);
    check_case("repeated, tie 2", rep, HDR "@@ -4,3 +4,3 @@\n a\n-b\n+B\n c\n", 1);
    check_case("repeated, two hunks", rep,
               HDR "@@ -8,3 +8,3 @@\n a\n-b\n+B1\n c\n@@ -9,3 +9,3 @@\n a\n-b\n+B2\n c\n", 1);

    /* No final newline. */
    const char *nonl = "p\nq\nr\ns\nt\nu";
    check_case("no newline, shifted", nonl,
               HDR "@@ -2,2 +2,2 @@\n t\n-u\n\\ No newline at end of file\n+U\n"
                   "\\ No newline at end of file\n",
               1);
    check_case("no newline, hunk assumes one", nonl, HDR "@@ -5,2 +5,2 @@\n t\n-u\n+U\n", 0);
    check_case("no newline, context, at 1", nonl, HDR "@@ -1,3 +1,3 @@\n r\n-s\n+S\n t\n", 0);
    check_case("no newline, context", nonl, HDR "@@ -2,3 +2,3 @@\n r\n-s\n+S\n t\n", 1);
    check_case("no newline, last context", nonl,
               HDR "@@ -2,3 +2,3 @@\n s\n-t\n+T\n u\n\\ No newline at end of file\n", 1);

    /* CRLF files: the CR is part of each line. */
    const char *crlf = "a\r\nb\r\nc\r\nd\r\ne\r\nf\r\n";
    check_case("crlf shifted", crlf, HDR "@@ -1,3 +1,3 @@\n c\r\n-d\r\n+D\r\n e\r\n", 0);
    check_case("crlf shifted 2", crlf, HDR "@@ -2,3 +2,3 @@\n c\r\n-d\r\n+D\r\n e\r\n", 1);
    check_case("crlf, patch without CR", crlf, HDR "@@ -3,3 +3,3 @@\n c\n-d\n+D\n e\n", 0);

    /* -U0 (no context anywhere): git needs --unidiff-zero; compared so. */
    const char *ten = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n";
    check_case("U0 replace", ten, HDR "@@ -5 +5 @@\n-5\n+five\n", 1);
    check_case("U0 replace, off", ten, HDR "@@ -3 +3 @@\n-5\n+five\n", 1);
    check_case("U0 insert", ten, HDR "@@ -5,0 +6,2 @@\n+x\n+y\n", 1);
    check_case("U0 insert at top", ten, HDR "@@ -0,0 +1 @@\n+top\n", 1);
    check_case("U0 delete", ten, HDR "@@ -4,2 +3,0 @@\n-4\n-5\n", 1);
    check_case("U0 two hunks", ten, HDR "@@ -2 +2 @@\n-2\n+two\n@@ -8,0 +9 @@\n+after 8\n", 1);
    check_case("U0 past the end", ten, HDR "@@ -60,0 +61 @@\n+x\n", 1);
}

/* Random files and edits as in test_against_git; each diff's hunk headers
 * are then moved by a random amount, and/or lines are added to the file
 * above or below the change, before both apply it. */
static void test_offsets_random(void **state)
{
    (void)state;
    unsigned rounds = 400;
    const char *env = getenv("SANDPOD_PATCH_ROUNDS");
    if (env && *env)
        rounds = (unsigned)strtoul(env, NULL, 10) * 4 / 3;
    char *repo = tu_join(base, "orepo");
    assert_int_equal(mkdir(repo, 0755), 0);
    GIT(repo, NULL, "init", "-q");
    GIT(repo, NULL, "config", "core.autocrlf", "false");
    char *patch_path = tu_join(base, "patch.diff");
    unsigned applied = 0, moved = 0;
    for (unsigned round = 0; round < rounds; round++) {
        tree a = {.n = 0}, b = {.n = 0};
        random_file(&a.f[a.n++], "f");
        copy_file(&b.f[b.n++], &a.f[0], "f");
        edit_file(&b.f[0]);
        clear_dir(repo);
        write_tree(repo, &a);
        GIT(repo, NULL, "add", "-A");
        clear_dir(repo);
        write_tree(repo, &b);
        char *ctx = chance(10) ? "-U0" : chance(30) ? "-U1" : "-U3";
        GIT(repo, patch_path, "diff", "--no-color", "--no-ext-diff", ctx, "--", "f");
        size_t plen = 0;
        char *patch = tu_read(base, "patch.diff", &plen);
        assert_non_null(patch);
        if (!plen) {
            free(patch);
            tree_dispose(&a);
            tree_dispose(&b);
            continue;
        }
        /* Move each hunk header by -8..8 lines (never below 0). */
        sbuf out = {NULL, 0, 0};
        for (char *l = patch; *l;) {
            char *nl = strchr(l, '\n');
            size_t n = nl ? (size_t)(nl - l + 1) : strlen(l);
            unsigned long os, oc = 1, ns, nc = 1;
            int used = 0;
            if (strncmp(l, "@@ -", 4) == 0 && chance(70) &&
                (sscanf(l, "@@ -%lu,%lu +%lu,%lu @@%n", &os, &oc, &ns, &nc, &used) == 4 ||
                 sscanf(l, "@@ -%lu +%lu,%lu @@%n", &os, &ns, &nc, &used) == 3 ||
                 sscanf(l, "@@ -%lu,%lu +%lu @@%n", &os, &oc, &ns, &used) == 3 ||
                 sscanf(l, "@@ -%lu +%lu @@%n", &os, &ns, &used) == 2) &&
                used > 0) {
                long d = (long)pick(17) - 8;
                long o2 = (long)os + d, n2 = (long)ns + d;
                char hdr[96];
                snprintf(hdr, sizeof(hdr), "@@ -%ld,%lu +%ld,%lu @@", o2 < 0 ? 0 : o2, oc,
                         n2 < 0 ? 0 : n2, nc);
                sb_adds(&out, hdr);
                sb_add(&out, l + used, n - (size_t)used);
                moved++;
            } else {
                sb_add(&out, l, n);
            }
            l += n;
        }
        sb_add(&out, "", 0);
        /* And sometimes lines added to the file itself. */
        tfile *fa = &a.f[0];
        if (chance(40) && fa->n)
            insert_lines(fa, chance(50) ? 0 : fa->n, 1 + pick(5));
        size_t dlen;
        char *data = render(fa, &dlen);
        char what[48];
        snprintf(what, sizeof(what), "random round %u", round);
        applied += same_as_git(what, data, dlen, out.s, out.len);
        free(data);
        free(out.s);
        free(patch);
        tree_dispose(&a);
        tree_dispose(&b);
    }
    print_message("%u random rounds (%u hunk headers moved), %u applied by both, %u refused by "
                  "both; %u cases in all, %u applied\n",
                  rounds, moved, applied, rounds - applied, offset_cases, offset_applied);
    free(patch_path);
    free(repo);
}

int main(void)
{
    base = tu_mkdtemp();
    errlog = tu_join(base, "stderr.txt");
    /* git must see none of the user's or the machine's settings, and must
     * not find a repository above the scratch folder. */
    char *parent = xstrdup(base);
    *strrchr(parent, '/') = '\0';
    setenv("GIT_CEILING_DIRECTORIES", parent, 1);
    setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
    setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1);
    setenv("HOME", base, 1);
    setenv("LC_ALL", "C", 1);
    free(parent);
    char *argv[] = {"git", "--version", NULL};
    if (run(NULL, NULL, NULL, argv) != 0) {
        fprintf(stderr, "git is missing: skipping\n");
        tu_rmtree(base);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_git),
        cmocka_unit_test(test_offset_cases),
        cmocka_unit_test(test_offsets_random),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rmtree(base);
    free(base);
    free(errlog);
    return rc;
}
