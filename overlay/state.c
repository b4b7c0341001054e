/* The state root and the per-sandbox folders below it (DESIGN.md). */
#include <pwd.h>
#include <string.h>
#include <sys/stat.h>

#include "base.h"
#include "sandpod/hydrate.h"

int sp_state_root(char **out, sp_error **err)
{
    *out = NULL;
    const char *home = getenv("SANDPOD_HOME");
    if (home && *home) {
        if (home[0] != '/')
            return sp_err_set(err, SP_EINVAL, 0, "SANDPOD_HOME must be an absolute path: %s", home);
        *out = sp_xstrdup(home);
        return 0;
    }
    /* The XDG spec says a relative XDG_DATA_HOME is to be ignored. */
    const char *xdg = getenv("XDG_DATA_HOME");
    if (xdg && xdg[0] == '/') {
        *out = sp_xasprintf("%s/sandpod", xdg);
        return 0;
    }
    const char *h = getenv("HOME");
    if (h && h[0] == '/') {
        *out = sp_xasprintf("%s/.local/share/sandpod", h);
        return 0;
    }
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (getpwuid_r(geteuid(), &pw, buf, sizeof(buf), &res) != 0 || !res || !pw.pw_dir ||
        pw.pw_dir[0] != '/')
        return sp_err_set(err, SP_ERROR, 0,
                          "no state root: set SANDPOD_HOME, XDG_DATA_HOME or HOME");
    *out = sp_xasprintf("%s/.local/share/sandpod", pw.pw_dir);
    return 0;
}

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
