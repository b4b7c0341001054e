/* The state root and the per-sandbox folders below it (DESIGN.md). */
#include <string.h>
#include <sys/stat.h>

#include "base.h"
#include "sandpod/hydrate.h"

bool sp_sandbox_name_valid(const char *name)
{
    if (!name)
        return false;
    size_t n = strlen(name);
    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '_' && c != '.' && c != '-')))
            return false;
    }
    return true;
}

/* mkdir -p: each missing folder of `path` is created with `mode`. */
static int mkdir_p(const char *path, mode_t mode, sp_error **err)
{
    cleanup_free char *p = sp_xstrdup(path);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, mode) < 0 && errno != EEXIST)
            return sp_err_errno(err, errno, "mkdir", p);
        *s = c;
        if (c == '\0')
            break;
    }
    struct stat st;
    if (stat(path, &st) < 0)
        return sp_err_errno(err, errno, "stat", path);
    if (!S_ISDIR(st.st_mode))
        return sp_err_errno(err, ENOTDIR, "mkdir", path);
    return 0;
}

int sp_workspace_create(char **out_path, const char *name, sp_error **err)
{
    *out_path = NULL;
    if (!sp_sandbox_name_valid(name))
        return sp_err_set(err, SP_EINVAL, 0,
                          "bad sandbox name '%s': use 1-63 letters, digits, '_', '.' or '-', "
                          "starting with a letter or digit",
                          name ? name : "");
    cleanup_free char *root = NULL;
    int rc = sp_state_root(&root, err);
    if (rc < 0)
        return rc;
    /* The state root holds every sandbox's config and snapshots: private. */
    rc = mkdir_p(root, 0700, err);
    if (rc < 0)
        return rc;
    cleanup_free char *ws = sp_xasprintf("%s/sandboxes/%s/workspace", root, name);
    rc = mkdir_p(ws, 0755, err);
    if (rc < 0)
        return rc;
    *out_path = steal_pointer(&ws);
    return 0;
}
