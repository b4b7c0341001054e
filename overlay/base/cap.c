/* Head-and-tail output caps (see sp_capbuf in base.h). */
#include <string.h>

#include "base.h"

void sp_capbuf_init(sp_capbuf *c, size_t max_bytes, size_t max_lines)
{
    memset(c, 0, sizeof(*c));
    c->max_bytes = max_bytes ? max_bytes : SP_CAP_DEFAULT_BYTES;
    c->max_lines = max_lines ? max_lines : SP_CAP_DEFAULT_LINES;
    if (c->max_bytes < 64)
        c->max_bytes = 64;
    if (c->max_lines < 2)
        c->max_lines = 2;
    /* The tail may need everything when the stream turns out to fit whole,
     * so it holds up to the full budget; trimmed to half at the end. */
    c->tail_cap = c->max_bytes;
    c->ring = sp_xmalloc(c->tail_cap);
}

static size_t count_nl(const char *p, size_t n)
{
    size_t k = 0;
    for (const char *e = p + n; (p = memchr(p, '\n', (size_t)(e - p))) != NULL; p++)
        k++;
    return k;
}

static void ring_add(sp_capbuf *c, const char *p, size_t n)
{
    if (n >= c->tail_cap) {
        memcpy(c->ring, p + n - c->tail_cap, c->tail_cap);
        c->ring_pos = 0;
        c->ring_len = c->tail_cap;
        return;
    }
    size_t first = c->tail_cap - c->ring_pos;
    if (first > n)
        first = n;
    memcpy(c->ring + c->ring_pos, p, first);
    memcpy(c->ring, p + first, n - first);
    c->ring_pos = (c->ring_pos + n) % c->tail_cap;
    c->ring_len = c->ring_len + n > c->tail_cap ? c->tail_cap : c->ring_len + n;
}

void sp_capbuf_feed(sp_capbuf *c, const char *data, size_t len)
{
    if (!len)
        return;
    c->total_bytes += len;
    c->total_lines += count_nl(data, len);
    c->last_nl = data[len - 1] == '\n';
    /* The head takes up to half the budget, ending on a line boundary when
     * the line budget is what runs out. */
    size_t hb = c->max_bytes / 2, hl = c->max_lines / 2;
    while (!c->head_full && len) {
        size_t room = hb - c->head.len;
        const char *nl = memchr(data, '\n', len < room ? len : room);
        /* Cut by bytes: never inside a UTF-8 sequence. */
        size_t take = nl ? (size_t)(nl - data) + 1 : sp_utf8_cut(data, len, room);
        sp_buf_add(&c->head, data, take);
        if (nl)
            c->head_lines++;
        data += take;
        len -= take;
        if (c->head.len >= hb || c->head_lines >= hl || take == 0)
            c->head_full = true;
    }
    if (len)
        ring_add(c, data, len);
}

/* len less an incomplete UTF-8 sequence at the end of s (one fed in two
 * pieces when the head filled between them). */
static size_t utf8_complete(const char *s, size_t len)
{
    size_t i = len, k = 0;
    while (i > 0 && k < 3 && ((unsigned char)s[i - 1] & 0xc0) == 0x80) {
        i--;
        k++;
    }
    if (i == 0)
        return len;
    unsigned char lead = (unsigned char)s[i - 1];
    size_t need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
    return need > k + 1 ? i - 1 : len;
}

char *sp_capbuf_text(sp_capbuf *c, size_t *len_out, bool *truncated)
{
    /* Linearize the ring. */
    size_t rl = c->ring_len;
    char *tail = sp_xmalloc(rl + 1);
    size_t start = (c->ring_pos + c->tail_cap - rl) % c->tail_cap;
    size_t first = c->tail_cap - start < rl ? c->tail_cap - start : rl;
    memcpy(tail, c->ring + start, first);
    memcpy(tail + first, c->ring, rl - first);

    uint64_t ring_seen = c->total_bytes - c->head.len;
    size_t tail_lines = count_nl(tail, rl) + (rl && tail[rl - 1] != '\n' ? 1 : 0);
    bool fits = ring_seen == rl && c->head.len + rl <= c->max_bytes &&
                c->head_lines + tail_lines <= c->max_lines;
    sp_buf out = SP_BUF_INIT;
    size_t head_len = fits ? c->head.len : utf8_complete(c->head.data, c->head.len);
    sp_buf_add(&out, c->head.data ? c->head.data : "", head_len);
    if (fits) {
        sp_buf_add(&out, tail, rl);
        *truncated = false;
    } else {
        /* Keep the last half of the budget, in whole lines where the line
         * budget binds, never splitting a UTF-8 sequence. */
        size_t tb = c->max_bytes / 2, tl = c->max_lines - c->max_lines / 2;
        size_t keep = rl < tb ? rl : tb;
        const char *t = tail + rl - keep;
        while (keep && ((unsigned char)*t & 0xc0) == 0x80) {
            t++;
            keep--;
        }
        size_t lines = 0;
        for (size_t i = keep; i > 0; i--) {
            if (t[i - 1] == '\n' && i != keep && ++lines >= tl) {
                t += i;
                keep -= i;
                break;
            }
        }
        uint64_t omitted = c->total_bytes - head_len - keep;
        uint64_t kept_lines = c->head_lines + count_nl(t, keep);
        uint64_t omitted_lines = c->total_lines > kept_lines ? c->total_lines - kept_lines : 0;
        if (out.len && out.data[out.len - 1] != '\n')
            sp_buf_addc(&out, '\n');
        sp_buf_printf(&out, "[... %llu bytes, %llu lines omitted ...]\n",
                      (unsigned long long)omitted, (unsigned long long)omitted_lines);
        sp_buf_add(&out, t, keep);
        *truncated = true;
    }
    free(tail);
    if (len_out)
        *len_out = out.len;
    return out.data ? sp_buf_steal(&out) : sp_xstrdup("");
}

void sp_capbuf_dispose(sp_capbuf *c)
{
    sp_buf_dispose(&c->head);
    free(c->ring);
    c->ring = NULL;
}
