/* packed_chunks: a second's records as the chunks of process_energy_packed
 * that hold them (their keys and sizes: packed.h): splitting them into
 * chunks that fit a leaf cell, reading a second's chunks back, and writing
 * a second whole again. Built into lib/store and into the loadable
 * extension (packed.c's changes by hand). */
#ifdef WATTPROF_SQLITE_EXTENSION
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3
#endif
#include "store/packed.h"

#include <errno.h>
#include <stdlib.h>

/* A rowid table's leaf cell keeps up to usable size - 35 bytes of payload
 * on its page (SQLite's file format, "B-tree Pages"); the payload of a
 * chunk is its record: a 4-byte header (its size, NULL for the key, which
 * is the rowid, and the blob's type, 2 bytes up to 8 KiB) and the blob. */
#define CELL_OVERHEAD 35
#define RECORD_HEADER 4
#define SMALLEST_PAGE 512

size_t packed_chunk_max(int64_t page_size)
{
    if (page_size < SMALLEST_PAGE)
        page_size = SMALLEST_PAGE;
    return (size_t)page_size - CELL_OVERHEAD - RECORD_HEADER;
}

size_t packed_chunk_count(const packed_rec *r, size_t n, size_t max_len)
{
    bool narrow = n > 0 && packed_fits_narrow(&r[0]);
    size_t m = 1;

    if (n == 0)
        return 0;
    while (m < n) {
        bool both = narrow && packed_fits_narrow(&r[m]);
        if (1 + (m + 1) * (both ? PACKED_NARROW_SIZE : PACKED_WIDE_SIZE) > max_len)
            break;
        narrow = both;
        m++;
    }
    /* records of one key part stay in one chunk, so the next chunk's key is
     * greater than all of this one's: end before the run of the part that
     * the limit cut, or, if that run is the chunk's first, after it */
    if (m < n && packed_part(r[m].process_id) == packed_part(r[m - 1].process_id)) {
        size_t j = m - 1;
        while (j > 0 && packed_part(r[j].process_id) == packed_part(r[j - 1].process_id))
            j--;
        if (j > 0)
            return j;
        while (m < n && packed_part(r[m].process_id) == packed_part(r[0].process_id))
            m++;
    }
    return m;
}

static int grow_recs(packed_rec **out, size_t *cap, size_t want)
{
    size_t c = *cap ? *cap : 256;
    packed_rec *v;

    if (want <= *cap)
        return SQLITE_OK;
    while (c < want)
        c *= 2;
    v = realloc(*out, c * sizeof(*v));
    if (!v)
        return SQLITE_NOMEM;
    *out = v;
    *cap = c;
    return SQLITE_OK;
}

int packed_read_second(sqlite3_stmt *get, int64_t t, packed_rec **out, size_t *cap, size_t *n)
{
    int rc;

    if (t < 0 || t > PACKED_T_MAX)
        return SQLITE_OK; /* no key holds it: no rows */
    sqlite3_bind_int64(get, 1, packed_key(t, 0));
    sqlite3_bind_int64(get, 2, packed_key(t, PACKED_PART_MAX));
    while ((rc = sqlite3_step(get)) == SQLITE_ROW) {
        packed_blob b;
        if (packed_open(sqlite3_column_blob(get, 0), (size_t)sqlite3_column_bytes(get, 0), &b) <
            0) {
            rc = SQLITE_CORRUPT;
            break;
        }
        rc = grow_recs(out, cap, *n + b.n);
        if (rc != SQLITE_OK)
            break;
        for (size_t i = 0; i < b.n; i++)
            packed_get(&b, i, &(*out)[(*n)++]);
    }
    sqlite3_reset(get);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int run(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);

    sqlite3_reset(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int packed_write_second(sqlite3_stmt *del, sqlite3_stmt *put, int64_t t, const packed_rec *r,
                        size_t n, size_t max_len, uint8_t **buf, size_t *cap)
{
    int rc = SQLITE_OK;

    if (t < 0 || t > PACKED_T_MAX)
        return SQLITE_RANGE;
    if (del) {
        sqlite3_bind_int64(del, 1, packed_key(t, 0));
        sqlite3_bind_int64(del, 2, packed_key(t, PACKED_PART_MAX));
        rc = run(del);
    }
    for (size_t i = 0, m; i < n && rc == SQLITE_OK; i += m) {
        size_t len;
        m = packed_chunk_count(r + i, n - i, max_len);
        len = packed_size(r + i, m);
        if (len > *cap) {
            uint8_t *v = realloc(*buf, len);
            if (!v)
                return SQLITE_NOMEM;
            *buf = v;
            *cap = len;
        }
        packed_encode(r + i, m, *buf);
        sqlite3_bind_int64(put, 1, packed_key(t, r[i].process_id));
        sqlite3_bind_blob64(put, 2, *buf, len, SQLITE_STATIC);
        rc = run(put);
    }
    return rc;
}
