/* COUNTERS_SKIP_IDLE against real processes and real software events
 * (lib/sample/runwatch.c): a sleeper is skipped, a process that wakes is
 * read, a process that never leaves the CPU is read every tick, a
 * multi-threaded process whose threads come and go is never skipped while
 * one of them runs, and without locked memory for the ring buffers every
 * read happens. "Never skipped wrongly" is checked against a second set of
 * counters on the same process, read without skipping just before each
 * tick: the skipping set's running total may never fall behind it. Each
 * tick trusts counters_quiet_word as wattprofd does: while the word holds,
 * the skipping set is not even looked at. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "sample/sample.h"
#include "util/util.h"

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TICK_NS 20000000L

static const char *event_names[] = {"perf::TASK-CLOCK", "perf::CONTEXT-SWITCHES",
                                    "perf::CPU-MIGRATIONS", "perf::PAGE-FAULTS"};
enum { N_EVENTS = 4 };

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void burn(double seconds)
{
    volatile unsigned long x = 0;
    double end = thread_cpu_s() + seconds;

    while (thread_cpu_s() < end)
        for (int i = 0; i < 1000; i++)
            x += (unsigned long)i;
}

static void sleep_ns(long ns)
{
    struct timespec ts = {.tv_sec = ns / 1000000000L, .tv_nsec = ns % 1000000000L};
    nanosleep(&ts, NULL);
}

/* Child: on 'b' burns 5 ms and answers 'k'; on EOF exits. */
static void sleeper_main(int cmd, int reply)
{
    char c;

    if (write(reply, "r", 1) != 1)
        _exit(1);
    while (read(cmd, &c, 1) == 1) {
        burn(0.005);
        if (write(reply, "k", 1) != 1)
            _exit(1);
    }
    _exit(0);
}

struct pair {
    sample_eventset *es;
    counters_proc *skip, *ref;
    counters_delta d, dref;
    int skipped, read;
    const __u64 *quiet_word; /* counters_quiet_word after the latest read */
    __u64 quiet_value;
    int quiet; /* ticks the word proved asleep (counted in skipped too) */
};

/* Opens the skipping set, then the reference set, on `pid`. If the process
 * is blocked meanwhile both start from the same counts; if it runs, the
 * skipping set can only be ahead. */
static void pair_open(struct pair *p, pid_t pid)
{
    char err[UTIL_ERRLEN];

    memset(p, 0, sizeof(*p));
    assert_int_equal(events_encode(event_names, N_EVENTS, &p->es, err, sizeof(err)), 0);
    assert_int_equal(counters_open(p->es, pid, COUNTERS_SKIP_IDLE, &p->skip, err, sizeof(err)), 0);
    assert_int_equal(counters_open(p->es, pid, 0, &p->ref, err, sizeof(err)), 0);
    assert_int_equal(counters_skip_error(p->skip), 0);
    assert_int_equal(counters_delta_new(p->es, &p->d), 0);
    assert_int_equal(counters_delta_new(p->es, &p->dref), 0);
}

/* One tick: the reference first, then the skipping set, whose total must
 * be at least what the reference saw a moment before. */
static void pair_tick(struct pair *p)
{
    const double *ref_tot, *skip_tot, *ratio;

    assert_int_equal(counters_read(p->ref, &p->dref), 0);
    if (p->quiet_word && __atomic_load_n(p->quiet_word, __ATOMIC_ACQUIRE) == p->quiet_value) {
        p->quiet++;
        memset(p->d.scaled, 0, N_EVENTS * sizeof(double));
        for (int ev = 0; ev < N_EVENTS; ev++)
            p->d.ratio[ev] = 1.0;
        p->d.skipped = true;
    } else {
        assert_int_equal(counters_read(p->skip, &p->d), 0);
        p->quiet_word = counters_quiet_word(p->skip, &p->quiet_value);
    }
    counters_totals(p->ref, &ref_tot, &ratio);
    counters_totals(p->skip, &skip_tot, &ratio);
    for (int ev = 0; ev < N_EVENTS; ev++)
        if (skip_tot[ev] < ref_tot[ev])
            fail_msg("%s: skipping total %.0f behind the reference's %.0f (tick %d, skipped %d)",
                     event_names[ev], skip_tot[ev], ref_tot[ev], p->read + p->skipped,
                     p->d.skipped);
    if (p->d.skipped) {
        p->skipped++;
        for (int ev = 0; ev < N_EVENTS; ev++) {
            assert_true(p->d.scaled[ev] == 0);
            assert_true(p->d.ratio[ev] == 1.0);
        }
    } else {
        p->read++;
    }
}

/* After the process has exited: both sets read their final counts, which
 * must be the same, and so must the overall running/enabled ratios. */
static void pair_close_exact(struct pair *p)
{
    const double *ref_tot, *skip_tot, *ref_ratio, *skip_ratio;

    assert_int_equal(counters_read(p->ref, &p->dref), 0);
    assert_int_equal(counters_read(p->skip, &p->d), 0);
    counters_totals(p->ref, &ref_tot, &ref_ratio);
    counters_totals(p->skip, &skip_tot, &skip_ratio);
    for (int ev = 0; ev < N_EVENTS; ev++) {
        print_message("  %-24s skipping %12.0f reference %12.0f ratio %.6f/%.6f\n", event_names[ev],
                      skip_tot[ev], ref_tot[ev], skip_ratio[ev], ref_ratio[ev]);
        assert_true(skip_tot[ev] == ref_tot[ev]);
        assert_true(skip_ratio[ev] == ref_ratio[ev]);
    }
    counters_delta_free(&p->d);
    counters_delta_free(&p->dref);
    counters_close(p->skip);
    counters_close(p->ref);
    events_free(p->es);
}

static void test_sleeper_skipped_waker_read(void **state)
{
    int cmd[2], reply[2], status;
    struct pair p;
    char c;

    assert_int_equal(pipe(cmd), 0);
    assert_int_equal(pipe(reply), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(cmd[1]);
        sleeper_main(cmd[0], reply[1]);
    }
    close(cmd[0]);
    assert_int_equal(read(reply[0], &c, 1), 1);
    sleep_ns(50000000L); /* let it block in read() */
    pair_open(&p, pid);

    for (int i = 0; i < 50; i++) {
        sleep_ns(TICK_NS);
        pair_tick(&p);
    }
    print_message("  asleep: %d of 50 reads skipped, %d of them by the quiet word alone\n",
                  p.skipped, p.quiet);
    /* One read to learn that a buffer without records means asleep, and
     * once it is known off the CPU the word alone says so. */
    assert_true(p.skipped >= 48);
    assert_true(p.quiet >= 47);

    for (int round = 0; round < 5; round++) {
        int before = p.skipped;
        assert_int_equal(write(cmd[1], "b", 1), 1);
        assert_int_equal(read(reply[0], &c, 1), 1);
        pair_tick(&p);
        assert_false(p.d.skipped);
        print_message("  woke: task-clock %.2f ms\n", p.d.scaled[0] / 1e6);
        assert_true(p.d.scaled[0] >= 4.5e6);
        /* Back to sleep: skipped again within a few ticks (up to 50 on a
         * loaded machine, where it may wait to run its read()). */
        for (int i = 0; i < 50 && p.skipped == before; i++) {
            sleep_ns(TICK_NS);
            pair_tick(&p);
        }
        assert_true(p.skipped > before);
    }
    close(cmd[1]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    pair_close_exact(&p);
}

/* A SCHED_FIFO burner is never preempted by the rest of the machine, so
 * it is on a CPU at every look and must be read at every tick. */
static void test_running_process_read_every_tick(void **state)
{
    struct sched_param sp = {.sched_priority = 1};
    int ready[2], status;
    struct pair p;
    char c;

    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    if (pid == 0) {
        if (write(ready[1], "r", 1) != 1)
            _exit(1);
        burn(0.8);
        _exit(0);
    }
    assert_int_equal(read(ready[0], &c, 1), 1);
    if (sched_setscheduler(pid, SCHED_FIFO, &sp) < 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        skip(); /* not root: the burner could be preempted for a whole tick */
    }
    /* Opened while it runs: its buffer has no record yet, and "unknown"
     * must count as running. */
    sleep_ns(50000000L);
    pair_open(&p, pid);
    for (int i = 0; i < 20; i++) {
        sleep_ns(TICK_NS);
        pair_tick(&p);
        assert_false(p.d.skipped);
        assert_true(p.d.scaled[0] > 0);
    }
    print_message("  burning: %d of 20 reads skipped\n", p.skipped);
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    counters_delta_free(&p.d);
    counters_delta_free(&p.dref);
    counters_close(p.skip);
    counters_close(p.ref);
    events_free(p.es);
}

/* ---- threads: one that exists before opening, one made after, and one
 * made by that one (its FORK record lands in a buffer we open late). */

static void *worker(void *arg)
{
    long spawn = (long)arg;
    pthread_t t;

    if (spawn)
        pthread_create(&t, NULL, worker, (void *)0L);
    for (int i = 0; i < 8; i++) {
        sleep_ns(60000000L);
        burn(0.002);
    }
    if (spawn)
        pthread_join(t, NULL);
    return NULL;
}

static void threads_main(int cmd, int reply)
{
    pthread_t a, b;
    char c;

    pthread_create(&a, NULL, worker, (void *)0L);
    if (write(reply, "r", 1) != 1 || read(cmd, &c, 1) != 1)
        _exit(1);
    pthread_create(&b, NULL, worker, (void *)1L);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    if (write(reply, "d", 1) != 1)
        _exit(1);
    while (read(cmd, &c, 1) == 1)
        ;
    _exit(0);
}

static void test_threads_never_skipped_while_running(void **state)
{
    int cmd[2], reply[2], status;
    struct pair p;
    char c;
    const double *tot, *ratio;

    assert_int_equal(pipe(cmd), 0);
    assert_int_equal(pipe(reply), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(cmd[1]);
        threads_main(cmd[0], reply[1]);
    }
    close(cmd[0]);
    assert_int_equal(read(reply[0], &c, 1), 1);
    sleep_ns(100000000L); /* thread A is in its first 60 ms sleep, main in read() */
    pair_open(&p, pid);
    assert_int_equal(write(cmd[1], "g", 1), 1);
    /* Until the workers are done: about 0.5 s, longer on a loaded machine. */
    for (int i = 0; i < 1500; i++) {
        struct pollfd pfd = {.fd = reply[0], .events = POLLIN};
        sleep_ns(TICK_NS);
        pair_tick(&p);
        if (poll(&pfd, 1, 0) == 1)
            break;
    }
    counters_totals(p.skip, &tot, &ratio);
    print_message("  3 threads: %d read, %d skipped (%d by the quiet word), task-clock %.1f ms\n",
                  p.read, p.skipped, p.quiet, tot[0] / 1e6);
    /* Each worker burns 8 x 2 ms; the skipping set must have seen them. */
    assert_true(tot[0] >= 3 * 8 * 2e6 * 0.95);
    assert_int_equal(read(reply[0], &c, 1), 1);
    assert_int_equal(c, 'd');
    /* All asleep now, with buffers on threads made after opening. */
    int before = p.skipped;
    for (int i = 0; i < 10; i++) {
        sleep_ns(TICK_NS);
        pair_tick(&p);
    }
    assert_true(p.skipped > before);
    close(cmd[1]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    pair_close_exact(&p);
}

/* ---- no locked memory: an unprivileged user whose per-user perf budget
 * (perf_event_mlock_kb x CPUs) is too small for one buffer per thread and
 * whose RLIMIT_MEMLOCK is 0 gets -EPERM and reads every time. */

static void *block_forever(void *arg)
{
    int fd = (int)(long)arg;
    char c;

    while (read(fd, &c, 1) != 0)
        ;
    return NULL;
}

static int unprivileged_opener(long threads)
{
    struct rlimit none = {0, 0};
    int hold[2], ready[2];
    sample_eventset *es;
    counters_proc *cp;
    counters_delta d;
    char err[UTIL_ERRLEN], c;

    if (setrlimit(RLIMIT_MEMLOCK, &none) < 0 || setgroups(0, NULL) < 0 || setgid(64999) < 0 ||
        setuid(64999) < 0 || prctl(PR_SET_DUMPABLE, 1) < 0 || pipe(hold) < 0 || pipe(ready) < 0)
        return 10;
    pid_t pid = fork();
    if (pid == 0) {
        pthread_attr_t at;
        pthread_t t;
        close(hold[1]);
        pthread_attr_init(&at);
        pthread_attr_setstacksize(&at, 64 * 1024);
        for (long i = 0; i < threads; i++)
            if (pthread_create(&t, &at, block_forever, (void *)(long)hold[0]) != 0)
                _exit(1);
        if (write(ready[1], "r", 1) != 1)
            _exit(1);
        block_forever((void *)(long)hold[0]);
        _exit(0);
    }
    close(hold[0]);
    if (read(ready[0], &c, 1) != 1)
        return 11;
    if (events_encode(event_names, 1, &es, err, sizeof(err)) < 0 ||
        events_probe(es, err, sizeof(err)) < 0)
        return 12;
    if (counters_open(es, pid, COUNTERS_SKIP_IDLE, &cp, err, sizeof(err)) < 0) {
        fprintf(stderr, "counters_open: %s\n", err);
        return 13;
    }
    if (counters_skip_error(cp) != -EPERM) {
        fprintf(stderr, "counters_skip_error: %d\n", counters_skip_error(cp));
        return 14;
    }
    if (counters_delta_new(es, &d) < 0)
        return 15;
    for (int i = 0; i < 5; i++)
        if (counters_read(cp, &d) < 0 || d.skipped)
            return 16;
    close(hold[1]);
    waitpid(pid, NULL, 0);
    counters_delta_free(&d);
    counters_close(cp);
    events_free(es);
    return 0;
}

static long read_long_file(const char *path)
{
    FILE *f = fopen(path, "r");
    long v = -1;

    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static void test_no_locked_memory_reads_every_time(void **state)
{
    long kb = read_long_file("/proc/sys/kernel/perf_event_mlock_kb");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long page_kb = sysconf(_SC_PAGESIZE) / 1024;
    int status;

    if (geteuid() != 0 || kb < 0) {
        print_message("  skipped: needs root to become an unprivileged user\n");
        skip();
    }
    /* Two pages a buffer; the budget is charged to the user, not the process. */
    long threads = kb / page_kb * cpus / 2 + 16;
    if (threads > 3000) {
        print_message("  skipped: %ld threads needed to exhaust perf_event_mlock_kb\n", threads);
        skip();
    }
    pid_t pid = fork();
    if (pid == 0)
        _exit(unprivileged_opener(threads));
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sleeper_skipped_waker_read),
        cmocka_unit_test(test_running_process_read_every_tick),
        cmocka_unit_test(test_threads_never_skipped_while_running),
        cmocka_unit_test(test_no_locked_memory_reads_every_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
