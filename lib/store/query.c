/* query: the host's reads for the socket's methods and the trainer - the
 * newest second and which calibrations a window used - and the checks of a
 * window and a comm regex that every query makes. The reads of processes
 * are in query_processes.c, a process's rows in query_series.c, histories
 * in query_history.c, models and calibrations in query_models.c, the
 * connection itself in reader.c. */
#include "store/query-internal.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int store_latest_second(store_reader *r, int64_t *t, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(r->db, "SELECT max(t) FROM host_attribution", -1, &st, NULL);

    if (rc != SQLITE_OK)
        return query_fail(r, rc, err, errlen, "reading the newest second");
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *t = sqlite3_column_type(st, 0) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : query_fail(r, rc, err, errlen, "reading the newest second");
}

int query_check_window(int64_t since, int64_t until, char *err, size_t errlen)
{
    if (until <= since)
        return util_err(err, errlen, -EINVAL, "window: until (%lld) must be after since (%lld)",
                        (long long)until, (long long)since);
    return 0;
}

int query_check_regex(const char *pattern, char *err, size_t errlen)
{
    char why[UTIL_ERRLEN];
    int rc;

    if (!pattern)
        return 0;
    rc = util_regex_check(pattern, why, sizeof(why));
    if (rc < 0)
        return util_err(err, errlen, rc, "comm regex '%s': %s", pattern, why);
    return 0;
}

/* ---- Calibration changes ------------------------------------------------------ */

int store_calibration_changes(store_reader *r, int64_t since, int64_t until,
                              store_calib_change **out, size_t *n, char *err, size_t errlen)
{
    static const char sql[] =
        "SELECT t, src, cal FROM ("
        " SELECT t, src, cal, lag(src || '|' || cal) OVER (ORDER BY t) AS prev FROM ("
        "  SELECT t, coalesce(idle_source, '') AS src, coalesce(calib_t, 0) AS cal"
        "  FROM host_attribution WHERE t >= ?1 AND t < ?2 UNION ALL"
        "  SELECT t, coalesce(idle_source, ''), coalesce(calib_t, 0)"
        "  FROM host_attribution_minute WHERE t >= ?1 AND t < ?2))"
        " WHERE prev IS NULL OR prev != src || '|' || cal ORDER BY t LIMIT ?3";
    store_calib_change *v = calloc(STORE_MAX_CALIB_CHANGES, sizeof(*v));
    sqlite3_stmt *st = NULL;
    size_t count = 0;
    int rc;

    if (!v)
        return util_err(err, errlen, -ENOMEM, "out of memory");
    rc = sqlite3_prepare_v2(r->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, since);
        sqlite3_bind_int64(st, 2, until);
        sqlite3_bind_int(st, 3, STORE_MAX_CALIB_CHANGES);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            v[count].t = sqlite3_column_int64(st, 0);
            snprintf(v[count].idle_source, sizeof(v[count].idle_source), "%s",
                     (const char *)sqlite3_column_text(st, 1));
            v[count].calib_t = sqlite3_column_int64(st, 2);
            count++;
        }
    }
    if (rc != SQLITE_DONE) {
        int e = query_fail(r, rc, err, errlen, "reading which calibrations were used");
        sqlite3_finalize(st);
        free(v);
        return e;
    }
    sqlite3_finalize(st);
    *out = v;
    *n = count;
    return 0;
}
