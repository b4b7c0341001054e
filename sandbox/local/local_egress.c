/* A local sandbox's egress: its policy file and its proxy's container.
 *
 * Where the proxy lives: a container of its own beside the sandbox's,
 * `<container>-egress`, made from the same image with the same static
 * sandpod-agent (`--egress-proxy`), the host's network (it must reach what
 * the rules allow, and it judges the host's own addresses from the host's
 * interfaces), no capabilities, sandpod's seccomp profile, its own user
 * namespace, a read-only root, and bounds of its own (memory, processes and
 * so threads, connections). Podman supervises it, so it lives exactly as
 * long as the sandbox does: made with it, started before it, stopped after
 * it, removed with it, and made again by `sandpod start` when it is gone
 * (a host reboot). Nothing is shared between sandboxes: each has its own
 * proxy, policy and log.
 *
 * Files, under the state folder:
 *   egress/policy, egress/hosts  ours; read-only in the proxy's container
 *   egress/secrets               the brokered secrets' values (mode 0600,
 *                                handed to the proxy's user once it runs)
 *   egress/run/                  the proxy's (handed to its user): proxy.sock
 *                                and connections.jsonl; read-only in the
 *                                sandbox's container, where the agent relays
 *                                127.0.0.1:3128 to the socket
 * The sandbox's own container has no network of its own (SP_NET_NONE): its
 * only way out is that socket. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/protocol.h"
#include "egress_dir.h"
#include "egress_proxy.h"
#include "local_kind.h"
#include "sandbox_internal.h"

/* Where the policy folder appears in the proxy's container. */
#define PROXY_POLICY_DIR "/.sandpod/egress-policy"
#define PROXY_PIDS       (SP_EGRESS_MAX_CONNS + 64)
#define PROXY_MEMORY     (256ull << 20)
/* Each connection holds four descriptors (the client's socket, the
 * upstream's, a pipe's two ends); the default 1024 ran out at its bound. */
#define PROXY_NOFILE (SP_EGRESS_MAX_CONNS * 4 + 256)

char *sp_local_egress_container(const sp_sandbox *sb)
{
    return sp_local_container_name(sb, "-egress");
}

static char *egress_dir(const sp_sandbox *sb, const char *leaf)
{
    return leaf ? sp_xasprintf("%s/egress/%s", sb->state_dir, leaf)
                : sp_xasprintf("%s/egress", sb->state_dir);
}

int sp_local_egress_write(sp_sandbox *sb, const char *hosts_file, sp_error **err)
{
    cleanup_free char *dir = egress_dir(sb, NULL);
    cleanup_free char *run = egress_dir(sb, "run");
    if ((mkdir(dir, 0755) < 0 && errno != EEXIST) || (mkdir(run, 0755) < 0 && errno != EEXIST))
        return sp_err_errno(err, errno, "mkdir", run);
    cleanup_free char *policy = sp_egress_policy_text(sb->cfg.egress);
    sp_buf text = SP_BUF_INIT;
    if (hosts_file) {
        cleanup_close int hf = open(hosts_file, O_RDONLY | O_CLOEXEC);
        if (hf < 0 || sp_read_all(hf, &text, 1u << 20) < 0) {
            sp_buf_dispose(&text);
            return sp_err_errno(err, errno, "read the egress hosts file", hosts_file);
        }
    }
    int r = sp_egress_dir_write(dir, policy, strlen(policy),
                                hosts_file ? (text.data ? text.data : "") : NULL, text.len, err);
    sp_buf_dispose(&text);
    return r;
}

/* The proxy's container, made anew. */
static int make_proxy(sp_sandbox *sb, sp_local *p, const char *name, sp_error **err)
{
    sp_sandbox_config *c = &sb->cfg;
    cleanup_free char *agent_bin = sp_xasprintf("%s/agent/sandpod-agent", sb->state_dir);
    cleanup_free char *dir = egress_dir(sb, NULL);
    cleanup_free char *run = egress_dir(sb, "run");
    cleanup_free char *seccomp_file = sp_xasprintf("%s/seccomp.json", sb->state_dir);
    sp_bind_mount mounts[3] = {{agent_bin, SPA_AGENT_PATH, true},
                               {dir, PROXY_POLICY_DIR, true},
                               {run, SPA_EGRESS_DIR, false}};
    cleanup_free char *max = sp_xasprintf("%d", SP_EGRESS_MAX_CONNS);
    const char *cmd[] = {SPA_AGENT_PATH,
                         "--egress-proxy",
                         PROXY_POLICY_DIR,
                         SPA_EGRESS_DIR,
                         "--max-connections",
                         max,
                         NULL};
    cleanup_free char *label_name = sp_xasprintf("sandpod.name=%s", sb->name);
    cleanup_free char *label_state = sp_xasprintf("sandpod.state=%s", sb->state_dir);
    const char *labels[] = {"sandpod=1", "sandpod.role=egress", label_name, label_state, NULL};
    sp_container_spec spec = SP_CONTAINER_SPEC_INIT;
    spec.name = name;
    spec.image = c->image;
    spec.command = cmd;
    spec.user = c->user;
    spec.mounts = mounts;
    spec.n_mounts = 3;
    /* In a user namespace of its own beside the host's network, the
     * runtime may not mount a sysfs (that needs the network namespace's
     * owner); the proxy reads nothing there, so an empty tmpfs takes its
     * place. */
    sp_tmpfs sys = {"/sys", 1 << 20, 0555, false};
    spec.tmpfs = &sys;
    spec.n_tmpfs = 1;
    spec.network = SP_NET_HOST;
    spec.memory_bytes = PROXY_MEMORY;
    spec.nano_cpus = c->nano_cpus == UINT64_MAX ? 0 : c->nano_cpus;
    spec.pids_limit = PROXY_PIDS;
    sp_rlimit nofile = {"nofile", PROXY_NOFILE, PROXY_NOFILE};
    spec.rlimits = &nofile;
    spec.n_rlimits = 1;
    spec.labels = labels;
    spec.stop_timeout_s = 1;
    spec.userns = c->userns;
    spec.seccomp = c->seccomp;
    spec.seccomp_file = seccomp_file;
    sb->lops->remove(p, name, NULL);
    char *id = NULL;
    char **warnings = NULL;
    int r = sb->lops->create(&id, &warnings, p, &spec, err);
    free(id);
    sp_strv_free(warnings);
    return r < 0 ? sp_err_wrap(err, r, "create the egress proxy of sandbox %s", sb->name) : 0;
}

/* The secrets' values to the proxy's user alone. The proxy started before
 * it could read them; a new version of the policy makes it read both, and
 * this returns once it has. */
static int secrets_to_proxy(sp_sandbox *sb, int dfd, uint32_t hu, uint32_t hg, sp_error **err)
{
    if (!sb->cfg.secrets.n)
        return 0;
    cleanup_free char *dir = egress_dir(sb, NULL);
    cleanup_free char *run = egress_dir(sb, "run");
    int r;
    if (fchownat(dfd, SP_EGRESS_SECRETS, hu, hg, AT_SYMLINK_NOFOLLOW) < 0)
        return sp_err_errno(err, errno, "give the secrets to the proxy's user", dir);
    if ((r = sp_local_egress_write(sb, NULL, err)) < 0 ||
        (r = sp_egress_wait_loaded(dir, run, 5000, err)) < 0)
        return sp_err_wrap(err, r, "the egress proxy of sandbox %s did not take its secrets",
                           sb->name);
    return 0;
}

/* The host ids of the proxy's user (known once its container runs). */
static int proxy_ids(sp_sandbox *sb, sp_local *p, const char *name, uint32_t *hu, uint32_t *hg,
                     sp_error **err)
{
    sp_container_info *info = NULL;
    int r = sb->lops->inspect(&info, p, name, err);
    if (r < 0)
        return r;
    int pid = info->running ? info->pid : 0;
    sp_container_info_free(info);
    if (pid <= 0)
        return sp_err_set(err, SP_EPODMAN, 0,
                          "the egress proxy of sandbox %s did not stay up (sandpod logs shows "
                          "the sandbox's; podman logs %s the proxy's)",
                          sb->name, name);
    uid_t cuid = 0;
    gid_t cgid = 0;
    sp_idmap um, gm;
    if (sp_sandbox_parse_user(sb->cfg.user, &cuid, &cgid) < 0 ||
        (r = sp_idmap_read(&um, &gm, pid, err)) < 0 || !sp_idmap_to_host(&um, cuid, hu) ||
        !sp_idmap_to_host(&gm, cgid, hg))
        return r < 0 ? r
                     : sp_err_set(err, SP_EINVAL, 0,
                                  "the egress proxy of sandbox %s: user %s has no host ids",
                                  sb->name, sb->cfg.user);
    return 0;
}

/* The run folder to the proxy's user (its ids are known once it runs),
 * then wait for its socket. */
static int hand_over(sp_sandbox *sb, sp_local *p, const char *name, sp_error **err)
{
    uint32_t hu, hg;
    int r = proxy_ids(sb, p, name, &hu, &hg, err);
    if (r < 0)
        return r;
    cleanup_free char *dir = egress_dir(sb, NULL);
    cleanup_close int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0 || fchownat(dfd, "run", hu, hg, AT_SYMLINK_NOFOLLOW) < 0)
        return sp_err_errno(err, errno, "give the egress folder to the proxy's user", dir);
    cleanup_free char *sock = egress_dir(sb, "run/" SP_EGRESS_SOCKET);
    for (int64_t end = sp_now_ms() + 5000; sp_now_ms() < end;) {
        struct stat st;
        if (lstat(sock, &st) == 0 && S_ISSOCK(st.st_mode))
            return secrets_to_proxy(sb, dfd, hu, hg, err);
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return sp_err_set(err, SP_ETIMEOUT, 0,
                      "the egress proxy of sandbox %s did not listen within 5 s (podman logs %s)",
                      sb->name, name);
}

int sp_local_egress_up(sp_sandbox *sb, sp_local *p, sp_error **err)
{
    if (!sb->cfg.egress)
        return 0;
    cleanup_free char *name = sp_local_egress_container(sb);
    sp_container_info *info = NULL;
    sp_error *e = NULL;
    int r = sb->lops->inspect(&info, p, name, &e);
    sp_error_free(e);
    bool running = r == 0 && info->running;
    sp_container_info_free(info);
    /* A stale socket from the last run must not pass for the new one. */
    cleanup_free char *sock = egress_dir(sb, "run/" SP_EGRESS_SOCKET);
    if (!running) {
        unlink(sock);
        if (r < 0 && (r = make_proxy(sb, p, name, err)) < 0)
            return r;
        if ((r = sb->lops->start(p, name, err)) < 0)
            return sp_err_wrap(err, r, "start the egress proxy of sandbox %s", sb->name);
    }
    return hand_over(sb, p, name, err);
}

void sp_local_egress_down(sp_sandbox *sb, sp_local *p, bool remove)
{
    if (!sb->cfg.egress)
        return;
    cleanup_free char *name = sp_local_egress_container(sb);
    if (remove)
        sb->lops->remove(p, name, NULL);
    else
        sb->lops->stop(p, name, 1, NULL);
}

/* Whether the proxy is up: its socket answers. */
static bool proxy_listens(const sp_sandbox *sb)
{
    cleanup_free char *sock = egress_dir(sb, "run/" SP_EGRESS_SOCKET);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(sock) >= sizeof(sa.sun_path))
        return false;
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    cleanup_close int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    return fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
}

int sp_local_egress_set(sp_sandbox *sb, sp_error **err)
{
    int r = sp_local_egress_write(sb, NULL, err);
    if (r < 0 || !proxy_listens(sb))
        return r; /* a stopped sandbox's proxy reads it when it starts */
    /* A running proxy: back when the new policy is in force (it polls
     * every 100 ms), so the caller's next connection meets it. */
    cleanup_free char *dir = egress_dir(sb, NULL);
    cleanup_free char *run = egress_dir(sb, "run");
    if ((r = sp_egress_wait_loaded(dir, run, 3000, err)) < 0)
        return sp_err_wrap(err, r, "sandbox %s: the policy is written, and read at the next start",
                           sb->name);
    return 0;
}

int sp_local_egress_secrets_set(sp_sandbox *sb, const sp_egress_secrets *values, sp_error **err)
{
    cleanup_free char *dir = egress_dir(sb, NULL);
    int r = sp_sandbox_secrets_write(dir, values, -1, -1, err);
    if (r < 0 || !proxy_listens(sb))
        return r; /* handed to the proxy's user when it starts */
    sp_local *p = sp_sandbox_local(sb, err);
    uint32_t hu, hg;
    cleanup_free char *name = sp_local_egress_container(sb);
    cleanup_close int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (!p || (r = proxy_ids(sb, p, name, &hu, &hg, err)) < 0)
        return p ? r : SP_EPODMAN;
    if (dfd < 0 || fchownat(dfd, SP_EGRESS_SECRETS, hu, hg, AT_SYMLINK_NOFOLLOW) < 0)
        return sp_err_errno(err, errno, "give the secrets to the proxy's user", dir);
    /* A new policy version makes the proxy read both; back once it has. */
    return sp_local_egress_set(sb, err);
}

int sp_local_egress_log(int *fd, sp_sandbox *sb, sp_error **err)
{
    cleanup_free char *run = egress_dir(sb, "run");
    int r = sp_egress_log_open(fd, run, err);
    return r < 0 ? sp_err_wrap(err, r, "sandbox %s", sb->name) : 0;
}
