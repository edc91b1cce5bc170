/* expr_model: model files whose engine is "expr" — an equation over a
 * program's parameters found by `wattprof symreg` (or written by hand), as
 * opposed to the per-event power models of model.c. The equation is in the
 * expression language of lib/expr, which parses and evaluates it. */
#include "expr/expr.h"
#include "model/model.h"
#include "util/util.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

struct model_expr {
    char *name, *target, *text;
    char **features;
    size_t n_features;
    expr *e;
    char sha256[65];
};

void model_expr_free(model_expr *m)
{
    if (!m)
        return;
    free(m->name);
    free(m->target);
    free(m->text);
    util_strv_free(m->features, m->n_features);
    expr_free(m->e);
    free(m);
}

static int expr_fields(model_expr *m, json_object *root, const char *origin, char *err,
                       size_t errlen)
{
    json_object *v, *f;

    if (!json_object_object_get_ex(root, "engine", &v) ||
        strcmp(json_object_get_string(v), "expr") != 0)
        return util_err(err, errlen, -EINVAL, "%s: engine must be \"expr\"", origin);
    if (!json_object_object_get_ex(root, "expression", &v) ||
        !json_object_is_type(v, json_type_string))
        return util_err(err, errlen, -EINVAL, "%s: missing field 'expression' (a string)", origin);
    if (!json_object_object_get_ex(root, "features", &f) ||
        !json_object_is_type(f, json_type_array))
        return util_err(err, errlen, -EINVAL, "%s: missing field 'features' (an array)", origin);
    m->n_features = json_object_array_length(f);
    if (!(m->text = strdup(json_object_get_string(v))) ||
        !(m->features = calloc(m->n_features + 1, sizeof(char *))))
        return -ENOMEM;
    for (size_t i = 0; i < m->n_features; i++) {
        json_object *s = json_object_array_get_idx(f, i);
        if (!json_object_is_type(s, json_type_string))
            return util_err(err, errlen, -EINVAL, "%s: features[%zu] must be a string", origin, i);
        if (!(m->features[i] = strdup(json_object_get_string(s))))
            return -ENOMEM;
    }
    m->name = strdup(json_object_object_get_ex(root, "name", &v) ? json_object_get_string(v) : "");
    m->target =
        strdup(json_object_object_get_ex(root, "target", &v) ? json_object_get_string(v) : "");
    return m->name && m->target ? 0 : -ENOMEM;
}

int model_expr_load(const char *path, model_expr **out, char *err, size_t errlen)
{
    char *text, perr[UTIL_ERRLEN];
    size_t len;
    json_object *root;
    model_expr *m;
    int r = util_read_file(path, &text, &len);

    if (r < 0)
        return util_err(err, errlen, r, "%s: cannot read model: %s", path, strerror(-r));
    if (!(root = json_tokener_parse(text))) {
        free(text);
        return util_err(err, errlen, -EINVAL, "%s: not a JSON model file", path);
    }
    if (!(m = calloc(1, sizeof(*m)))) {
        r = -ENOMEM;
        goto out;
    }
    util_sha256_hex(text, len, m->sha256);
    if ((r = expr_fields(m, root, path, err, errlen)) < 0)
        goto out;
    r = expr_parse(m->text, (const char *const *)m->features, m->n_features, &m->e, perr,
                   sizeof(perr));
    if (r < 0)
        util_err(err, errlen, r, "%s: %s", path, perr);
out:
    json_object_put(root);
    free(text);
    if (r < 0) {
        model_expr_free(m);
        return r;
    }
    *out = m;
    return 0;
}

const char *const *model_expr_features(const model_expr *m, size_t *n)
{
    *n = m->n_features;
    return (const char *const *)m->features;
}

const char *model_expr_text(const model_expr *m)
{
    return m->text;
}

int model_expr_predict(const model_expr *m, const double *const *cols, size_t n, double *out)
{
    return expr_eval(m->e, cols, n, out) ? 0 : -EDOM;
}
