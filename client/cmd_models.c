/* wattprof models and wattprof reload: the models the daemon has loaded
 * (ListModels), and asking it to load another one (ReloadModels). */
#include "commands.h"
#include "format.h"
#include "query.h"
#include "util/util.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void models_usage(FILE *out)
{
    fprintf(out, "usage: wattprof models [--socket PATH] [--json|--csv]\n"
                 "Lists every model the daemon has loaded, the one in use first (marked *),\n"
                 "with when it was last loaded (LOADED, UTC).\n\n"
                 "options:\n" QUERY_COMMON_HELP);
}

static void reload_usage(FILE *out)
{
    fprintf(out, "usage: wattprof reload [FILE] [--socket PATH] [--json|--csv]\n"
                 "Asks the daemon to load the model FILE (default: its configured model) in\n"
                 "place of the current one; the current one stays if FILE fails to load.\n"
                 "Needs root or the daemon's group.\n\n"
                 "options:\n" QUERY_COMMON_HELP);
}

/* Both take the common options only, and check their operands themselves. */
static const struct option common_opts[] = {QUERY_LONGOPTS, {NULL, 0, NULL, 0}};

static fmt_table *models_table(json_object *models)
{
    static const char *head[] = {"", "NAME", "ENGINE", "SHA256", "TRAINED", "CV MAPE", "LOADED"};
    static const char *csv[] = {"in_use",  "name",    "engine", "sha256",
                                "created", "cv_mape", "loaded"};
    static const fmt_align al[] = {FMT_LEFT, FMT_LEFT,  FMT_LEFT, FMT_LEFT,
                                   FMT_LEFT, FMT_RIGHT, FMT_LEFT};
    fmt_table *t = fmt_table_new(7, head, csv, al);
    int r = t ? 0 : -ENOMEM;

    for (size_t i = 0; r == 0 && i < json_object_array_length(models); i++) {
        json_object *m = json_object_array_get_idx(models, i);
        bool in_use = json_object_get_boolean(query_obj(m, "in_use"));
        bool cal = json_object_get_boolean(query_obj(m, "calibrated"));
        char sha[16], mape[32], a[FMT_LEN], raw[32];
        double loaded = query_num(m, "loaded");

        snprintf(sha, sizeof(sha), "%.12s", query_str(m, "sha256"));
        r = fmt_table_add(t, in_use ? "*" : "", in_use ? "true" : "false");
        r = r ? r : fmt_table_add(t, query_str(m, "name"), NULL);
        r = r ? r : fmt_table_add(t, query_str(m, "engine"), NULL);
        r = r ? r : fmt_table_add(t, sha, query_str(m, "sha256"));
        r = r ? r
              : fmt_table_add(t, cal ? query_str(m, "created") : "uncalibrated",
                              cal ? query_str(m, "created") : "");
        snprintf(mape, sizeof(mape), cal ? "%.1f %%" : "-", query_num(m, "cv_mape") * 100);
        r = r ? r : query_table_num(t, mape, cal ? query_num(m, "cv_mape") : NAN);
        snprintf(raw, sizeof(raw), isnan(loaded) ? "" : "%.0f", loaded);
        r = r ? r : fmt_table_add(t, isnan(loaded) ? "-" : fmt_iso8601(a, loaded), raw);
    }
    if (r < 0) {
        fmt_table_free(t);
        return NULL;
    }
    return t;
}

int cmd_models(int argc, char **argv)
{
    static const query_cmd cmd = {"models", "h", common_opts, models_usage, NULL, true};
    query_opts q;
    json_object *reply = NULL;
    fmt_table *t;
    int r;

    query_opts_init(&q);
    if ((r = query_parse(&cmd, &q, NULL, argc, argv)) != 0)
        return r > 0 ? 0 : 2;
    if (optind < argc) {
        log_error("unexpected argument '%s'", argv[optind]);
        return 2;
    }
    if (query_once(&q, "ListModels", NULL, &reply) < 0)
        return 1;
    if (q.out == QUERY_JSON) {
        query_print_json(reply);
    } else if ((t = models_table(query_obj(reply, "models")))) {
        query_print_table(&q, t);
        fmt_table_free(t);
    }
    json_object_put(reply);
    return 0;
}

int cmd_reload(int argc, char **argv)
{
    static const query_cmd cmd = {"reload", "h", common_opts, reload_usage, NULL, true};
    query_opts q;
    json_object *params = json_object_new_object(), *reply = NULL;
    char path[PATH_MAX];
    int r;

    query_opts_init(&q);
    if ((r = query_parse(&cmd, &q, NULL, argc, argv)) != 0 || argc - optind > 1) {
        if (r == 0)
            log_error("expected at most one model FILE");
        json_object_put(params);
        return r > 0 ? 0 : 2;
    }
    if (optind < argc) {
        /* The daemon reads the file itself, from its own working directory. */
        if (!realpath(argv[optind], path)) {
            log_error("cannot read model %s: %s", argv[optind], strerror(errno));
            json_object_put(params);
            return 1;
        }
        json_object_object_add(params, "path", json_object_new_string(path));
    }
    r = query_once(&q, "ReloadModels", params, &reply);
    json_object_put(params);
    if (r < 0)
        return 1;
    json_object *m = query_obj(reply, "model");
    if (q.out == QUERY_JSON)
        query_print_json(reply);
    else if (q.out == QUERY_CSV)
        printf("name,engine,sha256,calibrated\n%s,%s,%s,%s\n", query_str(m, "name"),
               query_str(m, "engine"), query_str(m, "sha256"),
               json_object_get_boolean(query_obj(m, "calibrated")) ? "true" : "false");
    else
        printf("loaded %s (%s, sha256 %.12s)%s\n", query_str(m, "name"), query_str(m, "engine"),
               query_str(m, "sha256"),
               json_object_get_boolean(query_obj(m, "calibrated")) ? "" : ", uncalibrated");
    json_object_put(reply);
    return 0;
}
