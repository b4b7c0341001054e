/* Helpers for tests: scratch folders and small file utilities. */
#ifndef SANDPOD_TESTUTIL_H
#define SANDPOD_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cmocka.h>

/* A fresh folder under $TMPDIR (or /tmp); removed by tu_rmtree(). */
char *tu_mkdtemp(void);
/* rm -rf without following symlinks (sp_tree_remove below path's folder). */
void tu_rmtree(const char *path);
/* dir/top, then `depth` folders named seg each inside the last; top and
 * every folder but the deepest hold an empty file "f". Built with *at()
 * calls, so the paths may be far longer than PATH_MAX. */
void tu_mkdeep(const char *dir, const char *top, const char *seg, unsigned depth);
/* How many fds this process has open. */
int tu_count_fds(void);
/* For sp_tree_test_before_rmdir: adds a file to a folder named "grow"
 * before each rmdir of it, while tu_grow_left (counted down) is not 0. */
extern int tu_grow_left;
void tu_grow_hook(int parent_fd, const char *name);
/* Write a file (parents must exist) with a mode. */
void tu_write(const char *dir, const char *rel, const char *content, unsigned mode);
void tu_write_n(const char *dir, const char *rel, const void *data, size_t len, unsigned mode);
/* Read a file into a malloc'd NUL-terminated buffer, or NULL. */
char *tu_read(const char *dir, const char *rel, size_t *len);
void tu_mkdir(const char *dir, const char *rel);
void tu_symlink(const char *target, const char *dir, const char *rel);
bool tu_exists(const char *dir, const char *rel);
char *tu_join(const char *a, const char *b);

/* A fixture for sp_fs tests: a fresh root with an sp_fs on it, and a
 * folder outside the root that must never be touched. Use as a cmocka
 * setup/teardown pair; *state is a tu_fsfx. */
struct sp_fs;
typedef struct tu_fsfx {
    char *dir;
    char *outside;
    struct sp_fs *fs;
} tu_fsfx;
int tu_fsfx_setup(void **state);

int tu_fsfx_teardown(void **state);

/* Find (or start) the shared Podman service and return its URL (the caller
 * frees it), so sandboxes under scratch state roots do not each start a
 * private service. Exits 77 (skip) when none can be reached or started —
 * but 1 under CI=true, where Podman is required. */
char *tu_need_podman_or_skip(void);

/* git on a snapshot store (`git --git-dir=STORE a1 a2 a3`, quiet unless
 * SP_TEST_VERBOSE is set): its exit status. */
int tu_run_git(const char *store, const char *a1, const char *a2, const char *a3);
/* git a1..a4 (NULL ends them early) run in folder dir with a clean
 * environment (HOME=dir, no system config), its stdout to file `out`
 * (NULL: nowhere), stderr to nowhere: its exit status. */
int tu_git_in(const char *dir, const char *out, const char *a1, const char *a2, const char *a3,
              const char *a4);
bool tu_have_git(void);
/* The store is a repository git itself finds whole (`fsck --strict`);
 * nothing is checked where git is missing. */
void tu_assert_fsck(const char *store);

/* On SIGABRT, SIGSEGV, SIGBUS, SIGFPE or SIGILL (under ASan only SIGABRT:
 * ASan reports faults itself): print `context` (a buffer the test keeps
 * current, or NULL) and every thread's stack through gdb when /usr/bin/gdb
 * exists, then die of the signal. For failures seen only in CI, where no
 * core file survives. */
void tu_crash_reports(const char *context);

/* How many processes have `parent` as their parent now; the first one
 * found goes to *first (when not NULL and there is one). */
int tu_children_of(pid_t parent, pid_t *first);

/* The host id that id `inside` of process pid's user namespace has
 * (which: "uid_map" or "gid_map"); fails the test when it has none. */
unsigned tu_host_id(int pid, const char *which, unsigned inside);

#endif
