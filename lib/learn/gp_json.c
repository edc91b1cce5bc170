/* gp_json: a conditioned Gaussian process as a JSON document
 * ("wattprof-gp/1"), complete enough to reproduce its predictions: kernel,
 * input scaling, hyperparameters, mean function, training inputs and the
 * weights alpha = K^-1 (y - m(X)). */
#include "learn/gp_internal.h"

#include <json-c/json.h>
#include <math.h>
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
