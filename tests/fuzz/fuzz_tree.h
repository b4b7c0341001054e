/* A small workspace beside a folder of canary files, for the fuzz targets
 * that drive whole tools (fuzz_tools, fuzz_mcp): the workspace holds links
 * that point at the canaries, so a tool that followed one out would return
 * the canary text or change the outside folder. */
#ifndef SANDPOD_FUZZ_TREE_H
#define SANDPOD_FUZZ_TREE_H

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

#define FT_CANARY "CANARY-tools-93b1"

typedef struct ft_tree {
    char *base, *root, *outside;
    char state0[8192];
} ft_tree;

static inline void ft_put(const char *dir, const char *rel, const char *content)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, content, strlen(content)) != (ssize_t)strlen(content))
        abort();
    close(fd);
}

static inline void ft_ln(const char *target, const char *dir, const char *rel)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    if (symlink(target, p) < 0)
        abort();
}

static inline int ft_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static inline void ft_rmtree(const char *path)
{
    nftw(path, ft_rm_one, 32, FTW_DEPTH | FTW_PHYS);
}

static inline void ft_build_root(ft_tree *t)
{
    char p[4096];
    if (mkdir(t->root, 0755) < 0)
        abort();
    ft_put(t->root, "a.txt", "one\ntwo\nthree\n");
    snprintf(p, sizeof(p), "%s/src", t->root);
    if (mkdir(p, 0755) < 0)
        abort();
    ft_put(t->root, "src/main.c", "int main(void)\n{\n    return 0;\n}\n");
    ft_ln("../outside/victim.txt", t->root, "out_link");
    ft_ln("../outside", t->root, "out_dir");
    ft_ln("src", t->root, "in_dir");
    snprintf(p, sizeof(p), "%s/victim.txt", t->outside);
    ft_ln(p, t->root, "abs_link");
    ft_ln("/proc/self/root", t->root, "proc_root");
}

/* The outside folder as text: names, modes, contents. */
static inline void ft_state(const ft_tree *t, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    DIR *d = opendir(t->outside);
    if (!d)
        abort();
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char p[4096], buf[512] = "";
        snprintf(p, sizeof(p), "%s/%s", t->outside, de->d_name);
        struct stat st;
        memset(&st, 0, sizeof(st));
        if (lstat(p, &st) == 0 && S_ISREG(st.st_mode)) {
            int fd = open(p, O_RDONLY | O_CLOEXEC);
            ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
            buf[n > 0 ? n : 0] = '\0';
            if (fd >= 0)
                close(fd);
        }
        len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s:%o:%s;", de->d_name,
                                (unsigned)st.st_mode, buf);
    }
    closedir(d);
}

static inline void ft_init(ft_tree *t, const char *name)
{
    char tmpl[4096];
    snprintf(tmpl, sizeof(tmpl), "%s/sp-fuzz-%s-XXXXXX", fz_tmpdir(), name);
    if (!mkdtemp(tmpl))
        abort();
    t->base = strdup(tmpl);
    size_t n = strlen(t->base) + 16;
    t->root = malloc(n);
    t->outside = malloc(n);
    snprintf(t->root, n, "%s/root", t->base);
    snprintf(t->outside, n, "%s/outside", t->base);
    if (mkdir(t->outside, 0755) < 0)
        abort();
    ft_put(t->outside, "victim.txt", FT_CANARY "\none\ntwo\nthree\n");
    ft_build_root(t);
    ft_state(t, t->state0, sizeof(t->state0));
}

/* Fail when the outside changed; then put the workspace back. */
static inline void ft_check_and_reset(ft_tree *t)
{
    char now[sizeof(t->state0)];
    ft_state(t, now, sizeof(now));
    FZ_ASSERT(strcmp(now, t->state0) == 0, "the outside changed: %s", now);
    ft_rmtree(t->root);
    ft_build_root(t);
}

/* Fail when a tool answer holds the canary text, unless the input did
 * (answers quote their arguments). */
static inline void ft_no_canary(const char *s, size_t len, const uint8_t *in, size_t in_len,
                                const char *what)
{
    if (in_len >= strlen(FT_CANARY) && memmem(in, in_len, FT_CANARY, strlen(FT_CANARY)))
        return;
    FZ_ASSERT(!s || !memmem(s, len, FT_CANARY, strlen(FT_CANARY)), "%s returned a canary: %.300s",
              what, s);
}

#endif
