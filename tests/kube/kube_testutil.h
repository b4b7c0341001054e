/* Helpers the kube/ tests share: the Python servers they run beside them. */
#ifndef SANDPOD_KUBE_TESTUTIL_H
#define SANDPOD_KUBE_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base.h"
#include "ws.h"

/* Start `python3 script scratch [arg]` (killed when the test dies), and
 * read the first line it prints (its ports) into line. 0, or -1 when it
 * printed none: then *status is how it ended and *pid is -1. */
int kt_start_server(pid_t *pid, int *status, char *line, size_t cap, const char *script,
                    const char *scratch, const char *arg);
/* SIGTERM and reap; *pid becomes -1. */
void kt_stop_server(pid_t *pid);
/* argv (searched in PATH) with stdin from and output to /dev/null: its
 * exit status (128 when it did not exit). */
int kt_run_quiet(char *const argv[]);
/* CI=true: prerequisites are there, so a skip is a failure. */
bool kt_ci(void);

#endif
