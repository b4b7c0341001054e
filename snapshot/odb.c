/* The object store and refs of a snapshot store: git's loose object and
 * loose ref formats, read and written directly, with libgit2 as the reader
 * of last resort for packed objects.
 *
 * Why not libgit2 throughout: git_libgit2_init() loads the TLS CA bundle
 * (about 8 ms here), more than the whole budget of an incremental snapshot
 * in a one-shot process, and its per-object path (freshen, strict checks)
 * costs more than the format needs. The format itself is small: an object
 * is zlib("<type> <size>\0" + data) stored at objects/xx/<38 hex>, named by
 * the SHA-1 of the uncompressed bytes; a ref is a file holding 40 hex
 * digits and a newline. `git fsck` in the tests checks what we write.
 *
 * Crash safety: an object is written to a tmp_obj_* file and renamed into
 * place (git fsck and git prune know these temporaries); a ref is written
 * to <ref>.lock and renamed, after every object it reaches. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <zlib.h>

#include <git2.h>

#include "snap_internal.h"

static const char *const type_names[] = {NULL, "commit", "tree", "blob"};

/* ---------------------------------------------------------------- open -- */

static int write_file_at(int dirfd, const char *name, const char *content, sp_error **err)
{
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        if (errno == EEXIST)
            return 0;
        return sp_err_errno(err, errno, "create", name);
    }
    int r = sp_write_all(fd, content, strlen(content));
    int e = errno;
    close(fd);
    if (r < 0)
        return sp_err_errno(err, e, "write", name);
    return 0;
}

static int mkdir_at(int dirfd, const char *name, sp_error **err)
{
    if (mkdirat(dirfd, name, 0755) < 0 && errno != EEXIST)
        return sp_err_errno(err, errno, "mkdir", name);
    return 0;
}

/* mkdir -p for the store folder itself (it is ours, not the workspace's). */
static int mkdir_parents(const char *path, sp_error **err)
{
    cleanup_free char *p = sp_xstrdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            return sp_err_errno(err, errno, "mkdir", p);
        *s = '/';
    }
    if (mkdir(p, 0755) < 0 && errno != EEXIST)
        return sp_err_errno(err, errno, "mkdir", p);
    return 0;
}

static const char config_text[] = "[core]\n"
                                  "\trepositoryformatversion = 0\n"
                                  "\tfilemode = true\n"
                                  "\tbare = true\n"
                                  "\tlogallrefupdates = false\n"
                                  "[gc]\n"
                                  "\tauto = 0\n"
                                  "\tpruneExpire = never\n";

/* Lay out a bare repository in the (empty) folder dirfd. HEAD, the file
 * git uses to recognize a repository, comes last. */
static int init_repo(int dirfd, sp_error **err)
{
    static const char *const dirs[] = {"objects",    "objects/pack", "objects/info", "refs",
                                       "refs/heads", "refs/tags",    "sandpod"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        int r = mkdir_at(dirfd, dirs[i], err);
        if (r < 0)
            return r;
    }
    int r = write_file_at(dirfd, "config", config_text, err);
    if (r == 0)
        r = write_file_at(dirfd, "description", "sandpod snapshot store\n", err);
    if (r == 0)
        r = write_file_at(dirfd, "HEAD", "ref: refs/heads/main\n", err);
    return r;
}

static bool dir_is_empty(int dirfd)
{
    sp_dirnames nm = SP_DIRNAMES_INIT;
    bool empty = sp_dir_read_at(&nm, dirfd, ".", SP_DIR_UNSORTED, 1) == 0 && nm.n == 0;
    sp_dirnames_dispose(&nm);
    return empty;
}

int sp_odb_open(sp_odb *o, const char *path, bool create, sp_error **err)
{
    memset(o, 0, sizeof(*o));
    o->dirfd = o->objfd = -1;
    int r;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        if (!create)
            return sp_err_reason(
                err, SP_R_NO_STORE,
                sp_err_set(err, SP_ENOTFOUND, ENOENT, "no snapshot store at %s", path));
        if ((r = mkdir_parents(path, err)) < 0)
            return r;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    if (fd < 0)
        return sp_err_errno(err, errno, "open snapshot store", path);
    o->dirfd = fd;
    o->path = sp_xstrdup(path);

    struct stat st;
    /* Two processes making the same new store: the first to take the
     * folder's flock writes it (HEAD last), the other then finds HEAD. */
    bool locked = false;
    if (fstatat(fd, "HEAD", &st, 0) < 0 && create) {
        while (flock(fd, LOCK_EX) < 0 && errno == EINTR)
            ;
        locked = true;
    }
    if (fstatat(fd, "HEAD", &st, 0) < 0) {
        if (!dir_is_empty(fd)) {
            r = sp_err_set(err, SP_EINVAL, 0,
                           "not a snapshot store (a folder that is neither empty nor a git "
                           "repository): %s",
                           path);
            goto fail;
        }
        if (!create) {
            r = sp_err_reason(
                err, SP_R_NO_STORE,
                sp_err_set(err, SP_ENOTFOUND, ENOENT, "no snapshot store at %s", path));
            goto fail;
        }
        if ((r = init_repo(fd, err)) < 0)
            goto fail;
    }
    if (locked)
        flock(fd, LOCK_UN); /* on failure, closing the fd releases it */
    /* Someone else's repository in sha256 form would hold ids we cannot
     * name. */
    int cfd = openat(fd, "config", O_RDONLY | O_CLOEXEC);
    if (cfd >= 0) {
        char buf[8192];
        ssize_t n = read(cfd, buf, sizeof(buf) - 1);
        close(cfd);
        if (n > 0) {
            buf[n] = '\0';
            if (strcasestr(buf, "objectformat") && strcasestr(buf, "sha256")) {
                r = sp_err_set(err, SP_EINVAL, 0, "snapshot store uses sha256 objects: %s", path);
                goto fail;
            }
        }
    }
    if ((r = mkdir_at(fd, "sandpod", err)) < 0 || (r = mkdir_at(fd, "objects", err)) < 0)
        goto fail;
    o->objfd = openat(fd, "objects", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (o->objfd < 0) {
        r = sp_err_errno(err, errno, "open", "objects");
        goto fail;
    }
    return 0;
fail:
    sp_odb_close(o);
    return r;
}

int sp_odb_sync(sp_odb *o, sp_error **err)
{
    int ret = 0;
    if (o->pending.n > 512) {
        /* Many files: one flush of the filesystem beats a sync each. */
        if (syncfs(o->objfd) < 0)
            ret = sp_err_errno(err, errno, "sync", o->path);
    } else {
        uint8_t dirs[32] = {0};
        for (size_t i = 0; i < o->pending.n && ret == 0; i++) {
            const char *p = o->pending.v[i];
            int fd = openat(o->objfd, p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
            if (fd < 0 || fsync(fd) < 0)
                ret = sp_err_errno(err, errno, "sync", p);
            if (fd >= 0)
                close(fd);
            unsigned first = (unsigned)strtoul((char[3]){p[0], p[1], 0}, NULL, 16);
            dirs[first >> 3] |= (uint8_t)(1u << (first & 7));
        }
        for (unsigned d = 0; d < 256 && ret == 0; d++) {
            if (!(dirs[d >> 3] & (1u << (d & 7))))
                continue;
            char name[3];
            snprintf(name, sizeof(name), "%02x", d);
            int fd = openat(o->objfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (fd < 0 || fsync(fd) < 0)
                ret = sp_err_errno(err, errno, "sync", name);
            if (fd >= 0)
                close(fd);
        }
        if (ret == 0 && fsync(o->objfd) < 0)
            ret = sp_err_errno(err, errno, "sync", "objects");
    }
    sp_strv_dispose(&o->pending);
    return ret;
}

void sp_odb_close(sp_odb *o)
{
    if (o->repo)
        git_repository_free(o->repo);
    if (o->lg2_init)
        git_libgit2_shutdown();
    if (o->objfd >= 0)
        close(o->objfd);
    if (o->dirfd >= 0)
        close(o->dirfd);
    sp_buf_dispose(&o->zbuf);
    sp_strv_dispose(&o->pending);
    free(o->path);
    memset(o, 0, sizeof(*o));
    o->dirfd = o->objfd = -1;
}

static int lg2_error(sp_error **err, const char *what)
{
    const git_error *e = git_error_last();
    return sp_err_set(err, SP_ERROR, 0, "%s: %s", what, e && e->message ? e->message : "libgit2");
}

int sp_odb_lg2(sp_odb *o, void **repo, sp_error **err)
{
    if (!o->repo) {
        if (!o->lg2_init) {
            if (git_libgit2_init() < 0)
                return lg2_error(err, "libgit2");
            o->lg2_init = true;
        }
        git_repository *r = NULL;
        if (git_repository_open_bare(&r, o->path) < 0)
            return lg2_error(err, "open snapshot store");
        o->repo = r;
    }
    *repo = o->repo;
    return 0;
}

bool sp_odb_has_packs(sp_odb *o)
{
    sp_dirnames nm = SP_DIRNAMES_INIT;
    bool any = false;
    if (sp_dir_read_at(&nm, o->objfd, "pack", SP_DIR_UNSORTED, 0) == 0) {
        for (size_t i = 0; i < nm.n && !any; i++) {
            const char *name = sp_dirnames_name(&nm, i);
            size_t l = strlen(name);
            any = l > 5 && strcmp(name + l - 5, ".pack") == 0;
        }
    }
    sp_dirnames_dispose(&nm);
    return any;
}

/* --------------------------------------------------------------- write -- */

static void loose_path(const sp_oid *id, char out[42])
{
    char hex[41];
    sp_oid_hex(id, hex);
    out[0] = hex[0];
    out[1] = hex[1];
    out[2] = '/';
    memcpy(out + 3, hex + 2, 39); /* with the NUL */
}

static int ensure_fanout(sp_odb *o, uint8_t first, sp_error **err)
{
    if (o->fanout[first >> 3] & (1u << (first & 7)))
        return 0;
    char name[3];
    snprintf(name, sizeof(name), "%02x", first);
    if (mkdirat(o->objfd, name, 0755) < 0 && errno != EEXIST)
        return sp_err_errno(err, errno, "mkdir", name);
    o->fanout[first >> 3] |= (uint8_t)(1u << (first & 7));
    return 0;
}

static bool loose_exists(sp_odb *o, const sp_oid *id)
{
    char p[42];
    loose_path(id, p);
    struct stat st;
    return fstatat(o->objfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

bool sp_odb_exists(sp_odb *o, const sp_oid *id)
{
    if (loose_exists(o, id))
        return true;
    if (!sp_odb_has_packs(o))
        return false;
    void *repo = NULL;
    if (sp_odb_lg2(o, &repo, NULL) < 0)
        return false;
    git_odb *db = NULL;
    if (git_repository_odb(&db, repo) < 0)
        return false;
    git_oid gid;
    memcpy(gid.id, id->id, 20);
    bool ok = git_odb_exists(db, &gid) != 0;
    git_odb_free(db);
    return ok;
}

/* An error writing into the store names the store, not a temp file no one
 * knows, and the workspace file being stored when there is one
 * (`display`). */
static int write_error(sp_odb *o, int e, const char *display, sp_error **err)
{
    int r = sp_err_errno(err, e, "write to snapshot store", o->path);
    return display ? sp_err_wrap(err, r, "%s", display) : r;
}

/* A temp file for an object, in folder `dir` of objects/ ("" = objects/
 * itself), for the workspace file `display` (or NULL). Returns the fd;
 * *name receives its path relative to objects/. */
static int open_temp(sp_odb *o, const char *dir, const char *display, char name[64], sp_error **err)
{
    for (int tries = 0; tries < 16; tries++) {
        uint64_t rnd = 0;
        if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
            rnd = (uint64_t)sp_now_ms() * 2654435761u ^ (uint64_t)getpid() << 20 ^ (uint64_t)tries;
        snprintf(name, 64, "%s%stmp_obj_%016llx", dir, *dir ? "/" : "", (unsigned long long)rnd);
        int fd = openat(o->objfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST)
            return write_error(o, errno, display, err);
    }
    return sp_err_set(err, SP_ERROR, EEXIST, "create object: no free temp name");
}

/* Move a finished temp file to its object name. An object that appeared
 * meanwhile has the same content by construction. */
static int place_temp(sp_odb *o, const char *tmp, const sp_oid *id, sp_error **err)
{
    char p[42];
    loose_path(id, p);
    if (renameat(o->objfd, tmp, o->objfd, p) < 0) {
        int e = errno;
        unlinkat(o->objfd, tmp, 0);
        return sp_err_errno(err, e, "store object", p);
    }
    o->written++;
    if (o->track_writes)
        sp_strv_push(&o->pending, sp_xstrdup(p));
    return 0;
}

static size_t object_header(char *hdr, size_t size, int type, uint64_t len)
{
    int n = snprintf(hdr, size, "%s %llu", type_names[type], (unsigned long long)len);
    return (size_t)n + 1; /* the NUL is part of the header */
}

int sp_odb_write(sp_odb *o, int type, const void *data, size_t len, sp_oid *out, sp_error **err)
{
    char hdr[32];
    size_t hlen = object_header(hdr, sizeof(hdr), type, len);
    sp_sha1 c;
    sp_sha1_init(&c);
    sp_sha1_update(&c, hdr, hlen);
    sp_sha1_update(&c, data, len);
    sp_sha1_final(&c, out->id);
    if (o->dry || loose_exists(o, out))
        return 0;

    z_stream z;
    memset(&z, 0, sizeof(z));
    if (deflateInit(&z, Z_BEST_SPEED) != Z_OK)
        return sp_err_set(err, SP_ERROR, ENOMEM, "zlib: cannot initialize");
    size_t bound = deflateBound(&z, (uLong)(hlen + len)) + 64;
    o->zbuf.len = 0;
    sp_buf_grow(&o->zbuf, bound);
    z.next_out = (Bytef *)o->zbuf.data;
    z.avail_out = (uInt)bound;
    z.next_in = (Bytef *)hdr;
    z.avail_in = (uInt)hlen;
    int zr = deflate(&z, Z_NO_FLUSH);
    const uint8_t *p = data;
    size_t left = len;
    while (zr == Z_OK && left > 0) {
        uInt chunk = left > (1u << 30) ? (1u << 30) : (uInt)left;
        z.next_in = (Bytef *)p;
        z.avail_in = chunk;
        zr = deflate(&z, Z_NO_FLUSH);
        p += chunk - z.avail_in;
        left -= chunk - z.avail_in;
    }
    if (zr == Z_OK)
        zr = deflate(&z, Z_FINISH);
    size_t zlen = bound - z.avail_out;
    deflateEnd(&z);
    if (zr != Z_STREAM_END)
        return sp_err_set(err, SP_ERROR, 0, "zlib: deflate failed (%d)", zr);

    int r = ensure_fanout(o, out->id[0], err);
    if (r < 0)
        return r;
    char dir[3], tmp[64];
    snprintf(dir, sizeof(dir), "%02x", out->id[0]);
    int fd = open_temp(o, dir, NULL, tmp, err);
    if (fd < 0)
        return fd;
    if (sp_write_all(fd, o->zbuf.data, zlen) < 0) {
        int e = errno;
        close(fd);
        unlinkat(o->objfd, tmp, 0);
        return write_error(o, e, NULL, err);
    }
    close(fd);
    return place_temp(o, tmp, out, err);
}

/* Only the id of a streamed blob (c holds the header already). */
static int hash_stream(uint64_t size, sp_odb_src src, void *ud, const char *display, sp_sha1 *c,
                       sp_oid *out, sp_error **err)
{
    const size_t chunk = 1 << 20;
    uint8_t *in = sp_xmalloc(chunk);
    uint64_t total = 0;
    int ret = 0;
    for (;;) {
        ssize_t n = src(ud, in, chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            ret = sp_err_errno(err, errno, "read", display);
            break;
        }
        if (n == 0)
            break;
        total += (uint64_t)n;
        if (total > size)
            break;
        sp_sha1_update(c, in, (size_t)n);
    }
    free(in);
    if (ret == 0 && total != size)
        ret = sp_err_set(err, SP_EINVAL, EAGAIN, "file changed while being read: %s", display);
    if (ret == 0)
        sp_sha1_final(c, out->id);
    return ret;
}

int sp_odb_write_stream(sp_odb *o, uint64_t size, sp_odb_src src, void *ud, const char *display,
                        sp_oid *out, sp_error **err)
{
    char hdr[32];
    size_t hlen = object_header(hdr, sizeof(hdr), SP_OBJ_BLOB, size);
    sp_sha1 c;
    sp_sha1_init(&c);
    sp_sha1_update(&c, hdr, hlen);

    if (o->dry)
        return hash_stream(size, src, ud, display, &c, out, err);
    char tmp[64];
    int tfd = open_temp(o, "", display, tmp, err);
    if (tfd < 0)
        return tfd;
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (deflateInit(&z, Z_BEST_SPEED) != Z_OK) {
        close(tfd);
        unlinkat(o->objfd, tmp, 0);
        return sp_err_set(err, SP_ERROR, ENOMEM, "zlib: cannot initialize");
    }
    const size_t chunk = 1 << 20;
    uint8_t *in = sp_xmalloc(chunk), *zout = sp_xmalloc(chunk);
    int ret = 0;
    uint64_t total = 0;
    bool eof = false;
    z.next_in = (Bytef *)hdr;
    z.avail_in = (uInt)hlen;
    for (;;) {
        if (z.avail_in == 0 && !eof) {
            ssize_t n = src(ud, in, chunk);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                ret = sp_err_errno(err, errno, "read", display);
                goto done;
            }
            if (n == 0) {
                eof = true;
            } else {
                total += (uint64_t)n;
                if (total > size)
                    break;
                sp_sha1_update(&c, in, (size_t)n);
                z.next_in = in;
                z.avail_in = (uInt)n;
            }
        }
        z.next_out = zout;
        z.avail_out = (uInt)chunk;
        int zr = deflate(&z, eof && z.avail_in == 0 ? Z_FINISH : Z_NO_FLUSH);
        if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
            ret = sp_err_set(err, SP_ERROR, 0, "zlib: deflate failed (%d)", zr);
            goto done;
        }
        size_t have = chunk - z.avail_out;
        if (have && sp_write_all(tfd, zout, have) < 0) {
            ret = write_error(o, errno, display, err);
            goto done;
        }
        if (zr == Z_STREAM_END)
            break;
    }
    if (total != size) {
        ret = sp_err_set(err, SP_EINVAL, EAGAIN, "file changed while being read: %s", display);
        goto done;
    }
    sp_sha1_final(&c, out->id);
done:
    deflateEnd(&z);
    free(in);
    free(zout);
    close(tfd);
    if (ret < 0) {
        unlinkat(o->objfd, tmp, 0);
        return ret;
    }
    if (loose_exists(o, out)) {
        unlinkat(o->objfd, tmp, 0);
        return 0;
    }
    if ((ret = ensure_fanout(o, out->id[0], err)) < 0) {
        unlinkat(o->objfd, tmp, 0);
        return ret;
    }
    return place_temp(o, tmp, out, err);
}

static ssize_t fd_src(void *ud, void *buf, size_t n)
{
    return read(*(int *)ud, buf, n);
}

int sp_odb_write_fd(sp_odb *o, int fd, uint64_t size, const char *display, sp_oid *out,
                    sp_error **err)
{
    return sp_odb_write_stream(o, size, fd_src, &fd, display, out, err);
}

/* ---------------------------------------------------------------- read -- */

/* A reader over one object: inflating a loose file as it goes, or a copy
 * of a packed object that libgit2 read. */
typedef struct reader {
    int fd;
    z_stream z;
    bool zinit, zend;
    uint8_t in[65536];
    uint8_t *mem; /* packed: the whole object */
    size_t mem_len, mem_off;
    int type;
    uint64_t size, left;
    uint8_t pend[64]; /* bytes inflated past the header */
    size_t pend_len, pend_off;
} reader;

static void reader_close(reader *r)
{
    if (r->zinit)
        inflateEnd(&r->z);
    if (r->fd >= 0)
        close(r->fd);
    free(r->mem);
}

static ssize_t inflate_some(reader *r, void *buf, size_t n, sp_error **err)
{
    r->z.next_out = buf;
    r->z.avail_out = (uInt)n;
    while (r->z.avail_out == n && !r->zend) {
        if (r->z.avail_in == 0) {
            ssize_t got = read(r->fd, r->in, sizeof(r->in));
            if (got < 0 && errno == EINTR)
                continue;
            if (got < 0)
                return sp_err_errno(err, errno, "read", "object");
            if (got == 0)
                return sp_err_set(err, SP_ERROR, 0, "object is truncated");
            r->z.next_in = r->in;
            r->z.avail_in = (uInt)got;
        }
        int zr = inflate(&r->z, Z_NO_FLUSH);
        if (zr == Z_STREAM_END)
            r->zend = true;
        else if (zr != Z_OK)
            return sp_err_set(err, SP_ERROR, 0, "object is corrupt (zlib %d)", zr);
    }
    return (ssize_t)(n - r->z.avail_out);
}

static int reader_open(sp_odb *o, const sp_oid *id, reader *r, sp_error **err)
{
    memset(r, 0, sizeof(*r));
    r->fd = -1;
    char p[42];
    loose_path(id, p);
    r->fd = openat(o->objfd, p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (r->fd < 0) {
        char hex[41];
        sp_oid_hex(id, hex);
        if (errno != ENOENT)
            return sp_err_errno(err, errno, "read object", hex);
        void *repo = NULL;
        if (!sp_odb_has_packs(o))
            return sp_err_set(err, SP_ENOTFOUND, ENOENT, "object missing from the store: %s", hex);
        int ret = sp_odb_lg2(o, &repo, err);
        if (ret < 0)
            return ret;
        git_odb *db = NULL;
        git_odb_object *obj = NULL;
        git_oid gid;
        memcpy(gid.id, id->id, 20);
        if (git_repository_odb(&db, repo) < 0)
            return lg2_error(err, "object database");
        if (git_odb_read(&obj, db, &gid) < 0) {
            git_odb_free(db);
            return sp_err_set(err, SP_ENOTFOUND, ENOENT, "object missing from the store: %s", hex);
        }
        r->type = (int)git_odb_object_type(obj);
        r->mem_len = git_odb_object_size(obj);
        r->mem = sp_xmalloc(r->mem_len + 1);
        memcpy(r->mem, git_odb_object_data(obj), r->mem_len);
        r->size = r->left = r->mem_len;
        git_odb_object_free(obj);
        git_odb_free(db);
        return 0;
    }
    if (inflateInit(&r->z) != Z_OK)
        return sp_err_set(err, SP_ERROR, ENOMEM, "zlib: cannot initialize");
    r->zinit = true;
    /* The header: "<type> <size>\0" within the first bytes. */
    ssize_t n = inflate_some(r, r->pend, sizeof(r->pend), err);
    if (n < 0)
        return (int)n;
    uint8_t *nul = memchr(r->pend, '\0', (size_t)n);
    if (!nul)
        return sp_err_set(err, SP_ERROR, 0, "object header is corrupt: %s", p);
    *nul = '\0';
    char *sp = strchr((char *)r->pend, ' ');
    if (!sp)
        return sp_err_set(err, SP_ERROR, 0, "object header is corrupt: %s", p);
    *sp = '\0';
    r->type = 0;
    for (int t = 1; t <= 3; t++)
        if (strcmp((char *)r->pend, type_names[t]) == 0)
            r->type = t;
    char *end = NULL;
    r->size = strtoull(sp + 1, &end, 10);
    if (!r->type || !end || *end)
        return sp_err_set(err, SP_ERROR, 0, "object header is corrupt: %s", p);
    r->pend_off = (size_t)(nul + 1 - r->pend);
    r->pend_len = (size_t)n;
    r->left = r->size;
    return 0;
}

static ssize_t reader_read(reader *r, void *buf, size_t n, sp_error **err)
{
    if (n > r->left)
        n = (size_t)r->left;
    if (n == 0)
        return 0;
    if (r->mem) {
        memcpy(buf, r->mem + r->mem_off, n);
        r->mem_off += n;
        r->left -= n;
        return (ssize_t)n;
    }
    if (r->pend_off < r->pend_len) {
        size_t take = r->pend_len - r->pend_off;
        if (take > n)
            take = n;
        memcpy(buf, r->pend + r->pend_off, take);
        r->pend_off += take;
        r->left -= take;
        return (ssize_t)take;
    }
    ssize_t got = inflate_some(r, buf, n, err);
    if (got < 0)
        return got;
    if (got == 0)
        return sp_err_set(err, SP_ERROR, 0, "object is shorter than its header says");
    r->left -= (uint64_t)got;
    return got;
}

int sp_odb_object_size(sp_odb *o, const sp_oid *id, uint64_t *size, sp_error **err)
{
    char p[42];
    loose_path(id, p);
    struct stat st;
    if (fstatat(o->objfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0 || !sp_odb_has_packs(o)) {
        /* Loose (or missing, which reader_open says): only the header is
         * inflated. */
        reader r;
        int ret = reader_open(o, id, &r, err);
        if (ret == 0)
            *size = r.size;
        reader_close(&r);
        return ret;
    }
    void *repo = NULL;
    int ret = sp_odb_lg2(o, &repo, err);
    if (ret < 0)
        return ret;
    git_odb *db = NULL;
    if (git_repository_odb(&db, repo) < 0)
        return lg2_error(err, "object database");
    git_oid gid;
    memcpy(gid.id, id->id, 20);
    size_t len = 0;
    git_object_t type;
    if (git_odb_read_header(&len, &type, db, &gid) < 0) {
        char hex[41];
        sp_oid_hex(id, hex);
        ret = sp_err_set(err, SP_ENOTFOUND, ENOENT, "object missing from the store: %s", hex);
    } else {
        *size = len;
    }
    git_odb_free(db);
    return ret;
}

int sp_odb_read(sp_odb *o, const sp_oid *id, int *type, sp_buf *out, sp_error **err)
{
    reader r;
    int ret = reader_open(o, id, &r, err);
    if (ret == 0) {
        *type = r.type;
        out->len = 0;
        sp_buf_grow(out, (size_t)r.size);
        while (r.left > 0) {
            ssize_t n = reader_read(&r, out->data + out->len, (size_t)r.left, err);
            if (n < 0) {
                ret = (int)n;
                break;
            }
            out->len += (size_t)n;
        }
        out->data[out->len] = '\0';
    }
    reader_close(&r);
    return ret;
}

int sp_odb_blob_stream(sp_odb *o, const sp_oid *id, sp_odb_sink sink, void *ud, sp_error **err)
{
    reader r;
    int ret = reader_open(o, id, &r, err);
    if (ret == 0 && r.type != SP_OBJ_BLOB)
        ret = sp_err_set(err, SP_ERROR, 0, "object is not a blob");
    if (ret == 0)
        ret = sink(ud, r.size, NULL, 0, err);
    uint8_t *buf = ret == 0 ? sp_xmalloc(1 << 20) : NULL;
    while (ret == 0 && r.left > 0) {
        ssize_t n = reader_read(&r, buf, 1 << 20, err);
        if (n < 0) {
            ret = (int)n;
            break;
        }
        ret = sink(ud, r.size, buf, (size_t)n, err);
    }
    free(buf);
    reader_close(&r);
    return ret;
}

static int fd_sink(void *ud, uint64_t size, const void *p, size_t n, sp_error **err)
{
    if (p && sp_write_all(*(int *)ud, p, n) < 0)
        return sp_err_errno(err, errno, "write", NULL); /* the caller names the file */
    return 0;
}

int sp_odb_blob_to_fd(sp_odb *o, const sp_oid *id, int fd, sp_error **err)
{
    return sp_odb_blob_stream(o, id, fd_sink, &fd, err);
}

/* ---------------------------------------------------------------- refs -- */

static int ensure_ref_dirs(sp_odb *o, const char *name, sp_error **err)
{
    cleanup_free char *p = sp_xstrdup(name);
    for (char *s = p; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        int r = mkdir_at(o->dirfd, p, err);
        *s = '/';
        if (r < 0)
            return r;
    }
    return 0;
}

/* Read packed-refs; a missing file is an empty list. */
static int read_packed(sp_odb *o, sp_buf *out, sp_error **err)
{
    out->len = 0;
    int fd = openat(o->dirfd, "packed-refs", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ENOENT) {
            sp_buf_grow(out, 1);
            out->data[0] = '\0';
            return 0;
        }
        return sp_err_errno(err, errno, "read", "packed-refs");
    }
    sp_buf_grow(out, 4096);
    for (;;) {
        sp_buf_grow(out, 65536);
        ssize_t n = read(fd, out->data + out->len, 65536);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            return sp_err_errno(err, e, "read", "packed-refs");
        }
        if (n == 0)
            break;
        out->len += (size_t)n;
    }
    close(fd);
    out->data[out->len] = '\0';
    return 0;
}

int sp_ref_create(sp_odb *o, const char *name, const sp_oid *id, sp_error **err)
{
    int r = ensure_ref_dirs(o, name, err);
    if (r < 0)
        return r;
    cleanup_free char *lock = sp_xasprintf("%s.lock", name);
    int fd = openat(o->dirfd, lock, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return sp_err_errno(err, errno, "lock ref", name);
    char line[42];
    sp_oid_hex(id, line);
    line[40] = '\n';
    if (sp_write_all(fd, line, 41) < 0 || (o->track_writes && fsync(fd) < 0)) {
        int e = errno;
        close(fd);
        unlinkat(o->dirfd, lock, 0);
        return sp_err_errno(err, e, "write ref", name);
    }
    close(fd);
    if (renameat2(o->dirfd, lock, o->dirfd, name, RENAME_NOREPLACE) < 0) {
        int e = errno;
        if (e == EINVAL || e == ENOSYS) {
            /* A filesystem without RENAME_NOREPLACE: link() refuses to
             * replace too. */
            if (linkat(o->dirfd, lock, o->dirfd, name, 0) == 0) {
                unlinkat(o->dirfd, lock, 0);
                return 0;
            }
            e = errno;
        }
        unlinkat(o->dirfd, lock, 0);
        if (e == EEXIST)
            return sp_err_set(err, SP_EEXISTS, EEXIST, "ref exists: %s", name);
        return sp_err_errno(err, e, "write ref", name);
    }
    return 0;
}

int sp_ref_read_loose(sp_odb *o, const char *name, sp_oid *out, sp_error **err)
{
    int fd = openat(o->dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return sp_err_set(err, SP_ENOTFOUND, ENOENT, "no such ref: %s", name);
        return sp_err_errno(err, errno, "read ref", name);
    }
    char buf[64];
    ssize_t n = read(fd, buf, sizeof(buf));
    close(fd);
    if (n < 40 || sp_oid_parse(out, buf, 40) < 0)
        return sp_err_set(err, SP_ENOTFOUND, 0, "not a ref: %s", name);
    return 0;
}

static int cmp_refent(const void *a, const void *b)
{
    return strcmp(((const sp_refent *)a)->name, ((const sp_refent *)b)->name);
}

void sp_refents_free(sp_refent *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
}

int sp_ref_list(sp_odb *o, const char *prefix, sp_refent **out, size_t *n_out, sp_error **err)
{
    *out = NULL;
    *n_out = 0;
    sp_refent *v = NULL;
    size_t n = 0, cap = 0;
    size_t plen = strlen(prefix);

    /* Loose refs directly in the prefix folder (ours never nest). */
    int dfd = openat(o->dirfd, prefix, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (dfd >= 0) {
        sp_dirnames names = SP_DIRNAMES_INIT;
        if (sp_dir_read(&names, dfd, SP_DIR_UNSORTED, 0) < 0) {
            int e = errno;
            close(dfd);
            sp_dirnames_dispose(&names);
            return sp_err_errno(err, e, "list", prefix);
        }
        for (size_t i = 0; i < names.n; i++) {
            const char *nm = sp_dirnames_name(&names, i);
            size_t l = strlen(nm);
            if (nm[0] == '.' || (l > 5 && strcmp(nm + l - 5, ".lock") == 0))
                continue;
            char buf[128];
            int fd = openat(dfd, nm, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
            if (fd < 0)
                continue;
            ssize_t got = read(fd, buf, sizeof(buf) - 1);
            close(fd);
            sp_oid id;
            if (got < 40 || sp_oid_parse(&id, buf, 40) < 0)
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                v = sp_xrealloc(v, cap * sizeof(*v));
            }
            v[n].name = sp_xasprintf("%s%s", prefix, nm);
            v[n].id = id;
            n++;
        }
        sp_dirnames_dispose(&names);
        close(dfd);
    } else if (errno != ENOENT) {
        return sp_err_errno(err, errno, "list", prefix);
    }
    if (n > 1)
        qsort(v, n, sizeof(*v), cmp_refent);

    /* packed-refs: "<hex> <name>" lines; a loose ref wins over a packed. */
    sp_buf pk = SP_BUF_INIT;
    int r = read_packed(o, &pk, err);
    if (r < 0) {
        sp_refents_free(v, n);
        return r;
    }
    size_t loose_n = n;
    for (char *line = pk.data; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        sp_oid id;
        if (strlen(line) > 41 && line[40] == ' ' && sp_oid_parse(&id, line, 40) == 0 &&
            strncmp(line + 41, prefix, plen) == 0 && !strchr(line + 41 + plen, '/')) {
            sp_refent key = {line + 41, id};
            if (!loose_n || !bsearch(&key, v, loose_n, sizeof(*v), cmp_refent)) {
                if (n == cap) {
                    cap = cap ? cap * 2 : 64;
                    v = sp_xrealloc(v, cap * sizeof(*v));
                }
                v[n].name = sp_xstrdup(line + 41);
                v[n].id = id;
                n++;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    sp_buf_dispose(&pk);
    if (n > 1)
        qsort(v, n, sizeof(*v), cmp_refent);
    *out = v;
    *n_out = n;
    return 0;
}

int sp_ref_delete(sp_odb *o, const char *name, sp_error **err)
{
    bool found = false;
    if (unlinkat(o->dirfd, name, 0) == 0)
        found = true;
    else if (errno != ENOENT)
        return sp_err_errno(err, errno, "delete ref", name);

    sp_buf pk = SP_BUF_INIT;
    int r = read_packed(o, &pk, err);
    if (r < 0)
        return r;
    /* Rewrite packed-refs without the ref (and its peeled line). */
    sp_buf outb = SP_BUF_INIT;
    bool in_packed = false, skip_peel = false;
    size_t nlen = strlen(name);
    for (char *line = pk.data; line && *line;) {
        char *nl = strchr(line, '\n');
        size_t llen = nl ? (size_t)(nl - line) : strlen(line);
        bool drop = false;
        if (line[0] == '^') {
            drop = skip_peel;
        } else {
            skip_peel = false;
            if (llen == 41 + nlen && line[40] == ' ' && memcmp(line + 41, name, nlen) == 0) {
                drop = skip_peel = in_packed = true;
            }
        }
        if (!drop) {
            sp_buf_add(&outb, line, llen);
            sp_buf_addc(&outb, '\n');
        }
        line = nl ? nl + 1 : NULL;
    }
    sp_buf_dispose(&pk);
    if (in_packed) {
        int fd = openat(o->dirfd, "packed-refs.lock",
                        O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0) {
            sp_buf_dispose(&outb);
            return sp_err_errno(err, errno, "lock", "packed-refs");
        }
        int w = sp_write_all(fd, outb.data ? outb.data : "", outb.len);
        int e = errno;
        close(fd);
        if (w < 0 || renameat(o->dirfd, "packed-refs.lock", o->dirfd, "packed-refs") < 0) {
            if (w == 0)
                e = errno;
            unlinkat(o->dirfd, "packed-refs.lock", 0);
            sp_buf_dispose(&outb);
            return sp_err_errno(err, e, "write", "packed-refs");
        }
        found = true;
    }
    sp_buf_dispose(&outb);
    if (!found)
        return sp_err_set(err, SP_ENOTFOUND, ENOENT, "no such ref: %s", name);
    return 0;
}
