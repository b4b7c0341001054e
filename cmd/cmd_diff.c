/* sandpod diff: what changed between two snapshots, or between a snapshot
 * and the live workspace. */
#include <getopt.h>
#include <string.h>

#include "cli.h"
#include "snapshot_json.h"

enum { OPT_PATCH = 'p', OPT_CONTEXT = 'U', OPT_MAX_DATA = 0x2100 };

/* In cmd_snapshot.c: a store option cli_snap_open() then uses. */
int cli_snap_max_data(const char *cmd, const char *arg);

static const struct option options[] = {
    {"json", no_argument, NULL, 'j'},
    {"patch", no_argument, NULL, OPT_PATCH},
    {"unified", required_argument, NULL, OPT_CONTEXT},
    {"max-data", required_argument, NULL, OPT_MAX_DATA},
    CLI_SNAP_OPTIONS,
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void help(FILE *f)
{
    fprintf(f, "Usage: sandpod diff [--patch] [--json] NAME SNAP [SNAP2]\n"
               "       sandpod diff [--patch] [--json] --root DIR --store DIR SNAP [SNAP2]\n"
               "\n"
               "List what changed from snapshot SNAP to SNAP2, or to the live workspace\n"
               "when SNAP2 is left out: one line per path, 'A' added, 'M' modified (content\n"
               "or permission bits), 'D' deleted, 'T' type changed (file, folder, symlink).\n"
               "Folders are listed too, and everything inside an added or deleted folder.\n"
               "\n"
               "Options:\n"
               "  -p, --patch          print a unified diff instead (binary files, and files\n"
               "                       over 8 MiB, are named: 'Binary/Large files ... differ')\n"
               "  -U, --unified N      lines of context in the patch (default 3)\n"
               "  --max-data SIZE      against the workspace: stop with an error before reading\n"
               "                       more than SIZE of file data (K, M, G, T, or 'none';\n"
               "                       default 16G; holes do not count)\n"
               "  --json               print {ok, from, to, changes: [{path, change,\n"
               "                       old_type, new_type, old_mode, new_mode,\n"
               "                       content_changed}], count, added, modified, deleted,\n"
               "                       type_changed} (and patch with --patch)\n");
    cli_snap_options_help(f);
    fprintf(f, "  -h, --help           show this help\n"
               "\n"
               "Exit status: 0 ok (whether or not anything changed), 1 error, 2 bad usage.\n");
}

static char letter(sp_snapshot_change_kind k)
{
    switch (k) {
    case SP_CHANGE_ADDED:
        return 'A';
    case SP_CHANGE_MODIFIED:
        return 'M';
    case SP_CHANGE_DELETED:
        return 'D';
    default:
        return 'T';
    }
}

int cmd_diff(int argc, char **argv)
{
    struct cli_snap c = {0};
    sp_snapshot_diff_opts o = SP_SNAPSHOT_DIFF_OPTS_INIT;
    int rc = 0;
    optind = 0;
    int opt;
    while ((opt = cli_getopt("diff", argc, argv, "jpU:h", options, false)) != -1) {
        int took = opt == CLI_GETOPT_BAD ? -1 : cli_snap_option(&c, "diff", opt, optarg);
        if (took < 0) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        long long v = 0;
        switch (opt) {
        case 'h':
            help(stdout);
            goto done;
        case OPT_PATCH:
            o.patch = true;
            break;
        case OPT_CONTEXT:
            if (cli_parse_ll("diff", "--unified", optarg, 0, 10000, &v) < 0) {
                rc = CLI_EXIT_USAGE;
                goto done;
            }
            o.context_lines = v ? (unsigned)v : 0;
            break;
        case OPT_MAX_DATA:
            if (cli_snap_max_data("diff", optarg) < 0) {
                rc = CLI_EXIT_USAGE;
                goto done;
            }
            break;
        default:
            c.json = true;
        }
    }
    const char *name = NULL;
    if ((rc = cli_snap_target(&c, "diff", argc, argv, &name)) != 0)
        goto done;
    if (optind >= argc) {
        rc = cli_usage("diff", "missing SNAP to compare");
        goto done;
    }
    const char *from = argv[optind++];
    const char *to = optind < argc ? argv[optind++] : NULL;
    if (optind < argc) {
        rc = cli_usage("diff", "unexpected argument '%s'", argv[optind]);
        goto done;
    }
    /* Reading the live workspace writes what it finds to the store, which
     * must exist already (SNAP is in it). */
    if ((rc = cli_snap_open(&c, name, false)) != 0)
        goto done;
    sp_snapdiff *d = NULL;
    sp_error *err = NULL;
    int r = sp_snapshot_diff(&d, c.s, from, to, &o, &err);
    cli_snap_progress_end(&c);
    if (r < 0) {
        rc = cli_fail(c.json, r, err);
        goto done;
    }
    if (c.json) {
        rc = cli_print_result(sp_json_snapdiff(d));
    } else if (o.patch) {
        fputs(d->patch ? d->patch : "", stdout);
    } else {
        for (size_t i = 0; i < d->n; i++) {
            const sp_snapshot_change *ch = &d->v[i];
            printf("%c  ", letter(ch->kind));
            cli_put_name(stdout, ch->path);
            sp_fs_type t = ch->kind == SP_CHANGE_DELETED ? ch->old_type : ch->new_type;
            if (t == SP_FS_DIR)
                putchar('/');
            putchar('\n');
        }
    }
    sp_snapdiff_free(d);
done:
    cli_snap_close(&c);
    return rc;
}
