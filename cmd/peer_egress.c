/* sandpod peer egress-serve | egress-policy | egress-log: the proxy Pod's
 * side of a Kubernetes sandbox's egress policy.
 *
 * The proxy Pod runs `egress-serve`, which writes the policy the client
 * rendered (from its environment: the rules are not secret, and a Pod's
 * spec is where they are seen) and becomes sandpod-agent's proxy, taking
 * TCP connections on PORT. The client changes the policy with
 * `egress-policy` through pods/exec (the text on stdin; back once the
 * proxy has it in force) and reads the connection log with `egress-log`.
 * The folders are those of egress_dir.h; the Pod keeps them in an
 * emptyDir, which outlives a restart of the container. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "cli.h"
#include "egress_dir.h"
#include "egress_policy.h"
#include "peer_egress.h"
#include "render.h"

#define POLICY_ENV "SANDPOD_EGRESS_POLICY"
#define HOSTS_ENV  "SANDPOD_EGRESS_HOSTS"

static int mkdirs(const char *a, const char *b)
{
    const char *d[] = {a, b};
    for (int i = 0; i < 2; i++)
        if (mkdir(d[i], 0755) < 0 && errno != EEXIST)
            return cli_error("mkdir %s: %s", d[i], strerror(errno));
    return 0;
}

/* A policy is checked whole before it is written: a bad one changes
 * nothing (the proxy would keep the old, but the file is what a restart
 * reads). It must carry a version, which the wait compares. */
static int check_policy(const char *text, size_t len)
{
    sp_egress_policy p = SP_EGRESS_POLICY_INIT;
    sp_error *err = NULL;
    char version[64];
    int r = sp_egress_policy_parse(&p, text, len, version, sizeof(version), &err);
    sp_egress_policy_dispose(&p);
    if (r == 0 && !version[0])
        r = sp_err_set(&err, SP_EINVAL, 0, "the policy has no \"# version\" line");
    return r < 0 ? cli_fail(false, r, err) : 0;
}

static int serve(const char *dir, const char *run, const char *port)
{
    const char *policy = getenv(POLICY_ENV), *hosts = getenv(HOSTS_ENV);
    char *end = NULL;
    unsigned long p = strtoul(port, &end, 10);
    if (!*port || *end || p == 0 || p > 65535)
        return cli_usage("peer", "egress-serve: not a port: '%s'", port);
    if (!policy || !*policy)
        return cli_error("egress-serve: $%s holds no policy", POLICY_ENV);
    int rc = check_policy(policy, strlen(policy));
    if (rc == 0)
        rc = mkdirs(dir, run);
    if (rc)
        return rc;
    sp_error *err = NULL;
    if (sp_egress_dir_write(dir, policy, strlen(policy), hosts ? hosts : "",
                            hosts ? strlen(hosts) : 0, &err) < 0)
        return cli_fail(false, SP_ERROR, err);
    char *agent = peer_agent_source();
    if (!agent)
        return cli_error("cannot tell where sandpod-agent is: set SANDPOD_AGENT");
    char *argv[] = {agent,      "--egress-proxy", (char *)dir, (char *)run,
                    "--listen", (char *)port,     NULL};
    execv(agent, argv);
    rc = cli_error("egress-serve: cannot run %s: %s", agent, strerror(errno));
    free(agent);
    return rc;
}

static int set_policy(const char *dir, const char *run)
{
    sp_buf text = SP_BUF_INIT;
    if (sp_read_all(0, &text, 1u << 20) < 0) {
        sp_buf_dispose(&text);
        return cli_error("egress-policy: reading the policy from stdin: %s", strerror(errno));
    }
    int r = check_policy(text.data ? text.data : "", text.len);
    if (r) {
        sp_buf_dispose(&text);
        return r;
    }
    sp_error *err = NULL;
    r = sp_egress_dir_write(dir, text.data ? text.data : "", text.len, NULL, 0, &err);
    sp_buf_dispose(&text);
    if (r == 0)
        r = sp_egress_wait_loaded(dir, run, 3000, &err);
    return r < 0 ? cli_fail(false, r, err) : 0;
}

static int show_log(const char *run)
{
    int fd = -1;
    sp_error *err = NULL;
    int r = sp_egress_log_open(&fd, run, &err);
    if (r == SP_ENOTFOUND) {
        sp_error_free(err);
        return SP_KUBE_EGRESS_NO_LOG;
    }
    if (r < 0)
        return cli_fail(false, r, err);
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
        if (n > 0 && sp_write_all(1, buf, (size_t)n) < 0) {
            n = -1;
            break;
        }
    int e = errno;
    close(fd);
    return n < 0 ? cli_error("egress-log: %s", strerror(e)) : 0;
}

int peer_egress(const char *op, int argc, char **argv)
{
    if (strcmp(op, "egress-serve") == 0) {
        if (argc != 3)
            return cli_usage("peer", "egress-serve takes POLICY-DIR RUN-DIR PORT");
        return serve(argv[0], argv[1], argv[2]);
    }
    if (strcmp(op, "egress-policy") == 0) {
        if (argc != 2)
            return cli_usage("peer", "egress-policy takes POLICY-DIR RUN-DIR");
        return set_policy(argv[0], argv[1]);
    }
    if (argc != 1)
        return cli_usage("peer", "egress-log takes RUN-DIR");
    return show_log(argv[0]);
}
