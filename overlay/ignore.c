/* gitignore(5) patterns on top of the glob dialect (see ignore.h). */
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "dir.h"
#include "ignore.h"

/* Bigger ignore files are not read: real ones are a few KiB. */
#define IGNORE_MAX_BYTES ((size_t)1 << 20)

/* Highest precedence first, as rg checks them. */
enum ig_kind { IG_RGIGNORE, IG_IGNORE, IG_GITIGNORE, IG_EXCLUDE, IG_KINDS };
static const char *const ig_files[IG_KINDS] = {".rgignore", ".ignore", ".gitignore",
                                               ".git/info/exclude"};

typedef struct ig_pat {
    sp_glob *g;
    bool negated;
    bool dir_only;
} ig_pat;

typedef struct ig_frame {
    char *dir; /* relative to the root, "." = the root */
    unsigned depth;
    ig_pat *pats[IG_KINDS];
    size_t n[IG_KINDS];
} ig_frame;

struct sp_ignore {
    ig_frame *v;
    size_t n, cap;
    bool git_only; /* only .gitignore, and .git/info/exclude at the root */
};

sp_ignore *sp_ignore_new(void)
{
    return sp_xcalloc(1, sizeof(sp_ignore));
}

sp_ignore *sp_ignore_new_git(void)
{
    sp_ignore *ig = sp_ignore_new();
    ig->git_only = true;
    return ig;
}

static void frame_dispose(ig_frame *f)
{
    for (int k = 0; k < IG_KINDS; k++) {
        for (size_t i = 0; i < f->n[k]; i++)
            sp_glob_free(f->pats[k][i].g);
        free(f->pats[k]);
    }
    free(f->dir);
}

void sp_ignore_free(sp_ignore *ig)
{
    if (!ig)
        return;
    for (size_t i = 0; i < ig->n; i++)
        frame_dispose(&ig->v[i]);
    free(ig->v);
    free(ig);
}

/* Turn one gitignore line into a glob; false for blank lines, comments and
 * lines the glob dialect cannot say. */
static bool parse_line(ig_pat *out, const char *s, size_t n)
{
    if (n && s[n - 1] == '\r')
        n--;
    /* Trailing spaces go unless escaped with '\'. */
    while (n && s[n - 1] == ' ' && !(n >= 2 && s[n - 2] == '\\'))
        n--;
    if (!n || s[0] == '#')
        return false;
    bool negated = false;
    if (s[0] == '!') {
        negated = true;
        s++;
        n--;
    } else if (s[0] == '\\' && n >= 2 && (s[1] == '!' || s[1] == '#')) {
        s++;
        n--;
    }
    bool dir_only = false;
    if (n && s[n - 1] == '/') {
        dir_only = true;
        n--;
    }
    if (!n)
        return false;
    /* A '/' at the start or in the middle anchors the pattern to the
     * folder of the ignore file; otherwise it matches a name at any depth. */
    bool anchored = memchr(s, '/', n) != NULL;
    if (s[0] == '/') {
        s++;
        n--;
        if (!n)
            return false;
    }
    sp_buf b = SP_BUF_INIT;
    if (!anchored && !(n >= 3 && memcmp(s, "**/", 3) == 0))
        sp_buf_adds(&b, "**/");
    /* gitignore has no braces: they are literal. */
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\' && i + 1 < n) {
            sp_buf_addc(&b, s[i++]);
        } else if (s[i] == '{' || s[i] == '}') {
            sp_buf_addc(&b, '\\');
        }
        sp_buf_addc(&b, s[i]);
    }
    /* A trailing slash-star-star matches everything inside a folder, not
     * the folder itself (so `!foo/keep` after it can bring a file back):
     * one more component, any name. */
    if (b.len >= 3 && memcmp(b.data + b.len - 3, "/**", 3) == 0 &&
        (b.len == 3 || b.data[b.len - 4] != '\\'))
        sp_buf_adds(&b, "/*");
    char *pattern = sp_buf_steal(&b);
    sp_glob *g = NULL;
    sp_error *err = NULL;
    bool ok = sp_glob_compile(&g, pattern, &err) == 0;
    sp_error_free(err);
    free(pattern);
    if (!ok)
        return false;
    *out = (ig_pat){g, negated, dir_only};
    return true;
}

/* Open a relative path below dfd without following any symlink on the
 * way (".git/info/exclude" must not lead out of the workspace). */
static int open_nofollow(int dfd, const char *path)
{
    int cur = dfd;
    for (;;) {
        const char *slash = strchr(path, '/');
        if (!slash)
            break;
        char name[NAME_MAX + 1];
        size_t len = (size_t)(slash - path);
        if (len > NAME_MAX)
            len = NAME_MAX;
        memcpy(name, path, len);
        name[len] = '\0';
        int next = openat(cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (cur != dfd)
            close(cur);
        if (next < 0)
            return -1;
        cur = next;
        path = slash + 1;
    }
    int fd = openat(cur, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (cur != dfd)
        close(cur);
    return fd;
}

static void read_kind(ig_frame *f, enum ig_kind k, sp_fs *fs, int dfd)
{
    cleanup_free char *path = sp_path_join(f->dir, ig_files[k]);
    if (fs && sp_fs_denied(fs, path))
        return;
    cleanup_close int fd = open_nofollow(dfd, ig_files[k]);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size > IGNORE_MAX_BYTES)
        return;
    sp_buf buf = SP_BUF_INIT;
    sp_error *err = NULL;
    int r = sp_fs_slurp_fd(fd, ig_files[k], IGNORE_MAX_BYTES, &buf, &err);
    sp_error_free(err);
    size_t cap = 0;
    const char *p = buf.data, *end = buf.data + buf.len;
    while (r == 0 && p && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        ig_pat pat;
        if (parse_line(&pat, p, len)) {
            if (f->n[k] == cap) {
                cap = cap ? cap * 2 : 8;
                f->pats[k] = sp_xrealloc(f->pats[k], cap * sizeof(ig_pat));
            }
            f->pats[k][f->n[k]++] = pat;
        }
        p = nl ? nl + 1 : end;
    }
    sp_buf_dispose(&buf);
}

/* Whether the first component of ig_files[k] is among `names`: most
 * folders have no ignore file, and a walk should not pay a failed open for
 * each kind in each of them. */
static bool may_exist(const sp_dirnames *names, enum ig_kind k)
{
    if (!names)
        return true;
    const char *f = ig_files[k];
    size_t len = strcspn(f, "/");
    for (size_t i = 0; i < names->n; i++) {
        const char *n = sp_dirnames_name(names, i);
        if (strncmp(n, f, len) == 0 && n[len] == '\0')
            return true;
    }
    return false;
}

void sp_ignore_push(sp_ignore *ig, sp_fs *fs, int dfd, const char *dir, unsigned depth,
                    const sp_dirnames *names)
{
    bool want[IG_KINDS], some = false;
    for (int k = 0; k < IG_KINDS; k++) {
        bool git_kind = k == IG_GITIGNORE || (k == IG_EXCLUDE && strcmp(dir, ".") == 0);
        some |= want[k] = (!ig->git_only || git_kind) && may_exist(names, (enum ig_kind)k);
    }
    if (!some)
        return;
    ig_frame f = {.dir = sp_xstrdup(dir), .depth = depth};
    bool any = false;
    for (int k = 0; k < IG_KINDS; k++) {
        if (want[k])
            read_kind(&f, (enum ig_kind)k, fs, dfd);
        any |= f.n[k] > 0;
    }
    if (!any) {
        frame_dispose(&f);
        return;
    }
    if (ig->n == ig->cap) {
        ig->cap = ig->cap ? ig->cap * 2 : 8;
        ig->v = sp_xrealloc(ig->v, ig->cap * sizeof(ig_frame));
    }
    ig->v[ig->n++] = f;
}

void sp_ignore_pop_to(sp_ignore *ig, unsigned depth)
{
    while (ig->n && ig->v[ig->n - 1].depth >= depth && ig->v[ig->n - 1].depth > 0)
        frame_dispose(&ig->v[--ig->n]);
}

/* `rel` below folder `dir`, or NULL when it is not below it. */
static const char *below(const char *dir, const char *rel)
{
    if (strcmp(dir, ".") == 0)
        return rel;
    size_t n = strlen(dir);
    return strncmp(rel, dir, n) == 0 && rel[n] == '/' ? rel + n + 1 : NULL;
}

bool sp_ignore_match(const sp_ignore *ig, const char *rel, bool is_dir)
{
    for (int k = 0; k < IG_KINDS; k++) {
        for (size_t i = ig->n; i-- > 0;) {
            const ig_frame *f = &ig->v[i];
            const char *sub = f->n[k] ? below(f->dir, rel) : NULL;
            if (!sub)
                continue;
            for (size_t j = f->n[k]; j-- > 0;) {
                const ig_pat *p = &f->pats[k][j];
                if ((!p->dir_only || is_dir) && sp_glob_match(p->g, sub))
                    return !p->negated;
            }
        }
    }
    return false;
}
