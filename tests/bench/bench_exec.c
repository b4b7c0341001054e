/* Command round trip, side by side in one run: sandpod's fast path (the
 * agent), sandpod's REST path (a Podman exec per command) and the podman
 * CLI (`podman --remote --url URL exec`), each on `true` and on an `echo`
 * of 1 KiB, against one and the same sandbox container.
 *
 * Usage: bench_exec [REPS] > result.json   (progress on stderr)
 * Prints one JSON object: {"rows": [{"name", "reps", "fast": {...},
 * "rest": {...}, "podman": {...}}]}, every timing in ms. */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandpod/podman.h"
#include "sandpod/sandbox.h"

extern char **environ;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void stats(const char *key, double *v, int n, int last)
{
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    int i99 = (int)(0.99 * (n - 1) + 0.5);
    printf("\"%s\": {\"median_ms\": %.3f, \"p99_ms\": %.3f, \"min_ms\": %.3f, \"max_ms\": %.3f}%s",
           key, med, v[i99], v[0], v[n - 1], last ? "" : ", ");
}

static void die(const char *what, sp_error *err)
{
    fprintf(stderr, "bench_exec: %s: %s\n", what, err ? err->message : "?");
    exit(1);
}

/* One sandpod command; checks that it did what it should. */
static double run_sandpod(sp_sandbox *sb, const char *const *argv, size_t want_out)
{
    sp_run_result *r = NULL;
    sp_error *err = NULL;
    double t0 = now_ms();
    if (sp_sandbox_exec(&r, sb, argv, NULL, &err) < 0)
        die("exec", err);
    double dt = now_ms() - t0;
    if (r->exit_code != 0 || r->out_total != want_out) {
        fprintf(stderr, "bench_exec: unexpected result: exit %d, %llu bytes\n", r->exit_code,
                (unsigned long long)r->out_total);
        exit(1);
    }
    sp_run_result_free(r);
    return dt;
}

/* One `podman --remote --url URL exec CONTAINER argv...`, output to a pipe
 * that is read to its end (so the work matches). */
static double run_podman(const char *url, const char *cid, const char *const *argv, size_t want)
{
    const char *pre[] = {"podman", "--remote", "--url", url, "exec", cid};
    const char *full[16];
    size_t n = 0;
    for (size_t i = 0; i < 6; i++)
        full[n++] = pre[i];
    for (size_t i = 0; argv[i] && n < 15; i++)
        full[n++] = argv[i];
    full[n] = NULL;
    int p[2];
    if (pipe(p) < 0)
        exit(1);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_addclose(&fa, p[0]);
    posix_spawn_file_actions_addclose(&fa, p[1]);
    double t0 = now_ms();
    pid_t pid;
    if (posix_spawnp(&pid, "podman", &fa, NULL, (char *const *)full, environ) != 0) {
        fprintf(stderr, "bench_exec: cannot run podman\n");
        exit(1);
    }
    close(p[1]);
    char buf[4096];
    size_t got = 0;
    ssize_t k;
    while ((k = read(p[0], buf, sizeof(buf))) > 0)
        got += (size_t)k;
    close(p[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    double dt = now_ms() - t0;
    posix_spawn_file_actions_destroy(&fa);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || got != want) {
        fprintf(stderr, "bench_exec: podman exec gave status %d, %zu bytes\n", st, got);
        exit(1);
    }
    return dt;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 100;
    if (reps < 5)
        reps = 5;
    char root[] = "/tmp/sandpod-bench-XXXXXX";
    if (!mkdtemp(root))
        return 1;
    sp_sandbox_opts o = SP_SANDBOX_OPTS_INIT;
    o.name = "bench-exec";
    o.state_root = root;
    o.exec_path = SP_EXEC_FAST;
    sp_sandbox *fast = NULL, *rest = NULL;
    sp_error *err = NULL;
    if (sp_sandbox_create(&fast, &o, &err) < 0)
        die("create", err);
    sp_sandbox_opts ro = SP_SANDBOX_OPTS_INIT;
    ro.state_root = root;
    ro.exec_path = SP_EXEC_REST;
    if (sp_sandbox_open(&rest, "bench-exec", &ro, &err) < 0)
        die("open", err);
    sp_podman *p = sp_sandbox_podman(fast, &err);
    if (!p)
        die("podman", err);
    const char *url = sp_podman_url(p);
    const char *cid = sp_sandbox_container_id(fast);

    static char kib[1025];
    memset(kib, 'x', 1024);
    const char *a_true[] = {"true", NULL};
    const char *a_echo[] = {"echo", kib, NULL};
    struct {
        const char *name;
        const char *const *argv;
        size_t out;
    } rows[] = {{"true", a_true, 0}, {"echo 1 KiB", a_echo, 1025}};

    double *vf = calloc((size_t)reps, sizeof(double));
    double *vr = calloc((size_t)reps, sizeof(double));
    double *vp = calloc((size_t)reps, sizeof(double));
    printf("{\"reps\": %d, \"podman_url\": \"%s\", \"rows\": [", reps, url);
    for (size_t k = 0; k < 2; k++) {
        /* Warm up each path once, then interleave so that drift in the
         * machine's load hits all three alike. */
        run_sandpod(fast, rows[k].argv, rows[k].out);
        run_sandpod(rest, rows[k].argv, rows[k].out);
        run_podman(url, cid, rows[k].argv, rows[k].out);
        for (int i = 0; i < reps; i++) {
            vf[i] = run_sandpod(fast, rows[k].argv, rows[k].out);
            vr[i] = run_sandpod(rest, rows[k].argv, rows[k].out);
            vp[i] = run_podman(url, cid, rows[k].argv, rows[k].out);
            if (i % 20 == 19)
                fprintf(stderr, "  %s: %d/%d\n", rows[k].name, i + 1, reps);
        }
        printf("%s{\"name\": \"%s\", ", k ? ", " : "", rows[k].name);
        stats("fast", vf, reps, 0);
        stats("rest", vr, reps, 0);
        stats("podman", vp, reps, 1);
        printf("}");
    }
    printf("]}\n");
    sp_sandbox_free(rest);
    if (sp_sandbox_remove(fast, false, &err) < 0)
        die("remove", err);
    sp_sandbox_free(fast);
    rmdir(root);
    free(vf);
    free(vr);
    free(vp);
    return 0;
}
