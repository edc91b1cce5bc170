/* bench_calib_fit: what a calibration fit costs the daemon's sampling
 * thread (docs/benchmarks.md, "Calibration").
 *
 * usage: bench_calib_fit [FITS]
 *
 * Fills a full window of synthetic seconds (the daemon's defaults: 900 rows
 * for the single-scale fit, 600 rows of 4 events for the per-event one,
 * the built-in model's event count) and times FITS fits of each (default
 * 200), interleaved so that both see the same machine. Prints, per fit,
 * the median and the range of the CPU time (CLOCK_THREAD_CPUTIME_ID), and
 * the share of a core each costs at the daemon's rate: the single-scale
 * fit every second, the per-event fit every SAMPLER_EV_FIT_S (5) seconds. */
#include "model/model.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define EV_COLS 4
#define EV_EVERY_S 5.0

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return ((double)(*s >> 11) + 0.5) / 9007199254740992.0;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, double *t, int n, double every_s)
{
    qsort(t, (size_t)n, sizeof(double), cmp);
    printf("%s: %.1f us per fit (%.1f..%.1f), %.4f %% of a core at one fit every %g s\n", what,
           t[n / 2] * 1e6, t[0] * 1e6, t[n - 1] * 1e6, t[n / 2] / every_s * 100, every_s);
}

int main(int argc, char **argv)
{
    int fits = argc > 1 ? atoi(argv[1]) : 200;
    uint64_t seed = 42;
    calib *one = NULL;
    calib_ev *ev = NULL;
    calib_fit f;
    calib_ev_fit g;

    if (fits < 1) {
        fprintf(stderr, "bench_calib_fit: FITS must be a positive number, got '%s'\n", argv[1]);
        return 2;
    }
    double *t_one = calloc((size_t)fits, sizeof(double)),
           *t_ev = calloc((size_t)fits, sizeof(double));
    if (!t_one || !t_ev || calib_new(NULL, &one) < 0 || calib_ev_new(NULL, EV_COLS, &ev) < 0) {
        fprintf(stderr, "bench_calib_fit: out of memory\n");
        return 1;
    }
    for (int s = 0; s < 900; s++) {
        double x[EV_COLS], sum = 0;
        for (int j = 0; j < EV_COLS; j++)
            sum += x[j] = 10 * rnd(&seed) * (j + 1);
        double host = 20 + 4.5 * x[0] + 1.5 * x[1] + 3 * x[2] + 4 * x[3] + rnd(&seed);
        calib_add(one, s, sum, host);
        calib_ev_add(ev, s, x, host);
    }
    for (int i = 0; i < fits; i++) {
        double t0 = cpu_s();
        calib_fit_now(one, &f);
        double t1 = cpu_s();
        calib_ev_fit_now(ev, &g);
        t_one[i] = t1 - t0;
        t_ev[i] = cpu_s() - t1;
    }
    printf("rows: %zu single-scale, %zu x %d per-event (%s)\n", calib_rows(one), calib_ev_rows(ev),
           EV_COLS, g.per_event ? "per event" : g.why);
    report("single-scale fit", t_one, fits, 1);
    report("per-event fit", t_ev, fits, EV_EVERY_S);
    calib_free(one);
    calib_ev_free(ev);
    free(t_one);
    free(t_ev);
    return 0;
}
