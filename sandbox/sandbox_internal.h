/* Internals of the sandbox module. Not installed. */
#ifndef SANDPOD_SANDBOX_INTERNAL_H
#define SANDPOD_SANDBOX_INTERNAL_H

#include "base.h"
#include "sandpod/sandbox.h"

/* What sandbox.json records: enough to recreate the container. */
typedef struct sp_sandbox_config {
    char *image;
    char **env; /* NULL-terminated, never NULL */
    char *workdir;
    char *user;
    sp_podman_network network;
    uint64_t memory_bytes;
    uint64_t nano_cpus;
    int64_t pids_limit;
    uint64_t tmpfs_bytes;
    bool writable_root;
    char **cap_add;
} sp_sandbox_config;

/* Interactive sessions of a handle (sessions.c). */
struct sp_session_table;
typedef struct sp_session_table sp_session_table;

struct sp_sandbox {
    char *name;
    char *state_root;
    char *state_dir;
    char *workspace;
    char *podman_url;
    char *container_id;
    char *created_at;
    sp_sandbox_config cfg;
    sp_fs *fs;
    sp_podman *podman;
    int lock_fd;
    unsigned lock_depth;
    sp_session_table *sessions; /* NULL until the first session starts */
};

int sp_sandbox_resolve_root(char **out, const char *state_root, sp_error **err);
/* flock the state folder's lock file; nests. */
int sp_sandbox_lock(sp_sandbox *sb, sp_error **err);
void sp_sandbox_unlock(sp_sandbox *sb);
int sp_sandbox_save(sp_sandbox *sb, sp_error **err);
/* 0 when the container runs; otherwise SP_EPODMAN saying why and what to do. */
int sp_sandbox_require_running(sp_sandbox *sb, sp_error **err);
/* End every interactive session of this handle. */
void sp_sandbox_sessions_close(sp_sandbox *sb);
/* Test hook (sessions.c): kill sessions through a container exec even when
 * the host could signal them directly. */
extern bool sp_session_container_kill_only;

#endif
