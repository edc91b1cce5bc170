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
 * the bare columns of the row that max(t) picked).
 *
 * process_energy_settled, its batches and the minute rows are in the
 * settled file (settled.c), and a transaction is atomic per file only, so
 * a run is four: (1) the settled file takes the batch, after the main
 * file's WAL is synced; (2) the main file empties the recent table and
 * rolls up its host rows; (3) the settled file rolls up and expires its
 * rows; (4) the main file deletes the processes left without rows. A
 * crash inside one leaves the state before it; a crash between (1) and (2)
 * leaves the batch's seconds in both files, which the next open undoes
 * (settled_drop_moved) and the next move leaves out; between the others
 * it only postpones what is left to the next run (docs/storage.md).
 *
 * A run rolls up at most rollup_chunk_s of per-second rows, from the
 * oldest: after a long stop a day of seconds can be due at once, and one
 * transaction over all of it would hold the writer for many seconds while
 * the queue fills. The writer runs the next chunk right after its next
 * commit. */
#include "store/store-internal.h"
#include "util/util.h"

#include <errno.h>

/* ?4: the first second not to move; ?5: the last batch number so far.
 * Each two minutes of seconds from the oldest make one batch (live, a move
 * has one minute), so a rollup step never reads much more than the rows it
 * rolls up. The rows go through a temporary table (in memory) that leaves
 * out those a batch holds already: after a crash, or a failed commit of
 * the main file, between the move's two commits, the next move does not
 * settle them twice. Only the settled file is written. */
static const char *const move[] = {
    "CREATE TEMP TABLE IF NOT EXISTS move_rows AS SELECT t, process_id, attributed_j,"
    " standalone_j, cpu_s, class, model_id FROM main.process_energy_recent WHERE false",
    "INSERT INTO temp.move_rows SELECT r.t, r.process_id, r.attributed_j, r.standalone_j,"
    " r.cpu_s, r.class, r.model_id FROM main.process_energy_recent r"
    " WHERE r.t < ?4 AND NOT " SETTLED_ALREADY("r"),
    "INSERT INTO settled.process_energy_batch (batch, t_min, t_max)"
    " SELECT ?5 + 1 + (t - m.t0) / 120, min(t), max(t) FROM temp.move_rows,"
    " (SELECT min(t) AS t0 FROM temp.move_rows) m GROUP BY (t - m.t0) / 120",
    "INSERT INTO settled.process_energy_settled (batch, process_id, t, attributed_j,"
    " standalone_j, cpu_s, class, model_id)"
    " SELECT ?5 + 1 + (t - m.t0) / 120, process_id, t, attributed_j, standalone_j, cpu_s, class,"
    " model_id FROM temp.move_rows, (SELECT min(t) AS t0 FROM temp.move_rows) m"
    " ORDER BY 1, 2, 3",
    "DELETE FROM temp.move_rows",
};

/* Empties process_energy_packed (the rows of process_energy_recent,
 * packed.h) but for the seconds from ?4 on, once the settled file holds
 * them. DELETE without WHERE frees the
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

/* The rollup of the settled rows, in the settled file's own transaction
 * (after the main file's, so that it never rolls up rows that the recent
 * table still holds). */
static const char *const settled_steps[] = {
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
    "DELETE FROM process_energy_minute WHERE t < ?2",
};

/* The rest, in the main file's transaction with the emptying of the recent
 * table. */
static const char *const steps[] = {
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

    "DELETE FROM host_energy_minute WHERE t < ?2",
    "DELETE FROM host_attribution_minute WHERE t < ?2",
    "DELETE FROM calibration WHERE t < ?3",
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

/* Last, in a transaction of the main file of its own: the processes with
 * no rows left in either file (it writes nothing when none goes). */
static const char *const processes_steps[] = {
    /* a process's folded rows are of seconds up to its last_seen; its
     * recent rows can be later */
    "DELETE FROM processes WHERE last_seen < ?2"
    " AND NOT EXISTS (SELECT 1 FROM process_energy_recent WHERE process_id = processes.id)"
    " AND NOT EXISTS (SELECT 1 FROM process_energy_batch b"
    "  CROSS JOIN process_energy_settled e ON e.batch = b.batch AND e.process_id = processes.id"
    "  WHERE b.t_min <= processes.last_seen)"
    " AND NOT EXISTS (SELECT 1 FROM process_energy_minute WHERE process_id = processes.id)",
};

/* Runs `sql` (n statements) with `cut` in one transaction begun by
 * `begin`; on failure an SQLite code, with what failed in `err` (taken
 * before the rollback, which clears it). */
static int run_txn(sqlite3 *db, const char *begin, const char *const *sql, size_t n,
                   const int64_t cut[5], const char *schema, const char *what, char *err,
                   size_t errlen)
{
    int rc = sqlite3_exec(db, begin, NULL, NULL, NULL);

    for (size_t i = 0; rc == SQLITE_OK && i < n; i++)
        rc = run_step(db, sql[i], cut);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        return rc;
    util_err(err, errlen, schema_errno(db, rc), "%s: %s failed: %s",
             sqlite3_db_filename(db, schema), what, sqlite3_errmsg(db));
    if (!sqlite3_get_autocommit(db))
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/* A transaction of the settled file, waiting SETTLED_BUSY_MS at most for
 * readers: a reader's SHARED lock there holds off its commit until the
 * reader's statement ends (queries may run 10 s), and the per-second
 * commits wait for maintenance. */
static int run_settled(sqlite3 *db, const char *const *sql, size_t n, const int64_t cut[5],
                       const char *what, char *err, size_t errlen)
{
    int rc;

    sqlite3_busy_timeout(db, SETTLED_BUSY_MS);
    rc = run_txn(db, "BEGIN IMMEDIATE", sql, n, cut, "settled", what, err, errlen);
    sqlite3_busy_timeout(db, SCHEMA_BUSY_MS);
    return rc;
}

/* -errno for a failed step (never 0) */
static int step_errno(sqlite3 *db, int rc)
{
    int r = schema_errno(db, rc);

    return r < 0 ? r : -EIO;
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

int retention_run(sqlite3 *db, const store_config *c, int64_t now_s, int64_t held_s,
                  int64_t move_before, char *err, size_t errlen)
{
    int64_t due = floor_div(now_s - c->second_retention_s - held_s, 60) * 60, oldest = INT64_MAX;
    int64_t cut[5] = {due, now_s - c->minute_retention_s, now_s - c->calibration_retention_s,
                      move_before, 0};
    int64_t recent = INT64_MAX;
    int more = 0, rc, r;

    /* 1. the settled file takes the rows (its commit first) */
    rc = schema_int(db, "SELECT max(batch) FROM settled.process_energy_batch", 0, &cut[4]);
    if (rc != SQLITE_OK)
        return util_err(err, errlen, step_errno(db, rc), "%s: reading the last batch: %s",
                        sqlite3_db_filename(db, "settled"), sqlite3_errmsg(db));
    r = settled_sync_main(db, err, errlen);
    if (r < 0)
        return r;
    rc = run_settled(db, move, N(move), cut, "moving the recent rows", err, errlen);
    if ((rc & 0xff) == SQLITE_BUSY)
        return RETENTION_BUSY;
    if (rc != SQLITE_OK)
        return step_errno(db, rc);

    /* 2. the main file lets them go, and rolls up and expires its own rows */
    rc = sqlite3_exec(db, SCHEMA_BEGIN_MAIN, NULL, NULL, NULL);
    for (size_t i = 0; rc == SQLITE_OK && i < N(empty); i++)
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
    for (size_t i = 0; rc == SQLITE_OK && i < N(steps); i++)
        rc = run_step(db, steps[i], cut);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        r = util_err(err, errlen, step_errno(db, rc), "%s: rollup and retention failed: %s",
                     sqlite3_db_filename(db, "main"), sqlite3_errmsg(db));
        if (!sqlite3_get_autocommit(db))
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return r;
    }

    /* 3. the settled file rolls up and expires its rows */
    rc = run_settled(db, settled_steps, N(settled_steps), cut, "rollup and retention", err, errlen);
    if ((rc & 0xff) == SQLITE_BUSY)
        return RETENTION_BUSY;

    /* 4. the processes with no rows left go */
    if (rc == SQLITE_OK)
        rc = run_txn(db, SCHEMA_BEGIN_MAIN, processes_steps, N(processes_steps), cut, "main",
                     "deleting expired processes", err, errlen);
    return rc == SQLITE_OK ? more : step_errno(db, rc);
}
