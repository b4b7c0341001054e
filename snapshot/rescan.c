/* Catching up with the workspace from what the tracker saw: each dirty
 * path is looked at again through the scan, relative to its parent folder
 * opened beneath the root without following a symlink; anything the
 * tracker cannot vouch for sends the caller to a full walk (see track.c). */
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/syscall.h>

#include "snap_internal.h"

/* Open the folder at `dir` (a relative path, "" = the root) beneath
 * rootfd without following any symlink, and find its node. -1 when either
 * is not a folder any more. openat2(RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH)
 * does it in one call; without it, one name at a time with O_NOFOLLOW. */
static int open_dir_node(int rootfd, snode *root, const char *dir, snode **node)
{
    *node = NULL;
    snode *n = root;
    const char *p = dir;
    while (*p && n) {
        const char *slash = strchr(p, '/');
        size_t l = slash ? (size_t)(slash - p) : strlen(p);
        n = n->type == SN_DIR ? sp_snode_find(n, p, l, NULL) : NULL;
        p = slash ? slash + 1 : p + l;
    }
    if (!n || n->type != SN_DIR)
        return -1;
    int fd = -1;
    if (!*dir) {
        fd = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
    } else {
        static _Atomic int have_openat2 = 1;
        if (atomic_load_explicit(&have_openat2, memory_order_relaxed)) {
            struct open_how how = {
                .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
            };
            fd = (int)syscall(SYS_openat2, rootfd, dir, &how, sizeof(how));
            if (fd < 0 && (errno == ENOSYS || errno == EPERM))
                atomic_store_explicit(&have_openat2, 0, memory_order_relaxed);
            else if (fd < 0)
                return -1;
        }
        if (!atomic_load_explicit(&have_openat2, memory_order_relaxed)) {
            fd = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
            for (const char *q = dir; fd >= 0 && *q;) {
                const char *slash = strchr(q, '/');
                size_t l = slash ? (size_t)(slash - q) : strlen(q);
                char name[256];
                if (l >= sizeof(name)) {
                    close(fd);
                    return -1;
                }
                memcpy(name, q, l);
                name[l] = '\0';
                int cfd = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                close(fd);
                fd = cfd;
                q = slash ? slash + 1 : q + l;
            }
        }
    }
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) < 0 || (uint64_t)st.st_ino != n->ino)) {
        close(fd);
        return -1;
    }
    *node = n;
    return fd;
}

int sp_rescan(sp_scan *sc, sp_track *t, int rootfd, snode *root, sp_error **err)
{
    const sp_track_dirty *dv;
    size_t dn;
    int r = sp_track_changes(t, root, &dv, &dn, err);
    if (r != 0)
        return r;
    sc->new_links = false;
    int ret = 0;
    char *open_path = NULL; /* the parent folder currently open */
    int pfd = -1;
    snode *pnode = NULL;
    for (size_t i = 0; i < dn && ret == 0; i++) {
        const char *path = dv[i].path;
        if (strcmp(path, ".") == 0) {
            struct stat st;
            if (fstat(rootfd, &st) == 0 && (st.st_mode & 07777u) != root->mode) {
                root->mode = st.st_mode & 07777;
                sp_snode_dirty_up(root);
            }
            continue;
        }
        if (sp_track_dirty_above(t, path, true))
            continue; /* walked whole with its ancestor */
        const char *slash = strrchr(path, '/');
        cleanup_free char *parent = slash ? sp_xstrndup(path, (size_t)(slash - path)) : NULL;
        const char *name = slash ? slash + 1 : path;
        if (!open_path || strcmp(open_path, parent ? parent : "") != 0) {
            if (pfd >= 0)
                close(pfd);
            free(open_path);
            open_path = sp_xstrdup(parent ? parent : "");
            pfd = open_dir_node(rootfd, root, open_path, &pnode);
        }
        if (pfd < 0) {
            /* The folder changed too; its own event covers this path. */
            if (sp_track_dirty_above(t, path, false))
                continue;
            ret = 1;
            break;
        }
        sc->path.len = 0;
        sp_scan_push(sc, path);
        ret = sp_scan_name(sc, pfd, pnode, name, dv[i].deep, err);
        sp_scan_pop(sc, 0);
    }
    if (pfd >= 0)
        close(pfd);
    free(open_path);
    sp_track_clear(t);
    /* A name we did not know of appeared for some file: its other names
     * were never told (link() sends no event to their folders), so only
     * a full walk finds them all. */
    if (ret == 0 && sc->new_links)
        ret = 1;
    return ret;
}
