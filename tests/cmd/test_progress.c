/* The CLI's progress line (cmd/progress.c): percent, rate and ETA
 * arithmetic, units, and the summary line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "progress.h"

#define MiB (1024ull * 1024)
#define GiB (1024ull * MiB)

static void line_is(const char *phase, uint64_t done, uint64_t total, int64_t ms, const char *extra,
                    const char *want)
{
    char buf[256];
    cli_progress_format(buf, sizeof(buf), phase, done, total, ms, extra);
    if (strcmp(buf, want) != 0)
        fail_msg("got  '%s'\nwant '%s'", buf, want);
}

static void test_line(void **state)
{
    (void)state;
    /* 1.2 GiB of 2.9 GiB in 6.8 s: 180.7 MiB/s, 1.7 GiB left: 9.6 s, shown 10s. */
    line_is("hydrating", 1288490189ull, 3113851290ull, 6800, NULL,
            "hydrating   41%  1.2 GiB/2.9 GiB  180.7 MiB/s  ETA 10s");
    /* Exact halves: 50%, ETA equal to the time so far. */
    line_is("hydrating", 512 * MiB, GiB, 4000, "10/20 files",
            "hydrating   50%  512 MiB/1 GiB  128 MiB/s  ETA 4s  10/20 files");
    /* No rate in the first quarter second, so no ETA either. */
    line_is("hydrating", 10 * MiB, 100 * MiB, 200, NULL, "hydrating   10%  10 MiB/100 MiB");
    /* Done: 100%, no ETA. */
    line_is("hydrating", GiB, GiB, 2000, NULL, "hydrating  100%  1 GiB/1 GiB  512 MiB/s");
    /* Past the total (a file grew): capped at 100%. */
    line_is("hydrating", GiB + 5, GiB, 2000, NULL, "hydrating  100%  1 GiB/1 GiB  512 MiB/s");
    /* No total: bytes and rate only. */
    line_is("scanning", 300 * MiB, 0, 3000, "12 entries",
            "scanning  300 MiB  100 MiB/s  12 entries");
    /* Nothing done yet: no rate. */
    line_is("scanning", 0, 0, 5000, NULL, "scanning  0 B");
    /* Slow and long: ETA in minutes, then hours. */
    line_is("hydrating", MiB, 301 * MiB, 1000, NULL,
            "hydrating    0%  1 MiB/301 MiB  1 MiB/s  ETA 5m00s");
    line_is("hydrating", 1024, 4 * GiB, 1000, NULL,
            "hydrating    0%  1 KiB/4 GiB  1 KiB/s  ETA 1165h05m");
    /* A small buffer is cut, never overrun. */
    char small[12];
    memset(small, 'x', sizeof(small));
    cli_progress_format(small, 10, "hydrating", GiB, 2 * GiB, 1000, "extra");
    assert_int_equal(strlen(small), 9);
    assert_int_equal(small[11], 'x');
}

static void bytes_is(uint64_t n, const char *want)
{
    char b[32];
    cli_format_bytes(b, sizeof(b), n);
    assert_string_equal(b, want);
}

static void duration_is(int64_t ms, const char *want)
{
    char b[32];
    cli_format_duration(b, sizeof(b), ms);
    assert_string_equal(b, want);
}

static void summary_is(uint64_t bytes, int64_t ms, const char *want)
{
    char b[128];
    cli_progress_summary(b, sizeof(b), bytes, ms);
    assert_string_equal(b, want);
}

static void test_units(void **state)
{
    (void)state;
    bytes_is(0, "0 B");
    bytes_is(1023, "1023 B");
    bytes_is(1536, "1.5 KiB");
    bytes_is(3 * GiB, "3 GiB");
    duration_is(0, "0s");
    duration_is(59499, "59s");
    duration_is(59500, "1m00s");
    duration_is(3599000, "59m59s");
    duration_is(7620000, "2h07m");
}

static void test_summary(void **state)
{
    (void)state;
    summary_is(3113851290ull, 16400, "2.9 GiB in 16.4s (181.1 MiB/s)");
    summary_is(0, 400, "in 0.4s");
    summary_is(7 * MiB, 0, "7 MiB in 0.0s");
    summary_is(60 * MiB, 61000, "60 MiB in 1m01s (1007.2 KiB/s)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line),
        cmocka_unit_test(test_units),
        cmocka_unit_test(test_summary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
