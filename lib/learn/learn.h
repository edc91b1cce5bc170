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

/* ---- Expressions (expr.c) ----------------------------------------------
 * A small infix language shared by symbolic regression and the GP's mean
 * function: numbers, feature names, + - * /, unary minus, and the functions
 * square, cube, sqrt, log, exp, max(a,b), min(a,b). Every numeric literal is
 * a constant that fitting may change. Evaluation is protected: x/0 = 1,
 * log|x| (log 0 = 0), sqrt|x|, exp clamped; a non-finite result makes
 * evaluation report failure instead of spreading NaN. */
typedef struct expr expr;

/* Parses `text`; identifiers must be among vars[0..n_vars). Errors name
 * the column: "expression:1:7: unknown feature 'foo'". */
int expr_parse(const char *text, const char *const *vars, size_t n_vars, expr **out,
               char *err, size_t errlen);
void expr_free(expr *e);
expr *expr_clone(const expr *e);
/* Readable infix text after constant folding and simple simplification
 * (malloc'd). */
char *expr_print(const expr *e, const char *const *vars);
size_t expr_size(const expr *e);  /* number of nodes */
size_t expr_depth(const expr *e); /* a single leaf has depth 0 */
size_t expr_n_consts(const expr *e);
void expr_get_consts(const expr *e, double *c);
void expr_set_consts(expr *e, const double *c);
/* Evaluates at n points: cols[j] is feature j's column. Returns false when
 * any result is not finite. */
bool expr_eval(const expr *e, const double *const *cols, size_t n, double *out);
/* Values and derivatives with respect to the constants:
 * jac[k * n + i] = d e(x_i) / d c_k. */
bool expr_eval_jac(const expr *e, const double *const *cols, size_t n, double *out,
                   double *jac);
/* Fits the constants to y by Levenberg-Marquardt (GSL), at most max_iter
 * iterations; *rss gets the residual sum of squares. */
int expr_fit_consts(expr *e, const double *const *cols, const double *y, size_t n,
                    int max_iter, double *rss);

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
    double alpha;       /* ridge and lasso; for ridge < 0 means "auto" */
    size_t auto_k;      /* inner folds for ridge auto (default 5) */
    unsigned long seed; /* inner fold shuffle for ridge auto */
    int max_iter;       /* lasso sweeps (default 100000) */
    double tol;         /* lasso: stop when the largest coefficient change is below
                           tol * max(1, max |w|) (default 1e-12) */
} linear_opts;

typedef struct linear_model {
    size_t p;
    double intercept;
    double *coef; /* per scaled feature */
    double alpha; /* the alpha used (the chosen one for ridge auto) */
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
/* The log grid ridge auto searches: 10^-6 ... 10^3 in half decades. */
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
 * NaN for rows never held out. */
int regress_cv(const regress_opts *o, const double *const *x, const double *y, size_t n, size_t p,
               const int *klass, size_t n_classes, const folds *fo, double *pred, char *err,
               size_t errlen);

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

#endif
