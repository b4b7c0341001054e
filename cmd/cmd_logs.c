/* sandpod logs: what a sandbox's container printed (its main process, the
 * agent), running or stopped, optionally followed as it comes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fs_json.h"

enum { OPT_SINCE = 256 };

const struct cli_spec cli_spec_logs = {
    .name = "logs",
    .fn = cmd_logs,
    .summary = "Show what a sandbox's container printed (-f to follow)",
    .usage = CLI_USAGE("[OPTIONS] NAME"),
    .description = "Show what sandbox NAME's container printed: its main process, the agent (when\n"
                   "it was ready, when it stopped). A stopped sandbox still has its logs. Output\n"
                   "of commands run with exec, sh or run is theirs, not the container's.",
    .groups = CLI_GROUPS(
        CLI_OWN(CLI_FLAG("follow", 'f', 'f',
                         "keep printing as the container logs, until it stops (or ^C)"),
                CLI_VALUE("tail", 'n', "N", 'n', CLI_COMP_NONE, "only the last N lines"),
                CLI_VALUE("since", 0, "TIME", OPT_SINCE, CLI_COMP_NONE,
                          "only what came after TIME: RFC 3339 (2024-05-01T10:00:00Z), Unix "
                          "seconds, or a duration ago (90s, 10m, 2h, 1h30m)"),
                CLI_FLAG("timestamps", 't', 't', "prefix each line with the time it was logged"),
                CLI_FLAG("json", 0, 'j',
                         "one JSON object per line: {stream, text} (and time with "
                         "--timestamps); stderr lines are stream \"stderr\"")),
        &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME", CLI_COMP_SANDBOX, NULL}),
    .exit_status = "0 ok, 1 error (no such sandbox, Podman unreachable), 2 bad usage.",
};

/* A duration ago ("90s", "10m", "1h30m") as Unix seconds; false when s is
 * not one (then it is passed on as a time). */
static bool duration_ago(const char *s, char *out, size_t cap)
{
    long long total = 0;
    const char *p = s;
    if (!*p)
        return false;
    while (*p) {
        if (*p < '0' || *p > '9')
            return false;
        long long v = 0;
        while (*p >= '0' && *p <= '9') {
            v = v * 10 + (*p++ - '0');
            if (v > 100LL * 365 * 86400)
                return false;
        }
        long long unit = *p == 's' ? 1 : *p == 'm' ? 60 : *p == 'h' ? 3600 : *p == 'd' ? 86400 : 0;
        if (!unit)
            return false;
        p++;
        total += v * unit;
    }
    snprintf(out, cap, "%lld", (long long)time(NULL) - total);
    return true;
}

/* An RFC 3339 time as Podman and the Kubernetes API take it:
 * 2024-05-01T10:00:00Z, with optional fraction and a Z or +HH:MM offset. */
static bool rfc3339(const char *s)
{
    struct tm tm = {0};
    const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!p || p - s != 19)
        return false;
    if (*p == '.') {
        const char *d = ++p;
        while (*p >= '0' && *p <= '9')
            p++;
        if (p == d)
            return false;
    }
    if (*p == 'Z')
        return p[1] == '\0';
    return (*p == '+' || *p == '-') && strlen(p) == 6 && p[1] >= '0' && p[1] <= '2' &&
           p[2] >= '0' && p[2] <= '9' && p[3] == ':' && p[4] >= '0' && p[4] <= '5' && p[5] >= '0' &&
           p[5] <= '9';
}

/* --since TIME as sp_logs_opts takes it (RFC 3339 or Unix seconds, out);
 * false when TIME is none of the forms --help names. */
static bool parse_since(const char *s, char *out, size_t cap)
{
    if (duration_ago(s, out, cap))
        return true;
    if (strlen(s) >= cap)
        return false;
    size_t digits = strspn(s, "0123456789");
    if (digits && !s[digits] && digits <= 12) {
        snprintf(out, cap, "%s", s);
        return true;
    }
    if (!rfc3339(s))
        return false;
    snprintf(out, cap, "%s", s);
    return true;
}

/* JSON mode: the line so far of each stream. */
struct line {
    char *data;
    size_t len, cap;
};

struct sink {
    bool json;
    bool timestamps;
    bool broken; /* stdout went away */
    struct line line[3];
};

static int put_json_line(struct sink *k, int stream, const char *text, size_t len)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return SP_ERROR;
    cJSON_AddStringToObject(o, "stream", stream == SP_EXEC_STDERR ? "stderr" : "stdout");
    const char *sp = k->timestamps ? memchr(text, ' ', len) : NULL;
    char *t = NULL;
    if (sp) {
        t = strndup(text, (size_t)(sp - text));
        if (t)
            cJSON_AddStringToObject(o, "time", t);
        free(t);
        len -= (size_t)(sp + 1 - text);
        text = sp + 1;
    }
    cJSON_AddItemToObject(o, "text", sp_json_string_n(text, len));
    char *out = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!out)
        return SP_ERROR;
    int r = printf("%s\n", out) < 0 ? SP_ERROR : 0;
    free(out);
    return r;
}

static int on_log(int stream, const char *data, size_t len, void *ud)
{
    struct sink *k = ud;
    if (!k->json) {
        FILE *f = stream == SP_EXEC_STDERR ? stderr : stdout;
        if (fwrite(data, 1, len, f) != len || fflush(f) != 0) {
            k->broken = true;
            return SP_ERROR;
        }
        return 0;
    }
    struct line *l = &k->line[stream == SP_EXEC_STDERR ? 2 : 1];
    while (len) {
        const char *nl = memchr(data, '\n', len);
        size_t n = nl ? (size_t)(nl - data) : len;
        if (l->len + n + 1 > l->cap) {
            size_t cap = (l->len + n + 1) * 2;
            char *d = realloc(l->data, cap);
            if (!d)
                return SP_ERROR;
            l->data = d;
            l->cap = cap;
        }
        memcpy(l->data + l->len, data, n);
        l->len += n;
        if (!nl)
            break;
        if (put_json_line(k, stream, l->data, l->len) < 0 || fflush(stdout) != 0) {
            k->broken = true;
            return SP_ERROR;
        }
        l->len = 0;
        data += n + 1;
        len -= n + 1;
    }
    return 0;
}

int cmd_logs(int argc, char **argv)
{
    struct cli_conn conn = {0};
    struct sink k = {0};
    sp_logs_opts o = SP_LOGS_OPTS_INIT;
    char since[64];
    sp_sandbox *sb = NULL;
    int rc = 0;

    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_logs, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        int took = cli_conn_option(&conn, "logs", opt, optarg);
        if (took < 0 || opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        long long v = 0;
        switch (opt) {
        case 'f':
            o.follow = true;
            break;
        case 'n':
            if (cli_parse_ll("logs", "--tail", optarg, 0, INT64_MAX, &v) < 0) {
                rc = CLI_EXIT_USAGE;
                goto done;
            }
            o.tail = v;
            break;
        case OPT_SINCE:
            if (!parse_since(optarg, since, sizeof(since))) {
                rc = cli_usage("logs",
                               "--since '%s': not a time (RFC 3339 such as "
                               "2024-05-01T10:00:00Z, Unix seconds, or a duration such as 10m)",
                               optarg);
                goto done;
            }
            o.since = since;
            break;
        case 't':
            o.timestamps = true;
            break;
        case 'j':
            k.json = true;
            break;
        default:
            rc = CLI_EXIT_USAGE;
            goto done;
        }
    }
    k.timestamps = o.timestamps;
    if (optind >= argc) {
        rc = cli_usage("logs", "missing sandbox NAME");
        goto done;
    }
    if (argc - optind > 1) {
        rc = cli_usage("logs", "unexpected argument '%s'", argv[optind + 1]);
        goto done;
    }
    if ((rc = cli_sandbox_open(&sb, argv[optind], &conn, k.json)) != 0)
        goto done;
    /* --json tells the streams apart: refused where the log has one. */
    o.streams_apart = k.json;
    sp_error *err = NULL;
    int r = sp_sandbox_logs(sb, &o, on_log, &k, &err);
    /* A last line without its newline. */
    for (int i = 1; r == 0 && k.json && i < 3; i++)
        if (k.line[i].len && put_json_line(&k, i, k.line[i].data, k.line[i].len) < 0)
            r = SP_ERROR;
    if (k.broken) {
        sp_error_free(err); /* our reader went away: nothing to say to it */
        rc = CLI_EXIT_OK;
    } else if (r < 0) {
        rc = cli_fail(k.json, r, err);
    }

done:
    for (int i = 0; i < 3; i++)
        free(k.line[i].data);
    sp_sandbox_free(sb);
    cli_conn_dispose(&conn);
    return rc;
}
