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
 *   N / (c * Y + S)  ->  (N/c) / (Y + S/c)  (see below)
 *   c * (c1 * x + c2) ->  (c*c1) * x + c*c2   (every term with a constant)
 *   a*X +- b*X     ->  (a +- b) * X       (X, -X and c*X all count)
 *
 * Constants are not moved out of a division by a variable: protected
 * division makes x / 0 = 1, so c * (x / y) and (c * x) / y differ at y = 0,
 * and so do c1 * (c2 / y) and (c1*c2) / y, x / (c * y) and (1/c) * (x / y).
 * A constant may move within the division when the numerator is a constant:
 * with c2 != 0, c2 * x is 0 exactly where x is (but for an underflow of the
 * product), so both c1 / (c2 * x) and (c1/c2) / x are 1 where x = 0 and
 * equal elsewhere; likewise -x is 0 exactly where x is.
 * The divisor rule takes a division whose numerator N and divisor are
 * sums of terms that are each a constant or c * X, and divides every one of
 * their constants by the first coefficient c of a term c * Y of the
 * divisor, which leaves Y alone: (c1*x + c2) / (c3*y + c4) ->
 * ((c1/c3)*x + c2/c3) / (y + c4/c3). The new divisor is the old one over c
 * (c != 0), so it is 0 exactly where the old one is, both quotients are 1
 * there and equal elsewhere (up to rounding, as for every fold). It is
 * refused when the numerator has a term without a constant (scaling it
 * would add nodes), when c is 0 or a scaled constant overflows or
 * underflows to 0, and for a constant outside the division:
 * k * (x / (c*y + d)) is k where the divisor is 0, k/c after moving c out.
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

/* The most terms of a sum the divisor rule scales, and how deep it looks. */
#define RATIO_TERMS 32
#define RATIO_DEPTH 32

/* Collects the constants of the sum [i, end) whose terms are each a
 * constant or c * X: their indices into k[*nk...]. False when a term is
 * neither, or the sum is too long or deep. */
static bool coef_terms(const expr *d, size_t i, size_t end, size_t *k, size_t *nk, int depth)
{
    enum expr_op op = d->node[i].op;

    if ((op == EXPR_ADD || op == EXPR_SUB) && depth < RATIO_DEPTH) {
        size_t m = expr_subtree_end(d, i + 1);
        return coef_terms(d, i + 1, m, k, nk, depth + 1) && coef_terms(d, m, end, k, nk, depth + 1);
    }
    if (*nk == RATIO_TERMS)
        return false;
    if (op == EXPR_CONST)
        k[(*nk)++] = i;
    else if (op == EXPR_MUL && is_const(d, i + 1))
        k[(*nk)++] = i + 1;
    else
        return false;
    return true;
}

/* scaled[j] = (constant at k[j]) / c, or times c, for j < nk; false when
 * one overflows or underflows to 0. */
static bool scale_consts(const expr *d, const size_t *k, size_t nk, double c, bool divide,
                         double *scaled)
{
    if (c == 0)
        return false;
    for (size_t j = 0; j < nk; j++) {
        double v = d->node[k[j]].c;
        scaled[j] = divide ? v / c : v * c;
        if (!isfinite(scaled[j]) || (scaled[j] == 0) != (v == 0))
            return false;
    }
    return true;
}

/* Copies nodes [from, to) with the constants at k[] (ascending) replaced by
 * scaled[], leaving out the term c * Y whose c is at `drop` (0: none). */
static void put_scaled(struct out *o, const expr *d, size_t from, size_t to, const size_t *k,
                       const double *scaled, size_t drop)
{
    for (size_t i = from, j = 0; i < to; i++) {
        bool is_k = d->node[i].op == EXPR_CONST && k[j] == i;
        if (drop != 0 && (i == drop - 1 || i == drop)) {
            j += is_k;
            continue;
        }
        put(o, d->node[i]);
        if (is_k)
            o->v[o->n - 1].c = scaled[j++];
    }
}

/* N / (c * Y + S) -> (N/c) / (Y + S/c), for the division at s with its
 * divisor at m (the rule in the comment at the top). */
static bool ratio(const expr *d, size_t s, size_t m, size_t e, struct out *o)
{
    size_t k[2 * RATIO_TERMS + 1], nk = 0, nnum, lead = 0;
    double scaled[2 * RATIO_TERMS];

    if (!coef_terms(d, s + 1, m, k, &nk, 0))
        return false;
    nnum = nk;
    if (!coef_terms(d, m, e, k, &nk, 0))
        return false;
    for (size_t j = nnum; j < nk && lead == 0; j++)
        if (d->node[k[j] - 1].op == EXPR_MUL) /* the c of a term c * Y */
            lead = k[j];
    if (lead == 0 || !scale_consts(d, k, nk, d->node[lead].c, true, scaled))
        return false;
    k[nk] = e; /* a sentinel past the last node */
    put(o, d->node[s]);
    put_scaled(o, d, s + 1, e, k, scaled, lead);
    return true;
}

/* c * S -> S with each constant times c, where S is a sum of terms that are
 * each a constant or c' * X: two nodes fewer, and no division involved. */
static bool distribute(const expr *d, size_t s, size_t m, size_t e, struct out *o)
{
    size_t k[RATIO_TERMS + 1], nk = 0;
    double scaled[RATIO_TERMS];
    enum expr_op op = d->node[m].op;

    if ((op != EXPR_ADD && op != EXPR_SUB) || !coef_terms(d, m, e, k, &nk, 0) ||
        !scale_consts(d, k, nk, d->node[s + 1].c, false, scaled))
        return false;
    k[nk] = e;
    put_scaled(o, d, m, e, k, scaled, 0);
    return true;
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
        if (ca && distribute(d, s, m, e, o)) /* c * (c1 * x + c2) */
            return true;
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
    return ratio(d, s, m, e, o);
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
