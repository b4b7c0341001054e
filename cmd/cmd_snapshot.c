/* sandpod snapshot: take a snapshot of a sandbox's workspace (or of any
 * folder, with --root and --store), and the store chores `snapshot rm`,
 * `snapshot gc` and `snapshot import`.
 *
 * This file also holds what the other snapshot commands (snapshots,
 * restore, diff, export) share: the NAME | --root/--store target, opening
 * the store with the container paused around reads and writes, and the
 * progress line. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "cli.h"
#include "fs_json.h"
#include "json.h"
#include "tools.h"
#include "snapshot_json.h"

/* ------------------------------------------------------------- shared -- */

/* What the commands' own flags add to the store options cli_snap_open()
 * uses (one command runs per process): --keep-setid, --max-data. The
 * setters are declared in the commands that call them, as struct
 * cli_snap has no room for these. */
static bool snap_keep_setid;
static uint64_t snap_max_data; /* 0: the library's default */

void cli_snap_keep_setid(bool keep);
void cli_snap_keep_setid(bool keep)
{
    snap_keep_setid = keep;
}

/* --max-data SIZE: a size (K, M, G, T) or "none". Returns 0, or -1 after a
 * usage error. */
int cli_snap_max_data(const char *cmd, const char *arg);
int cli_snap_max_data(const char *cmd, const char *arg)
{
    if (strcmp(arg, "none") == 0) {
        snap_max_data = UINT64_MAX;
        return 0;
    }
    return cli_parse_bytes(cmd, "--max-data", arg, &snap_max_data);
}

int cli_snap_option(struct cli_snap *c, const char *cmd, int opt, const char *arg)
{
    switch (opt) {
    case CLI_OPT_SNAP_ROOT:
        c->root = arg;
        return 1;
    case CLI_OPT_SNAP_STORE:
        c->store = arg;
        return 1;
    default:
        return cli_conn_option(&c->conn, cmd, opt, arg);
    }
}

int cli_snap_target(struct cli_snap *c, const char *cmd, int argc, char **argv, const char **name)
{
    *name = NULL;
    if (c->root || c->store) {
        if (!c->root || !c->store)
            return cli_usage(cmd, "--root and --store go together");
        return 0;
    }
    if (optind >= argc)
        return cli_usage(cmd, "missing sandbox NAME (or --root DIR --store DIR)");
    c->cmd = cmd;
    c->argc = argc;
    c->argv = argv;
    c->name_at = optind;
    *name = argv[optind++];
    return 0;
}

/* Whether the operation at hand reached a restore phase. */
static bool snap_restoring;

/* The progress line of a snapshot, restore or diff. No totals come with
 * a snapshot's progress: counts and rate, no percent or ETA. */
static void snap_report(struct cli_snap *c, bool restore, uint64_t entries, uint64_t files,
                        uint64_t bytes, uint64_t changed)
{
    if (!c->progress) {
        cli_progress_begin("scanned", c->json);
        c->progress = true;
        snap_restoring = false;
    }
    /* A restore scans first. */
    if (restore && !snap_restoring) {
        cli_progress_rename("restored");
        snap_restoring = true;
    }
    char extra[96];
    if (restore) {
        snprintf(extra, sizeof(extra), "%" PRIu64 " entries looked at, %" PRIu64 " changed",
                 entries, changed);
        cli_progress_update("restoring", bytes, 0, extra);
    } else {
        snprintf(extra, sizeof(extra), "%" PRIu64 " entries, %" PRIu64 " files read", entries,
                 files);
        cli_progress_update("scanning", bytes, 0, extra);
    }
}

static void snap_progress(void *ud, const sp_snapshot_progress *p)
{
    snap_report(ud, strcmp(p->phase, "restore") == 0, p->entries, p->files_hashed, p->bytes_hashed,
                p->paths_changed);
}

void cli_snap_progress_end(struct cli_snap *c)
{
    /* Said once per command, on stderr: stdout may be JSON. */
    static bool said;
    if (sp_sandbox_snapshot_ran_unpaused(c->snap) && !said) {
        said = true;
        fputs("sandpod: note: the container kept running meanwhile (rootless Podman on cgroup "
              "v1 cannot pause it); a file it wrote at that moment may be caught part-way\n",
              stderr);
    }
    if (!c->progress)
        return;
    /* Progress comes every thousand entries: the summary takes the final
     * counts. Whether the operation worked is known at exit. */
    sp_snapstore_stats st;
    sp_snapstore_last_stats(c->s, &st);
    /* Only a restore changes paths (one under a thousand sent no restore
     * progress of its own). */
    snap_report(c, snap_restoring || st.paths_changed > 0, st.entries, st.files_hashed,
                st.bytes_hashed, st.paths_changed);
    cli_progress_end_deferred();
    c->progress = false;
}

/* The NAME form on a sandbox of another engine, as the same command line
 * run by the sandpod peer beside the workload on its workspace and store
 * (its output and status are this command's). --state-root and --url stay
 * here. */
static int snap_in_peer(struct cli_snap *c)
{
    const char **args = calloc((size_t)c->argc + 8, sizeof(char *));
    if (!args)
        return cli_error("out of memory");
    size_t n = 0;
    args[n++] = c->cmd;
    if (strcmp(c->argv[0], c->cmd) != 0)
        args[n++] = c->argv[0]; /* snapshot rm, snapshot gc */
    args[n++] = "--root";
    args[n++] = SP_PEER_WORKSPACE;
    args[n++] = "--store";
    args[n++] = SP_PEER_STORE;
    for (int i = 1; i < c->argc; i++) {
        const char *a = c->argv[i];
        if (i == c->name_at)
            continue;
        if (strcmp(a, "--state-root") == 0 || strcmp(a, "--url") == 0) {
            i++;
            continue;
        }
        if (strncmp(a, "--state-root=", 13) == 0 || strncmp(a, "--url=", 6) == 0)
            continue;
        if (strcmp(a, "--") == 0)
            break;
        args[n++] = a;
    }
    /* diff NAME alone compares with the baseline, which the --root/--store
     * form must be told. */
    bool snap_given = false;
    for (int i = c->name_at + 1; i < c->argc; i++)
        snap_given |= c->argv[i][0] != '-';
    if (strcmp(c->cmd, "diff") == 0 && !snap_given)
        args[n++] = "base";
    args[n] = NULL;
    fflush(stdout);
    int code = -1;
    sp_error *err = NULL;
    int r = sp_sandbox_peer_command(c->sb, args, STDOUT_FILENO, STDERR_FILENO, &code, &err);
    free(args);
    if (r < 0)
        return cli_fail(c->json, r, err);
    return code < 0 || code > 125 ? CLI_EXIT_ERROR : code;
}

/* The NAME form on a sandbox whose store is not on this host (one of
 * another engine): c->remote_tool through its tools; the text for people,
 * the tool's value under --json. */
static int snap_remote(struct cli_snap *c)
{
    c->handled = true;
    sp_error *err = NULL;
    if (c->remote_fn)
        return c->remote_fn(c, c->remote_ud);
    if (!c->remote_tool && c->argv)
        return snap_in_peer(c);
    if (!c->remote_tool) {
        sp_err_set(&err, SP_EINVAL, 0,
                   "sandbox %s runs on engine %s: this works on local sandboxes only, for now "
                   "(snapshot, snapshots and restore work there)",
                   sp_sandbox_name(c->sb), sp_sandbox_engine(c->sb));
        return cli_fail(c->json, SP_EINVAL, err);
    }
    sp_tools_opts to = SP_TOOLS_OPTS_INIT;
    sp_tools *t = NULL;
    int r = sp_tools_open_sandbox(&t, c->sb, &to, &err);
    if (r < 0)
        return cli_fail(c->json, r, err);
    const char *args = c->remote_args ? c->remote_args : "{}";
    char *res = NULL;
    r = sp_tools_call(&res, t, c->remote_tool, args, strlen(args));
    sp_tools_free(t);
    cJSON *o = sp_json_parse(res, strlen(res));
    free(res);
    const cJSON *e = sp_json_get(o, "error");
    if (r < 0) {
        sp_err_set(&err, r, 0, "%s", sp_json_str_or(e, "message", "the tool failed"));
        cJSON_Delete(o);
        return cli_fail(c->json, r, err);
    }
    int rc = CLI_EXIT_OK;
    if (c->json)
        rc = cli_print_result(cJSON_DetachItemFromObjectCaseSensitive(o, "value"));
    else
        fputs(sp_json_str_or(o, "message", ""), stdout);
    cJSON_Delete(o);
    return rc;
}

int cli_snap_open(struct cli_snap *c, const char *name, bool create)
{
    sp_snapstore_opts o = SP_SNAPSTORE_OPTS_INIT;
    o.no_create = !create;
    o.keep_setid = snap_keep_setid;
    o.max_data_bytes = snap_max_data;
    o.progress = snap_progress;
    o.progress_userdata = c;
    sp_error *err = NULL;
    int r;
    if (name) {
        int rc = cli_sandbox_open(&c->sb, name, &c->conn, c->json);
        if (rc != 0)
            return rc;
        sp_sandbox_snapshot_opts so = SP_SANDBOX_SNAPSHOT_OPTS_INIT;
        so.store = &o;
        r = sp_sandbox_snapshot_open(&c->snap, c->sb, &so, &err);
        if (r < 0 && err && err->reason == SP_R_ELSEWHERE) {
            /* The store is not on this host: the sandbox's peer has it. */
            sp_error_free(err);
            return snap_remote(c);
        }
        c->s = sp_sandbox_snapshot_store(c->snap);
    } else {
        r = sp_snapstore_open(&c->s, c->root, c->store, &o, &err);
    }
    if (r < 0) {
        if (r == SP_ENOTFOUND && !create && err && err->reason == SP_R_NO_STORE) {
            if (c->none_ok) {
                sp_error_free(err);
                c->none = true;
                return 0;
            }
            /* Nothing was ever snapshotted: say so plainly. */
            char msg[512];
            snprintf(msg, sizeof(msg), "no snapshots yet (no store at %s)",
                     name ? "the sandbox's state folder" : c->store);
            sp_error e = {.code = SP_ENOTFOUND, .message = msg, .reason = SP_R_NO_STORE};
            sp_error_free(err);
            return c->json ? cli_json_error(r, &e) : cli_sp_error(r, &e);
        }
        return cli_fail(c->json, r, err);
    }
    return 0;
}

void cli_snap_close(struct cli_snap *c)
{
    cli_snap_progress_end(c);
    if (c->snap)
        sp_sandbox_snapshot_close(c->snap); /* frees c->s */
    else
        sp_snapstore_free(c->s);
    c->snap = NULL;
    c->s = NULL;
    sp_sandbox_free(c->sb);
    c->sb = NULL;
    free(c->remote_args);
    c->remote_args = NULL;
    cli_conn_dispose(&c->conn);
}

/* A short commit id for people. */
static void print_record(const sp_snapshot *s)
{
    char bytes[32];
    cli_format_bytes(bytes, sizeof(bytes), s->bytes);
    printf("snapshot %s", s->id);
    if (s->tag) {
        fputs(" (", stdout);
        cli_put_name(stdout, s->tag);
        fputc(')', stdout);
    }
    printf("\n  commit %.12s, %" PRIu64 " files, %" PRIu64 " folders, %" PRIu64 " symlinks, %s\n",
           s->commit, s->files, s->dirs, s->symlinks, bytes);
}

/* ---------------------------------------------------------- snapshot -- */

enum {
    OPT_TAG = 't',
    OPT_JSON = 'j',
    OPT_STATS = 0x2100,
    OPT_KEEP_SETID,
    OPT_MAX_DATA,
};

const struct cli_spec cli_spec_snapshot = {
    .name = "snapshot",
    .fn = cmd_snapshot,
    .summary = "Take an exact snapshot of a workspace (rm, gc, import too)",
    .usage =
        CLI_USAGE("[--tag T] [--json] [--max-data SIZE] NAME", "[OPTIONS] --root DIR --store DIR",
                  "rm NAME SNAP", "gc NAME", "import NAME FILE [--tag T] [--keep-setid]"),
    .description = "Take an exact snapshot of a sandbox's workspace: every file (ignored by git\n"
                   "or not), permission bits, symlinks as they are, empty folders, .git folders.\n"
                   "Only what changed since the last snapshot is read, and of a file over 8 MiB\n"
                   "with holes only its data. A running container is paused while the workspace\n"
                   "is read.\n"
                   "\n"
                   "  rm NAME SNAP       delete a snapshot\n"
                   "  gc NAME            free the space of deleted snapshots\n"
                   "  import NAME FILE   a tar archive as a new snapshot\n"
                   "\n"
                   "The rm, gc and import forms take --root DIR --store DIR in place of\n"
                   "NAME too. SNAP is a snapshot id, a tag, or a prefix of an id or commit.",
    .groups = CLI_GROUPS(
        CLI_OWN(CLI_VALUE("tag", 't', "T", OPT_TAG, CLI_COMP_NONE, "a label for the snapshot"),
                CLI_FLAG("json", 0, OPT_JSON,
                         "print the record {ok, id, tag, commit, created_at, created_at_ns, root, "
                         "store, files, dirs, symlinks, bytes, stats}"),
                CLI_FLAG("stats", 0, OPT_STATS, "print what the snapshot cost on stderr"),
                CLI_VALUE("max-data", 0, "SIZE", OPT_MAX_DATA, CLI_COMP_NONE,
                          "(also import) stop with an error, before reading it, at the file that "
                          "takes the file data read past SIZE (K, M, G, T, or 'none'; default "
                          "16G; holes do not count)"),
                CLI_FLAG("keep-setid", 0, OPT_KEEP_SETID,
                         "import: keep the set-user-ID and set-group-ID bits of files (dropped by "
                         "default; a folder keeps its own)")),
        &cli_group_snap, &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME", CLI_COMP_SANDBOX, NULL}, {"SNAP", CLI_COMP_FILE, NULL}),
    .exit_status = "0 ok, 1 error, 2 bad usage.",
};

static void print_stats(const sp_snapstore_stats *st)
{
    char bytes[32];
    cli_format_bytes(bytes, sizeof(bytes), st->bytes_hashed);
    fprintf(stderr,
            "%s: %" PRIu64 " entries looked at, %" PRIu64 " files read (%s), %" PRIu64
            " objects written, %" PRIu64 " paths changed, %" PRId64 " ms\n",
            st->full_walk ? "full walk" : "tracked", st->entries, st->files_hashed, bytes,
            st->objects_written, st->paths_changed, st->elapsed_ms);
}

static int finish_record(struct cli_snap *c, sp_snapshot *snap, bool stats)
{
    sp_snapstore_stats st;
    sp_snapstore_last_stats(c->s, &st);
    cli_snap_progress_end(c);
    if (stats)
        print_stats(&st);
    int rc = CLI_EXIT_OK;
    if (c->json) {
        cJSON *o = sp_json_snapshot(snap);
        if (o && !cJSON_AddItemToObject(o, "stats", sp_json_snapstore_stats(&st))) {
            cJSON_Delete(o);
            o = NULL;
        }
        rc = cli_print_result(o);
    } else {
        print_record(snap);
    }
    sp_snapshot_free(snap);
    return rc;
}

enum sub { SUB_NONE, SUB_RM, SUB_GC, SUB_IMPORT };

/* snapshot import on a sandbox of another engine: the archive streams to
 * the peer, which adds it to its store. */
struct remote_import {
    const char *file, *tag;
};

static int import_remote(struct cli_snap *c, void *ud)
{
    const struct remote_import *ri = ud;
    bool in = strcmp(ri->file, "-") == 0;
    int fd = in ? STDIN_FILENO : open(ri->file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cli_error("%s: %s", ri->file, strerror(errno));
    char *id = NULL;
    sp_error *err = NULL;
    int r = sp_sandbox_snapshot_import_fd(&id, c->sb, fd, ri->tag, &err);
    if (!in)
        close(fd);
    if (r < 0)
        return cli_fail(c->json, r, err);
    int rc = CLI_EXIT_OK;
    if (c->json) {
        cJSON *o = cJSON_CreateObject();
        if (o && !sp_json_add_string(o, "id", id)) {
            cJSON_Delete(o);
            o = NULL;
        }
        rc = cli_print_result(o);
    } else {
        printf("imported snapshot %s\n", id);
    }
    free(id);
    return rc;
}

int cmd_snapshot(int argc, char **argv)
{
    struct cli_snap c = {0};
    const char *tag = NULL;
    bool stats = false, keep_setid = false, max_data = false;
    int rc = 0;
    enum sub sub = SUB_NONE;
    const char *cmd = "snapshot";
    if (argc > 1 && strcmp(argv[1], "rm") == 0)
        sub = SUB_RM;
    else if (argc > 1 && strcmp(argv[1], "gc") == 0)
        sub = SUB_GC;
    else if (argc > 1 && strcmp(argv[1], "import") == 0)
        sub = SUB_IMPORT;
    if (sub != SUB_NONE) {
        argc--;
        argv++;
    }

    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_snapshot, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        int took = opt == CLI_GETOPT_BAD ? -1 : cli_snap_option(&c, cmd, opt, optarg);
        if (took < 0) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        switch (opt) {
        case OPT_TAG:
            tag = optarg;
            break;
        case OPT_JSON:
            c.json = true;
            break;
        case OPT_STATS:
            stats = true;
            break;
        case OPT_KEEP_SETID:
            keep_setid = true;
            break;
        case OPT_MAX_DATA:
            if (cli_snap_max_data(cmd, optarg) < 0) {
                rc = CLI_EXIT_USAGE;
                goto done;
            }
            max_data = true;
            break;
        default: /* CLI_GETOPT_BAD */
            rc = CLI_EXIT_USAGE;
            goto done;
        }
    }
    if (tag && (sub == SUB_RM || sub == SUB_GC)) {
        rc = cli_usage(cmd, "--tag is for taking or importing a snapshot");
        goto done;
    }
    if (keep_setid && sub != SUB_IMPORT) {
        rc = cli_usage(cmd, "--keep-setid is for importing a snapshot (and restore, export)");
        goto done;
    }
    if (max_data && (sub == SUB_RM || sub == SUB_GC)) {
        rc = cli_usage(cmd, "--max-data is for taking or importing a snapshot");
        goto done;
    }
    cli_snap_keep_setid(keep_setid);
    const char *name = NULL;
    if ((rc = cli_snap_target(&c, cmd, argc, argv, &name)) != 0)
        goto done;
    const char *operand = NULL;
    if (sub == SUB_RM || sub == SUB_IMPORT) {
        if (optind >= argc) {
            rc =
                cli_usage(cmd, sub == SUB_RM ? "missing SNAP to delete" : "missing FILE to import");
            goto done;
        }
        operand = argv[optind++];
    }
    if (optind < argc) {
        rc = cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
        goto done;
    }
    if (sub == SUB_NONE) {
        c.remote_tool = "snapshot";
        cJSON *a = cJSON_CreateObject();
        if (tag)
            cJSON_AddStringToObject(a, "tag", tag);
        c.remote_args = cJSON_PrintUnformatted(a);
        cJSON_Delete(a);
    }
    struct remote_import ri = {operand, tag};
    if (sub == SUB_IMPORT) {
        c.remote_fn = import_remote;
        c.remote_ud = &ri;
    }
    if ((rc = cli_snap_open(&c, name, sub == SUB_NONE || sub == SUB_IMPORT)) != 0 || c.handled)
        goto done;

    sp_error *err = NULL;
    int r = 0;
    switch (sub) {
    case SUB_NONE: {
        sp_snapshot *snap = NULL;
        r = sp_snapshot_create(&snap, c.s, tag, &err);
        if (r == 0)
            rc = finish_record(&c, snap, stats);
        break;
    }
    case SUB_IMPORT: {
        sp_snapshot *snap = NULL;
        if (strcmp(operand, "-") == 0)
            r = sp_snapshot_import(&snap, c.s, NULL, STDIN_FILENO, tag, &err);
        else
            r = sp_snapshot_import(&snap, c.s, operand, -1, tag, &err);
        if (r == 0)
            rc = finish_record(&c, snap, stats);
        break;
    }
    case SUB_RM: {
        sp_snapshot *snap = NULL;
        r = sp_snapshot_get(&snap, c.s, operand, &err);
        if (r == 0)
            r = sp_snapshot_delete(c.s, snap->id, &err);
        if (r == 0) {
            if (c.json) {
                cJSON *o = cJSON_CreateObject();
                if (o && !sp_json_add_string(o, "deleted", snap->id)) {
                    cJSON_Delete(o);
                    o = NULL;
                }
                rc = cli_print_result(o);
            } else {
                printf("deleted snapshot %s\n", snap->id);
            }
        }
        sp_snapshot_free(snap);
        break;
    }
    case SUB_GC: {
        sp_snapstore_gc_result res;
        r = sp_snapstore_gc(&res, c.s, &err);
        if (r == 0) {
            if (c.json) {
                rc = cli_print_result(sp_json_snapstore_gc(&res));
            } else {
                char bytes[32];
                cli_format_bytes(bytes, sizeof(bytes), res.bytes_removed);
                printf("removed %" PRIu64 " objects (%s), kept %" PRIu64 "\n", res.objects_removed,
                       bytes, res.objects_kept);
            }
        }
        break;
    }
    }
    if (r < 0) {
        cli_snap_progress_end(&c);
        rc = cli_fail(c.json, r, err);
    }
done:
    cli_snap_close(&c);
    return rc;
}
