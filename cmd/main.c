/* sandpod: the command-line front end. This file only dispatches; each
 * subcommand lives in cmd_<name>.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#ifndef SANDPOD_VERSION
#error "SANDPOD_VERSION must be defined by the build"
#endif

static int cmd_help(int argc, char **argv);
static int cmd_version(int argc, char **argv);

struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"create", cmd_create, "Create a sandbox around a workspace hydrated from host folders"},
    {"ls", cmd_ls, "List the sandboxes and their states"},
    {"inspect", cmd_inspect, "Show a sandbox's state, folders and configuration"},
    {"start", cmd_start, "Start sandboxes (a lost container is recreated)"},
    {"stop", cmd_stop, "Stop sandboxes, keeping their workspaces"},
    {"restart", cmd_restart, "Stop, then start, sandboxes"},
    {"rm", cmd_rm, "Remove sandboxes (optionally keeping their workspaces)"},
    {"gc", cmd_gc, "Remove containers no sandbox owns any more (killed creates, lost state)"},
    {"exec", cmd_exec, "Run a command in a sandbox with stdio attached (-i, -t)"},
    {"sh", cmd_sh, "Run a shell command line in a sandbox, output captured and capped"},
    {"logs", cmd_logs, "Show what a sandbox's container printed (-f to follow)"},
    {"run", cmd_run, "Run one command in a throwaway sandbox"},
    {"image", cmd_image, "Build the offline image, or check that an image exists"},
    {"snapshot", cmd_snapshot, "Take an exact snapshot of a workspace (rm, gc, import too)"},
    {"snapshots", cmd_snapshots, "List the snapshots of a workspace"},
    {"restore", cmd_restore, "Make a workspace exactly what it was at a snapshot"},
    {"diff", cmd_diff, "Show what changed between snapshots or since one"},
    {"export", cmd_export, "Write a snapshot as a tar or tar.gz archive"},
    {"hydrate", cmd_hydrate, "Copy host folders into a workspace, filtered and capped"},
    {"fs", cmd_fs, "Read, write, list and search files in a folder, contained beneath it"},
    {"mcp", cmd_mcp, "Serve the tool suite to an agent over MCP (stdio)"},
    {"tools", cmd_tools, "Print the tool specs (OpenAI, Anthropic or MCP format)"},
    {"call", cmd_call, "Run one tool call on a sandbox or folder and print its result"},
    {"help", cmd_help, "Show help for sandpod or for one command"},
    {"version", cmd_version, "Print the version of sandpod"},
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f, "Usage: sandpod [--help | --version] [--debug] COMMAND [ARGS...]\n"
               "\n"
               "Run untrusted code in Podman sandboxes around a workspace folder.\n"
               "\n"
               "Commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n"
               "Options:\n"
               "  -h, --help     show this help\n"
               "  --version      print the version\n"
               "  --debug        log each Podman request, agent frame and exec path choice\n"
               "                 on stderr as 'sandpod: debug: ...' (also SANDPOD_DEBUG=1)\n"
               "\n"
               "Run 'sandpod help COMMAND' or 'sandpod COMMAND --help' for a command's help.\n"
               "Exit status: 0 ok, 1 error, 2 bad usage.\n");
}

static int cmd_version(int argc, char **argv)
{
    if (argc > 1) {
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
            printf("Usage: sandpod version\n\nPrint the version of sandpod.\n");
            return CLI_EXIT_OK;
        }
        return cli_usage("version", "unexpected argument '%s'", argv[1]);
    }
    printf("sandpod %s\n", SANDPOD_VERSION);
    return CLI_EXIT_OK;
}

static int cmd_help(int argc, char **argv)
{
    if (argc < 2) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (argc > 2)
        return cli_usage("help", "unexpected argument '%s'", argv[2]);
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        printf("Usage: sandpod help [COMMAND]\n\nShow help for sandpod or for one command.\n");
        return CLI_EXIT_OK;
    }
    const struct command *c = find_command(argv[1]);
    if (!c)
        return cli_usage(NULL, "unknown command '%s'", argv[1]);
    char help_flag[] = "--help";
    char *sub_argv[] = {argv[1], help_flag, NULL};
    return c->fn(2, sub_argv);
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
    bool debug = env_debug && *env_debug && strcmp(env_debug, "0") != 0;
    while (argc > 1 && strcmp(argv[1], "--debug") == 0) {
        debug = true;
        argv[1] = argv[0];
        argv++;
        argc--;
    }
    if (debug)
        sp_log_set_handler(log_line, SP_LOG_DEBUG, NULL);
    if (argc < 2)
        return cli_usage(NULL, "missing command");
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        usage(stdout);
        return cli_finish(CLI_EXIT_OK);
    }
    if (strcmp(name, "--version") == 0)
        return cli_finish(cmd_version(1, argv + 1));
    if (name[0] == '-')
        return cli_usage(NULL, "unknown option '%s'", name);

    const struct command *c = find_command(name);
    if (!c)
        return cli_usage(NULL, "unknown command '%s'", name);
    return cli_finish(c->fn(argc - 1, argv + 1));
}
