/* sandpod image pull | ls | rm | build | exists: images from a registry,
 * images built from a Containerfile, and the offline image sandboxes run
 * by default. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "fs_json.h"
#include "json.h"
#include "progress.h"

enum { OPT_FORCE = 256, OPT_TAG = 't', OPT_FILE = 'f', OPT_BUSYBOX = 257, OPT_JSON, OPT_TLS };

const struct cli_spec cli_spec_image = {
    .name = "image",
    .fn = cmd_image,
    .summary = "Pull, list, remove and build images",
    .usage = CLI_USAGE(
        "pull REF [--tls-verify=false] [--json]", "ls [--json]", "rm REF... [-f|--force] [--json]",
        "build -f CONTAINERFILE [-t TAG] [CONTEXT] [--json]",
        "build [--force] [--tag TAG] [--busybox PATH] [--json]", "exists [IMAGE] [--json]"),
    .description =
        "  pull    fetch REF from its registry through the Podman service; progress on\n"
        "          stderr, the image id on stdout. --tls-verify=false speaks plain HTTP\n"
        "          to a registry without TLS (only for one you trust, such as 127.0.0.1)\n"
        "  ls      the local images, newest first: id, created, size, names\n"
        "  rm      remove each REF (-f: also when a container uses it)\n"
        "  build   with -f or CONTEXT: build CONTAINERFILE (default CONTEXT/Containerfile,\n"
        "          else CONTEXT/Dockerfile) with CONTEXT (default .) as its context;\n"
        "          the build's output goes to stderr, the image id to stdout. Symlinks in\n"
        "          CONTEXT are sent as links, never followed; .containerignore and\n"
        "          .dockerignore are not applied (the whole folder is sent).\n"
        "          With neither: build the offline image from a static busybox (Debian's\n"
        "          busybox-static) and import it; nothing is fetched. An existing image\n"
        "          is kept unless --force is given; --tag needs --busybox here.\n"
        "  exists  print true and exit 0 when IMAGE (default " SP_PODMAN_DEFAULT_IMAGE ")\n"
        "          is present, else print false and exit 1",
    .groups = CLI_GROUPS(CLI_OWN(
        CLI_VALUE("tls-verify", 0, "BOOL", OPT_TLS, CLI_COMP_NONE,
                  "pull: false to skip TLS verification and allow plain HTTP (default true)"),
        CLI_VALUE("file", 'f', "CONTAINERFILE", OPT_FILE, CLI_COMP_FILE,
                  "build: the Containerfile (rm: -f is --force)"),
        CLI_VALUE("tag", 't', "TAG", OPT_TAG, CLI_COMP_NONE,
                  "build: image name (offline image: default " SP_PODMAN_DEFAULT_IMAGE ")"),
        CLI_FLAG("force", 0, OPT_FORCE,
                 "rm: remove an image in use; build: rebuild the offline image"),
        CLI_VALUE("busybox", 0, "PATH", OPT_BUSYBOX, CLI_COMP_FILE,
                  "build: the static busybox to use (default /bin/busybox)"),
        CLI_FLAG("json", 0, OPT_JSON, "print the result as JSON on stdout"),
        CLI_VALUE("state-root", 0, "DIR", CLI_OPT_STATE_ROOT, CLI_COMP_DIR,
                  "where a started Podman service keeps its socket"),
        CLI_VALUE("url", 0, "URL", CLI_OPT_URL, CLI_COMP_NONE,
                  "Podman service (default $SANDPOD_URL, else found or started)"))),
    .operands = CLI_OPERANDS({"OP", CLI_COMP_CHOICES, "pull|ls|rm|build|exists"},
                             {"ARG", CLI_COMP_NONE, NULL}),
    .exit_status = "0 ok, 1 error (or 'exists' on a missing image), 2 bad usage.",
};

struct image_args {
    bool json, force, no_tls_verify, tls_given;
    const char *tag, *busybox, *file;
};

/* {ok: true, KEY: VAL, ...} from pairs, or the plain value on stdout. */
static int print_id(bool json, const char *key, const char *id, const char *key2, const char *v2)
{
    if (!json) {
        printf("%s\n", id ? id : "");
        return CLI_EXIT_OK;
    }
    cJSON *o = cJSON_CreateObject();
    if (o && !(sp_json_add_string(o, key, id) && (!key2 || sp_json_add_string(o, key2, v2)))) {
        cJSON_Delete(o);
        o = NULL;
    }
    return cli_print_result(o);
}

static int do_pull(sp_podman *p, const char *ref, const struct image_args *a)
{
    sp_podman_pull_opts o = SP_PODMAN_PULL_OPTS_INIT;
    o.no_tls_verify = a->no_tls_verify;
    o.progress = cli_progress_pull;
    char *id = NULL;
    sp_error *err = NULL;
    cli_progress_begin("pulled", a->json);
    int r = sp_podman_image_pull_with(&id, p, ref, &o, &err);
    if (r == 0)
        cli_progress_update("pulling", 0, 0, ref);
    cli_progress_end(r == 0);
    if (r < 0)
        return cli_fail(a->json, r, err);
    int rc = print_id(a->json, "id", id, "image", ref);
    free(id);
    return rc;
}

static int do_ls(sp_podman *p, bool json)
{
    sp_podman_image_info *v = NULL;
    size_t n = 0;
    sp_error *err = NULL;
    int r = sp_podman_image_list(&v, &n, p, &err);
    if (r < 0)
        return cli_fail(json, r, err);
    int rc = CLI_EXIT_OK;
    if (json) {
        cJSON *arr = cJSON_CreateArray();
        for (size_t i = 0; arr && i < n; i++) {
            cJSON *o = cJSON_CreateObject();
            if (!o || !sp_json_add_string(o, "id", v[i].id) ||
                !sp_json_add(o, "names", sp_json_strv((const char *const *)v[i].names)) ||
                !cJSON_AddNumberToObject(o, "created", (double)v[i].created) ||
                !cJSON_AddNumberToObject(o, "size", (double)v[i].size) ||
                !cJSON_AddItemToArray(arr, o)) {
                cJSON_Delete(o);
                cJSON_Delete(arr);
                arr = NULL;
            }
        }
        cJSON *res = cJSON_CreateObject();
        if (res && !(arr && sp_json_add(res, "images", arr))) {
            cJSON_Delete(res);
            res = NULL;
        }
        rc = cli_print_result(res);
    } else {
        printf("%-12s  %-19s  %9s  %s\n", "ID", "CREATED", "SIZE", "NAMES");
        for (size_t i = 0; i < n; i++) {
            char when[32] = "-", size[32];
            time_t t = (time_t)v[i].created;
            struct tm tm;
            if (t > 0 && gmtime_r(&t, &tm))
                strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
            cli_format_bytes(size, sizeof(size), (uint64_t)(v[i].size > 0 ? v[i].size : 0));
            printf("%-12.12s  %-19s  %9s  ", v[i].id, when, size);
            if (!v[i].names[0])
                fputs("<none>", stdout);
            for (size_t k = 0; v[i].names[k]; k++)
                printf("%s%s", k ? "," : "", v[i].names[k]);
            putchar('\n');
        }
    }
    sp_podman_image_list_free(v, n);
    return rc;
}

/* Every REF is tried, as podman rmi does: one that fails is reported and the
 * rest are still removed; the exit status says whether all were. */
static int do_rm(sp_podman *p, char *const *refs, int n, const struct image_args *a)
{
    cJSON *out = NULL, *list = NULL;
    if (a->json) {
        out = cJSON_CreateObject();
        if (out && cJSON_AddTrueToObject(out, "ok"))
            list = cJSON_AddArrayToObject(out, "images");
        if (!list) {
            cJSON_Delete(out);
            return cli_error("out of memory");
        }
    }
    int rc = CLI_EXIT_OK;
    for (int i = 0; i < n; i++) {
        sp_error *err = NULL;
        int r = sp_podman_image_remove(p, refs[i], a->force, &err);
        if (!a->json) {
            if (r < 0)
                rc = cli_sp_error(r, err);
            else
                printf("%s\n", refs[i]);
            sp_error_free(err);
            continue;
        }
        cJSON *item = r == 0 ? cJSON_CreateObject()
                      : err  ? sp_json_error(err)
                             : sp_json_error_code(r, sp_strerror(r));
        sp_error_free(err);
        if (r < 0)
            rc = CLI_EXIT_ERROR;
        bool ok = item && sp_json_add_string(item, "image", refs[i]) &&
                  (r < 0 || cJSON_AddTrueToObject(item, "ok"));
        if (!ok || !cJSON_AddItemToArray(list, item)) {
            cJSON_Delete(item);
            cJSON_Delete(out);
            return cli_error("out of memory");
        }
    }
    if (!a->json)
        return rc;
    if (rc != CLI_EXIT_OK)
        cJSON_ReplaceItemInObjectCaseSensitive(out, "ok", cJSON_CreateFalse());
    int prc = cli_print_json(out);
    return rc != CLI_EXIT_OK ? rc : prc;
}

static int do_build_busybox(sp_podman *p, const struct image_args *a)
{
    char *id = NULL;
    sp_error *err = NULL;
    int r = sp_podman_image_build_busybox(&id, p, a->tag, a->busybox, a->force, &err);
    if (r < 0)
        return cli_fail(a->json, r, err);
    int rc = print_id(a->json, "id", id, "tag", a->tag ? a->tag : SP_PODMAN_DEFAULT_IMAGE);
    free(id);
    return rc;
}

static void build_output(const char *line, void *ud)
{
    (void)ud;
    fprintf(stderr, "%s\n", line);
}

static int do_build(sp_podman *p, const char *context, const struct image_args *a)
{
    sp_podman_build_opts o = SP_PODMAN_BUILD_OPTS_INIT;
    o.containerfile = a->file;
    o.tag = a->tag;
    o.output = build_output;
    char *id = NULL;
    sp_error *err = NULL;
    int r = sp_podman_image_build(&id, p, context, &o, &err);
    if (r < 0)
        return cli_fail(a->json, r, err);
    int rc = print_id(a->json, "id", id, a->tag ? "tag" : NULL, a->tag);
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

/* Which options each operation takes (beyond --json and the service). */
static int check_opts(const char *op, const struct image_args *a, bool offline)
{
    bool pull = !strcmp(op, "pull"), rm = !strcmp(op, "rm"), build = !strcmp(op, "build");
    if (a->tls_given && !pull)
        return cli_usage("image", "--tls-verify applies to 'pull' only");
    if (a->force && !rm && !(build && offline))
        return cli_usage("image", "--force applies to 'rm' and the offline 'build' only");
    if ((a->tag || a->file) && !build)
        return cli_usage("image", "--file and --tag apply to 'build' only");
    if (a->busybox && !(build && offline))
        return cli_usage("image", "--busybox applies to the offline 'build' only");
    /* `podman build -t TAG` builds the current folder: the same words here
     * must not quietly make the busybox image under TAG. */
    if (build && offline && a->tag && !a->busybox)
        return cli_usage("image",
                         "build -t %s: give the context folder (for example '.') or -f "
                         "CONTAINERFILE; for the offline image under that name add --busybox PATH",
                         a->tag);
    return 0;
}

int cmd_image(int argc, char **argv)
{
    struct cli_conn conn = {0};
    struct image_args a = {0};
    sp_podman *p = NULL;
    int rc = 0;

    /* `image rm REF -f` is podman's spelling of --force; elsewhere -f is
     * the Containerfile. */
    if (argc > 1 && strcmp(argv[1], "rm") == 0)
        for (int i = 2; i < argc && strcmp(argv[i], "--"); i++)
            if (strcmp(argv[i], "-f") == 0)
                argv[i] = (char *)"--force";

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
            a.force = true;
            break;
        case OPT_TAG:
            a.tag = optarg;
            break;
        case OPT_FILE:
            a.file = optarg;
            break;
        case OPT_BUSYBOX:
            a.busybox = optarg;
            break;
        case OPT_JSON:
            a.json = true;
            break;
        case OPT_TLS:
            if (strcmp(optarg, "true") != 0 && strcmp(optarg, "false") != 0) {
                rc = cli_usage("image", "--tls-verify must be true or false: '%s'", optarg);
                goto done;
            }
            a.no_tls_verify = strcmp(optarg, "false") == 0;
            a.tls_given = true;
            break;
        }
    }
    if (optind >= argc) {
        rc = cli_usage("image", "missing operation: pull, ls, rm, build or exists");
        goto done;
    }
    const char *op = argv[optind++];
    static const char *const ops[] = {"pull", "ls", "rm", "build", "exists"};
    /* operands each takes: minimum, maximum */
    static const int lo[] = {1, 0, 1, 0, 0}, hi[] = {1, 0, INT_MAX, 1, 1};
    size_t k = 0;
    while (k < 5 && strcmp(op, ops[k]) != 0)
        k++;
    if (k == 5) {
        rc = cli_usage("image", "unknown operation '%s'", op);
        goto done;
    }
    int nargs = argc - optind;
    bool offline = k == 3 && !a.file && nargs == 0;
    if ((rc = check_opts(op, &a, offline)) != 0)
        goto done;
    if (nargs < lo[k]) {
        rc = cli_usage("image", "%s: missing image reference", op);
        goto done;
    }
    if (nargs > hi[k]) {
        rc = cli_usage("image", "unexpected argument '%s'", argv[optind + hi[k]]);
        goto done;
    }
    const char *arg = nargs ? argv[optind] : NULL;

    sp_podman_opts po = cli_conn_podman_opts(&conn);
    sp_error *err = NULL;
    int r = sp_podman_open(&p, &po, &err);
    if (r < 0) {
        rc = cli_fail(a.json, r, err);
        goto done;
    }
    switch (k) {
    case 0:
        rc = do_pull(p, arg, &a);
        break;
    case 1:
        rc = do_ls(p, a.json);
        break;
    case 2:
        rc = do_rm(p, argv + optind, nargs, &a);
        break;
    case 3:
        rc = offline ? do_build_busybox(p, &a) : do_build(p, arg, &a);
        break;
    default:
        rc = do_exists(p, arg ? arg : SP_PODMAN_DEFAULT_IMAGE, a.json);
        break;
    }

done:
    sp_podman_free(p);
    cli_conn_dispose(&conn);
    return rc;
}
