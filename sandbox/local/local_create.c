/* A local sandbox made: its image pulled, its workspace hydrated (or
 * seeded), the agent installed, its container created and started with the
 * workspace handed to the container's user, its setup run and its `base`
 * snapshot taken (the local kind's create, kind.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/protocol.h"
#include "agent_install.h"
#include "egress_proxy.h"
#include "fastpath.h"
#include "local_kind.h"
#include "sandbox_internal.h"
#include "sandpod/apply.h"
#include "sandpod/sandbox_snapshot.h"

/* Setup output kept per stream, head and tail; the error quotes its tail,
 * on one line (its lines joined with "; "). */
#define SETUP_MAX_BYTES ((size_t)64 << 10)
#define SETUP_ERR_TAIL  1000

/* After the container's pid 1 started, and before anything of the
 * workload runs: learn which host ids the container's user has (from pid
 * 1's uid_map and gid_map, the same whichever mode Podman runs in) and hand
 * the workspace and the agent's socket folder over when they changed. A
 * private user namespace (rootful userns=auto) gets a new range each time
 * the container is made anew, so a recreated sandbox moves its files from
 * the old range to the new one. */
/* Sandboxes of different state roots may share a name; the container
 * name carries a hash of the state folder so that they never meet (and the
 * clean-up of a leftover only ever hits our own). */
char *sp_local_container_name(const sp_sandbox *sb, const char *suffix)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *q = (const unsigned char *)sb->state_dir; *q; q++)
        h = (h ^ *q) * 16777619u;
    return sp_xasprintf("sandpod-%s-%08x%s", sb->name, h, suffix);
}

/* The host pid of the container's pid 1, which must be running. */
static int init_pid(int *pid, sp_sandbox *sb, sp_local *p, sp_error **err)
{
    sp_container_info *info = NULL;
    int r = sb->lops->inspect(&info, p, sb->container_id, err);
    if (r < 0)
        return r;
    *pid = info->pid;
    sp_container_info_free(info);
    if (*pid <= 0)
        return sp_err_set(err, SP_EPODMAN, 0, "the container of sandbox %s did not stay up",
                          sb->name);
    return 0;
}

static int hand_over_ids(sp_sandbox *sb, sp_local *p, sp_error **err)
{
    sp_sandbox_config *c = &sb->cfg;
    uid_t cuid;
    gid_t cgid;
    if (sp_sandbox_parse_user(c->user, &cuid, &cgid) < 0)
        return 0; /* a user name: the image knows it, we cannot */
    int pid = 0;
    int r = init_pid(&pid, sb, p, err);
    if (r < 0)
        return r;
    sb->init_pid = pid;
    sp_idmap um, gm;
    if ((r = sp_idmap_read(&um, &gm, pid, err)) < 0)
        return r;
    uint32_t hu, hg;
    if (!sp_idmap_to_host(&um, cuid, &hu) || !sp_idmap_to_host(&gm, cgid, &hg))
        return sp_err_set(err, SP_EINVAL, 0,
                          "user %s is outside the ids the container of sandbox %s maps", c->user,
                          sb->name);
    bool same = c->uid_map.n && sp_idmap_equal(&um, &c->uid_map) &&
                sp_idmap_equal(&gm, &c->gid_map) && c->host_uid == hu && c->host_gid == hg;
    if (!same && (geteuid() == 0 || hu != geteuid() || hg != getegid())) {
        cleanup_close int ws = open(sb->workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ws < 0)
            return sp_err_errno(err, errno, "open", sb->workspace);
        bool had = c->uid_map.n && c->gid_map.n;
        r = sp_ids_hand_over(NULL, ws, ".", had ? &c->uid_map : NULL, had ? &c->gid_map : NULL, &um,
                             &gm, hu, hg, err);
        if (r < 0)
            return sp_err_wrap(err, r, "give the workspace of sandbox %s to its user", sb->name);
    }
    if (c->agent) {
        cleanup_free char *agent_dir = sp_xasprintf("%s/agent", sb->state_dir);
        cleanup_close int ad = open(agent_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ad < 0 || fchownat(ad, "run", hu, hg, AT_SYMLINK_NOFOLLOW) < 0)
            return sp_err_errno(err, errno, "give the agent's folder to the container's user",
                                agent_dir);
    }
    c->uid_map = um;
    c->gid_map = gm;
    c->host_uid = hu;
    c->host_gid = hg;
    return 0;
}

static int ensure_image(sp_sandbox *sb, sp_local *p, sp_error **err)
{
    bool exists = false;
    int r = sb->lops->image_exists(&exists, p, sb->cfg.image, err);
    if (r < 0 || exists)
        return r;
    if (strcmp(sb->cfg.image, SP_DEFAULT_IMAGE) == 0)
        return sb->lops->image_build_default(p, err);
    return sp_err_set(err, SP_ENOTFOUND, 0,
                      "image %s is not present: pull it ('sandpod image pull %s', or create with "
                      "--pull missing) or build it ('sandpod image build')",
                      sb->cfg.image, sb->cfg.image);
}

/* Pull the image as opts->pull says, before a hydration that a failed
 * pull would waste; the service is not asked when nothing is to be
 * pulled. */
static int pull_image(sp_sandbox *sb, const sp_sandbox_opts *o, sp_error **err)
{
    if (sb->lops->pull_policy_for(sb->cfg.image, o->pull) == SP_PULL_NEVER)
        return 0;
    sp_local *p = sp_sandbox_local(sb, err);
    if (!p)
        return SP_EPODMAN;
    return sb->lops->image_ensure(p, sb->cfg.image, o->pull, o->pull_no_tls_verify,
                                  o->pull_progress, o->progress_userdata, err);
}

/* After a start, wait (briefly) until the agent listens, so the first
 * command already takes the fast path. A stale socket from an earlier run
 * refuses connections until the agent binds it anew. */
static void wait_agent(sp_sandbox *sb)
{
    if (!sb->cfg.agent)
        return;
    int64_t end = sp_now_ms() + 2000;
    while (sp_now_ms() < end) {
        int fd = -1;
        if (sp_fast_connect(&fd, sb) == 0) {
            close(fd);
            return;
        }
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Start the container, give the workspace to its user, then wait for the
 * agent (which binds its socket once its folder is its own). */
int sp_local_start_container(sp_sandbox *sb, sp_local *p, sp_error **err)
{
    /* The proxy first: the workload's first connection finds it there. */
    int r = sb->cfg.network == SP_NET_NONE ? sp_local_egress_up(sb, p, err) : 0;
    if (r < 0)
        return r;
    r = sb->lops->start(p, sb->container_id, err);
    if (r < 0 && err && *err && strstr((*err)->message, "/dev/net/tun"))
        return sp_err_wrap(err, r,
                           "start container for sandbox %s (a rootless network needs "
                           "/dev/net/tun open to you: mode 0666, as Debian's udev makes it)",
                           sb->name);
    if (r < 0)
        return sp_err_wrap(err, r, "start container for sandbox %s", sb->name);
    if ((r = hand_over_ids(sb, p, err)) < 0)
        return r;
    /* Before anything of the workload runs (the agent, pid 1, does not
     * connect anywhere). */
    int pid = 0;
    if (sb->cfg.network == SP_NET_DEFAULT &&
        ((r = init_pid(&pid, sb, p, err)) < 0 || (r = sp_local_netguard(sb, pid, err)) < 0))
        return r;
    wait_agent(sb);
    return 0;
}

int sp_local_make_container(sp_sandbox *sb, sp_error **err)
{
    sp_local *p = sp_sandbox_local(sb, err);
    if (!p)
        return SP_EPODMAN;
    sp_sandbox_sweep_orphans(sb->lops, p, sb->state_root);
    int r = ensure_image(sb, p, err);
    if (r < 0)
        return r;
    sp_sandbox_config *c = &sb->cfg;
    const sp_container_host *host = NULL;
    if ((r = sb->lops->host(&host, p, err)) < 0)
        return r;
    c->rootless = host->rootless;
    c->limits_apply = host->limits_apply;
    cleanup_free char *seccomp_file = sp_xasprintf("%s/seccomp.json", sb->state_dir);
    cleanup_free char *agent_bin = NULL;
    cleanup_free char *agent_run = NULL;
    cleanup_free char *agent_warning = NULL;
    sb->cfg.agent = sp_agent_prepare(sb, &agent_bin, &agent_run, &agent_warning);
    /* Egress: the proxy's socket folder, read-only; the agent relays the
     * workload's loopback port to it, and every command is told so. */
    bool egress = c->egress && c->network == SP_NET_NONE;
    if (egress && !sb->cfg.agent)
        return sp_err_set(err, SP_EINVAL, 0,
                          "egress rules need sandpod-agent in the container (%s): set "
                          "SANDPOD_AGENT=/path/to/sandpod-agent",
                          c->agent_missing ? c->agent_missing : "none was found");
    cleanup_free char *egress_run = sp_xasprintf("%s/egress/run", sb->state_dir);
    if (egress && (r = sp_local_egress_write(sb, NULL, err)) < 0)
        return r;
    sp_bind_mount mounts[4] = {{sb->workspace, SP_WORKSPACE_MOUNT, false},
                               {agent_bin, SPA_AGENT_PATH, true},
                               {agent_run, SPA_RUN_DIR, false},
                               {egress_run, SPA_EGRESS_DIR, true}};
    sp_strv env = {0};
    for (char **e = c->env; e && *e; e++)
        sp_strv_push(&env, sp_xstrdup(*e));
    if (egress) {
        static const char *const vars[] = {"http_proxy", "https_proxy", "HTTP_PROXY",
                                           "HTTPS_PROXY"};
        for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
            sp_strv_push(&env, sp_xasprintf("%s=http://127.0.0.1:%d", vars[i], SP_EGRESS_PORT));
        sp_strv_push(&env, sp_xasprintf("ALL_PROXY=socks5h://127.0.0.1:%d", SP_EGRESS_PORT));
        sp_strv_push(&env, sp_xasprintf("all_proxy=socks5h://127.0.0.1:%d", SP_EGRESS_PORT));
        sp_strv_push(&env, sp_xstrdup("NO_PROXY=localhost,127.0.0.1,::1"));
        sp_strv_push(&env, sp_xstrdup("no_proxy=localhost,127.0.0.1,::1"));
        /* Secrets: the stand-ins only; the proxy has the values. */
        for (size_t i = 0; i < c->secrets.n; i++)
            sp_strv_push(&env,
                         sp_xasprintf("%s=%s", c->secrets.v[i].name, c->secrets.v[i].standin));
        /* Over HTTPS, the proxy's CA: its clients are pointed at it. */
        if (sp_egress_secrets_over_tls(&c->secrets))
            sp_sandbox_secrets_ca_env(&env, (const char *const *)c->env);
    }
    char **env_all = sp_strv_steal(&env);
    sp_tmpfs tmp = {"/tmp", c->tmpfs_bytes, 01777, false};
    cleanup_free char *label_name = sp_xasprintf("sandpod.name=%s", sb->name);
    /* sp_sandbox_gc() finds orphans by the state folder that owns them. */
    cleanup_free char *label_state = sp_xasprintf("sandpod.state=%s", sb->state_dir);
    const char *labels[] = {"sandpod=1", label_name, label_state, NULL};
    /* The agent is init and serves commands; without it, a long sleep
     * under catatonit keeps the container up and commands come in through
     * exec. */
    const char *cmd[] = {"/bin/sleep", "2147483647", NULL};
    const char *agent_cmd[] = {SPA_AGENT_PATH, SPA_RUN_DIR, NULL};
    cleanup_free char *cname = sp_local_container_name(sb, "");

    sp_container_spec spec = SP_CONTAINER_SPEC_INIT;
    spec.name = cname;
    spec.image = c->image;
    spec.command = sb->cfg.agent ? agent_cmd : cmd;
    spec.env = (const char *const *)env_all;
    spec.workdir = c->workdir;
    spec.user = c->user;
    spec.mounts = mounts;
    spec.n_mounts = sb->cfg.agent ? (egress ? 4 : 3) : 1;
    spec.tmpfs = &tmp;
    spec.n_tmpfs = 1;
    spec.network = c->network;
    spec.memory_bytes = c->memory_bytes == UINT64_MAX ? 0 : c->memory_bytes;
    spec.nano_cpus = c->nano_cpus == UINT64_MAX ? 0 : c->nano_cpus;
    spec.pids_limit = c->pids_limit;
    spec.writable_rootfs = c->writable_root;
    spec.cap_add = (const char *const *)c->cap_add;
    spec.labels = labels;
    spec.init = !sb->cfg.agent;
    spec.stop_timeout_s = 2;
    spec.userns = c->userns;
    spec.seccomp = c->seccomp;
    spec.seccomp_file = seccomp_file;

    /* A container left by an earlier, interrupted attempt holds the name. */
    sb->lops->remove(p, cname, NULL);
    char *id = NULL;
    char **warnings = NULL;
    r = sb->lops->create(&id, &warnings, p, &spec, err);
    sp_strv_free(env_all);
    if (r < 0)
        return sp_err_wrap(err, r, "create container for sandbox %s", sb->name);
    sp_strv_free(c->warnings);
    c->warnings = warnings;
    if (agent_warning) {
        sp_strv all = {0};
        for (char **w = warnings; w && *w; w++)
            sp_strv_push(&all, sp_xstrdup(*w));
        sp_strv_push(&all, steal_pointer(&agent_warning));
        sp_strv_free(c->warnings);
        c->warnings = sp_strv_steal(&all);
    }
    free(sb->container_id);
    sb->container_id = id;
    return sp_local_start_container(sb, p, err);
}

static void add_tail(sp_buf *b, const char *what, const char *s, size_t len)
{
    while (len && (s[len - 1] == '\n' || s[len - 1] == '\r'))
        len--;
    if (!len)
        return;
    size_t from = len > SETUP_ERR_TAIL ? len - SETUP_ERR_TAIL : 0;
    sp_buf_printf(b, "; %s%s: ", what, from ? " ends" : "");
    for (size_t i = from; i < len; i++) {
        if (s[i] == '\n')
            sp_buf_adds(b, "; ");
        else if (s[i] != '\r')
            sp_buf_addc(b, s[i]);
    }
}

/* Make the container and run the setup commands in it (see
 * sp_sandbox_opts.setup). With setup_network on a sandbox without network,
 * the container is made with the default network for setup and remade
 * without it after. */
static int create_and_set_up(sp_sandbox *sb, const sp_sandbox_opts *o, sp_error **err)
{
    sp_sandbox_config *c = &sb->cfg;
    bool any = o->setup && o->setup[0];
    sp_network want = c->network;
    bool lend = any && o->setup_network && want == SP_NET_NONE;
    if (lend)
        c->network = SP_NET_DEFAULT;
    /* --setup-allow: the proxy's policy is wider while setup runs, then
     * narrowed in place (the proxy reads it anew; nothing restarts). */
    char **keep = NULL;
    bool widen = any && c->egress && o->setup_allow && o->setup_allow[0];
    if (widen) {
        sp_strv wide = {0};
        for (char **l = c->egress; *l; l++)
            sp_strv_push(&wide, sp_xstrdup(*l));
        for (size_t i = 0; o->setup_allow[i]; i++)
            sp_strv_push(&wide, sp_xasprintf("allow %s", o->setup_allow[i]));
        keep = c->egress;
        c->egress = sp_strv_steal(&wide);
    }
    int r = sp_local_make_container(sb, err);
    c->network = want;
    for (size_t i = 0; r == 0 && any && o->setup[i]; i++) {
        sp_run_opts ro = SP_RUN_OPTS_INIT;
        ro.timeout_ms = o->setup_timeout_ms ? o->setup_timeout_ms : 600000;
        ro.max_bytes = SETUP_MAX_BYTES;
        ro.max_lines = SIZE_MAX;
        sp_run_result *res = NULL;
        if ((r = sp_sandbox_shell(&res, sb, o->setup[i], &ro, err)) < 0) {
            r = sp_err_wrap(err, r, "setup command %zu (%s)", i + 1, o->setup[i]);
            break;
        }
        if (o->setup_done)
            o->setup_done(o->setup_userdata, i, o->setup[i], res);
        if (res->exit_code != 0 || res->timed_out) {
            sp_buf b = SP_BUF_INIT;
            if (res->timed_out)
                sp_buf_printf(&b, "timed out after %d s", ro.timeout_ms / 1000);
            else
                sp_buf_printf(&b, "exited with code %d", res->exit_code);
            add_tail(&b, "stdout", res->out, res->out_len);
            add_tail(&b, "stderr", res->err, res->err_len);
            r = sp_err_set(err, res->timed_out ? SP_ETIMEOUT : SP_ERROR, 0,
                           "setup command %zu (%s) %.*s", i + 1, o->setup[i], (int)b.len, b.data);
            sp_buf_dispose(&b);
        }
        sp_run_result_free(res);
    }
    if (widen) {
        sp_strv_free(c->egress);
        c->egress = keep;
        int r2 = sp_local_egress_set(sb, r == 0 ? err : NULL);
        if (r == 0)
            r = r2;
    }
    if (r == 0 && lend)
        r = sp_local_make_container(sb, err);
    return r;
}

/* The last step of create, after hydration (and anything else that
 * prepares the workspace): snapshot the workspace as it was handed to the
 * container, tagged "base". `diff NAME` compares with it by default and
 * `apply` takes the changes since it back to the host.
 *
 * When no setup command ran, nothing of the workload has run yet (only the
 * agent, which never writes the workspace), so the read needs no pause:
 * pausing every new container cost a freeze/thaw per create and, under
 * load, runc's pause was seen to fail. After setup commands, something
 * they started may still write, so the container is paused as for any
 * snapshot. */
static int take_baseline(sp_sandbox *sb, bool ran_setup, bool seeded, sp_error **err)
{
    if (!ran_setup) {
        cleanup_free char *store = sp_xasprintf("%s/snapshots.git", sb->state_dir);
        sp_snapstore *s = NULL;
        /* A seed (a fork's restore) left the store's stat cache naming
         * every file it wrote; since then only the hand-over changed
         * owners (and so ctimes): trust those ids rather than read every
         * file again. */
        sp_snapstore_opts so = SP_SNAPSTORE_OPTS_INIT;
        so.trust_ids = seeded;
        int r = sp_snapstore_open(&s, sb->workspace, store, &so, err);
        if (r == 0)
            r = sp_snapshot_create(NULL, s, SP_SANDBOX_BASELINE_TAG, err);
        sp_snapstore_free(s);
        return r;
    }
    sp_sandbox_snap *h = NULL;
    int r = sp_sandbox_snapshot_open(&h, sb, NULL, err);
    if (r < 0)
        return r;
    r = sp_snapshot_create(NULL, sp_sandbox_snapshot_store(h), SP_SANDBOX_BASELINE_TAG, err);
    sp_sandbox_snapshot_close(h);
    return r;
}

int sp_local_create(sp_sandbox *sb, const sp_sandbox_opts *o, const sp_engine *e,
                    sp_sandbox_seed_fn seed, void *seed_data, sp_error **err)
{
    (void)e;
    sp_sandbox_config *c = &sb->cfg;
    int r;
    if (mkdir(sb->workspace, 0755) < 0)
        return sp_err_errno(err, errno, "mkdir", sb->workspace);
    if ((r = pull_image(sb, o, err)) < 0)
        return r;
    if (seed) {
        if ((r = seed(sb, seed_data, err)) < 0)
            return r;
    } else if (o->n_mounts) {
        sp_hydrate_opts ho = SP_HYDRATE_OPTS_INIT;
        ho.allowed_roots = o->allowed_roots;
        ho.progress = o->progress;
        ho.progress_userdata = o->progress_userdata;
        ho.should_stop = o->should_stop;
        sp_hydrate_result *hr = NULL;
        r = sp_hydrate(&hr, sb->workspace, o->mounts, o->n_mounts, &ho, err);
        if (r == 0)
            sp_sandbox_record_mounts(c, o->mounts, o->n_mounts, hr);
        sp_hydrate_result_free(hr);
        if (r < 0)
            return r;
    }
    if (c->egress && (r = sp_local_egress_write(sb, o->egress_hosts, err)) < 0)
        return r;
    /* The values: ours in the state folder (a fork reads them there), and
     * the proxy's (handed to its user once it runs). */
    cleanup_free char *edir = sp_xasprintf("%s/egress", sb->state_dir);
    if (sb->new_secrets && sb->new_secrets->n &&
        ((r = sp_sandbox_secrets_write(sb->state_dir, sb->new_secrets, -1, -1, err)) < 0 ||
         (r = sp_sandbox_secrets_write(edir, sb->new_secrets, -1, -1, err)) < 0))
        return r;
    /* Over HTTPS, what the proxy verifies the hosts against. */
    if (sb->new_secrets && sp_egress_secrets_over_tls(sb->new_secrets) &&
        (r = sp_sandbox_secrets_trust(edir, o->egress_ca, err)) < 0)
        return r;
    if ((r = sp_sandbox_save(sb, err)) < 0 || (r = create_and_set_up(sb, o, err)) < 0 ||
        (r = sp_sandbox_save(sb, err)) < 0)
        return r;
    return take_baseline(sb, o->setup && o->setup[0], seed != NULL, err);
}

void sp_local_discard(sp_sandbox *sb)
{
    if (sb->container_id && sb->local)
        sb->lops->remove(sb->local, sb->container_id, NULL);
    if (sb->local)
        sp_local_egress_down(sb, sb->local, true);
}

int sp_local_image_pin(char **out, sp_sandbox *sb, sp_error **err)
{
    sp_local *p = sp_sandbox_local(sb, err);
    if (!p)
        return SP_EPODMAN;
    return sb->lops->image_id(out, p, sb->cfg.image, err);
}
