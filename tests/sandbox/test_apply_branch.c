/* sp_apply_branch(): a sandbox's changes as a commit on a new branch of the
 * host's git repository. The real git CLI is the oracle: the branch holds
 * exactly HEAD's tree with the changes (new, modified, executable, symlink,
 * deleted, nested, a file that became a folder), its parent is HEAD, and
 * the user's repository is otherwise untouched: HEAD, the index (bytes and
 * mtime), the config, the hooks and `git status`. Refusals (an existing or
 * invalid branch, no work tree, a .git path in any spelling) write
 * nothing: no object, no ref. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apply_internal.h"
#include "base.h"
#include "sandpod/snapshot.h"
#include "testutil.h"

#define OK(call)                                                                                   \
    do {                                                                                           \
        sp_error *e_ = NULL;                                                                       \
        int r_ = (call);                                                                           \
        if (r_ != 0)                                                                               \
            fail_msg("%s gave %d: %s", #call, r_, e_ ? e_->message : "");                          \
        sp_error_free(e_);                                                                         \
    } while (0)
/* OK() passes &e_ as the error argument. */
#define E (&e_)

typedef struct fx {
    char *dir;   /* scratch */
    char *ws;    /* the workspace */
    char *store; /* its snapshot store */
    char *repo;  /* the host project, a git work tree */
    sp_snapstore *s;
    char *snap; /* a snapshot id of the workspace */
} fx;

/* ------------------------------------------------------------- git -- */

/* Run git with argv (NULL-terminated); its stdout into *out (when out is
 * not NULL). The exit status. */
static int git_v(char **out, const char *const *argv)
{
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(p[1], 1);
        if (!getenv("SP_TEST_VERBOSE")) {
            int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
            if (null >= 0)
                dup2(null, 2);
        }
        execvp("git", (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    for (;;) {
        if (len + 1 >= cap)
            buf = realloc(buf, cap *= 2);
        ssize_t n = read(p[0], buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    close(p[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

#define GIT_MAX_ARGS 16

/* git -C dir ARGS... (NULL-terminated): its exit status, its stdout into
 * *out when out is not NULL. */
static int git_va(char **out, const char *dir, va_list ap)
{
    const char *argv[GIT_MAX_ARGS] = {"git", "-C", dir};
    size_t n = 3;
    for (const char *a; (a = va_arg(ap, const char *)) != NULL;) {
        assert_true(n + 1 < GIT_MAX_ARGS);
        argv[n++] = a;
    }
    argv[n] = NULL;
    return git_v(out, argv);
}

/* Its stdout; it must succeed. */
static char *git_in(const char *dir, ...)
{
    va_list ap;
    va_start(ap, dir);
    char *out = NULL;
    int rc = git_va(&out, dir, ap);
    va_end(ap);
    if (rc != 0)
        fail_msg("git -C %s ... failed (%d): rerun with SP_TEST_VERBOSE=1", dir, rc);
    return out;
}

/* Its exit status only. */
static int git_rc(const char *dir, ...)
{
    va_list ap;
    va_start(ap, dir);
    int rc = git_va(NULL, dir, ap);
    va_end(ap);
    return rc;
}

#define GIT(...) free(git_in(__VA_ARGS__, (const char *)NULL))

static void assert_str(char *got, const char *want)
{
    if (strcmp(got, want) != 0)
        fail_msg("got '%s', want '%s'", got, want);
    free(got);
}

/* The same, taking both. */
static void assert_same(char *got, char *want)
{
    assert_str(got, want);
    free(want);
}

/* ------------------------------------------------------------ state -- */

/* What of the host repository must not change: HEAD, the index's bytes
 * and times, the config, the hooks, the status, the refs but new ones. */
typedef struct host_state {
    char *head, *index, *config, *hooks, *status, *refs, *objects;
    struct stat index_st;
    bool has_index;
} host_state;

/* Each entry of a folder with its type, bits, size and mtime, by name. */
static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *listing(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    sp_strv lines = {0};
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        if (strcmp(de->d_name, "..") == 0)
            continue;
        struct stat st;
        assert_int_equal(fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW), 0);
        sp_strv_push(&lines, sp_xasprintf("%s %o %lld %lld.%09ld", de->d_name, st.st_mode,
                                          (long long)st.st_size, (long long)st.st_mtim.tv_sec,
                                          st.st_mtim.tv_nsec));
    }
    closedir(d);
    qsort(lines.v, lines.n, sizeof(*lines.v), name_cmp);
    sp_buf b = SP_BUF_INIT;
    for (size_t i = 0; i < lines.n; i++) {
        sp_buf_adds(&b, lines.v[i]);
        sp_buf_addc(&b, '\n');
    }
    sp_strv_dispose(&lines);
    return sp_buf_steal(&b);
}

static void state_take(host_state *h, const char *repo)
{
    cleanup_free char *gd = tu_join(repo, ".git");
    memset(h, 0, sizeof(*h));
    h->head = tu_read(gd, "HEAD", NULL);
    h->index = tu_read(gd, "index", NULL);
    h->config = tu_read(gd, "config", NULL);
    cleanup_free char *hooks = tu_join(gd, "hooks");
    h->hooks = listing(hooks);
    cleanup_free char *ip = tu_join(gd, "index");
    h->has_index = stat(ip, &h->index_st) == 0;
    h->status = git_in(repo, "status", "--porcelain", "--untracked-files=all", (const char *)NULL);
    h->refs = git_in(repo, "for-each-ref", "--format=%(refname) %(objectname)", (const char *)NULL);
    h->objects = git_in(repo, "count-objects", (const char *)NULL);
}

static void state_dispose(host_state *h)
{
    free(h->head);
    free(h->index);
    free(h->config);
    free(h->hooks);
    free(h->status);
    free(h->refs);
    free(h->objects);
}

static void same_str(const char *what, const char *a, const char *b)
{
    if ((a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0))
        fail_msg("%s changed: '%s' -> '%s'", what, a ? a : "(none)", b ? b : "(none)");
}

/* Nothing the user sees changed; with `no_ref`, no ref either (a
 * refusal), and with `no_object` not even an object. */
static void state_check(const host_state *before, const char *repo, bool no_ref, bool no_object)
{
    host_state now;
    state_take(&now, repo);
    same_str("HEAD", before->head, now.head);
    same_str("the index", before->index, now.index);
    same_str(".git/config", before->config, now.config);
    same_str(".git/hooks", before->hooks, now.hooks);
    same_str("git status", before->status, now.status);
    assert_int_equal(before->has_index, now.has_index);
    if (before->has_index) {
        assert_int_equal(before->index_st.st_mtim.tv_sec, now.index_st.st_mtim.tv_sec);
        assert_int_equal(before->index_st.st_mtim.tv_nsec, now.index_st.st_mtim.tv_nsec);
        assert_int_equal(before->index_st.st_ino, now.index_st.st_ino);
        assert_int_equal(before->index_st.st_size, now.index_st.st_size);
    }
    if (no_ref)
        same_str("the refs", before->refs, now.refs);
    if (no_object)
        same_str("the objects", before->objects, now.objects);
    state_dispose(&now);
}

/* ---------------------------------------------------------- fixture -- */

static void snap_now(fx *f)
{
    free(f->snap);
    sp_snapshot *snap = NULL;
    OK(sp_snapshot_create(&snap, f->s, NULL, E));
    f->snap = strdup(snap->id);
    sp_snapshot_free(snap);
}

static void repo_init(const char *repo, bool with_user)
{
    GIT(repo, "init", "-q", "-b", "main");
    if (with_user) {
        GIT(repo, "config", "user.name", "Host User");
        GIT(repo, "config", "user.email", "host@example.com");
    }
    /* A hook that leaves a mark if anything ran it: at the repository's
     * absolute path (git does not always export GIT_DIR to a hook, and
     * "$GIT_DIR/../HOOK-RAN" was then /HOOK-RAN, where no check looked). */
    cleanup_free char *hooks = tu_join(repo, ".git/hooks");
    cleanup_free char *hook = sp_xasprintf("#!/bin/sh\ntouch '%s/HOOK-RAN'\n", repo);
    tu_write(hooks, "post-commit", hook, 0755);
    tu_write(hooks, "reference-transaction", hook, 0755);
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof(*f));
    f->dir = tu_mkdtemp();
    f->ws = tu_join(f->dir, "ws");
    f->store = tu_join(f->dir, "store.git");
    f->repo = tu_join(f->dir, "repo");
    tu_mkdir(f->dir, "ws");
    tu_mkdir(f->dir, "repo");
    OK(sp_snapstore_open(&f->s, f->ws, f->store, NULL, E));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    sp_snapstore_free(f->s);
    tu_rmtree(f->dir);
    free(f->dir);
    free(f->ws);
    free(f->store);
    free(f->repo);
    free(f->snap);
    free(f);
    return 0;
}

/* The host project with one commit, and the workspace that came of it
 * and was worked on (under ws/project, as a mount's target). */
static void project(fx *f)
{
    repo_init(f->repo, true);
    tu_write(f->repo, "keep.txt", "untouched\n", 0644);
    tu_write(f->repo, "mod.txt", "old\n", 0644);
    tu_write(f->repo, "run.sh", "#!/bin/sh\necho hi\n", 0644);
    tu_write(f->repo, "gone.txt", "bye\n", 0644);
    tu_write(f->repo, "thing", "a file, a folder later\n", 0644);
    tu_mkdir(f->repo, "old");
    tu_write(f->repo, "old/a.txt", "a\n", 0644);
    tu_write(f->repo, "old/b.txt", "b\n", 0644);
    tu_mkdir(f->repo, "sub");
    tu_write(f->repo, "sub/s.txt", "s\n", 0644);
    GIT(f->repo, "add", "-A");
    GIT(f->repo, "commit", "-q", "--no-verify", "-m", "first");
    cleanup_free char *mark = tu_join(f->repo, "HOOK-RAN");
    unlink(mark); /* the commit above ran it */

    tu_mkdir(f->ws, "project");
    cleanup_free char *p = tu_join(f->ws, "project");
    tu_write(p, "keep.txt", "untouched\n", 0644);
    tu_write(p, "mod.txt", "new\n", 0644);
    tu_write(p, "run.sh", "#!/bin/sh\necho hi\n", 0755);
    tu_write(p, "new.txt", "fresh\n", 0600);
    tu_symlink("keep.txt", p, "link");
    tu_mkdir(p, "thing");
    tu_write(p, "thing/inner.txt", "inside\n", 0644);
    tu_mkdir(p, "deep");
    tu_mkdir(p, "deep/er");
    tu_write(p, "deep/er/f.txt", "nested\n", 0644);
    tu_mkdir(p, "sub");
    tu_write(p, "sub/s.txt", "s\n", 0644);
    snap_now(f);
}

static char *ls_tree(const char *repo, const char *rev)
{
    return git_in(repo, "ls-tree", "-r", "--format=%(objectmode) %(path)", rev, (const char *)NULL);
}

/* ------------------------------------------------------------ tests -- */

static void test_changes(void **state)
{
    fx *f = *state;
    project(f);
    host_state before;
    state_take(&before, f->repo);
    cleanup_free char *head = git_in(f->repo, "rev-parse", "HEAD", (const char *)NULL);

    const sp_apply_git_change v[] = {
        {"project/mod.txt", "mod.txt", false},
        {"project/run.sh", "run.sh", false},
        {"project/new.txt", "new.txt", false},
        {"project/link", "link", false},
        {"project/gone.txt", "gone.txt", true},
        {"project/thing", "thing", true}, /* a folder now */
        {"project/thing/inner.txt", "thing/inner.txt", false},
        {"project/deep", "deep", true},
        {"project/deep/er", "deep/er", true},
        {"project/deep/er/f.txt", "deep/er/f.txt", false},
        {"project/old", "old", true},
        {"project/old/a.txt", "old/a.txt", true},
        {"project/old/b.txt", "old/b.txt", true},
        {"project/never.txt", "never.txt", true}, /* removing what is not there */
    };
    char *commit = NULL;
    OK(sp_apply_branch(&commit, f->repo, "sandpod/work", f->s, f->snap, v, sizeof(v) / sizeof(v[0]),
                       "sandbox work\n\nfrom the test", E));
    assert_non_null(commit);
    assert_int_equal(strlen(commit), 40);

    cleanup_free char *br = git_in(f->repo, "rev-parse", "sandpod/work", (const char *)NULL);
    br[strcspn(br, "\n")] = '\0';
    assert_string_equal(br, commit);
    assert_str(git_in(f->repo, "rev-parse", "sandpod/work^", (const char *)NULL), head);
    assert_str(ls_tree(f->repo, "sandpod/work"), "100644 deep/er/f.txt\n"
                                                 "100644 keep.txt\n"
                                                 "120000 link\n"
                                                 "100644 mod.txt\n"
                                                 "100644 new.txt\n"
                                                 "100755 run.sh\n"
                                                 "100644 sub/s.txt\n"
                                                 "100644 thing/inner.txt\n");
    assert_str(git_in(f->repo, "show", "sandpod/work:mod.txt", (const char *)NULL), "new\n");
    assert_str(git_in(f->repo, "show", "sandpod/work:link", (const char *)NULL), "keep.txt");
    assert_str(git_in(f->repo, "show", "sandpod/work:thing/inner.txt", (const char *)NULL),
               "inside\n");
    assert_str(git_in(f->repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%B", "sandpod/work",
                      (const char *)NULL),
               "Host User <host@example.com>|Host User <host@example.com>|sandbox work\n\nfrom "
               "the test\n\n");
    /* The user's git reads it like any commit. */
    cleanup_free char *stat =
        git_in(f->repo, "show", "--stat", "--format=", "sandpod/work", (const char *)NULL);
    assert_non_null(strstr(stat, "10 files changed"));
    assert_int_equal(git_rc(f->repo, "fsck", "--strict", "--no-dangling", (const char *)NULL), 0);
    /* The tree of an unchanged folder is HEAD's, by id. */
    assert_same(git_in(f->repo, "rev-parse", "sandpod/work:sub", (const char *)NULL),
                git_in(f->repo, "rev-parse", "HEAD:sub", (const char *)NULL));

    state_check(&before, f->repo, false, false);
    assert_false(tu_exists(f->repo, "HOOK-RAN"));
    assert_false(tu_exists(f->repo, "new.txt")); /* the work tree is the user's */
    state_dispose(&before);
    free(commit);
}

/* `to` a folder inside the work tree: paths land under it; the default
 * message. */
static void test_subfolder(void **state)
{
    fx *f = *state;
    project(f);
    host_state before;
    state_take(&before, f->repo);
    const sp_apply_git_change v[] = {
        {"project/new.txt", "new.txt", false},
        {"project/keep.txt", "s.txt", true},
    };
    cleanup_free char *to = tu_join(f->repo, "sub");
    char *commit = NULL;
    OK(sp_apply_branch(&commit, to, "into-sub", f->s, f->snap, v, 2, NULL, E));
    assert_str(ls_tree(f->repo, "into-sub"), "100644 gone.txt\n"
                                             "100644 keep.txt\n"
                                             "100644 mod.txt\n"
                                             "100644 old/a.txt\n"
                                             "100644 old/b.txt\n"
                                             "100644 run.sh\n"
                                             "100644 sub/new.txt\n"
                                             "100644 thing\n");
    assert_str(git_in(f->repo, "log", "-1", "--format=%B", "into-sub", (const char *)NULL),
               "sandpod apply\n\n");
    state_check(&before, f->repo, false, false);
    state_dispose(&before);
    free(commit);
}

/* A repository without a commit: a root commit of just the changes; HEAD
 * stays unborn, no index appears; the branch HEAD names is refused. */
static void test_unborn(void **state)
{
    fx *f = *state;
    repo_init(f->repo, false);
    tu_write(f->ws, "hello.txt", "hello\n", 0755);
    snap_now(f);
    host_state before;
    state_take(&before, f->repo);
    assert_false(before.has_index);

    const sp_apply_git_change v[] = {{"hello.txt", "hello.txt", false}};
    sp_error *err = NULL;
    char *commit = NULL;
    assert_int_equal(sp_apply_branch(&commit, f->repo, "main", f->s, f->snap, v, 1, NULL, &err),
                     SP_EEXISTS);
    assert_null(commit);
    assert_non_null(strstr(err->message, "branch main already exists in"));
    sp_error_free(err);
    state_check(&before, f->repo, true, true);

    OK(sp_apply_branch(&commit, f->repo, "first", f->s, f->snap, v, 1, "first", E));
    assert_str(ls_tree(f->repo, "first"), "100755 hello.txt\n");
    assert_int_equal(git_rc(f->repo, "rev-parse", "--verify", "-q", "first^", (const char *)NULL),
                     1);
    assert_int_equal(git_rc(f->repo, "rev-parse", "--verify", "-q", "HEAD", (const char *)NULL), 1);
    /* No user.name in the repository (HOME is the scratch folder). */
    assert_str(git_in(f->repo, "log", "-1", "--format=%an <%ae>", "first", (const char *)NULL),
               "sandpod <sandpod@localhost>\n");
    state_check(&before, f->repo, false, false);
    state_dispose(&before);
    free(commit);
}

/* Refused with `code` and a message holding `needle`; no ref written, and
 * no object unless `late` (found while the tree was built). */
static void expect_refused_at(fx *f, const char *to, const char *branch,
                              const sp_apply_git_change *v, size_t n, int code, const char *needle,
                              bool late)
{
    host_state before;
    state_take(&before, f->repo);
    sp_error *err = NULL;
    char *commit = NULL;
    int r = sp_apply_branch(&commit, to, branch, f->s, f->snap, v, n, NULL, &err);
    if (r != code)
        fail_msg("branch '%s' into %s: got %d (%s), want %d", branch, to, r,
                 err ? err->message : "", code);
    assert_null(commit);
    assert_non_null(err);
    if (getenv("SP_TEST_VERBOSE"))
        fprintf(stderr, "refused: %s\n", err->message);
    if (!strstr(err->message, needle))
        fail_msg("message '%s' does not say '%s'", err->message, needle);
    assert_null(strchr(err->message, '\n'));
    sp_error_free(err);
    state_check(&before, f->repo, true, !late);
    state_dispose(&before);
}

static void expect_refused(fx *f, const char *to, const char *branch, const sp_apply_git_change *v,
                           size_t n, int code, const char *needle)
{
    expect_refused_at(f, to, branch, v, n, code, needle, false);
}

/* A removal leaves a folder and a submodule alone (only their files go,
 * as changes of their own); nothing is written inside a submodule. */
static void test_folders_and_submodules(void **state)
{
    fx *f = *state;
    project(f);
    GIT(f->repo, "update-index", "--add", "--cacheinfo",
        "160000,1111111111111111111111111111111111111111,mod");
    GIT(f->repo, "commit", "-q", "--no-verify", "-m", "a submodule");
    const sp_apply_git_change v[] = {
        {"project/sub", "sub", true},
        {"project/mod", "mod", true},
        {"project/mod/x", "mod/x", true},
    };
    char *commit = NULL;
    OK(sp_apply_branch(&commit, f->repo, "alone", f->s, f->snap, v, 3, NULL, E));
    assert_same(git_in(f->repo, "rev-parse", "alone^{tree}", (const char *)NULL),
                git_in(f->repo, "rev-parse", "HEAD^{tree}", (const char *)NULL));
    free(commit);
    const sp_apply_git_change in_mod[] = {{"project/new.txt", "mod/new.txt", false}};
    expect_refused(f, f->repo, "b", in_mod, 1, SP_EINVAL, "inside submodule mod");
    /* What the snapshot has under a file. */
    const sp_apply_git_change under[] = {{"project/new.txt", "new.txt", false},
                                         {"project/new.txt", "new.txt/x", false}};
    expect_refused_at(f, f->repo, "b", under, 2, SP_EINVAL, "new.txt/x: under new.txt", true);
}

static void test_existing_branch(void **state)
{
    fx *f = *state;
    project(f);
    GIT(f->repo, "branch", "taken");
    const sp_apply_git_change v[] = {{"project/new.txt", "new.txt", false}};
    cleanup_free char *msg = sp_xasprintf("branch taken already exists in %s", f->repo);
    expect_refused(f, f->repo, "taken", v, 1, SP_EEXISTS, msg);
}

static void test_bad_branch(void **state)
{
    fx *f = *state;
    project(f);
    const sp_apply_git_change v[] = {{"project/new.txt", "new.txt", false}};
    static const char *const bad[] = {"",     "a..b", "-x", "HEAD", "a b",   "x.lock",
                                      "a/.b", "x~1",  "/a", "a/",   "a@{b}", "a\\b"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        expect_refused(f, f->repo, bad[i], v, 1, SP_EINVAL, "branch name");
}

static void test_not_a_work_tree(void **state)
{
    fx *f = *state;
    project(f);
    const sp_apply_git_change v[] = {{"project/new.txt", "new.txt", false}};
    cleanup_free char *plain = tu_join(f->dir, "plain");
    tu_mkdir(f->dir, "plain");
    expect_refused(f, plain, "b", v, 1, SP_EINVAL, "--branch needs a git work tree");
    cleanup_free char *bare = tu_join(f->dir, "bare.git");
    GIT(f->dir, "init", "-q", "--bare", bare);
    expect_refused(f, bare, "b", v, 1, SP_EINVAL, "--branch needs a git work tree");
    expect_refused(f, "relative/path", "b", v, 1, SP_EINVAL, "not an absolute folder");
}

static void test_dotgit_refused(void **state)
{
    fx *f = *state;
    project(f);
    static const char *const bad[] = {
        ".git/config",
        ".GIT/hooks/post-checkout",
        "vendor/lib/.git/config",
        ".git./config",
        ".git /config",
        ".git...",
        ".git::$INDEX_ALLOCATION/config",
        "git~1/config",
        "GIT~2/hooks/x",
        ".g\xe2\x80\x8cit/config", /* U+200C, ignored by HFS+ */
        "\xef\xbb\xbf.git/config", /* U+FEFF */
        "a/../.git/config",
        "../outside",
        "./a",
        "a//b",
        "a/",
        "",
        ".",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        /* With a good change first: nothing is written for it either. */
        const sp_apply_git_change v[] = {{"project/new.txt", "new.txt", false},
                                         {"project/new.txt", bad[i], false}};
        bool ascii = true;
        for (const char *p = bad[i]; *p; p++)
            ascii = ascii && *p >= 0x20 && *p < 0x7f;
        cleanup_free char *quoted = sp_xasprintf("'%s'", bad[i]);
        expect_refused(f, f->repo, "b", v, 2, SP_EINVAL, ascii ? quoted : ".git folder");
    }
    /* The workload's names are shown escaped: no line can be faked. */
    static const char *const shown[][2] = {
        {"x\n\x1b[2K/.git/y", "'x\\x0a\\x1b[2K/.git/y'"},
        {".g\xe2\x80\x8cit/config", "'.g\\u200cit/config'"},
        {"a/\xe2\x80\xae"
         "evil/../b",
         "'a/\\u202eevil/../b'"},
    };
    for (size_t i = 0; i < sizeof(shown) / sizeof(shown[0]); i++) {
        const sp_apply_git_change v[] = {{"project/new.txt", shown[i][0], false}};
        expect_refused(f, f->repo, "b", v, 1, SP_EINVAL, shown[i][1]);
    }
    const sp_apply_git_change twice[] = {{"project/new.txt", "n.txt", false},
                                         {"project/mod.txt", "n.txt", false}};
    expect_refused(f, f->repo, "b", twice, 2, SP_EINVAL, "path listed twice: 'n.txt'");
    /* Names that only look alike are fine. */
    const sp_apply_git_change ok[] = {{"project/new.txt", ".gitignore", false},
                                      {"project/new.txt", ".github/x", false},
                                      {"project/new.txt", "git~x", false},
                                      {"project/new.txt", "a.git", false}};
    char *commit = NULL;
    OK(sp_apply_branch(&commit, f->repo, "lookalikes", f->s, f->snap, ok, 4, NULL, E));
    free(commit);

    /* A symlink named .gitmodules, which git itself refuses. */
    const sp_apply_git_change link[] = {{"project/link", ".gitmodules", false}};
    expect_refused(f, f->repo, "b", link, 1, SP_EINVAL, "a symlink git refuses: '.gitmodules'");
    /* `to` inside .git. */
    cleanup_free char *gd = tu_join(f->repo, ".git/refs");
    const sp_apply_git_change one[] = {{"project/new.txt", "new.txt", false}};
    expect_refused(f, gd, "b", one, 1, SP_EINVAL, ".git");
}

int main(void)
{
    if (!tu_have_git()) {
        fprintf(stderr, "no git: skipped\n");
        return 77;
    }
    /* The repositories' own config only: no user's or system's. */
    cleanup_free char *home = tu_mkdtemp();
    setenv("HOME", home, 1);
    setenv("XDG_CONFIG_HOME", home, 1);
    setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
    /* Else the oracle's `git status` refreshes the index it checks. */
    setenv("GIT_OPTIONAL_LOCKS", "0", 1);
    unsetenv("GIT_DIR");
    unsetenv("GIT_WORK_TREE");
    unsetenv("GIT_INDEX_FILE");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_subfolder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unborn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_folders_and_submodules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_existing_branch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_branch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_work_tree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dotgit_refused, setup, teardown),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rmtree(home);
    return r;
}
