/* sandpod: the command-line front end. This file only dispatches; each
 * subcommand lives in cmd_<name>.c with its table (struct cli_spec). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int cmd_help(int argc, char **argv);

static const struct cli_spec spec_help = {
    .name = "help",
    .fn = cmd_help,
    .summary = "Show help for sandpod or for one command",
    .usage = CLI_USAGE("[COMMAND]"),
    .description = "Show help for sandpod or for one command.",
    .operands = CLI_OPERANDS({"COMMAND", CLI_COMP_COMMAND, NULL}),
    .exit_status = "0 ok, 2 bad usage (an unknown COMMAND).",
};

static const struct cli_spec spec_spec = {
    .name = "__spec",
    .fn = cmd_spec_dump,
    .summary = "Print every command's table as JSON, as the parser builds it (for tests)",
    .usage = CLI_USAGE(""),
    .hidden = true,
};

static const struct cli_spec spec_man = {
    .name = "__man",
    .fn = cmd_man,
    .summary = "Write the man pages into a folder (for the build)",
    .usage = CLI_USAGE("DIR"),
    .hidden = true,
};

/* `sandpod --help` lists them in this order. */
const struct cli_spec *const cli_commands[] = {
    &cli_spec_create,
    &cli_spec_ls,
    &cli_spec_inspect,
    &cli_spec_start,
    &cli_spec_stop,
    &cli_spec_restart,
    &cli_spec_rm,
    &cli_spec_gc,
    &cli_spec_exec,
    &cli_spec_sh,
    &cli_spec_logs,
    &cli_spec_network,
    &cli_spec_secret,
    &cli_spec_fork,
    &cli_spec_template,
    &cli_spec_run,
    &cli_spec_image,
    &cli_spec_snapshot,
    &cli_spec_snapshots,
    &cli_spec_restore,
    &cli_spec_diff,
    &cli_spec_apply,
    &cli_spec_export,
    &cli_spec_hydrate,
    &cli_spec_fs,
    &cli_spec_mcp,
    &cli_spec_tools,
    &cli_spec_call,
    &cli_spec_render,
    &cli_spec_peer,
    &cli_spec_engine,
    &cli_spec_completion,
    &spec_help,
    &cli_spec_version,
    &spec_spec,
    &spec_man,
    NULL,
};

const struct cli_spec *cli_command_find(const char *name)
{
    for (const struct cli_spec *const *c = cli_commands; *c; c++)
        if (strcmp((*c)->name, name) == 0)
            return *c;
    return NULL;
}

/* An unknown command, with the nearest one. */
static int unknown_command(const char *name)
{
    const char *names[64];
    size_t n = 0;
    for (const struct cli_spec *const *c = cli_commands; *c && n < 63; c++)
        if (!(*c)->hidden)
            names[n++] = (*c)->name;
    names[n] = NULL;
    return cli_usage_near(NULL, cli_suggest(name, names), "unknown command '%s'", name);
}

static void main_usage(FILE *f)
{
    fprintf(f, "Usage: sandpod [OPTIONS] COMMAND [ARGS...]\n"
               "\n"
               "Run untrusted code in Podman sandboxes around a workspace folder.\n"
               "\n"
               "Commands:\n");
    for (const struct cli_spec *const *c = cli_commands; *c; c++)
        if (!(*c)->hidden)
            fprintf(f, "  %-11s %s\n", (*c)->name, (*c)->summary);
    cli_help_options(f, &cli_spec_main);
    fprintf(f, "\n"
               "Run 'sandpod help COMMAND' or 'sandpod COMMAND --help' for a command's help.\n"
               "Exit status: 0 ok, 1 error, 2 bad usage.\n");
}

enum { OPT_VERSION = 0x100, OPT_DEBUG };

/* The options before COMMAND. */
const struct cli_spec cli_spec_main = {
    .name = "sandpod",
    .summary = "run untrusted code in Podman sandboxes around a workspace folder",
    .print_help = main_usage,
    .groups = CLI_GROUPS(
        CLI_OWN(CLI_FLAG("version", 0, OPT_VERSION, "print the version"),
                CLI_FLAG("debug", 0, OPT_DEBUG,
                         "log each Podman request, agent frame and exec path choice on stderr as "
                         "'sandpod: debug: ...' (also SANDPOD_DEBUG=1)"))),
    .stop = true,
    .hidden = true,
};

static int cmd_help(int argc, char **argv)
{
    optind = 0;
    int opt = cli_next(&spec_help, argc, argv, 0);
    if (opt == CLI_GETOPT_HELP)
        return CLI_EXIT_OK;
    if (opt != -1)
        return CLI_EXIT_USAGE;
    if (optind >= argc) {
        main_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (argc - optind > 1)
        return cli_usage("help", "unexpected argument '%s'", argv[optind + 1]);
    const struct cli_spec *c = cli_command_find(argv[optind]);
    if (!c)
        return unknown_command(argv[optind]);
    cli_help(stdout, c);
    return CLI_EXIT_OK;
}

/* The library's log, one line each on stderr. */
static void log_line(sp_log_level level, const char *message, void *userdata)
{
    (void)userdata;
    fprintf(stderr, "sandpod: %s: %s\n", sp_log_level_name(level), message);
}

int main(int argc, char **argv)
{
    const char *env_debug = getenv("SANDPOD_DEBUG");
    if (env_debug && *env_debug && strcmp(env_debug, "0") != 0)
        sp_log_set_handler(log_line, SP_LOG_DEBUG, NULL);
    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_main, argc, argv, 0)) != -1) {
        switch (opt) {
        case CLI_GETOPT_HELP:
            return cli_finish(CLI_EXIT_OK);
        case OPT_DEBUG:
            sp_log_set_handler(log_line, SP_LOG_DEBUG, NULL);
            break;
        case OPT_VERSION:
            return cli_finish(cli_spec_version.fn(1, argv + optind - 1));
        default: /* CLI_GETOPT_BAD */
            return CLI_EXIT_USAGE;
        }
    }
    if (optind >= argc)
        return cli_usage(NULL, "missing command");
    const char *name = argv[optind];
    const struct cli_spec *c = cli_command_find(name);
    if (!c)
        return unknown_command(name);
    argc -= optind;
    argv += optind;
    cli_usage_json(cli_argv_wants_json(c, argc, argv));
    return cli_finish(c->fn(argc, argv));
}
