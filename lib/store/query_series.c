/* query_series: one process's per-second and minute rows in time order,
 * and the changes of its class along them. */
#include "store/query-internal.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- Per-second rows ---------------------------------------------------------- */

/* rows: process ?1's per-second and minute rows after ?2 up to ?3 (its
 * last_seen, or more). Read without ORDER BY they come minute rows first,
 * then batch by batch, then second by second: in time order but for rows
 * that came late into a batch of their own, which the callers sort. Sorting
 * them all in SQLite took longer than the reads. The settled rows are read
 * from the batches that can hold seconds of the process's life (its
 * first_seen to its last_seen, which the fold keeps at or past its settled
 * rows' seconds). */
#define ROW_COLS "t, attributed_j, standalone_j, cpu_s, class, model_id"
// clang-format off
#define PROCESS_ROWS                                                                               \
    "WITH" BATCH_SPAN ", rows AS ("                                                                \
    " SELECT " ROW_COLS " FROM process_energy_minute WHERE process_id = ?1 AND t > ?2"             \
    " UNION ALL SELECT e.t, e.attributed_j, e.standalone_j, e.cpu_s, e.class, e.model_id"          \
    " FROM processes p CROSS JOIN span CROSS JOIN process_energy_batch b"                          \
    " CROSS JOIN process_energy_settled e ON e.batch = b.batch AND e.process_id = p.id"            \
    " WHERE p.id = ?1 AND b.t_max >= max(?2 + 1, p.first_seen)"                                    \
    " AND b.t_max <= min(?3, p.last_seen) + span.s AND b.t_min <= ?3 AND e.t > ?2"                 \
    " UNION ALL SELECT e.t, e.attributed_j, e.standalone_j, e.cpu_s, e.class, e.model_id"          \
    " FROM process_energy_recent e WHERE e.process_id = ?1 AND e.t > ?2 AND e.t <= ?3)"
// clang-format on

/* Process `id`'s rows after `after` up to `last_seen`: `what` selects from
 * PROCESS_ROWS, prepared on first use into *st; reset it after the rows. */
static int process_rows(store_reader *r, sqlite3_stmt **st, const char *what, int64_t id,
                        int64_t after, int64_t last_seen)
{
    char sql[4096];
    int rc;

    if (!*st) {
        snprintf(sql, sizeof(sql), PROCESS_ROWS " %s", what);
        if ((rc = query_kept(r, st, sql)) != SQLITE_OK)
            return rc;
    }
    sqlite3_bind_int64(*st, 1, id);
    sqlite3_bind_int64(*st, 2, after);
    sqlite3_bind_int64(*st, 3, last_seen);
    return SQLITE_OK;
}

static int by_time(const void *a, const void *b)
{
    const store_second *x = a, *y = b;

    return (x->t > y->t) - (x->t < y->t);
}

/* Process `id`'s rows after `after` up to `last_seen`, in time order; a
 * row without a class gets `no_class`. */
int query_read_series(store_reader *r, int64_t id, int64_t after, int64_t last_seen, int no_class,
                      store_second **out, size_t *n, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    store_second *v = NULL;
    size_t count = 0, cap = 0;
    int rc = process_rows(r, &r->series, "SELECT " ROW_COLS " FROM rows", id, after, last_seen);

    if (rc != SQLITE_OK)
        return query_fail(r, rc, err, errlen, "reading a process's series");
    st = r->series;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        store_second *e = query_push((void **)&v, &count, &cap, sizeof(*v));
        if (!e) {
            rc = SQLITE_NOMEM;
            break;
        }
        e->t = sqlite3_column_int64(st, 0);
        e->attributed_j = sqlite3_column_double(st, 1);
        e->standalone_j = sqlite3_column_double(st, 2);
        e->cpu_s = sqlite3_column_double(st, 3);
        e->klass = sqlite3_column_type(st, 4) == SQLITE_NULL ? no_class : sqlite3_column_int(st, 4);
        e->model_id = sqlite3_column_int(st, 5);
    }
    sqlite3_reset(st); /* ends its read transaction */
    if (rc != SQLITE_DONE) {
        free(v);
        return rc == SQLITE_NOMEM ? util_err(err, errlen, -ENOMEM, "out of memory")
                                  : query_fail(r, rc, err, errlen, "reading a process's series");
    }
    for (size_t i = 1; i < count; i++)
        if (v[i].t < v[i - 1].t) {
            qsort(v, count, sizeof(*v), by_time);
            break;
        }
    *out = v;
    *n = count;
    return 0;
}

/* Appends `klass` at `t` to the changes when it differs from the last. */
static int add_change(store_class_change **v, size_t *n, size_t *cap, int64_t t, int klass)
{
    store_class_change *c;

    if (*n > 0 && (*v)[*n - 1].klass == klass)
        return 0;
    c = query_push((void **)v, n, cap, sizeof(**v));
    if (!c)
        return -ENOMEM;
    *c = (store_class_change){.t = t, .klass = klass};
    return 0;
}

/* The changes from rows read in time order (query_read_series): the way when the
 * stream of store_process_classes came out of order. */
static int classes_sorted(store_reader *r, int64_t process_id, store_class_change **out, size_t *n,
                          char *err, size_t errlen)
{
    store_class_change *v = NULL;
    size_t count = 0, changes = 0, cap = 0;
    store_second *rows;
    int ret =
        query_read_series(r, process_id, INT64_MIN, INT64_MAX, -1, &rows, &count, err, errlen);

    for (size_t i = 0; ret == 0 && i < count; i++)
        ret = add_change(&v, &changes, &cap, rows[i].t, rows[i].klass);
    free(rows);
    if (ret < 0) {
        free(v);
        return util_err(err, errlen, ret, "out of memory");
    }
    *out = v;
    *n = changes;
    return 0;
}

int store_process_classes(store_reader *r, int64_t process_id, store_class_change **out, size_t *n,
                          char *err, size_t errlen)
{
    store_class_change *v = NULL;
    size_t count = 0, cap = 0;
    int64_t last = INT64_MIN;
    bool ordered = true;
    sqlite3_stmt *st;
    int ret = 0, rc = process_rows(r, &r->classes, "SELECT t, coalesce(class, -1) FROM rows",
                                   process_id, INT64_MIN, INT64_MAX);

    if (rc != SQLITE_OK)
        return query_fail(r, rc, err, errlen, "reading a process's classes");
    st = r->classes;
    while (ordered && ret == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t t = sqlite3_column_int64(st, 0);
        ordered = t >= last;
        last = t;
        ret = add_change(&v, &count, &cap, t, sqlite3_column_int(st, 1));
    }
    sqlite3_reset(st);
    if (!ordered || ret < 0 || rc != SQLITE_DONE)
        free(v);
    if (!ordered)
        return classes_sorted(r, process_id, out, n, err, errlen);
    if (ret < 0)
        return util_err(err, errlen, ret, "out of memory");
    if (rc != SQLITE_DONE)
        return query_fail(r, rc, err, errlen, "reading a process's classes");
    *out = v;
    *n = count;
    return 0;
}
