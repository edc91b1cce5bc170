/* symreg-params: the parameters of symbolic regression (defaults, presets,
 * checks), the fitness names and the error measures. */
#include "learn/symreg-internal.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* The first epoch gets 2^-restarts of the budget: more restarts would leave
 * it no generation. */
#define SYMREG_MAX_RESTARTS 30

void symreg_params_default(symreg_params *p)
{
    *p = (symreg_params){
        .ops = 1u << EXPR_ADD | 1u << EXPR_SUB | 1u << EXPR_MUL | 1u << EXPR_DIV,
        .constants = true,
        .population = 300,
        .generations = 150,
        .crossover = 1.0,
        .mutation = 0.5,
        .selection = SYMREG_SEL_DOUBLE,
        .tie = SYMREG_TIE_BIC,
        .tournament_fitness = 3,
        .tournament_parsimony = 1.1,
        .max_depth = 17,
        .max_size = 60,
        .init_min_depth = 1,
        .init_max_depth = 3,
        .simplify = true,
        .scaling = false,
        .migration = true,
        .restarts = 2,
        .stall = 0,
        .fitness = SYMREG_MAPE,
        .lm = true,
        .lm_iterations = 10,
        .cache = true,
        .seed = 1,
        .threads = 1,
    };
}

int symreg_params_preset(symreg_params *p, const char *name)
{
    symreg_params d;

    symreg_params_default(&d);
    if (strcmp(name, "pandora") == 0) {
        d.selection = SYMREG_SEL_DOUBLE;
        d.simplify = false;
        d.migration = false;
        d.restarts = 0;
        d.tie = SYMREG_TIE_EXACT;
    } else if (strcmp(name, "default") != 0) {
        return -EINVAL;
    }
    d.ops = p->ops;
    d.constants = p->constants;
    d.fitness = p->fitness;
    d.lm = p->lm;
    d.lm_iterations = p->lm_iterations;
    d.cache = p->cache;
    d.seed = p->seed;
    d.threads = p->threads;
    *p = d;
    return 0;
}

int symreg_params_check(const symreg_params *p, char *err, size_t errlen)
{
    uint32_t binary = 1u << EXPR_ADD | 1u << EXPR_SUB | 1u << EXPR_MUL | 1u << EXPR_DIV |
                      1u << EXPR_MAX | 1u << EXPR_MIN;

    if (!(p->ops & binary))
        return util_err(err, errlen, -EINVAL,
                        "primitives: at least one two-argument primitive "
                        "(add, sub, mul, div) is needed");
    if (p->ops & (1u << EXPR_CONST | 1u << EXPR_VAR) || p->ops >> EXPR_N_OPS)
        return util_err(err, errlen, -EINVAL, "primitives: only operators may be listed");
    if (p->population < 2)
        return util_err(err, errlen, -EINVAL, "population must be at least 2");
    if (!(p->crossover >= 0 && p->crossover <= 1))
        return util_err(err, errlen, -EINVAL, "crossover must be in [0, 1], not %g", p->crossover);
    if (!(p->mutation >= 0 && p->mutation <= 1))
        return util_err(err, errlen, -EINVAL, "mutation must be in [0, 1], not %g", p->mutation);
    if (p->tournament_fitness < 1)
        return util_err(err, errlen, -EINVAL, "tournament_fitness must be at least 1");
    if (!(p->tournament_parsimony >= 1 && p->tournament_parsimony <= 2))
        return util_err(err, errlen, -EINVAL, "tournament_parsimony must be in [1, 2], not %g",
                        p->tournament_parsimony);
    if (p->init_min_depth > p->init_max_depth || p->init_max_depth > p->max_depth)
        return util_err(err, errlen, -EINVAL,
                        "need init_min_depth <= init_max_depth <= max_depth (%zu, %zu, %zu)",
                        p->init_min_depth, p->init_max_depth, p->max_depth);
    if (p->max_size < 1)
        return util_err(err, errlen, -EINVAL, "max_size must be at least 1");
    if (p->selection > SYMREG_SEL_PARETO)
        return util_err(err, errlen, -EINVAL, "unknown selection %d", (int)p->selection);
    if (p->tie > SYMREG_TIE_BIC)
        return util_err(err, errlen, -EINVAL, "unknown tie %d", (int)p->tie);
    if (!(p->time_limit >= 0))
        return util_err(err, errlen, -EINVAL, "time_limit must not be negative, not %g",
                        p->time_limit);
    if (p->fitness > SYMREG_RMSE)
        return util_err(err, errlen, -EINVAL, "unknown fitness %d", (int)p->fitness);
    if (p->lm_iterations < 0)
        return util_err(err, errlen, -EINVAL, "lm_iterations must not be negative");
    if (p->restarts > SYMREG_MAX_RESTARTS)
        return util_err(err, errlen, -EINVAL, "restarts must be at most %d", SYMREG_MAX_RESTARTS);
    if (p->threads < 1)
        return util_err(err, errlen, -EINVAL, "threads must be at least 1");
    return 0;
}

static const char *const fitness_names[] = {"mape", "mse", "rmse"};

const char *symreg_fitness_name(enum symreg_fitness f)
{
    return f <= SYMREG_RMSE ? fitness_names[f] : "?";
}

int symreg_fitness_from_name(const char *name)
{
    for (int f = 0; f <= SYMREG_RMSE; f++)
        if (strcmp(fitness_names[f], name) == 0)
            return f;
    return -EINVAL;
}

static const char *const stop_names[] = {"generations", "stall", "time"};

const char *symreg_stop_name(enum symreg_stop s)
{
    return s <= SYMREG_STOP_TIME ? stop_names[s] : "?";
}

double symreg_error_floor(enum symreg_fitness f, const double *y, size_t n)
{
    double s = 0;

    if (f == SYMREG_MAPE)
        return 1e-10;
    for (size_t i = 0; i < n; i++)
        s += y[i] * y[i];
    s = n ? 1e-10 * sqrt(s / (double)n) : 0;
    return f == SYMREG_MSE ? s * s : s;
}

double symreg_error(enum symreg_fitness f, const double *y, const double *p, size_t n)
{
    double s = 0;

    for (size_t i = 0; i < n; i++) {
        double d = p[i] - y[i];
        s += f == SYMREG_MAPE ? fabs(d / y[i]) : d * d;
    }
    s /= (double)n;
    if (f == SYMREG_RMSE)
        s = sqrt(s);
    return isfinite(s) ? s : INFINITY;
}
