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

/* Read an exec's messages until the server's close: stdout and stderr
 * added to out and errb (NUL-terminated, also when empty), *code from the
 * channel-3 Status (-1 without one), *close_code the close's. < 0 with
 * *err set on an error or a message no exec server sends. */
int kt_exec_collect(sp_ws *ws, sp_buf *out, sp_buf *errb, int *code, unsigned *close_code,
                    int timeout_ms, sp_error **err);

#endif
