/* Benchmark helper for tests/bench/sqlite: what lib/store writes to SQLite
 * for N processes, and how fast, against a plain SQLite insert loop.
 *
 *   real   N SECONDS DB          50 Hz for SECONDS of wall time through
 *                                lib/store (default configuration): the
 *                                rows of a real run, and the size in use
 *                                sampled every second ("used").
 *   replay N SIM_SECONDS DB DAY  the same records, one tick per simulated
 *                                second, at full speed, with the store's
 *                                data clock and every retention scaled so
 *                                that DAY simulated seconds stand for 24 h
 *                                (seconds DAY, calibration 7 DAY, minutes
 *                                90 DAY); rollups run every
 *                                simulated minute. Samples the database's
 *                                size: [simulated s, bytes in use above the
 *                                empty schema, bytes free for reuse].
 *   peer   N SIM_SECONDS DB      the floor: the same per-second rows
 *                                (process_energy_packed, host_energy,
 *                                host_attribution, calibration) inserted
 *                                into the store's own schema by a prepared
 *                                INSERT loop, one transaction per simulated
 *                                second, same journal settings, no store.
 *
 * Each prints one JSON object on stdout. */
#include "store/packed.h"
#include "store/store.h"
#include "util/util.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#define NS 1000000000LL
#define N_EVENTS 22
#define SIM_EPOCH 1700000000LL /* first simulated second (Unix time) */
#define FLUSH_EVERY_S                                                                              \
    40                      /* simulated seconds between flushes: keeps                            \
                               the queue (16384 records) from overflowing */
#define MAINTAIN_EVERY_S 60 /* the writer's own maintain_interval_s */
#define SAMPLES 40          /* size samples over a replay */

static double cpu_s(int who)
{
    struct rusage ru;

    getrusage(who, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int64_t file_bytes(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 ? st.st_size : 0;
}

/* The database as SQLite sees it, WAL included: pages in use and pages
 * free for reuse (left by deleted rows), in bytes. */
static int db_size(const char *path, int64_t *used, int64_t *freed)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    int64_t v[3] = {0};
    const char *q[3] = {"PRAGMA page_count", "PRAGMA freelist_count", "PRAGMA page_size"};
    int r = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK ? 0 : -EIO;

    for (int i = 0; r == 0 && i < 3; i++) {
        r = sqlite3_prepare_v2(db, q[i], -1, &st, NULL) == SQLITE_OK ? 0 : -EIO;
        if (r == 0 && sqlite3_step(st) == SQLITE_ROW)
            v[i] = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    *used = (v[0] - v[1]) * v[2];
    *freed = v[1] * v[2];
    return r;
}

static double wall_s(void)
{
    return util_now_ns(CLOCK_MONOTONIC) / 1e9;
}

/* The records of one tick of dt_s seconds for n processes, as the daemon
 * pushes them: processes, the host split, two domains, two classes. */
static int push_tick(store *s, int n, int64_t t_ns, double dt_s, const double *rates)
{
    store_host_tick h = {.t_ns = t_ns,
                         .dt_s = dt_s,
                         .measured = true,
                         .host_j = 100 * dt_s,
                         .idle_j = 50 * dt_s,
                         .attributed_j = 45 * dt_s,
                         .unattributed_j = 5 * dt_s,
                         .modeled_j = 98 * dt_s,
                         .model_id = 1};
    int r = 0;

    for (int i = 0; i < n; i++) {
        store_proc_tick t = {.t_ns = t_ns,
                             .pid = 1000 + i,
                             .start_time = 100 + i,
                             .attributed_j = 0.2 * dt_s * (1 + i % 7),
                             .standalone_j = 0.25 * dt_s * (1 + i % 7),
                             .cpu_s = 0.01 * dt_s * (1 + i % 5),
                             .klass = i % 2,
                             .model_id = 1};
        r = r ? r : store_push_proc(s, &t);
    }
    r = r ? r : store_push_host(s, &h);
    r = r ? r : store_push_domain(s, t_ns, "package", 90 * dt_s, 88 * dt_s);
    r = r ? r : store_push_domain(s, t_ns, "dram", 10 * dt_s, 10 * dt_s);
    r = r ? r : store_push_calibration(s, t_ns, dt_s, 1, 0, rates, N_EVENTS);
    return r ? r : store_push_calibration(s, t_ns, dt_s, 1, 1, rates, N_EVENTS);
}

static int push_infos(store *s, int n, int64_t t_ns)
{
    char comm[16], cmdline[64];

    for (int i = 0; i < n; i++) {
        snprintf(comm, sizeof(comm), "worker%d", i % 17);
        snprintf(cmdline, sizeof(cmdline), "/usr/bin/worker%d --job %d", i % 17, i);
        store_proc_info info = {.t_ns = t_ns,
                                .pid = 1000 + i,
                                .start_time = 100 + i,
                                .comm = comm,
                                .cmdline = cmdline,
                                .cgroup = "/system.slice/worker.service",
                                .uid = 1000};
        int r = store_push_proc_info(s, &info);
        if (r < 0)
            return r;
    }
    return 0;
}

static void fill_rates(double *rates)
{
    for (int j = 0; j < N_EVENTS; j++)
        rates[j] = 1e6 * (j + 1) + 0.37 * j;
}

static int run_real(int n, int seconds, const char *path)
{
    char err[UTIL_ERRLEN];
    double rates[N_EVENTS];
    store *s;
    store_stats st;
    struct timespec next;
    int r;

    fill_rates(rates);
    r = store_open(path, NULL, &s, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "%s\n", err);
        return r;
    }
    int64_t empty = file_bytes(path), freed;
    /* The size in use once a second: its slope is the growth, free of the
     * first pages each table and index takes. */
    int64_t *used = calloc(seconds, sizeof(*used));
    if (!used) {
        store_close(s);
        return -ENOMEM;
    }
    double cpu0 = cpu_s(RUSAGE_SELF), thr0 = cpu_s(RUSAGE_THREAD), w0 = wall_s();
    r = push_infos(s, n, util_now_ns(CLOCK_REALTIME));
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (int k = 0; r == 0 && k < seconds * 50; k++) {
        next.tv_nsec += NS / 50;
        if (next.tv_nsec >= NS) {
            next.tv_nsec -= NS;
            next.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        r = push_tick(s, n, util_now_ns(CLOCK_REALTIME), 0.02, rates);
        if (r == 0 && (k + 1) % 50 == 0)
            r = db_size(path, &used[k / 50], &freed);
    }
    double wall = wall_s() - w0;
    double writer_cpu = cpu_s(RUSAGE_SELF) - cpu0 - (cpu_s(RUSAGE_THREAD) - thr0);
    store_get_stats(s, &st);
    int rc = store_close(s);
    if (r < 0 || rc < 0) {
        fprintf(stderr, "%s: store failed: %s\n", path, strerror(-(r ? r : rc)));
        free(used);
        return r ? r : rc;
    }
    printf("{\"mode\": \"real\", \"used\": [");
    for (int k = 0; k < seconds; k++)
        printf("%s%" PRId64, k ? ", " : "", used[k]);
    free(used);
    printf("], \"processes\": %d, \"wall_s\": %.3f, \"rows_written\": %" PRIu64
           ", \"rows_per_s\": %.1f, \"bytes\": %" PRId64 ", \"bytes_per_s\": %.1f,"
           " \"writer_cpu_pct\": %.3f, \"dropped\": %" PRIu64 ", \"commits\": %" PRIu64 "}\n",
           n, wall, st.rows_written, st.rows_written / wall, file_bytes(path) - empty,
           (file_bytes(path) - empty) / wall, 100 * writer_cpu / wall, st.dropped, st.commits);
    return 0;
}

/* Rolls up everything that is due at simulated time now_s. */
static int maintain(store *s, int64_t now_s)
{
    int r;

    while ((r = store_maintain(s, now_s)) == 1)
        ;
    return r;
}

static int run_replay(int n, int sim_s, const char *path, int64_t day)
{
    char err[UTIL_ERRLEN];
    double rates[N_EVENTS];
    store_config c;
    store_stats st;
    store *s;
    int r, every = sim_s / SAMPLES > 0 ? sim_s / SAMPLES : 1;

    fill_rates(rates);
    store_config_default(&c);
    c.clock = STORE_CLOCK_DATA;
    c.second_retention_s = day;
    c.calibration_retention_s = 7 * day;
    c.minute_retention_s = 90 * day;
    c.min_commit_gap_ms = 0;
    r = store_open(path, &c, &s, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "%s\n", err);
        return r;
    }
    int64_t empty, used, freed;
    db_size(path, &empty, &freed);
    double w0 = wall_s();
    printf("{\"mode\": \"replay\", \"processes\": %d, \"day_s\": %" PRId64 ", \"sizes\": [", n,
           day);
    r = push_infos(s, n, SIM_EPOCH * NS);
    for (int k = 0; r == 0 && k < sim_s; k++) {
        int64_t t = SIM_EPOCH + k;
        r = push_tick(s, n, t * NS, 1.0, rates);
        if (r == 0 && (k + 1) % FLUSH_EVERY_S == 0)
            r = store_flush(s);
        /* sampled before the maintenance due at the same second: its move
         * holds a minute of per-second rows twice for an instant, which a
         * compressed day (one minute long in the quick run) would count as
         * a day's growth */
        if (r == 0 && (k + 1) % every == 0) {
            r = store_flush(s);
            r = r ? r : db_size(path, &used, &freed);
            printf("%s[%d, %" PRId64 ", %" PRId64 "]", k + 1 == every ? "" : ", ", k + 1,
                   used - empty, freed);
        }
        if (r == 0 && (k + 1) % MAINTAIN_EVERY_S == 0)
            r = maintain(s, t);
    }
    double wall = wall_s() - w0;
    store_get_stats(s, &st);
    int rc = store_close(s);
    if (r < 0 || rc < 0) {
        fprintf(stderr, "%s: store failed: %s\n", path, strerror(-(r ? r : rc)));
        return r ? r : rc;
    }
    printf("], \"sim_s\": %d, \"wall_s\": %.3f, \"rows_written\": %" PRIu64
           ", \"rows_per_s\": %.1f, \"final_bytes\": %" PRId64 ", \"dropped\": %" PRIu64
           ", \"maintenance_runs\": %" PRIu64 ", \"commits\": %" PRIu64 "}\n",
           sim_s, wall, st.rows_written, st.rows_written / wall, file_bytes(path) - empty,
           st.dropped, st.maintenance_runs, st.commits);
    return 0;
}

static int peer_exec(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -EIO;
}

/* One simulated second's rows. st: energy, domain, host, calibration. */
static int peer_second(sqlite3_stmt **st, int n, int64_t t, const char *rates_json)
{
    int ok = 1;

    packed_rec *rec = malloc((size_t)n * sizeof(*rec));
    uint8_t *blob = NULL;
    size_t cap = 0;
    sqlite3_stmt *page = NULL;
    int64_t page_size = 0;

    if (!rec)
        return -ENOMEM;
    for (int i = 0; i < n; i++)
        rec[i] = (packed_rec){.process_id = i + 1,
                              .attributed_j = 0.2 * (1 + i % 7),
                              .standalone_j = 0.25 * (1 + i % 7),
                              .cpu_s = 0.01 * (1 + i % 5),
                              .klass = i % 2,
                              .has_class = true,
                              .model_id = 1,
                              .has_model = true};
    /* the chunks the writer makes, of the size the page size allows */
    if (sqlite3_prepare_v2(sqlite3_db_handle(st[0]), "PRAGMA page_size", -1, &page, NULL) ==
            SQLITE_OK &&
        sqlite3_step(page) == SQLITE_ROW)
        page_size = sqlite3_column_int64(page, 0);
    sqlite3_finalize(page);
    ok &= packed_write_second(NULL, st[0], t, rec, (size_t)n, packed_chunk_max(page_size), &blob,
                              &cap) == SQLITE_OK;
    free(blob);
    free(rec);
    for (int d = 0; d < 2; d++) {
        sqlite3_bind_int64(st[1], 1, t);
        sqlite3_bind_text(st[1], 2, d ? "dram" : "package", -1, SQLITE_STATIC);
        sqlite3_bind_double(st[1], 3, d ? 10 : 90);
        sqlite3_bind_double(st[1], 4, d ? 10 : 88);
        ok &= sqlite3_step(st[1]) == SQLITE_DONE;
        sqlite3_reset(st[1]);
    }
    sqlite3_bind_int64(st[2], 1, t);
    ok &= sqlite3_step(st[2]) == SQLITE_DONE;
    sqlite3_reset(st[2]);
    sqlite3_bind_int64(st[3], 1, t);
    sqlite3_bind_text(st[3], 2, rates_json, -1, SQLITE_STATIC);
    ok &= sqlite3_step(st[3]) == SQLITE_DONE;
    sqlite3_reset(st[3]);
    return ok ? 0 : -EIO;
}

static const char *const peer_sql[4] = {
    "INSERT INTO process_energy_packed VALUES (?1, ?2)",
    "INSERT INTO host_energy VALUES (?1, ?2, ?3, ?4)",
    "INSERT INTO host_attribution VALUES (?1, 1, 100, 50, 45, 5, 98, 1, 1, 'fitted', ?1 - 60)",
    "INSERT INTO calibration VALUES (?1, 1, 1, '{\"package\": 90, \"dram\": 10}', ?2)",
};

/* The calibration row's rates as the store writes them: [[...], [...]]. */
static void rates_json(char *buf, size_t len)
{
    double rates[N_EVENTS];
    size_t o = 0;

    fill_rates(rates);
    o += snprintf(buf + o, len - o, "[");
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < N_EVENTS; j++)
            o += snprintf(buf + o, len - o, "%s%.17g%s", j ? "" : (k ? ", [" : "["), rates[j],
                          j == N_EVENTS - 1 ? "]" : ", ");
    snprintf(buf + o, len - o, "]");
}

static int run_peer(int n, int sim_s, const char *path)
{
    char err[UTIL_ERRLEN], json[2048];
    sqlite3 *db = NULL;
    sqlite3_stmt *st[4] = {0};
    store *s;
    int r;

    /* The store creates the schema; the loop then owns the file. */
    r = store_open(path, NULL, &s, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "%s\n", err);
        return r;
    }
    store_close(s);
    int64_t empty = file_bytes(path);
    rates_json(json, sizeof(json));
    r = sqlite3_open(path, &db) == SQLITE_OK ? 0 : -EIO;
    r = r ? r : peer_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL");
    for (int i = 0; r == 0 && i < 4; i++)
        r = sqlite3_prepare_v2(db, peer_sql[i], -1, &st[i], NULL) == SQLITE_OK ? 0 : -EIO;
    double w0 = wall_s();
    uint64_t rows = 0;
    for (int k = 0; r == 0 && k < sim_s; k++) {
        r = peer_exec(db, "BEGIN");
        r = r ? r : peer_second(st, n, SIM_EPOCH + k, json);
        r = r ? r : peer_exec(db, "COMMIT");
        rows += n + 4;
    }
    double wall = wall_s() - w0;
    if (r < 0)
        fprintf(stderr, "%s: %s\n", path, sqlite3_errmsg(db));
    for (int i = 0; i < 4; i++)
        sqlite3_finalize(st[i]);
    sqlite3_close(db);
    if (r == 0)
        printf("{\"mode\": \"peer\", \"processes\": %d, \"sim_s\": %d, \"wall_s\": %.3f,"
               " \"rows_written\": %" PRIu64 ", \"rows_per_s\": %.1f, \"final_bytes\": %" PRId64
               "}\n",
               n, sim_s, wall, rows, rows / wall, file_bytes(path) - empty);
    return r;
}

static int positive(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);

    return *s && !*end && v > 0 && v < 100000000 ? (int)v : -1;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int n = argc > 2 ? positive(argv[2]) : -1, secs = argc > 3 ? positive(argv[3]) : -1;
    int day = argc > 5 ? positive(argv[5]) : -1;
    int r;

    if (strcmp(mode, "real") == 0 && argc == 5 && n > 0 && secs > 0)
        r = run_real(n, secs, argv[4]);
    else if (strcmp(mode, "replay") == 0 && argc == 6 && n > 0 && secs > 0 && day > 0)
        r = run_replay(n, secs, argv[4], day);
    else if (strcmp(mode, "peer") == 0 && argc == 5 && n > 0 && secs > 0)
        r = run_peer(n, secs, argv[4]);
    else {
        fprintf(stderr,
                "usage: %s real|peer PROCESSES SECONDS DB | replay PROCESSES SECONDS DB DAY\n",
                argv[0]);
        return 2;
    }
    return r < 0 ? 1 : 0;
}
