/* Attribution (lib/model/attrib.c): the conservation invariant on
 * randomized ticks, the exact split without RAPL, edge cases, and the
 * paper's 22 hardware events driven with synthetic counts through the
 * whole computation core: libpfm4 grouping, multiplexing scaling,
 * classification and attribution. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "model/model.h"
#include "sample/sample.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Deterministic xorshift so failures reproduce. */
static double rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (double)(*s >> 11) / 9007199254740992.0;
}

static model *make_model(size_t n_events, uint64_t *seed)
{
    model *m = model_new(n_events, 2);
    assert_non_null(m);
    for (size_t j = 0; j < n_events; j++) {
        m->scale_min[j] = 0;
        m->scale_max[j] = 1e9 * (1 + rnd(seed));
        m->classes[0].coef[j] = 10 * rnd(seed) - 1; /* some negative: d is clamped */
        m->classes[1].coef[j] = 10 * rnd(seed);
    }
    m->classes[0].intercept = 80;
    m->classes[1].intercept = 60;
    m->class_event = 0;
    m->class_threshold = 2e7;
    m->idle_power_w = 40;
    return m;
}

static void check_invariant(const attrib_tick *t, const attrib_proc *p, size_t n)
{
    double sum = t->idle_j + t->unattributed_j;
    for (size_t i = 0; i < n; i++) {
        assert_true(p[i].attributed_j >= 0);
        assert_true(p[i].dynamic_w >= 0);
        sum += p[i].attributed_j;
    }
    assert_true(t->idle_j >= 0 && t->unattributed_j >= 0);
    assert_true(fabs(sum - t->host_j) <= 1e-9 * fmax(1, t->host_j));
}

static void test_invariant_random(void **state)
{
    uint64_t seed = 88172645463325252ull;
    enum { N_EV = 6, MAX_PROCS = 50 };
    model *m = make_model(N_EV, &seed);
    double rates[MAX_PROCS][N_EV];
    attrib_proc p[MAX_PROCS];

    for (int iter = 0; iter < 20000; iter++) {
        size_t n = (size_t)(rnd(&seed) * MAX_PROCS);
        attrib_tick t = {.dt_s = 0.001 + rnd(&seed) * 0.1,
                         .measured = rnd(&seed) < 0.7,
                         .idle_w = rnd(&seed) * 100,
                         .untracked_dynamic_w = rnd(&seed) < 0.3 ? rnd(&seed) * 50 : 0};
        t.host_j = rnd(&seed) * 300 * t.dt_s; /* sometimes below idle */
        for (size_t i = 0; i < n; i++) {
            for (size_t j = 0; j < N_EV; j++)
                rates[i][j] = rnd(&seed) < 0.2 ? 0 : rnd(&seed) * 2e9;
            p[i] = (attrib_proc){.rates = rates[i], .klass = rnd(&seed) < 0.5};
        }
        assert_int_equal(attrib_tick_compute(m, &t, p, n), 0);
        check_invariant(&t, p, n);
    }
    model_free(m);
}

static void test_without_rapl_split_is_the_model(void **state)
{
    uint64_t seed = 7;
    model *m = make_model(3, &seed);
    double r0[] = {1e8, 2e8, 3e8}, r1[] = {5e8, 0, 1e9};
    attrib_proc p[] = {{.rates = r0, .klass = 1}, {.rates = r1, .klass = 1}};
    attrib_tick t = {.dt_s = 0.02, .idle_w = 40};

    assert_int_equal(attrib_tick_compute(m, &t, p, 2), 0);
    for (int i = 0; i < 2; i++) {
        assert_float_equal(p[i].attributed_j, p[i].dynamic_w * 0.02, 1e-12);
        assert_float_equal(p[i].standalone_j, model_power(m, 1, p[i].rates) * 0.02, 1e-12);
    }
    assert_float_equal(t.idle_j, 0.8, 1e-12);
    assert_float_equal(t.unattributed_j, 0, 1e-12);
    check_invariant(&t, p, 2);
    model_free(m);
}

/* Without a measurement, a calibration's scale multiplies the dynamic part
 * of the host estimate (idle does not scale), and processes get their
 * scaled dynamic power; activity no tracked process explains keeps its
 * share unattributed. The model's own estimate stays as it was. */
static void test_scale_and_untracked(void **state)
{
    uint64_t seed = 7;
    model *m = make_model(3, &seed);
    double r0[] = {1e8, 2e8, 3e8}, r1[] = {5e8, 0, 1e9};
    attrib_proc p[] = {{.rates = r0, .klass = 1}, {.rates = r1, .klass = 1}};
    attrib_tick t = {.dt_s = 0.02, .idle_w = 40, .dynamic_scale = 4.5, .untracked_dynamic_w = 3};

    assert_int_equal(attrib_tick_compute(m, &t, p, 2), 0);
    double d = p[0].dynamic_w + p[1].dynamic_w;
    assert_float_equal(t.host_j, 0.8 + 4.5 * (d + 3) * 0.02, 1e-12);
    assert_float_equal(t.modeled_host_j, 0.8 + (d + 3) * 0.02, 1e-12);
    for (int i = 0; i < 2; i++)
        assert_float_equal(p[i].attributed_j, 4.5 * p[i].dynamic_w * 0.02, 1e-12);
    assert_float_equal(t.unattributed_j, 4.5 * 3 * 0.02, 1e-12);
    check_invariant(&t, p, 2);
    /* Measured: the scale changes nothing; untracked keeps its share. */
    t.measured = true;
    t.host_j = 0.8 + (d + 3) * 0.02 * 2;
    assert_int_equal(attrib_tick_compute(m, &t, p, 2), 0);
    assert_float_equal(t.unattributed_j, 2 * 3 * 0.02, 1e-12);
    check_invariant(&t, p, 2);
    t.dynamic_scale = -1;
    assert_int_equal(attrib_tick_compute(m, &t, p, 2), -EINVAL);
    t.dynamic_scale = INFINITY;
    assert_int_equal(attrib_tick_compute(m, &t, p, 2), -EINVAL);
    model_free(m);
}

/* One calibration coefficient per event: a process's share follows its
 * events' powers weighed by the coefficients, so two processes with equal
 * model power split differently; energy still adds up, and the model's own
 * estimate (modeled_host_j) is unchanged. */
static void test_event_scale(void **state)
{
    model *m = model_new(2, 1);
    double r0[] = {1e9, 0}, r1[] = {0.5e9, 1e4}, scale[] = {4.5, 1.5};
    attrib_proc p[] = {{.rates = r0}, {.rates = r1}};
    attrib_tick t = {.dt_s = 0.02, .idle_w = 20, .measured = true, .untracked_dynamic_w = 0};

    assert_non_null(m);
    m->scale_max[0] = 1e9, m->scale_max[1] = 2e4;
    m->classes[0].coef[0] = 6.6, m->classes[0].coef[1] = 6.6; /* both 6.6 W at these rates */
    m->classes[0].intercept = 20;
    t.host_j = (20 + 4.5 * 6.6 + 4.5 * 3.3 + 1.5 * 3.3) * 0.02;
    assert_int_equal(attrib_tick_compute(m, &t, p, 2), 0);
    assert_float_equal(p[0].attributed_j, p[1].attributed_j, 1e-12); /* the model's split */
    double own = t.modeled_host_j;
    t.event_scale = scale;
    assert_int_equal(attrib_tick_compute(m, &t, p, 2), 0);
    assert_float_equal(p[0].attributed_j, 4.5 * 6.6 * 0.02, 1e-12);
    assert_float_equal(p[1].attributed_j, (4.5 * 3.3 + 1.5 * 3.3) * 0.02, 1e-12);
    assert_float_equal(t.modeled_host_j, own, 1e-12);
    check_invariant(&t, p, 2);
    /* Without a measurement the coefficients give measured watts. */
    t.measured = false;
    assert_int_equal(attrib_tick_compute(m, &t, p, 2), 0);
    assert_float_equal(t.host_j, (20 + 4.5 * 6.6 + 4.5 * 3.3 + 1.5 * 3.3) * 0.02, 1e-12);
    check_invariant(&t, p, 2);
    model_free(m);
}

/* Processes that ask for their per-event parts get model_event_power's,
 * and the same attribution, bit for bit, as those that do not. */
static void test_event_parts(void **state)
{
    uint64_t seed = 4242;
    enum { N_EV = 5, N = 8 };
    model *m = make_model(N_EV, &seed);
    double rates[N][N_EV], parts[N][N_EV], want[N_EV], scale[N_EV];
    attrib_proc plain[N], with[N];

    m->scale_max[3] = m->scale_min[3]; /* a zero-width event has no part */
    for (size_t j = 0; j < N_EV; j++)
        scale[j] = 0.5 + 4 * rnd(&seed);
    for (int pass = 0; pass < 2; pass++) {
        attrib_tick t = {.dt_s = 0.02,
                         .measured = true,
                         .host_j = 5,
                         .idle_w = 30,
                         .event_scale = pass ? scale : NULL};
        attrib_tick u = t;
        for (size_t i = 0; i < N; i++) {
            for (size_t j = 0; j < N_EV; j++)
                rates[i][j] = rnd(&seed) * 2e9;
            plain[i] = (attrib_proc){.rates = rates[i], .klass = (int)(i % 2)};
            with[i] = plain[i];
            with[i].event_w = parts[i];
        }
        assert_int_equal(attrib_tick_compute(m, &t, plain, N), 0);
        assert_int_equal(attrib_tick_compute(m, &u, with, N), 0);
        assert_memory_equal(&t.attributed_j, &u.attributed_j, sizeof(double));
        assert_memory_equal(&t.modeled_host_j, &u.modeled_host_j, sizeof(double));
        for (size_t i = 0; i < N; i++) {
            model_event_power(m, with[i].klass, rates[i], want);
            assert_memory_equal(parts[i], want, sizeof(want));
            assert_float_equal(parts[i][3], 0, 0);
            assert_memory_equal(&plain[i].dynamic_w, &with[i].dynamic_w, sizeof(double));
            assert_memory_equal(&plain[i].attributed_j, &with[i].attributed_j, sizeof(double));
            double d = model_dynamic_power_scaled(m, with[i].klass, rates[i], t.event_scale);
            assert_memory_equal(&d, &with[i].dynamic_w, sizeof(double));
        }
        check_invariant(&u, with, N);
    }
    model_free(m);
}

static void test_edges(void **state)
{
    uint64_t seed = 9;
    model *m = make_model(2, &seed);
    double zero[] = {0, 0};
    attrib_proc p = {.rates = zero, .klass = 1};
    attrib_tick t = {.dt_s = 0.02, .measured = true, .host_j = 2.0, .idle_w = 40};

    /* Nobody active: everything above idle is unattributed. */
    assert_int_equal(attrib_tick_compute(m, &t, &p, 1), 0);
    assert_float_equal(t.idle_j, 0.8, 1e-12);
    assert_float_equal(t.unattributed_j, 1.2, 1e-12);
    /* Host measured below idle: idle takes it all, nothing negative. */
    t.host_j = 0.5;
    assert_int_equal(attrib_tick_compute(m, &t, &p, 1), 0);
    assert_float_equal(t.idle_j, 0.5, 1e-12);
    check_invariant(&t, &p, 1);
    /* Bad input is refused, not propagated. */
    t.dt_s = 0;
    assert_int_equal(attrib_tick_compute(m, &t, &p, 1), -EINVAL);
    t.dt_s = 0.02;
    t.host_j = NAN;
    assert_int_equal(attrib_tick_compute(m, &t, &p, 1), -EINVAL);
    p.klass = 2;
    t.host_j = 1;
    assert_int_equal(attrib_tick_compute(m, &t, &p, 1), -EINVAL);
    /* Input no attribution can hold: -ERANGE, which the sampler stores as
     * unattributed (a recording's dt of 2^62 ns, a delta of 1e308). */
    p.klass = 1;
    t.dt_s = 0x1p62 / 1e9;
    assert_int_equal(attrib_tick_compute(m, &t, &p, 1), -ERANGE);
    t.dt_s = 0.02;
    t.host_j = 1e308;
    assert_int_equal(attrib_tick_compute(m, &t, &p, 1), -ERANGE);
    t.host_j = 1;
    double huge[] = {1e308, 1e308};
    p.rates = huge;
    assert_int_equal(attrib_tick_compute(m, &t, &p, 1), -ERANGE);
    model_free(m);
}

/* The 22 events the energy paper kept. */
static const char *paper_events[] = {"cycles",
                                     "instructions",
                                     "cache-references",
                                     "cache-misses",
                                     "bus-cycles",
                                     "branches",
                                     "branch-misses",
                                     "ref-cycles",
                                     "stalled-cycles-backend",
                                     "stalled-cycles-frontend",
                                     "L1-dcache-loads",
                                     "L1-dcache-load-misses",
                                     "dTLB-loads",
                                     "LLC-loads",
                                     "LLC-load-misses",
                                     "LLC-stores",
                                     "cpu-clock",
                                     "cs",
                                     "migrations",
                                     "L1-dcache-prefetch-misses",
                                     "branch-load-misses",
                                     "branch-loads"};
#define N_PAPER 22

static void test_paper_events_group(void **state)
{
    sample_eventset *es;
    char err[UTIL_ERRLEN];
    unsigned per_group[64] = {0};

    assert_int_equal(events_encode(paper_events, N_PAPER, &es, err, sizeof(err)), 0);
    assert_int_equal(es->n, N_PAPER);
    assert_true(es->n_groups >= 3); /* 19 hardware events never fit one PMU */
    for (size_t i = 0; i < es->n; i++) {
        per_group[es->ev[i].group]++;
        bool sw = strcmp(paper_events[i], "cpu-clock") == 0 || strcmp(paper_events[i], "cs") == 0 ||
                  strcmp(paper_events[i], "migrations") == 0;
        assert_int_equal(es->ev[i].software, sw);
        if (sw)
            assert_int_equal(es->ev[i].group, es->n_groups - 1);
    }
    for (unsigned g = 0; g + 1 < es->n_groups; g++)
        assert_true(per_group[g] >= 1 && per_group[g] <= es->hw_counters);
    events_free(es);
}

/* Per group: raw readings as the kernel would return them when the group is
 * on the PMU `share` of the time, for true counts `truth`. */
static void synth_group(const sample_eventset *es, unsigned g, double share, const double *truth,
                        uint64_t *prev, uint64_t *now, size_t *event, uint64_t dt_ns)
{
    size_t k = 0;
    now[1] = prev[1] + dt_ns;
    now[2] = prev[2] + (uint64_t)llround((double)dt_ns * share);
    double counted = (double)(now[2] - prev[2]) / (double)dt_ns;
    for (size_t i = 0; i < es->n; i++)
        if (es->ev[i].group == g) {
            event[k] = i;
            now[3 + k] = prev[3 + k] + (uint64_t)llround(truth[i] * counted);
            k++;
        }
    now[0] = prev[0] = k;
}

static void test_paper_events_through_the_core(void **state)
{
    sample_eventset *es;
    char err[UTIL_ERRLEN];
    uint64_t seed = 42;
    const uint64_t dt_ns = 20000000;
    const double dt = 0.02;
    int miss;

    assert_int_equal(events_encode(paper_events, N_PAPER, &es, err, sizeof(err)), 0);
    miss = events_find(es, "cache-misses");
    model *m = make_model(N_PAPER, &seed);
    m->class_event = miss;
    uint64_t raw[2][8][3 + 32], next[3 + 32];
    memset(raw, 0, sizeof(raw));
    double cumulative[2] = {0, 0};
    int seen_class[2][2] = {{0}};

    for (int tick = 0; tick < 200; tick++) {
        double truth[2][N_PAPER], scaled[2][N_PAPER], rates[2][N_PAPER];
        attrib_proc p[2];
        for (int proc = 0; proc < 2; proc++) {
            uint64_t en[N_PAPER] = {0}, run[N_PAPER] = {0};
            size_t event[32];
            for (size_t i = 0; i < N_PAPER; i++)
                truth[proc][i] = floor(rnd(&seed) * 1e7);
            /* Process 0 misses a lot and crosses the 2e7 threshold. */
            truth[proc][miss] = proc == 0 ? 4e5 : 1e3;
            memset(scaled[proc], 0, sizeof(scaled[proc]));
            for (unsigned g = 0; g < es->n_groups; g++) {
                double share = 0.25 + 0.75 * (double)(g + 1) / es->n_groups;
                synth_group(es, g, share, truth[proc], raw[proc][g], next, event, dt_ns);
                counters_scale_group(raw[proc][g], next, event, scaled[proc], en, run);
                memcpy(raw[proc][g], next, sizeof(next));
            }
            for (size_t i = 0; i < N_PAPER; i++) {
                /* Scaling recovers the true count to the rounding of the
                 * synthetic readings. */
                assert_true(fabs(scaled[proc][i] - truth[proc][i]) <= 4 + 1e-6 * truth[proc][i]);
                assert_true(run[i] <= en[i]);
                rates[proc][i] = scaled[proc][i] / dt;
            }
            cumulative[proc] += scaled[proc][miss];
            p[proc] =
                (attrib_proc){.rates = rates[proc], .klass = model_classify(m, cumulative[proc])};
            seen_class[proc][p[proc].klass] = 1;
        }
        attrib_tick t = {.dt_s = dt, .measured = true, .host_j = 150 * dt, .idle_w = 40};
        assert_int_equal(attrib_tick_compute(m, &t, p, 2), 0);
        check_invariant(&t, p, 2);
    }
    /* Process 0 started low-miss and became high-miss; process 1 never did. */
    assert_true(seen_class[0][0] && seen_class[0][1]);
    assert_true(seen_class[1][1] && !seen_class[1][0]);
    model_free(m);
    events_free(es);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invariant_random),
        cmocka_unit_test(test_without_rapl_split_is_the_model),
        cmocka_unit_test(test_scale_and_untracked),
        cmocka_unit_test(test_event_scale),
        cmocka_unit_test(test_event_parts),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_paper_events_group),
        cmocka_unit_test(test_paper_events_through_the_core),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
