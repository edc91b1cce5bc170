/* run_report: the report of `wattprof run` — means and standard
 * deviations over -r runs, as perf stat-like text, -x SEP lines or JSON. */
#include "format.h"
#include "run.h"
#include "util/util.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static double tv_s(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static const char *run_energy_source(const struct run_ctx *c)
{
    return c->power->n > 0 ? "rapl" : "model";
}

static size_t q_event(const struct run_ctx *c, size_t j)
{
    return Q_FIXED + j;
}
static size_t q_ratio(const struct run_ctx *c, size_t j)
{
    return Q_FIXED + c->es->n + j;
}
static size_t q_zone(const struct run_ctx *c, size_t z)
{
    return Q_FIXED + 2 * c->es->n + z;
}

int run_stats_init(struct run_ctx *c)
{
    c->st.n_q = Q_FIXED + 2 * c->es->n + c->power->n;
    c->st.sum = calloc(c->st.n_q, sizeof(double));
    c->st.sumsq = calloc(c->st.n_q, sizeof(double));
    return c->st.sum && c->st.sumsq ? 0 : -ENOMEM;
}

/* Adds the run just ended to the sums. */
void run_stats_add(struct run_ctx *c)
{
    double v[c->st.n_q];
    const double *totals, *ratios;

    v[Q_WALL] = (double)(c->end_ns - c->start_ns) / 1e9;
    v[Q_USER] = tv_s(c->ru.ru_utime);
    v[Q_SYS] = tv_s(c->ru.ru_stime);
    v[Q_CPU] = v[Q_USER] + v[Q_SYS];
    v[Q_STANDALONE] = c->t.standalone_j;
    v[Q_ATTRIBUTED] = c->t.attributed_j;
    v[Q_HOST] = c->t.host_j;
    v[Q_MODELED_HOST] = c->t.modeled_host_j;
    v[Q_IDLE] = c->t.idle_j;
    v[Q_UNATTRIBUTED] = c->t.unattributed_j;
    counters_totals(c->cp, &totals, &ratios);
    for (size_t j = 0; j < c->es->n; j++) {
        v[q_event(c, j)] = totals[j];
        v[q_ratio(c, j)] = ratios[j];
    }
    for (size_t z = 0; z < c->power->n; z++)
        v[q_zone(c, z)] = c->t.zone_j[z];
    for (size_t i = 0; i < c->st.n_q; i++) {
        c->st.sum[i] += v[i];
        c->st.sumsq[i] += v[i] * v[i];
    }
    c->st.runs++;
}

static double mean(const struct run_ctx *c, size_t i)
{
    return c->st.runs ? c->st.sum[i] / (double)c->st.runs : 0;
}

/* The sample standard deviation over the runs; 0 for one run. */
static double stddev(const struct run_ctx *c, size_t i)
{
    double n = (double)c->st.runs, m = mean(c, i);
    double var = n > 1 ? (c->st.sumsq[i] - n * m * m) / (n - 1) : 0;

    return var > 0 ? sqrt(var) : 0;
}

/* The deviation as a percentage of the mean (perf stat's "+-"). */
static double stddev_pct(const struct run_ctx *c, size_t i)
{
    double m = mean(c, i);

    return m != 0 ? 100 * stddev(c, i) / fabs(m) : 0;
}

static bool is_task_clock(const char *name)
{
    return strcasestr(name, "task-clock") || strcasestr(name, "cpu-clock");
}

/* The command line as a shell would read it back: words with anything but
 * [A-Za-z0-9_./=:,+@%-] in single quotes. */
static void print_cmdline(FILE *out, char **cmd)
{
    for (char **a = cmd; *a; a++) {
        bool plain = **a != '\0';
        for (const char *p = *a; *p && plain; p++)
            plain = strchr("_./=:,+@%-", *p) || (*p >= 'a' && *p <= 'z') ||
                    (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
        fputs(a == cmd ? "" : " ", out);
        if (plain) {
            fputs(*a, out);
            continue;
        }
        fputc('\'', out);
        for (const char *p = *a; *p; p++)
            fputs(*p == '\'' ? "'\\''" : (char[]){*p, '\0'}, out);
        fputc('\'', out);
    }
}

static json_object *run_json(const struct run_ctx *c)
{
    static const char *const keys[Q_FIXED] = {
        "wall_s",   "cpu_s",  "user_s",         "sys_s",  "standalone_j",
        "energy_j", "host_j", "modeled_host_j", "idle_j", "unattributed_j"};
    json_object *o = json_object_new_object(), *cmd = json_object_new_array();
    json_object *rp = json_object_new_object(), *zones = json_object_new_array();
    json_object *events = json_object_new_array(), *mo = json_object_new_object();
    json_object *sd = json_object_new_object();
    double wall = mean(c, Q_WALL);

    for (char **a = c->opt.cmd; *a; a++)
        json_object_array_add(cmd, json_object_new_string(*a));
    json_object_object_add(o, "command", cmd);
    json_object_object_add(o, "exit_status",
                           json_object_new_int(WIFEXITED(c->status) ? WEXITSTATUS(c->status)
                                                                    : 128 + WTERMSIG(c->status)));
    json_object_object_add(o, "runs", json_object_new_int64((int64_t)c->st.runs));
    /* CLOCK_MONOTONIC bounds of the (last) measurement, to line it up with other logs. */
    json_object_object_add(o, "start_mono_ns", json_object_new_int64((int64_t)c->start_ns));
    json_object_object_add(o, "end_mono_ns", json_object_new_int64((int64_t)c->end_ns));
    for (size_t i = 0; i < Q_FIXED; i++) {
        json_object_object_add(o, keys[i], json_object_new_double(mean(c, i)));
        json_object_object_add(sd, keys[i], json_object_new_double(stddev(c, i)));
    }
    json_object_object_add(o, "energy_source", json_object_new_string(run_energy_source(c)));
    json_object_object_add(o, "standalone_w",
                           json_object_new_double(wall > 0 ? mean(c, Q_STANDALONE) / wall : 0));
    json_object_object_add(o, "idle_w", json_object_new_double(c->idle_w));
    json_object_object_add(o, "idle_source", json_object_new_string(c->idle_source));
    json_object_object_add(o, "idle_note",
                           c->idle_note[0] ? json_object_new_string(c->idle_note) : NULL);
    json_object_object_add(o, "untracked_cpu_s", json_object_new_double(c->t.untracked_cpu_s));
    json_object_object_add(o, "class", json_object_new_string(c->m->classes[c->t.klass].name));
    json_object_object_add(o, "ticks", json_object_new_int((int)c->t.ticks));
    json_object_object_add(rp, "present", json_object_new_boolean(c->power->n > 0));
    json_object_object_add(rp, "state", json_object_new_string(c->power->state));
    json_object_object_add(rp, "read_errors", json_object_new_int((int)c->t.read_errors));
    json_object_object_add(
        rp, "first_read_error",
        c->t.read_errors ? json_object_new_string(strerror(-c->t.first_read_error)) : NULL);
    json_object_object_add(o, "unattributed_intervals", json_object_new_int((int)c->t.bad_ticks));
    for (size_t z = 0; z < c->power->n; z++) {
        json_object *zo = json_object_new_object();
        json_object_object_add(zo, "zone", json_object_new_string(c->power->zone[z].id));
        json_object_object_add(zo, "name", json_object_new_string(c->power->zone[z].name));
        json_object_object_add(zo, "energy_j", json_object_new_double(mean(c, q_zone(c, z))));
        json_object_object_add(zo, "stddev_j", json_object_new_double(stddev(c, q_zone(c, z))));
        json_object_array_add(zones, zo);
    }
    json_object_object_add(rp, "zones", zones);
    json_object_object_add(o, "rapl", rp);
    for (size_t j = 0; j < c->es->n; j++) {
        json_object *eo = json_object_new_object();
        json_object_object_add(eo, "name", json_object_new_string(c->es->ev[j].name));
        json_object_object_add(eo, "count", json_object_new_double(mean(c, q_event(c, j))));
        json_object_object_add(eo, "stddev", json_object_new_double(stddev(c, q_event(c, j))));
        json_object_object_add(eo, "ratio", json_object_new_double(mean(c, q_ratio(c, j))));
        json_object_array_add(events, eo);
    }
    json_object_object_add(o, "events", events);
    json_object_object_add(o, "stddev", sd);
    json_object_object_add(o, "user_mode_only", json_object_new_boolean(c->es->user_only));
    json_object_object_add(mo, "name", json_object_new_string(c->m->name));
    json_object_object_add(mo, "sha256", json_object_new_string(c->m->sha256));
    json_object_object_add(mo, "calibrated", json_object_new_boolean(c->m->training.present));
    json_object_object_add(o, "model", mo);
    return o;
}

/* perf stat's "( +- 1.23% )" after a figure, over more than one run. */
static void pm(FILE *out, const struct run_ctx *c, size_t i)
{
    if (c->st.runs > 1)
        fprintf(out, "  ( +- %5.2f%% )", stddev_pct(c, i));
    fputc('\n', out);
}

static void run_print_events(const struct run_ctx *c, FILE *out)
{
    double wall = mean(c, Q_WALL);

    fprintf(out, "\n  events (scaled for multiplexing; %% = time counted)%s:\n",
            c->es->user_only ? ", user mode only: the kernel refused kernel-mode counts "
                               "(perf_event_paranoid)"
                             : "");
    for (size_t j = 0; j < c->es->n; j++) {
        double v = mean(c, q_event(c, j)), pct = 100.0 * mean(c, q_ratio(c, j));
        if (is_task_clock(c->es->ev[j].name))
            fprintf(out, "  %18.2f msec %-23s %5.1f %%  # %6.3f CPUs utilized", v / 1e6,
                    c->es->ev[j].name, pct, wall > 0 ? v / 1e9 / wall : 0);
        else
            fprintf(out, "  %18.0f  %-28s %5.1f %%", v, c->es->ev[j].name, pct);
        pm(out, c, q_event(c, j));
    }
}

static void run_print(const struct run_ctx *c, FILE *out)
{
    double wall = mean(c, Q_WALL), user = mean(c, Q_USER), sys = mean(c, Q_SYS);

    fprintf(out, "\n Energy of ");
    print_cmdline(out, c->opt.cmd);
    if (c->st.runs < (size_t)c->opt.repeat)
        fprintf(out, " (%zu of %ld runs: run %zu exited %d):\n\n", c->st.runs, c->opt.repeat,
                c->st.runs,
                WIFEXITED(c->status) ? WEXITSTATUS(c->status) : 128 + WTERMSIG(c->status));
    else if (c->st.runs > 1)
        fprintf(out, " (%zu runs):\n\n", c->st.runs);
    else
        fprintf(out, ":\n\n");
    fprintf(out, "  %s\n\n", FMT_ENERGY_LEGEND);
    fprintf(out, "  %14.3f s    wall time", wall);
    pm(out, c, Q_WALL);
    fprintf(out, "  %14.3f s    CPU time (user %.3f s, sys %.3f s)", user + sys, user, sys);
    pm(out, c, Q_CPU);
    fprintf(out, "  %14.3f J    standalone model energy (mean %.2f W)", mean(c, Q_STANDALONE),
            wall > 0 ? mean(c, Q_STANDALONE) / wall : 0);
    pm(out, c, Q_STANDALONE);
    fprintf(out, "  %14.3f J    attributed to the command (%s)", mean(c, Q_ATTRIBUTED),
            c->power->n > 0 ? "share of measured RAPL energy above idle" : "modeled");
    pm(out, c, Q_ATTRIBUTED);
    if (c->power->n > 0) {
        for (size_t z = 0; z < c->power->n; z++) {
            fprintf(out, "  %14.3f J    host RAPL %s (%s)", mean(c, q_zone(c, z)),
                    c->power->zone[z].name, c->power->zone[z].id);
            pm(out, c, q_zone(c, z));
        }
        fprintf(out, "  %14.3f J    host energy of the model's domains, idle %.2f W (%s)",
                mean(c, Q_HOST), c->idle_w, c->idle_source);
        pm(out, c, Q_HOST);
        if (c->idle_note[0])
            fprintf(out, "  %14s      sources of idle tried first: %s\n", "-", c->idle_note);
        if (c->t.read_errors)
            fprintf(out,
                    "  %14u      RAPL reads failed (first: %s); their energy was counted at the "
                    "next good read\n",
                    c->t.read_errors, strerror(-c->t.first_read_error));
    } else {
        fprintf(out, "  %14s      host energy not measured: %s\n", "-", c->power->state);
    }
    if (c->t.bad_ticks)
        fprintf(out,
                "  %14u      intervals the model could not attribute (stored as unattributed)\n",
                c->t.bad_ticks);
    fprintf(out, "  %14s      class\n", c->m->classes[c->t.klass].name);
    run_print_events(c, out);
    fprintf(out, "\n  model %s (sha256 %.12s)%s\n\n", c->m->name, c->m->sha256,
            c->m->training.present ? "" : ", uncalibrated: generic coefficients");
}

/* -x SEP: value, unit, name, deviation % (with -r), counted % (events). */
static void run_print_sep(const struct run_ctx *c, FILE *out)
{
    static const char *const names[Q_FIXED][2] = {
        {"s", "wall-time"},         {"s", "cpu-time"},
        {"s", "user-time"},         {"s", "sys-time"},
        {"J", "standalone-energy"}, {"J", "attributed-energy"},
        {"J", "host-energy"},       {"J", "modeled-host-energy"},
        {"J", "idle-energy"},       {"J", "unattributed-energy"}};
    const char *x = c->opt.sep;

    for (size_t i = 0; i < Q_FIXED; i++) {
        if ((i == Q_HOST || i == Q_UNATTRIBUTED) && c->power->n == 0)
            continue; /* nothing measured: no figure, rather than a 0 */
        fprintf(out, "%.9g%s%s%s%s%s", mean(c, i), x, names[i][0], x, names[i][1], x);
        if (c->st.runs > 1)
            fprintf(out, "%.2f", stddev_pct(c, i));
        fprintf(out, "%s\n", x);
    }
    for (size_t z = 0; z < c->power->n; z++) {
        fprintf(out, "%.9g%sJ%srapl:%s%s", mean(c, q_zone(c, z)), x, x, c->power->zone[z].name, x);
        if (c->st.runs > 1)
            fprintf(out, "%.2f", stddev_pct(c, q_zone(c, z)));
        fprintf(out, "%s\n", x);
    }
    for (size_t j = 0; j < c->es->n; j++) {
        bool clock = is_task_clock(c->es->ev[j].name);
        fprintf(out, "%.9g%s%s%s%s%s", mean(c, q_event(c, j)) / (clock ? 1e6 : 1), x,
                clock ? "msec" : "", x, c->es->ev[j].name, x);
        if (c->st.runs > 1)
            fprintf(out, "%.2f", stddev_pct(c, q_event(c, j)));
        fprintf(out, "%s%.2f\n", x, 100.0 * mean(c, q_ratio(c, j)));
    }
}

int run_report(const struct run_ctx *c)
{
    FILE *out = c->opt.output ? fopen(c->opt.output, "w") : stderr;
    int r = 0;

    if (!out) {
        r = -errno;
        log_error("--output %s: %s", c->opt.output, strerror(-r));
        return r;
    }
    if (c->opt.json) {
        json_object *o = run_json(c);
        fprintf(out, "%s\n",
                json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                      JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    } else if (c->opt.sep) {
        run_print_sep(c, out);
    } else {
        run_print(c, out);
    }
    if (out != stderr && fclose(out) != 0) {
        r = -errno;
        log_error("--output %s: %s", c->opt.output, strerror(-r));
    }
    return r;
}
