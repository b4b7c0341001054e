/* One table per command: the options, operands and help text of a
 * subcommand, declared once. From it the CLI builds getopt's tables, prints
 * --help, writes the shell completions and the man pages, and suggests the
 * option or command a typo meant.
 *
 * Adding a command: write a `const struct cli_spec cli_spec_NAME` beside its
 * function in cmd_NAME.c (its own options as one cli_optgroup, shared ones
 * such as cli_group_conn by address), declare it below, list it in
 * cli_commands[] in main.c, and parse with cli_next(). */
#ifndef SANDPOD_CLI_SPEC_H
#define SANDPOD_CLI_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* What a value (of an option or an operand) is, for completion. */
enum cli_complete {
    CLI_COMP_NONE,    /* free text: nothing to offer */
    CLI_COMP_FILE,    /* a file of the host */
    CLI_COMP_DIR,     /* a folder of the host */
    CLI_COMP_SANDBOX, /* a sandbox NAME (`sandpod ls --quiet`) */
    CLI_COMP_CHOICES, /* one of `choices`, "a|b|c" */
    CLI_COMP_COMMAND, /* a sandpod command */
};

struct cli_optdesc {
    const char *name;    /* the long name, without "--"; NULL ends a list */
    char short_name;     /* or 0 */
    const char *metavar; /* the value's name in help; NULL: takes no value */
    int id;              /* what cli_next() returns for it */
    /* The help text, wrapped when printed. NULL: another name of the entry
     * before, shown on its line ("--all, --replace-all"). */
    const char *help;
    enum cli_complete complete;
    const char *choices; /* "a|b|c" for CLI_COMP_CHOICES */
};

/* Table rows: a flag, an option with a value (and what completes it), one
 * with a fixed set of values, another name for the row before. */
#define CLI_FLAG(name, short_name, id, help)                                                       \
    {                                                                                              \
        name, short_name, NULL, id, help, CLI_COMP_NONE, NULL                                      \
    }
#define CLI_VALUE(name, short_name, metavar, id, complete, help)                                   \
    {                                                                                              \
        name, short_name, metavar, id, help, complete, NULL                                        \
    }
#define CLI_CHOICE(name, short_name, metavar, id, choices, help)                                   \
    {                                                                                              \
        name, short_name, metavar, id, help, CLI_COMP_CHOICES, choices                             \
    }
#define CLI_ALIAS(name, id)                                                                        \
    {                                                                                              \
        name, 0, NULL, id, NULL, CLI_COMP_NONE, NULL                                               \
    }
#define CLI_OPTS_END                                                                               \
    {                                                                                              \
        NULL, 0, NULL, 0, NULL, CLI_COMP_NONE, NULL                                                \
    }

struct cli_optgroup {
    /* Starts a new section of the help ("Options (before NAME):"); NULL
     * continues the one before ("Options:" for the first). */
    const char *title;
    const struct cli_optdesc *opts;
    const char *note; /* printed after the section's options */
    /* Taken only after the first operand (fs: an operation's options). */
    bool after_operand;
};

struct cli_operand {
    const char *name; /* "NAME", "SNAP2", "ARG..." (repeats); NULL ends */
    enum cli_complete complete;
    const char *choices;
};

struct cli_spec {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary; /* one line, for `sandpod --help` and NAME */
    /* Each form, as typed after "sandpod NAME "; NULL-terminated. */
    const char *const *usage;
    /* Paragraphs separated by blank lines, wrapped when printed; a line
     * that starts with two spaces is kept as it is (lists, examples). */
    const char *description;
    const struct cli_optgroup *const *groups; /* NULL-terminated */
    const char *notes;                        /* after the options, like description */
    const char *exit_status;                  /* after "Exit status: " */
    const struct cli_operand *operands;       /* for completion; may be NULL */
    void (*print_help)(FILE *f);              /* instead of the generated help */
    bool stop;                                /* options end at the first operand */
    bool hidden;                              /* not listed, no page */
};

/* Shorthands for writing a spec: its usage lines, its groups (each an
 * address), a group of the command's own options, its operands. */
#define CLI_USAGE(...)  ((const char *const[]){__VA_ARGS__, NULL})
#define CLI_GROUPS(...) ((const struct cli_optgroup *const[]){__VA_ARGS__, NULL})
#define CLI_OWN(...)                                                                               \
    (&(const struct cli_optgroup){NULL, (const struct cli_optdesc[]){__VA_ARGS__, CLI_OPTS_END},   \
                                  NULL, false})
#define CLI_TITLE(title)                                                                           \
    (&(const struct cli_optgroup){title, (const struct cli_optdesc[]){CLI_OPTS_END}, NULL, false})
#define CLI_OPERANDS(...) ((const struct cli_operand[]){__VA_ARGS__, {NULL, CLI_COMP_NONE, NULL}})

/* sandpod's own options, before COMMAND (main.c). */
extern const struct cli_spec cli_spec_main;

/* The commands, in the order `sandpod --help` lists them (main.c). */
extern const struct cli_spec *const cli_commands[];
const struct cli_spec *cli_command_find(const char *name);

extern const struct cli_spec cli_spec_create, cli_spec_ls, cli_spec_inspect, cli_spec_start,
    cli_spec_stop, cli_spec_restart, cli_spec_rm, cli_spec_gc, cli_spec_exec, cli_spec_sh,
    cli_spec_run, cli_spec_image, cli_spec_snapshot, cli_spec_snapshots, cli_spec_restore,
    cli_spec_diff, cli_spec_export, cli_spec_hydrate, cli_spec_fs, cli_spec_mcp, cli_spec_tools,
    cli_spec_call, cli_spec_version, cli_spec_logs, cli_spec_apply, cli_spec_fork,
    cli_spec_template, cli_spec_render, cli_spec_peer, cli_spec_engine, cli_spec_network,
    cli_spec_secret;

/* Groups shared by several commands. */
extern const struct cli_optgroup cli_group_conn;    /* --state-root, --url */
extern const struct cli_optgroup cli_group_create;  /* the options of create */
extern const struct cli_optgroup cli_group_egress;  /* create's egress rules */
extern const struct cli_optgroup cli_group_snap;    /* --root, --store + conn */
extern const struct cli_optgroup cli_group_tools;   /* what shapes a tools context */
extern const struct cli_optgroup cli_group_command; /* -w, -e of exec and sh */

/* The id of the -h/--help every command takes. */
#define CLI_OPT_HELP 'h'

/* cli_next() flags. */
enum {
    CLI_NEXT_STOP = 1,          /* stop at the first operand (as spec->stop) */
    CLI_NEXT_BEFORE_OPERAND = 2 /* leave out the after_operand groups */
};

/* The next option of argv by `spec` (optind as getopt's; set it to 0 before
 * the first call): its id, with optarg set; -1 at the end of the options;
 * CLI_GETOPT_HELP after printing the help on stdout (the caller exits 0);
 * CLI_GETOPT_BAD after a one-line usage error, with a "did you mean" where
 * an option is near (the caller exits 2). getopt itself prints nothing. */
#define CLI_GETOPT_BAD  (-2)
#define CLI_GETOPT_HELP (-3)
int cli_next(const struct cli_spec *spec, int argc, char **argv, unsigned flags);

/* getopt's tables for `spec` as cli_next() builds them (valid until the
 * next call), for the spec dump. */
struct option;
const struct option *cli_spec_getopt(const struct cli_spec *spec, unsigned flags,
                                     const char **short_options);

/* The long name of option `id` of `spec`, or NULL. */
const char *cli_spec_long_name(const struct cli_spec *spec, int id);

/* Print the help of a command. */
void cli_help(FILE *f, const struct cli_spec *spec);
/* Print the option sections of a command's help alone. */
void cli_help_options(FILE *f, const struct cli_spec *spec);

/* Pieces of the help, for the man pages and completions (cli_gen.c). */
extern const struct cli_optgroup cli_group_help; /* -h, --help */
void cli_help_text(FILE *f, const char *text);
void cli_option_label(char *buf, size_t size, const struct cli_optdesc *o);
typedef void cli_section_fn(void *ud, const char *title, const struct cli_optgroup *const *groups,
                            size_t n, bool help);
/* Calls `fn` for each section of the options: its title, its groups, and
 * whether -h/--help ends it (the first section). */
void cli_spec_sections(const struct cli_spec *spec, cli_section_fn *fn, void *ud);

/* The name nearest `word` among `names` (NULL-terminated): within edit
 * distance 2, or one that starts with it or that it starts with; else NULL. */
const char *cli_suggest(const char *word, const char *const *names);

/* Whether argv asks for --json before its operands end: usage errors then
 * print a JSON error on stdout too. */
bool cli_argv_wants_json(const struct cli_spec *spec, int argc, char **argv);

/* Hidden commands that print what the tables say (cli_gen.c). */
int cmd_spec_dump(int argc, char **argv);
int cmd_completion(int argc, char **argv);
int cmd_man(int argc, char **argv);
extern const struct cli_spec cli_spec_completion;

#endif
