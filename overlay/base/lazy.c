/* Libraries loaded on first use (see lazy.h). */
#define SP_LAZY_IMPL 1
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "lazy.h"
#include "lazy_archive.h"
#include "lazy_curl.h"

static void load_once(sp_lazy_lib *lib)
{
    void *h = NULL;
    char first[256] = "not found"; /* dlerror()'s text is overwritten by the next try */
    for (size_t i = 0; lib->sonames[i] && !h; i++) {
        h = dlopen(lib->sonames[i], RTLD_NOW | RTLD_LOCAL);
        const char *e = h ? NULL : dlerror();
        if (i == 0 && e)
            snprintf(first, sizeof(first), "%s", e);
    }
    if (!h) {
        snprintf(lib->why, sizeof(lib->why),
                 "%s is not installed (%s); install it with: apt-get install %s", lib->what, first,
                 lib->package);
        return;
    }
    for (size_t i = 0; lib->symbols[i]; i++) {
        void *f = dlsym(h, lib->symbols[i]);
        if (!f) {
            snprintf(lib->why, sizeof(lib->why),
                     "%s is too old: it has no %s; install a newer %s (Debian 12 or later)",
                     lib->what, lib->symbols[i], lib->package);
            return; /* h stays loaded: harmless, and some slots may point into it */
        }
        *lib->slots[i] = f;
    }
    lib->ok = true;
}

static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;

int sp_lazy_load(sp_lazy_lib *lib, sp_error **err)
{
    pthread_mutex_lock(&load_mu);
    if (!lib->tried) {
        load_once(lib);
        lib->tried = true;
    }
    bool ok = lib->ok;
    pthread_mutex_unlock(&load_mu);
    return ok ? 0 : sp_err_set(err, SP_ENOTFOUND, 0, "%s", lib->why);
}

/* ------------------------------------------------------------ libcurl -- */

sp_curl_api sp_curl;

static const char *const curl_sonames[] = {"libcurl.so.4", "libcurl-gnutls.so.4", NULL};
static const char *const curl_symbols[] = {
#define SP_X(f) #f,
    SP_CURL_FUNCS(SP_X)
#undef SP_X
        NULL};
static void **const curl_slots[] = {
#define SP_X(f) (void **)&sp_curl.f,
    SP_CURL_FUNCS(SP_X)
#undef SP_X
};
static sp_lazy_lib curl_lib = {.what = "libcurl",
                               .package = "libcurl4",
                               .sonames = curl_sonames,
                               .symbols = curl_symbols,
                               .slots = curl_slots};

int sp_curl_load(sp_error **err)
{
    return sp_lazy_load(&curl_lib, err);
}

/* --------------------------------------------------------- libarchive -- */

sp_archive_api sp_archive;

static const char *const archive_sonames[] = {"libarchive.so.13", NULL};
static const char *const archive_symbols[] = {
#define SP_X(f) #f,
    SP_ARCHIVE_FUNCS(SP_X)
#undef SP_X
        NULL};
static void **const archive_slots[] = {
#define SP_X(f) (void **)&sp_archive.f,
    SP_ARCHIVE_FUNCS(SP_X)
#undef SP_X
};
static sp_lazy_lib archive_lib = {.what = "libarchive",
                                  .package = "libarchive13",
                                  .sonames = archive_sonames,
                                  .symbols = archive_symbols,
                                  .slots = archive_slots};

int sp_archive_load(sp_error **err)
{
    return sp_lazy_load(&archive_lib, err);
}
