/* Finding and installing sandpod-agent for a new container (agent_install.c).
 * Internal. */
#ifndef SANDPOD_AGENT_INSTALL_H
#define SANDPOD_AGENT_INSTALL_H

#include <stdbool.h>

#include "sandbox_internal.h"

/* Set up <state_dir>/agent/: the binary (ours, read-only in the container)
 * and run/, the socket folder. Records in sb->cfg where the agent came
 * from, or why there is none; *bin and *run are the two paths to mount
 * when it returns true; *warning says when commands will take the slow
 * path for want of one. */
bool sp_agent_prepare(sp_sandbox *sb, char **bin, char **run, char **warning);

#endif
