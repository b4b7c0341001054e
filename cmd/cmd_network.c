/* sandpod network: a sandbox's egress policy shown and changed while it
 * runs, and its proxy's connection log. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "base.h"
#include "fs_json.h"
#include "json.h"

enum { OPT_REMOVE = 256, OPT_LOG };

const struct cli_spec cli_spec_network = {
    .name = "network",
    .fn = cmd_network,
    .summary = "Show or change a sandbox's egress rules, or its connection log",
    .usage = CLI_USAGE("[OPTIONS] NAME"),
    .description =
        "Without options, show sandbox NAME's egress policy: the rules its proxy decides by\n"
        "(`create --allow/--deny`), deny rules first. --allow, --deny and --remove change them\n"
        "while it runs, with no restart: the proxy reads them within 100 ms and cuts the open\n"
        "connections they no longer allow. --log shows one line per connection the proxy\n"
        "saw (when it ended): time, verdict, host:port, the address, bytes each way, and why.",
    .groups = CLI_GROUPS(
        CLI_OWN(CLI_VALUE("allow", 0, "RULE", CLI_OPT_ALLOW, CLI_COMP_NONE,
                          "add an allow rule (repeatable; the forms of `create --allow`)"),
                CLI_VALUE("deny", 0, "RULE", CLI_OPT_DENY, CLI_COMP_NONE,
                          "add a deny rule (repeatable)"),
                CLI_VALUE("remove", 0, "RULE", OPT_REMOVE, CLI_COMP_NONE,
                          "remove a rule, as written (repeatable)"),
                CLI_FLAG("log", 0, OPT_LOG, "show the connection log instead"),
                CLI_FLAG("follow", 'f', 'f',
                         "with --log: keep printing connections as they end (until ^C)"),
                CLI_FLAG("json", 0, 'j',
                         "the policy as {name, policy: [{verdict, rule}] or null}; with --log, "
                         "the log's own JSON lines")),
        &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME", CLI_COMP_SANDBOX, NULL}),
    .exit_status = "0 ok, 1 error (no such sandbox, no policy, a rule it does not have), 2 bad "
                   "usage (a malformed rule).",
};

static int show_policy(sp_sandbox *sb, bool json)
{
    char **rules = NULL;
    sp_error *err = NULL;
    int r = sp_sandbox_egress(&rules, sb, &err);
    if (r < 0)
        return cli_fail(json, r, err);
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", sp_sandbox_name(sb));
        if (!rules) {
            cJSON_AddNullToObject(o, "policy");
        } else {
            cJSON *a = cJSON_AddArrayToObject(o, "policy");
            for (char **l = rules; *l; l++) {
                cJSON *e = cJSON_CreateObject();
                const char *sp = strchr(*l, ' ');
                cJSON_AddItemToObject(e, "verdict", sp_json_string_n(*l, (size_t)(sp - *l)));
                cJSON_AddStringToObject(e, "rule", sp + 1);
                cJSON_AddItemToArray(a, e);
            }
        }
        sp_strv_free(rules);
        return cli_print_result(o);
    }
    if (!rules) {
        printf("sandbox %s has no egress policy: its network is its --network mode\n",
               sp_sandbox_name(sb));
        return 0;
    }
    if (!rules[0])
        printf("no rules: every connection is refused\n");
    for (char **l = rules; *l; l++)
        printf("%s\n", *l);
    sp_strv_free(rules);
    return 0;
}

/* The record's time (RFC 3339, UTC, milliseconds) in local time, to the
 * millisecond: connections come faster than a minute apart. */
static void local_ms(char *buf, size_t size, const char *t)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *end = strptime(t, "%Y-%m-%dT%H:%M:%S", &tm);
    int ms = 0;
    if (end && *end == '.' && end[1] >= '0' && end[1] <= '9' && end[2] >= '0' && end[2] <= '9' &&
        end[3] >= '0' && end[3] <= '9') {
        ms = (end[1] - '0') * 100 + (end[2] - '0') * 10 + (end[3] - '0');
        end += 4;
    }
    time_t secs = end && *end == 'Z' ? timegm(&tm) : (time_t)-1;
    struct tm lt;
    char day[40];
    if (secs == (time_t)-1 || !localtime_r(&secs, &lt) ||
        strftime(day, sizeof(day), "%Y-%m-%d %H:%M:%S", &lt) == 0) {
        snprintf(buf, size, "%s", t);
        return;
    }
    snprintf(buf, size, "%s.%03d", day, ms);
}

/* One log line as a person reads it. */
static void print_record(const char *line, bool json)
{
    if (json) {
        printf("%s\n", line);
        return;
    }
    cJSON *o = cJSON_Parse(line);
    if (!o) {
        printf("%s\n", line);
        return;
    }
    char when[64];
    local_ms(when, sizeof(when), sp_json_str_or(o, "time", ""));
    const char *addr = sp_json_str_or(o, "addr", "");
    printf("%s  %-5s %-7s %s:%lld%s%s%s  up %lld down %lld  %s\n", when,
           sp_json_str_or(o, "verdict", "?"), sp_json_str_or(o, "proto", "?"),
           sp_json_str_or(o, "host", ""), (long long)sp_json_int(o, "port", 0), *addr ? " (" : "",
           addr, *addr ? ")" : "", (long long)sp_json_int(o, "up", 0),
           (long long)sp_json_int(o, "down", 0), sp_json_str_or(o, "why", ""));
    cJSON_Delete(o);
}

static int show_log(sp_sandbox *sb, bool json, bool follow)
{
    int fd = -1;
    sp_error *err = NULL;
    int r = sp_sandbox_egress_log(&fd, sb, &err);
    if (r == SP_ENOTFOUND && follow) {
        /* No connection yet: wait for the first. */
        sp_error_free(err);
        err = NULL;
        while ((r = sp_sandbox_egress_log(&fd, sb, &err)) == SP_ENOTFOUND) {
            sp_error_free(err);
            err = NULL;
            struct timespec ts = {0, 200 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    if (r < 0)
        return cli_fail(json, r, err);
    sp_buf pending = SP_BUF_INIT;
    char chunk[65536];
    off_t seen = 0; /* bytes of the log read so far */
    for (unsigned idle = 0;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            r = cli_error("read the connection log of %s: %s", sp_sandbox_name(sb),
                          strerror(errno));
            break;
        }
        if (n == 0) {
            if (!follow) {
                r = 0;
                break;
            }
            fflush(stdout);
            struct timespec ts = {0, 100 * 1000000L};
            nanosleep(&ts, NULL);
            /* Once a second the log is opened anew, past what was read: a
             * remote sandbox's is a copy fetched whole, which never grows. */
            int nfd = -1;
            if (++idle % 10 == 0 && sp_sandbox_egress_log(&nfd, sb, NULL) == 0) {
                if (lseek(nfd, seen, SEEK_SET) == seen) {
                    close(fd);
                    fd = nfd;
                } else {
                    close(nfd);
                }
            }
            continue;
        }
        idle = 0;
        seen += n;
        sp_buf_add(&pending, chunk, (size_t)n);
        char *start = pending.data, *nl;
        while ((nl = memchr(start, '\n', pending.len - (size_t)(start - pending.data)))) {
            *nl = '\0';
            print_record(start, json);
            start = nl + 1;
        }
        size_t rest = pending.len - (size_t)(start - pending.data);
        memmove(pending.data, start, rest);
        pending.len = rest;
        if (follow)
            fflush(stdout);
    }
    sp_buf_dispose(&pending);
    close(fd);
    return r;
}

int cmd_network(int argc, char **argv)
{
    struct cli_conn conn = {0};
    sp_sandbox *sb = NULL;
    size_t n = (size_t)argc + 1;
    const char **allow = calloc(n, sizeof(*allow)), **deny = calloc(n, sizeof(*deny)),
               **remove = calloc(n, sizeof(*remove));
    size_t na = 0, nd = 0, nr = 0;
    bool json = false, log = false, follow = false;
    int rc = 0;
    if (!allow || !deny || !remove) {
        rc = cli_error("out of memory");
        goto done;
    }
    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_network, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        int took = cli_conn_option(&conn, "network", opt, optarg);
        if (took < 0 || opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        sp_error *e = NULL;
        switch (opt) {
        case CLI_OPT_ALLOW:
        case CLI_OPT_DENY:
            if (sp_egress_rule_check(optarg, opt == CLI_OPT_ALLOW, &e) < 0) {
                rc = cli_usage("network", "%s", e->message);
                sp_error_free(e);
                goto done;
            }
            if (opt == CLI_OPT_ALLOW)
                allow[na++] = optarg;
            else
                deny[nd++] = optarg;
            break;
        case OPT_REMOVE:
            remove[nr++] = optarg;
            break;
        case OPT_LOG:
            log = true;
            break;
        case 'f':
            follow = true;
            break;
        case 'j':
            json = true;
            break;
        default:
            rc = CLI_EXIT_USAGE;
            goto done;
        }
    }
    if (optind >= argc) {
        rc = cli_usage("network", "missing sandbox NAME");
        goto done;
    }
    if (argc - optind > 1) {
        rc = cli_usage("network", "unexpected argument '%s'", argv[optind + 1]);
        goto done;
    }
    bool change = na || nd || nr;
    if (log && change) {
        rc = cli_usage("network", "--log shows the log: change the rules in another call");
        goto done;
    }
    if (follow && !log) {
        rc = cli_usage("network", "--follow goes with --log");
        goto done;
    }
    if ((rc = cli_sandbox_open(&sb, argv[optind], &conn, json)) != 0)
        goto done;
    if (log) {
        rc = show_log(sb, json, follow);
        goto done;
    }
    if (change) {
        sp_egress_change_opts ch = SP_EGRESS_CHANGE_OPTS_INIT;
        ch.allow = na ? allow : NULL;
        ch.deny = nd ? deny : NULL;
        ch.remove = nr ? remove : NULL;
        sp_error *err = NULL;
        int r = sp_sandbox_egress_change(sb, &ch, &err);
        if (r < 0) {
            rc = cli_fail(json, r, err);
            goto done;
        }
    }
    rc = show_policy(sb, json);
done:
    free(allow);
    free(deny);
    free(remove);
    sp_sandbox_free(sb);
    cli_conn_dispose(&conn);
    return rc;
}
