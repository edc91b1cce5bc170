/* expr: the expression language of equation models (expr.h): storage,
 * operators and evaluation. Parsing is in expr-parse.c, simplification and
 * printing in expr-print.c and expr-collect.c; fitting the constants is
 * lib/learn's (expr-fit.c), as it needs GSL.
 *
 * Trees are prefix-ordered node arrays (expr-internal.h). Evaluation walks
 * the array backwards with a stack of vectors, a block of points at a time
 * so the stack stays in cache; derivatives with respect to the constants are
 * forward-mode (each stack slot carries one gradient vector per constant),
 * which is cheap because GP trees have few constants. Operators are
 * protected so every individual has a value: x/0 = 1, log|x| with log 0 = 0,
 * sqrt|x|, exp of at most EXPR_EXP_MAX; non-finite results are reported, not
 * propagated. */
#include "expr/expr-internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPR_BLOCK 128     /* points evaluated together */
#define EXPR_LOCAL 4096    /* doubles of evaluation stack kept on the C stack */
#define EXPR_EXP_MAX 700.0 /* exp's argument is clamped here: e^709 overflows */

static const struct {
    const char *name;
    int arity;
} op_info[EXPR_N_OPS] = {
    [EXPR_CONST] = {"const", 0},   [EXPR_VAR] = {"var", 0},   [EXPR_ADD] = {"add", 2},
    [EXPR_SUB] = {"sub", 2},       [EXPR_MUL] = {"mul", 2},   [EXPR_DIV] = {"div", 2},
    [EXPR_MAX] = {"max", 2},       [EXPR_MIN] = {"min", 2},   [EXPR_NEG] = {"neg", 1},
    [EXPR_SQUARE] = {"square", 1}, [EXPR_CUBE] = {"cube", 1}, [EXPR_SQRT] = {"sqrt", 1},
    [EXPR_LOG] = {"log", 1},       [EXPR_EXP] = {"exp", 1},   [EXPR_SIN] = {"sin", 1},
    [EXPR_COS] = {"cos", 1},
};

int expr_op_arity(enum expr_op op)
{
    return op < EXPR_N_OPS ? op_info[op].arity : -1;
}

const char *expr_op_name(enum expr_op op)
{
    return op < EXPR_N_OPS ? op_info[op].name : "?";
}

int expr_op_from_name(const char *name)
{
    for (int op = 0; op < EXPR_N_OPS; op++)
        if (strcmp(op_info[op].name, name) == 0)
            return op;
    return -EINVAL;
}

/* ---- Storage ------------------------------------------------------------ */

int expr_reserve(expr *e, size_t n)
{
    if (n <= e->cap)
        return 0;
    size_t cap = e->cap ? e->cap : 8;
    while (cap < n)
        cap *= 2;
    struct expr_node *nn = realloc(e->node, cap * sizeof(*nn));
    if (!nn)
        return -ENOMEM;
    e->node = nn;
    e->cap = cap;
    return 0;
}

expr *expr_from_nodes(const struct expr_node *nodes, size_t n)
{
    expr *e = calloc(1, sizeof(*e));

    if (!e || expr_reserve(e, n ? n : 1) < 0) {
        free(e);
        return NULL;
    }
    if (n)
        memcpy(e->node, nodes, n * sizeof(*nodes));
    e->n = n;
    return e;
}

void expr_free(expr *e)
{
    if (!e)
        return;
    free(e->node);
    free(e);
}

expr *expr_clone(const expr *e)
{
    return expr_from_nodes(e->node, e->n);
}

size_t expr_subtree_end(const expr *e, size_t i)
{
    size_t need = 1; /* nodes still owed to the subtree */

    while (need > 0) {
        need += (size_t)op_info[e->node[i].op].arity;
        need--;
        i++;
    }
    return i;
}

int expr_splice(expr *e, size_t from, size_t to, const struct expr_node *with, size_t n)
{
    size_t tail = e->n - to;

    if (expr_reserve(e, from + n + tail) < 0)
        return -ENOMEM;
    memmove(e->node + from + n, e->node + to, tail * sizeof(*e->node));
    if (n)
        memcpy(e->node + from, with, n * sizeof(*with));
    e->n = from + n + tail;
    return 0;
}

expr *expr_new_const(double c)
{
    struct expr_node nd = {.op = EXPR_CONST, .c = c};
    return expr_from_nodes(&nd, 1);
}

expr *expr_new_var(size_t var)
{
    struct expr_node nd = {.op = EXPR_VAR, .var = (uint32_t)var};
    return expr_from_nodes(&nd, 1);
}

expr *expr_new_op(enum expr_op op, expr *a, expr *b)
{
    struct expr_node nd = {.op = (uint8_t)op};
    int arity = expr_op_arity(op);
    expr *r = NULL;

    if (arity < 1 || !a || (arity == 2) != (b != NULL))
        goto out;
    r = expr_from_nodes(&nd, 1);
    if (!r || expr_splice(r, 1, 1, a->node, a->n) < 0 ||
        (b && expr_splice(r, r->n, r->n, b->node, b->n) < 0)) {
        expr_free(r);
        r = NULL;
    }
out:
    expr_free(a);
    expr_free(b);
    return r;
}

size_t expr_size(const expr *e)
{
    return e->n;
}

size_t expr_node_depths(const expr *e, size_t *depth)
{
    /* A node's depth is one more than its parent's; the parent is the
     * nearest earlier node still waiting for children. */
    size_t stack[e->n + 1], owed[e->n + 1], sp = 0, max = 0;

    for (size_t i = 0; i < e->n; i++) {
        size_t d = sp ? depth[stack[sp - 1]] + 1 : 0;
        depth[i] = d;
        if (d > max)
            max = d;
        if (sp && --owed[sp - 1] == 0)
            sp--;
        int arity = op_info[e->node[i].op].arity;
        if (arity > 0) {
            stack[sp] = i;
            owed[sp++] = (size_t)arity;
        }
    }
    return max;
}

size_t expr_depth(const expr *e)
{
    size_t *depth = malloc(e->n * sizeof(*depth));
    size_t max = 0;

    if (!depth)
        return SIZE_MAX;
    max = expr_node_depths(e, depth);
    free(depth);
    return max;
}

size_t expr_n_consts(const expr *e)
{
    size_t k = 0;
    for (size_t i = 0; i < e->n; i++)
        k += e->node[i].op == EXPR_CONST;
    return k;
}

void expr_get_consts(const expr *e, double *c)
{
    for (size_t i = 0; i < e->n; i++)
        if (e->node[i].op == EXPR_CONST)
            *c++ = e->node[i].c;
}

void expr_set_consts(expr *e, const double *c)
{
    for (size_t i = 0; i < e->n; i++)
        if (e->node[i].op == EXPR_CONST)
            e->node[i].c = *c++;
}

size_t expr_n_vars(const expr *e)
{
    size_t n = 0;
    for (size_t i = 0; i < e->n; i++)
        if (e->node[i].op == EXPR_VAR && e->node[i].var + 1 > n)
            n = e->node[i].var + 1;
    return n;
}

bool expr_same_run(const expr *d, size_t a, size_t a_end, size_t b, size_t b_end)
{
    if (a_end - a != b_end - b)
        return false;
    for (size_t i = 0; i < a_end - a; i++) {
        const struct expr_node *x = &d->node[a + i], *y = &d->node[b + i];
        if (x->op != y->op || (x->op == EXPR_VAR && x->var != y->var) ||
            (x->op == EXPR_CONST && x->c != y->c))
            return false;
    }
    return true;
}

/* ---- Protected operators ----------------------------------------------- */

/* Value of op at (a, b) and its partial derivatives da, db. */
static inline double apply(enum expr_op op, double a, double b, double *da, double *db)
{
    *db = 0;
    switch (op) {
    case EXPR_ADD:
        *da = 1, *db = 1;
        return a + b;
    case EXPR_SUB:
        *da = 1, *db = -1;
        return a - b;
    case EXPR_MUL:
        *da = b, *db = a;
        return a * b;
    case EXPR_DIV:
        if (b == 0) {
            *da = 0;
            return 1;
        }
        *da = 1 / b, *db = -a / (b * b);
        return a / b;
    case EXPR_MAX:
        *da = a >= b, *db = a < b;
        return a >= b ? a : b;
    case EXPR_MIN:
        *da = a <= b, *db = a > b;
        return a <= b ? a : b;
    case EXPR_NEG:
        *da = -1;
        return -a;
    case EXPR_SQUARE:
        *da = 2 * a;
        return a * a;
    case EXPR_CUBE:
        *da = 3 * a * a;
        return a * a * a;
    case EXPR_SQRT: {
        double r = sqrt(fabs(a));
        *da = a == 0 ? 0 : (a > 0 ? 0.5 : -0.5) / r;
        return r;
    }
    case EXPR_LOG:
        if (a == 0) {
            *da = 0;
            return 0;
        }
        *da = 1 / a;
        return log(fabs(a));
    case EXPR_EXP:
        if (a > EXPR_EXP_MAX) {
            *da = 0;
            return exp(EXPR_EXP_MAX);
        }
        *da = exp(a);
        return *da;
    case EXPR_SIN:
        *da = cos(a);
        return sin(a);
    case EXPR_COS:
        *da = -sin(a);
        return cos(a);
    default:
        *da = 0;
        return NAN;
    }
}

double expr_op_apply(enum expr_op op, double a, double b)
{
    double da, db;
    return apply(op, a, b, &da, &db);
}

/* ---- Evaluation --------------------------------------------------------- */

/* b[j] = op(a[j], b[j]) (unary ops: a == b), with the switch outside the
 * loop: plain evaluation is what symbolic regression spends its time on. */
static void apply_values(enum expr_op op, const double *a, double *b, size_t m)
{
    double d1, d2;

    switch (op) {
    case EXPR_ADD:
        for (size_t j = 0; j < m; j++)
            b[j] = a[j] + b[j];
        break;
    case EXPR_SUB:
        for (size_t j = 0; j < m; j++)
            b[j] = a[j] - b[j];
        break;
    case EXPR_MUL:
        for (size_t j = 0; j < m; j++)
            b[j] = a[j] * b[j];
        break;
    case EXPR_NEG:
        for (size_t j = 0; j < m; j++)
            b[j] = -a[j];
        break;
    case EXPR_SQUARE:
        for (size_t j = 0; j < m; j++)
            b[j] = a[j] * a[j];
        break;
    case EXPR_CUBE:
        for (size_t j = 0; j < m; j++)
            b[j] = a[j] * a[j] * a[j];
        break;
    case EXPR_DIV:
        for (size_t j = 0; j < m; j++)
            b[j] = b[j] == 0 ? 1 : a[j] / b[j];
        break;
    case EXPR_LOG:
        for (size_t j = 0; j < m; j++)
            b[j] = a[j] == 0 ? 0 : log(fabs(a[j]));
        break;
    case EXPR_SIN: /* apply() would take the derivative too: a second call */
        for (size_t j = 0; j < m; j++)
            b[j] = sin(a[j]);
        break;
    case EXPR_COS:
        for (size_t j = 0; j < m; j++)
            b[j] = cos(a[j]);
        break;
    case EXPR_EXP:
        for (size_t j = 0; j < m; j++)
            b[j] = exp(a[j] > EXPR_EXP_MAX ? EXPR_EXP_MAX : a[j]);
        break;
    default:
        for (size_t j = 0; j < m; j++)
            b[j] = apply(op, a[j], b[j], &d1, &d2);
        break;
    }
}

/* Deepest stack the backward pass needs. */
static size_t stack_need(const expr *e)
{
    size_t sp = 0, max = 0;

    for (size_t i = e->n; i-- > 0;) {
        sp = sp + 1 - (size_t)op_info[e->node[i].op].arity;
        if (sp > max)
            max = sp;
    }
    return max;
}

/* b[j] = op(a[j], b[j]) as apply_values, also storing the partial
 * derivatives in pa and pb (taken before b is overwritten). */
static void apply_partials(enum expr_op op, const double *a, double *b, size_t m, double *pa,
                           double *pb)
{
    switch (op) {
    case EXPR_ADD:
    case EXPR_SUB:
        for (size_t j = 0; j < m; j++)
            pa[j] = 1, pb[j] = op == EXPR_ADD ? 1 : -1;
        apply_values(op, a, b, m);
        break;
    case EXPR_MUL:
        for (size_t j = 0; j < m; j++) {
            pa[j] = b[j], pb[j] = a[j];
            b[j] = a[j] * b[j];
        }
        break;
    case EXPR_SQUARE:
        for (size_t j = 0; j < m; j++) {
            pa[j] = 2 * a[j];
            b[j] = a[j] * a[j];
        }
        break;
    case EXPR_CUBE:
        for (size_t j = 0; j < m; j++) {
            pa[j] = 3 * a[j] * a[j];
            b[j] = a[j] * a[j] * a[j];
        }
        break;
    case EXPR_DIV:
        for (size_t j = 0; j < m; j++) {
            double x = a[j], y = b[j];
            pa[j] = y == 0 ? 0 : 1 / y;
            pb[j] = y == 0 ? 0 : -x / (y * y);
            b[j] = y == 0 ? 1 : x / y;
        }
        break;
    case EXPR_LOG:
        for (size_t j = 0; j < m; j++) {
            double x = a[j];
            pa[j] = x == 0 ? 0 : 1 / x;
            b[j] = x == 0 ? 0 : log(fabs(x));
        }
        break;
    case EXPR_SIN: /* sin and cos in one call */
        for (size_t j = 0; j < m; j++)
            sincos(a[j], &b[j], &pa[j]);
        break;
    case EXPR_COS:
        for (size_t j = 0; j < m; j++) {
            double sn;
            sincos(a[j], &sn, &b[j]);
            pa[j] = -sn;
        }
        break;
    default:
        for (size_t j = 0; j < m; j++)
            b[j] = apply(op, a[j], b[j], &pa[j], &pb[j]);
        break;
    }
}

/* Evaluates points [0, m) of one block. A stack slot holds 1 + nk vectors
 * of bs (the block size): the value, then d/dc_k for each constant. A subtree's
 * constants are a contiguous run of indices (prefix order), so each slot
 * only keeps the gradients in its run [klo, khi): the rest are zero. */
static void eval_block(const expr *e, const double *const *cols, size_t off, size_t m, size_t nk,
                       size_t bs, double *stack, size_t *klo, size_t *khi)
{
    const size_t slot = (1 + nk) * bs;
    size_t sp = 0, k = nk; /* constants are met last-first */
    double pa[EXPR_BLOCK], pb[EXPR_BLOCK];

    for (size_t i = e->n; i-- > 0;) {
        const struct expr_node *nd = &e->node[i];
        int arity = op_info[nd->op].arity;
        double *top = stack + sp * slot;

        if (nd->op == EXPR_VAR) {
            memcpy(top, cols[nd->var] + off, m * sizeof(double));
            klo[sp] = khi[sp] = 0;
            sp++;
            continue;
        }
        if (nd->op == EXPR_CONST) {
            k--;
            for (size_t j = 0; j < m; j++)
                top[j] = nd->c;
            if (nk)
                for (size_t j = 0; j < m; j++)
                    top[(1 + k) * bs + j] = 1;
            klo[sp] = k, khi[sp] = k + 1;
            sp++;
            continue;
        }
        /* a is the first child (top of the stack), b the second. */
        size_t ia = sp - 1, ib = arity == 2 ? sp - 2 : ia;
        double *a = stack + ia * slot, *b = stack + ib * slot;
        double *r = b; /* the result replaces the lowest operand */
        if (nk == 0) {
            apply_values(nd->op, a, b, m);
            sp -= (size_t)arity - 1;
            continue;
        }
        apply_partials(nd->op, a, b, m, pa, pb);
        for (size_t q = klo[ia]; q < khi[ia]; q++) {
            double *ga = a + (1 + q) * bs, *gr = r + (1 + q) * bs;
            for (size_t j = 0; j < m; j++)
                gr[j] = pa[j] * ga[j];
        }
        if (arity == 2) {
            for (size_t q = klo[ib]; q < khi[ib]; q++) {
                double *gr = r + (1 + q) * bs;
                for (size_t j = 0; j < m; j++)
                    gr[j] *= pb[j];
            }
            /* a's constants come before b's: the runs are adjacent. */
            if (klo[ia] == khi[ia])
                ;
            else if (klo[ib] == khi[ib])
                klo[ib] = klo[ia], khi[ib] = khi[ia];
            else
                klo[ib] = klo[ia];
        }
        sp -= (size_t)arity - 1;
    }
}

static bool all_finite(const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return false;
    return true;
}

static bool eval_all(const expr *e, const double *const *cols, size_t n, double *out, double *jac)
{
    size_t nk = jac ? expr_n_consts(e) : 0, slots = stack_need(e);
    size_t bs = n < EXPR_BLOCK ? (n ? n : 1) : EXPR_BLOCK, need = slots * (1 + nk) * bs;
    /* Small problems (the usual case in symbolic regression) use the C
     * stack: a malloc per evaluation showed in profiles. */
    double local[EXPR_LOCAL], *stack = need <= EXPR_LOCAL ? local : malloc(need * sizeof(double));
    size_t klo[slots], khi[slots];

    if (!stack)
        return false;
    for (size_t off = 0; off < n; off += bs) {
        size_t m = n - off < bs ? n - off : bs;
        eval_block(e, cols, off, m, nk, bs, stack, klo, khi);
        memcpy(out + off, stack, m * sizeof(double));
        for (size_t q = 0; q < nk; q++)
            memcpy(jac + q * n + off, stack + (1 + q) * bs, m * sizeof(double));
    }
    if (stack != local)
        free(stack);
    return all_finite(out, n) && (!jac || all_finite(jac, nk * n));
}

bool expr_eval(const expr *e, const double *const *cols, size_t n, double *out)
{
    return eval_all(e, cols, n, out, NULL);
}

bool expr_eval_jac(const expr *e, const double *const *cols, size_t n, double *out, double *jac)
{
    return eval_all(e, cols, n, out, jac);
}
