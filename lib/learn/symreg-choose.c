/* symreg-choose: which equation of a symbolic-regression run to report, and
 * how to print its constants. A run leaves a Pareto front of training error
 * against size; the most accurate end of it is usually bloated with terms
 * that fit the noise (or round-off), so the reported equation is the
 * smallest one the data cannot tell from the most accurate. Its constants
 * are then refitted, given standard errors from the Jacobian, and rounded to
 * the digits those standard errors leave meaningful. */
#include "learn/expr-internal.h"

#include <errno.h>
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOISE_CONFIDENCE 0.95 /* the F test of the noise rule */
#define SCORE_WINDOW 1.5      /* the score rule looks within this factor of the lowest MSE */
#define POLISH_ITERATIONS 200 /* Levenberg-Marquardt iterations of the final refit */

static const char *const rule_names[] = {"noise", "score", "accurate"};

const char *symreg_rule_name(enum symreg_rule r)
{
    return r <= SYMREG_RULE_ACCURATE ? rule_names[r] : "?";
}

int symreg_rule_from_name(const char *name)
{
    for (int r = 0; r <= SYMREG_RULE_ACCURATE; r++)
        if (strcmp(rule_names[r], name) == 0)
            return r;
    return -EINVAL;
}

/* An error limit `ratio` times the lowest, with the ratio taken on mean
 * squared errors: mape and rmse scale like the root of one. */
static double scaled(enum symreg_fitness f, double err, double ratio)
{
    return f == SYMREG_MSE ? err * ratio : err * sqrt(ratio);
}

/* The mean squared error behind an error under f (mape counts as an rmse). */
static double variance(enum symreg_fitness f, double err)
{
    return f == SYMREG_MSE ? err : err * err;
}

/* The first (smallest) item with error at most limit. */
static size_t smallest_within(const symreg_result *res, double limit)
{
    for (size_t i = 0; i < res->n_front; i++)
        if (res->front[i].error <= limit)
            return i;
    return res->n_front - 1;
}

int symreg_choose(const symreg_result *res, enum symreg_fitness f, enum symreg_rule rule, size_t n,
                  symreg_choice *out)
{
    const char *fit = symreg_fitness_name(f);

    if (res->n_front == 0 || n == 0)
        return -EINVAL;
    size_t last = res->n_front - 1;
    const symreg_front_item *best = &res->front[last];
    *out = (symreg_choice){.index = last, .limit = best->error};

    if (rule == SYMREG_RULE_ACCURATE) {
        snprintf(out->why, sizeof(out->why),
                 "the most accurate equation on the front (training %s %.4g, size %zu)", fit,
                 best->error, best->size);
        return 0;
    }
    if (rule == SYMREG_RULE_SCORE) {
        double b = best->error > res->floor ? best->error : res->floor;
        out->limit = scaled(f, b, SCORE_WINDOW);
        for (size_t i = 0; i <= last; i++)
            if (res->front[i].error <= out->limit &&
                (res->front[out->index].error > out->limit ||
                 res->front[i].score > res->front[out->index].score))
                out->index = i;
        snprintf(out->why, sizeof(out->why),
                 "the highest score, -dlog(error)/dsize = %.4g, among the equations within %.3g "
                 "times the lowest mean squared error (training %s at most %.4g)",
                 res->front[out->index].score, SCORE_WINDOW, fit, out->limit);
        return 0;
    }
    if (rule != SYMREG_RULE_NOISE)
        return -EINVAL;
    if (best->error <= res->floor) {
        out->limit = res->floor;
        out->index = smallest_within(res, out->limit);
        snprintf(out->why, sizeof(out->why),
                 "the smallest equation that fits the training data exactly (training %s %.3g, "
                 "at or below the round-off floor %.3g)",
                 fit, res->front[out->index].error, res->floor);
        return 0;
    }
    /* Residual variances with the fitted constants' degrees of freedom
     * taken out, s^2 = n * mse / (n - k): the most accurate equation
     * usually has many constants and fits some of the noise. */
    size_t kb = expr_n_consts(best->e) + 1, kc = 0;
    double dfb = n > kb ? (double)(n - kb) : 1, vb = variance(f, best->error) * (double)n / dfb;
    double ratio = 1, q = 1;
    out->index = last;
    for (size_t i = 0; i <= last; i++) {
        kc = expr_n_consts(res->front[i].e) + 1;
        double dfc = n > kc ? (double)(n - kc) : 1;
        ratio = variance(f, res->front[i].error) * (double)n / dfc / vb;
        q = gsl_cdf_fdist_Pinv(NOISE_CONFIDENCE, dfc, dfb);
        if (ratio <= q || i == last) {
            out->index = i;
            break;
        }
    }
    out->limit = res->front[out->index].error;
    snprintf(out->why, sizeof(out->why),
             "the smallest equation within the noise of the most accurate one (size %zu, "
             "training %s %.4g): its residual variance is %.3g times that, under %.3g, the "
             "%g %% point of F(%zu, %.0f)",
             best->size, fit, best->error, ratio, q, 100 * NOISE_CONFIDENCE, n > kc ? n - kc : 1,
             dfb);
    return 0;
}

/* ---- Polishing ----------------------------------------------------------- */

struct polish {
    const double *const *x;
    const double *y, *w; /* w NULL: unit weights */
    size_t n;
    double *val, *jac; /* n and n * (constants) scratch */
};

/* Weighted residual sum of squares of e. */
static double rss_of(struct polish *pl, const expr *e)
{
    double s = 0;

    if (!expr_eval(e, pl->x, pl->n, pl->val))
        return INFINITY;
    for (size_t i = 0; i < pl->n; i++) {
        double r = (pl->val[i] - pl->y[i]) * (pl->w ? pl->w[i] : 1);
        s += r * r;
    }
    return isfinite(s) ? s : INFINITY;
}

/* Standard errors of e's k constants at their current values: the square
 * roots of the diagonal of s^2 (J'J)^-1, s^2 = RSS / (n - k). NaN where
 * J'J is singular (a constant the data cannot pin down) or n <= k. */
static int standard_errors(struct polish *pl, const expr *e, size_t k, double rss, double *se)
{
    gsl_matrix *a = gsl_matrix_calloc(k, k);
    int r = 0;

    for (size_t q = 0; q < k; q++)
        se[q] = NAN;
    if (!a)
        return -ENOMEM;
    if (pl->n > k && expr_eval_jac(e, pl->x, pl->n, pl->val, pl->jac)) {
        for (size_t i = 0; i < pl->n; i++) {
            double w2 = pl->w ? pl->w[i] * pl->w[i] : 1;
            for (size_t p = 0; p < k; p++)
                for (size_t q = 0; q <= p; q++)
                    *gsl_matrix_ptr(a, p, q) +=
                        pl->jac[p * pl->n + i] * pl->jac[q * pl->n + i] * w2;
        }
        for (size_t p = 0; p < k; p++)
            for (size_t q = 0; q < p; q++)
                gsl_matrix_set(a, q, p, gsl_matrix_get(a, p, q));
        double s2 = rss / (double)(pl->n - k);
        if (gsl_linalg_cholesky_decomp1(a) == GSL_SUCCESS &&
            gsl_linalg_cholesky_invert(a) == GSL_SUCCESS)
            for (size_t q = 0; q < k; q++) {
                double v = s2 * gsl_matrix_get(a, q, q);
                se[q] = v >= 0 && isfinite(v) ? sqrt(v) : NAN;
            }
    }
    gsl_matrix_free(a);
    return r;
}

/* The number with the fewest significant digits within tol of c. */
static double round_within(double c, double tol)
{
    char buf[40];

    if (!(tol > 0) || !isfinite(c))
        return c;
    if (fabs(c) <= tol) /* indistinguishable from none: simplification drops it */
        return 0;
    for (int d = 1; d <= 17; d++) {
        snprintf(buf, sizeof(buf), "%.*g", d, c);
        double v = strtod(buf, NULL);
        if (fabs(v - c) <= tol)
            return v;
    }
    return c;
}

/* Rounds the constants of e (k of them, standard errors se) to within
 * `factor` standard errors each; *out is NULL when that breaks `allowed`. */
static int try_rounding(struct polish *pl, const expr *e, size_t k, const double *se, double factor,
                        double allowed, expr **out)
{
    double c[k > 0 ? k : 1];
    expr *t = expr_clone(e), *s;

    *out = NULL;
    if (!t)
        return -ENOMEM;
    expr_get_consts(t, c);
    for (size_t q = 0; q < k; q++) {
        /* Round-off bounds what any fit can pin down. */
        double floor = 1e-15 * fabs(c[q]), sq = isnan(se[q]) ? 0 : se[q];
        c[q] = round_within(c[q], factor * (sq > floor ? sq : floor));
    }
    expr_set_consts(t, c);
    s = expr_simplify(t);
    expr_free(t);
    if (!s)
        return -ENOMEM;
    if (rss_of(pl, s) <= allowed)
        *out = s;
    else
        expr_free(s);
    return 0;
}

int symreg_polish(const expr *e, enum symreg_fitness f, const double *const *x, const double *y,
                  size_t n, expr **out, symreg_const **consts, size_t *n_consts)
{
    static const double factors[] = {1, 0.1, 0.01, 1e-3};
    struct polish pl = {.x = x, .y = y, .n = n};
    double *w = NULL, rss, floor;
    expr *s = expr_simplify(e), *best = NULL;
    size_t k = s ? expr_n_consts(s) : 0;
    int r = s ? 0 : -ENOMEM;

    *out = NULL;
    *consts = NULL;
    *n_consts = 0;
    if (r == 0 && f == SYMREG_MAPE) {
        if (!(w = malloc(n * sizeof(double))))
            r = -ENOMEM;
        for (size_t i = 0; w && i < n; i++)
            w[i] = 1 / fabs(y[i]);
    }
    pl.w = w;
    pl.val = malloc((n ? n : 1) * sizeof(double));
    pl.jac = malloc((n * k > 0 ? n * k : 1) * sizeof(double));
    double *se = malloc((k ? k : 1) * sizeof(double)),
           *fitted = malloc((k ? k : 1) * sizeof(double));
    if (r == 0 && (!pl.val || !pl.jac || !se || !fitted))
        r = -ENOMEM;
    if (r == 0 && k > 0)
        r = expr_fit_consts_weighted(s, x, y, w, n, POLISH_ITERATIONS, NULL);
    if (r == 0) {
        rss = rss_of(&pl, s);
        expr_get_consts(s, fitted);
        r = standard_errors(&pl, s, k, rss, se);
    }
    if (r == 0) {
        /* What rounding may cost: about one standard error on each constant
         * raises the RSS by s^2 each; and anything under the exact floor. */
        double fl = symreg_error_floor(f == SYMREG_MAPE ? SYMREG_MAPE : SYMREG_RMSE, y, n);
        floor = (double)n * fl * fl;
        double allowed = rss * (1 + (double)(k + 1) / (double)(n > k ? n - k : 1));
        if (allowed < floor)
            allowed = floor;
        for (size_t i = 0; i < sizeof(factors) / sizeof(factors[0]) && r == 0 && !best && k; i++)
            r = try_rounding(&pl, s, k, se, factors[i], allowed, &best);
    }
    if (r == 0 && !best)
        best = expr_clone(s);
    if (r == 0 && !best)
        r = -ENOMEM;
    size_t kb = best ? expr_n_consts(best) : 0;
    symreg_const *cv = r == 0 ? calloc(kb ? kb : 1, sizeof(*cv)) : NULL;
    if (r == 0 && !cv)
        r = -ENOMEM;
    if (r == 0) {
        double v[kb ? kb : 1], se2[kb ? kb : 1];
        expr_get_consts(best, v);
        if (kb > k) {
            double *j = realloc(pl.jac, n * kb * sizeof(double));
            if (j)
                pl.jac = j;
            else
                r = -ENOMEM;
        }
        if (r == 0 && kb != k) /* rounding changed the shape: errors at the new one */
            r = standard_errors(&pl, best, kb, rss_of(&pl, best), se2);
        for (size_t q = 0; q < kb && r == 0; q++)
            cv[q] = (symreg_const){.fitted = kb == k ? fitted[q] : v[q],
                                   .value = v[q],
                                   .se = kb == k ? se[q] : se2[q]};
    }
    if (r == 0) {
        *out = best;
        *consts = cv;
        *n_consts = kb;
    } else {
        expr_free(best);
        free(cv);
    }
    expr_free(s);
    free(w);
    free(pl.val);
    free(pl.jac);
    free(se);
    free(fitted);
    return r;
}
