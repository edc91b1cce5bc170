/* model: loading, validating and saving model files, and evaluating them.
 *
 * The file format is documented in models/README.md. A model is identified
 * by the SHA-256 of its bytes, so every stored energy can name exactly the
 * model that produced it. Validation is strict and names the field at
 * fault: a model that loads is one the attribution code can trust. */
#include "model/model.h"
#include "util/util.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

model *model_new(size_t n_events, size_t n_classes)
{
    model *m = calloc(1, sizeof(*m));

    if (!m)
        return NULL;
    m->n_events = n_events;
    m->n_classes = n_classes;
    m->class_event = -1;
    m->events = calloc(n_events ? n_events : 1, sizeof(char *));
    m->scale_min = calloc(n_events ? n_events : 1, sizeof(double));
    m->scale_max = calloc(n_events ? n_events : 1, sizeof(double));
    if (!m->events || !m->scale_min || !m->scale_max || n_classes > MODEL_MAX_CLASSES) {
        model_free(m);
        return NULL;
    }
    for (size_t k = 0; k < n_classes; k++)
        if (!(m->classes[k].coef = calloc(n_events ? n_events : 1, sizeof(double)))) {
            model_free(m);
            return NULL;
        }
    return m;
}

void model_free(model *m)
{
    if (!m)
        return;
    free(m->name);
    free(m->engine);
    free(m->description);
    util_strv_free(m->target, m->n_target);
    util_strv_free(m->events, m->n_events);
    free(m->scale_min);
    free(m->scale_max);
    for (size_t k = 0; k < MODEL_MAX_CLASSES; k++) {
        free(m->classes[k].name);
        free(m->classes[k].coef);
    }
    free(m->training.created);
    free(m->training.cpu_model);
    free(m->training.kernel);
    free(m->training.dataset_sha256);
    free(m);
}

/* ---- Parsing ------------------------------------------------------------- */

struct parse_ctx {
    const char *origin;
    char *err;
    size_t errlen;
};

#define FAIL(ctx, ...) util_err((ctx)->err, (ctx)->errlen, -EINVAL, __VA_ARGS__)

static json_object *get(json_object *o, const char *key, json_type type, bool required,
                        struct parse_ctx *ctx, const char *where, int *r)
{
    json_object *v;

    if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null)) {
        if (required)
            *r = FAIL(ctx, "%s: missing field '%s%s'", ctx->origin, where, key);
        return NULL;
    }
    /* JSON does not distinguish 1 from 1.0: accept integers as numbers. */
    if (json_object_get_type(v) != type &&
        !(type == json_type_double && json_object_is_type(v, json_type_int))) {
        *r = FAIL(ctx, "%s: field '%s%s' must be %s", ctx->origin, where, key,
                  type == json_type_double   ? "a number"
                  : type == json_type_string ? "a string"
                  : type == json_type_array  ? "an array"
                  : type == json_type_int    ? "an integer"
                                             : "an object");
        return NULL;
    }
    return v;
}

/* Every field of object `o` (at `where`) must be one of `known` (NULL
 * terminated): a misspelt key would otherwise be dropped without a word. */
static int check_keys(json_object *o, const char *const *known, struct parse_ctx *ctx,
                      const char *where)
{
    json_object_object_foreach(o, key, val)
    {
        size_t i = 0;
        (void)val;
        while (known[i] && strcmp(known[i], key) != 0)
            i++;
        if (!known[i])
            return FAIL(ctx, "%s: unknown field '%s%s'", ctx->origin, where, key);
    }
    return 0;
}

static int get_string(json_object *o, const char *key, bool required, char **out,
                      struct parse_ctx *ctx, const char *where)
{
    int r = 0;
    json_object *v = get(o, key, json_type_string, required, ctx, where, &r);

    if (!v)
        return r;
    if (required && json_object_get_string_len(v) == 0)
        return FAIL(ctx, "%s: field '%s%s' must not be empty", ctx->origin, where, key);
    *out = strdup(json_object_get_string(v));
    return *out ? 0 : -ENOMEM;
}

static int get_number(json_object *o, const char *key, bool required, double *out,
                      struct parse_ctx *ctx, const char *where)
{
    int r = 0;
    json_object *v = get(o, key, json_type_double, required, ctx, where, &r);

    if (v) {
        *out = json_object_get_double(v);
        if (!isfinite(*out))
            return FAIL(ctx, "%s: field '%s%s' must be finite", ctx->origin, where, key);
    }
    return r;
}

/* An array of exactly n numbers (n = 0: any length, stored in *n_out). */
static int get_numbers(json_object *o, const char *key, size_t n, double *out,
                       struct parse_ctx *ctx, const char *where)
{
    int r = 0;
    json_object *a = get(o, key, json_type_array, true, ctx, where, &r);

    if (!a)
        return r;
    if (json_object_array_length(a) != n)
        return FAIL(ctx, "%s: field '%s%s' has %zu numbers, expected %zu (one per event)",
                    ctx->origin, where, key, json_object_array_length(a), n);
    for (size_t i = 0; i < n; i++) {
        json_object *v = json_object_array_get_idx(a, i);
        if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
            return FAIL(ctx, "%s: field '%s%s[%zu]' must be a number", ctx->origin, where, key, i);
        out[i] = json_object_get_double(v);
        if (!isfinite(out[i]))
            return FAIL(ctx, "%s: field '%s%s[%zu]' must be finite", ctx->origin, where, key, i);
    }
    return 0;
}

static int get_strings(json_object *o, const char *key, char ***out, size_t *n,
                       struct parse_ctx *ctx)
{
    int r = 0;
    json_object *a = get(o, key, json_type_array, true, ctx, "", &r);

    if (!a)
        return r;
    *n = json_object_array_length(a);
    if (*n == 0)
        return FAIL(ctx, "%s: field '%s' must not be empty", ctx->origin, key);
    if (!(*out = calloc(*n, sizeof(char *))))
        return -ENOMEM;
    for (size_t i = 0; i < *n; i++) {
        json_object *v = json_object_array_get_idx(a, i);
        if (!json_object_is_type(v, json_type_string) || json_object_get_string_len(v) == 0)
            return FAIL(ctx, "%s: field '%s[%zu]' must be a non-empty string", ctx->origin, key, i);
        for (size_t j = 0; j < i; j++)
            if (strcmp((*out)[j], json_object_get_string(v)) == 0)
                return FAIL(ctx, "%s: field '%s' lists '%s' twice", ctx->origin, key, (*out)[j]);
        if (!((*out)[i] = strdup(json_object_get_string(v))))
            return -ENOMEM;
    }
    return 0;
}

static int parse_scaler(model *m, json_object *root, struct parse_ctx *ctx)
{
    int r = 0;
    json_object *s = get(root, "scaler", json_type_object, true, ctx, "", &r);

    static const char *const known[] = {"min", "max", NULL};

    if (!s)
        return r;
    if ((r = check_keys(s, known, ctx, "scaler.")) < 0 ||
        (r = get_numbers(s, "min", m->n_events, m->scale_min, ctx, "scaler.")) < 0 ||
        (r = get_numbers(s, "max", m->n_events, m->scale_max, ctx, "scaler.")) < 0)
        return r;
    /* max == min is a feature that was constant in training: the trainer
     * keeps it, and it contributes nothing (model_power skips it). */
    for (size_t j = 0; j < m->n_events; j++)
        if (!(m->scale_max[j] >= m->scale_min[j]))
            return FAIL(ctx, "%s: scaler.max[%zu] (%g) is below scaler.min[%zu] (%g) for '%s'",
                        ctx->origin, j, m->scale_max[j], j, m->scale_min[j], m->events[j]);
    return 0;
}

/* The largest power a class can give at rates from 0 to its scaler's max:
 * a linear model is largest at a corner, so the sum of the largest terms
 * bounds it, for the power and for the dynamic part alike.  Rates over the
 * max give more, in proportion: 10 times the range still fits a double. */
static double class_bound_w(const model *m, const model_class *c)
{
    double b = fabs(c->intercept);

    for (size_t j = 0; j < m->n_events; j++) {
        double width = m->scale_max[j] - m->scale_min[j];
        if (!(width > 0))
            continue; /* a constant feature: no term (model_power) */
        double lo = fabs(m->scale_min[j] / width), hi = fabs((m->scale_max[j]) / width);
        b += fabs(c->coef[j]) * fmax(fmax(lo, hi), 1.0);
    }
    return b;
}

/* A model that loads must give a power for every tick: coefficients that
 * pass one by one can still overflow together (1e308 + 1e308). */
static int check_range(const model *m, struct parse_ctx *ctx)
{
    for (size_t k = 0; k < m->n_classes; k++) {
        double b = class_bound_w(m, &m->classes[k]);
        if (!(b <= MODEL_MAX_POWER_W))
            return FAIL(ctx,
                        "%s: class '%s' gives up to %g W over the scaler's range, more than "
                        "%g W: its coefficients are out of scale",
                        ctx->origin, m->classes[k].name ? m->classes[k].name : "all", b,
                        MODEL_MAX_POWER_W);
    }
    return 0;
}

static int parse_class_models(model *m, json_object *list, struct parse_ctx *ctx)
{
    m->n_classes = json_object_array_length(list);
    if (m->n_classes < 1 || m->n_classes > MODEL_MAX_CLASSES)
        return FAIL(ctx, "%s: field 'classes.models' must hold 1 or 2 models, has %zu", ctx->origin,
                    m->n_classes);
    for (size_t k = 0; k < m->n_classes; k++) {
        json_object *c = json_object_array_get_idx(list, k);
        char where[48];
        int r;
        snprintf(where, sizeof(where), "classes.models[%zu].", k);
        static const char *const known[] = {"name", "intercept", "coef", NULL};
        if (!json_object_is_type(c, json_type_object))
            return FAIL(ctx, "%s: field 'classes.models[%zu]' must be an object", ctx->origin, k);
        if ((r = check_keys(c, known, ctx, where)) < 0)
            return r;
        if (!(m->classes[k].coef = calloc(m->n_events, sizeof(double))))
            return -ENOMEM;
        if ((r = get_string(c, "name", true, &m->classes[k].name, ctx, where)) < 0 ||
            (r = get_number(c, "intercept", true, &m->classes[k].intercept, ctx, where)) < 0 ||
            (r = get_numbers(c, "coef", m->n_events, m->classes[k].coef, ctx, where)) < 0)
            return r;
    }
    return 0;
}

static int parse_classes(model *m, json_object *root, struct parse_ctx *ctx)
{
    int r = 0;
    json_object *c = get(root, "classes", json_type_object, true, ctx, "", &r);
    json_object *list;
    char *event = NULL, *mode = NULL;
    static const char *const known[] = {"models", "event", "mode", "threshold", NULL};

    if (!c)
        return r;
    if ((r = check_keys(c, known, ctx, "classes.")) < 0)
        return r;
    if (!(list = get(c, "models", json_type_array, true, ctx, "classes.", &r)))
        return r;
    if ((r = parse_class_models(m, list, ctx)) < 0)
        return r;
    if ((r = get_string(c, "event", m->n_classes > 1, &event, ctx, "classes.")) < 0 ||
        (r = get_string(c, "mode", false, &mode, ctx, "classes.")) < 0)
        goto out;
    m->class_threshold = 2e7;
    if ((r = get_number(c, "threshold", m->n_classes > 1, &m->class_threshold, ctx, "classes.")) <
        0)
        goto out;
    if (event) {
        for (size_t j = 0; j < m->n_events; j++)
            if (strcmp(m->events[j], event) == 0)
                m->class_event = (int)j;
        if (m->class_event < 0) {
            r = FAIL(ctx, "%s: classes.event '%s' is not one of the model's events", ctx->origin,
                     event);
            goto out;
        }
    }
    if (mode && strcmp(mode, "rate") == 0)
        m->class_mode = MODEL_CLASS_RATE;
    else if (mode && strcmp(mode, "cumulative") != 0)
        r = FAIL(ctx, "%s: classes.mode '%s' must be \"cumulative\" or \"rate\"", ctx->origin,
                 mode);
out:
    free(event);
    free(mode);
    return r;
}

static int parse_training(model *m, json_object *root, struct parse_ctx *ctx)
{
    int r = 0;
    json_object *t = get(root, "training", json_type_object, false, ctx, "", &r);
    json_object *rows;
    double mape = NAN;
    static const char *const known[] = {"rows",   "cv_mape",        "created", "cpu_model",
                                        "kernel", "dataset_sha256", NULL};

    if (!t)
        return r;
    if ((r = check_keys(t, known, ctx, "training.")) < 0)
        return r;
    m->training.present = true;
    if ((rows = get(t, "rows", json_type_int, false, ctx, "training.", &r)))
        m->training.rows = json_object_get_int64(rows);
    if (r < 0 || (r = get_number(t, "cv_mape", false, &mape, ctx, "training.")) < 0 ||
        (r = get_string(t, "created", false, &m->training.created, ctx, "training.")) < 0 ||
        (r = get_string(t, "cpu_model", false, &m->training.cpu_model, ctx, "training.")) < 0 ||
        (r = get_string(t, "kernel", false, &m->training.kernel, ctx, "training.")) < 0 ||
        (r = get_string(t, "dataset_sha256", false, &m->training.dataset_sha256, ctx,
                        "training.")) < 0)
        return r;
    m->training.cv_mape = mape;
    return 0;
}

static int parse_root(model *m, json_object *root, struct parse_ctx *ctx)
{
    int r;
    char *format = NULL;
    static const char *const known[] = {"format",       "name",     "engine", "description",
                                        "target",       "events",   "scaler", "classes",
                                        "idle_power_w", "training", NULL};
    static const char *const engines[] = {"ols", "ridge", "lasso", NULL};

    if (!json_object_is_type(root, json_type_object))
        return FAIL(ctx, "%s: a model file is a JSON object", ctx->origin);
    if ((r = get_string(root, "format", true, &format, ctx, "")) < 0)
        return r;
    if (strcmp(format, MODEL_FORMAT) != 0)
        r = FAIL(ctx, "%s: format '%s' is not supported (expected '%s')", ctx->origin, format,
                 MODEL_FORMAT);
    free(format);
    if (r < 0 || (r = get_string(root, "name", true, &m->name, ctx, "")) < 0 ||
        (r = get_string(root, "engine", true, &m->engine, ctx, "")) < 0)
        return r;
    if (strcmp(m->engine, "expr") == 0)
        return FAIL(ctx,
                    "%s: engine 'expr' is an equation over program parameters, not a "
                    "power model over perf events",
                    ctx->origin);
    for (r = 0; engines[r] && strcmp(engines[r], m->engine) != 0; r++)
        ;
    if (!engines[r])
        return FAIL(ctx, "%s: engine '%s' is not one of ols, ridge, lasso", ctx->origin, m->engine);
    if ((r = check_keys(root, known, ctx, "")) < 0)
        return r;
    if ((r = get_string(root, "description", false, &m->description, ctx, "")) < 0 ||
        (r = get_strings(root, "target", &m->target, &m->n_target, ctx)) < 0 ||
        (r = get_strings(root, "events", &m->events, &m->n_events, ctx)) < 0)
        return r;
    if (!(m->scale_min = calloc(m->n_events, sizeof(double))) ||
        !(m->scale_max = calloc(m->n_events, sizeof(double))))
        return -ENOMEM;
    if ((r = parse_scaler(m, root, ctx)) < 0 || (r = parse_classes(m, root, ctx)) < 0 ||
        (r = get_number(root, "idle_power_w", true, &m->idle_power_w, ctx, "")) < 0 ||
        (r = parse_training(m, root, ctx)) < 0)
        return r;
    if (!(m->idle_power_w >= 0 && m->idle_power_w <= MODEL_MAX_POWER_W))
        return FAIL(ctx, "%s: idle_power_w (%g) is not from 0 to %g W", ctx->origin,
                    m->idle_power_w, MODEL_MAX_POWER_W);
    return check_range(m, ctx);
}

int model_parse(const char *text, size_t len, const char *origin, model **out, char *err,
                size_t errlen)
{
    struct parse_ctx ctx = {origin, err, errlen};
    json_tokener *tok = json_tokener_new();
    json_object *root;
    model *m;
    int r;

    if (!tok)
        return -ENOMEM;
    root = json_tokener_parse_ex(tok, text, (int)len);
    if (!root || json_tokener_get_parse_end(tok) < len) {
        enum json_tokener_error je = json_tokener_get_error(tok);
        int line, col;
        util_line_col(text, json_tokener_get_parse_end(tok), &line, &col);
        r = FAIL(&ctx, "%s:%d:%d: %s", origin, line, col,
                 root                          ? "unexpected data after the JSON object"
                 : je == json_tokener_continue ? "JSON ends too early"
                                               : json_tokener_error_desc(je));
        json_object_put(root);
        json_tokener_free(tok);
        return r;
    }
    json_tokener_free(tok);
    if (!(m = calloc(1, sizeof(*m)))) {
        json_object_put(root);
        return -ENOMEM;
    }
    m->class_event = -1;
    r = parse_root(m, root, &ctx);
    json_object_put(root);
    if (r < 0) {
        model_free(m);
        return r;
    }
    util_sha256_hex(text, len, m->sha256);
    *out = m;
    return 0;
}

int model_load(const char *path, model **out, char *err, size_t errlen)
{
    char *text;
    size_t len;
    int r = util_read_file(path, &text, &len);

    if (r < 0)
        return util_err(err, errlen, r, "%s: cannot read model: %s", path, strerror(-r));
    r = model_parse(text, len, path, out, err, errlen);
    free(text);
    return r;
}

/* ---- Saving -------------------------------------------------------------- */

static json_object *numbers_json(const double *v, size_t n)
{
    json_object *a = json_object_new_array_ext((int)n);
    for (size_t i = 0; i < n; i++)
        json_object_array_add(a, json_object_new_double(v[i]));
    return a;
}

static json_object *strings_json(char *const *v, size_t n)
{
    json_object *a = json_object_new_array_ext((int)n);
    for (size_t i = 0; i < n; i++)
        json_object_array_add(a, json_object_new_string(v[i]));
    return a;
}

static void add_string(json_object *o, const char *key, const char *v)
{
    if (v)
        json_object_object_add(o, key, json_object_new_string(v));
}

static json_object *classes_json(const model *m)
{
    json_object *c = json_object_new_object(), *list = json_object_new_array();

    if (m->class_event >= 0) {
        add_string(c, "event", m->events[m->class_event]);
        json_object_object_add(c, "threshold", json_object_new_double(m->class_threshold));
        add_string(c, "mode", m->class_mode == MODEL_CLASS_RATE ? "rate" : "cumulative");
    }
    for (size_t k = 0; k < m->n_classes; k++) {
        json_object *cm = json_object_new_object();
        add_string(cm, "name", m->classes[k].name ? m->classes[k].name : "all");
        json_object_object_add(cm, "intercept", json_object_new_double(m->classes[k].intercept));
        json_object_object_add(cm, "coef", numbers_json(m->classes[k].coef, m->n_events));
        json_object_array_add(list, cm);
    }
    json_object_object_add(c, "models", list);
    return c;
}

static json_object *training_json(const model_training *t)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "rows", json_object_new_int64(t->rows));
    if (isfinite(t->cv_mape))
        json_object_object_add(o, "cv_mape", json_object_new_double(t->cv_mape));
    add_string(o, "created", t->created);
    add_string(o, "cpu_model", t->cpu_model);
    add_string(o, "kernel", t->kernel);
    add_string(o, "dataset_sha256", t->dataset_sha256);
    return o;
}

int model_to_json(model *m, char **out)
{
    json_object *o = json_object_new_object(), *scaler = json_object_new_object();
    const char *text;

    if (!o || !scaler)
        return -ENOMEM;
    add_string(o, "format", MODEL_FORMAT);
    add_string(o, "name", m->name);
    add_string(o, "engine", m->engine);
    add_string(o, "description", m->description);
    json_object_object_add(o, "target", strings_json(m->target, m->n_target));
    json_object_object_add(o, "events", strings_json(m->events, m->n_events));
    json_object_object_add(scaler, "min", numbers_json(m->scale_min, m->n_events));
    json_object_object_add(scaler, "max", numbers_json(m->scale_max, m->n_events));
    json_object_object_add(o, "scaler", scaler);
    json_object_object_add(o, "classes", classes_json(m));
    json_object_object_add(o, "idle_power_w", json_object_new_double(m->idle_power_w));
    if (m->training.present)
        json_object_object_add(o, "training", training_json(&m->training));
    text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                 JSON_C_TO_STRING_NOSLASHESCAPE);
    size_t len = strlen(text);
    *out = malloc(len + 2);
    if (*out) {
        memcpy(*out, text, len);
        memcpy(*out + len, "\n", 2);
        util_sha256_hex(*out, len + 1, m->sha256);
    }
    json_object_put(o);
    return *out ? 0 : -ENOMEM;
}

int model_save(model *m, const char *path, char *err, size_t errlen)
{
    char *text, tmp[4096];
    FILE *f;
    int r = model_to_json(m, &text);

    if (r < 0)
        return r;
    /* Write beside the target and rename, so a reader never sees half a model. */
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    f = fopen(tmp, "w");
    if (!f) {
        r = -errno;
        free(text);
        return util_err(err, errlen, r, "%s: cannot write model: %s", tmp, strerror(-r));
    }
    if (fputs(text, f) < 0 || fflush(f) != 0 || fsync(fileno(f)) != 0)
        r = -errno;
    if (fclose(f) != 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) != 0)
        r = -errno;
    free(text);
    if (r < 0) {
        unlink(tmp);
        return util_err(err, errlen, r, "%s: cannot write model: %s", path, strerror(-r));
    }
    return 0;
}

/* ---- Evaluation ---------------------------------------------------------- */

double model_power(const model *m, int k, const double *rates)
{
    const model_class *c = &m->classes[k];
    double p = c->intercept;

    for (size_t j = 0; j < m->n_events; j++) {
        double width = m->scale_max[j] - m->scale_min[j];
        if (width > 0)
            p += c->coef[j] * (rates[j] - m->scale_min[j]) / width;
    }
    return p;
}

double model_dynamic_power(const model *m, int k, const double *rates)
{
    return model_dynamic_power_scaled(m, k, rates, NULL);
}

void model_event_power(const model *m, int k, const double *rates, double *out)
{
    const model_class *c = &m->classes[k];

    for (size_t j = 0; j < m->n_events; j++) {
        double width = m->scale_max[j] - m->scale_min[j];
        out[j] = width > 0 ? c->coef[j] * rates[j] / width : 0;
    }
}

double model_event_power_sum(const model *m, const double *part, const double *scale)
{
    double d = 0;

    /* p_k(x) - p_k(0): the intercept and the -min terms cancel. */
    for (size_t j = 0; j < m->n_events; j++)
        if (m->scale_max[j] - m->scale_min[j] > 0)
            d += (scale ? scale[j] : 1) * part[j];
    return d > 0 ? d : 0;
}

double model_dynamic_power_scaled(const model *m, int k, const double *rates, const double *scale)
{
    double part[m->n_events + 1];

    model_event_power(m, k, rates, part);
    return model_event_power_sum(m, part, scale);
}

void model_target_key(const model *m, char *out, size_t len)
{
    size_t used = 0;

    out[0] = '\0';
    for (size_t i = 0; i < m->n_target && used < len; i++)
        used += (size_t)snprintf(out + used, len - used, "%s%s", i ? "+" : "", m->target[i]);
}
