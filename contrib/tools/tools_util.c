/* Small helpers of the tool suite that base (base.h) has no use for:
 * membership in a string list, quoting untrusted text for a message. */
#include "tools_core.h"

bool tools_sv_has(const sp_strv *sv, const char *s)
{
    for (size_t i = 0; i < sv->n; i++)
        if (strcmp(sv->v[i], s) == 0)
            return true;
    return false;
}

/* A short, printable quote of untrusted text for a message. */
char *tools_quote(const char *s, size_t len)
{
    size_t n = len > QUOTE_MAX ? sp_utf8_cut(s, len, QUOTE_MAX) : len;
    char *clean = sp_json_sanitize(s, n);
    if (!clean)
        abort();
    if (n < len) {
        char *q = sp_xasprintf("%s...", clean);
        free(clean);
        return q;
    }
    return clean;
}
