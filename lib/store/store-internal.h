/* store-internal: what the files of lib/store share and nobody else sees —
 * the queue record, the single-producer queue, the writer's per-second
 * accumulators, the schema and the writer's connection. */
#ifndef WATTPROF_STORE_INTERNAL_H
#define WATTPROF_STORE_INTERNAL_H

#include "store/packed.h"
#include "store/saved_row.h"
#include "store/store.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>

/* ---- Queue records ------------------------------------------------------- */

enum item_kind {
    ITEM_PROC = 1,
    ITEM_HOST,
    ITEM_DOMAIN,
    ITEM_CALIB,
    ITEM_INFO,
    ITEM_EXIT,
};

#define CALIB_PER_ITEM 5 /* rates carried by one ITEM_CALIB record */

struct proc_info_blob {
    char *comm, *cmdline, *cgroup, *job;
    int64_t uid;
};
void store_proc_info_blob_free(struct proc_info_blob *b);

/* The idle sources a host tick may name, NULL first (not said). */
extern const char *const store_idle_sources[];
#define STORE_IDLE_SOURCES 5

typedef struct store_item {
    uint8_t kind;
    uint8_t klass;     /* ITEM_HOST: the index of its idle source in store_idle_sources */
    uint8_t measured;  /* ITEM_HOST */
    uint8_t n;         /* ITEM_CALIB: rates in this record */
    uint16_t off;      /* ITEM_CALIB: index of the first rate */
    uint16_t n_events; /* ITEM_CALIB: rates in the whole tick */
    int32_t model_id;
    int32_t pid; /* ITEM_HOST: the age of its fit in seconds, -1 for none */
    int64_t t_ns;
    union {
        struct {
            uint64_t start_time;
            double attributed_j, standalone_j, cpu_s;
        } proc;
        struct {
            double dt_s, host_j, idle_j, attributed_j, unattributed_j, modeled_j;
        } host;
        struct {
            char name[STORE_DOMAIN_LEN];
            double measured_j, modeled_j;
        } domain;
        struct {
            double dt_s;
            double rate[CALIB_PER_ITEM];
        } calib;
        struct {
            uint64_t start_time;
            struct proc_info_blob *info; /* ITEM_INFO only, owned by the record */
        } proc_id;
    } u;
} store_item;
_Static_assert(sizeof(store_item) == 72, "store.h documents 72-byte queue records");

/* ---- Single-producer single-consumer queue (ring.c) ------------------------ */

typedef struct ring {
    store_item *slot;
    size_t mask;         /* capacity - 1 */
    _Atomic size_t head; /* next slot the producer fills */
    _Atomic size_t tail; /* next slot the consumer reads */
} ring;

int ring_init(ring *q, size_t capacity);
void ring_free(ring *q);
/* Producer: true when n records are free; then *first is the position of
 * the first; fill ring_slot(first + i) and make them visible with
 * ring_publish(n). *used is how many records wait, these n included. */
bool ring_reserve(ring *q, size_t n, size_t *first, size_t *used);
void ring_publish(ring *q, size_t n);
/* Producer: how many records are free now. */
size_t ring_room(ring *q);
/* The record at position i (any position; wraps). */
static inline store_item *ring_slot(ring *q, size_t i)
{
    return &q->slot[i & q->mask];
}
/* Consumer: records [*first, *first + n) are readable; release them after. */
size_t ring_readable(ring *q, size_t *first);
void ring_release(ring *q, size_t n);

/* ---- Per-second accumulators (agg.c) --------------------------------------- */

typedef struct agg_sec {
    int64_t t;
    double attributed_j, standalone_j, cpu_s;
    int klass;
    int32_t model_id;
} agg_sec;

typedef struct agg_proc {
    int32_t pid;
    uint64_t start_time;
    agg_sec *sec; /* in time order */
    size_t n_sec, cap_sec;
    int64_t last_t;           /* newest second with a tick */
    int64_t row_id;           /* its processes.id as last written, 0 = not known; a
                                 hint the writer checks against the row's key */
    uint64_t row_txn;         /* the writer's transaction that created row_id: within
                                 it the row needs no check */
    size_t ev_first, ev_last; /* its events of this commit: index + 1 in
                                 agg.event, 0 = none */
} agg_proc;

#define AGG_IDLE_S 10

typedef struct agg_domain {
    int64_t t;
    char name[STORE_DOMAIN_LEN];
    double measured_j, modeled_j; /* NAN = none pushed */
} agg_domain;

typedef struct agg_host {
    int64_t t;
    double dt_s, host_j, idle_j, attributed_j, unattributed_j, modeled_j;
    bool measured;
    int32_t model_id;
    const char *idle_source; /* the second's last tick's */
    int64_t calib_t;
} agg_host;

typedef struct agg_calib {
    int64_t t;
    int32_t model_id;
    double duration_s;
    size_t n_events;
    unsigned n_classes;
    bool has_rates;
    double *sum; /* STORE_MAX_CLASSES * n_events: rate·dt */
    size_t n_domains;
    char domain[STORE_MAX_DOMAINS][STORE_DOMAIN_LEN];
    double domain_j[STORE_MAX_DOMAINS];
} agg_calib;

typedef struct agg_event {
    int kind; /* ITEM_INFO or ITEM_EXIT */
    int32_t pid;
    uint64_t start_time;
    int64_t t;
    struct proc_info_blob *info;
    size_t proc; /* index + 1 of its process in agg.proc, 0 = none (no memory) */
    size_t next; /* index + 1 of the process's next event, 0 = none */
} agg_event;

typedef struct agg {
    agg_proc *proc;
    size_t n_proc, cap_proc;
    uint32_t *index; /* open addressing: 0 = empty, else proc index + 1 */
    size_t index_cap;
    agg_domain *domain;
    size_t n_domain, cap_domain;
    agg_host *host;
    size_t n_host, cap_host;
    agg_calib *calib;
    size_t n_calib, cap_calib;
    agg_event *event;
    size_t n_event, cap_event;
    int64_t watermark; /* newest second of any tick record: every second before
                          it is complete, since the sampler pushes in order */
    int64_t oldest;    /* oldest second held, INT64_MAX when none */
    size_t rows;       /* rows held */
} agg;

void agg_init(agg *a);
void agg_free(agg *a);
/* Adds one record; takes ownership of an ITEM_INFO blob. -ENOMEM leaves the
 * record out (the caller counts it lost). */
int agg_add(agg *a, store_item *it);
/* Forgets what a commit wrote: every row of a second before `until`, every
 * calibration second before `calib_until`, and the process events. A
 * process left with no rows keeps its slot (and row id) while it had a
 * tick in the last AGG_IDLE_S seconds before the watermark. */
void agg_clear(agg *a, int64_t until, int64_t calib_until);
/* Frees and forgets all rows. */
void agg_discard(agg *a);

/* ---- Schema (schema.c) ------------------------------------------------------ */

/* Opens `path` read-write (creating it), sets WAL and the pragmas, and runs
 * the migrations from its user_version to STORE_SCHEMA_VERSION. */
int schema_open(const char *path, int64_t max_db_bytes, sqlite3 **out, char *err, size_t errlen);
/* Runs the migrations on an open connection. */
int schema_migrate(sqlite3 *db, const char *path, char *err, size_t errlen);
/* The first column of the one row `sql` returns into *v (`null_value`
 * for NULL); an SQLite code. */
int schema_int(sqlite3 *db, const char *sql, int64_t null_value, int64_t *v);
/* -errno for an SQLite result code. */
int schema_errno(sqlite3 *db, int rc);
/* Begins a transaction that writes the main file only. BEGIN IMMEDIATE
 * would take a write lock on every attached file too, and the commit of a
 * rollback-journal file with a write lock waits for its readers even when
 * nothing in it changed: a reader of the settled file would hold up every
 * per-second commit. The no-op UPDATE takes the main file's write lock at
 * once, as BEGIN IMMEDIATE did for it. */
#define SCHEMA_BEGIN_MAIN "BEGIN; UPDATE main.process_fold SET t = t WHERE false"
/* How long the writer's statements wait for a lock (the main file's). */
#define SCHEMA_BUSY_MS 5000
/* The page size of new files (schema.c says why). */
#define SCHEMA_PAGE_SIZE 1024

/* ---- The settled rows' file (settled.c) ------------------------------------- */

/* PATH-settled: copied with the database by `cp wattprof.db*`. */
#define SETTLED_SUFFIX "-settled"
/* The schema version that keeps the settled rows in it. */
#define SETTLED_VERSION 11
/* The same number as SQL text, made from it. */
#define SETTLED_TEXT_(v) #v
#define SETTLED_TEXT(v) SETTLED_TEXT_(v)
#define SETTLED_VERSION_TEXT SETTLED_TEXT(SETTLED_VERSION)
/* How long a commit of the settled file waits for readers' locks before
 * maintenance gives up until its next run (retention.c). */
#define SETTLED_BUSY_MS 100

/* The recent rows (correlation name R) that a settled batch holds already:
 * the same process and second in a batch that spans it. The move leaves
 * them out; the open drops them from the recent table. */
#define SETTLED_ALREADY(R)                                                                         \
    "EXISTS (SELECT 1 FROM settled.process_energy_batch b"                                         \
    " CROSS JOIN settled.process_energy_settled e ON e.batch = b.batch"                            \
    " AND e.process_id = " R ".process_id AND e.t = " R ".t"                                       \
    " WHERE b.t_max >= " R ".t AND b.t_min <= " R ".t)"

int settled_path(const char *db_path, char *buf, size_t len);
/* Creates (0640) and attaches the settled file as "settled" with its
 * pragmas and tables; `version` is the main file's user_version before
 * any migration, for the one line a missing file of a database that had
 * one logs. */
int settled_attach_writer(sqlite3 *db, const char *db_path, int version, char *err, size_t errlen);
/* Attaches it to a read-only connection (which neither creates nor
 * writes it). */
int settled_attach_reader(sqlite3 *db, const char *db_path, char *err, size_t errlen);
/* Deletes, in one transaction of the main file, the recent rows that the
 * settled file holds already (a crash between the move's two commits). */
int settled_drop_moved(sqlite3 *db, const char *db_path, char *err, size_t errlen);
/* Makes what the main file's WAL holds durable (its commits are not synced
 * one by one, synchronous=NORMAL) before a move commits rows that name its
 * processes in the settled file, which is synced at each commit: a power
 * cut then cannot leave settled rows whose process rows were lost, and
 * whose ids would be given to other processes. 0 or -errno. */
int settled_sync_main(sqlite3 *db, char *err, size_t errlen);
/* The migration step "settled file", 9 -> 10; an SQLite code. */
int migrate_settled_file(sqlite3 *db);

/* ---- The store ------------------------------------------------------------------- */

typedef struct model_entry {
    int32_t id;
    char sha256[65];
    char *name, *engine, *json;
    int64_t loaded; /* Unix seconds */
    bool written;   /* its row is in the database */
    bool in_txn;    /* written in the transaction under way */
} model_entry;

/* A per-second process row on its way into the database (conn.c). */
typedef struct conn_row {
    int64_t process_id;
    const agg_sec *sec;
} conn_row;

/* ---- The clock that stamps live rows (wallclock.c) ------------------------- */

/* A forward step of CLOCK_REALTIME: its size and when it was seen. */
typedef struct store_wallclock_step {
    int64_t mono_ns, step_ns;
} store_wallclock_step;

#define WALLCLOCK_STEPS 16

/* The writer's: the largest wall-minus-monotonic offset seen (INT64_MIN:
 * none yet), and the forward steps seen within the last window. */
typedef struct store_wallclock {
    int64_t offset_ns;
    store_wallclock_step steps[WALLCLOCK_STEPS];
    size_t n_steps;
} store_wallclock;

void wallclock_init(store_wallclock *w);
/* The stamp clock's second at CLOCK_MONOTONIC mono_ns, CLOCK_REALTIME
 * wall_ns: monotonic time plus the largest offset seen. *held_s: the
 * forward steps seen within the last window_s seconds, by which the
 * per-second cut is held back. */
int64_t wallclock_read(store_wallclock *w, int64_t mono_ns, int64_t wall_ns, int64_t window_s,
                       int64_t *held_s);

struct store {
    char *path;
    int lock_fd; /* flock on PATH-lock: one writer per file */
    store_config cfg;
    ring queue;
    _Atomic uint64_t pushed, dropped;
    _Atomic size_t high_water;

    /* writer thread only */
    sqlite3 *db;
    sqlite3_stmt *stmt[24];
    agg acc;
    conn_row *order; /* a commit's per-second rows, sorted (conn.c) */
    size_t cap_order;
    packed_rec *pack, *merged, *old; /* one second's records: new, as
                                        written, as read back (conn.c) */
    size_t cap_pack, cap_merged, cap_old;
    size_t chunk_max; /* the longest chunk a leaf cell holds (packed.h) */
    uint8_t *pack_blob;
    size_t cap_blob;
    int64_t partial_from; /* the oldest second in process_energy_recent that
                             later ticks may add to (a flush committed it
                             in progress); INT64_MAX: none */
    int64_t fold_t;       /* process_fold.t: the processes rows count every
                             second before it (conn.c) */
    uint64_t txn;         /* counts the writer's transactions (conn.c) */
    int64_t fold_txn;     /* the fold the transaction under way wrote, 0: none */
    int64_t ckpt_since;   /* CLOCK_MONOTONIC s of the first commit since the
                             last checkpoint, 0: none (checkpoint.c) */
    dev_t db_dev, settled_dev;
    ino_t db_ino, settled_ino;
    bool settle_deferred; /* the last maintenance was put off (logged once) */
    int64_t last_error_logged;
    store_wallclock clock; /* the writer's, for retention on the wall clock */

    pthread_t thread;
    pthread_mutex_t lock; /* everything below */
    pthread_cond_t wake, done;
    bool stop;
    uint64_t req_seq, done_seq;
    int req_result;
    int64_t flushed_ns;      /* CLOCK_MONOTONIC when the drain of the last
                                successful requested commit began: all pushed
                                before it is committed (0 = none yet) */
    int64_t flushed_real_ns; /* the same moment, CLOCK_REALTIME */
    int64_t maintain_now;    /* > 0: store_maintain asked for this time */
    model_entry *model;
    size_t n_model;
    store_node_calib node;  /* store_node_calib_save's latest, in node_row */
    saved_row node_row;     /* both guarded by this lock */
    store_node_evcal evcal; /* store_node_evcal_save's latest, in evcal_row */
    saved_row evcal_row;
    store_stats stats;
};

/* The writer thread's body (writer.c). */
void *writer_main(void *arg);

/* ---- The writer's connection (conn.c) ---------------------------------------- */

/* The writer's prepared statements, s->stmt[] (their SQL: conn.c). */
enum conn_stmt {
    ST_PROC,
    ST_PROC_CHECK,
    ST_FOLD,
    ST_FOLD_ROW,
    ST_FOLD_SET,
    ST_FOLD_SUMS,
    ST_FOLD_MARK,
    ST_FOLD_GET,
    ST_PROC_ID,
    ST_PACKED_GET,
    ST_PACKED_DEL,
    ST_PACKED_PUT,
    ST_INFO,
    ST_EXIT,
    ST_TOTALS,
    ST_NEW,
    ST_NEW_TOTALS,
    ST_DOMAIN,
    ST_HOST,
    ST_CALIB,
    ST_MODEL,
    ST_NODE,
    ST_COUNT,
};

/* Steps a statement to its end, resets it and clears its bindings; returns
 * the SQLite code. */
int conn_run(sqlite3_stmt *st);
/* Binds v to parameter i, or NULL where v is not finite (not measured,
 * not identifiable). */
void conn_bind_real(sqlite3_stmt *st, int i, double v);

/* Opens the database for the writer (first open, and again after trouble)
 * and prepares its statements; records the file's identity. */
int conn_open(store *s, char *err, size_t errlen);
/* Replaces SQLite's checkpoint every 1,000 WAL pages on s->db with the
 * writer's own policy (checkpoint.c). */
void checkpoint_policy(store *s);
void conn_close(store *s);
/* The upsert of one node_calibration row, ?1..?9 in store_node_calib's
 * order (the writer's ST_NODE statement and store_node_calib_put). */
#define NODE_CALIB_UPSERT                                                                          \
    "INSERT OR REPLACE INTO node_calibration (target, t, idle_w, idle_se_w, scale, r2,"            \
    " spread_w, rows, model_sha256) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
/* The node's calibration (node.c, with ST_NODE) and per-event fit
 * (node_events.c), written inside the caller's transaction when one was
 * saved since the last commit (s->node_row, s->evcal_row: saved_row.h says
 * the rest); SQLite codes. */
int node_calib_write(store *s, sqlite3_stmt *st);
int node_evcal_write(store *s);

/* Loads the models table into s->model (at open). */
int conn_load_models(store *s, char *err, size_t errlen);
/* Writes, inside the caller's transaction, the models not yet written, the
 * process events, and the rows of seconds before `until` (calibration:
 * before `calib_until`); *rows counts them. Returns an SQLite code. */
int conn_write_rows(store *s, int64_t until, int64_t calib_until, uint64_t *rows);
bool conn_models_pending(store *s);
/* Every FOLD_INTERVAL_S seconds of data (and at close), inside the caller's
 * transaction: adds the rows of process_energy_recent of seconds from
 * fold_t up to `cut` to their processes' rows and moves the watermark
 * there. Returns an SQLite code. */
#define FOLD_INTERVAL_S 10
int conn_fold(store *s, int64_t cut);
/* A second before the fold watermark (a late one, or one that a restart
 * split) added to the totals of process row `id` directly, as no fold will
 * take it (fold.c). Returns an SQLite code. */
int fold_add_late(store *s, int64_t id, const agg_sec *e);
/* After the transaction: the fold it wrote holds if it committed. */
void conn_fold_end_txn(store *s, bool committed);
/* After the transaction: the models it wrote are written if it committed. */
void conn_models_end_txn(store *s, bool committed);
/* A new file has none of the models. */
void conn_models_unwritten(store *s);

/* ---- Calibration rows as JSON (calib.c) ------------------------------------- */

/* power: {"domain": W, ...} (mean over the second); rates: one array per
 * class of mean events/s. Both malloc'd. */
int store_calib_json(const agg_calib *c, char **power, char **rates);
/* The reverse, into row's arrays; -EBADMSG names nothing, the caller does. */
int store_calib_parse(const char *power, const char *rates, store_calibration_row *row);

/* ---- Rollups and retention (retention.c) ------------------------------------ */

/* One rollup-and-retention step at `now_s`, with per-second rows kept
 * `held_s` longer (wallclock.c), after moving the rows of
 * process_energy_recent of seconds before `move_before` (INT64_MAX: all) to
 * process_energy_settled: 0 when it is all done, 1 when more per-second
 * rows are due (run it again soon), RETENTION_BUSY when readers held the
 * settled file past SETTLED_BUSY_MS (what was committed holds; the rest
 * waits for the next run), or -errno. */
#define RETENTION_BUSY 2
int retention_run(sqlite3 *db, const store_config *c, int64_t now_s, int64_t held_s,
                  int64_t move_before, char *err, size_t errlen);
/* Moves every row of process_energy_recent, adding them to their processes'
 * rows, in one transaction (at close, so that the processes table alone
 * has the totals): 0 or -errno. */
int retention_settle(sqlite3 *db, char *err, size_t errlen);

#endif
