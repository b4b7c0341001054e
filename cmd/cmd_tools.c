/* sandpod tools: print the tool specs in a client's format.
 *
 * This file also holds what call and mcp share: the options that shape a
 * tools context and the terminal approval prompt. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* ------------------------------------------------------------- shared -- */

int cli_tools_init(struct cli_tools *c, int argc)
{
    memset(c, 0, sizeof(*c));
    c->opts = (sp_tools_opts)SP_TOOLS_OPTS_INIT;
    size_t n = (size_t)argc + 1;
    c->disabled = calloc(n, sizeof(*c->disabled));
    c->deny = calloc(n, sizeof(*c->deny));
    if (!c->disabled || !c->deny) {
        cli_tools_dispose(c);
        return cli_error("out of memory");
    }
    c->opts.disabled = c->disabled;
    c->opts.deny = c->deny;
    return 0;
}

void cli_tools_dispose(struct cli_tools *c)
{
    free(c->disabled);
    free(c->deny);
    memset(c, 0, sizeof(*c));
}

/* A SIZE option (1K, 4M...) into a size_t field: 1 taken, -1 bad. */
static int size_option(size_t *out, const char *cmd, const char *what, const char *arg)
{
    uint64_t v = 0;
    if (cli_parse_bytes(cmd, what, arg, &v) < 0)
        return -1;
    if (v > SIZE_MAX / 2) {
        cli_usage(cmd, "%s is out of range: '%s'", what, arg);
        return -1;
    }
    *out = (size_t)v;
    return 1;
}

int cli_tools_option(struct cli_tools *c, const char *cmd, int opt, const char *arg)
{
    switch (opt) {
    case CLI_OPT_TOOLS_ROOT:
        if (!*arg) {
            cli_usage(cmd, "--root needs a folder");
            return -1;
        }
        c->root = arg;
        return 1;
    case CLI_OPT_TOOLS_STORE:
        c->store = arg;
        c->opts.snapshot_store = arg;
        return 1;
    case CLI_OPT_TOOLS_APPROVAL:
        if (sp_tools_approval_parse(&c->opts.approval, arg) < 0) {
            cli_usage(cmd, "--approval must be never, untrusted or on-request: '%s'", arg);
            return -1;
        }
        return 1;
    case CLI_OPT_TOOLS_FS_MODE:
        if (sp_tools_fs_mode_parse(&c->opts.fs_mode, arg) < 0) {
            cli_usage(cmd, "--fs-mode must be restricted or unrestricted: '%s'", arg);
            return -1;
        }
        return 1;
    case CLI_OPT_TOOLS_DISABLE: {
        bool known = false;
        for (const char *const *n = sp_tools_names(); *n; n++)
            known |= strcmp(*n, arg) == 0;
        if (!known) {
            cli_usage(cmd, "--disable: no tool named '%s' (see 'sandpod tools --list')", arg);
            return -1;
        }
        c->disabled[c->n_disabled++] = arg;
        return 1;
    }
    case CLI_OPT_TOOLS_DENY:
        c->deny[c->n_deny++] = arg;
        return 1;
    case CLI_OPT_TOOLS_READ_ONLY:
        c->opts.read_only = true;
        return 1;
    case CLI_OPT_TOOLS_MAX_READ:
        return size_option(&c->opts.max_read_bytes, cmd, "--max-read-bytes", arg);
    case CLI_OPT_TOOLS_MAX_WRITE:
        return size_option(&c->opts.max_write_bytes, cmd, "--max-write-bytes", arg);
    case CLI_OPT_TOOLS_MAX_OUTPUT:
        return size_option(&c->opts.max_output_bytes, cmd, "--max-output-bytes", arg);
    case CLI_OPT_TOOLS_MAX_TEXT:
        return size_option(&c->opts.max_text_bytes, cmd, "--max-text-bytes", arg);
    case CLI_OPT_TOOLS_TIMEOUT: {
        long long ms = 0;
        if (cli_parse_ll(cmd, "--timeout", arg, 1, INT_MAX, &ms) < 0)
            return -1;
        c->opts.timeout_ms = (unsigned)ms;
        return 1;
    }
    case CLI_OPT_TOOLS_NO_STALE:
        c->opts.no_stale_check = true;
        return 1;
    default:
        return 0;
    }
}

int cli_tools_check(struct cli_tools *c, const char *cmd, bool sandbox)
{
    if (sandbox && c->root)
        return cli_usage(cmd, "give a sandbox or --root DIR, not both");
    if (sandbox && c->store)
        return cli_usage(cmd, "--store is for --root (a sandbox keeps its own store)");
    if (sandbox && c->opts.fs_mode == SP_FS_MODE_UNRESTRICTED)
        return cli_usage(cmd, "--fs-mode unrestricted is only for --root, without a container");
    return 0;
}

sp_tools_verdict cli_tools_prompt(void *userdata, const sp_tools_approval_request *req)
{
    (void)userdata;
    int fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return SP_VERDICT_UNAVAILABLE;
    char q[1024];
    int n =
        snprintf(q, sizeof(q), "sandpod: allow %s (%s tool)? [y]es, [N]o, [a]lways: ", req->summary,
                 sp_tool_tier_name(req->tier));
    if (n > (int)sizeof(q) - 1)
        n = (int)sizeof(q) - 1;
    sp_tools_verdict v = SP_VERDICT_DENY;
    if (n > 0 && write(fd, q, (size_t)n) == n) {
        char a[64];
        ssize_t r;
        do
            r = read(fd, a, sizeof(a) - 1);
        while (r < 0 && errno == EINTR);
        if (r > 0) {
            a[r] = '\0';
            if (a[0] == 'y' || a[0] == 'Y')
                v = SP_VERDICT_ALLOW;
            else if (a[0] == 'a' || a[0] == 'A')
                v = SP_VERDICT_ALLOW_ALWAYS;
        }
    }
    close(fd);
    return v;
}

/* ----------------------------------------------------------- the command -- */

enum { OPT_FORMAT = 'f', OPT_LIST = 'l', OPT_JSON = 'j', OPT_STRICT = 0x3300 };

const struct cli_spec cli_spec_tools = {
    .name = "tools",
    .fn = cmd_tools,
    .summary = "Print the tool specs (OpenAI, Anthropic or MCP format)",
    .usage = CLI_USAGE("[--format FORMAT] [--strict] [--list [--json]] [--root DIR [--store DIR]] "
                       "[--disable TOOL]... [--read-only]"),
    .description = "Print the specs of the model tool suite: name, description and JSON Schema of\n"
                   "each tool, in the format an agent client takes. Without --root, every tool;\n"
                   "with --root DIR, the tools `sandpod mcp --root DIR` offers.",
    .groups = CLI_GROUPS(
        CLI_OWN(CLI_CHOICE("format", 'f', "FORMAT", OPT_FORMAT,
                           "openai|openai-chat|openai-freeform|anthropic|mcp",
                           "openai (Responses function tools, the default), openai-chat (Chat "
                           "Completions: {type: function, function: {name, description, "
                           "parameters}}, as vLLM, Ollama and most compatible servers take), "
                           "openai-freeform (apply_patch as a custom tool with a Lark grammar), "
                           "anthropic ({name, description, input_schema}) or mcp (the tools/list "
                           "result)"),
                CLI_FLAG("strict", 0, OPT_STRICT,
                         "schemas valid under OpenAI's and Anthropic's strict modes: every "
                         "property required, optional ones nullable (null = left out), "
                         "additionalProperties false, limits and defaults in the descriptions"),
                CLI_FLAG("list", 'l', OPT_LIST, "a table for people: name, safety tier, title"),
                CLI_FLAG("json", 0, OPT_JSON,
                         "with --list: print {ok, tools: [{name, tier, title}], count}")),
        &cli_group_tools),
    .exit_status = "0 ok, 1 error, 2 bad usage.",
};

/* The specs as JSON, without the --disable'd tools (a context leaves
 * them out by itself; the list of every tool does not). */
static cJSON *specs_json(const sp_tools *t, sp_tools_format format, bool strict,
                         const struct cli_tools *tc)
{
    sp_tools_specs_opts so = SP_TOOLS_SPECS_OPTS_INIT;
    so.strict = strict;
    char *specs = sp_tools_specs_ex(t, format, &so);
    cJSON *o = specs ? cJSON_Parse(specs) : NULL;
    free(specs);
    cJSON *arr = cJSON_IsArray(o) ? o : cJSON_GetObjectItemCaseSensitive(o, "tools");
    for (size_t i = 0; arr && i < tc->n_disabled; i++) {
        cJSON *it = arr->child;
        while (it) {
            cJSON *next = it->next;
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
            if (!name) /* Chat Completions nest it */
                name = cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(it, "function"), "name");
            if (cJSON_IsString(name) && strcmp(name->valuestring, tc->disabled[i]) == 0)
                cJSON_Delete(cJSON_DetachItemViaPointer(arr, it));
            it = next;
        }
    }
    return o;
}

/* One row per tool: name, safety tier and title; as JSON with `json`. */
static int list(const sp_tools *t, const struct cli_tools *tc, bool json)
{
    cJSON *o = specs_json(t, SP_TOOLS_FORMAT_MCP, false, tc);
    cJSON *out = json ? cJSON_CreateObject() : NULL;
    cJSON *rows = out ? cJSON_AddArrayToObject(out, "tools") : NULL;
    if (!o || (json && !rows)) {
        cJSON_Delete(o);
        cJSON_Delete(out);
        return cli_error("out of memory");
    }
    const cJSON *tool;
    int count = 0;
    cJSON_ArrayForEach(tool, cJSON_GetObjectItemCaseSensitive(o, "tools"))
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(tool, "name");
        const cJSON *title = cJSON_GetObjectItemCaseSensitive(tool, "title");
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(tool, "_meta");
        const cJSON *tr = cJSON_GetObjectItemCaseSensitive(meta, "sandpod/tier");
        const char *tier = cJSON_IsString(tr) ? tr->valuestring : "?";
        const char *ttl = cJSON_IsString(title) ? title->valuestring : "";
        count++;
        if (!json) {
            printf("%-16s %-10s %s\n", name->valuestring, tier, ttl);
            continue;
        }
        cJSON *r = cJSON_CreateObject();
        if (!cJSON_AddItemToArray(rows, r) ||
            !cJSON_AddStringToObject(r, "name", name->valuestring) ||
            !cJSON_AddStringToObject(r, "tier", tier) ||
            !cJSON_AddStringToObject(r, "title", ttl)) {
            cJSON_Delete(o);
            cJSON_Delete(out);
            return cli_error("out of memory");
        }
    }
    cJSON_Delete(o);
    if (!json)
        return CLI_EXIT_OK;
    if (!cJSON_AddNumberToObject(out, "count", count)) {
        cJSON_Delete(out);
        out = NULL;
    }
    return cli_print_result(out);
}

int cmd_tools(int argc, char **argv)
{
    struct cli_tools tc;
    int rc = cli_tools_init(&tc, argc);
    if (rc)
        return rc;
    sp_tools_format format = SP_TOOLS_FORMAT_OPENAI;
    bool as_list = false, json = false, strict = false;
    sp_tools *t = NULL;
    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_tools, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        if (opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        int took = cli_tools_option(&tc, "tools", opt, optarg);
        if (took < 0) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        switch (opt) {
        case OPT_FORMAT:
            if (sp_tools_format_parse(&format, optarg) < 0) {
                rc = cli_usage("tools",
                               "--format must be openai, openai-chat, openai-freeform, anthropic "
                               "or mcp: '%s'",
                               optarg);
                goto done;
            }
            break;
        case OPT_LIST:
            as_list = true;
            break;
        case OPT_STRICT:
            strict = true;
            break;
        case OPT_JSON:
            json = true;
            break;
        default: /* CLI_GETOPT_BAD */
            rc = CLI_EXIT_USAGE;
            goto done;
        }
    }
    if (optind < argc) {
        rc = cli_usage("tools", "unexpected argument '%s'", argv[optind]);
        goto done;
    }
    if (tc.opts.read_only && !tc.root) {
        rc = cli_usage("tools", "--read-only goes with --root");
        goto done;
    }
    if (tc.root) {
        sp_error *err = NULL;
        int r = sp_tools_open_root(&t, tc.root, &tc.opts, &err);
        if (r < 0) {
            rc = cli_fail(json, r, err);
            goto done;
        }
    }
    if (as_list) {
        rc = list(t, &tc, json);
        goto done;
    }
    rc = cli_print_json(specs_json(t, format, strict, &tc));
done:
    sp_tools_free(t);
    cli_tools_dispose(&tc);
    return rc;
}
