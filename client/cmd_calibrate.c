/* wattprof calibrate: a guided calibration for a node that can be drained
 * (docs/calibration.md, "wattprof calibrate").
 *
 * Measures the power the RAPL meter reads with nothing running, then with
 * 1..N CPUs kept busy by its own burners, and fits measured power against
 * the model's dynamic power for the busy CPU time it saw (lib/model calib,
 * the daemon's estimator): the intercept is the node's idle power, the
 * slope the model's scale on this node. The fit is stored in the daemon's
 * database as the node's calibration, which wattprofd starts from. It
 * refuses without RAPL, and when the node is not quiet while idle is
 * measured. */
#include "commands.h"
#include "model/model.h"
#include "sample/sample.h"
#include "store/store.h"
#include "util/util.h"

#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CAL_WINDOW_S 0.5 /* one fitted row per this many seconds */
#define CAL_SETTLE_S 0.5 /* after the burners start, before measuring */
#define CAL_MAX_CPUS 1024

struct cal_opts {
    long cpus;          /* load steps 1..cpus */
    double step_s;      /* seconds measured per step */
    double quiet_cpus;  /* most busy CPUs allowed while idle is measured */
    const char *cgroup; /* the meter's cgroup, or NULL for the host */
    const char *model_path, *db;
    bool store, json;
};

struct cal_level {
    long asked;           /* burners running */
    double cpus, power_w; /* mean busy CPUs and measured power */
};

struct cal_ctx {
    struct cal_opts o;
    model *m;
    rapl *power;
    double *delta;
    double dyn_per_cpu_w; /* the model's dynamic power of one busy CPU */
    calib *fit;
    struct cal_level *levels;
    pid_t burners[CAL_MAX_CPUS];
    long n_burners;
};

static void cal_usage(FILE *out)
{
    fprintf(out,
            "usage: wattprof calibrate [--cpus N] [--step S] [--quiet CPUS] [--meter-cgroup DIR]\n"
            "                          [--model FILE] [--db FILE] [--no-store] [--json]\n"
            "Measures idle power on a drained node, then power with 1..N CPUs busy, fits\n"
            "measured power against the model, and stores the fit as the node's calibration.\n"
            "  --cpus N            load steps up to N busy CPUs (default: the online CPUs)\n"
            "  --step S            seconds measured per step (default 4)\n"
            "  --quiet CPUS        most busy CPUs while idle is measured (default 0.1)\n"
            "  --meter-cgroup DIR  the meter sees only this cgroup's CPU (test rigs)\n"
            "  --model FILE        the model the scale is for (default: the built-in one)\n"
            "  --db FILE           the daemon's database (default /var/lib/wattprof/wattprof.db)\n"
            "  --no-store          report only\n"
            "  --json              the report as JSON\n"
            "Exit status: 0 when calibrated (and stored), 1 when it could not be, 2 for bad\n"
            "usage.\n");
}

static int cal_bad(const char *opt, const char *val, const char *want)
{
    log_error("%s '%s': %s (see wattprof calibrate --help)", opt, val, want);
    return -EINVAL;
}

static int cal_parse(int argc, char **argv, struct cal_opts *o)
{
    static const struct option longopts[] = {
        {"cpus", required_argument, NULL, 'c'},  {"step", required_argument, NULL, 's'},
        {"quiet", required_argument, NULL, 'q'}, {"meter-cgroup", required_argument, NULL, 'g'},
        {"model", required_argument, NULL, 'm'}, {"db", required_argument, NULL, 'd'},
        {"no-store", no_argument, NULL, 'n'},    {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0}};
    int c;

    *o = (struct cal_opts){.cpus = sysconf(_SC_NPROCESSORS_ONLN),
                           .step_s = 4,
                           .quiet_cpus = 0.1,
                           .db = "/var/lib/wattprof/wattprof.db",
                           .store = true};
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "c:s:q:g:m:d:njh", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            if (util_parse_long(optarg, &o->cpus) < 0 || o->cpus < 1 || o->cpus > CAL_MAX_CPUS)
                return cal_bad("--cpus", optarg, "a whole number from 1 to 1024");
            break;
        case 's':
            if (util_parse_double(optarg, &o->step_s) < 0 || !(o->step_s >= 1 && o->step_s <= 600))
                return cal_bad("--step", optarg, "seconds from 1 to 600");
            break;
        case 'q':
            if (util_parse_double(optarg, &o->quiet_cpus) < 0 || !(o->quiet_cpus >= 0) ||
                o->quiet_cpus > CAL_MAX_CPUS)
                return cal_bad("--quiet", optarg, "busy CPUs, 0 or more");
            break;
        case 'g':
            o->cgroup = optarg;
            break;
        case 'm':
            o->model_path = optarg;
            break;
        case 'd':
            o->db = optarg;
            break;
        case 'n':
            o->store = false;
            break;
        case 'j':
            o->json = true;
            break;
        case 'h':
            cal_usage(stdout);
            return 1;
        default:
            log_error("unknown option or missing value '%s' (see wattprof calibrate "
                      "--help)",
                      argv[optind - 1]);
            return -EINVAL;
        }
    }
    if (optind < argc) {
        log_error("unexpected argument '%s' (see wattprof calibrate --help)", argv[optind]);
        return -EINVAL;
    }
    return 0;
}

/* The model, and its dynamic power for one busy CPU of task-clock. */
static int cal_load_model(struct cal_ctx *c)
{
    char err[UTIL_ERRLEN];
    const char *origin = c->o.model_path ? c->o.model_path : "the built-in model";
    int r = c->o.model_path ? model_load(c->o.model_path, &c->m, err, sizeof(err))
                            : model_load_default(&c->m, err, sizeof(err));
    int cpu = -1;

    if (r < 0) {
        log_error("%s", err);
        return r;
    }
    for (size_t j = 0; j < c->m->n_events; j++)
        if (strcmp(c->m->events[j], "perf::TASK-CLOCK") == 0)
            cpu = (int)j;
    if (cpu < 0) {
        log_error("%s has no perf::TASK-CLOCK event: the fit is of power against "
                  "CPU time",
                  origin);
        return -EINVAL;
    }
    double rates[c->m->n_events];
    memset(rates, 0, sizeof(rates));
    rates[cpu] = 1e9; /* one CPU: a nanosecond of task-clock per nanosecond */
    c->dyn_per_cpu_w = model_dynamic_power(c->m, model_classify(c->m, 0), rates);
    if (!(c->dyn_per_cpu_w > 0) || !isfinite(c->dyn_per_cpu_w)) {
        log_error("%s gives a busy CPU no dynamic power (%g W): nothing to scale", origin,
                  c->dyn_per_cpu_w);
        return -EINVAL;
    }
    return 0;
}

static void cal_burn(void)
{
    volatile unsigned long x = 0;

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (;;)
        x++;
}

static int cal_start_burners(struct cal_ctx *c, long n)
{
    for (; c->n_burners < n; c->n_burners++) {
        pid_t p = fork();
        if (p < 0) {
            log_error("cannot start a burner: %s", strerror(errno));
            return -errno;
        }
        if (p == 0)
            cal_burn();
        c->burners[c->n_burners] = p;
    }
    return 0;
}

static void cal_stop_burners(struct cal_ctx *c)
{
    for (long i = 0; i < c->n_burners; i++)
        kill(c->burners[i], SIGKILL);
    for (long i = 0; i < c->n_burners; i++)
        waitpid(c->burners[i], NULL, 0);
    c->n_burners = 0;
}

static void sleep_until(uint64_t t_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(t_ns / 1000000000u),
                          .tv_nsec = (long)(t_ns % 1000000000u)};

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* The energy of the model's domains since the previous call, the busy CPU
 * seconds so far, and when they were read. */
static int cal_read(struct cal_ctx *c, double *energy_j, double *busy_s, uint64_t *t_ns)
{
    int r;

    if ((r = rapl_read(c->power, c->delta)) < 0) {
        log_error("reading RAPL failed: %s", strerror(-r));
        return r;
    }
    *t_ns = util_now_ns(CLOCK_MONOTONIC);
    if ((r = sample_busy_cpu_s(c->o.cgroup, busy_s)) < 0) {
        log_error("reading the busy CPU time of %s failed: %s",
                  c->o.cgroup ? c->o.cgroup : "/proc/stat", strerror(-r));
        return r;
    }
    *energy_j =
        rapl_sum_domains(c->power, c->delta, (const char *const *)c->m->target, c->m->n_target);
    return 0;
}

/* One step: `n` burners, then a row into the fit every CAL_WINDOW_S. */
static int cal_level(struct cal_ctx *c, long n, struct cal_level *out)
{
    size_t rows = (size_t)llround(c->o.step_s / CAL_WINDOW_S);
    uint64_t next = util_now_ns(CLOCK_MONOTONIC) + (uint64_t)(CAL_SETTLE_S * 1e9), t_ns;
    double e, busy, sum_cpus = 0, sum_w = 0;
    int r;

    if ((r = cal_start_burners(c, n)) < 0)
        return r;
    sleep_until(next);
    if ((r = cal_read(c, &e, &busy, &t_ns)) < 0)
        return r;
    for (size_t i = 0; i < rows; i++) {
        double busy_before = busy;
        uint64_t t_before = t_ns;
        next += (uint64_t)(CAL_WINDOW_S * 1e9);
        sleep_until(next);
        if ((r = cal_read(c, &e, &busy, &t_ns)) < 0)
            return r;
        double dt = (double)(t_ns - t_before) / 1e9;
        double cpus = (busy - busy_before) / dt, power_w = e / dt;
        if (n == 0 && cpus > c->o.quiet_cpus) {
            log_error("the node is not quiet: %.2f CPUs busy while idle was measured "
                      "(at most %g): drain it, or raise --quiet",
                      cpus, c->o.quiet_cpus);
            return -EBUSY;
        }
        sum_cpus += cpus;
        sum_w += power_w;
        calib_add(c->fit, (double)t_ns / 1e9, c->dyn_per_cpu_w * cpus, power_w);
    }
    cal_stop_burners(c);
    *out = (struct cal_level){
        .asked = n, .cpus = sum_cpus / (double)rows, .power_w = sum_w / (double)rows};
    return 0;
}

/* Idle, then 1..cpus busy CPUs, into c->fit; the burners are stopped on
 * every path. */
static int cal_measure(struct cal_ctx *c)
{
    calib_config cfg;
    int r = 0;

    calib_config_default(&cfg);
    cfg.window = (size_t)(c->o.cpus + 1) * (size_t)llround(c->o.step_s / CAL_WINDOW_S);
    cfg.half_life_s = 1e9; /* every row weighs the same: the run is minutes long */
    cfg.min_rows = 6;
    if ((r = calib_new(&cfg, &c->fit)) < 0) {
        log_error("%s", strerror(-r));
        return r;
    }
    c->levels = calloc((size_t)c->o.cpus + 1, sizeof(*c->levels));
    if (!c->levels)
        return -ENOMEM;
    for (long n = 0; n <= c->o.cpus && r == 0; n++) {
        if (!c->o.json && isatty(STDERR_FILENO))
            fprintf(stderr, "wattprof calibrate: measuring %ld busy CPUs of %ld...\r", n,
                    c->o.cpus);
        r = cal_level(c, n, &c->levels[n]);
    }
    cal_stop_burners(c);
    if (!c->o.json && isatty(STDERR_FILENO))
        fprintf(stderr, "%60s\r", "");
    return r;
}

static void cal_print_text(const struct cal_ctx *c, const calib_fit *f, const char *target)
{
    printf("RAPL: %s, fitted on %zu rows of %.1f s (%ld steps of %g s)\n", target, f->rows,
           CAL_WINDOW_S, c->o.cpus + 1, c->o.step_s);
    printf("%-10s %9s %10s\n", "LOAD", "CPUS", "POWER");
    for (long n = 0; n <= c->o.cpus; n++)
        printf("%-10s %9.2f %8.2f W\n", n == 0 ? "idle" : "", c->levels[n].cpus,
               c->levels[n].power_w);
    printf("idle %.2f W +- %.2f, %.2f W per busy CPU (R2 %.4f, %zu rows left out)\n", f->idle_w,
           f->idle_se_w, f->scale * c->dyn_per_cpu_w, f->r2, f->rejected);
    printf("model %s (sha256 %.12s): scale %.3f (its %.2f W per busy CPU)\n", c->m->name,
           c->m->sha256, f->scale, c->dyn_per_cpu_w);
}

static void cal_print_json(const struct cal_ctx *c, const calib_fit *f, const char *target,
                           bool stored)
{
    json_object *o = json_object_new_object(), *lv = json_object_new_array();

    json_object_object_add(o, "target", json_object_new_string(target));
    json_object_object_add(o, "idle_w", json_object_new_double(f->idle_w));
    json_object_object_add(o, "idle_se_w", json_object_new_double(f->idle_se_w));
    json_object_object_add(o, "per_cpu_w", json_object_new_double(f->scale * c->dyn_per_cpu_w));
    json_object_object_add(o, "scale", json_object_new_double(f->scale));
    json_object_object_add(o, "r2", json_object_new_double(f->r2));
    json_object_object_add(o, "rows", json_object_new_int64((int64_t)f->rows));
    json_object_object_add(o, "rejected", json_object_new_int64((int64_t)f->rejected));
    json_object_object_add(o, "model", json_object_new_string(c->m->name));
    json_object_object_add(o, "model_sha256", json_object_new_string(c->m->sha256));
    for (long n = 0; n <= c->o.cpus; n++) {
        json_object *l = json_object_new_object();
        json_object_object_add(l, "burners", json_object_new_int64(c->levels[n].asked));
        json_object_object_add(l, "cpus", json_object_new_double(c->levels[n].cpus));
        json_object_object_add(l, "power_w", json_object_new_double(c->levels[n].power_w));
        json_object_array_add(lv, l);
    }
    json_object_object_add(o, "levels", lv);
    json_object_object_add(o, "stored", stored ? json_object_new_string(c->o.db) : NULL);
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
    json_object_put(o);
}

static int cal_store(const struct cal_ctx *c, const calib_fit *f, const char *target)
{
    char err[UTIL_ERRLEN];
    store_node_calib s = {.t = (int64_t)(util_now_ns(CLOCK_REALTIME) / 1000000000u),
                          .idle_w = f->idle_w,
                          .idle_se_w = f->idle_se_w,
                          .scale = f->scale,
                          .r2 = f->r2,
                          .spread_w = f->spread_w,
                          .rows = (int64_t)f->rows};
    int r;

    snprintf(s.target, sizeof(s.target), "%s", target);
    snprintf(s.model_sha256, sizeof(s.model_sha256), "%s", c->m->sha256);
    if ((r = store_node_calib_put(c->o.db, &s, err, sizeof(err))) < 0)
        log_error("%s", err);
    return r;
}

static int cal_run(struct cal_ctx *c)
{
    char target[64], err[UTIL_ERRLEN];
    calib_fit f;
    int r;

    if ((r = cal_load_model(c)) < 0)
        return r;
    if ((r = rapl_open(&c->power)) < 0) {
        log_error("reading RAPL zones failed: %s", strerror(-r));
        return r;
    }
    if (c->power->n == 0) {
        log_error("no RAPL meter to calibrate against: %s", c->power->state);
        return -ENODEV;
    }
    if (!(c->delta = calloc(c->power->n, sizeof(double))))
        return -ENOMEM;
    /* Where the result goes is checked before the minutes of measuring. */
    if (c->o.store && (r = store_node_calib_check(c->o.db, err, sizeof(err))) < 0) {
        log_error("%s", err);
        return r;
    }
    if ((r = cal_measure(c)) < 0)
        return r;
    calib_fit_now(c->fit, &f);
    model_target_key(c->m, target, sizeof(target));
    if (!f.identifiable) {
        log_error("the fit cannot tell idle on %s: %s", target, f.why);
        return -EDOM;
    }
    bool stored = c->o.store && cal_store(c, &f, target) == 0;
    if (c->o.json)
        cal_print_json(c, &f, target, stored);
    else {
        cal_print_text(c, &f, target);
        if (stored)
            printf("stored in %s: wattprofd starts from it at its next start\n", c->o.db);
    }
    return c->o.store && !stored ? -EIO : 0;
}

int cmd_calibrate(int argc, char **argv)
{
    struct cal_ctx c = {0};
    int r = cal_parse(argc, argv, &c.o);

    if (r != 0)
        return r > 0 ? 0 : 2;
    r = cal_run(&c);
    cal_stop_burners(&c);
    calib_free(c.fit);
    free(c.levels);
    free(c.delta);
    rapl_close(c.power);
    model_free(c.m);
    return r < 0 ? 1 : 0;
}
