/* folds: which rows each validation round holds out.  Shuffled K-fold,
 * folds read from a column (so another tool's folds can be reproduced
 * exactly), and a time split that tests on the most recent rows. */
#include "learn/learn.h"
#include "util/util.h"

#include <errno.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static folds *folds_alloc(size_t n, size_t k)
{
    folds *fo = calloc(1, sizeof(*fo));

    if (!fo)
        return NULL;
    fo->fold = calloc(n ? n : 1, sizeof(int));
    if (!fo->fold) {
        free(fo);
        return NULL;
    }
    fo->n = n;
    fo->k = k;
    return fo;
}

void folds_free(folds *fo)
{
    if (!fo)
        return;
    free(fo->fold);
    free(fo);
}

int folds_kfold(size_t n, size_t k, unsigned long seed, folds **out, char *err, size_t errlen)
{
    size_t *perm;
    gsl_rng *rng;
    folds *fo;

    if (k < 2 || k > n)
        return util_err(
            err, errlen, -EINVAL,
            "--cv %zu: the number of folds must be between 2 and the number of rows (%zu)", k, n);
    fo = folds_alloc(n, k);
    perm = malloc(n * sizeof(*perm));
    rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!fo || !perm || !rng) {
        folds_free(fo);
        free(perm);
        if (rng)
            gsl_rng_free(rng);
        return -ENOMEM;
    }
    gsl_rng_set(rng, seed);
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    gsl_ran_shuffle(rng, perm, n, sizeof(*perm));
    for (size_t f = 0, at = 0; f < k; f++) {
        size_t len = n / k + (f < n % k);
        for (size_t i = 0; i < len; i++)
            fo->fold[perm[at++]] = (int)f;
    }
    gsl_rng_free(rng);
    free(perm);
    *out = fo;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int folds_from_column(const double *v, size_t n, const char *name, folds **out, char *err,
                      size_t errlen)
{
    double *ids = malloc((n ? n : 1) * sizeof(*ids));
    size_t k = 0;
    folds *fo;

    if (!ids)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (v[i] != floor(v[i]) || fabs(v[i]) > 1e9) {
            free(ids);
            return util_err(err, errlen, -EINVAL,
                            "--folds %s: row %zu has fold id %g, expected an integer", name, i + 1,
                            v[i]);
        }
        ids[i] = v[i];
    }
    qsort(ids, n, sizeof(*ids), cmp_double);
    for (size_t i = 0; i < n; i++)
        if (i == 0 || ids[i] != ids[i - 1])
            ids[k++] = ids[i];
    if (k < 2) {
        free(ids);
        return util_err(err, errlen, -EINVAL,
                        "--folds %s: need at least 2 distinct fold ids, found %zu", name, k);
    }
    fo = folds_alloc(n, k);
    if (!fo) {
        free(ids);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        double *hit = bsearch(&v[i], ids, k, sizeof(*ids), cmp_double);
        fo->fold[i] = (int)(hit - ids);
    }
    free(ids);
    *out = fo;
    return 0;
}

int folds_holdout_last(size_t n, double percent, folds **out, char *err, size_t errlen)
{
    size_t test;
    folds *fo;

    if (!(percent > 0 && percent < 100))
        return util_err(err, errlen, -EINVAL,
                        "--holdout-last %g: expected a percentage in (0, 100)", percent);
    test = (size_t)ceil((double)n * percent / 100.0);
    if (test < 1 || test >= n)
        return util_err(err, errlen, -EINVAL,
                        "--holdout-last %g: %zu rows leave nothing to train or to test on", percent,
                        n);
    fo = folds_alloc(n, 1);
    if (!fo)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        fo->fold[i] = i < n - test ? -1 : 0;
    *out = fo;
    return 0;
}

void folds_split(const folds *fo, size_t f, size_t *train, size_t *n_train, size_t *test,
                 size_t *n_test)
{
    *n_train = *n_test = 0;
    for (size_t i = 0; i < fo->n; i++) {
        if (fo->fold[i] == (int)f)
            test[(*n_test)++] = i;
        else
            train[(*n_train)++] = i;
    }
}
