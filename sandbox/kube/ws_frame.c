/* RFC 6455 framing (see ws_frame.h).
 *
 * Contract of the decoder: it reads bytes a server controls. Memory stays
 * bounded by max_message plus a fixed header and control buffer; every
 * length is checked before it is used; a violation stops the decoder for
 * good with the close code section 7.4.1 asks for. */
#include <string.h>
#include <sys/random.h>

#include "ws_frame.h"

static bool opcode_known(int op)
{
    return op == SP_WS_CONT || op == SP_WS_TEXT || op == SP_WS_BINARY || op == SP_WS_CLOSE ||
           op == SP_WS_PING || op == SP_WS_PONG;
}

static bool is_control(int op)
{
    return (op & 0x8) != 0;
}

void sp_ws_encode_masked(sp_buf *out, int opcode, bool fin, const void *payload, size_t len,
                         const uint8_t mask[4])
{
    uint8_t h[SP_WS_HEADER_MAX];
    size_t n = 0;
    h[n++] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0f));
    if (len < 126) {
        h[n++] = (uint8_t)(0x80 | len);
    } else if (len <= 0xffff) {
        h[n++] = 0x80 | 126;
        h[n++] = (uint8_t)(len >> 8);
        h[n++] = (uint8_t)len;
    } else {
        h[n++] = 0x80 | 127;
        for (int i = 7; i >= 0; i--)
            h[n++] = (uint8_t)((uint64_t)len >> (8 * i));
    }
    memcpy(h + n, mask, 4);
    n += 4;
    sp_buf_grow(out, n + len);
    sp_buf_add(out, h, n);
    uint8_t *dst = (uint8_t *)out->data + out->len;
    const uint8_t *src = payload;
    for (size_t i = 0; i < len; i++)
        dst[i] = src[i] ^ mask[i & 3];
    out->len += len;
    out->data[out->len] = '\0';
}

int sp_ws_encode(sp_buf *out, int opcode, bool fin, const void *payload, size_t len, sp_error **err)
{
    if (!opcode_known(opcode))
        return sp_err_set(err, SP_EINVAL, 0, "websocket: unknown opcode %d", opcode);
    if (is_control(opcode) && (!fin || len > SP_WS_CONTROL_MAX))
        return sp_err_set(err, SP_EINVAL, 0,
                          "websocket: a control frame must be final and at most 125 bytes");
    uint8_t mask[4];
    if (getrandom(mask, sizeof(mask), 0) != (ssize_t)sizeof(mask))
        return sp_err_errno(err, errno, "websocket: getrandom", NULL);
    sp_ws_encode_masked(out, opcode, fin, payload, len, mask);
    return 0;
}

bool sp_ws_close_code_valid(unsigned code)
{
    if (code >= 3000 && code <= 4999)
        return true;
    if (code < 1000 || code > 1014)
        return false;
    /* 1004 is reserved; 1005 and 1006 must never be sent. */
    return code != 1004 && code != 1005 && code != 1006;
}

void sp_ws_decoder_init(sp_ws_decoder *d, size_t max_message)
{
    memset(d, 0, sizeof(*d));
    d->max_message = max_message ? max_message : SP_WS_DEFAULT_LIMIT;
    d->hdr_need = 2;
}

void sp_ws_decoder_dispose(sp_ws_decoder *d)
{
    sp_buf_dispose(&d->msg);
}

static int fail(sp_ws_decoder *d, sp_error **err, int close_code, const char *what)
{
    d->fail_code = close_code;
    return sp_err_set(err, close_code == SP_WS_CLOSE_TOO_BIG ? SP_ETOOBIG : SP_ERROR, 0,
                      "websocket: %s", what);
}

/* The first two header bytes are in: check them and say how long the
 * whole header is. */
static int check_start(sp_ws_decoder *d, sp_error **err)
{
    uint8_t b0 = d->hdr[0], b1 = d->hdr[1];
    int op = b0 & 0x0f;
    if (b0 & 0x70)
        return fail(d, err, SP_WS_CLOSE_PROTOCOL,
                    "reserved bits set in a frame (no extension was negotiated)");
    if (!opcode_known(op))
        return fail(d, err, SP_WS_CLOSE_PROTOCOL, "frame with a reserved opcode");
    if (b1 & 0x80)
        return fail(d, err, SP_WS_CLOSE_PROTOCOL, "masked frame from the server");
    unsigned len7 = b1 & 0x7f;
    if (is_control(op)) {
        if (!(b0 & 0x80))
            return fail(d, err, SP_WS_CLOSE_PROTOCOL, "fragmented control frame");
        if (len7 > SP_WS_CONTROL_MAX)
            return fail(d, err, SP_WS_CLOSE_PROTOCOL, "control frame longer than 125 bytes");
    } else if (op == SP_WS_CONT && !d->msg_opcode) {
        return fail(d, err, SP_WS_CLOSE_PROTOCOL,
                    "continuation frame without a message to continue");
    } else if (op != SP_WS_CONT && d->msg_opcode) {
        return fail(d, err, SP_WS_CLOSE_PROTOCOL, "new data message inside a fragmented one");
    }
    d->opcode = op;
    d->fin = (b0 & 0x80) != 0;
    d->hdr_need = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0);
    return 0;
}

/* The whole header is in: take the payload length. */
static int check_length(sp_ws_decoder *d, sp_error **err)
{
    unsigned len7 = d->hdr[1] & 0x7f;
    uint64_t len = len7;
    if (len7 == 126) {
        len = (uint64_t)d->hdr[2] << 8 | d->hdr[3];
    } else if (len7 == 127) {
        if (d->hdr[2] & 0x80)
            return fail(d, err, SP_WS_CLOSE_PROTOCOL, "64-bit frame length with the top bit set");
        len = 0;
        for (int i = 2; i < 10; i++)
            len = len << 8 | d->hdr[i];
    }
    if (!is_control(d->opcode)) {
        if (d->opcode != SP_WS_CONT)
            d->msg_opcode = d->opcode;
        if (len > d->max_message - d->msg.len)
            return fail(d, err, SP_WS_CLOSE_TOO_BIG, "message larger than the limit");
    }
    d->ctrl_len = 0;
    d->left = len;
    return 0;
}

static int finish_close(sp_ws_decoder *d, sp_ws_msg *out, sp_error **err)
{
    out->close_code = SP_WS_CLOSE_NO_STATUS;
    if (d->ctrl_len == 1)
        return fail(d, err, SP_WS_CLOSE_PROTOCOL, "close frame with a one-byte payload");
    if (d->ctrl_len >= 2) {
        unsigned code = (unsigned)d->ctrl[0] << 8 | d->ctrl[1];
        if (!sp_ws_close_code_valid(code))
            return fail(d, err, SP_WS_CLOSE_PROTOCOL, "close frame with an invalid code");
        if (!sp_utf8_valid((const char *)d->ctrl + 2, d->ctrl_len - 2))
            return fail(d, err, SP_WS_CLOSE_BAD_DATA, "close reason is not valid UTF-8");
        out->close_code = (uint16_t)code;
        out->reason = (const char *)d->ctrl + 2;
        out->reason_len = d->ctrl_len - 2;
    }
    d->closed = true;
    return 1;
}

/* The current frame's payload is complete: 1 with a message, or 0. */
static int frame_done(sp_ws_decoder *d, sp_ws_msg *out, sp_error **err)
{
    d->hdr_have = 0;
    d->hdr_need = 2;
    memset(out, 0, sizeof(*out));
    if (is_control(d->opcode)) {
        out->opcode = d->opcode;
        out->data = d->ctrl;
        out->len = d->ctrl_len;
        return d->opcode == SP_WS_CLOSE ? finish_close(d, out, err) : 1;
    }
    if (!d->fin)
        return 0;
    if (d->msg_opcode == SP_WS_TEXT && !sp_utf8_valid(d->msg.data ? d->msg.data : "", d->msg.len))
        return fail(d, err, SP_WS_CLOSE_BAD_DATA, "text message is not valid UTF-8");
    out->opcode = d->msg_opcode;
    out->data = (const uint8_t *)(d->msg.data ? d->msg.data : "");
    out->len = d->msg.len;
    d->msg_opcode = 0;
    d->msg_done = true;
    return 1;
}

int sp_ws_decode(sp_ws_decoder *d, const uint8_t *data, size_t len, size_t *consumed,
                 sp_ws_msg *out, sp_error **err)
{
    *consumed = 0;
    if (d->fail_code)
        return sp_err_set(err, SP_ERROR, 0, "websocket: the stream already failed");
    if (d->msg_done) {
        d->msg.len = 0;
        d->msg_done = false;
    }
    size_t i = 0;
    int rc = 0;
    for (;;) {
        if (!d->in_payload) {
            if (i >= len)
                break;
            if (d->closed) {
                rc = fail(d, err, SP_WS_CLOSE_PROTOCOL, "data after the close frame");
                break;
            }
            d->hdr[d->hdr_have++] = data[i++];
            if (d->hdr_have == 2 && (rc = check_start(d, err)) < 0)
                break;
            if (d->hdr_have < d->hdr_need)
                continue;
            if ((rc = check_length(d, err)) < 0)
                break;
            d->in_payload = true;
        }
        size_t take = len - i;
        if ((uint64_t)take > d->left)
            take = (size_t)d->left;
        if (take && is_control(d->opcode)) {
            memcpy(d->ctrl + d->ctrl_len, data + i, take);
            d->ctrl_len += take;
        } else if (take) {
            sp_buf_add(&d->msg, data + i, take);
        }
        i += take;
        d->left -= take;
        if (d->left > 0)
            break;
        d->in_payload = false;
        if ((rc = frame_done(d, out, err)) != 0)
            break;
    }
    *consumed = i;
    return rc;
}
