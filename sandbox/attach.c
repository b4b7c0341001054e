/* sp_sandbox_attach(): a command with its streams handed to the caller,
 * over the same stream table as run.c and the sessions (engine/stream.h),
 * whichever kind of stream it runs on.
 *
 * A command that cannot be executed is reported as such, not as text: the
 * stream tells it (noexec), and the lines that say so on its stderr (the
 * agent's own, or the runtime's, which the REST stream drops) are not
 * handed out. */
#include <errno.h>

#include "local_state.h"
#include "cmdio.h"
#include "local_kind.h"
#include "sandbox_internal.h"
#include "sandpod/attach.h"

struct sp_attach {
    sp_sandbox *sb;
    sp_stream io;
    bool tty;
    int noexec;
};

int sp_sandbox_attach(sp_attach **out, sp_sandbox *sb, const char *const *argv,
                      const sp_attach_opts *opts, sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_ATTACH_OPTS_VERSION, "sp_attach_opts", err) < 0)
        return SP_EINVAL;
    sp_attach_opts o = SP_ATTACH_OPTS_INIT;
    if (opts)
        o = *opts;
    if (!argv || !argv[0])
        return sp_err_set(err, SP_EINVAL, 0, "attach: no command given");
    o.rows = o.rows ? o.rows : 24;
    o.cols = o.cols ? o.cols : 80;
    if (o.tty && (o.rows > 0xffff || o.cols > 0xffff))
        return sp_err_set(err, SP_EINVAL, 0, "attach: bad terminal size %ux%u", o.rows, o.cols);
    return sb->kind->attach(out, sb, argv, &o, err);
}

sp_attach *sp_attach_new(sp_sandbox *sb, sp_stream io, bool tty)
{
    sp_attach *a = sp_xcalloc(1, sizeof(*a));
    a->sb = sb;
    a->io = io;
    a->tty = tty;
    return a;
}

int sp_local_attach(sp_attach **out, sp_sandbox *sb, const char *const *argv,
                    const sp_attach_opts *opts, sp_error **err)
{
    sp_attach_opts o = *opts;
    unsigned rows = o.rows, cols = o.cols;
    char **env = sp_sandbox_command_env(sb, o.env);
    const char *workdir = o.workdir ? o.workdir : sb->cfg.workdir;
    sp_stream io = {0};
    sp_fast_spec fs = {.argv = argv,
                       .env = (const char *const *)env,
                       .workdir = workdir,
                       .tty = o.tty,
                       .rows = rows,
                       .cols = cols};
    int r = sp_cmd_start_fast(&io, sb, o.user, &fs, err);
    /* A command that is already gone needs no EOF: a failed send is moot. */
    if (r == 0 && io.ops && !o.stdin_open)
        io.ops->close_stdin(io.impl, NULL);
    if (r == 0 && !io.ops && (r = sp_sandbox_require_running(sb, err)) == 0) {
        sp_exec_spec spec = SP_EXEC_SPEC_INIT;
        spec.argv = argv;
        spec.env = (const char *const *)env;
        spec.workdir = workdir;
        spec.user = o.user ? o.user : sb->cfg.user;
        spec.tty = o.tty;
        spec.attach_stdin = o.stdin_open;
        spec.attach_stdout = spec.attach_stderr = true;
        char *exec_id = NULL;
        r = sb->lops->exec_create(&exec_id, sb->local, sb->container_id, &spec, err);
        if (r == 0)
            r = sb->lops->exec_start(&io, sb->local, exec_id, o.tty, true, err);
        if (r == 0 && o.tty)
            io.ops->resize(io.impl, rows, cols, NULL);
        free(exec_id);
    }
    sp_strv_free(env);
    if (r < 0) {
        sp_stream_free(&io);
        return r;
    }
    *out = sp_attach_new(sb, io, o.tty);
    return 0;
}

int sp_attach_fd(const sp_attach *a)
{
    return a->io.ops->fd(a->io.impl);
}

bool sp_attach_buffered(const sp_attach *a)
{
    return a->io.ops->buffered(a->io.impl);
}

int sp_attach_read(size_t *n, int *stream, sp_attach *a, void *buf, size_t cap, int timeout_ms,
                   sp_error **err)
{
    int st = SP_EXEC_STDOUT;
    int r = a->io.ops->read(n, &st, a->io.impl, buf, cap, timeout_ms, err);
    if (stream)
        *stream = st;
    if (r == 0 && *n && st == SP_EXEC_STDERR && a->io.ops->noexec(a->io.impl)) {
        *n = 0; /* the agent's own line about it */
        return SP_ETIMEOUT;
    }
    if (r == 0 && !*n)
        a->noexec = a->io.ops->noexec(a->io.impl);
    return r;
}

int sp_attach_write(sp_attach *a, const void *data, size_t len, sp_error **err)
{
    return a->io.ops->write(a->io.impl, data, len, err);
}

int sp_attach_close_stdin(sp_attach *a, sp_error **err)
{
    return a->io.ops->close_stdin(a->io.impl, err);
}

int sp_attach_resize(sp_attach *a, unsigned rows, unsigned cols, sp_error **err)
{
    if (!a->tty)
        return sp_err_set(err, SP_EINVAL, 0, "attach: the command has no terminal to resize");
    if (!rows || !cols || rows > 0xffff || cols > 0xffff)
        return sp_err_set(err, SP_EINVAL, 0, "attach: bad terminal size %ux%u", rows, cols);
    return a->io.ops->resize(a->io.impl, rows, cols, err);
}

int sp_attach_wait(int *exit_code, sp_attach *a, int timeout_ms, sp_error **err)
{
    *exit_code = -1;
    int r = a->io.ops->exited(exit_code, a->io.impl, timeout_ms, err);
    if (r < 0)
        return r;
    if (a->noexec)
        *exit_code = a->noexec == ENOENT ? 127 : 126;
    return 0;
}

int sp_attach_noexec(const sp_attach *a)
{
    return a->noexec;
}

void sp_attach_free(sp_attach *a)
{
    if (!a)
        return;
    sp_stream_free(&a->io);
    free(a);
}
