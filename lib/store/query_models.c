/* query_models: the reader's queries of the models, the calibration rows
 * and the node's calibration (the trainer's and `wattprof models`' reads). */
#include "store/query-internal.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Models and calibration -------------------------------------------------- */

void store_models_free(store_model_row *m, size_t n)
{
    for (size_t i = 0; m && i < n; i++) {
        free(m[i].name);
        free(m[i].engine);
        free(m[i].json);
    }
    free(m);
}

int store_list_models(store_reader *r, store_model_row **out, size_t *n, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    store_model_row *v = NULL;
    size_t count = 0, cap = 0;
    int rc = sqlite3_prepare_v2(r->db,
                                "SELECT id, sha256, name, engine, json, first_loaded, last_loaded"
                                " FROM models ORDER BY id",
                                -1, &st, NULL);

    if (rc != SQLITE_OK)
        return query_fail(r, rc, err, errlen, "listing models");
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        store_model_row *m = query_push((void **)&v, &count, &cap, sizeof(*v));
        if (!m) {
            rc = SQLITE_NOMEM;
            break;
        }
        m->id = sqlite3_column_int(st, 0);
        snprintf(m->sha256, sizeof(m->sha256), "%s", sqlite3_column_text(st, 1));
        m->name = query_dup_col(st, 2);
        m->engine = query_dup_col(st, 3);
        m->json = query_dup_col(st, 4);
        m->first_loaded = sqlite3_column_int64(st, 5);
        m->last_loaded = sqlite3_column_int64(st, 6);
        if (!m->json) {
            rc = SQLITE_NOMEM;
            break;
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        store_models_free(v, count);
        return rc == SQLITE_NOMEM ? util_err(err, errlen, -ENOMEM, "out of memory")
                                  : query_fail(r, rc, err, errlen, "listing models");
    }
    *out = v;
    *n = count;
    return 0;
}

void store_calibration_free(store_calibration_row *c, size_t n)
{
    for (size_t i = 0; c && i < n; i++) {
        free(c[i].domain);
        free(c[i].power_w);
        free(c[i].rates);
    }
    free(c);
}

int store_calibration_since(store_reader *r, int64_t since, size_t limit,
                            store_calibration_row **out, size_t *n, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    store_calibration_row *v = NULL;
    size_t count = 0, cap = 0;
    int ret = 0, rc = sqlite3_prepare_v2(r->db,
                                         "SELECT t, duration_s, model_id, power_w, rates"
                                         " FROM calibration WHERE t >= ?1 ORDER BY t LIMIT ?2",
                                         -1, &st, NULL);

    if (rc != SQLITE_OK)
        return query_fail(r, rc, err, errlen, "reading calibration rows");
    sqlite3_bind_int64(st, 1, since);
    sqlite3_bind_int64(st, 2, limit ? (int64_t)limit : -1);
    while (ret == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        store_calibration_row *c = query_push((void **)&v, &count, &cap, sizeof(*v));
        if (!c) {
            ret = util_err(err, errlen, -ENOMEM, "out of memory");
            break;
        }
        c->t = sqlite3_column_int64(st, 0);
        c->duration_s = sqlite3_column_double(st, 1);
        c->model_id = sqlite3_column_int(st, 2);
        ret = store_calib_parse((const char *)sqlite3_column_text(st, 3),
                                (const char *)sqlite3_column_text(st, 4), c);
        if (ret < 0)
            util_err(err, errlen, ret, "%s: calibration row t=%lld: %s", r->path, (long long)c->t,
                     ret == -ENOMEM ? "out of memory" : "malformed JSON");
    }
    if (ret == 0 && rc != SQLITE_DONE)
        ret = query_fail(r, rc, err, errlen, "reading calibration rows");
    sqlite3_finalize(st);
    if (ret < 0) {
        store_calibration_free(v, count);
        return ret;
    }
    *out = v;
    *n = count;
    return 0;
}

/* ---- The node's calibration ------------------------------------------------ */

static double column_or_nan(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

int store_node_calib_get(store_reader *r, const char *target, store_node_calib *out, char *err,
                         size_t errlen)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(r->db,
                                "SELECT t, idle_w, idle_se_w, scale, r2, spread_w, rows,"
                                " model_sha256 FROM node_calibration WHERE target = ?1",
                                -1, &st, NULL);

    if (rc != SQLITE_OK)
        return query_fail(r, rc, err, errlen, "reading the node calibration");
    sqlite3_bind_text(st, 1, target, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *sha = sqlite3_column_text(st, 7);
        memset(out, 0, sizeof(*out));
        snprintf(out->target, sizeof(out->target), "%s", target);
        out->t = sqlite3_column_int64(st, 0);
        out->idle_w = sqlite3_column_double(st, 1);
        out->idle_se_w = sqlite3_column_double(st, 2);
        out->scale = column_or_nan(st, 3);
        out->r2 = column_or_nan(st, 4);
        out->spread_w = column_or_nan(st, 5);
        out->rows = sqlite3_column_int64(st, 6);
        snprintf(out->model_sha256, sizeof(out->model_sha256), "%s", sha ? (const char *)sha : "");
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE)
        return util_err(err, errlen, -ENOENT, "%s: no node calibration for %s", r->path, target);
    return rc == SQLITE_ROW ? 0 : query_fail(r, rc, err, errlen, "reading the node calibration");
}
