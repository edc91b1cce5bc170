/* expr-fit: Levenberg-Marquardt on an expression's constants, with the
 * Jacobian from expr_eval_jac.
 *
 * Equations have few constants (rarely over 20) and few rows (tens to
 * thousands), and symbolic regression fits every new individual, so the
 * solver is written for that size: the normal equations JᵀJ are formed
 * directly and solved by Cholesky with Marquardt's damping (λ times JᵀJ's
 * diagonal), one small allocation per fit. A general solver (GSL's
 * gsl_multifit_nlinear, used before) spent as much time in its reference
 * BLAS calls and workspace as in evaluating the equation. */
#include "expr/expr-internal.h"
#include "learn/learn.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A step that moves every constant by less than FIT_XTOL of its size (plus
 * FIT_XTOL), or lowers the sum by less than FIT_FTOL of it, has converged;
 * λ beyond FIT_LAMBDA_MAX means no step lowers the sum any more. */
#define FIT_XTOL 1e-10
#define FIT_FTOL 1e-10
#define FIT_LAMBDA0 1e-3
#define FIT_LAMBDA_MAX 1e16
/* The search's fits (expr_fit_consts_search) stop sooner: a sum lowered by
 * less than SEARCH_FTOL of it, or a step rejected SEARCH_REJECTS times in a
 * row (λ grown a millionfold: a gradient step too short to matter), ends
 * the fit. Selection cannot tell such a fit from a converged one. */
#define SEARCH_FTOL 1e-6
#define SEARCH_REJECTS 6

struct fit_ctx {
    expr *e;
    double ftol, goal; /* converged below ftol relative change, or at a sum <= goal */
    int rejects;       /* rejected steps in a row that end the fit */
    const double *const *cols;
    const double *y, *w; /* w may be NULL: unit weights */
    size_t n, p;
    double *val, *jac; /* n and p*n scratch */
};

static double weight(const struct fit_ctx *ctx, size_t i)
{
    return ctx->w ? ctx->w[i] : 1;
}

/* Weighted residual sum of squares at the constants in ctx->e; INFINITY
 * when the equation is not finite there. */
static double rss_of(const struct fit_ctx *ctx)
{
    double s = 0;

    if (!expr_eval(ctx->e, ctx->cols, ctx->n, ctx->val))
        return INFINITY;
    for (size_t i = 0; i < ctx->n; i++) {
        double r = (ctx->val[i] - ctx->y[i]) * weight(ctx, i);
        s += r * r;
    }
    return isfinite(s) ? s : INFINITY;
}

/* The dot product of two columns of n, in four running sums so that the
 * additions overlap (this is most of the solver's own time). */
static double dot(const double *a, const double *b, size_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;

    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++)
        s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

/* a = JᵀJ (p x p, full) and g = Jᵀr at the current constants; false when
 * the equation or its derivatives are not finite there. */
static bool normal_equations(const struct fit_ctx *ctx, double *a, double *g)
{
    size_t n = ctx->n, p = ctx->p;

    if (!expr_eval_jac(ctx->e, ctx->cols, n, ctx->val, ctx->jac))
        return false;
    for (size_t k = 0; k < p; k++) {
        double *jk = ctx->jac + k * n;
        double s = 0;
        for (size_t i = 0; i < n; i++) {
            double w = weight(ctx, i);
            jk[i] *= w;
            s += jk[i] * (ctx->val[i] - ctx->y[i]) * w;
        }
        g[k] = s;
    }
    for (size_t k = 0; k < p; k++)
        for (size_t l = 0; l <= k; l++)
            a[k * p + l] = a[l * p + k] = dot(ctx->jac + k * n, ctx->jac + l * n, n);
    return true;
}

/* Solves (a + lambda * diag(a)) d = -g by Cholesky into d, using m (p x p)
 * as scratch; false when the damped matrix is not positive definite. */
static bool damped_step(size_t p, const double *a, const double *g, double lambda, double *m,
                        double *d)
{
    double scale = 0;

    for (size_t k = 0; k < p; k++)
        if (a[k * p + k] > scale)
            scale = a[k * p + k];
    if (!(scale > 0))
        return false;
    for (size_t k = 0; k < p; k++) {
        for (size_t l = 0; l <= k; l++)
            m[k * p + l] = a[k * p + l];
        /* A constant the data cannot see still gets a little damping. */
        double dk = a[k * p + k] > 1e-12 * scale ? a[k * p + k] : 1e-12 * scale;
        m[k * p + k] += lambda * dk;
    }
    for (size_t k = 0; k < p; k++) { /* m = L Lᵀ, L in the lower triangle */
        for (size_t l = 0; l < k; l++) {
            double s = m[k * p + l];
            for (size_t q = 0; q < l; q++)
                s -= m[k * p + q] * m[l * p + q];
            m[k * p + l] = s / m[l * p + l];
        }
        double s = m[k * p + k];
        for (size_t q = 0; q < k; q++)
            s -= m[k * p + q] * m[k * p + q];
        if (!(s > 0))
            return false;
        m[k * p + k] = sqrt(s);
    }
    for (size_t k = 0; k < p; k++) { /* L z = -g */
        double s = -g[k];
        for (size_t q = 0; q < k; q++)
            s -= m[k * p + q] * d[q];
        d[k] = s / m[k * p + k];
    }
    for (size_t k = p; k-- > 0;) { /* Lᵀ d = z */
        double s = d[k];
        for (size_t q = k + 1; q < p; q++)
            s -= m[q * p + k] * d[q];
        d[k] = s / m[k * p + k];
    }
    for (size_t k = 0; k < p; k++)
        if (!isfinite(d[k]))
            return false;
    return true;
}

/* At most max_iter accepted steps from the current constants. Only steps
 * that lower the sum are taken, so the constants left in ctx->e are the
 * best visited, and *best their sum. scratch holds 2p² + 4p doubles. */
static void fit_run(struct fit_ctx *ctx, int max_iter, double *best, double *scratch)
{
    size_t p = ctx->p;
    double *a = scratch, *m = a + p * p, *g = m + p * p, *d = g + p, *c = d + p, *trial = c + p;
    double lambda = FIT_LAMBDA0, nu = 2;

    expr_get_consts(ctx->e, c);
    for (int it = 0; it < max_iter; it++) {
        if (!(*best > ctx->goal)) /* exact, or as close as the caller needs */
            break;
        bool accepted = false, converged = false;
        int rejected = 0;

        if (!normal_equations(ctx, a, g))
            break;
        while (!accepted && lambda <= FIT_LAMBDA_MAX && rejected < ctx->rejects) {
            rejected++;
            if (!damped_step(p, a, g, lambda, m, d)) {
                lambda *= nu;
                nu *= 2;
                continue;
            }
            for (size_t k = 0; k < p; k++)
                trial[k] = c[k] + d[k];
            expr_set_consts(ctx->e, trial);
            double rss = rss_of(ctx);
            if (rss < *best) {
                bool small_step = true;
                for (size_t k = 0; k < p; k++)
                    small_step &= fabs(d[k]) <= FIT_XTOL * (fabs(c[k]) + FIT_XTOL);
                converged = small_step || *best - rss <= ctx->ftol * *best;
                accepted = true;
                /* Nielsen's update: λ shrinks as far as the quadratic model
                 * predicted the drop well (ρ near 1), by at most 3. */
                double pred = 0;
                for (size_t k = 0; k < p; k++) {
                    double ad = 0;
                    for (size_t l = 0; l < p; l++)
                        ad += a[k * p + l] * d[l];
                    pred -= 2 * g[k] * d[k] + d[k] * ad;
                }
                double rho = pred > 0 ? (*best - rss) / pred : 0, t = 2 * rho - 1;
                double f = 1 - t * t * t;
                lambda *= f > 1.0 / 3 ? f : 1.0 / 3;
                if (lambda < 1e-12)
                    lambda = 1e-12;
                nu = 2;
                *best = rss;
                memcpy(c, trial, p * sizeof(double));
            } else {
                lambda *= nu;
                nu *= 2;
            }
        }
        expr_set_consts(ctx->e, c);
        if (!accepted || converged)
            break;
    }
}

/* Fits the constants of c->e (its tolerances set) to y from where they are. */
static int fit(struct fit_ctx *c, const double *const *cols, const double *y, const double *w,
               size_t n, int max_iter, double *rss)
{
    struct fit_ctx ctx = *c;
    double best, *scratch;

    ctx.cols = cols, ctx.y = y, ctx.w = w, ctx.n = n, ctx.p = expr_n_consts(ctx.e);
    size_t p = ctx.p;
    ctx.val = malloc((n ? n : 1) * sizeof(double));
    ctx.jac = malloc((n * p > 0 ? n * p : 1) * sizeof(double));
    scratch = malloc((2 * p * p + 4 * p + 1) * sizeof(double));
    if (!ctx.val || !ctx.jac || !scratch) {
        free(ctx.val);
        free(ctx.jac);
        free(scratch);
        return -ENOMEM;
    }
    best = rss_of(&ctx);
    /* Fewer points than constants leave them undetermined: left alone. */
    if (p > 0 && n >= p && max_iter > 0 && isfinite(best))
        fit_run(&ctx, max_iter, &best, scratch);
    if (rss)
        *rss = best;
    free(ctx.val);
    free(ctx.jac);
    free(scratch);
    return 0;
}

int expr_fit_consts(expr *e, const double *const *cols, const double *y, size_t n, int max_iter,
                    double *rss)
{
    return expr_fit_consts_weighted(e, cols, y, NULL, n, max_iter, rss);
}

int expr_fit_consts_weighted(expr *e, const double *const *cols, const double *y, const double *w,
                             size_t n, int max_iter, double *rss)
{
    struct fit_ctx ctx = {.e = e, .ftol = FIT_FTOL, .goal = 0, .rejects = INT_MAX};

    return fit(&ctx, cols, y, w, n, max_iter, rss);
}

int expr_fit_consts_search(expr *e, const double *const *cols, const double *y, const double *w,
                           size_t n, int max_iter, double goal, double *rss)
{
    struct fit_ctx ctx = {.e = e, .ftol = SEARCH_FTOL, .goal = goal, .rejects = SEARCH_REJECTS};

    return fit(&ctx, cols, y, w, n, max_iter, rss);
}
