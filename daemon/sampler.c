/* sampler: the 50 Hz loop of wattprofd, and the sampler's public calls.
 *
 * Each tick (tick(), a page of calls into the other parts, listed in
 * sampler-internal.h): take a new model, find processes (proctable.c),
 * read RAPL and every tracked process's counters, or the next tick of a
 * replay (reading.c), attribute the tick's energy with the model
 * (accounting.c), push its rows to the store's queue, and once a second
 * publish a snapshot for the socket (publish.c). Here too: setup and
 * teardown, the timer loop and the replay loop, the clock rows are stamped
 * with, and model swaps. The loop owns all of this state; other threads
 * only ever see published snapshots, so nothing here takes a lock another
 * thread could hold for long. */
#include "sampler-internal.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* ---- the event set and the model ------------------------------------------- */

/* Model event j is event map[j] of the open set; every model event must be
 * there (a replay can only apply models whose events it recorded). */
static int map_model(const sample_eventset *es, const model *m, int **out, char *err, size_t errlen)
{
    int *map = calloc(m->n_events, sizeof(int));

    if (!map)
        return -ENOMEM;
    for (size_t j = 0; j < m->n_events; j++) {
        map[j] = events_find(es, m->events[j]);
        if (map[j] < 0) {
            free(map);
            return util_err(err, errlen, -EINVAL, "model '%s' needs event '%s', which is not %s",
                            m->name, m->events[j], "in the sampled event set");
        }
    }
    *out = map;
    return 0;
}

/* The set we open: the model's events plus task-clock for CPU time. */
static int open_events(sampler *s, char *err, size_t errlen)
{
    const char *names[s->m->n_events + 1];
    size_t n = 0;
    int r;

    for (size_t j = 0; j < s->m->n_events; j++)
        names[n++] = s->m->events[j];
    bool have_clock = false;
    for (size_t j = 0; j < n; j++)
        have_clock |= strcmp(names[j], "perf::TASK-CLOCK") == 0;
    if (!have_clock)
        names[n++] = "perf::TASK-CLOCK";
    if ((r = events_encode(names, n, &s->es, err, errlen)) < 0)
        return r;
    return events_probe(s->es, err, errlen);
}

static int replay_events(sampler *s, char *err, size_t errlen)
{
    const trace_header *h = trace_reader_header(s->rep);
    sample_eventset *es = calloc(1, sizeof(*es));

    /* A replay needs names, not encodings: the set is a list of names. */
    if (!es || !(es->ev = calloc(h->n_events, sizeof(*es->ev)))) {
        free(es);
        return -ENOMEM;
    }
    es->n = h->n_events;
    for (size_t i = 0; i < h->n_events; i++)
        if (!(es->ev[i].name = strdup(h->events[i]))) {
            events_free(es);
            return -ENOMEM;
        }
    s->es = es;
    return 0;
}

/* ---- the clock ----------------------------------------------------------------- */

/* Wall-clock time of the current replayed tick: the recording's own, or,
 * for a recording that does not say, as if it had started now. */
static int64_t replay_time(sampler *s)
{
    if (s->replay_offset == 0)
        s->replay_offset = sampler_realtime_ns() - (int64_t)s->replay_t0;
    return (int64_t)s->last_ns + s->replay_offset;
}

/* Wall-clock time of a live tick read at CLOCK_MONOTONIC mono: the
 * monotonic time plus the largest realtime offset seen. NTP slews both
 * clocks alike, so the offset moves only when CLOCK_REALTIME is stepped:
 * a step forward is followed, a step back is not (until a restart), or
 * later ticks would be stored in seconds already written, and stored
 * time would run backwards. */
static int64_t live_time(sampler *s, uint64_t mono)
{
    int64_t off = sampler_realtime_ns() - (int64_t)util_now_ns(CLOCK_MONOTONIC);

    bool behind = s->wall_offset && off < s->wall_offset - 1000000000;

    if (behind && !s->wall_behind)
        log_warning("CLOCK_REALTIME stepped back %.1f s: stored times keep running forward",
                    (double)(s->wall_offset - off) / 1e9);
    s->wall_behind = behind;
    if (off > s->wall_offset) {
        s->wall_offset = off;
        atomic_store(&s->wall_offset_pub, off);
    }
    return (int64_t)mono + s->wall_offset;
}

/* Now, for stored rows: the wall clock, or a replay's own timeline. */
int64_t sampler_clock(sampler *s)
{
    if (s->rep)
        return replay_time(s);
    /* Inside a tick: its own time, so that records are pushed in order. */
    return s->woke_realtime ? s->woke_realtime : sampler_realtime_ns();
}

/* ---- the loop ----------------------------------------------------------------- */

static void take_pending_model(sampler *s)
{
    if (pthread_mutex_trylock(&s->pending_lock) != 0)
        return;
    if (s->pending) {
        /* What the old model booked for sleeping processes is theirs. */
        for (size_t i = 0; i < s->n; i++)
            account_settle_idle(s, s->procs[i]);
        model_free(s->m);
        free(s->model_map);
        s->m = s->pending;
        s->model_id = s->pending_id;
        s->model_map = s->pending_map;
        s->pending = NULL;
        s->pending_map = NULL;
        s->model_changed = true;
        account_zero_rates(s);
        /* The fit is of the old model's dynamic power; idle is the node's
         * and stays, for the same domains. */
        calib_reset(s->fit);
        if (eventcal_setup(s) < 0)
            s->cal.events_why = "out of memory";
        /* As at start: the node's stored per-event fit of the model, unless
         * this run keeps a newer one of it. */
        if (s->pending_evcal_set && s->pending_evcal.t > s->cal.ev_best.t)
            sampler_set_stored_evcal(s, &s->pending_evcal);
        s->pending_evcal_set = false;
        char target[sizeof(s->cal.best.target)];
        model_target_key(s->m, target, sizeof(target));
        if (strcmp(target, s->cal.best.target) != 0)
            s->cal.best.t = 0;
        for (size_t i = 0; i < s->n; i++) {
            struct tracked *t = s->procs[i];
            t->class_stat = 0;
            t->klass = s->zero_class;
            account_mark_idle(s, t);
        }
    }
    pthread_mutex_unlock(&s->pending_lock);
}

/* Processes: the proc connector's events so far (for at most a quarter
 * of a tick), and a rescan of /proc when one is due. */
static void find_processes(sampler *s, uint64_t woke)
{
    proctable_drain_events(s, woke + s->period_ns / 4);
    if (woke >= s->next_rescan_ns) {
        proctable_rescan(s);
        s->next_rescan_ns = woke + (uint64_t)(s->rescan_s * 1e9);
    }
}

/* Counters and RAPL since the previous reading, recorded with --record;
 * returns the interval they cover. A tick is the interval between two
 * readings, stamped when it reads: a rescan before it can take long, and
 * RAPL and the counters must cover the interval the tick's row says. */
static uint64_t read_live(sampler *s)
{
    uint64_t now = util_now_ns(CLOCK_MONOTONIC), dt_ns = now - s->last_read_ns;

    s->woke_realtime = live_time(s, now);
    s->last_read_ns = now;
    reading_hardware(s);
    if (s->rec)
        reading_record_tick(s, now, dt_ns);
    return dt_ns;
}

/* One tick. A replay has read its tick already (dt_ns); a live tick reads
 * the hardware here. Its rows are stamped when it read the hardware (the
 * same instant as its recording's, so a replay keys it to the same second),
 * or in a replay on the recording's own timeline. */
static void tick(sampler *s, uint64_t dt_ns, uint64_t woke)
{
    attrib_tick at;

    take_pending_model(s);
    if (!s->rep) {
        find_processes(s, woke);
        dt_ns = read_live(s);
    }
    int64_t t_ns = sampler_clock(s);
    account_tick(s, (double)dt_ns / 1e9, &at);
    publish_tick(s, t_ns, &at);
    reading_clear_active(s);
    if (!s->rep)
        proctable_reap(s);
    atomic_fetch_add(&s->ticks, 1);
    if (s->second_ticks >= (unsigned)llround(s->cfg->rate_hz))
        publish_second(s);
}

static int replay_pace(sampler *s)
{
    if (s->cfg->replay_speed <= 0)
        return 0;
    uint64_t due =
        s->replay_wall0 + (uint64_t)((double)(s->last_ns - s->replay_t0) / s->cfg->replay_speed);
    struct timespec ts = {(time_t)(due / 1000000000ull), (long)(due % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
    return 0;
}

/* A replay has no deadline: at --speed max it would outrun the store's
 * writer and have records dropped, so it waits for room for a tick's records
 * (one per process and zone, calibration, new and exited processes). */
static void replay_wait_store(sampler *s, size_t capacity)
{
    size_t need = 2 * (s->n + s->power->n) + MODEL_MAX_CLASSES * (s->m->n_events / 5 + 1) + 64;
    struct timespec ms = {0, 1000000};

    if (need > capacity / 2)
        need = capacity / 2;
    while (store_push_room(s->st) < need && !atomic_load(&s->stop))
        nanosleep(&ms, NULL);
}

static void *replay_loop(void *arg)
{
    sampler *s = arg;
    uint64_t dt_ns;
    store_stats ss;

    store_get_stats(s->st, &ss);
    s->replay_wall0 = util_now_ns(CLOCK_MONOTONIC);
    while (!atomic_load(&s->stop)) {
        replay_wait_store(s, ss.queue_capacity);
        if (reading_replay(s, &dt_ns) != 1)
            break;
        replay_pace(s);
        tick(s, dt_ns, s->last_ns);
    }
    if (s->second_ticks)
        publish_second(s);
    s->replay_done = true;
    log_info("replay of %s finished after %llu ticks", s->cfg->replay_path,
             (unsigned long long)atomic_load(&s->ticks));
    return NULL;
}

/* [sampler] priority: on a busy machine a normal thread can wait a few ms
 * in the run queue after its timer fires; a real-time one does not. Only
 * this thread: the store writer and the socket stay ordinary. */
static void set_priority(const sampler *s)
{
    struct sched_param sp = {.sched_priority = s->cfg->sampler_priority};
    int r;

    if (sp.sched_priority == 0)
        return;
    r = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
    if (r != 0)
        log_warning("[sampler] priority %d: %s; the sampling thread keeps normal scheduling "
                    "(it needs CAP_SYS_NICE or LimitRTPRIO=)",
                    sp.sched_priority, strerror(r));
    else
        log_info("sampling thread: SCHED_FIFO priority %d", sp.sched_priority);
}

static void *hardware_loop(void *arg)
{
    sampler *s = arg;
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    struct itimerspec its = {0};

    set_priority(s);
    if (tfd < 0) {
        log_error("timerfd_create: %s", strerror(errno));
        return NULL;
    }
    /* The first tick's deltas start here, not when RAPL and the counters
     * were opened: setup time would otherwise land in a 20 ms tick. */
    reading_hardware(s);
    s->last_ns = s->last_read_ns = util_now_ns(CLOCK_MONOTONIC);
    s->next_deadline = s->last_ns + s->period_ns;
    its.it_value.tv_sec = (time_t)(s->next_deadline / 1000000000ull);
    its.it_value.tv_nsec = (long)(s->next_deadline % 1000000000ull);
    its.it_interval.tv_sec = (time_t)(s->period_ns / 1000000000ull);
    its.it_interval.tv_nsec = (long)(s->period_ns % 1000000000ull);
    timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
    while (!atomic_load(&s->stop)) {
        /* Process events are handled as they come, between ticks: a child
         * that lives 5 ms must have its counters open before it exits.
         * A backend that drains counts it from its fork without help, and
         * (bpf) tells of the events itself at the tick: no connector. */
        int wfd = s->watch && !s->be->drain ? procs_watch_fd(s->watch) : -1;
        struct pollfd pfd[2] = {{.fd = tfd, .events = POLLIN}, {.fd = wfd, .events = POLLIN}};
        uint64_t expirations;
        if (poll(pfd, 2, 200) <= 0)
            continue;
        if (!(pfd[0].revents & POLLIN)) {
            proctable_drain_events(s, s->next_deadline - s->period_ns / 10);
            continue;
        }
        if (read(tfd, &expirations, sizeof(expirations)) < 0)
            continue;
        uint64_t woke = util_now_ns(CLOCK_MONOTONIC);
        /* The deadline this wake-up serves is the latest one that passed. */
        s->next_deadline += (expirations - 1) * s->period_ns;
        stats_ring_add(&s->lateness, (double)(woke - s->next_deadline));
        stats_hist_add(&s->late_hist, (double)(woke - s->next_deadline));
        s->next_deadline += s->period_ns;
        tick(s, woke - s->last_ns, woke);
        s->last_ns = woke;
        uint64_t work = util_now_ns(CLOCK_MONOTONIC) - woke;
        stats_ring_add(&s->tick_work, (double)work);
        stats_hist_add(&s->work_hist, (double)work);
    }
    close(tfd);
    return NULL;
}

/* ---- setup ---------------------------------------------------------------------- */

static int open_sources(sampler *s, char *err, size_t errlen)
{
    int r;

    if (s->cfg->replay_path) {
        if ((r = trace_reader_open(s->cfg->replay_path, &s->rep, err, errlen)) < 0)
            return r;
        const trace_header *h = trace_reader_header(s->rep);
        if (!(s->power = calloc(1, sizeof(*s->power))) ||
            !(s->power->zone = calloc(h->n_zones + 1, sizeof(rapl_zone))))
            return -ENOMEM;
        s->power->n = h->n_zones;
        for (size_t z = 0; z < h->n_zones; z++) {
            rapl_zone *zn = &s->power->zone[z];
            snprintf(zn->id, sizeof(zn->id), "%s", h->zone_id[z]);
            snprintf(zn->name, sizeof(zn->name), "%s", h->zone_name[z]);
            snprintf(zn->domain, sizeof(zn->domain), "%.*s", (int)strcspn(zn->name, "-"), zn->name);
        }
        snprintf(s->power->state, sizeof(s->power->state), "replay of %s: %zu zones",
                 s->cfg->replay_path, h->n_zones);
        s->replay_offset = h->realtime_offset_ns;
        return replay_events(s, err, errlen);
    }
    if ((r = open_events(s, err, errlen)) < 0)
        return r;
    if ((r = rapl_open(&s->power)) < 0)
        return util_err(err, errlen, r, "reading RAPL zones: %s", strerror(-r));
    s->rescan_s = s->cfg->rescan_s;
    procs_boot_id(s->boot_id);
    if (s->cfg->record_path) {
        trace_header h = {.events = NULL,
                          .n_events = s->es->n,
                          .n_zones = s->power->n,
                          .rate_hz = s->cfg->rate_hz};
        char *names[s->es->n], *ids[s->power->n + 1], *zn[s->power->n + 1];
        for (size_t i = 0; i < s->es->n; i++)
            names[i] = s->es->ev[i].name;
        for (size_t z = 0; z < s->power->n; z++) {
            ids[z] = s->power->zone[z].id;
            zn[z] = s->power->zone[z].name;
        }
        h.events = names;
        h.zone_id = ids;
        h.zone_name = zn;
        memcpy(h.boot_id, s->boot_id, sizeof(h.boot_id));
        h.realtime_offset_ns =
            (int64_t)util_now_ns(CLOCK_REALTIME) - (int64_t)util_now_ns(CLOCK_MONOTONIC);
        if ((r = trace_writer_open(s->cfg->record_path, &h, &s->rec, err, errlen)) < 0)
            return r;
    }
    return 0;
}

/* [sampler] backend: perf when asked; bpf when asked or on auto, where it
 * loads (kernel, BTF, CAP_BPF and CAP_PERFMON): it counts every process,
 * however short, at a fraction of perf's cost under churn and at 0.7-0.9x
 * on a steady node (docs/architecture.md). Auto falls back to perf, saying
 * why; asked for and not loading is an error. Which runs and why goes to
 * s->backend_why, for the log and GetStatus. */
static int choose_backend(sampler *s, char *err, size_t errlen)
{
    config_backend want = s->cfg->backend;
    char why[UTIL_ERRLEN];
    int r;

    if (want == CONFIG_BACKEND_PERF) {
        snprintf(s->backend_why, sizeof(s->backend_why), "[sampler] backend = perf");
        return 0;
    }
    if ((r = backend_bpf_load(s->es, s->period_ns, why, sizeof(why))) == 0) {
        s->be = &backend_bpf;
        /* Adopted processes come with a cgroup id only; without a cgroup2
         * mount (cgroup v1 alone) /proc shows them no path either. */
        if ((r = cgroupids_new("/proc/self/mountinfo", &s->cgids)) < 0 && r != -ENOENT)
            log_warning("adopted processes get no cgroup path: /proc/self/mountinfo: %s",
                        strerror(-r));
        /* Its hooks tell of every fork, exec, rename and exit, in its ring
         * (the drain hands them over): no proc connector beside it. */
        s->be_events = true;
        snprintf(s->backend_why, sizeof(s->backend_why), "%s",
                 want == CONFIG_BACKEND_BPF ? "[sampler] backend = bpf" : "auto: it loaded");
        return 0;
    }
    if (want == CONFIG_BACKEND_BPF)
        return util_err(err, errlen, r, "[sampler] backend = bpf: %s", why);
    snprintf(s->backend_why, sizeof(s->backend_why), "auto: %s", why);
    return 0;
}

/* Fork, exec and rename events from the proc connector, unless the
 * backend tells of them. */
static void open_connector(sampler *s)
{
    char why[UTIL_ERRLEN];

    if (s->be_events || procs_watch_open(&s->watch, why, sizeof(why)) == 0)
        return;
    /* Without fork/exec events, rescans are all we have: make them often. */
    s->rescan_s = fmin(s->rescan_s, 1.0);
    log_warning("no proc connector (%s): finding processes by rescanning /proc every %g s", why,
                s->rescan_s);
}

const char *sampler_backend_name(const sampler *s)
{
    return s->rep ? "replay" : s->be->name;
}

const char *sampler_backend_why(const sampler *s)
{
    return s->backend_why[0] ? s->backend_why : "counts read back from a recording";
}

static int alloc_scratch(sampler *s)
{
    size_t ne = s->m->n_events;

    s->zone_delta = calloc(s->power->n + 1, sizeof(double));
    s->zone_bad = calloc(s->power->n + 1, sizeof(double));
    s->zone_still_ns = calloc(s->power->n + 1, sizeof(uint64_t));
    s->zone_settle_ns = calloc(s->power->n + 1, sizeof(uint64_t));
    if (!s->zone_bad || !s->zone_still_ns || !s->zone_settle_ns)
        return -ENOMEM;
    s->class_rates = calloc(MODEL_MAX_CLASSES * ne, sizeof(double));
    s->sec_ratio_sum = calloc(s->es->n, sizeof(double));
    s->zone_total_j = calloc(s->power->n + 1, sizeof(double));
    s->sec_zone_j = calloc(s->power->n + 1, sizeof(double));
    s->sec_zone_bad = calloc(s->power->n + 1, sizeof(double));
    s->untracked_rates = calloc(s->es->n + 1, sizeof(double));
    if (!s->zone_delta || !s->class_rates || !s->sec_ratio_sum || !s->zone_total_j ||
        !s->sec_zone_j || !s->sec_zone_bad || !s->untracked_rates)
        return -ENOMEM;
    if (!s->rep && counters_delta_new(s->es, &s->d) < 0)
        return -ENOMEM;
    size_t per_second = (size_t)llround(s->cfg->rate_hz);
    if (stats_ring_init(&s->lateness, per_second * 60) < 0 ||
        stats_ring_init(&s->tick_work, per_second * 60) < 0 ||
        stats_ring_init(&s->idle_power, SAMPLER_IDLE_WINDOW) < 0 ||
        stats_ring_init(&s->drift, SAMPLER_DRIFT_WINDOW) < 0 || calib_new(NULL, &s->fit) < 0 ||
        eventcal_setup(s) < 0)
        return -ENOMEM;
    return 0;
}

int sampler_new(const config *c, model *m, store *st, int32_t model_id, sampler **out, char *err,
                size_t errlen)
{
    sampler *s = calloc(1, sizeof(*s));
    char why[UTIL_ERRLEN];
    int r;

    if (!s)
        return -ENOMEM;
    s->cfg = c;
    s->be = &backend_perf;
    s->m = m;
    s->model_id = model_id;
    s->st = st;
    s->recent.cap = c->exporter_top_pids;
    s->period_ns = (uint64_t)llround(1e9 / c->rate_hz);
    s->busy_prev = s->sec_untracked = s->untracked_avg = NAN;
    pthread_mutex_init(&s->pending_lock, NULL);
    pthread_mutex_init(&s->snap_lock, NULL);
    if (c->track_comm && (r = util_regex_new(c->track_comm, &s->comm_re, why, sizeof(why))) < 0)
        util_err(err, errlen, r, "[track] comm: regex '%s': %s", c->track_comm, why);
    else
        r = open_sources(s, err, errlen);
    if (r == 0)
        r = map_model(s->es, m, &s->model_map, err, errlen);
    double busy;
    if (r == 0 && c->meter_cgroup && (r = hostcpu_busy_s(c->meter_cgroup, &busy)) < 0)
        util_err(err, errlen, r,
                 "[sampler] meter_cgroup: %s: cannot read its CPU time (cpu.stat or "
                 "cpuacct.usage): %s",
                 c->meter_cgroup, strerror(-r));
    if (r == 0 && !s->rep && (r = choose_backend(s, err, errlen)) == 0)
        open_connector(s);
    if (r == 0) {
        s->task_clock = events_find(s->es, "perf::TASK-CLOCK");
        account_zero_rates(s);
        r = alloc_scratch(s);
    }
    if (r < 0) {
        s->m = NULL; /* the caller still owns it */
        sampler_free(s);
        return r;
    }
    account_update_idle(s, NAN, NAN);
    *out = s;
    return 0;
}

int sampler_start(sampler *s)
{
    if (!s->rep)
        proctable_rescan(s);
    s->next_rescan_ns = util_now_ns(CLOCK_MONOTONIC) + (uint64_t)(s->rescan_s * 1e9);
    int r = pthread_create(&s->thread, NULL, s->rep ? replay_loop : hardware_loop, s);
    return -r;
}

void sampler_stop(sampler *s)
{
    if (!s || !s->thread)
        return;
    atomic_store(&s->stop, true);
    pthread_join(s->thread, NULL);
    s->thread = 0;
}

void sampler_free(sampler *s)
{
    if (!s)
        return;
    sampler_stop(s);
    for (size_t i = 0; i < s->n; i++)
        proctable_free_tracked(s, s->procs[i]);
    if (s->be == &backend_bpf)
        backend_bpf_unload();
    cgroupids_free(s->cgids);
    free(s->procs);
    free(s->quiet);
    free(s->forked);
    free(s->active);
    free(s->rates);
    free(s->ev_part);
    free(s->ap);
    free(s->class_rates);
    free(s->zone_delta);
    free(s->zone_bad);
    free(s->zone_still_ns);
    free(s->zone_settle_ns);
    free(s->sec_ratio_sum);
    free(s->zone_total_j);
    free(s->sec_zone_j);
    free(s->sec_zone_bad);
    free(s->untracked_rates);
    groups_free(&s->groups);
    groups_recent_free(&s->recent);
    free(s->lateness.v);
    free(s->tick_work.v);
    free(s->idle_power.v);
    free(s->drift.v);
    calib_free(s->fit);
    eventcal_free(s);
    counters_delta_free(&s->d);
    if (s->rec && trace_writer_close(s->rec) < 0)
        log_error("recording to %s failed: some ticks may be missing", s->cfg->record_path);
    trace_reader_close(s->rep);
    procs_watch_close(s->watch);
    if (s->rep || (s->cfg->replay_path && s->power)) {
        free(s->power->zone);
        free(s->power);
    } else if (s->power) {
        rapl_close(s->power);
    }
    events_free(s->es);
    model_free(s->m);
    model_free(s->pending);
    free(s->model_map);
    free(s->pending_map);
    util_regex_free(s->comm_re);
    sampler_snapshot_unref(s->snap);
    pthread_mutex_destroy(&s->pending_lock);
    pthread_mutex_destroy(&s->snap_lock);
    free(s);
}

const rapl *sampler_rapl(const sampler *s)
{
    return s->power;
}

const sample_eventset *sampler_events(const sampler *s)
{
    return s->es;
}

bool sampler_progressed(sampler *s)
{
    uint64_t now = atomic_load(&s->stored_ticks);
    bool moved = now != s->seen_ticks;
    s->seen_ticks = now;
    return moved || s->replay_done;
}

int64_t sampler_now_ns(sampler *s)
{
    int64_t off = atomic_load(&s->wall_offset_pub);

    if (s->rep || off == 0)
        return sampler_realtime_ns();
    return (int64_t)util_now_ns(CLOCK_MONOTONIC) + off;
}

int sampler_record_error(sampler *s)
{
    return atomic_load(&s->record_error);
}

uint64_t sampler_unattributable(sampler *s)
{
    return atomic_load(&s->unattributable);
}

void sampler_set_stored_calib(sampler *s, const store_node_calib *c)
{
    char target[sizeof(c->target)];

    model_target_key(s->m, target, sizeof(target));
    if (strcmp(target, c->target) != 0 || !(c->idle_w >= 0))
        return;
    s->cal.best = *c;
    account_update_idle(s, NAN, NAN);
}

bool sampler_replay_done(const sampler *s)
{
    return s->replay_done;
}

int sampler_set_model(sampler *s, model *m, int32_t model_id, const store_node_evcal *stored,
                      char *err, size_t errlen)
{
    int *map;
    int r = map_model(s->es, m, &map, err, errlen);

    if (r < 0)
        return r;
    pthread_mutex_lock(&s->pending_lock);
    model_free(s->pending);
    free(s->pending_map);
    s->pending = m;
    s->pending_id = model_id;
    s->pending_map = map;
    s->pending_evcal_set = stored != NULL;
    if (stored)
        s->pending_evcal = *stored;
    pthread_mutex_unlock(&s->pending_lock);
    return 0;
}
