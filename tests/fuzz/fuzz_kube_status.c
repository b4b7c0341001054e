/* Fuzz target: the Kubernetes exec channel layer's parsers: the channel
 * byte split and the channel-3 Status JSON.
 *
 * Input: the message as received (channel byte first). Properties: a
 * split never points outside the message, an exit code is 0..255, an
 * error is one line. */
#include "fuzz.h"
#include "kube_exec.h"

static void check_error(int rc, sp_error *err)
{
    FZ_ASSERT(rc < 0 && err && err->message, "error path without an error");
    FZ_ASSERT(!strchr(err->message, '\n') && !strchr(err->message, '\r'),
              "multi-line error message: %s", err->message);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 20)
        return 0;
    int ch = -1;
    const uint8_t *p = NULL;
    size_t n = 0;
    sp_error *err = NULL;
    int rc = sp_kube_exec_split(&ch, &p, &n, data, size, &err);
    if (rc < 0) {
        check_error(rc, err);
        sp_error_free(err);
        err = NULL;
        /* The JSON parser gets every input, channel byte or not. */
        p = data;
        n = size;
    } else {
        FZ_ASSERT(ch >= 1 && ch <= 3, "channel %d", ch);
        FZ_ASSERT(p == data + 1 && n == size - 1, "payload outside the message");
    }
    int code = -2;
    rc = sp_kube_exec_status(&code, (const char *)p, n, &err);
    if (rc < 0)
        check_error(rc, err);
    else
        FZ_ASSERT(code >= 0 && code <= 255, "exit code %d", code);
    sp_error_free(err);
    return 0;
}
