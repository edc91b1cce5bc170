/* store: wattprof's history in SQLite — schema, migrations, the batched
 * writer, rollups with retention, and the queries the socket and the trainer
 * ask.
 *
 * Two sides, usable alone:
 *
 *   writer - store_open starts one writer thread that owns the database
 *            connection.  The sampling thread pushes per-tick deltas with
 *            store_push_*: each push copies a small record into a bounded
 *            single-producer queue and returns at once; it never takes a lock,
 *            never touches the disk and never waits.  When the queue is full
 *            the record is dropped and counted (store_get_stats).  The writer
 *            drains the queue and sums the deltas into per-second rows in
 *            memory: live, when the wall-clock second ends and whenever the
 *            queue may be a third full; else, and until the next second's
 *            first record is in, every drain_interval_ms (store_stats.drains
 *            counts them).  The sampler pushes in time order, so
 *            the first record of second t+1 shows that second t is complete:
 *            the writer then commits every complete second in one transaction
 *            — one transaction per second while sampling live (at most one
 *            per min_commit_gap_ms when replaying faster).  Each row is
 *            written once, whole, so its floating-point sums do not depend on
 *            commit timing and a replay gives the same rows to the last bit;
 *            rows are upserted additively all the same, so a record that comes
 *            late, or a second split by store_flush or a restart, adds up.
 *            store_close drains, commits and closes, partial seconds included:
 *            the SIGTERM path.  A crash (SIGKILL) loses the second in progress
 *            and at most drain_interval_ms of the one before, and never
 *            corrupts the file (WAL, synchronous=NORMAL: committed
 *            transactions survive a process crash; a power cut may also lose
 *            the last few).
 *
 *   reader - store_reader_open opens its own read-only connection (WAL lets
 *            it read while the writer writes).  One reader per thread.  The
 *            rows of second t become visible when second t+1 has begun (plus
 *            up to drain_interval_ms): a live view asks store_latest_second
 *            for the newest complete second rather than using the clock.
 *
 * Times: pushed records carry CLOCK_REALTIME nanoseconds (t_ns) at the end
 * of their tick; rows are keyed by the Unix second t = floor(t_ns / 1e9) (or
 * by the minute's first second for rollups).  Process identity is (boot id,
 * pid, start time): start_time is field 22 of /proc/PID/stat (clock ticks
 * after boot), because a pid alone is reused.
 *
 * Tables (schema.c has the SQL; `PRAGMA user_version` is the schema version,
 * migrated forward on open):
 *   models                     every model ever loaded, by sha256, with its JSON
 *   processes                  one row per process identity: comm, cmdline,
 *                              uid, cgroup, batch job, first/last seen, exit
 *                              time, class, lifetime totals
 *   process_energy(_minute)    per process per second (minute) in which it ran:
 *                              attributed J, standalone J, CPU s, class, model;
 *                              the per-second rows are a view of
 *                              process_energy_recent (the newest: a virtual
 *                              table over process_energy_packed, one row a
 *                              second with a blob of all processes' rows,
 *                              store_sqlite_register) and
 *                              process_energy_settled (keyed by
 *                              the batch that maintenance moved them in, then
 *                              process; process_energy_batch: each batch's
 *                              seconds)
 *   host_energy(_minute)       per second (minute) and RAPL domain: measured and
 *                              modeled J
 *   host_attribution(_minute)  per second (minute): host J = idle J + attributed
 *                              J + unattributed J, modeled J, whether measured
 *   calibration                per second: duration, model, host power per
 *                              domain as JSON {"package": W, ...}, per-class
 *                              mean event rates as JSON [[class 0 rates in the
 *                              model's event order], [class 1 ...]]
 *   node_calibration           per set of target domains: this node's latest
 *                              identifiable fit of idle power and model scale
 *                              (docs/calibration.md), kept across restarts
 *   node_event_calibration     per set of target domains: the latest fit of
 *                              one coefficient per model event that was used,
 *                              with its model's SHA-256 and events
 *
 * Rollups: the writer runs maintenance every maintain_interval_s (and again
 * right away while more is due): per-second rows older than
 * second_retention_s are summed into minute rows and deleted;
 * minute rows older than minute_retention_s are deleted, calibration rows
 * older than calibration_retention_s too, and processes last seen before the
 * minute retention.
 *
 * One writer per database file: store_open takes an flock on PATH-lock and
 * refuses a second writer with -EBUSY; readers are unlimited.
 * Functions return 0 or a negative errno; those that can fail because of the
 * database or the caller's input fill `err` (UTIL_ERRLEN bytes) with one line
 * naming the file or the parameter at fault. */
#ifndef WATTPROF_STORE_H
#define WATTPROF_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define STORE_SCHEMA_VERSION 11
#define STORE_MAX_CLASSES 4  /* classes per calibration row */
#define STORE_MAX_EVENTS 256 /* events per calibration row */
#define STORE_MAX_DOMAINS 16 /* RAPL domains per calibration row */
#define STORE_DOMAIN_LEN 16  /* bytes of a domain name, NUL included */

/* Registers on an SQLite connection of the caller's own what every
 * connection lib/store opens has: the virtual table process_energy_recent
 * (lib/store/packed.c), without which process_energy_recent and the
 * process_energy view cannot be read. Returns an SQLite result code. */
struct sqlite3;
int store_sqlite_register(struct sqlite3 *db);

/* ---- Opening, closing, configuration (store.c) --------------------------- */

typedef enum store_clock {
    STORE_CLOCK_WALL, /* retention is counted from the wall clock as live
                         ticks are stamped: monotonic time plus the largest
                         offset seen; per-second rows are kept across
                         forward steps (wallclock.c) */
    STORE_CLOCK_DATA, /* ... from the newest pushed timestamp (replays of old
                         recordings keep their rows) */
} store_clock;

typedef struct store_config {
    size_t queue_capacity;           /* records the queue holds (rounded up to a
                                        power of two); default 16384, 72 bytes each */
    unsigned drain_interval_ms;      /* how often the writer empties the queue
                                        while a second waits for its commit
                                        (see above); 100 */
    unsigned min_commit_gap_ms;      /* least time between two commits (bounds
                                        the rate when replaying fast); 500 */
    unsigned maintain_interval_s;    /* rollup and retention runs; 60 */
    int64_t second_retention_s;      /* per-second rows kept; 86400 (24 h) */
    int64_t minute_retention_s;      /* one-minute rows kept; 7776000 (90 days) */
    int64_t calibration_retention_s; /* calibration rows kept; 604800 (7 days) */
    int64_t rollup_chunk_s;          /* per-second rows rolled up per step (the
                                        rest follow right after); 600 */
    size_t max_pending_rows;         /* rows held in memory while the database
                                        cannot be written; beyond this they are
                                        discarded and counted; 131072
                                        (about 8 MiB) */
    int64_t max_db_bytes;            /* cap on the database size (SQLite's
                                        max_page_count); 0 = none */
    store_clock clock;               /* STORE_CLOCK_WALL */
    char boot_id[40];                /* identity of this boot; "" = read
                                        /proc/sys/kernel/random/boot_id */
} store_config;

/* Fills `c` with the defaults above. */
void store_config_default(store_config *c);

typedef struct store store;

/* Opens (creating it and its schema, or migrating it forward) the database
 * at `path` and starts the writer thread. `c` may be NULL for the defaults.
 * Fails with -EINVAL for a bad configuration, -EPROTO for a database whose
 * schema is newer than this program's, -EBUSY when another store has it
 * open for writing, or the SQLite error as -EIO/-EACCES/
 * -ENOENT..., with `err` naming `path` and the reason. */
int store_open(const char *path, const store_config *c, store **out, char *err, size_t errlen);

/* Stops the writer after it has drained the queue and committed everything,
 * partial seconds included, then closes the database. Call it once the
 * producer has stopped pushing. Returns the last commit's error, if any. NULL
 * is allowed. */
int store_close(store *s);

/* Waits until everything pushed before the call is committed, the second in
 * progress included (later records of it add to its rows), or the commit
 * failed: its error is returned. Calibration rows are written only for
 * complete seconds. For tests and snapshots; the sampling thread must not
 * call it. */
int store_flush(store *s);

/* Like store_flush, but returns at once (0) when a flush that began at most
 * max_age_ms ago has already committed everything pushed before it: what the
 * caller sees then misses at most the last max_age_ms of pushes.  Under many
 * queries this bounds the writer to about one extra commit per max_age_ms
 * instead of one per query.  max_age_ms 0 is store_flush. Counted in
 * store_stats.flushes and flushes_shared. */
int store_flush_within(store *s, unsigned max_age_ms);

/* The wall-clock time (CLOCK_REALTIME ns) of the last successful
 * store_flush or store_flush_within that committed: a reader that begins
 * after either returned sees everything pushed before that time.  A second
 * that ends after it may still be missing records, even when
 * store_flush_within shared an older flush.  0 before the first flush and
 * after one that failed. */
int64_t store_flushed_at(store *s);

/* Runs one rollup-and-retention step now, in the writer thread, with `now_s`
 * (Unix seconds) as the present, after committing what is queued; waits for
 * it. Returns 0 when all is done, 1 when more per-second rows are due (a step
 * rolls up at most rollup_chunk_s of them; call again), -EINVAL for
 * now_s <= 0, or the database error. */
int store_maintain(store *s, int64_t now_s);

typedef struct store_stats {
    uint64_t pushed;  /* records accepted by store_push_* */
    uint64_t dropped; /* records refused because the queue was full */
    size_t queue_capacity;
    size_t queue_high_water; /* most records ever waiting */
    uint64_t commits;        /* transactions committed */
    uint64_t commit_failures;
    uint64_t rows_written; /* per-second rows upserted (all tables) */
    uint64_t rows_lost;    /* rows discarded after max_pending_rows */
    uint64_t pending_rows; /* rows held in memory, not yet committed */
    size_t max_pending_rows;
    double last_commit_ms, max_commit_ms;
    int64_t last_commit_ns; /* CLOCK_REALTIME of the last successful commit */
    uint64_t maintenance_runs;
    uint64_t moves_deferred; /* maintenance runs that readers' locks on the
                                settled file (PATH-settled) put off */
    int error;               /* -errno of the last failed commit or maintenance
                                step, 0 again after a successful commit */
    char error_text[512];    /* one line for people while error != 0 */
    int64_t db_bytes;        /* database file, its WAL and its settled
                                file (PATH-settled), as on disk */

    uint64_t flushes;        /* store_flush(_within) calls */
    uint64_t flushes_shared; /* ... answered by an earlier flush, no commit */
    uint64_t drains;         /* times the writer emptied the queue */
} store_stats;

/* Snapshot of the writer's health; safe from any thread (for GetStatus). */
void store_get_stats(store *s, store_stats *out);

/* Records a model the daemon loaded (sha256: 64 hex digits of the file's
 * bytes; json: the file) and gives its id, which every row it produces names.
 * A model seen before keeps its id. Never touches the disk: the row is written
 * with the next commit. Call it from any thread but the sampling one. */
int store_model_add(store *s, const char *sha256, const char *name, const char *engine,
                    const char *json, int32_t *id, char *err, size_t errlen);

/* This node's fit of measured = idle + scale * dynamic model power, for
 * one set of RAPL domains (lib/model calib_fit, docs/calibration.md). */
typedef struct store_node_calib {
    char target[64];          /* the domains the power was measured on: "package+dram" */
    int64_t t;                /* Unix seconds of the fit */
    double idle_w, idle_se_w; /* intercept and its standard error, watts */
    double scale, r2;         /* measured watts per model watt; NAN = unknown */
    double spread_w;          /* the load's spread in the rows fitted, watts */
    int64_t rows;             /* seconds fitted */
    char model_sha256[65];    /* the model whose dynamic power the scale is of */
} store_node_calib;

/* Keeps `c` as the node's calibration for c->target, replacing the one
 * there: written with the next commit, never touching the disk here (the
 * latest call wins). Any thread but the sampling one. -EINVAL for a row
 * without a target or with a non-finite or negative idle. */
int store_node_calib_save(store *s, const store_node_calib *c);

/* Writes `c` into the node_calibration table of the database at `path`
 * (made by wattprofd; never created here), with its own short connection:
 * for `wattprof calibrate`, beside a running daemon or none. The daemon
 * reads it at its next start. -EINVAL for a row store_node_calib_save would
 * refuse, -EIO when the file cannot be opened or written; `err` says why. */
int store_node_calib_put(const char *path, const store_node_calib *c, char *err, size_t errlen);
/* Whether store_node_calib_put could write to `path` (it opens, and
 * prepares the write, but writes nothing): 0, or -EIO with `err` as
 * store_node_calib_put says it. For checking before minutes of measuring. */
int store_node_calib_check(const char *path, char *err, size_t errlen);

/* The node's latest fit of measured = idle + sum_j coef_j * P_j that was
 * used, P_j the model's dynamic power through event j (lib/model calib_ev,
 * docs/calibration.md), for one set of RAPL domains: kept in the
 * node_event_calibration table (node_events.c) so that a daemon restarted
 * with the same model uses it at once. */
#define STORE_EVCAL_MAX 8       /* events, as lib/model's CALIB_EV_MAX */
#define STORE_EVCAL_NAME_LEN 64 /* bytes of an event's name, NUL included */
typedef struct store_node_evcal {
    char target[64];       /* the domains the power was measured on */
    int64_t t;             /* Unix seconds of the fit */
    char model_sha256[65]; /* the model the coefficients are of (64 hex digits) */
    size_t n_events;       /* 1..STORE_EVCAL_MAX */
    char events[STORE_EVCAL_MAX][STORE_EVCAL_NAME_LEN]; /* the model's, in its order */
    double coef[STORE_EVCAL_MAX];    /* measured W per model W of each event, > 0 */
    double coef_se[STORE_EVCAL_MAX]; /* their standard errors; NAN: fixed at the scale */
    double scale;                    /* the single scale on the same rows; NAN = unknown */
    double alpha;                    /* the ridge penalty chosen (finite, >= 0) */
    double idle_w, idle_se_w;        /* intercept (>= 0) and its standard error (NAN = unknown) */
    int64_t rows;                    /* seconds fitted */
} store_node_evcal;

/* Keeps `c` as the node's per-event fit for c->target, replacing the one
 * there: written with the next commit (the latest call wins), as
 * store_node_calib_save. Any thread but the sampling one. -EINVAL, and
 * nothing kept, for a row without a target, without a model SHA-256 or
 * events, with a coefficient that is not positive, a negative or non-finite
 * idle or penalty. */
int store_node_evcal_save(store *s, const store_node_evcal *c);

/* ---- Pushing per-tick deltas (push.c) ------------------------------------ */
/* All store_push_* are for ONE producer thread at a time (the sampler). They
 * return 0, or -EAGAIN when the queue was full and the record was dropped
 * (counted), or -EINVAL for a record the store cannot take. */

/* One process's share of one tick. Push only processes that ran: every
 * pushed process gets a row for that second. */
typedef struct store_proc_tick {
    int64_t t_ns;
    pid_t pid;
    uint64_t start_time;
    double attributed_j; /* share of the host's active energy */
    double standalone_j; /* p_k(x)·dt, the process alone */
    double cpu_s;        /* task-clock over the tick, seconds */
    int klass;
    int32_t model_id; /* from store_model_add, 0 = none */
} store_proc_tick;
int store_push_proc(store *s, const store_proc_tick *t);

/* How many queue records are free now. A producer that may wait (a replay,
 * which has no deadline) waits for room before a tick rather than have its
 * records dropped; the live sampler never waits. */
size_t store_push_room(store *s);

/* The host's split of one tick: host_j = idle_j + attributed_j +
 * unattributed_j. Push one every tick, even when no process ran: a record of
 * a new second is what completes the previous ones. */
typedef struct store_host_tick {
    int64_t t_ns;
    double dt_s;
    bool measured; /* host_j from RAPL (else from the model) */
    double host_j, idle_j, attributed_j, unattributed_j, modeled_j;
    int32_t model_id;
    /* The calibration the tick was attributed under: where idle came from
     * ("fitted", "stored", "model", "percentile"; NULL: not said; any
     * other is -EINVAL) and the Unix second of the fit (0: no fit; one
     * after the tick is taken as of the tick). A second keeps its last
     * tick's. */
    const char *idle_source;
    int64_t calib_t;
} store_host_tick;
int store_push_host(store *s, const store_host_tick *t);

/* One RAPL domain's energy over a tick ("package", "dram", ...; at most
 * STORE_DOMAIN_LEN-1 bytes). measured_j or modeled_j may be NAN (not known). */
int store_push_domain(store *s, int64_t t_ns, const char *domain, double measured_j,
                      double modeled_j);

/* The sum over class `klass`'s processes of each event's rate (events/s,
 * the model's event order) for one tick of dt_s seconds: the trainer's
 * input. Push one per class per tick; the calibration row of a second holds
 * dt-weighted means and the measured domain power of that second. A second
 * in which the model changes keeps only the newest model's rates. Takes
 * ceil(n_rates / 5) queue records, all or none. */
int store_push_calibration(store *s, int64_t t_ns, double dt_s, int32_t model_id, int klass,
                           const double *rates, size_t n_rates);

/* A process was found: its description. Strings are copied (this allocates);
 * NULL strings stay unknown. */
typedef struct store_proc_info {
    int64_t t_ns; /* first seen */
    pid_t pid;
    uint64_t start_time;
    const char *comm, *cmdline, *cgroup;
    const char *job; /* batch job id; NULL or "" = none (a later "" keeps the old) */
    int64_t uid;     /* -1 = unknown */
} store_proc_info;
int store_push_proc_info(store *s, const store_proc_info *info);

/* A process exited at t_ns. */
int store_push_proc_exit(store *s, pid_t pid, uint64_t start_time, int64_t t_ns);

/* ---- Queries (reader.c, query*.c) ------------------------------------------ */

typedef struct store_reader store_reader;

/* Opens `path` read-only; -ENOENT when it does not exist, -EPROTO when its
 * schema is not this program's (a writer migrates on open). */
int store_reader_open(const char *path, store_reader **out, char *err, size_t errlen);
void store_reader_close(store_reader *r);

/* Gives the reader's statements from now on budget_s seconds in all
 * (0: no limit): a query still running then stops, and fails with -ETIME
 * and err naming the limit. Each call starts a new budget. */
void store_reader_budget(store_reader *r, double budget_s);

/* Frees what SQLite caches for the reader (its page cache), after a large
 * query; the next query reads the pages again. */
void store_reader_release_memory(store_reader *r);

/* The newest second with a host row, in *t (-1 when there is none). */
int store_latest_second(store_reader *r, int64_t *t, char *err, size_t errlen);

/* A process, with its lifetime totals and its energy inside a window. */
typedef struct store_process {
    int64_t id; /* row id in processes */
    char boot_id[40];
    pid_t pid;
    uint64_t start_time;
    char *comm, *cmdline, *cgroup; /* NULL when never described */
    char *job;                     /* batch job id, NULL outside a job */
    int64_t uid;                   /* -1 unknown */
    int64_t first_seen, last_seen; /* Unix seconds */
    int64_t exit_time;             /* Unix seconds, 0 while running or unknown */
    int klass;                     /* latest class, -1 unknown */
    double total_attributed_j, total_standalone_j, total_cpu_s; /* lifetime */
    /* inside the window (store_list_processes only) */
    double attributed_j, standalone_j, cpu_s;
    double power_w;  /* attributed_j over the part of the window the process
                        was alive: [max(since, first_seen), min(until,
                        (exit_time or last_seen) + 1)), at least 1 s */
    int64_t seconds; /* rows in the window (a minute row counts once) */
} store_process;
void store_processes_free(store_process *p, size_t n);

typedef enum store_sort {
    STORE_SORT_ENERGY, /* window attributed_j, largest first */
    STORE_SORT_POWER,  /* power_w */
    STORE_SORT_CPU,    /* window cpu_s */
} store_sort;

typedef struct store_process_query {
    int64_t since, until; /* Unix seconds, [since, until); minute rows count
                             when their minute starts inside */
    store_sort sort;
    size_t limit;           /* 0 = no limit */
    size_t offset;          /* rows of the order to skip first (paging) */
    int64_t uid;            /* -1 = any */
    const char *comm_regex; /* regex on comm (util_regex: PCRE2), NULL = any */
    const char *job;        /* batch job id, NULL = any */
    bool only_running;      /* leave out processes that have exited */
} store_process_query;

/* Processes with energy rows in the window, sorted (ties by row id). A bad
 * regex is -EINVAL with `err` naming it. */
int store_list_processes(store_reader *r, const store_process_query *q, store_process **out,
                         size_t *n, char *err, size_t errlen);

/* One per-second (or per-minute, from rollups) row of a process. */
typedef struct store_second {
    int64_t t;
    double attributed_j, standalone_j, cpu_s;
    int klass;
    int32_t model_id;
} store_second;

/* A process's totals and its per-second rows of the last `recent_s` seconds
 * before its last_seen. start_time 0 picks the most recently seen process
 * with that pid. -ENOENT when there is none. Free with store_process_free
 * and free(*series). */
int store_get_process(store_reader *r, pid_t pid, uint64_t start_time, int64_t recent_s,
                      store_process *out, store_second **series, size_t *n_series, char *err,
                      size_t errlen);
void store_process_free(store_process *p);

/* When a process's class changed: its first row's class, then every row
 * whose class differs from the one before (seconds and minute rows, in time
 * order). process_id is store_process.id. Free *out with free(). */
typedef struct store_class_change {
    int64_t t;
    int klass;
} store_class_change;
int store_process_classes(store_reader *r, int64_t process_id, store_class_change **out, size_t *n,
                          char *err, size_t errlen);

typedef enum store_history_by {
    STORE_HISTORY_PID,  /* every process with that pid */
    STORE_HISTORY_COMM, /* every process whose comm matches a regex (util_regex) */
    STORE_HISTORY_UID,
    STORE_HISTORY_HOST, /* host_attribution */
    STORE_HISTORY_JOB,  /* every process of a batch job */
} store_history_by;

typedef struct store_history_query {
    store_history_by by;
    pid_t pid;
    const char *comm;
    int64_t uid;
    const char *job;
    int64_t since, until; /* [since, until), Unix seconds */
    int64_t step;         /* bucket width in seconds, >= 1 */
} store_history_query;

/* One bucket [t, t + step). Process history fills attributed/standalone/cpu;
 * host history fills host_j, idle_j, attributed_j, unattributed_j and
 * modeled_j (cpu_s and standalone_j are 0). */
typedef struct store_point {
    int64_t t;
    double attributed_j, standalone_j, cpu_s;
    double host_j, idle_j, unattributed_j, modeled_j;
    bool measured;    /* host: every second of the bucket measured by RAPL */
    double covered_s; /* host: the seconds of the bucket the daemon sampled (the
                         step when it ran throughout) */
    /* host: the calibration of the bucket's last second (idle_source "" and
     * calib_t 0 where not recorded), and how many different ones its
     * seconds were attributed under */
    char idle_source[16];
    int64_t calib_t;
    int calibrations;
} store_point;

/* The calibrations the host's seconds in [since, until) were attributed
 * under, each from the first second it was in use: where idle came from
 * ("" where not recorded) and the fit's Unix second (0: none). At most
 * STORE_MAX_CALIB_CHANGES, the earliest; *out is the caller's to free. */
#define STORE_MAX_CALIB_CHANGES 64
typedef struct store_calib_change {
    int64_t t;
    char idle_source[16];
    int64_t calib_t;
} store_calib_change;
int store_calibration_changes(store_reader *r, int64_t since, int64_t until,
                              store_calib_change **out, size_t *n, char *err, size_t errlen);

/* Buckets with data, in time order (empty buckets are left out). */
int store_history(store_reader *r, const store_history_query *q, store_point **out, size_t *n,
                  char *err, size_t errlen);

/* A batch job as its processes on this node show it (jobs.c). */
typedef struct store_job {
    char *job;
    int64_t uid;            /* of its first process; -1 unknown */
    int64_t start, end;     /* Unix seconds: its processes' first and last seen */
    bool running;           /* a process of it has not exited */
    int64_t processes;      /* processes of it on this node */
    double energy_j, cpu_s; /* attributed, inside the window */
    double node_j;          /* the node's energy (host_attribution) over [start, end] in
                               the window, by whole minutes where rolled up: energy_j /
                               node_j is the job's share */
} store_job;

typedef struct store_job_query {
    int64_t since, until; /* Unix seconds, [since, until): jobs with a process seen inside */
    int64_t uid;          /* -1 = any */
    const char *job;      /* one job, NULL = all */
    /* Keyset paging: only the jobs listed after the one that started at
     * before_start with id before_job (those that started earlier, or in
     * the same second with a greater id); before_job NULL = from the first.
     * Jobs starting later cannot move the rest of the listing. */
    const char *before_job;
    double before_start;
    size_t limit; /* at most this many jobs; 0 = all */
} store_job_query;

/* Jobs with a process seen in the window, newest start first (ties by job
 * id), with their energy in the window. Free with store_jobs_free. */
int store_list_jobs(store_reader *r, const store_job_query *q, store_job **out, size_t *n,
                    char *err, size_t errlen);
void store_jobs_free(store_job *j, size_t n);

typedef struct store_model_row {
    int32_t id;
    char sha256[65];
    char *name, *engine, *json;
    int64_t first_loaded, last_loaded; /* Unix seconds */
} store_model_row;
int store_list_models(store_reader *r, store_model_row **out, size_t *n, char *err, size_t errlen);
void store_models_free(store_model_row *m, size_t n);

typedef struct store_calibration_row {
    int64_t t;
    double duration_s;
    int32_t model_id;
    size_t n_domains;
    char (*domain)[STORE_DOMAIN_LEN];
    double *power_w; /* n_domains, mean measured power */
    size_t n_classes, n_events;
    double *rates; /* n_classes * n_events, row-major: mean events/s per class */
} store_calibration_row;

/* The node's calibration for `target`; -ENOENT when there is none. */
int store_node_calib_get(store_reader *r, const char *target, store_node_calib *out, char *err,
                         size_t errlen);

/* The node's per-event fit for `target`; -ENOENT when there is none, -EBADMSG
 * (naming the column) for a row this code cannot read. */
int store_node_evcal_get(store_reader *r, const char *target, store_node_evcal *out, char *err,
                         size_t errlen);

/* Calibration rows with t >= since, oldest first, at most `limit` (0 = all). */
int store_calibration_since(store_reader *r, int64_t since, size_t limit,
                            store_calibration_row **out, size_t *n, char *err, size_t errlen);
void store_calibration_free(store_calibration_row *c, size_t n);

#endif
