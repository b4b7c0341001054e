/* A second process swaps symlinks and folders in a tight loop — what a
 * hostile container can do through the bind mount — while this one reads,
 * writes, lists, stats, globs and greps the very same paths. No byte from
 * outside may come back and nothing outside may change. Bounded by an
 * iteration count, not by time. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandpod/fs.h"
#include "testutil.h"

#define SECRET     "OUTSIDE-CANARY-9f2c"
#define ITERATIONS 1500

static char *root, *outside;

static void swapper(void)
{
    /* Alternate "p" between a real folder and a link to the outside folder,
     * and "f" between a real file and a link to the outside secret, using
     * RENAME_EXCHANGE so each path always exists. */
    char p[4096], pdir[4096], plink[4096], f[4096], ffile[4096], flink[4096];
    snprintf(p, sizeof(p), "%s/p", root);
    snprintf(pdir, sizeof(pdir), "%s/p.dir", root);
    snprintf(plink, sizeof(plink), "%s/p.link", root);
    snprintf(f, sizeof(f), "%s/f", root);
    snprintf(ffile, sizeof(ffile), "%s/f.file", root);
    snprintf(flink, sizeof(flink), "%s/f.link", root);
    for (;;) {
        renameat2(AT_FDCWD, p, AT_FDCWD, pdir, RENAME_EXCHANGE);
        renameat2(AT_FDCWD, p, AT_FDCWD, plink, RENAME_EXCHANGE);
        renameat2(AT_FDCWD, f, AT_FDCWD, ffile, RENAME_EXCHANGE);
        renameat2(AT_FDCWD, f, AT_FDCWD, flink, RENAME_EXCHANGE);
    }
}

static void check_no_secret(const void *data, size_t len, const char *what)
{
    if (data && memmem(data, len, SECRET, strlen(SECRET)))
        fail_msg("%s returned content from outside the workspace", what);
}

static void test_swap_race(void **state)
{
    (void)state;
    root = tu_mkdtemp();
    outside = tu_mkdtemp();
    tu_write(outside, "secret.txt", SECRET "\n", 0644);
    tu_write(outside, "x", SECRET "\n", 0644);

    tu_mkdir(root, "p");
    tu_write(root, "p/x", "inside\n", 0644);
    tu_mkdir(root, "p.dir");
    tu_write(root, "p.dir/x", "inside too\n", 0644);
    tu_symlink(outside, root, "p.link");
    tu_write(root, "f", "inside file\n", 0644);
    tu_write(root, "f.file", "inside file 2\n", 0644);
    char *sec = tu_join(outside, "secret.txt");
    tu_symlink(sec, root, "f.link");
    free(sec);

    sp_fs *fs = NULL;
    sp_error *err = NULL;
    assert_int_equal(sp_fs_open(&fs, root, NULL, &err), 0);

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        swapper();
        _exit(0);
    }

    unsigned ok_reads = 0, refused = 0;
    for (int i = 0; i < ITERATIONS; i++) {
        const char *paths[] = {"p/x", "f", "p.link/x", "p/../f"};
        for (size_t k = 0; k < 4; k++) {
            sp_fs_text *t = NULL;
            if (sp_fs_read(&t, fs, paths[k], NULL, &err) == 0) {
                check_no_secret(t->content, t->content_len, "read");
                ok_reads++;
            } else {
                refused++;
            }
            sp_fs_text_free(t);
            sp_error_free(err);
            err = NULL;
            sp_fs_bytes *b = NULL;
            if (sp_fs_read_bytes(&b, fs, paths[k], 0, 0, &err) == 0)
                check_no_secret(b->data, b->len, "read_bytes");
            sp_fs_bytes_free(b);
            sp_error_free(err);
            err = NULL;
        }
        char name[64];
        snprintf(name, sizeof(name), "p/w%d", i % 7);
        sp_fs_write(NULL, fs, name, "written\n", 8, NULL, &err);
        sp_error_free(err);
        err = NULL;
        sp_fs_write(NULL, fs, "f", "overwrite\n", 10, NULL, &err);
        sp_error_free(err);
        err = NULL;
        sp_fs_mkdir(fs, "p/newdir", true, true, &err);
        sp_error_free(err);
        err = NULL;
        sp_fs_delete(fs, "p/newdir", true, &err);
        sp_error_free(err);
        err = NULL;
        if (i % 10 == 0) {
            sp_fs_entries *e = NULL;
            sp_fs_list_opts lo = SP_FS_LIST_OPTS_INIT;
            lo.depth = 3;
            if (sp_fs_list(&e, fs, "p", &lo, &err) == 0)
                for (size_t j = 0; j < e->n; j++)
                    if (strcmp(e->v[j].name, "secret.txt") == 0)
                        fail_msg("list followed a link out: %s", e->v[j].path);
            sp_fs_entries_free(e);
            sp_error_free(err);
            err = NULL;
            sp_fs_matches *m = NULL;
            if (sp_fs_grep(&m, fs, "CANARY", NULL, &err) == 0)
                if (m->n)
                    fail_msg("grep found outside content in %s", m->v[0].path);
            sp_fs_matches_free(m);
            sp_error_free(err);
            err = NULL;
            sp_fs_entries *g = NULL;
            if (sp_fs_glob(&g, fs, "**/secret.txt", NULL, 0, &err) == 0)
                assert_int_equal(g->n, 0);
            sp_fs_entries_free(g);
            sp_error_free(err);
            err = NULL;
        }
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    sp_fs_free(fs);
    print_message("race: %u reads answered, %u refused\n", ok_reads, refused);
    assert_true(ok_reads > 0);

    /* The outside folder holds exactly what it held, byte for byte. */
    char *s = tu_read(outside, "secret.txt", NULL);
    assert_string_equal(s, SECRET "\n");
    free(s);
    s = tu_read(outside, "x", NULL);
    assert_string_equal(s, SECRET "\n");
    free(s);
    for (int k = 0; k < 7; k++) {
        char name[16];
        snprintf(name, sizeof(name), "w%d", k);
        assert_false(tu_exists(outside, name));
    }
    assert_false(tu_exists(outside, "newdir"));
    tu_rmtree(root);
    tu_rmtree(outside);
    free(root);
    free(outside);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_swap_race),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
