/* Fuzz target: snapshot import (sp_snapshot_import) of an archive from an
 * fd: plain tar, gzip (our zlib reader with CRC-32/length checks), or
 * bzip2/xz/zstd through libarchive.
 *
 * One store and its workspace, beside a canary folder, are made once; each
 * input is written to a memfd and imported from it. The store's data
 * budget is 4 MiB, so huge declared sizes are refused fast. Properties:
 *   - no crash, leak or hang; a failure carries a message;
 *   - a success gives a snapshot that exports back (plain tar, to a memfd),
 *     and every exported name is relative without `..`, with as many
 *     files, folders and symlinks as the record counts;
 *   - neither the workspace nor the canary folder beside it changes;
 *   - the store still opens (no_create) after the import;
 *   - input that is not gzip imports the same gzipped by the target (as two
 *     members, split where byte 0 says): both fail, or both succeed with
 *     the same counts. */
#include <stdbool.h>
#include <sys/mman.h>
#include <zlib.h>

#include "fuzz_tree.h"
#include "sandpod/snapshot.h"

#define BUDGET (4u << 20)

static ft_tree tree;
static char *store;
static char ws0[65536];
static sp_snapstore *ss;
static unsigned long inputs;

/* The workspace (one level deep, as ft_build_root makes it) as text. */
static void ws_walk(const char *dir, char *out, size_t cap, size_t *len, int depth)
{
    DIR *d = opendir(dir);
    if (!d)
        abort();
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char p[4096], buf[256] = "";
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        struct stat st;
        memset(&st, 0, sizeof(st));
        (void)lstat(p, &st);
        if (S_ISLNK(st.st_mode)) {
            ssize_t n = readlink(p, buf, sizeof(buf) - 1);
            buf[n > 0 ? n : 0] = '\0';
        }
        *len += (size_t)snprintf(out + *len, *len < cap ? cap - *len : 0, "%s:%o:%lld:%lld:%s;", p,
                                 (unsigned)st.st_mode, (long long)st.st_size,
                                 (long long)st.st_mtim.tv_nsec, buf);
        if (S_ISDIR(st.st_mode) && depth < 8)
            ws_walk(p, out, cap, len, depth + 1);
    }
    closedir(d);
}

static void ws_state(char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    ws_walk(tree.root, out, cap, &len, 0);
}

static void open_store(bool no_create)
{
    sp_snapstore_opts o = SP_SNAPSTORE_OPTS_INIT;
    o.max_data_bytes = BUDGET;
    o.no_create = no_create;
    sp_error *err = NULL;
    if (sp_snapstore_open(&ss, tree.root, store, &o, &err) < 0) {
        fprintf(stderr, "store: %s\n", err->message);
        abort();
    }
}

static void cleanup(void)
{
    sp_snapstore_free(ss);
    ft_rmtree(tree.base);
    free(store);
}

static void setup(void)
{
    ft_init(&tree, "archive");
    size_t n = strlen(tree.base) + 16;
    store = malloc(n);
    snprintf(store, n, "%s/store", tree.base);
    open_store(false);
    ws_state(ws0, sizeof(ws0));
    atexit(cleanup);
}

static int memfd_with(const void *data, size_t size)
{
    int fd = memfd_create("fuzz-archive", MFD_CLOEXEC);
    if (fd < 0)
        abort();
    if (size && write(fd, data, size) != (ssize_t)size)
        abort();
    if (lseek(fd, 0, SEEK_SET) != 0)
        abort();
    return fd;
}

static uint64_t octal(const char *f, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n && f[i] >= '0' && f[i] <= '7'; i++)
        v = v * 8 + (uint64_t)(f[i] - '0');
    return v;
}

/* The value of pax record KEY in rec[0..n), copied to out (cap bytes). */
static bool pax_get(const char *rec, size_t n, const char *key, char *out, size_t cap)
{
    size_t i = 0, kl = strlen(key);
    while (i < n) {
        size_t len = 0, j = i;
        while (j < n && rec[j] >= '0' && rec[j] <= '9')
            len = len * 10 + (size_t)(rec[j++] - '0');
        if (len == 0 || i + len > n || j >= n || rec[j] != ' ')
            return false;
        const char *k = rec + j + 1, *end = rec + i + len - 1; /* the '\n' */
        if ((size_t)(end - k) > kl && !memcmp(k, key, kl) && k[kl] == '=') {
            size_t vl = (size_t)(end - k) - kl - 1;
            FZ_ASSERT(vl < cap, "pax %s too long", key);
            memcpy(out, k + kl + 1, vl);
            out[vl] = '\0';
            return true;
        }
        i += len;
    }
    return false;
}

static void check_name(const char *name)
{
    FZ_ASSERT(name[0] != '/', "exported an absolute name: %s", name);
    const char *p = name;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        FZ_ASSERT(!(l == 2 && p[0] == '.' && p[1] == '.'), "exported a `..` name: %s", name);
        p += l;
        while (*p == '/')
            p++;
    }
}

/* Walk the exported tar in m[0..n): check every name, count the types. */
static void check_export(const char *m, size_t n, const sp_snapshot *snap)
{
    uint64_t files = 0, dirs = 0, links = 0;
    size_t off = 0;
    char pax_path[8192] = "", pax_size[32] = "";
    bool have_path = false, have_size = false;
    while (off + 512 <= n) {
        const char *h = m + off;
        bool zero = true;
        for (int i = 0; i < 512 && zero; i++)
            zero = h[i] == 0;
        if (zero)
            break;
        uint64_t size = have_size ? strtoull(pax_size, NULL, 10) : octal(h + 124, 12);
        char type = h[156];
        off += 512;
        FZ_ASSERT(size <= n - off, "exported entry runs past the end");
        if (type == 'x') {
            have_path = pax_get(m + off, (size_t)size, "path", pax_path, sizeof(pax_path));
            have_size = pax_get(m + off, (size_t)size, "size", pax_size, sizeof(pax_size));
        } else if (type != 'g') {
            char name[8192];
            if (have_path)
                snprintf(name, sizeof(name), "%s", pax_path);
            else if (h[345])
                snprintf(name, sizeof(name), "%.155s/%.100s", h + 345, h);
            else
                snprintf(name, sizeof(name), "%.100s", h);
            check_name(name);
            bool root = !strcmp(name, ".") || !strcmp(name, "./");
            files += type == '0' || type == '\0' || type == 'S';
            dirs += type == '5' && !root;
            links += type == '2';
            have_path = have_size = false;
        }
        off += (size_t)((size + 511) / 512 * 512);
    }
    FZ_ASSERT(files == snap->files && dirs == snap->dirs && links == snap->symlinks,
              "export has %llu files, %llu dirs, %llu symlinks; the record %llu, %llu, %llu",
              (unsigned long long)files, (unsigned long long)dirs, (unsigned long long)links,
              (unsigned long long)snap->files, (unsigned long long)snap->dirs,
              (unsigned long long)snap->symlinks);
}

static void export_back(const sp_snapshot *snap)
{
    int fd = memfd_create("fuzz-archive-out", MFD_CLOEXEC);
    if (fd < 0)
        abort();
    sp_error *err = NULL;
    int r = sp_snapshot_export(ss, snap->id, NULL, fd, SP_SNAPSHOT_TAR, &err);
    FZ_ASSERT(r == 0, "export of an imported snapshot failed: %s", err ? err->message : "");
    struct stat st;
    if (fstat(fd, &st) < 0)
        abort();
    if (st.st_size > 0) {
        char *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED)
            abort();
        check_export(m, (size_t)st.st_size, snap);
        munmap(m, (size_t)st.st_size);
    }
    close(fd);
}

/* gzip of in[0..n) as two members split at `cut` (an empty second member
 * when cut == n); *out_len bytes (free()). */
static unsigned char *gzip2(const uint8_t *in, size_t n, size_t cut, size_t *out_len)
{
    size_t cap = 2 * (n + 64) + 128, len = 0;
    unsigned char *out = malloc(cap);
    if (!out)
        abort();
    const uint8_t *part[2] = {in, in + cut};
    size_t plen[2] = {cut, n - cut};
    for (int i = 0; i < 2; i++) {
        z_stream z;
        memset(&z, 0, sizeof(z));
        if (deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
            abort();
        z.next_in = (Bytef *)(uintptr_t)part[i];
        z.avail_in = (uInt)plen[i];
        z.next_out = out + len;
        z.avail_out = (uInt)(cap - len);
        if (deflate(&z, Z_FINISH) != Z_STREAM_END)
            abort();
        len = cap - z.avail_out;
        deflateEnd(&z);
    }
    *out_len = len;
    return out;
}

/* Import data[0..size); check what every import must hold. Returns the
 * import's result and leaves the record (or NULL) in *out. */
static int import_one(sp_snapshot **out, const void *data, size_t size)
{
    int fd = memfd_with(data, size);
    sp_snapshot *snap = NULL;
    sp_error *err = NULL;
    int r = sp_snapshot_import(&snap, ss, NULL, fd, NULL, &err);
    close(fd);
    if (r == 0) {
        FZ_ASSERT(snap && snap->id, "import succeeded without a record");
        export_back(snap);
        sp_error *derr = NULL;
        FZ_ASSERT(sp_snapshot_delete(ss, snap->id, &derr) == 0, "delete: %s", derr->message);
    } else {
        FZ_ASSERT(!snap && err && err->message && *err->message, "import failed (%d) silently", r);
    }
    sp_error_free(err);
    *out = snap;
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ss)
        setup();
    if (size > 65536)
        return 0;
    sp_snapshot *plain = NULL;
    int r = import_one(&plain, data, size);

    /* Input that is not gzip already is imported again gzipped, as two
     * members split where its first byte says: our zlib reader must hand
     * libarchive the same stream, whatever the chunks. */
    if (!(size >= 2 && data[0] == 0x1f && data[1] == 0x8b)) {
        size_t glen = 0, cut = size ? (size_t)data[0] * size / 255 : 0;
        unsigned char *gz = gzip2(data, size, cut, &glen);
        sp_snapshot *z = NULL;
        int rz = import_one(&z, gz, glen);
        FZ_ASSERT((r == 0) == (rz == 0), "plain import %d, gzipped (cut at %zu) %d", r, cut, rz);
        if (r == 0)
            FZ_ASSERT(plain->files == z->files && plain->dirs == z->dirs &&
                          plain->symlinks == z->symlinks && plain->bytes == z->bytes,
                      "gzipped import differs: %llu/%llu files, %llu/%llu bytes",
                      (unsigned long long)plain->files, (unsigned long long)z->files,
                      (unsigned long long)plain->bytes, (unsigned long long)z->bytes);
        sp_snapshot_free(z);
        free(gz);
    }
    sp_snapshot_free(plain);

    char now[sizeof(ws0)];
    ws_state(now, sizeof(now));
    FZ_ASSERT(strcmp(now, ws0) == 0, "the workspace changed:\n%s\nwas\n%s", now, ws0);
    ft_state(&tree, now, sizeof(now));
    FZ_ASSERT(strcmp(now, tree.state0) == 0, "the canary folder changed: %s", now);

    /* The store still opens; now and then its garbage goes. */
    sp_snapstore_free(ss);
    ss = NULL;
    open_store(true);
    if (++inputs % 512 == 0) {
        sp_error *gerr = NULL;
        FZ_ASSERT(sp_snapstore_gc(NULL, ss, &gerr) == 0, "gc: %s", gerr->message);
    }
    return 0;
}
