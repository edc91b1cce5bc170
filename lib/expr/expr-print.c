/* expr-print: simplification (constant folding and a few algebraic
 * rewrites) and printing as readable infix text that parses back to the
 * same tree. */
#include "expr/expr-internal.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Simplification -----------------------------------------------------
 * Rewrites children first, then the node, appending to `d`; repeated until
 * nothing changes because one rewrite can enable another. Constants are put
 * last in sums and first in products, so that c1*(c2*x) and (x+c1)+c2 fold. */

static bool is_const(const expr *d, size_t i)
{
    return d->node[i].op == EXPR_CONST;
}

static bool is_const_value(const expr *d, size_t i, double v)
{
    return is_const(d, i) && d->node[i].c == v;
}

/* Keeps only nodes [from, to) of the subtree at s: the node at s is dropped
 * and the run moves down. */
static void keep_range(expr *d, size_t s, size_t from, size_t to)
{
    memmove(d->node + s, d->node + from, (to - from) * sizeof(*d->node));
    d->n = s + (to - from);
}

/* Removes the single node at i (a unary operator whose child moves up). */
static void drop_node(expr *d, size_t i)
{
    memmove(d->node + i, d->node + i + 1, (d->n - i - 1) * sizeof(*d->node));
    d->n--;
}

/* Swaps the adjacent runs [a, m) and [m, e). */
static int swap_runs(expr *d, size_t a, size_t m, size_t e)
{
    struct expr_node *tmp = malloc((m - a) * sizeof(*tmp));

    if (!tmp)
        return -ENOMEM;
    memcpy(tmp, d->node + a, (m - a) * sizeof(*tmp));
    memmove(d->node + a, d->node + m, (e - m) * sizeof(*tmp));
    memcpy(d->node + a + (e - m), tmp, (m - a) * sizeof(*tmp));
    free(tmp);
    return 0;
}

static void set_const(expr *d, size_t s, double v)
{
    d->node[s] = (struct expr_node){.op = EXPR_CONST, .c = v};
    d->n = s + 1;
}

/* The binary node at s has children at s+1 and m (ending at d->n). */
static int simplify_binary(expr *d, size_t s, size_t m, bool *changed)
{
    enum expr_op op = d->node[s].op;
    size_t a = s + 1, e = d->n;
    bool ca = is_const(d, a), cb = is_const(d, m);

    *changed = true;
    if (ca && cb) {
        double v = expr_op_apply(op, d->node[a].c, d->node[m].c);
        if (!isfinite(v)) { /* printed as "inf", it would not parse back */
            *changed = false;
            return 0;
        }
        set_const(d, s, v);
        return 0;
    }
    switch (op) {
    case EXPR_ADD:
        if (is_const_value(d, a, 0) || is_const_value(d, m, 0)) {
            if (is_const_value(d, a, 0))
                keep_range(d, s, m, e);
            else
                keep_range(d, s, a, m);
            return 0;
        }
        if (ca) /* c + x -> x + c */
            return swap_runs(d, a, m, e);
        if (cb && d->node[m].c < 0) { /* x + -c -> x - c */
            d->node[s].op = EXPR_SUB;
            d->node[m].c = -d->node[m].c;
            return 0;
        }
        if (cb && (d->node[a].op == EXPR_ADD || d->node[a].op == EXPR_SUB) && is_const(d, m - 1) &&
            expr_subtree_end(d, a + 1) == m - 1 &&
            isfinite(fabs(d->node[m - 1].c) + fabs(d->node[m].c))) { /* (y +- c1) + c2 */
            double c1 = d->node[a].op == EXPR_ADD ? d->node[m - 1].c : -d->node[m - 1].c;
            d->node[m - 1].c = c1 + d->node[m].c;
            d->node[a].op = EXPR_ADD;
            keep_range(d, s, a, m);
            return 0;
        }
        if (d->node[m].op == EXPR_NEG) { /* x + -y -> x - y */
            d->node[s].op = EXPR_SUB;
            drop_node(d, m);
            return 0;
        }
        if (d->node[a].op == EXPR_NEG) { /* -x + y -> y - x */
            d->node[s].op = EXPR_SUB;
            drop_node(d, a);
            return swap_runs(d, a, m - 1, d->n);
        }
        if (d->node[m].op == EXPR_MUL && is_const(d, m + 1) && d->node[m + 1].c < 0) {
            d->node[s].op = EXPR_SUB; /* x + (-c * y) -> x - c * y */
            d->node[m + 1].c = -d->node[m + 1].c;
            return 0;
        }
        if (expr_same_run(d, a, m, m, e)) { /* x + x -> 2 * x */
            d->node[s].op = EXPR_MUL;
            d->node[m] = (struct expr_node){.op = EXPR_CONST, .c = 2};
            d->n = m + 1;
            return swap_runs(d, a, m, m + 1);
        }
        break;
    case EXPR_SUB:
        if (is_const_value(d, m, 0)) {
            keep_range(d, s, a, m);
            return 0;
        }
        if (is_const_value(d, a, 0)) { /* 0 - x -> -x */
            d->node[s].op = EXPR_NEG;
            keep_range(d, s + 1, m, e);
            return 0;
        }
        if (cb && d->node[m].c < 0) {
            d->node[s].op = EXPR_ADD;
            d->node[m].c = -d->node[m].c;
            return 0;
        }
        if (cb && (d->node[a].op == EXPR_ADD || d->node[a].op == EXPR_SUB) && is_const(d, m - 1) &&
            expr_subtree_end(d, a + 1) == m - 1 &&
            isfinite(fabs(d->node[m - 1].c) + fabs(d->node[m].c))) { /* (y +- c1) - c2 */
            double c1 = d->node[a].op == EXPR_ADD ? d->node[m - 1].c : -d->node[m - 1].c;
            d->node[m - 1].c = c1 - d->node[m].c;
            d->node[a].op = EXPR_ADD;
            keep_range(d, s, a, m);
            return 0;
        }
        if (d->node[m].op == EXPR_NEG) { /* x - -y -> x + y */
            d->node[s].op = EXPR_ADD;
            drop_node(d, m);
            return 0;
        }
        if (d->node[m].op == EXPR_MUL && is_const(d, m + 1) && d->node[m + 1].c < 0) {
            d->node[s].op = EXPR_ADD; /* x - (-c * y) -> x + c * y */
            d->node[m + 1].c = -d->node[m + 1].c;
            return 0;
        }
        if (expr_same_run(d, a, m, m, e)) {
            set_const(d, s, 0);
            return 0;
        }
        break;
    case EXPR_MUL:
        if (is_const_value(d, a, 0) || is_const_value(d, m, 0)) {
            set_const(d, s, 0);
            return 0;
        }
        if (is_const_value(d, a, 1)) {
            keep_range(d, s, m, e);
            return 0;
        }
        if (is_const_value(d, m, 1)) {
            keep_range(d, s, a, m);
            return 0;
        }
        if (cb) /* x * c -> c * x */
            return swap_runs(d, a, m, e);
        if (is_const_value(d, a, -1)) {
            d->node[s].op = EXPR_NEG;
            keep_range(d, s + 1, m, e);
            return 0;
        }
        if (ca && d->node[m].op == EXPR_MUL && is_const(d, m + 1) &&
            isfinite(d->node[m + 1].c * d->node[a].c)) { /* c1 * (c2 * y) */
            d->node[m + 1].c *= d->node[a].c;
            keep_range(d, s, m, e);
            return 0;
        }
        if (ca && d->node[m].op == EXPR_NEG) { /* c * -y -> (-c) * y */
            d->node[a].c = -d->node[a].c;
            keep_range(d, m, m + 1, e);
            return 0;
        }
        if (expr_same_run(d, a, m, m, e)) {
            d->node[s].op = EXPR_SQUARE;
            d->n = m;
            return 0;
        }
        break;
    case EXPR_DIV:
        if (is_const_value(d, m, 1)) {
            keep_range(d, s, a, m);
            return 0;
        }
        if (expr_same_run(d, a, m, m, e)) { /* x/x is 1 even at 0 (protected) */
            set_const(d, s, 1);
            return 0;
        }
        break;
    default:
        if (expr_same_run(d, a, m, m, e)) { /* max(x,x), min(x,x) */
            keep_range(d, s, a, m);
            return 0;
        }
        break;
    }
    return expr_collect(d, s, m, changed);
}

static int simplify_unary(expr *d, size_t s, bool *changed)
{
    enum expr_op op = d->node[s].op;
    size_t a = s + 1;

    *changed = true;
    if (is_const(d, a) && isfinite(expr_op_apply(op, d->node[a].c, 0))) {
        set_const(d, s, expr_op_apply(op, d->node[a].c, 0));
        return 0;
    }
    if (op == EXPR_NEG && d->node[a].op == EXPR_NEG) {
        keep_range(d, s, a + 1, d->n);
        return 0;
    }
    if (op == EXPR_NEG && d->node[a].op == EXPR_MUL && is_const(d, a + 1)) { /* -(c*y) */
        d->node[a + 1].c = -d->node[a + 1].c;
        keep_range(d, s, a, d->n);
        return 0;
    }
    if (d->node[a].op == EXPR_NEG) {
        switch (op) {
        case EXPR_SQUARE: /* even, log and sqrt being of |y|: f(-y) -> f(y) */
        case EXPR_COS:
        case EXPR_SQRT:
        case EXPR_LOG:
            drop_node(d, a);
            return 0;
        case EXPR_CUBE: /* odd: f(-y) -> -f(y), where sums can take the sign */
        case EXPR_SIN:
            d->node[s].op = EXPR_NEG;
            d->node[a].op = (uint8_t)op;
            return 0;
        default:
            break;
        }
    }
    *changed = false;
    return 0;
}

/* Appends the simplified subtree of src at i to d; *next gets the index
 * after it in src. */
static int simplify_into(const expr *src, size_t i, expr *d, size_t *next, bool *changed)
{
    const struct expr_node *nd = &src->node[i];
    int arity = expr_op_arity(nd->op), r;
    size_t s = d->n, m = 0, j = i + 1;
    bool ch = false;

    r = expr_reserve(d, d->n + 1);
    if (r < 0)
        return r;
    d->node[d->n++] = *nd;
    for (int k = 0; k < arity; k++) {
        if (k == 1)
            m = d->n;
        r = simplify_into(src, j, d, &j, changed);
        if (r < 0)
            return r;
    }
    *next = j;
    if (arity == 2)
        r = simplify_binary(d, s, m, &ch);
    else if (arity == 1)
        r = simplify_unary(d, s, &ch);
    *changed |= ch;
    return r;
}

expr *expr_simplify(const expr *e)
{
    expr *cur = expr_clone(e);

    for (int round = 0; cur && round < 20; round++) {
        expr *d = calloc(1, sizeof(*d));
        bool changed = false;
        size_t next;
        if (!d || simplify_into(cur, 0, d, &next, &changed) < 0) {
            expr_free(d);
            expr_free(cur);
            return NULL;
        }
        expr_free(cur);
        cur = d;
        if (!changed)
            break;
    }
    return cur;
}

/* ---- Printing ----------------------------------------------------------- */

enum { PREC_SUM = 1, PREC_PRODUCT = 2, PREC_UNARY = 3, PREC_ATOM = 4 };

static int node_prec(const struct expr_node *nd)
{
    switch (nd->op) {
    case EXPR_ADD:
    case EXPR_SUB:
        return PREC_SUM;
    case EXPR_MUL:
    case EXPR_DIV:
        return PREC_PRODUCT;
    case EXPR_NEG:
        return PREC_UNARY;
    case EXPR_CONST:
        return signbit(nd->c) ? PREC_UNARY : PREC_ATOM;
    default:
        return PREC_ATOM;
    }
}

/* The shortest form that reads back as the same double ("80", not "8e+01"). */
static void print_number(FILE *f, double v)
{
    char buf[UTIL_NUMLEN];

    fputs(util_format_double(buf, v, 17), f);
}

static void print_name(FILE *f, const char *name)
{
    bool plain = expr_is_name_start(name[0]);

    for (const char *p = name; *p && plain; p++)
        plain = expr_is_name_char(*p);
    /* A feature named like a function would read back as a call only when
     * followed by '(', which printing never does, so plain names stay bare. */
    fprintf(f, plain ? "%s" : "\"%s\"", name);
}

static size_t print_node(FILE *f, const expr *e, size_t i, const char *const *vars, int min_prec)
{
    const struct expr_node *nd = &e->node[i];
    int prec = node_prec(nd), arity = expr_op_arity(nd->op);
    bool paren = prec < min_prec;
    size_t j = i + 1;

    if (paren)
        fputc('(', f);
    if (nd->op == EXPR_CONST) {
        print_number(f, nd->c);
    } else if (nd->op == EXPR_VAR) {
        print_name(f, vars[nd->var]);
    } else if (nd->op == EXPR_NEG) {
        fputc('-', f);
        j = print_node(f, e, j, vars, PREC_UNARY);
    } else if (prec == PREC_ATOM) { /* function call */
        fprintf(f, "%s(", expr_op_name(nd->op));
        for (int k = 0; k < arity; k++) {
            if (k)
                fputs(", ", f);
            j = print_node(f, e, j, vars, PREC_SUM);
        }
        fputc(')', f);
    } else {
        static const char sym[EXPR_N_OPS] = {
            [EXPR_ADD] = '+', [EXPR_SUB] = '-', [EXPR_MUL] = '*', [EXPR_DIV] = '/'};
        /* c * (x * y) reads as c * x * y: parsed, (c * x) * y simplifies
         * back to the same tree. Not when x is a constant (it would fold)
         * or a quotient (protected division: (c * p) / q is not c * (p / q)
         * at q = 0). */
        bool chain = nd->op == EXPR_MUL && e->node[j].op == EXPR_CONST && !signbit(e->node[j].c) &&
                     e->node[j + 1].op == EXPR_MUL && e->node[j + 2].op != EXPR_CONST &&
                     e->node[j + 2].op != EXPR_DIV;
        j = print_node(f, e, j, vars, prec);
        fprintf(f, " %c ", sym[nd->op]);
        j = print_node(f, e, j, vars, chain ? prec : prec + 1);
    }
    if (paren)
        fputc(')', f);
    return j;
}

char *expr_print(const expr *e, const char *const *vars)
{
    expr *s = expr_simplify(e);
    char *text = NULL;
    size_t len;
    FILE *f;

    if (!s)
        return NULL;
    f = open_memstream(&text, &len);
    if (f) {
        print_node(f, s, 0, vars, PREC_SUM);
        if (fclose(f) != 0) {
            free(text);
            text = NULL;
        }
    }
    expr_free(s);
    return text;
}
