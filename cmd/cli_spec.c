/* The command tables at work: getopt's arrays built from a cli_spec, the
 * generated --help, and "did you mean". */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ---------------------------------------------------------- the parser -- */

/* Room for the options of the largest command (fs, mcp: about 30); the
 * spec test builds every command's tables, so an overflow shows there. */
#define MAX_OPTS 64

static struct option longopts[MAX_OPTS + 2];
static char shortopts[2 * MAX_OPTS + 8];
static const struct cli_spec *built;
static unsigned built_flags;

static bool group_taken(const struct cli_optgroup *g, unsigned flags)
{
    return !(g->after_operand && (flags & CLI_NEXT_BEFORE_OPERAND));
}

__attribute__((noreturn)) static void table_bug(const struct cli_spec *spec, const char *what,
                                                const char *name)
{
    fprintf(stderr, "sandpod: internal error: command %s: %s: %s\n", spec->name, what, name);
    abort();
}

static void build(const struct cli_spec *spec, unsigned flags)
{
    size_t n = 0, s = 0;
    shortopts[s++] = (flags & CLI_NEXT_STOP) || spec->stop ? '+' : ':';
    if (shortopts[0] == '+')
        shortopts[s++] = ':';
    for (const struct cli_optgroup *const *g = spec->groups; g && *g; g++) {
        if (!group_taken(*g, flags))
            continue;
        for (const struct cli_optdesc *o = (*g)->opts; o->name; o++) {
            if (n == MAX_OPTS)
                table_bug(spec, "too many options", o->name);
            for (size_t i = 0; i < n; i++)
                if (strcmp(longopts[i].name, o->name) == 0)
                    table_bug(spec, "option listed twice", o->name);
            longopts[n++] =
                (struct option){o->name, o->metavar ? required_argument : no_argument, NULL, o->id};
            if (o->short_name) {
                if (o->id != o->short_name)
                    table_bug(spec, "a short option's id must be its letter", o->name);
                shortopts[s++] = o->short_name;
                if (o->metavar)
                    shortopts[s++] = ':';
            }
        }
    }
    longopts[n++] = (struct option){"help", no_argument, NULL, CLI_OPT_HELP};
    longopts[n] = (struct option){NULL, 0, NULL, 0};
    shortopts[s++] = 'h';
    shortopts[s] = '\0';
    built = spec;
    built_flags = flags;
}

/* The option getopt just refused, as the user typed it. */
static const char *bad_option(int argc, char **argv, char *buf, size_t size)
{
    if (optopt > 0 && optopt < 256) {
        snprintf(buf, size, "-%c", optopt);
        return buf;
    }
    if (optind > 0 && optind <= argc)
        return argv[optind - 1];
    return "?";
}

/* "--jsn" or "--jsn=x": the long option nearest it, as "--json". */
static const char *suggest_option(const char *typed, char *buf, size_t size)
{
    if (strncmp(typed, "--", 2) != 0 || !typed[2])
        return NULL;
    char word[64];
    snprintf(word, sizeof(word), "%.*s", (int)strcspn(typed + 2, "="), typed + 2);
    const char *names[MAX_OPTS + 2];
    size_t n = 0;
    for (const struct option *o = longopts; o->name; o++)
        names[n++] = o->name;
    names[n] = NULL;
    const char *best = cli_suggest(word, names);
    if (!best || strcmp(best, word) == 0)
        return NULL;
    snprintf(buf, size, "--%s", best);
    return buf;
}

const struct option *cli_spec_getopt(const struct cli_spec *spec, unsigned flags,
                                     const char **short_options)
{
    build(spec, flags);
    *short_options = shortopts;
    return longopts;
}

int cli_next(const struct cli_spec *spec, int argc, char **argv, unsigned flags)
{
    if (built != spec || built_flags != flags)
        build(spec, flags);
    opterr = 0;
    int opt = getopt_long(argc, argv, shortopts, longopts, NULL);
    char buf[8], near[72];
    /* The usage hint names the command, or sandpod itself. */
    const char *cmd = spec == &cli_spec_main ? NULL : spec->name;
    if (opt == '?') {
        const char *typed = bad_option(argc, argv, buf, sizeof(buf));
        cli_usage_near(cmd, suggest_option(typed, near, sizeof(near)), "%s option '%s'",
                       cmd ? "bad" : "unknown", typed);
        return CLI_GETOPT_BAD;
    }
    if (opt == ':') {
        cli_usage(cmd, "option '%s' needs a value", bad_option(argc, argv, buf, sizeof(buf)));
        return CLI_GETOPT_BAD;
    }
    if (opt == CLI_OPT_HELP) {
        cli_help(stdout, spec);
        return CLI_GETOPT_HELP;
    }
    return opt;
}

const char *cli_spec_long_name(const struct cli_spec *spec, int id)
{
    for (const struct cli_optgroup *const *g = spec->groups; g && *g; g++)
        for (const struct cli_optdesc *o = (*g)->opts; o->name; o++)
            if (o->id == id)
                return o->name;
    return NULL;
}

/* The option that takes `name`, or NULL. */
static const struct cli_optdesc *find_long(const struct cli_spec *spec, const char *name, size_t n)
{
    for (const struct cli_optgroup *const *g = spec->groups; g && *g; g++)
        for (const struct cli_optdesc *o = (*g)->opts; o->name; o++)
            if (strlen(o->name) == n && strncmp(o->name, name, n) == 0)
                return o;
    return NULL;
}

static const struct cli_optdesc *find_short(const struct cli_spec *spec, char c)
{
    for (const struct cli_optgroup *const *g = spec->groups; g && *g; g++)
        for (const struct cli_optdesc *o = (*g)->opts; o->name; o++)
            if (o->short_name == c)
                return o;
    return NULL;
}

bool cli_argv_wants_json(const struct cli_spec *spec, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            return false;
        if (strncmp(a, "--", 2) == 0) {
            size_t n = strcspn(a + 2, "=");
            if (n == 4 && strncmp(a + 2, "json", 4) == 0)
                return true;
            const struct cli_optdesc *o = find_long(spec, a + 2, n);
            if (o && o->metavar && !a[2 + n])
                i++;
        } else if (a[0] == '-' && a[1]) {
            for (const char *p = a + 1; *p; p++) {
                const struct cli_optdesc *o = find_short(spec, *p);
                if (o && o->metavar) {
                    if (!p[1])
                        i++;
                    break;
                }
            }
        } else if (spec->stop) {
            return false; /* the command line of exec, run */
        }
    }
    return false;
}

/* ------------------------------------------------------ did you mean -- */

/* Levenshtein distance, capped: anything past 3 is 3. */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 40 || lb > 40)
        return 3;
    size_t row[41];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb] > 3 ? 3 : row[lb];
}

const char *cli_suggest(const char *word, const char *const *names)
{
    if (!word || !*word)
        return NULL;
    const char *best = NULL;
    size_t best_d = 3;
    size_t wl = strlen(word);
    for (const char *const *n = names; *n; n++) {
        size_t d = distance(word, *n);
        /* One letter off a two-letter name is half of it: no guess. */
        if (d < best_d && (d == 0 || wl > d + 1)) {
            best = *n;
            best_d = d;
        }
    }
    if (best)
        return best;
    for (const char *const *n = names; *n; n++) {
        size_t nl = strlen(*n);
        if (wl >= 2 && (strncmp(*n, word, wl < nl ? wl : nl) == 0))
            return *n;
    }
    return NULL;
}

/* ---------------------------------------------------------------- help -- */

#define HELP_WIDTH 79
#define HELP_COL   23

/* Write the words of s[0..n) from column `col`, breaking lines before
 * HELP_WIDTH and indenting the lines after the first by `indent`. With
 * `nested`, a space inside [...] or (...) does not split. Returns the
 * column at the end. */
static int wrap(FILE *f, const char *s, size_t n, int col, int indent, bool nested)
{
    size_t i = 0;
    bool first = true;
    while (i < n) {
        while (i < n && (s[i] == ' ' || s[i] == '\n'))
            i++;
        size_t start = i;
        int depth = 0;
        while (i < n && ((s[i] != ' ' && s[i] != '\n') || (nested && depth > 0))) {
            if (nested && (s[i] == '[' || s[i] == '('))
                depth++;
            else if (nested && (s[i] == ']' || s[i] == ')') && depth > 0)
                depth--;
            i++;
        }
        if (i == start)
            break;
        int len = (int)(i - start);
        if (!first && col + 1 + len > HELP_WIDTH && col > indent) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (!first) {
            fputc(' ', f);
            col++;
        }
        fwrite(s + start, 1, (size_t)len, f);
        col += len;
        first = false;
    }
    return col;
}

/* Paragraphs wrapped, lines that start with two spaces as they are. */
void cli_help_text(FILE *f, const char *text)
{
    const char *p = text;
    const char *para = NULL; /* start of the paragraph being gathered */
    while (*p || para) {
        const char *eol = p + strcspn(p, "\n");
        bool blank = eol == p, verbatim = strncmp(p, "  ", 2) == 0, end = !*p;
        if (para && (blank || verbatim || end)) {
            wrap(f, para, (size_t)(p - para), 0, 0, false);
            fputc('\n', f);
            para = NULL;
        }
        if (end)
            break;
        if (verbatim) {
            fprintf(f, "%.*s\n", (int)(eol - p), p);
        } else if (blank) {
            fputc('\n', f);
        } else if (!para) {
            para = p;
        }
        p = *eol ? eol + 1 : eol;
    }
}

/* "-e, --env K=V" and its other names, into buf. */
void cli_option_label(char *buf, size_t size, const struct cli_optdesc *o)
{
    size_t n = 0;
    for (const struct cli_optdesc *a = o; a->name && (a == o || !a->help); a++) {
        if (n >= size)
            break;
        const char *sep = a == o ? "" : ", ";
        if (a->short_name)
            n += (size_t)snprintf(buf + n, size - n, "%s-%c, --%s", sep, a->short_name, a->name);
        else
            n += (size_t)snprintf(buf + n, size - n, "%s--%s", sep, a->name);
    }
    if (o->metavar && n < size)
        snprintf(buf + n, size - n, " %s", o->metavar);
}

static void put_option(FILE *f, const struct cli_optdesc *o)
{
    char label[128];
    cli_option_label(label, sizeof(label), o);
    int len = fprintf(f, "  %s", label);
    if (len + 2 > HELP_COL) {
        fprintf(f, "\n%*s", HELP_COL, "");
    } else {
        fprintf(f, "%*s", HELP_COL - len, "");
    }
    wrap(f, o->help, strlen(o->help), HELP_COL, HELP_COL, false);
    fputc('\n', f);
}

static const struct cli_optdesc help_opt[] = {
    {"help", 'h', NULL, CLI_OPT_HELP, "show this help", CLI_COMP_NONE, NULL},
    {NULL, 0, NULL, 0, NULL, CLI_COMP_NONE, NULL},
};
const struct cli_optgroup cli_group_help = {NULL, help_opt, NULL, false};

void cli_spec_sections(const struct cli_spec *spec, cli_section_fn *fn, void *ud)
{
    const struct cli_optgroup *const *g = spec->groups;
    size_t i = 0, start = 0;
    bool first = true;
    static const struct cli_optgroup *const none[] = {NULL};
    if (!g)
        g = none;
    for (;; i++) {
        if (!g[i] || (i > start && g[i]->title)) {
            const char *title = g[start] && g[start]->title ? g[start]->title : "Options:";
            fn(ud, title, g + start, i - start, first);
            first = false;
            start = i;
        }
        if (!g[i])
            break;
    }
}

static void help_section(void *ud, const char *title, const struct cli_optgroup *const *groups,
                         size_t n, bool help)
{
    FILE *f = ud;
    fprintf(f, "\n%s\n", title);
    for (size_t i = 0; i < n; i++)
        for (const struct cli_optdesc *o = groups[i]->opts; o->name; o++)
            if (o->help)
                put_option(f, o);
    if (help)
        put_option(f, help_opt);
    for (size_t i = 0; i < n; i++)
        if (groups[i]->note)
            cli_help_text(f, groups[i]->note);
}

void cli_help_options(FILE *f, const struct cli_spec *spec)
{
    cli_spec_sections(spec, help_section, f);
}

void cli_help(FILE *f, const struct cli_spec *spec)
{
    if (spec->print_help) {
        spec->print_help(f);
        return;
    }
    int indent = (int)strlen("Usage: sandpod  ") + (int)strlen(spec->name);
    for (size_t i = 0; spec->usage && spec->usage[i]; i++) {
        int col = fprintf(f, "%ssandpod %s", i ? "       " : "Usage: ", spec->name);
        if (*spec->usage[i]) {
            fputc(' ', f);
            wrap(f, spec->usage[i], strlen(spec->usage[i]), col + 1, indent, true);
        }
        fputc('\n', f);
    }
    if (spec->description) {
        fputc('\n', f);
        cli_help_text(f, spec->description);
    }
    cli_spec_sections(spec, help_section, f);
    if (spec->notes) {
        fputc('\n', f);
        cli_help_text(f, spec->notes);
    }
    if (spec->exit_status) {
        char buf[1024];
        snprintf(buf, sizeof(buf), "Exit status: %s", spec->exit_status);
        fputc('\n', f);
        cli_help_text(f, buf);
    }
}
