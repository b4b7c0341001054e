/* sandpod create: make a sandbox (workspace hydrated from host folders, a
 * hardened container around it) and print its name.
 *
 * This file also holds what the sandbox commands share: --state-root and
 * --url, option parsing with the CLI's conventions, sizes, and the create
 * options that `sandpod run` takes too. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fs_json.h"
#include "sandbox_json.h"

/* ------------------------------------------------------------ shared -- */

/* An absolute copy of `path`: a relative state root would otherwise end up
 * as a relative bind-mount source, which Podman refuses. */
static char *absolute(const char *path)
{
    if (path[0] == '/')
        return strdup(path);
    char *cwd = getcwd(NULL, 0);
    if (!cwd)
        return NULL;
    size_t n = strlen(cwd) + strlen(path) + 2;
    char *out = malloc(n);
    if (out)
        snprintf(out, n, "%s/%s", cwd, path);
    free(cwd);
    return out;
}

int cli_conn_option(struct cli_conn *c, const char *cmd, int opt, const char *arg)
{
    switch (opt) {
    case CLI_OPT_STATE_ROOT:
        if (!*arg) {
            cli_usage(cmd, "--state-root needs a folder");
            return -1;
        }
        free(c->state_root);
        c->state_root = absolute(arg);
        if (!c->state_root) {
            cli_error("resolving --state-root %s: %s", arg, strerror(errno));
            return -1;
        }
        return 1;
    case CLI_OPT_URL:
        if (!*arg) {
            cli_usage(cmd, "--url needs a URL");
            return -1;
        }
        c->url = arg;
        return 1;
    default:
        return 0;
    }
}

void cli_conn_dispose(struct cli_conn *c)
{
    free(c->state_root);
    c->state_root = NULL;
}

sp_sandbox_opts cli_conn_sandbox_opts(const struct cli_conn *c)
{
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.state_root = c->state_root;
    o.podman_url = c->url;
    return o;
}

sp_podman_opts cli_conn_podman_opts(const struct cli_conn *c)
{
    sp_podman_opts o = SP_PODMAN_OPTS_INIT;
    o.state_root = c->state_root;
    o.url = c->url;
    return o;
}

int cli_fail(bool json, int code, sp_error *err)
{
    int rc = json ? cli_json_error(code, err) : cli_sp_error(code, err);
    sp_error_free(err);
    return rc;
}

int cli_sandbox_open(sp_sandbox **out, const char *name, const struct cli_conn *c, bool json)
{
    sp_sandbox_opts o = cli_conn_sandbox_opts(c);
    sp_error *err = NULL;
    int rc = sp_sandbox_open(out, name, &o, &err);
    return rc < 0 ? cli_fail(json, rc, err) : 0;
}

int cli_parse_bytes(const char *cmd, const char *what, const char *s, uint64_t *out)
{
    const char *p = s;
    if (*p < '0' || *p > '9')
        goto bad;
    uint64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
            goto range;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    unsigned shift = 0;
    switch (*p) {
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    case 't':
    case 'T':
        shift = 40;
        break;
    }
    if (shift) {
        p++;
        if (*p == 'i' || *p == 'I')
            p++;
        if (*p == 'b' || *p == 'B')
            p++;
        else if (p[-1] == 'i' || p[-1] == 'I')
            goto bad; /* "Ki" without the B */
    } else if (*p == 'b' || *p == 'B') {
        p++;
    }
    if (*p != '\0')
        goto bad;
    if (shift && v > (UINT64_MAX >> shift))
        goto range;
    v <<= shift;
    if (v == 0) {
        cli_usage(cmd, "%s must be more than zero: '%s'", what, s);
        return -1;
    }
    *out = v;
    return 0;
bad:
    cli_usage(cmd, "%s must be a size such as 512M or 2G: '%s'", what, s);
    return -1;
range:
    cli_usage(cmd, "%s is out of range: '%s'", what, s);
    return -1;
}

/* An RFC 3339 UTC time ("2024-05-01T12:00:00Z") in local time for a human;
 * the text as it is when it does not parse. */
void cli_local_time(char *buf, size_t size, const char *rfc3339)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *end = rfc3339 ? strptime(rfc3339, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!end || (*end != 'Z' && *end != '\0')) {
        snprintf(buf, size, "%s", rfc3339 ? rfc3339 : "-");
        return;
    }
    time_t t = timegm(&tm);
    struct tm lt;
    if (!localtime_r(&t, &lt) || strftime(buf, size, "%Y-%m-%d %H:%M", &lt) == 0)
        snprintf(buf, size, "%s", rfc3339);
}

/* --cpus 1.5: a decimal number of CPUs, exact to the billionth. */
static int parse_cpus(const char *cmd, const char *s, uint64_t *out)
{
    const char *p = s;
    uint64_t whole = 0, frac = 0;
    unsigned digits = 0;
    if ((*p < '0' || *p > '9') && *p != '.')
        goto bad;
    for (; *p >= '0' && *p <= '9'; p++) {
        whole = whole * 10 + (uint64_t)(*p - '0');
        if (whole > 1000000)
            goto range;
    }
    if (*p == '.') {
        p++;
        if ((*p < '0' || *p > '9') && p - 1 == s)
            goto bad; /* a lone "." */
        for (; *p >= '0' && *p <= '9'; p++) {
            if (digits == 9) {
                if (*p != '0')
                    goto bad;
                continue;
            }
            frac = frac * 10 + (uint64_t)(*p - '0');
            digits++;
        }
    }
    if (*p != '\0')
        goto bad;
    while (digits < 9) {
        frac *= 10;
        digits++;
    }
    *out = whole * 1000000000u + frac;
    if (*out == 0) {
        cli_usage(cmd, "--cpus must be more than zero: '%s'", s);
        return -1;
    }
    return 0;
bad:
    cli_usage(cmd, "--cpus must be a number of CPUs such as 2 or 0.5: '%s'", s);
    return -1;
range:
    cli_usage(cmd, "--cpus is out of range: '%s'", s);
    return -1;
}

/* KEY=VALUE with a non-empty key, or a bare KEY (passed through). */
static bool env_ok(const char *s)
{
    const char *eq = strchr(s, '=');
    return *s && eq != s;
}

int cli_create_init(struct cli_create *c, int argc)
{
    memset(c, 0, sizeof(*c));
    c->opts = (sp_sandbox_opts)SP_SANDBOX_OPTS_INIT;
    size_t n = (size_t)argc + 1;
    c->parsed = calloc(n, sizeof(*c->parsed));
    c->mounts = calloc(n, sizeof(*c->mounts));
    c->roots = calloc(n, sizeof(*c->roots));
    c->env = calloc(n, sizeof(*c->env));
    c->caps = calloc(n, sizeof(*c->caps));
    c->pass = calloc(n, sizeof(*c->pass));
    c->setup = calloc(n, sizeof(*c->setup));
    if (!c->parsed || !c->mounts || !c->roots || !c->env || !c->caps || !c->pass || !c->setup) {
        cli_create_dispose(c);
        return cli_error("out of memory");
    }
    return 0;
}

void cli_create_dispose(struct cli_create *c)
{
    for (size_t i = 0; c->parsed && i < c->n_mounts; i++)
        sp_mount_free(c->parsed[i]);
    free(c->parsed);
    free(c->mounts);
    free(c->roots);
    free(c->env);
    free(c->caps);
    free(c->pass);
    free(c->setup);
    cli_conn_dispose(&c->conn);
    memset(c, 0, sizeof(*c));
}

int cli_create_option(struct cli_create *c, const char *cmd, int opt, const char *arg)
{
    int rc = cli_conn_option(&c->conn, cmd, opt, arg);
    if (rc)
        return rc;
    sp_sandbox_opts *o = &c->opts;
    uint64_t v = 0;
    long long ll = 0;
    sp_error *err = NULL;
    switch (opt) {
    case CLI_OPT_NAME:
        if (!sp_sandbox_name_valid(arg)) {
            cli_usage(cmd,
                      "invalid sandbox name '%s' (letters, digits, '_', '.', '-'; "
                      "at most 63; a letter or digit first)",
                      arg);
            return -1;
        }
        o->name = arg;
        return 1;
    case CLI_OPT_IMAGE:
        o->image = arg;
        return 1;
    case CLI_OPT_ENGINE:
        if (!*arg) {
            cli_usage(cmd, "--engine needs an engine's name (see `sandpod engine ls`)");
            return -1;
        }
        o->engine = arg;
        return 1;
    case CLI_OPT_MOUNT: {
        sp_mount *m = NULL;
        if (sp_mount_spec_parse(&m, arg, &err) < 0) {
            cli_usage(cmd, "--mount %s: %s", arg,
                      err && err->message ? err->message : "invalid mount");
            sp_error_free(err);
            return -1;
        }
        c->parsed[c->n_mounts] = m;
        c->mounts[c->n_mounts] = *m;
        c->n_mounts++;
        return 1;
    }
    case CLI_OPT_ALLOWED_ROOT:
        c->roots[c->n_roots++] = arg;
        return 1;
    case 'e':
        if (!env_ok(arg)) {
            cli_usage(cmd, "--env takes KEY=VALUE or KEY: '%s'", arg);
            return -1;
        }
        /* A bare KEY: every command gets the caller's value at the time it
         * runs; sandpod stores only the name. */
        if (strchr(arg, '='))
            c->env[c->n_env++] = arg;
        else
            c->pass[c->n_pass++] = arg;
        return 1;
    case 'w':
        if (arg[0] != '/') {
            cli_usage(cmd, "--workdir must be an absolute path in the container: '%s'", arg);
            return -1;
        }
        o->workdir = arg;
        return 1;
    case 'u':
        o->user = arg;
        return 1;
    case CLI_OPT_NETWORK:
        if (strcmp(arg, "none") == 0)
            o->network = SP_NET_NONE;
        else if (strcmp(arg, "default") == 0)
            o->network = SP_NET_DEFAULT;
        else if (strcmp(arg, "host") == 0)
            o->network = SP_NET_HOST;
        else {
            cli_usage(cmd, "--network must be none, default or host: '%s'", arg);
            return -1;
        }
        return 1;
    case CLI_OPT_MEMORY:
        if (cli_parse_bytes(cmd, "--memory", arg, &v) < 0)
            return -1;
        o->memory_bytes = v;
        return 1;
    case CLI_OPT_CPUS:
        return parse_cpus(cmd, arg, &o->nano_cpus) < 0 ? -1 : 1;
    case CLI_OPT_PIDS:
        if (cli_parse_ll(cmd, "--pids", arg, 1, INT64_MAX, &ll) < 0)
            return -1;
        o->pids_limit = ll;
        return 1;
    case CLI_OPT_TMPFS_SIZE:
        if (cli_parse_bytes(cmd, "--tmpfs-size", arg, &v) < 0)
            return -1;
        o->tmpfs_bytes = v;
        return 1;
    case CLI_OPT_RW_ROOT:
        o->writable_root = true;
        return 1;
    case CLI_OPT_SETUP:
        c->setup[c->n_setup++] = arg;
        return 1;
    case CLI_OPT_SETUP_NETWORK:
        o->setup_network = true;
        return 1;
    case CLI_OPT_SETUP_TIMEOUT:
        if (cli_parse_ll(cmd, "--setup-timeout", arg, 1, INT_MAX / 1000, &ll) < 0)
            return -1;
        o->setup_timeout_ms = (int)ll * 1000;
        return 1;
    case CLI_OPT_CAP_ADD:
        c->caps[c->n_caps++] = arg;
        return 1;
    case CLI_OPT_USERNS:
        if (strcmp(arg, "private") == 0)
            o->userns = SP_USERNS_PRIVATE;
        else if (strcmp(arg, "host") == 0)
            o->userns = SP_USERNS_HOST;
        else {
            cli_usage(cmd, "--userns must be private or host: '%s'", arg);
            return -1;
        }
        return 1;
    case CLI_OPT_SECCOMP:
        if (strcmp(arg, "sandpod") == 0)
            o->seccomp = SP_SECCOMP_SANDPOD;
        else if (strcmp(arg, "podman") == 0)
            o->seccomp = SP_SECCOMP_ENGINE;
        else if (strcmp(arg, "unconfined") == 0)
            o->seccomp = SP_SECCOMP_UNCONFINED;
        else {
            cli_usage(cmd, "--seccomp must be sandpod, podman or unconfined: '%s'", arg);
            return -1;
        }
        return 1;
    case CLI_OPT_PULL:
        if (strcmp(arg, "missing") == 0)
            o->pull = SP_PULL_MISSING;
        else if (strcmp(arg, "always") == 0)
            o->pull = SP_PULL_ALWAYS;
        else if (strcmp(arg, "never") == 0)
            o->pull = SP_PULL_NEVER;
        else {
            cli_usage(cmd, "--pull must be missing, always or never: '%s'", arg);
            return -1;
        }
        return 1;
    case CLI_OPT_TLS_VERIFY:
        if (strcmp(arg, "true") != 0 && strcmp(arg, "false") != 0) {
            cli_usage(cmd, "--tls-verify must be true or false: '%s'", arg);
            return -1;
        }
        o->pull_no_tls_verify = strcmp(arg, "false") == 0;
        return 1;
    default:
        return 0;
    }
}

/* A setup command's output, on stderr: stdout stays the sandbox's name,
 * its JSON, or a protocol. */
static void setup_done(void *ud, size_t i, const char *cmd, const struct sp_run_result *r)
{
    const struct cli_create *c = ud;
    cli_progress_end(true); /* hydration is over: its line goes first */
    fprintf(stderr, "sandpod: setup %zu/%zu: %s (exit %d%s, %.1f s)\n", i + 1, c->n_setup, cmd,
            r->exit_code, r->timed_out ? ", timed out" : "", (double)r->duration_ms / 1000.0);
    fwrite(r->out, 1, r->out_len, stderr);
    fwrite(r->err, 1, r->err_len, stderr);
    if (r->out_truncated || r->err_truncated)
        fputs("sandpod: (setup output shortened: its head and tail are shown)\n", stderr);
    fflush(stderr);
}

/* The paths every mount's hydration left out (`left`) or rewrote, from
 * the sandbox's record. */
static const char *const *secrets_of(const sp_sandbox_mount *m, bool left)
{
    return left ? m->secrets_left_out : m->secrets_rewritten;
}

/* One line on stderr for each list that is not empty: the user must see
 * what did not reach the workspace as it is on the host. */
static void print_secrets(const sp_sandbox *sb)
{
    size_t n = 0;
    const sp_sandbox_mount *m = sp_sandbox_mounts(sb, &n);
    static const char *const what[] = {
        "left out of the workspace as holding credentials (secrets=keep on the mount copies "
        "them)",
        "copied without their credentials"};
    for (int l = 0; l < 2; l++) {
        bool any = false;
        for (size_t i = 0; i < n; i++) {
            for (const char *const *p = secrets_of(&m[i], l == 0); p && *p; p++) {
                fputs(any ? ", " : "sandpod: ", stderr);
                if (!any)
                    fprintf(stderr, "%s: ", what[l]);
                cli_put_name(stderr, *p);
                any = true;
            }
        }
        if (any)
            fputc('\n', stderr);
    }
}

/* create --json: the sandbox, and what hydration left out or rewrote. */
static int print_created_json(sp_sandbox *sb)
{
    sp_sandbox_status *st = NULL;
    if (sp_sandbox_status_get(&st, sb, NULL) < 0)
        st = NULL;
    cJSON *o = sp_json_sandbox(sb, st, false);
    sp_sandbox_status_free(st);
    size_t n = 0;
    const sp_sandbox_mount *m = sp_sandbox_mounts(sb, &n);
    static const char *const keys[] = {"secrets_left_out", "secrets_rewritten"};
    for (int l = 0; o && l < 2; l++) {
        cJSON *a = cJSON_AddArrayToObject(o, keys[l]);
        for (size_t i = 0; a && i < n; i++)
            for (const char *const *p = secrets_of(&m[i], l == 0); p && *p; p++)
                cJSON_AddItemToArray(a, sp_json_string(*p));
    }
    return cli_print_result(o);
}

sp_sandbox_opts cli_create_opts(const struct cli_create *c)
{
    sp_sandbox_opts o = c->opts;
    o.state_root = c->conn.state_root;
    o.podman_url = c->conn.url;
    o.mounts = c->n_mounts ? c->mounts : NULL;
    o.n_mounts = c->n_mounts;
    o.allowed_roots = c->n_roots ? c->roots : NULL;
    o.env = c->n_env ? c->env : NULL;
    o.cap_add = c->n_caps ? c->caps : NULL;
    o.env_pass = c->n_pass ? c->pass : NULL;
    o.setup = c->n_setup ? c->setup : NULL;
    return o;
}

int cli_create_sandbox(sp_sandbox **out, struct cli_create *c, sp_error **err)
{
    sp_sandbox_opts o = cli_create_opts(c);
    if (c->n_setup) {
        o.setup_done = setup_done;
        o.setup_userdata = c;
    }
    if (o.setup_network && !c->n_setup)
        fputs("sandpod: warning: --setup-network without --setup does nothing\n", stderr);
    if (c->tmpl) {
        o.setup_done = c->n_setup ? setup_done : NULL;
        int r = sp_sandbox_create_from_template(out, c->tmpl, &o, err);
        for (const char *const *w = r == 0 ? sp_sandbox_warnings(*out) : NULL; w && *w; w++)
            fprintf(stderr, "sandpod: warning: %s\n", *w);
        return r;
    }
    if (c->from) {
        /* NAME or NAME:SNAP (a sandbox name has no ':'). */
        char *origin = strdup(c->from);
        if (!origin)
            return cli_error("out of memory");
        char *colon = strchr(origin, ':');
        if (colon)
            *colon = '\0';
        int r = cli_fork_sandbox(out, c, origin, colon && colon[1] ? colon + 1 : NULL, err);
        free(origin);
        return r;
    }
    if (o.userns == SP_USERNS_HOST)
        fputs("sandpod: warning: --userns host: the workload's uids are host uids (its uid 1000 "
              "is the host account with uid 1000)\n",
              stderr);
    if (o.seccomp != SP_SECCOMP_SANDPOD)
        fputs("sandpod: warning: --seccomp: the workload may use keyctl and make user "
              "namespaces\n",
              stderr);
    if (c->n_mounts && !o.progress)
        o.progress = cli_progress_hydrate;
    o.pull_progress = cli_progress_pull;
    cli_progress_begin(c->n_mounts ? "hydrated" : "pulled", c->json);
    int rc = sp_sandbox_create(out, &o, err);
    cli_progress_end(rc == 0);
    /* What Podman (or sandpod) warned about: limits it dropped, a profile
     * that could not be made. */
    for (const char *const *w = rc == 0 ? sp_sandbox_warnings(*out) : NULL; w && *w; w++)
        fprintf(stderr, "sandpod: warning: %s\n", *w);
    if (rc == 0 && !c->json)
        print_secrets(*out);
    return rc;
}

/* ----------------------------------------------------------- the command -- */

const struct cli_spec cli_spec_create = {
    .name = "create",
    .fn = cmd_create,
    .summary = "Create a sandbox around a workspace hydrated from host folders",
    .usage = CLI_USAGE("[OPTIONS]"),
    .description =
        "Create a sandbox: a workspace folder, hydrated from the --mount folders, and a\n"
        "hardened Podman container that sees it at /workspace (no network, all\n"
        "capabilities dropped, read-only root, limits on memory, CPU and processes).\n"
        "The container is started; the sandbox's name is printed.",
    .groups = CLI_GROUPS(&cli_group_create, &cli_group_conn,
                         CLI_OWN(CLI_VALUE("from", 0, "NAME[:SNAP]", 'F', CLI_COMP_SANDBOX,
                                           "fork sandbox NAME at snapshot SNAP (default: its "
                                           "newest), as `sandpod fork`; the options given here "
                                           "replace NAME's configuration; no --mount"),
                                 CLI_VALUE("template", 0, "TEMPLATE", 'T', CLI_COMP_NONE,
                                           "start from template TEMPLATE (`sandpod template`): its "
                                           "workspace, configuration and image, its setup not run "
                                           "again; the options given here replace its "
                                           "configuration; no --mount"),
                                 CLI_FLAG("json", 0, 'j',
                                          "print {ok, name, state, container, image, created_at, "
                                          "workspace, state_dir, secrets_left_out, "
                                          "secrets_rewritten}"))),
    .notes = "Hydration progress is one line on stderr, redrawn when it is a terminal\n"
             "(percent, rate, ETA); otherwise one summary line at the end (none with --json).\n"
             "Files a mount left out or rewrote because they hold credentials are listed\n"
             "on stderr (in the JSON with --json) and by `sandpod inspect`.",
    .exit_status = "0 ok, 1 error, 2 bad usage.",
};

int cmd_create(int argc, char **argv)
{
    struct cli_create c;
    int rc = cli_create_init(&c, argc);
    if (rc)
        return rc;
    bool json = false;
    sp_sandbox *sb = NULL;
    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_create, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (opt == CLI_GETOPT_HELP)
            goto done;
        if (opt == 'j') {
            json = true;
            continue;
        }
        if (opt == 'F') {
            c.from = optarg;
            continue;
        }
        if (opt == 'T') {
            c.tmpl = optarg;
            continue;
        }
        int took = cli_create_option(&c, "create", opt, optarg);
        if (took < 0) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
    }
    if (optind < argc) {
        rc = cli_usage("create", "unexpected argument '%s'", argv[optind]);
        goto done;
    }

    if (c.tmpl && (c.from || c.n_mounts)) {
        rc = cli_usage("create", "--template does not go with %s: the workspace is the template's",
                       c.from ? "--from" : "--mount");
        goto done;
    }
    if (c.from && c.n_mounts) {
        rc = cli_usage("create", "--from and --mount do not go together: a fork's workspace is "
                                 "the snapshot");
        goto done;
    }
    sp_error *err = NULL;
    c.json = json;
    int r = cli_create_sandbox(&sb, &c, &err);
    if (r < 0) {
        rc = cli_fail(json, r, err);
        goto done;
    }
    rc = json ? print_created_json(sb) : cli_print_created(sb, false);

done:
    sp_sandbox_free(sb);
    cli_create_dispose(&c);
    return rc;
}
