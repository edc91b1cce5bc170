/* gp: Gaussian-process regression. Conditioning, the log marginal
 * likelihood and its gradient, prediction and leave-one-out; the kernels
 * are in gp_kernel.c, the mean functions in gp_mean.c, the optimiser in
 * gp_fit.c.
 *
 * Everything goes through one Cholesky factor of K = k(X, X) (+ jitter):
 * alpha = K^-1 (y - m(X)) gives the mean, L^-1 k(X, x*) the variance, and
 * K^-1 itself the gradient (R&W 5.9) and the closed-form leave-one-out.
 *
 * The O(n^3) steps, the factorisation, the inverse and the solves for the
 * predictive variance, are OpenBLAS's (gp_lapack.c); the O(n^2) rest
 * stays with GSL. */
#include "learn/gp_internal.h"
#include "util/util.h"

#include <errno.h>
#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* K counts as singular below this reciprocal condition number: exactly
 * duplicated rows without noise give ~1e-17; anything above still leaves
 * a couple of significant digits in alpha. */
#define GP_RCOND_MIN 1e-14
#define GP_JITTER_FIRST 1e-10 /* times the mean of diag(K) */
#define GP_JITTER_LAST 1e-2

int gp_new(const gp_config *cfg, const char *const *features, size_t d, gp_model **out, char *err,
           size_t errlen)
{
    gp_model *m = calloc(1, sizeof(*m));
    int r = -ENOMEM;

    if (!m)
        return -ENOMEM;
    m->d = d;
    m->ard = cfg->ard;
    m->standardize = cfg->standardize;
    m->kernel_spec = strdup(cfg->kernel ? cfg->kernel : "rbf");
    m->features = calloc(d ? d : 1, sizeof(char *));
    m->shift = calloc(d ? d : 1, sizeof(double));
    m->scale = malloc((d ? d : 1) * sizeof(double));
    if (!m->kernel_spec || !m->features || !m->shift || !m->scale)
        goto fail;
    for (size_t j = 0; j < d; j++) {
        m->scale[j] = 1;
        if (!(m->features[j] = strdup(features[j])))
            goto fail;
    }
    r = gp_kernel_parse(m->kernel_spec, d, cfg->ard, &m->k, err, errlen);
    if (r == 0)
        r = gp_lapack_open(&m->la, err, errlen);
    if (r == 0)
        r = gp_meanfn_new(cfg->mean, features, d, cfg->fit_mean, &m->mean, err, errlen);
    if (r < 0)
        goto fail;
    *out = m;
    return 0;
fail:
    if (r == -ENOMEM)
        util_err(err, errlen, r, "out of memory");
    gp_free(m);
    return r;
}

static void drop_data(gp_model *m)
{
    free(m->X);
    free(m->raw);
    free(m->y);
    free(m->L);
    free(m->alpha);
    m->X = m->raw = m->y = m->L = m->alpha = NULL;
    m->n = 0;
}

void gp_free(gp_model *m)
{
    if (!m)
        return;
    drop_data(m);
    gp_kernel_free(m->k);
    gp_lapack_close(&m->la);
    gp_meanfn_free(m->mean);
    if (m->features)
        util_strv_free(m->features, m->d);
    free(m->kernel_spec);
    free(m->shift);
    free(m->scale);
    free(m);
}

gp_model *gp_clone(const gp_model *m)
{
    gp_model *c = calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    c->d = m->d;
    c->ard = m->ard;
    c->standardize = m->standardize;
    c->mean_ready = m->mean_ready;
    c->kernel_spec = strdup(m->kernel_spec);
    c->features = calloc(m->d ? m->d : 1, sizeof(char *));
    c->shift = malloc((m->d ? m->d : 1) * sizeof(double));
    c->scale = malloc((m->d ? m->d : 1) * sizeof(double));
    c->k = gp_kernel_clone(m->k);
    if (gp_lapack_open(&c->la, NULL, 0) < 0)
        goto fail;
    c->mean = gp_meanfn_clone(m->mean);
    if (!c->kernel_spec || !c->features || !c->shift || !c->scale || !c->k || !c->mean)
        goto fail;
    for (size_t j = 0; j < m->d; j++)
        if (!(c->features[j] = strdup(m->features[j])))
            goto fail;
    memcpy(c->shift, m->shift, m->d * sizeof(double));
    memcpy(c->scale, m->scale, m->d * sizeof(double));
    return c;
fail:
    gp_free(c);
    return NULL;
}

size_t gp_n_params(const gp_model *m)
{
    return gp_kernel_n_params(m->k) + gp_meanfn_n_params(m->mean);
}

void gp_get_params(const gp_model *m, double *theta)
{
    gp_kernel_get(m->k, theta, NULL, NULL);
    gp_meanfn_get(m->mean, theta + gp_kernel_n_params(m->k));
}

void gp_set_params(gp_model *m, const double *theta)
{
    gp_kernel_set(m->k, theta);
    gp_meanfn_set(m->mean, theta + gp_kernel_n_params(m->k));
}

void gp_param_name(const gp_model *m, size_t i, char *buf, size_t len)
{
    size_t nk = gp_kernel_n_params(m->k);

    if (i < nk)
        gp_kernel_param_name(m->k, i, (const char *const *)m->features, buf, len);
    else
        gp_meanfn_param_name(m->mean, i - nk, buf, len);
}

bool gp_param_is_log(const gp_model *m, size_t i)
{
    return i < gp_kernel_n_params(m->k);
}

void gp_param_bounds(const gp_model *m, size_t i, double *lo, double *hi)
{
    size_t nk = gp_kernel_n_params(m->k);
    double l[nk ? nk : 1], h[nk ? nk : 1];

    if (i >= nk) {
        *lo = -HUGE_VAL;
        *hi = HUGE_VAL;
        return;
    }
    gp_kernel_get(m->k, NULL, l, h);
    *lo = l[i];
    *hi = h[i];
}

void gp_set_param_bounds(gp_model *m, size_t i, double lo, double hi)
{
    if (i < gp_kernel_n_params(m->k))
        gp_kernel_set_bounds(m->k, i, lo, hi);
}

int gp_set_scaling(gp_model *m, const gp_data *data)
{
    for (size_t j = 0; j < m->d; j++) {
        double mu = 0, var = 0;
        m->shift[j] = 0;
        m->scale[j] = 1;
        if (!m->standardize || data->n == 0)
            continue;
        for (size_t i = 0; i < data->n; i++)
            mu += data->cols[j][i];
        mu /= (double)data->n;
        for (size_t i = 0; i < data->n; i++)
            var += (data->cols[j][i] - mu) * (data->cols[j][i] - mu);
        var /= (double)data->n;
        m->shift[j] = mu;
        m->scale[j] = var > 0 ? sqrt(var) : 1; /* a constant column stays as is */
    }
    return 0;
}

double *gp_scaled_rows(const gp_model *m, const double *const *cols, size_t n)
{
    double *X = malloc((n ? n : 1) * (m->d ? m->d : 1) * sizeof(double));

    if (!X)
        return NULL;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < m->d; j++)
            X[i * m->d + j] = (cols[j][i] - m->shift[j]) / m->scale[j];
    return X;
}

/* Cholesky factor of K in place (lower triangle), adding jitter to its
 * diagonal while K is not positive definite or is numerically singular.
 * dpotrf leaves the upper triangle, K itself, alone, and GSL's rcond reads
 * K's norm from there. */
static int cholesky(const gp_model *m, double *K, size_t n, double *jitter)
{
    gsl_matrix_view A = gsl_matrix_view_array(K, n, n);
    double *diag = malloc(n * sizeof(double)), mean = 0, rcond = 0, jit = 0;
    gsl_vector *work = gsl_vector_alloc(3 * n);
    int r = -EDOM;

    if (!diag || !work) {
        free(diag);
        gsl_vector_free(work);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        mean += (diag[i] = K[i * n + i]) / (double)n;
    for (;;) {
        if (gp_lapack_cholesky(&m->la, K, n) == 0 &&
            gsl_linalg_cholesky_rcond(&A.matrix, &rcond, work) == 0 && rcond >= GP_RCOND_MIN) {
            r = 0;
            break;
        }
        jit = jit == 0 ? GP_JITTER_FIRST * mean : jit * 10;
        if (!(mean > 0) || jit > GP_JITTER_LAST * mean)
            break;
        for (size_t i = 0; i < n; i++) { /* restore the lower triangle from the upper */
            for (size_t j = 0; j < i; j++)
                K[i * n + j] = K[j * n + i];
            K[i * n + i] = diag[i] + jit;
        }
    }
    *jitter = jit;
    free(diag);
    gsl_vector_free(work);
    return r;
}

void gp_work_free(struct gp_work *w)
{
    free(w->K);
    free(w->r);
    free(w->alpha);
    free(w->jac);
    free(w->W);
    w->K = w->r = w->alpha = w->jac = w->W = NULL;
}

int gp_work_init(struct gp_work *w, const gp_model *m, const double *X, const double *const *cols,
                 const double *y, size_t n)
{
    size_t np = gp_meanfn_n_params(m->mean);

    memset(w, 0, sizeof(*w));
    w->X = X;
    w->cols = cols;
    w->y = y;
    w->n = n;
    w->K = malloc(n * n * sizeof(double));
    w->r = malloc(n * sizeof(double));
    w->alpha = malloc(n * sizeof(double));
    w->jac = malloc((np ? np : 1) * n * sizeof(double));
    if (!w->K || !w->r || !w->alpha || !w->jac) {
        gp_work_free(w);
        return -ENOMEM;
    }
    return 0;
}

/* Factorises K and solves for alpha at m's current hyperparameters; leaves
 * L in w->K and the mean's Jacobian in w->jac. */
static int factorise(const gp_model *m, struct gp_work *w, bool want_jac)
{
    size_t n = w->n;
    double logdet = 0, fit = 0;
    int r;

    r = gp_meanfn_eval(m->mean, w->cols, n, w->r, want_jac ? w->jac : NULL);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n; i++)
        w->r[i] = w->y[i] - w->r[i];
    r = gp_kernel_matrix(m->k, w->X, n, w->X, n, true, w->K);
    if (r == 0)
        r = cholesky(m, w->K, n, &w->jitter);
    if (r < 0)
        return r;
    gsl_matrix_view L = gsl_matrix_view_array(w->K, n, n);
    gsl_vector_const_view rv = gsl_vector_const_view_array(w->r, n);
    gsl_vector_view av = gsl_vector_view_array(w->alpha, n);
    gsl_linalg_cholesky_solve(&L.matrix, &rv.vector, &av.vector);
    for (size_t i = 0; i < n; i++) {
        logdet += log(w->K[i * n + i]);
        fit += w->r[i] * w->alpha[i];
    }
    w->lml = -0.5 * fit - logdet - 0.5 * (double)n * log(2 * M_PI);
    return 0;
}

int gp_evaluate(const gp_model *m, struct gp_work *w, double *grad)
{
    size_t n = w->n, nk = gp_kernel_n_params(m->k), nm = gp_meanfn_n_params(m->mean);
    int r = factorise(m, w, grad != NULL);

    if (r < 0 || !grad)
        return r;
    /* dL/dtheta = 1/2 tr((alpha alpha' - K^-1) dK/dtheta); W stays
     * allocated between evaluations, as fresh pages of n^2 doubles cost
     * page faults every time. */
    if (!w->W && !(w->W = malloc(n * n * sizeof(double))))
        return -ENOMEM;
    if ((r = gp_lapack_inverse(&m->la, w->K, n, w->W)) < 0)
        return r;
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            w->W[a * n + b] = w->alpha[a] * w->alpha[b] - w->W[a * n + b];
    memset(grad, 0, (nk + nm) * sizeof(double));
    r = gp_kernel_grad(m->k, w->X, n, w->W, grad);
    for (size_t j = 0; j < nk; j++)
        grad[j] *= 0.5;
    /* dL/dc = alpha' dm/dc */
    for (size_t k = 0; k < nm; k++)
        for (size_t i = 0; i < n; i++)
            grad[nk + k] += w->alpha[i] * w->jac[k * n + i];
    return r;
}

int gp_lml(const gp_model *m, const gp_data *data, double *lml, double *grad)
{
    double *X = gp_scaled_rows(m, data->cols, data->n);
    struct gp_work w;
    int r = X ? gp_work_init(&w, m, X, data->cols, data->y, data->n) : -ENOMEM;

    if (r == 0) {
        r = gp_evaluate(m, &w, grad);
        *lml = w.lml;
        gp_work_free(&w);
    }
    free(X);
    return r;
}

int gp_condition(gp_model *m, const gp_data *data, char *err, size_t errlen)
{
    size_t n = data->n, d = m->d;
    struct gp_work w;
    int r;

    if (n < 3)
        return util_err(err, errlen, -EINVAL, "need at least 3 rows to fit a GP, got %zu", n);
    drop_data(m);
    m->X = gp_scaled_rows(m, data->cols, n);
    m->raw = malloc(n * (d ? d : 1) * sizeof(double));
    m->y = malloc(n * sizeof(double));
    if (!m->X || !m->raw || !m->y) {
        drop_data(m);
        return util_err(err, errlen, -ENOMEM, "out of memory");
    }
    for (size_t j = 0; j < d; j++)
        memcpy(m->raw + j * n, data->cols[j], n * sizeof(double));
    memcpy(m->y, data->y, n * sizeof(double));
    m->n = n;
    {
        const double *cols[d ? d : 1];
        for (size_t j = 0; j < d; j++)
            cols[j] = m->raw + j * n;
        r = gp_work_init(&w, m, m->X, cols, m->y, n);
        if (r == 0)
            r = gp_evaluate(m, &w, NULL);
    }
    if (r < 0) {
        gp_work_free(&w);
        drop_data(m);
        if (r == -EDOM)
            return util_err(err, errlen, r,
                            "the GP cannot be conditioned: K is not positive definite even "
                            "with jitter, or the mean function is not finite");
        return util_err(err, errlen, r, "out of memory");
    }
    m->L = w.K;
    m->alpha = w.alpha;
    m->lml = w.lml;
    m->jitter = w.jitter;
    w.K = w.alpha = NULL;
    gp_work_free(&w);
    return 0;
}

/* y = m(X) + (K + jitter I) alpha, the targets the saved weights came from
 * (gp_loo_closed needs them); K is still whole here. */
static int restore_targets(gp_model *m, const double *K, const double *const *cols)
{
    size_t n = m->n;
    int r = gp_meanfn_eval(m->mean, cols, n, m->y, NULL);

    for (size_t i = 0; r == 0 && i < n; i++)
        for (size_t j = 0; j < n; j++)
            m->y[i] += K[i * n + j] * m->alpha[j];
    return r;
}

int gp_restore(gp_model *m, const double *raw, size_t n, const double *alpha, double jitter,
               double lml)
{
    size_t d = m->d;
    const double *cols[d ? d : 1];
    int r;

    drop_data(m);
    for (size_t j = 0; j < d; j++)
        cols[j] = raw + j * n;
    m->X = gp_scaled_rows(m, cols, n);
    m->raw = malloc(n * (d ? d : 1) * sizeof(double));
    m->y = malloc(n * sizeof(double));
    m->L = malloc(n * n * sizeof(double));
    m->alpha = malloc(n * sizeof(double));
    if (!m->X || !m->raw || !m->y || !m->L || !m->alpha) {
        drop_data(m);
        return -ENOMEM;
    }
    memcpy(m->raw, raw, n * d * sizeof(double));
    memcpy(m->alpha, alpha, n * sizeof(double));
    m->n = n;
    for (size_t j = 0; j < d; j++)
        cols[j] = m->raw + j * n;
    r = gp_kernel_matrix(m->k, m->X, n, m->X, n, true, m->L);
    for (size_t i = 0; r == 0 && i < n; i++)
        m->L[i * n + i] += jitter;
    if (r == 0)
        r = restore_targets(m, m->L, cols);
    if (r == 0)
        r = gp_lapack_cholesky(&m->la, m->L, n);
    if (r < 0) {
        drop_data(m);
        return r;
    }
    m->jitter = jitter;
    m->lml = lml;
    return 0;
}

double gp_log_marginal_likelihood(const gp_model *m)
{
    return m->lml;
}

double gp_jitter(const gp_model *m)
{
    return m->jitter;
}

size_t gp_n_train(const gp_model *m)
{
    return m->n;
}

int gp_mean_eval(const gp_model *m, const double *const *cols, size_t n, double *out)
{
    return gp_meanfn_eval(m->mean, cols, n, out, NULL);
}

/* Predicts points [i0, i0 + b) of Xs into mean and var. */
static int predict_block(const gp_model *m, const double *Xs, size_t b, double *Ks, double *mean,
                         double *var)
{
    size_t n = m->n;
    int r = gp_kernel_matrix(m->k, Xs, b, m->X, n, false, Ks);

    if (r < 0)
        return r;
    for (size_t i = 0; i < b; i++) {
        double s = 0;
        for (size_t j = 0; j < n; j++)
            s += Ks[i * n + j] * m->alpha[j];
        mean[i] += s;
    }
    if (!var)
        return 0;
    /* V = Ks L^-T; var = k(x, x) - |row of V|^2 */
    gp_lapack_solve_lt(&m->la, m->L, n, Ks, b);
    gp_kernel_diag(m->k, Xs, b, var);
    for (size_t i = 0; i < b; i++) {
        for (size_t j = 0; j < n; j++)
            var[i] -= Ks[i * n + j] * Ks[i * n + j];
        if (var[i] < 0) /* rounding when x is a training point without noise */
            var[i] = 0;
    }
    return 0;
}

#define GP_PREDICT_BLOCK 256

int gp_predict(const gp_model *m, const double *const *cols, size_t n, double *mean, double *var)
{
    double *Xs, *Ks;
    int r;

    if (!m->L)
        return -EINVAL;
    r = gp_meanfn_eval(m->mean, cols, n, mean, NULL);
    if (r < 0)
        return r;
    Xs = gp_scaled_rows(m, cols, n);
    Ks = malloc(GP_PREDICT_BLOCK * m->n * sizeof(double));
    if (!Xs || !Ks)
        r = -ENOMEM;
    for (size_t i0 = 0; r == 0 && i0 < n; i0 += GP_PREDICT_BLOCK) {
        size_t b = n - i0 < GP_PREDICT_BLOCK ? n - i0 : GP_PREDICT_BLOCK;
        r = predict_block(m, Xs + i0 * m->d, b, Ks, mean + i0, var ? var + i0 : NULL);
    }
    free(Xs);
    free(Ks);
    return r;
}

int gp_loo_closed(const gp_model *m, double *mean, double *var)
{
    size_t n = m->n;
    double *inv;
    int r;

    if (!m->L)
        return -EINVAL;
    if (!(inv = malloc(n * n * sizeof(double))))
        return -ENOMEM;
    if ((r = gp_lapack_inverse(&m->la, m->L, n, inv)) < 0) {
        free(inv);
        return r;
    }
    for (size_t i = 0; i < n; i++) {
        double kii = inv[i * n + i];
        mean[i] = m->y[i] - m->alpha[i] / kii;
        if (var)
            var[i] = 1 / kii;
    }
    free(inv);
    return 0;
}

int gp_mean_loo(const gp_model *m, const gp_data *data, double *out)
{
    return gp_meanfn_loo(m->mean, data->cols, m->d, data->y, data->n, out);
}
