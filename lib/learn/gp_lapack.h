/* gp_lapack: the Gaussian process's O(n^3) linear algebra from OpenBLAS,
 * and its optimiser L-BFGS-B, both opened at run time (private to
 * lib/learn). Linking them would cost every wattprof command their
 * start-up (measured: about 3 ms of CPU for OpenBLAS's relocations and
 * constructor, 0.8 ms for liblbfgsb and libgfortran) for the one command
 * that needs them. Matrices are n x n (or b x n), row-major. */
#ifndef WATTPROF_GP_LAPACK_H
#define WATTPROF_GP_LAPACK_H

#include <stddef.h>

struct gp_lapack {
    void *lib;
    /* LAPACK's Fortran entry points: the last argument is uplo's length */
    void (*potrf)(const char *uplo, const int *n, double *a, const int *lda, int *info,
                  size_t uplo_len);
    void (*potri)(const char *uplo, const int *n, double *a, const int *lda, int *info,
                  size_t uplo_len);
    void (*trsm)(int order, int side, int uplo, int trans, int diag, int m, int n, double alpha,
                 const double *a, int lda, double *b, int ldb);
    void *lbfgsb_lib;
    /* L-BFGS-B 3.0's driver (see gp_fit.c) */
    void (*setulb)(const int *n, const int *m, double *x, const double *l, const double *u,
                   const int *nbd, double *f, double *g, const double *factr, const double *pgtol,
                   double *wa, int *iwa, char *task, const int *iprint, char *csave, int *lsave,
                   int *isave, double *dsave, size_t task_len, size_t csave_len);
};

/* Opens OpenBLAS (libopenblas.so.0) and L-BFGS-B (liblbfgsb.so.0);
 * -ENOENT with err naming the package when it cannot. */
int gp_lapack_open(struct gp_lapack *la, char *err, size_t errlen);
void gp_lapack_close(struct gp_lapack *la);

/* A's Cholesky factor in place, in its lower triangle; the upper triangle
 * is left alone. -EDOM when A is not positive definite. */
int gp_lapack_cholesky(const struct gp_lapack *la, double *A, size_t n);
/* inv = (L L')^-1, both triangles, from the factor L. */
int gp_lapack_inverse(const struct gp_lapack *la, const double *L, size_t n, double *inv);
/* B := B L'^-1 for the b x n matrix B. */
void gp_lapack_solve_lt(const struct gp_lapack *la, const double *L, size_t n, double *B, size_t b);

#endif
