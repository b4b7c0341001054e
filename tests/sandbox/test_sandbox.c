/* Sandboxes on a real Podman service and a real container: hardening seen
 * from inside, ownership both ways, timeouts that kill, output caps, and
 * recovery from a killed or removed container. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandpod/podman.h"
#include "sandpod/attach.h"
#include "sandpod/sandbox.h"
#include "testutil.h"

static char *podman_url; /* tu_need_podman_or_skip(): the shared service */
static char *state_root;
static char *project;
static sp_sandbox *sb;

/* SANDPOD_EXEC_PATH=rest|fast picks the path every command takes, so the
 * same assertions run on Podman's REST exec and on the agent. */
static sp_exec_path exec_path_from_env(void)
{
    const char *v = getenv("SANDPOD_EXEC_PATH");
    if (v && strcmp(v, "fast") == 0)
        return SP_EXEC_FAST;
    if (v && strcmp(v, "rest") == 0)
        return SP_EXEC_REST;
    return SP_EXEC_AUTO;
}

static int group_setup(void **state)
{
    (void)state;
    state_root = tu_mkdtemp();
    project = tu_mkdtemp();
    tu_write(project, "hello.txt", "hello from the host\n", 0644);
    tu_mkdir(project, "src");
    tu_write(project, "src/main.c", "int main(void) { return 0; }\n", 0644);

    sp_mount m = {0};
    m.host_path = project;
    char name[64];
    snprintf(name, sizeof(name), "t-%d", (int)getpid());
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.name = name;
    o.state_root = state_root;
    o.podman_url = podman_url; /* the shared service */
    o.exec_path = exec_path_from_env();
    o.mounts = &m;
    o.n_mounts = 1;
    o.memory_bytes = 128ull << 20;
    o.pids_limit = 64;
    sp_error *err = NULL;
    if (sp_sandbox_create(&sb, &o, &err) < 0) {
        fprintf(stderr, "create: %s\n", err->message);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    sp_error *err = NULL;
    if (sb && sp_sandbox_remove(sb, false, &err) < 0)
        fprintf(stderr, "remove: %s\n", err->message);
    sp_sandbox_free(sb);
    tu_rmtree(state_root);
    tu_rmtree(project);
    free(state_root);
    free(project);
    return 0;
}

/* Run a shell command that must succeed as a tool call. */
static sp_run_result *sh(const char *cmd, int timeout_ms)
{
    sp_run_opts o = SP_RUN_OPTS_INIT;
    o.timeout_ms = timeout_ms;
    sp_run_result *r = NULL;
    sp_error *err = NULL;
    if (sp_sandbox_shell(&r, sb, cmd, &o, &err) < 0)
        fail_msg("shell %s: %s", cmd, err->message);
    return r;
}

static void test_shell_basics(void **state)
{
    (void)state;
    sp_run_result *r = sh("echo out; echo err >&2; cat hello.txt; pwd; exit 3", 0);
    assert_int_equal(r->exit_code, 3);
    assert_false(r->timed_out);
    assert_string_equal(r->out, "out\nhello from the host\n/workspace\n");
    assert_string_equal(r->err, "err\n");
    sp_run_result_free(r);

    /* exec without a shell: arguments arrive verbatim. */
    const char *argv[] = {"/bin/echo", "a b", "$HOME", NULL};
    sp_error *err = NULL;
    assert_int_equal(sp_sandbox_exec(&r, sb, argv, NULL, &err), 0);
    assert_string_equal(r->out, "a b $HOME\n");
    assert_int_equal(r->exit_code, 0);
    sp_run_result_free(r);

    /* stdin data reaches the command. */
    sp_run_opts o = SP_RUN_OPTS_INIT;
    o.stdin_data = "piped\n";
    o.stdin_len = 6;
    assert_int_equal(sp_sandbox_shell(&r, sb, "cat", &o, &err), 0);
    assert_string_equal(r->out, "piped\n");
    sp_run_result_free(r);
}

/* Large stdin streams with the output on both paths: `cat` writes while
 * it reads, so a client that sends all of stdin before reading anything
 * deadlocks once the pipes fill (the REST path did, past 30 s, for 1-4 MiB). */
static void test_large_stdin(void **state)
{
    (void)state;
    size_t len = 4u << 20;
    char *data = malloc(len);
    for (size_t i = 0; i < len; i++)
        data[i] = (char)('a' + i % 26);
    sp_run_opts o = SP_RUN_OPTS_INIT;
    o.stdin_data = data;
    o.stdin_len = len;
    o.timeout_ms = 60000;
    sp_run_result *r = NULL;
    sp_error *err = NULL;
    if (sp_sandbox_shell(&r, sb, "cat", &o, &err) < 0)
        fail_msg("cat of 4 MiB: %s", err->message);
    assert_false(r->timed_out);
    assert_int_equal(r->exit_code, 0);
    assert_int_equal(r->out_total, len);
    print_message("4 MiB through cat: %lld ms\n", (long long)r->duration_ms);
    sp_run_result_free(r);
    if (sp_sandbox_shell(&r, sb, "wc -c", &o, &err) < 0)
        fail_msg("wc -c of 4 MiB: %s", err->message);
    assert_string_equal(r->out, "4194304\n");
    sp_run_result_free(r);
    free(data);
}

/* Run argv attached: all output (both streams) into out (NUL-terminated),
 * the exit code and sp_attach_noexec() back. stdin_data (NULL: none) is
 * written first. */
static int attach_run(char out[static 4096], int *noexec, const char *const *argv,
                      const char *stdin_data)
{
    sp_attach_opts o = SP_ATTACH_OPTS_INIT;
    o.stdin_open = stdin_data != NULL;
    sp_attach *a = NULL;
    sp_error *err = NULL;
    if (sp_sandbox_attach(&a, sb, argv, &o, &err) < 0)
        fail_msg("attach %s: %s", argv[0], err->message);
    if (stdin_data) {
        assert_int_equal(sp_attach_write(a, stdin_data, strlen(stdin_data), NULL), 0);
        assert_int_equal(sp_attach_close_stdin(a, NULL), 0);
    }
    size_t len = 0;
    for (;;) {
        size_t n = 0;
        int r = sp_attach_read(&n, NULL, a, out + len, 4095 - len, 1000, NULL);
        if (r == SP_ETIMEOUT)
            continue;
        assert_int_equal(r, 0);
        if (n == 0)
            break;
        len += n;
        assert_true(len < 4095);
    }
    out[len] = '\0';
    int code = -1;
    if (sp_attach_wait(&code, a, 10000, &err) < 0)
        fail_msg("attach wait: %s", err->message);
    *noexec = sp_attach_noexec(a);
    sp_attach_free(a);
    return code;
}

/* An attached command on the path in force: a missing or unrunnable
 * command is told apart from a command's own 127/126, and the runtime's
 * lines about it never reach the caller. */
static void test_attach_noexec(void **state)
{
    (void)state;
    char out[4096];
    int noexec = -1;
    const char *missing[] = {"nosuchcmd", NULL};
    assert_int_equal(attach_run(out, &noexec, missing, NULL), 127);
    assert_int_equal(noexec, ENOENT);
    assert_string_equal(out, "");
    const char *denied[] = {"/etc/passwd", NULL};
    assert_int_equal(attach_run(out, &noexec, denied, NULL), 126);
    assert_true(noexec != 0 && noexec != ENOENT);
    assert_string_equal(out, "");
    const char *own[] = {"sh", "-c", "echo 'Error: mine' >&2; exit 127", NULL};
    assert_int_equal(attach_run(out, &noexec, own, NULL), 127);
    assert_int_equal(noexec, 0);
    assert_string_equal(out, "Error: mine\n");
    const char *cat[] = {"cat", NULL};
    assert_int_equal(attach_run(out, &noexec, cat, "through stdin\n"), 0);
    assert_string_equal(out, "through stdin\n");
}

/* The folders a sandbox was hydrated from are recorded and read back by
 * a fresh handle. */
static void test_mounts_recorded(void **state)
{
    (void)state;
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.state_root = state_root;
    o.podman_url = podman_url;
    sp_sandbox *again = NULL;
    sp_error *err = NULL;
    if (sp_sandbox_open(&again, sp_sandbox_name(sb), &o, &err) < 0)
        fail_msg("open: %s", err->message);
    size_t n = 0;
    const sp_sandbox_mount *m = sp_sandbox_mounts(again, &n);
    assert_int_equal(n, 1);
    assert_string_equal(m[0].mount_path, ".");
    assert_non_null(m[0].include);
    assert_null(m[0].include[0]);
    assert_null(m[0].exclude[0]);
    assert_int_equal(m[0].max_bytes, 0);
    assert_int_equal(m[0].files, 2); /* hello.txt, src/main.c */
    assert_true(m[0].bytes > 0);
    char *real = realpath(project, NULL); /* the recorded path is resolved */
    assert_string_equal(m[0].host_path, real);
    free(real);
    sp_sandbox_free(again);
}

static void test_hardening(void **state)
{
    (void)state;
    /* Unprivileged user, no capabilities, no new privileges. */
    sp_run_result *r = sh("id -u; id -g; grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' "
                          "/proc/self/status",
                          0);
    assert_non_null(strstr(r->out, "1000\n1000\n"));
    assert_non_null(strstr(r->out, "CapPrm:\t0000000000000000"));
    assert_non_null(strstr(r->out, "CapEff:\t0000000000000000"));
    assert_non_null(strstr(r->out, "CapBnd:\t0000000000000000"));
    assert_non_null(strstr(r->out, "NoNewPrivs:\t1"));
    sp_run_result_free(r);

    /* No network: loopback only. */
    r = sh("ls /sys/class/net", 0);
    assert_string_equal(r->out, "lo\n");
    sp_run_result_free(r);

    /* Read-only root, writable /tmp and /workspace. */
    r = sh("touch /etc/x 2>&1; echo rc=$?; touch /tmp/x && echo tmp-ok; "
           "touch /workspace/x && echo ws-ok",
           0);
    assert_non_null(strstr(r->out, "Read-only file system"));
    assert_non_null(strstr(r->out, "tmp-ok"));
    assert_non_null(strstr(r->out, "ws-ok"));
    sp_run_result_free(r);

    /* Rootless Podman on cgroup v1 sets no limits; the sandbox says so. */
    sp_sandbox_status *st = NULL;
    sp_error *err = NULL;
    assert_int_equal(sp_sandbox_status_get(&st, sb, &err), 0);
    bool limits = st->limits_apply;
    assert_true(limits || st->rootless);
    sp_sandbox_status_free(st);
    if (!limits) {
        print_message("limits do not apply here (rootless, cgroup v1)\n");
        return;
    }
    /* The pids limit holds against a fork bomb, and what the bomb left
     * behind is gone once the command returns. */
    r = sh("n=0; while [ $n -lt 200 ]; do sleep 30 & n=$((n+1)); echo $n > /tmp/count; done",
           20000);
    assert_int_not_equal(r->exit_code, 0);
    sp_run_result_free(r);
    r = sh("cat /tmp/count; ps -o args | grep -c '^sleep 30'", 0);
    long n = strtol(r->out, NULL, 10);
    assert_true(n > 0 && n < 64);
    assert_non_null(strstr(r->out, "\n0\n"));
    sp_run_result_free(r);

    /* The memory limit holds against a memory hog (128 MiB). */
    r = sh("x=$(head -c 400000000 /dev/zero | tr '\\0' a); echo survived ${#x}", 60000);
    assert_null(strstr(r->out, "survived 400000000"));
    assert_int_not_equal(r->exit_code, 0);
    sp_run_result_free(r);
}

static void test_ownership(void **state)
{
    (void)state;
    sp_error *err = NULL;
    sp_fs *fs = sp_sandbox_fs(sb, &err);
    assert_non_null(fs);
    /* Container writes, host reads and rewrites. */
    sp_run_result *r = sh("echo from-container > made.txt; mkdir -p d/e; echo x > d/e/f", 0);
    assert_int_equal(r->exit_code, 0);
    sp_run_result_free(r);
    sp_fs_text *t = NULL;
    assert_int_equal(sp_fs_read(&t, fs, "made.txt", NULL, &err), 0);
    assert_string_equal(t->content, "from-container\n");
    sp_fs_text_free(t);
    assert_int_equal(sp_fs_write(NULL, fs, "made.txt", "host edit\n", 10, NULL, &err), 0);
    assert_int_equal(sp_fs_write(NULL, fs, "d/e/new.txt", "new\n", 4, NULL, &err), 0);
    assert_int_equal(sp_fs_write(NULL, fs, "hostdir/deep/x.txt", "x\n", 2, NULL, &err), 0);
    /* Host writes, container edits, appends and deletes. */
    r = sh("cat made.txt && echo more >> made.txt && echo y >> d/e/new.txt && "
           "echo z > hostdir/deep/z.txt && rm hostdir/deep/x.txt && echo done",
           0);
    assert_string_equal(r->out, "host edit\ndone\n");
    assert_int_equal(r->exit_code, 0);
    sp_run_result_free(r);
}

static void test_timeout_kills_group(void **state)
{
    (void)state;
    sp_run_result *r = sh("sleep 101 & sleep 102 & echo started; sleep 103", 1000);
    assert_true(r->timed_out);
    assert_string_equal(r->out, "started\n");
    assert_true(r->duration_ms >= 1000);
    sp_run_result_free(r);
    r = sh("ps -o args | grep -c '^sleep 10[123]' || true", 0);
    assert_string_equal(r->out, "0\n");
    sp_run_result_free(r);
}

static void test_output_caps(void **state)
{
    (void)state;
    sp_run_result *r = sh("seq 1 100000", 0);
    assert_true(r->out_truncated);
    assert_int_equal(r->out_total, 588895);
    assert_memory_equal(r->out, "1\n2\n3\n", 6);
    assert_non_null(strstr(r->out, "lines omitted ...]\n"));
    assert_non_null(strstr(r->out, "\n100000\n"));
    assert_true(r->out_len < 8192 + 100);
    sp_run_result_free(r);

    /* Binary output is carried byte for byte. */
    r = sh("printf 'a\\000b\\377c'", 0);
    assert_int_equal(r->out_len, 5);
    assert_memory_equal(r->out, "a\0b\377c", 5);
    sp_run_result_free(r);
}

static void test_killed_container_recovers(void **state)
{
    (void)state;
    sp_error *err = NULL;
    sp_podman *p = sp_sandbox_podman(sb, &err);
    assert_non_null(p);
    assert_int_equal(sp_podman_container_kill(p, sp_sandbox_container_id(sb), SIGKILL, &err), 0);
    sp_podman_container_wait(NULL, p, sp_sandbox_container_id(sb), NULL, 10000, NULL);

    sp_run_result *r = NULL;
    int rc = sp_sandbox_shell(&r, sb, "true", NULL, &err);
    assert_int_equal(rc, SP_EPODMAN);
    assert_non_null(strstr(err->message, "not running"));
    assert_non_null(strstr(err->message, "sandpod start"));
    sp_error_free(err);
    err = NULL;

    assert_int_equal(sp_sandbox_start(sb, &err), 0);
    r = sh("cat made.txt hello.txt", 0);
    assert_string_equal(r->out, "host edit\nmore\nhello from the host\n");
    sp_run_result_free(r);

    /* Removed behind our back: start recreates it around the workspace. */
    assert_int_equal(sp_podman_container_delete(p, sp_sandbox_container_id(sb), true, true, &err),
                     0);
    if (sp_sandbox_start(sb, &err) < 0)
        fail_msg("start after the container was removed: %s", err->message);
    r = sh("cat hello.txt", 0);
    assert_string_equal(r->out, "hello from the host\n");
    sp_run_result_free(r);

    /* Another process can open it by name. */
    sp_sandbox *again = NULL;
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.state_root = state_root;
    o.podman_url = podman_url; /* the shared service */
    assert_int_equal(sp_sandbox_open(&again, sp_sandbox_name(sb), &o, &err), 0);
    assert_string_equal(sp_sandbox_container_id(again), sp_sandbox_container_id(sb));
    sp_sandbox_free(again);
}

static void test_bad_create(void **state)
{
    (void)state;
    sp_sandbox *x = NULL;
    sp_error *err = NULL;
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.state_root = state_root;
    o.podman_url = podman_url; /* the shared service */
    o.name = "../evil";
    assert_int_equal(sp_sandbox_create(&x, &o, &err), SP_EINVAL);
    sp_error_free(err);
    err = NULL;
    o.name = sp_sandbox_name(sb);
    assert_int_equal(sp_sandbox_create(&x, &o, &err), SP_EEXISTS);
    sp_error_free(err);
    err = NULL;
    /* A mount that does not exist leaves nothing behind. */
    sp_mount m = {0};
    m.host_path = "/nonexistent/sandpod/path";
    o.name = "bad-mount";
    o.mounts = &m;
    o.n_mounts = 1;
    assert_true(sp_sandbox_create(&x, &o, &err) < 0);
    sp_error_free(err);
    char *dir = tu_join(state_root, "sandboxes/bad-mount");
    struct stat st;
    assert_int_not_equal(stat(dir, &st), 0);
    free(dir);
}

/* An exec agent that accepts and hangs up before starting anything (what a
 * dying agent looks like): under SP_EXEC_AUTO the command runs through
 * Podman's REST exec instead of failing. */
static void test_agent_hangs_up_falls_back(void **state)
{
    (void)state;
    char *sock = tu_join(sp_sandbox_state_dir(sb), "agent/run/agent.sock");
    char *saved = tu_join(sp_sandbox_state_dir(sb), "agent/run/agent.sock.real");
    struct stat st;
    if (lstat(sock, &st) < 0) {
        free(sock);
        free(saved);
        skip(); /* no agent in this configuration (not root, or REST forced) */
    }
    assert_int_equal(rename(sock, saved), 0);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    assert_true(strlen(sock) < sizeof(sa.sun_path));
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(lfd, 8), 0);
    pid_t child = fork();
    if (child == 0) {
        for (;;) {
            int c = accept(lfd, NULL, NULL);
            if (c >= 0)
                close(c);
        }
    }
    sp_sandbox *x = NULL;
    sp_error *err = NULL;
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.state_root = state_root;
    o.podman_url = podman_url; /* the shared service */
    o.exec_path = SP_EXEC_AUTO;
    assert_int_equal(sp_sandbox_open(&x, sp_sandbox_name(sb), &o, &err), 0);
    sp_run_result *r = NULL;
    int rc = sp_sandbox_shell(&r, x, "echo fell back", NULL, &err);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    close(lfd);
    unlink(sock);
    assert_int_equal(rename(saved, sock), 0);
    const char *forced = getenv("SANDPOD_EXEC_PATH");
    if (forced && strcmp(forced, "fast") == 0) {
        /* The agent path is forced: a clear error, nothing run. */
        assert_int_not_equal(rc, 0);
        assert_non_null(strstr(err->message, "exec agent"));
        sp_error_free(err);
    } else {
        if (rc != 0)
            fail_msg("shell with a hung-up agent: %s", err->message);
        assert_string_equal(r->out, "fell back\n");
        sp_run_result_free(r);
    }
    sp_sandbox_free(x);
    free(sock);
    free(saved);
}

static pid_t read_pid(const char *pidfile)
{
    char *dir = strdup(pidfile);
    char *slash = strrchr(dir, '/');
    *slash = '\0';
    char *s = tu_read(dir, slash + 1, NULL);
    free(dir);
    pid_t pid = s ? (pid_t)strtol(s, NULL, 10) : 0;
    free(s);
    return pid;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The Podman service dies in the middle of a command: the call ends with a
 * clear error instead of hanging, and once a service is back the sandbox
 * works again. Uses a private service so parallel tests keep theirs. */
static void test_service_killed_mid_command(void **state)
{
    (void)state;
    char *root = tu_mkdtemp();
    sp_podman *p = NULL;
    sp_error *err = NULL;
    sp_podman_opts po = SP_PODMAN_OPTS_INIT;
    po.state_root = root;
    po.private_service = true;
    if (sp_podman_open(&p, &po, &err) < 0)
        fail_msg("private service: %s", err->message);
    char *url = strdup(sp_podman_url(p));
    sp_podman_free(p);

    /* The same name as every other run of this test, in parallel: the
     * sandboxes of different state roots must not touch each other. */
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.name = "svc-kill";
    /* This is about the REST client: on the fast path the command does not
     * need the service and rightly runs on (see test_fast_survives_service). */
    o.exec_path = SP_EXEC_REST;
    o.state_root = root;
    o.podman_url = url;
    sp_sandbox *x = NULL;
    if (sp_sandbox_create(&x, &o, &err) < 0)
        fail_msg("create: %s", err->message);

    char *pidfile = tu_join(root, "podman.pid");
    pid_t svc = read_pid(pidfile);
    assert_true(svc > 0);
    /* Kill the service once the command has surely started (it leaves a
     * marker in the workspace), not after a guessed delay. */
    char *marker = tu_join(sp_sandbox_workspace(x), "begun");
    pid_t child = fork();
    if (child == 0) {
        struct stat mst;
        for (int i = 0; i < 600 && stat(marker, &mst) < 0; i++)
            usleep(50 * 1000);
        usleep(200 * 1000);
        kill(svc, SIGKILL);
        _exit(0);
    }
    sp_run_result *r = NULL;
    sp_run_opts ro = SP_RUN_OPTS_INIT;
    ro.timeout_ms = 30000;
    int64_t t0 = now_ms();
    int rc = sp_sandbox_shell(&r, x, "echo begun; touch begun; sleep 10; echo never", &ro, &err);
    if (rc == 0)
        fail_msg("the command finished (exit %d, out '%s') although the service was killed "
                 "(pid %d alive: %d)",
                 r->exit_code, r->out, (int)svc, kill(svc, 0) == 0);
    free(marker);
    int64_t took = now_ms() - t0;
    waitpid(child, NULL, 0);
    assert_int_equal(rc, SP_EPODMAN);
    assert_non_null(strstr(err->message, "podman"));
    print_message("service killed: error after %lld ms: %s\n", (long long)took, err->message);
    assert_true(took < 10000); /* it did not wait for the command to finish */
    sp_error_free(err);
    err = NULL;

    /* Bring a service back on the same socket; the sandbox works again. */
    if (sp_podman_open(&p, &po, &err) < 0)
        fail_msg("restart service: %s", err->message);
    sp_podman_free(p);
    sp_sandbox_free(x);
    x = NULL;
    sp_sandbox_opts oo = SP_SANDBOX_OPTS_INIT;
    oo.state_root = root;
    oo.podman_url = url;
    assert_int_equal(sp_sandbox_open(&x, "svc-kill", &oo, &err), 0);
    rc = sp_sandbox_shell(&r, x, "echo back", NULL, &err);
    if (rc != 0)
        fail_msg("after restart: %s", err->message);
    assert_string_equal(r->out, "back\n");
    sp_run_result_free(r);
    if (sp_sandbox_remove(x, false, &err) < 0)
        fail_msg("remove: %s", err->message);
    sp_sandbox_free(x);
    svc = read_pid(pidfile);
    if (svc > 0)
        kill(svc, SIGTERM);
    free(pidfile);
    free(url);
    tu_rmtree(root);
    free(root);
}

int main(void)
{
    podman_url = tu_need_podman_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shell_basics),
        cmocka_unit_test(test_large_stdin),
        cmocka_unit_test(test_attach_noexec),
        cmocka_unit_test(test_mounts_recorded),
        cmocka_unit_test(test_hardening),
        cmocka_unit_test(test_ownership),
        cmocka_unit_test(test_timeout_kills_group),
        cmocka_unit_test(test_output_caps),
        cmocka_unit_test(test_killed_container_recovers),
        cmocka_unit_test(test_bad_create),
        cmocka_unit_test(test_agent_hangs_up_falls_back),
        cmocka_unit_test(test_service_killed_mid_command),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
