/* Cost of recording a tick (lib/sample/trace_write.c) against the obvious peer:
 * the same line built as json-c objects and serialised by json-c.
 *
 * A tick of P processes × E events (scaled deltas and ratios) and Z zones;
 * values either integral (counts never multiplexed: ratio 1) or fractional
 * (multiplexed: scaled by enabled/running, ratios below 1). Each run writes
 * T ticks to a file under DIR and reports ns per tick for both writers, the
 * bytes per tick, and the time trace_read takes per tick to read it back.
 *
 * usage: bench_trace_write DIR PROCS EVENTS TICKS int|frac */
#include "sample/sample.h"
#include "util/util.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fill(trace_tick *t, size_t ne, size_t nz, bool frac, unsigned seed)
{
    srand(seed);
    for (size_t z = 0; z < nz; z++)
        t->energy_j[z] = 0.3 + (double)rand() / RAND_MAX;
    for (size_t i = 0; i < t->n_procs; i++)
        for (size_t e = 0; e < ne; e++) {
            double count = (double)(rand() % 20000000);
            double ratio = frac ? 0.25 + 0.5 * (double)rand() / RAND_MAX : 1.0;
            t->procs[i].scaled[e] = frac ? count / ratio : count;
            t->procs[i].ratio[e] = ratio;
        }
}

static json_object *doubles_json(const double *v, size_t n)
{
    json_object *a = json_object_new_array_ext((int)n);
    for (size_t i = 0; i < n; i++)
        json_object_array_add(a, json_object_new_double(v[i]));
    return a;
}

/* The peer: one json-c object tree per tick, serialised, then written. */
static void peer_write(FILE *f, const trace_tick *t, size_t ne, size_t nz)
{
    json_object *root = json_object_new_object(), *tick = json_object_new_object();
    json_object *procs = json_object_new_array_ext((int)t->n_procs);

    json_object_object_add(tick, "t", json_object_new_uint64(t->mono_ns));
    json_object_object_add(tick, "dt", json_object_new_uint64(t->dt_ns));
    json_object_object_add(tick, "energy_j", doubles_json(t->energy_j, nz));
    for (size_t i = 0; i < t->n_procs; i++) {
        json_object *p = json_object_new_object();
        json_object_object_add(p, "pid", json_object_new_int(t->procs[i].pid));
        json_object_object_add(p, "start", json_object_new_uint64(t->procs[i].start_ticks));
        json_object_object_add(p, "d", doubles_json(t->procs[i].scaled, ne));
        json_object_object_add(p, "r", doubles_json(t->procs[i].ratio, ne));
        json_object_array_add(procs, p);
    }
    json_object_object_add(tick, "procs", procs);
    json_object_object_add(root, "tick", tick);
    size_t len;
    const char *s = json_object_to_json_string_length(root, JSON_C_TO_STRING_PLAIN, &len);
    fwrite(s, 1, len, f);
    fputc('\n', f);
    json_object_put(root);
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: %s DIR PROCS EVENTS TICKS int|frac\n", argv[0]);
        return 2;
    }
    size_t np = strtoul(argv[2], NULL, 10), ne = strtoul(argv[3], NULL, 10), nz = 3;
    size_t nt = strtoul(argv[4], NULL, 10);
    bool frac = strcmp(argv[5], "frac") == 0;
    char path[4096], err[UTIL_ERRLEN];
    char **events = calloc(ne, sizeof(char *));
    char *zid[] = {"intel-rapl:0", "intel-rapl:0:0", "intel-rapl:0:1"};
    char *zname[] = {"package-0", "core", "dram"};
    trace_tick t = {.dt_ns = 20000000, .n_procs = np};
    trace_writer *w;

    for (size_t e = 0; e < ne; e++) {
        events[e] = malloc(32);
        snprintf(events[e], 32, "event%zu", e);
    }
    trace_header h = {.events = events,
                      .n_events = ne,
                      .zone_id = zid,
                      .zone_name = zname,
                      .n_zones = nz,
                      .rate_hz = 50};
    if (procs_boot_id(h.boot_id) < 0)
        return 1;
    t.energy_j = calloc(nz, sizeof(double));
    t.procs = calloc(np, sizeof(trace_proc_delta));
    for (size_t i = 0; i < np; i++) {
        t.procs[i].pid = (pid_t)(1000 + i);
        t.procs[i].start_ticks = 123456 + i;
        t.procs[i].scaled = calloc(ne, sizeof(double));
        t.procs[i].ratio = calloc(ne, sizeof(double));
    }

    /* ours */
    snprintf(path, sizeof(path), "%s/ours.jsonl", argv[1]);
    if (trace_writer_open(path, &h, &w, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    double busy = 0;
    for (size_t k = 0; k < nt; k++) {
        fill(&t, ne, nz, frac, (unsigned)k);
        t.mono_ns = 1000000000ull + k * t.dt_ns;
        double t0 = now_s();
        if (trace_write_tick(w, &t) < 0)
            return 1;
        busy += now_s() - t0;
    }
    double t0 = now_s();
    if (trace_writer_close(w) < 0)
        return 1;
    busy += now_s() - t0;
    struct stat st;
    stat(path, &st);

    /* the peer, same ticks */
    char ppath[4096];
    snprintf(ppath, sizeof(ppath), "%s/peer.jsonl", argv[1]);
    FILE *f = fopen(ppath, "w");
    static char buf[1 << 20];
    setvbuf(f, buf, _IOFBF, sizeof(buf));
    double peer = 0;
    for (size_t k = 0; k < nt; k++) {
        fill(&t, ne, nz, frac, (unsigned)k);
        t.mono_ns = 1000000000ull + k * t.dt_ns;
        double p0 = now_s();
        peer_write(f, &t, ne, nz);
        peer += now_s() - p0;
    }
    t0 = now_s();
    fclose(f);
    peer += now_s() - t0;

    /* reading back */
    trace_reader *r;
    trace_record_kind kind;
    trace_tick rt;
    procs_info pi;
    size_t got = 0;
    t0 = now_s();
    if (trace_reader_open(path, &r, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int k;
    while ((k = trace_read(r, &kind, &rt, &pi, err, sizeof(err))) == 1)
        got++;
    trace_reader_close(r);
    double rd = now_s() - t0;
    if (k < 0 || got != nt) {
        fprintf(stderr, "read back %zu of %zu: %s\n", got, nt, err);
        return 1;
    }
    printf("{\"ours_ns\": %.0f, \"peer_ns\": %.0f, \"bytes\": %.0f, \"read_ns\": %.0f}\n",
           busy / (double)nt * 1e9, peer / (double)nt * 1e9, (double)st.st_size / (double)nt,
           rd / (double)nt * 1e9);
    return 0;
}
