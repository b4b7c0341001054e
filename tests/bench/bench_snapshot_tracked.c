/* The long-lived side of bench_snapshot.sh: one process with change
 * tracking (inotify) timing snapshot and restore on a tree the script
 * built. Not a test; built by CMake, run by the script.
 *
 * Usage: bench_snapshot_tracked WORKSPACE STORE REPS
 *        bench_snapshot_tracked --oneshot snapshot|restore WORKSPACE STORE [SNAP]
 *
 * The --oneshot form does one operation without tracking and exits: the
 * script times it as a whole process, like the CLI, but in a binary that
 * links only what the snapshot module needs (the CLI also loads libcurl
 * and its dependencies for the sandbox commands).
 *
 * The workspace holds src/dXX/sY/fZZZ.txt (XX < 20, Y < 5, ZZZ < 100);
 * each round changes ten of those files, as the script does for the CLI.
 * Prints one JSON object: medians and samples in milliseconds. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sandpod/snapshot.h"

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

static double median(const double *v, int n)
{
    double *c = malloc(sizeof(double) * (size_t)n);
    memcpy(c, v, sizeof(double) * (size_t)n);
    qsort(c, (size_t)n, sizeof(double), cmp_d);
    double m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
    free(c);
    return m;
}

static void die(const char *what, sp_error *err)
{
    fprintf(stderr, "bench_snapshot_tracked: %s: %s\n", what, err ? err->message : "?");
    exit(1);
}

/* Change ten files, the same way the script does for round `round`. */
static void change_ten(const char *ws, int round, const char *tag)
{
    for (int k = 0; k < 10; k++) {
        int i = (round * 10 + k) * 97 % 10000;
        char p[4096];
        snprintf(p, sizeof(p), "%s/src/d%02d/s%d/f%03d.txt", ws, i / 500, i / 100 % 5, i % 100);
        FILE *f = fopen(p, "a");
        if (!f) {
            perror(p);
            exit(1);
        }
        fprintf(f, "%s change %d %d\n", tag, round, k);
        fclose(f);
    }
}

static void print_series(const char *name, const double *v, int n, bool last)
{
    printf("  \"%s\": {\"median_ms\": %.3f, \"samples_ms\": [", name, median(v, n));
    for (int i = 0; i < n; i++)
        printf("%s%.3f", i ? ", " : "", v[i]);
    printf("]}%s\n", last ? "" : ",");
}

static int oneshot(int argc, char **argv)
{
    if (argc < 5)
        return 2;
    sp_error *err = NULL;
    sp_snapstore *s = NULL;
    if (sp_snapstore_open(&s, argv[3], argv[4], NULL, &err) < 0)
        die("open", err);
    int r;
    if (strcmp(argv[2], "snapshot") == 0)
        r = sp_snapshot_create(NULL, s, NULL, &err);
    else if (argc > 5)
        r = sp_snapshot_restore(NULL, s, argv[5], &err);
    else
        return 2;
    if (r < 0)
        die(argv[2], err);
    sp_snapstore_free(s);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--oneshot") == 0)
        return oneshot(argc, argv);
    if (argc != 4) {
        fprintf(stderr, "usage: bench_snapshot_tracked WORKSPACE STORE REPS\n");
        return 2;
    }
    const char *ws = argv[1], *store = argv[2];
    long reps_l = strtol(argv[3], NULL, 10);
    int reps = reps_l > 0 && reps_l < 1000 ? (int)reps_l : 5;
    sp_error *err = NULL;
    sp_snapstore *s = NULL;
    sp_snapstore_opts o = SP_SNAPSTORE_OPTS_INIT;
    o.track_changes = true;

    /* First snapshot: the walk at open (which reads everything into the
     * store) plus the snapshot itself. */
    double t0 = now_ms();
    if (sp_snapstore_open(&s, ws, store, &o, &err) < 0)
        die("open", err);
    sp_snapshot *base = NULL;
    if (sp_snapshot_create(&base, s, "base", &err) < 0)
        die("snapshot", err);
    double first = now_ms() - t0;

    double *nochange = calloc((size_t)reps, sizeof(double));
    double *ten = calloc((size_t)reps, sizeof(double));
    double *restore10 = calloc((size_t)reps, sizeof(double));
    sp_snapstore_stats st;
    uint64_t entries_ten = 0, entries_restore = 0, changed_restore = 0;
    for (int r = 0; r < reps; r++) {
        t0 = now_ms();
        if (sp_snapshot_create(NULL, s, NULL, &err) < 0)
            die("snapshot", err);
        nochange[r] = now_ms() - t0;

        change_ten(ws, r, "snap");
        t0 = now_ms();
        if (sp_snapshot_create(NULL, s, NULL, &err) < 0)
            die("snapshot", err);
        ten[r] = now_ms() - t0;
        sp_snapstore_last_stats(s, &st);
        entries_ten = st.entries;

        change_ten(ws, r + 1000, "restore");
        t0 = now_ms();
        if (sp_snapshot_restore(NULL, s, base->id, &err) < 0)
            die("restore", err);
        restore10[r] = now_ms() - t0;
        sp_snapstore_last_stats(s, &st);
        entries_restore = st.entries;
        changed_restore = st.paths_changed;
    }
    printf("{\n  \"first_ms\": %.3f,\n", first);
    print_series("nochange", nochange, reps, false);
    print_series("ten_changed", ten, reps, false);
    print_series("restore_ten", restore10, reps, false);
    printf("  \"entries_looked_at_ten_changed\": %llu,\n  \"entries_looked_at_restore\": %llu,\n"
           "  \"paths_changed_restore\": %llu\n}\n",
           (unsigned long long)entries_ten, (unsigned long long)entries_restore,
           (unsigned long long)changed_restore);
    sp_snapshot_free(base);
    sp_snapstore_free(s);
    free(nochange);
    free(ten);
    free(restore10);
    return 0;
}
