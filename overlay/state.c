/* The state root and the per-sandbox folders below it (DESIGN.md). */
#include <fcntl.h>
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

/* Contract: on success the folder `root` names (after following a final
 * symlink the caller or root owns, and any symlinks above it) is a folder
 * owned by the caller's effective uid with no group or other permission
 * bits. Nothing else is changed: a folder someone else owns, or one others
 * may write into, is refused rather than repaired, because whatever they
 * may already have put there cannot be trusted; a folder only others may
 * read (0755, as older sandpod made it) is tightened, since nothing could
 * have been planted in it. Checked on an fd, so the folder judged is the
 * folder changed. */
int sp_state_root_check(const char *root, bool create, sp_error **err)
{
    if (!root || !*root)
        return sp_err_set(err, SP_EINVAL, 0, "no state root given");
    if (create) {
        /* The parents it makes hold nothing but the root: private too. */
        int rc = mkdir_p(root, 0700, err);
        if (rc < 0)
            return rc;
    }
    cleanup_close int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
        /* A symlinked home or data folder is common; a link someone else
         * planted (in a shared /tmp, say) is not followed. */
        int e = errno;
        struct stat lst;
        if (lstat(root, &lst) == 0 && S_ISLNK(lst.st_mode)) {
            if (lst.st_uid != geteuid() && lst.st_uid != 0)
                return sp_err_set(err, SP_EDENIED, 0,
                                  "state root %s is a symlink owned by uid %u, not you; "
                                  "point SANDPOD_HOME at a folder of your own",
                                  root, (unsigned)lst.st_uid);
            fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        } else {
            errno = e;
        }
    }
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return sp_err_set(err, SP_ENOTFOUND, e, "state root %s does not exist", root);
        return sp_err_errno(err, e, "open state root", root);
    }
    struct stat st;
    if (fstat(fd, &st) < 0)
        return sp_err_errno(err, errno, "stat state root", root);
    uid_t me = geteuid();
    if (st.st_uid != me)
        return sp_err_set(err, SP_EDENIED, 0,
                          "state root %s is owned by uid %u, not you (uid %u); "
                          "point SANDPOD_HOME at a folder of your own",
                          root, (unsigned)st.st_uid, (unsigned)me);
    mode_t mode = st.st_mode & 07777;
    if (mode & (S_IWGRP | S_IWOTH))
        return sp_err_set(err, SP_EDENIED, 0,
                          "state root %s is writable by %s (mode %04o); chmod 700 it", root,
                          (mode & S_IWOTH) ? "others" : "its group", (unsigned)mode);
    if (mode & 077) {
        if (fchmod(fd, mode & ~(mode_t)077) < 0) {
            int e = errno;
            return sp_err_set(err, sp_code_from_errno(e), e,
                              "state root %s is readable by others (mode %04o) and cannot be "
                              "made private: %s; chmod 700 it",
                              root, (unsigned)mode, strerror(e));
        }
    }
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
    rc = sp_state_root_check(root, true, err);
    if (rc < 0)
        return rc;
    cleanup_free char *ws = sp_xasprintf("%s/sandboxes/%s/workspace", root, name);
    rc = mkdir_p(ws, 0755, err);
    if (rc < 0)
        return rc;
    *out_path = steal_pointer(&ws);
    return 0;
}
