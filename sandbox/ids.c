/* Which host ids a container's user has, and handing a workspace over to
 * them.
 *
 * Contract: sp_ids_hand_over() changes owners only of what lies below the
 * folder fd it is given, reaching every entry through fds (sp_tree_walk:
 * openat(O_NOFOLLOW), fchownat(AT_SYMLINK_NOFOLLOW)), never by a path and
 * never through a symlink, so a tree rewritten while it runs cannot steer it
 * outside. It runs before any of the workload does (right after the
 * container's pid 1 started), but does not rely on that for containment. */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "sandbox_internal.h"
#include "fdtree.h"

int sp_idmap_parse(sp_idmap *m, const char *text)
{
    memset(m, 0, sizeof(*m));
    const char *p = text;
    while (*p) {
        unsigned long long in, out, count;
        int used = 0;
        if (sscanf(p, " %llu %llu %llu%n", &in, &out, &count, &used) != 3)
            break;
        if (m->n == SP_IDMAP_MAX || in > UINT32_MAX || out > UINT32_MAX || count > UINT32_MAX ||
            count == 0)
            return -1;
        m->l[m->n++] = (sp_idmap_line){(uint32_t)in, (uint32_t)out, (uint32_t)count};
        p += used;
    }
    while (*p == ' ' || *p == '\n' || *p == '\t')
        p++;
    return *p || m->n == 0 ? -1 : 0;
}

bool sp_idmap_to_host(const sp_idmap *m, uint32_t inside, uint32_t *out)
{
    for (size_t i = 0; i < m->n; i++)
        if (inside >= m->l[i].inside && inside - m->l[i].inside < m->l[i].count) {
            *out = m->l[i].outside + (inside - m->l[i].inside);
            return true;
        }
    return false;
}

bool sp_idmap_to_inside(const sp_idmap *m, uint32_t host, uint32_t *out)
{
    for (size_t i = 0; i < m->n; i++)
        if (host >= m->l[i].outside && host - m->l[i].outside < m->l[i].count) {
            *out = m->l[i].inside + (host - m->l[i].outside);
            return true;
        }
    return false;
}

bool sp_idmap_equal(const sp_idmap *a, const sp_idmap *b)
{
    return a->n == b->n && memcmp(a->l, b->l, a->n * sizeof(a->l[0])) == 0;
}

bool sp_idmap_is_identity(const sp_idmap *m)
{
    return m->n == 1 && m->l[0].inside == 0 && m->l[0].outside == 0 && m->l[0].count == UINT32_MAX;
}

static int read_map(sp_idmap *m, int pid, const char *which, sp_error **err)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/%s", pid, which);
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
    sp_buf b = SP_BUF_INIT;
    if (fd < 0 || sp_read_all(fd, &b, 1u << 16) < 0) {
        int r = sp_err_errno(err, errno, "read the container's id map", path);
        sp_buf_dispose(&b);
        return r;
    }
    int r = sp_idmap_parse(m, b.data ? b.data : "");
    sp_buf_dispose(&b);
    if (r < 0)
        return sp_err_set(err, SP_EPODMAN, 0, "%s: not an id map the kernel writes", path);
    return 0;
}

int sp_idmap_read(sp_idmap *uid, sp_idmap *gid, int pid, sp_error **err)
{
    int r = read_map(uid, pid, "uid_map", err);
    return r < 0 ? r : read_map(gid, pid, "gid_map", err);
}

cJSON *sp_idmap_json(const sp_idmap *m)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < m->n; i++) {
        const double v[3] = {m->l[i].inside, m->l[i].outside, m->l[i].count};
        cJSON_AddItemToArray(a, cJSON_CreateDoubleArray(v, 3));
    }
    return a;
}

int sp_idmap_from_json(sp_idmap *m, const cJSON *a)
{
    memset(m, 0, sizeof(*m));
    const cJSON *line;
    cJSON_ArrayForEach(line, a)
    {
        double v[3];
        if (cJSON_GetArraySize(line) != 3 || m->n == SP_IDMAP_MAX)
            return -1;
        for (int k = 0; k < 3; k++) {
            const cJSON *x = cJSON_GetArrayItem(line, k);
            if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > UINT32_MAX)
                return -1;
            v[k] = x->valuedouble;
        }
        m->l[m->n++] = (sp_idmap_line){(uint32_t)v[0], (uint32_t)v[1], (uint32_t)v[2]};
    }
    return 0;
}

typedef struct hand_over {
    const sp_idmap *old_u, *old_g, *new_u, *new_g;
    uint32_t uid, gid;
    uint64_t changed;
} hand_over;

/* Where host id `id` goes: through the container id it had under the old
 * map to the same container id under the new one; anything else to `def`. */
static uint32_t moved(uint32_t id, const sp_idmap *old, const sp_idmap *new_map, uint32_t def)
{
    uint32_t inside, host;
    if (old && sp_idmap_to_inside(old, id, &inside) && sp_idmap_to_host(new_map, inside, &host))
        return host;
    return def;
}

static int hand_over_one(const sp_tree_entry *e, int when, void *ctx, sp_error **err)
{
    hand_over *h = ctx;
    if (when != SP_TREE_PRE)
        return 0;
    const struct stat *st = e->st;
    uint32_t u = moved(st->st_uid, h->old_u, h->new_u, h->uid);
    uint32_t g = moved(st->st_gid, h->old_g, h->new_g, h->gid);
    if (u == st->st_uid && g == st->st_gid)
        return 0;
    /* Pin the entry: every change goes through this fd, so an entry
     * swapped for a symlink (or anything else) after the walk looked at it
     * is left alone rather than followed. */
    cleanup_close int fd = openat(e->parent_fd, e->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    struct stat now;
    if (fd < 0 || fstat(fd, &now) < 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino)
        return 0; /* gone or replaced meanwhile: not what we looked at */
    if (fchownat(fd, "", u, g, AT_EMPTY_PATH) < 0)
        return sp_err_errno(err, errno, "hand over to the container's user",
                            *e->path ? e->path : ".");
    h->changed++;
    /* chown clears set-id bits; the workspace is mounted nosuid, and a
     * snapshot must find the modes it left. Through the pinned inode, never
     * a symlink. */
    if (!S_ISLNK(now.st_mode) && (now.st_mode & 06000)) {
        char proc[64];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        (void)chmod(proc, now.st_mode & 07777);
    }
    return 0;
}

int sp_ids_hand_over(uint64_t *changed, int dirfd, const char *name, const sp_idmap *old_u,
                     const sp_idmap *old_g, const sp_idmap *new_u, const sp_idmap *new_g,
                     uint32_t uid, uint32_t gid, sp_error **err)
{
    hand_over h = {old_u, old_g, new_u, new_g, uid, gid, 0};
    int r = sp_tree_walk(dirfd, name, hand_over_one, &h, err);
    if (changed)
        *changed = h.changed;
    return r;
}
