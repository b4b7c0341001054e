/* Fuzz target: apply_patch, both the Codex envelope and unified diffs.
 *
 * Every input is parsed alone (sp_patch_parse: no filesystem) and then
 * applied to a small fixed tree beside a folder of canary files. Byte 0
 * picks the format and options, the rest is the patch. Properties:
 *   - no crash, leak or hang; failures carry a message;
 *   - sp_patch_parse and sp_fs_apply_patch agree on the grammar: a patch
 *     the parser refuses with SP_EINVAL/SP_EESCAPE is never applied;
 *   - parsed paths are normalized (relative, no `..`);
 *   - nothing outside the root changes, whatever the patch says; the
 *     tree is rebuilt after every apply. */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "sandpod/fs.h"
#include "sandpod/patch.h"

#define CANARY "CANARY-patch-41d2"

static char *base, *root, *outside;
static sp_fs *fs;

static void put(const char *dir, const char *rel, const char *content)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, content, strlen(content)) != (ssize_t)strlen(content))
        abort();
    close(fd);
}

static void ln(const char *target, const char *dir, const char *rel)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    if (symlink(target, p) < 0)
        abort();
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void rmtree(const char *path)
{
    nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS);
}

static void build_root(void)
{
    char p[4096];
    if (mkdir(root, 0755) < 0)
        abort();
    put(root, "a.txt", "one\ntwo\nthree\n");
    put(root, "crlf.txt", "x\r\ny\r\n");
    put(root, "nonl.txt", "no newline");
    snprintf(p, sizeof(p), "%s/src", root);
    if (mkdir(p, 0755) < 0)
        abort();
    put(root, "src/main.c", "int main(void)\n{\n    return 0;\n}\n");
    ln("../outside/victim.txt", root, "out_link");
    ln("../outside", root, "out_dir");
    ln("a.txt", root, "in_link");
    snprintf(p, sizeof(p), "%s/outside/victim.txt", base);
    ln(p, root, "abs_link");
}

/* The outside folder, as text. */
static char *outside_state(void)
{
    static char out[8192];
    size_t len = 0;
    DIR *d = opendir(outside);
    if (!d)
        abort();
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char p[4096], buf[512] = "";
        snprintf(p, sizeof(p), "%s/%s", outside, de->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISREG(st.st_mode)) {
            int fd = open(p, O_RDONLY | O_CLOEXEC);
            ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
            buf[n > 0 ? n : 0] = '\0';
            if (fd >= 0)
                close(fd);
        }
        len += (size_t)snprintf(out + len, len < sizeof(out) ? sizeof(out) - len : 0, "%s:%o:%s;",
                                de->d_name, (unsigned)st.st_mode, buf);
    }
    closedir(d);
    return out;
}

static char *outside0;

static void open_fs(void)
{
    sp_fs_free(fs);
    fs = NULL;
    sp_error *err = NULL;
    if (sp_fs_open(&fs, root, NULL, &err) < 0)
        abort();
}

static void cleanup(void)
{
    sp_fs_free(fs);
    if (base)
        rmtree(base);
}

static void setup(void)
{
    char tmpl[4096];
    snprintf(tmpl, sizeof(tmpl), "%s/sp-fuzz-patch-XXXXXX", fz_tmpdir());
    if (!mkdtemp(tmpl))
        abort();
    base = strdup(tmpl);
    size_t n = strlen(base) + 16;
    root = malloc(n);
    outside = malloc(n);
    snprintf(root, n, "%s/root", base);
    snprintf(outside, n, "%s/outside", base);
    if (mkdir(outside, 0755) < 0)
        abort();
    put(outside, "victim.txt", CANARY "\none\ntwo\nthree\n");
    build_root();
    outside0 = strdup(outside_state());
    open_fs();
    atexit(cleanup);
}

static void check_paths(const sp_patch_result *r)
{
    for (size_t i = 0; i < r->n; i++) {
        const char *ps[2] = {r->files[i].path, r->files[i].new_path};
        for (int k = 0; k < 2; k++) {
            const char *p = ps[k];
            if (!p)
                continue;
            FZ_ASSERT(p[0] != '/' && strcmp(p, "..") != 0 && strncmp(p, "../", 3) != 0 &&
                          !strstr(p, "/../") &&
                          !(strlen(p) >= 3 && strcmp(p + strlen(p) - 3, "/..") == 0),
                      "unnormalized patch path '%s'", p);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fs)
        setup();
    if (size < 1 || size > 16384)
        return 0;
    sp_patch_opts o = SP_PATCH_OPTS_INIT;
    o.format = (sp_patch_format)(data[0] % 3);
    o.dry_run = data[0] & 0x10;
    o.allow_overwrite = data[0] & 0x20;
    const char *patch = (const char *)data + 1;
    size_t len = size - 1;

    sp_patch_result *pr = NULL;
    sp_error *perr = NULL;
    int prc = sp_patch_parse(&pr, patch, len, &o, &perr);
    if (prc == 0) {
        FZ_ASSERT(pr && pr->format != SP_PATCH_AUTO, "parse without a format");
        check_paths(pr);
    } else {
        FZ_ASSERT(!pr && perr && perr->message, "parse failure without a message");
    }

    sp_patch_result *ar = NULL;
    sp_error *aerr = NULL;
    int arc = sp_fs_apply_patch(&ar, fs, patch, len, &o, &aerr);
    if (arc == 0) {
        FZ_ASSERT(prc == 0, "applied a patch the parser refused (%d: %s)", prc,
                  perr ? perr->message : "");
        FZ_ASSERT(ar, "apply without a result");
        check_paths(ar);
    } else {
        FZ_ASSERT(!ar && aerr && aerr->message, "apply failure without a message");
    }
    FZ_ASSERT(strcmp(outside_state(), outside0) == 0, "the patch changed the outside: %s",
              outside_state());
    sp_patch_result_free(pr);
    sp_patch_result_free(ar);
    sp_error_free(perr);
    sp_error_free(aerr);
    rmtree(root);
    build_root();
    open_fs();
    return 0;
}
