/* events.jsonl: one JSON record per line, numbered by a counter that
 * survives processes. Internal; the public face is sp_sandbox_event_append()
 * (sandpod/sandbox_events.h) and the tool suite's events.
 *
 * Writers (the CLI, tool servers, several threads of one) may append at
 * the same time: each append opens the file anew and holds an exclusive
 * flock on it while it takes the next number and writes its line in one
 * write(2), so numbers are unique and increase in file order. The last
 * number taken is kept in "<file>.seq" beside it (written before the line,
 * so a crash costs a gap, never a repeat); when that is missing or
 * unreadable, the file's last complete record says where to go on. A line
 * left unfinished by a killed writer is closed before the next one. */
#ifndef SANDPOD_EVENT_LOG_H
#define SANDPOD_EVENT_LOG_H

#include <stdint.h>

#include "base.h"

/* Make the line for record number `call` (no newline; malloc'd), or NULL
 * to write nothing. Called with the lock held: keep it quick. */
typedef char *(*sp_event_line_fn)(void *ud, uint64_t call);

/* Append one record to the events file at path (created 0600, never
 * through a symlink). With *call == 0 a new number is taken and stored in
 * *call; otherwise *call is used as it is (the end record of a call whose
 * start took it). Returns 0 or an error; *call is set even when the line
 * could not be made. */
int sp_events_append(const char *path, uint64_t *call, sp_event_line_fn fn, void *ud,
                     sp_error **err);

/* The number of the last complete record of the events file at path that
 * has one ("call"), or 0. Reads at most the last 1 MiB. */
uint64_t sp_events_last_call(const char *path);

/* UTC now as RFC 3339 with milliseconds, "2026-11-26T11:17:19.123Z". */
void sp_events_now(char *buf, size_t size);

#endif
