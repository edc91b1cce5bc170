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

#endif
