/* sandpod snapshots: list the snapshots of a sandbox (or of --root and
 * --store), oldest first. */
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "snapshot_json.h"

const struct cli_spec cli_spec_snapshots = {
    .name = "snapshots",
    .fn = cmd_snapshots,
    .summary = "List the snapshots of a workspace",
    .usage = CLI_USAGE("[--json] NAME [SNAP]", "[--json] --root DIR --store DIR [SNAP]"),
    .description = "List the snapshots of a sandbox, oldest first: id, time (local), tag,\n"
                   "files, size and commit. No snapshot yet (no store either) prints nothing\n"
                   "(an empty list with --json). With SNAP (an id, a tag, or a prefix of an\n"
                   "id or commit) only that snapshot, or an error when there is none (--json:\n"
                   "its record {ok, id, tag, ...}).",
    .groups = CLI_GROUPS(CLI_OWN(CLI_FLAG("json", 0, 'j',
                                          "print {ok, snapshots: [{id, tag, commit, created_at, "
                                          "created_at_ns, root, store, files, dirs, symlinks, "
                                          "bytes}], count}")),
                         &cli_group_snap, &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME", CLI_COMP_SANDBOX, NULL}, {"SNAP", CLI_COMP_NONE, NULL}),
    .exit_status = "0 ok (no snapshot too), 1 error, 2 bad usage.",
};

/* Local time to the second: snapshots are often seconds apart. */
static void local_time(char *buf, size_t size, int64_t ns)
{
    time_t t = (time_t)(ns / 1000000000);
    struct tm lt;
    if (!localtime_r(&t, &lt) || strftime(buf, size, "%Y-%m-%d %H:%M:%S", &lt) == 0)
        snprintf(buf, size, "-");
}

static void print_table(const sp_snapshots *l)
{
    if (l->n == 0)
        return; /* a listing of nothing is empty, as ls's */
    printf("%-36s  %-19s  %8s  %10s  %-12s  %s\n", "ID", "CREATED", "FILES", "SIZE", "COMMIT",
           "TAG");
    for (size_t i = 0; i < l->n; i++) {
        const sp_snapshot *s = l->v[i];
        char when[64], bytes[32];
        local_time(when, sizeof(when), s->created_at_ns);
        cli_format_bytes(bytes, sizeof(bytes), s->bytes);
        printf("%-36s  %-19s  %8" PRIu64 "  %10s  %-12.12s  ", s->id, when, s->files, bytes,
               s->commit);
        cli_put_name(stdout, s->tag ? s->tag : "-");
        putchar('\n');
    }
}

/* snapshots NAME SNAP: the one record. */
static int print_one(struct cli_snap *c, const char *ref)
{
    sp_snapshot *s = NULL;
    sp_error *err = NULL;
    int r = sp_snapshot_get(&s, c->s, ref, &err);
    if (r < 0)
        return cli_fail(c->json, r, err);
    int rc = CLI_EXIT_OK;
    if (c->json) {
        rc = cli_print_result(sp_json_snapshot(s));
    } else {
        sp_snapshot *v[1] = {s};
        print_table(&(sp_snapshots){v, 1});
    }
    sp_snapshot_free(s);
    return rc;
}

int cmd_snapshots(int argc, char **argv)
{
    struct cli_snap c = {0};
    int rc = 0;
    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_snapshots, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        int took = opt == CLI_GETOPT_BAD ? -1 : cli_snap_option(&c, "snapshots", opt, optarg);
        if (took < 0) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        c.json = true;
    }
    const char *name = NULL;
    if ((rc = cli_snap_target(&c, "snapshots", argc, argv, &name)) != 0)
        goto done;
    const char *ref = optind < argc ? argv[optind++] : NULL;
    if (optind < argc) {
        rc = cli_usage("snapshots", "unexpected argument '%s'", argv[optind]);
        goto done;
    }
    sp_snapshots *l = NULL, none = {NULL, 0};
    sp_error *err = NULL;
    /* A store that was never made holds no snapshots (and not SNAP). */
    c.none_ok = !ref;
    c.remote_tool = ref ? NULL : "list_snapshots"; /* SNAP: the same command in the peer */
    if ((rc = cli_snap_open(&c, name, false)) != 0 || c.handled)
        goto done;
    if (ref) {
        rc = print_one(&c, ref);
        goto done;
    }
    int r = c.none ? 0 : sp_snapshot_list(&l, c.s, &err);
    if (r < 0) {
        rc = cli_fail(c.json, r, err);
        goto done;
    }
    if (c.json)
        rc = cli_print_result(sp_json_snapshots(l ? l : &none));
    else
        print_table(l ? l : &none);
    sp_snapshots_free(l);
done:
    cli_snap_close(&c);
    return rc;
}
