/* The one folder reader (dir.h). */
#include "dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* getdents64 buffer: on the heap, since callers recurse. */
#define DIR_CHUNK 32768

static int cmp_byname(const void *a, const void *b, void *arg)
{
    const char *base = arg;
    return strcmp(base + *(const size_t *)a, base + *(const size_t *)b);
}

/* The i-th byte of a name as git orders it: a folder's name continues
 * with '/'. */
static unsigned git_char(const unsigned char *name, size_t len, bool dir, size_t i)
{
    if (i < len)
        return name[i];
    return i == len && dir ? '/' : 0;
}

static int cmp_git(const void *a, const void *b, void *arg)
{
    const unsigned char *base = arg;
    const unsigned char *x = base + *(const size_t *)a;
    const unsigned char *y = base + *(const size_t *)b;
    size_t xl = strlen((const char *)x), yl = strlen((const char *)y);
    bool xd = x[-1] == DT_DIR, yd = y[-1] == DT_DIR;
    for (size_t i = 0;; i++) {
        unsigned cx = git_char(x, xl, xd, i), cy = git_char(y, yl, yd, i);
        if (cx != cy || cx == 0)
            return (int)cx - (int)cy;
    }
}

void sp_dirnames_dispose(sp_dirnames *d)
{
    sp_buf_dispose(&d->buf);
    free(d->offs);
    d->offs = NULL;
    d->n = d->cap = 0;
}

int sp_dir_read(sp_dirnames *out, int dfd, sp_dir_order order, size_t max_names)
{
    out->buf.len = 0;
    out->n = 0;
    if (lseek(dfd, 0, SEEK_SET) < 0)
        return -1;
    char *chunk = sp_xmalloc(DIR_CHUNK);
    int ret = 0;
    for (;;) {
        long got = syscall(SYS_getdents64, dfd, chunk, DIR_CHUNK);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            ret = (int)got;
            break;
        }
        for (long off = 0; off < got;) {
            const struct sp_dirent64 *d = (const void *)(chunk + off);
            off += d->d_reclen;
            const char *name = d->d_name;
            if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0')))
                continue;
            if (max_names && out->n == max_names) {
                errno = E2BIG;
                ret = -1;
                goto done;
            }
            if (out->n == out->cap) {
                out->cap = out->cap ? out->cap * 2 : 64;
                out->offs = sp_xrealloc(out->offs, out->cap * sizeof(size_t));
            }
            sp_buf_addc(&out->buf, (char)d->d_type);
            out->offs[out->n++] = out->buf.len;
            sp_buf_add(&out->buf, name, strlen(name) + 1);
        }
    }
done:
    free(chunk);
    if (ret < 0) {
        int e = errno;
        out->buf.len = 0;
        out->n = 0;
        errno = e;
        return -1;
    }
    if (order != SP_DIR_UNSORTED && out->n > 1)
        qsort_r(out->offs, out->n, sizeof(size_t), order == SP_DIR_GITORDER ? cmp_git : cmp_byname,
                out->buf.data);
    return 0;
}

int sp_dir_read_at(sp_dirnames *out, int dirfd, const char *name, sp_dir_order order,
                   size_t max_names)
{
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        out->buf.len = 0;
        out->n = 0;
        return -1;
    }
    int r = sp_dir_read(out, fd, order, max_names);
    int e = errno;
    close(fd);
    errno = e;
    return r;
}
