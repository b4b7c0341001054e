/* The library's side of sandpod/log.h. Not installed. */
#ifndef SANDPOD_LOG_INTERNAL_H
#define SANDPOD_LOG_INTERNAL_H

#include <stdbool.h>

#include "sandpod/log.h"

#if defined(__GNUC__)
#define SP_LOG_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SP_LOG_PRINTF(a, b)
#endif

/* Whether a message at level would reach a handler: test it before
 * building an expensive message. */
bool sp_log_on(sp_log_level level);
/* Format and hand a message to the handler, if one takes this level. */
void sp_log(sp_log_level level, const char *fmt, ...) SP_LOG_PRINTF(2, 3);

#endif
