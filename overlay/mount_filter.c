/* A mount's filters asked one path at a time (sandpod/mount_filter.h):
 * the same globs and git ignore rules hydration walks with. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "glob.h"
#include "ignore.h"
#include "sandpod/mount_filter.h"

/* The folders whose ignore files are pushed, root first: frame i is the
 * folder at depth i ("" the root), pushed for entries deeper than i. An
 * fd of -1 is a folder the host does not have (nothing pushed; nothing
 * deeper exists either). */
struct frame {
    char *dir;
    int fd;
};

struct sp_mount_filter {
    sp_globset *incl, *excl;
    sp_ignore *ig;
    int host_fd;
    struct frame *st;
    size_t n, cap;
};

static size_t count(const char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

int sp_mount_filter_new(sp_mount_filter **out, const sp_mount *m, int host_fd, sp_error **err)
{
    *out = NULL;
    sp_mount_filter *f = sp_xcalloc(1, sizeof(*f));
    f->host_fd = host_fd;
    int r = 0;
    size_t ne = count(m->exclude), ni = count(m->include);
    if (ne && (r = sp_globset_compile(&f->excl, m->exclude, ne, err)) < 0)
        r = sp_err_wrap(err, r, "exclude");
    if (r == 0 && ni && (r = sp_globset_compile(&f->incl, m->include, ni, err)) < 0)
        r = sp_err_wrap(err, r, "include");
    if (r < 0) {
        sp_mount_filter_free(f);
        return r;
    }
    if (m->gitignore && host_fd >= 0)
        f->ig = sp_ignore_new_git();
    *out = f;
    return 0;
}

static void pop_frames(sp_mount_filter *f, size_t keep)
{
    while (f->n > keep) {
        struct frame *fr = &f->st[--f->n];
        free(fr->dir);
        if (fr->fd >= 0 && fr->fd != f->host_fd)
            close(fr->fd);
    }
    if (f->ig)
        sp_ignore_pop_to(f->ig, (unsigned)keep + 1);
}

static void push_frame(sp_mount_filter *f, const char *dir, size_t dlen)
{
    if (f->n == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 16;
        f->st = sp_xrealloc(f->st, f->cap * sizeof(*f->st));
    }
    int fd = -1;
    if (f->n == 0) {
        fd = f->host_fd;
    } else {
        int parent = f->st[f->n - 1].fd;
        const char *leaf = dir + (f->n > 1 ? strlen(f->st[f->n - 1].dir) + 1 : 0);
        cleanup_free char *name = sp_xstrndup(leaf, dlen - (size_t)(leaf - dir));
        if (parent >= 0)
            fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    struct frame *fr = &f->st[f->n++];
    fr->dir = sp_xstrndup(dir, dlen);
    fr->fd = fd;
    if (fd >= 0)
        sp_ignore_push(f->ig, NULL, fd, dlen ? fr->dir : ".", (unsigned)f->n, NULL);
}

/* The length of rel's ancestor at depth d: 0 for the root, then up to
 * each '/' in turn; -1 past the last folder. */
static long ancestor_len(const char *rel, size_t d)
{
    if (d == 0)
        return 0;
    const char *p = rel;
    for (size_t i = 0; i < d; i++) {
        const char *s = strchr(p, '/');
        if (!s)
            return -1;
        p = s + 1;
    }
    return (long)(p - rel - 1);
}

/* Make the frames those of the folders above rel: the root, then each
 * folder on the way down. */
static void enter(sp_mount_filter *f, const char *rel)
{
    size_t keep = 0;
    for (long len; keep < f->n && (len = ancestor_len(rel, keep)) >= 0; keep++)
        if (strlen(f->st[keep].dir) != (size_t)len ||
            memcmp(f->st[keep].dir, rel, (size_t)len) != 0)
            break;
    pop_frames(f, keep);
    for (long len; (len = ancestor_len(rel, f->n)) >= 0;)
        push_frame(f, rel, (size_t)len);
}

bool sp_mount_filter_selects(sp_mount_filter *f, const char *rel, bool is_dir)
{
    if (f->excl && sp_globset_match(f->excl, rel))
        return false;
    if (f->ig) {
        enter(f, rel);
        if (sp_ignore_match(f->ig, rel, is_dir))
            return false;
        /* git never looks inside an ignored folder. */
        for (const char *s = strchr(rel, '/'); s; s = strchr(s + 1, '/')) {
            cleanup_free char *up = sp_xstrndup(rel, (size_t)(s - rel));
            if (sp_ignore_match(f->ig, up, true))
                return false;
        }
    }
    return !f->incl || sp_globset_match(f->incl, rel);
}

void sp_mount_filter_free(sp_mount_filter *f)
{
    if (!f)
        return;
    if (f->ig)
        pop_frames(f, 0);
    free(f->st);
    sp_ignore_free(f->ig);
    sp_globset_free(f->incl);
    sp_globset_free(f->excl);
    free(f);
}
