/* Benchmark of lib/store's writer against the naive design it replaces,
 * and of what it costs the disk.
 *
 * store|per-tick PROCESSES SECONDS DB [SAMPLE_S]: a 50 Hz sampling loop
 * (absolute CLOCK_MONOTONIC deadlines) pushes, every tick, one record per
 * process, the host split, two RAPL domains and two classes of 22
 * calibration rates, for SECONDS seconds.
 *   store    - through store_push_* into lib/store (per-second rows);
 *   per-tick - the peer: every tick's process rows kept, appended under a
 *              mutex to a buffer that a writer thread inserts once a second
 *              in one transaction (same SQLite, WAL, synchronous=NORMAL).
 * Prints one JSON line: the writer's CPU share of one core (process CPU
 * minus the sampling thread's, over wall time), the sampling thread's time
 * spent pushing per tick (p50, p99, µs), database growth per hour (the file
 * after close, less its empty schema), drops; with SAMPLE_S, every SAMPLE_S
 * seconds [seconds, write_bytes, wchar, bytes in use]: what the process
 * has had written to disk (/proc/self/io write_bytes: pages it dirtied;
 * wchar: bytes it passed to write()) and the database's pages in use (page
 * count less free pages, WAL included, read on a connection of its own).
 *
 * fill PROCESSES HOURS DB: HOURS of seconds of the same records on the data
 * clock as fast as the writer takes them, maintenance asked every simulated
 * minute as the live writer runs it, ending at T_END; it flushes and exits
 * without closing, leaving the file as a running writer has it.
 * query PROCESSES HOURS DB REPEATS [rollup]: times the queries of the
 * commands on a filled database (median ms of REPEATS after one unmeasured
 * call): show (the last 60 s of a process, and its class changes), a
 * process's whole series and its history over HOURS in one-minute steps,
 * ps over 10 s and 1 min; with `rollup`, then one rollup step of 10
 * minutes of seconds (which changes the file).
 * pending PROCESSES SECONDS DIR: the memory of the rows the writer holds
 * while its database cannot be written (pending() says how). */
#include "store/store.h"
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NS 1000000000LL
#define TICK_NS 20000000LL
#define N_EVENTS 22
#define T_END 1750000020LL /* where a fill ends: a minute-aligned second + 20 */

typedef struct row {
    int pid;
    int64_t t_ns;
    double a, s, c;
} row;

typedef struct peer {
    sqlite3 *db;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    row *buf;
    size_t n, cap;
    int stop;
    pthread_t thread;
} peer;

static double cpu_s(int who)
{
    struct rusage ru;

    getrusage(who, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void *peer_main(void *arg)
{
    peer *p = arg;
    sqlite3_stmt *st;
    row *batch = NULL;
    size_t n;
    int stop;

    sqlite3_prepare_v2(p->db, "INSERT INTO tick VALUES (?1, ?2, ?3, ?4, ?5, 0, 1)", -1, &st, NULL);
    do {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_mutex_lock(&p->lock);
        if (!p->stop)
            pthread_cond_timedwait(&p->wake, &p->lock, &ts);
        stop = p->stop;
        batch = p->buf;
        n = p->n;
        p->buf = NULL;
        p->n = p->cap = 0;
        pthread_mutex_unlock(&p->lock);
        sqlite3_exec(p->db, "BEGIN", NULL, NULL, NULL);
        for (size_t i = 0; i < n; i++) {
            sqlite3_bind_int(st, 1, batch[i].pid);
            sqlite3_bind_int64(st, 2, batch[i].t_ns);
            sqlite3_bind_double(st, 3, batch[i].a);
            sqlite3_bind_double(st, 4, batch[i].s);
            sqlite3_bind_double(st, 5, batch[i].c);
            sqlite3_step(st);
            sqlite3_reset(st);
        }
        sqlite3_exec(p->db, "COMMIT", NULL, NULL, NULL);
        free(batch);
    } while (!stop);
    sqlite3_finalize(st);
    return NULL;
}

static int peer_open(peer *p, const char *path)
{
    memset(p, 0, sizeof(*p));
    if (sqlite3_open(path, &p->db) != SQLITE_OK ||
        sqlite3_exec(p->db,
                     "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                     "CREATE TABLE tick (pid INTEGER, t_ns INTEGER, attributed_j REAL,"
                     " standalone_j REAL, cpu_s REAL, class INTEGER, model_id INTEGER);"
                     "CREATE INDEX tick_t ON tick(t_ns);",
                     NULL, NULL, NULL) != SQLITE_OK)
        return -EIO;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    return -pthread_create(&p->thread, NULL, peer_main, p);
}

static void peer_push(peer *p, int pid, int64_t t_ns, double a)
{
    pthread_mutex_lock(&p->lock);
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 4096;
        p->buf = realloc(p->buf, p->cap * sizeof(*p->buf));
    }
    p->buf[p->n++] = (row){pid, t_ns, a, a * 1.1, 0.02};
    pthread_mutex_unlock(&p->lock);
}

static void peer_close(peer *p)
{
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    sqlite3_close(p->db);
}

/* One tick's records through lib/store. */
static void tick_store(store *s, int n, int64_t t_ns, const double *rates)
{
    store_host_tick h = {.t_ns = t_ns,
                         .dt_s = 0.02,
                         .measured = true,
                         .host_j = 2.0,
                         .idle_j = 1.0,
                         .attributed_j = 0.9,
                         .unattributed_j = 0.1,
                         .modeled_j = 2.1,
                         .model_id = 1};

    for (int i = 0; i < n; i++) {
        store_proc_tick t = {.t_ns = t_ns,
                             .pid = 1000 + i,
                             .start_time = i,
                             .attributed_j = 0.001,
                             .standalone_j = 0.0011,
                             .cpu_s = 0.0002,
                             .klass = i % 2,
                             .model_id = 1};
        store_push_proc(s, &t);
    }
    store_push_host(s, &h);
    store_push_domain(s, t_ns, "package", 1.8, 1.9);
    store_push_domain(s, t_ns, "dram", 0.2, 0.2);
    store_push_calibration(s, t_ns, 0.02, 1, 0, rates, N_EVENTS);
    store_push_calibration(s, t_ns, 0.02, 1, 1, rates, N_EVENTS);
}

/* The database file's size; after close, when the WAL is checkpointed
 * into it and removed, this is all the data. */
static int64_t file_bytes(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 ? st.st_size : 0;
}

/* The settled rows' file beside the database, where the layout has one. */
static int64_t file_bytes_settled(const char *path)
{
    char name[4200];

    snprintf(name, sizeof(name), "%s-settled", path);
    return file_bytes(name);
}

/* What this process has had written: /proc/self/io write_bytes, wchar. */
static void io_bytes(int64_t *write_bytes, int64_t *wchar)
{
    FILE *f = fopen("/proc/self/io", "r");
    char line[128];
    long long v;

    *write_bytes = *wchar = -1;
    while (f && fgets(line, sizeof(line), f)) {
        if (sscanf(line, "write_bytes: %lld", &v) == 1)
            *write_bytes = v;
        else if (sscanf(line, "wchar: %lld", &v) == 1)
            *wchar = v;
    }
    if (f)
        fclose(f);
}

/* Bytes of the pages in use of one file of the database (schema "main",
 * or "settled": the settled rows' file beside it), as a reader sees it. */
static int64_t used_bytes_of(sqlite3 *db, const char *schema)
{
    sqlite3_stmt *st;
    int64_t v[3] = {0, 0, 0};
    const char *sql[3] = {"page_count", "freelist_count", "page_size"};
    char q[64];

    for (int i = 0; i < 3; i++) {
        snprintf(q, sizeof(q), "PRAGMA %s.%s", schema, sql[i]);
        if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK)
            return -1;
        if (sqlite3_step(st) == SQLITE_ROW)
            v[i] = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    return (v[0] - v[1]) * v[2];
}

/* Both files' pages in use, where the layout has the settled file. */
static int64_t used_bytes(sqlite3 *db)
{
    int64_t main = used_bytes_of(db, "main");

    if (main < 0 || !sqlite3_db_filename(db, "settled"))
        return main;
    return main + used_bytes_of(db, "settled");
}

/* Attaches PATH-settled to the reader when the layout has one. */
static void attach_settled(sqlite3 *db, const char *path)
{
    char name[4200], *sql;

    snprintf(name, sizeof(name), "%s-settled", path);
    if (access(name, F_OK) != 0)
        return;
    sql = sqlite3_mprintf("ATTACH %Q AS settled", name);
    sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_free(sql);
}

static double ms_since(int64_t t0)
{
    return (double)((int64_t)util_now_ns(CLOCK_MONOTONIC) - t0) / 1e6;
}

/* HOURS of seconds ending at T_END, on the data clock, as fast as the
 * writer takes them; maintenance every simulated minute. */
static int fill(int n, int hours, const char *path)
{
    char err[UTIL_ERRLEN], comm[32];
    double rates[N_EVENTS];
    store_config c;
    store *s;
    int r;

    for (int j = 0; j < N_EVENTS; j++)
        rates[j] = 1e6 * (j + 1);
    store_config_default(&c);
    c.clock = STORE_CLOCK_DATA;
    c.queue_capacity = 1 << 17;
    if (store_open(path, &c, &s, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        snprintf(comm, sizeof(comm), "proc%d", i);
        store_proc_info info = {.t_ns = (T_END - hours * 3600LL) * NS,
                                .pid = 1000 + i,
                                .start_time = i,
                                .comm = comm,
                                .cmdline = comm,
                                .cgroup = "/system.slice",
                                .uid = i % 4};
        store_push_proc_info(s, &info);
    }
    for (int64_t t = T_END - hours * 3600LL; t < T_END; t++) {
        while (store_push_room(s) < (size_t)n + 16)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        tick_store(s, n, t * NS + NS / 2, rates);
        if (t % 60 == 0 && (r = store_maintain(s, t)) < 0) {
            fprintf(stderr, "%s: maintenance failed: %s\n", path, strerror(-r));
            return 1;
        }
    }
    /* Left as a live writer has it: flushed, not closed, since a close
     * moves the recent rows (the last seconds) too, which the queries of a
     * running daemon find in process_energy_recent. */
    r = store_flush(s);
    if (r < 0) {
        fprintf(stderr, "%s: flush failed: %s\n", path, strerror(-r));
        return 1;
    }
    _exit(0);
}

/* One query, REPEATS times after an unmeasured one: the median ms. */
typedef int (*query_fn)(store_reader *r, int n, int hours);

static double timed(store_reader *r, query_fn f, int n, int hours, int repeats)
{
    double *ms = calloc((size_t)repeats, sizeof(double)), med;

    if (f(r, n, hours) < 0)
        return -1;
    for (int i = 0; i < repeats; i++) {
        int64_t t0 = (int64_t)util_now_ns(CLOCK_MONOTONIC);
        f(r, n, hours);
        ms[i] = ms_since(t0);
    }
    qsort(ms, (size_t)repeats, sizeof(double), cmp);
    med = ms[repeats / 2];
    free(ms);
    return med;
}

static int series(store_reader *r, int n, int64_t recent_s, bool classes)
{
    char err[UTIL_ERRLEN];
    store_process p;
    store_second *v;
    store_class_change *cc;
    size_t k;
    int ret = store_get_process(r, 1000 + n / 2, 0, recent_s, &p, &v, &k, err, sizeof(err));

    if (ret < 0) {
        fprintf(stderr, "%s\n", err);
        return ret;
    }
    free(v);
    if (classes && (ret = store_process_classes(r, p.id, &cc, &k, err, sizeof(err))) == 0)
        free(cc);
    store_process_free(&p);
    return ret;
}

static int q_show(store_reader *r, int n, int hours)
{
    (void)hours;
    return series(r, n, 60, true);
}

static int q_series_all(store_reader *r, int n, int hours)
{
    return series(r, n, hours * 3600LL, false);
}

static int q_history(store_reader *r, int n, int hours)
{
    store_history_query q = {.by = STORE_HISTORY_PID,
                             .pid = 1000 + n / 2,
                             .since = T_END - hours * 3600LL,
                             .until = T_END,
                             .step = 60};
    char err[UTIL_ERRLEN];
    store_point *p;
    size_t k;
    int ret = store_history(r, &q, &p, &k, err, sizeof(err));

    if (ret < 0)
        fprintf(stderr, "%s\n", err);
    else
        free(p);
    return ret;
}

static int ps(store_reader *r, int64_t window)
{
    store_process_query q = {.since = T_END - window, .until = T_END, .uid = -1};
    char err[UTIL_ERRLEN];
    store_process *p;
    size_t k;
    int ret = store_list_processes(r, &q, &p, &k, err, sizeof(err));

    if (ret < 0)
        fprintf(stderr, "%s\n", err);
    else
        store_processes_free(p, k);
    return ret;
}

static int q_ps10(store_reader *r, int n, int hours)
{
    (void)n, (void)hours;
    return ps(r, 10);
}

static int q_ps60(store_reader *r, int n, int hours)
{
    (void)n, (void)hours;
    return ps(r, 60);
}

static int query(int n, int hours, const char *path, int repeats, bool rollup)
{
    static const struct {
        const char *name;
        query_fn f;
    } q[] = {{"show_60s_ms", q_show},
             {"series_all_ms", q_series_all},
             {"history_pid_ms", q_history},
             {"ps_10s_ms", q_ps10},
             {"ps_1min_ms", q_ps60}};
    char err[UTIL_ERRLEN];
    store_reader *r;
    store_config c;
    store *s;
    int64_t t0;

    if (store_reader_open(path, &r, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("{\"processes\": %d, \"hours\": %d", n, hours);
    for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++)
        printf(", \"%s\": %.3f", q[i].name, timed(r, q[i].f, n, hours, repeats));
    store_reader_close(r);
    if (!rollup) {
        printf("}\n");
        return 0;
    }
    /* one rollup step: the oldest ten minutes of seconds are a day old */
    store_config_default(&c);
    c.clock = STORE_CLOCK_DATA;
    if (store_open(path, &c, &s, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    t0 = (int64_t)util_now_ns(CLOCK_MONOTONIC);
    int m = store_maintain(s, T_END - hours * 3600LL + 86400 + c.rollup_chunk_s);
    printf(", \"rollup_step_ms\": %.3f, \"rollup_result\": %d}\n", ms_since(t0), m);
    return store_close(s) < 0 || m < 0;
}

/* Resident memory of this process, KiB. */
static long rss_kib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f && fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = 0;
    if (f)
        fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* pending PROCESSES SECONDS DIR: what rows held for a database that cannot
 * be written cost in memory. Opens DIR/db, removes DIR (the writer then
 * keeps every row, retrying), pushes SECONDS seconds of the live records
 * on the data clock, one tick a second, and prints the rows held and the
 * resident memory they added. */
static int pending(int n, int seconds, const char *dir)
{
    char err[UTIL_ERRLEN], path[512], cmd[600];
    double rates[N_EVENTS];
    store_stats st = {0};
    store_config c;
    long rss0;
    store *s;

    for (int j = 0; j < N_EVENTS; j++)
        rates[j] = 1e6 * (j + 1);
    snprintf(path, sizeof(path), "%s/db", dir);
    store_config_default(&c);
    c.clock = STORE_CLOCK_DATA;
    c.queue_capacity = 1 << 17;
    c.max_pending_rows = SIZE_MAX;
    if (mkdir(dir, 0700) < 0 || store_open(path, &c, &s, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s: cannot open: %s\n", path, err);
        return 1;
    }
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        return 1;
    rss0 = rss_kib();
    for (int64_t t = T_END - seconds; t < T_END; t++) {
        while (store_push_room(s) < (size_t)n + 16)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        tick_store(s, n, t * NS + NS / 2, rates);
    }
    while (store_get_stats(s, &st),
           st.pending_rows + st.rows_lost < (uint64_t)seconds * (n + 4) - n)
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    printf("{\"processes\": %d, \"seconds\": %d, \"pending_rows\": %llu, \"rss_added_kib\": %ld,"
           " \"bytes_per_row\": %.1f}\n",
           n, seconds, (unsigned long long)st.pending_rows, rss_kib() - rss0,
           (double)(rss_kib() - rss0) * 1024 / (double)st.pending_rows);
    fflush(stdout);
    _exit(0); /* a close would retry the commit for ever */
}

int main(int argc, char **argv)
{
    char err[UTIL_ERRLEN];
    double rates[N_EVENTS];
    int per_tick, n, seconds, ticks;
    double *push_us, cpu0, thr0, wall0;
    store *s = NULL;
    store_config c;
    store_stats st = {0};
    peer p;
    struct timespec next;

    if (argc == 5 && strcmp(argv[1], "pending") == 0)
        return pending(atoi(argv[2]), atoi(argv[3]), argv[4]);
    if (argc == 5 && strcmp(argv[1], "fill") == 0)
        return fill(atoi(argv[2]), atoi(argv[3]), argv[4]);
    if ((argc == 6 || argc == 7) && strcmp(argv[1], "query") == 0)
        return query(atoi(argv[2]), atoi(argv[3]), argv[4], atoi(argv[5]),
                     argc == 7 && strcmp(argv[6], "rollup") == 0);
    if ((argc != 5 && argc != 6) || (strcmp(argv[1], "store") && strcmp(argv[1], "per-tick"))) {
        fprintf(stderr,
                "usage: %s store|per-tick PROCESSES SECONDS DB [SAMPLE_S]\n"
                "       %s fill PROCESSES HOURS DB\n"
                "       %s query PROCESSES HOURS DB REPEATS [rollup]\n"
                "       %s pending PROCESSES SECONDS DIR\n",
                argv[0], argv[0], argv[0], argv[0]);
        return 2;
    }
    int sample_s = argc == 6 ? atoi(argv[5]) : 0;
    int64_t(*samples)[4] =
        calloc((size_t)(sample_s > 0 ? atoi(argv[3]) / sample_s + 2 : 1), sizeof(*samples));
    size_t n_samples = 0;
    sqlite3 *reader = NULL;
    per_tick = strcmp(argv[1], "per-tick") == 0;
    n = atoi(argv[2]);
    seconds = atoi(argv[3]);
    ticks = seconds * 50;
    push_us = calloc(ticks, sizeof(double));
    for (int j = 0; j < N_EVENTS; j++)
        rates[j] = 1e6 * (j + 1);
    store_config_default(&c);
    if (n > 200)
        c.queue_capacity = 1 << 17; /* a second of 1000 processes and their ticks */
    if (per_tick ? peer_open(&p, argv[4]) < 0 : store_open(argv[4], &c, &s, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s: cannot open: %s\n", argv[4], per_tick ? "peer" : err);
        return 1;
    }
    int64_t empty = file_bytes(argv[4]) + file_bytes_settled(argv[4]);
    if (sample_s > 0 &&
        sqlite3_open_v2(argv[4], &reader, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        fprintf(stderr, "%s: cannot open a reader\n", argv[4]);
        return 1;
    }
    if (sample_s > 0)
        attach_settled(reader, argv[4]);
    cpu0 = cpu_s(RUSAGE_SELF);
    thr0 = cpu_s(RUSAGE_THREAD);
    wall0 = util_now_ns(CLOCK_MONOTONIC) / 1e9;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (int k = 0; k < ticks; k++) {
        int64_t t_ns = (int64_t)util_now_ns(CLOCK_REALTIME), t0, t1;
        next.tv_nsec += TICK_NS;
        if (next.tv_nsec >= NS) {
            next.tv_nsec -= NS;
            next.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        t0 = util_now_ns(CLOCK_MONOTONIC);
        if (per_tick)
            for (int i = 0; i < n; i++)
                peer_push(&p, 1000 + i, t_ns, 0.001);
        else
            tick_store(s, n, t_ns, rates);
        t1 = util_now_ns(CLOCK_MONOTONIC);
        push_us[k] = (t1 - t0) / 1e3;
        if (sample_s > 0 && k % (sample_s * 50) == 0) {
            int64_t *v = samples[n_samples++];
            v[0] = k / 50;
            io_bytes(&v[1], &v[2]);
            v[3] = used_bytes(reader);
        }
    }
    if (sample_s > 0) { /* the end, before close checkpoints */
        int64_t *v = samples[n_samples++];
        v[0] = ticks / 50;
        io_bytes(&v[1], &v[2]);
        v[3] = used_bytes(reader);
    }
    double wall = util_now_ns(CLOCK_MONOTONIC) / 1e9 - wall0;
    double thr = cpu_s(RUSAGE_THREAD) - thr0;
    if (!per_tick)
        store_get_stats(s, &st);
    double cpu = cpu_s(RUSAGE_SELF) - cpu0;
    if (per_tick)
        peer_close(&p);
    else
        store_close(s);
    int64_t bytes = file_bytes(argv[4]) + file_bytes_settled(argv[4]) - empty;
    sqlite3_close(reader);
    qsort(push_us, ticks, sizeof(double), cmp);
    printf("{\"mode\": \"%s\", \"processes\": %d, \"seconds\": %.2f, \"writer_cpu_pct\": %.4f,"
           " \"push_us_p50\": %.2f, \"push_us_p99\": %.2f, \"db_mib_per_hour\": %.1f,"
           " \"dropped\": %llu, \"commits\": %llu, \"max_commit_ms\": %.2f, \"samples\": [",
           argv[1], n, wall, 100.0 * (cpu - thr) / wall, push_us[ticks / 2],
           push_us[ticks * 99 / 100], bytes / wall * 3600 / 1048576.0,
           (unsigned long long)st.dropped, (unsigned long long)st.commits, st.max_commit_ms);
    for (size_t i = 0; i < n_samples; i++)
        printf("%s[%lld, %lld, %lld, %lld]", i ? ", " : "", (long long)samples[i][0],
               (long long)samples[i][1], (long long)samples[i][2], (long long)samples[i][3]);
    printf("]}\n");
    free(samples);
    free(push_us);
    return 0;
}
