/* sandpod ls: the sandboxes under the state root, with what Podman says
 * about each. Podman being unreachable makes states "unknown", not an
 * error: the list itself lives on disk. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "fs_json.h"
#include "json.h"
#include "sandbox_json.h"

enum { OPT_JSON = 'j', OPT_QUIET = 'q' };

const struct cli_spec cli_spec_ls = {
    .name = "ls",
    .fn = cmd_ls,
    .summary = "List the sandboxes and their states",
    .usage = CLI_USAGE("[--json | --quiet] [--state-root DIR] [--url URL]"),
    .description = "List the sandboxes: NAME, STATE (from Podman: running, exited, paused,\n"
                   "created, missing when the container is gone, unknown when Podman cannot be\n"
                   "reached), IMAGE, CREATED and WORKSPACE. No sandbox prints the header alone.\n"
                   "A state folder without sandbox.json is listed too, with STATE creating\n"
                   "while its create holds its lock, else incomplete: a create was killed\n"
                   "before it finished; `sandpod rm NAME` or `sandpod gc` removes it.",
    .groups = CLI_GROUPS(
        CLI_OWN(CLI_FLAG("json", 0, OPT_JSON,
                         "print {ok, sandboxes: [{name, state, running, exit_code, oom_killed, "
                         "container, image, created_at, workspace, state_dir, made_by}], "
                         "count}, plus podman_error when Podman could not be asked; made_by is "
                         "\"mcp\" for a sandbox an MCP session made, else null"),
                CLI_FLAG("quiet", 'q', OPT_QUIET,
                         "print the names of the complete sandboxes only, one a line, without "
                         "asking Podman (for scripts and shell completion)")),
        &cli_group_conn),
    .exit_status = "0 ok (no sandbox too), 1 error, 2 bad usage.",
};

static const char *str_field(const cJSON *o, const char *key)
{
    return sp_json_str_or(o, key, "-");
}

static int print_table(const cJSON *list)
{
    static const char *const heads[] = {"NAME", "STATE", "IMAGE", "CREATED", "WORKSPACE"};
    enum { NCOL = 5 };
    int width[NCOL];
    for (int i = 0; i < NCOL; i++)
        width[i] = (int)strlen(heads[i]);
    const cJSON *it;
    char created[64];
    cJSON_ArrayForEach(it, list)
    {
        const char *v[NCOL] = {str_field(it, "name"), str_field(it, "state"),
                               str_field(it, "image"), NULL, NULL};
        cli_local_time(created, sizeof(created), str_field(it, "created_at"));
        v[3] = created;
        for (int i = 0; i < 4; i++)
            if ((int)strlen(v[i]) > width[i])
                width[i] = (int)strlen(v[i]);
    }
    printf("%-*s  %-*s  %-*s  %-*s  %s\n", width[0], heads[0], width[1], heads[1], width[2],
           heads[2], width[3], heads[3], heads[4]);
    cJSON_ArrayForEach(it, list)
    {
        cli_local_time(created, sizeof(created), str_field(it, "created_at"));
        printf("%-*s  %-*s  %-*s  %-*s  ", width[0], str_field(it, "name"), width[1],
               str_field(it, "state"), width[2], str_field(it, "image"), width[3], created);
        if (sp_json_str(it, "workspace"))
            cli_put_name(stdout, str_field(it, "workspace"));
        else if (sp_json_str(it, "engine"))
            printf("(engine %s)", str_field(it, "engine"));
        else
            fputs("-", stdout); /* incomplete */
        putchar('\n');
    }
    return CLI_EXIT_OK;
}

/* The line of an incomplete sandbox: *out NULL when it is gone or was
 * completed meanwhile. False when out of memory. */
static bool incomplete_json(cJSON **out, const char *name, const char *state_root)
{
    *out = NULL;
    sp_error *e = NULL;
    int r = sp_sandbox_remove_incomplete(name, state_root, 0, true, &e);
    bool busy = r < 0 && e && e->sys_errno == EWOULDBLOCK;
    sp_error_free(e);
    if (r == SP_ENOTFOUND || r == SP_EEXISTS)
        return true;
    char *root = NULL;
    if (!state_root && sp_state_root(&root, NULL) < 0)
        root = NULL;
    const char *base = state_root ? state_root : root;
    char *dir = NULL;
    if (base && asprintf(&dir, "%s/sandboxes/%s", base, name) < 0)
        dir = NULL;
    free(root);
    cJSON *o = cJSON_CreateObject();
    bool ok = o && sp_json_add_string(o, "name", name) &&
              sp_json_add_string(o, "state", busy ? "creating" : "incomplete") &&
              cJSON_AddFalseToObject(o, "running") && cJSON_AddNullToObject(o, "exit_code") &&
              cJSON_AddFalseToObject(o, "oom_killed") && cJSON_AddNullToObject(o, "container") &&
              cJSON_AddNullToObject(o, "image") && cJSON_AddNullToObject(o, "created_at") &&
              cJSON_AddNullToObject(o, "workspace") && sp_json_add_string(o, "state_dir", dir) &&
              cJSON_AddNullToObject(o, "made_by");
    free(dir);
    if (!ok) {
        cJSON_Delete(o);
        return false;
    }
    *out = o;
    return true;
}

int cmd_ls(int argc, char **argv)
{
    struct cli_conn conn = {0};
    bool json = false;
    char **names = NULL, **incomplete = NULL;
    cJSON *out = NULL;
    int rc = 0;

    optind = 0;
    int opt;
    bool quiet = false;
    while ((opt = cli_next(&cli_spec_ls, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        int took = cli_conn_option(&conn, "ls", opt, optarg);
        if (took < 0 || opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        if (opt == OPT_QUIET)
            quiet = true;
        else
            json = true;
    }
    if (json && quiet) {
        rc = cli_usage("ls", "give --json or --quiet, not both");
        goto done;
    }
    if (optind < argc) {
        rc = cli_usage("ls", "unexpected argument '%s'", argv[optind]);
        goto done;
    }

    sp_error *err = NULL;
    int r = sp_sandbox_list(&names, conn.state_root, &err);
    if (r < 0) {
        rc = cli_fail(json, r, err);
        goto done;
    }
    if (quiet) {
        for (char **n = names; n && *n; n++) {
            cli_put_name(stdout, *n);
            putchar('\n');
        }
        goto done;
    }
    /* What a killed create left: shown, so that it can be removed. */
    if (sp_sandbox_list_incomplete(&incomplete, conn.state_root, NULL) < 0)
        incomplete = NULL;

    /* One connection attempt decides whether Podman is there at all, so
     * that an unreachable service costs one timeout, not one per sandbox. */
    char *podman_error = NULL;
    if (names && names[0]) {
        sp_podman_opts po = cli_conn_podman_opts(&conn);
        sp_podman *p = NULL;
        if ((r = sp_podman_open(&p, &po, &err)) < 0) {
            podman_error = strdup(err && err->message ? err->message : sp_strerror(r));
            sp_error_free(err);
            err = NULL;
        }
        sp_podman_free(p);
    }

    out = cJSON_CreateObject();
    cJSON *list = cJSON_CreateArray();
    if (!out || !list || !cJSON_AddItemToObject(out, "sandboxes", list)) {
        cJSON_Delete(list);
        free(podman_error);
        rc = cli_error("out of memory");
        goto done;
    }
    size_t count = 0;
    sp_sandbox_opts so = cli_conn_sandbox_opts(&conn);
    /* Both lists are sorted: merged, one line per name. */
    for (size_t i = 0, k = 0; names[i] || (incomplete && incomplete[k]);) {
        cJSON *item = NULL;
        if (!names[i] || (incomplete && incomplete[k] && strcmp(incomplete[k], names[i]) < 0)) {
            if (!incomplete_json(&item, incomplete[k++], conn.state_root)) {
                free(podman_error);
                rc = cli_error("out of memory");
                goto done;
            }
            if (!item)
                continue;
        } else {
            sp_sandbox *sb = NULL;
            /* Removed meanwhile by another sandpod: not an error. */
            if (sp_sandbox_open(&sb, names[i++], &so, NULL) < 0)
                continue;
            sp_sandbox_status *st = NULL;
            if (!podman_error && sp_sandbox_status_get(&st, sb, NULL) < 0)
                st = NULL;
            item = sp_json_sandbox(sb, st, false);
            if (item && !sp_json_add_string(item, "made_by", sp_sandbox_made_by(sb))) {
                cJSON_Delete(item);
                item = NULL;
            }
            sp_sandbox_status_free(st);
            sp_sandbox_free(sb);
        }
        if (!item || !cJSON_AddItemToArray(list, item)) {
            cJSON_Delete(item);
            free(podman_error);
            rc = cli_error("out of memory");
            goto done;
        }
        count++;
    }
    cJSON_AddNumberToObject(out, "count", (double)count);
    if (podman_error) {
        sp_json_add_string(out, "podman_error", podman_error);
        fflush(stdout);
        fputs("sandpod: podman cannot be reached, states are unknown: ", stderr);
        cli_put_name(stderr, podman_error);
        fputc('\n', stderr);
        free(podman_error);
    }
    if (json) {
        rc = cli_print_result(out);
        out = NULL;
    } else {
        rc = print_table(list);
    }

done:
    cJSON_Delete(out);
    for (size_t i = 0; names && names[i]; i++)
        free(names[i]);
    free(names);
    for (size_t i = 0; incomplete && incomplete[i]; i++)
        free(incomplete[i]);
    free(incomplete);
    cli_conn_dispose(&conn);
    return rc;
}
