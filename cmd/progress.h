/* The CLI's one progress line (cmd/progress.c), for hydration (create,
 * run) and snapshots (snapshot, restore, diff).
 *
 * On a terminal, one line on stderr redrawn in place, e.g.
 *     hydrating  42%  1.2 GiB/2.9 GiB  180 MiB/s  ETA 9s
 * (percent and ETA when the total is known). When stderr is not a
 * terminal nothing is drawn while the work goes on, and one summary line
 * is printed at the end, e.g.
 *     sandpod: hydrated 2.9 GiB in 16.4s (180 MiB/s): 1204 files
 * except under --json, where the result on stdout carries the counts and
 * stderr stays for errors. */
#ifndef SANDPOD_CLI_PROGRESS_H
#define SANDPOD_CLI_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Start an operation; `done_verb` names it in the summary ("hydrated").
 * `json`: no summary line. */
void cli_progress_begin(const char *done_verb, bool json);

/* Name it anew in the summary (a restore that began as a scan). */
void cli_progress_rename(const char *done_verb);

/* Where it is: a phase ("hydrating", "scanning", ...; the rate restarts
 * when it changes), bytes done of total (0: not known), and a short extra
 * ("340/1204 files", or NULL). Cheap to call often. */
void cli_progress_update(const char *phase, uint64_t done, uint64_t total, const char *extra);

/* An sp_hydrate_opts.progress callback that draws hydration's phases
 * (scanning, hydrating with its total, moving into place). */
struct sp_hydrate_progress;
void cli_progress_hydrate(void *userdata, const struct sp_hydrate_progress *p);

/* An sp_progress_fn that shows a pull's newest line ("pulling"). */
void cli_progress_pull(const char *line, void *userdata);

/* End it: clear the line from the terminal, or print the summary line
 * (only when ok, and when an update came). */
void cli_progress_end(bool ok);

/* End it where success is not known yet: the summary line waits for
 * cli_progress_finish(). */
void cli_progress_end_deferred(void);
/* At exit (cli_finish()): a deferred summary line when rc is 0. */
void cli_progress_finish(int rc);

/* The line itself, for a phase `elapsed_ms` old:
 * "PHASE  42%  1.2 GiB/2.9 GiB  180 MiB/s  ETA 9s  EXTRA". No rate before
 * a quarter second, no ETA without a rate or a total. */
void cli_progress_format(char *buf, size_t size, const char *phase, uint64_t done, uint64_t total,
                         int64_t elapsed_ms, const char *extra);

/* "2.9 GiB in 16.4s (180 MiB/s)": what was done, how long it took, how fast. */
void cli_progress_summary(char *buf, size_t size, uint64_t bytes, int64_t elapsed_ms);

/* A duration for a human: "9s", "4m05s", "2h07m". */
void cli_format_duration(char *buf, size_t size, int64_t ms);

/* Bytes for a human: "512 B", "1.5 KiB", "3 GiB". */
void cli_format_bytes(char *buf, size_t size, uint64_t n);

#endif
