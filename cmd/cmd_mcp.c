/* sandpod mcp: serve the model tool suite over MCP on stdin/stdout, on an
 * existing sandbox, a bare folder, or a sandbox made for the session. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mcp.h"

enum {
    OPT_CREATE = 0x3200,
    OPT_KEEP,
    OPT_RM,
    OPT_WITH_DOTENV,
    OPT_VERBOSE,
};

const struct cli_spec cli_spec_mcp = {
    .name = "mcp",
    .fn = cmd_mcp,
    .summary = "Serve the tool suite to an agent over MCP (stdio)",
    .usage = CLI_USAGE("[OPTIONS] NAME", "[OPTIONS] --root DIR [--store DIR] [--fs-mode MODE]",
                       "[OPTIONS] --create [CREATE OPTIONS] [--rm] [--with-dotenv]"),
    .description = "Serve the model tool suite to an agent over the Model Context Protocol\n"
                   "(revision " SP_MCP_PROTOCOL_VERSION
                   ", stdio transport: JSON-RPC messages, one per line, on\n"
                   "stdin and stdout; logs on stderr). NAME is an existing sandbox (started when\n"
                   "stopped): every tool. --root DIR serves a bare folder with the filesystem\n"
                   "tools only, no container. --create makes a sandbox for the session, from the\n"
                   "options of 'sandpod create'; at exit it is kept and stderr says how to see\n"
                   "and take the work (sandpod diff, apply, rm), unless --rm. Its mounts leave\n"
                   "out .env* files (at any depth: secrets the model need not see) unless\n"
                   "--with-dotenv.\n"
                   "\n"
                   "Register it with an agent, e.g.:\n"
                   "  claude mcp add sandpod -- sandpod mcp --create --mount .",
    .groups = CLI_GROUPS(
        &cli_group_tools,
        CLI_OWN(CLI_FLAG("create", 0, OPT_CREATE,
                         "a new sandbox for this session (see CREATE OPTIONS)"),
                CLI_FLAG("rm", 0, OPT_RM, "with --create: remove the sandbox at exit"),
                CLI_FLAG("keep", 0, OPT_KEEP,
                         "with --create: keep the sandbox at exit (the default; for older "
                         "scripts)"),
                CLI_FLAG("with-dotenv", 0, OPT_WITH_DOTENV,
                         "with --create: copy .env* files of the mounts too, and the other "
                         "credentials hydration leaves out (secrets=keep on every mount)"),
                CLI_FLAG("verbose", 0, OPT_VERBOSE, "log requests to stderr")),
        CLI_TITLE("CREATE OPTIONS (with --create; --state-root and --url apply to NAME too):"),
        &cli_group_create, &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME", CLI_COMP_SANDBOX, NULL}),
    .notes = "The server stops at the end of stdin or on SIGINT/SIGTERM/SIGHUP.",
    .exit_status = "0 ok, 1 error, 2 bad usage.",
};

static bool should_stop(void *ud)
{
    (void)ud;
    return cli_signal_caught() != 0;
}

/* Add .env* to the excludes of every mount (the arrays are new: the
 * parsed mounts keep theirs). NULL when out of memory. */
static const char ***leave_out_dotenv(struct cli_create *cc)
{
    const char ***v = calloc(cc->n_mounts, sizeof(*v));
    for (size_t i = 0; v && i < cc->n_mounts; i++) {
        size_t n = 0;
        while (cc->mounts[i].exclude && cc->mounts[i].exclude[n])
            n++;
        if (!(v[i] = calloc(n + 2, sizeof(char *)))) {
            while (i--)
                free(v[i]);
            free(v);
            return NULL;
        }
        for (size_t k = 0; k < n; k++)
            v[i][k] = cc->mounts[i].exclude[k];
        v[i][n] = ".env*";
        cc->mounts[i].exclude = v[i];
    }
    return v;
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
    bool create = false, keep = false, rm = false, dotenv = false, verbose = false,
         create_opts = false;
    const char ***excl = NULL; /* per mount: its excludes plus .env* */
    sp_sandbox *sb = NULL;
    sp_tools *t = NULL;
    bool made = false;
    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_mcp, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
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
        case OPT_RM:
            rm = true;
            break;
        case OPT_WITH_DOTENV:
            dotenv = true;
            break;
        case OPT_VERBOSE:
            verbose = true;
            break;
        default: /* CLI_GETOPT_BAD */
            rc = CLI_EXIT_USAGE;
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
    if ((keep || rm || dotenv) && !create) {
        rc = cli_usage("mcp", "--%s goes with --create", keep ? "keep" : rm ? "rm" : "with-dotenv");
        goto done;
    }
    if (keep && rm) {
        rc = cli_usage("mcp", "--keep and --rm exclude each other");
        goto done;
    }
    if (!dotenv && cc.n_mounts && !(excl = leave_out_dotenv(&cc))) {
        rc = cli_error("out of memory");
        goto done;
    }
    for (size_t i = 0; dotenv && i < cc.n_mounts; i++)
        cc.mounts[i].keep_secrets = true;
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
                rm ? " (removed at exit)" : " (kept at exit)");
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
    /* The model is the one who can tell the user where the work is: the
     * workspace is a copy, and nothing reaches their project by itself. */
    char hint[1024] = "";
    if (sb && made && rm)
        snprintf(hint, sizeof(hint),
                 "This workspace is sandbox %s, a copy of the user's files that is "
                 "removed with everything you changed when this session ends.",
                 sp_sandbox_name(sb));
    else if (sb)
        snprintf(hint, sizeof(hint),
                 "This workspace is sandbox %s, a copy of the user's files: nothing you "
                 "change reaches their project until they run `sandpod apply %s` "
                 "(`sandpod diff %s` shows what changed). Tell the user this when "
                 "you finish.",
                 sp_sandbox_name(sb), sp_sandbox_name(sb), sp_sandbox_name(sb));
    mo.instructions = hint[0] ? hint : NULL;
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
    if (made && rm) {
        sp_error *e = NULL;
        if (sp_sandbox_remove(sb, false, &e) < 0) {
            cli_sp_error(SP_ERROR, e);
            rc = CLI_EXIT_ERROR;
        }
        sp_error_free(e);
    } else if (made) {
        const char *n = sp_sandbox_name(sb);
        fprintf(stderr,
                "sandpod mcp: sandbox %s is kept with the session's work:\n"
                "sandpod mcp:   sandpod diff %s     what changed\n"
                "sandpod mcp:   sandpod apply %s    bring the changes into the host folder\n"
                "sandpod mcp:   sandpod rm -f %s    remove it\n",
                n, n, n, n);
    }
    for (size_t i = 0; excl && i < cc.n_mounts; i++)
        free(excl[i]);
    free(excl);
    sp_sandbox_free(sb);
    cli_create_dispose(&cc);
    cli_tools_dispose(&tc);
    return rc;
}
