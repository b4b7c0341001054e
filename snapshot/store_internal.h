/* Internals of the store's own files (store.c, records.c, snapshot.c,
 * store_gc.c): what one of them defines and another uses. Not installed. */
#ifndef SANDPOD_STORE_INTERNAL_H
#define SANDPOD_STORE_INTERNAL_H

#include <dirent.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <time.h>

#include <cJSON.h>
#include <git2.h>

#include "snap_internal.h"

#define SNAP_REF_PREFIX "refs/sandpod/snapshots/"
#define GEN_NAME        "sandpod/generation"

uint64_t sp_snap_read_generation(sp_snapstore *s);

int sp_snap_write_generation(sp_snapstore *s, uint64_t gen, sp_error **err);

void sp_snap_drop_tree(sp_snapstore *s);

void sp_snap_begin_op(sp_snapstore *s, sp_scan *sc);

void sp_snap_end_op(sp_snapstore *s, sp_scan *sc);

/* Bring s->tree up to date with the workspace and compute its tree ids:
 * from tracked events when tracking can vouch for them, else with a full
 * stat walk. Objects for everything new are in the store afterwards. */
int sp_snap_refresh(sp_snapstore *s, sp_scan *sc, sp_error **err);

/* After an operation that is done (a snapshot whose ref is written, a
 * finished restore), the stat cache only saves the next one work: failing
 * to write it (a full disk) must not turn that success into an error. A
 * slot torn that way fails its checksum and the other one is used. */
void sp_snap_save_cache_after(sp_snapstore *s);

int sp_snap_do_pause(sp_snapstore *s, sp_error **err);

/* Unpause, keeping the first error: ret is the operation's result. */
int sp_snap_do_unpause(sp_snapstore *s, int ret, sp_error **err);

#endif
