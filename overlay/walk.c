/* A sorted, contained directory walk: getdents64 on fds we hold, fstatat
 * with AT_SYMLINK_NOFOLLOW, and openat(O_NOFOLLOW) to descend, so a symlink
 * is reported as an entry and never entered. */
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "dir.h"
#include "path.h"
#include "walk.h"

/* Deeper folders are not visited: each level holds an fd, and an attacker
 * can build trees far deeper than any real project. */
#define SP_WALK_MAX_DEPTH 256

/* Names come in git's order (dir.h, SP_DIR_GITORDER): a folder compares
 * as if its name ended in '/', so "a.txt" comes before everything in
 * "a/". A pre-order walk then yields paths already in strcmp order, and a
 * walk cut short by a limit keeps the first paths of the sorted answer. */

/* `rel` is the path as named (it may pass through symlinks); `real` is
 * where the folder really is, for the deny list, or NULL when no deny list
 * applies. */
static int walk_dir(sp_fs *fs, int dfd, const char *rel, const char *real, unsigned depth,
                    const sp_walk_opts *opts, sp_walk_fn fn, void *ctx, sp_error **err)
{
    sp_dirnames nm = SP_DIRNAMES_INIT;
    int ret = SP_WALK_CONTINUE;
    if (sp_dir_read(&nm, dfd, SP_DIR_GITORDER, 0) < 0) {
        /* A folder that became unreadable or vanished mid-walk is skipped,
         * as find(1) would; the walk itself goes on. */
        goto done;
    }
    if (opts->enter)
        opts->enter(ctx, dfd, rel, depth - 1, &nm);
    for (size_t i = 0; i < nm.n; i++) {
        const char *name = sp_dirnames_name(&nm, i);
        cleanup_free char *child = sp_path_join(rel, name);
        cleanup_free char *child_real = real ? sp_path_join(real, name) : NULL;
        if (sp_fs_denied(fs, child) || (child_real && sp_fs_denied(fs, child_real)))
            continue;
        struct stat st;
        unsigned char type = sp_dirnames_type(&nm, i);
        if (opts->type_only && type != DT_UNKNOWN)
            st = (struct stat){.st_mode = DTTOIF(type)};
        else if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* vanished */
        bool isdir = S_ISDIR(st.st_mode);
        if (isdir && opts->skip_git && strcmp(name, ".git") == 0)
            continue;
        int r = fn(ctx, dfd, name, child, &st, depth, err);
        if (r < 0 || r == SP_WALK_STOP) {
            ret = r;
            goto done;
        }
        if (!isdir || r == SP_WALK_SKIP)
            continue;
        if ((opts->max_depth && depth >= opts->max_depth) || depth >= SP_WALK_MAX_DEPTH)
            continue;
        int cfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (cfd < 0)
            continue; /* swapped for a symlink or removed meanwhile */
        r = walk_dir(fs, cfd, child, child_real, depth + 1, opts, fn, ctx, err);
        close(cfd);
        if (r < 0 || r == SP_WALK_STOP) {
            ret = r;
            goto done;
        }
    }
done:
    sp_dirnames_dispose(&nm);
    return ret;
}

int sp_fs_walk(sp_fs *fs, const char *base_rel, const sp_walk_opts *opts, sp_walk_fn fn, void *ctx,
               sp_error **err)
{
    sp_walk_opts defaults = {0, false, NULL, false};
    if (!opts)
        opts = &defaults;
    int dfd = sp_fs_openat(fs, base_rel, O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0, true, err);
    if (dfd < 0)
        return dfd;
    cleanup_free char *real = NULL;
    if (fs->deny && !(real = sp_fs_fd_relpath(fs, dfd))) {
        close(dfd);
        return sp_err_set(err, SP_EDENIED, 0, "path is hidden by the deny list: %s", base_rel);
    }
    int r = walk_dir(fs, dfd, base_rel, real, 1, opts, fn, ctx, err);
    close(dfd);
    return r < 0 ? r : 0;
}

sp_fs_type sp_fs_type_of(mode_t m)
{
    if (S_ISREG(m))
        return SP_FS_FILE;
    if (S_ISDIR(m))
        return SP_FS_DIR;
    if (S_ISLNK(m))
        return SP_FS_SYMLINK;
    return SP_FS_OTHER;
}

const char *sp_fs_type_name(sp_fs_type t)
{
    switch (t) {
    case SP_FS_FILE:
        return "file";
    case SP_FS_DIR:
        return "dir";
    case SP_FS_SYMLINK:
        return "symlink";
    default:
        return "other";
    }
}
