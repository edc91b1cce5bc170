/* Unit tests for the packed recent rows of lib/store (schema version 10,
 * packed.c, packed_chunks.c, packed_rows.c): each second's rows as chunks
 * of process_energy_packed that fit a page, read back through the virtual table
 * process_energy_recent bit for bit; a second a flush wrote in progress rewritten whole with its
 * later ticks; the constraints the virtual table takes; a process's range of seconds; records too
 * wide for the narrow format; changes by hand; a damaged row reported; the migration from version 9
 * with every query answering the same; and the loadable extension for the sqlite3 shell. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store-fixture.h"

/* Doubles whose sums round: bit-exact reads are checked on them. */
static double energy(int pid, int64_t t)
{
    return 0.1 * pid + 1.0 / (double)(t - T0 + 3) + 1e-300 * (pid % 2);
}

static bool same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof(a)) == 0;
}

static double row_value(sqlite3 *db, const char *col, int64_t t, int64_t pid, bool *found)
{
    char sql[200];
    sqlite3_stmt *st;
    double v = NAN;

    snprintf(sql, sizeof(sql),
             "SELECT %s FROM process_energy_recent WHERE t = %lld AND process_id = %lld", col,
             (long long)t, (long long)pid);
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    *found = sqlite3_step(st) == SQLITE_ROW;
    if (*found)
        v = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* The second of a chunk's key, in SQL. */
#define KEY_T "((k >> 32) + 2147483648)"

/* Each second is a few chunks, 30 bytes a process, none longer than a
 * leaf cell holds (no overflow page); every value reads back bit for bit,
 * class and model (NULL for none) as pushed. */
static void test_rows_read_back_bit_for_bit(void **state)
{
    fixture *f = *state;
    store_config c;
    sqlite3 *db;
    store *s;
    bool found;
    int per;

    config(&c);
    s = open_store(f->path, &c);
    for (int64_t t = T0; t < T0 + 5; t++)
        for (int pid = 1; pid <= 40; pid++)
            assert_int_equal(push_proc(s, t * NS, pid, 1, energy(pid, t), 2 * energy(pid, t),
                                       energy(pid, t) / 7, pid % 3, pid % 2 ? 0 : 7),
                             0);
    assert_int_equal(push_proc(s, (T0 + 5) * NS, 1, 1, 1, 1, 1, 0, 0), 0);
    assert_int_equal(store_flush(s), 0);
    db = raw_open(f->path);
    /* 40 processes: two chunks a second with 1 KiB pages */
    per = (int)((raw_num(db, "PRAGMA page_size") - 35 - 4 - 1) / 30);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy_packed"),
                     5 * ((40 + per - 1) / per) + 1);
    assert_int_equal(raw_num(db, "SELECT max(length(rows)) FROM process_energy_packed"),
                     1 + (per < 40 ? per : 40) * 30);
    assert_int_equal(raw_num(db, "SELECT sum(length(rows) - 1) FROM process_energy_packed"
                                 " WHERE " KEY_T " = 1700000000"),
                     40 * 30);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM dbstat WHERE name = 'process_energy_packed'"
                                 " AND pagetype = 'overflow'"),
                     0);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy_recent"), 201);
    for (int64_t t = T0; t < T0 + 5; t++)
        for (int pid = 1; pid <= 40; pid++) {
            char q[80];
            snprintf(q, sizeof(q), "SELECT id FROM processes WHERE pid = %d", pid);
            int64_t id = (int64_t)raw_num(db, q);
            double a = row_value(db, "attributed_j", t, id, &found);
            assert_true(found);
            assert_true(same_bits(a, energy(pid, t)));
            assert_true(
                same_bits(row_value(db, "standalone_j", t, id, &found), 2 * energy(pid, t)));
            assert_true(same_bits(row_value(db, "cpu_s", t, id, &found), energy(pid, t) / 7));
            assert_int_equal(row_value(db, "class", t, id, &found), pid % 3);
        }
    /* a process's seconds in one cursor: the chunk of the second before
     * read first, by its key; the same as a filter of all rows */
    for (int id = 1; id <= 41; id++) {
        char q[400];
        snprintf(q, sizeof(q),
                 "SELECT (SELECT count(*) || ',' || total(attributed_j) || ',' || total(t)"
                 " FROM process_energy_recent WHERE process_id = %d) = (SELECT count(*) || ','"
                 " || total(attributed_j) || ',' || total(t) FROM (SELECT * FROM"
                 " process_energy_recent LIMIT -1) WHERE process_id = %d)",
                 id, id);
        if (raw_num(db, q) != 1)
            fail_msg("process %d: its seek reads other rows than a filter", id);
    }
    assert_int_equal(
        raw_num(db, "SELECT count(*) FROM process_energy_recent WHERE process_id = 35"), 5);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy_recent"
                                 " WHERE model_id IS NULL"),
                     101);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy_recent"
                                 " WHERE model_id = 7"),
                     100);
    sqlite3_close(db);
    assert_int_equal(store_close(s), 0);
}

/* A flush writes the second in progress; its later ticks are added to the
 * stored row (old + new, as the per-process upsert did), and processes new
 * in it join the same row. */
static void test_second_in_progress_rewritten_whole(void **state)
{
    fixture *f = *state;
    double a1 = 0.1, a2 = 0.2, a3 = 0.7;
    store_config c;
    sqlite3 *db;
    store *s;
    bool found;

    config(&c);
    s = open_store(f->path, &c);
    assert_int_equal(push_proc(s, T0 * NS, 1, 1, a1, a1, a1, 0, 0), 0);
    assert_int_equal(push_proc(s, T0 * NS, 2, 1, 5.0, 5.0, 0.5, 1, 0), 0);
    assert_int_equal(store_flush(s), 0);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy_recent"), 2);
    assert_int_equal(push_proc(s, T0 * NS + NS / 2, 1, 1, a2, a2, a2, 2, 0), 0);
    assert_int_equal(push_proc(s, T0 * NS + NS / 2, 1, 1, a3, a3, a3, 2, 0), 0);
    assert_int_equal(push_proc(s, T0 * NS + NS / 2, 3, 1, 1.0, 1.0, 0.1, 1, 0), 0);
    assert_int_equal(push_proc(s, (T0 + 1) * NS, 1, 1, 1.0, 1.0, 0.1, 0, 0), 0);
    assert_int_equal(store_flush(s), 0);
    db = raw_open(f->path);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy_packed"), 2);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy_recent WHERE t = 1700000000"),
                     3);
    assert_true(same_bits(row_value(db, "attributed_j", T0, 1, &found), a1 + (a2 + a3)));
    assert_int_equal(row_value(db, "class", T0, 1, &found), 2);
    assert_float_equal(row_value(db, "attributed_j", T0, 2, &found), 5.0, 0);
    assert_int_equal(row_value(db, "class", T0, 2, &found), 1);
    row_value(db, "attributed_j", T0, 3, &found);
    assert_true(found);
    sqlite3_close(db);
    assert_int_equal(store_close(s), 0);
    /* the totals count the whole second once */
    assert_true(same_bits(file_num(f->path, "SELECT attributed_j FROM processes WHERE pid = 1"),
                          a1 + (a2 + a3) + 1.0));
}

/* What each constraint selects equals a filter of all rows; t and
 * process_id are taken by the virtual table. */
static void test_constraints_select_as_a_filter(void **state)
{
    fixture *f = *state;
    const char *conds[] = {
        "t = 1700000003",
        "t > 1700000003",
        "t >= 1700000003",
        "t < 1700000003",
        "t <= 1700000003",
        "t > 1700000002.5 AND t < 1700000006.5",
        "t >= 1700000002.5 AND t <= 1700000006.5",
        "t = 1700000003.5",
        "t = '1700000004'",
        "t = NULL",
        "t > 9223372036854775807",
        "t < -9223372036854775808",
        "process_id = 7",
        "process_id = 7.0",
        "process_id = 7 AND process_id = 8",
        "process_id = 7 AND t >= 1700000004",
        "process_id = 99",
        "t = 1700000001 AND process_id = 3",
        "t > 1e30",
        "process_id = 33",
        "process_id = 64 AND t <= 1700000004",
        "t = 1700000002 AND process_id = 65",
        "t = 1700000003 AND process_id = 80",
        "process_id = 1 AND t > 1700000001 AND t < 1700000006",
        "t = 4294967296",
        "t = -1",
    };
    char sql[600], plan[200] = "";
    store_config c;
    sqlite3_stmt *st;
    sqlite3 *db;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    for (int64_t t = T0; t < T0 + 8; t++)
        for (int pid = 1 + (t % 2); pid <= 80; pid++)
            assert_int_equal(push_proc(s, t * NS, pid, 1, 1.0, 1.0, 0.1, 0, 0), 0);
    assert_int_equal(store_close(s), 0);
    db = raw_open(f->path);
    assert_true(raw_num(db, "SELECT count(*) FROM process_energy_recent") > 600);
    assert_true(raw_num(db, "SELECT count(*) FROM process_energy_packed") >= 8 * 3);
    for (size_t i = 0; i < sizeof(conds) / sizeof(conds[0]); i++) {
        snprintf(sql, sizeof(sql),
                 "SELECT (SELECT count(*) || ',' || total(t * 1000 + process_id)"
                 " FROM process_energy_recent WHERE %s) = (SELECT count(*) || ',' ||"
                 " total(t * 1000 + process_id) FROM (SELECT * FROM process_energy_recent"
                 " LIMIT -1) WHERE %s)",
                 conds[i], conds[i]);
        if (raw_num(db, sql) != 1)
            fail_msg("%s selects other rows than a filter does", conds[i]);
    }
    /* in (t, process_id) order, and backwards by t */
    assert_int_equal(raw_num(db, "SELECT count(*) FROM (SELECT t, process_id, lag(t) OVER () AS"
                                 " pt, lag(process_id) OVER () AS pp FROM process_energy_recent)"
                                 " WHERE pt > t OR (pt = t AND pp >= process_id)"),
                     0);
    assert_int_equal(raw_num(db, "SELECT t FROM process_energy_recent ORDER BY t DESC LIMIT 1"),
                     T0 + 7);
    /* a process's seconds, backwards, are those of a filter */
    assert_int_equal(raw_num(db, "SELECT (SELECT group_concat(t) FROM (SELECT t FROM"
                                 " process_energy_recent WHERE process_id = 40 ORDER BY t DESC))"
                                 " = (SELECT group_concat(t) FROM (SELECT t FROM (SELECT * FROM"
                                 " process_energy_recent LIMIT -1) WHERE process_id = 40"
                                 " ORDER BY t DESC))"),
                     1);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy_recent"
                                 " WHERE process_id = 40 AND t <= 1700000005 ORDER BY t DESC"),
                     6);
    assert_int_equal(raw_num(db, "SELECT max(t) - min(t) FROM process_energy_recent"), 7);
    /* a seek for one process in one second uses both */
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "EXPLAIN QUERY PLAN SELECT * FROM process_energy_recent"
                                        " WHERE t = ?1 AND process_id = ?2",
                                        -1, &st, NULL),
                     SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW)
        snprintf(plan, sizeof(plan), "%s", (const char *)sqlite3_column_text(st, 3));
    sqlite3_finalize(st);
    assert_non_null(strstr(plan, "VIRTUAL TABLE INDEX 0:"));
    assert_true(strstr(plan, ":ep") || strstr(plan, ":pe"));
    sqlite3_close(db);
}

/* A process's rows over a range of seconds, read second after second from
 * the chunk it was in, are those of a filter: across seconds without rows,
 * seconds it did not run in, and chunks whose first ids move as processes
 * before it come and go. */
static void test_process_range_across_gaps(void **state)
{
    fixture *f = *state;
    const int pids[] = {1, 7, 31, 33, 50, 64, 95, 100, 150, 200};
    const char *ranges[] = {
        "1",
        "t > 1700000000 AND t <= 1700000009",
        "t >= 1700000002 AND t < 1700000008",
        "t >= 1700000005",
        "t <= 1700000003",
    };
    char sql[900];
    store_config c;
    sqlite3 *db;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    /* the processes' ids, in the order they were first seen (pid 150: none) */
#define ID "(SELECT id FROM processes WHERE pid = %d)"
    for (int64_t t = T0; t < T0 + 12; t++) {
        if (t == T0 + 3 || t == T0 + 4)
            continue; /* seconds without rows */
        for (int pid = 1; pid <= 200; pid++) {
            bool runs = pid <= 100 || (pid == 200 && t == T0 + 10);
            if ((pid == 50 && t == T0 + 6) || (pid % 7 == 0 && t >= T0 + 8) ||
                (pid > 90 && pid <= 100 && t < T0 + 2))
                runs = false;
            if (runs)
                assert_int_equal(push_proc(s, t * NS, pid, 1, energy(pid, t), 1.0, 0.1, 0, 0), 0);
        }
    }
    assert_int_equal(store_close(s), 0);
    db = raw_open(f->path);
    assert_int_equal(raw_num(db, "SELECT count(DISTINCT t) FROM process_energy_recent"), 10);
    for (size_t i = 0; i < sizeof(pids) / sizeof(pids[0]); i++)
        for (size_t j = 0; j < sizeof(ranges) / sizeof(ranges[0]); j++) {
            snprintf(sql, sizeof(sql),
                     "SELECT (SELECT count(*) || ',' || total(t * 1000 + process_id) || ',' ||"
                     " total(attributed_j) FROM process_energy_recent WHERE process_id = " ID
                     " AND %s) = (SELECT count(*) || ',' || total(t * 1000 + process_id) || ','"
                     " || total(attributed_j) FROM (SELECT * FROM process_energy_recent"
                     " LIMIT -1) WHERE process_id = " ID " AND %s)",
                     pids[i], ranges[j], pids[i], ranges[j]);
            if (raw_num(db, sql) != 1)
                fail_msg("process %d, %s: other rows than a filter's", pids[i], ranges[j]);
        }
#undef ID
    /* the process that missed a second, and the one that came late */
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy_recent"
                                 " WHERE process_id = (SELECT id FROM processes WHERE pid = 50)"),
                     9);
    assert_int_equal(raw_num(db, "SELECT t FROM process_energy_recent"
                                 " WHERE process_id = (SELECT id FROM processes WHERE pid = 200)"),
                     T0 + 10);
    sqlite3_close(db);
}

/* Ids past 32 bits and classes or models past 254 take the wide format,
 * read back as written; rows change by hand (insert, update, delete) as in
 * a table, but for those past the rowid's range, and a second left
 * without rows loses its row. */
static void test_wide_rows_and_changes_by_hand(void **state)
{
    fixture *f = *state;
    store_config c;
    sqlite3 *db;
    bool found;

    config(&c);
    assert_int_equal(store_close(open_store(f->path, &c)), 0);
    db = raw_open(f->path);
    raw_exec(db, "INSERT INTO process_energy_recent VALUES (1700000000, 5, 1.5, 2.5, 0.25, 1, 7),"
                 " (1700000000, 3, 0.5, 0.5, 0.5, NULL, NULL), (1700000001, 4, 1, 1, 1, 0, 0)");
    assert_int_equal(raw_num(db, "SELECT sum(length(rows)) FROM process_energy_packed"
                                 " WHERE " KEY_T " = 1700000000"),
                     1 + 2 * 30);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy_recent"
                                 " WHERE t = 1700000000 AND class IS NULL AND model_id IS NULL"),
                     1);
    raw_exec(db, "INSERT INTO process_energy_recent VALUES"
                 " (1700000000, 1099511627776, -0.0, 1e308, 5e-324, -2, 300)");
    assert_int_equal(raw_num(db, "SELECT sum(length(rows)) FROM process_energy_packed"
                                 " WHERE " KEY_T " = 1700000000"),
                     1 + 3 * 49);
    assert_true(same_bits(row_value(db, "attributed_j", T0, 1099511627776LL, &found), -0.0));
    assert_true(same_bits(row_value(db, "cpu_s", T0, 1099511627776LL, &found), 5e-324));
    assert_int_equal(row_value(db, "class", T0, 1099511627776LL, &found), -2);
    assert_int_equal(row_value(db, "model_id", T0, 1099511627776LL, &found), 300);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy_recent WHERE t = 1700000000"
                                 " AND class IS NULL AND model_id IS NULL AND process_id = 3"),
                     1);
    /* a row changed by hand is found by t << 32 | process_id */
    assert_int_not_equal(sqlite3_exec(db,
                                      "DELETE FROM process_energy_recent"
                                      " WHERE process_id = 1099511627776",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
    assert_non_null(strstr(sqlite3_errmsg(db), "process 1099511627776: beyond the range of rows"
                                               " that can be changed by hand"));
    raw_exec(db, "DELETE FROM process_energy_packed WHERE " KEY_T " = 1700000000;"
                 "INSERT INTO process_energy_recent VALUES (1700000000, 5, 1.5, 2.5, 0.25, 1, 7),"
                 " (1700000000, 3, 0.5, 0.5, 0.5, NULL, NULL)");
    assert_int_equal(raw_num(db, "SELECT sum(length(rows)) FROM process_energy_packed"
                                 " WHERE " KEY_T " = 1700000000"),
                     1 + 2 * 30);
    raw_exec(db, "UPDATE process_energy_recent SET process_id = process_id + 100,"
                 " attributed_j = attributed_j * 2");
    assert_float_equal(raw_num(db, "SELECT attributed_j FROM process_energy_recent"
                                   " WHERE process_id = 105"),
                       3.0, 0);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy_recent"
                                 " WHERE process_id IN (103, 104, 105)"),
                     3);
    /* a process's rows changed by a seek of it, over two seconds */
    raw_exec(db, "INSERT INTO process_energy_recent VALUES (1700000001, 105, 1, 1, 1, 0, 0)");
    raw_exec(db, "UPDATE process_energy_recent SET cpu_s = cpu_s + 10 WHERE process_id = 105");
    assert_float_equal(raw_num(db, "SELECT total(cpu_s) FROM process_energy_recent"
                                   " WHERE process_id = 105"),
                       0.25 + 1 + 20, 0);
    raw_exec(db, "DELETE FROM process_energy_recent WHERE process_id = 105 AND t = 1700000001");
    raw_exec(db, "DELETE FROM process_energy_recent WHERE t = 1700000001");
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy_packed"), 1);
    /* a second row of one process in one second is refused, named */
    assert_int_not_equal(sqlite3_exec(db,
                                      "INSERT INTO process_energy_recent VALUES"
                                      " (1700000000, 105, 1, 1, 1, 0, 0)",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
    assert_non_null(strstr(sqlite3_errmsg(db), "second 1700000000 already has a row of process"));
    assert_int_not_equal(sqlite3_exec(db,
                                      "INSERT INTO process_energy_recent VALUES"
                                      " (1700000000, 'x', 1, 1, 1, 0, 0)",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
    assert_non_null(strstr(sqlite3_errmsg(db), "t and process_id must be integers"));
    /* the seconds a key holds: 0 .. 2^32 - 1 */
    raw_exec(db, "INSERT INTO process_energy_recent VALUES (0, 1, 1, 1, 1, 0, 0),"
                 " (4294967295, 2, 2, 2, 2, 0, 0)");
    assert_int_equal(raw_num(db, "SELECT process_id FROM process_energy_recent WHERE t = 0"), 1);
    assert_int_equal(raw_num(db, "SELECT process_id FROM process_energy_recent"
                                 " WHERE t = 4294967295 AND process_id = 2"),
                     2);
    assert_int_equal(raw_num(db, "SELECT min(t) || ',' || max(t) = '0,4294967295'"
                                 " FROM process_energy_recent"),
                     1);
    assert_int_not_equal(sqlite3_exec(db,
                                      "INSERT INTO process_energy_recent VALUES"
                                      " (4294967296, 1, 1, 1, 1, 0, 0)",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
    assert_non_null(strstr(sqlite3_errmsg(db), "second 4294967296 is outside 0..4294967295"));
    sqlite3_close(db);
}

/* Ids that do not fit a chunk key's 32 bits (from 2^32 - 1 on, and below
 * 0) are never split across chunks: they gather in the second's last (or
 * first) chunk, which overflows onto further pages when they are many,
 * and each is still found by one seek; the narrow ones keep their
 * page-sized chunks. */
static void test_ids_past_32_bits_gather(void **state)
{
    fixture *f = *state;
    store_config c;
    sqlite3 *db;
    char sql[200];

    config(&c);
    assert_int_equal(store_close(open_store(f->path, &c)), 0);
    db = raw_open(f->path);
    raw_exec(db, "BEGIN");
    for (int i = 0; i < 40; i++) {
        snprintf(sql, sizeof(sql),
                 "INSERT INTO process_energy_recent VALUES (1700000000, %lld, %d, 1, 1, 0, 0),"
                 " (1700000000, %d, %d, 1, 1, 0, 0), (1700000000, %d, %d, 1, 1, 0, 0)",
                 4294967295LL + 3 * i, i, 100 + i, i, -1 - i, i);
        raw_exec(db, sql);
    }
    raw_exec(db, "COMMIT");
    /* one chunk for all ids from 2^32 - 1 on, one for those below 0 */
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy_packed"
                                 " WHERE k & 4294967295 = 4294967295"),
                     1);
    assert_int_equal(raw_num(db, "SELECT length(rows) FROM process_energy_packed"
                                 " WHERE k & 4294967295 = 4294967295"),
                     1 + 40 * 49);
    assert_int_equal(raw_num(db, "SELECT length(rows) FROM process_energy_packed"
                                 " WHERE k & 4294967295 = 0"),
                     1 + 40 * 49);
    assert_true(raw_num(db, "SELECT count(*) FROM process_energy_packed") >= 4);
    for (int i = 0; i < 40; i++) {
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM process_energy_recent WHERE t = 1700000000 AND"
                 " attributed_j = %d AND process_id IN (%lld, %d, %d)",
                 i, 4294967295LL + 3 * i, 100 + i, -1 - i);
        assert_int_equal(raw_num(db, sql), 3);
    }
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy_recent"
                                 " WHERE t = 1700000000 AND process_id = 4294967296"),
                     0);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM (SELECT process_id, lag(process_id) OVER ()"
                                 " AS pp FROM process_energy_recent) WHERE pp >= process_id"),
                     0);
    sqlite3_close(db);
}

/* A row that is no packed blob fails the read with the second named. */
static void test_damaged_row_named(void **state)
{
    fixture *f = *state;
    store_config c;
    sqlite3 *db;
    sqlite3_stmt *st;

    config(&c);
    assert_int_equal(store_close(open_store(f->path, &c)), 0);
    db = raw_open(f->path);
    raw_exec(db, "INSERT INTO process_energy_packed VALUES ((1700000000 - 2147483648) << 32,"
                 " x'0102')");
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT * FROM process_energy_recent", -1, &st, NULL),
                     SQLITE_OK);
    assert_int_not_equal(sqlite3_step(st), SQLITE_ROW);
    sqlite3_finalize(st);
    assert_non_null(
        strstr(sqlite3_errmsg(db), "a chunk of second 1700000000 is not a packed blob"));
    /* and so does a process's seek */
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT * FROM process_energy_recent WHERE process_id = 1",
                                        -1, &st, NULL),
                     SQLITE_OK);
    assert_int_not_equal(sqlite3_step(st), SQLITE_ROW);
    sqlite3_finalize(st);
    assert_non_null(
        strstr(sqlite3_errmsg(db), "a chunk of second 1700000000 is not a packed blob"));
    sqlite3_close(db);
}

/* ---- The migration from version 9 ---------------------------------------------- */

/* Appends to *out what the readers answer about the file, doubles as
 * their bits (%a). */
static void digest_add(char **out, size_t *len, const char *fmt, ...)
{
    char line[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    *out = realloc(*out, *len + strlen(line) + 1);
    assert_non_null(*out);
    memcpy(*out + *len, line, strlen(line) + 1);
    *len += strlen(line);
}

static char *digest(const char *path)
{
    store_process_query pq = {.since = T0 - 200000, .until = T0 + 100, .uid = -1};
    store_job_query jq = {.since = T0 - 200000, .until = T0 + 100, .uid = -1};
    char err[UTIL_ERRLEN], *out = NULL;
    size_t len = 0, n = 0;
    store_process *p = NULL;
    store_reader *r;
    store_job *j = NULL;

    assert_int_equal(store_reader_open(path, &r, err, sizeof(err)), 0);
    assert_int_equal(store_list_processes(r, &pq, &p, &n, err, sizeof(err)), 0);
    assert_true(n >= 2);
    for (size_t i = 0; i < n; i++) {
        store_process one;
        store_second *series = NULL;
        store_class_change *cls = NULL;
        size_t ns = 0, nc = 0;

        digest_add(&out, &len, "ps %lld %d %a %a %a %a %a %lld %lld %d\n", (long long)p[i].id,
                   p[i].pid, p[i].attributed_j, p[i].cpu_s, p[i].power_w, p[i].total_attributed_j,
                   p[i].total_cpu_s, (long long)p[i].seconds, (long long)p[i].last_seen,
                   p[i].klass);
        assert_int_equal(store_get_process(r, p[i].pid, p[i].start_time, 60, &one, &series, &ns,
                                           err, sizeof(err)),
                         0);
        digest_add(&out, &len, "show %a %a %lld\n", one.total_attributed_j, one.total_cpu_s,
                   (long long)one.last_seen);
        for (size_t k = 0; k < ns; k++)
            digest_add(&out, &len, " %lld %a %a %a %d %d\n", (long long)series[k].t,
                       series[k].attributed_j, series[k].standalone_j, series[k].cpu_s,
                       series[k].klass, series[k].model_id);
        store_process_free(&one);
        free(series);
        assert_int_equal(store_process_classes(r, p[i].id, &cls, &nc, err, sizeof(err)), 0);
        for (size_t k = 0; k < nc; k++)
            digest_add(&out, &len, " class %lld %d\n", (long long)cls[k].t, cls[k].klass);
        free(cls);
        for (int by = 0; by < 2; by++) {
            store_history_query hq = {.by = by ? STORE_HISTORY_UID : STORE_HISTORY_PID,
                                      .pid = p[i].pid,
                                      .uid = 1000,
                                      .since = T0 - 200000,
                                      .until = T0 + 100,
                                      .step = by ? 60 : 7};
            store_point *pt = NULL;
            size_t np = 0;
            assert_int_equal(store_history(r, &hq, &pt, &np, err, sizeof(err)), 0);
            for (size_t k = 0; k < np; k++)
                digest_add(&out, &len, " history %d %lld %a %a %a\n", by, (long long)pt[k].t,
                           pt[k].attributed_j, pt[k].standalone_j, pt[k].cpu_s);
            free(pt);
        }
    }
    store_processes_free(p, n);
    assert_int_equal(store_list_jobs(r, &jq, &j, &n, err, sizeof(err)), 0);
    for (size_t i = 0; i < n; i++)
        digest_add(&out, &len, "job %s %a %a %lld\n", j[i].job, j[i].energy_j, j[i].cpu_s,
                   (long long)j[i].processes);
    store_jobs_free(j, n);
    store_reader_close(r);
    return out;
}

/* Rows for the tables a short run leaves empty, and recent rows of every
 * kind (a NULL class and model, a wide id), written by hand. */
#define V10_ROWS                                                                                   \
    STORE_ROWS_OF_V7                                                                               \
    "INSERT INTO node_event_calibration VALUES ('package', 1699800000, 'ab12', '[\"a\"]',"         \
    " '[1.5]', '[0.1]', 1.0, 0.5, 4.5, 0.1, 300);"                                                 \
    "INSERT INTO process_energy_recent VALUES (1700000013, 1, 0.3, 0.1, 0.01, NULL, NULL),"        \
    " (1700000013, 4294967296, 1, 1, 1, 0, 0);"

/* A version 9 file with rows in the recent table and in every other one
 * migrates to packed rows in one step: every table reads as before (the
 * recent rows through the virtual table), the packed rows are those the
 * writer would have written, bit for bit, and every query answers the
 * same. */
static void test_migrates_v9_packed_recent(void **state)
{
    fixture *f = *state;
    char ref[PATH_MAX + 8], old[PATH_MAX + 8], sql[PATH_MAX + 64];
    char *before, *after;
    store_config c;
    sqlite3 *db;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    push_info(s, T0 * NS, 1, 1, "kept", 1000);
    push_info(s, T0 * NS, 2, 1, "other", 1000);
    for (int64_t t = T0; t < T0 + 12; t++) {
        assert_int_equal(push_proc(s, t * NS, 1, 1, energy(1, t), 2.0, 0.5, t % 2, 0), 0);
        assert_int_equal(push_proc(s, t * NS, 2, 1, energy(2, t), 1.0, 0.25, 1, 7), 0);
        assert_int_equal(push_host(s, t * NS, 1.0, 3.0, 1.0, 1.5), 0);
        assert_int_equal(store_push_domain(s, t * NS, "package", 2.5, 2.75), 0);
    }
    assert_int_equal(store_close(s), 0);
    db = raw_open(f->path);
    raw_exec(db, V10_ROWS);
    snprintf(ref, sizeof(ref), "%s.v10", f->path);
    snprintf(old, sizeof(old), "%s.v9", f->path);
    unlink(ref);
    unlink(old);
    snprintf(sql, sizeof(sql), "%s-settled", ref);
    unlink(sql);
    snprintf(sql, sizeof(sql), "VACUUM INTO '%s'", ref);
    raw_exec(db, sql);
    snprintf(sql, sizeof(sql), "VACUUM settled INTO '%s-settled'", ref);
    raw_exec(db, sql);
    raw_exec(db, STORE_AS_V9 "PRAGMA user_version = 9;");
    assert_int_equal(raw_num(db, "SELECT count(*) FROM sqlite_master"
                                 " WHERE name = 'process_energy_recent' AND type = 'table'"),
                     1);
    assert_true(raw_num(db, "SELECT count(*) FROM process_energy_recent") >= 24);
    snprintf(sql, sizeof(sql), "VACUUM INTO '%s'", old);
    raw_exec(db, sql);
    sqlite3_close(db);
    before = digest(ref);

    assert_int_equal(store_close(open_store(f->path, &c)), 0);
    db = raw_open(f->path);
    assert_int_equal(raw_num(db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM sqlite_master"
                                 " WHERE name = 'process_energy_recent'"),
                     0);
    assert_int_equal(raw_same_tables(db, old), 15);
    snprintf(sql, sizeof(sql), "ATTACH '%s' AS ref", ref);
    raw_exec(db, sql);
    /* the packed rows are those the writer (and hand inserts) wrote */
    assert_int_equal(raw_num(db, "SELECT count(*) FROM (SELECT * FROM ref.process_energy_packed"
                                 " EXCEPT SELECT * FROM main.process_energy_packed)"),
                     0);
    assert_int_equal(raw_num(db, "SELECT (SELECT count(*) FROM ref.process_energy_packed)"
                                 " - (SELECT count(*) FROM main.process_energy_packed)"),
                     0);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy_packed"), 13);
    sqlite3_close(db);
    after = digest(f->path);
    assert_string_equal(before, after);
    free(before);
    free(after);
    unlink(old);
    unlink(ref);
    snprintf(sql, sizeof(sql), "%s-settled", ref);
    unlink(sql);
}

/* ---- The sqlite3 shell ---------------------------------------------------------- */

/* A connection without lib/store (the sqlite3 shell) reads the recent rows
 * after loading wattprof_packed.so, and the process_energy view of both
 * files once it attaches the settled one. */
static void test_extension_for_the_shell(void **state)
{
    fixture *f = *state;
    const char *build = getenv("BUILDDIR");
    char so[PATH_MAX], *msg = NULL;
    store_config c;
    sqlite3 *db;
    store *s;
    double n, sum;

    if (!build)
        skip();
    snprintf(so, sizeof(so), "%s/lib/store/wattprof_packed.so", build);
    config(&c);
    s = open_store(f->path, &c);
    for (int64_t t = T0; t < T0 + 4; t++)
        push_many_at(s, t, 1, 5);
    assert_int_equal(store_close(s), 0);
    n = file_num(f->path, "SELECT count(*) FROM process_energy");
    sum = file_num(f->path, "SELECT sum(attributed_j) FROM process_energy");
    assert_true(n >= 20);

    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_not_equal(
        sqlite3_exec(db, "SELECT count(*) FROM process_energy_recent", NULL, NULL, NULL),
        SQLITE_OK);
    assert_non_null(strstr(sqlite3_errmsg(db), "process_energy_recent"));
    assert_int_equal(sqlite3_enable_load_extension(db, 1), SQLITE_OK);
    if (sqlite3_load_extension(db, so, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", so, msg);
    /* the two lines docs/storage.md gives for the view of both files */
    snprintf(so, sizeof(so), "ATTACH '%s-settled' AS settled", f->path);
    raw_exec(db, so);
    raw_exec(db, RAW_SETTLED_VIEW);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy"), n);
    assert_float_equal(raw_num(db, "SELECT sum(attributed_j) FROM process_energy"), sum, 0);
    sqlite3_close(db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rows_read_back_bit_for_bit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_in_progress_rewritten_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_constraints_select_as_a_filter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_process_range_across_gaps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wide_rows_and_changes_by_hand, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ids_past_32_bits_gather, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_row_named, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrates_v9_packed_recent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_extension_for_the_shell, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
