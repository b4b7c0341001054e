/* The one progress line of the CLI: see progress.h. One operation at a
 * time per process, so the state is file-static. */
#include "progress.h"

#include "sandpod.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Redraw at most this often, and not for work done sooner. */
#define EVERY_MS 100
#define AFTER_MS 300
/* Below this, a rate would be noise. */
#define RATE_AFTER_MS 250

static struct {
    bool active, tty, json, drawn;
    bool deferred; /* the summary waits for the exit code */
    const char *verb;
    int64_t start_ms, phase_ms, drawn_ms, end_ms;
    char phase[32];
    uint64_t done; /* the most bytes any phase reported */
    char extra[96];
    bool any;
} pg;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cli_format_bytes(char *buf, size_t size, uint64_t n)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (n < 1024) {
        snprintf(buf, size, "%" PRIu64 " B", n);
        return;
    }
    double v = (double)n / 1024;
    size_t u = 0;
    while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024;
        u++;
    }
    /* To a tenth; "1 GiB" rather than "1.0 GiB" when the tenth is zero. */
    double tenths = (double)(uint64_t)(v * 10 + 0.5);
    if ((uint64_t)tenths % 10 == 0)
        snprintf(buf, size, "%.0f %s", tenths / 10, units[u]);
    else
        snprintf(buf, size, "%.1f %s", v, units[u]);
}

void cli_format_duration(char *buf, size_t size, int64_t ms)
{
    int64_t s = ms < 0 ? 0 : (ms + 500) / 1000;
    if (s < 60)
        snprintf(buf, size, "%llds", (long long)s);
    else if (s < 3600)
        snprintf(buf, size, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
    else
        snprintf(buf, size, "%lldh%02lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
}

void cli_progress_format(char *buf, size_t size, const char *phase, uint64_t done, uint64_t total,
                         int64_t elapsed_ms, const char *extra)
{
    char a[32], b[32];
    size_t n = (size_t)snprintf(buf, size, "%s", phase);
    cli_format_bytes(a, sizeof(a), done);
    if (total) {
        unsigned pct = done >= total ? 100 : (unsigned)((double)done * 100 / (double)total);
        cli_format_bytes(b, sizeof(b), total);
        n += (size_t)snprintf(buf + (n < size ? n : size), n < size ? size - n : 0,
                              "  %3u%%  %s/%s", pct, a, b);
    } else {
        n += (size_t)snprintf(buf + (n < size ? n : size), n < size ? size - n : 0, "  %s", a);
    }
    if (elapsed_ms >= RATE_AFTER_MS && done) {
        double rate = (double)done * 1000 / (double)elapsed_ms; /* bytes per second */
        cli_format_bytes(a, sizeof(a), (uint64_t)rate);
        n += (size_t)snprintf(buf + (n < size ? n : size), n < size ? size - n : 0, "  %s/s", a);
        if (total > done) {
            cli_format_duration(b, sizeof(b), (int64_t)((double)(total - done) * 1000 / rate));
            n += (size_t)snprintf(buf + (n < size ? n : size), n < size ? size - n : 0, "  ETA %s",
                                  b);
        }
    }
    if (extra && *extra)
        snprintf(buf + (n < size ? n : size), n < size ? size - n : 0, "  %s", extra);
}

void cli_progress_summary(char *buf, size_t size, uint64_t bytes, int64_t elapsed_ms)
{
    char a[32], t[32];
    cli_format_bytes(a, sizeof(a), bytes);
    /* Tenths of a second below a minute: a short run says how short. */
    if (elapsed_ms < 60000)
        snprintf(t, sizeof(t), "%.1fs", (double)(elapsed_ms < 0 ? 0 : elapsed_ms) / 1000);
    else
        cli_format_duration(t, sizeof(t), elapsed_ms);
    if (!bytes) {
        snprintf(buf, size, "in %s", t);
    } else if (elapsed_ms > 0) {
        char r[32];
        cli_format_bytes(r, sizeof(r), (uint64_t)((double)bytes * 1000 / (double)elapsed_ms));
        snprintf(buf, size, "%s in %s (%s/s)", a, t, r);
    } else {
        snprintf(buf, size, "%s in %s", a, t);
    }
}

void cli_progress_begin(const char *done_verb, bool json)
{
    memset(&pg, 0, sizeof(pg));
    pg.active = true;
    pg.verb = done_verb;
    pg.json = json;
    pg.tty = isatty(STDERR_FILENO);
    pg.start_ms = pg.phase_ms = mono_ms();
    pg.drawn_ms = -1;
}

void cli_progress_rename(const char *done_verb)
{
    pg.verb = done_verb;
}

void cli_progress_update(const char *phase, uint64_t done, uint64_t total, const char *extra)
{
    if (!pg.active)
        return;
    int64_t now = mono_ms();
    if (strcmp(pg.phase, phase) != 0) {
        snprintf(pg.phase, sizeof(pg.phase), "%s", phase);
        pg.phase_ms = now;
    }
    if (done > pg.done)
        pg.done = done;
    pg.any = true;
    snprintf(pg.extra, sizeof(pg.extra), "%s", extra ? extra : "");
    if (!pg.tty || now - pg.start_ms < AFTER_MS ||
        (pg.drawn_ms >= 0 && now - pg.drawn_ms < EVERY_MS))
        return;
    pg.drawn_ms = now;
    char line[256];
    cli_progress_format(line, sizeof(line), phase, done, total, now - pg.phase_ms, extra);
    fprintf(stderr, "\r\033[K%s", line);
    fflush(stderr);
    pg.drawn = true;
}

static void clear_line(void)
{
    if (pg.drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        pg.drawn = false;
    }
}

static void put_summary(void)
{
    if (pg.tty || pg.json || !pg.any)
        return;
    char s[128];
    cli_progress_summary(s, sizeof(s), pg.done, pg.end_ms - pg.start_ms);
    fprintf(stderr, "sandpod: %s %s%s%s\n", pg.verb, s, pg.extra[0] ? ": " : "", pg.extra);
}

void cli_progress_end(bool ok)
{
    if (!pg.active)
        return;
    pg.active = false;
    pg.end_ms = mono_ms();
    clear_line();
    if (ok)
        put_summary();
}

void cli_progress_end_deferred(void)
{
    if (!pg.active)
        return;
    pg.active = false;
    pg.end_ms = mono_ms();
    clear_line();
    pg.deferred = true;
}

void cli_progress_finish(int rc)
{
    if (pg.deferred && rc == 0)
        put_summary();
    pg.deferred = false;
}

void cli_progress_pull(const char *line, void *userdata)
{
    (void)userdata;
    cli_progress_update("pulling", 0, 0, line);
}

void cli_progress_hydrate(void *userdata, const sp_hydrate_progress *p)
{
    (void)userdata;
    char extra[64];
    switch (p->phase) {
    case SP_HYDRATE_SCAN:
        snprintf(extra, sizeof(extra), "%" PRIu64 " entries", p->files);
        cli_progress_update("scanning", p->bytes, 0, extra);
        break;
    case SP_HYDRATE_COPY:
        snprintf(extra, sizeof(extra), "%" PRIu64 "/%" PRIu64 " files", p->files, p->total_files);
        cli_progress_update("hydrating", p->bytes, p->total_bytes, extra);
        break;
    default:
        snprintf(extra, sizeof(extra), "%" PRIu64 " files", p->total_files);
        cli_progress_update("moving into place", p->total_bytes, p->total_bytes, extra);
        break;
    }
}
