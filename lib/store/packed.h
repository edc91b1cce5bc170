/* packed: a second's per-process rows stored as one row of
 * process_energy_packed (t INTEGER PRIMARY KEY, rows BLOB NOT NULL), and
 * the virtual table process_energy_recent that reads them back as the rows
 * of the table it replaced (schema version 10, docs/storage.md).
 *
 * The blob: one format byte, then one fixed-size record per process,
 * sorted by process id, no two with the same id. All numbers little-endian;
 * the doubles are stored bit for bit.
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
/* The bytes n records sorted by process id take. */
size_t packed_size(const packed_rec *r, size_t n);
/* Writes n records sorted by process id into out (packed_size bytes). */
void packed_encode(const packed_rec *r, size_t n, uint8_t *out);
/* Adds the sorted records `add` (n_add) to the records of `old` (a blob, or
 * NULL), as the per-second rows' upsert did: the energies and CPU time
 * summed (old + new), class and model id the new ones'. The result, sorted,
 * goes to *out (malloc'd or grown, *cap records), *n records. -ENOMEM. */
int packed_merge(const packed_blob *old, const packed_rec *add, size_t n_add, packed_rec **out,
                 size_t *cap, size_t *n);

/* Registers the eponymous virtual table process_energy_recent on db,
 * reading main.process_energy_packed: an SQLite code. */
int packed_register(sqlite3 *db);

#endif
