/* select: which features say most about the target.  Three independent
 * views — rank correlation, principal-component loadings, forest
 * importance — and their mean rank, the energy paper's way of keeping 22 of
 * 41 events. */
#include "learn/learn.h"

#include <errno.h>
#include <gsl/gsl_eigen.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Ranks 1..n of v ascending, tied values sharing their average rank. */
static int ranks_of(const double *v, size_t n, double *rank)
{
    size_t *idx = malloc(n * sizeof(*idx));

    if (!idx)
        return -ENOMEM;
    gsl_sort_index(idx, v, 1, n);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && v[idx[j + 1]] == v[idx[i]])
            j++;
        for (size_t k = i; k <= j; k++)
            rank[idx[k]] = (double)(i + j) / 2 + 1;
        i = j + 1;
    }
    free(idx);
    return 0;
}

double select_spearman(const double *a, const double *b, size_t n)
{
    double *ra = malloc(n * sizeof(double)), *rb = malloc(n * sizeof(double)), rho = NAN;

    if (ra && rb && n > 1 && ranks_of(a, n, ra) == 0 && ranks_of(b, n, rb) == 0 &&
        gsl_stats_sd(ra, 1, n) > 0 && gsl_stats_sd(rb, 1, n) > 0)
        rho = gsl_stats_correlation(ra, 1, rb, 1, n);
    free(ra);
    free(rb);
    return rho;
}

/* Correlation matrix of the features (a constant feature correlates with
 * nothing), its eigenvectors weighted by their share of the variance. */
static int pca_scores(const double *const *x, size_t n, size_t p, double *score)
{
    gsl_matrix *c = gsl_matrix_calloc(p, p), *v = gsl_matrix_alloc(p, p);
    gsl_vector *ev = gsl_vector_alloc(p);
    gsl_eigen_symmv_workspace *ws = gsl_eigen_symmv_alloc(p);
    double total = 0;
    int r = -ENOMEM;

    if (!c || !v || !ev || !ws)
        goto out;
    for (size_t j = 0; j < p; j++)
        for (size_t k = j; k < p; k++) {
            double sj = gsl_stats_sd(x[j], 1, n), sk = gsl_stats_sd(x[k], 1, n), cor = 0;
            if (sj > 0 && sk > 0)
                cor = j == k ? 1 : gsl_stats_correlation(x[j], 1, x[k], 1, n);
            gsl_matrix_set(c, j, k, cor);
            gsl_matrix_set(c, k, j, cor);
        }
    gsl_eigen_symmv(c, ev, v, ws);
    for (size_t k = 0; k < p; k++)
        total += fmax(0, gsl_vector_get(ev, k));
    for (size_t j = 0; j < p; j++) {
        score[j] = 0;
        for (size_t k = 0; k < p && total > 0; k++)
            score[j] += fmax(0, gsl_vector_get(ev, k)) / total * fabs(gsl_matrix_get(v, j, k));
    }
    r = 0;
out:
    gsl_matrix_free(c);
    gsl_matrix_free(v);
    gsl_vector_free(ev);
    if (ws)
        gsl_eigen_symmv_free(ws);
    return r;
}

/* Rank 1 for the largest score; NaN (a constant feature's rho) is last. */
static int rank_desc(const double *score, size_t p, double *rank)
{
    double neg[p ? p : 1];

    for (size_t j = 0; j < p; j++)
        neg[j] = isnan(score[j]) ? INFINITY : -score[j];
    return ranks_of(neg, p, rank);
}

void select_done(select_result *r)
{
    free(r->spearman);
    free(r->order);
    memset(r, 0, sizeof(*r));
}

int select_rank(select_result *r, const double *const *x, const double *y, size_t n, size_t p,
                const forest_opts *fo)
{
    forest *f = NULL;
    int e;

    memset(r, 0, sizeof(*r));
    if (n < 2 || p == 0)
        return -EINVAL;
    r->p = p;
    r->spearman = calloc(7 * p, sizeof(double));
    r->order = malloc(p * sizeof(size_t));
    if (!r->spearman || !r->order) {
        select_done(r);
        return -ENOMEM;
    }
    r->pca = r->spearman + p;
    r->forest = r->pca + p;
    r->rank_spearman = r->forest + p;
    r->rank_pca = r->rank_spearman + p;
    r->rank_forest = r->rank_pca + p;
    r->mean_rank = r->rank_forest + p;
    for (size_t j = 0; j < p; j++)
        r->spearman[j] = fabs(select_spearman(x[j], y, n));
    e = pca_scores(x, n, p, r->pca);
    if (e == 0)
        e = forest_fit(&f, fo, x, y, p, NULL, n);
    if (e == 0) {
        memcpy(r->forest, forest_importance(f), p * sizeof(double));
        forest_free(f);
        e = rank_desc(r->spearman, p, r->rank_spearman);
    }
    if (e == 0)
        e = rank_desc(r->pca, p, r->rank_pca);
    if (e == 0)
        e = rank_desc(r->forest, p, r->rank_forest);
    if (e < 0) {
        select_done(r);
        return e;
    }
    for (size_t j = 0; j < p; j++)
        r->mean_rank[j] = (r->rank_spearman[j] + r->rank_pca[j] + r->rank_forest[j]) / 3;
    gsl_sort_index(r->order, r->mean_rank, 1, p); /* stable: ties keep column order */
    return 0;
}
