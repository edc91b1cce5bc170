/* rank: ranking program variants into performance classes by a three-way
 * comparison of quantiles, as docs/design.md "The engines" prescribes.  The
 * comparison is a callback so the sorting rules can be tested with dictated
 * outcomes; measurements come through a callback so the convergence loop
 * serves both recorded data and commands run on the spot. */
#include "learn/learn.h"
#include "util/util.h"

#include <errno.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const rank_range rank_default_ranges[RANK_N_DEFAULT_RANGES] = {
    {95, 5}, {90, 10}, {85, 15}, {80, 20}, {75, 25}, {70, 30}, {65, 35}, {55, 45},
};
const rank_range rank_report_range = {75, 25};

/* ---- Quantile ranges ----------------------------------------------------- */

static int cmp_range_width(const void *a, const void *b)
{
    const rank_range *x = a, *y = b;
    double wx = x->upper - x->lower, wy = y->upper - y->lower;

    return wx > wy ? -1 : wx < wy ? 1 : 0;
}

int rank_check_ranges(const rank_range *r, size_t n, char *err, size_t errlen)
{
    rank_range *s;

    if (n == 0)
        return util_err(err, errlen, -EINVAL, "no quantile ranges");
    for (size_t i = 0; i < n; i++)
        if (!(r[i].lower > 0 && r[i].upper < 100 && r[i].lower < r[i].upper))
            return util_err(err, errlen, -EINVAL,
                            "quantile range %zu (%g:%g) must satisfy 0 < lower < upper < 100",
                            i + 1, r[i].upper, r[i].lower);
    s = malloc(n * sizeof(*s));
    if (!s)
        return -ENOMEM;
    memcpy(s, r, n * sizeof(*s));
    qsort(s, n, sizeof(*s), cmp_range_width);
    /* Widest first: each next range must lie strictly inside the previous. */
    for (size_t i = 1; i < n; i++) {
        if (!(s[i].upper < s[i - 1].upper && s[i].lower > s[i - 1].lower)) {
            int rc = util_err(err, errlen, -EINVAL,
                              "quantile ranges %g:%g and %g:%g are not strictly nested",
                              s[i - 1].upper, s[i - 1].lower, s[i].upper, s[i].lower);
            free(s);
            return rc;
        }
    }
    free(s);
    return 0;
}

static int parse_range(const char *item, size_t idx, rank_range *out, char *err, size_t errlen)
{
    const char *colon = strchr(item, ':');
    char *left;
    int r;

    if (!colon)
        return util_err(err, errlen, -EINVAL, "quantile range %zu '%s': expected UPPER:LOWER",
                        idx + 1, item);
    left = strndup(item, (size_t)(colon - item));
    if (!left)
        return -ENOMEM;
    r = util_parse_double(left, &out->upper);
    free(left);
    if (r < 0 || util_parse_double(colon + 1, &out->lower) < 0)
        return util_err(err, errlen, -EINVAL, "quantile range %zu '%s': not two numbers", idx + 1,
                        item);
    return 0;
}

int rank_parse_ranges(const char *text, rank_range **out, size_t *n, char *err, size_t errlen)
{
    char **items;
    size_t k;
    rank_range *r;
    int rc;

    rc = util_split_list(text, ',', &items, &k);
    if (rc == -EINVAL)
        return util_err(err, errlen, rc, "quantile ranges '%s': empty item", text);
    if (rc < 0)
        return rc;
    r = calloc(k, sizeof(*r));
    rc = r ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < k; i++)
        rc = parse_range(items[i], i, &r[i], err, errlen);
    if (rc == 0)
        rc = rank_check_ranges(r, k, err, errlen);
    util_strv_free(items, k);
    if (rc < 0) {
        free(r);
        return rc;
    }
    *out = r;
    *n = k;
    return 0;
}

/* ---- The three-way comparison -------------------------------------------- */

double rank_quantile(const double *sorted, size_t n, double q)
{
    /* GSL interpolates at h = (n-1)q between the neighbours, as numpy's
     * default "linear" method does. */
    return gsl_stats_quantile_from_sorted_data(sorted, 1, n, q);
}

int rank_sample_init(rank_sample *s, const double *x, size_t n)
{
    double *all, iqr;
    size_t k = 0;

    memset(s, 0, sizeof(*s));
    if (n == 0)
        return -EINVAL;
    all = malloc(n * sizeof(*all));
    if (!all)
        return -ENOMEM;
    memcpy(all, x, n * sizeof(*all));
    gsl_sort(all, 1, n);
    s->q1 = rank_quantile(all, n, 0.25);
    s->q3 = rank_quantile(all, n, 0.75);
    iqr = s->q3 - s->q1;
    s->lo = s->q1 - 1.5 * iqr;
    s->hi = s->q3 + 1.5 * iqr;
    /* Sorted stays sorted when we keep a contiguous middle run in place. */
    for (size_t i = 0; i < n; i++)
        if (all[i] >= s->lo && all[i] <= s->hi)
            all[k++] = all[i];
    s->v = all;
    s->n = k;
    s->n_all = n;
    return 0;
}

void rank_sample_clear(rank_sample *s)
{
    free(s->v);
    memset(s, 0, sizeof(*s));
}

int rank_compare(const rank_sample *a, const rank_sample *b, const rank_range *r)
{
    double u = r->upper / 100.0, l = r->lower / 100.0;

    if (rank_quantile(a->v, a->n, u) < rank_quantile(b->v, b->n, l))
        return -1;
    if (rank_quantile(b->v, b->n, u) < rank_quantile(a->v, a->n, l))
        return 1;
    return 0;
}

int rank_cmp_samples(size_t a, size_t b, const rank_range *r, void *ctx)
{
    const rank_sample *s = ctx;

    return rank_compare(&s[a], &s[b], r);
}

/* ---- Sorting into classes ------------------------------------------------ */

static bool is_permutation(size_t p, const size_t *h0)
{
    bool *seen = calloc(p ? p : 1, sizeof(*seen));
    bool ok = seen != NULL;

    for (size_t i = 0; ok && i < p; i++) {
        ok = h0[i] < p && !seen[h0[i]];
        if (ok)
            seen[h0[i]] = true;
    }
    free(seen);
    return ok;
}

int rank_sort(size_t p, const size_t *h0, const rank_range *r, rank_cmp_fn cmp, void *ctx,
              size_t *order, int *rank)
{
    if (p == 0 || !is_permutation(p, h0))
        return -EINVAL;
    memcpy(order, h0, p * sizeof(*order));
    for (size_t i = 0; i < p; i++) {
        for (size_t j = 0; j + 1 < p - i; j++) {
            if (cmp(order[j + 1], order[j], r, ctx) < 0) {
                size_t t = order[j];
                order[j] = order[j + 1];
                order[j + 1] = t;
            }
        }
    }
    rank[order[0]] = 1;
    for (size_t k = 1; k < p; k++) {
        bool same = cmp(order[k - 1], order[k], r, ctx) == 0;
        rank[order[k]] = rank[order[k - 1]] + (same ? 0 : 1);
    }
    return 0;
}

int rank_mean(size_t p, const size_t *h0, const rank_range *ranges, size_t n_ranges,
              rank_cmp_fn cmp, void *ctx, int *ranks, double *mean)
{
    size_t *order = malloc((p ? p : 1) * sizeof(*order));
    int *rank = malloc((p ? p : 1) * sizeof(*rank));
    int rc = (order && rank) ? 0 : -ENOMEM;

    if (rc == 0 && n_ranges == 0)
        rc = -EINVAL;
    for (size_t v = 0; rc == 0 && v < p; v++)
        mean[v] = 0;
    for (size_t k = 0; rc == 0 && k < n_ranges; k++) {
        rc = rank_sort(p, h0, &ranges[k], cmp, ctx, order, rank);
        for (size_t v = 0; rc == 0 && v < p; v++) {
            mean[v] += rank[v];
            if (ranks)
                ranks[k * p + v] = rank[v];
        }
    }
    /* Sums of small integers divided once: equal classes give equal means
     * bit for bit, which the anomaly test relies on. */
    for (size_t v = 0; rc == 0 && v < p; v++)
        mean[v] /= (double)n_ranges;
    free(order);
    free(rank);
    return rc;
}

struct keyed {
    double key;
    size_t idx;
};

static int cmp_keyed(const void *a, const void *b)
{
    const struct keyed *x = a, *y = b;

    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

int rank_h0_by_key(size_t p, const double *key, size_t *h0)
{
    struct keyed *k = malloc((p ? p : 1) * sizeof(*k));

    if (!k)
        return -ENOMEM;
    for (size_t i = 0; i < p; i++)
        k[i] = (struct keyed){key[i], i};
    qsort(k, p, sizeof(*k), cmp_keyed);
    for (size_t i = 0; i < p; i++)
        h0[i] = k[i].idx;
    free(k);
    return 0;
}

/* ---- Convergence ----------------------------------------------------------- */

double rank_convergence(const double *prev, const double *cur, size_t p)
{
    double *x, *y, sum = 0;

    if (p < 2)
        return 0;
    x = malloc(2 * p * sizeof(*x));
    if (!x)
        return NAN;
    y = x + p;
    memcpy(x, prev, p * sizeof(*x));
    memcpy(y, cur, p * sizeof(*y));
    gsl_sort(x, 1, p);
    gsl_sort(y, 1, p);
    for (size_t i = 0; i + 1 < p; i++) {
        double d = (y[i + 1] - y[i]) - (x[i + 1] - x[i]);
        sum += d * d;
    }
    free(x);
    return sqrt(sum) / (double)(p - 1);
}

static int outcome_init(const rank_loop *l, rank_outcome *o)
{
    memset(o, 0, sizeof(*o));
    o->p = l->p;
    o->n_ranges = l->n_ranges;
    o->change = NAN;
    o->x = calloc(l->p, sizeof(*o->x));
    o->mean = calloc(l->p, sizeof(*o->mean));
    o->ranks = calloc(l->p * l->n_ranges, sizeof(*o->ranks));
    for (size_t v = 0; o->x && v < l->p; v++) {
        o->x[v] = malloc(l->max * sizeof(**o->x));
        if (!o->x[v])
            return -ENOMEM;
    }
    return (o->x && o->mean && o->ranks) ? 0 : -ENOMEM;
}

void rank_outcome_clear(rank_outcome *o)
{
    for (size_t v = 0; o->x && v < o->p; v++)
        free(o->x[v]);
    free(o->x);
    free(o->mean);
    free(o->ranks);
    memset(o, 0, sizeof(*o));
}

/* Ranks the measurements taken so far into o->mean and o->ranks. */
static int rank_now(const rank_loop *l, rank_outcome *o)
{
    rank_sample *s = calloc(l->p, sizeof(*s));
    int rc = s ? 0 : -ENOMEM;

    for (size_t v = 0; rc == 0 && v < l->p; v++)
        rc = rank_sample_init(&s[v], o->x[v], o->n);
    if (rc == 0)
        rc = rank_mean(l->p, l->h0, l->ranges, l->n_ranges, rank_cmp_samples, s, o->ranks, o->mean);
    for (size_t v = 0; s && v < l->p; v++)
        rank_sample_clear(&s[v]);
    free(s);
    return rc;
}

/* One round: m more measurements per variant, then ranks when there are
 * enough. *ranked tells whether o->mean is new. */
static int loop_round(const rank_loop *l, rank_outcome *o, double *batch, bool *ranked)
{
    size_t m = l->m < l->max - o->n ? l->m : l->max - o->n;
    int rc = l->more(o->rounds + 1, m, batch, l->ctx);

    if (rc < 0)
        return rc;
    for (size_t v = 0; v < l->p; v++)
        memcpy(o->x[v] + o->n, batch + v * m, m * sizeof(*batch));
    o->n += m;
    o->rounds++;
    *ranked = o->n >= 4;
    return *ranked ? rank_now(l, o) : 0;
}

int rank_converge(const rank_loop *l, rank_outcome *out)
{
    double *batch = NULL, *prev = NULL;
    bool have_prev = false, ranked;
    int rc;

    if (l->p == 0 || l->m == 0 || l->max < 4 || !l->more || l->n_ranges == 0)
        return -EINVAL;
    rc = outcome_init(l, out);
    batch = malloc(l->p * l->m * sizeof(*batch));
    prev = malloc(l->p * sizeof(*prev));
    if (rc == 0 && (!batch || !prev))
        rc = -ENOMEM;
    while (rc == 0 && out->n < l->max && !out->converged) {
        rc = loop_round(l, out, batch, &ranked);
        if (rc < 0 || !ranked)
            continue;
        if (have_prev) {
            out->change = rank_convergence(prev, out->mean, l->p);
            out->converged = out->change < l->eps;
        }
        memcpy(prev, out->mean, l->p * sizeof(*prev));
        have_prev = true;
        if (l->progress)
            l->progress(out->rounds, out->n, out->change, l->ctx);
    }
    free(batch);
    free(prev);
    if (rc < 0)
        rank_outcome_clear(out);
    return rc;
}

/* ---- FLOPs as a discriminant -------------------------------------------- */

void rank_relative(size_t p, const double *v, double *rel)
{
    double min = INFINITY;

    for (size_t i = 0; i < p; i++)
        if (v[i] < min)
            min = v[i];
    for (size_t i = 0; i < p; i++)
        rel[i] = v[i] == min ? 0 : min == 0 ? NAN : (v[i] - min) / min;
}

int rank_anomaly_test(size_t p, const double *flops, const double *rank, rank_anomaly *out)
{
    double fmin = INFINITY;
    bool have_out = false;

    memset(out, 0, sizeof(*out));
    if (p == 0)
        return -EINVAL;
    for (size_t i = 0; i < p; i++)
        if (flops[i] < fmin)
            fmin = flops[i];
    out->best_min = out->worst_min = p;
    for (size_t i = 0; i < p; i++) {
        if (flops[i] == fmin) {
            out->n_min++;
            if (out->best_min == p || rank[i] < rank[out->best_min])
                out->best_min = i;
            if (out->worst_min == p || rank[i] > rank[out->worst_min])
                out->worst_min = i;
        } else if (!have_out || rank[i] < rank[out->outsider]) {
            out->outsider = i;
            have_out = true;
        }
    }
    if (have_out && rank[out->outsider] < rank[out->best_min])
        out->flags |= RANK_ANOMALY_OUTSIDER;
    if (rank[out->worst_min] != rank[out->best_min])
        out->flags |= RANK_ANOMALY_SPLIT;
    return 0;
}
