/* wattprof run: `perf stat` for joules.
 *
 * Runs a command with its counters opened before exec (enable_on_exec,
 * inherit without inherit_thread, so its threads and child processes all
 * count into one set of groups, each once), samples counters and RAPL at a
 * fixed interval from a timerfd with absolute deadlines, applies the model
 * tick by tick exactly as the daemon does, and prints what the command
 * cost. The command's exit status becomes ours. With -r N the command runs
 * N times and each figure is reported as a mean with its standard
 * deviation; -x SEP prints one line per figure for scripts. */
#include "commands.h"
#include "model/model.h"
#include "run.h"
#include "sample/sample.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
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

static void run_usage(FILE *out)
{
    fprintf(out, "usage: wattprof run [--model FILE] [--interval MS] [-r N] [-x SEP | --json]\n"
                 "                    [--output FILE] [--socket PATH] [--db FILE]\n"
                 "                    [--meter-cgroup DIR] -- CMD [ARGS]\n"
                 "Runs CMD and reports the energy it used, with its threads and children.\n"
                 "The report goes to stderr (or FILE), leaving CMD's stdout alone.\n\n"
                 "options:\n"
                 "  --model FILE     the power model (default: the built-in cputime model)\n"
                 "  --interval MS    sampling interval (default 20)\n"
                 "  -r, --repeat N   run CMD N times; report means and standard deviations\n"
                 "                   (stops at the first run that exits non-zero)\n"
                 "  -x, --field-separator SEP\n"
                 "                   one figure a line: value, unit, name, deviation %%,\n"
                 "                   counted %% (events), split by SEP\n"
                 "  --json           the report as JSON\n"
                 "  --output FILE    write the report to FILE\n"
                 "  --socket PATH    the daemon whose calibration (idle power) to use\n"
                 "                   (default: $WATTPROF_SOCKET, else the daemon's default)\n"
                 "  --db FILE        without a daemon, the database holding the node's\n"
                 "                   stored calibration (default /var/lib/wattprof/wattprof.db)\n"
                 "  --meter-cgroup DIR\n"
                 "                   the meter sees only this cgroup's CPU (test rigs)\n\n"
                 "exit status: CMD's own (128 + the signal when a signal ended it); 127 when\n"
                 "CMD could not be started; 2 for a bad command line; 1 when measuring failed.\n");
}

static int run_path_arg(const char *opt, const char *arg, const char **out)
{
    if (!*arg) {
        log_error("--%s '': expected a path", opt);
        return -EINVAL;
    }
    *out = arg;
    return 0;
}

static int run_parse(int argc, char **argv, struct run_opts *o)
{
    static const struct option longopts[] = {{"model", required_argument, NULL, 'm'},
                                             {"interval", required_argument, NULL, 'i'},
                                             {"json", no_argument, NULL, 'j'},
                                             {"output", required_argument, NULL, 'o'},
                                             {"repeat", required_argument, NULL, 'r'},
                                             {"field-separator", required_argument, NULL, 'x'},
                                             {"socket", required_argument, NULL, 'S'},
                                             {"db", required_argument, NULL, 'd'},
                                             {"meter-cgroup", required_argument, NULL, 'g'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int c;

    o->interval_ms = 20;
    o->repeat = 1;
    o->db = "/var/lib/wattprof/wattprof.db";
    optind = 1;
    opterr = 0; /* our own one-line messages */
    while ((c = getopt_long(argc, argv, "+m:i:jo:r:x:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
            if (util_parse_long(optarg, &o->repeat) < 0 || o->repeat < 1 || o->repeat > 100000) {
                log_error("-r '%s': expected a number of runs between 1 and 100000", optarg);
                return -EINVAL;
            }
            break;
        case 'x':
            if (!*optarg) {
                log_error("-x: the separator is empty");
                return -EINVAL;
            }
            o->sep = optarg;
            break;
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
        case 'S':
            if (run_path_arg("socket", optarg, &o->socket) < 0)
                return -EINVAL;
            break;
        case 'd':
            if (run_path_arg("db", optarg, &o->db) < 0)
                return -EINVAL;
            break;
        case 'g':
            if (run_path_arg("meter-cgroup", optarg, &o->meter_cgroup) < 0)
                return -EINVAL;
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
            log_error("unknown option or missing value '%s' (see wattprof run --help)",
                      argv[optind - 1]);
            return -EINVAL;
        }
    }
    if (o->sep && o->json) {
        log_error("-x and --json contradict each other: pick one output format");
        return -EINVAL;
    }
    if (optind >= argc) {
        log_error("no command given (usage: wattprof run [OPTIONS] -- CMD [ARGS])");
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
    attrib_tick tick = {.dt_s = dt, .idle_w = c->idle_w, .dynamic_scale = c->scale};
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
    tick.untracked_dynamic_w = run_host_untracked_w(c, dt);
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

/* Idle from the node's calibration (run_calib.c); failing that, with RAPL
 * present and an uncalibrated model, the host measured for a moment before
 * the command starts (idle only if the node is idle then). */
static int run_baseline(struct run_ctx *c)
{
    if (run_calib_choose(c) == 0)
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
    c->idle_source = "measured before the run: no calibration of this node";
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
    run_host_start(c);
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

static void run_free(struct run_ctx *c)
{
    counters_close(c->cp);
    counters_delta_free(&c->d);
    events_free(c->es);
    rapl_close(c->power);
    model_free(c->m);
    free(c->rates);
    free(c->urates);
    free(c->zone_delta);
    free(c->t.zone_j);
    free(c->st.sum);
    free(c->st.sumsq);
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
    if (!c->rates || !c->zone_delta || !c->t.zone_j || counters_delta_new(c->es, &c->d) < 0 ||
        run_stats_init(c) < 0)
        return -ENOMEM;
    if ((r = run_host_open(c)) < 0)
        return r;
    return run_baseline(c);
}

/* Before each of -r's runs: a fresh set of counters and energy sums (the
 * gaps, read errors and unattributable intervals, add up over the runs). */
static void run_reset(struct run_ctx *c)
{
    counters_close(c->cp);
    c->cp = NULL;
    c->t.standalone_j = c->t.attributed_j = c->t.host_j = c->t.modeled_host_j = 0;
    c->t.idle_j = c->t.unattributed_j = c->t.class_stat = 0;
    c->t.ticks = 0;
    c->t.untracked_cpu_s = 0;
    memset(c->t.zone_j, 0, (c->power->n + 1) * sizeof(double));
    c->waited = false;
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
    for (long k = 0; k < c.opt.repeat; k++) {
        run_reset(&c);
        r = run_command(&c);
        status = WIFEXITED(c.status) ? WEXITSTATUS(c.status) : 128 + WTERMSIG(c.status);
        if (r < 0)
            break;
        run_stats_add(&c);
        if (status != 0)
            break; /* the report covers the runs so far; the status is this one's */
    }
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
