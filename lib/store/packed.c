/* packed: the virtual table process_energy_recent, which presents the
 * packed rows of process_energy_packed (each second's rows of all
 * processes in page-sized chunks: packed.h) as the table of per-second rows it replaced in
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
 * key; with process_id =, each second is one seek of the key (the last
 * chunk whose key is <= the process's key of that second), one chunk read
 * (a page) and a binary search in it. Over a range of seconds, once the
 * process was found, the second after is sought directly (a process runs
 * in consecutive seconds), and only where that second has no chunk that
 * could hold it does a seek find the next second with chunks. The seek
 * first reads the chunk keyed as the one the process was in the second
 * before, by incremental blob I/O. It is writable (INSERT,
 * UPDATE, DELETE by hand, as the table was; each rewrites the second's chunks): the rowid of a row
 * is t << 32 | process_id, for t and process ids in 0..2^31 and 0..2^32; the writer itself writes
 * whole seconds into process_energy_packed (conn.c).
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

/* A guess for the planner: a minute of seconds (the moves' interval) of
 * 200 processes. */
#define GUESS_SECONDS 60.0
#define GUESS_PROCESSES 200.0

typedef struct packed_vtab {
    sqlite3_vtab base;
    sqlite3 *db;
    char *schema; /* the database whose process_energy_packed it reads */
    /* statements a closed cursor left, for the next one: preparing them
     * anew took a good part of a short query (a process's last minute) */
    sqlite3_stmt *spare_seek, *spare_st[2], *spare_next[2];
} packed_vtab;

typedef struct packed_cursor {
    sqlite3_vtab_cursor base;
    sqlite3_stmt *st;   /* all rows: the chunks of [lo, hi] in order */
    sqlite3_stmt *seek; /* a process's: its chunk of second t */
    sqlite3_stmt *next; /* a process's: the next second with chunks */
    sqlite3_blob *hint; /* a process's: the chunk of the second before,
                           whose key, with this second's t, it reads first */
    int64_t hint_id;    /* that chunk's first process id */
    bool no_hint;       /* a chunk so keyed was missing: seek alone */
    bool desc;          /* what st and next were prepared for */
    bool by_pid, eof;
    int64_t pid, t, lo, hi;
    uint8_t *buf; /* the current chunk, copied: a change of the table by
                     hand (xUpdate) may move its pages */
    size_t cap;
    packed_blob blob;
    size_t i, end; /* its records [i, end) are this cursor's */
} packed_cursor;

int packed_vtab_error(sqlite3_vtab *vt, int rc, char *msg)
{
    sqlite3_free(vt->zErrMsg);
    vt->zErrMsg = msg;
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

    sqlite3_finalize(v->spare_seek);
    for (int i = 0; i < 2; i++) {
        sqlite3_finalize(v->spare_st[i]);
        sqlite3_finalize(v->spare_next[i]);
    }
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
        if (c->iColumn == PACKED_COL_T) {
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
        } else if (c->iColumn == PACKED_COL_PROCESS_ID && c->op == SQLITE_INDEX_CONSTRAINT_EQ) {
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
    /* a chunk read per second, then a binary search or a decode of each record */
    info->estimatedCost = seconds * (10 + (pid_eq ? 8 : per));
    if (t_eq && pid_eq)
        info->idxFlags |= SQLITE_INDEX_SCAN_UNIQUE;
    info->idxNum = 0;
    if (info->nOrderBy == 1 && info->aOrderBy[0].iColumn == PACKED_COL_T) {
        info->idxNum = info->aOrderBy[0].desc ? 1 : 0;
        info->orderByConsumed = 1;
    } else if (info->nOrderBy == 2 && info->aOrderBy[0].iColumn == PACKED_COL_T &&
               info->aOrderBy[1].iColumn == PACKED_COL_PROCESS_ID && !info->aOrderBy[0].desc &&
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

/* Takes the spare statement of a slot, if the cursor has none of its own. */
static void take(sqlite3_stmt **slot, sqlite3_stmt **st)
{
    if (!*st) {
        *st = *slot;
        *slot = NULL;
    }
}

/* Leaves the cursor's statement in the slot, reset, or finalizes it when
 * the slot is taken. */
static void give_back(sqlite3_stmt **slot, sqlite3_stmt **st)
{
    if (*st && !*slot) {
        sqlite3_reset(*st);
        *slot = *st;
    } else {
        sqlite3_finalize(*st);
    }
    *st = NULL;
}

static int x_open(sqlite3_vtab *base, sqlite3_vtab_cursor **out)
{
    packed_vtab *v = (packed_vtab *)base;
    packed_cursor *c = sqlite3_malloc(sizeof(*c));

    if (!c)
        return SQLITE_NOMEM;
    memset(c, 0, sizeof(*c));
    c->eof = true;
    c->hint_id = -1;
    take(&v->spare_seek, &c->seek);
    take(&v->spare_st[0], &c->st);
    take(&v->spare_next[0], &c->next);
    *out = &c->base;
    return SQLITE_OK;
}

static int x_close(sqlite3_vtab_cursor *base)
{
    packed_cursor *c = (packed_cursor *)base;

    packed_vtab *v = (packed_vtab *)base->pVtab;

    give_back(&v->spare_seek, &c->seek);
    give_back(&v->spare_st[c->desc], &c->st);
    give_back(&v->spare_next[c->desc], &c->next);
    sqlite3_blob_close(c->hint);
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
    if (data && len > 0 && data != c->buf)
        memcpy(c->buf, data, len);
    return SQLITE_OK;
}

static int damaged(packed_cursor *c, int64_t len)
{
    return packed_vtab_error(
        c->base.pVtab, SQLITE_CORRUPT_VTAB,
        sqlite3_mprintf("process_energy_packed: a chunk of second %lld is not a"
                        " packed blob (%lld bytes)",
                        (long long)c->t, (long long)len));
}

/* Takes the chunk the statement st is on (columns k, rows): its records,
 * copied. */
static int load_chunk(packed_cursor *c, sqlite3_stmt *st)
{
    const uint8_t *data = sqlite3_column_blob(st, 1);
    size_t len = (size_t)sqlite3_column_bytes(st, 1);
    int rc;

    c->t = packed_key_t(sqlite3_column_int64(st, 0));
    if (packed_open(data, len, &c->blob) < 0)
        return damaged(c, (int64_t)len);
    rc = keep(c, data, len);
    if (rc == SQLITE_OK)
        packed_open(c->buf, len, &c->blob);
    c->i = 0;
    c->end = c->blob.n;
    return rc;
}

static int prepare(packed_cursor *c, sqlite3_stmt **st, const char *fmt)
{
    packed_vtab *v = (packed_vtab *)c->base.pVtab;
    char *sql;
    int rc;

    if (*st)
        return SQLITE_OK;
    sql = sqlite3_mprintf(fmt, v->schema);
    if (!sql)
        return SQLITE_NOMEM;
    rc = sqlite3_prepare_v3(v->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
    sqlite3_free(sql);
    if (rc != SQLITE_OK)
        return packed_vtab_error(&v->base, rc, sqlite3_mprintf("%s", sqlite3_errmsg(v->db)));
    return SQLITE_OK;
}

/* Keeps record `at` of `chunk` alone as the cursor's row. */
static int keep_record(packed_cursor *c, const packed_blob *chunk, size_t at)
{
    int rc = keep(c, chunk->data, 1 + chunk->size);

    if (rc != SQLITE_OK)
        return rc;
    memmove(c->buf + 1, chunk->data + 1 + at * chunk->size, chunk->size);
    packed_open(c->buf, 1 + chunk->size, &c->blob);
    c->i = 0;
    c->end = 1;
    return SQLITE_OK;
}

/* The process's record of second c->t from the chunk of the same first
 * process id as the one it was in the second before: the processes of
 * consecutive seconds are mostly the same, and so are their chunks. One
 * exact key read by incremental blob I/O, without a statement. 1: not
 * known there (no such chunk, or the process is past its ids); -1: not in
 * this second. */
static int seek_hinted(packed_cursor *c)
{
    packed_vtab *v = (packed_vtab *)c->base.pVtab;
    int64_t key = packed_key(c->t, c->hint_id);
    packed_blob chunk;
    size_t len, at;
    int rc;

    if (c->no_hint || c->hint_id < 0)
        return 1;
    rc = c->hint ? sqlite3_blob_reopen(c->hint, key)
                 : sqlite3_blob_open(v->db, v->schema, "process_energy_packed", "rows", key, 0,
                                     &c->hint);
    if (rc == SQLITE_OK) {
        len = (size_t)sqlite3_blob_bytes(c->hint);
        rc = keep(c, NULL, len);
        if (rc == SQLITE_OK)
            rc = sqlite3_blob_read(c->hint, c->buf, (int)len, 0);
    }
    if (rc == SQLITE_NOMEM)
        return rc;
    if (rc != SQLITE_OK) {
        /* no such chunk, or a handle a change of the table expired: an
         * aborted handle takes no more keys, and opening one costs a
         * statement's preparation, so the seeks go on without */
        sqlite3_blob_close(c->hint);
        c->hint = NULL;
        c->no_hint = true;
        return 1;
    }
    if (packed_open(c->buf, len, &chunk) < 0)
        return damaged(c, (int64_t)len);
    if (chunk.n == 0 || packed_id(&chunk, 0) > c->pid || packed_id(&chunk, chunk.n - 1) < c->pid)
        return 1;
    at = packed_lower_bound(&chunk, c->pid);
    if (packed_id(&chunk, at) != c->pid)
        return -1;
    return keep_record(c, &chunk, at);
}

/* The process's record of second c->t: one seek for the chunk that would
 * hold it, a binary search in the chunk, and the record copied alone. -1:
 * none; with `probe`, 1 instead where second c->t has no chunk that could
 * hold it (it may have no chunks at all). */
static int seek_process(packed_cursor *c, bool probe)
{
    int rc = prepare(c, &c->seek,
                     "SELECT k, rows FROM \"%w\".process_energy_packed"
                     " WHERE k >= ?1 AND k <= ?2 ORDER BY k DESC LIMIT 1");
    packed_blob chunk;
    size_t at;

    if (rc != SQLITE_OK)
        return rc;
    rc = seek_hinted(c);
    if (rc != 1)
        return rc;
    sqlite3_bind_int64(c->seek, 1, packed_key(c->t, 0));
    sqlite3_bind_int64(c->seek, 2, packed_key(c->t, c->pid));
    rc = sqlite3_step(c->seek);
    if (rc == SQLITE_ROW) {
        const void *data = sqlite3_column_blob(c->seek, 1);
        size_t len = (size_t)sqlite3_column_bytes(c->seek, 1);
        if (packed_open(data, len, &chunk) < 0)
            rc = damaged(c, (int64_t)len);
        else if ((at = packed_lower_bound(&chunk, c->pid)) == chunk.n ||
                 packed_id(&chunk, at) != c->pid)
            rc = -1;
        else {
            rc = keep_record(c, &chunk, at);
            c->hint_id = packed_id(&chunk, 0);
        }
    } else if (rc == SQLITE_DONE) {
        rc = probe ? 1 : -1;
    }
    sqlite3_reset(c->seek);
    return rc;
}

/* Moves to the process's record of the second after c->t (ascending), once
 * the process was found in a second before: a process that ran in a second
 * mostly runs in the next, so a range of seconds takes one seek a second
 * (mostly the read of the chunk it was in), without the statement that
 * finds the next second. As seek_process; 1: not in that second either,
 * which may have no chunks at all (step_second finds the next that has), or
 * no seconds left. */
static int seek_following(packed_cursor *c)
{
    if (c->desc || c->t >= c->hi || c->hint_id < 0)
        return 1;
    c->t++;
    return seek_process(c, true);
}

/* Moves c->t to the next second (in the cursor's order) that has chunks,
 * within [lo, hi]; eof when none. */
static int step_second(packed_cursor *c)
{
    int rc;

    if (c->desc ? c->t <= c->lo : c->t >= c->hi) {
        c->eof = true;
        return SQLITE_OK;
    }
    rc = prepare(c, &c->next,
                 c->desc ? "SELECT k FROM \"%w\".process_energy_packed"
                           " WHERE k < ?1 AND k >= ?2 ORDER BY k DESC LIMIT 1"
                         : "SELECT k FROM \"%w\".process_energy_packed"
                           " WHERE k > ?1 AND k <= ?2 ORDER BY k LIMIT 1");
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_bind_int64(c->next, 1,
                       c->desc ? packed_key(c->t, 0) : packed_key(c->t, PACKED_PART_MAX));
    sqlite3_bind_int64(c->next, 2,
                       c->desc ? packed_key(c->lo, 0) : packed_key(c->hi, PACKED_PART_MAX));
    rc = sqlite3_step(c->next);
    if (rc == SQLITE_ROW)
        c->t = packed_key_t(sqlite3_column_int64(c->next, 0));
    else if (rc == SQLITE_DONE)
        c->eof = true;
    sqlite3_reset(c->next);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Goes to the next record the cursor shows: the next chunk of the scan,
 * or the process's record of the next second that has one (of c->t
 * itself when `here`). */
static int next_second(packed_cursor *c, bool here)
{
    for (;;) {
        int rc;
        if (c->by_pid) {
            rc = here ? 1 : seek_following(c);
            if (rc == 1) {
                rc = here ? SQLITE_OK : step_second(c);
                here = false;
                if (rc != SQLITE_OK || c->eof)
                    return rc;
                rc = seek_process(c, false);
            }
        } else {
            rc = sqlite3_step(c->st);
            if (rc == SQLITE_DONE) {
                c->eof = true;
                return SQLITE_OK;
            }
            if (rc == SQLITE_ROW)
                rc = load_chunk(c, c->st);
        }
        if (rc != -1)
            return rc;
    }
}

static int x_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str, int argc,
                    sqlite3_value **argv)
{
    packed_cursor *c = (packed_cursor *)base;
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
    /* the seconds a key holds */
    lo = lo < 0 ? 0 : lo;
    hi = hi > PACKED_T_MAX ? PACKED_T_MAX : hi;
    if (!any || lo > hi)
        return SQLITE_OK;
    if (c->desc != desc) {
        packed_vtab *v = (packed_vtab *)base->pVtab;
        give_back(&v->spare_st[c->desc], &c->st);
        give_back(&v->spare_next[c->desc], &c->next);
        c->desc = desc;
        take(&v->spare_st[desc], &c->st);
        take(&v->spare_next[desc], &c->next);
    }
    c->lo = lo;
    c->hi = hi;
    if (c->by_pid) {
        if (c->hint_id >= 0 && packed_part(c->hint_id) > packed_part(c->pid))
            c->hint_id = -1; /* another process's chunk, after this one's */
        c->t = desc ? hi : lo;
        c->eof = false;
        return next_second(c, true);
    }
    rc = prepare(c, &c->st,
                 desc ? "SELECT k, rows FROM \"%w\".process_energy_packed"
                        " WHERE k >= ?1 AND k <= ?2 ORDER BY k DESC"
                      : "SELECT k, rows FROM \"%w\".process_energy_packed"
                        " WHERE k >= ?1 AND k <= ?2 ORDER BY k");
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_reset(c->st);
    sqlite3_bind_int64(c->st, 1, packed_key(lo, 0));
    sqlite3_bind_int64(c->st, 2, packed_key(hi, PACKED_PART_MAX));
    c->eof = false;
    return next_second(c, false);
}

static int x_next(sqlite3_vtab_cursor *base)
{
    packed_cursor *c = (packed_cursor *)base;

    if (++c->i < c->end)
        return SQLITE_OK;
    return next_second(c, false);
}

static int x_eof(sqlite3_vtab_cursor *base)
{
    return ((packed_cursor *)base)->eof;
}

static int x_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col)
{
    packed_cursor *c = (packed_cursor *)base;
    packed_rec r;

    if (col == PACKED_COL_T) {
        sqlite3_result_int64(ctx, c->t);
        return SQLITE_OK;
    }
    if (col == PACKED_COL_PROCESS_ID) {
        sqlite3_result_int64(ctx, packed_id(&c->blob, c->i));
        return SQLITE_OK;
    }
    packed_get(&c->blob, c->i, &r);
    switch (col) {
    case PACKED_COL_ATTRIBUTED:
        sqlite3_result_double(ctx, r.attributed_j);
        break;
    case PACKED_COL_STANDALONE:
        sqlite3_result_double(ctx, r.standalone_j);
        break;
    case PACKED_COL_CPU:
        sqlite3_result_double(ctx, r.cpu_s);
        break;
    case PACKED_COL_CLASS:
        if (r.has_class)
            sqlite3_result_int64(ctx, r.klass);
        else
            sqlite3_result_null(ctx);
        break;
    case PACKED_COL_MODEL:
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
        return packed_vtab_error(
            base->pVtab, SQLITE_RANGE,
            sqlite3_mprintf("process_energy_recent: second %lld, process %lld:"
                            " beyond the range of rows that can be changed by hand",
                            (long long)c->t, (long long)pid));
    *rowid = (int64_t)((uint64_t)c->t << 32 | (uint64_t)pid);
    return SQLITE_OK;
}

static int x_update(sqlite3_vtab *base, int argc, sqlite3_value **argv, sqlite3_int64 *rowid)
{
    packed_vtab *v = (packed_vtab *)base;

    (void)rowid;
    return packed_edit(base, v->db, v->schema, argc, argv);
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
