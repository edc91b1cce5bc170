/* gp_kernel: covariance functions of the Gaussian process and their
 * derivatives with respect to the log hyperparameters.
 *
 * The gradient of the log marginal likelihood only ever needs
 * sum_ab W_ab dK_ab/dtheta for one symmetric W, so each kernel accumulates
 * that sum directly instead of building a derivative matrix per parameter;
 * a product passes its factors W times the other factors' matrices. */
#include "learn/gp_kernel.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum gpk_type {
    GPK_RBF,
    GPK_M12,
    GPK_M32,
    GPK_M52,
    GPK_LINEAR,
    GPK_CONST,
    GPK_WHITE,
    GPK_SUM,
    GPK_PROD
};

static const char *const type_names[] = {"rbf",    "matern12", "matern32", "matern52",
                                         "linear", "const",    "white"};

struct gp_kernel {
    enum gpk_type type;
    size_t d;
    bool ard;
    int occurrence; /* 1 for the first base kernel of its type, 2 for the next... */
    size_t n_kids;
    gp_kernel **kids;
    size_t n_params; /* own parameters (base kernels only) */
    double *theta, *lo, *hi;
};

#define LOG_BOUND 11.512925464970229 /* log(1e5): bounds 1e-5..1e5, as scikit-learn */

static bool stationary(enum gpk_type t)
{
    return t <= GPK_M52;
}

static gp_kernel *new_node(enum gpk_type type, size_t d, bool ard)
{
    gp_kernel *k = calloc(1, sizeof(*k));

    if (!k)
        return NULL;
    k->type = type;
    k->d = d;
    k->ard = ard;
    if (stationary(type))
        k->n_params = 1 + (ard ? d : 1); /* variance, length scale(s) */
    else if (type == GPK_LINEAR)
        k->n_params = 2; /* bias, weight variance */
    else if (type == GPK_CONST || type == GPK_WHITE)
        k->n_params = 1;
    if (k->n_params) {
        k->theta = calloc(k->n_params, sizeof(double));
        k->lo = malloc(k->n_params * sizeof(double));
        k->hi = malloc(k->n_params * sizeof(double));
        if (!k->theta || !k->lo || !k->hi) {
            gp_kernel_free(k);
            return NULL;
        }
        for (size_t i = 0; i < k->n_params; i++) {
            k->lo[i] = -LOG_BOUND;
            k->hi[i] = LOG_BOUND;
        }
    }
    return k;
}

void gp_kernel_free(gp_kernel *k)
{
    if (!k)
        return;
    for (size_t i = 0; i < k->n_kids; i++)
        gp_kernel_free(k->kids[i]);
    free(k->kids);
    free(k->theta);
    free(k->lo);
    free(k->hi);
    free(k);
}

static int add_kid(gp_kernel *parent, gp_kernel *kid)
{
    gp_kernel **n = realloc(parent->kids, (parent->n_kids + 1) * sizeof(*n));

    if (!n)
        return -ENOMEM;
    parent->kids = n;
    parent->kids[parent->n_kids++] = kid;
    return 0;
}

gp_kernel *gp_kernel_clone(const gp_kernel *k)
{
    gp_kernel *c = new_node(k->type, k->d, k->ard);

    if (!c)
        return NULL;
    c->occurrence = k->occurrence;
    if (k->n_params) {
        memcpy(c->theta, k->theta, k->n_params * sizeof(double));
        memcpy(c->lo, k->lo, k->n_params * sizeof(double));
        memcpy(c->hi, k->hi, k->n_params * sizeof(double));
    }
    for (size_t i = 0; i < k->n_kids; i++) {
        gp_kernel *kid = gp_kernel_clone(k->kids[i]);
        if (!kid || add_kid(c, kid) < 0) {
            gp_kernel_free(kid);
            gp_kernel_free(c);
            return NULL;
        }
    }
    return c;
}

/* Parses one base kernel name spanning spec[start, end). */
static int parse_base(const char *spec, size_t start, size_t end, size_t d, bool ard, int counts[],
                      gp_kernel **out, char *err, size_t errlen)
{
    while (start < end && spec[start] == ' ')
        start++;
    while (end > start && spec[end - 1] == ' ')
        end--;
    for (size_t t = 0; t < sizeof(type_names) / sizeof(type_names[0]); t++) {
        if (strlen(type_names[t]) == end - start &&
            !strncmp(spec + start, type_names[t], end - start)) {
            *out = new_node((enum gpk_type)t, d, ard);
            if (!*out)
                return -ENOMEM;
            (*out)->occurrence = ++counts[t];
            return 0;
        }
    }
    return util_err(err, errlen, -EINVAL,
                    "kernel:1:%zu: unknown kernel '%.*s' (known: rbf, matern12, matern32, "
                    "matern52, linear, const, white, joined by + and *)",
                    start + 1, (int)(end - start), spec + start);
}

/* Parses a product of base kernels spanning spec[start, end). */
static int parse_term(const char *spec, size_t start, size_t end, size_t d, bool ard, int counts[],
                      gp_kernel **out, char *err, size_t errlen)
{
    gp_kernel *prod = NULL, *base = NULL;
    size_t s = start;
    int r;

    for (size_t i = start; i <= end; i++) {
        if (i < end && spec[i] != '*')
            continue;
        r = parse_base(spec, s, i, d, ard, counts, &base, err, errlen);
        if (r < 0)
            goto fail;
        if (s == start && (i == end)) {
            *out = base; /* a single factor needs no product node */
            return 0;
        }
        if (!prod && !(prod = new_node(GPK_PROD, d, ard))) {
            gp_kernel_free(base);
            return -ENOMEM;
        }
        if ((r = add_kid(prod, base)) < 0) {
            gp_kernel_free(base);
            goto fail;
        }
        s = i + 1;
    }
    *out = prod;
    return 0;
fail:
    gp_kernel_free(prod);
    return r;
}

int gp_kernel_parse(const char *spec, size_t d, bool ard, gp_kernel **out, char *err, size_t errlen)
{
    int counts[sizeof(type_names) / sizeof(type_names[0])] = {0};
    size_t len = strlen(spec), s = 0, n_terms = 1;
    gp_kernel *sum = NULL, *term;
    int r;

    for (size_t i = 0; i < len; i++)
        n_terms += spec[i] == '+';
    for (size_t i = 0; i <= len; i++) {
        if (i < len && spec[i] != '+')
            continue;
        r = parse_term(spec, s, i, d, ard, counts, &term, err, errlen);
        if (r < 0)
            goto fail;
        if (n_terms == 1) {
            *out = term;
            return 0;
        }
        if (!sum && !(sum = new_node(GPK_SUM, d, ard))) {
            gp_kernel_free(term);
            return -ENOMEM;
        }
        if ((r = add_kid(sum, term)) < 0) {
            gp_kernel_free(term);
            goto fail;
        }
        s = i + 1;
    }
    *out = sum;
    return 0;
fail:
    gp_kernel_free(sum);
    return r;
}

size_t gp_kernel_n_params(const gp_kernel *k)
{
    size_t n = k->n_params;

    for (size_t i = 0; i < k->n_kids; i++)
        n += gp_kernel_n_params(k->kids[i]);
    return n;
}

/* Calls visit(node, offset) on every base kernel in order, with the offset of
 * its first parameter in the flat vector. */
static size_t walk_get(const gp_kernel *k, size_t off, double *theta, double *lo, double *hi)
{
    for (size_t i = 0; i < k->n_params; i++) {
        if (theta)
            theta[off + i] = k->theta[i];
        if (lo)
            lo[off + i] = k->lo[i];
        if (hi)
            hi[off + i] = k->hi[i];
    }
    off += k->n_params;
    for (size_t i = 0; i < k->n_kids; i++)
        off = walk_get(k->kids[i], off, theta, lo, hi);
    return off;
}

void gp_kernel_get(const gp_kernel *k, double *theta, double *lo, double *hi)
{
    walk_get(k, 0, theta, lo, hi);
}

static size_t walk_set(gp_kernel *k, size_t off, const double *theta)
{
    if (k->n_params)
        memcpy(k->theta, theta + off, k->n_params * sizeof(double));
    off += k->n_params;
    for (size_t i = 0; i < k->n_kids; i++)
        off = walk_set(k->kids[i], off, theta);
    return off;
}

void gp_kernel_set(gp_kernel *k, const double *theta)
{
    walk_set(k, 0, theta);
}

/* Base kernel owning flat parameter *i; *i becomes its index there. */
static gp_kernel *owner(const gp_kernel *k, size_t *i)
{
    if (*i < k->n_params)
        return (gp_kernel *)k;
    *i -= k->n_params;
    for (size_t j = 0; j < k->n_kids; j++) {
        size_t n = gp_kernel_n_params(k->kids[j]);
        if (*i < n)
            return owner(k->kids[j], i);
        *i -= n;
    }
    return NULL;
}

void gp_kernel_set_bounds(gp_kernel *k, size_t i, double lo, double hi)
{
    gp_kernel *o = owner(k, &i);

    if (o) {
        o->lo[i] = lo;
        o->hi[i] = hi;
    }
}

void gp_kernel_param_name(const gp_kernel *k, size_t i, const char *const *features, char *buf,
                          size_t len)
{
    gp_kernel *o = owner(k, &i);
    char base[32];
    const char *what = "?";

    if (!o) {
        snprintf(buf, len, "?");
        return;
    }
    if (o->occurrence > 1)
        snprintf(base, sizeof(base), "%s_%d", type_names[o->type], o->occurrence);
    else
        snprintf(base, sizeof(base), "%s", type_names[o->type]);
    if (stationary(o->type) && i > 0) {
        if (o->ard)
            snprintf(buf, len, "%s.length_scale[%s]", base, features[i - 1]);
        else
            snprintf(buf, len, "%s.length_scale", base);
        return;
    }
    switch (o->type) {
    case GPK_LINEAR:
        what = i == 0 ? "bias" : "variance";
        break;
    case GPK_CONST:
        what = "value";
        break;
    case GPK_WHITE:
        what = "noise";
        break;
    default:
        what = "variance";
    }
    snprintf(buf, len, "%s.%s", base, what);
}

/* Correlation f(r) of a stationary kernel at scaled distance r, and
 * g(r) = -f'(r)/r, which turns into the length-scale derivatives. */
static void correlation(enum gpk_type t, double r, double *f, double *g)
{
    static const double s3 = 1.7320508075688772, s5 = 2.2360679774997896;
    double e;

    switch (t) {
    case GPK_RBF:
        *f = *g = exp(-0.5 * r * r);
        break;
    case GPK_M12:
        *f = exp(-r);
        *g = r > 0 ? *f / r : 0; /* multiplied by a zero distance at r = 0 */
        break;
    case GPK_M32:
        e = exp(-s3 * r);
        *f = (1 + s3 * r) * e;
        *g = 3 * e;
        break;
    default: /* GPK_M52 */
        e = exp(-s5 * r);
        *f = (1 + s5 * r + 5.0 / 3.0 * r * r) * e;
        *g = 5.0 / 3.0 * (1 + s5 * r) * e;
    }
}

/* Copies n points scaled by the kernel's length scales (malloc'd). */
static double *scaled(const gp_kernel *k, const double *A, size_t n)
{
    double *S = malloc((n ? n : 1) * k->d * sizeof(double));
    double inv[k->d ? k->d : 1];

    if (!S)
        return NULL;
    for (size_t j = 0; j < k->d; j++)
        inv[j] = exp(-k->theta[k->ard ? 1 + j : 1]);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < k->d; j++)
            S[i * k->d + j] = A[i * k->d + j] * inv[j];
    return S;
}

static double dist2(const double *a, const double *b, size_t d)
{
    double s = 0;

    for (size_t j = 0; j < d; j++)
        s += (a[j] - b[j]) * (a[j] - b[j]);
    return s;
}

static double dot(const double *a, const double *b, size_t d)
{
    double s = 0;

    for (size_t j = 0; j < d; j++)
        s += a[j] * b[j];
    return s;
}

static int base_matrix(const gp_kernel *k, const double *A, size_t na, const double *B, size_t nb,
                       bool train, double *out)
{
    double v = exp(k->theta[0]);
    size_t d = k->d;

    if (stationary(k->type)) {
        double *SA = scaled(k, A, na), *SB = train ? SA : scaled(k, B, nb), f, g;
        if (!SA || !SB) {
            free(SA);
            if (!train)
                free(SB);
            return -ENOMEM;
        }
        for (size_t a = 0; a < na; a++)
            for (size_t b = train ? a : 0; b < nb; b++) {
                correlation(k->type, sqrt(dist2(SA + a * d, SB + b * d, d)), &f, &g);
                out[a * nb + b] = v * f;
                if (train)
                    out[b * nb + a] = v * f;
            }
        free(SA);
        if (!train)
            free(SB);
        return 0;
    }
    for (size_t a = 0; a < na; a++)
        for (size_t b = 0; b < nb; b++) {
            switch (k->type) {
            case GPK_LINEAR:
                out[a * nb + b] = v + exp(k->theta[1]) * dot(A + a * d, B + b * d, d);
                break;
            case GPK_CONST:
                out[a * nb + b] = v;
                break;
            default: /* GPK_WHITE */
                out[a * nb + b] = train && a == b ? v : 0;
            }
        }
    return 0;
}

int gp_kernel_matrix(const gp_kernel *k, const double *A, size_t na, const double *B, size_t nb,
                     bool train, double *out)
{
    size_t m = na * nb;
    double *tmp;
    int r = 0;

    if (k->type != GPK_SUM && k->type != GPK_PROD)
        return base_matrix(k, A, na, B, nb, train, out);
    if (!(tmp = malloc((m ? m : 1) * sizeof(double))))
        return -ENOMEM;
    for (size_t i = 0; i < m; i++)
        out[i] = k->type == GPK_SUM ? 0 : 1;
    for (size_t c = 0; c < k->n_kids && r == 0; c++) {
        r = gp_kernel_matrix(k->kids[c], A, na, B, nb, train, tmp);
        for (size_t i = 0; r == 0 && i < m; i++)
            out[i] = k->type == GPK_SUM ? out[i] + tmp[i] : out[i] * tmp[i];
    }
    free(tmp);
    return r;
}

void gp_kernel_diag(const gp_kernel *k, const double *A, size_t n, double *out)
{
    double v = k->n_params ? exp(k->theta[0]) : 0;

    switch (k->type) {
    case GPK_SUM:
    case GPK_PROD: {
        double tmp[64];
        for (size_t i0 = 0; i0 < n; i0 += 64) {
            size_t m = n - i0 < 64 ? n - i0 : 64;
            for (size_t i = 0; i < m; i++)
                out[i0 + i] = k->type == GPK_SUM ? 0 : 1;
            for (size_t c = 0; c < k->n_kids; c++) {
                gp_kernel_diag(k->kids[c], A + i0 * k->d, m, tmp);
                for (size_t i = 0; i < m; i++)
                    out[i0 + i] = k->type == GPK_SUM ? out[i0 + i] + tmp[i] : out[i0 + i] * tmp[i];
            }
        }
        break;
    }
    case GPK_LINEAR:
        for (size_t i = 0; i < n; i++)
            out[i] = v + exp(k->theta[1]) * dot(A + i * k->d, A + i * k->d, k->d);
        break;
    default: /* stationary, const and white: all equal v at distance zero */
        for (size_t i = 0; i < n; i++)
            out[i] = v;
    }
}

static int base_grad(const gp_kernel *k, const double *X, size_t n, const double *W, double *grad)
{
    double v = exp(k->theta[0]);
    size_t d = k->d;

    if (stationary(k->type)) {
        double *S = scaled(k, X, n), f, g, dl[d ? d : 1];
        if (!S)
            return -ENOMEM;
        for (size_t a = 0; a < n; a++) {
            grad[0] += W[a * n + a] * v;
            for (size_t b = a + 1; b < n; b++) {
                const double *sa = S + a * d, *sb = S + b * d;
                double r2 = dist2(sa, sb, d), w = 2 * W[a * n + b];
                correlation(k->type, sqrt(r2), &f, &g);
                grad[0] += w * v * f;
                if (!k->ard) {
                    grad[1] += w * v * g * r2;
                    continue;
                }
                for (size_t j = 0; j < d; j++)
                    dl[j] = (sa[j] - sb[j]) * (sa[j] - sb[j]);
                for (size_t j = 0; j < d; j++)
                    grad[1 + j] += w * v * g * dl[j];
            }
        }
        free(S);
        return 0;
    }
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++) {
            double w = W[a * n + b];
            switch (k->type) {
            case GPK_LINEAR:
                grad[0] += w * v;
                grad[1] += w * exp(k->theta[1]) * dot(X + a * d, X + b * d, d);
                break;
            case GPK_CONST:
                grad[0] += w * v;
                break;
            default: /* GPK_WHITE */
                if (a == b)
                    grad[0] += w * v;
            }
        }
    return 0;
}

/* A factor's weights are W times the product of the other factors. */
static int prod_grad(const gp_kernel *k, const double *X, size_t n, const double *W, double *grad)
{
    size_t m = n * n, off = 0;
    double *mats = malloc((m ? m : 1) * k->n_kids * sizeof(double));
    double *Wc = malloc((m ? m : 1) * sizeof(double));
    int r = mats && Wc ? 0 : -ENOMEM;

    for (size_t c = 0; c < k->n_kids && r == 0; c++)
        r = gp_kernel_matrix(k->kids[c], X, n, X, n, true, mats + c * m);
    for (size_t c = 0; c < k->n_kids && r == 0; c++) {
        memcpy(Wc, W, m * sizeof(double));
        for (size_t o = 0; o < k->n_kids; o++)
            for (size_t i = 0; o != c && i < m; i++)
                Wc[i] *= mats[o * m + i];
        r = gp_kernel_grad(k->kids[c], X, n, Wc, grad + off);
        off += gp_kernel_n_params(k->kids[c]);
    }
    free(mats);
    free(Wc);
    return r;
}

int gp_kernel_grad(const gp_kernel *k, const double *X, size_t n, const double *W, double *grad)
{
    size_t off = 0;
    int r;

    if (k->type == GPK_PROD)
        return prod_grad(k, X, n, W, grad);
    if (k->type != GPK_SUM)
        return base_grad(k, X, n, W, grad);
    for (size_t c = 0; c < k->n_kids; c++) {
        if ((r = gp_kernel_grad(k->kids[c], X, n, W, grad + off)) < 0)
            return r;
        off += gp_kernel_n_params(k->kids[c]);
    }
    return 0;
}
