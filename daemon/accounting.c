/* accounting: what one tick's energy is, and whose.
 *
 * Per tick: each active process's rates and class, the model's attribution
 * of the measured (or, without a measurement, modelled) energy over them
 * (lib/model attrib), and the booking of each share to the process, its
 * group and the second's sums. A process that slept through a tick had
 * zero rates: its standalone p_k(0)*dt is booked lazily, from a running
 * sum per class (account_mark_idle, account_settle_idle), so a tick costs
 * nothing per sleeping process.
 *
 * Per second: the calibration of idle power (a fit of measured host power
 * against the model's dynamic power, or the stored, model or percentile
 * idle: docs/calibration.md), and the meter's CPU that no tracked process
 * used, booked as unattributed. Drift's sums are kept here; publish.c
 * turns them into status. */
#include "sampler-internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Computes what the model gives at zero rates, once per model rather than
 * on every tick that books idle processes. */
void account_zero_rates(sampler *s)
{
    size_t ne = s->m->n_events;
    double zero[ne ? ne : 1];

    memset(zero, 0, sizeof(zero));
    for (size_t k = 0; k < s->m->n_classes; k++)
        s->zero_power[k] = model_power(s->m, (int)k, zero);
    s->zero_class = model_classify(s->m, 0);
    s->cpu_event = -1;
    for (size_t j = 0; j < ne && s->task_clock >= 0; j++)
        if (s->model_map[j] == s->task_clock)
            s->cpu_event = (int)j;
}

/* The class a tick without events books a process in: its own, or in
 * rate mode the class of a zero rate. */
int account_idle_class(const sampler *s, const struct tracked *t)
{
    if (s->m->class_event >= 0 && s->m->class_mode == MODEL_CLASS_RATE)
        return s->zero_class;
    return t->klass;
}

/* Starts counting t's idle ticks from now. */
void account_mark_idle(sampler *s, struct tracked *t)
{
    t->idle_klass = account_idle_class(s, t);
    t->idle_mark = s->idle_sum[t->idle_klass];
}

/* Books the standalone energy of the ticks t slept through since its mark
 * (p_k(0)*dt each, exactly what a tick with zero rates would have booked). */
void account_settle_idle(sampler *s, struct tracked *t)
{
    double j = s->idle_sum[t->idle_klass] - t->idle_mark;

    t->sec_standalone_j += j;
    t->total_standalone_j += j;
    if (t->has_group)
        s->groups.v[t->group].standalone_j += j;
    t->idle_mark = s->idle_sum[t->idle_klass];
}

static void class_of(sampler *s, struct tracked *t, const double *rates)
{
    int ev = s->m->class_event;

    if (ev < 0)
        t->klass = 0;
    else if (s->m->class_mode == MODEL_CLASS_RATE)
        t->klass = model_classify(s->m, rates[ev]);
    else {
        t->class_stat += t->delta[s->model_map[ev]];
        t->klass = model_classify(s->m, t->class_stat);
    }
}

/* Books this tick's p_k(0)*dt to every class: the processes that slept
 * through it get theirs when they are next settled. */
static void add_idle_tick(sampler *s, double dt)
{
    for (size_t k = 0; k < s->m->n_classes; k++)
        s->idle_sum[k] += s->zero_power[k] * dt;
}

/* Adds an active process's share of the tick to its totals and group. */
static void book(sampler *s, struct tracked *t, const attrib_proc *ap)
{
    double cpu = s->task_clock >= 0 ? t->delta[s->task_clock] / 1e9 : 0;

    t->sec_j += ap->attributed_j;
    t->sec_standalone_j += ap->standalone_j;
    t->sec_cpu_s += cpu;
    t->total_j += ap->attributed_j;
    t->total_standalone_j += ap->standalone_j;
    t->total_cpu_s += cpu;
    if (t->has_group) {
        group_total *g = &s->groups.v[t->group];
        g->energy_j += ap->attributed_j;
        g->standalone_j += ap->standalone_j;
        g->cpu_s += cpu;
    }
    s->sec_cpu_s += cpu;
    for (size_t e = 0; e < s->es->n; e++)
        s->sec_ratio_sum[e] += t->ratio[e];
    s->sec_ratio_n++;
}

/* A tick the model gives no finite power for (rates or a duration out of
 * any range: a recording's 1e308, or a model that overflows) is still
 * stored: its measured energy, past the idle share, as unattributed, no
 * process's share, counted for GetStatus. */
static void unattributable_tick(sampler *s, attrib_tick *at, size_t n_active)
{
    double idle_full = s->idle_w * at->dt_s;
    uint64_t n = atomic_fetch_add(&s->unattributable, 1) + 1, now = util_now_ns(CLOCK_MONOTONIC);

    if (!at->measured || !(at->host_j >= 0 && at->host_j <= MODEL_MAX_POWER_W * at->dt_s))
        at->host_j = 0; /* nothing, rather than a number from nowhere */
    at->modeled_host_j = 0;
    at->idle_j = isfinite(idle_full) ? fmin(idle_full, at->host_j) : 0;
    at->active_j = at->unattributed_j = at->host_j - at->idle_j;
    at->attributed_j = 0;
    for (size_t i = 0; i < n_active; i++) {
        s->ap[i].dynamic_w = s->ap[i].standalone_j = s->ap[i].attributed_j = 0;
        for (size_t j = 0; j < s->m->n_events; j++)
            s->rates[i * s->m->n_events + j] = 0; /* what the exporter sums stays finite */
    }
    s->tick_unattributable = true;
    if (n == 1 || now - s->unattributable_logged_ns >= 10000000000ull) {
        log_warning("a tick of %g s could not be attributed (model %s gives no finite power for "
                    "its rates): stored as unattributed (%llu so far)",
                    at->dt_s, s->m->name, (unsigned long long)n);
        s->unattributable_logged_ns = now;
    }
}

/* Attribution caps idle at a tick's measured energy, and a meter not
 * updated since the previous tick reads less than the tick used: the idle
 * it could not book is owed, and the next ticks book it first, so that the
 * catch-up does not go to the processes. A shortfall that lasts longer
 * than a zone may stay still (SAMPLER_STILL_NS) is no stale reading but an
 * idle above the host's power: it is dropped, not carried. */
static void keep_idle_debt(sampler *s, const attrib_tick *at)
{
    double owed = at->idle_w * at->dt_s - at->idle_j;

    if (!(owed > 1e-12)) {
        s->idle_debt_j = 0;
        s->idle_short_ns = 0;
        return;
    }
    s->idle_short_ns += (uint64_t)(at->dt_s * 1e9);
    s->idle_debt_j = s->idle_short_ns < SAMPLER_STILL_NS ? owed : 0;
}

/* Attributes one tick of length dt over the processes with deltas; those
 * that slept had zero rates, so no dynamic power and no share, and their
 * standalone p_k(0)*dt is booked lazily (settle_idle). */
void account_tick(sampler *s, double dt, attrib_tick *out)
{
    size_t ne = s->m->n_events, n_active = s->n_active;
    struct tracked **active = s->active;
    /* Idle the latest ticks could not book (keep_idle_debt) comes first. */
    attrib_tick at = {.dt_s = dt,
                      .idle_w = s->idle_w + s->idle_debt_j / dt,
                      .untracked_dynamic_w = s->untracked_w,
                      .dynamic_scale = s->dyn_scale};

    if (s->ev_used) { /* one coefficient per event (eventcal.c) */
        at.event_scale = s->ev_scale;
        at.untracked_dynamic_w *= s->ev_untracked_scale;
    }

    for (size_t i = 0; i < n_active; i++) {
        struct tracked *t = active[i];
        double *rates = s->rates + i * ne;
        for (size_t j = 0; j < ne; j++)
            rates[j] = t->delta[s->model_map[j]] / dt;
        account_settle_idle(s, t);
        class_of(s, t, rates);
        s->ap[i] = (attrib_proc){
            .rates = rates, .klass = t->klass, .event_w = s->evfit ? s->ev_part + i * ne : NULL};
    }
    if (s->power->n > 0 && reading_power_usable(s, dt)) {
        at.measured = true;
        at.host_j = rapl_sum_domains(s->power, s->zone_delta, (const char *const *)s->m->target,
                                     s->m->n_target);
    } else if (s->power->n > 0) {
        s->sec_fallback = true;
    }
    s->tick_unattributable = false;
    if (attrib_tick_compute(s->m, &at, s->ap, n_active) < 0) {
        unattributable_tick(s, &at, n_active);
        s->sec_unattributable = true; /* no row for the calibration fit */
    } else {
        keep_idle_debt(s, &at);
        eventcal_tick(s, dt);
    }
    add_idle_tick(s, dt);
    uint64_t this_tick = atomic_load(&s->ticks) + 1; /* tick() counts it next */
    for (size_t i = 0; i < n_active; i++) {
        book(s, active[i], &s->ap[i]);
        active[i]->active_tick = this_tick;
        account_mark_idle(s, active[i]); /* after add_idle_tick: this tick was not idle */
    }
    /* A process that slept was fully counted: ratio 1 for every event. */
    for (size_t e = 0; e < s->es->n; e++)
        s->sec_ratio_sum[e] += (double)s->n_idle;
    s->sec_ratio_n += s->n_idle;
    s->total_measured_j += at.measured ? at.host_j : 0;
    s->total_modeled_j += at.modeled_host_j;
    s->total_idle_j += at.idle_j;
    s->total_unattr_j += at.unattributed_j;
    if (!s->tick_unattributable)
        s->sec_dyn_j += at.modeled_host_j - (at.idle_w + at.untracked_dynamic_w) * dt;
    for (size_t z = 0; z < s->power->n; z++) {
        s->zone_total_j[z] += s->zone_delta[z];
        s->sec_zone_j[z] += s->zone_delta[z];
        if (s->zone_bad[z] > 0)
            s->sec_zone_bad[z] = 1;
    }
    s->sec_host_j += at.host_j;
    s->sec_modeled_j += at.modeled_host_j;
    /* Drift judges the model itself: its idle and its processes' power,
     * not the untracked estimate or idle carried over from a stale meter. */
    if (!s->tick_unattributable)
        s->sec_drift_model_j +=
            s->idle_w * dt + at.modeled_host_j - (at.idle_w + at.untracked_dynamic_w) * dt;
    s->sec_idle_j += at.idle_j;
    s->sec_unattr_j += at.unattributed_j;
    s->sec_dt += dt;
    s->second_ticks++;
    *out = at;
}

const char *account_idle_source_name(daemon_idle_source src)
{
    static const char *const names[] = {"fitted", "stored", "model", "percentile"};
    return names[src];
}

bool account_idle_fit(const daemon_calib *c, double *idle_se_w, int64_t *t)
{
    const bool single =
        (c->source == DAEMON_IDLE_FITTED || c->source == DAEMON_IDLE_STORED) && c->best.t > 0;

    if (c->idle_events) {
        *idle_se_w = c->ev_best.idle_se_w;
        *t = c->ev_best.t;
    } else if (single) {
        *idle_se_w = c->best.idle_se_w;
        *t = c->best.t;
    } else {
        *idle_se_w = NAN;
        *t = 0;
    }
    return c->idle_events || single;
}

/* Keeps an identifiable live fit as the node's best. */
static void keep_fit(sampler *s, const calib_fit *f, int64_t t_ns)
{
    store_node_calib *b = &s->cal.best;

    model_target_key(s->m, b->target, sizeof(b->target));
    b->t = t_ns / 1000000000;
    b->idle_w = f->idle_w;
    b->idle_se_w = f->idle_se_w;
    b->scale = f->scale;
    b->r2 = f->r2;
    b->spread_w = f->spread_w;
    b->rows = (int64_t)f->rows;
    snprintf(b->model_sha256, sizeof(b->model_sha256), "%s", s->m->sha256);
}

/* Once a second: the second's measured host power and the model's dynamic
 * power (NAN: not measured) go into the fit, and idle comes from the best
 * source there is (daemon_idle_source). Never silently: status shows the
 * source and the fit. */
void account_update_idle(sampler *s, double host_w, double dyn_w)
{
    daemon_calib *c = &s->cal;

    c->idle_events = false; /* until eventcal_second takes the per-event fit's */
    if (s->power->n == 0) {
        s->idle_w = c->idle_w = s->m->idle_power_w;
        c->source = DAEMON_IDLE_MODEL;
        c->live.why = "no power meter (RAPL) to fit against";
        return;
    }
    /* A second that mixes two models is neither model's. (The clock is
     * read only here: a replay's starts with its first tick.) */
    if (isfinite(host_w) && !s->model_changed) {
        s->fit_t_ns = sampler_clock(s);
        stats_ring_add(&s->idle_power, host_w);
        calib_add(s->fit, (double)s->fit_t_ns / 1e9, dyn_w, host_w);
    }
    c->percentile_rows = s->idle_power.n;
    calib_fit_now(s->fit, &c->live);
    if (c->live.identifiable)
        keep_fit(s, &c->live, s->fit_t_ns);
    if (c->live.identifiable) {
        c->source = DAEMON_IDLE_FITTED;
        c->idle_w = c->live.idle_w;
    } else if (c->best.t > 0) {
        c->source = DAEMON_IDLE_STORED;
        c->idle_w = c->best.idle_w;
    } else if (s->m->training.present || s->idle_power.n == 0) {
        /* Before the first measured second there is no percentile: the
         * model's idle, which attribution caps at the measured energy,
         * stands in. */
        c->source = DAEMON_IDLE_MODEL;
        c->idle_w = s->m->idle_power_w;
    } else {
        c->source = DAEMON_IDLE_PERCENTILE;
        c->idle_w = stats_percentile(&s->idle_power, 5);
    }
    s->idle_w = c->idle_w;
    /* A tick without a measurement (a stalled zone) scales the model's
     * dynamic power as the fit does, when the fit is of this model. */
    bool fitted = c->source == DAEMON_IDLE_FITTED || c->source == DAEMON_IDLE_STORED;
    s->dyn_scale = fitted && strcmp(c->best.model_sha256, s->m->sha256) == 0 && c->best.scale > 0
                       ? c->best.scale
                       : 0;
}

/* The model's dynamic power of `cpu` untracked cores: through the model's
 * CPU coefficient (the class zero rates fall in), or for a model without
 * task-clock the tracked processes' mean power per CPU this second. */
static double untracked_power(sampler *s, double cpu)
{
    if (!isfinite(cpu))
        return 0;
    if (s->cpu_event >= 0)
        return hostcpu_untracked_power(s->m, s->cpu_event, s->zero_class, cpu, s->untracked_rates);
    return s->sec_cpu_s > 0 ? s->sec_dyn_j / s->sec_cpu_s * cpu : 0;
}

/* The meter's CPU that no tracked process used over the second just
 * ended (sec_untracked), and the dynamic power the next second's ticks book
 * as unattributed (untracked_w): the meter's CPU is read once a second,
 * not per tick, so they book a mean of the latest seconds (time constant
 * SAMPLER_UNTRACKED_S). The last second's own value would be off by its
 * change from one second to the next, and since a process's share is
 * d / (D + untracked), such noise hands the tracked processes more than
 * their share on average, not only more or less. A replay has no record
 * of it. Returns the power of this second's own value, for the fit. */
double account_measure_untracked(sampler *s, double secs)
{
    double busy = NAN;

    if (s->rep || hostcpu_busy_s(s->cfg->meter_cgroup, &busy) < 0)
        busy = NAN;
    double untracked = (busy - s->busy_prev - s->sec_cpu_s) / secs; /* NAN when unknown */
    s->sec_untracked = isfinite(untracked) ? fmax(0, untracked) : NAN;
    s->busy_prev = busy;
    if (!isfinite(s->sec_untracked))
        s->untracked_avg = NAN;
    else if (!isfinite(s->untracked_avg))
        s->untracked_avg = s->sec_untracked;
    else
        s->untracked_avg +=
            (1 - exp(-secs / SAMPLER_UNTRACKED_S)) * (s->sec_untracked - s->untracked_avg);
    s->untracked_w = untracked_power(s, s->untracked_avg);
    return untracked_power(s, s->sec_untracked);
}
