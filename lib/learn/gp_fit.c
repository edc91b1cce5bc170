/* gp_fit: hyperparameters of the Gaussian process by maximising the log
 * marginal likelihood, and leave-one-out by refitting per fold.
 *
 * The optimiser is L-BFGS-B 3.0 (liblbfgsb), the code scipy's L-BFGS-B runs
 * for scikit-learn, with scipy's default settings: the bounded log
 * hyperparameters are optimised as they are, within their bounds, and the
 * mean's constants, unbounded, relative to their starting values. GSL's
 * BFGS with the bounds imposed through a logistic map needed about three
 * times as many evaluations for the same optimum. Restarts draw the log
 * hyperparameters uniformly within their bounds, as scikit-learn does. */
#include "learn/gp_internal.h"
#include "util/util.h"

#include <errno.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FIT_MAX_ITER 500
/* scipy's defaults for L-BFGS-B, which scikit-learn uses: 10 corrections;
 * stop when the relative decrease of -lml falls below factr machine
 * epsilons or the projected gradient below pgtol. */
#define FIT_CORRECTIONS 10
#define FIT_FACTR 1e7
#define FIT_PGTOL 1e-5
/* The best start is then polished with tighter tolerances, which takes the
 * last digits scikit-learn would leave (n = 1000, rbf+white: +5e-10
 * relative). Near the optimum most of its evaluations go to line searches
 * that find nothing, so it gets a few iterations only (measured at n = 200
 * and 1000: 3 iterations, 17-49 evaluations, reached what unlimited ones
 * did with 69 and 57). */
#define FIT_POLISH_FACTR 10
#define FIT_POLISH_PGTOL 1e-8
#define FIT_POLISH_ITER 3

/* L-BFGS-B's driver, setulb (gp_lapack.h), is Fortran with reverse
 * communication: it returns with task "FG" to have f and g evaluated at x,
 * "NEW_X" after each iteration, and anything else when done. task and
 * csave are 60 blank-padded characters whose lengths gfortran passes last;
 * logicals are ints. nbd: 0 free, 1 lower bound, 2 both, 3 upper; wa:
 * 2mn + 5n + 11m^2 + 8m doubles; iwa: 3n ints. */

#define LBFGSB_TASK_LEN 60

struct objective {
    gp_model *m;
    struct gp_work w;
    size_t p;
    double *lo, *hi; /* log bounds; +-HUGE_VAL for unbounded parameters */
    double *unit;    /* unbounded ones: theta = unit * x, unit = |starting value| */
    double *theta, *grad;
};

static bool bounded(const struct objective *o, size_t i)
{
    return isfinite(o->lo[i]) && isfinite(o->hi[i]);
}

/* -lml at x and its gradient g with respect to x; +inf (as scikit-learn
 * gives) where K cannot be factorised. */
static double evaluate(struct objective *o, const double *x, double *g)
{
    for (size_t i = 0; i < o->p; i++)
        o->theta[i] = bounded(o, i) ? x[i] : o->unit[i] * x[i];
    gp_set_params(o->m, o->theta);
    if (gp_evaluate(o->m, &o->w, o->grad) < 0 || !isfinite(o->w.lml)) {
        memset(g, 0, o->p * sizeof(double));
        return HUGE_VAL;
    }
    for (size_t i = 0; i < o->p; i++)
        g[i] = -o->grad[i] * (bounded(o, i) ? 1 : o->unit[i]);
    return -o->w.lml;
}

struct lbfgsb {
    int n, m, iprint, *nbd, *iwa, isave[44], lsave[4];
    double *l, *u, *g, *wa, dsave[29];
    char task[LBFGSB_TASK_LEN], csave[LBFGSB_TASK_LEN];
};

static void lbfgsb_free(struct lbfgsb *s)
{
    free(s->nbd);
    free(s->l);
}

static int lbfgsb_init(struct lbfgsb *s, const struct objective *o)
{
    size_t n = o->p, m = FIT_CORRECTIONS;

    memset(s, 0, sizeof(*s));
    s->n = (int)n;
    s->m = (int)m;
    s->iprint = -1;
    s->nbd = malloc(4 * n * sizeof(int));
    s->l = malloc((3 * n + 2 * m * n + 5 * n + 11 * m * m + 8 * m) * sizeof(double));
    if (!s->nbd || !s->l) {
        lbfgsb_free(s);
        return -ENOMEM;
    }
    s->iwa = s->nbd + n;
    s->u = s->l + n;
    s->g = s->u + n;
    s->wa = s->g + n;
    for (size_t i = 0; i < n; i++) {
        s->nbd[i] = bounded(o, i) ? 2 : 0;
        s->l[i] = bounded(o, i) ? o->lo[i] : 0;
        s->u[i] = bounded(o, i) ? o->hi[i] : 0;
    }
    return 0;
}

static void lbfgsb_set_task(struct lbfgsb *s, const char *task)
{
    memset(s->task, ' ', sizeof(s->task));
    memcpy(s->task, task, strlen(task));
}

/* One L-BFGS-B run from theta0; the optimum goes to theta_out, its lml to
 * *lml (-inf when not even the start could be evaluated). */
static int run_start(struct objective *o, const double *theta0, int max_iter, bool polish,
                     double *theta_out, double *lml)
{
    double factr = polish ? FIT_POLISH_FACTR : FIT_FACTR;
    double pgtol = polish ? FIT_POLISH_PGTOL : FIT_PGTOL, f = HUGE_VAL;
    double x[o->p];
    struct lbfgsb s;
    int iter = 0, r = lbfgsb_init(&s, o);

    if (r < 0)
        return r;
    /* An analytic mean's constants can be 1e-9 next to 1: optimising each
     * relative to its starting value keeps the steps commensurate. */
    for (size_t i = 0; i < o->p; i++) {
        o->unit[i] = theta0[i] != 0 && isfinite(theta0[i]) ? fabs(theta0[i]) : 1;
        x[i] = bounded(o, i) ? theta0[i] : theta0[i] / o->unit[i];
    }
    lbfgsb_set_task(&s, "START");
    for (;;) {
        o->m->la.setulb(&s.n, &s.m, x, s.l, s.u, s.nbd, &f, s.g, &factr, &pgtol, s.wa, s.iwa,
                        s.task, &s.iprint, s.csave, s.lsave, s.isave, s.dsave, LBFGSB_TASK_LEN,
                        LBFGSB_TASK_LEN);
        if (strncmp(s.task, "FG", 2) == 0)
            f = evaluate(o, x, s.g);
        else if (strncmp(s.task, "NEW_X", 5) != 0 || ++iter >= max_iter)
            break;
    }
    *lml = isfinite(f) ? -f : -HUGE_VAL;
    for (size_t i = 0; i < o->p; i++)
        theta_out[i] = bounded(o, i) ? x[i] : o->unit[i] * x[i];
    lbfgsb_free(&s);
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
        r = run_start(&o, best, FIT_POLISH_ITER, true, found, &lml);
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
