/* train: what `wattprof train` and `wattprof select` share — loading a
 * CSV dataset into feature columns and a target, and writing model files. */
#ifndef WATTPROF_CLIENT_TRAIN_H
#define WATTPROF_CLIENT_TRAIN_H

#include "learn/learn.h"

#include <stdbool.h>
#include <stddef.h>

struct train_source {
    const char *path;
    const char *target;
    const char *features;   /* "a,b,c" */
    const char *per;        /* interval column, or NULL */
    const char *extra[2];   /* further columns to load (class, folds), or NULL */
    bool extra_optional[2]; /* a missing optional extra column is left NULL */
    bool drop_invalid;
    bool need_positive_target; /* MAPE divides by the target */
};

struct train_data {
    learn_table *t;
    size_t n, p;
    char **features;  /* p names */
    const double **x; /* p columns of n */
    const double *y;
    const double *extra[2]; /* columns named in source.extra, or NULL */
    size_t dropped;
    char sha256[65];  /* of the file's bytes */
    size_t *constant; /* indices of constant features */
    size_t n_constant;
};

/* Reads the CSV, checks it (no rows, a target <= 0 for MAPE, a zero or
 * negative interval for --per) and converts counts to rates with --per.
 * Errors are one line in err. */
int train_data_load(struct train_data *d, const struct train_source *s, char *err, size_t errlen);
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

/* Parses a non-negative integer option value; errors name the option. */
int train_parse_size(const char *opt, const char *s, size_t *out, char *err, size_t errlen);
int train_parse_double(const char *opt, const char *s, double *out, char *err, size_t errlen);

#endif
