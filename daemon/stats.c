/* stats: the sampler's windows of recent values (the last minute of timer
 * lateness and tick work, the hour of host power behind the idle
 * percentile, the minute of drift) and the histograms status reports. */
#include "sampler-internal.h"

#include <errno.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int stats_ring_init(struct ring *r, size_t cap)
{
    r->v = calloc(cap, sizeof(double));
    r->cap = cap;
    return r->v ? 0 : -ENOMEM;
}

void stats_ring_add(struct ring *r, double x)
{
    r->v[r->next] = x;
    r->next = (r->next + 1) % r->cap;
    if (r->n < r->cap)
        r->n++;
}

void stats_hist_add(daemon_hist *h, double ns)
{
    static const double bounds_us[DAEMON_HIST_N] = DAEMON_HIST_BOUNDS_US;
    size_t b = 0;

    while (b < DAEMON_HIST_N && ns > bounds_us[b] * 1e3)
        b++;
    h->bucket[b]++;
    h->count++;
    h->sum_s += ns / 1e9;
}

/* Percentile (0..100) of what the ring holds: the k-th smallest of a copy,
 * by selection (linear time; a sort of the minute's 3,000 lateness values
 * cost more than a tick). Called once a second, never per tick. */
double stats_percentile(const struct ring *r, double pct)
{
    double tmp[r->n ? r->n : 1];

    if (r->n == 0)
        return NAN;
    memcpy(tmp, r->v, r->n * sizeof(double));
    return gsl_stats_select(tmp, 1, r->n, (size_t)llround(pct / 100.0 * (double)(r->n - 1)));
}

double stats_mean(const struct ring *r)
{
    double s = 0;
    for (size_t i = 0; i < r->n; i++)
        s += r->v[i];
    return r->n ? s / (double)r->n : NAN;
}
