/* publish: what the sampler hands to others. Every tick, its rows go to the
 * store's queue (per process that ran, the host, the RAPL domains, and the
 * trainer's per-class rates). Once a second, each process's power over the
 * second, the status (rates, lateness, energies, calibration, faults) and
 * the exporter's totals go into a new snapshot, which replaces the old one
 * under a lock the sampler only ever tries: readers hold a reference to the
 * snapshot they copy, never the sampler's state. */
#include "sampler-internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void publish_tick(sampler *s, int64_t t_ns, const attrib_tick *at)
{
    size_t ne = s->m->n_events, n_active = s->n_active;
    struct tracked **active = s->active;

    for (size_t i = 0; i < n_active; i++) {
        struct tracked *t = active[i];
        double cpu = s->task_clock >= 0 ? t->delta[s->task_clock] / 1e9 : 0;
        if (cpu <= 0 && s->ap[i].attributed_j <= 0)
            continue; /* rows only for processes that ran */
        store_proc_tick pt = {
            t_ns, t->pid,   t->start,   s->ap[i].attributed_j, s->ap[i].standalone_j,
            cpu,  t->klass, s->model_id};
        store_push_proc(s->st, &pt);
    }
    bool fit = s->cal.source == DAEMON_IDLE_FITTED || s->cal.source == DAEMON_IDLE_STORED;
    store_host_tick ht = {t_ns,
                          at->dt_s,
                          at->measured,
                          at->host_j,
                          at->idle_j,
                          at->attributed_j,
                          at->unattributed_j,
                          at->modeled_host_j,
                          s->model_id,
                          account_idle_source_name(s->cal.source),
                          fit ? s->cal.best.t : 0};
    store_push_host(s->st, &ht);
    for (size_t z = 0; z < s->power->n; z++)
        store_push_domain(s->st, t_ns, s->power->zone[z].domain,
                          at->measured ? s->zone_delta[z] : NAN, NAN);
    /* The trainer's input: per-class sums of event rates. */
    memset(s->class_rates, 0, MODEL_MAX_CLASSES * ne * sizeof(double));
    for (size_t i = 0; i < n_active; i++)
        for (size_t j = 0; j < ne; j++)
            s->class_rates[active[i]->klass * ne + j] += s->ap[i].rates[j];
    for (size_t k = 0; at->measured && !s->tick_unattributable && k < s->m->n_classes; k++)
        store_push_calibration(s->st, t_ns, at->dt_s, s->model_id, (int)k, s->class_rates + k * ne,
                               ne);
    atomic_fetch_add(&s->stored_ticks, 1);
}

void sampler_snapshot_unref(snapshot *snap)
{
    if (!snap || __atomic_sub_fetch(&snap->refs, 1, __ATOMIC_ACQ_REL) > 0)
        return;
    free(snap->procs);
    free(snap->st.event_ratio);
    free(snap->st.zone_total_j);
    free(snap->st.zone_power_w);
    groups_free(&snap->groups);
    groups_recent_free(&snap->recent);
    free(snap);
}

snapshot *sampler_snapshot(sampler *s)
{
    snapshot *snap;

    pthread_mutex_lock(&s->snap_lock);
    snap = s->snap;
    if (snap)
        __atomic_add_fetch(&snap->refs, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&s->snap_lock);
    return snap;
}

/* Describes the first zone that has not advanced for SAMPLER_STALL_NS, and
 * logs when a stall starts and ends. */
static void power_fault(sampler *s, char *out, size_t len)
{
    out[0] = '\0';
    for (size_t z = 0; z < s->power->n && !out[0]; z++) {
        if (s->zone_still_ns[z] < SAMPLER_STALL_NS)
            continue;
        rapl_zone *zn = &s->power->zone[z];
        snprintf(out, len,
                 "RAPL zone %s (%s) has not advanced for %.1f s%s%s: host energy "
                 "comes from the model",
                 zn->id, zn->name, (double)s->zone_still_ns[z] / 1e9,
                 s->rapl_err < 0 ? ", reading it fails: " : "",
                 s->rapl_err < 0 ? strerror(-s->rapl_err) : "");
    }
    if (out[0] && !s->power_faulted)
        log_warning("%s", out);
    else if (!out[0] && s->power_faulted)
        log_info("RAPL zones advance again: host energy is measured");
    s->power_faulted = out[0] != '\0';
}

static void fill_status(sampler *s, daemon_status *st, double secs)
{
    st->ticks = atomic_load(&s->ticks);
    st->achieved_hz = s->second_ticks / secs;
    st->lateness_p50_us = stats_percentile(&s->lateness, 50) / 1e3;
    st->lateness_p99_us = stats_percentile(&s->lateness, 99) / 1e3;
    st->lateness_max_us = stats_percentile(&s->lateness, 100) / 1e3;
    st->tick_p50_us = stats_percentile(&s->tick_work, 50) / 1e3;
    st->tick_p99_us = stats_percentile(&s->tick_work, 99) / 1e3;
    /* A second the model filled in is no measurement: not shown as one, and
     * it neither judges the model (drift) nor sets the idle percentile. */
    st->host_measured_w = s->power->n && !s->sec_fallback ? s->sec_host_j / s->sec_dt : NAN;
    st->host_modeled_w = s->sec_modeled_j / s->sec_dt;
    st->idle_w = s->sec_idle_j / s->sec_dt;
    st->unattributed_w = s->sec_unattr_j / s->sec_dt;
    /* Drift judges the model in use: after a reload it starts afresh, and
     * the second the new model arrived in, which mixes two models, does not
     * count. */
    if (s->model_changed) {
        s->drift.n = s->drift.next = 0;
        s->model_changed = false;
    } else if (isfinite(st->host_measured_w) && st->host_measured_w > 0)
        stats_ring_add(&s->drift, fabs(st->host_measured_w - s->sec_drift_model_j / s->sec_dt) /
                                      st->host_measured_w);
    st->drift = stats_mean(&s->drift);
    st->drift_flagged = isfinite(st->drift) && st->drift > s->cfg->drift_threshold;
    st->untracked_cpu = s->sec_untracked;
    st->untracked_w = s->untracked_w;
    st->tracked = s->n;
    st->reads_skipped = s->sec_reads ? (double)s->sec_skipped / (double)s->sec_reads : NAN;
    st->reads_unskippable = 0;
    for (size_t i = 0; i < s->n; i++)
        st->reads_unskippable += s->procs[i]->ch && s->be->skip_error(s->procs[i]->ch) < 0;
    s->sec_reads = s->sec_skipped = 0;
    st->proc_connector = s->watch != NULL || s->be_events; /* events as they happen */
    power_fault(s, st->power_fault, sizeof(st->power_fault));
    st->procs_missed = s->procs_missed + (s->be == &backend_bpf ? backend_bpf_overflows() : 0);
    st->backend = sampler_backend_name(s);
    st->backend_why = sampler_backend_why(s);
    st->connector_overruns = s->connector_overruns;
    st->calib = s->cal;
    for (size_t e = 0; st->event_ratio && e < s->es->n; e++)
        st->event_ratio[e] = s->sec_ratio_n ? s->sec_ratio_sum[e] / (double)s->sec_ratio_n : 1;
    st->total_measured_j = s->total_measured_j;
    st->total_modeled_j = s->total_modeled_j;
    st->total_idle_j = s->total_idle_j;
    st->total_unattributed_j = s->total_unattr_j;
    st->exited = s->n_exited;
    st->lateness = s->late_hist;
    st->tick_work = s->work_hist;
}

/* What the exporter needs beyond status: the totals by command, user, unit
 * and job (with the power of their live processes), and the recently ended
 * processes with the most energy. */
static int publish_exits(sampler *s, snapshot *snap)
{
    size_t nz = s->power->n;

    for (size_t i = 0; i < s->groups.n; i++)
        s->groups.v[i].power_w = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->procs[i]->has_group)
            s->groups.v[s->procs[i]->group].power_w += s->procs[i]->last_w;

    if (s->cfg->exporter_grace_s > 0) {
        uint64_t now = util_now_ns(CLOCK_MONOTONIC),
                 grace = (uint64_t)(s->cfg->exporter_grace_s * 1e9);
        groups_recent_expire(&s->recent, now > grace ? now - grace : 0);
    } else
        s->recent.n = 0;
    if (!(snap->st.zone_total_j = calloc(nz + 1, sizeof(double))) ||
        !(snap->st.zone_power_w = calloc(nz + 1, sizeof(double))) ||
        groups_copy(&snap->groups, &s->groups) < 0 ||
        !(snap->recent.v = calloc(s->recent.n + 1, sizeof(live_proc))))
        return -ENOMEM;
    memcpy(snap->st.zone_total_j, s->zone_total_j, nz * sizeof(double));
    for (size_t z = 0; z < nz; z++)
        snap->st.zone_power_w[z] =
            s->sec_zone_bad[z] > 0 || !(s->sec_dt > 0) ? NAN : s->sec_zone_j[z] / s->sec_dt;
    if (s->recent.n)
        memcpy(snap->recent.v, s->recent.v, s->recent.n * sizeof(live_proc));
    snap->recent.n = snap->recent.cap = s->recent.n;
    return 0;
}

void publish_second(sampler *s)
{
    double secs = s->sec_dt > 0 ? s->sec_dt : 1;
    snapshot *snap = calloc(1, sizeof(*snap));

    if (snap) {
        snap->refs = 1;
        snap->t_ns = sampler_realtime_ns();
        snap->procs = calloc(s->n ? s->n : 1, sizeof(live_proc));
        snap->st.event_ratio = calloc(s->es->n, sizeof(double));
    }
    for (size_t i = 0; i < s->n; i++) {
        struct tracked *t = s->procs[i];
        account_settle_idle(s, t);
        if (t->active_tick != atomic_load(&s->ticks)) /* slept through the latest tick */
            t->klass = account_idle_class(s, t);
        t->last_w = t->sec_j / secs;
        t->last_standalone_w = t->sec_standalone_j / secs;
        t->last_cpu = t->sec_cpu_s / secs;
        if (snap && snap->procs)
            snap->procs[snap->n_procs++] = proctable_to_live(t);
        t->sec_j = t->sec_standalone_j = t->sec_cpu_s = 0;
    }
    double untracked_w = account_measure_untracked(s, secs);
    double host_w = s->sec_fallback || s->sec_unattributable ? NAN : s->sec_host_j / secs;
    account_update_idle(s, host_w, s->sec_dyn_j / secs + untracked_w);
    eventcal_second(s, host_w, untracked_w, secs);
    if (snap && snap->procs && snap->st.event_ratio && publish_exits(s, snap) == 0) {
        fill_status(s, &snap->st, secs);
        /* trylock: a reader copying the old snapshot must not delay a tick. */
        if (pthread_mutex_trylock(&s->snap_lock) == 0) {
            snapshot *old = s->snap;
            s->snap = snap;
            pthread_mutex_unlock(&s->snap_lock);
            snap = old;
        }
    }
    sampler_snapshot_unref(snap);
    s->sec_host_j = s->sec_modeled_j = s->sec_idle_j = s->sec_unattr_j = s->sec_dyn_j = 0;
    s->sec_drift_model_j = 0;
    s->sec_fallback = s->sec_unattributable = false;
    s->sec_cpu_s = s->sec_dt = 0;
    s->second_ticks = 0;
    s->sec_ratio_n = 0;
    memset(s->sec_ratio_sum, 0, s->es->n * sizeof(double));
    memset(s->sec_zone_j, 0, s->power->n * sizeof(double));
    memset(s->sec_zone_bad, 0, s->power->n * sizeof(double));
}
