/* Unit tests for the node's per-event calibration in the store (schema step
 * "node event calibration", node_events.c): a version 8 database with rows
 * migrates and keeps them; the latest fit saved is what a reader finds after
 * the writer closed, per target, with its model, events, coefficients and
 * standard errors; bad rows are refused on the way in and on the way out. */
/* cmocka needs these three before it */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
// clang-format on

#include "store-fixture.h"

#include <errno.h>
#include <math.h>
#include <string.h>

static store_node_evcal a_fit(void)
{
    store_node_evcal c = {
        .target = "package",
        .t = T0,
        .n_events = 3,
        .events = {"perf::TASK-CLOCK", "perf::PAGE-FAULTS", "some \"quoted\" one"},
        .coef = {4.55, 19.9, 3.0},
        .coef_se = {0.02, 0.4, NAN}, /* the third did not vary */
        .scale = 3.0,
        .alpha = 0.001,
        .idle_w = 20.02,
        .idle_se_w = 0.05,
        .rows = 580};
    snprintf(c.model_sha256, sizeof(c.model_sha256), "%064d", 42);
    return c;
}

static int get(fixture *f, const char *target, store_node_evcal *out, char *err, size_t errlen)
{
    store_reader *r = reader(f);
    int ret = store_node_evcal_get(r, target, out, err, errlen);

    store_reader_close(r);
    return ret;
}

/* A version 8 database (today's, less the table of step 9) with rows in its
 * tables, node_calibration among them, migrates to version 9: every row
 * kept, an empty node_event_calibration, and the fit can be saved there. */
static void test_migrates_v8_node_event_calibration(void **state)
{
    fixture *f = *state;
    store_node_evcal in = a_fit(), got;
    char err[UTIL_ERRLEN];
    store_config c;
    sqlite3 *db;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    push_info(s, T0 * NS, 1, 1, "kept", 1000);
    for (int64_t t = T0; t < T0 + 5; t++) {
        assert_int_equal(push_proc(s, t * NS, 1, 1, 1.0, 2.0, 0.5, 0, 0), 0);
        assert_int_equal(push_host(s, t * NS, 1.0, 3.0, 1.0, 1.5), 0);
    }
    assert_int_equal(store_close(s), 0);
    db = raw_open(f->path);
    raw_exec(db, STORE_AS_V8
             "INSERT INTO node_calibration VALUES ('package', 1699999000, 20.5, 0.1, 4.5,"
             " 0.999, 8.0, 300, NULL);"
             "PRAGMA user_version = 8;");
    double procs = raw_num(db, "SELECT count(*) FROM process_energy");
    double hosts = raw_num(db, "SELECT count(*) FROM host_attribution");
    assert_true(procs >= 5 && hosts >= 5);
    sqlite3_close(db);

    s = open_store(f->path, &c);
    db = raw_open(f->path);
    assert_int_equal(raw_num(db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM node_event_calibration"), 0);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy"), procs);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM host_attribution"), hosts);
    assert_float_equal(raw_num(db, "SELECT idle_w FROM node_calibration"), 20.5, 1e-12);
    sqlite3_close(db);
    assert_int_equal(get(f, "package", &got, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "no per-event calibration for package"));
    assert_int_equal(store_node_evcal_save(s, &in), 0);
    assert_int_equal(store_close(s), 0);
    assert_int_equal(get(f, "package", &got, err, sizeof(err)), 0);
    assert_float_equal(got.coef[1], 19.9, 1e-12);
}

/* The latest save per target is what a reader finds; everything comes back
 * as saved, a fixed column's standard error as NAN. */
static void test_round_trip(void **state)
{
    fixture *f = *state;
    store_node_evcal in = a_fit(), got;
    char err[UTIL_ERRLEN];
    store_config c;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    assert_int_equal(store_node_evcal_save(s, &in), 0);
    assert_int_equal(store_flush(s), 0);
    in.t = T0 + 60; /* the next good fit replaces it */
    in.coef[0] = 4.6;
    assert_int_equal(store_node_evcal_save(s, &in), 0);
    assert_int_equal(store_close(s), 0);

    assert_int_equal(get(f, "package", &got, err, sizeof(err)), 0);
    assert_string_equal(got.target, "package");
    assert_int_equal(got.t, T0 + 60);
    assert_string_equal(got.model_sha256, in.model_sha256);
    assert_int_equal(got.n_events, 3);
    for (size_t j = 0; j < 3; j++) {
        assert_string_equal(got.events[j], in.events[j]);
        assert_float_equal(got.coef[j], in.coef[j], 1e-12);
    }
    assert_float_equal(got.coef_se[0], 0.02, 1e-12);
    assert_float_equal(got.coef_se[1], 0.4, 1e-12);
    assert_true(isnan(got.coef_se[2]));
    assert_float_equal(got.scale, 3.0, 1e-12);
    assert_float_equal(got.alpha, 0.001, 1e-12);
    assert_float_equal(got.idle_w, 20.02, 1e-12);
    assert_float_equal(got.idle_se_w, 0.05, 1e-12);
    assert_int_equal(got.rows, 580);
    assert_int_equal(get(f, "package+dram", &got, err, sizeof(err)), -ENOENT);

    /* another target is another row; the first stays */
    s = open_store(f->path, &c);
    snprintf(in.target, sizeof(in.target), "package+dram");
    in.idle_w = 31;
    assert_int_equal(store_node_evcal_save(s, &in), 0);
    assert_int_equal(store_close(s), 0);
    assert_int_equal(get(f, "package+dram", &got, err, sizeof(err)), 0);
    assert_float_equal(got.idle_w, 31, 1e-12);
    assert_int_equal(get(f, "package", &got, err, sizeof(err)), 0);
    assert_float_equal(got.idle_w, 20.02, 1e-12);
}

/* What cannot be a used fit is refused, and nothing is kept. */
static void test_bad_rows_refused(void **state)
{
    fixture *f = *state;
    store_node_evcal in;
    store_config c;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    in = a_fit(), in.target[0] = '\0';
    assert_int_equal(store_node_evcal_save(s, &in), -EINVAL);
    in = a_fit(), in.model_sha256[10] = '\0';
    assert_int_equal(store_node_evcal_save(s, &in), -EINVAL);
    in = a_fit(), in.n_events = 0;
    assert_int_equal(store_node_evcal_save(s, &in), -EINVAL);
    in = a_fit(), in.n_events = STORE_EVCAL_MAX + 1;
    assert_int_equal(store_node_evcal_save(s, &in), -EINVAL);
    in = a_fit(), in.events[1][0] = '\0';
    assert_int_equal(store_node_evcal_save(s, &in), -EINVAL);
    in = a_fit(), in.coef[2] = 0;
    assert_int_equal(store_node_evcal_save(s, &in), -EINVAL);
    in = a_fit(), in.coef[0] = NAN;
    assert_int_equal(store_node_evcal_save(s, &in), -EINVAL);
    in = a_fit(), in.idle_w = -0.5;
    assert_int_equal(store_node_evcal_save(s, &in), -EINVAL);
    in = a_fit(), in.alpha = INFINITY; /* the single scale is no per-event fit */
    assert_int_equal(store_node_evcal_save(s, &in), -EINVAL);
    assert_int_equal(store_close(s), 0);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM node_event_calibration"), 0);
}

/* A row edited by hand into something unreadable: the reader names the
 * column, and gives no fit. */
static void test_unreadable_row(void **state)
{
    fixture *f = *state;
    store_node_evcal in = a_fit(), got;
    char err[UTIL_ERRLEN];
    store_config c;
    sqlite3 *db;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    assert_int_equal(store_node_evcal_save(s, &in), 0);
    assert_int_equal(store_close(s), 0);
    db = raw_open(f->path);
    raw_exec(db, "UPDATE node_event_calibration SET coef = '[4.5, 19.9]'");
    sqlite3_close(db);
    assert_int_equal(get(f, "package", &got, err, sizeof(err)), -EBADMSG);
    assert_non_null(strstr(err, "coef cannot be read"));
    db = raw_open(f->path);
    raw_exec(db, "UPDATE node_event_calibration SET coef = '[4.5, -1, 3]', events = 'x'");
    sqlite3_close(db);
    assert_int_equal(get(f, "package", &got, err, sizeof(err)), -EBADMSG);
    assert_non_null(strstr(err, "events cannot be read"));
    db = raw_open(f->path);
    raw_exec(db, "UPDATE node_event_calibration SET events = '[\"a\", \"b\", \"c\"]'");
    sqlite3_close(db);
    assert_int_equal(get(f, "package", &got, err, sizeof(err)), -EBADMSG);
    assert_non_null(strstr(err, "its values cannot be read"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_migrates_v8_node_event_calibration, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_rows_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unreadable_row, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
