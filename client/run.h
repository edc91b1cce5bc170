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
    const char *socket;       /* the daemon to take idle from; NULL: the default */
    const char *db;           /* the daemon's database, for a stored calibration */
    const char *meter_cgroup; /* the meter sees only this cgroup's CPU (test rigs) */
    const char *output;       /* report file; stderr (like perf stat) when NULL */
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
    double *zone_j;         /* per RAPL zone */
    double class_stat;      /* cumulative cache-misses, or last rate */
    double untracked_cpu_s; /* host CPU the command did not use */
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
    double scale;            /* measured W per model W, for ticks without a measurement */
    const char *idle_source; /* where idle_w comes from (run_calib.c) */
    char idle_buf[512];      /* idle_source, when composed */
    char idle_note[1024];    /* why the sources before it were not used */
    int task_clock;          /* the model's task-clock event, or -1 */
    double busy_last, busy_carry, *urates;
    struct run_totals t;
    pid_t child;
    int status;
    bool waited; /* status holds the command's end */
    struct rusage ru;
    uint64_t start_ns, end_ns, last_ns;
    struct run_stats st;
};

/* Chooses idle_w and idle_source (run_calib.c): the daemon's, else the
 * stored calibration, else a trained model's. Returns 1 when none applies
 * and idle is to be measured before the command. */
int run_calib_choose(struct run_ctx *c);
/* The host CPU the command does not use, as untracked dynamic power:
 * open (after the events), start (before each run), and each tick's watts. */
int run_host_open(struct run_ctx *c);
void run_host_start(struct run_ctx *c);
double run_host_untracked_w(struct run_ctx *c, double dt);

/* Sizes the figure sums for the model's events and the RAPL zones. */
int run_stats_init(struct run_ctx *c);
/* Adds the run that just ended (counters still open) to the sums. */
void run_stats_add(struct run_ctx *c);
/* Prints the report (text, -x or --json) to stderr or --output. */
int run_report(const struct run_ctx *c);

#endif
