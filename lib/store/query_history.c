/* query_history: energy over time in buckets of a step, for the host or
 * for the processes of a pid, a comm regex, a uid or a job. */
#include "store/query-internal.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- History ---------------------------------------------------------------- */

static const char *history_filter(store_history_by by)
{
    switch (by) {
    case STORE_HISTORY_PID:
        return "p.pid = ?4";
    case STORE_HISTORY_COMM:
        return "regexp(?4, p.comm)";
    case STORE_HISTORY_UID:
        return "p.uid = ?4";
    case STORE_HISTORY_JOB:
        return "p.job = ?4";
    default:
        return NULL;
    }
}

/* The end of a process history: the minute rows of the processes `%s`
 * selects, and the buckets. */
#define MINUTE_HISTORY                                                                             \
    " UNION ALL SELECT e.t, e.attributed_j, e.standalone_j, e.cpu_s"                               \
    " FROM process_energy_minute e JOIN processes p ON p.id = e.process_id"                        \
    " WHERE e.t >= ?1 AND e.t < ?2 AND %s) GROUP BY b ORDER BY b"

/* The rows of the few processes with pid ?4 in [?1, ?2) ("t", "a", "sa",
 * "c"): their minute rows, then their settled rows, one seek per batch that
 * can hold seconds of both the window and the process's life (BATCH_SPAN),
 * then their recent rows, one seek per second. For one process they come in
 * time order but for rows that came late into a batch of their own. */
#define PID_WITH "WITH RECURSIVE" RECENT_SECONDS("?1", "?2 - 1") "," BATCH_SPAN
// clang-format off
#define PID_ROWS                                                                                   \
    " SELECT e.t AS t, e.attributed_j AS a, e.standalone_j AS sa, e.cpu_s AS c"                    \
    " FROM processes p CROSS JOIN process_energy_minute e ON e.process_id = p.id"                  \
    " WHERE p.pid = ?4 AND e.t >= ?1 AND e.t < ?2"                                                 \
    " UNION ALL SELECT e.t, e.attributed_j, e.standalone_j, e.cpu_s"                               \
    " FROM processes p CROSS JOIN span CROSS JOIN process_energy_batch b"                          \
    " CROSS JOIN process_energy_settled e ON e.batch = b.batch AND e.process_id = p.id"            \
    " WHERE p.pid = ?4 AND b.t_max >= max(?1, p.first_seen)"                                       \
    " AND b.t_max <= min(?2, p.last_seen) + span.s AND b.t_min < ?2 AND b.t_min <= p.last_seen"    \
    " AND e.t >= ?1 AND e.t < ?2"                                                                  \
    " UNION ALL SELECT e.t, e.attributed_j, e.standalone_j, e.cpu_s FROM processes p"              \
    " CROSS JOIN recent CROSS JOIN process_energy_recent e"                                        \
    " ON e.t = recent.t AND e.process_id = p.id WHERE p.pid = ?4 AND e.t < ?2"
// clang-format on

/* History by pid comes as rows (PID_ROWS), bucketed by pid_points, unless
 * `grouped`: bucketed by SQLite. */
static int prepare_history(store_reader *r, const store_history_query *q, bool grouped,
                           sqlite3_stmt **st)
{
    const char *filter = history_filter(q->by);
    char sql[2048];

    if (q->by == STORE_HISTORY_HOST)
        snprintf(sql, sizeof(sql),
                 "SELECT ?1 + ((t - ?1) / ?3) * ?3 AS b, sum(host_j), sum(idle_j),"
                 " sum(attributed_j), sum(unattributed_j), sum(modeled_j), min(measured),"
                 " sum(duration_s),"
                 /* the last second's calibration, and how many there were */
                 " substr(max(printf('%%020d|%%s', t, cal)), 22), count(DISTINCT cal) FROM ("
                 "  SELECT t, host_j, idle_j, attributed_j, unattributed_j, modeled_j, measured,"
                 "  duration_s, coalesce(idle_source, '') || '|' || coalesce(calib_t, 0) AS cal"
                 "  FROM host_attribution WHERE t >= ?1 AND t < ?2 UNION ALL"
                 "  SELECT t, host_j, idle_j, attributed_j, unattributed_j, modeled_j, measured,"
                 "  duration_s, coalesce(idle_source, '') || '|' || coalesce(calib_t, 0)"
                 "  FROM host_attribution_minute WHERE t >= ?1 AND t < ?2)"
                 " GROUP BY b ORDER BY b");
    // clang-format off
    else if (q->by == STORE_HISTORY_PID && !grouped)
        snprintf(sql, sizeof(sql), "%s", PID_WITH PID_ROWS);
    else if (q->by == STORE_HISTORY_PID)
        snprintf(sql, sizeof(sql), "%s",
                 PID_WITH " SELECT ?1 + ((t - ?1) / ?3) * ?3 AS b, sum(a), sum(sa), sum(c)"
                          " FROM (" PID_ROWS ") GROUP BY b ORDER BY b");
    else
        snprintf(sql, sizeof(sql),
                 "SELECT ?1 + ((t - ?1) / ?3) * ?3 AS b, sum(a), sum(sa), sum(c) FROM ("
                 "  SELECT e.t AS t, e.attributed_j AS a, e.standalone_j AS sa, e.cpu_s AS c"
                 "  FROM process_energy_recent e JOIN processes p ON p.id = e.process_id"
                 "  WHERE e.t >= ?1 AND e.t < ?2 AND %s UNION ALL"
                 "  SELECT e.t, e.attributed_j, e.standalone_j, e.cpu_s FROM" SETTLED_IN("?1", "?2")
                 "  AND e.process_id IN (SELECT id FROM processes p WHERE %s)"
                 MINUTE_HISTORY,
                 filter, filter, filter);
    // clang-format on
    int rc = sqlite3_prepare_v2(r->db, sql, -1, st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_bind_int64(*st, 1, q->since);
    sqlite3_bind_int64(*st, 2, q->until);
    sqlite3_bind_int64(*st, 3, q->step);
    if (q->by == STORE_HISTORY_PID)
        sqlite3_bind_int(*st, 4, q->pid);
    else if (q->by == STORE_HISTORY_COMM)
        sqlite3_bind_text(*st, 4, q->comm, -1, SQLITE_STATIC);
    else if (q->by == STORE_HISTORY_UID)
        sqlite3_bind_int64(*st, 4, q->uid);
    else if (q->by == STORE_HISTORY_JOB)
        sqlite3_bind_text(*st, 4, q->job, -1, SQLITE_STATIC);
    return SQLITE_OK;
}

static void read_point(sqlite3_stmt *st, bool host, store_point *p)
{
    p->t = sqlite3_column_int64(st, 0);
    if (host) {
        p->host_j = sqlite3_column_double(st, 1);
        p->idle_j = sqlite3_column_double(st, 2);
        p->attributed_j = sqlite3_column_double(st, 3);
        p->unattributed_j = sqlite3_column_double(st, 4);
        p->modeled_j = sqlite3_column_double(st, 5);
        p->measured = sqlite3_column_int(st, 6) != 0;
        p->covered_s = sqlite3_column_double(st, 7);
        const char *cal = (const char *)sqlite3_column_text(st, 8);
        const char *bar = cal ? strchr(cal, '|') : NULL;
        p->idle_source[0] = '\0';
        p->calib_t = 0;
        if (bar) {
            snprintf(p->idle_source, sizeof(p->idle_source), "%.*s", (int)(bar - cal), cal);
            p->calib_t = strtoll(bar + 1, NULL, 10);
        }
        p->calibrations = sqlite3_column_int(st, 9);
    } else {
        p->attributed_j = sqlite3_column_double(st, 1);
        p->standalone_j = sqlite3_column_double(st, 2);
        p->cpu_s = sqlite3_column_double(st, 3);
    }
}

/* The points of a bucketing statement, appended to *v: SQLITE_DONE when
 * all are read. */
static int read_points(sqlite3_stmt *st, const store_history_query *q, store_point **v,
                       size_t *count, size_t *cap)
{
    int rc;

    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        store_point *p = query_push((void **)v, count, cap, sizeof(**v));
        if (!p)
            return SQLITE_NOMEM;
        read_point(st, q->by == STORE_HISTORY_HOST, p);
    }
    return rc;
}

/* The points of PID_ROWS, summed here in the order the rows come (as
 * SQLite's sum() adds them): its GROUP BY sorted rows that mostly come in
 * order, and took as long as reading them. SQLITE_MISMATCH: a row of an
 * earlier bucket than the last, so the caller buckets them in SQLite. */
static int pid_points(sqlite3_stmt *st, const store_history_query *q, store_point **v,
                      size_t *count, size_t *cap)
{
    int rc;

    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t b = q->since + (sqlite3_column_int64(st, 0) - q->since) / q->step * q->step;
        store_point *p = *count ? &(*v)[*count - 1] : NULL;

        if (p && b < p->t)
            return SQLITE_MISMATCH;
        if (!p || b > p->t) {
            p = query_push((void **)v, count, cap, sizeof(**v));
            if (!p)
                return SQLITE_NOMEM;
            p->t = b;
        }
        p->attributed_j += sqlite3_column_double(st, 1);
        p->standalone_j += sqlite3_column_double(st, 2);
        p->cpu_s += sqlite3_column_double(st, 3);
    }
    return rc;
}

int store_history(store_reader *r, const store_history_query *q, store_point **out, size_t *n,
                  char *err, size_t errlen)
{
    sqlite3_stmt *st;
    store_point *v = NULL;
    size_t count = 0, cap = 0;
    int rc, ret;

    if (q->by != STORE_HISTORY_HOST && !history_filter(q->by))
        return util_err(err, errlen, -EINVAL, "history: unknown selector %d", (int)q->by);
    if (q->by == STORE_HISTORY_COMM && !q->comm)
        return util_err(err, errlen, -EINVAL, "history: comm is missing");
    if (q->by == STORE_HISTORY_JOB && !q->job)
        return util_err(err, errlen, -EINVAL, "history: job is missing");
    if (q->by == STORE_HISTORY_COMM && (ret = query_check_regex(q->comm, err, errlen)) < 0)
        return ret;
    if (q->step < 1)
        return util_err(err, errlen, -EINVAL, "step: %lld must be at least 1 second",
                        (long long)q->step);
    if ((ret = query_check_window(q->since, q->until, err, errlen)) < 0)
        return ret;
    rc = prepare_history(r, q, false, &st);
    if (rc != SQLITE_OK)
        return query_fail(r, rc, err, errlen, "reading history");
    rc = q->by == STORE_HISTORY_PID ? pid_points(st, q, &v, &count, &cap)
                                    : read_points(st, q, &v, &count, &cap);
    if (rc == SQLITE_MISMATCH) {
        /* rows out of order: let SQLite bucket them */
        sqlite3_finalize(st);
        free(v);
        v = NULL;
        count = cap = 0;
        rc = prepare_history(r, q, true, &st);
        if (rc != SQLITE_OK)
            return query_fail(r, rc, err, errlen, "reading history");
        rc = read_points(st, q, &v, &count, &cap);
    }
    if (rc != SQLITE_DONE) {
        ret = rc == SQLITE_NOMEM ? util_err(err, errlen, -ENOMEM, "out of memory")
                                 : query_fail(r, rc, err, errlen, "reading history");
        sqlite3_finalize(st);
        free(v);
        return ret;
    }
    sqlite3_finalize(st);
    *out = v;
    *n = count;
    return 0;
}
