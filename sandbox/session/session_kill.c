/* Killing sessions' process trees: by their stream when it can (the
 * agent), else from the host when their leader's pid is verified, else
 * through an exec in the container. */
#include <stdio.h>
#include <string.h>

#include "session_internal.h"

/* Run a short sh script in the container as `user` and wait for it. */
int sp_sess_run_script(sp_sandbox *sb, const char *user, const char *script, sp_error **err)
{
    sp_local *p = sp_sandbox_local(sb, err);
    if (!p)
        return SP_EPODMAN;
    if (!sb->container_id)
        return sp_err_set(err, SP_EPODMAN, 0, "sandbox %s has no container", sb->name);
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    sp_exec_spec spec = SP_EXEC_SPEC_INIT;
    spec.argv = argv;
    spec.user = user;
    sp_stream e = {0};
    int r = sp_local_exec(&e, sb->lops, p, sb->container_id, &spec, err);
    if (r < 0)
        return r;
    char buf[512];
    size_t n;
    int64_t end = sp_now_ms() + KILL_WAIT_MS;
    while (sp_now_ms() < end &&
           e.ops->read(&n, NULL, e.impl, buf, sizeof(buf), (int)(end - sp_now_ms()), NULL) == 0 &&
           n)
        ;
    sp_stream_free(&e);
    return 0;
}

bool sp_session_container_kill_only;
bool sp_session_skip_pid_learning;

/* Kill sessions' process trees through a container exec: for each, its
 * process group and terminal session (from the pid file), and every process
 * whose environment carries its token. One exec per distinct user, since an
 * unprivileged user can only signal its own processes. */
static int container_kill(sp_sandbox *sb, session **v, size_t n, sp_error **err)
{
    int ret = 0;
    bool done[SP_SESSION_MAX] = {false};
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        sp_buf toks = SP_BUF_INIT;
        for (size_t j = i; j < n; j++) {
            if (!done[j] && strcmp(v[j]->user, v[i]->user) == 0) {
                done[j] = true;
                sp_buf_printf(&toks, "%s%s", toks.len ? " " : "", v[j]->token);
            }
        }
        cleanup_free char *script = sp_xasprintf(
            "ids=; pat=; "
            "for t in %s; do f=/tmp/.sandpod-session-$t.pid; "
            "if read -r p < \"$f\"; then kill -KILL -$p; ids=\"$ids $p\"; fi; "
            "rm -f \"$f\"; pat=\"$pat|$t\"; done 2>/dev/null; "
            "pat=${pat#|}; self=$$; "
            "for f in $(grep -lE \"" ENV_TOKEN "=($pat)\" /proc/[0-9]*/environ 2>/dev/null); do "
            "n=${f#/proc/}; n=${n%%/environ}; [ \"$n\" = \"$self\" ] && continue; "
            "if read -r l < /proc/$n/stat; then l=${l##*) }; set -- $l; ids=\"$ids $4\"; fi; "
            "kill -KILL $n; done 2>/dev/null; "
            "for d in /proc/[0-9]*; do n=${d#/proc/}; [ \"$n\" = \"$self\" ] && continue; "
            "read -r l < $d/stat || continue; l=${l##*) }; set -- $l; "
            "for s in $ids; do case $s in 0|1) continue;; esac; "
            "if [ \"$3\" = \"$s\" ] || [ \"$4\" = \"$s\" ]; then "
            "kill -KILL $n; break; fi; done; done 2>/dev/null; exit 0",
            toks.data);
        sp_buf_dispose(&toks);
        const char *user = *v[i]->user ? v[i]->user : NULL;
        int r = sp_sess_run_script(sb, user, script, ret < 0 ? NULL : err);
        if (r < 0 && ret == 0)
            ret = r;
    }
    return ret;
}

/* Kill sessions' whole process trees: their process groups, terminal
 * sessions, and every process that carries their token (which catches
 * those that called setsid). From the host when the service is local and
 * the session's pid was verified (no exec needed, a few ms), else from
 * inside the container (an exec, a few hundred ms). */
int sp_sess_kill_trees(sp_sandbox *sb, session **v, size_t n, sp_error **err)
{
    int leaders[SP_SESSION_MAX];
    const char *tokens[SP_SESSION_MAX];
    session *rest[SP_SESSION_MAX];
    size_t nl = 0, nr = 0;
    for (size_t i = 0; i < n && i < SP_SESSION_MAX; i++) {
        /* The agent kills the tree; its exit frame says it is done. */
        if (v[i]->io.ops->kill(v[i]->io.impl, KILL_WAIT_MS) == 0)
            continue;
        int leader = sp_session_container_kill_only ? 0 : sp_sess_registry_leader(v[i]->reg);
        if (leader) {
            leaders[nl] = leader;
            tokens[nl++] = v[i]->token;
        } else {
            rest[nr++] = v[i];
        }
    }
    if (nl)
        sp_sess_host_kill(leaders, nl, tokens, nl);
    return nr ? container_kill(sb, rest, nr, err) : 0;
}
