/* The Kubernetes exec channel protocol (see kube_exec.h). The Status on
 * channel 3 comes from the API server (or whoever answers in its place):
 * parsed with every field checked, never trusted for more than an exit
 * code and a message. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "kube_exec.h"

const char *const sp_kube_exec_protocols[] = {SP_KUBE_PROTO_V5, SP_KUBE_PROTO_V4, NULL};

int sp_kube_exec_split(int *channel, const uint8_t **data, size_t *len, const uint8_t *msg,
                       size_t msg_len, sp_error **err)
{
    if (msg_len == 0)
        return sp_err_set(err, SP_ERROR, 0, "kubernetes exec: a message without a channel byte");
    if (msg[0] < SP_KUBE_STDOUT || msg[0] > SP_KUBE_STATUS)
        return sp_err_set(err, SP_ERROR, 0, "kubernetes exec: a message on channel %u", msg[0]);
    *channel = msg[0];
    *data = msg + 1;
    *len = msg_len - 1;
    return 0;
}

static const char *str_field(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* "0".."255", digits only. */
static int parse_exit(const char *s)
{
    if (!s || !*s || strlen(s) > 3)
        return -1;
    int v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v <= 255 ? v : -1;
}

int sp_kube_exec_status(int *exit_code, const char *json, size_t len, sp_error **err)
{
    *exit_code = -1;
    cJSON *root = cJSON_ParseWithLength(json, len);
    int rc = 0;
    if (!cJSON_IsObject(root)) {
        rc = sp_err_set(err, SP_ERROR, 0, "kubernetes exec: the status is not a JSON object");
        goto done;
    }
    const char *status = str_field(root, "status");
    if (status && strcmp(status, "Success") == 0) {
        *exit_code = 0;
        goto done;
    }
    if (!status || strcmp(status, "Failure") != 0) {
        rc = sp_err_set(err, SP_ERROR, 0,
                        "kubernetes exec: the status is neither Success nor Failure");
        goto done;
    }
    const cJSON *details = cJSON_GetObjectItemCaseSensitive(root, "details");
    const cJSON *causes = cJSON_GetObjectItemCaseSensitive(details, "causes");
    const cJSON *c;
    if (!cJSON_IsArray(causes))
        causes = NULL;
    cJSON_ArrayForEach(c, causes)
    {
        const char *reason = str_field(c, "reason");
        if (!reason || strcmp(reason, "ExitCode") != 0)
            continue;
        int v = parse_exit(str_field(c, "message"));
        if (v < 0) {
            rc = sp_err_set(err, SP_ERROR, 0, "kubernetes exec: an exit code that is not 0..255");
            goto done;
        }
        *exit_code = v;
        goto done;
    }
    const char *msg = str_field(root, "message");
    char clean[256];
    size_t n = msg ? sp_utf8_cut(msg, strlen(msg), sizeof(clean) - 1) : 0;
    for (size_t i = 0; i < n; i++)
        clean[i] = msg[i] == '\n' || msg[i] == '\r' ? ' ' : msg[i];
    clean[n] = '\0';
    rc = sp_err_set(err, SP_ERROR, 0, "kubernetes exec: %s",
                    n ? clean : "the command failed without an exit code");
done:
    cJSON_Delete(root);
    return rc;
}

/* One message: the channel byte, then data. */
static int send_on(sp_ws *ws, uint8_t channel, const void *data, size_t len, sp_error **err)
{
    sp_buf b = SP_BUF_INIT;
    sp_buf_addc(&b, (char)channel);
    if (len)
        sp_buf_add(&b, data, len);
    int rc = sp_ws_send(ws, SP_WS_BINARY, b.data, b.len, 0, err);
    sp_buf_dispose(&b);
    return rc;
}

int sp_kube_exec_write(sp_ws *ws, const void *data, size_t len, sp_error **err)
{
    return send_on(ws, SP_KUBE_STDIN, data, len, err);
}

int sp_kube_exec_close_stdin(sp_ws *ws, sp_error **err)
{
    if (strcmp(sp_ws_protocol(ws), SP_KUBE_PROTO_V5) != 0)
        return sp_err_set(
            err, SP_EINVAL, 0, "kubernetes exec: closing stdin needs %s (the server speaks %s)",
            SP_KUBE_PROTO_V5, sp_ws_protocol(ws)[0] ? sp_ws_protocol(ws) : "no subprotocol");
    uint8_t ch = SP_KUBE_STDIN;
    return send_on(ws, SP_KUBE_CLOSE, &ch, 1, err);
}

int sp_kube_exec_resize(sp_ws *ws, unsigned width, unsigned height, sp_error **err)
{
    char j[64];
    int n = snprintf(j, sizeof(j), "{\"Width\":%u,\"Height\":%u}", width, height);
    return send_on(ws, SP_KUBE_RESIZE, j, (size_t)n, err);
}

int sp_kube_exec_collect(sp_ws *ws, sp_buf *out, sp_buf *errb, int *code, unsigned *close_code,
                         int timeout_ms, bool (*stop)(const sp_buf *out), sp_error **err)
{
    *code = -1;
    sp_buf_adds(out, "");
    sp_buf_adds(errb, "");
    int64_t end = sp_now_ms() + timeout_ms;
    for (;;) {
        int left = (int)(end - sp_now_ms());
        if (left <= 0)
            return sp_err_set(err, SP_ETIMEOUT, 0, "no answer within %d ms", timeout_ms);
        sp_ws_msg m;
        int rc = sp_ws_recv(ws, &m, left, err);
        if (rc < 0)
            return rc;
        if (m.opcode == SP_WS_CLOSE) {
            if (close_code)
                *close_code = m.close_code;
            return 0;
        }
        int ch;
        const uint8_t *d;
        size_t n;
        if ((rc = sp_kube_exec_split(&ch, &d, &n, m.data, m.len, err)) < 0)
            return rc;
        if (ch == SP_KUBE_STDOUT)
            sp_buf_add(out, d, n);
        else if (ch == SP_KUBE_STDERR)
            sp_buf_add(errb, d, n);
        else if (ch == SP_KUBE_STATUS &&
                 (rc = sp_kube_exec_status(code, (const char *)d, n, err)) < 0)
            return rc;
        if (stop && stop(out))
            return 0;
    }
}
