/* Regression: hostile file names in the unified diff of sp_snapshot_diff().
 *
 * A workload makes a folder named "x\n+++ b" holding "etc-passwd". git
 * quotes such names in patch headers ("b/x\n+++ b/etc-passwd" in C-style
 * quotes); an unquoted name lets the workload forge header lines in a patch
 * that a person or a tool then reads or applies. Needs no Podman. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandpod/snapshot.h"
#include "testutil.h"

static void test_diff_quotes_names(void **state)
{
    (void)state;
    char *ws = tu_mkdtemp(), *store_parent = tu_mkdtemp();
    char *store = tu_join(store_parent, "store.git");
    tu_write(ws, "plain.txt", "a\n", 0644);
    sp_snapstore *st = NULL;
    sp_error *err = NULL;
    assert_int_equal(sp_snapstore_open(&st, ws, store, NULL, &err), 0);
    sp_snapshot *snap = NULL;
    assert_int_equal(sp_snapshot_create(&snap, st, NULL, &err), 0);

    tu_mkdir(ws, "x\n+++ b");
    tu_write(ws, "x\n+++ b/etc-passwd", "evil\n", 0644);
    tu_write(ws, "quote\"back\\slash", "q\n", 0644);
    sp_snapdiff *d = NULL;
    sp_snapshot_diff_opts o = SP_SNAPSHOT_DIFF_OPTS_INIT;
    o.patch = true;
    assert_int_equal(sp_snapshot_diff(&d, st, snap->id, NULL, &o, &err), 0);
    assert_non_null(d->patch);
    /* No line of the patch may start a header that the workload wrote. */
    assert_null(strstr(d->patch, "\n+++ b/etc-passwd"));
    /* git's form: the whole name C-quoted. */
    assert_non_null(strstr(d->patch, "\"b/x\\n+++ b/etc-passwd\""));
    assert_non_null(strstr(d->patch, "\"b/quote\\\"back\\\\slash\""));
    sp_snapdiff_free(d);
    sp_snapshot_free(snap);
    sp_snapstore_free(st);
    tu_rmtree(ws);
    tu_rmtree(store_parent);
    free(ws);
    free(store_parent);
    free(store);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diff_quotes_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
