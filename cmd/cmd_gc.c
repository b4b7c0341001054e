/* sandpod gc: remove the containers sandpod made that no sandbox owns any
 * more (a state folder deleted by hand, a create killed half-way), the
 * incomplete sandboxes such a create left, the processes a killed Podman
 * service lost, and services nobody can reach. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "fs_json.h"

enum { OPT_JSON = 256, OPT_DRY, OPT_ENGINE };

const struct cli_spec cli_spec_gc = {
    .name = "gc",
    .fn = cmd_gc,
    .summary = "Remove what no sandbox owns any more (killed creates, lost state)",
    .usage = CLI_USAGE("[OPTIONS]"),
    .description = "Remove what sandpod left that nothing owns, each printed with the reason:\n"
                   "  - orphaned sandpod containers on the Podman service: their state folder\n"
                   "    (the sandpod.state label) is gone, holds no sandbox.json, or names\n"
                   "    another container. Sandboxes of every state root are judged; a sandbox\n"
                   "    whose lock is held is busy and left alone. Workspaces are never touched.\n"
                   "  - incomplete sandboxes of the state root: a state folder without\n"
                   "    sandbox.json (a create killed half-way; `sandpod ls` shows it as\n"
                   "    incomplete), once nothing holds its lock and it has not changed for a\n"
                   "    minute (a create makes the folder a moment before it locks it). It is\n"
                   "    removed under its lock, workspace and all, never following a symlink.\n"
                   "  - the conmon and 'runc init' of sandpod containers the service no longer\n"
                   "    knows (it was killed while starting them), when it runs on this host;\n"
                   "  - Podman services whose socket folder is gone (nobody can reach them).\n"
                   "Processes are only this user's and at least a minute old. With --state-root,\n"
                   "a container is judged against that state root only when its state folder\n"
                   "lies beneath it, and the Podman service is the one of that state root.",
    .groups = CLI_GROUPS(
        CLI_OWN(CLI_FLAG("dry-run", 'n', 'n', "only print what would be removed"),
                CLI_VALUE("engine", 0, "NAME", OPT_ENGINE, CLI_COMP_NONE,
                          "collect on that engine instead: its workloads (Pods) "
                          "made from this state root that no sandbox owns"),
                CLI_FLAG("json", 0, OPT_JSON,
                         "print {ok, orphans: [{kind, container, state_dir, pid, "
                         "reason, removed, error}], unlabelled, incomplete_busy}; kind is "
                         "container, runtime, service, pod or incomplete (for which "
                         "container is the sandbox's name)")),
        &cli_group_conn),
    .exit_status = "0 when every orphan is removed (or none found), 1 when any removal failed or "
                   "Podman cannot be reached, 2 bad usage.",
};

/* By sp_orphan_kind: the JSON kind, and the noun the text prints. */
static const char *const kind_names[] = {"container", "runtime", "service", "pod", "incomplete"};
static const char *const kind_nouns[] = {"container", "runtime", "service", "pod",
                                         "incomplete sandbox"};

static bool kind_known(const sp_sandbox_orphan *it)
{
    return (size_t)it->kind < sizeof(kind_names) / sizeof(kind_names[0]);
}

static cJSON *orphans_json(const sp_sandbox_orphans *o)
{
    cJSON *out = cJSON_CreateObject();
    cJSON *list = out ? cJSON_AddArrayToObject(out, "orphans") : NULL;
    if (!list || !cJSON_AddNumberToObject(out, "unlabelled", (double)o->unlabelled) ||
        !cJSON_AddNumberToObject(out, "incomplete_busy", (double)o->incomplete_busy)) {
        cJSON_Delete(out);
        return NULL;
    }
    for (size_t i = 0; i < o->n; i++) {
        const sp_sandbox_orphan *it = &o->items[i];
        cJSON *j = cJSON_CreateObject();
        const char *kind = kind_known(it) ? kind_names[it->kind] : "unknown";
        bool ok = j && sp_json_add_string(j, "kind", kind) &&
                  sp_json_add_string(j, "container", it->container) &&
                  sp_json_add_string(j, "state_dir", it->state_dir) &&
                  (it->pid ? cJSON_AddNumberToObject(j, "pid", it->pid)
                           : cJSON_AddNullToObject(j, "pid")) &&
                  sp_json_add_string(j, "reason", it->reason) &&
                  cJSON_AddBoolToObject(j, "removed", it->removed) &&
                  sp_json_add_string(j, "error", it->error);
        if (!ok || !cJSON_AddItemToArray(list, j)) {
            cJSON_Delete(j);
            cJSON_Delete(out);
            return NULL;
        }
    }
    return out;
}

int cmd_gc(int argc, char **argv)
{
    struct cli_conn conn = {0};
    bool json = false, dry = false;
    const char *engine = NULL;
    int rc = 0;

    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_gc, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        int took = cli_conn_option(&conn, "gc", opt, optarg);
        if (took < 0 || opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        switch (opt) {
        case 'n':
            dry = true;
            break;
        case OPT_JSON:
            json = true;
            break;
        case OPT_ENGINE:
            engine = optarg;
            break;
        }
    }
    if (optind < argc) {
        rc = cli_usage("gc", "unexpected argument");
        goto done;
    }

    sp_sandbox_orphans *o = NULL;
    sp_error *err = NULL;
    int r = engine && strcmp(engine, SP_ENGINE_LOCAL) != 0
                ? sp_sandbox_gc_engine(&o, conn.state_root, engine, dry, &err)
                : sp_sandbox_gc(&o, conn.url, conn.state_root, dry, &err);
    if (r < 0) {
        rc = cli_fail(json, r, err);
        goto done;
    }
    bool failed = false;
    for (size_t i = 0; i < o->n; i++)
        failed |= !dry && !o->items[i].removed;
    if (json) {
        rc = cli_print_result(orphans_json(o));
    } else {
        for (size_t i = 0; i < o->n; i++) {
            const sp_sandbox_orphan *it = &o->items[i];
            fputs(dry ? "would remove " : it->removed ? "removed " : "FAILED to remove ", stdout);
            printf("%s ", kind_known(it) ? kind_nouns[it->kind] : "item");
            cli_put_name(stdout, it->container);
            fputs(": ", stdout);
            cli_put_name(stdout, it->reason);
            if (it->error) {
                fputs(": ", stdout);
                cli_put_name(stdout, it->error);
            }
            putchar('\n');
        }
        if (o->unlabelled)
            printf("%zu container(s) labelled sandpod=1 without a sandpod.state label were left "
                   "alone\n",
                   o->unlabelled);
        if (o->incomplete_busy)
            printf("%zu incomplete sandbox(es) were left alone: a create holds the lock, or the "
                   "folder changed less than a minute ago\n",
                   o->incomplete_busy);
    }
    if (failed && rc == 0)
        rc = CLI_EXIT_ERROR;
    sp_sandbox_orphans_free(o);

done:
    cli_conn_dispose(&conn);
    return rc;
}
