/* Unit tests for learn/forest.c, regress.c and select.c: trees that fit
 * what they should, the same forest whatever the thread count, minimum
 * leaf size, importances that find the feature that matters, and the
 * feature-selection scores on cases with known answers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "learn/learn.h"
#include "util/util.h"

#include <gsl/gsl_rng.h>
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N 300

struct data {
    double a[N], b[N], c[N], y[N];
    const double *x[3];
};

/* y depends on a (a step) and weakly on b; c is noise. */
static void make_data(struct data *d)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);

    for (size_t i = 0; i < N; i++) {
        d->a[i] = gsl_rng_uniform(r);
        d->b[i] = gsl_rng_uniform(r);
        d->c[i] = gsl_rng_uniform(r);
        d->y[i] = (d->a[i] > 0.5 ? 10 : 0) + d->b[i];
    }
    d->x[0] = d->a;
    d->x[1] = d->b;
    d->x[2] = d->c;
    gsl_rng_free(r);
}

static void test_same_forest_for_any_thread_count(void **state)
{
    struct data d;
    forest *f1, *f3;
    forest_opts o = {.n_trees = 16, .seed = 42, .threads = 1, .max_features = 2};
    double p1[N], p3[N];

    make_data(&d);
    assert_int_equal(forest_fit(&f1, &o, d.x, d.y, 3, NULL, N), 0);
    o.threads = 3;
    assert_int_equal(forest_fit(&f3, &o, d.x, d.y, 3, NULL, N), 0);
    forest_predict(f1, d.x, NULL, N, p1);
    forest_predict(f3, d.x, NULL, N, p3);
    assert_memory_equal(p1, p3, sizeof(p1));
    assert_memory_equal(forest_importance(f1), forest_importance(f3), 3 * sizeof(double));
    assert_int_equal(forest_n_nodes(f1), forest_n_nodes(f3));
    forest_free(f3);
    /* Another seed gives another forest. */
    o.seed = 43;
    assert_int_equal(forest_fit(&f3, &o, d.x, d.y, 3, NULL, N), 0);
    forest_predict(f3, d.x, NULL, N, p3);
    assert_true(memcmp(p1, p3, sizeof(p1)) != 0);
    forest_free(f1);
    forest_free(f3);
}

static void test_fits_step_and_ranks_importance(void **state)
{
    struct data d;
    forest *f;
    forest_opts o = {.n_trees = 50, .seed = 1, .threads = 2};
    double pred[N], perm[3], err = 0;
    const double *imp;

    make_data(&d);
    assert_int_equal(forest_fit(&f, &o, d.x, d.y, 3, NULL, N), 0);
    forest_predict(f, d.x, NULL, N, pred);
    for (size_t i = 0; i < N; i++)
        err = fmax(err, fabs(pred[i] - d.y[i]));
    assert_true(err < 1.5); /* the step of 10 is learnt, not averaged away */
    imp = forest_importance(f);
    assert_float_equal(imp[0] + imp[1] + imp[2], 1, 1e-12);
    assert_true(imp[0] > 0.9);
    assert_true(imp[1] > imp[2]);
    assert_int_equal(forest_permutation_importance(f, d.x, d.y, NULL, N, 3, 5, perm), 0);
    assert_true(perm[0] > 10); /* shuffling the step costs ~50 of MSE */
    assert_true(perm[1] > perm[2]);
    assert_true(fabs(perm[2]) < 0.05); /* noise feature: next to nothing */
    forest_free(f);
}

static void test_min_leaf_limits_tree_size(void **state)
{
    struct data d;
    forest *f;
    forest_opts o = {.n_trees = 1, .seed = 3, .min_leaf = 40};
    json_object *j, *tree, *feat;
    size_t leaves = 0;

    make_data(&d);
    assert_int_equal(forest_fit(&f, &o, d.x, d.y, 3, NULL, N), 0);
    /* Every leaf holds >= 40 distinct in-bag rows of at most N, so fewer
     * than N / 40 leaves. */
    j = forest_to_json(f);
    tree = json_object_array_get_idx(json_object_object_get(j, "trees"), 0);
    feat = json_object_object_get(tree, "feature");
    for (size_t i = 0; i < json_object_array_length(feat); i++)
        leaves += json_object_get_int(json_object_array_get_idx(feat, i)) < 0;
    assert_true(leaves >= 2 && leaves <= N / 40);
    assert_int_equal(forest_n_nodes(f), 2 * leaves - 1);
    json_object_put(j);
    forest_free(f);
}

static void test_regress_classes_fit_separately(void **state)
{
    double a[N], y[N];
    int klass[N];
    const double *x[] = {a};
    regress_opts o = {.engine = REGRESS_OLS};
    regress_fit f;
    char err[UTIL_ERRLEN];
    double pred[N];

    /* Two lines: class 0 y = 1 + a, class 1 y = 10 - 2a. */
    for (size_t i = 0; i < N; i++) {
        a[i] = (double)i;
        klass[i] = i % 3 == 0;
        y[i] = klass[i] ? 10 - 2 * a[i] : 1 + a[i];
    }
    assert_int_equal(regress_train(&f, &o, x, y, 1, klass, 2, NULL, N, err, sizeof(err)), 0);
    regress_predict(&f, x, klass, NULL, N, pred);
    for (size_t i = 0; i < N; i++)
        assert_float_equal(pred[i], y[i], 1e-8);
    regress_done(&f);
    /* A class that has no training rows is named. */
    size_t rows[] = {1, 2, 4};
    assert_int_equal(regress_train(&f, &o, x, y, 1, klass, 2, rows, 3, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "class low-miss has no training rows");
}

static void test_spearman(void **state)
{
    double a[] = {1, 2, 3, 4, 5}, b[] = {1, 8, 27, 64, 125}, c[] = {5, 4, 3, 2, 1};
    double t[] = {1, 2, 2, 3, 4}, k[] = {3, 3, 3, 3, 3};

    assert_float_equal(select_spearman(a, b, 5), 1, 1e-12); /* monotone, not linear */
    assert_float_equal(select_spearman(a, c, 5), -1, 1e-12);
    /* ties share the average rank: ranks of t are 1, 2.5, 2.5, 4, 5 */
    assert_float_equal(select_spearman(a, t, 5), 0.9746794344808963, 1e-12);
    assert_true(isnan(select_spearman(a, k, 5)));
}

static void test_select_ranks(void **state)
{
    struct data d;
    double k[N];
    const double *x[4];
    select_result r;
    forest_opts o = {.n_trees = 30, .seed = 2};

    make_data(&d);
    for (size_t i = 0; i < N; i++)
        k[i] = 1;
    x[0] = d.c; /* noise first, so the order must come from the scores */
    x[1] = d.b;
    x[2] = d.a;
    x[3] = k; /* constant */
    assert_int_equal(select_rank(&r, x, d.y, N, 4, &o), 0);
    assert_int_equal(r.order[0], 2);
    assert_int_equal(r.order[3], 3);
    assert_float_equal(r.rank_spearman[2], 1, 0);
    assert_float_equal(r.rank_forest[2], 1, 0);
    assert_float_equal(r.rank_spearman[3], 4, 0);
    assert_float_equal(r.pca[3], 0, 0);
    for (size_t j = 0; j < 4; j++)
        assert_float_equal(r.mean_rank[j],
                           (r.rank_spearman[j] + r.rank_pca[j] + r.rank_forest[j]) / 3, 1e-12);
    select_done(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_forest_for_any_thread_count),
        cmocka_unit_test(test_fits_step_and_ranks_importance),
        cmocka_unit_test(test_min_leaf_limits_tree_size),
        cmocka_unit_test(test_regress_classes_fit_separately),
        cmocka_unit_test(test_spearman),
        cmocka_unit_test(test_select_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
