/* rank_report: what cmd_rank.c and its report (rank_report.c) share — the
 * options of `wattprof rank` and the result of a ranking — and the report
 * itself: the table or JSON, the FLOP verdict and the box plots. */
#ifndef WATTPROF_RANK_REPORT_H
#define WATTPROF_RANK_REPORT_H

#include "rank_cli.h"

#include "learn/learn.h"

#include <stdbool.h>
#include <stddef.h>

enum h0_kind { H0_DEFAULT, H0_GIVEN, H0_MIN, H0_MEDIAN, H0_FLOPS };

struct opts {
    const char *data, *plot, *flops, *names;
    bool measure, json;
    enum h0_kind h0;
    rank_range *ranges;
    size_t n_ranges;
    enum rank_metric metric;
    long warmup, reps, max;
    double eps, threshold;
    unsigned long seed;
    char **cmds; /* measure: one shell command per variant */
    size_t n_cmds, cmds_alloc;
};

/* What the report shows; arrays have one entry per variant. */
struct result {
    bool *ranked; /* took part in the ranking */
    int *rank;    /* rank at (75,25); 0 when not ranked */
    double *mean; /* mean rank; NAN when not ranked */
    int *ranks;   /* n_ranges * p ranks, ranks[k * p + v] */
    double *median, *rt, *rf;
    size_t *h0;    /* the initial hypothesis over all variants */
    size_t *order; /* display order */
    bool flops_known;
    rank_anomaly anomaly;
    /* measure mode only */
    bool measured, converged;
    size_t rounds;
    double change, *single;
    char source[16]; /* where the measurements came from, e.g. "rapl" */
};

/* Prints the ranking as a table or JSON (o->json), and draws o->plot. */
int rank_report(const struct opts *o, const rank_variants *rv, const struct result *res);

#endif
