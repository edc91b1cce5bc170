/* train_fit: times one fit of lib/learn on data written by train_data.py,
 * for tests/bench/train.sh. Prints one JSON line: fit seconds, accuracy on
 * the held-out rows, peak RSS after loading the data and after the fit.
 *
 * usage: train_fit ols|ridge|forest DIR THREADS */
#include "learn/learn.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

struct set {
    size_t n, p;
    double *x, *y; /* x column-major: x[j * n + i] */
    const double **cols;
};

static long peak_rss_kb(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static int load(const char *dir, const char *name, struct set *s)
{
    char path[4096];
    FILE *f;
    unsigned long long n, p;

    snprintf(path, sizeof(path), "%s/%s.shape", dir, name);
    if (!(f = fopen(path, "r")) || fscanf(f, "%llu %llu", &n, &p) != 2)
        return -EINVAL;
    fclose(f);
    s->n = n;
    s->p = p;
    s->x = malloc(n * p * sizeof(double));
    s->y = malloc(n * sizeof(double));
    s->cols = malloc(p * sizeof(*s->cols));
    if (!s->x || !s->y || !s->cols)
        return -ENOMEM;
    snprintf(path, sizeof(path), "%s/%s.f64", dir, name);
    if (!(f = fopen(path, "rb")) || fread(s->x, sizeof(double), n * p, f) != n * p ||
        fread(s->y, sizeof(double), n, f) != n)
        return -EIO;
    fclose(f);
    for (size_t j = 0; j < p; j++)
        s->cols[j] = s->x + j * n;
    return 0;
}

static double now(void)
{
    return (double)util_now_ns(CLOCK_MONOTONIC) / 1e9;
}

/* CPU seconds of all threads: the machine is shared, so wall time alone
 * would also measure the neighbours. */
static double cpu(void)
{
    return (double)util_now_ns(CLOCK_PROCESS_CPUTIME_ID) / 1e9;
}

int main(int argc, char **argv)
{
    struct set tr, te;
    double t0, t1, c0, c1, *pred;
    learn_metrics m;
    char err[UTIL_ERRLEN] = "";
    long rss_loaded;

    if (argc != 4 || load(argv[2], "train", &tr) < 0 || load(argv[2], "test", &te) < 0) {
        fprintf(stderr,
                "usage: train_fit ols|ridge|forest DIR THREADS (data from train_data.py)\n");
        return 2;
    }
    pred = malloc(te.n * sizeof(double));
    rss_loaded = peak_rss_kb();
    if (strcmp(argv[1], "forest") == 0) {
        forest_opts o = {.n_trees = 100, .threads = (size_t)atoi(argv[3]), .seed = 0};
        forest *f;
        c0 = cpu();
        t0 = now();
        if (forest_fit(&f, &o, tr.cols, tr.y, tr.p, NULL, tr.n) < 0)
            return 1;
        t1 = now();
        c1 = cpu();
        forest_predict(f, te.cols, NULL, te.n, pred);
        fprintf(stderr, "forest: %zu nodes\n", forest_n_nodes(f));
        forest_free(f);
    } else {
        linear_opts o = {.kind = strcmp(argv[1], "ols") == 0 ? LINEAR_OLS : LINEAR_RIDGE,
                         .alpha = 1.0};
        linear_model lm;
        scaler sc;
        c0 = cpu();
        t0 = now();
        if (scaler_fit(&sc, tr.cols, tr.p, NULL, tr.n) < 0 ||
            linear_fit(&lm, &o, &sc, tr.cols, tr.y, tr.p, NULL, tr.n, err, sizeof(err)) < 0) {
            fprintf(stderr, "fit failed: %s\n", err);
            return 1;
        }
        t1 = now();
        c1 = cpu();
        linear_predict(&lm, &sc, te.cols, NULL, te.n, pred);
        linear_done(&lm);
        scaler_done(&sc);
    }
    learn_metrics_compute(te.y, pred, te.n, &m);
    printf("{\"fit_s\": %.4f, \"cpu_s\": %.4f, \"mape\": %.6g, \"r2\": %.8f, "
           "\"rss_loaded_mb\": %.1f, \"rss_peak_mb\": %.1f}\n",
           t1 - t0, c1 - c0, m.mape, m.r2, rss_loaded / 1024.0, peak_rss_kb() / 1024.0);
    return 0;
}
