/* sandpod render: print the Kubernetes Pod a sandbox made with the create
 * options would run as (sandbox/kube/render.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "render.h"

enum {
    OPT_NAMESPACE = 0x3400,
    OPT_SANDPOD_IMAGE,
    OPT_DEADLINE,
    OPT_RUNTIME_CLASS,
};

static int cmd_render(int argc, char **argv);

const struct cli_spec cli_spec_render = {
    .name = "render",
    .fn = cmd_render,
    .summary = "Print the Kubernetes Pod a sandbox would run as (JSON)",
    .usage = CLI_USAGE("[CREATE OPTIONS] [--namespace NS] [--sandpod-image REF] "
                       "[--deadline SECONDS] [--runtime-class C]"),
    .description =
        "Print, as JSON (which kubectl and `podman kube play` read as YAML), the Pod a\n"
        "sandbox made with these create options runs as on Kubernetes: an init container\n"
        "copies sandpod-agent from the sandpod image into a volume the workload mounts\n"
        "read-only at " SP_KUBE_AGENT_DIR "; the workload runs the image with the agent as\n"
        "pid 1; a peer container (the sandpod image) serves the tool suite and snapshots\n"
        "over the shared " SP_KUBE_WORKSPACE ", with the snapshot store in a volume only it\n"
        "mounts. The local hardening maps onto the Pod: all capabilities dropped, no\n"
        "privilege escalation, read-only root, non-root uid and gid, seccomp\n"
        "RuntimeDefault, a Memory emptyDir on /tmp with a size limit, memory and CPU\n"
        "limits equal to requests, no service-account token, no service links,\n"
        "activeDeadlineSeconds, restartPolicy Never; labels sandpod=1 and sandpod.name.\n"
        "\n"
        "What a Pod cannot say is listed in the annotation sandpod.gaps, as tokens:\n"
        "  pids=N        the pids limit (only the node's podPidsLimit applies)\n"
        "  rlimits       nofile and nproc (no Pod field; the runtime's defaults)\n"
        "  network=none  a Pod always has eth0: it takes a deny-all NetworkPolicy\n"
        "                selecting sandpod=1 and a CNI that enforces it\n"
        "  seccomp       RuntimeDefault, which allows keyctl and new user namespaces\n"
        "                that sandpod's own profile refuses\n"
        "  userns        no user namespace unless the cluster supports hostUsers\n"
        "\n"
        "--mount and --setup are refused: the workspace is filled through the peer once the Pod "
        "runs.\n"
        "\n"
        "Secrets: a value given with -e KEY=VALUE is written into the Pod spec, where\n"
        "anyone who may read Pods sees it. A bare -e KEY is only named (annotation\n"
        "sandpod.env-pass); its value is never in the manifest.",
    .groups = CLI_GROUPS(
        CLI_OWN(CLI_VALUE("namespace", 0, "NS", OPT_NAMESPACE, CLI_COMP_NONE,
                          "metadata.namespace (default: none, the client's)"),
                CLI_VALUE("sandpod-image", 0, "REF", OPT_SANDPOD_IMAGE, CLI_COMP_NONE,
                          "image of the init and peer containers (default " SP_KUBE_DEFAULT_IMAGE
                          ", contrib/image/build-sandpod-image.sh)"),
                CLI_VALUE("deadline", 0, "SECONDS", OPT_DEADLINE, CLI_COMP_NONE,
                          "activeDeadlineSeconds, the Pod's hard lifetime (default 7200; 0: "
                          "none)"),
                CLI_VALUE("runtime-class", 0, "C", OPT_RUNTIME_CLASS, CLI_COMP_NONE,
                          "runtimeClassName, e.g. gvisor or kata (default: the cluster's)")),
        CLI_TITLE("CREATE OPTIONS:"), &cli_group_create),
    .exit_status = "0 ok, 1 error (options a Pod cannot carry), 2 bad usage.",
};

static int cmd_render(int argc, char **argv)
{
    struct cli_create c;
    int rc = cli_create_init(&c, argc);
    if (rc)
        return rc;
    sp_kube_render_opts ro = SP_KUBE_RENDER_OPTS_INIT;
    char *pod = NULL;
    long long ll = 0;
    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_render, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        if (opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        switch (opt) {
        case OPT_NAMESPACE:
            ro.ns = optarg;
            continue;
        case OPT_SANDPOD_IMAGE:
            ro.sandpod_image = optarg;
            continue;
        case OPT_RUNTIME_CLASS:
            ro.runtime_class = optarg;
            continue;
        case OPT_DEADLINE:
            if (cli_parse_ll("render", "--deadline", optarg, 0, INT64_MAX, &ll) < 0) {
                rc = CLI_EXIT_USAGE;
                goto done;
            }
            ro.deadline_seconds = ll ? ll : -1;
            continue;
        default:
            break;
        }
        if (cli_create_option(&c, "render", opt, optarg) < 0) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
    }
    if (optind < argc) {
        rc = cli_usage("render", "unexpected argument '%s'", argv[optind]);
        goto done;
    }
    sp_sandbox_opts o = cli_create_opts(&c);
    sp_error *err = NULL;
    int r = sp_kube_render_pod(&pod, &o, &ro, &err);
    if (r < 0) {
        rc = cli_fail(false, r, err);
        goto done;
    }
    if (fputs(pod, stdout) == EOF || fputc('\n', stdout) == EOF || fflush(stdout) == EOF)
        rc = cli_error("writing the Pod: output closed");

done:
    free(pod);
    cli_create_dispose(&c);
    return rc;
}
