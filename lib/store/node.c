/* node: this node's calibration of idle power and model scale, kept in the
 * node_calibration table so that a daemon restarted on a busy node starts
 * from its last fit (docs/calibration.md). The latest row saved waits in
 * s->node_row (saved_row.h) and is written with the next commit. */
#include "store/store-internal.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <string.h>

static bool node_calib_valid(const store_node_calib *c)
{
    return c->target[0] && memchr(c->target, '\0', sizeof(c->target)) && isfinite(c->idle_w) &&
           c->idle_w >= 0 && c->idle_se_w >= 0 && memchr(c->model_sha256, '\0', 65);
}

int store_node_calib_save(store *s, const store_node_calib *c)
{
    if (!node_calib_valid(c))
        return -EINVAL;
    saved_row_save(&s->node_row, c);
    return 0;
}

/* Runs NODE_CALIB_UPSERT for `c`; an SQLite result code. */
static int node_calib_step(sqlite3_stmt *st, const store_node_calib *c)
{
    int rc;

    sqlite3_bind_text(st, 1, c->target, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, c->t);
    sqlite3_bind_double(st, 3, c->idle_w);
    sqlite3_bind_double(st, 4, c->idle_se_w);
    conn_bind_real(st, 5, c->scale);
    conn_bind_real(st, 6, c->r2);
    conn_bind_real(st, 7, c->spread_w);
    sqlite3_bind_int64(st, 8, c->rows);
    if (c->model_sha256[0])
        sqlite3_bind_text(st, 9, c->model_sha256, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 9);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        ;
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int node_calib_write_row(const void *row, void *st)
{
    return node_calib_step(st, row);
}

int node_calib_write(store *s, sqlite3_stmt *st)
{
    return saved_row_write(&s->node_row, node_calib_write_row, st);
}

/* Writes c when given; only opens and prepares when NULL. */
static int node_calib_put_or_check(const char *path, const store_node_calib *c, char *err,
                                   size_t errlen)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int rc, ret = 0;

    /* No SQLITE_OPEN_CREATE: the database is the daemon's, made by it. */
    rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
    if (rc == SQLITE_OK)
        rc = packed_register(db);
    if (rc == SQLITE_OK) {
        sqlite3_busy_timeout(db, 5000);
        rc = sqlite3_prepare_v2(db, NODE_CALIB_UPSERT, -1, &st, NULL);
    }
    if (rc == SQLITE_OK && c)
        rc = node_calib_step(st, c);
    if (rc != SQLITE_OK)
        ret = util_err(err, errlen, -EIO, "%s: cannot store the calibration: %s", path,
                       db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return ret;
}

int store_node_calib_put(const char *path, const store_node_calib *c, char *err, size_t errlen)
{
    if (!node_calib_valid(c))
        return util_err(err, errlen, -EINVAL, "%s: a calibration needs a target and an idle >= 0",
                        path);
    return node_calib_put_or_check(path, c, err, errlen);
}

int store_node_calib_check(const char *path, char *err, size_t errlen)
{
    return node_calib_put_or_check(path, NULL, err, errlen);
}
