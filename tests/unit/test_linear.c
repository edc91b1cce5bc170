/* Unit tests for learn/folds.c, scaler.c and linear.c: fold layouts, scaling
 * of constant features, and OLS/ridge/lasso checked against conditions that
 * define their solutions (exact recovery, normal equations, KKT), not
 * against numbers this code produced. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "learn/learn.h"
#include "util/util.h"

#include <errno.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N 200
#define P 3

struct data {
    double col[P][N], y[N];
    const double *x[P];
};

/* y = 5 + 2 x0 - 3 x1 + 0 x2 + noise*e, with x uniform on different ranges. */
static void make_data(struct data *d, double noise, unsigned long seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);

    gsl_rng_set(r, seed);
    for (size_t i = 0; i < N; i++) {
        d->col[0][i] = gsl_rng_uniform(r) * 10;
        d->col[1][i] = 100 + gsl_rng_uniform(r) * 50;
        d->col[2][i] = gsl_rng_uniform(r);
        d->y[i] = 5 + 2 * d->col[0][i] - 3 * d->col[1][i] + noise * gsl_ran_gaussian(r, 1);
    }
    for (size_t j = 0; j < P; j++)
        d->x[j] = d->col[j];
    gsl_rng_free(r);
}

static void test_kfold_covers_every_row_once(void **state)
{
    folds *fo;
    size_t count[4] = {0}, train[10], test[10], ntr, nte;
    char err[UTIL_ERRLEN];

    assert_int_equal(folds_kfold(10, 4, 7, &fo, err, sizeof(err)), 0);
    for (size_t i = 0; i < 10; i++)
        count[fo->fold[i]]++;
    /* 10 rows in 4 folds: the first 10 % 4 folds get one more. */
    assert_int_equal(count[0], 3);
    assert_int_equal(count[1], 3);
    assert_int_equal(count[2], 2);
    assert_int_equal(count[3], 2);
    folds_split(fo, 2, train, &ntr, test, &nte);
    assert_int_equal(ntr, 8);
    assert_int_equal(nte, 2);
    folds *again;
    assert_int_equal(folds_kfold(10, 4, 7, &again, err, sizeof(err)), 0);
    assert_memory_equal(fo->fold, again->fold, 10 * sizeof(int));
    folds_free(again);
    folds_free(fo);
    assert_int_equal(folds_kfold(3, 4, 7, &fo, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "--cv 4"));
}

static void test_folds_from_column_and_holdout(void **state)
{
    double ids[] = {7, -1, 7, 3, 3};
    double bad[] = {0, 1.5};
    folds *fo;
    char err[UTIL_ERRLEN];

    assert_int_equal(folds_from_column(ids, 5, "f", &fo, err, sizeof(err)), 0);
    assert_int_equal(fo->k, 3);
    int want[] = {2, 0, 2, 1, 1};
    assert_memory_equal(fo->fold, want, sizeof(want));
    folds_free(fo);
    assert_int_equal(folds_from_column(bad, 2, "f", &fo, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "--folds f: row 2 has fold id 1.5, expected an integer");

    assert_int_equal(folds_holdout_last(10, 25, &fo, err, sizeof(err)), 0);
    assert_int_equal(fo->k, 1);
    for (size_t i = 0; i < 10; i++) /* ceil(2.5) = 3 newest rows tested */
        assert_int_equal(fo->fold[i], i < 7 ? -1 : 0);
    folds_free(fo);
}

static void test_scaler_constant_feature(void **state)
{
    double a[] = {2, 4, 6}, c[] = {5, 5, 5};
    const double *x[] = {a, c};
    size_t rows[] = {0, 1};
    scaler s;

    assert_int_equal(scaler_fit(&s, x, 2, rows, 2), 0); /* training rows only */
    assert_float_equal(s.max[0], 4, 0);
    assert_float_equal(scaler_apply(&s, 0, 6), 2, 1e-15); /* test rows may leave [0,1] */
    assert_true(scaler_is_constant(&s, 1));
    assert_float_equal(scaler_apply(&s, 1, 5), 0, 0);
    assert_float_equal(scaler_apply(&s, 1, 99), 0, 0);
    scaler_done(&s);
}

static void fit(struct data *d, linear_kind kind, double alpha, linear_model *m, scaler *s)
{
    linear_opts o = {.kind = kind, .alpha = alpha};
    char err[UTIL_ERRLEN];

    assert_int_equal(scaler_fit(s, d->x, P, NULL, N), 0);
    assert_int_equal(linear_fit(m, &o, s, d->x, d->y, P, NULL, N, err, sizeof(err)), 0);
}

static void test_ols_recovers_exact_function(void **state)
{
    struct data d;
    linear_model m;
    scaler s;
    double pred[N];

    make_data(&d, 0, 1);
    fit(&d, LINEAR_OLS, 0, &m, &s);
    /* coef is per scaled unit: slope times range. */
    assert_float_equal(m.coef[0], 2 * (s.max[0] - s.min[0]), 1e-8);
    assert_float_equal(m.coef[1], -3 * (s.max[1] - s.min[1]), 1e-8);
    assert_float_equal(m.coef[2], 0, 1e-8);
    linear_predict(&m, &s, d.x, NULL, N, pred);
    for (size_t i = 0; i < N; i++)
        assert_float_equal(pred[i], d.y[i], 1e-8);
    linear_done(&m);
    scaler_done(&s);
}

/* Residual r = y - Xw - b of the scaled data, and g = X'r (centred). */
static void gradient(struct data *d, const linear_model *m, const scaler *s, double *g)
{
    double pred[N], mean[P] = {0};

    linear_predict(m, s, d->x, NULL, N, pred);
    for (size_t j = 0; j < P; j++)
        for (size_t i = 0; i < N; i++)
            mean[j] += scaler_apply(s, j, d->x[j][i]) / N;
    for (size_t j = 0; j < P; j++) {
        g[j] = 0;
        for (size_t i = 0; i < N; i++)
            g[j] += (scaler_apply(s, j, d->x[j][i]) - mean[j]) * (d->y[i] - pred[i]);
    }
}

static void test_ridge_satisfies_normal_equations(void **state)
{
    struct data d;
    linear_model m;
    scaler s;
    double g[P], sum = 0, pred[N];

    make_data(&d, 3, 2);
    fit(&d, LINEAR_RIDGE, 2.5, &m, &s);
    /* Stationarity of ||y - Xw - b||^2 + alpha ||w||^2: X'r = alpha w. */
    gradient(&d, &m, &s, g);
    for (size_t j = 0; j < P; j++)
        assert_float_equal(g[j], 2.5 * m.coef[j], 1e-7 * fmax(1, fabs(g[j])));
    /* ...and the intercept is unpenalised: residuals sum to zero. */
    linear_predict(&m, &s, d.x, NULL, N, pred);
    for (size_t i = 0; i < N; i++)
        sum += d.y[i] - pred[i];
    assert_float_equal(sum, 0, 1e-7);
    linear_done(&m);
    scaler_done(&s);
}

static void test_lasso_satisfies_kkt(void **state)
{
    struct data d;
    linear_model m;
    scaler s;
    double g[P], alpha = 0.8;

    make_data(&d, 3, 3);
    fit(&d, LINEAR_LASSO, alpha, &m, &s);
    assert_true(m.converged);
    /* 1/(2n)||r||^2 + alpha|w|_1: X'r/n = alpha sign(w) where w != 0,
     * |X'r/n| <= alpha where w == 0. x2 does not matter: it must be 0. */
    gradient(&d, &m, &s, g);
    for (size_t j = 0; j < P; j++) {
        if (m.coef[j] != 0)
            assert_float_equal(g[j] / N, alpha * (m.coef[j] > 0 ? 1 : -1), 1e-8);
        else
            assert_true(fabs(g[j] / N) <= alpha + 1e-10);
    }
    assert_float_equal(m.coef[2], 0, 0);
    assert_true(m.coef[0] > 0 && m.coef[1] < 0);
    linear_done(&m);
    scaler_done(&s);
}

/* --alpha auto picks from the grid by inner CV, never fits with the -1 that
 * asks for it: the smallest alpha on exact data, the largest on noise. */
static void auto_follows_the_noise(linear_kind kind)
{
    struct data d;
    linear_model m;
    scaler s;
    linear_opts o = {.kind = kind, .alpha = -1, .seed = 1};
    char err[UTIL_ERRLEN];
    double grid[32];
    size_t ng = linear_alpha_grid(grid, 32);

    /* Noise-free data: the smallest alpha fits best. */
    make_data(&d, 0, 4);
    assert_int_equal(scaler_fit(&s, d.x, P, NULL, N), 0);
    assert_int_equal(linear_fit(&m, &o, &s, d.x, d.y, P, NULL, N, err, sizeof(err)), 0);
    assert_float_equal(m.alpha, grid[0], 0);
    linear_done(&m);
    /* A target that is pure noise: the largest alpha (predict the mean). */
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    for (size_t i = 0; i < N; i++)
        d.y[i] = gsl_ran_gaussian(r, 1);
    gsl_rng_free(r);
    assert_int_equal(linear_fit(&m, &o, &s, d.x, d.y, P, NULL, N, err, sizeof(err)), 0);
    assert_float_equal(m.alpha, grid[ng - 1], 0);
    for (size_t j = 0; kind == LINEAR_LASSO && j < P; j++)
        assert_float_equal(m.coef[j], 0, 0); /* the mean, as the largest penalty gives */
    linear_done(&m);
    scaler_done(&s);
}

static void test_ridge_auto_follows_the_noise(void **state)
{
    auto_follows_the_noise(LINEAR_RIDGE);
}

static void test_lasso_auto_follows_the_noise(void **state)
{
    auto_follows_the_noise(LINEAR_LASSO);
}

/* auto on a single row (a class a validation round left one row): nothing
 * to validate, so alpha 1, and a fit rather than a folds error. */
static void test_auto_on_one_row_is_alpha_one(void **state)
{
    struct data d;
    linear_model m;
    scaler s;
    linear_opts o = {.kind = LINEAR_RIDGE, .alpha = -1, .seed = 1};
    char err[UTIL_ERRLEN] = "";
    size_t row = 3;

    make_data(&d, 0, 4);
    assert_int_equal(scaler_fit(&s, d.x, P, &row, 1), 0);
    assert_int_equal(linear_fit(&m, &o, &s, d.x, d.y, P, &row, 1, err, sizeof(err)), 0);
    assert_float_equal(m.alpha, 1.0, 0);
    linear_done(&m);
    scaler_done(&s);
}

static void test_ols_refuses_more_features_than_rows(void **state)
{
    struct data d;
    linear_model m;
    scaler s;
    linear_opts o = {.kind = LINEAR_OLS};
    size_t rows[] = {0, 1, 2};
    char err[UTIL_ERRLEN];

    make_data(&d, 1, 5);
    assert_int_equal(scaler_fit(&s, d.x, P, rows, 3), 0);
    assert_int_equal(linear_fit(&m, &o, &s, d.x, d.y, P, rows, 3, err, sizeof(err)), -EDOM);
    assert_non_null(strstr(err, "3 rows, 3 features"));
    assert_non_null(strstr(err, "--engine ridge"));
    /* Ridge is defined there. */
    o.kind = LINEAR_RIDGE;
    o.alpha = 1;
    assert_int_equal(linear_fit(&m, &o, &s, d.x, d.y, P, rows, 3, err, sizeof(err)), 0);
    linear_done(&m);
    scaler_done(&s);
}

static void test_ols_collinear_is_minimum_norm(void **state)
{
    double a[N], b[N], y[N];
    const double *x[] = {a, b};
    linear_model m;
    scaler s;
    linear_opts o = {.kind = LINEAR_OLS};
    char err[UTIL_ERRLEN];

    for (size_t i = 0; i < N; i++) {
        a[i] = (double)i;
        b[i] = 2.0 * (double)i; /* scales to the same column as a */
        y[i] = 1 + 4 * (double)i;
    }
    assert_int_equal(scaler_fit(&s, x, 2, NULL, N), 0);
    assert_int_equal(linear_fit(&m, &o, &s, x, y, 2, NULL, N, err, sizeof(err)), 0);
    /* The slope per scaled unit, 4 * (N-1), is split equally. */
    assert_float_equal(m.coef[0], 2.0 * (N - 1), 1e-6);
    assert_float_equal(m.coef[1], 2.0 * (N - 1), 1e-6);
    assert_float_equal(m.intercept, 1, 1e-8);
    linear_done(&m);
    scaler_done(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kfold_covers_every_row_once),
        cmocka_unit_test(test_folds_from_column_and_holdout),
        cmocka_unit_test(test_scaler_constant_feature),
        cmocka_unit_test(test_ols_recovers_exact_function),
        cmocka_unit_test(test_ridge_satisfies_normal_equations),
        cmocka_unit_test(test_lasso_satisfies_kkt),
        cmocka_unit_test(test_ridge_auto_follows_the_noise),
        cmocka_unit_test(test_lasso_auto_follows_the_noise),
        cmocka_unit_test(test_auto_on_one_row_is_alpha_one),
        cmocka_unit_test(test_ols_refuses_more_features_than_rows),
        cmocka_unit_test(test_ols_collinear_is_minimum_norm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
