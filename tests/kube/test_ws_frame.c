/* The RFC 6455 frame codec, SHA-1 and base64 against their RFCs' vectors,
 * and the Kubernetes exec channel parser. */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "base.h"
#include "kube_exec.h"
#include "sha1.h"
#include "testutil.h"
#include "ws.h"
#include "ws_frame.h"

/* ------------------------------------------------------ sha1, base64 -- */

static void sha1_hex(char out[41], const void *data, size_t len, size_t repeat)
{
    sp_sha1 c;
    uint8_t md[20];
    sp_sha1_init(&c);
    for (size_t i = 0; i < repeat; i++)
        sp_sha1_update(&c, data, len);
    sp_sha1_final(&c, md);
    for (int i = 0; i < 20; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static void test_sha1_rfc3174(void **state)
{
    (void)state;
    char h[41];
    sha1_hex(h, "abc", 3, 1);
    assert_string_equal(h, "a9993e364706816aba3e25717850c26c9cd0d89d");
    const char *t2 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha1_hex(h, t2, strlen(t2), 1);
    assert_string_equal(h, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    sha1_hex(h, "a", 1, 1000000);
    assert_string_equal(h, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
    const char *t4 = "0123456701234567012345670123456701234567012345670123456701234567";
    sha1_hex(h, t4, strlen(t4), 10);
    assert_string_equal(h, "dea356a2cddd90c7a7ecedc5ebb563934f460452");
}

static void test_base64_rfc4648(void **state)
{
    (void)state;
    static const char *const in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const want[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                       "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (size_t i = 0; i < 7; i++) {
        char out[16];
        sp_base64_write(out, in[i], strlen(in[i]));
        assert_string_equal(out, want[i]);
    }
}

static void test_accept_rfc6455(void **state)
{
    (void)state;
    char acc[29];
    /* RFC 6455 section 1.3's example. */
    sp_ws_accept_for(acc, "dGhlIHNhbXBsZSBub25jZQ==");
    assert_string_equal(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    char k1[25], k2[25];
    assert_int_equal(sp_ws_make_key(k1, NULL), 0);
    assert_int_equal(sp_ws_make_key(k2, NULL), 0);
    assert_int_equal(strlen(k1), 24);
    assert_string_equal(k1 + 22, "==");
    assert_string_not_equal(k1, k2);
}

/* ------------------------------------------------------------ encoder -- */

static void test_encode_rfc_example(void **state)
{
    (void)state;
    /* RFC 6455 section 5.7: a masked "Hello". */
    static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
    static const uint8_t want[] = {0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d,
                                   0x7f, 0x9f, 0x4d, 0x51, 0x58};
    sp_buf b = SP_BUF_INIT;
    sp_ws_encode_masked(&b, SP_WS_TEXT, true, "Hello", 5, mask);
    assert_int_equal(b.len, sizeof(want));
    assert_memory_equal(b.data, want, sizeof(want));
    sp_buf_dispose(&b);
}

static void test_encode_lengths(void **state)
{
    (void)state;
    static const struct {
        size_t len, hdr;
        uint8_t b1;
    } cases[] = {{0, 6, 0x80},
                 {125, 6, 0x80 | 125},
                 {126, 8, 0x80 | 126},
                 {65535, 8, 0x80 | 126},
                 {65536, 14, 0x80 | 127}};
    uint8_t *payload = sp_xcalloc(1, 65536);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sp_buf b = SP_BUF_INIT;
        assert_int_equal(sp_ws_encode(&b, SP_WS_BINARY, true, payload, cases[i].len, NULL), 0);
        assert_int_equal(b.len, cases[i].hdr + cases[i].len);
        const uint8_t *f = (const uint8_t *)b.data;
        assert_int_equal(f[0], 0x82);
        assert_int_equal(f[1], cases[i].b1); /* always masked */
        /* The payload unmasks back to the zeros it was. */
        const uint8_t *m = f + cases[i].hdr - 4;
        for (size_t j = 0; j < cases[i].len; j++)
            assert_int_equal(f[cases[i].hdr + j] ^ m[j & 3], 0);
        sp_buf_dispose(&b);
    }
    free(payload);
    /* Two frames get different masks (a collision is 2^-32). */
    sp_buf a = SP_BUF_INIT, c = SP_BUF_INIT;
    sp_ws_encode(&a, SP_WS_TEXT, true, "x", 1, NULL);
    sp_ws_encode(&c, SP_WS_TEXT, true, "x", 1, NULL);
    assert_memory_not_equal(a.data + 2, c.data + 2, 4);
    sp_buf_dispose(&a);
    sp_buf_dispose(&c);
}

static void test_encode_refuses(void **state)
{
    (void)state;
    sp_buf b = SP_BUF_INIT;
    sp_error *err = NULL;
    char big[126] = {0};
    assert_int_equal(sp_ws_encode(&b, SP_WS_PING, true, big, 126, &err), SP_EINVAL);
    assert_int_equal(sp_ws_encode(&b, SP_WS_CLOSE, false, big, 2, &err), SP_EINVAL);
    assert_int_equal(sp_ws_encode(&b, 3, true, big, 2, &err), SP_EINVAL);
    assert_int_equal(b.len, 0);
    sp_error_free(err);
    sp_buf_dispose(&b);
}

/* ------------------------------------------------------------ decoder -- */

/* Decode all of in, fed in chunks of `step` bytes; the messages found are
 * appended to log as "opcode:payload|" (close: "8:code:reason|"). Returns
 * the first error code (0 if none); *fail gets the decoder's close code. */
static int decode_all(sp_buf *log, const void *in, size_t len, size_t step, size_t max, int *fail,
                      char **msg)
{
    sp_ws_decoder d;
    sp_ws_decoder_init(&d, max);
    const uint8_t *p = in;
    size_t off = 0;
    int rc = 0;
    while (off < len && rc >= 0) {
        size_t n = len - off < step ? len - off : step;
        size_t pos = 0;
        while (pos < n) {
            size_t used = 0;
            sp_ws_msg m;
            sp_error *err = NULL;
            rc = sp_ws_decode(&d, p + off + pos, n - pos, &used, &m, &err);
            assert_true(used <= n - pos);
            pos += used;
            if (rc < 0) {
                assert_non_null(err);
                assert_null(strchr(err->message, '\n'));
                if (msg)
                    *msg = sp_xstrdup(err->message);
                sp_error_free(err);
                break;
            }
            if (rc == 0) {
                assert_int_equal(pos, n);
                break;
            }
            if (m.opcode == SP_WS_CLOSE)
                sp_buf_printf(log, "8:%u:%.*s|", m.close_code, (int)m.reason_len, m.reason);
            else
                sp_buf_printf(log, "%d:%.*s|", m.opcode, (int)m.len, (const char *)m.data);
        }
        off += n;
    }
    *fail = d.fail_code;
    sp_ws_decoder_dispose(&d);
    return rc < 0 ? rc : 0;
}

/* Every chunking gives the same messages. */
static void expect_msgs(const void *in, size_t len, const char *want)
{
    static const size_t steps[] = {1, 2, 3, 7, 64, 1 << 20};
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        sp_buf log = SP_BUF_INIT;
        int fail = 0;
        assert_int_equal(decode_all(&log, in, len, steps[i], 0, &fail, NULL), 0);
        assert_string_equal(log.data ? log.data : "", want);
        sp_buf_dispose(&log);
    }
}

static void expect_error(const void *in, size_t len, int code, int close_code, const char *needle)
{
    static const size_t steps[] = {1, 5, 1 << 20};
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        sp_buf log = SP_BUF_INIT;
        int fail = 0;
        char *msg = NULL;
        assert_int_equal(decode_all(&log, in, len, steps[i], 64, &fail, &msg), code);
        assert_int_equal(fail, close_code);
        assert_non_null(msg);
        if (!strstr(msg, needle))
            fail_msg("\"%s\" does not say \"%s\"", msg, needle);
        free(msg);
        sp_buf_dispose(&log);
    }
}

#define B(...) ((const uint8_t[]){__VA_ARGS__}), sizeof((const uint8_t[]){__VA_ARGS__})

static void test_decode_rfc_examples(void **state)
{
    (void)state;
    /* RFC 6455 section 5.7. */
    expect_msgs(B(0x81, 0x05, 'H', 'e', 'l', 'l', 'o'), "1:Hello|");
    expect_msgs(B(0x01, 0x03, 'H', 'e', 'l', 0x80, 0x02, 'l', 'o'), "1:Hello|");
    expect_msgs(B(0x89, 0x05, 'H', 'e', 'l', 'l', 'o'), "9:Hello|");
    expect_msgs(B(0x8a, 0x05, 'H', 'e', 'l', 'l', 'o'), "10:Hello|");
    /* A ping between two fragments comes first; the message is whole. */
    expect_msgs(B(0x01, 0x03, 'H', 'e', 'l', 0x89, 0x01, '!', 0x80, 0x02, 'l', 'o'),
                "9:!|1:Hello|");
    /* Empty messages and frames. */
    expect_msgs(B(0x82, 0x00, 0x01, 0x00, 0x00, 0x00, 0x80, 0x01, 'x'), "2:|1:x|");
    /* A UTF-8 character split across two fragments is fine. */
    expect_msgs(B(0x01, 0x01, 0xc3, 0x80, 0x01, 0xa9), "1:\xc3\xa9|");
    /* Close with a code and reason; a close without a payload. */
    expect_msgs(B(0x88, 0x05, 0x03, 0xe8, 'b', 'y', 'e'), "8:1000:bye|");
    expect_msgs(B(0x88, 0x00), "8:1005:|");
}

static void test_decode_lengths(void **state)
{
    (void)state;
    /* 256 bytes with a 16-bit length and 65536 with a 64-bit one (5.7). */
    for (size_t n = 256; n <= 65536; n += 65536 - 256) {
        size_t hl = n < 65536 ? 4 : 10;
        uint8_t *f = sp_xcalloc(1, hl + n);
        f[0] = 0x82;
        if (hl == 4) {
            f[1] = 126;
            f[2] = (uint8_t)(n >> 8);
            f[3] = (uint8_t)n;
        } else {
            f[1] = 127;
            f[7] = 0x01; /* 0x0000000000010000 */
        }
        memset(f + hl, 'z', n);
        sp_ws_decoder d;
        sp_ws_decoder_init(&d, 0);
        size_t used;
        sp_ws_msg m;
        assert_int_equal(sp_ws_decode(&d, f, hl + n, &used, &m, NULL), 1);
        assert_int_equal(used, hl + n);
        assert_int_equal(m.opcode, SP_WS_BINARY);
        assert_int_equal(m.len, n);
        assert_int_equal(m.data[n - 1], 'z');
        sp_ws_decoder_dispose(&d);
        free(f);
    }
}

static void test_decode_two_messages_one_chunk(void **state)
{
    (void)state;
    static const uint8_t in[] = {0x81, 0x01, 'a', 0x82, 0x01, 'b'};
    sp_ws_decoder d;
    sp_ws_decoder_init(&d, 0);
    size_t used;
    sp_ws_msg m;
    assert_int_equal(sp_ws_decode(&d, in, sizeof(in), &used, &m, NULL), 1);
    assert_int_equal(used, 3);
    assert_int_equal(m.opcode, SP_WS_TEXT);
    assert_int_equal(sp_ws_decode(&d, in + 3, 3, &used, &m, NULL), 1);
    assert_int_equal(m.opcode, SP_WS_BINARY);
    assert_int_equal(m.len, 1);
    assert_int_equal(m.data[0], 'b');
    assert_int_equal(sp_ws_decode(&d, in, 0, &used, &m, NULL), 0);
    sp_ws_decoder_dispose(&d);
}

static void test_decode_errors(void **state)
{
    (void)state;
    expect_error(B(0xc1, 0x00), SP_ERROR, SP_WS_CLOSE_PROTOCOL, "reserved bits"); /* RSV1 */
    expect_error(B(0xa1, 0x00), SP_ERROR, SP_WS_CLOSE_PROTOCOL, "reserved bits"); /* RSV2 */
    expect_error(B(0x91, 0x00), SP_ERROR, SP_WS_CLOSE_PROTOCOL, "reserved bits"); /* RSV3 */
    expect_error(B(0x83, 0x00), SP_ERROR, SP_WS_CLOSE_PROTOCOL, "reserved opcode");
    expect_error(B(0x8b, 0x00), SP_ERROR, SP_WS_CLOSE_PROTOCOL, "reserved opcode");
    expect_error(B(0x81, 0x81, 1, 2, 3, 4, 'x'), SP_ERROR, SP_WS_CLOSE_PROTOCOL, "masked");
    expect_error(B(0x09, 0x00), SP_ERROR, SP_WS_CLOSE_PROTOCOL, "fragmented control");
    expect_error(B(0x89, 0x7e, 0x00, 0x7e), SP_ERROR, SP_WS_CLOSE_PROTOCOL, "125");
    expect_error(B(0x80, 0x01, 'x'), SP_ERROR, SP_WS_CLOSE_PROTOCOL, "continuation");
    expect_error(B(0x01, 0x01, 'x', 0x81, 0x01, 'y'), SP_ERROR, SP_WS_CLOSE_PROTOCOL,
                 "inside a fragmented");
    expect_error(B(0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 1), SP_ERROR, SP_WS_CLOSE_PROTOCOL,
                 "top bit");
    /* The limit in these tests is 64 bytes: one frame over it, and fragments
     * that only add up to more. */
    expect_error(B(0x82, 0x41), SP_ETOOBIG, SP_WS_CLOSE_TOO_BIG, "limit");
    expect_error(B(0x82, 0x7f, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), SP_ETOOBIG,
                 SP_WS_CLOSE_TOO_BIG, "limit");
    uint8_t frag[2 + 40 + 2 + 30];
    memset(frag, 'a', sizeof(frag));
    frag[0] = 0x02;
    frag[1] = 40;
    frag[42] = 0x80;
    frag[43] = 30;
    expect_error(frag, sizeof(frag), SP_ETOOBIG, SP_WS_CLOSE_TOO_BIG, "limit");
    /* Text that is not UTF-8: an overlong, a lone continuation, a
     * surrogate, and a character cut off at the end of the message. */
    expect_error(B(0x81, 0x02, 0xc0, 0xaf), SP_ERROR, SP_WS_CLOSE_BAD_DATA, "UTF-8");
    expect_error(B(0x81, 0x01, 0x80), SP_ERROR, SP_WS_CLOSE_BAD_DATA, "UTF-8");
    expect_error(B(0x81, 0x03, 0xed, 0xa0, 0x80), SP_ERROR, SP_WS_CLOSE_BAD_DATA, "UTF-8");
    expect_error(B(0x01, 0x01, 'a', 0x80, 0x01, 0xc3), SP_ERROR, SP_WS_CLOSE_BAD_DATA, "UTF-8");
    /* Close frames: one byte, codes never sent on the wire, a bad reason. */
    expect_error(B(0x88, 0x01, 0x03), SP_ERROR, SP_WS_CLOSE_PROTOCOL, "one-byte");
    expect_error(B(0x88, 0x02, 0x03, 0xed), SP_ERROR, SP_WS_CLOSE_PROTOCOL,
                 "invalid code"); /* 1005 */
    expect_error(B(0x88, 0x02, 0x03, 0xee), SP_ERROR, SP_WS_CLOSE_PROTOCOL,
                 "invalid code"); /* 1006 */
    expect_error(B(0x88, 0x02, 0x03, 0xec), SP_ERROR, SP_WS_CLOSE_PROTOCOL,
                 "invalid code"); /* 1004 */
    expect_error(B(0x88, 0x02, 0x03, 0xe7), SP_ERROR, SP_WS_CLOSE_PROTOCOL,
                 "invalid code"); /* 999 */
    expect_error(B(0x88, 0x02, 0x13, 0x88), SP_ERROR, SP_WS_CLOSE_PROTOCOL,
                 "invalid code"); /* 5000 */
    expect_error(B(0x88, 0x03, 0x03, 0xe8, 0xff), SP_ERROR, SP_WS_CLOSE_BAD_DATA, "UTF-8");
    /* Nothing may follow a close. */
    expect_error(B(0x88, 0x00, 0x81, 0x00), SP_ERROR, SP_WS_CLOSE_PROTOCOL, "after the close");
}

static void test_decode_close_codes(void **state)
{
    (void)state;
    assert_true(sp_ws_close_code_valid(1000));
    assert_true(sp_ws_close_code_valid(1011));
    assert_true(sp_ws_close_code_valid(3000));
    assert_true(sp_ws_close_code_valid(4999));
    assert_false(sp_ws_close_code_valid(0));
    assert_false(sp_ws_close_code_valid(1015));
    assert_false(sp_ws_close_code_valid(2999));
    expect_msgs(B(0x88, 0x02, 0x0f, 0xa1), "8:4001:|");
}

static void test_decode_stops_after_error(void **state)
{
    (void)state;
    sp_ws_decoder d;
    sp_ws_decoder_init(&d, 0);
    size_t used;
    sp_ws_msg m;
    sp_error *err = NULL;
    static const uint8_t bad[] = {0xc1, 0x00}, good[] = {0x81, 0x00};
    assert_int_equal(sp_ws_decode(&d, bad, 2, &used, &m, &err), SP_ERROR);
    assert_int_equal(sp_ws_decode(&d, good, 2, &used, &m, &err), SP_ERROR);
    assert_non_null(strstr(err->message, "already failed"));
    sp_error_free(err);
    sp_ws_decoder_dispose(&d);
}

/* -------------------------------------------------------- exec channels -- */

static void test_exec_split(void **state)
{
    (void)state;
    int ch;
    const uint8_t *p;
    size_t n;
    sp_error *err = NULL;
    assert_int_equal(sp_kube_exec_split(&ch, &p, &n, B(1, 'h', 'i'), NULL), 0);
    assert_int_equal(ch, SP_KUBE_STDOUT);
    assert_int_equal(n, 2);
    assert_memory_equal(p, "hi", 2);
    assert_int_equal(sp_kube_exec_split(&ch, &p, &n, B(2), NULL), 0);
    assert_int_equal(ch, SP_KUBE_STDERR);
    assert_int_equal(n, 0);
    assert_int_equal(sp_kube_exec_split(&ch, &p, &n, B(3, '{', '}'), NULL), 0);
    assert_int_equal(ch, SP_KUBE_STATUS);
    assert_int_equal(sp_kube_exec_split(&ch, &p, &n, (const uint8_t *)"", 0, &err), SP_ERROR);
    assert_non_null(strstr(err->message, "channel byte"));
    assert_int_equal(sp_kube_exec_split(&ch, &p, &n, B(0, 'x'), &err), SP_ERROR);
    assert_int_equal(sp_kube_exec_split(&ch, &p, &n, B(4, 'x'), &err), SP_ERROR);
    assert_int_equal(sp_kube_exec_split(&ch, &p, &n, B(255, 0), &err), SP_ERROR);
    assert_non_null(strstr(err->message, "channel 255"));
    sp_error_free(err);
}

static int status_of(const char *json, char **msg)
{
    int code = -2;
    sp_error *err = NULL;
    int rc = sp_kube_exec_status(&code, json, strlen(json), &err);
    if (rc < 0) {
        assert_int_equal(rc, SP_ERROR);
        assert_null(strchr(err->message, '\n'));
        if (msg)
            *msg = sp_xstrdup(err->message);
        sp_error_free(err);
        return rc;
    }
    return code;
}

static void test_exec_status(void **state)
{
    (void)state;
    assert_int_equal(status_of("{\"metadata\":{},\"status\":\"Success\"}", NULL), 0);
    /* What the kubelet sends for `sh -c 'exit 137'`. */
    assert_int_equal(
        status_of("{\"metadata\":{},\"status\":\"Failure\",\"message\":\"command terminated "
                  "with non-zero exit code: error executing command [sh -c exit 137], exit "
                  "code 137\",\"reason\":\"NonZeroExitCode\",\"details\":{\"causes\":[{"
                  "\"reason\":\"ExitCode\",\"message\":\"137\"}]}}",
                  NULL),
        137);
    assert_int_equal(status_of("{\"status\":\"Failure\",\"details\":{\"causes\":[{\"reason\":"
                               "\"Other\",\"message\":\"9\"},{\"reason\":\"ExitCode\","
                               "\"message\":\"3\"}]}}",
                               NULL),
                     3);
    char *msg = NULL;
    assert_int_equal(status_of("{\"status\":\"Failure\",\"message\":\"container not "
                               "found\\n(\\\"peer\\\")\",\"reason\":\"NotFound\"}",
                               &msg),
                     SP_ERROR);
    assert_string_equal(msg, "kubernetes exec: container not found (\"peer\")");
    free(msg);
    static const char *const bad[] = {
        "",
        "not json",
        "[]",
        "{}",
        "{\"status\":1}",
        "{\"status\":\"Maybe\"}",
        "{\"status\":\"Failure\",\"details\":{\"causes\":[{\"reason\":\"ExitCode\",\"message\":"
        "\"256\"}]}}",
        "{\"status\":\"Failure\",\"details\":{\"causes\":[{\"reason\":\"ExitCode\",\"message\":"
        "\"-1\"}]}}",
        "{\"status\":\"Failure\",\"details\":{\"causes\":[{\"reason\":\"ExitCode\",\"message\":"
        "\"1e2\"}]}}",
        "{\"status\":\"Failure\",\"details\":{\"causes\":[{\"reason\":\"ExitCode\"}]}}",
        "{\"status\":\"Failure\",\"details\":{\"causes\":{}}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(status_of(bad[i], NULL), SP_ERROR);
}

/* ---------------------------------------------- handshake (socketpair) -- */

/* The far end of a socketpair, in a thread: reads the request, answers
 * with `answer` ("{ACCEPT}" replaced by the right Sec-WebSocket-Accept),
 * then sends `after`, then reads what the client sends for a moment. */
typedef struct canned {
    int fd;
    const char *answer;
    const uint8_t *after;
    size_t after_len;
    bool hang_up; /* close right after reading the request */
    char request[4096];
    uint8_t got[256]; /* what came after the request */
    size_t got_len;
    pthread_t th; /* the server thread: joined by canned_end() */
    bool running;
} canned;

static void *serve_canned(void *arg)
{
    canned *c = arg;
    size_t n = 0;
    while (n < sizeof(c->request) - 1 && !strstr(c->request, "\r\n\r\n")) {
        ssize_t r = read(c->fd, c->request + n, sizeof(c->request) - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        c->request[n] = '\0';
    }
    if (c->hang_up) {
        close(c->fd);
        return NULL;
    }
    if (c->answer) {
        char acc[29] = "";
        const char *k = strstr(c->request, "Sec-WebSocket-Key: ");
        if (k) {
            char key[25];
            memcpy(key, k + 19, 24);
            key[24] = '\0';
            sp_ws_accept_for(acc, key);
        }
        sp_buf b = SP_BUF_INIT;
        const char *at = strstr(c->answer, "{ACCEPT}");
        if (at) {
            sp_buf_add(&b, c->answer, (size_t)(at - c->answer));
            sp_buf_adds(&b, acc);
            sp_buf_adds(&b, at + 8);
        } else {
            sp_buf_adds(&b, c->answer);
        }
        sp_buf_add(&b, c->after, c->after_len);
        /* No cmocka assert in a thread; a short write shows in the test. */
        if (send(c->fd, b.data, b.len, MSG_NOSIGNAL) != (ssize_t)b.len)
            c->got_len = sizeof(c->got);
        sp_buf_dispose(&b);
    }
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    while (c->got_len < sizeof(c->got) && poll(&p, 1, 500) > 0) {
        ssize_t r = read(c->fd, c->got + c->got_len, sizeof(c->got) - c->got_len);
        if (r <= 0)
            break;
        c->got_len += (size_t)r;
    }
    close(c->fd);
    return NULL;
}

#define OK_HEAD                                                                                    \
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"            \
    "Sec-WebSocket-Accept: {ACCEPT}\r\n"

/* Wait for c's server thread, which ends when the client's end of the
 * socket is closed (sp_ws_free) or after its last read: the canned state
 * lives in the test's frame, so the thread never outlives it. */
static void canned_end(canned *c)
{
    if (c->running) {
        pthread_join(c->th, NULL);
        c->running = false;
    }
}

/* Run a handshake against c; returns its code, the connection in *out
 * (then free it and call canned_end(c)). */
static int handshake_with(canned *c, sp_ws **out, const sp_ws_opts *o, const char *path, char **msg)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    c->fd = sv[1];
    assert_int_equal(pthread_create(&c->th, NULL, serve_canned, c), 0);
    c->running = true;
    sp_error *err = NULL;
    int rc = sp_ws_handshake(out, sp_ws_transport_fd(sv[0]), "example:443", path, o, &err);
    if (rc < 0) {
        assert_null(*out);
        assert_null(strchr(err->message, '\n'));
        if (msg)
            *msg = sp_xstrdup(err->message);
        sp_error_free(err);
    }
    if (*out == NULL || !c->answer)
        canned_end(c);
    return rc;
}

static void expect_refused(const char *answer, int code, const char *needle)
{
    canned c = {.answer = answer};
    sp_ws *ws = NULL;
    char *msg = NULL;
    sp_ws_opts o = SP_WS_OPTS_INIT;
    o.protocols = sp_kube_exec_protocols;
    /* A silent server (no answer) stays for 500 ms: time out before. */
    o.timeout_ms = answer ? 2000 : 200;
    int rc = handshake_with(&c, &ws, &o, "/x", &msg);
    if (rc != code)
        fail_msg("code %d, not %d: %s", rc, code, msg);
    if (!strstr(msg, needle))
        fail_msg("\"%s\" does not say \"%s\"", msg, needle);
    free(msg);
}

static void test_handshake_request_and_early_frame(void **state)
{
    (void)state;
    static const uint8_t frame[] = {0x82, 0x03, 1, 'h', 'i'};
    canned c = {.answer = OK_HEAD "Sec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n",
                .after = frame,
                .after_len = sizeof(frame)};
    sp_ws *ws = NULL;
    sp_ws_opts o = SP_WS_OPTS_INIT;
    o.protocols = sp_kube_exec_protocols;
    o.bearer_token = "tok";
    assert_int_equal(handshake_with(&c, &ws, &o, "/api/v1/exec?command=sh", NULL), 0);
    assert_string_equal(sp_ws_protocol(ws), SP_KUBE_PROTO_V4);
    /* The frame that came in the same packet as the head is not lost. */
    sp_ws_msg m;
    assert_int_equal(sp_ws_recv(ws, &m, 2000, NULL), 0);
    assert_int_equal(m.len, 3);
    assert_memory_equal(m.data, "\x01hi", 3);
    sp_ws_free(ws);
    canned_end(&c);
    const char *r = c.request;
    assert_true(strncmp(r, "GET /api/v1/exec?command=sh HTTP/1.1\r\n", 38) == 0);
    assert_non_null(strstr(r, "\r\nHost: example:443\r\n"));
    assert_non_null(strstr(r, "\r\nUpgrade: websocket\r\n"));
    assert_non_null(strstr(r, "\r\nSec-WebSocket-Version: 13\r\n"));
    assert_non_null(strstr(r, "\r\nAuthorization: Bearer tok\r\n"));
    const char *v5 = strstr(r, "Sec-WebSocket-Protocol: v5.channel.k8s.io\r\n");
    const char *v4 = strstr(r, "Sec-WebSocket-Protocol: v4.channel.k8s.io\r\n");
    assert_true(v5 && v4 && v5 < v4);
}

static void test_handshake_refusals(void **state)
{
    (void)state;
    expect_refused("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", SP_EDENIED,
                   "403 Forbidden");
    expect_refused("HTTP/1.1 401 Unauthorized\r\n\r\n", SP_EDENIED, "401");
    expect_refused("HTTP/1.1 404 Not Found\r\n\r\n", SP_ENOTFOUND, "404");
    expect_refused("HTTP/1.0 101 Switching Protocols\r\n\r\n", SP_ERROR, "HTTP/1.1");
    expect_refused("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Accept: {ACCEPT}\r\nSec-WebSocket-Protocol: "
                   "v5.channel.k8s.io\r\n\r\n",
                   SP_ERROR, "Upgrade: websocket");
    expect_refused("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                   "Sec-WebSocket-Accept: {ACCEPT}\r\n\r\n",
                   SP_ERROR, "Connection: upgrade");
    expect_refused(OK_HEAD "Sec-WebSocket-Protocol: v5.channel.k8s.io\r\n"
                           "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
                   SP_ERROR, "Sec-WebSocket-Accept");
    expect_refused("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: "
                   "Upgrade\r\nSec-WebSocket-Accept: AAAA\r\n\r\n",
                   SP_ERROR, "Sec-WebSocket-Accept");
    expect_refused(OK_HEAD "\r\n", SP_ERROR, "none of the offered subprotocols");
    expect_refused(OK_HEAD "Sec-WebSocket-Protocol: v9.channel.k8s.io\r\n\r\n", SP_ERROR,
                   "not offered: v9.channel.k8s.io");
    expect_refused(OK_HEAD "Sec-WebSocket-Protocol: v5.channel.k8s.io\r\n"
                           "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n",
                   SP_ERROR, "extension");
    expect_refused(NULL, SP_ETIMEOUT, "timed out");
}

static void test_handshake_hang_up_and_bad_input(void **state)
{
    (void)state;
    canned c = {.hang_up = true};
    sp_ws *ws = NULL;
    char *msg = NULL;
    assert_int_equal(handshake_with(&c, &ws, NULL, "/x", &msg), SP_ERROR);
    assert_non_null(strstr(msg, "closed the connection during the handshake"));
    free(msg);
    canned c2 = {.hang_up = true};
    assert_int_equal(handshake_with(&c2, &ws, NULL, "/x\r\nEvil: 1", &msg), SP_EINVAL);
    free(msg);
    /* A subprotocol name too long to record is refused before sending. */
    char longname[80];
    memset(longname, 'p', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    const char *const protos[] = {longname, NULL};
    sp_ws_opts o = SP_WS_OPTS_INIT;
    o.protocols = protos;
    canned c3 = {.hang_up = true};
    assert_int_equal(handshake_with(&c3, &ws, &o, "/x", &msg), SP_EINVAL);
    assert_non_null(strstr(msg, "subprotocol"));
    free(msg);
}

static void test_protocol_error_sends_close(void **state)
{
    (void)state;
    /* A masked frame from the server: recv fails and the client says 1002. */
    static const uint8_t masked[] = {0x81, 0x81, 1, 2, 3, 4, 'x'};
    canned c = {.answer = OK_HEAD "\r\n", .after = masked, .after_len = sizeof(masked)};
    sp_ws *ws = NULL;
    assert_int_equal(handshake_with(&c, &ws, NULL, "/x", NULL), 0);
    sp_ws_msg m;
    sp_error *err = NULL;
    assert_int_equal(sp_ws_recv(ws, &m, 2000, &err), SP_ERROR);
    assert_non_null(strstr(err->message, "masked frame from the server"));
    sp_error_free(err);
    err = NULL;
    /* The connection is closed: no more sends. */
    assert_true(sp_ws_send(ws, SP_WS_TEXT, "x", 1, 0, &err) < 0);
    sp_error_free(err);
    sp_ws_free(ws);
    canned_end(&c);                 /* it has read all the client sent, the close frame too */
    assert_int_equal(c.got_len, 8); /* 0x88, 0x82, mask, 2 bytes */
    assert_int_equal(c.got[0], 0x88);
    assert_int_equal(c.got[1], 0x82);
    assert_int_equal((c.got[6] ^ c.got[2]) << 8 | (c.got[7] ^ c.got[3]), 1002);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha1_rfc3174),
        cmocka_unit_test(test_base64_rfc4648),
        cmocka_unit_test(test_accept_rfc6455),
        cmocka_unit_test(test_encode_rfc_example),
        cmocka_unit_test(test_encode_lengths),
        cmocka_unit_test(test_encode_refuses),
        cmocka_unit_test(test_decode_rfc_examples),
        cmocka_unit_test(test_decode_lengths),
        cmocka_unit_test(test_decode_two_messages_one_chunk),
        cmocka_unit_test(test_decode_errors),
        cmocka_unit_test(test_decode_close_codes),
        cmocka_unit_test(test_decode_stops_after_error),
        cmocka_unit_test(test_exec_split),
        cmocka_unit_test(test_exec_status),
        cmocka_unit_test(test_handshake_request_and_early_frame),
        cmocka_unit_test(test_handshake_refusals),
        cmocka_unit_test(test_handshake_hang_up_and_bad_input),
        cmocka_unit_test(test_protocol_error_sends_close),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
