/* train: what `wattprof train` and `wattprof select` share — loading a
 * CSV dataset into feature columns and a target, and writing model files. */
#ifndef WATTPROF_CLIENT_TRAIN_H
#define WATTPROF_CLIENT_TRAIN_H

#include "learn/learn.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct train_source {
    const char *path;
    const char *target;
    const char *features;      /* "a,b,c" */
    const char *per;           /* interval column, or NULL */
    const char *extra[2];      /* further columns to load (class, folds), or NULL */
    bool extra_optional[2];    /* a missing optional extra column is left NULL */
    bool extra_loose[2];       /* match the usual spellings of the name too
                                  (train_column_matches) */
    bool drop_invalid;         /* also drops rows the checks below would refuse */
    bool need_positive_target; /* MAPE divides by the target */
};

struct train_data {
    learn_table *t;
    size_t n, p;
    char **features;  /* p names */
    const double **x; /* p columns of n */
    const double *y;
    const double *extra[2]; /* columns named in source.extra, or NULL */
    char *extra_name[2];    /* the header's spelling of each column found */
    size_t dropped;
    char sha256[65];  /* of the file's bytes */
    size_t *constant; /* indices of constant features */
    size_t n_constant;
};

/* Reads the CSV, checks it (no rows, a target <= 0 for MAPE, a zero or
 * negative interval for --per; with drop_invalid such rows are dropped and
 * counted instead) and converts counts to rates with --per.  Errors are one
 * line in err. */
int train_data_load(struct train_data *d, const struct train_source *s, char *err, size_t errlen);
/* Whether header column `have` is a spelling of `want`: the same once both
 * are lower-cased, with '-' and '.' as '_', without a "curr_" prefix or a
 * "_total" suffix, and "misses" as "miss" (cache-misses, cache_miss,
 * curr_cache_misses, CACHE_MISSES_TOTAL). */
bool train_column_matches(const char *want, const char *have);
/* Lists the features that are constant over the rows (kept, but reported). */
int train_find_constants(struct train_data *d);
void train_data_free(struct train_data *d);

/* Fits `ro`'s engine on every row (one model per class) and writes the model
 * file: the wattprof-model/1 format through lib/model for linear engines, a
 * wattprof-forest/1 JSON file for the forest. `domains` ("package,dram") are
 * the RAPL domains the target column measures: the model's "target". A
 * linear model file is loaded back through model_load before success is
 * reported, so a file the daemon would refuse is never reported as good. */
int train_write_model(const char *path, const char *name, const regress_opts *ro,
                      const struct train_source *src, const struct train_data *d, const int *klass,
                      size_t n_classes, const char *class_column, double class_threshold,
                      const char *domains, double cv_mape, char *err, size_t errlen);

/* ---- Options train and select share (train_opts.c) ----------------------
 * Their values; each command numbers its own options from TRAIN_OPT_END. */
enum {
    TRAIN_OPT_TARGET = 256,
    TRAIN_OPT_FEATURES,
    TRAIN_OPT_PER,
    TRAIN_OPT_DROP,
    TRAIN_OPT_DATA,
    TRAIN_OPT_TREES,
    TRAIN_OPT_THREADS,
    TRAIN_OPT_SEED,
    TRAIN_OPT_END
};
/* Their getopt_long entries, to start a command's table with. */
#define TRAIN_LONGOPTS                                                                             \
    {"target", required_argument, NULL, TRAIN_OPT_TARGET},                                         \
        {"features", required_argument, NULL, TRAIN_OPT_FEATURES},                                 \
        {"per", required_argument, NULL, TRAIN_OPT_PER},                                           \
        {"drop-invalid", no_argument, NULL, TRAIN_OPT_DROP},                                       \
        {"data", required_argument, NULL, TRAIN_OPT_DATA},                                         \
        {"trees", required_argument, NULL, TRAIN_OPT_TREES},                                       \
        {"threads", required_argument, NULL, TRAIN_OPT_THREADS},                                   \
    {                                                                                              \
        "seed", required_argument, NULL, TRAIN_OPT_SEED                                            \
    }

/* Takes option c with value v into s if it is one of the dataset's: 1 when
 * taken, 0 when not one of them. */
int train_source_opt(struct train_source *s, int c, const char *v);
/* The same for the forest's --trees, --threads and --seed: 1 when taken, 0
 * when not one of them, a negative errno with err set for a bad value. */
int train_forest_opt(forest_opts *fo, int c, const char *v, char *err, size_t errlen);
/* After the options: exactly one dataset, either --data or the one word left
 * at argv[first..argc); sets s->path to it. */
int train_source_file(struct train_source *s, int argc, char **argv, int first, char *err,
                      size_t errlen);

/* Parses a non-negative integer option value; errors name the option. */
int train_parse_size(const char *opt, const char *s, size_t *out, char *err, size_t errlen);
int train_parse_double(const char *opt, const char *s, double *out, char *err, size_t errlen);

/* ---- The daemon's calibration rows (train_db.c) --------------------------
 * `wattprof train --db PATH --since T` trains on the host-level table of
 * docs/design.md: one row per second, the target is the measured power of the
 * model's target domains, the features are the per-class sums of event
 * rates the daemon stored.  The daemon's model attributes
 * idle + sum_k sum_j c_kj x_kj / range_j to the host, one linear function of
 * all classes' sums, so the trainer fits ONE regression over the columns
 * "CLASS:EVENT" of every class that had activity (just "EVENT" for a
 * one-class model) and splits its coefficients back per class
 * (train_calib.c).  A class with no activity in the data gets the
 * coefficients of the other one. */
struct model;

struct train_calib {
    struct model *ref; /* the model whose events the rows carry (the newest row's) */
    int32_t ref_id;    /* its id in the database */
    char *ref_json;    /* its file, as the database keeps it */
    size_t n_classes, n_events;
    double *rates;                       /* n * n_classes * n_events raw class sums, row-major */
    size_t *col_class, *col_event;       /* per feature column: its class and event */
    int64_t *t;                          /* n Unix seconds */
    double idle_p5;                      /* 5th percentile of the target: the idle an uncalibrated
                                            model gets from the daemon */
    char since[32], first[32], last[32]; /* ISO 8601 UTC */
};

/* Parses --since: a span before now ("7d", "12h", "30m", "90s", "2w") or an
 * ISO 8601 time ("2026-11-30", "2026-11-30T04:00[:00]", with "Z" or
 * "+HH:MM"; without a zone, local time). *out is Unix seconds. */
int train_parse_since(const char *s, int64_t now, int64_t *out, char *err, size_t errlen);

/* Loads calibration rows with t >= since from the database at `path` into
 * d (features and target as above; d->sha256 hashes the table) and cal.
 * `domains` ("package,dram") are summed into the target.  Refuses, with one
 * line naming the database: no rows, rows of models with different events or
 * classes (saying which --since would keep only the newest), a row without
 * one of the domains, a target <= 0. */
int train_db_load(struct train_data *d, struct train_calib *cal, const char *path, int64_t since,
                  const char *domains, char *err, size_t errlen);
void train_calib_free(struct train_calib *cal);

/* ---- Calibrated models from the host-level fit (train_calib.c) ---------- */

/* Fits `ro`'s linear engine on rows[0..n_rows) (all when rows is NULL) of
 * the host-level table and returns the daemon's model: the reference
 * model's events and classes, scaler min 0 and max the largest class sum of
 * each event, per-class coefficients and the common intercept as idle
 * power; training block with rows, cv_mape, created, cpu_model
 * (/proc/cpuinfo), kernel (uname -r) and the dataset hash. */
int train_calib_model(struct model **out, const regress_opts *ro, const struct train_data *d,
                      const struct train_calib *cal, const size_t *rows, size_t n_rows,
                      const char *name, const char *domains, const char *db_path, double cv_mape,
                      char *err, size_t errlen);

/* The host power model `m` predicts for rows[0..n) of the table, as the
 * daemon computes it: idle + sum over classes of max(0, p_k(x_k) - p_k(0)),
 * with idle the model's idle_power_w, or cal->idle_p5 for an uncalibrated
 * model (the daemon measures idle then).  m's events must be among the
 * rows' events (any order) and its classes the rows' (or one class, which
 * takes every class's sum): else -ENOTSUP with err saying why. */
int train_calib_predict(const struct model *m, const struct train_calib *cal, const size_t *rows,
                        size_t n, double *out, char *err, size_t errlen);

/* ---- Installing a model when it is better (train_install.c) ------------- */

struct train_install {
    const char *dir;    /* --install-if-better DIR */
    const char *socket; /* --socket, else $WATTPROF_SOCKET, else the default */
    const char *db_path;
};

/* Scores `fresh` and the current model (DIR/current.json, else the model of
 * the newest calibration row) on the held-out rows test[0..n_test); when
 * `fresh` has the lower MAPE writes it to DIR/current.json (atomic rename;
 * the current one kept as DIR/previous.json) and asks the daemon to reload
 * it (ReloadModels over the socket).  A daemon that cannot be reached is
 * reported, not an error; one that refuses the model is an error, and the
 * previous current.json is put back.  *report (json-c) says what was decided
 * and why; text for people is printed unless `quiet`. */
int train_install_if_better(const struct train_install *in, struct model *fresh,
                            const struct train_data *d, const struct train_calib *cal,
                            const size_t *test, size_t n_test, bool quiet, void **report, char *err,
                            size_t errlen);

#endif
