/* sandpod-agent and the host side of the fast path (fastpath.c), without
 * Podman: the agent runs here as an ordinary process on a scratch folder.
 * Malformed frames, truncated requests and hung clients end only their own
 * connection; commands run on pipes and on a terminal, exit codes and
 * signals come back, and a kill or a closed connection takes the whole
 * tree (process group, and processes that left it but carry the marker). */
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

#include "../../sandbox/agent/protocol.h"
#include "sandbox_internal.h"
#include "fastpath.h"
#include "sandpod/podman.h"
#include "testutil.h"

static char *dir;
static char *run_dir;
static pid_t agent;
static sp_sandbox box;

static void nap(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int raw_connect(void)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", run_dir, SPA_SOCKET_NAME);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

static int group_setup(void **state)
{
    (void)state;
    dir = tu_mkdtemp();
    char *a = tu_join(dir, "agent");
    mkdir(a, 0700);
    run_dir = tu_join(a, "run");
    mkdir(run_dir, 0700);
    free(a);
    agent = fork();
    if (agent == 0) {
        execl(SANDPOD_AGENT_PATH, "sandpod-agent", run_dir, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 2000; i++) {
        int fd = raw_connect();
        if (fd >= 0) {
            close(fd);
            break;
        }
        nap(1);
    }
    /* The host talks only to the process it knows as the container's pid 1. */
    int fd = raw_connect();
    struct ucred cred = {0};
    socklen_t len = sizeof(cred);
    assert_true(fd >= 0);
    assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len), 0);
    close(fd);
    box.init_pid = cred.pid;
    box.name = "agent-test";
    box.state_dir = dir;
    box.cfg.exec_path = SP_EXEC_FAST;
    box.cfg.agent = true;
    box.lock_fd = -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    kill(agent, SIGTERM);
    waitpid(agent, NULL, 0);
    tu_rmtree(dir);
    free(dir);
    free(run_dir);
    return 0;
}

typedef struct outcome {
    sp_buf out, err;
    int code;
} outcome;

/* Run argv through the agent to its end. */
static outcome run(const char *const *argv, const sp_fast_spec *base, const char *in)
{
    sp_fast_spec spec = {0};
    if (base)
        spec = *base;
    spec.argv = argv;
    sp_fast *f = NULL;
    sp_error *err = NULL;
    if (sp_fast_start(&f, &box, &spec, &err) < 0)
        fail_msg("start %s: %s", argv[0], err->message);
    assert_true(sp_fast_host_pid(f) > 0);
    if (in)
        assert_int_equal(sp_fast_write_stdin(f, in, strlen(in), NULL), 0);
    sp_fast_close_stdin(f, NULL);
    outcome o = {SP_BUF_INIT, SP_BUF_INIT, -1};
    char buf[1000];
    for (;;) {
        size_t n = 0;
        int stream = 0;
        int r = sp_fast_read(&n, &stream, f, buf, sizeof(buf), 10000, &err);
        if (r < 0)
            fail_msg("read: %s", err ? err->message : "timeout");
        if (n == 0)
            break;
        sp_buf_add(stream == SP_EXEC_STDERR ? &o.err : &o.out, buf, n);
    }
    assert_true(sp_fast_exited(f, &o.code));
    sp_fast_free(f);
    return o;
}

static void outcome_dispose(outcome *o)
{
    sp_buf_dispose(&o->out);
    sp_buf_dispose(&o->err);
}

static void agent_alive(void)
{
    assert_int_equal(waitpid(agent, NULL, WNOHANG), 0);
    const char *argv[] = {"echo", "alive", NULL};
    outcome o = run(argv, NULL, NULL);
    assert_string_equal(o.out.data, "alive\n");
    outcome_dispose(&o);
}

static void test_pipes_and_codes(void **state)
{
    (void)state;
    const char *a1[] = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    outcome o = run(a1, NULL, NULL);
    assert_string_equal(o.out.data, "out\n");
    assert_string_equal(o.err.data, "err\n");
    assert_int_equal(o.code, 3);
    outcome_dispose(&o);

    const char *a2[] = {"cat", NULL};
    o = run(a2, NULL, "through stdin\n");
    assert_string_equal(o.out.data, "through stdin\n");
    assert_int_equal(o.code, 0);
    outcome_dispose(&o);

    const char *a3[] = {"/bin/sh", "-c", "kill -TERM $$", NULL};
    o = run(a3, NULL, NULL);
    assert_int_equal(o.code, 128 + SIGTERM);
    outcome_dispose(&o);

    const char *a4[] = {"/nonexistent/program", NULL};
    o = run(a4, NULL, NULL);
    assert_int_equal(o.code, 127);
    assert_non_null(strstr(o.err.data, "/nonexistent/program"));
    outcome_dispose(&o);

    /* Environment and working folder. */
    const char *a5[] = {"/bin/sh", "-c", "echo $SP_X; pwd", NULL};
    const char *env[] = {"SP_X=value", NULL};
    sp_fast_spec spec = {.env = env, .workdir = "/tmp"};
    o = run(a5, &spec, NULL);
    assert_string_equal(o.out.data, "value\n/tmp\n");
    outcome_dispose(&o);

    /* Big output arrives whole. */
    const char *a6[] = {"/bin/sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' a", NULL};
    o = run(a6, NULL, NULL);
    assert_int_equal(o.out.len, 3000000);
    outcome_dispose(&o);
}

static void test_tty(void **state)
{
    (void)state;
    const char *argv[] = {"/bin/sh", "-c", "tty; stty size", NULL};
    sp_fast_spec spec = {.tty = true, .rows = 33, .cols = 111};
    outcome o = run(argv, &spec, NULL);
    assert_non_null(strstr(o.out.data, "/dev/pts/"));
    assert_non_null(strstr(o.out.data, "33 111"));
    outcome_dispose(&o);
}

/* Bad frames end their own connection, never the agent. */
static void test_bad_frames(void **state)
{
    (void)state;
    const unsigned char cases[][16] = {
        {0xff, 0xff, 0xff, 0xff, 'R'},             /* far too long */
        {0, 0, 0, 4, 'I', 1, 2, 3, 4},             /* not a request first */
        {0, 0, 0, 8, 'R', 0, 0, 0, 0, 0, 0, 0, 0}, /* fields missing */
        {0, 0, 0, 100, 'R', 1, 2, 3},              /* truncated, then closed */
        {0, 0, 0, 0, 'R'},                         /* empty request */
    };
    const size_t lens[] = {5, 9, 13, 8, 5};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        int fd = raw_connect();
        assert_true(fd >= 0);
        assert_int_equal(send(fd, cases[i], lens[i], MSG_NOSIGNAL), (ssize_t)lens[i]);
        shutdown(fd, SHUT_WR);
        char b[64];
        while (read(fd, b, sizeof(b)) > 0)
            ;
        close(fd);
    }
    /* A request with an absurd argument count. */
    unsigned char big[] = {0, 0, 0, 20, 'R', 0, 0, 0, 0,    0,    0,    0,   0,
                           0, 0, 0, 0,  0,   0, 0, 0, 0xff, 0xff, 0xff, 0xff};
    int fd = raw_connect();
    assert_true(fd >= 0);
    send(fd, big, sizeof(big), MSG_NOSIGNAL);
    char b[64];
    while (read(fd, b, sizeof(b)) > 0)
        ;
    close(fd);
    /* A client that connects and says nothing blocks no one. */
    int hung = raw_connect();
    assert_true(hung >= 0);
    agent_alive();
    close(hung);
    agent_alive();
}

/* Waits up to 30 s: on a loaded machine (CI beside other suites) a killed
 * process can take seconds to be reaped; a pass returns at once. */
static bool gone(pid_t pid)
{
    for (int i = 0; i < 3000; i++) {
        if (kill(pid, 0) < 0 && errno == ESRCH)
            return true;
        /* A zombie of ours would count as alive: reap what we may. */
        waitpid(-1, NULL, WNOHANG);
        nap(10);
    }
    return false;
}

/* Start a command that prints the pids of its children, and read them. */
static sp_fast *start_tree(const char *script, const char *marker, long *pids, int n)
{
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    const char *env[] = {marker, NULL};
    sp_fast_spec spec = {.argv = argv, .env = env, .kill_marker = marker};
    sp_fast *f = NULL;
    sp_error *err = NULL;
    if (sp_fast_start(&f, &box, &spec, &err) < 0)
        fail_msg("start: %s", err->message);
    sp_buf text = SP_BUF_INIT;
    char buf[256];
    int lines = 0;
    int64_t end = sp_now_ms() + 5000;
    while (lines < n && sp_now_ms() < end) {
        size_t k = 0;
        if (sp_fast_read(&k, NULL, f, buf, sizeof(buf), 100, NULL) == 0 && k) {
            sp_buf_add(&text, buf, k);
            lines = 0;
            for (size_t i = 0; i < text.len; i++)
                lines += text.data[i] == '\n';
        }
    }
    assert_int_equal(lines, n);
    char *p = text.data;
    for (int i = 0; i < n; i++)
        pids[i] = strtol(p, &p, 10);
    sp_buf_dispose(&text);
    return f;
}

static void test_kill_and_close(void **state)
{
    (void)state;
    /* A KILL frame: the group and a child that called setsid (marker). */
    long pids[3];
    sp_fast *f = start_tree("sleep 1041 & echo $!; setsid sleep 1042 & echo $!; echo $$; wait",
                            "SANDPOD_TEST_MARK=k1", pids, 3);
    sp_fast_kill(f, 5000);
    int code = 0;
    assert_true(sp_fast_exited(f, &code));
    assert_int_equal(code, 128 + SIGKILL);
    sp_fast_free(f);
    for (int i = 0; i < 3; i++)
        assert_true(gone((pid_t)pids[i]));

    /* What no group, session or environment ties to the command: a
     * child that called setsid and emptied its environment, a double fork
     * of one (its parent gone before the kill), and a nohup'd one that
     * ignores SIGTERM and SIGHUP. */
    long more[4];
    f = start_tree("setsid env -i sleep 1047 & echo $!; (setsid env -i sleep 1048 & echo $!); "
                   "nohup sh -c 'trap \"\" TERM HUP; exec env -i sleep 1049' >/dev/null 2>&1 & "
                   "echo $!; echo $$; wait",
                   "SANDPOD_TEST_MARK=k0", more, 4);
    sp_fast_kill(f, 5000);
    assert_true(sp_fast_exited(f, &code));
    sp_fast_free(f);
    for (int i = 0; i < 4; i++)
        assert_true(gone((pid_t)more[i]));

    /* The host closes the connection (its process died): the same. */
    f = start_tree("sleep 1043 & echo $!; setsid sleep 1044 & echo $!; echo $$; wait",
                   "SANDPOD_TEST_MARK=k2", pids, 3);
    sp_fast_free(f);
    for (int i = 0; i < 3; i++)
        assert_true(gone((pid_t)pids[i]));

    /* A signal frame reaches the group. */
    f = start_tree("echo $$; exec sleep 1045", "SANDPOD_TEST_MARK=k3", pids, 1);
    assert_int_equal(sp_fast_signal(f, SIGINT, NULL), 0);
    char buf[64];
    size_t n;
    while (sp_fast_read(&n, NULL, f, buf, sizeof(buf), 5000, NULL) == 0 && n)
        ;
    assert_true(sp_fast_exited(f, &code));
    assert_int_equal(code, 128 + SIGINT);
    sp_fast_free(f);

    /* kill_on_exit: what the command left in its group goes when it returns. */
    const char *argv[] = {"/bin/sh", "-c", "sleep 1046 & echo $!", NULL};
    sp_fast_spec spec = {.kill_on_exit = true};
    outcome o = run(argv, &spec, NULL);
    long left = strtol(o.out.data, NULL, 10);
    assert_true(left > 0);
    assert_true(gone((pid_t)left));
    outcome_dispose(&o);
    agent_alive();
}

/* An agent-only handle (sp_sandbox_open_agent()), as `peer serve --agent`
 * uses one: commands through the agent by socket path and owner, no pid
 * learned, never Podman. */
static void test_agent_only_handle(void **state)
{
    (void)state;
    sp_sandbox_agent_opts ao = SP_SANDBOX_AGENT_OPTS_INIT;
    sp_sandbox *sb = NULL;
    ao.workspace = "relative";
    ao.socket = "x.sock";
    assert_int_equal(sp_sandbox_open_agent(&sb, &ao, NULL), SP_EINVAL);
    ao.workspace = dir;
    ao.socket = "";
    assert_int_equal(sp_sandbox_open_agent(&sb, &ao, NULL), SP_EINVAL);
    assert_null(sb);

    char *sock = tu_join(run_dir, SPA_SOCKET_NAME);
    ao.socket = sock;
    assert_int_equal(sp_sandbox_open_agent(&sb, &ao, NULL), 0);
    sp_run_result *res = NULL;
    sp_error *err = NULL;
    assert_int_equal(sp_sandbox_shell(&res, sb, "pwd; exit 5", NULL, &err), 0);
    assert_int_equal(res->exit_code, 5);
    char *want = sp_xasprintf("%s\n", dir);
    assert_string_equal(res->out, want);
    free(want);
    sp_run_result_free(res);
    assert_null(sp_sandbox_podman(sb, &err));
    assert_non_null(strstr(err->message, "no engine service"));
    sp_error_free(err);
    err = NULL;
    /* The pid SO_PEERCRED names is never taken for a host pid. */
    sp_fast *f = NULL;
    const char *argv[] = {"/bin/true", NULL};
    sp_fast_spec spec = {.argv = argv};
    assert_int_equal(sp_fast_start(&f, sb, &spec, NULL), 0);
    assert_int_equal(sp_fast_host_pid(f), 0);
    sp_fast_free(f);
    sp_sandbox_free(sb);

    /* Another uid than the socket's: refused before a byte is sent. */
    ao.uid = (int64_t)geteuid() + 1;
    assert_int_equal(sp_sandbox_open_agent(&sb, &ao, NULL), 0);
    assert_true(sp_sandbox_shell(&res, sb, "true", NULL, &err) < 0);
    assert_non_null(strstr(err->message, "another uid than the workload's"));
    sp_error_free(err);
    sp_sandbox_free(sb);
    free(sock);
    agent_alive();
}

int main(void)
{
    if (access(SANDPOD_AGENT_PATH, X_OK) != 0) {
        fprintf(stderr, "skipping: no agent at %s\n", SANDPOD_AGENT_PATH);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pipes_and_codes),   cmocka_unit_test(test_tty),
        cmocka_unit_test(test_bad_frames),        cmocka_unit_test(test_kill_and_close),
        cmocka_unit_test(test_agent_only_handle),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
