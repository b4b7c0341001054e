/* libcurl through sp_lazy (see lazy.h): include this instead of
 * <curl/curl.h>; call sp_curl_load() before the first curl call. */
#ifndef SANDPOD_LAZY_CURL_H
#define SANDPOD_LAZY_CURL_H

#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

#include "lazy.h"

#define SP_CURL_FUNCS(X)                                                                           \
    X(curl_global_init)                                                                            \
    X(curl_easy_init)                                                                              \
    X(curl_easy_setopt)                                                                            \
    X(curl_easy_getinfo)                                                                           \
    X(curl_easy_perform)                                                                           \
    X(curl_easy_cleanup)                                                                           \
    X(curl_easy_reset)                                                                             \
    X(curl_easy_strerror)                                                                          \
    X(curl_easy_escape)                                                                            \
    X(curl_free)                                                                                   \
    X(curl_slist_append)                                                                           \
    X(curl_slist_free_all)                                                                         \
    X(curl_easy_send)                                                                              \
    X(curl_easy_recv)

typedef struct sp_curl_api {
#define SP_X(f) __typeof__(f) *f;
    SP_CURL_FUNCS(SP_X)
#undef SP_X
} sp_curl_api;

extern sp_curl_api sp_curl;

#ifndef SP_LAZY_IMPL
#undef curl_easy_setopt
#undef curl_easy_getinfo
#define curl_global_init    (sp_curl.curl_global_init)
#define curl_easy_init      (sp_curl.curl_easy_init)
#define curl_easy_setopt    (sp_curl.curl_easy_setopt)
#define curl_easy_getinfo   (sp_curl.curl_easy_getinfo)
#define curl_easy_perform   (sp_curl.curl_easy_perform)
#define curl_easy_cleanup   (sp_curl.curl_easy_cleanup)
#define curl_easy_reset     (sp_curl.curl_easy_reset)
#define curl_easy_strerror  (sp_curl.curl_easy_strerror)
#define curl_easy_escape    (sp_curl.curl_easy_escape)
#define curl_free           (sp_curl.curl_free)
#define curl_slist_append   (sp_curl.curl_slist_append)
#define curl_slist_free_all (sp_curl.curl_slist_free_all)
#define curl_easy_send      (sp_curl.curl_easy_send)
#define curl_easy_recv      (sp_curl.curl_easy_recv)
#endif

#endif
