/**
 * @file sandpod/log.h
 * @brief Where libsandpod's log messages go: a handler the program sets.
 *
 * The library never prints. With a handler set it reports, at
 * SP_LOG_DEBUG, each request to the Podman service (method, path with the
 * query values left out, status, bytes, duration), each frame to and from
 * the in-container agent (type and length, never the bytes), and why a
 * command took the agent or Podman's exec. Messages never hold a request
 * body, an environment value or file contents.
 */
#ifndef SANDPOD_LOG_H
#define SANDPOD_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

/** How much a message matters; higher is more detail. */
typedef enum sp_log_level {
    SP_LOG_ERROR = 0,
    SP_LOG_WARN = 1,
    SP_LOG_INFO = 2,
    SP_LOG_DEBUG = 3,
} sp_log_level;

/**
 * A log handler.
 *
 * @param level     the message's level
 * @param message   one line without a trailing newline, valid only during
 *                  the call
 * @param userdata  what was passed to sp_log_set_handler()
 *
 * It may be called from any thread of the library (the session I/O thread
 * too), one call at a time; it must not call into libsandpod (a log
 * line from there would wait for itself).
 */
typedef void (*sp_log_fn)(sp_log_level level, const char *message, void *userdata);

/**
 * Send messages up to max_level to fn (NULL: to nowhere, the default).
 *
 * Thread-safe: once it returns, no thread is still in the previous
 * handler, so its userdata may be freed.
 */
void sp_log_set_handler(sp_log_fn fn, sp_log_level max_level, void *userdata);

/** The name of a level: "error", "warn", "info", "debug". */
const char *sp_log_level_name(sp_log_level level);

#ifdef __cplusplus
}
#endif

#endif
