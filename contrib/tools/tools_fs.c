/* The filesystem tools: list_dir, read_file (slice and indentation modes),
 * write_file, edit_file, insert, delete, mkdir, stat, glob, grep.
 *
 * Everything goes through sp_fs, contained beneath the workspace; in
 * unrestricted mode (a bare folder, trusted use) through an sp_fs on "/"
 * with paths made absolute, so the same code serves both. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs_json.h"
#include "tools_core.h"
#include "tools_internal.h"

/* Entries sp_fs_list may gather before list_dir slices them. */
#define LIST_MAX_ENTRIES 100000
/* Longest name list_dir shows. */
#define NAME_MAX_SHOWN 500

/* ----------------------------------------------------------- locking -- */

/* Calls of tools that change files (NEED_WRITE: write_file, edit_file,
 * insert, delete, mkdir, apply_patch, restore) hold the sandbox's edit lock
 * across the whole call, taken by the dispatcher (see
 * sp_sandbox_edit_lock()); a bare folder has no state folder and takes
 * none. */
int tools_edit_lock(int *fd, sp_tools *t, tool_call *c)
{
    *fd = -1;
    if (!t->sb || t->agent || t->opts.read_only)
        return 0;
    sp_error *err = NULL;
    int r = sp_sandbox_edit_lock(t->sb, &err);
    if (r < 0)
        return call_fail_err(c, r, err, NULL);
    *fd = r;
    return 0;
}

void tools_edit_unlock(int fd)
{
    sp_sandbox_edit_unlock(fd);
}

/* ------------------------------------------------------------- paths -- */

/* The absolute form of a path for the model: /workspace/... in a sandbox,
 * the host path for a bare folder. */
static char *abs_display(const sp_tools *t, const char *rel)
{
    if (t->fs_any)
        return fs_display(t, rel);
    const char *base = t->sb && !t->agent ? SP_WORKSPACE_MOUNT : t->root;
    if (strcmp(rel, ".") == 0)
        return sp_xstrdup(base);
    return sp_xasprintf("%s/%s", base, rel);
}

/* The normalized path the library will use, for messages and changes. */
static char *norm(const sp_tools *t, const char *rel)
{
    char *n = NULL;
    if (t->fs_any)
        return fs_display(t, rel);
    if (sp_fs_path_normalize(&n, rel, strlen(rel), NULL) < 0 || !n)
        return sp_xstrdup(rel);
    return n;
}

/* Rewrite the "path" members of an array of objects for display. */
static void fix_paths(const sp_tools *t, cJSON *arr)
{
    if (!t->fs_any || !arr)
        return;
    cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        cJSON *p = cJSON_GetObjectItemCaseSensitive(it, "path");
        if (cJSON_IsString(p)) {
            char *d = fs_display(t, p->valuestring);
            cJSON_ReplaceItemInObjectCaseSensitive(it, "path", cJSON_CreateString(d));
            free(d);
        }
    }
}

/* Text from the workspace for a line of the answer: control characters
 * (tab excepted) and invalid UTF-8 become \xNN so that a name or a line
 * can neither break the answer's lines nor carry escape sequences. */
static void add_clean(sp_buf *b, const char *s, size_t len, bool keep_tab)
{
    char *u = sp_json_sanitize(s, len);
    if (!u)
        return;
    for (const unsigned char *p = (const unsigned char *)u; *p; p++) {
        if ((*p < 0x20 && !(keep_tab && *p == '\t')) || *p == 0x7f)
            sp_buf_printf(b, "\\x%02x", *p);
        else
            sp_buf_addc(b, (char)*p);
    }
    free(u);
}

/* ---------------------------------------------------------- list_dir -- */

/* Tree order: a folder right before its contents. '/' sorts before every
 * other byte, and the end of a string before '/'. */
static int tree_cmp(const void *a, const void *b)
{
    const unsigned char *x = (const unsigned char *)((const sp_fs_entry *)a)->path;
    const unsigned char *y = (const unsigned char *)((const sp_fs_entry *)b)->path;
    for (;; x++, y++) {
        int cx = *x == '\0' ? -1 : *x == '/' ? 0 : *x + 1;
        int cy = *y == '\0' ? -1 : *y == '/' ? 0 : *y + 1;
        if (cx != cy)
            return cx < cy ? -1 : 1;
        if (cx == -1)
            return 0;
    }
}

/* A list of globs from argument `key`: an array of strings or, when
 * `one_ok`, a single string. *out (NULL-terminated, pointing into `a`) is
 * NULL when the argument is absent; an empty array gives a list holding
 * only NULL. */
static int glob_list(const char ***out, const cJSON *a, const char *key, bool one_ok, tool_call *c)
{
    *out = NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, key);
    if (!v || cJSON_IsNull(v))
        return 0;
    if (one_ok && cJSON_IsString(v)) {
        const char **l = sp_xcalloc(2, sizeof(char *));
        l[0] = v->valuestring;
        *out = l;
        return 0;
    }
    if (!cJSON_IsArray(v))
        return call_fail(c, SP_EINVAL, "argument '%s' must be %s, not %s", key,
                         one_ok ? "a glob or an array of globs" : "an array of globs",
                         tools_type_of(v));
    size_t n = (size_t)cJSON_GetArraySize(v), i = 0;
    const char **l = sp_xcalloc(n + 1, sizeof(char *));
    const cJSON *e;
    cJSON_ArrayForEach(e, v)
    {
        if (!cJSON_IsString(e)) {
            free(l);
            return call_fail(c, SP_EINVAL, "argument '%s' must hold strings, not %s", key,
                             tools_type_of(e));
        }
        l[i++] = e->valuestring;
    }
    *out = l;
    return 0;
}

/* A glob starting with '!' where the tool has no exclusion is refused, not
 * matched as a literal '!' (rg's habit, which would silently match
 * nothing); '\!' is the literal. `what` says what the tool's globs do
 * instead. */
static int no_negation(const char *const *globs, const char *what, tool_call *c)
{
    for (size_t i = 0; globs && globs[i]; i++) {
        if (globs[i][0] != '!')
            continue;
        char *q = tools_quote(globs[i], strlen(globs[i]));
        call_fail(c, SP_EINVAL,
                  "'%s' starts with '!', but %s; '\\!' matches a name that starts with '!'", q,
                  what);
        free(q);
        return SP_EINVAL;
    }
    return 0;
}

int tool_list_dir(sp_tools *t, const cJSON *a, tool_call *c)
{
    const char *path = sp_json_str_or(a, "path", ".");
    unsigned depth = (unsigned)sp_json_int(a, "depth", 2);
    long long offset = sp_json_int(a, "offset", 1);
    size_t limit = (size_t)sp_json_int(a, "limit", 200);
    size_t start = offset > 1 ? (size_t)(offset - 1) : 0;
    const char **ignore = NULL;
    if (glob_list(&ignore, a, "ignore", false, c) < 0)
        return SP_EINVAL;
    if (no_negation(ignore,
                    "list_dir's ignore globs hide what they match and bring nothing back: to "
                    "list only some files use glob ('**/*.c')",
                    c) < 0) {
        free(ignore);
        return SP_EINVAL;
    }

    sp_fs *fs;
    const char *rel;
    char *owned;
    fs_target(&fs, &rel, &owned, t, path, c);
    sp_fs_list_opts lo = SP_FS_LIST_OPTS_INIT;
    lo.depth = depth;
    lo.max_entries = LIST_MAX_ENTRIES;
    lo.ignore = ignore;
    sp_fs_entries *e = NULL;
    sp_error *err = NULL;
    int r = sp_fs_list(&e, fs, rel, &lo, &err);
    free(ignore);
    if (r < 0) {
        free(owned);
        return call_fail_err(c, r, err,
                             r == SP_EINVAL ? "list_dir takes a folder; use stat or read_file "
                                              "for a file"
                                            : NULL);
    }
    if (e->n)
        qsort(e->v, e->n, sizeof(*e->v), tree_cmp);
    char *n = norm(t, rel);
    char *abs = abs_display(t, n);
    if (start > 0 && start >= e->n) {
        r = call_fail(c, SP_EINVAL, "offset %lld is past the end: %s has %zu entries at depth %u",
                      offset, abs, e->n, depth);
        goto done;
    }
    size_t end = e->n - start > limit ? start + limit : e->n;
    sp_buf_printf(&c->message, "Absolute path: %s\n", abs);
    cJSON *v = cJSON_CreateObject();
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = start; i < end; i++) {
        const sp_fs_entry *x = &e->v[i];
        for (unsigned d = 1; d < x->depth; d++)
            sp_buf_adds(&c->message, "  ");
        size_t nl = strlen(x->name);
        add_clean(&c->message, x->name, nl > NAME_MAX_SHOWN ? NAME_MAX_SHOWN : nl, false);
        if (nl > NAME_MAX_SHOWN)
            sp_buf_adds(&c->message, "...");
        const char *type = sp_fs_type_name(x->type);
        switch (x->type) {
        case SP_FS_DIR:
            sp_buf_addc(&c->message, '/');
            if (x->contents_skipped)
                sp_buf_adds(&c->message, " (not listed)");
            break;
        case SP_FS_SYMLINK:
            sp_buf_adds(&c->message, "@ -> ");
            if (x->link_target)
                add_clean(&c->message, x->link_target, strlen(x->link_target), false);
            break;
        case SP_FS_FILE:
            if (x->mode & 0111)
                sp_buf_addc(&c->message, '*');
            break;
        default:
            sp_buf_addc(&c->message, '?');
            break;
        }
        sp_buf_addc(&c->message, '\n');
        cJSON *o = cJSON_CreateObject();
        char *dp = fs_display(t, x->path);
        bool ok = o && sp_json_add_string(o, "path", dp) && sp_json_add_string(o, "type", type) &&
                  sp_json_add_u64(o, "depth", x->depth);
        free(dp);
        if (ok && x->type == SP_FS_FILE)
            ok = sp_json_add_u64(o, "size", x->size) &&
                 cJSON_AddBoolToObject(o, "executable", (x->mode & 0111) != 0);
        if (ok && x->type == SP_FS_SYMLINK)
            ok = sp_json_add_string(o, "link_target", x->link_target);
        if (ok && x->contents_skipped)
            ok = cJSON_AddBoolToObject(o, "contents_skipped", true) != NULL;
        if (!ok || !arr || !cJSON_AddItemToArray(arr, o))
            cJSON_Delete(o);
    }
    bool more = end < e->n || e->truncated;
    if (e->n == 0)
        sp_buf_adds(&c->message, "(empty folder)\n");
    bool any_skipped = false;
    for (size_t i = start; i < end && !any_skipped; i++)
        any_skipped = e->v[i].contents_skipped;
    if (any_skipped)
        sp_buf_adds(&c->message, "(not listed: dependency, cache and VCS folders; list one by "
                                 "its path, or pass ignore: [] to list everything)\n");
    if (end < e->n)
        sp_buf_printf(&c->message, "More than %zu entries found; continue with offset=%zu\n", limit,
                      end + 1);
    else if (e->truncated)
        sp_buf_printf(&c->message,
                      "Listing stopped at %d entries; list a subfolder or use a "
                      "smaller depth\n",
                      LIST_MAX_ENTRIES);
    c->truncated = more;
    if (v) {
        sp_json_add(v, "path", sp_json_string(abs));
        sp_json_add(v, "entries", arr);
        arr = NULL;
        sp_json_add_u64(v, "offset", start + 1);
        sp_json_add_u64(v, "count", end - start);
        sp_json_add_u64(v, "total", e->n);
        cJSON_AddBoolToObject(v, "truncated", more);
        if (end < e->n)
            sp_json_add_u64(v, "next_offset", end + 1);
    }
    cJSON_Delete(arr);
    c->value = v;
    r = 0;
done:
    free(abs);
    free(n);
    free(owned);
    sp_fs_entries_free(e);
    return r;
}

/* --------------------------------------------------------- read_file -- */

typedef struct lines {
    const char **p; /* start of each line */
    size_t *len;    /* bytes, without the newline */
    size_t n;
} lines;

static void split_lines(lines *ls, const char *s, size_t len)
{
    size_t cap = 64;
    ls->p = sp_xmalloc(cap * sizeof(*ls->p));
    ls->len = sp_xmalloc(cap * sizeof(*ls->len));
    ls->n = 0;
    const char *end = s + len;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
        if (ls->n == cap) {
            cap *= 2;
            ls->p = sp_xrealloc(ls->p, cap * sizeof(*ls->p));
            ls->len = sp_xrealloc(ls->len, cap * sizeof(*ls->len));
        }
        ls->p[ls->n] = s;
        ls->len[ls->n] = n;
        ls->n++;
        s += n + (nl ? 1 : 0);
    }
}

static void lines_free(lines *ls)
{
    free(ls->p);
    free(ls->len);
}

/* Add lines [from, to) numbered "L<n>: " to the message and their text
 * to `content`, within the byte budget. Returns the end actually reached. */
static size_t add_numbered(tool_call *c, sp_buf *content, const lines *ls, size_t from, size_t to,
                           size_t first_no, size_t budget)
{
    size_t i = from;
    for (; i < to; i++) {
        if (i > from && c->message.len + ls->len[i] + 16 > budget)
            break;
        sp_buf_printf(&c->message, "L%zu: ", first_no + i);
        add_clean(&c->message, ls->p[i], ls->len[i], true);
        sp_buf_addc(&c->message, '\n');
        sp_buf_add(content, ls->p[i], ls->len[i]);
        sp_buf_addc(content, '\n');
    }
    return i;
}

static int read_error(const sp_tools *t, tool_call *c, int r, sp_error *err)
{
    bool folder = err && err->reason == SP_R_IS_DIRECTORY;
    bool image = r == SP_EESCAPE && err && err->message &&
                 strstr(err->message, "into the container's image");
    const char *hint = folder  ? "read_file takes a file; use list_dir for a folder"
                       : image ? (t->sb ? "the file tools reach the workspace only: read it with "
                                          "the shell tool (cat) instead"
                                        : "the file tools reach the workspace only")
                               : NULL;
    return call_fail_err(c, r, err, hint);
}

static bool is_not_text(int r, const sp_error *err)
{
    return r == SP_EINVAL && err && err->reason == SP_R_NOT_TEXT;
}

/* A text edit of a file that is not text: the library points at its byte
 * reader, which the model lacks; say what the tools can do instead. */
static int not_text_fail(tool_call *c, int r, sp_error *err)
{
    const char *m = err->message;
    const char *semi = strstr(m, "; read its bytes");
    int n = semi ? (int)(semi - m) : (int)strlen(m);
    call_fail_reason(c, r, SP_R_NOT_TEXT,
                     "%.*s; text edits need UTF-8 text: read_file returns its bytes as base64, "
                     "and write_file with encoding 'base64' replaces it whole",
                     n, m);
    sp_error_free(err);
    return r;
}

/* A file that is not UTF-8 text, whole: base64 with its media type, within
 * max_read_bytes. The message carries the base64 too when it fits the
 * answer's cap, for clients that show the model only the text. */
static int read_binary(sp_tools *t, tool_call *c, sp_fs *fs, const char *rel, const char *shown)
{
    sp_fs_info *st = NULL;
    sp_error *err = NULL;
    int r = sp_fs_stat_target(&st, fs, rel, &err);
    if (r < 0)
        return read_error(t, c, r, err);
    uint64_t size = st->size;
    sp_fs_info_free(st);
    if (size > t->opts.max_read_bytes)
        return call_fail_reason(c, SP_ETOOBIG, SP_R_TOO_LARGE,
                                "%s is a binary file of %" PRIu64
                                " bytes, over the read limit of %zu bytes; "
                                "nothing was returned",
                                shown, size, t->opts.max_read_bytes);
    sp_fs_bytes *b = NULL;
    r = sp_fs_read_bytes(&b, fs, rel, 0, t->opts.max_read_bytes, &err);
    if (r < 0)
        return read_error(t, c, r, err);
    if (b->truncated) {
        /* It grew past the limit since the stat. */
        sp_fs_bytes_free(b);
        return call_fail_reason(c, SP_ETOOBIG, SP_R_TOO_LARGE,
                                "%s is a binary file over the read limit of %zu bytes; "
                                "nothing was returned",
                                shown, t->opts.max_read_bytes);
    }
    const char *mime = sp_mime_sniff(b->data, b->len);
    char *b64 = sp_base64_encode(b->data, b->len);
    if (!b64) {
        sp_fs_bytes_free(b);
        return call_fail(c, SP_ERROR, "out of memory encoding %s", shown);
    }
    size_t blen = strlen(b64);
    sp_buf_printf(&c->message, "%s is a binary file (%s, %zu bytes), base64-encoded", shown, mime,
                  b->len);
    if (blen + c->message.len + 2 <= t->opts.max_text_bytes)
        sp_buf_printf(&c->message, ":\n%s\n", b64);
    else
        sp_buf_printf(&c->message, " in value.base64 (%zu characters, too long to show here)\n",
                      blen);
    cJSON *v = cJSON_CreateObject();
    if (v) {
        sp_json_add_string(v, "path", shown);
        sp_json_add_string(v, "mode", "binary");
        sp_json_add_string(v, "mime", mime);
        sp_json_add_u64(v, "size", b->len);
        sp_json_add_string(v, "encoding", "base64");
        sp_json_add(v, "base64", cJSON_CreateString(b64));
    }
    c->value = v;
    free(b64);
    sp_fs_bytes_free(b);
    return 0;
}

static cJSON *read_value(const char *path, const char *mode, size_t first, size_t last,
                         size_t total, const sp_buf *content, bool truncated, size_t next,
                         size_t cut)
{
    cJSON *v = cJSON_CreateObject();
    if (!v)
        return NULL;
    sp_json_add_string(v, "path", path);
    sp_json_add_string(v, "mode", mode);
    sp_json_add_u64(v, "start_line", first);
    sp_json_add_u64(v, "end_line", last);
    sp_json_add_u64(v, "total_lines", total);
    sp_json_add(v, "content", sp_json_string_n(content->data ? content->data : "", content->len));
    sp_json_add_u64(v, "lines_cut", cut);
    cJSON_AddBoolToObject(v, "truncated", truncated);
    if (next)
        sp_json_add_u64(v, "next_offset", next);
    return v;
}

static int read_slice(sp_tools *t, tool_call *c, sp_fs *fs, const char *rel, const char *shown,
                      size_t start, size_t limit)
{
    sp_fs_read_opts ro = SP_FS_READ_OPTS_INIT;
    ro.offset = start;
    ro.limit = limit;
    sp_fs_text *txt = NULL;
    sp_error *err = NULL;
    int r = sp_fs_read(&txt, fs, rel, &ro, &err);
    if (is_not_text(r, err)) {
        sp_error_free(err);
        return read_binary(t, c, fs, rel, shown);
    }
    if (r < 0)
        return read_error(t, c, r, err);
    if (start > 0 && start >= txt->total_lines) {
        r = call_fail(c, SP_EINVAL, "offset %zu is past the end: %s has %zu lines", start + 1,
                      shown, txt->total_lines);
        sp_fs_text_free(txt);
        return r;
    }
    lines ls;
    split_lines(&ls, txt->content, txt->content_len);
    sp_buf content = {0};
    size_t reached = add_numbered(c, &content, &ls, 0, ls.n, start + 1, t->opts.max_text_bytes);
    size_t first = start + 1, last = start + reached;
    bool more = last < txt->total_lines;
    if (txt->total_lines == 0)
        sp_buf_adds(&c->message, "(empty file)\n");
    else if (more)
        sp_buf_printf(&c->message, "[showing lines %zu-%zu of %zu; continue with offset=%zu]\n",
                      first, last, txt->total_lines, last + 1);
    c->truncated = more;
    c->value = read_value(shown, "slice", txt->total_lines ? first : 0, last, txt->total_lines,
                          &content, more, more ? last + 1 : 0, txt->lines_cut);
    sp_buf_dispose(&content);
    lines_free(&ls);
    sp_fs_text_free(txt);
    return 0;
}

/* Indentation width of a line (a tab counts to the next multiple of 4),
 * or -1 for a blank line. */
static int indent_of(const char *s, size_t n)
{
    int w = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ')
            w++;
        else if (s[i] == '\t')
            w = (w / 4 + 1) * 4;
        else if (s[i] == '\r')
            continue;
        else
            return w;
    }
    return -1;
}

/* A line that closes the block its header opened: "}", "end", "fi"... */
static bool is_closer(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    if (i == n)
        return false;
    if (strchr("})]", s[i]))
        return true;
    static const char *const words[] = {"end", "fi", "done", "esac", "until", "#endif", NULL};
    for (size_t k = 0; words[k]; k++) {
        size_t wl = strlen(words[k]);
        if (n - i >= wl && memcmp(s + i, words[k], wl) == 0 &&
            (n - i == wl || !((s[i + wl] >= 'a' && s[i + wl] <= 'z') || s[i + wl] == '_')))
            return true;
    }
    return false;
}

/* Comment or decorator lines that belong to the header below them. */
static bool is_preamble(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    if (i == n)
        return false;
    return s[i] == '#' || s[i] == '@' ||
           (n - i >= 2 && (memcmp(s + i, "//", 2) == 0 || memcmp(s + i, "/*", 2) == 0 ||
                           memcmp(s + i, "--", 2) == 0)) ||
           (s[i] == '*' && (n - i == 1 || s[i + 1] == ' ' || s[i + 1] == '/'));
}

static int read_indentation(sp_tools *t, tool_call *c, sp_fs *fs, const char *rel,
                            const char *shown, size_t anchor, size_t limit, unsigned levels)
{
    sp_fs_read_opts ro = SP_FS_READ_OPTS_INIT;
    ro.offset = 0;
    ro.limit = SIZE_MAX;
    sp_fs_text *txt = NULL;
    sp_error *err = NULL;
    int r = sp_fs_read(&txt, fs, rel, &ro, &err);
    if (is_not_text(r, err)) {
        sp_error_free(err);
        return read_binary(t, c, fs, rel, shown);
    }
    if (r < 0)
        return read_error(t, c, r, err);
    lines ls;
    split_lines(&ls, txt->content, txt->content_len);
    size_t n = ls.n;
    if (n == 0 || anchor >= n) {
        r = n == 0 ? call_fail(c, SP_EINVAL, "%s is empty", shown)
                   : call_fail(c, SP_EINVAL, "line %zu is past the end: %s has %zu lines",
                               anchor + 1, shown, n);
        lines_free(&ls);
        sp_fs_text_free(txt);
        return r;
    }
    int *ind = sp_xmalloc(n * sizeof(*ind));
    for (size_t i = 0; i < n; i++)
        ind[i] = indent_of(ls.p[i], ls.len[i]);

    /* A blank anchor stands for the next line with text (or the previous). */
    size_t a = anchor;
    while (a < n && ind[a] < 0)
        a++;
    if (a == n) {
        a = anchor;
        while (a > 0 && ind[a] < 0)
            a--;
    }
    size_t first, last; /* inclusive */
    if (ind[a] < 0) {
        first = 0;
        last = n - 1;
    } else {
        /* The anchor's own block: the anchor itself when it opens one,
         * else the nearest line above with less indentation. */
        size_t nx = a + 1;
        while (nx < n && ind[nx] < 0)
            nx++;
        long h = -1;
        if (nx < n && ind[nx] > ind[a])
            h = (long)a;
        else
            for (long i = (long)a - 1; i >= 0; i--)
                if (ind[i] >= 0 && ind[i] < ind[a]) {
                    h = i;
                    break;
                }
        for (unsigned k = 0; k < levels && h > 0; k++) {
            long up = -1;
            for (long i = h - 1; i >= 0; i--)
                if (ind[i] >= 0 && ind[i] < ind[h]) {
                    up = i;
                    break;
                }
            if (up < 0)
                break;
            h = up;
        }
        if (h < 0) {
            /* Top level without a header: the paragraph around the anchor. */
            first = a;
            while (first > 0 && ind[first - 1] >= ind[a])
                first--;
            last = a;
            while (last + 1 < n && ind[last + 1] >= ind[a])
                last++;
        } else {
            size_t hh = (size_t)h;
            last = hh;
            for (size_t i = hh + 1; i < n && (ind[i] < 0 || ind[i] > ind[hh]); i++)
                last = i;
            while (last > hh && ind[last] < 0)
                last--;
            if (last + 1 < n && ind[last + 1] == ind[hh] &&
                is_closer(ls.p[last + 1], ls.len[last + 1]))
                last++;
            first = hh;
            while (first > 0 && ind[first - 1] == ind[hh] &&
                   is_preamble(ls.p[first - 1], ls.len[first - 1]))
                first--;
        }
    }
    size_t count = last - first + 1;
    bool cut = false;
    if (count > limit) {
        /* Keep the anchor in view. */
        size_t s = a >= first + limit / 2 ? a - limit / 2 : first;
        if (s + limit > last + 1)
            s = last + 1 - limit;
        first = s;
        last = s + limit - 1;
        cut = true;
    }
    sp_buf content = {0};
    size_t reached = add_numbered(c, &content, &ls, first, last + 1, 1, t->opts.max_text_bytes);
    if (reached <= last) {
        last = reached - 1;
        cut = true;
    }
    if (cut)
        sp_buf_printf(&c->message,
                      "[the block is longer: showing lines %zu-%zu; read more with mode=slice]\n",
                      first + 1, last + 1);
    c->truncated = cut;
    c->value =
        read_value(shown, "indentation", first + 1, last + 1, n, &content, cut, 0, txt->lines_cut);
    if (c->value)
        sp_json_add_u64(c->value, "anchor_line", a + 1);
    sp_buf_dispose(&content);
    free(ind);
    lines_free(&ls);
    sp_fs_text_free(txt);
    return 0;
}

int tool_read_file(sp_tools *t, const cJSON *a, tool_call *c)
{
    const char *path = sp_json_str_or(a, "path", "");
    long long offset = sp_json_int(a, "offset", 1);
    size_t limit = (size_t)sp_json_int(a, "limit", 400);
    const char *mode = sp_json_str_or(a, "mode", "slice");
    unsigned levels = (unsigned)sp_json_int(a, "max_levels", 0);
    size_t start = offset > 1 ? (size_t)(offset - 1) : 0;
    sp_fs *fs;
    const char *rel;
    char *owned;
    fs_target(&fs, &rel, &owned, t, path, c);
    char *shown = norm(t, rel);
    /* What the model sees is the file as it was before the read: a change
     * made meanwhile makes a later edit stale, never silently accepted. */
    stale_state before;
    tools_stale_probe(&before, fs, rel);
    int r = strcmp(mode, "indentation") == 0
                ? read_indentation(t, c, fs, rel, shown, start, limit, levels)
                : read_slice(t, c, fs, rel, shown, start, limit);
    if (r == 0)
        tools_stale_record(t, fs, rel, &before);
    free(shown);
    free(owned);
    return r;
}

/* -------------------------------------------------------------- writes -- */

static uint64_t size_of(sp_fs *fs, const char *rel)
{
    sp_fs_info *st = NULL;
    uint64_t n = 0;
    if (sp_fs_stat(&st, fs, rel, NULL) == 0)
        n = st->size;
    sp_fs_info_free(st);
    return n;
}

int tool_write_file(sp_tools *t, const cJSON *a, tool_call *c)
{
    const char *path = sp_json_str_or(a, "path", "");
    const char *content = sp_json_str_or(a, "content", "");
    const char *mode = sp_json_str_or(a, "mode", "overwrite");
    bool b64 = strcmp(sp_json_str_or(a, "encoding", "utf-8"), "base64") == 0;
    sp_fs_write_opts wo = SP_FS_WRITE_OPTS_INIT;
    wo.mode = strcmp(mode, "create") == 0   ? SP_FS_CREATE
              : strcmp(mode, "append") == 0 ? SP_FS_APPEND
                                            : SP_FS_OVERWRITE;
    uint8_t *bytes = NULL;
    size_t nbytes = 0;
    if (b64) {
        char *why = NULL;
        if (sp_base64_decode(&bytes, &nbytes, content, strlen(content), &why) < 0) {
            int r = call_fail(c, SP_EINVAL,
                              "content is not valid base64: %s; nothing was written. Encode "
                              "the bytes as standard padded base64 (RFC 4648) on one line",
                              why);
            free(why);
            return r;
        }
    }
    sp_fs *fs;
    const char *rel;
    char *owned;
    fs_target(&fs, &rel, &owned, t, path, c);
    char *shown = norm(t, rel);
    bool existed = sp_fs_exists(fs, rel);
    size_t written = 0;
    sp_error *err = NULL;
    /* Only a replacement builds on what the model saw of the file. */
    int r = existed && wo.mode == SP_FS_OVERWRITE ? tools_stale_check(t, fs, rel, shown, c) : 0;
    bool stale = r < 0;
    if (!stale)
        r = b64 ? sp_fs_write_bytes(&written, fs, rel, bytes, nbytes, &wo, &err)
                : sp_fs_write(&written, fs, rel, content, strlen(content), &wo, &err);
    if (stale) {
        /* recorded by tools_stale_check() */
    } else if (r < 0) {
        call_fail_err(c, r, err,
                      r == SP_EEXISTS ? "mode 'create' refuses an existing file; use "
                                        "edit_file to change it or mode 'overwrite' to replace it"
                                      : NULL);
    } else {
        const char *verb = !existed                  ? "created"
                           : wo.mode == SP_FS_APPEND ? "appended to"
                                                     : "replaced";
        sp_buf_printf(&c->message, "%s %s (%zu bytes written)\n", verb, shown, written);
        call_change(c, shown, existed ? "modified" : "created", written);
        tools_stale_note(t, fs, rel);
        cJSON *v = sp_json_fs_written(shown, written);
        if (v)
            cJSON_AddBoolToObject(v, "created", !existed);
        c->value = v;
    }
    free(bytes);
    free(shown);
    free(owned);
    return r < 0 ? r : 0;
}

int tool_edit_file(sp_tools *t, const cJSON *a, tool_call *c)
{
    const char *path = sp_json_str_or(a, "path", "");
    const char *old_s = sp_json_str_or(a, "old_string", "");
    const char *new_s = sp_json_str_or(a, "new_string", "");
    bool all = sp_json_bool(a, "replace_all", false);
    if (strcmp(old_s, new_s) == 0)
        return call_fail(c, SP_EINVAL, "old_string and new_string are the same: nothing to change");
    sp_fs *fs;
    const char *rel;
    char *owned;
    fs_target(&fs, &rel, &owned, t, path, c);
    char *shown = norm(t, rel);
    size_t n = 0;
    sp_error *err = NULL;
    int r = tools_stale_check(t, fs, rel, shown, c);
    bool stale = r < 0;
    if (!stale)
        r = sp_fs_str_replace(&n, fs, rel, old_s, new_s, all, &err);
    if (stale) {
        /* recorded by tools_stale_check() */
    } else if (is_not_text(r, err)) {
        not_text_fail(c, r, err);
    } else if (r == SP_ENOTFOUND && sp_fs_exists(fs, rel))
        call_fail_err(c, r, err,
                      "read the file again and copy old_string exactly, whitespace and "
                      "indentation included");
    else if (r == SP_EINVAL && err && err->reason == SP_R_NOT_UNIQUE)
        call_fail_err(c, r, err,
                      "add surrounding lines to old_string so that it matches once, or set "
                      "replace_all to true");
    else if (r < 0)
        call_fail_err(c, r, err, NULL);
    else {
        uint64_t size = size_of(fs, rel);
        sp_buf_printf(&c->message, "replaced %zu occurrence%s in %s\n", n, n == 1 ? "" : "s",
                      shown);
        call_change(c, shown, "modified", size);
        tools_stale_note(t, fs, rel);
        cJSON *v = cJSON_CreateObject();
        if (v) {
            sp_json_add_string(v, "path", shown);
            sp_json_add_u64(v, "replaced", n);
            sp_json_add_u64(v, "size", size);
        }
        c->value = v;
    }
    free(shown);
    free(owned);
    return r < 0 ? r : 0;
}

int tool_insert(sp_tools *t, const cJSON *a, tool_call *c)
{
    const char *path = sp_json_str_or(a, "path", "");
    long line = (long)sp_json_int(a, "line", -1);
    const char *text = sp_json_str_or(a, "text", "");
    sp_fs *fs;
    const char *rel;
    char *owned;
    fs_target(&fs, &rel, &owned, t, path, c);
    char *shown = norm(t, rel);
    sp_error *err = NULL;
    int r = tools_stale_check(t, fs, rel, shown, c);
    bool stale = r < 0;
    if (!stale)
        r = sp_fs_insert(fs, rel, line, text, &err);
    if (stale) {
        /* recorded by tools_stale_check() */
    } else if (is_not_text(r, err)) {
        not_text_fail(c, r, err);
    } else if (r < 0) {
        call_fail_err(c, r, err,
                      r == SP_EINVAL ? "check the line number with read_file (0 = at the start, "
                                       "-1 = at the end)"
                                     : NULL);
    } else {
        size_t nlines = 0;
        for (const char *p = text; *p; p++)
            nlines += *p == '\n';
        if (*text && text[strlen(text) - 1] != '\n')
            nlines++;
        uint64_t size = size_of(fs, rel);
        if (line == 0)
            sp_buf_printf(&c->message, "inserted %zu line%s at the start of %s\n", nlines,
                          nlines == 1 ? "" : "s", shown);
        else if (line < 0)
            sp_buf_printf(&c->message, "inserted %zu line%s at the end of %s\n", nlines,
                          nlines == 1 ? "" : "s", shown);
        else
            sp_buf_printf(&c->message, "inserted %zu line%s after line %ld of %s\n", nlines,
                          nlines == 1 ? "" : "s", line, shown);
        call_change(c, shown, "modified", size);
        tools_stale_note(t, fs, rel);
        cJSON *v = cJSON_CreateObject();
        if (v) {
            sp_json_add_string(v, "path", shown);
            sp_json_add_i64(v, "line", line);
            sp_json_add_u64(v, "lines_inserted", nlines);
            sp_json_add_u64(v, "size", size);
        }
        c->value = v;
    }
    free(shown);
    free(owned);
    return r < 0 ? r : 0;
}

int tool_delete(sp_tools *t, const cJSON *a, tool_call *c)
{
    const char *path = sp_json_str_or(a, "path", "");
    bool recursive = sp_json_bool(a, "recursive", false);
    sp_fs *fs;
    const char *rel;
    char *owned;
    fs_target(&fs, &rel, &owned, t, path, c);
    char *shown = norm(t, rel);
    sp_fs_info *st = NULL;
    sp_fs_stat(&st, fs, rel, NULL);
    sp_error *err = NULL;
    int r = sp_fs_delete(fs, rel, recursive, &err);
    if (r < 0) {
        bool nonempty = r == SP_EINVAL && st && st->type == SP_FS_DIR && !recursive;
        call_fail_err(c, r, err,
                      nonempty ? "set recursive to true to delete a folder and its contents"
                               : NULL);
    } else {
        const char *what = st ? sp_fs_type_name(st->type) : "path";
        sp_buf_printf(&c->message, "deleted %s %s\n", what, shown);
        call_change(c, shown, "deleted", 0);
        tools_stale_forget(t, fs, rel);
        cJSON *v = cJSON_CreateObject();
        if (v) {
            sp_json_add_string(v, "path", shown);
            sp_json_add_string(v, "type", what);
        }
        c->value = v;
    }
    sp_fs_info_free(st);
    free(shown);
    free(owned);
    return r < 0 ? r : 0;
}

int tool_mkdir(sp_tools *t, const cJSON *a, tool_call *c)
{
    const char *path = sp_json_str_or(a, "path", "");
    bool parents = sp_json_bool(a, "parents", true);
    sp_fs *fs;
    const char *rel;
    char *owned;
    fs_target(&fs, &rel, &owned, t, path, c);
    char *shown = norm(t, rel);
    bool existed = sp_fs_exists(fs, rel);
    sp_error *err = NULL;
    int r = sp_fs_mkdir(fs, rel, parents, parents, &err);
    if (r < 0) {
        call_fail_err(c, r, err,
                      r == SP_ENOTFOUND ? "the parent folder is missing; set parents to true"
                                        : NULL);
    } else {
        sp_buf_printf(&c->message, existed ? "folder %s already exists\n" : "created folder %s\n",
                      shown);
        if (!existed)
            call_change(c, shown, "created", 0);
        cJSON *v = cJSON_CreateObject();
        if (v) {
            sp_json_add_string(v, "path", shown);
            cJSON_AddBoolToObject(v, "created", !existed);
        }
        c->value = v;
    }
    free(shown);
    free(owned);
    return r < 0 ? r : 0;
}

/* -------------------------------------------------------------- reads -- */

int tool_stat(sp_tools *t, const cJSON *a, tool_call *c)
{
    const char *path = sp_json_str_or(a, "path", "");
    sp_fs *fs;
    const char *rel;
    char *owned;
    fs_target(&fs, &rel, &owned, t, path, c);
    sp_fs_info *st = NULL;
    sp_error *err = NULL;
    int r = sp_fs_stat(&st, fs, rel, &err);
    if (r < 0) {
        free(owned);
        return call_fail_err(c, r, err, NULL);
    }
    char *shown = fs_display(t, st->path);
    char when[64] = "?";
    time_t sec = (time_t)(st->mtime_ns / 1000000000);
    struct tm tm;
    if (gmtime_r(&sec, &tm))
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    add_clean(&c->message, shown, strlen(shown), false);
    sp_buf_printf(&c->message, ": %s, %" PRIu64 " bytes, mode %04o, modified %s",
                  sp_fs_type_name(st->type), st->size, st->mode & 07777u, when);
    if (!st->target_escapes)
        sp_buf_printf(&c->message, ", %s",
                      st->readable && st->writable ? "readable and writable"
                      : st->readable               ? "read-only"
                      : st->writable               ? "writable, not readable"
                                                   : "neither readable nor writable");
    if (st->type == SP_FS_SYMLINK) {
        sp_buf_adds(&c->message, ", link to ");
        add_clean(&c->message, st->link_target ? st->link_target : "?",
                  st->link_target ? strlen(st->link_target) : 1, false);
        if (st->target_in_image)
            sp_buf_adds(&c->message, " (in the container's image, outside the workspace: the "
                                     "file tools do not follow it)");
        else if (st->target_escapes)
            sp_buf_adds(&c->message, " (leaves the workspace or dangles)");
    }
    sp_buf_addc(&c->message, '\n');
    cJSON *v = sp_json_fs_info(st);
    if (v)
        cJSON_ReplaceItemInObjectCaseSensitive(v, "path", cJSON_CreateString(shown));
    c->value = v;
    free(shown);
    sp_fs_info_free(st);
    free(owned);
    return 0;
}

int tool_glob(sp_tools *t, const cJSON *a, tool_call *c)
{
    const char *pattern = sp_json_str_or(a, "pattern", "");
    const char *path = sp_json_str_or(a, "path", ".");
    size_t limit = (size_t)sp_json_int(a, "limit", 200);
    const char *one[] = {pattern, NULL};
    if (no_negation(one,
                    "glob lists what its one pattern matches and excludes nothing: name what to "
                    "list ('**/*.py'), or search with grep, whose include takes '!' globs",
                    c) < 0)
        return SP_EINVAL;
    sp_fs *fs;
    const char *rel;
    char *owned;
    fs_target(&fs, &rel, &owned, t, path, c);
    sp_fs_glob_opts go = SP_FS_GLOB_OPTS_INIT;
    go.base = rel;
    go.max_entries = limit;
    go.hidden = sp_json_bool(a, "hidden", false);
    sp_fs_entries *e = NULL;
    sp_error *err = NULL;
    int r = sp_fs_glob_ex(&e, fs, pattern, &go, &err);
    if (r < 0) {
        free(owned);
        return call_fail_err(c, r, err, NULL);
    }
    for (size_t i = 0; i < e->n; i++) {
        char *d = fs_display(t, e->v[i].path);
        add_clean(&c->message, d, strlen(d), false);
        if (e->v[i].type == SP_FS_DIR)
            sp_buf_addc(&c->message, '/');
        sp_buf_addc(&c->message, '\n');
        free(d);
    }
    if (e->n == 0)
        sp_buf_adds(&c->message, "no paths match\n");
    if (e->truncated)
        sp_buf_printf(&c->message, "[stopped after %zu paths; narrow the pattern or raise limit]\n",
                      e->n);
    c->truncated = e->truncated;
    cJSON *v = sp_json_fs_entries(e);
    if (v) {
        fix_paths(t, cJSON_GetObjectItemCaseSensitive(v, "entries"));
        sp_json_add_string(v, "pattern", pattern);
    }
    c->value = v;
    sp_fs_entries_free(e);
    free(owned);
    return 0;
}

int tool_grep(sp_tools *t, const cJSON *a, tool_call *c)
{
    const char *pattern = sp_json_str_or(a, "pattern", "");
    const char *path = sp_json_str_or(a, "path", ".");
    sp_fs *fs;
    const char *rel;
    char *owned;
    fs_target(&fs, &rel, &owned, t, path, c);
    /* `glob` is rg's name for `include` (--glob), the one models reach for. */
    const char **globs = NULL, **rg_globs = NULL;
    if (glob_list(&globs, a, "include", true, c) < 0 ||
        glob_list(&rg_globs, a, "glob", true, c) < 0) {
        free(globs);
        free(owned);
        return SP_EINVAL;
    }
    if (globs && rg_globs) {
        free(globs);
        free(rg_globs);
        free(owned);
        return call_fail(c, SP_EINVAL,
                         "include and glob are the same argument (glob is rg's name for it): "
                         "give one, with every glob in it");
    }
    if (!globs)
        globs = rg_globs;
    sp_fs_grep_opts go = SP_FS_GREP_OPTS_INIT;
    go.path = rel;
    go.globs = globs;
    go.max_matches = (size_t)sp_json_int(a, "limit", 200);
    go.case_insensitive = sp_json_bool(a, "case_insensitive", false);
    go.fixed_string = sp_json_bool(a, "fixed_string", false);
    go.no_ignore = sp_json_bool(a, "no_ignore", false);
    go.hidden = sp_json_bool(a, "hidden", false);
    sp_fs_matches *m = NULL;
    sp_error *err = NULL;
    int r = sp_fs_grep(&m, fs, pattern, &go, &err);
    free(globs);
    if (r < 0) {
        free(owned);
        return call_fail_err(c, r, err,
                             r == SP_EINVAL ? "fix the regular expression, or set fixed_string "
                                              "to true to search for literal text"
                                            : NULL);
    }
    for (size_t i = 0; i < m->n; i++) {
        char *d = fs_display(t, m->v[i].path);
        add_clean(&c->message, d, strlen(d), false);
        sp_buf_printf(&c->message, ":%zu:", m->v[i].line_number);
        const char *line = m->v[i].line ? m->v[i].line : "";
        add_clean(&c->message, line, strlen(line), true);
        sp_buf_addc(&c->message, '\n');
        free(d);
    }
    if (m->n == 0)
        sp_buf_printf(&c->message, "no matches (%zu files searched)\n", m->files_searched);
    if (m->n == 0 && m->ignored)
        sp_buf_printf(&c->message,
                      "[%zu hidden or .gitignore'd files and folders were not searched; set "
                      "hidden and no_ignore to true to search them]\n",
                      m->ignored);
    if (m->truncated)
        sp_buf_printf(&c->message,
                      "[stopped after %zu matches; narrow the search or raise limit]\n", m->n);
    c->truncated = m->truncated;
    cJSON *v = sp_json_fs_matches(m);
    if (v)
        fix_paths(t, cJSON_GetObjectItemCaseSensitive(v, "matches"));
    c->value = v;
    sp_fs_matches_free(m);
    free(owned);
    return 0;
}
