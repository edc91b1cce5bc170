/* retention: the move of per-second process rows from the table they
 * arrive in to the one they are kept in, rollups of old per-second rows
 * into one-minute rows, and the deletion of rows past their retention.
 *
 * The move takes every row of process_energy_recent (keyed (t, process_id),
 * where each commit appends a second) into process_energy_settled under the
 * next batch number, sorted by process: the batch is appended to the end of
 * that b-tree too, and a process's seconds of one batch share pages, so a
 * per-process read seeks once per batch. The recent table (its packed rows,
 * one a second: packed.h) is then emptied without rewriting its pages
 * (`empty`). The writer leaves in the recent
 * table a second that a flush committed in progress, which later ticks add
 * to, and the seconds after it.
 *
 * ?1 is the per-second cut (aligned down to a minute so that no minute is
 * rolled up in two pieces; held back by the clock's recent forward steps,
 * wallclock.c), ?2 the minute cut, ?3 the calibration cut. A
 * minute row's class and model are those of its newest second (SQLite gives
 * the bare columns of the row that max(t) picked). Everything runs in one
 * transaction: a crash midway leaves the previous state.
 *
 * A run rolls up at most rollup_chunk_s of per-second rows, from the
 * oldest: after a long stop a day of seconds can be due at once, and one
 * transaction over all of it would hold the writer for many seconds while
 * the queue fills. The writer runs the next chunk right after its next
 * commit. */
#include "store/store-internal.h"
#include "util/util.h"

/* ?4: the first second not to move; ?5: the last batch number so far.
 * Each two minutes of seconds from the oldest make one batch (live, a move
 * has one minute), so a rollup step never reads much more than the rows it
 * rolls up. */
static const char *const move[] = {
    "INSERT INTO process_energy_batch (batch, t_min, t_max)"
    " SELECT ?5 + 1 + (t - m.t0) / 120, min(t), max(t) FROM process_energy_recent,"
    " (SELECT min(t) AS t0 FROM process_energy_recent) m WHERE t < ?4 GROUP BY (t - m.t0) / 120",
    "INSERT INTO process_energy_settled (batch, process_id, t, attributed_j, standalone_j, cpu_s,"
    " class, model_id)"
    " SELECT ?5 + 1 + (t - m.t0) / 120, process_id, t, attributed_j, standalone_j, cpu_s, class,"
    " model_id FROM process_energy_recent, (SELECT min(t) AS t0 FROM process_energy_recent) m"
    " WHERE t < ?4 ORDER BY 1, 2, 3",
};

/* Empties process_energy_packed (the rows of process_energy_recent,
 * packed.h) but for the seconds from ?4 on. DELETE without WHERE frees the
 * table's pages without writing them; a range DELETE rewrites each page it
 * removes rows from first, which was about 40 % of the frames a move wrote
 * (docs/storage.md). The seconds that stay (one a flush wrote in progress,
 * and any after it: usually none) are set aside in a temporary table (in
 * memory) and put back. */
static const char *const empty[] = {
    "CREATE TEMP TABLE IF NOT EXISTS packed_kept AS"
    " SELECT * FROM process_energy_packed WHERE false",
    "INSERT INTO temp.packed_kept SELECT * FROM process_energy_packed"
    " WHERE k >= " PACKED_KEY_SQL("?4"),
    "DELETE FROM process_energy_packed",
    "INSERT INTO process_energy_packed SELECT * FROM temp.packed_kept ORDER BY k",
    "DELETE FROM temp.packed_kept",
};

static const char *const steps[] = {
    "INSERT INTO process_energy_minute (process_id, t, attributed_j, standalone_j, cpu_s, class,"
    " model_id, seconds)"
    " SELECT process_id, m, a, sa, c, class, model_id, n FROM ("
    "  SELECT e.process_id AS process_id, (e.t / 60) * 60 AS m, sum(e.attributed_j) AS a,"
    "  sum(e.standalone_j) AS sa, sum(e.cpu_s) AS c, count(*) AS n, max(e.t),"
    "  e.class AS class, e.model_id AS model_id"
    "  FROM process_energy_batch b CROSS JOIN process_energy_settled e ON e.batch = b.batch"
    "  WHERE b.t_min < ?1 AND e.t < ?1 AND e.t >= ?2 GROUP BY e.process_id, m) WHERE true"
    " ON CONFLICT (process_id, t) DO UPDATE SET"
    " attributed_j = attributed_j + excluded.attributed_j,"
    " standalone_j = standalone_j + excluded.standalone_j, cpu_s = cpu_s + excluded.cpu_s,"
    " seconds = seconds + excluded.seconds, class = excluded.class, model_id = excluded.model_id",
    "DELETE FROM process_energy_settled WHERE batch IN"
    " (SELECT batch FROM process_energy_batch WHERE t_min < ?1) AND t < ?1",
    "DELETE FROM process_energy_batch WHERE t_max < ?1",
    /* a batch cut in two keeps its newest second (t_max >= ?1) */
    "UPDATE process_energy_batch SET t_min = (SELECT min(t) FROM process_energy_settled e"
    " WHERE e.batch = process_energy_batch.batch) WHERE t_min < ?1",

    "INSERT INTO host_energy_minute (t, domain, measured_j, modeled_j, seconds)"
    " SELECT (t / 60) * 60 AS m, domain, sum(measured_j), sum(modeled_j), count(*)"
    " FROM host_energy WHERE t < ?1 AND t >= ?2 GROUP BY m, domain"
    " ON CONFLICT (t, domain) DO UPDATE SET"
    " measured_j = coalesce(measured_j + excluded.measured_j, measured_j, excluded.measured_j),"
    " modeled_j = coalesce(modeled_j + excluded.modeled_j, modeled_j, excluded.modeled_j),"
    " seconds = seconds + excluded.seconds",
    "DELETE FROM host_energy WHERE t < ?1",

    "INSERT INTO host_attribution_minute (t, duration_s, host_j, idle_j, attributed_j,"
    " unattributed_j, modeled_j, measured, model_id, seconds, idle_source, calib_t)"
    " SELECT m, d, h, i, a, u, mo, me, model_id, n, idle_source, calib_t FROM ("
    "  SELECT (t / 60) * 60 AS m, sum(duration_s) AS d, sum(host_j) AS h, sum(idle_j) AS i,"
    "  sum(attributed_j) AS a, sum(unattributed_j) AS u, sum(modeled_j) AS mo,"
    "  min(measured) AS me, count(*) AS n, max(t), model_id, idle_source, calib_t"
    "  FROM host_attribution"
    "  WHERE t < ?1 AND t >= ?2 GROUP BY m) WHERE true"
    " ON CONFLICT (t) DO UPDATE SET duration_s = duration_s + excluded.duration_s,"
    " host_j = host_j + excluded.host_j, idle_j = idle_j + excluded.idle_j,"
    " attributed_j = attributed_j + excluded.attributed_j,"
    " unattributed_j = unattributed_j + excluded.unattributed_j,"
    " modeled_j = modeled_j + excluded.modeled_j, measured = min(measured, excluded.measured),"
    " model_id = excluded.model_id, seconds = seconds + excluded.seconds,"
    " idle_source = excluded.idle_source, calib_t = excluded.calib_t",
    "DELETE FROM host_attribution WHERE t < ?1",

    "DELETE FROM process_energy_minute WHERE t < ?2",
    "DELETE FROM host_energy_minute WHERE t < ?2",
    "DELETE FROM host_attribution_minute WHERE t < ?2",
    "DELETE FROM calibration WHERE t < ?3",
    /* a process's folded rows are of seconds up to its last_seen; its
     * recent rows can be later */
    "DELETE FROM processes WHERE last_seen < ?2"
    " AND NOT EXISTS (SELECT 1 FROM process_energy_recent WHERE process_id = processes.id)"
    " AND NOT EXISTS (SELECT 1 FROM process_energy_batch b"
    "  CROSS JOIN process_energy_settled e ON e.batch = b.batch AND e.process_id = processes.id"
    "  WHERE b.t_min <= processes.last_seen)"
    " AND NOT EXISTS (SELECT 1 FROM process_energy_minute WHERE process_id = processes.id)",
};

static int64_t floor_div(int64_t a, int64_t b)
{
    return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

static int run_step(sqlite3 *db, const char *sql, const int64_t cut[5])
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);

    if (rc != SQLITE_OK)
        return rc;
    for (int i = 0; i < sqlite3_bind_parameter_count(st); i++)
        sqlite3_bind_int64(st, i + 1, cut[i]);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int retention_run(sqlite3 *db, const store_config *c, int64_t now_s, int64_t held_s,
                  int64_t move_before, char *err, size_t errlen)
{
    int64_t due = floor_div(now_s - c->second_retention_s - held_s, 60) * 60, oldest = INT64_MAX;
    int64_t cut[5] = {due, now_s - c->minute_retention_s, now_s - c->calibration_retention_s,
                      move_before, 0};
    int64_t recent = INT64_MAX;
    int more = 0, rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);

    if (rc == SQLITE_OK)
        rc = schema_int(db, "SELECT max(batch) FROM process_energy_batch", 0, &cut[4]);
    for (size_t i = 0; rc == SQLITE_OK && i < sizeof(move) / sizeof(move[0]); i++)
        rc = run_step(db, move[i], cut);
    for (size_t i = 0; rc == SQLITE_OK && i < sizeof(empty) / sizeof(empty[0]); i++)
        rc = run_step(db, empty[i], cut);
    if (rc == SQLITE_OK)
        rc = schema_int(
            db,
            "SELECT min(t) FROM (SELECT " PACKED_T_SQL(
                "(SELECT min(k) FROM process_energy_packed)") " AS t"
                                                              " UNION ALL SELECT min(t_min) FROM "
                                                              "process_energy_batch"
                                                              " UNION ALL SELECT min(t) FROM "
                                                              "host_energy"
                                                              " UNION ALL SELECT min(t) FROM "
                                                              "host_attribution)",
            INT64_MAX, &oldest);
    if (rc == SQLITE_OK && oldest < due - c->rollup_chunk_s) {
        cut[0] = floor_div(oldest, 60) * 60 + c->rollup_chunk_s;
        more = 1;
    }
    /* rows left in the recent table are rolled up after their move, at the
     * next run */
    if (rc == SQLITE_OK)
        rc = schema_int(db, "SELECT " PACKED_T_SQL("(SELECT min(k) FROM process_energy_packed)"),
                        INT64_MAX, &recent);
    if (rc == SQLITE_OK && recent < cut[0])
        cut[0] = floor_div(recent, 60) * 60;
    for (size_t i = 0; rc == SQLITE_OK && i < sizeof(steps) / sizeof(steps[0]); i++)
        rc = run_step(db, steps[i], cut);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        return more;
    if (!sqlite3_get_autocommit(db))
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return util_err(err, errlen, schema_errno(db, rc), "%s: rollup and retention failed: %s",
                    sqlite3_db_filename(db, "main"), sqlite3_errmsg(db));
}
