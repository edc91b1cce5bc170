/* expr: the expression language of wattprof's equation models.
 *
 * Contract. An expression is an equation over numbered features: numbers,
 * feature names, + - * /, unary minus, and the functions square, cube,
 * sqrt, log, exp, sin, cos, max(a,b) and min(a,b). Text parses into a tree
 * (expr_parse) and prints back as text that parses to the same values
 * (expr_print); a tree evaluates on columns of feature values (expr_eval).
 * Every numeric literal is a constant that an engine may change
 * (expr_get_consts / expr_set_consts, with derivatives from expr_eval_jac).
 * Evaluation is protected, so every tree has a value everywhere: x/0 = 1,
 * log|x| (log 0 = 0), sqrt|x|, exp's argument clamped at 700; a non-finite
 * result makes evaluation report failure instead of spreading NaN.
 *
 * Who uses it: lib/model applies stored equation models with it (the
 * daemon links this library and not the trainers); lib/learn's symbolic
 * regression and the GP's mean build, edit and fit trees with it (the node
 * layout those engines edit in place is expr-internal.h, not part of this
 * contract). Nothing here allocates global state; a tree is used by one
 * thread at a time, distinct trees by any number. Functions returning int
 * give 0 or a negative errno. */
#ifndef WATTPROF_EXPR_H
#define WATTPROF_EXPR_H

#include <stdbool.h>
#include <stddef.h>

typedef struct expr expr;

/* Parses `text`; identifiers must be among vars[0..n_vars). Errors name
 * the column: "expression:1:7: unknown feature 'foo'". */
int expr_parse(const char *text, const char *const *vars, size_t n_vars, expr **out, char *err,
               size_t errlen);
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
bool expr_eval_jac(const expr *e, const double *const *cols, size_t n, double *out, double *jac);

/* The operators of an expression, for engines that build trees (symbolic
 * regression, the GP's mean). Binary: add sub mul div max min; unary: neg
 * square cube sqrt log exp sin cos; leaves: const var. */
enum expr_op {
    EXPR_CONST,
    EXPR_VAR,
    EXPR_ADD,
    EXPR_SUB,
    EXPR_MUL,
    EXPR_DIV,
    EXPR_MAX,
    EXPR_MIN,
    EXPR_NEG,
    EXPR_SQUARE,
    EXPR_CUBE,
    EXPR_SQRT,
    EXPR_LOG,
    EXPR_EXP,
    EXPR_SIN,
    EXPR_COS,
    EXPR_N_OPS
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
/* The expanded form of a polynomial (constants, features, + - *, unary
 * minus, square, cube, division by a nonzero constant): a sum of monomials,
 * highest degree first, each with one coefficient (left out when it is 1).
 * *out is NULL when e is not such a polynomial, has a feature past the
 * eighth or a power over 12, or needs more than max_terms monomials. */
int expr_expand_poly(const expr *e, size_t max_terms, expr **out);
/* Number of variable indices the expression uses: 1 + the largest, 0 when
 * it has no variable. Callers check it against their column count. */
size_t expr_n_vars(const expr *e);
/* Protected value of `op` at scalar arguments (b unused for unary ops). */
double expr_op_apply(enum expr_op op, double a, double b);

#endif
