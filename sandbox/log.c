/* sp_log_set_handler() and the library's sp_log(). A read-write lock
 * around the handler's calls makes a handler change wait for calls in
 * flight, so a caller may free the old userdata once it returns; a mutex
 * then keeps calls one at a time, as sandpod/log.h promises. The level in
 * an atomic lets every disabled message cost one load. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "log_internal.h"

static pthread_rwlock_t handler_lock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_mutex_t call_mu = PTHREAD_MUTEX_INITIALIZER;
static sp_log_fn handler;
static void *handler_ud;
/* The highest level a handler takes, -1 with none. */
static _Atomic int max_level = -1;

void sp_log_set_handler(sp_log_fn fn, sp_log_level level, void *userdata)
{
    pthread_rwlock_wrlock(&handler_lock);
    handler = fn;
    handler_ud = userdata;
    atomic_store(&max_level, fn ? (int)level : -1);
    pthread_rwlock_unlock(&handler_lock);
}

const char *sp_log_level_name(sp_log_level level)
{
    switch (level) {
    case SP_LOG_ERROR:
        return "error";
    case SP_LOG_WARN:
        return "warn";
    case SP_LOG_INFO:
        return "info";
    case SP_LOG_DEBUG:
        return "debug";
    }
    return "?";
}

bool sp_log_on(sp_log_level level)
{
    return (int)level <= atomic_load_explicit(&max_level, memory_order_relaxed);
}

void sp_log(sp_log_level level, const char *fmt, ...)
{
    if (!sp_log_on(level))
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    pthread_rwlock_rdlock(&handler_lock);
    if (handler && (int)level <= atomic_load(&max_level)) {
        pthread_mutex_lock(&call_mu);
        handler(level, buf, handler_ud);
        pthread_mutex_unlock(&call_mu);
    }
    pthread_rwlock_unlock(&handler_lock);
}
