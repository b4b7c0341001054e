/* sandpod fork NAME [SNAP] --name NEW: a new sandbox from a snapshot of
 * another (sp_sandbox_fork()); also what `create --from` runs. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sandbox_json.h"

enum { OPT_JSON = 256 };

const struct cli_spec cli_spec_fork = {
    .name = "fork",
    .fn = cmd_fork,
    .summary = "Create a sandbox from a snapshot of another",
    .usage = CLI_USAGE("[OPTIONS] NAME [SNAP]"),
    .description =
        "Create a sandbox whose workspace is snapshot SNAP of sandbox NAME (an id, a tag or\n"
        "a prefix; default: NAME's newest snapshot), with NAME's configuration (image,\n"
        "environment, user, workdir, network, limits, capabilities, and the record of the\n"
        "host folders it came from) and a container of its own, started. The new name is\n"
        "printed.\n"
        "\n"
        "The workspace is made from NAME's snapshot store, never from its live workspace:\n"
        "NAME's container is neither paused nor touched and may keep running. The new\n"
        "sandbox's store shares NAME's objects (hard links: removing either sandbox\n"
        "leaves the other whole) and holds the snapshot under the same id. Take a\n"
        "snapshot first (`sandpod snapshot NAME`) to fork the current state.\n"
        "\n"
        "The fork runs on NAME's engine. Across engines (a local sandbox into a Pod, a\n"
        "Pod's sandbox onto this machine: `create --from NAME --engine E`), the\n"
        "snapshot travels as a tar, from NAME's store (or its peer's export) into the\n"
        "new sandbox's, which has its own objects.",
    .groups = CLI_GROUPS(CLI_OWN(CLI_VALUE("name", 0, "NEW", CLI_OPT_NAME, CLI_COMP_NONE,
                                           "the new sandbox's name (default: generated)"),
                                 CLI_FLAG("json", 0, OPT_JSON,
                                          "print {ok, name, state, container, image, created_at, "
                                          "workspace, state_dir}")),
                         &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME", CLI_COMP_SANDBOX, NULL}, {"SNAP", CLI_COMP_NONE, NULL}),
    .notes = "`sandpod create --from NAME[:SNAP]` does the same and takes create's options,\n"
             "which replace NAME's where given (--mount excepted: a fork's workspace is the\n"
             "snapshot).",
    .exit_status = "0 ok, 1 error (nothing of the new sandbox is left), 2 bad usage.",
};

int cmd_fork(int argc, char **argv)
{
    struct cli_create c;
    int rc = cli_create_init(&c, argc);
    if (rc)
        return rc;
    sp_sandbox *sb = NULL;
    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_fork, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (opt == CLI_GETOPT_HELP)
            goto done;
        if (opt == OPT_JSON) {
            c.json = true;
            continue;
        }
        if (cli_create_option(&c, "fork", opt, optarg) < 0) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
    }
    if (optind >= argc) {
        rc = cli_usage("fork", "missing sandbox NAME");
        goto done;
    }
    if (argc - optind > 2) {
        rc = cli_usage("fork", "unexpected argument '%s'", argv[optind + 2]);
        goto done;
    }
    const char *origin = argv[optind];
    const char *snap = optind + 1 < argc ? argv[optind + 1] : NULL;
    sp_error *err = NULL;
    int r = cli_fork_sandbox(&sb, &c, origin, snap, &err);
    if (r < 0) {
        rc = cli_fail(c.json, r, err);
        goto done;
    }
    rc = cli_print_created(sb, c.json);
done:
    sp_sandbox_free(sb);
    cli_create_dispose(&c);
    return rc;
}
