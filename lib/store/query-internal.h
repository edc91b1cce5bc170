/* query-internal: what the reader's files (query*.c, jobs.c) share: the
 * reader and its helpers (reader.c), and the SQL that reads per-second rows. */
#ifndef WATTPROF_QUERY_INTERNAL_H
#define WATTPROF_QUERY_INTERNAL_H

#include "store/store-internal.h"

struct store_reader {
    sqlite3 *db;
    char *path;
    /* store_list_processes' statement per sort order, prepared once: the
     * daemon lists on every ListProcesses, and parsing the query was a sixth
     * of that call's time in the query-load profile */
    sqlite3_stmt *list[3];
    /* a process's rows (PROCESS_ROWS), for its series and its classes:
     * prepared once too, being the longest statements here */
    sqlite3_stmt *series, *classes;
    /* a process's rows not folded into its processes row (UNSETTLED) */
    sqlite3_stmt *unsettled;
    /* store_get_process: finding the process, and the BEGIN and COMMIT of
     * its read transaction. Parsing the first anew took 33 of a show's
     * 580 us (200 processes) */
    sqlite3_stmt *find, *begin, *commit;
    /* store_reader_budget: statements stop once CLOCK_MONOTONIC passes
     * deadline_ns (0: never); expired says the interrupt was ours */
    int64_t deadline_ns;
    double budget_s;
    bool expired;
};

/* -errno with "PATH: WHAT: SQLite's message" in err; -ETIME naming the
 * time budget when a statement ran past it. */
int query_fail(store_reader *r, int rc, char *err, size_t errlen, const char *what);
/* *st: `sql` prepared on first use (persistent), kept in the reader for
 * the calls after; SQLITE_OK when it is there. */
int query_kept(store_reader *r, sqlite3_stmt **st, const char *sql);
/* Appends one zeroed element to *v (n elements of `size`); NULL on ENOMEM. */
void *query_push(void **v, size_t *n, size_t *cap, size_t size);
/* Column i as a malloc'ed string, NULL for NULL (or ENOMEM). */
char *query_dup_col(sqlite3_stmt *st, int i);

/* -EINVAL with a message unless since < until. */
int query_check_window(int64_t since, int64_t until, char *err, size_t errlen);
/* -EINVAL with a message unless `pattern` (NULL: none) compiles as a regex. */
int query_check_regex(const char *pattern, char *err, size_t errlen);
/* Process `id`'s rows after `after` up to `last_seen`, in time order, into a
 * malloc'ed *out; a row without a class gets `no_class`. */
int query_read_series(store_reader *r, int64_t id, int64_t after, int64_t last_seen, int no_class,
                      store_second **out, size_t *n, char *err, size_t errlen);

/* ---- Per-second rows ----------------------------------------------------------
 *
 * Windows and histories read the per-second and the one-minute tables
 * together (UNION ALL): rollups delete the seconds they sum, so the two never
 * count the same energy twice. A process's per-second rows are in two
 * tables (schema.c, version 4): the newest in process_energy_recent, keyed
 * by second (a virtual table over page-sized chunks of packed rows since
 * version 10, packed.c), read for one process by one seek per second it
 * spans (a minute or two) and a binary search in the chunk it finds (a
 * constraint on process_id and a range of t: the virtual table reads each
 * next second from the chunk the process was in, where a recursive list of
 * the seconds joined to it took twice the time); the others in
 * process_energy_settled, keyed by batch and process, read for one process
 * by one seek per batch that overlaps the window, and for a window by
 * scanning the batches that overlap it. */

/* The settled rows in the window [LO, HI), all processes ("e"). */
#define SETTLED_IN(LO, HI)                                                                         \
    " process_energy_batch b CROSS JOIN process_energy_settled e ON e.batch = b.batch"             \
    " WHERE b.t_max >= " LO " AND b.t_min < " HI " AND e.t >= " LO " AND e.t < " HI

/* recent(t): each second from LO (or the oldest in process_energy_recent)
 * to HI (or the newest there); one seek each finds a process's row (history
 * --pid, which sums the rows into buckets as they come). The
 * seconds there are those of process_energy_packed's keys (packed.h). */
#define RECENT_SECONDS(LO, HI)                                                                     \
    " recent(t) AS (SELECT max(" LO ", " PACKED_T_SQL(                                             \
        "(SELECT min(k) FROM process_energy_packed)") ")"                                          \
                                                      " UNION ALL SELECT t + 1 FROM recent"        \
                                                      " WHERE t < min(" HI ", " PACKED_T_SQL(      \
                                                          "(SELECT max(k) FROM "                   \
                                                          "process_energy_packed)") "))"

/* span.s: the most seconds a batch of process_energy_settled spans. A batch
 * holding a row of second t has t <= t_max <= t + span.s, so the batches
 * that can hold a process's rows up to second L are those with t_max up to
 * L + span.s: the bound on the walk of process_energy_batch_t, which
 * otherwise goes on to the newest batch. Read from the data: rollups and
 * late rows make batches of other spans than the writer's. */
#define BATCH_SPAN                                                                                 \
    " span AS (SELECT coalesce(max(t_max - t_min), 0) AS s FROM process_energy_batch)"

#endif
