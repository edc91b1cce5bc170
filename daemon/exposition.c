/* exposition: a published snapshot as Prometheus text (format 0.0.4).
 *
 * Everything here reads one snapshot and the model's description; nothing
 * touches the sampler, so a scrape costs the sampler nothing. Cardinality
 * is the cluster's to afford: process series are per command, user,
 * systemd unit and job; per-pid series only for the top N by energy.
 *
 * The job label is "job_id", not "job": Prometheus gives every scraped
 * series a "job" label of its own (the scrape job), and an exported "job"
 * would be renamed "exported_job" or, with honor_labels, would hide it. */
#include "daemon.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPO_MAX_USERS 256 /* user names looked up per scrape, at most */

struct user_cache {
    uid_t uid[EXPO_MAX_USERS];
    char name[EXPO_MAX_USERS][64];
    size_t n;
};

/* A label value: escaped as the format asks, and valid UTF-8 (a command
 * name is whatever bytes a process gave itself; a bad byte becomes U+FFFD
 * rather than a scrape Prometheus rejects). */
static void put_value(FILE *f, const char *v)
{
    const unsigned char *s = (const unsigned char *)v;
    size_t left = strlen(v);

    while (left > 0) {
        size_t n = util_utf8_seq(s, left);
        if (n == 0) {
            fputs("\xef\xbf\xbd", f);
            n = 1;
        } else if (*s == '\\')
            fputs("\\\\", f);
        else if (*s == '"')
            fputs("\\\"", f);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fwrite(s, 1, n, f);
        s += n;
        left -= n;
    }
}

static void put_number(FILE *f, double v)
{
    if (isnan(v))
        fputs("NaN", f);
    else if (isinf(v))
        fputs(v > 0 ? "+Inf" : "-Inf", f);
    else
        fprintf(f, "%.17g", v);
}

static void put_family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void put_plain(FILE *f, const char *name, double v)
{
    fprintf(f, "%s ", name);
    put_number(f, v);
    fputc('\n', f);
}

static const char *user_name(struct user_cache *uc, uid_t uid)
{
    struct passwd pw, *res = NULL;
    char buf[1024];

    for (size_t i = 0; i < uc->n; i++)
        if (uc->uid[i] == uid)
            return uc->name[i];
    size_t k = uc->n < EXPO_MAX_USERS ? uc->n++ : EXPO_MAX_USERS - 1;
    uc->uid[k] = uid;
    if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res)
        snprintf(uc->name[k], sizeof(uc->name[k]), "%s", pw.pw_name);
    else
        snprintf(uc->name[k], sizeof(uc->name[k]), "%u", (unsigned)uid);
    return uc->name[k];
}

/* {command="",user="",unit="",job_id=""} with an optional leading pid. */
static void put_labels(FILE *f, struct user_cache *uc, const live_proc *pid, const char *comm,
                       uid_t uid, const char *unit, const char *job)
{
    fputc('{', f);
    if (pid)
        fprintf(f, "pid=\"%d\",", (int)pid->pid);
    fputs("command=\"", f);
    put_value(f, comm);
    fputs("\",user=\"", f);
    put_value(f, user_name(uc, uid));
    fputs("\",unit=\"", f);
    put_value(f, unit);
    fputs("\",job_id=\"", f);
    put_value(f, job);
    fputs("\"} ", f);
}

static void put_groups(FILE *f, struct user_cache *uc, const groups *g)
{
    static const char *const names[] = {
        "wattprof_process_energy_joules_total", "wattprof_process_standalone_energy_joules_total",
        "wattprof_process_cpu_seconds_total", "wattprof_process_power_watts"};
    static const char *const types[] = {"counter", "counter", "counter", "gauge"};
    static const char *const helps[] = {
        "Host energy attributed to processes, by command, user, systemd unit and job; "
        "processes that ended stay counted.",
        "Energy the model gives processes as if each ran alone, by command, user, unit and job.",
        "CPU time of the processes, by command, user, unit and job.",
        "Attributed power of the live processes over the last second, by command, user, unit "
        "and job."};

    for (size_t m = 0; m < 4; m++) {
        put_family(f, names[m], types[m], helps[m]);
        for (size_t i = 0; i < g->n; i++) {
            const group_total *t = &g->v[i];
            double v[] = {t->energy_j, t->standalone_j, t->cpu_s, t->power_w};
            fputs(names[m], f);
            put_labels(f, uc, NULL, t->comm, t->uid, t->unit, t->job);
            put_number(f, v[m]);
            fputc('\n', f);
        }
    }
}

static int by_energy_desc(const void *a, const void *b)
{
    const live_proc *x = *(const live_proc *const *)a, *y = *(const live_proc *const *)b;
    return (x->total_j < y->total_j) - (x->total_j > y->total_j);
}

/* The top N processes by energy, live or ended within the grace period. */
static int put_pids(FILE *f, struct user_cache *uc, const config *c, const snapshot *snap)
{
    size_t n = 0, cap = snap->n_procs + snap->recent.n;
    const live_proc **v;
    uint64_t now = util_now_ns(CLOCK_MONOTONIC), grace = (uint64_t)(c->exporter_grace_s * 1e9);

    if (c->exporter_top_pids == 0)
        return 0;
    if (!(v = malloc((cap ? cap : 1) * sizeof(*v))))
        return -ENOMEM;
    for (size_t i = 0; i < snap->n_procs; i++)
        v[n++] = &snap->procs[i];
    /* The snapshot may be older than the grace period (a finished replay
     * publishes no more), so the period is judged again now. */
    for (size_t i = 0; i < snap->recent.n; i++)
        if (snap->recent.v[i].exited_mono_ns + grace > now)
            v[n++] = &snap->recent.v[i];
    qsort(v, n, sizeof(*v), by_energy_desc);
    if (n > c->exporter_top_pids)
        n = c->exporter_top_pids;
    put_family(f, "wattprof_pid_energy_joules_total", "counter",
               "Host energy attributed to one process since it was first seen (the top "
               "processes by energy only).");
    for (size_t i = 0; i < n; i++) {
        fputs("wattprof_pid_energy_joules_total", f);
        put_labels(f, uc, v[i], v[i]->comm, v[i]->uid, v[i]->unit, v[i]->job);
        put_number(f, v[i]->total_j);
        fputc('\n', f);
    }
    put_family(f, "wattprof_pid_power_watts", "gauge",
               "Attributed power of one process over the last second (0 once it ended).");
    for (size_t i = 0; i < n; i++) {
        fputs("wattprof_pid_power_watts", f);
        put_labels(f, uc, v[i], v[i]->comm, v[i]->uid, v[i]->unit, v[i]->job);
        put_number(f, v[i]->exited_mono_ns ? 0 : v[i]->power_w);
        fputc('\n', f);
    }
    free(v);
    return 0;
}

static void put_hist(FILE *f, const char *name, const char *help, const daemon_hist *h)
{
    static const double bounds_us[DAEMON_HIST_N] = DAEMON_HIST_BOUNDS_US;
    uint64_t cum = 0;

    put_family(f, name, "histogram", help);
    for (size_t b = 0; b < DAEMON_HIST_N; b++) {
        cum += h->bucket[b];
        fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name, bounds_us[b] / 1e6,
                (unsigned long long)cum);
    }
    fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)h->count);
    fprintf(f, "%s_sum ", name);
    put_number(f, h->sum_s);
    fprintf(f, "\n%s_count %llu\n", name, (unsigned long long)h->count);
}

/* Host energy: measured per RAPL zone, and measured against modeled for
 * the domains the model predicts. */
static void put_host(FILE *f, daemon_ctx *ctx, const snapshot *snap, const char *targets)
{
    const rapl *power = sampler_rapl(ctx->smp);
    const daemon_status *st = &snap->st;

    put_family(f, "wattprof_zone_energy_joules_total", "counter",
               "Energy measured by one RAPL zone since the daemon started.");
    for (size_t z = 0; z < power->n; z++) {
        fputs("wattprof_zone_energy_joules_total{zone=\"", f);
        put_value(f, power->zone[z].id);
        fputs("\",domain=\"", f); /* "package", as the host metric and the model say */
        put_value(f, power->zone[z].domain);
        fputs("\"} ", f);
        put_number(f, st->zone_total_j[z]);
        fputc('\n', f);
    }
    put_family(f, "wattprof_host_energy_joules_total", "counter",
               "Host energy of the domains the model predicts, measured (RAPL) and modeled.");
    if (power->n > 0) {
        fputs("wattprof_host_energy_joules_total{domain=\"", f);
        put_value(f, targets);
        fputs("\",source=\"measured\"} ", f);
        put_number(f, st->total_measured_j);
        fputc('\n', f);
    }
    fputs("wattprof_host_energy_joules_total{domain=\"", f);
    put_value(f, targets);
    fputs("\",source=\"modeled\"} ", f);
    put_number(f, st->total_modeled_j);
    fputc('\n', f);
    put_family(f, "wattprof_idle_energy_joules_total", "counter",
               "Host energy booked as idle power.");
    put_plain(f, "wattprof_idle_energy_joules_total", st->total_idle_j);
    put_family(f, "wattprof_unattributed_energy_joules_total", "counter",
               "Active host energy no tracked process accounts for.");
    put_plain(f, "wattprof_unattributed_energy_joules_total", st->total_unattributed_j);
}

/* Name, hash and target domains ("package+dram") of the model in use. */
static void model_labels(daemon_ctx *ctx, char name[128], char sha[65], char *targets, size_t len,
                         bool *calibrated)
{
    pthread_mutex_lock(&ctx->lock);
    snprintf(name, 128, "%s", ctx->model->name);
    snprintf(sha, 65, "%s", ctx->model->sha256);
    model_target_key(ctx->model, targets, len);
    *calibrated = ctx->model->training.present;
    pthread_mutex_unlock(&ctx->lock);
}

/* Where idle comes from, and the node's fit (docs/calibration.md). */
static void put_calibration(FILE *f, const daemon_calib *c)
{
    bool fit = c->source == DAEMON_IDLE_FITTED || c->source == DAEMON_IDLE_STORED;
    double idle_se_w;
    int64_t fitted;

    put_family(f, "wattprof_idle_power_watts", "gauge",
               "Idle power attribution uses, by where it comes from (fitted, stored, model, "
               "percentile).");
    fprintf(f, "wattprof_idle_power_watts{source=\"%s\"} ", account_idle_source_name(c->source));
    put_number(f, c->idle_w);
    fputc('\n', f);
    put_family(f, "wattprof_idle_power_stderr_watts", "gauge",
               "Standard error of the fitted idle in use (NaN when idle is not from a fit).");
    account_idle_fit(c, &idle_se_w, &fitted);
    put_plain(f, "wattprof_idle_power_stderr_watts", idle_se_w);
    put_family(f, "wattprof_calibration_scale_ratio", "gauge",
               "Measured watts per watt of the model's dynamic power, of the fit in use.");
    put_plain(f, "wattprof_calibration_scale_ratio", fit ? c->best.scale : NAN);
    put_family(f, "wattprof_calibration_r2_ratio", "gauge", "R squared of the fit in use.");
    put_plain(f, "wattprof_calibration_r2_ratio", fit ? c->best.r2 : NAN);
    put_family(f, "wattprof_calibration_identifiable", "gauge",
               "1 when the fit of the recent seconds can tell idle (the load varied enough).");
    put_plain(f, "wattprof_calibration_identifiable", c->live.identifiable);
    put_family(f, "wattprof_calibration_rows", "gauge",
               "Seconds the fit of the recent seconds kept (outliers left out).");
    put_plain(f, "wattprof_calibration_rows", (double)c->live.rows);
    put_family(f, "wattprof_calibration_load_spread_watts", "gauge",
               "Standard deviation of the load in the fit of the recent seconds, in watts.");
    put_plain(f, "wattprof_calibration_load_spread_watts", c->live.spread_w);
}

/* One coefficient per event: whether used and which fit, and each event's
 * coefficient in use with its standard error (series only while used). */
static void put_calibration_events(FILE *f, const daemon_calib *c, const char *targets)
{
    const store_node_evcal *b = c->events_used ? &c->ev_best : NULL;
    static const char *const names[] = {"wattprof_calibration_event_scale_ratio",
                                        "wattprof_calibration_event_scale_stderr_ratio"};
    static const char *const helps[] = {
        "Measured watts per watt of the model's dynamic power through each event, of the "
        "per-event fit in use.",
        "Standard error of each event's scale in use (NaN: the event did not vary and keeps the "
        "single scale)."};

    put_family(f, "wattprof_calibration_events_used", "gauge",
               "1 when attribution uses one coefficient per event, from the live fit (fitted) or "
               "the latest one used (stored).");
    fprintf(f, "wattprof_calibration_events_used{source=\"%s\"} %d\n",
            b ? (c->events_stored ? "stored" : "fitted") : "none", b != NULL);
    put_family(f, "wattprof_calibration_events_fit_timestamp_seconds", "gauge",
               "Unix time of the per-event fit in use (NaN when none is used).");
    put_plain(f, "wattprof_calibration_events_fit_timestamp_seconds", b ? (double)b->t : NAN);
    put_family(f, "wattprof_calibration_events_penalty_ratio", "gauge",
               "Ridge penalty the per-event fit in use chose (NaN when none is used).");
    put_plain(f, "wattprof_calibration_events_penalty_ratio", b ? b->alpha : NAN);
    for (size_t k = 0; k < 2; k++) {
        put_family(f, names[k], "gauge", helps[k]);
        for (size_t j = 0; b && j < b->n_events; j++) {
            fprintf(f, "%s{event=\"", names[k]);
            put_value(f, b->events[j]);
            fputs("\",target=\"", f);
            put_value(f, targets);
            fputs("\"} ", f);
            put_number(f, k == 0 ? b->coef[j] : b->coef_se[j]);
            fputc('\n', f);
        }
    }
}

static void put_status(FILE *f, const snapshot *snap, const char *model_name, const char *sha,
                       bool calibrated)
{
    const daemon_status *st = &snap->st;

    put_family(f, "wattprof_build_info", "gauge",
               "Always 1: wattprofd's version and the model in use.");
    fputs("wattprof_build_info{version=\"" WATTPROF_VERSION "\",model=\"", f);
    put_value(f, model_name);
    fprintf(f, "\",model_sha256=\"%s\",calibrated=\"%s\"} 1\n", sha, calibrated ? "true" : "false");
    put_family(f, "wattprof_model_drift_ratio", "gauge",
               "Relative error of modeled against measured host power over the last minute "
               "(NaN without RAPL).");
    put_plain(f, "wattprof_model_drift_ratio", st->drift);
    put_family(f, "wattprof_model_drift_flagged", "gauge",
               "1 while the drift is over the configured threshold.");
    put_plain(f, "wattprof_model_drift_flagged", st->drift_flagged);
    put_family(f, "wattprof_tracked_processes", "gauge", "Processes tracked now.");
    put_plain(f, "wattprof_tracked_processes", (double)st->tracked);
    put_family(f, "wattprof_exited_processes_total", "counter",
               "Tracked processes that ended since the daemon started.");
    put_plain(f, "wattprof_exited_processes_total", (double)st->exited);
    put_family(f, "wattprof_ticks_total", "counter", "Sampling ticks since the daemon started.");
    put_plain(f, "wattprof_ticks_total", (double)st->ticks);
    put_calibration(f, &st->calib);
    put_hist(f, "wattprof_sampling_lateness_seconds",
             "How late each tick woke after its deadline (live sampling only).", &st->lateness);
    put_hist(f, "wattprof_tick_duration_seconds",
             "Work per tick, from wake-up to done (live sampling only).", &st->tick_work);
}

int exposition_render(daemon_ctx *ctx, const snapshot *snap, char **out, size_t *len)
{
    struct user_cache *uc = calloc(1, sizeof(*uc));
    char model_name[128], sha[65], targets[256];
    bool calibrated;
    FILE *f;
    int r;

    if (!uc)
        return -ENOMEM;
    if (!(f = open_memstream(out, len))) {
        free(uc);
        return -errno;
    }
    model_labels(ctx, model_name, sha, targets, sizeof(targets), &calibrated);
    put_status(f, snap, model_name, sha, calibrated);
    put_calibration_events(f, &snap->st.calib, targets);
    put_host(f, ctx, snap, targets);
    put_groups(f, uc, &snap->groups);
    r = put_pids(f, uc, ctx->cfg, snap);
    free(uc);
    if (fclose(f) != 0 && r == 0)
        r = -ENOMEM;
    if (r < 0) {
        free(*out);
        *out = NULL;
    }
    return r;
}
