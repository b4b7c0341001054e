/* sandpod fs: the contained filesystem tools on a folder of the host.
 *
 * Arguments are parsed twice: a first getopt_long pass ('+': stop at the
 * first operand) takes the global options up to OP, then a second,
 * permuting, pass over OP's own arguments takes the options that may follow
 * it (global ones included, so `fs read x --json` works too).
 *
 * Without --root the first operand names a sandbox whose workspace is the
 * root: `sandpod fs NAME OP ARGS...`. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "cli.h"
#include "fs_json.h"

/* Bytes per read while cat streams a whole file. */
#define CAT_CHUNK ((size_t)4 << 20)

enum {
    OPT_ICASE = 'i',
    OPT_FIXED = 'F',
    OPT_RECURSIVE = 'r',
    OPT_PARENTS = 'p',
    OPT_GLOB = 'g',
    OPT_ROOT = 256,
    OPT_JSON,
    OPT_READ_ONLY,
    OPT_DENY,
    OPT_OFFSET,
    OPT_LIMIT,
    OPT_VIEW,
    OPT_MODE,
    OPT_NO_PARENTS,
    OPT_DEPTH,
    OPT_MAX,
    OPT_PATH,
    OPT_EXIST_OK,
    OPT_OLD,
    OPT_NEW,
    OPT_OLD_FILE,
    OPT_NEW_FILE,
    OPT_ALL,
    OPT_LINE,
    OPT_DRY_RUN,
    OPT_FORMAT,
    OPT_ALLOW_OVERWRITE,
    OPT_RAW,
    OPT_BASE64,
    OPT_NO_IGNORE,
    OPT_HIDDEN,
    OPT_IGNORE,
};

static const struct cli_optdesc fs_op_opts[] = {
    CLI_VALUE("offset", 0, "N", OPT_OFFSET, CLI_COMP_NONE,
              "read: first line, 1-based as the read_file tool's offset (0 reads as 1); "
              "cat: first byte, 0-based"),
    CLI_VALUE("limit", 0, "N", OPT_LIMIT, CLI_COMP_NONE,
              "read: number of lines; cat: number of bytes"),
    CLI_VALUE("view", 0, "S:E", OPT_VIEW, CLI_COMP_NONE,
              "read: lines S to E, 1-based, inclusive; E -1 = to the end"),
    CLI_FLAG("base64", 0, OPT_BASE64,
             "read: print the whole file (text or binary) as base64; write: stdin is base64 "
             "(line breaks allowed, else strict RFC 4648)"),
    CLI_FLAG("raw", 0, OPT_RAW,
             "read: write control characters (escape sequences) to a terminal as they are; by "
             "default they show as \\xNN"),
    CLI_CHOICE("mode", 0, "M", OPT_MODE, "create|overwrite|append",
               "write: create (fail if it exists), overwrite or append"),
    CLI_FLAG("no-parents", 0, OPT_NO_PARENTS, "write: fail when the parent folder is missing"),
    CLI_VALUE("depth", 0, "N", OPT_DEPTH, CLI_COMP_NONE, "ls: levels to descend (default 1)"),
    CLI_VALUE("max", 0, "N", OPT_MAX, CLI_COMP_NONE,
              "ls, glob, grep: stop after N results (0 = default)"),
    CLI_VALUE("path", 0, "BASE", OPT_PATH, CLI_COMP_NONE, "glob: folder to match below"),
    CLI_VALUE("glob", 'g', "G", OPT_GLOB, CLI_COMP_NONE,
              "grep: only matching files (no '/' in G: by name, at any depth); repeat it, '!G' "
              "excludes, the last glob that matches decides (as rg -g)"),
    CLI_FLAG("hidden", 0, OPT_HIDDEN,
             "grep: also search names starting with '.' (not .git); glob: wildcards match them "
             "(bash's dotglob; .git only when spelled)"),
    CLI_FLAG("no-ignore", 0, OPT_NO_IGNORE,
             "grep: also search what .gitignore, .ignore, .rgignore and .git/info/exclude name; "
             "ls: enter every folder"),
    CLI_VALUE("ignore", 0, "G", OPT_IGNORE, CLI_COMP_NONE,
              "ls: do not enter folders (or list files) matching G, repeatable; replaces the "
              "default list (.git, node_modules, __pycache__, .venv, ...)"),
    CLI_FLAG("ignore-case", 'i', OPT_ICASE, "grep: as in grep(1)"),
    {"fixed-strings", 'F', NULL, OPT_FIXED, NULL, CLI_COMP_NONE, NULL},
    CLI_FLAG("recursive", 'r', OPT_RECURSIVE, "rm: delete a folder and its contents"),
    CLI_FLAG("parents", 'p', OPT_PARENTS, "mkdir: create parents; an existing folder is fine"),
    CLI_FLAG("exist-ok", 0, OPT_EXIST_OK, "mkdir: an existing folder is fine"),
    CLI_VALUE("old", 0, "S", OPT_OLD, CLI_COMP_NONE, "edit: the text to replace"),
    CLI_VALUE("new", 0, "S", OPT_NEW, CLI_COMP_NONE, "edit: the text to put in its place"),
    CLI_VALUE("old-file", 0, "F", OPT_OLD_FILE, CLI_COMP_FILE,
              "edit: the text to replace, from host file F (- = stdin)"),
    CLI_VALUE("new-file", 0, "F", OPT_NEW_FILE, CLI_COMP_FILE,
              "edit: the text to put in its place, from host file F (- = stdin)"),
    CLI_FLAG("all", 0, OPT_ALL, "edit: replace every occurrence"),
    CLI_ALIAS("replace-all", OPT_ALL),
    CLI_VALUE("line", 0, "N", OPT_LINE, CLI_COMP_NONE, "insert: line to insert after"),
    CLI_FLAG("dry-run", 0, OPT_DRY_RUN, "patch: check everything, write nothing"),
    CLI_CHOICE("format", 0, "F", OPT_FORMAT, "auto|codex|unified",
               "patch: auto (default), codex or unified"),
    CLI_FLAG("allow-overwrite", 0, OPT_ALLOW_OVERWRITE,
             "patch: Codex 'Add File'/'Move to' may replace a file"),
    CLI_OPTS_END,
};

static const struct cli_optgroup fs_op_group = {"Operation options:", fs_op_opts, NULL, true};

/* Everything the command line said, then the open handle. */
struct fs_cli {
    const char *root;
    const char *sandbox; /* a sandbox NAME instead of --root */
    sp_sandbox *sb;      /* the sandbox NAME opened, for its edit lock */
    const char *state_root;
    bool json;
    bool read_only;
    const char **deny; /* NULL-terminated */
    size_t n_deny;

    const char *op;
    char **args; /* operands after OP */
    int nargs;

    bool have_offset, have_limit, have_view, have_depth, have_line;
    long long offset, limit;
    long view_start, view_end;
    const char *mode;
    bool no_parents;
    unsigned depth;
    size_t max;
    const char *base;
    const char **globs; /* NULL-terminated */
    size_t n_globs;
    const char **ignore; /* NULL-terminated */
    size_t n_ignore;
    bool no_ignore, hidden;
    bool icase, fixed, recursive, parents, exist_ok, all;
    const char *old_str, *new_str, *old_file, *new_file;
    long line;
    bool dry_run, allow_overwrite;
    const char *format;
    bool raw;
    bool base64;

    sp_fs *fs;
};

struct fs_op {
    const char *name;
    int (*fn)(struct fs_cli *c);
    int min_args, max_args;
    /* Long names of the options OP takes, each between spaces. */
    const char *opts;
    const char *usage;
};

static int op_read(struct fs_cli *c);
static int op_cat(struct fs_cli *c);
static int op_write(struct fs_cli *c);
static int op_ls(struct fs_cli *c);
static int op_glob(struct fs_cli *c);
static int op_grep(struct fs_cli *c);
static int op_stat(struct fs_cli *c);
static int op_exists(struct fs_cli *c);
static int op_rm(struct fs_cli *c);
static int op_mkdir(struct fs_cli *c);
static int op_edit(struct fs_cli *c);
static int op_insert(struct fs_cli *c);
static int op_patch(struct fs_cli *c);

static const struct fs_op ops[] = {
    {"read", op_read, 1, 1, " offset limit view raw base64 ",
     "read PATH [--offset N] [--limit N] [--view START:END] [--raw] [--base64]"},
    {"cat", op_cat, 1, 1, " offset limit ", "cat PATH [--offset N] [--limit N]"},
    {"write", op_write, 1, 1, " mode no-parents base64 ",
     "write PATH [--mode create|overwrite|append] [--no-parents] [--base64]"},
    {"ls", op_ls, 0, 1, " depth max ignore no-ignore ",
     "ls [PATH] [--depth N] [--max N] [--ignore G]... [--no-ignore]"},
    {"glob", op_glob, 1, 1, " path max hidden ", "glob PATTERN [--path BASE] [--max N] [--hidden]"},
    {"grep", op_grep, 1, 2, " glob ignore-case fixed-strings max hidden no-ignore ",
     "grep PATTERN [PATH] [-g G]... [-i] [-F] [--hidden] [--no-ignore] [--max N]"},
    {"stat", op_stat, 1, 1, " ", "stat PATH"},
    {"exists", op_exists, 1, 1, " ", "exists PATH"},
    {"rm", op_rm, 1, 1, " recursive ", "rm PATH [-r]"},
    {"mkdir", op_mkdir, 1, 1, " parents exist-ok ", "mkdir PATH [-p] [--exist-ok]"},
    {"edit", op_edit, 1, 1, " old new old-file new-file all ",
     "edit PATH (--old S | --old-file F) (--new S | --new-file F) [--all | --replace-all]"},
    {"insert", op_insert, 1, 1, " line ", "insert PATH --line N"},
    {"patch", op_patch, 0, 0, " dry-run format allow-overwrite ",
     "patch [--dry-run] [--format auto|codex|unified] [--allow-overwrite]"},
};

#define N_OPS (sizeof(ops) / sizeof(ops[0]))

#define FS_OPS "read|cat|write|ls|glob|grep|stat|exists|rm|mkdir|edit|insert|patch"

const struct cli_spec cli_spec_fs = {
    .name = "fs",
    .fn = cmd_fs,
    .summary = "Read, write, list and search files in a folder, contained beneath it",
    .usage = CLI_USAGE("--root DIR [--json] [--read-only] [--deny GLOB]... OP [ARGS...]",
                       "[OPTIONS] NAME OP [ARGS...]"),
    .description =
        "Work on the files beneath DIR, or beneath the workspace of sandbox NAME, with\n"
        "the contained filesystem tools. Paths are relative to DIR (/workspace/... is\n"
        "accepted too); a path that would leave DIR through '..', an absolute path or a\n"
        "symlink is refused.\n"
        "\n"
        "Operations:\n"
        "  read PATH [--offset N] [--limit N] [--view START:END] [--raw] [--base64]\n"
        "      print lines of a UTF-8 text file; line numbers are 1-based everywhere, as\n"
        "      in the read_file tool: --offset N starts at line N, --view S:E shows lines\n"
        "      S to E inclusive (E -1 = to the end); a start past the end is an error; a\n"
        "      note on stderr tells how to go on; on a terminal, control characters show\n"
        "      as \\xNN unless --raw; --base64 prints any file whole as base64, and\n"
        "      --json of a binary file gives {mime, size, base64} as the tool does\n"
        "  cat PATH [--offset N] [--limit N]\n"
        "      print the raw bytes of any file (--offset and --limit in bytes)\n"
        "  write PATH [--mode create|overwrite|append] [--no-parents] [--base64]\n"
        "      write stdin to PATH atomically (default: overwrite, creating parents);\n"
        "      --base64: stdin is base64 (bad base64 writes nothing)\n"
        "  ls [PATH] [--depth N] [--max N] [--ignore G]... [--no-ignore]\n"
        "      list a folder: size, mtime and path marked dir/, exec*, link@ -> target;\n"
        "      below PATH, .git, node_modules, __pycache__, .venv, ... are not entered\n"
        "  glob PATTERN [--path BASE] [--max N] [--hidden]\n"
        "      print the paths matching PATTERN (*, **, ?, [...], {a,b}) below BASE;\n"
        "      as in bash, wildcards skip names starting with '.', PATTERN/ = folders\n"
        "  grep PATTERN [PATH] [-g G]... [-i] [-F] [--hidden] [--no-ignore] [--max N]\n"
        "      search file contents with a PCRE2 regex and print path:line:text;\n"
        "      as rg, skips hidden and .gitignore'd files unless --hidden/--no-ignore;\n"
        "      no match prints nothing and exits 0\n"
        "  stat PATH\n"
        "      show type, size, mode, times, access and link target (a final symlink is not\n"
        "      followed; an absolute target outside /workspace is in the container's image)\n"
        "  exists PATH\n"
        "      print true or false; exit 0 when PATH exists, 1 when it does not\n"
        "  rm PATH [-r]\n"
        "      delete a file, a symlink (never its target) or, with -r, a folder\n"
        "  mkdir PATH [-p] [--exist-ok]\n"
        "      create a folder; -p creates parents and accepts an existing folder\n"
        "  edit PATH (--old S | --old-file F) (--new S | --new-file F) [--all]\n"
        "      replace S, which must occur exactly once unless --all is given;\n"
        "      F is a host file (- = stdin) for strings spanning lines\n"
        "  insert PATH --line N\n"
        "      insert stdin after line N (0 = at the start, -1 = at the end)\n"
        "  patch [--dry-run] [--format auto|codex|unified] [--allow-overwrite]\n"
        "      apply the patch on stdin (Codex '*** Begin Patch' or a unified diff) to\n"
        "      every file it names, all or nothing; prints the files changed",
    .groups = CLI_GROUPS(
        CLI_TITLE("Options (before or after OP):"),
        CLI_OWN(CLI_VALUE("root", 0, "DIR", OPT_ROOT, CLI_COMP_DIR,
                          "the folder to work on (else the first operand is a sandbox)"),
                CLI_STATE_ROOT_ROW,
                CLI_FLAG("json", 0, OPT_JSON,
                         "print one JSON object with \"ok\"; on failure the error object "
                         "{\"ok\":false,\"error\":{code,message}} too"),
                CLI_FLAG("read-only", 0, OPT_READ_ONLY, "refuse every change"),
                CLI_VALUE("deny", 0, "GLOB", OPT_DENY, CLI_COMP_NONE,
                          "make matching paths invisible (repeatable)")),
        &fs_op_group),
    .operands = CLI_OPERANDS({"NAME", CLI_COMP_SANDBOX, NULL}, {"OP", CLI_COMP_CHOICES, FS_OPS},
                             {"ARG...", CLI_COMP_FILE, NULL}),
    .notes = "Errors print one line 'sandpod: MESSAGE' on stderr.",
    .exit_status = "0 ok, 1 error (or 'exists' on a missing path), 2 bad usage.",
};

static const struct fs_op *find_op(const char *name)
{
    for (size_t i = 0; i < N_OPS; i++)
        if (strcmp(ops[i].name, name) == 0)
            return &ops[i];
    return NULL;
}

static bool op_takes(const struct fs_op *op, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(op->opts, name); p; p = strstr(p + 1, name))
        if (p[-1] == ' ' && p[n] == ' ')
            return true;
    return false;
}

/* Options allowed both before and after OP. Returns -1 when `opt` is not
 * one of them, else an exit code (0 = go on). */
static int global_option(struct fs_cli *c, int opt, const char *arg)
{
    switch (opt) {
    case OPT_ROOT:
        c->root = arg;
        return 0;
    case CLI_OPT_STATE_ROOT:
        c->state_root = arg;
        return 0;
    case OPT_JSON:
        c->json = true;
        return 0;
    case OPT_READ_ONLY:
        c->read_only = true;
        return 0;
    case OPT_DENY:
        c->deny[c->n_deny++] = arg;
        c->deny[c->n_deny] = NULL;
        return 0;
    default:
        return -1;
    }
}

static int parse_view(struct fs_cli *c, const char *arg)
{
    const char *colon = strchr(arg, ':');
    if (!colon)
        return cli_usage("fs", "--view takes START:END, e.g. 10:20 or 10:-1: '%s'", arg);
    char start[32];
    size_t n = (size_t)(colon - arg);
    if (n >= sizeof(start))
        return cli_usage("fs", "--view START is out of range: '%s'", arg);
    memcpy(start, arg, n);
    start[n] = '\0';
    long long s = 0, e = 0;
    if (cli_parse_ll("fs", "--view START", start, 1, LONG_MAX, &s) < 0 ||
        cli_parse_ll("fs", "--view END", colon + 1, -1, LONG_MAX, &e) < 0)
        return CLI_EXIT_USAGE;
    if (e != -1 && e < s)
        return cli_usage("fs", "--view END must be -1 or at least START: '%s'", arg);
    c->have_view = true;
    c->view_start = (long)s;
    c->view_end = (long)e;
    return 0;
}

static int op_option(struct fs_cli *c, int opt, const char *arg)
{
    long long v = 0;
    switch (opt) {
    case OPT_BASE64:
        c->base64 = true;
        return 0;
    case OPT_OFFSET:
        if (cli_parse_ll("fs", "--offset", arg, 0, LLONG_MAX, &c->offset) < 0)
            return CLI_EXIT_USAGE;
        c->have_offset = true;
        return 0;
    case OPT_LIMIT:
        if (cli_parse_ll("fs", "--limit", arg, 0, LLONG_MAX, &c->limit) < 0)
            return CLI_EXIT_USAGE;
        c->have_limit = true;
        return 0;
    case OPT_VIEW:
        return parse_view(c, arg);
    case OPT_MODE:
        c->mode = arg;
        return 0;
    case OPT_NO_PARENTS:
        c->no_parents = true;
        return 0;
    case OPT_DEPTH:
        if (cli_parse_ll("fs", "--depth", arg, 0, UINT_MAX, &v) < 0)
            return CLI_EXIT_USAGE;
        c->depth = (unsigned)v;
        c->have_depth = true;
        return 0;
    case OPT_MAX:
        return cli_parse_size("fs", "--max", arg, SIZE_MAX, &c->max) < 0 ? CLI_EXIT_USAGE : 0;
    case OPT_PATH:
        c->base = arg;
        return 0;
    case OPT_GLOB:
        c->globs[c->n_globs++] = arg;
        c->globs[c->n_globs] = NULL;
        return 0;
    case OPT_IGNORE:
        c->ignore[c->n_ignore++] = arg;
        c->ignore[c->n_ignore] = NULL;
        return 0;
    case OPT_NO_IGNORE:
        c->no_ignore = true;
        return 0;
    case OPT_HIDDEN:
        c->hidden = true;
        return 0;
    case OPT_ICASE:
        c->icase = true;
        return 0;
    case OPT_FIXED:
        c->fixed = true;
        return 0;
    case OPT_RECURSIVE:
        c->recursive = true;
        return 0;
    case OPT_PARENTS:
        c->parents = true;
        return 0;
    case OPT_EXIST_OK:
        c->exist_ok = true;
        return 0;
    case OPT_OLD:
        c->old_str = arg;
        return 0;
    case OPT_NEW:
        c->new_str = arg;
        return 0;
    case OPT_OLD_FILE:
        c->old_file = arg;
        return 0;
    case OPT_NEW_FILE:
        c->new_file = arg;
        return 0;
    case OPT_ALL:
        c->all = true;
        return 0;
    case OPT_LINE:
        if (cli_parse_ll("fs", "--line", arg, -1, LONG_MAX, &v) < 0)
            return CLI_EXIT_USAGE;
        c->line = (long)v;
        c->have_line = true;
        return 0;
    case OPT_DRY_RUN:
        c->dry_run = true;
        return 0;
    case OPT_FORMAT:
        c->format = arg;
        return 0;
    case OPT_ALLOW_OVERWRITE:
        c->allow_overwrite = true;
        return 0;
    case OPT_RAW:
        c->raw = true;
        return 0;
    default:
        return cli_usage("fs", "unknown option");
    }
}

/* Through a sandbox, operations that change files hold its edit lock
 * across their whole read-modify-write, as the tool suite does (see
 * sp_sandbox_edit_lock()), taken after stdin is read so that a slow writer
 * does not stall the others. *fd receives the lock (-1 for a bare --root
 * folder); returns 0 or the exit status of the failure it printed. */
static int fail(struct fs_cli *c, int code, sp_error *err);

static int edit_lock(struct fs_cli *c, int *fd)
{
    *fd = -1;
    if (!c->sb || c->read_only)
        return 0;
    sp_error *err = NULL;
    int r = sp_sandbox_edit_lock(c->sb, &err);
    if (r < 0)
        return fail(c, r, err);
    *fd = r;
    return 0;
}

static void edit_unlock(int fd)
{
    sp_sandbox_edit_unlock(fd);
}

/* Report a library failure the way the output mode asks for. */
static int fail(struct fs_cli *c, int code, sp_error *err)
{
    int rc = c->json ? cli_json_error(code, err) : cli_sp_error(code, err);
    sp_error_free(err);
    return rc;
}

/* fail() for an error of the command's own, with a reason for --json. */
static int fail_own(struct fs_cli *c, int code, int reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail_own(struct fs_cli *c, int code, int reason, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    sp_error e = {code, 0, msg, reason};
    return c->json ? cli_json_error(code, &e) : cli_sp_error(code, &e);
}

/* The normalized form of a path for JSON answers; the path as given when
 * it does not normalize (the operation will have said why). */
static char *norm_path(const char *path)
{
    char *out = NULL;
    if (sp_fs_path_normalize(&out, path, strlen(path), NULL) < 0 || !out)
        return strdup(path);
    return out;
}

/* A JSON answer {path, <key>: value} for operations without a result type. */
static int print_path_result(const char *path, const char *key, cJSON *value)
{
    cJSON *o = cJSON_CreateObject();
    char *p = norm_path(path);
    bool ok = o && p && (value || !key) && sp_json_add_string(o, "path", p);
    free(p);
    if (ok && key) {
        ok = cJSON_AddItemToObject(o, key, value);
        value = ok ? NULL : value;
    }
    cJSON_Delete(value);
    if (!ok) {
        cJSON_Delete(o);
        return cli_error("out of memory");
    }
    return cli_print_result(o);
}

/* Write bytes to stdout; a write error is reported once at exit. */
static void put_bytes(const void *data, size_t len)
{
    if (len)
        fwrite(data, 1, len, stdout);
}

/* ------------------------------------------------------------- the ops -- */

/* A whole file as base64: printed, or as the read_file tool's binary
 * answer with --json. */
static int read_base64(struct fs_cli *c, const char *path)
{
    sp_fs_bytes *b = NULL;
    sp_error *err = NULL;
    int rc = sp_fs_read_bytes(&b, c->fs, path, 0, 0, &err);
    if (rc < 0)
        return fail(c, rc, err);
    if (b->truncated) {
        sp_fs_bytes_free(b);
        return fail_own(c, SP_ETOOBIG, SP_R_TOO_LARGE,
                        "%s is over the read limit; use 'sandpod fs cat' instead", path);
    }
    char *enc = sp_base64_encode(b->data, b->len);
    if (!enc) {
        sp_fs_bytes_free(b);
        return cli_error("out of memory");
    }
    if (c->json) {
        cJSON *o = cJSON_CreateObject();
        char *p = norm_path(path);
        if (o && p && sp_json_add_string(o, "path", p) && sp_json_add_string(o, "mode", "binary") &&
            sp_json_add_string(o, "mime", sp_mime_sniff(b->data, b->len)) &&
            sp_json_add_u64(o, "size", b->len) && sp_json_add_string(o, "encoding", "base64") &&
            sp_json_add_string(o, "base64", enc)) {
            rc = cli_print_result(o);
        } else {
            cJSON_Delete(o);
            rc = cli_error("out of memory");
        }
        free(p);
    } else {
        puts(enc);
        rc = CLI_EXIT_OK;
    }
    free(enc);
    sp_fs_bytes_free(b);
    return rc;
}

static int op_read(struct fs_cli *c)
{
    const char *path = c->args[0];
    if (c->have_view && (c->have_offset || c->have_limit))
        return cli_usage("fs", "--view cannot be combined with --offset or --limit");
    if (c->base64 && (c->have_view || c->have_offset || c->have_limit))
        return cli_usage("fs", "--base64 reads the whole file: no --view, --offset or --limit");
    if ((unsigned long long)c->offset > SIZE_MAX || (unsigned long long)c->limit > SIZE_MAX)
        return cli_usage("fs", "--offset or --limit is out of range");
    if (c->base64)
        return read_base64(c, path);

    /* 1-based, 0 read as 1: the read_file tool's offset. */
    size_t start = c->offset > 1 ? (size_t)c->offset - 1 : 0;
    sp_fs_text *t = NULL;
    sp_error *err = NULL;
    int rc;
    if (c->have_view) {
        rc = sp_fs_view(&t, c->fs, path, c->view_start, c->view_end, &err);
    } else {
        sp_fs_read_opts o = SP_FS_READ_OPTS_INIT;
        o.offset = start;
        o.limit = (size_t)c->limit;
        rc = sp_fs_read(&t, c->fs, path, &o, &err);
    }
    if (rc == SP_EINVAL && err && err->reason == SP_R_NOT_TEXT && c->json) {
        sp_error_free(err);
        return read_base64(c, path);
    }
    if (rc < 0)
        return fail(c, rc, err);
    if (!c->have_view && start > 0 && start >= t->total_lines) {
        size_t total = t->total_lines;
        sp_fs_text_free(t);
        return fail_own(c, SP_EINVAL, SP_R_NONE, "--offset %zu is past the end: %s has %zu line%s",
                        start + 1, path, total, total == 1 ? "" : "s");
    }

    if (c->json) {
        rc = cli_print_result(sp_json_fs_text(t));
        sp_fs_text_free(t);
        return rc;
    }
    /* The file is the workload's: on a terminal its escape sequences must
     * not reach the terminal. */
    cli_put_text(stdout, t->content, t->content_len, c->raw);
    if (t->lines_cut)
        cli_error("%zu long line%s cut short; 'sandpod fs cat' shows whole lines", t->lines_cut,
                  t->lines_cut == 1 ? " was" : "s were");
    if (t->truncated) {
        size_t next = t->offset + t->lines;
        if (c->have_view)
            cli_error("showing lines %zu-%zu of %zu; continue with --view %zu:-1", t->offset + 1,
                      next, t->total_lines, next + 1);
        else
            cli_error("showing lines %zu-%zu of %zu; continue with --offset %zu", t->offset + 1,
                      next, t->total_lines, next + 1);
    }
    sp_fs_text_free(t);
    return CLI_EXIT_OK;
}

static int op_cat(struct fs_cli *c)
{
    const char *path = c->args[0];
    uint64_t offset = (uint64_t)c->offset;
    if ((unsigned long long)c->limit > SIZE_MAX)
        return cli_usage("fs", "--limit is out of range");
    sp_fs_bytes *b = NULL;
    sp_error *err = NULL;
    int rc;

    if (c->json || c->have_limit) {
        /* One answer: JSON describes a single slice, and --limit asks for one. */
        rc = sp_fs_read_bytes(&b, c->fs, path, offset, (size_t)c->limit, &err);
        if (rc < 0)
            return fail(c, rc, err);
        if (c->json) {
            rc = cli_print_result(sp_json_fs_bytes(b));
        } else {
            put_bytes(b->data, b->len);
            rc = CLI_EXIT_OK;
        }
        sp_fs_bytes_free(b);
        return rc;
    }

    /* Stream the file in bounded slices so any size can be shown. */
    for (;;) {
        rc = sp_fs_read_bytes(&b, c->fs, path, offset, CAT_CHUNK, &err);
        if (rc < 0)
            return fail(c, rc, err);
        put_bytes(b->data, b->len);
        bool more = b->truncated && b->len > 0;
        offset += b->len;
        sp_fs_bytes_free(b);
        b = NULL;
        if (!more || ferror(stdout))
            return CLI_EXIT_OK;
    }
}

static int op_write(struct fs_cli *c)
{
    const char *path = c->args[0];
    sp_fs_write_opts o = SP_FS_WRITE_OPTS_INIT;
    if (!c->mode || strcmp(c->mode, "overwrite") == 0)
        o.mode = SP_FS_OVERWRITE;
    else if (strcmp(c->mode, "create") == 0)
        o.mode = SP_FS_CREATE;
    else if (strcmp(c->mode, "append") == 0)
        o.mode = SP_FS_APPEND;
    else
        return cli_usage("fs", "--mode must be create, overwrite or append: '%s'", c->mode);
    o.no_create_parents = c->no_parents;

    char *data = NULL;
    size_t len = 0;
    if (cli_read_fd(STDIN_FILENO, CLI_MAX_INPUT, &data, &len) < 0)
        return cli_error("reading stdin: %s", strerror(errno));
    if (c->base64) {
        /* base64(1) wraps its lines: line breaks go, anything else is strict. */
        size_t k = 0;
        for (size_t i = 0; i < len; i++)
            if (data[i] != '\n' && data[i] != '\r')
                data[k++] = data[i];
        uint8_t *bytes = NULL;
        size_t n = 0;
        char *why = NULL;
        int r = sp_base64_decode(&bytes, &n, data, k, &why);
        free(data);
        if (r < 0) {
            r = fail_own(c, SP_EINVAL, SP_R_NONE,
                         "stdin is not valid base64: %s; nothing was written", why);
            free(why);
            return r;
        }
        data = (char *)bytes;
        len = n;
    }

    size_t written = 0;
    sp_error *err = NULL;
    int lock;
    int rc = edit_lock(c, &lock);
    if (rc) {
        free(data);
        return rc;
    }
    rc = sp_fs_write_bytes(&written, c->fs, path, data, len, &o, &err);
    edit_unlock(lock);
    free(data);
    if (rc < 0)
        return fail(c, rc, err);
    if (c->json) {
        char *p = norm_path(path);
        rc = cli_print_result(p ? sp_json_fs_written(p, written) : NULL);
        free(p);
        return rc;
    }
    printf("wrote %zu byte%s to ", written, written == 1 ? "" : "s");
    cli_put_name(stdout, path);
    putchar('\n');
    return CLI_EXIT_OK;
}

static void put_mtime(int64_t ns)
{
    int64_t sec = ns / 1000000000;
    if (ns % 1000000000 < 0)
        sec--;
    time_t t = (time_t)sec;
    struct tm tm;
    char buf[32];
    if (!localtime_r(&t, &tm) || strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M", &tm) == 0)
        snprintf(buf, sizeof(buf), "?");
    printf("%-16s", buf);
}

static int op_ls(struct fs_cli *c)
{
    const char *path = c->nargs > 0 ? c->args[0] : ".";
    sp_fs_list_opts o = SP_FS_LIST_OPTS_INIT;
    if (c->have_depth)
        o.depth = c->depth;
    o.max_entries = c->max;
    static const char *const none[] = {NULL};
    o.ignore = c->no_ignore ? none : c->n_ignore ? c->ignore : NULL;

    sp_fs_entries *e = NULL;
    sp_error *err = NULL;
    int rc = sp_fs_list(&e, c->fs, path, &o, &err);
    if (rc < 0)
        return fail(c, rc, err);
    if (c->json) {
        rc = cli_print_result(sp_json_fs_entries(e));
        sp_fs_entries_free(e);
        return rc;
    }
    for (size_t i = 0; i < e->n; i++) {
        const sp_fs_entry *x = &e->v[i];
        if (x->type == SP_FS_DIR)
            printf("%12s  ", "-");
        else
            printf("%12" PRIu64 "  ", x->size);
        put_mtime(x->mtime_ns);
        printf("  ");
        cli_put_name(stdout, x->path);
        switch (x->type) {
        case SP_FS_DIR:
            putchar('/');
            break;
        case SP_FS_SYMLINK:
            fputs("@ -> ", stdout);
            cli_put_name(stdout, x->link_target ? x->link_target : "?");
            break;
        case SP_FS_FILE:
            if (x->mode & 0111)
                putchar('*');
            break;
        default:
            putchar('|');
            break;
        }
        putchar('\n');
    }
    if (e->truncated)
        cli_error("listing stopped after %zu entr%s; raise --max to see more", e->n,
                  e->n == 1 ? "y" : "ies");
    sp_fs_entries_free(e);
    return CLI_EXIT_OK;
}

static int op_glob(struct fs_cli *c)
{
    sp_fs_glob_opts o = SP_FS_GLOB_OPTS_INIT;
    o.base = c->base;
    o.max_entries = c->max;
    o.hidden = c->hidden;
    sp_fs_entries *e = NULL;
    sp_error *err = NULL;
    int rc = sp_fs_glob_ex(&e, c->fs, c->args[0], &o, &err);
    if (rc < 0)
        return fail(c, rc, err);
    if (c->json) {
        rc = cli_print_result(sp_json_fs_entries(e));
        sp_fs_entries_free(e);
        return rc;
    }
    for (size_t i = 0; i < e->n; i++) {
        cli_put_name(stdout, e->v[i].path);
        putchar('\n');
    }
    if (e->truncated)
        cli_error("glob stopped after %zu path%s; raise --max to see more", e->n,
                  e->n == 1 ? "" : "s");
    sp_fs_entries_free(e);
    return CLI_EXIT_OK;
}

/* A matched line for a terminal: tabs stay, other control bytes are shown
 * as \xNN (the line comes from an untrusted file). */
static void put_line(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    /* Runs of plain bytes in one fwrite: a putchar per byte (each taking
     * the stdio lock) was a tenth of a grep with many matches. */
    while (*p) {
        size_t n = 0;
        while (p[n] && !((p[n] < 0x20 && p[n] != '\t') || p[n] == 0x7f))
            n++;
        fwrite(p, 1, n, stdout);
        p += n;
        if (*p)
            printf("\\x%02x", *p++);
    }
}

static int op_grep(struct fs_cli *c)
{
    sp_fs_grep_opts o = SP_FS_GREP_OPTS_INIT;
    o.path = c->nargs > 1 ? c->args[1] : NULL;
    o.globs = c->n_globs ? c->globs : NULL;
    o.no_ignore = c->no_ignore;
    o.hidden = c->hidden;
    o.max_matches = c->max;
    o.case_insensitive = c->icase;
    o.fixed_string = c->fixed;

    sp_fs_matches *m = NULL;
    sp_error *err = NULL;
    int rc = sp_fs_grep(&m, c->fs, c->args[0], &o, &err);
    if (rc < 0)
        return fail(c, rc, err);
    if (c->json) {
        rc = cli_print_result(sp_json_fs_matches(m));
        sp_fs_matches_free(m);
        return rc;
    }
    for (size_t i = 0; i < m->n; i++) {
        const sp_fs_match *x = &m->v[i];
        cli_put_name(stdout, x->path);
        printf(":%zu:", x->line_number);
        put_line(x->line ? x->line : "");
        putchar('\n');
    }
    if (m->truncated)
        cli_error("search stopped after %zu match%s; raise --max to see more", m->n,
                  m->n == 1 ? "" : "es");
    sp_fs_matches_free(m);
    return CLI_EXIT_OK;
}

static int op_stat(struct fs_cli *c)
{
    sp_fs_info *st = NULL;
    sp_error *err = NULL;
    int rc = sp_fs_stat(&st, c->fs, c->args[0], &err);
    if (rc < 0)
        return fail(c, rc, err);
    if (c->json) {
        rc = cli_print_result(sp_json_fs_info(st));
        sp_fs_info_free(st);
        return rc;
    }
    fputs("path:     ", stdout);
    cli_put_name(stdout, st->path);
    printf("\ntype:     %s\nsize:     %" PRIu64 "\nmode:     %04o\nmodified: ",
           sp_fs_type_name(st->type), st->size, st->mode & 07777u);
    put_mtime(st->mtime_ns);
    fputs("\naccessed: ", stdout);
    put_mtime(st->atime_ns);
    fputs("\ncreated:  ", stdout);
    if (st->btime_ns)
        put_mtime(st->btime_ns);
    else
        fputs("unknown", stdout);
    printf("\naccess:   %s%s\n", st->readable ? "readable" : "not readable",
           st->writable ? ", writable" : ", not writable");
    if (st->type == SP_FS_SYMLINK) {
        fputs("link:     ", stdout);
        cli_put_name(stdout, st->link_target ? st->link_target : "?");
        if (st->target_in_image)
            fputs(" (into the container's image: never followed here)", stdout);
        else if (st->target_escapes)
            fputs(" (leaves the workspace or dangles)", stdout);
        putchar('\n');
    }
    sp_fs_info_free(st);
    return CLI_EXIT_OK;
}

static int op_exists(struct fs_cli *c)
{
    bool yes = sp_fs_exists(c->fs, c->args[0]);
    if (c->json) {
        int rc = print_path_result(c->args[0], "exists", cJSON_CreateBool(yes));
        return rc ? rc : (yes ? CLI_EXIT_OK : CLI_EXIT_ERROR);
    }
    puts(yes ? "true" : "false");
    return yes ? CLI_EXIT_OK : CLI_EXIT_ERROR;
}

static int op_rm(struct fs_cli *c)
{
    sp_error *err = NULL;
    int lock;
    int rc = edit_lock(c, &lock);
    if (rc)
        return rc;
    rc = sp_fs_delete(c->fs, c->args[0], c->recursive, &err);
    edit_unlock(lock);
    if (rc < 0)
        return fail(c, rc, err);
    return c->json ? print_path_result(c->args[0], "deleted", cJSON_CreateTrue()) : CLI_EXIT_OK;
}

static int op_mkdir(struct fs_cli *c)
{
    sp_error *err = NULL;
    /* Like mkdir -p: asking for the parents means wanting the folder to be
     * there, not wanting it to be new. */
    int rc = sp_fs_mkdir(c->fs, c->args[0], c->parents, c->parents || c->exist_ok, &err);
    if (rc < 0)
        return fail(c, rc, err);
    return c->json ? print_path_result(c->args[0], NULL, NULL) : CLI_EXIT_OK;
}

/* One side of an edit: the string given inline, or a host file's content. */
static int edit_string(const char *inline_str, const char *file, const char *what, char **out)
{
    if (inline_str && file)
        return cli_usage("fs", "give --%s or --%s-file, not both", what, what);
    if (!inline_str && !file)
        return cli_usage("fs", "edit needs --%s STR or --%s-file FILE", what, what);
    if (inline_str) {
        *out = strdup(inline_str);
        return *out ? 0 : cli_error("out of memory");
    }
    size_t len = 0;
    if (cli_read_file(file, CLI_MAX_INPUT, out, &len) < 0)
        return cli_error("reading %s: %s", strcmp(file, "-") == 0 ? "stdin" : file,
                         strerror(errno));
    if (memchr(*out, '\0', len)) {
        free(*out);
        *out = NULL;
        return cli_usage("fs", "--%s-file holds a NUL byte", what);
    }
    return 0;
}

static int op_edit(struct fs_cli *c)
{
    if (c->old_file && c->new_file && strcmp(c->old_file, "-") == 0 &&
        strcmp(c->new_file, "-") == 0)
        return cli_usage("fs", "only one of --old-file and --new-file can be stdin");
    char *old_s = NULL, *new_s = NULL;
    int rc = edit_string(c->old_str, c->old_file, "old", &old_s);
    if (rc == 0)
        rc = edit_string(c->new_str, c->new_file, "new", &new_s);
    if (rc != 0) {
        free(old_s);
        free(new_s);
        return rc;
    }
    size_t replaced = 0;
    sp_error *err = NULL;
    int lock;
    rc = edit_lock(c, &lock);
    if (rc == 0)
        rc = sp_fs_str_replace(&replaced, c->fs, c->args[0], old_s, new_s, c->all, &err);
    edit_unlock(lock);
    free(old_s);
    free(new_s);
    if (rc < 0)
        return fail(c, rc, err);
    if (rc > 0)
        return rc;
    if (c->json)
        return print_path_result(c->args[0], "replaced", cJSON_CreateNumber((double)replaced));
    printf("replaced %zu occurrence%s in ", replaced, replaced == 1 ? "" : "s");
    cli_put_name(stdout, c->args[0]);
    putchar('\n');
    return CLI_EXIT_OK;
}

static int op_insert(struct fs_cli *c)
{
    if (!c->have_line)
        return cli_usage("fs", "insert needs --line N (0 = at the start, -1 = at the end)");
    char *text = NULL;
    size_t len = 0;
    if (cli_read_fd(STDIN_FILENO, CLI_MAX_INPUT, &text, &len) < 0)
        return cli_error("reading stdin: %s", strerror(errno));
    if (memchr(text, '\0', len)) {
        free(text);
        return cli_usage("fs", "the text to insert holds a NUL byte");
    }
    sp_error *err = NULL;
    int lock;
    int rc = edit_lock(c, &lock);
    if (rc) {
        free(text);
        return rc;
    }
    rc = sp_fs_insert(c->fs, c->args[0], c->line, text, &err);
    edit_unlock(lock);
    free(text);
    if (rc < 0)
        return fail(c, rc, err);
    if (c->json)
        return print_path_result(c->args[0], "line", cJSON_CreateNumber((double)c->line));
    if (c->line == 0)
        fputs("inserted at the start of ", stdout);
    else if (c->line < 0)
        fputs("inserted at the end of ", stdout);
    else
        printf("inserted after line %ld of ", c->line);
    cli_put_name(stdout, c->args[0]);
    putchar('\n');
    return CLI_EXIT_OK;
}

/* One letter per action, as git's --name-status. */
static char action_letter(sp_patch_action a)
{
    switch (a) {
    case SP_PATCH_ADD:
        return 'A';
    case SP_PATCH_DELETE:
        return 'D';
    case SP_PATCH_MOVE:
        return 'R';
    case SP_PATCH_COPY:
        return 'C';
    default:
        return 'M';
    }
}

static cJSON *patch_json(const sp_patch_result *res)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *files = cJSON_CreateArray();
    bool ok = o && files && sp_json_add_string(o, "format", sp_patch_format_name(res->format)) &&
              cJSON_AddBoolToObject(o, "dry_run", res->dry_run) &&
              sp_json_add_u64(o, "count", res->n);
    for (size_t i = 0; ok && i < res->n; i++) {
        const sp_patch_file *f = &res->files[i];
        cJSON *e = cJSON_CreateObject();
        char mode[8];
        snprintf(mode, sizeof(mode), "%04o", f->mode & 07777u);
        ok = e && sp_json_add_string(e, "action", sp_patch_action_name(f->action)) &&
             sp_json_add_string(e, "path", f->path) &&
             (!f->new_path || sp_json_add_string(e, "new_path", f->new_path)) &&
             sp_json_add_u64(e, "lines_added", f->lines_added) &&
             sp_json_add_u64(e, "lines_removed", f->lines_removed) &&
             sp_json_add_u64(e, "bytes_written", f->bytes_written) &&
             (f->action == SP_PATCH_DELETE || sp_json_add_string(e, "mode", mode));
        if (ok && !cJSON_AddItemToArray(files, e))
            ok = false;
        else if (!ok)
            cJSON_Delete(e);
    }
    if (ok && cJSON_AddItemToObject(o, "files", files))
        return o;
    cJSON_Delete(files);
    cJSON_Delete(o);
    return NULL;
}

static int op_patch(struct fs_cli *c)
{
    sp_patch_opts o = SP_PATCH_OPTS_INIT;
    if (!c->format || strcmp(c->format, "auto") == 0)
        o.format = SP_PATCH_AUTO;
    else if (strcmp(c->format, "codex") == 0)
        o.format = SP_PATCH_CODEX;
    else if (strcmp(c->format, "unified") == 0)
        o.format = SP_PATCH_UNIFIED;
    else
        return cli_usage("fs", "--format must be auto, codex or unified: '%s'", c->format);
    o.dry_run = c->dry_run;
    o.allow_overwrite = c->allow_overwrite;

    char *text = NULL;
    size_t len = 0;
    if (cli_read_fd(STDIN_FILENO, CLI_MAX_INPUT, &text, &len) < 0)
        return cli_error("reading stdin: %s", strerror(errno));
    sp_patch_result *res = NULL;
    sp_error *err = NULL;
    int lock;
    int rc = edit_lock(c, &lock);
    if (rc) {
        free(text);
        return rc;
    }
    rc = sp_fs_apply_patch(&res, c->fs, text, len, &o, &err);
    edit_unlock(lock);
    free(text);
    if (rc < 0)
        return fail(c, rc, err);
    if (c->json) {
        rc = cli_print_result(patch_json(res));
        sp_patch_result_free(res);
        return rc;
    }
    for (size_t i = 0; i < res->n; i++) {
        const sp_patch_file *f = &res->files[i];
        printf("%c  ", action_letter(f->action));
        cli_put_name(stdout, f->path);
        if (f->new_path) {
            fputs(" -> ", stdout);
            cli_put_name(stdout, f->new_path);
        }
        if (f->lines_added || f->lines_removed)
            printf("  +%zu -%zu", f->lines_added, f->lines_removed);
        putchar('\n');
    }
    if (res->dry_run)
        cli_error("dry run: nothing was written");
    sp_patch_result_free(res);
    return CLI_EXIT_OK;
}

/* ---------------------------------------------------------- the command -- */

static int parse_op_args(struct fs_cli *c, const struct fs_op *op, int argc, char **argv,
                         bool *want_help)
{
    optind = 0; /* glibc: start over on a new argv */
    int opt;
    while ((opt = cli_next(&cli_spec_fs, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP) {
            *want_help = true;
            return 0;
        }
        if (opt == CLI_GETOPT_BAD)
            return CLI_EXIT_USAGE;
        int rc = global_option(c, opt, optarg);
        if (rc >= 0) {
            if (rc)
                return rc;
            continue;
        }
        const char *name = cli_spec_long_name(&cli_spec_fs, opt);
        if (!op_takes(op, name))
            return cli_usage("fs", "option '--%s' does not apply to '%s'", name, op->name);
        rc = op_option(c, opt, optarg);
        if (rc)
            return rc;
    }
    c->args = argv + optind;
    c->nargs = argc - optind;
    if (c->nargs < op->min_args)
        return cli_usage("fs", "missing operand; usage: sandpod fs %s", op->usage);
    if (c->nargs > op->max_args)
        return cli_usage("fs", "unexpected argument '%s' for '%s'", c->args[op->max_args],
                         op->name);
    return 0;
}

/* Where in argv an option's value given as FILE sits: the word itself
 * (--old-file F) or past the '=' (--old-file=F); -1 when absent. */
static int value_word(int argc, char **argv, const char *value, bool *joined)
{
    for (int i = 0; value && i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        if (argv[i] == value || (eq && eq + 1 == value)) {
            *joined = argv[i] != value;
            return i;
        }
    }
    return -1;
}

/* The command line of a sandbox on another engine, run by the sandpod
 * peer beside the workload on its own workspace (its fs code contains the
 * paths): NAME gives way to --root /workspace; the host files of edit are
 * read here and sent as strings. Its stdin (for write, insert and patch),
 * stdout, stderr and exit status are this command's. */
static int fs_in_peer(struct fs_cli *c, int argc, char **argv, int name_at)
{
    const char **args = calloc((size_t)argc + 4, sizeof(char *));
    char *text[2] = {NULL, NULL};
    if (!args)
        return cli_error("out of memory");
    int rc = 0;
    bool joined[2] = {false, false};
    int at[2] = {-1, -1};
    if (strcmp(c->op, "edit") == 0) {
        const char *file[2] = {c->old_file, c->new_file};
        const char *what[2] = {"old", "new"};
        if (c->old_file && c->new_file && strcmp(c->old_file, "-") == 0 &&
            strcmp(c->new_file, "-") == 0)
            rc = cli_usage("fs", "only one of --old-file and --new-file can be stdin");
        for (int i = 0; i < 2 && rc == 0; i++) {
            if (!file[i])
                continue;
            at[i] = value_word(argc, argv, file[i], &joined[i]);
            rc = edit_string(NULL, file[i], what[i], &text[i]);
        }
    }
    /* --state-root is this host's: not the peer's business. */
    bool sr_joined = false;
    int sr_at = value_word(argc, argv, c->state_root, &sr_joined);
    size_t n = 0;
    args[n++] = "fs";
    args[n++] = "--root";
    args[n++] = "/workspace";
    for (int i = 1; rc == 0 && i < argc; i++) {
        if (i == name_at || i == sr_at || (!sr_joined && i + 1 == sr_at))
            continue;
        int side = i == at[0] ? 0 : i == at[1] ? 1 : -1;
        if (side >= 0) {
            if (!joined[side])
                n--; /* the --old-file word before it */
            args[n++] = side ? "--new" : "--old";
            args[n++] = text[side];
            continue;
        }
        args[n++] = argv[i];
    }
    args[n] = NULL;
    if (rc == 0) {
        bool input = strcmp(c->op, "write") == 0 || strcmp(c->op, "insert") == 0 ||
                     strcmp(c->op, "patch") == 0;
        fflush(stdout);
        int code = -1;
        sp_error *err = NULL;
        int r = sp_sandbox_peer_command_in(c->sb, args, input ? STDIN_FILENO : -1, STDOUT_FILENO,
                                           STDERR_FILENO, &code, &err);
        if (r < 0)
            rc = fail(c, r, err);
        else
            rc = code < 0 || code > 125 ? CLI_EXIT_ERROR : code;
    }
    free(text[0]);
    free(text[1]);
    free(args);
    return rc;
}

int cmd_fs(int argc, char **argv)
{
    struct fs_cli c;
    memset(&c, 0, sizeof(c));
    sp_sandbox *sb = NULL;
    /* Each repeatable option can appear at most argc times. */
    c.deny = calloc((size_t)argc + 1, sizeof(*c.deny));
    c.globs = calloc((size_t)argc + 1, sizeof(*c.globs));
    c.ignore = calloc((size_t)argc + 1, sizeof(*c.ignore));
    if (!c.deny || !c.globs || !c.ignore) {
        free(c.deny);
        free(c.globs);
        free(c.ignore);
        return cli_error("out of memory");
    }

    int rc = 0;
    int opt, op_at = argc; /* where the operation's words start */
    int name_at = -1;
    optind = 0;
    while ((opt = cli_next(&cli_spec_fs, argc, argv, CLI_NEXT_STOP | CLI_NEXT_BEFORE_OPERAND)) !=
           -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        if (opt == CLI_GETOPT_BAD) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        rc = global_option(&c, opt, optarg);
        if (rc)
            goto done;
    }
    if (optind >= argc) {
        rc = cli_usage("fs", "missing operation");
        goto done;
    }
    /* NAME OP ...: without --root so far, unless the first operand is an
     * operation not followed by another (the --root may still come). */
    if (!c.root && (!find_op(argv[optind]) || (optind + 1 < argc && find_op(argv[optind + 1])))) {
        name_at = optind;
        c.sandbox = argv[optind++];
        if (optind >= argc) {
            rc = cli_usage("fs", "missing operation after sandbox '%s'", c.sandbox);
            goto done;
        }
    }
    c.op = argv[optind];
    op_at = optind;
    if (strcmp(c.op, "--help") == 0 || strcmp(c.op, "-h") == 0) {
        cli_help(stdout, &cli_spec_fs);
        goto done;
    }
    const struct fs_op *op = find_op(c.op);
    if (!op) {
        const char *names[N_OPS + 1];
        for (size_t i = 0; i < N_OPS; i++)
            names[i] = ops[i].name;
        names[N_OPS] = NULL;
        rc = cli_usage_near("fs", cli_suggest(c.op, names), "unknown operation '%s'", c.op);
        goto done;
    }
    bool want_help = false;
    rc = parse_op_args(&c, op, argc - optind, argv + optind, &want_help);
    if (rc || want_help)
        goto done;
    if (c.sandbox && c.root) {
        rc = cli_usage("fs", "give --root DIR or a sandbox NAME, not both");
        goto done;
    }
    if (!c.root && !c.sandbox) {
        rc = cli_usage("fs", "missing --root DIR or sandbox NAME");
        goto done;
    }

    sp_error *err = NULL;
    if (c.sandbox) {
        sp_sandbox_opts so = SP_SANDBOX_OPTS_INIT;
        so.state_root = c.state_root;
        rc = sp_sandbox_open(&sb, c.sandbox, &so, &err);
        if (rc < 0) {
            rc = fail(&c, rc, err);
            goto done;
        }
        c.root = sp_sandbox_workspace(sb);
        c.sb = sb;
        if (!c.root) {
            rc = fs_in_peer(&c, argc, argv, name_at);
            goto done;
        }
    }
    sp_fs_opts fo = SP_FS_OPTS_INIT;
    fo.read_only = c.read_only;
    fo.deny = c.n_deny ? c.deny : NULL;
    rc = sp_fs_open(&c.fs, c.root, &fo, &err);
    if (rc < 0) {
        rc = fail(&c, rc, err);
        goto done;
    }
    rc = op->fn(&c);

done:
    cli_event(sb, "fs", (const char *const *)argv + op_at, rc);
    sp_fs_free(c.fs);
    sp_sandbox_free(sb);
    free(c.deny);
    free(c.globs);
    free(c.ignore);
    return rc;
}
