/* clock-shift: an LD_PRELOAD library that steps the CLOCK_REALTIME a
 * program sees, without touching the system clock (which other users of
 * the machine share, and which a time namespace cannot move).
 *
 * Usage: CLOCK_SHIFT_FILE=FILE LD_PRELOAD=.../libclock-shift.so PROGRAM...
 *
 * FILE holds a signed number of seconds ("-30", "3600.5"); clock_gettime
 * with CLOCK_REALTIME or CLOCK_REALTIME_COARSE, gettimeofday and time
 * return the real time plus that many seconds. The file is read again at
 * most every 20 ms of CLOCK_MONOTONIC, so writing it (atomically: write a
 * temporary file, rename it over FILE) steps the clock of a running program
 * within 20 ms. A missing or unreadable file means 0. Every other clock,
 * CLOCK_MONOTONIC above all, is left alone. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

#define CLOCK_SHIFT_REREAD_NS 20000000

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

/* The library's only state: set once, then read by every thread. */
static _Atomic int64_t shift_ns;
static _Atomic int64_t next_read_ns;

static clock_gettime_fn real_clock_gettime(void)
{
    static _Atomic(clock_gettime_fn) fn;
    clock_gettime_fn f = atomic_load(&fn);

    if (!f) {
        f = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
        atomic_store(&fn, f);
    }
    return f;
}

static int64_t read_shift_ns(void)
{
    const char *path = getenv("CLOCK_SHIFT_FILE");
    double s = 0;
    FILE *f;

    if (!path || !(f = fopen(path, "re")))
        return 0;
    if (fscanf(f, "%lf", &s) != 1)
        s = 0;
    fclose(f);
    return (int64_t)(s * 1e9);
}

static int64_t current_shift_ns(void)
{
    struct timespec mono;
    int64_t now;

    real_clock_gettime()(CLOCK_MONOTONIC, &mono);
    now = (int64_t)mono.tv_sec * 1000000000 + mono.tv_nsec;
    if (now >= atomic_load(&next_read_ns)) {
        atomic_store(&next_read_ns, now + CLOCK_SHIFT_REREAD_NS);
        atomic_store(&shift_ns, read_shift_ns());
    }
    return atomic_load(&shift_ns);
}

static void add_ns(struct timespec *ts, int64_t ns)
{
    int64_t t = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + ns;

    ts->tv_sec = (time_t)(t / 1000000000);
    ts->tv_nsec = (long)(t % 1000000000);
    if (ts->tv_nsec < 0) {
        ts->tv_sec--;
        ts->tv_nsec += 1000000000;
    }
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    int r = real_clock_gettime()(id, ts);

    if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
        add_ns(ts, current_shift_ns());
    return r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    struct timespec ts;

    (void)tz;
    if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
        return -1;
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *out)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    if (out)
        *out = ts.tv_sec;
    return ts.tv_sec;
}
