/* Making a sandbox from the command line: create's options (which `run`,
 * `fork` and `create --from` take too), the sandbox made from them (a
 * fresh one or a fork), and what is printed once it exists. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "fs_json.h"
#include "sandbox_json.h"

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
    c->allow = calloc(n, sizeof(*c->allow));
    c->deny = calloc(n, sizeof(*c->deny));
    c->setup_allow = calloc(n, sizeof(*c->setup_allow));
    c->secret = calloc(n, sizeof(*c->secret));
    c->secret_for = calloc(n, sizeof(*c->secret_for));
    c->secret_in = calloc(n, sizeof(*c->secret_in));
    if (!c->parsed || !c->mounts || !c->roots || !c->env || !c->caps || !c->pass || !c->setup ||
        !c->allow || !c->deny || !c->setup_allow || !c->secret || !c->secret_for || !c->secret_in) {
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
    free(c->allow);
    free(c->deny);
    free(c->setup_allow);
    free(c->secret);
    free(c->secret_for);
    free(c->secret_in);
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
    case CLI_OPT_ALLOW:
    case CLI_OPT_DENY:
    case CLI_OPT_SETUP_ALLOW: {
        sp_error *e = NULL;
        if (sp_egress_rule_check(arg, opt != CLI_OPT_DENY, &e) < 0) {
            cli_usage(cmd, "%s", e->message);
            sp_error_free(e);
            return -1;
        }
        if (opt == CLI_OPT_ALLOW)
            c->allow[c->n_allow++] = arg;
        else if (opt == CLI_OPT_DENY)
            c->deny[c->n_deny++] = arg;
        else
            c->setup_allow[c->n_setup_allow++] = arg;
        return 1;
    }
    case CLI_OPT_EGRESS_HOSTS:
        o->egress_hosts = arg;
        return 1;
    case CLI_OPT_EGRESS_CA:
        o->egress_ca = arg;
        return 1;
    case CLI_OPT_SECRET:
        c->secret[c->n_secret++] = arg;
        return 1;
    case CLI_OPT_SECRET_FOR:
        c->secret_for[c->n_secret_for++] = arg;
        return 1;
    case CLI_OPT_SECRET_IN:
        c->secret_in[c->n_secret_in++] = arg;
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
    o.allow = c->n_allow ? c->allow : NULL;
    o.deny = c->n_deny ? c->deny : NULL;
    o.setup_allow = c->n_setup_allow ? c->setup_allow : NULL;
    o.secrets = c->n_secret ? c->secret : NULL;
    o.secret_for = c->n_secret_for ? c->secret_for : NULL;
    o.secret_in = c->n_secret_in ? c->secret_in : NULL;
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

int cli_fork_sandbox(sp_sandbox **out, struct cli_create *c, const char *origin, const char *snap,
                     sp_error **err)
{
    *out = NULL;
    sp_sandbox_opts so = cli_conn_sandbox_opts(&c->conn);
    sp_sandbox *from = NULL;
    int r = sp_sandbox_open(&from, origin, &so, err);
    if (r < 0)
        return r;
    sp_sandbox_opts o = c->opts;
    o.state_root = c->conn.state_root;
    o.podman_url = c->conn.url;
    o.env = c->n_env ? c->env : NULL;
    o.cap_add = c->n_caps ? c->caps : NULL;
    o.env_pass = c->n_pass ? c->pass : NULL;
    o.allow = c->n_allow ? c->allow : NULL;
    o.deny = c->n_deny ? c->deny : NULL;
    o.secrets = c->n_secret ? c->secret : NULL;
    o.secret_for = c->n_secret_for ? c->secret_for : NULL;
    o.secret_in = c->n_secret_in ? c->secret_in : NULL;
    r = sp_sandbox_fork(out, from, snap, &o, err);
    sp_sandbox_free(from);
    for (const char *const *w = r == 0 ? sp_sandbox_warnings(*out) : NULL; w && *w; w++)
        fprintf(stderr, "sandpod: warning: %s\n", *w);
    return r;
}

int cli_print_created(sp_sandbox *sb, bool json)
{
    if (!json) {
        printf("%s\n", sp_sandbox_name(sb));
        return 0;
    }
    return print_created_json(sb);
}
