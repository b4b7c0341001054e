/* Fuzz target: the glob dialect (compile, match, could_match_below, sets).
 *
 * Input: lines. The first is a pattern; the others are paths. Properties:
 *   - compiling and matching never crash, leak or take long (libFuzzer's
 *     -timeout catches exponential matching);
 *   - could_match_below is a sound pruning test: when a path matches, every
 *     one of its ancestor folders ("" for the base, "a", "a/b", ...) must
 *     answer true, or a walk would skip a real match;
 *   - a globset of all the lines accepts a path whenever one of its
 *     patterns (without '/') matches one of the path's names, and whenever
 *     an anchored pattern matches the path itself. */
#include <stdbool.h>

#include "fuzz.h"
#include "glob.h"

static void check_below(const sp_glob *g, const char *pattern, const char *path)
{
    size_t n = strlen(path);
    char *dir = malloc(n + 1);
    if (!dir)
        abort();
    /* "" and every proper prefix ending before a '/'. */
    FZ_ASSERT(sp_glob_could_match_below(g, ""),
              "pattern '%s' matches '%s' but could_match_below(\"\") is false", pattern, path);
    for (size_t i = 0; i < n; i++) {
        if (path[i] != '/')
            continue;
        memcpy(dir, path, i);
        dir[i] = '\0';
        FZ_ASSERT(sp_glob_could_match_below(g, dir),
                  "pattern '%s' matches '%s' but could_match_below('%s') is false", pattern, path,
                  dir);
    }
    free(dir);
}

/* Normalized-looking: no empty, '.' or leading/trailing '/' components,
 * which is what walks hand to the matcher. */
static bool walk_like(const char *p)
{
    if (!*p || p[0] == '/')
        return false;
    const char *c = p;
    for (;;) {
        const char *slash = strchr(c, '/');
        size_t cl = slash ? (size_t)(slash - c) : strlen(c);
        if (cl == 0 || (cl == 1 && c[0] == '.') || (cl == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        if (!slash)
            return true;
        c = slash + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 2048)
        return 0;
    char *text = fz_cstr(data, size);
    /* Split at '\n' into at most 16 lines. */
    char *lines[16];
    size_t n = 0;
    char *p = text;
    while (n < 16) {
        lines[n++] = p;
        char *nl = strchr(p, '\n');
        if (!nl)
            break;
        *nl = '\0';
        p = nl + 1;
    }

    sp_glob *g = NULL;
    sp_error *err = NULL;
    if (sp_glob_compile(&g, lines[0], &err) == 0) {
        for (size_t i = 1; i < n; i++) {
            bool m = sp_glob_match(g, lines[i]);
            (void)sp_glob_could_match_below(g, lines[i]);
            if (m && walk_like(lines[i]))
                check_below(g, lines[0], lines[i]);
        }
        /* bash's rule and typed entries only ever narrow the answer, and
         * pruning by could_match_below stays safe under them. */
        sp_glob *gp = NULL;
        FZ_ASSERT(sp_glob_compile_flags(&gp, lines[0], SP_GLOB_PERIOD, NULL) == 0,
                  "pattern '%s' compiles without flags but not with SP_GLOB_PERIOD", lines[0]);
        for (size_t i = 1; i < n; i++) {
            bool plain = sp_glob_match(g, lines[i]);
            for (int is_dir = 0; is_dir < 2; is_dir++) {
                bool typed = sp_glob_match_entry(g, lines[i], is_dir);
                bool period = sp_glob_match_entry(gp, lines[i], is_dir);
                FZ_ASSERT(!typed || plain, "'%s' matches '%s' typed but not untyped", lines[0],
                          lines[i]);
                FZ_ASSERT(!period || typed, "'%s' matches '%s' with SP_GLOB_PERIOD only", lines[0],
                          lines[i]);
                if (period && walk_like(lines[i]))
                    check_below(gp, lines[0], lines[i]);
            }
        }
        sp_glob_free(gp);
        sp_glob_free(g);
    } else {
        FZ_ASSERT(err && err->code == SP_EINVAL && err->message, "compile error without EINVAL");
        FZ_ASSERT(strlen(err->message) < 600, "compile error message of %zu bytes",
                  strlen(err->message));
    }
    sp_error_free(err);
    err = NULL;

    /* The same lines as a set of patterns, matched against each line. */
    sp_globset *set = NULL;
    if (sp_globset_compile(&set, (const char *const *)lines, n, &err) == 0) {
        for (size_t i = 0; i < n; i++)
            (void)sp_globset_match(set, lines[i]);
        sp_globset_free(set);
    }
    sp_error_free(err);
    free(text);
    return 0;
}
