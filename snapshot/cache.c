/* The stat cache: the node tree saved in the store between processes, so a
 * one-shot command finds what changed with one stat walk and reads only
 * those files.
 *
 * Format (little-endian, native sizes fixed below):
 *   "SPSTAT03"  u64 seq  u64 root_dev  u64 root_ino  u64 generation  u64 count
 *   count records in pre-order:
 *     u8 type, u8 flags, u16 name_len, u32 mode, u64 dev, u64 ino,
 *     u64 size, i64 mtime_ns, i64 ctime_ns, u8 oid[20], u32 nkids,
 *     name bytes
 *   u64 checksum of everything before it
 *
 * Two slots, statcache-a and statcache-b, are written in place in turn
 * (the older one is overwritten, with a higher sequence number): no file
 * is created or renamed, which on ext4 costs more than writing the data. A
 * slot torn by a crash fails its checksum and the other one is used. A
 * cache that does not parse, or belongs to another root folder or gc
 * generation, is ignored: it only ever saves work. Every id in either slot
 * is an object present in the store: gc removes the older slot, keeps
 * what the newer one names, and rewrites it under the new generation. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "snap_internal.h"

/* 03: flags may hold SN_SPARSE. A reader of 02 would take a sparse
 * file's blob for its bytes, so it must not read this one. */
#define CACHE_MAGIC "SPSTAT03"
#define HEADER_LEN  48

static const char *const slot_names[2] = {"sandpod/statcache-a", "sandpod/statcache-b"};
#define REC_FIXED (1 + 1 + 2 + 4 + 8 * 5 + 20 + 4)

static uint64_t checksum(const uint8_t *p, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    for (; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static void put(sp_buf *b, const void *p, size_t n)
{
    sp_buf_add(b, p, n);
}

static void put_node(sp_buf *b, const snode *n)
{
    uint8_t type = n->type, flags = (uint8_t)(n->flags & (SN_RACY | SN_SPARSE));
    uint16_t nl = n->name_len;
    uint32_t mode = n->mode;
    uint32_t nk = n->type == SN_DIR ? n->nkids : 0;
    put(b, &type, 1);
    put(b, &flags, 1);
    put(b, &nl, 2);
    put(b, &mode, 4);
    put(b, &n->dev, 8);
    put(b, &n->ino, 8);
    put(b, &n->size, 8);
    put(b, &n->mtime_ns, 8);
    put(b, &n->ctime_ns, 8);
    put(b, n->oid.id, 20);
    put(b, &nk, 4);
    put(b, n->name, nl);
    for (uint32_t i = 0; i < nk; i++)
        put_node(b, n->kids[i]);
}

static uint64_t count_nodes(const snode *n)
{
    uint64_t c = 1;
    if (n->type == SN_DIR)
        for (uint32_t i = 0; i < n->nkids; i++)
            c += count_nodes(n->kids[i]);
    return c;
}

/* The sequence number of a slot whose header is ours, or 0. */
static uint64_t slot_seq(int dirfd, int slot)
{
    int fd = openat(dirfd, slot_names[slot], O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return 0;
    uint8_t h[16];
    ssize_t n = pread(fd, h, sizeof(h), 0);
    close(fd);
    uint64_t seq = 0;
    if (n == (ssize_t)sizeof(h) && memcmp(h, CACHE_MAGIC, 8) == 0)
        memcpy(&seq, h + 8, 8);
    return seq;
}

int sp_cache_save(int store_dirfd, const snode *root, const struct stat *root_st,
                  uint64_t generation, sp_error **err)
{
    uint64_t s0 = slot_seq(store_dirfd, 0), s1 = slot_seq(store_dirfd, 1);
    int slot = s0 <= s1 ? 0 : 1;
    uint64_t seq = (s0 > s1 ? s0 : s1) + 1;
    sp_buf b = SP_BUF_INIT;
    uint64_t count = count_nodes(root);
    sp_buf_grow(&b, (size_t)count * (REC_FIXED + 16) + 64);
    put(&b, CACHE_MAGIC, 8);
    put(&b, &seq, 8);
    uint64_t dev = (uint64_t)root_st->st_dev, ino = (uint64_t)root_st->st_ino;
    put(&b, &dev, 8);
    put(&b, &ino, 8);
    put(&b, &generation, 8);
    put(&b, &count, 8);
    put_node(&b, root);
    uint64_t sum = checksum((const uint8_t *)b.data, b.len);
    put(&b, &sum, 8);

    int ret = 0;
    const char *name = slot_names[slot];
    int fd = openat(store_dirfd, name, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        ret = sp_err_errno(err, errno, "write", name);
    } else {
        size_t off = 0;
        while (off < b.len && ret == 0) {
            ssize_t n = pwrite(fd, b.data + off, b.len - off, (off_t)off);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                ret = sp_err_errno(err, n < 0 ? errno : EIO, "write", name);
            else
                off += (size_t)n;
        }
        if (ret == 0 && ftruncate(fd, (off_t)b.len) < 0)
            ret = sp_err_errno(err, errno, "write", name);
        close(fd);
    }
    sp_buf_dispose(&b);
    return ret;
}

struct rd {
    const uint8_t *p, *end;
    bool bad;
};

static void get(struct rd *r, void *out, size_t n)
{
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = true;
        memset(out, 0, n);
        return;
    }
    memcpy(out, r->p, n);
    r->p += n;
}

static snode *get_node(struct rd *r, unsigned depth)
{
    uint8_t type, flags;
    uint16_t nl;
    uint32_t mode, nk;
    uint64_t dev, ino, size;
    int64_t mt, ct;
    uint8_t oid[20];
    get(r, &type, 1);
    get(r, &flags, 1);
    get(r, &nl, 2);
    get(r, &mode, 4);
    get(r, &dev, 8);
    get(r, &ino, 8);
    get(r, &size, 8);
    get(r, &mt, 8);
    get(r, &ct, 8);
    get(r, oid, 20);
    get(r, &nk, 4);
    if (r->bad || type < SN_FILE || type > SN_OTHER || (size_t)(r->end - r->p) < nl ||
        depth > SNAP_MAX_DEPTH + 1 || (type != SN_DIR && nk) || nk > (size_t)(r->end - r->p)) {
        r->bad = true;
        return NULL;
    }
    snode *n = sp_snode_new((const char *)r->p, nl, type);
    r->p += nl;
    n->flags = flags & (type == SN_FILE ? SN_RACY | SN_SPARSE : SN_RACY);
    n->mode = mode & 07777;
    n->dev = dev;
    n->ino = ino;
    n->size = size;
    n->mtime_ns = mt;
    n->ctime_ns = ct;
    memcpy(n->oid.id, oid, 20);
    if (nk) {
        n->kids = sp_xmalloc(nk * sizeof(snode *));
        n->capkids = nk;
        for (uint32_t i = 0; i < nk; i++) {
            snode *k = get_node(r, depth + 1);
            if (!k) {
                sp_snode_free(n, NULL, NULL);
                return NULL;
            }
            k->parent = n;
            n->kids[n->nkids++] = k;
            if (i > 0) {
                const snode *a = n->kids[i - 1];
                size_t m = a->name_len < k->name_len ? a->name_len : k->name_len;
                int c = memcmp(a->name, k->name, m);
                if (c > 0 || (c == 0 && a->name_len >= k->name_len)) {
                    r->bad = true; /* unsorted: not ours */
                    sp_snode_free(n, NULL, NULL);
                    return NULL;
                }
            }
        }
    }
    return n;
}

snode *sp_cache_load_slot(int store_dirfd, int slot, const struct stat *root_st,
                          uint64_t generation, uint64_t *seq_out)
{
    *seq_out = 0;
    int fd = openat(store_dirfd, slot_names[slot], O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size < HEADER_LEN + 8 || st.st_size > ((off_t)1 << 34)) {
        close(fd);
        return NULL;
    }
    size_t len = (size_t)st.st_size;
    /* Mapped whole and at once: no copy, no page fault per page. */
    uint8_t *data = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    close(fd);
    if (data == MAP_FAILED)
        return NULL;
    snode *root = NULL;
    uint64_t sum;
    memcpy(&sum, data + len - 8, 8);
    if (memcmp(data, CACHE_MAGIC, 8) == 0 && sum == checksum(data, len - 8)) {
        struct rd r = {data + 8, data + len - 8, false};
        uint64_t seq, dev, ino, gen, count;
        get(&r, &seq, 8);
        get(&r, &dev, 8);
        get(&r, &ino, 8);
        get(&r, &gen, 8);
        get(&r, &count, 8);
        if (!r.bad && dev == (uint64_t)root_st->st_dev && ino == (uint64_t)root_st->st_ino &&
            gen == generation) {
            root = get_node(&r, 0);
            if (root && (r.bad || r.p != r.end || root->type != SN_DIR)) {
                sp_snode_free(root, NULL, NULL);
                root = NULL;
            }
            if (root)
                *seq_out = seq;
        }
    }
    munmap(data, len);
    return root;
}

void sp_cache_drop_older(int store_dirfd)
{
    uint64_t s0 = slot_seq(store_dirfd, 0), s1 = slot_seq(store_dirfd, 1);
    unlinkat(store_dirfd, slot_names[s0 <= s1 ? 0 : 1], 0);
}

snode *sp_cache_load(int store_dirfd, const struct stat *root_st, uint64_t generation)
{
    /* The newer slot first; the other when it is torn or stale. */
    int first = slot_seq(store_dirfd, 1) > slot_seq(store_dirfd, 0) ? 1 : 0;
    uint64_t seq;
    snode *root = sp_cache_load_slot(store_dirfd, first, root_st, generation, &seq);
    if (!root)
        root = sp_cache_load_slot(store_dirfd, !first, root_st, generation, &seq);
    return root;
}
