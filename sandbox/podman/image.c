/* Images: exists, pull (streamed progress), import of a rootfs tarball, and
 * the offline busybox image built in memory with libarchive. */
#include <elf.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "lazy_archive.h"
#include "podman_internal.h"

extern char **environ;

int sp_podman_image_exists(bool *out, sp_podman *p, const char *name, sp_error **err)
{
    *out = false;
    if (!name || !*name)
        return sp_err_set(err, SP_EINVAL, 0, "image exists: name is missing");
    cleanup_free char *n = sp_podman_escape(p, name);
    cleanup_free char *path = sp_xasprintf(SP_PODMAN_API "/images/%s/exists", n);
    cleanup_free char *what = sp_xasprintf("look up image %s", name);
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.path = path;
    sp_http_resp resp = {0};
    sp_error *e = NULL;
    int r = sp_podman_http(p, &req, &resp, what, &e);
    if (r == SP_ENOTFOUND) {
        sp_error_free(e);
        r = 0;
    } else if (r < 0) {
        if (err) {
            sp_error_free(*err);
            *err = e;
        } else {
            sp_error_free(e);
        }
    } else {
        *out = true;
    }
    sp_http_resp_dispose(&resp);
    return r;
}

int sp_podman_image_id(char **out, sp_podman *p, const char *name, sp_error **err)
{
    *out = NULL;
    if (!name || !*name)
        return sp_err_set(err, SP_EINVAL, 0, "image id: name is missing");
    cleanup_free char *n = sp_podman_escape(p, name);
    cleanup_free char *path = sp_xasprintf(SP_PODMAN_API "/images/%s/json", n);
    cleanup_free char *what = sp_xasprintf("inspect image %s", name);
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.path = path;
    cJSON *j = NULL;
    int r = sp_podman_call_json(p, &req, &j, what, err);
    if (r < 0)
        return r;
    const char *id = sp_json_str(j, "Id");
    if (id && strncmp(id, "sha256:", 7) == 0)
        id += 7;
    if (id && *id)
        *out = sp_xstrdup(id);
    else
        r = sp_err_set(err, SP_EPODMAN, 0, "%s: the answer has no id", what);
    cJSON_Delete(j);
    return r;
}

typedef struct pull_ctx {
    sp_podman_progress_fn fn;
    void *ud;
    char *id;
    const char *ref;
} pull_ctx;

char *sp_podman_one_line(const char *s)
{
    char *m = sp_xstrdup(s);
    size_t n = strlen(m);
    while (n && (m[n - 1] == '\n' || m[n - 1] == '\r' || m[n - 1] == ' '))
        m[--n] = '\0';
    for (char *q = m; *q; q++)
        if (*q == '\n' || *q == '\r')
            *q = ' ';
    return m;
}

static int pull_line(const char *line, size_t len, void *ud, sp_error **err)
{
    pull_ctx *c = ud;
    if (len == 0)
        return 0;
    cJSON *j = sp_json_parse(line, len);
    if (!j)
        return sp_err_set(err, SP_EPODMAN, 0,
                          "pull %s: the podman service sent a malformed progress line", c->ref);
    int r = 0;
    const char *e = sp_json_str(j, "error");
    const char *s = sp_json_str(j, "stream");
    const char *id = sp_json_str(j, "id");
    if (e && *e) {
        cleanup_free char *m = sp_podman_one_line(e);
        r = sp_err_set(err, SP_EPODMAN, 0, "pull %s: %s", c->ref, m);
    } else if (s && c->fn) {
        cleanup_free char *m = sp_podman_one_line(s);
        c->fn(m, c->ud);
    }
    if (r == 0 && id && *id) {
        free(c->id);
        c->id = sp_xstrdup(id);
    }
    cJSON_Delete(j);
    return r;
}

/* The registry part of a reference ("127.0.0.1:5000" of
 * "127.0.0.1:5000/x:1"), or docker.io when it names none. */
static char *ref_registry(const char *ref)
{
    const char *slash = strchr(ref, '/');
    if (slash) {
        size_t n = (size_t)(slash - ref);
        if (memchr(ref, '.', n) || memchr(ref, ':', n) || (n == 9 && !strncmp(ref, "localhost", 9)))
            return sp_xasprintf("%.*s", (int)n, ref);
    }
    return sp_xstrdup("docker.io");
}

/* The last ": "-separated part of a Go error chain: the reason itself
 * ("connection refused"). */
static const char *last_reason(const char *m)
{
    const char *r = m;
    for (const char *q = m; (q = strstr(q, ": ")); q += 2)
        r = q + 2;
    return r;
}

/* Turn the service's long error chain into one line that says what went
 * wrong with the registry, keeping the code: SP_ENOTFOUND for an image the
 * registry lacks. Messages it cannot place pass through. */
static int classify_pull_error(sp_error **err, sp_error *e, const char *ref)
{
    const char *m = e->message;
    cleanup_free char *reg = ref_registry(ref);
    int code = e->code;
    char *msg = NULL;
    if (strstr(m, "server gave HTTP response to HTTPS client"))
        msg = sp_xasprintf("pull %s: registry %s speaks plain HTTP, not HTTPS: if you trust it, "
                           "pull with TLS verification off (--tls-verify=false)",
                           ref, reg);
    else if (strstr(m, "x509: ") || strstr(m, "tls: "))
        msg = sp_xasprintf("pull %s: TLS with registry %s failed (%s): if you trust it, pull with "
                           "TLS verification off (--tls-verify=false)",
                           ref, reg, last_reason(m));
    else if (strstr(m, "manifest unknown") || strstr(m, "name unknown") ||
             strstr(m, "repository name not known") || strstr(m, "not found: manifest")) {
        code = SP_ENOTFOUND;
        msg = sp_xasprintf("pull %s: registry %s has no such image", ref, reg);
    } else if (strstr(m, "connection refused") || strstr(m, "no such host") ||
               strstr(m, "i/o timeout") || strstr(m, "network is unreachable") ||
               strstr(m, "no route to host") || strstr(m, "connection reset"))
        msg = sp_xasprintf("pull %s: registry %s cannot be reached (%s)", ref, reg, last_reason(m));
    if (!msg) {
        if (err) {
            sp_error_free(*err);
            *err = e;
        } else {
            sp_error_free(e);
        }
        return code;
    }
    int r = sp_err_set(err, code, 0, "%s", msg);
    free(msg);
    sp_error_free(e);
    return r;
}

int sp_podman_image_pull_with(char **out_id, sp_podman *p, const char *reference,
                              const sp_podman_pull_opts *opts, sp_error **err)
{
    if (out_id)
        *out_id = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_PODMAN_PULL_OPTS_VERSION, "sp_podman_pull_opts", err) < 0)
        return SP_EINVAL;
    sp_podman_pull_opts dflt = SP_PODMAN_PULL_OPTS_INIT;
    if (!opts)
        opts = &dflt;
    if (!reference || !*reference)
        return sp_err_set(err, SP_EINVAL, 0, "pull: image reference is missing");
    cleanup_free char *ref = sp_podman_escape(p, reference);
    /* policy=always: an explicit pull asks the registry even when a local
     * copy exists (create's --pull decides before calling). */
    cleanup_free char *path = sp_xasprintf(
        SP_PODMAN_API "/images/pull?reference=%s&tlsVerify=%s&policy=always&quiet=false", ref,
        opts->no_tls_verify ? "false" : "true");
    cleanup_free char *what = sp_xasprintf("pull %s", reference);
    pull_ctx c = {opts->progress, opts->userdata, NULL, reference};
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.method = "POST";
    req.path = path;
    req.on_line = pull_line;
    req.ud = &c;
    req.timeout_ms = (long)p->transfer_timeout_ms;
    sp_http_resp resp = {0};
    sp_error *e = NULL;
    int r = sp_podman_http(p, &req, &resp, what, &e);
    sp_http_resp_dispose(&resp);
    if (r == 0 && !c.id)
        r = sp_err_set(&e, SP_EPODMAN, 0, "%s: the service reported no image id", what);
    if (r < 0)
        r = e ? classify_pull_error(err, e, reference) : r;
    if (r == 0 && out_id)
        *out_id = steal_pointer(&c.id);
    free(c.id);
    return r;
}

int sp_podman_image_pull(char **out_id, sp_podman *p, const char *reference,
                         sp_podman_progress_fn progress, void *userdata, sp_error **err)
{
    sp_podman_pull_opts o = SP_PODMAN_PULL_OPTS_INIT;
    o.progress = progress;
    o.userdata = userdata;
    return sp_podman_image_pull_with(out_id, p, reference, &o, err);
}

sp_podman_pull_policy sp_podman_pull_policy_for(const char *reference, sp_podman_pull_policy policy)
{
    if (policy != SP_PODMAN_PULL_DEFAULT)
        return policy;
    if (!reference)
        return SP_PODMAN_PULL_NEVER;
    cleanup_free char *reg = ref_registry(reference);
    size_t n = strlen(reg);
    bool named = strncmp(reference, reg, n) == 0 && reference[n] == '/';
    return named && strcmp(reg, "localhost") != 0 ? SP_PODMAN_PULL_MISSING : SP_PODMAN_PULL_NEVER;
}

int sp_podman_image_ensure(bool *out_pulled, sp_podman *p, const char *reference,
                           sp_podman_pull_policy policy, const sp_podman_pull_opts *opts,
                           sp_error **err)
{
    if (out_pulled)
        *out_pulled = false;
    if (SP_OPTS_CHECK(opts, 1, SP_PODMAN_PULL_OPTS_VERSION, "sp_podman_pull_opts", err) < 0)
        return SP_EINVAL;
    if (!reference || !*reference)
        return sp_err_set(err, SP_EINVAL, 0, "image reference is missing");
    if ((unsigned)policy > SP_PODMAN_PULL_NEVER)
        return sp_err_set(err, SP_EINVAL, 0, "unknown pull policy %d", (int)policy);
    policy = sp_podman_pull_policy_for(reference, policy);
    if (policy == SP_PODMAN_PULL_NEVER)
        return 0;
    if (policy == SP_PODMAN_PULL_MISSING) {
        bool exists = false;
        int r = sp_podman_image_exists(&exists, p, reference, err);
        if (r < 0 || exists)
            return r;
    }
    int r = sp_podman_image_pull_with(NULL, p, reference, opts, err);
    if (r == 0 && out_pulled)
        *out_pulled = true;
    return r;
}

void sp_podman_image_list_free(sp_podman_image_info *list, size_t n)
{
    for (size_t i = 0; list && i < n; i++) {
        free(list[i].id);
        sp_strv_free(list[i].names);
    }
    free(list);
}

static int newest_first(const void *a, const void *b)
{
    const sp_podman_image_info *x = a, *y = b;
    return (x->created < y->created) - (x->created > y->created);
}

int sp_podman_image_list(sp_podman_image_info **out, size_t *out_n, sp_podman *p, sp_error **err)
{
    *out = NULL;
    *out_n = 0;
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.path = SP_PODMAN_API "/images/json";
    cJSON *j = NULL;
    /* Podman 4.3 fails the whole list ("image not known", a 500 we read as
     * not found) when an image is removed while it lists: a list has
     * nothing to be missing, so it is asked again. */
    int r = SP_ENOTFOUND;
    for (int attempt = 0; attempt < 4 && r == SP_ENOTFOUND; attempt++) {
        sp_error *e = NULL;
        r = sp_podman_call_json(p, &req, &j, "list images", &e);
        if (r == SP_ENOTFOUND && attempt < 3) {
            sp_log(SP_LOG_DEBUG, "list images: %s; asking again", e ? e->message : "not found");
            sp_error_free(e);
            continue;
        }
        if (r < 0) {
            if (err)
                *err = e;
            else
                sp_error_free(e);
            return r;
        }
        sp_error_free(e);
    }
    if (!cJSON_IsArray(j)) {
        cJSON_Delete(j);
        return sp_err_set(err, SP_EPODMAN, 0, "list images: the answer is not a list");
    }
    size_t n = (size_t)cJSON_GetArraySize(j);
    sp_podman_image_info *v = sp_xcalloc(n ? n : 1, sizeof(*v));
    size_t k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, j)
    {
        const char *id = sp_json_str(it, "Id");
        if (!id)
            continue;
        if (strncmp(id, "sha256:", 7) == 0)
            id += 7;
        sp_strv names = {0};
        const cJSON *tags = sp_json_get(it, "RepoTags");
        const cJSON *t;
        cJSON_ArrayForEach(t, tags)
        {
            if (cJSON_IsString(t) && t->valuestring[0] && strcmp(t->valuestring, "<none>:<none>"))
                sp_strv_push(&names, sp_xstrdup(t->valuestring));
        }
        v[k].id = sp_xstrdup(id);
        v[k].names = sp_strv_steal(&names);
        v[k].created = sp_json_int(it, "Created", 0);
        v[k].size = sp_json_int(it, "Size", 0);
        k++;
    }
    cJSON_Delete(j);
    qsort(v, k, sizeof(*v), newest_first);
    *out = v;
    *out_n = k;
    return 0;
}

int sp_podman_image_import(char **out_id, sp_podman *p, int tar_fd, const char *tag,
                           const char *const *changes, sp_error **err)
{
    if (out_id)
        *out_id = NULL;
    if (!tag || !*tag)
        return sp_err_set(err, SP_EINVAL, 0, "import image: tag is missing");
    if (tar_fd < 0)
        return sp_err_set(err, SP_EINVAL, EBADF, "import image %s: bad fd", tag);
    sp_buf path = SP_BUF_INIT;
    cleanup_free char *t = sp_podman_escape(p, tag);
    sp_buf_printf(&path, SP_PODMAN_API "/images/import?reference=%s", t);
    for (size_t i = 0; changes && changes[i]; i++) {
        cleanup_free char *ch = sp_podman_escape(p, changes[i]);
        sp_buf_printf(&path, "&changes=%s", ch);
    }
    cleanup_free char *what = sp_xasprintf("import image %s", tag);
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.method = "POST";
    req.path = path.data;
    req.upload_fd = tar_fd;
    req.content_type = "application/x-tar";
    req.timeout_ms = (long)p->transfer_timeout_ms;
    cJSON *j = NULL;
    int r = sp_podman_call_json(p, &req, &j, what, err);
    if (r == 0) {
        const char *id = sp_json_str(j, "Id");
        if (!id || !*id)
            r = sp_err_set(err, SP_EPODMAN, 0, "%s: the answer has no image id", what);
        else if (out_id)
            *out_id = sp_xstrdup(id);
    }
    cJSON_Delete(j);
    sp_buf_dispose(&path);
    return r;
}

int sp_podman_image_import_path(char **out_id, sp_podman *p, const char *tar_path, const char *tag,
                                const char *const *changes, sp_error **err)
{
    if (out_id)
        *out_id = NULL;
    if (!tar_path)
        return sp_err_set(err, SP_EINVAL, 0, "import image: tarball path is missing");
    cleanup_close int fd = open(tar_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sp_err_errno(err, errno, "import image", tar_path);
    return sp_podman_image_import(out_id, p, fd, tag, changes, err);
}

int sp_podman_image_remove(sp_podman *p, const char *name, bool force, sp_error **err)
{
    if (!name || !*name)
        return sp_err_set(err, SP_EINVAL, 0, "remove image: name is missing");
    cleanup_free char *n = sp_podman_escape(p, name);
    cleanup_free char *path =
        sp_xasprintf(SP_PODMAN_API "/images/%s?force=%s", n, force ? "true" : "false");
    cleanup_free char *what = sp_xasprintf("remove image %s", name);
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.method = "DELETE";
    req.path = path;
    sp_http_resp resp = {0};
    int r = sp_podman_http(p, &req, &resp, what, err);
    sp_http_resp_dispose(&resp);
    return r;
}

/* -------------------------------------------------------- busybox image -- */

/* A busybox that needs a dynamic loader would not run in an image without
 * libc: refuse it up front rather than build a broken image. */
static int check_static_elf(const char *path, sp_error **err)
{
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return sp_err_set(err, SP_ENOTFOUND, ENOENT,
                              "busybox is missing at %s: apt-get install busybox-static", path);
        return sp_err_errno(err, errno, "open busybox", path);
    }
    Elf64_Ehdr eh;
    if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_phentsize != sizeof(Elf64_Phdr))
        return sp_err_set(err, SP_EINVAL, 0, "busybox at %s is not a 64-bit ELF binary", path);
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) != (ssize_t)sizeof(ph))
            return sp_err_set(err, SP_EINVAL, 0, "busybox at %s is a truncated ELF binary", path);
        if (ph.p_type == PT_INTERP)
            return sp_err_set(err, SP_EINVAL, 0,
                              "busybox at %s is dynamically linked: apt-get install busybox-static",
                              path);
    }
    return 0;
}

/* `busybox --list-full`: one applet path per line ("usr/bin/awk"). */
static int list_applets(sp_strv *out, const char *busybox, sp_error **err)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return sp_err_errno(err, errno, "list busybox applets", "pipe");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    char *argv[] = {(char *)busybox, (char *)"--list-full", NULL};
    pid_t pid;
    int sr = posix_spawn(&pid, busybox, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[1]);
    if (sr != 0) {
        close(pfd[0]);
        return sp_err_errno(err, sr, "run busybox", busybox);
    }
    sp_buf b = SP_BUF_INIT;
    int64_t deadline = sp_now_ms() + 10000;
    int r = 0;
    for (;;) {
        struct pollfd pl = {pfd[0], POLLIN, 0};
        int left = (int)(deadline - sp_now_ms());
        if (left <= 0 || poll(&pl, 1, left) == 0) {
            kill(pid, SIGKILL);
            r = sp_err_set(err, SP_ETIMEOUT, ETIMEDOUT, "busybox --list-full did not finish");
            break;
        }
        char tmp[4096];
        ssize_t n = read(pfd[0], tmp, sizeof(tmp));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (b.len + (size_t)n > (1u << 20)) {
            kill(pid, SIGKILL);
            r = sp_err_set(err, SP_ETOOBIG, 0, "busybox --list-full printed too much");
            break;
        }
        sp_buf_add(&b, tmp, (size_t)n);
    }
    close(pfd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (r == 0 && (!WIFEXITED(st) || WEXITSTATUS(st) != 0))
        r = sp_err_set(err, SP_EINVAL, 0, "%s --list-full failed (is it busybox?)", busybox);
    if (r == 0) {
        char *save = NULL;
        for (char *line = strtok_r(b.data ? b.data : (char *)"", "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
            while (*line == '/')
                line++;
            /* Applet paths are plain relative names; anything else is not
             * trusted into the image. */
            if (!*line || strstr(line, "..") || strcmp(line, "bin/busybox") == 0)
                continue;
            sp_strv_push(out, sp_xstrdup(line));
        }
        if (out->n == 0)
            r = sp_err_set(err, SP_EINVAL, 0, "%s --list-full listed no applets", busybox);
    }
    sp_buf_dispose(&b);
    return r;
}

typedef struct tarw {
    struct archive *a;
    struct archive_entry *e;
} tarw;

static int tar_entry(tarw *t, const char *path, mode_t type, unsigned mode, unsigned uid,
                     const void *data, size_t len, const char *link, sp_error **err)
{
    archive_entry_clear(t->e);
    archive_entry_set_pathname(t->e, path);
    archive_entry_set_filetype(t->e, type);
    archive_entry_set_perm(t->e, mode);
    archive_entry_set_uid(t->e, uid);
    archive_entry_set_gid(t->e, uid);
    archive_entry_set_mtime(t->e, 0, 0);
    if (link)
        archive_entry_set_symlink(t->e, link);
    archive_entry_set_size(t->e, type == AE_IFREG ? (la_int64_t)len : 0);
    if (archive_write_header(t->a, t->e) != ARCHIVE_OK)
        return sp_err_set(err, SP_ERROR, 0, "write image tarball: %s: %s", path,
                          archive_error_string(t->a));
    if (type == AE_IFREG && len && archive_write_data(t->a, data, len) != (la_ssize_t)len)
        return sp_err_set(err, SP_ERROR, 0, "write image tarball: %s: %s", path,
                          archive_error_string(t->a));
    return 0;
}

static int parent_dirs(tarw *t, sp_strv *made, const char *path, sp_error **err)
{
    cleanup_free char *p = sp_xstrdup(path);
    for (char *c = p; (c = strchr(c, '/')); c++) {
        *c = '\0';
        bool seen = false;
        for (size_t i = 0; i < made->n && !seen; i++)
            seen = strcmp(made->v[i], p) == 0;
        if (!seen) {
            int r = tar_entry(t, p, AE_IFDIR, 0755, 0, NULL, 0, NULL, err);
            if (r < 0)
                return r;
            sp_strv_push(made, sp_xstrdup(p));
        }
        *c = '/';
    }
    return 0;
}

static const char PASSWD[] = "root:x:0:0:root:/root:/bin/sh\n"
                             "sandbox:x:1000:1000:sandbox:/workspace:/bin/sh\n"
                             "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
static const char GROUP[] = "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n";
static const char NSSWITCH[] = "hosts: files dns\n";

/* Write the rootfs tarball to fd. */
static int write_rootfs(int fd, const char *busybox, const sp_strv *applets, sp_error **err)
{
    int r = sp_archive_load(err);
    if (r < 0)
        return r;
    cleanup_close int bfd = open(busybox, O_RDONLY | O_CLOEXEC);
    if (bfd < 0)
        return sp_err_errno(err, errno, "open busybox", busybox);
    struct stat st;
    if (fstat(bfd, &st) < 0)
        return sp_err_errno(err, errno, "stat busybox", busybox);
    if (st.st_size <= 0 || st.st_size > (64 << 20))
        return sp_err_set(err, SP_EINVAL, 0, "busybox at %s has an odd size", busybox);
    void *bin = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, bfd, 0);
    if (bin == MAP_FAILED)
        return sp_err_errno(err, errno, "map busybox", busybox);

    tarw t = {archive_write_new(), archive_entry_new()};
    sp_strv made = {0};
    r = 0;
    archive_write_set_format_pax_restricted(t.a);
    if (archive_write_open_fd(t.a, fd) != ARCHIVE_OK) {
        r = sp_err_set(err, SP_ERROR, 0, "write image tarball: %s", archive_error_string(t.a));
        goto done;
    }
    static const struct {
        const char *path;
        unsigned mode;
        unsigned uid;
    } dirs[] = {{"bin", 0755, 0},      {"sbin", 0755, 0},     {"usr", 0755, 0},
                {"usr/bin", 0755, 0},  {"usr/sbin", 0755, 0}, {"etc", 0755, 0},
                {"root", 0700, 0},     {"tmp", 01777, 0},     {"var", 0755, 0},
                {"var/tmp", 01777, 0}, {"proc", 0555, 0},     {"sys", 0555, 0},
                {"dev", 0755, 0},      {"run", 0755, 0},      {"workspace", 0755, 1000}};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]) && r == 0; i++) {
        r = tar_entry(&t, dirs[i].path, AE_IFDIR, dirs[i].mode, dirs[i].uid, NULL, 0, NULL, err);
        sp_strv_push(&made, sp_xstrdup(dirs[i].path));
    }
    if (r == 0)
        r = tar_entry(&t, "bin/busybox", AE_IFREG, 0755, 0, bin, (size_t)st.st_size, NULL, err);
    for (size_t i = 0; i < applets->n && r == 0; i++) {
        r = parent_dirs(&t, &made, applets->v[i], err);
        if (r == 0)
            r = tar_entry(&t, applets->v[i], AE_IFLNK, 0777, 0, NULL, 0, "/bin/busybox", err);
    }
    if (r == 0)
        r = tar_entry(&t, "etc/passwd", AE_IFREG, 0644, 0, PASSWD, sizeof(PASSWD) - 1, NULL, err);
    if (r == 0)
        r = tar_entry(&t, "etc/group", AE_IFREG, 0644, 0, GROUP, sizeof(GROUP) - 1, NULL, err);
    if (r == 0)
        r = tar_entry(&t, "etc/nsswitch.conf", AE_IFREG, 0644, 0, NSSWITCH, sizeof(NSSWITCH) - 1,
                      NULL, err);
    if (r == 0)
        r = tar_entry(&t, "etc/hosts", AE_IFREG, 0644, 0, "", 0, NULL, err);
    if (r == 0)
        r = tar_entry(&t, "etc/resolv.conf", AE_IFREG, 0644, 0, "", 0, NULL, err);
    if (r == 0 && archive_write_close(t.a) != ARCHIVE_OK)
        r = sp_err_set(err, SP_ERROR, 0, "write image tarball: %s", archive_error_string(t.a));
done:
    archive_entry_free(t.e);
    archive_write_free(t.a);
    sp_strv_dispose(&made);
    munmap(bin, (size_t)st.st_size);
    return r;
}

int sp_podman_image_build_busybox(char **out_id, sp_podman *p, const char *tag, const char *busybox,
                                  bool force, sp_error **err)
{
    if (out_id)
        *out_id = NULL;
    if (!tag)
        tag = SP_PODMAN_DEFAULT_IMAGE;
    if (!busybox)
        busybox = "/bin/busybox";
    if (!force) {
        bool exists = false;
        int r = sp_podman_image_exists(&exists, p, tag, err);
        if (r < 0)
            return r;
        if (exists) {
            if (out_id)
                *out_id = sp_xstrdup(tag);
            return 0;
        }
    }
    int r = check_static_elf(busybox, err);
    if (r < 0)
        return r;
    sp_strv applets = {0};
    r = list_applets(&applets, busybox, err);
    if (r < 0) {
        sp_strv_dispose(&applets);
        return r;
    }
    cleanup_close int fd = memfd_create("sandpod-rootfs", MFD_CLOEXEC);
    if (fd < 0) {
        sp_strv_dispose(&applets);
        return sp_err_errno(err, errno, "build image", "memfd_create");
    }
    r = write_rootfs(fd, busybox, &applets, err);
    sp_strv_dispose(&applets);
    if (r < 0)
        return sp_err_wrap(err, r, "build image %s", tag);
    if (lseek(fd, 0, SEEK_SET) < 0)
        return sp_err_errno(err, errno, "build image", "lseek");
    const char *changes[] = {"CMD [\"/bin/sh\"]", "ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                             "WORKDIR /workspace", NULL};
    return sp_podman_image_import(out_id, p, fd, tag, changes, err);
}
