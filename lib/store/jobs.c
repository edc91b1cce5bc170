/* jobs: batch jobs as the processes of this node show them.  A job is the
 * set of processes whose `job` column names it (schema version 5); its
 * energy is the sum of their rows, per second and per minute, so a job
 * costs no rows of its own and keeps every resolution its processes have. */
#include "store/store-internal.h"
#include "util/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

// clang-format off
#define JOBS_SQL                                                                                   \
    "WITH e AS ("                                                                                  \
    "  SELECT process_id, t, attributed_j, cpu_s FROM process_energy UNION ALL"                    \
    "  SELECT process_id, t, attributed_j, cpu_s FROM process_energy_minute),"                     \
    " j AS (SELECT p.job AS job, max(p.uid) AS uid, min(p.first_seen) AS start,"                   \
    "  max(coalesce(p.exit_time, p.last_seen)) AS end, max(p.exit_time IS NULL) AS running,"       \
    "  count(DISTINCT p.id) AS n, sum(e.attributed_j) AS a, sum(e.cpu_s) AS c"                     \
    "  FROM processes p JOIN e ON e.process_id = p.id"                                             \
    "  WHERE p.job IS NOT NULL AND (?4 IS NULL OR p.job = ?4) AND e.t >= ?1 AND e.t < ?2"          \
    "  GROUP BY p.job)"                                                                            \
    " SELECT job, uid, start, end, running, n, a, c, (SELECT total(host_j) FROM ("                 \
    "  SELECT t, host_j FROM host_attribution UNION ALL"                                           \
    "  SELECT t, host_j FROM host_attribution_minute) h"                                           \
    "  WHERE h.t >= max(?1, j.start) AND h.t <= min(?2 - 1, j.end))"                               \
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
        return util_err(err, errlen, schema_errno(r->db, rc), "%s: listing jobs: %s", r->path,
                        sqlite3_errmsg(r->db));
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
        ret = util_err(err, errlen, schema_errno(r->db, rc), "%s: listing jobs: %s", r->path,
                       sqlite3_errmsg(r->db));
    sqlite3_finalize(st);
    if (ret < 0) {
        store_jobs_free(v, count);
        return ret;
    }
    *out = v;
    *n = count;
    return 0;
}
