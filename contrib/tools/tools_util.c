/* Small helpers of the tool suite: allocation, text buffers, string
 * lists, capping a text, quoting. */
#include "tools_core.h"

/* ------------------------------------------------------------ helpers -- */

void tools_oom(void)
{
    fputs("sandpod: out of memory\n", stderr);
    abort();
}

void *tx_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        tools_oom();
    return p;
}

void *tx_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        tools_oom();
    return p;
}

void *tx_realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        tools_oom();
    return q;
}

char *tx_strdup(const char *s)
{
    return tx_strndup(s, strlen(s));
}

char *tx_strndup(const char *s, size_t n)
{
    char *p = tx_malloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *tx_asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        tools_oom();
    return s;
}

static void tb_grow(tbuf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2)
            tools_oom();
        cap *= 2;
    }
    b->data = tx_realloc(b->data, cap);
    b->cap = cap;
}

void tb_add(tbuf *b, const void *data, size_t len)
{
    tb_grow(b, len);
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
}

void tb_adds(tbuf *b, const char *s)
{
    tb_add(b, s, strlen(s));
}

void tb_addc(tbuf *b, char c)
{
    tb_add(b, &c, 1);
}

void tb_printf(tbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        tools_oom();
    tb_add(b, s, (size_t)n);
    free(s);
}

char *tb_steal(tbuf *b)
{
    char *s = b->data ? b->data : tx_strdup("");
    b->data = NULL;
    b->len = b->cap = 0;
    return s;
}

void tb_free(tbuf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void sv_push(strvec *sv, char *owned)
{
    if (sv->n + 2 > sv->cap) {
        sv->cap = sv->cap ? sv->cap * 2 : 8;
        sv->v = tx_realloc(sv->v, sv->cap * sizeof(*sv->v));
    }
    sv->v[sv->n++] = owned;
    sv->v[sv->n] = NULL;
}

void sv_free(strvec *sv)
{
    for (size_t i = 0; i < sv->n; i++)
        free(sv->v[i]);
    free(sv->v);
    memset(sv, 0, sizeof(*sv));
}

bool tools_sv_has(const strvec *sv, const char *s)
{
    for (size_t i = 0; i < sv->n; i++)
        if (strcmp(sv->v[i], s) == 0)
            return true;
    return false;
}

static size_t count_lines(const char *s, size_t len)
{
    size_t n = 0;
    for (const char *p = s; (p = memchr(p, '\n', len - (size_t)(p - s))) != NULL; p++)
        n++;
    return n + (len && s[len - 1] != '\n' ? 1 : 0);
}

/* Back up over UTF-8 continuation bytes so a cut never splits a sequence. */
static size_t utf8_floor(const char *s, size_t len, size_t at)
{
    if (at >= len)
        return len;
    while (at > 0 && ((unsigned char)s[at] & 0xc0) == 0x80)
        at--;
    return at;
}

char *text_cap(const char *s, size_t len, size_t max_bytes, size_t max_lines, size_t *out_len,
               bool *cut)
{
    size_t lines = count_lines(s, len);
    if (len <= max_bytes && lines <= max_lines) {
        *cut = false;
        if (out_len)
            *out_len = len;
        return tx_strndup(s, len);
    }
    *cut = true;
    /* The head: half the bytes and half the lines. */
    size_t hb = max_bytes / 2, hl = max_lines / 2;
    size_t head = utf8_floor(s, len, hb < len ? hb : len);
    size_t nl = 0;
    for (size_t i = 0; i < head; i++) {
        if (s[i] == '\n' && ++nl >= hl) {
            head = i + 1;
            break;
        }
    }
    /* The tail: the other half, from the end. */
    size_t tb = max_bytes - hb, tl = max_lines - hl;
    size_t tail = len - head < tb ? len - head : tb;
    size_t start = len - tail;
    while (start < len && ((unsigned char)s[start] & 0xc0) == 0x80)
        start++;
    nl = 0;
    for (size_t i = len; i > start; i--) {
        if (s[i - 1] == '\n' && i != len && ++nl >= tl) {
            start = i;
            break;
        }
    }
    size_t omitted = start - head;
    size_t omitted_lines = count_lines(s + head, omitted);
    tbuf b = {0};
    tb_add(&b, s, head);
    if (head && s[head - 1] != '\n')
        tb_addc(&b, '\n');
    tb_printf(&b, "[... %zu bytes, %zu lines omitted ...]\n", omitted, omitted_lines);
    tb_add(&b, s + start, len - start);
    if (out_len)
        *out_len = b.len;
    return tb_steal(&b);
}

/* A short, printable quote of untrusted text for a message. */
char *tools_quote(const char *s, size_t len)
{
    size_t n = len > QUOTE_MAX ? utf8_floor(s, len, QUOTE_MAX) : len;
    char *clean = sp_json_sanitize(s, n);
    if (!clean)
        tools_oom();
    if (n < len) {
        char *q = tx_asprintf("%s...", clean);
        free(clean);
        return q;
    }
    return clean;
}

int tools_error(sp_error **err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        sp_error *e = tx_calloc(1, sizeof(*e));
        e->code = code;
        if (vasprintf(&e->message, fmt, ap) < 0)
            tools_oom();
        va_end(ap);
        *err = e;
    }
    return code;
}
