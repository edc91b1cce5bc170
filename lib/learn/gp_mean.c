/* gp_mean: the Gaussian process's mean function. An analytic model written
 * as an expression anchors predictions far from the data; the GP then only
 * learns the model's misestimation (the accelerator paper's idea). */
#include "learn/gp_mean.h"
#include "learn/learn.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum mean_kind { MEAN_ZERO, MEAN_CONST, MEAN_EXPR };

struct gp_meanfn {
    enum mean_kind kind;
    double c; /* MEAN_CONST */
    expr *e;  /* MEAN_EXPR */
    bool fit; /* MEAN_EXPR: its constants are hyperparameters */
};

#define LM_ITER 200

int gp_meanfn_new(const char *spec, const char *const *features, size_t d, bool fit,
                  gp_meanfn **out, char *err, size_t errlen)
{
    gp_meanfn *f = calloc(1, sizeof(*f));
    int r;

    if (!f)
        return -ENOMEM;
    if (!spec || !strcmp(spec, "zero")) {
        f->kind = MEAN_ZERO;
    } else if (!strcmp(spec, "const")) {
        f->kind = MEAN_CONST;
    } else {
        f->kind = MEAN_EXPR;
        f->fit = fit;
        r = expr_parse(spec, features, d, &f->e, err, errlen);
        if (r < 0) {
            free(f);
            return r;
        }
    }
    *out = f;
    return 0;
}

void gp_meanfn_free(gp_meanfn *f)
{
    if (!f)
        return;
    expr_free(f->e);
    free(f);
}

gp_meanfn *gp_meanfn_clone(const gp_meanfn *f)
{
    gp_meanfn *c = malloc(sizeof(*c));

    if (!c)
        return NULL;
    *c = *f;
    if (f->e && !(c->e = expr_clone(f->e))) {
        free(c);
        return NULL;
    }
    return c;
}

size_t gp_meanfn_n_params(const gp_meanfn *f)
{
    if (f->kind == MEAN_CONST)
        return 1;
    if (f->kind == MEAN_EXPR && f->fit)
        return expr_n_consts(f->e);
    return 0;
}

void gp_meanfn_get(const gp_meanfn *f, double *c)
{
    if (f->kind == MEAN_CONST)
        c[0] = f->c;
    else if (gp_meanfn_n_params(f))
        expr_get_consts(f->e, c);
}

void gp_meanfn_set(gp_meanfn *f, const double *c)
{
    if (f->kind == MEAN_CONST)
        f->c = c[0];
    else if (gp_meanfn_n_params(f))
        expr_set_consts(f->e, c);
}

void gp_meanfn_param_name(const gp_meanfn *f, size_t i, char *buf, size_t len)
{
    if (f->kind == MEAN_CONST)
        snprintf(buf, len, "mean.const");
    else
        snprintf(buf, len, "mean.c%zu", i);
}

int gp_meanfn_eval(const gp_meanfn *f, const double *const *cols, size_t n, double *out,
                   double *jac)
{
    switch (f->kind) {
    case MEAN_ZERO:
        for (size_t i = 0; i < n; i++)
            out[i] = 0;
        return 0;
    case MEAN_CONST:
        for (size_t i = 0; i < n; i++) {
            out[i] = f->c;
            if (jac)
                jac[i] = 1;
        }
        return 0;
    default:
        if (jac && f->fit)
            return expr_eval_jac(f->e, cols, n, out, jac) ? 0 : -EDOM;
        return expr_eval(f->e, cols, n, out) ? 0 : -EDOM;
    }
}

int gp_meanfn_init(gp_meanfn *f, const double *const *cols, const double *y, size_t n)
{
    double rss, c = 0;

    if (f->kind == MEAN_CONST) {
        for (size_t i = 0; i < n; i++)
            c += y[i];
        f->c = n ? c / (double)n : 0;
        return 0;
    }
    if (f->kind == MEAN_EXPR && f->fit && expr_n_consts(f->e) > 0)
        return expr_fit_consts(f->e, cols, y, n, LM_ITER, &rss);
    return 0;
}

/* Prediction at point i of a copy fitted without it. */
static int loo_one(const gp_meanfn *f, const double *const *cols, size_t d, const double *y,
                   size_t n, size_t i, double **sub, double *ysub, double *out)
{
    const double *xi[d ? d : 1];
    gp_meanfn *g = gp_meanfn_clone(f);
    int r;

    if (!g)
        return -ENOMEM;
    for (size_t j = 0; j < d; j++) {
        memcpy(sub[j], cols[j], i * sizeof(double));
        memcpy(sub[j] + i, cols[j] + i + 1, (n - i - 1) * sizeof(double));
        xi[j] = cols[j] + i;
    }
    memcpy(ysub, y, i * sizeof(double));
    memcpy(ysub + i, y + i + 1, (n - i - 1) * sizeof(double));
    r = gp_meanfn_init(g, (const double *const *)sub, ysub, n - 1);
    if (r == 0)
        r = gp_meanfn_eval(g, xi, 1, out, NULL);
    gp_meanfn_free(g);
    return r;
}

int gp_meanfn_loo(const gp_meanfn *f, const double *const *cols, size_t d, const double *y,
                  size_t n, double *out)
{
    double *sub[d ? d : 1], *ysub;
    int r = 0;

    if (gp_meanfn_n_params(f) == 0 || n < 2)
        return gp_meanfn_eval(f, cols, n, out, NULL);
    ysub = malloc(n * sizeof(double));
    for (size_t j = 0; j < d; j++)
        sub[j] = malloc(n * sizeof(double));
    for (size_t j = 0; j < d; j++)
        if (!sub[j])
            r = -ENOMEM;
    if (!ysub)
        r = -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++)
        r = loo_one(f, cols, d, y, n, i, sub, ysub, out + i);
    for (size_t j = 0; j < d; j++)
        free(sub[j]);
    free(ysub);
    return r;
}

char *gp_meanfn_text(const gp_meanfn *f, const char *const *features)
{
    char buf[64];

    if (f->kind == MEAN_EXPR)
        return expr_print(f->e, features);
    if (f->kind == MEAN_ZERO)
        return strdup("zero");
    snprintf(buf, sizeof(buf), "%.17g", f->c);
    return strdup(buf);
}
