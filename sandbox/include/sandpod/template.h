/**
 * @file sandpod/template.h
 * @brief Templates: a prepared sandbox recorded (image, configuration and a
 *        snapshot of its workspace) so that many sandboxes start from it
 *        without running its setup again.
 *
 * A template lives in the state root, at STATE_ROOT/templates/NAME/
 * (folders 0700): template.json (0600: it holds the -e values) and a
 * snapshot store of its own whose objects are hard links to the origin's
 * (see sp_snapshot_share()), so removing the sandbox it came from leaves
 * it whole. No container ever sees that folder.
 */
#ifndef SANDPOD_TEMPLATE_H
#define SANDPOD_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandpod/error.h"
#include "sandpod/container.h"
#include "sandpod/sandbox.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SP_TEMPLATE_OPTS_VERSION 1

/** Options of the template calls. Zero values select the defaults. */
typedef struct sp_template_opts {
    unsigned version;
    /** The state root (NULL: $SANDPOD_HOME's default). sp_template_save()
     *  uses its sandbox's and ignores this. */
    const char *state_root;
    /** The Podman service (NULL: found or started as for sandboxes). */
    const char *podman_url;
    /** save: an existing snapshot of the sandbox (id, tag or prefix);
     *  NULL takes a fresh one of its workspace now, the container paused
     *  as for any snapshot. */
    const char *snapshot;
    /** save: replace a template of that name (atomically). */
    bool force;
} sp_template_opts;

#define SP_TEMPLATE_OPTS_INIT                                                                      \
    {                                                                                              \
        .version = SP_TEMPLATE_OPTS_VERSION                                                        \
    }

/** What a template records. Strings and vectors are owned by it. */
typedef struct sp_template_info {
    char *name;
    char *path;       /**< its folder */
    char *origin;     /**< the sandbox it was saved from */
    char *snapshot;   /**< the snapshot's id (the same in the origin's store) */
    char *created_at; /**< when it was saved, RFC 3339 UTC */
    char *image;      /**< the image reference */
    char *image_id;   /**< the image's id when it was saved */
    char **setup;     /**< the setup commands that prepared it (NULL-terminated) */
    char **env_names; /**< names of the -e variables (values are not given out) */
    char **env_pass;  /**< passed-through names */
    char *workdir;
    char *user;
    sp_network network;
    uint64_t memory_bytes;
    uint64_t nano_cpus;
    int64_t pids_limit;
    size_t n_mounts; /**< host folders the origin was hydrated from */
    /** The egress policy a sandbox made from it gets ("allow RULE" /
     *  "deny RULE" lines, sandpod/egress.h); NULL: none. */
    char **egress;
} sp_template_info;

/** Free a template's record; accepts NULL. */
void sp_template_info_free(sp_template_info *t);

/** Whether `name` may name a template (the rules of sandbox names:
 *  letters, digits, '_', '.', '-', starting with a letter or digit, at
 *  most 63; so never '/', "..", or empty). */
bool sp_template_name_valid(const char *name);

/**
 * Record sandbox `sb` as template `name`.
 *
 * The snapshot is read through the sandbox's store like every snapshot
 * (never by copying the live workspace) and shared into the template's
 * own store. The template is built in a temporary folder and renamed into
 * place, so a reader sees the old one or the new one, never half of one.
 *
 * @param out   receives the record (may be NULL); free with sp_template_info_free()
 * @param sb    the sandbox (an open handle); its state root holds the template
 * @param name  the template's name
 * @param opts  snapshot, force, podman_url; NULL for the defaults
 * @return 0; SP_EINVAL (bad name); SP_EEXISTS (name taken, no force);
 *         SP_ENOTFOUND (no such snapshot; the image is gone); SP_EPODMAN;
 *         errno-style SP_ERROR. On failure nothing is left and an existing
 *         template of that name is untouched.
 */
int sp_template_save(sp_template_info **out, sp_sandbox *sb, const char *name,
                     const sp_template_opts *opts, sp_error **err);

/**
 * The templates of a state root, sorted by name.
 *
 * @param out  receives a NULL-terminated vector of names (free each and it)
 * @return 0 (an empty vector when there are none); errno-style SP_ERROR
 */
int sp_template_list(char ***out, const sp_template_opts *opts, sp_error **err);

/**
 * Read template `name`'s record.
 *
 * @return 0; SP_EINVAL (bad name, damaged template.json); SP_ENOTFOUND
 */
int sp_template_info_get(sp_template_info **out, const char *name, const sp_template_opts *opts,
                         sp_error **err);

/**
 * Remove template `name` (the sandboxes made from it keep their own copies).
 *
 * @return 0; SP_EINVAL (bad name); SP_ENOTFOUND; errno-style SP_ERROR
 */
int sp_template_remove(const char *name, const sp_template_opts *opts, sp_error **err);

/**
 * Create a sandbox from template `tmpl`: what sp_sandbox_fork() does with
 * the template's snapshot and configuration. The workspace is the
 * template's snapshot restored from its store, the baseline `base` that
 * state, and the template's setup commands are not run again (opts->setup
 * runs after, as at any create). The template's image must still be the
 * one it was saved with (same id) unless opts->image replaces it.
 *
 * @param opts  as for sp_sandbox_fork(): its options replace the template's
 *              configuration where given; mounts must be empty
 * @return 0; SP_ENOTFOUND (no such template; its image is gone, the
 *         message naming the image and `sandpod image pull`); SP_EINVAL
 *         (bad name; the image's tag now names another image); the errors
 *         of sp_sandbox_fork(). On failure nothing of the new sandbox is left.
 */
int sp_sandbox_create_from_template(sp_sandbox **out, const char *tmpl, const sp_sandbox_opts *opts,
                                    sp_error **err);

#ifdef __cplusplus
}
#endif

#endif
