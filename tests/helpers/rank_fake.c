/* rank_fake: a stand-in program variant for the tests of `wattprof rank
 * --measure --metric output`. Each run prints the next draw of a known
 * distribution, so a ranking can be checked against the truth, and appends
 * its name to a log, so the order in which variants ran can be compared.
 *
 *   rank_fake DIR NAME normal|uniform|lognormal A B [SEED]
 *
 * normal: mean A, sd B; uniform: on [A, B); lognormal: exp(N(A, B)).
 * DIR/NAME.count holds how many times NAME ran: run k prints draw k of the
 * stream seeded with SEED (default 1), whatever order the variants ran in. */
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long bump_count(const char *dir, const char *name)
{
    char path[4096];
    long k = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s.count", dir, name);
    f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%ld", &k) != 1)
            k = 0;
        fclose(f);
    }
    f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "%ld\n", k + 1);
    fclose(f);
    return k;
}

static double draw(gsl_rng *r, const char *dist, double a, double b)
{
    if (strcmp(dist, "uniform") == 0)
        return gsl_ran_flat(r, a, b);
    if (strcmp(dist, "lognormal") == 0)
        return gsl_ran_lognormal(r, a, b);
    return a + gsl_ran_gaussian(r, b);
}

int main(int argc, char **argv)
{
    char path[4096];
    gsl_rng *r;
    long k;
    double x = 0;
    FILE *log;

    if (argc < 6) {
        fprintf(stderr, "usage: rank_fake DIR NAME normal|uniform|lognormal A B [SEED]\n");
        return 2;
    }
    k = bump_count(argv[1], argv[2]);
    if (k < 0) {
        perror("rank_fake: count file");
        return 1;
    }
    r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, argc > 6 ? strtoul(argv[6], NULL, 10) : 1);
    for (long i = 0; i <= k; i++)
        x = draw(r, argv[3], atof(argv[4]), atof(argv[5]));
    gsl_rng_free(r);
    snprintf(path, sizeof(path), "%s/log", argv[1]);
    log = fopen(path, "a");
    if (log) {
        fprintf(log, "%s %ld\n", argv[2], k);
        fclose(log);
    }
    printf("some output first\n%.9g\n", x);
    return 0;
}
