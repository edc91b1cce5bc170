/* gp_mean: the mean function of the Gaussian process (private to
 * lib/learn): zero, a fitted constant, or an expression over the features
 * (learn.h, "Expressions") whose constants are fitted or kept as written.
 * The fitted values are the mean's hyperparameters. */
#ifndef WATTPROF_GP_MEAN_H
#define WATTPROF_GP_MEAN_H

#include <stdbool.h>
#include <stddef.h>

typedef struct gp_meanfn gp_meanfn;

/* `spec`: NULL, "zero", "const", or an expression over features[0..d). */
int gp_meanfn_new(const char *spec, const char *const *features, size_t d, bool fit,
                  gp_meanfn **out, char *err, size_t errlen);
void gp_meanfn_free(gp_meanfn *f);
gp_meanfn *gp_meanfn_clone(const gp_meanfn *f);

/* Parameters being fitted: 1 for a constant, the expression's constants
 * when fitted, else 0. */
size_t gp_meanfn_n_params(const gp_meanfn *f);
void gp_meanfn_get(const gp_meanfn *f, double *c);
void gp_meanfn_set(gp_meanfn *f, const double *c);
/* Name of parameter i ("mean.const", "mean.c0") into buf. */
void gp_meanfn_param_name(const gp_meanfn *f, size_t i, char *buf, size_t len);

/* Values at n points (cols[j] is feature j) and, when jac is not NULL,
 * jac[k * n + i] = d m(x_i) / d param_k. -EDOM when a value is not finite. */
int gp_meanfn_eval(const gp_meanfn *f, const double *const *cols, size_t n, double *out,
                   double *jac);
/* A starting point fitted to y alone: the mean of y for a constant, least
 * squares for fitted expression constants; nothing otherwise. */
int gp_meanfn_init(gp_meanfn *f, const double *const *cols, const double *y, size_t n);
/* Leave-one-out predictions of the mean alone (refitting per fold by
 * gp_meanfn_init when it has parameters). */
int gp_meanfn_loo(const gp_meanfn *f, const double *const *cols, size_t d, const double *y,
                  size_t n, double *out);
/* "zero", "const", or the expression with its current constants (malloc'd). */
char *gp_meanfn_text(const gp_meanfn *f, const char *const *features);

#endif
