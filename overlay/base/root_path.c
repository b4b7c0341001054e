/* Where sandboxes live by default: the one function of the ground floor
 * that asks the user database, in a file of its own so that the static
 * sandpod-agent (which links base.c) does not pull in NSS. */
#include <pwd.h>
#include <unistd.h>

#include "base.h"

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
