/* jobs: batch jobs as the processes of this node show them.  A job is the
 * set of processes whose `job` column names it (schema version 5); its
 * energy is the sum of their rows, per second and per minute, so a job
 * costs no rows of its own and keeps every resolution its processes have. */
#include "store/query-internal.h"
#include "util/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Driven by the jobs' processes (processes_job), each read the way a
 * process's own rows are (query.c): its batches of settled rows, its recent
 * seconds, its minute rows. Scanning every row of the window instead would
 * read the whole database for `wattprof jobs` without --since. */
// clang-format off
#define JOBS_SQL                                                                                   \
    "WITH pj AS (SELECT id, job, uid, first_seen, last_seen, exit_time FROM processes"             \
    "  WHERE job IS NOT NULL AND (?4 IS NULL OR job = ?4) AND last_seen >= ?1 AND first_seen < ?2),"\
    " rows AS ("                                                                                   \
    "  SELECT pj.id AS id, e.attributed_j AS a, e.cpu_s AS c FROM pj"                              \
    "  CROSS JOIN process_energy_batch b CROSS JOIN process_energy_settled e"                      \
    "  ON e.batch = b.batch AND e.process_id = pj.id"                                              \
    "  WHERE b.t_max >= max(?1, pj.first_seen) AND b.t_min < ?2 AND b.t_min <= pj.last_seen"       \
    "  AND e.t >= ?1 AND e.t < ?2 UNION ALL"                                                       \
    "  SELECT pj.id, e.attributed_j, e.cpu_s FROM pj CROSS JOIN process_energy_recent e"           \
    "  ON e.process_id = pj.id WHERE e.t >= max(?1, pj.first_seen) AND e.t < ?2 UNION ALL"         \
    "  SELECT pj.id, e.attributed_j, e.cpu_s FROM pj CROSS JOIN process_energy_minute e"           \
    "  ON e.process_id = pj.id WHERE e.t >= ?1 AND e.t < ?2),"                                     \
    " j AS (SELECT pj.job AS job, max(pj.uid) AS uid, min(pj.first_seen) AS start,"                \
    "  max(coalesce(pj.exit_time, pj.last_seen)) AS end, max(pj.exit_time IS NULL) AS running,"    \
    "  count(DISTINCT pj.id) AS n, total(rows.a) AS a, total(rows.c) AS c"                         \
    "  FROM rows JOIN pj ON pj.id = rows.id GROUP BY pj.job)"                                      \
    " SELECT job, uid, start, end, running, n, a, c, (SELECT total(host_j) FROM ("                 \
    "  SELECT t, host_j FROM host_attribution WHERE t >= max(?1, j.start) AND t <= min(?2 - 1, j.end)"\
    "  UNION ALL SELECT t, host_j FROM host_attribution_minute"                                    \
    "  WHERE t > max(?1, j.start) - 60 AND t <= min(?2 - 1, j.end)))"                              \
    " FROM j WHERE (?3 < 0 OR uid = ?3) ORDER BY start DESC, job"
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
