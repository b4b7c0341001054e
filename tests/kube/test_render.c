/* sp_kube_render_pod(): every hardening field of SCALE-OUT.md §4.2 for the
 * defaults and for relaxed options, and refusals of what a Pod cannot
 * carry. The manifest is parsed back and read field by field. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "json.h"
#include "render.h"
#include "testutil.h"

static cJSON *render(const sp_sandbox_opts *o, const sp_kube_render_opts *ro)
{
    char *text = NULL;
    sp_error *err = NULL;
    int r = sp_kube_render_pod(&text, o, ro, &err);
    if (r < 0)
        fail_msg("render: %s", err ? err->message : "?");
    cJSON *pod = sp_json_parse(text, strlen(text));
    assert_non_null(pod);
    free(text);
    return pod;
}

/* The error of a render that must fail, with its code checked. */
static char *refused(const sp_sandbox_opts *o, const sp_kube_render_opts *ro)
{
    char *text = NULL;
    sp_error *err = NULL;
    int r = sp_kube_render_pod(&text, o, ro, &err);
    assert_int_equal(r, SP_EINVAL);
    assert_null(text);
    assert_non_null(err);
    char *msg = strdup(err->message);
    sp_error_free(err);
    return msg;
}

/* a/b/c through objects; "#N" takes element N of an array. */
static const cJSON *at(const cJSON *o, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    char *save = NULL;
    for (char *k = strtok_r(buf, "/", &save); k && o; k = strtok_r(NULL, "/", &save))
        o = k[0] == '#' ? cJSON_GetArrayItem(o, (int)strtol(k + 1, NULL, 10))
                        : cJSON_GetObjectItemCaseSensitive(o, k);
    return o;
}

static const char *str_at(const cJSON *o, const char *path)
{
    const cJSON *v = at(o, path);
    if (!cJSON_IsString(v))
        fail_msg("%s: not a string", path);
    return v->valuestring;
}

static double num_at(const cJSON *o, const char *path)
{
    const cJSON *v = at(o, path);
    if (!cJSON_IsNumber(v))
        fail_msg("%s: not a number", path);
    return v->valuedouble;
}

static void assert_bool_at(const cJSON *o, const char *path, bool want)
{
    const cJSON *v = at(o, path);
    if (!cJSON_IsBool(v))
        fail_msg("%s: not a boolean", path);
    assert_int_equal(cJSON_IsTrue(v), want);
}

/* The container named `name` of containers or initContainers. */
static const cJSON *container(const cJSON *pod, const char *list, const char *name)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, at(pod, list)) if (strcmp(str_at(c, "name"), name) == 0) return c;
    fail_msg("no container %s in %s", name, list);
    return NULL;
}

/* The volume mounted at `path` in container c, or NULL. */
static const cJSON *mount_at(const cJSON *c, const char *path)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, at(c, "volumeMounts")) if (strcmp(str_at(m, "mountPath"), path) ==
                                                     0) return m;
    return NULL;
}

static const cJSON *volume(const cJSON *pod, const char *name)
{
    const cJSON *v;
    cJSON_ArrayForEach(v,
                       at(pod, "spec/volumes")) if (strcmp(str_at(v, "name"), name) == 0) return v;
    fail_msg("no volume %s", name);
    return NULL;
}

static void assert_hardened(const cJSON *c, double uid, bool ro_root)
{
    assert_int_equal((int)num_at(c, "securityContext/runAsUser"), (int)uid);
    assert_int_equal((int)num_at(c, "securityContext/runAsGroup"), (int)uid);
    assert_bool_at(c, "securityContext/runAsNonRoot", uid != 0);
    assert_bool_at(c, "securityContext/allowPrivilegeEscalation", false);
    assert_bool_at(c, "securityContext/readOnlyRootFilesystem", ro_root);
    assert_int_equal(cJSON_GetArraySize(at(c, "securityContext/capabilities/drop")), 1);
    assert_string_equal(str_at(c, "securityContext/capabilities/drop/#0"), "ALL");
}

static void test_defaults(void **state)
{
    (void)state;
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.name = "box";
    cJSON *pod = render(&o, NULL);
    assert_string_equal(str_at(pod, "apiVersion"), "v1");
    assert_string_equal(str_at(pod, "kind"), "Pod");
    assert_string_equal(str_at(pod, "metadata/generateName"), "sp-box-");
    assert_null(at(pod, "metadata/name"));
    assert_null(at(pod, "metadata/namespace"));
    assert_string_equal(str_at(pod, "metadata/labels/sandpod"), "1");
    assert_string_equal(str_at(pod, "metadata/labels/sandpod.name"), "box");
    const char *gaps = str_at(pod, "metadata/annotations/sandpod.gaps");
    assert_string_equal(gaps, "pids=256,rlimits,network=none,seccomp,userns");
    assert_null(at(pod, "metadata/annotations/sandpod.env-pass"));

    assert_string_equal(str_at(pod, "spec/restartPolicy"), "Never");
    assert_int_equal((int)num_at(pod, "spec/activeDeadlineSeconds"), 7200);
    assert_bool_at(pod, "spec/automountServiceAccountToken", false);
    assert_bool_at(pod, "spec/enableServiceLinks", false);
    assert_null(at(pod, "spec/hostNetwork"));
    assert_null(at(pod, "spec/runtimeClassName"));
    assert_null(at(pod, "spec/shareProcessNamespace"));
    assert_bool_at(pod, "spec/securityContext/runAsNonRoot", true);
    assert_string_equal(str_at(pod, "spec/securityContext/seccompProfile/type"), "RuntimeDefault");

    const cJSON *w = container(pod, "spec/containers", "workload");
    assert_string_equal(str_at(w, "image"), SP_DEFAULT_IMAGE);
    assert_string_equal(str_at(w, "command/#0"), "/.sandpod/bin/agent");
    assert_string_equal(str_at(w, "command/#1"), "/.sandpod/run");
    assert_int_equal(cJSON_GetArraySize(at(w, "command")), 2);
    assert_string_equal(str_at(w, "workingDir"), "/workspace");
    assert_null(at(w, "env"));
    assert_null(at(w, "securityContext/capabilities/add"));
    assert_hardened(w, 1000, true);
    const char *lim[] = {"resources/limits", "resources/requests"};
    for (int i = 0; i < 2; i++) {
        char p[64];
        snprintf(p, sizeof(p), "%s/memory", lim[i]);
        assert_string_equal(str_at(w, p), "1Gi");
        snprintf(p, sizeof(p), "%s/cpu", lim[i]);
        assert_string_equal(str_at(w, p), "1");
    }
    /* The agent is read-only to the workload; the store is not there. */
    assert_bool_at(mount_at(w, "/.sandpod/bin"), "readOnly", true);
    assert_string_equal(str_at(mount_at(w, "/.sandpod/bin"), "name"), "bin");
    assert_null(at(mount_at(w, "/workspace"), "readOnly"));
    assert_non_null(mount_at(w, "/.sandpod/run"));
    assert_string_equal(str_at(mount_at(w, "/tmp"), "name"), "tmp");
    const cJSON *m;
    cJSON_ArrayForEach(m, at(w, "volumeMounts"))
    {
        assert_string_not_equal(str_at(m, "name"), "store");
        assert_string_not_equal(str_at(m, "name"), "peer-run");
    }
    assert_string_equal(str_at(volume(pod, "tmp"), "emptyDir/medium"), "Memory");
    assert_string_equal(str_at(volume(pod, "tmp"), "emptyDir/sizeLimit"), "64Mi");
    assert_non_null(at(volume(pod, "store"), "emptyDir"));

    const cJSON *init = container(pod, "spec/initContainers", "install-agent");
    assert_string_equal(str_at(init, "image"), SP_KUBE_DEFAULT_IMAGE);
    assert_string_equal(str_at(init, "command/#2"), "install-agent");
    assert_string_equal(str_at(init, "command/#3"), "/.sandpod/bin");
    assert_hardened(init, 1000, true);
    assert_null(at(mount_at(init, "/.sandpod/bin"), "readOnly"));

    const cJSON *p = container(pod, "spec/containers", "peer");
    assert_string_equal(str_at(p, "image"), SP_KUBE_DEFAULT_IMAGE);
    assert_string_equal(str_at(p, "command/#1"), "peer");
    assert_string_equal(str_at(p, "command/#2"), "serve");
    assert_string_equal(str_at(p, "command/#9"), "--agent");
    assert_string_equal(str_at(p, "command/#10"), "/.sandpod/run/agent.sock");
    assert_string_equal(str_at(p, "command/#11"), "--agent-uid");
    assert_string_equal(str_at(p, "command/#12"), "1000");
    assert_hardened(p, 1000, true);
    assert_string_equal(str_at(mount_at(p, "/sandpod/store"), "name"), "store");
    assert_string_equal(str_at(mount_at(p, "/workspace"), "name"), "workspace");
    assert_non_null(mount_at(p, "/sandpod/run"));
    assert_null(mount_at(p, "/.sandpod/bin"));
    cJSON_Delete(pod);
}

static void test_relaxed(void **state)
{
    (void)state;
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.name = "relaxed-1";
    o.image = "python:3.12";
    o.user = "0:0";
    o.memory_bytes = 3ull << 29; /* 1.5 GiB */
    o.nano_cpus = 1500000001;    /* rounded up to a millicore */
    o.tmpfs_bytes = 1000;
    o.writable_root = true;
    o.network = SP_NET_HOST;
    o.seccomp = SP_SECCOMP_UNCONFINED;
    o.pids_limit = -1;
    o.pull = SP_PULL_ALWAYS;
    o.workdir = "/src";
    const char *caps[] = {"cap_net_raw", "CHOWN", NULL};
    const char *env[] = {"A=1", "B=x=y", NULL};
    const char *pass[] = {"TOKEN", "OTHER", NULL};
    o.cap_add = caps;
    o.env = env;
    o.env_pass = pass;
    setenv("TOKEN", "secret-value-123", 1);
    sp_kube_render_opts ro = SP_KUBE_RENDER_OPTS_INIT;
    ro.ns = "rl-eval";
    ro.sandpod_image = "registry.example.com/sandpod:9";
    ro.deadline_seconds = -1;
    ro.runtime_class = "gvisor";
    char *text = NULL;
    sp_error *err = NULL;
    assert_int_equal(sp_kube_render_pod(&text, &o, &ro, &err), 0);
    assert_null(strstr(text, "secret-value-123"));
    cJSON *pod = sp_json_parse(text, strlen(text));
    free(text);
    assert_string_equal(str_at(pod, "metadata/namespace"), "rl-eval");
    assert_string_equal(str_at(pod, "metadata/annotations/sandpod.env-pass"), "TOKEN,OTHER");
    const char *gaps = str_at(pod, "metadata/annotations/sandpod.gaps");
    assert_string_equal(gaps, "rlimits,userns");
    assert_null(at(pod, "spec/activeDeadlineSeconds"));
    assert_bool_at(pod, "spec/hostNetwork", true);
    assert_string_equal(str_at(pod, "spec/runtimeClassName"), "gvisor");
    assert_bool_at(pod, "spec/securityContext/runAsNonRoot", false);
    assert_string_equal(str_at(pod, "spec/securityContext/seccompProfile/type"), "Unconfined");
    /* Still fixed when relaxed: */
    assert_bool_at(pod, "spec/automountServiceAccountToken", false);
    assert_bool_at(pod, "spec/enableServiceLinks", false);

    const cJSON *w = container(pod, "spec/containers", "workload");
    assert_string_equal(str_at(w, "image"), "python:3.12");
    assert_string_equal(str_at(w, "imagePullPolicy"), "Always");
    assert_string_equal(str_at(w, "workingDir"), "/src");
    assert_hardened(w, 0, false);
    assert_string_equal(str_at(w, "securityContext/capabilities/add/#0"), "NET_RAW");
    assert_string_equal(str_at(w, "securityContext/capabilities/add/#1"), "CHOWN");
    assert_string_equal(str_at(w, "resources/limits/memory"), "1536Mi");
    assert_string_equal(str_at(w, "resources/requests/cpu"), "1501m");
    assert_string_equal(str_at(w, "env/#1/name"), "B");
    assert_string_equal(str_at(w, "env/#1/value"), "x=y");
    assert_int_equal(cJSON_GetArraySize(at(w, "env")), 2);
    assert_string_equal(str_at(volume(pod, "tmp"), "emptyDir/sizeLimit"), "1000");
    /* The sandpod containers keep their hardening whatever the workload's. */
    const cJSON *p = container(pod, "spec/containers", "peer");
    assert_string_equal(str_at(p, "image"), "registry.example.com/sandpod:9");
    assert_hardened(p, 1000, true);
    assert_hardened(container(pod, "spec/initContainers", "install-agent"), 1000, true);
    cJSON_Delete(pod);

    /* No limit at all: no resources for the workload. */
    sp_sandbox_opts u = SP_SANDBOX_OPTS_INIT;
    u.memory_bytes = UINT64_MAX;
    u.nano_cpus = UINT64_MAX;
    pod = render(&u, NULL);
    w = container(pod, "spec/containers", "workload");
    assert_null(at(w, "resources/limits"));
    /* Podman's kube play takes annotation values of 63 characters at most. */
    cJSON_Delete(pod);
    u.pids_limit = INT64_MAX;
    pod = render(&u, NULL);
    assert_true(strlen(str_at(pod, "metadata/annotations/sandpod.gaps")) <= 63);
    /* A generated name, as sp_sandbox_create() makes one. */
    const char *gen = str_at(pod, "metadata/labels/sandpod.name");
    assert_int_equal(strlen(gen), 11);
    assert_memory_equal(gen, "sp-", 3);
    cJSON_Delete(pod);
}

static void test_refused(void **state)
{
    (void)state;
    struct {
        const char *what;
        sp_sandbox_opts o;
        sp_kube_render_opts ro;
        const char *says;
    } cases[] = {
        {"upper case", {.version = 1, .name = "Box"}, {.version = 1}, "lowercase"},
        {"underscore", {.version = 1, .name = "a_b"}, {.version = 1}, "'a_b'"},
        {"trailing dot", {.version = 1, .name = "ab."}, {.version = 1}, "'ab.'"},
        {"user name", {.version = 1, .user = "sandbox"}, {.version = 1}, "numeric UID:GID"},
        {"user gid", {.version = 1, .user = "1000:x"}, {.version = 1}, "numeric"},
        {"cap",
         {.version = 1, .cap_add = (const char *const[]){"NET RAW", NULL}},
         {.version = 1},
         "capability"},
        {"cap all",
         {.version = 1, .cap_add = (const char *const[]){"ALL", NULL}},
         {.version = 1},
         "capability"},
        {"env",
         {.version = 1, .env = (const char *const[]){"=x", NULL}},
         {.version = 1},
         "KEY=VALUE"},
        {"setup",
         {.version = 1, .setup = (const char *const[]){"make", NULL}},
         {.version = 1},
         "setup"},
        {"tls", {.version = 1, .pull_no_tls_verify = true}, {.version = 1}, "TLS"},
        {"userns", {.version = 1, .userns = SP_USERNS_HOST}, {.version = 1}, "userns"},
        {"namespace", {.version = 1}, {.version = 1, .ns = "Prod"}, "namespace"},
        {"runtime class",
         {.version = 1},
         {.version = 1, .runtime_class = "g visor"},
         "RuntimeClass"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *msg = refused(&cases[i].o, &cases[i].ro);
        if (!strstr(msg, cases[i].says))
            fail_msg("%s: '%s' does not say '%s'", cases[i].what, msg, cases[i].says);
        free(msg);
    }
    sp_mount m = {0};
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.mounts = &m;
    o.n_mounts = 1;
    char *msg = refused(&o, NULL);
    assert_non_null(strstr(msg, "mounts"));
    free(msg);
    /* A struct from a newer sandpod is refused, not misread. */
    o = (sp_sandbox_opts)SP_SANDBOX_OPTS_INIT;
    sp_kube_render_opts ro = {.version = 99};
    char *text = NULL;
    sp_error *err = NULL;
    assert_int_equal(sp_kube_render_pod(&text, &o, &ro, &err), SP_EINVAL);
    sp_error_free(err);
}

/* The value of variable key in container c's env, or NULL. */
static const char *env_of(const cJSON *c, const char *key)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, at(c, "env")) if (strcmp(str_at(e, "name"), key) ==
                                            0) return str_at(e, "value");
    return NULL;
}

/* Egress rules: the proxy's Pod, the two NetworkPolicies that tie the
 * workload to it alone, the workload told where it is; refusals. */
static void test_egress(void **state)
{
    (void)state;
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.name = "box";
    o.network = SP_NET_NONE;
    sp_kube_render_opts ro = SP_KUBE_RENDER_OPTS_INIT;
    ro.ns = "team";
    ro.owner = "abc123";
    ro.egress_id = "spe-0123456789ab";
    ro.egress_addr = "10.1.2.3";
    char *pt = NULL, *wt = NULL, *xt = NULL;
    sp_error *err = NULL;
    const char *policy = "# version 1\nallow example.com\n";
    assert_int_equal(
        sp_kube_render_egress(&pt, &wt, &xt, &o, &ro, policy, "10.9.9.9 example.com\n", &err), 0);
    cJSON *p = sp_json_parse(pt, strlen(pt)), *w = sp_json_parse(wt, strlen(wt)),
          *x = sp_json_parse(xt, strlen(xt));
    assert_non_null(p);
    assert_non_null(w);
    assert_non_null(x);
    /* The proxy's Pod: named by the id, labelled for gc and the policies,
     * hardened, the policy and hosts in its environment. */
    assert_string_equal(str_at(p, "metadata/name"), "spe-0123456789ab");
    assert_string_equal(str_at(p, "metadata/namespace"), "team");
    assert_string_equal(str_at(p, "metadata/labels/sandpod"), "1");
    assert_string_equal(str_at(p, "metadata/labels/sandpod.name"), "box");
    assert_string_equal(str_at(p, "metadata/labels/sandpod.owner"), "abc123");
    assert_string_equal(str_at(p, "metadata/labels/sandpod.role"), "egress");
    assert_string_equal(str_at(p, "metadata/labels/sandpod.egress-proxy"), "spe-0123456789ab");
    assert_bool_at(p, "spec/automountServiceAccountToken", false);
    assert_string_equal(str_at(p, "spec/securityContext/seccompProfile/type"), "RuntimeDefault");
    const cJSON *c = container(p, "spec/containers", "proxy");
    assert_hardened(c, 1000, true);
    assert_string_equal(str_at(c, "command/#2"), "egress-serve");
    assert_string_equal(env_of(c, "SANDPOD_EGRESS_POLICY"), policy);
    assert_string_equal(env_of(c, "SANDPOD_EGRESS_HOSTS"), "10.9.9.9 example.com\n");
    /* The workload's policy: Egress only, to the proxy's port alone. */
    assert_string_equal(str_at(w, "kind"), "NetworkPolicy");
    assert_string_equal(str_at(w, "metadata/name"), "spe-0123456789ab-workload");
    assert_string_equal(str_at(w, "spec/podSelector/matchLabels/sandpod.egress"),
                        "spe-0123456789ab");
    assert_int_equal(cJSON_GetArraySize(at(w, "spec/policyTypes")), 1);
    assert_string_equal(str_at(w, "spec/policyTypes/#0"), "Egress");
    assert_int_equal(cJSON_GetArraySize(at(w, "spec/egress")), 1);
    assert_string_equal(str_at(w, "spec/egress/#0/to/#0/podSelector/matchLabels/"
                                  "sandpod.egress-proxy"),
                        "spe-0123456789ab");
    assert_int_equal((int)num_at(w, "spec/egress/#0/ports/#0/port"), SP_KUBE_EGRESS_PORT);
    assert_null(at(w, "spec/egress/#0/to/#1"));
    /* The proxy's: Ingress from the workload alone. */
    assert_string_equal(str_at(x, "metadata/name"), "spe-0123456789ab-proxy");
    assert_string_equal(str_at(x, "spec/podSelector/matchLabels/sandpod.egress-proxy"),
                        "spe-0123456789ab");
    assert_string_equal(str_at(x, "spec/policyTypes/#0"), "Ingress");
    assert_string_equal(str_at(x, "spec/ingress/#0/from/#0/podSelector/matchLabels/"
                                  "sandpod.egress"),
                        "spe-0123456789ab");
    cJSON_Delete(p);
    cJSON_Delete(w);
    cJSON_Delete(x);
    free(pt);
    free(wt);
    free(xt);

    /* `engine test`'s: no egress at all for the Pods with the label. */
    char *dt = sp_kube_render_netpol_deny(&ro);
    cJSON *d = cJSON_Parse(dt);
    assert_string_equal(str_at(d, "metadata/name"), "spe-0123456789ab-deny");
    assert_string_equal(str_at(d, "spec/podSelector/matchLabels/sandpod.egress"),
                        "spe-0123456789ab");
    assert_string_equal(str_at(d, "spec/policyTypes/#0"), "Egress");
    assert_true(cJSON_IsArray(at(d, "spec/egress")));
    assert_int_equal(cJSON_GetArraySize(at(d, "spec/egress")), 0);
    cJSON_Delete(d);
    free(dt);

    /* The workload: the label the policy selects, every command told where
     * the proxy is, and the gap said. */
    cJSON *pod = render(&o, &ro);
    assert_string_equal(str_at(pod, "metadata/labels/sandpod.egress"), "spe-0123456789ab");
    const cJSON *wl = container(pod, "spec/containers", "workload");
    assert_string_equal(env_of(wl, "HTTPS_PROXY"), "http://10.1.2.3:3128");
    assert_string_equal(env_of(wl, "ALL_PROXY"), "socks5h://10.1.2.3:3128");
    assert_string_equal(env_of(wl, "NO_PROXY"), "localhost,127.0.0.1,::1");
    assert_non_null(strstr(str_at(pod, "metadata/annotations/sandpod.gaps"), "netpol"));
    assert_null(strstr(str_at(pod, "metadata/annotations/sandpod.gaps"), "network=none"));
    cJSON_Delete(pod);
    ro.egress_addr = "fd00::7";
    pod = render(&o, &ro);
    wl = container(pod, "spec/containers", "workload");
    assert_string_equal(env_of(wl, "http_proxy"), "http://[fd00::7]:3128");
    cJSON_Delete(pod);

    /* Refused: no address, a bad one, the node's network, a bad id. */
    ro.egress_addr = NULL;
    char *m = refused(&o, &ro);
    assert_non_null(strstr(m, "egress proxy"));
    free(m);
    ro.egress_addr = "10.1.2.3/8";
    free(refused(&o, &ro));
    ro.egress_addr = "10.1.2.3";
    o.network = SP_NET_HOST;
    m = refused(&o, &ro);
    assert_non_null(strstr(m, "--network host"));
    free(m);
    assert_int_equal(sp_kube_render_egress(&pt, &wt, &xt, &o, &ro, policy, NULL, &err), SP_EINVAL);
    sp_error_free(err);
    err = NULL;
    o.network = SP_NET_NONE;
    ro.egress_id = "Bad_Id";
    assert_int_equal(sp_kube_render_egress(&pt, &wt, &xt, &o, &ro, policy, NULL, &err), SP_EINVAL);
    assert_null(pt);
    sp_error_free(err);
}

/* hostUsers: false always; a Localhost seccomp profile when the engine has
 * one (and then no "seccomp" gap); Unconfined only when asked. */
static void test_user_namespace_seccomp(void **state)
{
    (void)state;
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    sp_kube_render_opts ro = SP_KUBE_RENDER_OPTS_INIT;
    cJSON *pod = render(&o, &ro);
    assert_bool_at(pod, "spec/hostUsers", false);
    assert_string_equal(str_at(pod, "spec/securityContext/seccompProfile/type"), "RuntimeDefault");
    assert_null(at(pod, "spec/securityContext/seccompProfile/localhostProfile"));
    assert_non_null(strstr(str_at(pod, "metadata/annotations/sandpod.gaps"), "seccomp"));
    cJSON_Delete(pod);
    ro.seccomp_profile = "profiles/sandpod.json";
    pod = render(&o, &ro);
    assert_string_equal(str_at(pod, "spec/securityContext/seccompProfile/type"), "Localhost");
    assert_string_equal(str_at(pod, "spec/securityContext/seccompProfile/localhostProfile"),
                        "profiles/sandpod.json");
    assert_null(strstr(str_at(pod, "metadata/annotations/sandpod.gaps"), "seccomp"));
    cJSON_Delete(pod);
    o.seccomp = SP_SECCOMP_UNCONFINED;
    pod = render(&o, &ro);
    assert_string_equal(str_at(pod, "spec/securityContext/seccompProfile/type"), "Unconfined");
    cJSON_Delete(pod);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_relaxed),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_egress),
        cmocka_unit_test(test_user_namespace_seccomp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
