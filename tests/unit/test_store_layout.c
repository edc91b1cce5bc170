/* Unit tests for the layout of per-second process rows (schema versions 4
 * and 7):
 * a database written by the version 3 code (tests/data/store-v3.db, made by
 * tests/data/make-store-v3.c) migrates with its rows and answers as before;
 * rows arrive in process_energy_recent, move to process_energy_settled, and
 * read the same from either; a second that a flush wrote in progress stays
 * until it is whole; process rows take their totals in folds every few
 * seconds (version 7), and a version 6 file migrates to that; a version 7
 * file migrates to the totals in a table of their own (version 8). */
/* cmocka needs these three before it */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
// clang-format on

#include "store-fixture.h"

#include <math.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* All rows of process 1 of the fixture, per second and per minute. */
#define FIXTURE_ROWS                                                                               \
    "(SELECT t, attributed_j, class FROM process_energy WHERE process_id = 1 UNION ALL"            \
    " SELECT t, attributed_j, class FROM process_energy_minute WHERE process_id = 1)"
#define WINDOW_SINCE (T0 - 86400 - 400)

static void copy_file(const char *from, const char *to)
{
    char buf[65536];
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    size_t n;

    if (!in || !out)
        fail_msg("copying %s to %s failed", from, to);
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    assert_int_equal(fclose(out), 0);
}

typedef struct expected {
    double rows, joules;            /* every per-second row */
    double recent_n, recent_j;      /* process 1's rows in its last 60 s */
    double all_n, all_j;            /* process 1's rows, both levels */
    double changes;                 /* process 1's class changes */
    double window_j, window_comm_j; /* process 1 (and comm beta) in the window */
    double buckets;                 /* process 1's one-minute buckets there */
} expected;

/* What version 3 answers, from the fixture's own tables. */
static expected read_v3(const char *path)
{
    sqlite3 *db = raw_open(path);
    expected e;

    assert_int_equal(raw_num(db, "PRAGMA user_version"), 3);
    e.rows = raw_num(db, "SELECT count(*) FROM process_energy");
    e.joules = raw_num(db, "SELECT sum(attributed_j) FROM process_energy");
    e.recent_n = raw_num(db, "SELECT count(*) FROM " FIXTURE_ROWS
                             " WHERE t > (SELECT last_seen - 60 FROM processes WHERE id = 1)");
    e.recent_j = raw_num(db, "SELECT sum(attributed_j) FROM " FIXTURE_ROWS
                             " WHERE t > (SELECT last_seen - 60 FROM processes WHERE id = 1)");
    e.all_n = raw_num(db, "SELECT count(*) FROM " FIXTURE_ROWS);
    e.all_j = raw_num(db, "SELECT sum(attributed_j) FROM " FIXTURE_ROWS);
    e.changes = raw_num(db, "SELECT count(*) FROM (SELECT class, lag(class) OVER (ORDER BY t) AS"
                            " prev FROM " FIXTURE_ROWS ") WHERE prev IS NULL OR prev != class");
    e.window_j = raw_num(db, "SELECT sum(attributed_j) FROM " FIXTURE_ROWS);
    e.window_comm_j = raw_num(db, "SELECT sum(e.attributed_j) FROM (SELECT process_id, attributed_j"
                                  " FROM process_energy UNION ALL SELECT process_id, attributed_j"
                                  " FROM process_energy_minute) e JOIN processes p"
                                  " ON p.id = e.process_id WHERE p.comm = 'beta'");
    e.buckets = raw_num(db, "SELECT count(DISTINCT (t - 1699913200) / 60) FROM " FIXTURE_ROWS);
    sqlite3_close(db);
    /* the fixture has rows at both levels and a process with a class change */
    assert_true(e.rows > 0 && e.all_n > e.rows / 3 && e.changes >= 2);
    return e;
}

static double series_sum(const store_second *v, size_t n)
{
    double sum = 0;

    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            assert_true(v[i].t > v[i - 1].t);
        sum += v[i].attributed_j;
    }
    return sum;
}

static double history_sum(store_reader *r, store_history_query *q, size_t *buckets)
{
    char err[UTIL_ERRLEN];
    store_point *p;
    double sum = 0;

    if (store_history(r, q, &p, buckets, err, sizeof(err)) < 0)
        fail_msg("store_history: %s", err);
    for (size_t i = 0; i < *buckets; i++)
        sum += p[i].attributed_j;
    free(p);
    return sum;
}

/* What version 4 answers through the reader: the same as read_v3. */
static void check_answers(const char *path, const expected *e)
{
    store_history_query h = {
        .by = STORE_HISTORY_PID, .pid = 100, .since = WINDOW_SINCE, .until = T0, .step = 60};
    store_process_query q = {.since = WINDOW_SINCE, .until = T0, .uid = -1};
    char err[UTIL_ERRLEN];
    store_class_change *c;
    store_second *v;
    store_process p, *list;
    store_reader *r;
    size_t n;

    if (store_reader_open(path, &r, err, sizeof(err)) < 0)
        fail_msg("store_reader_open: %s", err);
    assert_int_equal(store_get_process(r, 100, 0, 60, &p, &v, &n, err, sizeof(err)), 0);
    assert_int_equal(n, e->recent_n);
    assert_float_equal(series_sum(v, n), e->recent_j, 1e-9);
    free(v);
    store_process_free(&p);
    assert_int_equal(store_get_process(r, 100, 0, 3 * 86400, &p, &v, &n, err, sizeof(err)), 0);
    assert_int_equal(n, e->all_n);
    assert_float_equal(series_sum(v, n), e->all_j, 1e-9);
    free(v);
    assert_int_equal(store_process_classes(r, p.id, &c, &n, err, sizeof(err)), 0);
    assert_int_equal(n, e->changes);
    free(c);
    store_process_free(&p);

    assert_int_equal(store_list_processes(r, &q, &list, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++)
        if (list[i].pid == 100)
            assert_float_equal(list[i].attributed_j, e->window_j, 1e-9);
    store_processes_free(list, n);

    assert_float_equal(history_sum(r, &h, &n), e->window_j, 1e-9);
    assert_int_equal(n, e->buckets);
    h.by = STORE_HISTORY_COMM;
    h.comm = "^beta$";
    assert_float_equal(history_sum(r, &h, &n), e->window_comm_j, 1e-9);
    store_reader_close(r);
}

/* A database of version 3, as the version 3 code wrote it, migrates on
 * open: its rows all keep their values and answer every query as before;
 * new seconds of its processes add to them. */
static void test_migrates_v3_fixture(void **state)
{
    fixture *f = *state;
    const char *data = getenv("TEST_DATA");
    char from[512];
    store_config c;
    expected e;
    store *s;

    if (!data)
        fail_msg("TEST_DATA is not set (meson test sets it)");
    snprintf(from, sizeof(from), "%s/store-v3.db", data);
    copy_file(from, f->path);
    e = read_v3(f->path);

    config(&c);
    strcpy(c.boot_id, "fixture-boot");
    s = open_store(f->path, &c);
    assert_int_equal(store_close(s), 0);
    assert_int_equal(file_num(f->path, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy"), e.rows);
    assert_float_equal(file_num(f->path, "SELECT sum(attributed_j) FROM process_energy"), e.joules,
                       1e-9);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy_recent"), 0);
    assert_int_equal(file_num(f->path, "PRAGMA page_size"), 4096);
    /* one batch per two minutes of the old rows, none empty */
    double batches = file_num(f->path, "SELECT count(*) FROM process_energy_batch");
    assert_true(batches >= 2);
    assert_true(file_num(f->path, "SELECT max(t_max - t_min) FROM process_energy_batch") < 120);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy_batch b WHERE NOT"
                                       " EXISTS (SELECT 1 FROM process_energy_settled e"
                                       " WHERE e.batch = b.batch AND e.t = b.t_min)"),
                     0);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM sqlite_master"
                                       " WHERE name = 'process_energy_t'"),
                     0);
    check_answers(f->path, &e);

    /* Five more seconds of process 100 join its row and its series. */
    s = open_store(f->path, &c);
    for (int64_t t = T0; t < T0 + 5; t++)
        assert_int_equal(push_proc(s, t * NS, 100, 7, 1.0, 1.0, 0.01, 0, 0), 0);
    assert_int_equal(store_flush(s), 0);
    assert_int_equal(store_maintain(s, T0 + 5), 0);
    assert_int_equal(store_close(s), 0);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM processes"), 3);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy"), e.rows + 5);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy_batch"), batches + 1);
    e.all_n += 5;
    e.all_j += 5.0;
    store_reader *r;
    char err[UTIL_ERRLEN];
    store_process p;
    store_second *v;
    size_t n;
    assert_int_equal(store_reader_open(f->path, &r, err, sizeof(err)), 0);
    assert_int_equal(store_get_process(r, 100, 0, 3 * 86400, &p, &v, &n, err, sizeof(err)), 0);
    assert_int_equal(n, e.all_n);
    assert_float_equal(series_sum(v, n), e.all_j, 1e-9);
    assert_int_equal(v[n - 1].t, T0 + 4);
    free(v);
    store_process_free(&p);
    store_reader_close(r);
}

/* Reads a process's series and history through the reader. */
static void read_process(const char *path, pid_t pid, double *series_j, size_t *series_n,
                         double *history_j)
{
    store_history_query h = {
        .by = STORE_HISTORY_PID, .pid = pid, .since = T0 - 100, .until = T0 + 100, .step = 7};
    char err[UTIL_ERRLEN];
    store_reader *r;
    store_process p;
    store_second *v;
    size_t n;

    assert_int_equal(store_reader_open(path, &r, err, sizeof(err)), 0);
    assert_int_equal(store_get_process(r, pid, 0, 1000, &p, &v, series_n, err, sizeof(err)), 0);
    *series_j = series_sum(v, *series_n);
    free(v);
    store_process_free(&p);
    *history_j = history_sum(r, &h, &n);
    store_reader_close(r);
}

/* Each second's rows go to the recent table, sorted by process id whatever
 * the order they were pushed in; maintenance moves them, except a second a
 * flush wrote in progress, which keeps one row when its later ticks come.
 * Reads give the same before and after the move. */
static void test_rows_move_whole_seconds(void **state)
{
    fixture *f = *state;
    double j0, j1, h0, h1;
    size_t n0, n1;
    store_config c;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    for (int64_t t = T0; t < T0 + 10; t++)
        for (pid_t pid = 5; pid >= 1; pid--)
            assert_int_equal(push_proc(s, t * NS, pid, pid, 0.5 * pid, 1.0, 0.01, 0, 0), 0);
    assert_int_equal(push_proc(s, (T0 + 10) * NS, 1, 1, 1.0, 1.0, 0.01, 0, 0), 0);
    assert_int_equal(store_flush(s), 0);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy_recent"), 51);
    /* a new file has 1 KiB pages (a migrated one keeps its own) */
    assert_int_equal(file_num(f->path, "PRAGMA page_size"), 1024);
    /* pushed from the highest id down: the writer sorts them */
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM processes p JOIN processes q"
                                       " ON p.pid < q.pid AND p.id > q.id"),
                     10);
    read_process(f->path, 1, &j0, &n0, &h0);
    assert_int_equal(n0, 11);

    assert_int_equal(store_maintain(s, T0 + 11), 0);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy_settled"), 50);
    assert_int_equal(file_num(f->path, "SELECT t FROM process_energy_recent"), T0 + 10);
    assert_int_equal(file_num(f->path, "SELECT t_min || t_max FROM process_energy_batch"),
                     file_num(f->path, "SELECT '1700000000' || '1700000009'"));
    read_process(f->path, 1, &j1, &n1, &h1);
    assert_int_equal(n1, n0);
    assert_float_equal(j1, j0, 1e-12);
    assert_float_equal(h1, h0, 1e-12);
    assert_float_equal(h1, j1, 1e-12);

    /* The rest of second T0 + 10, then T0 + 11: one row for T0 + 10. */
    assert_int_equal(push_proc(s, (T0 + 10) * NS + NS / 2, 1, 1, 2.0, 1.0, 0.01, 0, 0), 0);
    assert_int_equal(push_proc(s, (T0 + 11) * NS, 1, 1, 1.0, 1.0, 0.01, 0, 0), 0);
    assert_int_equal(store_flush(s), 0);
    assert_int_equal(store_maintain(s, T0 + 12), 0);
    assert_int_equal(store_close(s), 0);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy"
                                       " WHERE t = 1700000010"),
                     1);
    assert_float_equal(file_num(f->path, "SELECT attributed_j FROM process_energy"
                                         " WHERE t = 1700000010"),
                       3.0, 1e-12);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy_batch"), 2);
    read_process(f->path, 1, &j1, &n1, &h1);
    assert_int_equal(n1, 12);
    assert_float_equal(j1, j0 + 3.0, 1e-12);
    assert_float_equal(h1, j1, 1e-12);
}

/* Seconds older than a batch already moved (a replay of an earlier
 * recording into the same file) land in a later batch: a process's series
 * and class changes still come in time order. */
static void test_late_seconds_read_in_order(void **state)
{
    fixture *f = *state;
    char err[UTIL_ERRLEN];
    store_class_change *c;
    store_reader *r;
    store_second *v;
    store_process p;
    store_config cfg;
    size_t n;
    store *s;

    config(&cfg);
    s = open_store(f->path, &cfg);
    for (int64_t t = T0 + 10; t < T0 + 13; t++)
        assert_int_equal(push_proc(s, t * NS, 1, 1, 1.0, 1.0, 0.01, 1, 0), 0);
    assert_int_equal(store_flush(s), 0);
    assert_int_equal(store_maintain(s, T0 + 13), 0);
    for (int64_t t = T0; t < T0 + 3; t++)
        assert_int_equal(push_proc(s, t * NS, 1, 1, 2.0, 1.0, 0.01, 0, 0), 0);
    assert_int_equal(push_proc(s, (T0 + 20) * NS, 1, 1, 3.0, 1.0, 0.01, 1, 0), 0);
    assert_int_equal(store_flush(s), 0);
    assert_int_equal(store_maintain(s, T0 + 21), 0);
    assert_int_equal(store_close(s), 0);
    /* the old seconds came in the second batch */
    assert_int_equal(file_num(f->path,
                              "SELECT min(t) FROM process_energy_settled"
                              " WHERE batch = (SELECT max(batch) FROM process_energy_batch)"),
                     T0);

    assert_int_equal(store_reader_open(f->path, &r, err, sizeof(err)), 0);
    assert_int_equal(store_get_process(r, 1, 0, 100, &p, &v, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 7);
    assert_int_equal(v[0].t, T0);
    assert_int_equal(v[3].t, T0 + 10);
    assert_int_equal(v[6].t, T0 + 20);
    assert_float_equal(series_sum(v, n), 3 * 1.0 + 3 * 2.0 + 3.0, 1e-12);
    free(v);
    /* class 0 from T0, 1 from T0 + 10: two changes, not four */
    assert_int_equal(store_process_classes(r, p.id, &c, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 2);
    assert_int_equal(c[0].t, T0);
    assert_int_equal(c[0].klass, 0);
    assert_int_equal(c[1].t, T0 + 10);
    assert_int_equal(c[1].klass, 1);
    free(c);
    store_process_free(&p);
    store_reader_close(r);
}

/* The totals, last second and class a reader gets for process pid, from
 * store_get_process and from store_list_processes over [since, until). */
typedef struct seen {
    double get_j, list_j, list_power;
    int64_t get_last, list_last;
    int get_class, list_class;
} seen;

static seen read_totals(const char *path, pid_t pid, int64_t since, int64_t until)
{
    store_process_query q = {.since = since, .until = until, .uid = -1};
    char err[UTIL_ERRLEN];
    store_process p, *list;
    store_second *v;
    store_reader *r;
    seen o = {0};
    size_t n;

    if (store_reader_open(path, &r, err, sizeof(err)) < 0)
        fail_msg("store_reader_open: %s", err);
    if (store_get_process(r, pid, 0, 60, &p, &v, &n, err, sizeof(err)) < 0)
        fail_msg("store_get_process: %s", err);
    o.get_j = p.total_attributed_j;
    o.get_last = p.last_seen;
    o.get_class = p.klass;
    free(v);
    store_process_free(&p);
    if (store_list_processes(r, &q, &list, &n, err, sizeof(err)) < 0)
        fail_msg("store_list_processes: %s", err);
    for (size_t i = 0; i < n; i++)
        if (list[i].pid == pid) {
            o.list_j = list[i].total_attributed_j;
            o.list_last = list[i].last_seen;
            o.list_class = list[i].klass;
            o.list_power = list[i].power_w;
        }
    store_processes_free(list, n);
    store_reader_close(r);
    return o;
}

static void check_totals(const char *path, double j, int64_t last, int klass)
{
    seen o = read_totals(path, 1, T0, last + 1);

    assert_float_equal(o.get_j, j, 1e-12);
    assert_float_equal(o.list_j, j, 1e-12);
    assert_int_equal(o.get_last, last);
    assert_int_equal(o.list_last, last);
    assert_int_equal(o.get_class, klass);
    assert_int_equal(o.list_class, klass);
    /* its energy over its seconds from T0 to `last` */
    assert_float_equal(o.list_power, j / (double)(last + 1 - T0), 1e-12);
}

/* A process's row is written when it is first seen, and then takes its
 * totals, last second and class every FOLD_INTERVAL_S seconds (and at
 * close), not every second: readers add the rows after the fold watermark,
 * so they answer the same whenever the folds ran. A second that comes
 * after its fold is added to the row directly. */
static void count_process_updates(const char *path, const store_config *c)
{
    sqlite3 *db;

    assert_int_equal(store_close(open_store(path, c)), 0);
    db = raw_open(path);
    raw_exec(db, "CREATE TABLE updates (n INTEGER); CREATE TABLE info_updates (n INTEGER);"
                 " CREATE TRIGGER counted AFTER UPDATE ON process_totals"
                 " BEGIN INSERT INTO updates VALUES (1); END;"
                 " CREATE TRIGGER info_counted AFTER UPDATE ON process_info"
                 " BEGIN INSERT INTO info_updates VALUES (NEW.pid); END");
    sqlite3_close(db);
}

static void test_process_row_folded(void **state)
{
    fixture *f = *state;
    store_config c;
    store *s;

    config(&c);
    count_process_updates(f->path, &c);
    s = open_store(f->path, &c);
    for (int64_t t = T0; t < T0 + 20; t++) {
        assert_int_equal(push_proc(s, t * NS, 1, 1, 1.0, 2.0, 0.5, t < T0 + 17 ? 0 : 1, 0), 0);
        assert_int_equal(store_flush(s), 0); /* a commit a second, as live */
        check_totals(f->path, (double)(t - T0 + 1), t, t < T0 + 17 ? 0 : 1);
    }
    /* a fold every ten seconds of the twenty (FOLD_INTERVAL_S), not an
     * update each */
    assert_true(file_num(f->path, "SELECT count(*) FROM updates") <= 2);
    /* and the fold writes the totals alone, not the row with the command line */
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM info_updates"), 0);
    assert_true(file_num(f->path, "SELECT attributed_j FROM processes") <= 10.0);
    assert_int_equal(store_close(s), 0);
    /* closed: the row alone has it all */
    assert_float_equal(file_num(f->path, "SELECT attributed_j FROM processes"), 20.0, 1e-12);
    assert_int_equal(file_num(f->path, "SELECT last_seen FROM processes"), T0 + 19);
    assert_int_equal(file_num(f->path, "SELECT class FROM processes"), 1);
    assert_int_equal(file_num(f->path, "SELECT t FROM process_fold"), T0 + 20);
    check_totals(f->path, 20.0, T0 + 19, 1);

    /* a second before the watermark, as after a restart within a second */
    s = open_store(f->path, &c);
    assert_int_equal(push_proc(s, (T0 + 19) * NS + NS / 2, 1, 1, 0.5, 0.5, 0.1, 1, 0), 0);
    assert_int_equal(store_flush(s), 0);
    check_totals(f->path, 20.5, T0 + 19, 1);
    assert_int_equal(store_close(s), 0);
    check_totals(f->path, 20.5, T0 + 19, 1);
}

/* Process 9 is written and its accumulator dropped (idle); then, with a
 * flush after each record when `each`: process 8 ticks, process 7 is
 * described, ticks, is renamed, ticks and exits, process 9 exits. */
static void push_lives(store *s, bool each)
{
    store_proc_info first = {.t_ns = T0 * NS + NS / 10,
                             .pid = 7,
                             .start_time = 7,
                             .comm = "first",
                             .cmdline = "first --x",
                             .cgroup = "/a.slice",
                             .uid = 1000};
    store_proc_info renamed = {
        .t_ns = T0 * NS + NS / 2, .pid = 7, .start_time = 7, .comm = "second", .uid = -1};

    assert_int_equal(push_proc(s, (T0 - 20) * NS, 9, 9, 1.0, 1.0, 0.1, 0, 0), 0);
    assert_int_equal(store_flush(s), 0);
    assert_int_equal(push_host(s, (T0 - 5) * NS, 0.02, 1.0, 0.5, 0.1), 0);
    assert_int_equal(store_flush(s), 0);
    assert_int_equal(push_proc(s, T0 * NS + NS / 20, 8, 8, 1.0, 1.0, 0.1, 0, 0), 0);
    assert_int_equal(store_push_proc_info(s, &first), 0);
    assert_int_equal(each ? store_flush(s) : 0, 0);
    assert_int_equal(push_proc(s, T0 * NS + NS / 5, 7, 7, 1.0, 1.0, 0.1, 1, 0), 0);
    assert_int_equal(push_proc(s, T0 * NS + NS * 3 / 10, 7, 7, 1.0, 1.0, 0.1, 1, 0), 0);
    assert_int_equal(each ? store_flush(s) : 0, 0);
    assert_int_equal(store_push_proc_info(s, &renamed), 0);
    assert_int_equal(each ? store_flush(s) : 0, 0);
    assert_int_equal(push_proc(s, T0 * NS + NS * 6 / 10, 7, 7, 1.0, 1.0, 0.1, 1, 0), 0);
    assert_int_equal(store_push_proc_exit(s, 7, 7, T0 * NS + NS * 9 / 10), 0);
    assert_int_equal(each ? store_flush(s) : 0, 0);
    assert_int_equal(store_push_proc_exit(s, 9, 9, T0 * NS + NS * 95 / 100), 0);
    assert_int_equal(push_host(s, (T0 + 1) * NS, 0.02, 1.0, 0.5, 0.1), 0);
}

/* The process rows as text, by pid. */
#define PROCESS_ROWS                                                                               \
    "SELECT group_concat(r, ';') FROM (SELECT pid || ',' || start_time || ',' || quote(comm)"      \
    " || ',' || quote(cmdline) || ',' || quote(uid) || ',' || quote(cgroup) || ',' || quote(job)"  \
    " || ',' || first_seen || ',' || last_seen || ',' || quote(exit_time) || ',' || attributed_j"  \
    " || ',' || cpu_s AS r FROM processes ORDER BY pid)"

static void process_rows(const char *path, char *out, size_t len)
{
    sqlite3 *db = raw_open(path);
    sqlite3_stmt *st;

    assert_int_equal(sqlite3_prepare_v2(db, PROCESS_ROWS, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    snprintf(out, len, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* A new process's description, exit and first second in one commit make its
 * rows in one insert each, as the same records committed one by one (each
 * an update of the row) leave them; a process that has a row takes its
 * exit as an update, also when the writer forgot its id. */
static void test_new_process_written_once(void **state)
{
    fixture *f = *state;
    char other[160], merged[1024], each[1024];
    const char *updated_7 = "SELECT count(*) FROM info_updates WHERE n = 7";
    store_config c;
    store *s;

    config(&c);
    c.min_commit_gap_ms = 60000;
    count_process_updates(f->path, &c);
    s = open_store(f->path, &c);
    push_lives(s, false);
    assert_int_equal(store_close(s), 0);
    assert_int_equal(file_num(f->path, updated_7), 0);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM info_updates WHERE n = 9"), 1);

    snprintf(other, sizeof(other), "%s/other.db", f->dir);
    count_process_updates(other, &c);
    s = open_store(other, &c);
    push_lives(s, true);
    assert_int_equal(store_close(s), 0);
    assert_true(file_num(other, updated_7) >= 2);

    process_rows(f->path, merged, sizeof(merged));
    process_rows(other, each, sizeof(each));
    assert_string_equal(merged, each);
    /* 7: named last, the rest from the first description, exited in T0 */
    assert_non_null(strstr(merged, "7,7,'second','first --x',1000,'/a.slice',NULL,1700000000,"
                                   "1700000000,1700000000,3.0,"));
    assert_non_null(strstr(merged, "9,9,NULL,NULL,NULL,NULL,NULL,1699999980,1700000000,"
                                   "1700000000,"));
    assert_non_null(strstr(merged, "8,8,NULL,NULL,NULL,NULL,NULL,1700000000,1700000000,NULL,"));
    remove_db(other);
}

/* A version 6 database, whose process rows counted every second written,
 * migrates with its watermark after the last: nothing counts twice. */
static void test_migrates_v6_fold_watermark(void **state)
{
    fixture *f = *state;
    store_config c;
    sqlite3 *db;
    int status;
    store *s;
    pid_t pid;

    config(&c);
    /* a writer that stops without closing leaves rows after the watermark */
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        s = open_store(f->path, &c);
        for (int64_t t = T0; t < T0 + 8; t++)
            push_proc(s, t * NS, 1, 1, 2.0, 2.0, 0.5, 0, 0);
        _exit(store_flush(s) == 0 ? 0 : 1);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* as version 6 left it: every second in the row */
    db = raw_open(f->path);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy_recent"), 8);
    raw_exec(db, STORE_PROCESSES_AS_V7
             "UPDATE processes SET attributed_j = 16.0, cpu_s = 4.0, last_seen = 1700000007;"
             " DROP TABLE process_fold; PRAGMA user_version = 6");
    sqlite3_close(db);

    s = open_store(f->path, &c);
    assert_int_equal(file_num(f->path, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    assert_int_equal(file_num(f->path, "SELECT t FROM process_fold"), T0 + 8);
    check_totals(f->path, 16.0, T0 + 7, 0);
    assert_int_equal(store_close(s), 0);
    assert_float_equal(file_num(f->path, "SELECT attributed_j FROM processes"), 16.0, 1e-12);
}

/* A move frees the recent table's pages without writing them (a range
 * DELETE wrote each recent page once more), and the settled table's new
 * pages go to the settled file, not to the WAL: the move adds a few WAL
 * frames. */
static void test_move_leaves_recent_pages_unwritten(void **state)
{
    fixture *f = *state;
    char wal[PATH_MAX];
    struct stat st;
    double recent, settled;
    off_t before;
    store_config c;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    for (int64_t t = T0; t < T0 + 30; t++)
        for (pid_t pid = 1; pid <= 100; pid++)
            assert_int_equal(push_proc(s, t * NS, pid, pid, 0.5, 1.0, 0.01, 0, 0), 0);
    assert_int_equal(push_proc(s, (T0 + 30) * NS, 1, 1, 1.0, 1.0, 0.01, 0, 0), 0);
    assert_int_equal(store_flush(s), 0);
    snprintf(wal, sizeof(wal), "%s-wal", f->path);
    assert_int_equal(stat(wal, &st), 0);
    before = st.st_size;
    recent = file_num(f->path, "SELECT count(*) FROM dbstat WHERE name = 'process_energy_packed'");
    assert_int_equal(store_maintain(s, T0 + 31), 0);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy_settled"), 3000);
    settled = file_num(f->path, "SELECT count(*) FROM dbstat('settled')"
                                " WHERE name = 'process_energy_settled'");
    assert_int_equal(stat(wal, &st), 0);
    /* frames of 1 KiB pages and their 24-byte headers; the fold, the
     * emptied table's root and the free list add a few pages */
    assert_true(recent > 80 && settled > 100);
    assert_true((double)(st.st_size - before) / (1024 + 24) < recent / 4);
    assert_int_equal(store_close(s), 0);
}

static off_t file_size(const char *path)
{
    struct stat st;

    assert_int_equal(stat(path, &st), 0);
    return st.st_size;
}

/* The WAL is copied back when it holds 10,000 pages (checkpoint.c), not at
 * SQLite's default of 1,000: until then the database file does not change,
 * and the first checkpoint comes by about 10,000 pages. */
static void test_checkpoint_every_10000_pages(void **state)
{
    fixture *f = *state;
    char wal[PATH_MAX];
    double frames = 0, before_first = 0;
    store_config c;
    off_t db0;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    assert_int_equal(store_flush(s), 0);
    snprintf(wal, sizeof(wal), "%s-wal", f->path);
    db0 = file_size(f->path);
    for (int64_t t = T0; t < T0 + 3000 && file_size(f->path) == db0; t++) {
        for (pid_t pid = 1; pid <= 200; pid++)
            assert_int_equal(push_proc(s, t * NS, pid, pid, 0.5, 1.0, 0.01, 0, 0), 0);
        if ((t - T0) % 20 == 19) {
            assert_int_equal(store_flush(s), 0);
            before_first = frames;
            frames = (double)file_size(wal) / (1024 + 24);
        }
    }
    assert_int_equal(store_close(s), 0);
    /* more than SQLite's default before the first, and that one in time */
    assert_true(file_size(f->path) > db0);
    assert_true(before_first > 3000);
    assert_true(frames < 12000);
}

/* Rows for the tables a short run leaves empty, as version 7 had them. */
#define V7_ROWS STORE_ROWS_OF_V7 "PRAGMA user_version = 7;"

/* A version 7 database, with rows in every table, migrates to process_info
 * and process_totals with every row kept: each table reads as before, and
 * `processes` (now a view) row for row as the table was. */
static void test_migrates_v7_process_totals(void **state)
{
    fixture *f = *state;
    char old[PATH_MAX + 8], sql[PATH_MAX + 64];
    store_config c;
    sqlite3 *db;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    push_info(s, T0 * NS, 1, 1, "kept", 1000);
    for (int64_t t = T0; t < T0 + 12; t++) {
        assert_int_equal(push_proc(s, t * NS, 1, 1, 1.0, 2.0, 0.5, 0, 0), 0);
        assert_int_equal(push_host(s, t * NS, 1.0, 3.0, 1.0, 1.5), 0);
        assert_int_equal(store_push_domain(s, t * NS, "package", 2.5, 2.75), 0);
    }
    assert_int_equal(store_close(s), 0);
    db = raw_open(f->path);
    raw_exec(db, STORE_PROCESSES_AS_V7 V7_ROWS);
    snprintf(old, sizeof(old), "%s.v7", f->path);
    unlink(old);
    snprintf(sql, sizeof(sql), "VACUUM INTO '%s'", old);
    raw_exec(db, sql);
    sqlite3_close(db);

    assert_int_equal(store_close(open_store(f->path, &c)), 0);
    db = raw_open(f->path);
    assert_int_equal(raw_num(db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    assert_int_equal(raw_same_tables(db, old), 13);
    /* the process that left: identity, totals and exit in one row still */
    assert_float_equal(raw_num(db, "SELECT attributed_j + exit_time FROM processes"
                                   " WHERE pid = 300 AND job = '42'"),
                       3 + 1699990002.0, 1e-9);
    sqlite3_close(db);
    unlink(old);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_migrates_v3_fixture, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rows_move_whole_seconds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_late_seconds_read_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_process_row_folded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_process_written_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrates_v6_fold_watermark, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrates_v7_process_totals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_move_leaves_recent_pages_unwritten, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_every_10000_pages, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
