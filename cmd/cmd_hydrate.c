/* sandpod hydrate: copy host folders into a workspace folder, filtered,
 * capped and all or nothing (the library's sp_hydrate()). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fs_json.h"
#include "hydrate_json.h"

enum {
    OPT_ROOT = 256,
    OPT_NAME,
    OPT_MOUNT,
    OPT_ALLOWED_ROOT,
    OPT_JSON,
    OPT_LIST,
};

const struct cli_spec cli_spec_hydrate = {
    .name = "hydrate",
    .fn = cmd_hydrate,
    .summary = "Copy host folders into a workspace, filtered and capped",
    .usage = CLI_USAGE("(--root DIR | --name NAME) --mount SPEC [--mount SPEC]... "
                       "[--allowed-root DIR]... [--list] [--json]"),
    .description =
        "Copy host folders into a workspace folder: only what the globs select, never\n"
        "more than a mount's max-bytes, never a byte from outside the allowed roots.\n"
        "All or nothing: on any error the workspace is left as it was.\n"
        "\n"
        "SPEC is a folder PATH, or\n"
        "  src=PATH[,dst=DIR][,include=GLOB]...[,exclude=GLOB]...[,max-bytes=SIZE]\n"
        "          [,follow-symlinks][,gitignore][,secrets=strip|keep]\n"
        "  src=PATH          the host folder to copy\n"
        "  dst=DIR           where it lands in the workspace (default: the root)\n"
        "  include=GLOB      copy only matching files (repeatable); a GLOB without '/'\n"
        "                    matches a name at any depth ('*.py'), one with '/' the path\n"
        "                    relative to PATH ('src/**/*.c'); a matching folder brings\n"
        "                    all it holds\n"
        "  exclude=GLOB      leave matching files and folders out (repeatable); an\n"
        "                    excluded folder is not even read ('node_modules')\n"
        "  max-bytes=SIZE    fail when the selected files total more than SIZE\n"
        "                    (K, M, G, T: powers of 1024)\n"
        "  follow-symlinks   copy what a symlink points to when that is inside an\n"
        "                    allowed root (other links are skipped and reported);\n"
        "                    without it, symlinks are copied as symlinks, verbatim\n"
        "  gitignore         leave out what the source's .gitignore files (nested\n"
        "                    ones too, git's rules) and .git/info/exclude ignore;\n"
        "                    .git itself is kept; exclude applies first, include last\n"
        "  secrets=strip     the default: leave out files that hold credentials (.env,\n"
        "                    .env.* but not .env.example and the like, .netrc,\n"
        "                    .git-credentials, ssh private keys, *.pem, *.key, *.p12,\n"
        "                    *.pfx) and copy .git/config, .npmrc, .pypirc and\n"
        "                    .docker/config.json without theirs; each is reported\n"
        "  secrets=keep      copy them all as they are\n"
        "Commas inside {...} do not split (include=*.{c,h}); write a literal comma in\n"
        "a path as \\,.\n"
        "\n"
        "Later mounts win where paths overlap; folders merge. Entries already in the\n"
        "workspace at a copied path are replaced; other entries stay.",
    .groups = CLI_GROUPS(
        CLI_OWN(CLI_VALUE("root", 0, "DIR", OPT_ROOT, CLI_COMP_DIR,
                          "the workspace folder (made, parents too, if missing)"),
                CLI_VALUE("name", 0, "NAME", OPT_NAME, CLI_COMP_SANDBOX,
                          "the workspace of sandbox NAME under the state root ($SANDPOD_HOME, "
                          "$XDG_DATA_HOME/sandpod or ~/.local/share/sandpod), created if missing"),
                CLI_VALUE("mount", 0, "SPEC", OPT_MOUNT, CLI_COMP_DIR,
                          "a host folder to copy (repeatable, at least one)"),
                CLI_VALUE("allowed-root", 0, "DIR", OPT_ALLOWED_ROOT, CLI_COMP_DIR,
                          "host folder that every mount and followed symlink must resolve inside "
                          "(repeatable; default: each mount's own folder)"),
                CLI_FLAG("list", 0, OPT_LIST, "also print every copied path"),
                CLI_FLAG("json", 0, OPT_JSON, "print the result as one JSON object"))),
    .notes = "Progress is shown on stderr when it is a terminal.",
    .exit_status = "0 ok, 1 error, 2 bad usage.",
};

struct hydrate_cli {
    const char *root, *name;
    bool json, list;
    sp_mount **parsed;
    sp_mount *mounts; /* shallow copies of parsed, contiguous */
    size_t n_mounts;
    const char **roots; /* NULL-terminated */
    size_t n_roots;
};

static void put_entry_line(const char *path, const char *what)
{
    fputs("  ", stdout);
    cli_put_name(stdout, path);
    printf(": %s\n", what);
}

static int print_human(const struct hydrate_cli *c, const char *ws, const sp_hydrate_result *r)
{
    char bytes[32];
    cli_format_bytes(bytes, sizeof(bytes), r->bytes);
    fputs("hydrated ", stdout);
    cli_put_name(stdout, ws);
    printf(": %" PRIu64 " file%s (%s), %" PRIu64 " folder%s, %" PRIu64 " symlink%s in %.2f s\n",
           r->files, r->files == 1 ? "" : "s", bytes, r->dirs, r->dirs == 1 ? "" : "s", r->symlinks,
           r->symlinks == 1 ? "" : "s", (double)r->elapsed_ms / 1000.0);
    for (size_t i = 0; r->n_mounts > 1 && i < r->n_mounts; i++) {
        const sp_hydrate_mount_stats *m = &r->mounts[i];
        cli_format_bytes(bytes, sizeof(bytes), m->bytes);
        printf("  mount %zu: ", i + 1);
        cli_put_name(stdout, m->host_path);
        fputs(" -> ", stdout);
        cli_put_name(stdout, m->mount_path);
        printf(": %" PRIu64 " files (%s)\n", m->files, bytes);
    }
    if (r->excluded)
        printf("excluded by the globs: %" PRIu64 " entr%s (a folder counts once)\n", r->excluded,
               r->excluded == 1 ? "y" : "ies");
    if (r->hardlinks)
        printf("hard links copied as separate files: %" PRIu64 "\n", r->hardlinks);
    if (r->n_skipped) {
        printf("skipped %zu:\n", r->n_skipped);
        for (size_t i = 0; i < r->n_skipped; i++) {
            const sp_hydrate_skip *s = &r->skipped[i];
            const char *why;
            switch (s->reason) {
            case SP_HYDRATE_SKIP_SPECIAL:
                why = "not a file, folder or symlink";
                break;
            case SP_HYDRATE_SKIP_OUTSIDE:
                why = "symlink to outside the allowed roots";
                break;
            case SP_HYDRATE_SKIP_DANGLING:
                why = "symlink to nothing";
                break;
            case SP_HYDRATE_SKIP_LOOP:
                why = "symlink loop";
                break;
            case SP_HYDRATE_SKIP_TOO_DEEP:
                why = "too deep";
                break;
            case SP_HYDRATE_SKIP_SECRET:
                why = "holds credentials";
                break;
            default:
                why = "skipped";
                break;
            }
            fputs("  ", stdout);
            cli_put_name(stdout, s->path);
            printf(": %s", why);
            if (s->detail) {
                fputs(" (", stdout);
                cli_put_name(stdout, s->detail);
                fputc(')', stdout);
            }
            fputc('\n', stdout);
        }
    }
    if (r->n_rewritten) {
        printf("copied without credentials %zu:\n", r->n_rewritten);
        for (size_t i = 0; i < r->n_rewritten; i++)
            put_entry_line(r->rewritten[i].path, r->rewritten[i].detail);
    }
    if (r->n_overridden) {
        printf("replaced %zu (later mounts win):\n", r->n_overridden);
        for (size_t i = 0; i < r->n_overridden; i++) {
            const sp_hydrate_override *o = &r->overridden[i];
            char what[96];
            if (o->previous < 0)
                snprintf(what, sizeof(what), "mount %zu replaced what the workspace held",
                         o->mount + 1);
            else
                snprintf(what, sizeof(what), "mount %zu over mount %ld", o->mount + 1,
                         o->previous + 1);
            put_entry_line(o->path, what);
        }
    }
    if (c->list) {
        for (size_t i = 0; i < r->n_entries; i++) {
            const sp_hydrate_entry *e = &r->entries[i];
            cli_put_name(stdout, e->path);
            fputs(e->type == SP_FS_DIR ? "/\n" : e->type == SP_FS_SYMLINK ? "@\n" : "\n", stdout);
        }
    }
    return CLI_EXIT_OK;
}

/* mkdir -p path (0755); *created receives the topmost folder that did not
 * exist (malloc'd), or stays NULL. Returns 0 or -1 with errno. */
static int make_dirs(const char *path, char **created)
{
    char *p = strdup(path);
    if (!p)
        return -1;
    size_t len = strlen(p);
    while (len > 1 && p[len - 1] == '/')
        p[--len] = '\0';
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0755) == 0) {
            if (!*created && !(*created = strdup(p))) {
                free(p);
                return -1;
            }
        } else if (errno != EEXIST) {
            int e = errno;
            free(p);
            errno = e;
            return -1;
        }
        *s = c;
        if (c == '\0')
            break;
    }
    free(p);
    return 0;
}

/* Remove the (empty) folders make_dirs() made, from path up to top. */
static void remove_made(const char *path, const char *top)
{
    char *p = strdup(path);
    if (!p)
        return;
    size_t tl = strlen(top);
    for (;;) {
        size_t len = strlen(p);
        while (len > 1 && p[len - 1] == '/')
            p[--len] = '\0';
        if (len < tl || rmdir(p) < 0 || len == tl)
            break;
        char *slash = strrchr(p, '/');
        if (!slash || slash == p)
            break;
        *slash = '\0';
    }
    free(p);
}

static int fail(const struct hydrate_cli *c, int code, sp_error *err)
{
    int rc = c->json ? cli_json_error(code, err) : cli_sp_error(code, err);
    sp_error_free(err);
    return rc;
}

int cmd_hydrate(int argc, char **argv)
{
    struct hydrate_cli c;
    memset(&c, 0, sizeof(c));
    c.parsed = calloc((size_t)argc + 1, sizeof(*c.parsed));
    c.mounts = calloc((size_t)argc + 1, sizeof(*c.mounts));
    c.roots = calloc((size_t)argc + 1, sizeof(*c.roots));
    char *ws = NULL;
    char *created = NULL; /* the topmost folder we made, removed on failure */
    int rc = CLI_EXIT_OK;
    if (!c.parsed || !c.mounts || !c.roots) {
        rc = cli_error("out of memory");
        goto done;
    }

    int opt;
    optind = 0;
    while ((opt = cli_next(&cli_spec_hydrate, argc, argv, 0)) != -1) {
        switch (opt) {
        case CLI_GETOPT_HELP:
            goto done;
        case OPT_ROOT:
            c.root = optarg;
            break;
        case OPT_NAME:
            c.name = optarg;
            break;
        case OPT_MOUNT: {
            sp_error *err = NULL;
            int r = sp_mount_spec_parse(&c.parsed[c.n_mounts], optarg, &err);
            if (r < 0) {
                rc = cli_usage("hydrate", "--mount: %s",
                               err && err->message ? err->message : sp_strerror(r));
                sp_error_free(err);
                goto done;
            }
            c.mounts[c.n_mounts] = *c.parsed[c.n_mounts];
            c.n_mounts++;
            break;
        }
        case OPT_ALLOWED_ROOT:
            c.roots[c.n_roots++] = optarg;
            break;
        case OPT_JSON:
            c.json = true;
            break;
        case OPT_LIST:
            c.list = true;
            break;
        default: /* CLI_GETOPT_BAD */
            rc = CLI_EXIT_USAGE;
            goto done;
        }
    }
    if (optind < argc) {
        rc = cli_usage("hydrate", "unexpected argument '%s'", argv[optind]);
        goto done;
    }
    if (!c.root == !c.name) {
        rc = cli_usage("hydrate", c.root ? "give --root or --name, not both"
                                         : "missing --root DIR or --name NAME");
        goto done;
    }
    if (!c.n_mounts) {
        rc = cli_usage("hydrate", "missing --mount SPEC");
        goto done;
    }

    sp_error *err = NULL;
    if (c.name) {
        int r = sp_workspace_create(&ws, c.name, &err);
        if (r < 0) {
            rc = fail(&c, r, err);
            goto done;
        }
    } else {
        ws = strdup(c.root);
        if (!ws) {
            rc = cli_error("out of memory");
            goto done;
        }
        /* A missing workspace (and missing parents) is made here and
         * removed again on failure, so a failed hydration leaves nothing. */
        if (make_dirs(ws, &created) < 0) {
            rc = cli_error("mkdir: %s: %s", ws, strerror(errno));
            goto done;
        }
    }

    sp_hydrate_opts o = SP_HYDRATE_OPTS_INIT;
    o.allowed_roots = c.n_roots ? c.roots : NULL;
    o.progress = cli_progress_hydrate;
    /* No summary line on stderr: what hydrate prints on stdout is one. */
    cli_progress_begin("hydrated", true);
    sp_hydrate_result *res = NULL;
    int r = sp_hydrate(&res, ws, c.mounts, c.n_mounts, &o, &err);
    cli_progress_end(r == 0);
    if (r < 0) {
        if (created)
            remove_made(ws, created);
        rc = fail(&c, r, err);
        goto done;
    }
    if (c.json) {
        cJSON *j = sp_json_hydrate_result(res, c.list);
        if (j && !sp_json_add_string(j, "workspace", ws)) {
            cJSON_Delete(j);
            j = NULL;
        }
        rc = cli_print_result(j);
    } else
        rc = print_human(&c, ws, res);
    sp_hydrate_result_free(res);

done:
    for (size_t i = 0; c.parsed && i < c.n_mounts; i++)
        sp_mount_free(c.parsed[i]);
    free(c.parsed);
    free(c.mounts);
    free(c.roots);
    free(ws);
    free(created);
    return rc;
}
