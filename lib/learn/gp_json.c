/* gp_json: a conditioned Gaussian process as a JSON document
 * ("wattprof-gp/1"), complete enough to reproduce its predictions: kernel,
 * input scaling, hyperparameters, mean function, training inputs and the
 * weights alpha = K^-1 (y - m(X)); and the model back from one. */
#include "learn/gp_internal.h"
#include "util/util.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_object *array(const double *v, size_t n)
{
    json_object *a = json_object_new_array_ext((int)n);

    for (size_t i = 0; a && i < n; i++)
        json_object_array_add(a, json_object_new_double(v[i]));
    return a;
}

static json_object *params(const gp_model *m)
{
    size_t p = gp_n_params(m);
    double theta[p ? p : 1], lo, hi;
    char name[160];
    json_object *a = json_object_new_array();

    gp_get_params(m, theta);
    for (size_t i = 0; a && i < p; i++) {
        json_object *o = json_object_new_object();
        bool lg = gp_param_is_log(m, i);
        gp_param_name(m, i, name, sizeof(name));
        gp_param_bounds(m, i, &lo, &hi);
        json_object_object_add(o, "name", json_object_new_string(name));
        json_object_object_add(o, "value", json_object_new_double(lg ? exp(theta[i]) : theta[i]));
        if (lg) {
            json_object_object_add(o, "log_value", json_object_new_double(theta[i]));
            json_object_object_add(o, "bounds", json_object_new_array());
            json_object_array_add(json_object_object_get(o, "bounds"),
                                  json_object_new_double(exp(lo)));
            json_object_array_add(json_object_object_get(o, "bounds"),
                                  json_object_new_double(exp(hi)));
        }
        json_object_array_add(a, o);
    }
    return a;
}

char *gp_to_json(const gp_model *m)
{
    json_object *root = json_object_new_object(), *f = json_object_new_array(), *x;
    char *mean = gp_meanfn_text(m->mean, (const char *const *)m->features), *out = NULL;

    if (!root || !f || !mean)
        goto done;
    json_object_object_add(root, "format", json_object_new_string("wattprof-gp/1"));
    for (size_t j = 0; j < m->d; j++)
        json_object_array_add(f, json_object_new_string(m->features[j]));
    json_object_object_add(root, "features", f);
    f = NULL;
    json_object_object_add(root, "kernel", json_object_new_string(m->kernel_spec));
    json_object_object_add(root, "ard", json_object_new_boolean(m->ard));
    json_object_object_add(root, "scaler", x = json_object_new_object());
    json_object_object_add(x, "shift", array(m->shift, m->d));
    json_object_object_add(x, "scale", array(m->scale, m->d));
    json_object_object_add(root, "mean", json_object_new_string(mean));
    json_object_object_add(root, "params", params(m));
    json_object_object_add(root, "log_marginal_likelihood", json_object_new_double(m->lml));
    json_object_object_add(root, "jitter", json_object_new_double(m->jitter));
    json_object_object_add(root, "n", json_object_new_uint64(m->n));
    json_object_object_add(root, "x", x = json_object_new_array());
    for (size_t j = 0; j < m->d; j++)
        json_object_array_add(x, array(m->raw + j * m->n, m->n));
    json_object_object_add(root, "alpha", array(m->alpha, m->n));
    out = strdup(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
                                                          JSON_C_TO_STRING_NOSLASHESCAPE));
done:
    json_object_put(f);
    json_object_put(root);
    free(mean);
    return out;
}

const char *const *gp_features(const gp_model *m, size_t *d)
{
    *d = m->d;
    return (const char *const *)m->features;
}

/* The member `key` of `o` with type `t`, or NULL after an error naming it. */
static json_object *member(json_object *o, const char *key, json_type t, const char *origin,
                           char *err, size_t errlen)
{
    json_object *v;

    if (json_object_object_get_ex(o, key, &v) && json_object_is_type(v, t))
        return v;
    if (t == json_type_double && v && json_object_is_type(v, json_type_int))
        return v;
    util_err(err, errlen, -EINVAL, "%s: \"%s\" is missing or not %s", origin, key,
             t == json_type_array    ? "an array"
             : t == json_type_string ? "a string"
             : t == json_type_object ? "an object"
             : t == json_type_double ? "a number"
                                     : "true or false");
    return NULL;
}

/* n numbers from the array a into out; what names it in errors. */
static int numbers(json_object *a, size_t n, double *out, const char *origin, const char *what,
                   char *err, size_t errlen)
{
    if (!a || !json_object_is_type(a, json_type_array) || json_object_array_length(a) != n)
        return util_err(err, errlen, -EINVAL, "%s: %s must be an array of %zu numbers", origin,
                        what, n);
    for (size_t i = 0; i < n; i++) {
        json_object *v = json_object_array_get_idx(a, i);
        if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
            return util_err(err, errlen, -EINVAL, "%s: %s[%zu] is not a number", origin, what, i);
        out[i] = json_object_get_double(v);
        if (!isfinite(out[i]))
            return util_err(err, errlen, -EINVAL, "%s: %s[%zu] is not finite", origin, what, i);
    }
    return 0;
}

/* A new model from the document's features, kernel and mean. The mean is
 * kept as written: its text holds every constant exactly (printed to read
 * back the same), so its "mean.*" entries in "params" are only a record. */
static int model_from(json_object *root, const char *origin, gp_model **out, char *err,
                      size_t errlen)
{
    json_object *f, *k, *ard, *mean;
    gp_config cfg = {0};
    size_t d;
    int r;

    if (!(f = member(root, "features", json_type_array, origin, err, errlen)) ||
        !(k = member(root, "kernel", json_type_string, origin, err, errlen)) ||
        !(ard = member(root, "ard", json_type_boolean, origin, err, errlen)) ||
        !(mean = member(root, "mean", json_type_string, origin, err, errlen)))
        return -EINVAL;
    d = json_object_array_length(f);
    const char *names[d ? d : 1];
    for (size_t j = 0; j < d; j++) {
        json_object *s = json_object_array_get_idx(f, j);
        if (!json_object_is_type(s, json_type_string))
            return util_err(err, errlen, -EINVAL, "%s: features[%zu] is not a string", origin, j);
        names[j] = json_object_get_string(s);
    }
    cfg = (gp_config){json_object_get_string(k), json_object_get_boolean(ard), true,
                      json_object_get_string(mean), false};
    r = gp_new(&cfg, names, d, out, err, errlen);
    if (r < 0 && r != -ENOMEM) {
        char why[UTIL_ERRLEN];
        snprintf(why, sizeof(why), "%s", err);
        util_err(err, errlen, r, "%s: %s", origin, why);
    }
    return r;
}

/* The kernel's hyperparameters, in gp_get_params's order, from "params";
 * the mean's entries follow them. */
static int params_from(gp_model *m, json_object *ps, const char *origin, char *err, size_t errlen)
{
    size_t p = gp_n_params(m);
    double theta[p ? p : 1];
    json_object *v;

    if (json_object_array_length(ps) < p)
        return util_err(err, errlen, -EINVAL,
                        "%s: \"params\" has %zu entries, the kernel needs %zu", origin,
                        json_object_array_length(ps), p);
    for (size_t i = p; i < json_object_array_length(ps); i++) {
        json_object *o = json_object_array_get_idx(ps, i);
        if (!json_object_object_get_ex(o, "name", &v) ||
            strncmp(json_object_get_string(v), "mean.", 5))
            return util_err(err, errlen, -EINVAL,
                            "%s: params[%zu] is neither the kernel's nor the mean's", origin, i);
    }
    for (size_t i = 0; i < p; i++) {
        json_object *o = json_object_array_get_idx(ps, i);
        const char *key = gp_param_is_log(m, i) ? "log_value" : "value";
        if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v) ||
            !(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)) ||
            !isfinite(theta[i] = json_object_get_double(v)))
            return util_err(err, errlen, -EINVAL, "%s: params[%zu] has no finite \"%s\"", origin, i,
                            key);
    }
    gp_set_params(m, theta);
    return 0;
}

/* Scaling, training inputs and weights, then the conditioning. */
static int state_from(gp_model *m, json_object *root, const char *origin, char *err, size_t errlen)
{
    json_object *sc, *x, *alpha, *nv, *jit, *lml;
    size_t d = m->d, n;
    double *raw = NULL, *a = NULL;
    int r = -EINVAL;

    if (!(sc = member(root, "scaler", json_type_object, origin, err, errlen)) ||
        !(x = member(root, "x", json_type_array, origin, err, errlen)) ||
        !(alpha = member(root, "alpha", json_type_array, origin, err, errlen)) ||
        !(nv = member(root, "n", json_type_int, origin, err, errlen)) ||
        !(jit = member(root, "jitter", json_type_double, origin, err, errlen)) ||
        !(lml = member(root, "log_marginal_likelihood", json_type_double, origin, err, errlen)))
        return -EINVAL;
    if (json_object_get_int64(nv) < 1)
        return util_err(err, errlen, -EINVAL, "%s: \"n\" must be a positive count", origin);
    n = (size_t)json_object_get_int64(nv);
    if (json_object_array_length(x) != d)
        return util_err(err, errlen, -EINVAL, "%s: \"x\" must hold %zu columns, one a feature",
                        origin, d);
    raw = malloc(n * (d ? d : 1) * sizeof(double));
    a = malloc(n * sizeof(double));
    if (!raw || !a) {
        r = -ENOMEM;
        goto out;
    }
    if ((r = numbers(json_object_object_get(sc, "shift"), d, m->shift, origin, "scaler.shift", err,
                     errlen)) < 0 ||
        (r = numbers(json_object_object_get(sc, "scale"), d, m->scale, origin, "scaler.scale", err,
                     errlen)) < 0 ||
        (r = numbers(alpha, n, a, origin, "alpha", err, errlen)) < 0)
        goto out;
    for (size_t j = 0; r == 0 && j < d; j++) {
        char what[32];
        snprintf(what, sizeof(what), "x[%zu]", j);
        r = numbers(json_object_array_get_idx(x, j), n, raw + j * n, origin, what, err, errlen);
    }
    for (size_t j = 0; r == 0 && j < d; j++)
        if (!(m->scale[j] > 0))
            r = util_err(err, errlen, -EINVAL, "%s: scaler.scale[%zu] is not positive", origin, j);
    if (r < 0)
        goto out;
    r = gp_restore(m, raw, n, a, json_object_get_double(jit), json_object_get_double(lml));
    if (r == -EDOM)
        util_err(err, errlen, r,
                 "%s: the saved model cannot be conditioned again (K is not positive definite "
                 "or its mean is not finite on the training inputs)",
                 origin);
out:
    free(raw);
    free(a);
    return r;
}

int gp_from_json(const char *text, const char *origin, gp_model **out, char *err, size_t errlen)
{
    json_object *root = json_tokener_parse(text), *fmt, *ps;
    gp_model *m = NULL;
    int r = -EINVAL;

    if (!root || !json_object_is_type(root, json_type_object)) {
        util_err(err, errlen, r, "%s: not a JSON object", origin);
        goto out;
    }
    if (!(fmt = member(root, "format", json_type_string, origin, err, errlen)))
        goto out;
    if (strcmp(json_object_get_string(fmt), "wattprof-gp/1")) {
        util_err(err, errlen, r, "%s: format is \"%s\", not \"wattprof-gp/1\"", origin,
                 json_object_get_string(fmt));
        goto out;
    }
    if (!(ps = member(root, "params", json_type_array, origin, err, errlen)))
        goto out;
    r = model_from(root, origin, &m, err, errlen);
    if (r == 0)
        r = params_from(m, ps, origin, err, errlen);
    if (r == 0)
        r = state_from(m, root, origin, err, errlen);
out:
    json_object_put(root);
    if (r == -ENOMEM)
        util_err(err, errlen, r, "out of memory");
    if (r < 0) {
        gp_free(m);
        return r;
    }
    *out = m;
    return 0;
}
