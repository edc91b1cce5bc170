/* expr-collect: the simplifications that regroup a tree rather than fold
 * it, so that constants meet and fold and like terms combine (symbolic
 * regression simplifies every new individual with them, which keeps the
 * search from growing chains of constants that mean one number):
 *
 *   x +- (y +- c)  ->  (x +- y) +- c      (y +- c) +- x  ->  (y +- x) +- c
 *   x * (c * y)    ->  c * (x * y)        (c * x) * y    ->  c * (x * y)
 *   x / c          ->  (1/c) * x          (c != 0)
 *   c1 / (c2 * x)  ->  (c1/c2) / x        (c2 != 0)
 *   c / -x         ->  (-c) / x
 *   a*X +- b*X     ->  (a +- b) * X       (X, -X and c*X all count)
 *
 * Constants are not moved out of a division by a variable: protected
 * division makes x / 0 = 1, so c * (x / y) and (c * x) / y differ at y = 0,
 * and so do c1 * (c2 / y) and (c1*c2) / y, x / (c * y) and (1/c) * (x / y).
 * A constant may move within the division when the numerator is a constant:
 * with c2 != 0, c2 * x is 0 exactly where x is (but for an underflow of the
 * product), so both c1 / (c2 * x) and (c1/c2) / x are 1 where x = 0 and
 * equal elsewhere; likewise -x is 0 exactly where x is.
 * Each rule moves a constant towards the root or removes a node, so
 * repeated passes end. Called by expr_simplify (expr-print.c) on a binary
 * node whose children are already simplified. */
#include "expr/expr-internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The new nodes of a rewritten subtree, built before they replace it. */
struct out {
    struct expr_node *v;
    size_t n;
};

static void put(struct out *o, struct expr_node nd)
{
    o->v[o->n++] = nd;
}

static void put_op(struct out *o, enum expr_op op)
{
    put(o, (struct expr_node){.op = (uint8_t)op});
}

static void put_const(struct out *o, double c)
{
    put(o, (struct expr_node){.op = EXPR_CONST, .c = c});
}

static void put_run(struct out *o, const expr *d, size_t from, size_t to)
{
    memcpy(o->v + o->n, d->node + from, (to - from) * sizeof(*o->v));
    o->n += to - from;
}

/* Replaces the subtree at s (the last one in d) with o. */
static int commit(expr *d, size_t s, struct out *o)
{
    int r = expr_reserve(d, s + o->n);

    if (r == 0) {
        memcpy(d->node + s, o->v, o->n * sizeof(*o->v));
        d->n = s + o->n;
    }
    return r;
}

static bool is_const(const expr *d, size_t i)
{
    return d->node[i].op == EXPR_CONST;
}

/* Whether the subtree [i, end) is "y + c" or "y - c": *y_end gets the end of
 * y, *c the constant with its sign. */
static bool const_tail(const expr *d, size_t i, size_t end, size_t *y_end, double *c)
{
    enum expr_op op = d->node[i].op;

    if ((op != EXPR_ADD && op != EXPR_SUB) || !is_const(d, end - 1) || is_const(d, i + 1) ||
        expr_subtree_end(d, i + 1) != end - 1)
        return false;
    *y_end = end - 1;
    *c = op == EXPR_ADD ? d->node[end - 1].c : -d->node[end - 1].c;
    return true;
}

/* The subtree [i, end) as coefficient * X: c * X, -X, or X itself. */
static void as_term(const expr *d, size_t i, size_t end, double *coef, size_t *x)
{
    if (d->node[i].op == EXPR_MUL && is_const(d, i + 1) && i + 2 < end) {
        *coef = d->node[i + 1].c;
        *x = i + 2;
    } else if (d->node[i].op == EXPR_NEG) {
        *coef = -1;
        *x = i + 1;
    } else {
        *coef = 1;
        *x = i;
    }
}

static bool sums(const expr *d, size_t s, size_t m, size_t e, struct out *o)
{
    enum expr_op op = d->node[s].op;
    size_t a = s + 1, y_end, xa, xb;
    double c, ka, kb;

    /* Like terms. */
    as_term(d, a, m, &ka, &xa);
    as_term(d, m, e, &kb, &xb);
    if (!is_const(d, xa) && expr_same_run(d, xa, m, xb, e)) {
        double k = op == EXPR_ADD ? ka + kb : ka - kb;
        if (!isfinite(k))
            return false;
        put_op(o, EXPR_MUL);
        put_const(o, k);
        put_run(o, d, xa, m);
        return true;
    }
    if (is_const(d, a) || is_const(d, m))
        return false;
    if (const_tail(d, m, e, &y_end, &c)) { /* x +- (y +- c) */
        put_op(o, EXPR_ADD);
        put_op(o, op);
        put_run(o, d, a, m);
        put_run(o, d, m + 1, y_end);
        put_const(o, op == EXPR_ADD ? c : -c);
        return true;
    }
    if (const_tail(d, a, m, &y_end, &c)) { /* (y +- c) +- x */
        put_op(o, EXPR_ADD);
        put_op(o, op);
        put_run(o, d, a + 1, y_end);
        put_run(o, d, m, e);
        put_const(o, c);
        return true;
    }
    return false;
}

static bool products(const expr *d, size_t s, size_t m, size_t e, struct out *o)
{
    enum expr_op op = d->node[s].op;
    size_t a = s + 1;
    bool ca = is_const(d, a), cb = is_const(d, m);
    bool ma = d->node[a].op == EXPR_MUL && is_const(d, a + 1);
    bool mb = d->node[m].op == EXPR_MUL && is_const(d, m + 1);

    if (ca && cb)
        return false;
    if (op == EXPR_MUL) {
        if (!ca && mb) { /* x * (c * y) */
            put_op(o, EXPR_MUL);
            put(o, d->node[m + 1]);
            put_op(o, EXPR_MUL);
            put_run(o, d, a, m);
            put_run(o, d, m + 2, e);
            return true;
        }
        if (!cb && !ca && ma) { /* (c * x) * y */
            put_op(o, EXPR_MUL);
            put(o, d->node[a + 1]);
            put_op(o, EXPR_MUL);
            put_run(o, d, a + 2, m);
            put_run(o, d, m, e);
            return true;
        }
        return false;
    }
    if (op != EXPR_DIV)
        return false;
    if (cb) { /* x / c */
        double k = 1 / d->node[m].c;
        if (d->node[m].c == 0 || !isfinite(k))
            return false;
        put_op(o, EXPR_MUL);
        put_const(o, k);
        put_run(o, d, a, m);
        return true;
    }
    if (ca && mb) { /* c1 / (c2 * y) */
        double c1 = d->node[a].c, c2 = d->node[m + 1].c, k = c1 / c2;
        if (c2 == 0 || !isfinite(k) || (k == 0) != (c1 == 0))
            return false;
        put_op(o, EXPR_DIV);
        put_const(o, k);
        put_run(o, d, m + 2, e);
        return true;
    }
    if (ca && d->node[m].op == EXPR_NEG) { /* c / -y */
        put_op(o, EXPR_DIV);
        put_const(o, -d->node[a].c);
        put_run(o, d, m + 1, e);
        return true;
    }
    return false;
}

int expr_collect(expr *d, size_t s, size_t m, bool *changed)
{
    size_t e = d->n;
    struct out o = {.v = malloc((e - s + 2) * sizeof(*o.v))};
    enum expr_op op = d->node[s].op;
    int r = 0;

    *changed = false;
    if (!o.v)
        return -ENOMEM;
    if (op == EXPR_ADD || op == EXPR_SUB)
        *changed = sums(d, s, m, e, &o);
    else if (op == EXPR_MUL || op == EXPR_DIV)
        *changed = products(d, s, m, e, &o);
    if (*changed)
        r = commit(d, s, &o);
    free(o.v);
    return r;
}
