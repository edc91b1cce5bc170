/* tick_floor: what waking 50 times a second costs on this machine, for
 * tests/bench/daemon.
 *
 * The same wake-up as wattprofd's sampling thread (an absolute timerfd at
 * the given rate, poll() on it and an unused second slot, read() of the
 * expirations) with no work at all: the CPU share it shows is the floor
 * under any 50 Hz sampler's, paid in the kernel's timer and scheduler paths
 * (and, on a virtual machine, in the hypervisor's timer emulation). It runs
 * until killed.
 *
 * usage: bench_tick_floor RATE_HZ */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long hz = argc > 1 ? strtol(argv[1], NULL, 10) : 0;
    struct itimerspec its = {0};
    struct timespec now;
    int tfd;

    if (argc != 2 || hz <= 0 || hz > 1000) {
        fprintf(stderr, "usage: bench_tick_floor RATE_HZ (1..1000)\n");
        return 2;
    }
    tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (tfd < 0) {
        perror("timerfd_create");
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    its.it_value.tv_sec = now.tv_sec + 1;
    its.it_interval.tv_nsec = 1000000000L / hz;
    if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0) {
        perror("timerfd_settime");
        return 1;
    }
    for (;;) {
        struct pollfd pfd[2] = {{.fd = tfd, .events = POLLIN}, {.fd = -1}};
        uint64_t expirations;
        if (poll(pfd, 2, 200) > 0 && read(tfd, &expirations, sizeof(expirations)) < 0)
            return 1;
    }
}
