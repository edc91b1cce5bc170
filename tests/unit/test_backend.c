/* The sampler's counter backends (daemon/backend-perf.c, backend-bpf.c)
 * keep the contract of daemon/backend.h, on real software perf events: a
 * process's task-clock over a burn it was told to do, a read skipped while
 * it sleeps, a final read after it exited, and a CPU target refused with a
 * line that names it. The bpf backend also: a process that lives a
 * millisecond is offered for adoption with its count and its command after
 * exec (again later when deferred, and as exited when found again as a
 * zombie), a reused pid (another start time) is another process, and a
 * pid's counts come in the ring while a handle has that pid, and a
 * process whose threads end together is offered once, with what all of
 * them ran, as is each of more exited processes than the ring holds; a
 * tracked process looked up between its exit hook and its last switch is
 * counted once, by its handle. Its tests skip, saying why, where BPF
 * cannot load (not root, no BTF). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include "backend.h"
#include "util/util.h"

#ifdef WATTPROF_BPF
#include "bpf/wattprof.h"

#include <bpf/bpf.h>
#endif

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
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

/* A child that runs body(go, done) on two new pipes; the parent keeps
 * the write end of `go` (*go_w) and the read end of `done` (*done_r). */
static pid_t spawn_on_pipes(void (*body)(int go, int done), int *go_w, int *done_r)
{
    int go[2], done[2];

    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(done), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(go[1]); /* or its read of `go` never sees the end */
        close(done[0]);
        body(go[0], done[1]);
    }
    close(go[0]);
    close(done[1]);
    *go_w = go[1];
    *done_r = done[0];
    return pid;
}

/* The bpf backend loaded for `es`, or a skip that says why not. */
static void load_bpf(const sample_eventset *es)
{
    char err[UTIL_ERRLEN];

    if (backend_bpf_load(es, 20000000, err, sizeof(err)) < 0) {
        print_message("bpf backend unavailable: %s\n", err);
        skip();
    }
}

/* What the kernel side counted so far, for the reads that follow. */
static void drain(const backend *be)
{
    if (be->drain)
        assert_int_equal(be->drain(NULL, NULL, NULL), 0);
}

static uint64_t start_of(pid_t pid)
{
    procs_info info = {0};

    assert_int_equal(procs_read_stat(pid, &info), 0);
    procs_info_clear(&info);
    return info.start_ticks;
}

/* A burn of 0.2 CPU s counted as such (task-clock, ns); the value is
 * printed when it is not. */
static void burn_within(const counters_delta *d, const char *what)
{
    if (d->scaled[0] < 0.19e9 || d->scaled[0] > 0.3e9) {
        print_error("%s: task-clock %.0f ns, not 0.19e9-0.3e9 (ratio %.3f)\n", what, d->scaled[0],
                    d->ratio[0]);
        fail();
    }
}

static void run_process(const backend *be)
{
    const char *names[] = {"perf::TASK-CLOCK"};
    sample_eventset *es;
    backend_handle *h;
    counters_delta d;
    int go, done, status;
    char err[UTIL_ERRLEN], b;

    assert_int_equal(events_encode(names, 1, &es, err, sizeof(err)), 0);
    if (be == &backend_bpf)
        load_bpf(es);
    assert_int_equal(counters_delta_new(es, &d), 0);
    pid_t pid = spawn_on_pipes(child_main, &go, &done);
    int r = be->open(es, pid, start_of(pid), -1, &h, err, sizeof(err));
    if (r < 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        print_message("perf events unavailable: %s\n", err);
        skip();
    }
    drain(be);
    assert_true(be->alive(h));
    assert_int_equal(be->read(h, &d), 0); /* from the open until now */

    assert_int_equal(write(go, "g", 1), 1);
    assert_int_equal(read(done, &b, 1), 1);
    usleep(1000); /* off its CPU: the switch has counted it */
    drain(be);
    assert_int_equal(be->read(h, &d), 0);
    assert_false(d.skipped);
    burn_within(&d, "the first burn"); /* task-clock, ns */
    assert_true(d.ratio[0] > 0.99);

    /* Asleep in read(): once the backend knows it is off the CPU, the quiet
     * word holds still and the next read is skipped with nothing in it. */
    usleep(20000);
    drain(be);
    assert_int_equal(be->read(h, &d), 0);
    __u64 value;
    const __u64 *word = be->quiet_word(h, &value);
    if (be->skip_error(h) == 0 && word) {
        usleep(20000);
        drain(be);
        assert_true(__atomic_load_n(word, __ATOMIC_ACQUIRE) == value);
        assert_int_equal(be->read(h, &d), 0);
        assert_true(d.skipped);
    } else
        print_message("reads are not skipped here: %s\n", strerror(-be->skip_error(h)));

    /* It burns again and exits: the final read still has the burn. */
    assert_int_equal(write(go, "g", 1), 1);
    assert_int_equal(read(done, &b, 1), 1);
    close(go);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    drain(be);
    assert_false(be->alive(h));
    assert_int_equal(be->read(h, &d), 0);
    assert_false(d.skipped);
    burn_within(&d, "the burn before the exit");
    be->close(h);
    be->close(NULL);
    close(done);
    counters_delta_free(&d);
    if (be == &backend_bpf)
        backend_bpf_unload();
    events_free(es);
}

static void test_process_perf(void **state)
{
    run_process(&backend_perf);
}

static void test_process_bpf(void **state)
{
    run_process(&backend_bpf);
}

/* What the drain offered: the orphans of one pid. */
struct offers {
    pid_t pid;
    backend_orphan got;
    int n;
    const sample_eventset *es;
    backend_handle *h; /* opened for it when es is set */
    bool defer;        /* answer -EAGAIN: offer it again later */
};

static int offer(void *ctx, const backend_orphan *o)
{
    struct offers *f = ctx;
    char err[UTIL_ERRLEN];

    if (o->pid != f->pid)
        return 0;
    f->got = *o;
    f->n++;
    if (f->defer)
        return -EAGAIN;
    if (f->es)
        assert_int_equal(backend_bpf.open(f->es, o->pid, o->start, -1, &f->h, err, sizeof(err)), 0);
    return 1;
}

/* A child that burns 1 ms of CPU and exits before anyone looked at it is
 * offered with its count; not adopted, it is forgotten. The first drain
 * reads the whole map; the child comes after it, so the drains that offer
 * it go by the ring of changed processes. */
static void test_bpf_short_process(void **state)
{
    const char *names[] = {"perf::TASK-CLOCK"};
    sample_eventset *es;
    counters_delta d;
    char err[UTIL_ERRLEN];
    int status;

    assert_int_equal(events_encode(names, 1, &es, err, sizeof(err)), 0);
    load_bpf(es);
    assert_int_equal(counters_delta_new(es, &d), 0);
    assert_int_equal(backend_bpf.drain(NULL, NULL, NULL), 0);
    pid_t pid = fork();
    if (pid == 0) {
        double end = cpu_s() + 0.001;
        while (cpu_s() < end)
            ;
        _exit(0);
    }
    siginfo_t si;
    assert_int_equal(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0); /* a zombie */
    /* Deferred, it is kept and offered again. */
    struct offers f = {.pid = pid, .defer = true};
    assert_int_equal(backend_bpf.drain(offer, NULL, &f), 0);
    assert_int_equal(f.n, 1);
    f = (struct offers){.pid = pid, .es = es};
    assert_int_equal(backend_bpf.drain(offer, NULL, &f), 0);
    assert_int_equal(f.n, 1);
    assert_non_null(f.h);
    assert_string_equal(f.got.comm, "test_backend");
    assert_int_equal(f.got.uid, getuid());
    assert_false(backend_bpf.alive(f.h));
    assert_int_equal(backend_bpf.read(f.h, &d), 0);
    assert_false(d.skipped);
    assert_true(d.scaled[0] >= 0.001e9 && d.scaled[0] <= 0.02e9);
    uint64_t start = f.got.start;
    backend_bpf.close(f.h);
    /* Taken: the next drain does not offer it again, and the zombie found
     * again (as a /proc rescan would) is no live process. */
    f = (struct offers){.pid = pid};
    assert_int_equal(backend_bpf.drain(offer, NULL, &f), 0);
    assert_int_equal(f.n, 0);
    backend_handle *again;
    assert_int_equal(backend_bpf.open(es, pid, start, -1, &again, err, sizeof(err)), 0);
    assert_false(backend_bpf.alive(again));
    backend_bpf.close(again);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    counters_delta_free(&d);
    backend_bpf_unload();
    events_free(es);
}

/* The bpf backend loaded with task-clock alone, a delta for it, and a pipe
 * whose write end starts a child. */
static sample_eventset *bpf_task_clock(counters_delta *d, int go[2])
{
    const char *names[] = {"perf::TASK-CLOCK"};
    sample_eventset *es;
    char err[UTIL_ERRLEN];

    assert_int_equal(events_encode(names, 1, &es, err, sizeof(err)), 0);
    load_bpf(es);
    assert_int_equal(counters_delta_new(es, d), 0);
    assert_int_equal(pipe(go), 0);
    return es;
}

/* The key is the pid and the start time: a handle for the same pid with
 * another start (a reused pid) sees nothing of this process, and an exec
 * keeps the process (same key) under its new command. */
static void test_bpf_reuse_exec(void **state)
{
    sample_eventset *es;
    backend_handle *other;
    counters_delta d;
    char err[UTIL_ERRLEN];
    int status, go[2];

    es = bpf_task_clock(&d, go);
    pid_t pid = fork();
    if (pid == 0) {
        char b;
        close(go[1]);
        if (read(go[0], &b, 1) == 1)
            execl("/bin/sh", "sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done", NULL);
        _exit(1);
    }
    close(go[0]);
    uint64_t start = start_of(pid);
    assert_int_equal(backend_bpf.open(es, pid, start + 1, -1, &other, err, sizeof(err)), 0);
    assert_int_equal(write(go[1], "g", 1), 1);
    close(go[1]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    struct offers f = {.pid = pid, .es = es};
    assert_int_equal(backend_bpf.drain(offer, NULL, &f), 0);
    assert_int_equal(f.n, 1);
    assert_true(f.got.start == start);
    assert_string_equal(f.got.comm, "sh");
    assert_int_equal(backend_bpf.read(f.h, &d), 0);
    assert_true(d.scaled[0] > 0.001e9);
    assert_true(backend_bpf.alive(other));
    assert_int_equal(backend_bpf.read(other, &d), 0);
    assert_true(d.skipped || d.scaled[0] == 0);
    backend_bpf.close(f.h);
    backend_bpf.close(other);
    counters_delta_free(&d);
    backend_bpf_unload();
    events_free(es);
}

static void *burn_until_killed(void *arg)
{
    volatile unsigned long x = 0;

    (void)arg;
    for (;;)
        x++;
    return NULL;
}

/* A process of four threads that all burn until its main thread exits
 * (exit_group): its threads leave after its exit hook has marked the
 * entry, each with a final record. Offered once over several drains, the
 * count is what rusage says the process ran (not one thread's, nor twice
 * anyone's); and the entry is gone after. */
static void test_bpf_threads_exit(void **state)
{
    sample_eventset *es;
    counters_delta d;
    struct rusage ru;
    int status, go[2];

    es = bpf_task_clock(&d, go);
    assert_int_equal(backend_bpf.drain(NULL, NULL, NULL), 0);
    pid_t pid = fork();
    if (pid == 0) {
        pthread_t th;
        for (int i = 0; i < 3; i++)
            if (pthread_create(&th, NULL, burn_until_killed, NULL) != 0)
                _exit(2);
        for (double t0 = cpu_s(); cpu_s() - t0 < 0.05;)
            ;
        _exit(0);
    }
    siginfo_t si;
    assert_int_equal(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0); /* all threads gone */
    usleep(2000); /* the last one's final switch */
    struct offers f = {.pid = pid, .es = es};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(backend_bpf.drain(offer, NULL, &f), 0);
        usleep(5000);
    }
    assert_int_equal(f.n, 1);
    assert_non_null(f.h);
    assert_int_equal(backend_bpf.read(f.h, &d), 0);
    assert_int_equal(wait4(pid, &status, 0, &ru), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    double ran = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                 (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    print_message("4 threads: counted %.4f s, rusage %.4f s\n", d.scaled[0] / 1e9, ran);
    assert_true(ran >= 0.05);
    assert_true(fabs(d.scaled[0] / 1e9 - ran) <= 0.002 + 0.03 * ran);
    backend_bpf.close(f.h);
    f = (struct offers){.pid = pid};
    assert_int_equal(backend_bpf.drain(offer, NULL, &f), 0);
    assert_int_equal(f.n, 0);
    close(go[0]);
    close(go[1]);
    counters_delta_free(&d);
    backend_bpf_unload();
    events_free(es);
}

#ifdef WATTPROF_BPF
/* The descriptor of this process's own `procs` map (the loaded backend's),
 * found among its open descriptors; -1 if none. */
static int own_procs_map(void)
{
    for (int fd = 3; fd < 1024; fd++) {
        struct bpf_map_info info = {0};
        __u32 len = sizeof(info);
        if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && strcmp(info.name, "procs") == 0 &&
            info.key_size == sizeof(struct wattprof_key))
            return fd;
    }
    return -1;
}

/* Sleeps 1 ms five times (switches that name it in the ring) per byte on
 * `go`, says so on `done`, and exits at the pipe's end. */
static void sleep_on_go(int go, int done)
{
    char b;

    while (read(go, &b, 1) == 1) {
        for (int i = 0; i < 5; i++)
            usleep(1000);
        if (write(done, "d", 1) != 1)
            break;
    }
    _exit(0);
}

/* A tracked process whose entry a drain looks up after its exit hook has
 * marked it, before its last switch has sent the final record (the entry
 * is marked here by hand, as the hook would): the handle stays alive, so
 * that the final record comes into it. It used not to: the handle took
 * the lookup's mark, was closed, and the final record was offered as a new
 * process and counted again (twice the context switches rusage gave). */
static void test_bpf_exit_pending(void **state)
{
    const char *names[] = {"perf::TASK-CLOCK", "perf::CONTEXT-SWITCHES"};
    sample_eventset *es;
    backend_handle *h;
    counters_delta d;
    struct rusage ru;
    char err[UTIL_ERRLEN], b;
    int go, done, status;
    double cs = 0;

    assert_int_equal(events_encode(names, 2, &es, err, sizeof(err)), 0);
    load_bpf(es);
    assert_int_equal(counters_delta_new(es, &d), 0);
    pid_t pid = spawn_on_pipes(sleep_on_go, &go, &done);
    struct wattprof_key k = {.tgid = (__u32)pid, .start = start_of(pid)};
    assert_int_equal(backend_bpf.open(es, pid, k.start, -1, &h, err, sizeof(err)), 0);
    assert_int_equal(backend_bpf.drain(NULL, NULL, NULL), 0);

    struct wattprof_proc v;
    int fd = own_procs_map();
    assert_true(fd >= 0);
    assert_int_equal(bpf_map_lookup_elem(fd, &k, &v), 0);
    v.exited = 1; /* the exit hook's mark; no final record yet (finals 0) */
    assert_int_equal(bpf_map_update_elem(fd, &k, &v, BPF_EXIST), 0);
    assert_int_equal(write(go, "g", 1), 1);
    assert_int_equal(read(done, &b, 1), 1);
    usleep(1000);
    assert_int_equal(backend_bpf.drain(NULL, NULL, NULL), 0);
    assert_true(backend_bpf.alive(h));
    assert_int_equal(backend_bpf.read(h, &d), 0);
    cs += d.scaled[1];

    /* It exits: its final record ends the handle; nothing is offered. */
    close(go);
    assert_int_equal(wait4(pid, &status, 0, &ru), pid);
    struct offers f = {.pid = pid};
    for (int i = 0; i < 100 && backend_bpf.alive(h); i++) {
        usleep(2000);
        assert_int_equal(backend_bpf.drain(offer, NULL, &f), 0);
    }
    assert_false(backend_bpf.alive(h));
    assert_int_equal(backend_bpf.read(h, &d), 0);
    cs += d.scaled[1];
    backend_bpf.close(h);
    for (int i = 0; i < 3; i++) {
        usleep(2000);
        assert_int_equal(backend_bpf.drain(offer, NULL, &f), 0);
    }
    long switches = ru.ru_nvcsw + ru.ru_nivcsw;
    print_message("context switches: counted %.0f, rusage %ld; offered %d times\n", cs, switches,
                  f.n);
    assert_int_equal(f.n, 0);
    assert_true(switches >= 5 && fabs(cs - (double)switches) <= 2);
    close(done);
    counters_delta_free(&d);
    backend_bpf_unload();
    events_free(es);
}
#else
static void test_bpf_exit_pending(void **state)
{
    print_message("built without the bpf backend (meson -Dbpf)\n");
    skip();
}
#endif

/* Offers of the children of test_bpf_ring_full (pids sorted), none adopted. */
struct many {
    const pid_t *pid;
    size_t n;
    int *offered; /* per child */
};

static int cmp_pid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

static int count_offer(void *ctx, const backend_orphan *o)
{
    struct many *m = ctx;
    const pid_t *p = bsearch(&o->pid, m->pid, m->n, sizeof(*m->pid), cmp_pid);

    if (p)
        m->offered[p - m->pid]++;
    return 0;
}

#define RING_FULL_CHILDREN 9000 /* a fork and a final record each: more than the ring holds */

/* More processes start and exit between two drains than the ring has room
 * for: the drain says records were lost, reads the whole map instead, and
 * offers every one of them once, those whose final record the full ring
 * refused too; the next drain offers none again. */
static void test_bpf_ring_full(void **state)
{
    static pid_t pid[RING_FULL_CHILDREN];
    static int offered[RING_FULL_CHILDREN];
    sample_eventset *es;
    counters_delta d;
    int status, go[2];

    es = bpf_task_clock(&d, go);
    assert_int_equal(backend_bpf.drain(NULL, NULL, NULL), 0);
    for (size_t i = 0; i < RING_FULL_CHILDREN; i++) {
        if ((pid[i] = fork()) == 0)
            _exit(0);
        assert_true(pid[i] > 0);
        assert_int_equal(waitpid(pid[i], &status, 0), pid[i]);
    }
    usleep(2000);
    qsort(pid, RING_FULL_CHILDREN, sizeof(pid[0]), cmp_pid);
    struct many m = {.pid = pid, .n = RING_FULL_CHILDREN, .offered = offered};
    assert_int_equal(backend_bpf.drain(count_offer, NULL, &m), 1); /* records were lost */
    size_t once = 0;
    for (size_t i = 0; i < RING_FULL_CHILDREN; i++)
        once += offered[i] == 1;
    print_message("%zu of %d children offered once\n", once, RING_FULL_CHILDREN);
    assert_int_equal(once, RING_FULL_CHILDREN);
    memset(offered, 0, sizeof(offered));
    /* The programs see every process on the machine. While the drain above
     * emptied the full ring, other processes' records (parallel tests) may
     * have found no room, and then the next drain rightly says so; it
     * clears once the machine leaves the ring alone between two drains. */
    int r = 1;
    for (int tries = 0; tries < 20 && r == 1; tries++) {
        r = backend_bpf.drain(count_offer, NULL, &m);
        if (r == 1)
            usleep(10000);
    }
    assert_int_equal(r, 0);
    for (size_t i = 0; i < RING_FULL_CHILDREN; i++)
        assert_int_equal(offered[i], 0);
    close(go[0]);
    close(go[1]);
    counters_delta_free(&d);
    backend_bpf_unload();
    events_free(es);
}

/* A pid's counts come in the ring while any handle has that pid: closing
 * the handle of a reused pid's other start keeps them coming for this one;
 * closing the last one stops them. */
static void test_bpf_wanted(void **state)
{
    sample_eventset *es;
    backend_handle *other, *h;
    counters_delta d;
    char err[UTIL_ERRLEN], b;
    int status, go[2];

    es = bpf_task_clock(&d, go);
    pid_t pid = fork();
    if (pid == 0) {
        close(go[1]);
        if (read(go[0], &b, 1) == 1)
            for (double t0 = cpu_s(); cpu_s() - t0 < 0.05;)
                ;
        _exit(0);
    }
    close(go[0]);
    uint64_t start = start_of(pid);
    assert_false(backend_bpf_wanted(pid));
    assert_int_equal(backend_bpf.open(es, pid, start + 1, -1, &other, err, sizeof(err)), 0);
    assert_int_equal(backend_bpf.open(es, pid, start, -1, &h, err, sizeof(err)), 0);
    assert_true(backend_bpf_wanted(pid));
    backend_bpf.close(other);
    assert_true(backend_bpf_wanted(pid));
    drain(&backend_bpf);
    assert_int_equal(backend_bpf.read(h, &d), 0);
    assert_int_equal(write(go[1], "g", 1), 1);
    close(go[1]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    drain(&backend_bpf);
    assert_false(backend_bpf.alive(h));
    assert_int_equal(backend_bpf.read(h, &d), 0);
    assert_true(d.scaled[0] >= 0.045e9); /* task-clock, ns: the burn */
    backend_bpf.close(h);
    assert_false(backend_bpf_wanted(pid));
    counters_delta_free(&d);
    backend_bpf_unload();
    events_free(es);
}

/* The events the drain handed over for one pid, in order. */
struct seen_events {
    pid_t pid;
    procs_event ev[8];
    int n;
};

static void take_event(void *ctx, const procs_event *ev)
{
    struct seen_events *e = ctx;

    if (ev->pid == e->pid && e->n < 8)
        e->ev[e->n++] = *ev;
}

/* A child that renames itself, renames itself again and execs: the drain
 * hands over its fork, both renames with their names and its exec, in that
 * order (what the proc connector would say), and not its exec's own rename. */
static void test_bpf_events(void **state)
{
    const char *names[] = {"perf::TASK-CLOCK"};
    sample_eventset *es;
    char err[UTIL_ERRLEN];
    int status;

    assert_int_equal(events_encode(names, 1, &es, err, sizeof(err)), 0);
    load_bpf(es);
    assert_int_equal(backend_bpf.drain(NULL, NULL, NULL), 0);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_NAME, "wp_first");
        prctl(PR_SET_NAME, "wp_second");
        execl("/bin/true", "true", NULL);
        _exit(1);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    struct seen_events e = {.pid = pid};
    assert_int_equal(backend_bpf.drain(NULL, take_event, &e), 0);
    assert_int_equal(e.n, 4);
    assert_int_equal(e.ev[0].kind, PROCS_EV_FORK);
    assert_int_equal(e.ev[1].kind, PROCS_EV_COMM);
    assert_string_equal(e.ev[1].comm, "wp_first");
    assert_int_equal(e.ev[2].kind, PROCS_EV_COMM);
    assert_string_equal(e.ev[2].comm, "wp_second");
    assert_int_equal(e.ev[3].kind, PROCS_EV_EXEC);
    backend_bpf_unload();
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
    assert_int_equal(backend_perf.open(es, -1, 0, 0, &h, err, sizeof(err)), -EOPNOTSUPP);
    assert_null(h);
    assert_non_null(strstr(err, "CPU 0"));
    assert_int_equal(backend_perf.open(es, 0, 0, -1, &h, err, sizeof(err)), -EOPNOTSUPP);
    assert_non_null(strstr(err, "pid 0"));
    /* Not loaded: the bpf backend says so. */
    assert_int_equal(backend_bpf.open(es, getpid(), 0, -1, &h, err, sizeof(err)), -ENODEV);
    assert_null(h);
    assert_non_null(strstr(err, "not loaded"));
    events_free(es);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_process_perf),      cmocka_unit_test(test_process_bpf),
        cmocka_unit_test(test_bpf_short_process), cmocka_unit_test(test_bpf_reuse_exec),
        cmocka_unit_test(test_bpf_events),        cmocka_unit_test(test_bpf_wanted),
        cmocka_unit_test(test_bpf_threads_exit),  cmocka_unit_test(test_bpf_ring_full),
        cmocka_unit_test(test_bpf_exit_pending),  cmocka_unit_test(test_cpu_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
