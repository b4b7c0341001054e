/* Container lifecycle: create (from a hardened-by-default spec), start,
 * stop, kill, pause, wait, inspect, list, delete, resize, and the archive
 * endpoints that copy tar streams in and out. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>

#include "podman_internal.h"

#define DEFAULT_NOFILE 1024u
#define DEFAULT_NPROC  4096u

/* ---------------------------------------------------------------- create -- */

static int add_kv_map(cJSON *j, const char *key, const char *const *kv, bool need_eq,
                      const char *what, sp_error **err)
{
    if (!kv)
        return 0;
    cJSON *m = cJSON_AddObjectToObject(j, key);
    for (size_t i = 0; kv[i]; i++) {
        const char *eq = strchr(kv[i], '=');
        if ((!eq && need_eq) || eq == kv[i])
            return sp_err_set(err, SP_EINVAL, 0, "%s must be KEY=VALUE: %s", what, kv[i]);
        cleanup_free char *k = eq ? sp_xstrndup(kv[i], (size_t)(eq - kv[i])) : sp_xstrdup(kv[i]);
        cJSON_DeleteItemFromObjectCaseSensitive(m, k);
        cJSON_AddStringToObject(m, k, eq ? eq + 1 : "");
    }
    return 0;
}

/* The host's own hard limit bounds what the container may ask for: runc
 * fails to start a container whose rlimits exceed it. */
static uint64_t capped(int resource, uint64_t want)
{
    struct rlimit rl;
    if (getrlimit(resource, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want)
        return rl.rlim_max;
    return want;
}

static void add_rlimit(cJSON *a, const char *type, uint64_t soft, uint64_t hard)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    cJSON_AddNumberToObject(o, "soft", (double)soft);
    cJSON_AddNumberToObject(o, "hard", (double)hard);
    cJSON_AddItemToArray(a, o);
}

/* The user namespace: rootful services allocate a range of their own
 * (containers/storage's "auto", from the `containers` entries of
 * /etc/subuid and /etc/subgid), rootless ones keep the caller's id as the
 * container user's. */
static void add_userns(cJSON *j, const sp_podman_container_spec *s, bool rootless)
{
    if (s->userns == SP_PODMAN_USERNS_HOST) {
        cJSON_AddStringToObject(cJSON_AddObjectToObject(j, "userns"), "nsmode", "host");
        return;
    }
    cJSON *ns = cJSON_AddObjectToObject(j, "userns");
    if (rootless) {
        /* Container root is the caller already in a rootless service's own
         * namespace; keep-id with uid=0 makes runc fail. */
        if (s->user && (strcmp(s->user, "0") == 0 || strncmp(s->user, "0:", 2) == 0)) {
            cJSON_DeleteItemFromObjectCaseSensitive(j, "userns");
            return;
        }
        cJSON_AddStringToObject(ns, "nsmode", "keep-id");
        unsigned long uid = 0, gid = 0;
        char *end = NULL;
        if (s->user) {
            uid = gid = strtoul(s->user, &end, 10);
            if (end != s->user && *end == ':')
                gid = strtoul(end + 1, &end, 10);
        }
        if (s->user && end && end != s->user && *end == '\0') {
            char v[64];
            snprintf(v, sizeof(v), "uid=%lu,gid=%lu", uid, gid);
            cJSON_AddStringToObject(ns, "value", v);
        }
        return;
    }
    cJSON_AddStringToObject(ns, "nsmode", "auto");
    /* Podman 4.3 takes "auto" from the id mappings, not from userns. */
    cJSON *m = cJSON_AddObjectToObject(j, "idmappings");
    cJSON_AddBoolToObject(m, "AutoUserNs", true);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(m, "AutoUserNsOpts"), "Size",
                            s->userns_size ? s->userns_size : 65536);
}

static int spec_json(char **out, const sp_podman_container_spec *s, bool rootless,
                     const char *seccomp_path, sp_error **err)
{
    *out = NULL;
    if (!s->image || !*s->image)
        return sp_err_set(err, SP_EINVAL, 0, "create container: image is missing");
    cJSON *j = cJSON_CreateObject();
    int r = 0;
    if (s->name)
        cJSON_AddStringToObject(j, "name", s->name);
    cJSON_AddStringToObject(j, "image", s->image);
    /* An argv is run as given: its first word replaces the image's
     * ENTRYPOINT, which Podman would otherwise run with the argv as its
     * arguments (an image's entrypoint in place of sandpod's init). */
    if (s->command && s->command[0]) {
        const char *entry[] = {s->command[0], NULL};
        cJSON_AddItemToObject(j, "entrypoint", sp_json_strv(entry));
        if (s->command[1])
            cJSON_AddItemToObject(j, "command", sp_json_strv(s->command + 1));
    }
    if ((r = add_kv_map(j, "env", s->env, true, "env", err)) < 0)
        goto done;
    if ((r = add_kv_map(j, "labels", s->labels, false, "label", err)) < 0)
        goto done;
    if (s->workdir)
        cJSON_AddStringToObject(j, "work_dir", s->workdir);
    if (s->user)
        cJSON_AddStringToObject(j, "user", s->user);

    cJSON *mounts = cJSON_AddArrayToObject(j, "mounts");
    for (size_t i = 0; i < s->n_mounts; i++) {
        const sp_podman_mount *m = &s->mounts[i];
        if (!m->source || m->source[0] != '/' || !m->destination || m->destination[0] != '/') {
            r = sp_err_set(err, SP_EINVAL, 0, "bind mount needs absolute paths: %s -> %s",
                           m->source ? m->source : "(none)",
                           m->destination ? m->destination : "(none)");
            goto done;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "destination", m->destination);
        cJSON_AddStringToObject(o, "type", "bind");
        cJSON_AddStringToObject(o, "source", m->source);
        const char *opts[] = {"rbind", m->read_only ? "ro" : "rw", "nosuid", "nodev", NULL};
        cJSON_AddItemToObject(o, "options", sp_json_strv(opts));
        cJSON_AddItemToArray(mounts, o);
    }
    for (size_t i = 0; i < s->n_tmpfs; i++) {
        const sp_podman_tmpfs *t = &s->tmpfs[i];
        if (!t->destination || t->destination[0] != '/') {
            r = sp_err_set(err, SP_EINVAL, 0, "tmpfs mount needs an absolute path: %s",
                           t->destination ? t->destination : "(none)");
            goto done;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "destination", t->destination);
        cJSON_AddStringToObject(o, "type", "tmpfs");
        cJSON_AddStringToObject(o, "source", "tmpfs");
        cJSON *opts = cJSON_AddArrayToObject(o, "options");
        char tmp[64];
        if (t->size_bytes) {
            snprintf(tmp, sizeof(tmp), "size=%llu", (unsigned long long)t->size_bytes);
            cJSON_AddItemToArray(opts, cJSON_CreateString(tmp));
        }
        snprintf(tmp, sizeof(tmp), "mode=%o", t->mode ? t->mode : 01777);
        cJSON_AddItemToArray(opts, cJSON_CreateString(tmp));
        cJSON_AddItemToArray(opts, cJSON_CreateString("rw"));
        cJSON_AddItemToArray(opts, cJSON_CreateString("nosuid"));
        cJSON_AddItemToArray(opts, cJSON_CreateString("nodev"));
        if (t->noexec)
            cJSON_AddItemToArray(opts, cJSON_CreateString("noexec"));
        cJSON_AddItemToArray(mounts, o);
    }

    switch (s->network) {
    case SP_PODMAN_NET_NONE:
        cJSON_AddStringToObject(cJSON_AddObjectToObject(j, "netns"), "nsmode", "none");
        break;
    case SP_PODMAN_NET_HOST:
        cJSON_AddStringToObject(cJSON_AddObjectToObject(j, "netns"), "nsmode", "host");
        break;
    case SP_PODMAN_NET_DEFAULT:
        break; /* Podman picks bridge (rootful) or slirp4netns (rootless) */
    default:
        r = sp_err_set(err, SP_EINVAL, 0, "unknown network mode %d", (int)s->network);
        goto done;
    }

    if (s->memory_bytes || s->pids_limit || s->nano_cpus) {
        cJSON *rl = cJSON_AddObjectToObject(j, "resource_limits");
        if (s->memory_bytes)
            cJSON_AddNumberToObject(cJSON_AddObjectToObject(rl, "memory"), "limit",
                                    (double)s->memory_bytes);
        if (s->pids_limit)
            cJSON_AddNumberToObject(cJSON_AddObjectToObject(rl, "pids"), "limit",
                                    (double)s->pids_limit);
        if (s->nano_cpus) {
            const uint64_t period = 100000;        /* µs */
            uint64_t quota = s->nano_cpus / 10000; /* nano_cpus * period / 1e9 */
            if (quota < 1000)
                quota = 1000; /* the kernel's minimum is 1ms */
            cJSON *cpu = cJSON_AddObjectToObject(rl, "cpu");
            cJSON_AddNumberToObject(cpu, "quota", (double)quota);
            cJSON_AddNumberToObject(cpu, "period", (double)period);
        }
    }

    cJSON_AddBoolToObject(j, "read_only_filesystem", !s->writable_rootfs);
    if (!s->keep_default_caps) {
        const char *all[] = {"ALL", NULL};
        cJSON_AddItemToObject(j, "cap_drop", sp_json_strv(all));
    }
    if (s->cap_add && s->cap_add[0])
        cJSON_AddItemToObject(j, "cap_add", sp_json_strv(s->cap_add));
    cJSON_AddBoolToObject(j, "no_new_privileges", !s->allow_new_privileges);
    add_userns(j, s, rootless);
    if (s->seccomp == SP_PODMAN_SECCOMP_UNCONFINED)
        cJSON_AddStringToObject(j, "seccomp_profile_path", "unconfined");
    else if (seccomp_path)
        cJSON_AddStringToObject(j, "seccomp_profile_path", seccomp_path);
    if (s->init)
        cJSON_AddBoolToObject(j, "init", true);
    if (s->stop_timeout_s)
        cJSON_AddNumberToObject(j, "stop_timeout", s->stop_timeout_s);

    cJSON *rls = cJSON_AddArrayToObject(j, "r_limits");
    bool has_nofile = false, has_nproc = false;
    for (size_t i = 0; i < s->n_rlimits; i++) {
        const sp_podman_rlimit *l = &s->rlimits[i];
        const char *t = l->type;
        if (!t || !*t || l->soft > l->hard) {
            r = sp_err_set(err, SP_EINVAL, 0, "bad rlimit %s (soft %llu, hard %llu)",
                           t ? t : "(none)", (unsigned long long)l->soft,
                           (unsigned long long)l->hard);
            goto done;
        }
        if (strncasecmp(t, "RLIMIT_", 7) == 0)
            t += 7; /* Podman adds the prefix itself */
        cleanup_free char *lower = sp_xstrdup(t);
        for (char *c = lower; *c; c++)
            if (*c >= 'A' && *c <= 'Z')
                *c = (char)(*c - 'A' + 'a');
        has_nofile |= strcmp(lower, "nofile") == 0;
        has_nproc |= strcmp(lower, "nproc") == 0;
        add_rlimit(rls, lower, l->soft, l->hard);
    }
    /* Podman's defaults (1048576) exceed what runc may set on many hosts. */
    if (!has_nofile) {
        uint64_t n = capped(RLIMIT_NOFILE, DEFAULT_NOFILE);
        add_rlimit(rls, "nofile", n, n);
    }
    if (!has_nproc) {
        uint64_t n = capped(RLIMIT_NPROC, DEFAULT_NPROC);
        add_rlimit(rls, "nproc", n, n);
    }
    *out = cJSON_PrintUnformatted(j);
done:
    cJSON_Delete(j);
    return r;
}

/* ---------------------------------------------------------------- seccomp -- */

#define CLONE_NEWUSER_FLAG 0x10000000

static bool is_denied_call(const char *name)
{
    static const char *const denied[] = {"keyctl", "add_key", "request_key",
                                         "clone",  "clone3",  "unshare"};
    for (size_t i = 0; i < sizeof(denied) / sizeof(*denied); i++)
        if (strcmp(name, denied[i]) == 0)
            return true;
    return false;
}

static cJSON *rule(const char *const *names, const char *action, int errno_ret)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "names", sp_json_strv(names));
    cJSON_AddStringToObject(o, "action", action);
    if (errno_ret)
        cJSON_AddNumberToObject(o, "errnoRet", errno_ret);
    return o;
}

/* (flags & CLONE_NEWUSER) == want on argument `index`. */
static void add_newuser_arg(cJSON *o, int index, unsigned want)
{
    cJSON *a = cJSON_CreateObject();
    cJSON_AddNumberToObject(a, "index", index);
    cJSON_AddNumberToObject(a, "value", CLONE_NEWUSER_FLAG);
    cJSON_AddNumberToObject(a, "valueTwo", want);
    cJSON_AddStringToObject(a, "op", "SCMP_CMP_MASKED_EQ");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "args"), a);
}

static void add_arches(cJSON *o, const char *key, bool s390)
{
    const char *const s390_arches[] = {"s390", "s390x", NULL};
    (void)s390;
    cJSON_AddItemToObject(cJSON_AddObjectToObject(o, key), "arches", sp_json_strv(s390_arches));
}

/* sandpod's profile: Podman's default (`base`, its JSON text) without
 * keyctl, add_key and request_key (the kernel keyrings are not namespaced
 * by uid ranges alone), without clone3 (its flags cannot be inspected; libc
 * falls back to clone on ENOSYS), and with clone and unshare allowed only
 * without CLONE_NEWUSER (a new user namespace hands the workload a full
 * capability set over the kernel's namespaced surface, nf_tables first). */
int sp_podman_seccomp_profile(char **out, const char *base, size_t len, sp_error **err)
{
    *out = NULL;
    cJSON *j = sp_json_parse(base, len);
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(j, "syscalls");
    if (!cJSON_IsObject(j) || !cJSON_IsArray(calls)) {
        cJSON_Delete(j);
        return sp_err_set(err, SP_EINVAL, 0, "Podman's seccomp profile is not the JSON expected");
    }
    cJSON *r;
    cJSON_ArrayForEach(r, calls)
    {
        cJSON *names = cJSON_GetObjectItemCaseSensitive(r, "names");
        const char *action = sp_json_str(r, "action");
        if (!cJSON_IsArray(names) || !action || strcmp(action, "SCMP_ACT_ALLOW") != 0)
            continue;
        for (int i = cJSON_GetArraySize(names) - 1; i >= 0; i--) {
            cJSON *n = cJSON_GetArrayItem(names, i);
            if (cJSON_IsString(n) && is_denied_call(n->valuestring))
                cJSON_DeleteItemFromArray(names, i);
        }
    }
    const char *const keys[] = {"keyctl", "add_key", "request_key", NULL};
    cJSON_AddItemToArray(calls, rule(keys, "SCMP_ACT_ERRNO", EPERM));
    const char *const clone3[] = {"clone3", NULL};
    cJSON_AddItemToArray(calls, rule(clone3, "SCMP_ACT_ERRNO", ENOSYS));
    const char *const unshare[] = {"unshare", NULL};
    const char *const clone[] = {"clone", NULL};
    for (unsigned want = 0; want <= CLONE_NEWUSER_FLAG; want += CLONE_NEWUSER_FLAG) {
        const char *act = want ? "SCMP_ACT_ERRNO" : "SCMP_ACT_ALLOW";
        int eret = want ? EPERM : 0;
        cJSON *u = rule(unshare, act, eret);
        add_newuser_arg(u, 0, want);
        cJSON_AddItemToArray(calls, u);
        /* clone's flags are its first argument, but its second on s390. */
        cJSON *c = rule(clone, act, eret);
        add_newuser_arg(c, 0, want);
        add_arches(c, "excludes", true);
        cJSON_AddItemToArray(calls, c);
        cJSON *c390 = rule(clone, act, eret);
        add_newuser_arg(c390, 1, want);
        add_arches(c390, "includes", true);
        cJSON_AddItemToArray(calls, c390);
    }
    *out = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return 0;
}

/* Write sandpod's profile to `path` (atomically), from the service's own
 * default. */
static int write_seccomp(sp_podman *p, const char *path, sp_error **err)
{
    const sp_podman_host *h = NULL;
    int r = sp_podman_host_info(&h, p, err);
    if (r < 0)
        return r;
    if (!h->seccomp_profile)
        return sp_err_set(err, SP_ENOTFOUND, 0, "the Podman service names no seccomp profile");
    sp_buf base = SP_BUF_INIT;
    cleanup_close int in = open(h->seccomp_profile, O_RDONLY | O_CLOEXEC);
    if (in < 0 || sp_read_all(in, &base, 4u << 20) < 0) {
        r = sp_err_errno(err, errno, "read Podman's seccomp profile", h->seccomp_profile);
        sp_buf_dispose(&base);
        return r;
    }
    cleanup_free char *text = NULL;
    r = sp_podman_seccomp_profile(&text, base.data ? base.data : "", base.len, err);
    sp_buf_dispose(&base);
    if (r < 0)
        return r;
    return sp_write_file_atomic(path, text, strlen(text), 0600, err);
}

int sp_podman_container_create(char **out_id, char ***out_warnings, sp_podman *p,
                               const sp_podman_container_spec *spec, sp_error **err)
{
    *out_id = NULL;
    if (out_warnings)
        *out_warnings = NULL;
    if (!spec)
        return sp_err_set(err, SP_EINVAL, 0, "create container: spec is missing");
    bool rootless = false;
    sp_strv warnings = {0};
    if (spec->userns == SP_PODMAN_USERNS_PRIVATE) {
        const sp_podman_host *h = NULL;
        int r = sp_podman_host_info(&h, p, err);
        if (r < 0)
            return r;
        rootless = h->rootless;
    }
    const char *seccomp_path = NULL;
    if (spec->seccomp == SP_PODMAN_SECCOMP_SANDPOD) {
        sp_error *e = NULL;
        if (!spec->seccomp_file) {
            sp_strv_push(&warnings, sp_xstrdup("no file for sandpod's seccomp profile was "
                                               "given: Podman's default profile applies"));
        } else if (write_seccomp(p, spec->seccomp_file, &e) < 0) {
            sp_strv_push(&warnings,
                         sp_xasprintf("sandpod's seccomp profile could not be made (%s): "
                                      "Podman's default profile applies",
                                      e ? e->message : "unknown error"));
        } else {
            seccomp_path = spec->seccomp_file;
        }
        sp_error_free(e);
    }
    cleanup_free char *body = NULL;
    int r = spec_json(&body, spec, rootless, seccomp_path, err);
    if (r < 0) {
        sp_strv_dispose(&warnings);
        return r;
    }
    cleanup_free char *what =
        sp_xasprintf("create container %s", spec->name ? spec->name : spec->image);
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.method = "POST";
    req.path = SP_PODMAN_API "/containers/create";
    req.body = body;
    req.body_len = strlen(body);
    req.content_type = "application/json";
    sp_http_resp resp = {0};
    cJSON *j = NULL;
    r = sp_podman_http(p, &req, &resp, what, err);
    if (r < 0 && resp.status == 409) {
        if (err && *err)
            (*err)->code = SP_EEXISTS;
        r = SP_EEXISTS;
    }
    if (r == 0)
        r = sp_podman_json(&j, &resp.body, what, err);
    if (r == 0) {
        const char *id = sp_json_str(j, "Id");
        if (id && *id)
            *out_id = sp_xstrdup(id);
        else
            r = sp_err_set(err, SP_EPODMAN, 0, "%s: the answer has no container id", what);
        const cJSON *w;
        cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(j, "Warnings"))
        {
            if (cJSON_IsString(w) && *w->valuestring)
                sp_strv_push(&warnings, sp_xstrdup(w->valuestring));
        }
    }
    cJSON_Delete(j);
    sp_http_resp_dispose(&resp);
    if (r == 0 && out_warnings)
        *out_warnings = sp_strv_steal(&warnings);
    sp_strv_dispose(&warnings);
    return r;
}

/* ------------------------------------------------------- simple actions -- */

/* POST /containers/{id}/<action>[?query]; 304 (already so) is success. */
static int simple_post(sp_podman *p, const char *name, const char *action, const char *query,
                       const char *verb, long timeout_ms, sp_error **err)
{
    if (!name || !*name)
        return sp_err_set(err, SP_EINVAL, 0, "%s container: name is missing", verb);
    cleanup_free char *c = sp_podman_escape(p, name);
    cleanup_free char *path = sp_xasprintf(SP_PODMAN_API "/containers/%s/%s%s%s", c, action,
                                           query ? "?" : "", query ? query : "");
    cleanup_free char *what = sp_xasprintf("%s container %s", verb, name);
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.method = "POST";
    req.path = path;
    req.timeout_ms = timeout_ms;
    sp_http_resp resp = {0};
    int r = sp_podman_http(p, &req, &resp, what, err);
    sp_http_resp_dispose(&resp);
    return r;
}

int sp_podman_container_start(sp_podman *p, const char *name_or_id, sp_error **err)
{
    return simple_post(p, name_or_id, "start", NULL, "start", 0, err);
}

int sp_podman_container_stop(sp_podman *p, const char *name_or_id, int timeout_s, sp_error **err)
{
    char q[32];
    long t = 0;
    if (timeout_s >= 0) {
        snprintf(q, sizeof(q), "timeout=%d", timeout_s);
        t = (long)p->timeout_ms + (long)timeout_s * 1000;
    } else {
        t = (long)p->timeout_ms + 60000; /* the container's own timeout is unknown here */
    }
    return simple_post(p, name_or_id, "stop", timeout_s >= 0 ? q : NULL, "stop", t, err);
}

/* Splits Podman's log stream into its frames (8-byte header: stream,
 * three zero bytes, big-endian length) across the pieces curl hands over.
 * A container with a terminal sends raw bytes instead: all stdout. */
typedef struct logs_demux {
    sp_logs_fn fn;
    void *ud;
    uint8_t head[8];
    size_t head_len;
    uint32_t left; /* payload bytes of the current frame still to come */
    int stream;
    bool raw;
    bool started;
} logs_demux;

static int logs_data(const char *data, size_t len, void *ud, sp_error **err)
{
    (void)err;
    logs_demux *d = ud;
    if (!d->started && len) {
        d->started = true;
        d->raw = (uint8_t)data[0] > 2;
    }
    if (d->raw)
        return d->fn(SP_EXEC_STDOUT, data, len, d->ud);
    while (len) {
        if (d->left == 0) {
            size_t k = 8 - d->head_len < len ? 8 - d->head_len : len;
            memcpy(d->head + d->head_len, data, k);
            d->head_len += k;
            data += k;
            len -= k;
            if (d->head_len < 8)
                return 0;
            d->head_len = 0;
            d->stream = d->head[0] == 2 ? SP_EXEC_STDERR : SP_EXEC_STDOUT;
            d->left = (uint32_t)d->head[4] << 24 | (uint32_t)d->head[5] << 16 |
                      (uint32_t)d->head[6] << 8 | d->head[7];
            continue;
        }
        size_t k = d->left < len ? d->left : len;
        int r = d->fn(d->stream, data, k, d->ud);
        if (r < 0)
            return r;
        d->left -= (uint32_t)k;
        data += k;
        len -= k;
    }
    return 0;
}

int sp_podman_container_logs(sp_podman *p, const char *name_or_id, const sp_logs_opts *opts,
                             sp_logs_fn fn, void *userdata, sp_error **err)
{
    if (SP_OPTS_CHECK(opts, 1, SP_LOGS_OPTS_VERSION, "sp_logs_opts", err) < 0)
        return SP_EINVAL;
    sp_logs_opts o = SP_LOGS_OPTS_INIT;
    if (opts)
        o = *opts;
    if (!name_or_id || !*name_or_id || !fn)
        return sp_err_set(err, SP_EINVAL, 0, "logs: container name or callback is missing");
    cleanup_free char *c = sp_podman_escape(p, name_or_id);
    sp_buf path = SP_BUF_INIT;
    sp_buf_printf(&path, SP_PODMAN_API "/containers/%s/logs?stdout=true&stderr=true", c);
    if (o.follow)
        sp_buf_printf(&path, "&follow=true");
    if (o.tail >= 0)
        sp_buf_printf(&path, "&tail=%lld", (long long)o.tail);
    if (o.timestamps)
        sp_buf_printf(&path, "&timestamps=true");
    if (o.since) {
        cleanup_free char *since = sp_podman_escape(p, o.since);
        sp_buf_printf(&path, "&since=%s", since);
    }
    cleanup_free char *what = sp_xasprintf("logs of container %s", name_or_id);
    logs_demux d = {.fn = fn, .ud = userdata};
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.path = path.data;
    req.on_data = logs_data;
    req.ud = &d;
    req.timeout_ms = o.follow ? -1 : 0;
    sp_http_resp resp = {0};
    int r = sp_podman_http(p, &req, &resp, what, err);
    sp_http_resp_dispose(&resp);
    sp_buf_dispose(&path);
    return r;
}

int sp_podman_container_kill(sp_podman *p, const char *name_or_id, int signo, sp_error **err)
{
    if (signo <= 0 || signo >= 65)
        return sp_err_set(err, SP_EINVAL, 0, "kill container %s: bad signal %d",
                          name_or_id ? name_or_id : "", signo);
    char q[32];
    snprintf(q, sizeof(q), "signal=%d", signo);
    return simple_post(p, name_or_id, "kill", q, "kill", 0, err);
}

/* runc's cgroup v1 freezer gives up ("unable to freeze") when a busy
 * workload keeps a task from freezing in time, and thaws what it froze: a
 * retry a little later usually succeeds. Only a service error (500) is
 * retried; a container that is gone or not running (404, 409) is final. */
int sp_podman_container_pause(sp_podman *p, const char *name_or_id, sp_error **err)
{
    if (!name_or_id || !*name_or_id)
        return sp_err_set(err, SP_EINVAL, 0, "pause container: name is missing");
    cleanup_free char *c = sp_podman_escape(p, name_or_id);
    cleanup_free char *path = sp_xasprintf(SP_PODMAN_API "/containers/%s/pause", c);
    cleanup_free char *what = sp_xasprintf("pause container %s", name_or_id);
    static const long backoff_ms[] = {50, 200, 500};
    for (size_t attempt = 0;; attempt++) {
        sp_http_req req = SP_HTTP_REQ_INIT;
        req.method = "POST";
        req.path = path;
        sp_http_resp resp = {0};
        sp_error *e = NULL;
        int r = sp_podman_http(p, &req, &resp, what, &e);
        long status = resp.status;
        sp_http_resp_dispose(&resp);
        if (r == 0 || status != 500 || attempt == sizeof(backoff_ms) / sizeof(backoff_ms[0])) {
            if (err)
                *err = e;
            else
                sp_error_free(e);
            return r;
        }
        sp_log(SP_LOG_DEBUG, "pause %s: %s; retrying in %ld ms", name_or_id,
               e ? e->message : "error", backoff_ms[attempt]);
        sp_error_free(e);
        struct timespec ts = {0, backoff_ms[attempt] * 1000000L};
        nanosleep(&ts, NULL);
    }
}

int sp_podman_container_unpause(sp_podman *p, const char *name_or_id, sp_error **err)
{
    return simple_post(p, name_or_id, "unpause", NULL, "unpause", 0, err);
}

int sp_podman_container_resize(sp_podman *p, const char *name_or_id, unsigned rows, unsigned cols,
                               sp_error **err)
{
    if (!rows || !cols || rows > 0xffff || cols > 0xffff)
        return sp_err_set(err, SP_EINVAL, 0, "resize container: bad size %ux%u", rows, cols);
    char q[48];
    snprintf(q, sizeof(q), "h=%u&w=%u", rows, cols);
    return simple_post(p, name_or_id, "resize", q, "resize", 0, err);
}

int sp_podman_container_wait(int *exit_code, sp_podman *p, const char *name_or_id,
                             const char *condition, int timeout_ms, sp_error **err)
{
    if (exit_code)
        *exit_code = -1;
    if (!name_or_id || !*name_or_id)
        return sp_err_set(err, SP_EINVAL, 0, "wait for container: name is missing");
    cleanup_free char *c = sp_podman_escape(p, name_or_id);
    cleanup_free char *cond = condition ? sp_podman_escape(p, condition) : NULL;
    cleanup_free char *path =
        cond ? sp_xasprintf(SP_PODMAN_API "/containers/%s/wait?condition=%s", c, cond)
             : sp_xasprintf(SP_PODMAN_API "/containers/%s/wait?condition=stopped&"
                                          "condition=exited",
                            c);
    cleanup_free char *what = sp_xasprintf("wait for container %s", name_or_id);
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.method = "POST";
    req.path = path;
    req.timeout_ms = timeout_ms >= 0 ? (timeout_ms ? timeout_ms : 1) : (long)p->transfer_timeout_ms;
    cJSON *j = NULL;
    int r = sp_podman_call_json(p, &req, &j, what, err);
    if (r == 0) {
        if (!cJSON_IsNumber(j))
            r = sp_err_set(err, SP_EPODMAN, 0, "%s: the answer is not an exit code", what);
        else if (exit_code)
            *exit_code = j->valueint;
    }
    cJSON_Delete(j);
    return r;
}

int sp_podman_container_delete(sp_podman *p, const char *name_or_id, bool force, bool volumes,
                               sp_error **err)
{
    if (!name_or_id || !*name_or_id)
        return sp_err_set(err, SP_EINVAL, 0, "delete container: name is missing");
    cleanup_free char *c = sp_podman_escape(p, name_or_id);
    cleanup_free char *path = sp_xasprintf(SP_PODMAN_API "/containers/%s?force=%s&v=%s", c,
                                           force ? "true" : "false", volumes ? "true" : "false");
    cleanup_free char *what = sp_xasprintf("delete container %s", name_or_id);
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.method = "DELETE";
    req.path = path;
    /* A forced delete stops the container first (up to its stop timeout). */
    req.timeout_ms = (long)p->timeout_ms + (force ? 60000 : 0);
    /* Podman 4.3 sometimes fails to unmount the shm of a container in a
     * user namespace of its own right after stopping it ("device or
     * resource busy"), having removed the container or not: a second delete
     * a moment later finishes it, or finds it gone. */
    int r = 0;
    for (int attempt = 0;; attempt++) {
        sp_http_resp resp = {0};
        sp_error *e = NULL;
        r = sp_podman_http(p, &req, &resp, what, &e);
        sp_http_resp_dispose(&resp);
        bool busy = r < 0 && e && strstr(e->message, "device or resource busy");
        /* The busy attempt removed the container after all. */
        if (attempt > 0 && r == SP_ENOTFOUND) {
            sp_error_free(e);
            return 0;
        }
        if (!busy || attempt == 5) {
            if (err)
                *err = e;
            else
                sp_error_free(e);
            return r;
        }
        sp_error_free(e);
        struct timespec ts = {0, (long)(attempt + 1) * 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* --------------------------------------------------------------- inspect -- */

static char **labels_from(const cJSON *obj)
{
    sp_strv v = {0};
    const cJSON *it;
    cJSON_ArrayForEach(it, obj)
    {
        if (it->string && cJSON_IsString(it))
            sp_strv_push(&v, sp_xasprintf("%s=%s", it->string, it->valuestring));
    }
    if (!v.v)
        v.v = sp_xcalloc(1, sizeof(char *));
    return v.v;
}

void sp_podman_container_info_free(sp_podman_container_info *info)
{
    sp_container_info_free(info);
}

int sp_podman_container_inspect(sp_podman_container_info **out, sp_podman *p,
                                const char *name_or_id, sp_error **err)
{
    *out = NULL;
    if (!name_or_id || !*name_or_id)
        return sp_err_set(err, SP_EINVAL, 0, "inspect container: name is missing");
    cleanup_free char *c = sp_podman_escape(p, name_or_id);
    cleanup_free char *path = sp_xasprintf(SP_PODMAN_API "/containers/%s/json", c);
    cleanup_free char *what = sp_xasprintf("inspect container %s", name_or_id);
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.path = path;
    cJSON *j = NULL;
    int r = sp_podman_call_json(p, &req, &j, what, err);
    if (r == 0) {
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "State");
        const char *id = sp_json_str(j, "Id");
        if (!id || !cJSON_IsObject(st)) {
            r = sp_err_set(err, SP_EPODMAN, 0, "%s: the answer has no Id or State", what);
        } else {
            sp_podman_container_info *i = sp_xcalloc(1, sizeof(*i));
            i->id = sp_xstrdup(id);
            i->name = sp_json_strdup(j, "Name");
            i->image = sp_json_strdup(j, "ImageName");
            i->state = sp_json_strdup(st, "Status");
            i->running = sp_json_bool(st, "Running", false);
            i->paused = sp_json_bool(st, "Paused", false);
            i->oom_killed = sp_json_bool(st, "OOMKilled", false);
            i->exit_code = (int)sp_json_int(st, "ExitCode", 0);
            i->pid = (int)sp_json_int(st, "Pid", 0);
            i->started_at = sp_json_strdup(st, "StartedAt");
            i->finished_at = sp_json_strdup(st, "FinishedAt");
            const char *e = sp_json_str(st, "Error");
            i->error = e && *e ? sp_xstrdup(e) : NULL;
            const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(j, "Config");
            i->labels = labels_from(cJSON_GetObjectItemCaseSensitive(cfg, "Labels"));
            *out = i;
        }
    }
    cJSON_Delete(j);
    return r;
}

void sp_podman_containers_free(sp_podman_containers *list)
{
    sp_containers_free(list);
}

int sp_podman_container_list(sp_podman_containers **out, sp_podman *p, const char *const *labels,
                             sp_error **err)
{
    *out = NULL;
    cJSON *f = cJSON_CreateObject();
    if (labels && labels[0])
        cJSON_AddItemToObject(f, "label", sp_json_strv(labels));
    cleanup_free char *fjson = cJSON_PrintUnformatted(f);
    cJSON_Delete(f);
    cleanup_free char *fq = sp_podman_escape(p, fjson);
    cleanup_free char *path =
        sp_xasprintf(SP_PODMAN_API "/containers/json?all=true&filters=%s", fq);
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.path = path;
    cJSON *j = NULL;
    int r = sp_podman_call_json(p, &req, &j, "list containers", err);
    if (r == 0 && !cJSON_IsArray(j))
        r = sp_err_set(err, SP_EPODMAN, 0, "list containers: the answer is not a list");
    if (r == 0) {
        sp_podman_containers *l = sp_xcalloc(1, sizeof(*l));
        int n = cJSON_GetArraySize(j);
        l->items = sp_xcalloc((size_t)(n > 0 ? n : 1), sizeof(*l->items));
        const cJSON *it;
        cJSON_ArrayForEach(it, j)
        {
            const char *id = sp_json_str(it, "Id");
            if (!id)
                continue;
            sp_podman_container_info *i = &l->items[l->n++];
            i->id = sp_xstrdup(id);
            const cJSON *names = cJSON_GetObjectItemCaseSensitive(it, "Names");
            const cJSON *n0 = cJSON_GetArrayItem(names, 0);
            i->name = cJSON_IsString(n0) ? sp_xstrdup(n0->valuestring) : NULL;
            i->image = sp_json_strdup(it, "Image");
            i->state = sp_json_strdup(it, "State");
            i->running = i->state && strcmp(i->state, "running") == 0;
            i->paused = i->state && strcmp(i->state, "paused") == 0;
            i->exit_code = (int)sp_json_int(it, "ExitCode", 0);
            i->pid = (int)sp_json_int(it, "Pid", 0);
            i->labels = labels_from(cJSON_GetObjectItemCaseSensitive(it, "Labels"));
        }
        *out = l;
    }
    cJSON_Delete(j);
    return r;
}

/* --------------------------------------------------------------- archive -- */

static int archive(sp_podman *p, const char *name, const char *cpath, int fd, bool put,
                   sp_error **err)
{
    if (!name || !*name || !cpath || !*cpath)
        return sp_err_set(err, SP_EINVAL, 0, "archive: container and path are required");
    if (fd < 0)
        return sp_err_set(err, SP_EINVAL, EBADF, "archive: bad fd");
    cleanup_free char *c = sp_podman_escape(p, name);
    cleanup_free char *q = sp_podman_escape(p, cpath);
    cleanup_free char *path = sp_xasprintf(SP_PODMAN_API "/containers/%s/archive?path=%s", c, q);
    cleanup_free char *what =
        sp_xasprintf("%s %s:%s", put ? "copy into" : "copy out of", name, cpath);
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.path = path;
    req.timeout_ms = (long)p->transfer_timeout_ms;
    if (put) {
        req.method = "PUT";
        req.upload_fd = fd;
        req.content_type = "application/x-tar";
    } else {
        req.download_fd = fd;
    }
    sp_http_resp resp = {0};
    int r = sp_podman_http(p, &req, &resp, what, err);
    sp_http_resp_dispose(&resp);
    return r;
}

int sp_podman_archive_get(sp_podman *p, const char *name_or_id, const char *path, int out_fd,
                          sp_error **err)
{
    return archive(p, name_or_id, path, out_fd, false, err);
}

int sp_podman_archive_put(sp_podman *p, const char *name_or_id, const char *path, int in_fd,
                          sp_error **err)
{
    return archive(p, name_or_id, path, in_fd, true, err);
}
