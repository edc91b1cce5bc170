/* Unit tests of retention under CLOCK_REALTIME steps: the writer's view of
 * the clock live rows are stamped with (lib/store/wallclock.c), and a store
 * on the wall clock whose CLOCK_REALTIME is stepped a day forward and two
 * days back while it runs.
 *
 * The steps come from tests/helpers/clock-shift (LD_PRELOAD, set by
 * tests/meson.build): the machine's clock is shared, so only this program
 * sees them. CLOCK_SHIFT_FILE is a file of this test's own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "store-fixture.h"
#include "store/store-internal.h"

#define DAY 86400LL

/* ---- The clock on its own --------------------------------------------------- */

/* The offset seen first is the stamp clock's; drift under a second and a
 * step back move nothing: the stamp clock runs on with the monotonic one. */
static void test_wallclock_slew_and_step_back(void **state)
{
    store_wallclock w;
    int64_t held = -1, mono = 1000 * NS, wall = (T0 + 20) * NS;

    (void)state;
    wallclock_init(&w);
    assert_int_equal(wallclock_read(&w, mono, wall, 3600, &held), T0 + 20);
    assert_int_equal(held, 0);
    /* 10 s later, the wall clock 0.5 s ahead (slew): followed, no step */
    assert_int_equal(wallclock_read(&w, mono + 10 * NS, wall + 10 * NS + NS / 2, 3600, &held),
                     T0 + 30);
    assert_int_equal(held, 0);
    /* stepped back a day: the stamp clock runs on */
    assert_int_equal(wallclock_read(&w, mono + 20 * NS, wall + 20 * NS - DAY * NS, 3600, &held),
                     T0 + 40);
    assert_int_equal(held, 0);
    assert_int_equal(w.n_steps, 0);
}

/* A step forward moves the stamp clock and holds the per-second cut back by
 * its size for the window's elapsed time after it was seen, then no longer. */
static void test_wallclock_step_forward_held_for_window(void **state)
{
    store_wallclock w;
    int64_t held = -1, mono = 1000 * NS, wall = T0 * NS;

    (void)state;
    wallclock_init(&w);
    wallclock_read(&w, mono, wall, 3600, &held);
    assert_int_equal(wallclock_read(&w, mono + 60 * NS, wall + (60 + DAY) * NS, 3600, &held),
                     T0 + 60 + DAY);
    assert_int_equal(held, DAY);
    /* a second, smaller step adds to it */
    assert_int_equal(wallclock_read(&w, mono + 120 * NS, wall + (120 + DAY + 90) * NS, 3600, &held),
                     T0 + 120 + DAY + 90);
    assert_int_equal(held, DAY + 90);
    /* the window after the first: the second's only */
    wallclock_read(&w, mono + (60 + 3600) * NS, wall + (60 + 3600 + DAY + 90) * NS, 3600, &held);
    assert_int_equal(held, 90);
    wallclock_read(&w, mono + (120 + 3600) * NS, wall + (120 + 3600 + DAY + 90) * NS, 3600, &held);
    assert_int_equal(held, 0);
}

/* More steps than the list holds: the oldest are merged, so the cut is
 * held back by all of them, and longer rather than shorter. */
static void test_wallclock_many_steps_merge(void **state)
{
    store_wallclock w;
    int64_t held = -1, mono = 1000 * NS, wall = T0 * NS;
    int n = 3 * WALLCLOCK_STEPS;

    (void)state;
    wallclock_init(&w);
    wallclock_read(&w, mono, wall, 3600, &held);
    for (int i = 1; i <= n; i++)
        wallclock_read(&w, mono + i * NS, wall + (i + 10LL * i) * NS, 3600, &held);
    assert_int_equal(held, 10LL * n);
    assert_true(w.n_steps <= WALLCLOCK_STEPS);
    /* an hour after the first step, those seen later still count */
    wallclock_read(&w, mono + 3601 * NS, wall + (3601 + 10LL * n) * NS, 3600, &held);
    assert_true(held > 0);
    wallclock_read(&w, mono + (n + 3601) * NS, wall + (n + 3601 + 10LL * n) * NS, 3600, &held);
    assert_int_equal(held, 0);
}

/* ---- A store on a stepped clock --------------------------------------------- */

static char shift_path[128];

static void set_shift(long long seconds)
{
    char tmp[160];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s.tmp", shift_path);
    f = fopen(tmp, "w");
    assert_non_null(f);
    fprintf(f, "%lld\n", seconds);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rename(tmp, shift_path), 0);
    sleep_ms(60); /* the shim reads the file again within 20 ms */
}

static int64_t wall_s(void)
{
    return (int64_t)(util_now_ns(CLOCK_REALTIME) / NS);
}

/* Seconds t0..t0+n-1: one host tick and one process tick each. */
static void push_seconds(store *s, int64_t t0, int n)
{
    for (int i = 0; i < n; i++) {
        int64_t t = (t0 + i) * NS + NS / 2;
        assert_int_equal(push_host(s, t, 1.0, 10.0, 4.0, 5.0), 0);
        assert_int_equal(push_proc(s, t, 4242, 7, 5.0, 6.0, 0.5, 0, 0), 0);
    }
}

/* Waits until the writer has run its own maintenance `n` more times. */
static void wait_maintenance(store *s, int n)
{
    store_stats st;
    uint64_t from;

    store_get_stats(s, &st);
    from = st.maintenance_runs;
    for (int i = 0; i < 6000 && st.maintenance_runs < from + (uint64_t)n; i++) {
        sleep_ms(10);
        store_get_stats(s, &st);
    }
    assert_true(st.maintenance_runs >= from + (uint64_t)n);
    assert_int_equal(st.error, 0);
}

static int64_t count(const char *path, const char *table, int64_t from, int64_t to)
{
    char sql[200];

    snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s WHERE t >= %lld AND t < %lld", table,
             (long long)from, (long long)to);
    return (int64_t)file_num(path, sql);
}

/* Stepped a day forward, the seconds stored before the step keep their
 * per-second rows (a wall-clock cut would roll them all into minutes);
 * rows far past retention still roll up. Stepped two days back, no row is
 * lost and none rolls up early. */
static void test_store_clock_steps(void **state)
{
    fixture *f = *state;
    store_config c;
    store *s;
    int64_t now, recent, later;

    set_shift(0);
    config(&c);
    c.clock = STORE_CLOCK_WALL;
    c.maintain_interval_s = 1;
    c.second_retention_s = 3600;
    s = open_store(f->path, &c);
    now = wall_s();
    /* three days old: due at the first run */
    push_seconds(s, now - 3 * DAY, 3);
    recent = now - 12;
    push_seconds(s, recent, 10);
    assert_int_equal(store_flush(s), 0);
    wait_maintenance(s, 2);
    assert_int_equal(count(f->path, "host_attribution", 0, INT64_MAX), 10);
    assert_int_equal(file_num(f->path, "SELECT sum(seconds) FROM host_attribution_minute"), 3);

    set_shift(DAY);
    assert_true(wall_s() >= now + DAY); /* the shim is in */
    wait_maintenance(s, 3);
    assert_int_equal(count(f->path, "host_attribution", recent, recent + 10), 10);
    assert_int_equal(count(f->path, "process_energy", recent, recent + 10), 10);
    assert_int_equal(count(f->path, "host_attribution_minute", now - DAY, INT64_MAX), 0);
    assert_int_equal(count(f->path, "process_energy_minute", now - DAY, INT64_MAX), 0);

    /* seconds after the step, then two days back */
    later = wall_s() - 5;
    push_seconds(s, later, 4);
    assert_int_equal(store_flush(s), 0);
    set_shift(-DAY);
    assert_true(wall_s() <= now - DAY + 600);
    wait_maintenance(s, 3);
    assert_int_equal(store_close(s), 0);
    assert_int_equal(count(f->path, "host_attribution", recent, recent + 10), 10);
    assert_int_equal(count(f->path, "host_attribution", later, later + 4), 4);
    assert_int_equal(count(f->path, "process_energy", recent, INT64_MAX), 14);
    assert_int_equal(file_num(f->path, "SELECT sum(seconds) FROM host_attribution_minute"), 3);
    assert_int_equal(count(f->path, "host_attribution_minute", now - DAY, INT64_MAX), 0);
    set_shift(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wallclock_slew_and_step_back),
        cmocka_unit_test(test_wallclock_step_forward_held_for_window),
        cmocka_unit_test(test_wallclock_many_steps_merge),
        cmocka_unit_test_setup_teardown(test_store_clock_steps, setup, teardown),
    };
    char dir[] = "/tmp/wattprof-clock-XXXXXX";
    int r;

    if (!mkdtemp(dir))
        return 1;
    snprintf(shift_path, sizeof(shift_path), "%s/shift", dir);
    if (setenv("CLOCK_SHIFT_FILE", shift_path, 1) < 0)
        return 1;
    r = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(shift_path);
    rmdir(dir);
    return r;
}
