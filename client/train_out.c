/* train_out: model files from a trained engine.  Linear models go through
 * lib/model (the format the daemon loads); a forest, which the daemon
 * cannot evaluate per process, is written as its own wattprof-forest/1
 * JSON with the same header fields and training block. */
#include "model/model.h"
#include "train.h"
#include "util/util.h"

#include <errno.h>
#include <json-c/json.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct out_ctx {
    const char *path, *name;
    const struct train_source *src;
    const struct train_data *d;
    size_t n_classes;
    int class_event; /* index of the class column among the features, or -1 */
    double class_threshold, cv_mape;
    char **domains; /* RAPL domains of the target column */
    size_t n_domains;
    char created[32], default_name[256];
    char alpha_note[128]; /* the penalty each class was fitted with */
};

static const char *class_label(size_t n_classes, size_t c)
{
    return n_classes < 2 ? "all" : c == 0 ? "high-miss" : "low-miss";
}

static void fill_ctx(struct out_ctx *o, const regress_opts *ro)
{
    time_t now = time(NULL);
    struct tm tm;
    char *copy = strdup(o->src->path), *base, *dot;
    char day[16];

    gmtime_r(&now, &tm);
    strftime(o->created, sizeof(o->created), "%Y-%m-%dT%H:%M:%SZ", &tm);
    strftime(day, sizeof(day), "%Y-%m-%d", &tm);
    base = copy ? basename(copy) : "model";
    if ((dot = strrchr(base, '.')))
        *dot = '\0';
    snprintf(o->default_name, sizeof(o->default_name), "%s-%s-%s", base,
             regress_engine_name(ro->engine), day);
    free(copy);
    if (!o->name)
        o->name = o->default_name;
}

/* Power at zero activity of the low-miss (or only) class: every event rate
 * at 0, scaled like any other input. Never below zero. */
static double idle_power(const regress_fit *f)
{
    const linear_model *m = &f->lin[f->n_classes - 1];
    double p = m->intercept;

    for (size_t j = 0; j < f->p; j++)
        p += m->coef[j] * scaler_apply(&f->sc, j, 0);
    return p > 0 ? p : 0;
}

static int set_strings(char ***dst, size_t *n, char *const *src, size_t count)
{
    *dst = calloc(count ? count : 1, sizeof(char *));
    if (!*dst)
        return -ENOMEM;
    *n = count;
    for (size_t i = 0; i < count; i++)
        if (!((*dst)[i] = strdup(src[i])))
            return -ENOMEM;
    return 0;
}

static int linear_file(const struct out_ctx *o, const regress_fit *f, const regress_opts *ro,
                       char *err, size_t errlen)
{
    model *m = model_new(f->p, f->n_classes);
    int r = m ? 0 : -ENOMEM;

    if (r == 0 &&
        (!(m->name = strdup(o->name)) || !(m->engine = strdup(regress_engine_name(ro->engine))) ||
         set_strings(&m->target, &m->n_target, o->domains, o->n_domains) < 0))
        r = -ENOMEM;
    for (size_t j = 0; r == 0 && j < f->p; j++) {
        if (!(m->events[j] = strdup(o->d->features[j])))
            r = -ENOMEM;
        m->scale_min[j] = f->sc.min[j];
        m->scale_max[j] = f->sc.max[j];
    }
    for (size_t c = 0; r == 0 && c < f->n_classes; c++) {
        if (!(m->classes[c].name = strdup(class_label(f->n_classes, c))))
            r = -ENOMEM;
        m->classes[c].intercept = f->lin[c].intercept;
        memcpy(m->classes[c].coef, f->lin[c].coef, f->p * sizeof(double));
    }
    if (r == 0 &&
        asprintf(&m->description, "fitted by wattprof train on %s (%zu rows)%s%s", o->src->path,
                 o->d->n, o->alpha_note[0] ? "; " : "", o->alpha_note) < 0) {
        m->description = NULL;
        r = -ENOMEM;
    }
    if (r == 0) {
        m->class_event = o->class_event;
        m->class_threshold = o->class_threshold;
        m->class_mode = MODEL_CLASS_CUMULATIVE;
        m->idle_power_w = idle_power(f);
        m->training.present = true;
        m->training.rows = (long)o->d->n;
        m->training.cv_mape = o->cv_mape;
        if (!(m->training.created = strdup(o->created)) ||
            !(m->training.dataset_sha256 = strdup(o->d->sha256)))
            r = -ENOMEM;
    }
    if (r == 0)
        r = model_save(m, o->path, err, errlen);
    model_free(m);
    if (r == 0 && (r = model_load(o->path, &m, err, errlen)) == 0)
        model_free(m);
    return r;
}

static json_object *string_array(char *const *v, size_t n)
{
    json_object *a = json_object_new_array();

    for (size_t i = 0; i < n; i++)
        json_object_array_add(a, json_object_new_string(v[i]));
    return a;
}

static json_object *training_json(const struct out_ctx *o)
{
    json_object *t = json_object_new_object();

    json_object_object_add(t, "rows", json_object_new_int64((int64_t)o->d->n));
    json_object_object_add(t, "cv_mape", json_object_new_double(o->cv_mape));
    json_object_object_add(t, "created", json_object_new_string(o->created));
    json_object_object_add(t, "dataset_sha256", json_object_new_string(o->d->sha256));
    return t;
}

static int forest_file(const struct out_ctx *o, const regress_fit *f, char *err, size_t errlen)
{
    json_object *root = json_object_new_object(), *cls = json_object_new_object();
    json_object *models = json_object_new_array();
    int r = 0;

    json_object_object_add(root, "format", json_object_new_string("wattprof-forest/1"));
    json_object_object_add(root, "name", json_object_new_string(o->name));
    json_object_object_add(root, "engine", json_object_new_string("forest"));
    json_object_object_add(root, "target", string_array(o->domains, o->n_domains));
    json_object_object_add(root, "events", string_array(o->d->features, o->d->p));
    if (o->class_event >= 0) {
        json_object_object_add(cls, "event",
                               json_object_new_string(o->d->features[o->class_event]));
        json_object_object_add(cls, "threshold", json_object_new_double(o->class_threshold));
        json_object_object_add(cls, "mode", json_object_new_string("cumulative"));
    }
    for (size_t c = 0; c < f->n_classes; c++) {
        json_object *one = forest_to_json(f->trees[c]);
        json_object_object_add(one, "name", json_object_new_string(class_label(f->n_classes, c)));
        json_object_array_add(models, one);
    }
    json_object_object_add(cls, "models", models);
    json_object_object_add(root, "classes", cls);
    json_object_object_add(root, "training", training_json(o));
    if (json_object_to_file_ext(o->path, root, JSON_C_TO_STRING_PLAIN) < 0)
        r = util_err(err, errlen, -EIO, "%s: cannot write: %s", o->path, json_util_get_last_err());
    json_object_put(root);
    return r;
}

static int class_event_index(struct out_ctx *o, const char *class_column, char *err, size_t errlen)
{
    o->class_event = -1;
    if (o->n_classes < 2)
        return 0;
    for (size_t j = 0; j < o->d->p; j++)
        if (strcmp(o->d->features[j], class_column) == 0)
            o->class_event = (int)j;
    if (o->class_event < 0)
        return util_err(err, errlen, -EINVAL,
                        "--out: the class column '%s' must be one of --features, since a model "
                        "classifies by one of its events",
                        class_column);
    return 0;
}

static void note_alpha(struct out_ctx *o, const regress_fit *f, const regress_opts *ro)
{
    size_t at = 0;

    o->alpha_note[0] = '\0';
    if (ro->engine == REGRESS_OLS || ro->engine == REGRESS_FOREST)
        return;
    at = (size_t)snprintf(o->alpha_note, sizeof(o->alpha_note), "alpha%s",
                          ro->linear.alpha < 0 ? " (chosen by inner CV)" : "");
    for (size_t c = 0; c < f->n_classes && at < sizeof(o->alpha_note); c++)
        at += (size_t)snprintf(o->alpha_note + at, sizeof(o->alpha_note) - at, " %s %g",
                               class_label(f->n_classes, c), f->lin[c].alpha);
}

int train_write_model(const char *path, const char *name, const regress_opts *ro,
                      const struct train_source *src, const struct train_data *d, const int *klass,
                      size_t n_classes, const char *class_column, double class_threshold,
                      const char *domains, double cv_mape, char *err, size_t errlen)
{
    struct out_ctx o = {.path = path,
                        .name = name,
                        .src = src,
                        .d = d,
                        .n_classes = n_classes,
                        .class_threshold = class_threshold,
                        .cv_mape = cv_mape};
    regress_fit f;
    int r = class_event_index(&o, class_column, err, errlen);

    if (r < 0)
        return r;
    r = util_split_list(domains, ',', &o.domains, &o.n_domains);
    if (r < 0)
        return util_err(err, errlen, r, "--domains '%s': expected a list like package,dram",
                        domains);
    fill_ctx(&o, ro);
    r = regress_train(&f, ro, d->x, d->y, d->p, n_classes > 1 ? klass : NULL, n_classes, NULL, d->n,
                      err, errlen);
    if (r == 0) {
        note_alpha(&o, &f, ro);
        r = ro->engine == REGRESS_FOREST ? forest_file(&o, &f, err, errlen)
                                         : linear_file(&o, &f, ro, err, errlen);
        regress_done(&f);
    }
    util_strv_free(o.domains, o.n_domains);
    return r;
}
