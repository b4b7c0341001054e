/**
 * @file sandpod/mount_filter.h
 * @brief A mount's own filters (include, exclude, gitignore), asked of
 *        one path at a time.
 *
 * What sp_hydrate() copies in is decided by a mount's globs and, with
 * `gitignore`, by the source's git ignore rules; apply uses the same
 * rules to decide what comes back, so files a mount left out on the way
 * in (`__pycache__`, build output) are not carried out either.
 */
#ifndef SANDPOD_MOUNT_FILTER_H
#define SANDPOD_MOUNT_FILTER_H

#include <stdbool.h>

#include "sandpod/error.h"
#include "sandpod/hydrate.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sp_mount_filter sp_mount_filter;

/**
 * Make a filter for mount `m` over a host folder.
 *
 * @param host_fd  an fd of the host folder the mount's rules read their
 *                 `.gitignore` files (and the root's `.git/info/exclude`)
 *                 from, opened without following symlinks below it; -1
 *                 when there is none (no git ignore rules then). Not
 *                 owned; it must stay open while the filter is used.
 * @return 0; SP_EINVAL for a bad glob
 */
int sp_mount_filter_new(sp_mount_filter **out, const sp_mount *m, int host_fd, sp_error **err);

/**
 * Whether the mount selects `rel` (relative to its host folder): no
 * exclude matches it or a folder above it, git ignores neither it nor a
 * folder above it (with `gitignore`), and an include (if any) matches it
 * or a folder above it. A folder is selected by an include only when
 * one matches it: a caller keeps the folders its selected files need.
 * Calls in tree order read each folder's ignore files once.
 */
bool sp_mount_filter_selects(sp_mount_filter *f, const char *rel, bool is_dir);

/** Free a filter; accepts NULL. */
void sp_mount_filter_free(sp_mount_filter *f);

#ifdef __cplusplus
}
#endif

#endif
