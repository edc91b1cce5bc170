/* The sampler's perf counter backend (daemon/backend-perf.c) keeps the
 * contract of daemon/backend.h, on real software perf events: a process's
 * task-clock over a burn it was told to do, a read skipped while it sleeps,
 * a final read after it exited, and a CPU target refused with a line that
 * names it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include "backend.h"
#include "util/util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Burns 0.2 s of CPU each time the parent writes to `go`, then says so. */
static void child_main(int go, int done)
{
    volatile unsigned long x = 0;
    char b;

    while (read(go, &b, 1) == 1) {
        double end = cpu_s() + 0.2;
        while (cpu_s() < end)
            for (int i = 0; i < 10000; i++)
                x += (unsigned long)i;
        if (write(done, "d", 1) != 1)
            break;
    }
    _exit(0);
}

static void test_process(void **state)
{
    const char *names[] = {"perf::TASK-CLOCK"};
    const backend *be = &backend_perf;
    sample_eventset *es;
    backend_handle *h;
    counters_delta d;
    int go[2], done[2], status;
    char err[UTIL_ERRLEN], b;

    (void)state;
    assert_int_equal(events_encode(names, 1, &es, err, sizeof(err)), 0);
    assert_int_equal(counters_delta_new(es, &d), 0);
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(done), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(go[1]); /* or its read of `go` never sees the end */
        close(done[0]);
        child_main(go[0], done[1]);
    }
    close(go[0]);
    close(done[1]);
    int r = be->open(es, pid, -1, &h, err, sizeof(err));
    if (r < 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        print_message("perf events unavailable: %s\n", err);
        skip();
    }
    assert_true(be->alive(h));
    assert_int_equal(be->read(h, &d), 0); /* from the open until now */

    assert_int_equal(write(go[1], "g", 1), 1);
    assert_int_equal(read(done[0], &b, 1), 1);
    assert_int_equal(be->read(h, &d), 0);
    assert_false(d.skipped);
    assert_true(d.scaled[0] >= 0.19e9 && d.scaled[0] <= 0.3e9); /* task-clock, ns */
    assert_true(d.ratio[0] > 0.99);

    /* Asleep in read(): once the backend knows it is off the CPU, the quiet
     * word holds still and the next read is skipped with nothing in it. */
    usleep(20000);
    assert_int_equal(be->read(h, &d), 0);
    __u64 value;
    const __u64 *word = be->quiet_word(h, &value);
    if (be->skip_error(h) == 0 && word) {
        usleep(20000);
        assert_true(__atomic_load_n(word, __ATOMIC_ACQUIRE) == value);
        assert_int_equal(be->read(h, &d), 0);
        assert_true(d.skipped);
    } else
        print_message("reads are not skipped here: %s\n", strerror(-be->skip_error(h)));

    /* It burns again and exits: the final read still has the burn. */
    assert_int_equal(write(go[1], "g", 1), 1);
    assert_int_equal(read(done[0], &b, 1), 1);
    close(go[1]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_false(be->alive(h));
    assert_int_equal(be->read(h, &d), 0);
    assert_false(d.skipped);
    assert_true(d.scaled[0] >= 0.19e9 && d.scaled[0] <= 0.3e9);
    be->close(h);
    be->close(NULL);
    close(done[0]);
    counters_delta_free(&d);
    events_free(es);
}

static void test_cpu_refused(void **state)
{
    const char *names[] = {"perf::TASK-CLOCK"};
    sample_eventset *es;
    backend_handle *h = NULL;
    char err[UTIL_ERRLEN] = "";

    (void)state;
    assert_int_equal(events_encode(names, 1, &es, err, sizeof(err)), 0);
    assert_int_equal(backend_perf.open(es, -1, 0, &h, err, sizeof(err)), -EOPNOTSUPP);
    assert_null(h);
    assert_non_null(strstr(err, "CPU 0"));
    assert_int_equal(backend_perf.open(es, 0, -1, &h, err, sizeof(err)), -EOPNOTSUPP);
    assert_non_null(strstr(err, "pid 0"));
    events_free(es);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_process),
        cmocka_unit_test(test_cpu_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
