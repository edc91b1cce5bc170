/* Unit tests for lib/store: schema and migrations, the writer, rollups and
 * retention (queries: test_store_queries.c; faults: test_store_faults.c).
 * Real SQLite files in a temporary directory, a
 * real writer thread, and a real child process killed mid-write. */
/* cmocka needs these three before it */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
// clang-format on

#include "store/store.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store-fixture.h"

/* ---- Schema and migrations ---------------------------------------------------- */

static void test_schema_created(void **state)
{
    fixture *f = *state;
    store_config c;
    const char *tables[] = {
        "models",      "process_info",       "process_totals",   "process_energy_packed",
        "host_energy", "host_energy_minute", "host_attribution", "host_attribution_minute",
        "calibration", "node_calibration"};
    char sql[200];
    struct stat sb;
    sqlite3 *db;

    config(&c);
    assert_int_equal(store_close(open_store(f->path, &c)), 0);
    char err[UTIL_ERRLEN];
    store_reader *r;
    int64_t latest = 0;
    assert_int_equal(store_reader_open(f->path, &r, err, sizeof(err)), 0);
    assert_int_equal(store_latest_second(r, &latest, err, sizeof(err)), 0);
    assert_int_equal(latest, -1);
    store_reader_close(r);
    db = raw_open(f->path);
    assert_int_equal(raw_num(db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '%s'",
                 tables[i]);
        assert_int_equal(raw_num(db, sql), 1);
    }
    /* the settled rows and their rollups, in the file beside it */
    assert_int_equal(raw_num(db, "SELECT count(*) FROM settled.sqlite_master WHERE type = 'table'"
                                 " AND name IN ('process_energy_settled', 'process_energy_batch',"
                                 " 'process_energy_minute')"),
                     3);
    assert_int_equal(raw_num(db, "PRAGMA settled.page_size"), raw_num(db, "PRAGMA page_size"));
    /* in DELETE mode: no journal is left after the commit that made the
     * tables (readers would open an empty one at each statement) */
    snprintf(sql, sizeof(sql), "%s-settled-journal", f->path);
    assert_int_equal(stat(sql, &sb), -1);
    assert_int_equal(errno, ENOENT);
    /* no view of the main file can read the settled rows' (store-fixture.h
     * makes a temporary one) */
    assert_int_equal(raw_num(db, "SELECT count(*) FROM main.sqlite_master WHERE type = 'view'"
                                 " AND name = 'process_energy'"),
                     0);
    /* a process's identity and its totals, as one row */
    assert_int_equal(raw_num(db, "SELECT count(*) FROM sqlite_master WHERE type = 'view'"
                                 " AND name = 'processes'"),
                     1);
    sqlite3_close(db);
    /* WAL is a property of the file: a fresh connection sees it. */
    db = raw_open(f->path);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* Version 1 as it was shipped: the test keeps its own copy, so a change to
 * the first migration that would break old files shows here. */
static const char *v1_sql =
    "CREATE TABLE models (id INTEGER PRIMARY KEY, sha256 TEXT NOT NULL UNIQUE, name TEXT,"
    " engine TEXT, json TEXT NOT NULL, first_loaded INTEGER NOT NULL,"
    " last_loaded INTEGER NOT NULL);"
    "CREATE TABLE processes (id INTEGER PRIMARY KEY, boot_id TEXT NOT NULL,"
    " pid INTEGER NOT NULL, start_time INTEGER NOT NULL, comm TEXT, cmdline TEXT, uid INTEGER,"
    " cgroup TEXT, first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL, exit_time INTEGER,"
    " class INTEGER, attributed_j REAL NOT NULL DEFAULT 0, standalone_j REAL NOT NULL DEFAULT 0,"
    " cpu_s REAL NOT NULL DEFAULT 0, UNIQUE (boot_id, pid, start_time));"
    "CREATE INDEX processes_pid ON processes(pid);"
    "CREATE INDEX processes_last_seen ON processes(last_seen);"
    "CREATE TABLE process_energy (process_id INTEGER NOT NULL, t INTEGER NOT NULL,"
    " attributed_j REAL NOT NULL, standalone_j REAL NOT NULL, cpu_s REAL NOT NULL,"
    " class INTEGER, model_id INTEGER, PRIMARY KEY (process_id, t)) WITHOUT ROWID;"
    "CREATE INDEX process_energy_t ON process_energy(t);"
    "CREATE TABLE host_energy (t INTEGER NOT NULL, domain TEXT NOT NULL, measured_j REAL,"
    " modeled_j REAL, PRIMARY KEY (t, domain)) WITHOUT ROWID;"
    "INSERT INTO models VALUES (1, '" /* sha */
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 'old', 'ridge', '{}',"
    " 1, 1);"
    "INSERT INTO processes (boot_id, pid, start_time, comm, uid, first_seen, last_seen, class,"
    " attributed_j, standalone_j, cpu_s) VALUES ('test-boot', 42, 7, 'old', 1000, 1700000000,"
    " 1700000000, 1, 3.0, 4.0, 0.5);"
    "INSERT INTO process_energy VALUES (1, 1700000000, 3.0, 4.0, 0.5, 1, 1);"
    "PRAGMA user_version = 1;";

static void test_migrates_v1(void **state)
{
    fixture *f = *state;
    sqlite3 *db = raw_open(f->path);
    store_config c;
    store *s;
    int32_t id;
    char err[UTIL_ERRLEN];

    raw_exec(db, v1_sql);
    sqlite3_close(db);

    config(&c);
    s = open_store(f->path, &c);
    /* The old model keeps its id; a new one gets the next. */
    assert_int_equal(
        store_model_add(s, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                        "old", "ridge", "{}", &id, err, sizeof(err)),
        0);
    assert_int_equal(id, 1);
    assert_int_equal(
        store_model_add(s, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
                        "new", "ridge", "{\"a\":1}", &id, err, sizeof(err)),
        0);
    assert_int_equal(id, 2);
    /* The same process keeps accumulating into its old row. */
    assert_int_equal(push_proc(s, (T0 + 1) * NS, 42, 7, 2.0, 1.0, 0.25, 1, id), 0);
    assert_int_equal(store_close(s), 0);

    db = raw_open(f->path);
    assert_int_equal(raw_num(db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM processes"), 1);
    assert_float_equal(raw_num(db, "SELECT attributed_j FROM processes"), 5.0, 1e-12);
    assert_float_equal(raw_num(db, "SELECT cpu_s FROM processes"), 0.75, 1e-12);
    assert_int_equal(raw_num(db, "SELECT last_seen FROM processes"), T0 + 1);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy"), 2);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM models"), 2);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM calibration"), 0);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM node_calibration"), 0);
    sqlite3_close(db);
}

/* The node's calibration: the latest save is what a reader finds after the
 * writer closed, one row per target; bad rows are refused. */
static void test_node_calibration(void **state)
{
    fixture *f = *state;
    store_config c;
    store_node_calib in = {.target = "package",
                           .t = T0,
                           .idle_w = 20.1,
                           .idle_se_w = 0.2,
                           .scale = 4.5,
                           .r2 = NAN,
                           .spread_w = 9.5,
                           .rows = 240},
                     got;
    store_reader *r;
    char err[UTIL_ERRLEN];
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    assert_int_equal(store_node_calib_save(s, &in), 0);
    in.idle_w = 19.9;
    in.t = T0 + 60;
    snprintf(in.model_sha256, sizeof(in.model_sha256), "%064d", 7);
    assert_int_equal(store_node_calib_save(s, &in), 0);
    store_node_calib other = in;
    snprintf(other.target, sizeof(other.target), "package+dram");
    other.idle_w = 31;
    assert_int_equal(store_node_calib_save(s, &other), 0); /* replaces the pending one */
    other.idle_w = -1;
    assert_int_equal(store_node_calib_save(s, &other), -EINVAL);
    other.idle_w = NAN;
    assert_int_equal(store_node_calib_save(s, &other), -EINVAL);
    other.idle_w = 1;
    other.target[0] = '\0';
    assert_int_equal(store_node_calib_save(s, &other), -EINVAL);
    assert_int_equal(store_flush(s), 0);
    assert_int_equal(store_node_calib_save(s, &in), 0);
    assert_int_equal(store_close(s), 0);

    assert_int_equal(store_reader_open(f->path, &r, err, sizeof(err)), 0);
    assert_int_equal(store_node_calib_get(r, "package", &got, err, sizeof(err)), 0);
    assert_int_equal(got.t, T0 + 60);
    assert_float_equal(got.idle_w, 19.9, 1e-12);
    assert_float_equal(got.idle_se_w, 0.2, 1e-12);
    assert_float_equal(got.scale, 4.5, 1e-12);
    assert_true(isnan(got.r2));
    assert_int_equal(got.rows, 240);
    assert_string_equal(got.model_sha256, in.model_sha256);
    assert_int_equal(store_node_calib_get(r, "package+dram", &got, err, sizeof(err)), 0);
    assert_float_equal(got.idle_w, 31, 1e-12);
    assert_int_equal(store_node_calib_get(r, "dram", &got, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "no node calibration for dram"));
    store_reader_close(r);
}

static void test_newer_schema_refused(void **state)
{
    fixture *f = *state;
    sqlite3 *db = raw_open(f->path);
    char err[UTIL_ERRLEN] = "", want[300];
    store_reader *r;
    store *s;

    raw_exec(db, "PRAGMA user_version = 99");
    sqlite3_close(db);
    assert_int_equal(store_open(f->path, NULL, &s, err, sizeof(err)), -EPROTO);
    snprintf(want, sizeof(want), "%s: schema version 99 is newer than this wattprof's (%d)",
             f->path, STORE_SCHEMA_VERSION);
    assert_string_equal(err, want);
    assert_int_equal(store_reader_open(f->path, &r, err, sizeof(err)), -EPROTO);
    assert_non_null(strstr(err, "schema version 99"));
}

static void test_bad_config_and_path(void **state)
{
    fixture *f = *state;
    char err[UTIL_ERRLEN] = "", path[200];
    store_reader *r;
    store_config c;
    store *s;

    config(&c);
    c.minute_retention_s = 3600;
    assert_int_equal(store_open(f->path, &c, &s, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "per-minute retention (3600 s)"));
    config(&c);
    c.rollup_chunk_s = 90;
    assert_int_equal(store_open(f->path, &c, &s, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "rollup_chunk_s (90)"));
    config(&c);
    c.queue_capacity = 2;
    assert_int_equal(store_open(f->path, &c, &s, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "queue_capacity 2"));

    snprintf(path, sizeof(path), "%s/no/such/dir/x.db", f->dir);
    config(&c);
    assert_true(store_open(path, &c, &s, err, sizeof(err)) < 0);
    assert_true(strncmp(err, path, strlen(path)) == 0);
    assert_int_equal(store_reader_open(path, &r, err, sizeof(err)), -ENOENT);
    assert_true(strncmp(err, path, strlen(path)) == 0);

    /* A file that is not a database. */
    int fd = open(f->path, O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd,
                           "this is not sqlite, not at all, no.................................."
                           "...............................................",
                           116),
                     116);
    close(fd);
    assert_true(store_open(f->path, &c, &s, err, sizeof(err)) < 0);
    assert_true(strncmp(err, f->path, strlen(f->path)) == 0);
    assert_non_null(strstr(err, "not a database"));
}

static void test_second_writer_refused(void **state)
{
    fixture *f = *state;
    char err[UTIL_ERRLEN];
    store_config c;
    store *s, *other;

    config(&c);
    s = open_store(f->path, &c);
    assert_int_equal(store_open(f->path, &c, &other, err, sizeof(err)), -EBUSY);
    assert_true(strncmp(err, f->path, strlen(f->path)) == 0);
    assert_non_null(strstr(err, "in use by another writer"));
    assert_int_equal(store_close(s), 0);
    /* Closed, the file is free again. */
    assert_int_equal(store_close(open_store(f->path, &c)), 0);
}

/* ---- The writer ------------------------------------------------------------- */

/* Pushes 50 Hz ticks paced in real time for 3.5 s, while another connection
 * watches the table: it must change about once a second (one transaction
 * per second), never more often than the commit interval allows, and the
 * per-second rows must hold exactly their 50 ticks. */
static void test_writer_one_transaction_per_second(void **state)
{
    fixture *f = *state;
    store_config c;
    store_stats st;
    store *s;
    sqlite3 *db;
    double start, last_change = -1, min_gap = 1e9, prev = -1;
    int changes = 0, ticks = 175;

    config(&c);
    s = open_store(f->path, &c);
    db = raw_open(f->path);
    start = now_s();
    for (int k = 0; k < ticks; k++) {
        int64_t t_ns = (T0 + k / 50) * NS + (k % 50) * 20000000LL;
        assert_int_equal(push_proc(s, t_ns, 100, 1, 0.5, 0.7, 0.02, 0, 0), 0);
        assert_int_equal(push_proc(s, t_ns, 200, 2, 0.25, 0.3, 0.01, 1, 0), 0);
        assert_int_equal(push_host(s, t_ns, 0.02, 1.0, 0.2, 0.75), 0);
        double v = raw_num(db, "SELECT count(*) + coalesce(sum(attributed_j), 0)"
                               " FROM process_energy");
        if (v != prev && prev >= 0) {
            double t = now_s();
            if (last_change >= 0 && t - last_change < min_gap)
                min_gap = t - last_change;
            last_change = t;
            changes++;
        }
        prev = v;
        while (now_s() < start + (k + 1) * 0.02)
            sleep_ms(2);
    }
    store_get_stats(s, &st);
    assert_true(st.commits >= 2 && st.commits <= 4);
    assert_true(changes >= 2 && changes <= 4);
    assert_true(min_gap > 0.4); /* never more often than min_commit_gap_ms */
    assert_int_equal(st.pushed, 3 * ticks);
    assert_int_equal(st.dropped, 0);
    assert_int_equal(store_close(s), 0);

    /* 3 full seconds and a half: 4 rows per process, 50 ticks in each full one. */
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy"), 8);
    for (int k = 0; k < 3; k++) {
        char sql[200];
        snprintf(sql, sizeof(sql),
                 "SELECT process_energy.attributed_j FROM process_energy"
                 " JOIN processes ON id = process_id"
                 " WHERE pid = 100 AND t = %lld",
                 T0 + k);
        assert_float_equal(raw_num(db, sql), 25.0, 1e-9);
        snprintf(sql, sizeof(sql), "SELECT host_j FROM host_attribution WHERE t = %lld", T0 + k);
        assert_float_equal(raw_num(db, sql), 50.0, 1e-9);
    }
    assert_float_equal(raw_num(db, "SELECT attributed_j FROM processes WHERE pid = 200"),
                       0.25 * ticks, 1e-9);
    assert_int_equal(raw_num(db, "SELECT class FROM processes WHERE pid = 200"), 1);
    sqlite3_close(db);
}

/* Pushes `n` processes' ticks at 50 Hz, stamped and paced by the real
 * clocks, for `ticks` ticks. With `db`, after the first tick of each new
 * wall-clock second it waits for the second before it to become readable,
 * and returns the longest such wait (s), the first second left out: the
 * writer's first commit waits min_commit_gap_ms after it starts. */
static double push_live(store *s, sqlite3 *db, int n, int ticks)
{
    double start = now_s(), worst = 0;
    int64_t prev_s = -1, first_s = -1;

    for (int k = 0; k < ticks; k++) {
        int64_t t_ns = (int64_t)util_now_ns(CLOCK_REALTIME);
        for (int i = 0; i < n; i++)
            assert_int_equal(push_proc(s, t_ns, 1000 + i, i, 0.001, 0.001, 0.0002, 0, 0), 0);
        assert_int_equal(push_host(s, t_ns, 0.02, 1.0, 0.2, 0.75), 0);
        if (db && prev_s >= 0 && t_ns / NS > prev_s) {
            char sql[120];
            double pushed = now_s(), waited;
            snprintf(sql, sizeof(sql), "SELECT count(*) FROM host_attribution WHERE t = %lld",
                     (long long)prev_s);
            while (raw_num(db, sql) == 0 && now_s() - pushed < 3)
                sleep_ms(5);
            waited = now_s() - pushed;
            if (prev_s > first_s)
                worst = waited > worst ? waited : worst;
        }
        if (first_s < 0)
            first_s = t_ns / NS;
        prev_s = t_ns / NS;
        while (now_s() < start + (k + 1) * 0.02)
            sleep_ms(1);
    }
    return worst;
}

/* Live, the writer wakes about once a second (when the wall-clock second
 * ends) instead of every drain interval, yet each second is readable soon
 * after the next one's first record, within the drain interval plus the
 * wake margin (and slack for a loaded machine), not a second late. */
static void test_live_writer_wakes_per_second(void **state)
{
    fixture *f = *state;
    store_config c;
    store_stats st;
    sqlite3 *db;
    double start, wall, worst;
    store *s;

    config(&c);
    c.clock = STORE_CLOCK_WALL;
    s = open_store(f->path, &c);
    db = raw_open(f->path);
    start = now_s();
    worst = push_live(s, db, 200, 200);
    wall = now_s() - start;
    store_get_stats(s, &st);
    assert_int_equal(store_close(s), 0);
    sqlite3_close(db);
    print_message("%.1f s: %llu drains, %llu commits, slowest second %.0f ms after its next\n",
                  wall, (unsigned long long)st.drains, (unsigned long long)st.commits, worst * 1e3);
    assert_int_equal(st.dropped, 0);
    assert_true(st.commits >= 3 && st.commits <= 5);
    assert_true(st.drains <= 4 * wall); /* it was 10 a second */
    assert_true(worst < 0.7);           /* 0.1 + 0.04 and slack; sleeping past it is 1 s */
}

/* With a queue too small for a second of records, the writer wakes as often
 * as the filling rate needs, and nothing is dropped. */
static void test_live_writer_keeps_up_with_small_queue(void **state)
{
    fixture *f = *state;
    store_config c;
    store_stats st;
    sqlite3 *db;
    store *s;

    config(&c);
    c.clock = STORE_CLOCK_WALL;
    c.queue_capacity = 4096; /* 200 processes fill it in 0.4 s */
    s = open_store(f->path, &c);
    push_live(s, NULL, 200, 150);
    store_get_stats(s, &st);
    assert_int_equal(store_close(s), 0);
    db = raw_open(f->path);
    print_message("%llu drains, high water %zu of %zu\n", (unsigned long long)st.drains,
                  st.queue_high_water, st.queue_capacity);
    assert_int_equal(st.dropped, 0);
    assert_true(st.queue_high_water < st.queue_capacity * 3 / 4);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM processes"), 200);
    sqlite3_close(db);
}

static double pid_energy(sqlite3 *db)
{
    return raw_num(db, "SELECT coalesce(sum(attributed_j), 0) FROM process_energy");
}

static uint64_t commits(store *s, uint64_t *shared)
{
    store_stats st;

    store_get_stats(s, &st);
    if (shared)
        *shared = st.flushes_shared;
    return st.commits;
}

/* store_flush_within shares a recent flush instead of committing again: what
 * it misses is only what was pushed since that flush, store_flushed_at says
 * when that was, and once max_age_ms has passed it commits again. */
static void test_flush_within_shares_recent_flush(void **state)
{
    fixture *f = *state;
    store_config c;
    uint64_t shared;
    sqlite3 *db;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    db = raw_open(f->path);
    assert_int_equal(store_flushed_at(s), 0); /* no flush yet */
    assert_int_equal(push_proc(s, T0 * NS, 100, 1, 1.0, 1.0, 0.02, 0, 0), 0);
    int64_t before = (int64_t)util_now_ns(CLOCK_REALTIME);
    assert_int_equal(store_flush_within(s, 60000), 0); /* none before: commits */
    int64_t first = store_flushed_at(s);
    assert_in_range(first, before, (int64_t)util_now_ns(CLOCK_REALTIME));
    assert_int_equal(commits(s, &shared), 1);
    assert_int_equal(shared, 0);
    assert_float_equal(pid_energy(db), 1.0, 1e-12);

    assert_int_equal(push_proc(s, T0 * NS + 20000000, 100, 1, 2.0, 2.0, 0.02, 0, 0), 0);
    sleep_ms(20);
    assert_int_equal(store_flush_within(s, 60000), 0); /* shares the first */
    assert_int_equal(store_flushed_at(s), first);      /* and says it is that old */
    assert_int_equal(commits(s, &shared), 1);
    assert_int_equal(shared, 1);
    assert_float_equal(pid_energy(db), 1.0, 1e-12); /* the new push is not seen yet */

    assert_int_equal(store_flush(s), 0); /* max_age 0: always up to date */
    assert_true(store_flushed_at(s) >= first + 20000000);
    assert_int_equal(commits(s, NULL), 2);
    assert_float_equal(pid_energy(db), 3.0, 1e-12);

    assert_int_equal(push_proc(s, T0 * NS + 40000000, 100, 1, 4.0, 4.0, 0.02, 0, 0), 0);
    sleep_ms(150);
    assert_int_equal(store_flush_within(s, 100), 0); /* the last is too old */
    assert_int_equal(commits(s, NULL), 3);
    assert_float_equal(pid_energy(db), 7.0, 1e-12);
    assert_int_equal(store_close(s), 0);
    sqlite3_close(db);
}

/* Many callers flushing with a push between each (queries under load) cost
 * about one commit per max_age_ms, not one each. */
static void test_flush_within_bounds_commits(void **state)
{
    fixture *f = *state;
    store_config c;
    uint64_t before, after, shared;
    double start, took;
    int calls = 200;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    assert_int_equal(push_proc(s, T0 * NS, 100, 1, 1.0, 1.0, 0.02, 0, 0), 0);
    assert_int_equal(store_flush(s), 0);
    before = commits(s, NULL);
    start = now_s();
    for (int k = 1; k <= calls; k++) {
        assert_int_equal(push_proc(s, T0 * NS + k * 1000000LL, 100, 1, 1.0, 1.0, 0.001, 0, 0), 0);
        assert_int_equal(store_flush_within(s, 250), 0);
        sleep_ms(5);
    }
    took = now_s() - start;
    after = commits(s, &shared);
    /* one per 250 ms, and one more for a flush that straddles the end */
    assert_true(after - before <= (uint64_t)(took / 0.25) + 2);
    assert_true(shared >= (uint64_t)calls - (after - before));
    assert_int_equal(store_close(s), 0);
}

/* With the writer asleep, a tiny queue fills: pushes return -EAGAIN at once,
 * the drops are counted, and what was accepted is still written on close. */
static void test_push_never_blocks_when_full(void **state)
{
    fixture *f = *state;
    store_config c;
    store_stats st;
    store *s;
    int accepted = 0, refused = 0;
    double slowest = 0;

    config(&c);
    c.queue_capacity = 16;
    c.drain_interval_ms = 60000;
    c.min_commit_gap_ms = 60000;
    s = open_store(f->path, &c);
    for (int k = 0; k < 1000; k++) {
        double t = now_s();
        int r;
        if (k % 2) {
            r = push_proc(s, (T0 * NS) + k, 100 + k, 1, 1.0, 1.0, 0.01, 0, 0);
        } else {
            store_proc_info i = {
                .t_ns = T0 * NS, .pid = 100 + k, .start_time = 1, .comm = "x", .uid = 0};
            r = store_push_proc_info(s, &i); /* a refused one frees its copy */
        }
        t = now_s() - t;
        slowest = t > slowest ? t : slowest;
        if (r == 0)
            accepted++;
        else if (r == -EAGAIN)
            refused++;
        else
            fail_msg("push returned %d", r);
    }
    assert_int_equal(accepted, 16);
    assert_int_equal(refused, 984);
    assert_true(slowest < 0.05);
    store_get_stats(s, &st);
    assert_int_equal(st.pushed, 16);
    assert_int_equal(st.dropped, 984);
    assert_int_equal(st.queue_high_water, 16);
    assert_int_equal(st.commits, 0);
    assert_int_equal(store_close(s), 0);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM processes"), 16);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy"), 8);
    remove_db(f->path);

    /* A calibration tick that needs 3 records is refused whole when 2 are free. */
    double rates[12] = {0};
    s = open_store(f->path, &c);
    assert_int_equal(store_push_room(s), 16); /* what a replay waits on */
    for (int k = 0; k < 14; k++)
        assert_int_equal(push_proc(s, T0 * NS, 1, 1, 1.0, 1.0, 0.01, 0, 0), 0);
    assert_int_equal(store_push_room(s), 2);
    assert_int_equal(store_push_calibration(s, T0 * NS, 0.02, 1, 0, rates, 12), -EAGAIN);
    assert_int_equal(store_push_room(s), 2);
    assert_int_equal(store_push_calibration(s, T0 * NS, 0.02, 1, 0, rates, 10), 0);
    assert_int_equal(store_push_room(s), 0);
    store_get_stats(s, &st);
    assert_int_equal(st.pushed, 16);
    assert_int_equal(st.dropped, 3);
    assert_int_equal(store_close(s), 0);
    assert_float_equal(file_num(f->path, "SELECT attributed_j FROM processes"), 14.0, 1e-12);
}

static void test_push_rejects_bad_records(void **state)
{
    fixture *f = *state;
    store_config c;
    store *s;
    double rates[300] = {0};

    config(&c);
    s = open_store(f->path, &c);
    assert_int_equal(push_proc(s, -1, 1, 1, 1, 1, 1, 0, 0), -EINVAL);
    assert_int_equal(push_proc(s, T0 * NS, 1, 1, 1, 1, 1, -1, 0), -EINVAL);
    assert_int_equal(store_push_domain(s, T0 * NS, "a-domain-name-too-long", 1, 1), -EINVAL);
    assert_int_equal(store_push_domain(s, T0 * NS, "", 1, 1), -EINVAL);
    assert_int_equal(store_push_calibration(s, T0 * NS, 0.02, 1, STORE_MAX_CLASSES, rates, 3),
                     -EINVAL);
    assert_int_equal(store_push_calibration(s, T0 * NS, 0.02, 1, 0, rates, 300), -EINVAL);
    assert_int_equal(store_push_calibration(s, T0 * NS, 0.02, 1, 0, rates, 0), -EINVAL);
    assert_int_equal(store_close(s), 0);
}

/* Everything pushed is on disk after store_close, with no wait for the
 * commit interval: the SIGTERM path. */
static void test_flush_on_close(void **state)
{
    fixture *f = *state;
    double rates[7] = {1, 2, 3, 4, 5, 6, 7};
    store_config c;
    store *s;

    config(&c);
    c.min_commit_gap_ms = 60000;
    s = open_store(f->path, &c);
    for (int k = 0; k < 20; k++) {
        int64_t t = T0 * NS + k * 20000000LL;
        assert_int_equal(push_proc(s, t, 5, 5, 0.1, 0.2, 0.02, 0, 0), 0);
        assert_int_equal(push_host(s, t, 0.02, 1.0, 0.5, 0.1), 0);
        assert_int_equal(store_push_domain(s, t, "package", 1.0, NAN), 0);
        assert_int_equal(store_push_calibration(s, t, 0.02, 0, 0, rates, 7), 0);
    }
    assert_int_equal(store_push_proc_exit(s, 5, 5, T0 * NS + 400000000LL), 0);
    assert_int_equal(store_close(s), 0);
    assert_float_equal(file_num(f->path, "SELECT sum(attributed_j) FROM process_energy"), 2.0,
                       1e-9);
    assert_int_equal(file_num(f->path, "SELECT exit_time FROM processes"), T0);
    assert_float_equal(file_num(f->path, "SELECT measured_j FROM host_energy"), 20.0, 1e-9);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM host_energy WHERE modeled_j IS NULL"),
                     1);
    /* The last (incomplete) calibration second is written on close too. */
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM calibration"), 1);
    assert_float_equal(file_num(f->path, "SELECT duration_s FROM calibration"), 0.4, 1e-9);
}

/* Pushes 6 seconds of 50 ticks of awkward values (seeded), pausing
 * `pause_us` after each tick. */
static void push_replay(store *s, int pause_us)
{
    uint64_t x = 88172645463325252ULL;

    for (int k = 0; k < 300; k++) {
        int64_t t = (T0 + k / 50) * NS + (k % 50) * 20000000LL;
        for (int p = 0; p < 3; p++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
            double v = (double)(x % 1000003) / 7919.0;
            assert_int_equal(push_proc(s, t, 10 + p, 1, v, v / 3, v / 1e3, 0, 0), 0);
        }
        assert_int_equal(push_host(s, t, 0.02, 1.0 / 3, 0.1, 0.2), 0);
        if (pause_us)
            usleep(pause_us);
    }
}

/* The same ticks give the same rows to the last bit whether the writer
 * commits often (data trickling in) or once at the end. */
static void test_rows_independent_of_commit_timing(void **state)
{
    fixture *f = *state;
    char other[160];
    store_config c;
    store *s;
    sqlite3 *a, *b;
    const char *sql[] = {
        "SELECT t, attributed_j, standalone_j, cpu_s FROM process_energy"
        " ORDER BY process_id, t",
        "SELECT pid, attributed_j, standalone_j, cpu_s, first_seen, last_seen FROM processes"
        " ORDER BY pid",
        "SELECT t, host_j, idle_j, attributed_j, unattributed_j, modeled_j, duration_s"
        " FROM host_attribution ORDER BY t",
    };

    config(&c);
    c.drain_interval_ms = 1;
    c.min_commit_gap_ms = 1;
    s = open_store(f->path, &c);
    push_replay(s, 1000);
    assert_int_equal(store_close(s), 0);

    snprintf(other, sizeof(other), "%s/other.db", f->dir);
    config(&c);
    c.min_commit_gap_ms = 60000;
    s = open_store(other, &c);
    push_replay(s, 0);
    assert_int_equal(store_close(s), 0);

    a = raw_open(f->path);
    b = raw_open(other);
    for (size_t q = 0; q < sizeof(sql) / sizeof(sql[0]); q++) {
        sqlite3_stmt *sa, *sb;
        int rows = 0;
        assert_int_equal(sqlite3_prepare_v2(a, sql[q], -1, &sa, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_prepare_v2(b, sql[q], -1, &sb, NULL), SQLITE_OK);
        for (;;) {
            int ra = sqlite3_step(sa), rb = sqlite3_step(sb);
            assert_int_equal(ra, rb);
            if (ra != SQLITE_ROW)
                break;
            rows++;
            for (int col = 0; col < sqlite3_column_count(sa); col++) {
                double va = sqlite3_column_double(sa, col), vb = sqlite3_column_double(sb, col);
                if (memcmp(&va, &vb, sizeof(va)) != 0)
                    fail_msg("%s: row %d column %d: %.17g != %.17g", sql[q], rows, col, va, vb);
            }
        }
        assert_true(rows >= 3);
        sqlite3_finalize(sa);
        sqlite3_finalize(sb);
    }
    sqlite3_close(a);
    sqlite3_close(b);
    remove_db(other);
}

/* ---- Rollups and retention --------------------------------------------------- */

static void test_rollup_and_retention(void **state)
{
    fixture *f = *state;
    int64_t now = T0 + 100 * 86400 + 40; /* T0 is minute + 20 */
    int64_t day_old = now - 86400 - 600; /* rolled up */
    int64_t ancient = now - 91 * 86400;  /* deleted */
    double rates[2] = {1, 2};
    store_config c;
    store *s;
    sqlite3 *db;

    config(&c);
    c.rollup_chunk_s = 60;
    s = open_store(f->path, &c);
    /* 130 seconds a day ago: 2 J/s; 10 seconds 91 days ago; 5 seconds now. */
    for (int64_t t = day_old; t < day_old + 130; t++) {
        assert_int_equal(push_proc(s, t * NS, 10, 1, 2.0, 3.0, 1.0, t % 2, 7), 0);
        assert_int_equal(push_host(s, t * NS, 1.0, 5.0, 1.0, 2.0), 0);
        assert_int_equal(store_push_domain(s, t * NS, "package", 5.0, 4.0), 0);
    }
    for (int64_t t = ancient; t < ancient + 10; t++) {
        assert_int_equal(push_proc(s, t * NS, 20, 2, 1.0, 1.0, 1.0, 0, 7), 0);
        assert_int_equal(push_host(s, t * NS, 1.0, 5.0, 1.0, 2.0), 0);
        assert_int_equal(store_push_calibration(s, t * NS, 1.0, 7, 0, rates, 2), 0);
    }
    for (int64_t t = now - 5; t < now; t++) {
        assert_int_equal(push_proc(s, t * NS, 10, 1, 2.0, 3.0, 1.0, 0, 7), 0);
        assert_int_equal(push_host(s, t * NS, 1.0, 5.0, 1.0, 2.0), 0);
        assert_int_equal(store_push_calibration(s, t * NS, 1.0, 7, 0, rates, 2), 0);
    }
    assert_int_equal(store_flush(s), 0);
    db = raw_open(f->path);
    /* 260 J a day ago, 10 J 91 days ago, 10 J now */
    assert_float_equal(raw_num(db, "SELECT sum(attributed_j) FROM process_energy"), 280.0, 1e-9);
    /* 10 ancient + 4 recent: the newest second is not known complete */
    assert_int_equal(raw_num(db, "SELECT count(*) FROM calibration"), 14);

    /* One minute per step: the ancient seconds go, then the day-old ones
     * a minute at a time, each step leaving the rest for the next. */
    int steps = 0, step;
    while ((step = store_maintain(s, now)) == 1) {
        if (++steps == 2) {
            assert_true(raw_num(db, "SELECT count(*) FROM process_energy_minute") >= 1);
            assert_true(raw_num(db, "SELECT count(*) FROM process_energy") > 5);
            assert_float_equal(raw_num(db, "SELECT (SELECT sum(attributed_j) FROM process_energy)"
                                           " + (SELECT sum(attributed_j) FROM"
                                           " process_energy_minute)"),
                               270.0, 1e-9);
        }
        assert_true(steps < 10);
    }
    assert_int_equal(step, 0);
    assert_true(steps >= 3);
    /* Seconds a day old are minute rows now; the energy is the same. */
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy"), 5);
    assert_float_equal(raw_num(db, "SELECT sum(attributed_j) FROM process_energy_minute"), 260.0,
                       1e-9);
    assert_float_equal(raw_num(db, "SELECT sum(seconds) FROM process_energy_minute"), 130, 0);
    /* day_old is minute-aligned + 20 s: 40 + 60 + 30 seconds in 3 minutes */
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy_minute"), 3);
    assert_int_equal(raw_num(db, "SELECT max(seconds) FROM process_energy_minute"), 60);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy_minute WHERE t % 60 != 0"),
                     0);
    /* Class and model of a minute are its last second's. */
    assert_int_equal(raw_num(db, "SELECT model_id FROM process_energy_minute LIMIT 1"), 7);
    assert_float_equal(raw_num(db, "SELECT sum(host_j) FROM host_attribution_minute"), 650.0, 1e-9);
    assert_float_equal(raw_num(db, "SELECT sum(duration_s) FROM host_attribution_minute"), 130.0,
                       1e-9);
    assert_float_equal(raw_num(db, "SELECT sum(modeled_j) FROM host_energy_minute"), 520.0, 1e-9);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM host_energy"), 0);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM host_attribution"), 5);
    /* 91 days is past every retention: its rows, calibration and process are gone. */
    assert_int_equal(raw_num(db, "SELECT count(*) FROM processes WHERE pid = 20"), 0);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM processes WHERE pid = 10"), 1);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM calibration"), 4);

    /* Queries read both levels: the window total is unchanged. */
    char err[UTIL_ERRLEN];
    store_reader *r = reader(f);
    store_process_query q = {.since = day_old - 60, .until = now, .uid = -1};
    store_process *p;
    size_t n;
    assert_int_equal(store_list_processes(r, &q, &p, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 1);
    assert_float_equal(p[0].attributed_j, 270.0, 1e-9);
    store_processes_free(p, n);
    store_reader_close(r);

    /* Running it again changes nothing. */
    assert_int_equal(store_maintain(s, now), 0);
    assert_float_equal(raw_num(db, "SELECT sum(attributed_j) FROM process_energy_minute"), 260.0,
                       1e-9);
    assert_int_equal(store_maintain(s, 0), -EINVAL);
    sqlite3_close(db);
    assert_int_equal(store_close(s), 0);
}

/* The writer's own periodic maintenance, on the data clock: a replay of
 * old data keeps its rows relative to its own newest second. */
static void test_periodic_maintenance_data_clock(void **state)
{
    fixture *f = *state;
    store_config c;
    store_stats st;
    store *s;

    config(&c);
    c.maintain_interval_s = 1;
    s = open_store(f->path, &c);
    push_many_at(s, T0, 1, 3);
    push_many_at(s, T0 + 2 * 86400, 1, 3);
    assert_int_equal(store_flush(s), 0);
    for (int i = 0; i < 300; i++) {
        store_get_stats(s, &st);
        if (st.maintenance_runs > 0)
            break;
        sleep_ms(10);
    }
    assert_true(st.maintenance_runs > 0);
    assert_int_equal(store_close(s), 0);
    /* T0's seconds are two days older than the newest: rolled up. */
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy"), 3);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy_minute"), 3);
    assert_int_equal(file_num(f->path, "SELECT min(t) FROM process_energy"), T0 + 2 * 86400);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_schema_created, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_calibration, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrates_v1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_schema_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_config_and_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_writer_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_one_transaction_per_second, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flush_within_shares_recent_flush, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flush_within_bounds_commits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_never_blocks_when_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_rejects_bad_records, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flush_on_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rows_independent_of_commit_timing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rollup_and_retention, setup, teardown),
        cmocka_unit_test_setup_teardown(test_periodic_maintenance_data_clock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_live_writer_wakes_per_second, setup, teardown),
        cmocka_unit_test_setup_teardown(test_live_writer_keeps_up_with_small_queue, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
