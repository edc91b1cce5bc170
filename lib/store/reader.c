/* reader: the read-only connection that queries use (query*.c, jobs.c):
 * opening it at this program's schema version, its regexp() function, the
 * time budget that stops its statements, the release of its cache, and the
 * helpers the query files share. */
#include "store/query-internal.h"
#include "util/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* regexp(pattern, text): util_regex (PCRE2), for comm filters. The compiled
 * pattern is cached per statement by SQLite's auxdata. */
static void free_regex(void *p)
{
    util_regex_free(p);
}

static void regexp_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    const char *pat = (const char *)sqlite3_value_text(argv[0]);
    const char *text = (const char *)sqlite3_value_text(argv[1]);
    util_regex *re = sqlite3_get_auxdata(ctx, 0);
    bool fresh = false;

    if (!pat || !text) {
        sqlite3_result_int(ctx, 0);
        return;
    }
    if (!re) {
        if (util_regex_new(pat, &re, NULL, 0) < 0) {
            sqlite3_result_error(ctx, "invalid regular expression", -1);
            return;
        }
        fresh = true;
    }
    sqlite3_result_int(ctx, util_regex_match(re, text) > 0);
    if (fresh)
        sqlite3_set_auxdata(ctx, 0, re, free_regex);
}

int query_fail(store_reader *r, int rc, char *err, size_t errlen, const char *what)
{
    if ((rc & 0xff) == SQLITE_INTERRUPT && r->expired)
        return util_err(err, errlen, -ETIME, "%s: %s: stopped at the time limit of %g s per query",
                        r->path, what, r->budget_s);
    return util_err(err, errlen, schema_errno(r->db, rc), "%s: %s: %s", r->path, what,
                    sqlite3_errmsg(r->db));
}

static int check_version(store_reader *r, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(r->db, "PRAGMA user_version", -1, &st, NULL), v = -1;

    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        v = sqlite3_column_int(st, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK)
        return query_fail(r, rc, err, errlen, "reading the schema version");
    if (v != STORE_SCHEMA_VERSION)
        return util_err(err, errlen, -EPROTO,
                        "%s: schema version %d, this wattprof reads %d (wattprofd migrates on"
                        " start)",
                        r->path, v, STORE_SCHEMA_VERSION);
    return 0;
}

/* Every BUDGET_OPS virtual machine instructions: is the budget spent?
 * A clock read costs tens of ns, the instructions some microseconds. */
#define BUDGET_OPS 1000

static int budget_spent(void *arg)
{
    store_reader *r = arg;

    if (r->deadline_ns == 0 || (int64_t)util_now_ns(CLOCK_MONOTONIC) < r->deadline_ns)
        return 0;
    r->expired = true;
    return 1;
}

void store_reader_budget(store_reader *r, double budget_s)
{
    r->expired = false;
    r->budget_s = budget_s;
    r->deadline_ns =
        budget_s > 0 ? (int64_t)util_now_ns(CLOCK_MONOTONIC) + (int64_t)(budget_s * 1e9) : 0;
}

void store_reader_release_memory(store_reader *r)
{
    sqlite3_db_release_memory(r->db);
}

int store_reader_open(const char *path, store_reader **out, char *err, size_t errlen)
{
    store_reader *r = calloc(1, sizeof(*r));
    int rc, ret;

    if (!r || !(r->path = strdup(path))) {
        free(r);
        return util_err(err, errlen, -ENOMEM, "%s: out of memory", path);
    }
    /* one thread at a time uses a reader (store.h): without SQLite's mutex
     * per call, reading a process's hour of class changes (3,600 rows, two
     * column calls each) took 13 % less CPU time */
    rc = sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        ret = query_fail(r, rc, err, errlen, "cannot open the database");
        store_reader_close(r);
        return ret;
    }
    rc = packed_register(r->db);
    if (rc != SQLITE_OK) {
        ret = query_fail(r, rc, err, errlen, "registering process_energy_recent");
        store_reader_close(r);
        return ret;
    }
    sqlite3_busy_timeout(r->db, 5000);
    sqlite3_progress_handler(r->db, BUDGET_OPS, budget_spent, r);
    sqlite3_create_function(r->db, "regexp", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, regexp_fn,
                            NULL, NULL);
    ret = check_version(r, err, errlen);
    if (ret == 0)
        ret = settled_attach_reader(r->db, path, err, errlen);
    if (ret < 0) {
        store_reader_close(r);
        return ret;
    }
    *out = r;
    return 0;
}

void store_reader_close(store_reader *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < sizeof(r->list) / sizeof(r->list[0]); i++)
        sqlite3_finalize(r->list[i]);
    sqlite3_finalize(r->series);
    sqlite3_finalize(r->classes);
    sqlite3_finalize(r->unsettled);
    sqlite3_finalize(r->find);
    sqlite3_finalize(r->begin);
    sqlite3_finalize(r->commit);
    sqlite3_close(r->db);
    free(r->path);
    free(r);
}

/* Appends one zeroed element to *v (n elements of `size`); NULL on ENOMEM. */
int query_kept(store_reader *r, sqlite3_stmt **st, const char *sql)
{
    if (*st)
        return SQLITE_OK;
    return sqlite3_prepare_v3(r->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
}

void *query_push(void **v, size_t *n, size_t *cap, size_t size)
{
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 32;
        void *nv = realloc(*v, ncap * size);
        if (!nv)
            return NULL;
        *v = nv;
        *cap = ncap;
    }
    memset((char *)*v + *n * size, 0, size);
    return (char *)*v + (*n)++ * size;
}

char *query_dup_col(sqlite3_stmt *st, int i)
{
    const char *v = (const char *)sqlite3_column_text(st, i);

    return v ? strdup(v) : NULL;
}
