/* sp_fs_glob(): the paths beneath a folder of the workspace that match a
 * pattern of the glob dialect (glob.c), found by a contained walk that does
 * not enter a folder below which nothing can match. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs_internal.h"

/* Matches returned when the caller gives no limit. */
#define DEFAULT_MAX_ENTRIES 100000

typedef struct glob_walk {
    const sp_glob *g;
    size_t skip; /* bytes of the base prefix ("base/") in root paths */
    size_t max;
    sp_fs_entries *res;
    size_t cap;
} glob_walk;

static int glob_visit(void *ctx, int dirfd, const char *name, const char *rel,
                      const struct stat *st, unsigned depth, sp_error **err)
{
    (void)dirfd;
    (void)depth;
    (void)err;
    glob_walk *w = ctx;
    const char *sub = strlen(rel) >= w->skip ? rel + w->skip : rel;
    if (sp_glob_match_entry(w->g, sub, S_ISDIR(st->st_mode))) {
        if (w->res->n >= w->max) {
            w->res->truncated = true;
            return SP_WALK_STOP;
        }
        if (w->res->n == w->cap) {
            w->cap = w->cap ? w->cap * 2 : 64;
            w->res->v = sp_xrealloc(w->res->v, w->cap * sizeof(sp_fs_entry));
        }
        sp_fs_entry *e = &w->res->v[w->res->n++];
        memset(e, 0, sizeof(*e));
        e->name = sp_xstrdup(name);
        e->path = sp_xstrdup(rel);
        e->type = sp_fs_type_of(st->st_mode);
        e->size = st->st_size > 0 ? (uint64_t)st->st_size : 0;
    }
    if (S_ISDIR(st->st_mode) && !sp_glob_could_match_below(w->g, sub))
        return SP_WALK_SKIP;
    return SP_WALK_CONTINUE;
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const sp_fs_entry *)a)->path, ((const sp_fs_entry *)b)->path);
}

int sp_fs_glob(sp_fs_entries **out, sp_fs *fs, const char *pattern, const char *base,
               size_t max_entries, sp_error **err)
{
    sp_fs_glob_opts o = SP_FS_GLOB_OPTS_INIT;
    o.base = base;
    o.max_entries = max_entries;
    return sp_fs_glob_ex(out, fs, pattern, &o, err);
}

int sp_fs_glob_ex(sp_fs_entries **out, sp_fs *fs, const char *pattern, const sp_fs_glob_opts *opts,
                  sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_FS_GLOB_OPTS_VERSION, "sp_fs_glob_opts", err) < 0)
        return SP_EINVAL;
    static const sp_fs_glob_opts defaults = SP_FS_GLOB_OPTS_INIT;
    const sp_fs_glob_opts *o = opts ? opts : &defaults;
    const char *base = o->base;
    size_t max_entries = o->max_entries;
    if (!fs || !pattern)
        return sp_err_set(err, SP_EINVAL, 0, "glob: missing handle or pattern");
    sp_glob *g = NULL;
    int rc =
        sp_glob_compile_flags(&g, pattern, o->hidden ? SP_GLOB_PERIOD_GIT : SP_GLOB_PERIOD, err);
    if (rc < 0)
        return rc;
    cleanup_free char *rel = NULL;
    rc = sp_fs_prepare(fs, base ? base : ".", &rel, err);
    if (rc < 0) {
        sp_glob_free(g);
        return rc;
    }
    sp_fs_entries *res = sp_xcalloc(1, sizeof(*res));
    glob_walk w = {
        .g = g,
        .skip = strcmp(rel, ".") == 0 ? 0 : strlen(rel) + 1,
        .max = max_entries ? max_entries : DEFAULT_MAX_ENTRIES,
        .res = res,
    };
    sp_walk_opts wo = {.max_depth = 0, .skip_git = false};
    rc = sp_fs_walk(fs, rel, &wo, glob_visit, &w, err);
    sp_glob_free(g);
    if (rc < 0) {
        sp_fs_entries_free(res);
        return rc;
    }
    if (res->n > 1)
        qsort(res->v, res->n, sizeof(sp_fs_entry), entry_cmp);
    *out = res;
    return 0;
}
