/* Seeding a remote workspace: the client's half of hydration over the
 * wire (the Pod's half is `sandpod peer import`). Internal to the library. */
#ifndef SP_SANDBOX_SEED_H
#define SP_SANDBOX_SEED_H

#include <stddef.h>

#include "sandpod/hydrate.h"
#include "sandpod/sandbox.h"
#include "sandpod/snapshot.h"

/*
 * Hydrate `mounts` (with their filters: include/exclude, gitignore,
 * max_bytes, the symlink policy; exactly what `sandpod create --mount`
 * copies) into a private temp folder under `state_root` (0700, made with
 * sp_state_root_check()), take a snapshot of it into a temp store beside
 * it, and write that snapshot as a plain pax tar to `fd` (not closed) -
 * what `sandpod peer import` reads. The temp folder is removed on every
 * path. The archive may be cut short when a write to `fd` fails, so the
 * reader must treat a failed seed's stream as bad (peer import does).
 * The hydration's result (what was left out or rewritten because it holds
 * credentials, among the rest) goes to *out when out is not NULL.
 *
 * @return 0; sp_hydrate()'s errors (nothing written to fd); the errors of
 *         sp_snapshot_export() (SP_ERROR naming the write failure)
 */
int sp_seed_tar(sp_hydrate_result **out, int fd, const sp_mount *mounts, size_t n,
                const sp_hydrate_opts *ho, const char *state_root, sp_error **err);

#endif
