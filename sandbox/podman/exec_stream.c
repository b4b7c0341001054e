/* Podman's REST exec as a command's stream (engine/stream.h): the
 * hijacked stream of stream.c, with the exec session's exit code, size
 * and pid behind it; the local engine's exec_start hands it out.
 *
 * A command that cannot be executed is reported as such when asked for
 * (noexec), not as text: the runtime's own lines ("Error: runc: exec
 * failed: ... OCI runtime attempted to invoke a command that was not
 * found") arrive on the command's stream before it ends. So the leading
 * output is held back while every line of it looks like the runtime's
 * ("Error: " and one of its marks), until either something else comes
 * (then it is handed out in order; a command whose first output is such a
 * line waits for its next byte or its end) or the stream ends (then
 * Podman's fixed wording and exit code say which failure it was, and
 * those lines are dropped). */
#include <errno.h>
#include <string.h>

#include "podman_internal.h"
#include "engine/stream.h"

/* Held bytes past this are the command's own output. */
#define HOLD_MAX 8192

/* Podman's messages for a command the runtime could not execute
 * (libpod/define/errors.go: ErrOCIRuntimeNotFound, ...PermissionDenied). */
#define OCI_NOT_FOUND "OCI runtime attempted to invoke a command that was not found"
#define OCI_DENIED    "OCI permission denied"

typedef struct rest_stream {
    sp_exec *e;
    sp_podman *p;
    char *id;
    bool ended;
    int noexec;
    /* Output held while it may be the runtime's error lines. */
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
} rest_stream;

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

static void enqueue(rest_stream *s, int stream, const void *data, size_t len)
{
    for (int i = 0; i < 2; i++) {
        if (s->q[i].b.len == s->q[i].off) {
            s->q[i].b.len = s->q[i].off = 0;
            s->q[i].stream = stream;
            sp_buf_add(&s->q[i].b, data, len);
            return;
        }
    }
    abort(); /* never more than the hold and one chunk */
}

static void release(rest_stream *s)
{
    s->holding = false;
    if (s->held.len)
        enqueue(s, s->held_stream, s->held.data, s->held.len);
    sp_buf_dispose(&s->held);
}

static bool dequeue(size_t *n, int *stream, rest_stream *s, void *buf, size_t cap)
{
    for (int i = 0; i < 2; i++) {
        size_t left = s->q[i].b.len - s->q[i].off;
        if (!left)
            continue;
        size_t k = left < cap ? left : cap;
        memcpy(buf, s->q[i].b.data + s->q[i].off, k);
        s->q[i].off += k;
        if (stream)
            *stream = s->q[i].stream;
        *n = k;
        return true;
    }
    return false;
}

/* The stream ended while held: was it the runtime saying it could not
 * execute the command? */
static void judge_hold(rest_stream *s)
{
    const sp_buf *h = &s->held;
    if (h->len && may_be_runtime(h) &&
        memmem(h->data, h->len, OCI_NOT_FOUND, strlen(OCI_NOT_FOUND)))
        s->noexec = ENOENT;
    else if (h->len && may_be_runtime(h) && memmem(h->data, h->len, OCI_DENIED, strlen(OCI_DENIED)))
        s->noexec = EACCES;
    /* The command itself may print such lines: only Podman's own exit
     * code for a start failure (127 / 126) makes them the runtime's. The
     * command has ended, so this is one inspect, not a wait. */
    int code = -1;
    if (s->noexec && (sp_podman_exec_wait(&code, s->p, s->id, 5000, NULL) < 0 ||
                      code != (s->noexec == ENOENT ? 127 : 126)))
        s->noexec = 0;
    if (s->noexec)
        sp_buf_dispose(&s->held);
    release(s);
}

static int r_read(size_t *n, int *stream, void *impl, void *buf, size_t cap, int timeout_ms,
                  sp_error **err)
{
    rest_stream *s = impl;
    *n = 0;
    if (stream)
        *stream = SP_EXEC_STDOUT;
    if (dequeue(n, stream, s, buf, cap) || s->ended)
        return 0;
    int st = SP_EXEC_STDOUT;
    int r = sp_exec_read(n, &st, s->e, buf, cap, timeout_ms, err);
    if (r < 0)
        return r;
    if (*n == 0) {
        s->ended = true;
        if (s->holding)
            judge_hold(s);
        dequeue(n, stream, s, buf, cap);
        return 0;
    }
    if (!s->holding) {
        if (stream)
            *stream = st;
        return 0;
    }
    if (s->held.len && st != s->held_stream) {
        release(s);
        enqueue(s, st, buf, *n);
    } else {
        s->held_stream = st;
        sp_buf_add(&s->held, buf, *n);
        if (may_be_runtime(&s->held)) {
            *n = 0;
            return SP_ETIMEOUT;
        }
        release(s);
    }
    *n = 0;
    dequeue(n, stream, s, buf, cap);
    return 0;
}

static int r_fd(const void *impl)
{
    return sp_exec_fd(((const rest_stream *)impl)->e);
}

static bool r_buffered(const void *impl)
{
    const rest_stream *s = impl;
    return s->q[0].b.len > s->q[0].off || s->q[1].b.len > s->q[1].off || sp_exec_buffered(s->e);
}

static int r_write(void *impl, const void *data, size_t len, sp_error **err)
{
    return sp_exec_write_stdin(((rest_stream *)impl)->e, data, len, err);
}

static int r_close_stdin(void *impl, sp_error **err)
{
    return sp_exec_close_stdin(((rest_stream *)impl)->e, err);
}

static int r_resize(void *impl, unsigned rows, unsigned cols, sp_error **err)
{
    rest_stream *s = impl;
    return sp_podman_exec_resize(s->p, s->id, rows, cols, err);
}

static int r_exited(int *code, void *impl, int wait_ms, sp_error **err)
{
    rest_stream *s = impl;
    int r = sp_podman_exec_wait(code, s->p, s->id, wait_ms, err);
    if (r < 0 && r != SP_ETIMEOUT) {
        /* Not a "not found" of our own: the service lost the session. */
        sp_err_wrap(err, r, "exit code of the command");
        if (err && *err) {
            (*err)->code = SP_EPODMAN;
            (*err)->reason = SP_R_SERVICE;
        }
        return SP_EPODMAN;
    }
    return r;
}

static int r_noexec(const void *impl)
{
    return ((const rest_stream *)impl)->noexec;
}

static int r_host_pid(void *impl)
{
    rest_stream *s = impl;
    sp_podman_exec_info info;
    if (sp_podman_exec_inspect(&info, s->p, s->id, NULL) < 0 || info.pid <= 0)
        return 0;
    return info.pid;
}

static void r_free(void *impl)
{
    rest_stream *s = impl;
    if (!s)
        return;
    sp_exec_free(s->e);
    free(s->id);
    sp_buf_dispose(&s->held);
    sp_buf_dispose(&s->q[0].b);
    sp_buf_dispose(&s->q[1].b);
    free(s);
}

static const sp_stream_ops rest_ops = {
    .fd = r_fd,
    .buffered = r_buffered,
    .read = r_read,
    .write = r_write,
    .close_stdin = r_close_stdin,
    .resize = r_resize,
    .exited = r_exited,
    .noexec = r_noexec,
    .host_pid = r_host_pid,
    .signal = sp_stream_no_signal, /* the caller reaches the process group */
    .kill = sp_stream_no_kill,
    .free = r_free,
};

int sp_podman_exec_stream(sp_stream *out, sp_podman *p, const char *exec_id, bool tty, bool noexec,
                          sp_error **err)
{
    *out = (sp_stream){0};
    sp_exec *e = NULL;
    int r = sp_podman_exec_start(&e, p, exec_id, tty, err);
    if (r < 0)
        return r;
    rest_stream *s = sp_xcalloc(1, sizeof(*s));
    s->e = e;
    s->p = p;
    s->id = sp_xstrdup(exec_id);
    s->holding = noexec;
    *out = (sp_stream){&rest_ops, s};
    return 0;
}
