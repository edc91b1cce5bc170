/* gp_internal: the Gaussian-process model's state, shared by gp.c (linear
 * algebra), gp_fit.c (optimiser) and gp_json.c (output); private to
 * lib/learn. */
#ifndef WATTPROF_GP_INTERNAL_H
#define WATTPROF_GP_INTERNAL_H

#include "learn/gp_kernel.h"
#include "learn/gp_lapack.h"
#include "learn/gp_mean.h"
#include "learn/learn.h"

struct gp_model {
    size_t d;
    char **features;
    char *kernel_spec;
    bool ard, standardize;
    bool mean_ready; /* the mean's starting point was fitted to y already */
    gp_kernel *k;
    gp_meanfn *mean;
    struct gp_lapack la;
    double *shift, *scale; /* kernel input = (x - shift) / scale, per feature */
    /* conditioned state (gp_condition) */
    size_t n;
    double *X;     /* n x d scaled inputs, row-major */
    double *raw;   /* d x n inputs as given, column-major (for the mean) */
    double *y;     /* n */
    double *L;     /* n x n Cholesky factor of K, lower triangle */
    double *alpha; /* K^-1 (y - m(X)) */
    double lml, jitter;
};

/* Buffers of one evaluation of the log marginal likelihood. */
struct gp_work {
    const double *X;           /* n x d scaled inputs */
    const double *const *cols; /* raw columns for the mean */
    const double *y;
    size_t n;
    double *K;     /* kernel matrix, then its Cholesky factor */
    double *r;     /* y - m(X) */
    double *alpha; /* K^-1 r */
    double *jac;   /* mean Jacobian, n_params x n */
    double *W;     /* alpha alpha' - K^-1, when the gradient was asked for */
    double lml, jitter;
};

int gp_work_init(struct gp_work *w, const gp_model *m, const double *X, const double *const *cols,
                 const double *y, size_t n);
void gp_work_free(struct gp_work *w);
/* lml (and grad, when not NULL) at m's current hyperparameters; -EDOM when
 * K cannot be factorised or the mean is not finite. */
int gp_evaluate(const gp_model *m, struct gp_work *w, double *grad);
/* Conditions m (its hyperparameters and scaling set) on a saved state
 * instead of data: raw is d x n column-major, alpha the saved weights, and
 * K gets the saved jitter on its diagonal, so that L and the predictions
 * are those of the model that was saved. */
int gp_restore(gp_model *m, const double *raw, size_t n, const double *alpha, double jitter,
               double lml);
/* n rows of scaled kernel inputs from raw columns (malloc'd). */
double *gp_scaled_rows(const gp_model *m, const double *const *cols, size_t n);

#endif
