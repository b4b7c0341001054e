/* Image builds through the service: the context folder sent as a tar
 * (made here, never following a symlink) to POST /libpod/build, the
 * build's output streamed back line by line. */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "lazy_archive.h"
#include "podman_internal.h"

/* Where the Containerfile goes in the tar when it lies outside the
 * context (Podman reads it from the context only). */
#define OUTSIDE_NAME ".sandpod.Containerfile"

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct ctx_tar {
    struct archive *a;
    struct archive_entry *e;
    dev_t cf_dev; /* the Containerfile, to find it inside the context */
    ino_t cf_ino;
    char *cf_path; /* its path in the tar once found */
    const char *root;
} ctx_tar;

static int tar_fail(ctx_tar *t, const char *path, sp_error **err)
{
    return sp_err_set(err, SP_ERROR, 0, "build context %s: %s: %s", t->root, path,
                      archive_error_string(t->a));
}

static int put_header(ctx_tar *t, const char *path, const struct stat *st, mode_t type,
                      const char *link, sp_error **err)
{
    archive_entry_clear(t->e);
    archive_entry_set_pathname(t->e, path);
    archive_entry_set_filetype(t->e, type);
    archive_entry_set_perm(t->e, st->st_mode & 07777);
    archive_entry_set_uid(t->e, 0);
    archive_entry_set_gid(t->e, 0);
    archive_entry_set_mtime(t->e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
    archive_entry_set_size(t->e, type == AE_IFREG ? (la_int64_t)st->st_size : 0);
    if (link)
        archive_entry_set_symlink(t->e, link);
    if (archive_write_header(t->a, t->e) != ARCHIVE_OK)
        return tar_fail(t, path, err);
    return 0;
}

/* One regular file, opened without following a link; its size is the one
 * fstat saw (a file that grows meanwhile is cut, one that shrinks is an
 * error). */
static int put_file(ctx_tar *t, int dfd, const char *name, const char *path, sp_error **err)
{
    cleanup_close int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return sp_err_errno(err, errno, "build context: open", path);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return sp_err_errno(err, errno, "build context: stat", path);
    if (!S_ISREG(st.st_mode))
        return 0;
    if (!t->cf_path && st.st_dev == t->cf_dev && st.st_ino == t->cf_ino)
        t->cf_path = sp_xstrdup(path);
    int r = put_header(t, path, &st, AE_IFREG, NULL, err);
    if (r < 0)
        return r;
    char buf[65536];
    off_t left = st.st_size;
    while (left > 0) {
        ssize_t n = read(fd, buf, (size_t)(left < (off_t)sizeof(buf) ? left : (off_t)sizeof(buf)));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return sp_err_errno(err, errno, "build context: read", path);
        if (n == 0)
            return sp_err_set(err, SP_ERROR, 0, "build context: %s shrank while being sent", path);
        if (archive_write_data(t->a, buf, (size_t)n) != n)
            return tar_fail(t, path, err);
        left -= n;
    }
    return 0;
}

/* Contract: everything under dfd goes in as what it is: folders are
 * entered with O_NOFOLLOW, files opened with O_NOFOLLOW, symlinks stored
 * as links (their targets never read), so nothing outside the context
 * reaches the tar. Sockets, fifos and devices are left out. */
static int put_dir(ctx_tar *t, int dfd, const char *prefix, unsigned depth, sp_error **err)
{
    if (depth > 256)
        return sp_err_set(err, SP_ETOOBIG, 0, "build context %s: folders nest too deep at %s",
                          t->root, prefix);
    int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
    if (dup_fd < 0)
        return sp_err_errno(err, errno, "build context", prefix);
    DIR *d = fdopendir(dup_fd);
    if (!d) {
        close(dup_fd);
        return sp_err_errno(err, errno, "build context: read folder", prefix);
    }
    /* Sorted names: the same folder makes the same tar. */
    sp_strv names = {0};
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            sp_strv_push(&names, sp_xstrdup(de->d_name));
    closedir(d);
    if (names.n)
        qsort(names.v, names.n, sizeof(char *), cmp_names);
    int r = 0;
    for (size_t i = 0; i < names.n && r == 0; i++) {
        const char *name = names.v[i];
        cleanup_free char *path = *prefix ? sp_xasprintf("%s/%s", prefix, name) : sp_xstrdup(name);
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            r = sp_err_errno(err, errno, "build context: stat", path);
        } else if (S_ISDIR(st.st_mode)) {
            cleanup_close int sub =
                openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0)
                r = sp_err_errno(err, errno, "build context: open folder", path);
            else if ((r = put_header(t, path, &st, AE_IFDIR, NULL, err)) == 0)
                r = put_dir(t, sub, path, depth + 1, err);
        } else if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX];
            ssize_t n = readlinkat(dfd, name, target, sizeof(target) - 1);
            if (n < 0) {
                r = sp_err_errno(err, errno, "build context: read link", path);
            } else {
                target[n] = '\0';
                r = put_header(t, path, &st, AE_IFLNK, target, err);
            }
        } else if (S_ISREG(st.st_mode)) {
            r = put_file(t, dfd, name, path, err);
        }
    }
    sp_strv_dispose(&names);
    return r;
}

/* The Containerfile: the one given, else CONTEXT/Containerfile, else
 * CONTEXT/Dockerfile. Opened (the caller's own path may be a link) and
 * read whole, for when it lies outside the context. */
static int open_containerfile(int *out_fd, char **out_label, int ctx_fd, const char *given,
                              sp_error **err)
{
    if (given) {
        *out_fd = open(given, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        *out_label = sp_xstrdup(given);
        if (*out_fd < 0)
            return sp_err_errno(err, errno, "build: open Containerfile", given);
        return 0;
    }
    static const char *const names[] = {"Containerfile", "Dockerfile"};
    for (size_t i = 0; i < 2; i++) {
        *out_fd = openat(ctx_fd, names[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        if (*out_fd >= 0) {
            *out_label = sp_xstrdup(names[i]);
            return 0;
        }
    }
    return sp_err_set(err, SP_ENOTFOUND, ENOENT,
                      "build: no Containerfile or Dockerfile in the context (give one with -f)");
}

static int write_context(int out_fd, char **out_cf_path, int ctx_fd, const char *ctx, int cf_fd,
                         const char *cf_label, sp_error **err)
{
    int r = sp_archive_load(err);
    if (r < 0)
        return r;
    struct stat cf;
    if (fstat(cf_fd, &cf) < 0)
        return sp_err_errno(err, errno, "build: stat", cf_label);
    if (!S_ISREG(cf.st_mode) || cf.st_size > (1 << 20))
        return sp_err_set(err, SP_EINVAL, 0, "build: %s is not a file of at most 1 MiB", cf_label);
    ctx_tar t = {archive_write_new(), archive_entry_new(), cf.st_dev, cf.st_ino, NULL, ctx};
    archive_write_set_format_pax_restricted(t.a);
    if (archive_write_open_fd(t.a, out_fd) != ARCHIVE_OK)
        r = tar_fail(&t, ".", err);
    if (r == 0)
        r = put_dir(&t, ctx_fd, "", 0, err);
    if (r == 0 && !t.cf_path) {
        /* Outside the context: sent under a name of its own. */
        sp_buf b = SP_BUF_INIT;
        if (sp_read_all(cf_fd, &b, 1 << 20) < 0)
            r = sp_err_errno(err, errno, "build: read", cf_label);
        struct stat st = cf;
        st.st_size = (off_t)b.len;
        st.st_mode = S_IFREG | 0644;
        if (r == 0)
            r = put_header(&t, OUTSIDE_NAME, &st, AE_IFREG, NULL, err);
        if (r == 0 && b.len && archive_write_data(t.a, b.data, b.len) != (la_ssize_t)b.len)
            r = tar_fail(&t, OUTSIDE_NAME, err);
        sp_buf_dispose(&b);
        if (r == 0)
            t.cf_path = sp_xstrdup(OUTSIDE_NAME);
    }
    if (r == 0 && archive_write_close(t.a) != ARCHIVE_OK)
        r = tar_fail(&t, ".", err);
    archive_entry_free(t.e);
    archive_write_free(t.a);
    if (r == 0)
        *out_cf_path = steal_pointer(&t.cf_path);
    free(t.cf_path);
    return r;
}

typedef struct build_ctx {
    sp_podman_progress_fn fn;
    void *ud;
    char *id;
    const char *what;
} build_ctx;

static bool is_image_id(const char *s, size_t n)
{
    if (n != 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

static int build_line(const char *line, size_t len, void *ud, sp_error **err)
{
    build_ctx *c = ud;
    if (len == 0)
        return 0;
    cJSON *j = sp_json_parse(line, len);
    if (!j)
        return sp_err_set(err, SP_EPODMAN, 0, "%s: the podman service sent a malformed line",
                          c->what);
    int r = 0;
    const char *e = sp_json_str(j, "error");
    const char *s = sp_json_str(j, "stream");
    const cJSON *aux = sp_json_get(j, "aux");
    const char *aux_id = aux ? sp_json_str(aux, "ID") : NULL;
    if (e && *e) {
        cleanup_free char *m = sp_podman_one_line(e);
        r = sp_err_set(err, SP_EPODMAN, 0, "%s: %s", c->what, m);
    } else if (s) {
        /* A piece may hold several lines, or none finished. */
        const char *p = s;
        while (*p) {
            size_t n = strcspn(p, "\n");
            if (n && is_image_id(p, n)) {
                free(c->id);
                c->id = sp_xasprintf("%.*s", (int)n, p);
            }
            if (n && c->fn) {
                cleanup_free char *one = sp_xasprintf("%.*s", (int)n, p);
                c->fn(one, c->ud);
            }
            p += n;
            if (*p == '\n')
                p++;
        }
    }
    if (r == 0 && aux_id && *aux_id) {
        free(c->id);
        c->id = sp_xstrdup(strncmp(aux_id, "sha256:", 7) == 0 ? aux_id + 7 : aux_id);
    }
    cJSON_Delete(j);
    return r;
}

int sp_podman_image_build(char **out_id, sp_podman *p, const char *context,
                          const sp_podman_build_opts *opts, sp_error **err)
{
    if (out_id)
        *out_id = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_PODMAN_BUILD_OPTS_VERSION, "sp_podman_build_opts", err) < 0)
        return SP_EINVAL;
    sp_podman_build_opts dflt = SP_PODMAN_BUILD_OPTS_INIT;
    if (!opts)
        opts = &dflt;
    if (!context || !*context)
        context = ".";
    cleanup_close int ctx_fd = open(context, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (ctx_fd < 0)
        return sp_err_errno(err, errno, "build: open the context folder", context);
    cleanup_close int cf_fd = -1;
    cleanup_free char *cf_label = NULL;
    int r = open_containerfile(&cf_fd, &cf_label, ctx_fd, opts->containerfile, err);
    if (r < 0)
        return r;
    cleanup_close int tar_fd = memfd_create("sandpod-build-context", MFD_CLOEXEC);
    if (tar_fd < 0)
        return sp_err_errno(err, errno, "build", "memfd_create");
    cleanup_free char *cf_path = NULL;
    r = write_context(tar_fd, &cf_path, ctx_fd, context, cf_fd, cf_label, err);
    if (r < 0)
        return r;
    if (lseek(tar_fd, 0, SEEK_SET) < 0)
        return sp_err_errno(err, errno, "build", "lseek");

    sp_buf path = SP_BUF_INIT;
    cleanup_free char *df = sp_podman_escape(p, cf_path);
    sp_buf_printf(&path, SP_PODMAN_API "/build?dockerfile=%s&rm=true&layers=true", df);
    if (opts->tag && *opts->tag) {
        cleanup_free char *tag = sp_podman_escape(p, opts->tag);
        sp_buf_printf(&path, "&t=%s", tag);
    }
    cleanup_free char *what =
        sp_xasprintf("build %s", opts->tag && *opts->tag ? opts->tag : cf_label);
    build_ctx c = {opts->output, opts->userdata, NULL, what};
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.method = "POST";
    req.path = path.data;
    req.upload_fd = tar_fd;
    req.content_type = "application/x-tar";
    req.on_line = build_line;
    req.ud = &c;
    req.timeout_ms = -1; /* a build runs as long as its steps do */
    sp_http_resp resp = {0};
    r = sp_podman_http(p, &req, &resp, what, err);
    sp_http_resp_dispose(&resp);
    sp_buf_dispose(&path);
    if (r == 0 && !c.id)
        r = sp_err_set(err, SP_EPODMAN, 0, "%s: the service reported no image id", what);
    if (r == 0 && out_id)
        *out_id = steal_pointer(&c.id);
    free(c.id);
    return r;
}
