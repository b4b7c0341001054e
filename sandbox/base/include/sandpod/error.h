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
    SP_ERROR = -1,     /**< anything without a better code; see sys_errno */
    SP_EINVAL = -2,    /**< bad argument or input (bad JSON, bad regex, binary as text) */
    SP_ENOTFOUND = -3, /**< the named thing does not exist */
    SP_EEXISTS = -4,   /**< the named thing exists and must not */
    SP_EESCAPE = -5,   /**< a path would leave the workspace */
    SP_ETOOBIG = -6,   /**< a size, depth or count limit was hit */
    SP_EPODMAN = -7,   /**< the Podman service failed or is unreachable */
    SP_ETIMEOUT = -8,  /**< a deadline passed */
    SP_EREADONLY = -9, /**< a write on a read-only handle */
    SP_EDENIED = -10,  /**< refused by policy (deny globs, approval) */
} sp_code;

/** An error: a code, the errno behind it (0 if none) and a one-line message. */
typedef struct sp_error {
    int code;      /**< one of sp_code */
    int sys_errno; /**< errno that caused it, or 0 */
    char *message; /**< one lowercase line; owned by the error */
} sp_error;

/** Free an error; accepts NULL. */
void sp_error_free(sp_error *err);

/** A short, static name for a code ("escape", "not found", ...). */
const char *sp_strerror(int code);

#ifdef __cplusplus
}
#endif

#endif
