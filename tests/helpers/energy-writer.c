/* energy-writer: drives the energy_uj files of a fake RAPL tree (made by
 * tests/helpers/fake-powercap) at a known power, so that a test has a power
 * meter whose truth it knows.
 *
 * Usage: energy-writer [OPTIONS] ZONE=POWER...
 *
 *   ZONE    a zone folder under --dir by its flat name: intel-rapl:0 (package
 *           0), intel-rapl:0:2 (its third sub-zone), ...
 *   POWER   W              constant power, in watts ("25", "12.5")
 *           IDLE+K*load    IDLE watts plus K watts per busy CPU, the busy
 *                          CPUs measured from /proc/stat over each update
 *                          (user+nice+system+irq+softirq; idle, iowait and
 *                          steal are not busy): "10+15*load"
 *           ...+E*event    plus E joules per software event counted over each
 *                          update (--event): "20+30*load+0.0005*event", a
 *                          node whose power also follows an event rate
 *
 *   --dir DIR       powercap folder (default /sys/class/powercap)
 *   --cpuacct DIR   "load" is the CPU time of the processes in this cgroup
 *                   (v1 cpuacct: DIR/cpuacct.usage, in ns) instead of the
 *                   whole host's from /proc/stat: a meter that sees only a
 *                   test's own processes on a shared machine
 *   --hz HZ         updates per second (default 200)
 *   --duration S    stop after S seconds (default: at SIGTERM or SIGINT)
 *   --cgroup DIR    "load" is the CPU time of the processes in this cgroup v2
 *                   folder (DIR/cpu.stat usage_usec) instead of the whole
 *                   machine's: on a shared machine, a node whose only load is
 *                   the test's own
 *   --truth FILE    ground truth, replaced atomically at every update, one
 *                   "KEY VALUE" per line:
 *                     t_ns NS          CLOCK_MONOTONIC of the last update
 *                     elapsed_s S      since the first update
 *                     busy_cpu_s S     busy CPU time seen in /proc/stat (or the cgroup)
 *                     events N         the --event's count since the start
 *                     total_j J        energy written, summed over the zones
 *                     ZONE J           energy written into that zone
 *                   It is first written (all zero) before the first update,
 *                   so a test can wait for it to know the writer is running:
 *                     awk '$1 == "total_j" { print $2 }' FILE
 *   --event NAME    the software event of the "*event" term, counted with
 *                   perf_event_open on every online CPU: in the
 *                   --event-cgroup, else in the --cgroup, else
 *                   system-wide. NAME: page-faults, context-switches or
 *                   cpu-migrations (default page-faults). Needs
 *                   perf_event_paranoid <= 0 or CAP_PERFMON.
 *   --event-cgroup DIR  count the --event in this cgroup (perf's cgroup
 *                   mode: a cgroup v2 folder, or one of a v1 perf_event
 *                   hierarchy), e.g. beside a v1 --cpuacct group
 *   --log FILE      appends "T_NS TOTAL_J" at the start (0 J, before the
 *                   truth file first appears) and at every update, after a
 *                   "#" header; tests/helpers/energy-truth reads it as the energy
 *                   the files held between any two CLOCK_MONOTONIC instants
 *                   (T_NS is taken just before the update's renames).
 *
 * Each zone's counter starts from the value already in its energy_uj and
 * wraps to 0 on reaching its max_energy_range_uj (no wrap when that is 0 or
 * missing).  The energy in the truth is exactly what the counters advanced
 * (whole microjoules), so a reader that reads at the same instants as the
 * updates must agree to the microjoule; one that reads in between lags by at
 * most one update (1/HZ s of power) at each end of its interval.
 *
 * The truth and the log live on an ordinary file system, where a write can
 * wait for the journal or for writeback for hundreds of milliseconds on a
 * busy disk (measured: 240 ms): a second thread writes them, so that the
 * energy_uj files keep advancing on time. The truth file may trail the
 * counters by that much while the disk is slow; at exit both are complete.
 *
 * energy_uj is replaced by rename(2), so a reader sees either the old or the
 * new value, never a torn one: readers must reopen the file for every read,
 * as libpowercap's powercap_sysfs_* functions do (a descriptor kept open
 * keeps reading the old file).  The writer's own CPU time is real load and
 * counts in the "*load" mode.
 *
 * Exit status: 0 when stopped by --duration, SIGTERM or SIGINT; 1 when a
 * file cannot be read or written; 2 for bad arguments. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_ZONES 32
#define MAX_CPUS 1024

typedef struct writer_zone {
    const char *id;
    double idle_w;       /* constant part */
    double per_cpu_w;    /* watts per busy CPU */
    double per_event_j;  /* joules per --event */
    uint64_t range_uj;   /* wrap modulus; UINT64_MAX when none */
    uint64_t start_uj;   /* counter value found at start */
    uint64_t written_uj; /* energy added so far (whole uJ) */
    double frac_uj;      /* the fraction not yet written */
    mode_t mode;         /* of the energy_uj file, kept on replacement */
    char path[4096];     /* DIR/ZONE/energy_uj */
    char tmp[4096];      /* DIR/ZONE/.energy_uj.tmp */
} writer_zone;

/* What the update loop hands to the output thread: the latest truth text
 * (only the newest matters) and the log lines not yet written. */
typedef struct writer_out {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    bool started, done, truth_new;
    char truth_text[8192];
    char *log_buf; /* log lines not yet written */
    size_t log_len, log_cap;
    int error; /* the first write error, as a negative errno */
} writer_out;

typedef struct writer {
    const char *dir, *truth, *log, *cgroup, *cpuacct;
    writer_out out;
    double hz, duration;
    writer_zone zone[MAX_ZONES];
    size_t n;
    FILE *logf;
    uint64_t t0_ns, last_ns;
    double busy_cpu_s;
    double last_busy;         /* busy CPU seconds (/proc/stat or the cgroup) at the last update */
    const char *event;        /* --event */
    const char *event_cgroup; /* --event-cgroup, or --cgroup */
    int event_fd[MAX_CPUS];   /* one counter per online CPU; n_event_fd of them */
    size_t n_event_fd;
    uint64_t events, last_events; /* counted since the start, at the last update */
} writer;

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "energy-writer: %s: '%s' (see the top of tests/helpers/energy-writer.c)\n",
            what, arg);
    return 2;
}

/* "25", "10+15*load", "10+15*load+0.001*event" (terms in any order, each
 * at most once). */
static int parse_power(const char *s, writer_zone *z)
{
    bool load = false, event = false;
    char *end;

    z->idle_w = strtod(s, &end);
    z->per_cpu_w = z->per_event_j = 0;
    if (end == s || !isfinite(z->idle_w) || z->idle_w < 0)
        return -EINVAL;
    while (*end == '+') {
        s = end + 1;
        double k = strtod(s, &end);
        if (end == s || !isfinite(k) || k < 0)
            return -EINVAL;
        if (strncmp(end, "*load", 5) == 0 && !load) {
            load = true, z->per_cpu_w = k, end += 5;
        } else if (strncmp(end, "*event", 6) == 0 && !event) {
            event = true, z->per_event_j = k, end += 6;
        } else
            return -EINVAL;
    }
    return *end == '\0' ? 0 : -EINVAL;
}

/* Opens the --event's counter on every online CPU, in the --cgroup or
 * system-wide. */
static int event_open(writer *w)
{
    static const struct {
        const char *name;
        uint64_t config;
    } names[] = {{"page-faults", PERF_COUNT_SW_PAGE_FAULTS},
                 {"context-switches", PERF_COUNT_SW_CONTEXT_SWITCHES},
                 {"cpu-migrations", PERF_COUNT_SW_CPU_MIGRATIONS}};
    struct perf_event_attr attr = {.type = PERF_TYPE_SOFTWARE, .size = sizeof(attr)};
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int cg = -1;
    size_t k;

    for (k = 0; k < sizeof(names) / sizeof(names[0]); k++)
        if (strcmp(names[k].name, w->event) == 0)
            break;
    if (k == sizeof(names) / sizeof(names[0])) {
        fprintf(stderr,
                "energy-writer: unknown --event '%s' (page-faults, context-switches, "
                "cpu-migrations)\n",
                w->event);
        return 2;
    }
    attr.config = names[k].config;
    if (w->event_cgroup && (cg = open(w->event_cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        fprintf(stderr, "energy-writer: %s: %s\n", w->event_cgroup, strerror(errno));
        return 1;
    }
    for (long cpu = 0; cpu < ncpu && cpu < MAX_CPUS; cpu++) {
        int fd = (int)syscall(SYS_perf_event_open, &attr, cg >= 0 ? cg : -1, (int)cpu, -1,
                              cg >= 0 ? PERF_FLAG_PID_CGROUP | PERF_FLAG_FD_CLOEXEC
                                      : PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {
            fprintf(stderr, "energy-writer: perf_event_open of %s on CPU %ld%s%s: %s\n", w->event,
                    cpu, cg >= 0 ? " in " : "", cg >= 0 ? w->event_cgroup : "", strerror(errno));
            if (cg >= 0)
                close(cg);
            return 1;
        }
        w->event_fd[w->n_event_fd++] = fd;
    }
    if (cg >= 0)
        close(cg);
    return 0;
}

/* The --event's count since the counters opened. */
static int event_read(writer *w, uint64_t *count)
{
    uint64_t sum = 0, v;

    for (size_t i = 0; i < w->n_event_fd; i++) {
        if (read(w->event_fd[i], &v, sizeof(v)) != (ssize_t)sizeof(v))
            return -EIO;
        sum += v;
    }
    *count = sum;
    return 0;
}

static int read_u64_file(const char *path, uint64_t *val)
{
    char buf[64], *end;
    ssize_t len;
    int fd;

    fd = open(path, O_RDONLY);
    if (fd < 0)
        return -errno;
    len = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (len < 0)
        return -errno;
    buf[len] = '\0';
    errno = 0;
    *val = strtoull(buf, &end, 10);
    if (end == buf || errno != 0)
        return -EINVAL;
    return 0;
}

/* CPU time of the cgroup's processes so far, in seconds. */
static int read_cpuacct(const char *dir, double *busy_s)
{
    char path[4096];
    uint64_t ns = 0;
    int r;

    snprintf(path, sizeof(path), "%s/cpuacct.usage", dir);
    if ((r = read_u64_file(path, &ns)) < 0)
        return r;
    *busy_s = (double)ns * 1e-9;
    return 0;
}

static int read_busy_ticks(unsigned long long *busy);

/* CPU seconds used by the cgroup at `dir`, from its cpu.stat. */
static int read_cgroup_busy(const char *dir, double *busy)
{
    char path[4096], key[64];
    unsigned long long v;
    int found = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/cpu.stat", dir);
    if (!(f = fopen(path, "r")))
        return -errno;
    while (!found && fscanf(f, "%63s %llu", key, &v) == 2)
        found = strcmp(key, "usage_usec") == 0;
    fclose(f);
    if (!found)
        return -EINVAL;
    *busy = (double)v / 1e6;
    return 0;
}

/* Busy CPU seconds of all CPUs from the first line of /proc/stat, or of the
 * --cpuacct (v1) or --cgroup (v2) group. */
static int read_busy(const writer *w, double *busy_s)
{
    unsigned long long busy;
    int r;

    if (w->cpuacct)
        return read_cpuacct(w->cpuacct, busy_s);
    if (w->cgroup)
        return read_cgroup_busy(w->cgroup, busy_s);
    if ((r = read_busy_ticks(&busy)) < 0)
        return r;
    *busy_s = (double)busy / (double)sysconf(_SC_CLK_TCK);
    return 0;
}

/* Busy ticks of all CPUs from the first line of /proc/stat. */
static int read_busy_ticks(unsigned long long *busy)
{
    unsigned long long user, nice, system, idle, iowait, irq, softirq;
    char buf[512];
    ssize_t len;
    int fd;

    fd = open("/proc/stat", O_RDONLY);
    if (fd < 0)
        return -errno;
    len = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (len < 0)
        return -errno;
    buf[len] = '\0';
    if (sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &system, &idle, &iowait,
               &irq, &softirq) != 7)
        return -EINVAL;
    *busy = user + nice + system + irq + softirq;
    return 0;
}

static int zone_setup(writer *w, writer_zone *z)
{
    char path[4096];
    struct stat st;
    int r;

    snprintf(z->path, sizeof(z->path), "%s/%s/energy_uj", w->dir, z->id);
    snprintf(z->tmp, sizeof(z->tmp), "%s/%s/.energy_uj.tmp", w->dir, z->id);
    r = stat(z->path, &st) < 0 ? -errno : read_u64_file(z->path, &z->start_uj);
    if (r < 0) {
        fprintf(stderr, "energy-writer: %s: %s\n", z->path, strerror(-r));
        return 1;
    }
    z->mode = st.st_mode & 07777;
    snprintf(path, sizeof(path), "%s/%s/max_energy_range_uj", w->dir, z->id);
    if (read_u64_file(path, &z->range_uj) < 0 || z->range_uj == 0)
        z->range_uj = UINT64_MAX;
    if (z->range_uj != UINT64_MAX)
        z->start_uj %= z->range_uj;
    return 0;
}

/* Replaces the file at `path` with `text`, atomically, with mode `mode`. */
static int replace_file(const char *path, const char *tmp, const char *text, mode_t mode)
{
    size_t len = strlen(text);
    int fd;

    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -errno;
    if (write(fd, text, len) != (ssize_t)len || fchmod(fd, mode) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    close(fd);
    if (rename(tmp, path) < 0)
        return -errno;
    return 0;
}

static int write_counter(writer_zone *z)
{
    char text[32];
    uint64_t v;

    if (z->range_uj == UINT64_MAX)
        v = z->start_uj + z->written_uj;
    else
        v = (z->start_uj + z->written_uj % z->range_uj) % z->range_uj;
    snprintf(text, sizeof(text), "%" PRIu64 "\n", v);
    return replace_file(z->path, z->tmp, text, z->mode);
}

static double total_j(const writer *w)
{
    double sum = 0;

    for (size_t i = 0; i < w->n; i++)
        sum += (double)w->zone[i].written_uj * 1e-6;
    return sum;
}

/* The truth file's text for the latest update. */
static void format_truth(const writer *w, char *text, size_t size)
{
    size_t used = (size_t)snprintf(
        text, size,
        "t_ns %" PRIu64 "\nelapsed_s %.9f\nbusy_cpu_s %.6f\nevents %" PRIu64 "\ntotal_j %.6f\n",
        w->last_ns, (double)(w->last_ns - w->t0_ns) * 1e-9, w->busy_cpu_s, w->events, total_j(w));
    for (size_t i = 0; i < w->n && used < size; i++)
        used += (size_t)snprintf(text + used, size - used, "%s %.6f\n", w->zone[i].id,
                                 (double)w->zone[i].written_uj * 1e-6);
}

static int write_truth_text(const char *truth, const char *text)
{
    char tmp[4096];

    snprintf(tmp, sizeof(tmp), "%s.tmp", truth);
    return replace_file(truth, tmp, text, 0644);
}

/* The output thread: writes what the updates queued, until told to stop
 * and nothing is left. */
static void *output_main(void *arg)
{
    writer *w = arg;
    writer_out *o = &w->out;
    char text[sizeof(o->truth_text)];
    char *buf = NULL;
    size_t cap = 0;

    pthread_mutex_lock(&o->lock);
    for (;;) {
        while (!o->done && !o->truth_new && o->log_len == 0)
            pthread_cond_wait(&o->wake, &o->lock);
        bool truth_new = o->truth_new, last = o->done;
        size_t len = o->log_len;
        if (truth_new)
            memcpy(text, o->truth_text, sizeof(text));
        if (len > cap) {
            char *b = realloc(buf, len);
            if (!b) {
                o->error = o->error ? o->error : -ENOMEM;
                break;
            }
            buf = b, cap = len;
        }
        if (len)
            memcpy(buf, o->log_buf, len);
        o->truth_new = false;
        o->log_len = 0;
        pthread_mutex_unlock(&o->lock);

        int r = 0;
        if (len && fwrite(buf, 1, len, w->logf) != len)
            r = -EIO;
        if (r == 0 && len && fflush(w->logf) != 0)
            r = -errno;
        if (r == 0 && truth_new)
            r = write_truth_text(w->truth, text);

        pthread_mutex_lock(&o->lock);
        if (r < 0 && !o->error)
            o->error = r;
        if (last && !o->truth_new && o->log_len == 0)
            break;
    }
    pthread_mutex_unlock(&o->lock);
    free(buf);
    return NULL;
}

/* Queues this update's truth and log line for the output thread; returns
 * the output thread's first error, if any. */
static int queue_output(writer *w, uint64_t t)
{
    writer_out *o = &w->out;
    char line[64];
    int n = w->logf ? snprintf(line, sizeof(line), "%" PRIu64 " %.6f\n", t, total_j(w)) : 0;
    int r = 0;

    pthread_mutex_lock(&o->lock);
    if (w->truth) {
        format_truth(w, o->truth_text, sizeof(o->truth_text));
        o->truth_new = true;
    }
    if (n > 0) {
        if (o->log_len + (size_t)n > o->log_cap) {
            size_t cap = o->log_cap ? 2 * o->log_cap : 65536;
            char *b = cap >= o->log_len + (size_t)n ? realloc(o->log_buf, cap) : NULL;
            if (!b)
                r = -ENOMEM;
            else
                o->log_buf = b, o->log_cap = cap;
        }
        if (r == 0) {
            memcpy(o->log_buf + o->log_len, line, (size_t)n);
            o->log_len += (size_t)n;
        }
    }
    r = r ? r : o->error;
    pthread_cond_signal(&o->wake);
    pthread_mutex_unlock(&o->lock);
    return r;
}

static int output_start(writer *w)
{
    writer_out *o = &w->out;
    int r;

    pthread_mutex_init(&o->lock, NULL);
    pthread_cond_init(&o->wake, NULL);
    if (!w->truth && !w->logf)
        return 0;
    /* Signals stay with the update loop, whose sleep they cut short. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    r = pthread_create(&o->thread, NULL, output_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r != 0)
        return -r;
    o->started = true;
    return 0;
}

/* Writes out what is left and stops the output thread. */
static int output_stop(writer *w)
{
    writer_out *o = &w->out;

    if (!o->started)
        return 0;
    pthread_mutex_lock(&o->lock);
    o->done = true;
    pthread_cond_signal(&o->wake);
    pthread_mutex_unlock(&o->lock);
    pthread_join(o->thread, NULL);
    o->started = false;
    free(o->log_buf);
    return o->error;
}

/* Advances every zone by its power over the time since the last update. */
static int update(writer *w)
{
    uint64_t t = now_ns();
    double dt = (double)(t - w->last_ns) * 1e-9;
    double busy = w->last_busy, busy_s;
    int r;

    if ((r = read_busy(w, &busy)) < 0) {
        fprintf(stderr, "energy-writer: %s: %s\n",
                w->cpuacct  ? w->cpuacct
                : w->cgroup ? w->cgroup
                            : "/proc/stat",
                strerror(-r));
        return 1;
    }
    busy_s = busy - w->last_busy;
    w->last_busy = busy;
    uint64_t count = w->last_events;
    if (w->n_event_fd && event_read(w, &count) < 0) {
        fprintf(stderr, "energy-writer: cannot read the %s counters\n", w->event);
        return 1;
    }
    double events = (double)(count - w->last_events);
    w->events += count - w->last_events;
    w->last_events = count;
    w->busy_cpu_s += busy_s;
    w->last_ns = t;

    for (size_t i = 0; i < w->n; i++) {
        writer_zone *z = &w->zone[i];
        double uj =
            z->frac_uj + (z->idle_w * dt + z->per_cpu_w * busy_s + z->per_event_j * events) * 1e6;
        double whole = floor(uj);

        z->written_uj += (uint64_t)whole;
        z->frac_uj = uj - whole;
        if ((r = write_counter(z)) < 0) {
            fprintf(stderr, "energy-writer: %s: %s\n", z->path, strerror(-r));
            return 1;
        }
    }
    if ((r = queue_output(w, t)) < 0) {
        fprintf(stderr, "energy-writer: %s: %s\n", w->truth ? w->truth : w->log, strerror(-r));
        return 1;
    }
    return 0;
}

static int parse_args(writer *w, int argc, char **argv)
{
    w->dir = "/sys/class/powercap";
    w->hz = 200;
    w->duration = INFINITY;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        char *eq, *end;

        if (i + 1 < argc && (strcmp(a, "--hz") == 0 || strcmp(a, "--duration") == 0)) {
            double v = strtod(argv[++i], &end);
            if (end == argv[i] || *end != '\0' || !isfinite(v) || v <= 0)
                return usage_error(a[2] == 'h' ? "bad --hz" : "bad --duration", argv[i]);
            *(a[2] == 'h' ? &w->hz : &w->duration) = v;
        } else if (i + 1 < argc && strcmp(a, "--dir") == 0) {
            w->dir = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--cpuacct") == 0) {
            w->cpuacct = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--truth") == 0) {
            w->truth = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--cgroup") == 0) {
            w->cgroup = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--event") == 0) {
            w->event = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--event-cgroup") == 0) {
            w->event_cgroup = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--log") == 0) {
            w->log = argv[++i];
        } else if (a[0] != '-' && (eq = strchr(a, '=')) != NULL && eq != a) {
            if (w->n == MAX_ZONES)
                return usage_error("too many zones", a);
            *eq = '\0';
            w->zone[w->n].id = a;
            if (parse_power(eq + 1, &w->zone[w->n]) < 0)
                return usage_error("bad power (W, IDLE+K*load, IDLE+K*load+E*event)", eq + 1);
            w->n++;
        } else {
            return usage_error("unknown argument", a);
        }
    }
    if (w->n == 0)
        return usage_error("no ZONE=POWER given", "");
    bool per_event = false;
    for (size_t i = 0; i < w->n; i++)
        per_event |= w->zone[i].per_event_j > 0;
    if (per_event && !w->event)
        w->event = "page-faults";
    if (w->event && !per_event)
        return usage_error("--event without a zone's '*event' term", w->event);
    if (w->event_cgroup && !per_event)
        return usage_error("--event-cgroup without a zone's '*event' term", w->event_cgroup);
    if (!w->event_cgroup)
        w->event_cgroup = w->cgroup;
    return 0;
}

static int run(writer *w)
{
    uint64_t period = (uint64_t)(1e9 / w->hz), next;
    struct timespec ts;
    int r;

    for (size_t i = 0; i < w->n; i++)
        if ((r = zone_setup(w, &w->zone[i])) != 0)
            return r;
    if (w->event && (r = event_open(w)) != 0)
        return r;
    if (w->event && event_read(w, &w->last_events) < 0) {
        fprintf(stderr, "energy-writer: cannot read the %s counters\n", w->event);
        return 1;
    }
    if (w->log) {
        w->logf = fopen(w->log, "a");
        if (!w->logf) {
            fprintf(stderr, "energy-writer: %s: %s\n", w->log, strerror(errno));
            return 1;
        }
        setvbuf(w->logf, NULL, _IOLBF, 0);
        fprintf(w->logf, "# t_ns total_j\n");
    }
    if (read_busy(w, &w->last_busy) < 0) {
        fprintf(stderr, "energy-writer: %s: cannot read the busy CPU time\n",
                w->cpuacct  ? w->cpuacct
                : w->cgroup ? w->cgroup
                            : "/proc/stat");
        return 1;
    }
    w->t0_ns = w->last_ns = next = now_ns();
    /* the starting point, so that the log covers everything after the
     * truth file appears */
    if (w->logf)
        fprintf(w->logf, "%" PRIu64 " 0.000000\n", w->t0_ns);
    if (w->truth) {
        char text[sizeof(w->out.truth_text)];
        format_truth(w, text, sizeof(text));
        if ((r = write_truth_text(w->truth, text)) < 0) {
            fprintf(stderr, "energy-writer: %s: %s\n", w->truth, strerror(-r));
            return 1;
        }
    }
    if ((r = output_start(w)) < 0) {
        fprintf(stderr, "energy-writer: cannot start the output thread: %s\n", strerror(-r));
        return 1;
    }
    while (!stop_requested && (double)(w->last_ns - w->t0_ns) * 1e-9 < w->duration) {
        next += period;
        ts.tv_sec = (time_t)(next / 1000000000u);
        ts.tv_nsec = (long)(next % 1000000000u);
        /* EINTR means a stop was asked: the final update below still runs */
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        if ((r = update(w)) != 0)
            break;
    }
    if (r == 0)
        r = update(w);
    int e = output_stop(w);
    if (e < 0 && r == 0) {
        fprintf(stderr, "energy-writer: %s: %s\n", w->truth ? w->truth : w->log, strerror(-e));
        r = 1;
    }
    return r;
}

int main(int argc, char **argv)
{
    static writer w;
    struct sigaction sa = {.sa_handler = on_signal};
    int r;

    if ((r = parse_args(&w, argc, argv)) != 0)
        return r;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    r = run(&w);
    if (w.logf)
        fclose(w.logf);
    for (size_t i = 0; i < w.n_event_fd; i++)
        close(w.event_fd[i]);
    return r;
}
