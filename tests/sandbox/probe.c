/* What an attacker inside a sandbox tries, as one static program that
 * test_isolation copies into the workspace and runs in the container.
 *
 *   probe keys              keyctl / add_key / request_key: "NAME=ok|ERRNO"
 *   probe userns            unshare, clone and clone3 with CLONE_NEWUSER
 *   probe listen PATH SECS  bind a socket at PATH (as a fake agent), then
 *                           report what connects and what it sends
 */
#include <errno.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define KEYCTL_GET_KEYRING_ID    0
#define KEY_SPEC_USER_KEYRING    (-4)
#define KEY_SPEC_SESSION_KEYRING (-3)

static void say(const char *what, long r)
{
    if (r < 0)
        printf("%s=%s\n", what, strerrorname_np(errno));
    else
        printf("%s=ok\n", what);
}

static int keys(void)
{
    say("keyctl", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0));
    say("add_key", syscall(SYS_add_key, "user", "sandpod-probe", "x", 1, KEY_SPEC_SESSION_KEYRING));
    say("request_key", syscall(SYS_request_key, "user", "sandpod-probe", NULL, 0));
    return 0;
}

static int userns(void)
{
    pid_t child = fork();
    if (child == 0)
        _exit(unshare(CLONE_NEWUSER) < 0 ? errno : 0);
    int st = 0;
    waitpid(child, &st, 0);
    errno = WEXITSTATUS(st);
    say("unshare", errno ? -1 : 0);

    long r = syscall(SYS_clone, (unsigned long)(CLONE_NEWUSER | SIGCHLD), 0, 0, 0, 0);
    if (r == 0)
        _exit(0);
    if (r > 0)
        waitpid((pid_t)r, NULL, 0);
    say("clone", r);

    struct clone_args ca;
    memset(&ca, 0, sizeof(ca));
    ca.flags = CLONE_NEWUSER;
    ca.exit_signal = SIGCHLD;
    r = syscall(SYS_clone3, &ca, sizeof(ca));
    if (r == 0)
        _exit(0);
    if (r > 0)
        waitpid((pid_t)r, NULL, 0);
    say("clone3", r);
    return 0;
}

static int listen_as_agent(const char *path, int secs)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    unlink(path);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l, 8) < 0) {
        printf("listen=%s\n", strerrorname_np(errno));
        return 1;
    }
    printf("listening\n");
    fflush(stdout);
    long connections = 0, bytes = 0;
    struct pollfd p = {l, POLLIN, 0};
    while (poll(&p, 1, secs * 1000) > 0) {
        int c = accept(l, NULL, NULL);
        if (c < 0)
            continue;
        connections++;
        char buf[4096];
        struct pollfd q = {c, POLLIN, 0};
        ssize_t n;
        while (poll(&q, 1, 1000) > 0 && (n = read(c, buf, sizeof(buf))) > 0)
            bytes += n;
        close(c);
    }
    printf("connections=%ld bytes=%ld\n", connections, bytes);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "keys") == 0)
        return keys();
    if (argc >= 2 && strcmp(argv[1], "userns") == 0)
        return userns();
    if (argc >= 4 && strcmp(argv[1], "listen") == 0)
        return listen_as_agent(argv[2], (int)strtol(argv[3], NULL, 10));
    fprintf(stderr, "usage: probe keys | userns | listen PATH SECS\n");
    return 2;
}
