#include "kube_testutil.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kube_exec.h"

int kt_start_server(pid_t *pid, int *status, char *line, size_t cap, const char *script,
                    const char *scratch, const char *arg)
{
    int p[2];
    *status = 0;
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    *pid = fork();
    if (*pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(p[1], 1);
        execl("/usr/bin/python3", "python3", script, scratch, arg, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    line[0] = '\0';
    FILE *f = fdopen(p[0], "r");
    bool got = f && fgets(line, (int)cap, f) != NULL;
    if (f)
        fclose(f);
    if (got)
        return 0;
    waitpid(*pid, status, 0);
    *pid = -1;
    return -1;
}

void kt_stop_server(pid_t *pid)
{
    if (*pid > 0) {
        kill(*pid, SIGTERM);
        waitpid(*pid, NULL, 0);
    }
    *pid = -1;
}

int kt_run_quiet(char *const argv[])
{
    pid_t pid = fork();
    if (pid == 0) {
        int nul = open("/dev/null", O_RDWR);
        dup2(nul, 0);
        dup2(nul, 1);
        dup2(nul, 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

bool kt_ci(void)
{
    const char *ci = getenv("CI");
    return ci && strcmp(ci, "true") == 0;
}
