/* store-fixture: what the unit tests of lib/store share — a temporary
 * directory per test, the store opened on the data clock, raw SQLite reads
 * of the file behind the store's back, and pushes of one record. Included by
 * tests/unit/test_store*.c after cmocka.h. */
#ifndef WATTPROF_TEST_STORE_FIXTURE_H
#define WATTPROF_TEST_STORE_FIXTURE_H

#include "store/store.h"
#include "util/util.h"

#include <limits.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NS 1000000000LL
#define T0 1700000000LL /* a synthetic Unix second, minute-aligned + 20 */

typedef struct fixture {
    char dir[64];
    char path[128];
} fixture;

static inline double now_s(void)
{
    return (double)util_now_ns(CLOCK_MONOTONIC) / 1e9;
}

static inline void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static inline int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));

    strcpy(f->dir, "/tmp/wattprof-store-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof(f->path), "%s/wattprof.db", f->dir);
    *state = f;
    return 0;
}

static inline void remove_db(const char *path)
{
    char name[200];

    unlink(path);
    snprintf(name, sizeof(name), "%s-wal", path);
    unlink(name);
    snprintf(name, sizeof(name), "%s-shm", path);
    unlink(name);
    snprintf(name, sizeof(name), "%s-lock", path);
    unlink(name);
    snprintf(name, sizeof(name), "%s-settled", path);
    unlink(name);
    snprintf(name, sizeof(name), "%s-settled-journal", path);
    unlink(name);
}

static inline int teardown(void **state)
{
    fixture *f = *state;
    char name[200];

    remove_db(f->path);
    snprintf(name, sizeof(name), "%s/log", f->dir);
    unlink(name);
    rmdir(f->dir);
    free(f);
    return 0;
}

/* Test data is stamped in 2023-24: on the wall clock the writer's own
 * maintenance would find it all past retention, so tests count from the
 * data's newest second. */
static inline void config(store_config *c)
{
    store_config_default(c);
    strcpy(c->boot_id, "test-boot");
    c->clock = STORE_CLOCK_DATA;
}

static inline store *open_store(const char *path, const store_config *c)
{
    char err[UTIL_ERRLEN] = "";
    store *s = NULL;
    int r = store_open(path, c, &s, err, sizeof(err));

    if (r < 0)
        fail_msg("store_open: %s", err);
    return s;
}

/* ---- Reading the file behind the store's back --------------------------- */

/* The database with its settled file (PATH-settled) attached, when there
 * is one, and the view process_energy of both (a view of the main file
 * cannot read another). */
#define RAW_SETTLED_VIEW                                                                           \
    "CREATE TEMP VIEW process_energy AS"                                                           \
    " SELECT process_id, t, attributed_j, standalone_j, cpu_s, class, model_id"                    \
    " FROM settled.process_energy_settled UNION ALL"                                               \
    " SELECT process_id, t, attributed_j, standalone_j, cpu_s, class, model_id"                    \
    " FROM main.process_energy_recent"

static inline sqlite3 *raw_open(const char *path)
{
    char settled[4200], *sql;
    struct stat st;
    sqlite3 *db;

    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(store_sqlite_register(db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    snprintf(settled, sizeof(settled), "%s-settled", path);
    if (stat(settled, &st) == 0) {
        sql = sqlite3_mprintf("ATTACH %Q AS settled", settled);
        assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
        sqlite3_free(sql);
        sqlite3_exec(db, RAW_SETTLED_VIEW, NULL, NULL, NULL);
    }
    return db;
}

static inline double raw_num(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    double v;

    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    v = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    return v;
}

static inline double file_num(const char *path, const char *sql)
{
    sqlite3 *db = raw_open(path);
    double v = raw_num(db, sql);

    sqlite3_close(db);
    return v;
}

static inline void raw_exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;

    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
}

/* Compares every table of the copy `old` (a file VACUUMed INTO before a
 * migration) with the migrated database open as `db`, by name wherever
 * the migration put it (the settled file, else main: named, as an
 * unqualified name would find old's own table where main's is a virtual
 * table): each must have rows, and the same. Returns how many tables. */
static inline int raw_same_tables(sqlite3 *db, const char *old)
{
    char sql[PATH_MAX + 256], where[32];
    sqlite3_stmt *st;
    int tables = 0;

    snprintf(sql, sizeof(sql), "ATTACH '%s' AS old", old);
    raw_exec(db, sql);
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT name FROM old.sqlite_master WHERE type = 'table'"
                                        " AND name NOT LIKE 'sqlite_%'",
                                        -1, &st, NULL),
                     SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);

        snprintf(sql, sizeof(sql), "SELECT count(*) FROM old.%s", t);
        if (raw_num(db, sql) <= 0)
            fail_msg("%s: no rows to migrate", t);
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM settled.sqlite_master WHERE name = '%s'",
                 t);
        snprintf(where, sizeof(where), "%s", raw_num(db, sql) > 0 ? "settled" : "main");
        snprintf(sql, sizeof(sql),
                 "SELECT (SELECT count(*) FROM %s.%s) - (SELECT count(*) FROM old.%s)"
                 " + (SELECT count(*) FROM (SELECT * FROM old.%s EXCEPT SELECT * FROM %s.%s))",
                 where, t, t, t, where, t);
        if (raw_num(db, sql) != 0)
            fail_msg("%s: rows differ after the migration", t);
        tables++;
    }
    sqlite3_finalize(st);
    return tables;
}

/* SQL that takes a new database (opened by raw_open) back to schema
 * version 10: its settled rows and minute rows in tables of the main file,
 * with the view process_energy there, and the settled file emptied. */
#define STORE_AS_V10                                                                               \
    "CREATE TABLE main.process_energy_settled ("                                                   \
    " batch INTEGER NOT NULL, process_id INTEGER NOT NULL, t INTEGER NOT NULL,"                    \
    " attributed_j REAL NOT NULL, standalone_j REAL NOT NULL, cpu_s REAL NOT NULL,"                \
    " class INTEGER, model_id INTEGER, PRIMARY KEY (batch, process_id, t)) WITHOUT ROWID;"         \
    "CREATE TABLE main.process_energy_batch ("                                                     \
    " batch INTEGER PRIMARY KEY, t_min INTEGER NOT NULL, t_max INTEGER NOT NULL);"                 \
    "CREATE INDEX main.process_energy_batch_t ON process_energy_batch(t_max);"                     \
    "CREATE TABLE main.process_energy_minute ("                                                    \
    " process_id INTEGER NOT NULL, t INTEGER NOT NULL, attributed_j REAL NOT NULL,"                \
    " standalone_j REAL NOT NULL, cpu_s REAL NOT NULL, class INTEGER, model_id INTEGER,"           \
    " seconds INTEGER NOT NULL, PRIMARY KEY (process_id, t)) WITHOUT ROWID;"                       \
    "CREATE INDEX main.process_energy_minute_t ON process_energy_minute(t);"                       \
    "INSERT INTO main.process_energy_settled SELECT * FROM settled.process_energy_settled;"        \
    "INSERT INTO main.process_energy_batch SELECT * FROM settled.process_energy_batch;"            \
    "INSERT INTO main.process_energy_minute SELECT * FROM settled.process_energy_minute;"          \
    "DELETE FROM settled.process_energy_settled; DELETE FROM settled.process_energy_batch;"        \
    "DELETE FROM settled.process_energy_minute; DROP VIEW temp.process_energy;"                    \
    "CREATE VIEW main.process_energy AS"                                                           \
    " SELECT process_id, t, attributed_j, standalone_j, cpu_s, class, model_id"                    \
    " FROM process_energy_settled UNION ALL"                                                       \
    " SELECT process_id, t, attributed_j, standalone_j, cpu_s, class, model_id"                    \
    " FROM process_energy_recent;"

/* Rows for the tables a short run leaves empty, in the tables of version 7
 * and later (processes through the view's triggers). */
#define STORE_ROWS_OF_V7                                                                           \
    "INSERT INTO models VALUES (7, 'ab12', 'm', 'linear', '{}', 1700000000, 1700000001);"          \
    "INSERT INTO process_energy_minute VALUES (1, 1699900000, 60, 61, 6, 0, 7, 60);"               \
    "INSERT INTO host_energy_minute VALUES (1699900000, 'package', 600, 610, 60);"                 \
    "INSERT INTO host_attribution_minute VALUES"                                                   \
    " (1699900000, 60, 600, 240, 300, 60, 590, 1, 7, 60, 'fitted', 1699800000);"                   \
    "INSERT INTO node_calibration VALUES"                                                          \
    " ('package', 1699800000, 4.5, 0.1, 1.0, 0.9, 2.0, 300, 'ab12');"                              \
    "INSERT INTO calibration VALUES (1699999990, 1, 7, '{\"package\": 9}', '[[1.5]]');"            \
    "INSERT INTO process_energy_batch VALUES (1, 1699990000, 1699990001);"                         \
    "INSERT INTO process_energy_settled VALUES (1, 2, 1699990000, 1, 1.5, 0.25, 1, 7),"            \
    " (1, 2, 1699990001, 2, 2.5, 0.5, 0, 7);"                                                      \
    "INSERT INTO processes (boot_id, pid, start_time, comm, cmdline, uid, cgroup, first_seen,"     \
    " last_seen, exit_time, class, attributed_j, standalone_j, cpu_s, job) VALUES"                 \
    " ('b', 300, 3, 'gone', 'gone --x', 1000, '/job', 1699990000, 1699990001, 1699990002, 0,"      \
    " 3, 4, 0.75, '42');"

/* SQL that takes a new database back to schema version 9: version 10's,
 * then the recent per-second rows in the table they were, one row per
 * process and second, read out of the packed rows (version 10) through the
 * virtual table (raw_open registers it). */
#define STORE_AS_V9                                                                                \
    STORE_AS_V10                                                                                   \
    "CREATE TEMP TABLE recent_v9 AS SELECT t, process_id, attributed_j, standalone_j, cpu_s,"      \
    " class, model_id FROM process_energy_recent;"                                                 \
    "DROP TABLE process_energy_packed;"                                                            \
    "CREATE TABLE process_energy_recent ("                                                         \
    " t INTEGER NOT NULL, process_id INTEGER NOT NULL, attributed_j REAL NOT NULL,"                \
    " standalone_j REAL NOT NULL, cpu_s REAL NOT NULL, class INTEGER, model_id INTEGER,"           \
    " PRIMARY KEY (t, process_id)) WITHOUT ROWID;"                                                 \
    "INSERT INTO main.process_energy_recent SELECT * FROM temp.recent_v9;"                         \
    "DROP TABLE temp.recent_v9;"

/* SQL that takes a new database back to schema version 8: without the
 * node's per-event calibration (version 9). */
#define STORE_AS_V8 STORE_AS_V9 "DROP TABLE node_event_calibration;"

/* SQL that turns the `processes` view back into the table it was up to
 * schema version 7 (identity and totals in one row), for tests that start
 * from an older version by taking the newer one apart; the tables of later
 * versions go too. */
#define STORE_PROCESSES_AS_V7                                                                      \
    STORE_AS_V8                                                                                    \
    "CREATE TABLE processes_v7 ("                                                                  \
    " id INTEGER PRIMARY KEY, boot_id TEXT NOT NULL, pid INTEGER NOT NULL,"                        \
    " start_time INTEGER NOT NULL, comm TEXT, cmdline TEXT, uid INTEGER, cgroup TEXT,"             \
    " first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL, exit_time INTEGER,"                 \
    " class INTEGER, attributed_j REAL NOT NULL DEFAULT 0,"                                        \
    " standalone_j REAL NOT NULL DEFAULT 0, cpu_s REAL NOT NULL DEFAULT 0, job TEXT,"              \
    " UNIQUE (boot_id, pid, start_time));"                                                         \
    "INSERT INTO processes_v7 SELECT * FROM processes;"                                            \
    "DROP VIEW processes; DROP TABLE process_info; DROP TABLE process_totals;"                     \
    "ALTER TABLE processes_v7 RENAME TO processes;"                                                \
    "CREATE INDEX processes_pid ON processes(pid);"                                                \
    "CREATE INDEX processes_last_seen ON processes(last_seen);"                                    \
    "CREATE INDEX processes_job ON processes(job) WHERE job IS NOT NULL;"

/* ---- Pushing --------------------------------------------------------------- */

static inline int push_proc(store *s, int64_t t_ns, pid_t pid, uint64_t start, double a, double sa,
                            double cpu, int klass, int32_t model)
{
    store_proc_tick t = {.t_ns = t_ns,
                         .pid = pid,
                         .start_time = start,
                         .attributed_j = a,
                         .standalone_j = sa,
                         .cpu_s = cpu,
                         .klass = klass,
                         .model_id = model};
    return store_push_proc(s, &t);
}

static inline int push_host(store *s, int64_t t_ns, double dt, double host, double idle,
                            double attr)
{
    store_host_tick h = {.t_ns = t_ns,
                         .dt_s = dt,
                         .measured = true,
                         .host_j = host,
                         .idle_j = idle,
                         .attributed_j = attr,
                         .unattributed_j = host - idle - attr,
                         .modeled_j = host * 1.1,
                         .model_id = 1};
    return store_push_host(s, &h);
}

static inline void push_info(store *s, int64_t t_ns, pid_t pid, uint64_t start, const char *comm,
                             int64_t uid)
{
    store_proc_info i = {.t_ns = t_ns,
                         .pid = pid,
                         .start_time = start,
                         .comm = comm,
                         .cmdline = comm,
                         .cgroup = "/user.slice",
                         .uid = uid};
    assert_int_equal(store_push_proc_info(s, &i), 0);
}

/* n processes pid0.. each with one tick in second t. */
static inline void push_many_at(store *s, int64_t t, int pid0, int n)
{
    for (int i = 0; i < n; i++)
        assert_int_equal(push_proc(s, t * NS, pid0 + i, 1, 1.0, 1.0, 0.01, 0, 0), 0);
}

/* A reader on the fixture's database (the test fails if it cannot open). */
static inline store_reader *reader(fixture *f)
{
    char err[UTIL_ERRLEN];
    store_reader *r;

    if (store_reader_open(f->path, &r, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    return r;
}

#endif
