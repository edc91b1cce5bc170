/* Real software perf events through lib/sample/counters.c: a process with a
 * thread created before counting starts and one created after is counted
 * whole, within 3 % of the CPU time it burned. Also the pure multiplexing
 * arithmetic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "sample/sample.h"
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *burn_one_second(void *arg)
{
    int *go = arg;
    volatile unsigned long x = 0;
    char b;

    if (go && read(*go, &b, 1) != 1)
        return NULL;
    double end = thread_cpu_s() + 1.0;
    while (thread_cpu_s() < end)
        for (int i = 0; i < 10000; i++)
            x += (unsigned long)i;
    return NULL;
}

/* Child: thread A exists before the parent opens counters, waits for `go`,
 * then burns 1 s; after `go` the main thread starts thread B, which burns
 * 1 s too. */
static void child_main(int ready, int go)
{
    pthread_t a, b;

    pthread_create(&a, NULL, burn_one_second, &go);
    if (write(ready, "r", 1) != 1)
        _exit(1);
    pthread_join(a, NULL); /* A burns once the parent says go */
    pthread_create(&b, NULL, burn_one_second, NULL);
    pthread_join(b, NULL);
    _exit(0);
}

static void test_two_threads_task_clock(void **state)
{
    const char *names[] = {"perf::TASK-CLOCK", "perf::CONTEXT-SWITCHES"};
    sample_eventset *es;
    counters_proc *cp;
    counters_delta d;
    int ready[2], go[2], status;
    char err[UTIL_ERRLEN], b;
    const double *tot, *ratio;

    assert_int_equal(events_encode(names, 2, &es, err, sizeof(err)), 0);
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(go), 0);
    pid_t pid = fork();
    if (pid == 0)
        child_main(ready[1], go[0]);
    assert_int_equal(read(ready[0], &b, 1), 1);
    int r = counters_open(es, pid, 0, &cp, err, sizeof(err));
    if (r < 0) {
        kill(pid, SIGKILL);
        fail_msg("counters_open: %s", err);
    }
    assert_int_equal(counters_delta_new(es, &d), 0);
    assert_true(counters_alive(cp));
    assert_int_equal(write(go[1], "g", 1), 1);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(counters_read(cp, &d), 0);
    assert_false(counters_alive(cp));
    counters_totals(cp, &tot, &ratio);
    double seconds = tot[0] / 1e9;
    print_message("task-clock %.4f s over 2 threads (expect 2.0 s)\n", seconds);
    assert_true(seconds > 2.0 * 0.97 && seconds < 2.0 * 1.03);
    assert_float_equal(ratio[0], 1.0, 1e-9);
    counters_delta_free(&d);
    counters_close(cp);
    events_free(es);
}

static void test_scale_group_multiplexing(void **state)
{
    /* Two events in one group, enabled 100 ns, running 25 ns: x4. */
    const size_t event[] = {1, 0};
    uint64_t prev[] = {2, 1000, 500, 10, 20};
    uint64_t now[] = {2, 1100, 525, 15, 30};
    double scaled[2] = {0};
    uint64_t en[2] = {0}, run[2] = {0};

    counters_scale_group(prev, now, event, scaled, en, run);
    assert_float_equal(scaled[1], 20, 1e-12);
    assert_float_equal(scaled[0], 40, 1e-12);
    assert_int_equal(en[0], 100);
    assert_int_equal(run[0], 25);

    /* Never scheduled in the interval: nothing to scale, not infinity. */
    uint64_t later[] = {2, 1200, 525, 15, 30};
    memset(scaled, 0, sizeof(scaled));
    counters_scale_group(now, later, event, scaled, en, run);
    assert_float_equal(scaled[0], 0, 0);
}

static void test_open_missing_process(void **state)
{
    const char *names[] = {"perf::TASK-CLOCK"};
    sample_eventset *es;
    counters_proc *cp;
    char err[UTIL_ERRLEN];

    assert_int_equal(events_encode(names, 1, &es, err, sizeof(err)), 0);
    /* pid_max is at most 2^22: this pid cannot exist. */
    assert_int_equal(counters_open(es, 1 << 23, 0, &cp, err, sizeof(err)), -ESRCH);
    assert_string_equal(err, "task 8388608: No such process");
    events_free(es);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_threads_task_clock),
        cmocka_unit_test(test_scale_group_multiplexing),
        cmocka_unit_test(test_open_missing_process),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
