/* Unit tests for the settled rows' file, PATH-settled (schema version 10):
 * a version 9 file migrates with every row and every answer kept; a crash
 * between the move's two commits (the settled file's, then the main
 * file's) counts no second twice and loses none; a reader holding the
 * settled file puts the move off without holding up the per-second commits
 * or losing rows; a missing settled file beside a database is started
 * empty with one line naming it. */
/* cmocka needs these three before it */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
// clang-format on

#include "store-fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/wait.h>

#define DAY 86400

/* What the queries answer, summed. */
typedef struct answers {
    double procs, window_j, total_j;  /* ps over everything */
    double pid_buckets, pid_j;        /* history --pid 2 in minutes */
    double host_buckets, host_j;      /* host history in minutes */
    double series_n, series_j, klass; /* show 2: its series over 3 days */
} answers;

static answers ask(fixture *f)
{
    store_process_query q = {.since = T0 - 3 * DAY, .until = T0 + DAY, .uid = -1};
    store_history_query h = {
        .by = STORE_HISTORY_PID, .pid = 2, .since = T0 - 3 * DAY, .until = T0 + DAY, .step = 60};
    char err[UTIL_ERRLEN];
    store_reader *r = reader(f);
    store_process *list, p;
    store_second *v;
    store_point *pt;
    answers a = {0};
    size_t n;

    if (store_list_processes(r, &q, &list, &n, err, sizeof(err)) < 0)
        fail_msg("store_list_processes: %s", err);
    a.procs = (double)n;
    for (size_t i = 0; i < n; i++) {
        a.window_j += list[i].attributed_j;
        a.total_j += list[i].total_attributed_j;
        store_process_free(&list[i]);
    }
    free(list);
    if (store_history(r, &h, &pt, &n, err, sizeof(err)) < 0)
        fail_msg("store_history: %s", err);
    a.pid_buckets = (double)n;
    for (size_t i = 0; i < n; i++)
        a.pid_j += pt[i].attributed_j;
    free(pt);
    h.by = STORE_HISTORY_HOST;
    if (store_history(r, &h, &pt, &n, err, sizeof(err)) < 0)
        fail_msg("store_history: %s", err);
    a.host_buckets = (double)n;
    for (size_t i = 0; i < n; i++)
        a.host_j += pt[i].host_j;
    free(pt);
    if (store_get_process(r, 2, 2, 3 * DAY, &p, &v, &n, err, sizeof(err)) < 0)
        fail_msg("store_get_process: %s", err);
    a.series_n = (double)n;
    for (size_t i = 0; i < n; i++)
        a.series_j += v[i].attributed_j;
    a.klass = p.klass;
    free(v);
    store_process_free(&p);
    store_reader_close(r);
    return a;
}

static void same_answers(const answers *a, const answers *b)
{
    assert_float_equal(a->procs, b->procs, 0);
    assert_float_equal(a->window_j, b->window_j, 1e-9);
    assert_float_equal(a->total_j, b->total_j, 1e-9);
    assert_float_equal(a->pid_buckets, b->pid_buckets, 0);
    assert_float_equal(a->pid_j, b->pid_j, 1e-9);
    assert_float_equal(a->host_buckets, b->host_buckets, 0);
    assert_float_equal(a->host_j, b->host_j, 1e-9);
    assert_float_equal(a->series_n, b->series_n, 0);
    assert_float_equal(a->series_j, b->series_j, 1e-9);
    assert_float_equal(a->klass, b->klass, 0);
}

/* Processes 1 to 3, 0.5 J a second each, from second t0 to t1, flushed. */
static void push_three(store *s, int64_t t0, int64_t t1)
{
    for (int64_t t = t0; t < t1; t++)
        for (pid_t p = 1; p <= 3; p++)
            assert_int_equal(push_proc(s, t * NS, p, p, 0.5, 1.0, 0.01, 0, 0), 0);
    assert_int_equal(store_flush(s), 0);
}

/* Three processes: two days ago (rolled up into minute rows), and over the
 * last 200 s, moved at T0 + 100 and 200 with a few seconds left recent. */
static void fill(fixture *f)
{
    store_config c;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    for (pid_t pid = 1; pid <= 3; pid++)
        push_info(s, (T0 - 2 * DAY) * NS, pid, pid, pid == 2 ? "two" : "other", 1000);
    for (int64_t t = T0 - 2 * DAY; t < T0 - 2 * DAY + 120; t++) {
        for (pid_t pid = 1; pid <= 3; pid++)
            assert_int_equal(push_proc(s, t * NS, pid, pid, 0.5 * pid, 1.0, 0.01, 0, 0), 0);
        assert_int_equal(push_host(s, t * NS, 1.0, 8.0, 2.0, 5.0), 0);
    }
    for (int64_t t = T0; t < T0 + 205; t++) {
        for (pid_t pid = 1; pid <= 3; pid++)
            assert_int_equal(
                push_proc(s, t * NS, pid, pid, 0.25 * pid, 1.0, 0.01, (int)(t / 50) % 2, 0), 0);
        assert_int_equal(push_host(s, t * NS, 1.0, 9.0, 2.0, 6.0), 0);
        if (t == T0 + 100 || t == T0 + 200) {
            assert_int_equal(store_flush(s), 0);
            assert_true(store_maintain(s, t) >= 0);
        }
    }
    assert_int_equal(store_flush(s), 0);
    assert_int_equal(store_close(s), 0);
    assert_true(file_num(f->path, "SELECT count(*) FROM process_energy_minute") > 0);
    assert_true(file_num(f->path, "SELECT count(*) FROM settled.process_energy_settled") > 0);
    assert_true(file_num(f->path, "SELECT count(*) FROM process_energy_recent") > 0);
}

static void unlink_settled(const char *path)
{
    char name[PATH_MAX];

    snprintf(name, sizeof(name), "%s-settled", path);
    assert_int_equal(unlink(name), 0);
    snprintf(name, sizeof(name), "%s-settled-journal", path);
    unlink(name);
}

/* Rows for the tables the fill leaves empty. */
#define V9_ROWS                                                                                    \
    "INSERT INTO models VALUES (7, 'ab12', 'm', 'linear', '{}', 1700000000, 1700000001);"          \
    "INSERT INTO host_energy_minute VALUES (1699900000, 'package', 600, 610, 60);"                 \
    "INSERT INTO node_calibration VALUES"                                                          \
    " ('package', 1699800000, 4.5, 0.1, 1.0, 0.9, 2.0, 300, 'ab12');"                              \
    "INSERT INTO node_event_calibration VALUES"                                                    \
    " ('package', 1699800000, 'ab12', '[\"a\"]', '[1.5]', '[0.1]', 1.0, 0.5, 4.5, 0.1, 300);"      \
    "INSERT INTO calibration VALUES (1699999990, 1, 7, '{\"package\": 9}', '[[1.5]]');"            \
    "INSERT INTO host_energy VALUES (1700000000, 'package', 5, 5);"

/* A version 9 file, with rows in every table and no settled file, migrates:
 * the settled, batch and minute rows move to the new file and out of the
 * main one, every table reads as before, and every query answers the same. */
static void test_migrates_v10_settled_file(void **state)
{
    fixture *f = *state;
    char old[PATH_MAX + 8], sql[PATH_MAX + 256];
    answers before, after;
    store_config c;
    sqlite3 *db;

    fill(f);
    db = raw_open(f->path);
    raw_exec(db, V9_ROWS);
    sqlite3_close(db);
    before = ask(f);
    db = raw_open(f->path);
    raw_exec(db, STORE_AS_V10 "PRAGMA user_version = 10;");
    snprintf(old, sizeof(old), "%s.v10", f->path);
    unlink(old);
    snprintf(sql, sizeof(sql), "VACUUM INTO '%s'", old);
    raw_exec(db, sql);
    sqlite3_close(db);
    unlink_settled(f->path);

    config(&c);
    assert_int_equal(store_close(open_store(f->path, &c)), 0);
    db = raw_open(f->path);
    assert_int_equal(raw_num(db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM main.sqlite_master"
                                 " WHERE name LIKE 'process_energy_%' AND name != "
                                 "'process_energy_packed'"),
                     0);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM settled.sqlite_master"
                                 " WHERE type = 'table'"),
                     3);
    assert_int_equal(raw_same_tables(db, old), 15);
    sqlite3_close(db);
    unlink(old);
    after = ask(f);
    same_answers(&before, &after);
}

/* The state a crash between the move's two commits leaves, made by a
 * trigger that fails the main file's: the settled file holds the batch,
 * the recent table its rows still. A killed writer, then: the next open
 * drops the recent rows already settled, every second is counted once, and
 * the next move settles the rest once. */
static void test_crash_between_move_commits(void **state)
{
    fixture *f = *state;
    answers before, after;
    double rows, joules;
    store_config c;
    sqlite3 *db;
    pid_t pid;
    int status;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    for (int64_t t = T0; t < T0 + 40; t++)
        for (pid_t p = 1; p <= 3; p++)
            assert_int_equal(push_proc(s, t * NS, p, p, 0.25 * p, 1.0, 0.01, 0, 0), 0);
    assert_int_equal(store_close(s), 0);
    rows = file_num(f->path, "SELECT count(*) FROM process_energy");
    joules = file_num(f->path, "SELECT sum(attributed_j) FROM process_energy");
    assert_int_equal(rows, 120);
    before = ask(f);

    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        s = open_store(f->path, &c);
        db = raw_open(f->path);
        raw_exec(db, "CREATE TRIGGER main.crash BEFORE DELETE ON process_energy_packed"
                     " BEGIN SELECT RAISE(FAIL, 'crash'); END");
        sqlite3_close(db);
        _exit(store_maintain(s, T0 + 41) < 0 ? 0 : 1); /* no close: as if killed */
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    db = raw_open(f->path);
    raw_exec(db, "DROP TRIGGER main.crash");
    /* the dangerous state: both files hold the seconds */
    assert_int_equal(raw_num(db, "SELECT count(*) FROM settled.process_energy_settled"), rows);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy_recent"), rows);
    sqlite3_close(db);

    s = open_store(f->path, &c);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy_recent"), 0);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy"), rows);
    after = ask(f);
    same_answers(&before, &after);
    for (pid_t p = 1; p <= 3; p++)
        assert_int_equal(push_proc(s, (T0 + 40) * NS, p, p, 1.0, 1.0, 0.01, 0, 0), 0);
    assert_int_equal(push_proc(s, (T0 + 41) * NS, 1, 1, 1.0, 1.0, 0.01, 0, 0), 0);
    assert_int_equal(store_flush(s), 0);
    assert_int_equal(store_maintain(s, T0 + 42), 0);
    assert_int_equal(store_close(s), 0);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy"), rows + 4);
    assert_float_equal(file_num(f->path, "SELECT sum(attributed_j) FROM process_energy"),
                       joules + 4, 1e-9);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM (SELECT process_id, t FROM"
                                       " process_energy GROUP BY 1, 2 HAVING count(*) > 1)"),
                     0);
}

/* A failed commit of the main file after the settled one (a full disk, a
 * trigger here) leaves the live writer's next move to settle nothing twice. */
static void test_move_retried_after_main_failed(void **state)
{
    fixture *f = *state;
    store_config c;
    sqlite3 *db;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    push_three(s, T0, T0 + 20);
    db = raw_open(f->path);
    raw_exec(db, "CREATE TRIGGER main.crash BEFORE DELETE ON process_energy_packed"
                 " BEGIN SELECT RAISE(FAIL, 'crash'); END");
    assert_true(store_maintain(s, T0 + 21) < 0);
    raw_exec(db, "DROP TRIGGER main.crash");
    sqlite3_close(db);
    assert_int_equal(store_maintain(s, T0 + 22), 0);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM settled.process_energy_settled"), 57);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy"), 60);
    assert_int_equal(store_close(s), 0);
}

/* A reader in the middle of a statement holds a SHARED lock on the settled
 * file, which holds off the move's commit: the writer gives up after
 * SETTLED_BUSY_MS, counts it, keeps committing each second and loses no
 * row; the next maintenance after the reader is done moves them. */
static void test_reader_defers_move(void **state)
{
    fixture *f = *state;
    store_config c;
    store_stats st;
    sqlite3 *db;
    store *s;
    double t0;

    config(&c);
    s = open_store(f->path, &c);
    for (int64_t t = T0; t < T0 + 20; t++)
        assert_int_equal(push_proc(s, t * NS, 1, 1, 0.5, 1.0, 0.01, 0, 0), 0);
    assert_int_equal(store_flush(s), 0);
    db = raw_open(f->path);
    raw_exec(db, "BEGIN; SELECT count(*) FROM settled.process_energy_settled;");
    assert_int_equal(store_maintain(s, T0 + 21), 0);
    store_get_stats(s, &st);
    assert_int_equal(st.moves_deferred, 1);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM settled.process_energy_settled"), 0);
    /* the per-second commits go on meanwhile */
    t0 = now_s();
    for (int64_t t = T0 + 20; t < T0 + 30; t++) {
        assert_int_equal(push_proc(s, t * NS, 1, 1, 0.5, 1.0, 0.01, 0, 0), 0);
        assert_int_equal(store_flush(s), 0);
    }
    assert_true(now_s() - t0 < 5.0); /* not one busy timeout of the main file */
    raw_exec(db, "COMMIT");
    sqlite3_close(db);
    assert_int_equal(store_maintain(s, T0 + 31), 0);
    store_get_stats(s, &st);
    assert_int_equal(st.moves_deferred, 1);
    assert_int_equal(store_close(s), 0);
    assert_true(file_num(f->path, "SELECT count(*) FROM settled.process_energy_settled") >= 28);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy"), 30);
    assert_float_equal(file_num(f->path, "SELECT sum(attributed_j) FROM process_energy"), 15.0,
                       1e-9);
}

/* The settled file gone from beside a database: a reader refuses with the
 * file named; the writer starts it empty with one line naming it, keeps
 * the main file's rows and goes on. */
static void test_missing_settled_file(void **state)
{
    fixture *f = *state;
    char logpath[160], settled[200], err[UTIL_ERRLEN], *text;
    store_reader *r;
    store_config c;
    struct stat sb;
    pid_t pid;
    int fd, status;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    for (int64_t t = T0; t < T0 + 20; t++)
        assert_int_equal(push_proc(s, t * NS, 1, 1, 0.5, 1.0, 0.01, 0, 0), 0);
    assert_int_equal(store_flush(s), 0);
    assert_int_equal(store_maintain(s, T0 + 15), 0);
    assert_int_equal(store_close(s), 0);
    assert_true(file_num(f->path, "SELECT count(*) FROM settled.process_energy_settled") > 0);
    unlink_settled(f->path);
    snprintf(settled, sizeof(settled), "%s-settled", f->path);

    assert_true(store_reader_open(f->path, &r, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, settled));

    snprintf(logpath, sizeof(logpath), "%s/log", f->dir);
    fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd, STDERR_FILENO);
        _exit(store_close(open_store(f->path, &c)) == 0 ? 0 : 1);
    }
    close(fd);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(util_read_file(logpath, &text, NULL), 0);
    assert_non_null(strstr(text, settled));
    assert_non_null(strstr(text, "missing"));
    assert_null(strchr(strchr(text, '\n') + 1, '\n')); /* one line */
    free(text);
    assert_int_equal(stat(settled, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0640);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM settled.process_energy_settled"), 0);
    assert_true(file_num(f->path, "SELECT count(*) FROM process_energy_recent") > 0);
    store_reader_close(reader(f));
}

/* A damaged page in the settled file fails maintenance, named, while the
 * per-second commits go on and lose nothing; once the file is moved away
 * the writer starts a fresh one and the moves resume. */
static void test_corrupt_settled_page(void **state)
{
    fixture *f = *state;
    char settled[200], moved[220], junk[4096];
    store_config c;
    store_stats st;
    int64_t page, size;
    store *s;
    int fd;

    config(&c);
    s = open_store(f->path, &c);
    push_three(s, T0, T0 + 20);
    assert_int_equal(store_maintain(s, T0 + 21), 0);
    assert_int_equal(store_close(s), 0);
    page = (int64_t)file_num(f->path, "SELECT rootpage FROM settled.sqlite_master"
                                      " WHERE name = 'process_energy_batch'");
    size = (int64_t)file_num(f->path, "PRAGMA settled.page_size");
    assert_true(page > 1 && size <= (int64_t)sizeof(junk));
    memset(junk, 0xA5, sizeof(junk));
    snprintf(settled, sizeof(settled), "%s-settled", f->path);
    fd = open(settled, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, junk, (size_t)size, (page - 1) * size), size);
    close(fd);

    s = open_store(f->path, &c);
    for (int64_t t = T0 + 20; t < T0 + 30; t++) {
        assert_int_equal(push_proc(s, t * NS, 1, 1, 0.5, 1.0, 0.01, 0, 0), 0);
        assert_int_equal(store_flush(s), 0);
    }
    assert_int_equal(store_maintain(s, T0 + 31), -EBADMSG);
    store_get_stats(s, &st);
    assert_non_null(strstr(st.error_text, settled));
    assert_non_null(strstr(st.error_text, "malformed"));
    assert_int_equal(st.rows_lost, 0);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy_recent"), 13);

    snprintf(moved, sizeof(moved), "%s.corrupt", settled);
    assert_int_equal(rename(settled, moved), 0);
    assert_int_equal(push_proc(s, (T0 + 30) * NS, 1, 1, 0.5, 1.0, 0.01, 0, 0), 0);
    assert_int_equal(store_flush(s), 0);
    assert_int_equal(store_maintain(s, T0 + 32), 0);
    assert_int_equal(store_close(s), 0);
    assert_true(file_num(f->path, "SELECT count(*) FROM settled.process_energy_settled") >= 10);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy"), 14);
    unlink(moved);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_migrates_v10_settled_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_between_move_commits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_move_retried_after_main_failed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader_defers_move, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_settled_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_settled_page, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
