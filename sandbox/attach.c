/* sp_sandbox_attach(): a command with its streams handed to the caller,
 * over the same stream interface as run.c and the sessions (sp_cmd).
 *
 * A command that cannot be executed is reported as such, not as text:
 * the agent sends a NOEXEC frame (see agent/protocol.h); through Podman's
 * exec, the runtime's own lines ("Error: runc: exec failed: ... OCI
 * runtime attempted to invoke a command that was not found") arrive on the
 * command's stream before it ends. So on the REST path the leading output
 * is held back while every line of it looks like the runtime's ("Error: "
 * and one of its marks), until either something else comes (then it is
 * handed out in order; a command whose first output is such a line waits
 * for its next byte or its end) or the stream ends (then Podman's fixed
 * wording says which failure it was, and those lines are dropped). */
#include <errno.h>
#include <string.h>

#include "local_state.h"
#include "fastpath.h"
#include "cmdio.h"
#include "remote.h"
#include "local_kind.h"
#include "sandbox_internal.h"
#include "sandpod/attach.h"

/* Held bytes past this are the command's own output. */
#define HOLD_MAX 8192

/* Podman's messages for a command the runtime could not execute
 * (libpod/define/errors.go: ErrOCIRuntimeNotFound, ...PermissionDenied). */
#define OCI_NOT_FOUND "OCI runtime attempted to invoke a command that was not found"
#define OCI_DENIED    "OCI permission denied"

struct sp_attach {
    sp_sandbox *sb;
    sp_cmd io;
    sp_remote_stream *rs; /* a sandbox on another engine, through rops */
    const sp_remote_ops *rops;
    char *exec_id; /* REST */
    bool tty;
    bool ended;
    int noexec;
    /* REST: output held while it may be the runtime's error lines. */
    bool holding;
    int held_stream;
    sp_buf held;
    /* Output to hand out before reading more: the released hold, then the
     * chunk that released it. */
    struct {
        int stream;
        sp_buf b;
        size_t off;
    } q[2];
};

static bool runtime_line(const char *l, size_t n)
{
    static const char *const marks[] = {"OCI runtime", OCI_DENIED, "exec failed", "unixpacket"};
    if (n < 7 || memcmp(l, "Error: ", 7) != 0)
        return false;
    for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++)
        if (memmem(l, n, marks[i], strlen(marks[i])))
            return true;
    return false;
}

/* Whether the held bytes may still be nothing but the runtime's lines. */
static bool may_be_runtime(const sp_buf *h)
{
    if (h->len > HOLD_MAX)
        return false;
    const char *p = h->data, *end = h->data + h->len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) {
            size_t n = (size_t)(end - p);
            return memcmp(p, "Error: ", n < 7 ? n : 7) == 0; /* the line so far */
        }
        if (!runtime_line(p, (size_t)(nl - p)))
            return false;
        p = nl + 1;
    }
    return true;
}

static void enqueue(sp_attach *a, int stream, const void *data, size_t len)
{
    for (int i = 0; i < 2; i++) {
        if (a->q[i].b.len == a->q[i].off) {
            a->q[i].b.len = a->q[i].off = 0;
            a->q[i].stream = stream;
            sp_buf_add(&a->q[i].b, data, len);
            return;
        }
    }
    abort(); /* never more than the hold and one chunk */
}

static void release(sp_attach *a)
{
    a->holding = false;
    if (a->held.len)
        enqueue(a, a->held_stream, a->held.data, a->held.len);
    sp_buf_dispose(&a->held);
}

static bool dequeue(size_t *n, int *stream, sp_attach *a, void *buf, size_t cap)
{
    for (int i = 0; i < 2; i++) {
        size_t left = a->q[i].b.len - a->q[i].off;
        if (!left)
            continue;
        size_t k = left < cap ? left : cap;
        memcpy(buf, a->q[i].b.data + a->q[i].off, k);
        a->q[i].off += k;
        if (stream)
            *stream = a->q[i].stream;
        *n = k;
        return true;
    }
    return false;
}

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

sp_attach *sp_attach_remote(sp_sandbox *sb, const sp_remote_ops *ops, sp_remote_stream *rs,
                            bool tty)
{
    sp_attach *a = sp_xcalloc(1, sizeof(*a));
    a->sb = sb;
    a->rops = ops;
    a->rs = rs;
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
    sp_cmd io = {0};
    char *exec_id = NULL;
    sp_fast_spec fs = {.argv = argv,
                       .env = (const char *const *)env,
                       .workdir = workdir,
                       .tty = o.tty,
                       .rows = rows,
                       .cols = cols};
    int r = sp_cmd_start_fast(&io.fast, sb, o.user, &fs, err);
    /* A command that is already gone needs no EOF: a failed send is moot. */
    if (r == 0 && io.fast && !o.stdin_open)
        sp_fast_close_stdin(io.fast, NULL);
    if (r == 0 && !io.fast && (r = sp_sandbox_require_running(sb, err)) == 0) {
        sp_exec_spec spec = SP_EXEC_SPEC_INIT;
        spec.argv = argv;
        spec.env = (const char *const *)env;
        spec.workdir = workdir;
        spec.user = o.user ? o.user : sb->cfg.user;
        spec.tty = o.tty;
        spec.attach_stdin = o.stdin_open;
        spec.attach_stdout = spec.attach_stderr = true;
        r = sb->lops->exec_create(&exec_id, sb->local, sb->container_id, &spec, err);
        if (r == 0)
            r = sb->lops->exec_start(&io.rest, sb->local, exec_id, o.tty, err);
        if (r == 0 && o.tty)
            sb->lops->exec_resize(sb->local, exec_id, rows, cols, NULL);
    }
    sp_strv_free(env);
    if (r < 0) {
        sp_fast_free(io.fast);
        sp_exec_free(io.rest);
        free(exec_id);
        return r;
    }
    sp_attach *a = sp_xcalloc(1, sizeof(*a));
    a->sb = sb;
    a->io = io;
    a->exec_id = exec_id;
    a->tty = o.tty;
    a->holding = io.rest != NULL;
    *out = a;
    return 0;
}

int sp_attach_fd(const sp_attach *a)
{
    if (a->rs)
        return a->rops->stream_fd(a->rs);
    return sp_cmd_fd(&a->io);
}

bool sp_attach_buffered(const sp_attach *a)
{
    if (a->rs)
        return a->rops->stream_buffered(a->rs);
    return a->q[0].b.len > a->q[0].off || a->q[1].b.len > a->q[1].off || sp_cmd_buffered(&a->io);
}

int sp_attach_read(size_t *n, int *stream, sp_attach *a, void *buf, size_t cap, int timeout_ms,
                   sp_error **err)
{
    *n = 0;
    if (stream)
        *stream = SP_EXEC_STDOUT;
    if (a->rs) {
        int st = 1;
        int r = a->rops->stream_read(a->rs, n, &st, buf, cap, timeout_ms, err);
        if (stream)
            *stream = st == 2 ? SP_EXEC_STDERR : SP_EXEC_STDOUT;
        return r;
    }
    if (dequeue(n, stream, a, buf, cap) || a->ended)
        return 0;
    int st = SP_EXEC_STDOUT;
    int r = sp_cmd_read(n, &st, &a->io, buf, cap, timeout_ms, err);
    if (r < 0)
        return r;
    if (*n == 0) {
        a->ended = true;
        if (a->holding) {
            const sp_buf *h = &a->held;
            if (h->len && may_be_runtime(h) &&
                memmem(h->data, h->len, OCI_NOT_FOUND, strlen(OCI_NOT_FOUND)))
                a->noexec = ENOENT;
            else if (h->len && may_be_runtime(h) &&
                     memmem(h->data, h->len, OCI_DENIED, strlen(OCI_DENIED)))
                a->noexec = EACCES;
            /* The command itself may print such lines: only Podman's
             * own exit code for a start failure (127 / 126) makes them
             * the runtime's. The command has ended, so this is one
             * inspect, not a wait. */
            int code = -1;
            if (a->noexec &&
                (a->sb->lops->exec_wait(&code, a->sb->local, a->exec_id, 5000, NULL) < 0 ||
                 code != (a->noexec == ENOENT ? 127 : 126)))
                a->noexec = 0;
            if (a->noexec)
                sp_buf_dispose(&a->held);
            release(a);
        }
        if (a->io.fast)
            a->noexec = sp_fast_noexec(a->io.fast);
        dequeue(n, stream, a, buf, cap);
        return 0;
    }
    if (a->io.fast && sp_fast_noexec(a->io.fast) && st == SP_EXEC_STDERR) {
        *n = 0; /* the agent's own line about it */
        return SP_ETIMEOUT;
    }
    if (!a->holding) {
        if (stream)
            *stream = st;
        return 0;
    }
    if (a->held.len && st != a->held_stream) {
        release(a);
        enqueue(a, st, buf, *n);
    } else {
        a->held_stream = st;
        sp_buf_add(&a->held, buf, *n);
        if (may_be_runtime(&a->held)) {
            *n = 0;
            return SP_ETIMEOUT;
        }
        release(a);
    }
    *n = 0;
    dequeue(n, stream, a, buf, cap);
    return 0;
}

int sp_attach_write(sp_attach *a, const void *data, size_t len, sp_error **err)
{
    if (a->rs)
        return a->rops->stream_write(a->rs, data, len, err);
    return sp_cmd_write_stdin(&a->io, data, len, err);
}

int sp_attach_close_stdin(sp_attach *a, sp_error **err)
{
    if (a->rs)
        return a->rops->stream_close_stdin(a->rs, err);
    return sp_cmd_close_stdin(&a->io, err);
}

int sp_attach_resize(sp_attach *a, unsigned rows, unsigned cols, sp_error **err)
{
    if (!a->tty)
        return sp_err_set(err, SP_EINVAL, 0, "attach: the command has no terminal to resize");
    if (!rows || !cols || rows > 0xffff || cols > 0xffff)
        return sp_err_set(err, SP_EINVAL, 0, "attach: bad terminal size %ux%u", rows, cols);
    if (a->rs)
        return a->rops->stream_resize(a->rs, rows, cols, err);
    if (a->io.fast)
        return sp_fast_resize(a->io.fast, rows, cols, err);
    return a->sb->lops->exec_resize(a->sb->local, a->exec_id, rows, cols, err);
}

int sp_attach_wait(int *exit_code, sp_attach *a, int timeout_ms, sp_error **err)
{
    *exit_code = -1;
    if (a->rs) {
        if (!a->rops->stream_exit(a->rs, exit_code))
            return sp_err_set(err, SP_ERROR, 0, "the command in sandbox %s has not ended",
                              a->sb->name);
        return 0;
    }
    if (a->io.fast) {
        if (!sp_fast_exited(a->io.fast, exit_code))
            return sp_err_set(err, SP_EPODMAN, 0,
                              "lost the exec agent of sandbox %s before the command ended",
                              a->sb->name);
    } else {
        int r = a->sb->lops->exec_wait(exit_code, a->sb->local, a->exec_id, timeout_ms, err);
        if (r < 0 && r != SP_ETIMEOUT) {
            /* Not a "not found" of our own: the service lost the session. */
            sp_err_wrap(err, r, "exit code of the command");
            if (err && *err)
                (*err)->code = SP_EPODMAN;
            return SP_EPODMAN;
        }
        if (r < 0)
            return r;
    }
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
    if (a->rs)
        a->rops->stream_free(a->rs);
    sp_fast_free(a->io.fast);
    sp_exec_free(a->io.rest);
    free(a->exec_id);
    sp_buf_dispose(&a->held);
    sp_buf_dispose(&a->q[0].b);
    sp_buf_dispose(&a->q[1].b);
    free(a);
}
