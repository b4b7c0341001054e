/* A repository's git config without its credentials (secrets.h).
 *
 * A small reader of git's config syntax, as config.c in git parses it:
 * `[section]`, `[section "sub"]` (quoted, `\x` stands for x),
 * `[section.sub]` (old form), `key = value` with `"` quoting, the escapes
 * \n \t \b \" \\, a backslash at the end of a line continuing the value,
 * `#` and `;` comments outside quotes, a bare `key` meaning true, "\r\n"
 * read as "\n", a UTF-8 byte order mark at the start. Section and key names
 * compare without case. Lines are copied byte for byte except the ones
 * that carry credentials; what this reader does not model (a key on the
 * same line as its section header, an unknown escape, an unterminated
 * quote, a NUL byte) makes the whole file "cannot parse": the caller then
 * leaves it out rather than copy it raw. */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "secrets.h"

/* ------------------------------------------------------------------ URLs -- */

static bool is_alnum(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_alpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* s[0..n) equals w, ignoring ASCII case. */
static bool eqi(const char *s, size_t n, const char *w)
{
    return strlen(w) == n && strncasecmp(s, w, n) == 0;
}

bool sp_url_strip_userinfo(sp_buf *out, const char *u, size_t n)
{
    const char *sep = memmem(u, n, "://", 3);
    if (sep) {
        size_t s_end = (size_t)(sep - u), s_start = s_end;
        while (s_start > 0 && (is_alnum(u[s_start - 1]) || u[s_start - 1] == '+' ||
                               u[s_start - 1] == '.' || u[s_start - 1] == '-'))
            s_start--;
        size_t a = s_end + 3, b = a, at = SIZE_MAX;
        for (; b < n && u[b] != '/' && u[b] != '?' && u[b] != '#'; b++)
            if (u[b] == '@')
                at = b;
        if (at != SIZE_MAX) {
            const char *scheme = u + s_start;
            size_t sl = s_end - s_start;
            bool password = memchr(u + a, ':', at - a) != NULL;
            bool token = eqi(scheme, sl, "http") || eqi(scheme, sl, "https") ||
                         eqi(scheme, sl, "ftp") || eqi(scheme, sl, "ftps");
            if (password || token) {
                sp_buf_add(out, u, a);
                sp_buf_add(out, u + at + 1, n - at - 1);
                return true;
            }
        }
        sp_buf_add(out, u, n);
        return false;
    }
    /* scp-like, [user@]host:path: the user stays, a password goes. */
    const char *slash = memchr(u, '/', n);
    size_t lim = slash ? (size_t)(slash - u) : n, at = SIZE_MAX;
    for (size_t k = 0; k < lim; k++)
        if (u[k] == '@')
            at = k;
    if (at != SIZE_MAX && memchr(u, ':', at)) {
        sp_buf_add(out, u + at + 1, n - at - 1);
        return true;
    }
    sp_buf_add(out, u, n);
    return false;
}

/* ---------------------------------------------------------------- reader -- */

typedef struct gcp {
    const char *s;
    size_t len, i;
} gcp;

/* The next character, "\r\n" read as '\n'; -1 at the end. */
static int next_c(gcp *p)
{
    if (p->i >= p->len)
        return -1;
    unsigned char c = (unsigned char)p->s[p->i++];
    if (c == '\r' && p->i < p->len && p->s[p->i] == '\n') {
        p->i++;
        return '\n';
    }
    return c;
}

static int peek_c(gcp *p)
{
    size_t save = p->i;
    int c = next_c(p);
    p->i = save;
    return c;
}

/* git's isspace, less the newline. */
static bool is_blank(int c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

static void skip_blanks(gcp *p)
{
    while (is_blank(peek_c(p)))
        next_c(p);
}

/* Past the end of the line (its '\n' included). */
static void skip_line(gcp *p)
{
    int c;
    while ((c = next_c(p)) >= 0 && c != '\n')
        ;
}

/* The line ending of the item that ends at p->i: "\r\n", "\n" or "". */
static const char *eol_of(const gcp *p, size_t start)
{
    if (p->i > start && p->s[p->i - 1] == '\n')
        return p->i - start >= 2 && p->s[p->i - 2] == '\r' ? "\r\n" : "\n";
    return "";
}

/* A value as git reads it (its parse_value()); p is just past the '='.
 * 0, or -1 for an unterminated quote or an unknown escape. */
static int read_value(gcp *p, sp_buf *val)
{
    bool quote = false, comment = false;
    size_t space = 0;
    for (;;) {
        int c = next_c(p);
        if (c < 0 || c == '\n') {
            if (quote)
                return -1;
            return 0;
        }
        if (comment)
            continue;
        if (is_blank(c) && !quote) {
            if (val->len)
                space++;
            continue;
        }
        if (!quote && (c == ';' || c == '#')) {
            comment = true;
            continue;
        }
        for (; space; space--)
            sp_buf_addc(val, ' ');
        if (c == '\\') {
            c = next_c(p);
            switch (c) {
            case -1:
            case '\n':
                continue;
            case 't':
                c = '\t';
                break;
            case 'b':
                c = '\b';
                break;
            case 'n':
                c = '\n';
                break;
            case '\\':
            case '"':
                break;
            default:
                return -1;
            }
            sp_buf_addc(val, (char)c);
            continue;
        }
        if (c == '"') {
            quote = !quote;
            continue;
        }
        sp_buf_addc(val, (char)c);
    }
}

/* A value written so that git reads back exactly v. */
static void put_value(sp_buf *o, const char *v, size_t n)
{
    bool q = n && (v[0] == ' ' || v[n - 1] == ' ');
    for (size_t i = 0; i < n && !q; i++)
        q = strchr("\"\\#;\t\n\b\r", v[i]) != NULL;
    if (!q) {
        sp_buf_add(o, v, n);
        return;
    }
    sp_buf_addc(o, '"');
    for (size_t i = 0; i < n; i++) {
        switch (v[i]) {
        case '"':
            sp_buf_adds(o, "\\\"");
            break;
        case '\\':
            sp_buf_adds(o, "\\\\");
            break;
        case '\n':
            sp_buf_adds(o, "\\n");
            break;
        case '\t':
            sp_buf_adds(o, "\\t");
            break;
        case '\b':
            sp_buf_adds(o, "\\b");
            break;
        default:
            sp_buf_addc(o, v[i]);
        }
    }
    sp_buf_addc(o, '"');
}

static bool url_key(const char *k, size_t n)
{
    return eqi(k, n, "url") || eqi(k, n, "pushurl") || eqi(k, n, "insteadof") ||
           eqi(k, n, "pushinsteadof") || eqi(k, n, "proxy");
}

typedef struct gcs {
    gcp p;
    sp_buf *o;
    bool changed, drop;
    const char *sec; /* the current section's name, up to its first '.' */
    size_t sec_len;
} gcs;

/* A section header; p is just past the '['. */
static int header(gcs *g, size_t start)
{
    gcp *p = &g->p;
    size_t name = p->i;
    int c;
    while ((c = peek_c(p)) >= 0 && (is_alnum(c) || c == '-' || c == '.'))
        next_c(p);
    size_t name_end = p->i;
    if (name_end == name)
        return -1;
    sp_buf sub = SP_BUF_INIT;
    bool has_sub = false;
    int rc = -1;
    c = next_c(p);
    if (is_blank(c)) {
        skip_blanks(p);
        if (next_c(p) != '"')
            goto done;
        sp_buf_add(&sub, "", 0);
        for (;;) {
            c = next_c(p);
            if (c < 0 || c == '\n')
                goto done;
            if (c == '"')
                break;
            if (c == '\\' && ((c = next_c(p)) < 0 || c == '\n'))
                goto done;
            sp_buf_addc(&sub, (char)c);
        }
        has_sub = true;
        c = next_c(p);
    }
    if (c != ']')
        goto done;
    skip_blanks(p);
    c = peek_c(p);
    if (c == '#' || c == ';' || c == '\n')
        skip_line(p);
    else if (c >= 0)
        goto done; /* a key after the header: git reads it, we do not */

    const char *dot = memchr(g->p.s + name, '.', name_end - name);
    g->sec = g->p.s + name;
    g->sec_len = dot ? (size_t)(dot - g->sec) : name_end - name;
    g->drop = eqi(g->sec, g->sec_len, "credential");
    rc = 0;
    if (g->drop) {
        g->changed = true;
        goto done;
    }
    if (has_sub && (eqi(g->sec, g->sec_len, "url") || eqi(g->sec, g->sec_len, "http"))) {
        sp_buf nu = SP_BUF_INIT;
        sp_buf_add(&nu, "", 0);
        if (sp_url_strip_userinfo(&nu, sub.data, sub.len)) {
            g->changed = true;
            sp_buf_add(g->o, p->s + start, name_end - start);
            sp_buf_adds(g->o, " \"");
            for (size_t i = 0; i < nu.len; i++) {
                if (nu.data[i] == '"' || nu.data[i] == '\\')
                    sp_buf_addc(g->o, '\\');
                sp_buf_addc(g->o, nu.data[i]);
            }
            sp_buf_adds(g->o, "\"]");
            sp_buf_adds(g->o, eol_of(p, start));
            sp_buf_dispose(&nu);
            goto done;
        }
        sp_buf_dispose(&nu);
    }
    sp_buf_add(g->o, p->s + start, p->i - start);
done:
    sp_buf_dispose(&sub);
    return rc;
}

/* A `key [= value]` item; p is just past the key's first letter. */
static int key_item(gcs *g, size_t start)
{
    gcp *p = &g->p;
    size_t k = p->i - 1;
    int c;
    while ((c = peek_c(p)) >= 0 && (is_alnum(c) || c == '-'))
        next_c(p);
    size_t kn = p->i - k;
    const char *key = p->s + k;
    skip_blanks(p);
    c = next_c(p);
    size_t vstart = p->i;
    sp_buf val = SP_BUF_INIT;
    sp_buf_add(&val, "", 0);
    bool has_value = false;
    if (c == '#' || c == ';') {
        skip_line(p);
    } else if (c == '=') {
        skip_blanks(p);
        vstart = p->i;
        if (read_value(p, &val) < 0) {
            sp_buf_dispose(&val);
            return -1;
        }
        has_value = true;
    } else if (c >= 0 && c != '\n') {
        sp_buf_dispose(&val);
        return -1;
    }

    bool drop = g->drop || (eqi(g->sec, g->sec_len, "http") && eqi(key, kn, "extraheader")) ||
                (eqi(g->sec, g->sec_len, "sendemail") && eqi(key, kn, "smtppass"));
    if (drop) {
        g->changed = true;
    } else if (has_value && url_key(key, kn)) {
        sp_buf nu = SP_BUF_INIT;
        sp_buf_add(&nu, "", 0);
        if (sp_url_strip_userinfo(&nu, val.data, val.len)) {
            g->changed = true;
            sp_buf_add(g->o, p->s + start, vstart - start);
            put_value(g->o, nu.data, nu.len);
            sp_buf_adds(g->o, eol_of(p, start));
        } else {
            sp_buf_add(g->o, p->s + start, p->i - start);
        }
        sp_buf_dispose(&nu);
    } else {
        sp_buf_add(g->o, p->s + start, p->i - start);
    }
    sp_buf_dispose(&val);
    return 0;
}

int sp_gitconfig_scrub(sp_buf *out, const char *in, size_t len)
{
    if (memchr(in, '\0', len))
        return -1;
    sp_buf o = SP_BUF_INIT;
    sp_buf_add(&o, "", 0);
    gcs g = {.p = {in, len, 0}, .o = &o, .sec = "", .sec_len = 0};
    gcp *p = &g.p;
    if (len >= 3 && memcmp(in, "\xef\xbb\xbf", 3) == 0) {
        sp_buf_add(&o, in, 3);
        p->i = 3;
    }
    int rc = 0;
    while (rc == 0) {
        size_t start = p->i;
        skip_blanks(p);
        int c = next_c(p);
        if (c < 0) {
            if (!g.drop)
                sp_buf_add(&o, in + start, len - start);
            break;
        }
        if (c == '\n' || c == '#' || c == ';') {
            if (c != '\n')
                skip_line(p);
            if (g.drop)
                g.changed = true;
            else
                sp_buf_add(&o, in + start, p->i - start);
        } else if (c == '[') {
            rc = header(&g, start);
        } else if (is_alpha(c)) {
            rc = key_item(&g, start);
        } else {
            rc = -1;
        }
    }
    if (rc < 0 || !g.changed) {
        sp_buf_dispose(&o);
        return rc < 0 ? -1 : 0;
    }
    sp_buf_add(out, o.data, o.len);
    sp_buf_dispose(&o);
    return 1;
}
