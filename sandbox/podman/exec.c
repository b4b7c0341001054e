/* Exec sessions: create, start (as a hijacked stream, see stream.c),
 * inspect, wait, resize; and container attach, which is the same stream. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "podman_internal.h"

static cJSON *str_array(const char *const *v)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; v && v[i]; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(v[i]));
    return a;
}

int sp_podman_exec_create(char **out_id, sp_podman *p, const char *container,
                          const sp_podman_exec_spec *spec, sp_error **err)
{
    *out_id = NULL;
    if (!container || !*container)
        return sp_err_set(err, SP_EINVAL, 0, "exec: container is missing");
    if (!spec || !spec->argv || !spec->argv[0])
        return sp_err_set(err, SP_EINVAL, 0, "exec in %s: command is missing", container);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddBoolToObject(j, "AttachStdin", spec->attach_stdin);
    cJSON_AddBoolToObject(j, "AttachStdout", spec->attach_stdout);
    cJSON_AddBoolToObject(j, "AttachStderr", spec->attach_stderr);
    cJSON_AddBoolToObject(j, "Tty", spec->tty);
    cJSON_AddItemToObject(j, "Cmd", str_array(spec->argv));
    if (spec->env)
        cJSON_AddItemToObject(j, "Env", str_array(spec->env));
    if (spec->workdir)
        cJSON_AddStringToObject(j, "WorkingDir", spec->workdir);
    if (spec->user)
        cJSON_AddStringToObject(j, "User", spec->user);
    cleanup_free char *body = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);

    cleanup_free char *what = sp_xasprintf("exec in %s", container);
    cleanup_free char *c = sp_podman_escape(p, container);
    cleanup_free char *path = sp_xasprintf(SP_PODMAN_API "/containers/%s/exec", c);
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.method = "POST";
    req.path = path;
    req.body = body;
    req.body_len = strlen(body);
    req.content_type = "application/json";
    sp_http_resp resp = {0};
    cJSON *ans = NULL;
    int r = sp_podman_http(p, &req, &resp, what, err);
    if (r == 0)
        r = sp_podman_json(&ans, &resp.body, what, err);
    if (r == 0) {
        const char *id = sp_json_str(ans, "Id");
        if (id && *id)
            *out_id = sp_xstrdup(id);
        else
            r = sp_err_set(err, SP_EPODMAN, 0, "%s: the answer has no session id", what);
    }
    cJSON_Delete(ans);
    sp_http_resp_dispose(&resp);
    return r;
}

int sp_podman_exec_start(sp_exec **out, sp_podman *p, const char *exec_id, bool tty, sp_error **err)
{
    *out = NULL;
    if (!exec_id || !*exec_id)
        return sp_err_set(err, SP_EINVAL, 0, "exec start: session id is missing");
    cleanup_free char *id = sp_podman_escape(p, exec_id);
    cleanup_free char *path = sp_xasprintf(SP_PODMAN_API "/exec/%s/start", id);
    cleanup_free char *what = sp_xasprintf("start exec session %.12s", exec_id);
    char body[64];
    snprintf(body, sizeof(body), "{\"Detach\":false,\"Tty\":%s}", tty ? "true" : "false");
    return sp_podman_hijack(out, p, path, body, tty, exec_id, what, err);
}

int sp_podman_exec(sp_exec **out, sp_podman *p, const char *container,
                   const sp_podman_exec_spec *spec, sp_error **err)
{
    *out = NULL;
    cleanup_free char *id = NULL;
    int r = sp_podman_exec_create(&id, p, container, spec, err);
    if (r < 0)
        return r;
    return sp_podman_exec_start(out, p, id, spec->tty, err);
}

int sp_podman_exec_inspect(sp_podman_exec_info *out, sp_podman *p, const char *exec_id,
                           sp_error **err)
{
    memset(out, 0, sizeof(*out));
    if (!exec_id || !*exec_id)
        return sp_err_set(err, SP_EINVAL, 0, "exec inspect: session id is missing");
    cleanup_free char *id = sp_podman_escape(p, exec_id);
    cleanup_free char *path = sp_xasprintf(SP_PODMAN_API "/exec/%s/json", id);
    cleanup_free char *what = sp_xasprintf("inspect exec session %.12s", exec_id);
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.path = path;
    cJSON *j = NULL;
    int r = sp_podman_call_json(p, &req, &j, what, err);
    if (r == 0) {
        out->running = sp_json_bool(j, "Running");
        out->exit_code = (int)sp_json_int(j, "ExitCode", -1);
        out->pid = (int)sp_json_int(j, "Pid", 0);
    }
    cJSON_Delete(j);
    return r;
}

int sp_podman_exec_wait(int *exit_code, sp_podman *p, const char *exec_id, int timeout_ms,
                        sp_error **err)
{
    if (exit_code)
        *exit_code = -1;
    int64_t deadline = timeout_ms < 0 ? -1 : sp_now_ms() + timeout_ms;
    long pause_ms = 5;
    for (;;) {
        sp_podman_exec_info info;
        int r = sp_podman_exec_inspect(&info, p, exec_id, err);
        if (r < 0)
            return r;
        if (!info.running) {
            if (exit_code)
                *exit_code = info.exit_code;
            return 0;
        }
        if (deadline >= 0 && sp_now_ms() >= deadline)
            return sp_err_set(err, SP_ETIMEOUT, ETIMEDOUT,
                              "exec session %.12s still runs after %dms", exec_id, timeout_ms);
        struct timespec ts = {0, pause_ms * 1000000L};
        nanosleep(&ts, NULL);
        if (pause_ms < 100)
            pause_ms *= 2;
    }
}

int sp_podman_exec_resize(sp_podman *p, const char *exec_id, unsigned rows, unsigned cols,
                          sp_error **err)
{
    if (!exec_id || !*exec_id)
        return sp_err_set(err, SP_EINVAL, 0, "exec resize: session id is missing");
    if (!rows || !cols || rows > 0xffff || cols > 0xffff)
        return sp_err_set(err, SP_EINVAL, 0, "exec resize: bad size %ux%u", rows, cols);
    cleanup_free char *id = sp_podman_escape(p, exec_id);
    cleanup_free char *path =
        sp_xasprintf(SP_PODMAN_API "/exec/%s/resize?h=%u&w=%u", id, rows, cols);
    cleanup_free char *what = sp_xasprintf("resize exec session %.12s", exec_id);
    sp_http_req req = SP_HTTP_REQ_INIT;
    req.method = "POST";
    req.path = path;
    sp_http_resp resp = {0};
    int r = sp_podman_http(p, &req, &resp, what, err);
    sp_http_resp_dispose(&resp);
    return r;
}

int sp_podman_container_attach(sp_exec **out, sp_podman *p, const char *name_or_id, bool tty,
                               bool attach_stdin, sp_error **err)
{
    *out = NULL;
    if (!name_or_id || !*name_or_id)
        return sp_err_set(err, SP_EINVAL, 0, "attach: container is missing");
    cleanup_free char *c = sp_podman_escape(p, name_or_id);
    cleanup_free char *path = sp_xasprintf(SP_PODMAN_API "/containers/%s/attach?stream=true&"
                                                         "logs=false&stdout=true&stderr=true&"
                                                         "stdin=%s",
                                           c, attach_stdin ? "true" : "false");
    cleanup_free char *what = sp_xasprintf("attach to container %s", name_or_id);
    return sp_podman_hijack(out, p, path, NULL, tty, NULL, what, err);
}
