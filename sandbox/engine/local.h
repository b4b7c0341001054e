/* The boundary between the engine-neutral sandbox code (the .c files of
 * sandbox/) and
 * the engine that runs sandboxes on this machine, around a workspace
 * folder of this host bind-mounted at /workspace: Podman
 * (sandbox/podman/local_engine.c). Internal: the sandbox module and the
 * engines see it, nothing else.
 *
 * Everything crosses it in the neutral terms of sandpod/container.h: a
 * container spec in, its state and exec streams out. What is peculiar to
 * one engine (how it is found or started, its images, its leftovers after
 * a crash) is behind the table, never in the neutral code. The other kind
 * of engine, which runs sandboxes elsewhere, has its own boundary
 * (sandbox/engine/remote.h). */
#ifndef SANDPOD_ENGINE_LOCAL_H
#define SANDPOD_ENGINE_LOCAL_H

#include <stdbool.h>
#include <stddef.h>

#include "sandpod/container.h"
#include "sandpod/error.h"
#include "sandpod/sandbox.h"
#include "stream.h"

/* A connection to the local engine (one per thread, as a Podman client). */
typedef struct sp_local sp_local;

typedef struct sp_local_ops {
    const char *kind; /* "podman" */
    /* Connect to the engine at url (NULL: found, or started with its files
     * under state_root unless no_autostart). */
    int (*open)(sp_local **out, const char *url, const char *state_root, bool no_autostart,
                sp_error **err);
    void (*free)(sp_local *l);
    /* The URL it reached the engine at (for another connection to it). */
    const char *(*url)(const sp_local *l);
    /* The engine's host facts, owned by the connection. */
    int (*host)(const sp_container_host **out, sp_local *l, sp_error **err);
    /* Remove a folder whose files a container's user namespace owns. */
    int (*remove_tree)(const char *path, sp_error **err);

    /* Images. exists: *out set, 0. id: SP_ENOTFOUND when missing. ensure:
     * pulled as policy says (never reports a missing image). build_default
     * makes SP_DEFAULT_IMAGE offline. */
    int (*image_exists)(bool *out, sp_local *l, const char *ref, sp_error **err);
    int (*image_id)(char **out, sp_local *l, const char *ref, sp_error **err);
    int (*image_ensure)(sp_local *l, const char *ref, sp_pull_policy policy, bool no_tls_verify,
                        sp_progress_fn progress, void *userdata, sp_error **err);
    int (*image_build_default)(sp_local *l, sp_error **err);
    /* What SP_PULL_DEFAULT comes to for ref (never DEFAULT). */
    sp_pull_policy (*pull_policy_for)(const char *ref, sp_pull_policy policy);

    /* Containers, by name or id. create: not started; SP_EEXISTS for a
     * name in use. remove: stopped first, its volumes too; SP_ENOTFOUND
     * when gone. list: every container whose labels match each filter
     * ("key" or "key=value"). */
    int (*create)(char **id, char ***warnings, sp_local *l, const sp_container_spec *spec,
                  sp_error **err);
    int (*start)(sp_local *l, const char *id, sp_error **err);
    int (*stop)(sp_local *l, const char *id, int timeout_s, sp_error **err);
    int (*pause)(sp_local *l, const char *id, sp_error **err);
    int (*unpause)(sp_local *l, const char *id, sp_error **err);
    int (*remove)(sp_local *l, const char *id, sp_error **err);
    int (*inspect)(sp_container_info **out, sp_local *l, const char *id, sp_error **err);
    int (*list)(sp_containers **out, sp_local *l, const char *const *labels, sp_error **err);
    int (*logs)(sp_local *l, const char *id, const sp_logs_opts *opts, sp_logs_fn fn,
                void *userdata, sp_error **err);

    /* Commands in a running container: made, then started as a command's
     * stream (engine/stream.h; tty as the spec said), which also tells its
     * exit code and pid and resizes its TTY. With noexec, a command the
     * runtime could not execute is told by the stream's noexec(), not by
     * the runtime's lines on it. The stream needs l while it lives. */
    int (*exec_create)(char **exec_id, sp_local *l, const char *container, const sp_exec_spec *spec,
                       sp_error **err);
    int (*exec_start)(sp_stream *out, sp_local *l, const char *exec_id, bool tty, bool noexec,
                      sp_error **err);

    /* Processes the engine lost (it was killed mid-create, its socket is
     * gone): added to o, and ended unless dry_run; only containers named
     * name_prefix*, and processes at least min_age_s old. */
    void (*reap_lost)(sp_sandbox_orphans *o, sp_local *l, const char *name_prefix, double min_age_s,
                      bool dry_run);
} sp_local_ops;

extern const sp_local_ops sp_podman_local_ops;

/* The local engine this build runs sandboxes on (engine.c). */
const sp_local_ops *sp_local_engine(void);

/* exec_create then exec_start. */
int sp_local_exec(sp_stream *out, const sp_local_ops *ops, sp_local *l, const char *container,
                  const sp_exec_spec *spec, sp_error **err);

/* Append an item of kind to o (zeroed but for kind). */
sp_sandbox_orphan *sp_orphans_add(sp_sandbox_orphans *o, sp_orphan_kind kind);

#endif
