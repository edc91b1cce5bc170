/* packed_edit: changes by hand through the virtual table
 * process_energy_recent (packed.c): an INSERT, UPDATE or DELETE of one row
 * reads its second's records, changes them and writes the second's chunks
 * anew (packed_chunks.c), as the table of rows it replaced took such edits.
 * The writer never comes here; it writes whole seconds (conn.c). */
#ifdef WATTPROF_SQLITE_EXTENSION
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3
#endif
#include "store/packed.h"

#include <stdlib.h>
#include <string.h>

/* The table being changed: its connection, and the database (schema name)
 * whose process_energy_packed holds its rows. */
typedef struct edit_ctx {
    sqlite3_vtab *base;
    sqlite3 *db;
    const char *schema;
} edit_ctx;

/* Prepares fmt, which names the schema with %w. */
static int prepare_v(edit_ctx *v, const char *fmt, sqlite3_stmt **st)
{
    char *sql = sqlite3_mprintf(fmt, v->schema);
    int rc;

    if (!sql)
        return SQLITE_NOMEM;
    rc = sqlite3_prepare_v2(v->db, sql, -1, st, NULL);
    sqlite3_free(sql);
    return rc;
}

/* Second t's records, decoded into *r (malloc'd, n + 1 slots). */
static int read_second(edit_ctx *v, int64_t t, packed_rec **r, size_t *n)
{
    sqlite3_stmt *st = NULL;
    size_t cap = 0;
    int rc = prepare_v(v,
                       "SELECT rows FROM \"%w\".process_energy_packed"
                       " WHERE k BETWEEN ?1 AND ?2 ORDER BY k",
                       &st);

    *r = NULL;
    *n = 0;
    if (rc == SQLITE_OK)
        rc = packed_read_second(st, t, r, &cap, n);
    sqlite3_finalize(st);
    if (rc == SQLITE_CORRUPT)
        rc = packed_vtab_error(
            v->base, SQLITE_CORRUPT_VTAB,
            sqlite3_mprintf("process_energy_packed: a chunk of second %lld is not a"
                            " packed blob",
                            (long long)t));
    if (rc == SQLITE_OK && *n + 1 > cap) {
        packed_rec *m = realloc(*r, (*n + 1) * sizeof(**r));
        if (!m)
            rc = SQLITE_NOMEM;
        else
            *r = m;
    }
    return rc;
}

/* Writes second t's n records, after deleting its chunks. */
static int write_second(edit_ctx *v, int64_t t, const packed_rec *r, size_t n)
{
    sqlite3_stmt *page = NULL, *del = NULL, *put = NULL;
    uint8_t *buf = NULL;
    size_t cap = 0;
    int rc;

    if (t < 0 || t > PACKED_T_MAX)
        return packed_vtab_error(
            v->base, SQLITE_RANGE,
            sqlite3_mprintf("process_energy_recent: second %lld is outside 0..%lld,"
                            " the seconds the packed rows hold",
                            (long long)t, (long long)PACKED_T_MAX));
    rc = prepare_v(v, "PRAGMA \"%w\".page_size", &page);
    if (rc == SQLITE_OK)
        rc = prepare_v(v, "DELETE FROM \"%w\".process_energy_packed WHERE k BETWEEN ?1 AND ?2",
                       &del);
    if (rc == SQLITE_OK)
        rc = prepare_v(v, "INSERT INTO \"%w\".process_energy_packed (k, rows) VALUES (?1, ?2)",
                       &put);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(page) == SQLITE_ROW ? SQLITE_OK : sqlite3_errcode(v->db);
    if (rc == SQLITE_OK)
        rc = packed_write_second(del, put, t, r, n, packed_chunk_max(sqlite3_column_int64(page, 0)),
                                 &buf, &cap);
    sqlite3_finalize(page);
    sqlite3_finalize(del);
    sqlite3_finalize(put);
    free(buf);
    return rc;
}

static int delete_row(edit_ctx *v, sqlite3_int64 rowid)
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
    free(r);
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
static int insert_row(edit_ctx *v, sqlite3_value **col)
{
    packed_rec rec = {0}, *r;
    int64_t t;
    size_t n, i = 0;
    int rc;

    if (!is_int(col[PACKED_COL_T]) || !is_int(col[PACKED_COL_PROCESS_ID]) ||
        !is_num(col[PACKED_COL_ATTRIBUTED]) || !is_num(col[PACKED_COL_STANDALONE]) ||
        !is_num(col[PACKED_COL_CPU]) ||
        !(is_int(col[PACKED_COL_CLASS]) ||
          sqlite3_value_type(col[PACKED_COL_CLASS]) == SQLITE_NULL) ||
        !(is_int(col[PACKED_COL_MODEL]) ||
          sqlite3_value_type(col[PACKED_COL_MODEL]) == SQLITE_NULL))
        return packed_vtab_error(
            v->base, SQLITE_MISMATCH,
            sqlite3_mprintf("process_energy_recent: t and process_id must be"
                            " integers, the energies and CPU time numbers, class"
                            " and model_id integers or NULL"));
    t = sqlite3_value_int64(col[PACKED_COL_T]);
    rec.process_id = sqlite3_value_int64(col[PACKED_COL_PROCESS_ID]);
    rec.attributed_j = sqlite3_value_double(col[PACKED_COL_ATTRIBUTED]);
    rec.standalone_j = sqlite3_value_double(col[PACKED_COL_STANDALONE]);
    rec.cpu_s = sqlite3_value_double(col[PACKED_COL_CPU]);
    rec.has_class = sqlite3_value_type(col[PACKED_COL_CLASS]) != SQLITE_NULL;
    rec.klass = sqlite3_value_int64(col[PACKED_COL_CLASS]);
    rec.has_model = sqlite3_value_type(col[PACKED_COL_MODEL]) != SQLITE_NULL;
    rec.model_id = sqlite3_value_int64(col[PACKED_COL_MODEL]);
    rc = read_second(v, t, &r, &n);
    while (rc == SQLITE_OK && i < n && r[i].process_id < rec.process_id)
        i++;
    if (rc == SQLITE_OK && i < n && r[i].process_id == rec.process_id)
        rc = packed_vtab_error(
            v->base, SQLITE_CONSTRAINT_PRIMARYKEY,
            sqlite3_mprintf("process_energy_recent: second %lld already has a row of"
                            " process %lld",
                            (long long)t, (long long)rec.process_id));
    if (rc == SQLITE_OK) {
        memmove(&r[i + 1], &r[i], (n - i) * sizeof(*r));
        r[i] = rec;
        rc = write_second(v, t, r, n + 1);
    }
    free(r);
    return rc;
}

int packed_edit(sqlite3_vtab *vt, sqlite3 *db, const char *schema, int argc, sqlite3_value **argv)
{
    edit_ctx v = {.base = vt, .db = db, .schema = schema};
    int rc = SQLITE_OK;

    if (sqlite3_value_type(argv[0]) != SQLITE_NULL)
        rc = delete_row(&v, sqlite3_value_int64(argv[0]));
    if (rc == SQLITE_OK && argc > 1)
        rc = insert_row(&v, argv + 2);
    return rc;
}
