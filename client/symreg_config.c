/* symreg_config: the INI configuration of `wattprof symreg`, in the
 * paper's layout ([data], [primitives], [evolution], [fitness],
 * [constants]) plus [selection]; every error names FILE:LINE. */
#include "symreg_cli.h"

#include <errno.h>
#include <ini.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
                        "sqrt, log, exp, sin, cos)",
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

    if (!strcmp(key, "preset")) {
        if (symreg_params_preset(p, v) < 0)
            return cfg_err(c, "unknown preset '%s' (default, pandora)", v);
        return 0;
    }
    if (!strcmp(key, "selection")) {
        if (!strcmp(v, "double"))
            p->selection = SYMREG_SEL_DOUBLE;
        else if (!strcmp(v, "pareto"))
            p->selection = SYMREG_SEL_PARETO;
        else
            return cfg_err(c, "selection must be double or pareto, not '%s'", v);
        return 0;
    }
    if (!strcmp(key, "tie")) {
        if (!strcmp(v, "bic"))
            p->tie = SYMREG_TIE_BIC;
        else if (!strcmp(v, "exact"))
            p->tie = SYMREG_TIE_EXACT;
        else
            return cfg_err(c, "tie must be bic or exact, not '%s'", v);
        return 0;
    }
    if (!strcmp(key, "simplify"))
        return parse_bool(c, key, v, &p->simplify);
    if (!strcmp(key, "scaling"))
        return parse_bool(c, key, v, &p->scaling);
    if (!strcmp(key, "migration"))
        return parse_bool(c, key, v, &p->migration);
    if (!strcmp(key, "time_limit"))
        return parse_range(c, key, v, 0, 1e9, &p->time_limit);
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
    if (!strcmp(key, "restarts"))
        return parse_size(c, key, v, 0, &p->restarts);
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
    if (!strcmp(key, "cache"))
        return parse_bool(c, key, v, &c->p.cache);
    if (!strcmp(key, "lm_iterations")) {
        r = parse_size(c, key, v, 0, &n);
        c->p.lm_iterations = n > 100000 ? 100000 : (int)n;
        return r;
    }
    return cfg_err(c, "unknown key '%s' in [constants] (lm, lm_iterations, cache)", key);
}

static int set_selection(struct config *c, const char *key, const char *v)
{
    int r;

    if (strcmp(key, "rule") != 0)
        return cfg_err(c, "unknown key '%s' in [selection] (rule)", key);
    r = symreg_rule_from_name(v);
    if (r < 0)
        return cfg_err(c, "unknown selection rule '%s' (bic, cv, score, accurate)", v);
    c->rule = r;
    return 0;
}

static int on_ini(void *user, const char *section, const char *key, const char *value)
{
    static const struct {
        const char *name;
        int (*set)(struct config *, const char *, const char *);
    } sections[] = {{"data", set_data},           {"primitives", set_primitives},
                    {"evolution", set_evolution}, {"fitness", set_fitness},
                    {"constants", set_constants}, {"selection", set_selection}};
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

int symreg_config_read(struct config *c)
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

void symreg_config_free(struct config *c)
{
    free(c->dir);
    free(c->train);
    free(c->test);
    free(c->target);
    util_strv_free(c->features, c->n_features);
}
