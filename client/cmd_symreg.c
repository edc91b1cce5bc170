/* cmd_symreg: `wattprof symreg CONFIG.ini`, symbolic regression from a
 * configuration file in the paper's layout ([data], [primitives],
 * [evolution], [fitness], [constants]); prints the best equation with its
 * train and test errors, optionally the error/size Pareto front, JSON, and
 * a model file (engine "expr") that lib/model evaluates. */
#include "commands.h"
#include "symreg_cli.h"
#include "learn/learn.h"
#include "util/util.h"

#include <errno.h>
#include <getopt.h>
#include <gsl/gsl_errno.h>
#include <ini.h>
#include <json-c/json.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct options {
    const char *config, *out, *data;
    bool json, front;
    bool has_seed, has_time_limit, has_rule;
    uint64_t seed;
    double time_limit;
    enum symreg_rule rule;
    int threads;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: wattprof symreg CONFIG.ini [--data FILE.csv] [--json] [--seed S]\n"
               "                       [--threads N] [--front] [--time-limit S] [--rule RULE]\n"
               "                       [--out MODEL.json]\n");
}

static void help(void)
{
    usage(stdout);
    fputs(
        "\nFinds an equation for [data] target from [data] features by genetic programming\n"
        "and reports the one on the error/size Pareto front that [selection] rule picks,\n"
        "with each constant's standard error, rounded to the digits the data support.\n"
        "\nOptions:\n"
        "  --data FILE.csv   train on FILE instead of [data] train\n"
        "  --json            everything as JSON, front and reasons included\n"
        "  --seed S          overrides [evolution] seed\n"
        "  --threads N       evaluation threads (default: all CPUs; same result for any N)\n"
        "  --front           print the whole Pareto front after the equation\n"
        "  --time-limit S    stop after the generation that passes S seconds\n"
        "                    (overrides [evolution] time_limit)\n"
        "  --rule RULE       overrides [selection] rule\n"
        "  --out MODEL.json  write the reported equation as a model file (engine expr)\n"
        "  --help            this text\n"
        "\nCONFIG.ini keys (defaults in brackets):\n"
        "  [data]        train = CSV, test = CSV (optional), target = COLUMN,\n"
        "                features = COLUMN, ...   (paths relative to CONFIG.ini)\n"
        "  [primitives]  functions = add, sub, mul, div [add, sub, mul, div]; also max, min,\n"
        "                square, cube, sqrt, log, exp\n"
        "                constants = on|off [on]   random constants among the terminals\n"
        "  [evolution]   preset = default|pandora  sets every key below (pandora: the\n"
        "                  paper's double tournament, no simplification, no migration, no\n"
        "                  restarts, tie = exact); later keys override\n"
        "                population [300], generations [150], crossover [1.0],\n"
        "                mutation [0.5], selection = double|pareto [double],\n"
        "                tournament_fitness [3] (tournament size), tournament_parsimony [1.1]\n"
        "                (double only: the smaller of two wins with p/2),\n"
        "                tie = bic|exact [bic] (selection sees errors below the one the bic\n"
        "                rule would pick from the front so far as equal, the smaller winning;\n"
        "                exact: only below round-off; pandora: exact), max_depth [17],\n"
        "                max_size [60], init_min_depth [1], init_max_depth [3],\n"
        "                simplify = on|off [on] (simplify each new equation before fitting),\n"
        "                scaling = on|off [off] (linear scaling: fit a + b * equation in\n"
        "                closed form, kept when it lowers the error by a tenth or more),\n"
        "                migration = on|off [on] (each generation the equations of the\n"
        "                error-size front return among the parents; pandora: off),\n"
        "                restarts [2] (fresh populations after the first, each run as long\n"
        "                as all before it; only the reported front is shared; pandora: 0),\n"
        "                stall [0] (stop after this many generations without progress; 0 never),\n"
        "                time_limit [0] (seconds; 0 never), seed [1]\n"
        "  [fitness]     metric = mape|mse|rmse [mape]\n"
        "  [constants]   lm = on|off [on] (Levenberg-Marquardt), lm_iterations [10],\n"
        "                cache = on|off [on] (an equation shaped as one fitted before\n"
        "                takes that one's constants and error, without fitting)\n"
        "  [selection]   rule = bic|cv|score|accurate [bic]: which equation of the front to\n"
        "                report: the lowest n ln(MSE) + size ln(n); the smallest within one\n"
        "                standard error of the best 5-fold cross-validated error; PySR's\n"
        "                score; or the most accurate whatever its size\n"
        "\nA run stops at the generation limit, the stall limit or the time limit, whichever\n"
        "comes first, and reports the best it has. On a terminal, a progress line goes to\n"
        "stderr. See docs/engines.md, \"Symbolic regression\".\n",
        stdout);
}

/* ---- Data --------------------------------------------------------------- */

struct data {
    learn_table *train, *test;
};

static int read_csv(struct config *c, const char *path, int line, learn_csv **out)
{
    char err[UTIL_ERRLEN - 64];
    int r = learn_csv_read(path, out, err, sizeof(err));

    if (r < 0 && line == 0) /* --data */
        snprintf(c->err, sizeof(c->err), "--data: %s", err);
    else if (r < 0)
        snprintf(c->err, sizeof(c->err), "%s:%d: %s", c->path, line, err);
    else if ((*out)->n_rows == 0) {
        snprintf(c->err, sizeof(c->err), "%s: no data rows", path);
        learn_csv_free(*out);
        *out = NULL;
        r = -EINVAL;
    }
    return r;
}

static int same_columns(struct config *c, const learn_csv *a, const learn_csv *b)
{
    for (size_t j = 0; j < a->n_cols || j < b->n_cols; j++)
        if (j >= a->n_cols || j >= b->n_cols || strcmp(a->header[j], b->header[j]) != 0) {
            snprintf(c->err, sizeof(c->err),
                     "%s: columns differ from %s: column %zu is '%s' there, '%s' here", b->path,
                     a->path, j + 1, j < a->n_cols ? a->header[j] : "(none)",
                     j < b->n_cols ? b->header[j] : "(none)");
            return -EINVAL;
        }
    return 0;
}

static int to_table(struct config *c, const learn_csv *csv, learn_table **out)
{
    const char *cols[c->n_features + 1];
    int r;

    for (size_t j = 0; j < c->n_features; j++)
        cols[j] = c->features[j];
    cols[c->n_features] = c->target;
    r = learn_table_from_csv(csv, cols, c->n_features + 1, 0, out, NULL, c->err, sizeof(c->err));
    if (r < 0 || c->p.fitness != SYMREG_MAPE)
        return r;
    const double *y = learn_table_col(*out, c->n_features);
    for (size_t i = 0; i < (*out)->n_rows; i++)
        if (y[i] == 0) {
            snprintf(c->err, sizeof(c->err),
                     "%s:%d: target '%s' is 0; the mape fitness needs non-zero targets", csv->path,
                     (*out)->line[i], c->target);
            learn_table_free(*out);
            *out = NULL;
            return -EDOM;
        }
    return 0;
}

static int data_load(struct config *c, struct data *d)
{
    learn_csv *train = NULL, *test = NULL;
    int r = read_csv(c, c->train, c->train_line, &train);

    if (r == 0 && c->test)
        r = read_csv(c, c->test, c->test_line, &test);
    if (r == 0 && test)
        r = same_columns(c, train, test);
    if (r == 0)
        r = to_table(c, train, &d->train);
    if (r == 0 && test)
        r = to_table(c, test, &d->test);
    learn_csv_free(train);
    learn_csv_free(test);
    return r;
}

/* ---- Running and reporting ---------------------------------------------- */

struct errors {
    bool ok; /* evaluation was finite */
    double fit;
    learn_metrics m;
};

static void errors_of(const expr *e, const struct config *c, const learn_table *t,
                      struct errors *out)
{
    const double *cols[c->n_features];
    double *pred = malloc(t->n_rows * sizeof(double));
    const double *y = learn_table_col(t, c->n_features);

    for (size_t j = 0; j < c->n_features; j++)
        cols[j] = learn_table_col(t, j);
    out->ok = pred && expr_eval(e, cols, t->n_rows, pred);
    out->fit = out->ok ? symreg_error(c->p.fitness, y, pred, t->n_rows) : INFINITY;
    if (out->ok)
        learn_metrics_compute(y, pred, t->n_rows, &out->m);
    free(pred);
}

static void show_progress(const symreg_progress *pr, void *ctx)
{
    const struct config *c = ctx;
    char limit[32] = "";

    if (c->p.time_limit > 0)
        snprintf(limit, sizeof(limit), "/%g", c->p.time_limit);
    fprintf(stderr, "\rgeneration %zu/%zu  %.1f%s s  best %s %-10.4g  %.0f evaluations/s\033[K",
            pr->generation, c->p.generations, pr->seconds, limit, symreg_fitness_name(c->p.fitness),
            pr->best_error, pr->seconds > 0 ? (double)pr->evaluations / pr->seconds : 0);
}

static json_object *json_errors(const struct errors *e)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "fitness", json_object_new_double(e->fit));
    if (e->ok) {
        json_object_object_add(o, "mape", json_object_new_double(e->m.mape));
        json_object_object_add(o, "mae", json_object_new_double(e->m.mae));
        json_object_object_add(o, "rmse", json_object_new_double(e->m.rmse));
        json_object_object_add(o, "r2", json_object_new_double(e->m.r2));
    }
    return o;
}

static json_object *json_strings(char **v, size_t n)
{
    json_object *a = json_object_new_array();

    for (size_t i = 0; i < n; i++)
        json_object_array_add(a, json_object_new_string(v[i]));
    return a;
}

struct report {
    const struct config *c;
    const struct options *o;
    symreg_result *res;
    symreg_choice choice;
    expr *chosen; /* polished: refitted, constants rounded */
    symreg_const *consts;
    size_t n_consts;
    char *equation;
    struct errors train, test;
    bool has_test;
};

static json_object *json_front(const struct report *rp)
{
    json_object *a = json_object_new_array();

    for (size_t i = 0; i < rp->res->n_front; i++) {
        const symreg_front_item *it = &rp->res->front[i];
        char *text = expr_print(it->e, (const char *const *)rp->c->features);
        json_object *o = json_object_new_object();
        json_object_object_add(o, "size", json_object_new_int64((int64_t)it->size));
        json_object_object_add(o, "error", json_object_new_double(it->error));
        json_object_object_add(o, "score", json_object_new_double(it->score));
        json_object_object_add(o, "cv_error",
                               isnan(it->cv_error) ? NULL : json_object_new_double(it->cv_error));
        json_object_object_add(o, "equation", json_object_new_string(text ? text : ""));
        json_object_object_add(o, "chosen", json_object_new_boolean(i == rp->choice.index));
        json_object_array_add(a, o);
        free(text);
    }
    return a;
}

static json_object *json_selection(const struct report *rp)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "rule", json_object_new_string(symreg_rule_name(rp->c->rule)));
    json_object_object_add(o, "front_index", json_object_new_int64((int64_t)rp->choice.index));
    json_object_object_add(o, "error_limit", json_object_new_double(rp->choice.limit));
    json_object_object_add(o, "exact_floor", json_object_new_double(rp->res->floor));
    json_object_object_add(o, "why", json_object_new_string(rp->choice.why));
    return o;
}

static json_object *json_consts(const struct report *rp)
{
    json_object *a = json_object_new_array();

    for (size_t i = 0; i < rp->n_consts; i++) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "value", json_object_new_double(rp->consts[i].value));
        json_object_object_add(o, "fitted", json_object_new_double(rp->consts[i].fitted));
        json_object_object_add(
            o, "stderr", isnan(rp->consts[i].se) ? NULL : json_object_new_double(rp->consts[i].se));
        json_object_array_add(a, o);
    }
    return a;
}

static void print_json(const struct report *rp)
{
    const symreg_result *res = rp->res;
    json_object *o = json_object_new_object();

    json_object_object_add(o, "equation", json_object_new_string(rp->equation));
    json_object_object_add(o, "size", json_object_new_int64((int64_t)expr_size(rp->chosen)));
    json_object_object_add(o, "depth", json_object_new_int64((int64_t)expr_depth(rp->chosen)));
    json_object_object_add(o, "constants", json_consts(rp));
    json_object_object_add(o, "selection", json_selection(rp));
    json_object_object_add(o, "features", json_strings(rp->c->features, rp->c->n_features));
    json_object_object_add(o, "target", json_object_new_string(rp->c->target));
    json_object_object_add(o, "fitness",
                           json_object_new_string(symreg_fitness_name(rp->c->p.fitness)));
    json_object_object_add(o, "train", json_errors(&rp->train));
    json_object_object_add(o, "test", rp->has_test ? json_errors(&rp->test) : NULL);
    json_object_object_add(o, "generations", json_object_new_int64((int64_t)res->generations));
    json_object_object_add(o, "stopped", json_object_new_string(symreg_stop_name(res->stop)));
    json_object_object_add(o, "evaluations", json_object_new_int64((int64_t)res->evaluations));
    json_object_object_add(o, "evaluations_cached", json_object_new_int64((int64_t)res->cached));
    json_object_object_add(o, "seconds", json_object_new_double(res->seconds));
    json_object_object_add(o, "evaluations_per_second",
                           json_object_new_double((double)res->evaluations / res->seconds));
    json_object_object_add(o, "seed", json_object_new_int64((int64_t)rp->c->p.seed));
    json_object_object_add(o, "threads", json_object_new_int(rp->c->p.threads));
    json_object_object_add(o, "front", json_front(rp));
    puts(json_object_to_json_string_ext(o,
                                        JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
}

static void print_text(const struct report *rp)
{
    const symreg_result *res = rp->res;
    const char *fit = symreg_fitness_name(rp->c->p.fitness);

    printf("equation:    %s = %s\n", rp->c->target, rp->equation);
    printf("size:        %zu nodes, depth %zu (front: %zu equations, sizes %zu to %zu)\n",
           expr_size(rp->chosen), expr_depth(rp->chosen), res->n_front, res->front[0].size,
           res->front[res->n_front - 1].size);
    printf("chosen:      %s\n", rp->choice.why);
    for (size_t i = 0; i < rp->n_consts; i++) {
        char v[UTIL_NUMLEN], fitted[UTIL_NUMLEN];
        util_format_double(v, rp->consts[i].value, 17);
        util_format_double(fitted, rp->consts[i].fitted, 17);
        if (isnan(rp->consts[i].se))
            printf("%-13s%s (standard error unknown)\n", i ? "" : "constants:", v);
        else
            printf("%-13s%s +- %.2g (fitted %s)\n", i ? "" : "constants:", v, rp->consts[i].se,
                   fitted);
    }
    printf("train:       %s %.6g (mape %.4g %%, rmse %.6g, r2 %.6f)\n", fit, rp->train.fit,
           100 * rp->train.m.mape, rp->train.m.rmse, rp->train.m.r2);
    if (rp->has_test && rp->test.ok)
        printf("test:        %s %.6g (mape %.4g %%, rmse %.6g, r2 %.6f)\n", fit, rp->test.fit,
               100 * rp->test.m.mape, rp->test.m.rmse, rp->test.m.r2);
    else if (rp->has_test)
        printf("test:        not finite on the test data\n");
    printf("generations: %zu (stopped by %s)\n", res->generations, symreg_stop_name(res->stop));
    printf("evaluations: %llu (%.0f/s; %llu from the cache)\n",
           (unsigned long long)res->evaluations, (double)res->evaluations / res->seconds,
           (unsigned long long)res->cached);
    printf("time:        %.3f s\n", res->seconds);
    if (!rp->o->front)
        return;
    printf("\nPareto front (%s against size; * reported):\n", fit);
    for (size_t i = 0; i < res->n_front; i++) {
        char *text = expr_print(res->front[i].e, (const char *const *)rp->c->features);
        printf("%c %4zu  %-12.6g %-9.3g %s\n", i == rp->choice.index ? '*' : ' ',
               res->front[i].size, res->front[i].error, res->front[i].score, text ? text : "");
        free(text);
    }
}

/* The model file: see README.md, "Symbolic regression". */
static int write_model(const struct report *rp, const char *path)
{
    json_object *o = json_object_new_object(), *tr = json_object_new_object();
    char *copy = strdup(path), *name = copy ? basename(copy) : NULL, *dot;
    int r = 0;

    if (name && (dot = strrchr(name, '.')) && dot != name)
        *dot = 0;
    json_object_object_add(o, "format", json_object_new_string("wattprof-model/1"));
    json_object_object_add(o, "name", json_object_new_string(name ? name : "symreg"));
    json_object_object_add(o, "engine", json_object_new_string("expr"));
    json_object_object_add(o, "expression", json_object_new_string(rp->equation));
    json_object_object_add(o, "features", json_strings(rp->c->features, rp->c->n_features));
    json_object_object_add(o, "target", json_object_new_string(rp->c->target));
    json_object_object_add(tr, "tool", json_object_new_string("wattprof symreg"));
    json_object_object_add(tr, "train", json_object_new_string(rp->c->train));
    if (rp->c->test)
        json_object_object_add(tr, "test", json_object_new_string(rp->c->test));
    json_object_object_add(tr, "fitness",
                           json_object_new_string(symreg_fitness_name(rp->c->p.fitness)));
    json_object_object_add(tr, "train_error", json_errors(&rp->train));
    if (rp->has_test)
        json_object_object_add(tr, "test_error", json_errors(&rp->test));
    json_object_object_add(tr, "seed", json_object_new_int64((int64_t)rp->c->p.seed));
    json_object_object_add(tr, "generations", json_object_new_int64((int64_t)rp->res->generations));
    json_object_object_add(o, "training", tr);
    if (json_object_to_file_ext(path, o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE) <
        0) {
        r = errno ? -errno : -EIO;
        fprintf(stderr, "wattprof symreg: cannot write %s: %s\n", path, strerror(-r));
    }
    json_object_put(o);
    free(copy);
    return r;
}

/* Picks the equation to report from the front and polishes it. */
static int choose(struct report *rp, const struct data *d)
{
    const struct config *c = rp->c;
    const double *cols[c->n_features];
    size_t n = d->train->n_rows;
    int r;

    for (size_t j = 0; j < c->n_features; j++)
        cols[j] = learn_table_col(d->train, j);
    r = symreg_choose(rp->res, c->p.fitness, c->rule, cols, c->n_features,
                      learn_table_col(d->train, c->n_features), n, &rp->choice);
    if (r < 0)
        return r;
    return symreg_polish(rp->res->front[rp->choice.index].e, c->p.fitness, cols,
                         learn_table_col(d->train, c->n_features), n, &rp->chosen, &rp->consts,
                         &rp->n_consts);
}

static int report(const struct config *c, const struct options *o, const struct data *d,
                  symreg_result *res)
{
    struct report rp = {.c = c, .o = o, .res = res, .has_test = d->test != NULL};
    int r = choose(&rp, d);

    if (r == 0 && !(rp.equation = expr_print(rp.chosen, (const char *const *)c->features)))
        r = -ENOMEM;
    if (r == 0) {
        errors_of(rp.chosen, c, d->train, &rp.train);
        if (d->test)
            errors_of(rp.chosen, c, d->test, &rp.test);
        if (o->json)
            print_json(&rp);
        else
            print_text(&rp);
        r = o->out ? write_model(&rp, o->out) : 0;
    }
    free(rp.equation);
    expr_free(rp.chosen);
    free(rp.consts);
    return r;
}

static int run(struct config *c, const struct options *o, const struct data *d)
{
    const double *cols[c->n_features];
    symreg_result *res;
    bool tty = isatty(STDERR_FILENO);
    int r;

    for (size_t j = 0; j < c->n_features; j++)
        cols[j] = learn_table_col(d->train, j);
    r = symreg_run(&c->p, cols, c->n_features, learn_table_col(d->train, c->n_features),
                   d->train->n_rows, tty ? show_progress : NULL, c, &res, c->err, sizeof(c->err));
    if (tty)
        fprintf(stderr, "\r\033[K");
    if (r < 0)
        return r;
    r = report(c, o, d, res);
    if (r < 0 && !c->err[0])
        snprintf(c->err, sizeof(c->err), "reporting the equation failed: %s", strerror(-r));
    symreg_result_free(res);
    return r;
}

static int parse_options(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},          {"seed", required_argument, NULL, 's'},
        {"threads", required_argument, NULL, 't'}, {"front", no_argument, NULL, 'f'},
        {"out", required_argument, NULL, 'o'},     {"time-limit", required_argument, NULL, 'L'},
        {"rule", required_argument, NULL, 'r'},    {"data", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    long v;
    double dv;
    int ch, rule;

    *o = (struct options){.threads = (int)sysconf(_SC_NPROCESSORS_ONLN)};
    optind = 1;
    opterr = 0; /* our own one-line messages */
    while ((ch = getopt_long(argc, argv, "js:t:fo:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'd':
            o->data = optarg;
            break;
        case 'j':
            o->json = true;
            break;
        case 'f':
            o->front = true;
            break;
        case 'o':
            o->out = optarg;
            break;
        case 's':
            if (util_parse_long(optarg, &v) < 0 || v < 0) {
                fprintf(stderr, "wattprof symreg: --seed must be a whole number >= 0, not '%s'\n",
                        optarg);
                return 2;
            }
            o->has_seed = true;
            o->seed = (uint64_t)v;
            break;
        case 't':
            if (util_parse_long(optarg, &v) < 0 || v < 1 || v > 1024) {
                fprintf(stderr, "wattprof symreg: --threads must be in 1..1024, not '%s'\n",
                        optarg);
                return 2;
            }
            o->threads = (int)v;
            break;
        case 'L':
            if (util_parse_double(optarg, &dv) < 0 || !(dv > 0 && dv <= 1e9)) {
                fprintf(stderr, "wattprof symreg: --time-limit must be seconds above 0, not '%s'\n",
                        optarg);
                return 2;
            }
            o->has_time_limit = true;
            o->time_limit = dv;
            break;
        case 'r':
            if ((rule = symreg_rule_from_name(optarg)) < 0) {
                fprintf(stderr,
                        "wattprof symreg: --rule must be bic, cv, score or accurate, not '%s'\n",
                        optarg);
                return 2;
            }
            o->has_rule = true;
            o->rule = rule;
            break;
        case 'h':
            help();
            return 0;
        default:
            fprintf(stderr,
                    "wattprof symreg: unknown option or missing value '%s' (see wattprof symreg "
                    "--help)\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr,
                "wattprof symreg: expected one CONFIG.ini, got %d (see wattprof symreg --help)\n",
                argc - optind);
        return 2;
    }
    o->config = argv[optind];
    if (o->threads < 1)
        o->threads = 1;
    return -1;
}

int cmd_symreg(int argc, char **argv)
{
    struct options o;
    struct config c = {0};
    struct data d = {0};
    int r = parse_options(argc, argv, &o);

    if (r >= 0)
        return r;
    /* GSL's default handler aborts; its callers here check return codes. */
    gsl_set_error_handler_off();
    c.path = o.config;
    if (o.data && !(c.train = strdup(o.data)))
        return 1;
    c.train_given = o.data != NULL;
    r = symreg_config_read(&c);
    if (o.has_seed)
        c.p.seed = o.seed;
    if (o.has_time_limit)
        c.p.time_limit = o.time_limit;
    if (o.has_rule)
        c.rule = o.rule;
    c.p.threads = o.threads;
    if (r == 0)
        r = data_load(&c, &d);
    if (r == 0)
        r = run(&c, &o, &d);
    if (r < 0 && c.err[0])
        fprintf(stderr, "wattprof symreg: %s\n", c.err);
    else if (r < 0)
        fprintf(stderr, "wattprof symreg: %s\n", strerror(-r));
    learn_table_free(d.train);
    learn_table_free(d.test);
    symreg_config_free(&c);
    return r < 0 ? 1 : 0;
}
