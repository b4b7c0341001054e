/* One events.jsonl record per CLI command run on a sandbox (sh, exec, fs),
 * beside the tool calls' records (sandpod/sandbox_events.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base.h"
#include "cli.h"

/* Milliseconds since this process started: the command's duration, with
 * no clock for the commands to start. */
static int64_t process_age_ms(void)
{
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* Field 22, starttime in clock ticks since boot; after the ')' that
     * ends field 2 it is the 20th. */
    const char *p = strrchr(buf, ')');
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    if (!p)
        return 0;
    unsigned long long start = strtoull(p + 1, NULL, 10);
    long hz = sysconf(_SC_CLK_TCK);
    struct timespec now;
    if (hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &now) < 0)
        return 0;
    int64_t now_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    int64_t age = now_ms - (int64_t)(start * 1000 / (unsigned long long)hz);
    return age > 0 ? age : 0;
}

void cli_event(sp_sandbox *sb, const char *command, const char *const *words, int rc)
{
    if (!sb)
        return;
    sp_buf summary = SP_BUF_INIT;
    for (size_t i = 0; words && words[i] && summary.len < 500; i++) {
        if (i)
            sp_buf_addc(&summary, ' ');
        sp_buf_adds(&summary, words[i]);
    }
    sp_sandbox_event ev = SP_SANDBOX_EVENT_INIT;
    ev.command = command;
    ev.source = "cli";
    ev.summary = summary.data;
    ev.ok = rc == 0;
    ev.status = rc;
    ev.duration_ms = process_age_ms();
    /* Best effort: a command is not failed by its record. */
    (void)sp_sandbox_event_append(NULL, sb, &ev, NULL);
    sp_buf_dispose(&summary);
}
