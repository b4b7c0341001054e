/* The snapshot store: opening, locking, records, and the operations that
 * tie the walker, the trees and restore together.
 *
 * Every operation that writes the store or reads the workspace holds an
 * exclusive flock on sandpod/lock. A snapshot walks the workspace (reading
 * changed files into the store as it goes), computes the changed trees,
 * then writes a commit holding the record and, last, the ref naming it:
 * killed before the ref, a snapshot leaves only unreferenced objects. The
 * stat cache is written after that, atomically, and only ever names
 * objects that are in the store: gc keeps everything the cache names, and
 * bumps a generation number so that processes holding an older in-memory
 * tree drop it. */
#include <dirent.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <time.h>

#include <cJSON.h>
#include <git2.h>

#include "snap_internal.h"

#define SNAP_REF_PREFIX "refs/sandpod/snapshots/"
#define GEN_NAME        "sandpod/generation"

/* ---------------------------------------------------------------- util -- */

static char *abs_path(const char *p)
{
    sp_buf b = SP_BUF_INIT;
    if (p[0] != '/') {
        char cwd[PATH_MAX];
        if (getcwd(cwd, sizeof(cwd)))
            sp_buf_adds(&b, cwd);
    }
    /* Lexically clean: drop "." and empty components (".." is kept as is:
     * this names a folder for records, it does not resolve anything). */
    const char *s = p;
    while (*s) {
        while (*s == '/')
            s++;
        const char *e = strchr(s, '/');
        size_t l = e ? (size_t)(e - s) : strlen(s);
        if (l && !(l == 1 && s[0] == '.')) {
            sp_buf_addc(&b, '/');
            sp_buf_add(&b, s, l);
        }
        s += l;
    }
    if (!b.len)
        sp_buf_addc(&b, '/');
    return sp_buf_steal(&b);
}

static uint64_t read_generation(sp_snapstore *s)
{
    char buf[32] = {0};
    int fd = openat(s->odb.dirfd, GEN_NAME, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    return n > 0 ? strtoull(buf, NULL, 10) : 0;
}

static int write_generation(sp_snapstore *s, uint64_t gen, sp_error **err)
{
    char buf[32], tmp[64];
    int l = snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)gen);
    snprintf(tmp, sizeof(tmp), GEN_NAME ".tmp.%ld", (long)getpid());
    int fd = openat(s->odb.dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return sp_err_errno(err, errno, "write", GEN_NAME);
    int r = sp_write_all(fd, buf, (size_t)l);
    close(fd);
    if (r < 0 || renameat(s->odb.dirfd, tmp, s->odb.dirfd, GEN_NAME) < 0) {
        int e = errno;
        unlinkat(s->odb.dirfd, tmp, 0);
        return sp_err_errno(err, e, "write", GEN_NAME);
    }
    return 0;
}

int sp_snap_lock(sp_snapstore *s, sp_error **err)
{
    if (s->lockfd < 0)
        return 0; /* a read-only store without a lock file: no writer */
    while (flock(s->lockfd, LOCK_EX) < 0) {
        if (errno != EINTR)
            return sp_err_errno(err, errno, "lock", s->store);
    }
    return 0;
}

void sp_snap_unlock(sp_snapstore *s)
{
    if (s->lockfd >= 0)
        flock(s->lockfd, LOCK_UN);
}

int sp_snap_lock_write(sp_snapstore *s, sp_error **err)
{
    if (s->read_only)
        return sp_err_set(err, SP_EREADONLY, EROFS,
                          "snapshot store %s is read-only: snapshots can be listed, compared, "
                          "exported and restored, not added or removed",
                          s->store);
    return sp_snap_lock(s, err);
}

/* Is the folder open on fd inside (or equal to) the folder whose stat is
 * root? Walks up with ".." to the filesystem root. */
static bool inside(int fd, const struct stat *root)
{
    int cur = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    bool in = false;
    for (int depth = 0; cur >= 0 && depth < 4096; depth++) {
        struct stat st;
        if (fstat(cur, &st) < 0)
            break;
        if (st.st_dev == root->st_dev && st.st_ino == root->st_ino) {
            in = true;
            break;
        }
        int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        struct stat ust;
        if (up < 0 || fstat(up, &ust) < 0 || (ust.st_dev == st.st_dev && ust.st_ino == st.st_ino)) {
            if (up >= 0)
                close(up);
            break;
        }
        close(cur);
        cur = up;
    }
    if (cur >= 0)
        close(cur);
    return in;
}

/* The store must not be visible to the container: refuse one in the
 * workspace (its nearest existing ancestor decides for a new one). */
static int check_store_outside(const char *store, const struct stat *root_st, sp_error **err)
{
    cleanup_free char *p = sp_xstrdup(store);
    for (;;) {
        int fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
            bool in = inside(fd, root_st);
            close(fd);
            if (in)
                return sp_err_set(err, SP_EINVAL, 0,
                                  "snapshot store must be outside the workspace: %s", store);
            return 0;
        }
        char *slash = strrchr(p, '/');
        if (!slash || slash == p)
            return 0;
        *slash = '\0';
    }
}

/* ---------------------------------------------------------------- open -- */

static void drop_tree(sp_snapstore *s)
{
    sp_snode_free(s->tree, s->track ? sp_track_unwatch : NULL, s->track);
    s->tree = NULL;
    s->cache_dirty = false;
    if (s->track)
        sp_track_reset(s->track);
}

static void begin_op(sp_snapstore *s, sp_scan *sc)
{
    memset(&s->stats, 0, sizeof(s->stats));
    s->stats.elapsed_ms = sp_now_ms();
    s->odb.written = 0;
    sp_scan_init(sc, &s->odb, &s->stats);
    sc->budget = s->opts.max_data_bytes ? s->opts.max_data_bytes : SNAP_DEFAULT_BUDGET;
    sc->progress = s->opts.progress;
    sc->progress_ud = s->opts.progress_userdata;
}

static void end_op(sp_snapstore *s, sp_scan *sc)
{
    s->stats.objects_written = s->odb.written;
    s->stats.elapsed_ms = sp_now_ms() - s->stats.elapsed_ms;
    sp_scan_dispose(sc);
}

/* Bring s->tree up to date with the workspace and compute its tree ids:
 * from tracked events when tracking can vouch for them, else with a full
 * stat walk. Objects for everything new are in the store afterwards. */
static int refresh(sp_snapstore *s, sp_scan *sc, sp_error **err)
{
    uint64_t gen = read_generation(s);
    if (gen != s->generation) {
        drop_tree(s);
        s->generation = gen;
    }
    if (!s->tree) {
        s->tree = sp_cache_load(s->odb.dirfd, &s->root_st, gen);
        if (!s->tree) {
            s->tree = sp_snode_new("", 0, SN_DIR);
            s->tree->mode = 0755;
            s->tree->flags |= SN_DIRTY;
        }
        if (s->track)
            sp_track_reset(s->track);
    }
    uint64_t hashed = s->stats.files_hashed;
    int r = 1;
    if (s->track && sp_track_ok(s->track)) {
        sc->track = s->track;
        r = sp_track_apply(s->track, sc, s->rootfd, s->tree, err);
    }
    if (r == 1) {
        s->stats.full_walk = true;
        if (s->track) {
            sp_track_begin_full(s->track);
            sc->track = s->track;
            sp_track_watch(s->track, s->rootfd, s->tree);
        }
        struct stat st;
        if (fstat(s->rootfd, &st) < 0) {
            r = sp_err_errno(err, errno, "stat", s->root);
        } else {
            if ((st.st_mode & 07777u) != s->tree->mode) {
                s->tree->mode = st.st_mode & 07777;
                s->tree->flags |= SN_DIRTY;
            }
            s->tree->ino = (uint64_t)st.st_ino;
            s->tree->dev = (uint64_t)st.st_dev;
            lseek(s->rootfd, 0, SEEK_SET);
            r = sp_scan_dir(sc, s->rootfd, s->tree, err);
        }
    }
    if (r < 0) {
        if (s->track)
            sp_track_reset(s->track);
        return r;
    }
    if ((s->tree->flags & SN_DIRTY) || s->stats.files_hashed != hashed)
        s->cache_dirty = true;
    return sp_tree_finalize(&s->odb, s->tree, err);
}

static int save_cache(sp_snapstore *s, sp_error **err)
{
    if (!s->tree || !s->cache_dirty || s->read_only)
        return 0;
    int r = sp_cache_save(s->odb.dirfd, s->tree, &s->root_st, s->generation, err);
    if (r == 0)
        s->cache_dirty = false;
    return r;
}

/* After an operation that is done (a snapshot whose ref is written, a
 * finished restore), the stat cache only saves the next one work: failing
 * to write it (a full disk) must not turn that success into an error. A
 * slot torn that way fails its checksum and the other one is used. */
static void save_cache_after(sp_snapstore *s)
{
    if (!s->track)
        (void)save_cache(s, NULL);
}

static int do_pause(sp_snapstore *s, sp_error **err)
{
    if (!s->opts.pause)
        return 0;
    int r = s->opts.pause(s->opts.userdata, err);
    if (r < 0)
        return err && *err ? sp_err_wrap(err, r, "pause") : r;
    return 0;
}

/* Unpause, keeping the first error: ret is the operation's result. */
static int do_unpause(sp_snapstore *s, int ret, sp_error **err)
{
    if (!s->opts.unpause)
        return ret;
    sp_error *e = NULL;
    int r = s->opts.unpause(s->opts.userdata, &e);
    if (r < 0 && ret == 0) {
        if (err) {
            *err = e;
            e = NULL;
            sp_err_wrap(err, r, "unpause");
        }
        ret = r;
    }
    sp_error_free(e);
    return ret;
}

int sp_snapstore_open(sp_snapstore **out, const char *workspace, const char *store_dir,
                      const sp_snapstore_opts *opts, sp_error **err)
{
    *out = NULL;
    if (!workspace || !*workspace)
        return sp_err_set(err, SP_EINVAL, 0, "workspace folder is missing");
    if (!store_dir || !*store_dir)
        return sp_err_set(err, SP_EINVAL, 0, "snapshot store folder is missing");
    sp_snapstore_opts o = SP_SNAPSTORE_OPTS_INIT;
    if (opts && opts->version == 1) {
        /* A caller built against the first layout: its struct ends there. */
        memcpy(&o, opts, offsetof(sp_snapstore_opts, keep_setid));
        o.version = SP_SNAPSTORE_OPTS_VERSION;
    } else if (opts && opts->version == SP_SNAPSTORE_OPTS_VERSION) {
        o = *opts;
    } else if (opts) {
        return sp_err_set(err, SP_EINVAL, 0, "unknown sp_snapstore_opts version %u", opts->version);
    }
    sp_snapstore *s = sp_xcalloc(1, sizeof(*s));
    s->rootfd = s->lockfd = -1;
    s->odb.dirfd = s->odb.objfd = -1;
    s->opts = o;
    s->root = abs_path(workspace);
    s->store = abs_path(store_dir);
    int r = sp_fs_open(&s->fs, s->root, NULL, err);
    if (r < 0)
        goto fail;
    s->rootfd = openat(sp_fs_root_fd(s->fs), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->rootfd < 0 || fstat(s->rootfd, &s->root_st) < 0) {
        r = sp_err_errno(err, errno, "open workspace", s->root);
        goto fail;
    }
    if ((r = check_store_outside(s->store, &s->root_st, err)) < 0)
        goto fail;
    if ((r = sp_odb_open(&s->odb, s->store, !o.no_create, err)) < 0)
        goto fail;
    s->odb.track_writes = o.durable;
    {
        int sfd = fcntl(s->odb.dirfd, F_DUPFD_CLOEXEC, 3);
        bool in = sfd >= 0 && inside(sfd, &s->root_st);
        if (sfd >= 0)
            close(sfd);
        if (in) {
            r = sp_err_set(err, SP_EINVAL, 0, "snapshot store must be outside the workspace: %s",
                           s->store);
            goto fail;
        }
    }
    s->lockfd =
        openat(s->odb.dirfd, "sandpod/lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (s->lockfd < 0 && errno == EROFS) {
        /* A store on read-only media (a mounted backup, say) still serves
         * reads; its lock, if any, is taken shared by no one else. */
        s->read_only = true;
        s->lockfd = openat(s->odb.dirfd, "sandpod/lock", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (s->lockfd < 0 && errno == ENOENT)
            errno = 0;
        s->odb.dry = true; /* hash the workspace, store nothing */
    }
    if (s->lockfd < 0 && errno != 0) {
        r = sp_err_errno(err, errno, "lock snapshot store", s->store);
        goto fail;
    }
    s->generation = read_generation(s);
    /* Tracking only saves work: without inotify (out of instances, say)
     * every operation walks the tree, as a one-shot process does. */
    if (o.track_changes && sp_track_new(&s->track, NULL) == 0) {
        sp_scan sc;
        if ((r = sp_snap_lock(s, err)) < 0)
            goto fail;
        begin_op(s, &sc);
        r = refresh(s, &sc, err);
        if (r == 0)
            r = save_cache(s, err);
        end_op(s, &sc);
        sp_snap_unlock(s);
        if (r < 0)
            goto fail;
    }
    *out = s;
    return 0;
fail:
    sp_snapstore_free(s);
    return r;
}

void sp_snapstore_free(sp_snapstore *s)
{
    if (!s)
        return;
    if (s->track && s->tree && s->cache_dirty && s->lockfd >= 0 && sp_snap_lock(s, NULL) == 0) {
        if (read_generation(s) == s->generation)
            (void)save_cache(s, NULL);
        sp_snap_unlock(s);
    }
    sp_snode_free(s->tree, NULL, NULL);
    sp_track_free(s->track);
    if (s->lockfd >= 0)
        close(s->lockfd);
    if (s->rootfd >= 0)
        close(s->rootfd);
    sp_odb_close(&s->odb);
    sp_fs_free(s->fs);
    free(s->root);
    free(s->store);
    free(s);
}

const char *sp_snapstore_path(const sp_snapstore *s)
{
    return s->store;
}

const char *sp_snapstore_workspace(const sp_snapstore *s)
{
    return s->root;
}

int sp_snapstore_fd(const sp_snapstore *s)
{
    return s->track ? sp_track_fd(s->track) : -1;
}

int sp_snapstore_poll(sp_snapstore *s, sp_error **err)
{
    return s->track ? sp_track_drain(s->track, err) : 0;
}

void sp_snapstore_invalidate(sp_snapstore *s)
{
    if (s->track)
        sp_track_reset(s->track);
}

void sp_snapstore_last_stats(const sp_snapstore *s, sp_snapstore_stats *out)
{
    *out = s->stats;
}

/* ------------------------------------------------------------- records -- */

void sp_snapshot_free(sp_snapshot *snap)
{
    if (!snap)
        return;
    free(snap->id);
    free(snap->tag);
    free(snap->commit);
    free(snap->root);
    free(snap->store);
    free(snap->created_at);
    free(snap);
}

void sp_snapshots_free(sp_snapshots *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        sp_snapshot_free(l->v[i]);
    free(l->v);
    free(l);
}

int sp_snap_check_tag(const char *tag, sp_error **err)
{
    size_t len = strlen(tag);
    if (len == 0 || len > 200)
        return sp_err_set(err, SP_EINVAL, 0, "a tag is 1 to 200 bytes long");
    if (!sp_utf8_valid(tag, len))
        return sp_err_set(err, SP_EINVAL, 0, "a tag must be valid UTF-8");
    for (const unsigned char *p = (const unsigned char *)tag; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return sp_err_set(err, SP_EINVAL, 0, "a tag must not hold control characters");
    return 0;
}

static char *new_uuid(void)
{
    uint8_t b[16];
    if (getrandom(b, sizeof(b), 0) != sizeof(b)) {
        uint64_t x = (uint64_t)sp_now_ms() ^ ((uint64_t)getpid() << 32);
        for (int i = 0; i < 16; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            b[i] = (uint8_t)(x >> 56);
        }
    }
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    return sp_xasprintf("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                        b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                        b[12], b[13], b[14], b[15]);
}

static bool is_uuid(const char *s)
{
    if (strlen(s) != 36)
        return false;
    for (int i = 0; i < 36; i++) {
        char c = s[i];
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return true;
}

static char *format_time(int64_t ns)
{
    time_t secs = (time_t)(ns / 1000000000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char buf[64];
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    return sp_xasprintf("%s.%09lldZ", buf, (long long)(ns % 1000000000));
}

static bool parse_time(const char *s, int64_t *ns)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!p)
        return false;
    int64_t frac = 0;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (digits < 9)
                frac = frac * 10 + (*p - '0');
        for (; digits < 9; digits++)
            frac *= 10;
    }
    if (*p != 'Z')
        return false;
    *ns = (int64_t)timegm(&tm) * 1000000000 + frac;
    return true;
}

struct counts {
    uint64_t files, dirs, links, bytes;
};

static void count_tree(const snode *n, struct counts *c)
{
    for (uint32_t i = 0; i < n->nkids; i++) {
        const snode *k = n->kids[i];
        if (k->type == SN_FILE) {
            c->files++;
            c->bytes += k->size;
        } else if (k->type == SN_LINK) {
            c->links++;
        } else if (k->type == SN_DIR) {
            c->dirs++;
            count_tree(k, c);
        }
    }
}

/* Parse a snapshot commit into a record. */
static sp_snapshot *parse_commit(const char *id, const sp_oid *commit, const sp_buf *body)
{
    const char *msg = strstr(body->data, "\n\n");
    const char *json = msg ? strstr(msg + 2, "\n\n") : NULL;
    if (!json)
        return NULL;
    cJSON *j = cJSON_Parse(json + 2);
    if (!j)
        return NULL;
    sp_snapshot *r = NULL;
    const cJSON *jid = cJSON_GetObjectItemCaseSensitive(j, "id");
    const cJSON *jat = cJSON_GetObjectItemCaseSensitive(j, "created_at");
    int64_t ns = 0;
    if (cJSON_IsString(jid) && (!id || strcmp(jid->valuestring, id) == 0) && cJSON_IsString(jat) &&
        parse_time(jat->valuestring, &ns)) {
        r = sp_xcalloc(1, sizeof(*r));
        r->id = sp_xstrdup(jid->valuestring);
        r->created_at = sp_xstrdup(jat->valuestring);
        r->created_at_ns = ns;
        char hex[41];
        sp_oid_hex(commit, hex);
        r->commit = sp_xstrdup(hex);
        const cJSON *x;
        if (cJSON_IsString(x = cJSON_GetObjectItemCaseSensitive(j, "tag")))
            r->tag = sp_xstrdup(x->valuestring);
        if (cJSON_IsString(x = cJSON_GetObjectItemCaseSensitive(j, "root")))
            r->root = sp_xstrdup(x->valuestring);
        if (cJSON_IsString(x = cJSON_GetObjectItemCaseSensitive(j, "store")))
            r->store = sp_xstrdup(x->valuestring);
        if (cJSON_IsNumber(x = cJSON_GetObjectItemCaseSensitive(j, "files")))
            r->files = (uint64_t)x->valuedouble;
        if (cJSON_IsNumber(x = cJSON_GetObjectItemCaseSensitive(j, "dirs")))
            r->dirs = (uint64_t)x->valuedouble;
        if (cJSON_IsNumber(x = cJSON_GetObjectItemCaseSensitive(j, "symlinks")))
            r->symlinks = (uint64_t)x->valuedouble;
        if (cJSON_IsNumber(x = cJSON_GetObjectItemCaseSensitive(j, "bytes")))
            r->bytes = (uint64_t)x->valuedouble;
        if (!r->root)
            r->root = sp_xstrdup("");
        if (!r->store)
            r->store = sp_xstrdup("");
    }
    cJSON_Delete(j);
    return r;
}

static int load_record(sp_snapshot **out, sp_odb *o, const char *id, const sp_oid *commit,
                       sp_error **err)
{
    sp_buf b = SP_BUF_INIT;
    int type = 0;
    int r = sp_odb_read(o, commit, &type, &b, err);
    if (r < 0)
        return r;
    sp_snapshot *snap = type == SP_OBJ_COMMIT ? parse_commit(id, commit, &b) : NULL;
    sp_buf_dispose(&b);
    if (!snap)
        return sp_err_set(err, SP_EINVAL, 0, "snapshot record is damaged: %s", id);
    /* The store path is where it is now, whatever it was called then. */
    *out = snap;
    return 0;
}

int sp_snap_commit_tree(sp_odb *o, const char *commit_hex, sp_oid *tree, sp_error **err)
{
    sp_oid c;
    if (sp_oid_parse(&c, commit_hex, strlen(commit_hex)) < 0)
        return sp_err_set(err, SP_EINVAL, 0, "not a commit id: %s", commit_hex);
    sp_buf b = SP_BUF_INIT;
    int type = 0;
    int r = sp_odb_read(o, &c, &type, &b, err);
    if (r < 0)
        return r;
    if (type != SP_OBJ_COMMIT || b.len < 45 || memcmp(b.data, "tree ", 5) != 0 ||
        sp_oid_parse(tree, b.data + 5, 40) < 0)
        r = sp_err_set(err, SP_EINVAL, 0, "not a snapshot commit: %s", commit_hex);
    sp_buf_dispose(&b);
    return r;
}

int sp_snap_record(sp_snapshot **out, sp_snapstore *s, const sp_oid *tree, const snode *counted,
                   const char *tag, sp_error **err)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    struct counts c = {0};
    if (counted)
        count_tree(counted, &c);
    cleanup_free char *id = new_uuid();
    cleanup_free char *at = format_time(ns);

    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", id);
    cJSON_AddStringToObject(j, "created_at", at);
    if (tag)
        cJSON_AddStringToObject(j, "tag", tag);
    else
        cJSON_AddNullToObject(j, "tag");
    cJSON_AddStringToObject(j, "root", s->root);
    cJSON_AddStringToObject(j, "store", s->store);
    cJSON_AddNumberToObject(j, "files", (double)c.files);
    cJSON_AddNumberToObject(j, "dirs", (double)c.dirs);
    cJSON_AddNumberToObject(j, "symlinks", (double)c.links);
    cJSON_AddNumberToObject(j, "bytes", (double)c.bytes);
    cJSON_AddNumberToObject(j, "format", 1);
    char *json = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!json)
        return sp_err_set(err, SP_ERROR, ENOMEM, "out of memory");

    char thex[41];
    sp_oid_hex(tree, thex);
    sp_buf b = SP_BUF_INIT;
    sp_buf_printf(&b, "tree %s\n", thex);
    sp_buf_printf(&b, "author sandpod <sandpod@localhost> %lld +0000\n", (long long)ts.tv_sec);
    sp_buf_printf(&b, "committer sandpod <sandpod@localhost> %lld +0000\n\n", (long long)ts.tv_sec);
    /* The subject line is for people reading the store with git. */
    sp_buf_adds(&b, "sandpod snapshot ");
    for (const char *p = tag ? tag : id; *p; p++)
        sp_buf_addc(&b, *p == '\n' ? ' ' : *p);
    sp_buf_adds(&b, "\n\n");
    sp_buf_adds(&b, json);
    sp_buf_addc(&b, '\n');
    cJSON_free(json);

    sp_oid commit;
    int r = sp_odb_write(&s->odb, SP_OBJ_COMMIT, b.data, b.len, &commit, err);
    sp_buf_dispose(&b);
    if (r < 0)
        return r;
    /* Everything the ref reaches must be on disk before the ref is. */
    if (s->opts.durable && (r = sp_odb_sync(&s->odb, err)) < 0)
        return r;
    cleanup_free char *ref = sp_xasprintf(SNAP_REF_PREFIX "%s", id);
    if ((r = sp_ref_create(&s->odb, ref, &commit, err)) < 0)
        return r;
    if (s->opts.durable) {
        int rfd = openat(s->odb.dirfd, SNAP_REF_PREFIX, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (rfd < 0 || fsync(rfd) < 0)
            r = sp_err_errno(err, errno, "sync", SNAP_REF_PREFIX);
        if (rfd >= 0)
            close(rfd);
        if (r < 0)
            return r;
    }
    if (out) {
        sp_snapshot *snap = sp_xcalloc(1, sizeof(*snap));
        snap->id = steal_pointer(&id);
        snap->tag = tag ? sp_xstrdup(tag) : NULL;
        char chex[41];
        sp_oid_hex(&commit, chex);
        snap->commit = sp_xstrdup(chex);
        snap->root = sp_xstrdup(s->root);
        snap->store = sp_xstrdup(s->store);
        snap->created_at = steal_pointer(&at);
        snap->created_at_ns = ns;
        snap->files = c.files;
        snap->dirs = c.dirs;
        snap->symlinks = c.links;
        snap->bytes = c.bytes;
        *out = snap;
    }
    return 0;
}

static int cmp_snap(const void *a, const void *b)
{
    const sp_snapshot *x = *(sp_snapshot *const *)a, *y = *(sp_snapshot *const *)b;
    if (x->created_at_ns != y->created_at_ns)
        return x->created_at_ns < y->created_at_ns ? -1 : 1;
    return strcmp(x->id, y->id);
}

static int list_all(sp_snapshots **out, sp_snapstore *s, sp_error **err)
{
    *out = NULL;
    sp_refent *refs = NULL;
    size_t n = 0;
    int r = sp_ref_list(&s->odb, SNAP_REF_PREFIX, &refs, &n, err);
    if (r < 0)
        return r;
    sp_snapshots *l = sp_xcalloc(1, sizeof(*l));
    l->v = sp_xcalloc(n ? n : 1, sizeof(sp_snapshot *));
    for (size_t i = 0; i < n; i++) {
        const char *id = refs[i].name + strlen(SNAP_REF_PREFIX);
        sp_snapshot *snap = NULL;
        /* A damaged record is left out of the list rather than failing it. */
        if (load_record(&snap, &s->odb, id, &refs[i].id, NULL) == 0)
            l->v[l->n++] = snap;
    }
    sp_refents_free(refs, n);
    if (l->n > 1)
        qsort(l->v, l->n, sizeof(sp_snapshot *), cmp_snap);
    *out = l;
    return 0;
}

int sp_snapshot_list(sp_snapshots **out, sp_snapstore *s, sp_error **err)
{
    return list_all(out, s, err);
}

static bool is_prefix_ci(const char *pre, const char *s)
{
    for (; *pre; pre++, s++) {
        char a = *pre, b = *s;
        if (a >= 'A' && a <= 'F')
            a = (char)(a - 'A' + 'a');
        if (a != b)
            return false;
    }
    return true;
}

static int ambiguous(sp_error **err, const char *ref, const char *what, sp_snapshot **c, size_t n)
{
    sp_buf b = SP_BUF_INIT;
    for (size_t i = 0; i < n && i < 10; i++) {
        sp_buf_printf(&b, "%s%s %.12s", i ? ", " : "", c[i]->id, c[i]->commit);
        if (c[i]->tag)
            sp_buf_printf(&b, " (%s)", c[i]->tag);
    }
    if (n > 10)
        sp_buf_printf(&b, ", and %zu more", n - 10);
    int r = sp_err_set(err, SP_EINVAL, 0, "'%s' %s %zu snapshots: %s", ref, what, n,
                       b.data ? b.data : "");
    sp_buf_dispose(&b);
    return r;
}

int sp_snap_resolve(sp_snapshot **out, sp_snapstore *s, const char *ref, sp_error **err)
{
    *out = NULL;
    if (!ref || !*ref)
        return sp_err_set(err, SP_EINVAL, 0, "snapshot name is missing");
    if (is_uuid(ref)) {
        /* The common case for programs: one ref, no need to read every
         * record (a packed ref is found by the listing below). */
        cleanup_free char *name = sp_xasprintf(SNAP_REF_PREFIX "%s", ref);
        sp_oid commit;
        if (sp_ref_read_loose(&s->odb, name, &commit, NULL) == 0)
            return load_record(out, &s->odb, ref, &commit, err);
    }
    sp_snapshots *l = NULL;
    int r = list_all(&l, s, err);
    if (r < 0)
        return r;
    sp_snapshot **c = sp_xcalloc(l->n + 1, sizeof(*c));
    size_t nc = 0;
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i]->id, ref) == 0)
            c[nc++] = l->v[i];
    if (nc == 0)
        for (size_t i = 0; i < l->n; i++)
            if (l->v[i]->tag && strcmp(l->v[i]->tag, ref) == 0)
                c[nc++] = l->v[i];
    if (nc > 1) {
        r = ambiguous(err, ref, "tags", c, nc);
        goto done;
    }
    if (nc == 0 && strlen(ref) >= 4) {
        for (size_t i = 0; i < l->n; i++)
            if (is_prefix_ci(ref, l->v[i]->id) || is_prefix_ci(ref, l->v[i]->commit))
                c[nc++] = l->v[i];
        if (nc > 1) {
            r = ambiguous(err, ref, "is a prefix of", c, nc);
            goto done;
        }
    }
    if (nc == 0) {
        r = sp_err_set(err, SP_ENOTFOUND, 0, "no snapshot '%s' in %s", ref, s->store);
        goto done;
    }
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i] == c[0]) {
            *out = l->v[i];
            l->v[i] = NULL;
        }
    }
done:
    free(c);
    for (size_t i = 0; i < l->n; i++)
        sp_snapshot_free(l->v[i]);
    l->n = 0;
    sp_snapshots_free(l);
    return r;
}

int sp_snapshot_get(sp_snapshot **out, sp_snapstore *s, const char *ref, sp_error **err)
{
    return sp_snap_resolve(out, s, ref, err);
}

/* ----------------------------------------------------------- operations -- */

int sp_snapshot_create(sp_snapshot **out, sp_snapstore *s, const char *tag, sp_error **err)
{
    if (out)
        *out = NULL;
    int r;
    if (tag && (r = sp_snap_check_tag(tag, err)) < 0)
        return r;
    if ((r = sp_snap_lock_write(s, err)) < 0)
        return r;
    sp_scan sc;
    begin_op(s, &sc);
    if ((r = do_pause(s, err)) == 0) {
        r = refresh(s, &sc, err);
        r = do_unpause(s, r, err);
    }
    if (r == 0)
        r = sp_snap_record(out, s, &s->tree->oid, s->tree, tag, err);
    if (r == 0)
        save_cache_after(s);
    end_op(s, &sc);
    sp_snap_unlock(s);
    return r;
}

int sp_snapshot_restore(sp_snapshot **out, sp_snapstore *s, const char *ref, sp_error **err)
{
    if (out)
        *out = NULL;
    int r = sp_snap_lock(s, err);
    if (r < 0)
        return r;
    sp_scan sc;
    begin_op(s, &sc);
    sp_snapshot *snap = NULL;
    sp_oid tree;
    r = sp_snap_resolve(&snap, s, ref, err);
    if (r == 0)
        r = sp_snap_commit_tree(&s->odb, snap->commit, &tree, err);
    if (r == 0 && (r = do_pause(s, err)) == 0) {
        /* What is there now is about to be replaced: hash it, store none
         * of it. On success every id left in the tree is the target's; on
         * failure the tree is dropped. */
        s->odb.dry = true;
        r = refresh(s, &sc, err);
        s->odb.dry = s->read_only;
        if (r < 0)
            drop_tree(s);
        if (r == 0) {
            sc.phase = "restore";
            sc.durable = s->opts.durable;
            sc.keep_setid = s->opts.keep_setid;
            sc.next_progress = 1000;
            sc.path.len = 0;
            /* The budget is checked before anything changes. */
            uint64_t to_write = 0;
            r = sp_restore_plan(&sc, s->tree, &tree, &to_write, err);
            sc.path.len = 0;
            lseek(s->rootfd, 0, SEEK_SET);
            if (r == 0)
                r = sp_restore_dir(&sc, s->rootfd, s->tree, &tree, err);
            /* Folders whose files lost set-id bits are not the snapshot's
             * trees: their ids, for the stat cache and the next snapshot. */
            if (r == 0)
                r = sp_tree_finalize(&s->odb, s->tree, err);
            s->cache_dirty = true;
            if (r < 0)
                drop_tree(s); /* what is on disk now is for the next walk to find */
        }
        r = do_unpause(s, r, err);
    }
    if (r == 0)
        save_cache_after(s);
    end_op(s, &sc);
    sp_snap_unlock(s);
    if (r == 0 && out)
        *out = snap;
    else
        sp_snapshot_free(snap);
    return r;
}

int sp_snapshot_delete(sp_snapstore *s, const char *ref, sp_error **err)
{
    int r = sp_snap_lock_write(s, err);
    if (r < 0)
        return r;
    sp_snapshot *snap = NULL;
    r = sp_snap_resolve(&snap, s, ref, err);
    if (r == 0) {
        cleanup_free char *name = sp_xasprintf(SNAP_REF_PREFIX "%s", snap->id);
        r = sp_ref_delete(&s->odb, name, err);
    }
    sp_snapshot_free(snap);
    sp_snap_unlock(s);
    return r;
}

/* Used by diff.c: the tree of the live workspace, read like a snapshot. */
int sp_snap_live_tree(sp_snapstore *s, sp_oid *tree, sp_error **err);
int sp_snap_live_tree(sp_snapstore *s, sp_oid *tree, sp_error **err)
{
    /* The live tree's objects are written into the store to be compared. */
    if (s->read_only)
        return sp_err_set(err, SP_EREADONLY, EROFS,
                          "snapshot store %s is read-only: compare two snapshots instead of "
                          "a snapshot and the live workspace",
                          s->store);
    int r = sp_snap_lock(s, err);
    if (r < 0)
        return r;
    sp_scan sc;
    begin_op(s, &sc);
    if ((r = do_pause(s, err)) == 0) {
        r = refresh(s, &sc, err);
        r = do_unpause(s, r, err);
    }
    if (r == 0) {
        *tree = s->tree->oid;
        save_cache_after(s);
    }
    end_op(s, &sc);
    sp_snap_unlock(s);
    return r;
}

/* ------------------------------------------------------------------ gc -- */

/* A set of object ids: open addressing on the first 8 bytes. */
struct oidset {
    sp_oid *v;
    uint8_t *used;
    size_t cap, n;
};

static uint64_t oid_hash(const sp_oid *id)
{
    uint64_t h;
    memcpy(&h, id->id, 8);
    return h;
}

static bool oidset_add(struct oidset *s, const sp_oid *id);

static void oidset_grow(struct oidset *s)
{
    struct oidset old = *s;
    s->cap = s->cap ? s->cap * 2 : 4096;
    s->v = sp_xcalloc(s->cap, sizeof(sp_oid));
    s->used = sp_xcalloc(s->cap, 1);
    s->n = 0;
    for (size_t i = 0; i < old.cap; i++)
        if (old.used[i])
            oidset_add(s, &old.v[i]);
    free(old.v);
    free(old.used);
}

/* Returns true when the id was new. */
static bool oidset_add(struct oidset *s, const sp_oid *id)
{
    if ((s->n + 1) * 2 > s->cap)
        oidset_grow(s);
    size_t i = (size_t)oid_hash(id) & (s->cap - 1);
    while (s->used[i]) {
        if (sp_oid_equal(&s->v[i], id))
            return false;
        i = (i + 1) & (s->cap - 1);
    }
    s->used[i] = 1;
    s->v[i] = *id;
    s->n++;
    return true;
}

static bool oidset_has(const struct oidset *s, const sp_oid *id)
{
    if (!s->cap)
        return false;
    size_t i = (size_t)oid_hash(id) & (s->cap - 1);
    while (s->used[i]) {
        if (sp_oid_equal(&s->v[i], id))
            return true;
        i = (i + 1) & (s->cap - 1);
    }
    return false;
}

/* Mark a tree and everything below it, meta blobs included. */
static int mark_tree(sp_odb *o, struct oidset *set, const sp_oid *tree, unsigned depth,
                     sp_error **err)
{
    if (!oidset_add(set, tree))
        return 0;
    if (depth > SNAP_MAX_DEPTH + 8)
        return sp_err_set(err, SP_ETOOBIG, 0, "trees nested too deep");
    sp_buf b = SP_BUF_INIT;
    int type = 0;
    int r = sp_odb_read(o, tree, &type, &b, err);
    if (r < 0)
        return r;
    const char *p = b.data, *end = b.data + b.len;
    while (r == 0 && p < end) {
        const char *nul = memchr(p, '\0', (size_t)(end - p));
        if (!nul || end - nul < 21)
            break;
        sp_oid id;
        memcpy(id.id, nul + 1, 20);
        bool sub = p[0] == '4';
        p = nul + 21;
        if (sub)
            r = mark_tree(o, set, &id, depth + 1, err);
        else
            oidset_add(set, &id);
    }
    sp_buf_dispose(&b);
    return r;
}

static int mark_nodes(sp_odb *o, struct oidset *set, const snode *n, sp_error **err)
{
    if (n->type == SN_DIR) {
        if (!(n->flags & SN_DIRTY)) {
            int r = mark_tree(o, set, &n->oid, 0, err);
            if (r < 0)
                return r;
        }
        for (uint32_t i = 0; i < n->nkids; i++) {
            int r = mark_nodes(o, set, n->kids[i], err);
            if (r < 0)
                return r;
        }
    } else if (n->type == SN_FILE || n->type == SN_LINK) {
        oidset_add(set, &n->oid);
    }
    return 0;
}

static bool is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return s[n] == '\0';
}

/* Remove unreachable loose objects and stale temp files. */
static int prune_loose(sp_snapstore *s, const struct oidset *keep, sp_snapstore_gc_result *res,
                       sp_error **err)
{
    for (int i = 0; i < 256; i++) {
        char dir[3];
        snprintf(dir, sizeof(dir), "%02x", i);
        int fd = openat(s->odb.objfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            continue;
        sp_strv names = {0};
        DIR *d = fdopendir(fd);
        if (!d) {
            close(fd);
            return sp_err_errno(err, errno, "list", dir);
        }
        struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.')
                sp_strv_push(&names, sp_xstrdup(e->d_name));
        for (size_t k = 0; k < names.n; k++) {
            const char *nm = names.v[k];
            struct stat st;
            bool drop = strncmp(nm, "tmp_obj_", 8) == 0;
            if (!drop && strlen(nm) == 38 && is_hex(nm, 38)) {
                char hex[41];
                memcpy(hex, dir, 2);
                memcpy(hex + 2, nm, 39);
                sp_oid id;
                if (sp_oid_parse(&id, hex, 40) == 0 && !oidset_has(keep, &id)) {
                    drop = true;
                    res->objects_removed++;
                } else {
                    res->objects_kept++;
                }
            }
            if (drop) {
                if (fstatat(dirfd(d), nm, &st, AT_SYMLINK_NOFOLLOW) == 0)
                    res->bytes_removed += (uint64_t)st.st_size;
                unlinkat(dirfd(d), nm, 0);
            }
        }
        sp_strv_dispose(&names);
        closedir(d);
        unlinkat(s->odb.objfd, dir, AT_REMOVEDIR); /* when empty */
    }
    memset(s->odb.fanout, 0, sizeof(s->odb.fanout));
    /* Streaming temp files live in objects/ itself. */
    int fd = openat(s->odb.objfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d) {
        struct dirent *e;
        sp_strv names = {0};
        while ((e = readdir(d)))
            if (strncmp(e->d_name, "tmp_obj_", 8) == 0)
                sp_strv_push(&names, sp_xstrdup(e->d_name));
        for (size_t k = 0; k < names.n; k++)
            unlinkat(s->odb.objfd, names.v[k], 0);
        sp_strv_dispose(&names);
        closedir(d);
    } else if (fd >= 0) {
        close(fd);
    }
    return 0;
}

struct packscan {
    const struct oidset *keep;
    sp_odb *odb;
    uint64_t unreachable;
};

static int count_unreachable(const git_oid *id, void *payload)
{
    struct packscan *ps = payload;
    sp_oid o;
    memcpy(o.id, id->id, 20);
    if (!oidset_has(ps->keep, &o))
        ps->unreachable++;
    return 0;
}

static int lg2_fail(sp_error **err, const char *what)
{
    const git_error *e = git_error_last();
    return sp_err_set(err, SP_ERROR, 0, "%s: %s", what, e && e->message ? e->message : "libgit2");
}

/* Packs (made by someone's `git gc`, say) holding unreachable objects are
 * rewritten with only what is reachable. */
static int prune_packs(sp_snapstore *s, const struct oidset *keep, sp_snapstore_gc_result *res,
                       sp_error **err)
{
    if (!sp_odb_has_packs(&s->odb))
        return 0;
    void *vrepo = NULL;
    int r = sp_odb_lg2(&s->odb, &vrepo, err);
    if (r < 0)
        return r;
    git_repository *repo = vrepo;
    git_odb *db = NULL;
    if (git_repository_odb(&db, repo) < 0)
        return lg2_fail(err, "object database");
    struct packscan ps = {keep, &s->odb, 0};
    if (git_odb_foreach(db, count_unreachable, &ps) < 0) {
        git_odb_free(db);
        return lg2_fail(err, "list objects");
    }
    git_odb_free(db);
    if (ps.unreachable == 0)
        return 0;

    /* Old packs, to delete once the new one is in place. */
    sp_strv old = {0};
    int pfd = openat(s->odb.objfd, "pack", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = pfd >= 0 ? fdopendir(pfd) : NULL;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t l = strlen(e->d_name);
            if (l > 5 && strcmp(e->d_name + l - 5, ".pack") == 0)
                sp_strv_push(&old, sp_xstrndup(e->d_name, l - 5));
        }
        closedir(d);
    } else if (pfd >= 0) {
        close(pfd);
    }

    git_packbuilder *pb = NULL;
    if (git_packbuilder_new(&pb, repo) < 0) {
        sp_strv_dispose(&old);
        return lg2_fail(err, "pack");
    }
    for (size_t i = 0; i < keep->cap && r == 0; i++) {
        if (!keep->used[i])
            continue;
        git_oid gid;
        memcpy(gid.id, keep->v[i].id, 20);
        if (git_packbuilder_insert(pb, &gid, NULL) < 0)
            r = lg2_fail(err, "pack");
    }
    cleanup_free char *packdir = sp_xasprintf("%s/objects/pack", s->store);
    if (r == 0 && git_packbuilder_write(pb, packdir, 0, NULL, NULL) < 0)
        r = lg2_fail(err, "write pack");
    cleanup_free char *newname = NULL;
    if (r == 0) {
        char hex[GIT_OID_HEXSZ + 1];
        git_oid_tostr(hex, sizeof(hex), git_packbuilder_hash(pb));
        newname = sp_xasprintf("pack-%s", hex);
    }
    git_packbuilder_free(pb);
    if (r == 0) {
        pfd = openat(s->odb.objfd, "pack", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        for (size_t i = 0; i < old.n && pfd >= 0; i++) {
            if (strcmp(old.v[i], newname) == 0)
                continue;
            cleanup_free char *keepf = sp_xasprintf("%s.keep", old.v[i]);
            struct stat st;
            if (fstatat(pfd, keepf, &st, 0) == 0)
                continue;
            static const char *const exts[] = {".pack", ".idx", ".rev", ".bitmap"};
            for (size_t k = 0; k < 4; k++) {
                cleanup_free char *f = sp_xasprintf("%s%s", old.v[i], exts[k]);
                if (k == 0 && fstatat(pfd, f, &st, 0) == 0)
                    res->bytes_removed += (uint64_t)st.st_size;
                unlinkat(pfd, f, 0);
            }
        }
        if (pfd >= 0)
            close(pfd);
        res->objects_removed += ps.unreachable;
        /* libgit2 still maps the old packs. */
        git_repository_free(s->odb.repo);
        s->odb.repo = NULL;
    }
    sp_strv_dispose(&old);
    return r;
}

int sp_snapstore_gc(sp_snapstore_gc_result *out, sp_snapstore *s, sp_error **err)
{
    sp_snapstore_gc_result res = {0, 0, 0};
    int r = sp_snap_lock_write(s, err);
    if (r < 0)
        return r;
    struct oidset keep = {NULL, NULL, 0, 0};
    sp_refent *refs = NULL;
    size_t n = 0;
    uint64_t gen = read_generation(s);
    /* Only the newer stat cache is kept alive; the older slot goes first,
     * so that it can never name what this gc removes. */
    snode *cache = sp_cache_load(s->odb.dirfd, &s->root_st, gen);
    sp_cache_drop_older(s->odb.dirfd);
    if (gen != s->generation) {
        drop_tree(s);
        s->generation = gen;
    }
    r = sp_ref_list(&s->odb, SNAP_REF_PREFIX, &refs, &n, err);
    for (size_t i = 0; i < n && r == 0; i++) {
        sp_oid tree;
        char hex[41];
        sp_oid_hex(&refs[i].id, hex);
        oidset_add(&keep, &refs[i].id);
        r = sp_snap_commit_tree(&s->odb, hex, &tree, err);
        if (r == 0)
            r = mark_tree(&s->odb, &keep, &tree, 0, err);
    }
    /* What the stat cache (on disk, and ours in memory) names stays, so
     * it remains valid. */
    if (r == 0 && cache)
        r = mark_nodes(&s->odb, &keep, cache, err);
    if (r == 0 && s->tree)
        r = mark_nodes(&s->odb, &keep, s->tree, err);
    if (r == 0)
        r = prune_loose(s, &keep, &res, err);
    if (r == 0)
        r = prune_packs(s, &keep, &res, err);
    if (r == 0) {
        /* Stale ref locks of killed processes (we hold the store lock). */
        int dfd = openat(s->odb.dirfd, SNAP_REF_PREFIX, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (d) {
            struct dirent *e;
            sp_strv locks = {0};
            while ((e = readdir(d))) {
                size_t l = strlen(e->d_name);
                if (l > 5 && strcmp(e->d_name + l - 5, ".lock") == 0)
                    sp_strv_push(&locks, sp_xstrdup(e->d_name));
            }
            for (size_t i = 0; i < locks.n; i++)
                unlinkat(dirfd(d), locks.v[i], 0);
            sp_strv_dispose(&locks);
            closedir(d);
        } else if (dfd >= 0) {
            close(dfd);
        }
        unlinkat(s->odb.dirfd, "packed-refs.lock", 0);
    }
    if (r == 0 && res.objects_removed) {
        /* Indexes git may have written name what is gone now; git rebuilds
         * them when it wants them. */
        unlinkat(s->odb.objfd, "info/commit-graph", 0);
        unlinkat(s->odb.objfd, "info/packs", 0);
        unlinkat(s->odb.objfd, "pack/multi-pack-index", 0);
        int cg = openat(s->odb.objfd, "info/commit-graphs", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = cg >= 0 ? fdopendir(cg) : NULL;
        if (d) {
            struct dirent *e;
            sp_strv names = {0};
            while ((e = readdir(d)))
                if (e->d_name[0] != '.')
                    sp_strv_push(&names, sp_xstrdup(e->d_name));
            for (size_t i = 0; i < names.n; i++)
                unlinkat(dirfd(d), names.v[i], 0);
            sp_strv_dispose(&names);
            closedir(d);
            unlinkat(s->odb.objfd, "info/commit-graphs", AT_REMOVEDIR);
        } else if (cg >= 0) {
            close(cg);
        }
    }
    if (r == 0 && (r = write_generation(s, gen + 1, err)) == 0) {
        s->generation = gen + 1;
        if (cache)
            (void)sp_cache_save(s->odb.dirfd, cache, &s->root_st, gen + 1, NULL);
        if (s->tree)
            s->cache_dirty = true;
    }
    sp_snode_free(cache, NULL, NULL);
    sp_refents_free(refs, n);
    free(keep.v);
    free(keep.used);
    sp_snap_unlock(s);
    if (r == 0 && out)
        *out = res;
    return r;
}
