/* sandpod image build | exists: the offline image sandboxes run by default. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fs_json.h"

enum { OPT_FORCE = 'f', OPT_TAG = 't', OPT_BUSYBOX = 256, OPT_JSON };

const struct cli_spec cli_spec_image = {
    .name = "image",
    .fn = cmd_image,
    .summary = "Build the offline image, or check that an image exists",
    .usage = CLI_USAGE("build [--force] [--tag TAG] [--busybox PATH] [--json]",
                       "exists [IMAGE] [--json]"),
    .description =
        "  build   build the offline image from a static busybox (Debian's\n"
        "          busybox-static) and import it; nothing is fetched. Prints the image id.\n"
        "          An existing image is kept unless --force is given.\n"
        "  exists  print true and exit 0 when IMAGE (default " SP_PODMAN_DEFAULT_IMAGE ")\n"
        "          is present, else print false and exit 1",
    .groups = CLI_GROUPS(
        CLI_OWN(CLI_FLAG("force", 'f', OPT_FORCE, "build: rebuild an existing image"),
                CLI_VALUE("tag", 't', "TAG", OPT_TAG, CLI_COMP_NONE,
                          "build: image name (default " SP_PODMAN_DEFAULT_IMAGE ")"),
                CLI_VALUE("busybox", 0, "PATH", OPT_BUSYBOX, CLI_COMP_FILE,
                          "build: the static busybox to use (default /bin/busybox)"),
                CLI_FLAG("json", 0, OPT_JSON, "print {ok, id, tag} or {ok, image, exists}"),
                CLI_VALUE("state-root", 0, "DIR", CLI_OPT_STATE_ROOT, CLI_COMP_DIR,
                          "where a started Podman service keeps its socket"),
                CLI_VALUE("url", 0, "URL", CLI_OPT_URL, CLI_COMP_NONE,
                          "Podman service (default $SANDPOD_URL, else found or started)"))),
    .operands =
        CLI_OPERANDS({"OP", CLI_COMP_CHOICES, "build|exists"}, {"IMAGE", CLI_COMP_NONE, NULL}),
    .exit_status = "0 ok, 1 error (or 'exists' on a missing image), 2 bad usage.",
};

static int do_build(sp_podman *p, const char *tag, const char *busybox, bool force, bool json)
{
    char *id = NULL;
    sp_error *err = NULL;
    int r = sp_podman_image_build_busybox(&id, p, tag, busybox, force, &err);
    if (r < 0)
        return cli_fail(json, r, err);
    int rc = CLI_EXIT_OK;
    if (json) {
        cJSON *o = cJSON_CreateObject();
        if (o && !(sp_json_add_string(o, "id", id) &&
                   sp_json_add_string(o, "tag", tag ? tag : SP_PODMAN_DEFAULT_IMAGE))) {
            cJSON_Delete(o);
            o = NULL;
        }
        rc = cli_print_result(o);
    } else {
        printf("%s\n", id ? id : "");
    }
    free(id);
    return rc;
}

static int do_exists(sp_podman *p, const char *image, bool json)
{
    bool yes = false;
    sp_error *err = NULL;
    int r = sp_podman_image_exists(&yes, p, image, &err);
    if (r < 0)
        return cli_fail(json, r, err);
    if (json) {
        cJSON *o = cJSON_CreateObject();
        if (o &&
            !(sp_json_add_string(o, "image", image) && cJSON_AddBoolToObject(o, "exists", yes))) {
            cJSON_Delete(o);
            o = NULL;
        }
        int rc = cli_print_result(o);
        return rc ? rc : (yes ? CLI_EXIT_OK : CLI_EXIT_ERROR);
    }
    puts(yes ? "true" : "false");
    return yes ? CLI_EXIT_OK : CLI_EXIT_ERROR;
}

int cmd_image(int argc, char **argv)
{
    struct cli_conn conn = {0};
    bool json = false, force = false;
    const char *tag = NULL, *busybox = NULL;
    sp_podman *p = NULL;
    int rc = 0;

    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_image, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        int took = cli_conn_option(&conn, "image", opt, optarg);
        if (took < 0 || opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        switch (opt) {
        case OPT_FORCE:
            force = true;
            break;
        case OPT_TAG:
            tag = optarg;
            break;
        case OPT_BUSYBOX:
            busybox = optarg;
            break;
        case OPT_JSON:
            json = true;
            break;
        }
    }
    if (optind >= argc) {
        rc = cli_usage("image", "missing operation: build or exists");
        goto done;
    }
    const char *op = argv[optind++];
    bool build = strcmp(op, "build") == 0;
    if (!build && strcmp(op, "exists") != 0) {
        rc = cli_usage("image", "unknown operation '%s'", op);
        goto done;
    }
    if (!build && (force || tag || busybox)) {
        rc = cli_usage("image", "--force, --tag and --busybox apply to 'build' only");
        goto done;
    }
    int max_args = build ? 0 : 1;
    if (argc - optind > max_args) {
        rc = cli_usage("image", "unexpected argument '%s'", argv[optind + max_args]);
        goto done;
    }

    sp_podman_opts po = cli_conn_podman_opts(&conn);
    sp_error *err = NULL;
    int r = sp_podman_open(&p, &po, &err);
    if (r < 0) {
        rc = cli_fail(json, r, err);
        goto done;
    }
    if (build)
        rc = do_build(p, tag, busybox, force, json);
    else
        rc = do_exists(p, optind < argc ? argv[optind] : SP_PODMAN_DEFAULT_IMAGE, json);

done:
    sp_podman_free(p);
    cli_conn_dispose(&conn);
    return rc;
}
