/* train_db: the daemon's calibration rows as the trainer's host-level table
 * (see train.h).  Every refusal names the database and, where one row is at
 * fault, that row's time. */
#include "model/model.h"
#include "store/store.h"
#include "train.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void iso_utc(int64_t t, char out[32])
{
    time_t tt = (time_t)t;
    struct tm tm;

    gmtime_r(&tt, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* "+HH:MM", "-HHMM" or "Z" after an ISO time; *off in seconds east. */
static int parse_zone(const char *z, long *off, bool *has)
{
    int h, m = 0;
    char sign;

    *has = *z != '\0';
    *off = 0;
    if (!*has || strcmp(z, "Z") == 0)
        return 0;
    if (sscanf(z, "%c%2d:%2d", &sign, &h, &m) < 2 && sscanf(z, "%c%2d%2d", &sign, &h, &m) < 2)
        return -EINVAL;
    if ((sign != '+' && sign != '-') || h > 23 || m > 59)
        return -EINVAL;
    *off = (sign == '-' ? -1 : 1) * (h * 3600L + m * 60L);
    return 0;
}

static int parse_iso(const char *s, int64_t *out)
{
    static const char *const formats[] = {"%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M",
                                          "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"};
    struct tm tm;
    const char *rest = NULL;
    long off;
    bool has_zone;

    for (size_t i = 0; !rest && i < sizeof(formats) / sizeof(formats[0]); i++) {
        memset(&tm, 0, sizeof(tm));
        rest = strptime(s, formats[i], &tm);
    }
    if (!rest || parse_zone(rest, &off, &has_zone) < 0)
        return -EINVAL;
    if (has_zone) {
        *out = (int64_t)timegm(&tm) - off;
    } else {
        tm.tm_isdst = -1;
        *out = (int64_t)mktime(&tm);
    }
    return 0;
}

int train_parse_since(const char *s, int64_t now, int64_t *out, char *err, size_t errlen)
{
    static const struct {
        char unit;
        int64_t seconds;
    } units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}, {'w', 604800}};
    size_t len = strlen(s);
    char *end;
    double v;

    for (size_t i = 0; len > 1 && i < sizeof(units) / sizeof(units[0]); i++) {
        if (s[len - 1] != units[i].unit)
            continue;
        v = strtod(s, &end);
        if (end == s + len - 1 && isfinite(v) && v > 0) {
            *out = now - (int64_t)llround(v * (double)units[i].seconds);
            return 0;
        }
    }
    if (parse_iso(s, out) == 0)
        return 0;
    return util_err(err, errlen, -EINVAL,
                    "--since '%s': expected a span before now (7d, 12h, 30m, 90s, 2w) or an ISO "
                    "8601 time (2026-11-30T04:00:00Z)",
                    s);
}

void train_calib_free(struct train_calib *cal)
{
    model_free(cal->ref);
    free(cal->ref_json);
    free(cal->rates);
    free(cal->col_class);
    free(cal->col_event);
    free(cal->t);
    memset(cal, 0, sizeof(*cal));
}

/* Models as the rows name them: id -> parsed model and its JSON. */
struct model_set {
    store_model_row *rows;
    size_t n;
    model **parsed; /* NULL until asked for */
};

static void model_set_free(struct model_set *ms)
{
    for (size_t i = 0; ms->parsed && i < ms->n; i++)
        model_free(ms->parsed[i]);
    free(ms->parsed);
    store_models_free(ms->rows, ms->n);
}

static int model_of(struct model_set *ms, int32_t id, const char *db, int64_t t, model **m,
                    size_t *at, char *err, size_t errlen)
{
    char when[32], why[UTIL_ERRLEN];

    iso_utc(t, when);
    for (size_t i = 0; i < ms->n; i++) {
        if (ms->rows[i].id != id)
            continue;
        if (!ms->parsed[i]) {
            const char *json = ms->rows[i].json ? ms->rows[i].json : "";
            if (model_parse(json, strlen(json), ms->rows[i].name, &ms->parsed[i], why,
                            sizeof(why)) < 0)
                return util_err(err, errlen, -EINVAL,
                                "%s: calibration row at %s: its model (id %d) does not parse: %s",
                                db, when, id, why);
        }
        *m = ms->parsed[i];
        *at = i;
        return 0;
    }
    return util_err(err, errlen, -EINVAL,
                    "%s: calibration row at %s names model id %d, which the models table lacks", db,
                    when, id);
}

/* Rows of two models can share one table when the rates mean the same:
 * same events in the same order, and the same class split. */
static bool same_layout(const model *a, const model *b)
{
    if (a->n_events != b->n_events || a->n_classes != b->n_classes ||
        a->class_event != b->class_event || a->class_mode != b->class_mode ||
        (a->n_classes > 1 && a->class_threshold != b->class_threshold))
        return false;
    for (size_t j = 0; j < a->n_events; j++)
        if (strcmp(a->events[j], b->events[j]) != 0)
            return false;
    return true;
}

static int check_models(struct train_calib *cal, struct model_set *ms, const char *db,
                        const store_calibration_row *rows, size_t n, char *err, size_t errlen)
{
    model *ref, *m;
    size_t at;
    char when[32], keep[32];
    int r = model_of(ms, rows[n - 1].model_id, db, rows[n - 1].t, &ref, &at, err, errlen);

    if (r < 0)
        return r;
    for (size_t i = n; i-- > 0;) {
        r = model_of(ms, rows[i].model_id, db, rows[i].t, &m, &at, err, errlen);
        if (r < 0)
            return r;
        if (!same_layout(m, ref)) {
            iso_utc(rows[i].t, when);
            iso_utc(rows[i + 1].t, keep);
            return util_err(err, errlen, -EINVAL,
                            "%s: calibration rows come from models with different events or "
                            "classes ('%s' up to %s, then '%s'); train on one of them, e.g. "
                            "--since %s",
                            db, m->name, when, ref->name, keep);
        }
        iso_utc(rows[i].t, when);
        if (rows[i].n_classes != ref->n_classes || rows[i].n_events != ref->n_events)
            return util_err(err, errlen, -EBADMSG,
                            "%s: calibration row at %s holds %zu classes x %zu events, its model "
                            "'%s' has %zu x %zu",
                            db, when, rows[i].n_classes, rows[i].n_events, m->name, ref->n_classes,
                            ref->n_events);
    }
    model_of(ms, rows[n - 1].model_id, db, rows[n - 1].t, &ref, &at, err, errlen);
    cal->ref = ref;
    ms->parsed[at] = NULL; /* cal owns it now */
    cal->ref_id = ms->rows[at].id;
    cal->ref_json = strdup(ms->rows[at].json ? ms->rows[at].json : "");
    cal->n_classes = ref->n_classes;
    cal->n_events = ref->n_events;
    return cal->ref_json ? 0 : -ENOMEM;
}

/* The target of row i: the sum of the named domains' power. */
static int row_target(const store_calibration_row *row, char *const *dom, size_t n_dom,
                      const char *db, double *y, char *err, size_t errlen)
{
    char when[32], have[256] = "";
    size_t at = 0;

    *y = 0;
    for (size_t k = 0; k < n_dom; k++) {
        size_t z = 0;
        while (z < row->n_domains && strcmp(row->domain[z], dom[k]) != 0)
            z++;
        if (z < row->n_domains) {
            *y += row->power_w[z];
            continue;
        }
        for (size_t i = 0; i < row->n_domains && at < sizeof(have); i++)
            at += (size_t)snprintf(have + at, sizeof(have) - at, "%s%s", i ? "," : "",
                                   row->domain[i]);
        iso_utc(row->t, when);
        return util_err(err, errlen, -EINVAL,
                        "%s: calibration row at %s has no '%s' power (it has %s); pick "
                        "--domains among those",
                        db, when, dom[k], have[0] ? have : "none");
    }
    if (*y > 0)
        return 0;
    iso_utc(row->t, when);
    return util_err(err, errlen, -EDOM,
                    "%s: calibration row at %s: measured power is %g W; MAPE divides by it, so "
                    "it must be > 0",
                    db, when, *y);
}

/* Feature columns: every event of every class with activity somewhere. */
static int layout_columns(struct train_data *d, struct train_calib *cal, size_t n)
{
    bool active[STORE_MAX_CLASSES] = {false};
    size_t ne = cal->n_events, p = 0;

    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < cal->n_classes; k++)
            for (size_t j = 0; j < ne; j++)
                active[k] |= cal->rates[(i * cal->n_classes + k) * ne + j] != 0;
    cal->col_class = calloc(cal->n_classes * ne + 1, sizeof(size_t));
    cal->col_event = calloc(cal->n_classes * ne + 1, sizeof(size_t));
    d->features = calloc(cal->n_classes * ne + 1, sizeof(char *));
    if (!cal->col_class || !cal->col_event || !d->features)
        return -ENOMEM;
    for (size_t k = 0; k < cal->n_classes; k++)
        for (size_t j = 0; active[k] && j < ne; j++) {
            cal->col_class[p] = k;
            cal->col_event[p] = j;
            if (cal->n_classes > 1 ? asprintf(&d->features[p], "%s:%s", cal->ref->classes[k].name,
                                              cal->ref->events[j]) < 0
                                   : !(d->features[p] = strdup(cal->ref->events[j]))) {
                d->features[p] = NULL;
                d->p = p;
                return -ENOMEM;
            }
            p++;
        }
    d->p = p;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The table: feature columns then the target, column-major. */
static int fill_table(struct train_data *d, struct train_calib *cal, const double *y, size_t n)
{
    learn_table *t = calloc(1, sizeof(*t));
    double *sorted = malloc(n * sizeof(double));

    d->t = t;
    if (!t || !sorted || !(t->x = malloc(n * (d->p + 1) * sizeof(double))) ||
        !(t->names = calloc(d->p + 1, sizeof(char *))) || !(t->line = calloc(n, sizeof(int))) ||
        !(d->x = calloc(d->p + 1, sizeof(*d->x)))) {
        free(sorted);
        return -ENOMEM;
    }
    t->n_rows = d->n = n;
    t->n_cols = d->p + 1;
    for (size_t c = 0; c <= d->p; c++)
        if (!(t->names[c] = strdup(c < d->p ? d->features[c] : "power"))) {
            free(sorted);
            return -ENOMEM;
        }
    for (size_t c = 0; c < d->p; c++) {
        double *col = learn_table_col(t, c);
        for (size_t i = 0; i < n; i++)
            col[i] = cal->rates[(i * cal->n_classes + cal->col_class[c]) * cal->n_events +
                                cal->col_event[c]];
        d->x[c] = col;
    }
    memcpy(learn_table_col(t, d->p), y, n * sizeof(double));
    d->y = learn_table_col(t, d->p);
    memcpy(sorted, y, n * sizeof(double));
    qsort(sorted, n, sizeof(double), cmp_double);
    cal->idle_p5 = sorted[(size_t)llround(0.05 * (double)(n - 1))];
    free(sorted);
    util_sha256_hex(t->x, n * (d->p + 1) * sizeof(double), d->sha256);
    return 0;
}

static int build(struct train_data *d, struct train_calib *cal, const store_calibration_row *rows,
                 size_t n, const char *db, const char *domains, char *err, size_t errlen)
{
    char **dom = NULL;
    size_t n_dom = 0, per_row = cal->n_classes * cal->n_events;
    double *y = malloc(n * sizeof(double));
    int r = util_split_list(domains, ',', &dom, &n_dom);

    if (r < 0) {
        free(y);
        return util_err(err, errlen, r, "--domains '%s': expected a list like package,dram",
                        domains);
    }
    cal->rates = malloc(n * per_row * sizeof(double) + 1);
    cal->t = malloc(n * sizeof(int64_t));
    r = y && cal->rates && cal->t ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++) {
        r = row_target(&rows[i], dom, n_dom, db, &y[i], err, errlen);
        memcpy(cal->rates + i * per_row, rows[i].rates, per_row * sizeof(double));
        cal->t[i] = rows[i].t;
    }
    util_strv_free(dom, n_dom);
    if (r == 0)
        r = layout_columns(d, cal, n);
    if (r == 0 && d->p == 0)
        r = util_err(err, errlen, -EINVAL,
                     "%s: no tracked process ran in any of the %zu calibration rows; there is "
                     "no activity to learn from",
                     db, n);
    if (r == 0)
        r = fill_table(d, cal, y, n);
    if (r == 0)
        r = train_find_constants(d);
    free(y);
    return r;
}

static int read_rows(const char *path, int64_t since, store_calibration_row **rows, size_t *n,
                     struct model_set *ms, char *err, size_t errlen)
{
    store_reader *rd;
    char when[32];
    int r = store_reader_open(path, &rd, err, errlen);

    if (r < 0)
        return r;
    r = store_calibration_since(rd, since, 0, rows, n, err, errlen);
    if (r == 0)
        r = store_list_models(rd, &ms->rows, &ms->n, err, errlen);
    store_reader_close(rd);
    if (r == 0 && !(ms->parsed = calloc(ms->n + 1, sizeof(model *))))
        r = -ENOMEM;
    if (r == 0 && *n == 0) {
        iso_utc(since, when);
        r = util_err(err, errlen, -ENODATA,
                     "%s: no calibration rows since %s (the daemon writes one per second while "
                     "it measures RAPL power)",
                     path, when);
    }
    return r;
}

int train_db_load(struct train_data *d, struct train_calib *cal, const char *path, int64_t since,
                  const char *domains, char *err, size_t errlen)
{
    store_calibration_row *rows = NULL;
    struct model_set ms = {0};
    size_t n = 0;
    int r;

    memset(d, 0, sizeof(*d));
    memset(cal, 0, sizeof(*cal));
    r = read_rows(path, since, &rows, &n, &ms, err, errlen);
    if (r == 0)
        r = check_models(cal, &ms, path, rows, n, err, errlen);
    if (r == 0)
        r = build(d, cal, rows, n, path, domains, err, errlen);
    if (r == 0) {
        iso_utc(since, cal->since);
        iso_utc(rows[0].t, cal->first);
        iso_utc(rows[n - 1].t, cal->last);
    }
    store_calibration_free(rows, n);
    model_set_free(&ms);
    if (r < 0) {
        train_data_free(d);
        train_calib_free(cal);
    }
    return r;
}
