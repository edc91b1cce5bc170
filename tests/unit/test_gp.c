/* Unit tests for the Gaussian process (learn/gp*.c): analytic gradients
 * against finite differences, log marginal likelihood and predictions
 * against scikit-learn (tests/gp_peer.py through /usr/bin/python3, run
 * here), closed-form leave-one-out against refitting without each point,
 * jitter for duplicated rows, and the errors of bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

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
#include <unistd.h>

#define N_MAX 80
#define D_MAX 3

static const char *const names[D_MAX] = {"x0", "x1", "x2"};

/* n random points in [0, 3)^d and a smooth noisy target. */
struct sample {
    size_t n, d;
    double x[D_MAX][N_MAX], y[N_MAX];
    const double *cols[D_MAX];
    gp_data data;
};

static void make_sample(struct sample *s, size_t n, size_t d, unsigned long seed)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);

    gsl_rng_set(rng, seed);
    s->n = n;
    s->d = d;
    for (size_t i = 0; i < n; i++) {
        double v = 0;
        for (size_t j = 0; j < d; j++) {
            s->x[j][i] = 3 * gsl_rng_uniform(rng);
            v += sin(1.3 * s->x[j][i] + (double)j);
        }
        s->y[i] = v + 0.3 * s->x[0][i] + 0.1 * gsl_ran_gaussian(rng, 1);
    }
    for (size_t j = 0; j < d; j++)
        s->cols[j] = s->x[j];
    s->data = (gp_data){s->cols, s->y, n};
    gsl_rng_free(rng);
}

static gp_model *model(const char *kernel, bool ard, bool standardize, const char *mean, bool fit,
                       size_t d)
{
    gp_config cfg = {kernel, ard, standardize, mean, fit};
    char err[UTIL_ERRLEN];
    gp_model *m = NULL;
    int r = gp_new(&cfg, names, d, &m, err, sizeof(err));

    if (r < 0)
        fail_msg("gp_new(%s): %s", kernel, err);
    return m;
}

/* Every analytic derivative agrees with a central difference. */
static void check_gradient(const char *kernel, bool ard, const char *mean, bool fit)
{
    struct sample s;
    gp_model *m = model(kernel, ard, true, mean, fit, 2);
    size_t p = gp_n_params(m);
    double theta[32], grad[32], lp, lm, lml;

    make_sample(&s, 25, 2, 7);
    gp_set_scaling(m, &s.data);
    gp_get_params(m, theta);
    for (size_t i = 0; i < p; i++)
        theta[i] += gp_param_is_log(m, i) ? 0.3 * sin((double)i + 1) : 0.2;
    gp_set_params(m, theta);
    assert_int_equal(gp_lml(m, &s.data, &lml, grad), 0);
    for (size_t i = 0; i < p; i++) {
        double h = 1e-5, t = theta[i], fd;
        theta[i] = t + h;
        gp_set_params(m, theta);
        assert_int_equal(gp_lml(m, &s.data, &lp, NULL), 0);
        theta[i] = t - h;
        gp_set_params(m, theta);
        assert_int_equal(gp_lml(m, &s.data, &lm, NULL), 0);
        theta[i] = t;
        gp_set_params(m, theta);
        fd = (lp - lm) / (2 * h);
        if (fabs(fd - grad[i]) > 1e-5 * (1 + fabs(fd))) {
            char name[128];
            gp_param_name(m, i, name, sizeof(name));
            fail_msg("%s (mean %s): d lml / d %s = %.10g, finite difference %.10g", kernel,
                     mean ? mean : "zero", name, grad[i], fd);
        }
    }
    gp_free(m);
}

static void test_gradients(void **state)
{
    check_gradient("rbf", false, NULL, false);
    check_gradient("rbf+white", true, NULL, false);
    check_gradient("matern12+white", true, NULL, false);
    check_gradient("matern32+white", false, "const", false);
    check_gradient("matern52+white", true, NULL, false);
    check_gradient("const*matern32+linear+white", true, NULL, false);
    check_gradient("rbf*matern52+rbf+white", false, NULL, false);
    check_gradient("matern32+white", true, "0.5*x0 + square(x1)*0.2 + max(x0, 1.5)", true);
}

/* Runs the scikit-learn peer on `query` and returns its parsed answer. */
static json_object *peer(json_object *query)
{
    const char *src = getenv("SRCDIR"), *py = getenv("PYTHON");
    char in[] = "/tmp/wattprof-gp-peer-XXXXXX", cmd[1024], *out = NULL;
    size_t len = 0;
    FILE *f;
    json_object *ans;
    int fd = mkstemp(in);

    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    fputs(json_object_to_json_string_ext(query, JSON_C_TO_STRING_PLAIN), f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "%s %s/tests/gp_peer.py < %s", py ? py : "/usr/bin/python3",
             src ? src : ".", in);
    f = popen(cmd, "r");
    assert_non_null(f);
    assert_true(getdelim(&out, &len, '\0', f) > 0);
    assert_int_equal(pclose(f), 0);
    unlink(in);
    ans = json_tokener_parse(out);
    free(out);
    assert_non_null(ans);
    return ans;
}

static json_object *rows(const struct sample *s, size_t from, size_t to)
{
    json_object *a = json_object_new_array();

    for (size_t i = from; i < to; i++) {
        json_object *r = json_object_new_array();
        for (size_t j = 0; j < s->d; j++)
            json_object_array_add(r, json_object_new_double(s->x[j][i]));
        json_object_array_add(a, r);
    }
    return a;
}

static void assert_rel(double got, double want, double tol, const char *what)
{
    if (!(fabs(got - want) <= tol * fmax(fabs(want), 1e-6)))
        fail_msg("%s: wattprof %.15g, scikit-learn %.15g", what, got, want);
}

/* Our LML and predictions at fixed hyperparameters, and the query that asks
 * scikit-learn (optimizer=None) for the same. */
struct fixed_case {
    const char *kernel;
    bool ard;
    double lml, mean[15], var[15];
};

static json_object *run_fixed(struct fixed_case *c)
{
    struct sample s;
    const size_t nt = 40, np = 15;
    gp_model *m = model(c->kernel, c->ard, false, NULL, false, 3);
    double theta[8], lml;
    size_t p = gp_n_params(m);
    char err[UTIL_ERRLEN];
    json_object *q = json_object_new_object(), *ls = json_object_new_array(), *a;

    make_sample(&s, nt + np, 3, 11);
    s.data.n = nt;
    for (size_t i = 0; i < p; i++)
        theta[i] = log(0.6 + 0.35 * (double)i); /* variance, length scales, noise */
    gp_set_params(m, theta);
    assert_int_equal(gp_condition(m, &s.data, err, sizeof(err)), 0);
    assert_true(gp_jitter(m) == 0);
    const double *xs[3] = {s.x[0] + nt, s.x[1] + nt, s.x[2] + nt};
    assert_int_equal(gp_predict(m, xs, np, c->mean, c->var), 0);
    c->lml = gp_log_marginal_likelihood(m);
    /* gp_lml agrees with the conditioned model's value */
    assert_int_equal(gp_lml(m, &s.data, &lml, NULL), 0);
    assert_true(fabs(lml - c->lml) <= 1e-12 * fabs(lml));

    json_object_object_add(q, "mode", json_object_new_string("fixed"));
    json_object_object_add(q, "kernel", json_object_new_string(c->kernel));
    json_object_object_add(q, "x", rows(&s, 0, nt));
    json_object_object_add(q, "xs", rows(&s, nt, nt + np));
    a = json_object_new_array();
    for (size_t i = 0; i < nt; i++)
        json_object_array_add(a, json_object_new_double(s.y[i]));
    json_object_object_add(q, "y", a);
    json_object_object_add(q, "variance", json_object_new_double(exp(theta[0])));
    for (size_t j = 0; j < (c->ard ? 3u : 1u); j++)
        json_object_array_add(ls, json_object_new_double(exp(theta[1 + j])));
    json_object_object_add(q, "length_scale", ls);
    json_object_object_add(q, "noise", json_object_new_double(exp(theta[p - 1])));
    gp_free(m);
    return q;
}

static double at(json_object *ans, const char *key, size_t i)
{
    return json_object_get_double(json_object_array_get_idx(json_object_object_get(ans, key), i));
}

/* LML, predictive mean and variance at fixed hyperparameters equal
 * scikit-learn's to a relative 1e-8; one peer process answers all cases. */
static void test_fixed_vs_sklearn(void **state)
{
    static const char *const kernels[] = {
        "rbf",      "rbf+white",      "matern32",      "matern32+white",
        "matern52", "matern52+white", "matern12+white"};
    enum { N = 2 * sizeof(kernels) / sizeof(kernels[0]) };
    struct fixed_case cases[N];
    json_object *qs = json_object_new_array(), *answers;

    for (size_t k = 0; k < N; k++) {
        cases[k] = (struct fixed_case){.kernel = kernels[k / 2], .ard = k % 2 == 1};
        json_object_array_add(qs, run_fixed(&cases[k]));
    }
    answers = peer(qs);
    assert_int_equal(json_object_array_length(answers), N);
    for (size_t k = 0; k < N; k++) {
        json_object *ans = json_object_array_get_idx(answers, k);
        assert_rel(cases[k].lml, json_object_get_double(json_object_object_get(ans, "lml")), 1e-8,
                   cases[k].kernel);
        for (size_t i = 0; i < 15; i++) {
            assert_rel(cases[k].mean[i], at(ans, "mean", i), 1e-8, "predictive mean");
            assert_rel(cases[k].var[i], at(ans, "var", i), 1e-8, "predictive variance");
        }
    }
    json_object_put(qs);
    json_object_put(answers);
}

/* With the same number of restarts, the optimised LML is at least
 * scikit-learn's (L-BFGS-B). */
static void check_optimised(const char *kernel, bool ard, int restarts)
{
    struct sample s;
    gp_model *m = model(kernel, ard, false, NULL, false, 2);
    gp_fit_options o = {.restarts = restarts, .seed = 3};
    char err[UTIL_ERRLEN];
    json_object *q = json_object_new_object(), *a = json_object_new_array(), *ans;
    double mine, theirs;

    make_sample(&s, 60, 2, 5);
    assert_int_equal(gp_fit(m, &s.data, &o, err, sizeof(err)), 0);
    json_object_object_add(q, "mode", json_object_new_string("fit"));
    json_object_object_add(q, "kernel", json_object_new_string(kernel));
    json_object_object_add(q, "ard", json_object_new_boolean(ard));
    json_object_object_add(q, "x", rows(&s, 0, s.n));
    for (size_t i = 0; i < s.n; i++)
        json_object_array_add(a, json_object_new_double(s.y[i]));
    json_object_object_add(q, "y", a);
    json_object_object_add(q, "restarts", json_object_new_int(restarts));
    json_object_object_add(q, "seed", json_object_new_int(3));
    ans = peer(q);
    mine = gp_log_marginal_likelihood(m);
    theirs = json_object_get_double(json_object_object_get(ans, "lml"));
    print_message("%s ard=%d restarts=%d: lml %.10f, scikit-learn %.10f\n", kernel, ard, restarts,
                  mine, theirs);
    if (mine < theirs - 1e-9 * fmax(1, fabs(theirs)))
        fail_msg("%s: optimised lml %.10f below scikit-learn's %.10f", kernel, mine, theirs);
    json_object_put(q);
    json_object_put(ans);
    gp_free(m);
}

static void test_optimised_vs_sklearn(void **state)
{
    check_optimised("matern32+white", false, 0);
    check_optimised("matern32+white", true, 3);
    check_optimised("rbf+white", true, 3);
    check_optimised("matern52+white", false, 5);
}

/* Closed-form leave-one-out equals conditioning on n - 1 points, with the
 * hyperparameters and the scaling fixed. */
static void test_loo_closed_equals_refit(void **state)
{
    struct sample s, fold;
    gp_model *m = model("matern32+rbf+white", true, true, "0.4*x0 + max(x1, 1)", false, 2);
    gp_fit_options o = {.restarts = 1, .seed = 1};
    double mean[N_MAX], var[N_MAX], fm, fv;
    char err[UTIL_ERRLEN];

    make_sample(&s, 30, 2, 9);
    assert_int_equal(gp_fit(m, &s.data, &o, err, sizeof(err)), 0);
    assert_int_equal(gp_loo_closed(m, mean, var), 0);
    for (size_t i = 0; i < s.n; i++) {
        gp_model *c = gp_clone(m);
        size_t k = 0;
        for (size_t r = 0; r < s.n; r++) {
            if (r == i)
                continue;
            fold.x[0][k] = s.x[0][r];
            fold.x[1][k] = s.x[1][r];
            fold.y[k++] = s.y[r];
        }
        fold.cols[0] = fold.x[0];
        fold.cols[1] = fold.x[1];
        fold.data = (gp_data){fold.cols, fold.y, s.n - 1};
        assert_int_equal(gp_condition(c, &fold.data, err, sizeof(err)), 0);
        const double *xi[2] = {s.x[0] + i, s.x[1] + i};
        assert_int_equal(gp_predict(c, xi, 1, &fm, &fv), 0);
        assert_true(fabs(fm - mean[i]) <= 1e-8 * fmax(1, fabs(fm)));
        assert_true(fabs(fv - var[i]) <= 1e-8 * fmax(1e-3, fabs(fv)));
        gp_free(c);
    }
    gp_free(m);
}

/* Duplicated rows without a noise term make K singular: jitter is added
 * and reported, and predictions stay finite. */
static void test_duplicates_get_jitter(void **state)
{
    struct sample s;
    gp_model *m = model("rbf", false, false, NULL, false, 2);
    double mean, var;
    char err[UTIL_ERRLEN];

    make_sample(&s, 20, 2, 4);
    assert_int_equal(gp_condition(m, &s.data, err, sizeof(err)), 0);
    assert_true(gp_jitter(m) == 0);
    s.x[0][5] = s.x[0][4];
    s.x[1][5] = s.x[1][4];
    assert_int_equal(gp_condition(m, &s.data, err, sizeof(err)), 0);
    assert_true(gp_jitter(m) > 0);
    assert_int_equal(gp_predict(m, s.cols, 1, &mean, &var), 0);
    assert_true(isfinite(mean) && isfinite(var));
    gp_free(m);
}

static void test_bad_input(void **state)
{
    struct sample s;
    gp_config cfg = {"matern31+white", false, true, NULL, false};
    gp_model *m = NULL;
    char err[UTIL_ERRLEN];

    assert_int_equal(gp_new(&cfg, names, 2, &m, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "kernel:1:1: unknown kernel 'matern31' (known: rbf, matern12, "
                             "matern32, matern52, linear, const, white, joined by + and *)");
    cfg.kernel = "matern32+";
    assert_int_equal(gp_new(&cfg, names, 2, &m, err, sizeof(err)), -EINVAL);
    cfg.kernel = "matern32";
    cfg.mean = "2*x0 + foo";
    assert_true(gp_new(&cfg, names, 2, &m, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "foo"));
    m = model("matern32+white", false, true, NULL, false, 2);
    make_sample(&s, 2, 2, 1);
    assert_int_equal(gp_fit(m, &s.data, NULL, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "need at least 3 rows to fit a GP, got 2");
    gp_free(m);
}

/* A fitted mean recovers a linear trend's slope jointly with the kernel,
 * and the JSON document names every hyperparameter. */
static void test_fit_mean_and_json(void **state)
{
    struct sample s;
    gp_model *m = model("matern32+white", false, true, "1.1*x0 + 0.1", true, 1);
    gp_fit_options o = {.restarts = 2, .seed = 2};
    double theta[8];
    char err[UTIL_ERRLEN], *js;
    json_object *doc;

    make_sample(&s, 60, 1, 8);
    for (size_t i = 0; i < s.n; i++)
        s.y[i] = 2.5 * s.x[0][i] - 1 + 0.05 * sin(7 * s.x[0][i]);
    s.data.y = s.y;
    assert_int_equal(gp_fit(m, &s.data, &o, err, sizeof(err)), 0);
    assert_int_equal(gp_n_params(m), 5);
    gp_get_params(m, theta);
    assert_true(fabs(theta[3] - 2.5) < 0.1);
    js = gp_to_json(m);
    assert_non_null(js);
    doc = json_tokener_parse(js);
    assert_non_null(doc);
    assert_string_equal(json_object_get_string(json_object_object_get(doc, "format")),
                        "wattprof-gp/1");
    assert_int_equal(json_object_array_length(json_object_object_get(doc, "params")), 5);
    assert_int_equal(json_object_array_length(json_object_object_get(doc, "alpha")), 60);
    json_object_put(doc);
    free(js);
    gp_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_fixed_vs_sklearn),
        cmocka_unit_test(test_optimised_vs_sklearn),
        cmocka_unit_test(test_loo_closed_equals_refit),
        cmocka_unit_test(test_duplicates_get_jitter),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_fit_mean_and_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
