/* expr-fit: Levenberg-Marquardt on an expression's constants (GSL's
 * gsl_multifit_nlinear), with the Jacobian from expr_eval_jac. */
#include "expr/expr-internal.h"
#include "learn/learn.h"

#include <errno.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_vector.h>
#include <math.h>
#include <stdlib.h>

/* ---- Levenberg-Marquardt on the constants ------------------------------ */

struct fit_ctx {
    const expr *e;
    const double *const *cols;
    const double *y, *w; /* w may be NULL: unit weights */
    size_t n, p;
    double *val, *jac; /* n and p*n scratch */
};

static int fit_f(const gsl_vector *x, void *data, gsl_vector *f)
{
    struct fit_ctx *ctx = data;
    expr *e = (expr *)ctx->e;

    expr_set_consts(e, x->data);
    if (!expr_eval(e, ctx->cols, ctx->n, ctx->val))
        return GSL_EDOM;
    for (size_t i = 0; i < ctx->n; i++)
        f->data[i * f->stride] = (ctx->val[i] - ctx->y[i]) * (ctx->w ? ctx->w[i] : 1);
    return GSL_SUCCESS;
}

static int fit_df(const gsl_vector *x, void *data, gsl_matrix *J)
{
    struct fit_ctx *ctx = data;
    expr *e = (expr *)ctx->e;

    expr_set_consts(e, x->data);
    if (!expr_eval_jac(e, ctx->cols, ctx->n, ctx->val, ctx->jac))
        return GSL_EDOM;
    for (size_t i = 0; i < ctx->n; i++)
        for (size_t k = 0; k < ctx->p; k++)
            J->data[i * J->tda + k] = ctx->jac[k * ctx->n + i] * (ctx->w ? ctx->w[i] : 1);
    return GSL_SUCCESS;
}

static double rss_of(const struct fit_ctx *ctx)
{
    double s = 0;

    if (!expr_eval(ctx->e, ctx->cols, ctx->n, ctx->val))
        return INFINITY;
    for (size_t i = 0; i < ctx->n; i++) {
        double r = (ctx->val[i] - ctx->y[i]) * (ctx->w ? ctx->w[i] : 1);
        s += r * r;
    }
    return isfinite(s) ? s : INFINITY;
}

/* Runs the solver from the current constants; leaves the best constants it
 * found in `e`. */
static void fit_run(struct fit_ctx *ctx, expr *e, int max_iter, double *best)
{
    gsl_multifit_nlinear_fdf fdf = {
        .f = fit_f, .df = fit_df, .n = ctx->n, .p = ctx->p, .params = ctx};
    gsl_multifit_nlinear_parameters par = gsl_multifit_nlinear_default_parameters();
    gsl_multifit_nlinear_workspace *w;
    int info;
    double start[ctx->p];

    expr_get_consts(e, start);
    gsl_vector_view x0 = gsl_vector_view_array(start, ctx->p);
    par.trs = gsl_multifit_nlinear_trs_lm;
    /* Normal equations: with LM's damping they stay well posed, and for a
     * handful of constants they are much cheaper than QR of the n x p
     * Jacobian. */
    par.solver = gsl_multifit_nlinear_solver_cholesky;

    w = gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &par, ctx->n, ctx->p);
    if (!w)
        return;
    if (gsl_multifit_nlinear_init(&x0.vector, &fdf, w) == GSL_SUCCESS) {
        gsl_multifit_nlinear_driver((size_t)max_iter, 1e-15, 1e-15, 0, NULL, NULL, &info, w);
        /* The trust region only accepts steps that lower the cost, so w->x
         * is the best point visited; it is still checked, because a failed
         * evaluation can stop the driver part-way. */
        expr_set_consts(e, w->x->data);
        double rss = rss_of(ctx);
        if (rss <= *best)
            *best = rss;
        else
            expr_set_consts(e, start);
    } else {
        expr_set_consts(e, start);
    }
    gsl_multifit_nlinear_free(w);
}

int expr_fit_consts(expr *e, const double *const *cols, const double *y, size_t n, int max_iter,
                    double *rss)
{
    return expr_fit_consts_weighted(e, cols, y, NULL, n, max_iter, rss);
}

int expr_fit_consts_weighted(expr *e, const double *const *cols, const double *y, const double *w,
                             size_t n, int max_iter, double *rss)
{
    struct fit_ctx ctx = {.e = e, .cols = cols, .y = y, .w = w, .n = n, .p = expr_n_consts(e)};
    double best;

    ctx.val = malloc((n ? n : 1) * sizeof(double));
    ctx.jac = malloc((n * ctx.p > 0 ? n * ctx.p : 1) * sizeof(double));
    if (!ctx.val || !ctx.jac) {
        free(ctx.val);
        free(ctx.jac);
        return -ENOMEM;
    }
    best = rss_of(&ctx);
    /* GSL needs at least as many points as parameters. */
    if (ctx.p > 0 && n >= ctx.p && max_iter > 0)
        fit_run(&ctx, e, max_iter, &best);
    if (rss)
        *rss = best;
    free(ctx.val);
    free(ctx.jac);
    return 0;
}
