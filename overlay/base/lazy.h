/* Libraries loaded on first use (dlopen) instead of at process start.
 *
 * libcurl and libarchive pull in about thirty shared libraries between
 * them, which cost a one-shot command about 9 ms before main() runs; most
 * commands (every fs tool, snapshots) never touch them. Code that calls
 * them includes lazy_curl.h or lazy_archive.h, whose macros send each call
 * through a table filled by dlsym, and calls sp_curl_load() or
 * sp_archive_load() at its entry points, which fail with a clear error
 * when the library is missing. */
#ifndef SANDPOD_LAZY_H
#define SANDPOD_LAZY_H

#include <stdbool.h>
#include <stddef.h>

#include "base.h"

/* One library: the file names to try, the symbols to find and where each
 * goes. Loaded once; the outcome is kept. */
typedef struct sp_lazy_lib {
    const char *what;           /* "libcurl", for messages */
    const char *package;        /* the Debian package to suggest */
    const char *const *sonames; /* NULL-terminated */
    const char *const *symbols; /* NULL-terminated */
    void **const *slots;        /* one per symbol */
    bool tried, ok;
    char why[512];
} sp_lazy_lib;

/* Load lib (once per process): 0, or SP_ENOTFOUND naming what is missing
 * and how to install it. Thread-safe. */
int sp_lazy_load(sp_lazy_lib *lib, sp_error **err);

int sp_curl_load(sp_error **err);
int sp_archive_load(sp_error **err);

#endif
