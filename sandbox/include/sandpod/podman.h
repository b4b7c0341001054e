/**
 * @file sandpod/podman.h
 * @brief A client for the Podman REST service (libpod API v4).
 *
 * An sp_podman is a connection to one Podman service, found or started by
 * sp_podman_open(). Every call is bounded by a timeout: a service that hangs
 * gives SP_ETIMEOUT and one that dies mid-answer gives SP_EPODMAN, never a
 * hang. Errors from the service carry its own "message" text; HTTP 404 maps
 * to SP_ENOTFOUND and name conflicts to SP_EEXISTS.
 *
 * Exec sessions (and container attach) are streams: sp_exec wraps the
 * upgraded (hijacked) HTTP connection, demultiplexes stdout and stderr for
 * non-TTY sessions and passes TTY output through raw.
 *
 * Ownership: strings and structs returned through `out` parameters belong to
 * the caller and are freed with free() or the matching `_free` function; each
 * `_free` accepts NULL. Input pointers are only read during the call.
 *
 * Threads: an sp_podman is not thread-safe; use one per thread. An sp_exec may
 * be used on another thread than its sp_podman (it owns its own socket), but
 * one sp_exec must not be used by two threads at once.
 */
#ifndef SANDPOD_PODMAN_H
#define SANDPOD_PODMAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandpod/container.h"
#include "sandpod/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sp_podman sp_podman;
typedef struct sp_sandbox sp_sandbox;

/* The names the engine-neutral types of sandpod/container.h had when
 * they were Podman's own; kept so that code written against them builds. */
typedef sp_container_host sp_podman_host;
typedef sp_progress_fn sp_podman_progress_fn;
typedef sp_pull_policy sp_podman_pull_policy;
#define SP_PODMAN_PULL_DEFAULT SP_PULL_DEFAULT
#define SP_PODMAN_PULL_MISSING SP_PULL_MISSING
#define SP_PODMAN_PULL_ALWAYS  SP_PULL_ALWAYS
#define SP_PODMAN_PULL_NEVER   SP_PULL_NEVER
typedef sp_bind_mount sp_podman_mount;
typedef sp_userns sp_podman_userns;
#define SP_PODMAN_USERNS_PRIVATE SP_USERNS_PRIVATE
#define SP_PODMAN_USERNS_HOST    SP_USERNS_HOST
typedef sp_seccomp sp_podman_seccomp;
#define SP_PODMAN_SECCOMP_SANDPOD    SP_SECCOMP_SANDPOD
#define SP_PODMAN_SECCOMP_PODMAN     SP_SECCOMP_ENGINE
#define SP_PODMAN_SECCOMP_UNCONFINED SP_SECCOMP_UNCONFINED
typedef sp_tmpfs sp_podman_tmpfs;
typedef sp_rlimit sp_podman_rlimit;
typedef sp_network sp_podman_network;
#define SP_PODMAN_NET_NONE     SP_NET_NONE
#define SP_PODMAN_NET_DEFAULT  SP_NET_DEFAULT
#define SP_PODMAN_NET_HOST     SP_NET_HOST
#define SP_PODMAN_SPEC_VERSION SP_CONTAINER_SPEC_VERSION
typedef sp_container_spec sp_podman_container_spec;
#define SP_PODMAN_CONTAINER_SPEC_INIT SP_CONTAINER_SPEC_INIT
typedef sp_container_info sp_podman_container_info;
typedef sp_containers sp_podman_containers;
#define SP_PODMAN_EXEC_SPEC_VERSION SP_EXEC_SPEC_VERSION
#define SP_PODMAN_EXEC_SPEC_INIT    SP_EXEC_SPEC_INIT
typedef sp_exec_spec sp_podman_exec_spec;
typedef sp_exec_info sp_podman_exec_info;

/** The image sandpod builds offline (see sp_podman_image_build_busybox()). */
#define SP_PODMAN_DEFAULT_IMAGE SP_DEFAULT_IMAGE

/* ------------------------------------------------------------ connect -- */

#define SP_PODMAN_OPTS_VERSION 1

/** Options for sp_podman_open(). Zero values select the defaults shown. */
typedef struct sp_podman_opts {
    unsigned version;
    /** "unix:///path/podman.sock", "tcp://host:port" or an absolute socket
     *  path. When set (or SANDPOD_URL is), only that service is used. */
    const char *url;
    /** Where a started service keeps its socket and log (default: the
     *  state root, $SANDPOD_HOME, else $XDG_DATA_HOME/sandpod, else
     *  ~/.local/share/sandpod). */
    const char *state_root;
    /** Never start a service; fail when none answers. */
    bool no_autostart;
    /** The podman binary to start (default: "podman" found in PATH). */
    const char *podman_path;
    /** OCI runtime for a started service (default: "runc" when it is in
     *  PATH, else Podman's own default). */
    const char *runtime;
    /** Timeout to connect and to answer a ping, in ms (default 5000). */
    unsigned connect_timeout_ms;
    /** Timeout of one ordinary request, in ms (default 60000). */
    unsigned timeout_ms;
    /** Timeout of transfers (import, pull, archives), in ms (default 600000). */
    unsigned transfer_timeout_ms;
    /** How long to wait for a started service to answer, in ms (default 30000). */
    unsigned start_timeout_ms;
    /** Skip $CONTAINER_HOST and the system sockets: use (or start) only the
     *  private service in the state root, apart from the host's containers. */
    bool private_service;
} sp_podman_opts;

#define SP_PODMAN_OPTS_INIT                                                                        \
    {                                                                                              \
        .version = SP_PODMAN_OPTS_VERSION                                                          \
    }

/**
 * Find a Podman service and connect to it.
 *
 * Order: `opts->url`, then $SANDPOD_URL (either one is used alone), then
 * $CONTAINER_HOST, /run/podman/podman.sock, $XDG_RUNTIME_DIR/podman/podman.sock
 * (these three unless `private_service`) and the private socket
 * `<state root>/podman.sock`. The first that answers a
 * ping wins. If none does (and autostart is allowed), `podman system service`
 * is started detached on the private socket, with its log in
 * `<state root>/podman.log`, and later calls reuse it.
 *
 * @param out   receives the handle; free with sp_podman_free()
 * @param opts  options, or NULL for the defaults
 * @return 0; SP_EPODMAN when no service answers and none could be started
 *         (the message says what is missing and how to fix it); SP_EINVAL
 *         for a malformed URL
 */
int sp_podman_open(sp_podman **out, const sp_podman_opts *opts, sp_error **err);

/** Free a handle; accepts NULL. A service it started keeps running. */
void sp_podman_free(sp_podman *p);

/** The URL of the connected service ("unix:///..." or "tcp://..."). */
const char *sp_podman_url(const sp_podman *p);

/** Whether sp_podman_open() started the service (rather than finding one). */
bool sp_podman_started_service(const sp_podman *p);

/** Ping the service. @return 0 or SP_EPODMAN / SP_ETIMEOUT */
int sp_podman_ping(sp_podman *p, sp_error **err);

/** What the service says about itself. */
typedef struct sp_podman_version {
    char *version;     /**< Podman version, e.g. "4.3.1" */
    char *api_version; /**< API version, e.g. "4.3.1" */
    char *os;          /**< e.g. "linux" */
    char *arch;        /**< e.g. "amd64" */
    char *kernel;      /**< kernel version of the service host */
    char *runtime;     /**< OCI runtime component name, e.g. "OCI Runtime (runc)", or NULL */
} sp_podman_version;

/** Query the version. @param out  free with sp_podman_version_free() */
int sp_podman_get_version(sp_podman_version **out, sp_podman *p, sp_error **err);
void sp_podman_version_free(sp_podman_version *v);

/** The service's container store (store.graphRoot of /info, e.g.
 *  /var/lib/containers/storage). @param out  free() it */
int sp_podman_graph_root(char **out, sp_podman *p, sp_error **err);

/**
 * Remove a folder from inside the caller's rootless user namespace
 * (`podman unshare rm -rf PATH`): files a rootless container made as
 * another of its ids belong to subuids the caller cannot remove directly.
 * @return 0 when PATH is gone; SP_ENOTFOUND (no podman); SP_ERROR
 */
int sp_podman_unshare_remove(const char *path, sp_error **err);

/**
 * The service's host facts, asked once per handle and kept.
 *
 * @param out  receives a pointer owned by the handle (valid until
 *             sp_podman_free())
 * @return 0 or SP_EPODMAN
 */
int sp_podman_host_info(const sp_podman_host **out, sp_podman *p, sp_error **err);

/* ------------------------------------------------------------- images -- */

/** Whether an image exists locally. @return 0 with *out set, or an error. */
int sp_podman_image_exists(bool *out, sp_podman *p, const char *name, sp_error **err);

/**
 * The id of the local image `name` (a reference or an id).
 *
 * @param out  receives the full id, hex without "sha256:" (free())
 * @return 0; SP_ENOTFOUND when no local image has that name; SP_EPODMAN
 */
int sp_podman_image_id(char **out, sp_podman *p, const char *name, sp_error **err);

#define SP_PODMAN_PULL_OPTS_VERSION 1

/** How to pull (sp_podman_image_pull_with()). */
typedef struct sp_podman_pull_opts {
    unsigned version; /**< SP_PODMAN_PULL_OPTS_VERSION */
    /** Skip TLS verification, and speak plain HTTP to a registry that has
     *  no TLS (podman's --tls-verify=false). Only for a trusted registry,
     *  such as one on 127.0.0.1. Default false: verify. */
    bool no_tls_verify;
    sp_podman_progress_fn progress; /**< each progress line, or NULL */
    void *userdata;                 /**< given to progress */
} sp_podman_pull_opts;

#define SP_PODMAN_PULL_OPTS_INIT                                                                   \
    {                                                                                              \
        .version = SP_PODMAN_PULL_OPTS_VERSION                                                     \
    }

/**
 * Pull an image from a registry through the service's streamed pull.
 *
 * @param out_id     receives the image id (free()); may be NULL
 * @param reference  e.g. "docker.io/library/debian:12", "127.0.0.1:5000/x:1"
 * @param opts       NULL for defaults
 * @return 0; SP_ENOTFOUND when the registry has no such image;
 *         SP_EPODMAN with one line saying why for the rest: the registry
 *         cannot be reached, it speaks plain HTTP while TLS is verified (the
 *         message says to turn verification off), or the service's own
 *         reason; SP_ETIMEOUT
 */
int sp_podman_image_pull_with(char **out_id, sp_podman *p, const char *reference,
                              const sp_podman_pull_opts *opts, sp_error **err);

/** sp_podman_image_pull_with() verifying TLS, with a progress callback. */
int sp_podman_image_pull(char **out_id, sp_podman *p, const char *reference,
                         sp_podman_progress_fn progress, void *userdata, sp_error **err);

/**
 * The policy `policy` comes to for `reference`: SP_PODMAN_PULL_DEFAULT
 * resolved (see there), anything else as it is. Never returns DEFAULT.
 */
sp_podman_pull_policy sp_podman_pull_policy_for(const char *reference,
                                                sp_podman_pull_policy policy);

/**
 * Make sure an image is present as `policy` asks: pull it when asked to,
 * or when missing under SP_PODMAN_PULL_MISSING. Never reports an image as
 * missing: SP_PODMAN_PULL_NEVER only returns 0 (the caller checks with
 * sp_podman_image_exists() and says what to do).
 *
 * @param out_pulled  set to whether a pull happened; may be NULL
 * @param opts        for the pull; NULL for defaults
 * @return 0; what sp_podman_image_pull_with() returns; SP_EINVAL for an
 *         unknown policy or opts version
 */
int sp_podman_image_ensure(bool *out_pulled, sp_podman *p, const char *reference,
                           sp_podman_pull_policy policy, const sp_podman_pull_opts *opts,
                           sp_error **err);

/** One local image (sp_podman_image_list()). */
typedef struct sp_podman_image_info {
    char *id;        /**< full id, hex without "sha256:" */
    char **names;    /**< NULL-terminated repository tags; may be empty */
    int64_t created; /**< seconds since the epoch */
    int64_t size;    /**< bytes */
} sp_podman_image_info;

/**
 * List the local images, newest first.
 *
 * @param out    receives an array of *out_n entries; free with
 *               sp_podman_image_list_free()
 * @return 0 or SP_EPODMAN
 */
int sp_podman_image_list(sp_podman_image_info **out, size_t *out_n, sp_podman *p, sp_error **err);

/** Free what sp_podman_image_list() returned (NULL is fine). */
void sp_podman_image_list_free(sp_podman_image_info *list, size_t n);

/**
 * Import a root filesystem tarball as an image (like `podman import`).
 *
 * @param out_id   receives the image id (free()); may be NULL
 * @param tar_fd   an fd to read the tarball from (read to its end, not
 *                 closed); plain or compressed tar
 * @param tag      the image name to give it, e.g. "localhost/x:latest"
 * @param changes  NULL-terminated Dockerfile-style instructions
 *                 ("CMD [\"/bin/sh\"]", "WORKDIR /workspace"), or NULL
 */
int sp_podman_image_import(char **out_id, sp_podman *p, int tar_fd, const char *tag,
                           const char *const *changes, sp_error **err);

/** sp_podman_image_import() from a file path. */
int sp_podman_image_import_path(char **out_id, sp_podman *p, const char *tar_path, const char *tag,
                                const char *const *changes, sp_error **err);

/**
 * Build sandpod's offline image and import it: a static busybox with its
 * applet links, root and an unprivileged `sandbox` user (uid/gid 1000, home
 * /workspace), /workspace and /tmp. Nothing is fetched. The rootfs tarball is
 * made in memory (libarchive) and sent through the images/import endpoint,
 * so no podman CLI is needed.
 *
 * @param out_id   receives the new image's id, or a copy of `tag` when the
 *                 image existed and was kept (free()); may be NULL
 * @param tag      image name, or NULL for SP_PODMAN_DEFAULT_IMAGE
 * @param busybox  path of a statically linked busybox, or NULL for /bin/busybox
 *                 (Debian's busybox-static)
 * @param force    rebuild when the image already exists
 * @return 0; SP_ENOTFOUND when busybox is missing (the message says which
 *         package to install); SP_EPODMAN
 */
int sp_podman_image_build_busybox(char **out_id, sp_podman *p, const char *tag, const char *busybox,
                                  bool force, sp_error **err);

#define SP_PODMAN_BUILD_OPTS_VERSION 1

/** How to build (sp_podman_image_build()). */
typedef struct sp_podman_build_opts {
    unsigned version; /**< SP_PODMAN_BUILD_OPTS_VERSION */
    /** The Containerfile's host path; NULL = CONTEXT/Containerfile, else
     *  CONTEXT/Dockerfile. One outside the context is sent along under the
     *  name ".sandpod.Containerfile". */
    const char *containerfile;
    /** The image's name ("localhost/tools:1"); NULL = untagged. */
    const char *tag;
    /** Each line the build prints (steps, RUN output), or NULL. */
    sp_podman_progress_fn output;
    void *userdata; /**< given to output */
} sp_podman_build_opts;

#define SP_PODMAN_BUILD_OPTS_INIT                                                                  \
    {                                                                                              \
        .version = SP_PODMAN_BUILD_OPTS_VERSION                                                    \
    }

/**
 * Build an image from a Containerfile through the service (POST
 * /libpod/build), like `podman build -f FILE -t TAG CONTEXT`.
 *
 * The context folder goes to the service as a tar made here: folders and
 * files are opened without following symlinks and symlinks are sent as
 * links, so nothing outside the context is read; sockets, fifos and
 * devices are left out. .containerignore and .dockerignore are not
 * applied: the whole folder is sent. A FROM image missing locally is
 * pulled with TLS verified (pull one from a plain-HTTP registry first).
 *
 * @param out_id   receives the new image's id (free()); may be NULL
 * @param context  the context folder; NULL or "" = "."
 * @param opts     NULL for defaults
 * @return 0; SP_ENOTFOUND (no Containerfile); errno-style errors reading
 *         the context; SP_EPODMAN with the build's own error (a failed
 *         step, a FROM image that cannot be pulled)
 */
int sp_podman_image_build(char **out_id, sp_podman *p, const char *context,
                          const sp_podman_build_opts *opts, sp_error **err);

/** Remove an image. @return 0, SP_ENOTFOUND, SP_EPODMAN (for example when in use) */
int sp_podman_image_remove(sp_podman *p, const char *name, bool force, sp_error **err);

/* --------------------------------------------------------- containers -- */

/**
 * Create a container (not started).
 *
 * @param out_id  receives the container id (free())
 * @param out_warnings  NULL, or receives a NULL-terminated list of what
 *        Podman warned about (limits it dropped, ...); free each and the list
 * @return 0; SP_EEXISTS (name in use); SP_ENOTFOUND (no such image);
 *         SP_EINVAL (bad spec); SP_EPODMAN
 */
int sp_podman_container_create(char **out_id, char ***out_warnings, sp_podman *p,
                               const sp_podman_container_spec *spec, sp_error **err);

/** Start a container; starting a running one is not an error. */
int sp_podman_container_start(sp_podman *p, const char *name_or_id, sp_error **err);

/** Stop a container: SIGTERM, then SIGKILL after timeout_s seconds (a
 *  negative value = the container's own stop timeout). Stopping a stopped
 *  container is not an error. */
int sp_podman_container_stop(sp_podman *p, const char *name_or_id, int timeout_s, sp_error **err);

/**
 * The output of a container's main process, running or stopped
 * (GET /containers/{name}/logs), handed to fn.
 *
 * @return 0; SP_ENOTFOUND (no such container), SP_EINVAL (bad options or a
 *         since Podman does not take), SP_EPODMAN, or fn's code
 */
int sp_podman_container_logs(sp_podman *p, const char *name_or_id, const sp_logs_opts *opts,
                             sp_logs_fn fn, void *userdata, sp_error **err);

/** Send a signal (e.g. SIGKILL) to the container's main process. */
int sp_podman_container_kill(sp_podman *p, const char *name_or_id, int signo, sp_error **err);

/** Freeze / thaw every process of a container. */
int sp_podman_container_pause(sp_podman *p, const char *name_or_id, sp_error **err);
int sp_podman_container_unpause(sp_podman *p, const char *name_or_id, sp_error **err);

/**
 * Wait until a container reaches a condition.
 *
 * @param exit_code   receives the container's exit code; may be NULL
 * @param condition   "stopped", "exited", "running", ...; NULL = "stopped"
 *                    or "exited"
 * @param timeout_ms  how long to wait; negative = the transfer timeout
 * @return 0, SP_ETIMEOUT, SP_ENOTFOUND, SP_EPODMAN
 */
int sp_podman_container_wait(int *exit_code, sp_podman *p, const char *name_or_id,
                             const char *condition, int timeout_ms, sp_error **err);

/** Inspect a container. @param out  free with sp_podman_container_info_free() */
int sp_podman_container_inspect(sp_podman_container_info **out, sp_podman *p,
                                const char *name_or_id, sp_error **err);
void sp_podman_container_info_free(sp_podman_container_info *info);

/**
 * List containers (running or not) whose labels match every filter.
 *
 * @param labels  NULL-terminated filters, each "key" or "key=value"; NULL = all
 * @param out     free with sp_podman_containers_free()
 */
int sp_podman_container_list(sp_podman_containers **out, sp_podman *p, const char *const *labels,
                             sp_error **err);
void sp_podman_containers_free(sp_podman_containers *list);

/**
 * Remove a container.
 *
 * @param force    stop it first when running
 * @param volumes  also remove its anonymous volumes
 * @return 0, SP_ENOTFOUND, SP_EPODMAN
 */
int sp_podman_container_delete(sp_podman *p, const char *name_or_id, bool force, bool volumes,
                               sp_error **err);

/** Resize the TTY of a container created with one. */
int sp_podman_container_resize(sp_podman *p, const char *name_or_id, unsigned rows, unsigned cols,
                               sp_error **err);

/**
 * Attach to a running container's main process as a stream (like
 * sp_podman_exec_start()).
 *
 * @param tty           the container was created with a TTY (raw stream)
 * @param attach_stdin  attach stdin too
 */
int sp_podman_container_attach(sp_exec **out, sp_podman *p, const char *name_or_id, bool tty,
                               bool attach_stdin, sp_error **err);

/**
 * Copy a path out of a container as a tar stream written to `out_fd`.
 * Podman 4.3 answers an empty tar for a bind mount of a container in a
 * private user namespace, and refuses sp_podman_archive_put() into one
 * (owner 0 "cannot be mapped"): read and write such mounts on the host.
 * @return 0, SP_ENOTFOUND (container or path), SP_EPODMAN, SP_ETIMEOUT
 */
int sp_podman_archive_get(sp_podman *p, const char *name_or_id, const char *path, int out_fd,
                          sp_error **err);

/**
 * Extract a tar stream read from `in_fd` (to its end) into the folder `path`
 * of a container.
 */
int sp_podman_archive_put(sp_podman *p, const char *name_or_id, const char *path, int in_fd,
                          sp_error **err);

/* --------------------------------------------------------------- exec -- */

/**
 * Create an exec session (not started).
 *
 * @param out_id  receives the session id (free())
 * @return 0; SP_ENOTFOUND (no container); SP_EPODMAN (e.g. not running)
 */
int sp_podman_exec_create(char **out_id, sp_podman *p, const char *container,
                          const sp_podman_exec_spec *spec, sp_error **err);

/**
 * Start an exec session attached: the answer is a stream that stays open
 * until the process ends.
 *
 * @param out  receives the stream; free with sp_exec_free()
 * @param tty  must match the spec the session was created with
 */
int sp_podman_exec_start(sp_exec **out, sp_podman *p, const char *exec_id, bool tty,
                         sp_error **err);

/** sp_podman_exec_create() then sp_podman_exec_start(). */
int sp_podman_exec(sp_exec **out, sp_podman *p, const char *container,
                   const sp_podman_exec_spec *spec, sp_error **err);

/**
 * Inspect an exec session. Once it has ended and the service runs on this
 * host, the conmon process that Podman keeps waiting out its exit delay
 * (300 s; the API cannot remove a session) is ended, so REST commands leave
 * no processes behind; the exit code stays on record until the container
 * stops or is removed.
 *
 * @return 0, SP_ENOTFOUND, SP_EPODMAN
 */
int sp_podman_exec_inspect(sp_podman_exec_info *out, sp_podman *p, const char *exec_id,
                           sp_error **err);

/**
 * Wait until an exec session is no longer running (polls; the stream's end
 * can come a moment before the service records the exit code).
 *
 * @param exit_code  receives the exit code; may be NULL
 * @return 0, SP_ETIMEOUT, SP_EPODMAN
 */
int sp_podman_exec_wait(int *exit_code, sp_podman *p, const char *exec_id, int timeout_ms,
                        sp_error **err);

/** Resize the TTY of a running exec session. */
int sp_podman_exec_resize(sp_podman *p, const char *exec_id, unsigned rows, unsigned cols,
                          sp_error **err);

/* ------------------------------------------------------- a sandbox's -- */

/** The Podman connection of a local sandbox (sandpod/sandbox.h; opened on
 *  first use; owned by the sandbox). NULL with *err set for a sandbox on
 *  another engine or an agent-only handle. */
sp_podman *sp_sandbox_podman(sp_sandbox *sb, sp_error **err);

#ifdef __cplusplus
}
#endif

#endif
