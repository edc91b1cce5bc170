/* burn: a workload whose CPU time is known, for counter tests.
 *
 *   burn SECONDS                 burn SECONDS of CPU in this thread
 *   burn --tree SECONDS          burn, then fork a child that burns as much
 *                                and wait for it (2 x SECONDS in all)
 *   burn --loops N               a fixed amount of work (N million loop
 *                                iterations), for overhead benchmarks
 *
 * CPU time is measured with CLOCK_THREAD_CPUTIME_ID, so the amount burned
 * is right however the scheduler shares the cores. */
#include <stdbool.h>
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

static void burn(double seconds)
{
    volatile unsigned long x = 0;
    double end = thread_cpu_s() + seconds;

    while (thread_cpu_s() < end)
        for (int i = 0; i < 10000; i++)
            x += (unsigned long)i;
}

static void loops(long millions)
{
    volatile unsigned long x = 0;

    for (long m = 0; m < millions; m++)
        for (int i = 0; i < 1000000; i++)
            x += (unsigned long)i;
}

int main(int argc, char **argv)
{
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
