/* packed: a second's per-process rows stored as chunks of
 * process_energy_packed (k INTEGER PRIMARY KEY, rows BLOB NOT NULL), and
 * the virtual table process_energy_recent that reads them back as the rows
 * of the table it replaced (schema version 10, docs/storage.md).
 *
 * A chunk holds the records of consecutive processes of one second, as
 * many as a table leaf cell holds without an overflow page (computed from
 * the page size: packed_chunk_max; about 32 narrow records with 1 KiB
 * pages). Its key: k = (t XOR 2^31) << 32 | p, read as a signed 64-bit
 * integer, where p is the chunk's first process id clamped to
 * 0..2^32 - 1 (packed_key). Keys sort by (t, p) for t in 0..2^32 - 1 (until
 * the year 2106), t = (k >> 32) + 2^31 (arithmetic shift), a second's
 * chunks lie in [packed_key(t, 0), packed_key(t, 2^32 - 1)], and the chunk
 * holding process id q of second t is the last one with a key <=
 * packed_key(t, q): one b-tree seek. Process ids that clamp to the same
 * p (those below 0, or from 2^32 - 1 on: wide records) are never split
 * across chunks, so they gather in the second's first or last chunk, which
 * may then overflow onto further pages; still one seek. At 200 processes
 * (7 chunks a second) the writer wrote 2.7 times the growth against 2.6
 * for one overflowing row a second, and `show` took 0.84-0.91 times its
 * time (docs/storage.md).
 *
 * A chunk's blob: one format byte, then one fixed-size record per process,
 * sorted by process id, no two with the same id. All numbers little-endian;
 * the doubles are stored bit for bit. Each chunk has its own format.
 *
 *   format 1 (narrow), 30 bytes a record, when every process id fits in
 *   32 bits and every class and model id in 0..254:
 *     u32 process_id, f64 attributed_j, f64 standalone_j, f64 cpu_s,
 *     u8 class, u8 model_id (255: NULL)
 *   format 2 (wide), 49 bytes a record, for anything else:
 *     i64 process_id, f64 attributed_j, f64 standalone_j, f64 cpu_s,
 *     i64 class, i64 model_id, u8 flags (bit 0: class NULL, bit 1: model
 *     id NULL)
 *
 * A blob of no records is never stored: a second without rows has no row. */
#ifndef WATTPROF_STORE_PACKED_H
#define WATTPROF_STORE_PACKED_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PACKED_NARROW 1
#define PACKED_WIDE 2
#define PACKED_NARROW_SIZE 30
#define PACKED_WIDE_SIZE 49
#define PACKED_NULL8 255 /* a narrow record's NULL class or model id */

/* One process's row of one second. */
typedef struct packed_rec {
    int64_t process_id;
    double attributed_j, standalone_j, cpu_s;
    int64_t klass, model_id;
    bool has_class, has_model;
} packed_rec;

/* A blob checked by packed_open: its records are data[1 + i * size]. */
typedef struct packed_blob {
    const uint8_t *data;
    size_t n, size;
} packed_blob;

/* Checks a stored blob: -EBADMSG for an unknown format or a length that is
 * not a whole number of records. */
int packed_open(const void *data, size_t len, packed_blob *b);
/* Record i, decoded. */
void packed_get(const packed_blob *b, size_t i, packed_rec *r);
/* The process id of record i. */
int64_t packed_id(const packed_blob *b, size_t i);
/* The index of the first record whose process id is >= id (b->n: none). */
size_t packed_lower_bound(const packed_blob *b, int64_t id);
/* Whether r fits a narrow record. */
bool packed_fits_narrow(const packed_rec *r);
/* The bytes n records sorted by process id take. */
size_t packed_size(const packed_rec *r, size_t n);
/* Writes n records sorted by process id into out (packed_size bytes). */
void packed_encode(const packed_rec *r, size_t n, uint8_t *out);
/* Adds the sorted records `add` (n_add) to the sorted records `old`
 * (n_old), as the per-second rows' upsert did: the energies and CPU time
 * summed (old + new), class and model id the new ones'. The result, sorted,
 * goes to *out (malloc'd or grown, *cap records), *n records. -ENOMEM. */
int packed_merge(const packed_rec *old, size_t n_old, const packed_rec *add, size_t n_add,
                 packed_rec **out, size_t *cap, size_t *n);

/* ---- Chunks (packed_chunks.c) ------------------------------------------------ */

#define PACKED_T_MAX ((int64_t)UINT32_MAX) /* the seconds a key holds: 0..this */
#define PACKED_PART_MAX ((int64_t)UINT32_MAX)

/* In SQL: the second of key k, and the first key of second T. */
#define PACKED_T_SQL(K) "((" K " >> 32) + 2147483648)"
#define PACKED_KEY_SQL(T) "((" T " - 2147483648) << 32)"

/* A process id's part of a chunk key: clamped to 0..2^32 - 1. */
static inline int64_t packed_part(int64_t id)
{
    return id < 0 ? 0 : id > PACKED_PART_MAX ? PACKED_PART_MAX : id;
}

/* The key of second t (0..PACKED_T_MAX) for process id `id`. */
static inline int64_t packed_key(int64_t t, int64_t id)
{
    return (int64_t)(((uint64_t)t ^ 0x80000000u) << 32 | (uint64_t)packed_part(id));
}

/* The second of key k. */
static inline int64_t packed_key_t(int64_t k)
{
    return (int64_t)(((uint64_t)k >> 32) ^ 0x80000000u);
}

/* The longest blob a leaf cell of a table whose pages are page_size bytes
 * holds without an overflow page. */
size_t packed_chunk_max(int64_t page_size);
/* How many of the n sorted records r the chunk starting at r[0] takes: as
 * many as fit in max_len bytes (at least one), never splitting records of
 * one key part (packed_part) between two chunks: the chunk ends before
 * such a run, or, when the run starts at r[0], after it. */
size_t packed_chunk_count(const packed_rec *r, size_t n, size_t max_len);
/* Appends second t's records, read from its chunks with `get` (SELECT rows
 * ... WHERE k BETWEEN ?1 AND ?2 ORDER BY k), to *out (grown as
 * packed_merge's), *n records in all: an SQLite code, SQLITE_CORRUPT for a
 * chunk that is no packed blob. */
int packed_read_second(sqlite3_stmt *get, int64_t t, packed_rec **out, size_t *cap, size_t *n);
/* Writes second t's n sorted records as chunks of at most max_len bytes
 * with `put` (INSERT INTO ... (k, rows) VALUES (?1, ?2)), after deleting
 * its chunks with `del` (DELETE ... WHERE k BETWEEN ?1 AND ?2; NULL: the
 * second has none). *buf (*cap bytes) is grown as needed. An SQLite code;
 * SQLITE_RANGE for t outside 0..PACKED_T_MAX. */
int packed_write_second(sqlite3_stmt *del, sqlite3_stmt *put, int64_t t, const packed_rec *r,
                        size_t n, size_t max_len, uint8_t **buf, size_t *cap);

/* ---- The virtual table (packed.c, packed_edit.c) ------------------------------ */

/* process_energy_recent's columns, in order. */
enum packed_col {
    PACKED_COL_T,
    PACKED_COL_PROCESS_ID,
    PACKED_COL_ATTRIBUTED,
    PACKED_COL_STANDALONE,
    PACKED_COL_CPU,
    PACKED_COL_CLASS,
    PACKED_COL_MODEL
};

/* Registers the eponymous virtual table process_energy_recent on db,
 * reading main.process_energy_packed: an SQLite code. */
int packed_register(sqlite3 *db);

/* Sets the message SQLite reports for the call of table vt that failed
 * (msg from sqlite3_mprintf, NULL when out of memory); returns rc. */
int packed_vtab_error(sqlite3_vtab *vt, int rc, char *msg);

/* xUpdate of the table vt on db, whose rows are in schema's
 * process_energy_packed: argv[0] the rowid of a row to delete (NULL: none),
 * argv[2..8] (argc > 1) the columns of a row to insert. An SQLite code. */
int packed_edit(sqlite3_vtab *vt, sqlite3 *db, const char *schema, int argc, sqlite3_value **argv);

#endif
