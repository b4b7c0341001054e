/* sandpod rm NAME...: remove sandboxes: container, state folder, snapshots
 * and (unless --keep-workspace) the workspace. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fs_json.h"

enum { OPT_KEEP = 256, OPT_JSON };

const struct cli_spec cli_spec_rm = {
    .name = "rm",
    .fn = cmd_rm,
    .summary = "Remove sandboxes (optionally keeping their workspaces)",
    .usage = CLI_USAGE("[OPTIONS] NAME..."),
    .description = "Remove sandboxes: the container, the state folder with its snapshots and\n"
                   "events, and the workspace. A running sandbox is refused unless --force is\n"
                   "given. Each NAME is printed once removed.\n"
                   "\n"
                   "An incomplete sandbox (`sandpod ls` shows it so: a create killed before it\n"
                   "finished left its state folder) is removed too, and printed as\n"
                   "'NAME (incomplete: ...)'; one whose create is still under way (its lock is\n"
                   "held) is refused, --force or not.",
    .groups = CLI_GROUPS(
        CLI_OWN(CLI_FLAG("keep-workspace", 0, OPT_KEEP,
                         "keep the workspace folder: it is moved to "
                         "STATE_ROOT/kept-workspaces/NAME, which is printed"),
                CLI_FLAG("force", 'f', 'f', "remove running sandboxes too; a missing NAME is fine"),
                CLI_FLAG("json", 0, OPT_JSON,
                         "print {ok, sandboxes: [{name, ok, incomplete, kept_workspace, "
                         "error}]}")),
        &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME...", CLI_COMP_SANDBOX, NULL}),
    .exit_status = "0 when every sandbox is removed, 1 when any failed (the others are still "
                   "removed), 2 bad usage.",
};

/* Set *err to an error of our own (sp_error_free() frees it). */
static int own_error(sp_error **err, int code, const char *msg)
{
    *err = calloc(1, sizeof(**err));
    if (*err) {
        (*err)->code = code;
        (*err)->message = strdup(msg);
    }
    return code;
}

/* NAME has no sandbox.json: remove what its create left, unless that
 * create is still under way. SP_ENOTFOUND (with *err kept) when there is no
 * folder either; SP_EEXISTS when the create has just finished. */
static int remove_incomplete(const char *name, const sp_sandbox_opts *so, bool keep, sp_error **err)
{
    sp_error *e = NULL;
    int r = sp_sandbox_remove_incomplete(name, so->state_root, 0, keep, &e);
    if (r == SP_ENOTFOUND || r == SP_EEXISTS) {
        sp_error_free(e);
        return r;
    }
    sp_error_free(*err);
    *err = e;
    if (r == 0 && keep) {
        char msg[256];
        snprintf(msg, sizeof(msg),
                 "sandbox %s is incomplete (its create never finished), so its workspace is "
                 "not kept; remove it without --keep-workspace",
                 name);
        return own_error(err, SP_EINVAL, msg);
    }
    return r;
}

/* Remove one sandbox. *missing tells a NAME that does not exist;
 * *incomplete, one that was incomplete. */
static int remove_one(sp_sandbox **sbp, const char *name, const sp_sandbox_opts *so, bool keep,
                      bool force, bool *missing, bool *incomplete, sp_error **err)
{
    *missing = *incomplete = false;
    int r = sp_sandbox_open(sbp, name, so, err);
    if (r == SP_ENOTFOUND) {
        r = remove_incomplete(name, so, keep, err);
        /* Its create finished meanwhile: a sandbox now. */
        if (r == SP_EEXISTS) {
            sp_error_free(*err);
            *err = NULL;
            r = sp_sandbox_open(sbp, name, so, err);
        } else {
            *incomplete = r == 0;
            *missing = r == SP_ENOTFOUND;
            return r;
        }
    }
    if (r < 0)
        return r;
    if (!force) {
        sp_sandbox_status *st = NULL;
        r = sp_sandbox_status_get(&st, *sbp, err);
        if (r < 0)
            return r;
        bool running = st->running || (st->state && strcmp(st->state, "paused") == 0);
        sp_sandbox_status_free(st);
        if (running) {
            char msg[256];
            if (!sp_sandbox_stops(*sbp))
                snprintf(msg, sizeof(msg),
                         "sandbox %s is running (on engine %s); use --force to remove it", name,
                         sp_sandbox_engine(*sbp));
            else
                snprintf(msg, sizeof(msg),
                         "sandbox %s is running; stop it first ('sandpod stop %s') or use --force",
                         name, name);
            return own_error(err, SP_EINVAL, msg);
        }
    }
    return sp_sandbox_remove(*sbp, keep, err);
}

int cmd_rm(int argc, char **argv)
{
    struct cli_conn conn = {0};
    bool json = false, keep = false, force = false;
    int rc = 0;
    cJSON *out = NULL, *list = NULL;

    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_rm, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        int took = cli_conn_option(&conn, "rm", opt, optarg);
        if (took < 0 || opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        switch (opt) {
        case 'f':
            force = true;
            break;
        case OPT_KEEP:
            keep = true;
            break;
        case OPT_JSON:
            json = true;
            break;
        }
    }
    if (optind >= argc) {
        rc = cli_usage("rm", "missing sandbox NAME");
        goto done;
    }
    if (json) {
        out = cJSON_CreateObject();
        if (out && cJSON_AddTrueToObject(out, "ok"))
            list = cJSON_AddArrayToObject(out, "sandboxes");
        if (!list) {
            rc = cli_error("out of memory");
            goto done;
        }
    }

    sp_sandbox_opts so = cli_conn_sandbox_opts(&conn);
    for (int i = optind; i < argc; i++) {
        const char *name = argv[i];
        sp_sandbox *sb = NULL;
        sp_error *err = NULL;
        bool missing = false, incomplete = false;
        int r = remove_one(&sb, name, &so, keep, force, &missing, &incomplete, &err);
        if (r < 0 && missing && force) {
            sp_error_free(err);
            continue;
        }
        if (r < 0) {
            rc = cli_sp_error(r, err);
        } else if (!json && incomplete) {
            printf("%s (incomplete: a create that never finished left it)\n", name);
        } else if (!json) {
            printf("%s\n", name);
            if (keep) {
                fputs("workspace kept at ", stdout);
                cli_put_name(stdout, sp_sandbox_workspace(sb));
                putchar('\n');
            }
        }
        if (json) {
            cJSON *item = r == 0 ? cJSON_CreateObject()
                          : err  ? sp_json_error(err)
                                 : sp_json_error_code(r, sp_strerror(r));
            bool ok = item && sp_json_add_string(item, "name", name);
            if (ok && r == 0)
                ok = cJSON_AddTrueToObject(item, "ok") &&
                     cJSON_AddBoolToObject(item, "incomplete", incomplete) &&
                     sp_json_add_string(item, "kept_workspace",
                                        keep && sb ? sp_sandbox_workspace(sb) : NULL);
            if (!ok || !cJSON_AddItemToArray(list, item)) {
                cJSON_Delete(item);
                sp_error_free(err);
                sp_sandbox_free(sb);
                rc = cli_error("out of memory");
                goto done;
            }
        }
        sp_error_free(err);
        sp_sandbox_free(sb);
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
