/* What the local engine says of a sandbox's container (local_state.c).
 * Internal. */
#ifndef SANDPOD_LOCAL_STATE_H
#define SANDPOD_LOCAL_STATE_H

#include "sandbox_internal.h"

/* 0 when the container runs; otherwise SP_EPODMAN saying why and what to do. */
int sp_sandbox_require_running(sp_sandbox *sb, sp_error **err);
/* Ask Podman for the container's pid 1 again (sb->init_pid). */
int sp_sandbox_refresh_init_pid(sp_sandbox *sb);

#endif
