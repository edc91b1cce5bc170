/* train_opts: the command-line options `wattprof train` and `wattprof select`
 * have in common — the dataset (a file, given by position or --data), its
 * columns, and the forest's settings — parsed in one place so that both
 * commands read them, and refuse them, the same way. */
#include "train.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>

int train_source_opt(struct train_source *s, int c, const char *v)
{
    switch (c) {
    case TRAIN_OPT_TARGET:
        s->target = v;
        return 1;
    case TRAIN_OPT_FEATURES:
        s->features = v;
        return 1;
    case TRAIN_OPT_PER:
        s->per = v;
        return 1;
    case TRAIN_OPT_DROP:
        s->drop_invalid = true;
        return 1;
    case TRAIN_OPT_DATA:
        s->path = v;
        return 1;
    }
    return 0;
}

int train_forest_opt(forest_opts *fo, int c, const char *v, char *err, size_t errlen)
{
    size_t seed;
    int r;

    switch (c) {
    case TRAIN_OPT_TREES:
        r = train_parse_size("--trees", v, &fo->n_trees, err, errlen);
        return r < 0 ? r : 1;
    case TRAIN_OPT_THREADS:
        r = train_parse_size("--threads", v, &fo->threads, err, errlen);
        return r < 0 ? r : 1;
    case TRAIN_OPT_SEED:
        if ((r = train_parse_size("--seed", v, &seed, err, errlen)) < 0)
            return r;
        fo->seed = seed;
        return 1;
    }
    return 0;
}

int train_source_file(struct train_source *s, int argc, char **argv, int first, char *err,
                      size_t errlen)
{
    int given = argc - first + (s->path != NULL);

    if (given != 1)
        return util_err(err, errlen, -EINVAL,
                        "expected one dataset file (FILE.csv or --data), got %d", given);
    if (!s->path)
        s->path = argv[first];
    return 0;
}
