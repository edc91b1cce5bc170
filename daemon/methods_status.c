/* methods_status: GetStatus, the daemon's health and the host's power
 * now (sampler snapshot, store statistics, warnings). */
#include "methods-internal.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One coefficient per event: in use (the live fit, or the latest used one,
 * kept or stored: `source`) or why not, and the latest live fit (the
 * model's event names when it has as many events as the fit). */
static json_object *calibration_events_json(const daemon_calib *c, const model *m)
{
    json_object *o = json_object_new_object(), *a = json_object_new_array();
    const calib_ev_fit *f = &c->events;
    const store_node_evcal *b = c->events_used ? &c->ev_best : NULL;
    bool fitted = f->rows > 0 && isfinite(f->scale);

    json_object_object_add(o, "used", json_object_new_boolean(c->events_used));
    json_object_object_add(
        o, "source", b ? json_object_new_string(c->events_stored ? "stored" : "fitted") : NULL);
    json_object_object_add(o, "fitted", b ? json_object_new_double((double)b->t) : NULL);
    json_object_object_add(o, "reason",
                           !b && c->events_why ? json_object_new_string(c->events_why) : NULL);
    json_object_object_add(o, "live_reason",
                           c->events_why ? json_object_new_string(c->events_why) : NULL);
    json_object_object_add(o, "alpha",
                           b              ? methods_num_or_null(b->alpha)
                           : f->per_event ? methods_num_or_null(f->alpha)
                                          : NULL);
    json_object_object_add(o, "idle_w",
                           b        ? methods_num_or_null(b->idle_w)
                           : fitted ? methods_num_or_null(f->idle_w)
                                    : NULL);
    json_object_object_add(o, "idle_se_w",
                           b              ? methods_num_or_null(b->idle_se_w)
                           : f->per_event ? methods_num_or_null(f->idle_se_w)
                                          : NULL);
    for (size_t j = 0; j < (b ? b->n_events : f->n_cols); j++) {
        json_object *e = json_object_new_object();
        char name[32];
        snprintf(name, sizeof(name), "event %zu", j);
        json_object_object_add(e, "event",
                               json_object_new_string(b                               ? b->events[j]
                                                      : m && m->n_events == f->n_cols ? m->events[j]
                                                                                      : name));
        json_object_object_add(e, "scale",
                               b        ? methods_num_or_null(b->coef[j])
                               : fitted ? methods_num_or_null(f->coef[j])
                                        : NULL);
        json_object_object_add(e, "se", b ? methods_num_or_null(b->coef_se[j]) : NULL);
        json_object_object_add(e, "fixed",
                               json_object_new_boolean(b ? !isfinite(b->coef_se[j]) : f->fixed[j]));
        json_object_array_add(a, e);
    }
    json_object_object_add(o, "coefficients", a);
    json_object_object_add(o, "cv_rmse_w", methods_num_or_null(f->cv_rmse_w));
    json_object_object_add(o, "cv_rmse_single_w", methods_num_or_null(f->cv_rmse_single_w));
    json_object_object_add(o, "rows", json_object_new_int64((int64_t)f->rows));
    json_object_object_add(o, "fit_rows", b ? json_object_new_int64(b->rows) : NULL);
    return o;
}

static json_object *calibration_json(const daemon_calib *c, const model *m)
{
    json_object *o = json_object_new_object();
    /* The single-scale fit in use; best.t 0: none (idle may still be the
     * per-event fit's) */
    bool fit =
        (c->source == DAEMON_IDLE_FITTED || c->source == DAEMON_IDLE_STORED) && c->best.t > 0;
    const calib_fit *live = &c->live;
    double idle_se_w;
    int64_t fitted;
    bool idle_fit = account_idle_fit(c, &idle_se_w, &fitted);

    json_object_object_add(o, "source",
                           json_object_new_string(account_idle_source_name(c->source)));
    json_object_object_add(o, "idle_w", json_object_new_double(c->idle_w));
    json_object_object_add(o, "idle_se_w", idle_fit ? methods_num_or_null(idle_se_w) : NULL);
    json_object_object_add(o, "scale", fit ? methods_num_or_null(c->best.scale) : NULL);
    json_object_object_add(o, "r2", fit ? methods_num_or_null(c->best.r2) : NULL);
    json_object_object_add(o, "fitted", idle_fit ? json_object_new_double((double)fitted) : NULL);
    json_object_object_add(o, "identifiable", json_object_new_boolean(live->identifiable));
    json_object_object_add(o, "reason", live->why ? json_object_new_string(live->why) : NULL);
    json_object_object_add(o, "rows", json_object_new_int64((int64_t)live->rows));
    json_object_object_add(o, "rejected", json_object_new_int64((int64_t)live->rejected));
    json_object_object_add(o, "spread_w", methods_num_or_null(live->spread_w));
    json_object_object_add(o, "live_idle_w", methods_num_or_null(live->idle_w));
    json_object_object_add(o, "live_idle_se_w", methods_num_or_null(live->idle_se_w));
    json_object_object_add(o, "events", calibration_events_json(c, m));
    return o;
}

static json_object *zones_json(const rapl *power, const daemon_status *st)
{
    json_object *a = json_object_new_array();

    if (power->n == 0) {
        json_object *z = json_object_new_object();
        json_object_object_add(z, "name", json_object_new_string("rapl"));
        json_object_object_add(z, "domain", json_object_new_string(""));
        json_object_object_add(z, "power_w", NULL);
        json_object_object_add(z, "error", json_object_new_string(power->state));
        json_object_array_add(a, z);
        return a;
    }
    for (size_t i = 0; i < power->n; i++) {
        json_object *z = json_object_new_object();
        json_object_object_add(z, "name", json_object_new_string(power->zone[i].name));
        json_object_object_add(z, "domain", json_object_new_string(power->zone[i].domain));
        json_object_object_add(
            z, "power_w", st && st->zone_power_w ? methods_num_or_null(st->zone_power_w[i]) : NULL);
        json_object_object_add(z, "error", NULL);
        json_object_array_add(a, z);
    }
    return a;
}

static json_object *events_json(const sample_eventset *es, const daemon_status *st)
{
    json_object *a = json_object_new_array();

    for (size_t i = 0; i < es->n; i++) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "name", json_object_new_string(es->ev[i].name));
        json_object_object_add(
            e, "running_ratio",
            json_object_new_double(st && st->event_ratio ? st->event_ratio[i] : 1.0));
        json_object_object_add(e, "error", NULL);
        json_object_array_add(a, e);
    }
    return a;
}

static json_object *warnings_json(const daemon_ctx *ctx, const daemon_status *st,
                                  const store_stats *ss)
{
    json_object *a = json_object_new_array();
    char line[512];

    if (sampler_rapl(ctx->smp)->n == 0)
        json_object_array_add(a, json_object_new_string(sampler_rapl(ctx->smp)->state));
    if (st->power_fault[0])
        json_object_array_add(a, json_object_new_string(st->power_fault));
    if (st->calib.source == DAEMON_IDLE_PERCENTILE) {
        snprintf(line, sizeof(line),
                 "idle %.1f W is the 5th percentile of measured power, which is idle only if this "
                 "node idles: the fit cannot tell idle yet (%s)",
                 st->calib.idle_w, st->calib.live.why ? st->calib.live.why : "no fit");
        json_object_array_add(a, json_object_new_string(line));
    }
    if (st->drift_flagged) {
        snprintf(line, sizeof(line), "model drift %.1f %% is over the %.0f %% threshold",
                 st->drift * 100, ctx->cfg->drift_threshold * 100);
        json_object_array_add(a, json_object_new_string(line));
    }
    if (isfinite(st->untracked_cpu) && st->untracked_cpu > 0.05) {
        snprintf(line, sizeof(line),
                 "%.2f cores of CPU time were not seen by any tracked process: their energy is "
                 "unattributed",
                 st->untracked_cpu);
        json_object_array_add(a, json_object_new_string(line));
    }
    if (sampler_events(ctx->smp)->user_only)
        json_object_array_add(
            a, json_object_new_string("counting user mode only: the kernel refused kernel-mode "
                                      "counts (perf_event_paranoid)"));
    if (!st->proc_connector && !ctx->cfg->replay_path)
        json_object_array_add(
            a, json_object_new_string("no proc connector: new processes are found by rescans"));
    if (st->reads_unskippable) {
        snprintf(line, sizeof(line),
                 "%zu processes are read every tick: no context-switch buffer (locked memory?)",
                 st->reads_unskippable);
        json_object_array_add(a, json_object_new_string(line));
    }
    if (sampler_record_error(ctx->smp)) {
        snprintf(line, sizeof(line),
                 "--record %.300s: writing failed (%s); the recording stops there",
                 ctx->cfg->record_path, strerror(-sampler_record_error(ctx->smp)));
        json_object_array_add(a, json_object_new_string(line));
    }
    if (sampler_unattributable(ctx->smp)) {
        snprintf(line, sizeof(line),
                 "%llu ticks could not be attributed (the model gave no finite power for their "
                 "rates): their energy is stored as unattributed",
                 (unsigned long long)sampler_unattributable(ctx->smp));
        json_object_array_add(a, json_object_new_string(line));
    }
    if (ss->dropped) {
        snprintf(line, sizeof(line), "%llu records dropped: the storage queue was full",
                 (unsigned long long)ss->dropped);
        json_object_array_add(a, json_object_new_string(line));
    }
    if (ss->error)
        json_object_array_add(a, json_object_new_string(ss->error_text));
    if (ss->rows_lost) {
        snprintf(line, sizeof(line),
                 "%llu rows were lost: the database could not be written for too long "
                 "(%zu rows are kept in memory at most)",
                 (unsigned long long)ss->rows_lost, ss->max_pending_rows);
        json_object_array_add(a, json_object_new_string(line));
    }
    return a;
}

int m_get_status(rpc_call *call, json_object *params, const rpc_peer *peer, void *u)
{
    daemon_ctx *ctx = u;
    snapshot *snap = sampler_snapshot(ctx->smp);
    daemon_status empty = {
        .host_measured_w = NAN, .drift = NAN, .untracked_cpu = NAN, .reads_skipped = NAN};
    const daemon_status *st = snap ? &snap->st : &empty;
    json_object *o, *db;
    store_stats ss;

    if (rpc_params_check(call, params, NULL, 0) < 0) {
        sampler_snapshot_unref(snap);
        return 0;
    }
    o = json_object_new_object();
    db = json_object_new_object();

    store_get_stats(ctx->st, &ss);
    json_object_object_add(o, "version", json_object_new_string(WATTPROF_VERSION));
    json_object_object_add(o, "started", json_object_new_double((double)ctx->started_ns / 1e9));
    json_object_object_add(o, "rate_hz", json_object_new_double(ctx->cfg->rate_hz));
    json_object_object_add(o, "achieved_hz", json_object_new_double(st->achieved_hz));
    json_object_object_add(
        o, "lateness_p50_ms",
        json_object_new_double(isfinite(st->lateness_p50_us) ? st->lateness_p50_us / 1e3 : 0));
    json_object_object_add(
        o, "lateness_p99_ms",
        json_object_new_double(isfinite(st->lateness_p99_us) ? st->lateness_p99_us / 1e3 : 0));
    json_object_object_add(
        o, "tick_p50_ms",
        json_object_new_double(isfinite(st->tick_p50_us) ? st->tick_p50_us / 1e3 : 0));
    json_object_object_add(
        o, "tick_p99_ms",
        json_object_new_double(isfinite(st->tick_p99_us) ? st->tick_p99_us / 1e3 : 0));
    json_object_object_add(o, "zones", zones_json(sampler_rapl(ctx->smp), snap ? st : NULL));
    json_object_object_add(o, "events", events_json(sampler_events(ctx->smp), snap ? st : NULL));
    pthread_mutex_lock(&ctx->lock);
    json_object_object_add(o, "model", methods_model_json(ctx->model, true, NAN));
    json_object_object_add(o, "calibration",
                           snap ? calibration_json(&st->calib, ctx->model) : NULL);
    pthread_mutex_unlock(&ctx->lock);
    json_object_object_add(o, "drift", methods_num_or_null(st->drift));
    json_object_object_add(o, "drift_flagged", json_object_new_boolean(st->drift_flagged));
    json_object_object_add(o, "tracked", json_object_new_int((int)st->tracked));
    json_object_object_add(o, "reads_skipped", methods_num_or_null(st->reads_skipped));
    json_object_object_add(o, "reads_unskippable", json_object_new_int((int)st->reads_unskippable));
    json_object_object_add(o, "backend", snap ? json_object_new_string(st->backend) : NULL);
    json_object_object_add(o, "backend_reason",
                           snap ? json_object_new_string(st->backend_why) : NULL);
    json_object_object_add(o, "procs_missed",
                           st->proc_connector ? json_object_new_int64((int64_t)st->procs_missed)
                                              : NULL);
    json_object_object_add(
        o, "connector_overruns",
        st->proc_connector ? json_object_new_int64((int64_t)st->connector_overruns) : NULL);
    json_object_object_add(o, "host", methods_host_json(st));
    json_object_object_add(db, "path", json_object_new_string(ctx->cfg->db_path));
    json_object_object_add(db, "size_bytes", json_object_new_int64(ss.db_bytes));
    json_object_object_add(db, "error", ss.error ? json_object_new_string(ss.error_text) : NULL);
    json_object_object_add(db, "commits", json_object_new_int64((int64_t)ss.commits));
    json_object_object_add(db, "flushes", json_object_new_int64((int64_t)ss.flushes));
    json_object_object_add(db, "flushes_shared", json_object_new_int64((int64_t)ss.flushes_shared));
    json_object_object_add(o, "database", db);
    json_object_object_add(o, "warnings", warnings_json(ctx, st, &ss));
    sampler_snapshot_unref(snap);
    json_object *reply = json_object_new_object();
    json_object_object_add(reply, "status", o);
    return rpc_reply(call, reply);
}
