/* The remote kind's entries (remote.c, remote_sessions.c, remote_snap.c):
 * a sandbox whose workload, workspace and store are on another engine,
 * beside sandpod's peer. Internal: only the remote kind's files see it. */
#ifndef SANDPOD_REMOTE_KIND_H
#define SANDPOD_REMOTE_KIND_H

#include "kind.h"
#include "sandpod/session.h"

/* remote.c */
int sp_remote_rpc(sp_sandbox *sb, const char *method, const char *params, const char *key,
                  char **result, sp_error **err);
int sp_remote_peer_command(sp_sandbox *sb, const char *const *args, int in_fd, int out_fd,
                           int err_fd, int *exit_code, sp_error **err);
int sp_remote_refuse(const sp_sandbox *sb, const char *what, sp_error **err);

/* remote_sessions.c */
int sp_remote_session_start(sp_session_output **out, sp_sandbox *sb, const char *command,
                            const sp_session_opts *o, sp_error **err);
int sp_remote_session_write(sp_session_output **out, sp_sandbox *sb, int session_id,
                            const char *chars, size_t len, const sp_session_write_opts *o,
                            sp_error **err);
int sp_remote_session_signal(sp_sandbox *sb, int session_id, int signo, sp_error **err);
int sp_remote_session_resize(sp_sandbox *sb, int session_id, unsigned rows, unsigned cols,
                             sp_error **err);
int sp_remote_session_kill(sp_sandbox *sb, int session_id, sp_error **err);
int sp_remote_session_list(sp_session_info **out, size_t *n_out, sp_sandbox *sb, sp_error **err);
void sp_remote_sessions_close(sp_sandbox *sb);

/* remote_snap.c */
int sp_remote_snap_create(sp_snapshot **out, sp_sandbox *sb, const char *tag, sp_error **err);
int sp_remote_snap_list(sp_snapshots **out, sp_sandbox *sb, sp_error **err);
int sp_remote_snap_get(sp_snapshot **out, sp_sandbox *sb, const char *ref, sp_error **err);
int sp_remote_snap_restore(sp_snapshot **out, sp_sandbox *sb, const char *ref, sp_error **err);
int sp_remote_snap_delete(sp_sandbox *sb, const char *ref, sp_error **err);
int sp_remote_snap_diff(sp_snapdiff **out, sp_sandbox *sb, const char *from, const char *to,
                        const sp_snapshot_diff_opts *opts, sp_error **err);

#endif
