/* Unit tests for lib/store's queries (lib/store/query.c): processes,
 * history, models and calibration rows read back through a store_reader
 * from a real SQLite file, as in test_store.c. */
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

/* ---- Queries ---------------------------------------------------------------- */

static const char *sha_a = "1111111111111111111111111111111111111111111111111111111111111111";
static const char *sha_b = "2222222222222222222222222222222222222222222222222222222222222222";

/* Ten seconds T0..T0+9: "burn" (uid 1000) 2 J/s, "idle" (uid 1000) 0.1 J/s,
 * "make" (uid 0) 1 J/s but only in T0+5..T0+9; pid 300 reused (an old
 * identity before T0). Each second has two 0.5 s ticks. */
static store *fill_queries(fixture *f, int32_t *model)
{
    char err[UTIL_ERRLEN];
    store_config c;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    assert_int_equal(
        store_model_add(s, sha_a, "a", "ridge", "{\"m\":\"a\"}", model, err, sizeof(err)), 0);
    push_info(s, T0 * NS, 100, 1, "burn", 1000);
    push_info(s, T0 * NS, 200, 2, "idle", 1000);
    push_info(s, (T0 - 100) * NS, 300, 3, "old", 1000);
    push_info(s, (T0 + 5) * NS, 300, 4, "make", 0);
    assert_int_equal(push_proc(s, (T0 - 100) * NS, 300, 3, 7.0, 7.0, 1.0, 0, *model), 0);
    for (int64_t t = T0; t < T0 + 10; t++)
        for (int half = 0; half < 2; half++) {
            int64_t ns = t * NS + half * 500000000LL;
            assert_int_equal(push_proc(s, ns, 100, 1, 1.0, 1.5, 0.5, 0, *model), 0);
            assert_int_equal(push_proc(s, ns, 200, 2, 0.05, 0.1, 0.01, 1, *model), 0);
            if (t >= T0 + 5)
                assert_int_equal(
                    push_proc(s, ns, 300, 4, 0.5, 0.6, 0.4, t >= T0 + 8 ? 0 : 1, *model), 0);
            assert_int_equal(push_host(s, ns, 0.5, 4.0, 1.0, 1.55), 0);
        }
    assert_int_equal(store_push_proc_exit(s, 300, 4, (T0 + 9) * NS + 900000000LL), 0);
    assert_int_equal(store_flush(s), 0);
    return s;
}

static void test_list_processes(void **state)
{
    fixture *f = *state;
    char err[UTIL_ERRLEN];
    int32_t model;
    store *s = fill_queries(f, &model);
    store_reader *r = reader(f);
    store_process_query q = {.since = T0, .until = T0 + 10, .sort = STORE_SORT_ENERGY, .uid = -1};
    store_process *p;
    size_t n;

    int64_t latest;
    assert_int_equal(store_latest_second(r, &latest, err, sizeof(err)), 0);
    assert_int_equal(latest, T0 + 9);
    assert_int_equal(store_list_processes(r, &q, &p, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 3);
    assert_string_equal(p[0].comm, "burn");
    assert_float_equal(p[0].attributed_j, 20.0, 1e-9);
    assert_float_equal(p[0].standalone_j, 30.0, 1e-9);
    assert_float_equal(p[0].cpu_s, 10.0, 1e-9);
    assert_float_equal(p[0].power_w, 2.0, 1e-9);
    assert_int_equal(p[0].seconds, 10);
    assert_string_equal(p[0].boot_id, "test-boot");
    assert_string_equal(p[0].cgroup, "/user.slice");
    assert_int_equal(p[0].uid, 1000);
    assert_int_equal(p[0].first_seen, T0);
    assert_int_equal(p[0].last_seen, T0 + 9);
    assert_int_equal(p[0].exit_time, 0);
    assert_string_equal(p[1].comm, "make");
    assert_float_equal(p[1].attributed_j, 5.0, 1e-9);
    assert_int_equal(p[1].exit_time, T0 + 9);
    /* alive for 5 of the 10 seconds: its power is over those 5 */
    assert_float_equal(p[1].power_w, 1.0, 1e-9);
    assert_string_equal(p[2].comm, "idle");
    assert_int_equal(p[2].klass, 1);
    store_processes_free(p, n);

    /* By CPU, limited, then filtered by uid and by comm. */
    q.sort = STORE_SORT_CPU;
    q.limit = 2;
    assert_int_equal(store_list_processes(r, &q, &p, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 2);
    assert_string_equal(p[0].comm, "burn");
    assert_string_equal(p[1].comm, "make");
    store_processes_free(p, n);
    q.limit = 0;
    q.uid = 0;
    assert_int_equal(store_list_processes(r, &q, &p, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 1);
    assert_string_equal(p[0].comm, "make");
    store_processes_free(p, n);
    q.uid = -1;
    q.only_running = true; /* "make" exited at T0 + 9 */
    assert_int_equal(store_list_processes(r, &q, &p, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 2);
    assert_string_equal(p[1].comm, "idle");
    store_processes_free(p, n);
    q.only_running = false;
    q.comm_regex = "^(bu|id)";
    q.sort = STORE_SORT_POWER;
    assert_int_equal(store_list_processes(r, &q, &p, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 2);
    assert_string_equal(p[0].comm, "burn");
    assert_string_equal(p[1].comm, "idle");
    store_processes_free(p, n);
    /* The same order again, without the regex: the reader reuses its
     * statement, and the last call's filter is not left bound to it. */
    q.comm_regex = NULL;
    assert_int_equal(store_list_processes(r, &q, &p, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 3);
    store_processes_free(p, n);

    /* A window that holds only the reused pid's old identity. */
    q.comm_regex = NULL;
    q.since = T0 - 200;
    q.until = T0;
    assert_int_equal(store_list_processes(r, &q, &p, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 1);
    assert_string_equal(p[0].comm, "old");
    assert_int_equal(p[0].start_time, 3);
    store_processes_free(p, n);

    /* Bad input is named. */
    q.comm_regex = "([";
    q.since = T0;
    q.until = T0 + 10;
    assert_int_equal(store_list_processes(r, &q, &p, &n, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "comm regex '(['"));
    q.comm_regex = NULL;
    q.until = T0;
    assert_int_equal(store_list_processes(r, &q, &p, &n, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "until"));
    q.until = T0 + 10;
    q.sort = 17;
    assert_int_equal(store_list_processes(r, &q, &p, &n, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "sort"));

    store_reader_close(r);
    assert_int_equal(store_close(s), 0);
}

/* Process id's class changes are exactly class k0 at t0, then k1 at t1. */
static void check_two_changes(store_reader *r, int64_t id, int64_t t0, int k0, int64_t t1, int k1)
{
    char err[UTIL_ERRLEN];
    store_class_change *cls;
    size_t n;

    assert_int_equal(store_process_classes(r, id, &cls, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 2);
    assert_int_equal(cls[0].t, t0);
    assert_int_equal(cls[0].klass, k0);
    assert_int_equal(cls[1].t, t1);
    assert_int_equal(cls[1].klass, k1);
    free(cls);
}

static void test_get_process(void **state)
{
    fixture *f = *state;
    char err[UTIL_ERRLEN];
    int32_t model;
    store *s = fill_queries(f, &model);
    store_reader *r = reader(f);
    store_process p;
    store_second *series;
    size_t n;

    assert_int_equal(store_get_process(r, 100, 0, 5, &p, &series, &n, err, sizeof(err)), 0);
    assert_string_equal(p.comm, "burn");
    assert_float_equal(p.total_attributed_j, 20.0, 1e-9);
    assert_float_equal(p.total_standalone_j, 30.0, 1e-9);
    assert_int_equal(n, 5);
    assert_int_equal(series[0].t, T0 + 5);
    assert_int_equal(series[4].t, T0 + 9);
    assert_float_equal(series[4].attributed_j, 2.0, 1e-9);
    assert_int_equal(series[4].model_id, model);
    store_process_free(&p);
    free(series);

    /* A reused pid: the newest identity by default, the old one by start time. */
    assert_int_equal(store_get_process(r, 300, 0, 60, &p, &series, &n, err, sizeof(err)), 0);
    assert_string_equal(p.comm, "make");
    assert_int_equal(p.uid, 0);
    assert_int_equal(n, 5);
    store_process_free(&p);
    free(series);
    assert_int_equal(store_get_process(r, 300, 3, 60, &p, &series, &n, err, sizeof(err)), 0);
    assert_string_equal(p.comm, "old");
    assert_float_equal(p.total_attributed_j, 7.0, 1e-9);
    assert_int_equal(n, 1);
    store_process_free(&p);
    free(series);

    /* Class changes: pid 100 is class 0 throughout; "make" moves to class
     * 0 at T0 + 8. */
    store_class_change *cls;
    assert_int_equal(store_get_process(r, 100, 0, 0, &p, &series, &n, err, sizeof(err)), 0);
    free(series);
    assert_int_equal(store_process_classes(r, p.id, &cls, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 1);
    assert_int_equal(cls[0].t, T0);
    assert_int_equal(cls[0].klass, 0);
    free(cls);
    store_process_free(&p);
    assert_int_equal(store_get_process(r, 300, 0, 0, &p, &series, &n, err, sizeof(err)), 0);
    free(series);
    assert_int_equal(p.klass, 0);
    check_two_changes(r, p.id, T0 + 5, 1, T0 + 8, 0);
    store_process_free(&p);

    assert_int_equal(store_get_process(r, 999, 0, 60, &p, &series, &n, err, sizeof(err)), -ENOENT);
    assert_string_equal(err, "no process with pid 999");
    assert_int_equal(store_get_process(r, 100, 0, -1, &p, &series, &n, err, sizeof(err)), -EINVAL);
    store_reader_close(r);
    assert_int_equal(store_close(s), 0);
}

static void test_history(void **state)
{
    fixture *f = *state;
    char err[UTIL_ERRLEN];
    int32_t model;
    store *s = fill_queries(f, &model);
    store_reader *r = reader(f);
    store_history_query q = {
        .by = STORE_HISTORY_PID, .pid = 100, .since = T0, .until = T0 + 10, .step = 5};
    store_point *p;
    size_t n;

    assert_int_equal(store_history(r, &q, &p, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 2);
    assert_int_equal(p[0].t, T0);
    assert_int_equal(p[1].t, T0 + 5);
    assert_float_equal(p[0].attributed_j, 10.0, 1e-9);
    assert_float_equal(p[1].cpu_s, 5.0, 1e-9);
    free(p);

    /* By pid, every identity counts: the old pid-300 second is in its bucket. */
    q.pid = 300;
    q.since = T0 - 100;
    q.step = 50;
    assert_int_equal(store_history(r, &q, &p, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 2);
    assert_float_equal(p[0].attributed_j, 7.0, 1e-9);
    assert_int_equal(p[1].t, T0);
    assert_float_equal(p[1].attributed_j, 5.0, 1e-9);
    free(p);

    q.by = STORE_HISTORY_COMM;
    q.comm = "^id";
    q.since = T0;
    q.step = 1;
    assert_int_equal(store_history(r, &q, &p, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 10);
    assert_float_equal(p[3].attributed_j, 0.1, 1e-9);
    free(p);
    q.comm = "^(idle|burn)$";
    q.step = 10;
    assert_int_equal(store_history(r, &q, &p, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 1);
    assert_float_equal(p[0].attributed_j, 21.0, 1e-9);
    free(p);
    q.comm = "*x";
    assert_int_equal(store_history(r, &q, &p, &n, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "comm regex '*x'"));
    q.step = 1;

    q.by = STORE_HISTORY_UID;
    q.uid = 1000;
    q.step = 10;
    assert_int_equal(store_history(r, &q, &p, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 1);
    assert_float_equal(p[0].attributed_j, 21.0, 1e-9);
    free(p);

    q.by = STORE_HISTORY_HOST;
    q.step = 2;
    assert_int_equal(store_history(r, &q, &p, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 5);
    assert_float_equal(p[0].host_j, 16.0, 1e-9);
    assert_float_equal(p[0].idle_j, 4.0, 1e-9);
    assert_float_equal(p[0].attributed_j, 6.2, 1e-9);
    assert_float_equal(p[0].host_j, p[0].idle_j + p[0].attributed_j + p[0].unattributed_j, 1e-9);
    assert_float_equal(p[0].modeled_j, 17.6, 1e-9);
    assert_true(p[0].measured);
    for (size_t i = 0; i < n; i++) /* sampled throughout: two half-seconds a second */
        assert_float_equal(p[i].covered_s, 2.0, 1e-9);
    free(p);
    /* Buckets that reach before the first second and after the last. */
    q.since = T0 - 1;
    q.until = T0 + 12;
    assert_int_equal(store_history(r, &q, &p, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 6);
    assert_int_equal(p[0].t, T0 - 1);
    assert_float_equal(p[0].covered_s, 1.0, 1e-9);
    assert_float_equal(p[1].covered_s, 2.0, 1e-9);
    assert_int_equal(p[5].t, T0 + 9);
    assert_float_equal(p[5].covered_s, 1.0, 1e-9);
    free(p);
    q.since = T0;
    q.until = T0 + 10;

    q.step = 0;
    assert_int_equal(store_history(r, &q, &p, &n, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "step: 0 must be at least 1 second");
    q.step = 1;
    q.by = STORE_HISTORY_COMM;
    q.comm = NULL;
    assert_int_equal(store_history(r, &q, &p, &n, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "history: comm is missing");
    store_reader_close(r);
    assert_int_equal(store_close(s), 0);
}

static void test_models(void **state)
{
    fixture *f = *state;
    char err[UTIL_ERRLEN];
    int32_t a, b, again;
    store_model_row *m;
    size_t n;
    store *s = fill_queries(f, &a);
    store_reader *r;

    assert_int_equal(
        store_model_add(s, sha_b, "b", "forest", "{\"m\":\"b\"}", &b, err, sizeof(err)), 0);
    assert_int_equal(
        store_model_add(s, sha_a, "a", "ridge", "{\"m\":\"a\"}", &again, err, sizeof(err)), 0);
    assert_int_equal(again, a);
    assert_int_not_equal(a, b);
    assert_int_equal(store_model_add(s, "XYZ", "bad", "ridge", "{}", &again, err, sizeof(err)),
                     -EINVAL);
    assert_string_equal(err, "model bad: sha256 'XYZ' is not 64 lowercase hex digits");
    assert_int_equal(store_flush(s), 0);
    r = reader(f);
    assert_int_equal(store_list_models(r, &m, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 2);
    assert_string_equal(m[0].sha256, sha_a);
    assert_string_equal(m[0].json, "{\"m\":\"a\"}");
    assert_string_equal(m[1].name, "b");
    assert_string_equal(m[1].engine, "forest");
    assert_true(m[1].first_loaded > T0);
    store_models_free(m, n);
    store_reader_close(r);
    assert_int_equal(store_close(s), 0);
}

/* Calibration rows: dt-weighted mean rates per class and mean measured power
 * per domain, written once a later second shows theirs complete. */
static void test_calibration(void **state)
{
    fixture *f = *state;
    char err[UTIL_ERRLEN];
    store_config c;
    store_calibration_row *row;
    store_reader *r;
    size_t n;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    for (int64_t t = T0; t < T0 + 3; t++)
        for (int k = 0; k < 4; k++) {
            int64_t ns = t * NS + k * 250000000LL;
            double hi[6] = {1e9, 2e9, 3e9, 4e9, 5e9, 6e9 + k};
            double lo[6] = {10, 20, 30, 40, 50, 60};
            assert_int_equal(push_host(s, ns, 0.25, 25.0, 10.0, 10.0), 0);
            assert_int_equal(store_push_domain(s, ns, "package", 20.0, NAN), 0);
            assert_int_equal(store_push_domain(s, ns, "dram", 5.0, NAN), 0);
            assert_int_equal(store_push_calibration(s, ns, 0.25, 1, 0, hi, 6), 0);
            assert_int_equal(store_push_calibration(s, ns, 0.25, 1, 1, lo, 6), 0);
        }
    assert_int_equal(store_flush(s), 0);
    r = reader(f);
    assert_int_equal(store_calibration_since(r, T0, 0, &row, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 2); /* T0 + 2 is not known to be complete yet */
    assert_int_equal(row[0].t, T0);
    assert_float_equal(row[0].duration_s, 1.0, 1e-12);
    assert_int_equal(row[0].model_id, 1);
    assert_int_equal(row[0].n_domains, 2);
    assert_string_equal(row[0].domain[0], "package");
    assert_float_equal(row[0].power_w[0], 80.0, 1e-9);
    assert_float_equal(row[0].power_w[1], 20.0, 1e-9);
    assert_int_equal(row[0].n_classes, 2);
    assert_int_equal(row[0].n_events, 6);
    assert_float_equal(row[0].rates[0], 1e9, 1e-3);
    assert_float_equal(row[0].rates[5], 6e9 + 1.5, 1e-3);
    assert_float_equal(row[0].rates[6 + 2], 30, 1e-9);
    store_calibration_free(row, n);
    assert_int_equal(store_calibration_since(r, T0 + 1, 1, &row, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 1);
    assert_int_equal(row[0].t, T0 + 1);
    store_calibration_free(row, n);
    assert_int_equal(store_close(s), 0);
    assert_int_equal(store_calibration_since(r, T0, 0, &row, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 3);
    store_calibration_free(row, n);

    /* A malformed row is named, not trusted. */
    sqlite3 *db = raw_open(f->path);
    raw_exec(db, "UPDATE calibration SET rates = '[[1,2],[3]]' WHERE t = 1700000001");
    sqlite3_close(db);
    assert_int_equal(store_calibration_since(r, T0, 0, &row, &n, err, sizeof(err)), -EBADMSG);
    assert_non_null(strstr(err, "calibration row t=1700000001: malformed JSON"));
    store_reader_close(r);
}

/* ---- The time budget --------------------------------------------------------- */

/* N processes with three minute rows each, written behind the store's back:
 * a listing over all of them is some thousands of times BUDGET_OPS. */
#define N_BUDGET 20000

static void fill_many(fixture *f)
{
    store_config c;
    sqlite3 *db;

    config(&c);
    assert_int_equal(store_close(open_store(f->path, &c)), 0);
    db = raw_open(f->path);
    raw_exec(db, "BEGIN");
    raw_exec(db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)"
                 " INSERT INTO processes (id, boot_id, pid, start_time, comm, uid, first_seen,"
                 " last_seen, exit_time) SELECT i, 'b', i, 1, 'p' || i, 0, 1699990000,"
                 " 1699999000, 1699999000 FROM n");
    raw_exec(db, "INSERT INTO process_energy_minute (process_id, t, attributed_j, standalone_j,"
                 " cpu_s, class, seconds) SELECT id, 1699990020 + 60 * k.k, id, id, 1, 0, 60"
                 " FROM processes, (SELECT 0 AS k UNION ALL SELECT 1 UNION ALL SELECT 2) k");
    raw_exec(db, "COMMIT");
    sqlite3_close(db);
}

static int list_all(store_reader *r, double *seconds, char *err, size_t errlen)
{
    store_process_query q = {
        .since = T0 - 100000, .until = T0, .sort = STORE_SORT_POWER, .uid = -1, .limit = 10};
    double t0 = now_s();
    store_process *p = NULL;
    size_t n = 0;
    int ret = store_list_processes(r, &q, &p, &n, err, errlen);

    *seconds = now_s() - t0;
    if (ret == 0) {
        assert_int_equal(n, 10);
        assert_int_equal(p[0].pid, N_BUDGET); /* the most power */
    }
    store_processes_free(p, n);
    return ret;
}

/* A query past the reader's budget stops with -ETIME and an error naming
 * the limit; the reader answers the next query; a new budget starts afresh
 * and 0 means none. */
/* Half an hour in batches, maintained every minute: pid 100 every second,
 * pid 200 for one minute in the middle (class 1 from its 31st second), pid
 * 300 twice: first seen at T0 as "late" with seconds from T0 + 1200 on (the
 * lower id, so its rows are read before the other's), then as "early" with
 * seconds T0 + 100..159. Joules a second: (t - T0) % 8 / 4, sums exact. */
#define ONE_END (T0 + 1800)
static double one_j(int64_t t)
{
    return (double)((t - T0) % 8) / 4.0;
}

static bool one_has(pid_t pid, uint64_t start, int64_t t)
{
    if (pid == 200)
        return t >= T0 + 600 && t < T0 + 660;
    if (pid == 300)
        return start == 4 ? t >= T0 + 1200 && t < T0 + 1260 : t >= T0 + 100 && t < T0 + 160;
    return true;
}

/* The buckets of pid's seconds in [since, until), as they should come. */
static void one_check_history(store_reader *r, pid_t pid, int64_t since, int64_t until,
                              int64_t step)
{
    store_history_query q = {
        .by = STORE_HISTORY_PID, .pid = pid, .since = since, .until = until, .step = step};
    char err[UTIL_ERRLEN];
    store_point *p;
    size_t n, k = 0;

    assert_int_equal(store_history(r, &q, &p, &n, err, sizeof(err)), 0);
    for (int64_t b = since; b < until; b += step) {
        double a = 0;
        bool any = false;
        for (int64_t t = b; t < b + step && t < until; t++)
            for (uint64_t start = 3; start <= 4; start++)
                if (one_has(pid, start, t) && (pid == 300 || start == 3)) {
                    a += one_j(t);
                    any = true;
                }
        if (!any)
            continue;
        assert_true(k < n);
        assert_int_equal(p[k].t, b);
        assert_float_equal(p[k].attributed_j, a, 1e-12);
        assert_float_equal(p[k].cpu_s, a / 10, 1e-12);
        k++;
    }
    assert_int_equal(n, k);
    free(p);
}

static void test_one_process_among_batches(void **state)
{
    fixture *f = *state;
    char err[UTIL_ERRLEN];
    store_second *v;
    store_process p;
    store_reader *r;
    store_config c;
    size_t n;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    push_info(s, T0 * NS, 100, 3, "long", 0);
    push_info(s, T0 * NS, 300, 4, "late", 0);
    for (int64_t t = T0; t < ONE_END; t++) {
        if (t == T0 + 100)
            push_info(s, t * NS, 300, 3, "early", 0);
        if (t == T0 + 600)
            push_info(s, t * NS, 200, 3, "mid", 0);
        for (pid_t pid = 100; pid <= 300; pid += 100)
            for (uint64_t start = 3; start <= 4; start++)
                if (one_has(pid, start, t) && (pid == 300 || start == 3))
                    assert_int_equal(push_proc(s, t * NS, pid, start, one_j(t), one_j(t),
                                               one_j(t) / 10, pid == 200 && t >= T0 + 630, 0),
                                     0);
        if (t % 60 == 0)
            assert_int_equal(store_maintain(s, t), 0);
    }
    assert_int_equal(store_flush(s), 0);
    assert_true(file_num(f->path, "SELECT count(*) FROM process_energy_batch") >= 10);
    r = reader(f);

    /* its series: its 60 seconds, no other's */
    assert_int_equal(store_get_process(r, 200, 0, 3600, &p, &v, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 60);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(v[i].t, T0 + 600 + (int64_t)i);
        assert_float_equal(v[i].attributed_j, one_j(v[i].t), 1e-12);
        assert_int_equal(v[i].klass, v[i].t >= T0 + 630);
    }
    free(v);
    check_two_changes(r, p.id, T0 + 600, 0, T0 + 630, 1);
    store_process_free(&p);
    assert_int_equal(store_get_process(r, 300, 3, 3600, &p, &v, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 60);
    assert_int_equal(v[0].t, T0 + 100);
    assert_int_equal(v[59].t, T0 + 159);
    free(v);
    store_process_free(&p);

    /* its history, in buckets that straddle its first and last seconds,
     * in windows that cut it; pid 300's rows come out of order */
    one_check_history(r, 200, T0, ONE_END, 60);
    one_check_history(r, 200, T0 + 7, ONE_END, 13);
    one_check_history(r, 200, T0 + 630, T0 + 645, 1);
    one_check_history(r, 100, T0, ONE_END, 60);
    one_check_history(r, 100, T0 + 1790, ONE_END, 1);
    one_check_history(r, 300, T0, ONE_END, 60);
    one_check_history(r, 300, T0 + 150, T0 + 1210, 7);
    store_reader_close(r);
    assert_int_equal(store_close(s), 0);
}

static void test_query_budget(void **state)
{
    fixture *f = *state;
    char err[UTIL_ERRLEN] = "";
    double full = 1e9, stopped = 1e9, t;
    store_history_query h = {
        .by = STORE_HISTORY_COMM, .comm = "^p", .since = T0 - 100000, .until = T0, .step = 60};
    store_point *pts = NULL;
    store_reader *r;
    size_t n = 0;

    fill_many(f);
    r = reader(f);
    for (int i = 0; i < 3; i++) { /* warm: the fastest of three */
        assert_int_equal(list_all(r, &t, err, sizeof(err)), 0);
        full = t < full ? t : full;
    }
    print_message("listing %d processes: %.1f ms\n", N_BUDGET, full * 1e3);

    /* spent at once: stopped at the first check */
    store_reader_budget(r, 1e-9);
    assert_int_equal(list_all(r, &t, err, sizeof(err)), -ETIME);
    assert_non_null(
        strstr(err, "listing processes: stopped at the time limit of 1e-09 s per query"));
    assert_int_equal(store_history(r, &h, &pts, &n, err, sizeof(err)), -ETIME);
    assert_non_null(strstr(err, "reading history: stopped at the time limit"));

    /* a quarter of what the query needs: stopped early (the quickest of
     * three, as a loaded machine may stall any one of them) */
    for (int i = 0; i < 3; i++) {
        store_reader_budget(r, full / 4);
        assert_int_equal(list_all(r, &t, err, sizeof(err)), -ETIME);
        stopped = t < stopped ? t : stopped;
    }
    print_message("with a budget of %.1f ms: stopped after %.1f ms\n", full / 4 * 1e3,
                  stopped * 1e3);
    assert_true(stopped < full);

    /* a new, ample budget; then none */
    store_reader_budget(r, 60);
    assert_int_equal(list_all(r, &t, err, sizeof(err)), 0);
    assert_int_equal(store_history(r, &h, &pts, &n, err, sizeof(err)), 0);
    assert_true(n > 0);
    free(pts);
    store_reader_budget(r, 1e-9);
    store_reader_budget(r, 0);
    assert_int_equal(list_all(r, &t, err, sizeof(err)), 0);
    store_reader_release_memory(r);
    assert_int_equal(list_all(r, &t, err, sizeof(err)), 0);
    store_reader_close(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_list_processes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_get_process, setup, teardown),
        cmocka_unit_test_setup_teardown(test_history, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_process_among_batches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_models, setup, teardown),
        cmocka_unit_test_setup_teardown(test_calibration, setup, teardown),
        cmocka_unit_test_setup_teardown(test_query_budget, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
