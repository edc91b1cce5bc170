/* wattprof status: the daemon's health at a glance, like `systemctl
 * status`: version and uptime, sampling rate and timer lateness, power
 * sources, events and their multiplexing, the model and its live error,
 * tracked processes and the database. Warnings stand out. */
#include "commands.h"
#include "format.h"
#include "query.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define C_BOLD "\033[1m"
#define C_WARN "\033[1;33m"
#define C_BAD "\033[1;31m"
#define C_OFF "\033[0m"

static void status_usage(FILE *out)
{
    fprintf(out, "usage: wattprof status [--socket PATH] [--json | --csv]\n"
                 "Shows the daemon's health: rate, timer lateness, power sources, events,\n"
                 "the model and its live error, tracked processes and the database.\n\n"
                 "options:\n" QUERY_COMMON_HELP);
}

static void label(const query_opts *q, const char *name)
{
    printf("%s%-11s%s", q->color ? C_BOLD : "", name, q->color ? C_OFF : "");
}

static void print_zones(const query_opts *q, json_object *zones)
{
    char w[FMT_LEN];

    for (size_t i = 0; i < json_object_array_length(zones); i++) {
        json_object *z = json_object_array_get_idx(zones, i);
        label(q, i == 0 ? "Power" : "");
        if (*query_str(z, "error"))
            printf("%s%s: %s%s\n", q->color ? C_WARN : "", query_str(z, "name"),
                   query_str(z, "error"), q->color ? C_OFF : "");
        else
            printf("%s (%s) %s\n", query_str(z, "name"), query_str(z, "domain"),
                   fmt_power(w, query_num(z, "power_w")));
    }
}

static void print_events(const query_opts *q, json_object *events)
{
    size_t n = json_object_array_length(events);

    label(q, "Events");
    printf("%zu counted", n);
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(events, i);
        double ratio = query_num(e, "running_ratio");
        printf("%s %s", i ? "," : ":", query_str(e, "name"));
        if (*query_str(e, "error"))
            printf(" (%s)", query_str(e, "error"));
        else if (isfinite(ratio) && ratio < 0.995) /* multiplexed: counted part of the time */
            printf(" (%.0f %% counted)", ratio * 100);
    }
    printf("\n");
}

static void print_model(const query_opts *q, json_object *m, double drift, bool flagged)
{
    label(q, "Model");
    printf("%s, %s, sha256 %.12s, ", query_str(m, "name"), query_str(m, "engine"),
           query_str(m, "sha256"));
    if (json_object_get_boolean(query_obj(m, "calibrated")))
        printf("trained %s, CV MAPE %.1f %%\n", query_str(m, "created"),
               query_num(m, "cv_mape") * 100);
    else
        printf("%suncalibrated%s (generic coefficients: an estimate)\n", q->color ? C_WARN : "",
               q->color ? C_OFF : "");
    label(q, "Drift");
    if (isnan(drift))
        printf("- (no measured power to compare with)\n");
    else
        printf("%s%.1f %%%s modeled against measured, last minute%s\n",
               flagged && q->color ? C_BAD : "", drift * 100, flagged && q->color ? C_OFF : "",
               flagged ? " - OVER THRESHOLD" : "");
}

/* Where idle comes from, and what the node's fit says. */
static void print_calibration(const query_opts *q, json_object *c)
{
    const char *src = query_str(c, "source");
    char w[FMT_LEN], when[FMT_LEN];
    json_object *ev = query_obj(c, "events"), *co = ev ? query_obj(ev, "coefficients") : NULL;
    /* idle_se_w and fitted are then the per-event fit's, scale and R2 the
     * single scale's */
    bool per_event = ev && json_object_get_boolean(query_obj(ev, "used")) &&
                     query_num(ev, "idle_w") == query_num(c, "idle_w");

    label(q, "Idle");
    printf("%s, %s", fmt_power(w, query_num(c, "idle_w")), src);
    if ((!strcmp(src, "fitted") || !strcmp(src, "stored")) && isfinite(query_num(c, "idle_se_w"))) {
        printf(" (+- %.2f W", query_num(c, "idle_se_w"));
        if (per_event)
            printf(", per-event fit");
        else
            printf(", scale %.3f, R2 %.4f", query_num(c, "scale"), query_num(c, "r2"));
        printf(", fitted %s)", fmt_iso8601(when, query_num(c, "fitted")));
    } else if (!strcmp(src, "percentile"))
        printf(" %s(5th percentile of measured power: idle only if the node idles)%s",
               q->color ? C_WARN : "", q->color ? C_OFF : "");
    printf("\n");
    label(q, "Fit");
    printf("%lld s kept, %lld left out, load spread %.2f W, ", (long long)query_int(c, "rows", 0),
           (long long)query_int(c, "rejected", 0), query_num(c, "spread_w"));
    if (json_object_get_boolean(query_obj(c, "identifiable")))
        printf("idle %.2f +- %.2f W\n", query_num(c, "live_idle_w"),
               query_num(c, "live_idle_se_w"));
    else
        printf("idle not identifiable: %s\n", query_str(c, "reason"));
    if (!ev)
        return;
    label(q, "Per event");
    if (!json_object_get_boolean(query_obj(ev, "used"))) {
        printf("not used (one scale): %s\n", query_str(ev, "reason"));
        return;
    }
    printf("used, penalty %g", query_num(ev, "alpha"));
    if (!strcmp(query_str(ev, "source"), "stored"))
        printf(" (stored, fitted %s; live fit: %s)", fmt_iso8601(when, query_num(ev, "fitted")),
               query_str(ev, "live_reason"));
    printf(":");
    for (size_t i = 0; co && i < json_object_array_length(co); i++) {
        json_object *e = json_object_array_get_idx(co, i);
        if (!json_object_get_boolean(query_obj(e, "fixed")))
            printf(" %s %.3f", query_str(e, "event"), query_num(e, "scale"));
    }
    printf("\n");
}

static void print_status(const query_opts *q, json_object *st)
{
    json_object *host = query_obj(st, "host"), *db = query_obj(st, "database");
    json_object *warnings = query_obj(st, "warnings");
    char a[FMT_LEN], b[FMT_LEN], c[FMT_LEN], d[FMT_LEN], e[FMT_LEN];
    double started = query_num(st, "started");
    double now = (double)util_now_ns(CLOCK_REALTIME) / 1e9;

    printf("%swattprofd %s%s, up %s (since %s)\n", q->color ? C_BOLD : "", query_str(st, "version"),
           q->color ? C_OFF : "", fmt_duration(a, now - started), fmt_iso8601(b, started));
    label(q, "Sampling");
    printf("%.1f Hz asked, %.2f Hz achieved; timer late by %.3f ms (p50), %.3f ms (p99)",
           query_num(st, "rate_hz"), query_num(st, "achieved_hz"), query_num(st, "lateness_p50_ms"),
           query_num(st, "lateness_p99_ms"));
    const char *backend = query_str(st, "backend"), *why = query_str(st, "backend_reason");
    if (backend) /* absent from daemons before the bpf backend */
        printf("; counters: %s", backend);
    /* auto's fallback to perf is news (bpf did not load); a choice is not */
    if (backend && why && strcmp(backend, "perf") == 0 && strncmp(why, "auto: ", 6) == 0)
        printf(" (%s)", why);
    printf("\n");
    label(q, "Host");
    printf("measured %s, modeled %s, idle %s, attributed %s",
           fmt_power(a, query_num(host, "measured_w")), fmt_power(b, query_num(host, "modeled_w")),
           fmt_power(c, query_num(host, "idle_w")), fmt_power(d, query_num(host, "attributed_w")));
    /* Below what the table can show (0.00 mW) it is rounding, not a figure. */
    if (fabs(query_num(host, "unattributed_w")) >= 5e-6)
        printf(", unattributed %s", fmt_power(e, query_num(host, "unattributed_w")));
    printf("\n");
    if (query_obj(st, "calibration"))
        print_calibration(q, query_obj(st, "calibration"));
    print_zones(q, query_obj(st, "zones"));
    print_events(q, query_obj(st, "events"));
    print_model(q, query_obj(st, "model"), query_num(st, "drift"),
                json_object_get_boolean(query_obj(st, "drift_flagged")));
    label(q, "Processes");
    printf("%lld tracked\n", (long long)query_int(st, "tracked", 0));
    label(q, "Database");
    printf("%s (%s)%s%s\n", query_str(db, "path"), fmt_bytes(a, query_num(db, "size_bytes")),
           *query_str(db, "error") ? ": " : "", query_str(db, "error"));
    for (size_t i = 0; i < json_object_array_length(warnings); i++)
        printf("%sWarning:%s %s\n", q->color ? C_WARN : "", q->color ? C_OFF : "",
               json_object_get_string(json_object_array_get_idx(warnings, i)));
}

/* CSV: one "field,value" line per leaf, arrays indexed ("zones.0.name"). */
static void print_flat(const char *prefix, json_object *o)
{
    char key[512];

    if (json_object_is_type(o, json_type_object)) {
        json_object_object_foreach(o, k, v)
        {
            snprintf(key, sizeof(key), "%s%s%s", prefix, *prefix ? "." : "", k);
            print_flat(key, v);
        }
    } else if (json_object_is_type(o, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(o); i++) {
            snprintf(key, sizeof(key), "%s.%zu", prefix, i);
            print_flat(key, json_object_array_get_idx(o, i));
        }
    } else {
        fmt_csv_field(stdout, prefix);
        putchar(',');
        fmt_csv_field(stdout, o ? json_object_get_string(o) : "");
        putchar('\n');
    }
}

int cmd_status(int argc, char **argv)
{
    static const struct option opts[] = {QUERY_LONGOPTS, {NULL, 0, NULL, 0}};
    static const query_cmd cmd = {"status", "h", opts, status_usage, NULL, false};
    query_opts q;
    json_object *reply = NULL;
    int r;

    query_opts_init(&q);
    if ((r = query_parse(&cmd, &q, NULL, argc, argv)) != 0)
        return r > 0 ? 0 : 2;
    if ((r = query_once(&q, "GetStatus", NULL, &reply)) < 0)
        return 1;
    json_object *st = query_obj(reply, "status");
    if (q.out == QUERY_JSON)
        query_print_json(st);
    else if (q.out == QUERY_CSV) {
        printf("field,value\n");
        print_flat("", st);
    } else
        print_status(&q, st);
    json_object_put(reply);
    return 0;
}
