/* sp_seed_tar(): the client's half of seeding a remote workspace. The
 * mounts' filters hold in the archive (an excluded file and a gitignored
 * one never appear in it, by name, in the raw bytes), the archive imports
 * and restores to exactly the selected files, and the temp folder under
 * the state root is gone after a success and after each kind of failure
 * (a cap refused before anything is copied, a write to fd failing after
 * the snapshot). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "dir.h"
#include "sandpod/hydrate.h"
#include "sandpod/snapshot.h"
#include "seed.h"
#include "testutil.h"

typedef struct fx {
    char *dir, *host, *state, *out;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof(*f));
    f->dir = tu_mkdtemp();
    f->host = tu_join(f->dir, "host");
    f->state = tu_join(f->dir, "state"); /* missing: the seed makes it */
    f->out = tu_join(f->dir, "out.tar");
    tu_mkdir(f->dir, "host");
    tu_mkdir(f->host, "sub");
    tu_mkdir(f->host, "build");
    tu_mkdir(f->host, "empty");
    tu_write(f->host, "main.c", "int main(void) { return 0; }\n", 0644);
    tu_write(f->host, "run.sh", "#!/bin/sh\n", 0755);
    tu_write(f->host, "sub/notes.txt", "notes\n", 0600);
    tu_write(f->host, ".gitignore", "build/\n*.log\n", 0644);
    tu_write(f->host, "build/artifact.o", "OBJECT", 0644);
    tu_write(f->host, "debug.log", "LOGLINE", 0644);
    tu_write(f->host, "secret.env", "TOKEN=hunter2", 0600);
    tu_write(f->host, "sub/id_rsa", "SEEDKEY", 0600); /* left out: a private key */
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    tu_rmtree(f->dir);
    free(f->dir);
    free(f->host);
    free(f->state);
    free(f->out);
    free(f);
    return 0;
}

static const char *const excl[] = {"*.env", NULL};

static sp_mount the_mount(const fx *f)
{
    sp_mount m = {0};
    m.host_path = f->host;
    m.mount_path = ".";
    m.exclude = excl;
    m.gitignore = true;
    return m;
}

/* How many entries the state root holds (-1: cannot read it). */
static long entries_in(const char *dir)
{
    sp_dirnames nm = SP_DIRNAMES_INIT;
    long n = sp_dir_read_at(&nm, AT_FDCWD, dir, SP_DIR_UNSORTED, 0) == 0 ? (long)nm.n : -1;
    sp_dirnames_dispose(&nm);
    return n;
}

static void test_seed_filters_and_cleanup(void **state)
{
    fx *f = *state;
    sp_mount m = the_mount(f);
    int fd = open(f->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    sp_error *err = NULL;
    sp_hydrate_result *hr = NULL;
    int r = sp_seed_tar(&hr, fd, &m, 1, NULL, f->state, &err);
    if (r < 0)
        fail_msg("seed: %s", err ? err->message : "?");
    close(fd);
    /* The hydration's result says what it left out (create records it). */
    assert_non_null(hr);
    assert_int_equal(hr->n_skipped, 1);
    assert_string_equal(hr->skipped[0].path, "sub/id_rsa");
    assert_int_equal(hr->skipped[0].reason, SP_HYDRATE_SKIP_SECRET);
    sp_hydrate_result_free(hr);
    assert_int_equal(entries_in(f->state), 0); /* the temp folder is gone */
    struct stat st;
    assert_int_equal(stat(f->state, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);

    size_t len = 0;
    char *tar = tu_read(f->dir, "out.tar", &len);
    assert_non_null(tar);
    assert_true(len > 1024);
    /* Filtered entries are not in the archive at all: no name, no bytes. */
    assert_null(memmem(tar, len, "secret.env", 10));
    assert_null(memmem(tar, len, "hunter2", 7));
    assert_null(memmem(tar, len, "SEEDKEY", 7));
    assert_null(memmem(tar, len, "id_rsa", 6));
    assert_null(memmem(tar, len, "debug.log", 9));
    assert_null(memmem(tar, len, "LOGLINE", 7));
    assert_null(memmem(tar, len, "artifact.o", 10));
    assert_null(memmem(tar, len, "OBJECT", 6));
    assert_non_null(memmem(tar, len, "main.c", 6));
    free(tar);

    /* What the peer does with it: import, restore into an empty folder. */
    tu_mkdir(f->dir, "remote");
    char *remote = tu_join(f->dir, "remote");
    char *store = tu_join(f->dir, "remote-store");
    sp_snapstore *s = NULL;
    sp_snapshot *snap = NULL;
    assert_int_equal(sp_snapstore_open(&s, remote, store, NULL, &err), 0);
    assert_int_equal(sp_snapshot_import(&snap, s, f->out, -1, NULL, &err), 0);
    assert_int_equal(snap->files, 4); /* main.c run.sh sub/notes.txt .gitignore */
    assert_int_equal(sp_snapshot_restore(NULL, s, snap->id, &err), 0);
    char *c = tu_read(remote, "main.c", NULL);
    assert_string_equal(c, "int main(void) { return 0; }\n");
    free(c);
    assert_true(tu_exists(remote, "sub/notes.txt"));
    assert_true(tu_exists(remote, "empty"));
    assert_false(tu_exists(remote, "secret.env"));
    assert_false(tu_exists(remote, "debug.log"));
    assert_false(tu_exists(remote, "build"));
    char *p = tu_join(remote, "run.sh");
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0755);
    free(p);
    sp_snapshot_free(snap);
    sp_snapstore_free(s);
    free(store);
    free(remote);
}

static void test_seed_cap_fails_clean(void **state)
{
    fx *f = *state;
    sp_mount m = the_mount(f);
    m.max_bytes = 8; /* main.c alone is more */
    int fd = open(f->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    sp_error *err = NULL;
    assert_int_equal(sp_seed_tar(NULL, fd, &m, 1, NULL, f->state, &err), SP_ETOOBIG);
    sp_error_free(err);
    close(fd);
    assert_int_equal(entries_in(f->state), 0);
    struct stat st;
    assert_int_equal(stat(f->out, &st), 0);
    assert_int_equal(st.st_size, 0); /* nothing written */
}

static void test_seed_write_fails_clean(void **state)
{
    fx *f = *state;
    sp_mount m = the_mount(f);
    int fd = open(f->out, O_RDONLY | O_CREAT | O_CLOEXEC, 0600); /* writes fail */
    assert_true(fd >= 0);
    sp_error *err = NULL;
    int r = sp_seed_tar(NULL, fd, &m, 1, NULL, f->state, &err);
    close(fd);
    assert_true(r < 0);
    assert_non_null(err);
    sp_error_free(err);
    assert_int_equal(entries_in(f->state), 0);
}

static void test_seed_bad_source(void **state)
{
    fx *f = *state;
    sp_mount m = the_mount(f);
    char *gone = tu_join(f->dir, "no-such-folder");
    m.host_path = gone;
    sp_error *err = NULL;
    assert_int_equal(sp_seed_tar(NULL, -1, &m, 1, NULL, f->state, &err), SP_ENOTFOUND);
    sp_error_free(err);
    assert_int_equal(entries_in(f->state), 0);
    free(gone);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_seed_filters_and_cleanup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seed_cap_fails_clean, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seed_write_fails_clean, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seed_bad_source, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
