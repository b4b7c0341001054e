/* sandpod restore: make a sandbox's workspace (or --root) equal to a
 * snapshot again. */
#include <inttypes.h>
#include <string.h>

#include "cli.h"
#include "snapshot_json.h"

enum { OPT_STATS = 0x2100, OPT_KEEP_SETID, OPT_MAX_DATA };

/* In cmd_snapshot.c: store options cli_snap_open() then uses. */
void cli_snap_keep_setid(bool keep);
int cli_snap_max_data(const char *cmd, const char *arg);

const struct cli_spec cli_spec_restore = {
    .name = "restore",
    .fn = cmd_restore,
    .summary = "Make a workspace exactly what it was at a snapshot",
    .usage = CLI_USAGE("[--json] [--keep-setid] [--max-data SIZE] NAME SNAP",
                       "[--json] [--keep-setid] [--max-data SIZE] --root DIR --store DIR SNAP"),
    .description = "Make the workspace exactly what it was at snapshot SNAP (an id, a tag, or a\n"
                   "prefix of an id or commit): contents, permission bits, symlinks, empty\n"
                   "folders, .git folders; everything made since is removed. Only what differs\n"
                   "is written, and only beneath the workspace (a symlink planted where a folder\n"
                   "was is replaced, never followed). Files written get no set-user-ID or\n"
                   "set-group-ID bit unless --keep-setid is given; a file with holes gets them\n"
                   "back. A running container is paused meanwhile. Run it again if it was\n"
                   "interrupted.",
    .groups = CLI_GROUPS(
        CLI_OWN(CLI_FLAG("json", 0, 'j', "print {ok, restored: {snapshot record}, stats}"),
                CLI_FLAG("stats", 0, OPT_STATS, "print what the restore cost on stderr"),
                CLI_FLAG("keep-setid", 0, OPT_KEEP_SETID,
                         "write the set-id bits of files as the snapshot has them"),
                CLI_VALUE("max-data", 0, "SIZE", OPT_MAX_DATA, CLI_COMP_NONE,
                          "refuse, changing nothing, a restore that would write (or first read) "
                          "more than SIZE of file data (K, M, G, T, or 'none'; default 16G; holes "
                          "do not count)")),
        &cli_group_snap, &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME", CLI_COMP_SANDBOX, NULL}, {"SNAP", CLI_COMP_NONE, NULL}),
    .exit_status = "0 ok, 1 error (no such snapshot, or ambiguous), 2 bad usage.",
};

int cmd_restore(int argc, char **argv)
{
    struct cli_snap c = {0};
    bool stats = false;
    int rc = 0;
    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_restore, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        int took = opt == CLI_GETOPT_BAD ? -1 : cli_snap_option(&c, "restore", opt, optarg);
        if (took < 0) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        if (opt == OPT_STATS)
            stats = true;
        else if (opt == OPT_KEEP_SETID)
            cli_snap_keep_setid(true);
        else if (opt == OPT_MAX_DATA) {
            if (cli_snap_max_data("restore", optarg) < 0) {
                rc = CLI_EXIT_USAGE;
                goto done;
            }
        } else
            c.json = true;
    }
    const char *name = NULL;
    if ((rc = cli_snap_target(&c, "restore", argc, argv, &name)) != 0)
        goto done;
    if (optind >= argc) {
        rc = cli_usage("restore", "missing SNAP to restore");
        goto done;
    }
    const char *ref = argv[optind++];
    if (optind < argc) {
        rc = cli_usage("restore", "unexpected argument '%s'", argv[optind]);
        goto done;
    }
    c.remote_tool = "restore";
    {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddStringToObject(a, "snapshot", ref);
        c.remote_args = cJSON_PrintUnformatted(a);
        cJSON_Delete(a);
    }
    if ((rc = cli_snap_open(&c, name, false)) != 0 || c.handled)
        goto done;
    sp_snapshot *snap = NULL;
    sp_error *err = NULL;
    int r = sp_snapshot_restore(&snap, c.s, ref, &err);
    cli_snap_progress_end(&c);
    if (r < 0) {
        rc = cli_fail(c.json, r, err);
        goto done;
    }
    sp_snapstore_stats st;
    sp_snapstore_last_stats(c.s, &st);
    if (stats)
        fprintf(stderr,
                "%s: %" PRIu64 " entries looked at, %" PRIu64 " files read, %" PRIu64
                " paths changed, %" PRId64 " ms\n",
                st.full_walk ? "full walk" : "tracked", st.entries, st.files_hashed,
                st.paths_changed, st.elapsed_ms);
    if (c.json) {
        cJSON *o = cJSON_CreateObject();
        if (o && (!cJSON_AddItemToObject(o, "restored", sp_json_snapshot(snap)) ||
                  !cJSON_AddItemToObject(o, "stats", sp_json_snapstore_stats(&st)))) {
            cJSON_Delete(o);
            o = NULL;
        }
        rc = cli_print_result(o);
    } else {
        printf("restored %s", snap->id);
        if (snap->tag) {
            fputs(" (", stdout);
            cli_put_name(stdout, snap->tag);
            fputc(')', stdout);
        }
        printf(": %" PRIu64 " paths changed\n", st.paths_changed);
    }
    sp_snapshot_free(snap);
done:
    cli_snap_close(&c);
    return rc;
}
