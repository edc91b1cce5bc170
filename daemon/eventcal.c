/* eventcal: one calibration coefficient per model event, in the daemon
 * (docs/calibration.md, "One coefficient per event").
 *
 * Each attributed tick adds every active process's dynamic power through
 * each event (model_event_power, which attribution computed for it into
 * s->ev_part) to the second's sums; once a second those
 * sums, with the untracked CPU's power in the task-clock column, and the
 * measured host power are a row of lib/model's calib_ev fit, which is
 * refitted every SAMPLER_EV_FIT_S seconds. When the fit can tell the
 * events apart, and idle is identified (by the single-scale fit or by this
 * one's own standard error), attribution weighs each process's dynamic power by the coefficients
 * and takes idle from the fit's intercept; otherwise the latest fit that was used, of the same
 * model (from this run, or stored in the database by the run before), stands; without one the
 * single scale does, and GetStatus says why. */
#include "sampler-internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Why a model cannot have one coefficient per event, or NULL. */
static const char *model_unfit(const model *m)
{
    if (m->n_events < 2)
        return "the model has fewer than two events";
    if (m->n_events > CALIB_EV_MAX)
        return "the model has more events than the fit takes (8)";
    for (size_t k = 0; k < m->n_classes; k++)
        for (size_t j = 0; j < m->n_events; j++)
            if (!(m->classes[k].coef[j] >= 0))
                return "the model has a negative coefficient";
    return NULL;
}

/* Attribution takes the coefficients `coef` and idle from their fit's
 * intercept: a live fit's (`fitted`) always, a kept one's unless the
 * single-scale fit tells idle now. events_why stays the live fit's. */
static void apply(sampler *s, const double *coef, double scale, double idle_w, bool fitted)
{
    daemon_calib *c = &s->cal;

    s->ev_used = c->events_used = true;
    memcpy(s->ev_scale, coef, s->m->n_events * sizeof(double));
    s->ev_untracked_scale = s->cpu_event >= 0 ? coef[s->cpu_event] : scale;
    if (fitted || c->source != DAEMON_IDLE_FITTED) {
        c->source = fitted ? DAEMON_IDLE_FITTED : DAEMON_IDLE_STORED;
        s->idle_w = c->idle_w = idle_w;
        c->idle_events = true;
    }
    s->dyn_scale = 0; /* the coefficients already give measured watts */
}

/* Keeps the live fit, used this second, as the node's latest: once per
 * fit (every SAMPLER_EV_FIT_S s), with the time of its newest row. */
static void keep_fit(sampler *s)
{
    const calib_ev_fit *f = &s->cal.events;
    store_node_evcal *b = &s->cal.ev_best;

    memset(b, 0, sizeof(*b));
    model_target_key(s->m, b->target, sizeof(b->target));
    b->t = s->ev_fit_t_ns / 1000000000;
    snprintf(b->model_sha256, sizeof(b->model_sha256), "%s", s->m->sha256);
    b->n_events = s->m->n_events;
    for (size_t j = 0; j < b->n_events; j++) {
        snprintf(b->events[j], sizeof(b->events[j]), "%s", s->m->events[j]);
        b->coef[j] = f->coef[j];
        b->coef_se[j] = f->coef_se[j];
    }
    b->scale = f->scale;
    b->alpha = f->alpha;
    b->idle_w = f->idle_w;
    b->idle_se_w = f->idle_se_w;
    b->rows = (int64_t)f->rows;
    s->ev_fit_unkept = false;
}

/* Why the stored fit `c` is not of model `m`, or NULL. */
static const char *not_this_model(const model *m, const store_node_evcal *c)
{
    char target[sizeof(c->target)];

    model_target_key(m, target, sizeof(target));
    if (strcmp(target, c->target) != 0)
        return "it is of other RAPL domains";
    if (strcmp(c->model_sha256, m->sha256) != 0)
        return "it is of another model (SHA-256)";
    if (c->n_events != m->n_events)
        return "the model's events are not the ones it was fitted with";
    for (size_t j = 0; j < c->n_events; j++)
        if (strcmp(c->events[j], m->events[j]) != 0)
            return "the model's events are not the ones it was fitted with";
    return NULL;
}

const char *sampler_stored_evcal_why(const sampler *s, const model *m, const store_node_evcal *c)
{
    const char *why = model_unfit(m);

    return why                ? why
           : s->power->n == 0 ? "no power meter (RAPL) to fit against"
                              : not_this_model(m, c);
}

const char *sampler_set_stored_evcal(sampler *s, const store_node_evcal *c)
{
    const char *why = !s->evfit ? s->cal.events_why : sampler_stored_evcal_why(s, s->m, c);

    if (why)
        return why;
    s->cal.ev_best = *c;
    s->ev_fit_unkept = true; /* a live fit used again is kept again */
    s->cal.events_stored = true;
    apply(s, c->coef, c->scale, c->idle_w, false);
    return NULL;
}

void eventcal_free(sampler *s)
{
    calib_ev_free(s->evfit);
    s->evfit = NULL;
}

int eventcal_setup(sampler *s)
{
    daemon_calib *c = &s->cal;

    eventcal_free(s);
    memset(s->sec_ev_j, 0, sizeof(s->sec_ev_j));
    memset(&c->events, 0, sizeof(c->events));
    c->events.idle_w = c->events.scale = c->events.alpha = NAN;
    s->ev_used = c->events_used = c->events_stored = false;
    s->ev_fit_wait = SAMPLER_EV_FIT_S;
    s->ev_fit_unkept = false;
    c->events_why = model_unfit(s->m);
    if (c->events_why || (c->ev_best.t > 0 && not_this_model(s->m, &c->ev_best)))
        c->ev_best.t = 0; /* a fit is of the model it was fitted with */
    if (c->events_why)
        return 0;
    c->events_why = "too few measured seconds";
    int r = calib_ev_new(NULL, s->m->n_events, &s->evfit);
    if (r < 0)
        log_error("cannot set up the per-event calibration: %s", strerror(-r));
    return r;
}

void eventcal_tick(sampler *s, double dt)
{
    size_t ne = s->m->n_events;

    if (!s->evfit || s->power->n == 0)
        return;
    for (size_t i = 0; i < s->n_active; i++) {
        const double *part = s->ap[i].event_w; /* set while s->evfit is */
        for (size_t j = 0; j < ne; j++)
            s->sec_ev_j[j] += part[j] * dt;
    }
}

/* The second's row: each event's dynamic power, the untracked CPU's in the
 * task-clock column (or shared in proportion, for a model without it). */
static void event_row(const sampler *s, double untracked_w, double secs, double *x)
{
    size_t ne = s->m->n_events;
    double sum = 0;

    for (size_t j = 0; j < ne; j++)
        sum += x[j] = s->sec_ev_j[j] / secs;
    if (!(untracked_w > 0))
        return;
    if (s->cpu_event >= 0)
        x[s->cpu_event] += untracked_w;
    else
        for (size_t j = 0; j < ne; j++)
            x[j] += sum > 0 ? untracked_w * x[j] / sum : untracked_w / (double)ne;
}

void eventcal_second(sampler *s, double host_w, double untracked_w, double secs)
{
    daemon_calib *c = &s->cal;
    double x[CALIB_EV_MAX];

    if (!s->evfit)
        return;
    if (s->power->n == 0) { /* host_w is then the model's own */
        c->events_why = "no power meter (RAPL) to fit against";
        memset(s->sec_ev_j, 0, sizeof(s->sec_ev_j));
        return;
    }
    event_row(s, untracked_w, secs, x);
    memset(s->sec_ev_j, 0, sizeof(s->sec_ev_j));
    if (isfinite(host_w) && !s->model_changed)
        calib_ev_add(s->evfit, (double)s->fit_t_ns / 1e9, x, host_w);
    if (--s->ev_fit_wait == 0) {
        s->ev_fit_wait = SAMPLER_EV_FIT_S;
        calib_ev_fit_now(s->evfit, &c->events);
        s->ev_fit_t_ns = s->fit_t_ns;
        s->ev_fit_unkept = true;
    }
    if (!c->events.per_event)
        c->events_why = c->events.why ? c->events.why : "too few measured seconds";
    else if (c->source != DAEMON_IDLE_FITTED && !c->events.idle_identified)
        c->events_why = "the fitted idle is too uncertain";
    else
        c->events_why = NULL;
    s->ev_used = c->events_used = c->events_stored = false;
    if (!c->events_why) {
        /* Power that follows an event the single scale cannot explain
         * leaves that fit too uncertain to name idle while this one can:
         * it is then this fit's idle. */
        if (s->ev_fit_unkept)
            keep_fit(s);
        apply(s, c->events.coef, c->events.scale, c->events.idle_w, true);
    } else if (c->ev_best.t > 0) {
        c->events_stored = true;
        apply(s, c->ev_best.coef, c->ev_best.scale, c->ev_best.idle_w, false);
    }
}
