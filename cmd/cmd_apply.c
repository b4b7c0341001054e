/* sandpod apply: bring a sandbox's workspace changes back into a host
 * folder, all or nothing, refusing over host changes. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

enum {
    OPT_DRY_RUN = 'n',
    OPT_FORCE = 'f',
    OPT_PATCH = 'p',
    OPT_FROM = 0x2200,
    OPT_TO,
    OPT_SUBDIR,
    OPT_SNAPSHOT,
    OPT_ALLOW_PATH,
    OPT_LINKS_OUT,
    OPT_ALL,
    OPT_MAX_FILES,
    OPT_MAX_BYTES,
    OPT_BRANCH,
};
enum { OPT_MESSAGE = 'm' };

const struct cli_spec cli_spec_apply = {
    .name = "apply",
    .fn = cmd_apply,
    .summary = "Bring a sandbox's changes back into a host folder",
    .usage =
        CLI_USAGE("[--snapshot SNAP] [--from SNAP] [--to DIR] [--allow-path PATTERN]... "
                  "[--allow-links-out] [--all] [--dry-run] [--force] [--patch] [--json] NAME",
                  "--branch BRANCH [--message TEXT] [--snapshot SNAP] [--from SNAP] [--to DIR] "
                  "[--json] NAME"),
    .description =
        "Write what changed in the workspace since the baseline (the snapshot 'base'\n"
        "that create takes), or since --from SNAP, into a host folder: by default the\n"
        "first mount's source, taking the part of the workspace that mount landed in,\n"
        "through that mount's own filters (include, exclude, gitignore). With\n"
        "--snapshot SNAP, the content of that snapshot (the one 'sandpod diff NAME'\n"
        "names) rather than of the workspace now: what was reviewed is what is written.\n"
        "Added, modified and deleted files and folders, executable bits, and symlinks\n"
        "(as they are, never followed); a rename is a delete and an add. Files take the\n"
        "mode the sandbox gave them less set-id and sticky bits and less your umask;\n"
        "as root, the owner of the folder they land in. Held back, listed with why:\n"
        "version-control data (.git, .hg, .svn, .jj, .bzr at any depth, or a folder made\n"
        "to look like a git repository), never; files the host's tools act on\n"
        "(.gitattributes, .gitmodules, .lfsconfig, .envrc, .vscode/, .idea/,\n"
        ".devcontainer/), unless --allow-path names them; symlinks out of the folder,\n"
        "unless --allow-links-out; fifos, sockets and devices, never. All or nothing:\n"
        "on a failure what was written is undone. A host path that no longer matches\n"
        "the snapshot the changes are counted from (edited, deleted, or added on both\n"
        "sides with other content) is a conflict: all are listed, nothing is written\n"
        "and the exit status is 1, unless --force. A path the host already holds as\n"
        "the sandbox has it is left alone. Lines: 'A', 'M', 'D' and the path (with\n"
        "'-> TARGET' for a symlink and '(mode OLD -> NEW)' when the executable bit\n"
        "changes); '=' already there; 'C' a conflict and why; '?' a path to review; '!'\n"
        "held back and why. Names are shown with control and bidirectional characters\n"
        "escaped. With --branch, the same changes become one commit on a new branch of\n"
        "the git repository the host folder is in, on top of its HEAD, and nothing\n"
        "else of the repository is touched (work tree, index, HEAD, config, hooks): review\n"
        "and merge it with your own git. The way to bring work back into a git project.",
    .groups = CLI_GROUPS(
        CLI_OWN(
            CLI_VALUE("snapshot", 0, "SNAP", OPT_SNAPSHOT, CLI_COMP_NONE,
                      "apply the content of snapshot SNAP (the one diff reviewed) instead of "
                      "the workspace now"),
            CLI_VALUE("from", 0, "SNAP", OPT_FROM, CLI_COMP_NONE,
                      "count changes from snapshot SNAP (the host holds it) instead of base"),
            CLI_VALUE("to", 0, "DIR", OPT_TO, CLI_COMP_DIR,
                      "the host folder to write (default: the first mount's source)"),
            CLI_VALUE("subdir", 0, "PATH", OPT_SUBDIR, CLI_COMP_NONE,
                      "the workspace folder whose changes go there (default: where the "
                      "first mount landed)"),
            CLI_VALUE("allow-path", 0, "PATTERN", OPT_ALLOW_PATH, CLI_COMP_NONE,
                      "also write the review paths PATTERN matches (a glob; one without '/' "
                      "matches a name at any depth; repeatable)"),
            CLI_FLAG("allow-links-out", 0, OPT_LINKS_OUT,
                     "also write symlinks whose target leaves the host folder"),
            CLI_FLAG("all", 0, OPT_ALL,
                     "ignore the mount's include/exclude/gitignore filters (held-back paths "
                     "stay held back)"),
            CLI_VALUE("max-files", 0, "N", OPT_MAX_FILES, CLI_COMP_NONE,
                      "refuse more than N changed paths (default 200000)"),
            CLI_VALUE("max-bytes", 0, "SIZE", OPT_MAX_BYTES, CLI_COMP_NONE,
                      "refuse more than SIZE of changed files (K, M, G, T; default 8G)"),
            CLI_VALUE("branch", 0, "BRANCH", OPT_BRANCH, CLI_COMP_NONE,
                      "write the changes as one commit on the new git branch BRANCH of the "
                      "host folder's repository instead"),
            CLI_VALUE("message", 'm', "TEXT", OPT_MESSAGE, CLI_COMP_NONE,
                      "the commit message with --branch (default 'sandpod apply')"),
            CLI_FLAG("dry-run", 'n', OPT_DRY_RUN, "list what would be done; write nothing"),
            CLI_FLAG("force", 'f', OPT_FORCE,
                     "write over conflicts: the sandbox's side wins (held-back paths stay "
                     "held back)"),
            CLI_FLAG("patch", 'p', OPT_PATCH,
                     "print a unified diff of the changes for 'git apply' instead; write "
                     "nothing"),
            CLI_FLAG(
                "json", 0, 'j',
                "print {ok, to, from, snapshot, applied, commit, changes: [{path, action, type, "
                "mode, old_mode, target, already}], conflicts: [{path, reason}], held: "
                "[{path, hold, reason, count, target}], skipped, filtered} (and "
                "patch)")),
        &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME", CLI_COMP_SANDBOX, NULL}),
    .exit_status = "0 ok (applied, or nothing to do), 1 error or conflicts (nothing written), 2 "
                   "bad usage.",
};

void cli_apply_held_json(cJSON *o, const sp_apply_result *res)
{
    cJSON *a = cJSON_AddArrayToObject(o, "held");
    for (size_t i = 0; i < res->n_held; i++) {
        const sp_apply_held *h = &res->held[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "path", h->path);
        cJSON_AddStringToObject(e, "hold", sp_apply_hold_name(h->why));
        cJSON_AddStringToObject(e, "reason", sp_apply_hold_why(h->why));
        cJSON_AddNumberToObject(e, "count", (double)h->count);
        if (h->detail)
            cJSON_AddStringToObject(e, "target", h->detail);
        cJSON_AddItemToArray(a, e);
    }
}

static cJSON *result_json(const sp_apply_result *res)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *ch = cJSON_AddArrayToObject(o, "changes");
    cJSON *co = cJSON_AddArrayToObject(o, "conflicts");
    cJSON_AddBoolToObject(o, "ok", !res->n_conflicts || res->applied);
    cJSON_AddStringToObject(o, "to", res->to);
    cJSON_AddStringToObject(o, "from", res->from);
    cJSON_AddStringToObject(o, "snapshot", res->snapshot ? res->snapshot : "");
    if (res->commit)
        cJSON_AddStringToObject(o, "commit", res->commit);
    cJSON_AddBoolToObject(o, "applied", res->applied);
    cJSON_AddNumberToObject(o, "skipped", (double)res->skipped);
    cJSON_AddNumberToObject(o, "filtered", (double)res->filtered);
    for (size_t i = 0; i < res->n_changes; i++) {
        const sp_apply_change *c = &res->changes[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "path", c->path);
        cJSON_AddStringToObject(e, "action", sp_apply_action_name(c->action));
        cJSON_AddStringToObject(e, "type", sp_fs_type_name(c->type));
        cJSON_AddNumberToObject(e, "mode", c->mode);
        cJSON_AddNumberToObject(e, "old_mode", c->old_mode);
        if (c->target)
            cJSON_AddStringToObject(e, "target", c->target);
        cJSON_AddBoolToObject(e, "already", c->already);
        cJSON_AddItemToArray(ch, e);
    }
    for (size_t i = 0; i < res->n_conflicts; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "path", res->conflicts[i].path);
        cJSON_AddStringToObject(e, "reason", res->conflicts[i].reason);
        cJSON_AddItemToArray(co, e);
    }
    cli_apply_held_json(o, res);
    if (res->patch)
        cJSON_AddStringToObject(o, "patch", res->patch);
    return o;
}

/* One held entry: '?' to review, '!' held back; the group's size. */
static void put_held(const sp_apply_held *h)
{
    printf("%c  ", h->why == SP_APPLY_HOLD_REVIEW ? '?' : '!');
    cli_put_name(stdout, h->path);
    if (h->detail) {
        fputs(" -> ", stdout);
        cli_put_name(stdout, h->detail);
    }
    printf("  (%s", sp_apply_hold_why(h->why));
    if (h->count > 1)
        printf("; %zu changes", h->count);
    fputs(")\n", stdout);
}

void cli_apply_print_held(const sp_apply_result *res)
{
    for (size_t i = 0; i < res->n_held; i++)
        if (res->held[i].why == SP_APPLY_HOLD_REVIEW)
            put_held(&res->held[i]);
    for (size_t i = 0; i < res->n_held; i++)
        if (res->held[i].why != SP_APPLY_HOLD_REVIEW)
            put_held(&res->held[i]);
}

static void print_text(const sp_apply_result *res, const sp_sandbox_apply_opts *o)
{
    bool dry_run = o->dry_run;
    for (size_t i = 0; i < res->n_changes; i++) {
        const sp_apply_change *c = &res->changes[i];
        printf("%c  ", c->already ? '=' : "AMD"[c->action]);
        cli_put_name(stdout, c->path);
        if (c->type == SP_FS_DIR)
            putchar('/');
        if (c->target) {
            fputs(" -> ", stdout);
            cli_put_name(stdout, c->target);
        }
        if (c->action == SP_APPLY_MODIFY && c->type == SP_FS_FILE &&
            (c->old_mode & 0111) != (c->mode & 0111))
            printf("  (mode %04o -> %04o)", c->old_mode, c->mode);
        putchar('\n');
    }
    for (size_t i = 0; i < res->n_conflicts; i++) {
        fputs("C  ", stdout);
        cli_put_name(stdout, res->conflicts[i].path);
        printf("  (%s)\n", res->conflicts[i].reason);
    }
    cli_apply_print_held(res);
    if (res->filtered)
        fprintf(stderr,
                "sandpod: apply: %zu change%s left out by the mount's filters (--all applies "
                "them)\n",
                res->filtered, res->filtered == 1 ? "" : "s");
    if (res->n_conflicts && !res->applied)
        fprintf(stderr,
                "sandpod: apply: %zu conflict%s with changes on the host; nothing written. "
                "Compare with 'sandpod apply --patch', or write the sandbox's side over them "
                "with --force (held-back paths stay held back)\n",
                res->n_conflicts, res->n_conflicts == 1 ? "" : "s");
    else if (dry_run)
        fprintf(stderr, "sandpod: apply: dry run, nothing written to %s\n", res->to);
    else if (res->commit)
        fprintf(stderr, "sandpod: apply: committed %.12s on the new branch %s (git show %s)\n",
                res->commit, o->branch, o->branch);
    else if (o->branch)
        fprintf(stderr, "sandpod: apply: nothing to commit; no branch made\n");
}

int cmd_apply(int argc, char **argv)
{
    struct cli_conn conn = {0};
    sp_sandbox_apply_opts o = SP_SANDBOX_APPLY_OPTS_INIT;
    /* At most one pattern per argument, and a NULL after them. */
    const char **allow = calloc((size_t)argc + 1, sizeof(*allow));
    size_t n_allow = 0;
    if (!allow)
        return cli_error("out of memory");
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
        case OPT_SNAPSHOT:
            o.snapshot = optarg;
            break;
        case OPT_ALLOW_PATH:
            allow[n_allow++] = optarg;
            break;
        case OPT_LINKS_OUT:
            o.allow_links_out = true;
            break;
        case OPT_ALL:
            o.all = true;
            break;
        case OPT_BRANCH:
            o.branch = optarg;
            break;
        case OPT_MESSAGE:
            o.message = optarg;
            break;
        case OPT_MAX_FILES: {
            long long v = 0;
            if (cli_parse_ll("apply", "--max-files", optarg, 1, LLONG_MAX, &v) < 0) {
                rc = CLI_EXIT_USAGE;
                goto done;
            }
            o.max_files = (uint64_t)v;
            break;
        }
        case OPT_MAX_BYTES: {
            size_t v = 0;
            if (cli_parse_size("apply", "--max-bytes", optarg, SIZE_MAX, &v) < 0) {
                rc = CLI_EXIT_USAGE;
                goto done;
            }
            o.max_bytes = v;
            break;
        }
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
    if (o.message && !o.branch) {
        rc = cli_usage("apply", "--message goes with --branch");
        goto done;
    }
    if (o.branch && (o.force || o.patch)) {
        rc = cli_usage("apply", "--branch makes a commit: %s does not go with it",
                       o.force ? "--force" : "--patch");
        goto done;
    }
    if ((rc = cli_sandbox_open(&sb, argv[optind], &conn, json)) != 0)
        goto done;
    sp_apply_result *res = NULL;
    sp_error *err = NULL;
    o.allow_paths = n_allow ? allow : NULL;
    int r = sp_sandbox_apply(&res, sb, &o, &err);
    if (r < 0) {
        rc = cli_fail(json, r, err);
        goto done;
    }
    if (json)
        rc = cli_print_result(result_json(res));
    else if (o.patch)
        cli_put_text(stdout, res->patch ? res->patch : "", res->patch ? strlen(res->patch) : 0,
                     false);
    else
        print_text(res, &o);
    if (rc == 0 && res->n_conflicts && !res->applied)
        rc = 1;
    sp_apply_result_free(res);
done:
    free(allow);
    sp_sandbox_free(sb);
    return rc;
}
