/* Unit tests for batch jobs in lib/store (schema version 5, jobs.c): the
 * migration that adds processes.job, and jobs read back through a
 * store_reader from a real SQLite file: ListJobs' rows, the job filter of
 * the process listing and the job history. */
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
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store-fixture.h"

static void push_job_info(store *s, int64_t t_ns, pid_t pid, const char *comm, int64_t uid,
                          const char *job)
{
    store_proc_info i = {.t_ns = t_ns,
                         .pid = pid,
                         .start_time = 1,
                         .comm = comm,
                         .cmdline = comm,
                         .cgroup = "/user.slice",
                         .job = job,
                         .uid = uid};
    assert_int_equal(store_push_proc_info(s, &i), 0);
}

/* A version 4 file (processes without job) migrates: the column is there,
 * old rows have no job, and the version is 5. */
static void test_migration_process_job(void **state)
{
    fixture *f = *state;
    store_config c;
    store *s;
    sqlite3 *db;

    config(&c);
    s = open_store(f->path, &c);
    push_info(s, T0 * NS, 100, 1, "old", 1000);
    assert_int_equal(store_close(s), 0);
    db = raw_open(f->path);
    /* Version 4: without the job, and without what later versions add. */
    raw_exec(db, STORE_PROCESSES_AS_V7);
    raw_exec(db, "DROP INDEX processes_job; ALTER TABLE processes DROP COLUMN job;"
                 "ALTER TABLE host_attribution DROP COLUMN idle_source;"
                 "ALTER TABLE host_attribution DROP COLUMN calib_t;"
                 "ALTER TABLE host_attribution_minute DROP COLUMN idle_source;"
                 "ALTER TABLE host_attribution_minute DROP COLUMN calib_t;"
                 "DROP TABLE process_fold; PRAGMA user_version = 4");
    assert_int_equal((int)raw_num(db, "SELECT count(*) FROM pragma_table_info('processes')"
                                      " WHERE name = 'job'"),
                     0);
    sqlite3_close(db);

    s = open_store(f->path, &c);
    assert_int_equal(store_close(s), 0);
    assert_int_equal((int)file_num(f->path, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    assert_int_equal((int)file_num(f->path, "SELECT count(*) FROM processes WHERE job IS NULL"), 1);
    assert_int_equal((int)file_num(f->path, "SELECT count(*) FROM sqlite_master"
                                            " WHERE name = 'processes_job'"),
                     1);
}

/* Two jobs and a process in none: ListJobs, the filtered listing and the
 * job history agree with what was pushed; a later "" keeps the job. */
static void test_jobs(void **state)
{
    fixture *f = *state;
    store_config c;
    char err[UTIL_ERRLEN];
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    push_job_info(s, T0 * NS, 10, "burn", 1000, "5151");
    push_job_info(s, T0 * NS, 11, "burn", 1000, "5151");
    push_job_info(s, T0 * NS, 12, "sim", 2000, "6262");
    push_job_info(s, T0 * NS, 13, "other", 2000, NULL);
    push_job_info(s, (T0 + 1) * NS, 10, "burn", 1000, ""); /* keeps 5151 */
    for (int k = 0; k < 4; k++) {
        int64_t t = (T0 + k) * NS + NS / 2;
        assert_int_equal(push_proc(s, t, 10, 1, 1.0, 1.0, 0.5, 0, 0), 0);
        assert_int_equal(push_proc(s, t, 11, 1, 0.5, 0.5, 0.25, 0, 0), 0);
        if (k < 2)
            assert_int_equal(push_proc(s, t, 12, 1, 2.0, 2.0, 1.0, 0, 0), 0);
        assert_int_equal(push_proc(s, t, 13, 1, 4.0, 4.0, 1.0, 0, 0), 0);
        assert_int_equal(push_host(s, t, 1.0, 20.0, 10.0, 7.5), 0);
    }
    assert_int_equal(push_host(s, (T0 + 5) * NS, 1.0, 20.0, 10.0, 0), 0);
    assert_int_equal(store_flush(s), 0);

    store_reader *r = reader(f);
    store_job_query q = {.since = T0, .until = T0 + 10, .uid = -1};
    store_job *j;
    size_t n;
    assert_int_equal(store_list_jobs(r, &q, &j, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 2);
    /* the same start: by job id */
    assert_string_equal(j[0].job, "5151");
    assert_int_equal(j[0].uid, 1000);
    assert_int_equal(j[0].processes, 2);
    assert_true(j[0].running);
    assert_float_equal(j[0].energy_j, 6.0, 1e-9);
    assert_float_equal(j[0].cpu_s, 3.0, 1e-9);
    assert_int_equal(j[0].start, T0);
    assert_int_equal(j[0].end, T0 + 3);
    assert_float_equal(j[0].node_j, 80.0, 1e-9); /* 4 s x 20 J */
    assert_string_equal(j[1].job, "6262");
    assert_float_equal(j[1].energy_j, 4.0, 1e-9);
    store_jobs_free(j, n);

    q.uid = 2000;
    assert_int_equal(store_list_jobs(r, &q, &j, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 1);
    assert_string_equal(j[0].job, "6262");
    store_jobs_free(j, n);
    q.uid = -1;
    q.job = "5151";
    q.since = T0 + 2; /* inside the window only */
    assert_int_equal(store_list_jobs(r, &q, &j, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 1);
    assert_float_equal(j[0].energy_j, 3.0, 1e-9);
    assert_float_equal(j[0].node_j, 40.0, 1e-9);
    store_jobs_free(j, n);
    q.since = q.until;
    assert_int_equal(store_list_jobs(r, &q, &j, &n, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "until"));

    store_process_query pq = {.since = T0, .until = T0 + 10, .uid = -1, .job = "5151"};
    store_process *p;
    assert_int_equal(store_list_processes(r, &pq, &p, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 2);
    assert_int_equal(p[0].pid, 10);
    assert_string_equal(p[0].job, "5151");
    store_processes_free(p, n);
    pq.job = NULL;
    pq.comm_regex = "^other$";
    assert_int_equal(store_list_processes(r, &pq, &p, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 1);
    assert_null(p[0].job);
    store_processes_free(p, n);

    store_history_query hq = {
        .by = STORE_HISTORY_JOB, .job = "6262", .since = T0, .until = T0 + 10, .step = 1};
    store_point *pts;
    assert_int_equal(store_history(r, &hq, &pts, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 2);
    assert_float_equal(pts[0].attributed_j + pts[1].attributed_j, 4.0, 1e-9);
    free(pts);
    hq.job = NULL;
    assert_int_equal(store_history(r, &hq, &pts, &n, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "job is missing"));
    store_reader_close(r);

    /* The same answers once maintenance has moved the rows: settled, then
     * rolled up into minutes. */
    int64_t nows[] = {T0 + 100, T0 + 2 * 86400};
    for (size_t k = 0; k < 2; k++) {
        while (store_maintain(s, nows[k]) == 1)
            ;
        r = reader(f);
        q = (store_job_query){.since = T0 - 60, .until = T0 + 3600, .uid = -1};
        assert_int_equal(store_list_jobs(r, &q, &j, &n, err, sizeof(err)), 0);
        assert_int_equal(n, 2);
        assert_float_equal(j[0].energy_j, 6.0, 1e-9);
        assert_float_equal(j[0].cpu_s, 3.0, 1e-9);
        assert_float_equal(j[1].energy_j, 4.0, 1e-9);
        store_jobs_free(j, n);
        store_reader_close(r);
    }
    assert_int_equal((int)file_num(f->path, "SELECT count(*) FROM process_energy_recent"), 0);
    assert_true(file_num(f->path, "SELECT count(*) FROM process_energy_minute") > 0);
    assert_int_equal(store_close(s), 0);
}

/* Reads one page of at most `limit` jobs after (start, job) into ids[],
 * "" past the last; returns how many. */
static size_t job_page(fixture *f, double start, const char *job, size_t limit, char ids[][8])
{
    char err[UTIL_ERRLEN];
    store_reader *r = reader(f);
    store_job_query q = {.since = T0 - 60,
                         .until = T0 + 3600,
                         .uid = -1,
                         .before_job = job,
                         .before_start = start,
                         .limit = limit};
    store_job *j;
    size_t n;

    assert_int_equal(store_list_jobs(r, &q, &j, &n, err, sizeof(err)), 0);
    assert_true(n <= limit);
    for (size_t i = 0; i < n; i++) {
        assert_true(strlen(j[i].job) < 8);
        strcpy(ids[i], j[i].job);
    }
    store_jobs_free(j, n);
    store_reader_close(r);
    return n;
}

/* One job of one process, first seen at second t, with a row there. */
static void one_job(store *s, int64_t t, pid_t pid, const char *job)
{
    push_job_info(s, t * NS, pid, "job", 1000, job);
    assert_int_equal(push_proc(s, t * NS + NS / 2, pid, 1, 1.0, 1.0, 0.5, 0, 0), 0);
    assert_int_equal(store_flush(s), 0);
}

/* Keyset pages: a page resumes strictly after the last job of the one
 * before (by start, newest first, then by id), so jobs that start between
 * two pages appear in neither, and none of the listing repeats or goes
 * missing; with offsets, a job starting in between pushed the first page's
 * last job onto the second. Jobs of one second page by id. */
static void test_jobs_keyset_pages(void **state)
{
    fixture *f = *state;
    store_config c;
    char ids[8][8];
    store *s;

    config(&c);
    s = open_store(f->path, &c);
    one_job(s, T0, 20, "d");
    one_job(s, T0 + 1, 21, "c");
    one_job(s, T0 + 2, 22, "b2");
    one_job(s, T0 + 2, 23, "b1"); /* the same second: b1 before b2 */
    one_job(s, T0 + 3, 24, "a");

    assert_int_equal(job_page(f, 0, NULL, 3, ids), 3);
    assert_string_equal(ids[0], "a");
    assert_string_equal(ids[1], "b1");
    assert_string_equal(ids[2], "b2");
    /* Two jobs start before the next page is asked for. */
    one_job(s, T0 + 4, 25, "new1");
    one_job(s, T0 + 5, 26, "new2");
    assert_int_equal(job_page(f, (double)(T0 + 2), "b2", 3, ids), 2);
    assert_string_equal(ids[0], "c");
    assert_string_equal(ids[1], "d");
    assert_int_equal(job_page(f, (double)T0, "d", 3, ids), 0);

    /* A page that ends inside a second resumes inside it. */
    assert_int_equal(job_page(f, (double)(T0 + 3), "a", 1, ids), 1);
    assert_string_equal(ids[0], "b1");
    assert_int_equal(job_page(f, (double)(T0 + 2), "b1", 1, ids), 1);
    assert_string_equal(ids[0], "b2");
    /* Every job once, pages of one from the top. */
    const char *want[] = {"new2", "new1", "a", "b1", "b2", "c", "d"};
    double start = 0;
    char last[8] = "";
    for (size_t k = 0; k < 7; k++) {
        assert_int_equal(job_page(f, start, k ? last : NULL, 1, ids), 1);
        assert_string_equal(ids[0], want[k]);
        strcpy(last, ids[0]);
        start = (double)(T0 + (int64_t[]){5, 4, 3, 2, 2, 1, 0}[k]);
    }
    assert_int_equal(job_page(f, start, last, 1, ids), 0);
    assert_int_equal(store_close(s), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_migration_process_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_jobs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_jobs_keyset_pages, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
