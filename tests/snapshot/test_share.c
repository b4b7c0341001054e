/* sp_snapshot_share(): a snapshot of one store made a snapshot of another
 * (what a fork does). The two stores share object files (hard links) and
 * stay independent: the source's snapshot deleted and garbage-collected,
 * or the whole source store removed, the destination still restores it. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandpod/snapshot.h"
#include "testutil.h"

#define OK(call)                                                                                   \
    do {                                                                                           \
        sp_error *e_ = NULL;                                                                       \
        int r_ = (call);                                                                           \
        if (r_ != 0)                                                                               \
            fail_msg("%s gave %d: %s", #call, r_, e_ ? e_->message : "");                          \
        sp_error_free(e_);                                                                         \
    } while (0)
#define E (&e_)

static sp_snapstore *open_store(const char *dir, const char *ws, const char *store)
{
    char *w = tu_join(dir, ws), *s = tu_join(dir, store);
    mkdir(w, 0755);
    sp_snapstore *st = NULL;
    OK(sp_snapstore_open(&st, w, s, NULL, E));
    free(w);
    free(s);
    return st;
}

/* The inode of the loose object file of `commit` in `store`. */
static ino_t object_ino(const char *dir, const char *store, const char *commit, nlink_t *links)
{
    char rel[128];
    snprintf(rel, sizeof(rel), "%s/objects/%.2s/%s", store, commit, commit + 2);
    char *p = tu_join(dir, rel);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    free(p);
    if (links)
        *links = st.st_nlink;
    return st.st_ino;
}

static void test_share_then_source_gone(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    sp_snapstore *src = open_store(dir, "ws-a", "a.git");
    char *wa = tu_join(dir, "ws-a");
    tu_write(wa, "f.txt", "one\n", 0644);
    tu_mkdir(wa, "sub");
    tu_write(wa, "sub/x.sh", "#!/bin/sh\n", 0755);
    tu_symlink("../f.txt", wa, "sub/link");
    tu_mkdir(wa, "empty");
    sp_snapshot *snap = NULL;
    OK(sp_snapshot_create(&snap, src, "first", E));
    /* Later changes to the source never reach the destination. */
    tu_write(wa, "f.txt", "two\n", 0644);
    OK(sp_snapshot_create(NULL, src, "second", E));
    /* A temporary an interrupted writer left is not shared. */
    char tmp_rel[64];
    snprintf(tmp_rel, sizeof(tmp_rel), "a.git/objects/%.2s/tmp_obj_left", snap->commit);
    tu_write(dir, tmp_rel, "junk", 0444);

    sp_snapstore *dst = open_store(dir, "ws-b", "b.git");
    sp_snapshot *got = NULL;
    OK(sp_snapshot_share(&got, dst, src, "first", E));
    assert_string_equal(got->id, snap->id);
    assert_string_equal(got->commit, snap->commit);
    assert_string_equal(got->tag, "first");
    nlink_t links = 0;
    assert_true(object_ino(dir, "a.git", snap->commit, NULL) ==
                object_ino(dir, "b.git", snap->commit, &links));
    assert_true(links >= 2);
    char tmp_dst[64];
    snprintf(tmp_dst, sizeof(tmp_dst), "b.git/objects/%.2s/tmp_obj_left", snap->commit);
    assert_false(tu_exists(dir, tmp_dst));
    /* Only the snapshot asked for is a snapshot of the destination. */
    sp_snapshots *l = NULL;
    OK(sp_snapshot_list(&l, dst, E));
    assert_int_equal(l->n, 1);
    sp_snapshots_free(l);

    /* Gone from the source: deleted, collected, then the store removed. */
    OK(sp_snapshot_delete(src, "first", E));
    OK(sp_snapstore_gc(NULL, src, E));
    sp_snapstore_free(src);
    char *a_store = tu_join(dir, "a.git");
    tu_rmtree(a_store);
    free(a_store);

    OK(sp_snapshot_restore(NULL, dst, snap->id, E));
    char *wb = tu_join(dir, "ws-b");
    size_t n = 0;
    char *c = tu_read(wb, "f.txt", &n);
    assert_string_equal(c, "one\n");
    free(c);
    struct stat st;
    char *x = tu_join(wb, "sub/x.sh");
    assert_int_equal(stat(x, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    free(x);
    assert_true(tu_exists(wb, "empty"));
    char buf[64] = {0};
    char *lk = tu_join(wb, "sub/link");
    assert_int_equal(readlink(lk, buf, sizeof(buf) - 1), 8);
    assert_string_equal(buf, "../f.txt");
    free(lk);
    char *b_store = tu_join(dir, "b.git");
    tu_assert_fsck(b_store);
    free(b_store);

    sp_snapshot_free(got);
    sp_snapshot_free(snap);
    sp_snapstore_free(dst);
    free(wa);
    free(wb);
    tu_rmtree(dir);
    free(dir);
}

/* Another filesystem (/dev/shm, a tmpfs, against $TMPDIR): no hard links,
 * so every object is copied; the copies are whole and the store passes fsck.
 * Skipped where both are one filesystem. */
static void test_share_across_filesystems(void **state)
{
    (void)state;
    char tmpl[] = "/dev/shm/sp-share.XXXXXX";
    char *other = mkdtemp(tmpl);
    char *dir = tu_mkdtemp();
    struct stat a, b;
    if (!other || stat(other, &a) < 0 || stat(dir, &b) < 0 || a.st_dev == b.st_dev) {
        if (other)
            tu_rmtree(other);
        tu_rmtree(dir);
        free(dir);
        skip();
    }
    sp_snapstore *src = open_store(other, "ws-a", "a.git");
    char *wa = tu_join(other, "ws-a");
    for (int i = 0; i < 40; i++) {
        char rel[32], body[32];
        snprintf(rel, sizeof(rel), "f%d.txt", i);
        snprintf(body, sizeof(body), "file %d\n", i);
        tu_write(wa, rel, body, 0644);
    }
    sp_snapshot *snap = NULL;
    OK(sp_snapshot_create(&snap, src, "t", E));
    sp_snapstore *dst = open_store(dir, "ws-b", "b.git");
    OK(sp_snapshot_share(NULL, dst, src, "t", E));
    sp_snapstore_free(src);
    tu_rmtree(other);
    OK(sp_snapshot_restore(NULL, dst, "t", E));
    char *wb = tu_join(dir, "ws-b");
    char *c = tu_read(wb, "f39.txt", NULL);
    assert_string_equal(c, "file 39\n");
    free(c);
    nlink_t links = 0;
    object_ino(dir, "b.git", snap->commit, &links);
    assert_int_equal(links, 1);
    char *b_store = tu_join(dir, "b.git");
    tu_assert_fsck(b_store);
    free(b_store);
    sp_snapshot_free(snap);
    sp_snapstore_free(dst);
    free(wa);
    free(wb);
    tu_rmtree(dir);
    free(dir);
}

/* A store opened with trust_ids, in a workspace freshly restored into and
 * handed over (owners, so ctimes, changed; simulated here with chmod to
 * the same bits): the first snapshot reads no file and equals the restored
 * one; a file changed afterwards is read and shows up; the stat data it
 * recorded lets a plain handle's next snapshot read nothing either.
 * Without trust_ids the same workspace is read whole (the control). */
#define N_TRUST 24

static void restore_and_touch(const char *dir, const char *ws, const char *store, sp_snapstore *src,
                              const char *snap_id)
{
    sp_snapstore *dst = open_store(dir, ws, store);
    OK(sp_snapshot_share(NULL, dst, src, snap_id, E));
    OK(sp_snapshot_restore(NULL, dst, snap_id, E));
    sp_snapstore_free(dst);
    char *w = tu_join(dir, ws);
    for (int i = 0; i < N_TRUST; i++) {
        char rel[32];
        snprintf(rel, sizeof(rel), "d%d/f%d.txt", i % 3, i);
        char *p = tu_join(w, rel);
        assert_int_equal(chmod(p, i % 2 ? 0755 : 0644), 0); /* ctime only */
        free(p);
    }
    free(w);
    usleep(20 * 1000); /* past the coarse clock's tick: the new ctimes are not racy */
}

static uint64_t snapshot_reads(const char *dir, const char *ws, const char *store, bool trust,
                               const char *tag)
{
    char *w = tu_join(dir, ws), *s = tu_join(dir, store);
    sp_snapstore_opts so = SP_SNAPSTORE_OPTS_INIT;
    so.trust_ids = trust;
    sp_snapstore *st = NULL;
    OK(sp_snapstore_open(&st, w, s, &so, E));
    OK(sp_snapshot_create(NULL, st, tag, E));
    sp_snapstore_stats stats;
    sp_snapstore_last_stats(st, &stats);
    sp_snapstore_free(st);
    free(w);
    free(s);
    return stats.files_hashed;
}

static size_t diff_count(const char *dir, const char *ws, const char *store, const char *from,
                         const char *to)
{
    char *w = tu_join(dir, ws), *s = tu_join(dir, store);
    sp_snapstore *st = NULL;
    OK(sp_snapstore_open(&st, w, s, NULL, E));
    sp_snapdiff *d = NULL;
    OK(sp_snapshot_diff(&d, st, from, to, NULL, E));
    size_t n = d->n;
    sp_snapdiff_free(d);
    sp_snapstore_free(st);
    free(w);
    free(s);
    return n;
}

static void test_trusted_baseline_after_restore(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    sp_snapstore *src = open_store(dir, "ws-a", "a.git");
    char *wa = tu_join(dir, "ws-a");
    for (int i = 0; i < N_TRUST; i++) {
        char rel[32], body[64];
        snprintf(rel, sizeof(rel), "d%d/f%d.txt", i % 3, i);
        snprintf(body, sizeof(body), "file %d\n", i);
        if (i < 3)
            tu_mkdir(wa, rel[1] == '0' ? "d0" : rel[1] == '1' ? "d1" : "d2");
        tu_write(wa, rel, body, i % 2 ? 0755 : 0644);
    }
    tu_symlink("d0/f0.txt", wa, "link");
    sp_snapshot *snap = NULL;
    OK(sp_snapshot_create(&snap, src, "s", E));

    /* The control: a plain handle reads every file again. */
    restore_and_touch(dir, "ws-c", "c.git", src, snap->id);
    assert_int_equal(snapshot_reads(dir, "ws-c", "c.git", false, "base"), N_TRUST);

    restore_and_touch(dir, "ws-b", "b.git", src, snap->id);
    assert_int_equal(snapshot_reads(dir, "ws-b", "b.git", true, "base"), 0);
    assert_int_equal(diff_count(dir, "ws-b", "b.git", snap->id, "base"), 0);

    /* Changed after the trusted look: read, and seen. */
    char *wb = tu_join(dir, "ws-b");
    tu_write(wb, "d1/f4.txt", "changed in the fork\n", 0644);
    usleep(20 * 1000); /* the write is not racy for the next snapshot */
    assert_int_equal(snapshot_reads(dir, "ws-b", "b.git", false, "later"), 1);
    assert_int_equal(diff_count(dir, "ws-b", "b.git", "base", "later"), 1);
    assert_int_equal(diff_count(dir, "ws-b", "b.git", "base", NULL), 1);
    /* And the stat data recorded makes the next plain snapshot read nothing. */
    assert_int_equal(snapshot_reads(dir, "ws-b", "b.git", false, "again"), 0);

    sp_snapshot_free(snap);
    sp_snapstore_free(src);
    free(wa);
    free(wb);
    tu_rmtree(dir);
    free(dir);
}

static void test_share_missing(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    sp_snapstore *src = open_store(dir, "ws-a", "a.git");
    sp_snapstore *dst = open_store(dir, "ws-b", "b.git");
    sp_error *err = NULL;
    sp_snapshot *got = NULL;
    assert_int_equal(sp_snapshot_share(&got, dst, src, "nope", &err), SP_ENOTFOUND);
    assert_null(got);
    assert_non_null(err);
    sp_error_free(err);
    sp_snapshots *l = NULL;
    OK(sp_snapshot_list(&l, dst, E));
    assert_int_equal(l->n, 0);
    sp_snapshots_free(l);
    sp_snapstore_free(src);
    sp_snapstore_free(dst);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_share_then_source_gone),
        cmocka_unit_test(test_share_across_filesystems),
        cmocka_unit_test(test_share_missing),
        cmocka_unit_test(test_trusted_baseline_after_restore),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
