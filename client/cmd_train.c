/* cmd_train: `wattprof train` — fits linear or forest models to a CSV
 * dataset or to the daemon's calibration rows, reports cross-validated
 * errors per cache-miss class and overall, writes a model file, and
 * installs it for the daemon when it beats the one in use. */
#include "commands.h"
#include "model/model.h"
#include "train.h"
#include "util/util.h"

#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_CLASS_COLUMN "cache-misses"
#define DEFAULT_CLASS_THRESHOLD 2e7

/* A JSON number, or null for NaN (which JSON cannot hold). */
static json_object *jnum(double v)
{
    return isnan(v) ? NULL : json_object_new_double(v);
}

struct train_args {
    struct train_source src;
    regress_opts ro;
    const char *classes; /* "COLUMN:THRESHOLD", "none", or NULL for the default */
    char *class_column;
    double class_threshold;
    size_t cv;
    const char *folds_column;
    double holdout;
    bool compare, json;
    const char *out, *name, *domains;
    char domains_guess[64]; /* --out without --domains: read from the target's name */
    const char *db, *since; /* --db PATH --since T: the daemon's calibration rows */
    int64_t since_t;
    struct train_install inst; /* inst.dir: --install-if-better DIR */
};

/* One engine's cross-validated errors: per class, and over all rows. */
struct engine_result {
    regress_engine engine;
    learn_metrics cls[2], all;
    size_t cls_rows[2], rows;
    double alpha[2];    /* ridge/lasso penalty per class; for --alpha auto the
                           one chosen on all rows, which the model file gets */
    double *fold_alpha; /* --alpha auto: the one each validation round chose,
                           fo->k rows of 2 (the CV errors come from these) */
    double cv_s;        /* seconds of validation */
};

/* Seconds on the monotonic clock. */
static double now_s(void)
{
    return (double)util_now_ns(CLOCK_MONOTONIC) / 1e9;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: wattprof train (FILE.csv | --data FILE.csv) --target COLUMN --features a,b,c\n"
        "                      [OPTIONS]\n"
        "       wattprof train --db PATH [--since T] [--install-if-better DIR] [OPTIONS]\n"
        "\n"
        "  --per COLUMN          divide features by an interval column (counts -> rates)\n"
        "  --drop-invalid        skip rows with empty or non-numeric cells\n"
        "  --engine E            ols, ridge (default), lasso or forest\n"
        "  --alpha A|auto        ridge/lasso penalty (default auto: inner CV over a log grid)\n"
        "  --trees N --max-features F --min-leaf N --threads N   forest settings\n"
        "  --seed S              folds, forest and inner CV randomness (default 0)\n"
        "  --classes COL:THR|none  one model per class (default cache-misses:2e7 if present)\n"
        "  --cv K                shuffled K-fold validation (default 5)\n"
        "  --folds COLUMN        validation folds from a column of fold ids\n"
        "  --holdout-last P      test on the last P %% of the rows\n"
        "  --compare             run all four engines on the same folds\n"
        "  --out MODEL.json      write the model fitted on all rows\n"
        "  --name NAME           model name in the file\n"
        "  --domains LIST        RAPL domains the target measures (package, dram, core,\n"
        "                        uncore, psys); --out without it reads them from the\n"
        "                        target's name (energy_in_pkg_joule: package) or refuses;\n"
        "                        --db's default is package\n"
        "  --json                print the report as JSON\n"
        "  --db PATH             train on the daemon's calibration rows: target the power of\n"
        "                        --domains, features the per-class sums of its model's events\n"
        "  --since T             rows since T: 7d, 12h, 30m, or ISO 8601 (default 7d)\n"
        "  --install-if-better DIR  score the new model and DIR/current.json (else the\n"
        "                        daemon's model) on the --holdout-last part (default 20);\n"
        "                        install the new one only if better, and reload the daemon\n"
        "  --socket PATH         the daemon's socket (default $WATTPROF_SOCKET, else\n"
        "                        /run/wattprof/io.wattprof.sock)\n");
}

static int parse_classes(struct train_args *a, char *err, size_t errlen)
{
    const char *colon;

    if (!a->classes || strcmp(a->classes, "none") == 0) {
        a->class_column = a->classes ? NULL : strdup(DEFAULT_CLASS_COLUMN);
        a->class_threshold = DEFAULT_CLASS_THRESHOLD;
        return a->classes || a->class_column ? 0 : -ENOMEM;
    }
    colon = strrchr(a->classes, ':');
    if (!colon || colon == a->classes || util_parse_double(colon + 1, &a->class_threshold) < 0)
        return util_err(err, errlen, -EINVAL,
                        "--classes '%s': expected COLUMN:THRESHOLD (e.g. cache-misses:2e7) or none",
                        a->classes);
    a->class_column = strndup(a->classes, (size_t)(colon - a->classes));
    return a->class_column ? 0 : -ENOMEM;
}

static int parse_alpha(struct train_args *a, const char *s, char *err, size_t errlen)
{
    if (strcmp(s, "auto") == 0) {
        a->ro.linear.alpha = -1;
        return 0;
    }
    if (util_parse_double(s, &a->ro.linear.alpha) < 0 || a->ro.linear.alpha < 0)
        return util_err(err, errlen, -EINVAL, "--alpha '%s': expected a number >= 0 or auto", s);
    return 0;
}

enum {
    OPT_ENGINE = TRAIN_OPT_END,
    OPT_ALPHA,
    OPT_MAXF,
    OPT_MINLEAF,
    OPT_CLASSES,
    OPT_CV,
    OPT_FOLDS,
    OPT_HOLDOUT,
    OPT_COMPARE,
    OPT_JSON,
    OPT_OUT,
    OPT_NAME,
    OPT_DOMAINS,
    OPT_HELP,
    OPT_DB,
    OPT_SINCE,
    OPT_INSTALL,
    OPT_SOCKET,
};

static const struct option options[] = {
    TRAIN_LONGOPTS,
    {"engine", required_argument, NULL, OPT_ENGINE},
    {"alpha", required_argument, NULL, OPT_ALPHA},
    {"max-features", required_argument, NULL, OPT_MAXF},
    {"min-leaf", required_argument, NULL, OPT_MINLEAF},
    {"classes", required_argument, NULL, OPT_CLASSES},
    {"cv", required_argument, NULL, OPT_CV},
    {"folds", required_argument, NULL, OPT_FOLDS},
    {"holdout-last", required_argument, NULL, OPT_HOLDOUT},
    {"compare", no_argument, NULL, OPT_COMPARE},
    {"json", no_argument, NULL, OPT_JSON},
    {"out", required_argument, NULL, OPT_OUT},
    {"name", required_argument, NULL, OPT_NAME},
    {"domains", required_argument, NULL, OPT_DOMAINS},
    {"help", no_argument, NULL, OPT_HELP},
    {"db", required_argument, NULL, OPT_DB},
    {"since", required_argument, NULL, OPT_SINCE},
    {"install-if-better", required_argument, NULL, OPT_INSTALL},
    {"socket", required_argument, NULL, OPT_SOCKET},
    {NULL, 0, NULL, 0},
};

static int parse_option(struct train_args *a, int c, const char *v, char *err, size_t errlen)
{
    int r;

    if (train_source_opt(&a->src, c, v))
        return 0;
    if ((r = train_forest_opt(&a->ro.forest, c, v, err, errlen)) != 0) {
        if (c == TRAIN_OPT_SEED) /* the folds' and the inner CV's too */
            a->ro.linear.seed = a->ro.forest.seed;
        return r < 0 ? r : 0;
    }
    switch (c) {
    case OPT_ENGINE:
        if (regress_engine_parse(v, &a->ro.engine) < 0)
            return util_err(err, errlen, -EINVAL,
                            "--engine '%s': expected ols, ridge, lasso or forest", v);
        return 0;
    case OPT_ALPHA:
        return parse_alpha(a, v, err, errlen);
    case OPT_MAXF:
        return train_parse_double("--max-features", v, &a->ro.forest.max_features, err, errlen);
    case OPT_MINLEAF:
        return train_parse_size("--min-leaf", v, &a->ro.forest.min_leaf, err, errlen);
    case OPT_CLASSES:
        a->classes = v;
        return 0;
    case OPT_CV:
        return train_parse_size("--cv", v, &a->cv, err, errlen);
    case OPT_FOLDS:
        a->folds_column = v;
        return 0;
    case OPT_HOLDOUT:
        return train_parse_double("--holdout-last", v, &a->holdout, err, errlen);
    case OPT_COMPARE:
        a->compare = true;
        return 0;
    case OPT_JSON:
        a->json = true;
        return 0;
    case OPT_OUT:
        a->out = v;
        return 0;
    case OPT_NAME:
        a->name = v;
        return 0;
    case OPT_DOMAINS:
        a->domains = v;
        return 0;
    case OPT_DB:
        a->db = v;
        return 0;
    case OPT_SINCE:
        a->since = v;
        return 0;
    case OPT_INSTALL:
        a->inst.dir = v;
        return 0;
    case OPT_SOCKET:
        a->inst.socket = v;
        return 0;
    }
    return -EINVAL;
}

/* --db: the table's columns are the daemon's; the options that name CSV
 * columns do not apply. */
static int check_db_args(struct train_args *a, int n_files, const char *file, int n_validation,
                         char *err, size_t errlen)
{
    const char *csv_only = a->src.target     ? "--target"
                           : a->src.features ? "--features"
                           : a->src.per      ? "--per"
                           : a->folds_column ? "--folds"
                           : a->classes      ? "--classes"
                                             : NULL;

    if (!a->db)
        return util_err(err, errlen, -EINVAL, "%s needs --db PATH (the daemon's database)",
                        a->inst.dir ? "--install-if-better"
                        : a->since  ? "--since"
                                    : "--socket");
    if (n_files != 0)
        return util_err(err, errlen, -EINVAL, "--db trains on the database; drop the file '%s'",
                        file);
    if (csv_only)
        return util_err(err, errlen, -EINVAL,
                        "%s does not apply to --db: the target is the power of --domains and "
                        "the features are the daemon's model's events per class",
                        csv_only);
    if (a->inst.dir && n_validation && a->holdout <= 0)
        return util_err(err, errlen, -EINVAL,
                        "--install-if-better scores on recent held-out data: use --holdout-last "
                        "P, not --cv");
    if (a->inst.dir && a->holdout <= 0)
        a->holdout = 20;
    a->src.path = a->db;
    a->src.target = "power";
    if (!a->domains)
        a->domains = "package";
    a->inst.db_path = a->db;
    return train_parse_since(a->since ? a->since : "7d", (int64_t)time(NULL), &a->since_t, err,
                             errlen);
}

/* --out without --domains: the RAPL domains the target column's name
 * spells (words split at anything not a letter or digit: pkg or package,
 * dram, core, uncore, psys), said on stderr; none found is an error. */
static int guess_domains(struct train_args *a, char *err, size_t errlen)
{
    /* word, domain index */
    static const struct {
        const char *word;
        size_t domain;
    } words[] = {{"pkg", 0}, {"package", 0}, {"dram", 1}, {"core", 2}, {"uncore", 3}, {"psys", 4}};
    static const char *const domains[] = {"package", "dram", "core", "uncore", "psys"};
    bool found[5] = {false};
    const char *t = a->src.target;
    size_t len = 0;

    if (a->domains || !a->out || !t)
        return 0;
    a->domains_guess[0] = '\0';
    while (*t) {
        size_t w = 0;
        while (t[w] && ((t[w] >= 'a' && t[w] <= 'z') || (t[w] >= 'A' && t[w] <= 'Z') ||
                        (t[w] >= '0' && t[w] <= '9')))
            w++;
        for (size_t i = 0; w && i < sizeof(words) / sizeof(*words); i++) {
            size_t k = words[i].domain;
            if (strlen(words[i].word) != w || strncasecmp(t, words[i].word, w) != 0 || found[k])
                continue;
            found[k] = true;
            len += (size_t)snprintf(a->domains_guess + len, sizeof(a->domains_guess) - len, "%s%s",
                                    len ? "," : "", domains[k]);
        }
        t += w ? w : 1;
    }
    if (len == 0)
        return util_err(err, errlen, -EINVAL,
                        "--out: which RAPL domains does target '%s' measure? Give --domains "
                        "(package, dram, core, uncore, psys; e.g. --domains package,dram)",
                        a->src.target);
    a->domains = a->domains_guess;
    fprintf(stderr,
            "wattprof train: --out: target '%s' taken to measure RAPL domain%s %s (from its "
            "name; --domains says otherwise)\n",
            a->src.target, strchr(a->domains, ',') ? "s" : "", a->domains);
    return 0;
}

/* Returns 1 after --help, 0 to go on, or a negative errno with err set. */
static int parse_args(struct train_args *a, int argc, char **argv, char *err, size_t errlen)
{
    int c, r, n_validation = 0;

    a->ro.engine = REGRESS_RIDGE;
    a->ro.linear.alpha = -1; /* auto: chosen by inner cross-validation */
    a->cv = 5;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (c == OPT_HELP) {
            usage(stdout);
            return 1;
        }
        if (c == '?')
            return util_err(err, errlen, -EINVAL,
                            "unknown option or missing value '%s' (see wattprof train --help)",
                            argv[optind - 1]);
        r = parse_option(a, c, optarg, err, errlen);
        if (r < 0)
            return r;
        n_validation += c == OPT_CV || c == OPT_FOLDS || c == OPT_HOLDOUT;
    }
    if (n_validation > 1)
        return util_err(err, errlen, -EINVAL,
                        "--cv, --folds and --holdout-last exclude each other");
    if (a->db || a->since || a->inst.dir || a->inst.socket)
        return check_db_args(a, argc - optind + !!a->src.path,
                             a->src.path ? a->src.path : argv[optind], n_validation, err, errlen);
    if ((r = train_source_file(&a->src, argc, argv, optind, err, errlen)) < 0)
        return r;
    a->src.need_positive_target = true;
    r = parse_classes(a, err, errlen);
    if (r == 0)
        r = guess_domains(a, err, errlen);
    a->src.extra[0] = a->class_column;
    a->src.extra_optional[0] = a->src.extra_loose[0] = !a->classes;
    a->src.extra[1] = a->folds_column;
    return r;
}

/* Class 0 (high-miss) when the class column is >= the threshold. */
static int *classify(const struct train_args *a, const struct train_data *d, size_t *n_classes,
                     char *err, size_t errlen)
{
    int *k = calloc(d->n ? d->n : 1, sizeof(int));
    size_t count[2] = {0, 0};

    *n_classes = d->extra[0] ? 2 : 1;
    if (!k || !d->extra[0])
        return k;
    for (size_t i = 0; i < d->n; i++)
        count[k[i] = d->extra[0][i] >= a->class_threshold ? 0 : 1]++;
    if ((count[0] == 0 || count[1] == 0) && !a->classes) {
        /* The default split, not asked for: one class, said. */
        fprintf(stderr,
                "wattprof train: all %zu rows are in the %s class of %s >= %g: one class (see "
                "--classes)\n",
                d->n, count[0] ? "high-miss" : "low-miss", d->extra_name[0], a->class_threshold);
        memset(k, 0, d->n * sizeof(int));
        *n_classes = 1;
        return k;
    }
    if (count[0] == 0 || count[1] == 0) {
        util_err(err, errlen, -EINVAL,
                 "--classes %s:%g: all %zu rows are in the %s class; pick another threshold or "
                 "use --classes none",
                 a->class_column, a->class_threshold, d->n, count[0] ? "high-miss" : "low-miss");
        free(k);
        return NULL;
    }
    return k;
}

static int make_folds(const struct train_args *a, const struct train_data *d, folds **fo, char *err,
                      size_t errlen)
{
    if (a->folds_column)
        return folds_from_column(d->extra[1], d->n, a->folds_column, fo, err, errlen);
    if (a->holdout > 0)
        return folds_holdout_last(d->n, a->holdout, fo, err, errlen);
    return folds_kfold(d->n, a->cv, a->ro.linear.seed, fo, err, errlen);
}

static void score(struct engine_result *res, const struct train_data *d, const int *klass,
                  size_t n_classes, const double *pred)
{
    double *yy = malloc(d->n * sizeof(double)), *pp = malloc(d->n * sizeof(double));

    for (int c = -1; yy && pp && c < (int)n_classes; c++) {
        size_t m = 0;
        for (size_t i = 0; i < d->n; i++)
            if (!isnan(pred[i]) && (c < 0 || klass[i] == c)) {
                yy[m] = d->y[i];
                pp[m++] = pred[i];
            }
        learn_metrics_compute(yy, pp, m, c < 0 ? &res->all : &res->cls[c]);
        *(c < 0 ? &res->rows : &res->cls_rows[c]) = m;
    }
    free(yy);
    free(pp);
}

/* The alpha --alpha auto picks on all rows, per class: the model's. */
static int auto_alpha(const regress_opts *o, const struct train_data *d, const int *klass,
                      size_t n_classes, double *alpha, char *err, size_t errlen)
{
    regress_fit f;
    int r = regress_train(&f, o, d->x, d->y, d->p, klass, n_classes, NULL, d->n, err, errlen);

    if (r < 0)
        return r;
    for (size_t c = 0; c < n_classes; c++)
        alpha[c] = f.lin[c].alpha;
    regress_done(&f);
    return 0;
}

static int run_engine(const struct train_args *a, regress_engine e, const struct train_data *d,
                      const int *klass, size_t n_classes, const folds *fo,
                      struct engine_result *res, char *err, size_t errlen)
{
    regress_opts o = a->ro;
    double *pred = malloc(d->n * sizeof(double)), t0 = now_s();
    bool auto_alpha_used = (e == REGRESS_RIDGE || e == REGRESS_LASSO) && o.linear.alpha < 0;
    char why[UTIL_ERRLEN];
    int r;

    if (auto_alpha_used && !(res->fold_alpha = calloc(fo->k * 2, sizeof(double)))) {
        free(pred);
        return -ENOMEM;
    }
    if (!pred)
        return -ENOMEM;
    o.engine = e;
    res->engine = e;
    r = regress_cv(&o, d->x, d->y, d->n, d->p, klass, n_classes, fo, pred, res->fold_alpha, why,
                   sizeof(why));
    res->cv_s = now_s() - t0;
    if (r < 0)
        util_err(err, errlen, r, "%s: %s", regress_engine_name(e), why);
    else
        score(res, d, klass, n_classes, pred);
    free(pred);
    res->alpha[0] = res->alpha[1] = o.linear.alpha;
    if (r == 0 && auto_alpha_used)
        r = auto_alpha(&o, d, klass, n_classes, res->alpha, err, errlen);
    return r;
}

static const char *class_label(size_t n_classes, size_t c)
{
    return n_classes < 2 ? "all" : c == 0 ? "high-miss" : "low-miss";
}

static json_object *metrics_json(const learn_metrics *m, size_t rows)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "rows", json_object_new_int64((int64_t)rows));
    json_object_object_add(o, "mape", jnum(m->mape));
    json_object_object_add(o, "mae", jnum(m->mae));
    json_object_object_add(o, "rmse", jnum(m->rmse));
    json_object_object_add(o, "r2", jnum(m->r2));
    return o;
}

static json_object *report_json(const struct train_args *a, const struct train_data *d,
                                size_t n_classes, const folds *fo, const struct engine_result *res,
                                size_t n_res)
{
    json_object *o = json_object_new_object(), *ds = json_object_new_object();
    json_object *arr = json_object_new_array(), *con = json_object_new_array();

    json_object_object_add(ds, "path", json_object_new_string(a->src.path));
    json_object_object_add(ds, "rows", json_object_new_int64((int64_t)d->n));
    json_object_object_add(ds, "dropped", json_object_new_int64((int64_t)d->dropped));
    json_object_object_add(ds, "sha256", json_object_new_string(d->sha256));
    json_object_object_add(o, "dataset", ds);
    for (size_t j = 0; j < d->n_constant; j++)
        json_object_array_add(con, json_object_new_string(d->features[d->constant[j]]));
    json_object_object_add(o, "constant_features", con);
    json_object_object_add(o, "folds", json_object_new_int64((int64_t)fo->k));
    json_object_object_add(o, "class_column",
                           n_classes > 1 ? json_object_new_string(a->class_column) : NULL);
    for (size_t e = 0; e < n_res; e++) {
        json_object *r = json_object_new_object(), *cls = json_object_new_object();
        json_object_object_add(r, "engine",
                               json_object_new_string(regress_engine_name(res[e].engine)));
        if (res[e].engine == REGRESS_RIDGE || res[e].engine == REGRESS_LASSO) {
            json_object *al = json_object_new_object();
            for (size_t c = 0; c < n_classes; c++)
                json_object_object_add(al, class_label(n_classes, c), jnum(res[e].alpha[c]));
            json_object_object_add(r, "alpha", al);
        }
        if (res[e].fold_alpha) {
            json_object *fa = json_object_new_object();
            for (size_t c = 0; c < n_classes; c++) {
                json_object *v = json_object_new_array();
                for (size_t k = 0; k < fo->k; k++)
                    json_object_array_add(v, jnum(res[e].fold_alpha[k * 2 + c]));
                json_object_object_add(fa, class_label(n_classes, c), v);
            }
            json_object_object_add(r, "fold_alpha", fa);
        }
        json_object_object_add(r, "validation_s", json_object_new_double(res[e].cv_s));
        for (size_t c = 0; n_classes > 1 && c < n_classes; c++)
            json_object_object_add(cls, class_label(n_classes, c),
                                   metrics_json(&res[e].cls[c], res[e].cls_rows[c]));
        json_object_object_add(cls, "all", metrics_json(&res[e].all, res[e].rows));
        json_object_object_add(r, "classes", cls);
        json_object_array_add(arr, r);
    }
    json_object_object_add(o, "results", arr);
    return o;
}

static void print_row(const char *engine, const char *cls, size_t rows, const learn_metrics *m)
{
    printf("%-7s %-10s %8zu %9.3f %12.5g %12.5g %8.4f\n", engine, cls, rows, m->mape * 100, m->mae,
           m->rmse, m->r2);
}

static void report_text(const struct train_args *a, const struct train_data *d, size_t n_classes,
                        const folds *fo, const struct engine_result *res, size_t n_res)
{
    printf("dataset: %s, %zu rows (%zu dropped), %zu features, target %s\n", a->src.path, d->n,
           d->dropped, d->p, a->src.target);
    if (n_classes > 1)
        printf("classes: %s >= %g is high-miss\n", a->class_column, a->class_threshold);
    if (a->folds_column)
        printf("validation: %zu folds from column %s\n", fo->k, a->folds_column);
    else if (a->holdout > 0)
        printf("validation: last %g %% of the rows held out\n", a->holdout);
    else
        printf("validation: shuffled %zu-fold, seed %lu\n", fo->k, a->ro.linear.seed);
    printf("%-7s %-10s %8s %9s %12s %12s %8s\n", "engine", "class", "rows", "MAPE %", "MAE", "RMSE",
           "R2");
    for (size_t e = 0; e < n_res; e++) {
        const char *name = regress_engine_name(res[e].engine);
        for (size_t c = 0; n_classes > 1 && c < n_classes; c++)
            print_row(name, class_label(n_classes, c), res[e].cls_rows[c], &res[e].cls[c]);
        print_row(name, "all", res[e].rows, &res[e].all);
    }
    for (size_t e = 0; e < n_res; e++)
        for (size_t c = 0; res[e].fold_alpha && c < n_classes; c++) {
            const char *name = regress_engine_name(res[e].engine);
            printf("%s alpha chosen by inner CV on all rows, class %s: %g (the model's); in each "
                   "validation round:",
                   name, class_label(n_classes, c), res[e].alpha[c]);
            for (size_t k = 0; k < fo->k; k++)
                printf(" %g", res[e].fold_alpha[k * 2 + c]);
            printf(" (the errors above)\n");
        }
}

static void warn_constants(const struct train_data *d, const char *path)
{
    for (size_t j = 0; j < d->n_constant; j++)
        fprintf(stderr,
                "wattprof train: %s: feature '%s' is constant; kept, but it scales to 0 and "
                "contributes nothing\n",
                path, d->features[d->constant[j]]);
}

/* The default class column found under another spelling: the header's name
 * is the one used from here on, and said. */
static int use_class_column(struct train_args *a, const struct train_data *d)
{
    char *name;

    if (!d->extra_name[0] || strcmp(d->extra_name[0], a->class_column) == 0)
        return 0;
    if (!(name = strdup(d->extra_name[0])))
        return -ENOMEM;
    fprintf(stderr, "wattprof train: classes from column '%s' (as %s)\n", name, a->class_column);
    free(a->class_column);
    a->class_column = name;
    return 0;
}

/* A model classifies by one of its own events, so before any fitting: the
 * class column of a two-class model file must be a feature. */
static int check_out(const struct train_args *a, const struct train_data *d, size_t n_classes,
                     char *err, size_t errlen)
{
    if (!a->out || n_classes < 2)
        return 0;
    for (size_t j = 0; j < d->p; j++)
        if (strcmp(d->features[j], a->class_column) == 0)
            return 0;
    return util_err(err, errlen, -EINVAL,
                    "--out: the class column '%s' must be one of --features, since a model "
                    "classifies by one of its events",
                    a->class_column);
}

/* --db: the model the daemon will run.  When it is to be installed it is
 * fitted on the rows before the held-out part, so that the file installed is
 * the file that was scored; else on every row. */
static int db_model(const struct train_args *a, const struct train_data *d,
                    const struct train_calib *cal, const folds *fo, double cv_mape, json_object *o,
                    char *err, size_t errlen)
{
    size_t *tr = malloc(d->n * sizeof(size_t)), *te = malloc(d->n * sizeof(size_t));
    size_t n_tr = d->n, n_te = 0;
    model *m = NULL, *back;
    void *inst = NULL;
    int r = tr && te ? 0 : -ENOMEM;

    if (r == 0 && a->inst.dir)
        folds_split(fo, 0, tr, &n_tr, te, &n_te);
    if (r == 0)
        r = train_calib_model(&m, &a->ro, d, cal, a->inst.dir ? tr : NULL, n_tr, a->name,
                              a->domains, a->db, cv_mape, err, errlen);
    if (r == 0 && a->out && (r = model_save(m, a->out, err, errlen)) == 0 &&
        (r = model_load(a->out, &back, err, errlen)) == 0)
        model_free(back);
    if (r == 0 && a->out && !a->json)
        printf("model '%s' written to %s\n", m->name, a->out);
    if (r == 0 && a->inst.dir)
        r = train_install_if_better(&a->inst, m, d, cal, te, n_te, a->json, &inst, err, errlen);
    if (o)
        json_object_object_add(o, "install", inst);
    else
        json_object_put(inst);
    model_free(m);
    free(tr);
    free(te);
    return r;
}

static void db_dataset_json(json_object *o, const struct train_args *a,
                            const struct train_calib *cal)
{
    json_object *ds = json_object_object_get(o, "dataset");

    json_object_object_add(ds, "since", json_object_new_string(cal->since));
    json_object_object_add(ds, "first", json_object_new_string(cal->first));
    json_object_object_add(ds, "last", json_object_new_string(cal->last));
    json_object_object_add(ds, "daemon_model", json_object_new_string(cal->ref->name));
    json_object_object_add(ds, "domains", json_object_new_string(a->domains));
}

static int train(struct train_args *a, char *err, size_t errlen)
{
    struct train_data d;
    struct train_calib cal = {0};
    struct engine_result res[4] = {0};
    size_t n_classes, n_res = a->compare ? 4 : 1;
    folds *fo = NULL;
    json_object *o = NULL;
    int *klass = NULL, r;
    double t0 = now_s(), t_load, t_model = 0;

    r = a->db ? train_db_load(&d, &cal, a->db, a->since_t, a->domains, err, errlen)
              : train_data_load(&d, &a->src, err, errlen);
    if (r < 0)
        return r;
    t_load = now_s() - t0;
    warn_constants(&d, a->src.path);
    r = use_class_column(a, &d);
    klass = r == 0 ? classify(a, &d, &n_classes, err, errlen) : NULL;
    r = r < 0 ? r : klass ? check_out(a, &d, n_classes, err, errlen) : -EINVAL;
    if (r == 0)
        r = make_folds(a, &d, &fo, err, errlen);
    for (size_t e = 0; r == 0 && e < n_res; e++)
        r = run_engine(a, a->compare ? (regress_engine)e : a->ro.engine, &d, klass, n_classes, fo,
                       &res[e], err, errlen);
    if (r == 0 && a->out && !a->db) {
        double t1 = now_s();
        r = train_write_model(a->out, a->name, &a->ro, &a->src, &d, klass, n_classes,
                              a->class_column, a->class_threshold, a->domains,
                              res[a->compare ? a->ro.engine : 0].all.mape, err, errlen);
        t_model = now_s() - t1;
    }
    if (r == 0 && a->json) {
        json_object *tj = json_object_new_object();
        double cv = 0;
        for (size_t e = 0; e < n_res; e++)
            cv += res[e].cv_s;
        o = report_json(a, &d, n_classes, fo, res, n_res);
        json_object_object_add(tj, "load", json_object_new_double(t_load));
        json_object_object_add(tj, "validation", json_object_new_double(cv));
        json_object_object_add(tj, "model", json_object_new_double(t_model));
        json_object_object_add(tj, "total", json_object_new_double(now_s() - t0));
        json_object_object_add(o, "timings_s", tj);
        json_object_object_add(o, "model", a->out ? json_object_new_string(a->out) : NULL);
        if (a->db)
            db_dataset_json(o, a, &cal);
    } else if (r == 0) {
        if (a->db)
            printf("calibration rows: %s to %s (since %s), the daemon running '%s'\n", cal.first,
                   cal.last, cal.since, cal.ref->name);
        report_text(a, &d, n_classes, fo, res, n_res);
        if (a->out && !a->db)
            printf("model written to %s\n", a->out);
    }
    if (r == 0 && a->db && (a->out || a->inst.dir))
        r = db_model(a, &d, &cal, fo, res[a->compare ? a->ro.engine : 0].all.mape, o, err, errlen);
    if (r == 0 && o)
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
    json_object_put(o);
    folds_free(fo);
    for (size_t e = 0; e < n_res; e++)
        free(res[e].fold_alpha);
    free(klass);
    train_data_free(&d);
    train_calib_free(&cal);
    return r;
}

int cmd_train(int argc, char **argv)
{
    struct train_args a = {0};
    char err[UTIL_ERRLEN] = "";
    int r = parse_args(&a, argc, argv, err, sizeof(err)), bad_line = r < 0;

    if (r == 0)
        r = train(&a, err, sizeof(err));
    free(a.class_column);
    if (r < 0) {
        fprintf(stderr, "wattprof train: %s\n", err[0] ? err : strerror(-r));
        return bad_line ? 2 : 1; /* 2: the command line itself is wrong */
    }
    return 0;
}
