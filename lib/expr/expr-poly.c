/* expr-poly: the expanded form of a polynomial expression, so that an
 * equation found as a product of factors, x * (x + 1) * (square(x) + 1), or
 * with its constants spread over several levels, 0.25 * (6 * a * b * a + 16),
 * can be written as a sum of monomials with one coefficient each, the way
 * it is usually written (x^4 + x^3 + x^2 + x, 1.5 * square(a) * b + 4).
 * Symbolic regression compares that form with the one it found when it
 * polishes the reported equation (symreg-choose.c).
 *
 * A tree is a polynomial when it holds only constants, features, + - * and
 * unary minus, square, cube, and divisions by a nonzero constant. Powers are
 * written with square and cube: x^4 = square(square(x)), x^5 = x *
 * square(square(x)), x^6 = cube(square(x)). */
#include "expr/expr-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define POLY_MAX_VARS 8    /* features a monomial may hold */
#define POLY_MAX_DEGREE 12 /* per feature */

struct mono {
    double c;
    uint8_t pow[POLY_MAX_VARS];
};

struct poly {
    struct mono *m;
    size_t n, cap;
};

/* Outcomes besides 0 and -ENOMEM. */
#define NOT_POLY 1

static int poly_push(struct poly *p, const struct mono *m, size_t max_terms)
{
    if (p->n >= max_terms)
        return NOT_POLY;
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 8;
        struct mono *nm = realloc(p->m, cap * sizeof(*nm));
        if (!nm)
            return -ENOMEM;
        p->m = nm;
        p->cap = cap;
    }
    p->m[p->n++] = *m;
    return 0;
}

static int mono_order(const void *a, const void *b)
{
    const struct mono *x = a, *y = b;
    unsigned dx = 0, dy = 0;

    for (size_t v = 0; v < POLY_MAX_VARS; v++) {
        dx += x->pow[v];
        dy += y->pow[v];
    }
    if (dx != dy) /* highest total degree first */
        return dx > dy ? -1 : 1;
    return -memcmp(x->pow, y->pow, sizeof(x->pow));
}

/* Sorts the monomials and adds up those of the same powers. */
static void poly_collect(struct poly *p)
{
    size_t k = 0;

    qsort(p->m, p->n, sizeof(*p->m), mono_order);
    for (size_t i = 0; i < p->n; i++) {
        if (k > 0 && memcmp(p->m[k - 1].pow, p->m[i].pow, sizeof(p->m[i].pow)) == 0)
            p->m[k - 1].c += p->m[i].c;
        else
            p->m[k++] = p->m[i];
    }
    p->n = k;
    k = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->m[i].c != 0)
            p->m[k++] = p->m[i];
    p->n = k;
}

static int poly_mul(const struct poly *a, const struct poly *b, struct poly *out, size_t max_terms)
{
    int r = 0;

    out->n = 0;
    for (size_t i = 0; i < a->n && r == 0; i++)
        for (size_t j = 0; j < b->n && r == 0; j++) {
            struct mono m = {.c = a->m[i].c * b->m[j].c};
            for (size_t v = 0; v < POLY_MAX_VARS && r == 0; v++) {
                unsigned d = (unsigned)a->m[i].pow[v] + b->m[j].pow[v];
                if (d > POLY_MAX_DEGREE)
                    r = NOT_POLY;
                m.pow[v] = (uint8_t)d;
            }
            if (r == 0)
                r = poly_push(out, &m, max_terms * max_terms);
        }
    if (r == 0)
        poly_collect(out);
    if (r == 0 && out->n > max_terms)
        r = NOT_POLY;
    return r;
}

/* The polynomial of the subtree at node *i of e into p (empty on entry);
 * *i moves past the subtree. */
static int poly_of(const expr *e, size_t *i, struct poly *p, size_t max_terms)
{
    const struct expr_node *nd = &e->node[(*i)++];
    struct poly a = {0}, b = {0}, t = {0};
    struct mono m = {.c = 1};
    int r = 0;

    switch (nd->op) {
    case EXPR_CONST:
        m.c = nd->c;
        return m.c == 0 ? 0 : poly_push(p, &m, max_terms);
    case EXPR_VAR:
        if (nd->var >= POLY_MAX_VARS)
            return NOT_POLY;
        m.pow[nd->var] = 1;
        return poly_push(p, &m, max_terms);
    case EXPR_ADD:
    case EXPR_SUB:
    case EXPR_MUL:
    case EXPR_DIV:
        r = poly_of(e, i, &a, max_terms);
        if (r == 0)
            r = poly_of(e, i, &b, max_terms);
        if (r == 0 && nd->op == EXPR_MUL) {
            r = poly_mul(&a, &b, &t, max_terms);
        } else if (r == 0 && nd->op == EXPR_DIV) {
            /* only by a nonzero constant: protected division makes x/0 = 1 */
            bool constant = b.n == 1 && memcmp(b.m[0].pow, m.pow, sizeof(m.pow)) == 0;
            if (!constant)
                r = NOT_POLY;
            for (size_t k = 0; r == 0 && k < a.n; k++)
                a.m[k].c /= b.m[0].c;
            t = a;
            a = (struct poly){0};
        } else if (r == 0) {
            for (size_t k = 0; r == 0 && k < b.n; k++) {
                if (nd->op == EXPR_SUB)
                    b.m[k].c = -b.m[k].c;
                r = poly_push(&a, &b.m[k], 2 * max_terms);
            }
            if (r == 0)
                poly_collect(&a);
            t = a;
            a = (struct poly){0};
        }
        break;
    case EXPR_NEG:
        r = poly_of(e, i, &t, max_terms);
        for (size_t k = 0; r == 0 && k < t.n; k++)
            t.m[k].c = -t.m[k].c;
        break;
    case EXPR_SQUARE:
    case EXPR_CUBE:
        r = poly_of(e, i, &a, max_terms);
        if (r == 0)
            r = poly_mul(&a, &a, &t, max_terms);
        if (r == 0 && nd->op == EXPR_CUBE) {
            free(b.m);
            b = t;
            t = (struct poly){0};
            r = poly_mul(&a, &b, &t, max_terms);
        }
        break;
    default:
        return NOT_POLY;
    }
    free(a.m);
    free(b.m);
    if (r == 0 && t.n > max_terms)
        r = NOT_POLY;
    if (r == 0) {
        free(p->m);
        *p = t;
    } else {
        free(t.m);
    }
    return r;
}

static int put(expr *e, struct expr_node nd)
{
    if (expr_reserve(e, e->n + 1) < 0)
        return -ENOMEM;
    e->node[e->n++] = nd;
    return 0;
}

/* Prefix nodes of var^k, k >= 1. */
static int put_power(expr *e, uint32_t var, unsigned k)
{
    int r = 0;

    if (k == 1)
        return put(e, (struct expr_node){.op = EXPR_VAR, .var = var});
    if (k % 2 == 0 || k % 3 == 0) {
        r = put(e, (struct expr_node){.op = k % 2 == 0 ? EXPR_SQUARE : EXPR_CUBE});
        return r < 0 ? r : put_power(e, var, k % 2 == 0 ? k / 2 : k / 3);
    }
    r = put(e, (struct expr_node){.op = EXPR_MUL});
    if (r == 0)
        r = put(e, (struct expr_node){.op = EXPR_VAR, .var = var});
    return r < 0 ? r : put_power(e, var, k - 1);
}

/* Prefix nodes of |m.c| * (product of powers), the coefficient left out
 * when it is 1. */
static int put_mono(expr *e, const struct mono *m)
{
    double c = m->c < 0 ? -m->c : m->c;
    size_t factors = 0;
    int r = 0;

    for (size_t v = 0; v < POLY_MAX_VARS; v++)
        factors += m->pow[v] > 0;
    if (factors == 0)
        return put(e, (struct expr_node){.op = EXPR_CONST, .c = c});
    /* left-nested: ((c * f1) * f2) * f3 */
    for (size_t k = c != 1 ? 0 : 1; k < factors; k++)
        if ((r = put(e, (struct expr_node){.op = EXPR_MUL})) < 0)
            return r;
    if (c != 1 && (r = put(e, (struct expr_node){.op = EXPR_CONST, .c = c})) < 0)
        return r;
    for (size_t v = 0; v < POLY_MAX_VARS && r == 0; v++)
        if (m->pow[v] > 0)
            r = put_power(e, (uint32_t)v, m->pow[v]);
    return r;
}

int expr_expand_poly(const expr *e, size_t max_terms, expr **out)
{
    struct poly p = {0};
    size_t i = 0;
    int r = poly_of(e, &i, &p, max_terms);
    expr *x = NULL;

    *out = NULL;
    if (r == 0 && !(x = calloc(1, sizeof(*x))))
        r = -ENOMEM;
    if (r == 0 && p.n == 0)
        r = put(x, (struct expr_node){.op = EXPR_CONST, .c = 0});
    /* t1 +- t2 +- t3, left-nested: the operators first, then the terms */
    for (size_t k = p.n; r == 0 && k > 1; k--)
        r = put(x, (struct expr_node){.op = p.m[k - 1].c < 0 ? EXPR_SUB : EXPR_ADD});
    if (r == 0 && p.n > 0 && p.m[0].c < 0)
        r = put(x, (struct expr_node){.op = EXPR_NEG});
    for (size_t k = 0; r == 0 && k < p.n; k++)
        r = put_mono(x, &p.m[k]);
    free(p.m);
    if (r == 0)
        *out = x;
    else
        expr_free(x);
    return r < 0 ? r : 0;
}
