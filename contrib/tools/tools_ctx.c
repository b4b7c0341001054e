/* Tool contexts: opened on a sandbox or a plain folder, and freed. */
#include <stddef.h>

#include "tools_core.h"

/* ----------------------------------------------------------- contexts -- */

static void copy_list(sp_strv *dst, const char *const *src)
{
    for (size_t i = 0; src && src[i]; i++)
        sp_strv_push(dst, sp_xstrdup(src[i]));
}

static sp_tools *tools_new(const sp_tools_opts *opts)
{
    sp_json_init();
    sp_tools *t = sp_xcalloc(1, sizeof(*t));
    sp_tools_opts o = SP_TOOLS_OPTS_INIT;
    if (opts && opts->version == 1) {
        /* A caller built against the first layout: its struct ends there. */
        memcpy(&o, opts, offsetof(sp_tools_opts, max_read_bytes));
        o.version = SP_TOOLS_OPTS_VERSION;
    } else if (opts) {
        o = *opts;
    }
    if (!o.max_read_bytes)
        o.max_read_bytes = DEFAULT_READ_BYTES;
    if (!o.max_write_bytes)
        o.max_write_bytes = DEFAULT_WRITE_BYTES;
    if (!o.timeout_ms)
        o.timeout_ms = DEFAULT_TIMEOUT_MS;
    if (!o.max_output_bytes)
        o.max_output_bytes = DEFAULT_OUTPUT_BYTES;
    if (!o.max_output_lines)
        o.max_output_lines = DEFAULT_OUTPUT_LINES;
    if (!o.max_text_bytes)
        o.max_text_bytes = DEFAULT_TEXT_BYTES;
    if (!o.max_line_bytes)
        o.max_line_bytes = DEFAULT_LINE_BYTES;
    copy_list(&t->disabled, o.disabled);
    copy_list(&t->deny, o.deny);
    /* The context keeps its own copies; the caller's may go. */
    o.disabled = NULL;
    o.deny = NULL;
    o.events_path = NULL;
    o.snapshot_store = NULL;
    t->opts = o;
    pthread_mutex_init(&t->mu, NULL);
    pthread_mutex_init(&t->stale_mu, NULL);
    pthread_mutex_init(&t->kill_mu, NULL);
    pthread_cond_init(&t->later_cond, NULL);
    atomic_init(&t->cancelled, false);
    return t;
}

static int open_fs(sp_fs **out, sp_tools *t, const char *root, bool any, sp_error **err)
{
    sp_fs_opts fo = SP_FS_OPTS_INIT;
    fo.read_only = t->opts.read_only;
    fo.deny = t->deny.n ? (const char *const *)t->deny.v : NULL;
    fo.max_line_bytes = t->opts.max_line_bytes;
    fo.max_write_bytes = t->opts.max_write_bytes;
    if (any) {
        /* Absolute host paths are deep and long-named. */
        fo.max_path_depth = 255;
        fo.max_segment_len = 255;
    }
    return sp_fs_open(out, root, &fo, err);
}

static void open_events(sp_tools *t, const char *path)
{
    if (!path || !*path)
        return;
    t->events_path = sp_xstrdup(path);
}

/* Whether opts ask for unrestricted paths, which only a bare folder with
 * no commands beside it may have (*err says so). */
static bool unrestricted(const sp_tools_opts *opts, sp_error **err)
{
    if (!opts || opts->fs_mode != SP_FS_MODE_UNRESTRICTED)
        return false;
    sp_err_set(err, SP_EINVAL, 0,
               "unrestricted fs_mode is only for a bare --root folder without a container");
    return true;
}

/* Give t its sandbox: the workspace (or the peer), the store, events
 * (events_path, else the state folder's). On failure t is as before. */
static int attach_sandbox(sp_tools *t, sp_sandbox *sb, const char *events_path, sp_error **err)
{
    t->sb = sb;
    int r = 0;
    if (!sp_sandbox_workspace(sb)) /* not on this host: the peer's tools */
        r = tools_open_remote(t, sb, err);
    else {
        t->root = sp_xstrdup(sp_sandbox_workspace(sb));
        r = open_fs(&t->fs, t, t->root, false, err);
    }
    if (r < 0) {
        t->sb = NULL;
        free(t->root);
        t->root = NULL;
        return r;
    }
    const char *state = sp_sandbox_state_dir(sb);
    if (!t->store_path)
        t->store_path = sp_xasprintf("%s/snapshots.git", state);
    t->sb_name = sp_xstrdup(sp_sandbox_name(sb));
    /* The state root holds sandboxes/<name>: two levels up. */
    char *sr = sp_xstrdup(state);
    for (int i = 0; i < 2; i++) {
        char *slash = strrchr(sr, '/');
        if (slash && slash != sr)
            *slash = '\0';
    }
    t->state_root = sr;
    if (events_path)
        open_events(t, events_path);
    else {
        char *p = sp_xasprintf("%s/events.jsonl", state);
        open_events(t, p);
        free(p);
    }
    return 0;
}

int sp_tools_open_sandbox(sp_tools **out, sp_sandbox *sb, const sp_tools_opts *opts, sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_TOOLS_OPTS_VERSION, "sp_tools_opts", err) < 0)
        return SP_EINVAL;
    if (!sb)
        return sp_err_set(err, SP_EINVAL, 0, "no sandbox given");
    if (unrestricted(opts, err))
        return SP_EINVAL;
    sp_tools *t = tools_new(opts);
    int r = attach_sandbox(t, sb, opts ? opts->events_path : NULL, err);
    if (r < 0) {
        sp_tools_free(t);
        return r;
    }
    *out = t;
    return 0;
}

int sp_tools_open_later(sp_tools **out, const sp_tools_later *later, const sp_tools_opts *opts,
                        sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_TOOLS_OPTS_VERSION, "sp_tools_opts", err) < 0)
        return SP_EINVAL;
    if (!later || !later->open)
        return sp_err_set(err, SP_EINVAL, 0, "no way to make the sandbox given");
    if (unrestricted(opts, err))
        return SP_EINVAL;
    sp_tools *t = tools_new(opts);
    t->later = true;
    t->later_fn = *later;
    if (opts && opts->events_path)
        t->events_path = sp_xstrdup(opts->events_path); /* kept for the attach */
    *out = t;
    return 0;
}

int tools_later_wait(sp_tools *t, sp_error **err)
{
    if (!t->later)
        return 0;
    pthread_mutex_lock(&t->mu);
    while (t->later_state == LATER_OPENING)
        pthread_cond_wait(&t->later_cond, &t->mu);
    if (t->later_state == LATER_READY) {
        pthread_mutex_unlock(&t->mu);
        return 0;
    }
    t->later_state = LATER_OPENING;
    pthread_mutex_unlock(&t->mu);

    sp_sandbox *sb = NULL;
    sp_error *e = NULL;
    int r = t->later_fn.open(t->later_fn.userdata, &sb, &e);
    if (r == 0 && !sb)
        r = sp_err_set(&e, SP_ERROR, 0, "no sandbox was made");
    if (r == 0) {
        char *events = t->events_path;
        t->events_path = NULL;
        r = attach_sandbox(t, sb, events, &e);
        if (r < 0)
            t->events_path = events;
        else
            free(events);
    }
    pthread_mutex_lock(&t->mu);
    t->later_state = r == 0 ? LATER_READY : LATER_NONE;
    free(t->later_error);
    t->later_error = r < 0 ? sp_xstrdup(e && e->message ? e->message : sp_strerror(r)) : NULL;
    pthread_cond_broadcast(&t->later_cond);
    pthread_mutex_unlock(&t->mu);
    if (r < 0) {
        sp_err_wrap(&e, r, "the sandbox could not be made");
        return sp_err_give(err, e, r);
    }
    return 0;
}

bool sp_tools_ready(sp_tools *t)
{
    if (!t || !t->later)
        return true;
    pthread_mutex_lock(&t->mu);
    bool ready = t->later_state == LATER_READY;
    pthread_mutex_unlock(&t->mu);
    return ready;
}

char *sp_tools_pending_status(sp_tools *t)
{
    if (!t || !t->later)
        return NULL;
    pthread_mutex_lock(&t->mu);
    bool opening = t->later_state == LATER_OPENING;
    pthread_mutex_unlock(&t->mu);
    if (!opening)
        return NULL;
    char *s = t->later_fn.status ? t->later_fn.status(t->later_fn.userdata) : NULL;
    return s ? s : sp_xstrdup("making the sandbox");
}

int sp_tools_open_root(sp_tools **out, const char *root, const sp_tools_opts *opts, sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_TOOLS_OPTS_VERSION, "sp_tools_opts", err) < 0)
        return SP_EINVAL;
    sp_tools *t = tools_new(opts);
    char *abs = NULL;
    if (root && root[0] != '/') {
        char *cwd = getcwd(NULL, 0);
        abs = cwd ? sp_xasprintf("%s/%s", cwd, root) : NULL;
        free(cwd);
    }
    t->root = abs ? abs : sp_xstrdup(root ? root : ".");
    int r = open_fs(&t->fs, t, t->root, false, err);
    if (r == 0 && t->opts.fs_mode == SP_FS_MODE_UNRESTRICTED)
        r = open_fs(&t->fs_any, t, "/", true, err);
    if (r < 0) {
        sp_tools_free(t);
        return r;
    }
    if (opts && opts->snapshot_store && *opts->snapshot_store)
        t->store_path = sp_xstrdup(opts->snapshot_store);
    if (opts && opts->events_path)
        open_events(t, opts->events_path);
    *out = t;
    return 0;
}

int sp_tools_open_agent(sp_tools **out, const char *root, sp_sandbox *agent,
                        const sp_tools_opts *opts, sp_error **err)
{
    *out = NULL;
    if (SP_OPTS_CHECK(opts, 1, SP_TOOLS_OPTS_VERSION, "sp_tools_opts", err) < 0)
        return SP_EINVAL;
    if (!agent)
        return sp_err_set(err, SP_EINVAL, 0, "no agent given");
    if (unrestricted(opts, err))
        return SP_EINVAL;
    int r = sp_tools_open_root(out, root, opts, err);
    if (r < 0)
        return r;
    (*out)->sb = agent;
    (*out)->agent = true;
    return 0;
}

void sp_tools_free(sp_tools *t)
{
    if (!t)
        return;
    tools_sessions_kill(t);
    tools_store_close(t);
    sp_fs_free(t->fs);
    sp_fs_free(t->fs_any);
    free(t->root);
    free(t->store_path);
    sp_strv_dispose(&t->disabled);
    sp_strv_dispose(&t->deny);
    sp_strv_dispose(&t->always);
    free(t->events_path);
    free(t->sessions);
    free(t->run_token);
    free(t->sb_name);
    free(t->state_root);
    free(t->podman_url);
    sp_sandbox_free(t->kill_sb);
    tools_stale_dispose(t);
    pthread_mutex_destroy(&t->stale_mu);
    pthread_mutex_destroy(&t->mu);
    pthread_mutex_destroy(&t->kill_mu);
    pthread_cond_destroy(&t->later_cond);
    free(t->later_error);
    free(t);
}

void sp_tools_set_approver(sp_tools *t, sp_tools_approve_fn fn, void *userdata)
{
    t->opts.approve = fn;
    t->opts.approve_userdata = userdata;
}

bool tools_available(const sp_tools *t, const tool_def *d)
{
    /* A context made later has a sandbox, and so a store, once made. */
    if ((d->needs & NEED_SANDBOX) && !t->sb && !t->later)
        return false;
    if ((d->needs & NEED_STORE) && !t->store_path && !t->later)
        return false;
    if ((d->needs & NEED_WRITE) && t->opts.read_only)
        return false;
    if ((d->needs & NEED_PATCH) && !tools_patch_available())
        return false;
    return true;
}

bool sp_tools_has(const sp_tools *t, const char *name)
{
    const tool_def *d = tool_find(name);
    return d && tools_available(t, d) && !tools_sv_has(&t->disabled, d->name);
}
