/* wattprof history: a time series of one process, a command, a user or the
 * whole host (GetHistory), as a table, JSON, CSV, a terminal chart or a
 * PNG/SVG picture. */
#include "commands.h"
#include "format.h"
#include "plot.h"
#include "query.h"
#include "util/util.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

struct history_opts {
    query_opts q;
    bool plot;
    const char *plot_file; /* NULL: the terminal */
    char what[128];        /* "pid 42", "host": the series' name */
};

static void history_usage(FILE *out)
{
    fprintf(out, "usage: wattprof history (--pid P | --comm NAME | --user U | --host) --since T\n"
                 "                        [--until T] [--step D] [--plot [FILE.png|FILE.svg]]\n"
                 "                        [--socket PATH] [--json|--csv]\n"
                 "A time series of power and energy.\n\n"
                 "options:\n"
                 "  --since T, --until T  relative (30m, 1h, 2d: that long ago), 'now', @EPOCH\n"
                 "                   or ISO 8601 (2026-11-30T04:00:00Z); --until defaults to now\n"
                 "  --step D         bucket width (default: at most 1000 points, >= 1s)\n"
                 "  --plot           draw a chart in the terminal\n"
                 "  --plot FILE      draw a PNG or SVG picture with cairo\n" QUERY_COMMON_HELP);
}

static int bad(const char *err)
{
    log_error("%s", err);
    return -EINVAL;
}

static int history_opt(struct history_opts *h, int o, char **argv, json_object *p, double now)
{
    char err[UTIL_ERRLEN];
    double v;
    long n;
    int64_t uid;

    switch (o) {
    case 'p':
        if (util_parse_long(optarg, &n) < 0 || n <= 0)
            return bad("--pid: expected a process id");
        json_object_object_add(p, "pid", json_object_new_int64(n));
        snprintf(h->what, sizeof(h->what), "pid %ld", n);
        return 0;
    case 'c':
        json_object_object_add(p, "comm", json_object_new_string(optarg));
        snprintf(h->what, sizeof(h->what), "command %s", optarg);
        return 0;
    case 'u':
        if (query_parse_user(optarg, &uid) < 0)
            return -EINVAL;
        json_object_object_add(p, "uid", json_object_new_int64(uid));
        snprintf(h->what, sizeof(h->what), "user %s", optarg);
        return 0;
    case 'H':
        json_object_object_add(p, "host", json_object_new_boolean(true));
        snprintf(h->what, sizeof(h->what), "host");
        return 0;
    case 's':
    case 'U':
        if (fmt_parse_time(optarg, o == 's' ? "--since" : "--until", now, &v, err, sizeof(err)) < 0)
            return bad(err);
        json_object_object_add(p, o == 's' ? "since" : "until", json_object_new_double(v));
        return 0;
    case 't':
        if (fmt_parse_duration(optarg, "--step", &v, err, sizeof(err)) < 0)
            return bad(err);
        json_object_object_add(p, "step_s", json_object_new_double(v));
        return 0;
    case 'P':
        h->plot = true;
        h->plot_file = optarg;
        /* `--plot FILE` as well as `--plot=FILE`: take a following word
         * that names a file (it has an extension), known format or not. */
        if (!optarg && argv[optind] && argv[optind][0] != '-' && strchr(argv[optind], '.'))
            h->plot_file = argv[optind++];
        if (h->plot_file && plot_check_name("--plot", h->plot_file, err, sizeof(err)) < 0)
            return bad(err);
        return 0;
    default:
        return -ENOENT;
    }
}

static int history_parse(int argc, char **argv, struct history_opts *h, json_object *p)
{
    static const struct option opts[] = {QUERY_LONGOPTS,
                                         {"pid", required_argument, NULL, 'p'},
                                         {"comm", required_argument, NULL, 'c'},
                                         {"user", required_argument, NULL, 'u'},
                                         {"host", no_argument, NULL, 'H'},
                                         {"since", required_argument, NULL, 's'},
                                         {"until", required_argument, NULL, 'U'},
                                         {"step", required_argument, NULL, 't'},
                                         {"plot", optional_argument, NULL, 'P'},
                                         {NULL, 0, NULL, 0}};
    double now = (double)util_now_ns(CLOCK_REALTIME) / 1e9;
    int o, r, kinds = 0;

    optind = 1;
    opterr = 0;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if ((r = query_common_opt(&h->q, o, optarg)) != 0) {
            if (r < 0)
                return -EINVAL;
            continue;
        }
        if (o == 'h') {
            history_usage(stdout);
            return 1;
        }
        kinds += o == 'p' || o == 'c' || o == 'u' || o == 'H';
        r = history_opt(h, o, argv, p, now);
        if (r == -ENOENT) {
            query_bad_option("history", argv[optind - 1]);
            return -EINVAL;
        }
        if (r < 0)
            return r;
    }
    if (optind < argc)
        return bad("unexpected argument (see wattprof history --help)");
    if (kinds != 1)
        return bad("give exactly one of --pid, --comm, --user or --host");
    if (!query_obj(p, "since"))
        return bad("--since is required (e.g. --since 1h)");
    if (h->plot && h->q.out != QUERY_TEXT)
        return bad(h->q.out == QUERY_JSON
                       ? "--plot and --json contradict each other: a chart or the data, pick one"
                       : "--plot and --csv contradict each other: a chart or the data, pick one");
    return 0;
}

/* The host's bucket: the calibration its last second was attributed
 * under, where idle came from ("fitted", "percentile"; "+N" when its
 * seconds had N others) and when that fit was made. */
static int calibration_cell(fmt_table *t, json_object *s)
{
    const char *src = query_str(s, "idle_source");
    int64_t more = query_int(s, "calibrations", 1) - 1;
    char cell[FMT_LEN], when[FMT_LEN] = "", raw[FMT_LEN];

    if (!isnan(query_num(s, "fitted")))
        fmt_iso8601(when, query_num(s, "fitted"));
    snprintf(raw, sizeof(raw), "%s", src ? src : "");
    snprintf(cell, sizeof(cell), "%s", src ? src : "-");
    if (more > 0)
        snprintf(cell + strlen(cell), sizeof(cell) - strlen(cell), " +%lld", (long long)more);
    int r = fmt_table_add(t, cell, raw);
    snprintf(raw, sizeof(raw), "%.0f", query_num(s, "fitted"));
    return r ? r : fmt_table_add(t, *when ? when : "-", *when ? raw : "");
}

static int print_table(const struct history_opts *h, json_object *samples, bool host)
{
    static const char *head[] = {"TIME", "POWER", "ENERGY", "CPU%", "IDLE FROM", "FITTED"};
    static const char *csv[] = {"t", "power_w", "energy_j", "cpu", "idle_source", "fitted"};
    static const fmt_align al[] = {FMT_LEFT, FMT_RIGHT, FMT_RIGHT, FMT_RIGHT, FMT_LEFT, FMT_LEFT};
    fmt_table *t = fmt_table_new(host ? 6 : 4, head, csv, al);
    int r = t ? 0 : -ENOMEM;

    for (size_t i = 0; r == 0 && i < json_object_array_length(samples); i++) {
        json_object *s = json_object_array_get_idx(samples, i);
        char a[FMT_LEN], raw[32];
        snprintf(raw, sizeof(raw), "%.0f", query_num(s, "t"));
        r = fmt_table_add(t, fmt_iso8601(a, query_num(s, "t")), raw);
        r = r ? r
              : query_table_num(t, fmt_power(a, query_num(s, "power_w")), query_num(s, "power_w"));
        r = r ? r
              : query_table_num(t, fmt_energy(a, query_num(s, "energy_j")),
                                query_num(s, "energy_j"));
        snprintf(a, sizeof(a), host ? "-" : "%.1f", query_num(s, "cpu") * 100);
        r = r ? r : query_table_num(t, a, host ? NAN : query_num(s, "cpu"));
        if (host && r == 0)
            r = calibration_cell(t, s);
    }
    if (r == 0 && h->q.out == QUERY_CSV)
        fmt_table_print_csv(t, stdout);
    else if (r == 0)
        fmt_table_print(t, stdout, h->q.color);
    fmt_table_free(t);
    return r;
}

static int terminal_columns(void)
{
    struct winsize ws;
    const char *env = getenv("COLUMNS");

    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return env && atoi(env) > 0 ? atoi(env) : 80;
}

static int draw(const struct history_opts *h, json_object *samples, double step)
{
    size_t n = json_object_array_length(samples);
    double *t = calloc(n + 1, sizeof(double)), *y = calloc(n + 1, sizeof(double));
    char title[256], err[UTIL_ERRLEN], st[FMT_LEN];
    plot_series s = {.label = title, .t = t, .y = y, .n = n};
    int r = 0;

    if (!t || !y) {
        free(t);
        free(y);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        json_object *o = json_object_array_get_idx(samples, i);
        t[i] = query_num(o, "t");
        y[i] = query_num(o, "power_w");
    }
    snprintf(title, sizeof(title), "power of %s, %s steps", h->what, fmt_duration(st, step));
    if (n == 0) {
        log_error("no samples for %s in that time range: nothing to plot", h->what);
        r = -ENODATA;
    } else if (h->plot_file) {
        s.label = h->what;
        r = plot_image(h->plot_file, &s, 1, title, 900, 500, err, sizeof(err));
        plot_release();
        if (r < 0)
            log_error("%s", err);
    } else {
        int cols = terminal_columns() - 12;
        r = plot_terminal(stdout, &s, cols < 20 ? 20 : cols, 12, plot_utf8());
    }
    free(t);
    free(y);
    return r;
}

int cmd_history(int argc, char **argv)
{
    struct history_opts h = {0};
    json_object *params = json_object_new_object(), *reply = NULL;
    int r;

    setlocale(LC_CTYPE, "");
    query_opts_init(&h.q);
    if ((r = history_parse(argc, argv, &h, params)) != 0) {
        json_object_put(params);
        return r > 0 ? 0 : 2;
    }
    r = query_once(&h.q, "GetHistory", params, &reply);
    json_object_put(params);
    if (r < 0)
        return 1;
    json_object *samples = query_obj(reply, "samples");
    /* The daemon keeps no CPU time for the host: null, as the table's "-"
     * and the CSV's empty cell say, not 0. */
    for (size_t i = 0; strcmp(h.what, "host") == 0 && i < json_object_array_length(samples); i++)
        json_object_object_add(json_object_array_get_idx(samples, i), "cpu", NULL);
    if (h.plot)
        r = draw(&h, samples, query_num(reply, "step_s"));
    else if (h.q.out == QUERY_JSON)
        query_print_json(reply);
    else
        r = print_table(&h, samples, strcmp(h.what, "host") == 0);
    json_object_put(reply);
    return r < 0 ? 1 : 0;
}
