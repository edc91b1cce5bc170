/* model: power models and the attribution of energy to processes.
 *
 * A model file (models/README.md) names perf events, min-max scaling per
 * event, one linear model per cache-miss class, and an idle power.  This
 * module loads, validates and saves those files, evaluates the models, and
 * holds the one computation the whole product rests on: given one tick's
 * counter rates per process, the host energy and a model, how many joules
 * each process used.  Everything here is pure computation, testable without
 * hardware. */
#ifndef WATTPROF_MODEL_H
#define WATTPROF_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#define MODEL_FORMAT "wattprof-model/1"
#define MODEL_MAX_CLASSES 2
/* The most power a model may give over its scaler's range (and its idle
 * power): a megawatt is no node's; a model past it is out of scale, and one
 * that overflows would leave ticks it cannot attribute. */
#define MODEL_MAX_POWER_W 1e6

typedef enum model_class_mode {
    MODEL_CLASS_CUMULATIVE, /* cache-misses since the process was first seen */
    MODEL_CLASS_RATE,       /* cache-misses per second in the current interval */
} model_class_mode;

typedef struct model_class {
    char *name;       /* "high-miss", "low-miss", or "all" */
    double intercept; /* watts */
    double *coef;     /* watts per unit of scaled rate, one per event */
} model_class;

typedef struct model_training {
    bool present; /* false for uncalibrated (generic) models */
    long rows;
    double cv_mape;
    char *created, *cpu_model, *kernel, *dataset_sha256;
} model_training;

typedef struct model {
    char *name, *engine, *description;
    char **target; /* RAPL domains the model predicts ("package", "dram") */
    size_t n_target;
    char **events; /* perf event names, libpfm4 syntax */
    size_t n_events;
    double *scale_min, *scale_max; /* per event, in events per second */
    int class_event;               /* index into events, or -1 for one class */
    double class_threshold;
    model_class_mode class_mode;
    model_class classes[MODEL_MAX_CLASSES]; /* [0]: value >= threshold, [1]: below */
    size_t n_classes;
    double idle_power_w;
    model_training training;
    char sha256[65]; /* of the file's bytes as loaded (or as saved) */
} model;

/* Parses and validates a model from `len` bytes; `origin` (a file name)
 * prefixes error messages, which give line:column for JSON syntax errors. */
int model_parse(const char *text, size_t len, const char *origin, model **out, char *err,
                size_t errlen);
int model_load(const char *path, model **out, char *err, size_t errlen);
/* The shipped models/cputime.json, built into the library, and its text. */
int model_load_default(model **out, char *err, size_t errlen);
const char *model_default_text(void);
/* Serialises `m` as pretty JSON (malloc'd) and stores its hash in m->sha256. */
int model_to_json(model *m, char **out);
int model_save(model *m, const char *path, char *err, size_t errlen);
void model_free(model *m);
/* The model's target domains joined by '+' ("package+dram"), cut to len. */
void model_target_key(const model *m, char *out, size_t len);
/* Fresh zeroed model with room for n_events events and n_classes classes. */
model *model_new(size_t n_events, size_t n_classes);

/* Class of a process whose class statistic (cumulative cache-misses or
 * misses per second, as the model's mode says) is `value`. */
static inline int model_classify(const model *m, double value)
{
    if (m->class_event < 0 || m->n_classes < 2)
        return 0;
    return value >= m->class_threshold ? 0 : 1;
}

/* p_k(x) = b_k + sum_j c_kj (x_j - min_j) / (max_j - min_j), in watts, for
 * rates x in events per second (model event order). A zero-width scaling
 * range contributes nothing rather than dividing by zero. */
double model_power(const model *m, int k, const double *rates);
/* max(0, p_k(x) - p_k(0)): the part of the power that grows with activity. */
double model_dynamic_power(const model *m, int k, const double *rates);
/* Each event's part of p_k(x) - p_k(0): out[j] = c_kj x_j / (max_j - min_j),
 * summing to the dynamic power before its clip at zero. */
void model_event_power(const model *m, int k, const double *rates, double *out);
/* max(0, sum_j scale[j] * part[j]) over the parts model_event_power gave:
 * the dynamic power with one calibration coefficient per event
 * (calib_events.c); scale NULL: all 1, which is model_dynamic_power. */
double model_event_power_sum(const model *m, const double *part, const double *scale);
/* model_event_power_sum of the parts of `rates`. */
double model_dynamic_power_scaled(const model *m, int k, const double *rates, const double *scale);

/* ---- Expression models (expr_model.c) ------------------------------------
 * Files with engine "expr": an equation over named features (program
 * parameters), as `wattprof symreg --out` writes them (README, "Model files
 * (engine expr)"). */
typedef struct model_expr model_expr;

/* Loads and parses; errors name the file (and the expression's column). */
int model_expr_load(const char *path, model_expr **out, char *err, size_t errlen);
void model_expr_free(model_expr *m);
const char *const *model_expr_features(const model_expr *m, size_t *n);
const char *model_expr_text(const model_expr *m);
/* Predicts n rows; cols[j] is feature j's column. -EDOM when a result is
 * not finite. */
int model_expr_predict(const model_expr *m, const double *const *cols, size_t n, double *out);

/* ---- Online calibration (calib.c) ----------------------------------------
 * Fits P_measured = idle + s * P_dynamic over the recent seconds of a node
 * (docs/calibration.md): the intercept is the node's idle power even when
 * the node never idles, provided the load varied enough to tell. */
typedef struct calib_config {
    size_t window;          /* rows (seconds) kept; 900 */
    double half_life_s;     /* a row's weight halves with every this many
                               seconds of age; 300 */
    size_t min_rows;        /* rows kept by the outlier test before idle can
                               be identified; 30 */
    double min_spread_w;    /* least weighted standard deviation of the load,
                               in measured watts (s * sd of P_dynamic); 1 */
    double max_idle_se_w;   /* idle is identified when its standard error is */
    double max_idle_se_rel; /* at most max(this W, this share of idle); 0.5, 0.02 */
    double reject_k;        /* rows whose residual exceeds k robust standard
                               deviations (1.4826 x the median absolute
                               residual) are left out; 4 */
} calib_config;

typedef struct calib_fit {
    bool identifiable;        /* idle_w can be used */
    const char *why;          /* when not: the reason, a static string */
    double idle_w, idle_se_w; /* intercept and its standard error, watts */
    double scale, scale_se;   /* measured watts per model watt */
    double r2;                /* weighted, over the rows kept */
    size_t rows, rejected;    /* rows kept, rows left out as outliers */
    double spread_w;          /* s * weighted sd of P_dynamic: the load's spread */
    double dyn_mean_w;        /* weighted mean of P_dynamic, model watts */
} calib_fit;

typedef struct calib calib;

void calib_config_default(calib_config *c);
/* cfg NULL: the defaults. -EINVAL for a bad configuration. */
int calib_new(const calib_config *cfg, calib **out);
void calib_free(calib *c);
/* Forgets every row (a new model predicts another P_dynamic). */
void calib_reset(calib *c);
size_t calib_rows(const calib *c);
/* One second at time t_s (seconds, any origin, non-decreasing): the model's
 * dynamic host power dyn_w (>= 0) and the measured host power host_w (> 0:
 * zero is a stalled meter). -EINVAL, and nothing kept, for a row that is no
 * measurement; the oldest row goes when the window is full. */
int calib_add(calib *c, double t_s, double dyn_w, double host_w);
/* Fits the rows now (linear in the rows; meant for once a second). */
int calib_fit_now(calib *c, calib_fit *out);

/* ---- One coefficient per event (calib_events.c) ---------------------------
 * Fits P_measured = idle + sum_j s_j * P_j, P_j the host's dynamic power
 * through event j, by ridge towards the single scale with the penalty chosen
 * by blocked cross-validation; falls back to the single scale, saying why,
 * where the data cannot tell the events apart (docs/calibration.md). */
#define CALIB_EV_MAX 8 /* columns */

typedef struct calib_ev_config {
    size_t window;           /* rows (seconds) kept; 600 */
    double half_life_s;      /* a row's weight halves every this many seconds; 300 */
    size_t min_rows;         /* rows kept before coefficients are fitted; 60 */
    size_t folds;            /* cross-validation folds (runs of seconds); 5 */
    double min_eig;          /* least smallest eigenvalue of the varying columns'
                                correlation matrix (0: collinear); 0.05 */
    double min_gain;         /* share by which the per-event cross-validated
                                error must beat the single scale's; 0.05 */
    double min_col_spread_w; /* a column varies when s * its sd reaches this; 0.2 */
    double reject_k;         /* outliers: residual over k robust sigmas; 4 */
    double max_idle_se_w;    /* idle is identified by this fit when its standard */
    double max_idle_se_rel;  /* error is at most max(this W, this share); 0.5, 0.02 */
} calib_ev_config;

typedef struct calib_ev_fit {
    bool per_event;  /* coef can be used */
    const char *why; /* when not: the reason, a static string */
    size_t n_cols, rows, rejected;
    double idle_w;             /* intercept: per event when per_event, else single */
    double idle_se_w;          /* its standard error (per_event only), watts */
    bool idle_identified;      /* per_event, and idle_se_w within the config's bound */
    double scale;              /* the single scale on the same rows */
    double coef[CALIB_EV_MAX]; /* measured W per model W of each column (scale
                                  when not per_event or the column is fixed) */
    /* Their standard errors (per_event only; NAN for a fixed column), as
     * optimistic as idle_se_w. */
    double coef_se[CALIB_EV_MAX];
    bool fixed[CALIB_EV_MAX]; /* the column did not vary: keeps the scale */
    double alpha;             /* penalty chosen; INFINITY: the single scale */
    double cv_rmse_w;         /* cross-validated error at alpha */
    double cv_rmse_single_w;  /* ... and with the single scale */
    double min_eig;           /* of the varying columns' correlation matrix */
} calib_ev_fit;

typedef struct calib_ev calib_ev;

void calib_ev_config_default(calib_ev_config *c);
/* n_cols in 1..CALIB_EV_MAX; cfg NULL: the defaults. -EINVAL for bad ones. */
int calib_ev_new(const calib_ev_config *cfg, size_t n_cols, calib_ev **out);
void calib_ev_free(calib_ev *c);
void calib_ev_reset(calib_ev *c);
size_t calib_ev_rows(const calib_ev *c);
size_t calib_ev_cols(const calib_ev *c);
/* One second: n_cols dynamic powers (>= 0) and the measured power (> 0).
 * -EINVAL, and nothing kept, for a row that is no measurement. */
int calib_ev_add(calib_ev *c, double t_s, const double *dyn_w, double host_w);
/* Fits now: O(rows * cols^2) plus small solves; meant for every few seconds. */
int calib_ev_fit_now(calib_ev *c, calib_ev_fit *out);

/* ---- Attribution (attrib.c) ---------------------------------------------- */

/* One tracked process in one tick. */
typedef struct attrib_proc {
    const double *rates; /* events per second, model event order */
    int klass;           /* from model_classify */
    double *event_w;     /* NULL, or room for the model's events: set to each
                            event's part of the dynamic power, unscaled
                            (model_event_power), for a caller that needs
                            them too (the daemon's per-event fit) */
    /* outputs */
    double standalone_j; /* p_k(x) * dt: the paper's real-time model */
    double dynamic_w;    /* d_i */
    double attributed_j; /* share of the measured (or modeled) active energy */
} attrib_proc;

typedef struct attrib_tick {
    double dt_s;                /* tick length in seconds (> 0) */
    bool measured;              /* host_j comes from RAPL */
    double host_j;              /* measured energy of the model's target domains */
    double idle_w;              /* idle power to book (model's, or a measured percentile) */
    double untracked_dynamic_w; /* dynamic power of activity no tracked process
                                   explains (system-wide counters), >= 0 */
    double dynamic_scale;       /* measured watts per model watt (a calibration's
                                   scale) for host_j without a measurement;
                                   0 (unset) is 1 */
    const double *event_scale;  /* NULL, or one calibration coefficient per
                                   model event: processes' dynamic power is
                                   model_dynamic_power_scaled (measured watts;
                                   untracked_dynamic_w must be too) */
    /* outputs */
    double modeled_host_j; /* idle*dt + sum d_i*dt (+ untracked): the model's view */
    double idle_j, active_j, attributed_j, unattributed_j;
} attrib_tick;

/* Splits one tick's host energy: idle = min(idle_w*dt, host), active = host -
 * idle, process i gets active * d_i / D where D = sum d_i + untracked (d_i
 * through event_scale when set: then modeled_host_j still uses the
 * model's own d_i); the
 * rest is unattributed. Without a measurement host_j is set to the modeled
 * host energy, its dynamic part times dynamic_scale (modeled_host_j stays
 * the model's own). Guarantees sum attributed + idle + unattributed = host_j to
 * rounding, with no negative term. Returns -EINVAL on a bad dt or NaN input,
 * -ERANGE for a tick no attribution can hold: over ATTRIB_MAX_TICK_S, a
 * measurement or a model power over MODEL_MAX_POWER_W, or none finite. */
#define ATTRIB_MAX_TICK_S 3600.0
int attrib_tick_compute(const model *m, attrib_tick *t, attrib_proc *procs, size_t n);

#endif
