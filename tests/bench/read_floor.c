/* read_floor: the least a 50 Hz per-process sampler built on lib/sample can
 * cost, for tests/bench/daemon.
 *
 * It does what wattprofd's sampling thread must do to know every tick's
 * counter deltas and nothing else: the same wake-up as tick_floor.c, then,
 * for each process, the quiet-word check (counters_quiet_word) and, for
 * those that ran, counters_read with COUNTERS_SKIP_IDLE. No attribution,
 * no store, no socket, no process discovery. Its CPU share against the
 * daemon's says how much of the daemon's cost is reading the counters.
 * It runs until killed.
 *
 * usage: bench_read_floor RATE_HZ PID... */
#include "sample/sample.h"
#include "util/util.h"

#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

static const char *const event_names[] = {"perf::TASK-CLOCK", "perf::CONTEXT-SWITCHES",
                                          "perf::CPU-MIGRATIONS", "perf::PAGE-FAULTS"};

struct watched {
    counters_proc *cp;
    const __u64 *word;
    __u64 value;
};

static void read_all(struct watched *w, size_t n, counters_delta *d)
{
    for (size_t i = 0; i < n; i++) {
        if (!w[i].cp)
            continue;
        if (w[i].word && __atomic_load_n(w[i].word, __ATOMIC_ACQUIRE) == w[i].value)
            continue;
        if (counters_read(w[i].cp, d) < 0) {
            counters_close(w[i].cp);
            w[i].cp = NULL;
            continue;
        }
        w[i].word = counters_quiet_word(w[i].cp, &w[i].value);
    }
}

int main(int argc, char **argv)
{
    long hz = argc > 2 ? strtol(argv[1], NULL, 10) : 0;
    size_t n = argc > 2 ? (size_t)argc - 2 : 0;
    struct itimerspec its = {0};
    struct timespec now;
    char err[UTIL_ERRLEN] = "out of memory";
    sample_eventset *es;
    counters_delta d;
    struct watched *w = calloc(n ? n : 1, sizeof(*w));
    int tfd;

    if (argc < 3 || hz <= 0 || hz > 1000 || !w) {
        fprintf(stderr, "usage: bench_read_floor RATE_HZ (1..1000) PID...\n");
        return 2;
    }
    if (events_encode(event_names, 4, &es, err, sizeof(err)) < 0 ||
        counters_delta_new(es, &d) < 0) {
        fprintf(stderr, "bench_read_floor: %s\n", err);
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        long pid;
        if (util_parse_long(argv[2 + i], &pid) < 0 || pid <= 0) {
            fprintf(stderr, "bench_read_floor: '%s' is not a pid\n", argv[2 + i]);
            return 2;
        }
        if (counters_open(es, (pid_t)pid, COUNTERS_SKIP_IDLE, &w[i].cp, err, sizeof(err)) < 0) {
            fprintf(stderr, "bench_read_floor: pid %ld: %s\n", pid, err);
            return 1;
        }
    }
    tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    clock_gettime(CLOCK_MONOTONIC, &now);
    its.it_value.tv_sec = now.tv_sec + 1;
    its.it_interval.tv_nsec = 1000000000L / hz;
    if (tfd < 0 || timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0) {
        perror("bench_read_floor: timerfd");
        return 1;
    }
    for (;;) {
        struct pollfd pfd[2] = {{.fd = tfd, .events = POLLIN}, {.fd = -1}};
        uint64_t expirations;
        if (poll(pfd, 2, 200) > 0 && read(tfd, &expirations, sizeof(expirations)) > 0)
            read_all(w, n, &d);
    }
}
