/**
 * @file sandpod/container.h
 * @brief What a container engine is asked for, in no engine's terms.
 *
 * The types the engine-neutral sandbox code uses to describe a workload
 * container (its mounts, limits, user namespace, seccomp, network), to read
 * back its state, and to run commands in it as streams. The local engine
 * (Podman, sandpod/podman.h) takes and returns exactly these; its older
 * names for them (sp_podman_container_spec, SP_PODMAN_NET_NONE, ...) are
 * kept there as aliases.
 *
 * Ownership: structs returned through `out` parameters belong to the
 * caller and are freed with the matching `_free` function (accepting NULL).
 */
#ifndef SANDPOD_CONTAINER_H
#define SANDPOD_CONTAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandpod/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A stream to a process in a container (an exec session or an attach):
 *  stdout and stderr demultiplexed, TTY output raw. */
typedef struct sp_exec sp_exec;

/** The image a sandbox runs when none is named: sandpod's own, a static
 *  busybox that the local engine builds offline. */
#define SP_DEFAULT_IMAGE "localhost/sandpod-busybox:latest"

/** What /info says about the service's host, as far as sandpod needs it. */
typedef struct sp_container_host {
    /** The service runs rootless (host.security.rootless). */
    bool rootless;
    /** 1 or 2 (host.cgroupVersion). */
    int cgroup_version;
    /** Memory, CPU and pids limits take effect: the service may use the
     *  memory, cpu and pids cgroup controllers (a rootless service on
     *  cgroup v1 may not, and the engine then drops the limits). */
    bool limits_apply;
    /** Containers can be paused (not rootless on cgroup v1). */
    bool can_pause;
    /** The seccomp profile the engine applies by default, or NULL. */
    char *seccomp_profile;
    /** store.graphRoot */
    char *graph_root;
} sp_container_host;

/** Called with each progress line ("Trying to pull ...") during a pull. */
typedef void (*sp_progress_fn)(const char *line, void *userdata);

/** When a sandbox's image is pulled. */
typedef enum sp_pull_policy {
    /** SP_PULL_MISSING for a reference that names a registry host
     *  ("docker.io/library/debian:12", "127.0.0.1:5000/x"), otherwise
     *  SP_PULL_NEVER: a "localhost/" image is one built here (such as
     *  the offline busybox image) and a short name ("debian") would leave
     *  the registry to the host's registries.conf. */
    SP_PULL_DEFAULT = 0,
    SP_PULL_MISSING, /**< pull when no local image has the name */
    SP_PULL_ALWAYS,  /**< pull every time (a tag that moves) */
    SP_PULL_NEVER,   /**< use the local image only */
} sp_pull_policy;

/** A bind mount of a host folder or file. Bind mounts are always nosuid
 *  and nodev: nothing the workload writes there gains privileges. */
typedef struct sp_bind_mount {
    const char *source;      /**< host path */
    const char *destination; /**< path in the container */
    bool read_only;
} sp_bind_mount;

/** The user namespace of a container. The zero value is the safe one. */
typedef enum sp_userns {
    /** A user namespace of the container's own: a rootful service maps the
     *  container's ids to a range no host account uses (userns=auto); a
     *  rootless one maps the container's user to the caller (keep-id). */
    SP_USERNS_PRIVATE = 0,
    /** The host's user namespace: the container's uid N is host uid N. */
    SP_USERNS_HOST = 1,
} sp_userns;

/** Where a container's seccomp filter comes from. */
typedef enum sp_seccomp {
    /** sandpod's profile: the engine's default (Podman's) less keyctl, add_key,
     *  request_key, clone3 and new user namespaces. */
    SP_SECCOMP_SANDPOD = 0,
    /** The engine's default profile as it is (Podman's). */
    SP_SECCOMP_ENGINE = 1,
    /** No seccomp filter at all. */
    SP_SECCOMP_UNCONFINED = 2,
} sp_seccomp;

/** A tmpfs mount. */
typedef struct sp_tmpfs {
    const char *destination; /**< path in the container */
    uint64_t size_bytes;     /**< size limit; 0 = the engine's default (Podman: half of RAM) */
    /** Mode of the mount's root, e.g. 01777; 0 = 01777 */
    unsigned mode;
    /** Mount it noexec (by default programs may run from it). */
    bool noexec;
} sp_tmpfs;

/** A resource limit (setrlimit) for the container's processes. */
typedef struct sp_rlimit {
    const char *type; /**< "nofile", "nproc", "core", ... (no RLIMIT_ prefix) */
    uint64_t soft;
    uint64_t hard;
} sp_rlimit;

/** Network of a container. The zero value is the safe one. */
typedef enum sp_network {
    SP_NET_NONE = 0,    /**< loopback only */
    SP_NET_DEFAULT = 1, /**< the engine's default network (Podman: its bridge) */
    SP_NET_HOST = 2,    /**< the host's network namespace */
} sp_network;

#define SP_CONTAINER_SPEC_VERSION 1

/**
 * What to create. Zero values are the hardened ones: no network, every
 * capability dropped, no-new-privileges, a read-only root filesystem.
 * Each hardening is relaxed by setting its field on purpose.
 *
 * nofile and nproc rlimits are always set (to 1024 and 4096 unless given in
 * `rlimits`), because the engine's defaults (Podman's) exceed what many hosts allow and the
 * container would fail to start.
 */
typedef struct sp_container_spec {
    unsigned version;
    const char *name;  /**< container name, or NULL for a generated one */
    const char *image; /**< image name or id (required) */
    /** NULL-terminated argv, run exactly: argv[0] replaces the image's
     *  ENTRYPOINT (not appended to it). NULL = the image's ENTRYPOINT and CMD. */
    const char *const *command;
    /** NULL-terminated "KEY=VALUE" list, or NULL */
    const char *const *env;
    const char *workdir; /**< NULL = the image's */
    const char *user;    /**< "uid:gid" or a name; NULL = the image's */
    const sp_bind_mount *mounts;
    size_t n_mounts;
    const sp_tmpfs *tmpfs;
    size_t n_tmpfs;
    sp_network network;
    /** Memory limit in bytes; 0 = none. */
    uint64_t memory_bytes;
    /** CPU limit in billionths of a CPU (1000000000 = one CPU); 0 = none. */
    uint64_t nano_cpus;
    /** Maximum number of processes (cgroup pids); 0 = the engine's default. */
    int64_t pids_limit;
    /** Keep a writable root filesystem (default: read-only). */
    bool writable_rootfs;
    /** Keep the engine's default capability set (default: drop all). */
    bool keep_default_caps;
    /** NULL-terminated capabilities to add back ("CAP_CHOWN" or "chown"). */
    const char *const *cap_add;
    /** Allow setuid binaries to gain privileges (default: no-new-privileges). */
    bool allow_new_privileges;
    /** NULL-terminated "key=value" labels, or NULL */
    const char *const *labels;
    const sp_rlimit *rlimits;
    size_t n_rlimits;
    /** Run a minimal init (catatonit) as pid 1 that reaps zombies. */
    bool init;
    /** Seconds `stop` waits before SIGKILL; 0 = the engine's default (Podman: 10). */
    unsigned stop_timeout_s;
    /** User namespace (default: private). */
    sp_userns userns;
    /** Rootful private namespaces: how many ids the range holds (0 =
     *  65536). Rootless keep-id: the caller appears as `user`'s uid and gid
     *  when `user` is numeric "uid[:gid]". */
    uint32_t userns_size;
    /** Seccomp (default: sandpod's profile). */
    sp_seccomp seccomp;
    /** SP_SECCOMP_SANDPOD: a host file the profile is written to
     *  (the service reads it from there; NULL = the engine's default profile,
     *  with a warning in `warnings`). */
    const char *seccomp_file;
} sp_container_spec;

#define SP_CONTAINER_SPEC_INIT                                                                     \
    {                                                                                              \
        .version = SP_CONTAINER_SPEC_VERSION                                                       \
    }

#define SP_LOGS_OPTS_VERSION 2

/** Options of sp_sandbox_logs() (and sp_podman_container_logs()); NULL means
 *  all defaults (everything logged so far, then return). */
typedef struct sp_logs_opts {
    unsigned version;
    /** Keep going as the container prints, until it stops (or fn says stop). */
    bool follow;
    /** Only the last tail lines; negative: all (SP_LOGS_OPTS_INIT). */
    int64_t tail;
    /** Only what came after this time: RFC 3339 ("2024-05-01T10:00:00Z") or
     *  Unix seconds ("1714557600"); NULL: from the start. */
    const char *since;
    /** Prefix every line with the time it was logged (RFC 3339, then a space). */
    bool timestamps;
    /** (version 2) Refuse with SP_EINVAL where the engine's log merges
     *  stdout and stderr (a Pod's), rather than handing both as
     *  SP_EXEC_STDOUT. */
    bool streams_apart;
} sp_logs_opts;

#define SP_LOGS_OPTS_INIT                                                                          \
    {                                                                                              \
        .version = SP_LOGS_OPTS_VERSION, .tail = -1                                                \
    }

/**
 * Receives the log as it comes, in pieces that need not end at a line.
 *
 * @param stream  SP_EXEC_STDOUT or SP_EXEC_STDERR
 * @return 0 to go on; a negative SP_E* code stops, and the caller returns it
 */
typedef int (*sp_logs_fn)(int stream, const char *data, size_t len, void *userdata);

/** The state of a container. */
typedef struct sp_container_info {
    char *id;
    char *name;
    char *image; /**< image name as created */
    char *state; /**< "created", "running", "paused", "exited", ... */
    bool running;
    bool paused;
    bool oom_killed;
    int exit_code;
    int pid;           /**< host pid of the main process; 0 when not running */
    char *started_at;  /**< RFC 3339 time, or NULL (not filled by list) */
    char *finished_at; /**< RFC 3339 time, or NULL (not filled by list) */
    char *error;       /**< the runtime's last error, or NULL */
    /** NULL-terminated "key=value" labels (never NULL itself). */
    char **labels;
} sp_container_info;

/** A list of containers. */
typedef struct sp_containers {
    sp_container_info *items;
    size_t n;
} sp_containers;

#define SP_EXEC_SPEC_VERSION 1

/** What to run in a container. */
typedef struct sp_exec_spec {
    unsigned version;
    const char *const *argv; /**< NULL-terminated, required */
    const char *const *env;  /**< NULL-terminated "KEY=VALUE" list, or NULL */
    const char *workdir;     /**< NULL = the container's */
    const char *user;        /**< NULL = the container's */
    bool tty;                /**< allocate a pseudo-terminal (raw stream) */
    bool attach_stdin;
    bool attach_stdout;
    bool attach_stderr;
} sp_exec_spec;

#define SP_EXEC_SPEC_INIT                                                                          \
    {                                                                                              \
        .version = SP_EXEC_SPEC_VERSION, .attach_stdout = true, .attach_stderr = true              \
    }

/** The state of an exec session. */
typedef struct sp_exec_info {
    bool running;
    int exit_code; /**< valid once !running */
    int pid;       /**< host pid while running, else 0 */
} sp_exec_info;

/** Stream ids sp_exec_read() reports. */
enum {
    SP_EXEC_STDIN = 0,  /**< echoed stdin (rare) */
    SP_EXEC_STDOUT = 1, /**< stdout, and all output of a TTY session */
    SP_EXEC_STDERR = 2,
    SP_EXEC_SYSERR = 3, /**< an error text from the service itself */
};

/** The session id of an exec stream (NULL for an attach stream). */
const char *sp_exec_id(const sp_exec *e);

/** Whether the stream is raw (TTY) rather than multiplexed. */
bool sp_exec_is_tty(const sp_exec *e);

/**
 * The socket under the stream (non-blocking), for poll(). Owned by the
 * handle: do not read, write or close it directly. Data may be
 * buffered inside the handle: call sp_exec_read() until it times out (with
 * timeout 0) or check sp_exec_buffered() before waiting on the fd again.
 */
int sp_exec_fd(const sp_exec *e);

/** Whether sp_exec_read() can return data without reading the socket. */
bool sp_exec_buffered(const sp_exec *e);

/**
 * Read the next piece of output.
 *
 * Multiplexed frames are split and joined as needed: one call returns bytes
 * of one stream only, at most `cap`. A TTY stream returns raw bytes as
 * SP_EXEC_STDOUT.
 *
 * @param out_len     receives the byte count; 0 means the stream ended
 *                    (the process exited and the service closed it)
 * @param out_stream  receives the stream id (SP_EXEC_STDOUT, ...); may be NULL
 * @param timeout_ms  how long to wait for data; 0 = do not wait; negative =
 *                    wait without a limit
 * @return 0; SP_ETIMEOUT (nothing arrived in time; pass err NULL to poll
 *         cheaply); SP_EPODMAN (connection lost or a malformed frame)
 */
int sp_exec_read(size_t *out_len, int *out_stream, sp_exec *e, void *buf, size_t cap,
                 int timeout_ms, sp_error **err);

/** Send bytes to the process's stdin (blocks up to the handle's timeout). */
int sp_exec_write_stdin(sp_exec *e, const void *data, size_t len, sp_error **err);

/** Close the process's stdin (EOF) while still reading its output. */
int sp_exec_close_stdin(sp_exec *e, sp_error **err);

/** Close the stream; accepts NULL. The process keeps running. */
void sp_exec_free(sp_exec *e);

/** Free a container's state; accepts NULL. */
void sp_container_info_free(sp_container_info *info);
/** Free a list of containers; accepts NULL. */
void sp_containers_free(sp_containers *list);

#ifdef __cplusplus
}
#endif

#endif
