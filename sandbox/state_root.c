/* The state root: where it is, and the sandboxes its sandboxes/ folder
 * holds. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dir.h"
#include "sandbox_internal.h"
#include "sandpod/hydrate.h"

int sp_sandbox_resolve_root(char **out, const char *state_root, sp_error **err)
{
    if (state_root && *state_root) {
        *out = sp_xstrdup(state_root);
        return 0;
    }
    return sp_state_root(out, err);
}

int sp_sandbox_state_root(char **out, const char *state_root, sp_error **err)
{
    *out = NULL;
    return sp_sandbox_resolve_root(out, state_root, err);
}

/* The sandbox names under a state root, sorted: those whose folder holds
 * a sandbox.json (complete), or those whose folder holds none. */
static int list_names(char ***out, const char *state_root, bool complete, sp_error **err)
{
    *out = NULL;
    cleanup_free char *root = NULL;
    int r = sp_sandbox_resolve_root(&root, state_root, err);
    if (r < 0)
        return r;
    cleanup_free char *boxes = sp_xasprintf("%s/sandboxes", root);
    sp_strv sv = {0};
    sp_dirnames names = SP_DIRNAMES_INIT;
    cleanup_close int bfd = open(boxes, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (bfd >= 0 && sp_dir_read(&names, bfd, SP_DIR_BYNAME, 0) == 0) {
        for (size_t i = 0; i < names.n; i++) {
            const char *name = sp_dirnames_name(&names, i);
            if (name[0] == '.' || !sp_sandbox_name_valid(name))
                continue;
            cleanup_free char *js = sp_xasprintf("%s/sandbox.json", name);
            struct stat st;
            bool take = complete
                            ? faccessat(bfd, js, F_OK, 0) == 0
                            : fstatat(bfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                                  S_ISDIR(st.st_mode) &&
                                  fstatat(bfd, js, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
            if (take)
                sp_strv_push(&sv, sp_xstrdup(name));
        }
    }
    sp_dirnames_dispose(&names);
    *out = sp_strv_steal(&sv);
    return 0;
}

int sp_sandbox_list(char ***out, const char *state_root, sp_error **err)
{
    return list_names(out, state_root, true, err);
}

int sp_sandbox_list_incomplete(char ***out, const char *state_root, sp_error **err)
{
    return list_names(out, state_root, false, err);
}
