/* The Pod a sandbox runs as on Kubernetes: the hardening of a local sandbox
 * (sp_sandbox_opts) mapped onto Pod fields, plus the sandpod containers
 * around the workload (an init container installing the agent, the peer
 * serving the workspace). Internal to kube/ and the CLI until the engine
 * has a public API: the Pod's shape is still moving (issue 16). */
#ifndef SANDPOD_KUBE_RENDER_H
#define SANDPOD_KUBE_RENDER_H

#include <stdint.h>

#include "base.h"
#include "sandpod/sandbox.h"

/* Where things are in a rendered Pod. The agent volume is mounted flat
 * (read-only) beside the socket volume, so the agent's path is not the
 * local SPA_AGENT_PATH; the run folder is the protocol's SPA_RUN_DIR. */
#define SP_KUBE_AGENT_DIR    "/.sandpod/bin"
#define SP_KUBE_AGENT_PATH   SP_KUBE_AGENT_DIR "/agent"
#define SP_KUBE_RUN_DIR      "/.sandpod/run"
#define SP_KUBE_AGENT_SOCKET SP_KUBE_RUN_DIR "/agent.sock"
#define SP_KUBE_WORKSPACE    SP_PEER_WORKSPACE
#define SP_KUBE_STORE_DIR    SP_PEER_STORE
#define SP_KUBE_PEER_RUN     "/sandpod/run"
#define SP_KUBE_PEER_SOCKET  SP_KUBE_PEER_RUN "/peer.sock"
/* The sandpod image's programs (contrib/image/build-sandpod-image.sh). */
#define SP_KUBE_SANDPOD_BIN      "/sandpod/bin/sandpod"
#define SP_KUBE_DEFAULT_IMAGE    "localhost/sandpod:" SANDPOD_VERSION
#define SP_KUBE_DEFAULT_DEADLINE 7200

#define SP_KUBE_RENDER_OPTS_VERSION 1

typedef struct sp_kube_render_opts {
    unsigned version;
    /** metadata.namespace (a DNS label); NULL = none (the client's). */
    const char *ns;
    /** The image of the init and peer containers; NULL = SP_KUBE_DEFAULT_IMAGE. */
    const char *sandpod_image;
    /** activeDeadlineSeconds: 0 = SP_KUBE_DEFAULT_DEADLINE, negative = none. */
    int64_t deadline_seconds;
    /** runtimeClassName (gvisor, kata...); NULL = the cluster's default. */
    const char *runtime_class;
    /** The label sandpod.owner (who may collect the Pod); NULL = none. */
    const char *owner;
    /** Egress rules: the proxy's id (its Pod's name, the label that ties
     *  the workload to it) and the address the workload reaches it at;
     *  NULL = no rules (sp_kube_render_egress()). */
    const char *egress_id;
    const char *egress_addr;
    /** A Localhost seccomp profile on the nodes (the engine's
     *  seccomp_profile); NULL = RuntimeDefault. */
    const char *seccomp_profile;
} sp_kube_render_opts;

#define SP_KUBE_RENDER_OPTS_INIT                                                                   \
    {                                                                                              \
        .version = SP_KUBE_RENDER_OPTS_VERSION                                                     \
    }

/* Render the Pod of a sandbox made with `o` as JSON text (*out, free()).
 * Values of o->env (KEY=VALUE) are written into the Pod spec; o->env_pass
 * names only go into an annotation. What a Pod cannot say (the pids limit,
 * rlimits, network none, sandpod's own seccomp profile) is listed in the
 * annotation "sandpod.gaps". Fields of `o` that the Pod has no place for
 * (mounts, setup, a plain-HTTP pull) are SP_EINVAL rather than dropped.
 *
 * @return 0; SP_EINVAL (a name, namespace, user, size or capability a Pod
 *         cannot carry, with what and why) */
int sp_kube_render_pod(char **out, const sp_sandbox_opts *o, const sp_kube_render_opts *ro,
                       sp_error **err);

/* The port the egress proxy takes connections on, in its Pod, and its
 * folders there (one emptyDir). */
#define SP_KUBE_EGRESS_PORT       3128
#define SP_KUBE_EGRESS_DIR        "/sandpod/egress"
#define SP_KUBE_EGRESS_POLICY_DIR SP_KUBE_EGRESS_DIR "/policy"
#define SP_KUBE_EGRESS_RUN_DIR    SP_KUBE_EGRESS_DIR "/run"
/* `sandpod peer egress-log`'s exit status when nothing is logged yet. */
#define SP_KUBE_EGRESS_NO_LOG 3

/* The egress proxy of a sandbox with rules, as three objects (JSON text,
 * free()): the proxy's Pod (named ro->egress_id, the sandpod image running
 * `sandpod peer egress-serve` with policy and hosts, the policy file's
 * texts), a NetworkPolicy (egress_id + "-workload") that lets the
 * workload's Pod reach that Pod's port alone, and one (egress_id +
 * "-proxy") that lets only the workload reach the proxy. They are made
 * before the workload's Pod, whose ro->egress_addr is the proxy Pod's
 * address. Enforcement is the cluster's network plugin's: one that
 * ignores NetworkPolicy enforces nothing (the "sandpod.gaps" annotation
 * says "netpol").
 *
 * @return 0; SP_EINVAL (an id that is not a DNS label, no policy) */
/* A NetworkPolicy "<egress_id>-deny" that allows the Pods labelled
 * sandpod.egress=<egress_id> no egress at all (`engine test` puts its
 * probe Pod under it to see whether the cluster enforces policies). */
char *sp_kube_render_netpol_deny(const sp_kube_render_opts *ro);

int sp_kube_render_egress(char **pod, char **np_workload, char **np_proxy, const sp_sandbox_opts *o,
                          const sp_kube_render_opts *ro, const char *policy, const char *hosts,
                          sp_error **err);

#endif
