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
 * and takes idle from the fit's intercept; otherwise the single scale stands, and GetStatus says
 * why. */
#include "sampler-internal.h"

#include <errno.h>
#include <math.h>
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
    s->ev_used = c->events_used = false;
    s->ev_fit_wait = SAMPLER_EV_FIT_S;
    c->events_why = model_unfit(s->m);
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
    }
    if (!c->events.per_event)
        c->events_why = c->events.why ? c->events.why : "too few measured seconds";
    else if (c->source != DAEMON_IDLE_FITTED && !c->events.idle_identified)
        c->events_why = "the fitted idle is too uncertain";
    else
        c->events_why = NULL;
    s->ev_used = c->events_used = c->events_why == NULL;
    if (!s->ev_used)
        return;
    /* Power that follows an event the single scale cannot explain leaves
     * that fit too uncertain to name idle while this one can: it is then
     * this fit's idle. */
    c->source = DAEMON_IDLE_FITTED;
    memcpy(s->ev_scale, c->events.coef, s->m->n_events * sizeof(double));
    s->ev_untracked_scale = s->cpu_event >= 0 ? c->events.coef[s->cpu_event] : c->events.scale;
    s->idle_w = c->idle_w = c->events.idle_w;
    s->dyn_scale = 0; /* the coefficients already give measured watts */
}
