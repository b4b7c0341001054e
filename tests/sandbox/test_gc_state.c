/* What gc, rm and ls do with state folders, without Podman: incomplete
 * sandboxes (a state folder without sandbox.json) are listed apart and
 * removed only under their lock, once old enough, never following a
 * symlink; sp_sandbox_remove() holds the lock until the folder is gone;
 * sp_sandbox_gc_kept() never removes what it cannot judge. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "sandpod/sandbox.h"
#include "testutil.h"
#include "fdtree.h"

/* A scratch state root (private, as sp_state_root_check() wants it) with
 * its sandboxes/ folder, and a folder outside it holding a canary. */
typedef struct fx {
    char *root, *boxes, *outside;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof(*f));
    f->root = tu_mkdtemp();
    f->boxes = tu_join(f->root, "sandboxes");
    f->outside = tu_mkdtemp();
    tu_mkdir(f->root, "sandboxes");
    tu_write(f->outside, "canary", "keep me", 0644);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    assert_true(tu_exists(f->outside, "canary"));
    tu_rmtree(f->root);
    tu_rmtree(f->outside);
    free(f->root);
    free(f->boxes);
    free(f->outside);
    free(f);
    return 0;
}

/* sandboxes/NAME as a killed create leaves it: a lock file and a workspace
 * with a file in it. */
static void half_made(const fx *f, const char *name)
{
    tu_mkdir(f->boxes, name);
    char *dir = tu_join(f->boxes, name);
    tu_write(dir, "lock", "", 0600);
    tu_mkdir(dir, "workspace");
    tu_write(dir, "workspace/hello.txt", "hi\n", 0644);
    free(dir);
}

/* Set a folder's (or file's) times secs into the past. */
static void backdate(const char *dir, const char *rel, time_t secs)
{
    struct timespec ts[2] = {{time(NULL) - secs, 0}, {time(NULL) - secs, 0}};
    char *p = tu_join(dir, rel);
    assert_int_equal(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW), 0);
    free(p);
}

/* An fd holding an exclusive flock on sandboxes/NAME/lock, as a running
 * create holds it. */
static int hold_lock(const fx *f, const char *name)
{
    char *dir = tu_join(f->boxes, name);
    char *path = tu_join(dir, "lock");
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    free(path);
    free(dir);
    return fd;
}

static void free_strv(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

static void test_list_apart(void **state)
{
    fx *f = *state;
    tu_mkdir(f->boxes, "full");
    tu_write(f->boxes, "full/sandbox.json", "{}", 0600);
    half_made(f, "half");
    tu_mkdir(f->boxes, "bare"); /* killed before it took the lock */
    tu_mkdir(f->boxes, ".hidden");
    tu_write(f->boxes, "plain-file", "", 0600);
    tu_symlink(f->outside, f->boxes, "link");
    tu_mkdir(f->boxes, "dangling");
    tu_symlink("/nonexistent", f->boxes, "dangling/sandbox.json");

    char **names = NULL;
    assert_int_equal(sp_sandbox_list(&names, f->root, NULL), 0);
    assert_non_null(names[0]);
    assert_string_equal(names[0], "full");
    assert_null(names[1]);
    free_strv(names);

    assert_int_equal(sp_sandbox_list_incomplete(&names, f->root, NULL), 0);
    assert_non_null(names[0]);
    assert_string_equal(names[0], "bare");
    assert_non_null(names[1]);
    assert_string_equal(names[1], "half");
    assert_null(names[2]);
    free_strv(names);
}

static void test_remove_incomplete(void **state)
{
    fx *f = *state;
    half_made(f, "half");
    tu_symlink(f->outside, f->boxes, "half/workspace/out");
    tu_symlink("../../../../../../../../..", f->boxes, "half/workspace/up");
    assert_int_equal(sp_sandbox_remove_incomplete("half", f->root, 0, false, NULL), 0);
    assert_false(tu_exists(f->boxes, "half"));
    /* Nothing left beside it either: not even the folder moved aside. */
    char **names = NULL;
    assert_int_equal(sp_sandbox_list_incomplete(&names, f->root, NULL), 0);
    assert_null(names[0]);
    free_strv(names);
    assert_true(tu_exists(f->root, "sandboxes"));
    struct stat st;
    char *aside_glob = tu_join(f->root, "removed-half");
    assert_int_not_equal(stat(aside_glob, &st), 0);
    free(aside_glob);

    /* Made a moment before its lock: no lock file at all. */
    tu_mkdir(f->boxes, "bare");
    assert_int_equal(sp_sandbox_remove_incomplete("bare", f->root, 0, false, NULL), 0);
    assert_false(tu_exists(f->boxes, "bare"));
}

static void test_locked_is_left_alone(void **state)
{
    fx *f = *state;
    half_made(f, "busy");
    backdate(f->boxes, "busy", 3600);
    int fd = hold_lock(f, "busy");
    for (int dry = 0; dry < 2; dry++) {
        sp_error *err = NULL;
        int r = sp_sandbox_remove_incomplete("busy", f->root, 60, dry, &err);
        assert_int_equal(r, SP_ERROR);
        assert_non_null(err);
        assert_int_equal(err->sys_errno, EWOULDBLOCK);
        assert_non_null(strstr(err->message, "being created"));
        sp_error_free(err);
    }
    assert_true(tu_exists(f->boxes, "busy/workspace/hello.txt"));
    close(fd);
    assert_int_equal(sp_sandbox_remove_incomplete("busy", f->root, 60, false, NULL), 0);
    assert_false(tu_exists(f->boxes, "busy"));
}

static void test_young_is_left_alone(void **state)
{
    fx *f = *state;
    half_made(f, "young");
    sp_error *err = NULL;
    assert_int_equal(sp_sandbox_remove_incomplete("young", f->root, 60, false, &err), SP_ERROR);
    assert_int_equal(err->sys_errno, EWOULDBLOCK);
    sp_error_free(err);
    assert_true(tu_exists(f->boxes, "young/workspace/hello.txt"));
    backdate(f->boxes, "young", 61);
    assert_int_equal(sp_sandbox_remove_incomplete("young", f->root, 60, false, NULL), 0);
    assert_false(tu_exists(f->boxes, "young"));
}

static void test_dry_run_changes_nothing(void **state)
{
    fx *f = *state;
    tu_mkdir(f->boxes, "bare");
    tu_write(f->boxes, "bare/partial", "x", 0600);
    backdate(f->boxes, "bare", 600);
    char *dir = tu_join(f->boxes, "bare");
    struct stat before, after;
    assert_int_equal(stat(dir, &before), 0);
    assert_int_equal(sp_sandbox_remove_incomplete("bare", f->root, 60, true, NULL), 0);
    assert_int_equal(stat(dir, &after), 0);
    assert_false(tu_exists(f->boxes, "bare/lock"));
    assert_true(tu_exists(f->boxes, "bare/partial"));
    assert_int_equal(before.st_mtime, after.st_mtime);
    free(dir);
}

static void test_refusals(void **state)
{
    fx *f = *state;
    sp_error *err = NULL;
    /* A sandbox, not an incomplete one. */
    tu_mkdir(f->boxes, "full");
    tu_write(f->boxes, "full/sandbox.json", "{}", 0600);
    assert_int_equal(sp_sandbox_remove_incomplete("full", f->root, 0, false, &err), SP_EEXISTS);
    sp_error_free(err);
    err = NULL;
    assert_true(tu_exists(f->boxes, "full/sandbox.json"));
    /* A sandbox.json that is a symlink still makes it no incomplete one. */
    tu_mkdir(f->boxes, "linked");
    tu_symlink("/nonexistent", f->boxes, "linked/sandbox.json");
    assert_int_equal(sp_sandbox_remove_incomplete("linked", f->root, 0, false, NULL), SP_EEXISTS);
    assert_true(tu_exists(f->boxes, "linked"));
    /* No such folder; a symlink in its place is none either. */
    assert_int_equal(sp_sandbox_remove_incomplete("nope", f->root, 0, false, &err), SP_ENOTFOUND);
    assert_non_null(strstr(err->message, "no sandbox named nope"));
    sp_error_free(err);
    err = NULL;
    tu_symlink(f->outside, f->boxes, "link");
    assert_int_equal(sp_sandbox_remove_incomplete("link", f->root, 0, false, NULL), SP_ENOTFOUND);
    /* A lock that is a symlink is not followed (nor made, nor truncated). */
    tu_mkdir(f->boxes, "odd");
    tu_symlink("../../../canary-lock", f->boxes, "odd/lock");
    assert_true(sp_sandbox_remove_incomplete("odd", f->root, 0, false, NULL) < 0);
    assert_true(tu_exists(f->boxes, "odd"));
    /* Names that are no sandbox names. */
    assert_int_equal(sp_sandbox_remove_incomplete("../x", f->root, 0, false, NULL), SP_EINVAL);
    assert_int_equal(sp_sandbox_remove_incomplete("", f->root, 0, false, NULL), SP_EINVAL);
    assert_int_equal(sp_sandbox_remove_incomplete(NULL, f->root, 0, false, NULL), SP_EINVAL);
}

/* While sp_tree_remove() removes a state folder: is sandboxes/NAME still
 * there, and can another open file description take the lock? */
static const char *watch_boxes;
static const char *watch_name;
static int watch_lock_fd = -1;
static int rmdirs_seen, rmdirs_unlocked, rmdirs_visible;

static void watch_hook(int parent_fd, const char *name)
{
    (void)parent_fd;
    (void)name;
    rmdirs_seen++;
    if (flock(watch_lock_fd, LOCK_EX | LOCK_NB) == 0) {
        rmdirs_unlocked++;
        flock(watch_lock_fd, LOCK_UN);
    }
    if (watch_name) {
        char *dir = tu_join(watch_boxes, watch_name);
        struct stat st;
        if (lstat(dir, &st) == 0)
            rmdirs_visible++;
        free(dir);
    }
}

static void watch(const fx *f, const char *name, bool gone_at_once)
{
    char *dir = tu_join(f->boxes, name);
    char *lock = tu_join(dir, "lock");
    watch_lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    assert_true(watch_lock_fd >= 0);
    watch_boxes = f->boxes;
    watch_name = gone_at_once ? name : NULL;
    rmdirs_seen = rmdirs_unlocked = rmdirs_visible = 0;
    sp_tree_test_before_rmdir = watch_hook;
    free(lock);
    free(dir);
}

static void unwatch(void)
{
    sp_tree_test_before_rmdir = NULL;
    close(watch_lock_fd);
    watch_lock_fd = -1;
}

static void test_incomplete_removed_under_lock_out_of_sight(void **state)
{
    fx *f = *state;
    half_made(f, "half");
    tu_mkdir(f->boxes, "half/workspace/sub");
    watch(f, "half", true);
    assert_int_equal(sp_sandbox_remove_incomplete("half", f->root, 0, false, NULL), 0);
    unwatch();
    assert_true(rmdirs_seen >= 3);
    assert_int_equal(rmdirs_unlocked, 0);
    assert_int_equal(rmdirs_visible, 0);
    assert_false(tu_exists(f->boxes, "half"));
}

static void test_remove_holds_lock_to_the_end(void **state)
{
    fx *f = *state;
    /* A sandbox without a container: removed without Podman. */
    tu_mkdir(f->boxes, "box");
    tu_write(f->boxes, "box/sandbox.json", "{}", 0600);
    tu_mkdir(f->boxes, "box/workspace");
    tu_mkdir(f->boxes, "box/workspace/sub");
    sp_sandbox_opts so = SP_SANDBOX_OPTS_INIT;
    so.state_root = f->root;
    sp_sandbox *sb = NULL;
    sp_error *err = NULL;
    if (sp_sandbox_open(&sb, "box", &so, &err) < 0)
        fail_msg("open: %s", err ? err->message : "?");
    watch(f, "box", false);
    int r = sp_sandbox_remove(sb, false, &err);
    unwatch();
    if (r < 0)
        fail_msg("remove: %s", err ? err->message : "?");
    sp_sandbox_free(sb);
    assert_true(rmdirs_seen >= 3);
    /* Without the lock, gc could take the folder for an incomplete one. */
    assert_int_equal(rmdirs_unlocked, 0);
    assert_false(tu_exists(f->boxes, "box"));
}

/* Opening what is not a sandbox fails cleanly, whatever the folder holds:
 * the handle made for it is freed before any kind is known. */
static void test_open_what_is_not_there(void **state)
{
    fx *f = *state;
    sp_sandbox_opts so = SP_SANDBOX_OPTS_INIT;
    so.state_root = f->root;
    sp_sandbox *sb = NULL;
    sp_error *err = NULL;
    assert_int_equal(sp_sandbox_open(&sb, "nosuch", &so, &err), SP_ENOTFOUND);
    assert_null(sb);
    assert_non_null(strstr(err->message, "no sandbox named nosuch"));
    sp_error_free(err);
    err = NULL;
    /* A sandbox.json naming an engine kind this sandpod does not know. */
    tu_mkdir(f->boxes, "odd");
    tu_write(f->boxes, "odd/sandbox.json", "{\"engine_kind\": \"teleporter\"}", 0600);
    assert_int_equal(sp_sandbox_open(&sb, "odd", &so, &err), SP_EINVAL);
    assert_null(sb);
    assert_non_null(strstr(err->message, "teleporter"));
    sp_error_free(err);
    err = NULL;
    /* One naming a remote kind without its record. */
    tu_write(f->boxes, "odd/sandbox.json", "{\"engine_kind\": \"kubernetes\"}", 0600);
    assert_int_equal(sp_sandbox_open(&sb, "odd", &so, &err), SP_EINVAL);
    assert_null(sb);
    assert_non_null(strstr(err->message, "damaged"));
    sp_error_free(err);
}

/* made_by "mcp" in a sandbox.json, its folder and files backdated. */
static void kept(const fx *f, const char *name, const char *made_by, time_t age)
{
    tu_mkdir(f->boxes, name);
    char *dir = tu_join(f->boxes, name);
    char json[128];
    snprintf(json, sizeof(json), made_by ? "{\"made_by\": \"%s\"}" : "{}", made_by);
    tu_write(dir, "sandbox.json", json, 0600);
    tu_write(dir, "events.jsonl", "", 0600);
    backdate(dir, "sandbox.json", age);
    backdate(dir, "events.jsonl", age);
    backdate(f->boxes, name, age);
    free(dir);
}

static void test_kept_never_removes_what_it_cannot_judge(void **state)
{
    fx *f = *state;
    kept(f, "mcp-old", "mcp", 10 * 86400);
    kept(f, "mcp-new", "mcp", 0);
    kept(f, "mcp-used", "mcp", 10 * 86400);
    tu_write(f->boxes, "mcp-used/events.jsonl", "{}\n", 0600); /* a tool call now */
    kept(f, "mcp-locked", "mcp", 10 * 86400);
    kept(f, "other-old", "someone", 10 * 86400);
    kept(f, "user-old", NULL, 10 * 86400);
    int fd = hold_lock(f, "mcp-locked");

    /* No Podman at that URL: the state of mcp-old is unknown, so it stays. */
    char *url = NULL;
    assert_true(asprintf(&url, "unix://%s/no-podman.sock", f->outside) > 0);
    sp_sandbox_orphans *o = NULL;
    assert_int_equal(sp_sandbox_gc_kept(&o, url, f->root, 7 * 86400, false, NULL), 0);
    assert_int_equal(o->n, 1);
    assert_int_equal(o->items[0].kind, SP_ORPHAN_KEPT);
    assert_string_equal(o->items[0].container, "mcp-old");
    assert_false(o->items[0].removed);
    assert_non_null(o->items[0].error);
    assert_non_null(strstr(o->items[0].error, "unknown"));
    sp_sandbox_orphans_free(o);
    static const char *const all[] = {"mcp-old",    "mcp-new",   "mcp-used",
                                      "mcp-locked", "other-old", "user-old"};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        char *js = tu_join(all[i], "sandbox.json");
        assert_true(tu_exists(f->boxes, js));
        free(js);
    }
    close(fd);

    assert_int_equal(sp_sandbox_gc_kept(&o, url, f->root, -1, true, NULL), SP_EINVAL);
    assert_null(o);
    free(url);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_list_apart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_what_is_not_there, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_incomplete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_locked_is_left_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_young_is_left_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dry_run_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_incomplete_removed_under_lock_out_of_sight, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_remove_holds_lock_to_the_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kept_never_removes_what_it_cannot_judge, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
