/* sandpod template save | ls | inspect | rm: prepared sandboxes recorded
 * (image, configuration, a snapshot) for `create --template`. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fs_json.h"
#include "json.h"

enum { OPT_FORCE = 256, OPT_SNAPSHOT, OPT_JSON };

const struct cli_spec cli_spec_template = {
    .name = "template",
    .fn = cmd_template,
    .summary = "Save, list, inspect and remove templates",
    .usage = CLI_USAGE("save NAME TEMPLATE [--snapshot SNAP] [--force] [--json]", "ls [--json]",
                       "inspect TEMPLATE [--json]", "rm TEMPLATE... [--json]"),
    .description =
        "A template is a prepared sandbox recorded so that many sandboxes start from it\n"
        "without running its setup again: its image (by id too), its configuration\n"
        "(network, limits, environment, user, workdir, the host folders and the setup\n"
        "commands it was made with) and a snapshot of its workspace. It lives in the state\n"
        "root (STATE_ROOT/templates/TEMPLATE/, private to its owner) with a snapshot store\n"
        "of its own, and survives the removal of the sandbox it came from. Start a\n"
        "sandbox from it with `sandpod create --template TEMPLATE`.\n"
        "\n"
        "  save     record sandbox NAME as TEMPLATE: by default a fresh snapshot of NAME's\n"
        "           workspace, taken now (the container paused as for any snapshot);\n"
        "           --snapshot SNAP takes an existing one. An existing TEMPLATE is kept\n"
        "           unless --force, which replaces it as a whole\n"
        "  ls       the templates, by name: image, origin, created\n"
        "  inspect  what TEMPLATE records (the -e names only, never their values)\n"
        "  rm       remove templates (sandboxes made from them keep their workspaces)",
    .groups =
        CLI_GROUPS(CLI_OWN(CLI_VALUE("snapshot", 0, "SNAP", OPT_SNAPSHOT, CLI_COMP_NONE,
                                     "save: an existing snapshot of NAME (id, tag or prefix)"),
                           CLI_FLAG("force", 0, OPT_FORCE, "save: replace a template of that name"),
                           CLI_FLAG("json", 0, OPT_JSON, "print the result as JSON on stdout")),
                   &cli_group_conn),
    .operands = CLI_OPERANDS({"OP", CLI_COMP_CHOICES, "save|ls|inspect|rm"},
                             {"NAME", CLI_COMP_SANDBOX, NULL}, {"TEMPLATE", CLI_COMP_NONE, NULL}),
    .notes = "Template names follow the rules of sandbox names: letters, digits, '_', '.', '-',\n"
             "starting with a letter or digit, at most 63.",
    .exit_status = "0 ok (also `ls` with no templates), 1 error, 2 bad usage.",
};

static const char *network_name(sp_network n)
{
    return n == SP_NET_NONE ? "none" : n == SP_NET_HOST ? "host" : "default";
}

static cJSON *info_json(const sp_template_info *t)
{
    cJSON *o = cJSON_CreateObject();
    bool ok =
        o && sp_json_add_string(o, "name", t->name) && sp_json_add_string(o, "path", t->path) &&
        sp_json_add_string(o, "origin", t->origin) &&
        sp_json_add_string(o, "snapshot", t->snapshot) &&
        sp_json_add_string(o, "created_at", t->created_at) &&
        sp_json_add_string(o, "image", t->image) &&
        sp_json_add_string(o, "image_id", t->image_id) &&
        sp_json_add(o, "setup", sp_json_strv((const char *const *)t->setup)) &&
        sp_json_add(o, "env_names", sp_json_strv((const char *const *)t->env_names)) &&
        sp_json_add(o, "env_pass", sp_json_strv((const char *const *)t->env_pass)) &&
        sp_json_add_string(o, "workdir", t->workdir) && sp_json_add_string(o, "user", t->user) &&
        sp_json_add_string(o, "network", network_name(t->network)) &&
        cJSON_AddNumberToObject(o, "memory_bytes", (double)t->memory_bytes) &&
        cJSON_AddNumberToObject(o, "nano_cpus", (double)t->nano_cpus) &&
        cJSON_AddNumberToObject(o, "pids_limit", (double)t->pids_limit) &&
        cJSON_AddNumberToObject(o, "mounts", (double)t->n_mounts) &&
        (t->egress ? sp_json_add(o, "egress", sp_json_strv((const char *const *)t->egress))
                   : cJSON_AddNullToObject(o, "egress") != NULL);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static void print_info(const sp_template_info *t)
{
    char mem[32];
    cli_format_bytes(mem, sizeof(mem), t->memory_bytes);
    printf("name:       %s\n", t->name);
    printf("image:      %s (%.12s)\n", t->image, t->image_id);
    printf("origin:     %s, snapshot %.12s\n", t->origin, t->snapshot);
    printf("created:    %s\n", t->created_at);
    printf("network:    %s\n", network_name(t->network));
    printf("limits:     memory %s, cpus %.2f, pids %lld\n", mem, (double)t->nano_cpus / 1e9,
           (long long)t->pids_limit);
    printf("user:       %s\nworkdir:    %s\n", t->user, t->workdir);
    for (size_t i = 0; t->env_names[i]; i++)
        printf("env:        %s\n", t->env_names[i]);
    for (size_t i = 0; t->setup[i]; i++)
        printf("setup:      %s\n", t->setup[i]);
    for (size_t i = 0; t->egress && t->egress[i]; i++)
        printf("egress:     %s\n", t->egress[i]);
}

static int do_save(sp_template_opts *o, const struct cli_conn *conn, const char *name,
                   const char *tmpl, bool json)
{
    sp_sandbox *sb = NULL;
    int rc = cli_sandbox_open(&sb, name, conn, json);
    if (rc)
        return rc;
    sp_template_info *t = NULL;
    sp_error *err = NULL;
    int r = sp_template_save(&t, sb, tmpl, o, &err);
    sp_sandbox_free(sb);
    if (r < 0)
        return cli_fail(json, r, err);
    if (json)
        rc = cli_print_result(info_json(t));
    else
        printf("%s\n", t->name);
    sp_template_info_free(t);
    return rc;
}

static int do_ls(const sp_template_opts *o, bool json)
{
    char **names = NULL;
    sp_error *err = NULL;
    int r = sp_template_list(&names, o, &err);
    if (r < 0)
        return cli_fail(json, r, err);
    cJSON *arr = json ? cJSON_CreateArray() : NULL;
    if (!json && names[0])
        printf("%-24s  %-36s  %-24s  %s\n", "NAME", "IMAGE", "ORIGIN", "CREATED");
    for (size_t i = 0; names[i]; i++) {
        sp_template_info *t = NULL;
        sp_error *e = NULL;
        if (sp_template_info_get(&t, names[i], o, &e) < 0) {
            /* One damaged template does not hide the others. */
            fprintf(stderr, "sandpod: warning: template %s: %s\n", names[i],
                    e ? e->message : "unreadable");
            sp_error_free(e);
            continue;
        }
        if (json) {
            cJSON *item = info_json(t);
            if (!item || !cJSON_AddItemToArray(arr, item))
                cJSON_Delete(item);
        } else {
            char when[40];
            cli_local_time(when, sizeof(when), t->created_at);
            printf("%-24s  %-36s  %-24s  %s\n", t->name, t->image, t->origin, when);
        }
        sp_template_info_free(t);
    }
    for (size_t i = 0; names[i]; i++)
        free(names[i]);
    free(names);
    if (!json)
        return CLI_EXIT_OK;
    cJSON *res = cJSON_CreateObject();
    if (res && !(arr && sp_json_add(res, "templates", arr))) {
        cJSON_Delete(res);
        res = NULL;
    }
    return cli_print_result(res);
}

static int do_inspect(const sp_template_opts *o, const char *tmpl, bool json)
{
    sp_template_info *t = NULL;
    sp_error *err = NULL;
    int r = sp_template_info_get(&t, tmpl, o, &err);
    if (r < 0)
        return cli_fail(json, r, err);
    int rc = CLI_EXIT_OK;
    if (json)
        rc = cli_print_result(info_json(t));
    else
        print_info(t);
    sp_template_info_free(t);
    return rc;
}

/* Every name is tried; the first failure decides the exit code. */
static int do_rm(const sp_template_opts *o, char **names, int n, bool json)
{
    int rc = CLI_EXIT_OK;
    cJSON *done = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        sp_error *err = NULL;
        int r = sp_template_remove(names[i], o, &err);
        if (r < 0) {
            if (json) {
                cJSON_Delete(done);
                return cli_fail(true, r, err);
            }
            int c = cli_fail(false, r, err);
            if (!rc)
                rc = c;
            continue;
        }
        cJSON_AddItemToArray(done, cJSON_CreateString(names[i]));
    }
    if (!json) {
        cJSON_Delete(done);
        return rc;
    }
    cJSON *res = cJSON_CreateObject();
    if (res && !sp_json_add(res, "removed", done)) {
        cJSON_Delete(res);
        res = NULL;
    }
    return cli_print_result(res);
}

int cmd_template(int argc, char **argv)
{
    struct cli_conn conn = {0};
    sp_template_opts o = SP_TEMPLATE_OPTS_INIT;
    bool json = false, force = false;
    const char *snapshot = NULL;
    int rc = 0;
    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_template, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        int took = cli_conn_option(&conn, "template", opt, optarg);
        if (took < 0 || opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        if (opt == OPT_FORCE)
            force = true;
        else if (opt == OPT_SNAPSHOT)
            snapshot = optarg;
        else if (opt == OPT_JSON)
            json = true;
    }
    if (optind >= argc) {
        rc = cli_usage("template", "missing operation: save, ls, inspect or rm");
        goto done;
    }
    const char *op = argv[optind++];
    static const char *const ops[] = {"save", "ls", "inspect", "rm"};
    static const int lo[] = {2, 0, 1, 1}, hi[] = {2, 0, 1, 1 << 20};
    static const char *const what[] = {"sandbox NAME and TEMPLATE", "", "TEMPLATE", "TEMPLATE"};
    size_t k = 0;
    while (k < 4 && strcmp(op, ops[k]) != 0)
        k++;
    if (k == 4) {
        rc = cli_usage("template", "unknown operation '%s'", op);
        goto done;
    }
    int nargs = argc - optind;
    if ((force || snapshot) && k != 0) {
        rc = cli_usage("template", "--force and --snapshot apply to 'save' only");
        goto done;
    }
    if (nargs < lo[k]) {
        rc = cli_usage("template", "%s: missing %s", op, what[k]);
        goto done;
    }
    if (nargs > hi[k]) {
        rc = cli_usage("template", "unexpected argument '%s'", argv[optind + hi[k]]);
        goto done;
    }
    o.state_root = conn.state_root;
    o.podman_url = conn.url;
    o.force = force;
    o.snapshot = snapshot;
    switch (k) {
    case 0:
        rc = do_save(&o, &conn, argv[optind], argv[optind + 1], json);
        break;
    case 1:
        rc = do_ls(&o, json);
        break;
    case 2:
        rc = do_inspect(&o, argv[optind], json);
        break;
    default:
        rc = do_rm(&o, argv + optind, nargs, json);
        break;
    }
done:
    cli_conn_dispose(&conn);
    return rc;
}
