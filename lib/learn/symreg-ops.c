/* symreg-ops: random trees and the variation operators of symbolic
 * regression (one-point crossover and the five mutations), as edits of
 * prefix-ordered node arrays: a subtree is a contiguous run, so each
 * operator is a splice. */
#include "learn/symreg-internal.h"

#include <errno.h>
#include <gsl/gsl_randist.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CONST_LO -1.0 /* random constants are uniform in [CONST_LO, CONST_HI) */
#define CONST_HI 1.0

void symreg_prims_init(struct symreg_prims *ps, uint32_t ops, size_t n_vars, bool consts)
{
    ps->n_ops = 0;
    for (int op = 0; op < EXPR_N_OPS; op++)
        if ((ops & (1u << op)) && expr_op_arity(op) > 0)
            ps->ops[ps->n_ops++] = op;
    ps->n_vars = n_vars;
    ps->consts = consts;
}

static size_t pick(gsl_rng *r, size_t n)
{
    return (size_t)gsl_rng_uniform_int(r, n);
}

static struct expr_node random_terminal(const struct symreg_prims *ps, gsl_rng *r)
{
    size_t k = pick(r, ps->n_vars + (ps->consts ? 1 : 0));

    if (k == ps->n_vars)
        return (struct expr_node){.op = EXPR_CONST, .c = gsl_ran_flat(r, CONST_LO, CONST_HI)};
    return (struct expr_node){.op = EXPR_VAR, .var = (uint32_t)k};
}

static int push(expr *e, struct expr_node nd)
{
    return expr_splice(e, e->n, e->n, &nd, 1);
}

/* Appends a random subtree whose root is at `depth` in a tree of `height`. */
static int gen_into(expr *e, const struct symreg_prims *ps, gsl_rng *r, size_t depth, size_t height,
                    size_t min_h, bool full)
{
    /* Grow ends a branch early with the terminals' share of the primitive
     * set, as Koza and DEAP do. */
    double term_ratio =
        (double)(ps->n_vars + ps->consts) / (double)(ps->n_vars + ps->consts + ps->n_ops);
    bool leaf = depth == height || (!full && depth >= min_h && gsl_rng_uniform(r) < term_ratio);

    if (leaf)
        return push(e, random_terminal(ps, r));
    enum expr_op op = ps->ops[pick(r, ps->n_ops)];
    int rc = push(e, (struct expr_node){.op = (uint8_t)op});
    for (int k = 0; k < expr_op_arity(op) && rc == 0; k++)
        rc = gen_into(e, ps, r, depth + 1, height, min_h, full);
    return rc;
}

expr *symreg_gen_tree(const struct symreg_prims *ps, gsl_rng *r, size_t min_h, size_t max_h,
                      bool full)
{
    size_t height = min_h + pick(r, max_h - min_h + 1);
    expr *e = expr_from_nodes(NULL, 0);

    if (e && gen_into(e, ps, r, 0, height, min_h, full) < 0) {
        expr_free(e);
        return NULL;
    }
    return e;
}

/* Replaces the subtree at i of e with the whole of `with`. */
static int replace_subtree(expr *e, size_t i, const struct expr_node *with, size_t n)
{
    return expr_splice(e, i, expr_subtree_end(e, i), with, n);
}

int symreg_crossover(expr *a, expr *b, gsl_rng *r)
{
    if (a->n < 2 || b->n < 2)
        return 0;
    /* Points are drawn from 1..n-1: index 0 is the root. */
    size_t i = 1 + pick(r, a->n - 1), j = 1 + pick(r, b->n - 1);
    size_t ie = expr_subtree_end(a, i), je = expr_subtree_end(b, j);
    expr *sa = expr_from_nodes(a->node + i, ie - i), *sb = expr_from_nodes(b->node + j, je - j);
    int rc = -ENOMEM;

    if (sa && sb && expr_splice(a, i, ie, sb->node, sb->n) == 0 &&
        expr_splice(b, j, je, sa->node, sa->n) == 0)
        rc = 1;
    expr_free(sa);
    expr_free(sb);
    return rc;
}

static int mut_uniform(expr *e, const struct symreg_prims *ps, gsl_rng *r)
{
    size_t i = pick(r, e->n);
    expr *t = symreg_gen_tree(ps, r, 0, 2, true);
    int rc = t ? replace_subtree(e, i, t->node, t->n) : -ENOMEM;

    expr_free(t);
    return rc < 0 ? rc : 1;
}

static int mut_node(expr *e, const struct symreg_prims *ps, gsl_rng *r)
{
    size_t i = pick(r, e->n);
    int arity = expr_op_arity(e->node[i].op);
    enum expr_op same[EXPR_N_OPS];
    size_t n = 0;

    if (arity == 0) {
        e->node[i] = random_terminal(ps, r);
        return 1;
    }
    for (size_t k = 0; k < ps->n_ops; k++)
        if (expr_op_arity(ps->ops[k]) == arity)
            same[n++] = ps->ops[k];
    /* Simplification brings in operators outside the primitive set (neg,
     * square): with none of the same arity to swap in, nothing changes. */
    if (n == 0)
        return 0;
    e->node[i].op = (uint8_t)same[pick(r, n)];
    return 1;
}

static int mut_insert(expr *e, const struct symreg_prims *ps, gsl_rng *r)
{
    size_t i = pick(r, e->n), end = expr_subtree_end(e, i);
    enum expr_op op = ps->ops[pick(r, ps->n_ops)];
    int arity = expr_op_arity(op);
    size_t slot = pick(r, (size_t)arity), n = end - i;
    struct expr_node *nodes = malloc((n + 2) * sizeof(*nodes));
    int rc;

    if (!nodes)
        return -ENOMEM;
    /* The old subtree becomes argument `slot`; any other is a terminal. */
    nodes[0] = (struct expr_node){.op = (uint8_t)op};
    if (arity == 2 && slot == 1)
        nodes[1] = random_terminal(ps, r);
    memcpy(nodes + 1 + (arity == 2 && slot == 1), e->node + i, n * sizeof(*nodes));
    if (arity == 2 && slot == 0)
        nodes[1 + n] = random_terminal(ps, r);
    rc = expr_splice(e, i, end, nodes, n + (size_t)arity);
    free(nodes);
    return rc < 0 ? rc : 1;
}

static int mut_shrink(expr *e, gsl_rng *r)
{
    size_t cand[e->n + 1], n = 0;

    for (size_t i = 1; i < e->n; i++)
        if (expr_op_arity(e->node[i].op) > 0)
            cand[n++] = i;
    if (n == 0)
        return 0;
    size_t i = cand[pick(r, n)], child = i + 1;
    if (expr_op_arity(e->node[i].op) == 2 && pick(r, 2) == 1)
        child = expr_subtree_end(e, i + 1);
    size_t cend = expr_subtree_end(e, child);
    expr *c = expr_from_nodes(e->node + child, cend - child);
    int rc = c ? replace_subtree(e, i, c->node, c->n) : -ENOMEM;
    expr_free(c);
    return rc < 0 ? rc : 1;
}

static int mut_constant(expr *e, gsl_rng *r)
{
    size_t cand[e->n + 1], n = 0;

    for (size_t i = 0; i < e->n; i++)
        if (e->node[i].op == EXPR_CONST)
            cand[n++] = i;
    if (n == 0)
        return 0;
    double *c = &e->node[cand[pick(r, n)]].c;
    /* Relative steps for large constants, absolute ones near zero. */
    *c += gsl_ran_gaussian(r, 0.1 * (fabs(*c) > 1 ? fabs(*c) : 1));
    return 1;
}

int symreg_mutate(expr *e, enum symreg_mutation kind, const struct symreg_prims *ps, gsl_rng *r)
{
    switch (kind) {
    case SYMREG_MUT_UNIFORM:
        return mut_uniform(e, ps, r);
    case SYMREG_MUT_NODE:
        return mut_node(e, ps, r);
    case SYMREG_MUT_INSERT:
        return mut_insert(e, ps, r);
    case SYMREG_MUT_SHRINK:
        return mut_shrink(e, r);
    case SYMREG_MUT_CONSTANT:
        return mut_constant(e, r);
    default:
        return -EINVAL;
    }
}

bool symreg_within_limits(const expr *e, size_t max_depth, size_t max_size)
{
    return e->n <= max_size && expr_depth(e) <= max_depth;
}
