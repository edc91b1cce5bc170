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
#include <sys/types.h>

/* ---- Configuration (config.c) -------------------------------------------- */

#define CONFIG_MAX_UIDS 64

typedef struct config {
    double rate_hz;         /* ticks per second; 50 */
    char *state_dir;        /* database and default socket */
    char *db_path;          /* default: state_dir/wattprof.db */
    char *socket_path;      /* default: /run/wattprof/io.wattprof.sock for the system
                               daemon without its own state_dir, else state_dir/ */
    bool system_paths;      /* root (or CAP_PERFMON): system defaults */
    bool state_dir_set;     /* state_dir came from the config or --state-dir */
    char *model_path;       /* default: state_dir/models/current.json if it exists,
                               else NULL: the built-in cputime model */
    char *group;            /* members see every process; "wattprof" */
    unsigned max_clients;   /* 64 */
    double drift_threshold; /* relative error that is flagged; 0.10 */
    double rescan_s;        /* /proc rescan period; 5 (1 without the proc connector) */
    /* [track]: which processes; all when none is set */
    uid_t track_uids[CONFIG_MAX_UIDS];
    size_t n_track_uids;
    char *track_comm;   /* POSIX extended regex on comm */
    char *track_cgroup; /* cgroup path prefix */
    /* [storage] */
    int64_t second_retention_s, minute_retention_s;
    /* command line only */
    char *record_path, *replay_path;
    double replay_speed; /* 0 = as fast as possible */
} config;

/* Fills in the defaults; `as_root` (root, or CAP_PERFMON: the process can
 * watch every user) picks system paths, else paths under
 * $XDG_RUNTIME_DIR / $HOME for an unprivileged run. */
int config_init(config *c, bool as_root);
/* Reads an INI file over the current values. Errors name FILE:LINE. */
int config_load(config *c, const char *path, char *err, size_t errlen);
/* Derives what depends on other values (db and socket under state_dir). */
int config_finish(config *c, char *err, size_t errlen);
void config_free(config *c);

/* ---- Sampler (sampler.c) ------------------------------------------------- */

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
} live_proc;

/* Everything `status` shows, refreshed once a second. */
typedef struct daemon_status {
    uint64_t ticks;
    double achieved_hz;
    double lateness_p50_us, lateness_p99_us, lateness_max_us; /* last minute */
    double tick_p50_us, tick_p99_us;                          /* work per tick */
    double host_measured_w, host_modeled_w, idle_w, unattributed_w;
    double drift; /* mean relative error over the last minute, NAN without RAPL */
    bool drift_flagged;
    double untracked_cpu; /* host busy CPU not seen by any tracked process, s/s */
    size_t tracked;
    bool proc_connector;
    char idle_source[64];
    double *event_ratio; /* mean running/enabled per event over the last second */

    char power_fault[192]; /* a RAPL zone that stopped advancing, or "" */
} daemon_status;

typedef struct snapshot {
    int refs;
    int64_t t_ns; /* CLOCK_REALTIME of the publication */
    daemon_status st;
    live_proc *procs;
    size_t n_procs;
} snapshot;

typedef struct sampler sampler;

/* Opens events, RAPL and process tracking (or the replay file) for `m`. */
int sampler_new(const config *c, model *m, store *st, int32_t model_id, sampler **out, char *err,
                size_t errlen);
/* Runs the loop in a new thread until sampler_stop. */
int sampler_start(sampler *s);
void sampler_stop(sampler *s);
void sampler_free(sampler *s);

/* The latest snapshot, with a reference (release with snapshot_unref); NULL
 * before the first second. Never blocks the sampler. */
snapshot *sampler_snapshot(sampler *s);
void snapshot_unref(snapshot *snap);
/* Sources for status: RAPL zones and the event set. */
const rapl *sampler_rapl(const sampler *s);
const sample_eventset *sampler_events(const sampler *s);
/* True when the loop has ticked since the previous call (for the watchdog). */
bool sampler_progressed(sampler *s);
/* True once a replay has consumed its whole file. */
bool sampler_replay_done(const sampler *s);
/* Installs a new model (takes ownership) at the next tick; its events must
 * be a subset of the running event set. */
int sampler_set_model(sampler *s, model *m, int32_t model_id, char *err, size_t errlen);

/* ---- Varlink methods (methods.c) ------------------------------------------ */

typedef struct subscriber subscriber;

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
} daemon_ctx;

/* Registers io.wattprof.Monitor's methods on `srv`. */
int methods_register(daemon_ctx *ctx, rpc_server *srv, char *err, size_t errlen);
/* Sends due Subscribe replies and forgets closed subscribers (main thread,
 * about once a second). */
void methods_publish(daemon_ctx *ctx);
/* Loads the model at `path` (NULL: built-in), records it in the store and
 * hands it to the sampler (or returns it for the first start when smp is
 * NULL). */
int methods_load_model(daemon_ctx *ctx, const char *path, model **for_sampler, int32_t *model_id,
                       char *err, size_t errlen);
void methods_free(daemon_ctx *ctx);

#endif
