/* sandpod diff: what changed between two snapshots, or between a snapshot
 * and the live workspace. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "snapshot_json.h"

enum { OPT_PATCH = 'p', OPT_CONTEXT = 'U', OPT_MAX_DATA = 0x2100 };

/* In cmd_snapshot.c: a store option cli_snap_open() then uses. */
int cli_snap_max_data(const char *cmd, const char *arg);

const struct cli_spec cli_spec_diff = {
    .name = "diff",
    .fn = cmd_diff,
    .summary = "Show what changed between snapshots or since one",
    .usage = CLI_USAGE("[--patch] [--json] NAME [SNAP [SNAP2]]",
                       "[--patch] [--json] --root DIR --store DIR SNAP [SNAP2]"),
    .description = "List what changed from snapshot SNAP to SNAP2, or to the live workspace\n"
                   "when SNAP2 is left out; with NAME alone, from the sandbox's baseline (the\n"
                   "snapshot tagged 'base' that create takes of the prepared workspace) to\n"
                   "the live workspace: one line per path, 'A' added, 'M' modified (content\n"
                   "or permission bits), 'D' deleted, 'T' type changed (file, folder, symlink).\n"
                   "Folders are listed too, and everything inside an added or deleted folder.\n"
                   "For a sandbox's live workspace, diff first takes a snapshot tagged 'review'\n"
                   "(replacing the last one) and names it on stderr: 'sandpod apply NAME\n"
                   "--snapshot ID' writes exactly what was shown, whatever the workload does\n"
                   "meanwhile; then it lists what apply would hold back ('?' to review, '!'\n"
                   "never applied) and why. Names are shown with control and bidirectional\n"
                   "characters escaped; --patch to a terminal escapes them in content too.",
    .groups = CLI_GROUPS(
        CLI_OWN(CLI_FLAG("patch", 'p', OPT_PATCH,
                         "print a unified diff instead (binary files, and files over 8 MiB, are "
                         "named: 'Binary/Large files ... differ')"),
                CLI_VALUE("unified", 'U', "N", OPT_CONTEXT, CLI_COMP_NONE,
                          "lines of context in the patch (default 3)"),
                CLI_VALUE("max-data", 0, "SIZE", OPT_MAX_DATA, CLI_COMP_NONE,
                          "against the workspace: stop with an error before reading more than "
                          "SIZE of file data (K, M, G, T, or 'none'; default 16G; holes do not "
                          "count)"),
                CLI_FLAG("json", 0, 'j',
                         "print {ok, from, to, changes: [{path, change, old_type, new_type, "
                         "old_mode, new_mode, content_changed}], count, added, modified, deleted, "
                         "type_changed} (and patch with --patch; snapshot and held: [{path, "
                         "hold, reason, count, target}] for a sandbox's live workspace)")),
        &cli_group_snap, &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME", CLI_COMP_SANDBOX, NULL}, {"SNAP", CLI_COMP_NONE, NULL},
                             {"SNAP2", CLI_COMP_NONE, NULL}),
    .exit_status = "0 ok (whether or not anything changed), 1 error, 2 bad usage.",
};

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

/* What `diff` shows, once worked out on either engine. */
struct shown {
    sp_snapdiff *d;
    char *review;          /* the snapshot a review took, or NULL */
    sp_apply_result *held; /* what apply would hold back of it, or NULL */
};

static int print_diff(const struct cli_snap *c, const struct shown *s,
                      const sp_snapshot_diff_opts *o)
{
    int rc = 0;
    const sp_snapdiff *d = s->d;
    if (c->json) {
        cJSON *j = sp_json_snapdiff(d);
        if (s->review)
            cJSON_AddStringToObject(j, "snapshot", s->review);
        if (s->held)
            cli_apply_held_json(j, s->held);
        rc = cli_print_result(j);
    } else if (o->patch) {
        cli_put_text(stdout, d->patch ? d->patch : "", d->patch ? strlen(d->patch) : 0, false);
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
        if (s->held)
            cli_apply_print_held(s->held);
    }
    if (s->review && !c->json && d->n)
        fprintf(stderr,
                "sandpod: diff: snapshot %s (tagged review) holds what is shown; 'sandpod apply "
                "%s --snapshot %s' writes exactly it\n",
                s->review, sp_sandbox_name(c->sb), s->review);
    return rc;
}

static void shown_dispose(struct shown *s)
{
    sp_snapdiff_free(s->d);
    free(s->review);
    sp_apply_result_free(s->held);
}

/* What apply would hold back of the reviewed snapshot (NULL when the
 * sandbox has no host folder to apply to). */
static sp_apply_result *review_holds(sp_sandbox *sb, const char *from, const char *id)
{
    sp_sandbox_apply_opts o = SP_SANDBOX_APPLY_OPTS_INIT;
    o.dry_run = true;
    o.from = from;
    o.snapshot = id;
    sp_apply_result *res = NULL;
    sp_error *err = NULL;
    if (sp_sandbox_apply(&res, sb, &o, &err) < 0)
        res = NULL;
    sp_error_free(err);
    return res;
}

/* The review of a sandbox's live workspace on any engine, through the
 * library's engine-neutral snapshot calls: the snapshot tagged 'review'
 * (the last one replaced), its changes since `from` (default: the
 * baseline, origin-base first), and what apply would hold back. */
struct review_args {
    const char *from;
    const sp_snapshot_diff_opts *o;
};

static int review(struct cli_snap *c, void *ud)
{
    const struct review_args *a = ud;
    sp_sandbox *sb = c->sb;
    struct shown s = {0};
    sp_error *err = NULL;
    char *from = a->from ? strdup(a->from) : NULL;
    int r = 0;
    static const char *const tags[] = {SP_SANDBOX_ORIGIN_TAG, SP_SANDBOX_BASELINE_TAG};
    for (size_t i = 0; i < 2 && !from && r == 0; i++) {
        sp_snapshot *rec = NULL;
        sp_error *e = NULL;
        r = sp_sandbox_snapshot_get(&rec, sb, tags[i], &e);
        if (r == 0)
            from = strdup(rec->id);
        sp_snapshot_free(rec);
        if (r == SP_ENOTFOUND) {
            sp_error_free(e);
            /* None at all: the library's words for it. */
            r = i == 0 ? 0 : sp_sandbox_baseline(&rec, sb, NULL, &err);
        } else if (r < 0) {
            err = e;
        }
    }
    sp_snapshots *l = NULL;
    if (r == 0)
        r = sp_sandbox_snapshot_list(&l, sb, &err);
    for (size_t i = 0; r == 0 && i < l->n; i++)
        if (l->v[i]->tag && strcmp(l->v[i]->tag, "review") == 0)
            r = sp_sandbox_snapshot_delete(sb, l->v[i]->id, &err);
    sp_snapshots_free(l);
    sp_snapshot *snap = NULL;
    if (r == 0 && (r = sp_sandbox_snapshot_create(&snap, sb, "review", &err)) == 0)
        s.review = strdup(snap->id);
    sp_snapshot_free(snap);
    if (r == 0)
        r = sp_sandbox_snapshot_diff(&s.d, sb, from, s.review, a->o, &err);
    cli_snap_progress_end(c);
    int rc;
    if (r < 0) {
        rc = cli_fail(c->json, r, err);
    } else {
        s.held = review_holds(sb, from, s.review);
        rc = print_diff(c, &s, a->o);
    }
    shown_dispose(&s);
    free(from);
    return rc;
}

int cmd_diff(int argc, char **argv)
{
    struct cli_snap c = {0};
    sp_snapshot_diff_opts o = SP_SNAPSHOT_DIFF_OPTS_INIT;
    int rc = 0;
    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_diff, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        int took = opt == CLI_GETOPT_BAD ? -1 : cli_snap_option(&c, "diff", opt, optarg);
        if (took < 0) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        long long v = 0;
        switch (opt) {
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
    if (optind >= argc && !name) {
        rc = cli_usage("diff", "missing SNAP to compare");
        goto done;
    }
    const char *from = optind < argc ? argv[optind++] : NULL;
    const char *to = optind < argc ? argv[optind++] : NULL;
    if (optind < argc) {
        rc = cli_usage("diff", "unexpected argument '%s'", argv[optind]);
        goto done;
    }
    /* The live workspace of a sandbox: a review, on either engine. */
    struct review_args ra = {from, &o};
    if (name && !to) {
        c.remote_fn = review;
        c.remote_ud = &ra;
    }
    /* Reading the live workspace writes what it finds to the store, which
     * must exist already (SNAP is in it). With NAME alone, a sandbox
     * with no store has no baseline, which sp_sandbox_baseline() says. */
    c.none_ok = !from;
    if ((rc = cli_snap_open(&c, name, false)) != 0 || c.handled)
        goto done;
    if (name && !to) {
        /* Local: the same review, after the store's own pausing handle
         * is let go (the calls open theirs). */
        sp_sandbox_snapshot_close(c.snap);
        c.snap = NULL;
        c.s = NULL;
        rc = review(&c, &ra);
        goto done;
    }
    struct shown s = {0};
    sp_error *err = NULL;
    int r = sp_snapshot_diff(&s.d, c.s, from, to, &o, &err);
    cli_snap_progress_end(&c);
    if (r < 0)
        rc = cli_fail(c.json, r, err);
    else
        rc = print_diff(&c, &s, &o);
    shown_dispose(&s);
done:
    cli_snap_close(&c);
    return rc;
}
