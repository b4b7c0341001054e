/* The Kubernetes exec channel protocol (v4/v5.channel.k8s.io) over a
 * WebSocket: every binary message starts with a channel byte. Internal to
 * kube/. */
#ifndef SANDPOD_KUBE_EXEC_H
#define SANDPOD_KUBE_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "ws.h"

#define SP_KUBE_PROTO_V5 "v5.channel.k8s.io"
#define SP_KUBE_PROTO_V4 "v4.channel.k8s.io"

enum {
    SP_KUBE_STDIN = 0,
    SP_KUBE_STDOUT = 1,
    SP_KUBE_STDERR = 2,
    SP_KUBE_STATUS = 3,  /* a metav1.Status JSON when the command ends */
    SP_KUBE_RESIZE = 4,  /* {"Width":w,"Height":h} */
    SP_KUBE_CLOSE = 255, /* v5: [255, channel] closes that channel */
};

/* The protocols offered, v5 first (NULL-terminated). */
extern const char *const sp_kube_exec_protocols[];

/* Split one received message into its channel and payload. An empty
 * message, or a channel a server never sends (0, 4 and up), is SP_ERROR. */
int sp_kube_exec_split(int *channel, const uint8_t **data, size_t *len, const uint8_t *msg,
                       size_t msg_len, sp_error **err);

/* The exit code from a channel-3 Status: 0 for "Success", N for "Failure"
 * with a cause {reason: "ExitCode", message: "N"} (N in 0..255). Any other
 * Failure (the command could not start, the Pod is gone) is SP_ERROR whose
 * message is the Status's own message; malformed JSON is SP_ERROR too. */
int sp_kube_exec_status(int *exit_code, const char *json, size_t len, sp_error **err);

/* Send data on stdin. */
int sp_kube_exec_write(sp_ws *ws, const void *data, size_t len, sp_error **err);
/* Close stdin ([255, 0]); v5 only: on a v4 connection SP_EINVAL, as v4
 * has no way to say end of input. */
int sp_kube_exec_close_stdin(sp_ws *ws, sp_error **err);
/* Tell the terminal's size (channel 4). */
int sp_kube_exec_resize(sp_ws *ws, unsigned width, unsigned height, sp_error **err);

/* Read an exec's channels into out and errb (both left NUL-terminated)
 * and *code (-1 until the Status comes) until the server closes (its code
 * in *close_code when not NULL), stop(out) says enough (may be NULL), or
 * timeout_ms passes in all (SP_ETIMEOUT). */
int sp_kube_exec_collect(sp_ws *ws, sp_buf *out, sp_buf *errb, int *code, unsigned *close_code,
                         int timeout_ms, bool (*stop)(const sp_buf *out), sp_error **err);

#endif
