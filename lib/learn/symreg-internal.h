/* symreg-internal: the variation operators of symbolic regression, shared
 * by the engine (symreg.c) and their unit tests. Each operator edits a tree
 * in place and draws every random choice from the given generator. */
#ifndef WATTPROF_SYMREG_INTERNAL_H
#define WATTPROF_SYMREG_INTERNAL_H

#include "expr/expr-internal.h"
#include "learn/learn.h"

#include <gsl/gsl_rng.h>

/* The primitive set: the operators allowed, and the terminals (every
 * feature, plus random constants when `consts`). */
struct symreg_prims {
    enum expr_op ops[EXPR_N_OPS];
    size_t n_ops;
    size_t n_vars;
    bool consts;
};

/* Fills `ps` from a symreg_params ops mask. */
void symreg_prims_init(struct symreg_prims *ps, uint32_t ops, size_t n_vars, bool consts);

/* A random tree of height in [min_h, max_h]: `full` makes every branch
 * reach the height, otherwise terminals may end a branch early (grow). */
expr *symreg_gen_tree(const struct symreg_prims *ps, gsl_rng *r, size_t min_h, size_t max_h,
                      bool full);

/* Swaps a random subtree of a with a random subtree of b, never at either
 * root. Trees of one node are left alone. Returns 1 when they changed. */
int symreg_crossover(expr *a, expr *b, gsl_rng *r);

enum symreg_mutation {
    SYMREG_MUT_UNIFORM,  /* a random subtree becomes a new random tree */
    SYMREG_MUT_NODE,     /* a random node becomes another of the same arity */
    SYMREG_MUT_INSERT,   /* a new operator is inserted above a random node */
    SYMREG_MUT_SHRINK,   /* a random non-root operator is replaced by one child */
    SYMREG_MUT_CONSTANT, /* a random constant is perturbed */
    SYMREG_N_MUTATIONS
};

/* Applies mutation `kind`. Returns 1 when the tree changed, 0 when the
 * operator did not apply, -ENOMEM. */
int symreg_mutate(expr *e, enum symreg_mutation kind, const struct symreg_prims *ps, gsl_rng *r);

/* Whether e is within the bloat limits. */
bool symreg_within_limits(const expr *e, size_t max_depth, size_t max_size);

/* Fitted equations by shape (symreg-cache.c): a table of at least `cap`
 * slots, each holding the latest equation of its hash. */
struct symreg_cache;
int symreg_cache_new(size_t cap, struct symreg_cache **out);
void symreg_cache_free(struct symreg_cache *c);
/* Whether a and b have the same operators and features, constants aside. */
bool symreg_same_shape(const expr *a, const expr *b);
/* A hash of e's operators and features, its constants aside. */
uint64_t symreg_shape_hash(const expr *e);
/* When an equation fitted from e's shape is cached, makes e that equation
 * (its constants, or the whole tree when the fit changed the shape), puts
 * its error into *err, and returns true. */
bool symreg_cache_take(const struct symreg_cache *c, expr *e, uint64_t hash, double *err);
/* Caches a copy of the fitted e with its error under `hash`, the hash of
 * `key`: the shape e was fitted from, NULL when it is e's own; -ENOMEM. */
int symreg_cache_put(struct symreg_cache *c, const expr *key, const expr *e, uint64_t hash,
                     double err);

/* symreg-choose.c: the bic rule's criterion, n ln(MSE) + size ln(n), for an
 * equation of `size` nodes with training error err under f (an error below
 * the round-off floor counts as the floor), and whether the rule considers
 * the equation at all: fewer nodes than the n rows, or an exact fit with
 * fewer constants (k) than rows. The search's tie = bic uses the same. */
double symreg_bic(enum symreg_fitness f, double err, double floor, size_t size, size_t n);
bool symreg_bic_admits(double err, double floor, size_t size, size_t k, size_t n);

#endif
