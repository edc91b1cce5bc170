/* cmd_select: `wattprof select` — ranks features by Spearman |rho| with the
 * target, PCA loadings and forest importance, and prints the top k by
 * their mean rank. */
#include "commands.h"
#include "train.h"
#include "util/util.h"

#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A JSON number, or null for NaN (which JSON cannot hold). */
static json_object *jnum(double v)
{
    return isnan(v) ? NULL : json_object_new_double(v);
}

struct select_args {
    struct train_source src;
    forest_opts fo;
    size_t k;
    bool json;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: wattprof select (FILE.csv | --data FILE.csv) --target COLUMN\n"
               "                       --features a,b,c [OPTIONS]\n"
               "\n"
               "  -k N                  how many features to keep and show (default 22)\n"
               "  --per COLUMN          divide features by an interval column (counts -> rates)\n"
               "  --drop-invalid        skip rows with empty or non-numeric cells\n"
               "  --trees N --seed S --threads N   the forest behind the importance ranking\n"
               "  --json                print the table as JSON\n");
}

enum { OPT_JSON = TRAIN_OPT_END, OPT_HELP };

static const struct option options[] = {
    TRAIN_LONGOPTS,
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* Returns 1 after --help, 0 to go on, or a negative errno with err set. */
static int parse_args(struct select_args *a, int argc, char **argv, char *err, size_t errlen)
{
    int c, r = 0;

    a->k = 22;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "k:", options, NULL)) != -1) {
        if (c == OPT_HELP) {
            usage(stdout);
            return 1;
        }
        if (c == '?')
            return util_err(err, errlen, -EINVAL,
                            "unknown option or missing value '%s' (see wattprof select --help)",
                            argv[optind - 1]);
        if (c == OPT_JSON)
            a->json = true;
        else if (c == 'k')
            r = train_parse_size("-k", optarg, &a->k, err, errlen);
        else if (!train_source_opt(&a->src, c, optarg))
            r = train_forest_opt(&a->fo, c, optarg, err, errlen);
        if (r < 0)
            return r;
    }
    if ((r = train_source_file(&a->src, argc, argv, optind, err, errlen)) < 0)
        return r;
    if (a->k == 0)
        return util_err(err, errlen, -EINVAL, "-k 0: keep at least one feature");
    return 0;
}

static void print_text(const struct train_data *d, const select_result *s, size_t k)
{
    printf("%-28s %8s %8s %8s %6s %6s %6s %9s\n", "feature", "|rho|", "pca", "forest", "r.rho",
           "r.pca", "r.for", "mean rank");
    for (size_t i = 0; i < k; i++) {
        size_t j = s->order[i];
        printf("%-28s %8.4f %8.4f %8.4f %6.1f %6.1f %6.1f %9.3f\n", d->features[j], s->spearman[j],
               s->pca[j], s->forest[j], s->rank_spearman[j], s->rank_pca[j], s->rank_forest[j],
               s->mean_rank[j]);
    }
    printf("top %zu:", k);
    for (size_t i = 0; i < k; i++)
        printf("%s%s", i ? "," : " ", d->features[s->order[i]]);
    printf("\n");
}

static void print_json(const struct train_data *d, const select_result *s, size_t k)
{
    json_object *o = json_object_new_object(), *rows = json_object_new_array();
    json_object *top = json_object_new_array();

    for (size_t i = 0; i < s->p; i++) { /* every feature: the data; "top" keeps k */
        size_t j = s->order[i];
        json_object *r = json_object_new_object();
        json_object_object_add(r, "feature", json_object_new_string(d->features[j]));
        json_object_object_add(r, "spearman", jnum(s->spearman[j]));
        json_object_object_add(r, "pca", jnum(s->pca[j]));
        json_object_object_add(r, "forest", jnum(s->forest[j]));
        json_object_object_add(r, "rank_spearman", jnum(s->rank_spearman[j]));
        json_object_object_add(r, "rank_pca", jnum(s->rank_pca[j]));
        json_object_object_add(r, "rank_forest", jnum(s->rank_forest[j]));
        json_object_object_add(r, "mean_rank", jnum(s->mean_rank[j]));
        json_object_array_add(rows, r);
        if (i < k)
            json_object_array_add(top, json_object_new_string(d->features[j]));
    }
    json_object_object_add(o, "features", rows);
    json_object_object_add(o, "top", top);
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
    json_object_put(o);
}

int cmd_select(int argc, char **argv)
{
    struct select_args a = {0};
    struct train_data d = {0};
    select_result s = {0};
    char err[UTIL_ERRLEN] = "";
    int r = parse_args(&a, argc, argv, err, sizeof(err)), bad_line = r < 0;

    if (r == 1)
        return 0;
    if (r == 0)
        r = train_data_load(&d, &a.src, err, sizeof(err));
    if (r == 0 && d.n < 2)
        r = util_err(err, sizeof(err), -EINVAL, "%s: %zu row; feature selection needs at least 2",
                     a.src.path, d.n);
    if (r == 0) {
        for (size_t j = 0; j < d.n_constant; j++)
            fprintf(stderr, "wattprof select: %s: feature '%s' is constant; it ranks last\n",
                    a.src.path, d.features[d.constant[j]]);
        r = select_rank(&s, d.x, d.y, d.n, d.p, &a.fo);
    }
    if (r == 0) {
        size_t k = a.k < d.p ? a.k : d.p;
        if (a.json)
            print_json(&d, &s, k);
        else
            print_text(&d, &s, k);
    }
    select_done(&s);
    train_data_free(&d);
    if (r < 0) {
        fprintf(stderr, "wattprof select: %s\n", err[0] ? err : strerror(-r));
        return bad_line ? 2 : 1; /* 2: the command line itself is wrong */
    }
    return 0;
}
