/* Engines: STATE_ROOT/engines.json (see sandpod/engine.h).
 *
 * The file is read whole and checked whole: a malformed file is an error
 * naming the file and the field, and is never rewritten (a change refuses
 * to touch it). A change takes an flock on engines.lock beside it, reads,
 * edits the parsed tree in place (so keys this version does not know, of
 * the file or of an engine, survive) and replaces the file atomically
 * (temp file 0600, fsync, rename). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "sandbox_internal.h"
#include "sandpod/engine.h"
#include "sandpod/hydrate.h"

#define ENGINES_FILE  "engines.json"
#define ENGINES_LOCK  "engines.lock"
#define ENGINES_LIMIT (1 << 20)

static const char *const kind_names[] = {"podman", "kubernetes"};

const sp_local_ops *sp_local_engine(void)
{
    return &sp_podman_local_ops;
}

const char *sp_engine_kind_name(sp_engine_kind k)
{
    return (unsigned)k < 2 ? kind_names[k] : "unknown";
}

int sp_engine_kind_parse(sp_engine_kind *out, const char *s, sp_error **err)
{
    for (unsigned k = 0; k < 2; k++)
        if (s && strcmp(s, kind_names[k]) == 0) {
            *out = (sp_engine_kind)k;
            return 0;
        }
    return sp_err_set(err, SP_EINVAL, 0, "unknown engine kind '%s' (podman or kubernetes)",
                      s ? s : "");
}

void sp_engine_free(sp_engine *e)
{
    if (!e)
        return;
    free(e->name);
    free(e->podman_url);
    free(e->kubeconfig);
    free(e->context);
    free(e->kubectl);
    free(e->server);
    free(e->token_file);
    free(e->ca_file);
    free(e->ns);
    free(e->image);
    free(e->runtime_class);
    free(e->seccomp_profile);
    free(e->accept);
    free(e);
}

/* The string fields of an engine, by their key in the file. */
struct field {
    const char *key;
    size_t off;
    bool kube; /* a kubernetes field (else podman) */
};
#define F(key, member, kube)                                                                       \
    {                                                                                              \
        key, offsetof(sp_engine, member), kube                                                     \
    }
static const struct field fields[] = {
    F("url", podman_url, false),
    F("kubeconfig", kubeconfig, true),
    F("context", context, true),
    F("kubectl", kubectl, true),
    F("server", server, true),
    F("token_file", token_file, true),
    F("ca_file", ca_file, true),
    F("namespace", ns, true),
    F("image", image, true),
    F("runtime_class", runtime_class, true),
    F("seccomp_profile", seccomp_profile, true),
    F("accept", accept, true),
};
#undef F
#define N_FIELDS (sizeof(fields) / sizeof(fields[0]))

static char **field_ptr(sp_engine *e, const struct field *f)
{
    return (char **)(void *)((char *)e + f->off);
}
static const char *field_get(const sp_engine *e, const struct field *f)
{
    return *(char *const *)(const void *)((const char *)e + f->off);
}

static bool engine_name_valid(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 63 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    return true;
}

/* RFC 1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63. */
static bool dns_label(const char *s)
{
    size_t n = strlen(s);
    return engine_name_valid(s) && s[n - 1] != '-';
}

static bool http_url(const char *s)
{
    const char *rest = strncmp(s, "https://", 8) == 0  ? s + 8
                       : strncmp(s, "http://", 7) == 0 ? s + 7
                                                       : NULL;
    if (!rest || !*rest || *rest == '/')
        return false;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return false;
    return true;
}

/* `where` is "FILE: engines.NAME" or "engine NAME": the prefix of a
 * message about one field. */
static int check_engine(const sp_engine *e, const char *where, sp_error **err)
{
    for (size_t i = 0; i < N_FIELDS; i++) {
        const char *v = field_get(e, &fields[i]);
        if (!v)
            continue;
        if (fields[i].kube != (e->kind == SP_ENGINE_KUBERNETES))
            return sp_err_set(err, SP_EINVAL, 0, "%s.%s: not a field of a %s engine", where,
                              fields[i].key, sp_engine_kind_name(e->kind));
        if (!*v || !sp_utf8_valid(v, strlen(v)))
            return sp_err_set(err, SP_EINVAL, 0, "%s.%s: empty or not UTF-8", where, fields[i].key);
    }
    if (e->ns && !dns_label(e->ns))
        return sp_err_set(err, SP_EINVAL, 0,
                          "%s.namespace: '%s' is not a DNS label (a-z, 0-9, '-', at most 63, "
                          "starting and ending with a letter or digit)",
                          where, e->ns);
    if (e->server && !http_url(e->server))
        return sp_err_set(err, SP_EINVAL, 0, "%s.server: '%s' is not an http:// or https:// URL",
                          where, e->server);
    if (e->podman_url && !http_url(e->podman_url) && strncmp(e->podman_url, "unix://", 7) != 0)
        return sp_err_set(err, SP_EINVAL, 0, "%s.url: '%s' is not a unix:// or http(s):// URL",
                          where, e->podman_url);
    if (e->seccomp_profile &&
        (e->seccomp_profile[0] == '/' || strstr(e->seccomp_profile, "..") ||
         strspn(e->seccomp_profile, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                    "0123456789._-/") != strlen(e->seccomp_profile)))
        return sp_err_set(err, SP_EINVAL, 0,
                          "%s.seccomp_profile: '%s' is not a path relative to the kubelet's "
                          "seccomp folder",
                          where, e->seccomp_profile);
    if (e->accept) {
        cleanup_free char *copy = sp_xstrdup(e->accept);
        char *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
            if (strcmp(t, "userns") != 0 && strcmp(t, "seccomp") != 0 && strcmp(t, "netpol") != 0)
                return sp_err_set(err, SP_EINVAL, 0,
                                  "%s.accept: '%s' is not a protection a Pod may lack (userns, "
                                  "seccomp, netpol)",
                                  where, t);
    }
    if ((e->token_file || e->ca_file) && !e->server)
        return sp_err_set(err, SP_EINVAL, 0, "%s.%s: takes a server", where,
                          e->token_file ? "token_file" : "ca_file");
    return 0;
}

/* The engine `name` from its object in the file. */
static int engine_from_json(sp_engine **out, const char *name, const cJSON *o, const char *path,
                            sp_error **err)
{
    *out = NULL;
    if (!engine_name_valid(name))
        return sp_err_set(err, SP_EINVAL, 0,
                          "%s: engines.%s: invalid engine name ([a-z0-9][a-z0-9-]*, at most 63)",
                          path, name);
    if (strcmp(name, SP_ENGINE_LOCAL) == 0)
        return sp_err_set(err, SP_EINVAL, 0,
                          "%s: engines.local: \"local\" is built in and cannot be redefined", path);
    if (!cJSON_IsObject(o))
        return sp_err_set(err, SP_EINVAL, 0, "%s: engines.%s: not an object", path, name);
    cleanup_free char *where = sp_xasprintf("%s: engines.%s", path, name);
    const cJSON *kind = sp_json_get(o, "kind");
    if (!cJSON_IsString(kind))
        return sp_err_set(err, SP_EINVAL, 0, "%s.kind: missing or not a string", where);
    sp_engine *e = sp_xcalloc(1, sizeof(*e));
    e->name = sp_xstrdup(name);
    int r = sp_engine_kind_parse(&e->kind, kind->valuestring, err);
    if (r < 0) {
        sp_engine_free(e);
        return sp_err_wrap(err, r, "%s.kind", where);
    }
    for (size_t i = 0; i < N_FIELDS; i++) {
        const cJSON *v = sp_json_get(o, fields[i].key);
        if (!v || cJSON_IsNull(v))
            continue;
        if (!cJSON_IsString(v)) {
            sp_engine_free(e);
            return sp_err_set(err, SP_EINVAL, 0, "%s.%s: not a string", where, fields[i].key);
        }
        *field_ptr(e, &fields[i]) = sp_xstrdup(v->valuestring);
    }
    const cJSON *ttl = sp_json_get(o, "ttl");
    if (ttl && !cJSON_IsNull(ttl)) {
        double d = cJSON_IsNumber(ttl) ? ttl->valuedouble : 0.5;
        if (!cJSON_IsNumber(ttl) || d != (double)(int64_t)d || d < -1e15 || d > 1e15) {
            sp_engine_free(e);
            return sp_err_set(err, SP_EINVAL, 0, "%s.ttl: not an integer (seconds)", where);
        }
        e->ttl_seconds = (int64_t)d;
    }
    if (e->kind == SP_ENGINE_KUBERNETES || e->kind == SP_ENGINE_PODMAN)
        r = check_engine(e, where, err);
    if (r < 0) {
        sp_engine_free(e);
        return r;
    }
    *out = e;
    return 0;
}

/* The file's parsed and checked content; a missing file is an empty
 * object. */
static int load(cJSON **out, const char *path, sp_error **err)
{
    *out = NULL;
    cleanup_close int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) {
            sp_json_init();
            *out = cJSON_CreateObject();
            return 0;
        }
        return sp_err_errno(err, errno, "open", path);
    }
    sp_buf b = SP_BUF_INIT;
    if (sp_read_all(fd, &b, ENGINES_LIMIT) < 0) {
        int e = errno;
        sp_buf_dispose(&b);
        return e == EFBIG ? sp_err_set(err, SP_ETOOBIG, 0, "%s: larger than 1 MiB", path)
                          : sp_err_errno(err, e, "read", path);
    }
    cJSON *doc = sp_json_parse(b.data ? b.data : "", b.len);
    sp_buf_dispose(&b);
    if (!cJSON_IsObject(doc)) {
        cJSON_Delete(doc);
        return sp_err_set(err, SP_EINVAL, 0, "%s: not a JSON object", path);
    }
    const cJSON *def = sp_json_get(doc, "default");
    const cJSON *engines = sp_json_get(doc, "engines");
    int r = 0;
    if (def && !cJSON_IsString(def))
        r = sp_err_set(err, SP_EINVAL, 0, "%s: default: not a string", path);
    else if (engines && !cJSON_IsObject(engines))
        r = sp_err_set(err, SP_EINVAL, 0, "%s: engines: not an object", path);
    for (const cJSON *it = engines ? engines->child : NULL; it && r == 0; it = it->next) {
        sp_engine *e = NULL;
        r = engine_from_json(&e, it->string, it, path, err);
        sp_engine_free(e);
    }
    if (r == 0 && def && strcmp(def->valuestring, SP_ENGINE_LOCAL) != 0 &&
        !cJSON_GetObjectItemCaseSensitive(engines, def->valuestring))
        r = sp_err_set(err, SP_EINVAL, 0, "%s: default: no engine named '%s'", path,
                       def->valuestring);
    if (r < 0) {
        cJSON_Delete(doc);
        return r;
    }
    *out = doc;
    return 0;
}

static sp_engine *local_engine(void)
{
    sp_engine *e = sp_xcalloc(1, sizeof(*e));
    e->name = sp_xstrdup(SP_ENGINE_LOCAL);
    e->kind = SP_ENGINE_PODMAN;
    return e;
}

static int file_path(char **out, const char *state_root, const char *leaf, sp_error **err)
{
    cleanup_free char *root = NULL;
    int r = sp_sandbox_resolve_root(&root, state_root, err);
    if (r < 0)
        return r;
    *out = sp_xasprintf("%s/%s", root, leaf);
    return 0;
}

/* Read the file without a lock (a rename is atomic, readers see one
 * version or the other). */
static int read_doc(cJSON **doc, char **path, const char *state_root, sp_error **err)
{
    *doc = NULL;
    int r = file_path(path, state_root, ENGINES_FILE, err);
    return r < 0 ? r : load(doc, *path, err);
}

/* "local, a, b": the names there are. */
static char *names_of(const cJSON *doc)
{
    sp_buf b = SP_BUF_INIT;
    sp_buf_adds(&b, SP_ENGINE_LOCAL);
    const cJSON *engines = sp_json_get(doc, "engines");
    for (const cJSON *it = engines ? engines->child : NULL; it; it = it->next)
        sp_buf_printf(&b, ", %s", it->string);
    return sp_buf_steal(&b);
}

int sp_engine_get(sp_engine **out, const char *state_root, const char *name, sp_error **err)
{
    *out = NULL;
    cJSON *doc = NULL;
    cleanup_free char *path = NULL;
    int r = read_doc(&doc, &path, state_root, err);
    if (r < 0)
        return r;
    const char *from = NULL;
    if (!name || !*name) {
        const char *env = getenv("SANDPOD_ENGINE");
        if (env && *env) {
            name = env;
            from = "$SANDPOD_ENGINE";
        } else {
            name = sp_json_str_or(doc, "default", SP_ENGINE_LOCAL);
        }
    }
    if (strcmp(name, SP_ENGINE_LOCAL) == 0) {
        cJSON_Delete(doc);
        *out = local_engine();
        return 0;
    }
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(sp_json_get(doc, "engines"), name);
    if (!o) {
        cleanup_free char *names = names_of(doc);
        cJSON_Delete(doc);
        return sp_err_set(err, SP_ENOTFOUND, 0, "no engine named '%s'%s%s (engines: %s)", name,
                          from ? " in " : "", from ? from : "", names);
    }
    r = engine_from_json(out, name, o, path, err);
    cJSON_Delete(doc);
    return r;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp((*(sp_engine *const *)a)->name, (*(sp_engine *const *)b)->name);
}

int sp_engine_list(sp_engine ***out, char **default_name, const char *state_root, sp_error **err)
{
    *out = NULL;
    if (default_name)
        *default_name = NULL;
    cJSON *doc = NULL;
    cleanup_free char *path = NULL;
    int r = read_doc(&doc, &path, state_root, err);
    if (r < 0)
        return r;
    const cJSON *engines = sp_json_get(doc, "engines");
    size_t n = (size_t)cJSON_GetArraySize(engines);
    sp_engine **v = sp_xcalloc(n + 2, sizeof(*v));
    v[0] = local_engine();
    size_t k = 1;
    for (const cJSON *it = engines ? engines->child : NULL; it; it = it->next) {
        /* load() checked every one already. */
        if (engine_from_json(&v[k], it->string, it, path, NULL) == 0)
            k++;
    }
    qsort(v + 1, k - 1, sizeof(*v), cmp_names);
    if (default_name) {
        const char *env = getenv("SANDPOD_ENGINE");
        *default_name = sp_xstrdup(env && *env ? env : sp_json_str_or(doc, "default", "local"));
    }
    cJSON_Delete(doc);
    *out = v;
    return 0;
}

/* A change: lock, load, edit(), write. */
typedef int (*edit_fn)(cJSON *doc, const char *path, const void *arg, sp_error **err);

static int change(const char *state_root, edit_fn edit, const void *arg, sp_error **err)
{
    cleanup_free char *root = NULL;
    int r = sp_sandbox_resolve_root(&root, state_root, err);
    if (r < 0 || (r = sp_state_root_check(root, true, err)) < 0)
        return r;
    cleanup_free char *path = sp_xasprintf("%s/" ENGINES_FILE, root);
    cleanup_free char *lock = sp_xasprintf("%s/" ENGINES_LOCK, root);
    cleanup_close int lfd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (lfd < 0)
        return sp_err_errno(err, errno, "open", lock);
    while (flock(lfd, LOCK_EX) < 0)
        if (errno != EINTR)
            return sp_err_errno(err, errno, "flock", lock);
    cJSON *doc = NULL;
    if ((r = load(&doc, path, err)) < 0)
        return sp_err_wrap(err, r, "engines not changed");
    if ((r = edit(doc, path, arg, err)) == 0) {
        char *text = cJSON_Print(doc);
        if (!text)
            r = sp_err_set(err, SP_ERROR, 0, "%s: cannot serialize", path);
        else {
            size_t len = strlen(text);
            char *nl = sp_xasprintf("%s\n", text);
            r = sp_write_file_atomic(path, nl, len + 1, 0600, err);
            free(nl);
            cJSON_free(text);
        }
    }
    cJSON_Delete(doc);
    return r; /* closing lfd releases the lock */
}

static cJSON *engines_obj(cJSON *doc)
{
    cJSON *engines = cJSON_GetObjectItemCaseSensitive(doc, "engines");
    if (!engines) {
        engines = cJSON_CreateObject();
        cJSON_AddItemToObject(doc, "engines", engines);
    }
    return engines;
}

struct add_arg {
    const sp_engine *e;
    bool replace;
};

static int edit_add(cJSON *doc, const char *path, const void *arg, sp_error **err)
{
    (void)path;
    const struct add_arg *a = arg;
    const sp_engine *e = a->e;
    cJSON *engines = engines_obj(doc);
    cJSON *o = cJSON_GetObjectItemCaseSensitive(engines, e->name);
    if (o && !a->replace)
        return sp_err_set(err, SP_EEXISTS, 0, "engine %s exists (--replace redefines it)", e->name);
    if (!o) {
        o = cJSON_CreateObject();
        cJSON_AddItemToObject(engines, e->name, o);
    }
    /* Known keys are set or removed; unknown ones stay. */
    cJSON_DeleteItemFromObjectCaseSensitive(o, "kind");
    cJSON_AddStringToObject(o, "kind", sp_engine_kind_name(e->kind));
    for (size_t i = 0; i < N_FIELDS; i++) {
        cJSON_DeleteItemFromObjectCaseSensitive(o, fields[i].key);
        const char *v = field_get(e, &fields[i]);
        if (v)
            cJSON_AddStringToObject(o, fields[i].key, v);
    }
    cJSON_DeleteItemFromObjectCaseSensitive(o, "ttl");
    if (e->ttl_seconds)
        cJSON_AddNumberToObject(o, "ttl", (double)e->ttl_seconds);
    return 0;
}

static int check_name(const char *name, const char *what, sp_error **err)
{
    if (name && strcmp(name, SP_ENGINE_LOCAL) == 0)
        return sp_err_set(err, SP_EINVAL, 0, "engine \"local\" is built in and cannot be %s", what);
    if (!engine_name_valid(name))
        return sp_err_set(err, SP_EINVAL, 0,
                          "invalid engine name '%s' ([a-z0-9][a-z0-9-]*, at most 63)",
                          name ? name : "");
    return 0;
}

int sp_engine_add(const char *state_root, const sp_engine *e, bool replace, sp_error **err)
{
    if (!e)
        return sp_err_set(err, SP_EINVAL, 0, "no engine");
    int r = check_name(e->name, replace ? "redefined" : "added", err);
    if (r < 0)
        return r;
    if ((unsigned)e->kind > SP_ENGINE_KUBERNETES)
        return sp_err_set(err, SP_EINVAL, 0, "engine %s: unknown kind %d", e->name, (int)e->kind);
    cleanup_free char *where = sp_xasprintf("engine %s", e->name);
    if ((r = check_engine(e, where, err)) < 0)
        return r;
    struct add_arg a = {e, replace};
    return change(state_root, edit_add, &a, err);
}

static int edit_remove(cJSON *doc, const char *path, const void *arg, sp_error **err)
{
    (void)path;
    const char *name = arg;
    cJSON *engines = cJSON_GetObjectItemCaseSensitive(doc, "engines");
    if (!cJSON_GetObjectItemCaseSensitive(engines, name)) {
        cleanup_free char *names = names_of(doc);
        return sp_err_set(err, SP_ENOTFOUND, 0, "no engine named '%s' (engines: %s)", name, names);
    }
    cJSON_DeleteItemFromObjectCaseSensitive(engines, name);
    /* The default goes back to "local" with the engine it named. */
    if (strcmp(sp_json_str_or(doc, "default", ""), name) == 0)
        cJSON_DeleteItemFromObjectCaseSensitive(doc, "default");
    return 0;
}

int sp_engine_remove(const char *state_root, const char *name, sp_error **err)
{
    int r = check_name(name, "removed", err);
    return r < 0 ? r : change(state_root, edit_remove, name, err);
}

static int edit_default(cJSON *doc, const char *path, const void *arg, sp_error **err)
{
    (void)path;
    const char *name = arg;
    if (strcmp(name, SP_ENGINE_LOCAL) != 0 &&
        !cJSON_GetObjectItemCaseSensitive(sp_json_get(doc, "engines"), name)) {
        cleanup_free char *names = names_of(doc);
        return sp_err_set(err, SP_ENOTFOUND, 0, "no engine named '%s' (engines: %s)", name, names);
    }
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "default");
    cJSON_AddStringToObject(doc, "default", name);
    return 0;
}

int sp_engine_set_default(const char *state_root, const char *name, sp_error **err)
{
    if (!name || (strcmp(name, SP_ENGINE_LOCAL) != 0 && !engine_name_valid(name)))
        return check_name(name, "", err);
    return change(state_root, edit_default, name, err);
}
