/* SHA-1 (FIPS 180-4): git object ids (snapshot/) and the WebSocket
 * handshake (kube/). Neither is a security boundary: object ids name what
 * only we write, and Sec-WebSocket-Accept only proves the server speaks
 * WebSocket. */
#include <string.h>

#include "sha1.h"

#define ROL(x, n) (((x) << (n)) | ((x) >> (32 - (n))))

static uint32_t load_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void block(uint32_t h[5], const uint8_t *p)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = load_be32(p + 4 * i);
    for (int i = 16; i < 80; i++)
        w[i] = ROL(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
#define STEP(f, k, i)                                                                              \
    do {                                                                                           \
        uint32_t t = ROL(a, 5) + (f) + e + (k) + w[i];                                             \
        e = d;                                                                                     \
        d = c;                                                                                     \
        c = ROL(b, 30);                                                                            \
        b = a;                                                                                     \
        a = t;                                                                                     \
    } while (0)
    for (int i = 0; i < 20; i++)
        STEP((b & c) | (~b & d), 0x5a827999u, i);
    for (int i = 20; i < 40; i++)
        STEP(b ^ c ^ d, 0x6ed9eba1u, i);
    for (int i = 40; i < 60; i++)
        STEP((b & c) | (b & d) | (c & d), 0x8f1bbcdcu, i);
    for (int i = 60; i < 80; i++)
        STEP(b ^ c ^ d, 0xca62c1d6u, i);
#undef STEP
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

void sp_sha1_init(sp_sha1 *c)
{
    c->h[0] = 0x67452301u;
    c->h[1] = 0xefcdab89u;
    c->h[2] = 0x98badcfeu;
    c->h[3] = 0x10325476u;
    c->h[4] = 0xc3d2e1f0u;
    c->len = 0;
    c->n = 0;
}

void sp_sha1_update(sp_sha1 *c, const void *data, size_t len)
{
    if (len == 0)
        return;
    const uint8_t *p = data;
    c->len += len;
    if (c->n) {
        size_t take = 64 - c->n < len ? 64 - c->n : len;
        memcpy(c->buf + c->n, p, take);
        c->n += take;
        p += take;
        len -= take;
        if (c->n < 64)
            return;
        block(c->h, c->buf);
        c->n = 0;
    }
    while (len >= 64) {
        block(c->h, p);
        p += 64;
        len -= 64;
    }
    memcpy(c->buf, p, len);
    c->n = len;
}

void sp_sha1_final(sp_sha1 *c, uint8_t out[20])
{
    uint64_t bits = c->len * 8;
    uint8_t pad = 0x80;
    sp_sha1_update(c, &pad, 1);
    uint8_t zero = 0;
    while (c->n != 56)
        sp_sha1_update(c, &zero, 1);
    uint8_t lenb[8];
    for (int i = 0; i < 8; i++)
        lenb[i] = (uint8_t)(bits >> (56 - 8 * i));
    sp_sha1_update(c, lenb, 8);
    for (int i = 0; i < 5; i++) {
        out[4 * i] = (uint8_t)(c->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)c->h[i];
    }
}

void sp_base64_write(char *out, const void *data, size_t len)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const uint8_t *p = data;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < len)
            v |= p[i + 2];
        out[o++] = tab[v >> 18 & 63];
        out[o++] = tab[v >> 12 & 63];
        out[o++] = i + 1 < len ? tab[v >> 6 & 63] : '=';
        out[o++] = i + 2 < len ? tab[v & 63] : '=';
    }
    out[o] = '\0';
}
