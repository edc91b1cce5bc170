/* Online calibration (lib/model/calib.c) on synthetic series whose truth is
 * known: measured = IDLE + SCALE * dynamic + noise, the meter of the fake
 * RAPL rig (20 W + 30 W per busy CPU) seen through the generic model
 * (6.6 W per busy CPU). Steady load (idle cannot be told), step load, a
 * drifting idle, outliers, and a meter that stalls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "model/model.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define IDLE 20.0
#define PER_CPU 30.0
#define MODEL_PER_CPU 6.6
#define SCALE (PER_CPU / MODEL_PER_CPU)

/* Deterministic xorshift and Box-Muller so failures reproduce. */
static double rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return ((double)(*s >> 11) + 0.5) / 9007199254740992.0;
}

static double gauss(uint64_t *s)
{
    return sqrt(-2 * log(rnd(s))) * cos(2 * M_PI * rnd(s));
}

/* Busy CPUs at second t of a load that steps between 0.2 and 0.9 of a CPU
 * every 7 s, plus a burner of one CPU that runs 20 s in every 45: never
 * idle, and varied enough. */
static double varied_load(int t)
{
    return ((t / 7) % 2 ? 0.9 : 0.2) + ((t % 45) < 20 ? 1.0 : 0.0);
}

static calib *new_calib(void)
{
    calib *c = NULL;
    assert_int_equal(calib_new(NULL, &c), 0);
    return c;
}

/* Adds seconds [from, to) of `load` under idle `idle(t)`; noise_w is the
 * meter's per-second noise. */
static void feed(calib *c, int from, int to, double (*load)(int), double idle_w, double drift_w_s,
                 double noise_w, uint64_t *seed)
{
    for (int t = from; t < to; t++) {
        double busy = load(t);
        double dyn = MODEL_PER_CPU * busy * (1 + 0.01 * gauss(seed)); /* counters jitter too */
        double host = idle_w + drift_w_s * t + PER_CPU * busy + noise_w * gauss(seed);
        assert_int_equal(calib_add(c, t, dyn, host), 0);
    }
}

static void print_fit(const char *what, const calib_fit *f)
{
    printf("%s: idle %.3f +- %.3f W, scale %.3f, R2 %.4f, rows %zu (%zu rejected), spread %.2f W,"
           " %s\n",
           what, f->idle_w, f->idle_se_w, f->scale, f->r2, f->rows, f->rejected, f->spread_w,
           f->identifiable ? "identifiable" : f->why);
}

static double steady_load(int t)
{
    (void)t;
    return 1.4;
}

/* A node whose load never changes: the line has no lever arm, and the fit
 * must say so rather than extrapolate. */
static void test_steady_not_identifiable(void **state)
{
    (void)state;
    uint64_t seed = 7;
    calib *c = new_calib();
    calib_fit f;

    feed(c, 0, 600, steady_load, IDLE, 0, 0.3, &seed);
    assert_int_equal(calib_fit_now(c, &f), 0);
    print_fit("steady", &f);
    assert_false(f.identifiable);
    assert_non_null(f.why);
    assert_true(f.rows >= 500);
    calib_free(c);
}

/* Too few rows: not identifiable whatever they say. */
static void test_few_rows(void **state)
{
    (void)state;
    uint64_t seed = 3;
    calib *c = new_calib();
    calib_fit f;

    assert_int_equal(calib_fit_now(c, &f), 0);
    assert_false(f.identifiable);
    feed(c, 0, 20, varied_load, IDLE, 0, 0.3, &seed);
    assert_int_equal(calib_fit_now(c, &f), 0);
    print_fit("20 rows", &f);
    assert_false(f.identifiable);
    assert_string_equal(f.why, "too few measured seconds");
    calib_free(c);
}

/* Step load: within 60 s idle is found to 2 % and the scale to 2 %, and
 * the truth lies within 4 standard errors. */
static void test_step_load(void **state)
{
    (void)state;
    uint64_t seed = 11;
    calib *c = new_calib();
    calib_fit f;

    feed(c, 0, 60, varied_load, IDLE, 0, 0.5, &seed);
    assert_int_equal(calib_fit_now(c, &f), 0);
    print_fit("step, 60 s", &f);
    assert_true(f.identifiable);
    assert_true(fabs(f.idle_w - IDLE) <= 0.02 * IDLE);
    assert_true(fabs(f.idle_w - IDLE) <= 4 * f.idle_se_w);
    assert_true(fabs(f.scale - SCALE) <= 0.02 * SCALE);
    assert_true(f.r2 > 0.99);
    assert_int_equal(f.rows + f.rejected, 60);
    assert_true(f.spread_w > 5);
    calib_free(c);
}

/* Idle drifts by 4 W over an hour (a node warming up): the fit follows it
 * and ends within 0.6 W of the present idle, where one without forgetting
 * lags by more. */
static void test_drift(void **state)
{
    (void)state;
    const double drift = 4.0 / 3600;
    uint64_t seed = 5;
    calib *c = new_calib(), *flat = NULL;
    calib_config cfg;
    calib_fit f, g;

    calib_config_default(&cfg);
    cfg.half_life_s = 1e9;
    assert_int_equal(calib_new(&cfg, &flat), 0);
    feed(c, 0, 3600, varied_load, IDLE, drift, 0.3, &seed);
    seed = 5;
    feed(flat, 0, 3600, varied_load, IDLE, drift, 0.3, &seed);
    assert_int_equal(calib_fit_now(c, &f), 0);
    assert_int_equal(calib_fit_now(flat, &g), 0);
    print_fit("drift, forgetting", &f);
    print_fit("drift, none", &g);
    double now = IDLE + drift * 3599;
    assert_true(f.identifiable);
    assert_true(fabs(f.idle_w - now) <= 0.6);
    assert_true(fabs(f.idle_w - now) < fabs(g.idle_w - now));
    calib_free(c);
    calib_free(flat);
}

/* One second in ten is wrong by tens of watts (a reading that caught
 * another's energy, a counter glitch): the fit leaves them out and still
 * finds idle to 1 %, where plain least squares is several watts off. */
static void test_outliers(void **state)
{
    (void)state;
    uint64_t seed = 13;
    calib *c = new_calib();
    calib_config cfg;
    calib *plain = NULL;
    calib_fit f, g;
    size_t bad = 0;

    calib_config_default(&cfg);
    cfg.reject_k = 1e9; /* keeps every row */
    assert_int_equal(calib_new(&cfg, &plain), 0);
    for (int t = 0; t < 300; t++) {
        double busy = varied_load(t), dyn = MODEL_PER_CPU * busy;
        double host = IDLE + PER_CPU * busy + 0.3 * gauss(&seed);
        if (t % 10 == 3) {
            host += t % 20 == 3 ? 40 + 20 * rnd(&seed) : -(15 + 5 * rnd(&seed));
            bad++;
        }
        assert_int_equal(calib_add(c, t, dyn, host), 0);
        assert_int_equal(calib_add(plain, t, dyn, host), 0);
    }
    assert_int_equal(calib_fit_now(c, &f), 0);
    assert_int_equal(calib_fit_now(plain, &g), 0);
    print_fit("outliers, robust", &f);
    print_fit("outliers, plain", &g);
    assert_true(f.identifiable);
    assert_true(fabs(f.idle_w - IDLE) <= 0.01 * IDLE);
    assert_true(f.rejected >= bad);
    assert_true(f.rejected <= bad + 10);
    assert_true(fabs(g.idle_w - IDLE) > 1.0);
    calib_free(c);
    calib_free(plain);
}

/* A RAPL zone that stalls: seconds that read zero are refused, seconds the
 * daemon did not measure are simply missing, and the second the counter
 * catches up in (five seconds of energy in one) is an outlier. */
static void test_stall(void **state)
{
    (void)state;
    uint64_t seed = 17;
    calib *c = new_calib();
    calib_fit f;

    feed(c, 0, 100, varied_load, IDLE, 0, 0.3, &seed);
    for (int t = 100; t < 130; t++)
        assert_int_equal(calib_add(c, t, MODEL_PER_CPU * varied_load(t), 0), -EINVAL);
    assert_int_equal(calib_rows(c), 100);
    double caught = 0;
    for (int t = 130; t < 135; t++)
        caught += IDLE + PER_CPU * varied_load(t);
    assert_int_equal(calib_add(c, 135, MODEL_PER_CPU * varied_load(135), caught), 0);
    feed(c, 200, 260, varied_load, IDLE, 0, 0.3, &seed);
    assert_int_equal(calib_fit_now(c, &f), 0);
    print_fit("stall", &f);
    assert_true(f.identifiable);
    assert_true(f.rejected >= 1);
    assert_true(fabs(f.idle_w - IDLE) <= 0.01 * IDLE);
    calib_free(c);
}

static void test_bad_input(void **state)
{
    (void)state;
    calib_config cfg;
    calib *c = NULL;

    calib_config_default(&cfg);
    cfg.window = 2;
    assert_int_equal(calib_new(&cfg, &c), -EINVAL);
    calib_config_default(&cfg);
    cfg.half_life_s = 0;
    assert_int_equal(calib_new(&cfg, &c), -EINVAL);
    c = new_calib();
    assert_int_equal(calib_add(c, 0, NAN, 30), -EINVAL);
    assert_int_equal(calib_add(c, 0, -1, 30), -EINVAL);
    assert_int_equal(calib_add(c, 0, 1, INFINITY), -EINVAL);
    assert_int_equal(calib_add(c, NAN, 1, 30), -EINVAL);
    assert_int_equal(calib_rows(c), 0);
    assert_int_equal(calib_add(c, 0, 1, 30), 0);
    calib_reset(c);
    assert_int_equal(calib_rows(c), 0);
    calib_free(c);
}

/* The window keeps the newest rows: an idle that stepped from 20 to 30 W
 * more than a window ago is forgotten entirely. */
static void test_window(void **state)
{
    (void)state;
    uint64_t seed = 19;
    calib_config cfg;
    calib *c = NULL;
    calib_fit f;

    calib_config_default(&cfg);
    cfg.window = 120;
    assert_int_equal(calib_new(&cfg, &c), 0);
    feed(c, 0, 200, varied_load, IDLE, 0, 0.3, &seed);
    feed(c, 200, 320, varied_load, IDLE + 10, 0, 0.3, &seed);
    assert_int_equal(calib_rows(c), 120);
    assert_int_equal(calib_fit_now(c, &f), 0);
    print_fit("window", &f);
    assert_true(f.identifiable);
    assert_true(fabs(f.idle_w - (IDLE + 10)) <= 0.3);
    calib_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steady_not_identifiable),
        cmocka_unit_test(test_few_rows),
        cmocka_unit_test(test_step_load),
        cmocka_unit_test(test_drift),
        cmocka_unit_test(test_outliers),
        cmocka_unit_test(test_stall),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
