/* symreg-cache: the equations a symbolic-regression run has already fitted,
 * by shape (operators and features, constants aside), so that a new
 * individual with the shape of one fitted before takes that one's fitted
 * constants and error instead of running Levenberg-Marquardt again. A
 * quarter to a third of the children of a generation repeat a shape seen
 * before (crossover of near-identical parents, mutations undone by
 * simplification). The table is direct-mapped: a newer shape replaces the
 * one in its slot, so its size is bounded whatever the run's length. Used by
 * the calling thread only (symreg.c looks up and inserts between the
 * parallel stages), so it needs no lock and keeps runs deterministic. */
#include "learn/symreg-internal.h"

#include <errno.h>
#include <stdlib.h>

struct symreg_cache_slot {
    uint64_t hash;
    expr *e;   /* the fitted equation; NULL for an empty slot */
    expr *key; /* the shape it was fitted from when that differs (linear
                  scaling wrapped and simplified it); else NULL */
    double err;
};

struct symreg_cache {
    size_t cap; /* a power of two */
    struct symreg_cache_slot *slot;
};

int symreg_cache_new(size_t cap, struct symreg_cache **out)
{
    struct symreg_cache *c = calloc(1, sizeof(*c));
    size_t n = 1;

    while (n < cap)
        n *= 2;
    if (!c || !(c->slot = calloc(n, sizeof(*c->slot)))) {
        free(c);
        return -ENOMEM;
    }
    c->cap = n;
    *out = c;
    return 0;
}

void symreg_cache_free(struct symreg_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->cap; i++) {
        expr_free(c->slot[i].e);
        expr_free(c->slot[i].key);
    }
    free(c->slot);
    free(c);
}

/* FNV-1a over each node's operator and feature index. */
uint64_t symreg_shape_hash(const expr *e)
{
    uint64_t h = 1469598103934665603ull;

    for (size_t i = 0; i < e->n; i++) {
        h = (h ^ e->node[i].op) * 1099511628211ull;
        if (e->node[i].op == EXPR_VAR)
            h = (h ^ e->node[i].var) * 1099511628211ull;
    }
    return h;
}

bool symreg_same_shape(const expr *a, const expr *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (a->node[i].op != b->node[i].op ||
            (a->node[i].op == EXPR_VAR && a->node[i].var != b->node[i].var))
            return false;
    return true;
}

bool symreg_cache_take(const struct symreg_cache *c, expr *e, uint64_t hash, double *err)
{
    const struct symreg_cache_slot *s = &c->slot[hash & (c->cap - 1)];

    if (!s->e || s->hash != hash || !symreg_same_shape(s->key ? s->key : s->e, e))
        return false;
    if (s->key) {
        /* Out of memory here only means fitting e again. */
        if (expr_splice(e, 0, e->n, s->e->node, s->e->n) < 0)
            return false;
    } else {
        for (size_t i = 0; i < e->n; i++)
            if (e->node[i].op == EXPR_CONST)
                e->node[i].c = s->e->node[i].c;
    }
    *err = s->err;
    return true;
}

int symreg_cache_put(struct symreg_cache *c, const expr *key, const expr *e, uint64_t hash,
                     double err)
{
    struct symreg_cache_slot *s = &c->slot[hash & (c->cap - 1)];
    expr *copy = expr_clone(e), *kcopy = key && !symreg_same_shape(key, e) ? expr_clone(key) : NULL;

    if (!copy || (key && !symreg_same_shape(key, e) && !kcopy)) {
        expr_free(copy);
        return -ENOMEM;
    }
    expr_free(s->e);
    expr_free(s->key);
    *s = (struct symreg_cache_slot){.hash = hash, .e = copy, .key = kcopy, .err = err};
    return 0;
}
