/**
 * @file sandpod/engine.h
 * @brief Engines: where sandboxes run. "local" (Podman on this machine, the
 *        default and always there) or a Kubernetes cluster, each sandbox a
 *        Pod with sandpod beside its workspace (see sandpod render).
 *
 * Engines are configured once per state root, in STATE_ROOT/engines.json
 * (0600, written atomically under a lock):
 *
 *     {"default": "local",
 *      "engines": {"cluster": {"kind": "kubernetes", "context": "kind-kind",
 *                              "namespace": "sandpod", "image": "..."}}}
 *
 * The engine "local" is built in (kind podman) and cannot be removed or
 * redefined. $SANDPOD_ENGINE, when set, names the default instead of the
 * file's "default".
 */
#ifndef SANDPOD_ENGINE_H
#define SANDPOD_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandpod/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The engine every state root has. */
#define SP_ENGINE_LOCAL "local"

typedef enum sp_engine_kind {
    SP_ENGINE_PODMAN = 0,     /**< "podman" */
    SP_ENGINE_KUBERNETES = 1, /**< "kubernetes" */
} sp_engine_kind;

/** "podman", "kubernetes". */
const char *sp_engine_kind_name(sp_engine_kind k);
/** Parse a kind name; SP_EINVAL naming the kinds there are. */
int sp_engine_kind_parse(sp_engine_kind *out, const char *s, sp_error **err);

/**
 * One engine. Strings are owned by it (NULL: not set). How a kubernetes
 * engine finds its cluster, first match wins: `server` (with `token_file`,
 * `ca_file`); else `kubeconfig`/`context` (read through kubectl, `kubectl`
 * naming the program); else the in-cluster service account when sandpod
 * runs in a Pod; else kubectl's defaults.
 */
typedef struct sp_engine {
    char *name;
    sp_engine_kind kind;
    /* podman */
    char *podman_url; /**< NULL: found or started as for any sandbox */
    /* kubernetes */
    char *kubeconfig;
    char *context;
    char *kubectl;
    char *server;
    char *token_file;
    char *ca_file;
    char *ns;            /**< namespace; NULL: the credentials' (else "default") */
    char *image;         /**< the sandpod image of the Pod's init and peer containers */
    char *runtime_class; /**< runtimeClassName; NULL: the cluster's default */
    int64_t ttl_seconds; /**< activeDeadlineSeconds; 0: 7200; < 0: none */
    /** A Localhost seccomp profile the nodes have (sandpod's, installed
     *  under the kubelet's seccomp folder); NULL: RuntimeDefault. */
    char *seccomp_profile;
    /** What the Pods may lack of a local sandbox's protections, accepted by
     *  name: "userns", "seccomp", "netpol" (the cluster does not enforce
     *  NetworkPolicies), comma-separated; NULL: nothing. */
    char *accept;
} sp_engine;

void sp_engine_free(sp_engine *e);

/**
 * The engine `name` of a state root (state_root NULL: the default root;
 * name NULL: the default engine). SP_ENOTFOUND names the engines there are.
 */
int sp_engine_get(sp_engine **out, const char *state_root, const char *name, sp_error **err);

/**
 * Every engine, "local" first then by name (*out NULL-terminated; free
 * each with sp_engine_free() and the array with free()); *default_name
 * (may be NULL) gets the default's name (free()).
 */
int sp_engine_list(sp_engine ***out, char **default_name, const char *state_root, sp_error **err);

/**
 * Add (or, with replace, redefine) an engine. Names are [a-z0-9][a-z0-9-]*
 * up to 63 bytes; "local" is refused; an existing name without replace is
 * SP_EEXISTS.
 */
int sp_engine_add(const char *state_root, const sp_engine *e, bool replace, sp_error **err);

/** Remove an engine (SP_ENOTFOUND when there is none; "local" refused). */
int sp_engine_remove(const char *state_root, const char *name, sp_error **err);

/** Make `name` (which must exist) the default. */
int sp_engine_set_default(const char *state_root, const char *name, sp_error **err);

#ifdef __cplusplus
}
#endif

#endif
