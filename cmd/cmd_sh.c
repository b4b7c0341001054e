/* sandpod sh: the shell tool. Runs `sh -c COMMAND` in a sandbox to
 * completion (or to its timeout) and shows its capped stdout and stderr. */
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sandbox_json.h"

/* sh's exit code for a command that timed out, as timeout(1) uses. */
#define EXIT_TIMED_OUT 124

enum {
    OPT_TIMEOUT = 256,
    OPT_MAX_BYTES,
    OPT_MAX_LINES,
    OPT_JSON,
    OPT_RAW,
};

const struct cli_spec cli_spec_sh = {
    .name = "sh",
    .fn = cmd_sh,
    .summary = "Run a shell command line in a sandbox, output captured and capped",
    .usage = CLI_USAGE("[OPTIONS] NAME 'COMMAND'"),
    .description =
        "Run COMMAND with 'sh -c' in sandbox NAME and wait for it. Its stdout and stderr\n"
        "are captured separately and capped: the head and the tail are kept, with a\n"
        "marker saying how much was left out. stdin is empty. Written to a terminal,\n"
        "control characters (escape sequences that would set the clipboard or the\n"
        "title, or move the cursor) show as \\xNN; to a pipe or a file the output is\n"
        "exact.",
    .groups = CLI_GROUPS(
        CLI_OWN(CLI_VALUE("timeout", 0, "MS", OPT_TIMEOUT, CLI_COMP_NONE,
                          "kill the command and its process group after MS milliseconds (default "
                          "60000; 0 = no limit)"),
                CLI_VALUE("max-bytes", 0, "N", OPT_MAX_BYTES, CLI_COMP_NONE,
                          "cap on each stream, in bytes (default 8192)"),
                CLI_VALUE("max-lines", 0, "N", OPT_MAX_LINES, CLI_COMP_NONE,
                          "cap on each stream, in lines (default 200)")),
        &cli_group_command,
        CLI_OWN(CLI_FLAG("json", 0, OPT_JSON,
                         "print {ok, exit_code, timed_out, duration_ms, stdout, stderr, "
                         "stdout_truncated, stderr_truncated, stdout_bytes, stderr_bytes} and "
                         "exit 0 whenever the command ran"),
                CLI_FLAG("raw", 0, OPT_RAW,
                         "write the output to a terminal as it is, escape sequences included")),
        &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME", CLI_COMP_SANDBOX, NULL}, {"COMMAND", CLI_COMP_NONE, NULL}),
    .exit_status = "the command's (124 when it timed out); 1 when sandpod itself fails, for "
                   "example when the sandbox is stopped; 2 on bad usage.",
};

int cmd_sh(int argc, char **argv)
{
    struct cli_conn conn = {0};
    sp_run_opts ro = SP_RUN_OPTS_INIT;
    bool json = false, raw = false;
    const char **env = calloc((size_t)argc + 1, sizeof(*env));
    size_t n_env = 0;
    sp_sandbox *sb = NULL;
    sp_run_result *res = NULL;
    int rc = 0;
    long long v = 0;
    if (!env)
        return cli_error("out of memory");

    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_sh, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        int took = cli_conn_option(&conn, "sh", opt, optarg);
        if (took < 0) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        switch (opt) {
        case OPT_TIMEOUT:
            if (cli_parse_ll("sh", "--timeout", optarg, 0, INT_MAX, &v) < 0) {
                rc = CLI_EXIT_USAGE;
                goto done;
            }
            ro.timeout_ms = v == 0 ? -1 : (int)v;
            break;
        case OPT_MAX_BYTES:
        case OPT_MAX_LINES: {
            const char *what = opt == OPT_MAX_BYTES ? "--max-bytes" : "--max-lines";
            if (cli_parse_ll("sh", what, optarg, 1, LLONG_MAX, &v) < 0) {
                rc = CLI_EXIT_USAGE;
                goto done;
            }
            if (opt == OPT_MAX_BYTES)
                ro.max_bytes = (size_t)v;
            else
                ro.max_lines = (size_t)v;
            break;
        }
        case 'w':
            ro.workdir = optarg;
            break;
        case 'e':
            if (!strchr(optarg, '=') || optarg[0] == '=') {
                rc = cli_usage("sh", "--env takes KEY=VALUE: '%s'", optarg);
                goto done;
            }
            env[n_env++] = optarg;
            break;
        case OPT_JSON:
            json = true;
            break;
        case OPT_RAW:
            raw = true;
            break;
        default:
            rc = CLI_EXIT_USAGE;
            goto done;
        }
    }
    if (argc - optind < 2) {
        rc = cli_usage("sh", optind < argc ? "missing COMMAND; usage: sandpod sh NAME 'COMMAND'"
                                           : "missing sandbox NAME and COMMAND");
        goto done;
    }
    if (argc - optind > 2) {
        rc = cli_usage("sh",
                       "unexpected argument '%s'; quote the command line as one argument, "
                       "or use 'sandpod exec NAME -- ARGV...'",
                       argv[optind + 2]);
        goto done;
    }
    ro.env = n_env ? env : NULL;

    if ((rc = cli_sandbox_open(&sb, argv[optind], &conn, json)) != 0)
        goto done;
    sp_error *err = NULL;
    int r = sp_sandbox_shell(&res, sb, argv[optind + 1], &ro, &err);
    if (r < 0) {
        rc = cli_fail(json, r, err);
        goto done;
    }
    if (json) {
        rc = cli_print_result(sp_json_run_result(res));
        goto done;
    }
    /* The output is the workload's: on a terminal its escape sequences
     * must not reach the terminal. */
    cli_put_text(stdout, res->out, res->out_len, raw);
    fflush(stdout);
    cli_put_text(stderr, res->err, res->err_len, raw);
    if (res->timed_out) {
        cli_error("command timed out after %" PRId64 " ms; its process group was killed",
                  res->duration_ms);
        rc = EXIT_TIMED_OUT;
    } else if (res->exit_code < 0) {
        rc = cli_error("podman did not report the exit code of the command");
    } else {
        rc = res->exit_code > 255 ? 255 : res->exit_code;
    }

done:
    cli_event(sb, "sh", (const char *const *)argv + optind + 1, rc);
    sp_run_result_free(res);
    sp_sandbox_free(sb);
    cli_conn_dispose(&conn);
    free(env);
    return rc;
}
