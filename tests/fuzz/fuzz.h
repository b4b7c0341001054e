/* Shared by the fuzz targets: the libFuzzer entry points and small helpers.
 * Each target is built twice: against libFuzzer (clang, SANDPOD_FUZZ) and
 * against standalone_main.c, which replays the corpus and the regression
 * inputs as an ordinary test in any build. */
#ifndef SANDPOD_FUZZ_H
#define SANDPOD_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A NUL-terminated copy of data[0..size) (free()). Embedded NULs stay, so
 * C-string consumers see a prefix. */
static inline char *fz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    if (size)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* Where scratch trees go: $SP_FUZZ_TMPDIR, else /dev/shm (writes fsync,
 * which a tmpfs makes free), else $TMPDIR, else /tmp. */
static inline const char *fz_tmpdir(void)
{
    const char *d = getenv("SP_FUZZ_TMPDIR");
    if (d && *d)
        return d;
    if (access("/dev/shm", W_OK | X_OK) == 0)
        return "/dev/shm";
    d = getenv("TMPDIR");
    return d && *d ? d : "/tmp";
}

/* A broken property: say which and crash, so both drivers report it. */
#define FZ_ASSERT(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz property failed at %s:%d: %s\n  ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
