/* The proxy's two folders, as both its keepers use them: the local engine
 * on the host (sandbox/local/local_egress.c) and `sandpod peer egress-*` in
 * a Kubernetes sandbox's proxy Pod (cmd/peer_egress.c).
 *
 *   policy folder  policy (a version line, then one rule a line), hosts
 *   run folder     policy.loaded (the version in force), connections.jsonl
 *
 * The run folder is the proxy's: nothing there is followed as a link, and
 * nothing there can make the caller wait (a fifo reads as empty). */
#ifndef SANDPOD_EGRESS_DIR_H
#define SANDPOD_EGRESS_DIR_H

#include <stddef.h>

#include "base.h"

/* The policy file's text for rules ("allow RULE" / "deny RULE" lines, as
 * sandbox.json keeps them), with a fresh version line first. */
char *sp_egress_policy_text(char *const *rules);

/* Write the policy text, and the hosts text when not NULL, into folder dir:
 * each a new file renamed over the old (the proxy never reads half). */
int sp_egress_dir_write(const char *dir, const char *policy, size_t policy_len, const char *hosts,
                        size_t hosts_len, sp_error **err);

/* Wait until the proxy of run folder `run` has the policy of folder dir in
 * force (it polls every 100 ms). SP_ETIMEOUT after timeout_ms. */
int sp_egress_wait_loaded(const char *dir, const char *run, int timeout_ms, sp_error **err);

/* Open the run folder's connection log for reading: a plain file, reached
 * without following a link. SP_ENOTFOUND when there is none yet. */
int sp_egress_log_open(int *fd, const char *run, sp_error **err);

#endif
