/* The Kubernetes path over the Podman-backed fake API server
 * (tests/kube/fake_podman.py), in one run, on loopback:
 *
 *   create → Ready   a rendered Pod created, Ready seen on a watch (PODS Pods,
 *                    one after another; each but the first deleted once
 *                    its first command is done: the delete call timed);
 *   first command    from Ready (as the watch saw it) to the first `true`
 *                    finished through a fresh pods/exec of ours;
 *   tool round trip  one pods/exec stream to the peer container running
 *                    `sandpod peer connect`, MCP initialize, then N
 *                    tools/call of `shell` `true` and N of `read_file`;
 *   per-command exec a fresh pods/exec `true` of ours, interleaved with
 *                    `kubectl exec POD -c workload -- true` and with the
 *                    `podman exec` the fake itself runs for each exec
 *                    (the floor both stand on), EXEC_REPS each.
 *
 * Usage: bench_kube SERVER TOKEN_FILE CA_FILE POD_JSON KUBECONFIG N PODS EXEC_REPS
 *   > result.json   (progress on stderr; tests/bench/bench_kube.sh runs it)
 * Every Pod made is deleted before it exits, also on failure (the driver
 * removes what a killed run leaves, and the Pods' volumes). Every answer is checked: a failed call
 * ends the run rather than being timed. */
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "json.h"
#include "kube.h"
#include "kube_exec.h"
#include "kube_testutil.h"

extern char **environ;

static sp_kube *kube;
static char *made[32];
static size_t n_made;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void delete_all(void)
{
    for (size_t i = 0; i < n_made; i++) {
        sp_error *err = NULL;
        if (sp_kube_pod_delete(kube, made[i], 0, &err) < 0) {
            fprintf(stderr, "bench_kube: delete %s: %s\n", made[i], err->message);
            sp_error_free(err);
        }
        free(made[i]);
    }
    n_made = 0;
}

static _Noreturn void die(const char *what, sp_error *err)
{
    fprintf(stderr, "bench_kube: %s%s%s\n", what, err ? ": " : "", err ? err->message : "");
    sp_error_free(err);
    delete_all();
    exit(1);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *sorted, int n, double q)
{
    return sorted[(int)(q * (n - 1) + 0.5)];
}

/* "key": {"n", "p50_ms", "p90_ms", "p99_ms", "min_ms", "max_ms"} (sorts v). */
static void stats(const char *key, double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    double p50 = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    printf("  \"%s\": {\"n\": %d, \"p50_ms\": %.3f, \"p90_ms\": %.3f, \"p99_ms\": %.3f, "
           "\"min_ms\": %.3f, \"max_ms\": %.3f},\n",
           key, n, p50, pct(v, n, .90), pct(v, n, .99), v[0], v[n - 1]);
}

/* ------------------------------------------------------------ create → Ready */

typedef struct ready_wait {
    double t_ready;
} ready_wait;

static int on_event(sp_kube_event_type type, const cJSON *pod, void *ud, sp_error **err)
{
    ready_wait *w = ud;
    if (type == SP_KUBE_DELETED || !pod)
        return sp_err_set(err, SP_ERROR, 0, "the Pod went away while starting");
    sp_kube_pod_state st;
    if (sp_kube_pod_state_of(&st, pod, err) < 0)
        return -1;
    if (st.phase == SP_KUBE_POD_RUNNING && st.ready) {
        w->t_ready = now_ms();
        return 1;
    }
    if (st.phase == SP_KUBE_POD_FAILED || st.reason[0])
        return sp_err_set(err, SP_ERROR, 0, "the Pod cannot start: %s: %s", st.reason, st.message);
    return 0;
}

/* Create a Pod from pod_json; its name, *create_ms (create → Ready) and
 * *t_ready (the moment the watch saw Ready). */
static char *create_ready(const char *pod_json, double *create_ms, double *t_ready)
{
    cJSON *out = NULL;
    sp_error *err = NULL;
    double t0 = now_ms();
    if (sp_kube_pod_create(kube, pod_json, &out, &err) < 0)
        die("create", err);
    const char *name = sp_json_str(sp_json_get(out, "metadata"), "name");
    if (!name || n_made >= sizeof(made) / sizeof(made[0]))
        die("create: no name in the answer", NULL);
    made[n_made++] = sp_xstrdup(name);
    cJSON_Delete(out);
    ready_wait w = {0};
    if (sp_kube_pod_watch(kube, made[n_made - 1], 300000, on_event, &w, &err) < 0)
        die("wait ready", err);
    *t_ready = w.t_ready;
    *create_ms = w.t_ready - t0;
    return made[n_made - 1];
}

/* ------------------------------------------------------------- fresh exec */

/* A fresh pods/exec of `true` in the workload; its end time. */
static double exec_true(const char *pod)
{
    static const char *const argv[] = {"true", NULL};
    sp_kube_exec_spec s = {.pod = pod, .container = "workload", .argv = argv};
    sp_ws *ws = NULL;
    sp_error *err = NULL;
    if (sp_kube_exec_connect(&ws, kube, &s, &err) < 0)
        die("exec connect", err);
    sp_buf out = SP_BUF_INIT, errb = SP_BUF_INIT;
    int code = -1;
    unsigned close_code = 0;
    if (sp_kube_exec_collect(ws, &out, &errb, &code, &close_code, 60000, NULL, &err) < 0)
        die("exec", err);
    double t = now_ms();
    sp_ws_free(ws);
    if (code != 0 || out.len || errb.len) {
        fprintf(stderr, "bench_kube: exec true: exit %d, out [%s], err [%s]\n", code, out.data,
                errb.data);
        die("exec true failed", NULL);
    }
    sp_buf_dispose(&out);
    sp_buf_dispose(&errb);
    return t;
}

/* A command that must exit 0 (searched in PATH, stdin and stdout
 * /dev/null): its time. */
static double spawn_ms(const char *const *argv)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    double t0 = now_ms();
    pid_t pid;
    if (posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ) != 0)
        die(argv[0], NULL);
    int st = 0;
    waitpid(pid, &st, 0);
    double dt = now_ms() - t0;
    posix_spawn_file_actions_destroy(&fa);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "bench_kube: %s: status %d\n", argv[0], st);
        die("a command failed", NULL);
    }
    return dt;
}

/* ------------------------------------------------------ MCP over the peer */

typedef struct mcp {
    sp_ws *ws;
    sp_buf pending; /* stdout not yet split into lines */
} mcp;

static void mcp_send(mcp *m, const char *line)
{
    sp_error *err = NULL;
    if (sp_kube_exec_write(m->ws, line, strlen(line), &err) < 0)
        die("peer: write", err);
}

/* The next answer whose id is id (other lines, notifications, are
 * skipped); NULL when the stream ends first (the peer was not listening). */
static cJSON *mcp_answer(mcp *m, int id)
{
    for (;;) {
        char *nl;
        while ((nl = memchr(m->pending.data ? m->pending.data : "", '\n', m->pending.len))) {
            size_t n = (size_t)(nl - m->pending.data);
            cJSON *j = cJSON_ParseWithLength(m->pending.data, n);
            memmove(m->pending.data, nl + 1, m->pending.len - n - 1);
            m->pending.len -= n + 1;
            m->pending.data[m->pending.len] = '\0';
            cJSON *jid = j ? cJSON_GetObjectItemCaseSensitive(j, "id") : NULL;
            if (cJSON_IsNumber(jid) && (int)jid->valuedouble == id)
                return j;
            cJSON_Delete(j);
        }
        sp_ws_msg msg;
        sp_error *err = NULL;
        if (sp_ws_recv(m->ws, &msg, 60000, &err) < 0)
            die("peer: receive", err);
        if (msg.opcode == SP_WS_CLOSE)
            return NULL;
        int ch;
        const uint8_t *d;
        size_t n;
        if (sp_kube_exec_split(&ch, &d, &n, msg.data, msg.len, &err) < 0)
            die("peer: message", err);
        if (ch == SP_KUBE_STDOUT)
            sp_buf_add(&m->pending, d, n);
        else if (ch == SP_KUBE_STDERR)
            fprintf(stderr, "bench_kube: peer stderr: %.*s", (int)n, (const char *)d);
    }
}

/* Open the stream and initialize; 0, or -1 when the peer's socket is not
 * there yet (the command ended before answering). */
static int mcp_open(mcp *m, const char *pod)
{
    static const char *const argv[] = {"/sandpod/bin/sandpod",   "peer", "connect", "--socket",
                                       "/sandpod/run/peer.sock", NULL};
    sp_kube_exec_spec s = {.pod = pod, .container = "peer", .argv = argv, .stdin_open = true};
    sp_error *err = NULL;
    *m = (mcp){0};
    if (sp_kube_exec_connect(&m->ws, kube, &s, &err) < 0)
        die("peer: exec connect", err);
    mcp_send(m, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
                "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
                "\"clientInfo\":{\"name\":\"bench_kube\",\"version\":\"1\"}}}\n");
    cJSON *a = mcp_answer(m, 0);
    if (!a) {
        sp_ws_free(m->ws);
        sp_buf_dispose(&m->pending);
        return -1;
    }
    if (!cJSON_GetObjectItemCaseSensitive(a, "result"))
        die("peer: initialize failed", NULL);
    cJSON_Delete(a);
    mcp_send(m, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    return 0;
}

/* One tools/call; its time. The answer must be a result that is not an
 * error and (want non-NULL) whose text holds want. */
static double mcp_call(mcp *m, int id, const char *tool, const char *args, const char *want)
{
    cleanup_free char *line =
        sp_xasprintf("{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":"
                     "{\"name\":\"%s\",\"arguments\":%s}}\n",
                     id, tool, args);
    double t0 = now_ms();
    mcp_send(m, line);
    cJSON *a = mcp_answer(m, id);
    double dt = now_ms() - t0;
    if (!a)
        die("peer: the stream ended", NULL);
    cJSON *r = cJSON_GetObjectItemCaseSensitive(a, "result");
    cleanup_free char *txt = cJSON_PrintUnformatted(a);
    if (!r || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "isError")) ||
        (want && !strstr(txt, want))) {
        fprintf(stderr, "bench_kube: %s: %.300s\n", tool, txt);
        die("peer: a tool call failed", NULL);
    }
    cJSON_Delete(a);
    return dt;
}

static void mcp_close(mcp *m)
{
    sp_error *err = NULL;
    if (sp_kube_exec_close_stdin(m->ws, &err) < 0)
        sp_error_free(err);
    sp_ws_free(m->ws);
    sp_buf_dispose(&m->pending);
}

/* ------------------------------------------------------------------ main */

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        die("cannot read the Pod JSON", NULL);
    sp_buf b = SP_BUF_INIT;
    char chunk[4096];
    size_t k;
    while ((k = fread(chunk, 1, sizeof(chunk), f)) > 0)
        sp_buf_add(&b, chunk, k);
    fclose(f);
    return sp_buf_steal(&b);
}

int main(int argc, char **argv)
{
    if (argc != 9) {
        fprintf(stderr, "usage: bench_kube SERVER TOKEN_FILE CA_FILE POD_JSON KUBECONFIG N "
                        "PODS EXEC_REPS\n");
        return 2;
    }
    int n = (int)strtol(argv[6], NULL, 10), pods = (int)strtol(argv[7], NULL, 10),
        reps = (int)strtol(argv[8], NULL, 10);
    if (n < 1 || pods < 1 || pods > 1000 || reps < 1) {
        fprintf(stderr, "bench_kube: N and EXEC_REPS must be >= 1, PODS 1..1000\n");
        return 2;
    }
    const char *kubeconfig = argv[5];
    signal(SIGPIPE, SIG_IGN);
    sp_kube_creds c;
    sp_error *err = NULL;
    if (sp_kube_creds_explicit(&c, argv[1], argv[2], argv[3], "default", &err) < 0 ||
        sp_kube_open(&kube, &c, NULL, &err) < 0)
        die("open", err);
    cleanup_free char *pod_json = read_text(argv[4]);

    double *v_create = calloc((size_t)pods, sizeof(double));
    double *v_first = calloc((size_t)pods, sizeof(double));
    double *v_delete = calloc((size_t)pods, sizeof(double));
    double *v_shell = calloc((size_t)n, sizeof(double));
    double *v_read = calloc((size_t)n, sizeof(double));
    double *v_exec = calloc((size_t)reps, sizeof(double));
    double *v_kubectl = calloc((size_t)reps, sizeof(double));
    double *v_podman = calloc((size_t)reps, sizeof(double));
    if (!v_create || !v_first || !v_delete || !v_shell || !v_read || !v_exec || !v_kubectl ||
        !v_podman)
        die("out of memory", NULL);

    /* Pods one after another: create → Ready, the first command, and
     * (all but the first, which the rows below use) delete. */
    const char *pod = NULL;
    int n_deleted = 0;
    for (int i = 0; i < pods; i++) {
        double t_ready;
        const char *name = create_ready(pod_json, &v_create[i], &t_ready);
        v_first[i] = exec_true(name) - t_ready;
        fprintf(stderr, "bench_kube: pod %s: create → Ready %.0f ms, first command %.1f ms\n", name,
                v_create[i], v_first[i]);
        if (!pod) {
            pod = name;
            continue;
        }
        double t0 = now_ms();
        if (sp_kube_pod_delete(kube, name, 0, &err) < 0)
            die("delete", err);
        v_delete[n_deleted++] = now_ms() - t0;
        free(made[--n_made]);
    }

    /* The tool round trip on one open stream (the peer binds its socket
     * shortly after it starts: a stream that ends at once is retried). */
    mcp m;
    int tries = 0;
    while (mcp_open(&m, pod) < 0) {
        if (++tries == 100)
            die("peer: no MCP session after 100 tries", NULL);
        usleep(200000);
    }
    mcp_call(&m, 1, "write_file", "{\"path\":\"bench.txt\",\"content\":\"kube bench line\\n\"}",
             NULL);
    mcp_call(&m, 2, "shell", "{\"command\":\"true\"}", NULL); /* warm */
    for (int i = 0; i < n; i++)
        v_shell[i] = mcp_call(&m, 10 + i, "shell", "{\"command\":\"true\"}", NULL);
    for (int i = 0; i < n; i++)
        v_read[i] =
            mcp_call(&m, 10 + n + i, "read_file", "{\"path\":\"bench.txt\"}", "kube bench line");
    mcp_close(&m);
    fprintf(stderr, "bench_kube: %d shell and %d read_file calls done\n", n, n);

    /* Per-command exec: ours, kubectl's and, for scale, the `podman exec`
     * the fake runs for each of them (its floor), interleaved. */
    cleanup_free char *ctr = sp_xasprintf("%s-workload", pod);
    for (int i = 0; i < reps; i++) {
        double t0 = now_ms();
        v_exec[i] = exec_true(pod) - t0;
        const char *kc[] = {"kubectl", "--kubeconfig", kubeconfig, "exec", pod,
                            "-c",      "workload",     "--",       "true", NULL};
        v_kubectl[i] = spawn_ms(kc);
        const char *pm[] = {"podman", "exec", ctr, "true", NULL};
        v_podman[i] = spawn_ms(pm);
    }
    fprintf(stderr, "bench_kube: %d fresh execs each done\n", reps);

    printf("{\n");
    stats("create_ready", v_create, pods);
    stats("first_command", v_first, pods);
    if (n_deleted)
        stats("delete", v_delete, n_deleted);
    stats("tool_shell", v_shell, n);
    stats("tool_read_file", v_read, n);
    stats("exec_ours", v_exec, reps);
    stats("exec_kubectl", v_kubectl, reps);
    stats("exec_podman_floor", v_podman, reps);
    printf("  \"pods\": %d, \"n\": %d, \"exec_reps\": %d\n}\n", pods, n, reps);

    delete_all();
    sp_kube_free(kube);
    free(v_create);
    free(v_first);
    free(v_delete);
    free(v_shell);
    free(v_read);
    free(v_exec);
    free(v_kubectl);
    free(v_podman);
    return 0;
}
