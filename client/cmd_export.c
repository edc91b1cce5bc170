/* wattprof export: the stored per-second process rows of a time range, as
 * CSV or JSON, for spreadsheets and scripts.
 *
 * Built from the daemon's existing methods, so it sees exactly what the
 * caller may see: ListProcesses over a window reaching back to --since
 * names every process with rows since then, and GetHistory gives each one's
 * per-second series. A pid that was reused inside the range reads as one
 * process (GetHistory merges by pid). */
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

struct export_opts {
    query_opts q;
    double since, until;
    bool have_since;
    bool json;
    const char *out; /* "-": stdout */
};

struct row {
    double t, energy_j, cpu_s;
    json_object *proc; /* borrowed from the ListProcesses reply */
};

static void export_usage(FILE *out)
{
    fprintf(out, "usage: wattprof export --since T [--until T] --format csv|json [--out FILE]\n"
                 "                       [--socket PATH]\n"
                 "Writes one row per process per second in which it ran: t, time, pid, comm,\n"
                 "user, uid, class, energy_j, cpu_s.\n\n"
                 "options:\n"
                 "  --since T, --until T  relative (30m, 1h), 'now', @EPOCH or ISO 8601\n"
                 "  --format F       csv or json\n"
                 "  --out FILE       write there instead of stdout\n"
                 "  --socket PATH    the daemon's socket\n");
}

static int export_parse(int argc, char **argv, struct export_opts *e)
{
    static const struct option opts[] = {{"socket", required_argument, NULL, 'S'},
                                         {"help", no_argument, NULL, 'h'},
                                         {"since", required_argument, NULL, 's'},
                                         {"until", required_argument, NULL, 'U'},
                                         {"format", required_argument, NULL, 'f'},
                                         {"out", required_argument, NULL, 'o'},
                                         {NULL, 0, NULL, 0}};
    double now = (double)util_now_ns(CLOCK_REALTIME) / 1e9;
    char err[UTIL_ERRLEN];
    bool have_format = false;
    int o;

    e->out = "-";
    e->until = now;
    optind = 1;
    opterr = 0;
    while ((o = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        switch (o) {
        case 'h':
            export_usage(stdout);
            return 1;
        case 'S':
            e->q.socket = optarg;
            break;
        case 's':
        case 'U':
            if (fmt_parse_time(optarg, o == 's' ? "--since" : "--until", now,
                               o == 's' ? &e->since : &e->until, err, sizeof(err)) < 0) {
                log_error("%s", err);
                return -EINVAL;
            }
            e->have_since |= o == 's';
            break;
        case 'f':
            if (strcmp(optarg, "csv") && strcmp(optarg, "json")) {
                log_error("--format '%s': expected csv or json", optarg);
                return -EINVAL;
            }
            e->json = strcmp(optarg, "json") == 0;
            have_format = true;
            break;
        case 'o':
            e->out = optarg;
            break;
        default:
            query_bad_option("export", argv[optind - 1]);
            return -EINVAL;
        }
    }
    if (optind < argc || !e->have_since || !have_format) {
        log_error("%s (usage: wattprof export --since T --format csv|json)",
                  optind < argc    ? "unexpected argument"
                  : !e->have_since ? "--since is required"
                                   : "--format is required");
        return -EINVAL;
    }
    if (!(e->until > e->since)) {
        log_error("--until must be after --since");
        return -EINVAL;
    }
    return 0;
}

static int cmp_row(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    int64_t px = query_int(x->proc, "pid", 0), py = query_int(y->proc, "pid", 0);

    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return (px > py) - (px < py);
}

/* Appends the per-second rows of one process. */
static int collect(rpc_client *c, const struct export_opts *e, json_object *proc, struct row **rows,
                   size_t *n, size_t *cap)
{
    json_object *p = json_object_new_object(), *reply = NULL;
    int r;

    json_object_object_add(p, "pid", json_object_new_int64(query_int(proc, "pid", 0)));
    json_object_object_add(p, "since", json_object_new_double(e->since));
    json_object_object_add(p, "until", json_object_new_double(e->until));
    json_object_object_add(p, "step_s", json_object_new_double(1));
    r = query_pages(c, "GetHistory", p, "samples", &reply);
    json_object_put(p);
    if (r < 0)
        return r;
    json_object *samples = query_obj(reply, "samples");
    for (size_t i = 0; i < json_object_array_length(samples); i++) {
        json_object *s = json_object_array_get_idx(samples, i);
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 256;
            struct row *nr = realloc(*rows, nc * sizeof(**rows));
            if (!nr) {
                json_object_put(reply);
                return -ENOMEM;
            }
            *rows = nr;
            *cap = nc;
        }
        (*rows)[(*n)++] =
            (struct row){query_num(s, "t"), query_num(s, "energy_j"), query_num(s, "cpu"), proc};
    }
    json_object_put(reply);
    return 0;
}

static void write_csv(FILE *f, const struct row *rows, size_t n)
{
    fprintf(f, "t,time,pid,comm,user,uid,class,energy_j,cpu_s\n");
    for (size_t i = 0; i < n; i++) {
        char a[FMT_LEN], e[FMT_LEN], c[FMT_LEN];
        fprintf(f, "%.0f,%s,%lld,", rows[i].t, fmt_iso8601(a, rows[i].t),
                (long long)query_int(rows[i].proc, "pid", 0));
        fmt_csv_field(f, query_str(rows[i].proc, "comm"));
        fputc(',', f);
        fmt_csv_field(f, query_str(rows[i].proc, "user"));
        fprintf(f, ",%lld,", (long long)query_int(rows[i].proc, "uid", -1));
        fmt_csv_field(f, query_str(rows[i].proc, "class"));
        fprintf(f, ",%s,%s\n", fmt_number(e, rows[i].energy_j), fmt_number(c, rows[i].cpu_s));
    }
}

static void write_json(FILE *f, const struct export_opts *e, const struct row *rows, size_t n)
{
    json_object *o = json_object_new_object(), *a = json_object_new_array();

    json_object_object_add(o, "since", json_object_new_double(e->since));
    json_object_object_add(o, "until", json_object_new_double(e->until));
    for (size_t i = 0; i < n; i++) {
        json_object *r = json_object_new_object();
        char t[FMT_LEN];
        json_object_object_add(r, "t", json_object_new_int64((int64_t)rows[i].t));
        json_object_object_add(r, "time", json_object_new_string(fmt_iso8601(t, rows[i].t)));
        json_object_object_add(r, "pid", json_object_new_int64(query_int(rows[i].proc, "pid", 0)));
        json_object_object_add(r, "comm", json_object_new_string(query_str(rows[i].proc, "comm")));
        json_object_object_add(r, "user", json_object_new_string(query_str(rows[i].proc, "user")));
        json_object_object_add(r, "uid", json_object_new_int64(query_int(rows[i].proc, "uid", -1)));
        json_object_object_add(r, "class",
                               json_object_new_string(query_str(rows[i].proc, "class")));
        json_object_object_add(r, "energy_j", json_object_new_double(rows[i].energy_j));
        json_object_object_add(r, "cpu_s", json_object_new_double(rows[i].cpu_s));
        json_object_array_add(a, r);
    }
    json_object_object_add(o, "rows", a);
    fprintf(f, "%s\n",
            json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                  JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
}

static int export_rows(rpc_client *c, const struct export_opts *e, FILE *f)
{
    double now = (double)util_now_ns(CLOCK_REALTIME) / 1e9;
    json_object *p = json_object_new_object(), *list = NULL;
    struct row *rows = NULL;
    size_t n = 0, cap = 0;
    int r;

    /* Every process with rows since --since; the daemon takes at most 1e9 s. */
    json_object_object_add(p, "window_s",
                           json_object_new_double(fmin(1e9, fmax(1, ceil(now - e->since) + 1))));
    r = query_list_processes(c, p, &list);
    json_object_put(p);
    json_object *procs = query_obj(list, "processes");
    for (size_t i = 0; r == 0 && i < json_object_array_length(procs); i++)
        r = collect(c, e, json_object_array_get_idx(procs, i), &rows, &n, &cap);
    if (r == 0) {
        if (n > 1)
            qsort(rows, n, sizeof(*rows), cmp_row);
        if (e->json)
            write_json(f, e, rows, n);
        else
            write_csv(f, rows, n);
    }
    free(rows);
    json_object_put(list);
    return r;
}

int cmd_export(int argc, char **argv)
{
    struct export_opts e = {0};
    rpc_client *c = NULL;
    FILE *f = NULL;
    int r;

    query_opts_init(&e.q);
    if ((r = export_parse(argc, argv, &e)) != 0)
        return r > 0 ? 0 : 2;
    /* The output first: an unwritable file should not wait for the daemon. */
    if (query_open_out(e.out, &f) < 0)
        return 1;
    r = query_connect(&e.q, &c);
    if (r == 0)
        r = export_rows(c, &e, f);
    rpc_client_free(c);
    if (query_close_out(e.out, f) < 0 && r == 0)
        r = -EIO;
    if (r < 0 && strcmp(e.out, "-") != 0)
        remove(e.out); /* no half-written file left behind */
    return r < 0 ? 1 : 0;
}
