/* Unit tests for which calibration each second of the host's split was
 * attributed under (schema step "host attribution calibration"): a
 * database as the step before left it migrates with its rows, which say
 * nothing; new seconds keep their last tick's idle source and fit time,
 * through the history's buckets, the list of changes and the one-minute
 * rollup; a source the store does not know is refused. */
/* cmocka needs these three before it */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
// clang-format on

#include "store-fixture.h"

#include <errno.h>

static int push_cal(store *s, int64_t t_ns, const char *source, int64_t calib_t)
{
    store_host_tick h = {.t_ns = t_ns,
                         .dt_s = 0.5,
                         .measured = true,
                         .host_j = 10,
                         .idle_j = 4,
                         .attributed_j = 5,
                         .unattributed_j = 1,
                         .modeled_j = 9,
                         .model_id = 1,
                         .idle_source = source,
                         .calib_t = calib_t};
    return store_push_host(s, &h);
}

/* A version 5 database: today's tables without the calibration columns
 * (version 6) and the fold watermark (version 7). */
static void make_previous(fixture *f, int64_t t)
{
    store_config c;
    char sql[256];
    sqlite3 *db;

    config(&c);
    assert_int_equal(store_close(open_store(f->path, &c)), 0);
    db = raw_open(f->path);
    raw_exec(db, STORE_PROCESSES_AS_V7);
    raw_exec(db, "ALTER TABLE host_attribution DROP COLUMN idle_source;"
                 "ALTER TABLE host_attribution DROP COLUMN calib_t;"
                 "ALTER TABLE host_attribution_minute DROP COLUMN idle_source;"
                 "ALTER TABLE host_attribution_minute DROP COLUMN calib_t;"
                 "DROP TABLE process_fold;");
    snprintf(sql, sizeof(sql),
             "INSERT INTO host_attribution VALUES (%lld, 1, 10, 4, 5, 1, 9, 1, 1);"
             "PRAGMA user_version = %d;",
             (long long)t, 5);
    raw_exec(db, sql);
    sqlite3_close(db);
}

static void history(fixture *f, int64_t since, int64_t until, int64_t step, store_point **p,
                    size_t *n)
{
    store_history_query q = {
        .by = STORE_HISTORY_HOST, .since = since, .until = until, .step = step};
    char err[UTIL_ERRLEN];
    store_reader *r = reader(f);

    assert_int_equal(store_history(r, &q, p, n, err, sizeof(err)), 0);
    store_reader_close(r);
}

static void test_migrates_and_records_the_calibration(void **state)
{
    fixture *f = *state;
    store_config c;
    store_point *p;
    size_t n;
    store *s;

    make_previous(f, T0);
    config(&c);
    s = open_store(f->path, &c);
    assert_int_equal(push_cal(s, (T0 + 1) * NS, "percentile", 0), 0);
    assert_int_equal(push_cal(s, (T0 + 1) * NS + NS / 2, "percentile", 0), 0);
    /* The fit of T0 + 2 becomes identifiable mid-second: its last tick's. */
    assert_int_equal(push_cal(s, (T0 + 2) * NS, "percentile", 0), 0);
    assert_int_equal(push_cal(s, (T0 + 2) * NS + NS / 2, "fitted", T0 + 2), 0);
    assert_int_equal(push_cal(s, (T0 + 3) * NS, "stored", T0 - 3600), 0);
    assert_int_equal(push_cal(s, (T0 + 4) * NS, "model", 0), 0);       /* completes T0 + 3 */
    assert_int_equal(push_cal(s, (T0 + 5) * NS, "fitted", T0 + 9), 0); /* clock stepped */
    assert_int_equal(push_cal(s, (T0 + 6) * NS, NULL, 0), 0);
    assert_int_equal(push_cal(s, (T0 + 7) * NS, "guessed", 0), -EINVAL);
    assert_int_equal(store_close(s), 0);
    assert_int_equal(file_num(f->path, "PRAGMA user_version"), STORE_SCHEMA_VERSION);

    history(f, T0, T0 + 7, 1, &p, &n);
    assert_int_equal(n, 7);
    assert_string_equal(p[0].idle_source, ""); /* from before the step */
    assert_int_equal(p[0].calib_t, 0);
    assert_string_equal(p[1].idle_source, "percentile");
    assert_int_equal(p[1].calib_t, 0);
    assert_string_equal(p[2].idle_source, "fitted");
    assert_int_equal(p[2].calib_t, T0 + 2);
    assert_string_equal(p[3].idle_source, "stored");
    assert_int_equal(p[3].calib_t, T0 - 3600);
    assert_string_equal(p[4].idle_source, "model");
    assert_int_equal(p[5].calib_t, T0 + 5); /* as of the tick */
    assert_string_equal(p[6].idle_source, "");
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(p[i].calibrations, 1);
        /* the energy still adds up every second */
        assert_float_equal(p[i].host_j, p[i].idle_j + p[i].attributed_j + p[i].unattributed_j,
                           1e-9);
    }
    free(p);
    /* The changes: one per second here, each from its first second. */
    store_calib_change *ch;
    char err[UTIL_ERRLEN];
    store_reader *r = reader(f);
    assert_int_equal(store_calibration_changes(r, T0 + 1, T0 + 7, &ch, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 6);
    assert_int_equal(ch[0].t, T0 + 1);
    assert_string_equal(ch[0].idle_source, "percentile");
    assert_int_equal(ch[1].t, T0 + 2);
    assert_string_equal(ch[1].idle_source, "fitted");
    assert_int_equal(ch[1].calib_t, T0 + 2);
    assert_string_equal(ch[5].idle_source, "");
    free(ch);
    store_reader_close(r);
    /* One bucket: the last second's calibration, and how many there were. */
    history(f, T0, T0 + 5, 5, &p, &n);
    assert_int_equal(n, 1);
    assert_string_equal(p[0].idle_source, "model");
    assert_int_equal(p[0].calibrations, 5);
    free(p);
}

/* The minute rollup keeps the minute's last second's calibration. */
static void test_rollup_keeps_the_last_calibration(void **state)
{
    fixture *f = *state;
    int64_t m0 = T0 + 40; /* a minute boundary */
    int64_t now = m0 + 2 * 86400;
    store_config c;
    store_point *p;
    size_t n;
    store *s;

    config(&c);
    c.rollup_chunk_s = 60;
    s = open_store(f->path, &c);
    for (int64_t t = m0; t < m0 + 60; t++)
        assert_int_equal(
            push_cal(s, t * NS, t < m0 + 30 ? "percentile" : "fitted", t < m0 + 30 ? 0 : m0 + 30),
            0);
    for (int64_t t = now - 3; t < now; t++)
        assert_int_equal(push_cal(s, t * NS, "fitted", m0 + 30), 0);
    assert_int_equal(store_flush(s), 0);
    while (store_maintain(s, now) == 1)
        ;
    assert_int_equal(store_close(s), 0);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM host_attribution_minute"), 1);
    history(f, m0, m0 + 60, 60, &p, &n);
    assert_int_equal(n, 1);
    assert_string_equal(p[0].idle_source, "fitted");
    assert_int_equal(p[0].calib_t, m0 + 30);
    assert_float_equal(p[0].host_j, 600, 1e-9);
    free(p);
    /* A run of seconds under one calibration is one change, from its start. */
    store_calib_change *ch;
    char err[UTIL_ERRLEN];
    store_reader *r = reader(f);
    assert_int_equal(store_calibration_changes(r, m0, now, &ch, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ch[0].t, m0);
    assert_string_equal(ch[0].idle_source, "fitted");
    assert_int_equal(ch[0].calib_t, m0 + 30);
    free(ch);
    store_reader_close(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_migrates_and_records_the_calibration, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rollup_keeps_the_last_calibration, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
