/* The little oid helpers (SHA-1 itself is in base/sha1.c).
 *
 * Object ids are names here, not a security boundary: the store is written
 * only by us, outside the container's reach. */
#include <string.h>

#include "snap_internal.h"

void sp_oid_hex(const sp_oid *id, char out[41])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 20; i++) {
        out[2 * i] = hex[id->id[i] >> 4];
        out[2 * i + 1] = hex[id->id[i] & 15];
    }
    out[40] = '\0';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int sp_oid_parse(sp_oid *id, const char *s, size_t len)
{
    if (len != 40)
        return -1;
    for (int i = 0; i < 20; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        id->id[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

bool sp_oid_equal(const sp_oid *a, const sp_oid *b)
{
    return memcmp(a->id, b->id, 20) == 0;
}

bool sp_oid_is_zero(const sp_oid *id)
{
    static const sp_oid zero;
    return memcmp(id->id, zero.id, 20) == 0;
}
