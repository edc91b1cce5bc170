/* gp_kernel: covariance functions of the Gaussian process (private to
 * lib/learn; the public API is gp_* in learn.h).
 *
 * A kernel is a sum of products of base kernels. Every hyperparameter is
 * kept as its natural logarithm, with bounds in the same space, and the
 * parameters of all base kernels form one flat vector in the order they
 * appear in the specification. Points are rows of a row-major n x d
 * matrix. */
#ifndef WATTPROF_GP_KERNEL_H
#define WATTPROF_GP_KERNEL_H

#include <stdbool.h>
#include <stddef.h>

typedef struct gp_kernel gp_kernel;

/* Parses `spec` ("matern32+white", "const*rbf+linear"): terms joined by '+',
 * factors by '*'. Base kernels: rbf, matern12, matern32, matern52 (variance
 * times a correlation of the scaled distance; one length scale, or d with
 * `ard`), linear (b + v x.x'), const (c), white (noise on the diagonal of
 * the training covariance only). */
int gp_kernel_parse(const char *spec, size_t d, bool ard, gp_kernel **out, char *err,
                    size_t errlen);
void gp_kernel_free(gp_kernel *k);
gp_kernel *gp_kernel_clone(const gp_kernel *k);

size_t gp_kernel_n_params(const gp_kernel *k);
/* theta, lo, hi: n_params log values (any may be NULL). */
void gp_kernel_get(const gp_kernel *k, double *theta, double *lo, double *hi);
void gp_kernel_set(gp_kernel *k, const double *theta);
void gp_kernel_set_bounds(gp_kernel *k, size_t i, double lo, double hi);
/* Name of parameter i, like "matern32.length_scale[x]"; `features` names
 * the d columns for ARD length scales. */
void gp_kernel_param_name(const gp_kernel *k, size_t i, const char *const *features, char *buf,
                          size_t len);

/* out (na x nb, row-major) = k(A, B). With `train` (A and B the same n
 * points), white noise is added to the diagonal. */
int gp_kernel_matrix(const gp_kernel *k, const double *A, size_t na, const double *B, size_t nb,
                     bool train, double *out);
/* Prior variance k(x, x) of each of n points, white noise included. */
void gp_kernel_diag(const gp_kernel *k, const double *A, size_t n, double *out);
/* grad[j] += sum_ab W_ab dK_ab/dtheta_j for the training covariance of X
 * (n points); W is n x n and symmetric. */
int gp_kernel_grad(const gp_kernel *k, const double *X, size_t n, const double *W, double *grad);

#endif
