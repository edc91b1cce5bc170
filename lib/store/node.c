/* node: this node's calibration of idle power and model scale, kept in the
 * node_calibration table so that a daemon restarted on a busy node starts
 * from its last fit (docs/calibration.md). The latest row saved waits under
 * s->lock, like a model, and is written with the next commit. */
#include "store/store-internal.h"

#include <errno.h>
#include <math.h>
#include <string.h>

int store_node_calib_save(store *s, const store_node_calib *c)
{
    if (!c->target[0] || !memchr(c->target, '\0', sizeof(c->target)) || !isfinite(c->idle_w) ||
        c->idle_w < 0 || !(c->idle_se_w >= 0) || !memchr(c->model_sha256, '\0', 65))
        return -EINVAL;
    pthread_mutex_lock(&s->lock);
    s->node = *c;
    s->node_saved++;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static void bind_double_or_null(sqlite3_stmt *st, int i, double v)
{
    if (isfinite(v))
        sqlite3_bind_double(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

int node_calib_write(store *s, sqlite3_stmt *st)
{
    int rc = SQLITE_OK;

    pthread_mutex_lock(&s->lock);
    if (s->node_saved != s->node_committed) {
        const store_node_calib *c = &s->node;
        sqlite3_bind_text(st, 1, c->target, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, c->t);
        sqlite3_bind_double(st, 3, c->idle_w);
        sqlite3_bind_double(st, 4, c->idle_se_w);
        bind_double_or_null(st, 5, c->scale);
        bind_double_or_null(st, 6, c->r2);
        bind_double_or_null(st, 7, c->spread_w);
        sqlite3_bind_int64(st, 8, c->rows);
        if (c->model_sha256[0])
            sqlite3_bind_text(st, 9, c->model_sha256, -1, SQLITE_STATIC);
        else
            sqlite3_bind_null(st, 9);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
            ;
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        s->node_txn = s->node_saved;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

bool node_calib_pending(store *s)
{
    pthread_mutex_lock(&s->lock);
    bool pending = s->node_saved != s->node_committed;
    pthread_mutex_unlock(&s->lock);
    return pending;
}

/* A row saved while the transaction ran stays pending: only the one
 * written is done. */
void node_calib_end_txn(store *s, bool committed)
{
    pthread_mutex_lock(&s->lock);
    if (s->node_txn && committed)
        s->node_committed = s->node_txn;
    s->node_txn = 0;
    pthread_mutex_unlock(&s->lock);
}

void node_calib_unwritten(store *s)
{
    pthread_mutex_lock(&s->lock);
    s->node_committed = 0; /* saves start at 1: whatever was saved is due */
    pthread_mutex_unlock(&s->lock);
}
