/* gp_lapack: Cholesky factorisation, inverse and triangular solves for the
 * Gaussian process through OpenBLAS, opened with dlopen on first use by a
 * model (see gp_lapack.h for why).
 *
 * LAPACK is column-major and our matrices row-major: a symmetric matrix is
 * its own transpose, so LAPACK's upper triangle ("U") is our lower one. */
#include "learn/gp_lapack.h"
#include "util/util.h"

#include <dlfcn.h>
#include <errno.h>
#include <gsl/gsl_cblas.h>
#include <string.h>

#define GP_OPENBLAS "libopenblas.so.0"
#define GP_LBFGSB "liblbfgsb.so.0"

int gp_lapack_open(struct gp_lapack *la, char *err, size_t errlen)
{
    memset(la, 0, sizeof(*la));
    la->lib = dlopen(GP_OPENBLAS, RTLD_NOW | RTLD_LOCAL);
    if (!la->lib)
        return util_err(err, errlen, -ENOENT,
                        "cannot load OpenBLAS (" GP_OPENBLAS ", Debian package libopenblas0): %s",
                        dlerror());
    *(void **)&la->potrf = dlsym(la->lib, "dpotrf_");
    *(void **)&la->potri = dlsym(la->lib, "dpotri_");
    *(void **)&la->trsm = dlsym(la->lib, "cblas_dtrsm");
    if (!la->potrf || !la->potri || !la->trsm) {
        gp_lapack_close(la);
        return util_err(err, errlen, -ENOENT, GP_OPENBLAS " lacks dpotrf_, dpotri_ or cblas_dtrsm");
    }
    la->lbfgsb_lib = dlopen(GP_LBFGSB, RTLD_NOW | RTLD_LOCAL);
    if (!la->lbfgsb_lib) {
        util_err(err, errlen, -ENOENT,
                 "cannot load L-BFGS-B (" GP_LBFGSB ", Debian package liblbfgsb0): %s", dlerror());
        gp_lapack_close(la);
        return -ENOENT;
    }
    if (!(*(void **)&la->setulb = dlsym(la->lbfgsb_lib, "setulb_"))) {
        gp_lapack_close(la);
        return util_err(err, errlen, -ENOENT, GP_LBFGSB " lacks setulb_");
    }
    return 0;
}

void gp_lapack_close(struct gp_lapack *la)
{
    if (la->lib)
        dlclose(la->lib);
    if (la->lbfgsb_lib)
        dlclose(la->lbfgsb_lib);
    memset(la, 0, sizeof(*la));
}

int gp_lapack_cholesky(const struct gp_lapack *la, double *A, size_t n)
{
    int ln = (int)n, info;

    la->potrf("U", &ln, A, &ln, &info, 1);
    return info == 0 ? 0 : -EDOM;
}

int gp_lapack_inverse(const struct gp_lapack *la, const double *L, size_t n, double *inv)
{
    int ln = (int)n, info;

    memcpy(inv, L, n * n * sizeof(double));
    la->potri("U", &ln, inv, &ln, &info, 1);
    if (info != 0) /* a zero on L's diagonal */
        return -EDOM;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            inv[j * n + i] = inv[i * n + j];
    return 0;
}

void gp_lapack_solve_lt(const struct gp_lapack *la, const double *L, size_t n, double *B, size_t b)
{
    la->trsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (int)b, (int)n, 1.0,
             L, (int)n, B, (int)n);
}
