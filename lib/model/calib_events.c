/* calib_events: one calibration coefficient per model event, online
 * (docs/calibration.md, "One coefficient per event").
 *
 * The single-scale fit (calib.c) corrects the model as a whole:
 * P_measured = idle + s * sum_j P_j, where P_j is the host's dynamic power
 * through event j alone. When the model's coefficients are off by different
 * factors (a node whose power follows an event more than the model says),
 * one scale cannot correct both, and processes with the same CPU time and
 * different event rates get the wrong split. This fits
 *
 *     P_measured = idle + sum_j s_j * P_j
 *
 * over a window of per-second rows, weighted by age (exponential
 * forgetting), by ridge regression that shrinks each s_j towards the single
 * scale s: the penalty is alpha * sum_j C_jj (s_j - s)^2, C_jj the weighted
 * spread of column j, so alpha is free of units and alpha -> infinity is the
 * single-scale fit. alpha comes from blocked k-fold cross-validation (folds
 * are runs of consecutive seconds, since neighbouring seconds are alike)
 * over a small grid that includes infinity. Rows whose residual exceeds k
 * robust standard deviations are left out first, as in calib.c.
 *
 * Per-event coefficients are used only where the data can tell them apart;
 * otherwise the fit says why and the single scale stands: too few rows,
 * fewer than two events whose power varied, events that move together (the
 * smallest eigenvalue of their correlation matrix below min_eig), a
 * cross-validated error not at least min_gain below the single scale's, or
 * a coefficient that is not positive. A column that did not vary keeps the
 * single scale. */
#include "model/model.h"
#include "model/calib_ring.h"

#include <errno.h>
#include <gsl/gsl_eigen.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EV_MAX_PASSES 6
#define EV_MAX_FOLDS 10
#define EV_OUTLIER_ALPHA 1e-3 /* the penalty of the fit that finds outliers */

/* Penalties tried by cross-validation; INFINITY is the single scale. */
static const double ev_alphas[] = {0, 1e-3, 1e-2, 0.1, 1, 10, INFINITY};
#define EV_N_ALPHAS (sizeof(ev_alphas) / sizeof(ev_alphas[0]))

struct calib_ev {
    calib_ev_config cfg;
    size_t p;     /* columns */
    calib_ring r; /* rows: time, measured power */
    double *x;    /* each row's p dynamic powers */
};

/* Weighted raw sums of a set of rows. */
typedef struct ev_sums {
    double w, y, yy;
    double x[CALIB_EV_MAX], xy[CALIB_EV_MAX], xx[CALIB_EV_MAX][CALIB_EV_MAX];
} ev_sums;

/* A fit of one set of sums: means and coefficients. */
typedef struct ev_solution {
    double my, mx[CALIB_EV_MAX], coef[CALIB_EV_MAX], scale;
    bool ok;
} ev_solution;

void calib_ev_config_default(calib_ev_config *c)
{
    *c = (calib_ev_config){
        .window = 600,
        .half_life_s = 300,
        .min_rows = 60,
        .folds = 5,
        .min_eig = 0.05,
        .min_gain = 0.05,
        .min_col_spread_w = 0.2,
        .reject_k = 4.0,
        .max_idle_se_w = 0.5,
        .max_idle_se_rel = 0.02,
    };
}

void calib_ev_free(calib_ev *c)
{
    if (!c)
        return;
    calib_ring_free(&c->r);
    free(c->x);
    free(c);
}

int calib_ev_new(const calib_ev_config *cfg, size_t n_cols, calib_ev **out)
{
    calib_ev_config def;
    calib_ev *c;

    if (!cfg) {
        calib_ev_config_default(&def);
        cfg = &def;
    }
    if (n_cols < 1 || n_cols > CALIB_EV_MAX || cfg->window < 3 || !(cfg->half_life_s > 0) ||
        cfg->folds < 2 || cfg->folds > EV_MAX_FOLDS || cfg->min_rows < cfg->folds * 3 ||
        !(cfg->min_eig >= 0) || !(cfg->min_gain >= 0) || !(cfg->min_col_spread_w >= 0) ||
        !(cfg->reject_k > 0) || !(cfg->max_idle_se_w >= 0) || !(cfg->max_idle_se_rel >= 0))
        return -EINVAL;
    c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->cfg = *cfg;
    c->p = n_cols;
    c->x = calloc(cfg->window * n_cols, sizeof(double));
    if (!c->x || calib_ring_init(&c->r, cfg->window) < 0) {
        calib_ev_free(c);
        return -ENOMEM;
    }
    *out = c;
    return 0;
}

void calib_ev_reset(calib_ev *c)
{
    c->r.n = c->r.next = 0;
}

size_t calib_ev_rows(const calib_ev *c)
{
    return c->r.n;
}

size_t calib_ev_cols(const calib_ev *c)
{
    return c->p;
}

int calib_ev_add(calib_ev *c, double t_s, const double *dyn_w, double host_w)
{
    if (!isfinite(t_s) || !isfinite(host_w) || !(host_w > 0))
        return -EINVAL;
    for (size_t j = 0; j < c->p; j++)
        if (!isfinite(dyn_w[j]) || dyn_w[j] < 0)
            return -EINVAL;
    memcpy(c->x + calib_ring_push(&c->r, t_s, host_w) * c->p, dyn_w, c->p * sizeof(double));
    return 0;
}

static void sums_add_row(const calib_ev *c, ev_sums *s, size_t i)
{
    const double *x = c->x + i * c->p;
    double w = c->r.w[i], y = c->r.y[i];

    s->w += w;
    s->y += w * y;
    s->yy += w * y * y;
    for (size_t j = 0; j < c->p; j++) {
        s->x[j] += w * x[j];
        s->xy[j] += w * x[j] * y;
        for (size_t k = 0; k <= j; k++)
            s->xx[j][k] += w * x[j] * x[k];
    }
}

/* a - b, for the sums of every fold but one. */
static void sums_sub(const calib_ev *c, ev_sums *a, const ev_sums *b)
{
    a->w -= b->w;
    a->y -= b->y;
    a->yy -= b->yy;
    for (size_t j = 0; j < c->p; j++) {
        a->x[j] -= b->x[j];
        a->xy[j] -= b->xy[j];
        for (size_t k = 0; k <= j; k++)
            a->xx[j][k] -= b->xx[j][k];
    }
}

/* Centred weighted cross-products: cov[j][k] = sum w dx_j dx_k, cy[j] = sum
 * w dx_j dy. */
static void centre(const calib_ev *c, const ev_sums *s, ev_solution *sol,
                   double cov[CALIB_EV_MAX][CALIB_EV_MAX], double cy[CALIB_EV_MAX])
{
    sol->my = s->y / s->w;
    for (size_t j = 0; j < c->p; j++)
        sol->mx[j] = s->x[j] / s->w;
    for (size_t j = 0; j < c->p; j++) {
        cy[j] = s->xy[j] - s->w * sol->mx[j] * sol->my;
        for (size_t k = 0; k <= j; k++)
            cov[j][k] = cov[k][j] = s->xx[j][k] - s->w * sol->mx[j] * sol->mx[k];
    }
}

/* x = a^-1 b for a symmetric positive definite q x q `a` (overwritten);
 * non-zero when `a` is not (columns that move together). */
static int chol_solve(double *a, double *b, double *x, size_t q)
{
    gsl_matrix_view am = gsl_matrix_view_array(a, q, q);
    gsl_vector_view bv = gsl_vector_view_array(b, q), xv = gsl_vector_view_array(x, q);
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    int ret = gsl_linalg_cholesky_decomp1(&am.matrix);

    if (ret == 0)
        ret = gsl_linalg_cholesky_solve(&am.matrix, &bv.vector, &xv.vector);
    gsl_set_error_handler(old);
    return ret;
}

/* Solves the ridge towards the single scale for the columns that vary
 * (vary[j]); the others keep the single scale. */
static void solve(const calib_ev *c, const ev_sums *s, const bool *vary, double alpha,
                  ev_solution *sol)
{
    double cov[CALIB_EV_MAX][CALIB_EV_MAX], cy[CALIB_EV_MAX], sxx = 0, sxy = 0;
    double a[CALIB_EV_MAX * CALIB_EV_MAX], b[CALIB_EV_MAX], d[CALIB_EV_MAX];
    size_t idx[CALIB_EV_MAX], q = 0;

    sol->ok = false;
    if (!(s->w > 0))
        return;
    centre(c, s, sol, cov, cy);
    for (size_t j = 0; j < c->p; j++) {
        sxy += cy[j];
        for (size_t k = 0; k < c->p; k++)
            sxx += cov[j][k];
    }
    if (!(sxx > 0))
        return;
    sol->scale = sxy / sxx;
    for (size_t j = 0; j < c->p; j++) {
        sol->coef[j] = sol->scale;
        if (vary[j])
            idx[q++] = j;
    }
    sol->ok = true;
    if (q == 0 || isinf(alpha))
        return;
    /* (C + alpha diag C) delta = C (cy / C - s 1): residual of the single
     * scale against each varying column. */
    for (size_t u = 0; u < q; u++) {
        double r = cy[idx[u]];
        for (size_t k = 0; k < c->p; k++)
            r -= sol->scale * cov[idx[u]][k];
        b[u] = r;
        for (size_t v = 0; v < q; v++)
            a[u * q + v] = cov[idx[u]][idx[v]] * (u == v ? 1 + alpha : 1);
    }
    if (chol_solve(a, b, d, q) != 0) {
        sol->ok = false;
        return;
    }
    for (size_t u = 0; u < q; u++)
        sol->coef[idx[u]] += d[u];
}

static double predict(const calib_ev *c, const ev_solution *sol, size_t i)
{
    const double *x = c->x + i * c->p;
    double y = sol->my;

    for (size_t j = 0; j < c->p; j++)
        y += sol->coef[j] * (x[j] - sol->mx[j]);
    return y;
}

/* One outlier pass: fits the kept rows, then keeps exactly the rows within
 * reject_k robust sigmas. Returns whether the kept set changed. */
static bool outlier_pass(calib_ev *c, const bool *vary)
{
    ev_sums s = {0};
    ev_solution sol;
    bool changed = false;

    for (size_t i = 0; i < c->r.n; i++)
        if (c->r.keep[i])
            sums_add_row(c, &s, i);
    solve(c, &s, vary, EV_OUTLIER_ALPHA, &sol);
    if (!sol.ok)
        return false;
    for (size_t i = 0; i < c->r.n; i++)
        c->r.scratch[i] = fabs(c->r.y[i] - predict(c, &sol, i));
    double mad = gsl_stats_select(c->r.scratch, 1, c->r.n, c->r.n / 2);
    double sigma = fmax(1.4826 * mad, 1e-6 * (fabs(sol.my) + 1));
    for (size_t i = 0; i < c->r.n; i++) {
        bool keep = fabs(c->r.y[i] - predict(c, &sol, i)) <= c->cfg.reject_k * sigma;
        changed |= keep != c->r.keep[i];
        c->r.keep[i] = keep;
    }
    return changed;
}

/* Smallest eigenvalue of the correlation matrix of the varying columns. */
static double min_correlation_eig(calib_ev *c, const ev_sums *s, const bool *vary)
{
    double cov[CALIB_EV_MAX][CALIB_EV_MAX], cy[CALIB_EV_MAX], r[CALIB_EV_MAX * CALIB_EV_MAX];
    double ev[CALIB_EV_MAX];
    size_t idx[CALIB_EV_MAX], q = 0;
    ev_solution sol;

    centre(c, s, &sol, cov, cy);
    for (size_t j = 0; j < c->p; j++)
        if (vary[j])
            idx[q++] = j;
    for (size_t u = 0; u < q; u++)
        for (size_t v = 0; v < q; v++)
            r[u * q + v] = cov[idx[u]][idx[v]] / sqrt(cov[idx[u]][idx[u]] * cov[idx[v]][idx[v]]);
    gsl_matrix_view rm = gsl_matrix_view_array(r, q, q);
    gsl_vector_view evv = gsl_vector_view_array(ev, q);
    gsl_eigen_symm_workspace *ws = gsl_eigen_symm_alloc(q);
    if (!ws)
        return NAN;
    gsl_eigen_symm(&rm.matrix, &evv.vector, ws);
    gsl_eigen_symm_free(ws);
    double m = INFINITY;
    for (size_t u = 0; u < q; u++)
        m = fmin(m, ev[u]);
    return m;
}

/* Blocked k-fold cross-validation: weighted mean squared error of the
 * held-out rows, for each penalty of the grid. */
static void cross_validate(const calib_ev *c, const bool *vary, size_t kept, double *mse)
{
    ev_sums all = {0}, fold[EV_MAX_FOLDS];
    size_t k = c->cfg.folds, rank = 0;
    unsigned char *which = (unsigned char *)c->r.scratch; /* the fold of each row */
    double wsum = 0;

    memset(fold, 0, sizeof(fold));
    /* Kept rows in time order, split into k runs of consecutive seconds. */
    for (size_t r = 0; r < c->r.n; r++) {
        size_t i = c->r.n < c->r.window ? r : (c->r.next + r) % c->r.window;
        if (!c->r.keep[i])
            continue;
        which[i] = (unsigned char)(rank++ * k / kept);
        sums_add_row(c, &fold[which[i]], i);
        sums_add_row(c, &all, i);
    }
    for (size_t a = 0; a < EV_N_ALPHAS; a++)
        mse[a] = 0;
    for (size_t f = 0; f < k; f++) {
        ev_sums train = all;
        ev_solution sol[EV_N_ALPHAS];
        sums_sub(c, &train, &fold[f]);
        for (size_t a = 0; a < EV_N_ALPHAS; a++)
            solve(c, &train, vary, ev_alphas[a], &sol[a]);
        for (size_t i = 0; i < c->r.n; i++) {
            if (!c->r.keep[i] || which[i] != f)
                continue;
            for (size_t a = 0; a < EV_N_ALPHAS; a++) {
                double e = sol[a].ok ? c->r.y[i] - predict(c, &sol[a], i) : INFINITY;
                mse[a] += c->r.w[i] * e * e;
            }
            wsum += c->r.w[i];
        }
    }
    for (size_t a = 0; a < EV_N_ALPHAS; a++)
        mse[a] /= wsum;
}

/* Standard errors of the fit `sol` at penalty alpha, as in calib.c: the
 * weighted residual variance with Kish's effective number of rows, and with
 * A = C + alpha D over the varying columns (their means m, centred
 * cross-products C, D its diagonal), var(idle) = sigma^2 (1/n_eff +
 * (W/n_eff) m' A^-1 m) and var(s_j) = sigma^2 (W/n_eff) (A^-1)_jj: the
 * ridge's own curvature, so a penalty narrows them. Optimistic, like
 * calib.c's, as neighbouring seconds are correlated. The idle's is
 * returned; coef_se[j] is NAN for a column that does not vary. */
static double fit_stderr(const calib_ev *c, const ev_solution *sol, const ev_sums *s,
                         const bool *vary, double alpha, double *coef_se)
{
    double cov[CALIB_EV_MAX][CALIB_EV_MAX], cy[CALIB_EV_MAX], a[CALIB_EV_MAX * CALIB_EV_MAX];
    double l[CALIB_EV_MAX * CALIB_EV_MAX], m[CALIB_EV_MAX], v[CALIB_EV_MAX], rss = 0, w2 = 0;
    size_t idx[CALIB_EV_MAX], q = 0;
    ev_solution centred;

    for (size_t j = 0; j < c->p; j++)
        coef_se[j] = NAN;
    for (size_t i = 0; i < c->r.n; i++) {
        if (!c->r.keep[i])
            continue;
        double e = c->r.y[i] - predict(c, sol, i);
        rss += c->r.w[i] * e * e;
        w2 += c->r.w[i] * c->r.w[i];
    }
    double n_eff = s->w * s->w / w2;
    centre(c, s, &centred, cov, cy);
    for (size_t j = 0; j < c->p; j++)
        if (vary[j])
            idx[q++] = j;
    if (!(n_eff > (double)q + 1))
        return NAN;
    double sigma2 = rss / s->w * n_eff / (n_eff - (double)q - 1);
    for (size_t u = 0; u < q; u++) {
        m[u] = centred.mx[idx[u]];
        for (size_t k = 0; k < q; k++)
            a[u * q + k] = cov[idx[u]][idx[k]] * (u == k ? 1 + alpha : 1);
    }
    for (size_t u = 0; u < q; u++) { /* column u of A^-1 */
        double e[CALIB_EV_MAX] = {0};
        e[u] = 1;
        memcpy(l, a, q * q * sizeof(double));
        if (chol_solve(l, e, v, q) == 0 && v[u] >= 0)
            coef_se[idx[u]] = sqrt(sigma2 * s->w / n_eff * v[u]);
    }
    if (chol_solve(a, m, v, q) != 0)
        return NAN;
    double quad = 0;
    for (size_t u = 0; u < q; u++)
        quad += m[u] * v[u];
    return sqrt(sigma2 * (1 / n_eff + s->w / n_eff * quad));
}

static int ev_give_up(calib_ev_fit *f, const char *why)
{
    f->per_event = false;
    f->why = why;
    for (size_t j = 0; j < f->n_cols; j++)
        f->coef[j] = f->scale;
    return 0;
}

int calib_ev_fit_now(calib_ev *c, calib_ev_fit *f)
{
    bool vary[CALIB_EV_MAX];
    ev_sums s = {0};
    ev_solution sol;
    double mse[EV_N_ALPHAS];
    size_t q = 0;

    memset(f, 0, sizeof(*f));
    f->n_cols = c->p;
    f->idle_w = f->scale = f->alpha = f->cv_rmse_w = f->cv_rmse_single_w = f->min_eig = NAN;
    f->idle_se_w = NAN;
    f->why = "too few measured seconds";
    for (size_t j = 0; j < c->p; j++)
        f->coef[j] = f->coef_se[j] = NAN;
    if (c->r.n < c->cfg.min_rows)
        return 0;
    calib_ring_weigh(&c->r, c->cfg.half_life_s);
    for (size_t i = 0; i < c->r.n; i++)
        sums_add_row(c, &s, i);
    /* Columns whose power varies by less than min_col_spread_w (through
     * the single scale) cannot be told from the intercept. */
    solve(c, &s, (bool[CALIB_EV_MAX]){0}, INFINITY, &sol);
    if (!sol.ok || !(sol.scale > 0)) {
        f->scale = sol.ok ? sol.scale : NAN;
        return ev_give_up(f, "measured power does not rise with the model's");
    }
    for (size_t j = 0; j < c->p; j++) {
        double var = s.xx[j][j] / s.w - sol.mx[j] * sol.mx[j];
        vary[j] = var > 0 && sol.scale * sqrt(var) >= c->cfg.min_col_spread_w;
        f->fixed[j] = !vary[j];
        q += vary[j];
    }
    for (int pass = 0; pass < EV_MAX_PASSES && outlier_pass(c, vary); pass++)
        ;
    memset(&s, 0, sizeof(s));
    for (size_t i = 0; i < c->r.n; i++)
        if (c->r.keep[i])
            sums_add_row(c, &s, i), f->rows++;
    f->rejected = c->r.n - f->rows;
    solve(c, &s, vary, INFINITY, &sol);
    f->scale = sol.ok ? sol.scale : NAN;
    if (sol.ok) {
        double sum_mx = 0;
        for (size_t j = 0; j < c->p; j++)
            sum_mx += sol.mx[j];
        f->idle_w = sol.my - sol.scale * sum_mx;
    }
    if (f->rows < c->cfg.min_rows)
        return ev_give_up(f, "too few measured seconds");
    if (!sol.ok || !(sol.scale > 0))
        return ev_give_up(f, "measured power does not rise with the model's");
    if (q < 2)
        return ev_give_up(f, "fewer than two events varied");
    f->min_eig = min_correlation_eig(c, &s, vary);
    if (!(f->min_eig >= c->cfg.min_eig))
        return ev_give_up(f, "the events moved together");
    cross_validate(c, vary, f->rows, mse);
    size_t best = EV_N_ALPHAS - 1;
    for (size_t a = 0; a < EV_N_ALPHAS; a++)
        if (mse[a] < mse[best])
            best = a;
    f->alpha = ev_alphas[best];
    f->cv_rmse_w = sqrt(mse[best]);
    f->cv_rmse_single_w = sqrt(mse[EV_N_ALPHAS - 1]);
    if (isinf(f->alpha) || !(mse[best] <= (1 - c->cfg.min_gain) * mse[EV_N_ALPHAS - 1]))
        return ev_give_up(f, "one coefficient per event predicts no better than one scale");
    solve(c, &s, vary, f->alpha, &sol);
    if (!sol.ok)
        return ev_give_up(f, "the events moved together");
    double sum = sol.my;
    for (size_t j = 0; j < c->p; j++) {
        f->coef[j] = sol.coef[j];
        sum -= sol.coef[j] * sol.mx[j];
        if (!(sol.coef[j] > 0))
            return ev_give_up(f, "an event's coefficient is not positive");
    }
    f->idle_w = sum;
    if (!(f->idle_w >= 0))
        return ev_give_up(f, "the fitted idle is negative");
    f->idle_se_w = fit_stderr(c, &sol, &s, vary, f->alpha, f->coef_se);
    f->idle_identified = f->idle_se_w <= fmax(c->cfg.max_idle_se_w, c->cfg.max_idle_se_rel * sum);
    f->per_event = true;
    f->why = NULL;
    return 0;
}
