/* rank_cli: what the pieces of `wattprof rank` share — the variants and
 * their measurements, read from a file (rank_input.c), measured by running
 * commands (rank_measure.c) or drawn as box plots (rank_plot.c). */
#ifndef WATTPROF_RANK_CLI_H
#define WATTPROF_RANK_CLI_H

#include <stdbool.h>
#include <stddef.h>

typedef struct rank_variants {
    size_t p, cap;
    char **names; /* p names, unique */
    double **x;   /* x[v][0..n[v]) measurements */
    size_t *n, *x_cap;
    double *flops; /* p FLOP counts; NAN where unknown */
    int *line;     /* where each variant first appears in its file (0: none) */
    int *col;
} rank_variants;

/* An empty set of variants. */
int rank_variants_init(rank_variants *rv);
void rank_variants_clear(rank_variants *rv);
/* Index of `name`, or -1. */
long rank_variants_find(const rank_variants *rv, const char *name);
/* Appends a variant named `name` (copied) with no measurements; *idx gets
 * its index. -EEXIST when the name is taken. */
int rank_variants_add(rank_variants *rv, const char *name, size_t *idx);
/* Appends one measurement to variant v. */
int rank_variants_push(rank_variants *rv, size_t v, double x);
/* True when every variant has a FLOP count. */
bool rank_variants_have_flops(const rank_variants *rv);

/* Reads FILE: a JSON object {"variant": [values...]} when it starts with
 * '{', else CSV with columns variant,value[,flops]. Every bad value, a
 * duplicate variant and a variant with fewer than 4 measurements is an error
 * naming FILE:LINE:COLUMN. */
int rank_input_read(const char *path, rank_variants *rv, char *err, size_t errlen);

enum rank_metric { RANK_METRIC_TIME, RANK_METRIC_ENERGY, RANK_METRIC_OUTPUT };

/* Runs `cmd` once with /bin/sh -c and measures it: wall time in seconds,
 * energy in joules through `wattprof run --json`, or the number the command
 * prints last on stdout. *source (may be NULL) gets where the number came
 * from: "wall clock", "output", or run's energy_source ("rapl", "model").
 * A command that fails is an error naming it and its exit status. */
int rank_measure_once(const char *cmd, enum rank_metric metric, double *out, char source[16],
                      char *err, size_t errlen);

/* Draws box plots (whiskers at 1.5 IQR, outliers as dots) of the variants in
 * `order`, each coloured by rank[v] (0: unranked, grey), into a .png or .svg
 * file chosen by the extension of `path`. */
int rank_plot_write(const char *path, const rank_variants *rv, const size_t *order, size_t n_order,
                    const int *rank, const char *ylabel, char *err, size_t errlen);

#endif
