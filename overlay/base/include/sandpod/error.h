/**
 * @file sandpod/error.h
 * @brief The one error type of libsandpod.
 *
 * Every fallible function returns 0 on success or a negative SP_E* code, and,
 * when the caller passed a non-NULL `sp_error **err`, stores a newly allocated
 * error there that the caller frees with sp_error_free(). Passing NULL for
 * `err` is allowed: the code alone is returned.
 */
#ifndef SANDPOD_ERROR_H
#define SANDPOD_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Stable error codes. Values are never renumbered; new codes are only ever
 * appended.
 */
typedef enum sp_code {
    SP_OK = 0,
    SP_ERROR = -1,      /**< anything without a better code; see sys_errno */
    SP_EINVAL = -2,     /**< bad argument or input (bad JSON, bad regex, binary as text) */
    SP_ENOTFOUND = -3,  /**< the named thing does not exist */
    SP_EEXISTS = -4,    /**< the named thing exists and must not */
    SP_EESCAPE = -5,    /**< a path would leave the workspace */
    SP_ETOOBIG = -6,    /**< a size, depth or count limit was hit */
    SP_EPODMAN = -7,    /**< the Podman service failed or is unreachable */
    SP_ETIMEOUT = -8,   /**< a deadline passed */
    SP_EREADONLY = -9,  /**< a write on a read-only handle */
    SP_EDENIED = -10,   /**< refused by policy (deny globs, approval) */
    SP_ECANCELED = -11, /**< stopped on the caller's request before it finished */
} sp_code;

/**
 * Why, more precisely than the code: a stable detail for programs, so that
 * no caller needs to match message text. Values are never renumbered; new
 * reasons are only ever appended. sp_reason_name() gives each a stable
 * snake_case name ("is_directory", ...) for JSON results.
 */
typedef enum sp_reason {
    SP_R_NONE = 0,           /**< no detail beyond the code */
    SP_R_IS_DIRECTORY = 1,   /**< a file was expected and a folder is there */
    SP_R_NOT_DIRECTORY = 2,  /**< a folder was expected (also on the way) */
    SP_R_NOT_EMPTY = 3,      /**< a folder that must be empty is not */
    SP_R_EXISTS = 4,         /**< the target exists and must not */
    SP_R_PATCH_PARSE = 5,    /**< a patch text is malformed */
    SP_R_PATCH_CONFLICT = 6, /**< a patch does not apply to the files as they are */
    SP_R_TOO_LARGE = 7,      /**< a size or count limit was hit */
    SP_R_STALE = 8,          /**< the file changed while it was read or edited */
    SP_R_NOT_TEXT = 9,       /**< binary or not UTF-8 where text is needed */
    SP_R_NOT_UNIQUE = 10,    /**< a text to replace matches more than once */
    SP_R_NO_STORE = 11,      /**< no snapshot store exists (nothing snapshotted yet) */
    SP_R_CROSS_DEVICE = 12,  /**< a rename across file systems (EXDEV) */
    SP_R_SERVICE = 13,       /**< the Podman service failed, refused or is unreachable */
    SP_R_ELSEWHERE = 14,     /**< the workspace or its store is not on this host (a sandbox on
                                  another engine): ask through the sandbox's typed calls */
} sp_reason;

/** An error: a code, the errno behind it (0 if none) and a one-line message. */
typedef struct sp_error {
    int code;      /**< one of sp_code */
    int sys_errno; /**< errno that caused it, or 0 */
    char *message; /**< one lowercase line; owned by the error */
    int reason;    /**< one of sp_reason; SP_R_NONE when nothing more is known */
} sp_error;

/** Free an error; accepts NULL. */
void sp_error_free(sp_error *err);

/** A short, static name for a code ("escape", "not found", ...). */
const char *sp_strerror(int code);

/** The stable snake_case name of a reason ("none", "is_directory",
 *  "not_directory", "not_empty", "exists", "patch_parse", "patch_conflict",
 *  "too_large", "stale", "not_text", "not_unique", "no_store",
 *  "cross_device", "service", "elsewhere"); "unknown" for anything else. */
const char *sp_reason_name(int reason);

#ifdef __cplusplus
}
#endif

#endif
