/* reading: this tick's counter deltas and energy.
 *
 * Live, every tick reads the RAPL zones and the counters of each tracked
 * process through the counter backend (backend.h), except those whose
 * quiet word proves they slept since their previous read: those are the
 * most of a host's processes on most ticks, and skipping them is what keeps
 * a tick cheap (docs/internals.md). The processes that ran form
 * the active list that accounting works on. A replay takes the same from
 * the recording instead, and --record writes each live tick to it. */
#include "sampler-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Empties the active list (the processes of the tick just accounted). */
void reading_clear_active(sampler *s)
{
    for (size_t i = 0; i < s->n_active; i++)
        s->active[i]->has_delta = false;
    s->n_active = 0;
}

/* Whether procs[i] provably slept since its previous read. A process
 * marked gone is read once more whatever its word says. */
static bool slept(const sampler *s, size_t i, bool check_gone)
{
    const struct quiet *q = &s->quiet[i];

    return q->word && __atomic_load_n(q->word, __ATOMIC_ACQUIRE) == q->value &&
           !(check_gone && s->procs[i]->gone);
}

/* One process's counters: into the active list when it ran. */
static void read_proc(sampler *s, size_t i)
{
    struct tracked *t = s->procs[i];
    int r = s->be->read(t->ch, &s->d);

    if (r < 0) {
        t->gone = s->reap_pending = true;
        s->quiet[i].word = NULL;
        return;
    }
    s->quiet[i].word = s->be->quiet_word(t->ch, &s->quiet[i].value);
    /* A backend that drains knows of exits itself (the connector's are
     * filtered out then): this was the final read. */
    if (s->be->drain && !s->be->alive(t->ch))
        t->gone = s->reap_pending = true;
    if (s->d.skipped) {
        s->n_idle++;
        return;
    }
    memcpy(t->delta, s->d.scaled, s->es->n * sizeof(double));
    memcpy(t->ratio, s->d.ratio, s->es->n * sizeof(double));
    t->has_delta = true;
    s->active[s->n_active++] = t;
}

/* A process the backend counted that exited before it was tracked. */
static int adopt(void *ctx, const backend_orphan *o)
{
    return proctable_adopt(ctx, o);
}

/* A fork, exec or rename the backend saw (in place of the connector's). */
static void backend_event(void *ctx, const procs_event *ev)
{
    proctable_event(ctx, ev);
}

/* Hardware: counters of every tracked process and the RAPL zones. A
 * backend that counts in the kernel is drained first, in one batch, with
 * the process events it saw. */
int reading_hardware(sampler *s)
{
    int r = 0;

    s->adopted = 0;
    if (s->be->drain && (r = s->be->drain(adopt, s->be_events ? backend_event : NULL, s)) < 0 &&
        !s->drain_failed) {
        s->drain_failed = true;
        log_error("%s counter backend: draining its counts failed: %s", s->be->name, strerror(-r));
    } else if (r > 0 && s->be_events) {
        proctable_events_lost(s);
    }
    if (s->be->drain)
        proctable_track_forked(s);
    bool check_gone = s->reap_pending;
    if (s->power->n > 0 && (s->rapl_err = rapl_read(s->power, s->zone_delta)) < 0)
        memset(s->zone_delta, 0, s->power->n * sizeof(double));
    reading_clear_active(s);
    s->n_idle = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (slept(s, i, check_gone))
            s->n_idle++;
        else
            read_proc(s, i);
    }
    s->sec_reads += s->n;
    s->sec_skipped += s->n_idle;
    return 0;
}

/* Replay: records up to and including the next tick. Returns 1 for a tick,
 * 0 at the end of the file. */
int reading_replay(sampler *s, uint64_t *dt_ns)
{
    char err[UTIL_ERRLEN];
    trace_record_kind kind;
    trace_tick tick;
    procs_info info;

    for (;;) {
        memset(&info, 0, sizeof(info));
        int r = trace_read(s->rep, &kind, &tick, &info, err, sizeof(err));
        if (r <= 0) {
            if (r < 0)
                log_error("replay stopped: %s", err);
            return 0;
        }
        if (kind == TRACE_PROC) {
            struct tracked *t = proctable_find_start(s, info.pid, info.start_ticks);
            if (t) {
                /* A later record: renamed, or its job found after an exec. */
                bool moved = !t->job_in_cgroup && info.job[0] && strcmp(t->job, info.job) != 0;
                if (moved)
                    snprintf(t->job, sizeof(t->job), "%s", info.job);
                if (moved || strcmp(t->comm, info.comm) != 0) {
                    memcpy(t->comm, info.comm, sizeof(t->comm));
                    proctable_join_group(s, t);
                }
            } else if (proctable_wanted(s, &info))
                proctable_add(s, &info, NULL);
            continue;
        }
        if (kind == TRACE_EXIT) {
            struct tracked *t = proctable_find_start(s, info.pid, info.start_ticks);
            if (t) {
                t->gone = s->reap_pending = true;
                proctable_reap(s);
            }
            continue;
        }
        /* A tracked process the tick does not list slept through it. */
        reading_clear_active(s);
        for (size_t k = 0; k < tick.n_procs; k++) {
            struct tracked *t =
                proctable_find_start(s, tick.procs[k].pid, tick.procs[k].start_ticks);
            if (!t)
                continue;
            memcpy(t->delta, tick.procs[k].scaled, s->es->n * sizeof(double));
            memcpy(t->ratio, tick.procs[k].ratio, s->es->n * sizeof(double));
            if (!t->has_delta)
                s->active[s->n_active++] = t;
            t->has_delta = true;
        }
        s->n_idle = s->n - s->n_active;
        memcpy(s->zone_delta, tick.energy_j, s->power->n * sizeof(double));
        if (s->replay_t0 == 0)
            s->replay_t0 = tick.mono_ns - tick.dt_ns;
        s->last_ns = tick.mono_ns;
        proctable_push_pending_infos(s);
        *dt_ns = tick.dt_ns;
        return 1;
    }
}

void reading_record_tick(sampler *s, uint64_t now, uint64_t dt_ns)
{
    trace_proc_delta pd[s->n_active ? s->n_active : 1];

    /* Processes that slept are left out: a replay books them as idle. */
    for (size_t i = 0; i < s->n_active; i++) {
        const struct tracked *t = s->active[i];
        pd[i] = (trace_proc_delta){t->pid, t->start, t->delta, t->ratio};
    }
    trace_tick t = {now, dt_ns, s->zone_delta, pd, s->n_active};
    int r = trace_write_tick(s->rec, &t);
    if (r < 0 && atomic_exchange(&s->record_error, r) == 0)
        log_error("--record %s: writing failed: %s; the recording stops there", s->cfg->record_path,
                  strerror(-r));
}

/* Whether this tick's RAPL deltas measure the host. A target zone that has
 * not advanced for SAMPLER_STILL_NS (it vanished, or its counter stalled)
 * reads zero, and once it advances again its deltas may carry the outage's
 * energy (in one tick, or over a few when whatever feeds the counter
 * catches up in steps). Neither is a measurement: such ticks, up to
 * SAMPLER_SETTLE_NS after the zone advances again, fall back to the model's
 * host estimate, as on a machine without RAPL. Shorter runs of zero (a
 * counter updated less often than the ticks) are read as they are: their
 * energy shows up in the next delta. */
bool reading_power_usable(sampler *s, double dt)
{
    for (size_t z = 0; z < s->power->n; z++) {
        uint64_t dt_ns = (uint64_t)(dt * 1e9);
        uint64_t *settle = &s->zone_settle_ns[z];
        bool was_still = s->zone_still_ns[z] >= SAMPLER_STILL_NS;
        if (s->zone_delta[z] > 0) {
            s->zone_still_ns[z] = 0;
            *settle = was_still ? SAMPLER_SETTLE_NS : *settle > dt_ns ? *settle - dt_ns : 0;
        } else {
            s->zone_still_ns[z] += dt_ns;
        }
        s->zone_bad[z] = was_still || *settle > 0 || s->zone_still_ns[z] >= SAMPLER_STILL_NS;
    }
    return rapl_sum_domains(s->power, s->zone_bad, (const char *const *)s->m->target,
                            s->m->n_target) == 0;
}
