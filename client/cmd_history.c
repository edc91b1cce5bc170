/* wattprof history: a time series of one process, a command, a user or the
 * whole host (GetHistory), as a table, JSON, CSV, a terminal chart or a
 * PNG/SVG picture.
 *
 * Buckets start on multiples of the step in Unix time (a 1-minute bucket at
 * :00). A bucket the daemon did not sample throughout (covered_s below the
 * step: it still fills, or the daemon was not running for part of it) is
 * marked in the table and left out of charts unless --partial; a run of
 * buckets without data is a row of its own in the table and a break in the
 * chart's line. */
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
    bool plot, partial;
    const char *plot_file; /* NULL: the terminal */
    char what[128];        /* "pid 42", "host": the series' name */
};

static void history_usage(FILE *out)
{
    fprintf(out, "usage: wattprof history (--pid P | --comm NAME | --user U | --job ID | --host)\n"
                 "                        --since T [--until T] [--step D]\n"
                 "                        [--plot [FILE.png|FILE.svg]] [--partial]\n"
                 "                        [--socket PATH] [--json|--csv]\n"
                 "A time series of power and energy, in buckets that start on multiples of\n"
                 "the step (a 1m bucket at :00). POWER is the bucket's energy over its width.\n"
                 "A bucket the daemon did not sample throughout (still filling, or the daemon\n"
                 "was not running for part of it) is marked in the table, and time without\n"
                 "data is a row of its own; CSV gives covered_s, the seconds sampled.\n\n"
                 "options:\n"
                 "  --since T, --until T  relative (30m, 1h, 2d: that long ago), 'now', @EPOCH\n"
                 "                   or ISO 8601 (2026-11-30T04:00:00Z); --until defaults to now\n"
                 "  --step D         bucket width (default: 1, 2, 5, 10, 15, 30s, 1, 2, 5, 10,\n"
                 "                   15, 30m, 1, 2, 3, 6, 12h or days: at most 1000 points)\n"
                 "  --plot           draw a chart in the terminal\n"
                 "  --plot FILE      draw a PNG or SVG picture with cairo\n"
                 "  --partial        draw partial buckets in charts too\n" QUERY_COMMON_HELP);
}

static int bad(const char *err)
{
    log_error("%s", err);
    return -EINVAL;
}

struct history_parse {
    struct history_opts *h;
    json_object *p; /* the call's params */
    char **argv;    /* for --plot's following word */
    double now;
    int kinds; /* of --pid, --comm, --user, --host and --job */
};

static int history_opt(void *ctx, int o, const char *arg)
{
    struct history_parse *hp = ctx;
    struct history_opts *h = hp->h;
    json_object *p = hp->p;
    char **argv = hp->argv;
    double now = hp->now;
    char err[UTIL_ERRLEN];
    double v;
    long n;

    hp->kinds += o == 'p' || o == 'c' || o == 'u' || o == 'H' || o == 'j';

    switch (o) {
    case 'p':
        if (util_parse_long(arg, &n) < 0 || n <= 0)
            return bad("--pid: expected a process id");
        json_object_object_add(p, "pid", json_object_new_int64(n));
        snprintf(h->what, sizeof(h->what), "pid %ld", n);
        return 0;
    case 'c':
        json_object_object_add(p, "comm", json_object_new_string(arg));
        snprintf(h->what, sizeof(h->what), "command %s", arg);
        return 0;
    case 'u':
        if (query_user_opt(arg, p) < 0)
            return -EINVAL;
        snprintf(h->what, sizeof(h->what), "user %s", arg);
        return 0;
    case 'j':
        if (!arg[0])
            return bad("--job: expected a job id");
        json_object_object_add(p, "job", json_object_new_string(arg));
        snprintf(h->what, sizeof(h->what), "job %s", arg);
        return 0;
    case 'H':
        json_object_object_add(p, "host", json_object_new_boolean(true));
        snprintf(h->what, sizeof(h->what), "host");
        return 0;
    case 's':
    case 'U':
        return query_time_opt(o, arg, now, p);
    case 't':
        if (fmt_parse_duration(arg, "--step", &v, err, sizeof(err)) < 0)
            return bad(err);
        json_object_object_add(p, "step_s", json_object_new_double(v));
        return 0;
    case 'A':
        h->partial = true;
        return 0;
    case 'P':
        h->plot = true;
        h->plot_file = arg;
        /* `--plot FILE` as well as `--plot=FILE`: take a following word
         * that names a file (it has an extension), known format or not. */
        if (!arg && argv[optind] && argv[optind][0] != '-' && strchr(argv[optind], '.'))
            h->plot_file = argv[optind++];
        if (h->plot_file && plot_check_name("--plot", h->plot_file, err, sizeof(err)) < 0)
            return bad(err);
        return 0;
    default:
        return -ENOENT;
    }
}

/* The step the daemon would choose for at most 1000 points, rounded up to
 * one that divides the clock's minutes, hours or days. */
static double round_step(double span_s)
{
    static const double nice[] = {1,   2,   5,    10,   15,   30,    60,    120,   300,
                                  600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400};
    double want = ceil(span_s / 1000);

    for (size_t i = 0; i < sizeof(nice) / sizeof(nice[0]); i++)
        if (nice[i] >= want)
            return nice[i];
    return ceil(want / 86400) * 86400;
}

/* Starts the first bucket on a multiple of the step, so that buckets are the
 * clock's own (1m: from :00 to :59); the step is then always sent. */
static void align_buckets(json_object *p, double now)
{
    double since = query_num(p, "since");
    double until = query_obj(p, "until") ? query_num(p, "until") : now + 1;
    double step = query_obj(p, "step_s") ? query_num(p, "step_s") : round_step(until - since);
    double whole = floor(step); /* the daemon's buckets are whole seconds */

    if (whole < 1)
        return;
    json_object_object_add(p, "since", json_object_new_double(floor(since / whole) * whole));
    json_object_object_add(p, "step_s", json_object_new_double(step));
}

static int history_parse(int argc, char **argv, struct history_opts *h, json_object *p)
{
    static const struct option opts[] = {QUERY_LONGOPTS,
                                         {"pid", required_argument, NULL, 'p'},
                                         {"comm", required_argument, NULL, 'c'},
                                         {"user", required_argument, NULL, 'u'},
                                         {"host", no_argument, NULL, 'H'},
                                         {"job", required_argument, NULL, 'j'},
                                         {"since", required_argument, NULL, 's'},
                                         {"until", required_argument, NULL, 'U'},
                                         {"step", required_argument, NULL, 't'},
                                         {"plot", optional_argument, NULL, 'P'},
                                         {"partial", no_argument, NULL, 'A'},
                                         {NULL, 0, NULL, 0}};
    static const query_cmd cmd = {"history", "h", opts, history_usage, history_opt, true};
    double now = (double)util_now_ns(CLOCK_REALTIME) / 1e9;
    struct history_parse hp = {h, p, argv, now, 0};
    int r;

    if ((r = query_parse(&cmd, &h->q, &hp, argc, argv)) != 0)
        return r;
    if (optind < argc)
        return bad("unexpected argument (see wattprof history --help)");
    if (hp.kinds != 1)
        return bad("give exactly one of --pid, --comm, --user, --job or --host");
    if (!query_obj(p, "since"))
        return bad("--since is required (e.g. --since 1h)");
    align_buckets(p, now);
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

enum bucket_kind { BUCKET_FULL, BUCKET_PARTIAL, BUCKET_FILLING };

/* A bucket the daemon sampled for less than this share of its width is
 * partial (a second's ticks add up to about 1 s, not exactly). */
#define BUCKET_FULL_SHARE 0.9

/* What sample s's bucket is; *covered: the seconds the daemon sampled of it
 * (the step where the daemon does not say). */
static enum bucket_kind bucket_kind(json_object *s, double step, double now, double *covered)
{
    double c = query_num(s, "covered_s");

    *covered = isnan(c) ? step : c;
    if (query_num(s, "t") + step > now)
        return BUCKET_FILLING;
    return *covered < BUCKET_FULL_SHARE * step ? BUCKET_PARTIAL : BUCKET_FULL;
}

/* Time without data between the sample before (at `prev`) and one at t. */
static bool gap_before(double prev, double t, double step)
{
    return t - prev > 1.5 * step;
}

static int add_gap_row(fmt_table *t, double from, double to, bool host)
{
    char a[FMT_LEN], note[FMT_LEN + 16];
    int r = fmt_table_add(t, fmt_iso8601(a, from), NULL);

    snprintf(note, sizeof(note), "no data for %s", fmt_duration(a, to - from));
    for (int c = 0; r == 0 && c < 3; c++)
        r = fmt_table_add(t, "-", "");
    r = r ? r : fmt_table_add(t, note, "");
    for (int c = 0; r == 0 && host && c < 2; c++) /* IDLE FROM, FITTED */
        r = fmt_table_add(t, "-", "");
    return r;
}

static int print_table(const struct history_opts *h, json_object *samples, bool host, double step,
                       double now)
{
    static const char *head[] = {"TIME", "POWER", "ENERGY", "CPU%", "NOTE", "IDLE FROM", "FITTED"};
    static const char *csv[] = {"t",         "power_w",     "energy_j", "cpu",
                                "covered_s", "idle_source", "fitted"};
    static const fmt_align al[] = {FMT_LEFT, FMT_RIGHT, FMT_RIGHT, FMT_RIGHT,
                                   FMT_LEFT, FMT_LEFT,  FMT_LEFT};
    static const char *kinds[] = {"", "partial", "filling"};
    fmt_table *t = fmt_table_new(host ? 7 : 5, head, csv, al);
    bool notes = false;
    int r = t ? 0 : -ENOMEM;

    for (size_t i = 0; r == 0 && i < json_object_array_length(samples); i++) {
        json_object *s = json_object_array_get_idx(samples, i);
        char a[FMT_LEN], raw[32], note[64] = "";
        double ts = query_num(s, "t"), covered;
        enum bucket_kind k = bucket_kind(s, step, now, &covered);
        if (i > 0 && h->q.out == QUERY_TEXT) {
            double prev = query_num(json_object_array_get_idx(samples, i - 1), "t");
            if (gap_before(prev, ts, step)) {
                r = add_gap_row(t, prev + step, ts, host);
                notes = true;
            }
        }
        snprintf(raw, sizeof(raw), "%.0f", ts);
        r = r ? r : fmt_table_add(t, fmt_iso8601(a, ts), raw);
        r = r ? r
              : query_table_num(t, fmt_power(a, query_num(s, "power_w")), query_num(s, "power_w"));
        r = r ? r
              : query_table_num(t, fmt_energy(a, query_num(s, "energy_j")),
                                query_num(s, "energy_j"));
        snprintf(a, sizeof(a), host ? "-" : "%.1f", query_num(s, "cpu") * 100);
        r = r ? r : query_table_num(t, a, host ? NAN : query_num(s, "cpu"));
        if (k != BUCKET_FULL)
            snprintf(note, sizeof(note), "%s: %.3g of %.3g s", kinds[k], covered, step);
        notes |= note[0] != '\0';
        r = r ? r : query_table_num(t, note, query_num(s, "covered_s"));
        if (host && r == 0)
            r = calibration_cell(t, s);
    }
    if (!notes)
        fmt_table_hide(t, 4);
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

/* The chart's points, one per bucket from the first sample to the last: NAN
 * where a bucket has no data or is partial (unless --partial), so the line
 * breaks there and time stays proportional. t and y hold `cap` points. */
static size_t chart_points(const struct history_opts *h, json_object *samples, double step,
                           double now, double *t, double *y, size_t cap, size_t *left_out)
{
    size_t n = json_object_array_length(samples), m = 0;
    double covered;

    *left_out = 0;
    for (size_t i = 0; i < n && m < cap; i++) {
        json_object *o = json_object_array_get_idx(samples, i);
        double ts = query_num(o, "t");
        if (i > 0) {
            double prev = query_num(json_object_array_get_idx(samples, i - 1), "t");
            for (double g = prev + step; gap_before(prev, ts, step) && g < ts && m < cap - 1;
                 g += step) {
                t[m] = g;
                y[m++] = NAN;
            }
        }
        t[m] = ts;
        y[m] = query_num(o, "power_w");
        if (bucket_kind(o, step, now, &covered) != BUCKET_FULL && !h->partial) {
            y[m] = NAN;
            ++*left_out;
        }
        m++;
    }
    return m;
}

static int draw(const struct history_opts *h, json_object *samples, double step, double now)
{
    size_t n = json_object_array_length(samples), left_out, cap = n + 1;
    char title[256], err[UTIL_ERRLEN], st[FMT_LEN];
    plot_series s = {.label = title};
    double *t, *y;
    int r = 0;

    if (n > 1 && step > 0) /* every bucket between the first and the last */
        cap += (size_t)((query_num(json_object_array_get_idx(samples, n - 1), "t") -
                         query_num(json_object_array_get_idx(samples, 0), "t")) /
                        step);
    t = calloc(cap, sizeof(double));
    y = calloc(cap, sizeof(double));
    if (!t || !y) {
        free(t);
        free(y);
        return -ENOMEM;
    }
    s.t = t;
    s.y = y;
    s.n = chart_points(h, samples, step, now, t, y, cap, &left_out);
    snprintf(title, sizeof(title), "power of %s, %s steps", h->what, fmt_duration(st, step));
    if (left_out)
        snprintf(title + strlen(title), sizeof(title) - strlen(title),
                 "; %zu partial bucket%s left out (--partial draws them)", left_out,
                 left_out == 1 ? "" : "s");
    if (n == 0) {
        log_error("no samples for %s in that time range: nothing to plot", h->what);
        r = -ENODATA;
    } else if (left_out == n) {
        log_error("every bucket of %s in that time range is partial (the daemon sampled only part "
                  "of it): --partial draws them",
                  h->what);
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
    /* A bucket that had not ended when the daemon was asked is still
     * filling: what it holds was read before its end. The clock read after
     * the reply would call it partial whenever it ended while the answer
     * was on its way. */
    double asked = (double)util_now_ns(CLOCK_REALTIME) / 1e9;
    r = query_once_pages(&h.q, "GetHistory", params, "samples", &reply);
    json_object_put(params);
    if (r < 0)
        return 1;
    json_object *samples = query_obj(reply, "samples");
    /* Queries share a commit of up to a second ago: a bucket that ended
     * after it is still filling too. */
    double as_of = query_num(reply, "as_of");
    if (!isnan(as_of) && as_of < asked)
        asked = as_of;
    /* The daemon keeps no CPU time for the host: null, as the table's "-"
     * and the CSV's empty cell say, not 0. */
    for (size_t i = 0; strcmp(h.what, "host") == 0 && i < json_object_array_length(samples); i++)
        json_object_object_add(json_object_array_get_idx(samples, i), "cpu", NULL);
    double step = query_num(reply, "step_s");
    if (h.plot)
        r = draw(&h, samples, step, asked);
    else if (h.q.out == QUERY_JSON)
        query_print_json(reply);
    else
        r = print_table(&h, samples, strcmp(h.what, "host") == 0, step, asked);
    json_object_put(reply);
    return r < 0 ? 1 : 0;
}
