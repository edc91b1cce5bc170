/* attrib: one tick's host energy split between idle, processes and the
 * unattributed rest (docs/design.md, "Sampling and energy", step 5).
 *
 * A linear model's dynamic parts add up to the host prediction, so sharing
 * the measured active energy in proportion to each process's dynamic power
 * is exact when the model is right and proportional when it is not. The
 * invariant sum(attributed) + idle + unattributed = host holds for every
 * tick, and is what the tests check. */
#include "model/model.h"

#include <errno.h>
#include <math.h>

int attrib_tick_compute(const model *m, attrib_tick *t, attrib_proc *procs, size_t n)
{
    double sum_d = 0, sum_model = 0, idle_full, part_here[m->n_events + 1];

    if (!(t->dt_s > 0) || !isfinite(t->dt_s) || !(t->idle_w >= 0) ||
        !(t->untracked_dynamic_w >= 0) || !(t->dynamic_scale >= 0) || !isfinite(t->dynamic_scale) ||
        (t->measured && isnan(t->host_j)))
        return -EINVAL;
    if (t->dt_s > ATTRIB_MAX_TICK_S || (t->measured && !(t->host_j <= MODEL_MAX_POWER_W * t->dt_s)))
        return -ERANGE;
    for (size_t i = 0; i < n; i++) {
        attrib_proc *p = &procs[i];
        if (p->klass < 0 || (size_t)p->klass >= m->n_classes)
            return -EINVAL;
        double power = model_power(m, p->klass, p->rates);
        double *part = p->event_w ? p->event_w : part_here;
        model_event_power(m, p->klass, p->rates, part);
        double own = model_event_power_sum(m, part, NULL);
        p->dynamic_w = t->event_scale ? model_event_power_sum(m, part, t->event_scale) : own;
        if (!isfinite(power) || !isfinite(p->dynamic_w) || !isfinite(own))
            return -ERANGE;
        p->standalone_j = power * t->dt_s;
        sum_d += p->dynamic_w;
        sum_model += own;
    }
    idle_full = t->idle_w * t->dt_s;
    t->modeled_host_j = idle_full + (sum_model + t->untracked_dynamic_w) * t->dt_s;
    if (!t->measured)
        t->host_j = idle_full + (t->dynamic_scale > 0 ? t->dynamic_scale : 1) *
                                    (sum_d + t->untracked_dynamic_w) * t->dt_s;
    if (!(t->host_j >= 0) || !isfinite(t->host_j))
        return -ERANGE;

    t->idle_j = fmin(idle_full, t->host_j);
    t->active_j = t->host_j - t->idle_j;
    double total_d = sum_d + t->untracked_dynamic_w;
    t->attributed_j = 0;
    for (size_t i = 0; i < n; i++) {
        procs[i].attributed_j = total_d > 0 ? t->active_j * (procs[i].dynamic_w / total_d) : 0;
        t->attributed_j += procs[i].attributed_j;
    }
    /* Rounding can leave the sum a hair above active; never go negative. */
    t->unattributed_j = fmax(0, t->active_j - t->attributed_j);
    return 0;
}
