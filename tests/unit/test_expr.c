/* Unit tests for expr/expr.c (and learn/expr-fit.c): parsing and its errors, printing with
 * simplification, protected evaluation, derivatives with respect to the
 * constants, and Levenberg-Marquardt on the constants. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "learn/learn.h"
#include "util/util.h"

#include <errno.h>
#include <gsl/gsl_errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const vars[] = {"x", "m", "L1-dcache-loads"};

static expr *parse_ok(const char *text)
{
    expr *e = NULL;
    char err[UTIL_ERRLEN] = "";

    if (expr_parse(text, vars, 3, &e, err, sizeof(err)) < 0)
        fail_msg("parsing '%s': %s", text, err);
    return e;
}

static void check_print(const char *text, const char *want)
{
    expr *e = parse_ok(text);
    char *got = expr_print(e, vars);

    if (strcmp(got, want) != 0)
        fail_msg("'%s' printed as '%s', want '%s'", text, got, want);
    /* What is printed reads back to the same expression. */
    expr *again = parse_ok(got);
    char *got2 = expr_print(again, vars);
    assert_string_equal(got2, got);
    free(got);
    free(got2);
    expr_free(e);
    expr_free(again);
}

static void test_print_round_trip(void **state)
{
    check_print("x", "x");
    check_print("3*cube(x) + 2*x*m + 5", "3 * cube(x) + 2 * x * m + 5");
    check_print("x - (m - 1)", "x - m + 1"); /* constants move out of sums */
    check_print("(x - m) - 1", "x - m - 1");
    /* Regrouping (expr-collect.c): constants meet, like terms combine. */
    check_print("(x + 1) + (m + 2)", "x + m + 3");
    check_print("2 * x + 3 * x", "5 * x");
    check_print("x - 0.25 * x", "0.75 * x");
    check_print("x * (2 * m) * 3", "6 * x * m");
    check_print("x / 4", "0.25 * x");
    check_print("(2 * x) / m", "2 * x / m"); /* not c * (x / m): x / 0 is 1 */
    check_print("x / (m * x)", "x / (m * x)");
    check_print("(x / m) * x", "x / m * x");
    check_print("-x * m", "-x * m");
    check_print("-(x * m)", "-(x * m)");
    check_print("x * -2.5", "-2.5 * x");
    check_print("max(x, min(m, 0.1)) + sqrt(log(exp(square(x))))",
                "max(x, min(m, 0.1)) + sqrt(log(exp(square(x))))");
    check_print("\"L1-dcache-loads\" * 1e-9", "1e-09 * \"L1-dcache-loads\"");
    check_print("0.1 + x", "x + 0.1");
    check_print("1.0000000000000002 * x", "1.0000000000000002 * x");
    /* Whole numbers keep their digits: "80", not "8e+01". */
    check_print("80 * x + 100", "80 * x + 100");
    check_print("x * 123456789012", "123456789012 * x");
    check_print("x * 1e12", "1e+12 * x");
    check_print("20.000000000000078 * x - 1250.5", "20.000000000000078 * x - 1250.5");
}

static void test_simplification(void **state)
{
    check_print("x + 0", "x");
    check_print("0 + x", "x");
    check_print("x * 1", "x");
    check_print("x * 0 + m", "m");
    check_print("2 * (3 * x)", "6 * x");
    check_print("x - x", "0");
    check_print("x / x", "1");
    check_print("(x + 1) + 2", "x + 3");
    check_print("(x - 1) - 2", "x - 3");
    check_print("x + -2", "x - 2");
    check_print("-(-x)", "x");
    check_print("x + x", "2 * x");
    check_print("x * x", "square(x)");
    check_print("square(3) + 1 / 4 + log(0)", "9.25");
    check_print("-1 * x", "-x");
    check_print("2 * -(3 * m)", "-6 * m");
    check_print("x + -2 * m", "x - 2 * m");
    check_print("x - -2 * m", "x + 2 * m");
    check_print("x + -m", "x - m");
    check_print("x - -m", "x + m");
    check_print("-x + square(m)", "square(m) - x");
    check_print("-x + x + 2", "2");
    check_print("cos(-x) * square(-m)", "cos(x) * square(m)");
    check_print("log(-x) + sqrt(-m)", "log(x) + sqrt(m)");
    check_print("m - sin(-x)", "m + sin(x)");
    check_print("cube(-x) + m", "m - cube(x)");
}

/* Checks that `text` prints as `want` and that both have the same value at
 * points that include the zeros of protected divisions. */
static void check_same_values(const char *text, const char *want)
{
    double x[] = {0, 0, -4, 2, 0.5, 1000}, m[] = {0, 3, 0, -2, 1, 7}, a[6], b[6];
    const double *cols[] = {x, m, x};
    expr *e = parse_ok(text), *s = expr_simplify(e);
    char *got = expr_print(s, vars);

    if (strcmp(got, want) != 0)
        fail_msg("'%s' simplified to '%s', want '%s'", text, got, want);
    assert_true(expr_eval(e, cols, 6, a));
    assert_true(expr_eval(s, cols, 6, b));
    for (size_t i = 0; i < 6; i++)
        if (fabs(a[i] - b[i]) > 1e-12 * (1 + fabs(a[i])))
            fail_msg("'%s' is %g at point %zu, simplified '%s' is %g", text, a[i], i, got, b[i]);
    free(got);
    expr_free(s);
    expr_free(e);
}

/* Constants split across a division meet: each rule keeps the value with
 * x / 0 = 1, and the splits that would change it are left alone. */
static void test_constant_division(void **state)
{
    /* c1 / (c2 * X) -> (c1/c2) / X: both are 1 where X = 0. */
    check_same_values("0.036 / (0.0045 * (square(x) + square(m) + 2))",
                      "8 / (square(x) + square(m) + 2)");
    check_same_values("3 / (2 * x)", "1.5 / x");
    check_same_values("3 / (x * -2)", "-1.5 / x");
    check_same_values("6 / (2 * (3 * (x + m)))", "1 / (x + m)");
    check_same_values("2 / -(x * m)", "-2 / (x * m)"); /* c / -X -> (-c) / X */
    /* (c1 * X) / c2 -> (c1/c2) * X and c1 * (c2 * X) -> (c1*c2) * X. */
    check_same_values("(3 * x) / 2", "1.5 * x");
    check_same_values("(x * 3) / (2 * 4)", "0.375 * x");
    check_same_values("3 * (x * 2)", "6 * x");
    /* Refused: each differs where the divisor is 0. */
    check_same_values("x / (2 * m)", "x / (2 * m)");                    /* not 0.5 * (x / m) */
    check_same_values("2 * (3 / x)", "2 * (3 / x)");                    /* not 6 / x */
    check_same_values("1e-300 / (1e300 * x)", "1e-300 / (1e+300 * x)"); /* c1/c2 underflows */
}

/* Constants spread over the terms of a divisor and its numerator: all are
 * divided by the divisor's first coefficient, which keeps the value where
 * the divisor is 0 (both sides are 1 there: the points include m = -2,
 * m = 0 and x = 0). */
static void test_divisor_constants(void **state)
{
    check_same_values("(3 * x + 6) / (2 * m + 4)", "(1.5 * x + 3) / (m + 2)");
    check_same_values("(2 * x) / (4 * m)", "0.5 * x / m");
    check_same_values("(0.35 * x) / (0.5 * m + 0.5)", "0.7 * x / (m + 1)");
    check_same_values("(6 * x - 2) / (4 - 2 * m)", "(3 * x - 1) / (2 - m)");
    check_same_values("(0.4 * x + 0.2 * m) / (0.1 * m + 0.2 * x + 0.1)",
                      "(4 * x + 2 * m) / (m + 2 * x + 1)");
    /* Refused: a numerator term without a constant would need one (two more
     * nodes), and so would a divisor term; a constant outside the division
     * differs from its moved value where the divisor is 0; a scaled
     * constant that underflows changes the value. */
    check_same_values("(x + 1) / (2 * m + 4)", "(x + 1) / (2 * m + 4)");
    check_same_values("3 / (2 * m + x)", "3 / (2 * m + x)");
    check_same_values("3 * (x / (2 * m + 4))", "3 * (x / (2 * m + 4))");
    check_same_values("(1e-300 * x) / (1e300 * m + 1)", "1e-300 * x / (1e+300 * m + 1)");
}

/* A constant times a sum whose terms each have a constant goes into them. */
static void test_distribute_constant(void **state)
{
    check_same_values("2.5 * (0.5 * x + 0.5)", "1.25 * x + 1.25");
    check_same_values("2 * (3 - 0.5 * x)", "6 - x");
    check_same_values("3 / (2 * (0.5 * m + 1))", "3 / (m + 2)");
    /* Refused: a term without a constant, and a product that underflows. */
    check_same_values("2 * (x + 1)", "2 * (x + 1)");
    check_same_values("1e-300 * (1e-100 * x + 1)", "1e-300 * (1e-100 * x + 1)");
}

/* Found by tests/fuzz/fuzz_expr: folding constants whose result overflows
 * printed "inf", which does not parse back.  Such folds are left undone. */
static void test_no_infinite_folds(void **state)
{
    check_print("1e308 * 10", "1e+308 * 10");
    check_print("square(1e200)", "square(1e+200)");
    check_print("(x + 1e308) + 1e308", "x + 1e+308 + 1e+308");
    check_print("1e308 * (10 * x)", "1e+308 * (10 * x)");
    check_print("2 * (3 * x) + 1e308 * 10", "6 * x + 1e+308 * 10");
}

static void check_error(const char *text, const char *want)
{
    expr *e = NULL;
    char err[UTIL_ERRLEN] = "";

    assert_int_equal(expr_parse(text, vars, 3, &e, err, sizeof(err)), -EINVAL);
    assert_null(e);
    assert_string_equal(err, want);
}

static void test_parse_errors(void **state)
{
    check_error("x + 2*foo", "expression:1:7: unknown feature 'foo'");
    check_error("x +\n  bar(x)", "expression:2:3: unknown function 'bar'");
    check_error("(x + m", "expression:1:1: '(' is never closed");
    check_error("x + m)", "expression:1:6: unexpected ')'");
    check_error("x +", "expression:1:4: unexpected end of expression");
    check_error("", "expression:1:1: unexpected end of expression");
    check_error("max(x)", "expression:1:1: 'max' takes two arguments");
    check_error("sqrt(x, m)", "expression:1:1: 'sqrt' takes one argument");
    check_error("max(x, m, 1)", "expression:1:11: too many arguments to 'max'");
    check_error("2x", "expression:1:2: unexpected 'x' after a number");
    check_error("\"x", "expression:1:1: unterminated quoted name");
    check_error("x # m", "expression:1:3: unexpected '#'");
    check_error("add(x, m)", "expression:1:1: unknown function 'add'");

    char deep[2001];
    memset(deep, '(', 2000);
    deep[2000] = 0;
    expr *e = NULL;
    char err[UTIL_ERRLEN];
    assert_int_equal(expr_parse(deep, vars, 3, &e, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "nested too deeply"));
}

/* "x*7/x*7/..." repeated n times: no parentheses, a tree n*2 deep. */
static char *flat_chain(size_t n)
{
    char *s = malloc(n * 8 + 2);

    assert_non_null(s);
    s[0] = 'x';
    s[1] = '\0';
    for (size_t i = 0; i < n; i++)
        strcat(s, "*7/x");
    return s;
}

/* Found by tests/fuzz/fuzz_expr: a flat chain nests nothing, but its
 * simplified print moves each constant left and wraps the rest in
 * parentheses, "7 * (7 * (x / ...))", so a long chain printed deeper than
 * the parser takes.  The tree depth is now limited as the nesting is, and
 * what is accepted prints to something that parses again. */
static void test_flat_chains(void **state)
{
    char *ok = flat_chain(99), *deep = flat_chain(100), err[UTIL_ERRLEN];
    expr *e = parse_ok(ok), *again = NULL;
    char *printed = expr_print(e, vars);

    assert_int_equal(expr_depth(e), 198);
    assert_non_null(strstr(printed, "7 * (7 * ("));
    assert_int_equal(expr_parse(printed, vars, 3, &again, err, sizeof(err)), 0);
    expr_free(again);
    expr_free(e);
    e = NULL;
    assert_int_equal(expr_parse(deep, vars, 3, &e, err, sizeof(err)), -EINVAL);
    assert_null(e);
    assert_string_equal(err, "expression:1:1: expression is 200 operations deep (at most 199)");
    free(printed);
    free(ok);
    free(deep);
}

/* Polynomials expand into monomials, highest degree first; anything else,
 * or a polynomial past the term limit, is refused. */
static void test_expand_poly(void **state)
{
    static const char *const cases[][2] = {
        {"0.25 * (6 * x * m * x + 16)", "1.5 * square(x) * m + 4"},
        {"x * (x + 1) * (square(x) + 1)", "square(square(x)) + cube(x) + square(x) + x"},
        {"(x - m) * (x + m) / 2", "0.5 * square(x) - 0.5 * square(m)"},
        {"-(x * x) + 3", "3 - square(x)"},
        {"cube(x + 1) - 3 * x * (x + 1) - 1", "cube(x)"},
        {"x * square(square(x)) + cube(square(x))", "square(cube(x)) + x * square(square(x))"},
        {"x - x", "0"},
    };
    static const char *const refused[] = {"x / m", "log(x) + 1", "x / (1 - 1)", "sqrt(x)"};
    expr *p;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        expr *e = parse_ok(cases[i][0]);
        assert_int_equal(expr_expand_poly(e, 32, &p), 0);
        assert_non_null(p);
        char *got = expr_print(p, vars);
        assert_string_equal(got, cases[i][1]);
        free(got);
        expr_free(p);
        expr_free(e);
    }
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        expr *e = parse_ok(refused[i]);
        assert_int_equal(expr_expand_poly(e, 32, &p), 0);
        assert_null(p);
        expr_free(e);
    }
    expr *e = parse_ok("cube(x + m + 1)"); /* ten monomials */
    assert_int_equal(expr_expand_poly(e, 9, &p), 0);
    assert_null(p);
    assert_int_equal(expr_expand_poly(e, 10, &p), 0);
    assert_non_null(p);
    expr_free(p);
    expr_free(e);
}

static void test_protected_ops(void **state)
{
    double x[] = {0, -4, 2, 1000}, out[4];
    const double *cols[] = {x, x, x};
    expr *e;

    e = parse_ok("1 / x");
    assert_true(expr_eval(e, cols, 4, out));
    assert_float_equal(out[0], 1, 0); /* x/0 = 1 */
    assert_float_equal(out[1], -0.25, 0);
    expr_free(e);

    e = parse_ok("log(x)");
    assert_true(expr_eval(e, cols, 4, out));
    assert_float_equal(out[0], 0, 0);
    assert_float_equal(out[1], log(4), 1e-15);
    expr_free(e);

    e = parse_ok("sqrt(x)");
    assert_true(expr_eval(e, cols, 4, out));
    assert_float_equal(out[1], 2, 0);
    expr_free(e);

    e = parse_ok("exp(x)"); /* exp(1000) is clamped to exp(700): finite */
    assert_true(expr_eval(e, cols, 4, out));
    assert_float_equal(out[3], exp(700), 0);
    expr_free(e);

    e = parse_ok("exp(x) * exp(x)"); /* overflows: evaluation fails */
    assert_false(expr_eval(e, cols, 4, out));
    expr_free(e);

    assert_float_equal(expr_op_apply(EXPR_DIV, 3, 0), 1, 0);
    assert_float_equal(expr_op_apply(EXPR_MAX, 3, 7), 7, 0);
}

static void test_eval_matches_c(void **state)
{
    enum { N = 1000 }; /* several blocks and a partial one */
    static double x[N], m[N], out[N];
    const double *cols[] = {x, m, x};
    expr *e = parse_ok("3*cube(x) + 2*x*m - 5 / (m + 0.5) + max(x, m) * sqrt(m)");

    for (int i = 0; i < N; i++)
        x[i] = 0.01 * i - 3, m[i] = 0.002 * i;
    assert_true(expr_eval(e, cols, N, out));
    for (int i = 0; i < N; i++) {
        double want = 3 * x[i] * x[i] * x[i] + 2 * x[i] * m[i] - 5 / (m[i] + 0.5) +
                      fmax(x[i], m[i]) * sqrt(m[i]);
        assert_float_equal(out[i], want, 1e-12 * (1 + fabs(want)));
    }
    expr_free(e);
}

static void test_shape_and_constants(void **state)
{
    expr *e = parse_ok("3*cube(x) + 2*x*m + 5");
    double c[3];

    assert_int_equal(expr_size(e), 12);
    assert_int_equal(expr_depth(e), 4);
    assert_int_equal(expr_n_consts(e), 3);
    assert_int_equal(expr_n_vars(e), 2);
    expr_get_consts(e, c);
    assert_float_equal(c[0], 3, 0);
    assert_float_equal(c[1], 2, 0);
    assert_float_equal(c[2], 5, 0);
    c[0] = 7;
    expr_set_consts(e, c);
    char *s = expr_print(e, vars);
    assert_string_equal(s, "7 * cube(x) + 2 * x * m + 5");
    free(s);
    expr_free(e);

    expr *leaf = expr_new_var(0);
    assert_int_equal(expr_depth(leaf), 0);
    e = expr_new_op(EXPR_ADD, expr_new_op(EXPR_SQUARE, leaf, NULL), expr_new_const(1.5));
    s = expr_print(e, vars);
    assert_string_equal(s, "square(x) + 1.5");
    free(s);
    assert_int_equal(expr_depth(e), 2);
    expr_free(e);
    assert_null(expr_new_op(EXPR_ADD, expr_new_var(0), NULL)); /* wrong arity */
    assert_int_equal(expr_op_from_name("cube"), EXPR_CUBE);
    assert_int_equal(expr_op_from_name("pow"), -EINVAL);
    assert_string_equal(expr_op_name(EXPR_SQRT), "sqrt");
}

static void test_jacobian_vs_finite_differences(void **state)
{
    enum { N = 200 };
    static double x[N], m[N], out[N], jac[8 * N], lo[N], hi[N];
    const double *cols[] = {x, m, x};
    expr *e = parse_ok("1.3*cube(x) + 0.7*x*m / (m + 2.1) + log(0.5 + square(m*0.9)) + "
                       "sqrt(x*x + 0.3) * exp(-0.2*m) - max(x, 0.4*m)");
    size_t p = expr_n_consts(e);
    double c[8];

    assert_int_equal(p, 8);
    for (int i = 0; i < N; i++)
        x[i] = 0.013 * i - 1.1, m[i] = 2.5 - 0.021 * i;
    assert_true(expr_eval_jac(e, cols, N, out, jac));
    expr_get_consts(e, c);
    for (size_t k = 0; k < p; k++) {
        double h = 1e-6 * (1 + fabs(c[k])), keep = c[k];
        c[k] = keep + h;
        expr_set_consts(e, c);
        assert_true(expr_eval(e, cols, N, hi));
        c[k] = keep - h;
        expr_set_consts(e, c);
        assert_true(expr_eval(e, cols, N, lo));
        c[k] = keep;
        expr_set_consts(e, c);
        for (int i = 0; i < N; i++) {
            double fd = (hi[i] - lo[i]) / (2 * h);
            if (fabs(fd - jac[k * N + i]) > 1e-6 * (1 + fabs(fd)))
                fail_msg("constant %zu point %d: jacobian %g, finite difference %g", k, i,
                         jac[k * N + i], fd);
        }
    }
    expr_free(e);
}

static void check_fit(const char *truth, const char *start, double tol)
{
    enum { N = 60 };
    double x[N], m[N], y[N], rss, want[8], got[8];
    const double *cols[] = {x, m, x};
    expr *t = parse_ok(truth), *e = parse_ok(start);
    size_t p = expr_n_consts(t);

    for (int i = 0; i < N; i++)
        x[i] = 1 + (i % 10), m[i] = 1 + (i / 10);
    assert_true(expr_eval(t, cols, N, y));
    assert_int_equal(expr_fit_consts(e, cols, y, N, 100, &rss), 0);
    expr_get_consts(t, want);
    expr_get_consts(e, got);
    for (size_t k = 0; k < p; k++)
        if (fabs(got[k] - want[k]) > tol * fabs(want[k]))
            fail_msg("%s from %s: constant %zu is %.17g, want %g", truth, start, k, got[k],
                     want[k]);
    assert_true(rss < 1e-12);
    expr_free(t);
    expr_free(e);
}

static void test_lm_recovers_constants(void **state)
{
    check_fit("3*cube(x) + 2*x*m + 5", "1*cube(x) + 1*x*m + 1", 1e-9);
    check_fit("2.5*exp(-0.7*x) + 1.25*m", "1*exp(-1*x) + 1*m", 1e-7);
    check_fit("x / (0.5 + 0.25*m)", "x / (1 + 1*m)", 1e-7);
}

static void test_lm_weights(void **state)
{
    /* One constant for two targets: unweighted least squares takes the
     * mean; weights 1/y minimise relative error and stay near the small one. */
    double x[2] = {0, 0}, y[2] = {1, 100}, w[2] = {1, 0.01}, rss, c[2];
    const double *cols[] = {x, x, x};
    expr *e = parse_ok("0.5 + 0 * x");

    assert_int_equal(expr_fit_consts(e, cols, y, 2, 50, &rss), 0);
    expr_get_consts(e, c);
    assert_float_equal(c[0], 50.5, 1e-9);
    assert_float_equal(rss, 2 * 49.5 * 49.5, 1e-6);
    expr_free(e);
    e = parse_ok("0.5");
    assert_int_equal(expr_fit_consts_weighted(e, cols, y, w, 2, 50, &rss), 0);
    expr_get_consts(e, c);
    assert_float_equal(c[0], 1.01 / 1.0001, 1e-12);
    expr_free(e);
}

static void test_lm_edge_cases(void **state)
{
    double x[2] = {1, 2}, y[2] = {4, 7}, rss, c[3];
    const double *cols[] = {x, x, x};
    expr *e = parse_ok("1*x + 1*m + 1"); /* three constants, two points: left alone */

    assert_int_equal(expr_fit_consts(e, cols, y, 2, 50, &rss), 0);
    assert_float_equal(rss, 1 + 4, 0);
    expr_get_consts(e, c);
    assert_true(c[0] == 1 && c[1] == 1 && c[2] == 1);
    expr_free(e);

    e = parse_ok("x"); /* no constants: rss of the expression as it is */
    assert_int_equal(expr_fit_consts(e, cols, y, 2, 50, &rss), 0);
    assert_float_equal(rss, 9 + 25, 0);
    expr_free(e);

    e = parse_ok("exp(1*x) * exp(1*x) * 1e300"); /* not finite anywhere */
    assert_int_equal(expr_fit_consts(e, cols, y, 2, 50, &rss), 0);
    assert_true(isinf(rss));
    expr_free(e);
}

/* The search's fit stops at its goal, and short of it fits as well as the
 * full one on an equation whose constants the data pin down. */
static void test_lm_search_stops(void **state)
{
    enum { N = 40 };
    double x[N], y[N], rss_full, rss_search, c[2];
    const double *cols[] = {x, x, x};
    expr *full = parse_ok("1 * sin(1 * x)"), *search = parse_ok("1 * sin(1 * x)");

    for (int i = 0; i < N; i++) {
        x[i] = 0.1 * i;
        y[i] = 2.5 * sin(0.7 * x[i]);
    }
    assert_int_equal(expr_fit_consts(full, cols, y, N, 50, &rss_full), 0);
    assert_int_equal(expr_fit_consts_search(search, cols, y, NULL, N, 50, 0, &rss_search), 0);
    assert_true(rss_full < 1e-20 && rss_search < 1e-20);
    expr_get_consts(search, c);
    assert_float_equal(c[0], 2.5, 1e-9);
    assert_float_equal(c[1], 0.7, 1e-9);
    expr_free(search);

    /* A goal met at the start: the constants stay as they were. */
    search = parse_ok("1 * sin(1 * x)");
    assert_int_equal(expr_fit_consts_search(search, cols, y, NULL, N, 50, 1e6, &rss_search), 0);
    expr_get_consts(search, c);
    assert_true(c[0] == 1 && c[1] == 1 && rss_search > 1);
    /* A goal met on the way: stops there, not at round-off. */
    assert_int_equal(expr_fit_consts_search(search, cols, y, NULL, N, 50, 1e-6, &rss_search), 0);
    assert_true(rss_search <= 1e-6 && rss_search > 1e-26);
    expr_free(search);
    expr_free(full);
}

int main(void)
{
    gsl_set_error_handler_off();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_print_round_trip),
        cmocka_unit_test(test_simplification),
        cmocka_unit_test(test_divisor_constants),
        cmocka_unit_test(test_distribute_constant),
        cmocka_unit_test(test_constant_division),
        cmocka_unit_test(test_no_infinite_folds),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_flat_chains),
        cmocka_unit_test(test_expand_poly),
        cmocka_unit_test(test_protected_ops),
        cmocka_unit_test(test_eval_matches_c),
        cmocka_unit_test(test_shape_and_constants),
        cmocka_unit_test(test_jacobian_vs_finite_differences),
        cmocka_unit_test(test_lm_recovers_constants),
        cmocka_unit_test(test_lm_weights),
        cmocka_unit_test(test_lm_edge_cases),
        cmocka_unit_test(test_lm_search_stops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
