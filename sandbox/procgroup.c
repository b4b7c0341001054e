/* A command in a process group of its own, killed whole (procgroup.h). */
#include <stdint.h>
#include <sys/random.h>
#include <unistd.h>

#include "base.h"
#include "procgroup.h"

char *sp_group_kill_script(const char *token)
{
    /* The file too: a wrapper killed with its stream leaves it. */
    return sp_xasprintf("f=/tmp/.sandpod-%s.pgid; p=$(cat $f 2>/dev/null) && [ -n \"$p\" ] && "
                        "kill -KILL -$p; rm -f $f",
                        token);
}

char *sp_cmd_token(void)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != sizeof(r))
        r = (uint64_t)sp_now_ms() ^ ((uint64_t)getpid() << 20) ^ (uint64_t)(uintptr_t)&r;
    return sp_xasprintf("%016llx", (unsigned long long)r);
}
