/* cmd_symreg: `wattprof symreg CONFIG.ini`, symbolic regression from a
 * configuration file in the paper's layout ([data], [primitives],
 * [evolution], [fitness], [constants]); prints the best equation with its
 * train and test errors, optionally the error/size Pareto front, JSON, and
 * a model file (engine "expr") that lib/model evaluates. */
#include "commands.h"
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

struct config {
    const char *path;
    char *dir; /* data paths are relative to the config file's folder */
    symreg_params p;
    char *train, *test, *target;
    char **features;
    size_t n_features;
    int line; /* line being parsed */
    int train_line, test_line;
    bool train_given; /* --data FILE: [data] train is ignored */
    char err[UTIL_ERRLEN];
};

struct options {
    const char *config, *out, *data;
    bool json, front;
    bool has_seed;
    uint64_t seed;
    int threads;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: wattprof symreg CONFIG.ini [--data FILE.csv] [--json] [--seed S]\n"
               "                       [--threads N] [--front] [--out MODEL.json]\n"
               "  --data FILE.csv  train on FILE instead of the config's [data] train\n");
}

/* ---- Configuration ------------------------------------------------------ */

static int cfg_err(struct config *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int cfg_err(struct config *c, const char *fmt, ...)
{
    char msg[UTIL_ERRLEN - 64];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(c->err, sizeof(c->err), "%s:%d: %s", c->path, c->line, msg);
    return -EINVAL;
}

static int parse_bool(struct config *c, const char *key, const char *v, bool *out)
{
    if (!strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "1"))
        *out = true;
    else if (!strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "0"))
        *out = false;
    else
        return cfg_err(c, "%s must be on or off, not '%s'", key, v);
    return 0;
}

static int parse_size(struct config *c, const char *key, const char *v, long lo, size_t *out)
{
    long n;

    if (util_parse_long(v, &n) < 0 || n < lo)
        return cfg_err(c, "%s must be a whole number of at least %ld, not '%s'", key, lo, v);
    *out = (size_t)n;
    return 0;
}

static int parse_range(struct config *c, const char *key, const char *v, double lo, double hi,
                       double *out)
{
    double d;

    if (util_parse_double(v, &d) < 0 || d < lo || d > hi)
        return cfg_err(c, "%s must be a number in [%g, %g], not '%s'", key, lo, hi, v);
    *out = d;
    return 0;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = 0;
    return s;
}

/* "a, b,c" into trimmed items. */
static int parse_list(struct config *c, const char *key, const char *v, char ***out, size_t *n)
{
    if (util_split_list(v, ',', out, n) < 0)
        return cfg_err(c, "%s: empty item in '%s'", key, v);
    for (size_t i = 0; i < *n; i++) {
        char *t = trim((*out)[i]);
        if (!*t) {
            util_strv_free(*out, *n);
            return cfg_err(c, "%s: empty item in '%s'", key, v);
        }
        memmove((*out)[i], t, strlen(t) + 1);
    }
    return 0;
}

static int set_path(struct config *c, const char *v, char **out)
{
    free(*out);
    if (v[0] == '/' || asprintf(out, "%s/%s", c->dir, v) < 0)
        *out = strdup(v);
    return *out ? 0 : -ENOMEM;
}

static int set_data(struct config *c, const char *key, const char *v)
{
    if (!strcmp(key, "train")) {
        if (c->train_given)
            return 0;
        c->train_line = c->line;
        return set_path(c, v, &c->train);
    }
    if (!strcmp(key, "test")) {
        c->test_line = c->line;
        return set_path(c, v, &c->test);
    }
    if (!strcmp(key, "target")) {
        free(c->target);
        return (c->target = strdup(v)) ? 0 : -ENOMEM;
    }
    if (!strcmp(key, "features")) {
        util_strv_free(c->features, c->n_features);
        c->features = NULL;
        return parse_list(c, key, v, &c->features, &c->n_features);
    }
    return cfg_err(c, "unknown key '%s' in [data] (train, test, target, features)", key);
}

static int set_primitives(struct config *c, const char *key, const char *v)
{
    char **names;
    size_t n;
    int r;

    if (!strcmp(key, "constants"))
        return parse_bool(c, key, v, &c->p.constants);
    if (strcmp(key, "functions") != 0)
        return cfg_err(c, "unknown key '%s' in [primitives] (functions, constants)", key);
    r = parse_list(c, key, v, &names, &n);
    if (r < 0)
        return r;
    c->p.ops = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        int op = expr_op_from_name(names[i]);
        if (op < 0 || expr_op_arity(op) < 1 || op == EXPR_NEG)
            r = cfg_err(c,
                        "unknown primitive '%s' (add, sub, mul, div, max, min, square, cube, "
                        "sqrt, log, exp)",
                        names[i]);
        else
            c->p.ops |= 1u << op;
    }
    util_strv_free(names, n);
    return r;
}

static int set_evolution(struct config *c, const char *key, const char *v)
{
    symreg_params *p = &c->p;
    size_t seed = 0;

    if (!strcmp(key, "population"))
        return parse_size(c, key, v, 2, &p->population);
    if (!strcmp(key, "generations"))
        return parse_size(c, key, v, 0, &p->generations);
    if (!strcmp(key, "crossover"))
        return parse_range(c, key, v, 0, 1, &p->crossover);
    if (!strcmp(key, "mutation"))
        return parse_range(c, key, v, 0, 1, &p->mutation);
    if (!strcmp(key, "tournament_fitness"))
        return parse_size(c, key, v, 1, &p->tournament_fitness);
    if (!strcmp(key, "tournament_parsimony"))
        return parse_range(c, key, v, 1, 2, &p->tournament_parsimony);
    if (!strcmp(key, "max_depth"))
        return parse_size(c, key, v, 0, &p->max_depth);
    if (!strcmp(key, "max_size"))
        return parse_size(c, key, v, 1, &p->max_size);
    if (!strcmp(key, "init_min_depth"))
        return parse_size(c, key, v, 0, &p->init_min_depth);
    if (!strcmp(key, "init_max_depth"))
        return parse_size(c, key, v, 0, &p->init_max_depth);
    if (!strcmp(key, "stall"))
        return parse_size(c, key, v, 0, &p->stall);
    if (!strcmp(key, "seed")) {
        int r = parse_size(c, key, v, 0, &seed);
        if (r == 0)
            p->seed = seed;
        return r;
    }
    return cfg_err(c, "unknown key '%s' in [evolution]", key);
}

static int set_fitness(struct config *c, const char *key, const char *v)
{
    int f;

    if (strcmp(key, "metric") != 0)
        return cfg_err(c, "unknown key '%s' in [fitness] (metric)", key);
    f = symreg_fitness_from_name(v);
    if (f < 0)
        return cfg_err(c, "unknown fitness metric '%s' (mape, mse, rmse)", v);
    c->p.fitness = f;
    return 0;
}

static int set_constants(struct config *c, const char *key, const char *v)
{
    size_t n = 0;
    int r;

    if (!strcmp(key, "lm"))
        return parse_bool(c, key, v, &c->p.lm);
    if (!strcmp(key, "lm_iterations")) {
        r = parse_size(c, key, v, 0, &n);
        c->p.lm_iterations = n > 100000 ? 100000 : (int)n;
        return r;
    }
    return cfg_err(c, "unknown key '%s' in [constants] (lm, lm_iterations)", key);
}

static int on_ini(void *user, const char *section, const char *key, const char *value)
{
    static const struct {
        const char *name;
        int (*set)(struct config *, const char *, const char *);
    } sections[] = {{"data", set_data},
                    {"primitives", set_primitives},
                    {"evolution", set_evolution},
                    {"fitness", set_fitness},
                    {"constants", set_constants}};
    struct config *c = user;

    for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
        if (!strcmp(section, sections[i].name))
            return sections[i].set(c, key, value) == 0;
    cfg_err(c, "unknown section [%s]", section);
    return 0;
}

/* fgets that counts lines, so the handler knows where it is: Debian's inih
 * is built without INI_HANDLER_LINENO. */
struct line_reader {
    FILE *f;
    struct config *c;
};

static char *read_line(char *str, int num, void *stream)
{
    struct line_reader *lr = stream;
    char *s = fgets(str, num, lr->f);

    if (s)
        lr->c->line++;
    return s;
}

static int config_read(struct config *c)
{
    FILE *f = fopen(c->path, "r");
    char *copy = strdup(c->path);
    int r;

    if (!f || !copy) {
        snprintf(c->err, sizeof(c->err), "%s: cannot read: %s", c->path, strerror(errno));
        if (f)
            fclose(f);
        free(copy);
        return -errno;
    }
    c->dir = strdup(dirname(copy));
    free(copy);
    symreg_params_default(&c->p);
    struct line_reader lr = {f, c};
    r = ini_parse_stream(read_line, &lr, on_ini, c);
    fclose(f);
    if (r > 0 && !c->err[0])
        snprintf(c->err, sizeof(c->err), "%s:%d: syntax error", c->path, r);
    if (r != 0)
        return -EINVAL;
    const char *missing = !c->train      ? "train"
                          : !c->target   ? "target"
                          : !c->features ? "features"
                                         : NULL;
    if (missing) {
        snprintf(c->err, sizeof(c->err), "%s: [data] needs '%s'", c->path, missing);
        return -EINVAL;
    }
    char msg[UTIL_ERRLEN - 64];
    r = symreg_params_check(&c->p, msg, sizeof(msg));
    if (r < 0)
        snprintf(c->err, sizeof(c->err), "%s: %s", c->path, msg);
    return r;
}

static void config_free(struct config *c)
{
    free(c->dir);
    free(c->train);
    free(c->test);
    free(c->target);
    util_strv_free(c->features, c->n_features);
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

    fprintf(stderr, "\rgeneration %zu/%zu  best %s %-10.4g  %.0f evaluations/s\033[K",
            pr->generation, c->p.generations, symreg_fitness_name(c->p.fitness), pr->best_error,
            pr->seconds > 0 ? (double)pr->evaluations / pr->seconds : 0);
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
    const symreg_result *res;
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
        json_object_object_add(o, "equation", json_object_new_string(text ? text : ""));
        json_object_array_add(a, o);
        free(text);
    }
    return a;
}

static void print_json(const struct report *rp)
{
    const symreg_result *res = rp->res;
    json_object *o = json_object_new_object();

    json_object_object_add(o, "equation", json_object_new_string(rp->equation));
    json_object_object_add(o, "size", json_object_new_int64((int64_t)expr_size(res->best)));
    json_object_object_add(o, "depth", json_object_new_int64((int64_t)expr_depth(res->best)));
    json_object_object_add(o, "features", json_strings(rp->c->features, rp->c->n_features));
    json_object_object_add(o, "target", json_object_new_string(rp->c->target));
    json_object_object_add(o, "fitness",
                           json_object_new_string(symreg_fitness_name(rp->c->p.fitness)));
    json_object_object_add(o, "train", json_errors(&rp->train));
    json_object_object_add(o, "test", rp->has_test ? json_errors(&rp->test) : NULL);
    json_object_object_add(o, "generations", json_object_new_int64((int64_t)res->generations));
    json_object_object_add(o, "evaluations", json_object_new_int64((int64_t)res->evaluations));
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
    printf("size:        %zu nodes, depth %zu\n", expr_size(res->best), expr_depth(res->best));
    printf("train:       %s %.6g (mape %.4g %%, rmse %.6g, r2 %.6f)\n", fit, rp->train.fit,
           100 * rp->train.m.mape, rp->train.m.rmse, rp->train.m.r2);
    if (rp->has_test && rp->test.ok)
        printf("test:        %s %.6g (mape %.4g %%, rmse %.6g, r2 %.6f)\n", fit, rp->test.fit,
               100 * rp->test.m.mape, rp->test.m.rmse, rp->test.m.r2);
    else if (rp->has_test)
        printf("test:        not finite on the test data\n");
    printf("generations: %zu\n", res->generations);
    printf("evaluations: %llu (%.0f/s)\n", (unsigned long long)res->evaluations,
           (double)res->evaluations / res->seconds);
    printf("time:        %.3f s\n", res->seconds);
    if (!rp->o->front)
        return;
    printf("\nPareto front (%s against size):\n", fit);
    for (size_t i = 0; i < res->n_front; i++) {
        char *text = expr_print(res->front[i].e, (const char *const *)rp->c->features);
        printf("  %4zu  %-12.6g %s\n", res->front[i].size, res->front[i].error, text ? text : "");
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

static int report(const struct config *c, const struct options *o, const struct data *d,
                  const symreg_result *res)
{
    struct report rp = {.c = c, .o = o, .res = res, .has_test = d->test != NULL};

    rp.equation = expr_print(res->best, (const char *const *)c->features);
    if (!rp.equation)
        return -ENOMEM;
    errors_of(res->best, c, d->train, &rp.train);
    if (d->test)
        errors_of(res->best, c, d->test, &rp.test);
    if (o->json)
        print_json(&rp);
    else
        print_text(&rp);
    int r = o->out ? write_model(&rp, o->out) : 0;
    free(rp.equation);
    return r;
}

static int run(struct config *c, const struct options *o, const struct data *d)
{
    const double *cols[c->n_features];
    symreg_result *res;
    bool tty = !o->json && isatty(STDERR_FILENO);
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
    symreg_result_free(res);
    return r;
}

static int parse_options(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},          {"seed", required_argument, NULL, 's'},
        {"threads", required_argument, NULL, 't'}, {"front", no_argument, NULL, 'f'},
        {"out", required_argument, NULL, 'o'},     {"data", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    long v;
    int ch;

    *o = (struct options){.threads = (int)sysconf(_SC_NPROCESSORS_ONLN)};
    optind = 1;
    opterr = 0; /* our own one-line messages */
    while ((ch = getopt_long(argc, argv, "js:t:fo:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'j':
            o->json = true;
            break;
        case 'f':
            o->front = true;
            break;
        case 'o':
            o->out = optarg;
            break;
        case 'd':
            o->data = optarg;
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
        case 'h':
            usage(stdout);
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
    r = config_read(&c);
    if (o.has_seed)
        c.p.seed = o.seed;
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
    config_free(&c);
    return r < 0 ? 1 : 0;
}
