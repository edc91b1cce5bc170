/* rank_input: the variants `wattprof rank` ranks, and reading them from a
 * file — CSV in long form through learn_csv, or a JSON object of arrays
 * through json-c — with errors that name FILE:LINE:COLUMN. */
#include "rank_cli.h"

#include "learn/learn.h"
#include "util/util.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RANK_MIN_MEASUREMENTS 4

int rank_variants_init(rank_variants *rv)
{
    memset(rv, 0, sizeof(*rv));
    return 0;
}

void rank_variants_clear(rank_variants *rv)
{
    for (size_t v = 0; v < rv->p; v++) {
        free(rv->names[v]);
        free(rv->x[v]);
    }
    free(rv->names);
    free(rv->x);
    free(rv->n);
    free(rv->x_cap);
    free(rv->flops);
    free(rv->line);
    free(rv->col);
    memset(rv, 0, sizeof(*rv));
}

long rank_variants_find(const rank_variants *rv, const char *name)
{
    for (size_t v = 0; v < rv->p; v++)
        if (strcmp(rv->names[v], name) == 0)
            return (long)v;
    return -1;
}

/* realloc of the array *pp to cap items of `size` bytes. */
static int grow_array(void *pp, size_t cap, size_t size)
{
    void **p = pp, *n = realloc(*p, cap * size);

    if (!n)
        return -ENOMEM;
    *p = n;
    return 0;
}

/* Makes room for more variants in every per-variant array. */
static int grow(rank_variants *rv)
{
    size_t cap = rv->cap ? rv->cap * 2 : 8;

    if (grow_array(&rv->names, cap, sizeof(*rv->names)) < 0 ||
        grow_array(&rv->x, cap, sizeof(*rv->x)) < 0 ||
        grow_array(&rv->n, cap, sizeof(*rv->n)) < 0 ||
        grow_array(&rv->x_cap, cap, sizeof(*rv->x_cap)) < 0 ||
        grow_array(&rv->flops, cap, sizeof(*rv->flops)) < 0 ||
        grow_array(&rv->line, cap, sizeof(*rv->line)) < 0 ||
        grow_array(&rv->col, cap, sizeof(*rv->col)) < 0)
        return -ENOMEM;
    rv->cap = cap;
    return 0;
}

int rank_variants_add(rank_variants *rv, const char *name, size_t *idx)
{
    char *copy;

    if (rank_variants_find(rv, name) >= 0)
        return -EEXIST;
    if (rv->p == rv->cap && grow(rv) < 0)
        return -ENOMEM;
    copy = strdup(name);
    if (!copy)
        return -ENOMEM;
    rv->names[rv->p] = copy;
    rv->x[rv->p] = NULL;
    rv->n[rv->p] = rv->x_cap[rv->p] = 0;
    rv->flops[rv->p] = NAN;
    rv->line[rv->p] = rv->col[rv->p] = 0;
    *idx = rv->p++;
    return 0;
}

int rank_variants_push(rank_variants *rv, size_t v, double x)
{
    if (rv->n[v] == rv->x_cap[v]) {
        size_t cap = rv->x_cap[v] ? rv->x_cap[v] * 2 : 16;
        double *n = realloc(rv->x[v], cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        rv->x[v] = n;
        rv->x_cap[v] = cap;
    }
    rv->x[v][rv->n[v]++] = x;
    return 0;
}

bool rank_variants_have_flops(const rank_variants *rv)
{
    for (size_t v = 0; v < rv->p; v++)
        if (isnan(rv->flops[v]))
            return false;
    return rv->p > 0;
}

static int check_counts(const char *path, const rank_variants *rv, char *err, size_t errlen)
{
    if (rv->p == 0)
        return util_err(err, errlen, -EINVAL, "%s: no variants", path);
    for (size_t v = 0; v < rv->p; v++)
        if (rv->n[v] < RANK_MIN_MEASUREMENTS)
            return util_err(err, errlen, -EINVAL,
                            "%s:%d:%d: variant '%s' has %zu measurement%s; at least %d are needed",
                            path, rv->line[v], rv->col[v], rv->names[v], rv->n[v],
                            rv->n[v] == 1 ? "" : "s", RANK_MIN_MEASUREMENTS);
    return 0;
}

/* ---- CSV: variant,value[,flops] ------------------------------------------- */

struct csv_cols {
    int name, value, flops;
};

static int csv_number(const learn_csv *c, size_t row, int col, const char *what, double *out,
                      char *err, size_t errlen)
{
    const char *cell = learn_csv_cell(c, row, (size_t)col);

    if (util_parse_double(cell, out) < 0)
        return util_err(err, errlen, -EINVAL, "%s:%d:%d: non-numeric %s '%s'", c->path,
                        c->line[row], col + 1, what, cell);
    if (*out < 0)
        return util_err(err, errlen, -EINVAL, "%s:%d:%d: negative %s %s", c->path, c->line[row],
                        col + 1, what, cell);
    return 0;
}

static int csv_flops(const learn_csv *c, size_t row, const struct csv_cols *k, rank_variants *rv,
                     size_t v, char *err, size_t errlen)
{
    double f;
    int r = csv_number(c, row, k->flops, "FLOP count", &f, err, errlen);

    if (r < 0)
        return r;
    if (!isnan(rv->flops[v]) && rv->flops[v] != f)
        return util_err(err, errlen, -EINVAL,
                        "%s:%d:%d: variant '%s' has FLOP count %g here but %g on line %d", c->path,
                        c->line[row], k->flops + 1, rv->names[v], f, rv->flops[v], rv->line[v]);
    rv->flops[v] = f;
    return 0;
}

static int csv_row(const learn_csv *c, size_t row, const struct csv_cols *k, rank_variants *rv,
                   char *err, size_t errlen)
{
    const char *name = learn_csv_cell(c, row, (size_t)k->name);
    long found = rank_variants_find(rv, name);
    size_t v;
    double x;
    int r;

    if (!*name)
        return util_err(err, errlen, -EINVAL, "%s:%d:%d: empty variant name", c->path, c->line[row],
                        k->name + 1);
    if (found < 0) {
        r = rank_variants_add(rv, name, &v);
        if (r < 0)
            return r;
        rv->line[v] = c->line[row];
        rv->col[v] = k->name + 1;
    } else {
        v = (size_t)found;
    }
    r = csv_number(c, row, k->value, "value", &x, err, errlen);
    if (r == 0 && k->flops >= 0)
        r = csv_flops(c, row, k, rv, v, err, errlen);
    return r < 0 ? r : rank_variants_push(rv, v, x);
}

static int read_csv(const char *path, rank_variants *rv, char *err, size_t errlen)
{
    learn_csv *c;
    struct csv_cols k;
    int r = learn_csv_read(path, &c, err, errlen);

    if (r < 0)
        return r;
    k.name = learn_csv_column(c, "variant");
    k.value = learn_csv_column(c, "value");
    k.flops = learn_csv_column(c, "flops");
    if (k.name < 0 || k.value < 0)
        r = util_err(err, errlen, -EINVAL,
                     "%s:1:1: the header must name the columns variant,value[,flops]", path);
    for (size_t i = 0; r == 0 && i < c->n_rows; i++)
        r = csv_row(c, i, &k, rv, err, errlen);
    learn_csv_free(c);
    return r;
}

/* ---- JSON: {"variant": [values...]} -------------------------------------- */

/* json-c keeps the last of duplicate keys silently, so the top-level keys
 * are found in the (already valid) text to catch duplicates and to know
 * where each variant is written. Keys are decoded by json-c. */
struct json_key {
    char *name;
    size_t off;
};

static const char *skip_string(const char *s)
{
    for (s++; *s && *s != '"'; s++)
        if (*s == '\\' && s[1])
            s++;
    return s;
}

static int key_at(const char *start, const char *end, size_t off, struct json_key *out)
{
    char *raw = strndup(start, (size_t)(end - start + 1));
    json_object *j = raw ? json_tokener_parse(raw) : NULL;

    free(raw);
    out->name = j ? strdup(json_object_get_string(j)) : NULL;
    out->off = off;
    json_object_put(j);
    return out->name ? 0 : -ENOMEM;
}

static int top_keys(const char *text, struct json_key **out, size_t *n)
{
    struct json_key *keys = NULL;
    size_t k = 0, cap = 0;
    int depth = 0, r = 0;

    for (const char *s = text; r == 0 && *s; s++) {
        if (*s == '{' || *s == '[') {
            depth++;
        } else if (*s == '}' || *s == ']') {
            depth--;
        } else if (*s == '"') {
            const char *end = skip_string(s), *after = end + 1;
            while (*after == ' ' || *after == '\t' || *after == '\n' || *after == '\r')
                after++;
            if (depth == 1 && *after == ':') {
                if (k == cap) {
                    struct json_key *nk = realloc(keys, (cap = cap ? cap * 2 : 16) * sizeof(*nk));
                    if (!nk) {
                        r = -ENOMEM;
                        break;
                    }
                    keys = nk;
                }
                r = key_at(s, end, (size_t)(s - text), &keys[k]);
                k += r == 0;
            }
            s = end;
        }
    }
    *out = keys;
    *n = k;
    return r;
}

static void free_keys(struct json_key *keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(keys[i].name);
    free(keys);
}

static int json_values(const char *path, json_object *arr, rank_variants *rv, size_t v, char *err,
                       size_t errlen)
{
    const char *name = rv->names[v];

    if (!json_object_is_type(arr, json_type_array))
        return util_err(err, errlen, -EINVAL,
                        "%s:%d:%d: variant '%s': expected an array of numbers", path, rv->line[v],
                        rv->col[v], name);
    for (size_t i = 0; i < json_object_array_length(arr); i++) {
        json_object *e = json_object_array_get_idx(arr, i);
        double x;
        int r;
        if (!json_object_is_type(e, json_type_double) && !json_object_is_type(e, json_type_int))
            return util_err(err, errlen, -EINVAL,
                            "%s:%d:%d: variant '%s' item %zu: non-numeric value %s", path,
                            rv->line[v], rv->col[v], name, i + 1, json_object_to_json_string(e));
        x = json_object_get_double(e);
        if (x < 0 || !isfinite(x))
            return util_err(err, errlen, -EINVAL,
                            "%s:%d:%d: variant '%s' item %zu: negative value %g", path, rv->line[v],
                            rv->col[v], name, i + 1, x);
        r = rank_variants_push(rv, v, x);
        if (r < 0)
            return r;
    }
    return 0;
}

static int json_parse(const char *path, const char *text, size_t len, json_object **out, char *err,
                      size_t errlen)
{
    json_tokener *tok = json_tokener_new();
    json_object *j;
    int line, col;

    if (!tok)
        return -ENOMEM;
    j = json_tokener_parse_ex(tok, text, (int)len);
    if (!j || json_tokener_get_error(tok) != json_tokener_success ||
        json_tokener_get_parse_end(tok) < len) {
        util_line_col(text, json_tokener_get_parse_end(tok), &line, &col);
        util_err(err, errlen, -EINVAL, "%s:%d:%d: invalid JSON: %s", path, line, col,
                 j ? "trailing data" : json_tokener_error_desc(json_tokener_get_error(tok)));
        json_object_put(j);
        json_tokener_free(tok);
        return -EINVAL;
    }
    json_tokener_free(tok);
    if (!json_object_is_type(j, json_type_object)) {
        json_object_put(j);
        return util_err(err, errlen, -EINVAL, "%s:1:1: expected an object {\"variant\": [values]}",
                        path);
    }
    *out = j;
    return 0;
}

static int json_variants(const char *path, const char *text, json_object *j, rank_variants *rv,
                         char *err, size_t errlen)
{
    struct json_key *keys;
    size_t n_keys, v;
    int r = top_keys(text, &keys, &n_keys);

    for (size_t i = 0; r == 0 && i < n_keys; i++) {
        int line, col;
        util_line_col(text, keys[i].off, &line, &col);
        r = rank_variants_add(rv, keys[i].name, &v);
        if (r == -EEXIST) {
            r = util_err(err, errlen, -EINVAL,
                         "%s:%d:%d: duplicate variant '%s' (first on line %d)", path, line, col,
                         keys[i].name, rv->line[rank_variants_find(rv, keys[i].name)]);
            break;
        }
        if (r < 0)
            break;
        rv->line[v] = line;
        rv->col[v] = col;
        r = json_values(path, json_object_object_get(j, keys[i].name), rv, v, err, errlen);
    }
    free_keys(keys, n_keys);
    return r;
}

static int read_json(const char *path, const char *text, size_t len, rank_variants *rv, char *err,
                     size_t errlen)
{
    json_object *j = NULL;
    int r = json_parse(path, text, len, &j, err, errlen);

    if (r < 0)
        return r;
    r = json_variants(path, text, j, rv, err, errlen);
    json_object_put(j);
    return r;
}

int rank_input_read(const char *path, rank_variants *rv, char *err, size_t errlen)
{
    char *text;
    size_t len;
    const char *s;
    int r = util_read_file(path, &text, &len);

    if (r < 0)
        return util_err(err, errlen, r, "%s: %s", path, strerror(-r));
    for (s = text; *s == ' ' || *s == '\t' || *s == '\n' || *s == '\r'; s++)
        ;
    r = *s == '{' ? read_json(path, text, len, rv, err, errlen) : read_csv(path, rv, err, errlen);
    free(text);
    return r < 0 ? r : check_counts(path, rv, err, errlen);
}
