/* sandpod run: a throwaway sandbox for one command. Create it, run the
 * command with stdio attached, remove it (on SIGINT, SIGTERM and SIGHUP
 * too), and exit with the command's code. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

const struct cli_spec cli_spec_run = {
    .name = "run",
    .fn = cmd_run,
    .summary = "Run one command in a throwaway sandbox",
    .usage = CLI_USAGE("[OPTIONS] [--] COMMAND [ARG...]"),
    .description =
        "Create a sandbox (with a generated name unless --name is given), run COMMAND in\n"
        "it with stdin, stdout and stderr attached (and a terminal when stdin and\n"
        "stdout are both terminals), then remove the sandbox and its workspace, also\n"
        "when sandpod is interrupted (SIGINT, SIGTERM, SIGHUP). Exit with the command's\n"
        "exit code.",
    .groups = CLI_GROUPS(
        CLI_TITLE("Options (those of 'sandpod create'):"), &cli_group_create, &cli_group_egress,
        &cli_group_conn,
        CLI_OWN(CLI_FLAG("json", 0, 'j',
                         "refused: the output is the command's (a usage error in JSON)"))),
    .operands = CLI_OPERANDS({"COMMAND...", CLI_COMP_NONE, NULL}),
    .stop = true,
    .exit_status = "the command's; 127 when COMMAND is not found in the sandbox, 126 when it "
                   "cannot be run, 125 when sandpod itself fails (as exec), 2 on bad usage, "
                   "128+N when sandpod is stopped by signal N.",
};

/* Remove the sandbox; a failure leaves it behind, so say how to clean up. */
static void remove_sandbox(sp_sandbox *sb)
{
    sp_error *err = NULL;
    if (sp_sandbox_remove(sb, false, &err) < 0) {
        const char *name = sp_sandbox_name(sb);
        cli_error("sandbox %s was left behind: %s; remove it with 'sandpod rm --force %s'", name,
                  err && err->message ? err->message : sp_strerror(err ? err->code : SP_ERROR),
                  name);
    }
    sp_error_free(err);
}

int cmd_run(int argc, char **argv)
{
    struct cli_create c;
    bool ran = false; /* rc is the command's own */
    int rc = cli_create_init(&c, argc);
    if (rc)
        return rc;
    sp_sandbox *sb = NULL;

    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_run, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        if (opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (opt == 'j') {
            rc = cli_usage("run", "--json does not apply to run: the output is the command's");
            goto done;
        }
        if (cli_create_option(&c, "run", opt, optarg) < 0) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
    }
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    if (optind >= argc) {
        rc = cli_usage("run", "missing COMMAND; usage: sandpod run [OPTIONS] -- COMMAND [ARG...]");
        goto done;
    }

    /* From here on an interruption must not leave the sandbox behind. */
    cli_signals_catch();
    sp_error *err = NULL;
    int r = cli_create_sandbox(&sb, &c, &err);
    if (r < 0) {
        rc = cli_sp_error(r, err);
        sp_error_free(err);
        goto done;
    }
    int sig = cli_signal_caught();
    if (sig) {
        remove_sandbox(sb);
        rc = 128 + sig;
        goto done;
    }

    struct cli_attach a = {0};
    a.argv = (const char *const *)(argv + optind);
    a.interactive = true;
    /* A terminal only when both ends are one: output that goes to a file
     * or a pipe must keep stdout and stderr apart and its \n line ends. */
    a.tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    int code = -1;
    r = cli_attach_run(&code, sb, &a, &err);
    if (r < 0) {
        rc = cli_sp_error(r, err);
        sp_error_free(err);
    } else if (code < 0) {
        rc = cli_error("podman did not report the exit code of the command");
    } else {
        rc = code > 255 ? 255 : code;
        ran = true;
    }
    remove_sandbox(sb);

done:
    /* sandpod's own failure, told apart from the command's codes as exec
     * does (usage errors stay 2). */
    if (rc == CLI_EXIT_ERROR && !ran)
        rc = CLI_EXIT_OWN_FAILURE;
    sp_sandbox_free(sb);
    cli_create_dispose(&c);
    return rc;
}
