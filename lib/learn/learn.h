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

/* The operators of an expression, for engines that build trees (symbolic
 * regression, the GP's mean). Binary: add sub mul div max min; unary: neg
 * square cube sqrt log exp; leaves: const var. */
enum expr_op {
    EXPR_CONST, EXPR_VAR, EXPR_ADD, EXPR_SUB, EXPR_MUL, EXPR_DIV, EXPR_MAX, EXPR_MIN,
    EXPR_NEG, EXPR_SQUARE, EXPR_CUBE, EXPR_SQRT, EXPR_LOG, EXPR_EXP, EXPR_N_OPS
};
/* 0 for leaves, 1 or 2 for operators. */
int expr_op_arity(enum expr_op op);
/* Lowercase name ("add", "square", "const", ...). */
const char *expr_op_name(enum expr_op op);
/* The operator named `name`, or -EINVAL. */
int expr_op_from_name(const char *name);
/* Constructors; NULL when out of memory. expr_new_op takes ownership of `a`
 * and `b` (b is NULL for a unary op) and frees them even when it fails. */
expr *expr_new_const(double c);
expr *expr_new_var(size_t var);
expr *expr_new_op(enum expr_op op, expr *a, expr *b);
/* A new expression after constant folding and the simplifications that
 * expr_print shows (x+0, x*1, x-x, x/x, c1*(c2*x), ...); NULL when out of
 * memory. The value at every point is unchanged where both are finite. */
expr *expr_simplify(const expr *e);
/* Number of variable indices the expression uses: 1 + the largest, 0 when
 * it has no variable. Callers check it against their column count. */
size_t expr_n_vars(const expr *e);
/* Protected value of `op` at scalar arguments (b unused for unary ops). */
double expr_op_apply(enum expr_op op, double a, double b);
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
int gp_new(const gp_config *cfg, const char *const *features, size_t d, gp_model **out,
           char *err, size_t errlen);
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
int gp_predict(const gp_model *m, const double *const *cols, size_t n, double *mean,
               double *var);
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

#endif
