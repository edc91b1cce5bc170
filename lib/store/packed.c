/* packed: the virtual table process_energy_recent, which presents the
 * packed rows of process_energy_packed (one row a second, a blob of every
 * process's row: packed.h) as the table of per-second rows it replaced in
 * schema version 10, with its columns (t, process_id, attributed_j,
 * standalone_j, cpu_s, class, model_id), in (t, process_id) order.
 *
 * It is eponymous (no CREATE VIRTUAL TABLE in the schema): every
 * connection that registers the module sees it under that name, and a
 * connection that does not (the sqlite3 shell without `.load`) still opens,
 * dumps and vacuums the file, which a schema entry naming an unknown module
 * would prevent. lib/store registers it on each connection it opens.
 *
 * Constraints on t (=, <, <=, >, >=) become a range of the packed table's
 * key; process_id = finds the process in each second's blob, reading
 * the blob in parts (incremental blob I/O): first where the process was in
 * the second before, then by binary search, so a per-second seek for one
 * process reads the key, a few ids and one record. It is writable
 * (INSERT, UPDATE, DELETE by hand, as the table was; each rewrites the
 * second's row): the rowid of a row is t << 32 | process_id, for t and
 * process ids in 0..2^31 and 0..2^32; the writer itself writes whole
 * seconds into process_energy_packed (conn.c).
 *
 * Built a second time, with WATTPROF_SQLITE_EXTENSION, as a loadable
 * extension for the sqlite3 shell (`.load`). */
#ifdef WATTPROF_SQLITE_EXTENSION
#include <sqlite3ext.h>
/* SQLITE_EXTENSION_INIT1: the API table SQLite hands the extension */
const sqlite3_api_routines *sqlite3_api;
#endif
#include "store/packed.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { COL_T, COL_PROCESS_ID, COL_ATTRIBUTED, COL_STANDALONE, COL_CPU, COL_CLASS, COL_MODEL };

/* A guess for the planner: a minute of seconds (the moves' interval) of
 * 200 processes. */
#define GUESS_SECONDS 60.0
#define GUESS_PROCESSES 200.0

typedef struct packed_vtab {
    sqlite3_vtab base;
    sqlite3 *db;
    char *schema; /* the database whose process_energy_packed it reads */
} packed_vtab;

typedef struct packed_cursor {
    sqlite3_vtab_cursor base;
    sqlite3_stmt *st;
    bool desc, keys;      /* what st was prepared for: descending t; t alone */
    sqlite3_blob *blob_h; /* a process's seeks: the rows blob of second t,
                             read in parts (NULL until the first) */
    size_t hint;          /* where they found the process last (SIZE_MAX: nowhere) */
    bool by_pid, eof;
    int64_t pid, t;
    uint8_t *buf; /* the current second's records, copied: a change of
                     the table by hand (xUpdate) may move the row's pages */
    size_t cap;
    packed_blob blob;
    size_t i, end; /* its records [i, end) are this cursor's */
} packed_cursor;

/* Sets the message SQLite reports for the call that failed (msg from
 * sqlite3_mprintf, NULL when out of memory). */
static int vtab_error(sqlite3_vtab *v, int rc, char *msg)
{
    sqlite3_free(v->zErrMsg);
    v->zErrMsg = msg;
    return rc;
}

static int x_connect(sqlite3 *db, void *aux, int argc, const char *const *argv, sqlite3_vtab **out,
                     char **err)
{
    packed_vtab *v;
    int rc;

    (void)aux;
    (void)argc;
    rc = sqlite3_declare_vtab(db, "CREATE TABLE x(t INTEGER, process_id INTEGER,"
                                  " attributed_j REAL, standalone_j REAL, cpu_s REAL,"
                                  " class INTEGER, model_id INTEGER)");
    if (rc != SQLITE_OK)
        return rc;
    v = sqlite3_malloc(sizeof(*v));
    if (!v)
        return SQLITE_NOMEM;
    memset(v, 0, sizeof(*v));
    v->db = db;
    v->schema = sqlite3_mprintf("%s", argv[1]);
    if (!v->schema) {
        sqlite3_free(v);
        *err = sqlite3_mprintf("out of memory");
        return SQLITE_NOMEM;
    }
    *out = &v->base;
    return SQLITE_OK;
}

static int x_disconnect(sqlite3_vtab *base)
{
    packed_vtab *v = (packed_vtab *)base;

    sqlite3_free(v->schema);
    sqlite3_free(v);
    return SQLITE_OK;
}

/* idxNum: 1 = descending t. idxStr: one letter per argument, in argv
 * order: e (t =), g (t >), G (t >=), l (t <), L (t <=), p (process_id =). */
static int x_best_index(sqlite3_vtab *base, sqlite3_index_info *info)
{
    char ops[64];
    int n = 0;
    bool t_eq = false, t_lo = false, t_hi = false, pid_eq = false;
    double seconds, per;

    (void)base;
    for (int i = 0; i < info->nConstraint && n < (int)sizeof(ops) - 1; i++) {
        const struct sqlite3_index_constraint *c = &info->aConstraint[i];
        char op = 0;

        if (!c->usable)
            continue;
        if (c->iColumn == COL_T) {
            switch (c->op) {
            case SQLITE_INDEX_CONSTRAINT_EQ:
                op = 'e';
                t_eq = true;
                break;
            case SQLITE_INDEX_CONSTRAINT_GT:
                op = 'g';
                t_lo = true;
                break;
            case SQLITE_INDEX_CONSTRAINT_GE:
                op = 'G';
                t_lo = true;
                break;
            case SQLITE_INDEX_CONSTRAINT_LT:
                op = 'l';
                t_hi = true;
                break;
            case SQLITE_INDEX_CONSTRAINT_LE:
                op = 'L';
                t_hi = true;
                break;
            }
        } else if (c->iColumn == COL_PROCESS_ID && c->op == SQLITE_INDEX_CONSTRAINT_EQ) {
            op = 'p';
            pid_eq = true;
        }
        if (!op)
            continue;
        ops[n++] = op;
        info->aConstraintUsage[i].argvIndex = n;
        /* SQLite checks the row again: a REAL or TEXT bound is still right */
        info->aConstraintUsage[i].omit = 0;
    }
    ops[n] = '\0';
    seconds = t_eq           ? 1
              : t_lo && t_hi ? GUESS_SECONDS / 4
              : t_lo || t_hi ? GUESS_SECONDS / 2
                             : GUESS_SECONDS;
    per = pid_eq ? 1 : GUESS_PROCESSES;
    info->estimatedRows = (sqlite3_int64)(seconds * per);
    /* a second's row read, then a binary search or a decode of each record */
    info->estimatedCost = seconds * (10 + (pid_eq ? 8 : per));
    if (t_eq && pid_eq)
        info->idxFlags |= SQLITE_INDEX_SCAN_UNIQUE;
    info->idxNum = 0;
    if (info->nOrderBy == 1 && info->aOrderBy[0].iColumn == COL_T) {
        info->idxNum = info->aOrderBy[0].desc ? 1 : 0;
        info->orderByConsumed = 1;
    } else if (info->nOrderBy == 2 && info->aOrderBy[0].iColumn == COL_T &&
               info->aOrderBy[1].iColumn == COL_PROCESS_ID && !info->aOrderBy[0].desc &&
               !info->aOrderBy[1].desc) {
        info->orderByConsumed = 1;
    }
    if (n > 0) {
        info->idxStr = sqlite3_mprintf("%s", ops);
        if (!info->idxStr)
            return SQLITE_NOMEM;
        info->needToFreeIdxStr = 1;
    }
    return SQLITE_OK;
}

static int x_open(sqlite3_vtab *base, sqlite3_vtab_cursor **out)
{
    packed_cursor *c = sqlite3_malloc(sizeof(*c));

    (void)base;
    if (!c)
        return SQLITE_NOMEM;
    memset(c, 0, sizeof(*c));
    c->eof = true;
    c->hint = SIZE_MAX;
    *out = &c->base;
    return SQLITE_OK;
}

static int x_close(sqlite3_vtab_cursor *base)
{
    packed_cursor *c = (packed_cursor *)base;

    sqlite3_finalize(c->st);
    sqlite3_blob_close(c->blob_h);
    sqlite3_free(c->buf);
    sqlite3_free(c);
    return SQLITE_OK;
}

/* Narrows [*lo, *hi] (inclusive) by `t op v`; false: no t can match. A
 * value that is no number leaves the range as it is (SQLite checks the
 * rows again). */
static bool bound(char op, sqlite3_value *arg, int64_t *lo, int64_t *hi)
{
    int type = sqlite3_value_numeric_type(arg);
    double v, f, cl;

    if (type == SQLITE_NULL)
        return false;
    if (type != SQLITE_INTEGER && type != SQLITE_FLOAT)
        return true;
    if (type == SQLITE_INTEGER) {
        f = cl = 0;
        int64_t i = sqlite3_value_int64(arg);
        switch (op) {
        case 'e':
            *lo = *lo > i ? *lo : i;
            *hi = *hi < i ? *hi : i;
            break;
        case 'g':
            if (i == INT64_MAX)
                return false;
            *lo = *lo > i + 1 ? *lo : i + 1;
            break;
        case 'G':
            *lo = *lo > i ? *lo : i;
            break;
        case 'l':
            if (i == INT64_MIN)
                return false;
            *hi = *hi < i - 1 ? *hi : i - 1;
            break;
        case 'L':
            *hi = *hi < i ? *hi : i;
            break;
        }
        return true;
    }
    v = sqlite3_value_double(arg);
    if (isnan(v))
        return false;
    f = floor(v);
    cl = ceil(v);
    /* beyond the 64-bit range: no narrowing on that side */
    if (!(f > -9.2e18 && cl < 9.2e18))
        return op != 'e';
    switch (op) {
    case 'e':
        if (f != v)
            return false;
        *lo = *lo > (int64_t)f ? *lo : (int64_t)f;
        *hi = *hi < (int64_t)f ? *hi : (int64_t)f;
        break;
    case 'g':
        *lo = *lo > (int64_t)f + 1 ? *lo : (int64_t)f + 1;
        break;
    case 'G':
        *lo = *lo > (int64_t)cl ? *lo : (int64_t)cl;
        break;
    case 'l':
        *hi = *hi < (int64_t)cl - 1 ? *hi : (int64_t)cl - 1;
        break;
    case 'L':
        *hi = *hi < (int64_t)f ? *hi : (int64_t)f;
        break;
    }
    return true;
}

/* Copies len bytes into the cursor's buffer. */
static int keep(packed_cursor *c, const void *data, size_t len)
{
    if (len > c->cap) {
        uint8_t *b = sqlite3_realloc64(c->buf, len);
        if (!b)
            return SQLITE_NOMEM;
        c->buf = b;
        c->cap = len;
    }
    if (data && len > 0)
        memcpy(c->buf, data, len);
    return SQLITE_OK;
}

static int damaged(packed_cursor *c, int64_t len)
{
    return vtab_error(c->base.pVtab, SQLITE_CORRUPT_VTAB,
                      sqlite3_mprintf("process_energy_packed: the row of second %lld is not a"
                                      " packed blob (%lld bytes)",
                                      (long long)c->t, (long long)len));
}

/* Reads n bytes at `off` of second c->t's blob into the cursor's buffer at
 * `to`. */
static int read_part(packed_cursor *c, size_t to, size_t n, size_t off)
{
    return sqlite3_blob_read(c->blob_h, c->buf + to, (int)n, (int)off);
}

/* A process's record of second c->t, found by a binary search that reads
 * only the ids it compares and the record (incremental blob I/O): reading
 * the row whole took the second's overflow pages, 6 KiB at 200
 * processes, for each second of a process's seek. -1: none. */
static int seek_process(packed_cursor *c)
{
    packed_vtab *v = (packed_vtab *)c->base.pVtab;
    size_t len, size, lo = 0, hi;
    int rc;

    if (c->blob_h)
        rc = sqlite3_blob_reopen(c->blob_h, c->t);
    else
        rc = sqlite3_blob_open(v->db, v->schema, "process_energy_packed", "rows", c->t, 0,
                               &c->blob_h);
    if (rc != SQLITE_OK) {
        sqlite3_blob_close(c->blob_h); /* an aborted handle takes no more rows */
        c->blob_h = NULL;
        return vtab_error(&v->base, rc, sqlite3_mprintf("%s", sqlite3_errmsg(v->db)));
    }
    len = (size_t)sqlite3_blob_bytes(c->blob_h);
    rc = keep(c, NULL, 1 + PACKED_WIDE_SIZE);
    if (rc == SQLITE_OK && len > 0)
        rc = read_part(c, 0, 1, 0);
    if (rc != SQLITE_OK)
        return rc;
    size = len > 0 && c->buf[0] == PACKED_NARROW ? PACKED_NARROW_SIZE
           : len > 0 && c->buf[0] == PACKED_WIDE ? PACKED_WIDE_SIZE
                                                 : 0;
    if (!size || (len - 1) % size != 0)
        return damaged(c, (int64_t)len);
    hi = (len - 1) / size;
    /* first where the process was in the second before: the processes of
     * consecutive seconds are mostly the same, so it is usually there */
    if (c->hint < hi) {
        rc = read_part(c, 1, size, 1 + c->hint * size);
        if (rc != SQLITE_OK)
            return rc;
        packed_open(c->buf, 1 + size, &c->blob);
        if (packed_id(&c->blob, 0) == c->pid) {
            c->i = 0;
            c->end = 1;
            return SQLITE_OK;
        }
        if (packed_id(&c->blob, 0) < c->pid)
            lo = c->hint + 1;
        else
            hi = c->hint;
    }
    while (lo < hi && rc == SQLITE_OK) {
        size_t mid = lo + (hi - lo) / 2;
        rc = read_part(c, 1, size, 1 + mid * size);
        if (rc == SQLITE_OK && packed_open(c->buf, 1 + size, &c->blob) == 0 &&
            packed_id(&c->blob, 0) < c->pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (rc == SQLITE_OK && lo < (len - 1) / size)
        rc = read_part(c, 1, size, 1 + lo * size);
    if (rc != SQLITE_OK)
        return rc;
    if (lo == (len - 1) / size || packed_open(c->buf, 1 + size, &c->blob) < 0 ||
        packed_id(&c->blob, 0) != c->pid)
        return -1;
    c->hint = lo;
    c->i = 0;
    c->end = 1;
    return SQLITE_OK;
}

/* Takes the row the statement is on: the records of it the cursor shows,
 * copied (all, or the one of the process sought). -1: that second has
 * none of them. */
static int load_second(packed_cursor *c)
{
    const uint8_t *data;
    size_t len;
    int rc;

    c->t = sqlite3_column_int64(c->st, 0);
    if (c->by_pid)
        return seek_process(c);
    data = sqlite3_column_blob(c->st, 1);
    len = (size_t)sqlite3_column_bytes(c->st, 1);
    if (packed_open(data, len, &c->blob) < 0)
        return damaged(c, (int64_t)len);
    rc = keep(c, data, len);
    if (rc == SQLITE_OK)
        packed_open(c->buf, len, &c->blob);
    c->i = 0;
    c->end = c->blob.n;
    return rc;
}

/* Steps to the next second that holds a row for the cursor. */
static int next_second(packed_cursor *c)
{
    for (;;) {
        int rc = sqlite3_step(c->st);
        if (rc == SQLITE_DONE) {
            c->eof = true;
            return SQLITE_OK;
        }
        if (rc != SQLITE_ROW)
            return rc;
        rc = load_second(c);
        if (rc != -1)
            return rc;
    }
}

static int x_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str, int argc,
                    sqlite3_value **argv)
{
    packed_cursor *c = (packed_cursor *)base;
    packed_vtab *v = (packed_vtab *)base->pVtab;
    int64_t lo = INT64_MIN, hi = INT64_MAX;
    bool desc = idx_num & 1, any = true;
    int rc;

    c->eof = true;
    c->by_pid = false;
    for (int i = 0; i < argc && idx_str && idx_str[i]; i++) {
        if (idx_str[i] != 'p') {
            any = any && bound(idx_str[i], argv[i], &lo, &hi);
            continue;
        }
        int type = sqlite3_value_numeric_type(argv[i]);
        if (type == SQLITE_NULL)
            any = false;
        else if (type == SQLITE_INTEGER && (!c->by_pid || c->pid == sqlite3_value_int64(argv[i]))) {
            c->by_pid = true;
            c->pid = sqlite3_value_int64(argv[i]);
        } else if (type == SQLITE_INTEGER)
            any = false; /* two different process ids */
    }
    if (!any || lo > hi)
        return SQLITE_OK;
    if (c->st && (c->desc != desc || c->keys != c->by_pid)) {
        sqlite3_finalize(c->st);
        c->st = NULL;
    }
    if (!c->st) {
        /* a process's seeks read the keys alone (no overflow page), then
         * the parts of the blob they need */
        char *sql = sqlite3_mprintf("SELECT t%s FROM \"%w\".process_energy_packed"
                                    " WHERE t >= ?1 AND t <= ?2 ORDER BY t %s",
                                    c->by_pid ? "" : ", rows", v->schema, desc ? "DESC" : "ASC");
        if (!sql)
            return SQLITE_NOMEM;
        rc = sqlite3_prepare_v3(v->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &c->st, NULL);
        sqlite3_free(sql);
        if (rc != SQLITE_OK) {
            sqlite3_free(v->base.zErrMsg);
            v->base.zErrMsg = sqlite3_mprintf("%s", sqlite3_errmsg(v->db));
            return rc;
        }
        c->desc = desc;
        c->keys = c->by_pid;
    }
    sqlite3_reset(c->st);
    sqlite3_bind_int64(c->st, 1, lo);
    sqlite3_bind_int64(c->st, 2, hi);
    c->eof = false;
    return next_second(c);
}

static int x_next(sqlite3_vtab_cursor *base)
{
    packed_cursor *c = (packed_cursor *)base;

    if (++c->i < c->end)
        return SQLITE_OK;
    return next_second(c);
}

static int x_eof(sqlite3_vtab_cursor *base)
{
    return ((packed_cursor *)base)->eof;
}

static int x_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col)
{
    packed_cursor *c = (packed_cursor *)base;
    packed_rec r;

    if (col == COL_T) {
        sqlite3_result_int64(ctx, c->t);
        return SQLITE_OK;
    }
    if (col == COL_PROCESS_ID) {
        sqlite3_result_int64(ctx, packed_id(&c->blob, c->i));
        return SQLITE_OK;
    }
    packed_get(&c->blob, c->i, &r);
    switch (col) {
    case COL_ATTRIBUTED:
        sqlite3_result_double(ctx, r.attributed_j);
        break;
    case COL_STANDALONE:
        sqlite3_result_double(ctx, r.standalone_j);
        break;
    case COL_CPU:
        sqlite3_result_double(ctx, r.cpu_s);
        break;
    case COL_CLASS:
        if (r.has_class)
            sqlite3_result_int64(ctx, r.klass);
        else
            sqlite3_result_null(ctx);
        break;
    case COL_MODEL:
        if (r.has_model)
            sqlite3_result_int64(ctx, r.model_id);
        else
            sqlite3_result_null(ctx);
        break;
    }
    return SQLITE_OK;
}

/* t << 32 | process_id: what xUpdate finds a row by. */
#define ROWID_T_MAX INT32_MAX
#define ROWID_PID_MAX UINT32_MAX

static int x_rowid(sqlite3_vtab_cursor *base, sqlite3_int64 *rowid)
{
    packed_cursor *c = (packed_cursor *)base;
    int64_t pid = packed_id(&c->blob, c->i);

    if (c->t < 0 || c->t > ROWID_T_MAX || pid < 0 || pid > (int64_t)ROWID_PID_MAX)
        return vtab_error(base->pVtab, SQLITE_RANGE,
                          sqlite3_mprintf("process_energy_recent: second %lld, process %lld:"
                                          " beyond the range of rows that can be changed by hand",
                                          (long long)c->t, (long long)pid));
    *rowid = (int64_t)((uint64_t)c->t << 32 | (uint64_t)pid);
    return SQLITE_OK;
}

/* ---- Changes by hand ---------------------------------------------------------- */

/* Second t's records, decoded into *r (sqlite3_malloc'd, n + 1 slots). */
static int read_second(packed_vtab *v, int64_t t, packed_rec **r, size_t *n)
{
    char *sql =
        sqlite3_mprintf("SELECT rows FROM \"%w\".process_energy_packed WHERE t = ?1", v->schema);
    sqlite3_stmt *st = NULL;
    packed_blob b = {0};
    int rc;

    *r = NULL;
    *n = 0;
    if (!sql)
        return SQLITE_NOMEM;
    rc = sqlite3_prepare_v2(v->db, sql, -1, &st, NULL);
    sqlite3_free(sql);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, t);
        rc = sqlite3_step(st);
    }
    if (rc == SQLITE_ROW &&
        packed_open(sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), &b) < 0)
        rc = vtab_error(&v->base, SQLITE_CORRUPT_VTAB,
                        sqlite3_mprintf("process_energy_packed: the row of second %lld is not a"
                                        " packed blob",
                                        (long long)t));
    if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
        *r = sqlite3_malloc64((b.n + 1) * sizeof(**r));
        rc = *r ? SQLITE_OK : SQLITE_NOMEM;
        for (size_t i = 0; rc == SQLITE_OK && i < b.n; i++)
            packed_get(&b, i, &(*r)[i]);
        *n = b.n;
    }
    sqlite3_finalize(st);
    return rc;
}

/* Writes second t's n records (none: deletes its row). */
static int write_second(packed_vtab *v, int64_t t, const packed_rec *r, size_t n)
{
    char *sql =
        n ? sqlite3_mprintf("INSERT OR REPLACE INTO \"%w\".process_energy_packed (t, rows)"
                            " VALUES (?1, ?2)",
                            v->schema)
          : sqlite3_mprintf("DELETE FROM \"%w\".process_energy_packed WHERE t = ?1", v->schema);
    size_t len = packed_size(r, n);
    uint8_t *blob = n ? sqlite3_malloc64(len) : NULL;
    sqlite3_stmt *st = NULL;
    int rc = sql && (blob || !n) ? SQLITE_OK : SQLITE_NOMEM;

    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(v->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, t);
        if (n) {
            packed_encode(r, n, blob);
            sqlite3_bind_blob64(st, 2, blob, len, SQLITE_STATIC);
        }
        rc = sqlite3_step(st);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    sqlite3_finalize(st);
    sqlite3_free(sql);
    sqlite3_free(blob);
    return rc;
}

static int delete_row(packed_vtab *v, sqlite3_int64 rowid)
{
    int64_t t = (int64_t)((uint64_t)rowid >> 32), pid = (int64_t)((uint64_t)rowid & 0xffffffffu);
    packed_rec *r;
    size_t n, i = 0;
    int rc = read_second(v, t, &r, &n);

    while (rc == SQLITE_OK && i < n && r[i].process_id != pid)
        i++;
    if (rc == SQLITE_OK && i < n) {
        memmove(&r[i], &r[i + 1], (n - i - 1) * sizeof(*r));
        rc = write_second(v, t, r, n - 1);
    }
    sqlite3_free(r);
    return rc;
}

static bool is_int(sqlite3_value *x)
{
    return sqlite3_value_numeric_type(x) == SQLITE_INTEGER;
}

static bool is_num(sqlite3_value *x)
{
    int type = sqlite3_value_numeric_type(x);

    return type == SQLITE_INTEGER || type == SQLITE_FLOAT;
}

/* argv[2..8]: the new row's columns. */
static int insert_row(packed_vtab *v, sqlite3_value **col)
{
    packed_rec rec = {0}, *r;
    int64_t t;
    size_t n, i = 0;
    int rc;

    if (!is_int(col[COL_T]) || !is_int(col[COL_PROCESS_ID]) || !is_num(col[COL_ATTRIBUTED]) ||
        !is_num(col[COL_STANDALONE]) || !is_num(col[COL_CPU]) ||
        !(is_int(col[COL_CLASS]) || sqlite3_value_type(col[COL_CLASS]) == SQLITE_NULL) ||
        !(is_int(col[COL_MODEL]) || sqlite3_value_type(col[COL_MODEL]) == SQLITE_NULL))
        return vtab_error(&v->base, SQLITE_MISMATCH,
                          sqlite3_mprintf("process_energy_recent: t and process_id must be"
                                          " integers, the energies and CPU time numbers, class"
                                          " and model_id integers or NULL"));
    t = sqlite3_value_int64(col[COL_T]);
    rec.process_id = sqlite3_value_int64(col[COL_PROCESS_ID]);
    rec.attributed_j = sqlite3_value_double(col[COL_ATTRIBUTED]);
    rec.standalone_j = sqlite3_value_double(col[COL_STANDALONE]);
    rec.cpu_s = sqlite3_value_double(col[COL_CPU]);
    rec.has_class = sqlite3_value_type(col[COL_CLASS]) != SQLITE_NULL;
    rec.klass = sqlite3_value_int64(col[COL_CLASS]);
    rec.has_model = sqlite3_value_type(col[COL_MODEL]) != SQLITE_NULL;
    rec.model_id = sqlite3_value_int64(col[COL_MODEL]);
    rc = read_second(v, t, &r, &n);
    while (rc == SQLITE_OK && i < n && r[i].process_id < rec.process_id)
        i++;
    if (rc == SQLITE_OK && i < n && r[i].process_id == rec.process_id)
        rc = vtab_error(&v->base, SQLITE_CONSTRAINT_PRIMARYKEY,
                        sqlite3_mprintf("process_energy_recent: second %lld already has a row of"
                                        " process %lld",
                                        (long long)t, (long long)rec.process_id));
    if (rc == SQLITE_OK) {
        memmove(&r[i + 1], &r[i], (n - i) * sizeof(*r));
        r[i] = rec;
        rc = write_second(v, t, r, n + 1);
    }
    sqlite3_free(r);
    return rc;
}

static int x_update(sqlite3_vtab *base, int argc, sqlite3_value **argv, sqlite3_int64 *rowid)
{
    packed_vtab *v = (packed_vtab *)base;
    int rc = SQLITE_OK;

    (void)rowid;
    if (sqlite3_value_type(argv[0]) != SQLITE_NULL)
        rc = delete_row(v, sqlite3_value_int64(argv[0]));
    if (rc == SQLITE_OK && argc > 1)
        rc = insert_row(v, argv + 2);
    return rc;
}

static const sqlite3_module packed_module = {
    .iVersion = 1,
    .xCreate = NULL, /* eponymous only */
    .xConnect = x_connect,
    .xBestIndex = x_best_index,
    .xDisconnect = x_disconnect,
    .xDestroy = x_disconnect,
    .xOpen = x_open,
    .xClose = x_close,
    .xFilter = x_filter,
    .xNext = x_next,
    .xEof = x_eof,
    .xColumn = x_column,
    .xRowid = x_rowid,
    .xUpdate = x_update,
};

int packed_register(sqlite3 *db)
{
    return sqlite3_create_module_v2(db, "process_energy_recent", &packed_module, NULL, NULL);
}

#ifdef WATTPROF_SQLITE_EXTENSION
/* The entry point the sqlite3 shell's `.load` looks for in
 * wattprof_packed.so: sqlite3_<name>_init. */
int sqlite3_wattprofpacked_init(sqlite3 *db, char **err, const sqlite3_api_routines *api);
int sqlite3_wattprofpacked_init(sqlite3 *db, char **err, const sqlite3_api_routines *api)
{
    int rc;

    SQLITE_EXTENSION_INIT2(api);
    rc = packed_register(db);
    if (rc != SQLITE_OK)
        *err = sqlite3_mprintf("cannot register process_energy_recent: %s", sqlite3_errstr(rc));
    return rc;
}
#endif
