/* The required literal of a grep pattern (see grep_literal.h).
 *
 * A scan of PCRE2's syntax that understands only what it must to be sure:
 * literal characters, escaped punctuation, \Q...\E, the common class
 * escapes, bracket classes, plain and (?: groups, and quantifiers. Any
 * other construct gives up. A run of literal characters is cut wherever
 * something else stands between two of them, so every run kept is a
 * substring of every match; an optional atom or group adds nothing, and an
 * alternation empties what its level found. */
#include "grep_literal.h"

#include <string.h>

/* Deeper nesting gives up rather than recursing on. */
#define LIT_MAX_DEPTH 32

typedef struct lit_scan {
    const char *p; /* next pattern byte */
    bool caseless;
    bool bail; /* something not understood: no literal at all */
} lit_scan;

/* One sequence (the pattern, or a group's inside): the run of literal
 * bytes that ends where the scan is, and the longest run kept so far. */
typedef struct lit_seq {
    sp_buf run;
    sp_buf best;
} lit_seq;

static void seq_dispose(lit_seq *q)
{
    sp_buf_dispose(&q->run);
    sp_buf_dispose(&q->best);
}

static void keep(lit_seq *q, const char *data, size_t len)
{
    if (len > q->best.len) {
        q->best.len = 0;
        sp_buf_add(&q->best, data, len);
    }
}

static void end_run(lit_seq *q)
{
    keep(q, q->run.data, q->run.len);
    q->run.len = 0;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_alnum(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Bytes of the UTF-8 character that starts with `c`; 0 for a byte that
 * cannot start one (PCRE2 refuses such a pattern in UTF mode anyway). */
static size_t u8_len(unsigned char c)
{
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0)
        return 2;
    if ((c & 0xf0) == 0xe0)
        return 3;
    if ((c & 0xf8) == 0xf0)
        return 4;
    return 0;
}

/* The quantifier at the scan position: its minimum count, or -1 when
 * there is none. Moves past it and a lazy or possessive mark. A '{' that
 * is not a quantifier PCRE2 10.42 reads the same way ({n}, {n,}, {n,m})
 * gives up: versions differ on `{,n}`. */
static long quantifier(lit_scan *s)
{
    const char *p = s->p;
    long min;
    if (*p == '?' || *p == '*') {
        min = 0;
        p++;
    } else if (*p == '+') {
        min = 1;
        p++;
    } else if (*p == '{') {
        p++;
        if (!is_digit(*p)) {
            s->bail = true;
            return -1;
        }
        min = 0;
        while (is_digit(*p)) {
            if (min < 100000)
                min = min * 10 + (*p - '0');
            p++;
        }
        if (*p == ',') {
            p++;
            while (is_digit(*p))
                p++;
        }
        if (*p != '}') {
            s->bail = true;
            return -1;
        }
        p++;
    } else {
        return -1;
    }
    if (*p == '?' || *p == '+')
        p++;
    s->p = p;
    return min;
}

/* Move past a bracket class, '[' at the scan position. */
static void skip_class(lit_scan *s)
{
    const char *p = s->p + 1;
    if (*p == '^')
        p++;
    if (*p == ']') /* a ']' first is a member */
        p++;
    for (;;) {
        if (*p == '\0') {
            s->bail = true;
            return;
        }
        if (*p == '\\') {
            /* \Q...\E inside a class could hide a ']'. */
            if (p[1] == '\0' || p[1] == 'Q') {
                s->bail = true;
                return;
            }
            p += 2;
            continue;
        }
        if (*p == '[' && p[1] == ':') {
            const char *end = strstr(p + 2, ":]");
            if (!end || memchr(p + 2, ']', (size_t)(end - (p + 2)))) {
                s->bail = true;
                return;
            }
            p = end + 2;
            continue;
        }
        if (*p++ == ']')
            break;
    }
    s->p = p;
}

/* One literal character of `n` bytes, then its quantifier when
 * `quantified` (not inside \Q...\E, where only the last one has one). */
static void add_char(lit_scan *s, lit_seq *q, const char *c, size_t n, bool quantified)
{
    if (n == 1 && c[0] == '\n') {
        s->bail = true; /* the pattern spans lines */
        return;
    }
    /* Ignoring case, a non-ASCII character, k and s have partners that
     * an ASCII-case search would miss. */
    bool usable =
        !(s->caseless && (n > 1 || (unsigned char)c[0] >= 0x80 || memchr("kKsS", c[0], 4)));
    long min = quantified ? quantifier(s) : -1;
    if (!usable || min == 0) {
        end_run(q);
        return;
    }
    sp_buf_add(&q->run, c, n);
    if (min >= 1) /* repeated: what follows is not next to this copy */
        end_run(q);
}

/* \Q...\E (or to the end of the pattern): literal characters; a
 * quantifier after \E applies to the last. */
static void scan_quote(lit_scan *s, lit_seq *q)
{
    const char *p = s->p + 2;
    const char *end = strstr(p, "\\E");
    if (!end)
        end = p + strlen(p);
    s->p = *end ? end + 2 : end;
    while (p < end && !s->bail) {
        size_t n = u8_len((unsigned char)*p);
        if (n == 0 || (size_t)(end - p) < n) {
            s->bail = true;
            return;
        }
        add_char(s, q, p, n, p + n == end);
        p += n;
    }
}

static void scan_seq(lit_scan *s, lit_seq *q, int depth);

/* An escape at the scan position. */
static void scan_escape(lit_scan *s, lit_seq *q)
{
    unsigned char e = (unsigned char)s->p[1];
    char c;
    if (e == '\0') {
        s->bail = true;
        return;
    }
    if (!is_alnum((char)e)) {
        /* Escaped punctuation (or any non-ASCII character): itself. */
        size_t n = u8_len(e);
        if (n == 0 || strnlen(s->p + 1, n) < n) {
            s->bail = true;
            return;
        }
        const char *ch = s->p + 1;
        s->p += 1 + n;
        add_char(s, q, ch, n, true);
        return;
    }
    switch (e) {
    case 'w':
    case 'W':
    case 's':
    case 'S':
    case 'd':
    case 'D':
    case 'h':
    case 'H':
    case 'v':
    case 'V':
    case 'R':
    case 'X':
    case 'b':
    case 'B':
        /* One character of a class, or an assertion: breaks the run. */
        end_run(q);
        s->p += 2;
        quantifier(s);
        return;
    case 'p':
    case 'P':
        end_run(q);
        if (s->p[2] == '{') {
            const char *close = strchr(s->p + 3, '}');
            if (!close) {
                s->bail = true;
                return;
            }
            s->p = close + 1;
        } else if (s->p[2] != '\0') {
            s->p += 3;
        } else {
            s->bail = true;
            return;
        }
        quantifier(s);
        return;
    case 'Q':
        scan_quote(s, q);
        return;
    case 'E': /* a \E without \Q is ignored */
        s->p += 2;
        return;
    case 't':
        c = '\t';
        break;
    case 'e':
        c = '\x1b';
        break;
    case 'f':
        c = '\f';
        break;
    case 'r':
        c = '\r';
        break;
    case 'a':
        c = '\a';
        break;
    default:
        /* \n, \x, \0, \c, \g, \k, backreferences, \A \z \Z \G \K, \N:
         * not worth being sure of. */
        s->bail = true;
        return;
    }
    s->p += 2;
    add_char(s, q, &c, 1, true);
}

/* A group's inside, '(' at the scan position. */
static void scan_group(lit_scan *s, lit_seq *q, int depth)
{
    end_run(q);
    if (s->p[1] == '?') {
        /* Only (?: : lookarounds, inline options (?i), named groups and
         * the rest give up. */
        if (s->p[2] != ':') {
            s->bail = true;
            return;
        }
        s->p += 3;
    } else if (s->p[1] == '*') { /* (*VERB) */
        s->bail = true;
        return;
    } else {
        s->p++;
    }
    if (depth >= LIT_MAX_DEPTH) {
        s->bail = true;
        return;
    }
    lit_seq inner = {SP_BUF_INIT, SP_BUF_INIT};
    scan_seq(s, &inner, depth + 1);
    end_run(&inner);
    long min = quantifier(s);
    if (!s->bail && min != 0)
        keep(q, inner.best.data, inner.best.len);
    seq_dispose(&inner);
}

/* A sequence up to its ')' (depth > 0) or the end of the pattern. */
static void scan_seq(lit_scan *s, lit_seq *q, int depth)
{
    bool alternation = false;
    while (!s->bail) {
        unsigned char c = (unsigned char)*s->p;
        if (c == '\0') {
            if (depth)
                s->bail = true; /* unbalanced: PCRE2 refuses it */
            break;
        }
        if (c == ')') {
            if (!depth)
                s->bail = true;
            else
                s->p++;
            break;
        }
        if (c == '|') {
            alternation = true;
            end_run(q);
            s->p++;
        } else if (c == '(') {
            scan_group(s, q, depth);
        } else if (c == '[') {
            end_run(q);
            skip_class(s);
            if (!s->bail)
                quantifier(s);
        } else if (c == '.' || c == '^' || c == '$') {
            end_run(q);
            s->p++;
            quantifier(s);
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            s->bail = true; /* a quantifier with nothing before it */
        } else if (c == '\\') {
            scan_escape(s, q);
        } else {
            size_t n = u8_len(c);
            if (n == 0 || strnlen(s->p, n) < n) {
                s->bail = true;
                break;
            }
            const char *ch = s->p;
            s->p += n;
            add_char(s, q, ch, n, true);
        }
    }
    end_run(q);
    if (alternation) /* a branch may lack what another holds */
        q->best.len = 0;
}

bool sp_grep_required_literal(sp_buf *out, const char *pattern, bool fixed, bool caseless)
{
    out->len = 0;
    lit_scan s = {pattern, caseless, false};
    lit_seq q = {SP_BUF_INIT, SP_BUF_INIT};
    if (fixed) {
        for (const char *p = pattern; *p && !s.bail; p++)
            add_char(&s, &q, p, 1, false);
        end_run(&q);
    } else {
        scan_seq(&s, &q, 0);
    }
    if (!s.bail && q.best.len)
        sp_buf_add(out, q.best.data, q.best.len);
    seq_dispose(&q);
    return out->len > 0;
}
