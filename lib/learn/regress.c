/* regress: the trainer's loop around the engines — scaling fitted on the
 * training rows, one fit per cache-miss class, cross-validated predictions.
 * Engines differ only in how one class is fitted and predicted. */
#include "learn/learn.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const engine_names[] = {"ols", "ridge", "lasso", "forest"};

const char *regress_engine_name(regress_engine e)
{
    return engine_names[e];
}

int regress_engine_parse(const char *s, regress_engine *out)
{
    for (size_t i = 0; i < sizeof(engine_names) / sizeof(*engine_names); i++)
        if (strcmp(s, engine_names[i]) == 0) {
            *out = (regress_engine)i;
            return 0;
        }
    return -EINVAL;
}

static const char *class_name(size_t n_classes, size_t c)
{
    return n_classes < 2 ? "all" : c == 0 ? "high-miss" : "low-miss";
}

static int train_class(regress_fit *f, const regress_opts *o, const double *const *x,
                       const double *y, const size_t *rows, size_t n, size_t c, char *err,
                       size_t errlen)
{
    if (o->engine == REGRESS_FOREST) {
        int r = forest_fit(&f->trees[c], &o->forest, x, y, f->p, rows, n);
        return r < 0 ? util_err(err, errlen, r, "forest: cannot fit class %s",
                                class_name(f->n_classes, c))
                     : 0;
    }
    linear_opts lo = o->linear;
    lo.kind = o->engine == REGRESS_OLS     ? LINEAR_OLS
              : o->engine == REGRESS_RIDGE ? LINEAR_RIDGE
                                           : LINEAR_LASSO;
    return linear_fit(&f->lin[c], &lo, &f->sc, x, y, f->p, rows, n, err, errlen);
}

int regress_train(regress_fit *f, const regress_opts *o, const double *const *x, const double *y,
                  size_t p, const int *klass, size_t n_classes, const size_t *rows, size_t n_rows,
                  char *err, size_t errlen)
{
    size_t *sub = malloc((n_rows ? n_rows : 1) * sizeof(*sub));
    int r;

    memset(f, 0, sizeof(*f));
    f->p = p;
    f->n_classes = n_classes ? n_classes : 1;
    if (!sub)
        return -ENOMEM;
    r = scaler_fit(&f->sc, x, p, rows, n_rows);
    for (size_t c = 0; r == 0 && c < f->n_classes; c++) {
        size_t n = 0;
        for (size_t i = 0; i < n_rows; i++) {
            size_t row = rows ? rows[i] : i;
            if (!klass || klass[row] == (int)c)
                sub[n++] = row;
        }
        f->rows[c] = n;
        if (n == 0)
            r = util_err(err, errlen, -EINVAL, "class %s has no training rows",
                         class_name(f->n_classes, c));
        else
            r = train_class(f, o, x, y, sub, n, c, err, errlen);
    }
    free(sub);
    if (r < 0)
        regress_done(f);
    return r;
}

void regress_predict(const regress_fit *f, const double *const *x, const int *klass,
                     const size_t *rows, size_t n_rows, double *out)
{
    for (size_t i = 0; i < n_rows; i++) {
        size_t row = rows ? rows[i] : i;
        int c = klass && f->n_classes > 1 ? klass[row] : 0;
        if (f->trees[c])
            forest_predict(f->trees[c], x, &row, 1, &out[i]);
        else
            linear_predict(&f->lin[c], &f->sc, x, &row, 1, &out[i]);
    }
}

void regress_done(regress_fit *f)
{
    for (size_t c = 0; c < 2; c++) {
        linear_done(&f->lin[c]);
        forest_free(f->trees[c]);
        f->trees[c] = NULL;
    }
    scaler_done(&f->sc);
}

int regress_cv(const regress_opts *o, const double *const *x, const double *y, size_t n, size_t p,
               const int *klass, size_t n_classes, const folds *fo, double *pred,
               double *fold_alpha, char *err, size_t errlen)
{
    size_t *train = malloc((n ? n : 1) * sizeof(size_t)),
           *test = malloc((n ? n : 1) * sizeof(size_t));
    double *out = malloc((n ? n : 1) * sizeof(double));
    int r = train && test && out ? 0 : -ENOMEM;

    for (size_t i = 0; i < n; i++)
        pred[i] = NAN;
    for (size_t k = 0; r == 0 && k < fo->k; k++) {
        size_t ntr, nte;
        regress_fit f;
        char why[UTIL_ERRLEN];
        folds_split(fo, k, train, &ntr, test, &nte);
        r = regress_train(&f, o, x, y, p, klass, n_classes, train, ntr, why, sizeof(why));
        if (r < 0) {
            util_err(err, errlen, r, "validation round %zu of %zu: %s", k + 1, fo->k, why);
            break;
        }
        for (size_t c = 0; fold_alpha && c < 2; c++)
            fold_alpha[k * 2 + c] = c < f.n_classes ? f.lin[c].alpha : NAN;
        regress_predict(&f, x, klass, test, nte, out);
        for (size_t i = 0; i < nte; i++)
            pred[test[i]] = out[i];
        regress_done(&f);
    }
    free(train);
    free(test);
    free(out);
    return r;
}
