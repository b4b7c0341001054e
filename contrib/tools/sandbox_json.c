/* JSON views of sandboxes and command results. Only the public API and
 * cJSON, like fs_json.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs_json.h"
#include "json.h"
#include "sandbox_json.h"

/* sandbox.json is a few hundred bytes; anything past this is not ours. */
#define STATE_FILE_MAX ((size_t)1 << 20)

const char *sp_json_network_name(sp_network n)
{
    switch (n) {
    case SP_NET_NONE:
        return "none";
    case SP_NET_DEFAULT:
        return "default";
    case SP_NET_HOST:
        return "host";
    }
    return "unknown";
}

static bool add_bool(cJSON *obj, const char *key, bool v)
{
    return sp_json_add(obj, key, cJSON_CreateBool(v));
}

static bool add_null(cJSON *obj, const char *key)
{
    return sp_json_add(obj, key, cJSON_CreateNull());
}

cJSON *sp_json_run_result(const sp_run_result *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok = sp_json_add_i64(o, "exit_code", r->exit_code) &&
              add_bool(o, "timed_out", r->timed_out) &&
              sp_json_add_i64(o, "duration_ms", r->duration_ms) &&
              sp_json_add(o, "stdout", sp_json_string_n(r->out ? r->out : "", r->out_len)) &&
              sp_json_add(o, "stderr", sp_json_string_n(r->err ? r->err : "", r->err_len)) &&
              add_bool(o, "stdout_truncated", r->out_truncated) &&
              add_bool(o, "stderr_truncated", r->err_truncated) &&
              sp_json_add_u64(o, "stdout_bytes", r->out_total) &&
              sp_json_add_u64(o, "stderr_bytes", r->err_total);
    return sp_json_finish(o, ok);
}

/* The sandbox's state file, parsed; NULL when it cannot be read. The
 * library exposes no getter for the creation time and the saved
 * configuration, and sandbox.json is the documented record of both. */
static cJSON *load_state_file(const sp_sandbox *sb)
{
    const char *dir = sp_sandbox_state_dir(sb);
    if (!dir)
        return NULL;
    size_t plen = strlen(dir) + sizeof("/sandbox.json");
    char *path = malloc(plen);
    if (!path)
        return NULL;
    snprintf(path, plen, "%s/sandbox.json", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    free(path);
    if (fd < 0)
        return NULL;
    size_t cap = 8192, n = 0;
    char *buf = malloc(cap);
    cJSON *o = NULL;
    if (!buf)
        goto done;
    for (;;) {
        if (n == cap) {
            if (cap >= STATE_FILE_MAX)
                goto done;
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                goto done;
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            goto done;
        if (r == 0)
            break;
        n += (size_t)r;
    }
    o = sp_json_parse(buf, n);
    if (o && !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        o = NULL;
    }
done:
    free(buf);
    close(fd);
    return o;
}

static bool copy_string(cJSON *dst, const char *key, const cJSON *src)
{
    const cJSON *v = src ? cJSON_GetObjectItemCaseSensitive(src, key) : NULL;
    if (cJSON_IsString(v) && v->valuestring[0])
        return sp_json_add_string(dst, key, v->valuestring);
    return add_null(dst, key);
}

/* sandbox.json stores numbers as doubles; a value past 2^64 (a limit of
 * UINT64_MAX rounded up) means "no limit". */
static bool copy_u64(cJSON *dst, const char *key, const cJSON *src)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(src, key);
    if (!cJSON_IsNumber(v) || v->valuedouble < 0)
        return add_null(dst, key);
    uint64_t u = v->valuedouble >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)v->valuedouble;
    return sp_json_add_u64(dst, key, u);
}

static bool copy_i64(cJSON *dst, const char *key, const cJSON *src)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(src, key);
    if (!cJSON_IsNumber(v) || v->valuedouble < -9.2e18 || v->valuedouble > 9.2e18)
        return add_null(dst, key);
    return sp_json_add_i64(dst, key, (int64_t)v->valuedouble);
}

static bool copy_strings(cJSON *dst, const char *key, const cJSON *src)
{
    cJSON *a = cJSON_CreateArray();
    if (!a)
        return false;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(src, key);
    const cJSON *it;
    cJSON_ArrayForEach(it, v)
    {
        if (!cJSON_IsString(it))
            continue;
        cJSON *s = sp_json_string(it->valuestring);
        if (!s || !cJSON_AddItemToArray(a, s)) {
            cJSON_Delete(s);
            cJSON_Delete(a);
            return false;
        }
    }
    return sp_json_add(dst, key, a);
}

/* The `env` array of sandbox.json, each value replaced by *** unless
 * `secrets`: the names say what a sandbox was given, the values are often
 * credentials. */
static bool copy_env(cJSON *dst, const cJSON *src, bool secrets)
{
    cJSON *a = cJSON_CreateArray();
    if (!a)
        return false;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(src, "env");
    const cJSON *it;
    cJSON_ArrayForEach(it, v)
    {
        if (!cJSON_IsString(it))
            continue;
        const char *kv = it->valuestring;
        const char *eq = strchr(kv, '=');
        cJSON *s = NULL;
        if (secrets || !eq) {
            s = sp_json_string(kv);
        } else {
            size_t klen = (size_t)(eq - kv);
            char *masked = malloc(klen + sizeof("=***"));
            if (masked) {
                memcpy(masked, kv, klen);
                memcpy(masked + klen, "=***", sizeof("=***"));
                s = sp_json_string(masked);
                free(masked);
            }
        }
        if (!s || !cJSON_AddItemToArray(a, s)) {
            cJSON_Delete(s);
            cJSON_Delete(a);
            return false;
        }
    }
    return sp_json_add(dst, "env", a);
}

/* `state` may be NULL: every field is then null or empty. */
static cJSON *config_json(const cJSON *state, bool secrets)
{
    cJSON *c = cJSON_CreateObject();
    if (!c)
        return NULL;
    const cJSON *net = cJSON_GetObjectItemCaseSensitive(state, "network");
    const char *net_name =
        cJSON_IsNumber(net) ? sp_json_network_name((sp_network)net->valueint) : NULL;
    const cJSON *wr = cJSON_GetObjectItemCaseSensitive(state, "writable_root");
    bool ok = copy_string(c, "workdir", state) && copy_string(c, "user", state) &&
              copy_env(c, state, secrets) &&
              (net_name ? sp_json_add_string(c, "network", net_name) : add_null(c, "network")) &&
              copy_u64(c, "memory_bytes", state) && copy_u64(c, "nano_cpus", state) &&
              copy_i64(c, "pids_limit", state) && copy_u64(c, "tmpfs_bytes", state) &&
              add_bool(c, "writable_root", cJSON_IsTrue(wr)) && copy_strings(c, "cap_add", state) &&
              copy_strings(c, "env_pass", state) && copy_string(c, "userns", state) &&
              copy_string(c, "seccomp", state) && copy_i64(c, "host_uid", state) &&
              copy_i64(c, "host_gid", state) &&
              add_bool(c, "rootless",
                       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(state, "rootless"))) &&
              add_bool(c, "limits_apply",
                       !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(state, "limits_apply"))) &&
              copy_strings(c, "warnings", state);
    return sp_json_finish(c, ok);
}

cJSON *sp_json_sandbox(const sp_sandbox *sb, const sp_sandbox_status *st, bool config)
{
    return sp_json_sandbox_ext(sb, st, config ? SP_JSON_SANDBOX_CONFIG : 0);
}

cJSON *sp_json_sandbox_ext(const sp_sandbox *sb, const sp_sandbox_status *st, unsigned flags)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON *state = load_state_file(sb);
    const char *container = st && st->container ? st->container : sp_sandbox_container_id(sb);
    bool exited =
        st && st->state && (strcmp(st->state, "exited") == 0 || strcmp(st->state, "stopped") == 0);
    bool ok =
        sp_json_add_string(o, "name", sp_sandbox_name(sb)) &&
        sp_json_add_string(o, "engine", sp_sandbox_engine(sb)) &&
        sp_json_add_string(o, "state", st && st->state ? st->state : "unknown") &&
        add_bool(o, "running", st && st->running) &&
        (exited ? sp_json_add_i64(o, "exit_code", st->exit_code) : add_null(o, "exit_code")) &&
        add_bool(o, "oom_killed", st && st->oom_killed) &&
        sp_json_add_string(o, "container", container) &&
        sp_json_add_string(o, "image", sp_sandbox_image(sb)) &&
        copy_string(o, "created_at", state) &&
        sp_json_add_string(o, "workspace", sp_sandbox_workspace(sb)) &&
        sp_json_add_string(o, "state_dir", sp_sandbox_state_dir(sb));
    if (ok && (flags & SP_JSON_SANDBOX_CONFIG))
        ok = sp_json_add(o, "config", config_json(state, (flags & SP_JSON_SANDBOX_SECRETS) != 0));
    cJSON_Delete(state);
    return sp_json_finish(o, ok);
}
