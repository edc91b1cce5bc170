/* Record/replay traces through lib/sample/trace_write.c and trace_read.c: random ticks, processes
 * and exits written and read back bit for bit; every kind of malformed line
 * refused with FILE:LINE:COLUMN pointing at the fault; a recording cut by a
 * crash returns its complete records before saying so; write errors reach
 * the caller. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include "sample/sample.h"
#include "util/util.h"

#include <errno.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BOOT "01234567-89ab-cdef-0123-456789abcdef"
/* A proc record line of a process named "p". */
#define PROC(pid, start)                                                                           \
    "{\"proc\":{\"pid\":" #pid ",\"ppid\":1,\"start\":" #start ",\"uid\":0,\"comm\":\"p\","        \
    "\"cmdline\":\"\",\"cgroup\":\"/\"}}\n"
#define HEADER                                                                                     \
    "{\"format\":\"wattprof-trace/1\",\"events\":[\"cycles\",\"instructions\"],"                   \
    "\"zones\":[{\"id\":\"intel-rapl:0\",\"name\":\"package-0\"}],\"rate_hz\":50,"                 \
    "\"boot_id\":\"" BOOT "\"}"

static char tmpdir[64];

static int setup(void **state)
{
    strcpy(tmpdir, "/tmp/test_trace.XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    return system(cmd);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* ---- Round trip ---------------------------------------------------------- */

/* Doubles of every shape the sampler can produce: zero (both signs),
 * integral counts, fractions over a wide range of exponents, subnormals. */
static double random_value(gsl_rng *rng, bool ratio)
{
    switch (gsl_rng_uniform_int(rng, 6)) {
    case 0:
        return gsl_rng_uniform_int(rng, 2) ? 0.0 : -0.0;
    case 1:
        return ratio ? 1.0 : (double)gsl_rng_get(rng) * (double)gsl_rng_get(rng);
    case 2:
        return ratio ? gsl_rng_uniform(rng) : ldexp(gsl_rng_uniform(rng), -1070);
    default:
        return ratio ? gsl_rng_uniform(rng)
                     : ldexp(gsl_rng_uniform_pos(rng), (int)gsl_rng_uniform_int(rng, 200) - 60);
    }
}

static void random_string(gsl_rng *rng, char *s, size_t max)
{
    static const char pool[] = "ab )(\"\\/\t\n\x01\x7f\xc3\xa9{}[],:%";
    size_t n = gsl_rng_uniform_int(rng, max);
    for (size_t i = 0; i < n; i++)
        s[i] = pool[gsl_rng_uniform_int(rng, sizeof(pool) - 1)];
    s[n] = '\0';
}

typedef struct expect {
    trace_record_kind kind;
    trace_tick tick;
    procs_info proc;
} expect;

static void assert_same_doubles(const double *a, const double *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(double)) != 0)
            fail_msg("value %zu: wrote %.17g, read %.17g", i, a[i], b[i]);
}

static void free_expect(expect *e, size_t n_events)
{
    if (e->kind == TRACE_TICK) {
        for (size_t i = 0; i < e->tick.n_procs; i++) {
            free(e->tick.procs[i].scaled);
            free(e->tick.procs[i].ratio);
        }
        free(e->tick.procs);
        free(e->tick.energy_j);
    } else {
        procs_info_clear(&e->proc);
    }
}

/* The processes a random trace has declared and not ended: a reader takes
 * ticks only of these. */
#define POOL_MAX 40
typedef struct pool {
    pid_t pid[POOL_MAX];
    uint64_t start[POOL_MAX];
    size_t n;
} pool;

static void make_record(gsl_rng *rng, expect *e, uint64_t *t, size_t ne, size_t nz, pool *live)
{
    unsigned what = (unsigned)gsl_rng_uniform_int(rng, 10);

    memset(e, 0, sizeof(*e));
    e->proc.pid = (pid_t)gsl_rng_uniform_int(rng, 4194304) + 1;
    e->proc.start_ticks = gsl_rng_get(rng) * (uint64_t)gsl_rng_get(rng);
    if (what == 0 && live->n > 0) { /* one of the live ones ends */
        size_t k = gsl_rng_uniform_int(rng, live->n);
        e->kind = TRACE_EXIT;
        e->proc.pid = live->pid[k];
        e->proc.start_ticks = live->start[k];
        live->n--;
        live->pid[k] = live->pid[live->n];
        live->start[k] = live->start[live->n];
        return;
    }
    if (what <= 1 || live->n == 0) {
        if (live->n < POOL_MAX) {
            live->pid[live->n] = e->proc.pid;
            live->start[live->n++] = e->proc.start_ticks;
        }
        e->kind = TRACE_PROC;
        e->proc.ppid = (pid_t)gsl_rng_uniform_int(rng, 4194304);
        e->proc.uid = (uid_t)gsl_rng_get(rng);
        random_string(rng, e->proc.comm, 16);
        e->proc.cmdline = malloc(200);
        e->proc.cgroup = malloc(80);
        random_string(rng, e->proc.cmdline, 200);
        random_string(rng, e->proc.cgroup, 80);
        /* The optional job: absent from half the records. */
        if (gsl_rng_uniform_int(rng, 2))
            random_string(rng, e->proc.job, sizeof(e->proc.job));
        return;
    }
    e->kind = TRACE_TICK;
    *t += 1 + gsl_rng_uniform_int(rng, 40000000);
    e->tick.mono_ns = *t;
    e->tick.dt_ns = 1 + gsl_rng_uniform_int(rng, 40000000);
    e->tick.energy_j = malloc(nz * sizeof(double));
    for (size_t z = 0; z < nz; z++)
        e->tick.energy_j[z] = random_value(rng, false);
    /* Each live process at most once, in a random order. */
    e->tick.n_procs = gsl_rng_uniform_int(rng, live->n + 1);
    e->tick.procs = calloc(e->tick.n_procs + 1, sizeof(trace_proc_delta));
    size_t order[POOL_MAX];
    for (size_t i = 0; i < live->n; i++)
        order[i] = i;
    gsl_ran_shuffle(rng, order, live->n, sizeof(size_t));
    for (size_t i = 0; i < e->tick.n_procs; i++) {
        trace_proc_delta *p = &e->tick.procs[i];
        p->pid = live->pid[order[i]];
        p->start_ticks = live->start[order[i]];
        p->scaled = malloc(ne * sizeof(double));
        p->ratio = malloc(ne * sizeof(double));
        for (size_t k = 0; k < ne; k++) {
            p->scaled[k] = random_value(rng, false);
            p->ratio[k] = random_value(rng, true);
        }
    }
}

static void check_record(const expect *e, trace_record_kind kind, const trace_tick *t,
                         const procs_info *p, size_t ne, size_t nz)
{
    assert_int_equal(kind, e->kind);
    if (kind == TRACE_TICK) {
        assert_int_equal(t->mono_ns, e->tick.mono_ns);
        assert_int_equal(t->dt_ns, e->tick.dt_ns);
        assert_same_doubles(e->tick.energy_j, t->energy_j, nz);
        assert_int_equal(t->n_procs, e->tick.n_procs);
        for (size_t i = 0; i < t->n_procs; i++) {
            assert_int_equal(t->procs[i].pid, e->tick.procs[i].pid);
            assert_int_equal(t->procs[i].start_ticks, e->tick.procs[i].start_ticks);
            assert_same_doubles(e->tick.procs[i].scaled, t->procs[i].scaled, ne);
            assert_same_doubles(e->tick.procs[i].ratio, t->procs[i].ratio, ne);
        }
        return;
    }
    assert_int_equal(p->pid, e->proc.pid);
    assert_int_equal(p->start_ticks, e->proc.start_ticks);
    if (kind == TRACE_PROC) {
        assert_int_equal(p->ppid, e->proc.ppid);
        assert_int_equal(p->uid, e->proc.uid);
        assert_string_equal(p->comm, e->proc.comm);
        assert_string_equal(p->cmdline, e->proc.cmdline);
        assert_string_equal(p->cgroup, e->proc.cgroup);
        assert_string_equal(p->job, e->proc.job);
    }
}

static void test_round_trip(void **state)
{
    enum { N = 3000 };
    char *events[] = {"cycles", "instructions", "perf::TASK-CLOCK", "cache-misses", "e\"5"};
    char *zid[] = {"intel-rapl:0", "intel-rapl:0:0", "intel-rapl:1"};
    char *zname[] = {"package-0", "core", "package-1"};
    trace_header h = {.events = events,
                      .n_events = 5,
                      .zone_id = zid,
                      .zone_name = zname,
                      .n_zones = 3,
                      .rate_hz = 49.999999999999993,
                      .boot_id = BOOT};
    char path[128], err[UTIL_ERRLEN];
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    expect *e = calloc(N, sizeof(*e));
    trace_writer *w;
    trace_reader *r;
    uint64_t t = 1000;
    pool live = {.n = 0};

    gsl_rng_set(rng, 20261130);
    snprintf(path, sizeof(path), "%s/round.jsonl", tmpdir);
    assert_int_equal(trace_writer_open(path, &h, &w, err, sizeof(err)), 0);
    for (size_t i = 0; i < N; i++) {
        make_record(rng, &e[i], &t, 5, 3, &live);
        if (e[i].kind == TRACE_TICK)
            assert_int_equal(trace_write_tick(w, &e[i].tick), 0);
        else if (e[i].kind == TRACE_PROC)
            assert_int_equal(trace_write_proc(w, &e[i].proc), 0);
        else
            assert_int_equal(trace_write_exit(w, e[i].proc.pid, e[i].proc.start_ticks), 0);
    }
    assert_int_equal(trace_writer_close(w), 0);

    if (trace_reader_open(path, &r, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    const trace_header *rh = trace_reader_header(r);
    assert_int_equal(rh->n_events, 5);
    assert_int_equal(rh->n_zones, 3);
    for (size_t i = 0; i < 5; i++)
        assert_string_equal(rh->events[i], events[i]);
    for (size_t i = 0; i < 3; i++) {
        assert_string_equal(rh->zone_id[i], zid[i]);
        assert_string_equal(rh->zone_name[i], zname[i]);
    }
    assert_memory_equal(&rh->rate_hz, &h.rate_hz, sizeof(double));
    assert_string_equal(rh->boot_id, BOOT);
    for (size_t i = 0; i < N; i++) {
        trace_record_kind kind;
        trace_tick tick;
        procs_info proc;
        int k = trace_read(r, &kind, &tick, &proc, err, sizeof(err));
        if (k != 1)
            fail_msg("record %zu: %d %s", i, k, err);
        check_record(&e[i], kind, &tick, &proc, 5, 3);
    }
    trace_record_kind kind;
    trace_tick tick;
    procs_info proc;
    assert_int_equal(trace_read(r, &kind, &tick, &proc, err, sizeof(err)), 0);
    trace_reader_close(r);
    for (size_t i = 0; i < N; i++)
        free_expect(&e[i], 5);
    free(e);
    gsl_rng_free(rng);
}

/* The writer's own decimal printing (lib/sample/trace_write.c, trace_put_exact)
 * is exact by an argument about gaps between doubles; its edges are powers of
 * two, where the gap halves, and the ends of its range. Every double near
 * each power of two from 2^-12 to 2^66, and a million random ones, must come
 * back bit for bit. */
static void test_exact_edges(void **state)
{
    enum { PER_TICK = 64 };
    char *ev[PER_TICK];
    char names[PER_TICK][8];
    trace_header h = {.events = ev, .n_events = PER_TICK, .rate_hz = 50, .boot_id = BOOT};
    double *vals = malloc(2000000 * sizeof(double));
    size_t n = 0;
    char path[128], err[UTIL_ERRLEN];
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);

    gsl_rng_set(rng, 7);
    for (int i = 0; i < PER_TICK; i++) {
        snprintf(names[i], sizeof(names[i]), "e%d", i);
        ev[i] = names[i];
    }
    for (int e = -12; e <= 66; e++) {
        double p = ldexp(1, e), below = p, above = p;
        vals[n++] = p;
        for (int k = 0; k < 40; k++) {
            below = nextafter(below, 0);
            above = nextafter(above, INFINITY);
            vals[n++] = below;
            vals[n++] = above;
        }
    }
    while (n < 1000000)
        vals[n++] = ldexp(gsl_rng_uniform_pos(rng), (int)gsl_rng_uniform_int(rng, 80) - 12);
    n -= n % PER_TICK;

    double ones[PER_TICK];
    for (int i = 0; i < PER_TICK; i++)
        ones[i] = 1;
    trace_proc_delta p = {.pid = 1, .ratio = ones};
    trace_tick t = {.dt_ns = 1, .procs = &p, .n_procs = 1};
    trace_writer *w;
    snprintf(path, sizeof(path), "%s/edges.jsonl", tmpdir);
    assert_int_equal(trace_writer_open(path, &h, &w, err, sizeof(err)), 0);
    procs_info one = {.pid = 1, .comm = "one", .cmdline = "", .cgroup = ""};
    assert_int_equal(trace_write_proc(w, &one), 0);
    for (size_t i = 0; i < n; i += PER_TICK) {
        p.scaled = vals + i;
        t.mono_ns = i + 1;
        assert_int_equal(trace_write_tick(w, &t), 0);
    }
    assert_int_equal(trace_writer_close(w), 0);

    trace_reader *r;
    trace_record_kind kind;
    trace_tick rt;
    procs_info pi;
    assert_int_equal(trace_reader_open(path, &r, err, sizeof(err)), 0);
    assert_int_equal(trace_read(r, &kind, &rt, &pi, err, sizeof(err)), 1);
    for (size_t i = 0; i < n; i += PER_TICK) {
        assert_int_equal(trace_read(r, &kind, &rt, &pi, err, sizeof(err)), 1);
        assert_same_doubles(vals + i, rt.procs[0].scaled, PER_TICK);
    }
    trace_reader_close(r);
    gsl_rng_free(rng);
    free(vals);
}

/* ---- Malformed traces ---------------------------------------------------- */

typedef struct bad_case {
    const char *name;
    const char *text;   /* whole file */
    int line;           /* expected line of the error */
    const char *marker; /* the column is where this first occurs in that line (NULL: col 1) */
    int col_offset;     /* added to the marker's column */
    const char *words;  /* must appear in the message */
    int error;
} bad_case;

static const bad_case bad_cases[] = {
    {"empty file", "", 1, NULL, 0, "empty file", -EBADMSG},
    {"header not json", "{\"format\": wattprof}\n", 1, "wattprof", 0, "invalid JSON", -EBADMSG},
    {"header not object", "[1]\n", 1, NULL, 0, "header: is not a JSON object", -EBADMSG},
    {"wrong format", "{\"format\":\"wattprof-trace/2\"}\n", 1, "\"wattprof-trace/2", 0,
     "expected \"wattprof-trace/1\"", -EBADMSG},
    {"header no events",
     "{\"format\":\"wattprof-trace/1\",\"zones\":[],\"rate_hz\":50,\"boot_id\":\"" BOOT "\"}\n", 1,
     NULL, 0, "header: has no \"events\"", -EBADMSG},
    {"header event not string",
     "{\"format\":\"wattprof-trace/1\",\"events\":[\"a\",7],\"zones\":[],\"rate_hz\":50,"
     "\"boot_id\":\"" BOOT "\"}\n",
     1, "7]", 0, "events[1]: is not an event name", -EBADMSG},
    {"header zone without name",
     "{\"format\":\"wattprof-trace/1\",\"events\":[],\"zones\":[{\"id\":\"x\"}],\"rate_hz\":50,"
     "\"boot_id\":\"" BOOT "\"}\n",
     1, "{\"id\"", 0, "zones[0]: has no \"name\"", -EBADMSG},
    {"header rate negative",
     "{\"format\":\"wattprof-trace/1\",\"events\":[],\"zones\":[],\"rate_hz\":-5,"
     "\"boot_id\":\"" BOOT "\"}\n",
     1, "-5", 0, "rate_hz", -EBADMSG},
    {"header rate string",
     "{\"format\":\"wattprof-trace/1\",\"events\":[],\"zones\":[],\"rate_hz\":\"50\","
     "\"boot_id\":\"" BOOT "\"}\n",
     1, "\"50\"", 0, "rate_hz: is a string, expected a number", -EBADMSG},
    {"header short boot id",
     "{\"format\":\"wattprof-trace/1\",\"events\":[],\"zones\":[],\"rate_hz\":50,"
     "\"boot_id\":\"abc\"}\n",
     1, "\"abc\"", 0, "boot_id", -EBADMSG},
    {"header unknown field",
     "{\"format\":\"wattprof-trace/1\",\"evnets\":[],\"events\":[],\"zones\":[],\"rate_hz\":50,"
     "\"boot_id\":\"" BOOT "\"}\n",
     1, "[]", 0, "evnets: is not a field", -EBADMSG},
    {"energy length", HEADER "\n{\"tick\":{\"t\":1,\"dt\":2,\"energy_j\":[1,2],\"procs\":[]}}\n", 2,
     "[1,2]", 0, "tick.energy_j: has 2 values, expected 1 (one per zone", -EBADMSG},
    {"d length",
     HEADER "\n" PROC(5, 6) PROC(
         7, 8) "{\"tick\":{\"t\":1,\"dt\":2,\"energy_j\":[1],\"procs\":[{\"pid\":5,\"start\":6,"
               "\"d\":[1,2,3],\"r\":[1,1]}]}}\n",
     4, "[1,2,3]", 0, "tick.procs[0].d: has 3 values, expected 2 (one per event", -EBADMSG},
    {"r non-numeric",
     HEADER "\n" PROC(5, 6) PROC(
         7, 8) "{\"tick\":{\"t\":1,\"dt\":2,\"energy_j\":[1],\"procs\":[{\"pid\":5,\"start\":6,"
               "\"d\":[1,2],\"r\":[1,\"x\"]}]}}\n",
     4, "\"x\"", 0, "tick.procs[0].r[1]: is not a number", -EBADMSG},
    {"ratio above one",
     HEADER "\n" PROC(5, 6) PROC(
         7, 8) "{\"tick\":{\"t\":1,\"dt\":2,\"energy_j\":[1],\"procs\":[{\"pid\":5,\"start\":6,"
               "\"d\":[1,2],\"r\":[1,1]},{\"pid\":7,\"start\":8,\"d\":[1,2],\"r\":[1.5,1]}]}}\n",
     4, "1.5", 0, "tick.procs[1].r[0]: is a running/enabled ratio above 1", -EBADMSG},
    /* Ticks name only declared processes, each once; a process is declared once. */
    {"undeclared pid",
     HEADER "\n" PROC(5, 6) "{\"tick\":{\"t\":1,\"dt\":2,\"energy_j\":[1],\"procs\":[{\"pid\":5,"
                            "\"start\":7,\"d\":[1,2],\"r\":[1,1]}]}}\n",
     3, "{\"pid\":5", 0, "tick.procs[0]: pid 5 (start 7) has no proc record before it", -EBADMSG},
    {"pid after its exit",
     HEADER "\n" PROC(5, 6) "{\"exit\":{\"pid\":5,\"start\":6}}\n"
                            "{\"tick\":{\"t\":1,\"dt\":2,\"energy_j\":[1],\"procs\":[{\"pid\":5,"
                            "\"start\":6,\"d\":[1,2],\"r\":[1,1]}]}}\n",
     4, "{\"pid\":5", 0, "pid 5 (start 6) has no proc record before it (or has exited)", -EBADMSG},
    {"pid twice in a tick",
     HEADER
     "\n" PROC(5, 6) "{\"tick\":{\"t\":1,\"dt\":2,\"energy_j\":[1],\"procs\":[{\"pid\":5,"
                     "\"start\":6,\"d\":[1,2],\"r\":[1,1]},{\"pid\":5,\"start\":6,\"d\":[1,2],"
                     "\"r\":[1,1]}]}}\n",
     3, "{\"pid\":5,\"start\":6,\"d\":[1,2],\"r\":[1,1]}]", 0,
     "tick.procs[1]: pid 5 (start 6) is listed twice in the tick", -EBADMSG},
    {"proc record twice", HEADER "\n" PROC(5, 6) PROC(5, 6), 3, "{\"pid\"", 0,
     "proc: pid 5 (start 6) is already declared as 'p' on line 2", -EBADMSG},
    {"negative energy", HEADER "\n{\"tick\":{\"t\":1,\"dt\":2,\"energy_j\":[-0.5],\"procs\":[]}}\n",
     2, "-0.5", 0, "tick.energy_j[0]: is negative", -EBADMSG},
    {"NaN energy", HEADER "\n{\"tick\":{\"t\":1,\"dt\":2,\"energy_j\":[NaN],\"procs\":[]}}\n", 2,
     "NaN", 0, "not a finite number", -EBADMSG},
    {"t as string", HEADER "\n{\"tick\":{\"t\":\"12\",\"dt\":2,\"energy_j\":[1],\"procs\":[]}}\n",
     2, "\"12\"", 0, "tick.t: is a string, expected an integer", -EBADMSG},
    {"t fractional", HEADER "\n{\"tick\":{\"t\":1.5,\"dt\":2,\"energy_j\":[1],\"procs\":[]}}\n", 2,
     "1.5", 0, "tick.t: is a number, expected an integer", -EBADMSG},
    {"t overflow",
     HEADER "\n{\"tick\":{\"t\":99999999999999999999999,\"dt\":2,\"energy_j\":[1],\"procs\":[]}}\n",
     2, "999", 0, "out of range", -EBADMSG},
    {"t backwards",
     HEADER "\n{\"tick\":{\"t\":10,\"dt\":2,\"energy_j\":[1],\"procs\":[]}}\n"
            "{\"tick\":{\"t\":9,\"dt\":2,\"energy_j\":[1],\"procs\":[]}}\n",
     3, "9,", 0, "tick.t: 9 is not after the previous tick's 10", -EBADMSG},
    {"dt zero", HEADER "\n{\"tick\":{\"t\":1,\"dt\":0,\"energy_j\":[1],\"procs\":[]}}\n", 2, "0,",
     0, "tick.dt: is zero", -EBADMSG},
    {"tick missing procs", HEADER "\n{\"tick\":{\"t\":1,\"dt\":2,\"energy_j\":[1]}}\n", 2, "{\"t\"",
     0, "tick: has no \"procs\"", -EBADMSG},
    {"unknown record", HEADER "\n{\"exit\":{\"pid\":1,\"start\":2}}\n{\"fork\":{\"pid\":1}}\n", 3,
     "{\"pid", 0, "fork: unknown record kind", -EBADMSG},
    {"two kinds", HEADER "\n{\"exit\":{\"pid\":1,\"start\":2},\"proc\":{}}\n", 2, NULL, 0,
     "one member", -EBADMSG},
    {"record not object", HEADER "\n[1,2]\n", 2, NULL, 0, "one member", -EBADMSG},
    {"exit unknown field", HEADER "\n{\"exit\":{\"pid\":1,\"start\":2,\"code\":0}}\n", 2, "0}", 0,
     "exit.code: is not a field", -EBADMSG},
    {"exit negative pid", HEADER "\n{\"exit\":{\"pid\":-1,\"start\":2}}\n", 2, "-1", 0,
     "exit.pid: is negative", -EBADMSG},
    {"exit pid zero", HEADER "\n{\"exit\":{\"pid\":0,\"start\":2}}\n", 2, "0,", 0,
     "exit.pid: is not a process id", -EBADMSG},
    {"pid too large", HEADER "\n{\"exit\":{\"pid\":4294967296,\"start\":2}}\n", 2, "42", 0,
     "exit.pid: is out of range", -EBADMSG},
    {"proc comm too long",
     HEADER "\n{\"proc\":{\"pid\":1,\"ppid\":0,\"start\":2,\"uid\":0,"
            "\"comm\":\"abcdefghijklmnopq\",\"cmdline\":\"\",\"cgroup\":\"/\"}}\n",
     2, "\"abcdefghijklmnopq", 0, "proc.comm: is longer than 16 bytes", -EBADMSG},
    {"proc comm NUL",
     HEADER "\n{\"proc\":{\"pid\":1,\"ppid\":0,\"start\":2,\"uid\":0,"
            "\"comm\":\"a\\u0000b\",\"cmdline\":\"\",\"cgroup\":\"/\"}}\n",
     2, "\"a\\", 0, "proc.comm: contains a NUL", -EBADMSG},
    {"proc job too long",
     HEADER "\n{\"proc\":{\"pid\":1,\"ppid\":0,\"start\":2,\"uid\":0,\"comm\":\"a\","
            "\"cmdline\":\"\",\"cgroup\":\"/\",\"job\":"
            "\"0123456789012345678901234567890123456789012345678901234567890123\"}}\n",
     2, "\"0123", 0, "proc.job: is longer than 63 bytes", -EBADMSG},
    {"proc job not a string",
     HEADER "\n{\"proc\":{\"pid\":1,\"ppid\":0,\"start\":2,\"uid\":0,\"comm\":\"a\","
            "\"cmdline\":\"\",\"cgroup\":\"/\",\"job\":42}}\n",
     2, "42}", 0, "proc.job: ", -EBADMSG},
    {"proc uid missing",
     HEADER "\n{\"proc\":{\"pid\":1,\"ppid\":0,\"start\":2,"
            "\"comm\":\"a\",\"cmdline\":\"\",\"cgroup\":\"/\"}}\n",
     2, "{\"pid", 0, "proc: has no \"uid\"", -EBADMSG},
    {"syntax error", HEADER "\n{\"exit\":{\"pid\":1,\"start\":}}\n", 2, "}}", 0, "invalid JSON",
     -EBADMSG},
    {"text after record", HEADER "\n{\"exit\":{\"pid\":1,\"start\":2}} x\n", 2, " x", 1,
     "invalid JSON", -EBADMSG},
    {"empty line", HEADER "\n\n{\"exit\":{\"pid\":1,\"start\":2}}\n", 2, NULL, 0, "empty line",
     -EBADMSG},
    {"line ends inside record", HEADER "\n{\"exit\":{\"pid\":1,\n", 2, "\n", 0,
     "ends inside a record", -EBADMSG},
    {"truncated last line",
     HEADER "\n{\"exit\":{\"pid\":1,\"start\":2}}\n{\"tick\":{\"t\":1,\"dt\":2,\"ener", 3, "ener",
     4, "cut short", -ENODATA},
    {"truncated header", "{\"format\":\"wattprof-tr", 1, "tr", 2, "cut short", -ENODATA},
};

/* Opens and reads `text` until an error; returns the error and fills err,
 * counting the records returned before it. */
static int read_all(const char *path, char *err, size_t errlen, int *records)
{
    trace_reader *r;
    trace_record_kind kind;
    trace_tick tick;
    procs_info proc;
    int k;

    *records = 0;
    if ((k = trace_reader_open(path, &r, err, errlen)) < 0)
        return k;
    while ((k = trace_read(r, &kind, &tick, &proc, err, errlen)) == 1)
        (*records)++;
    trace_reader_close(r);
    return k;
}

static int expected_col(const bad_case *c)
{
    const char *line = c->text;
    for (int l = 1; l < c->line; l++)
        line = strchr(line, '\n') + 1;
    if (!c->marker)
        return 1;
    const char *m = strstr(line, c->marker);
    assert_non_null(m);
    return (int)(m - line) + 1 + c->col_offset;
}

static void test_malformed(void **state)
{
    char path[128], err[UTIL_ERRLEN], want[300];
    int records;

    snprintf(path, sizeof(path), "%s/bad.jsonl", tmpdir);
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const bad_case *c = &bad_cases[i];
        err[0] = '\0';
        write_file(path, c->text);
        int k = read_all(path, err, sizeof(err), &records);
        snprintf(want, sizeof(want), "%s:%d:%d: ", path, c->line, expected_col(c));
        print_message("%-26s %s\n", c->name, err);
        if (k != c->error || strncmp(err, want, strlen(want)) != 0 || !strstr(err, c->words))
            fail_msg("%s: got %d \"%s\", expected %d \"%s...%s\"", c->name, k, err, c->error, want,
                     c->words);
    }
}

/* A crash while recording: every complete record comes back first. */
static void test_truncated_after_records(void **state)
{
    char path[128], err[UTIL_ERRLEN];
    int records;

    snprintf(path, sizeof(path), "%s/cut.jsonl", tmpdir);
    write_file(path, HEADER "\n{\"exit\":{\"pid\":1,\"start\":2}}\n"
                            "{\"tick\":{\"t\":1,\"dt\":2,\"energy_j\":[1],\"procs\":[]}}\n"
                            "{\"tick\":{\"t\":5,\"dt\":2,\"energy_j\":[1],\"pro");
    assert_int_equal(read_all(path, err, sizeof(err), &records), -ENODATA);
    assert_int_equal(records, 2);
    /* A last line that is whole but lacks its newline is a record. */
    write_file(path, HEADER "\n{\"exit\":{\"pid\":1,\"start\":2}}");
    assert_int_equal(read_all(path, err, sizeof(err), &records), 0);
    assert_int_equal(records, 1);
}

/* ---- Writer faults -------------------------------------------------------- */

static void test_writer_refuses(void **state)
{
    char *ev[] = {"cycles"};
    char *zid[] = {"intel-rapl:0"}, *zname[] = {"package-0"};
    trace_header h = {.events = ev,
                      .n_events = 1,
                      .zone_id = zid,
                      .zone_name = zname,
                      .n_zones = 1,
                      .rate_hz = 50,
                      .boot_id = BOOT};
    char path[128], err[UTIL_ERRLEN];
    trace_writer *w;
    double e = 1, bad = NAN, s = 1, ratio = 2;
    trace_proc_delta p = {.pid = 3, .start_ticks = 4, .scaled = &s, .ratio = &ratio};
    trace_tick t = {.mono_ns = 10, .dt_ns = 5, .energy_j = &bad, .n_procs = 0};
    int records;

    snprintf(path, sizeof(path), "%s/refuse.jsonl", tmpdir);
    assert_int_equal(trace_writer_open(path, &h, &w, err, sizeof(err)), 0);
    procs_info three = {.pid = 3, .start_ticks = 4, .comm = "three", .cmdline = "", .cgroup = ""};
    assert_int_equal(trace_write_proc(w, &three), 0);
    assert_int_equal(trace_write_tick(w, &t), -EINVAL); /* NaN energy */
    t.energy_j = &e;
    t.procs = &p;
    t.n_procs = 1;
    assert_int_equal(trace_write_tick(w, &t), -EINVAL); /* ratio 2 */
    ratio = 1;
    assert_int_equal(trace_write_tick(w, &t), 0);
    assert_int_equal(trace_write_tick(w, &t), -EINVAL); /* same time again */
    procs_info bad_proc = {.pid = 0, .comm = "x"};
    assert_int_equal(trace_write_proc(w, &bad_proc), -EINVAL);
    assert_int_equal(trace_write_exit(w, -1, 5), -EINVAL);
    assert_int_equal(trace_writer_close(w), 0);
    /* what was refused left no trace: the file reads cleanly */
    assert_int_equal(read_all(path, err, sizeof(err), &records), 0);
    assert_int_equal(records, 2);

    h.rate_hz = 0;
    assert_int_equal(trace_writer_open(path, &h, &w, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "rate"));
    h.rate_hz = 50;
    assert_int_equal(trace_writer_open("/nonexistent/dir/x.jsonl", &h, &w, err, sizeof(err)),
                     -ENOENT);
    assert_non_null(strstr(err, "/nonexistent/dir/x.jsonl"));
}

/* A full disk: the error surfaces at the latest on close. */
static void test_writer_disk_full(void **state)
{
    char *ev[] = {"cycles"};
    trace_header h = {.events = ev, .n_events = 1, .rate_hz = 50, .boot_id = BOOT};
    char err[UTIL_ERRLEN];
    trace_writer *w;
    double s = 1, ratio = 1;
    trace_proc_delta p = {.pid = 3, .start_ticks = 4, .scaled = &s, .ratio = &ratio};
    trace_tick t = {.mono_ns = 10, .dt_ns = 5, .procs = &p, .n_procs = 1};
    int first = 0;

    if (access("/dev/full", W_OK) < 0)
        skip();
    assert_int_equal(trace_writer_open("/dev/full", &h, &w, err, sizeof(err)), 0);
    for (int i = 0; i < 100000 && !first; i++, t.mono_ns++)
        first = trace_write_tick(w, &t);
    assert_int_equal(first, -ENOSPC);
    assert_int_equal(trace_write_exit(w, 1, 2), -ENOSPC);
    assert_int_equal(trace_writer_close(w), -ENOSPC);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),     cmocka_unit_test(test_exact_edges),
        cmocka_unit_test(test_malformed),      cmocka_unit_test(test_truncated_after_records),
        cmocka_unit_test(test_writer_refuses), cmocka_unit_test(test_writer_disk_full),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
