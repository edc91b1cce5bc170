/* Benchmark of lib/store's writer against the naive design it replaces.
 *
 * One run: a 50 Hz sampling loop (absolute CLOCK_MONOTONIC deadlines) pushes,
 * every tick, one record per process, the host split, two RAPL domains and
 * two classes of 22 calibration rates, for SECONDS seconds.
 *   store    - through store_push_* into lib/store (per-second rows);
 *   per-tick - the peer: every tick's process rows kept, appended under a
 *              mutex to a buffer that a writer thread inserts once a second
 *              in one transaction (same SQLite, WAL, synchronous=NORMAL).
 * Prints one JSON line: the writer's CPU share of one core (process CPU
 * minus the sampling thread's, over wall time), the sampling thread's time
 * spent pushing per tick (p50, p99, µs), database growth per hour (the file
 * after close, less its empty schema), drops. */
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

#define NS 1000000000LL
#define TICK_NS 20000000LL
#define N_EVENTS 22

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

    if (argc != 5 || (strcmp(argv[1], "store") && strcmp(argv[1], "per-tick"))) {
        fprintf(stderr, "usage: %s store|per-tick PROCESSES SECONDS DB\n", argv[0]);
        return 2;
    }
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
    int64_t empty = file_bytes(argv[4]);
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
    int64_t bytes = file_bytes(argv[4]) - empty;
    qsort(push_us, ticks, sizeof(double), cmp);
    printf("{\"mode\": \"%s\", \"processes\": %d, \"seconds\": %.2f, \"writer_cpu_pct\": %.4f,"
           " \"push_us_p50\": %.2f, \"push_us_p99\": %.2f, \"db_mib_per_hour\": %.1f,"
           " \"dropped\": %llu, \"commits\": %llu, \"max_commit_ms\": %.2f}\n",
           argv[1], n, wall, 100.0 * (cpu - thr) / wall, push_us[ticks / 2],
           push_us[ticks * 99 / 100], bytes / wall * 3600 / 1048576.0,
           (unsigned long long)st.dropped, (unsigned long long)st.commits, st.max_commit_ms);
    free(push_us);
    return 0;
}
