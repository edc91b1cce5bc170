/* Unit tests for learn/rank.c: the paper's walk-through with dictated
 * comparison outcomes, the published single-step data, the convergence
 * criterion, the convergence loop, the FLOPs-anomaly test and the edge
 * cases of ranking with ties. */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
// clang-format on

#include "learn/learn.h"
#include "util/util.h"

#include <errno.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Comparison outcomes dictated by a table ------------------------------ */

/* outcome[a][b] = -1 when a is faster than b, +1 slower, 0 equivalent;
 * 9 marks a pair the test did not expect to be asked. */
struct dictated {
    int outcome[4][4];
    int asked;
};

static int dictated_cmp(size_t a, size_t b, const rank_range *r, void *ctx)
{
    struct dictated *d = ctx;

    d->asked++;
    assert_int_not_equal(d->outcome[a][b], 9);
    return d->outcome[a][b];
}

/* Records "a faster than b" (sign -1) or "a ~ b" (sign 0) both ways. */
static void dictate(struct dictated *d, size_t a, size_t b, int sign)
{
    d->outcome[a][b] = sign;
    d->outcome[b][a] = -sign;
}

static void test_paper_walkthrough(void **state)
{
    enum { ALG1, ALG2, ALG3, ALG4 };
    struct dictated d;
    const size_t h0[] = {ALG1, ALG2, ALG3, ALG4};
    size_t order[4];
    int rank[4];

    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            d.outcome[a][b] = 9;
    d.asked = 0;
    /* The paper's outcomes: alg2 < alg1, alg1 ~ alg3, alg4 < alg3,
     * alg4 < alg1, alg4 ~ alg2; no other pair may be asked. */
    dictate(&d, ALG2, ALG1, -1);
    dictate(&d, ALG1, ALG3, 0);
    dictate(&d, ALG4, ALG3, -1);
    dictate(&d, ALG4, ALG1, -1);
    dictate(&d, ALG4, ALG2, 0);
    assert_int_equal(rank_sort(4, h0, &rank_report_range, dictated_cmp, &d, order, rank), 0);
    assert_int_equal(order[0], ALG2);
    assert_int_equal(order[1], ALG4);
    assert_int_equal(order[2], ALG1);
    assert_int_equal(order[3], ALG3);
    assert_int_equal(rank[ALG2], 1);
    assert_int_equal(rank[ALG4], 1);
    assert_int_equal(rank[ALG1], 2);
    assert_int_equal(rank[ALG3], 2);
    /* Six comparisons for the three passes, three to assign ranks. */
    assert_int_equal(d.asked, 9);
}

/* ---- Published data --------------------------------------------------------- */

static void load_published(rank_sample s[4], char names[4][8])
{
    const char *dir = getenv("TEST_DATA");
    char path[1024];
    json_object *j;
    size_t v = 0;

    assert_non_null(dir); /* TEST_DATA, set by tests/meson.build */
    snprintf(path, sizeof(path), "%s/ranking-single-step.json", dir);
    j = json_object_from_file(path);
    assert_non_null(j);
    json_object_object_foreach(j, key, arr)
    {
        size_t n = json_object_array_length(arr);
        double *x = malloc(n * sizeof(*x));
        assert_true(v < 4);
        for (size_t i = 0; i < n; i++)
            x[i] = json_object_get_double(json_object_array_get_idx(arr, i));
        assert_int_equal(rank_sample_init(&s[v], x, n), 0);
        snprintf(names[v++], 8, "%s", key);
        free(x);
    }
    json_object_put(j);
    assert_int_equal(v, 4);
}

static void test_published_single_step(void **state)
{
    rank_sample s[4];
    char names[4][8];
    const size_t h0[] = {0, 1, 2, 3};
    const double want[] = {1.25, 1.375, 1.25, 1.0}; /* alg1..alg4, data README */
    int ranks[RANK_N_DEFAULT_RANGES * 4], rank[4];
    double mean[4];
    size_t order[4];

    load_published(s, names);
    assert_string_equal(names[0], "alg1");
    assert_string_equal(names[3], "alg4");
    assert_int_equal(rank_mean(4, h0, rank_default_ranges, RANK_N_DEFAULT_RANGES, rank_cmp_samples,
                               s, ranks, mean),
                     0);
    for (int v = 0; v < 4; v++)
        assert_float_equal(mean[v], want[v], 1e-12);
    assert_int_equal(rank_sort(4, h0, &rank_report_range, rank_cmp_samples, s, order, rank), 0);
    for (int v = 0; v < 4; v++)
        assert_int_equal(rank[v], 1);
    /* Range 7 is (65,35): all three of alg1..alg3 are equivalent to each
     * other there, so they share rank 2 behind alg4 (the public Python
     * implementation gives alg3 3 here). */
    assert_int_equal(ranks[6 * 4 + 0], 2);
    assert_int_equal(ranks[6 * 4 + 1], 2);
    assert_int_equal(ranks[6 * 4 + 2], 2);
    assert_int_equal(ranks[6 * 4 + 3], 1);
    for (int v = 0; v < 4; v++)
        rank_sample_clear(&s[v]);
}

/* ---- Quantiles and outliers ------------------------------------------------ */

static void test_quantile_linear(void **state)
{
    const double x[] = {1, 2, 3, 4};

    /* numpy.quantile([1,2,3,4], q): h = 3q between neighbours. */
    assert_float_equal(rank_quantile(x, 4, 0.1), 1.3, 1e-12);
    assert_float_equal(rank_quantile(x, 4, 0.95), 3.85, 1e-12);
    assert_float_equal(rank_quantile(x, 4, 0.5), 2.5, 1e-12);
    assert_float_equal(rank_quantile(x, 4, 1.0), 4, 0);
    assert_float_equal(rank_quantile(x, 1, 0.3), 1, 0);
}

static void test_outliers_strict_fences(void **state)
{
    /* Q1 = 2, Q3 = 4, IQR = 2: fences -1 and 7. A value on a fence stays. */
    const double on_fence[] = {7, 1, 2, 3, 4};
    const double beyond[] = {1, 2, 3, 4, 7.001};
    rank_sample s;

    assert_int_equal(rank_sample_init(&s, on_fence, 5), 0);
    assert_float_equal(s.q1, 2, 0);
    assert_float_equal(s.q3, 4, 0);
    assert_float_equal(s.hi, 7, 0);
    assert_int_equal(s.n, 5);
    assert_float_equal(s.v[0], 1, 0);
    assert_float_equal(s.v[4], 7, 0);
    rank_sample_clear(&s);
    assert_int_equal(rank_sample_init(&s, beyond, 5), 0);
    assert_int_equal(s.n, 4);
    assert_int_equal(s.n_all, 5);
    assert_float_equal(s.v[3], 4, 0);
    rank_sample_clear(&s);
    assert_int_equal(rank_sample_init(&s, beyond, 0), -EINVAL);
}

static void test_outlier_changes_outcome(void **state)
{
    /* b's one huge value would stretch its 95th percentile past a's 5th;
     * removed as an outlier, b is plainly faster. */
    const double a[] = {10, 10.1, 10.2, 10.3, 10.4, 10.5, 10.6, 10.7};
    const double b[] = {5, 5.1, 5.2, 5.3, 5.4, 5.5, 5.6, 50};
    const rank_range wide = {95, 5};
    rank_sample sa, sb;

    rank_sample_init(&sa, a, 8);
    rank_sample_init(&sb, b, 8);
    assert_int_equal(sb.n, 7);
    assert_int_equal(rank_compare(&sb, &sa, &wide), -1);
    assert_int_equal(rank_compare(&sa, &sb, &wide), 1);
    rank_sample_clear(&sa);
    rank_sample_clear(&sb);
}

/* ---- Edge cases -------------------------------------------------------------- */

/* Variant v's values: base[v] + spread * (0, 1, ..., n-1)/(n-1). */
static void make_samples(rank_sample *s, size_t p, const double *base, double spread, size_t n)
{
    double *x = malloc(n * sizeof(*x));

    for (size_t v = 0; v < p; v++) {
        for (size_t i = 0; i < n; i++)
            x[i] = base[v] + spread * (double)i / (double)(n - 1);
        assert_int_equal(rank_sample_init(&s[v], x, n), 0);
    }
    free(x);
}

static void clear_samples(rank_sample *s, size_t p)
{
    for (size_t v = 0; v < p; v++)
        rank_sample_clear(&s[v]);
}

static void test_ties_and_all_equivalent(void **state)
{
    const double base[] = {1, 1, 1, 1, 1};
    const size_t h0[] = {3, 1, 4, 0, 2};
    rank_sample s[5];
    double mean[5];
    int ranks[RANK_N_DEFAULT_RANGES * 5];

    make_samples(s, 5, base, 0.5, 20);
    assert_int_equal(rank_mean(5, h0, rank_default_ranges, RANK_N_DEFAULT_RANGES, rank_cmp_samples,
                               s, ranks, mean),
                     0);
    for (int v = 0; v < 5; v++)
        assert_float_equal(mean[v], 1, 0);
    for (int k = 0; k < RANK_N_DEFAULT_RANGES * 5; k++)
        assert_int_equal(ranks[k], 1);
    clear_samples(s, 5);
}

static void test_all_distinct_reversed(void **state)
{
    /* Cleanly separated, h0 in the worst order: ranks 1..5 by speed (the
     * public implementation gives 1, 2, 2 for three of these). */
    const double base[] = {1, 2, 3, 4, 5};
    const size_t h0[] = {4, 3, 2, 1, 0};
    rank_sample s[5];
    size_t order[5];
    int rank[5];
    double mean[5];

    make_samples(s, 5, base, 0.5, 20);
    assert_int_equal(rank_sort(5, h0, &rank_report_range, rank_cmp_samples, s, order, rank), 0);
    for (int v = 0; v < 5; v++) {
        assert_int_equal(order[v], v);
        assert_int_equal(rank[v], v + 1);
    }
    assert_int_equal(rank_mean(5, h0, rank_default_ranges, RANK_N_DEFAULT_RANGES, rank_cmp_samples,
                               s, NULL, mean),
                     0);
    for (int v = 0; v < 5; v++)
        assert_float_equal(mean[v], v + 1, 0);
    clear_samples(s, 5);
}

static void test_non_transitive_triple(void **state)
{
    /* a = [1,2], b = [1.4,2.4], c = [1.8,2.8]: a ~ b and b ~ c overlap at
     * (75,25) (1.75 >= 1.65, 2.15 >= 2.05), yet a is faster than c
     * (1.75 < 2.05). The sort only compares neighbours,
     * so the classes depend on h0, as the method accepts. */
    const double base[] = {1, 1.4, 1.8};
    const size_t abc[] = {0, 1, 2}, acb[] = {0, 2, 1};
    rank_sample s[3];
    size_t order[3];
    int rank[3];

    make_samples(s, 3, base, 1.0, 21);
    assert_int_equal(rank_compare(&s[0], &s[1], &rank_report_range), 0);
    assert_int_equal(rank_compare(&s[1], &s[2], &rank_report_range), 0);
    assert_int_equal(rank_compare(&s[0], &s[2], &rank_report_range), -1);
    rank_sort(3, abc, &rank_report_range, rank_cmp_samples, s, order, rank);
    assert_int_equal(rank[0], 1);
    assert_int_equal(rank[1], 1);
    assert_int_equal(rank[2], 1);
    rank_sort(3, acb, &rank_report_range, rank_cmp_samples, s, order, rank);
    assert_int_equal(order[0], 0);
    assert_int_equal(order[1], 2);
    assert_int_equal(order[2], 1);
    assert_int_equal(rank[0], 1);
    assert_int_equal(rank[2], 2);
    assert_int_equal(rank[1], 2);
    clear_samples(s, 3);
}

static void test_bad_h0(void **state)
{
    rank_sample s[3];
    const double base[] = {1, 2, 3};
    const size_t dup[] = {0, 0, 2}, out_of_range[] = {0, 1, 3};
    size_t order[3];
    int rank[3];

    make_samples(s, 3, base, 0.1, 5);
    assert_int_equal(rank_sort(3, dup, &rank_report_range, rank_cmp_samples, s, order, rank),
                     -EINVAL);
    assert_int_equal(
        rank_sort(3, out_of_range, &rank_report_range, rank_cmp_samples, s, order, rank), -EINVAL);
    clear_samples(s, 3);
}

static void test_h0_by_key_stable(void **state)
{
    const double key[] = {3, 1, 2, 1};
    size_t h0[4];

    assert_int_equal(rank_h0_by_key(4, key, h0), 0);
    assert_int_equal(h0[0], 1);
    assert_int_equal(h0[1], 3);
    assert_int_equal(h0[2], 2);
    assert_int_equal(h0[3], 0);
}

/* ---- Quantile ranges ---------------------------------------------------------- */

static void test_parse_ranges(void **state)
{
    rank_range *r;
    size_t n;
    char err[UTIL_ERRLEN];

    assert_int_equal(rank_parse_ranges("55:45,95:5,75:25", &r, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 3);
    assert_float_equal(r[1].upper, 95, 0);
    assert_float_equal(r[1].lower, 5, 0);
    free(r);
    assert_int_equal(
        rank_check_ranges(rank_default_ranges, RANK_N_DEFAULT_RANGES, err, sizeof(err)), 0);
}

static void expect_bad_ranges(const char *text, const char *want)
{
    rank_range *r = NULL;
    size_t n;
    char err[UTIL_ERRLEN];

    assert_int_equal(rank_parse_ranges(text, &r, &n, err, sizeof(err)), -EINVAL);
    assert_null(r);
    assert_string_equal(err, want);
}

static void test_parse_ranges_errors(void **state)
{
    expect_bad_ranges("95:5,95:10", "quantile ranges 95:5 and 95:10 are not strictly nested");
    expect_bad_ranges("95:20,90:10", "quantile ranges 90:10 and 95:20 are not strictly nested");
    expect_bad_ranges("100:0", "quantile range 1 (100:0) must satisfy 0 < lower < upper < 100");
    expect_bad_ranges("95:5,25:75",
                      "quantile range 2 (25:75) must satisfy 0 < lower < upper < 100");
    expect_bad_ranges("95:5,abc", "quantile range 2 'abc': expected UPPER:LOWER");
    expect_bad_ranges("95:x", "quantile range 1 '95:x': not two numbers");
    expect_bad_ranges("95:5,,90:10", "quantile ranges '95:5,,90:10': empty item");
}

/* ---- Convergence -------------------------------------------------------------- */

static void test_convergence_worked_example(void **state)
{
    /* The paper's worked example ends at 0.028. Its inputs are not in
     * docs/design.md, so this case is derived to give that value under our
     * setting: p = 10 variants ranked over 8 ranges, so mean ranks move in
     * steps of 1/8. Between two rounds, two variants each slip one place in
     * one range (2 -> 2.125 and 4 -> 4.125). Sorted, the gaps change by
     * (0, 0, +1/8, -1/8, 0, 0, +1/8, -1/8, 0): ||dy - dx|| = sqrt(4)/8 =
     * 0.25, over p - 1 = 9 gives 1/36 = 0.0278, the paper's 0.028. The
     * entries are shuffled because the criterion sorts them itself. */
    const double prev[] = {3, 1, 5, 2, 4, 1, 2, 3, 5, 4};
    const double cur[] = {3, 1, 5, 2.125, 4, 1, 2, 3, 5, 4.125};
    char shown[16];
    double c = rank_convergence(prev, cur, 10);

    assert_float_equal(c, 1.0 / 36.0, 1e-15);
    snprintf(shown, sizeof(shown), "%.3f", c);
    assert_string_equal(shown, "0.028");
    /* Identical rounds, a relabelling of the same ranks, and p < 2. */
    assert_float_equal(rank_convergence(prev, prev, 10), 0, 0);
    const double swapped[] = {1, 3, 5, 2, 4, 1, 2, 3, 4, 5};
    assert_float_equal(rank_convergence(prev, swapped, 10), 0, 0);
    assert_float_equal(rank_convergence(prev, cur, 1), 0, 0);
}

/* Known distributions for the loop: normal with these means and sd. */
struct source {
    gsl_rng *rng;
    const double *mu;
    double sd;
    size_t p;
    int fail_round; /* return -EIO in this round (0: never) */
    size_t calls, last_m;
};

static int draw(size_t round, size_t m, double *out, void *ctx)
{
    struct source *s = ctx;

    s->calls++;
    s->last_m = m;
    if ((int)round == s->fail_round)
        return -EIO;
    for (size_t v = 0; v < s->p; v++)
        for (size_t k = 0; k < m; k++)
            out[v * m + k] = s->mu[v] + gsl_ran_gaussian(s->rng, s->sd);
    return 0;
}

static void test_converge_loop(void **state)
{
    const double mu[] = {2.0, 1.0, 1.0};
    const size_t h0[] = {0, 1, 2};
    struct source src = {gsl_rng_alloc(gsl_rng_mt19937), mu, 0.02, 3, 0, 0, 0};
    rank_loop l = {.p = 3,
                   .h0 = h0,
                   .ranges = rank_default_ranges,
                   .n_ranges = RANK_N_DEFAULT_RANGES,
                   .m = 3,
                   .max = 60,
                   .eps = 0.03,
                   .more = draw,
                   .ctx = &src};
    rank_outcome o;

    gsl_rng_set(src.rng, 7);
    assert_int_equal(rank_converge(&l, &o), 0);
    assert_true(o.converged);
    assert_true(o.rounds >= 3); /* 4 measurements are needed to rank at all */
    assert_int_equal(o.n, 3 * o.rounds);
    assert_true(o.change < 0.03);
    /* The slow variant is behind both fast ones in every range; the two
     * fast ones share rank 1 in the widest range, though narrow ranges may
     * tell same-distribution samples apart. */
    assert_true(o.mean[0] > o.mean[1] && o.mean[0] > o.mean[2]);
    assert_int_equal(o.ranks[0 * 3 + 0], 2);
    assert_int_equal(o.ranks[0 * 3 + 1], 1);
    assert_int_equal(o.ranks[0 * 3 + 2], 1);
    assert_float_equal(o.x[1][0], 1.0, 0.2); /* the measurements are kept */
    assert_float_equal(o.x[0][o.n - 1], 2.0, 0.2);
    rank_outcome_clear(&o);
    gsl_rng_free(src.rng);
}

static void test_converge_stops_at_max_and_on_error(void **state)
{
    const double mu[] = {1.0, 1.0};
    const size_t h0[] = {0, 1};
    struct source src = {gsl_rng_alloc(gsl_rng_mt19937), mu, 0.1, 2, 0, 0, 0};
    rank_loop l = {.p = 2,
                   .h0 = h0,
                   .ranges = rank_default_ranges,
                   .n_ranges = RANK_N_DEFAULT_RANGES,
                   .m = 5,
                   .max = 12,
                   .eps = 0,
                   .more = draw,
                   .ctx = &src};
    rank_outcome o;

    gsl_rng_set(src.rng, 1);
    /* eps 0 can never be met: 5 + 5 + 2 measurements, then stop. */
    assert_int_equal(rank_converge(&l, &o), 0);
    assert_false(o.converged);
    assert_int_equal(o.n, 12);
    assert_int_equal(o.rounds, 3);
    assert_int_equal(src.last_m, 2);
    rank_outcome_clear(&o);
    src.fail_round = 2;
    assert_int_equal(rank_converge(&l, &o), -EIO);
    l.max = 3;
    assert_int_equal(rank_converge(&l, &o), -EINVAL);
    gsl_rng_free(src.rng);
}

/* ---- FLOPs anomalies ------------------------------------------------------------ */

static void test_anomaly(void **state)
{
    const double flops[] = {100, 100, 120, 150};
    const double fine[] = {1, 1, 1.5, 2};
    const double split[] = {1, 1.25, 1.5, 2};
    const double outsider[] = {1.25, 1.25, 1, 2};
    const double both[] = {1.5, 1.25, 1, 2};
    rank_anomaly a;

    assert_int_equal(rank_anomaly_test(4, flops, fine, &a), 0);
    assert_int_equal(a.flags, 0);
    assert_int_equal(a.n_min, 2);
    assert_int_equal(rank_anomaly_test(4, flops, split, &a), 0);
    assert_int_equal(a.flags, RANK_ANOMALY_SPLIT);
    assert_int_equal(a.best_min, 0);
    assert_int_equal(a.worst_min, 1);
    assert_int_equal(rank_anomaly_test(4, flops, outsider, &a), 0);
    assert_int_equal(a.flags, RANK_ANOMALY_OUTSIDER);
    assert_int_equal(a.outsider, 2);
    assert_int_equal(rank_anomaly_test(4, flops, both, &a), 0);
    assert_int_equal(a.flags, RANK_ANOMALY_OUTSIDER | RANK_ANOMALY_SPLIT);
    assert_int_equal(a.best_min, 1);
    /* An outsider that only ties the best min-FLOP variant is no anomaly. */
    const double tie[] = {1, 1, 1, 2};
    assert_int_equal(rank_anomaly_test(4, flops, tie, &a), 0);
    assert_int_equal(a.flags, 0);
    assert_int_equal(rank_anomaly_test(0, flops, tie, &a), -EINVAL);
}

static void test_relative(void **state)
{
    const double t[] = {4, 2, 3}, z[] = {0, 1, 0};
    double rel[3];

    rank_relative(3, t, rel);
    assert_float_equal(rel[0], 1, 1e-15);
    assert_float_equal(rel[1], 0, 0);
    assert_float_equal(rel[2], 0.5, 1e-15);
    rank_relative(3, z, rel);
    assert_float_equal(rel[0], 0, 0);
    assert_true(isnan(rel[1]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paper_walkthrough),
        cmocka_unit_test(test_published_single_step),
        cmocka_unit_test(test_quantile_linear),
        cmocka_unit_test(test_outliers_strict_fences),
        cmocka_unit_test(test_outlier_changes_outcome),
        cmocka_unit_test(test_ties_and_all_equivalent),
        cmocka_unit_test(test_all_distinct_reversed),
        cmocka_unit_test(test_non_transitive_triple),
        cmocka_unit_test(test_bad_h0),
        cmocka_unit_test(test_h0_by_key_stable),
        cmocka_unit_test(test_parse_ranges),
        cmocka_unit_test(test_parse_ranges_errors),
        cmocka_unit_test(test_convergence_worked_example),
        cmocka_unit_test(test_converge_loop),
        cmocka_unit_test(test_converge_stops_at_max_and_on_error),
        cmocka_unit_test(test_anomaly),
        cmocka_unit_test(test_relative),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
