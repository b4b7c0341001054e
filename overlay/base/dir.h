/* The one folder reader: every name of a folder we hold an fd on, read
 * with getdents64(2). Internal; not installed.
 *
 * Every module lists folders through this (sp_tree_walk included), so
 * there is one place that knows the getdents64 record, skips "." and "..",
 * keeps its buffer off the stack (the walks recurse) and bounds how many
 * names one folder may cost. */
#ifndef SANDPOD_DIR_H
#define SANDPOD_DIR_H

#include <stddef.h>

#include "base.h"

/* The names of one folder. In buf each entry is its d_type byte, then its
 * name and a NUL; offs[i] is where name i starts (so the type of name i is
 * buf.data[offs[i] - 1]). */
typedef struct sp_dirnames {
    sp_buf buf;
    size_t *offs;
    size_t n, cap;
} sp_dirnames;

#define SP_DIRNAMES_INIT                                                                           \
    {                                                                                              \
        SP_BUF_INIT, NULL, 0, 0                                                                    \
    }

/* Order of the names: as the file system gives them (cheapest), by
 * strcmp, or in git's tree order (a folder sorts as if its name ended
 * with '/'; needs d_type, which every local file system gives). */
typedef enum sp_dir_order {
    SP_DIR_UNSORTED = 0,
    SP_DIR_BYNAME = 1,
    SP_DIR_GITORDER = 2,
} sp_dir_order;

/* Read every name of the folder open at dfd (not "." or ".."), from its
 * start (the fd is rewound), replacing what `out` held. At most max_names
 * names (0: no limit); more is E2BIG. Returns 0, or -1 with errno (out
 * then holds no names). The fd must be a readable folder fd (O_RDONLY,
 * not O_PATH). */
int sp_dir_read(sp_dirnames *out, int dfd, sp_dir_order order, size_t max_names);

/* sp_dir_read() of the folder `name` in dirfd (a path is allowed when
 * the caller owns it; the last component is never followed), opened
 * O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC and closed again. */
int sp_dir_read_at(sp_dirnames *out, int dirfd, const char *name, sp_dir_order order,
                   size_t max_names);

static inline const char *sp_dirnames_name(const sp_dirnames *d, size_t i)
{
    return d->buf.data + d->offs[i];
}

static inline unsigned char sp_dirnames_type(const sp_dirnames *d, size_t i)
{
    return (unsigned char)d->buf.data[d->offs[i] - 1];
}

void sp_dirnames_dispose(sp_dirnames *d);

#endif
