/* Templates: a sandbox's configuration and one snapshot of its workspace,
 * kept in the state root so that sandboxes start from it as forks do.
 *
 * STATE_ROOT/templates/NAME/ holds template.json (sandbox.json's format,
 * the per-container facts left out, plus the template's own keys), an
 * empty workspace/ (only to open the store with) and snapshots.git, whose
 * objects are hard links to the origin's: never a reference to the origin,
 * which may be removed. Creating from a template hands a handle on that
 * folder to sp_sandbox_fork() as the origin: the same path every fork
 * takes (share, then restore through the store into the new workspace).
 * The folder is never mounted into a container. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "json.h"
#include "egress_proxy.h"
#include "sandbox_internal.h"
#include "sandpod/fork.h"
#include "sandpod/hydrate.h"
#include "sandpod/sandbox_snapshot.h"
#include "sandpod/template.h"
#include "fdtree.h"

#define TEMPLATE_JSON_VERSION 1

/* Keys of sandbox.json that belong to one container, not a template. */
static const char *const per_container[] = {"container_id", "workspace",    "uid_map",  "gid_map",
                                            "host_uid",     "host_gid",     "rootless", "warnings",
                                            "init_pid",     "limits_apply", NULL};

bool sp_template_name_valid(const char *name)
{
    return sp_sandbox_name_valid(name);
}

static int check_name(const char *name, sp_error **err)
{
    if (sp_template_name_valid(name))
        return 0;
    return sp_err_set(err, SP_EINVAL, 0,
                      "invalid template name: %s (letters, digits, '_', '.', '-', starting with a "
                      "letter or digit; at most 63)",
                      name ? name : "(null)");
}

/* The state root's templates folder, made when `create`. */
static int templates_dir(char **out, const char *state_root, bool create, sp_error **err)
{
    *out = NULL;
    cleanup_free char *root = NULL;
    int r = sp_sandbox_resolve_root(&root, state_root, err);
    if (r < 0)
        return r;
    if ((r = sp_state_root_check(root, create, err)) < 0)
        return r;
    char *dir = sp_xasprintf("%s/templates", root);
    if (create && mkdir(dir, 0700) < 0 && errno != EEXIST) {
        r = sp_err_errno(err, errno, "mkdir", dir);
        free(dir);
        return r;
    }
    *out = dir;
    return 0;
}

/* A handle on the template's folder shaped as a sandbox: the origin
 * sp_sandbox_fork() reads the configuration and the store of. It has no
 * container and is never started. */
static int open_as_origin(sp_sandbox **out, cJSON **meta, const char *name, const char *state_root,
                          sp_error **err)
{
    *out = NULL;
    int r = check_name(name, err);
    if (r < 0)
        return r;
    cleanup_free char *dir = NULL;
    if ((r = templates_dir(&dir, state_root, false, err)) < 0)
        return r == SP_ENOTFOUND ? sp_err_set(err, SP_ENOTFOUND, 0, "no template named %s", name)
                                 : r;
    sp_sandbox *t = sp_xcalloc(1, sizeof(*t));
    /* A template's store is in its folder here, as a local sandbox's. */
    t->kind = sp_kind_for(SP_ENGINE_PODMAN);
    t->lock_fd = -1;
    t->name = sp_xstrdup(name);
    t->state_root = sp_xstrndup(dir, strlen(dir) - strlen("/templates"));
    t->state_dir = sp_xasprintf("%s/%s", dir, name);
    t->workspace = sp_xasprintf("%s/workspace", t->state_dir);
    cleanup_free char *path = sp_xasprintf("%s/template.json", t->state_dir);
    struct stat st;
    if (lstat(t->state_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        sp_sandbox_free(t);
        return sp_err_set(err, SP_ENOTFOUND, 0, "no template named %s", name);
    }
    if ((r = sp_sandbox_config_load(t, path, NULL, err)) < 0) {
        sp_sandbox_free(t);
        return r == SP_ENOTFOUND ? sp_err_set(err, SP_ENOTFOUND, 0, "no template named %s", name)
                                 : r;
    }
    if (meta) {
        cleanup_close int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        sp_buf b = SP_BUF_INIT;
        if (fd >= 0)
            sp_read_all(fd, &b, 1 << 24);
        *meta = sp_json_parse(b.data ? b.data : "", b.len);
        sp_buf_dispose(&b);
    }
    *out = t;
    return 0;
}

/* The record of t, taking its vectors (t is freed after). */
static sp_template_info *info_of(sp_sandbox *t, const cJSON *meta)
{
    sp_sandbox_config *c = &t->cfg;
    sp_template_info *i = sp_xcalloc(1, sizeof(*i));
    i->name = sp_xstrdup(t->name);
    i->path = sp_xstrdup(t->state_dir);
    i->origin = sp_xstrdup(sp_json_str_or(meta, "origin", ""));
    i->snapshot = sp_xstrdup(sp_json_str_or(meta, "snapshot", ""));
    i->created_at = sp_xstrdup(sp_json_str_or(meta, "created_at", ""));
    i->image = sp_xstrdup(c->image);
    i->image_id = sp_xstrdup(sp_json_str_or(meta, "image_id", ""));
    i->setup = c->setup;
    c->setup = NULL;
    sp_strv names = {0};
    for (size_t k = 0; c->env && c->env[k]; k++) {
        const char *eq = strchr(c->env[k], '=');
        sp_strv_push(&names,
                     eq ? sp_xstrndup(c->env[k], (size_t)(eq - c->env[k])) : sp_xstrdup(c->env[k]));
    }
    i->env_names = sp_strv_steal(&names);
    i->env_pass = c->env_pass;
    c->env_pass = NULL;
    i->workdir = sp_xstrdup(c->workdir);
    i->user = sp_xstrdup(c->user);
    i->network = c->network;
    i->memory_bytes = c->memory_bytes;
    i->nano_cpus = c->nano_cpus;
    i->pids_limit = c->pids_limit;
    i->n_mounts = c->n_mounts;
    i->egress = c->egress;
    c->egress = NULL;
    return i;
}

void sp_template_info_free(sp_template_info *t)
{
    if (!t)
        return;
    free(t->name);
    free(t->path);
    free(t->origin);
    free(t->snapshot);
    free(t->created_at);
    free(t->image);
    free(t->image_id);
    sp_strv_free(t->setup);
    sp_strv_free(t->env_names);
    sp_strv_free(t->env_pass);
    sp_strv_free(t->egress);
    free(t->workdir);
    free(t->user);
    free(t);
}

/* ----------------------------------------------------------------- save -- */

/* Snapshot ref of a sandbox whose store is not on this host (NULL: its
 * workspace now, through a snapshot its store does not keep) into the
 * template's store dst, through an unnamed file in the template's
 * folder. */
static int import_archive(char **out_id, sp_snapstore *dst, sp_sandbox *sb, const char *ref,
                          const char *tmp, sp_error **err)
{
    cleanup_close int fd = open(tmp, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return sp_err_errno(err, errno, "a temporary file in", tmp);
    int r = ref ? sp_sandbox_snapshot_export_fd(sb, ref, fd, SP_SNAPSHOT_TAR, err)
                : sb->kind->snap_export(sb, NULL, SP_SNAPSHOT_TAR, fd, err);
    if (r == 0 && lseek(fd, 0, SEEK_SET) < 0)
        r = sp_err_errno(err, errno, "lseek", tmp);
    sp_snapshot *snap = NULL;
    if (r == 0 && (r = sp_snapshot_import(&snap, dst, NULL, fd, NULL, err)) == 0)
        *out_id = sp_xstrdup(snap->id);
    sp_snapshot_free(snap);
    return r;
}

/* Share snapshot `ref` of sb (or a fresh one) into the store at dst_dir. */
static int share_snapshot(char **out_id, sp_sandbox *sb, const char *ref, const char *tmp,
                          sp_error **err)
{
    *out_id = NULL;
    cleanup_free char *ws = sp_xasprintf("%s/workspace", tmp);
    cleanup_free char *store = sp_xasprintf("%s/snapshots.git", tmp);
    if (mkdir(ws, 0700) < 0)
        return sp_err_errno(err, errno, "mkdir", ws);
    sp_snapstore *dst = NULL;
    int r = sp_snapstore_open(&dst, ws, store, NULL, err);
    if (r < 0)
        return r;
    sp_sandbox_snap *h = NULL;
    sp_snapshot *fresh = NULL, *shared = NULL;
    sp_snapstore_opts so = SP_SNAPSTORE_OPTS_INIT;
    so.no_create = ref != NULL;
    sp_sandbox_snapshot_opts ho = SP_SANDBOX_SNAPSHOT_OPTS_INIT;
    ho.store = &so;
    sp_error *e = NULL;
    r = sp_sandbox_snapshot_open(&h, sb, &ho, &e);
    if (r < 0 && e && e->reason == SP_R_ELSEWHERE) {
        sp_error_free(e);
        r = import_archive(out_id, dst, sb, ref, tmp, err);
        sp_snapstore_free(dst);
        return r;
    }
    if (r < 0)
        sp_err_give(err, e, r);
    if (r == SP_ENOTFOUND && ref)
        r = sp_err_set(err, SP_ENOTFOUND, 0, "sandbox %s has no snapshot %s", sb->name, ref);
    if (r == 0 && !ref &&
        (r = sp_snapshot_create(&fresh, sp_sandbox_snapshot_store(h), NULL, err)) == 0)
        ref = fresh->id;
    if (r == 0)
        r = sp_snapshot_share(&shared, dst, sp_sandbox_snapshot_store(h), ref, err);
    /* What the origin was made from travels with the template, so that a
     * sandbox made from it applies to the origin's host folders whole. */
    if (r == 0)
        r = sp_sandbox_keep_origin_base(dst, sp_sandbox_snapshot_store(h), err);
    /* Sharing linked every object of the origin's store: keep only what
     * the template's snapshots need. */
    if (r == 0)
        r = sp_snapstore_gc(NULL, dst, err);
    if (r == 0)
        *out_id = sp_xstrdup(shared->id);
    sp_snapshot_free(shared);
    sp_snapshot_free(fresh);
    sp_sandbox_snapshot_close(h);
    sp_snapstore_free(dst);
    return r;
}

static int write_template_json(sp_sandbox *sb, const char *name, const char *tmp, const char *snap,
                               const char *image_id, sp_error **err)
{
    cJSON *o = sp_sandbox_config_json(sb);
    for (size_t i = 0; per_container[i]; i++)
        cJSON_DeleteItemFromObjectCaseSensitive(o, per_container[i]);
    /* A remote origin's Pod is its own; its engine stays, as the default
     * engine of the sandboxes made from the template. */
    cJSON_DeleteItemFromObjectCaseSensitive(o, "engine_kind");
    cJSON_DeleteItemFromObjectCaseSensitive(o, "remote");
    cJSON_ReplaceItemInObjectCaseSensitive(o, "version", cJSON_CreateNumber(TEMPLATE_JSON_VERSION));
    cJSON_ReplaceItemInObjectCaseSensitive(o, "name", cJSON_CreateString(name));
    cleanup_free char *now = sp_now_rfc3339();
    cJSON_ReplaceItemInObjectCaseSensitive(o, "created_at", cJSON_CreateString(now));
    cJSON_AddStringToObject(o, "origin", sb->name);
    cJSON_AddStringToObject(o, "snapshot", snap);
    cJSON_AddStringToObject(o, "image_id", image_id);
    char *js = cJSON_Print(o);
    cJSON_Delete(o);
    if (!js)
        abort();
    sp_buf text = SP_BUF_INIT;
    sp_buf_adds(&text, js);
    sp_buf_addc(&text, '\n');
    free(js);
    cleanup_free char *path = sp_xasprintf("%s/template.json", tmp);
    /* It may hold -e values: only its owner reads it. */
    int r = sp_write_file_atomic(path, text.data, text.len, 0600, err);
    sp_buf_dispose(&text);
    if (r < 0 || !sb->cfg.egress)
        return r;
    /* The egress hosts file goes along with the rules, and the CAs the
     * proxy was told to trust with the secrets (a fork of the template
     * finds them where a fork of a sandbox does). */
    static const char *const files[] = {SP_EGRESS_HOSTS, SP_EGRESS_EXTRA_CA};
    cleanup_free char *dir = sp_xasprintf("%s/egress", tmp);
    for (size_t i = 0; r == 0 && i < sizeof(files) / sizeof(files[0]); i++) {
        cleanup_free char *src = sp_xasprintf("%s/egress/%s", sb->state_dir, files[i]);
        cleanup_close int fd = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            continue;
        sp_buf b = SP_BUF_INIT;
        cleanup_free char *copy = sp_xasprintf("%s/%s", dir, files[i]);
        if (sp_read_all(fd, &b, 8u << 20) < 0 || (mkdir(dir, 0755) < 0 && errno != EEXIST))
            r = sp_err_errno(err, errno, "copy the egress files of sandbox", sb->name);
        else
            r = sp_write_file_atomic(copy, b.data ? b.data : "", b.len, 0644, err);
        sp_buf_dispose(&b);
    }
    return r;
}

/* Put the finished folder tmp at dir/name: never over an existing one
 * unless force, and then by exchanging the two, so the name always holds
 * a whole template. */
static int install(int dfd, const char *tmp, const char *name, bool force, sp_error **err)
{
    if (renameat2(dfd, tmp, dfd, name, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EEXIST)
        return sp_err_errno(err, errno, "rename", name);
    if (!force)
        return sp_err_set(err, SP_EEXISTS, EEXIST,
                          "a template named %s already exists (--force replaces it)", name);
    if (renameat2(dfd, tmp, dfd, name, RENAME_EXCHANGE) < 0)
        return sp_err_errno(err, errno, "replace", name);
    sp_tree_remove(dfd, tmp, 0, NULL); /* the old one */
    return 0;
}

int sp_template_save(sp_template_info **out, sp_sandbox *sb, const char *name,
                     const sp_template_opts *opts, sp_error **err)
{
    if (out)
        *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_TEMPLATE_OPTS_VERSION, "sp_template_opts", err) < 0)
        return SP_EINVAL;
    sp_template_opts o = SP_TEMPLATE_OPTS_INIT;
    if (opts)
        o = *opts;
    int r = check_name(name, err);
    if (r < 0)
        return r;
    cleanup_free char *dir = NULL;
    if ((r = templates_dir(&dir, sb->state_root, true, err)) < 0)
        return r;
    cleanup_close int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return sp_err_errno(err, errno, "open", dir);
    if (!o.force && faccessat(dfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
        return sp_err_set(err, SP_EEXISTS, EEXIST,
                          "a template named %s already exists (--force replaces it)", name);
    /* The image the snapshot was prepared in, pinned by id where the
     * image is on this machine; a remote engine pulls its own (none kept). */
    cleanup_free char *image_id = NULL;
    if ((r = sb->kind->image_pin(&image_id, sb, err)) < 0)
        return sp_err_wrap(err, r, "template %s: image %s of sandbox %s", name, sb->cfg.image,
                           sb->name);
    cleanup_free char *tmp = sp_xasprintf("%s/.tmp-%s-XXXXXX", dir, name);
    if (!mkdtemp(tmp))
        return sp_err_errno(err, errno, "mkdtemp", tmp);
    const char *base = strrchr(tmp, '/') + 1;
    cleanup_free char *snap = NULL;
    r = share_snapshot(&snap, sb, o.snapshot, tmp, err);
    if (r == 0)
        r = write_template_json(sb, name, tmp, snap, image_id, err);
    if (r == 0)
        r = install(dfd, base, name, o.force, err);
    if (r < 0) {
        sp_tree_remove(dfd, base, 0, NULL);
        return r;
    }
    if (out)
        r = sp_template_info_get(
            out, name,
            &(sp_template_opts){.version = SP_TEMPLATE_OPTS_VERSION, .state_root = sb->state_root},
            err);
    return r;
}

/* ------------------------------------------------------ list, info, rm -- */

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int sp_template_list(char ***out, const sp_template_opts *opts, sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_TEMPLATE_OPTS_VERSION, "sp_template_opts", err) < 0)
        return SP_EINVAL;
    cleanup_free char *dir = NULL;
    int r = templates_dir(&dir, opts ? opts->state_root : NULL, false, err);
    sp_strv sv = {0};
    if (r == SP_ENOTFOUND) {
        if (err) {
            sp_error_free(*err);
            *err = NULL;
        }
        *out = sp_strv_steal(&sv);
        return 0;
    }
    if (r < 0)
        return r;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno != ENOENT)
            return sp_err_errno(err, errno, "read", dir);
        *out = sp_strv_steal(&sv);
        return 0;
    }
    struct dirent *e;
    while ((e = readdir(d)))
        if (sp_template_name_valid(e->d_name) && e->d_type == DT_DIR)
            sp_strv_push(&sv, sp_xstrdup(e->d_name));
    closedir(d);
    if (sv.n)
        qsort(sv.v, sv.n, sizeof(*sv.v), by_name);
    *out = sp_strv_steal(&sv);
    return 0;
}

int sp_template_info_get(sp_template_info **out, const char *name, const sp_template_opts *opts,
                         sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_TEMPLATE_OPTS_VERSION, "sp_template_opts", err) < 0)
        return SP_EINVAL;
    sp_sandbox *t = NULL;
    cJSON *meta = NULL;
    int r = open_as_origin(&t, &meta, name, opts ? opts->state_root : NULL, err);
    if (r < 0)
        return r;
    *out = info_of(t, meta);
    cJSON_Delete(meta);
    sp_sandbox_free(t);
    return 0;
}

int sp_template_remove(const char *name, const sp_template_opts *opts, sp_error **err)
{
    if (SP_OPTS_CHECK(opts, 1, SP_TEMPLATE_OPTS_VERSION, "sp_template_opts", err) < 0)
        return SP_EINVAL;
    int r = check_name(name, err);
    if (r < 0)
        return r;
    cleanup_free char *dir = NULL;
    if ((r = templates_dir(&dir, opts ? opts->state_root : NULL, false, err)) < 0)
        return r == SP_ENOTFOUND ? sp_err_set(err, SP_ENOTFOUND, 0, "no template named %s", name)
                                 : r;
    cleanup_close int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0 && errno == ENOENT)
        return sp_err_set(err, SP_ENOTFOUND, 0, "no template named %s", name);
    if (dfd < 0)
        return sp_err_errno(err, errno, "open", dir);
    if (faccessat(dfd, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
        return sp_err_set(err, SP_ENOTFOUND, 0, "no template named %s", name);
    /* Out of the name first (into a fresh folder of its own): a removal
     * cut short leaves no half template under it. */
    cleanup_free char *tomb = sp_xasprintf("%s/.rm-%s-XXXXXX", dir, name);
    if (!mkdtemp(tomb))
        return sp_err_errno(err, errno, "mkdtemp", tomb);
    const char *base = strrchr(tomb, '/') + 1;
    cleanup_close int tfd = openat(dfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (tfd < 0 || renameat(dfd, name, tfd, name) < 0) {
        r = errno == ENOENT ? sp_err_set(err, SP_ENOTFOUND, 0, "no template named %s", name)
                            : sp_err_errno(err, errno, "remove template", name);
        unlinkat(dfd, base, AT_REMOVEDIR);
        return r;
    }
    return sp_tree_remove(dfd, base, 0, err);
}

/* --------------------------------------------------------------- create -- */

/* The template's image must be the one its snapshot was prepared in: a
 * tag pulled or built again since names another image. */
static int check_image(const sp_sandbox *t, const char *image_id, const sp_sandbox_opts *o,
                       sp_error **err)
{
    const sp_local_ops *ops = sp_local_engine();
    sp_local *p = NULL;
    int r = ops->open(&p, o->podman_url, t->state_root, false, err);
    if (r < 0)
        return r;
    char *now = NULL;
    sp_error *e = NULL;
    r = ops->image_id(&now, p, t->cfg.image, &e);
    ops->free(p);
    if (r == SP_ENOTFOUND) {
        sp_error_free(e);
        return sp_err_set(err, SP_ENOTFOUND, 0,
                          "template %s: its image %s is gone; pull it (`sandpod image pull %s`) or "
                          "build it again, then save the template again",
                          t->name, t->cfg.image, t->cfg.image);
    }
    if (r < 0) {
        if (err)
            *err = e;
        else
            sp_error_free(e);
        return r;
    }
    if (image_id && *image_id && strcmp(now, image_id) != 0)
        r = sp_err_set(err, SP_EINVAL, 0,
                       "template %s: image %s now names another image (%.12s, the template was "
                       "saved with %.12s); save the template again, or give --image to use it",
                       t->name, t->cfg.image, now, image_id);
    free(now);
    return r;
}

int sp_sandbox_create_from_template(sp_sandbox **out, const char *tmpl, const sp_sandbox_opts *opts,
                                    sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_SANDBOX_OPTS_VERSION, "sp_sandbox_opts", err) < 0)
        return SP_EINVAL;
    sp_sandbox_opts o;
    sp_sandbox_opts_take(&o, opts);
    sp_sandbox *t = NULL;
    cJSON *meta = NULL;
    int r = open_as_origin(&t, &meta, tmpl, o.state_root, err);
    if (r < 0)
        return r;
    const char *snap = sp_json_str(meta, "snapshot");
    if (!snap || !*snap)
        r = sp_err_set(err, SP_EINVAL, 0, "template %s records no snapshot; save it again", tmpl);
    /* On the engine of the template's origin unless told otherwise. */
    if (!o.engine)
        o.engine = sp_json_str_or(meta, "engine", SP_ENGINE_LOCAL);
    sp_engine *eng = NULL;
    if (r == 0)
        r = sp_engine_get(&eng, t->state_root, o.engine, err);
    /* A remote engine pulls the image itself: nothing here to check. */
    if (r == 0 && !o.image && eng->kind == SP_ENGINE_PODMAN)
        r = check_image(t, sp_json_str(meta, "image_id"), &o, err);
    sp_engine_free(eng);
    if (r == 0) {
        o.state_root = t->state_root;
        r = sp_sandbox_fork(out, t, snap, &o, err);
    }
    if (r == 0) {
        /* The commands that made the workspace what it is: the template's,
         * then any this create ran. */
        sp_strv sv = {0};
        for (size_t i = 0; t->cfg.setup && t->cfg.setup[i]; i++)
            sp_strv_push(&sv, sp_xstrdup(t->cfg.setup[i]));
        for (size_t i = 0; (*out)->cfg.setup && (*out)->cfg.setup[i]; i++)
            sp_strv_push(&sv, sp_xstrdup((*out)->cfg.setup[i]));
        sp_strv_free((*out)->cfg.setup);
        (*out)->cfg.setup = sp_strv_steal(&sv);
        if (sp_sandbox_lock(*out, NULL) == 0) {
            sp_sandbox_save(*out, NULL);
            sp_sandbox_unlock(*out);
        }
    }
    cJSON_Delete(meta);
    sp_sandbox_free(t);
    return r;
}
