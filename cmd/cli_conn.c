/* What every sandbox command shares to reach its sandbox: --state-root and
 * --url, the options and handles they make, and the one way a library
 * error is printed. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

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
