/* What else the command tables make: the spec dump the tests compare with
 * --help, the shell completion scripts and the man pages.
 *
 * The man pages are written by the built sandpod itself (`sandpod __man
 * DIR`, run by the build) rather than by a separate generator: the tables
 * are spread over the cmd_*.c files together with their commands, so a
 * generator would have to link the whole CLI anyway, and this way the pages
 * can never come from other tables than the binary they describe. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#ifndef SANDPOD_VERSION
#error "SANDPOD_VERSION must be defined by the build"
#endif

static const char *const complete_names[] = {"none",    "file",    "dir",
                                             "sandbox", "choices", "command"};

/* Every option row of a spec, with its group. */
#define EACH_OPTION(spec, g, o)                                                                    \
    for (const struct cli_optgroup *const *g = (spec)->groups; g && *g; g++)                       \
        for (const struct cli_optdesc *o = (*g)->opts; o->name; o++)

/* ----------------------------------------------------------- __spec -- */

static cJSON *spec_json(const struct cli_spec *s)
{
    cJSON *c = cJSON_CreateObject();
    cJSON *lo = cJSON_AddArrayToObject(c, "longopts");
    cJSON *opts = cJSON_AddArrayToObject(c, "options");
    cJSON *operands = cJSON_AddArrayToObject(c, "operands");
    if (!lo || !opts || !operands)
        goto fail;
    const char *shortopts = NULL;
    for (const struct option *o = cli_spec_getopt(s, 0, &shortopts); o->name; o++) {
        cJSON *j = cJSON_CreateObject();
        if (!cJSON_AddItemToArray(lo, j) || !cJSON_AddStringToObject(j, "name", o->name) ||
            !cJSON_AddBoolToObject(j, "value", o->has_arg == required_argument))
            goto fail;
    }
    if (!cJSON_AddStringToObject(c, "name", s->name) ||
        !cJSON_AddStringToObject(c, "shortopts", shortopts) ||
        !cJSON_AddBoolToObject(c, "stop", s->stop) ||
        !cJSON_AddBoolToObject(c, "hidden", s->hidden))
        goto fail;
    EACH_OPTION(s, g, o)
    {
        cJSON *j = cJSON_CreateObject();
        char sh[2] = {o->short_name, 0};
        if (!cJSON_AddItemToArray(opts, j) || !cJSON_AddStringToObject(j, "name", o->name) ||
            !cJSON_AddStringToObject(j, "short", sh) ||
            !cJSON_AddStringToObject(j, "metavar", o->metavar ? o->metavar : "") ||
            !cJSON_AddStringToObject(j, "complete", complete_names[o->complete]) ||
            !cJSON_AddStringToObject(j, "choices", o->choices ? o->choices : "") ||
            !cJSON_AddBoolToObject(j, "after_operand", (*g)->after_operand))
            goto fail;
    }
    for (const struct cli_operand *op = s->operands; op && op->name; op++) {
        cJSON *j = cJSON_CreateObject();
        if (!cJSON_AddItemToArray(operands, j) || !cJSON_AddStringToObject(j, "name", op->name) ||
            !cJSON_AddStringToObject(j, "complete", complete_names[op->complete]))
            goto fail;
    }
    return c;
fail:
    cJSON_Delete(c);
    return NULL;
}

/* Hidden: `sandpod __spec` prints, for every command, the getopt tables the
 * parser builds and the rows they come from, so that a test can hold them
 * against what --help prints. */
/* Options and operands of a command that takes no option of its own:
 * --help, then exactly `n` operands. Returns -1 to go on, else an exit code. */
static int plain_args(const char *name, int argc, char **argv, int n, const char *missing)
{
    optind = 0;
    int opt = cli_next(cli_command_find(name), argc, argv, 0);
    if (opt != -1)
        return opt == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (argc - optind > n)
        return cli_usage(name, "unexpected argument '%s'", argv[optind + n]);
    if (argc - optind < n)
        return cli_usage(name, "missing %s", missing);
    return -1;
}

int cmd_spec_dump(int argc, char **argv)
{
    int rc = plain_args("__spec", argc, argv, 0, "");
    if (rc >= 0)
        return rc;
    cJSON *out = cJSON_CreateObject();
    cJSON *list = cJSON_AddArrayToObject(out, "commands");
    for (const struct cli_spec *const *c = cli_commands; list && *c; c++) {
        cJSON *j = spec_json(*c);
        if (!cJSON_AddItemToArray(list, j)) {
            cJSON_Delete(out);
            out = NULL;
            break;
        }
    }
    return cli_print_result(list ? out : NULL);
}

/* ------------------------------------------------------ completions -- */

/* The choices "a|b|c" as "a b c". */
static void put_choices(FILE *f, const char *choices)
{
    for (const char *p = choices; *p; p++)
        fputc(*p == '|' ? ' ' : *p, f);
}

static void put_command_names(FILE *f)
{
    const char *sep = "";
    for (const struct cli_spec *const *c = cli_commands; *c; c++)
        if (!(*c)->hidden) {
            fprintf(f, "%s%s", sep, (*c)->name);
            sep = " ";
        }
}

/* Every name of every option of `spec`, -h and --help included, each
 * after a space. */
static void put_option_words(FILE *f, const struct cli_spec *spec)
{
    fputs(" --help -h", f);
    EACH_OPTION(spec, g, o)
    {
        fprintf(f, " --%s", o->name);
        if (o->short_name)
            fprintf(f, " -%c", o->short_name);
    }
}

/* How a shell completes each kind of value: a fixed text per kind, and a
 * word list (choices, command names) between an opening and a closing. */
struct shell_syntax {
    const char *kind[CLI_COMP_COMMAND + 1];
    const char *list_open, *list_close;
};

static const struct shell_syntax bash_syntax = {
    {[CLI_COMP_NONE] = ":",
     [CLI_COMP_FILE] = "_sandpod_files -f",
     [CLI_COMP_DIR] = "_sandpod_files -d",
     [CLI_COMP_SANDBOX] = "COMPREPLY=($(compgen -W \"$(_sandpod_names \"$sr\")\" -- \"$cur\"))"},
    "COMPREPLY=($(compgen -W '",
    "' -- \"$cur\"))",
};

static const struct shell_syntax zsh_syntax = {
    {[CLI_COMP_NONE] = " ",
     [CLI_COMP_FILE] = "_files",
     [CLI_COMP_DIR] = "_files -/",
     [CLI_COMP_SANDBOX] = "_sandpod_names"},
    "(",
    ")",
};

static const struct shell_syntax fish_syntax = {
    {[CLI_COMP_NONE] = " -x",
     [CLI_COMP_FILE] = " -r -F",
     [CLI_COMP_DIR] = " -x -a '(__fish_complete_directories)'",
     [CLI_COMP_SANDBOX] = " -x -a '(__sandpod_names)'"},
    " -x -a '",
    "'",
};

static void put_action(FILE *f, const struct shell_syntax *sh, enum cli_complete k,
                       const char *choices)
{
    if (k != CLI_COMP_CHOICES && k != CLI_COMP_COMMAND) {
        fputs(sh->kind[k], f);
        return;
    }
    fputs(sh->list_open, f);
    if (k == CLI_COMP_CHOICES)
        put_choices(f, choices ? choices : "");
    else
        put_command_names(f);
    fputs(sh->list_close, f);
}

static void bash_command(FILE *f, const struct cli_spec *s)
{
    fprintf(f, "    %s)\n        takes='", s->name);
    EACH_OPTION(s, g, o)
    {
        if (o->metavar) {
            fprintf(f, " --%s", o->name);
            if (o->short_name)
                fprintf(f, " -%c", o->short_name);
        }
    }
    fputs(" '\n        flags='--help -h", f);
    EACH_OPTION(s, g, o)
    {
        if (!o->metavar) {
            fprintf(f, " --%s", o->name);
            if (o->short_name)
                fprintf(f, " -%c", o->short_name);
        }
    }
    fprintf(f, "'\n        stop=%d\n        ;;\n", s->stop ? 1 : 0);
}

static void bash_values(FILE *f, const struct cli_spec *s)
{
    EACH_OPTION(s, g, o)
    {
        if (!o->metavar)
            continue;
        fprintf(f, "    %s:--%s", s->name, o->name);
        if (o->short_name)
            fprintf(f, " | %s:-%c", s->name, o->short_name);
        fputs(")\n        ", f);
        put_action(f, &bash_syntax, o->complete, o->choices);
        fputs("\n        ;;\n", f);
    }
}

static void bash_operands(FILE *f, const struct cli_spec *s)
{
    if (!s->operands || !s->operands[0].name)
        return;
    fprintf(f, "    %s)\n        case $n in\n", s->name);
    size_t i = 0;
    for (; s->operands[i].name; i++) {
        const struct cli_operand *op = &s->operands[i];
        bool repeats = strstr(op->name, "...") != NULL;
        if (repeats)
            fputs("        *) ", f);
        else
            fprintf(f, "        %zu) ", i);
        put_action(f, &bash_syntax, op->complete, op->choices);
        fputs(" ;;\n", f);
        if (repeats)
            break;
    }
    fputs("        esac\n        ;;\n", f);
}

static void completion_bash(FILE *f)
{
    fputs("# bash completion for sandpod, generated by `sandpod completion bash`\n"
          "\n"
          "_sandpod_names() {\n"
          "    if [[ -n $1 ]]; then\n"
          "        sandpod ls --quiet --state-root \"$1\" 2>/dev/null\n"
          "    else\n"
          "        sandpod ls --quiet 2>/dev/null\n"
          "    fi\n"
          "}\n"
          "\n"
          "_sandpod_files() {\n"
          "    local IFS=$'\\n'\n"
          "    COMPREPLY=($(compgen \"$1\" -- \"$cur\"))\n"
          "    compopt -o filenames 2>/dev/null\n"
          "}\n"
          "\n"
          "_sandpod() {\n"
          "    local cur=${COMP_WORDS[COMP_CWORD]} i w cmd= cmdi=0\n"
          "    COMPREPLY=()\n"
          "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
          "        w=${COMP_WORDS[i]}\n"
          "        if [[ $w != -* ]]; then\n"
          "            cmd=$w\n"
          "            cmdi=$i\n"
          "            break\n"
          "        fi\n"
          "    done\n"
          "    if [[ -z $cmd ]]; then\n"
          "        COMPREPLY=($(compgen -W '",
          f);
    put_command_names(f);
    put_option_words(f, &cli_spec_main);
    fputs("' -- \"$cur\"))\n"
          "        return 0\n"
          "    fi\n"
          "    local takes= flags= stop=0\n"
          "    case $cmd in\n",
          f);
    for (const struct cli_spec *const *c = cli_commands; *c; c++)
        if (!(*c)->hidden)
            bash_command(f, *c);
    fputs("    *) return 0 ;;\n"
          "    esac\n"
          "    # Walk the words after the command: option values, operands, --.\n"
          "    local n=0 dashdash=0 sr= want= prev=\n"
          "    for ((i = cmdi + 1; i < COMP_CWORD; i++)); do\n"
          "        w=${COMP_WORDS[i]}\n"
          "        if [[ -n $want ]]; then\n"
          "            [[ $w == = ]] && continue\n"
          "            [[ $want == --state-root ]] && sr=$w\n"
          "            want=\n"
          "        elif ((dashdash || (stop && n > 0))); then\n"
          "            n=$((n + 1))\n"
          "        elif [[ $w == -- ]]; then\n"
          "            dashdash=1\n"
          "        elif [[ $w == -* && $takes == *\" $w \"* ]]; then\n"
          "            want=$w\n"
          "        elif [[ $w != -* ]]; then\n"
          "            n=$((n + 1))\n"
          "        fi\n"
          "    done\n"
          "    # The value of an option: `--opt VALUE`, `--opt=VALUE` (bash splits at =).\n"
          "    if [[ $cur == = && -n $want ]]; then\n"
          "        cur=\n"
          "    fi\n"
          "    if [[ -n $want ]]; then\n"
          "        case $cmd:$want in\n",
          f);
    for (const struct cli_spec *const *c = cli_commands; *c; c++)
        if (!(*c)->hidden)
            bash_values(f, *c);
    fputs("        esac\n"
          "        return 0\n"
          "    fi\n"
          "    if [[ $cur == -* ]] && ((!dashdash && !(stop && n > 0))); then\n"
          "        COMPREPLY=($(compgen -W \"$takes $flags\" -- \"$cur\"))\n"
          "        return 0\n"
          "    fi\n"
          "    case $cmd in\n",
          f);
    for (const struct cli_spec *const *c = cli_commands; *c; c++)
        if (!(*c)->hidden)
            bash_operands(f, *c);
    fputs("    esac\n"
          "    return 0\n"
          "}\n"
          "\n"
          "complete -F _sandpod sandpod\n",
          f);
}

/* The start of an option's help, for the one-line descriptions of zsh and
 * fish: up to a ';', and within 60 bytes, cut before a " (" or a space. */
static size_t short_help(const char *help)
{
    size_t n = strcspn(help, ";\n");
    if (n <= 60)
        return n;
    size_t cut = 0;
    for (size_t i = 1; i < 60; i++)
        if (help[i] == ' ' && (help[i + 1] == '(' || !cut || help[cut + 1] != '('))
            cut = i;
    return cut ? cut : 60;
}

/* Text in a single-quoted shell word, and also inside zsh's [...]. */
static void put_quoted(FILE *f, const char *s, size_t n, bool zsh_brackets)
{
    for (size_t i = 0; i < n && s[i]; i++) {
        if (s[i] == '\'')
            fputs("'\\''", f);
        else if (zsh_brackets && strchr("[]:\\", s[i]))
            fprintf(f, "\\%c", s[i]);
        else
            fputc(s[i], f);
    }
}

static void zsh_option(FILE *f, const struct cli_optdesc *o, const struct cli_optdesc *row,
                       bool is_short)
{
    const char *help = row->help ? row->help : "";
    if (is_short)
        fprintf(f, " \\\n      '*-%c[", o->short_name);
    else
        fprintf(f, " \\\n      '*--%s[", o->name);
    put_quoted(f, help, short_help(help), true);
    fputc(']', f);
    if (o->metavar) {
        fputc(':', f);
        put_quoted(f, o->metavar, strlen(o->metavar), true);
        fputc(':', f);
        put_action(f, &zsh_syntax, o->complete, o->choices);
    }
    fputc('\'', f);
}

static void completion_zsh(FILE *f)
{
    fputs("#compdef sandpod\n"
          "# zsh completion for sandpod, generated by `sandpod completion zsh`\n"
          "\n"
          "_sandpod_names() {\n"
          "  local -a names\n"
          "  names=(${(f)\"$(_call_program sandboxes sandpod ls --quiet 2>/dev/null)\"})\n"
          "  _describe -t sandboxes 'sandbox' names\n"
          "}\n"
          "\n"
          "_sandpod() {\n"
          "  local -a commands\n"
          "  commands=(",
          f);
    for (const struct cli_spec *const *c = cli_commands; *c; c++) {
        if ((*c)->hidden)
            continue;
        fprintf(f, "\n    '%s:", (*c)->name);
        put_quoted(f, (*c)->summary, strlen((*c)->summary), true);
        fputc('\'', f);
    }
    fputs("\n  )\n"
          "  if (( CURRENT == 2 )) && [[ $PREFIX == -* ]]; then\n"
          "    compadd --",
          f);
    put_option_words(f, &cli_spec_main);
    fputs("\n"
          "    return\n"
          "  fi\n"
          "  if (( CURRENT == 2 )); then\n"
          "    _describe -t commands 'sandpod command' commands\n"
          "    return\n"
          "  fi\n"
          "  local cmd=$words[2]\n"
          "  shift words\n"
          "  (( CURRENT-- ))\n"
          "  case $cmd in\n",
          f);
    for (const struct cli_spec *const *c = cli_commands; *c; c++) {
        const struct cli_spec *s = *c;
        if (s->hidden)
            continue;
        /* -A: exec's and run's options end at the first operand. */
        fprintf(f, "  (%s)\n    _arguments -s -S%s '(- *)'{-h,--help}'[show this help]'", s->name,
                s->stop ? " -A '-*'" : "");
        const struct cli_optdesc *row = NULL;
        EACH_OPTION(s, g, o)
        {
            if (o->help)
                row = o;
            zsh_option(f, o, row, false);
            if (o->short_name)
                zsh_option(f, o, row, true);
        }
        size_t i = 1;
        for (const struct cli_operand *op = s->operands; op && op->name; op++, i++) {
            bool repeats = strstr(op->name, "...") != NULL;
            if (repeats && op->complete == CLI_COMP_NONE && s->stop)
                fputs(" \\\n      '*::command:_normal'", f);
            else if (repeats)
                fputs(" \\\n      '*:", f);
            else
                fprintf(f, " \\\n      '%zu:", i);
            if (!(repeats && op->complete == CLI_COMP_NONE && s->stop)) {
                put_quoted(f, op->name, strcspn(op->name, "."), true);
                fputc(':', f);
                put_action(f, &zsh_syntax, op->complete, op->choices);
                fputc('\'', f);
            }
            if (repeats)
                break;
        }
        fputs("\n    ;;\n", f);
    }
    fputs("  esac\n"
          "}\n"
          "\n"
          "_sandpod \"$@\"\n",
          f);
}

/* The options of `spec` (and -h/--help), offered when `cond` holds. */
static void fish_options(FILE *f, const char *cond, const struct cli_spec *spec)
{
    fprintf(f, "complete -c sandpod -n %s -s h -l help -d 'show this help'\n", cond);
    const struct cli_optdesc *row = NULL;
    EACH_OPTION(spec, g, o)
    {
        if (o->help)
            row = o;
        fprintf(f, "complete -c sandpod -n %s", cond);
        if (o->short_name)
            fprintf(f, " -s %c", o->short_name);
        fprintf(f, " -l %s", o->name);
        if (o->metavar)
            put_action(f, &fish_syntax, o->complete, o->choices);
        fputs(" -d '", f);
        put_quoted(f, row->help, short_help(row->help), false);
        fputs("'\n", f);
    }
}

static void completion_fish(FILE *f)
{
    fputs("# fish completion for sandpod, generated by `sandpod completion fish`\n"
          "\n"
          "function __sandpod_names\n"
          "    sandpod ls --quiet 2>/dev/null\n"
          "end\n"
          "\n"
          "set -l __sandpod_commands ",
          f);
    put_command_names(f);
    fputs("\ncomplete -c sandpod -f\n", f);
    fish_options(f, "\"not __fish_seen_subcommand_from $__sandpod_commands\"", &cli_spec_main);
    for (const struct cli_spec *const *c = cli_commands; *c; c++) {
        if ((*c)->hidden)
            continue;
        fprintf(f,
                "complete -c sandpod -n \"not __fish_seen_subcommand_from $__sandpod_commands\" "
                "-a %s -d '",
                (*c)->name);
        put_quoted(f, (*c)->summary, strlen((*c)->summary), false);
        fputs("'\n", f);
    }
    for (const struct cli_spec *const *c = cli_commands; *c; c++) {
        const struct cli_spec *s = *c;
        if (s->hidden)
            continue;
        fprintf(f, "\n# %s\n", s->name);
        char cond[96];
        snprintf(cond, sizeof(cond), "'__fish_seen_subcommand_from %s'", s->name);
        fish_options(f, cond, s);
        for (const struct cli_operand *op = s->operands; op && op->name; op++) {
            if (op->complete == CLI_COMP_NONE)
                continue;
            fprintf(f, "complete -c sandpod -n '__fish_seen_subcommand_from %s'", s->name);
            if (op->complete == CLI_COMP_FILE)
                fputs(" -F", f);
            else
                put_action(f, &fish_syntax, op->complete, op->choices);
            fputs("\n", f);
        }
    }
}

int cmd_completion(int argc, char **argv)
{
    int rc = plain_args("completion", argc, argv, 1, "SHELL (bash, zsh or fish)");
    if (rc >= 0)
        return rc;
    const char *sh = argv[optind];
    if (strcmp(sh, "bash") == 0)
        completion_bash(stdout);
    else if (strcmp(sh, "zsh") == 0)
        completion_zsh(stdout);
    else if (strcmp(sh, "fish") == 0)
        completion_fish(stdout);
    else
        return cli_usage("completion", "SHELL must be bash, zsh or fish: '%s'", sh);
    return CLI_EXIT_OK;
}

const struct cli_spec cli_spec_completion = {
    .name = "completion",
    .fn = cmd_completion,
    .summary = "Print a shell completion script (bash, zsh or fish)",
    .usage = CLI_USAGE("bash | zsh | fish"),
    .description = "Print the completion script for SHELL on stdout: commands, their options, the\n"
                   "values an option takes, sandbox NAMEs (from 'sandpod ls --quiet') and files.\n"
                   "An installed sandpod puts them where bash-completion, zsh and fish look; to\n"
                   "load one by hand:\n"
                   "  source <(sandpod completion bash)\n"
                   "  sandpod completion zsh > ~/.zfunc/_sandpod   # a folder in $fpath\n"
                   "  sandpod completion fish > ~/.config/fish/completions/sandpod.fish",
    .operands = CLI_OPERANDS({"SHELL", CLI_COMP_CHOICES, "bash|zsh|fish"}),
    .exit_status = "0 ok, 2 bad usage.",
};

/* ---------------------------------------------------------- man pages -- */

/* Text for roff: \ and - escaped; a line that would start with . or ' (a
 * request) starts with \& instead. */
static void roff(FILE *f, const char *s, size_t n, bool line_start)
{
    for (size_t i = 0; i < n && s[i]; i++) {
        char ch = s[i];
        if (line_start && (ch == '.' || ch == '\''))
            fputs("\\&", f);
        line_start = ch == '\n';
        if (ch == '\\')
            fputs("\\e", f);
        else if (ch == '-')
            fputs("\\-", f);
        else
            fputc(ch, f);
    }
}

static void roff_s(FILE *f, const char *s)
{
    roff(f, s, strlen(s), false);
}

/* cli_help_text() for roff: paragraphs filled, lines that start with two
 * spaces kept as they are. */
static void roff_text(FILE *f, const char *text)
{
    const char *p = text;
    bool nofill = false, para_open = false;
    while (*p) {
        const char *eol = p + strcspn(p, "\n");
        size_t n = (size_t)(eol - p);
        bool verbatim = strncmp(p, "  ", 2) == 0;
        if (n == 0) {
            if (nofill)
                fputs(".fi\n", f);
            nofill = false;
            fputs(".PP\n", f);
            para_open = false;
        } else if (verbatim) {
            if (!nofill)
                fputs(para_open ? ".br\n.nf\n" : ".nf\n", f);
            nofill = true;
            roff(f, p, n, true);
            fputc('\n', f);
        } else {
            if (nofill)
                fputs(".fi\n", f);
            nofill = false;
            roff(f, p, n, true);
            fputc('\n', f);
            para_open = true;
        }
        p = *eol ? eol + 1 : eol;
    }
    if (nofill)
        fputs(".fi\n", f);
}

static void roff_option(FILE *f, const struct cli_optdesc *o)
{
    fputs(".TP\n", f);
    for (const struct cli_optdesc *a = o; a->name && (a == o || !a->help); a++) {
        if (a != o)
            fputs(", ", f);
        if (a->short_name)
            fprintf(f, "\\fB\\-%c\\fR, ", a->short_name);
        fputs("\\fB\\-\\-", f);
        roff_s(f, a->name);
        fputs("\\fR", f);
        if (a->metavar) {
            fputs(" \\fI", f);
            roff_s(f, a->metavar);
            fputs("\\fR", f);
        }
    }
    fputc('\n', f);
    roff(f, o->help, strlen(o->help), true);
    fputc('\n', f);
}

static void man_section(void *ud, const char *title, const struct cli_optgroup *const *groups,
                        size_t n, bool help)
{
    FILE *f = ud;
    if (!help) {
        size_t len = strlen(title);
        fputs(".SS \"", f);
        roff(f, title, len && title[len - 1] == ':' ? len - 1 : len, false);
        fputs("\"\n", f);
    }
    for (size_t i = 0; i < n; i++)
        for (const struct cli_optdesc *o = groups[i]->opts; o->name; o++)
            if (o->help)
                roff_option(f, o);
    if (help)
        roff_option(f, cli_group_help.opts);
    for (size_t i = 0; i < n; i++)
        if (groups[i]->note) {
            fputs(".PP\n", f);
            roff_text(f, groups[i]->note);
        }
}

static void man_head(FILE *f, const char *name, const char *summary)
{
    char upper[64];
    size_t i = 0;
    for (; name[i] && i + 1 < sizeof(upper); i++)
        upper[i] = (char)(name[i] >= 'a' && name[i] <= 'z' ? name[i] - 32 : name[i]);
    upper[i] = '\0';
    fprintf(f,
            ".\\\" Generated by `sandpod __man` from the command tables; do not edit.\n"
            ".TH \"%s\" 1 \"\" \"sandpod %s\" \"sandpod manual\"\n"
            ".SH NAME\n",
            upper, SANDPOD_VERSION);
    roff_s(f, name);
    fputs(" \\- ", f);
    roff_s(f, summary);
    fputc('\n', f);
}

static void man_command(FILE *f, const struct cli_spec *s)
{
    char page[64];
    snprintf(page, sizeof(page), "sandpod-%s", s->name);
    man_head(f, page, s->summary);
    fputs(".SH SYNOPSIS\n", f);
    for (size_t i = 0; s->usage && s->usage[i]; i++) {
        fprintf(f, "%s\\fBsandpod %s\\fR ", i ? ".br\n" : "", s->name);
        roff_s(f, s->usage[i]);
        fputc('\n', f);
    }
    if (s->description) {
        fputs(".SH DESCRIPTION\n", f);
        roff_text(f, s->description);
    }
    fputs(".SH OPTIONS\n", f);
    cli_spec_sections(s, man_section, f);
    if (s->notes) {
        fputs(".SH NOTES\n", f);
        roff_text(f, s->notes);
    }
    if (s->exit_status) {
        fputs(".SH \"EXIT STATUS\"\n", f);
        roff_text(f, s->exit_status);
    }
    fputs(".SH \"SEE ALSO\"\n.BR sandpod (1)\n", f);
}

static void man_main(FILE *f)
{
    man_head(f, "sandpod", "run untrusted code in Podman sandboxes around a workspace folder");
    fputs(".SH SYNOPSIS\n"
          "\\fBsandpod\\fR [\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR...]\n"
          ".SH DESCRIPTION\n"
          "Run untrusted code in Podman sandboxes around a workspace folder.\n"
          "Each command has its own page, \\fBsandpod\\-\\fICOMMAND\\fR(1), and its own\n"
          "\\fB\\-\\-help\\fR.\n"
          ".SH COMMANDS\n",
          f);
    for (const struct cli_spec *const *c = cli_commands; *c; c++) {
        if ((*c)->hidden)
            continue;
        fputs(".TP\n\\fB", f);
        roff_s(f, (*c)->name);
        fputs("\\fR\n", f);
        roff_s(f, (*c)->summary);
        fputc('\n', f);
    }
    fputs(".SH OPTIONS\n", f);
    cli_spec_sections(&cli_spec_main, man_section, f);
    fputs(".SH \"EXIT STATUS\"\n"
          "0 ok, 1 error, 2 bad usage; see each command's page.\n"
          ".SH \"SEE ALSO\"\n",
          f);
    const char *sep = "";
    for (const struct cli_spec *const *c = cli_commands; *c; c++) {
        if ((*c)->hidden)
            continue;
        fprintf(f, "%s.BR sandpod\\-", sep);
        roff_s(f, (*c)->name);
        fputs(" (1)", f);
        sep = " ,\n";
    }
    fputc('\n', f);
}

static int write_page(const char *dir, const char *name, const struct cli_spec *s)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.1", dir, name);
    FILE *f = fopen(path, "we");
    if (!f)
        return cli_error("%s: %s", path, strerror(errno));
    if (s)
        man_command(f, s);
    else
        man_main(f);
    if (fclose(f) != 0)
        return cli_error("%s: %s", path, strerror(errno));
    return CLI_EXIT_OK;
}

/* Hidden: `sandpod __man DIR` writes sandpod.1 and sandpod-CMD.1 for every
 * command into DIR (run by the build). */
int cmd_man(int argc, char **argv)
{
    int rc = plain_args("__man", argc, argv, 1, "DIR");
    if (rc >= 0)
        return rc;
    const char *dir = argv[optind];
    rc = write_page(dir, "sandpod", NULL);
    for (const struct cli_spec *const *c = cli_commands; !rc && *c; c++) {
        if ((*c)->hidden)
            continue;
        char name[64];
        snprintf(name, sizeof(name), "sandpod-%s", (*c)->name);
        rc = write_page(dir, name, *c);
    }
    return rc;
}
