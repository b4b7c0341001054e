/* The library's process-wide state under threads: several threads, each
 * with its own workspace and store, open files (the first openat2 use
 * decides whether openat2 works, in every thread at once), snapshot and
 * restore (restore's temp names come from one counter). Every result must
 * be right; under ThreadSanitizer (-DSANDPOD_TSAN=ON) no race may be
 * reported either. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandpod/fs.h"
#include "sandpod/snapshot.h"
#include "testutil.h"

#define THREADS 8
#define ROUNDS  4

static char *root;

static void *worker(void *arg)
{
    long id = (long)(intptr_t)arg;
    char name[32];
    snprintf(name, sizeof(name), "ws%ld", id);
    char *ws = tu_join(root, name);
    snprintf(name, sizeof(name), "store%ld", id);
    char *store = tu_join(root, name);
    sp_error *err = NULL;
    sp_fs *fs = NULL;
    sp_snapstore *s = NULL;
    intptr_t bad = 0;
    if (sp_fs_open(&fs, ws, NULL, &err) < 0 || sp_snapstore_open(&s, ws, store, NULL, &err) < 0) {
        bad = 1;
        goto done;
    }
    for (int round = 0; round < ROUNDS && !bad; round++) {
        sp_fs_text *t = NULL;
        if (sp_fs_read(&t, fs, "d/f", NULL, &err) < 0 || strcmp(t->content, "v0\n") != 0)
            bad = 2;
        sp_fs_text_free(t);
        sp_snapshot *snap = NULL;
        if (!bad && sp_snapshot_create(&snap, s, NULL, &err) < 0)
            bad = 3;
        for (int k = 0; !bad && k < 20; k++) {
            char p[32], text[32];
            snprintf(p, sizeof(p), "d/g%d", k);
            snprintf(text, sizeof(text), "%ld-%d-%d\n", id, round, k);
            if (sp_fs_write(NULL, fs, p, text, strlen(text), NULL, &err) < 0)
                bad = 4;
        }
        if (!bad && sp_fs_write(NULL, fs, "d/f", "changed\n", 8, NULL, &err) < 0)
            bad = 5;
        if (!bad && sp_snapshot_restore(NULL, s, snap->id, &err) < 0)
            bad = 6;
        sp_snapshot_free(snap);
        if (!bad && (sp_fs_exists(fs, "d/g0") || !sp_fs_exists(fs, "d/f")))
            bad = 7;
    }
done:
    if (bad)
        fprintf(stderr, "thread %ld: step %ld: %s\n", id, (long)bad, err ? err->message : "");
    sp_error_free(err);
    sp_snapstore_free(s);
    sp_fs_free(fs);
    free(ws);
    free(store);
    return (void *)bad;
}

static void test_threads(void **state)
{
    (void)state;
    for (long i = 0; i < THREADS; i++) {
        char name[32];
        snprintf(name, sizeof(name), "ws%ld", i);
        tu_mkdir(root, name);
        char *ws = tu_join(root, name);
        tu_mkdir(ws, "d");
        tu_write(ws, "d/f", "v0\n", 0644);
        free(ws);
    }
    pthread_t th[THREADS];
    for (long i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i), 0);
    for (int i = 0; i < THREADS; i++) {
        void *r = NULL;
        pthread_join(th[i], &r);
        assert_int_equal((intptr_t)r, 0);
    }
}

int main(void)
{
    root = tu_mkdtemp();
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_threads)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rmtree(root);
    free(root);
    return rc;
}
