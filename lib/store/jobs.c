/* jobs: batch jobs as the processes of this node show them.  A job is the
 * set of processes whose `job` column names it (schema version 5); its
 * energy is the sum of their rows, per second and per minute, so a job
 * costs no rows of its own and keeps every resolution its processes have. */
#include "store/query-internal.h"
#include "util/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* One statement per page of jobs. pj: the job processes seen in the
 * window, read through processes_job (+last_seen: not through
 * processes_last_seen, which would walk every process of the window, in a
 * job or not). page: their jobs, grouped, filtered by user, those after
 * the caller's key (?5 start, ?6 job: started earlier, or in the same
 * second with a greater id) in the listing's order, at most ?7. Only the
 * page's processes are then read, each by its own keys: its settled
 * batches (a batch spans at most span.s seconds, so one whose t_max is
 * past the process's last second plus that holds none of its rows: without
 * that bound each process walked every later batch of the index), the
 * recent rows of the window, its minute rows; summed per process where
 * they are read, so no sorter sees every row. */
// clang-format off
#define JOBS_SQL                                                                                   \
    "WITH pj AS (SELECT id, job, uid, first_seen, last_seen, exit_time"                            \
    " FROM processes WHERE job IS NOT NULL AND (?4 IS NULL OR job = ?4)"                           \
    " AND +last_seen >= ?1 AND first_seen < ?2),"                                                  \
    " page AS (SELECT * FROM (SELECT job, max(uid) AS uid,"                                        \
    " min(first_seen) AS start, max(coalesce(exit_time, last_seen)) AS end,"                       \
    " max(exit_time IS NULL) AS running, count(*) AS n FROM pj GROUP BY job)"                      \
    " WHERE (?3 < 0 OR uid = ?3) AND (?6 IS NULL OR start < ?5 OR (start = ?5 AND job > ?6))"      \
    " ORDER BY start DESC, job LIMIT ?7),"                                                         \
    " span AS (SELECT coalesce(max(t_max - t_min), 0) AS s FROM process_energy_batch),"            \
    " ids AS (SELECT pj.id FROM page CROSS JOIN pj ON pj.job = page.job),"                         \
    " rows AS (SELECT p.id AS id, total(e.attributed_j) AS a, total(e.cpu_s) AS c"                 \
    " FROM processes p CROSS JOIN span CROSS JOIN process_energy_batch b"                          \
    " CROSS JOIN process_energy_settled e ON e.batch = b.batch AND e.process_id = p.id"            \
    " WHERE p.id IN ids AND b.t_max >= max(?1, p.first_seen)"                                      \
    " AND b.t_max <= min(?2, p.last_seen) + span.s AND b.t_min < ?2 AND b.t_min <= p.last_seen"    \
    " AND e.t >= ?1 AND e.t < ?2 GROUP BY p.id"                                                    \
    " UNION ALL SELECT process_id, total(attributed_j), total(cpu_s) FROM process_energy_recent"   \
    " WHERE t >= ?1 AND t < ?2 AND process_id IN ids GROUP BY process_id"                          \
    " UNION ALL SELECT process_id, total(attributed_j), total(cpu_s) FROM process_energy_minute"   \
    " WHERE process_id IN ids AND t >= ?1 AND t < ?2 GROUP BY process_id),"                        \
    " sums AS (SELECT pj.job AS job, total(a) AS a, total(c) AS c"                                 \
    " FROM rows CROSS JOIN pj ON pj.id = rows.id GROUP BY pj.job)"                                 \
    " SELECT page.job, uid, start, end, running, n, coalesce(sums.a, 0), coalesce(sums.c, 0),"     \
    " (SELECT total(host_j) FROM (SELECT t, host_j FROM host_attribution"                          \
    " WHERE t >= max(?1, start) AND t <= min(?2 - 1, end)"                                         \
    " UNION ALL SELECT t, host_j FROM host_attribution_minute"                                     \
    " WHERE t > max(?1, start) - 60 AND t <= min(?2 - 1, end)))"                                   \
    " FROM page LEFT JOIN sums ON sums.job = page.job ORDER BY start DESC, page.job"
// clang-format on

void store_jobs_free(store_job *j, size_t n)
{
    for (size_t i = 0; j && i < n; i++)
        free(j[i].job);
    free(j);
}

static int read_job(sqlite3_stmt *st, store_job *j)
{
    const char *id = (const char *)sqlite3_column_text(st, 0);

    if (!(j->job = strdup(id ? id : "")))
        return -ENOMEM;
    j->uid = sqlite3_column_type(st, 1) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 1);
    j->start = sqlite3_column_int64(st, 2);
    j->end = sqlite3_column_int64(st, 3);
    j->running = sqlite3_column_int(st, 4) != 0;
    j->processes = sqlite3_column_int64(st, 5);
    j->energy_j = sqlite3_column_double(st, 6);
    j->cpu_s = sqlite3_column_double(st, 7);
    j->node_j = sqlite3_column_double(st, 8);
    return 0;
}

int store_list_jobs(store_reader *r, const store_job_query *q, store_job **out, size_t *n,
                    char *err, size_t errlen)
{
    sqlite3_stmt *st;
    store_job *v = NULL;
    size_t count = 0, cap = 0;
    int rc, ret = 0;

    if (q->until <= q->since)
        return util_err(err, errlen, -EINVAL, "window: until (%lld) must be after since (%lld)",
                        (long long)q->until, (long long)q->since);
    rc = sqlite3_prepare_v2(r->db, JOBS_SQL, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return query_fail(r, rc, err, errlen, "listing jobs");
    sqlite3_bind_int64(st, 1, q->since);
    sqlite3_bind_int64(st, 2, q->until);
    sqlite3_bind_int64(st, 3, q->uid);
    if (q->job)
        sqlite3_bind_text(st, 4, q->job, -1, SQLITE_STATIC);
    if (q->before_job) {
        sqlite3_bind_double(st, 5, q->before_start);
        sqlite3_bind_text(st, 6, q->before_job, -1, SQLITE_STATIC);
    }
    sqlite3_bind_int64(st, 7, q->limit ? (int64_t)q->limit : -1);
    while (ret == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (count == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            store_job *nv = realloc(v, ncap * sizeof(*nv));
            if (!nv) {
                ret = -ENOMEM;
                break;
            }
            v = nv;
            cap = ncap;
        }
        memset(&v[count], 0, sizeof(v[count]));
        if ((ret = read_job(st, &v[count])) == 0)
            count++;
    }
    if (ret < 0)
        util_err(err, errlen, ret, "%s: listing jobs: out of memory", r->path);
    else if (rc != SQLITE_DONE)
        ret = query_fail(r, rc, err, errlen, "listing jobs");
    sqlite3_finalize(st);
    if (ret < 0) {
        store_jobs_free(v, count);
        return ret;
    }
    *out = v;
    *n = count;
    return 0;
}
