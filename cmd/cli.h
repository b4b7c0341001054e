/* Helpers shared by the sandpod subcommands: one way to report errors, one
 * mapping to exit codes, number parsing, stdin, JSON output.
 *
 * Every message a subcommand shows the user goes through cli_error(),
 * cli_usage() or cli_sp_error(), so errors always read as exactly one line
 * `sandpod: <message>` on stderr. */
#ifndef SANDPOD_CLI_H
#define SANDPOD_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <cJSON.h>

#include "sandpod.h"

#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* Exit codes of every subcommand (exec and sh excepted: they pass on the
 * command's own code). */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_ERROR = 1,
    CLI_EXIT_USAGE = 2,
};

/* The largest input read from stdin or from a --*-file option. The library
 * enforces its own, smaller, limits with a clear message; this one only keeps
 * a runaway pipe from eating the machine's memory. */
#define CLI_MAX_INPUT ((size_t)1 << 30)

/* Subcommand entry points. argv[0] is the subcommand's name. */
int cmd_fs(int argc, char **argv);

/* Print `sandpod: <message>` on stderr; returns CLI_EXIT_ERROR. */
int cli_error(const char *fmt, ...) CLI_PRINTF(1, 2);

/* Print `sandpod: <message> (see 'sandpod CMD --help')` on stderr; returns
 * CLI_EXIT_USAGE. `cmd` may be NULL for the top level. */
int cli_usage(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);

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

/* Write a name for a human: control bytes become \xNN so that names from an
 * untrusted workspace can neither break the line structure nor drive the
 * terminal. */
void cli_put_name(FILE *f, const char *s);

/* Flush stdout and report a failed write (a full disk, a closed pipe).
 * Returns `rc`, or CLI_EXIT_ERROR when stdout could not be written. */
int cli_finish(int rc);

#endif
