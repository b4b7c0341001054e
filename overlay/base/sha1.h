/* SHA-1 (FIPS 180-4), incremental. Not for anything that must resist a
 * chosen-prefix attacker: git object ids and Sec-WebSocket-Accept. */
#ifndef SANDPOD_SHA1_H
#define SANDPOD_SHA1_H

#include <stddef.h>
#include <stdint.h>

typedef struct sp_sha1 {
    uint32_t h[5];
    uint64_t len;
    uint8_t buf[64];
    size_t n;
} sp_sha1;

void sp_sha1_init(sp_sha1 *c);
void sp_sha1_update(sp_sha1 *c, const void *data, size_t len);
void sp_sha1_final(sp_sha1 *c, uint8_t out[20]);

/* Standard base64 (RFC 4648 section 4, with padding) of data[0..len):
 * writes 4 * ((len + 2) / 3) characters and a NUL to out. */
void sp_base64_write(char *out, const void *data, size_t len);

#endif
