/* dataset: CSV files into tables of numbers, with errors that name the
 * file, line and column of a bad cell.  libcsv does the quoting rules; we
 * feed it one physical line at a time so every row knows its line. */
#include "learn/learn.h"
#include "util/util.h"

#include <csv.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct csv_state {
    learn_csv *c;
    char **row; /* cells of the row being assembled */
    size_t row_n, row_cap;
    size_t cells_cap, lines_cap;
    int line;     /* physical line being fed */
    int bad_line; /* first row whose width differs from the header */
    size_t bad_width;
    int oom;
};

static void on_field(void *data, size_t len, void *ctx)
{
    struct csv_state *st = ctx;
    char *cell = strndup(data ? data : "", data ? len : 0);

    if (!cell) {
        st->oom = 1;
        return;
    }
    if (st->row_n == st->row_cap) {
        size_t ncap = st->row_cap ? st->row_cap * 2 : 16;
        char **n = realloc(st->row, ncap * sizeof(*n));
        if (!n) {
            free(cell);
            st->oom = 1;
            return;
        }
        st->row = n;
        st->row_cap = ncap;
    }
    st->row[st->row_n++] = cell;
}

static void drop_row(struct csv_state *st)
{
    for (size_t i = 0; i < st->row_n; i++)
        free(st->row[i]);
    st->row_n = 0;
}

static int append_row(struct csv_state *st)
{
    learn_csv *c = st->c;
    size_t need = (c->n_rows + 1) * c->n_cols;

    if (need > st->cells_cap) {
        size_t ncap = st->cells_cap ? st->cells_cap * 2 : 64 * c->n_cols;
        while (ncap < need)
            ncap *= 2;
        char **n = realloc(c->cells, ncap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        c->cells = n;
        st->cells_cap = ncap;
    }
    if (c->n_rows + 1 > st->lines_cap) {
        size_t ncap = st->lines_cap ? st->lines_cap * 2 : 64;
        int *n = realloc(c->line, ncap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        c->line = n;
        st->lines_cap = ncap;
    }
    memcpy(c->cells + c->n_rows * c->n_cols, st->row, c->n_cols * sizeof(char *));
    c->line[c->n_rows++] = st->line;
    st->row_n = 0;
    return 0;
}

static void on_row(int term, void *ctx)
{
    struct csv_state *st = ctx;
    learn_csv *c = st->c;

    if (st->oom)
        return;
    if (!c->header) {
        c->header = st->row;
        c->n_cols = st->row_n;
        st->row = NULL;
        st->row_n = st->row_cap = 0;
        return;
    }
    if (st->row_n != c->n_cols) {
        if (!st->bad_line) {
            st->bad_line = st->line;
            st->bad_width = st->row_n;
        }
        drop_row(st);
        return;
    }
    if (append_row(st) < 0) {
        drop_row(st);
        st->oom = 1;
    }
}

void learn_csv_free(learn_csv *c)
{
    if (!c)
        return;
    util_strv_free(c->header, c->n_cols);
    if (c->cells)
        for (size_t i = 0; i < c->n_rows * c->n_cols; i++)
            free(c->cells[i]);
    free(c->cells);
    free(c->line);
    free(c->path);
    free(c);
}

static int parse_lines(struct csv_parser *p, struct csv_state *st, const char *buf)
{
    const char *s = buf;

    while (*s) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) + 1 : strlen(s);
        st->line++;
        if (csv_parse(p, s, len, on_field, on_row, st) != len)
            return -EINVAL;
        s += len;
    }
    return csv_fini(p, on_field, on_row, st) == 0 ? 0 : -EINVAL;
}

int learn_csv_read(const char *path, learn_csv **out, char *err, size_t errlen)
{
    struct csv_parser p;
    struct csv_state st = {0};
    char *buf = NULL;
    int r;

    r = util_read_file(path, &buf, NULL);
    if (r < 0)
        return util_err(err, errlen, r, "%s: cannot read: %s", path, strerror(-r));
    st.c = calloc(1, sizeof(*st.c));
    if (!st.c || csv_init(&p, CSV_STRICT | CSV_APPEND_NULL | CSV_STRICT_FINI) != 0) {
        free(buf);
        free(st.c);
        return -ENOMEM;
    }
    r = parse_lines(&p, &st, buf);
    if (r < 0)
        r = util_err(err, errlen, -EINVAL, "%s:%d: malformed CSV: %s", path, st.line,
                     csv_strerror(csv_error(&p)));
    else if (st.oom)
        r = -ENOMEM;
    else if (!st.c->header)
        r = util_err(err, errlen, -EINVAL, "%s: empty file, expected a header line", path);
    else if (st.bad_line)
        r = util_err(err, errlen, -EINVAL, "%s:%d: %zu cells, but the header has %zu", path,
                     st.bad_line, st.bad_width, st.c->n_cols);
    csv_free(&p);
    drop_row(&st);
    free(st.row);
    free(buf);
    if (r == 0 && !(st.c->path = strdup(path)))
        r = -ENOMEM;
    if (r < 0) {
        learn_csv_free(st.c);
        return r;
    }
    *out = st.c;
    return 0;
}

int learn_csv_column(const learn_csv *c, const char *name)
{
    for (size_t j = 0; j < c->n_cols; j++)
        if (strcmp(c->header[j], name) == 0)
            return (int)j;
    return -1;
}

void learn_table_free(learn_table *t)
{
    if (!t)
        return;
    util_strv_free(t->names, t->n_cols);
    free(t->x);
    free(t->line);
    free(t);
}

static int table_alloc(const learn_csv *c, const char *const *cols, size_t n, learn_table **out)
{
    learn_table *t = calloc(1, sizeof(*t));

    if (!t)
        return -ENOMEM;
    t->n_cols = n;
    t->names = calloc(n ? n : 1, sizeof(char *));
    t->x = calloc(n * (c->n_rows ? c->n_rows : 1), sizeof(double));
    t->line = calloc(c->n_rows ? c->n_rows : 1, sizeof(int));
    if (!t->names || !t->x || !t->line) {
        learn_table_free(t);
        return -ENOMEM;
    }
    for (size_t j = 0; j < n; j++)
        if (!(t->names[j] = strdup(cols[j]))) {
            learn_table_free(t);
            return -ENOMEM;
        }
    *out = t;
    return 0;
}

int learn_table_from_csv(const learn_csv *c, const char *const *cols, size_t n, unsigned flags,
                         learn_table **out, size_t *n_dropped, char *err, size_t errlen)
{
    learn_table *t;
    int idx[n ? n : 1];
    size_t kept = 0, dropped = 0;
    int r;

    for (size_t j = 0; j < n; j++) {
        idx[j] = learn_csv_column(c, cols[j]);
        if (idx[j] < 0)
            return util_err(err, errlen, -EINVAL, "%s:1: no column named '%s'", c->path, cols[j]);
    }
    r = table_alloc(c, cols, n, &t);
    if (r < 0)
        return r;
    for (size_t i = 0; i < c->n_rows; i++) {
        bool ok = true;
        for (size_t j = 0; j < n && ok; j++) {
            const char *cell = learn_csv_cell(c, i, (size_t)idx[j]);
            double v;
            if (util_parse_double(cell, &v) < 0) {
                if (!(flags & LEARN_DROP_INVALID)) {
                    learn_table_free(t);
                    return util_err(err, errlen, -EINVAL, "%s:%d:%d: %s value '%s' in column '%s'",
                                    c->path, c->line[i], idx[j] + 1,
                                    *cell ? "non-numeric" : "missing", cell, cols[j]);
                }
                ok = false;
                break;
            }
            t->x[j * c->n_rows + kept] = v;
        }
        if (!ok) {
            dropped++;
            continue;
        }
        t->line[kept++] = c->line[i];
    }
    /* Compact the columns when rows were dropped: they were laid out with
     * stride n_rows of the CSV. */
    for (size_t j = 1; j < n && kept < c->n_rows; j++)
        memmove(t->x + j * kept, t->x + j * c->n_rows, kept * sizeof(double));
    t->n_rows = kept;
    if (n_dropped)
        *n_dropped = dropped;
    *out = t;
    return 0;
}

int learn_table_read(const char *path, const char *const *cols, size_t n, unsigned flags,
                     learn_table **out, size_t *n_dropped, char *err, size_t errlen)
{
    learn_csv *c;
    int r = learn_csv_read(path, &c, err, errlen);

    if (r < 0)
        return r;
    r = learn_table_from_csv(c, cols, n, flags, out, n_dropped, err, errlen);
    learn_csv_free(c);
    return r;
}
