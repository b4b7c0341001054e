/* RFC 6455 framing, client side: encode masked client frames and decode a
 * server's byte stream incrementally. Pure: no I/O, so the fuzzer and the
 * unit tests drive it with arbitrary chunks. Internal to kube/. */
#ifndef SANDPOD_WS_FRAME_H
#define SANDPOD_WS_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

enum {
    SP_WS_CONT = 0x0,
    SP_WS_TEXT = 0x1,
    SP_WS_BINARY = 0x2,
    SP_WS_CLOSE = 0x8,
    SP_WS_PING = 0x9,
    SP_WS_PONG = 0xA,
};

/* Close codes (RFC 6455 section 7.4.1) the client itself sends. */
enum {
    SP_WS_CLOSE_NORMAL = 1000,
    SP_WS_CLOSE_NO_STATUS = 1005, /* received only: a close frame without a code */
    SP_WS_CLOSE_PROTOCOL = 1002,
    SP_WS_CLOSE_BAD_DATA = 1007,
    SP_WS_CLOSE_TOO_BIG = 1009,
};

#define SP_WS_CONTROL_MAX   125u
#define SP_WS_HEADER_MAX    14u
#define SP_WS_DEFAULT_LIMIT (16u * 1024u * 1024u)

/* Append one client frame (masked with a random key from getrandom) to
 * out. Control frames must be FIN with at most 125 payload bytes: anything
 * else is SP_EINVAL (a caller bug), as is an unknown opcode. */
int sp_ws_encode(sp_buf *out, int opcode, bool fin, const void *payload, size_t len,
                 sp_error **err);
/* The same with the masking key given (tests compare with RFC vectors). */
void sp_ws_encode_masked(sp_buf *out, int opcode, bool fin, const void *payload, size_t len,
                         const uint8_t mask[4]);

/* One complete message: a whole (reassembled) text or binary message, or
 * one control frame. data stays valid until the next sp_ws_decode call. */
typedef struct sp_ws_msg {
    int opcode; /* SP_WS_TEXT, SP_WS_BINARY, SP_WS_CLOSE, SP_WS_PING, SP_WS_PONG */
    const uint8_t *data;
    size_t len;
    /* SP_WS_CLOSE only: the code (SP_WS_CLOSE_NO_STATUS when absent) and
     * the UTF-8 reason (not NUL-terminated). */
    uint16_t close_code;
    const char *reason;
    size_t reason_len;
} sp_ws_msg;

typedef struct sp_ws_decoder {
    size_t max_message; /* largest reassembled message accepted */
    /* The frame being read. */
    uint8_t hdr[SP_WS_HEADER_MAX];
    size_t hdr_have, hdr_need;
    bool in_payload; /* the header is complete */
    int opcode;
    bool fin;
    uint64_t left; /* payload bytes of this frame still to come */
    /* A data message being reassembled (opcode 0 when none). */
    int msg_opcode;
    sp_buf msg;
    bool msg_done; /* msg was returned: reset it on the next call */
    uint8_t ctrl[SP_WS_CONTROL_MAX];
    size_t ctrl_len;
    /* After an error, the close code the client should send; the decoder
     * refuses further input. */
    int fail_code;
    bool closed; /* a close frame was decoded: nothing may follow */
} sp_ws_decoder;

/* max_message 0 means SP_WS_DEFAULT_LIMIT. */
void sp_ws_decoder_init(sp_ws_decoder *d, size_t max_message);
void sp_ws_decoder_dispose(sp_ws_decoder *d);

/* Feed data[0..len). Consumes bytes up to the end of the first complete
 * message and returns 1 with it in *out (*consumed says how far it read;
 * call again with the rest), or consumes everything and returns 0 when
 * more bytes are needed. A protocol violation returns a negative code
 * (SP_ETOOBIG for an oversized message, SP_ERROR otherwise) with a
 * one-line message, and sets d->fail_code; every later call fails too. */
int sp_ws_decode(sp_ws_decoder *d, const uint8_t *data, size_t len, size_t *consumed,
                 sp_ws_msg *out, sp_error **err);

/* Whether code may appear in a close frame on the wire (RFC 6455 7.4). */
bool sp_ws_close_code_valid(unsigned code);

#endif
