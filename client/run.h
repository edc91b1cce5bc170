/* run: what `wattprof run` (cmd_run.c) and its report (run_report.c)
 * share: the options, the sums of one run, and the figures kept over -r
 * runs for their means and deviations. */
#ifndef WATTPROF_CLIENT_RUN_H
#define WATTPROF_CLIENT_RUN_H

#include "model/model.h"
#include "sample/sample.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

struct run_opts {
    const char *model_path;
    const char *output; /* report file; stderr (like perf stat) when NULL */
    long interval_ms;
    long repeat;     /* -r N: runs (default 1) */
    const char *sep; /* -x SEP: one figure a line, fields split by SEP */
    bool json;
    char **cmd;
};

/* The figures of a run, for means and deviations over -r runs: the fixed
 * ones, then per event its count and its counted-time ratio, then per RAPL
 * zone its energy. */
enum {
    Q_WALL,
    Q_CPU,
    Q_USER,
    Q_SYS,
    Q_STANDALONE,
    Q_ATTRIBUTED,
    Q_HOST,
    Q_MODELED_HOST,
    Q_IDLE,
    Q_UNATTRIBUTED,
    Q_FIXED
};

struct run_stats {
    size_t n_q, runs;
    double *sum, *sumsq;
};

/* What the sampling loop accumulates. */
struct run_totals {
    double standalone_j, attributed_j, host_j, modeled_host_j, idle_j, unattributed_j;
    double *zone_j;    /* per RAPL zone */
    double class_stat; /* cumulative cache-misses, or last rate */
    int klass;
    unsigned ticks;
    /* Gaps: zone reads that failed (the energy shows up at the next good
     * read of the zone) and ticks the model could not attribute (their
     * measured energy is in host_j, as unattributed). */
    unsigned read_errors, bad_ticks;
    int first_read_error; /* -errno of the first failed read */
};

struct run_ctx {
    struct run_opts opt;
    model *m;
    sample_eventset *es;
    rapl *power;
    counters_proc *cp;
    counters_delta d;
    double *rates, *zone_delta;
    double idle_w;
    const char *idle_source;
    struct run_totals t;
    pid_t child;
    int status;
    bool waited; /* status holds the command's end */
    struct rusage ru;
    uint64_t start_ns, end_ns, last_ns;
    struct run_stats st;
};

/* Sizes the figure sums for the model's events and the RAPL zones. */
int run_stats_init(struct run_ctx *c);
/* Adds the run that just ended (counters still open) to the sums. */
void run_stats_add(struct run_ctx *c);
/* Prints the report (text, -x or --json) to stderr or --output. */
int run_report(const struct run_ctx *c);

#endif
