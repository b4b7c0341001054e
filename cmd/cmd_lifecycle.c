/* sandpod start | stop | restart NAME...: the container's lifecycle. The
 * workspace is untouched; a container that is gone is recreated by start
 * from the sandbox's saved configuration. */
#include <limits.h>
#include <string.h>

#include "cli.h"
#include "fs_json.h"

enum action { START, STOP, RESTART };

static const char *const action_names[] = {"start", "stop", "restart"};

enum { OPT_TIME = 't', OPT_JSON = 256 };

#define LIFECYCLE_JSON CLI_FLAG("json", 0, OPT_JSON, "print {ok, sandboxes: [{name, ok, error}]}")
#define LIFECYCLE_TIME                                                                             \
    CLI_VALUE("time", 't', "S", OPT_TIME, CLI_COMP_NONE,                                           \
              "seconds to wait before SIGKILL (default 10)")
#define LIFECYCLE_EXIT                                                                             \
    "0 when every sandbox is done, 1 when any failed (the others are still done), 2 bad usage."

const struct cli_spec cli_spec_start = {
    .name = "start",
    .fn = cmd_start,
    .summary = "Start sandboxes (a lost container is recreated)",
    .usage = CLI_USAGE("[OPTIONS] NAME..."),
    .description = "Start the containers of the sandboxes. A sandbox whose container is gone "
                   "(removed by hand, lost in a reboot) gets a new one from its saved "
                   "configuration; the workspace is kept. Each NAME is printed once done.",
    .groups = CLI_GROUPS(CLI_OWN(LIFECYCLE_JSON), &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME...", CLI_COMP_SANDBOX, NULL}),
    .exit_status = LIFECYCLE_EXIT,
};

const struct cli_spec cli_spec_stop = {
    .name = "stop",
    .fn = cmd_stop,
    .summary = "Stop sandboxes, keeping their workspaces",
    .usage = CLI_USAGE("[OPTIONS] NAME..."),
    .description = "Stop the containers of the sandboxes: SIGTERM, then SIGKILL after --time "
                   "seconds. The workspace and the configuration stay; 'sandpod start' resumes. "
                   "Each NAME is printed once done.",
    .groups = CLI_GROUPS(CLI_OWN(LIFECYCLE_TIME, LIFECYCLE_JSON), &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME...", CLI_COMP_SANDBOX, NULL}),
    .exit_status = LIFECYCLE_EXIT,
};

const struct cli_spec cli_spec_restart = {
    .name = "restart",
    .fn = cmd_restart,
    .summary = "Stop, then start, sandboxes",
    .usage = CLI_USAGE("[OPTIONS] NAME..."),
    .description = "Stop, then start, the containers of the sandboxes. Each NAME is printed once "
                   "done.",
    .groups = CLI_GROUPS(CLI_OWN(LIFECYCLE_TIME, LIFECYCLE_JSON), &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME...", CLI_COMP_SANDBOX, NULL}),
    .exit_status = LIFECYCLE_EXIT,
};

static const struct cli_spec *const action_specs[] = {&cli_spec_start, &cli_spec_stop,
                                                      &cli_spec_restart};

static int act(enum action a, sp_sandbox *sb, int time_s, sp_error **err)
{
    switch (a) {
    case START:
        return sp_sandbox_start(sb, err);
    case STOP:
        return sp_sandbox_stop(sb, time_s, err);
    case RESTART: {
        if (time_s < 0)
            return sp_sandbox_restart(sb, err);
        int r = sp_sandbox_stop(sb, time_s, err);
        return r < 0 ? r : sp_sandbox_start(sb, err);
    }
    }
    return SP_EINVAL;
}

static int lifecycle(enum action a, int argc, char **argv)
{
    const char *cmd = action_names[a];
    struct cli_conn conn = {0};
    bool json = false;
    int time_s = -1;
    long long v = 0;
    int rc = 0;
    cJSON *out = NULL;

    optind = 0;
    int opt;
    while ((opt = cli_next(action_specs[a], argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        int took = cli_conn_option(&conn, cmd, opt, optarg);
        if (took < 0 || opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        switch (opt) {
        case OPT_TIME:
            if (a == START) {
                rc = cli_usage(cmd, "option '--time' does not apply to start");
                goto done;
            }
            if (cli_parse_ll(cmd, "--time", optarg, 0, INT_MAX, &v) < 0) {
                rc = CLI_EXIT_USAGE;
                goto done;
            }
            time_s = (int)v;
            break;
        case OPT_JSON:
            json = true;
            break;
        }
    }
    if (optind >= argc) {
        rc = cli_usage(cmd, "missing sandbox NAME");
        goto done;
    }

    cJSON *list = NULL;
    if (json) {
        out = cJSON_CreateObject();
        /* "ok" first, like every answer; set to the outcome at the end. */
        if (out && cJSON_AddTrueToObject(out, "ok"))
            list = cJSON_AddArrayToObject(out, "sandboxes");
        if (!list) {
            rc = cli_error("out of memory");
            goto done;
        }
    }
    sp_sandbox_opts so = cli_conn_sandbox_opts(&conn);
    for (int i = optind; i < argc; i++) {
        sp_sandbox *sb = NULL;
        sp_error *err = NULL;
        int r = sp_sandbox_open(&sb, argv[i], &so, &err);
        if (r == 0)
            r = act(a, sb, time_s, &err);
        sp_sandbox_free(sb);
        if (r < 0)
            rc = cli_sp_error(r, err);
        else if (!json)
            printf("%s\n", argv[i]);
        if (json) {
            cJSON *item = r == 0 ? cJSON_CreateObject()
                          : err  ? sp_json_error(err)
                                 : sp_json_error_code(r, sp_strerror(r));
            bool ok = item && sp_json_add_string(item, "name", argv[i]);
            if (ok && r == 0)
                ok = cJSON_AddTrueToObject(item, "ok") != NULL;
            if (!ok || !cJSON_AddItemToArray(list, item)) {
                cJSON_Delete(item);
                sp_error_free(err);
                rc = cli_error("out of memory");
                goto done;
            }
        }
        sp_error_free(err);
    }
    if (json) {
        if (rc != 0)
            cJSON_ReplaceItemInObjectCaseSensitive(out, "ok", cJSON_CreateFalse());
        int prc = cli_print_json(out);
        out = NULL;
        if (prc)
            rc = prc;
    }

done:
    cJSON_Delete(out);
    cli_conn_dispose(&conn);
    return rc;
}

int cmd_start(int argc, char **argv)
{
    return lifecycle(START, argc, argv);
}

int cmd_stop(int argc, char **argv)
{
    return lifecycle(STOP, argc, argv);
}

int cmd_restart(int argc, char **argv)
{
    return lifecycle(RESTART, argc, argv);
}
