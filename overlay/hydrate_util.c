/* Hydration helpers: sizes for messages, path arithmetic, reading a
 * folder's names, and a stack of open folders for pre-order walks. */
#include "hydrate_internal.h"

/* ------------------------------------------------------------ helpers -- */

/* A human size for messages: "1.5 GiB". */
static void fmt_size(char *buf, size_t len, uint64_t v)
{
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
    if (v < 1024) {
        snprintf(buf, len, "%" PRIu64 " bytes", v);
        return;
    }
    double d = (double)v;
    size_t u = 0;
    while (d >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
        d /= 1024;
        u++;
    }
    snprintf(buf, len, "%.1f %s", d, units[u]);
}

/* fmt_size() plus the exact count when the short form rounds:
 * "1.5 MiB (1572864 bytes)", or "700 bytes". */
void hyd_fmt_size_exact(char *buf, size_t len, uint64_t v)
{
    char h[32];
    fmt_size(h, sizeof(h), v);
    if (v < 1024)
        snprintf(buf, len, "%s", h);
    else
        snprintf(buf, len, "%s (%" PRIu64 " bytes)", h, v);
}

bool hyd_path_within(const char *p, const char *root)
{
    size_t n = strlen(root);
    if (n == 1 && root[0] == '/')
        return true;
    return strncmp(p, root, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

/* The part of p below root ("" for root itself); p must be within root. */
const char *hyd_path_below(const char *p, const char *root)
{
    size_t n = strlen(root);
    if (n == 1 && root[0] == '/')
        return p + 1;
    return p[n] == '/' ? p + n + 1 : p + n;
}

/* Join with "" meaning the base itself. */
char *hyd_join(const char *dir, const char *name)
{
    if (!dir || !*dir)
        return sp_xstrdup(name);
    return sp_xasprintf("%s/%s", dir, name);
}

const char *hyd_base_name(const char *rel)
{
    const char *s = strrchr(rel, '/');
    return s ? s + 1 : rel;
}

/* The parent part of rel as a new string ("" at the top). */
char *hyd_dir_name(const char *rel)
{
    const char *s = strrchr(rel, '/');
    return s ? sp_xstrndup(rel, (size_t)(s - rel)) : sp_xstrdup("");
}

/* Contract: open `rel` beneath folder fd `dirfd`, one component at a time,
 * each with O_NOFOLLOW (intermediate ones as O_PATH|O_DIRECTORY): a symlink
 * anywhere on the way fails (ENOTDIR or ELOOP), and `.`/`..` components are
 * refused (EINVAL). A final symlink opened with O_PATH yields the link
 * itself; callers that accept O_PATH check the type. "" opens dirfd's
 * folder again. Returns an fd or -1 with errno set. */
int hyd_open_beneath(int dirfd, const char *rel, int flags)
{
    if (!*rel)
        return openat(dirfd, ".", flags | O_CLOEXEC);
    int cur = dirfd;
    const char *p = rel;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        char comp[NAME_MAX + 1];
        if (len == 0 || len > NAME_MAX || (len == 1 && p[0] == '.') ||
            (len == 2 && p[0] == '.' && p[1] == '.')) {
            if (cur != dirfd)
                close(cur);
            errno = len > NAME_MAX ? ENAMETOOLONG : EINVAL;
            return -1;
        }
        memcpy(comp, p, len);
        comp[len] = '\0';
        int f = slash ? O_PATH | O_DIRECTORY : flags;
        int fd = openat(cur, comp, f | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        if (cur != dirfd)
            close(cur);
        if (fd < 0) {
            errno = e;
            return -1;
        }
        cur = fd;
        if (!slash)
            return cur;
        p = slash + 1;
    }
}

/* The target of symlink name in dfd, malloc'd; NULL with errno. Heap, not
 * stack: the walks that call it recurse. */
char *hyd_read_link(int dfd, const char *name)
{
    char *buf = sp_xmalloc(PATH_MAX);
    ssize_t n = readlinkat(dfd, name, buf, PATH_MAX - 1);
    if (n < 0) {
        int e = errno;
        free(buf);
        errno = e;
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

static void dstack_clear(dstack *s)
{
    while (s->n) {
        s->n--;
        free(s->v[s->n].path);
        close(s->v[s->n].fd);
    }
}

void hyd_dstack_dispose(dstack *s)
{
    dstack_clear(s);
    free(s->v);
    s->v = NULL;
    s->cap = 0;
}

static bool is_ancestor_or_self(const char *a, const char *p)
{
    size_t n = strlen(a);
    return strncmp(a, p, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

/* An fd (owned by the stack) on folder `dir` beneath `base`, opened without
 * following symlinks; -1 with errno on failure. */
int hyd_dstack_get(dstack *s, int base, int key, const char *dir)
{
    if (s->key != key) {
        dstack_clear(s);
        s->key = key;
    }
    while (s->n && !is_ancestor_or_self(s->v[s->n - 1].path, dir)) {
        s->n--;
        free(s->v[s->n].path);
        close(s->v[s->n].fd);
    }
    if (!*dir)
        return base;
    int cur = s->n ? s->v[s->n - 1].fd : base;
    size_t done = s->n ? strlen(s->v[s->n - 1].path) : 0;
    while (dir[done] != '\0') {
        const char *p = dir + done + (done ? 1 : 0);
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        cleanup_free char *comp = sp_xstrndup(p, len);
        int fd = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return -1;
        if (s->n == s->cap) {
            s->cap = s->cap ? s->cap * 2 : 16;
            s->v = sp_xrealloc(s->v, s->cap * sizeof(*s->v));
        }
        done = (size_t)(p - dir) + len;
        s->v[s->n].path = sp_xstrndup(dir, done);
        s->v[s->n].fd = fd;
        s->n++;
        cur = fd;
    }
    return cur;
}
