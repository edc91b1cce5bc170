/* trace_write: the --record writer (format in docs/records.md; the reader
 * is trace_read.c).
 *
 * The writer runs on the 50 Hz sampling thread, so a tick line is built in
 * a reusable buffer with no allocation (integral values, the usual case for
 * unmultiplexed counts, print as integers; others with 17 significant
 * digits, which round-trip exactly) and handed to a large stdio buffer that
 * reaches the disk a megabyte at a time, never per tick. Header and process
 * lines are rare and carry free text, so json-c builds and escapes them. The
 * rules for values, shared with the reader, are here too. */
#include "sample/sample.h"
#include "sample/trace-internal.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TRACE_STDIO_BUF (1u << 20)
#define TRACE_NUM_MAX 25 /* longest number printed: "%.17g" with sign and exponent */

const char *trace_value_bad(enum trace_value kind, double v)
{
    if (!isfinite(v))
        return "is not a finite number";
    if (v < 0)
        return "is negative";
    if (kind == TRACE_V_RATIO && v > 1)
        return "is a running/enabled ratio above 1";
    return NULL;
}

/* ---- Writer ----------------------------------------------------------------- */

struct trace_writer {
    FILE *f;
    char *stdio_buf;
    size_t n_events, n_zones;
    char *line; /* the tick line being built, reused */
    size_t line_cap, line_len;
    uint64_t last_t, flushed_t; /* tick times of the last line, of the last flush */
    bool any_tick;
    int error; /* first write error: the file is cut there, later writes are refused */
};

static int trace_reserve(trace_writer *w, size_t need)
{
    if (need <= w->line_cap)
        return 0;
    size_t cap = w->line_cap ? w->line_cap : 4096;
    while (cap < need)
        cap *= 2;
    char *n = realloc(w->line, cap);
    if (!n)
        return -ENOMEM;
    w->line = n;
    w->line_cap = cap;
    return 0;
}

/* Appends below assume trace_reserve made room for the whole line. */
static void trace_put(trace_writer *w, const char *s, size_t n)
{
    memcpy(w->line + w->line_len, s, n);
    w->line_len += n;
}

#define trace_puts(w, lit) trace_put(w, lit, sizeof(lit) - 1)

static void trace_put_u64(trace_writer *w, uint64_t v)
{
    char tmp[20];
    size_t i = sizeof(tmp);

    do
        tmp[--i] = (char)('0' + v % 10);
    while (v /= 10);
    trace_put(w, tmp + i, sizeof(tmp) - i);
}

static const uint64_t trace_pow10[20] = {
    UINT64_C(1),
    UINT64_C(10),
    UINT64_C(100),
    UINT64_C(1000),
    UINT64_C(10000),
    UINT64_C(100000),
    UINT64_C(1000000),
    UINT64_C(10000000),
    UINT64_C(100000000),
    UINT64_C(1000000000),
    UINT64_C(10000000000),
    UINT64_C(100000000000),
    UINT64_C(1000000000000),
    UINT64_C(10000000000000),
    UINT64_C(100000000000000),
    UINT64_C(1000000000000000),
    UINT64_C(10000000000000000),
    UINT64_C(100000000000000000),
    UINT64_C(1000000000000000000),
    UINT64_C(10000000000000000000),
};

/* Digits of v (< 10^width) zero-padded to `width`, trailing zeros dropped. */
static void trace_put_fraction(trace_writer *w, uint64_t v, int width)
{
    char tmp[20];

    for (int i = width - 1; i >= 0; i--, v /= 10)
        tmp[i] = (char)('0' + v % 10);
    while (width > 0 && tmp[width - 1] == '0')
        width--;
    trace_put(w, tmp, (size_t)width);
}

/* A positive, non-integral double as a decimal that reads back as the same
 * double, with integer arithmetic only; false when v is out of its range.
 *
 * v = k * 2^-q exactly (k < 2^53). Its integer part prints exactly; the
 * fraction f/2^q is printed with d digits, rounded to nearest, where d is
 * the smallest with 10^-d < 2^-(q+1): the printed value is then within half
 * of the gap to either neighbouring double (the gap below a power of two is
 * half the gap above, hence q+1), so strtod returns v. Typical counts
 * (~10^7) take 17 or 18 digits, like "%.17g", at a small fraction of
 * printf's cost (tests/bench/trace-write). */
static bool trace_put_exact(trace_writer *w, double v)
{
    uint64_t bits;

    memcpy(&bits, &v, sizeof(bits));
    int biased = (int)(bits >> 52) & 0x7ff;
    uint64_t k = (bits & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1) << 52);
    int q = 1075 - biased; /* v = k * 2^-q for normal v */

    if (biased == 0 || q <= 0 || q > 62) /* subnormal, integral, or below 2^-9:
                                              10^d would not fit 64 bits */
        return false;
    int d = (int)((q + 1) * 0.30102999566398120) + 1;
    uint64_t ipart = k >> q;
    uint64_t f = k & ((UINT64_C(1) << q) - 1);
    uint64_t pow10 = trace_pow10[d];
    unsigned __int128 r = ((unsigned __int128)f * pow10 + ((unsigned __int128)1 << (q - 1))) >> q;
    if (r == pow10) {
        ipart++;
        r = 0;
    }
    trace_put_u64(w, ipart);
    if (r) {
        trace_puts(w, ".");
        trace_put_fraction(w, (uint64_t)r, d);
    }
    return true;
}

static void trace_put_double(trace_writer *w, double v)
{
    /* Below 2^64 every integral double is an integer and reads back as one. */
    if (v >= 0 && v < 18446744073709551616.0 && v == (double)(uint64_t)v && !signbit(v)) {
        trace_put_u64(w, (uint64_t)v);
        return;
    }
    if (v == 0) { /* -0: "%.17g" gives "-0", which reads back as the integer 0 */
        trace_puts(w, "-0.0");
        return;
    }
    if (v > 0 && trace_put_exact(w, v))
        return;
    w->line_len += (size_t)snprintf(w->line + w->line_len, TRACE_NUM_MAX + 1, "%.17g", v);
}

static void trace_put_doubles(trace_writer *w, const double *v, size_t n)
{
    trace_puts(w, "[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            trace_puts(w, ",");
        trace_put_double(w, v[i]);
    }
    trace_puts(w, "]");
}

static int trace_emit(trace_writer *w, const char *s, size_t n)
{
    if (w->error)
        return w->error;
    if (fwrite(s, 1, n, w->f) != n)
        w->error = errno ? -errno : -EIO;
    return w->error;
}

static json_object *trace_header_json(const trace_header *h)
{
    json_object *o = json_object_new_object();
    json_object *ev = json_object_new_array();
    json_object *zones = json_object_new_array();

    json_object_object_add(o, "format", json_object_new_string(TRACE_FORMAT));
    for (size_t i = 0; i < h->n_events; i++)
        json_object_array_add(ev, json_object_new_string(h->events[i]));
    json_object_object_add(o, "events", ev);
    for (size_t i = 0; i < h->n_zones; i++) {
        json_object *z = json_object_new_object();
        json_object_object_add(z, "id", json_object_new_string(h->zone_id[i]));
        json_object_object_add(z, "name", json_object_new_string(h->zone_name[i]));
        json_object_array_add(zones, z);
    }
    json_object_object_add(o, "zones", zones);
    json_object_object_add(o, "rate_hz", json_object_new_double(h->rate_hz));
    json_object_object_add(o, "boot_id", json_object_new_string(h->boot_id));
    if (h->realtime_offset_ns)
        json_object_object_add(o, "realtime_offset_ns",
                               json_object_new_int64(h->realtime_offset_ns));
    return o;
}

static int trace_emit_json(trace_writer *w, json_object *o)
{
    size_t len;
    const char *s = json_object_to_json_string_length(
        o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    int r = s ? trace_emit(w, s, len) : -ENOMEM;

    if (r == 0)
        r = trace_emit(w, "\n", 1);
    json_object_put(o);
    return r;
}

int trace_writer_open(const char *path, const trace_header *h, trace_writer **out, char *err,
                      size_t errlen)
{
    trace_writer *w;
    int r;

    if (!(h->rate_hz > 0) || !isfinite(h->rate_hz))
        return util_err(err, errlen, -EINVAL, "%s: trace rate %g Hz is not a positive number", path,
                        h->rate_hz);
    for (size_t i = 0; i < h->n_events; i++)
        if (!h->events[i] || !*h->events[i])
            return util_err(err, errlen, -EINVAL, "%s: event %zu has no name", path, i);
    for (size_t i = 0; i < h->n_zones; i++)
        if (!h->zone_id[i] || !h->zone_name[i])
            return util_err(err, errlen, -EINVAL, "%s: zone %zu has no id or name", path, i);
    if (strlen(h->boot_id) != 36)
        return util_err(err, errlen, -EINVAL, "%s: boot id '%s' is not 36 characters", path,
                        h->boot_id);
    w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->n_events = h->n_events;
    w->n_zones = h->n_zones;
    /* A recording holds every process's command line: not for others. */
    r = util_open_private(path, O_WRONLY | O_TRUNC);
    if (r >= 0 && !(w->f = fdopen(r, "w"))) {
        close(r);
        r = -errno;
    }
    if (r < 0) {
        util_err(err, errlen, r, "%s: %s", path, strerror(-r));
        free(w);
        return r;
    }
    w->stdio_buf = malloc(TRACE_STDIO_BUF);
    if (!w->stdio_buf || setvbuf(w->f, w->stdio_buf, _IOFBF, TRACE_STDIO_BUF) != 0) {
        trace_writer_close(w);
        return -ENOMEM;
    }
    if ((r = trace_emit_json(w, trace_header_json(h))) < 0) {
        util_err(err, errlen, r, "%s: %s", path, strerror(-r));
        trace_writer_close(w);
        return r;
    }
    *out = w;
    return 0;
}

int trace_write_proc(trace_writer *w, const procs_info *info)
{
    json_object *o, *p;

    if (info->pid <= 0 || info->ppid < 0 || info->uid == (uid_t)-1)
        return -EINVAL; /* the reader would refuse the line */
    if (w->error)
        return w->error;
    o = json_object_new_object();
    p = json_object_new_object();

    json_object_object_add(p, "pid", json_object_new_int64(info->pid));
    json_object_object_add(p, "ppid", json_object_new_int64(info->ppid));
    json_object_object_add(p, "start", json_object_new_uint64(info->start_ticks));
    json_object_object_add(p, "uid", json_object_new_uint64(info->uid));
    json_object_object_add(p, "comm", json_object_new_string(info->comm));
    json_object_object_add(p, "cmdline",
                           json_object_new_string(info->cmdline ? info->cmdline : ""));
    json_object_object_add(p, "cgroup", json_object_new_string(info->cgroup ? info->cgroup : ""));
    /* Optional, so that files without it (and readers before it) agree. */
    if (info->job[0])
        json_object_object_add(p, "job", json_object_new_string(info->job));
    json_object_object_add(o, "proc", p);
    return trace_emit_json(w, o);
}

int trace_write_exit(trace_writer *w, pid_t pid, uint64_t start_ticks)
{
    int r;

    if (pid <= 0)
        return -EINVAL;
    if (w->error)
        return w->error;
    if ((r = trace_reserve(w, 64 + 2 * TRACE_NUM_MAX)) < 0)
        return r;
    w->line_len = 0;
    trace_puts(w, "{\"exit\":{\"pid\":");
    trace_put_u64(w, (uint64_t)pid);
    trace_puts(w, ",\"start\":");
    trace_put_u64(w, start_ticks);
    trace_puts(w, "}}\n");
    return trace_emit(w, w->line, w->line_len);
}

/* A tick the reader would refuse is refused here, before anything is written. */
static int trace_tick_check(const trace_writer *w, const trace_tick *t)
{
    if (t->dt_ns == 0 || (w->any_tick && t->mono_ns <= w->last_t))
        return -EINVAL;
    for (size_t z = 0; z < w->n_zones; z++)
        if (trace_value_bad(TRACE_V_ENERGY, t->energy_j[z]))
            return -EINVAL;
    for (size_t i = 0; i < t->n_procs; i++) {
        if (t->procs[i].pid <= 0)
            return -EINVAL;
        for (size_t e = 0; e < w->n_events; e++)
            if (trace_value_bad(TRACE_V_SCALED, t->procs[i].scaled[e]) ||
                trace_value_bad(TRACE_V_RATIO, t->procs[i].ratio[e]))
                return -EINVAL;
    }
    return 0;
}

int trace_write_tick(trace_writer *w, const trace_tick *t)
{
    size_t per_proc = 64 + 2 * TRACE_NUM_MAX + 2 * w->n_events * (TRACE_NUM_MAX + 1);
    int r;

    if (w->error)
        return w->error;
    if ((r = trace_tick_check(w, t)) < 0)
        return r;
    if ((r = trace_reserve(w, 128 + (w->n_zones + 2) * (TRACE_NUM_MAX + 1) +
                                  t->n_procs * per_proc)) < 0)
        return r;
    w->line_len = 0;
    trace_puts(w, "{\"tick\":{\"t\":");
    trace_put_u64(w, t->mono_ns);
    trace_puts(w, ",\"dt\":");
    trace_put_u64(w, t->dt_ns);
    trace_puts(w, ",\"energy_j\":");
    trace_put_doubles(w, t->energy_j, w->n_zones);
    trace_puts(w, ",\"procs\":[");
    for (size_t i = 0; i < t->n_procs; i++) {
        const trace_proc_delta *p = &t->procs[i];
        if (i)
            trace_puts(w, ",");
        trace_puts(w, "{\"pid\":");
        trace_put_u64(w, (uint64_t)p->pid);
        trace_puts(w, ",\"start\":");
        trace_put_u64(w, p->start_ticks);
        trace_puts(w, ",\"d\":");
        trace_put_doubles(w, p->scaled, w->n_events);
        trace_puts(w, ",\"r\":");
        trace_put_doubles(w, p->ratio, w->n_events);
        trace_puts(w, "}");
    }
    trace_puts(w, "]}}\n");
    if ((r = trace_emit(w, w->line, w->line_len)) < 0)
        return r;
    /* Once a second of ticks to the file: a crash loses at most that, and a
     * full disk is seen within it rather than at the end. */
    if (t->mono_ns - w->flushed_t >= 1000000000ull) {
        w->flushed_t = t->mono_ns;
        if (fflush(w->f) != 0)
            return w->error = errno ? -errno : -EIO;
    }
    w->last_t = t->mono_ns;
    w->any_tick = true;
    return 0;
}

int trace_writer_close(trace_writer *w)
{
    int r;

    if (!w)
        return 0;
    r = w->error;
    if (w->f) {
        if (fflush(w->f) != 0 && r == 0)
            r = errno ? -errno : -EIO;
        if (fclose(w->f) != 0 && r == 0)
            r = errno ? -errno : -EIO;
    }
    free(w->stdio_buf);
    free(w->line);
    free(w);
    return r;
}
