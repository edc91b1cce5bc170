/* gp_fit: hyperparameters of the Gaussian process by maximising the log
 * marginal likelihood, and leave-one-out by refitting per fold.
 *
 * GSL's BFGS is unconstrained, so each bounded log hyperparameter theta is
 * optimised through u with theta = lo + (hi - lo) / (1 + e^-u); the mean's
 * constants are optimised as they are. Restarts draw the log
 * hyperparameters uniformly within their bounds, as scikit-learn does. */
#include "learn/gp_internal.h"
#include "util/util.h"

#include <errno.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_multimin.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FIT_MAX_ITER 500
/* Convergence as L-BFGS-B's defaults in scipy (which scikit-learn uses): a
 * small gradient, or a relative decrease of -lml below 1e7 machine epsilons
 * over one iteration. */
#define FIT_GRAD_TOL 1e-5 /* on the gradient with respect to u */
#define FIT_REL_TOL 2.220446049250313e-09
/* The best start is then polished on the gradient alone: a few cheap
 * iterations that take the last digits scikit-learn would leave. */
#define FIT_POLISH_TOL 1e-8
/* BFGS's first trial step in u; larger ones waste evaluations on the far
 * side of the first valley (measured: 0.1 took twice the evaluations). */
#define FIT_FIRST_STEP 0.01

struct objective {
    gp_model *m;
    struct gp_work w;
    size_t p;
    double *lo, *hi; /* log bounds; +-HUGE_VAL for unbounded parameters */
    double *unit;    /* unbounded ones: theta = unit * u, unit = |starting value| */
    double *theta, *grad;
};

static bool bounded(const struct objective *o, size_t i)
{
    return isfinite(o->lo[i]) && isfinite(o->hi[i]);
}

static void to_theta(const struct objective *o, const gsl_vector *u, double *theta)
{
    for (size_t i = 0; i < o->p; i++) {
        double v = gsl_vector_get(u, i);
        theta[i] =
            bounded(o, i) ? o->lo[i] + (o->hi[i] - o->lo[i]) / (1 + exp(-v)) : o->unit[i] * v;
    }
}

static double to_u(const struct objective *o, size_t i, double theta)
{
    double span, t;

    if (!bounded(o, i))
        return theta / o->unit[i];
    span = o->hi[i] - o->lo[i];
    t = (theta - o->lo[i]) / span;
    t = t < 1e-9 ? 1e-9 : t > 1 - 1e-9 ? 1 - 1e-9 : t;
    return log(t / (1 - t));
}

/* -lml and its gradient with respect to u. */
static double eval_u(const gsl_vector *u, void *ctx, gsl_vector *g)
{
    struct objective *o = ctx;

    to_theta(o, u, o->theta);
    gp_set_params(o->m, o->theta);
    if (gp_evaluate(o->m, &o->w, g ? o->grad : NULL) < 0 || !isfinite(o->w.lml)) {
        if (g)
            gsl_vector_set_zero(g);
        return GSL_POSINF;
    }
    for (size_t i = 0; g && i < o->p; i++) {
        double dt = o->unit[i];
        if (bounded(o, i))
            dt = (o->theta[i] - o->lo[i]) * (o->hi[i] - o->theta[i]) / (o->hi[i] - o->lo[i]);
        gsl_vector_set(g, i, -o->grad[i] * dt);
    }
    return -o->w.lml;
}

static double obj_f(const gsl_vector *u, void *ctx)
{
    return eval_u(u, ctx, NULL);
}

static void obj_df(const gsl_vector *u, void *ctx, gsl_vector *g)
{
    eval_u(u, ctx, g);
}

static void obj_fdf(const gsl_vector *u, void *ctx, double *f, gsl_vector *g)
{
    *f = eval_u(u, ctx, g);
}

/* One BFGS run from theta0; the optimum goes to theta_out, its lml to *lml
 * (-inf when the start could not even be evaluated). */
static int run_start(struct objective *o, const double *theta0, int max_iter, bool polish,
                     double *theta_out, double *lml)
{
    gsl_multimin_function_fdf fn = {obj_f, obj_df, obj_fdf, o->p, o};
    gsl_multimin_fdfminimizer *s =
        gsl_multimin_fdfminimizer_alloc(gsl_multimin_fdfminimizer_vector_bfgs2, o->p);
    gsl_vector *u = gsl_vector_alloc(o->p);
    gsl_error_handler_t *old;

    if (!s || !u) {
        gsl_multimin_fdfminimizer_free(s);
        gsl_vector_free(u);
        return -ENOMEM;
    }
    /* An analytic mean's constants can be 1e-9 next to 1: optimising each
     * relative to its starting value keeps BFGS's steps commensurate. */
    for (size_t i = 0; i < o->p; i++) {
        o->unit[i] = theta0[i] != 0 && isfinite(theta0[i]) ? fabs(theta0[i]) : 1;
        gsl_vector_set(u, i, to_u(o, i, theta0[i]));
    }
    *lml = -HUGE_VAL;
    old = gsl_set_error_handler_off(); /* a failed line search ends the start, not the program */
    if (gsl_multimin_fdfminimizer_set(s, &fn, u, FIT_FIRST_STEP, 0.1) == 0 && isfinite(s->f)) {
        for (int it = 0; it < max_iter; it++) {
            double before = s->f;
            if (gsl_multimin_fdfminimizer_iterate(s) != 0)
                break;
            if (gsl_multimin_test_gradient(s->gradient, polish ? FIT_POLISH_TOL : FIT_GRAD_TOL) ==
                GSL_SUCCESS)
                break;
            if (!polish && before - s->f <= FIT_REL_TOL * fmax(fmax(fabs(before), fabs(s->f)), 1))
                break;
        }
        if (isfinite(s->f)) {
            *lml = -s->f;
            to_theta(o, s->x, theta_out);
        }
    }
    gsl_set_error_handler(old);
    gsl_multimin_fdfminimizer_free(s);
    gsl_vector_free(u);
    return 0;
}

static int optimise(gp_model *m, const gp_data *data, const double *X, const gp_fit_options *opt)
{
    struct objective o = {.m = m, .p = gp_n_params(m)};
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    double *start = malloc((o.p ? o.p : 1) * 6 * sizeof(double)), *best, *found, best_lml;
    double lml;
    int r, max_iter = opt && opt->max_iter > 0 ? opt->max_iter : FIT_MAX_ITER;

    if (!rng || !start) {
        gsl_rng_free(rng);
        free(start);
        return -ENOMEM;
    }
    o.lo = start + o.p;
    o.hi = start + 2 * o.p;
    best = start + 3 * o.p;
    found = start + 4 * o.p;
    o.unit = start + 5 * o.p;
    o.theta = malloc((o.p ? o.p : 1) * 2 * sizeof(double));
    r = o.theta ? gp_work_init(&o.w, m, X, data->cols, data->y, data->n) : -ENOMEM;
    if (r < 0)
        goto out;
    o.grad = o.theta + o.p;
    gsl_rng_set(rng, opt ? opt->seed : 0);
    for (size_t i = 0; i < o.p; i++)
        gp_param_bounds(m, i, &o.lo[i], &o.hi[i]);
    gp_get_params(m, start);
    memcpy(best, start, o.p * sizeof(double));
    best_lml = -HUGE_VAL;
    for (int s = 0; o.p > 0 && s <= (opt ? opt->restarts : 0); s++) {
        if (s > 0)
            for (size_t i = 0; i < o.p; i++)
                if (bounded(&o, i))
                    start[i] = gsl_ran_flat(rng, o.lo[i], o.hi[i]);
        r = run_start(&o, start, max_iter, false, found, &lml);
        if (r < 0)
            break;
        if (lml > best_lml) {
            best_lml = lml;
            memcpy(best, found, o.p * sizeof(double));
        }
    }
    if (r == 0 && o.p > 0 && isfinite(best_lml)) {
        r = run_start(&o, best, max_iter, true, found, &lml);
        if (r == 0 && lml > best_lml)
            memcpy(best, found, o.p * sizeof(double));
    }
    gp_set_params(m, best);
out:
    gp_work_free(&o.w);
    free(o.theta);
    free(start);
    gsl_rng_free(rng);
    return r;
}

int gp_fit(gp_model *m, const gp_data *data, const gp_fit_options *o, char *err, size_t errlen)
{
    double *X;
    int r;

    if (data->n < 3)
        return util_err(err, errlen, -EINVAL, "need at least 3 rows to fit a GP, got %zu", data->n);
    gp_set_scaling(m, data);
    if (!m->mean_ready) {
        r = gp_meanfn_init(m->mean, data->cols, data->y, data->n);
        if (r < 0)
            return util_err(err, errlen, r, "fitting the mean function's constants to y failed");
        m->mean_ready = true;
    }
    if (!(X = gp_scaled_rows(m, data->cols, data->n)))
        return util_err(err, errlen, -ENOMEM, "out of memory");
    r = optimise(m, data, X, o);
    free(X);
    if (r < 0)
        return util_err(err, errlen, r, "out of memory");
    return gp_condition(m, data, err, errlen);
}

/* Fits a clone of m without point i and predicts it. */
static int refit_one(const gp_model *m, const gp_data *data, size_t i, double **sub, double *ysub,
                     const gp_fit_options *o, double *mean, double *var, char *err, size_t errlen)
{
    size_t n = data->n, d = m->d;
    const double *xi[d ? d : 1];
    gp_data fold = {(const double *const *)sub, ysub, n - 1};
    gp_model *c = gp_clone(m);
    int r;

    if (!c)
        return util_err(err, errlen, -ENOMEM, "out of memory");
    for (size_t j = 0; j < d; j++) {
        memcpy(sub[j], data->cols[j], i * sizeof(double));
        memcpy(sub[j] + i, data->cols[j] + i + 1, (n - i - 1) * sizeof(double));
        xi[j] = data->cols[j] + i;
    }
    memcpy(ysub, data->y, i * sizeof(double));
    memcpy(ysub + i, data->y + i + 1, (n - i - 1) * sizeof(double));
    r = gp_fit(c, &fold, o, err, errlen);
    if (r == 0 && (r = gp_predict(c, xi, 1, mean, var)) < 0)
        util_err(err, errlen, r, "predicting left-out row %zu failed", i + 1);
    gp_free(c);
    return r;
}

int gp_loo_refit(const gp_model *m, const gp_data *data, const gp_fit_options *o, double *mean,
                 double *var, char *err, size_t errlen)
{
    size_t n = data->n, d = m->d;
    double *sub[d ? d : 1], *ysub = malloc((n ? n : 1) * sizeof(double));
    int r = ysub ? 0 : -ENOMEM;

    if (n < 4)
        r = util_err(err, errlen, -EINVAL, "need at least 4 rows for leave-one-out, got %zu", n);
    for (size_t j = 0; j < d; j++)
        if (!(sub[j] = malloc((n ? n : 1) * sizeof(double))))
            r = -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++)
        r = refit_one(m, data, i, sub, ysub, o, mean + i, var ? var + i : NULL, err, errlen);
    for (size_t j = 0; j < d; j++)
        free(sub[j]);
    free(ysub);
    if (r == -ENOMEM)
        util_err(err, errlen, r, "out of memory");
    return r;
}
