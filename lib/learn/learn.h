/* learn: the offline engines that build and judge models.
 *
 * Everything here works on in-memory tables and is independent of the
 * hardware: datasets read from CSV, regression engines, feature selection,
 * symbolic regression, Gaussian processes and the ranking of program
 * variants.  Functions return 0 or a negative errno; those that read user
 * input also fill `err` (UTIL_ERRLEN bytes) with one line naming the file,
 * line and column at fault. */
#ifndef WATTPROF_LEARN_H
#define WATTPROF_LEARN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "expr/expr.h"

/* ---- Datasets (dataset.c) ------------------------------------------------ */

/* A CSV file read whole: a header of column names, then rows of text cells.
 * Parsing is libcsv's (RFC 4180 quoting). */
typedef struct learn_csv {
    char *path;
    size_t n_cols, n_rows;
    char **header; /* n_cols column names */
    char **cells;  /* n_rows * n_cols, row-major; "" for an empty cell */
    int *line;     /* file line on which each row ends (1-based) */
} learn_csv;

/* Reads `path`. A row with a different number of cells than the header is an
 * error naming its line. Zero data rows is allowed here; engines decide. */
int learn_csv_read(const char *path, learn_csv **out, char *err, size_t errlen);
void learn_csv_free(learn_csv *c);
/* Index of column `name`, or -1. */
int learn_csv_column(const learn_csv *c, const char *name);
static inline const char *learn_csv_cell(const learn_csv *c, size_t row, size_t col)
{
    return c->cells[row * c->n_cols + col];
}

/* A numeric table: chosen columns of a CSV as doubles, stored column-major
 * so that each column is one contiguous vector. */
typedef struct learn_table {
    size_t n_rows, n_cols;
    char **names; /* n_cols */
    double *x;    /* x[j * n_rows + i] is row i of column j */
    int *line;    /* source line of each kept row */
} learn_table;

#define LEARN_DROP_INVALID 1u /* skip rows with empty or non-numeric cells */

/* Picks columns `cols` (n of them) from `c`. An unknown column, or a
 * non-numeric or empty cell (unless LEARN_DROP_INVALID), is an error naming
 * FILE:LINE:COLUMN. *n_dropped (may be NULL) counts rows skipped. */
int learn_table_from_csv(const learn_csv *c, const char *const *cols, size_t n, unsigned flags,
                         learn_table **out, size_t *n_dropped, char *err, size_t errlen);
/* learn_csv_read + learn_table_from_csv. */
int learn_table_read(const char *path, const char *const *cols, size_t n, unsigned flags,
                     learn_table **out, size_t *n_dropped, char *err, size_t errlen);
void learn_table_free(learn_table *t);
static inline double *learn_table_col(const learn_table *t, size_t j)
{
    return t->x + j * t->n_rows;
}

/* ---- Metrics (metrics.c) ------------------------------------------------- */

/* Regression errors of predictions p against truth y (n values). mape is the
 * papers' mean of |y-p|/|y| as a fraction (0.05 = 5 %); NaN when some y is 0. */
typedef struct learn_metrics {
    double mape, mae, rmse, r2;
} learn_metrics;
void learn_metrics_compute(const double *y, const double *p, size_t n, learn_metrics *out);

/* ---- Fitting an expression's constants (expr-fit.c) ---------------------
 * The expression language itself (parsing, printing, evaluation) is
 * lib/expr (expr/expr.h); fitting its constants is the engines' and stays here. */
/* Fits the constants to y by Levenberg-Marquardt (Marquardt's damping on
 * the normal equations), at most max_iter steps, fewer when a step moves no
 * constant by more than 1e-10 of its size; *rss gets the residual sum of
 * squares. */
int expr_fit_consts(expr *e, const double *const *cols, const double *y, size_t n, int max_iter,
                    double *rss);

/* ---- Validation (folds.c) -----------------------------------------------
 * Which rows each validation round tests on. fold[i] is the round in which
 * row i is held out, or -1 for a row that is always trained on (the older
 * rows of a time split). */
typedef struct folds {
    size_t n, k;
    int *fold;
} folds;

/* Shuffled K-fold: rows permuted by a GSL mt19937 seeded with `seed`, then
 * cut into k consecutive folds, the first n % k one row longer. k >= 2 and
 * k <= n, else -EINVAL with a message. */
int folds_kfold(size_t n, size_t k, unsigned long seed, folds **out, char *err, size_t errlen);
/* Folds given by a column of integer ids (any distinct integers; renumbered
 * in increasing order). A non-integer id or a single fold is -EINVAL. */
int folds_from_column(const double *v, size_t n, const char *name, folds **out, char *err,
                      size_t errlen);
/* One round that tests on the last `percent` % of the rows (in file order,
 * which is time order for the daemon's data), at least one row and never all. */
int folds_holdout_last(size_t n, double percent, folds **out, char *err, size_t errlen);
/* Row indices trained on and tested on in round f; train and test must hold
 * n entries each. */
void folds_split(const folds *fo, size_t f, size_t *train, size_t *n_train, size_t *test,
                 size_t *n_test);
void folds_free(folds *fo);

/* ---- Min-max scaling (scaler.c) -----------------------------------------
 * x' = (x - min) / (max - min), fitted on training rows only. A constant
 * feature (max == min) scales to 0 everywhere, so it contributes nothing to
 * a model instead of dividing by zero. */
typedef struct scaler {
    size_t p;
    double *min, *max;
} scaler;

/* Fits on rows[0..n_rows) (all n rows when rows is NULL) of the p columns x. */
int scaler_fit(scaler *s, const double *const *x, size_t p, const size_t *rows, size_t n_rows);
void scaler_done(scaler *s);
static inline double scaler_apply(const scaler *s, size_t j, double v)
{
    double r = s->max[j] - s->min[j];
    return r > 0 ? (v - s->min[j]) / r : 0;
}
static inline bool scaler_is_constant(const scaler *s, size_t j)
{
    return !(s->max[j] > s->min[j]);
}

/* ---- Linear regression (linear.c) ---------------------------------------
 * OLS, ridge and lasso on min-max scaled features with an unpenalised
 * intercept, the conventions of scikit-learn:
 *   OLS    min ||y - Xw - b||^2                  (minimum-norm when collinear)
 *   ridge  min ||y - Xw - b||^2 + alpha ||w||^2
 *   lasso  min 1/(2n) ||y - Xw - b||^2 + alpha ||w||_1   (coordinate descent)
 * All three work from the centred Gram matrix of the scaled training rows,
 * built in one pass over the data without copying it. */
typedef enum linear_kind { LINEAR_OLS, LINEAR_RIDGE, LINEAR_LASSO } linear_kind;

typedef struct linear_opts {
    linear_kind kind;
    double alpha;       /* ridge and lasso; < 0 means "auto": inner CV over
                           linear_alpha_grid */
    size_t auto_k;      /* inner folds for auto (default 5) */
    unsigned long seed; /* inner fold shuffle for auto */
    int max_iter;       /* lasso sweeps (default 100000) */
    double tol;         /* lasso: stop when the largest coefficient change is below
                           tol * max(1, max |w|) (default 1e-12) */
} linear_opts;

typedef struct linear_model {
    size_t p;
    double intercept;
    double *coef; /* per scaled feature */
    double alpha; /* the alpha used (the chosen one for auto) */
    int n_iter;   /* lasso sweeps done */
    bool converged;
} linear_model;

/* Fits on rows[0..n_rows) (all n when NULL) of the p columns x (raw values;
 * `sc` scales them on the fly). OLS with fewer rows than features + 1 is
 * -EDOM with a message suggesting ridge. */
int linear_fit(linear_model *m, const linear_opts *o, const scaler *sc, const double *const *x,
               const double *y, size_t p, const size_t *rows, size_t n_rows, char *err,
               size_t errlen);
/* out[i] = prediction for row rows[i] (row i when rows is NULL). */
void linear_predict(const linear_model *m, const scaler *sc, const double *const *x,
                    const size_t *rows, size_t n_rows, double *out);
void linear_done(linear_model *m);
/* The log grid auto searches: 10^-6 ... 10^3 in half decades. */
size_t linear_alpha_grid(double *out, size_t max);

/* ---- Random forest (forest.c) -------------------------------------------
 * CART regression trees (squared error) on bootstrap samples, a random
 * subset of features tried at each split, a minimum leaf size. Tree t draws
 * its randomness from its own mt19937 seeded from (seed, t), so a forest is
 * the same for a seed whatever the number of threads. */
typedef struct forest_opts {
    size_t n_trees;      /* default 100 */
    double max_features; /* features tried per split: <= 1 a fraction of p,
                            else a count; 0 = all (the default) */
    size_t min_leaf;     /* minimum rows in a leaf (default 1) */
    unsigned long seed;
    size_t threads; /* default 1 */
} forest_opts;

typedef struct forest forest;

/* Fits on rows[0..n_rows) (all when NULL) of the p columns x. */
int forest_fit(forest **out, const forest_opts *o, const double *const *x, const double *y,
               size_t p, const size_t *rows, size_t n_rows);
void forest_predict(const forest *f, const double *const *x, const size_t *rows, size_t n_rows,
                    double *out);
/* Mean decrease in impurity per feature, each tree's normalised to sum 1,
 * averaged over trees (scikit-learn's feature_importances_). p values. */
const double *forest_importance(const forest *f);
/* Permutation importance on the given rows: the mean increase in mean
 * squared error when feature j is shuffled, over `repeats` shuffles seeded
 * by `seed`. out holds p values. */
int forest_permutation_importance(const forest *f, const double *const *x, const double *y,
                                  const size_t *rows, size_t n_rows, size_t repeats,
                                  unsigned long seed, double *out);
size_t forest_n_trees(const forest *f);
size_t forest_n_nodes(const forest *f);
/* The forest as a JSON object (struct json_object *, json-c):
 * {"trees": [{"feature": [...], "threshold": [...], "left": [...],
 *   "right": [...], "value": [...]}, ...]}, feature -1 marking a leaf. */
void *forest_to_json(const forest *f);
void forest_free(forest *f);

/* ---- Regression with classes and cross-validation (regress.c) -----------
 * The trainer's loop: min-max scaling fitted on the training rows, one
 * engine fit per class, predictions for held-out rows. */
typedef enum regress_engine {
    REGRESS_OLS,
    REGRESS_RIDGE,
    REGRESS_LASSO,
    REGRESS_FOREST,
} regress_engine;

typedef struct regress_opts {
    regress_engine engine;
    linear_opts linear; /* kind is set from engine */
    forest_opts forest;
} regress_opts;

typedef struct regress_fit {
    size_t p, n_classes;
    scaler sc;
    linear_model lin[2];
    forest *trees[2];
    size_t rows[2]; /* training rows per class */
} regress_fit;

const char *regress_engine_name(regress_engine e);
int regress_engine_parse(const char *s, regress_engine *out);
/* Fits on `rows` (all when NULL). klass[i] in [0, n_classes) is row i's class
 * (NULL: one class); n_classes <= 2. A class with no training rows is
 * -EINVAL with a message naming it. */
int regress_train(regress_fit *f, const regress_opts *o, const double *const *x, const double *y,
                  size_t p, const int *klass, size_t n_classes, const size_t *rows, size_t n_rows,
                  char *err, size_t errlen);
void regress_predict(const regress_fit *f, const double *const *x, const int *klass,
                     const size_t *rows, size_t n_rows, double *out);
void regress_done(regress_fit *f);
/* Cross-validated predictions: pred[i] for every row some round tests on,
 * NaN for rows never held out. fold_alpha (NULL: not wanted) receives the
 * penalty each round's linear fit used, fo->k rows of 2 (class 0, 1): the
 * one inner CV chose there for --alpha auto. */
int regress_cv(const regress_opts *o, const double *const *x, const double *y, size_t n, size_t p,
               const int *klass, size_t n_classes, const folds *fo, double *pred,
               double *fold_alpha, char *err, size_t errlen);

/* ---- Feature selection (select.c) ---------------------------------------
 * Three views of how much each feature says about the target, and their
 * mean rank (1 = best):
 *   spearman  |rho| of the feature with the target (average ranks for ties)
 *   pca       sum over principal components of the standardised features of
 *             (explained variance share) * |loading|
 *   forest    the forest's impurity importance */
typedef struct select_result {
    size_t p;
    double *spearman, *pca, *forest;
    double *rank_spearman, *rank_pca, *rank_forest, *mean_rank;
    size_t *order; /* features by mean rank, best first */
} select_result;

int select_rank(select_result *r, const double *const *x, const double *y, size_t n, size_t p,
                const forest_opts *fo);
void select_done(select_result *r);
/* Spearman's rho of a and b (n values); NaN when either is constant. */
double select_spearman(const double *a, const double *b, size_t n);
/* ---- Ranking (rank.c) ----------------------------------------------------
 * Ranks program variants by repeated measurements of a cost (time, energy;
 * lower is better) into performance classes, by the three-way comparison of
 * docs/design.md "The engines": drop outliers, compare quantiles, bubble-sort an
 * initial hypothesis h0 merging the ranks of equivalent neighbours, average
 * the ranks over several quantile ranges, and measure more until those mean
 * ranks settle. Variants are numbered 0..p-1 throughout. */

/* A quantile range in percent, 0 < lower < upper < 100: (75, 25) compares
 * one variant's 75th percentile with the other's 25th. */
typedef struct rank_range {
    double upper, lower;
} rank_range;

#define RANK_N_DEFAULT_RANGES 8
/* (95,5) (90,10) (85,15) (80,20) (75,25) (70,30) (65,35) (55,45). */
extern const rank_range rank_default_ranges[RANK_N_DEFAULT_RANGES];
/* The range whose ranks are reported as "the" rank. */
extern const rank_range rank_report_range;

/* Parses "95:5,90:10,..." into a malloc'd array (free()). Each pair must lie
 * in (0,100) with upper > lower, and the pairs, in any order, must be
 * strictly nested (no two share a bound). Errors name the item. */
int rank_parse_ranges(const char *text, rank_range **out, size_t *n, char *err, size_t errlen);
/* The same checks on ranges already in memory. */
int rank_check_ranges(const rank_range *r, size_t n, char *err, size_t errlen);

/* Linear-interpolation quantile (numpy's default, h = (n-1)q) of n >= 1
 * ascending values; q in [0,1]. */
double rank_quantile(const double *sorted, size_t n, double q);

/* One variant's measurements made ready for comparison. */
typedef struct rank_sample {
    double *v;     /* the values inside the fences, ascending */
    size_t n;      /* how many of them */
    size_t n_all;  /* measurements before outlier removal */
    double q1, q3; /* quartiles of all measurements */
    double lo, hi; /* fences q1 - 1.5 IQR and q3 + 1.5 IQR; values strictly
                      outside them are outliers */
} rank_sample;

/* Fills s from x[0..n), n >= 1 (-EINVAL otherwise). x is not kept. */
int rank_sample_init(rank_sample *s, const double *x, size_t n);
void rank_sample_clear(rank_sample *s);

/* The three-way comparison in range r: -1 when a is faster (upper quantile
 * of a below lower quantile of b), +1 when b is faster, 0 when equivalent. */
int rank_compare(const rank_sample *a, const rank_sample *b, const rank_range *r);

/* A comparison of variants a and b in range r, with the meaning of
 * rank_compare. Injectable so that tests can dictate outcomes. */
typedef int (*rank_cmp_fn)(size_t a, size_t b, const rank_range *r, void *ctx);
/* rank_compare over an array of p rank_sample passed as ctx. */
int rank_cmp_samples(size_t a, size_t b, const rank_range *r, void *ctx);

/* The paper's bubble sort of h0 (a permutation of 0..p-1) in range r:
 * passes i = 0..p-1 compare positions j, j+1 for j < p-1-i and swap when the
 * later variant is faster. order[] gets the sorted variants; rank[v] the
 * rank of variant v: 1 for the first, and along the order the previous rank
 * when the two neighbours are equivalent, else the previous rank + 1.
 * -EINVAL when h0 is not a permutation. */
int rank_sort(size_t p, const size_t *h0, const rank_range *r, rank_cmp_fn cmp, void *ctx,
              size_t *order, int *rank);

/* rank_sort afresh from h0 in each of the n_ranges ranges; mean[v] is the
 * average rank of v. ranks (may be NULL) gets ranks[k * p + v], the rank of v
 * in range k. */
int rank_mean(size_t p, const size_t *h0, const rank_range *ranges, size_t n_ranges,
              rank_cmp_fn cmp, void *ctx, int *ranks, double *mean);

/* h0 from a key per variant (min time, median, FLOPs...): ascending, ties in
 * index order. */
int rank_h0_by_key(size_t p, const double *key, size_t *h0);

/* The convergence criterion ||dy - dx||_2 / (p-1), where dx and dy are the
 * differences between adjacent entries of prev and cur (mean ranks of two
 * successive rounds), each sorted ascending. 0 when p < 2; NaN when out of
 * memory. */
double rank_convergence(const double *prev, const double *cur, size_t p);

/* Supplies m more measurements of every variant in round `round` (1-based):
 * out[v * m + k]. Returns 0 or a negative errno, which stops the loop. */
typedef int (*rank_more_fn)(size_t round, size_t m, double *out, void *ctx);

typedef struct rank_loop {
    size_t p;
    const size_t *h0;
    const rank_range *ranges;
    size_t n_ranges;
    size_t m;   /* measurements per variant per round, >= 1 */
    size_t max; /* stop after this many per variant, >= 4 */
    double eps; /* converged when the criterion drops below it */
    rank_more_fn more;
    void *ctx;
    /* Called after each round that ranked (may be NULL); change is NaN
     * until two rounds have ranked. */
    void (*progress)(size_t round, size_t n, double change, void *ctx);
} rank_loop;

typedef struct rank_outcome {
    size_t p, n_ranges;
    size_t n;       /* measurements per variant */
    double **x;     /* x[v][0..n): every measurement, in the order taken */
    double *mean;   /* p mean ranks of the last round */
    int *ranks;     /* n_ranges * p ranks of the last round */
    size_t rounds;  /* rounds measured */
    double change;  /* last value of the criterion (NaN if never computed) */
    bool converged; /* change < eps before max */
} rank_outcome;

/* Measures round after round until the mean ranks converge or max is
 * reached; needs at least 4 measurements per variant before it ranks. */
int rank_converge(const rank_loop *l, rank_outcome *out);
void rank_outcome_clear(rank_outcome *o);

/* Relative excess rel[i] = (v[i] - min)/min: RF from FLOPs, RT from times.
 * NaN where min is 0 (and v[i] is not). */
void rank_relative(size_t p, const double *v, double *rel);

#define RANK_ANOMALY_OUTSIDER                                                                      \
    1u                        /* a variant outside the min-FLOP set ranks                          \
                                 better than every variant in it */
#define RANK_ANOMALY_SPLIT 2u /* the min-FLOP variants do not share a rank */

typedef struct rank_anomaly {
    unsigned flags;   /* 0: FLOPs picked the best variants */
    size_t n_min;     /* variants with the minimum FLOP count */
    size_t best_min;  /* best-ranked min-FLOP variant (first in index order) */
    size_t worst_min; /* worst-ranked min-FLOP variant */
    size_t outsider;  /* with OUTSIDER: the best variant outside the set */
} rank_anomaly;

/* The FLOPs-anomaly test on each variant's FLOP count and rank (mean ranks,
 * or any ranks where lower is better). -EINVAL when p is 0. */
int rank_anomaly_test(size_t p, const double *flops, const double *rank, rank_anomaly *out);
/* ---- Gaussian process (gp.c, gp_fit.c, gp_kernel.c, gp_mean.c, gp_json.c) --
 * Regression with a Gaussian-process prior around a mean function m(x):
 * y ~ GP(m, k). The kernel k is a sum of products of base kernels (rbf,
 * matern12, matern32, matern52, linear, const, white; see gp_config). Its
 * hyperparameters are kept as natural logarithms within bounds (default
 * 1e-5..1e5, as scikit-learn) and maximise the log marginal likelihood with
 * its analytic gradient (GSL multimin BFGS, random restarts from a seed).
 * The mean is zero, a constant, or an expression over the features (see
 * "Expressions") whose constants may be fitted together with the kernel.
 * Inputs may be standardised; the scaling is stored with the model and the
 * mean expression always sees the features in their own units. */
typedef struct gp_model gp_model;

typedef struct gp_config {
    /* Terms joined by '+', factors by '*': "matern32+white", "const*rbf".
     * rbf and matern* are variance * f(distance / length scale); linear is
     * bias + variance * x.x'; const is a value; white adds noise to the
     * diagonal of the training covariance (and to predictive variances). */
    const char *kernel;
    bool ard;         /* one length scale per feature */
    bool standardize; /* scale each feature to mean 0, sd 1 before the kernel */
    /* NULL or "zero", "const" (fitted), or an expression over the features. */
    const char *mean;
    bool fit_mean; /* fit the expression's constants jointly with the kernel */
} gp_config;

/* A model over d features named `features`. Errors: unknown kernel
 * ("kernel:1:COL: unknown kernel 'x'"), a bad mean expression (its own
 * "expression:1:COL: ..." line). */
int gp_new(const gp_config *cfg, const char *const *features, size_t d, gp_model **out, char *err,
           size_t errlen);
void gp_free(gp_model *m);
/* Same configuration and hyperparameters, no data. */
gp_model *gp_clone(const gp_model *m);

/* Hyperparameters: the kernel's (log values) then the mean's constants. */
size_t gp_n_params(const gp_model *m);
void gp_get_params(const gp_model *m, double *theta);
void gp_set_params(gp_model *m, const double *theta);
/* Name of parameter i ("matern32.length_scale[x]", "mean.c0") into buf. */
void gp_param_name(const gp_model *m, size_t i, char *buf, size_t len);
/* Whether parameter i is a log value; its bounds (log space; +-HUGE_VAL for
 * the mean's constants). */
bool gp_param_is_log(const gp_model *m, size_t i);
void gp_param_bounds(const gp_model *m, size_t i, double *lo, double *hi);
void gp_set_param_bounds(gp_model *m, size_t i, double lo, double hi);

/* Training data: cols[j] is feature j's column of n values. */
typedef struct gp_data {
    const double *const *cols;
    const double *y;
    size_t n;
} gp_data;

/* Log marginal likelihood of `data` at the current hyperparameters and, if
 * grad is not NULL, its gradient (gp_n_params values) with respect to them.
 * Uses the stored scaling (identity until gp_fit or gp_set_scaling). */
int gp_lml(const gp_model *m, const gp_data *data, double *lml, double *grad);

/* Stores the scaling of data's features (a no-op unless cfg.standardize). */
int gp_set_scaling(gp_model *m, const gp_data *data);

/* Conditions the model on data at the current hyperparameters: factorises
 * K, keeping what prediction and leave-one-out need. When K is numerically
 * singular (duplicated rows without noise), jitter is added to its diagonal
 * until it is not; gp_jitter says how much. n < 3 is -EINVAL. */
int gp_condition(gp_model *m, const gp_data *data, char *err, size_t errlen);

typedef struct gp_fit_options {
    int restarts;  /* random starts after the first (from the current values) */
    uint64_t seed; /* of the mt19937 drawing them */
    int max_iter;  /* BFGS iterations per start; 0 = 500 */
} gp_fit_options;

/* Sets the scaling, maximises the log marginal likelihood over the
 * hyperparameters and conditions on data. */
int gp_fit(gp_model *m, const gp_data *data, const gp_fit_options *o, char *err, size_t errlen);

/* Of the conditioned model: log marginal likelihood, jitter added (0 when
 * none), number of training points. */
double gp_log_marginal_likelihood(const gp_model *m);
double gp_jitter(const gp_model *m);
size_t gp_n_train(const gp_model *m);

/* Predictive mean and variance (y's, white noise included) at n points
 * (cols as in gp_data); var may be NULL. */
int gp_predict(const gp_model *m, const double *const *cols, size_t n, double *mean, double *var);
/* The mean function alone at n points. */
int gp_mean_eval(const gp_model *m, const double *const *cols, size_t n, double *out);

/* Leave-one-out predictions of the conditioned model's training points with
 * hyperparameters fixed, in closed form (Rasmussen & Williams 5.12):
 * mean_i = y_i - [K^-1 r]_i / [K^-1]_ii, var_i = 1 / [K^-1]_ii. */
int gp_loo_closed(const gp_model *m, double *mean, double *var);
/* Leave-one-out by refitting a clone of m (its current hyperparameters as
 * the first start) on each n - 1 points, as the paper did. */
int gp_loo_refit(const gp_model *m, const gp_data *data, const gp_fit_options *o, double *mean,
                 double *var, char *err, size_t errlen);
/* Leave-one-out predictions of the mean function alone: m(x_i) for a fixed
 * mean, refitted (least squares) without point i for a fitted one. */
int gp_mean_loo(const gp_model *m, const gp_data *data, double *out);

/* The conditioned model as JSON ("wattprof-gp/1": kernel, scaling,
 * hyperparameters, mean, training points and weights); malloc'd text. */
char *gp_to_json(const gp_model *m);
/* A model from a "wattprof-gp/1" document (gp_to_json's, as `wattprof gp
 * --out` writes it), conditioned as the written one was, so that it
 * predicts the same. origin names the document in errors ("M.json: ...");
 * -EINVAL for a document that is not such a model. */
int gp_from_json(const char *text, const char *origin, gp_model **out, char *err, size_t errlen);
/* The model's feature names, in column order; *d gets their count. */
const char *const *gp_features(const gp_model *m, size_t *d);

/* As expr_fit_consts, minimising sum of (w_i * (e(x_i) - y_i))^2; w NULL
 * means all ones. *rss gets the weighted sum. The constants are left as they
 * were when fitting does not lower the sum, or when n is below their count. */
int expr_fit_consts_weighted(expr *e, const double *const *cols, const double *y, const double *w,
                             size_t n, int max_iter, double *rss);
/* As expr_fit_consts_weighted, with the looser stops symbolic regression's
 * search can afford (its selection cannot tell the difference): done once
 * the sum is at most `goal`, or lowered by less than 1e-6 of it, or a step
 * is rejected six times in a row. The reported equation is refitted with
 * the full tolerances. */
int expr_fit_consts_search(expr *e, const double *const *cols, const double *y, const double *w,
                           size_t n, int max_iter, double goal, double *rss);

/* ---- Symbolic regression (symreg.c, symreg-ops.c) -----------------------
 * Genetic programming over expr trees with the paper's loop: ramped
 * half-and-half initialisation; each generation pairs the parents, applies
 * one-point crossover (never at the root) to each pair with probability
 * `crossover`, mutates each child with probability `mutation` by one of five
 * operators chosen uniformly (uniform subtree, node replacement, insert,
 * shrink, constant perturbation), fits the constants of every new individual
 * by Levenberg-Marquardt, and keeps `population` of parents + children by
 * double tournament (with `migration`, the equations of the error-size
 * front then replace parents drawn at random; with `restarts`, fresh
 * populations take over part of the budget). All random choices are made in the calling thread
 * from one mt19937 stream, so a seed gives the same result with any thread count. */

enum symreg_fitness { SYMREG_MAPE, SYMREG_MSE, SYMREG_RMSE };

/* How parents are kept: the paper's double tournament (fitness, then size
 * with tournament_parsimony), or a Pareto tournament: of tournament_fitness
 * candidates, one of those no other beats on both error and size. */
enum symreg_selection { SYMREG_SEL_DOUBLE, SYMREG_SEL_PARETO };

/* The error below which selection sees only size, the smaller winning a
 * tie: the round-off floor (symreg_error_floor), or the training error of
 * the equation the bic rule would report from the front found so far,
 * updated each generation. */
enum symreg_tie { SYMREG_TIE_EXACT, SYMREG_TIE_BIC };

typedef struct symreg_params {
    uint32_t ops;                          /* bit (1u << op) for each enum expr_op allowed */
    bool constants;                        /* random constants among the terminals */
    size_t population;                     /* 300 */
    size_t generations;                    /* 150 */
    double crossover, mutation;            /* probabilities: 1.0, 0.5 */
    enum symreg_selection selection;       /* see symreg_params_default */
    enum symreg_tie tie;                   /* SYMREG_TIE_BIC (pandora: SYMREG_TIE_EXACT) */
    size_t tournament_fitness;             /* tournament size: 3 */
    double tournament_parsimony;           /* in [1,2]: the smaller wins with p/2: 1.1 */
    size_t max_depth, max_size;            /* bloat limits: 17, 60 */
    size_t init_min_depth, init_max_depth; /* ramped half-and-half: 1, 3 */
    bool simplify;                         /* simplify every new individual before fitting it */
    bool migration;    /* each generation the archive's front replaces parents drawn at random:
                          true (pandora: false) */
    bool scaling;      /* linear scaling: an individual becomes a + b * itself, a and b fitted in
                          closed form, when that lowers its error by a tenth or more: false */
    size_t restarts;   /* fresh populations after the first, each run as long as all before
                          it, sharing only the reported front: 2 (pandora: 0) */
    size_t stall;      /* stop after this many generations without progress; 0 = never */
    double time_limit; /* stop after the generation that passes this many seconds; 0 = never */
    enum symreg_fitness fitness; /* SYMREG_MAPE */
    bool lm;                     /* fit constants by Levenberg-Marquardt: true */
    int lm_iterations;           /* 20 */
    bool cache;    /* a child shaped as an equation fitted before takes its constants: true */
    uint64_t seed; /* 1 */
    int threads;   /* evaluation threads: 1 */
} symreg_params;

/* The defaults (above); ops = add, sub, mul, div. */
void symreg_params_default(symreg_params *p);
/* The evolution settings of the named preset ("default", or "pandora": the
 * paper's, double tournament without simplification); -EINVAL if unknown.
 * Leaves ops, constants, fitness, lm, lm_iterations, cache, seed and
 * threads alone. */
int symreg_params_preset(symreg_params *p, const char *name);
/* Checks ranges; fills err naming the parameter at fault. */
int symreg_params_check(const symreg_params *p, char *err, size_t errlen);
/* The fitness name ("mape", "mse", "rmse") and back (-EINVAL if unknown). */
const char *symreg_fitness_name(enum symreg_fitness f);
int symreg_fitness_from_name(const char *name);
/* Error of predictions p against y under fitness f; INFINITY when not finite. */
double symreg_error(enum symreg_fitness f, const double *y, const double *p, size_t n);

/* Called in the calling thread after each generation. */
typedef struct symreg_progress {
    size_t generation;
    double best_error;
    uint64_t evaluations;
    double seconds;
} symreg_progress;
typedef void (*symreg_progress_fn)(const symreg_progress *pr, void *ctx);

typedef struct symreg_front_item {
    expr *e;
    double error; /* training error under params.fitness */
    size_t size;
    double score;    /* -d log(error) / d size from the previous item (PySR's); 0 for the first */
    double cv_error; /* cross-validated MSE (relative under mape): set by symreg_choose's
                        cv rule, else NaN */
} symreg_front_item;

enum symreg_stop { SYMREG_STOP_GENERATIONS, SYMREG_STOP_STALL, SYMREG_STOP_TIME };

typedef struct symreg_result {
    expr *best;               /* lowest training error seen (ties: smaller) */
    double train_error;       /* its error under params.fitness */
    size_t generations;       /* generations run (stall or time can stop early) */
    enum symreg_stop stop;    /* what ended the run */
    uint64_t evaluations;     /* individuals evaluated, initial population included */
    uint64_t cached;          /* of which scored from the cache, without fitting */
    double seconds;           /* wall time */
    double floor;             /* errors at or below this count as exact (symreg_error_floor) */
    symreg_front_item *front; /* Pareto front of error against size over every
                                 individual evaluated, by size ascending */
    size_t n_front;
} symreg_result;

/* The error below which a fit counts as exact: round-off, relative to the
 * scale of y (1e-10 of it; its square under mse). */
double symreg_error_floor(enum symreg_fitness f, const double *y, size_t n);
/* "generations", "stall", "time". */
const char *symreg_stop_name(enum symreg_stop s);

/* Evolves an expression for y (n rows) from features x[0..n_features), each
 * a column of n values. progress may be NULL. */
int symreg_run(const symreg_params *p, const double *const *x, size_t n_features, const double *y,
               size_t n, symreg_progress_fn progress, void *ctx, symreg_result **out, char *err,
               size_t errlen);
void symreg_result_free(symreg_result *r);

/* ---- Choosing and polishing the reported equation (symreg-choose.c) ------
 * The run's front holds equations of every size; the reported one is picked
 * from it by a rule:
 *   bic       the lowest n ln(MSE) + size ln(n): every node counted as a
 *             parameter (the Bayesian information criterion, a minimum
 *             description length); errors below the round-off floor count as
 *             the floor, so among exact fits the smallest wins. The default.
 *   cv        when the most accurate equation fits exactly, the smallest
 *             that does; otherwise the one-standard-error rule on 5-fold
 *             cross-validation (each equation's constants refitted without
 *             each fold, from their fitted values): the smallest equation
 *             whose cross-validated mean squared error is within one
 *             standard error of the lowest;
 *   score     PySR's: the highest score among those with at most 1.5 times
 *             the lowest (squared) error;
 *   accurate  the lowest error, whatever its size (the paper's). */
enum symreg_rule { SYMREG_RULE_BIC, SYMREG_RULE_CV, SYMREG_RULE_SCORE, SYMREG_RULE_ACCURATE };
const char *symreg_rule_name(enum symreg_rule r);
int symreg_rule_from_name(const char *name);

typedef struct symreg_choice {
    size_t index;  /* into the front */
    double limit;  /* the largest error the rule accepted */
    char why[320]; /* one sentence saying why */
} symreg_choice;

/* Picks from res->front, with the training data the run had (x: n_features
 * columns of n rows); the cv rule fills each item's cv_error. -EINVAL
 * on an empty front. */
int symreg_choose(symreg_result *res, enum symreg_fitness f, enum symreg_rule rule,
                  const double *const *x, size_t n_features, const double *y, size_t n,
                  symreg_choice *out);

/* A fitted constant of a polished equation, in print order. */
typedef struct symreg_const {
    double fitted; /* as Levenberg-Marquardt left it */
    double value;  /* rounded to what the data can tell apart */
    double se;     /* standard error from the Jacobian; NaN when not identifiable */
} symreg_const;

/* Simplifies e, refits its constants (weighted 1/|y| under mape), estimates
 * each constant's standard error from J'J at the optimum, and rounds each to
 * the fewest significant digits that stay within a fraction of its standard
 * error, as long as the training error stays within the rounding allowance.
 * *out gets the new equation, *consts (malloc'd, *n_consts of them) its
 * constants. */
int symreg_polish(const expr *e, enum symreg_fitness f, const double *const *x, const double *y,
                  size_t n, expr **out, symreg_const **consts, size_t *n_consts);

#endif
