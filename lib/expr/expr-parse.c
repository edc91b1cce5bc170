/* expr-parse: infix text into expression trees, by recursive descent,
 * with errors that name line and column ("expression:1:7: ..."). */
#include "expr/expr-internal.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Nesting limit, so hostile input cannot overflow the C stack.  The tree
 * may be no deeper than this either: a flat chain like y*7/y*7/... nests
 * nothing but is as deep as it is long, and printing it simplified puts
 * each level in parentheses (7 * (y / ...)), which must parse again. */
#define PARSE_MAX_DEPTH 200

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
        while (expr_is_name_char(*ps->p))
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
    if (expr_is_name_char(*end) || *end == '.')
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
    if (expr_is_name_start(ch) || ch == '"')
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
    /* Printed, each level costs at most one nesting, and the outermost sum
     * one more. */
    if (expr_depth(e) >= PARSE_MAX_DEPTH) {
        char levels[32];
        snprintf(levels, sizeof(levels), "%zu", expr_depth(e));
        expr_free(e);
        return perr(&ps, text, "expression is %s operations deep (at most 199)", levels);
    }
    *out = e;
    return 0;
}
