/* sampler-internal: what the files of wattprofd's sampler share, and
 * nothing else includes. The sampler is one thread (the 50 Hz loop, or a
 * replay) that owns everything in struct sampler; other threads only read
 * published snapshots and the few atomics marked below.
 *
 * Its files, by concern:
 *   sampler.c     the public interface (daemon.h), setup, the loop and
 *                 one tick as a page of calls, model swaps, the clock
 *   proctable.c   which processes are tracked: proc connector events,
 *                 rescans of /proc, exec and rename, reaping, labels, groups
 *   reading.c     this tick's counter deltas and RAPL energy (or a
 *                 replay's), and the --record file
 *   accounting.c  attribution of one tick, idle booking, calibration of
 *                 idle power, drift's sums, classes, untracked CPU
 *   publish.c     the store's per-tick rows, and once a second the status,
 *                 the snapshot, and the exporter's totals and exits
 *   stats.c       windows of recent values and histograms for status */
#ifndef WATTPROFD_SAMPLER_INTERNAL_H
#define WATTPROFD_SAMPLER_INTERNAL_H

#include "backend.h"
#include "cgroupids.h"
#include "daemon.h"
#include "util/util.h"

#include <stdatomic.h>
#include <time.h>

#define SAMPLER_IDLE_WINDOW 3600 /* seconds of host power for the idle percentile */
#define SAMPLER_DRIFT_WINDOW 60  /* seconds averaged into the drift error */
#define SAMPLER_UNTRACKED_S 5    /* time constant of the untracked CPU's mean */
#define SAMPLER_EV_FIT_S 5       /* seconds between fits of one coefficient per event */
#define SAMPLER_MAX_EVENTS 64    /* proc events read per batch (more batches follow) */
/* Exited processes adopted from the counter backend per tick: 10 times 1,000
 * starts a second at 50 Hz; a burst (a daemon that was stopped) is taken
 * over the next ticks rather than in one that overflows the store's queue. */
#define SAMPLER_MAX_ADOPT 200
#define SAMPLER_ADOPT_ROOM 1024 /* records left in the store's queue to adopt more */

/* A RAPL zone this long without advancing is no measurement (200 ms: real
 * RAPL counters advance every millisecond or so), nor is it for this long
 * after it advances again, and this long is reported in status. */
#define SAMPLER_STILL_NS 200000000ull
#define SAMPLER_SETTLE_NS 100000000ull
#define SAMPLER_STALL_NS 1000000000ull

struct tracked {
    pid_t pid;
    uint64_t start;
    uid_t uid;
    char comm[17];
    backend_handle *ch; /* its counters (sampler.be); NULL in a replay */
    double *delta;      /* this tick's scaled deltas, event-set order */
    double *ratio;
    bool has_delta;       /* in this tick's active list */
    uint64_t active_tick; /* sampler.ticks once the latest tick it ran in was counted */
    bool gone;
    double class_stat;
    int klass;
    /* Standalone energy of the ticks it slept through is booked lazily:
     * sampler.idle_sum[idle_klass] minus idle_mark (settle_idle). */
    int idle_klass;
    double idle_mark;
    double sec_j, sec_standalone_j, sec_cpu_s;  /* the second being accumulated */
    double last_w, last_standalone_w, last_cpu; /* the previous whole second */
    double total_j, total_standalone_j, total_cpu_s;
    char unit[LABELS_UNIT_MAX], job[LABELS_JOB_MAX];
    bool job_in_cgroup; /* job came from the cgroup path, not the environment */
    size_t group;       /* in sampler.groups, when has_group */
    bool has_group;
    /* A replayed process described before the first tick: its description
     * waits for the first tick's time (a replay must not use the wall clock,
     * or two replays of one file would store different rows). */
    procs_info pending;
    bool info_pending;
};

struct ring {
    double *v;
    size_t cap, n, next;
};

struct sampler {
    const config *cfg;
    util_regex *comm_re; /* [track] comm, compiled once; NULL = any */
    model *m;
    int32_t model_id;
    int *model_map; /* model event j -> index in es */
    pthread_mutex_t pending_lock;
    model *pending;
    int32_t pending_id;
    bool model_changed; /* since the last publish: drift starts afresh */
    int *pending_map;
    store_node_evcal pending_evcal; /* the node's stored per-event fit of the */
    bool pending_evcal_set;         /* pending model, when there is one */

    sample_eventset *es;
    const backend *be; /* reads the counters of tracked processes */
    bool drain_failed; /* its drain failed (logged once) */
    unsigned adopted;  /* this tick, by proctable_adopt */
    cgroupids *cgids;  /* their cgroup paths, with a backend that adopts; NULL: none */
    /* With a backend that drains (it counts every process from its fork):
     * pids the proc connector told of, looked at after the second drain
     * since (the drain adopts those that exited by then), so that a process
     * that does not outlive a whole tick costs no /proc reads. */
    struct forked {
        pid_t pid;
        uint64_t drain; /* n_drains when it was told of */
    } *forked;
    size_t n_forked, cap_forked;
    uint64_t n_drains;
    char backend_why[UTIL_ERRLEN + 64]; /* why s->be was chosen, for the log and status */
    int task_clock;                     /* index in es, or -1 */
    rapl *power;
    double *zone_delta;
    double *zone_bad;         /* 1 for a zone whose delta this tick is no measurement */
    uint64_t *zone_still_ns;  /* since each zone last advanced */
    uint64_t *zone_settle_ns; /* left before an advancing zone measures again */
    int rapl_err;             /* rapl_read's latest result */
    bool power_faulted;       /* a stall is being reported (logged once each way) */
    procs_watch *watch;       /* the proc connector; NULL when be_events or unavailable */
    bool be_events;           /* the backend tells of forks, execs and renames (bpf) */
    char boot_id[37];
    store *st;
    trace_writer *rec;
    trace_reader *rep;
    bool replay_done;

    struct tracked **procs;
    size_t n, cap;
    /* Beside procs[i]: the word that proves it slept (backend quiet_word).
     * A tick checks these, one dense array, before touching anything else
     * of a process: most of a host's processes sleep through most ticks. */
    struct quiet {
        const __u64 *word;
        __u64 value;
    } *quiet;
    struct tracked **active; /* the processes this tick has deltas for */
    size_t n_active, n_idle;
    bool reap_pending; /* some process is marked gone */
    /* Per class, p_k(0)*dt summed over every tick since start: what a
     * process that did not run is booked as standalone energy. */
    double idle_sum[MODEL_MAX_CLASSES];
    /* Of the model in use, at zero rates (set_zero_rates): each class's
     * power p_k(0), and the class a zero rate falls in. */
    double zero_power[MODEL_MAX_CLASSES];
    int zero_class;
    counters_delta d;
    double *rates; /* n x model events */
    attrib_proc *ap;
    double *ev_part;     /* n x model events: each event's part of a process's
                            dynamic power, from attribution, for eventcal */
    double *class_rates; /* MODEL_MAX_CLASSES x model events */

    pthread_t thread;
    atomic_bool stop;
    atomic_uint_fast64_t ticks;
    /* Ticks whose rows went to the store (what the watchdog is fed on), and
     * those of them the model could not attribute (stored as unattributed). */
    atomic_uint_fast64_t stored_ticks, unattributable;
    uint64_t unattributable_logged_ns;
    bool tick_unattributable; /* the tick being stored: no calibration rows */
    atomic_int record_error;  /* -errno of the first failed write of --record */
    uint64_t seen_ticks;
    uint64_t period_ns, next_deadline, last_ns, next_rescan_ns;
    int64_t woke_realtime; /* CLOCK_REALTIME when the current tick read the hardware */
    uint64_t last_read_ns; /* CLOCK_MONOTONIC of the previous reading */
    double rescan_s;       /* the config's, or 1 s without the proc connector */
    uint64_t replay_t0, replay_wall0;
    int64_t replay_offset; /* realtime - monotonic of the recording (0: unknown) */
    int64_t wall_offset;   /* realtime - monotonic for live ticks; only grows */
    bool wall_behind;      /* CLOCK_REALTIME is behind it (logged once) */
    /* wall_offset, for other threads */
    atomic_int_fast64_t wall_offset_pub;

    /* per-second accumulation */
    uint64_t second_start_ns;
    unsigned second_ticks;
    double sec_host_j, sec_modeled_j, sec_idle_j, sec_unattr_j, sec_cpu_s, sec_dt;
    double sec_drift_model_j; /* the model's own host energy, for drift */
    bool sec_fallback;        /* a tick of this second had RAPL but no measurement */
    bool sec_unattributable;  /* a tick of this second had no finite model power */
    double *sec_ratio_sum;
    size_t sec_ratio_n;
    double busy_prev;     /* the meter's busy CPU seconds at the last second's end */
    double sec_untracked; /* the meter's CPU no tracked process used, cores */
    double untracked_avg; /* its mean over the latest seconds (measure_untracked) */
    double untracked_w;   /* its dynamic power, booked unattributed next second */
    int cpu_event;        /* the model's task-clock event, or -1 */
    double *untracked_rates;
    struct ring lateness, tick_work, idle_power, drift;
    uint64_t sec_reads, sec_skipped; /* counter reads this second, and those skipped */
    uint64_t procs_missed;           /* forked, wanted, not tracked (mostly: gone too soon) */
    uint64_t connector_overruns;     /* ENOBUFS: the kernel dropped proc events */
    bool skip_warned;                /* the log said once why some are never skipped */
    bool fd_warned;                  /* the log said once that descriptors ran short */
    double idle_w;
    calib *fit;             /* measured against the model's dynamic power, per second */
    daemon_calib cal;       /* the idle in use and where it comes from */
    double sec_dyn_j;       /* the model's dynamic host energy this second */
    double idle_debt_j;     /* idle the latest ticks could not book (keep_idle_debt) */
    uint64_t idle_short_ns; /* since a tick last booked all its idle */
    double dyn_scale;       /* the fit's scale for this model, for unmeasured ticks; 0: none */
    int64_t fit_t_ns;       /* sampler_clock of the fit's newest row */
    /* One calibration coefficient per model event (eventcal.c). */
    calib_ev *evfit;               /* NULL: the model cannot have one (cal.events_why) */
    double sec_ev_j[CALIB_EV_MAX]; /* the model's dynamic energy through each event,
                                      this second */
    double ev_scale[CALIB_EV_MAX]; /* the coefficients attribution uses (ev_used) */
    double ev_untracked_scale;     /* ... for the untracked CPU's power */
    bool ev_used;
    unsigned ev_fit_wait; /* seconds until the next per-event fit */
    int64_t ev_fit_t_ns;  /* fit_t_ns when cal.events was made */
    bool ev_fit_unkept;   /* cal.events is not in cal.ev_best yet */

    pthread_mutex_t snap_lock;
    snapshot *snap;

    /* for the exporter: totals since start */
    groups groups;
    recent_exits recent;
    uint64_t n_exited;
    double total_measured_j, total_modeled_j, total_idle_j, total_unattr_j;
    double *zone_total_j;
    /* This second, per zone: energy, and whether any tick of it was no
     * measurement (zone_bad). */
    double *sec_zone_j, *sec_zone_bad;
    daemon_hist late_hist, work_hist;
};

/* CLOCK_REALTIME in nanoseconds. */
static inline int64_t sampler_realtime_ns(void)
{
    return (int64_t)util_now_ns(CLOCK_REALTIME);
}

/* ---- sampler.c ------------------------------------------------------------ */

/* Now, for stored rows: the wall clock, or a replay's own timeline; inside
 * a tick, the instant it read the hardware. */
int64_t sampler_clock(sampler *s);

/* ---- proctable.c: the tracked processes ------------------------------------ */

/* Whether the config ([track]) wants this process. */
bool proctable_wanted(const sampler *s, const procs_info *info);
/* Tracks a process described by `info`, reading it through `ch` (NULL in
 * a replay); describes it to the store and the recording. */
int proctable_add(sampler *s, const procs_info *info, backend_handle *ch);
void proctable_free_tracked(sampler *s, struct tracked *t);
/* The tracked process of this pid and start time, or NULL. */
struct tracked *proctable_find_start(sampler *s, pid_t pid, uint64_t start);
/* The group (command, user, unit, job) t's energy goes to from now on. */
void proctable_join_group(sampler *s, struct tracked *t);
/* Tracks a process that exited before it was found, from what the counter
 * backend recorded of it (backend.h drain), for its final read. -EAGAIN:
 * not this tick (SAMPLER_MAX_ADOPT of them, or the store's queue is short
 * of room), the backend keeps it. */
int proctable_adopt(sampler *s, const backend_orphan *o);
/* Finds processes to track and exits missed, from a walk of /proc. */
void proctable_rescan(sampler *s);
/* After a drain: tracks the processes the connector (or the backend) told
 * of before the previous drain that are neither adopted nor tracked yet
 * (reading their /proc details). */
void proctable_track_forked(sampler *s);
/* Handles waiting proc connector events until none is left or until_ns. */
void proctable_drain_events(sampler *s, uint64_t until_ns);
/* One fork, exec or rename, from the connector or the counter backend. */
void proctable_event(sampler *s, const procs_event *ev);
/* Process events were lost: counted, logged once, and /proc rescanned. */
void proctable_events_lost(sampler *s);
/* Drops processes that exited, after their final tick was accounted. */
void proctable_reap(sampler *s);
/* Stores descriptions of replayed processes that came before the first tick. */
void proctable_push_pending_infos(sampler *s);
/* t as published in a snapshot. */
live_proc proctable_to_live(const struct tracked *t);

/* ---- reading.c: this tick's counters and energy ---------------------------- */

/* Reads RAPL and the counters of every tracked process that ran: fills
 * s->zone_delta and the active list (s->active, s->n_active, s->n_idle). */
int reading_hardware(sampler *s);
/* Replay: the recording's records up to and including its next tick. 1 for
 * a tick (its length in *dt_ns), 0 at the end of the file. */
int reading_replay(sampler *s, uint64_t *dt_ns);
/* Writes the tick just read to the --record file. */
void reading_record_tick(sampler *s, uint64_t now, uint64_t dt_ns);
/* Empties the active list. */
void reading_clear_active(sampler *s);
/* Whether this tick's RAPL deltas measure the host (no stalled zone). */
bool reading_power_usable(sampler *s, double dt);

/* ---- accounting.c: attribution and idle power ------------------------------ */

/* Attributes one tick of dt seconds over the active processes (shares in
 * s->ap, the host's in *at) and books it to them, their groups and the
 * second's sums. */
void account_tick(sampler *s, double dt, attrib_tick *at);
/* What the model in use gives at zero rates (once per model). */
void account_zero_rates(sampler *s);
/* The class a tick without events books t in. */
int account_idle_class(const sampler *s, const struct tracked *t);
/* Starts counting t's idle ticks from now. */
void account_mark_idle(sampler *s, struct tracked *t);
/* Books the standalone energy of the ticks t slept through. */
void account_settle_idle(sampler *s, struct tracked *t);
/* Once a second: the idle power in use, from the best source there is. */
void account_update_idle(sampler *s, double host_w, double dyn_w);
/* Once a second: the meter's CPU no tracked process used, and its power. */
double account_measure_untracked(sampler *s, double secs);

/* eventcal.c: one calibration coefficient per model event. */
int eventcal_setup(sampler *s); /* for the model in use; -ENOMEM */
void eventcal_free(sampler *s);
/* Adds an attributed tick's per-event dynamic energy (the parts attribution
 * left in s->ap[i].event_w) to the second's. */
void eventcal_tick(sampler *s, double dt);
/* Once a second, after account_update_idle: the second's row, a fit every
 * SAMPLER_EV_FIT_S seconds, and whether attribution uses its coefficients
 * (then idle is its intercept). untracked_w: the model's power of the
 * second's untracked CPU. */
void eventcal_second(sampler *s, double host_w, double untracked_w, double secs);

/* ---- publish.c: to the store and to other threads --------------------------- */

/* The rows of the tick just accounted (at, and s->ap of the active list)
 * to the store's queue, stamped t_ns. */
void publish_tick(sampler *s, int64_t t_ns, const attrib_tick *at);
/* Once a second: per-process powers, status and a new snapshot. */
void publish_second(sampler *s);

/* ---- stats.c: recent values for status -------------------------------------- */

int stats_ring_init(struct ring *r, size_t cap);
void stats_ring_add(struct ring *r, double x);
/* Percentile (0..100) of what the ring holds; NAN when empty. */
double stats_percentile(const struct ring *r, double pct);
/* Mean of what the ring holds; NAN when empty. */
double stats_mean(const struct ring *r);
/* Counts one value (in ns) in its bucket of a histogram in microseconds. */
void stats_hist_add(daemon_hist *h, double ns);

#endif
