/* burn: a workload whose CPU time is known, for counter tests.
 *
 *   burn SECONDS                 burn SECONDS of CPU in this thread
 *   burn --tree SECONDS          burn, then fork a child that burns as much
 *                                and wait for it (2 x SECONDS in all)
 *   burn --loops N               a fixed amount of work (N million loop
 *                                iterations), for overhead benchmarks
 *   burn --duty F SECONDS        burn SECONDS of CPU at a duty cycle F in
 *                                (0, 1]: F x 20 ms of CPU in every 20 ms of
 *                                wall time, sleeping the rest (a process with
 *                                a known share of a core)
 *   burn --vary STEP WALL F,F... a load that never stops and keeps changing:
 *                                duty cycle F1 for STEP seconds of wall
 *                                time, then F2, ... cycling, for WALL
 *                                seconds of wall time in all
 *   burn --faults R SECONDS      burn SECONDS of CPU taking R page faults
 *                                per CPU-second (anonymous pages touched
 *                                again after MADV_DONTNEED: minor faults,
 *                                counted by the page-faults software event
 *                                and by getrusage's ru_minflt)
 *   burn --wait S ...            sleeps S seconds first, then any of the
 *                                above (one process, one name throughout)
 *
 * CPU time is measured with CLOCK_THREAD_CPUTIME_ID, so the amount burned
 * is right however the scheduler shares the cores. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
        for (int i = 0; i < 10000; i++)
            x += (unsigned long)i;
}

/* Burns `seconds` of CPU taking `rate` page faults per CPU-second: each
 * fault touches the next page of a region that is dropped (MADV_DONTNEED)
 * once every page of it has been touched. */
static int burn_faults(double seconds, double rate)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = 256;
    volatile unsigned long x = 0;
    double start = thread_cpu_s(), end = start + seconds, done = 0;
    size_t next = 0;
    char *region =
        mmap(NULL, page * pages, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (region == MAP_FAILED) {
        perror("burn: mmap");
        return 1;
    }
    for (double now = start; now < end; now = thread_cpu_s()) {
        for (; done < rate * (now - start); done++) {
            if (next == pages) {
                madvise(region, page * pages, MADV_DONTNEED);
                next = 0;
            }
            region[page * next++] = 1;
        }
        for (int i = 0; i < 2000; i++)
            x += (unsigned long)i;
    }
    munmap(region, page * pages);
    return 0;
}

static void loops(long millions)
{
    volatile unsigned long x = 0;

    for (long m = 0; m < millions; m++)
        for (int i = 0; i < 1000000; i++)
            x += (unsigned long)i;
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Each 20 ms period: burn its share of CPU, then sleep to the period's end
 * (absolute deadlines, so the share does not drift); until `seconds` of
 * CPU are burned or the wall clock (wall_s) reaches wall_end. */
static void duty(double fraction, double seconds, double wall_end)
{
    const long period_ns = 20000000;
    double end = thread_cpu_s() + seconds;
    struct timespec next;

    clock_gettime(CLOCK_MONOTONIC, &next);
    while (thread_cpu_s() < end && wall_s() < wall_end) {
        double left = end - thread_cpu_s();
        burn(fraction * 0.02 < left ? fraction * 0.02 : left);
        next.tv_nsec += period_ns;
        if (next.tv_nsec >= 1000000000L) {
            next.tv_sec++;
            next.tv_nsec -= 1000000000L;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
}

int main(int argc, char **argv)
{
    if (argc >= 4 && strcmp(argv[1], "--wait") == 0) {
        double w = atof(argv[2]);
        struct timespec ts = {(time_t)w, (long)((w - (double)(time_t)w) * 1e9)};
        if (!(w >= 0)) {
            fprintf(stderr, "burn: --wait needs seconds >= 0\n");
            return 2;
        }
        nanosleep(&ts, NULL);
        argv[2] = argv[0];
        return main(argc - 2, argv + 2);
    }
    if (argc == 4 && strcmp(argv[1], "--duty") == 0) {
        double f = atof(argv[2]), s = atof(argv[3]);
        if (!(f > 0 && f <= 1) || !(s > 0)) {
            fprintf(stderr, "burn: --duty needs a fraction in (0, 1] and seconds > 0\n");
            return 2;
        }
        duty(f, s, INFINITY);
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "--vary") == 0) {
        double step = atof(argv[2]), end = wall_s() + atof(argv[3]), f[64];
        size_t n = 0;
        for (char *tok = strtok(argv[4], ","); tok && n < 64; tok = strtok(NULL, ","))
            f[n++] = atof(tok);
        for (size_t i = 0; i < n; i++)
            if (!(f[i] > 0 && f[i] <= 1))
                n = 0;
        if (!(step > 0) || n == 0) {
            fprintf(stderr, "burn: --vary needs STEP > 0, WALL seconds and fractions in (0, 1]\n");
            return 2;
        }
        for (size_t i = 0; wall_s() < end; i = (i + 1) % n)
            duty(f[i], INFINITY, fmin(end, wall_s() + step));
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "--faults") == 0) {
        double r = atof(argv[2]), s = atof(argv[3]);
        if (!(r >= 0 && r <= 1e7) || !(s > 0)) {
            fprintf(stderr, "burn: --faults needs a rate in [0, 1e7] and seconds > 0\n");
            return 2;
        }
        return burn_faults(s, r);
    }
    if (argc == 3 && strcmp(argv[1], "--loops") == 0) {
        loops(atol(argv[2]));
        return 0;
    }
    bool tree = argc == 3 && strcmp(argv[1], "--tree") == 0;
    double s = argc >= 2 ? atof(argv[argc - 1]) : 0;

    if (s <= 0 || (argc == 3 && !tree) || argc > 3) {
        fprintf(stderr, "usage: burn [--tree] SECONDS\n");
        return 2;
    }
    burn(s);
    if (tree) {
        pid_t pid = fork();
        if (pid == 0) {
            burn(s);
            _exit(0);
        }
        waitpid(pid, NULL, 0);
    }
    return 0;
}
