/* Unit tests for learn/symreg-choose.c and the run's budgets: which equation
 * of a front each rule reports, the polish (refit, standard errors,
 * rounding), and the stall and time limits stopping a run with its best. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "learn/learn.h"
#include "util/util.h"

#include <errno.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_randist.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const vars[] = {"x", "m"};

enum { N = 50 };
struct data {
    double x[N], m[N], y[N];
    const double *cols[2];
};

/* y = 1.5 * x * m + 4, plus Gaussian noise of sd `noise`. */
static void make_data(struct data *d, double noise, unsigned long seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);

    gsl_rng_set(r, seed);
    for (int i = 0; i < N; i++) {
        d->x[i] = gsl_ran_flat(r, 1, 5);
        d->m[i] = gsl_ran_flat(r, 1, 5);
        d->y[i] = 1.5 * d->x[i] * d->m[i] + 4 + (noise > 0 ? gsl_ran_gaussian(r, noise) : 0);
    }
    d->cols[0] = d->x;
    d->cols[1] = d->m;
    gsl_rng_free(r);
}

static expr *parse_ok(const char *text)
{
    expr *e = NULL;
    char err[UTIL_ERRLEN];

    if (expr_parse(text, vars, 2, &e, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    return e;
}

/* A front of the given equations, with their RMSE on d. */
static symreg_result *front_of(const struct data *d, const char *const *eqs, size_t n)
{
    symreg_result *res = calloc(1, sizeof(*res));
    double pred[N];

    res->front = calloc(n, sizeof(*res->front));
    res->floor = symreg_error_floor(SYMREG_RMSE, d->y, N);
    for (size_t i = 0; i < n; i++) {
        expr *e = parse_ok(eqs[i]);
        assert_int_equal(expr_fit_consts(e, d->cols, d->y, N, 100, NULL), 0);
        assert_true(expr_eval(e, d->cols, N, pred));
        res->front[i] = (symreg_front_item){.e = e,
                                            .size = expr_size(e),
                                            .error = symreg_error(SYMREG_RMSE, d->y, pred, N),
                                            .cv_error = NAN};
        if (i > 0)
            res->front[i].score = -log(res->front[i].error / res->front[i - 1].error) /
                                  (double)(res->front[i].size - res->front[i - 1].size);
    }
    res->n_front = n;
    return res;
}

static const char *const eqs[] = {
    "0.5 * x",
    "0.5 * x * m",
    "0.5 * x * m + 1",
    "0.5 * x * m + 1 + 0.1 * sqrt(x) * 0.2 * log(m) + 0.1 * exp(-x) * 0.4 * cube(m - 3)",
};

static void test_rules_noisy(void **state)
{
    struct data d;
    symreg_choice c;

    make_data(&d, 0.3, 1);
    symreg_result *res = front_of(&d, eqs, 4);
    /* The last one fits a little noise; the third is within it. */
    assert_true(res->front[3].error < res->front[2].error);
    assert_int_equal(symreg_choose(res, SYMREG_RMSE, SYMREG_RULE_CV, d.cols, 2, d.y, N, &c), 0);
    assert_int_equal(c.index, 2);
    assert_non_null(strstr(c.why, "cross-validated"));
    assert_true(res->front[2].cv_error <= c.limit && res->front[1].cv_error > c.limit);
    assert_int_equal(symreg_choose(res, SYMREG_RMSE, SYMREG_RULE_ACCURATE, d.cols, 2, d.y, N, &c),
                     0);
    assert_int_equal(c.index, 3);
    assert_int_equal(symreg_choose(res, SYMREG_RMSE, SYMREG_RULE_SCORE, d.cols, 2, d.y, N, &c), 0);
    assert_int_equal(c.index, 2); /* the biggest drop per node */
    assert_int_equal(symreg_choose(res, SYMREG_RMSE, SYMREG_RULE_BIC, d.cols, 2, d.y, N, &c), 0);
    assert_int_equal(c.index, 2);
    assert_non_null(strstr(c.why, "n ln(MSE) + size ln(n)"));
    symreg_result_free(res);
}

static void test_rule_exact(void **state)
{
    struct data d;
    symreg_choice c;

    make_data(&d, 0, 2);
    symreg_result *res = front_of(&d, eqs, 4);
    assert_true(res->front[2].error <= res->floor);
    assert_int_equal(symreg_choose(res, SYMREG_RMSE, SYMREG_RULE_CV, d.cols, 2, d.y, N, &c), 0);
    assert_int_equal(c.index, 2);
    assert_non_null(strstr(c.why, "fits the training data exactly"));
    /* Exact fits tie at the floor under bic: the smallest wins. */
    assert_int_equal(symreg_choose(res, SYMREG_RMSE, SYMREG_RULE_BIC, d.cols, 2, d.y, N, &c), 0);
    assert_int_equal(c.index, 2);
    res->n_front = 0;
    assert_int_equal(symreg_choose(res, SYMREG_RMSE, SYMREG_RULE_CV, d.cols, 2, d.y, N, &c),
                     -EINVAL);
    res->n_front = 4;
    symreg_result_free(res);
    assert_int_equal(symreg_rule_from_name("score"), SYMREG_RULE_SCORE);
    assert_int_equal(symreg_rule_from_name("bic"), SYMREG_RULE_BIC);
    assert_int_equal(symreg_rule_from_name("noise"), -EINVAL);
    assert_int_equal(symreg_rule_from_name("aic"), -EINVAL);
}

/* bic on few rows: an inexact equation with as many nodes as rows is never
 * reported, however small its error; an exact one still is, unless it has
 * as many constants as rows. */
static void test_bic_few_rows(void **state)
{
    symreg_front_item items[3] = {
        {.size = 5, .error = 0.1, .e = parse_ok("0.5 * x")},
        {.size = 19, .error = 0.09, .e = parse_ok("0.5 * x + 0.25")},
        {.size = 25, .error = 1e-6, .e = parse_ok("square(x) * x + 0.125")},
    };
    symreg_result res = {.front = items, .n_front = 3, .floor = 1e-12};
    double y[20] = {0};
    const double *cols[1] = {y};
    symreg_choice c;

    (void)state;
    /* Unguarded, 20 ln(1e-12) + 25 ln(20) is far below 20 ln(0.01) + 5 ln(20). */
    assert_int_equal(symreg_choose(&res, SYMREG_RMSE, SYMREG_RULE_BIC, cols, 1, y, 20, &c), 0);
    assert_int_equal(c.index, 0);
    assert_non_null(strstr(c.why, "n or more nodes left out"));
    /* With 30 rows the 25-node equation counts, and wins. */
    double y30[30] = {0};
    cols[0] = y30;
    assert_int_equal(symreg_choose(&res, SYMREG_RMSE, SYMREG_RULE_BIC, cols, 1, y30, 30, &c), 0);
    assert_int_equal(c.index, 2);
    assert_null(strstr(c.why, "left out"));
    /* Exact at 25 nodes on 20 rows: kept, the smallest exact fit. */
    cols[0] = y;
    items[2].error = 1e-14;
    assert_int_equal(symreg_choose(&res, SYMREG_RMSE, SYMREG_RULE_BIC, cols, 1, y, 20, &c), 0);
    assert_int_equal(c.index, 2);
    assert_non_null(strstr(c.why, "smallest exact fit"));
    /* Exact with 20 constants on 20 rows: any 20 numbers can be met so, and
     * it is left out like an inexact one, under bic and under cv. */
    char text[400] = "0";
    for (int k = 1; k < 20; k++)
        snprintf(text + strlen(text), sizeof(text) - strlen(text), " + %d.5 * x", k);
    expr_free(items[2].e);
    items[2].e = parse_ok(text);
    assert_int_equal(expr_n_consts(items[2].e), 20);
    assert_int_equal(symreg_choose(&res, SYMREG_RMSE, SYMREG_RULE_BIC, cols, 1, y, 20, &c), 0);
    assert_int_equal(c.index, 0);
    assert_non_null(strstr(c.why, "n or more nodes left out"));
    assert_int_equal(symreg_choose(&res, SYMREG_RMSE, SYMREG_RULE_CV, cols, 1, y, 20, &c), 0);
    assert_null(strstr(c.why, "exactly"));
    /* One row: nothing has fewer nodes; the smallest is reported. */
    items[2].error = 1e-6;
    assert_int_equal(symreg_choose(&res, SYMREG_RMSE, SYMREG_RULE_BIC, cols, 1, y, 1, &c), 0);
    assert_int_equal(c.index, 0);
    for (int i = 0; i < 3; i++)
        expr_free(items[i].e);
}

static void test_polish_rounds_to_the_data(void **state)
{
    struct data d;
    symreg_const *k;
    size_t nk;
    expr *out, *e = parse_ok("1.500000042648389 * x * m + 3.9999997");

    /* Noiseless: the constants the data pin down exactly come out exact. */
    make_data(&d, 0, 3);
    assert_int_equal(symreg_polish(e, SYMREG_RMSE, d.cols, d.y, N, &out, &k, &nk), 0);
    char *text = expr_print(out, vars);
    assert_string_equal(text, "1.5 * x * m + 4");
    assert_int_equal(nk, 2);
    assert_true(k[0].value == 1.5 && k[1].value == 4);
    assert_true(k[0].se < 1e-9 && k[1].se < 1e-9);
    free(text);
    free(k);
    expr_free(out);

    /* Noisy: each constant keeps the digits its standard error allows,
     * and the error stays what the refit gave. */
    make_data(&d, 0.5, 4);
    assert_int_equal(symreg_polish(e, SYMREG_RMSE, d.cols, d.y, N, &out, &k, &nk), 0);
    assert_int_equal(nk, 2);
    for (size_t i = 0; i < nk; i++) {
        assert_true(k[i].se > 1e-3 && k[i].se < 1);
        assert_true(fabs(k[i].value - k[i].fitted) <= k[i].se);
        char buf[32];
        snprintf(buf, sizeof(buf), "%.4g", k[i].value); /* few digits survive */
        assert_true(strtod(buf, NULL) == k[i].value);
    }
    assert_true(fabs(k[0].fitted - 1.5) < 4 * k[0].se);
    free(k);
    expr_free(out);
    expr_free(e);
}

/* Rounding may turn the tree around: fitted to y = 1.5 x m + 0.3 m + 4,
 * x m - c m gets c = -0.3 and rounds to 1.5 * x * m + 0.3 * m + 4. Each
 * reported constant is then paired with its own fitted value, not with the
 * one that stood at its index before. */
static void test_polish_pairs_constants_after_reordering(void **state)
{
    struct data d;
    symreg_const *k;
    size_t nk;
    expr *out, *e = parse_ok("1.4 * x * m - 0.2 * m + 3");
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);

    make_data(&d, 0, 5);
    gsl_rng_set(r, 5);
    for (int i = 0; i < N; i++)
        d.y[i] = 1.5 * d.x[i] * d.m[i] + 0.3 * d.m[i] + 4 + gsl_ran_gaussian(r, 0.05);
    gsl_rng_free(r);
    assert_int_equal(symreg_polish(e, SYMREG_RMSE, d.cols, d.y, N, &out, &k, &nk), 0);
    assert_int_equal(nk, 3);
    for (size_t i = 0; i < nk; i++) {
        assert_true(k[i].se > 0);
        if (fabs(k[i].value - k[i].fitted) > k[i].se)
            fail_msg("constant %zu: %g against fitted %g (se %g)", i, k[i].value, k[i].fitted,
                     k[i].se);
    }
    free(k);
    expr_free(out);
    expr_free(e);
}

/* Polishing `from` on noiseless data of d gives 1.5 * x * m + 4. */
static void polish_to_truth(const struct data *d, const char *from)
{
    symreg_const *k;
    size_t nk;
    expr *out, *e = parse_ok(from);

    assert_int_equal(symreg_polish(e, SYMREG_RMSE, d->cols, d->y, N, &out, &k, &nk), 0);
    char *text = expr_print(out, vars);
    assert_string_equal(text, "1.5 * x * m + 4");
    assert_int_equal(nk, 2);
    assert_true(k[0].value == 1.5 && k[1].value == 4);
    free(text);
    free(k);
    expr_free(out);
    expr_free(e);
}

/* Leftovers of a search that found the right shape: a term with a
 * coefficient of round-off size, a constant 1e-13 from a round number. */
static void test_polish_drops_leftovers(void **state)
{
    static const char *const cases[] = {
        "1.5 * x * m + 4 + 2.2e-15 * x",
        "1.4999999999998 * (x + 3e-16) * m + 4.0000000000002",
        "0.0009372890417794 * (1542.4138920155 - 1.76e-13 * m + 57.946224381774) * x * m + 4",
    };
    struct data d;
    symreg_const *k;
    size_t nk;
    expr *out;

    make_data(&d, 0, 3);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        polish_to_truth(&d, cases[i]);
    /* Noisy: a term the data cannot see goes, the others stay. */
    make_data(&d, 0.5, 4);
    expr *e = parse_ok("1.5 * x * m + 4 + 1e-9 * m");
    assert_int_equal(symreg_polish(e, SYMREG_RMSE, d.cols, d.y, N, &out, &k, &nk), 0);
    assert_int_equal(nk, 2);
    assert_int_equal(expr_size(out), 7);
    free(k);
    expr_free(out);
    expr_free(e);
}

/* An exact fit found with its constants spread over levels, or as a
 * product, is written as the sum of monomials when that is no longer in
 * nodes plus constants. */
static void test_polish_expands_polynomials(void **state)
{
    static const char *const cases[] = {
        "0.25 * (6 * x * m + 16)",
        "0.5 * (3.0000000001 * (x + 1.3333333333) * m + 8 - 4 * m)",
        "3 * (0.5 * x * m + 1.3333333333333333)",
    };
    struct data d;

    make_data(&d, 0, 3);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        polish_to_truth(&d, cases[i]);
}

/* y = (x + 1) * (m + 2): 5 nodes and 2 constants against x * m + 2 * x
 * + m + 2, 9 nodes and 2 constants. */
static void test_polish_keeps_a_shorter_product(void **state)
{
    struct data d;
    symreg_const *k;
    size_t nk;
    expr *out;

    make_data(&d, 0, 3);
    for (int i = 0; i < N; i++)
        d.y[i] = (d.x[i] + 1) * (d.m[i] + 2);
    expr *e = parse_ok("(x + 0.9999999) * (m + 2.0000001)");
    assert_int_equal(symreg_polish(e, SYMREG_RMSE, d.cols, d.y, N, &out, &k, &nk), 0);
    char *text = expr_print(out, vars);
    assert_string_equal(text, "(x + 1) * (m + 2)");
    free(text);
    free(k);
    expr_free(out);
    expr_free(e);
}

static void test_budgets_stop_with_the_best(void **state)
{
    struct data d;
    symreg_params p;
    symreg_result *res;
    char err[UTIL_ERRLEN];

    make_data(&d, 0, 5);
    symreg_params_default(&p);
    p.fitness = SYMREG_RMSE;
    p.population = 50;
    p.generations = 1000000;
    p.time_limit = 0.3;
    assert_int_equal(symreg_run(&p, d.cols, 2, d.y, N, NULL, NULL, &res, err, sizeof(err)), 0);
    assert_int_equal(res->stop, SYMREG_STOP_TIME);
    assert_true(res->seconds >= 0.3 && res->seconds < 30);
    assert_true(res->generations > 0 && res->generations < 1000000);
    assert_true(res->n_front > 0 && res->best);
    symreg_result_free(res);

    p.time_limit = 0;
    p.stall = 3;
    assert_int_equal(symreg_run(&p, d.cols, 2, d.y, N, NULL, NULL, &res, err, sizeof(err)), 0);
    assert_int_equal(res->stop, SYMREG_STOP_STALL);
    assert_true(res->generations >= 3);
    symreg_result_free(res);

    p.time_limit = -1;
    assert_int_equal(symreg_params_check(&p, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "time_limit must not be negative, not -1");
    assert_int_equal(symreg_params_preset(&p, "pandora"), 0);
    assert_int_equal(p.selection, SYMREG_SEL_DOUBLE);
    assert_false(p.simplify);
    assert_int_equal(symreg_params_preset(&p, "fast"), -EINVAL);
}

int main(void)
{
    gsl_set_error_handler_off();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules_noisy),
        cmocka_unit_test(test_rule_exact),
        cmocka_unit_test(test_bic_few_rows),
        cmocka_unit_test(test_polish_rounds_to_the_data),
        cmocka_unit_test(test_polish_pairs_constants_after_reordering),
        cmocka_unit_test(test_polish_drops_leftovers),
        cmocka_unit_test(test_polish_expands_polynomials),
        cmocka_unit_test(test_polish_keeps_a_shorter_product),
        cmocka_unit_test(test_budgets_stop_with_the_best),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
