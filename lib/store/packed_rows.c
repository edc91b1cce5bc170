/* packed_rows: the blob of one second's per-process rows (its layout is in
 * packed.h): checking, decoding, encoding and merging records. No SQLite
 * calls, so the loadable extension (packed.c) links it as it is. */
#include "store/packed.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        p[i] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++, v >>= 8)
        p[i] = (uint8_t)v;
}

static double get_double(const uint8_t *p)
{
    uint64_t u = get64(p);
    double d;

    memcpy(&d, &u, sizeof(d));
    return d;
}

static void put_double(uint8_t *p, double d)
{
    uint64_t u;

    memcpy(&u, &d, sizeof(u));
    put64(p, u);
}

int packed_open(const void *data, size_t len, packed_blob *b)
{
    const uint8_t *p = data;

    if (!p || len < 1)
        return -EBADMSG;
    if (p[0] == PACKED_NARROW)
        b->size = PACKED_NARROW_SIZE;
    else if (p[0] == PACKED_WIDE)
        b->size = PACKED_WIDE_SIZE;
    else
        return -EBADMSG;
    if ((len - 1) % b->size != 0)
        return -EBADMSG;
    b->data = p;
    b->n = (len - 1) / b->size;
    return 0;
}

int64_t packed_id(const packed_blob *b, size_t i)
{
    const uint8_t *p = b->data + 1 + i * b->size;

    return b->size == PACKED_NARROW_SIZE ? (int64_t)get32(p) : (int64_t)get64(p);
}

void packed_get(const packed_blob *b, size_t i, packed_rec *r)
{
    const uint8_t *p = b->data + 1 + i * b->size;

    if (b->size == PACKED_NARROW_SIZE) {
        r->process_id = get32(p);
        r->has_class = p[28] != PACKED_NULL8;
        r->klass = r->has_class ? p[28] : 0;
        r->has_model = p[29] != PACKED_NULL8;
        r->model_id = r->has_model ? p[29] : 0;
    } else {
        r->process_id = (int64_t)get64(p);
        r->klass = (int64_t)get64(p + 32);
        r->model_id = (int64_t)get64(p + 40);
        r->has_class = !(p[48] & 1);
        r->has_model = !(p[48] & 2);
    }
    r->attributed_j = get_double(p + 4 + 4 * (b->size != PACKED_NARROW_SIZE));
    r->standalone_j = get_double(p + 12 + 4 * (b->size != PACKED_NARROW_SIZE));
    r->cpu_s = get_double(p + 20 + 4 * (b->size != PACKED_NARROW_SIZE));
}

size_t packed_lower_bound(const packed_blob *b, int64_t id)
{
    size_t lo = 0, hi = b->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (packed_id(b, mid) < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

bool packed_fits_narrow(const packed_rec *r)
{
    return r->process_id >= 0 && r->process_id <= UINT32_MAX &&
           (!r->has_class || (r->klass >= 0 && r->klass < PACKED_NULL8)) &&
           (!r->has_model || (r->model_id >= 0 && r->model_id < PACKED_NULL8));
}

static bool all_narrow(const packed_rec *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!packed_fits_narrow(&r[i]))
            return false;
    return true;
}

size_t packed_size(const packed_rec *r, size_t n)
{
    return 1 + n * (all_narrow(r, n) ? PACKED_NARROW_SIZE : PACKED_WIDE_SIZE);
}

void packed_encode(const packed_rec *r, size_t n, uint8_t *out)
{
    bool narrow = all_narrow(r, n);
    uint8_t *p = out + 1;

    out[0] = narrow ? PACKED_NARROW : PACKED_WIDE;
    for (size_t i = 0; i < n; i++, r++) {
        if (narrow) {
            put32(p, (uint32_t)r->process_id);
            p += 4;
        } else {
            put64(p, (uint64_t)r->process_id);
            p += 8;
        }
        put_double(p, r->attributed_j);
        put_double(p + 8, r->standalone_j);
        put_double(p + 16, r->cpu_s);
        p += 24;
        if (narrow) {
            p[0] = r->has_class ? (uint8_t)r->klass : PACKED_NULL8;
            p[1] = r->has_model ? (uint8_t)r->model_id : PACKED_NULL8;
            p += 2;
        } else {
            put64(p, (uint64_t)(r->has_class ? r->klass : 0));
            put64(p + 8, (uint64_t)(r->has_model ? r->model_id : 0));
            p[16] = (uint8_t)((r->has_class ? 0 : 1) | (r->has_model ? 0 : 2));
            p += 17;
        }
    }
}

int packed_merge(const packed_rec *old, size_t n_old, const packed_rec *add, size_t n_add,
                 packed_rec **out, size_t *cap, size_t *n)
{
    size_t i = 0, k = 0, m = 0;

    if (n_old + n_add > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < n_old + n_add)
            c *= 2;
        packed_rec *v = realloc(*out, c * sizeof(*v));
        if (!v)
            return -ENOMEM;
        *out = v;
        *cap = c;
    }
    while (i < n_old || k < n_add) {
        packed_rec o = {0};
        if (i < n_old)
            o = old[i];
        if (k >= n_add || (i < n_old && o.process_id < add[k].process_id)) {
            (*out)[m++] = o;
            i++;
        } else if (i >= n_old || add[k].process_id < o.process_id) {
            (*out)[m++] = add[k++];
        } else {
            packed_rec r = add[k++];
            r.attributed_j = o.attributed_j + r.attributed_j;
            r.standalone_j = o.standalone_j + r.standalone_j;
            r.cpu_s = o.cpu_s + r.cpu_s;
            (*out)[m++] = r;
            i++;
        }
    }
    *n = m;
    return 0;
}
