/* The sandbox around the tools, tried the way the attacks of issue 11 went,
 * on a real Podman service and real containers (rootful as root, rootless
 * keep-id as anyone else):
 *
 * - the workload's uid maps to no host account (rootful) or to the caller
 *   (rootless), and still writes /workspace;
 * - keyctl/add_key/request_key and new user namespaces are refused, while
 *   Podman's own profile (the opt-out) allows them: the probe can tell;
 * - a host account with the uid the workload used to share cannot read its
 *   /proc/PID/environ (and can under --userns host: the opt-out);
 * - /workspace is nosuid,nodev;
 * - replacing /.sandpod/run/agent.sock with a symlink to another sandbox's
 *   socket, or with a socket the workload listens on, never sends a command
 *   anywhere but the sandbox's own container.
 * The probe (tests/sandbox/probe.c) is static; it is copied into the
 * workspace and run there. */
#include <fcntl.h>
#include <linux/fs.h>
#include <pwd.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "sandpod/podman.h"
#include "sandpod/fs.h"
#include "sandpod/sandbox.h"
#include "testutil.h"

static char *podman_url;
static char *state_root;

static sp_network make_network = SP_NET_NONE;

static sp_sandbox *make(const char *name, sp_userns userns, sp_seccomp seccomp)
{
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.network = make_network;
    o.name = name;
    o.state_root = state_root;
    o.podman_url = podman_url;
    o.userns = userns;
    o.seccomp = seccomp;
    const char *env[] = {"SANDPOD_SECRET=hunter2", NULL};
    o.env = env;
    sp_sandbox *sb = NULL;
    sp_error *err = NULL;
    if (sp_sandbox_create(&sb, &o, &err) < 0)
        fail_msg("create %s: %s", name, err->message);
    /* The probe, copied in as the host would copy any file. */
    sp_fs *fs = sp_sandbox_fs(sb, &err);
    assert_non_null(fs);
    int fd = open(SANDPOD_PROBE_PATH, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    sp_buf b = SP_BUF_INIT;
    assert_int_equal(sp_read_all(fd, &b, 64u << 20), 0);
    close(fd);
    sp_fs_write_opts wo = SP_FS_WRITE_OPTS_INIT;
    if (sp_fs_write_bytes(NULL, fs, ".probe", b.data, b.len, &wo, &err) < 0)
        fail_msg("copy the probe: %s", err->message);
    sp_buf_dispose(&b);
    char *p = tu_join(sp_sandbox_workspace(sb), ".probe");
    assert_int_equal(chmod(p, 0755), 0);
    free(p);
    return sb;
}

static void drop(sp_sandbox *sb)
{
    sp_error *err = NULL;
    if (sp_sandbox_remove(sb, false, &err) < 0)
        fail_msg("remove: %s", err->message);
    sp_sandbox_free(sb);
}

static char *sh(sp_sandbox *sb, const char *cmd)
{
    sp_run_result *r = NULL;
    sp_error *err = NULL;
    if (sp_sandbox_shell(&r, sb, cmd, NULL, &err) < 0)
        fail_msg("sh %s: %s", cmd, err->message);
    char *out = strdup(r->out);
    sp_run_result_free(r);
    return out;
}

/* The host pid of the container's pid 1. */
static int init_pid(sp_sandbox *sb)
{
    sp_sandbox_status *st = NULL;
    sp_error *err = NULL;
    sp_podman *p = sp_sandbox_podman(sb, &err);
    assert_non_null(p);
    sp_container_info *info = NULL;
    if (sp_podman_container_inspect(&info, p, sp_sandbox_container_id(sb), &err) < 0)
        fail_msg("inspect: %s", err->message);
    int pid = info->pid;
    sp_container_info_free(info);
    sp_sandbox_status_free(st);
    assert_true(pid > 0);
    return pid;
}

static void test_ids(void **state)
{
    (void)state;
    sp_sandbox *sb = make("iso-ids", SP_USERNS_PRIVATE, SP_SECCOMP_SANDPOD);
    int pid = init_pid(sb);
    unsigned hu = tu_host_id(pid, "uid_map", 1000), hg = tu_host_id(pid, "gid_map", 1000);
    print_message("container uid 1000 is host uid %u, gid %u\n", hu, hg);
    if (geteuid() == 0) {
        /* No host account has it, and it is not the container's own id. */
        assert_null(getpwuid(hu));
        assert_true(hu != 1000);
        assert_true(tu_host_id(pid, "uid_map", 0) != 0); /* container root is not host root */
    } else {
        assert_int_equal(hu, geteuid()); /* keep-id: the caller */
        assert_int_equal(hg, getegid());
    }
    /* The workload writes its workspace; the host sees the mapped owner. */
    free(sh(sb, "echo from inside > /workspace/inside.txt"));
    struct stat st;
    char *p = tu_join(sp_sandbox_workspace(sb), "inside.txt");
    assert_int_equal(lstat(p, &st), 0);
    assert_int_equal(st.st_uid, hu);
    assert_int_equal(st.st_gid, hg);
    free(p);
    /* A file the host tools write is the workload's too. */
    sp_error *err = NULL;
    sp_fs *fs = sp_sandbox_fs(sb, &err);
    sp_fs_write_opts wo = SP_FS_WRITE_OPTS_INIT;
    assert_int_equal(sp_fs_write(NULL, fs, "host.txt", "x\n", 2, &wo, &err), 0);
    char *out = sh(sb, "echo more >> /workspace/host.txt && echo ok");
    assert_string_equal(out, "ok\n");
    free(out);
    /* The state is private. */
    char *js = tu_join(sp_sandbox_state_dir(sb), "sandbox.json");
    assert_int_equal(lstat(js, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(lstat(sp_sandbox_state_dir(sb), &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    assert_int_equal(lstat(state_root, &st), 0);
    assert_int_equal(st.st_mode & 077, 0);
    free(js);
    /* /workspace is nosuid,nodev. */
    out = sh(sb, "grep ' /workspace ' /proc/self/mountinfo");
    assert_non_null(strstr(out, "nosuid"));
    assert_non_null(strstr(out, "nodev"));
    free(out);
    drop(sb);
}

static void test_seccomp(void **state)
{
    (void)state;
    sp_sandbox *sb = make("iso-sec", SP_USERNS_PRIVATE, SP_SECCOMP_SANDPOD);
    char *out = sh(sb, "/workspace/.probe keys; /workspace/.probe userns");
    print_message("sandpod's profile:\n%s", out);
    assert_non_null(strstr(out, "keyctl=EPERM\n"));
    assert_non_null(strstr(out, "add_key=EPERM\n"));
    assert_non_null(strstr(out, "request_key=EPERM\n"));
    assert_non_null(strstr(out, "unshare=EPERM\n"));
    assert_non_null(strstr(out, "clone=EPERM\n"));
    assert_non_null(strstr(out, "clone3=ENOSYS\n"));
    free(out);
    /* Ordinary processes still start (fork/clone without CLONE_NEWUSER). */
    out = sh(sb, "sh -c 'echo child' && (echo sub)");
    assert_string_equal(out, "child\nsub\n");
    free(out);
    drop(sb);

    /* Podman's own profile lets the same probe through: it tells them apart. */
    sb = make("iso-pod", SP_USERNS_PRIVATE, SP_SECCOMP_ENGINE);
    out = sh(sb, "/workspace/.probe keys; /workspace/.probe userns");
    print_message("Podman's profile:\n%s", out);
    assert_null(strstr(out, "keyctl=EPERM\n"));
    assert_null(strstr(out, "unshare=EPERM\n"));
    free(out);
    drop(sb);
}

/* Whether a process with host uid 1000 (the first account on most hosts,
 * and the workload's uid before user namespaces) can read the environment
 * of the container's pid 1. */
static bool uid1000_reads_environ(int pid)
{
    pid_t c = fork();
    if (c == 0) {
        if (setgid(1000) < 0 || setuid(1000) < 0)
            _exit(3);
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/environ", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        char buf[4096];
        _exit(fd >= 0 && read(fd, buf, sizeof(buf)) > 0 ? 0 : 1);
    }
    int st = 0;
    waitpid(c, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 3);
    return WEXITSTATUS(st) == 0;
}

static void test_host_account(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip(); /* rootless: the workload is the caller, by design */
    sp_sandbox *sb = make("iso-acct", SP_USERNS_PRIVATE, SP_SECCOMP_SANDPOD);
    assert_false(uid1000_reads_environ(init_pid(sb)));
    drop(sb);
    /* The loud opt-out shares the host's ids: the same read works. */
    sb = make("iso-hostns", SP_USERNS_HOST, SP_SECCOMP_SANDPOD);
    assert_true(uid1000_reads_environ(init_pid(sb)));
    drop(sb);
}

static bool fast_path_in_use(sp_sandbox *sb)
{
    char *sock = tu_join(sp_sandbox_state_dir(sb), "agent/run/agent.sock");
    struct stat st;
    bool yes = lstat(sock, &st) == 0 && S_ISSOCK(st.st_mode);
    free(sock);
    return yes;
}

static void test_agent_socket_redirect(void **state)
{
    (void)state;
    sp_sandbox *a = make("iso-a", SP_USERNS_PRIVATE, SP_SECCOMP_SANDPOD);
    sp_sandbox *b = make("iso-b", SP_USERNS_PRIVATE, SP_SECCOMP_SANDPOD);
    if (!fast_path_in_use(a)) {
        drop(a);
        drop(b);
        skip();
    }
    free(sh(a, "echo A > /workspace/who"));
    free(sh(b, "echo B > /workspace/who"));
    /* The host path of B's socket is no secret (mountinfo shows such
     * paths); A points its own socket name there. */
    char *b_sock = tu_join(sp_sandbox_state_dir(b), "agent/run/agent.sock");
    char *cmd = NULL;
    assert_true(asprintf(&cmd,
                         "rm -f /.sandpod/run/agent.sock && ln -s %s /.sandpod/run/agent.sock",
                         b_sock) > 0);
    free(sh(a, cmd));
    free(cmd);
    free(b_sock);
    /* Every later command of A runs in A (through Podman), never in B. */
    for (int i = 0; i < 3; i++) {
        char *out = sh(a, "cat /workspace/who");
        assert_string_equal(out, "A\n");
        free(out);
    }
    /* The same with a link to the rootful Podman socket. */
    free(sh(a, "rm -f /.sandpod/run/agent.sock && ln -s /run/podman/podman.sock "
               "/.sandpod/run/agent.sock"));
    char *out = sh(a, "cat /workspace/who");
    assert_string_equal(out, "A\n");
    free(out);
    drop(a);
    drop(b);
}

static void test_fake_agent(void **state)
{
    (void)state;
    sp_sandbox *sb = make("iso-fake", SP_USERNS_PRIVATE, SP_SECCOMP_SANDPOD);
    if (!fast_path_in_use(sb)) {
        drop(sb);
        skip();
    }
    /* The workload replaces the agent's socket with one it listens on (a
     * command of its own, run from a second process while we go on). */
    char *logp = tu_join(sp_sandbox_workspace(sb), "fake.log");
    pid_t child = fork();
    if (child == 0) {
        sp_sandbox *x = NULL;
        sp_error *e = NULL;
        sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
        o.state_root = state_root;
        o.podman_url = podman_url;
        sp_run_result *r = NULL;
        int rc = sp_sandbox_open(&x, "iso-fake", &o, &e) == 0
                     ? sp_sandbox_shell(&r, x,
                                        "/workspace/.probe listen /.sandpod/run/agent.sock 4 "
                                        "> /workspace/fake.log 2>&1",
                                        NULL, &e)
                     : -1;
        _exit(rc == 0 ? 0 : 1);
    }
    for (int i = 0; i < 300; i++) {
        char *log = tu_read(sp_sandbox_workspace(sb), "fake.log", NULL);
        bool up = log && strstr(log, "listening");
        free(log);
        if (up)
            break;
        usleep(20 * 1000);
    }
    char *out = sh(sb, "echo SECRET-COMMAND-$((6*7))");
    assert_string_equal(out, "SECRET-COMMAND-42\n"); /* ran, through Podman */
    free(out);
    int st = 0;
    waitpid(child, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* The fake saw at most a connection, never a byte of the request. */
    char *log = tu_read(sp_sandbox_workspace(sb), "fake.log", NULL);
    free(logp);
    print_message("fake agent: %s", log);
    assert_non_null(strstr(log, "bytes=0\n"));
    free(log);
    drop(sb);
}

/* A folder outside every workspace holding `n` root-owned files, which a
 * racer tries to get chowned or deleted through the workspace. */
static char *outside_with_files(int n)
{
    char *dir = tu_mkdtemp();
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "precious-%d", i);
        tu_write(dir, name, "keep me\n", 0644);
    }
    return dir;
}

static int count_intact(const char *dir, int n)
{
    int ok = 0;
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "precious-%d", i);
        char *p = tu_join(dir, name);
        struct stat st;
        if (lstat(p, &st) == 0 && st.st_uid == 0 && st.st_gid == 0)
            ok++;
        free(p);
    }
    return ok;
}

/* Fork a racer that keeps exchanging workspace folders d0..d(n-1) with
 * symlinks l0.. to `outside` (renameat2 RENAME_EXCHANGE), as the attack
 * did from a host account with the workload's uid. */
static pid_t start_racer(const char *ws, const char *outside, int n)
{
    int wfd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(wfd >= 0);
    for (int i = 0; i < n; i++) {
        char d[32], l[32];
        snprintf(d, sizeof(d), "d%d", i);
        snprintf(l, sizeof(l), "l%d", i);
        /* After an earlier round either name may be the folder or the link. */
        char *dp = tu_join(ws, d), *lp = tu_join(ws, l);
        tu_rmtree(dp);
        tu_rmtree(lp);
        free(dp);
        free(lp);
        mkdirat(wfd, d, 0755);
        for (int k = 0; k < 5; k++) {
            char f[64];
            snprintf(f, sizeof(f), "d%d/f%d", i, k);
            int fd = openat(wfd, f, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
            if (fd >= 0)
                close(fd);
        }
        assert_int_equal(symlinkat(outside, wfd, l), 0);
    }
    pid_t pid = fork();
    if (pid == 0) {
        for (unsigned long k = 0;; k++) {
            char d[32], l[32];
            snprintf(d, sizeof(d), "d%lu", k % (unsigned long)n);
            snprintf(l, sizeof(l), "l%lu", k % (unsigned long)n);
            syscall(SYS_renameat2, wfd, d, wfd, l, RENAME_EXCHANGE);
        }
    }
    close(wfd);
    return pid;
}

static void stop_racer(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* rm --force while the workspace's folders keep turning into symlinks to
 * a folder of root's files: none of them is deleted. */
static void test_rm_race(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip(); /* the racer needs to reach the workspace as the attack did */
    char *outside = outside_with_files(50);
    for (int round = 0; round < 5; round++) {
        sp_sandbox *sb = make("iso-rmrace", SP_USERNS_PRIVATE, SP_SECCOMP_SANDPOD);
        pid_t racer = start_racer(sp_sandbox_workspace(sb), outside, 8);
        usleep(20 * 1000);
        sp_error *err = NULL;
        int r = sp_sandbox_remove(sb, false, &err);
        stop_racer(racer);
        if (r < 0)
            print_message("remove under the race: %s\n", err->message);
        sp_error_free(err);
        sp_sandbox_free(sb);
        assert_int_equal(count_intact(outside, 50), 50);
    }
    tu_rmtree(outside);
    free(outside);
}

/* The hand-over of a recreated container's workspace (every owner moves to
 * the new id range) under the same race: no file outside changes owner. */
static void test_handover_race(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    char *outside = outside_with_files(50);
    sp_sandbox *sb = make("iso-hrace", SP_USERNS_PRIVATE, SP_SECCOMP_SANDPOD);
    sp_error *err = NULL;
    sp_podman *p = sp_sandbox_podman(sb, &err);
    assert_non_null(p);
    for (int round = 0; round < 5; round++) {
        /* Removed behind sandpod's back: start makes it anew, in a new range. */
        if (sp_podman_container_delete(p, sp_sandbox_container_id(sb), true, true, &err) < 0)
            fail_msg("delete the container: %s", err->message);
        pid_t racer = start_racer(sp_sandbox_workspace(sb), outside, 8);
        usleep(20 * 1000);
        int r = sp_sandbox_start(sb, &err);
        stop_racer(racer);
        if (r < 0)
            print_message("start under the race: %s\n", err->message);
        sp_error_free(err);
        err = NULL;
        assert_int_equal(count_intact(outside, 50), 50);
        if (r == 0) {
            char *out = sh(sb, "echo alive");
            assert_string_equal(out, "alive\n");
            free(out);
        }
    }
    drop(sb);
    tu_rmtree(outside);
    free(outside);
}

/* A workload's folder tree deeper than any fd budget and longer than
 * PATH_MAX does not stop `rm`: the state folder goes whole. */
static void test_rm_deep_tree(void **state)
{
    (void)state;
    sp_sandbox *sb = make("iso-deep", SP_USERNS_PRIVATE, SP_SECCOMP_SANDPOD);
    char *out = sh(sb, "cd /workspace && i=0; while [ $i -lt 700 ]; do mkdir d && cd d || exit 1; "
                       "i=$((i+1)); done; touch leaf; "
                       /* Two chains of 15 names of 200 bytes, one moved to
                        * the bottom of the other: paths of over 6,000 bytes. */
                       "cd /workspace && n=$(printf '%0200d' 0); p=$n; i=1; while [ $i -lt 15 ]; "
                       "do p=$p/$n; i=$((i+1)); done; mkdir -p x/$p y/$p && touch y/$p/leaf2 && "
                       "mv y x/$p/ && echo built");
    assert_string_equal(out, "built\n");
    free(out);
    char *dir = strdup(sp_sandbox_state_dir(sb));
    sp_error *err = NULL;
    if (sp_sandbox_remove(sb, false, &err) < 0)
        fail_msg("remove a deep workspace: %s", err->message);
    sp_sandbox_free(sb);
    struct stat st;
    assert_int_equal(lstat(dir, &st), -1);
    assert_int_equal(errno, ENOENT);
    free(dir);
}

/* Files the workload made as container root: under rootless Podman they
 * belong to a subuid the caller cannot remove directly; `rm` still removes
 * the whole sandbox (from inside the caller's user namespace). */
static void test_rm_files_of_container_root(void **state)
{
    (void)state;
    sp_sandbox *sb = make("iso-rootfiles", SP_USERNS_PRIVATE, SP_SECCOMP_SANDPOD);
    /* Container root holds no capabilities: the workload's user opens a
     * folder for it first. */
    free(sh(sb, "mkdir /workspace/open && chmod 777 /workspace/open"));
    sp_run_opts ro = SP_RUN_OPTS_INIT;
    ro.user = "0:0";
    sp_run_result *r = NULL;
    sp_error *err = NULL;
    if (sp_sandbox_shell(&r, sb,
                         "mkdir /workspace/open/rootdir && touch /workspace/open/rootdir/f && "
                         "chmod 700 /workspace/open/rootdir && echo made",
                         &ro, &err) < 0)
        fail_msg("as container root: %s", err->message);
    assert_string_equal(r->out, "made\n");
    sp_run_result_free(r);
    char *p = tu_join(sp_sandbox_workspace(sb), "open/rootdir");
    struct stat st;
    assert_int_equal(lstat(p, &st), 0);
    print_message("container root's folder is host uid %u\n", (unsigned)st.st_uid);
    assert_true(st.st_uid != geteuid() || geteuid() == 0);
    free(p);
    char *dir = strdup(sp_sandbox_state_dir(sb));
    if (sp_sandbox_remove(sb, false, &err) < 0)
        fail_msg("remove: %s", err->message);
    sp_sandbox_free(sb);
    assert_int_equal(lstat(dir, &st), -1);
    free(dir);
}

/* --network default works in both modes (rootless needs slirp4netns,
 * which contrib/setup.sh installs): an interface besides lo. */
static void test_network_default(void **state)
{
    (void)state;
    int tun = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    if (tun < 0 && geteuid() != 0) {
        print_message("skipped: /dev/net/tun is not ours to open (%s); rootless networks need "
                      "it\n",
                      strerror(errno));
        skip();
    }
    if (tun >= 0)
        close(tun);
    make_network = SP_NET_DEFAULT;
    sp_sandbox *sb = make("iso-net", SP_USERNS_PRIVATE, SP_SECCOMP_SANDPOD);
    make_network = SP_NET_NONE;
    char *out = sh(sb, "ls /sys/class/net | grep -vx lo | head -n 1");
    print_message("network default: %s", out);
    assert_true(strlen(out) > 1);
    free(out);
    drop(sb);
}

int main(void)
{
    podman_url = tu_need_podman_or_skip();
    state_root = tu_mkdtemp();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_seccomp),
        cmocka_unit_test(test_host_account),
        cmocka_unit_test(test_agent_socket_redirect),
        cmocka_unit_test(test_fake_agent),
        cmocka_unit_test(test_rm_race),
        cmocka_unit_test(test_handover_race),
        cmocka_unit_test(test_rm_deep_tree),
        cmocka_unit_test(test_rm_files_of_container_root),
        cmocka_unit_test(test_network_default),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rmtree(state_root);
    free(state_root);
    free(podman_url);
    return r;
}
