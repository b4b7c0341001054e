/* sandpod create: make a sandbox (workspace hydrated from host folders, a
 * hardened container around it) and print its name (the making itself is
 * cli_create.c's, shared with run and fork). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fs_json.h"
#include "sandbox_json.h"

const struct cli_spec cli_spec_create = {
    .name = "create",
    .fn = cmd_create,
    .summary = "Create a sandbox around a workspace hydrated from host folders",
    .usage = CLI_USAGE("[OPTIONS]"),
    .description =
        "Create a sandbox: a workspace folder, hydrated from the --mount folders, and a\n"
        "hardened Podman container that sees it at /workspace (no network, all\n"
        "capabilities dropped, read-only root, limits on memory, CPU and processes).\n"
        "The container is started; the sandbox's name is printed.",
    .groups = CLI_GROUPS(&cli_group_create, &cli_group_egress, &cli_group_conn,
                         CLI_OWN(CLI_VALUE("from", 0, "NAME[:SNAP]", 'F', CLI_COMP_SANDBOX,
                                           "fork sandbox NAME at snapshot SNAP (default: its "
                                           "newest), as `sandpod fork`; the options given here "
                                           "replace NAME's configuration; no --mount"),
                                 CLI_VALUE("template", 0, "TEMPLATE", 'T', CLI_COMP_NONE,
                                           "start from template TEMPLATE (`sandpod template`): its "
                                           "workspace, configuration and image, its setup not run "
                                           "again; the options given here replace its "
                                           "configuration; no --mount"),
                                 CLI_FLAG("json", 0, 'j',
                                          "print {ok, name, state, container, image, created_at, "
                                          "workspace, state_dir, secrets_left_out, "
                                          "secrets_rewritten}"))),
    .notes = "Hydration progress is one line on stderr, redrawn when it is a terminal\n"
             "(percent, rate, ETA); otherwise one summary line at the end (none with --json).\n"
             "Files a mount left out or rewrote because they hold credentials are listed\n"
             "on stderr (in the JSON with --json) and by `sandpod inspect`.",
    .exit_status = "0 ok, 1 error, 2 bad usage.",
};

int cmd_create(int argc, char **argv)
{
    struct cli_create c;
    int rc = cli_create_init(&c, argc);
    if (rc)
        return rc;
    bool json = false;
    sp_sandbox *sb = NULL;
    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_create, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (opt == CLI_GETOPT_HELP)
            goto done;
        if (opt == 'j') {
            json = true;
            continue;
        }
        if (opt == 'F') {
            c.from = optarg;
            continue;
        }
        if (opt == 'T') {
            c.tmpl = optarg;
            continue;
        }
        int took = cli_create_option(&c, "create", opt, optarg);
        if (took < 0) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
    }
    if (optind < argc) {
        rc = cli_usage("create", "unexpected argument '%s'", argv[optind]);
        goto done;
    }

    if (c.tmpl && (c.from || c.n_mounts)) {
        rc = cli_usage("create", "--template does not go with %s: the workspace is the template's",
                       c.from ? "--from" : "--mount");
        goto done;
    }
    if (c.from && c.n_mounts) {
        rc = cli_usage("create", "--from and --mount do not go together: a fork's workspace is "
                                 "the snapshot");
        goto done;
    }
    sp_error *err = NULL;
    c.json = json;
    int r = cli_create_sandbox(&sb, &c, &err);
    if (r < 0) {
        rc = cli_fail(json, r, err);
        goto done;
    }
    rc = cli_print_created(sb, json);

done:
    sp_sandbox_free(sb);
    cli_create_dispose(&c);
    return rc;
}
