/* The glob dialect (see glob.h).
 *
 * A pattern is compiled in two steps: braces are expanded into plain
 * alternatives (bounded in count, size and nesting), then every alternative
 * is split into components, each either `**` or a short token list.
 *
 * Matching never backtracks exponentially. Within a component the classic
 * greedy algorithm with one backtrack point (the last `*`) runs in
 * O(name * tokens). Across components the alternative is run as an NFA whose
 * states are component positions: `**` keeps its state and may also be
 * skipped, any other component moves one state on. That is O(segments *
 * components) component matches, however many `**` there are. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "glob.h"

/* The numbers also appear in the messages below. */
#define MAX_ALTERNATIVES 4096
/* Bytes of all expanded alternatives together, and brace nesting depth:
 * both keep a hostile pattern from costing memory or stack. */
#define MAX_EXPANDED_BYTES (8u << 20)
#define MAX_BRACE_DEPTH    64

enum tok_kind { TOK_LIT, TOK_STAR, TOK_ANY, TOK_CLASS };

typedef struct tok {
    enum tok_kind kind;
    bool negated;     /* TOK_CLASS */
    unsigned posix;   /* TOK_CLASS: POSIX_* bits of [:name:] members */
    char *lit;        /* TOK_LIT */
    size_t len;       /* TOK_LIT: bytes; TOK_CLASS: ranges */
    uint32_t *ranges; /* TOK_CLASS: len pairs of inclusive code point ranges */
} tok;

typedef struct comp {
    bool globstar;
    bool dot_lit; /* starts with a literal '.': may match a hidden name */
    tok *toks;
    size_t n;
} comp;

typedef struct alt {
    comp *comps;
    size_t n;
    bool dir_only; /* written with a trailing '/' */
} alt;

struct sp_glob {
    alt *alts;
    size_t n;
    size_t max_comps;
    unsigned flags;
};

/* POSIX character classes, ASCII only: matching must not depend on the
 * process locale. */
enum {
    POSIX_ALPHA = 1u << 0,
    POSIX_DIGIT = 1u << 1,
    POSIX_ALNUM = 1u << 2,
    POSIX_UPPER = 1u << 3,
    POSIX_LOWER = 1u << 4,
    POSIX_SPACE = 1u << 5,
    POSIX_BLANK = 1u << 6,
    POSIX_PUNCT = 1u << 7,
    POSIX_PRINT = 1u << 8,
    POSIX_GRAPH = 1u << 9,
    POSIX_CNTRL = 1u << 10,
    POSIX_XDIGIT = 1u << 11,
};

static const struct {
    const char *name;
    unsigned bit;
} posix_names[] = {
    {"alpha", POSIX_ALPHA}, {"digit", POSIX_DIGIT}, {"alnum", POSIX_ALNUM},
    {"upper", POSIX_UPPER}, {"lower", POSIX_LOWER}, {"space", POSIX_SPACE},
    {"blank", POSIX_BLANK}, {"punct", POSIX_PUNCT}, {"print", POSIX_PRINT},
    {"graph", POSIX_GRAPH}, {"cntrl", POSIX_CNTRL}, {"xdigit", POSIX_XDIGIT},
};

/* The bit of the class named p[0..n), or 0 when there is none. */
static unsigned posix_bit(const char *p, size_t n)
{
    for (size_t i = 0; i < sizeof(posix_names) / sizeof(posix_names[0]); i++)
        if (strlen(posix_names[i].name) == n && memcmp(posix_names[i].name, p, n) == 0)
            return posix_names[i].bit;
    return 0;
}

static bool posix_has(unsigned bits, uint32_t c)
{
    bool upper = c >= 'A' && c <= 'Z', lower = c >= 'a' && c <= 'z';
    bool digit = c >= '0' && c <= '9';
    bool graph = c > 0x20 && c < 0x7f;
    bool xdigit = digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    return ((bits & POSIX_ALPHA) && (upper || lower)) || ((bits & POSIX_DIGIT) && digit) ||
           ((bits & POSIX_ALNUM) && (upper || lower || digit)) || ((bits & POSIX_UPPER) && upper) ||
           ((bits & POSIX_LOWER) && lower) ||
           ((bits & POSIX_SPACE) && (c == ' ' || (c >= '\t' && c <= '\r'))) ||
           ((bits & POSIX_BLANK) && (c == ' ' || c == '\t')) ||
           ((bits & POSIX_PUNCT) && graph && !upper && !lower && !digit) ||
           ((bits & POSIX_PRINT) && (graph || c == ' ')) || ((bits & POSIX_GRAPH) && graph) ||
           ((bits & POSIX_CNTRL) && (c < 0x20 || c == 0x7f)) || ((bits & POSIX_XDIGIT) && xdigit);
}

/* Length of the "[:name:]" at p[j..n), or 0 when none starts there. */
static size_t posix_len(const char *p, size_t j, size_t n)
{
    if (j + 1 >= n || p[j] != '[' || p[j + 1] != ':')
        return 0;
    for (size_t k = j + 2; k + 1 < n && p[k] != '/' && p[k] != ']'; k++)
        if (p[k] == ':' && p[k + 1] == ']')
            return k + 2 - j;
    return 0;
}

/* One segment of a path being matched. */
typedef struct seg {
    const char *s;
    size_t len;
} seg;

/* ------------------------------------------------------------ UTF-8 -- */

/* Decode the code point at s[0..n) (n >= 1). Returns its length in bytes.
 * A byte that does not start a valid sequence stands for itself, mapped
 * above the Unicode range so it never equals a real code point. */
static size_t cp_decode(const char *str, size_t n, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)str;
    unsigned char c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        v = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        v = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        v = c & 0x07;
    } else {
        goto invalid;
    }
    if (n < len)
        goto invalid;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            goto invalid;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10ffff)) ||
        (v >= 0xd800 && v <= 0xdfff))
        goto invalid;
    *cp = v;
    return len;
invalid:
    *cp = 0x110000u + c;
    return 1;
}

/* ---------------------------------------------------------- parsing -- */

/* Index just past the ']' closing the class that opens at p[i] == '[', or
 * 0 when it is not closed within the component. A ']' right after the '['
 * (or after the negation) is literal; '\' escapes inside a class too. */
static size_t class_end(const char *p, size_t i, size_t n)
{
    size_t j = i + 1;
    if (j < n && (p[j] == '!' || p[j] == '^'))
        j++;
    if (j < n && p[j] == ']')
        j++;
    while (j < n) {
        if (p[j] == '/')
            return 0;
        if (p[j] == ']')
            return j + 1;
        size_t pl = posix_len(p, j, n);
        if (pl) {
            j += pl;
            continue;
        }
        if (p[j] == '\\') {
            if (j + 1 >= n || p[j + 1] == '/')
                return 0;
            j++;
        }
        j++;
    }
    return 0;
}

typedef struct expander {
    const char *p;
    size_t n;
    size_t i;
    size_t bytes;
    const char *pattern; /* for messages */
} expander;

/* Every compile error is SP_EINVAL with the pattern quoted, cut so that a
 * hostile pattern cannot bloat the message. */
static int glob_err(sp_error **err, const char *pattern, const char *what)
{
    size_t len = strlen(pattern);
    size_t shown = sp_utf8_cut(pattern, len, 200);
    return sp_err_set(err, SP_EINVAL, 0, "glob %s: %.*s%s", what, (int)shown, pattern,
                      shown < len ? "..." : "");
}

/* Append p[from..to) to every string of `v`. */
static int append_all(expander *x, sp_strv *v, size_t from, size_t to, sp_error **err)
{
    if (from == to)
        return 0;
    size_t add = to - from;
    if (add > MAX_EXPANDED_BYTES / (v->n ? v->n : 1) || x->bytes + add * v->n > MAX_EXPANDED_BYTES)
        return glob_err(err, x->pattern, "expands to more than 8 MiB");
    x->bytes += add * v->n;
    for (size_t k = 0; k < v->n; k++) {
        size_t old = strlen(v->v[k]);
        char *s = sp_xmalloc(old + add + 1);
        memcpy(s, v->v[k], old);
        memcpy(s + old, x->p + from, add);
        s[old + add] = '\0';
        free(v->v[k]);
        v->v[k] = s;
    }
    return 0;
}

static int expand_group(expander *x, unsigned depth, sp_strv *out, sp_error **err);

/* Expand a sequence up to the end of the pattern or, inside a group, up to
 * a ',' or '}' at this level. Escapes and classes are copied verbatim so the
 * component parser sees them unchanged. */
static int expand_seq(expander *x, unsigned depth, sp_strv *out, sp_error **err)
{
    sp_strv acc = {0};
    int rc = 0;
    sp_strv_push(&acc, sp_xstrdup(""));
    size_t lit = x->i;
    while (x->i < x->n) {
        char c = x->p[x->i];
        if (c == '\\') {
            if (x->i + 1 >= x->n) {
                rc = glob_err(err, x->pattern, "ends with a lone '\\'");
                goto done;
            }
            x->i += 2;
        } else if (c == '[') {
            size_t e = class_end(x->p, x->i, x->n);
            if (!e) {
                rc = glob_err(err, x->pattern, "has an unclosed '['");
                goto done;
            }
            x->i = e;
        } else if (c == '{') {
            rc = append_all(x, &acc, lit, x->i, err);
            if (rc < 0)
                goto done;
            sp_strv alts = {0};
            rc = expand_group(x, depth + 1, &alts, err);
            if (rc < 0) {
                sp_strv_dispose(&alts);
                goto done;
            }
            if (acc.n * alts.n > MAX_ALTERNATIVES) {
                sp_strv_dispose(&alts);
                rc = glob_err(err, x->pattern, "expands to more than 4096 alternatives");
                goto done;
            }
            sp_strv prod = {0};
            for (size_t a = 0; a < acc.n && rc == 0; a++) {
                for (size_t b = 0; b < alts.n; b++) {
                    size_t la = strlen(acc.v[a]), lb = strlen(alts.v[b]);
                    if (x->bytes + la + lb > MAX_EXPANDED_BYTES) {
                        rc = glob_err(err, x->pattern, "expands to more than 8 MiB");
                        break;
                    }
                    x->bytes += la + lb;
                    char *s = sp_xmalloc(la + lb + 1);
                    memcpy(s, acc.v[a], la);
                    memcpy(s + la, alts.v[b], lb + 1);
                    sp_strv_push(&prod, s);
                }
            }
            sp_strv_dispose(&alts);
            sp_strv_dispose(&acc);
            acc = prod;
            if (rc < 0)
                goto done;
            lit = x->i;
        } else if (depth > 0 && (c == ',' || c == '}')) {
            break;
        } else {
            x->i++;
        }
    }
    rc = append_all(x, &acc, lit, x->i, err);
    if (rc < 0)
        goto done;
    for (size_t k = 0; k < acc.n; k++) {
        sp_strv_push(out, acc.v[k]);
        acc.v[k] = NULL;
    }
done:
    sp_strv_dispose(&acc);
    return rc;
}

/* x->p[x->i] == '{': expand the alternatives through the matching '}'. */
static int expand_group(expander *x, unsigned depth, sp_strv *out, sp_error **err)
{
    if (depth > MAX_BRACE_DEPTH)
        return glob_err(err, x->pattern, "nests braces more than 64 deep");
    x->i++;
    for (;;) {
        sp_strv one = {0};
        int rc = expand_seq(x, depth, &one, err);
        if (rc == 0 && out->n + one.n > MAX_ALTERNATIVES)
            rc = glob_err(err, x->pattern, "expands to more than 4096 alternatives");
        if (rc < 0) {
            sp_strv_dispose(&one);
            return rc;
        }
        for (size_t k = 0; k < one.n; k++)
            sp_strv_push(out, one.v[k]);
        free(one.v);
        if (x->i >= x->n)
            return glob_err(err, x->pattern, "has an unclosed '{'");
        if (x->p[x->i++] == '}')
            return 0;
    }
}

static void toks_free(tok *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(t[i].lit);
        free(t[i].ranges);
    }
    free(t);
}

static void alt_dispose(alt *a)
{
    for (size_t i = 0; i < a->n; i++)
        toks_free(a->comps[i].toks, a->comps[i].n);
    free(a->comps);
}

/* Read one class member (a code point, maybe escaped) at p[*j]. */
static uint32_t class_cp(const char *p, size_t n, size_t *j)
{
    if (p[*j] == '\\')
        (*j)++;
    uint32_t cp;
    *j += cp_decode(p + *j, n - *j, &cp);
    return cp;
}

/* Parse the class p[i..e) (e just past its ']'), already known closed. A
 * ']' right after the '[' or the negation is a member, never the end. */
static void parse_class(tok *t, const char *p, size_t i, size_t e)
{
    size_t end = e - 1; /* the closing ']' */
    size_t j = i + 1;
    t->kind = TOK_CLASS;
    if (p[j] == '!' || p[j] == '^') {
        t->negated = true;
        j++;
    }
    size_t cap = 4;
    t->ranges = sp_xmalloc(cap * 2 * sizeof(uint32_t));
    while (j < end) {
        size_t pl = posix_len(p, j, end);
        if (pl) {
            /* An unknown name adds nothing, so such a class never matches
             * through it, as in bash. */
            t->posix |= posix_bit(p + j + 2, pl - 4);
            j += pl;
            continue;
        }
        uint32_t lo = class_cp(p, e, &j), hi = lo;
        if (j + 1 < end && p[j] == '-') {
            j++;
            hi = class_cp(p, e, &j);
        }
        if (t->len == cap) {
            cap *= 2;
            t->ranges = sp_xrealloc(t->ranges, cap * 2 * sizeof(uint32_t));
        }
        /* A reversed range matches nothing, as in fnmatch. */
        t->ranges[2 * t->len] = lo;
        t->ranges[2 * t->len + 1] = hi;
        t->len++;
    }
}

static tok *comp_push(comp *c, size_t *cap)
{
    if (c->n == *cap) {
        *cap = *cap ? *cap * 2 : 4;
        c->toks = sp_xrealloc(c->toks, *cap * sizeof(tok));
    }
    tok *t = &c->toks[c->n++];
    memset(t, 0, sizeof(*t));
    return t;
}

static void comp_flush_lit(comp *c, size_t *cap, sp_buf *lit)
{
    if (!lit->len)
        return;
    tok *t = comp_push(c, cap);
    t->kind = TOK_LIT;
    t->len = lit->len;
    t->lit = sp_buf_steal(lit);
}

/* Parse one component p[s..e) (no unescaped '/', classes closed). */
static void parse_comp(comp *c, const char *p, size_t s, size_t e)
{
    if (e - s == 2 && p[s] == '*' && p[s + 1] == '*') {
        c->globstar = true;
        return;
    }
    size_t cap = 0;
    sp_buf lit = SP_BUF_INIT;
    size_t i = s;
    while (i < e) {
        char ch = p[i];
        size_t ce = ch == '[' ? class_end(p, i, e) : 0;
        if (ch == '*' || ch == '?' || ce) {
            comp_flush_lit(c, &cap, &lit);
            if (ch == '*') {
                /* Runs of '*' (a `**` inside a name) are one star. */
                if (!c->n || c->toks[c->n - 1].kind != TOK_STAR)
                    comp_push(c, &cap)->kind = TOK_STAR;
                i++;
            } else if (ch == '?') {
                comp_push(c, &cap)->kind = TOK_ANY;
                i++;
            } else {
                parse_class(comp_push(c, &cap), p, i, ce);
                i = ce;
            }
            continue;
        }
        if (ch == '\\' && i + 1 < e)
            i++;
        sp_buf_addc(&lit, p[i]);
        i++;
    }
    comp_flush_lit(c, &cap, &lit);
    c->dot_lit = c->n && c->toks[0].kind == TOK_LIT && c->toks[0].lit[0] == '.';
}

/* Split an expanded alternative into components. Empty and "." components
 * are dropped: normalized paths never contain them. */
static void parse_alt(alt *a, const char *p)
{
    size_t n = strlen(p), cap = 0;
    size_t i = 0, start = 0;
    a->dir_only = n && p[n - 1] == '/';
    for (;;) {
        bool sep = i >= n;
        size_t next = i + 1;
        if (!sep) {
            if (p[i] == '/') {
                sep = true;
            } else if (p[i] == '\\' && p[i + 1] == '/') {
                /* An escaped '/' is still a separator: no name holds one. */
                sep = true;
                next = i + 2;
            } else if (p[i] == '\\') {
                next = i + 2;
            } else if (p[i] == '[') {
                size_t ce = class_end(p, i, n);
                next = ce ? ce : i + 1;
            }
        }
        if (sep) {
            size_t len = i - start;
            if (len && !(len == 1 && p[start] == '.')) {
                if (a->n == cap) {
                    cap = cap ? cap * 2 : 4;
                    a->comps = sp_xrealloc(a->comps, cap * sizeof(comp));
                }
                comp *c = &a->comps[a->n++];
                memset(c, 0, sizeof(*c));
                parse_comp(c, p, start, i);
            }
            if (i >= n)
                break;
            start = next;
        }
        i = next;
    }
}

int sp_glob_compile(sp_glob **out, const char *pattern, sp_error **err)
{
    return sp_glob_compile_flags(out, pattern, 0, err);
}

int sp_glob_compile_flags(sp_glob **out, const char *pattern, unsigned flags, sp_error **err)
{
    *out = NULL;
    if (!pattern || !*pattern)
        return sp_err_set(err, SP_EINVAL, 0, "glob is empty");
    expander x = {pattern, strlen(pattern), 0, 0, pattern};
    sp_strv alts = {0};
    int rc = expand_seq(&x, 0, &alts, err);
    if (rc < 0) {
        sp_strv_dispose(&alts);
        return rc;
    }
    sp_glob *g = sp_xcalloc(1, sizeof(*g));
    g->flags = flags;
    g->alts = sp_xcalloc(alts.n, sizeof(alt));
    for (size_t k = 0; k < alts.n; k++) {
        parse_alt(&g->alts[k], alts.v[k]);
        if (g->alts[k].n > g->max_comps)
            g->max_comps = g->alts[k].n;
        g->n++;
    }
    sp_strv_dispose(&alts);
    *out = g;
    return 0;
}

void sp_glob_free(sp_glob *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n; i++)
        alt_dispose(&g->alts[i]);
    free(g->alts);
    free(g);
}

/* --------------------------------------------------------- matching -- */

static bool class_has(const tok *t, uint32_t cp)
{
    bool in = t->posix && posix_has(t->posix, cp);
    for (size_t k = 0; k < t->len && !in; k++)
        in = cp >= t->ranges[2 * k] && cp <= t->ranges[2 * k + 1];
    return in != t->negated;
}

/* Try the non-star token t at s[i..n): the bytes it consumes, or 0. */
static size_t tok_step(const tok *t, const char *s, size_t i, size_t n)
{
    if (i >= n)
        return 0;
    uint32_t cp;
    switch (t->kind) {
    case TOK_LIT:
        return n - i >= t->len && memcmp(s + i, t->lit, t->len) == 0 ? t->len : 0;
    case TOK_ANY:
        return cp_decode(s + i, n - i, &cp);
    case TOK_CLASS: {
        size_t len = cp_decode(s + i, n - i, &cp);
        return class_has(t, cp) ? len : 0;
    }
    case TOK_STAR:
        break;
    }
    return 0;
}

/* Match one name against a component's tokens. When a later token fails,
 * only the most recent '*' is retried one code point further: earlier stars
 * never need to, since the later star can absorb whatever they would. */
static bool comp_match(const comp *c, const char *s, size_t n)
{
    size_t ti = 0, si = 0;
    size_t star_ti = SIZE_MAX, star_si = 0;
    while (si < n) {
        if (ti < c->n && c->toks[ti].kind == TOK_STAR) {
            star_ti = ti++;
            star_si = si;
            continue;
        }
        size_t used = ti < c->n ? tok_step(&c->toks[ti], s, si, n) : 0;
        if (used) {
            ti++;
            si += used;
            continue;
        }
        if (star_ti == SIZE_MAX)
            return false;
        uint32_t cp;
        star_si += cp_decode(s + star_si, n - star_si, &cp);
        si = star_si;
        ti = star_ti + 1;
    }
    while (ti < c->n && c->toks[ti].kind == TOK_STAR)
        ti++;
    return ti == c->n;
}

/* Add the states reachable by skipping `**` components. */
static void closure(const alt *a, bool *st)
{
    for (size_t i = 0; i < a->n; i++)
        if (st[i] && a->comps[i].globstar)
            st[i + 1] = true;
}

enum run_mode {
    RUN_FULL,       /* all segments consumed exactly */
    RUN_BELOW,      /* more segments could follow and still match */
    RUN_ANY_PREFIX, /* some non-empty prefix of the segments matches */
};

/* How a path is matched: the entry's type matters for a trailing '/'
 * and for a name followed by '/' in the pattern. */
typedef struct run_in {
    const seg *segs;
    size_t nseg;
    enum run_mode mode;
    bool is_dir;
    bool period;     /* SP_GLOB_PERIOD */
    bool period_git; /* SP_GLOB_PERIOD_GIT */
} run_in;

/* With SP_GLOB_PERIOD a hidden name needs a component that starts with a
 * literal '.', and `**` never crosses one. */
static bool hidden_blocked(const run_in *in, const comp *c, const seg *sg)
{
    if (!sg->len || sg->s[0] != '.' || c->dot_lit)
        return false;
    return in->period || (in->period_git && sg->len == 4 && memcmp(sg->s, ".git", 4) == 0);
}

/* Run one alternative over the segments as an NFA; cur and nxt hold at
 * least a->n + 1 states. */
static bool alt_run(const alt *a, const run_in *in, bool *cur, bool *nxt)
{
    size_t k = a->n;
    /* The last segment was taken by the last component: the path may end
     * in a file. Otherwise a name the pattern follows with '/' ("a/" then a globstar,
     * taking "a") must be a folder, as in bash. */
    bool file_end = false;
    memset(cur, 0, (k + 1) * sizeof(bool));
    cur[0] = true;
    closure(a, cur);
    for (size_t j = 0; j < in->nseg; j++) {
        const seg *sg = &in->segs[j];
        memset(nxt, 0, (k + 1) * sizeof(bool));
        bool any = false;
        file_end = false;
        for (size_t i = 0; i < k; i++) {
            if (!cur[i])
                continue;
            const comp *c = &a->comps[i];
            if (hidden_blocked(in, c, sg))
                continue;
            bool took = false;
            if (c->globstar) {
                nxt[i] = any = took = true;
            } else if (!nxt[i + 1] && comp_match(c, sg->s, sg->len)) {
                nxt[i + 1] = any = took = true;
            }
            if (took && i + 1 == k)
                file_end = true;
        }
        if (!any)
            return false;
        closure(a, nxt);
        bool *t = cur;
        cur = nxt;
        nxt = t;
        if (in->mode == RUN_ANY_PREFIX && cur[k])
            return true;
    }
    switch (in->mode) {
    case RUN_FULL:
        if (!in->is_dir && (a->dir_only || !file_end))
            return false;
        return cur[k];
    case RUN_BELOW:
        for (size_t i = 0; i < k; i++)
            if (cur[i])
                return true;
        return false;
    case RUN_ANY_PREFIX:
        break;
    }
    return false;
}

/* Split a path at '/', dropping empty and "." segments. */
static seg *split_path(const char *path, size_t *nseg)
{
    size_t cap = 1;
    for (const char *p = path; *p; p++)
        cap += *p == '/';
    seg *v = sp_xmalloc(cap * sizeof(seg));
    size_t n = 0;
    const char *p = path;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len && !(len == 1 && p[0] == '.'))
            v[n++] = (seg){p, len};
        if (!slash)
            break;
        p = slash + 1;
    }
    *nseg = n;
    return v;
}

static bool glob_run_typed(const sp_glob *g, const seg *segs, size_t nseg, enum run_mode mode,
                           bool is_dir)
{
    cleanup_free bool *cur = sp_xmalloc((g->max_comps + 1) * sizeof(bool));
    cleanup_free bool *nxt = sp_xmalloc((g->max_comps + 1) * sizeof(bool));
    run_in in = {segs,
                 nseg,
                 mode,
                 is_dir,
                 (g->flags & SP_GLOB_PERIOD) != 0,
                 (g->flags & SP_GLOB_PERIOD_GIT) != 0};
    for (size_t i = 0; i < g->n; i++)
        if (alt_run(&g->alts[i], &in, cur, nxt))
            return true;
    return false;
}

/* Untyped callers (deny lists, hydration, grep globs) get the lenient
 * answer: any entry may be a folder. */
static bool glob_run(const sp_glob *g, const seg *segs, size_t nseg, enum run_mode mode)
{
    return glob_run_typed(g, segs, nseg, mode, true);
}

bool sp_glob_match(const sp_glob *g, const char *path)
{
    return sp_glob_match_entry(g, path, true);
}

bool sp_glob_match_entry(const sp_glob *g, const char *path, bool is_dir)
{
    if (!g || !path)
        return false;
    size_t nseg;
    cleanup_free seg *segs = split_path(path, &nseg);
    return glob_run_typed(g, segs, nseg, RUN_FULL, is_dir);
}

bool sp_glob_could_match_below(const sp_glob *g, const char *dir)
{
    if (!g || !dir)
        return false;
    size_t nseg;
    cleanup_free seg *segs = split_path(dir, &nseg);
    return glob_run(g, segs, nseg, RUN_BELOW);
}

/* ---------------------------------------------------------- globsets -- */

typedef struct set_item {
    sp_glob *g;
    bool any_depth; /* no '/': matches any single name of the path */
} set_item;

struct sp_globset {
    set_item *items;
    size_t n;
};

int sp_globset_compile(sp_globset **out, const char *const *patterns, size_t n, sp_error **err)
{
    *out = NULL;
    sp_globset *s = sp_xcalloc(1, sizeof(*s));
    s->items = sp_xcalloc(n, sizeof(set_item));
    for (size_t i = 0; i < n; i++) {
        const char *p = patterns[i];
        if (!p) {
            sp_globset_free(s);
            return sp_err_set(err, SP_EINVAL, 0, "glob list has a null entry");
        }
        bool anchored = p[0] == '/';
        while (*p == '/')
            p++;
        /* As in gitignore, a trailing '/' does not anchor the pattern. */
        size_t len = strlen(p);
        while (len && p[len - 1] == '/' && !(len >= 2 && p[len - 2] == '\\'))
            len--;
        cleanup_free char *trimmed = sp_xstrndup(p, len);
        int rc = sp_glob_compile(&s->items[s->n].g, trimmed, err);
        if (rc < 0) {
            sp_globset_free(s);
            return rc;
        }
        s->items[s->n].any_depth = !anchored && !strchr(trimmed, '/');
        s->n++;
    }
    *out = s;
    return 0;
}

void sp_globset_free(sp_globset *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        sp_glob_free(s->items[i].g);
    free(s->items);
    free(s);
}

bool sp_globset_match(const sp_globset *s, const char *path)
{
    if (!s || !path || !s->n)
        return false;
    size_t nseg;
    cleanup_free seg *segs = split_path(path, &nseg);
    for (size_t i = 0; i < s->n; i++) {
        const set_item *it = &s->items[i];
        if (it->any_depth) {
            for (size_t j = 0; j < nseg; j++)
                if (glob_run(it->g, &segs[j], 1, RUN_FULL))
                    return true;
        } else if (glob_run(it->g, segs, nseg, RUN_ANY_PREFIX)) {
            return true;
        }
    }
    return false;
}
