/* apply_patch, part 2: one file's new bytes from its old bytes and the
 * chunks or hunks that name it. Pure functions on memory; nothing here
 * touches a filesystem.
 *
 * Lines of the file keep their own endings: context lines are copied from
 * the file, never from the patch, so a leniently matched Codex chunk cannot
 * rewrite the lines it only used as landmarks. */
#include <string.h>

#include "patch_internal.h"

/* Above this many line comparisons, a failed chunk's message goes without
 * the "closest match" search. */
#define HINT_MAX_WORK ((size_t)20 * 1000 * 1000)

/* Longest excerpt of a line quoted in a message. */
#define EXCERPT_BYTES 60

enum { EOL_NONE = 0, EOL_LF = 1, EOL_CRLF = 2 };

typedef struct fline {
    const char *s;
    size_t len;        /* without the line ending */
    unsigned char eol; /* EOL_* */
} fline;

typedef struct key {
    const char *s;
    size_t len;
} key;

void pt_excerpt(sp_buf *b, const char *s, size_t len, size_t max)
{
    size_t n = sp_utf8_cut(s, len, max);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        sp_buf_addc(b, c < 0x20 || c == 0x7f ? '?' : (char)c);
    }
    if (n < len)
        sp_buf_adds(b, "\xe2\x80\xa6"); /* … */
}

size_t pt_count_lines(const char *data, size_t len)
{
    size_t n = 0;
    for (const char *p = data, *end = data + len, *nl; p < end; p = nl + 1) {
        nl = memchr(p, '\n', (size_t)(end - p));
        n++;
        if (!nl)
            break;
    }
    return n;
}

/* Split into lines; with crlf, a "\r\n" ending is recognized as one. */
static fline *split_file(const char *data, size_t len, bool crlf, size_t *n)
{
    size_t cap = 16;
    fline *v = sp_xmalloc(cap * sizeof(fline));
    *n = 0;
    for (const char *p = data, *end = data + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (*n == cap) {
            cap *= 2;
            v = sp_xrealloc(v, cap * sizeof(fline));
        }
        fline *l = &v[(*n)++];
        l->s = p;
        if (!nl) {
            l->len = (size_t)(end - p);
            l->eol = EOL_NONE;
            break;
        }
        l->len = (size_t)(nl - p);
        l->eol = EOL_LF;
        if (crlf && l->len && p[l->len - 1] == '\r') {
            l->len--;
            l->eol = EOL_CRLF;
        }
        p = nl + 1;
    }
    return v;
}

static void put_line(sp_buf *out, const char *s, size_t len, unsigned char eol)
{
    sp_buf_add(out, s, len);
    if (eol == EOL_LF)
        sp_buf_addc(out, '\n');
    else if (eol == EOL_CRLF)
        sp_buf_add(out, "\r\n", 2);
}

/* Lines to write, gathered before the endings are settled. */
typedef struct outv {
    fline *v;
    size_t n, cap;
} outv;

static void out_push(outv *o, const char *s, size_t len, unsigned char eol)
{
    if (o->n == o->cap) {
        o->cap = o->cap ? o->cap * 2 : 64;
        o->v = sp_xrealloc(o->v, o->cap * sizeof(fline));
    }
    o->v[o->n++] = (fline){s, len, eol};
}

/* Every line but the last needs an ending: an old last line that lacked
 * one and is no longer last gets the file's own kind. */
static void out_write(sp_buf *out, const outv *o, unsigned char pref)
{
    sp_buf_add(out, "", 0);
    for (size_t i = 0; i < o->n; i++) {
        unsigned char eol = o->v[i].eol;
        if (eol == EOL_NONE && i + 1 < o->n)
            eol = pref;
        put_line(out, o->v[i].s, o->v[i].len, eol);
    }
}

/* ------------------------------------------------------------ Codex -- */

static bool ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static key rstrip(key k)
{
    while (k.len && ws(k.s[k.len - 1]))
        k.len--;
    return k;
}

static key strip(key k)
{
    k = rstrip(k);
    while (k.len && ws(k.s[0])) {
        k.s++;
        k.len--;
    }
    return k;
}

/* Decode one UTF-8 code point; an invalid byte comes back as itself
 * (above 0x10ffff so that it maps to nothing). */
static uint32_t next_cp(const unsigned char **p, const unsigned char *end)
{
    const unsigned char *s = *p;
    unsigned char c = s[0];
    size_t need = c < 0x80             ? 1
                  : (c & 0xe0) == 0xc0 ? 2
                  : (c & 0xf0) == 0xe0 ? 3
                  : (c & 0xf8) == 0xf0 ? 4
                                       : 0;
    if (need == 0 || (size_t)(end - s) < need || !sp_utf8_valid((const char *)s, need)) {
        *p = s + 1;
        return 0x110000u + c;
    }
    uint32_t cp = need == 1 ? c : need == 2 ? c & 0x1f : need == 3 ? c & 0x0f : c & 0x07;
    for (size_t i = 1; i < need; i++)
        cp = (cp << 6) | (s[i] & 0x3f);
    *p = s + need;
    return cp;
}

/* The ASCII stand-in for typographic punctuation and odd spaces, or 0. */
static char ascii_of(uint32_t cp)
{
    if ((cp >= 0x2010 && cp <= 0x2015) || cp == 0x2212)
        return '-';
    if (cp >= 0x2018 && cp <= 0x201b)
        return '\'';
    if (cp >= 0x201c && cp <= 0x201f)
        return '"';
    if (cp == 0x00a0 || (cp >= 0x2002 && cp <= 0x200a) || cp == 0x202f || cp == 0x205f ||
        cp == 0x3000)
        return ' ';
    return 0;
}

/* Append s with typographic characters made ASCII, then trimmed. */
static void normalize(sp_buf *pool, const char *s, size_t len, key *out)
{
    size_t start = pool->len;
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        const unsigned char *q = p;
        char a = ascii_of(next_cp(&p, end));
        if (a)
            sp_buf_addc(pool, a);
        else
            sp_buf_add(pool, q, (size_t)(p - q));
    }
    /* Offsets, not pointers: the pool may move while it grows. */
    out->s = (const char *)(uintptr_t)start;
    out->len = pool->len - start;
}

/* Keys of a set of lines under the four ways of comparing. */
typedef struct keyset {
    key *k[4];
    sp_buf pool; /* normalized text of pass 3 */
} keyset;

static const key *keys_for(keyset *ks, const key *raw, size_t n, int pass)
{
    if (ks->k[pass])
        return ks->k[pass];
    key *k = sp_xmalloc((n ? n : 1) * sizeof(key));
    if (pass == 3)
        sp_buf_add(&ks->pool, "", 0); /* a real base even if every line is empty */
    for (size_t i = 0; i < n; i++) {
        if (pass == 0)
            k[i] = raw[i];
        else if (pass == 1)
            k[i] = rstrip(raw[i]);
        else if (pass == 2)
            k[i] = strip(raw[i]);
        else
            normalize(&ks->pool, raw[i].s, raw[i].len, &k[i]);
    }
    if (pass == 3)
        for (size_t i = 0; i < n; i++)
            k[i] = strip((key){ks->pool.data + (uintptr_t)k[i].s, k[i].len});
    ks->k[pass] = k;
    return k;
}

static void keyset_dispose(keyset *ks)
{
    for (int i = 0; i < 4; i++)
        free(ks->k[i]);
    sp_buf_dispose(&ks->pool);
    memset(ks, 0, sizeof(*ks));
}

static bool key_eq(key a, key b)
{
    return a.len == b.len && memcmp(a.s, b.s, a.len) == 0;
}

static bool match_at(const key *f, const key *p, size_t np, size_t at)
{
    for (size_t j = 0; j < np; j++)
        if (!key_eq(f[at + j], p[j]))
            return false;
    return true;
}

/* Find pattern p (np lines) in the file at or after `start`, trying each
 * way of comparing in turn over the whole range before the next; with eof,
 * only where it ends the file. */
static bool seek(keyset *fk, const key *fraw, size_t nf, const key *praw, size_t np, size_t start,
                 bool eof, size_t *at)
{
    if (np > nf)
        return false;
    bool found = false;
    keyset pk = {{NULL, NULL, NULL, NULL}, SP_BUF_INIT};
    for (int pass = 0; pass < 4 && !found; pass++) {
        const key *f = keys_for(fk, fraw, nf, pass);
        const key *p = keys_for(&pk, praw, np, pass);
        if (eof) {
            size_t pos = nf - np;
            if (pos >= start && match_at(f, p, np, pos)) {
                *at = pos;
                found = true;
            }
            continue;
        }
        for (size_t pos = start; pos + np <= nf; pos++) {
            if (match_at(f, p, np, pos)) {
                *at = pos;
                found = true;
                break;
            }
        }
    }
    keyset_dispose(&pk);
    return found;
}

static uint64_t hash_key(key k)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < k.len; i++)
        h = (h ^ (unsigned char)k.s[i]) * 1099511628211ull;
    return h;
}

/* Where the chunk's lines come closest to matching, for the message. */
static void codex_hint(sp_buf *msg, keyset *fk, const key *fraw, size_t nf, const key *praw,
                       size_t np)
{
    if (np > nf) {
        sp_buf_printf(msg, "; the file has only %zu line%s", nf, nf == 1 ? "" : "s");
        return;
    }
    if (nf * np > HINT_MAX_WORK)
        return;
    keyset pk = {{NULL, NULL, NULL, NULL}, SP_BUF_INIT};
    const key *f = keys_for(fk, fraw, nf, 3);
    const key *p = keys_for(&pk, praw, np, 3);
    uint64_t *fh = sp_xmalloc(nf * sizeof(uint64_t)), *ph = sp_xmalloc(np * sizeof(uint64_t));
    for (size_t i = 0; i < nf; i++)
        fh[i] = hash_key(f[i]);
    for (size_t j = 0; j < np; j++)
        ph[j] = hash_key(p[j]);
    size_t best = 0, best_n = 0;
    for (size_t pos = 0; pos + np <= nf; pos++) {
        size_t n = 0;
        for (size_t j = 0; j < np; j++)
            n += fh[pos + j] == ph[j];
        if (n > best_n) {
            best_n = n;
            best = pos;
        }
    }
    if (best_n == 0) {
        sp_buf_adds(msg, "; none of its lines occur in the file");
    } else {
        sp_buf_printf(msg, "; the closest match is at line %zu, where %zu of its %zu lines agree",
                      best + 1, best_n, np);
        for (size_t j = 0; j < np; j++) {
            if (fh[best + j] == ph[j])
                continue;
            sp_buf_printf(msg, "; line %zu there is '", best + j + 1);
            pt_excerpt(msg, fraw[best + j].s, fraw[best + j].len, EXCERPT_BYTES);
            sp_buf_adds(msg, "' where the chunk expects '");
            pt_excerpt(msg, praw[j].s, praw[j].len, EXCERPT_BYTES);
            sp_buf_addc(msg, '\'');
            break;
        }
    }
    free(fh);
    free(ph);
    keyset_dispose(&pk);
}

/* A chunk placed in the file: old lines [start, start+old_len) give way
 * to the chunk's lines. */
typedef struct repl {
    size_t start, old_len;
    const pp_hunk *h;
} repl;

static void chunk_name(sp_buf *msg, size_t idx, const pp_hunk *h, const char *display)
{
    sp_buf_printf(msg, "chunk %zu of %s", idx, display);
    if (h->header_len) {
        sp_buf_adds(msg, " (");
        pt_excerpt(msg, h->header, h->header_len, EXCERPT_BYTES);
        sp_buf_addc(msg, ')');
    }
}

int pt_apply_codex(sp_buf *out, const char *data, size_t len, const pp_op *op, const char *display,
                   sp_error **err)
{
    size_t nf = 0;
    fline *fl = split_file(data, len, true, &nf);
    key *fraw = sp_xmalloc((nf ? nf : 1) * sizeof(key));
    for (size_t i = 0; i < nf; i++)
        fraw[i] = (key){fl[i].s, fl[i].len};
    keyset fk = {{NULL, NULL, NULL, NULL}, SP_BUF_INIT};
    repl *rv = sp_xmalloc((op->n_hunks ? op->n_hunks : 1) * sizeof(repl));
    size_t nr = 0;
    key *praw = NULL;
    outv o = {NULL, 0, 0};
    int ret = 0;

    size_t line_index = 0;
    for (size_t c = 0; c < op->n_hunks; c++) {
        const pp_hunk *h = &op->hunks[c];
        for (size_t k = 0; k < h->n_contexts; k++) {
            key ctx = {h->contexts[k].s, h->contexts[k].len};
            size_t at;
            if (!seek(&fk, fraw, nf, &ctx, 1, line_index, false, &at)) {
                sp_buf m = SP_BUF_INIT;
                chunk_name(&m, c + 1, h, display);
                sp_buf_adds(&m, ": its context line '");
                pt_excerpt(&m, ctx.s, ctx.len, EXCERPT_BYTES);
                if (line_index)
                    sp_buf_printf(&m, "' was not found after line %zu", line_index);
                else
                    sp_buf_adds(&m, "' was not found");
                ret = sp_err_reason(err, SP_R_PATCH_CONFLICT,
                                    sp_err_set(err, SP_EINVAL, 0, "%s", m.data));
                sp_buf_dispose(&m);
                goto done;
            }
            line_index = at + 1;
        }
        size_t np = 0;
        praw = sp_xrealloc(praw, (h->n_lines ? h->n_lines : 1) * sizeof(key));
        for (size_t j = 0; j < h->n_lines; j++)
            if (h->lines[j].op != '+')
                praw[np++] = (key){h->lines[j].s, h->lines[j].len};
        if (np == 0) {
            /* Only additions: after the context line, else at the end. */
            size_t at = h->n_contexts && !h->eof ? line_index : nf;
            rv[nr++] = (repl){at, 0, h};
            continue;
        }
        size_t at = 0, use = np;
        bool found = seek(&fk, fraw, nf, praw, use, line_index, h->eof, &at);
        /* Blank lines that end a chunk are often just the spacing before
         * the next marker: try without them. */
        while (!found && use > 0 && praw[use - 1].len == 0) {
            use--;
            found = use > 0 && seek(&fk, fraw, nf, praw, use, line_index, h->eof, &at);
        }
        if (!found) {
            sp_buf m = SP_BUF_INIT;
            chunk_name(&m, c + 1, h, display);
            sp_buf_printf(&m, " does not apply: its %zu line%s %s not found", np,
                          np == 1 ? "" : "s", np == 1 ? "was" : "were");
            if (h->eof)
                sp_buf_adds(&m, " at the end of the file");
            else if (line_index)
                sp_buf_printf(&m, " after line %zu", line_index);
            codex_hint(&m, &fk, fraw, nf, praw, np);
            ret = sp_err_reason(err, SP_R_PATCH_CONFLICT,
                                sp_err_set(err, SP_EINVAL, 0, "%s", m.data));
            sp_buf_dispose(&m);
            goto done;
        }
        rv[nr++] = (repl){at, use, h};
        line_index = at + use;
    }

    /* In file order; chunks that land on the same line keep patch order. */
    for (size_t i = 1; i < nr; i++) {
        repl x = rv[i];
        size_t j = i;
        while (j > 0 && rv[j - 1].start > x.start) {
            rv[j] = rv[j - 1];
            j--;
        }
        rv[j] = x;
    }

    unsigned char pref = EOL_LF;
    for (size_t i = 0; i < nf; i++)
        if (fl[i].eol != EOL_NONE) {
            pref = fl[i].eol;
            break;
        }
    size_t idx = 0;
    for (size_t i = 0; i < nr; i++) {
        const repl *r = &rv[i];
        for (; idx < r->start; idx++)
            out_push(&o, fl[idx].s, fl[idx].len, fl[idx].eol);
        size_t fpos = r->start, seen = 0;
        for (size_t j = 0; j < r->h->n_lines; j++) {
            const pp_bline *b = &r->h->lines[j];
            if (b->op == '+') {
                out_push(&o, b->s, b->len, pref);
                continue;
            }
            if (seen >= r->old_len)
                continue; /* a trailing blank line that did not match */
            if (b->op == ' ')
                out_push(&o, fl[fpos].s, fl[fpos].len, fl[fpos].eol);
            fpos++;
            seen++;
        }
        idx = r->start + r->old_len;
    }
    for (; idx < nf; idx++)
        out_push(&o, fl[idx].s, fl[idx].len, fl[idx].eol);
    /* An added line that ends the file gets an ending too (pref above). */
    out_write(out, &o, pref);

done:
    free(o.v);
    free(praw);
    free(rv);
    keyset_dispose(&fk);
    free(fraw);
    free(fl);
    return ret;
}

/* ---------------------------------------------------------- unified -- */

/* Unified hunks are placed the way `git apply` places them (apply.c:
 * apply_one_fragment, find_pos, match_fragment, update_image), so that a
 * diff gives what git gives, line numbers off or not:
 *
 * - the file is an image that each hunk changes in turn; a hunk is looked
 *   for from the line its header gives on the new side (its "+" start, which
 *   counts the earlier hunks' changes), then one line after, one before,
 *   two after, two before, ... to both ends of the file: the nearest match
 *   wins, the later one on a tie;
 * - its old lines (context and removed) must match byte for byte, line
 *   endings included (no fuzz, no whitespace leniency);
 * - a hunk whose old side starts at line 0 or 1 must match at the start of
 *   the file, and a hunk without context after its change at the end;
 * - no hunk may match lines an earlier hunk wrote.
 *
 * git needs --unidiff-zero for hunks without any context (diff -U0); a file
 * whose hunks all lack context is applied that way: only an old start of 0
 * pins the start, nothing pins the end. */

typedef struct iline {
    const char *s;
    size_t len;   /* without the '\n' */
    bool nl;      /* followed by '\n' */
    bool patched; /* written by an earlier hunk */
    uint32_t hash;
} iline;

typedef struct image {
    iline *v;
    size_t n, cap;
} image;

/* git's hash_line(): the bytes that are not spaces (git's isspace: space,
 * tab, LF, CR). */
static uint32_t git_hash(const char *s, size_t len)
{
    uint32_t h = 0;
    for (size_t i = 0; i < len; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
            h = h * 3 + (unsigned char)s[i];
    return h;
}

static iline mk_iline(const char *s, size_t len, bool nl)
{
    return (iline){s, len, nl, false, git_hash(s, len)};
}

/* The old (op != '+') or new (op != '-') side of a hunk. */
static void hunk_side(image *side, const pp_hunk *h, char skip)
{
    side->n = 0;
    if (side->cap < h->n_lines + 1) {
        side->cap = h->n_lines + 1;
        side->v = sp_xrealloc(side->v, side->cap * sizeof(iline));
    }
    for (size_t j = 0; j < h->n_lines; j++)
        if (h->lines[j].op != skip)
            side->v[side->n++] = mk_iline(h->lines[j].s, h->lines[j].len, !h->lines[j].no_eol);
}

/* The bytes of pre, from the start of line `at`, are the image's (to its
 * very end with at_end): git compares the preimage as one buffer. */
static bool same_bytes(const image *img, size_t at, const image *pre, bool at_end)
{
    size_t li = at, off = 0;
    for (size_t i = 0; i < pre->n; i++) {
        const iline *p = &pre->v[i];
        for (size_t k = 0; k < p->len + p->nl; k++) {
            while (li < img->n && off == img->v[li].len + img->v[li].nl) {
                li++;
                off = 0;
            }
            if (li >= img->n)
                return false;
            const iline *l = &img->v[li];
            char pc = k < p->len ? p->s[k] : '\n';
            char ic = off < l->len ? l->s[off] : '\n';
            if (pc != ic)
                return false;
            off++;
        }
    }
    while (at_end && li < img->n && off == img->v[li].len + img->v[li].nl) {
        li++;
        off = 0;
    }
    return !at_end || li >= img->n;
}

typedef struct place {
    bool beginning, end; /* must match at the start, at the end */
    bool overlap;        /* may match lines an earlier hunk wrote (hints) */
    bool loose;          /* whitespace ignored (hints) */
} place;

static bool loose_eq(const iline *a, const iline *b)
{
    const char *x = a->s, *xe = a->s + a->len, *y = b->s, *ye = b->s + b->len;
    for (;;) {
        while (x < xe && ws(*x))
            x++;
        while (y < ye && ws(*y))
            y++;
        if (x == xe || y == ye)
            return x == xe && y == ye;
        if (*x++ != *y++)
            return false;
    }
}

/* git's match_fragment() without whitespace fixing. */
static bool fits(const image *img, size_t at, const image *pre, place how)
{
    if (pre->n > img->n || at > img->n - pre->n)
        return false;
    if ((how.end && at + pre->n != img->n) || (how.beginning && at != 0))
        return false;
    for (size_t i = 0; i < pre->n; i++) {
        const iline *l = &img->v[at + i];
        if (l->patched && !how.overlap)
            return false;
        if (how.loose ? !loose_eq(l, &pre->v[i]) : l->hash != pre->v[i].hash)
            return false;
    }
    return how.loose || same_bytes(img, at, pre, how.end);
}

/* git's find_pos(): the match nearest `line`, looking after it first. */
static bool find_pos(const image *img, const image *pre, size_t line, place how, size_t *found)
{
    size_t n = img->n;
    if (how.beginning)
        line = 0;
    else if (how.end)
        line = pre->n <= n ? n - pre->n : n;
    if (line > n)
        line = n;
    size_t back = line, fwd = line, cur = line;
    for (unsigned long i = 0;; i++) {
        if (fits(img, cur, pre, how)) {
            *found = cur;
            return true;
        }
        for (;; i++) {
            if (back == 0 && fwd == n)
                return false;
            if (i & 1) {
                if (back == 0)
                    continue;
                cur = --back;
            } else {
                if (fwd == n)
                    continue;
                cur = ++fwd;
            }
            break;
        }
    }
}

static int hunk_fail(sp_error **err, size_t k, const pp_hunk *h, const char *display, size_t line,
                     const char *why)
{
    sp_buf m = SP_BUF_INIT;
    sp_buf_printf(&m, "hunk %zu of %s (", k, display);
    pt_excerpt(&m, h->header, h->header_len, EXCERPT_BYTES);
    sp_buf_printf(&m, ") does not apply at line %zu; %s", line, why);
    int r = sp_err_reason(err, SP_R_PATCH_CONFLICT, sp_err_set(err, SP_EINVAL, 0, "%s", m.data));
    sp_buf_dispose(&m);
    return r;
}

/* Why the hunk's old lines fit nowhere, and what comes closest. */
static void unified_hint(sp_buf *why, const image *img, const image *pre, size_t line, place how)
{
    size_t found, n = img->n;
    if (pre->n > n) {
        sp_buf_printf(why, "the file has only %zu line%s, the hunk needs %zu", n, n == 1 ? "" : "s",
                      pre->n);
        return;
    }
    if (pre->n == 0) {
        sp_buf_printf(why, "a hunk without old lines must go at the %s of the file",
                      how.beginning ? "start" : "end");
        return;
    }
    place free_pos = {false, false, false, false};
    if ((how.beginning || how.end) && find_pos(img, pre, line, free_pos, &found)) {
        if (how.beginning)
            sp_buf_printf(why,
                          "a hunk that starts at line %s must match at the start of the file (git "
                          "apply requires it too), but its lines are at line %zu",
                          how.end ? "0 or 1" : "1", found + 1);
        else
            sp_buf_printf(why,
                          "it has no context after its change, so it must match at the end of "
                          "the file (git apply requires it too), but its lines are at line %zu "
                          "of %zu",
                          found + 1, n);
        return;
    }
    place overlap = {how.beginning, how.end, true, false};
    if (find_pos(img, pre, line, overlap, &found)) {
        sp_buf_printf(why,
                      "its lines are only at line %zu, which an earlier hunk of this diff already "
                      "changed",
                      found + 1);
        return;
    }
    size_t at = line < n ? line : n - 1;
    if (n * pre->n <= HINT_MAX_WORK) {
        place loose = {false, false, true, true};
        if (find_pos(img, pre, line, loose, &found)) {
            /* Same text: the line endings differ, or the spaces. */
            const iline *l = img->v + found, *p = pre->v;
            size_t j = 0;
            while (j < pre->n && l[j].len == p[j].len && l[j].nl == p[j].nl &&
                   memcmp(l[j].s, p[j].s, p[j].len) == 0)
                j++;
            if (j < pre->n && l[j].len == p[j].len && memcmp(l[j].s, p[j].s, p[j].len) == 0)
                sp_buf_printf(why, "line %zu %s a newline at its end", found + j + 1,
                              img->v[found + j].nl ? "has" : "lacks");
            else
                sp_buf_printf(why,
                              "its lines match at line %zu only if whitespace and line endings "
                              "are ignored",
                              found + 1);
            return;
        }
    }
    /* The first line that differs where the hunk says it goes. */
    size_t j = 0;
    while (j < pre->n && at + j < n && img->v[at + j].len == pre->v[j].len &&
           memcmp(img->v[at + j].s, pre->v[j].s, pre->v[j].len) == 0)
        j++;
    if (j >= pre->n || at + j >= n) {
        sp_buf_printf(why, "the file has only %zu line%s", n, n == 1 ? "" : "s");
        return;
    }
    sp_buf_printf(why, "line %zu is '", at + j + 1);
    pt_excerpt(why, img->v[at + j].s, img->v[at + j].len, EXCERPT_BYTES);
    sp_buf_adds(why, "' where the hunk expects '");
    pt_excerpt(why, pre->v[j].s, pre->v[j].len, EXCERPT_BYTES);
    sp_buf_adds(why, "', and its lines occur nowhere in the file");
}

/* Put `post` in place of the pre->n lines at `at`, marked as written. */
static void update_image(image *img, size_t at, size_t old_n, const image *post)
{
    size_t need = img->n - old_n + post->n;
    if (need > img->cap) {
        img->cap = need + need / 2 + 16;
        img->v = sp_xrealloc(img->v, img->cap * sizeof(iline));
    }
    memmove(img->v + at + post->n, img->v + at + old_n, (img->n - at - old_n) * sizeof(iline));
    for (size_t i = 0; i < post->n; i++) {
        img->v[at + i] = post->v[i];
        img->v[at + i].patched = true;
    }
    img->n = need;
}

int pt_apply_unified(sp_buf *out, const char *data, size_t len, const pp_op *op,
                     const char *display, sp_error **err)
{
    size_t nf = 0;
    fline *fl = split_file(data, len, false, &nf);
    image img = {sp_xmalloc((nf + 1) * sizeof(iline)), 0, nf + 1};
    for (size_t i = 0; i < nf; i++)
        img.v[img.n++] = mk_iline(fl[i].s, fl[i].len, fl[i].eol != EOL_NONE);
    free(fl);
    image pre = {NULL, 0, 0}, post = {NULL, 0, 0};
    int ret = 0;

    bool zero = true; /* no hunk has context: diff -U0 */
    for (size_t k = 0; k < op->n_hunks && zero; k++)
        for (size_t j = 0; j < op->hunks[k].n_lines && zero; j++)
            zero = op->hunks[k].lines[j].op != ' ';

    for (size_t k = 0; k < op->n_hunks; k++) {
        const pp_hunk *h = &op->hunks[k];
        hunk_side(&pre, h, '+');
        hunk_side(&post, h, '-');
        size_t trailing = 0;
        while (trailing < h->n_lines && h->lines[h->n_lines - 1 - trailing].op == ' ')
            trailing++;
        place how = {h->old_start == 0 || (h->old_start == 1 && !zero), !zero && trailing == 0,
                     false, false};
        size_t line = h->new_start ? h->new_start - 1 : 0, at = 0;
        if (!find_pos(&img, &pre, line, how, &at)) {
            sp_buf why = SP_BUF_INIT;
            unified_hint(&why, &img, &pre, line, how);
            ret = hunk_fail(err, k + 1, h, display, h->old_start ? h->old_start : 1, why.data);
            sp_buf_dispose(&why);
            goto done;
        }
        update_image(&img, at, pre.n, &post);
    }
    /* Unified diffs say exactly where newlines are: no endings invented. */
    sp_buf_add(out, "", 0);
    for (size_t i = 0; i < img.n; i++) {
        sp_buf_add(out, img.v[i].s, img.v[i].len);
        if (img.v[i].nl)
            sp_buf_addc(out, '\n');
    }

done:
    free(img.v);
    free(pre.v);
    free(post.v);
    return ret;
}
