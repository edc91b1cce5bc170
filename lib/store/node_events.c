/* node_events: this node's latest fit of one calibration coefficient per
 * model event that was used, kept in the node_event_calibration table so
 * that a daemon restarted with the same model uses it at once
 * (docs/calibration.md). As node.c: the row saved waits in s->evcal_row
 * (saved_row.h) and is written with the next commit. The events and coefficients are JSON arrays
 * in the model's event order. */
#include "store/query-internal.h"
#include "util/util.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVCAL_UPSERT                                                                               \
    "INSERT OR REPLACE INTO node_event_calibration (target, t, model_sha256, events, coef,"        \
    " coef_se, scale, alpha, idle_w, idle_se_w, rows)"                                             \
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"

static bool evcal_valid(const store_node_evcal *c)
{
    if (!c->target[0] || !memchr(c->target, '\0', sizeof(c->target)) ||
        strnlen(c->model_sha256, sizeof(c->model_sha256)) != 64 || c->n_events < 1 ||
        c->n_events > STORE_EVCAL_MAX || !isfinite(c->idle_w) || c->idle_w < 0 ||
        !isfinite(c->alpha) || c->alpha < 0 || c->rows < 0)
        return false;
    for (size_t j = 0; j < c->n_events; j++)
        if (!c->events[j][0] || !memchr(c->events[j], '\0', STORE_EVCAL_NAME_LEN) ||
            !isfinite(c->coef[j]) || !(c->coef[j] > 0))
            return false;
    return true;
}

int store_node_evcal_save(store *s, const store_node_evcal *c)
{
    if (!evcal_valid(c))
        return -EINVAL;
    saved_row_save(&s->evcal_row, c);
    return 0;
}

/* The events, or n numbers (null for a non-finite one), as JSON text:
 * malloc'ed, NULL on ENOMEM. */
static char *evcal_array(const store_node_evcal *c, const double *v)
{
    json_object *a = json_object_new_array();
    char *text = NULL;

    for (size_t j = 0; a && j < c->n_events; j++)
        json_object_array_add(a, v ? (isfinite(v[j]) ? json_object_new_double(v[j]) : NULL)
                                   : json_object_new_string(c->events[j]));
    if (a)
        text = strdup(json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN));
    json_object_put(a);
    return text;
}

/* Writes `c` with the connection's upsert; an SQLite result code. */
static int evcal_step(sqlite3 *db, const store_node_evcal *c)
{
    char *events = evcal_array(c, NULL), *coef = evcal_array(c, c->coef);
    char *coef_se = evcal_array(c, c->coef_se);
    sqlite3_stmt *st = NULL;
    int rc = events && coef && coef_se ? sqlite3_prepare_v2(db, EVCAL_UPSERT, -1, &st, NULL)
                                       : SQLITE_NOMEM;

    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, c->target, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, c->t);
        sqlite3_bind_text(st, 3, c->model_sha256, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, events, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, coef, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 6, coef_se, -1, SQLITE_STATIC);
        conn_bind_real(st, 7, c->scale);
        sqlite3_bind_double(st, 8, c->alpha);
        sqlite3_bind_double(st, 9, c->idle_w);
        conn_bind_real(st, 10, c->idle_se_w);
        sqlite3_bind_int64(st, 11, c->rows);
        rc = sqlite3_step(st);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    sqlite3_finalize(st);
    free(events);
    free(coef);
    free(coef_se);
    return rc;
}

static int evcal_write_row(const void *row, void *db)
{
    return evcal_step(db, row);
}

/* Rare (at most once a minute): the statement is prepared when needed. */
int node_evcal_write(store *s)
{
    return saved_row_write(&s->evcal_row, evcal_write_row, s->db);
}

/* Column i, a JSON array of n strings (v NULL) or numbers-or-null (NAN):
 * whether it is one. n 0: takes the array's length into *n. */
static bool evcal_parse(sqlite3_stmt *st, int i, store_node_evcal *c, double *v)
{
    const char *text = (const char *)sqlite3_column_text(st, i);
    json_object *a = text ? json_tokener_parse(text) : NULL;
    bool ok = a && json_object_is_type(a, json_type_array);
    size_t n = ok ? json_object_array_length(a) : 0;

    if (!v)
        c->n_events = n;
    ok = ok && n >= 1 && n <= STORE_EVCAL_MAX && n == c->n_events;
    for (size_t j = 0; ok && j < n; j++) {
        json_object *e = json_object_array_get_idx(a, j);
        if (!v) {
            ok = json_object_is_type(e, json_type_string) &&
                 json_object_get_string_len(e) < STORE_EVCAL_NAME_LEN;
            if (ok)
                snprintf(c->events[j], STORE_EVCAL_NAME_LEN, "%s", json_object_get_string(e));
        } else if (!e) {
            v[j] = NAN;
        } else {
            ok = json_object_is_type(e, json_type_double) || json_object_is_type(e, json_type_int);
            v[j] = ok ? json_object_get_double(e) : NAN;
        }
    }
    json_object_put(a);
    return ok;
}

static double column_or_nan(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

int store_node_evcal_get(store_reader *r, const char *target, store_node_evcal *out, char *err,
                         size_t errlen)
{
    static const char *const cols[] = {"events", "coef", "coef_se"};
    sqlite3_stmt *st;
    const char *bad = NULL;
    int rc = sqlite3_prepare_v2(r->db,
                                "SELECT t, model_sha256, events, coef, coef_se, scale, alpha,"
                                " idle_w, idle_se_w, rows FROM node_event_calibration"
                                " WHERE target = ?1",
                                -1, &st, NULL);

    if (rc != SQLITE_OK)
        return query_fail(r, rc, err, errlen, "reading the per-event calibration");
    sqlite3_bind_text(st, 1, target, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *sha = sqlite3_column_text(st, 1);
        double *v[] = {NULL, out->coef, out->coef_se};
        memset(out, 0, sizeof(*out));
        snprintf(out->target, sizeof(out->target), "%s", target);
        out->t = sqlite3_column_int64(st, 0);
        snprintf(out->model_sha256, sizeof(out->model_sha256), "%s", sha ? (const char *)sha : "");
        for (int i = 0; i < 3 && !bad; i++)
            if (!evcal_parse(st, 2 + i, out, v[i]))
                bad = cols[i];
        out->scale = column_or_nan(st, 5);
        out->alpha = sqlite3_column_double(st, 6);
        out->idle_w = sqlite3_column_double(st, 7);
        out->idle_se_w = column_or_nan(st, 8);
        out->rows = sqlite3_column_int64(st, 9);
        if (!bad && !evcal_valid(out))
            bad = "its values";
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE)
        return util_err(err, errlen, -ENOENT, "%s: no per-event calibration for %s", r->path,
                        target);
    if (rc != SQLITE_ROW)
        return query_fail(r, rc, err, errlen, "reading the per-event calibration");
    if (bad)
        return util_err(err, errlen, -EBADMSG,
                        "%s: node_event_calibration row of %s: %s cannot be read", r->path, target,
                        bad);
    return 0;
}
