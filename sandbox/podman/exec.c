/* Exec sessions: create, start (as a hijacked stream, see stream.c),
 * inspect, wait, resize; and container attach, which is the same stream. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dir.h"
#include "podman_internal.h"

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
    cJSON_AddItemToObject(j, "Cmd", sp_json_strv(spec->argv));
    if (spec->env)
        cJSON_AddItemToObject(j, "Env", sp_json_strv(spec->env));
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

/* One pass over /proc for reap_exec(): 1 when the waiting conmon was
 * found (and killed) or no conmon of the session is left, 0 when only the
 * session's own conmon is there, which forks the waiting one in a moment. */
static int reap_once(const char *needle, size_t nlen)
{
    sp_dirnames pids = SP_DIRNAMES_INIT;
    if (sp_dir_read_at(&pids, AT_FDCWD, "/proc", SP_DIR_UNSORTED, 0) < 0)
        return 1;
    bool found = false, parent = false;
    char buf[8192];
    for (size_t i = 0; i < pids.n; i++) {
        const char *pid = sp_dirnames_name(&pids, i);
        if (pid[0] < '1' || pid[0] > '9')
            continue;
        char path[300];
        snprintf(path, sizeof(path), "/proc/%s/cmdline", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, buf, sizeof(buf));
        close(fd);
        /* conmon's options come first; the id is well inside 8 KiB. */
        if (n <= 0 || !memmem(buf, (size_t)n, "conmon", 6) || !memmem(buf, (size_t)n, needle, nlen))
            continue;
        snprintf(path, sizeof(path), "/proc/%s/stat", pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
            continue;
        buf[n] = '\0';
        const char *rp = strrchr(buf, ')');
        int ppid = 0;
        char state = 0;
        /* The waiting child: its parent is the session's conmon, not init. */
        if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid > 1) {
            kill((pid_t)strtol(pid, NULL, 10), SIGKILL);
            found = true;
        } else {
            parent = true;
        }
    }
    sp_dirnames_dispose(&pids);
    return found || !parent;
}

/* Podman's REST exec leaves each session's conmon waiting out its exit
 * delay (300 s by default) before it runs the session's clean-up, and the
 * API has no call to remove a session: under load that is two processes
 * per command, for five minutes. Once the exit code is read nobody needs
 * the session, so when the service runs on this host, end the waiting
 * conmon (the child of the pair, which holds "-u <exec id>" on its command
 * line and sleeps before the clean-up); its parent then exits. Podman
 * drops the exited session's record when the container stops or goes.
 * Best effort: a remote service, another user's conmon, or none found
 * changes nothing. Done where the exit code is read (inspect), so every
 * caller of the REST exec, commands, sessions and kill execs alike, gets it. */
static void reap_exec(const sp_podman *p, const char *exec_id)
{
    if (!exec_id || !p->socket_path)
        return;
    /* "-u\0<id>\0": the option and its value, as whole arguments. */
    char needle[128];
    size_t idlen = strlen(exec_id);
    if (idlen + 4 > sizeof(needle))
        return;
    memcpy(needle, "-u", 3);
    memcpy(needle + 3, exec_id, idlen + 1);
    size_t nlen = idlen + 4;
    /* The exit code is on record a moment before conmon forks the child
     * that waits: look again, for up to 200 ms, while only its parent is. */
    for (int tries = 0; tries < 100; tries++) {
        if (tries) {
            struct timespec ts = {0, 2000000L};
            nanosleep(&ts, NULL);
        }
        if (reap_once(needle, nlen))
            return;
    }
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
        out->running = sp_json_bool(j, "Running", false);
        out->exit_code = (int)sp_json_int(j, "ExitCode", -1);
        out->pid = (int)sp_json_int(j, "Pid", 0);
        /* Over (one never started has no conmon, and costs one look). */
        if (!out->running)
            reap_exec(p, exec_id);
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
