/* What sandpod left that nothing owns, and the sandboxes MCP sessions
 * kept that nobody used for long.
 *
 * Orphaned containers: made by sandpod, owned by no sandbox any more.
 * A container is an orphan when the state folder named by its
 * sandpod.state label is gone, or holds no sandbox.json, or a sandbox.json
 * that names another container (an interrupted create or recreate, a
 * process killed between the container and the save). A state folder whose
 * lock is held is busy — a create or a recreate may be half-way — and its
 * containers are left alone.
 *
 * Incomplete sandboxes: state folders without sandbox.json (a create
 * killed half-way), removed by sp_sandbox_remove_incomplete(), which holds
 * their lock while it works. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

#include "base.h"
#include "dir.h"
#include "json.h"
#include "remote.h"
#include "sandbox_internal.h"
#include "sandpod/sandbox.h"

static const char *label_value(char **labels, const char *key)
{
    size_t n = strlen(key);
    for (char **l = labels; l && *l; l++)
        if (strncmp(*l, key, n) == 0 && (*l)[n] == '=')
            return *l + n + 1;
    return NULL;
}

/* The container id that <dir>/sandbox.json names; NULL when there is no
 * readable sandbox.json or it names none. */
/* The container sandbox.json of `dir` names, or NULL; *egress says
 * whether it has an egress policy (and so a proxy container). */
static char *saved_container(const char *dir, bool *egress)
{
    cleanup_free char *path = sp_xasprintf("%s/sandbox.json", dir);
    sp_buf b = SP_BUF_INIT;
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 || sp_read_all(fd, &b, (size_t)1 << 20) < 0) {
        sp_buf_dispose(&b);
        return NULL;
    }
    cJSON *o = sp_json_parse(b.data ? b.data : "", b.len);
    sp_buf_dispose(&b);
    char *out = sp_json_strdup(o, "container_id");
    *egress = cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(o, "egress"));
    cJSON_Delete(o);
    return out;
}

static bool same_id(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), n = la < lb ? la : lb;
    return n >= 12 && strncmp(a, b, n) == 0;
}

/* Why the container is an orphan, or NULL when its sandbox owns it (or
 * may: the lock is held). */
static char *orphan_reason(const char *state, const char *id, const char *name, bool proxy)
{
    if (!state)
        return NULL;
    if (state[0] != '/')
        return NULL; /* not a label we wrote */
    cleanup_close int dfd = open(state, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return errno == ENOENT || errno == ENOTDIR ? sp_xstrdup("its state folder is gone") : NULL;
    cleanup_close int lfd = openat(dfd, "lock", O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (lfd >= 0 && flock(lfd, LOCK_EX | LOCK_NB) < 0)
        return NULL; /* busy: a create, start or remove is under way */
    bool egress = false;
    cleanup_free char *saved = saved_container(state, &egress);
    if (!saved)
        return sp_xstrdup("its state folder has no sandbox.json naming a container");
    /* A sandbox's egress proxy is its own while it has a policy. */
    if (proxy)
        return egress ? NULL : sp_xstrdup("its sandbox has no egress policy any more");
    if (same_id(saved, id) || (name && strcmp(saved, name) == 0))
        return NULL;
    return sp_xasprintf("its sandbox now owns container %.12s", saved);
}

sp_sandbox_orphan *sp_orphans_add(sp_sandbox_orphans *o, sp_orphan_kind kind)
{
    o->items = sp_xrealloc(o->items, (o->n + 1) * sizeof(*o->items));
    sp_sandbox_orphan *it = &o->items[o->n++];
    memset(it, 0, sizeof(*it));
    it->kind = kind;
    return it;
}

/* Judge every sandpod container on the service (or, with `only`, those of
 * one state folder prefix) and remove the orphans unless dry_run. */
static int collect(sp_sandbox_orphans **out, const sp_local_ops *ops, sp_local *p, const char *only,
                   bool dry_run, sp_error **err)
{
    const char *filter[] = {"sandpod=1", NULL};
    sp_containers *list = NULL;
    int r = ops->list(&list, p, filter, err);
    if (r < 0)
        return sp_err_wrap(err, r, "list sandpod containers");
    sp_sandbox_orphans *o = sp_xcalloc(1, sizeof(*o));
    for (size_t i = 0; i < list->n; i++) {
        const sp_container_info *c = &list->items[i];
        const char *state = label_value(c->labels, "sandpod.state");
        if (!state) {
            o->unlabelled++;
            continue;
        }
        if (only && strncmp(state, only, strlen(only)) != 0)
            continue;
        const char *role = label_value(c->labels, "sandpod.role");
        char *why = orphan_reason(state, c->id, c->name, role && strcmp(role, "egress") == 0);
        if (!why)
            continue;
        sp_sandbox_orphan *it = sp_orphans_add(o, SP_ORPHAN_CONTAINER);
        it->container = sp_xstrdup(c->name ? c->name : c->id);
        it->state_dir = sp_xstrdup(state);
        it->reason = why;
        if (dry_run)
            continue;
        sp_error *e = NULL;
        int d = ops->remove(p, c->id, &e);
        it->removed = d == 0 || d == SP_ENOTFOUND;
        if (!it->removed)
            it->error = sp_xstrdup(e ? e->message : sp_strerror(d));
        sp_error_free(e);
    }
    sp_containers_free(list);
    *out = o;
    return 0;
}

/* How long an incomplete sandbox's folder must have been left unchanged:
 * a create makes it a moment before it takes its lock. */
#define INCOMPLETE_MIN_AGE_S 60

/* The incomplete sandboxes of one state root: removed (listed when
 * dry_run) unless busy or young, which are only counted. */
static void collect_incomplete(sp_sandbox_orphans *o, const char *state_root, bool dry_run)
{
    cleanup_free char *root = NULL;
    char **names = NULL;
    if (sp_sandbox_resolve_root(&root, state_root, NULL) < 0 ||
        sp_sandbox_list_incomplete(&names, root, NULL) < 0)
        return;
    for (size_t i = 0; names[i]; i++) {
        sp_error *e = NULL;
        int r = sp_sandbox_remove_incomplete(names[i], root, INCOMPLETE_MIN_AGE_S, dry_run, &e);
        if (r == SP_ENOTFOUND || r == SP_EEXISTS) {
            /* Gone meanwhile, or its create finished. */
        } else if (r < 0 && e && e->sys_errno == EWOULDBLOCK) {
            o->incomplete_busy++;
        } else {
            sp_sandbox_orphan *it = sp_orphans_add(o, SP_ORPHAN_INCOMPLETE);
            it->container = sp_xstrdup(names[i]);
            it->state_dir = sp_xasprintf("%s/sandboxes/%s", root, names[i]);
            it->reason = sp_xstrdup("its create never finished: the state folder has no "
                                    "sandbox.json and nothing holds its lock");
            it->removed = !dry_run && r == 0;
            if (r < 0)
                it->error = sp_xstrdup(e && e->message ? e->message : sp_strerror(r));
        }
        sp_error_free(e);
        free(names[i]);
    }
    free(names);
}

int sp_sandbox_gc(sp_sandbox_orphans **out, const char *podman_url, const char *state_root,
                  bool dry_run, sp_error **err)
{
    *out = NULL;
    const sp_local_ops *ops = sp_local_engine();
    sp_local *p = NULL;
    cleanup_free char *only = state_root ? sp_xasprintf("%s/sandboxes/", state_root) : NULL;
    /* No service running: no containers to collect, none is started. */
    int r = ops->open(&p, podman_url, state_root, true, err);
    if (r == 0)
        r = collect(out, ops, p, only, dry_run, err);
    if (r == 0) {
        /* After the containers: an incomplete sandbox's container, if its
         * create made one, went with them. */
        collect_incomplete(*out, state_root, dry_run);
        ops->reap_lost(*out, p, "sandpod-", 60, dry_run);
    }
    ops->free(p);
    return r;
}

/* ---------------------------------------------------------- --kept -- */

/* The newest modification time of what the state folder records of a
 * sandbox's use; 0 when none can be read. Not the folder's own: taking a
 * lock (ours too) may make a file in it. Not the workspace's: the
 * workload sets those times as it likes. */
static time_t last_used(const sp_sandbox *sb)
{
    static const char *const names[] = {"sandbox.json", "events.jsonl"};
    cleanup_close int dfd =
        open(sp_sandbox_state_dir(sb), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    time_t newest = 0;
    struct stat st;
    for (size_t i = 0; dfd >= 0 && i < sizeof(names) / sizeof(names[0]); i++)
        if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_mtime > newest)
            newest = st.st_mtime;
    return newest;
}

/* "9d", "5h", "12m", "40s": how long ago, roughly. */
static char *ago(time_t secs)
{
    if (secs >= 86400)
        return sp_xasprintf("%lldd", (long long)(secs / 86400));
    if (secs >= 3600)
        return sp_xasprintf("%lldh", (long long)(secs / 3600));
    if (secs >= 60)
        return sp_xasprintf("%lldm", (long long)(secs / 60));
    return sp_xasprintf("%llds", (long long)secs);
}

/* Take the sandbox's lock without waiting: false when someone holds it. */
static bool try_lock(sp_sandbox *sb)
{
    cleanup_free char *path = sp_xasprintf("%s/lock", sp_sandbox_state_dir(sb));
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return false;
    while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno != EINTR) {
            close(fd);
            return false;
        }
    }
    /* sp_sandbox_lock() from here on only counts: it is ours already. */
    sb->lock_fd = fd;
    sb->lock_depth = 1;
    return true;
}

/* Why the sandbox may go (NULL: it stays), judged under its lock. */
static char *kept_reason(sp_sandbox *sb, time_t now, int64_t older_than_s, char **error)
{
    time_t used = last_used(sb);
    if (used <= 0 || now - used < older_than_s)
        return NULL;
    sp_sandbox_status *st = NULL;
    sp_error *e = NULL;
    if (sp_sandbox_status_get(&st, sb, &e) < 0) {
        *error = sp_xasprintf("its state is unknown, so it stays: %s",
                              e && e->message ? e->message : "podman cannot be asked");
        sp_error_free(e);
        return sp_xstrdup("an MCP session made and kept it");
    }
    static const char *const idle[] = {"exited", "stopped", "created", "configured", "missing"};
    bool stopped = false;
    for (size_t i = 0; !st->running && st->state && i < sizeof(idle) / sizeof(idle[0]); i++)
        stopped |= strcmp(st->state, idle[i]) == 0;
    char *why = NULL;
    if (stopped) {
        char when[32];
        struct tm tm;
        gmtime_r(&used, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
        cleanup_free char *age = ago(now - used);
        why = sp_xasprintf("an MCP session made and kept it; %s; last used %s ago (%s)", st->state,
                           age, when);
    }
    sp_sandbox_status_free(st);
    return why;
}

int sp_sandbox_gc_kept(sp_sandbox_orphans **out, const char *podman_url, const char *state_root,
                       int64_t older_than_s, bool dry_run, sp_error **err)
{
    *out = NULL;
    if (older_than_s < 0)
        return sp_err_set(err, SP_EINVAL, 0, "a negative age: %lld", (long long)older_than_s);
    char **names = NULL;
    int r = sp_sandbox_list(&names, state_root, err);
    if (r < 0)
        return r;
    sp_sandbox_orphans *o = sp_xcalloc(1, sizeof(*o));
    time_t now = time(NULL);
    for (size_t i = 0; names[i]; i++) {
        sp_sandbox_opts so = SP_SANDBOX_OPTS_INIT;
        so.state_root = state_root;
        so.podman_url = podman_url;
        sp_sandbox *sb = NULL;
        const char *by = NULL;
        if (sp_sandbox_open(&sb, names[i], &so, NULL) == 0)
            by = sp_sandbox_made_by(sb);
        char *error = NULL;
        char *why = by && strcmp(by, SP_MADE_BY_MCP) == 0 && try_lock(sb)
                        ? kept_reason(sb, now, older_than_s, &error)
                        : NULL;
        if (why) {
            sp_sandbox_orphan *it = sp_orphans_add(o, SP_ORPHAN_KEPT);
            it->container = sp_xstrdup(names[i]);
            it->state_dir = sp_xstrdup(sp_sandbox_state_dir(sb));
            it->reason = why;
            it->error = error;
            sp_error *e = NULL;
            if (!dry_run && !error) {
                it->removed = sp_sandbox_remove(sb, false, &e) == 0;
                if (!it->removed)
                    it->error = sp_xstrdup(e && e->message ? e->message : "removal failed");
            }
            sp_error_free(e);
        }
        sp_sandbox_free(sb); /* lets the lock go */
        free(names[i]);
    }
    free(names);
    *out = o;
    return 0;
}

void sp_sandbox_sweep_orphans(const sp_local_ops *ops, sp_local *p, const char *state_root)
{
    cleanup_free char *prefix = sp_xasprintf("%s/sandboxes/", state_root);
    sp_sandbox_orphans *o = NULL;
    if (collect(&o, ops, p, prefix, false, NULL) == 0)
        sp_sandbox_orphans_free(o);
}

void sp_sandbox_orphans_free(sp_sandbox_orphans *o)
{
    if (!o)
        return;
    for (size_t i = 0; i < o->n; i++) {
        free(o->items[i].container);
        free(o->items[i].state_dir);
        free(o->items[i].reason);
        free(o->items[i].error);
    }
    free(o->items);
    free(o);
}

/* Workloads an engine elsewhere runs for this state root that no sandbox
 * owns any more. */
int sp_sandbox_gc_engine(sp_sandbox_orphans **out, const char *state_root, const char *engine,
                         bool dry_run, sp_error **err)
{
    *out = NULL;
    cleanup_free char *root = NULL;
    int r = sp_sandbox_resolve_root(&root, state_root, err);
    if (r < 0)
        return r;
    sp_engine *e = NULL;
    if ((r = sp_engine_get(&e, root, engine, err)) < 0)
        return r;
    const sp_remote_ops *ops = sp_remote_ops_for(e->kind);
    if (!ops) {
        r = sp_err_set(err, SP_EINVAL, 0,
                       "engine %s is local Podman: its containers are collected by plain gc",
                       e->name);
        sp_engine_free(e);
        return r;
    }
    cleanup_free char *owner = sp_remote_owner(root);
    cJSON *list = NULL;
    if ((r = ops->list(&list, e, owner, err)) < 0) {
        sp_engine_free(e);
        return r;
    }
    sp_sandbox_orphans *o = sp_xcalloc(1, sizeof(*o));
    size_t cap = (size_t)cJSON_GetArraySize(list);
    o->items = cap ? sp_xcalloc(cap, sizeof(*o->items)) : NULL;
    const cJSON *it;
    cJSON_ArrayForEach(it, list)
    {
        const char *name = sp_json_str_or(it, "name", "");
        const char *id = sp_json_str_or(it, "id", "");
        if (strcmp(sp_json_str_or(it, "state", ""), "removing") == 0)
            continue;
        char *why = NULL;
        cleanup_free char *dir = sp_xasprintf("%s/sandboxes/%s", root, name);
        cleanup_free char *js = sp_xasprintf("%s/sandbox.json", dir);
        if (!*name || !sp_sandbox_name_valid(name) || access(dir, F_OK) != 0) {
            why = sp_xasprintf("no sandbox named %s", *name ? name : "(none)");
        } else if (access(js, F_OK) != 0) {
            continue; /* being created: its create owns it */
        } else {
            sp_sandbox *sb = NULL;
            sp_sandbox_opts so = SP_SANDBOX_OPTS_INIT;
            so.state_root = root;
            if (sp_sandbox_open(&sb, name, &so, NULL) == 0) {
                /* Its workload, or its egress proxy. */
                const char *pod = sp_json_str(sb->remote_record, "pod");
                const char *proxy = sp_json_str(sb->remote_record, "egress_pod");
                bool owns = (pod && strcmp(pod, id) == 0) || (proxy && strcmp(proxy, id) == 0);
                if (!sb->engine || strcmp(sb->engine, e->name) != 0 || !owns)
                    why = sp_xasprintf("sandbox %s owns another workload", name);
            }
            sp_sandbox_free(sb);
        }
        if (!why)
            continue;
        sp_sandbox_orphan *x = &o->items[o->n++];
        x->kind = SP_ORPHAN_POD;
        x->container = sp_xstrdup(id);
        x->state_dir = sp_xstrdup(dir);
        x->reason = why;
        if (!dry_run) {
            sp_error *re = NULL;
            if (ops->remove_id(e, id, &re) == 0 || (re && re->code == SP_ENOTFOUND))
                x->removed = true;
            else
                x->error = sp_xstrdup(re && re->message ? re->message : "failed");
            sp_error_free(re);
        }
    }
    cJSON_Delete(list);
    sp_engine_free(e);
    *out = o;
    return 0;
}
