/* Unit tests for lib/store under faults: a child process killed mid-write,
 * the state folder removed, the pending queue full, a full database, a
 * stale row-id hint, a page of the file overwritten. Real SQLite files in a temporary directory, as
 * in test_store.c. */
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
#include <stdbool.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store-fixture.h"

/* A model hash, as the store keeps them. */
static const char *sha_a = "1111111111111111111111111111111111111111111111111111111111111111";

/* ---- Faults ----------------------------------------------------------------- */

static char *raw_text(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    char *v;

    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    v = strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return v;
}

/* The child: opens the store and pushes one tick every 20 ms, real time,
 * logging each tick to `logfd` before pushing it, until it is killed. */
static void crash_child(const char *path, int logfd)
{
    char err[UTIL_ERRLEN];
    store_config c;
    store *s;

    config(&c);
    if (store_open(path, &c, &s, err, sizeof(err)) < 0)
        _exit(2);
    for (;;) {
        int64_t t = (int64_t)util_now_ns(CLOCK_REALTIME);
        char line[32];
        int len = snprintf(line, sizeof(line), "%lld\n", (long long)(t / NS));
        if (write(logfd, line, len) != len)
            _exit(3);
        push_proc(s, t, 77, 1, 1.0, 1.0, 0.02, 0, 0);
        push_host(s, t, 0.02, 2.0, 1.0, 1.0);
        sleep_ms(20);
    }
}

/* How long after a second ends its commit may still be under way at the
 * kill: the writer commits once the next second's first record is in (about
 * drain_interval_ms), but on a loaded two-core machine its thread can wait
 * longer to run. The seconds that ended longer ago must be whole. */
#define COMMIT_GRACE_NS (500 * (int64_t)1000000)

/* Waits until the child has committed once, then until 600 ms into a
 * wall-clock second at least 2 s later: the kill then falls in the middle of
 * a second, the one before it ended more than COMMIT_GRACE_NS ago, and only
 * the second in progress is at risk. Returns the kill point (CLOCK_REALTIME
 * ns); a late wake-up under load moves it, which the caller accounts for. */
static int64_t wait_then_kill_point(const char *path, const char *logpath)
{
    struct stat st;
    sqlite3 *db = NULL;
    double first = -1;
    int64_t target;

    while (stat(logpath, &st) < 0 || st.st_size == 0)
        sleep_ms(5);
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    assert_int_equal(store_sqlite_register(db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    for (double t0 = now_s(); now_s() - t0 < 10;) {
        double v = raw_num(db, "SELECT count(*) FROM host_attribution");
        if (first < 0)
            first = v;
        if (v != first)
            break;
        sleep_ms(10);
    }
    sqlite3_close(db);
    target = (util_now_ns(CLOCK_REALTIME) / NS + 3) * NS + 600 * (int64_t)1000000;
    for (int64_t now; (now = util_now_ns(CLOCK_REALTIME)) < target;)
        sleep_ms((int)((target - now) / 1000000) + 1);
    return util_now_ns(CLOCK_REALTIME);
}

/* The stored sum of ticks of second t (each tick pushes 1 J). */
static double stored_ticks(sqlite3 *db, int64_t t)
{
    char sql[160];

    snprintf(sql, sizeof(sql),
             "SELECT coalesce(sum(attributed_j), 0) FROM process_energy WHERE t = %lld",
             (long long)t);
    return raw_num(db, sql);
}

/* SIGKILL a process mid-write: the file is intact, reopens, holds every
 * second whole or not at all, and every second that ended more than
 * COMMIT_GRACE_NS before the kill. */
static void test_crash_loses_at_most_last_second(void **state)
{
    fixture *f = *state;
    char logpath[160], *text, *line, *save, *check;
    int64_t kill_ns, first = 0, last = 0, counts[64] = {0};
    long logged = 0, stored = 0, at_risk = 0;
    sqlite3 *db;
    pid_t pid;
    int fd, status;

    snprintf(logpath, sizeof(logpath), "%s/log", f->dir);
    fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
    assert_true(fd >= 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        crash_child(f->path, fd);
    close(fd);
    kill_ns = wait_then_kill_point(f->path, logpath);
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));

    assert_int_equal(util_read_file(logpath, &text, NULL), 0);
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        int64_t t = atoll(line);
        if (!first)
            first = t;
        assert_true(t - first < 64);
        counts[t - first]++;
        last = t;
        logged++;
    }
    free(text);

    db = raw_open(f->path);
    check = raw_text(db, "PRAGMA integrity_check");
    assert_string_equal(check, "ok");
    free(check);
    assert_true(raw_num(db, "SELECT count(*) FROM host_attribution") >= 3);
    for (int64_t t = first; t <= last; t++) {
        double got = stored_ticks(db, t);
        bool settled = (t + 1) * NS + COMMIT_GRACE_NS <= kill_ns;

        stored += (long)got;
        /* A second is committed whole, once: never a part of it. */
        if (got != 0 && got != (double)counts[t - first])
            fail_msg("second %lld holds %.0f of its %lld ticks", (long long)(t - first), got,
                     (long long)counts[t - first]);
        if (!settled)
            at_risk += counts[t - first];
        else if (got == 0)
            fail_msg("second %lld lost, %.3f s after it ended (kill %.3f s into its second)",
                     (long long)(t - first), (double)(kill_ns - (t + 1) * NS) / 1e9,
                     (double)(kill_ns % NS) / 1e9);
    }
    /* Lost: only ticks of the second in progress (and, after a late wake-up,
     * of one that ended within the grace). */
    assert_true(stored <= logged);
    assert_true(logged - stored <= at_risk);
    sqlite3_close(db);

    /* And the store opens it again and carries on. */
    store_config c;
    config(&c);
    store *s = open_store(f->path, &c);
    assert_int_equal(push_proc(s, kill_ns, 77, 1, 1.0, 1.0, 0.02, 0, 0), 0);
    assert_int_equal(store_close(s), 0);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM processes"), 1);
}

/* The state directory disappears: commits fail, the error is reported with
 * the path, pushes go on, and when the directory is back the rows held in
 * memory are written to a fresh database there. */
static void test_directory_removed_then_back(void **state)
{
    fixture *f = *state;
    store_config c;
    store_stats st;
    store *s;

    char err[UTIL_ERRLEN];
    int32_t id;

    config(&c);
    s = open_store(f->path, &c);
    assert_int_equal(store_model_add(s, sha_a, "a", "ridge", "{}", &id, err, sizeof(err)), 0);
    assert_int_equal(push_proc(s, T0 * NS, 1, 1, 1.0, 1.0, 0.1, 0, id), 0);
    assert_int_equal(store_flush(s), 0);
    remove_db(f->path);
    assert_int_equal(rmdir(f->dir), 0);

    assert_int_equal(push_proc(s, (T0 + 1) * NS, 2, 2, 2.0, 2.0, 0.1, 0, 0), 0);
    assert_true(store_flush(s) < 0);
    store_get_stats(s, &st);
    assert_true(st.error < 0);
    assert_true(strncmp(st.error_text, f->path, strlen(f->path)) == 0);
    assert_true(st.commit_failures >= 1);
    assert_int_equal(push_proc(s, (T0 + 2) * NS, 2, 2, 3.0, 3.0, 0.1, 0, 0), 0);
    assert_true(store_flush(s) < 0);

    assert_int_equal(mkdir(f->dir, 0700), 0);
    assert_int_equal(store_flush(s), 0);
    store_get_stats(s, &st);
    assert_int_equal(st.error, 0);
    assert_string_equal(st.error_text, "");
    assert_int_equal(store_close(s), 0);
    assert_float_equal(file_num(f->path, "SELECT sum(attributed_j) FROM process_energy"), 5.0,
                       1e-9);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM processes"), 1);
    /* The model its rows name is in the new file too. */
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM models WHERE id = 1"), 1);
}

/* The writer remembers each process's row id between commits, as a hint:
 * when the row under that id is no longer the process's (renumbered, and the
 * id taken by another process), its seconds still go to its own row and the
 * other row is untouched. */
static void test_row_id_hint_checked(void **state)
{
    fixture *f = *state;
    store_config c;
    sqlite3 *db;
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    assert_int_equal(push_proc(s, T0 * NS, 1, 1, 1.0, 1.5, 0.1, 0, 0), 0);
    assert_int_equal(push_proc(s, T0 * NS, 2, 2, 2.0, 2.5, 0.2, 1, 0), 0);
    assert_int_equal(push_proc(s, (T0 + 1) * NS, 1, 1, 0.0, 0.0, 0.0, 0, 0), 0);
    assert_int_equal(store_flush(s), 0);

    db = raw_open(f->path);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM processes WHERE id IN (1, 2)"), 2);
    raw_exec(db, "BEGIN; UPDATE processes SET id = id + 100;"
                 " UPDATE process_energy_recent SET process_id = process_id + 100;"
                 " UPDATE process_energy_settled SET process_id = process_id + 100;"
                 " INSERT INTO processes (id, boot_id, pid, start_time, first_seen, last_seen)"
                 " VALUES (1, 'test-boot', 99, 99, 5, 5), (2, 'test-boot', 98, 98, 5, 5); COMMIT");
    assert_int_equal(push_proc(s, (T0 + 2) * NS, 1, 1, 4.0, 4.5, 0.4, 0, 0), 0);
    assert_int_equal(push_proc(s, (T0 + 2) * NS, 2, 2, 8.0, 8.5, 0.8, 1, 0), 0);
    assert_int_equal(store_close(s), 0);

    assert_float_equal(raw_num(db, "SELECT attributed_j FROM processes WHERE pid = 1"), 5.0, 1e-12);
    assert_float_equal(raw_num(db, "SELECT attributed_j FROM processes WHERE pid = 2"), 10.0,
                       1e-12);
    assert_int_equal(raw_num(db, "SELECT last_seen FROM processes WHERE pid = 2"), T0 + 2);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM processes WHERE id IN (1, 2)"
                                 " AND attributed_j = 0 AND last_seen = 5"),
                     2);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM process_energy e JOIN processes p"
                                 " ON p.id = e.process_id WHERE p.pid IN (1, 2)"),
                     5);
    assert_float_equal(raw_num(db, "SELECT e.standalone_j FROM process_energy e JOIN processes p"
                                   " ON p.id = e.process_id WHERE p.pid = 2 AND e.t = 1700000002"),
                       8.5, 1e-12);
    sqlite3_close(db);
}

/* Past max_pending_rows the rows held for a broken database are given up,
 * counted, and the writer goes on with what comes next. */
static void test_pending_rows_bounded(void **state)
{
    fixture *f = *state;
    store_config c;
    store_stats st;
    store *s;

    config(&c);
    c.max_pending_rows = 10;
    s = open_store(f->path, &c);
    remove_db(f->path);
    assert_int_equal(rmdir(f->dir), 0);
    push_many_at(s, T0, 1, 20);
    assert_true(store_flush(s) < 0);
    store_get_stats(s, &st);
    assert_int_equal(st.rows_lost, 20);
    assert_int_equal(st.pending_rows, 0); /* given up, not held */
    assert_int_equal(st.max_pending_rows, 10);
    push_many_at(s, T0 + 1, 50, 4);
    assert_true(store_flush(s) < 0);
    store_get_stats(s, &st);
    assert_int_equal(st.pending_rows, 4); /* under the bound: held for a retry */
    assert_int_equal(mkdir(f->dir, 0700), 0);
    push_many_at(s, T0 + 1, 100, 2);
    assert_int_equal(store_flush(s), 0);
    assert_int_equal(store_close(s), 0);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy"), 6);
    assert_int_equal(file_num(f->path, "SELECT min(pid) FROM processes"), 50);
}

/* A full database (max_db_bytes): the commit fails with -ENOSPC and keeps
 * its rows; once retention frees pages, they are written. */
static void test_full_database_resumes(void **state)
{
    fixture *f = *state;
    int64_t now = T0 + 100 * 86400;
    double empty, one;
    store_config c;
    store_stats st;
    store *s;

    config(&c);
    c.queue_capacity = 4096;
    assert_int_equal(store_close(open_store(f->path, &c)), 0);
    empty = file_num(f->path, "PRAGMA page_count");
    s = open_store(f->path, &c);
    push_many_at(s, T0, 1, 1500);
    assert_int_equal(store_close(s), 0);
    one = file_num(f->path, "PRAGMA page_count") - empty;

    /* Room for half of a second batch. */
    c.max_db_bytes = (int64_t)((empty + one * 1.5) * file_num(f->path, "PRAGMA page_size"));
    s = open_store(f->path, &c);
    push_many_at(s, now - 10, 5000, 1500);
    assert_int_equal(store_flush(s), -ENOSPC);
    store_get_stats(s, &st);
    assert_int_equal(st.error, -ENOSPC);
    assert_non_null(strstr(st.error_text, "commit failed"));

    /* Retention drops the first batch (100 days old); the second fits. */
    assert_int_equal(store_maintain(s, now), -ENOSPC); /* its commit still fails first */
    assert_int_equal(store_flush(s), 0);
    assert_int_equal(store_close(s), 0);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy"), 1500);
    assert_int_equal(file_num(f->path, "SELECT min(pid) FROM processes"), 5000);
}

/* A page of the file overwritten (a bad sector, a stray write): the commit
 * fails with -EBADMSG and an error naming the file and the corruption, the
 * rows wait in memory as for a full disk, and the rest of the file still
 * reads. Once the damaged file is moved away, the held rows go to a fresh
 * file at the same path: nothing but the damaged page is lost. */
static void test_corrupt_page_reported(void **state)
{
    fixture *f = *state;
    char moved[200], junk[65536];
    store_config c;
    store_stats st;
    sqlite3 *db;
    int64_t page, size;
    store *s;
    int fd;

    config(&c);
    s = open_store(f->path, &c);
    push_many_at(s, T0, 1, 1500);
    for (int64_t t = T0; t < T0 + 3; t++)
        assert_int_equal(push_host(s, t * NS, 1.0, 3.0, 1.0, 1.5), 0);
    assert_int_equal(store_close(s), 0);
    page = (int64_t)file_num(f->path,
                             "SELECT rootpage FROM sqlite_master WHERE name = 'process_info'");
    size = (int64_t)file_num(f->path, "PRAGMA page_size");
    assert_true(page > 1 && file_num(f->path, "SELECT count(*) FROM processes") == 1500);
    assert_true(size <= (int64_t)sizeof(junk));
    memset(junk, 0xA5, sizeof(junk));
    fd = open(f->path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, junk, (size_t)size, (page - 1) * size), size);
    close(fd);

    s = open_store(f->path, &c);
    push_many_at(s, T0 + 5, 1, 10);
    assert_int_equal(store_flush(s), -EBADMSG);
    store_get_stats(s, &st);
    assert_int_equal(st.error, -EBADMSG);
    assert_non_null(strstr(st.error_text, f->path));
    assert_non_null(strstr(st.error_text, "malformed"));
    assert_true(st.pending_rows >= 10);
    assert_int_equal(st.rows_lost, 0);
    /* the other tables read as before */
    db = raw_open(f->path);
    assert_int_equal(raw_num(db, "SELECT count(*) FROM host_attribution"), 3);
    assert_float_equal(raw_num(db, "SELECT sum(host_j) FROM host_attribution"), 9.0, 1e-12);
    sqlite3_close(db);

    snprintf(moved, sizeof(moved), "%s.corrupt", f->path);
    assert_int_equal(rename(f->path, moved), 0);
    assert_int_equal(store_flush(s), 0);
    assert_int_equal(store_close(s), 0);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM process_energy"), 10);
    assert_int_equal(file_num(f->path, "SELECT count(*) FROM processes"), 10);
    unlink(moved);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_crash_loses_at_most_last_second, setup, teardown),
        cmocka_unit_test_setup_teardown(test_directory_removed_then_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pending_rows_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_database_resumes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_row_id_hint_checked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_page_reported, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
