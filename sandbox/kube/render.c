/* sp_kube_render_pod(): a sandbox's options as a Pod (SCALE-OUT.md §5.2).
 *
 * Contract: every hardening field a local sandbox has by default is in the
 * Pod unless an option relaxes it on purpose; what a Pod cannot express is
 * named in the "sandpod.gaps" annotation, never silently dropped. Options
 * with no Pod equivalent are SP_EINVAL. Values of pass-through variables
 * (o->env_pass) never enter the manifest. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "json.h"
#include "render.h"

#define PEER_MEMORY   (256ull << 20)
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
    return 0;
}

/* What the Pod leaves to the cluster, as short tokens (`sandpod render
 * --help` and the README say what each means): Podman's kube play refuses
 * an annotation value over 63 characters, though Kubernetes takes more.
 *   pids=N        the pids limit (only the node's podPidsLimit applies)
 *   rlimits       nofile and nproc (no Pod field)
 *   network=none  a Pod always has eth0 (a deny-all NetworkPolicy is needed)
 *   seccomp       RuntimeDefault, not sandpod's stricter profile
 *   userns        no user namespace unless the cluster supports hostUsers */
static char *gaps(const sp_sandbox_opts *o)
{
    sp_buf b = {0};
    int64_t pids = o->pids_limit == 0 ? 256 : o->pids_limit;
    if (pids > 0)
        sp_buf_printf(&b, "pids=%" PRId64 ",", pids);
    sp_buf_adds(&b, "rlimits,");
    if (o->network == SP_NET_NONE)
        sp_buf_adds(&b, "network=none,");
    if (o->seccomp == SP_SECCOMP_SANDPOD)
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
    cleanup_free char *gap_text = gaps(o);

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

    cJSON *spec = cJSON_AddObjectToObject(pod, "spec");
    cJSON_AddStringToObject(spec, "restartPolicy", "Never");
    int64_t deadline = ro->deadline_seconds ? ro->deadline_seconds : SP_KUBE_DEFAULT_DEADLINE;
    if (deadline > 0)
        cJSON_AddNumberToObject(spec, "activeDeadlineSeconds", (double)deadline);
    cJSON_AddBoolToObject(spec, "automountServiceAccountToken", false);
    cJSON_AddBoolToObject(spec, "enableServiceLinks", false);
    if (o->network == SP_NET_HOST)
        cJSON_AddBoolToObject(spec, "hostNetwork", true);
    if (ro->runtime_class)
        cJSON_AddStringToObject(spec, "runtimeClassName", ro->runtime_class);
    cJSON *psc = cJSON_AddObjectToObject(spec, "securityContext");
    cJSON_AddBoolToObject(psc, "runAsNonRoot", uid != 0);
    cJSON *sec = cJSON_AddObjectToObject(psc, "seccompProfile");
    cJSON_AddStringToObject(sec, "type",
                            o->seccomp == SP_SECCOMP_UNCONFINED ? "Unconfined" : "RuntimeDefault");

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
    if (o->env && *o->env) {
        cJSON *env = cJSON_AddArrayToObject(w, "env");
        for (const char *const *e = o->env; *e; e++) {
            const char *eq = strchr(*e, '=');
            cJSON *kv = cJSON_CreateObject();
            char *key = sp_xstrndup(*e, (size_t)(eq - *e));
            cJSON_AddStringToObject(kv, "name", key);
            free(key);
            cJSON_AddStringToObject(kv, "value", eq + 1);
            cJSON_AddItemToArray(env, kv);
        }
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
