/* fold: every few seconds, the per-second process rows written since the
 * fold watermark added to their processes' totals (process_totals), in
 * the writer's transaction; and a second that comes after its fold, added
 * to its process's totals directly. Readers add the rows after the
 * watermark themselves, so they answer the same whenever the folds ran. */
#include "store/store-internal.h"

#include <string.h>

/* A process's row as a fold adds to it. */
typedef struct fold_row {
    int64_t id, last_seen;
    int64_t was_seen; /* last_seen as read */
    double a, sa, c;
    int klass;
    bool has_class;
} fold_row;

static int fold_read(store *s, int64_t id, fold_row *f)
{
    sqlite3_stmt *st = s->stmt[ST_FOLD_ROW];
    int rc;

    sqlite3_bind_int64(st, 1, id);
    rc = sqlite3_step(st);
    memset(f, 0, sizeof(*f));
    f->id = id;
    if (rc == SQLITE_ROW) {
        f->a = sqlite3_column_double(st, 0);
        f->sa = sqlite3_column_double(st, 1);
        f->c = sqlite3_column_double(st, 2);
        f->last_seen = f->was_seen = sqlite3_column_int64(st, 3);
        f->has_class = sqlite3_column_type(st, 4) != SQLITE_NULL;
        f->klass = sqlite3_column_int(st, 4);
    }
    sqlite3_reset(st);
    /* a row deleted meanwhile (by hand): its seconds have no row to join */
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int fold_write(store *s, const fold_row *f)
{
    sqlite3_stmt *st = s->stmt[f->last_seen == f->was_seen ? ST_FOLD_SUMS : ST_FOLD_SET];

    sqlite3_bind_int64(st, 1, f->id);
    sqlite3_bind_double(st, 2, f->a);
    sqlite3_bind_double(st, 3, f->sa);
    sqlite3_bind_double(st, 4, f->c);
    if (st == s->stmt[ST_FOLD_SET])
        sqlite3_bind_int64(st, 5, f->last_seen);
    if (f->has_class)
        sqlite3_bind_int(st, 6, f->klass);
    else
        sqlite3_bind_null(st, 6);
    return conn_run(st);
}

/* Adds one second's row to f, in time order. */
static void fold_add(fold_row *f, int64_t t, double a, double sa, double c, bool has_class,
                     int klass)
{
    f->a += a;
    f->sa += sa;
    f->c += c;
    if (t >= f->last_seen) {
        f->last_seen = t;
        f->has_class = has_class;
        f->klass = klass;
    }
}

int fold_add_late(store *s, int64_t id, const agg_sec *e)
{
    fold_row f;
    int rc = fold_read(s, id, &f);

    if (rc != SQLITE_OK)
        return rc;
    fold_add(&f, e->t, e->attributed_j, e->standalone_j, e->cpu_s, true, e->klass);
    return fold_write(s, &f);
}

int conn_fold(store *s, int64_t cut)
{
    sqlite3_stmt *st = s->stmt[ST_FOLD];
    fold_row f = {.id = -1};
    int rc = SQLITE_OK, step;

    if (cut <= s->fold_t)
        return SQLITE_OK;
    sqlite3_bind_int64(st, 1, s->fold_t);
    sqlite3_bind_int64(st, 2, cut);
    while (rc == SQLITE_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0), t = sqlite3_column_int64(st, 1);

        if (id != f.id && f.id >= 0)
            rc = fold_write(s, &f);
        if (rc == SQLITE_OK && id != f.id)
            rc = fold_read(s, id, &f);
        fold_add(&f, t, sqlite3_column_double(st, 2), sqlite3_column_double(st, 3),
                 sqlite3_column_double(st, 4), sqlite3_column_type(st, 5) != SQLITE_NULL,
                 sqlite3_column_int(st, 5));
    }
    if (rc == SQLITE_OK && step != SQLITE_DONE)
        rc = step;
    sqlite3_reset(st);
    if (rc == SQLITE_OK && f.id >= 0)
        rc = fold_write(s, &f);
    if (rc != SQLITE_OK)
        return rc;
    st = s->stmt[ST_FOLD_MARK];
    sqlite3_bind_int64(st, 1, cut);
    rc = conn_run(st);
    if (rc == SQLITE_OK)
        s->fold_txn = cut;
    return rc;
}

void conn_fold_end_txn(store *s, bool committed)
{
    if (committed && s->fold_txn > s->fold_t)
        s->fold_t = s->fold_txn;
    s->fold_txn = 0;
}
