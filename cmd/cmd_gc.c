/* sandpod gc: remove the containers sandpod made that no sandbox owns any
 * more (a state folder deleted by hand, a create killed half-way), the
 * incomplete sandboxes such a create left, the processes a killed Podman
 * service lost, and services nobody can reach; with --kept, the sandboxes
 * MCP sessions kept that nobody used for long. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "fs_json.h"

enum { OPT_JSON = 256, OPT_DRY, OPT_ENGINE, OPT_KEPT, OPT_OLDER };

/* --kept alone: a week unused. */
#define KEPT_DEFAULT_AGE_S (7 * 86400LL)

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
                   "lies beneath it, and the Podman service is the one of that state root.\n"
                   "\n"
                   "With --kept, also remove the sandboxes MCP sessions made and kept\n"
                   "(`sandpod mcp --create` or --project; made_by \"mcp\" in `sandpod inspect`)\n"
                   "that are not running and were last used longer ago than --older-than\n"
                   "(default 7d). Last used is the newest modification time of the sandbox's\n"
                   "sandbox.json (written at create and at every start) and its events.jsonl\n"
                   "(a line for every tool call and every sh, exec or fs command). A sandbox\n"
                   "that is running or paused, or whose lock is held, stays.",
    .groups = CLI_GROUPS(
        CLI_OWN(CLI_FLAG("dry-run", 'n', 'n', "only print what would be removed"),
                CLI_FLAG("kept", 0, OPT_KEPT,
                         "also remove the sandboxes MCP sessions kept that are not running "
                         "and unused for --older-than"),
                CLI_VALUE("older-than", 0, "AGE", OPT_OLDER, CLI_COMP_NONE,
                          "with --kept: unused for at least AGE, a number and a unit s, m, "
                          "h, d or w (30m, 12h, 7d, 1d12h; default 7d)"),
                CLI_VALUE("engine", 0, "NAME", OPT_ENGINE, CLI_COMP_NONE,
                          "collect on that engine instead: its workloads (Pods) "
                          "made from this state root that no sandbox owns"),
                CLI_FLAG("json", 0, OPT_JSON,
                         "print {ok, orphans: [{kind, container, state_dir, pid, "
                         "reason, removed, error}], unlabelled, incomplete_busy}; kind is "
                         "container, runtime, service, pod, incomplete or kept (for the "
                         "last two, container is the sandbox's name)")),
        &cli_group_conn),
    .exit_status = "0 when every orphan is removed (or none found), 1 when any removal failed or "
                   "Podman cannot be reached, 2 bad usage.",
};

/* By sp_orphan_kind: the JSON kind, and the noun the text prints. */
static const char *const kind_names[] = {"container", "runtime",    "service",
                                         "pod",       "incomplete", "kept"};
static const char *const kind_nouns[] = {"container",          "runtime",     "service", "pod",
                                         "incomplete sandbox", "kept sandbox"};

static bool kind_known(const sp_sandbox_orphan *it)
{
    return (size_t)it->kind < sizeof(kind_names) / sizeof(kind_names[0]);
}

/* AGE for --older-than: one or more NUMBER UNIT pairs (30m, 1d12h), in
 * seconds; false when it is not one. */
static bool parse_age(const char *s, long long *out)
{
    static const char units[] = "smhdw";
    static const long long secs[] = {1, 60, 3600, 86400, 7 * 86400};
    long long total = 0;
    if (!*s)
        return false;
    while (*s) {
        size_t digits = strspn(s, "0123456789");
        if (!digits || digits > 9)
            return false;
        long long v = 0;
        for (size_t i = 0; i < digits; i++)
            v = v * 10 + (s[i] - '0');
        s += digits;
        const char *u = *s ? strchr(units, *s) : NULL;
        if (!u)
            return false;
        total += v * secs[u - units];
        if (total > 100LL * 365 * 86400)
            return false;
        s++;
    }
    *out = total;
    return true;
}

static bool add_items(cJSON *list, const sp_sandbox_orphans *o)
{
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
            return false;
        }
    }
    return true;
}

/* What gc found and, with --kept (else NULL), what the kept pass found. */
static cJSON *orphans_json(const sp_sandbox_orphans *o, const sp_sandbox_orphans *kept)
{
    cJSON *out = cJSON_CreateObject();
    cJSON *list = out ? cJSON_AddArrayToObject(out, "orphans") : NULL;
    if (!list || !cJSON_AddNumberToObject(out, "unlabelled", (double)o->unlabelled) ||
        !cJSON_AddNumberToObject(out, "incomplete_busy", (double)o->incomplete_busy) ||
        !add_items(list, o) || (kept && !add_items(list, kept))) {
        cJSON_Delete(out);
        return NULL;
    }
    return out;
}

static void print_items(const sp_sandbox_orphans *o, bool dry)
{
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
}

static bool any_failed(const sp_sandbox_orphans *o, bool dry)
{
    for (size_t i = 0; o && i < o->n; i++)
        if (!dry && !o->items[i].removed)
            return true;
    return false;
}

int cmd_gc(int argc, char **argv)
{
    struct cli_conn conn = {0};
    bool json = false, dry = false, kept_too = false;
    const char *engine = NULL, *older = NULL;
    long long age = KEPT_DEFAULT_AGE_S;
    sp_sandbox_orphans *o = NULL, *kept = NULL;
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
        case OPT_KEPT:
            kept_too = true;
            break;
        case OPT_OLDER:
            older = optarg;
            break;
        }
    }
    if (optind < argc) {
        rc = cli_usage("gc", "unexpected argument");
        goto done;
    }
    if (older && !kept_too) {
        rc = cli_usage("gc", "--older-than goes with --kept");
        goto done;
    }
    if (older && !parse_age(older, &age)) {
        rc = cli_usage("gc", "--older-than takes an age such as 30m, 12h or 7d, not '%s'", older);
        goto done;
    }

    sp_error *err = NULL;
    int r = engine && strcmp(engine, SP_ENGINE_LOCAL) != 0
                ? sp_sandbox_gc_engine(&o, conn.state_root, engine, dry, &err)
                : sp_sandbox_gc(&o, conn.url, conn.state_root, dry, &err);
    if (r == 0 && kept_too)
        r = sp_sandbox_gc_kept(&kept, conn.url, conn.state_root, age, dry, &err);
    if (r < 0) {
        rc = cli_fail(json, r, err);
        goto done;
    }
    bool failed = any_failed(o, dry) || any_failed(kept, dry);
    if (json) {
        rc = cli_print_result(orphans_json(o, kept));
    } else {
        print_items(o, dry);
        if (kept)
            print_items(kept, dry);
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

done:
    sp_sandbox_orphans_free(o);
    sp_sandbox_orphans_free(kept);
    cli_conn_dispose(&conn);
    return rc;
}
