/* cmd_rank: `wattprof rank` — ranks program variants into performance
 * classes by the quantile three-way comparison (lib/learn rank_*), either
 * from recorded measurements (--data) or by running the variants itself
 * until the ranks settle (--measure), and tests whether FLOP counts pick the
 * best variants. */
#include "commands.h"
#include "plot.h"
#include "rank_cli.h"
#include "rank_report.h"

#include "learn/learn.h"
#include "util/util.h"

#include <errno.h>
#include <getopt.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: wattprof rank (--data FILE | FILE) [options]\n"
            "       wattprof rank --measure [options] -- 'cmd A' ::: 'cmd B' ::: ...\n"
            "\n"
            "Ranks variants into performance classes by comparing quantiles of their\n"
            "measurements (lower is better), and tests whether FLOP counts pick the best.\n"
            "\n"
            "  --data FILE           CSV with columns variant,value[,flops] (one row per\n"
            "                        measurement) or JSON {\"variant\": [values...]}\n"
            "  --h0 KIND             initial order: given, min, median (default) or flops;\n"
            "                        with --measure the default is the single-run values\n"
            "  --quantiles LIST      ranges UPPER:LOWER in percent, strictly nested\n"
            "                        (default 95:5,90:10,85:15,80:20,75:25,70:30,65:35,55:45)\n"
            "  --flops LIST          FLOP count per variant, in variant order\n"
            "  --json                machine-readable output\n"
            "  --plot FILE           box plots coloured by rank, FILE.png or FILE.svg\n"
            "measuring:\n"
            "  --measure             run the commands after --, separated by :::\n"
            "  --metric KIND         time (wall seconds, default), energy (joules, from\n"
            "                        `wattprof run`), or output (the number each command\n"
            "                        prints last on stdout)\n"
            "  --names LIST          variant names (default: the commands)\n"
            "  --warmup K            unmeasured runs of each variant first (default 1)\n"
            "  --reps M              measurements per variant per round (default 5)\n"
            "  --eps E               converged when the change of mean ranks < E (default 0.03)\n"
            "  --max N               at most N measurements per variant (default 100)\n"
            "  --threshold RT        rank only the minimum-FLOP variants and those whose\n"
            "                        single run is within RT of the fastest (default: all)\n"
            "  --seed S              seed of the shuffled measurement order (default 1)\n");
}

/* ---- Options --------------------------------------------------------------- */

static int parse_h0(const char *s, enum h0_kind *out)
{
    static const char *const names[] = {"given", "min", "median", "flops"};

    for (size_t i = 0; i < 4; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = (enum h0_kind)(i + 1);
            return 0;
        }
    }
    log_error("--h0 '%s': expected given, min, median or flops", s);
    return -EINVAL;
}

static int parse_metric(const char *s, enum rank_metric *out)
{
    if (strcmp(s, "time") == 0)
        *out = RANK_METRIC_TIME;
    else if (strcmp(s, "energy") == 0)
        *out = RANK_METRIC_ENERGY;
    else if (strcmp(s, "output") == 0)
        *out = RANK_METRIC_OUTPUT;
    else {
        log_error("--metric '%s': expected time, energy or output", s);
        return -EINVAL;
    }
    return 0;
}

static int parse_count(const char *opt, const char *s, long min, long *out)
{
    if (util_parse_long(s, out) < 0 || *out < min) {
        log_error("%s '%s': expected a whole number >= %ld", opt, s, min);
        return -EINVAL;
    }
    return 0;
}

static int parse_real(const char *opt, const char *s, double *out)
{
    if (util_parse_double(s, out) < 0 || *out < 0) {
        log_error("%s '%s': expected a non-negative number", opt, s);
        return -EINVAL;
    }
    return 0;
}

/* Splits the words after -- into commands at each ":::"; the words of one
 * command are joined by spaces. */
static int parse_commands(int argc, char **argv, struct opts *o)
{
    o->cmds = calloc((size_t)argc + 1, sizeof(*o->cmds));
    if (!o->cmds)
        return -ENOMEM;
    o->cmds_alloc = (size_t)argc + 1;
    for (int i = 0; i <= argc; i++) {
        if (i < argc && strcmp(argv[i], ":::") != 0) {
            char *prev = o->cmds[o->n_cmds], *joined;
            if (asprintf(&joined, "%s%s%s", prev ? prev : "", prev ? " " : "", argv[i]) < 0)
                return -ENOMEM;
            free(prev);
            o->cmds[o->n_cmds] = joined;
            continue;
        }
        if (!o->cmds[o->n_cmds]) {
            log_error("empty command %zu after -- (commands are separated by :::)", o->n_cmds + 1);
            return -EINVAL;
        }
        o->n_cmds++;
    }
    return 0;
}

static int parse_option(int c, const char *arg, struct opts *o)
{
    char err[UTIL_ERRLEN];

    switch (c) {
    case 'd':
        o->data = arg;
        return 0;
    case 'M':
        o->measure = true;
        return 0;
    case 'j':
        o->json = true;
        return 0;
    case 'p':
        o->plot = arg;
        if (plot_check_name("--plot", arg, err, sizeof(err)) < 0) {
            log_error("%s", err);
            return -EINVAL;
        }
        return 0;
    case 'f':
        o->flops = arg;
        return 0;
    case 'n':
        o->names = arg;
        return 0;
    case 'H':
        return parse_h0(arg, &o->h0);
    case 'm':
        return parse_metric(arg, &o->metric);
    case 'w':
        return parse_count("--warmup", arg, 0, &o->warmup);
    case 'r':
        return parse_count("--reps", arg, 1, &o->reps);
    case 'x':
        return parse_count("--max", arg, 4, &o->max);
    case 'e':
        return parse_real("--eps", arg, &o->eps);
    case 't':
        return parse_real("--threshold", arg, &o->threshold);
    case 's': {
        long seed;
        int r = parse_count("--seed", arg, 0, &seed);
        o->seed = (unsigned long)seed;
        return r;
    }
    case 'q':
        free(o->ranges);
        o->ranges = NULL;
        if (rank_parse_ranges(arg, &o->ranges, &o->n_ranges, err, sizeof(err)) < 0) {
            log_error("--quantiles: %s", err);
            return -EINVAL;
        }
        return 0;
    default:
        return -EINVAL;
    }
}

static int parse_args(int argc, char **argv, struct opts *o)
{
    static const struct option longopts[] = {
        {"data", required_argument, NULL, 'd'},
        {"measure", no_argument, NULL, 'M'},
        {"json", no_argument, NULL, 'j'},
        {"plot", required_argument, NULL, 'p'},
        {"flops", required_argument, NULL, 'f'},
        {"names", required_argument, NULL, 'n'},
        {"h0", required_argument, NULL, 'H'},
        {"metric", required_argument, NULL, 'm'},
        {"warmup", required_argument, NULL, 'w'},
        {"reps", required_argument, NULL, 'r'},
        {"max", required_argument, NULL, 'x'},
        {"eps", required_argument, NULL, 'e'},
        {"threshold", required_argument, NULL, 't'},
        {"seed", required_argument, NULL, 's'},
        {"quantiles", required_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    *o = (struct opts){
        .warmup = 1, .reps = 5, .max = 100, .eps = 0.03, .threshold = INFINITY, .seed = 1};
    optind = 1;
    opterr = 0; /* our own one-line messages */
    for (;;) {
        while ((c = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
            if (c == 'h') {
                usage(stdout);
                return 1;
            }
            if (c == '?') {
                log_error("unknown option or missing value '%s' (see wattprof rank --help)",
                          argv[optind - 1]);
                return -EINVAL;
            }
            if (parse_option(c, optarg, o) < 0)
                return -EINVAL;
        }
        /* The data file alone, as a word (options may follow it): not
         * after --, where --measure's commands start. */
        if (o->measure || o->data || optind >= argc || strcmp(argv[optind - 1], "--") == 0)
            break;
        o->data = argv[optind++];
    }
    if (o->measure == (o->data != NULL)) {
        log_error("give exactly one of --data FILE and --measure (see --help)");
        return -EINVAL;
    }
    if (o->measure && optind >= argc) {
        log_error("--measure needs commands: -- 'cmd A' ::: 'cmd B'");
        return -EINVAL;
    }
    if (!o->measure && optind < argc) {
        log_error("unexpected argument '%s'", argv[optind]);
        return -EINVAL;
    }
    if (o->measure && o->max < o->reps) {
        log_error("--max %ld is below --reps %ld", o->max, o->reps);
        return -EINVAL;
    }
    if (!o->ranges) {
        o->ranges = malloc(sizeof(rank_default_ranges));
        if (!o->ranges)
            return -ENOMEM;
        memcpy(o->ranges, rank_default_ranges, sizeof(rank_default_ranges));
        o->n_ranges = RANK_N_DEFAULT_RANGES;
    }
    return o->measure ? parse_commands(argc - optind, argv + optind, o) : 0;
}

static void opts_clear(struct opts *o)
{
    util_strv_free(o->cmds, o->cmds_alloc);
    free(o->ranges);
}

/* --flops: one count per variant, in variant order. */
static int apply_flops(const char *list, rank_variants *rv)
{
    char **items;
    size_t n;
    int r = util_split_list(list, ',', &items, &n);

    if (r < 0 || n != rv->p) {
        log_error("--flops '%s': expected %zu comma-separated counts, one per variant", list,
                  rv->p);
        if (r == 0)
            util_strv_free(items, n);
        return -EINVAL;
    }
    for (size_t i = 0; r == 0 && i < n; i++) {
        if (util_parse_double(items[i], &rv->flops[i]) < 0 || rv->flops[i] < 0) {
            log_error("--flops item %zu '%s': expected a non-negative number", i + 1, items[i]);
            r = -EINVAL;
        }
    }
    util_strv_free(items, n);
    return r;
}

/* ---- Ranking ------------------------------------------------------------- */

static int result_alloc(struct result *res, size_t p, size_t n_ranges)
{
    memset(res, 0, sizeof(*res));
    res->ranked = calloc(p, sizeof(*res->ranked));
    res->rank = calloc(p, sizeof(*res->rank));
    res->mean = calloc(p, sizeof(*res->mean));
    res->ranks = calloc(p * n_ranges, sizeof(*res->ranks));
    res->median = calloc(p, sizeof(*res->median));
    res->rt = calloc(p, sizeof(*res->rt));
    res->rf = calloc(p, sizeof(*res->rf));
    res->h0 = calloc(p, sizeof(*res->h0));
    res->order = calloc(p, sizeof(*res->order));
    res->single = calloc(p, sizeof(*res->single));
    res->change = NAN;
    if (!res->ranked || !res->rank || !res->mean || !res->ranks || !res->median || !res->rt ||
        !res->rf || !res->h0 || !res->order || !res->single)
        return -ENOMEM;
    return 0;
}

static void result_clear(struct result *res)
{
    free(res->ranked);
    free(res->rank);
    free(res->mean);
    free(res->ranks);
    free(res->median);
    free(res->rt);
    free(res->rf);
    free(res->h0);
    free(res->order);
    free(res->single);
}

static double median_of(const double *x, size_t n)
{
    double *s = malloc(n * sizeof(*s)), m;

    if (!s)
        return NAN;
    memcpy(s, x, n * sizeof(*s));
    gsl_sort(s, 1, n);
    m = rank_quantile(s, n, 0.5);
    free(s);
    return m;
}

static double min_of(const double *x, size_t n)
{
    double m = INFINITY;

    for (size_t i = 0; i < n; i++)
        m = fmin(m, x[i]);
    return m;
}

/* h0 over all variants from --h0 and the data (or single runs). */
static int make_h0(const struct opts *o, const rank_variants *rv, struct result *res)
{
    double *key = calloc(rv->p, sizeof(*key));
    int r = key ? 0 : -ENOMEM;
    enum h0_kind k = o->h0 ? o->h0 : o->measure ? H0_MIN : H0_MEDIAN;

    if (k == H0_FLOPS && !rank_variants_have_flops(rv)) {
        log_error("--h0 flops: no FLOP counts (give --flops or a flops column)");
        r = -EINVAL;
    }
    for (size_t v = 0; r == 0 && v < rv->p; v++) {
        if (o->measure && k != H0_FLOPS)
            key[v] = k == H0_GIVEN ? (double)v : res->single[v];
        else
            key[v] = k == H0_GIVEN   ? (double)v
                     : k == H0_MIN   ? min_of(rv->x[v], rv->n[v])
                     : k == H0_FLOPS ? rv->flops[v]
                                     : median_of(rv->x[v], rv->n[v]);
    }
    if (r == 0)
        r = rank_h0_by_key(rv->p, key, res->h0);
    free(key);
    return r;
}

/* Ranks the variants marked in res->ranked, in the order of res->h0. */
static int rank_included(const struct opts *o, const rank_variants *rv, struct result *res)
{
    size_t q = 0, *sub = calloc(rv->p, sizeof(*sub)), *subh0 = calloc(rv->p, sizeof(*subh0));
    size_t *order = calloc(rv->p, sizeof(*order));
    rank_sample *s = calloc(rv->p, sizeof(*s));
    int *rank = calloc(rv->p, sizeof(*rank)), *ranks = calloc(rv->p * o->n_ranges, sizeof(*ranks));
    double *mean = calloc(rv->p, sizeof(*mean));
    int r = (sub && subh0 && order && s && rank && ranks && mean) ? 0 : -ENOMEM;

    for (size_t i = 0; r == 0 && i < rv->p; i++) {
        size_t v = res->h0[i];
        if (!res->ranked[v])
            continue;
        sub[q] = v;
        subh0[q] = q;
        r = rank_sample_init(&s[q++], rv->x[v], rv->n[v]);
    }
    if (r == 0)
        r = rank_mean(q, subh0, o->ranges, o->n_ranges, rank_cmp_samples, s, ranks, mean);
    if (r == 0)
        r = rank_sort(q, subh0, &rank_report_range, rank_cmp_samples, s, order, rank);
    for (size_t i = 0; r == 0 && i < q; i++) {
        res->rank[sub[i]] = rank[i];
        res->mean[sub[i]] = mean[i];
        for (size_t k = 0; k < o->n_ranges; k++)
            res->ranks[k * rv->p + sub[i]] = ranks[k * q + i];
    }
    for (size_t i = 0; s && i < q; i++)
        rank_sample_clear(&s[i]);
    free(sub);
    free(subh0);
    free(order);
    free(s);
    free(rank);
    free(ranks);
    free(mean);
    return r;
}

/* Display order: ranked variants by mean rank, then rank, then h0; the
 * others after them in h0 order. */
static void display_order(const rank_variants *rv, struct result *res)
{
    size_t k = 0;

    for (size_t i = 0; i < rv->p; i++)
        res->order[k++] = res->h0[i];
    for (size_t i = 1; i < rv->p; i++) {
        for (size_t j = i; j > 0; j--) {
            size_t a = res->order[j - 1], b = res->order[j];
            bool swap =
                res->ranked[b] && (!res->ranked[a] || res->mean[b] < res->mean[a] ||
                                   (res->mean[b] == res->mean[a] && res->rank[b] < res->rank[a]));
            if (!swap)
                break;
            res->order[j - 1] = b;
            res->order[j] = a;
        }
    }
}

/* Everything after the measurements: ranks, RT, RF, the anomaly test. */
static int finish(const struct opts *o, const rank_variants *rv, struct result *res)
{
    int r = rank_included(o, rv, res);

    if (r < 0)
        return r;
    for (size_t v = 0; v < rv->p; v++) {
        res->median[v] = median_of(rv->x[v], rv->n[v]);
        if (!res->ranked[v]) {
            res->rank[v] = 0;
            res->mean[v] = NAN;
        }
    }
    rank_relative(rv->p, res->median, res->rt);
    res->flops_known = rank_variants_have_flops(rv);
    if (res->flops_known) {
        double *f = calloc(rv->p, sizeof(*f)), *m = calloc(rv->p, sizeof(*m));
        size_t q = 0;
        rank_relative(rv->p, rv->flops, res->rf);
        for (size_t v = 0; f && m && v < rv->p; v++)
            if (res->ranked[v]) {
                f[q] = rv->flops[v];
                m[q++] = res->mean[v];
            }
        /* Indices inside the anomaly are those of the ranked subset. */
        r = f && m ? rank_anomaly_test(q, f, m, &res->anomaly) : -ENOMEM;
        free(f);
        free(m);
    } else {
        for (size_t v = 0; v < rv->p; v++)
            res->rf[v] = NAN;
    }
    display_order(rv, res);
    return r;
}

/* ---- Modes ------------------------------------------------------------------ */

static int run_data(const struct opts *o, rank_variants *rv, struct result *res)
{
    char err[UTIL_ERRLEN];
    int r = rank_input_read(o->data, rv, err, sizeof(err));

    if (r < 0) {
        log_error("%s", err);
        return r;
    }
    if (o->flops && (r = apply_flops(o->flops, rv)) < 0)
        return r;
    r = result_alloc(res, rv->p, o->n_ranges);
    for (size_t v = 0; r == 0 && v < rv->p; v++)
        res->ranked[v] = true;
    if (r == 0)
        r = make_h0(o, rv, res);
    return r < 0 ? r : finish(o, rv, res);
}

struct measure_ctx {
    const struct opts *o;
    struct result *res;
    const size_t *sub; /* loop variant -> variant */
    size_t q;
    gsl_rng *rng;
    bool tty;
};

/* Measures variant v once; res->source keeps where the numbers came from,
 * "mixed" if that changed during the run. */
static int measure(const struct opts *o, struct result *res, size_t v, double *out)
{
    char err[UTIL_ERRLEN], source[16] = "";
    int r = rank_measure_once(o->cmds[v], o->metric, out, source, err, sizeof(err));

    if (r < 0)
        log_error("%s", err);
    else if (!res->source[0])
        snprintf(res->source, sizeof(res->source), "%s", source);
    else if (strcmp(res->source, source) != 0)
        snprintf(res->source, sizeof(res->source), "mixed");
    return r;
}

/* rank_more_fn: m runs of every shortlisted variant, in a shuffled order. */
static int measure_round(size_t round, size_t m, double *out, void *data)
{
    struct measure_ctx *c = data;
    size_t *sched = malloc(c->q * m * sizeof(*sched)), *filled = calloc(c->q, sizeof(*filled));
    int r = sched && filled ? 0 : -ENOMEM;

    for (size_t i = 0; r == 0 && i < c->q * m; i++)
        sched[i] = i % c->q;
    if (r == 0)
        gsl_ran_shuffle(c->rng, sched, c->q * m, sizeof(*sched));
    for (size_t i = 0; r == 0 && i < c->q * m; i++) {
        size_t k = sched[i];
        r = measure(c->o, c->res, c->sub[k], &out[k * m + filled[k]++]);
    }
    free(sched);
    free(filled);
    return r;
}

static void measure_progress(size_t round, size_t n, double change, void *data)
{
    struct measure_ctx *c = data;

    if (!c->tty)
        return;
    fprintf(stderr, "\rwattprof rank: round %zu, %zu per variant", round, n);
    if (isnan(change))
        fprintf(stderr, ", first ranking   ");
    else
        fprintf(stderr, ", change %.4f   ", change);
}

/* Warm-up runs, then one measured run per variant for h0 and RT. */
static int single_runs(const struct opts *o, size_t p, struct result *res)
{
    double ignored;
    int r = 0;

    for (long k = 0; r == 0 && k < o->warmup; k++)
        for (size_t v = 0; r == 0 && v < p; v++)
            r = measure(o, res, v, &ignored);
    for (size_t v = 0; r == 0 && v < p; v++)
        r = measure(o, res, v, &res->single[v]);
    return r;
}

static int measure_variants(const struct opts *o, rank_variants *rv)
{
    char **names = NULL;
    size_t n = 0, v;
    int r = 0;

    if (o->names && (util_split_list(o->names, ',', &names, &n) < 0 || n != o->n_cmds)) {
        log_error("--names '%s': expected %zu comma-separated names, one per command", o->names,
                  o->n_cmds);
        if (names)
            util_strv_free(names, n);
        return -EINVAL;
    }
    for (size_t i = 0; r == 0 && i < o->n_cmds; i++) {
        const char *name = names ? names[i] : o->cmds[i];
        r = rank_variants_add(rv, name, &v);
        if (r == -EEXIST)
            log_error("duplicate variant name '%s'%s", name,
                      names ? "" : " (give distinct --names)");
    }
    util_strv_free(names, n);
    if (r == 0 && o->flops)
        r = apply_flops(o->flops, rv);
    return r < 0 ? -EINVAL : 0;
}

/* Which variants take part: the minimum-FLOP ones and those within the RT
 * threshold of the fastest single run. */
static void shortlist(const struct opts *o, const rank_variants *rv, struct result *res)
{
    double *rt = calloc(rv->p, sizeof(*rt)), fmin = INFINITY;
    bool flops = rank_variants_have_flops(rv);

    if (flops)
        fmin = min_of(rv->flops, rv->p);
    if (rt)
        rank_relative(rv->p, res->single, rt);
    for (size_t v = 0; v < rv->p; v++)
        res->ranked[v] = !rt || !(rt[v] > o->threshold) || (flops && rv->flops[v] == fmin);
    free(rt);
}

static int converge(const struct opts *o, rank_variants *rv, struct result *res)
{
    struct measure_ctx c = {.o = o, .res = res, .tty = isatty(STDERR_FILENO)};
    size_t *sub = calloc(rv->p, sizeof(*sub)), *h0 = calloc(rv->p, sizeof(*h0));
    rank_outcome out = {0};
    int r = sub && h0 ? 0 : -ENOMEM;

    for (size_t i = 0; r == 0 && i < rv->p; i++)
        if (res->ranked[res->h0[i]]) {
            h0[c.q] = c.q;
            sub[c.q++] = res->h0[i];
        }
    c.sub = sub;
    c.rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (r == 0 && !c.rng)
        r = -ENOMEM;
    if (r == 0) {
        gsl_rng_set(c.rng, o->seed);
        rank_loop l = {.p = c.q,
                       .h0 = h0,
                       .ranges = o->ranges,
                       .n_ranges = o->n_ranges,
                       .m = (size_t)o->reps,
                       .max = (size_t)o->max,
                       .eps = o->eps,
                       .more = measure_round,
                       .ctx = &c,
                       .progress = measure_progress};
        r = rank_converge(&l, &out);
    }
    if (c.tty)
        fprintf(stderr, "\n");
    for (size_t i = 0; r == 0 && i < c.q; i++) {
        rv->n[sub[i]] = 0;
        for (size_t k = 0; r == 0 && k < out.n; k++)
            r = rank_variants_push(rv, sub[i], out.x[i][k]);
    }
    res->rounds = out.rounds;
    res->change = out.change;
    res->converged = out.converged;
    rank_outcome_clear(&out);
    gsl_rng_free(c.rng);
    free(sub);
    free(h0);
    return r;
}

static int run_measure(const struct opts *o, rank_variants *rv, struct result *res)
{
    int r = measure_variants(o, rv);

    if (r == 0)
        r = result_alloc(res, rv->p, o->n_ranges);
    if (r == 0)
        r = single_runs(o, rv->p, res);
    for (size_t v = 0; r == 0 && v < rv->p; v++)
        r = rank_variants_push(rv, v, res->single[v]);
    if (r == 0)
        r = make_h0(o, rv, res);
    if (r < 0)
        return r;
    res->measured = true;
    shortlist(o, rv, res);
    r = converge(o, rv, res);
    return r < 0 ? r : finish(o, rv, res);
}

int cmd_rank(int argc, char **argv)
{
    struct opts o;
    rank_variants rv;
    struct result res = {0};
    int r = parse_args(argc, argv, &o);

    if (r != 0) {
        opts_clear(&o);
        return r > 0 ? 0 : 2;
    }
    rank_variants_init(&rv);
    r = o.measure ? run_measure(&o, &rv, &res) : run_data(&o, &rv, &res);
    if (r == 0)
        r = rank_report(&o, &rv, &res);
    else if (r == -ENOMEM)
        log_error("out of memory");
    result_clear(&res);
    rank_variants_clear(&rv);
    opts_clear(&o);
    return r < 0 ? 1 : 0;
}
