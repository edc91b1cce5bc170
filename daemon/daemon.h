/* wattprofd's internal interfaces: configuration, the sampler and the
 * Varlink methods. Only daemon/ includes this file.
 *
 * Threads: the sampler owns all hardware state and runs the 50 Hz loop; it
 * never blocks on disk or clients. It hands per-tick records to the store's
 * writer thread through a lock-free queue, and once a second publishes a
 * snapshot (status and live processes) that the rpc server thread and the
 * main thread read. The main thread handles signals, sd_notify and the
 * Subscribe streams. */
#ifndef WATTPROFD_DAEMON_H
#define WATTPROFD_DAEMON_H

#include "model/model.h"
#include "rpc/rpc.h"
#include "sample/sample.h"
#include "store/store.h"

#include <pthread.h>
#include <regex.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* ---- Configuration (config.c) -------------------------------------------- */

#define CONFIG_MAX_UIDS 64

/* [sampler] backend: what reads the counters (backend.h). */
typedef enum config_backend {
    CONFIG_BACKEND_AUTO, /* perf for now (sampler.c says why) */
    CONFIG_BACKEND_BPF,
    CONFIG_BACKEND_PERF,
} config_backend;

typedef struct config {
    double rate_hz;                /* ticks per second; 50 */
    char *state_dir;               /* database and default socket */
    char *db_path;                 /* default: state_dir/wattprof.db */
    char *socket_path;             /* default: /run/wattprof/io.wattprof.sock for the system
                                      daemon without its own state_dir, else state_dir/ */
    bool system_paths;             /* root (or CAP_PERFMON): system defaults */
    bool state_dir_set;            /* state_dir came from the config or --state-dir */
    char *model_path;              /* default: state_dir/models/current.json if it exists,
                                      else NULL: the built-in cputime model */
    char *group;                   /* members see every process; "wattprof" */
    unsigned max_clients;          /* 64 */
    unsigned max_clients_per_user; /* connections of one unprivileged uid; 16 */
    double client_timeout_s;       /* idle connections are closed after this; 60 */
    double query_time_limit_s;     /* a call's queries stop after this; 10 */
    double drift_threshold;        /* relative error that is flagged; 0.10 */
    double rescan_s;               /* /proc rescan period; 5 (1 without the proc connector) */
    int sampler_priority;          /* [sampler] priority: SCHED_FIFO priority of the sampling
                                      thread, 1..99; 0 = normal scheduling (the default) */
    config_backend backend;        /* [sampler] backend, --backend: auto (the default), bpf, perf */
    char *meter_cgroup;            /* [sampler] meter_cgroup: the power meter sees only this
                                      cgroup's processes (a folder); NULL: the whole host */
    /* [track]: which processes; all when none is set */
    uid_t track_uids[CONFIG_MAX_UIDS];
    size_t n_track_uids;
    char *track_comm;   /* regex on comm (util_regex: PCRE2) */
    char *track_cgroup; /* cgroup path prefix */
    /* [storage] */
    int64_t second_retention_s, minute_retention_s;
    /* [exporter]: the Prometheus endpoint, off while listen is unset */
    char *exporter_listen; /* as written, for messages */
    struct sockaddr_storage exporter_addr;
    socklen_t exporter_addrlen;
    unsigned exporter_top_pids; /* per-pid series for the top N by energy; 0 */
    double exporter_grace_s;    /* how long a gone process's pid series stays; 60 */
    char **job_env;             /* environment variables that hold a job id */
    size_t n_job_env;
    /* command line only */
    char *record_path, *replay_path;
    double replay_speed; /* 0 = as fast as possible */
    char *pid_file;      /* written once serving, removed at exit; NULL: none */
} config;

/* Fills in the defaults; `as_root` (root, or CAP_PERFMON: the process can
 * watch every user) picks system paths, else paths under
 * $XDG_RUNTIME_DIR / $HOME for an unprivileged run. */
int config_init(config *c, bool as_root);
/* Ticks per second the sampler can run at. */
#define CONFIG_MIN_RATE_HZ 1.0
#define CONFIG_MAX_RATE_HZ 1000.0
/* Parses a rate in [CONFIG_MIN_RATE_HZ, CONFIG_MAX_RATE_HZ] (--rate, rate_hz). */
int config_parse_rate(const char *v, double *out);
/* Parses auto, bpf or perf ([sampler] backend, --backend). */
int config_parse_backend(const char *v, config_backend *out);
/* Reads an INI file over the current values. Errors name FILE:LINE. */
int config_load(config *c, const char *path, char *err, size_t errlen);
/* Derives what depends on other values (db and socket under state_dir). */
int config_finish(config *c, char *err, size_t errlen);
void config_free(config *c);

/* ---- Sampler (sampler.c; its parts: sampler-internal.h) ------------------ */

/* One live process as published once a second. */
typedef struct live_proc {
    pid_t pid;
    uint64_t start_time;
    uid_t uid;
    char comm[17];
    int klass;
    double power_w;      /* attributed, over the last second */
    double standalone_w; /* over the last second */
    double cpu;          /* CPU seconds per second over the last second */
    double total_j, total_standalone_j, total_cpu_s; /* since first seen */
    char unit[LABELS_UNIT_MAX];                      /* systemd unit, from the cgroup */
    char job[LABELS_JOB_MAX];                        /* batch job id, "" outside a job */
    uint64_t exited_mono_ns;                         /* CLOCK_MONOTONIC of the exit; 0 alive */
} live_proc;

/* Upper bounds of the lateness and tick-duration histogram buckets, in
 * microseconds; one more bucket counts everything above the last. */
#define DAEMON_HIST_BOUNDS_US                                                                      \
    {                                                                                              \
        50, 100, 250, 500, 1000, 2500, 5000, 10000, 20000, 50000, 100000                           \
    }
#define DAEMON_HIST_N 11

/* Counts since start (a Prometheus histogram): per bucket, not cumulative. */
typedef struct daemon_hist {
    uint64_t bucket[DAEMON_HIST_N + 1];
    uint64_t count;
    double sum_s;
} daemon_hist;

/* Where attribution's idle power comes from (docs/calibration.md), in the
 * order it is chosen: this node's live fit when it can tell idle; else the
 * node's latest fit that could (from this run, or stored in the database);
 * else the model's trained idle; else, for an uncalibrated model, the 5th
 * percentile of measured power. Without RAPL: the model's. */
typedef enum daemon_idle_source {
    DAEMON_IDLE_FITTED,
    DAEMON_IDLE_STORED,
    DAEMON_IDLE_MODEL,
    DAEMON_IDLE_PERCENTILE,
} daemon_idle_source;

typedef struct daemon_calib {
    daemon_idle_source source;
    double idle_w;          /* in use */
    calib_fit live;         /* the fit of the recent seconds, identifiable or not */
    store_node_calib best;  /* the node's latest identifiable fit; best.t 0: none */
    size_t percentile_rows; /* seconds behind the percentile */
    /* One coefficient per model event (docs/calibration.md): the latest
     * fit, whether attribution uses it, and why not. */
    calib_ev_fit events;
    bool events_used;
    const char *events_why; /* a static string; NULL when used */
    /* The latest per-event fit that was used, of the model in use: from this
     * run, or stored in the database (ev_best.t 0: none). events_stored:
     * attribution uses it, the live fit not being usable now. */
    store_node_evcal ev_best;
    bool events_stored;
    bool idle_events; /* idle_w is ev_best's intercept (source fitted or stored) */
} daemon_calib;

/* "fitted", "stored", "model", "percentile". */
const char *account_idle_source_name(daemon_idle_source s);
/* The fit the idle in use comes from: its idle's standard error and its
 * time (Unix seconds). The per-event fit's when attribution takes idle from
 * its intercept, else the single-scale fit's (source fitted or stored);
 * false when idle is not from a fit. */
bool account_idle_fit(const daemon_calib *c, double *idle_se_w, int64_t *t);

/* Everything `status` shows, refreshed once a second. */
typedef struct daemon_status {
    uint64_t ticks;
    double achieved_hz;
    double lateness_p50_us, lateness_p99_us, lateness_max_us; /* last minute */
    double tick_p50_us, tick_p99_us;                          /* work per tick */
    double host_measured_w, host_modeled_w, idle_w, unattributed_w;
    double drift; /* mean relative error over the last minute, NAN without RAPL */
    bool drift_flagged;
    double untracked_cpu; /* the meter's busy CPU not seen by any tracked process, s/s */
    double untracked_w;   /* the model's dynamic power of it: unattributed */
    size_t tracked;
    double reads_skipped;     /* share of counter reads skipped (nothing ran), last second */
    size_t reads_unskippable; /* tracked processes read every tick (no switch buffer) */
    bool proc_connector;
    const char *backend;     /* the counter backend in use: "bpf" or "perf" */
    const char *backend_why; /* why: "auto: it loaded" (the sampler's, which outlives this) */
    /* With the proc connector, since start: processes that exited before
     * their counters could be opened (not stored), and times the kernel
     * dropped process events (each answered by a rescan). */
    uint64_t procs_missed, connector_overruns;
    daemon_calib calib;
    double *event_ratio; /* mean running/enabled per event over the last second */
    /* Since start, for counters: energies in joules. */
    double total_measured_j, total_modeled_j, total_idle_j, total_unattributed_j;
    double *zone_total_j; /* measured, per RAPL zone (sampler_rapl order) */
    double *zone_power_w; /* per RAPL zone over the last second; NAN where a tick
                             of it was no measurement (a stalled or lost zone) */
    uint64_t exited;      /* tracked processes that ended */
    daemon_hist lateness, tick_work;

    char power_fault[192]; /* a RAPL zone that stopped advancing, or "" */
} daemon_status;

/* ---- Totals by command, user, unit and job (groups.c) --------------------- */

/* The energy of the processes of one command, user, unit and job, since
 * the daemon started: every tick adds each process's share to its group,
 * so the totals only ever grow (a sum recomputed from live and ended
 * processes could shrink by a rounding error when a process ends, and
 * Prometheus takes any decrease for a counter reset). */
typedef struct group_total {
    uid_t uid;
    char comm[17];
    char unit[LABELS_UNIT_MAX];
    char job[LABELS_JOB_MAX];
    double energy_j, standalone_j, cpu_s;
    double power_w; /* of the live members, over the last second */
} group_total;

typedef struct groups {
    group_total *v;
    size_t n, cap;
    /* A hash of the labels to 1 + the index in v, 0 for a free slot: a new
     * process finds its group without comparing labels with every group.
     * Open addressing, at most half full; NULL in a copy (groups_copy) until
     * its first groups_find builds it. */
    size_t *slot;
    size_t n_slots; /* a power of two, or 0 */
} groups;

/* Index in g->v of the group of these labels, added (zeroed) if new. */
int groups_find(groups *g, uid_t uid, const char *comm, const char *unit, const char *job,
                size_t *idx);
/* A copy of `src` that `dst` owns (dst's old contents are freed). */
int groups_copy(groups *dst, const groups *src);
void groups_free(groups *g);

/* Recently ended processes kept for per-pid series: the `cap` with the most
 * energy that ended less than `grace_s` ago. */
typedef struct recent_exits {
    live_proc *v;
    size_t n, cap;
} recent_exits;

/* Keeps p (its exited_mono_ns set) if it is among the `cap` largest. */
int groups_recent_add(recent_exits *r, const live_proc *p);
/* Forgets those that ended at or before `before_mono_ns`. */
void groups_recent_expire(recent_exits *r, uint64_t before_mono_ns);
void groups_recent_free(recent_exits *r);

typedef struct snapshot {
    int refs;
    int64_t t_ns; /* CLOCK_REALTIME of the publication */
    daemon_status st;
    live_proc *procs;
    size_t n_procs;
    groups groups;       /* totals of every process, live or ended, since start */
    recent_exits recent; /* ended within the grace period (when top_pids > 0) */
} snapshot;

typedef struct sampler sampler;

/* Opens events, RAPL and process tracking (or the replay file) for `m`. */
int sampler_new(const config *c, model *m, store *st, int32_t model_id, sampler **out, char *err,
                size_t errlen);
/* Runs the loop in a new thread until sampler_stop. */
int sampler_start(sampler *s);
void sampler_stop(sampler *s);
void sampler_free(sampler *s);

/* The latest snapshot, with a reference (release with sampler_snapshot_unref); NULL
 * before the first second. Never blocks the sampler. */
snapshot *sampler_snapshot(sampler *s);
void sampler_snapshot_unref(snapshot *snap);
/* Sources for status: RAPL zones and the event set. */
/* Why the counter backend in use was chosen ("auto: it loaded"), for
 * the startup log and GetStatus. */
const char *sampler_backend_why(const sampler *s);
/* Its name: "bpf", "perf", or "replay" (GetStatus says the same). */
const char *sampler_backend_name(const sampler *s);
const rapl *sampler_rapl(const sampler *s);
const sample_eventset *sampler_events(const sampler *s);
/* True when a tick was stored since the previous call (for the watchdog:
 * a sampler that ticks but stores nothing is not alive). */
bool sampler_progressed(sampler *s);
/* Now on the clock stored rows are stamped with: CLOCK_REALTIME, except
 * after a step back, which stamps do not follow (they run on from the
 * newest); queries measure their windows back from it, so a step back
 * does not hide the newest seconds. */
int64_t sampler_now_ns(sampler *s);
/* -errno of the first failed write of the --record file, 0 while none. */
int sampler_record_error(sampler *s);
/* Ticks stored as unattributed because the model gave no finite power. */
uint64_t sampler_unattributable(sampler *s);
/* True once a replay has consumed its whole file. */
bool sampler_replay_done(const sampler *s);
/* The node's stored calibration, from the database (before sampler_start):
 * what attribution uses until the node's live fit can tell idle. Ignored
 * when its target domains are not the model's. */
void sampler_set_stored_calib(sampler *s, const store_node_calib *c);
/* The node's stored per-event fit, likewise: used at once when it is of the
 * model in use (its SHA-256, events and target domains). NULL when taken,
 * else why not (a static string). */
const char *sampler_set_stored_evcal(sampler *s, const store_node_evcal *c);
/* Why the stored per-event fit `c` cannot be used with model `m` on this
 * node (the rules of sampler_set_stored_evcal), or NULL. Any thread. */
const char *sampler_stored_evcal_why(const sampler *s, const model *m, const store_node_evcal *c);
/* Installs a new model (takes ownership) at the next tick; its events must
 * be a subset of the running event set. `stored`: the node's stored
 * per-event fit of that model (sampler_stored_evcal_why said yes), taken
 * with it unless a newer fit of the same model is kept from this run; NULL:
 * none. */
int sampler_set_model(sampler *s, model *m, int32_t model_id, const store_node_evcal *stored,
                      char *err, size_t errlen);

/* ---- The meter's CPU time (hostcpu.c) ------------------------------------ */

/* Busy CPU seconds so far of the whole host (cgroup NULL: /proc/stat), or
 * of the processes of a cgroup folder (v2 cpu.stat, v1 cpuacct.usage).
 * -errno when it cannot be read. */
int hostcpu_busy_s(const char *cgroup, double *busy_s);
/* The model's dynamic power of `cpu` busy cores seen as task-clock alone
 * (event cpu_event, class klass); 0 when cpu_event < 0. `rates` is scratch
 * for m->n_events values. */
double hostcpu_untracked_power(const model *m, int cpu_event, int klass, double cpu, double *rates);

/* ---- Varlink methods (methods.c) ------------------------------------------ */

typedef struct subscriber subscriber;

#define DAEMON_METHODS 8

typedef struct daemon_ctx {
    config *cfg;
    sampler *smp;
    store *st;
    int64_t started_ns;   /* CLOCK_REALTIME at start */
    pthread_mutex_t lock; /* guards model and subs */
    model *model;         /* description of the model in use (a copy) */
    char *model_json;
    subscriber *subs;
    store_reader *reader; /* server thread only */
    /* io.wattprof.Monitor's methods, each with ctx: the userdata of
     * method_call (methods.c), which ends each call's query budget and
     * gives back the memory of a large query */
    struct daemon_method {
        struct daemon_ctx *ctx;
        rpc_method_fn fn;
    } methods[DAEMON_METHODS];
    bool queried; /* the call in progress used the reader (server thread) */
} daemon_ctx;

/* Registers io.wattprof.Monitor's methods on `srv`. */
int methods_register(daemon_ctx *ctx, rpc_server *srv, char *err, size_t errlen);
/* Sends due Subscribe replies and forgets closed subscribers (main thread,
 * about once a second). */
void methods_publish(daemon_ctx *ctx);
/* Loads the model at `path` (NULL: built-in), records it in the store and
 * hands it to the sampler with the node's stored per-event fit of it
 * (methods_stored_evcal), or returns it for the first start when smp is
 * NULL. */
int methods_load_model(daemon_ctx *ctx, const char *path, model **for_sampler, int32_t *model_id,
                       char *err, size_t errlen);
/* The node's stored per-event fit for model `m` into *out, read with `r`
 * (NULL: a reader of its own): 0 when the sampler can use it, else
 * negative; one line logged for a fit that is there: taken, not of `m`,
 * not newer than the one this run keeps of `m`, or not readable. At start
 * and at each model (re)load. */
int methods_stored_evcal(daemon_ctx *ctx, store_reader *r, const model *m, store_node_evcal *out);
void methods_free(daemon_ctx *ctx);

/* ---- Prometheus exporter (exporter.c, exposition.c) ----------------------- */

typedef struct exporter exporter;

/* Starts serving GET /metrics on [exporter] listen from libmicrohttpd's own
 * thread; *out stays NULL when no listen address is configured. Errors
 * (a bad address, a port in use) name the config key. */
int exporter_start(daemon_ctx *ctx, exporter **out, char *err, size_t errlen);
void exporter_stop(exporter *e);
/* The Prometheus text exposition of `snap` (malloc'd in *out, *len bytes);
 * reads the model's description under ctx->lock, nothing of the sampler. */
int exposition_render(daemon_ctx *ctx, const snapshot *snap, char **out, size_t *len);

#endif
