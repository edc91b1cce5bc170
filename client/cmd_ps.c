/* wattprof ps and wattprof show: per-process energy from the daemon.
 *
 * `ps` lists processes by energy, power or CPU over a recent window
 * (ListProcesses); `show PID` adds one process's totals since it was first
 * seen, its class history, its recent power series and the model
 * (GetProcess). */
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
#include <unistd.h>

static void ps_usage(FILE *out)
{
    fprintf(out,
            "usage: wattprof ps [--window DURATION] [--user USER] [--comm REGEX]\n"
            "                   [--sort energy|power|cpu] [-n N] [--socket PATH] [--json|--csv]\n"
            "Lists processes by the energy attributed to them over the last window.\n"
            "POWER and CPU%% are both averages over the whole window: its energy, and\n"
            "the CPU time it used, divided by the window's length (a process that ran\n"
            "for 2 s of a 1m window shows 1/30 of its power while it ran).\n\n"
            "options:\n"
            "  --window D       how far back (10s, 5m, 1h; default 10s)\n"
            "  --user USER      only this user's processes (name or uid)\n"
            "  --comm REGEX     only commands matching this regex (Perl-compatible)\n"
            "  --sort KEY       energy (default), power (the same order) or cpu\n"
            "  -n N             at most N processes\n" QUERY_COMMON_HELP);
}

/* ps's own options, into ListProcesses's params (ctx). */
static int ps_opt(void *ctx, int o, const char *arg)
{
    json_object *p = ctx;
    char err[UTIL_ERRLEN];
    double d;
    long n;

    switch (o) {
    case 'w':
        if (fmt_parse_duration(arg, "--window", &d, err, sizeof(err)) < 0) {
            log_error("%s", err);
            return -EINVAL;
        }
        json_object_object_add(p, "window_s", json_object_new_double(d));
        return 0;
    case 'u':
        return query_user_opt(arg, p) < 0 ? -EINVAL : 0;
    case 'c':
        json_object_object_add(p, "comm", json_object_new_string(arg));
        return 0;
    case 's':
        if (strcmp(arg, "energy") && strcmp(arg, "power") && strcmp(arg, "cpu")) {
            log_error("--sort '%s': expected energy, power or cpu", arg);
            return -EINVAL;
        }
        /* power is energy over the window (see window_power): the same order */
        json_object_object_add(p, "sort",
                               json_object_new_string(strcmp(arg, "power") ? arg : "energy"));
        return 0;
    case 'n':
        if (util_parse_long(arg, &n) < 0 || n < 1) {
            log_error("-n '%s': expected a positive count", arg);
            return -EINVAL;
        }
        json_object_object_add(p, "limit", json_object_new_int64(n));
        return 0;
    default:
        return QUERY_OPT_UNKNOWN;
    }
}

static int ps_params(int argc, char **argv, query_opts *q, json_object *p)
{
    static const struct option opts[] = {QUERY_LONGOPTS,
                                         {"window", required_argument, NULL, 'w'},
                                         {"user", required_argument, NULL, 'u'},
                                         {"comm", required_argument, NULL, 'c'},
                                         {"sort", required_argument, NULL, 's'},
                                         {"limit", required_argument, NULL, 'n'},
                                         {NULL, 0, NULL, 0}};
    static const query_cmd cmd = {"ps", "hn:", opts, ps_usage, ps_opt, false};

    return query_parse(&cmd, q, p, argc, argv);
}

/* One definition for POWER and CPU%: each the window's total divided by the
 * window's length.  The daemon gives CPU that way but power over the seconds
 * the process was seen, so power is recomputed from the window's energy. */
static void window_power(json_object *reply)
{
    json_object *procs = query_obj(reply, "processes");
    double window = query_num(reply, "window_s");

    for (size_t i = 0; window > 0 && i < json_object_array_length(procs); i++) {
        json_object *p = json_object_array_get_idx(procs, i);
        json_object_object_add(p, "power_w",
                               json_object_new_double(query_num(p, "energy_j") / window));
    }
}

int cmd_ps(int argc, char **argv)
{
    json_object *params = json_object_new_object(), *reply = NULL;
    query_opts q;
    int r;

    query_opts_init(&q);
    if ((r = ps_params(argc, argv, &q, params)) != 0) {
        json_object_put(params);
        return r > 0 ? 0 : 2;
    }
    rpc_client *c;
    if ((r = query_connect(&q, &c)) == 0) {
        r = query_list_processes(c, params, &reply);
        rpc_client_free(c);
    }
    json_object_put(params);
    if (r < 0)
        return 1;
    window_power(reply);
    if (q.out == QUERY_JSON) {
        query_print_json(reply);
    } else {
        fmt_table *t = query_process_table(query_obj(reply, "processes"));
        if (!t) {
            json_object_put(reply);
            return 1;
        }
        if (q.out == QUERY_CSV)
            fmt_table_print_csv(t, stdout);
        else {
            /* For a reader at a terminal, not for a script reading the table. */
            if (isatty(STDOUT_FILENO))
                printf(
                    "ENERGY, TOTAL and POWER are attributed: each process's share of the measured "
                    "energy, adding up to the node's\n");
            fmt_table_print(t, stdout, q.color);
        }
        fmt_table_free(t);
    }
    json_object_put(reply);
    return 0;
}

/* ---- show ------------------------------------------------------------------ */

static void show_usage(FILE *out)
{
    fprintf(out,
            "usage: wattprof show PID [--series DURATION] [--socket PATH] [--json|--csv]\n"
            "Shows one process: energy since the daemon first saw it, its class\n"
            "history, its recent power and the model. --csv prints the series.\n\n"
            "options:\n"
            "  --series D       how much recent power to show (default 60s)\n" QUERY_COMMON_HELP);
}

/* Which calibrations its seconds were attributed under: where idle came
 * from, each from its first second. */
static void show_calibrations(json_object *cals)
{
    size_t n = json_object_array_length(cals);
    char a[FMT_LEN], b[FMT_LEN];

    printf("idle from ");
    for (size_t i = 0; i < n; i++) {
        json_object *c = json_object_array_get_idx(cals, i);
        const char *src = query_str(c, "idle_source");
        printf("%s %s", i ? "," : "", src && *src ? src : "(not recorded)");
        if (!isnan(query_num(c, "fitted")))
            printf(" (fit of %s)", fmt_iso8601(b, query_num(c, "fitted")));
        printf(" from %s", fmt_iso8601(a, query_num(c, "t")));
    }
    printf("%s\n", n ? "" : " -");
}

static void show_text(const query_opts *q, json_object *reply)
{
    json_object *p = query_obj(reply, "process"), *m = query_obj(reply, "model");
    json_object *classes = query_obj(reply, "classes"), *series = query_obj(reply, "series");
    size_t n = json_object_array_length(series);
    char a[FMT_LEN], b[FMT_LEN], c[FMT_LEN];
    double *y = calloc(n ? n : 1, sizeof(double)), sum = 0, peak = 0;

    printf("%s%lld %s%s  user %s (uid %lld), class %s\n", q->color ? "\033[1m" : "",
           (long long)query_int(p, "pid", 0), query_str(p, "comm"), q->color ? "\033[0m" : "",
           query_str(p, "user"), (long long)query_int(p, "uid", -1), query_str(p, "class"));
    if (*query_str(p, "cmdline"))
        printf("command    %s\n", query_str(p, "cmdline"));
    printf("seen       since %s", fmt_iso8601(a, query_num(p, "first_seen")));
    if (!isnan(query_num(p, "exited")))
        printf(", exited %s", fmt_iso8601(b, query_num(p, "exited")));
    printf("\nenergy     %s attributed, %s standalone estimate\n           (%s)\n",
           fmt_energy(a, query_num(p, "total_j")), fmt_energy(b, query_num(p, "standalone_j")),
           FMT_ENERGY_LEGEND);
    printf("classes   ");
    for (size_t i = 0; i < json_object_array_length(classes); i++) {
        json_object *k = json_object_array_get_idx(classes, i);
        printf(" %s%s from %s", i ? "," : "", query_str(k, "class"),
               fmt_iso8601(a, query_num(k, "t")));
    }
    printf("%s\n", json_object_array_length(classes) ? "" : " -");
    show_calibrations(query_obj(reply, "calibrations"));
    for (size_t i = 0; y && i < n; i++) {
        y[i] = query_num(json_object_array_get_idx(series, i), "power_w");
        sum += isfinite(y[i]) ? y[i] : 0;
        peak = fmax(peak, isfinite(y[i]) ? y[i] : 0);
    }
    printf("power      ");
    if (n && y) {
        plot_sparkline(stdout, y, n, plot_utf8());
        printf("  mean %s, peak %s over %zu s\n", fmt_power(b, sum / (double)n), fmt_power(c, peak),
               n);
    } else {
        printf("- (no recent samples)\n");
    }
    printf("model      %s (%s, sha256 %.12s)%s\n", query_str(m, "name"), query_str(m, "engine"),
           query_str(m, "sha256"),
           json_object_get_boolean(query_obj(m, "calibrated")) ? "" : ", uncalibrated");
    free(y);
}

static void show_csv(json_object *reply)
{
    json_object *series = query_obj(reply, "series");

    printf("t,time,energy_j,power_w,cpu\n");
    for (size_t i = 0; i < json_object_array_length(series); i++) {
        json_object *s = json_object_array_get_idx(series, i);
        char a[FMT_LEN], e[FMT_LEN], p[FMT_LEN], c[FMT_LEN];
        printf("%.0f,%s,%s,%s,%s\n", query_num(s, "t"), fmt_iso8601(a, query_num(s, "t")),
               fmt_number(e, query_num(s, "energy_j")), fmt_number(p, query_num(s, "power_w")),
               fmt_number(c, query_num(s, "cpu")));
    }
}

/* show's own option, --series, into GetProcess's params (ctx). */
static int show_opt(void *ctx, int o, const char *arg)
{
    char err[UTIL_ERRLEN];
    double d;

    if (o != 's')
        return QUERY_OPT_UNKNOWN;
    if (fmt_parse_duration(arg, "--series", &d, err, sizeof(err)) < 0) {
        log_error("%s", err);
        return -EINVAL;
    }
    json_object_object_add(ctx, "series_s", json_object_new_double(d < 1 ? 1 : d));
    return 0;
}

static int show_params(int argc, char **argv, query_opts *q, json_object *p)
{
    static const struct option opts[] = {
        QUERY_LONGOPTS, {"series", required_argument, NULL, 's'}, {NULL, 0, NULL, 0}};
    static const query_cmd cmd = {"show", "h", opts, show_usage, show_opt, true};
    long pid;
    int r;

    if ((r = query_parse(&cmd, q, p, argc, argv)) != 0)
        return r;
    if (optind != argc - 1) {
        log_error("expected one PID (usage: wattprof show PID)");
        return -EINVAL;
    }
    if (util_parse_long(argv[optind], &pid) < 0 || pid <= 0 || pid > 0x7fffffff) {
        log_error("'%s' is not a process id", argv[optind]);
        return -EINVAL;
    }
    json_object_object_add(p, "pid", json_object_new_int64(pid));
    return 0;
}

/* The daemon gives a stored process's power and CPU only over a window;
 * show's are the mean of its recent series (--series), as the text says. */
static void show_recent(json_object *reply)
{
    json_object *p = query_obj(reply, "process"), *series = query_obj(reply, "series");
    size_t n = json_object_array_length(series);
    double w = 0, cpu = 0;

    if (!p || n == 0)
        return;
    for (size_t i = 0; i < n; i++) {
        json_object *s = json_object_array_get_idx(series, i);
        w += isfinite(query_num(s, "power_w")) ? query_num(s, "power_w") : 0;
        cpu += isfinite(query_num(s, "cpu")) ? query_num(s, "cpu") : 0;
    }
    json_object_object_add(p, "power_w", json_object_new_double(w / (double)n));
    json_object_object_add(p, "cpu", json_object_new_double(cpu / (double)n));
    json_object_object_add(p, "recent_s", json_object_new_int64((int64_t)n));
}

int cmd_show(int argc, char **argv)
{
    json_object *params = json_object_new_object(), *reply = NULL;
    query_opts q;
    int r;

    setlocale(LC_CTYPE, "");
    query_opts_init(&q);
    if ((r = show_params(argc, argv, &q, params)) != 0) {
        json_object_put(params);
        return r > 0 ? 0 : 2;
    }
    r = query_once(&q, "GetProcess", params, &reply);
    json_object_put(params);
    if (r < 0)
        return 1;
    show_recent(reply);
    if (q.out == QUERY_JSON)
        query_print_json(reply);
    else if (q.out == QUERY_CSV)
        show_csv(reply);
    else
        show_text(&q, reply);
    json_object_put(reply);
    return 0;
}
