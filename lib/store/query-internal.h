/* query-internal: what the reader's files (query.c, query_models.c, jobs.c) share:
 * the reader and its helpers (reader.c). */
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
    /* store_reader_budget: statements stop once CLOCK_MONOTONIC passes
     * deadline_ns (0: never); expired says the interrupt was ours */
    int64_t deadline_ns;
    double budget_s;
    bool expired;
};

/* -errno with "PATH: WHAT: SQLite's message" in err; -ETIME naming the
 * time budget when a statement ran past it. */
int query_fail(store_reader *r, int rc, char *err, size_t errlen, const char *what);
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

#endif
