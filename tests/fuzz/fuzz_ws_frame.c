/* Fuzz target: the RFC 6455 decoder reading a server's bytes.
 *
 * Input: byte 0 picks the chunk size the bytes are fed in (1..16, or all
 * at once) and a message limit (small, to reach the size checks, or the
 * default); the rest is the stream. Properties: the decoder never reads
 * past what it is given, every message respects the limit and the frame
 * rules, text is UTF-8, an error is one line with a close code, and
 * nothing is accepted after an error or a close. */
#include <stdbool.h>

#include "fuzz.h"
#include "ws_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 1 << 20)
        return 0;
    size_t step = (data[0] & 15) + 1;
    if (data[0] & 16)
        step = size;
    size_t max = data[0] & 32 ? 100 : 0;
    const uint8_t *in = data + 1;
    size_t len = size - 1;
    sp_ws_decoder d;
    sp_ws_decoder_init(&d, max);
    bool failed = false, closed = false;
    for (size_t off = 0; off < len && !failed;) {
        size_t n = len - off < step ? len - off : step;
        size_t pos = 0;
        while (pos < n) {
            size_t used = 0;
            sp_ws_msg m;
            sp_error *err = NULL;
            int rc = sp_ws_decode(&d, in + off + pos, n - pos, &used, &m, &err);
            FZ_ASSERT(used <= n - pos, "consumed %zu of %zu", used, n - pos);
            pos += used;
            if (rc < 0) {
                FZ_ASSERT(err && err->message && !strchr(err->message, '\n'), "bad error");
                FZ_ASSERT(d.fail_code == 1002 || d.fail_code == 1007 || d.fail_code == 1009,
                          "close code %d", d.fail_code);
                sp_error_free(err);
                failed = true;
                break;
            }
            if (rc == 0) {
                FZ_ASSERT(pos == n, "stopped at %zu of %zu without a message", pos, n);
                break;
            }
            FZ_ASSERT(!closed, "a message after the close frame");
            switch (m.opcode) {
            case SP_WS_TEXT:
                FZ_ASSERT(sp_utf8_valid((const char *)m.data, m.len), "text not UTF-8");
                /* fallthrough */
            case SP_WS_BINARY:
                /* The limit is for data; control frames have their own 125. */
                FZ_ASSERT(m.len <= d.max_message, "message of %zu bytes", m.len);
                break;
            case SP_WS_CLOSE:
                closed = true;
                FZ_ASSERT(m.close_code == SP_WS_CLOSE_NO_STATUS ||
                              sp_ws_close_code_valid(m.close_code),
                          "close code %u", m.close_code);
                FZ_ASSERT(sp_utf8_valid(m.reason ? m.reason : "", m.reason_len), "reason");
                /* fallthrough */
            case SP_WS_PING:
            case SP_WS_PONG:
                FZ_ASSERT(m.len <= SP_WS_CONTROL_MAX, "control frame of %zu bytes", m.len);
                break;
            default:
                FZ_ASSERT(false, "opcode %d", m.opcode);
            }
        }
        off += n;
    }
    if (failed) {
        size_t used = 1;
        sp_ws_msg m;
        sp_error *err = NULL;
        static const uint8_t ok[] = {0x81, 0x00};
        FZ_ASSERT(sp_ws_decode(&d, ok, 2, &used, &m, &err) < 0 && used == 0,
                  "decoder went on after an error");
        sp_error_free(err);
    }
    sp_ws_decoder_dispose(&d);
    return 0;
}
