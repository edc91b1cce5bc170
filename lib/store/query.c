/* query: what the socket's methods and the trainer read, over a read-only
 * connection of its own.
 *
 * Windows and histories read the per-second and the one-minute tables
 * together (UNION ALL): rollups delete the seconds they sum, so the two never
 * count the same energy twice. A process's per-second rows are in two
 * tables (schema.c, version 4): the newest in process_energy_recent, keyed
 * by second, read for one process by one seek per second it spans (a
 * minute or two); the others in process_energy_settled, keyed by batch and
 * process, read for one process by one seek per batch that overlaps the
 * window, and for a window by scanning the batches that overlap it. The
 * models and calibration reads are in query_models.c, the connection
 * itself in reader.c. */
#include "store/query-internal.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- Per-second rows ---------------------------------------------------------- */

/* The settled rows in the window [LO, HI), all processes ("e"). */
#define SETTLED_IN(LO, HI)                                                                         \
    " process_energy_batch b CROSS JOIN process_energy_settled e ON e.batch = b.batch"             \
    " WHERE b.t_max >= " LO " AND b.t_min < " HI " AND e.t >= " LO " AND e.t < " HI

/* recent(t): each second from LO (or the oldest in process_energy_recent)
 * to HI (or the newest there); one seek each finds a process's row. */
#define RECENT_SECONDS(LO, HI)                                                                     \
    " recent(t) AS (SELECT max(" LO ", (SELECT min(t) FROM process_energy_recent))"                \
    " UNION ALL SELECT t + 1 FROM recent"                                                          \
    " WHERE t < min(" HI ", (SELECT max(t) FROM process_energy_recent)))"

/* span.s: the most seconds a batch of process_energy_settled spans. A batch
 * holding a row of second t has t <= t_max <= t + span.s, so the batches
 * that can hold a process's rows up to second L are those with t_max up to
 * L + span.s: the bound on the walk of process_energy_batch_t, which
 * otherwise goes on to the newest batch. Read from the data: rollups and
 * late rows make batches of other spans than the writer's. */
#define BATCH_SPAN                                                                                 \
    " span AS (SELECT coalesce(max(t_max - t_min), 0) AS s FROM process_energy_batch)"

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
    "WITH RECURSIVE" RECENT_SECONDS("?2 + 1", "?3") "," BATCH_SPAN ", rows AS ("                   \
    " SELECT " ROW_COLS " FROM process_energy_minute WHERE process_id = ?1 AND t > ?2"             \
    " UNION ALL SELECT e.t, e.attributed_j, e.standalone_j, e.cpu_s, e.class, e.model_id"          \
    " FROM processes p CROSS JOIN span CROSS JOIN process_energy_batch b"                          \
    " CROSS JOIN process_energy_settled e ON e.batch = b.batch AND e.process_id = p.id"            \
    " WHERE p.id = ?1 AND b.t_max >= max(?2 + 1, p.first_seen)"                                    \
    " AND b.t_max <= min(?3, p.last_seen) + span.s AND b.t_min <= ?3 AND e.t > ?2"                 \
    " UNION ALL SELECT e.t, e.attributed_j, e.standalone_j, e.cpu_s, e.class, e.model_id"          \
    " FROM recent CROSS JOIN process_energy_recent e ON e.t = recent.t AND e.process_id = ?1"      \
    " WHERE e.t > ?2 AND e.t <= ?3)"
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
        rc = sqlite3_prepare_v3(r->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
        if (rc != SQLITE_OK)
            return rc;
    }
    sqlite3_bind_int64(*st, 1, id);
    sqlite3_bind_int64(*st, 2, after);
    sqlite3_bind_int64(*st, 3, last_seen);
    return SQLITE_OK;
}

/* ---- Processes ------------------------------------------------------------- */

#define PROCESS_COLS                                                                               \
    "p.id, p.boot_id, p.pid, p.start_time, p.comm, p.cmdline, p.cgroup, p.uid, p.first_seen,"      \
    " p.last_seen, p.exit_time, p.class, p.attributed_j, p.standalone_j, p.cpu_s, p.job"
#define N_PROCESS_COLS 16
/* PROCESS_COLS with the rows of process_energy_recent from the fold
 * watermark on ("u": their last second t, its class and their sums) added:
 * what the processes row does not count yet (conn.c) */
#define LIVE_PROCESS_COLS                                                                          \
    "p.id, p.boot_id, p.pid, p.start_time, p.comm, p.cmdline, p.cgroup, p.uid, p.first_seen,"      \
    " max(p.last_seen, coalesce(u.t, 0)), p.exit_time,"                                            \
    " CASE WHEN u.t IS NULL THEN p.class ELSE u.class END,"                                        \
    " p.attributed_j + coalesce(u.a, 0), p.standalone_j + coalesce(u.sa, 0),"                      \
    " p.cpu_s + coalesce(u.c, 0), p.job"

static int read_process(sqlite3_stmt *st, store_process *p)
{
    p->id = sqlite3_column_int64(st, 0);
    snprintf(p->boot_id, sizeof(p->boot_id), "%s", sqlite3_column_text(st, 1));
    p->pid = sqlite3_column_int(st, 2);
    p->start_time = (uint64_t)sqlite3_column_int64(st, 3);
    p->comm = query_dup_col(st, 4);
    p->cmdline = query_dup_col(st, 5);
    p->cgroup = query_dup_col(st, 6);
    p->uid = sqlite3_column_type(st, 7) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 7);
    p->first_seen = sqlite3_column_int64(st, 8);
    p->last_seen = sqlite3_column_int64(st, 9);
    p->exit_time = sqlite3_column_int64(st, 10);
    p->klass = sqlite3_column_type(st, 11) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 11);
    p->total_attributed_j = sqlite3_column_double(st, 12);
    p->total_standalone_j = sqlite3_column_double(st, 13);
    p->total_cpu_s = sqlite3_column_double(st, 14);
    p->job = query_dup_col(st, 15);
    if ((sqlite3_column_type(st, 15) != SQLITE_NULL && !p->job) ||
        (sqlite3_column_type(st, 4) != SQLITE_NULL && !p->comm) ||
        (sqlite3_column_type(st, 5) != SQLITE_NULL && !p->cmdline) ||
        (sqlite3_column_type(st, 6) != SQLITE_NULL && !p->cgroup))
        return -ENOMEM;
    return 0;
}

void store_process_free(store_process *p)
{
    if (!p)
        return;
    free(p->comm);
    free(p->cmdline);
    free(p->cgroup);
    free(p->job);
    p->comm = p->cmdline = p->cgroup = p->job = NULL;
}

void store_processes_free(store_process *p, size_t n)
{
    for (size_t i = 0; p && i < n; i++)
        store_process_free(&p[i]);
    free(p);
}

static const char *sort_column(store_sort s)
{
    switch (s) {
    case STORE_SORT_POWER:
        return "power";
    case STORE_SORT_CPU:
        return "w.c";
    case STORE_SORT_ENERGY:
    default:
        return "w.a";
    }
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

/* The listing statement for sort order `sort`, prepared on first use. */
static int list_statement(store_reader *r, store_sort sort, sqlite3_stmt **out)
{
    char sql[2048];
    int rc;

    if (!r->list[sort]) {
        // clang-format off
        snprintf(sql, sizeof(sql),
                 "WITH w AS (SELECT process_id, sum(attributed_j) AS a, sum(standalone_j) AS sa,"
                 " sum(cpu_s) AS c, count(*) AS n FROM ("
                 "  SELECT process_id, attributed_j, standalone_j, cpu_s FROM process_energy_recent"
                 "  WHERE t >= ?1 AND t < ?2 UNION ALL"
                 "  SELECT e.process_id, e.attributed_j, e.standalone_j, e.cpu_s FROM"
                 SETTLED_IN("?1", "?2") " UNION ALL"
                 "  SELECT process_id, attributed_j, standalone_j, cpu_s FROM process_energy_minute"
                 "  WHERE t >= ?1 AND t < ?2) GROUP BY process_id)"
                 ", u AS (SELECT process_id, max(t) AS t, sum(attributed_j) AS a,"
                 " sum(standalone_j) AS sa, sum(cpu_s) AS c, class"
                 " FROM process_energy_recent WHERE t >= (SELECT t FROM process_fold)"
                 " GROUP BY process_id)"
                 " SELECT " LIVE_PROCESS_COLS ", w.a, w.sa, w.c,"
                 " w.a / max(1, min(?2, coalesce(p.exit_time, max(p.last_seen, coalesce(u.t, 0)))"
                 " + 1) - max(?1, p.first_seen)) AS power, w.n"
                 " FROM w JOIN processes p ON p.id = w.process_id"
                 " LEFT JOIN u ON u.process_id = p.id"
                 " WHERE (?3 < 0 OR p.uid = ?3) AND (?4 IS NULL OR regexp(?4, p.comm))"
                 " AND (?6 = 0 OR p.exit_time IS NULL) AND (?8 IS NULL OR p.job = ?8)"
                 " ORDER BY %s DESC, p.id LIMIT ?5 OFFSET ?7",
                 sort_column(sort));
        // clang-format on
        rc = sqlite3_prepare_v3(r->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &r->list[sort], NULL);
        if (rc != SQLITE_OK)
            return rc;
    }
    *out = r->list[sort];
    return SQLITE_OK;
}

int store_list_processes(store_reader *r, const store_process_query *q, store_process **out,
                         size_t *n, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    store_process *v = NULL;
    size_t count = 0, cap = 0;
    int rc, ret;

    if (q->sort != STORE_SORT_ENERGY && q->sort != STORE_SORT_POWER && q->sort != STORE_SORT_CPU)
        return util_err(err, errlen, -EINVAL, "sort: unknown order %d", (int)q->sort);
    if ((ret = query_check_window(q->since, q->until, err, errlen)) < 0 ||
        (ret = query_check_regex(q->comm_regex, err, errlen)) < 0)
        return ret;
    rc = list_statement(r, q->sort, &st);
    if (rc != SQLITE_OK)
        return query_fail(r, rc, err, errlen, "listing processes");
    sqlite3_bind_int64(st, 1, q->since);
    sqlite3_bind_int64(st, 2, q->until);
    sqlite3_bind_int64(st, 3, q->uid);
    if (q->comm_regex)
        sqlite3_bind_text(st, 4, q->comm_regex, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, q->limit ? (int64_t)q->limit : -1);
    sqlite3_bind_int(st, 6, q->only_running);
    sqlite3_bind_int64(st, 7, (int64_t)q->offset);
    if (q->job)
        sqlite3_bind_text(st, 8, q->job, -1, SQLITE_STATIC);
    ret = 0;
    while (ret == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        store_process *p = query_push((void **)&v, &count, &cap, sizeof(*v));
        if (!p || read_process(st, p) < 0) {
            ret = -ENOMEM;
            break;
        }
        p->attributed_j = sqlite3_column_double(st, N_PROCESS_COLS);
        p->standalone_j = sqlite3_column_double(st, N_PROCESS_COLS + 1);
        p->cpu_s = sqlite3_column_double(st, N_PROCESS_COLS + 2);
        p->power_w = sqlite3_column_double(st, N_PROCESS_COLS + 3);
        p->seconds = sqlite3_column_int64(st, N_PROCESS_COLS + 4);
    }
    if (ret == 0 && rc != SQLITE_DONE)
        ret = query_fail(r, rc, err, errlen, "listing processes");
    else if (ret < 0)
        util_err(err, errlen, ret, "%s: listing processes: out of memory", r->path);
    /* kept for the next call: reset ends its read transaction (else the WAL
     * could not be checkpointed) and drops the caller's regex pointer */
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (ret < 0) {
        store_processes_free(v, count);
        return ret;
    }
    *out = v;
    *n = count;
    return 0;
}

static int find_process(store_reader *r, pid_t pid, uint64_t start_time, store_process *out,
                        char *err, size_t errlen)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(r->db,
                                "SELECT " PROCESS_COLS " FROM processes p WHERE p.pid = ?1"
                                " AND (?2 = 0 OR p.start_time = ?2)"
                                " ORDER BY p.last_seen DESC, p.id DESC LIMIT 1",
                                -1, &st, NULL);
    int ret = 0;

    if (rc != SQLITE_OK)
        return query_fail(r, rc, err, errlen, "finding a process");
    sqlite3_bind_int(st, 1, pid);
    sqlite3_bind_int64(st, 2, (int64_t)start_time);
    rc = sqlite3_step(st);
    memset(out, 0, sizeof(*out));
    if (rc == SQLITE_ROW)
        ret = read_process(st, out) < 0 ? util_err(err, errlen, -ENOMEM, "out of memory") : 0;
    else if (rc == SQLITE_DONE)
        ret = util_err(err, errlen, -ENOENT, "no process with pid %d%s", (int)pid,
                       start_time ? " and that start time" : "");
    else
        ret = query_fail(r, rc, err, errlen, "finding a process");
    sqlite3_finalize(st);
    if (ret < 0)
        store_process_free(out);
    return ret;
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

/* Adds to *p its rows of process_energy_recent from the fold watermark on,
 * which its processes row does not count yet: one seek per second there
 * (a few). */
// clang-format off
#define UNSETTLED                                                                                  \
    "WITH RECURSIVE" RECENT_SECONDS("(SELECT t FROM process_fold)", "?2")                           \
    " SELECT count(*), max(e.t), sum(e.attributed_j), sum(e.standalone_j), sum(e.cpu_s), e.class"  \
    " FROM recent CROSS JOIN process_energy_recent e ON e.t = recent.t AND e.process_id = ?1"
// clang-format on

static int add_unsettled(store_reader *r, store_process *p)
{
    sqlite3_stmt *st;
    int rc = SQLITE_OK;

    if (!r->unsettled)
        rc = sqlite3_prepare_v3(r->db, UNSETTLED, -1, SQLITE_PREPARE_PERSISTENT, &r->unsettled,
                                NULL);
    if (rc != SQLITE_OK)
        return rc;
    st = r->unsettled;
    sqlite3_bind_int64(st, 1, p->id);
    sqlite3_bind_int64(st, 2, INT64_MAX);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_int64(st, 0) > 0) {
        int64_t t = sqlite3_column_int64(st, 1);
        p->last_seen = t > p->last_seen ? t : p->last_seen;
        p->total_attributed_j += sqlite3_column_double(st, 2);
        p->total_standalone_j += sqlite3_column_double(st, 3);
        p->total_cpu_s += sqlite3_column_double(st, 4);
        p->klass = sqlite3_column_type(st, 5) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 5);
    }
    sqlite3_reset(st);
    return rc == SQLITE_ROW ? SQLITE_OK : rc;
}

int store_get_process(store_reader *r, pid_t pid, uint64_t start_time, int64_t recent_s,
                      store_process *out, store_second **series, size_t *n_series, char *err,
                      size_t errlen)
{
    int ret, rc;

    if (recent_s < 0)
        return util_err(err, errlen, -EINVAL, "recent: %lld seconds is negative",
                        (long long)recent_s);
    /* one read transaction: a move between the reads would count rows
     * twice or not at all */
    rc = sqlite3_exec(r->db, "BEGIN", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return query_fail(r, rc, err, errlen, "reading a process");
    ret = find_process(r, pid, start_time, out, err, errlen);
    if (ret < 0)
        goto out;
    rc = add_unsettled(r, out);
    if (rc != SQLITE_OK) {
        ret = query_fail(r, rc, err, errlen, "reading a process's unfolded rows");
        store_process_free(out);
        goto out;
    }
    ret = query_read_series(r, out->id, out->last_seen - recent_s, out->last_seen, 0, series,
                            n_series, err, errlen);
    if (ret < 0)
        store_process_free(out);
out:
    sqlite3_exec(r->db, "COMMIT", NULL, NULL, NULL);
    return ret;
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
