/* sandpod export: write a snapshot's tree as a tar archive. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "fs_json.h"
#include "snapshot_json.h"

enum { OPT_OUTPUT = 'o', OPT_FORMAT = 0x2100, OPT_KEEP_SETID };

/* In cmd_snapshot.c: the store option cli_snap_open() then uses. */
void cli_snap_keep_setid(bool keep);

const struct cli_spec cli_spec_export = {
    .name = "export",
    .fn = cmd_export,
    .summary = "Write a snapshot as a tar or tar.gz archive",
    .usage =
        CLI_USAGE("NAME SNAP -o FILE.tar[.gz]", "--root DIR --store DIR SNAP -o FILE.tar[.gz]"),
    .description = "Write snapshot SNAP as a pax tar archive: permission bits, symlinks, empty\n"
                   "folders, the snapshot's time as mtime, owner nobody:nogroup (65534:65534).\n"
                   "Files lose their set-user-ID and set-group-ID bits unless --keep-setid is\n"
                   "given, so that extracting as root makes no set-id binary. FILE is written\n"
                   "whole or not at all; '-' writes to stdout (not a terminal).",
    .groups = CLI_GROUPS(
        CLI_OWN(CLI_VALUE("output", 'o', "FILE", OPT_OUTPUT, CLI_COMP_FILE,
                          "where to write (required)"),
                CLI_CHOICE("format", 0, "F", OPT_FORMAT, "tar|tar.gz",
                           "tar or tar.gz (default: from FILE's name, .tar.gz or .tgz for tar.gz, "
                           "else tar)"),
                CLI_FLAG("keep-setid", 0, OPT_KEEP_SETID, "keep the set-id bits of files"),
                CLI_FLAG("json", 0, 'j', "print {ok, id, commit, output, format}")),
        &cli_group_snap, &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME", CLI_COMP_SANDBOX, NULL}, {"SNAP", CLI_COMP_NONE, NULL}),
    .exit_status = "0 ok, 1 error, 2 bad usage.",
};

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

int cli_write_output(const char *output, int (*write)(int fd, void *ud), void *ud)
{
    if (strcmp(output, "-") == 0) {
        fflush(stdout);
        return write(STDOUT_FILENO, ud);
    }
    size_t n = strlen(output) + 16;
    char *tmp = malloc(n);
    if (!tmp)
        return SP_ERROR;
    snprintf(tmp, n, "%s.tmp-XXXXXX", output);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        cli_error("%s: %s", output, strerror(e));
        return SP_ERROR;
    }
    mode_t um = umask(0);
    umask(um);
    fchmod(fd, 0644 & ~um);
    int r = write(fd, ud);
    if (r == 0 && fsync(fd) < 0)
        r = SP_ERROR;
    if (close(fd) < 0 && r == 0)
        r = SP_ERROR;
    if (r == 0 && rename(tmp, output) < 0) {
        cli_error("%s: %s", output, strerror(errno));
        r = SP_ERROR;
    }
    if (r < 0)
        unlink(tmp);
    free(tmp);
    return r;
}

/* export on a sandbox of another engine: the peer writes the archive,
 * which streams here. */
struct remote_export {
    const char *ref, *output;
    sp_snapshot_format fmt;
    sp_sandbox *sb;
    sp_error *err;
};

static int export_write(int fd, void *ud)
{
    struct remote_export *x = ud;
    return sp_sandbox_snapshot_export_fd(x->sb, x->ref, fd, x->fmt, &x->err);
}

static int export_remote(struct cli_snap *c, void *ud)
{
    struct remote_export *x = ud;
    x->sb = c->sb;
    int r = cli_write_output(x->output, export_write, x);
    if (r < 0) {
        if (!x->err)
            return CLI_EXIT_ERROR; /* said already */
        return cli_fail(c->json, r, x->err);
    }
    if (c->json) {
        cJSON *o = cJSON_CreateObject();
        if (o &&
            !(sp_json_add_string(o, "snapshot", x->ref) &&
              sp_json_add_string(o, "output", x->output) &&
              sp_json_add_string(o, "format", x->fmt == SP_SNAPSHOT_TAR_GZ ? "tar.gz" : "tar"))) {
            cJSON_Delete(o);
            o = NULL;
        }
        return cli_print_result(o);
    }
    if (strcmp(x->output, "-") != 0) {
        printf("exported %s to ", x->ref);
        cli_put_name(stdout, x->output);
        putchar('\n');
    }
    return CLI_EXIT_OK;
}

int cmd_export(int argc, char **argv)
{
    struct cli_snap c = {0};
    const char *output = NULL, *format = NULL;
    int rc = 0;
    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_export, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        int took = opt == CLI_GETOPT_BAD ? -1 : cli_snap_option(&c, "export", opt, optarg);
        if (took < 0) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        switch (opt) {
        case OPT_OUTPUT:
            output = optarg;
            break;
        case OPT_FORMAT:
            format = optarg;
            break;
        case OPT_KEEP_SETID:
            cli_snap_keep_setid(true);
            break;
        default:
            c.json = true;
        }
    }
    const char *name = NULL;
    if ((rc = cli_snap_target(&c, "export", argc, argv, &name)) != 0)
        goto done;
    if (optind >= argc) {
        rc = cli_usage("export", "missing SNAP to export");
        goto done;
    }
    const char *ref = argv[optind++];
    if (optind < argc) {
        rc = cli_usage("export", "unexpected argument '%s'", argv[optind]);
        goto done;
    }
    if (!output) {
        rc = cli_usage("export", "missing -o FILE");
        goto done;
    }
    sp_snapshot_format fmt = SP_SNAPSHOT_TAR;
    if (format) {
        if (strcmp(format, "tar.gz") == 0 || strcmp(format, "tgz") == 0)
            fmt = SP_SNAPSHOT_TAR_GZ;
        else if (strcmp(format, "tar") != 0) {
            rc = cli_usage("export", "--format is tar or tar.gz, not '%s'", format);
            goto done;
        }
    } else if (ends_with(output, ".tar.gz") || ends_with(output, ".tgz")) {
        fmt = SP_SNAPSHOT_TAR_GZ;
    }
    bool to_stdout = strcmp(output, "-") == 0;
    if (to_stdout && isatty(STDOUT_FILENO)) {
        rc = cli_usage("export", "refusing to write an archive to a terminal");
        goto done;
    }
    if (to_stdout && c.json) {
        rc = cli_usage("export", "--json needs -o FILE (stdout carries the archive)");
        goto done;
    }
    struct remote_export rx = {.ref = ref, .output = output, .fmt = fmt};
    c.remote_fn = export_remote;
    c.remote_ud = &rx;
    if ((rc = cli_snap_open(&c, name, false)) != 0 || c.handled)
        goto done;
    sp_snapshot *snap = NULL;
    sp_error *err = NULL;
    int r = sp_snapshot_get(&snap, c.s, ref, &err);
    if (r == 0) {
        fflush(stdout);
        r = sp_snapshot_export(c.s, snap->id, to_stdout ? NULL : output,
                               to_stdout ? STDOUT_FILENO : -1, fmt, &err);
    }
    if (r < 0) {
        sp_snapshot_free(snap);
        rc = cli_fail(c.json, r, err);
        goto done;
    }
    if (c.json) {
        cJSON *o = cJSON_CreateObject();
        if (o && !(sp_json_add_string(o, "id", snap->id) &&
                   sp_json_add_string(o, "commit", snap->commit) &&
                   sp_json_add_string(o, "output", output) &&
                   sp_json_add_string(o, "format", fmt == SP_SNAPSHOT_TAR_GZ ? "tar.gz" : "tar"))) {
            cJSON_Delete(o);
            o = NULL;
        }
        rc = cli_print_result(o);
    } else if (!to_stdout) {
        printf("exported %s to ", snap->id);
        cli_put_name(stdout, output);
        putchar('\n');
    }
    sp_snapshot_free(snap);
done:
    cli_snap_close(&c);
    return rc;
}
