/* Fuzz target: the hydration mount SPEC parser (sp_mount_spec_parse), the
 * syntax of `--mount`. Properties: no crash or leak; a parsed mount always
 * has a host path; include/exclude lists are NULL-terminated and every
 * glob in them either compiles or fails cleanly; a failure has a message. */
#include "fuzz.h"
#include "glob.h"
#include "sandpod/hydrate.h"

static void check_globs(const char *const *v)
{
    for (size_t i = 0; v && v[i]; i++) {
        FZ_ASSERT(i < 100000, "glob list not terminated");
        sp_glob *g = NULL;
        if (sp_glob_compile(&g, v[i], NULL) == 0)
            sp_glob_free(g);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *spec = fz_cstr(data, size);
    sp_mount *m = NULL;
    sp_error *err = NULL;
    if (sp_mount_spec_parse(&m, spec, &err) == 0) {
        FZ_ASSERT(m && m->host_path && *m->host_path, "mount without a host path from '%s'", spec);
        check_globs(m->include);
        check_globs(m->exclude);
        sp_mount_free(m);
    } else {
        FZ_ASSERT(!m && err && err->code == SP_EINVAL && err->message, "bad failure for '%s'",
                  spec);
    }
    sp_error_free(err);
    free(spec);
    return 0;
}
