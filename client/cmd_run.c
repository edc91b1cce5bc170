/* wattprof run: `perf stat` for joules.
 *
 * Runs a command with its counters opened before exec (enable_on_exec,
 * inherit without inherit_thread, so its threads and child processes all
 * count into one set of groups, each once), samples counters and RAPL at a
 * fixed interval from a timerfd with absolute deadlines, applies the model
 * tick by tick exactly as the daemon does, and prints what the command
 * cost. The command's exit status becomes ours. */
#include "commands.h"
#include "model/model.h"
#include "sample/sample.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RUN_BASELINE_NS 500000000ull /* idle probe before an uncalibrated run */

struct run_opts {
    const char *model_path;
    const char *output; /* report file; stderr (like perf stat) when NULL */
    long interval_ms;
    bool json;
    char **cmd;
};

/* What the sampling loop accumulates. */
struct run_totals {
    double standalone_j, attributed_j, host_j, modeled_host_j, idle_j, unattributed_j;
    double *zone_j;    /* per RAPL zone */
    double class_stat; /* cumulative cache-misses, or last rate */
    int klass;
    unsigned ticks;
    /* Gaps: zone reads that failed (the energy shows up at the next good
     * read of the zone) and ticks the model could not attribute (their
     * measured energy is in host_j, as unattributed). */
    unsigned read_errors, bad_ticks;
    int first_read_error; /* -errno of the first failed read */
};

struct run_ctx {
    struct run_opts opt;
    model *m;
    sample_eventset *es;
    rapl *power;
    counters_proc *cp;
    counters_delta d;
    double *rates, *zone_delta;
    double idle_w;
    const char *idle_source;
    struct run_totals t;
    pid_t child;
    int status;
    bool waited; /* status holds the command's end */
    struct rusage ru;
    uint64_t start_ns, end_ns, last_ns;
};

static void run_usage(FILE *out)
{
    fprintf(out, "usage: wattprof run [--model FILE] [--interval MS] [--json] [--output FILE]\n"
                 "                    -- CMD [ARGS]\n"
                 "Runs CMD and reports the energy it used, with its threads and children.\n"
                 "The report goes to stderr (or FILE), leaving CMD's stdout alone.\n");
}

static int run_parse(int argc, char **argv, struct run_opts *o)
{
    static const struct option longopts[] = {
        {"model", required_argument, NULL, 'm'}, {"interval", required_argument, NULL, 'i'},
        {"json", no_argument, NULL, 'j'},        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0}};
    int c;

    o->interval_ms = 20;
    optind = 1;
    opterr = 0; /* our own one-line messages */
    while ((c = getopt_long(argc, argv, "+m:i:jo:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'm':
            o->model_path = optarg;
            break;
        case 'i':
            if (util_parse_long(optarg, &o->interval_ms) < 0 || o->interval_ms < 1 ||
                o->interval_ms > 60000) {
                log_error("--interval '%s': expected milliseconds between 1 and 60000", optarg);
                return -EINVAL;
            }
            break;
        case 'j':
            o->json = true;
            break;
        case 'o':
            o->output = optarg;
            break;
        case 'h':
            run_usage(stdout);
            exit(0);
        default:
            log_error("run: unknown option or missing value '%s' (see wattprof run --help)",
                      argv[optind - 1]);
            return -EINVAL;
        }
    }
    if (optind >= argc) {
        log_error("run: no command given (usage: wattprof run [OPTIONS] -- CMD [ARGS])");
        return -EINVAL;
    }
    o->cmd = argv + optind;
    return 0;
}

static int run_load_model(struct run_ctx *c)
{
    char err[UTIL_ERRLEN];
    const char *origin = c->opt.model_path ? c->opt.model_path : "built-in cputime.json";
    int r = c->opt.model_path ? model_load(c->opt.model_path, &c->m, err, sizeof(err))
                              : model_load_default(&c->m, err, sizeof(err));

    if (r < 0) {
        log_error("%s", err);
        return r;
    }
    r = events_encode((const char *const *)c->m->events, c->m->n_events, &c->es, err, sizeof(err));
    if (r < 0) {
        log_error("model %s: %s", origin, err);
        return r;
    }
    r = events_probe(c->es, err, sizeof(err));
    if (r < 0) {
        log_error("model %s: this machine cannot count its events: %s", origin, err);
        return r;
    }
    return 0;
}

/* The child waits for `go` so its counters exist before exec, and reports
 * an exec failure through `fail` (close-on-exec: EOF means exec worked). */
static int run_spawn(struct run_ctx *c, int go[2], int fail[2])
{
    c->child = fork();
    if (c->child < 0)
        return -errno;
    if (c->child == 0) {
        char b;
        int e;
        close(go[1]);
        close(fail[0]);
        signal(SIGINT, SIG_DFL);
        signal(SIGQUIT, SIG_DFL);
        if (read(go[0], &b, 1) != 1)
            _exit(127);
        execvp(c->opt.cmd[0], c->opt.cmd);
        e = errno;
        if (write(fail[1], &e, sizeof(e)) < 0)
            _exit(127);
        _exit(127);
    }
    close(go[0]);
    close(fail[1]);
    return 0;
}

static double run_class_stat(struct run_ctx *c, double dt)
{
    int ev = c->m->class_event;

    if (ev < 0)
        return 0;
    if (c->m->class_mode == MODEL_CLASS_RATE)
        return c->d.scaled[ev] / dt;
    c->t.class_stat += c->d.scaled[ev];
    return c->t.class_stat;
}

/* One interval: counters and energy since the previous tick, attributed. */
static int run_tick(struct run_ctx *c)
{
    uint64_t now = util_now_ns(CLOCK_MONOTONIC);
    double dt = (double)(now - c->last_ns) / 1e9;
    attrib_tick tick = {.dt_s = dt, .idle_w = c->idle_w};
    attrib_proc proc = {.rates = c->rates};
    int r;

    if (dt <= 0)
        return 0;
    c->last_ns = now;
    if ((r = counters_read(c->cp, &c->d)) < 0)
        return r;
    for (size_t j = 0; j < c->es->n; j++)
        c->rates[j] = c->d.scaled[j] / dt;
    double stat = run_class_stat(c, dt);
    if (c->m->class_mode == MODEL_CLASS_RATE)
        c->t.class_stat = stat;
    proc.klass = c->t.klass = model_classify(c->m, stat);
    if (c->power->n > 0) {
        /* A failed read is a gap, never a lost run: the zone's energy comes
         * with its next good read. */
        if ((r = rapl_read(c->power, c->zone_delta)) < 0 && c->t.read_errors++ == 0)
            c->t.first_read_error = r;
        for (size_t z = 0; z < c->power->n; z++)
            c->t.zone_j[z] += c->zone_delta[z];
        tick.measured = true;
        tick.host_j = rapl_sum_domains(c->power, c->zone_delta, (const char *const *)c->m->target,
                                       c->m->n_target);
    }
    if (attrib_tick_compute(c->m, &tick, &proc, 1) < 0) {
        c->t.bad_ticks++;
        double host = tick.measured && isfinite(tick.host_j) ? tick.host_j : 0;
        c->t.host_j += host;
        c->t.unattributed_j += host;
        c->t.ticks++;
        return 0;
    }
    c->t.standalone_j += proc.standalone_j;
    c->t.attributed_j += proc.attributed_j;
    c->t.host_j += tick.host_j;
    c->t.modeled_host_j += tick.modeled_host_j;
    c->t.idle_j += tick.idle_j;
    c->t.unattributed_j += tick.unattributed_j;
    c->t.ticks++;
    return 0;
}

/* An uncalibrated model's idle power is a guess; with RAPL present, measure
 * the host for a moment before the command starts instead. */
static int run_baseline(struct run_ctx *c)
{
    c->idle_w = c->m->idle_power_w;
    c->idle_source = c->m->training.present ? "model" : "model (uncalibrated)";
    if (c->power->n == 0 || c->m->training.present)
        return 0;
    uint64_t t0 = util_now_ns(CLOCK_MONOTONIC);
    int r = rapl_read(c->power, c->zone_delta);
    struct timespec ts = {0, (long)RUN_BASELINE_NS};
    if (r == 0) {
        nanosleep(&ts, NULL);
        r = rapl_read(c->power, c->zone_delta);
    }
    if (r < 0) { /* the model's idle, then: a gap, not a reason to refuse the run */
        c->t.read_errors++;
        c->t.first_read_error = r;
        return 0;
    }
    double dt = (double)(util_now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
    c->idle_w = rapl_sum_domains(c->power, c->zone_delta, (const char *const *)c->m->target,
                                 c->m->n_target) /
                dt;
    c->idle_source = "measured before the run";
    return 0;
}

static int run_loop(struct run_ctx *c, int pidfd)
{
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    struct itimerspec its = {0};
    uint64_t first = c->start_ns + (uint64_t)c->opt.interval_ms * 1000000ull;
    int r = 0;

    if (tfd < 0)
        return -errno;
    /* Absolute deadlines: a late tick does not push the next ones back. */
    its.it_value.tv_sec = (time_t)(first / 1000000000ull);
    its.it_value.tv_nsec = (long)(first % 1000000000ull);
    its.it_interval.tv_sec = c->opt.interval_ms / 1000;
    its.it_interval.tv_nsec = (c->opt.interval_ms % 1000) * 1000000L;
    if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0) {
        r = -errno;
        close(tfd);
        return r;
    }
    for (;;) {
        struct pollfd pfd[2] = {{.fd = tfd, .events = POLLIN}, {.fd = pidfd, .events = POLLIN}};
        if (poll(pfd, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            r = -errno;
            break;
        }
        if (pfd[1].revents)
            break; /* exited: the final read happens after this loop */
        if (pfd[0].revents & POLLIN) {
            uint64_t expirations;
            if (read(tfd, &expirations, sizeof(expirations)) < 0 && errno != EAGAIN) {
                r = -errno;
                break;
            }
            if ((r = run_tick(c)) < 0)
                break;
        }
    }
    close(tfd);
    return r;
}

static int run_wait(struct run_ctx *c)
{
    for (;;) {
        pid_t w = wait4(c->child, &c->status, 0, &c->ru);
        if (w == c->child) {
            c->waited = true;
            return 0;
        }
        if (w < 0 && errno != EINTR)
            return -errno;
    }
}

static int run_command(struct run_ctx *c)
{
    int go[2], fail[2], pidfd, e = 0, r;
    char err[UTIL_ERRLEN];
    ssize_t n;

    if (pipe2(go, O_CLOEXEC) < 0 || pipe2(fail, O_CLOEXEC) < 0)
        return -errno;
    if ((r = run_spawn(c, go, fail)) < 0)
        return r;
    r = counters_open(c->es, c->child, COUNTERS_CHILDREN | COUNTERS_ENABLE_ON_EXEC, &c->cp, err,
                      sizeof(err));
    if (r < 0) {
        log_error("cannot count '%s': %s", c->opt.cmd[0], err);
        kill(c->child, SIGKILL);
        close(go[1]);
        close(fail[0]);
        run_wait(c);
        return r;
    }
    pidfd = (int)syscall(SYS_pidfd_open, c->child, 0);
    if (pidfd < 0) {
        r = -errno;
        kill(c->child, SIGKILL);
    }
    if (c->power->n > 0)
        rapl_read(c->power, c->zone_delta);
    c->start_ns = c->last_ns = util_now_ns(CLOCK_MONOTONIC);
    if (write(go[1], "x", 1) != 1 && r == 0)
        r = -errno;
    close(go[1]);
    n = read(fail[0], &e, sizeof(e));
    close(fail[0]);
    if (n == (ssize_t)sizeof(e)) {
        log_error("cannot run '%s': %s", c->opt.cmd[0], strerror(e));
        r = -e;
    }
    if (r == 0)
        r = run_loop(c, pidfd);
    if (r == 0)
        r = run_tick(c); /* the last partial interval */
    c->end_ns = util_now_ns(CLOCK_MONOTONIC);
    if (pidfd >= 0)
        close(pidfd);
    int rw = run_wait(c);
    return r < 0 ? r : rw;
}

static double tv_s(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static const char *run_energy_source(const struct run_ctx *c)
{
    return c->power->n > 0 ? "rapl" : "model";
}

static json_object *run_json(const struct run_ctx *c)
{
    json_object *o = json_object_new_object(), *cmd = json_object_new_array();
    json_object *rp = json_object_new_object(), *zones = json_object_new_array();
    json_object *events = json_object_new_array(), *mo = json_object_new_object();
    double wall = (double)(c->end_ns - c->start_ns) / 1e9;
    const double *totals, *ratios;

    for (char **a = c->opt.cmd; *a; a++)
        json_object_array_add(cmd, json_object_new_string(*a));
    json_object_object_add(o, "command", cmd);
    json_object_object_add(o, "exit_status",
                           json_object_new_int(WIFEXITED(c->status) ? WEXITSTATUS(c->status)
                                                                    : 128 + WTERMSIG(c->status)));
    json_object_object_add(o, "wall_s", json_object_new_double(wall));
    /* CLOCK_MONOTONIC bounds of the measurement, to line it up with other logs. */
    json_object_object_add(o, "start_mono_ns", json_object_new_int64((int64_t)c->start_ns));
    json_object_object_add(o, "end_mono_ns", json_object_new_int64((int64_t)c->end_ns));
    json_object_object_add(o, "user_s", json_object_new_double(tv_s(c->ru.ru_utime)));
    json_object_object_add(o, "sys_s", json_object_new_double(tv_s(c->ru.ru_stime)));
    json_object_object_add(o, "cpu_s",
                           json_object_new_double(tv_s(c->ru.ru_utime) + tv_s(c->ru.ru_stime)));
    json_object_object_add(o, "energy_j", json_object_new_double(c->t.attributed_j));
    json_object_object_add(o, "energy_source", json_object_new_string(run_energy_source(c)));
    json_object_object_add(o, "standalone_j", json_object_new_double(c->t.standalone_j));
    json_object_object_add(o, "standalone_w",
                           json_object_new_double(wall > 0 ? c->t.standalone_j / wall : 0));
    json_object_object_add(o, "host_j", json_object_new_double(c->t.host_j));
    json_object_object_add(o, "modeled_host_j", json_object_new_double(c->t.modeled_host_j));
    json_object_object_add(o, "idle_j", json_object_new_double(c->t.idle_j));
    json_object_object_add(o, "idle_w", json_object_new_double(c->idle_w));
    json_object_object_add(o, "idle_source", json_object_new_string(c->idle_source));
    json_object_object_add(o, "unattributed_j", json_object_new_double(c->t.unattributed_j));
    json_object_object_add(o, "class", json_object_new_string(c->m->classes[c->t.klass].name));
    json_object_object_add(o, "ticks", json_object_new_int((int)c->t.ticks));
    json_object_object_add(rp, "present", json_object_new_boolean(c->power->n > 0));
    json_object_object_add(rp, "state", json_object_new_string(c->power->state));
    json_object_object_add(rp, "read_errors", json_object_new_int((int)c->t.read_errors));
    json_object_object_add(
        rp, "first_read_error",
        c->t.read_errors ? json_object_new_string(strerror(-c->t.first_read_error)) : NULL);
    json_object_object_add(o, "unattributed_intervals", json_object_new_int((int)c->t.bad_ticks));
    for (size_t z = 0; z < c->power->n; z++) {
        json_object *zo = json_object_new_object();
        json_object_object_add(zo, "zone", json_object_new_string(c->power->zone[z].id));
        json_object_object_add(zo, "name", json_object_new_string(c->power->zone[z].name));
        json_object_object_add(zo, "energy_j", json_object_new_double(c->t.zone_j[z]));
        json_object_array_add(zones, zo);
    }
    json_object_object_add(rp, "zones", zones);
    json_object_object_add(o, "rapl", rp);
    counters_totals(c->cp, &totals, &ratios);
    for (size_t j = 0; j < c->es->n; j++) {
        json_object *eo = json_object_new_object();
        json_object_object_add(eo, "name", json_object_new_string(c->es->ev[j].name));
        json_object_object_add(eo, "count", json_object_new_double(totals[j]));
        json_object_object_add(eo, "ratio", json_object_new_double(ratios[j]));
        json_object_array_add(events, eo);
    }
    json_object_object_add(o, "events", events);
    json_object_object_add(o, "user_mode_only", json_object_new_boolean(c->es->user_only));
    json_object_object_add(mo, "name", json_object_new_string(c->m->name));
    json_object_object_add(mo, "sha256", json_object_new_string(c->m->sha256));
    json_object_object_add(mo, "calibrated", json_object_new_boolean(c->m->training.present));
    json_object_object_add(o, "model", mo);
    return o;
}

static void run_print(const struct run_ctx *c, FILE *out)
{
    double wall = (double)(c->end_ns - c->start_ns) / 1e9;
    double user = tv_s(c->ru.ru_utime), sys = tv_s(c->ru.ru_stime);
    const double *totals, *ratios;

    fprintf(out, "\n Energy of '%s':\n\n", c->opt.cmd[0]);
    fprintf(out, "  %14.3f s    wall time\n", wall);
    fprintf(out, "  %14.3f s    CPU time (user %.3f s, sys %.3f s)\n", user + sys, user, sys);
    fprintf(out, "  %14.3f J    standalone model energy (mean %.2f W)\n", c->t.standalone_j,
            wall > 0 ? c->t.standalone_j / wall : 0);
    fprintf(out, "  %14.3f J    attributed to the command (%s)\n", c->t.attributed_j,
            c->power->n > 0 ? "share of measured RAPL energy above idle"
                            : "modeled: no RAPL on this machine");
    if (c->power->n > 0) {
        for (size_t z = 0; z < c->power->n; z++)
            fprintf(out, "  %14.3f J    host RAPL %s (%s)\n", c->t.zone_j[z],
                    c->power->zone[z].name, c->power->zone[z].id);
        fprintf(out, "  %14.3f J    host energy of the model's domains, idle %.2f W (%s)\n",
                c->t.host_j, c->idle_w, c->idle_source);
    } else {
        fprintf(out, "  %14s      host RAPL: %s\n", "-", c->power->state);
        if (c->t.read_errors)
            fprintf(out,
                    "  %14u      RAPL reads failed (first: %s); their energy was counted at the "
                    "next good read\n",
                    c->t.read_errors, strerror(-c->t.first_read_error));
        if (c->t.bad_ticks)
            fprintf(
                out,
                "  %14u      intervals the model could not attribute (stored as unattributed)\n",
                c->t.bad_ticks);
    }
    fprintf(out, "  %14s      class\n", c->m->classes[c->t.klass].name);
    fprintf(out, "\n  events (scaled for multiplexing; %% = time counted)%s:\n",
            c->es->user_only ? ", user mode only: the kernel refused kernel-mode counts "
                               "(perf_event_paranoid)"
                             : "");
    counters_totals(c->cp, &totals, &ratios);
    for (size_t j = 0; j < c->es->n; j++)
        fprintf(out, "  %18.0f  %-28s %5.1f %%\n", totals[j], c->es->ev[j].name, 100.0 * ratios[j]);
    fprintf(out, "\n  model %s (sha256 %.12s)%s\n\n", c->m->name, c->m->sha256,
            c->m->training.present ? "" : ", uncalibrated: generic coefficients");
}

static int run_report(const struct run_ctx *c)
{
    FILE *out = c->opt.output ? fopen(c->opt.output, "w") : stderr;
    int r = 0;

    if (!out) {
        r = -errno;
        log_error("--output %s: %s", c->opt.output, strerror(-r));
        return r;
    }
    if (c->opt.json) {
        json_object *o = run_json(c);
        fprintf(out, "%s\n",
                json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                      JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    } else {
        run_print(c, out);
    }
    if (out != stderr && fclose(out) != 0) {
        r = -errno;
        log_error("--output %s: %s", c->opt.output, strerror(-r));
    }
    return r;
}

static void run_free(struct run_ctx *c)
{
    counters_close(c->cp);
    counters_delta_free(&c->d);
    events_free(c->es);
    rapl_close(c->power);
    model_free(c->m);
    free(c->rates);
    free(c->zone_delta);
    free(c->t.zone_j);
}

static int run_prepare(struct run_ctx *c)
{
    int r;

    if ((r = run_load_model(c)) < 0)
        return r;
    if ((r = rapl_open(&c->power)) < 0) {
        log_error("reading RAPL zones failed: %s", strerror(-r));
        return r;
    }
    c->rates = calloc(c->es->n, sizeof(double));
    c->zone_delta = calloc(c->power->n + 1, sizeof(double));
    c->t.zone_j = calloc(c->power->n + 1, sizeof(double));
    if (!c->rates || !c->zone_delta || !c->t.zone_j || counters_delta_new(c->es, &c->d) < 0)
        return -ENOMEM;
    return run_baseline(c);
}

int cmd_run(int argc, char **argv)
{
    struct run_ctx c = {0};
    int r, status;

    if (run_parse(argc, argv, &c.opt) < 0)
        return 2;
    if ((r = run_prepare(&c)) < 0) {
        run_free(&c);
        return 1;
    }
    /* Like time(1): a ^C is for the command; we stay to report. */
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    r = run_command(&c);
    status = WIFEXITED(c.status) ? WEXITSTATUS(c.status) : 128 + WTERMSIG(c.status);
    if (r < 0) {
        bool not_started = c.t.ticks == 0 && WIFEXITED(c.status) && WEXITSTATUS(c.status) == 127;
        if (r != -ENOENT && r != -EACCES && !not_started)
            log_error("measuring '%s' failed: %s", c.opt.cmd[0], strerror(-r));
        run_free(&c);
        /* The command's own status whenever it ran to its end. */
        return c.waited && !not_started ? status : 127;
    }
    if (run_report(&c) < 0 && status == 0)
        status = 1;
    run_free(&c);
    return status;
}
