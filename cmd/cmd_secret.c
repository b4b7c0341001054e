/* sandpod secret: rotate or take away a sandbox's brokered secrets while
 * it runs (sp_sandbox_secret_set). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "cli.h"
#include "sandpod/egress.h"

const struct cli_spec cli_spec_secret = {
    .name = "secret",
    .fn = cmd_secret,
    .summary = "Rotate or take away a sandbox's brokered secrets, with no restart",
    .usage = CLI_USAGE("[OPTIONS] NAME set SECRET=SOURCE...", "[OPTIONS] NAME rm SECRET..."),
    .description =
        "set: the egress proxy of sandbox NAME puts the new value in place of SECRET's stand-in\n"
        "from its next request on; SOURCE is env:VAR (this environment's) or file:PATH, as for\n"
        "`create --secret`. rm: the proxy forgets SECRET; its stand-in then goes out as it is,\n"
        "and means nothing. The workload's $SECRET (the stand-in) stays the same either way; a\n"
        "secret the sandbox was not made with cannot be added. Each is all or nothing, secret\n"
        "by secret, in the order given.",
    .groups = CLI_GROUPS(CLI_OWN(CLI_FLAG("json", 0, 'j', "the result as {ok, name, secrets}")),
                         &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME", CLI_COMP_SANDBOX, NULL}, {"set|rm", CLI_COMP_NONE, NULL},
                             {"SECRET", CLI_COMP_NONE, NULL}),
    .exit_status = "0 ok, 1 error (no such sandbox or secret, a source that cannot be read), 2 "
                   "bad usage.",
};

int cmd_secret(int argc, char **argv)
{
    struct cli_conn conn = {0};
    sp_sandbox *sb = NULL;
    bool json = false;
    int rc = 0;
    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_secret, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            return 0;
        int took = cli_conn_option(&conn, "secret", opt, optarg);
        if (took < 0 || opt == CLI_GETOPT_BAD)
            return CLI_EXIT_USAGE;
        if (took)
            continue;
        if (opt != 'j')
            return CLI_EXIT_USAGE;
        json = true;
    }
    if (argc - optind < 3)
        return cli_usage("secret", "%s",
                         argc - optind < 1   ? "missing sandbox NAME"
                         : argc - optind < 2 ? "missing set or rm"
                                             : "missing SECRET");
    const char *action = argv[optind + 1];
    bool set = strcmp(action, "set") == 0;
    if (!set && strcmp(action, "rm") != 0)
        return cli_usage("secret", "'%s': set or rm", action);
    for (int i = optind + 2; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        if (set && (!eq || eq == argv[i] || !eq[1]))
            return cli_usage("secret", "set '%s': write SECRET=env:VAR or SECRET=file:PATH",
                             argv[i]);
        if (!set && eq)
            return cli_usage("secret", "rm '%s': the secret's name alone", argv[i]);
    }
    if ((rc = cli_sandbox_open(&sb, argv[optind], &conn, json)) != 0)
        return rc;
    cJSON *done = cJSON_CreateArray();
    for (int i = optind + 2; i < argc && rc == 0; i++) {
        const char *eq = strchr(argv[i], '=');
        char *name = eq ? sp_xstrndup(argv[i], (size_t)(eq - argv[i])) : sp_xstrdup(argv[i]);
        sp_error *err = NULL;
        int r = sp_sandbox_secret_set(sb, name, eq ? eq + 1 : NULL, &err);
        if (r < 0)
            rc = cli_fail(json, r, err);
        else if (json)
            cJSON_AddItemToArray(done, cJSON_CreateString(name));
        else
            fprintf(stderr, "sandpod: secret %s of %s: %s\n", name, sp_sandbox_name(sb),
                    set ? "the new value is in force" : "taken away");
        free(name);
    }
    if (rc == 0 && json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddBoolToObject(o, "ok", true);
        cJSON_AddStringToObject(o, "name", sp_sandbox_name(sb));
        cJSON_AddItemToObject(o, "secrets", done);
        done = NULL;
        rc = cli_print_result(o);
    }
    cJSON_Delete(done);
    sp_sandbox_free(sb);
    return rc;
}
