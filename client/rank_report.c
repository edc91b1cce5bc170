/* rank_report: the report of `wattprof rank` — the ranks as a table or
 * JSON, whether FLOP counts pick the best variants, and the box plots. */
#include "rank_report.h"
#include "util/util.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Output --------------------------------------------------------------- */

/* Maps an index of the ranked subset back to its variant. */
static size_t ranked_variant(const rank_variants *rv, const struct result *res, size_t i)
{
    for (size_t v = 0; v < rv->p; v++)
        if (res->ranked[v] && i-- == 0)
            return v;
    return 0;
}

/* "a, b, c": the ranked variants with the minimum FLOP count. */
static char *min_flop_names(const rank_variants *rv, const struct result *res)
{
    double least = INFINITY;
    char *list = NULL;

    for (size_t v = 0; v < rv->p; v++)
        if (res->ranked[v])
            least = fmin(least, rv->flops[v]);
    for (size_t v = 0; v < rv->p; v++) {
        char *next;
        if (!res->ranked[v] || rv->flops[v] != least)
            continue;
        if (asprintf(&next, "%s%s%s", list ? list : "", list ? ", " : "", rv->names[v]) < 0)
            next = NULL;
        free(list);
        list = next;
        if (!list)
            break;
    }
    return list;
}

static char *verdict_fine(const rank_variants *rv, const struct result *res)
{
    size_t best = ranked_variant(rv, res, res->anomaly.best_min), n = res->anomaly.n_min;
    char *names = min_flop_names(rv, res), *s = NULL;

    if (names &&
        asprintf(&s, "no anomaly: the minimum-FLOP variant%s (%s) %s the best mean rank %.3g",
                 n == 1 ? "" : "s", names, n == 1 ? "has" : "share", res->mean[best]) < 0)
        s = NULL;
    free(names);
    return s;
}

static char *verdict(const rank_variants *rv, const struct result *res)
{
    const rank_anomaly *a = &res->anomaly;
    size_t best = ranked_variant(rv, res, a->best_min);
    size_t worst = ranked_variant(rv, res, a->worst_min);
    size_t out = ranked_variant(rv, res, a->outsider);
    char *s = NULL, *t = NULL, *all = NULL;

    if (!res->flops_known)
        return strdup("no FLOP counts, so no anomaly test (give --flops or a flops column)");
    if (a->flags == 0)
        return verdict_fine(rv, res);
    if ((a->flags & RANK_ANOMALY_OUTSIDER) &&
        asprintf(&s,
                 "%s (RF %.3g) has mean rank %.3g, better than every minimum-FLOP variant "
                 "(best: %s, %.3g)",
                 rv->names[out], res->rf[out], res->mean[out], rv->names[best],
                 res->mean[best]) < 0)
        return NULL;
    if ((a->flags & RANK_ANOMALY_SPLIT) &&
        asprintf(&t, "the minimum-FLOP variants do not share one rank (%s %.3g, %s %.3g)",
                 rv->names[best], res->mean[best], rv->names[worst], res->mean[worst]) < 0) {
        free(s);
        return NULL;
    }
    if (asprintf(&all, "anomaly: %s%s%s", s ? s : "", s && t ? "; and " : "", t ? t : "") < 0)
        all = NULL;
    free(s);
    free(t);
    return all;
}

static const char *metric_unit(const struct opts *o)
{
    if (!o->measure)
        return "";
    return o->metric == RANK_METRIC_TIME ? "s" : o->metric == RANK_METRIC_ENERGY ? "J" : "";
}

static void print_cell(double v, const char *fmt)
{
    if (isnan(v))
        printf(" %10s", "-");
    else
        printf(fmt, v);
}

static void print_table(const struct opts *o, const rank_variants *rv, const struct result *res,
                        const char *why)
{
    int w = 7;

    for (size_t v = 0; v < rv->p; v++)
        w = (int)strlen(rv->names[v]) > w ? (int)strlen(rv->names[v]) : w;
    printf("%-*s %5s %6s %6s %10s %10s %10s %10s\n", w, "variant", "rank", "mean", "N", "median",
           "RT", "FLOPs", "RF");
    for (size_t i = 0; i < rv->p; i++) {
        size_t v = res->order[i];
        printf("%-*s ", w, rv->names[v]);
        if (res->ranked[v])
            printf("%5d %6.3f", res->rank[v], res->mean[v]);
        else
            printf("%5s %6s", "-", "-");
        printf(" %6zu", rv->n[v]);
        print_cell(res->median[v], " %10.4g");
        print_cell(res->rt[v], " %10.3f");
        print_cell(rv->flops[v], " %10.4g");
        print_cell(res->rf[v], " %10.3f");
        printf("\n");
    }
    printf("rank: at quantiles (%g,%g); mean: over %zu quantile ranges; RT from medians%s%s\n",
           rank_report_range.upper, rank_report_range.lower, o->n_ranges,
           *metric_unit(o) ? ", in " : "", metric_unit(o));
    if (res->measured)
        printf("measured: %zu round%s of %ld per variant after %ld warm-up run%s and 1 single "
               "run; %s (change %.4f, eps %g)\n",
               res->rounds, res->rounds == 1 ? "" : "s", o->reps, o->warmup,
               o->warmup == 1 ? "" : "s", res->converged ? "converged" : "stopped at --max",
               res->change, o->eps);
    if (res->measured && o->metric == RANK_METRIC_ENERGY)
        printf("energy source: %s (from wattprof run)\n", res->source);
    for (size_t v = 0; res->measured && v < rv->p; v++) {
        if (!res->ranked[v]) {
            printf("not shortlisted ('-'): single run beyond --threshold %g and not minimum-FLOP; "
                   "N counts that run\n",
                   o->threshold);
            break;
        }
    }
    printf("verdict: %s\n", why);
}

static json_object *json_num(double v)
{
    return isnan(v) || isinf(v) ? NULL : json_object_new_double(v);
}

static json_object *json_variant(const struct opts *o, const rank_variants *rv,
                                 const struct result *res, size_t v)
{
    json_object *j = json_object_new_object(), *ranks = json_object_new_array();

    json_object_object_add(j, "name", json_object_new_string(rv->names[v]));
    json_object_object_add(j, "ranked", json_object_new_boolean(res->ranked[v]));
    json_object_object_add(j, "rank", res->ranked[v] ? json_object_new_int(res->rank[v]) : NULL);
    json_object_object_add(j, "mean_rank", json_num(res->mean[v]));
    for (size_t k = 0; res->ranked[v] && k < o->n_ranges; k++)
        json_object_array_add(ranks, json_object_new_int(res->ranks[k * rv->p + v]));
    json_object_object_add(j, "ranks", ranks);
    json_object_object_add(j, "n", json_object_new_int64((int64_t)rv->n[v]));
    json_object_object_add(j, "median", json_num(res->median[v]));
    json_object_object_add(j, "rt", json_num(res->rt[v]));
    json_object_object_add(j, "flops", json_num(rv->flops[v]));
    json_object_object_add(j, "rf", json_num(res->rf[v]));
    if (res->measured)
        json_object_object_add(j, "single_run", json_num(res->single[v]));
    return j;
}

static json_object *json_measure(const struct opts *o, const struct result *res)
{
    static const char *const metrics[] = {"time", "energy", "output"};
    json_object *m = json_object_new_object();

    json_object_object_add(m, "metric", json_object_new_string(metrics[o->metric]));
    json_object_object_add(m, "source", json_object_new_string(res->source));
    json_object_object_add(m, "rounds", json_object_new_int64((int64_t)res->rounds));
    json_object_object_add(m, "converged", json_object_new_boolean(res->converged));
    json_object_object_add(m, "change", json_num(res->change));
    json_object_object_add(m, "eps", json_object_new_double(o->eps));
    json_object_object_add(m, "reps", json_object_new_int64(o->reps));
    json_object_object_add(m, "max", json_object_new_int64(o->max));
    json_object_object_add(m, "warmup", json_object_new_int64(o->warmup));
    json_object_object_add(m, "seed", json_object_new_int64((int64_t)o->seed));
    return m;
}

static void print_json(const struct opts *o, const rank_variants *rv, const struct result *res,
                       const char *why)
{
    json_object *j = json_object_new_object(), *a, *ranges = json_object_new_array();
    json_object *vars = json_object_new_array(), *h0 = json_object_new_array();

    for (size_t k = 0; k < o->n_ranges; k++) {
        json_object *pair = json_object_new_array();
        json_object_array_add(pair, json_object_new_double(o->ranges[k].upper));
        json_object_array_add(pair, json_object_new_double(o->ranges[k].lower));
        json_object_array_add(ranges, pair);
    }
    json_object_object_add(j, "ranges", ranges);
    for (size_t i = 0; i < rv->p; i++)
        json_object_array_add(h0, json_object_new_string(rv->names[res->h0[i]]));
    json_object_object_add(j, "h0", h0);
    for (size_t i = 0; i < rv->p; i++)
        json_object_array_add(vars, json_variant(o, rv, res, res->order[i]));
    json_object_object_add(j, "variants", vars);
    a = json_object_new_object();
    json_object_object_add(a, "tested", json_object_new_boolean(res->flops_known));
    json_object_object_add(a, "anomaly", json_object_new_boolean(res->anomaly.flags != 0));
    json_object_object_add(a, "outsider",
                           json_object_new_boolean(res->anomaly.flags & RANK_ANOMALY_OUTSIDER));
    json_object_object_add(a, "split",
                           json_object_new_boolean(res->anomaly.flags & RANK_ANOMALY_SPLIT));
    json_object_object_add(a, "verdict", json_object_new_string(why));
    json_object_object_add(j, "anomaly", a);
    if (res->measured)
        json_object_object_add(j, "measure", json_measure(o, res));
    printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY |
                                                         JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(j);
}

int rank_report(const struct opts *o, const rank_variants *rv, const struct result *res)
{
    char *why = verdict(rv, res), err[UTIL_ERRLEN];
    static const char *const ylabels[] = {"time (s)", "energy (J)", "value"};

    if (!why)
        return -ENOMEM;
    if (o->json)
        print_json(o, rv, res, why);
    else
        print_table(o, rv, res, why);
    free(why);
    if (o->plot &&
        rank_plot_write(o->plot, rv, res->order, rv->p, res->rank,
                        o->measure ? ylabels[o->metric] : "value", err, sizeof(err)) < 0) {
        log_error("%s", err);
        return -EIO;
    }
    return 0;
}
