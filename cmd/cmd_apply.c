/* sandpod apply: bring a sandbox's workspace changes back into a host
 * folder, all or nothing, refusing over host changes. */
#include <string.h>

#include "cli.h"

enum { OPT_DRY_RUN = 'n', OPT_FORCE = 'f', OPT_PATCH = 'p', OPT_FROM = 0x2200, OPT_TO, OPT_SUBDIR };

const struct cli_spec cli_spec_apply = {
    .name = "apply",
    .fn = cmd_apply,
    .summary = "Bring a sandbox's changes back into a host folder",
    .usage = CLI_USAGE("[--from SNAP] [--to DIR] [--dry-run] [--force] [--patch] [--json] NAME"),
    .description = "Write what changed in the workspace since the baseline (the snapshot 'base'\n"
                   "that create takes), or since --from SNAP, into a host folder: by default the\n"
                   "first mount's source, taking the part of the workspace that mount landed in.\n"
                   "Added, modified and deleted files and folders, permission bits (no set-id\n"
                   "bits) and symlinks (as they are, never followed); a rename is a delete and an\n"
                   "add. All or nothing: on a failure what was written is undone. A host path\n"
                   "that no longer matches the snapshot the changes are counted from (edited,\n"
                   "deleted, or added on both sides with other content) is a conflict: all are\n"
                   "listed, nothing is written and the exit status is 1, unless --force. A path\n"
                   "the host already holds as the sandbox has it is left alone. Lines: 'A', 'M',\n"
                   "'D' and the path; '=' already there; 'C' a conflict and why.",
    .groups = CLI_GROUPS(
        CLI_OWN(CLI_VALUE("from", 0, "SNAP", OPT_FROM, CLI_COMP_NONE,
                          "count changes from snapshot SNAP (the host holds it) instead of base"),
                CLI_VALUE("to", 0, "DIR", OPT_TO, CLI_COMP_DIR,
                          "the host folder to write (default: the first mount's source)"),
                CLI_VALUE("subdir", 0, "PATH", OPT_SUBDIR, CLI_COMP_NONE,
                          "the workspace folder whose changes go there (default: where the "
                          "first mount landed)"),
                CLI_FLAG("dry-run", 'n', OPT_DRY_RUN, "list what would be done; write nothing"),
                CLI_FLAG("force", 'f', OPT_FORCE, "write over conflicts: the sandbox's side wins"),
                CLI_FLAG("patch", 'p', OPT_PATCH,
                         "print a unified diff of the changes for 'git apply' instead; write "
                         "nothing"),
                CLI_FLAG("json", 0, 'j',
                         "print {ok, to, from, applied, changes: [{path, action, type, mode, "
                         "already}], conflicts: [{path, reason}], skipped} (and patch)")),
        &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME", CLI_COMP_SANDBOX, NULL}),
    .exit_status = "0 ok (applied, or nothing to do), 1 error or conflicts (nothing written), 2 "
                   "bad usage.",
};

static cJSON *result_json(const sp_apply_result *res)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *ch = cJSON_AddArrayToObject(o, "changes");
    cJSON *co = cJSON_AddArrayToObject(o, "conflicts");
    cJSON_AddBoolToObject(o, "ok", !res->n_conflicts || res->applied);
    cJSON_AddStringToObject(o, "to", res->to);
    cJSON_AddStringToObject(o, "from", res->from);
    cJSON_AddBoolToObject(o, "applied", res->applied);
    cJSON_AddNumberToObject(o, "skipped", (double)res->skipped);
    for (size_t i = 0; i < res->n_changes; i++) {
        const sp_apply_change *c = &res->changes[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "path", c->path);
        cJSON_AddStringToObject(e, "action", sp_apply_action_name(c->action));
        cJSON_AddStringToObject(e, "type", sp_fs_type_name(c->type));
        cJSON_AddNumberToObject(e, "mode", c->mode);
        cJSON_AddBoolToObject(e, "already", c->already);
        cJSON_AddItemToArray(ch, e);
    }
    for (size_t i = 0; i < res->n_conflicts; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "path", res->conflicts[i].path);
        cJSON_AddStringToObject(e, "reason", res->conflicts[i].reason);
        cJSON_AddItemToArray(co, e);
    }
    if (res->patch)
        cJSON_AddStringToObject(o, "patch", res->patch);
    return o;
}

static void print_text(const sp_apply_result *res, bool dry_run)
{
    for (size_t i = 0; i < res->n_changes; i++) {
        const sp_apply_change *c = &res->changes[i];
        printf("%c  ", c->already ? '=' : "AMD"[c->action]);
        cli_put_name(stdout, c->path);
        if (c->type == SP_FS_DIR)
            putchar('/');
        putchar('\n');
    }
    for (size_t i = 0; i < res->n_conflicts; i++) {
        fputs("C  ", stdout);
        cli_put_name(stdout, res->conflicts[i].path);
        printf("  (%s)\n", res->conflicts[i].reason);
    }
    if (res->n_conflicts && !res->applied)
        fprintf(stderr,
                "sandpod: apply: %zu conflict%s with changes on the host; nothing written "
                "(--force writes over them)\n",
                res->n_conflicts, res->n_conflicts == 1 ? "" : "s");
    else if (dry_run)
        fprintf(stderr, "sandpod: apply: dry run, nothing written to %s\n", res->to);
}

int cmd_apply(int argc, char **argv)
{
    struct cli_conn conn = {0};
    sp_sandbox_apply_opts o = SP_SANDBOX_APPLY_OPTS_INIT;
    bool json = false;
    sp_sandbox *sb = NULL;
    int rc = 0;
    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_apply, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        int took = cli_conn_option(&conn, "apply", opt, optarg);
        if (took < 0 || opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        switch (opt) {
        case OPT_FROM:
            o.from = optarg;
            break;
        case OPT_TO:
            o.to = optarg;
            break;
        case OPT_SUBDIR:
            o.subdir = optarg;
            break;
        case OPT_DRY_RUN:
            o.dry_run = true;
            break;
        case OPT_FORCE:
            o.force = true;
            break;
        case OPT_PATCH:
            o.patch = true;
            break;
        default:
            json = true;
        }
    }
    if (optind >= argc) {
        rc = cli_usage("apply", "missing sandbox NAME");
        goto done;
    }
    if (argc - optind > 1) {
        rc = cli_usage("apply", "unexpected argument '%s'", argv[optind + 1]);
        goto done;
    }
    if ((rc = cli_sandbox_open(&sb, argv[optind], &conn, json)) != 0)
        goto done;
    sp_apply_result *res = NULL;
    sp_error *err = NULL;
    int r = sp_sandbox_apply(&res, sb, &o, &err);
    if (r < 0) {
        rc = cli_fail(json, r, err);
        goto done;
    }
    if (json)
        rc = cli_print_result(result_json(res));
    else if (o.patch)
        fputs(res->patch ? res->patch : "", stdout);
    else
        print_text(res, o.dry_run);
    if (rc == 0 && res->n_conflicts && !res->applied)
        rc = 1;
    sp_apply_result_free(res);
done:
    sp_sandbox_free(sb);
    return rc;
}
