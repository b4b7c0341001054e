/* sandpod inspect: everything about one sandbox: what Podman says about
 * its container, where its folders are, and the configuration it was
 * created with. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fs_json.h"
#include "json.h"
#include "sandbox_json.h"

enum { OPT_SHOW_SECRETS = 256 };

const struct cli_spec cli_spec_inspect = {
    .name = "inspect",
    .fn = cmd_inspect,
    .summary = "Show a sandbox's state, folders and configuration",
    .usage = CLI_USAGE("[--json] [--show-secrets] NAME"),
    .description = "Show a sandbox: its state (from Podman; unknown when Podman cannot be\n"
                   "reached), container, image, creation time, workspace and state folders, the\n"
                   "exec path its commands take and why (fast: through sandpod-agent, the\n"
                   "container's pid 1; rest: a Podman exec each, much slower), and the\n"
                   "configuration it was created with (workdir, user, env, network, limits, root\n"
                   "filesystem, added capabilities). Environment values given with -e are shown\n"
                   "as KEY=*** (they are often tokens) unless --show-secrets is given.",
    .groups = CLI_GROUPS(
        CLI_OWN(
            CLI_FLAG("json", 0, 'j',
                     "print {ok, name, state, running, exit_code, oom_killed, container, "
                     "image, created_at, workspace, state_dir, exec_path (fast|rest), "
                     "exec_path_reason, mounts: [{host_path, mount_path, "
                     "include, exclude, max_bytes, follow_symlinks, gitignore, files, bytes, "
                     "secrets, secrets_left_out, secrets_rewritten}], made_by, config: "
                     "{workdir, user, env, "
                     "network, memory_bytes, nano_cpus, pids_limit, tmpfs_bytes, "
                     "writable_root, cap_add}}"),
            CLI_FLAG("show-secrets", 0, OPT_SHOW_SECRETS, "show env values as they were given")),
        &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME", CLI_COMP_SANDBOX, NULL}),
    .exit_status = "0 ok, 1 error (no such sandbox), 2 bad usage.",
};

static void field(const char *label, const char *value)
{
    printf("%-12s", label);
    cli_put_name(stdout, value ? value : "-");
    putchar('\n');
}

static const cJSON *get(const cJSON *o, const char *key)
{
    return sp_json_get(o, key);
}

static const char *str(const cJSON *o, const char *key)
{
    return sp_json_str(o, key);
}

/* A number sp_json_sandbox() wrote: a double, or a raw literal past 2^53. */
static bool u64(const cJSON *o, const char *key, uint64_t *out)
{
    const cJSON *v = get(o, key);
    if (cJSON_IsNumber(v) && v->valuedouble >= 0) {
        *out = (uint64_t)v->valuedouble;
        return true;
    }
    if (cJSON_IsRaw(v) && v->valuestring) {
        char *end = NULL;
        *out = strtoull(v->valuestring, &end, 10);
        return end && *end == '\0';
    }
    return false;
}

static void bytes_field(const char *label, const cJSON *cfg, const char *key)
{
    uint64_t v = 0;
    char buf[32];
    if (!u64(cfg, key, &v))
        snprintf(buf, sizeof(buf), "-");
    else if (v == UINT64_MAX)
        snprintf(buf, sizeof(buf), "no limit");
    else
        cli_format_bytes(buf, sizeof(buf), v);
    field(label, buf);
}

static void list_field(const char *label, const cJSON *a)
{
    const cJSON *it;
    bool any = false;
    cJSON_ArrayForEach(it, a)
    {
        if (!cJSON_IsString(it))
            continue;
        field(any ? "" : label, it->valuestring);
        any = true;
    }
    if (!any)
        field(label, "(none)");
}

/* The host folders the workspace was hydrated from (sp_sandbox_mounts()). */
static cJSON *mounts_json(const sp_sandbox *sb)
{
    size_t n = 0;
    const sp_sandbox_mount *m = sp_sandbox_mounts(sb, &n);
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON *inc = cJSON_CreateArray(), *exc = cJSON_CreateArray();
        for (size_t k = 0; m[i].include[k]; k++)
            cJSON_AddItemToArray(inc, sp_json_string(m[i].include[k]));
        for (size_t k = 0; m[i].exclude[k]; k++)
            cJSON_AddItemToArray(exc, sp_json_string(m[i].exclude[k]));
        sp_json_add_string(e, "host_path", m[i].host_path);
        sp_json_add_string(e, "mount_path", m[i].mount_path);
        cJSON_AddItemToObject(e, "include", inc);
        cJSON_AddItemToObject(e, "exclude", exc);
        sp_json_add_u64(e, "max_bytes", m[i].max_bytes);
        cJSON_AddBoolToObject(e, "follow_symlinks", m[i].follow_symlinks);
        cJSON_AddBoolToObject(e, "gitignore", m[i].gitignore);
        sp_json_add_u64(e, "files", m[i].files);
        sp_json_add_u64(e, "bytes", m[i].bytes);
        sp_json_add_string(e, "secrets", m[i].keep_secrets ? "keep" : "strip");
        cJSON_AddItemToObject(e, "secrets_left_out",
                              sp_json_strv_map(m[i].secrets_left_out, sp_json_string));
        cJSON_AddItemToObject(e, "secrets_rewritten",
                              sp_json_strv_map(m[i].secrets_rewritten, sp_json_string));
        cJSON_AddItemToArray(a, e);
    }
    return a;
}

static void print_mounts(const cJSON *mounts)
{
    const cJSON *m;
    bool any = false;
    cJSON_ArrayForEach(m, mounts)
    {
        char buf[4200], size[32];
        uint64_t files = 0, bytes = 0, cap = 0;
        u64(m, "files", &files);
        u64(m, "bytes", &bytes);
        cli_format_bytes(size, sizeof(size), bytes);
        const char *dst = str(m, "mount_path");
        snprintf(buf, sizeof(buf), "%s -> /workspace%s%s (%" PRIu64 " file%s, %s)",
                 str(m, "host_path") ? str(m, "host_path") : "-",
                 dst && strcmp(dst, ".") != 0 ? "/" : "", dst && strcmp(dst, ".") != 0 ? dst : "",
                 files, files == 1 ? "" : "s", size);
        field(any ? "" : "mounts:", buf);
        any = true;
        static const char *const lists[] = {"include", "exclude"};
        for (int l = 0; l < 2; l++) {
            const cJSON *g;
            size_t len = (size_t)snprintf(buf, sizeof(buf), "  %s:", lists[l]);
            bool some = false;
            cJSON_ArrayForEach(g, get(m, lists[l]))
            {
                if (cJSON_IsString(g) && len < sizeof(buf))
                    len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s %s", some ? "," : "",
                                            g->valuestring);
                some = true;
            }
            if (some)
                field("", buf);
        }
        if (u64(m, "max_bytes", &cap) && cap) {
            cli_format_bytes(size, sizeof(size), cap);
            snprintf(buf, sizeof(buf), "  max bytes: %s", size);
            field("", buf);
        }
        if (cJSON_IsTrue(get(m, "follow_symlinks")))
            field("", "  follows symlinks into its allowed roots");
        if (cJSON_IsTrue(get(m, "gitignore")))
            field("", "  leaves out what its .gitignore files ignore");
        const char *sec = str(m, "secrets");
        if (sec && strcmp(sec, "keep") == 0)
            field("", "  secrets=keep: files with credentials copied as they were");
        static const char *const secret_lists[][2] = {
            {"secrets_left_out", "left out, holds credentials"},
            {"secrets_rewritten", "copied without its credentials"}};
        for (int l = 0; l < 2; l++) {
            const cJSON *g;
            cJSON_ArrayForEach(g, get(m, secret_lists[l][0]))
            {
                if (!cJSON_IsString(g))
                    continue;
                snprintf(buf, sizeof(buf), "  %s: %s", secret_lists[l][1], g->valuestring);
                field("", buf);
            }
        }
    }
    if (!any)
        field("mounts:", "(none recorded)");
}

static void print_human(const cJSON *o)
{
    char buf[64];
    field("name:", str(o, "name"));
    field("state:", str(o, "state"));
    const cJSON *code = get(o, "exit_code");
    if (cJSON_IsNumber(code)) {
        snprintf(buf, sizeof(buf), "%d", code->valueint);
        field("exit code:", buf);
    }
    if (cJSON_IsTrue(get(o, "oom_killed")))
        field("oom killed:", "yes");
    field("engine:", str(o, "engine"));
    field("container:", str(o, "container"));
    field("image:", str(o, "image"));
    const char *created = str(o, "created_at");
    if (created)
        cli_local_time(buf, sizeof(buf), created);
    field("created:", created ? buf : NULL);
    field("workspace:", str(o, "workspace"));
    field("state dir:", str(o, "state_dir"));
    const char *path = str(o, "exec_path"), *why = str(o, "exec_path_reason");
    char line[4200];
    snprintf(line, sizeof(line), "%s (%s)", path ? path : "-", why ? why : "-");
    field("exec path:", line);
    if (str(o, "made_by"))
        field("made by:", str(o, "made_by"));
    print_mounts(get(o, "mounts"));

    const cJSON *cfg = get(o, "config");
    field("workdir:", str(cfg, "workdir"));
    field("user:", str(cfg, "user"));
    field("network:", str(cfg, "network"));
    bytes_field("memory:", cfg, "memory_bytes");
    uint64_t v = 0;
    if (u64(cfg, "nano_cpus", &v) && v != UINT64_MAX) {
        snprintf(buf, sizeof(buf), "%" PRIu64 ".%09" PRIu64, v / 1000000000u, v % 1000000000u);
        /* 1.500000000 -> 1.5, 2.000000000 -> 2 */
        char *e = buf + strlen(buf) - 1;
        while (*e == '0')
            *e-- = '\0';
        if (*e == '.')
            *e = '\0';
        field("cpus:", buf);
    } else {
        field("cpus:", v == UINT64_MAX ? "no limit" : NULL);
    }
    const cJSON *pids = get(cfg, "pids_limit");
    if (cJSON_IsNumber(pids) && pids->valuedouble < 0)
        field("pids:", "no limit");
    else if (cJSON_IsNumber(pids)) {
        snprintf(buf, sizeof(buf), "%.0f", pids->valuedouble);
        field("pids:", buf);
    } else {
        field("pids:", NULL);
    }
    bytes_field("tmpfs /tmp:", cfg, "tmpfs_bytes");
    field("root fs:", cJSON_IsTrue(get(cfg, "writable_root")) ? "writable" : "read-only");
    list_field("env:", get(cfg, "env"));
    list_field("cap add:", get(cfg, "cap_add"));
    list_field("env passed:", get(cfg, "env_pass"));
    const char *userns = str(cfg, "userns");
    const cJSON *hu = get(cfg, "host_uid");
    if (userns && cJSON_IsNumber(hu) && hu->valuedouble >= 0)
        snprintf(buf, sizeof(buf), "%s (%s; the container user is host uid %.0f)", userns,
                 cJSON_IsTrue(get(cfg, "rootless")) ? "rootless" : "rootful", hu->valuedouble);
    else
        snprintf(buf, sizeof(buf), "%s", userns ? userns : "host");
    field("user ns:", buf);
    field("seccomp:", str(cfg, "seccomp"));
    if (cJSON_IsFalse(get(cfg, "limits_apply")))
        field("limits:", "not in force (rootless Podman on cgroup v1 cannot set them)");
    list_field("warnings:", get(cfg, "warnings"));
}

int cmd_inspect(int argc, char **argv)
{
    struct cli_conn conn = {0};
    bool json = false;
    unsigned flags = SP_JSON_SANDBOX_CONFIG;
    sp_sandbox *sb = NULL;
    int rc = 0;

    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_inspect, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        int took = cli_conn_option(&conn, "inspect", opt, optarg);
        if (took < 0 || opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        if (opt == OPT_SHOW_SECRETS)
            flags |= SP_JSON_SANDBOX_SECRETS;
        else
            json = true; /* 'j' */
    }
    if (optind >= argc) {
        rc = cli_usage("inspect", "missing sandbox NAME");
        goto done;
    }
    if (argc - optind > 1) {
        rc = cli_usage("inspect", "unexpected argument '%s'", argv[optind + 1]);
        goto done;
    }
    if ((rc = cli_sandbox_open(&sb, argv[optind], &conn, json)) != 0)
        goto done;

    sp_sandbox_status *st = NULL;
    sp_error *err = NULL;
    char *podman_error = NULL;
    int r = sp_sandbox_status_get(&st, sb, &err);
    if (r < 0) {
        podman_error = strdup(err && err->message ? err->message : sp_strerror(r));
        sp_error_free(err);
        st = NULL;
    }
    cJSON *o = sp_json_sandbox_ext(sb, st, flags);
    sp_sandbox_status_free(st);
    if (o) {
        cJSON_AddItemToObject(o, "mounts", mounts_json(sb));
        char *why = NULL;
        sp_exec_path path = sp_sandbox_exec_path(&why, sb);
        sp_json_add_string(o, "exec_path", path == SP_EXEC_FAST ? "fast" : "rest");
        sp_json_add_string(o, "exec_path_reason", why);
        free(why);
        sp_json_add_string(o, "made_by", sp_sandbox_made_by(sb));
    }
    if (podman_error) {
        if (o)
            sp_json_add_string(o, "podman_error", podman_error);
        fflush(stdout);
        fputs("sandpod: podman cannot be reached, the state is unknown: ", stderr);
        cli_put_name(stderr, podman_error);
        fputc('\n', stderr);
        free(podman_error);
    }
    if (json) {
        rc = cli_print_result(o);
    } else if (!o) {
        rc = cli_error("out of memory");
    } else {
        print_human(o);
        cJSON_Delete(o);
    }

done:
    sp_sandbox_free(sb);
    cli_conn_dispose(&conn);
    return rc;
}
