/* sandpod call: run one tool call of the model tool suite on a sandbox or
 * a folder and print its result object. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "fs_json.h"
#include "json.h"

enum { OPT_FREEFORM = 0x3100, OPT_TEXT };

const struct cli_spec cli_spec_call = {
    .name = "call",
    .fn = cmd_call,
    .summary = "Run one tool call on a sandbox or folder and print its result",
    .usage = CLI_USAGE("[OPTIONS] NAME TOOL [ARGS]", "[OPTIONS] --root DIR TOOL [ARGS]"),
    .description = "Run one call of the model tool suite, as an agent would, and print its result\n"
                   "object {ok, message, value, truncated, changes[, error]} as JSON. NAME is a\n"
                   "sandbox (every tool); --root DIR a bare folder (filesystem tools only). ARGS\n"
                   "is the JSON object of arguments (default {}), or - to read it from stdin.\n"
                   "'sandpod tools --list' lists the tools; 'sandpod tools' gives their schemas.\n"
                   "\n"
                   "Examples:\n"
                   "  sandpod call --root . list_dir '{\"depth\": 1}'\n"
                   "  sandpod call box shell '{\"command\": \"make test\"}'\n"
                   "  sandpod call --root . --freeform apply_patch - < change.patch",
    .groups = CLI_GROUPS(
        CLI_OWN(CLI_FLAG("freeform", 0, OPT_FREEFORM,
                         "ARGS is the raw input of a freeform tool (apply_patch's patch text), "
                         "not JSON"),
                CLI_FLAG("text", 0, OPT_TEXT, "print only the message (errors on stderr)")),
        &cli_group_tools, &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME", CLI_COMP_SANDBOX, NULL}, {"TOOL", CLI_COMP_NONE, NULL},
                             {"ARGS", CLI_COMP_NONE, NULL}),
    .notes = "A call the approval policy holds is asked about on the terminal (/dev/tty);\n"
             "without one it is denied. Events are appended to the sandbox's events.jsonl.",
    .exit_status = "0 the call succeeded, 1 it failed (ok false), 2 bad usage.",
};

int cmd_call(int argc, char **argv)
{
    struct cli_tools tc;
    int rc = cli_tools_init(&tc, argc);
    if (rc)
        return rc;
    struct cli_conn conn = {0};
    bool freeform = false, text = false;
    sp_sandbox *sb = NULL;
    sp_tools *t = NULL;
    char *input = NULL;
    size_t input_len = 0;
    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_call, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        if (opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        int took = cli_tools_option(&tc, "call", opt, optarg);
        if (took == 0)
            took = cli_conn_option(&conn, "call", opt, optarg);
        if (took < 0) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        switch (opt) {
        case OPT_FREEFORM:
            freeform = true;
            break;
        case OPT_TEXT:
            text = true;
            break;
        default: /* CLI_GETOPT_BAD */
            rc = CLI_EXIT_USAGE;
            goto done;
        }
    }
    const char *name = NULL;
    if (!tc.root) {
        if (optind >= argc) {
            rc = cli_usage("call", "missing sandbox NAME (or --root DIR)");
            goto done;
        }
        name = argv[optind++];
    }
    if ((rc = cli_tools_check(&tc, "call", name != NULL)) != 0)
        goto done;
    if (optind >= argc) {
        rc = cli_usage("call", "missing TOOL (see 'sandpod tools --list')");
        goto done;
    }
    const char *tool = argv[optind++];
    const char *args = optind < argc ? argv[optind++] : NULL;
    if (optind < argc) {
        rc = cli_usage("call", "unexpected argument '%s' (quote the JSON arguments)", argv[optind]);
        goto done;
    }
    if (args && strcmp(args, "-") == 0) {
        if (cli_read_fd(STDIN_FILENO, CLI_MAX_INPUT, &input, &input_len) < 0) {
            rc = cli_error("reading stdin: %s", strerror(errno));
            goto done;
        }
    } else if (args) {
        input = strdup(args);
        input_len = strlen(args);
        if (!input) {
            rc = cli_error("out of memory");
            goto done;
        }
    }
    if (freeform && !input) {
        rc = cli_usage("call", "--freeform needs the input (or - for stdin)");
        goto done;
    }

    tc.opts.approve = cli_tools_prompt;
    sp_error *err = NULL;
    int r;
    if (name) {
        if ((rc = cli_sandbox_open(&sb, name, &conn, !text)) != 0)
            goto done;
        r = sp_tools_open_sandbox(&t, sb, &tc.opts, &err);
    } else {
        r = sp_tools_open_root(&t, tc.root, &tc.opts, &err);
    }
    if (r < 0) {
        rc = cli_fail(!text, r, err);
        goto done;
    }
    char *result = NULL;
    r = freeform ? sp_tools_call_freeform(&result, t, tool, input, input_len)
                 : sp_tools_call(&result, t, tool, input, input_len);
    /* Parsed again to print: exactly, or mtime_ns would become a double. */
    cJSON *o = result ? sp_json_parse_exact(result, strlen(result)) : NULL;
    free(result);
    if (!o) {
        rc = cli_error("out of memory");
        goto done;
    }
    if (text) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "message");
        const char *msg = cJSON_IsString(m) ? m->valuestring : "";
        if (r == 0) {
            fputs(msg, stdout);
            if (*msg && msg[strlen(msg) - 1] != '\n')
                putchar('\n');
        } else {
            cli_error("%s", msg);
        }
        cJSON_Delete(o);
    } else {
        rc = cli_print_json(o);
        if (rc)
            goto done;
    }
    rc = r == 0 ? CLI_EXIT_OK : CLI_EXIT_ERROR;
done:
    sp_tools_free(t);
    sp_sandbox_free(sb);
    free(input);
    cli_conn_dispose(&conn);
    cli_tools_dispose(&tc);
    return rc;
}
