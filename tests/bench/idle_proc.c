/* idle_proc: an idle-ish process for tests/bench/daemon.
 *
 * Sleeps most of the time and wakes every PERIOD_MS milliseconds (first
 * wake-up at a random phase, so a thousand of them do not wake together) to
 * do a few microseconds of work: the population of a busy server's mostly
 * idle daemons, which is what a monitor tracking "every process" pays for.
 * It runs until killed.
 *
 * usage: bench_idle_proc PERIOD_MS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

int main(int argc, char **argv)
{
    long period_ms = argc > 1 ? strtol(argv[1], NULL, 10) : 0;
    struct timespec next;

    if (argc != 2 || period_ms <= 0) {
        fprintf(stderr, "usage: bench_idle_proc PERIOD_MS (a positive number of ms)\n");
        return 2;
    }
    srand((unsigned)getpid());
    clock_gettime(CLOCK_MONOTONIC, &next);
    next.tv_nsec += (rand() % period_ms) * 1000000L;
    for (;;) {
        next.tv_nsec += period_ms * 1000000L;
        next.tv_sec += next.tv_nsec / 1000000000L;
        next.tv_nsec %= 1000000000L;
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        for (int i = 0; i < 2000; i++) /* a few microseconds of work */
            sink += (uint64_t)i * 2654435761u;
    }
}
