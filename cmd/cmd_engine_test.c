/* sandpod engine test NAME: what an engine lets sandpod do, one timed
 * check at a time. Kubernetes: credentials, /version, a
 * SelfSubjectAccessReview per verb sandpod uses, then a probe Pod (created,
 * Ready, an exec in its workload, an MCP round trip through its peer,
 * deleted whatever happened). Podman: the service answers. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_engine.h"
#include "json.h"
#include "kube.h"
#include "kube_exec.h"
#include "render.h"

#define MAX_CHECKS 24

struct check {
    char name[48];
    bool ok;
    char *detail;
    int64_t ms;
};

struct run {
    struct check c[MAX_CHECKS];
    size_t n;
    bool json;
    const struct check *failed; /* the first check that failed */
};

/* Record one check that started at t0; detail is formatted. Prints its
 * line at once in text mode. Returns ok. */
static bool record(struct run *R, const char *name, bool ok, int64_t t0, const char *fmt, ...)
    CLI_PRINTF(5, 6);
static bool record(struct run *R, const char *name, bool ok, int64_t t0, const char *fmt, ...)
{
    if (R->n == MAX_CHECKS)
        return ok;
    struct check *c = &R->c[R->n++];
    snprintf(c->name, sizeof(c->name), "%s", name);
    c->ok = ok;
    c->ms = sp_now_ms() - t0;
    va_list ap;
    va_start(ap, fmt);
    c->detail = sp_xvasprintf(fmt, ap);
    va_end(ap);
    if (!ok && !R->failed)
        R->failed = c;
    if (!R->json) {
        printf("%-4s  %-26s %6" PRId64 " ms  %s\n", ok ? "ok" : "FAIL", c->name, c->ms, c->detail);
        fflush(stdout);
    }
    return ok;
}

/* An sp_error as a check's detail (freed). */
static bool record_err(struct run *R, const char *name, int64_t t0, sp_error *err)
{
    record(R, name, false, t0, "%s", err ? err->message : "failed");
    sp_error_free(err);
    return false;
}

static int finish(struct run *R, const char *engine)
{
    bool ok = R->n > 0 && !R->failed;
    int rc = ok ? CLI_EXIT_OK : CLI_EXIT_ERROR;
    if (R->json) {
        cJSON *res = cJSON_CreateObject();
        cJSON *arr = cJSON_CreateArray();
        bool good = res && arr && cJSON_AddBoolToObject(res, "ok", ok) &&
                    sp_json_add(res, "engine", cJSON_CreateString(engine));
        for (size_t i = 0; good && i < R->n; i++) {
            cJSON *o = cJSON_CreateObject();
            good = o && cJSON_AddItemToArray(arr, o) &&
                   sp_json_add(o, "name", cJSON_CreateString(R->c[i].name)) &&
                   cJSON_AddBoolToObject(o, "ok", R->c[i].ok) &&
                   sp_json_add(o, "detail", cJSON_CreateString(R->c[i].detail)) &&
                   cJSON_AddNumberToObject(o, "ms", (double)R->c[i].ms);
        }
        good = good && sp_json_add(res, "checks", arr);
        if (!good)
            cJSON_Delete(arr);
        if (cli_print_json(sp_json_finish(res, good)) != 0)
            rc = CLI_EXIT_ERROR;
    }
    if (R->failed)
        cli_error("engine test %s: check '%s' failed: %s", engine, R->failed->name,
                  R->failed->detail);
    for (size_t i = 0; i < R->n; i++)
        free(R->c[i].detail);
    return rc;
}

/* ------------------------------------------------------------- podman -- */

static void test_podman(struct run *R, const sp_engine *e, const struct cli_engine_test *t)
{
    int64_t t0 = sp_now_ms();
    sp_podman_opts po = SP_PODMAN_OPTS_INIT;
    po.url = e->podman_url ? e->podman_url : t->url;
    po.state_root = t->state_root;
    sp_podman *p = NULL;
    sp_error *err = NULL;
    if (sp_podman_open(&p, &po, &err) < 0) {
        record_err(R, "service", t0, err);
        return;
    }
    if (sp_podman_ping(p, &err) < 0)
        record_err(R, "service", t0, err);
    else
        record(R, "service", true, t0, "%s answers _ping", sp_podman_url(p));
    t0 = sp_now_ms();
    sp_podman_version *v = NULL;
    if (sp_podman_get_version(&v, p, &err) < 0) {
        record_err(R, "version", t0, err);
    } else {
        record(R, "version", true, t0, "Podman %s (API %s)%s%s", v->version, v->api_version,
               v->runtime ? ", " : "", v->runtime ? v->runtime : "");
        sp_podman_version_free(v);
    }
    t0 = sp_now_ms();
    const sp_container_host *h = NULL;
    if (sp_podman_host_info(&h, p, &err) < 0)
        record_err(R, "host", t0, err);
    else
        record(R, "host", true, t0, "%s, cgroup v%d, limits %s",
               h->rootless ? "rootless" : "rootful", h->cgroup_version,
               h->limits_apply ? "apply" : "do not apply");
    sp_podman_free(p);
}

/* --------------------------------------------------------- kubernetes -- */

/* A SelfSubjectAccessReview: *allowed. */
static int can_i(bool *allowed, sp_kube *k, const char *group, const char *verb,
                 const char *resource, const char *sub, sp_error **err)
{
    cJSON *ra = cJSON_CreateObject();
    cJSON_AddStringToObject(ra, "namespace", sp_kube_namespace(k));
    if (group)
        cJSON_AddStringToObject(ra, "group", group);
    cJSON_AddStringToObject(ra, "verb", verb);
    cJSON_AddStringToObject(ra, "resource", resource);
    if (sub)
        cJSON_AddStringToObject(ra, "subresource", sub);
    cJSON *body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "apiVersion", "authorization.k8s.io/v1");
    cJSON_AddStringToObject(body, "kind", "SelfSubjectAccessReview");
    cJSON_AddItemToObject(cJSON_AddObjectToObject(body, "spec"), "resourceAttributes", ra);
    char *text = cJSON_PrintUnformatted(body);
    cJSON_Delete(body);
    cJSON *out = NULL;
    int r = sp_kube_call(k, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", text,
                         &out, "SelfSubjectAccessReview", err);
    cJSON_free(text);
    if (r == 0) {
        const cJSON *st = sp_json_get(out, "status");
        if (!cJSON_IsBool(sp_json_get(st, "allowed")))
            r = sp_err_set(err, SP_ERROR, 0, "SelfSubjectAccessReview: no status.allowed");
        *allowed = sp_json_bool(st, "allowed", false);
    }
    cJSON_Delete(out);
    return r;
}

/* What an exec gave. */
struct exec_out {
    sp_buf out, err;
    int code;
};

/* Read the exec's channels until the server closes, stop() says so (it
 * sees stdout so far), or the deadline. */
static int exec_read(sp_ws *ws, struct exec_out *x, int timeout_ms, bool (*stop)(const sp_buf *),
                     sp_error **err)
{
    return sp_kube_exec_collect(ws, &x->out, &x->err, &x->code, NULL, timeout_ms, stop, err) < 0
               ? -1
               : 0;
}

static const char *const version_argv[] = {SP_KUBE_SANDPOD_BIN, "version", NULL};
static const char *const protections_argv[] = {SP_KUBE_SANDPOD_BIN, "peer", "protections",
                                               "network", NULL};
static const char *const connect_argv[] = {SP_KUBE_SANDPOD_BIN, "peer", "connect", "--socket",
                                           SP_KUBE_PEER_SOCKET, NULL};

/* A command in the workload: exec works there (the image has sandpod, not
 * a shell: `sandpod version` is its `true`). */
static bool probe_exec(struct run *R, sp_kube *k, const char *pod)
{
    int64_t t0 = sp_now_ms();
    sp_kube_exec_spec s = {.pod = pod, .container = "workload", .argv = version_argv};
    sp_ws *ws = NULL;
    sp_error *err = NULL;
    if (sp_kube_exec_connect(&ws, k, &s, &err) < 0)
        return record_err(R, "exec in workload", t0, err);
    struct exec_out x = {SP_BUF_INIT, SP_BUF_INIT, -1};
    int r = exec_read(ws, &x, 30000, NULL, &err);
    sp_ws_free(ws);
    bool ok = r == 0 && x.code == 0;
    if (r < 0)
        record_err(R, "exec in workload", t0, err);
    else
        record(R, "exec in workload", ok, t0, "%s version: exit %d%s%.*s", version_argv[0], x.code,
               x.err.len ? ", " : "", (int)(x.err.len > 200 ? 200 : x.err.len),
               x.err.data ? x.err.data : "");
    sp_buf_dispose(&x.out);
    sp_buf_dispose(&x.err);
    return ok;
}

/* Whether the probe Pod, under a NetworkPolicy that allows it no egress
 * (np: its name; NULL when none could be made), reached the API service
 * directly. It informs: a cluster that does not enforce policies is
 * refused for sandboxes with egress rules at create. */
static void report_netpol(struct run *R, int64_t t0, const cJSON *o, const char *np)
{
    const char *v = sp_json_str_or(o, "direct_network", "untested");
    const char *target = sp_json_str_or(o, "direct_target", "");
    if (!np)
        return; /* said when making it failed */
    if (strcmp(v, "reached") == 0)
        record(R, "network policy", true, t0,
               "NOT enforced: the probe Pod, allowed no egress by %s, reached the API service at "
               "%s; a sandbox with egress rules is refused unless the engine accepts netpol",
               np, target);
    else if (strcmp(v, "blocked") == 0)
        record(R, "network policy", true, t0,
               "enforced: the probe Pod, allowed no egress by %s, could not reach the API service "
               "at %s",
               np, target);
    else
        record(R, "network policy", true, t0,
               "not tried (the probe Pod has no KUBERNETES_SERVICE_HOST to connect to)");
}

/* What the probe's workload is kept from (`sandpod peer protections` in
 * it), said beside what a local sandbox has: a user namespace of its own,
 * and a seccomp profile that refuses keyctl and new user namespaces; and
 * whether NetworkPolicies hold (report_netpol()). It informs; it fails
 * only when it cannot be learnt. */
static void probe_protections(struct run *R, sp_kube *k, const char *pod, const char *np)
{
    int64_t t0 = sp_now_ms();
    sp_kube_exec_spec s = {.pod = pod, .container = "workload", .argv = protections_argv};
    sp_ws *ws = NULL;
    sp_error *err = NULL;
    if (sp_kube_exec_connect(&ws, k, &s, &err) < 0) {
        record_err(R, "protections", t0, err);
        return;
    }
    struct exec_out x = {SP_BUF_INIT, SP_BUF_INIT, -1};
    int r = exec_read(ws, &x, 30000, NULL, &err);
    sp_ws_free(ws);
    cJSON *o = r == 0 && x.code == 0 && x.out.len ? sp_json_parse(x.out.data, x.out.len) : NULL;
    if (r < 0) {
        record_err(R, "protections", t0, err);
    } else if (!o) {
        record(R, "protections", false, t0, "sandpod peer protections: exit %d%s%.*s", x.code,
               x.err.len ? ", " : "", (int)(x.err.len > 200 ? 200 : x.err.len),
               x.err.data ? x.err.data : "");
    } else {
        bool userns = sp_json_bool(o, "user_namespace", false);
        bool keyctl = sp_json_bool(o, "keyctl", true);
        bool nested = sp_json_bool(o, "new_user_namespace", true);
        sp_buf weaker = SP_BUF_INIT;
        if (!userns)
            sp_buf_adds(&weaker, ", no user namespace");
        if (keyctl)
            sp_buf_adds(&weaker, ", keyctl allowed");
        if (nested)
            sp_buf_adds(&weaker, ", new user namespaces allowed");
        record(R, "protections", true, t0,
               "user namespace: %s (uid_map %s); seccomp: %s; keyctl: %s; new user namespaces: "
               "%s; %s%s",
               userns ? "yes" : "no, the node's ids", sp_json_str_or(o, "uid_map", "?"),
               sp_json_str_or(o, "seccomp", "?"), keyctl ? "allowed" : "refused",
               nested ? "allowed" : "refused",
               weaker.len ? "weaker than a local sandbox: " : "as a local sandbox",
               weaker.len ? weaker.data + 2 : "");
        sp_buf_dispose(&weaker);
        report_netpol(R, sp_now_ms(), o, np);
    }
    cJSON_Delete(o);
    sp_buf_dispose(&x.out);
    sp_buf_dispose(&x.err);
}

/* The serverInfo name of the initialize answer (id 1) and the number of
 * tools of the tools/list one (id 2) in stdout's lines; whether id 2
 * was answered. */
static bool mcp_parse(const sp_buf *out, char *server, size_t size, int *tools)
{
    bool answered = false;
    *server = '\0';
    *tools = -1;
    const char *p = out->data, *end = out->data + out->len;
    while (p && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        cJSON *m = sp_json_parse(p, nl ? (size_t)(nl - p) : (size_t)(end - p));
        const cJSON *res = sp_json_get(m, "result");
        int64_t id = sp_json_int(m, "id", -1);
        const cJSON *info = sp_json_get(res, "serverInfo");
        if (id == 1 && sp_json_str(info, "name"))
            snprintf(server, size, "%s %s", sp_json_str(info, "name"),
                     sp_json_str_or(info, "version", ""));
        else if (id == 2 && cJSON_IsArray(sp_json_get(res, "tools")))
            *tools = cJSON_GetArraySize(sp_json_get(res, "tools"));
        answered = answered || id == 2;
        cJSON_Delete(m);
        p = nl ? nl + 1 : NULL;
    }
    return answered;
}

/* The answer to tools/list (id 2), a result or an error, has arrived. */
static bool have_tools_answer(const sp_buf *out)
{
    char server[8];
    int tools;
    return mcp_parse(out, server, sizeof(server), &tools);
}

/* One MCP session: initialize + tools/list through `sandpod peer connect`
 * in the peer; *server and *tools from the answers (x keeps the output). */
static int mcp_once(sp_kube *k, const char *pod, struct exec_out *x, sp_error **err)
{
    sp_kube_exec_spec s = {
        .pod = pod, .container = "peer", .argv = connect_argv, .stdin_open = true};
    sp_ws *ws = NULL;
    if (sp_kube_exec_connect(&ws, k, &s, err) < 0)
        return -1;
    static const char req[] =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
        "\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"sandpod-engine-test\","
        "\"version\":\"1\"}}}\n"
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
        "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n";
    int r = sp_kube_exec_write(ws, req, sizeof(req) - 1, err);
    if (r == 0)
        r = exec_read(ws, x, 30000, have_tools_answer, err);
    if (r == 0 && have_tools_answer(&x->out)) {
        if (strcmp(sp_ws_protocol(ws), SP_KUBE_PROTO_V5) == 0)
            sp_kube_exec_close_stdin(ws, NULL);
        sp_ws_close(ws, 1000, "", NULL);
    }
    sp_ws_free(ws);
    return r;
}

/* The MCP round trip. The peer binds its socket a moment after it starts
 * (the Pod may be Ready first): a session that ends with no answer and a
 * failing exit is tried again for up to 20 s. */
static bool probe_mcp(struct run *R, sp_kube *k, const char *pod)
{
    int64_t t0 = sp_now_ms();
    for (;;) {
        struct exec_out x = {SP_BUF_INIT, SP_BUF_INIT, -1};
        sp_error *err = NULL;
        int r = mcp_once(k, pod, &x, &err);
        char server[128];
        int tools;
        mcp_parse(&x.out, server, sizeof(server), &tools);
        bool ok = r == 0 && *server && tools > 0;
        bool again = !ok && r == 0 && x.out.len == 0 && x.code != 0 && sp_now_ms() - t0 < 20000;
        if (ok)
            record(R, "mcp through peer", true, t0, "initialize: %s; tools/list: %d tools", server,
                   tools);
        else if (r < 0)
            record_err(R, "mcp through peer", t0, err);
        else if (!again)
            record(R, "mcp through peer", false, t0, "no %s answer (exit %d)%s%.*s",
                   *server ? "tools/list" : "initialize", x.code, x.err.len ? ": " : "",
                   (int)(x.err.len > 200 ? 200 : x.err.len), x.err.data ? x.err.data : "");
        sp_buf_dispose(&x.out);
        sp_buf_dispose(&x.err);
        if (!again)
            return ok;
        struct timespec ts = {0, 200 * 1000000};
        nanosleep(&ts, NULL);
    }
}

static void probe(struct run *R, sp_kube *k, const sp_engine *e, const struct cli_engine_test *t)
{
    int64_t t0 = sp_now_ms();
    const char *image = e->image ? e->image : SP_KUBE_DEFAULT_IMAGE;
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.name = "engine-probe";
    o.image = image;
    sp_kube_render_opts ro = SP_KUBE_RENDER_OPTS_INIT;
    ro.sandpod_image = image;
    ro.runtime_class = e->runtime_class;
    /* A probe left behind (sandpod killed) ends by itself soon. */
    ro.deadline_seconds = t->timeout_s + 300;
    char *spec = NULL;
    cJSON *made = NULL;
    sp_error *err = NULL;
    /* The probe is a sandbox whose rules allow it nothing: a NetworkPolicy
     * with no egress over it, made first, and a proxy address where none
     * listens. Without the policy (not allowed here), a plain probe. */
    char np_id[24], *np = NULL;
    snprintf(np_id, sizeof(np_id), "spx-%06x%06x", (unsigned)(sp_now_ms() & 0xffffff),
             (unsigned)getpid() & 0xffffff);
    ro.egress_id = np_id;
    char *np_spec = sp_kube_render_netpol_deny(&ro);
    if (sp_kube_netpol_create(k, np_spec, &err) == 0) {
        np = sp_xasprintf("%s-deny", np_id);
        ro.egress_addr = "127.0.0.1";
    } else {
        record(R, "network policy", true, t0, "not tried: cannot make a NetworkPolicy: %s",
               err ? err->message : "failed");
        sp_error_free(err);
        err = NULL;
        ro.egress_id = NULL;
    }
    free(np_spec);
    if (sp_kube_render_pod(&spec, &o, &ro, &err) < 0 ||
        sp_kube_pod_create(k, spec, &made, &err) < 0) {
        free(spec);
        record_err(R, "probe pod create", t0, err);
        if (np)
            sp_kube_netpol_delete(k, np, NULL);
        free(np);
        return;
    }
    free(spec);
    char *pod = sp_xstrdup(sp_json_str_or(sp_json_get(made, "metadata"), "name", ""));
    cJSON_Delete(made);
    record(R, "probe pod create", true, t0, "%s (image %s)", pod, image);

    t0 = sp_now_ms();
    bool ok = true;
    if (sp_kube_pod_wait_ready(k, pod, t->timeout_s * 1000, &err) < 0)
        ok = record_err(R, "probe pod ready", t0, err);
    else
        record(R, "probe pod ready", true, t0, "Running and Ready");
    if (ok)
        ok = probe_exec(R, k, pod);
    if (ok)
        probe_protections(R, k, pod, np);
    if (ok)
        probe_mcp(R, k, pod);

    t0 = sp_now_ms();
    if (sp_kube_pod_delete(k, pod, 0, &err) < 0)
        record_err(R, "probe pod delete", t0, err);
    else
        record(R, "probe pod delete", true, t0, "%s deleted", pod);
    if (np && sp_kube_netpol_delete(k, np, &err) < 0)
        record_err(R, "probe policy delete", sp_now_ms(), err);
    free(np);
    free(pod);
}

static void test_kube(struct run *R, const sp_engine *e, const struct cli_engine_test *t)
{
    int64_t t0 = sp_now_ms();
    sp_kube_opts ko = SP_KUBE_OPTS_INIT;
    ko.timeout_ms = 15000;
    ko.max_retries = 2;
    sp_kube *k = NULL;
    sp_error *err = NULL;
    if (sp_kube_open_engine(&k, e, &ko, &err) < 0) {
        record_err(R, "credentials", t0, err);
        return;
    }
    record(R, "credentials", true, t0, "%s, namespace %s", sp_kube_server(k), sp_kube_namespace(k));

    t0 = sp_now_ms();
    cJSON *v = NULL;
    if (sp_kube_call(k, "GET", "/version", NULL, &v, "server version", &err) < 0) {
        record_err(R, "server version", t0, err);
        sp_kube_free(k);
        return;
    }
    record(R, "server version", true, t0, "Kubernetes %s (%s)",
           sp_json_str_or(v, "gitVersion", "?"), sp_json_str_or(v, "platform", "?"));
    cJSON_Delete(v);

    static const struct {
        const char *verb, *res, *sub;
    } verbs[] = {{"create", "pods", NULL}, {"get", "pods", NULL},    {"list", "pods", NULL},
                 {"watch", "pods", NULL},  {"delete", "pods", NULL}, {"create", "pods", "exec"},
                 {"get", "pods", "exec"},  {"list", "events", NULL}};
    bool all = true;
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
        t0 = sp_now_ms();
        char name[48];
        snprintf(name, sizeof(name), "can %s %s%s%s", verbs[i].verb, verbs[i].res,
                 verbs[i].sub ? "/" : "", verbs[i].sub ? verbs[i].sub : "");
        bool allowed = false;
        if (can_i(&allowed, k, NULL, verbs[i].verb, verbs[i].res, verbs[i].sub, &err) < 0)
            all = record_err(R, name, t0, err);
        else if (!record(R, name, allowed, t0, "%s in namespace %s", allowed ? "allowed" : "denied",
                         sp_kube_namespace(k)))
            all = false;
    }
    /* Only sandboxes with egress rules need these: said, never failed. */
    static const char *const np_verbs[] = {"create", "delete"};
    for (size_t i = 0; i < 2; i++) {
        t0 = sp_now_ms();
        char name[48];
        snprintf(name, sizeof(name), "can %s networkpolicies", np_verbs[i]);
        bool allowed = false;
        if (can_i(&allowed, k, "networking.k8s.io", np_verbs[i], "networkpolicies", NULL, &err) < 0)
            all = record_err(R, name, t0, err);
        else
            record(R, name, true, t0, "%s in namespace %s%s", allowed ? "allowed" : "denied",
                   sp_kube_namespace(k),
                   allowed ? "" : " (sandboxes with egress rules cannot be made)");
    }
    if (!t->no_probe) {
        if (all)
            probe(R, k, e, t);
        else if (!R->json)
            printf("      (no probe Pod: sandpod may not do what it needs)\n");
    }
    sp_kube_free(k);
}

int cli_engine_test(const struct cli_engine_test *t)
{
    sp_engine *e = NULL;
    sp_error *err = NULL;
    int r = sp_engine_get(&e, t->state_root, t->name, &err);
    if (r < 0)
        return cli_fail(t->json, r, err);
    struct run R = {.json = t->json};
    if (!t->json)
        printf("engine %s (%s)\n", e->name, sp_engine_kind_name(e->kind));
    if (e->kind == SP_ENGINE_KUBERNETES)
        test_kube(&R, e, t);
    else
        test_podman(&R, e, t);
    r = finish(&R, e->name);
    sp_engine_free(e);
    return r;
}
