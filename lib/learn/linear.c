/* linear: OLS, ridge and lasso with scikit-learn's conventions.
 *
 * Every fit starts from the centred Gram matrix G = Xc'Xc and b = Xc'yc of
 * the scaled training rows, accumulated in blocks of rows so the data is
 * read twice (means, then products) and never copied: a 1,000,000 x 44 fit
 * needs p x p numbers of memory, not n x p.  Centring removes the
 * intercept from the problem, which is how scikit-learn keeps it
 * unpenalised; it is recovered as b0 = mean(y) - w . mean(x). */
#include "learn/learn.h"
#include "util/util.h"

#include <errno.h>
#include <float.h>
#include <gsl/gsl_eigen.h>
#include <gsl/gsl_linalg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 256 /* rows per block: p columns of it stay in L2 */

struct gram {
    size_t p, n;
    double *mean; /* of the scaled features */
    double ymean;
    double *G; /* p x p, row-major, symmetric */
    double *b; /* Xc' yc */
};

static void gram_free(struct gram *g)
{
    free(g->mean);
    free(g->G);
    free(g->b);
}

static void gram_means(struct gram *g, const scaler *sc, const double *const *x, const double *y,
                       const size_t *rows, size_t n)
{
    double ys = 0;

    for (size_t j = 0; j < g->p; j++) {
        double s = 0;
        for (size_t i = 0; i < n; i++)
            s += scaler_apply(sc, j, x[j][rows ? rows[i] : i]);
        g->mean[j] = s / (double)n;
    }
    for (size_t i = 0; i < n; i++)
        ys += y[rows ? rows[i] : i];
    g->ymean = ys / (double)n;
}

/* Adds one block of m centred rows, stored column by column in buf
 * (p columns of BLOCK) with the centred targets in yb. Four products of
 * column j at a time: four independent sums keep the FPU busy and column j
 * is read once per four. */
static void gram_add_block(struct gram *g, const double *buf, const double *yb, size_t m)
{
    size_t p = g->p;

    for (size_t j = 0; j < p; j++) {
        const double *bj = buf + j * BLOCK;
        size_t k = j;
        for (; k + 4 <= p; k += 4) {
            const double *b0 = buf + k * BLOCK, *b1 = b0 + BLOCK, *b2 = b1 + BLOCK,
                         *b3 = b2 + BLOCK;
            double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            for (size_t r = 0; r < m; r++) {
                s0 += bj[r] * b0[r];
                s1 += bj[r] * b1[r];
                s2 += bj[r] * b2[r];
                s3 += bj[r] * b3[r];
            }
            g->G[j * p + k] += s0;
            g->G[j * p + k + 1] += s1;
            g->G[j * p + k + 2] += s2;
            g->G[j * p + k + 3] += s3;
        }
        for (; k < p; k++) {
            const double *bk = buf + k * BLOCK;
            double s = 0;
            for (size_t r = 0; r < m; r++)
                s += bj[r] * bk[r];
            g->G[j * p + k] += s;
        }
        double s = 0;
        for (size_t r = 0; r < m; r++)
            s += bj[r] * yb[r];
        g->b[j] += s;
    }
}

static int gram_build(struct gram *g, const scaler *sc, const double *const *x, const double *y,
                      size_t p, const size_t *rows, size_t n)
{
    double *buf, yb[BLOCK];

    memset(g, 0, sizeof(*g));
    g->p = p;
    g->n = n;
    g->mean = calloc(p ? p : 1, sizeof(double));
    g->G = calloc(p > 0 ? p * p : 1, sizeof(double));
    g->b = calloc(p ? p : 1, sizeof(double));
    buf = malloc((p ? p : 1) * BLOCK * sizeof(double));
    if (!g->mean || !g->G || !g->b || !buf) {
        free(buf);
        gram_free(g);
        return -ENOMEM;
    }
    gram_means(g, sc, x, y, rows, n);
    for (size_t at = 0; at < n; at += BLOCK) {
        size_t m = n - at < BLOCK ? n - at : BLOCK;
        for (size_t j = 0; j < p; j++) {
            double *bj = buf + j * BLOCK, width = sc->max[j] - sc->min[j];
            double inv = width > 0 ? 1 / width : 0, off = sc->min[j] + g->mean[j] * width;
            /* (x - min)/width - mean = (x - (min + mean*width)) * inv */
            for (size_t r = 0; r < m; r++)
                bj[r] = (x[j][rows ? rows[at + r] : at + r] - off) * inv;
        }
        for (size_t r = 0; r < m; r++)
            yb[r] = y[rows ? rows[at + r] : at + r] - g->ymean;
        gram_add_block(g, buf, yb, m);
    }
    for (size_t j = 0; j < p; j++)
        for (size_t k = 0; k < j; k++)
            g->G[j * p + k] = g->G[k * p + j];
    free(buf);
    return 0;
}

/* Minimum-norm least squares through the eigenvalues of G: directions with
 * an eigenvalue at rounding level carry no information and get no weight,
 * which is what an SVD-based lstsq does for collinear features. */
static int solve_pinv(const struct gram *g, double *w)
{
    size_t p = g->p;
    gsl_matrix *a = gsl_matrix_alloc(p, p), *v = gsl_matrix_alloc(p, p);
    gsl_vector *ev = gsl_vector_alloc(p);
    gsl_eigen_symmv_workspace *ws = gsl_eigen_symmv_alloc(p);
    double top = 0;
    int r = -ENOMEM;

    if (!a || !v || !ev || !ws)
        goto out;
    memcpy(a->data, g->G, p * p * sizeof(double));
    if (gsl_eigen_symmv(a, ev, v, ws) != 0) {
        r = -EDOM;
        goto out;
    }
    for (size_t k = 0; k < p; k++)
        top = fmax(top, gsl_vector_get(ev, k));
    memset(w, 0, p * sizeof(double));
    for (size_t k = 0; k < p; k++) {
        double lambda = gsl_vector_get(ev, k), proj = 0;
        if (!(lambda > top * (double)p * DBL_EPSILON))
            continue;
        for (size_t j = 0; j < p; j++)
            proj += gsl_matrix_get(v, j, k) * g->b[j];
        for (size_t j = 0; j < p; j++)
            w[j] += gsl_matrix_get(v, j, k) * proj / lambda;
    }
    r = 0;
out:
    gsl_matrix_free(a);
    gsl_matrix_free(v);
    gsl_vector_free(ev);
    if (ws)
        gsl_eigen_symmv_free(ws);
    return r;
}

/* (G + alpha I) w = b by Cholesky, scikit-learn's own ridge solver. */
static int solve_ridge(const struct gram *g, double alpha, double *w)
{
    size_t p = g->p;
    gsl_matrix *a = gsl_matrix_alloc(p, p);
    int r;

    if (!a)
        return -ENOMEM;
    memcpy(a->data, g->G, p * p * sizeof(double));
    for (size_t j = 0; j < p; j++)
        a->data[j * p + j] += alpha;
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    r = gsl_linalg_cholesky_decomp1(a);
    gsl_set_error_handler(old);
    if (r == 0) {
        gsl_vector_view wv = gsl_vector_view_array(w, p);
        gsl_vector_const_view bv = gsl_vector_const_view_array(g->b, p);
        gsl_linalg_cholesky_solve(a, &bv.vector, &wv.vector);
    }
    gsl_matrix_free(a);
    return r == 0 ? 0 : solve_pinv(g, w); /* alpha 0 on collinear data */
}

/* Cyclic coordinate descent on 1/(2n)||yc - Xc w||^2 + alpha ||w||_1 using
 * q = G w, so each sweep costs p^2 whatever n is. */
static void solve_lasso(const struct gram *g, const linear_opts *o, linear_model *m)
{
    size_t p = g->p;
    double nalpha = (double)g->n * o->alpha, *w = m->coef;
    double q[p ? p : 1];
    int max_iter = o->max_iter > 0 ? o->max_iter : 100000;
    double tol = o->tol > 0 ? o->tol : 1e-12;

    memset(w, 0, p * sizeof(double));
    memset(q, 0, sizeof(q));
    m->converged = false;
    for (m->n_iter = 1; m->n_iter <= max_iter; m->n_iter++) {
        double dmax = 0, wmax = 0;
        for (size_t j = 0; j < p; j++) {
            double gjj = g->G[j * p + j], old = w[j], rho, nw;
            if (gjj <= 0)
                continue;
            rho = g->b[j] - q[j] + gjj * old;
            nw = rho > nalpha ? (rho - nalpha) / gjj : rho < -nalpha ? (rho + nalpha) / gjj : 0;
            if (nw != old) {
                for (size_t k = 0; k < p; k++)
                    q[k] += (nw - old) * g->G[k * p + j];
                w[j] = nw;
            }
            dmax = fmax(dmax, fabs(nw - old));
            wmax = fmax(wmax, fabs(nw));
        }
        if (dmax <= tol * fmax(1.0, wmax)) {
            m->converged = true;
            break;
        }
    }
}

size_t linear_alpha_grid(double *out, size_t max)
{
    size_t n = 0;

    for (int e = -12; e <= 6 && n < max; e++)
        out[n++] = pow(10.0, e / 2.0);
    return n;
}

static void predict_gram(const double *w, double b0, size_t p, const scaler *sc,
                         const double *const *x, const size_t *rows, size_t n, double *out)
{
    for (size_t i = 0; i < n; i++) {
        size_t row = rows ? rows[i] : i;
        double s = b0;
        for (size_t j = 0; j < p; j++)
            s += w[j] * scaler_apply(sc, j, x[j][row]);
        out[i] = s;
    }
}

static double intercept_of(const struct gram *g, const double *w)
{
    double b0 = g->ymean;

    for (size_t j = 0; j < g->p; j++)
        b0 -= w[j] * g->mean[j];
    return b0;
}

/* One penalised solve on a Gram matrix: ridge, or lasso with penalty alpha. */
static int solve_penalised(const struct gram *g, const linear_opts *o, double alpha, double *w)
{
    linear_opts lo = *o;
    linear_model lm = {.coef = w};

    if (o->kind == LINEAR_RIDGE)
        return solve_ridge(g, alpha, w);
    lo.alpha = alpha;
    solve_lasso(g, &lo, &lm);
    return 0;
}

/* Inner CV for --alpha auto (ridge or lasso): squared error summed over
 * inner folds of the training rows, for every alpha of the grid; the
 * smallest wins. */
static int auto_alpha(const linear_opts *o, const double *const *x, const double *y, size_t p,
                      const size_t *rows, size_t n, double *alpha, char *err, size_t errlen)
{
    double grid[32], sse[32] = {0}, w[p ? p : 1];
    size_t ng = linear_alpha_grid(grid, 32), k = o->auto_k ? o->auto_k : 5;
    size_t *tr = malloc(n * sizeof(size_t)), *te = malloc(n * sizeof(size_t));
    double *pred = malloc(n * sizeof(double));
    folds *fo = NULL;
    int r = -ENOMEM;

    if (!tr || !te || !pred)
        goto out;
    r = folds_kfold(n, k < n ? k : n, o->seed, &fo, err, errlen);
    if (r < 0)
        goto out;
    for (size_t f = 0; f < fo->k; f++) {
        size_t ntr, nte;
        scaler sc;
        struct gram g;
        folds_split(fo, f, tr, &ntr, te, &nte);
        for (size_t i = 0; i < ntr; i++)
            tr[i] = rows ? rows[tr[i]] : tr[i];
        for (size_t i = 0; i < nte; i++)
            te[i] = rows ? rows[te[i]] : te[i];
        if ((r = scaler_fit(&sc, x, p, tr, ntr)) < 0)
            goto out;
        r = gram_build(&g, &sc, x, y, p, tr, ntr);
        for (size_t a = 0; r == 0 && a < ng; a++) {
            if ((r = solve_penalised(&g, o, grid[a], w)) < 0)
                break;
            predict_gram(w, intercept_of(&g, w), p, &sc, x, te, nte, pred);
            for (size_t i = 0; i < nte; i++)
                sse[a] += (y[te[i]] - pred[i]) * (y[te[i]] - pred[i]);
        }
        if (r == 0)
            gram_free(&g);
        scaler_done(&sc);
        if (r < 0)
            goto out;
    }
    /* On a tie the larger penalty, the simpler model: past its largest
     * useful alpha lasso sets every coefficient to 0 on all of them. */
    size_t best = 0;
    for (size_t a = 1; a < ng; a++)
        if (sse[a] <= sse[best])
            best = a;
    *alpha = grid[best];
out:
    folds_free(fo);
    free(tr);
    free(te);
    free(pred);
    return r;
}

int linear_fit(linear_model *m, const linear_opts *o, const scaler *sc, const double *const *x,
               const double *y, size_t p, const size_t *rows, size_t n_rows, char *err,
               size_t errlen)
{
    struct gram g;
    int r;

    memset(m, 0, sizeof(*m));
    if (n_rows == 0)
        return util_err(err, errlen, -EINVAL, "no rows to fit on");
    if (o->kind == LINEAR_OLS && n_rows < p + 1)
        return util_err(err, errlen, -EDOM,
                        "OLS needs more rows than features: %zu rows, %zu features (use "
                        "--engine ridge, which is defined for any number of rows)",
                        n_rows, p);
    m->p = p;
    m->coef = calloc(p ? p : 1, sizeof(double));
    if (!m->coef)
        return -ENOMEM;
    m->alpha = o->kind == LINEAR_OLS ? 0 : o->alpha;
    /* One row cannot be split to validate a penalty: it gets alpha 1. */
    if (o->kind != LINEAR_OLS && o->alpha < 0 && n_rows < 2)
        m->alpha = 1.0;
    else if (o->kind != LINEAR_OLS && o->alpha < 0) {
        r = auto_alpha(o, x, y, p, rows, n_rows, &m->alpha, err, errlen);
        if (r < 0) {
            linear_done(m);
            return r;
        }
    }
    r = gram_build(&g, sc, x, y, p, rows, n_rows);
    if (r < 0) {
        linear_done(m);
        return r;
    }
    m->converged = true;
    if (o->kind == LINEAR_OLS)
        r = solve_pinv(&g, m->coef);
    else if (o->kind == LINEAR_RIDGE)
        r = solve_ridge(&g, m->alpha, m->coef);
    else {
        linear_opts lo = *o;
        lo.alpha = m->alpha;
        solve_lasso(&g, &lo, m);
    }
    m->intercept = intercept_of(&g, m->coef);
    gram_free(&g);
    if (r < 0) {
        linear_done(m);
        return util_err(err, errlen, r, "the linear solver failed on this data");
    }
    return 0;
}

void linear_predict(const linear_model *m, const scaler *sc, const double *const *x,
                    const size_t *rows, size_t n_rows, double *out)
{
    predict_gram(m->coef, m->intercept, m->p, sc, x, rows, n_rows, out);
}

void linear_done(linear_model *m)
{
    free(m->coef);
    m->coef = NULL;
}
