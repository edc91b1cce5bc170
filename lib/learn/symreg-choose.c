/* symreg-choose: which equation of a symbolic-regression run to report, and
 * how to print its constants. A run leaves a Pareto front of training error
 * against size; the most accurate end of it is usually bloated with terms
 * that fit the noise (or round-off), so the reported equation is the
 * smallest one the data cannot tell from the most accurate. Its constants
 * are then refitted, given standard errors from the Jacobian, and rounded to
 * the digits those standard errors leave meaningful. */
#include "learn/symreg-internal.h"

#include <errno.h>
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CV_FOLDS 5            /* cross-validation of the cv rule */
#define CV_ITERATIONS 50      /* Levenberg-Marquardt iterations of each fold's refit */
#define SCORE_WINDOW 1.5      /* the score rule looks within this factor of the lowest MSE */
#define POLISH_ITERATIONS 200 /* Levenberg-Marquardt iterations of the final refit */
#define POLY_TERMS 32         /* monomials of the longest expanded polynomial tried */

/* Rounding tries within these many standard errors, in turn. */
static const double factors[] = {1, 0.1, 0.01, 1e-3};

static const char *const rule_names[] = {"bic", "cv", "score", "accurate"};

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

/* Whether front item i fits the n rows to round-off with fewer constants
 * than rows. With as many constants as rows (n equations in n unknowns) an
 * equation can meet any data exactly, noise included: on 20 noisy rows a
 * 60-node sum of cosines with 20 constants did. Such a fit is no evidence
 * of the truth and is judged as an inexact one. */
static bool exact_fit(const symreg_result *res, size_t i, size_t n)
{
    return res->front[i].error <= res->floor && expr_n_consts(res->front[i].e) < n;
}

double symreg_bic(enum symreg_fitness f, double err, double floor, size_t size, size_t n)
{
    double e = err > floor ? err : floor, mse = f == SYMREG_MSE ? e : e * e;

    return (double)n * log(mse) + (double)size * log((double)n);
}

/* With as many nodes as rows an equation can thread every point, and
 * ln(MSE) falls without bound while the penalty stays finite: on 20 noisy
 * rows a 58-node equation won at 7 times the noise. Exact fits with fewer
 * constants than rows are kept (the truth may be that big; see exact_fit);
 * the rest must have fewer nodes than rows. */
bool symreg_bic_admits(double err, double floor, size_t size, size_t k, size_t n)
{
    return size < n || (err <= floor && k < n);
}

/* ---- Cross-validation ----------------------------------------------------
 * An equation that fits noise (a sin of a large constant through 20 points)
 * has a low training error and a high error on points it was not fitted
 * to. Each equation of the front keeps its shape and has its constants
 * refitted CV_FOLDS times, each time without one fold of the rows (row i
 * is in fold i mod CV_FOLDS), and is scored on the rows left out. */

struct cv {
    const double *const *x;
    size_t d;            /* features */
    const double *y, *w; /* w: 1/|y| under mape, else NULL */
    size_t n;
    double **cols; /* d columns of scratch: the rows fitted on */
    double *yfit, *wfit, *pred;
};

/* Squared (weighted) errors of e on each row, with constants fitted
 * without the row's fold, into sq[0..n); returns their mean. */
static double cv_errors(struct cv *cv, const expr *e, double *sq)
{
    size_t k = expr_n_consts(e), n_folds = cv->n < CV_FOLDS ? cv->n : CV_FOLDS;
    double sum = 0;

    for (size_t f = 0; f < n_folds; f++) {
        expr *t = expr_clone(e);
        size_t m = 0;
        if (!t)
            return NAN;
        for (size_t i = 0; i < cv->n; i++) {
            if (i % n_folds == f)
                continue;
            for (size_t j = 0; j < cv->d; j++)
                cv->cols[j][m] = cv->x[j][i];
            cv->yfit[m] = cv->y[i];
            cv->wfit[m++] = cv->w ? cv->w[i] : 1;
        }
        if (k > 0 && m >= k &&
            expr_fit_consts_weighted(t, (const double *const *)cv->cols, cv->yfit, cv->wfit, m,
                                     CV_ITERATIONS, NULL) < 0) {
            expr_free(t);
            return NAN;
        }
        bool ok = expr_eval(t, cv->x, cv->n, cv->pred);
        for (size_t i = f; i < cv->n; i += n_folds) {
            double r = ok ? (cv->pred[i] - cv->y[i]) * (cv->w ? cv->w[i] : 1) : INFINITY;
            sq[i] = isfinite(r * r) ? r * r : INFINITY;
        }
        expr_free(t);
    }
    for (size_t i = 0; i < cv->n; i++)
        sum += sq[i];
    return sum / (double)cv->n;
}

/* The one-standard-error rule (Breiman et al.): of the equations whose
 * cross-validated error is within one standard error of the lowest, the
 * smallest. */
static int one_se_rule(symreg_result *res, enum symreg_fitness f, const double *const *x, size_t d,
                       const double *y, size_t n, symreg_choice *out)
{
    struct cv cv = {.x = x, .d = d, .y = y, .n = n};
    double *w = NULL, *sq = malloc(n * sizeof(double));
    double *se = calloc(res->n_front, sizeof(double));
    double *cols = malloc((d * n + 1) * sizeof(double));
    double *scratch = malloc(3 * n * sizeof(double));
    double *colv[d ? d : 1];
    size_t lo = 0;
    int r = 0;

    if (f == SYMREG_MAPE && (w = malloc(n * sizeof(double))))
        for (size_t i = 0; i < n; i++)
            w[i] = 1 / fabs(y[i]);
    if (!sq || !se || !cols || !scratch || (f == SYMREG_MAPE && !w)) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t j = 0; j < d; j++)
        colv[j] = cols + j * n;
    cv.w = w;
    cv.cols = colv;
    cv.yfit = scratch;
    cv.wfit = scratch + n;
    cv.pred = scratch + 2 * n;
    for (size_t i = 0; i < res->n_front; i++) {
        double mean = cv_errors(&cv, res->front[i].e, sq), var = 0;
        if (isnan(mean)) {
            r = -ENOMEM;
            goto out;
        }
        for (size_t q = 0; q < n && isfinite(mean); q++)
            var += (sq[q] - mean) * (sq[q] - mean);
        res->front[i].cv_error = mean;
        se[i] = n > 1 && isfinite(mean) ? sqrt(var / (double)(n - 1) / (double)n) : INFINITY;
        if (mean < res->front[lo].cv_error)
            lo = i;
    }
    out->limit = res->front[lo].cv_error + se[lo];
    out->index = lo;
    for (size_t i = 0; i < lo; i++)
        if (res->front[i].cv_error <= out->limit) {
            out->index = i;
            break;
        }
    snprintf(out->why, sizeof(out->why),
             "the smallest equation whose %d-fold cross-validated mean squared%s error, %.4g, is "
             "within one standard error of the lowest, %.4g +- %.2g (size %zu)",
             n < CV_FOLDS ? (int)n : CV_FOLDS, f == SYMREG_MAPE ? " relative" : "",
             res->front[out->index].cv_error, res->front[lo].cv_error, se[lo], res->front[lo].size);
out:
    free(w);
    free(sq);
    free(se);
    free(cols);
    free(scratch);
    return r;
}

int symreg_choose(symreg_result *res, enum symreg_fitness f, enum symreg_rule rule,
                  const double *const *x, size_t n_features, const double *y, size_t n,
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
    if (rule == SYMREG_RULE_BIC) {
        double lowest = INFINITY, fl = res->floor;
        bool skipped = false;
        for (size_t i = 0; i <= last; i++) {
            const symreg_front_item *it = &res->front[i];
            if (!symreg_bic_admits(it->error, fl, it->size, expr_n_consts(it->e), n)) {
                skipped = true;
                continue;
            }
            double bic = symreg_bic(f, it->error, fl, it->size, n);
            if (bic < lowest) {
                lowest = bic;
                out->index = i;
            }
        }
        if (isinf(lowest)) /* n at most 1: every equation can thread the rows */
            out->index = 0;
        out->limit = res->front[out->index].error;
        const symreg_front_item *c = &res->front[out->index];
        snprintf(out->why, sizeof(out->why),
                 "the lowest n ln(MSE) + size ln(n) on the front, %.4g (training %s %.4g, size "
                 "%zu; every node counted as a parameter%s%s)",
                 lowest, fit, c->error, c->size,
                 c->error <= fl ? ", and errors below the round-off floor as the floor: the "
                                  "smallest exact fit"
                                : "",
                 skipped ? "; inexact equations of n or more nodes left out" : "");
        return 0;
    }
    if (rule != SYMREG_RULE_CV)
        return -EINVAL;
    size_t ex = 0;
    while (ex < res->n_front && !exact_fit(res, ex, n))
        ex++;
    if (ex < res->n_front) {
        out->limit = res->floor;
        out->index = ex;
        snprintf(out->why, sizeof(out->why),
                 "the smallest equation that fits the training data exactly (training %s %.3g, "
                 "at or below the round-off floor %.3g)",
                 fit, res->front[out->index].error, res->floor);
        return 0;
    }
    return one_se_rule(res, f, x, n_features, y, n, out);
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

/* Drops the constants of *e that the data cannot tell from 0, one at a
 * time from the first: each set to 0 and the equation simplified (a term
 * c * x goes, x + c becomes x), kept when the training RSS stays within
 * `allowed`. A search that found the right shape often carries such
 * leftovers, say 1e-15 * y, at coefficients too small for their standard
 * errors to round away on noiseless data. *dropped says whether any went. */
static int drop_constants(struct polish *pl, expr **e, double allowed, bool *dropped)
{
    *dropped = false;
    for (size_t q = 0; q < expr_n_consts(*e);) {
        size_t k = expr_n_consts(*e);
        double c[k];
        expr *t = expr_clone(*e), *s;
        if (!t)
            return -ENOMEM;
        expr_get_consts(t, c);
        c[q] = 0;
        expr_set_consts(t, c);
        s = expr_simplify(t);
        expr_free(t);
        if (!s)
            return -ENOMEM;
        if (s->n < (*e)->n && rss_of(pl, s) <= allowed) {
            expr_free(*e);
            *e = s;
            *dropped = true;
            q = 0; /* the constants are numbered anew */
        } else {
            expr_free(s);
            q++;
        }
    }
    return 0;
}

/* On an exact fit (RSS under the round-off floor) standard errors are
 * round-off too, yet a constant may be 1e-13 from a round number that fits
 * as exactly: each constant in turn takes the fewest significant digits
 * that keep the RSS within `allowed`, the others held. */
static void round_exact(struct polish *pl, expr *e, double allowed)
{
    size_t k = expr_n_consts(e);
    double c[k ? k : 1];
    char buf[40];

    expr_get_consts(e, c);
    for (size_t q = 0; q < k; q++) {
        double was = c[q];
        for (int d = 1; d <= 15; d++) {
            snprintf(buf, sizeof(buf), "%.*g", d, was);
            c[q] = strtod(buf, NULL);
            if (c[q] == was)
                break;
            expr_set_consts(e, c);
            if (rss_of(pl, e) <= allowed)
                break;
            c[q] = was;
        }
        expr_set_consts(e, c);
    }
}

/* Refits e's constants from where they are (they moved when others were
 * dropped), then rounds them as symreg_polish does; *out NULL when no
 * rounding keeps the RSS within `allowed`. */
static int refit_and_round(struct polish *pl, const expr *e, double allowed, expr **out)
{
    size_t k = expr_n_consts(e);
    expr *t = expr_clone(e);
    double se[k ? k : 1];
    int r = t ? 0 : -ENOMEM;

    *out = NULL;
    if (r == 0 && k > 0)
        r = expr_fit_consts_weighted(t, pl->x, pl->y, pl->w, pl->n, POLISH_ITERATIONS, NULL);
    if (r == 0)
        r = standard_errors(pl, t, k, rss_of(pl, t), se);
    for (size_t i = 0; i < sizeof(factors) / sizeof(factors[0]) && r == 0 && !*out && k; i++)
        r = try_rounding(pl, t, k, se, factors[i], allowed, out);
    if (r == 0 && !*out && rss_of(pl, t) <= allowed)
        *out = expr_simplify(t);
    expr_free(t);
    return r;
}

static int polish_form(const expr *e, enum symreg_fitness f, const double *const *x,
                       const double *y, size_t n, expr **out, symreg_const **consts,
                       size_t *n_consts)
{
    struct polish pl = {.x = x, .y = y, .n = n};
    double *w = NULL, rss, floor, allowed = 0;
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
        allowed = rss * (1 + (double)(k + 1) / (double)(n > k ? n - k : 1));
        if (allowed < floor)
            allowed = floor;
        for (size_t i = 0; i < sizeof(factors) / sizeof(factors[0]) && r == 0 && !best && k; i++)
            r = try_rounding(&pl, s, k, se, factors[i], allowed, &best);
    }
    if (r == 0 && !best)
        best = expr_clone(s);
    if (r == 0 && !best)
        r = -ENOMEM;
    bool dropped = false;
    if (r == 0 && k > 0) {
        r = drop_constants(&pl, &best, allowed, &dropped);
        expr *rounded = NULL;
        if (r == 0 && dropped && expr_n_consts(best) > 0)
            r = refit_and_round(&pl, best, allowed, &rounded);
        if (rounded) {
            expr_free(best);
            best = rounded;
        }
    }
    if (r == 0 && rss <= floor && expr_n_consts(best) > 0) {
        /* Only round-off moves: the RSS may reach a ten-thousandth of the
         * floor's (errors a hundredth of it, 1e-12 of the target). */
        double exact = floor * 1e-4 > rss * 1.01 ? floor * 1e-4 : rss * 1.01;
        expr *t;
        round_exact(&pl, best, exact);
        if (!(t = expr_simplify(best)))
            r = -ENOMEM;
        else if (t->n < best->n) /* a constant rounded to 0 or 1 */
            dropped = true;
        expr_free(best);
        best = t;
    }
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
        /* Rounding may also reorder the tree (x + -0.16 * y becomes
         * x - 0.16 * y): the search's constants then no longer line up. */
        bool same = kb == k && !dropped && symreg_same_shape(best, s);
        if (r == 0 && !same) /* rounding changed the shape: errors at the new one */
            r = standard_errors(&pl, best, kb, rss_of(&pl, best), se2);
        for (size_t q = 0; q < kb && r == 0; q++)
            cv[q] = (symreg_const){
                .fitted = same ? fitted[q] : v[q], .value = v[q], .se = same ? se[q] : se2[q]};
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

int symreg_polish(const expr *e, enum symreg_fitness f, const double *const *x, const double *y,
                  size_t n, expr **out, symreg_const **consts, size_t *n_consts)
{
    expr *poly = NULL, *pe = NULL, *s = NULL;
    symreg_const *pc = NULL;
    size_t pk = 0;
    int r = polish_form(e, f, x, y, n, out, consts, n_consts);

    if (r == 0 && !(s = expr_simplify(e))) /* x * y / y is a polynomial once simplified */
        r = -ENOMEM;
    if (r == 0)
        r = expr_expand_poly(s, POLY_TERMS, &poly);
    if (r == 0 && poly)
        r = polish_form(poly, f, x, y, n, &pe, &pc, &pk);
    /* The expanded polynomial, polished the same way, replaces the found
     * form when its nodes plus its constants (each a parameter fitted to
     * the data) are no more: an exact fit found as a product of factors or
     * with constants spread over levels is written as the sum of monomials
     * its constants round in, 0.25 * (6 * a * b * a + 16) as
     * 1.5 * square(a) * b + 4. */
    if (r == 0 && pe && expr_size(pe) + pk <= expr_size(*out) + *n_consts) {
        expr_free(*out);
        free(*consts);
        *out = pe;
        *consts = pc;
        *n_consts = pk;
        pe = NULL;
        pc = NULL;
    }
    expr_free(s);
    expr_free(poly);
    expr_free(pe);
    free(pc);
    if (r < 0 && *out) {
        expr_free(*out);
        free(*consts);
        *out = NULL;
        *consts = NULL;
        *n_consts = 0;
    }
    return r;
}
