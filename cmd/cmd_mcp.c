/* sandpod mcp: serve the model tool suite over MCP on stdin/stdout, on an
 * existing sandbox, a bare folder, or a sandbox made for the session. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mcp.h"

enum {
    OPT_CREATE = 0x3200,
    OPT_KEEP,
    OPT_VERBOSE,
    OPT_HELP = 'h',
};

static const struct option options[] = {
    CLI_TOOLS_OPTIONS,
    CLI_CREATE_OPTIONS,
    CLI_CONN_OPTIONS,
    {"create", no_argument, NULL, OPT_CREATE},
    {"keep", no_argument, NULL, OPT_KEEP},
    {"verbose", no_argument, NULL, OPT_VERBOSE},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

static void help(FILE *f)
{
    fprintf(f, "Usage: sandpod mcp [OPTIONS] NAME\n"
               "       sandpod mcp [OPTIONS] --root DIR [--store DIR] [--fs-mode MODE]\n"
               "       sandpod mcp [OPTIONS] --create [CREATE OPTIONS] [--keep]\n"
               "\n"
               "Serve the model tool suite to an agent over the Model Context Protocol\n"
               "(revision 2025-06-18, stdio transport: JSON-RPC messages, one per line, on\n"
               "stdin and stdout; logs on stderr). NAME is an existing sandbox (started when\n"
               "stopped): every tool. --root DIR serves a bare folder with the filesystem\n"
               "tools only, no container. --create makes a sandbox for the session, from the\n"
               "options of 'sandpod create', and removes it at exit unless --keep.\n"
               "\n"
               "Register it with an agent, e.g.:\n"
               "  claude mcp add sandpod -- sandpod mcp --create --mount .\n"
               "\n"
               "Options:\n");
    cli_tools_options_help(f);
    fprintf(f, "  --create             a new sandbox for this session (see CREATE OPTIONS)\n"
               "  --keep               with --create: keep the sandbox at exit\n"
               "  --verbose            log requests to stderr\n"
               "  -h, --help           show this help\n"
               "\n"
               "CREATE OPTIONS (with --create; --state-root and --url apply to NAME too):\n");
    cli_create_options_help(f);
    fprintf(f, "\n"
               "The server stops at the end of stdin or on SIGINT/SIGTERM/SIGHUP.\n"
               "Exit status: 0 ok, 1 error, 2 bad usage.\n");
}

static bool should_stop(void *ud)
{
    (void)ud;
    return cli_signal_caught() != 0;
}

static bool is_conn_option(int opt)
{
    return opt == CLI_OPT_STATE_ROOT || opt == CLI_OPT_URL;
}

int cmd_mcp(int argc, char **argv)
{
    struct cli_tools tc;
    int rc = cli_tools_init(&tc, argc);
    if (rc)
        return rc;
    struct cli_create cc;
    if ((rc = cli_create_init(&cc, argc)) != 0) {
        cli_tools_dispose(&tc);
        return rc;
    }
    bool create = false, keep = false, verbose = false, create_opts = false;
    sp_sandbox *sb = NULL;
    sp_tools *t = NULL;
    bool made = false;
    optind = 0;
    int opt;
    while ((opt = cli_getopt("mcp", argc, argv, "h" CLI_CREATE_SHORTOPTS, options, false)) != -1) {
        if (opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        int took = cli_tools_option(&tc, "mcp", opt, optarg);
        if (took == 0) {
            took = cli_create_option(&cc, "mcp", opt, optarg);
            if (took > 0 && !is_conn_option(opt))
                create_opts = true;
        }
        if (took < 0) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        switch (opt) {
        case OPT_CREATE:
            create = true;
            break;
        case OPT_KEEP:
            keep = true;
            break;
        case OPT_VERBOSE:
            verbose = true;
            break;
        default:
            help(stdout);
            goto done;
        }
    }
    const char *name = NULL;
    if (!create && !tc.root) {
        if (optind >= argc) {
            rc = cli_usage("mcp", "missing sandbox NAME (or --root DIR, or --create)");
            goto done;
        }
        name = argv[optind++];
    }
    if (optind < argc) {
        rc = cli_usage("mcp", "unexpected argument '%s'", argv[optind]);
        goto done;
    }
    if (create && tc.root) {
        rc = cli_usage("mcp", "--create and --root exclude each other");
        goto done;
    }
    if (create_opts && !create) {
        rc = cli_usage("mcp", "sandbox options such as --mount need --create");
        goto done;
    }
    if (keep && !create) {
        rc = cli_usage("mcp", "--keep goes with --create");
        goto done;
    }
    if ((rc = cli_tools_check(&tc, "mcp", create || name)) != 0)
        goto done;

    cli_signals_catch();
    sp_error *err = NULL;
    int r;
    if (create) {
        r = cli_create_sandbox(&sb, &cc, &err);
        if (r < 0) {
            rc = cli_fail(false, r, err);
            goto done;
        }
        made = true;
        fprintf(stderr, "sandpod mcp: created sandbox %s for this session%s\n", sp_sandbox_name(sb),
                keep ? " (kept at exit)" : " (removed at exit)");
    } else if (name) {
        if ((rc = cli_sandbox_open(&sb, name, &cc.conn, false)) != 0)
            goto done;
        sp_sandbox_status *st = NULL;
        if (sp_sandbox_status_get(&st, sb, NULL) == 0 && !st->running) {
            fprintf(stderr, "sandpod mcp: starting sandbox %s\n", name);
            if ((r = sp_sandbox_start(sb, &err)) < 0) {
                sp_sandbox_status_free(st);
                rc = cli_fail(false, r, err);
                goto done;
            }
        }
        sp_sandbox_status_free(st);
    }
    r = sb ? sp_tools_open_sandbox(&t, sb, &tc.opts, &err)
           : sp_tools_open_root(&t, tc.root, &tc.opts, &err);
    if (r < 0) {
        rc = cli_fail(false, r, err);
        goto done;
    }
    if (verbose)
        fprintf(stderr, "sandpod mcp: serving %s on stdio (approval %s)\n",
                sb ? sp_sandbox_name(sb) : tc.root, sp_tools_approval_name(tc.opts.approval));

    sp_mcp_opts mo = SP_MCP_OPTS_INIT;
    mo.verbose = verbose;
    mo.should_stop = should_stop;
    mo.server_version = SANDPOD_VERSION;
    r = sp_mcp_serve(t, STDIN_FILENO, STDOUT_FILENO, &mo, &err);
    if (r < 0) {
        /* The client went away: nothing to tell it, only to clean up. */
        if (verbose)
            cli_sp_error(r, err);
        sp_error_free(err);
    }
    rc = CLI_EXIT_OK;

done:
    sp_tools_free(t);
    if (made && !keep) {
        sp_error *e = NULL;
        if (sp_sandbox_remove(sb, false, &e) < 0) {
            cli_sp_error(SP_ERROR, e);
            rc = CLI_EXIT_ERROR;
        }
        sp_error_free(e);
    }
    sp_sandbox_free(sb);
    cli_create_dispose(&cc);
    cli_tools_dispose(&tc);
    return rc;
}
