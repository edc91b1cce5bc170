/* expr: the small expression language shared by symbolic regression and
 * the Gaussian process's mean function.
 *
 * Trees are prefix-ordered node arrays (expr-internal.h). Evaluation walks
 * the array backwards with a stack of vectors, a block of points at a time
 * so the stack stays in cache; derivatives with respect to the constants are
 * forward-mode (each stack slot carries one gradient vector per constant),
 * which is cheap because GP trees have few constants. Operators are
 * protected so every individual has a value: x/0 = 1, log|x| with log 0 = 0,
 * sqrt|x|, exp of at most EXPR_EXP_MAX; non-finite results are reported, not
 * propagated. */
#include "learn/expr-internal.h"
#include "util/util.h"

#include <errno.h>
#include <gsl/gsl_blas.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_vector.h>
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
    [EXPR_LOG] = {"log", 1},       [EXPR_EXP] = {"exp", 1},
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

static int reserve(expr *e, size_t n)
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

    if (!e || reserve(e, n ? n : 1) < 0) {
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

    if (reserve(e, from + n + tail) < 0)
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

/* ---- Parsing ------------------------------------------------------------
 * Recursive descent over
 *   sum     := product (('+' | '-') product)*
 *   product := unary (('*' | '/') unary)*
 *   unary   := '-' unary | primary
 *   primary := NUMBER | NAME | NAME '(' sum (',' sum)* ')' | '"' TEXT '"' | '(' sum ')'
 * A quoted name allows features such as "L1-dcache-loads". */

struct parser {
    const char *text, *p;
    const char *const *vars;
    size_t n_vars;
    char *err;
    size_t errlen;
    int depth;
};

#define PARSE_MAX_DEPTH 200 /* nesting limit, so hostile input cannot overflow the C stack */

static int perr(struct parser *ps, const char *at, const char *fmt, const char *arg)
{
    int line, col;
    char what[256];

    util_line_col(ps->text, (size_t)(at - ps->text), &line, &col);
    snprintf(what, sizeof(what), fmt, arg);
    return util_err(ps->err, ps->errlen, -EINVAL, "expression:%d:%d: %s", line, col, what);
}

static void skip_space(struct parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
        ps->p++;
}

static bool is_name_start(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
}

static bool is_name_char(char ch)
{
    return is_name_start(ch) || (ch >= '0' && ch <= '9');
}

static int parse_sum(struct parser *ps, expr **out);

static int parse_var(struct parser *ps, const char *at, const char *name, expr **out)
{
    for (size_t j = 0; j < ps->n_vars; j++)
        if (strcmp(ps->vars[j], name) == 0) {
            *out = expr_new_var(j);
            return *out ? 0 : -ENOMEM;
        }
    return perr(ps, at, "unknown feature '%s'", name);
}

static int parse_call(struct parser *ps, const char *at, const char *name, expr **out)
{
    int op = expr_op_from_name(name);
    expr *args[2] = {NULL, NULL};
    size_t n = 0;
    int r;

    if (op < 0 || op == EXPR_CONST || op == EXPR_VAR || op == EXPR_NEG || op == EXPR_ADD ||
        op == EXPR_SUB || op == EXPR_MUL || op == EXPR_DIV)
        return perr(ps, at, "unknown function '%s'", name);
    ps->p++; /* '(' */
    for (;;) {
        expr *a;
        skip_space(ps);
        if (n == 2) {
            r = perr(ps, ps->p, "too many arguments to '%s'", name);
            goto fail;
        }
        r = parse_sum(ps, &a);
        if (r < 0)
            goto fail;
        args[n++] = a;
        skip_space(ps);
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p != ')') {
            r = perr(ps, ps->p, "expected ',' or ')' in call to '%s'", name);
            goto fail;
        }
        ps->p++;
        break;
    }
    if ((int)n != expr_op_arity(op)) {
        r = perr(ps, at,
                 expr_op_arity(op) == 1 ? "'%s' takes one argument" : "'%s' takes two arguments",
                 name);
        goto fail;
    }
    *out = expr_new_op(op, args[0], args[1]);
    return *out ? 0 : -ENOMEM;
fail:
    expr_free(args[0]);
    expr_free(args[1]);
    return r;
}

static int parse_name(struct parser *ps, expr **out)
{
    const char *at = ps->p, *start;
    size_t len;
    bool quoted = *ps->p == '"';

    if (quoted) {
        start = ++ps->p;
        while (*ps->p && *ps->p != '"')
            ps->p++;
        if (!*ps->p)
            return perr(ps, at, "%s", "unterminated quoted name");
        len = (size_t)(ps->p++ - start);
    } else {
        start = ps->p;
        while (is_name_char(*ps->p))
            ps->p++;
        len = (size_t)(ps->p - start);
    }
    char *name = strndup(start, len);
    if (!name)
        return -ENOMEM;
    skip_space(ps);
    int r = !quoted && *ps->p == '(' ? parse_call(ps, at, name, out) : parse_var(ps, at, name, out);
    free(name);
    return r;
}

static int parse_number(struct parser *ps, bool negate, expr **out)
{
    char *end;
    double v = strtod(ps->p, &end);

    if (end == ps->p || !isfinite(v))
        return perr(ps, ps->p, "%s", "bad number");
    ps->p = end;
    if (is_name_char(*end) || *end == '.')
        return perr(ps, end, "unexpected '%.1s' after a number", end);
    *out = expr_new_const(negate ? -v : v);
    return *out ? 0 : -ENOMEM;
}

static int parse_primary(struct parser *ps, expr **out)
{
    skip_space(ps);
    char ch = *ps->p;

    if ((ch >= '0' && ch <= '9') || ch == '.')
        return parse_number(ps, false, out);
    if (is_name_start(ch) || ch == '"')
        return parse_name(ps, out);
    if (ch == '(') {
        const char *open = ps->p++;
        int r = parse_sum(ps, out);
        if (r < 0)
            return r;
        skip_space(ps);
        if (*ps->p != ')') {
            expr_free(*out);
            if (*ps->p)
                return perr(ps, ps->p, "%s", "expected ')'");
            return perr(ps, open, "%s", "'(' is never closed");
        }
        ps->p++;
        return 0;
    }
    if (!ch)
        return perr(ps, ps->p, "%s", "unexpected end of expression");
    return perr(ps, ps->p, "unexpected '%.1s'", ps->p);
}

static int parse_unary(struct parser *ps, expr **out)
{
    skip_space(ps);
    if (*ps->p != '-')
        return parse_primary(ps, out);
    ps->p++;
    skip_space(ps);
    /* "-3" is the constant -3, so printing and parsing agree. */
    if ((*ps->p >= '0' && *ps->p <= '9') || *ps->p == '.')
        return parse_number(ps, true, out);
    if (++ps->depth > PARSE_MAX_DEPTH)
        return perr(ps, ps->p, "%s", "expression nested too deeply");
    expr *a;
    int r = parse_unary(ps, &a);
    ps->depth--;
    if (r < 0)
        return r;
    *out = expr_new_op(EXPR_NEG, a, NULL);
    return *out ? 0 : -ENOMEM;
}

/* One left-associative level: operands from `next`, operators o1 and o2. */
static int parse_level(struct parser *ps, expr **out, int (*next)(struct parser *, expr **),
                       char c1, enum expr_op o1, char c2, enum expr_op o2)
{
    expr *acc, *b;
    int r = next(ps, &acc);

    if (r < 0)
        return r;
    for (;;) {
        skip_space(ps);
        char ch = *ps->p;
        if (ch != c1 && ch != c2)
            break;
        ps->p++;
        r = next(ps, &b);
        if (r < 0) {
            expr_free(acc);
            return r;
        }
        acc = expr_new_op(ch == c1 ? o1 : o2, acc, b);
        if (!acc)
            return -ENOMEM;
    }
    *out = acc;
    return 0;
}

static int parse_product(struct parser *ps, expr **out)
{
    return parse_level(ps, out, parse_unary, '*', EXPR_MUL, '/', EXPR_DIV);
}

static int parse_sum(struct parser *ps, expr **out)
{
    if (++ps->depth > PARSE_MAX_DEPTH)
        return perr(ps, ps->p, "%s", "expression nested too deeply");
    int r = parse_level(ps, out, parse_product, '+', EXPR_ADD, '-', EXPR_SUB);
    ps->depth--;
    return r;
}

int expr_parse(const char *text, const char *const *vars, size_t n_vars, expr **out, char *err,
               size_t errlen)
{
    struct parser ps = {
        .text = text, .p = text, .vars = vars, .n_vars = n_vars, .err = err, .errlen = errlen};
    expr *e;
    int r = parse_sum(&ps, &e);

    if (r < 0)
        return r;
    skip_space(&ps);
    if (*ps.p) {
        expr_free(e);
        return perr(&ps, ps.p, "unexpected '%.1s'", ps.p);
    }
    *out = e;
    return 0;
}

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

static bool same_subtree(const expr *d, size_t a, size_t a_end, size_t b, size_t b_end)
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

/* Keeps only nodes [from, to) of the subtree at s: the node at s is dropped
 * and the run moves down. */
static void keep_range(expr *d, size_t s, size_t from, size_t to)
{
    memmove(d->node + s, d->node + from, (to - from) * sizeof(*d->node));
    d->n = s + (to - from);
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
        set_const(d, s, expr_op_apply(op, d->node[a].c, d->node[m].c));
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
            expr_subtree_end(d, a + 1) == m - 1) { /* (y +- c1) + c2 */
            double c1 = d->node[a].op == EXPR_ADD ? d->node[m - 1].c : -d->node[m - 1].c;
            d->node[m - 1].c = c1 + d->node[m].c;
            d->node[a].op = EXPR_ADD;
            keep_range(d, s, a, m);
            return 0;
        }
        if (d->node[m].op == EXPR_MUL && is_const(d, m + 1) && d->node[m + 1].c < 0) {
            d->node[s].op = EXPR_SUB; /* x + (-c * y) -> x - c * y */
            d->node[m + 1].c = -d->node[m + 1].c;
            return 0;
        }
        if (same_subtree(d, a, m, m, e)) { /* x + x -> 2 * x */
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
            expr_subtree_end(d, a + 1) == m - 1) { /* (y +- c1) - c2 */
            double c1 = d->node[a].op == EXPR_ADD ? d->node[m - 1].c : -d->node[m - 1].c;
            d->node[m - 1].c = c1 - d->node[m].c;
            d->node[a].op = EXPR_ADD;
            keep_range(d, s, a, m);
            return 0;
        }
        if (d->node[m].op == EXPR_MUL && is_const(d, m + 1) && d->node[m + 1].c < 0) {
            d->node[s].op = EXPR_ADD; /* x - (-c * y) -> x + c * y */
            d->node[m + 1].c = -d->node[m + 1].c;
            return 0;
        }
        if (same_subtree(d, a, m, m, e)) {
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
        if (ca && d->node[m].op == EXPR_MUL && is_const(d, m + 1)) { /* c1 * (c2 * y) */
            d->node[m + 1].c *= d->node[a].c;
            keep_range(d, s, m, e);
            return 0;
        }
        if (ca && d->node[m].op == EXPR_NEG) { /* c * -y -> (-c) * y */
            d->node[a].c = -d->node[a].c;
            keep_range(d, m, m + 1, e);
            return 0;
        }
        if (same_subtree(d, a, m, m, e)) {
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
        if (same_subtree(d, a, m, m, e)) { /* x/x is 1 even at 0 (protected) */
            set_const(d, s, 1);
            return 0;
        }
        break;
    default:
        if (same_subtree(d, a, m, m, e)) { /* max(x,x), min(x,x) */
            keep_range(d, s, a, m);
            return 0;
        }
        break;
    }
    *changed = false;
    return 0;
}

static int simplify_unary(expr *d, size_t s, bool *changed)
{
    enum expr_op op = d->node[s].op;
    size_t a = s + 1;

    *changed = true;
    if (is_const(d, a)) {
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
    *changed = false;
    return 0;
}

/* Appends the simplified subtree of src at i to d; *next gets the index
 * after it in src. */
static int simplify_into(const expr *src, size_t i, expr *d, size_t *next, bool *changed)
{
    const struct expr_node *nd = &src->node[i];
    int arity = op_info[nd->op].arity, r;
    size_t s = d->n, m = 0, j = i + 1;
    bool ch = false;

    r = reserve(d, d->n + 1);
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

/* The shortest %g form that reads back as the same double. */
static void print_number(FILE *f, double v)
{
    char buf[40];

    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof(buf), "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, f);
}

static void print_name(FILE *f, const char *name)
{
    bool plain = is_name_start(name[0]);

    for (const char *p = name; *p && plain; p++)
        plain = is_name_char(*p);
    /* A feature named like a function would read back as a call only when
     * followed by '(', which printing never does, so plain names stay bare. */
    fprintf(f, plain ? "%s" : "\"%s\"", name);
}

static size_t print_node(FILE *f, const expr *e, size_t i, const char *const *vars, int min_prec)
{
    const struct expr_node *nd = &e->node[i];
    int prec = node_prec(nd), arity = op_info[nd->op].arity;
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
        fprintf(f, "%s(", op_info[nd->op].name);
        for (int k = 0; k < arity; k++) {
            if (k)
                fputs(", ", f);
            j = print_node(f, e, j, vars, PREC_SUM);
        }
        fputc(')', f);
    } else {
        static const char sym[EXPR_N_OPS] = {
            [EXPR_ADD] = '+', [EXPR_SUB] = '-', [EXPR_MUL] = '*', [EXPR_DIV] = '/'};
        j = print_node(f, e, j, vars, prec);
        fprintf(f, " %c ", sym[nd->op]);
        j = print_node(f, e, j, vars, prec + 1);
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

/* ---- Levenberg-Marquardt on the constants ------------------------------ */

struct fit_ctx {
    const expr *e;
    const double *const *cols;
    const double *y, *w; /* w may be NULL: unit weights */
    size_t n, p;
    double *val, *jac; /* n and p*n scratch */
};

static int fit_f(const gsl_vector *x, void *data, gsl_vector *f)
{
    struct fit_ctx *ctx = data;
    expr *e = (expr *)ctx->e;

    expr_set_consts(e, x->data);
    if (!expr_eval(e, ctx->cols, ctx->n, ctx->val))
        return GSL_EDOM;
    for (size_t i = 0; i < ctx->n; i++)
        f->data[i * f->stride] = (ctx->val[i] - ctx->y[i]) * (ctx->w ? ctx->w[i] : 1);
    return GSL_SUCCESS;
}

static int fit_df(const gsl_vector *x, void *data, gsl_matrix *J)
{
    struct fit_ctx *ctx = data;
    expr *e = (expr *)ctx->e;

    expr_set_consts(e, x->data);
    if (!expr_eval_jac(e, ctx->cols, ctx->n, ctx->val, ctx->jac))
        return GSL_EDOM;
    for (size_t i = 0; i < ctx->n; i++)
        for (size_t k = 0; k < ctx->p; k++)
            J->data[i * J->tda + k] = ctx->jac[k * ctx->n + i] * (ctx->w ? ctx->w[i] : 1);
    return GSL_SUCCESS;
}

static double rss_of(const struct fit_ctx *ctx)
{
    double s = 0;

    if (!expr_eval(ctx->e, ctx->cols, ctx->n, ctx->val))
        return INFINITY;
    for (size_t i = 0; i < ctx->n; i++) {
        double r = (ctx->val[i] - ctx->y[i]) * (ctx->w ? ctx->w[i] : 1);
        s += r * r;
    }
    return isfinite(s) ? s : INFINITY;
}

/* Runs the solver from the current constants; leaves the best constants it
 * found in `e`. */
static void fit_run(struct fit_ctx *ctx, expr *e, int max_iter, double *best)
{
    gsl_multifit_nlinear_fdf fdf = {
        .f = fit_f, .df = fit_df, .n = ctx->n, .p = ctx->p, .params = ctx};
    gsl_multifit_nlinear_parameters par = gsl_multifit_nlinear_default_parameters();
    gsl_multifit_nlinear_workspace *w;
    int info;
    double start[ctx->p];

    expr_get_consts(e, start);
    gsl_vector_view x0 = gsl_vector_view_array(start, ctx->p);
    par.trs = gsl_multifit_nlinear_trs_lm;
    /* Normal equations: with LM's damping they stay well posed, and for a
     * handful of constants they are much cheaper than QR of the n x p
     * Jacobian. */
    par.solver = gsl_multifit_nlinear_solver_cholesky;

    w = gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &par, ctx->n, ctx->p);
    if (!w)
        return;
    if (gsl_multifit_nlinear_init(&x0.vector, &fdf, w) == GSL_SUCCESS) {
        gsl_multifit_nlinear_driver((size_t)max_iter, 1e-12, 1e-12, 0, NULL, NULL, &info, w);
        /* The trust region only accepts steps that lower the cost, so w->x
         * is the best point visited; it is still checked, because a failed
         * evaluation can stop the driver part-way. */
        expr_set_consts(e, w->x->data);
        double rss = rss_of(ctx);
        if (rss <= *best)
            *best = rss;
        else
            expr_set_consts(e, start);
    } else {
        expr_set_consts(e, start);
    }
    gsl_multifit_nlinear_free(w);
}

int expr_fit_consts(expr *e, const double *const *cols, const double *y, size_t n, int max_iter,
                    double *rss)
{
    return expr_fit_consts_weighted(e, cols, y, NULL, n, max_iter, rss);
}

int expr_fit_consts_weighted(expr *e, const double *const *cols, const double *y, const double *w,
                             size_t n, int max_iter, double *rss)
{
    struct fit_ctx ctx = {.e = e, .cols = cols, .y = y, .w = w, .n = n, .p = expr_n_consts(e)};
    double best;

    ctx.val = malloc((n ? n : 1) * sizeof(double));
    ctx.jac = malloc((n * ctx.p > 0 ? n * ctx.p : 1) * sizeof(double));
    if (!ctx.val || !ctx.jac) {
        free(ctx.val);
        free(ctx.jac);
        return -ENOMEM;
    }
    best = rss_of(&ctx);
    /* GSL needs at least as many points as parameters. */
    if (ctx.p > 0 && n >= ctx.p && max_iter > 0)
        fit_run(&ctx, e, max_iter, &best);
    if (rss)
        *rss = best;
    free(ctx.val);
    free(ctx.jac);
    return 0;
}
