/* A sandbox's snapshot store, with the container paused around the
 * store's reads and writes of the workspace (sandpod/sandbox_snapshot.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base.h"
#include "json.h"
#include "local_kind.h"
#include "sandbox_internal.h"
#include "sandpod/sandbox_snapshot.h"

struct sp_sandbox_snap {
    sp_sandbox *sb;
    sp_snapstore *store;
    bool paused;       /* we paused the container */
    bool ran_unpaused; /* an operation ran with it unfrozen */
};

/* Pause a running container; leave a stopped (or already paused) one. */
static int snap_pause(void *ud, sp_error **err)
{
    sp_sandbox_snap *h = ud;
    sp_sandbox_status *st = NULL;
    int r = sp_sandbox_status_get(&st, h->sb, err);
    if (r < 0)
        return r;
    if (st->state && strcmp(st->state, "running") == 0) {
        r = sp_sandbox_pause(h->sb, err);
        if (r == 0) {
            h->paused = true;
            h->ran_unpaused |= !sp_sandbox_pauses(h->sb);
        }
    }
    sp_sandbox_status_free(st);
    return r;
}

static int snap_unpause(void *ud, sp_error **err)
{
    sp_sandbox_snap *h = ud;
    if (!h->paused)
        return 0;
    h->paused = false;
    return sp_sandbox_unpause(h->sb, err);
}

int sp_local_snap_open(sp_sandbox_snap **out, sp_sandbox *sb, const sp_sandbox_snapshot_opts *opts,
                       sp_error **err)
{
    *out = NULL;
    int r;
    sp_snapstore_opts so = SP_SNAPSTORE_OPTS_INIT;
    if (opts && opts->store) {
        if (opts->store->pause || opts->store->unpause || opts->store->userdata)
            return sp_err_set(err, SP_EINVAL, 0,
                              "the pause callbacks of a sandbox's store are the sandbox's");
        so = *opts->store;
    }
    sp_sandbox_snap *h = sp_xcalloc(1, sizeof(*h));
    h->sb = sb;
    so.pause = snap_pause;
    so.unpause = snap_unpause;
    so.userdata = h;
    cleanup_free char *store = sp_xasprintf("%s/snapshots.git", sp_sandbox_state_dir(sb));
    r = sp_snapstore_open(&h->store, sp_sandbox_workspace(sb), store, &so, err);
    if (r < 0) {
        free(h);
        return r;
    }
    *out = h;
    return 0;
}

sp_snapstore *sp_sandbox_snapshot_store(sp_sandbox_snap *h)
{
    return h ? h->store : NULL;
}

bool sp_sandbox_snapshot_ran_unpaused(sp_sandbox_snap *h)
{
    if (!h)
        return false;
    bool was = h->ran_unpaused;
    h->ran_unpaused = false;
    return was;
}

void sp_sandbox_snapshot_close(sp_sandbox_snap *h)
{
    if (!h)
        return;
    sp_snapstore_free(h->store);
    if (h->paused)
        (void)sp_sandbox_unpause(h->sb, NULL);
    free(h);
}

/* ------------------------------------------- the local kind's entries -- */

/* One operation on the store, opened with pausing around it. */
#define WITH_STORE(sb, err, call)                                                                  \
    do {                                                                                           \
        sp_sandbox_snap *h_ = NULL;                                                                \
        int r_ = sp_local_snap_open(&h_, sb, NULL, err);                                           \
        if (r_ == 0) {                                                                             \
            sp_snapstore *store = h_->store;                                                       \
            r_ = (call);                                                                           \
        }                                                                                          \
        sp_sandbox_snapshot_close(h_);                                                             \
        return r_;                                                                                 \
    } while (0)

int sp_local_snap_create(sp_snapshot **out, sp_sandbox *sb, const char *tag, sp_error **err)
{
    WITH_STORE(sb, err, sp_snapshot_create(out, store, tag, err));
}

int sp_local_snap_list(sp_snapshots **out, sp_sandbox *sb, sp_error **err)
{
    WITH_STORE(sb, err, sp_snapshot_list(out, store, err));
}

int sp_local_snap_get(sp_snapshot **out, sp_sandbox *sb, const char *ref, sp_error **err)
{
    WITH_STORE(sb, err, sp_snapshot_get(out, store, ref, err));
}

int sp_local_snap_restore(sp_snapshot **out, sp_sandbox *sb, const char *ref, sp_error **err)
{
    WITH_STORE(sb, err, sp_snapshot_restore(out, store, ref, err));
}

int sp_local_snap_delete(sp_sandbox *sb, const char *ref, sp_error **err)
{
    WITH_STORE(sb, err, sp_snapshot_delete(store, ref, err));
}

int sp_local_snap_diff(sp_snapdiff **out, sp_sandbox *sb, const char *from, const char *to,
                       const sp_snapshot_diff_opts *o, sp_error **err)
{
    WITH_STORE(sb, err, sp_snapshot_diff(out, store, from, to, o, err));
}

static int export_now(sp_snapstore *store, sp_snapshot_format format, int fd, sp_error **err)
{
    sp_snapshot *snap = NULL;
    int r = sp_snapshot_create(&snap, store, NULL, err);
    if (r == 0)
        r = sp_snapshot_export(store, snap->id, NULL, fd, format, err);
    if (snap)
        sp_snapshot_delete(store, snap->id, NULL);
    sp_snapshot_free(snap);
    return r;
}

int sp_local_snap_export(sp_sandbox *sb, const char *ref, sp_snapshot_format format, int fd,
                         sp_error **err)
{
    WITH_STORE(sb, err,
               ref ? sp_snapshot_export(store, ref, NULL, fd, format, err)
                   : export_now(store, format, fd, err));
}

static int import_into(char **id, sp_snapstore *store, int fd, const char *tag, bool restore,
                       sp_error **err)
{
    sp_snapshot *snap = NULL;
    int r = sp_snapshot_import(&snap, store, NULL, fd, tag, err);
    if (r == 0 && restore)
        r = sp_snapshot_restore(NULL, store, snap->id, err);
    if (r == 0 && id)
        *id = sp_xstrdup(snap->id);
    sp_snapshot_free(snap);
    return r;
}

int sp_local_snap_import(char **id, sp_sandbox *sb, int fd, const char *tag, bool restore,
                         sp_error **err)
{
    WITH_STORE(sb, err, import_into(id, store, fd, tag, restore, err));
}

sp_snapstore *sp_local_store(sp_sandbox *sb, bool create, sp_error **err)
{
    sp_snapstore_opts so = SP_SNAPSTORE_OPTS_INIT;
    so.no_create = !create;
    cleanup_free char *path = sp_xasprintf("%s/snapshots.git", sp_sandbox_state_dir(sb));
    sp_snapstore *s = NULL;
    return sp_snapstore_open(&s, sp_sandbox_workspace(sb), path, &so, err) < 0 ? NULL : s;
}

/* ------------------------------------------------- the public calls -- */

int sp_sandbox_snapshot_open(sp_sandbox_snap **out, sp_sandbox *sb,
                             const sp_sandbox_snapshot_opts *opts, sp_error **err)
{
    *out = NULL;
    int r =
        SP_OPTS_CHECK(opts, 1, SP_SANDBOX_SNAPSHOT_OPTS_VERSION, "sp_sandbox_snapshot_opts", err);
    if (r < 0)
        return r;
    if (!sb)
        return sp_err_set(err, SP_EINVAL, 0, "no sandbox given");
    return sb->kind->snap_open(out, sb, opts, err);
}

static int check_ref(const char *ref, const char *what, sp_error **err)
{
    if (!ref || !*ref)
        return sp_err_set(err, SP_EINVAL, 0, "%s: which snapshot? (an id, tag or prefix)", what);
    return 0;
}

int sp_sandbox_snapshot_export_fd(sp_sandbox *sb, const char *ref, int fd,
                                  sp_snapshot_format format, sp_error **err)
{
    int r = check_ref(ref, "export", err);
    if (r < 0)
        return r;
    /* Resolved first: a bad ref is a not-found (or ambiguous) error before
     * any byte is written. */
    sp_snapshot *snap = NULL;
    r = sp_sandbox_snapshot_get(&snap, sb, ref, err);
    if (r == 0)
        r = sb->kind->snap_export(sb, snap->id, format, fd, err);
    sp_snapshot_free(snap);
    return r;
}

int sp_sandbox_snapshot_import_fd(char **id, sp_sandbox *sb, int fd, const char *tag,
                                  sp_error **err)
{
    if (id)
        *id = NULL;
    return sb->kind->snap_import(id, sb, fd, tag, false, err);
}

int sp_sandbox_snapshot_create(sp_snapshot **out, sp_sandbox *sb, const char *tag, sp_error **err)
{
    if (out)
        *out = NULL;
    return sb->kind->snap_create(out, sb, tag, err);
}

int sp_sandbox_snapshot_list(sp_snapshots **out, sp_sandbox *sb, sp_error **err)
{
    *out = NULL;
    return sb->kind->snap_list(out, sb, err);
}

int sp_sandbox_snapshot_get(sp_snapshot **out, sp_sandbox *sb, const char *ref, sp_error **err)
{
    *out = NULL;
    int r = check_ref(ref, "get", err);
    return r < 0 ? r : sb->kind->snap_get(out, sb, ref, err);
}

int sp_sandbox_snapshot_restore(sp_snapshot **out, sp_sandbox *sb, const char *ref, sp_error **err)
{
    if (out)
        *out = NULL;
    int r = check_ref(ref, "restore", err);
    return r < 0 ? r : sb->kind->snap_restore(out, sb, ref, err);
}

int sp_sandbox_snapshot_delete(sp_sandbox *sb, const char *ref, sp_error **err)
{
    int r = check_ref(ref, "delete", err);
    return r < 0 ? r : sb->kind->snap_delete(sb, ref, err);
}

int sp_sandbox_snapshot_diff(sp_snapdiff **out, sp_sandbox *sb, const char *from, const char *to,
                             const sp_snapshot_diff_opts *opts, sp_error **err)
{
    *out = NULL;
    /* Checked before a store is opened or a peer asked. */
    int r = SP_OPTS_CHECK(opts, 1, SP_SNAPSHOT_DIFF_OPTS_VERSION, "sp_snapshot_diff_opts", err);
    if (r < 0 || (r = check_ref(from, "diff", err)) < 0)
        return r;
    return sb->kind->snap_diff(out, sb, from, to, opts, err);
}

/* A tar a thread writes into a pipe, streamed into the sandbox's import
 * (all or nothing there). The writer's error wins over the import's (a cut
 * archive is what the import saw of it). SIGPIPE is blocked in the
 * writer's thread: a write after the import gave up fails with EPIPE
 * rather than killing a process that did not ignore the signal. */
typedef struct piped_import {
    int fd;
    sp_tar_writer write;
    void *data;
    sp_error *err;
    int rc;
} piped_import;

static void *piped_writer(void *arg)
{
    piped_import *j = arg;
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
    j->rc = j->write(j->fd, j->data, &j->err);
    close(j->fd); /* the end of the archive, or a cut the import refuses */
    /* A SIGPIPE our writes raised stays pending on this thread: take it. */
    struct timespec zero = {0, 0};
    while (sigtimedwait(&pipe_set, NULL, &zero) == SIGPIPE)
        ;
    return NULL;
}

int sp_sandbox_import_from(char **id, sp_sandbox *sb, const char *tag, bool restore,
                           sp_tar_writer write, void *data, sp_error **err)
{
    if (id)
        *id = NULL;
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return sp_err_errno(err, errno, "pipe", NULL);
    piped_import j = {.fd = p[1], .write = write, .data = data};
    pthread_t th;
    if (pthread_create(&th, NULL, piped_writer, &j) != 0) {
        close(p[0]);
        close(p[1]);
        return sp_err_set(err, SP_ERROR, 0, "could not start the archive's writer thread");
    }
    sp_error *ie = NULL;
    int r = sb->kind->snap_import(id, sb, p[0], tag, restore, &ie);
    close(p[0]); /* a writer still going gets EPIPE and stops */
    pthread_join(th, NULL);
    if (j.rc < 0) {
        sp_error_free(ie);
        if (id) {
            free(*id);
            *id = NULL;
        }
        return sp_err_give(err, j.err, j.rc);
    }
    sp_error_free(j.err);
    return r < 0 ? sp_err_give(err, ie, r) : 0;
}
