/* sandpod version: which sandpod this is. */
#include "cli.h"
#include "mcp.h"

#ifndef SANDPOD_VERSION
#error "SANDPOD_VERSION must be defined by the build"
#endif

enum { OPT_JSON = 'j' };

static int cmd_version(int argc, char **argv)
{
    bool json = false;
    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_version, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            return CLI_EXIT_OK;
        if (opt == CLI_GETOPT_BAD)
            return CLI_EXIT_USAGE;
        json = true;
    }
    if (optind < argc)
        return cli_usage("version", "unexpected argument '%s'", argv[optind]);
    if (!json) {
        printf("sandpod %s\n", SANDPOD_VERSION);
        return CLI_EXIT_OK;
    }
    cJSON *o = cJSON_CreateObject();
    if (o && (!cJSON_AddStringToObject(o, "version", SANDPOD_VERSION) ||
              !cJSON_AddStringToObject(o, "mcp_protocol", SP_MCP_PROTOCOL_VERSION) ||
              !cJSON_AddStringToObject(o, "default_image", SP_PODMAN_DEFAULT_IMAGE))) {
        cJSON_Delete(o);
        o = NULL;
    }
    return cli_print_result(o);
}

const struct cli_spec cli_spec_version = {
    .name = "version",
    .fn = cmd_version,
    .summary = "Print the version of sandpod",
    .usage = CLI_USAGE("[--json]"),
    .description = "Print the version of sandpod.",
    .groups = CLI_GROUPS(
        CLI_OWN(CLI_FLAG("json", 0, OPT_JSON, "print {ok, version, mcp_protocol, default_image}"))),
    .exit_status = "0 ok, 2 bad usage.",
};
