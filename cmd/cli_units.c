/* Sizes and times as the CLI reads and prints them. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

int cli_parse_bytes(const char *cmd, const char *what, const char *s, uint64_t *out)
{
    const char *p = s;
    if (*p < '0' || *p > '9')
        goto bad;
    uint64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
            goto range;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    unsigned shift = 0;
    switch (*p) {
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    case 't':
    case 'T':
        shift = 40;
        break;
    }
    if (shift) {
        p++;
        if (*p == 'i' || *p == 'I')
            p++;
        if (*p == 'b' || *p == 'B')
            p++;
        else if (p[-1] == 'i' || p[-1] == 'I')
            goto bad; /* "Ki" without the B */
    } else if (*p == 'b' || *p == 'B') {
        p++;
    }
    if (*p != '\0')
        goto bad;
    if (shift && v > (UINT64_MAX >> shift))
        goto range;
    v <<= shift;
    if (v == 0) {
        cli_usage(cmd, "%s must be more than zero: '%s'", what, s);
        return -1;
    }
    *out = v;
    return 0;
bad:
    cli_usage(cmd, "%s must be a size such as 512M or 2G: '%s'", what, s);
    return -1;
range:
    cli_usage(cmd, "%s is out of range: '%s'", what, s);
    return -1;
}

/* An RFC 3339 UTC time ("2024-05-01T12:00:00Z") in local time for a human;
 * the text as it is when it does not parse. */
void cli_local_time(char *buf, size_t size, const char *rfc3339)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *end = rfc3339 ? strptime(rfc3339, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!end || (*end != 'Z' && *end != '\0')) {
        snprintf(buf, size, "%s", rfc3339 ? rfc3339 : "-");
        return;
    }
    time_t t = timegm(&tm);
    struct tm lt;
    if (!localtime_r(&t, &lt) || strftime(buf, size, "%Y-%m-%d %H:%M", &lt) == 0)
        snprintf(buf, size, "%s", rfc3339);
}
