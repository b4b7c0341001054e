/* sp_kube_render_pod(): a sandbox's options as a Pod (SCALE-OUT.md §5.2).
 *
 * Contract: every hardening field a local sandbox has by default is in the
 * Pod unless an option relaxes it on purpose; what a Pod cannot express is
 * named in the "sandpod.gaps" annotation, never silently dropped. Options
 * with no Pod equivalent are SP_EINVAL. Values of pass-through variables
 * (o->env_pass) never enter the manifest. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "json.h"
#include "render.h"

#define PEER_MEMORY   (256ull << 20)
#define PROXY_MEMORY  (256ull << 20)
#define PEER_MILLICPU 250

static bool lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* A DNS-1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most `max`. */
static bool dns_label(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max || !lower_alnum(s[0]) || !lower_alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!lower_alnum(s[i]) && s[i] != '-')
            return false;
    return true;
}

/* A DNS-1123 subdomain: labels joined by '.', at most 253. */
static bool dns_subdomain(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253 || !lower_alnum(s[0]) || !lower_alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!lower_alnum(s[i]) && s[i] != '-' && !(s[i] == '.' && s[i + 1] != '.'))
            return false;
    return true;
}

/* A Kubernetes quantity for a byte count: the largest binary suffix that
 * divides it, so 1 GiB reads "1Gi" and nothing is rounded. */
static char *bytes_quantity(uint64_t v)
{
    static const char *const suffix[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi"};
    unsigned i = 0;
    while (i < 5 && v >= 1024 && v % 1024 == 0) {
        v /= 1024;
        i++;
    }
    return sp_xasprintf("%" PRIu64 "%s", v, suffix[i]);
}

/* CPUs in nano-CPUs as a quantity; Kubernetes keeps millicores, so a
 * finer value is rounded up (never a lower limit than asked). */
static char *cpu_quantity(uint64_t nano)
{
    uint64_t milli = (nano + 999999) / 1000000;
    if (milli % 1000 == 0)
        return sp_xasprintf("%" PRIu64, milli / 1000);
    return sp_xasprintf("%" PRIu64 "m", milli);
}

/* "UID:GID" (or "UID") in numbers: a Pod names no user by its name. */
static int parse_user(int64_t *uid, int64_t *gid, const char *s, sp_error **err)
{
    char *end = NULL;
    if (*s < '0' || *s > '9')
        goto bad;
    unsigned long long u = strtoull(s, &end, 10), g = u;
    if (*end == ':') {
        const char *gs = end + 1;
        if (*gs < '0' || *gs > '9')
            goto bad;
        g = strtoull(gs, &end, 10);
    }
    if (*end || u > UINT32_MAX - 1 || g > UINT32_MAX - 1)
        goto bad;
    *uid = (int64_t)u;
    *gid = (int64_t)g;
    return 0;
bad:
    return sp_err_set(err, SP_EINVAL, 0,
                      "a Pod's user must be numeric UID:GID (runAsUser, runAsGroup): '%s'", s);
}

/* A capability as a Pod names it: upper case, without "CAP_". */
static int cap_name(char **out, const char *s, sp_error **err)
{
    if (strncasecmp(s, "CAP_", 4) == 0)
        s += 4;
    size_t n = strlen(s);
    if (n == 0 || n > 32)
        goto bad;
    char *c = sp_xstrdup(s);
    for (size_t i = 0; i < n; i++) {
        char ch = c[i];
        if (ch >= 'a' && ch <= 'z')
            ch = (char)(ch - 'a' + 'A');
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_')) {
            free(c);
            goto bad;
        }
        c[i] = ch;
    }
    if (strcmp(c, "ALL") == 0) {
        free(c);
        goto bad;
    }
    *out = c;
    return 0;
bad:
    return sp_err_set(err, SP_EINVAL, 0, "not a capability a Pod can add: '%s'", s);
}

static cJSON *strings(const char *const *v)
{
    cJSON *a = cJSON_CreateArray();
    for (; v && *v; v++)
        cJSON_AddItemToArray(a, cJSON_CreateString(*v));
    return a;
}

static void add_mount(cJSON *mounts, const char *name, const char *path, bool ro)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "name", name);
    cJSON_AddStringToObject(m, "mountPath", path);
    if (ro)
        cJSON_AddBoolToObject(m, "readOnly", true);
    cJSON_AddItemToArray(mounts, m);
}

/* The hardened securityContext of a container. */
static cJSON *security_context(int64_t uid, int64_t gid, bool ro_root, const char *const *caps)
{
    cJSON *sc = cJSON_CreateObject();
    cJSON_AddNumberToObject(sc, "runAsUser", (double)uid);
    cJSON_AddNumberToObject(sc, "runAsGroup", (double)gid);
    cJSON_AddBoolToObject(sc, "runAsNonRoot", uid != 0);
    cJSON_AddBoolToObject(sc, "allowPrivilegeEscalation", false);
    cJSON_AddBoolToObject(sc, "readOnlyRootFilesystem", ro_root);
    cJSON *cap = cJSON_AddObjectToObject(sc, "capabilities");
    const char *all[] = {"ALL", NULL};
    cJSON_AddItemToObject(cap, "drop", strings(all));
    if (caps && *caps)
        cJSON_AddItemToObject(cap, "add", strings(caps));
    return sc;
}

/* Limits and requests alike: a sandbox gets what it is promised, and the
 * Pod lands in the Guaranteed QoS class when every container does this. */
static cJSON *resources(const char *mem, const char *cpu)
{
    cJSON *r = cJSON_CreateObject();
    const char *which[] = {"limits", "requests"};
    for (size_t i = 0; i < 2 && (mem || cpu); i++) {
        cJSON *l = cJSON_AddObjectToObject(r, which[i]);
        if (mem)
            cJSON_AddStringToObject(l, "memory", mem);
        if (cpu)
            cJSON_AddStringToObject(l, "cpu", cpu);
    }
    return r;
}

static void add_volume(cJSON *vols, const char *name, const char *medium, const char *size)
{
    cJSON *v = cJSON_CreateObject();
    cJSON_AddStringToObject(v, "name", name);
    cJSON *e = cJSON_AddObjectToObject(v, "emptyDir");
    if (medium)
        cJSON_AddStringToObject(e, "medium", medium);
    if (size)
        cJSON_AddStringToObject(e, "sizeLimit", size);
    cJSON_AddItemToArray(vols, v);
}

static const char *pull_policy(sp_pull_policy p)
{
    switch (p) {
    case SP_PULL_MISSING:
        return "IfNotPresent";
    case SP_PULL_ALWAYS:
        return "Always";
    case SP_PULL_NEVER:
        return "Never";
    default:
        return NULL; /* the cluster's default for the tag */
    }
}

/* A Pod's spec as every sandpod Pod has it: no service account token, no
 * service links, the engine's deadline and RuntimeClass, a seccomp profile. */
static cJSON *pod_spec(cJSON *pod, const sp_kube_render_opts *ro, const char *restart,
                       bool non_root, bool unconfined)
{
    cJSON *spec = cJSON_AddObjectToObject(pod, "spec");
    cJSON_AddStringToObject(spec, "restartPolicy", restart);
    int64_t deadline = ro->deadline_seconds ? ro->deadline_seconds : SP_KUBE_DEFAULT_DEADLINE;
    if (deadline > 0)
        cJSON_AddNumberToObject(spec, "activeDeadlineSeconds", (double)deadline);
    cJSON_AddBoolToObject(spec, "automountServiceAccountToken", false);
    cJSON_AddBoolToObject(spec, "enableServiceLinks", false);
    /* A user namespace of its own, as a local sandbox has, where the
     * cluster gives one (Kubernetes 1.25+ with user namespaces on; others
     * drop the field, and the engine's check says so). */
    cJSON_AddBoolToObject(spec, "hostUsers", false);
    if (ro->runtime_class)
        cJSON_AddStringToObject(spec, "runtimeClassName", ro->runtime_class);
    cJSON *psc = cJSON_AddObjectToObject(spec, "securityContext");
    cJSON_AddBoolToObject(psc, "runAsNonRoot", non_root);
    cJSON *sec = cJSON_AddObjectToObject(psc, "seccompProfile");
    if (unconfined) {
        cJSON_AddStringToObject(sec, "type", "Unconfined");
    } else if (ro->seccomp_profile) {
        cJSON_AddStringToObject(sec, "type", "Localhost");
        cJSON_AddStringToObject(sec, "localhostProfile", ro->seccomp_profile);
    } else {
        cJSON_AddStringToObject(sec, "type", "RuntimeDefault");
    }
    return spec;
}

static int check_opts(const sp_sandbox_opts *o, const sp_kube_render_opts *ro, sp_error **err)
{
    if (o->n_mounts)
        return sp_err_set(err, SP_EINVAL, 0,
                          "a rendered Pod takes no mounts: its workspace is hydrated through the "
                          "peer once the Pod runs");
    if (o->setup && *o->setup)
        return sp_err_set(err, SP_EINVAL, 0,
                          "a rendered Pod takes no setup commands: they run through the peer "
                          "once the Pod runs");
    if (o->pull_no_tls_verify)
        return sp_err_set(err, SP_EINVAL, 0,
                          "a Pod cannot pull without TLS verification: that is the node's "
                          "registry configuration");
    if (o->userns == SP_USERNS_HOST)
        return sp_err_set(err, SP_EINVAL, 0,
                          "--userns host has no Pod equivalent (a Pod shares the node's ids "
                          "unless the cluster gives it a user namespace)");
    if (o->name && !(dns_label(o->name, 63)))
        return sp_err_set(err, SP_EINVAL, 0,
                          "a Pod's sandbox name takes lowercase letters, digits and '-' (a "
                          "letter or digit first and last, at most 63): '%s'",
                          o->name);
    if (o->workdir && o->workdir[0] != '/')
        return sp_err_set(err, SP_EINVAL, 0, "the working folder must be absolute: '%s'",
                          o->workdir);
    for (const char *const *e = o->env; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || eq == *e)
            return sp_err_set(err, SP_EINVAL, 0, "an environment entry must be KEY=VALUE: '%s'",
                              *e);
    }
    for (const char *const *e = o->env_pass; e && *e; e++)
        if (!**e || strchr(*e, '=') || strchr(*e, ','))
            return sp_err_set(err, SP_EINVAL, 0, "not a variable name: '%s'", *e);
    if (ro->ns && !dns_label(ro->ns, 63))
        return sp_err_set(err, SP_EINVAL, 0,
                          "a namespace takes lowercase letters, digits and '-' (at most 63): '%s'",
                          ro->ns);
    if (ro->runtime_class && !dns_subdomain(ro->runtime_class))
        return sp_err_set(err, SP_EINVAL, 0, "a RuntimeClass name is a lowercase DNS name: '%s'",
                          ro->runtime_class);
    if (ro->sandpod_image && !*ro->sandpod_image)
        return sp_err_set(err, SP_EINVAL, 0, "the sandpod image is empty");
    if (o->image && !*o->image)
        return sp_err_set(err, SP_EINVAL, 0, "the image is empty");
    if (ro->egress_id && (!dns_label(ro->egress_id, 54) || !ro->egress_addr || !*ro->egress_addr ||
                          strpbrk(ro->egress_addr, "/@ []")))
        return sp_err_set(err, SP_EINVAL, 0, "the egress proxy's id or address is not one: '%s'",
                          ro->egress_id);
    if (ro->egress_id && o->network == SP_NET_HOST)
        return sp_err_set(err, SP_EINVAL, 0,
                          "egress rules cannot hold with --network host: the node's network "
                          "is not subject to NetworkPolicy");
    return 0;
}

static void add_env(cJSON *env, const char *key, const char *value)
{
    cJSON *kv = cJSON_CreateObject();
    cJSON_AddStringToObject(kv, "name", key);
    cJSON_AddStringToObject(kv, "value", value);
    cJSON_AddItemToArray(env, kv);
}

/* Every command is told where the proxy is, as a local sandbox's are. */
static void add_proxy_env(cJSON *env, const char *addr)
{
    bool v6 = strchr(addr, ':') != NULL;
    cleanup_free char *http =
        sp_xasprintf("http://%s%s%s:%d", v6 ? "[" : "", addr, v6 ? "]" : "", SP_KUBE_EGRESS_PORT);
    cleanup_free char *socks = sp_xasprintf("socks5h://%s%s%s:%d", v6 ? "[" : "", addr,
                                            v6 ? "]" : "", SP_KUBE_EGRESS_PORT);
    const char *const vars[] = {"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        add_env(env, vars[i], http);
    add_env(env, "ALL_PROXY", socks);
    add_env(env, "all_proxy", socks);
    add_env(env, "NO_PROXY", "localhost,127.0.0.1,::1");
    add_env(env, "no_proxy", "localhost,127.0.0.1,::1");
}

/* What the Pod leaves to the cluster, as short tokens (`sandpod render
 * --help` and the README say what each means): Podman's kube play refuses
 * an annotation value over 63 characters, though Kubernetes takes more.
 *   pids=N        the pids limit (only the node's podPidsLimit applies)
 *   rlimits       nofile and nproc (no Pod field)
 *   network=none  a Pod always has eth0 (a deny-all NetworkPolicy is needed)
 *   seccomp       RuntimeDefault, not sandpod's stricter profile (no
 *                 Localhost profile given)
 *   userns        no user namespace unless the cluster supports hostUsers
 *   netpol        egress rules hold only where the network plugin enforces
 *                 NetworkPolicy */
static char *gaps(const sp_sandbox_opts *o, const sp_kube_render_opts *ro)
{
    sp_buf b = {0};
    int64_t pids = o->pids_limit == 0 ? 256 : o->pids_limit;
    if (pids > 0)
        sp_buf_printf(&b, "pids=%" PRId64 ",", pids);
    sp_buf_adds(&b, "rlimits,");
    if (ro->egress_id)
        sp_buf_adds(&b, "netpol,");
    else if (o->network == SP_NET_NONE)
        sp_buf_adds(&b, "network=none,");
    if (o->seccomp == SP_SECCOMP_SANDPOD && !ro->seccomp_profile)
        sp_buf_adds(&b, "seccomp,");
    sp_buf_adds(&b, "userns");
    return sp_buf_steal(&b);
}

int sp_kube_render_pod(char **out, const sp_sandbox_opts *o, const sp_kube_render_opts *ro,
                       sp_error **err)
{
    *out = NULL;
    sp_sandbox_opts od = SP_SANDBOX_OPTS_INIT;
    sp_kube_render_opts rd = SP_KUBE_RENDER_OPTS_INIT;
    int r;
    if ((r = SP_OPTS_CHECK(o, 1, SP_SANDBOX_OPTS_VERSION, "sp_sandbox_opts", err)) < 0 ||
        (r = SP_OPTS_CHECK(ro, 1, SP_KUBE_RENDER_OPTS_VERSION, "sp_kube_render_opts", err)) < 0)
        return r;
    o = o ? o : &od;
    ro = ro ? ro : &rd;
    if ((r = check_opts(o, ro, err)) < 0)
        return r;
    int64_t uid = 0, gid = 0;
    if ((r = parse_user(&uid, &gid, o->user ? o->user : SP_SANDBOX_DEFAULT_USER, err)) < 0)
        return r;
    sp_strv caps = {0};
    for (const char *const *c = o->cap_add; c && *c; c++) {
        char *name = NULL;
        if ((r = cap_name(&name, *c, err)) < 0) {
            sp_strv_dispose(&caps);
            return r;
        }
        sp_strv_push(&caps, name);
    }
    sp_json_init();

    char gen[16] = "";
    if (!o->name) {
        uint32_t rnd = 0;
        if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
            rnd = (uint32_t)sp_now_ms();
        snprintf(gen, sizeof(gen), "sp-%08" PRIx32, rnd);
    }
    const char *name = o->name ? o->name : gen;
    const char *image = o->image ? o->image : SP_DEFAULT_IMAGE;
    const char *sp_image = ro->sandpod_image ? ro->sandpod_image : SP_KUBE_DEFAULT_IMAGE;
    uint64_t mem = o->memory_bytes ? o->memory_bytes : 1ull << 30;
    uint64_t cpus = o->nano_cpus ? o->nano_cpus : 1000000000ull;
    uint64_t tmp = o->tmpfs_bytes ? o->tmpfs_bytes : 64ull << 20;
    cleanup_free char *mem_q = mem == UINT64_MAX ? NULL : bytes_quantity(mem);
    cleanup_free char *cpu_q = cpus == UINT64_MAX ? NULL : cpu_quantity(cpus);
    cleanup_free char *tmp_q = bytes_quantity(tmp);
    cleanup_free char *peer_mem = bytes_quantity(PEER_MEMORY);
    cleanup_free char *peer_cpu = cpu_quantity(PEER_MILLICPU * 1000000ull);
    cleanup_free char *gen_name = sp_xasprintf("sp-%s-", name);
    cleanup_free char *gap_text = gaps(o, ro);

    cJSON *pod = cJSON_CreateObject();
    cJSON_AddStringToObject(pod, "apiVersion", "v1");
    cJSON_AddStringToObject(pod, "kind", "Pod");
    cJSON *md = cJSON_AddObjectToObject(pod, "metadata");
    cJSON_AddStringToObject(md, "generateName", gen_name);
    if (ro->ns)
        cJSON_AddStringToObject(md, "namespace", ro->ns);
    cJSON *labels = cJSON_AddObjectToObject(md, "labels");
    cJSON_AddStringToObject(labels, "sandpod", "1");
    cJSON_AddStringToObject(labels, "sandpod.name", name);
    if (ro->owner)
        cJSON_AddStringToObject(labels, "sandpod.owner", ro->owner);
    if (ro->egress_id)
        cJSON_AddStringToObject(labels, "sandpod.egress", ro->egress_id);
    cJSON *ann = cJSON_AddObjectToObject(md, "annotations");
    cJSON_AddStringToObject(ann, "sandpod.gaps", gap_text);
    if (o->env_pass && *o->env_pass) {
        sp_buf b = {0};
        for (const char *const *e = o->env_pass; *e; e++)
            sp_buf_printf(&b, "%s%s", e == o->env_pass ? "" : ",", *e);
        cleanup_free char *names = sp_buf_steal(&b);
        /* Names only: the client hands the values to each command. */
        cJSON_AddStringToObject(ann, "sandpod.env-pass", names);
    }

    cJSON *spec = pod_spec(pod, ro, "Never", uid != 0, o->seccomp == SP_SECCOMP_UNCONFINED);
    if (o->network == SP_NET_HOST)
        cJSON_AddBoolToObject(spec, "hostNetwork", true);

    /* The init container and the peer run as the workload's user: owners
     * in the shared workspace match, and neither needs a capability. */
    int64_t puid = uid ? uid : 1000, pgid = uid ? gid : 1000;
    cJSON *inits = cJSON_AddArrayToObject(spec, "initContainers");
    cJSON *init = cJSON_CreateObject();
    cJSON_AddItemToArray(inits, init);
    cJSON_AddStringToObject(init, "name", "install-agent");
    cJSON_AddStringToObject(init, "image", sp_image);
    const char *init_cmd[] = {SP_KUBE_SANDPOD_BIN, "peer", "install-agent", SP_KUBE_AGENT_DIR,
                              NULL};
    cJSON_AddItemToObject(init, "command", strings(init_cmd));
    cJSON_AddItemToObject(init, "securityContext", security_context(puid, pgid, true, NULL));
    cJSON_AddItemToObject(init, "resources", resources(peer_mem, peer_cpu));
    cJSON *im = cJSON_AddArrayToObject(init, "volumeMounts");
    add_mount(im, "bin", SP_KUBE_AGENT_DIR, false);

    cJSON *ctrs = cJSON_AddArrayToObject(spec, "containers");
    cJSON *w = cJSON_CreateObject();
    cJSON_AddItemToArray(ctrs, w);
    cJSON_AddStringToObject(w, "name", "workload");
    cJSON_AddStringToObject(w, "image", image);
    const char *pp = pull_policy(o->pull);
    if (pp)
        cJSON_AddStringToObject(w, "imagePullPolicy", pp);
    /* pid 1 is the agent, as locally: init and the command server. */
    const char *agent_cmd[] = {SP_KUBE_AGENT_PATH, SP_KUBE_RUN_DIR, NULL};
    cJSON_AddItemToObject(w, "command", strings(agent_cmd));
    cJSON_AddStringToObject(w, "workingDir", o->workdir ? o->workdir : SP_KUBE_WORKSPACE);
    if ((o->env && *o->env) || ro->egress_id) {
        cJSON *env = cJSON_AddArrayToObject(w, "env");
        for (const char *const *e = o->env; e && *e; e++) {
            const char *eq = strchr(*e, '=');
            cleanup_free char *key = sp_xstrndup(*e, (size_t)(eq - *e));
            add_env(env, key, eq + 1);
        }
        if (ro->egress_id)
            add_proxy_env(env, ro->egress_addr);
    }
    cJSON_AddItemToObject(
        w, "securityContext",
        security_context(uid, gid, !o->writable_root, (const char *const *)caps.v));
    cJSON_AddItemToObject(w, "resources", resources(mem_q, cpu_q));
    cJSON *wm = cJSON_AddArrayToObject(w, "volumeMounts");
    add_mount(wm, "workspace", SP_KUBE_WORKSPACE, false);
    add_mount(wm, "bin", SP_KUBE_AGENT_DIR, true);
    add_mount(wm, "agent-run", SP_KUBE_RUN_DIR, false);
    add_mount(wm, "tmp", "/tmp", false);

    cJSON *p = cJSON_CreateObject();
    cJSON_AddItemToArray(ctrs, p);
    cJSON_AddStringToObject(p, "name", "peer");
    cJSON_AddStringToObject(p, "image", sp_image);
    /* The command tools go to the workload's agent, whose socket and
     * process must be the workload's uid (see `sandpod peer --help`). */
    char agent_uid[24];
    snprintf(agent_uid, sizeof(agent_uid), "%lld", (long long)uid);
    const char *peer_cmd[] = {SP_KUBE_SANDPOD_BIN,
                              "peer",
                              "serve",
                              "--root",
                              SP_KUBE_WORKSPACE,
                              "--store",
                              SP_KUBE_STORE_DIR,
                              "--socket",
                              SP_KUBE_PEER_SOCKET,
                              "--agent",
                              SP_KUBE_AGENT_SOCKET,
                              "--agent-uid",
                              agent_uid,
                              NULL};
    cJSON_AddItemToObject(p, "command", strings(peer_cmd));
    cJSON_AddItemToObject(p, "securityContext", security_context(puid, pgid, true, NULL));
    cJSON_AddItemToObject(p, "resources", resources(peer_mem, peer_cpu));
    cJSON *pm = cJSON_AddArrayToObject(p, "volumeMounts");
    add_mount(pm, "workspace", SP_KUBE_WORKSPACE, false);
    add_mount(pm, "store", SP_KUBE_STORE_DIR, false); /* the peer's alone */
    add_mount(pm, "agent-run", SP_KUBE_RUN_DIR, false);
    add_mount(pm, "peer-run", SP_KUBE_PEER_RUN, false);

    cJSON *vols = cJSON_AddArrayToObject(spec, "volumes");
    add_volume(vols, "workspace", NULL, NULL);
    add_volume(vols, "store", NULL, NULL);
    add_volume(vols, "bin", NULL, NULL);
    add_volume(vols, "agent-run", NULL, NULL);
    add_volume(vols, "peer-run", NULL, NULL);
    add_volume(vols, "tmp", "Memory", tmp_q);

    *out = cJSON_Print(pod);
    cJSON_Delete(pod);
    sp_strv_dispose(&caps);
    if (!*out)
        return sp_err_set(err, SP_ERROR, ENOMEM, "out of memory rendering the Pod");
    return 0;
}

/* {"podSelector": {"matchLabels": {key: value}}} */
static cJSON *pod_selector(const char *key, const char *value)
{
    cJSON *sel = cJSON_CreateObject();
    cJSON *ml = cJSON_AddObjectToObject(cJSON_AddObjectToObject(sel, "podSelector"), "matchLabels");
    cJSON_AddStringToObject(ml, key, value);
    return sel;
}

/* A NetworkPolicy over the Pods labelled key=value: only `way` (Egress,
 * Ingress) to or from the Pods labelled peer_key=id, on the proxy's port;
 * without peer_key, nothing that way at all. */
static char *network_policy(const sp_kube_render_opts *ro, const char *suffix, const char *key,
                            const char *way, const char *peer_key)
{
    bool egress = strcmp(way, "Egress") == 0;
    cJSON *np = cJSON_CreateObject();
    cJSON_AddStringToObject(np, "apiVersion", "networking.k8s.io/v1");
    cJSON_AddStringToObject(np, "kind", "NetworkPolicy");
    cJSON *md = cJSON_AddObjectToObject(np, "metadata");
    cleanup_free char *name = sp_xasprintf("%s-%s", ro->egress_id, suffix);
    cJSON_AddStringToObject(md, "name", name);
    if (ro->ns)
        cJSON_AddStringToObject(md, "namespace", ro->ns);
    cJSON *labels = cJSON_AddObjectToObject(md, "labels");
    cJSON_AddStringToObject(labels, "sandpod.egress-proxy", ro->egress_id);
    if (ro->owner)
        cJSON_AddStringToObject(labels, "sandpod.owner", ro->owner);
    cJSON *spec = cJSON_AddObjectToObject(np, "spec");
    cJSON *sel = pod_selector(key, ro->egress_id);
    cJSON_AddItemToObject(spec, "podSelector", cJSON_DetachItemFromObject(sel, "podSelector"));
    cJSON_Delete(sel);
    const char *types[] = {way, NULL};
    cJSON_AddItemToObject(spec, "policyTypes", strings(types));
    cJSON *rules = cJSON_AddArrayToObject(spec, egress ? "egress" : "ingress");
    if (!peer_key) {
        char *out = cJSON_Print(np);
        cJSON_Delete(np);
        return out;
    }
    cJSON *rule = cJSON_CreateObject();
    cJSON_AddItemToArray(rules, rule);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(rule, egress ? "to" : "from"),
                         pod_selector(peer_key, ro->egress_id));
    cJSON *port = cJSON_CreateObject();
    cJSON_AddStringToObject(port, "protocol", "TCP");
    cJSON_AddNumberToObject(port, "port", SP_KUBE_EGRESS_PORT);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(rule, "ports"), port);
    char *out = cJSON_Print(np);
    cJSON_Delete(np);
    return out;
}

char *sp_kube_render_netpol_deny(const sp_kube_render_opts *ro)
{
    return network_policy(ro, "deny", "sandpod.egress", "Egress", NULL);
}

int sp_kube_render_egress(char **pod, char **np_workload, char **np_proxy, const sp_sandbox_opts *o,
                          const sp_kube_render_opts *ro, const char *policy, const char *hosts,
                          sp_error **err)
{
    *pod = *np_workload = *np_proxy = NULL;
    if (!ro || !ro->egress_id || !dns_label(ro->egress_id, 54) || !policy || !*policy)
        return sp_err_set(err, SP_EINVAL, 0, "the egress proxy needs an id and a policy");
    if (ro->ns && !dns_label(ro->ns, 63))
        return sp_err_set(err, SP_EINVAL, 0,
                          "a namespace takes lowercase letters, digits and '-' (at most 63): '%s'",
                          ro->ns);
    if (o && o->network == SP_NET_HOST)
        return sp_err_set(err, SP_EINVAL, 0,
                          "egress rules cannot hold with --network host: the node's network "
                          "is not subject to NetworkPolicy");
    sp_json_init();
    const char *sp_image = ro->sandpod_image ? ro->sandpod_image : SP_KUBE_DEFAULT_IMAGE;
    cleanup_free char *mem = bytes_quantity(PROXY_MEMORY);
    uint64_t cpus = o && o->nano_cpus ? o->nano_cpus : 1000000000ull;
    cleanup_free char *cpu = cpus == UINT64_MAX ? NULL : cpu_quantity(cpus);

    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "apiVersion", "v1");
    cJSON_AddStringToObject(p, "kind", "Pod");
    cJSON *md = cJSON_AddObjectToObject(p, "metadata");
    cJSON_AddStringToObject(md, "name", ro->egress_id);
    if (ro->ns)
        cJSON_AddStringToObject(md, "namespace", ro->ns);
    cJSON *labels = cJSON_AddObjectToObject(md, "labels");
    cJSON_AddStringToObject(labels, "sandpod", "1");
    if (o && o->name)
        cJSON_AddStringToObject(labels, "sandpod.name", o->name);
    if (ro->owner)
        cJSON_AddStringToObject(labels, "sandpod.owner", ro->owner);
    cJSON_AddStringToObject(labels, "sandpod.role", "egress");
    cJSON_AddStringToObject(labels, "sandpod.egress-proxy", ro->egress_id);
    /* A crash restarts the container in the same Pod: the same address,
     * and the emptyDir keeps the policy as it was last changed. */
    cJSON *spec = pod_spec(p, ro, "Always", true, false);
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "containers"), c);
    cJSON_AddStringToObject(c, "name", "proxy");
    cJSON_AddStringToObject(c, "image", sp_image);
    cleanup_free char *port = sp_xasprintf("%d", SP_KUBE_EGRESS_PORT);
    const char *cmd[] = {SP_KUBE_SANDPOD_BIN,
                         "peer",
                         "egress-serve",
                         SP_KUBE_EGRESS_POLICY_DIR,
                         SP_KUBE_EGRESS_RUN_DIR,
                         port,
                         NULL};
    cJSON_AddItemToObject(c, "command", strings(cmd));
    cJSON *env = cJSON_AddArrayToObject(c, "env");
    add_env(env, "SANDPOD_EGRESS_POLICY", policy);
    if (hosts)
        add_env(env, "SANDPOD_EGRESS_HOSTS", hosts);
    cJSON *cp = cJSON_CreateObject();
    cJSON_AddNumberToObject(cp, "containerPort", SP_KUBE_EGRESS_PORT);
    cJSON_AddStringToObject(cp, "protocol", "TCP");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(c, "ports"), cp);
    cJSON_AddItemToObject(c, "securityContext", security_context(1000, 1000, true, NULL));
    cJSON_AddItemToObject(c, "resources", resources(mem, cpu));
    add_mount(cJSON_AddArrayToObject(c, "volumeMounts"), "egress", SP_KUBE_EGRESS_DIR, false);
    add_volume(cJSON_AddArrayToObject(spec, "volumes"), "egress", NULL, NULL);
    *pod = cJSON_Print(p);
    cJSON_Delete(p);

    *np_workload =
        network_policy(ro, "workload", "sandpod.egress", "Egress", "sandpod.egress-proxy");
    *np_proxy = network_policy(ro, "proxy", "sandpod.egress-proxy", "Ingress", "sandpod.egress");
    if (!*pod || !*np_workload || !*np_proxy) {
        free(*pod);
        free(*np_workload);
        free(*np_proxy);
        *pod = *np_workload = *np_proxy = NULL;
        return sp_err_set(err, SP_ERROR, ENOMEM, "out of memory rendering the egress proxy");
    }
    return 0;
}
