/* Helpers shared by the sandpod subcommands: one way to report errors, one
 * mapping to exit codes, number parsing, stdin, JSON output.
 *
 * Every message a subcommand shows the user goes through cli_error(),
 * cli_usage() or cli_sp_error(), so errors always read as exactly one line
 * `sandpod: <message>` on stderr. */
#ifndef SANDPOD_CLI_H
#define SANDPOD_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cJSON.h>

#include "sandpod.h"
#include "sandpod/sandbox.h"
#include "cli_spec.h"
#include "tools.h"

#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* Exit codes of every subcommand (exec and sh excepted: they pass on the
 * command's own code). */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_ERROR = 1,
    CLI_EXIT_USAGE = 2,
    /* `exec`: sandpod itself failed, not the command (docker's 125). */
    CLI_EXIT_OWN_FAILURE = 125,
};

/* The largest input read from stdin or from a --*-file option. The library
 * enforces its own, smaller, limits with a clear message; this one only keeps
 * a runaway pipe from eating the machine's memory. */
#define CLI_MAX_INPUT ((size_t)1 << 30)

/* Subcommand entry points. argv[0] is the subcommand's name. */
int cmd_fs(int argc, char **argv);
int cmd_hydrate(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_start(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_restart(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_gc(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_logs(int argc, char **argv);
int cmd_network(int argc, char **argv);
int cmd_secret(int argc, char **argv);
int cmd_fork(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_sh(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_image(int argc, char **argv);

/* Print `sandpod: <message>` on stderr; returns CLI_EXIT_ERROR. */
int cli_error(const char *fmt, ...) CLI_PRINTF(1, 2);

/* Print `sandpod: <message> (see 'sandpod CMD --help')` on stderr; returns
 * CLI_EXIT_USAGE. `cmd` may be NULL for the top level. */
int cli_usage(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);

/* cli_usage() with a guess: `sandpod: <message> (did you mean 'NEAR'?)`
 * when `near` is not NULL, else the usual hint. */
int cli_usage_near(const char *cmd, const char *near, const char *fmt, ...) CLI_PRINTF(3, 4);

/* Whether usage errors also print {"ok":false,"error":{"code":"usage",...}}
 * on stdout: the command line asked for --json. */
void cli_usage_json(bool on);

/* Print a library error as `sandpod: <message>` (the code's name when err
 * carries no message) and return the exit code for `code`. */
int cli_sp_error(int code, const sp_error *err);

/* The exit code for a library result: 0 for SP_OK, 1 for any error. */
int cli_exit_code(int code);

/* Parse a whole decimal integer in [min, max]: no sign where min >= 0, no
 * leading or trailing junk, no overflow. Returns 0, or -1 after printing a
 * usage error naming `what` (the caller exits 2). */
int cli_parse_ll(const char *cmd, const char *what, const char *s, long long min, long long max,
                 long long *out);

/* Parse a size (a non-negative integer that fits size_t and max). */
int cli_parse_size(const char *cmd, const char *what, const char *s, size_t max, size_t *out);

/* Read all of fd into a malloc'd buffer with a NUL after the data. Returns 0,
 * or -1 with errno set (EFBIG past `max` bytes). */
int cli_read_fd(int fd, size_t max, char **out, size_t *len);

/* Read a whole file ("-" = stdin). Returns 0, or -1 with errno set. */
int cli_read_file(const char *path, size_t max, char **out, size_t *len);

/* Print a JSON value on stdout followed by a newline: indented when stdout
 * is a terminal, one line otherwise. Consumes `v` (which may be NULL: an
 * allocation failure, reported as an error). Returns an exit code. */
int cli_print_json(cJSON *v);

/* Print `v` like cli_print_json() after adding "ok": true when it is an
 * object without an "ok" member, so scripts can test .ok on every answer. */
int cli_print_result(cJSON *v);

/* Print an error both ways for --json callers: the error object on stdout
 * and the usual one line on stderr. Returns the exit code for `code`. */
int cli_json_error(int code, const sp_error *err);

/* Write a name for a human, to a terminal or not: control bytes and bytes
 * that are not UTF-8 become \xNN, C1 controls and bidirectional marks,
 * embeddings, overrides and isolates \uNNNN, a backslash \\, so that a
 * name from an untrusted workspace can neither break the line structure,
 * reorder what follows it, nor drive the terminal, and an escape is never
 * ambiguous. */
void cli_put_name(FILE *f, const char *s);

struct sp_apply_result;
/* The held-back entries of an apply result, review paths first ('?'),
 * then the rest ('!'), one line each with why (cmd_apply.c). */
void cli_apply_print_held(const struct sp_apply_result *res);
/* The same as a "held" array in o: [{path, hold, reason, count, target}]. */
void cli_apply_held_json(cJSON *o, const struct sp_apply_result *res);

/* Write text that came out of the sandbox (file content, command output)
 * to `f`. When `f` is a terminal and `raw` is false, every byte that would
 * act on the terminal instead of showing is written visibly, so that a
 * workload cannot set the clipboard (OSC 52), the window title, or move the
 * cursor to hide or forge what the user sees: C0 controls other than \n,
 * \t and a \r right before \n (CRLF line ends), DEL, and bytes that are not
 * UTF-8 become \xNN (ESC is \x1b, so a whole escape sequence shows as
 * text); the C1 controls U+0080-U+009F and the bidirectional controls
 * (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069) become \uNNNN. Everything
 * else, UTF-8 text included, is written as it is. To a pipe or a file, or
 * with `raw`, the bytes are written exactly. */
void cli_put_text(FILE *f, const char *data, size_t len, bool raw);

/* Flush stdout and report a failed write (a full disk, a closed pipe).
 * Returns `rc`, or CLI_EXIT_ERROR when stdout could not be written. */
int cli_finish(int rc);

/* ------------------------------------------------------------------------
 * Shared by the sandbox commands (defined in cmd_create.c).
 */

/* Long-option values shared by the sandbox commands; above any short
 * option. */
enum {
    CLI_OPT_STATE_ROOT = 0x1000,
    CLI_OPT_URL,
    CLI_OPT_NAME,
    CLI_OPT_IMAGE,
    CLI_OPT_MOUNT,
    CLI_OPT_ALLOWED_ROOT,
    CLI_OPT_NETWORK,
    CLI_OPT_MEMORY,
    CLI_OPT_CPUS,
    CLI_OPT_PIDS,
    CLI_OPT_TMPFS_SIZE,
    CLI_OPT_RW_ROOT,
    CLI_OPT_CAP_ADD,
    CLI_OPT_USERNS,
    CLI_OPT_SECCOMP,
    CLI_OPT_SETUP,
    CLI_OPT_SETUP_NETWORK,
    CLI_OPT_SETUP_TIMEOUT,
    CLI_OPT_PULL,
    CLI_OPT_TLS_VERIFY,
    CLI_OPT_ENGINE,
    CLI_OPT_ALLOW,
    CLI_OPT_DENY,
    CLI_OPT_EGRESS_HOSTS,
    CLI_OPT_EGRESS_CA,
    CLI_OPT_SETUP_ALLOW,
    CLI_OPT_SECRET,
    CLI_OPT_SECRET_FOR,
    CLI_OPT_SECRET_IN,
};

/* The --state-root row of cli_group_conn, for a command that takes it alone. */
#define CLI_STATE_ROOT_ROW                                                                         \
    CLI_VALUE("state-root", 0, "DIR", CLI_OPT_STATE_ROOT, CLI_COMP_DIR,                            \
              "where sandboxes live (default $SANDPOD_HOME, $XDG_DATA_HOME/sandpod, "              \
              "~/.local/share/sandpod)")

/* Where the sandboxes live and which Podman service to use. */
struct cli_conn {
    char *state_root; /* absolute, or NULL for the library's default */
    const char *url;  /* or NULL: SANDPOD_URL, then discovery */
};

/* Take --state-root or --url. Returns 1 when `opt` was one of them, 0 when
 * it was not, -1 after printing a usage error. */
int cli_conn_option(struct cli_conn *c, const char *cmd, int opt, const char *arg);
void cli_conn_dispose(struct cli_conn *c);

/* Options for sp_sandbox_open() / sp_podman_open() from --state-root/--url. */
sp_sandbox_opts cli_conn_sandbox_opts(const struct cli_conn *c);
sp_podman_opts cli_conn_podman_opts(const struct cli_conn *c);

/* Open sandbox `name`, reporting a failure (as JSON too when `json`).
 * Returns 0, or the exit code after the report. */
int cli_sandbox_open(sp_sandbox **out, const char *name, const struct cli_conn *c, bool json);

/* Report a library error the way the output mode asks for, free it, and
 * return the exit code. */
int cli_fail(bool json, int code, sp_error *err);

/* Record in the sandbox's events.jsonl (when sb is not NULL) that
 * `command` ran with the words (the command line) and ended with exit
 * status rc (cli_event.c). */
void cli_event(sp_sandbox *sb, const char *command, const char *const *words, int rc);

/* Parse a size: a whole number with an optional binary suffix K, M, G or T
 * (optionally followed by B or iB, any case). Zero is refused. Returns 0, or
 * -1 after a usage error naming `what`. */
int cli_parse_bytes(const char *cmd, const char *what, const char *s, uint64_t *out);

/* Write a byte count for a human: "512 B", "1.5 MiB". */
#include "progress.h" /* cli_format_bytes() */

/* An RFC 3339 UTC time ("2024-05-01T12:00:00Z") as local time for a human,
 * "2024-05-01 14:00"; the text as it is when it does not parse. */
void cli_local_time(char *buf, size_t size, const char *rfc3339);

/* A sandbox being created from the command line (create, run). */
struct cli_create {
    struct cli_conn conn;
    sp_sandbox_opts opts;
    sp_mount **parsed; /* each from sp_mount_spec_parse() */
    sp_mount *mounts;  /* shallow copies, contiguous, for opts.mounts */
    size_t n_mounts;
    const char **roots, **env, **caps, **pass, **setup, **allow, **deny, **setup_allow, **secret,
        **secret_for, **secret_in; /* NULL-terminated */
    size_t n_roots, n_env, n_caps, n_pass, n_setup, n_allow, n_deny, n_setup_allow, n_secret,
        n_secret_for, n_secret_in;
    bool json;        /* --json: no progress summary line (cmd/progress.h) */
    const char *from; /* --from NAME[:SNAP]: fork that sandbox (cmd_fork.c) */
    const char *tmpl; /* --template TEMPLATE: start from that template */
};

/* Prepare for up to argc repeated options. Returns 0 or an exit code. */
int cli_create_init(struct cli_create *c, int argc);
void cli_create_dispose(struct cli_create *c);

/* Take one option of cli_group_create or cli_group_conn. Returns 1 when
 * taken, 0 when `opt` is none of them, -1 after a usage error. */
int cli_create_option(struct cli_create *c, const char *cmd, int opt, const char *arg);

/* Create the sandbox, drawing hydration progress on stderr when it is a
 * terminal. */
/* The sandbox options the parsed create options come to (pointing into c). */
sp_sandbox_opts cli_create_opts(const struct cli_create *c);
int cli_create_sandbox(sp_sandbox **out, struct cli_create *c, sp_error **err);

/* Fork sandbox `origin` at snapshot `snap` (NULL: its newest) with the
 * options of c (name, connection, and the create options given, which
 * replace the origin's); cmd_fork.c. */
/* Print a new sandbox: its name, or with json the create result. */
int cli_print_created(sp_sandbox *sb, bool json);
int cli_fork_sandbox(sp_sandbox **out, struct cli_create *c, const char *origin, const char *snap,
                     sp_error **err);

/* ------------------------------------------------------------------------
 * Attached commands (defined in cmd_exec.c), for exec and run.
 */

/* Catch SIGINT, SIGTERM, SIGHUP and SIGWINCH (restarting system calls) so
 * that a long operation can end cleanly; ignore SIGPIPE. Idempotent. */
void cli_signals_catch(void);

/* The first of SIGINT, SIGTERM and SIGHUP caught so far, or 0. */
int cli_signal_caught(void);

/* A command to run with this process's stdio attached. */
struct cli_attach {
    const char *const *argv; /* NULL-terminated */
    const char *const *env;  /* extra "KEY=VALUE" entries, NULL-terminated, or NULL */
    const char *workdir;     /* NULL = the sandbox's */
    const char *user;        /* NULL = the sandbox's */
    bool interactive;        /* forward stdin */
    bool tty;                /* allocate a terminal (raw local terminal when stdin is one) */
};

/* Run a command in a running sandbox with stdio attached, until it ends or
 * a signal from cli_signals_catch() arrives (then *exit_code is 128 + the
 * signal). Returns 0 with *exit_code set (-1 when Podman did not say), or a
 * library error code with *err set; the local terminal is restored in every
 * case. */
int cli_attach_run(int *exit_code, sp_sandbox *sb, const struct cli_attach *a, sp_error **err);

/* Check that a sandbox is running; otherwise report why and how to recover
 * (`sandpod start NAME`). Returns 0 or an exit code after the report. */
int cli_require_running(sp_sandbox *sb, bool json);

/* ------------------------------------------------------------------------
 * Shared by the snapshot commands (defined in cmd_snapshot.c): snapshot,
 * snapshots, restore, diff, export. Each works on a sandbox NAME or on a
 * bare folder given as --root DIR --store DIR.
 */

enum {
    CLI_OPT_SNAP_ROOT = 0x2000,
    CLI_OPT_SNAP_STORE,
};

struct cli_snap {
    struct cli_conn conn;
    const char *root;  /* --root */
    const char *store; /* --store */
    bool json;
    sp_sandbox *sb;        /* the sandbox of the NAME form */
    sp_sandbox_snap *snap; /* its store, pausing the container (NAME form) */
    sp_snapstore *s;       /* the open store */
    bool progress;         /* a progress line is on stderr */
    bool none_ok;          /* a store never made is no error: cli_snap_open() sets none */
    bool none;             /* no store, so no snapshots (c->s is NULL) */
    /* A sandbox on another engine has its store beside its workload: the
     * command is then this tool call there (NULL: not possible), which
     * cli_snap_open() makes, printing its answer; it sets handled. */
    const char *remote_tool;
    char *remote_args; /* JSON object text (owned) */
    /* Or, when set, this does the command there (an archive's way). */
    int (*remote_fn)(struct cli_snap *c, void *ud);
    void *remote_ud;
    bool handled;
    /* Else the command line itself runs in the peer's container, NAME
     * replaced by its workspace and store (cli_snap_target() keeps it). */
    const char *cmd;
    int argc, name_at;
    char **argv;
};

/* Write an archive to `output` ("-": stdout) through write(fd): a file is
 * written beside its name and renamed into place when write succeeds, and
 * removed when it fails. Returns write's result. */
int cli_write_output(const char *output, int (*write)(int fd, void *ud), void *ud);

/* Take --root, --store, --state-root or --url. Returns 1 when taken, 0
 * when `opt` is none of them, -1 after a usage error. */
int cli_snap_option(struct cli_snap *c, const char *cmd, int opt, const char *arg);

/* The operands before SNAP: the sandbox NAME, unless --root was given.
 * Checks that --root and --store come together. Returns 0 with *name set
 * (NULL for the --root form), or an exit code after a usage error. */
int cli_snap_target(struct cli_snap *c, const char *cmd, int argc, char **argv, const char **name);

/* Open the snapshot store of sandbox `name` (pausing its container while a
 * snapshot reads or a restore writes, when it is running) or of --root and
 * --store. `create` makes a missing store. Progress goes to stderr when it
 * is a terminal. Returns 0 or an exit code after the report. */
int cli_snap_open(struct cli_snap *c, const char *name, bool create);
void cli_snap_close(struct cli_snap *c);

/* Clear a progress line left on stderr. */
void cli_snap_progress_end(struct cli_snap *c);

int cmd_snapshot(int argc, char **argv);
int cmd_snapshots(int argc, char **argv);
int cmd_restore(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_apply(int argc, char **argv);
int cmd_export(int argc, char **argv);

/* The model tool suite (defined in cmd_tools.c, cmd_call.c, cmd_mcp.c). */
int cmd_tools(int argc, char **argv);
int cmd_call(int argc, char **argv);
int cmd_mcp(int argc, char **argv);

/* Options that shape a tools context, shared by call and mcp (defined in
 * cmd_tools.c). */
enum {
    CLI_OPT_TOOLS_ROOT = 0x3000,
    CLI_OPT_TOOLS_STORE,
    CLI_OPT_TOOLS_APPROVAL,
    CLI_OPT_TOOLS_FS_MODE,
    CLI_OPT_TOOLS_DISABLE,
    CLI_OPT_TOOLS_DENY,
    CLI_OPT_TOOLS_READ_ONLY,
    CLI_OPT_TOOLS_MAX_READ,
    CLI_OPT_TOOLS_MAX_WRITE,
    CLI_OPT_TOOLS_MAX_OUTPUT,
    CLI_OPT_TOOLS_MAX_TEXT,
    CLI_OPT_TOOLS_TIMEOUT,
    CLI_OPT_TOOLS_NO_STALE,
};

struct cli_tools {
    const char *root;  /* --root: a bare folder instead of a sandbox */
    const char *store; /* --store: its snapshot store */
    sp_tools_opts opts;
    const char **disabled, **deny; /* NULL-terminated */
    size_t n_disabled, n_deny;
};

/* Prepare for up to argc repeated options. Returns 0 or an exit code. */
int cli_tools_init(struct cli_tools *c, int argc);
void cli_tools_dispose(struct cli_tools *c);
/* Take one option of cli_group_tools. Returns 1 when taken, 0 when `opt`
 * is none of them, -1 after a usage error. */
int cli_tools_option(struct cli_tools *c, const char *cmd, int opt, const char *arg);
/* Check the combination once parsing is done (`sandbox`: a sandbox is the
 * target). Returns 0 or an exit code after a usage error. */
int cli_tools_check(struct cli_tools *c, const char *cmd, bool sandbox);
/* An approval callback that asks on the controlling terminal (/dev/tty);
 * without one, nobody can be asked. */
sp_tools_verdict cli_tools_prompt(void *userdata, const sp_tools_approval_request *req);

#endif
