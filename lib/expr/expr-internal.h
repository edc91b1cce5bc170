/* expr-internal: the representation of expressions, shared by lib/expr and
 * the engines in lib/learn that edit trees in place (symbolic regression,
 * constant fitting).
 *
 * A tree is stored as its nodes in prefix order, so a subtree is a
 * contiguous run: crossover and mutation are array splices, and evaluation
 * is one backward pass with a stack. Not part of the public contract. */
#ifndef WATTPROF_EXPR_INTERNAL_H
#define WATTPROF_EXPR_INTERNAL_H

#include "expr/expr.h"

#include <stdint.h>

struct expr_node {
    uint8_t op;   /* enum expr_op */
    uint32_t var; /* EXPR_VAR: feature index */
    double c;     /* EXPR_CONST: value */
};

struct expr {
    size_t n, cap;
    struct expr_node *node;
};

/* Grows the node array to hold at least n nodes. */
int expr_reserve(expr *e, size_t n);
/* Index one past the subtree that starts at node i. */
size_t expr_subtree_end(const expr *e, size_t i);
/* Replaces nodes [from, to) of `e` with the n nodes `with`. */
int expr_splice(expr *e, size_t from, size_t to, const struct expr_node *with, size_t n);
/* An expression holding a copy of the nodes [from, to); NULL on OOM. */
expr *expr_from_nodes(const struct expr_node *nodes, size_t n);
/* Whether nodes [a, a_end) and [b, b_end) of d are the same subtree. */
bool expr_same_run(const expr *d, size_t a, size_t a_end, size_t b, size_t b_end);
/* Regroups the binary node at s of d (children at s+1 and m, the subtree
 * ending at d->n) so that constants meet and like terms combine; see
 * expr-collect.c. *changed says whether it did. */
int expr_collect(expr *d, size_t s, size_t m, bool *changed);
/* Depth of each node (root 0) into depth[0..e->n); returns the maximum. */
size_t expr_node_depths(const expr *e, size_t *depth);

/* Characters of feature names that need no quotes. */
static inline bool expr_is_name_start(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
}

static inline bool expr_is_name_char(char ch)
{
    return expr_is_name_start(ch) || (ch >= '0' && ch <= '9');
}

#endif
