/* train_data: a CSV dataset for the trainers, checked the way a person
 * needs it checked — every refusal names the file, line and column. */
#include "train.h"
#include "util/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void train_data_free(struct train_data *d)
{
    learn_table_free(d->t);
    util_strv_free(d->features, d->p);
    free(d->extra_name[0]);
    free(d->extra_name[1]);
    free(d->x);
    free(d->constant);
    memset(d, 0, sizeof(*d));
}

int train_parse_size(const char *opt, const char *s, size_t *out, char *err, size_t errlen)
{
    long v;

    if (util_parse_long(s, &v) < 0 || v < 0)
        return util_err(err, errlen, -EINVAL, "%s '%s': expected a non-negative integer", opt, s);
    *out = (size_t)v;
    return 0;
}

int train_parse_double(const char *opt, const char *s, double *out, char *err, size_t errlen)
{
    if (util_parse_double(s, out) < 0)
        return util_err(err, errlen, -EINVAL, "%s '%s': expected a number", opt, s);
    return 0;
}

static void normalise_column(const char *in, char *out, size_t len)
{
    size_t n = 0;

    if (strncasecmp(in, "curr_", 5) == 0 || strncasecmp(in, "curr-", 5) == 0)
        in += 5;
    for (; *in && n + 1 < len; in++)
        out[n++] = *in == '-' || *in == '.' ? '_' : (char)tolower((unsigned char)*in);
    out[n] = '\0';
    if (n >= 6 && strcmp(out + n - 6, "_total") == 0)
        out[n -= 6] = '\0';
    if (n >= 6 && strcmp(out + n - 6, "misses") == 0)
        out[n - 2] = '\0';
}

bool train_column_matches(const char *want, const char *have)
{
    char a[128], b[128];

    normalise_column(want, a, sizeof(a));
    normalise_column(have, b, sizeof(b));
    return strcmp(a, b) == 0;
}

/* The header's name for extra column `want`: exact first, then (loose) the
 * first usual spelling; NULL when there is none. */
static const char *find_extra(const learn_csv *c, const char *want, bool loose)
{
    if (learn_csv_column(c, want) >= 0 || !loose)
        return learn_csv_column(c, want) >= 0 ? want : NULL;
    for (size_t j = 0; j < c->n_cols; j++)
        if (train_column_matches(want, c->header[j]))
            return c->header[j];
    return NULL;
}

/* Column names to load: features, target, per, extras — in that order. */
static int column_list(struct train_data *d, const struct train_source *s, const learn_csv *c,
                       const char **cols, size_t *n, bool *has_extra)
{
    *n = 0;
    for (size_t j = 0; j < d->p; j++)
        cols[(*n)++] = d->features[j];
    cols[(*n)++] = s->target;
    if (s->per)
        cols[(*n)++] = s->per;
    for (size_t e = 0; e < 2; e++) {
        const char *name = s->extra[e] ? find_extra(c, s->extra[e], s->extra_loose[e]) : NULL;
        if (s->extra[e] && !name && !s->extra_optional[e])
            name = s->extra[e]; /* learn_table_from_csv names it missing */
        has_extra[e] = name != NULL;
        if (name && !(d->extra_name[e] = strdup(name)))
            return -ENOMEM;
        if (name)
            cols[(*n)++] = name;
    }
    return 0;
}

/* --drop-invalid: drops the rows whose target or interval check_rows would
 * refuse, compacting the columns of the table. */
static void drop_refused(struct train_data *d, const struct train_source *s)
{
    learn_table *t = d->t;
    const double *per = s->per ? learn_table_col(t, d->p + 1) : NULL;
    size_t kept = 0, n = t->n_rows;

    for (size_t i = 0; i < n; i++) {
        if ((s->need_positive_target && !(d->y[i] > 0)) || (per && !(per[i] > 0)))
            continue;
        for (size_t j = 0; j < t->n_cols; j++)
            t->x[j * n + kept] = t->x[j * n + i];
        t->line[kept++] = t->line[i];
    }
    for (size_t j = 1; j < t->n_cols; j++)
        memmove(t->x + j * kept, t->x + j * n, kept * sizeof(double));
    d->dropped += n - kept;
    t->n_rows = d->n = kept;
    d->y = learn_table_col(t, d->p);
}

static int check_rows(struct train_data *d, const struct train_source *s, const learn_csv *c,
                      char *err, size_t errlen)
{
    int tcol = learn_csv_column(c, s->target) + 1,
        pcol = s->per ? learn_csv_column(c, s->per) + 1 : 0;
    const double *per = s->per ? learn_table_col(d->t, d->p + 1) : NULL;

    if (d->n == 0)
        return util_err(err, errlen, -EINVAL, "%s: no data rows%s", s->path,
                        d->dropped ? " left after --drop-invalid" : "");
    for (size_t i = 0; i < d->n; i++) {
        if (s->need_positive_target && !(d->y[i] > 0))
            return util_err(err, errlen, -EDOM,
                            "%s:%d:%d: target '%s' is %g; MAPE divides by the target, so it "
                            "must be > 0",
                            s->path, d->t->line[i], tcol, s->target, d->y[i]);
        if (per && !(per[i] > 0))
            return util_err(err, errlen, -EDOM,
                            "%s:%d:%d: interval '%s' is %g; --per needs a positive interval",
                            s->path, d->t->line[i], pcol, s->per, per[i]);
    }
    return 0;
}

int train_find_constants(struct train_data *d)
{
    d->constant = malloc((d->p ? d->p : 1) * sizeof(size_t));
    if (!d->constant)
        return -ENOMEM;
    for (size_t j = 0; j < d->p; j++) {
        bool same = true;
        for (size_t i = 1; i < d->n && same; i++)
            same = d->x[j][i] == d->x[j][0];
        if (same)
            d->constant[d->n_constant++] = j;
    }
    return 0;
}

static int load_table(struct train_data *d, const struct train_source *s, bool *has_extra,
                      char *err, size_t errlen)
{
    const char *cols[d->p + 4];
    learn_csv *c;
    size_t n;
    char *bytes;
    size_t len;
    int r;

    r = learn_csv_read(s->path, &c, err, errlen);
    if (r < 0)
        return r;
    r = column_list(d, s, c, cols, &n, has_extra);
    if (r == 0)
        r = learn_table_from_csv(c, cols, n, s->drop_invalid ? LEARN_DROP_INVALID : 0, &d->t,
                                 &d->dropped, err, errlen);
    if (r == 0) {
        d->n = d->t->n_rows;
        d->y = learn_table_col(d->t, d->p);
        if (s->drop_invalid)
            drop_refused(d, s);
        r = check_rows(d, s, c, err, errlen);
    }
    learn_csv_free(c);
    if (r == 0 && util_read_file(s->path, &bytes, &len) == 0) {
        util_sha256_hex(bytes, len, d->sha256);
        free(bytes);
    }
    return r;
}

int train_data_load(struct train_data *d, const struct train_source *s, char *err, size_t errlen)
{
    bool has_extra[2] = {false, false};
    int r;

    memset(d, 0, sizeof(*d));
    if (!s->target)
        return util_err(err, errlen, -EINVAL, "--target COLUMN is required");
    if (!s->features)
        return util_err(err, errlen, -EINVAL, "--features a,b,c is required");
    r = util_split_list(s->features, ',', &d->features, &d->p);
    if (r < 0)
        return util_err(err, errlen, r, "--features '%s': expected a comma-separated list",
                        s->features);
    r = load_table(d, s, has_extra, err, errlen);
    if (r == 0 && !(d->x = calloc(d->p ? d->p : 1, sizeof(*d->x))))
        r = -ENOMEM;
    if (r < 0) {
        train_data_free(d);
        return r;
    }
    size_t at = d->p + 1 + (s->per ? 1 : 0);
    for (size_t e = 0; e < 2; e++)
        if (has_extra[e])
            d->extra[e] = learn_table_col(d->t, at++);
    for (size_t j = 0; j < d->p; j++) {
        double *col = learn_table_col(d->t, j);
        if (s->per)
            for (size_t i = 0; i < d->n; i++)
                col[i] /= learn_table_col(d->t, d->p + 1)[i];
        d->x[j] = col;
    }
    r = train_find_constants(d);
    if (r < 0)
        train_data_free(d);
    return r;
}
