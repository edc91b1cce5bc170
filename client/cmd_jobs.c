/* wattprof jobs: batch jobs (Slurm's job ids) on this node and their
 * energy, from the daemon's ListJobs.
 *
 * A job is the processes whose cgroup or environment names it (wattprofd
 * reads them again after each exec; children inherit). Its energy is the
 * sum of theirs, attributed as for any process; SHARE is that energy over
 * the node's energy in the job's seconds. */
#include "commands.h"
#include "format.h"
#include "query.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define JOBS_ID_MAX 63 /* bytes of a job id, as wattprofd keeps them */

static void jobs_usage(FILE *out)
{
    fprintf(out,
            "usage: wattprof jobs [--since T] [--until T] [--user USER] [--job ID]\n"
            "                     [--socket PATH] [--json|--csv]\n"
            "Lists the batch jobs this node ran, newest first, with their energy.\n"
            "A user sees their own jobs; root and the daemon's group see all.\n\n"
            "options:\n"
            "  --since T, --until T  the window (30m, 1h, 2d ago, 'now', @EPOCH or ISO 8601);\n"
            "                   default: everything stored\n"
            "  --user USER      only this user's jobs (name or uid)\n"
            "  --job ID         only this job\n" QUERY_COMMON_HELP);
}

struct jobs_parse {
    json_object *p; /* ListJobs's params */
    double now;
};

static int jobs_opt(void *ctx, int o, const char *arg)
{
    struct jobs_parse *j = ctx;

    switch (o) {
    case 's':
    case 'U':
        return query_time_opt(o, arg, j->now, j->p) < 0 ? -EINVAL : 0;
    case 'u':
        return query_user_opt(arg, j->p) < 0 ? -EINVAL : 0;
    case 'j':
        if (!arg[0] || strlen(arg) > JOBS_ID_MAX) {
            log_error("--job '%s': expected a job id of 1 to %d characters", arg, JOBS_ID_MAX);
            return -EINVAL;
        }
        json_object_object_add(j->p, "job", json_object_new_string(arg));
        return 0;
    default:
        return QUERY_OPT_UNKNOWN;
    }
}

static int jobs_params(int argc, char **argv, query_opts *q, json_object *p)
{
    static const struct option opts[] = {QUERY_LONGOPTS,
                                         {"since", required_argument, NULL, 's'},
                                         {"until", required_argument, NULL, 'U'},
                                         {"user", required_argument, NULL, 'u'},
                                         {"job", required_argument, NULL, 'j'},
                                         {NULL, 0, NULL, 0}};
    static const query_cmd cmd = {"jobs", "h", opts, jobs_usage, jobs_opt, false};
    struct jobs_parse j = {p, (double)util_now_ns(CLOCK_REALTIME) / 1e9};

    return query_parse(&cmd, q, &j, argc, argv);
}

/* JOB USER NODE START END ENERGY WH POWER CPU SHARE. */
static fmt_table *jobs_table(json_object *jobs, const char *node)
{
    static const char *head[] = {"JOB",    "USER", "NODE",  "START", "END",
                                 "ENERGY", "WH",   "POWER", "CPU",   "SHARE"};
    static const char *csv[] = {"job",      "user",      "node",    "start", "end",
                                "energy_j", "energy_wh", "power_w", "cpu_s", "share"};
    static const fmt_align al[] = {FMT_LEFT,  FMT_LEFT,  FMT_LEFT,  FMT_LEFT,  FMT_LEFT,
                                   FMT_RIGHT, FMT_RIGHT, FMT_RIGHT, FMT_RIGHT, FMT_RIGHT};
    fmt_table *t = fmt_table_new(10, head, csv, al);
    int r = 0;

    for (size_t i = 0; t && r == 0 && i < json_object_array_length(jobs); i++) {
        json_object *j = json_object_array_get_idx(jobs, i);
        char a[FMT_LEN], raw[64];
        double e = query_num(j, "energy_j"), share = query_num(j, "share");
        bool running = json_object_get_boolean(json_object_object_get(j, "running"));

        r = fmt_table_add(t, query_str(j, "job"), NULL);
        r = r ? r : fmt_table_add(t, query_str(j, "user"), NULL);
        r = r ? r : fmt_table_add(t, node, NULL);
        snprintf(raw, sizeof(raw), "%.0f", query_num(j, "start"));
        r = r ? r : fmt_table_add(t, fmt_iso8601(a, query_num(j, "start")), raw);
        snprintf(raw, sizeof(raw), "%.0f", query_num(j, "end"));
        r = r ? r
              : fmt_table_add(t, running ? "running" : fmt_iso8601(a, query_num(j, "end")), raw);
        r = r ? r : query_table_num(t, fmt_energy(a, e), e);
        snprintf(a, sizeof(a), "%.4f", e / 3600);
        r = r ? r : query_table_num(t, a, e / 3600);
        r = r ? r
              : query_table_num(t, fmt_power(a, query_num(j, "power_w")), query_num(j, "power_w"));
        r = r ? r
              : query_table_num(t, fmt_duration(a, query_num(j, "cpu_s")), query_num(j, "cpu_s"));
        if (isnan(share))
            snprintf(a, sizeof(a), "-");
        else
            snprintf(a, sizeof(a), "%.1f%%", share * 100);
        r = r ? r : query_table_num(t, a, share);
    }
    if (r < 0) {
        fmt_table_free(t);
        return NULL;
    }
    return t;
}

int cmd_jobs(int argc, char **argv)
{
    json_object *params = json_object_new_object(), *reply = NULL;
    char node[256] = "";
    query_opts q;
    int r;

    query_opts_init(&q);
    if ((r = jobs_params(argc, argv, &q, params)) != 0) {
        json_object_put(params);
        return r > 0 ? 0 : 2;
    }
    r = query_once_pages(&q, "ListJobs", params, "jobs", &reply);
    json_object_put(params);
    if (r < 0)
        return 1;
    if (gethostname(node, sizeof(node) - 1) < 0)
        snprintf(node, sizeof(node), "?");
    if (q.out == QUERY_JSON) {
        json_object_object_add(reply, "node", json_object_new_string(node));
        query_print_json(reply);
        json_object_put(reply);
        return 0;
    }
    fmt_table *t = jobs_table(query_obj(reply, "jobs"), node);
    if (!t) {
        log_error("out of memory");
        json_object_put(reply);
        return 1;
    }
    query_print_table(&q, t);
    fmt_table_free(t);
    json_object_put(reply);
    return 0;
}
