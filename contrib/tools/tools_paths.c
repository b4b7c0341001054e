/* Paths as the tools take them and show them: the handle and path a
 * tool's path names under the fs_mode (contained beneath the workspace, or
 * absolute on "/" in unrestricted mode), and the form the model sees. Shared
 * by the filesystem tools, apply_patch and the stale-edit guard. */
#include <string.h>

#include "tools_core.h"

char *tools_normalize_abs(const char *abs)
{
    sp_strv parts = {0};
    const char *p = abs;
    while (*p) {
        while (*p == '/')
            p++;
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0)
            break;
        if (n == 1 && p[0] == '.') {
            /* skip */
        } else if (n == 2 && p[0] == '.' && p[1] == '.') {
            if (parts.n) {
                free(parts.v[--parts.n]);
                parts.v[parts.n] = NULL;
            }
        } else {
            sp_strv_push(&parts, sp_xstrndup(p, n));
        }
        p += n;
    }
    sp_buf b = {0};
    for (size_t i = 0; i < parts.n; i++) {
        if (i)
            sp_buf_addc(&b, '/');
        sp_buf_adds(&b, parts.v[i]);
    }
    sp_strv_dispose(&parts);
    if (!b.len)
        sp_buf_addc(&b, '.');
    return sp_buf_steal(&b);
}

int fs_target(sp_fs **fs, const char **rel, char **owned, sp_tools *t, const char *path,
              tool_call *c)
{
    *owned = NULL;
    if (!t->fs_any) {
        *fs = t->fs;
        *rel = path;
        char *n = NULL;
        if (sp_fs_path_normalize(&n, path, strlen(path), NULL) == 0 && n) {
            char *d = fs_display(t, n);
            call_path(c, d);
            free(d);
            free(n);
        }
        return 0;
    }
    char *abs = path[0] == '/' ? sp_xstrdup(path) : sp_xasprintf("%s/%s", t->root, path);
    *owned = tools_normalize_abs(abs);
    free(abs);
    *fs = t->fs_any;
    *rel = *owned;
    char *d = fs_display(t, *owned);
    call_path(c, d);
    free(d);
    return 0;
}

char *fs_display(const sp_tools *t, const char *rel)
{
    if (t->fs_any)
        return strcmp(rel, ".") == 0 ? sp_xstrdup("/") : sp_xasprintf("/%s", rel);
    return sp_xstrdup(rel);
}
