/* One coefficient per event (lib/model/calib_events.c) on synthetic series
 * whose truth is known: measured = IDLE + S_CPU * P_cpu + S_EV * P_ev +
 * noise, P_cpu and P_ev the model's dynamic power through task-clock and
 * through a software event. Distinct events are recovered; collinear ones,
 * or events the single scale already explains, fall back to it and say
 * why; idle drift and outliers do not throw the coefficients off. */
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
#define S_CPU 4.5 /* measured W per model W through task-clock */
#define S_EV 1.5  /* ... and through the event */

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

/* Model watts through task-clock at second t: 6.6 W per busy CPU of a load
 * stepping between 0.2 and 0.9 CPU every 7 s plus a burner 20 s in 45. */
static double cpu_power(int t)
{
    return 6.6 * (((t / 7) % 2 ? 0.9 : 0.2) + ((t % 45) < 20 ? 1.0 : 0.0));
}

/* Model watts through the event: its own rhythm (steps every 11 s and a
 * burst 10 s in 31), so the two columns can be told apart. */
static double event_power(int t)
{
    return ((t / 11) % 3) * 2.0 + ((t % 31) < 10 ? 5.0 : 0.0);
}

/* The event that follows the CPU (collinear). */
static double event_follows_cpu(int t)
{
    return 0.5 * cpu_power(t);
}

typedef struct series {
    double (*ev)(int t);
    double s_ev, idle_drift_w_s, noise_w;
    int outlier_every; /* every n-th row is 40 W off; 0: none */
} series;

static void feed(calib_ev *c, int from, int to, const series *sr, uint64_t *seed, size_t *bad)
{
    for (int t = from; t < to; t++) {
        double x[2] = {cpu_power(t) * (1 + 0.01 * gauss(seed)),
                       sr->ev(t) * (1 + 0.01 * gauss(seed))};
        double host = IDLE + sr->idle_drift_w_s * t + S_CPU * cpu_power(t) + sr->s_ev * sr->ev(t) +
                      sr->noise_w * gauss(seed);
        if (sr->outlier_every && t % sr->outlier_every == 3) {
            host += 40;
            (*bad)++;
        }
        assert_int_equal(calib_ev_add(c, t, x, host), 0);
    }
}

static calib_ev *fit_series(const series *sr, int seconds, const calib_ev_config *cfg,
                            calib_ev_fit *f, size_t *bad)
{
    calib_ev *c = NULL;
    uint64_t seed = 17;
    size_t nbad = 0;

    assert_int_equal(calib_ev_new(cfg, 2, &c), 0);
    feed(c, 0, seconds, sr, &seed, &nbad);
    assert_int_equal(calib_ev_fit_now(c, f), 0);
    printf(
        "idle %.3f +- %.3f W, scale %.3f, coef %.3f %.3f, alpha %g, cv rmse %.3f (single %.3f) W, "
        "min eig %.3f, rows %zu (%zu rejected): %s\n",
        f->idle_w, f->idle_se_w, f->scale, f->coef[0], f->coef[1], f->alpha, f->cv_rmse_w,
        f->cv_rmse_single_w, f->min_eig, f->rows, f->rejected, f->per_event ? "per event" : f->why);
    if (bad)
        *bad = nbad;
    return c;
}

/* Two events with their own rhythms and different true scales: recovered
 * to 3 %, idle to 2 %, by a finite penalty. */
static void test_distinct(void **state)
{
    (void)state;
    series sr = {.ev = event_power, .s_ev = S_EV, .noise_w = 0.5};
    calib_ev_fit f;
    calib_ev *c = fit_series(&sr, 300, NULL, &f, NULL);

    assert_true(f.per_event);
    assert_null(f.why);
    assert_true(isfinite(f.alpha));
    assert_true(fabs(f.coef[0] - S_CPU) <= 0.03 * S_CPU);
    assert_true(fabs(f.coef[1] - S_EV) <= 0.03 * S_EV);
    assert_true(fabs(f.idle_w - IDLE) <= 0.02 * IDLE);
    assert_true(f.cv_rmse_w < 0.95 * f.cv_rmse_single_w);
    /* Idle is told by this fit alone, the truth within 4 standard errors. */
    assert_true(f.idle_identified);
    assert_true(f.idle_se_w > 0 && f.idle_se_w < 0.5);
    assert_true(fabs(f.idle_w - IDLE) <= 4 * f.idle_se_w);
    /* Each coefficient's standard error: small, and the truth within 4. */
    assert_true(f.coef_se[0] > 0 && f.coef_se[0] < 0.05 * S_CPU);
    assert_true(f.coef_se[1] > 0 && f.coef_se[1] < 0.05 * S_EV);
    assert_true(fabs(f.coef[0] - S_CPU) <= 4 * f.coef_se[0]);
    assert_true(fabs(f.coef[1] - S_EV) <= 4 * f.coef_se[1]);
    /* The single scale lies between the two. */
    assert_true(f.scale > S_EV && f.scale < S_CPU);
    calib_ev_free(c);
}

/* An event that only follows the CPU: nothing tells the coefficients apart,
 * so the single scale stands, and the fit says why. */
static void test_collinear_falls_back(void **state)
{
    (void)state;
    series sr = {.ev = event_follows_cpu, .s_ev = S_EV, .noise_w = 0.5};
    calib_ev_fit f;
    calib_ev *c = fit_series(&sr, 300, NULL, &f, NULL);

    assert_false(f.per_event);
    assert_string_equal(f.why, "the events moved together");
    /* host = IDLE + (S_CPU + 0.5 S_EV) P_cpu = IDLE + s (1.5 P_cpu) */
    double s = (S_CPU + 0.5 * S_EV) / 1.5;
    assert_true(fabs(f.scale - s) <= 0.02 * s);
    assert_true(f.coef[0] == f.scale && f.coef[1] == f.scale);
    assert_true(fabs(f.idle_w - IDLE) <= 0.02 * IDLE);
    calib_ev_free(c);
}

/* Events that both follow the single scale: one coefficient each predicts
 * no better, and the single scale stands. */
static void test_same_scale_falls_back(void **state)
{
    (void)state;
    series sr = {.ev = event_power, .s_ev = S_CPU, .noise_w = 0.5};
    calib_ev_fit f;
    calib_ev *c = fit_series(&sr, 300, NULL, &f, NULL);

    assert_false(f.per_event);
    assert_string_equal(f.why, "one coefficient per event predicts no better than one scale");
    assert_true(fabs(f.scale - S_CPU) <= 0.02 * S_CPU);
    calib_ev_free(c);
}

static double no_event(int t)
{
    (void)t;
    return 0;
}

/* An event no one triggers keeps the single scale (fixed), and with one
 * event varying there is nothing per event to fit. */
static void test_fixed_column(void **state)
{
    (void)state;
    series sr = {.ev = no_event, .s_ev = S_EV, .noise_w = 0.5};
    calib_ev_fit f;
    calib_ev *c = fit_series(&sr, 300, NULL, &f, NULL);

    assert_false(f.per_event);
    assert_string_equal(f.why, "fewer than two events varied");
    assert_true(f.fixed[1] && !f.fixed[0]);
    assert_true(isnan(f.coef_se[0]) && isnan(f.coef_se[1])); /* no per-event fit */
    assert_true(fabs(f.scale - S_CPU) <= 0.02 * S_CPU);
    calib_ev_free(c);
}

/* Too few rows: no fit. */
static void test_few_rows(void **state)
{
    (void)state;
    series sr = {.ev = event_power, .s_ev = S_EV, .noise_w = 0.5};
    calib_ev_fit f;
    calib_ev *c = fit_series(&sr, 40, NULL, &f, NULL);

    assert_false(f.per_event);
    assert_string_equal(f.why, "too few measured seconds");
    calib_ev_free(c);
}

/* Idle drifts by 4 W over an hour: the window and the forgetting follow it;
 * the coefficients stay within 3 % and idle within 0.6 W of the present. */
static void test_drift(void **state)
{
    (void)state;
    const double drift = 4.0 / 3600;
    series sr = {.ev = event_power, .s_ev = S_EV, .idle_drift_w_s = drift, .noise_w = 0.3};
    calib_ev_fit f;
    calib_ev *c = fit_series(&sr, 3600, NULL, &f, NULL);

    assert_true(f.per_event);
    assert_true(fabs(f.coef[0] - S_CPU) <= 0.03 * S_CPU);
    assert_true(fabs(f.coef[1] - S_EV) <= 0.03 * S_EV);
    assert_true(fabs(f.idle_w - (IDLE + drift * 3599)) <= 0.6);
    assert_int_equal(calib_ev_rows(c), 600);
    calib_ev_free(c);
}

/* One row in ten 40 W off: left out, coefficients within 3 %, where a fit
 * that keeps them all is further off. */
static void test_outliers(void **state)
{
    (void)state;
    series sr = {.ev = event_power, .s_ev = S_EV, .noise_w = 0.5, .outlier_every = 10};
    calib_ev_config cfg;
    calib_ev_fit f, g;
    size_t bad = 0;
    calib_ev *c = fit_series(&sr, 400, NULL, &f, &bad);

    assert_true(f.per_event);
    assert_true(f.rejected >= bad);
    assert_true(f.rejected <= bad + 10);
    assert_true(fabs(f.coef[0] - S_CPU) <= 0.03 * S_CPU);
    assert_true(fabs(f.coef[1] - S_EV) <= 0.03 * S_EV);
    assert_true(fabs(f.idle_w - IDLE) <= 0.02 * IDLE);
    calib_ev_config_default(&cfg);
    cfg.reject_k = 1e9;
    calib_ev *plain = fit_series(&sr, 400, &cfg, &g, NULL);
    assert_true(fabs(g.idle_w - IDLE) > fabs(f.idle_w - IDLE));
    assert_true(f.idle_identified);
    assert_false(g.idle_identified); /* the outliers leave its idle too uncertain */
    calib_ev_free(c);
    calib_ev_free(plain);
}

static void test_bad_input(void **state)
{
    (void)state;
    calib_ev_config cfg;
    calib_ev *c = NULL;
    double x[2] = {1, 1};

    assert_int_equal(calib_ev_new(NULL, 0, &c), -EINVAL);
    assert_int_equal(calib_ev_new(NULL, CALIB_EV_MAX + 1, &c), -EINVAL);
    calib_ev_config_default(&cfg);
    cfg.folds = 1;
    assert_int_equal(calib_ev_new(&cfg, 2, &c), -EINVAL);
    assert_int_equal(calib_ev_new(NULL, 2, &c), 0);
    assert_int_equal(calib_ev_add(c, 0, x, 0), -EINVAL);
    assert_int_equal(calib_ev_add(c, 0, x, NAN), -EINVAL);
    x[1] = -1;
    assert_int_equal(calib_ev_add(c, 0, x, 30), -EINVAL);
    x[1] = INFINITY;
    assert_int_equal(calib_ev_add(c, 0, x, 30), -EINVAL);
    assert_int_equal(calib_ev_rows(c), 0);
    assert_int_equal(calib_ev_cols(c), 2);
    calib_ev_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distinct),
        cmocka_unit_test(test_collinear_falls_back),
        cmocka_unit_test(test_same_scale_falls_back),
        cmocka_unit_test(test_fixed_column),
        cmocka_unit_test(test_few_rows),
        cmocka_unit_test(test_drift),
        cmocka_unit_test(test_outliers),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
