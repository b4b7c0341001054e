/* sandpod engine ls | add | rm | default | test: where sandboxes run
 * (sandpod/engine.h); `test` checks what an engine lets sandpod do
 * (cmd_engine_test.c). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd_engine.h"
#include "fs_json.h"
#include "json.h"
#include "sandpod/engine.h"

enum {
    OPT_JSON = 0x3500,
    OPT_KIND,
    OPT_KUBECONFIG,
    OPT_CONTEXT,
    OPT_KUBECTL,
    OPT_SERVER,
    OPT_TOKEN_FILE,
    OPT_CA_FILE,
    OPT_NAMESPACE,
    OPT_IMAGE,
    OPT_RUNTIME_CLASS,
    OPT_SECCOMP_PROFILE,
    OPT_ACCEPT,
    OPT_TTL,
    OPT_REPLACE,
    OPT_DEFAULT,
    OPT_NO_PROBE,
    OPT_TIMEOUT,
};

static int cmd_engine(int argc, char **argv);

const struct cli_spec cli_spec_engine = {
    .name = "engine",
    .fn = cmd_engine,
    .summary = "List, add, remove and test engines (where sandboxes run)",
    .usage =
        CLI_USAGE("ls [--json]",
                  "add NAME --kind kubernetes [--kubeconfig F] [--context C] [--kubectl PATH] "
                  "[--server URL] [--token-file F] [--ca-file F] [--namespace N] [--image REF] "
                  "[--runtime-class R] [--seccomp-profile PATH] [--accept userns,seccomp,netpol] "
                  "[--ttl SECONDS] [--replace] [--default]",
                  "rm NAME", "default NAME", "test NAME [--json] [--no-probe] [--timeout SECONDS]"),
    .description =
        "An engine is where sandboxes run: \"local\" (Podman on this machine, always there,\n"
        "the default) or a Kubernetes cluster, where each sandbox is a Pod (see sandpod\n"
        "render). Engines are kept in STATE_ROOT/engines.json (private to its owner,\n"
        "rewritten atomically; keys this version does not know are kept). $SANDPOD_ENGINE\n"
        "names the default instead of the file.\n"
        "\n"
        "  ls       the engines: name, kind, where, the default marked with '*'\n"
        "  add      add engine NAME ([a-z0-9][a-z0-9-]*, at most 63); --replace\n"
        "           redefines one; --default makes it the default\n"
        "  rm       remove engine NAME (a default it was goes back to local)\n"
        "  default  make NAME the default\n"
        "  test     check what engine NAME lets sandpod do, one line per check with its\n"
        "           time: for kubernetes, the credentials, GET /version, a\n"
        "           SelfSubjectAccessReview for each verb sandpod uses (pods\n"
        "           create/get/list/watch/delete, pods/exec create and get, events list),\n"
        "           then (unless --no-probe) a probe Pod with the engine's image: created,\n"
        "           Ready (a stuck Pod gives the line from its Events), `true` run in its\n"
        "           workload container, an MCP initialize and tools/list through the peer,\n"
        "           deleted (always, also after a failure). For podman: the service\n"
        "           answers, its version, rootless or not.\n"
        "\n"
        "How a kubernetes engine finds its cluster, first match wins: --server (with\n"
        "--token-file, --ca-file); else --kubeconfig/--context, read through kubectl\n"
        "(--kubectl names the program); else the in-cluster service account when sandpod\n"
        "runs in a Pod; else kubectl's defaults. A podman engine's service is --url\n"
        "(unix:// or http(s)://; without it, found or started as for any sandbox).",
    .groups = CLI_GROUPS(
        CLI_OWN(
            CLI_FLAG("json", 0, OPT_JSON, "ls, test: print the result as JSON on stdout"),
            CLI_CHOICE("kind", 0, "KIND", OPT_KIND, "kubernetes|podman",
                       "add: the engine's kind (required)"),
            CLI_VALUE("kubeconfig", 0, "F", OPT_KUBECONFIG, CLI_COMP_FILE,
                      "add: the kubeconfig file (default: kubectl's)"),
            CLI_VALUE("context", 0, "C", OPT_CONTEXT, CLI_COMP_NONE,
                      "add: the kubeconfig context (default: its current one)"),
            CLI_VALUE("kubectl", 0, "PATH", OPT_KUBECTL, CLI_COMP_FILE,
                      "add: the kubectl that reads the kubeconfig (default: kubectl on PATH)"),
            CLI_VALUE("server", 0, "URL", OPT_SERVER, CLI_COMP_NONE,
                      "add: the API server, https://HOST:PORT (instead of a kubeconfig)"),
            CLI_VALUE("token-file", 0, "F", OPT_TOKEN_FILE, CLI_COMP_FILE,
                      "add: with --server, a bearer token file (re-read on each request)"),
            CLI_VALUE("ca-file", 0, "F", OPT_CA_FILE, CLI_COMP_FILE,
                      "add: with --server, the CA bundle (PEM) the server's certificate is checked "
                      "against"),
            CLI_VALUE("namespace", 0, "N", OPT_NAMESPACE, CLI_COMP_NONE,
                      "add: the namespace of the Pods (default: the credentials', else default)"),
            CLI_VALUE("image", 0, "REF", OPT_IMAGE, CLI_COMP_NONE,
                      "add: the sandpod image of the Pods' init and peer containers"),
            CLI_VALUE("runtime-class", 0, "R", OPT_RUNTIME_CLASS, CLI_COMP_NONE,
                      "add: runtimeClassName, e.g. gvisor or kata (default: the cluster's)"),
            CLI_VALUE("seccomp-profile", 0, "PATH", OPT_SECCOMP_PROFILE, CLI_COMP_NONE,
                      "add: the Pods' Localhost seccomp profile, relative to the kubelet's seccomp "
                      "folder (sandpod's own, installed on the nodes; default RuntimeDefault)"),
            CLI_VALUE("accept", 0, "LIST", OPT_ACCEPT, CLI_COMP_NONE,
                      "add: what the Pods may lack of a local sandbox's protections, by name: "
                      "userns (the node's ids), seccomp (keyctl or new user namespaces allowed), "
                      "netpol (NetworkPolicies not enforced: a sandbox with egress rules could go "
                      "around its proxy); without it such a Pod is refused"),
            CLI_VALUE("ttl", 0, "SECONDS", OPT_TTL, CLI_COMP_NONE,
                      "add: a Pod's hard lifetime, activeDeadlineSeconds (default 7200; 0: none)"),
            CLI_FLAG("replace", 0, OPT_REPLACE, "add: redefine an engine of that name"),
            CLI_FLAG("default", 0, OPT_DEFAULT, "add: make it the default"),
            CLI_FLAG("no-probe", 0, OPT_NO_PROBE, "test: no probe Pod"),
            CLI_VALUE("timeout", 0, "SECONDS", OPT_TIMEOUT, CLI_COMP_NONE,
                      "test: the longest the probe Pod may take to be Ready (default 120)")),
        &cli_group_conn),
    .operands = CLI_OPERANDS({"OP", CLI_COMP_CHOICES, "ls|add|rm|default|test"},
                             {"NAME", CLI_COMP_NONE, NULL}),
    .exit_status = "0 ok (test: every check passed), 1 error (test: a check failed, named on "
                   "stderr), 2 bad usage.",
};

static const char *engine_where(const sp_engine *e, char *buf, size_t size)
{
    if (e->kind == SP_ENGINE_PODMAN)
        return e->podman_url ? e->podman_url : "this machine";
    if (e->server)
        snprintf(buf, size, "%s", e->server);
    else if (e->context || e->kubeconfig)
        snprintf(buf, size, "%s%s%s", e->context ? "context " : "", e->context ? e->context : "",
                 e->kubeconfig && !e->context ? e->kubeconfig : "");
    else
        snprintf(buf, size, "in-cluster or kubectl's default");
    return buf;
}

cJSON *cli_engine_json(const sp_engine *e)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && sp_json_add_string(o, "name", e->name) &&
              sp_json_add_string(o, "kind", sp_engine_kind_name(e->kind));
    const struct {
        const char *key, *v;
    } f[] = {{"url", e->podman_url},
             {"kubeconfig", e->kubeconfig},
             {"context", e->context},
             {"kubectl", e->kubectl},
             {"server", e->server},
             {"token_file", e->token_file},
             {"ca_file", e->ca_file},
             {"namespace", e->ns},
             {"image", e->image},
             {"runtime_class", e->runtime_class},
             {"seccomp_profile", e->seccomp_profile},
             {"accept", e->accept}};
    for (size_t i = 0; ok && i < sizeof(f) / sizeof(f[0]); i++)
        if (f[i].v)
            ok = sp_json_add_string(o, f[i].key, f[i].v);
    if (ok && e->ttl_seconds)
        ok = cJSON_AddNumberToObject(o, "ttl", (double)e->ttl_seconds) != NULL;
    return sp_json_finish(o, ok);
}

static int do_ls(const char *root, bool json)
{
    sp_engine **v = NULL;
    char *def = NULL;
    sp_error *err = NULL;
    int r = sp_engine_list(&v, &def, root, &err);
    if (r < 0)
        return cli_fail(json, r, err);
    cJSON *arr = json ? cJSON_CreateArray() : NULL;
    if (!json)
        printf("  %-20s  %-10s  %-16s  %s\n", "NAME", "KIND", "NAMESPACE", "WHERE");
    for (size_t i = 0; v[i]; i++) {
        bool is_def = strcmp(v[i]->name, def) == 0;
        if (json) {
            cJSON *o = cli_engine_json(v[i]);
            if (o && !cJSON_AddBoolToObject(o, "default", is_def)) {
                cJSON_Delete(o);
                o = NULL;
            }
            if (!o || !cJSON_AddItemToArray(arr, o))
                cJSON_Delete(o);
        } else {
            char buf[512];
            printf("%c %-20s  %-10s  %-16s  %s\n", is_def ? '*' : ' ', v[i]->name,
                   sp_engine_kind_name(v[i]->kind),
                   v[i]->kind == SP_ENGINE_KUBERNETES ? (v[i]->ns ? v[i]->ns : "(credentials')")
                                                      : "-",
                   engine_where(v[i], buf, sizeof(buf)));
        }
        sp_engine_free(v[i]);
    }
    free(v);
    int rc = CLI_EXIT_OK;
    if (json) {
        cJSON *res = cJSON_CreateObject();
        bool ok =
            res && sp_json_add_string(res, "default", def) && sp_json_add(res, "engines", arr);
        rc = cli_print_result(sp_json_finish(res, ok));
    }
    free(def);
    return rc;
}

struct add_args {
    sp_engine e;
    const char *kind;
    bool replace, make_default, any_kube;
};

static int do_add(const char *root, struct add_args *a)
{
    sp_error *err = NULL;
    if (!a->kind)
        return cli_usage("engine", "add: --kind is required (kubernetes or podman)");
    int r = sp_engine_kind_parse(&a->e.kind, a->kind, &err);
    if (r < 0) {
        cli_usage("engine", "--kind: %s", err->message);
        sp_error_free(err);
        return CLI_EXIT_USAGE;
    }
    if (a->e.kind == SP_ENGINE_PODMAN && a->any_kube)
        return cli_usage("engine", "add: the kubernetes options do not apply to --kind podman");
    if (a->e.kind == SP_ENGINE_KUBERNETES && a->e.podman_url)
        return cli_usage("engine", "add: --url is a Podman service's; a kubernetes engine "
                                   "takes --server or --kubeconfig");
    if ((r = sp_engine_add(root, &a->e, a->replace, &err)) < 0)
        return cli_fail(false, r, err);
    if (a->make_default && (r = sp_engine_set_default(root, a->e.name, &err)) < 0)
        return cli_fail(false, r, err);
    printf("%s\n", a->e.name);
    return CLI_EXIT_OK;
}

int cmd_engine(int argc, char **argv)
{
    struct cli_conn conn = {0};
    struct add_args a = {0};
    struct cli_engine_test t = {.timeout_s = 120};
    bool json = false, add_opt = false;
    long long ll = 0;
    int rc = 0;
    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_engine, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        int took = cli_conn_option(&conn, "engine", opt, optarg);
        if (took < 0 || opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        char **field = NULL;
        switch (opt) {
        case OPT_JSON:
            json = true;
            continue;
        case OPT_NO_PROBE:
            t.no_probe = true;
            continue;
        case OPT_TIMEOUT:
            if (cli_parse_ll("engine", "--timeout", optarg, 1, 86400, &ll) < 0) {
                rc = CLI_EXIT_USAGE;
                goto done;
            }
            t.timeout_s = (int)ll;
            t.timeout_set = true;
            continue;
        case OPT_KIND:
            a.kind = optarg;
            add_opt = true;
            continue;
        case OPT_REPLACE:
            a.replace = add_opt = true;
            continue;
        case OPT_DEFAULT:
            a.make_default = add_opt = true;
            continue;
        case OPT_TTL:
            if (cli_parse_ll("engine", "--ttl", optarg, 0, INT32_MAX, &ll) < 0) {
                rc = CLI_EXIT_USAGE;
                goto done;
            }
            a.e.ttl_seconds = ll ? ll : -1;
            a.any_kube = add_opt = true;
            continue;
        case OPT_KUBECONFIG:
            field = &a.e.kubeconfig;
            break;
        case OPT_CONTEXT:
            field = &a.e.context;
            break;
        case OPT_KUBECTL:
            field = &a.e.kubectl;
            break;
        case OPT_SERVER:
            field = &a.e.server;
            break;
        case OPT_TOKEN_FILE:
            field = &a.e.token_file;
            break;
        case OPT_CA_FILE:
            field = &a.e.ca_file;
            break;
        case OPT_NAMESPACE:
            field = &a.e.ns;
            break;
        case OPT_IMAGE:
            field = &a.e.image;
            break;
        case OPT_SECCOMP_PROFILE:
            field = &a.e.seccomp_profile;
            break;
        case OPT_ACCEPT:
            field = &a.e.accept;
            break;
        default:
            field = &a.e.runtime_class;
            break;
        }
        *field = optarg;
        a.any_kube = add_opt = true;
    }
    if (json)
        cli_usage_json(true);
    if (optind >= argc) {
        rc = cli_usage("engine", "missing operation: ls, add, rm, default or test");
        goto done;
    }
    const char *op = argv[optind++];
    static const char *const ops[] = {"ls", "add", "rm", "default", "test", NULL};
    size_t k = 0;
    while (ops[k] && strcmp(op, ops[k]) != 0)
        k++;
    if (!ops[k]) {
        rc = cli_usage_near("engine", cli_suggest(op, ops), "unknown operation '%s'", op);
        goto done;
    }
    int nargs = argc - optind, want = k == 0 ? 0 : 1;
    if (nargs < want) {
        rc = cli_usage("engine", "%s: missing NAME", op);
        goto done;
    }
    if (nargs > want) {
        rc = cli_usage("engine", "unexpected argument '%s'", argv[optind + want]);
        goto done;
    }
    if (add_opt && k != 1) {
        rc = cli_usage("engine", "--kind and the engine's settings go with 'add' only");
        goto done;
    }
    if ((t.no_probe || t.timeout_set) && k != 4) {
        rc = cli_usage("engine", "--no-probe and --timeout go with 'test' only");
        goto done;
    }
    if (json && k != 0 && k != 4) {
        rc = cli_usage("engine", "--json goes with 'ls' and 'test'");
        goto done;
    }
    const char *name = want ? argv[optind] : NULL;
    sp_error *err = NULL;
    int r = 0;
    switch (k) {
    case 0:
        rc = do_ls(conn.state_root, json);
        break;
    case 1:
        a.e.name = (char *)name;
        /* --url is the Podman service an engine of kind podman talks to; it
         * was once dropped silently here. */
        a.e.podman_url = (char *)conn.url;
        rc = do_add(conn.state_root, &a);
        break;
    case 2:
        if ((r = sp_engine_remove(conn.state_root, name, &err)) < 0)
            rc = cli_fail(false, r, err);
        break;
    case 3:
        if ((r = sp_engine_set_default(conn.state_root, name, &err)) < 0)
            rc = cli_fail(false, r, err);
        break;
    default:
        t.json = json;
        t.state_root = conn.state_root;
        t.url = conn.url;
        t.name = name;
        rc = cli_engine_test(&t);
        break;
    }
done:
    cli_conn_dispose(&conn);
    return rc;
}
