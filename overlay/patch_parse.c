/* apply_patch, part 1: patch text to file operations.
 *
 * Both formats are read as an array of lines that point into the caller's
 * text, each with its 1-based line number so that every parse error can
 * name the patch line it is about. A shell heredoc around either format is
 * read as Codex reads it (find_heredoc). The Codex envelope is parsed
 * leniently (whitespace around markers, CRLF line ends); unified diffs
 * strictly, in the dialect git apply accepts. Paths are normalized
 * here with the sp_fs rules, so an escaping path is refused before any
 * file is looked at. */
#include <stdio.h>
#include <string.h>

#include "patch_internal.h"

typedef struct pline {
    const char *s;
    size_t len;
    size_t no; /* 1-based line number in the patch */
} pline;

typedef struct lines {
    pline *v;
    size_t n;
} lines;

/* ---------------------------------------------------------- helpers -- */

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' || c == '\n';
}

static pline trim(pline l)
{
    while (l.len && is_space(l.s[0])) {
        l.s++;
        l.len--;
    }
    while (l.len && is_space(l.s[l.len - 1]))
        l.len--;
    return l;
}

static bool blank(pline l)
{
    return trim(l).len == 0;
}

static bool starts(pline l, const char *prefix)
{
    size_t n = strlen(prefix);
    return l.len >= n && memcmp(l.s, prefix, n) == 0;
}

static bool equals(pline l, const char *s)
{
    return l.len == strlen(s) && memcmp(l.s, s, l.len) == 0;
}

/* The rest of `l` after `prefix`. */
static pline after(pline l, size_t n)
{
    pline r = {l.s + n, l.len - n, l.no};
    return r;
}

static void split_lines(lines *out, const char *text, size_t len, bool strip_cr)
{
    size_t cap = 64, no = 1;
    out->v = sp_xmalloc(cap * sizeof(pline));
    out->n = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        if (out->n == cap) {
            cap *= 2;
            out->v = sp_xrealloc(out->v, cap * sizeof(pline));
        }
        size_t l = (size_t)(le - p);
        if (strip_cr && l && p[l - 1] == '\r')
            l--;
        out->v[out->n++] = (pline){p, l, no++};
        p = nl ? nl + 1 : end;
    }
}

/* "patch line N: " + message, SP_EINVAL. */
static int SP_PRINTF(3, 4) perr(sp_error **err, size_t no, const char *fmt, ...)
{
    if (!err)
        return SP_EINVAL;
    va_list ap;
    va_start(ap, fmt);
    char *msg = sp_xvasprintf(fmt, ap);
    va_end(ap);
    int r = sp_err_reason(err, SP_R_PATCH_PARSE,
                          sp_err_set(err, SP_EINVAL, 0, "patch line %zu: %s", no, msg));
    free(msg);
    return r;
}

/* `found 'text'` for messages, with the text cut and made printable. */
static char *quoted(pline l)
{
    sp_buf b = SP_BUF_INIT;
    if (l.len == 0) {
        sp_buf_adds(&b, "an empty line");
        return sp_buf_steal(&b);
    }
    sp_buf_addc(&b, '\'');
    pt_excerpt(&b, l.s, l.len, 60);
    sp_buf_addc(&b, '\'');
    return sp_buf_steal(&b);
}

/* Normalize a path named by the patch; a relative one is taken in the
 * folder a heredoc's `cd DIR &&` names. */
static int norm_path(const pp_patch *p, char **out, const char *path, size_t len, size_t no,
                     sp_error **err)
{
    *out = NULL;
    if (len == 0)
        return perr(err, no, "the file path is missing");
    cleanup_free char *joined = NULL;
    if (p->workdir && path[0] != '/') {
        joined = sp_xasprintf("%s/%.*s", p->workdir, (int)len, path);
        path = joined;
        len = strlen(joined);
    }
    int r = sp_fs_path_normalize(out, path, len, err);
    if (r < 0)
        return sp_err_wrap(err, r, "patch line %zu", no);
    if (strcmp(*out, ".") == 0) {
        free(*out);
        *out = NULL;
        return perr(err, no, "the path names the workspace root, not a file");
    }
    return 0;
}

static pp_op *new_op(pp_patch *p, sp_patch_action action, size_t no)
{
    p->ops = sp_xrealloc(p->ops, (p->n + 1) * sizeof(pp_op));
    pp_op *op = &p->ops[p->n++];
    memset(op, 0, sizeof(*op));
    op->action = action;
    op->line_no = no;
    return op;
}

static pp_hunk *new_hunk(pp_op *op, size_t no)
{
    op->hunks = sp_xrealloc(op->hunks, (op->n_hunks + 1) * sizeof(pp_hunk));
    pp_hunk *h = &op->hunks[op->n_hunks++];
    memset(h, 0, sizeof(*h));
    h->line_no = no;
    return h;
}

static pp_bline *push_line(pp_hunk *h, char op, const char *s, size_t len)
{
    /* Grow by doubling: n_lines is a power of two exactly when full. */
    if (h->n_lines == 0 || (h->n_lines & (h->n_lines - 1)) == 0)
        h->lines = sp_xrealloc(h->lines, (h->n_lines ? h->n_lines * 2 : 1) * sizeof(pp_bline));
    pp_bline *b = &h->lines[h->n_lines++];
    b->op = op;
    b->s = s;
    b->len = len;
    b->no_eol = false;
    if (op == '+')
        h->added++;
    else if (op == '-')
        h->removed++;
    return b;
}

void pp_patch_dispose(pp_patch *p)
{
    for (size_t i = 0; i < p->n; i++) {
        pp_op *op = &p->ops[i];
        free(op->path);
        free(op->new_path);
        for (size_t j = 0; j < op->n_hunks; j++) {
            free(op->hunks[j].lines);
            free(op->hunks[j].contexts);
        }
        free(op->hunks);
        sp_buf_dispose(&op->content);
    }
    free(p->ops);
    free(p->workdir);
    p->ops = NULL;
    p->workdir = NULL;
    p->n = 0;
}

/* --------------------------------------------------------- envelope -- */

/* The shell wrappers a model puts around a patch, as Codex reads them:
 *
 *   apply_patch <<'EOF'            (also <<"EOF", <<EOF, <<-EOF, applypatch)
 *   cd DIR && apply_patch <<'EOF'  (the patch's paths are then in DIR)
 *   <<'EOF'                        (Codex's lenient form: the bare heredoc)
 *   ...
 *   EOF
 *
 * The body is taken as written (no shell expansion, as Codex takes it).
 * Anything else before `<<` is refused: it would run in a shell, and
 * dropping it would apply the patch somewhere else than the model meant. */

typedef struct heredoc {
    bool found;
    size_t b, e;  /* the body: lines [b, e) */
    char *cd;     /* DIR of `cd DIR &&`, as written after unquoting */
    size_t cd_no; /* its patch line */
} heredoc;

static bool word_char(char c)
{
    return c == '_' || c == '-' || c == '.' || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') ||
           (c >= 'a' && c <= 'z');
}

static void skip_blanks(pline *l)
{
    while (l->len && (l->s[0] == ' ' || l->s[0] == '\t')) {
        l->s++;
        l->len--;
    }
}

/* Eat `word` at the start of l if a blank or the end follows it. */
static bool eat_word(pline *l, const char *word)
{
    size_t n = strlen(word);
    if (l->len < n || memcmp(l->s, word, n) != 0)
        return false;
    if (l->len > n && l->s[n] != ' ' && l->s[n] != '\t' && l->s[n] != '<')
        return false;
    *l = after(*l, n);
    skip_blanks(l);
    return true;
}

/* The redirection at the end of an opener line: `<<[-] WORD`, WORD bare or
 * in quotes, nothing after it. Sets the delimiter, `dash`, and cuts l to
 * what comes before `<<`. */
static bool heredoc_tail(pline *l, pline *word, bool *dash)
{
    for (size_t k = l->len; k-- > 1;) {
        if (l->s[k - 1] != '<' || l->s[k] != '<')
            continue;
        pline t = after(*l, k + 1);
        *dash = t.len && t.s[0] == '-';
        if (*dash)
            t = after(t, 1);
        skip_blanks(&t);
        char q = t.len && (t.s[0] == '\'' || t.s[0] == '"') ? t.s[0] : 0;
        if (q)
            t = after(t, 1);
        size_t w = 0;
        while (w < t.len && word_char(t.s[w]))
            w++;
        if (w == 0 || (q && (w >= t.len || t.s[w] != q)))
            return false;
        pline rest = after(t, w + (q ? 1 : 0));
        if (trim(rest).len)
            return false;
        *word = (pline){t.s, w, l->no};
        l->len = k - 1;
        return true;
    }
    return false;
}

/* The folder of `cd DIR`: a bare word, 'single quoted' or "double quoted"
 * without expansions. */
static int cd_arg(pline *l, char **out, sp_error **err)
{
    size_t no = l->no;
    if (!l->len)
        return perr(err, no, "'cd' needs a folder before '&&'");
    char q = l->s[0] == '\'' || l->s[0] == '"' ? l->s[0] : 0;
    size_t i = q ? 1 : 0, start = i;
    for (; i < l->len; i++) {
        char c = l->s[i];
        if (q && c == q)
            break;
        if (!q && strchr(" \t;&|<>()", c))
            break; /* the end of a bare word */
        bool special = q == '\''  ? false
                       : q == '"' ? c == '$' || c == '`' || c == '\\'
                                  : strchr("$`\\'\"*?[]{}#~!", c) != NULL;
        if (special) {
            char *x = quoted(*l);
            int r = perr(err, no,
                         "the folder after 'cd' must be a plain path (no variables, quotes "
                         "inside it, globs or '~'), found %s",
                         x);
            free(x);
            return r;
        }
    }
    if (q && i >= l->len)
        return perr(err, no, "unterminated quote in the folder after 'cd'");
    if (i == start)
        return perr(err, no, "'cd' needs a folder before '&&'");
    *out = sp_xstrndup(l->s + start, i - start);
    *l = after(*l, i + (q ? 1 : 0));
    skip_blanks(l);
    return 0;
}

/* Recognize and check the wrapper around lines [fb, fe) (blank lines
 * around them dropped already). */
static int find_heredoc(const lines *L, size_t fb, size_t fe, heredoc *h, sp_error **err)
{
    memset(h, 0, sizeof(*h));
    if (fe <= fb)
        return 0;
    pline open = trim(L->v[fb]), word;
    bool dash = false;
    /* A patch's own first line may hold "<<" (a file name, a mail). */
    if (starts(open, "***") || starts(open, "diff ") || starts(open, "--- ") ||
        starts(open, "Index: ") || starts(open, "From ") || !heredoc_tail(&open, &word, &dash))
        return 0;
    pline pre = trim(open);
    char *what = NULL;
    if (pre.len) {
        if (eat_word(&pre, "cd")) {
            int r = cd_arg(&pre, &h->cd, err);
            if (r < 0)
                return r;
            h->cd_no = L->v[fb].no;
            if (pre.len >= 2 && memcmp(pre.s, "&&", 2) == 0) {
                pre = after(pre, 2);
                skip_blanks(&pre);
            } else {
                free(h->cd);
                h->cd = NULL;
                what = "only '&&' may join 'cd DIR' and 'apply_patch'";
            }
        }
        if (!what && !eat_word(&pre, "apply_patch") && !eat_word(&pre, "applypatch"))
            what = "only 'apply_patch', 'applypatch' or 'cd DIR && apply_patch' may come "
                   "before '<<'";
        else if (!what && pre.len)
            what = "'apply_patch' takes no arguments before '<<'";
        if (what) {
            char *q = quoted(L->v[fb]);
            int r = perr(err, L->v[fb].no,
                         "%s, found %s (write 'apply_patch <<'EOF'' on the "
                         "first line, or send the patch without a heredoc)",
                         what, q);
            free(q);
            free(h->cd);
            h->cd = NULL;
            return r;
        }
    }
    /* The closing line: the delimiter alone (leading tabs dropped with
     * <<-), as a shell ends the heredoc; a last line that is the delimiter
     * with spaces around it is taken too. */
    size_t close = fe;
    for (size_t k = fb + 1; k < fe && close == fe; k++) {
        pline l = L->v[k];
        while (dash && l.len && l.s[0] == '\t')
            l = after(l, 1);
        while (l.len && is_space(l.s[l.len - 1]))
            l.len--;
        if (l.len == word.len && memcmp(l.s, word.s, word.len) == 0)
            close = k;
    }
    if (close == fe && fe - fb >= 2) {
        pline last = trim(L->v[fe - 1]);
        if (last.len == word.len && memcmp(last.s, word.s, word.len) == 0)
            close = fe - 1;
    }
    if (close == fe) {
        free(h->cd);
        h->cd = NULL;
        return perr(err, L->v[fe - 1].no,
                    "the heredoc opened on line %zu is not closed: end the patch with a line "
                    "'%.*s'",
                    L->v[fb].no, (int)word.len, word.s);
    }
    if (close + 1 < fe) {
        free(h->cd);
        h->cd = NULL;
        return perr(err, L->v[close + 1].no,
                    "text after the line '%.*s' that closes the heredoc (a shell would run it "
                    "as commands)",
                    (int)word.len, word.s);
    }
    h->found = true;
    h->b = fb + 1;
    h->e = close;
    return 0;
}

/* Where the patch is in L: [*b, *e), a heredoc wrapper dropped. */
static int unwrap(const lines *L, size_t *b, size_t *e, heredoc *h, sp_error **err)
{
    size_t fb = 0, fe = L->n;
    while (fb < fe && blank(L->v[fb]))
        fb++;
    while (fe > fb && blank(L->v[fe - 1]))
        fe--;
    int r = find_heredoc(L, fb, fe, h, err);
    if (r < 0)
        return r;
    *b = h->found ? h->b : 0;
    *e = h->found ? h->e : L->n;
    return 0;
}

/* The lines [*b, *e) that hold the patch, without the blank lines around
 * it with trim_blank. A unified diff keeps its blank-looking lines: " " is
 * an empty context line. */
static void envelope(const lines *L, bool trim_blank, size_t *b, size_t *e)
{
    *b = 0;
    *e = L->n;
    while (trim_blank && *b < *e && blank(L->v[*b]))
        (*b)++;
    while (trim_blank && *e > *b && blank(L->v[*e - 1]))
        (*e)--;
}

/* ------------------------------------------------------------ Codex -- */

#define BEGIN_PATCH "*** Begin Patch"
#define END_PATCH   "*** End Patch"
#define ADD_FILE    "*** Add File:"
#define DELETE_FILE "*** Delete File:"
#define UPDATE_FILE "*** Update File:"
#define MOVE_TO     "*** Move to:"
#define END_OF_FILE "*** End of File"

/* The path after a marker like "*** Add File:". */
static int marker_path(const pp_patch *p, char **out, pline t, const char *marker, sp_error **err)
{
    pline rest = trim(after(t, strlen(marker)));
    return norm_path(p, out, rest.s, rest.len, t.no, err);
}

/* A "@@" header written the unified way ("@@ -12,5 +12,6 @@ ...") by a
 * model that mixed the formats: its numbers say nothing to a Codex chunk. */
static bool unified_style(pline ctx)
{
    if (ctx.len < 2 || ctx.s[0] != '-' || ctx.s[1] < '0' || ctx.s[1] > '9')
        return false;
    const char *plus = memchr(ctx.s, '+', ctx.len);
    return plus && memmem(ctx.s, ctx.len, "@@", 2) > (void *)plus;
}

static void push_context(pp_hunk *h, pline ctx)
{
    h->contexts = sp_xrealloc(h->contexts, (h->n_contexts + 1) * sizeof(pp_text));
    h->contexts[h->n_contexts].s = ctx.s;
    h->contexts[h->n_contexts].len = ctx.len;
    h->n_contexts++;
}

/* The chunks of an Update File, from line *i up to the next "*** " line. */
static int codex_chunks(pp_op *op, const lines *L, size_t *i, size_t end, sp_error **err)
{
    while (*i < end) {
        pline l = L->v[*i];
        pline t = trim(l);
        if (t.len == 0) { /* blank lines between chunks */
            (*i)++;
            continue;
        }
        if (starts(t, "***") && !equals(t, END_OF_FILE))
            return 0; /* the next file operation */
        pp_hunk *h = new_hunk(op, l.no);
        h->header = l.s;
        h->header_len = l.len;
        bool headed = false;
        while (*i < end && starts(trim(L->v[*i]), "@@")) {
            pline ctx = trim(after(trim(L->v[*i]), 2));
            if (ctx.len && !unified_style(ctx))
                push_context(h, ctx);
            h->header = trim(L->v[*i]).s;
            h->header_len = trim(L->v[*i]).len;
            headed = true;
            (*i)++;
        }
        if (!headed && op->n_hunks > 1) {
            char *q = quoted(l);
            int r = perr(err, l.no,
                         "expected '@@' or a chunk line starting with ' ', '-' or '+' in %s, "
                         "found %s",
                         op->path, q);
            free(q);
            return r;
        }
        if (!headed)
            h->header_len = 0;
        size_t first = *i;
        while (*i < end) {
            pline b = L->v[*i];
            if (equals(trim(b), END_OF_FILE)) {
                h->eof = true;
                (*i)++;
                break;
            }
            if (b.len == 0) {
                push_line(h, ' ', b.s, 0); /* an empty context line */
            } else if (b.s[0] == ' ' || b.s[0] == '-' || b.s[0] == '+') {
                push_line(h, b.s[0], b.s + 1, b.len - 1);
            } else {
                break;
            }
            (*i)++;
        }
        if (h->n_lines == 0) {
            size_t no = *i < end ? L->v[*i].no : (first ? L->v[first - 1].no : l.no);
            if (*i < end && *i == first && !starts(trim(L->v[*i]), "***")) {
                char *q = quoted(L->v[*i]);
                int r = perr(err, no,
                             "expected a chunk line of %s starting with ' ', '-' or '+', found %s",
                             op->path, q);
                free(q);
                return r;
            }
            return perr(err, no, "chunk %zu of %s has no lines", op->n_hunks, op->path);
        }
        op->added += h->added;
        op->removed += h->removed;
    }
    return 0;
}

static int parse_codex(pp_patch *p, const lines *L, sp_error **err)
{
    size_t b, e;
    envelope(L, true, &b, &e);
    if (b >= e)
        return perr(err, 1, "the patch is empty; expected '" BEGIN_PATCH "'");
    if (!equals(trim(L->v[b]), BEGIN_PATCH)) {
        char *q = quoted(L->v[b]);
        int r = perr(err, L->v[b].no, "expected '" BEGIN_PATCH "', found %s", q);
        free(q);
        return r;
    }
    size_t end = e;
    if (e - b < 2 || !equals(trim(L->v[e - 1]), END_PATCH)) {
        for (size_t k = b + 1; k < e; k++)
            if (equals(trim(L->v[k]), END_PATCH))
                return perr(err, L->v[k + 1].no, "unexpected text after '" END_PATCH "'");
        return perr(err, L->v[e - 1].no, "the patch ends without '" END_PATCH "'");
    }
    end = e - 1;

    size_t i = b + 1;
    while (i < end) {
        pline l = L->v[i];
        pline t = trim(l);
        if (t.len == 0) {
            i++;
            continue;
        }
        int r;
        if (starts(t, ADD_FILE)) {
            pp_op *op = new_op(p, SP_PATCH_ADD, l.no);
            if ((r = marker_path(p, &op->path, t, ADD_FILE, err)) < 0)
                return r;
            sp_buf_add(&op->content, "", 0);
            for (i++; i < end && L->v[i].len && L->v[i].s[0] == '+'; i++) {
                sp_buf_add(&op->content, L->v[i].s + 1, L->v[i].len - 1);
                sp_buf_addc(&op->content, '\n');
                op->added++;
            }
            /* A blank line among '+' lines is most likely a '+' that was
             * forgotten; guessing would write the wrong file. */
            size_t k = i;
            while (k < end && blank(L->v[k]))
                k++;
            if (k > i && k < end && L->v[k].len && L->v[k].s[0] == '+')
                return perr(err, L->v[i].no,
                            "blank line inside Add File %s; every line of a new file starts "
                            "with '+' (write '+' alone for an empty line)",
                            op->path);
        } else if (starts(t, DELETE_FILE)) {
            pp_op *op = new_op(p, SP_PATCH_DELETE, l.no);
            if ((r = marker_path(p, &op->path, t, DELETE_FILE, err)) < 0)
                return r;
            i++;
        } else if (starts(t, UPDATE_FILE)) {
            pp_op *op = new_op(p, SP_PATCH_UPDATE, l.no);
            if ((r = marker_path(p, &op->path, t, UPDATE_FILE, err)) < 0)
                return r;
            i++;
            while (i < end && blank(L->v[i]))
                i++;
            if (i < end && starts(trim(L->v[i]), MOVE_TO)) {
                if ((r = marker_path(p, &op->new_path, trim(L->v[i]), MOVE_TO, err)) < 0)
                    return r;
                i++;
                if (strcmp(op->new_path, op->path) == 0) {
                    free(op->new_path);
                    op->new_path = NULL;
                } else {
                    op->action = SP_PATCH_MOVE;
                }
            }
            if ((r = codex_chunks(op, L, &i, end, err)) < 0)
                return r;
            if (op->n_hunks == 0 && op->action != SP_PATCH_MOVE)
                return perr(err, l.no, "Update File %s has no chunks", op->path);
        } else {
            char *q = quoted(l);
            r = perr(err, l.no,
                     "expected '" ADD_FILE "', '" DELETE_FILE "', '" UPDATE_FILE "' or '" END_PATCH
                     "', found %s",
                     q);
            free(q);
            return r;
        }
    }
    if (p->n == 0)
        /* Codex's own words for it. */
        return sp_err_reason(err, SP_R_PATCH_PARSE,
                             sp_err_set(err, SP_EINVAL, 0,
                                        "No files were modified. (the patch has no '" ADD_FILE
                                        "', '" DELETE_FILE "' or '" UPDATE_FILE "' section)"));
    return 0;
}

/* ---------------------------------------------------------- unified -- */

/* Parse a C-quoted name (git quotes names with unusual bytes) starting at
 * the opening quote. *used receives the bytes consumed. */
static bool unquote(const char *s, size_t len, sp_buf *out, size_t *used)
{
    if (len < 2 || s[0] != '"')
        return false;
    size_t i = 1;
    while (i < len && s[i] != '"') {
        char c = s[i++];
        if (c != '\\') {
            sp_buf_addc(out, c);
            continue;
        }
        if (i >= len)
            return false;
        c = s[i++];
        switch (c) {
        case 'a':
            sp_buf_addc(out, '\a');
            break;
        case 'b':
            sp_buf_addc(out, '\b');
            break;
        case 'f':
            sp_buf_addc(out, '\f');
            break;
        case 'n':
            sp_buf_addc(out, '\n');
            break;
        case 'r':
            sp_buf_addc(out, '\r');
            break;
        case 't':
            sp_buf_addc(out, '\t');
            break;
        case 'v':
            sp_buf_addc(out, '\v');
            break;
        case '\\':
        case '"':
            sp_buf_addc(out, c);
            break;
        default:
            if (c < '0' || c > '3' || i + 1 >= len || s[i] < '0' || s[i] > '7' || s[i + 1] < '0' ||
                s[i + 1] > '7')
                return false;
            sp_buf_addc(out, (char)(((c - '0') << 6) | ((s[i] - '0') << 3) | (s[i + 1] - '0')));
            i += 2;
            break;
        }
    }
    if (i >= len)
        return false;
    *used = i + 1;
    return true;
}

/* The name on a "--- " or "+++ " line: quoted, or up to a tab (after which
 * diff -u puts a timestamp and git a lone tab for names with spaces). *ts
 * points at what follows the tab, if anything. Returns NULL on a bad
 * quoted name. */
static char *header_name(pline rest, pline *ts)
{
    sp_buf b = SP_BUF_INIT;
    ts->s = NULL;
    ts->len = 0;
    if (rest.len && rest.s[0] == '"') {
        size_t used = 0;
        if (!unquote(rest.s, rest.len, &b, &used)) {
            sp_buf_dispose(&b);
            return NULL;
        }
        if (used < rest.len && rest.s[used] == '\t')
            *ts = after(rest, used + 1);
        sp_buf_add(&b, "", 0);
        return sp_buf_steal(&b);
    }
    const char *tab = memchr(rest.s, '\t', rest.len);
    size_t n = tab ? (size_t)(tab - rest.s) : rest.len;
    if (tab)
        *ts = after(rest, n + 1);
    sp_buf_add(&b, rest.s, n);
    return sp_buf_steal(&b);
}

/* diff -N marks a missing side with the epoch as its timestamp:
 * "1970-01-01 00:00:00.000000000 +0000", or local time with an offset. */
static bool epoch_timestamp(pline ts)
{
    ts = trim(ts);
    int y, mo, d, h, mi, s, oh, om;
    char sign;
    char buf[80];
    if (ts.len == 0 || ts.len >= sizeof(buf))
        return false;
    memcpy(buf, ts.s, ts.len);
    buf[ts.len] = '\0';
    char *sp = strrchr(buf, ' ');
    if (!sp || strlen(sp + 1) != 5)
        return false;
    if (sscanf(buf, "%4d-%2d-%2d %2d:%2d:%2d", &y, &mo, &d, &h, &mi, &s) != 6 ||
        sscanf(sp + 1, "%c%2d%2d", &sign, &oh, &om) != 3 || (sign != '+' && sign != '-'))
        return false;
    const char *frac = strchr(buf, '.');
    if (frac && frac < sp)
        for (const char *f = frac + 1; f < sp; f++)
            if (*f != '0')
                return false;
    long minutes;
    if (y == 1970 && mo == 1 && d == 1)
        minutes = h * 60 + mi;
    else if (y == 1969 && mo == 12 && d == 31)
        minutes = h * 60 + mi - 24 * 60;
    else
        return false;
    long off = (sign == '-' ? -1 : 1) * (oh * 60 + om);
    return s == 0 && minutes - off == 0;
}

static bool dev_null(const char *name)
{
    return strcmp(name, "/dev/null") == 0;
}

/* Drop the first path component ("a/x" -> "x"), as git apply's -p1. */
static void strip_first(char **name)
{
    char *slash = *name ? strchr(*name, '/') : NULL;
    if (slash)
        memmove(*name, slash + 1, strlen(slash + 1) + 1);
}

static bool first_component_differs(const char *a, const char *b)
{
    const char *sa = strchr(a, '/'), *sb = strchr(b, '/');
    if (!sa || !sb)
        return false;
    return (size_t)(sa - a) != (size_t)(sb - b) || memcmp(a, b, (size_t)(sa - a)) != 0;
}

/* Parse "a/x b/x" of a "diff --git" line when it names one file: quoted
 * names, or an unquoted pair whose halves agree after their prefixes. */
static bool git_line_names(pline rest, char **a, char **b)
{
    *a = *b = NULL;
    sp_buf x = SP_BUF_INIT, y = SP_BUF_INIT;
    size_t used = 0;
    if (rest.len && rest.s[0] == '"') {
        if (!unquote(rest.s, rest.len, &x, &used) || used >= rest.len || rest.s[used] != ' ')
            goto fail;
        pline second = after(rest, used + 1);
        if (second.len && second.s[0] == '"') {
            size_t u2 = 0;
            if (!unquote(second.s, second.len, &y, &u2))
                goto fail;
        } else {
            sp_buf_add(&y, second.s, second.len);
        }
    } else {
        /* Try every space: the two names must agree past their first
         * component (a/ and b/) or be equal (--no-prefix). */
        const char *sq = memchr(rest.s, '"', rest.len);
        if (sq && sq > rest.s && sq[-1] == ' ') {
            size_t n = (size_t)(sq - rest.s) - 1;
            sp_buf_add(&x, rest.s, n);
            pline second = after(rest, n + 1);
            if (!unquote(second.s, second.len, &y, &used))
                goto fail;
        } else {
            for (size_t k = 1; k + 1 < rest.len; k++) {
                if (rest.s[k] != ' ')
                    continue;
                const char *l = rest.s, *r = rest.s + k + 1;
                size_t ln = k, rn = rest.len - k - 1;
                const char *ls = memchr(l, '/', ln), *rs = memchr(r, '/', rn);
                bool same = ln == rn && memcmp(l, r, ln) == 0;
                bool same_tail = ls && rs && ln - (size_t)(ls - l) == rn - (size_t)(rs - r) &&
                                 memcmp(ls, rs, ln - (size_t)(ls - l)) == 0;
                if (same || same_tail) {
                    sp_buf_add(&x, l, ln);
                    sp_buf_add(&y, r, rn);
                    break;
                }
            }
            if (!x.data)
                goto fail;
        }
    }
    sp_buf_add(&x, "", 0);
    sp_buf_add(&y, "", 0);
    *a = sp_buf_steal(&x);
    *b = sp_buf_steal(&y);
    return true;
fail:
    sp_buf_dispose(&x);
    sp_buf_dispose(&y);
    return false;
}

/* A number of a hunk header. */
static bool hunk_num(const char **p, const char *end, size_t *out)
{
    if (*p >= end || **p < '0' || **p > '9')
        return false;
    size_t v = 0;
    while (*p < end && **p >= '0' && **p <= '9') {
        if (v > (SIZE_MAX - 9) / 10)
            return false;
        v = v * 10 + (size_t)(**p - '0');
        (*p)++;
    }
    *out = v;
    return true;
}

/* "-A[,B] +C[,D] @@" after the opening "@@ ". */
static bool hunk_header(pline l, pp_hunk *h)
{
    const char *p = l.s + 3, *end = l.s + l.len;
    h->old_count = h->new_count = 1;
    if (p >= end || *p++ != '-' || !hunk_num(&p, end, &h->old_start))
        return false;
    if (p < end && *p == ',' && (p++, !hunk_num(&p, end, &h->old_count)))
        return false;
    if (p + 1 >= end || *p++ != ' ' || *p++ != '+' || !hunk_num(&p, end, &h->new_start))
        return false;
    if (p < end && *p == ',' && (p++, !hunk_num(&p, end, &h->new_count)))
        return false;
    if (end - p < 3 || memcmp(p, " @@", 3) != 0)
        return false;
    /* git apply takes "-0,N" too (and pins such a hunk to the start). */
    return true;
}

/* The hunks of one file, starting at an "@@ -" line. */
static int unified_hunks(pp_op *op, const char *display, const lines *L, size_t *i, size_t end,
                         sp_error **err)
{
    while (*i < end && starts(L->v[*i], "@@ -")) {
        pline hl = L->v[*i];
        pp_hunk *h = new_hunk(op, hl.no);
        h->header = hl.s;
        const char *close = memmem(hl.s + 3, hl.len - 3, " @@", 3);
        h->header_len = close ? (size_t)(close + 3 - hl.s) : hl.len;
        if (!hunk_header(hl, h)) {
            char *q = quoted(hl);
            int r = perr(err, hl.no, "bad hunk header %s; expected '@@ -A,B +C,D @@'", q);
            free(q);
            return r;
        }
        if (h->old_count == 0 && h->new_count == 0)
            return perr(err, hl.no, "hunk %zu of %s is empty", op->n_hunks, display);
        (*i)++;
        size_t old_left = h->old_count, new_left = h->new_count;
        pp_bline *last = NULL;
        while (old_left || new_left) {
            if (*i >= end)
                return perr(err, L->v[end - 1].no,
                            "hunk %zu of %s ends early: %zu old and %zu new lines are missing",
                            op->n_hunks, display, old_left, new_left);
            pline l = L->v[*i];
            char c = l.len ? l.s[0] : ' ';
            if (c == '\\') {
                if (!last)
                    return perr(err, l.no, "'\\' line with no line before it in hunk %zu of %s",
                                op->n_hunks, display);
                last->no_eol = true;
                (*i)++;
                continue;
            }
            bool ok = (c == ' ' && old_left && new_left) || (c == '-' && old_left) ||
                      (c == '+' && new_left);
            if (!ok) {
                char *q = quoted(l);
                int r;
                if (c == ' ' || c == '-' || c == '+')
                    r = perr(err, l.no,
                             "hunk %zu of %s has more lines than its header says (%zu old, %zu "
                             "new), found %s",
                             op->n_hunks, display, h->old_count, h->new_count, q);
                else
                    r = perr(err, l.no,
                             "expected a line of hunk %zu of %s starting with ' ', '-', '+' or "
                             "'\\', found %s",
                             op->n_hunks, display, q);
                free(q);
                return r;
            }
            /* git treats a line with nothing at all as an empty context
             * line (some editors strip the lone space). */
            last = push_line(h, c, l.len ? l.s + 1 : l.s, l.len ? l.len - 1 : 0);
            if (c != '+')
                old_left--;
            if (c != '-')
                new_left--;
            (*i)++;
        }
        if (*i < end && L->v[*i].len && L->v[*i].s[0] == '\\') {
            last->no_eol = true;
            (*i)++;
        }
        op->added += h->added;
        op->removed += h->removed;
    }
    return 0;
}

/* A git mode line's value: 100644 and 100755 are files; links and
 * submodules cannot be written by a text patch. */
static int git_mode(pline l, size_t skip, unsigned *mode, sp_error **err)
{
    pline v = trim(after(l, skip));
    unsigned m = 0;
    for (size_t k = 0; k < v.len; k++) {
        if (v.s[k] < '0' || v.s[k] > '7' || k > 7)
            return perr(err, l.no, "bad file mode '%.*s'", (int)v.len, v.s);
        m = m * 8 + (unsigned)(v.s[k] - '0');
    }
    if (v.len == 0)
        return perr(err, l.no, "file mode is missing");
    if ((m & 0170000) == 0120000)
        return perr(err, l.no, "symlink patches are not supported");
    if ((m & 0170000) == 0160000)
        return perr(err, l.no, "submodule patches are not supported");
    if ((m & 0170000) != 0100000)
        return perr(err, l.no, "bad file mode '%.*s'", (int)v.len, v.s);
    *mode = (m & 0111) ? 0755 : 0644;
    return 0;
}

/* One file of a unified diff: an optional "diff --git" line and extended
 * header, "---"/"+++" names, hunks. */
struct uhdr {
    bool git;
    char *git_a, *git_b; /* names on the "diff --git" line */
    char *old_name, *new_name;
    bool old_null, new_null, have_names;
    bool is_new, is_delete;
    char *rename_from, *rename_to, *copy_from, *copy_to;
    unsigned old_mode, new_mode;
    size_t names_no;
};

static void uhdr_dispose(struct uhdr *h)
{
    free(h->git_a);
    free(h->git_b);
    free(h->old_name);
    free(h->new_name);
    free(h->rename_from);
    free(h->rename_to);
    free(h->copy_from);
    free(h->copy_to);
}

static int header_value(char **out, pline l, size_t skip, sp_error **err)
{
    pline v = after(l, skip);
    if (v.len && v.s[0] == '"') {
        sp_buf b = SP_BUF_INIT;
        size_t used = 0;
        if (!unquote(v.s, v.len, &b, &used)) {
            sp_buf_dispose(&b);
            return perr(err, l.no, "bad quoted file name");
        }
        sp_buf_add(&b, "", 0);
        free(*out);
        *out = sp_buf_steal(&b);
        return 0;
    }
    free(*out);
    *out = sp_xstrndup(v.s, v.len);
    return 0;
}

/* The "---" and "+++" lines at *i. */
static int unified_names(struct uhdr *h, const lines *L, size_t *i, size_t end, sp_error **err)
{
    pline minus = L->v[*i], plus = L->v[*i + 1];
    pline ts_old, ts_new;
    h->names_no = minus.no;
    h->old_name = header_name(after(minus, 4), &ts_old);
    h->new_name = header_name(after(plus, 4), &ts_new);
    if (!h->old_name || !h->new_name)
        return perr(err, h->old_name ? plus.no : minus.no, "bad quoted file name");
    h->have_names = true;
    h->old_null = dev_null(h->old_name);
    h->new_null = dev_null(h->new_name);
    if (h->git) {
        /* git writes a/ and b/ unless told --no-prefix. */
        bool prefixed = (h->old_null || strncmp(h->old_name, "a/", 2) == 0) &&
                        (h->new_null || strncmp(h->new_name, "b/", 2) == 0);
        if (prefixed) {
            if (!h->old_null)
                strip_first(&h->old_name);
            if (!h->new_null)
                strip_first(&h->new_name);
        }
    } else {
        bool strip;
        if (h->old_null || h->new_null) {
            const char *n = h->old_null ? h->new_name : h->old_name;
            strip = strncmp(n, "a/", 2) == 0 || strncmp(n, "b/", 2) == 0;
        } else {
            strip = first_component_differs(h->old_name, h->new_name);
        }
        if (strip) {
            if (!h->old_null)
                strip_first(&h->old_name);
            if (!h->new_null)
                strip_first(&h->new_name);
        }
        if (!h->old_null && !h->new_null && epoch_timestamp(ts_old))
            h->old_null = true;
        else if (!h->old_null && !h->new_null && epoch_timestamp(ts_new))
            h->new_null = true;
    }
    *i += 2;
    (void)end;
    return 0;
}

/* Turn a parsed header into an operation with normalized paths. */
static int unified_op(pp_patch *p, struct uhdr *h, size_t no, pp_op **out, sp_error **err)
{
    const char *path = NULL, *new_path = NULL;
    sp_patch_action action = SP_PATCH_UPDATE;
    const char *oldn = h->have_names && !h->old_null ? h->old_name : NULL;
    const char *newn = h->have_names && !h->new_null ? h->new_name : NULL;
    if (h->git && !h->have_names) {
        /* No "---"/"+++": the names come from the "diff --git" line. */
        if (h->git_a && h->git_b && strncmp(h->git_a, "a/", 2) == 0 &&
            strncmp(h->git_b, "b/", 2) == 0) {
            strip_first(&h->git_a);
            strip_first(&h->git_b);
        }
        oldn = h->git_a;
        newn = h->git_b;
    }
    if (h->rename_from || h->rename_to || h->copy_from || h->copy_to) {
        bool copy = h->copy_from || h->copy_to;
        path = copy ? h->copy_from : h->rename_from;
        new_path = copy ? h->copy_to : h->rename_to;
        if (!path || !new_path)
            return perr(err, no, "%s needs both '%s from' and '%s to'", copy ? "copy" : "rename",
                        copy ? "copy" : "rename", copy ? "copy" : "rename");
        action = copy ? SP_PATCH_COPY : SP_PATCH_MOVE;
    } else if (h->is_new || (h->have_names && h->old_null)) {
        if (h->have_names && h->new_null)
            return perr(err, h->names_no, "both sides of the diff are /dev/null");
        path = newn;
        action = SP_PATCH_ADD;
    } else if (h->is_delete || (h->have_names && h->new_null)) {
        path = oldn;
        action = SP_PATCH_DELETE;
    } else if (h->git) {
        path = newn ? newn : oldn;
        if (oldn && newn && strcmp(oldn, newn) != 0)
            return perr(err, h->have_names ? h->names_no : no,
                        "the old and new names differ (%s, %s) without a rename header", oldn,
                        newn);
    } else {
        /* diff -u old new: git apply's choice, the old name when it is a
         * prefix of the new one ("x" and "x.new"), else the new name. */
        path = strlen(oldn) < strlen(newn) && strncmp(oldn, newn, strlen(oldn)) == 0 ? oldn : newn;
    }
    if (!path)
        return perr(err, no, "cannot tell which file this diff is about");

    pp_op *op = new_op(p, action, no);
    int r = norm_path(p, &op->path, path, strlen(path), no, err);
    if (r < 0)
        return r;
    if (new_path && (r = norm_path(p, &op->new_path, new_path, strlen(new_path), no, err)) < 0)
        return r;
    op->mode = action == SP_PATCH_DELETE ? 0 : (h->new_mode ? h->new_mode : 0);
    *out = op;
    return 0;
}

static int parse_git_header(struct uhdr *h, const lines *L, size_t *i, size_t end, sp_error **err)
{
    pline first = L->v[*i];
    h->git = true;
    (void)git_line_names(after(first, strlen("diff --git ")), &h->git_a, &h->git_b);
    int r = 0;
    for ((*i)++; *i < end && r == 0; (*i)++) {
        pline l = L->v[*i];
        if (starts(l, "old mode "))
            r = git_mode(l, 9, &h->old_mode, err);
        else if (starts(l, "new mode "))
            r = git_mode(l, 9, &h->new_mode, err);
        else if (starts(l, "deleted file mode ")) {
            h->is_delete = true;
            r = git_mode(l, 18, &h->old_mode, err);
        } else if (starts(l, "new file mode ")) {
            h->is_new = true;
            r = git_mode(l, 14, &h->new_mode, err);
        } else if (starts(l, "rename from "))
            r = header_value(&h->rename_from, l, 12, err);
        else if (starts(l, "rename to "))
            r = header_value(&h->rename_to, l, 10, err);
        else if (starts(l, "rename old "))
            r = header_value(&h->rename_from, l, 11, err);
        else if (starts(l, "rename new "))
            r = header_value(&h->rename_to, l, 11, err);
        else if (starts(l, "copy from "))
            r = header_value(&h->copy_from, l, 10, err);
        else if (starts(l, "copy to "))
            r = header_value(&h->copy_to, l, 8, err);
        else if (starts(l, "similarity index ") || starts(l, "dissimilarity index ") ||
                 starts(l, "index "))
            continue;
        else if (starts(l, "GIT binary patch") || starts(l, "Binary files "))
            return perr(err, l.no, "binary patches are not supported");
        else
            break;
    }
    return r;
}

static int parse_unified(pp_patch *p, const lines *L, sp_error **err)
{
    size_t b, e;
    envelope(L, false, &b, &e);
    size_t i = b;
    while (i < e) {
        pline l = L->v[i];
        bool git = starts(l, "diff --git ");
        bool trad = !git && starts(l, "--- ") && i + 1 < e && starts(L->v[i + 1], "+++ ");
        if (!git && !trad) {
            if (starts(l, "GIT binary patch") || starts(l, "Binary files "))
                return perr(err, l.no, "binary patches are not supported");
            if (starts(l, "@@ -"))
                return perr(err, l.no, "hunk without '---' and '+++' file names before it");
            i++; /* text around the diff (a commit message, a mail) */
            continue;
        }
        struct uhdr h;
        memset(&h, 0, sizeof(h));
        size_t no = l.no;
        int r = 0;
        if (git)
            r = parse_git_header(&h, L, &i, e, err);
        if (r == 0 && i + 1 < e && starts(L->v[i], "--- ") && starts(L->v[i + 1], "+++ "))
            r = unified_names(&h, L, &i, e, err);
        if (r == 0 && !git && (i >= e || !starts(L->v[i], "@@ -")))
            r = perr(err, i < e ? L->v[i].no : L->v[e - 1].no,
                     "expected a hunk header '@@ -A,B +C,D @@' after '+++'");
        pp_op *op = NULL;
        if (r == 0)
            r = unified_op(p, &h, no, &op, err);
        if (r == 0)
            r = unified_hunks(op, op->path, L, &i, e, err);
        if (r == 0 && h.have_names && op->n_hunks == 0 && op->action != SP_PATCH_MOVE &&
            op->action != SP_PATCH_COPY)
            r = perr(err, i < e ? L->v[i].no : L->v[e - 1].no,
                     "expected a hunk header '@@ -A,B +C,D @@' for %s", op->path);
        uhdr_dispose(&h);
        if (r < 0)
            return r;
    }
    if (p->n == 0)
        return perr(err, b < e ? L->v[b].no : 1,
                    "no file changes found; expected a unified diff ('--- a/FILE', '+++ "
                    "b/FILE', '@@ -A,B +C,D @@') or '" BEGIN_PATCH "'");
    return 0;
}

/* ------------------------------------------------------------- entry -- */

/* A unified diff whose every header line ends in CR went through a CRLF
 * transport (git never writes a CR there): each of its lines lost one. */
static bool crlf_transport(const lines *L)
{
    size_t headers = 0;
    for (size_t i = 0; i < L->n; i++) {
        pline l = L->v[i];
        if (!starts(l, "diff --git ") && !starts(l, "--- ") && !starts(l, "+++ ") &&
            !starts(l, "@@ -"))
            continue;
        if (!l.len || l.s[l.len - 1] != '\r')
            return false;
        headers++;
    }
    return headers > 0;
}

static sp_patch_format detect(const lines *L)
{
    size_t b, e;
    envelope(L, true, &b, &e);
    for (size_t i = b; i < e; i++)
        if (equals(trim(L->v[i]), BEGIN_PATCH))
            return SP_PATCH_CODEX;
    for (size_t i = b; i < e; i++)
        if (starts(L->v[i], "diff --git ") ||
            (starts(L->v[i], "--- ") && i + 1 < e && starts(L->v[i + 1], "+++ ")))
            return SP_PATCH_UNIFIED;
    return SP_PATCH_AUTO;
}

/* The folder of `cd DIR &&`, normalized; NULL for the root. */
static int set_workdir(pp_patch *p, const heredoc *h, sp_error **err)
{
    if (!h->cd)
        return 0;
    char *w = NULL;
    int r = sp_fs_path_normalize(&w, h->cd, strlen(h->cd), err);
    if (r < 0)
        return sp_err_wrap(err, r, "patch line %zu: cd %s", h->cd_no, h->cd);
    if (strcmp(w, ".") == 0)
        free(w);
    else
        p->workdir = w;
    return 0;
}

int pp_parse(pp_patch *out, const char *text, size_t len, sp_patch_format fmt, sp_error **err)
{
    memset(out, 0, sizeof(*out));
    if (fmt != SP_PATCH_AUTO && fmt != SP_PATCH_CODEX && fmt != SP_PATCH_UNIFIED)
        return sp_err_set(err, SP_EINVAL, 0, "unknown patch format %d", (int)fmt);
    lines L = {NULL, 0};
    heredoc h;
    size_t b, e;
    split_lines(&L, text, len, false);
    int r = unwrap(&L, &b, &e, &h, err);
    if (r < 0) {
        free(L.v);
        return r;
    }
    if (fmt == SP_PATCH_AUTO) {
        lines body = {L.v + b, e - b};
        fmt = detect(&body);
        if (fmt == SP_PATCH_AUTO) {
            free(L.v);
            free(h.cd);
            return sp_err_reason(
                err, SP_R_PATCH_PARSE,
                sp_err_set(err, SP_EINVAL, 0,
                           "not a patch: expected '" BEGIN_PATCH
                           "' or a unified diff ('--- a/FILE', '+++ b/FILE', '@@ ... @@')"));
        }
    }
    free(L.v);
    /* CRLF line ends are part of the content in a unified diff (a file
     * with CRLF lines has them in its diff) but noise around Codex lines.
     * Either way the lines are the same ones, so [b, e) still holds. */
    split_lines(&L, text, len, fmt == SP_PATCH_CODEX);
    lines body = {L.v + b, e - b};
    if (fmt == SP_PATCH_UNIFIED && crlf_transport(&body)) {
        free(L.v);
        split_lines(&L, text, len, true);
        body.v = L.v + b;
    }
    out->format = fmt;
    r = set_workdir(out, &h, err);
    free(h.cd);
    if (r == 0)
        r = fmt == SP_PATCH_CODEX ? parse_codex(out, &body, err) : parse_unified(out, &body, err);
    free(L.v);
    if (r < 0)
        pp_patch_dispose(out);
    return r;
}
