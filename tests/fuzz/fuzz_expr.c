/* fuzz_expr: the expression parser shared by symbolic regression and the
 * GP mean function (lib/expr/expr-parse.c).  An expression that parses is
 * also printed, cloned and evaluated with its derivatives at a few points,
 * and its printed form must parse again. */
#include "fuzz-file.h"
#include "expr/expr.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const vars[] = {"x", "y", "cpu_cycles"};
#define N_VARS (sizeof(vars) / sizeof(vars[0]))
#define N_POINTS 3

static void evaluate(const expr *e)
{
    static const double x[N_POINTS] = {0, 1.5, -2}, y[N_POINTS] = {3, 0, 1e6},
                        cycles[N_POINTS] = {1e9, 0, 7};
    const double *cols[N_VARS] = {x, y, cycles};
    size_t k = expr_n_consts(e);
    double out[N_POINTS], *jac = malloc((k ? k : 1) * N_POINTS * sizeof(double));

    expr_eval(e, cols, N_POINTS, out);
    if (jac)
        expr_eval_jac(e, cols, N_POINTS, out, jac);
    free(jac);
}

/* What expr_print writes is an expression that parses again. */
static void reprint(const expr *e)
{
    char err[512], *text = expr_print(e, vars);
    expr *again = NULL;

    if (!text)
        return;
    if (expr_parse(text, vars, N_VARS, &again, err, sizeof(err)) < 0) {
        fprintf(stderr, "printed form does not parse: %s: %s\n", text, err);
        abort();
    }
    expr_free(again);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512], *text = fuzz_string(data, size);
    expr *e = NULL, *copy;

    if (!text)
        return 0;
    if (expr_parse(text, vars, N_VARS, &e, err, sizeof(err)) == 0) {
        expr_size(e);
        expr_depth(e);
        evaluate(e);
        copy = expr_clone(e);
        if (copy)
            reprint(copy);
        expr_free(copy);
        expr_free(e);
    }
    free(text);
    return 0;
}
