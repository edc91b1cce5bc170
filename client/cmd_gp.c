/* cmd_gp: `wattprof gp`, Gaussian-process regression from a CSV file, with
 * an optional analytic mean expression. Prints the hyperparameters, the
 * log marginal likelihood and the leave-one-out errors of the GP and of its
 * mean function alone; optionally predicts another file and writes the
 * model as JSON, which --model reads back to predict again. */
#include "commands.h"
#include "learn/learn.h"
#include "util/util.h"

#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_JITTER 3 /* fitted, but K needed jitter (see --allow-jitter) */

struct gp_args {
    const char *data, *target, *features, *kernel, *mean, *loocv, *predict, *out, *model;
    bool ard, fit_mean, json, standardize, allow_jitter, optimize;
    long restarts, seed;
};

struct gp_run {
    char **feat;
    size_t d;
    learn_table *t;
    gp_data data;
    const double **cols;
    gp_model *m;
    double *loo, *loo_var, *mean_loo;
    learn_metrics gp_err, mean_err;
    learn_table *pt; /* --predict rows */
    double *pmean, *pvar;
    char *model_target; /* --model: the target the file names, or NULL */
    bool has_truth;     /* --predict FILE has the target column (pt's last) */
    learn_metrics test_err;
    bool mape_off; /* the target crosses zero: no MAPE */
    bool y_seen;   /* ymin and ymax hold the range of the targets seen */
    double ymin, ymax;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: wattprof gp (--data F | F) --target y --features a,b,... [--kernel K] [--ard]\n"
            "                   [--mean EXPR|const] [--fit-mean] [--restarts N] [--seed S]\n"
            "                   [--loocv closed|refit|none] [--predict FILE] [--out MODEL.json]\n"
            "                   [--no-standardize] [--no-optimize] [--allow-jitter] [--json]\n"
            "       wattprof gp --model MODEL.json --predict FILE [--json]\n\n"
            "Gaussian-process regression of y on the features. K is a sum of products of\n"
            "rbf, matern12, matern32, matern52, linear, const and white (default\n"
            "matern32+white); --ard gives each feature its own length scale. EXPR is an\n"
            "analytic model over the features (+ - * / square cube sqrt log exp sin cos max min)\n"
            "used as the mean; --fit-mean fits its constants with the kernel.\n"
            "--no-optimize keeps every kernel hyperparameter at 1 (and the mean as written).\n"
            "Exit status 3 means K was singular (e.g. duplicated rows) and was fitted with\n"
            "jitter.\n"
            "--model predicts FILE with a model written by --out, without refitting.\n");
}

static int parse_args(int argc, char **argv, struct gp_args *a)
{
    static const struct option opts[] = {{"data", required_argument, NULL, 'd'},
                                         {"target", required_argument, NULL, 't'},
                                         {"features", required_argument, NULL, 'f'},
                                         {"kernel", required_argument, NULL, 'k'},
                                         {"ard", no_argument, NULL, 'a'},
                                         {"mean", required_argument, NULL, 'm'},
                                         {"fit-mean", no_argument, NULL, 'F'},
                                         {"restarts", required_argument, NULL, 'r'},
                                         {"seed", required_argument, NULL, 's'},
                                         {"loocv", required_argument, NULL, 'l'},
                                         {"predict", required_argument, NULL, 'p'},
                                         {"out", required_argument, NULL, 'o'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"no-standardize", no_argument, NULL, 'S'},
                                         {"allow-jitter", no_argument, NULL, 'J'},
                                         {"no-optimize", no_argument, NULL, 'N'},
                                         {"model", required_argument, NULL, 'M'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int c;

    *a = (struct gp_args){.kernel = "matern32+white",
                          .loocv = "closed",
                          .standardize = true,
                          .optimize = true,
                          .restarts = 5};
    optind = 1;
    opterr = 0; /* our own one-line messages */
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            a->data = optarg;
            break;
        case 't':
            a->target = optarg;
            break;
        case 'f':
            a->features = optarg;
            break;
        case 'k':
            a->kernel = optarg;
            break;
        case 'a':
            a->ard = true;
            break;
        case 'm':
            a->mean = optarg;
            break;
        case 'F':
            a->fit_mean = true;
            break;
        case 'l':
            a->loocv = optarg;
            break;
        case 'p':
            a->predict = optarg;
            break;
        case 'o':
            a->out = optarg;
            break;
        case 'j':
            a->json = true;
            break;
        case 'S':
            a->standardize = false;
            break;
        case 'J':
            a->allow_jitter = true;
            break;
        case 'N':
            a->optimize = false;
            break;
        case 'M':
            a->model = optarg;
            break;
        case 'r':
            if (util_parse_long(optarg, &a->restarts) < 0 || a->restarts < 0) {
                fprintf(stderr, "wattprof gp: --restarts: not a count: '%s'\n", optarg);
                return -EINVAL;
            }
            break;
        case 's':
            if (util_parse_long(optarg, &a->seed) < 0 || a->seed < 0) {
                fprintf(stderr, "wattprof gp: --seed: not a non-negative integer: '%s'\n", optarg);
                return -EINVAL;
            }
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            fprintf(stderr,
                    "wattprof gp: unknown option or missing value '%s' (see wattprof gp --help)\n",
                    argv[optind - 1]);
            return -EINVAL;
        }
    }
    if (optind == argc - 1 && !a->data && !a->model) /* the data file alone, as a word */
        a->data = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "wattprof gp: unexpected argument '%s'\n", argv[optind]);
        return -EINVAL;
    }
    if (a->model && (!a->predict || a->data || a->out)) {
        fprintf(stderr, "wattprof gp: --model takes --predict FILE, and no --data or --out\n");
        return -EINVAL;
    }
    if (!a->model && (!a->data || !a->target || !a->features)) {
        fprintf(stderr, "wattprof gp: --data, --target and --features are required\n");
        return -EINVAL;
    }
    if (a->fit_mean && (!a->mean || !strcmp(a->mean, "zero") || !strcmp(a->mean, "const"))) {
        fprintf(stderr, "wattprof gp: --fit-mean needs --mean EXPR (a constant mean is always "
                        "fitted)\n");
        return -EINVAL;
    }
    if (strcmp(a->loocv, "closed") && strcmp(a->loocv, "refit") && strcmp(a->loocv, "none")) {
        fprintf(stderr, "wattprof gp: --loocv: '%s' is not closed, refit or none\n", a->loocv);
        return -EINVAL;
    }
    return 0;
}

static void run_free(struct gp_run *r)
{
    util_strv_free(r->feat, r->d);
    learn_table_free(r->t);
    learn_table_free(r->pt);
    free(r->cols);
    gp_free(r->m);
    free(r->loo);
    free(r->loo_var);
    free(r->mean_loo);
    free(r->pmean);
    free(r->pvar);
    free(r->model_target);
}

/* MAPE divides by the target: on one that crosses zero (in the training
 * rows or the --predict rows) it is dominated by the rows nearest 0 and says
 * nothing, so it is left out, and why said. */
static void check_mape(struct gp_run *r, const double *y, size_t n)
{
    if (!r->y_seen) {
        r->ymin = INFINITY;
        r->ymax = -INFINITY;
        r->y_seen = true;
    }
    for (size_t i = 0; i < n; i++) {
        r->ymin = fmin(r->ymin, y[i]);
        r->ymax = fmax(r->ymax, y[i]);
    }
    r->mape_off = n > 0 && r->ymin <= 0 && r->ymax >= 0;
}

/* Reads the features and the target (the last column of the table). */
static int load(const struct gp_args *a, struct gp_run *r)
{
    char err[UTIL_ERRLEN];
    const char **names;
    int e = util_split_list(a->features, ',', &r->feat, &r->d);

    if (e < 0) {
        fprintf(stderr, "wattprof gp: --features: '%s' is not a comma-separated list\n",
                a->features);
        return e;
    }
    if (!(names = calloc(r->d + 1, sizeof(*names))))
        return -ENOMEM;
    for (size_t j = 0; j < r->d; j++)
        names[j] = r->feat[j];
    names[r->d] = a->target;
    e = learn_table_read(a->data, names, r->d + 1, 0, &r->t, NULL, err, sizeof(err));
    free(names);
    if (e < 0) {
        fprintf(stderr, "wattprof gp: %s\n", err);
        return e;
    }
    if (!(r->cols = calloc(r->d ? r->d : 1, sizeof(*r->cols))))
        return -ENOMEM;
    for (size_t j = 0; j < r->d; j++)
        r->cols[j] = learn_table_col(r->t, j);
    r->data = (gp_data){r->cols, learn_table_col(r->t, r->d), r->t->n_rows};
    if (r->data.n < 3) {
        fprintf(stderr, "wattprof gp: %s: need at least 3 rows to fit a GP, got %zu\n", a->data,
                r->data.n);
        return -EINVAL;
    }
    return 0;
}

static int fit(const struct gp_args *a, struct gp_run *r)
{
    gp_config cfg = {a->kernel, a->ard, a->standardize, a->mean, a->fit_mean};
    gp_fit_options o = {.restarts = (int)a->restarts, .seed = (uint64_t)a->seed};
    char err[UTIL_ERRLEN];
    size_t n = r->data.n;
    int e = gp_new(&cfg, (const char *const *)r->feat, r->d, &r->m, err, sizeof(err));

    if (e == -ENOENT) { /* OpenBLAS or L-BFGS-B missing */
        fprintf(stderr, "wattprof gp: %s\n", err);
        return e;
    }
    if (e < 0) {
        fprintf(stderr, "wattprof gp: %s: %s\n", strncmp(err, "kernel", 6) ? "--mean" : "--kernel",
                err);
        return e;
    }
    if (a->optimize) {
        e = gp_fit(r->m, &r->data, &o, err, sizeof(err));
    } else {
        gp_set_scaling(r->m, &r->data);
        e = gp_condition(r->m, &r->data, err, sizeof(err));
    }
    if (e < 0) {
        fprintf(stderr, "wattprof gp: %s: %s\n", a->data, err);
        return e;
    }
    r->loo = malloc(n * sizeof(double));
    r->loo_var = malloc(n * sizeof(double));
    r->mean_loo = malloc(n * sizeof(double));
    if (!r->loo || !r->loo_var || !r->mean_loo)
        return -ENOMEM;
    check_mape(r, r->data.y, n);
    if (!strcmp(a->loocv, "none"))
        return 0;
    if (!strcmp(a->loocv, "closed"))
        e = gp_loo_closed(r->m, r->loo, r->loo_var);
    else
        e = gp_loo_refit(r->m, &r->data, &o, r->loo, r->loo_var, err, sizeof(err));
    if (e == 0)
        e = gp_mean_loo(r->m, &r->data, r->mean_loo);
    if (e < 0) {
        fprintf(stderr, "wattprof gp: %s: leave-one-out failed: %s\n", a->data,
                e == -EDOM ? "the mean function is not finite on some row" : err);
        return e;
    }
    learn_metrics_compute(r->data.y, r->loo, n, &r->gp_err);
    learn_metrics_compute(r->data.y, r->mean_loo, n, &r->mean_err);
    return 0;
}

/* Reads the --predict rows: the features, and the target when the file has
 * that column too (then its test error is reported). */
static int read_predict(const struct gp_args *a, struct gp_run *r, char *err, size_t errlen)
{
    const char *target = a->target ? a->target : r->model_target;
    const char **names = calloc(r->d + 1, sizeof(*names));
    learn_csv *c = NULL;
    int e = names ? learn_csv_read(a->predict, &c, err, errlen) : -ENOMEM;

    if (e == 0) {
        for (size_t j = 0; j < r->d; j++)
            names[j] = r->feat[j];
        r->has_truth = target && learn_csv_column(c, target) >= 0;
        names[r->d] = target;
        e = learn_table_from_csv(c, names, r->d + r->has_truth, 0, &r->pt, NULL, err, errlen);
    }
    learn_csv_free(c);
    free(names);
    return e;
}

static int predict(const struct gp_args *a, struct gp_run *r)
{
    char err[UTIL_ERRLEN] = "";
    const double **cols;
    int e = read_predict(a, r, err, sizeof(err));

    if (e < 0) {
        fprintf(stderr, "wattprof gp: --predict: %s\n", err[0] ? err : strerror(-e));
        return e;
    }
    cols = calloc(r->d ? r->d : 1, sizeof(*cols));
    r->pmean = malloc((r->pt->n_rows + 1) * sizeof(double));
    r->pvar = malloc((r->pt->n_rows + 1) * sizeof(double));
    if (!cols || !r->pmean || !r->pvar) {
        free(cols);
        return -ENOMEM;
    }
    for (size_t j = 0; j < r->d; j++)
        cols[j] = learn_table_col(r->pt, j);
    e = gp_predict(r->m, cols, r->pt->n_rows, r->pmean, r->pvar);
    free(cols);
    if (e < 0)
        fprintf(stderr, "wattprof gp: --predict: %s: the mean function is not finite on some row\n",
                a->predict);
    if (e == 0 && r->has_truth) {
        const double *y = learn_table_col(r->pt, r->d);
        learn_metrics_compute(y, r->pmean, r->pt->n_rows, &r->test_err);
        check_mape(r, y, r->pt->n_rows);
    }
    return e;
}

/* --model: the target its file names ("target"), for --predict's errors. */
static int model_target(const char *text, struct gp_run *r)
{
    json_object *doc = json_tokener_parse(text), *t;

    if (doc && json_object_object_get_ex(doc, "target", &t) &&
        json_object_is_type(t, json_type_string) &&
        !(r->model_target = strdup(json_object_get_string(t)))) {
        json_object_put(doc);
        return -ENOMEM;
    }
    json_object_put(doc);
    return 0;
}

/* --model: the saved model and its feature names, for predict(). */
static int load_model(const struct gp_args *a, struct gp_run *r)
{
    char *text, err[UTIL_ERRLEN];
    const char *const *names;
    size_t len;
    int e = util_read_file(a->model, &text, &len);

    if (e < 0) {
        fprintf(stderr, "wattprof gp: --model: %s: %s\n", a->model, strerror(-e));
        return e;
    }
    e = gp_from_json(text, a->model, &r->m, err, sizeof(err));
    if (e == 0)
        e = model_target(text, r);
    free(text);
    if (e < 0) {
        if (e != -ENOMEM)
            fprintf(stderr, "wattprof gp: --model: %s\n", err);
        return e;
    }
    names = gp_features(r->m, &r->d);
    if (!(r->feat = calloc(r->d ? r->d : 1, sizeof(char *))))
        return -ENOMEM;
    for (size_t j = 0; j < r->d; j++)
        if (!(r->feat[j] = strdup(names[j])))
            return -ENOMEM;
    return 0;
}

static json_object *metrics_json(const learn_metrics *m, const struct gp_run *r)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "mae", json_object_new_double(m->mae));
    json_object_object_add(o, "rmse", json_object_new_double(m->rmse));
    json_object_object_add(o, "r2", isnan(m->r2) ? NULL : json_object_new_double(m->r2));
    json_object_object_add(o, "mape",
                           isnan(m->mape) || r->mape_off ? NULL : json_object_new_double(m->mape));
    return o;
}

/* Why MAPE is left out, or NULL. */
static const char *mape_note(const struct gp_run *r, char *buf, size_t len)
{
    if (!r->mape_off)
        return NULL;
    snprintf(buf, len,
             "MAPE left out: the target crosses zero (%.6g to %.6g), where relative errors are "
             "undefined or dominated by the rows nearest 0",
             r->ymin, r->ymax);
    return buf;
}

static void print_json(const struct gp_args *a, const struct gp_run *r)
{
    json_object *o = json_object_new_object(), *p = json_object_new_array(), *x;
    size_t np = gp_n_params(r->m);
    double theta[np ? np : 1];
    char name[256];

    gp_get_params(r->m, theta);
    if (a->model) { /* predictions only */
        json_object_object_add(o, "model", json_object_new_string(a->model));
        json_object_put(p);
        goto predictions;
    }
    json_object_object_add(o, "rows", json_object_new_uint64(r->data.n));
    json_object_object_add(o, "kernel", json_object_new_string(a->kernel));
    json_object_object_add(o, "mean", json_object_new_string(a->mean ? a->mean : "zero"));
    for (size_t i = 0; i < np; i++) {
        gp_param_name(r->m, i, name, sizeof(name));
        x = json_object_new_object();
        json_object_object_add(x, "name", json_object_new_string(name));
        json_object_object_add(
            x, "value",
            json_object_new_double(gp_param_is_log(r->m, i) ? exp(theta[i]) : theta[i]));
        json_object_array_add(p, x);
    }
    json_object_object_add(o, "params", p);
    json_object_object_add(o, "log_marginal_likelihood",
                           json_object_new_double(gp_log_marginal_likelihood(r->m)));
    json_object_object_add(o, "jitter", json_object_new_double(gp_jitter(r->m)));
    json_object_object_add(o, "loocv_method", json_object_new_string(a->loocv));
    if (strcmp(a->loocv, "none")) {
        json_object_object_add(o, "loocv", metrics_json(&r->gp_err, r));
        json_object_object_add(o, "mean_loocv", metrics_json(&r->mean_err, r));
    }
predictions:
    if (mape_note(r, name, sizeof(name)))
        json_object_object_add(o, "mape_note", json_object_new_string(name));
    if (r->has_truth) {
        x = metrics_json(&r->test_err, r);
        json_object_object_add(x, "rows", json_object_new_uint64(r->pt->n_rows));
        json_object_object_add(o, "test", x);
    }
    if (r->pt) {
        json_object_object_add(o, "predictions", p = json_object_new_array());
        for (size_t i = 0; i < r->pt->n_rows; i++) {
            x = json_object_new_object();
            json_object_object_add(x, "line", json_object_new_int(r->pt->line[i]));
            json_object_object_add(x, "mean", json_object_new_double(r->pmean[i]));
            json_object_object_add(x, "std", json_object_new_double(sqrt(r->pvar[i])));
            json_object_array_add(p, x);
        }
    }
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
    json_object_put(o);
}

static void print_metrics(const char *what, const learn_metrics *m, const struct gp_run *r)
{
    printf("%-34s MAE %.6g  RMSE %.6g  R2 %.4f  MAPE ", what, m->mae, m->rmse, m->r2);
    if (r->mape_off)
        printf("-\n");
    else if (isnan(m->mape))
        printf("n/a (some y is 0)\n");
    else
        printf("%.2f %%\n", 100 * m->mape);
}

static void print_predictions(const struct gp_args *a, const struct gp_run *r)
{
    char why[200];

    if (r->has_truth) {
        char what[64];
        snprintf(what, sizeof(what), "test error (%zu rows):", r->pt->n_rows);
        print_metrics(what, &r->test_err, r);
    }
    if (mape_note(r, why, sizeof(why)) && (a->model || !strcmp(a->loocv, "none")))
        printf("%s\n", why);
    if (!r->pt)
        return;
    printf("predictions for %s:\nline,mean,std\n", a->predict);
    for (size_t i = 0; i < r->pt->n_rows; i++)
        printf("%d,%.10g,%.10g\n", r->pt->line[i], r->pmean[i], sqrt(r->pvar[i]));
}

static void print_text(const struct gp_args *a, const struct gp_run *r)
{
    size_t np = gp_n_params(r->m);
    double theta[np ? np : 1];
    char name[256];

    gp_get_params(r->m, theta);
    printf("%zu rows, %zu features, kernel %s, mean %s\n", r->data.n, r->d, a->kernel,
           a->mean ? a->mean : "zero");
    printf("hyperparameters:\n");
    for (size_t i = 0; i < np; i++) {
        gp_param_name(r->m, i, name, sizeof(name));
        printf("  %-32s %.6g\n", name, gp_param_is_log(r->m, i) ? exp(theta[i]) : theta[i]);
    }
    printf("log marginal likelihood            %.6f\n", gp_log_marginal_likelihood(r->m));
    if (strcmp(a->loocv, "none")) {
        print_metrics(!strcmp(a->loocv, "closed") ? "LOOCV (closed form):"
                                                  : "LOOCV (refit per fold):",
                      &r->gp_err, r);
        print_metrics("LOOCV of the mean function alone:", &r->mean_err, r);
        if (mape_note(r, name, sizeof(name)))
            printf("%s\n", name);
    }
    print_predictions(a, r);
}

/* The model document with the target's name added. */
static int write_model(const char *path, const char *target, const gp_model *m)
{
    char *text = gp_to_json(m);
    json_object *doc = text ? json_tokener_parse(text) : NULL;
    FILE *f;
    int e = 0;

    free(text);
    if (!doc)
        return -ENOMEM;
    json_object_object_add(doc, "target", json_object_new_string(target));
    if (!(f = fopen(path, "w"))) {
        e = -errno;
        fprintf(stderr, "wattprof gp: --out: %s: %s\n", path, strerror(errno));
    } else {
        fprintf(f, "%s\n", json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY));
        if (fclose(f) != 0) {
            e = -errno;
            fprintf(stderr, "wattprof gp: --out: %s: %s\n", path, strerror(errno));
        }
    }
    json_object_put(doc);
    return e;
}

int cmd_gp(int argc, char **argv)
{
    struct gp_args a;
    struct gp_run r = {0};
    int e = parse_args(argc, argv, &a);

    if (e != 0)
        return e > 0 ? 0 : 2;
    if (a.model) {
        e = load_model(&a, &r);
        if (e == 0)
            e = predict(&a, &r);
        if (e == 0 && a.json)
            print_json(&a, &r);
        else if (e == 0)
            print_predictions(&a, &r);
        else if (e == -ENOMEM)
            fprintf(stderr, "wattprof gp: out of memory\n");
        run_free(&r);
        return e == 0 ? 0 : 1;
    }
    e = load(&a, &r);
    if (e == 0)
        e = fit(&a, &r);
    if (e == 0 && a.predict)
        e = predict(&a, &r);
    if (e == 0 && a.out)
        e = write_model(a.out, a.target, r.m);
    if (e == 0) {
        if (a.json)
            print_json(&a, &r);
        else
            print_text(&a, &r);
        if (gp_jitter(r.m) > 0) {
            fprintf(stderr,
                    "wattprof gp: %s: K is singular (duplicated rows?): added jitter %.3g to its "
                    "diagonal%s\n",
                    a.data, gp_jitter(r.m), a.allow_jitter ? "" : " (exit status 3)");
            if (!a.allow_jitter)
                e = EXIT_JITTER;
        }
    } else if (e == -ENOMEM) {
        fprintf(stderr, "wattprof gp: out of memory\n");
    }
    run_free(&r);
    return e == 0 ? 0 : e == EXIT_JITTER ? EXIT_JITTER : 1;
}
