/* train_calib: the daemon's model from a fit on the host-level table, and
 * the host power any model predicts for that table — the two sides of
 * "is the new model better than the one in use" (train.h). */
#include "model/model.h"
#include "train.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* "model name" of the first CPU in /proc/cpuinfo, or NULL. */
static char *cpu_model(void)
{
    char line[512], *colon, *end;
    FILE *f = fopen("/proc/cpuinfo", "r");
    char *out = NULL;

    while (f && !out && fgets(line, sizeof(line), f)) {
        if (strncmp(line, "model name", 10) != 0 || !(colon = strchr(line, ':')))
            continue;
        colon += 1 + strspn(colon + 1, " \t");
        end = colon + strcspn(colon, "\n");
        out = strndup(colon, (size_t)(end - colon));
    }
    if (f)
        fclose(f);
    return out;
}

/* Raw watts per event/s of feature column c, and the fit's value at all
 * rates 0: the scaled fit undone. */
static void raw_fit(const regress_fit *f, double *w, double *b0)
{
    *b0 = f->lin[0].intercept;
    for (size_t c = 0; c < f->p; c++) {
        double range = f->sc.max[c] - f->sc.min[c];
        w[c] = range > 0 ? f->lin[0].coef[c] / range : 0;
        *b0 -= w[c] * f->sc.min[c];
    }
}

/* Scaler max of event j: the largest class sum seen, so coefficients stay
 * in watts per "busiest the node got" as the format intends. */
static double event_max(const struct train_calib *cal, size_t n, size_t j)
{
    double mx = 0;

    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < cal->n_classes; k++) {
            double v = cal->rates[(i * cal->n_classes + k) * cal->n_events + j];
            if (v > mx)
                mx = v;
        }
    return mx > 0 ? mx : 1;
}

static int set_coefs(model *m, const struct train_calib *cal, const regress_fit *f, size_t n)
{
    double *w = calloc(f->p + 1, sizeof(double)), b0;
    bool has[MODEL_MAX_CLASSES] = {false};

    if (!w)
        return -ENOMEM;
    raw_fit(f, w, &b0);
    for (size_t j = 0; j < m->n_events; j++) {
        m->scale_min[j] = 0;
        m->scale_max[j] = event_max(cal, n, j);
    }
    for (size_t c = 0; c < f->p; c++) {
        size_t k = cal->col_class[c], j = cal->col_event[c];
        m->classes[k].coef[j] = w[c] * m->scale_max[j];
        has[k] = true;
    }
    /* A class the data never saw borrows the other one's coefficients:
     * better a guess from this node than no dynamic power at all. */
    for (size_t k = 0; k < m->n_classes; k++) {
        m->classes[k].intercept = b0;
        if (!has[k])
            memcpy(m->classes[k].coef, m->classes[has[0] ? 0 : 1].coef,
                   m->n_events * sizeof(double));
    }
    m->idle_power_w = b0 > 0 ? b0 : 0;
    free(w);
    return 0;
}

static int copy_strings(char ***dst, size_t *n, char *const *src, size_t count)
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

static int describe(model *m, const struct train_calib *cal, const regress_fit *f,
                    const regress_opts *ro, const char *name, const char *db, size_t n_rows)
{
    char host[64] = "node", day[16], created[32], alpha[64] = "";
    time_t now = time(NULL);
    struct tm tm;
    struct utsname u;

    gethostname(host, sizeof(host) - 1);
    gmtime_r(&now, &tm);
    strftime(day, sizeof(day), "%Y-%m-%d", &tm);
    strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (name ? !(m->name = strdup(name))
             : asprintf(&m->name, "%s-%s-%s", host, regress_engine_name(ro->engine), day) < 0)
        return m->name = NULL, -ENOMEM;
    if (ro->engine != REGRESS_OLS)
        snprintf(alpha, sizeof(alpha), "; alpha %.3g%s", f->lin[0].alpha,
                 ro->linear.alpha < 0 ? " (chosen by inner CV)" : "");
    if (asprintf(&m->description,
                 "fitted by wattprof train on %zu calibration rows of %s (%s to %s, the daemon "
                 "running '%s'); host power against per-class sums of event rates%s",
                 n_rows, db, cal->first, cal->last, cal->ref->name, alpha) < 0)
        return m->description = NULL, -ENOMEM;
    m->training.created = strdup(created);
    m->training.cpu_model = cpu_model();
    m->training.kernel = uname(&u) == 0 ? strdup(u.release) : NULL;
    return m->training.created ? 0 : -ENOMEM;
}

static int build_model(model **out, const struct train_calib *cal, const regress_fit *f,
                       const regress_opts *ro, const struct train_data *d, const char *name,
                       const char *domains, const char *db, size_t n_rows, double cv_mape)
{
    const model *ref = cal->ref;
    model *m = model_new(ref->n_events, ref->n_classes);
    char **dom = NULL;
    size_t n_dom = 0;
    int r = m ? util_split_list(domains, ',', &dom, &n_dom) : -ENOMEM;

    if (r == 0 && (!(m->engine = strdup(regress_engine_name(ro->engine))) ||
                   copy_strings(&m->target, &m->n_target, dom, n_dom) < 0))
        r = -ENOMEM;
    for (size_t j = 0; r == 0 && j < ref->n_events; j++)
        if (!(m->events[j] = strdup(ref->events[j])))
            r = -ENOMEM;
    for (size_t k = 0; r == 0 && k < ref->n_classes; k++)
        if (!(m->classes[k].name = strdup(ref->classes[k].name)))
            r = -ENOMEM;
    if (r == 0) {
        m->class_event = ref->class_event;
        m->class_threshold = ref->class_threshold;
        m->class_mode = ref->class_mode;
        m->training.present = true;
        m->training.rows = (long)n_rows;
        m->training.cv_mape = cv_mape;
        r = set_coefs(m, cal, f, d->n);
    }
    if (r == 0)
        r = describe(m, cal, f, ro, name, db, n_rows);
    if (r == 0 && !(m->training.dataset_sha256 = strdup(d->sha256)))
        r = -ENOMEM;
    util_strv_free(dom, n_dom);
    if (r < 0)
        model_free(m);
    else
        *out = m;
    return r;
}

int train_calib_model(model **out, const regress_opts *ro, const struct train_data *d,
                      const struct train_calib *cal, const size_t *rows, size_t n_rows,
                      const char *name, const char *domains, const char *db_path, double cv_mape,
                      char *err, size_t errlen)
{
    regress_fit f;
    char *json;
    int r;

    if (ro->engine == REGRESS_FOREST)
        return util_err(err, errlen, -EINVAL,
                        "--engine forest: the daemon evaluates linear models only; use ols, "
                        "ridge or lasso to write or install a model from --db");
    r = regress_train(&f, ro, d->x, d->y, d->p, NULL, 1, rows, rows ? n_rows : d->n, err, errlen);
    if (r < 0)
        return r;
    r = build_model(out, cal, &f, ro, d, name, domains, db_path, rows ? n_rows : d->n, cv_mape);
    regress_done(&f);
    /* model_to_json validates nothing, but it sets the sha256 the daemon
     * will know the model by. */
    if (r == 0 && (r = model_to_json(*out, &json)) == 0)
        free(json);
    if (r < 0)
        return util_err(err, errlen, r, "building the model: %s", strerror(-r));
    return 0;
}

/* For each of m's events, its index among the rows' events. */
static int map_events(const model *m, const struct train_calib *cal, size_t *map, char *err,
                      size_t errlen)
{
    for (size_t j = 0; j < m->n_events; j++) {
        size_t e = 0;
        while (e < cal->n_events && strcmp(cal->ref->events[e], m->events[j]) != 0)
            e++;
        if (e == cal->n_events)
            return util_err(err, errlen, -ENOTSUP,
                            "model '%s' counts '%s', which the calibration rows do not hold",
                            m->name, m->events[j]);
        map[j] = e;
    }
    if (m->n_classes > 1 &&
        (cal->n_classes != m->n_classes || cal->ref->class_event < 0 ||
         strcmp(cal->ref->events[cal->ref->class_event], m->events[m->class_event]) != 0 ||
         cal->ref->class_threshold != m->class_threshold || cal->ref->class_mode != m->class_mode))
        return util_err(err, errlen, -ENOTSUP,
                        "model '%s' splits processes into classes differently from the model "
                        "the calibration rows were taken with ('%s')",
                        m->name, cal->ref->name);
    return 0;
}

int train_calib_predict(const model *m, const struct train_calib *cal, const size_t *rows, size_t n,
                        double *out, char *err, size_t errlen)
{
    size_t map[m->n_events ? m->n_events : 1];
    double x[m->n_events ? m->n_events : 1];
    double idle = m->training.present ? m->idle_power_w : cal->idle_p5;
    int r = map_events(m, cal, map, err, errlen);

    for (size_t i = 0; r == 0 && i < n; i++) {
        const double *row = cal->rates + rows[i] * cal->n_classes * cal->n_events;
        out[i] = idle;
        /* A one-class model sees every process in its class: the sums add. */
        for (size_t k = 0; k < (m->n_classes > 1 ? m->n_classes : 1); k++) {
            for (size_t j = 0; j < m->n_events; j++) {
                x[j] = 0;
                for (size_t c = 0; c < cal->n_classes; c++)
                    if (m->n_classes == 1 || c == k)
                        x[j] += row[c * cal->n_events + map[j]];
            }
            out[i] += model_dynamic_power(m, (int)k, x);
        }
    }
    return r;
}
