/* Benchmark helper for tests/bench/churn: starts RATE short-lived processes
 * a second for SECONDS seconds. Each child names itself "wp_churn_child"
 * (so the daemon's records of them can be counted), sleeps LIFE_MS and
 * exits; the parent forks on absolute CLOCK_MONOTONIC deadlines, in batches
 * of RATE/1000 per millisecond (at least one), and reaps as it goes.
 * Prints one JSON object: processes started, fork failures, the achieved
 * rate, and the spawner's own CPU time (children included). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NS 1000000000LL

static long long now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * NS + ts.tv_nsec;
}

static void child(int life_ms)
{
    struct timespec d = {life_ms / 1000, (life_ms % 1000) * 1000000L};

    prctl(PR_SET_NAME, "wp_churn_child");
    if (life_ms > 0)
        nanosleep(&d, NULL);
    _exit(0);
}

static double cpu_s(int who)
{
    struct rusage ru;

    getrusage(who, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int positive(const char *s, int zero_ok)
{
    char *end;
    long v = strtol(s, &end, 10);

    return *s && !*end && v >= !zero_ok && v < 1000000 ? (int)v : -1;
}

int main(int argc, char **argv)
{
    int rate = argc == 4 ? positive(argv[1], 0) : -1;
    int seconds = argc == 4 ? positive(argv[2], 0) : -1;
    int life_ms = argc == 4 ? positive(argv[3], 1) : -1;
    long long started = 0, failed = 0, step_ns, t0, next;

    if (rate < 0 || seconds < 0 || life_ms < 0) {
        fprintf(stderr, "usage: %s RATE SECONDS LIFE_MS\n", argv[0]);
        return 2;
    }
    long long total = (long long)rate * seconds;
    int batch = rate >= 1000 ? rate / 1000 : 1;
    step_ns = NS * batch / rate;
    t0 = next = now_ns();
    while (started + failed < total) {
        for (int i = 0; i < batch && started + failed < total; i++) {
            pid_t pid = fork();
            if (pid == 0)
                child(life_ms);
            if (pid < 0)
                failed++;
            else
                started++;
        }
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        next += step_ns;
        struct timespec ts = {next / NS, next % NS};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
    }
    double wall = (now_ns() - t0) / 1e9;
    while (wait(NULL) > 0)
        ;
    printf("{\"started\": %lld, \"failed\": %lld, \"wall_s\": %.3f, \"rate\": %.1f,"
           " \"cpu_s\": %.3f}\n",
           started, failed, wall, started / wall, cpu_s(RUSAGE_SELF) + cpu_s(RUSAGE_CHILDREN));
    return failed ? 1 : 0;
}
