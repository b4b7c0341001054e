/* Change tracking for long-lived handles: inotify on every folder of the
 * workspace, so a snapshot or restore only looks at the paths events name.
 *
 * inotify is inode-based, so it also sees writes the container makes
 * through its bind mount of the workspace. A watch is added on the folder
 * fd we are about to read (through /proc/self/fd, which names exactly that
 * inode) before its entries are listed, so nothing created after the
 * listing goes unseen.
 *
 * Events become "dirty" paths (a name in a watched folder) to stat again;
 * a folder created or moved in is walked whole. Paths are kept as strings,
 * not node pointers, because processing one can free nodes another points
 * at. When tracking cannot vouch for what it did not report (the kernel
 * queue overflowed, a watch could not be added, the root itself moved, a
 * dirty path no longer resolves), the caller does a full walk instead,
 * which reinstalls every watch.
 *
 * Not seen by inotify in a file's own folder: a write through another of
 * its names (a hard link in another folder, or outside the workspace;
 * link() itself tells no folder but the new name's). So every file known
 * to have several names is stat'ed again by every operation, and a file
 * found with a name we did not know of (new, or its link count grew) costs
 * a full walk, which finds its other names.
 *
 * Not seen at all: writes through a shared writable mmap. A full walk
 * (sp_snapstore_invalidate()) catches those by their mtime. */
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>

#include "snap_internal.h"

#define WATCH_MASK                                                                                 \
    (IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO |                 \
     IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

struct sp_track {
    int fd;
    snode **wdmap; /* wd -> folder node */
    size_t wdcap;
    bool ok;     /* nothing was missed since the last full walk */
    bool synced; /* a full walk has put the watches in place */
    sp_track_dirty *dv;
    size_t dn, dcap;
};

int sp_track_new(sp_track **out, sp_error **err)
{
    *out = NULL;
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0)
        return sp_err_errno(err, errno, "inotify", "workspace");
    sp_track *t = sp_xcalloc(1, sizeof(*t));
    t->fd = fd;
    *out = t;
    return 0;
}

void sp_track_clear(sp_track *t)
{
    for (size_t i = 0; i < t->dn; i++)
        free(t->dv[i].path);
    t->dn = 0;
}

void sp_track_free(sp_track *t)
{
    if (!t)
        return;
    sp_track_clear(t);
    free(t->dv);
    free(t->wdmap);
    close(t->fd);
    free(t);
}

int sp_track_fd(const sp_track *t)
{
    return t->fd;
}

bool sp_track_ok(const sp_track *t)
{
    return t->ok && t->synced;
}

void sp_track_reset(sp_track *t)
{
    t->ok = false;
}

void sp_track_watch(sp_track *t, int dfd, snode *dir)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/self/fd/%d", dfd);
    int wd = inotify_add_watch(t->fd, p, WATCH_MASK);
    if (wd < 0) {
        /* Out of watches (fs.inotify.max_user_watches), no /proc: the
         * next operation walks everything again. */
        t->ok = false;
        t->synced = false;
        return;
    }
    if ((size_t)wd >= t->wdcap) {
        size_t ncap = t->wdcap ? t->wdcap : 256;
        while (ncap <= (size_t)wd)
            ncap *= 2;
        t->wdmap = sp_xrealloc(t->wdmap, ncap * sizeof(snode *));
        memset(t->wdmap + t->wdcap, 0, (ncap - t->wdcap) * sizeof(snode *));
        t->wdcap = ncap;
    }
    if (dir->wd >= 0 && dir->wd != wd && (size_t)dir->wd < t->wdcap && t->wdmap[dir->wd] == dir)
        t->wdmap[dir->wd] = NULL;
    t->wdmap[wd] = dir;
    dir->wd = wd;
}

void sp_track_unwatch(void *ud, snode *dir)
{
    sp_track *t = ud;
    if (t && dir->wd >= 0 && (size_t)dir->wd < t->wdcap && t->wdmap[dir->wd] == dir)
        t->wdmap[dir->wd] = NULL;
    dir->wd = -1;
}

void sp_track_begin_full(sp_track *t)
{
    /* Events queued so far only name paths the coming walk will see; the
     * ones that arrive during the walk stay queued for next time. */
    char buf[65536] __attribute__((aligned(8)));
    while (read(t->fd, buf, sizeof(buf)) > 0)
        ;
    sp_track_clear(t);
    t->ok = true;
    t->synced = true;
}

static void add_dirty(sp_track *t, char *path, bool deep)
{
    if (t->dn == t->dcap) {
        t->dcap = t->dcap ? t->dcap * 2 : 64;
        t->dv = sp_xrealloc(t->dv, t->dcap * sizeof(*t->dv));
    }
    t->dv[t->dn].path = path;
    t->dv[t->dn].deep = deep;
    t->dn++;
}

static char *child_path(const snode *dir, const char *name)
{
    if (!dir->parent)
        return sp_xstrdup(name);
    char *p = sp_snode_path(dir);
    char *r = sp_xasprintf("%s/%s", p, name);
    free(p);
    return r;
}

int sp_track_drain(sp_track *t, sp_error **err)
{
    char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(t->fd, buf, sizeof(buf));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return 0;
            t->ok = false;
            return sp_err_errno(err, errno, "read", "inotify");
        }
        if (n == 0)
            return 0;
        for (ssize_t off = 0; off < n;) {
            const struct inotify_event *ev = (const struct inotify_event *)(buf + off);
            off += (ssize_t)(sizeof(*ev) + ev->len);
            if (ev->mask & IN_Q_OVERFLOW) {
                t->ok = false;
                continue;
            }
            if (ev->wd < 0)
                continue;
            snode *d = (size_t)ev->wd < t->wdcap ? t->wdmap[ev->wd] : NULL;
            if (ev->mask & IN_IGNORED) {
                if (d) {
                    d->wd = -1;
                    t->wdmap[ev->wd] = NULL;
                }
                continue;
            }
            if (!d) {
                /* A folder we dropped (moved away, or replaced): its new
                 * place, if any, is walked whole with a new watch. */
                inotify_rm_watch(t->fd, ev->wd);
                continue;
            }
            if (ev->len == 0 || ev->name[0] == '\0') {
                if (!d->parent && (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)))
                    t->ok = false; /* the root itself moved */
                else if (ev->mask & IN_ATTRIB)
                    add_dirty(t, d->parent ? sp_snode_path(d) : sp_xstrdup("."), false);
                continue;
            }
            bool deep = (ev->mask & IN_ISDIR) && (ev->mask & (IN_CREATE | IN_MOVED_TO));
            add_dirty(t, child_path(d, ev->name), deep);
        }
    }
}

static int cmp_dirty(const void *a, const void *b)
{
    return strcmp(((const sp_track_dirty *)a)->path, ((const sp_track_dirty *)b)->path);
}

bool sp_track_dirty_above(const sp_track *t, const char *path, bool deep_only)
{
    size_t len = strlen(path);
    for (size_t i = len; i-- > 0;) {
        if (path[i] != '/')
            continue;
        char *pre = sp_xstrndup(path, i);
        sp_track_dirty key = {pre, false};
        sp_track_dirty *hit = bsearch(&key, t->dv, t->dn, sizeof(*t->dv), cmp_dirty);
        free(pre);
        if (hit && (!deep_only || hit->deep))
            return true;
    }
    return false;
}

/* Every file known to have other names: a write through one of those
 * (in a folder elsewhere, or outside the workspace) reaches the file with
 * no event in its own folder, so each operation looks at it again. */
static void add_linked(sp_track *t, const snode *dir)
{
    for (uint32_t i = 0; i < dir->nkids; i++) {
        const snode *k = dir->kids[i];
        if (k->type == SN_DIR)
            add_linked(t, k);
        else if (k->type == SN_FILE && (k->flags & SN_LINKED))
            add_dirty(t, sp_snode_path(k), false);
    }
}

int sp_track_changes(sp_track *t, const snode *root, const sp_track_dirty **out, size_t *n,
                     sp_error **err)
{
    *out = NULL;
    *n = 0;
    int r = sp_track_drain(t, err);
    if (r < 0)
        return r;
    if (!sp_track_ok(t))
        return 1;
    add_linked(t, root);
    if (t->dn > 1) {
        qsort(t->dv, t->dn, sizeof(*t->dv), cmp_dirty);
        size_t w = 0;
        for (size_t i = 0; i < t->dn; i++) {
            if (w > 0 && strcmp(t->dv[w - 1].path, t->dv[i].path) == 0) {
                t->dv[w - 1].deep |= t->dv[i].deep;
                free(t->dv[i].path);
                continue;
            }
            t->dv[w++] = t->dv[i];
        }
        t->dn = w;
    }
    *out = t->dv;
    *n = t->dn;
    return 0;
}
