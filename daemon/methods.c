/* methods: io.wattprof.Monitor, the daemon's Varlink interface
 * (lib/rpc/io.wattprof.Monitor.varlink has the types and their meaning).
 *
 * Live values come from the sampler's once-a-second snapshot; history from
 * the store through a read-only connection owned by the server thread.
 * Access: root and members of the configured group see everything; anyone
 * else sees only their own processes, at one-second resolution or coarser
 * (the kernel made energy_uj root-only because fine-grained power leaks
 * information). */
#include "daemon.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct subscriber {
    rpc_call *call;
    rpc_peer peer;
    double interval_s;
    int64_t next_ns;
    size_t limit;
    int64_t uid; /* filter, -1 = all visible */
    subscriber *next;
};

static int64_t now_s(void)
{
    return (int64_t)(util_now_ns(CLOCK_REALTIME) / 1000000000ull);
}

/* Now for the windows of queries: the clock stored rows are stamped with. */
static int64_t data_now_s(daemon_ctx *ctx)
{
    return sampler_now_ns(ctx->smp) / 1000000000;
}

static json_object *num_or_null(double v)
{
    return isfinite(v) ? json_object_new_double(v) : NULL;
}

static const char *class_name(const model *m, int k)
{
    if (k < 0 || (size_t)k >= m->n_classes)
        return "unknown";
    return m->classes[k].name ? m->classes[k].name : "all";
}

static json_object *strings_json(char *const *v, size_t n)
{
    json_object *a = json_object_new_array();
    for (size_t i = 0; i < n; i++)
        json_object_array_add(a, json_object_new_string(v[i]));
    return a;
}

/* The Model type; `loaded` is when it was last loaded (NAN: only on record). */
static json_object *model_json(const model *m, bool in_use, double loaded)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "name", json_object_new_string(m->name));
    json_object_object_add(o, "sha256", json_object_new_string(m->sha256));
    json_object_object_add(o, "engine", json_object_new_string(m->engine));
    json_object_object_add(o, "target", strings_json(m->target, m->n_target));
    json_object_object_add(o, "events", strings_json(m->events, m->n_events));
    json_object_object_add(o, "calibrated", json_object_new_boolean(m->training.present));
    json_object_object_add(
        o, "created", m->training.created ? json_object_new_string(m->training.created) : NULL);
    json_object_object_add(o, "cv_mape",
                           m->training.present ? num_or_null(m->training.cv_mape) : NULL);
    json_object_object_add(o, "in_use", json_object_new_boolean(in_use));
    json_object_object_add(o, "loaded", num_or_null(loaded));
    return o;
}

static void user_name(uid_t uid, char *buf, size_t len)
{
    struct passwd pw, *res = NULL;
    char tmp[1024];

    if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &res) == 0 && res)
        snprintf(buf, len, "%s", res->pw_name);
    else
        snprintf(buf, len, "%u", (unsigned)uid);
}

/* The names of the uids one reply shows: getpwuid_r reads /etc/passwd on
 * every call (a quarter of ListProcesses' time in the query-load profile),
 * and hundreds of processes have only a few owners. */
#define USER_CACHE_SLOTS 8
typedef struct user_cache {
    size_t n;
    uid_t uid[USER_CACHE_SLOTS];
    char name[USER_CACHE_SLOTS][64];
} user_cache;

static const char *cached_user(user_cache *c, uid_t uid)
{
    size_t i;

    for (i = 0; i < c->n; i++)
        if (c->uid[i] == uid)
            return c->name[i];
    i = c->n < USER_CACHE_SLOTS ? c->n++ : USER_CACHE_SLOTS - 1; /* full: reuse the last */
    c->uid[i] = uid;
    user_name(uid, c->name[i], sizeof(c->name[i]));
    return c->name[i];
}

static json_object *host_json(const daemon_status *st)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "measured_w", num_or_null(st->host_measured_w));
    json_object_object_add(o, "modeled_w", json_object_new_double(st->host_modeled_w));
    json_object_object_add(o, "idle_w", json_object_new_double(st->idle_w));
    double total = isfinite(st->host_measured_w) ? st->host_measured_w : st->host_modeled_w;
    json_object_object_add(
        o, "attributed_w",
        json_object_new_double(fmax(0, total - st->idle_w - st->unattributed_w)));
    json_object_object_add(o, "unattributed_w", json_object_new_double(st->unattributed_w));
    json_object_object_add(o, "untracked_cpu", num_or_null(st->untracked_cpu));
    json_object_object_add(o, "untracked_dynamic_w", num_or_null(st->untracked_w));
    return o;
}

/* A live process as the Process type, from the snapshot. */
static json_object *live_json(const live_proc *p, const model *m, user_cache *users)
{
    json_object *o = json_object_new_object();
    const char *user = cached_user(users, p->uid);

    json_object_object_add(o, "pid", json_object_new_int(p->pid));
    json_object_object_add(o, "start_time", json_object_new_double((double)p->start_time));
    json_object_object_add(o, "comm", json_object_new_string(p->comm));
    json_object_object_add(o, "cmdline", json_object_new_string(""));
    json_object_object_add(o, "uid", json_object_new_int((int)p->uid));
    json_object_object_add(o, "user", json_object_new_string(user));
    json_object_object_add(o, "cgroup", json_object_new_string(""));
    json_object_object_add(o, "class", json_object_new_string(class_name(m, p->klass)));
    json_object_object_add(o, "power_w", json_object_new_double(p->power_w));
    json_object_object_add(o, "energy_j", json_object_new_double(p->power_w));
    json_object_object_add(o, "cpu", json_object_new_double(p->cpu));
    json_object_object_add(o, "total_j", json_object_new_double(p->total_j));
    json_object_object_add(o, "standalone_j", json_object_new_double(p->total_standalone_j));
    json_object_object_add(o, "first_seen", json_object_new_double(0));
    json_object_object_add(o, "exited", NULL);
    return o;
}

/* A stored process as the Process type. */
static json_object *stored_json(const store_process *p, const model *m, double window_s,
                                bool windowed, user_cache *users)
{
    json_object *o = json_object_new_object();
    const char *user = cached_user(users, (uid_t)p->uid);

    json_object_object_add(o, "pid", json_object_new_int(p->pid));
    json_object_object_add(o, "start_time", json_object_new_double((double)p->start_time));
    json_object_object_add(o, "comm", json_object_new_string(p->comm ? p->comm : ""));
    json_object_object_add(o, "cmdline", json_object_new_string(p->cmdline ? p->cmdline : ""));
    json_object_object_add(o, "uid", json_object_new_int((int)p->uid));
    json_object_object_add(o, "user", json_object_new_string(user));
    json_object_object_add(o, "cgroup", json_object_new_string(p->cgroup ? p->cgroup : ""));
    json_object_object_add(o, "class", json_object_new_string(class_name(m, p->klass)));
    json_object_object_add(o, "power_w", json_object_new_double(windowed ? p->power_w : 0));
    json_object_object_add(
        o, "energy_j", json_object_new_double(windowed ? p->attributed_j : p->total_attributed_j));
    json_object_object_add(
        o, "cpu", json_object_new_double(windowed && window_s > 0 ? p->cpu_s / window_s : 0));
    json_object_object_add(o, "total_j", json_object_new_double(p->total_attributed_j));
    json_object_object_add(o, "standalone_j", json_object_new_double(p->total_standalone_j));
    json_object_object_add(o, "first_seen", json_object_new_double((double)p->first_seen));
    json_object_object_add(o, "exited",
                           p->exit_time ? json_object_new_double((double)p->exit_time) : NULL);
    return o;
}

/* How stale a query's view of the store may be.  The store already makes
 * every complete second visible once the next has begun (store.h); a query
 * also sees the second in progress up to this long ago.  Sharing one flush
 * per interval among all queries keeps the writer at about one extra commit a
 * second however many clients ask, instead of one per call
 * (tests/bench/query-load). */
#define QUERY_FRESHNESS_MS 1000

/* Commits what the sampler pushed, unless a flush under a second old did. */
static void sync_store(daemon_ctx *ctx)
{
    store_flush_within(ctx->st, QUERY_FRESHNESS_MS);
}

/* InvalidRegex for a comm pattern the store refused (-EINVAL).  The store
 * names the pattern in its message; the reason is asked again here, since
 * the client has the pattern and wants the regex library's words alone. */
static int invalid_regex(rpc_call *call, const char *pattern)
{
    char why[UTIL_ERRLEN] = "";
    json_object *e = json_object_new_object();

    util_regex_check(pattern, why, sizeof(why));
    json_object_object_add(e, "pattern", json_object_new_string(pattern));
    json_object_object_add(e, "reason", json_object_new_string(why));
    return rpc_error(call, "io.wattprof.Monitor.InvalidRegex", e);
}

static int storage_unavailable(rpc_call *call, const char *why)
{
    json_object *p = json_object_new_object();
    json_object_object_add(p, "reason", json_object_new_string(why));
    rpc_error(call, "io.wattprof.Monitor.StorageUnavailable", p);
    return -EIO;
}

/* The read-only connection of the queries.  While the writer cannot commit
 * (a full disk, a corrupt page) the database lags behind what was measured:
 * a query would look empty or stale, so it is StorageUnavailable instead. */
static int reader(daemon_ctx *ctx, rpc_call *call)
{
    char err[UTIL_ERRLEN];
    store_stats ss;

    store_get_stats(ctx->st, &ss);
    if (ss.error) {
        snprintf(err, sizeof(err), "%.400s (%llu rows wait in memory, %llu lost)", ss.error_text,
                 (unsigned long long)ss.pending_rows, (unsigned long long)ss.rows_lost);
        return storage_unavailable(call, err);
    }
    if (ctx->reader)
        return 0;
    store_flush(ctx->st);
    if (store_reader_open(ctx->cfg->db_path, &ctx->reader, err, sizeof(err)) < 0)
        return storage_unavailable(call, err);
    return 0;
}

static double param_double(json_object *params, const char *key, double dflt)
{
    json_object *v;
    if (json_object_object_get_ex(params, key, &v) && v)
        return json_object_get_double(v);
    return dflt;
}

static const char *param_string(json_object *params, const char *key)
{
    json_object *v;
    if (json_object_object_get_ex(params, key, &v) && v)
        return json_object_get_string(v);
    return NULL;
}

/* Every method's parameters as the interface declares them: a wrong type or
 * an unknown field is InvalidParameter naming it, before any handler reads
 * a value (json-c would otherwise turn "1" or {} into a number). */
#define CHECK_PARAMS(call, params, ...)                                                            \
    do {                                                                                           \
        static const rpc_param_spec spec_[] = {__VA_ARGS__};                                       \
        if (rpc_params_check(call, params, spec_, sizeof(spec_) / sizeof(spec_[0])) < 0)           \
            return 0;                                                                              \
    } while (0)
#define OPT(name_, type_)                                                                          \
    {                                                                                              \
        .name = name_, .type = RPC_T_##type_, .optional = true                                     \
    }
#define REQ(name_, type_)                                                                          \
    {                                                                                              \
        .name = name_, .type = RPC_T_##type_                                                       \
    }
/* A number in [lo, hi], optional or required. */
#define OPT_IN(name_, type_, lo, hi)                                                               \
    {                                                                                              \
        .name = name_, .type = RPC_T_##type_, .optional = true, .ranged = true, .min = lo,         \
        .max = hi                                                                                  \
    }
#define REQ_IN(name_, type_, lo, hi)                                                               \
    {                                                                                              \
        .name = name_, .type = RPC_T_##type_, .ranged = true, .min = lo, .max = hi                 \
    }

/* The ranges of the interface's numbers: what lies outside is a mistake
 * (or an attack), refused with InvalidParameter naming the field. */
#define P_UID_MAX 4294967294.0 /* (uid_t)-1 is no one */
#define P_PID_MAX 4194304.0    /* the kernel's PID_MAX_LIMIT */
#define P_TIME_MAX 1e10        /* seconds since the epoch: the year 2286 */
#define P_SPAN_MAX 1e9         /* seconds: 31 years */
#define P_LIMIT_MAX 100000.0   /* processes in one Subscribe reply (from memory) */
/* Stored processes in one ListProcesses reply: a page; the rest by offset.
 * A page of 1000 is about 0.3 MB of JSON (4 MB with the longest command
 * lines), where all of them could be tens of MB and seconds of the server
 * thread. */
#define P_PAGE_MAX 1000.0

/* An unprivileged caller asking about another uid: PermissionDenied, the
 * same answer from every method. */
static bool other_uid(json_object *params, const rpc_peer *peer)
{
    json_object *v;
    return !peer->privileged && json_object_object_get_ex(params, "uid", &v) && v &&
           json_object_get_int64(v) != (int64_t)peer->uid;
}

static bool param_present(json_object *params, const char *key)
{
    json_object *v;
    return json_object_object_get_ex(params, key, &v) && v;
}

/* ---- GetStatus ----------------------------------------------------------------- */

static json_object *calibration_json(const daemon_calib *c)
{
    json_object *o = json_object_new_object();
    bool fit = c->source == DAEMON_IDLE_FITTED || c->source == DAEMON_IDLE_STORED;
    const calib_fit *live = &c->live;

    json_object_object_add(o, "source", json_object_new_string(daemon_idle_source_name(c->source)));
    json_object_object_add(o, "idle_w", json_object_new_double(c->idle_w));
    json_object_object_add(o, "idle_se_w", fit ? num_or_null(c->best.idle_se_w) : NULL);
    json_object_object_add(o, "scale", fit ? num_or_null(c->best.scale) : NULL);
    json_object_object_add(o, "r2", fit ? num_or_null(c->best.r2) : NULL);
    json_object_object_add(o, "fitted", fit ? json_object_new_double((double)c->best.t) : NULL);
    json_object_object_add(o, "identifiable", json_object_new_boolean(live->identifiable));
    json_object_object_add(o, "reason", live->why ? json_object_new_string(live->why) : NULL);
    json_object_object_add(o, "rows", json_object_new_int64((int64_t)live->rows));
    json_object_object_add(o, "rejected", json_object_new_int64((int64_t)live->rejected));
    json_object_object_add(o, "spread_w", num_or_null(live->spread_w));
    json_object_object_add(o, "live_idle_w", num_or_null(live->idle_w));
    json_object_object_add(o, "live_idle_se_w", num_or_null(live->idle_se_w));
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
        json_object_object_add(z, "power_w",
                               st && st->zone_power_w ? num_or_null(st->zone_power_w[i]) : NULL);
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

static int m_get_status(rpc_call *call, json_object *params, const rpc_peer *peer, void *u)
{
    daemon_ctx *ctx = u;
    snapshot *snap = sampler_snapshot(ctx->smp);
    daemon_status empty = {
        .host_measured_w = NAN, .drift = NAN, .untracked_cpu = NAN, .reads_skipped = NAN};
    const daemon_status *st = snap ? &snap->st : &empty;
    json_object *o, *db;
    store_stats ss;

    if (rpc_params_check(call, params, NULL, 0) < 0) {
        snapshot_unref(snap);
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
    json_object_object_add(o, "model", model_json(ctx->model, true, NAN));
    pthread_mutex_unlock(&ctx->lock);
    json_object_object_add(o, "drift", num_or_null(st->drift));
    json_object_object_add(o, "drift_flagged", json_object_new_boolean(st->drift_flagged));
    json_object_object_add(o, "tracked", json_object_new_int((int)st->tracked));
    json_object_object_add(o, "reads_skipped", num_or_null(st->reads_skipped));
    json_object_object_add(o, "reads_unskippable", json_object_new_int((int)st->reads_unskippable));
    json_object_object_add(o, "backend", snap ? json_object_new_string(st->backend) : NULL);
    json_object_object_add(o, "procs_missed",
                           st->proc_connector ? json_object_new_int64((int64_t)st->procs_missed)
                                              : NULL);
    json_object_object_add(
        o, "connector_overruns",
        st->proc_connector ? json_object_new_int64((int64_t)st->connector_overruns) : NULL);
    json_object_object_add(o, "host", host_json(st));
    json_object_object_add(o, "calibration", snap ? calibration_json(&st->calib) : NULL);
    json_object_object_add(db, "path", json_object_new_string(ctx->cfg->db_path));
    json_object_object_add(db, "size_bytes", json_object_new_int64(ss.db_bytes));
    json_object_object_add(db, "error", ss.error ? json_object_new_string(ss.error_text) : NULL);
    json_object_object_add(db, "commits", json_object_new_int64((int64_t)ss.commits));
    json_object_object_add(db, "flushes", json_object_new_int64((int64_t)ss.flushes));
    json_object_object_add(db, "flushes_shared", json_object_new_int64((int64_t)ss.flushes_shared));
    json_object_object_add(o, "database", db);
    json_object_object_add(o, "warnings", warnings_json(ctx, st, &ss));
    snapshot_unref(snap);
    json_object *reply = json_object_new_object();
    json_object_object_add(reply, "status", o);
    return rpc_reply(call, reply);
}

/* ---- ListProcesses, GetProcess, GetHistory ------------------------------------ */

static int m_list_processes(rpc_call *call, json_object *params, const rpc_peer *peer, void *u)
{
    daemon_ctx *ctx = u;
    double window = param_double(params, "window_s", 10);
    const char *sort = param_string(params, "sort");
    store_process_query q = {.uid = -1, .sort = STORE_SORT_ENERGY};
    store_process *p;
    size_t n;
    char err[UTIL_ERRLEN];
    int r;

    CHECK_PARAMS(call, params, OPT_IN("window_s", FLOAT, 1, P_SPAN_MAX), OPT("sort", STRING),
                 OPT_IN("limit", INT, 0, P_PAGE_MAX), OPT_IN("uid", INT, 0, P_UID_MAX),
                 OPT("comm", STRING), OPT("include_exited", BOOL),
                 OPT_IN("offset", INT, 0, P_TIME_MAX));
    if (other_uid(params, peer))
        return rpc_error(call, RPC_ERR_PERMISSION_DENIED, NULL);
    if (sort && strcmp(sort, "power") == 0)
        q.sort = STORE_SORT_POWER;
    else if (sort && strcmp(sort, "cpu") == 0)
        q.sort = STORE_SORT_CPU;
    else if (sort && strcmp(sort, "energy") != 0)
        return rpc_error_invalid_parameter(call, "sort");
    q.until = data_now_s(ctx) + 1;
    q.since = q.until - (int64_t)ceil(window);
    size_t page = (size_t)param_double(params, "limit", 0);
    page = page ? page : (size_t)P_PAGE_MAX;
    q.limit = page + 1; /* one more: is there a next page? */
    q.offset = (size_t)param_double(params, "offset", 0);
    q.uid = param_present(params, "uid") ? (int64_t)param_double(params, "uid", -1) : -1;
    if (!peer->privileged)
        q.uid = peer->uid; /* others see only their own */
    q.comm_regex = param_string(params, "comm");
    /* Exited processes are listed unless asked not to. */
    q.only_running = param_present(params, "include_exited") &&
                     !json_object_get_boolean(json_object_object_get(params, "include_exited"));
    if ((r = reader(ctx, call)) < 0)
        return 0;
    sync_store(ctx);
    r = store_list_processes(ctx->reader, &q, &p, &n, err, sizeof(err));
    if (r == -EINVAL && q.comm_regex)
        return invalid_regex(call, q.comm_regex);
    if (r < 0)
        return r;
    json_object *a = json_object_new_array(), *reply = json_object_new_object();
    user_cache users = {0};
    bool more = n > page;
    n = more ? page : n;
    pthread_mutex_lock(&ctx->lock);
    for (size_t i = 0; i < n; i++)
        json_object_array_add(
            a, stored_json(&p[i], ctx->model, (double)(q.until - q.since), true, &users));
    pthread_mutex_unlock(&ctx->lock);
    store_processes_free(p, more ? n + 1 : n);
    json_object_object_add(reply, "window_s", json_object_new_double((double)(q.until - q.since)));
    json_object_object_add(reply, "processes", a);
    json_object_object_add(reply, "next_offset",
                           more ? json_object_new_int64((int64_t)(q.offset + n)) : NULL);
    return rpc_reply(call, reply);
}

static int no_such_process(rpc_call *call, int pid)
{
    json_object *e = json_object_new_object();
    json_object_object_add(e, "pid", json_object_new_int(pid));
    return rpc_error(call, "io.wattprof.Monitor.NoSuchProcess", e);
}

static int m_get_process(rpc_call *call, json_object *params, const rpc_peer *peer, void *u)
{
    daemon_ctx *ctx = u;
    int pid = (int)param_double(params, "pid", -1);
    double series_s = param_double(params, "series_s", 60);
    store_process p;
    store_second *ser;
    size_t n;
    char err[UTIL_ERRLEN];

    CHECK_PARAMS(call, params, REQ_IN("pid", INT, 1, P_PID_MAX),
                 OPT_IN("series_s", FLOAT, 1, P_SPAN_MAX));
    if (reader(ctx, call) < 0)
        return 0;
    sync_store(ctx);
    int r =
        store_get_process(ctx->reader, pid, 0, (int64_t)series_s, &p, &ser, &n, err, sizeof(err));
    if (r == -ENOENT)
        return no_such_process(call, pid);
    if (r < 0)
        return r;
    if (!peer->privileged && p.uid != (int64_t)peer->uid) {
        store_process_free(&p);
        free(ser);
        return no_such_process(call, pid); /* not theirs: as if absent */
    }
    json_object *reply = json_object_new_object(), *classes = json_object_new_array();
    json_object *series = json_object_new_array();
    pthread_mutex_lock(&ctx->lock);
    int last = -2;
    for (size_t i = 0; i < n; i++) {
        json_object *smp = json_object_new_object();
        if (ser[i].klass != last) {
            json_object *c = json_object_new_object();
            json_object_object_add(c, "t", json_object_new_double((double)ser[i].t));
            json_object_object_add(c, "class",
                                   json_object_new_string(class_name(ctx->model, ser[i].klass)));
            json_object_array_add(classes, c);
            last = ser[i].klass;
        }
        json_object_object_add(smp, "t", json_object_new_double((double)ser[i].t));
        json_object_object_add(smp, "energy_j", json_object_new_double(ser[i].attributed_j));
        json_object_object_add(smp, "power_w", json_object_new_double(ser[i].attributed_j));
        json_object_object_add(smp, "cpu", json_object_new_double(ser[i].cpu_s));
        json_object_object_add(smp, "measured_j", NULL);
        json_object_array_add(series, smp);
    }
    user_cache users = {0};
    json_object_object_add(reply, "process", stored_json(&p, ctx->model, 0, false, &users));
    json_object_object_add(reply, "classes", classes);
    json_object_object_add(reply, "series", series);
    json_object_object_add(reply, "model", model_json(ctx->model, true, NAN));
    pthread_mutex_unlock(&ctx->lock);
    store_process_free(&p);
    free(ser);
    return rpc_reply(call, reply);
}

static int history_query(daemon_ctx *ctx, rpc_call *call, json_object *params, const rpc_peer *peer,
                         store_history_query *q)
{
    int kinds = param_present(params, "pid") + param_present(params, "comm") +
                param_present(params, "uid") +
                (param_present(params, "host") &&
                 json_object_get_boolean(json_object_object_get(params, "host")));

    if (kinds != 1) {
        rpc_error_invalid_parameter_why(call, "pid",
                                        "exactly one of pid, comm, uid or host: true is needed, "
                                        "%d given",
                                        kinds);
        return -EINVAL;
    }
    q->since = (int64_t)floor(param_double(params, "since", 0));
    q->until = (int64_t)ceil(param_double(params, "until", (double)data_now_s(ctx) + 1));
    if (q->until <= q->since) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "since", json_object_new_double((double)q->since));
        json_object_object_add(e, "until", json_object_new_double((double)q->until));
        json_object_object_add(e, "reason", json_object_new_string("until is not after since"));
        rpc_error(call, "io.wattprof.Monitor.InvalidTimeRange", e);
        return -EINVAL;
    }
    double step = param_double(params, "step_s", ceil((double)(q->until - q->since) / 1000));
    if (!(step >= 1) && !(peer->privileged && step > 0)) {
        rpc_error_invalid_parameter_why(call, "step_s", "step_s is %g, not %s", step,
                                        peer->privileged ? "above 0" : "1 or more");
        return -EINVAL;
    }
    q->step = step < 1 ? 1 : (int64_t)step;
    if (param_present(params, "pid")) {
        q->by = STORE_HISTORY_PID;
        q->pid = (pid_t)param_double(params, "pid", 0);
    } else if (param_present(params, "comm")) {
        q->by = STORE_HISTORY_COMM;
        q->comm = param_string(params, "comm");
    } else if (param_present(params, "uid")) {
        q->by = STORE_HISTORY_UID;
        q->uid = (int64_t)param_double(params, "uid", -1);
    } else {
        q->by = STORE_HISTORY_HOST;
    }
    if (!peer->privileged && q->by == STORE_HISTORY_UID && q->uid != (int64_t)peer->uid) {
        rpc_error(call, RPC_ERR_PERMISSION_DENIED, NULL);
        return -EPERM;
    }
    return 0;
}

static int m_get_history(rpc_call *call, json_object *params, const rpc_peer *peer, void *u)
{
    daemon_ctx *ctx = u;
    store_history_query q = {0};
    store_point *pts;
    size_t n;
    char err[UTIL_ERRLEN];
    int r;

    CHECK_PARAMS(call, params, OPT_IN("pid", INT, 1, P_PID_MAX), OPT("comm", STRING),
                 OPT_IN("uid", INT, 0, P_UID_MAX), OPT("host", BOOL),
                 REQ_IN("since", FLOAT, 0, P_TIME_MAX), OPT_IN("until", FLOAT, 0, P_TIME_MAX),
                 OPT_IN("step_s", FLOAT, 0, P_SPAN_MAX));
    if (history_query(ctx, call, params, peer, &q) < 0)
        return 0;
    if (reader(ctx, call) < 0)
        return 0;
    if (!peer->privileged && (q.by == STORE_HISTORY_PID || q.by == STORE_HISTORY_COMM)) {
        /* Unprivileged: a pid or command history only over their own uid. */
        if (q.by == STORE_HISTORY_PID) {
            store_process p;
            store_second *ser = NULL;
            size_t ns;
            r = store_get_process(ctx->reader, q.pid, 0, 0, &p, &ser, &ns, err, sizeof(err));
            bool mine = r == 0 && p.uid == (int64_t)peer->uid;
            if (r == 0)
                store_process_free(&p);
            free(ser);
            if (!mine)
                return no_such_process(call, q.pid);
        } else {
            /* A command spans users; per-user narrowing is not offered. */
            return rpc_error(call, RPC_ERR_PERMISSION_DENIED, NULL);
        }
    }
    sync_store(ctx);
    r = store_history(ctx->reader, &q, &pts, &n, err, sizeof(err));
    if (r == -EINVAL && q.by == STORE_HISTORY_COMM)
        return invalid_regex(call, q.comm);
    if (r < 0) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "reason", json_object_new_string(err));
        return rpc_error(call, "io.wattprof.Monitor.StorageUnavailable", e);
    }
    json_object *a = json_object_new_array(), *reply = json_object_new_object();
    for (size_t i = 0; i < n; i++) {
        json_object *s = json_object_new_object();
        bool host = q.by == STORE_HISTORY_HOST;
        double e = host ? pts[i].host_j : pts[i].attributed_j;
        json_object_object_add(s, "t", json_object_new_double((double)pts[i].t));
        json_object_object_add(s, "energy_j", json_object_new_double(e));
        json_object_object_add(s, "power_w", json_object_new_double(e / (double)q.step));
        json_object_object_add(s, "cpu", json_object_new_double(pts[i].cpu_s / (double)q.step));
        /* Measured only when RAPL measured every second of the bucket. */
        json_object_object_add(s, "measured_j", host && pts[i].measured
                                                    ? json_object_new_double(pts[i].host_j)
                                                    : NULL);
        json_object_array_add(a, s);
    }
    free(pts);
    json_object_object_add(reply, "step_s", json_object_new_double((double)q.step));
    json_object_object_add(reply, "samples", a);
    return rpc_reply(call, reply);
}

/* ---- Subscribe ------------------------------------------------------------------- */

static int m_subscribe(rpc_call *call, json_object *params, const rpc_peer *peer, void *u)
{
    daemon_ctx *ctx = u;
    double interval = param_double(params, "interval_s", 1);
    subscriber *sub;

    CHECK_PARAMS(call, params, OPT_IN("interval_s", FLOAT, 0, 86400),
                 OPT_IN("limit", INT, 0, P_LIMIT_MAX), OPT_IN("uid", INT, 0, P_UID_MAX));
    if (!rpc_call_more(call))
        return rpc_error(call, RPC_ERR_EXPECTED_MORE, NULL);
    if (other_uid(params, peer))
        return rpc_error(call, RPC_ERR_PERMISSION_DENIED, NULL);
    if (!(interval > 0) || (!peer->privileged && interval < 1))
        return rpc_error_invalid_parameter_why(call, "interval_s", "interval_s is %g, not %s",
                                               interval,
                                               peer->privileged ? "above 0" : "1 or more");
    if (!(sub = calloc(1, sizeof(*sub))))
        return -ENOMEM;
    sub->call = rpc_call_ref(call);
    sub->peer = *peer;
    sub->interval_s = interval;
    sub->limit = (size_t)fmax(0, param_double(params, "limit", 10));
    sub->uid = param_present(params, "uid") ? (int64_t)param_double(params, "uid", -1) : -1;
    if (!peer->privileged)
        sub->uid = peer->uid;
    pthread_mutex_lock(&ctx->lock);
    sub->next = ctx->subs;
    ctx->subs = sub;
    pthread_mutex_unlock(&ctx->lock);
    return 0;
}

static int cmp_power(const void *a, const void *b)
{
    double x = ((const live_proc *)a)->power_w, y = ((const live_proc *)b)->power_w;
    return (x < y) - (x > y);
}

static json_object *subscription_reply(const subscriber *sub, const snapshot *snap, const model *m)
{
    json_object *o = json_object_new_object(), *a = json_object_new_array();
    user_cache users = {0};
    size_t shown = 0;

    json_object_object_add(o, "t", json_object_new_double((double)snap->t_ns / 1e9));
    json_object_object_add(o, "host", host_json(&snap->st));
    for (size_t i = 0; i < snap->n_procs && (sub->limit == 0 || shown < sub->limit); i++) {
        if (sub->uid >= 0 && snap->procs[i].uid != (uid_t)sub->uid)
            continue;
        json_object_array_add(a, live_json(&snap->procs[i], m, &users));
        shown++;
    }
    json_object_object_add(o, "processes", a);
    return o;
}

void methods_publish(daemon_ctx *ctx)
{
    snapshot *snap = sampler_snapshot(ctx->smp);
    int64_t now = (int64_t)util_now_ns(CLOCK_MONOTONIC);

    if (!snap)
        return;
    qsort(snap->procs, snap->n_procs, sizeof(live_proc), cmp_power);
    pthread_mutex_lock(&ctx->lock);
    for (subscriber **pp = &ctx->subs; *pp;) {
        subscriber *sub = *pp;
        if (rpc_call_closed(sub->call)) {
            *pp = sub->next;
            rpc_call_unref(sub->call);
            free(sub);
            continue;
        }
        if (now >= sub->next_ns) {
            rpc_reply_more(sub->call, subscription_reply(sub, snap, ctx->model));
            sub->next_ns = now + (int64_t)(sub->interval_s * 1e9);
        }
        pp = &sub->next;
    }
    pthread_mutex_unlock(&ctx->lock);
    snapshot_unref(snap);
}

/* ---- Models ---------------------------------------------------------------------- */

static int m_list_models(rpc_call *call, json_object *params, const rpc_peer *peer, void *u)
{
    daemon_ctx *ctx = u;
    store_model_row *rows;
    size_t n;
    char err[UTIL_ERRLEN];

    if (rpc_params_check(call, params, NULL, 0) < 0)
        return 0;
    if (reader(ctx, call) < 0)
        return 0;
    sync_store(ctx);
    if (store_list_models(ctx->reader, &rows, &n, err, sizeof(err)) < 0)
        return -EIO;
    json_object *a = json_object_new_array(), *reply = json_object_new_object();
    pthread_mutex_lock(&ctx->lock);
    json_object_array_add(a, model_json(ctx->model, true, NAN));
    for (size_t i = 0; i < n; i++) {
        model *m;
        if (strcmp(rows[i].sha256, ctx->model->sha256) == 0 ||
            model_parse(rows[i].json, strlen(rows[i].json), rows[i].name, &m, err, sizeof(err)) < 0)
            continue;
        json_object_array_add(a, model_json(m, false, (double)rows[i].last_loaded));
        model_free(m);
    }
    pthread_mutex_unlock(&ctx->lock);
    store_models_free(rows, n);
    json_object_object_add(reply, "models", a);
    return rpc_reply(call, reply);
}

int methods_load_model(daemon_ctx *ctx, const char *path, model **for_sampler, int32_t *model_id,
                       char *err, size_t errlen)
{
    const char *origin = path ? path : "built-in cputime.json";
    model *m = NULL, *desc = NULL;
    char *json;
    size_t len;
    int r;

    /* Parse from the bytes we keep, so the hash names exactly what the store
     * records. */
    if (path && (r = util_read_file(path, &json, &len)) < 0)
        return util_err(err, errlen, r, "%s: cannot read model: %s", path, strerror(-r));
    if (!path && !(json = strdup(model_default_text())))
        return -ENOMEM;
    r = model_parse(json, strlen(json), origin, &m, err, errlen);
    if (r == 0)
        r = model_parse(json, strlen(json), origin, &desc, err, errlen);
    if (r == 0)
        r = store_model_add(ctx->st, m->sha256, m->name, m->engine, json, model_id, err, errlen);
    if (r == 0 && ctx->smp)
        r = sampler_set_model(ctx->smp, m, *model_id, err, errlen);
    if (r < 0) {
        free(json);
        model_free(m);
        model_free(desc);
        return r;
    }
    /* The server keeps its own description; the sampler owns `m`. */
    pthread_mutex_lock(&ctx->lock);
    model_free(ctx->model);
    ctx->model = desc;
    free(ctx->model_json);
    ctx->model_json = json;
    pthread_mutex_unlock(&ctx->lock);
    if (for_sampler)
        *for_sampler = m;
    return 0;
}

static int m_reload_models(rpc_call *call, json_object *params, const rpc_peer *peer, void *u)
{
    daemon_ctx *ctx = u;
    const char *path = param_string(params, "path");
    char err[UTIL_ERRLEN];
    int32_t id;

    CHECK_PARAMS(call, params, OPT("path", STRING));
    /* An unprivileged wattprofd serves its owner's processes only; its owner
     * may choose its model. */
    if (!peer->privileged && peer->uid != geteuid())
        return rpc_error(call, RPC_ERR_PERMISSION_DENIED, NULL);
    if (!path)
        path = ctx->cfg->model_path;
    if (methods_load_model(ctx, path, NULL, &id, err, sizeof(err)) < 0) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "path", json_object_new_string(path ? path : "built-in"));
        json_object_object_add(e, "reason", json_object_new_string(err));
        log_warning("ReloadModels refused: %s", err);
        return rpc_error(call, "io.wattprof.Monitor.ModelLoadFailed", e);
    }
    json_object *reply = json_object_new_object();
    pthread_mutex_lock(&ctx->lock);
    log_info("model %s (sha256 %.12s) loaded", ctx->model->name, ctx->model->sha256);
    json_object_object_add(reply, "model", model_json(ctx->model, true, (double)now_s()));
    pthread_mutex_unlock(&ctx->lock);
    return rpc_reply(call, reply);
}

int methods_register(daemon_ctx *ctx, rpc_server *srv, char *err, size_t errlen)
{
    static const struct {
        const char *name;
        rpc_method_fn fn;
    } methods[] = {
        {"io.wattprof.Monitor.GetStatus", m_get_status},
        {"io.wattprof.Monitor.ListProcesses", m_list_processes},
        {"io.wattprof.Monitor.GetProcess", m_get_process},
        {"io.wattprof.Monitor.GetHistory", m_get_history},
        {"io.wattprof.Monitor.Subscribe", m_subscribe},
        {"io.wattprof.Monitor.ListModels", m_list_models},
        {"io.wattprof.Monitor.ReloadModels", m_reload_models},
    };
    int r = rpc_server_add_interface(srv, rpc_monitor_interface, err, errlen);

    for (size_t i = 0; r == 0 && i < sizeof(methods) / sizeof(methods[0]); i++)
        r = rpc_server_add_method(srv, methods[i].name, methods[i].fn, ctx);
    return r;
}

void methods_free(daemon_ctx *ctx)
{
    while (ctx->subs) {
        subscriber *s = ctx->subs;
        ctx->subs = s->next;
        rpc_call_unref(s->call);
        free(s);
    }
    store_reader_close(ctx->reader);
    model_free(ctx->model);
    free(ctx->model_json);
}
