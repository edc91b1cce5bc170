/* query_processes: the processes of a window, sorted and filtered (ps,
 * top), and one process with its totals and recent seconds (show). */
#include "store/query-internal.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        rc = query_kept(r, &r->list[sort], sql);
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

/* Runs a kept statement without rows (BEGIN, COMMIT). */
static int run_kept(store_reader *r, sqlite3_stmt **st, const char *sql)
{
    int rc = query_kept(r, st, sql);

    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_step(*st);
    sqlite3_reset(*st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int find_process(store_reader *r, pid_t pid, uint64_t start_time, store_process *out,
                        char *err, size_t errlen)
{
    sqlite3_stmt *st;
    int rc = query_kept(r, &r->find,
                        "SELECT " PROCESS_COLS " FROM processes p WHERE p.pid = ?1"
                        " AND (?2 = 0 OR p.start_time = ?2)"
                        " ORDER BY p.last_seen DESC, p.id DESC LIMIT 1");
    int ret = 0;

    if (rc != SQLITE_OK)
        return query_fail(r, rc, err, errlen, "finding a process");
    st = r->find;
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
    sqlite3_reset(st);
    if (ret < 0)
        store_process_free(out);
    return ret;
}

/* Adds to *p its rows of process_energy_recent from the fold watermark on,
 * which its processes row does not count yet: a read of its chunk per
 * second there (a few; packed.c). */
#define UNSETTLED                                                                                  \
    "SELECT count(*), max(e.t), sum(e.attributed_j), sum(e.standalone_j), sum(e.cpu_s), e.class"   \
    " FROM process_energy_recent e WHERE e.process_id = ?1"                                        \
    " AND e.t >= (SELECT t FROM process_fold) AND e.t <= ?2"

static int add_unsettled(store_reader *r, store_process *p)
{
    sqlite3_stmt *st;
    int rc = query_kept(r, &r->unsettled, UNSETTLED);

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
    rc = run_kept(r, &r->begin, "BEGIN");
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
    run_kept(r, &r->commit, "COMMIT");
    return ret;
}
