/* The local kind's entries: a sandbox around a workspace folder of this
 * host, its container on the local engine (engine/local.h). The table is
 * local_kind.c's; the entries live with what they do. Internal. */
#ifndef SANDPOD_LOCAL_KIND_H
#define SANDPOD_LOCAL_KIND_H

#include "kind.h"
#include "engine/local.h"

/* local_create.c */
int sp_local_create(sp_sandbox *sb, const sp_sandbox_opts *o, const sp_engine *e,
                    sp_sandbox_seed_fn seed, void *seed_data, sp_error **err);
void sp_local_discard(sp_sandbox *sb);
int sp_local_image_pin(char **out, sp_sandbox *sb, sp_error **err);
/* The container made from the saved configuration around the workspace
 * (not started); started with the workspace handed to its user, then the
 * agent waited for. */
int sp_local_make_container(sp_sandbox *sb, sp_error **err);
/* The name of the sandbox's container with suffix ("" or "-egress"). */
char *sp_local_container_name(const sp_sandbox *sb, const char *suffix);
int sp_local_start_container(sp_sandbox *sb, sp_local *p, sp_error **err);

/* local_egress.c: the policy files (and the hosts file copied), the
 * proxy's container made or started and handed its folder, stopped or
 * removed; its name. */
int sp_local_egress_write(sp_sandbox *sb, const char *hosts_file, sp_error **err);
/* The proxy's copy of the secrets' values anew (egress/secrets), in force
 * before this returns when the proxy runs (read at its start if not). */
int sp_local_egress_secrets_set(sp_sandbox *sb, const struct sp_egress_secrets *values,
                                sp_error **err);
int sp_local_egress_up(sp_sandbox *sb, sp_local *p, sp_error **err);
void sp_local_egress_down(sp_sandbox *sb, sp_local *p, bool remove);
char *sp_local_egress_container(const sp_sandbox *sb);
int sp_local_egress_set(sp_sandbox *sb, sp_error **err);
int sp_local_egress_log(int *fd, sp_sandbox *sb, sp_error **err);

/* local_netguard.c: firewall rules in the network namespace of a
 * --network default container (its pid 1 is pid) that keep it off this
 * host, its neighbours and link-local metadata. */
int sp_local_netguard(sp_sandbox *sb, int pid, sp_error **err);

/* local_life.c */
int sp_local_remove(sp_sandbox *sb, bool keep_workspace, sp_error **err);
int sp_local_status(sp_sandbox_status **out, sp_sandbox *sb, sp_error **err);
int sp_local_start(sp_sandbox *sb, sp_error **err);
int sp_local_stop(sp_sandbox *sb, int timeout_s, sp_error **err);
int sp_local_restart(sp_sandbox *sb, sp_error **err);
int sp_local_pause(sp_sandbox *sb, sp_error **err);
int sp_local_unpause(sp_sandbox *sb, sp_error **err);
bool sp_local_pauses(sp_sandbox *sb);

/* logs.c */
int sp_local_logs(sp_sandbox *sb, const sp_logs_opts *o, sp_logs_fn fn, void *ud, sp_error **err);

/* fastpath.c */
sp_exec_path sp_local_exec_path(char **why, const sp_sandbox *sb);

/* run.c, attach.c */
int sp_local_run(sp_run_result **out, sp_sandbox *sb, const char *const *argv, const sp_run_opts *o,
                 sp_error **err);
int sp_local_attach(sp_attach **out, sp_sandbox *sb, const char *const *argv,
                    const sp_attach_opts *o, sp_error **err);

/* sessions.c */
int sp_local_session_start(sp_session_output **out, sp_sandbox *sb, const char *command,
                           const sp_session_opts *o, sp_error **err);
int sp_local_session_write(sp_session_output **out, sp_sandbox *sb, int id, const char *chars,
                           size_t len, const sp_session_write_opts *o, sp_error **err);
int sp_local_session_signal(sp_sandbox *sb, int id, int signo, sp_error **err);
int sp_local_session_resize(sp_sandbox *sb, int id, unsigned rows, unsigned cols, sp_error **err);
int sp_local_session_kill(sp_sandbox *sb, int id, sp_error **err);
int sp_local_session_list(sp_session_info **out, size_t *n, sp_sandbox *sb, sp_error **err);
void sp_local_sessions_close(sp_sandbox *sb);

/* snap.c */
int sp_local_snap_open(sp_sandbox_snap **out, sp_sandbox *sb, const sp_sandbox_snapshot_opts *o,
                       sp_error **err);
int sp_local_snap_create(sp_snapshot **out, sp_sandbox *sb, const char *tag, sp_error **err);
int sp_local_snap_list(sp_snapshots **out, sp_sandbox *sb, sp_error **err);
int sp_local_snap_get(sp_snapshot **out, sp_sandbox *sb, const char *ref, sp_error **err);
int sp_local_snap_restore(sp_snapshot **out, sp_sandbox *sb, const char *ref, sp_error **err);
int sp_local_snap_delete(sp_sandbox *sb, const char *ref, sp_error **err);
int sp_local_snap_diff(sp_snapdiff **out, sp_sandbox *sb, const char *from, const char *to,
                       const sp_snapshot_diff_opts *o, sp_error **err);
int sp_local_snap_export(sp_sandbox *sb, const char *ref, sp_snapshot_format format, int fd,
                         sp_error **err);
int sp_local_snap_import(char **id, sp_sandbox *sb, int fd, const char *tag, bool restore,
                         sp_error **err);
sp_snapstore *sp_local_store(sp_sandbox *sb, bool create, sp_error **err);

#endif
