/* sample: what the hardware and the kernel say, turned into numbers.
 *
 * Three parts, each usable alone:
 *   events   - event names encoded by libpfm4 into perf_event_attr, and split
 *              into groups the PMU can schedule together;
 *   counters - per-task counter groups (perf_event_open, PERF_FORMAT_GROUP
 *              with time enabled/running), read in one read() per group,
 *              with deltas scaled for multiplexing;
 *   rapl     - every RAPL zone through libpowercap, with deltas that carry
 *              across the counter wrap.
 *
 * Nothing here allocates on the read paths: counters_read and rapl_read are
 * called 50 times a second for every tracked process.  Functions return 0 or
 * a negative errno; those that can fail because of the machine fill `err`
 * (UTIL_ERRLEN bytes) with one line naming the event or zone and the reason. */
#ifndef WATTPROF_SAMPLE_H
#define WATTPROF_SAMPLE_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- Events (events.c) --------------------------------------------------- */

typedef struct sample_event {
    char *name;                  /* as the user wrote it ("cycles", "perf::TASK-CLOCK") */
    char *canonical;             /* libpfm4's fully qualified name */
    struct perf_event_attr attr; /* ready for perf_event_open, minus read_format/flags */
    bool software;               /* counted by the kernel, needs no PMU counter */
    unsigned group;              /* index of the group this event is scheduled in */
} sample_event;

typedef struct sample_eventset {
    sample_event *ev; /* in the order given */
    size_t n;
    unsigned n_groups;
    unsigned hw_counters; /* generic counters of the core PMU used to size groups */
    bool user_only;       /* kernel-mode counts were refused (perf_event_paranoid) */
} sample_eventset;

/* Encodes `names` at user+kernel privilege level. An unknown name fails with
 * -ENOENT and `err` naming it. Hardware events are packed into groups of at
 * most hw_counters events; software events share their own group. */
int events_encode(const char *const *names, size_t n, sample_eventset **out, char *err,
                  size_t errlen);
void events_free(sample_eventset *es);
/* Index of the event named `name` (as given), or -1. */
int events_find(const sample_eventset *es, const char *name);
/* Checks that every event opens on this machine for the calling process;
 * on failure returns the kernel's -errno with `err` naming every event that
 * did not open and why. When the kernel refuses kernel-mode counting to an
 * unprivileged caller (perf_event_paranoid >= 2), the set falls back to user
 * mode only and says so in es->user_only. */
int events_probe(sample_eventset *es, char *err, size_t errlen);

/* ---- Counters (counters.c) ----------------------------------------------- */

enum {
    /* Count the task's child processes too (inherit=1 without
     * inherit_thread): what `wattprof run` wants for a command tree. */
    COUNTERS_CHILDREN = 1u << 0,
    /* Start disabled; enable when the task calls exec (for fork+exec). */
    COUNTERS_ENABLE_ON_EXEC = 1u << 1,
    /* Skip the read() while no thread of the process has been on a CPU
     * since the previous read (its delta is then exactly zero). Costs one
     * perf ring buffer (8 KiB of locked memory) and one fd per thread; when
     * they cannot be had the process is read every time and
     * counters_skip_error says why. Not with COUNTERS_CHILDREN. */
    COUNTERS_SKIP_IDLE = 1u << 2,
};

typedef struct counters_proc counters_proc;

/* Opens the event set on process `pid`. Without COUNTERS_CHILDREN the
 * events use inherit + inherit_thread: the process's future threads are
 * counted, its children are not; one set of groups is opened per thread that
 * already exists (from /proc/PID/task). -EMFILE when the counters would
 * come within 256 descriptors of the limit of open files: those are kept
 * for the database and the clients. */
int counters_open(const sample_eventset *es, pid_t pid, unsigned flags, counters_proc **out,
                  char *err, size_t errlen);
void counters_close(counters_proc *p);

/* One interval of one process, per event of the set. */
typedef struct counters_delta {
    double *scaled;      /* delta scaled by enabled/running (estimated true count) */
    double *ratio;       /* running/enabled over the interval, 1 = never multiplexed,
                            0 = not counted at all in the interval */
    uint64_t enabled_ns; /* time enabled over the interval (leader of group 0) */
    bool skipped;        /* COUNTERS_SKIP_IDLE avoided the read(): nothing ran */
} counters_delta;

/* Allocates a delta for `es` (free with counters_delta_free). */
int counters_delta_new(const sample_eventset *es, counters_delta *d);
void counters_delta_free(counters_delta *d);

/* Reads every group (one read() each) and stores the change since the
 * previous read (or since opening) into `d`. Works after the process has
 * exited too: the kernel keeps the final counts until the events close, so
 * an exiting process's last partial interval is read before closing. */
int counters_read(counters_proc *p, counters_delta *d);

/* For a caller that reads many processes every tick and wants to touch as
 * little memory as possible for those that slept: after a counters_read,
 * returns a word of shared memory and sets *value to its content then; for
 * as long as an atomic load of the word still gives *value, the next
 * counters_read would be skipped with a zero delta and change nothing, so
 * the caller may leave it out (and take the word again after the next read
 * it does make). NULL when there is no such word: no COUNTERS_SKIP_IDLE
 * watch, several threads, or a thread on the CPU or not yet known off it. */
const __u64 *counters_quiet_word(const counters_proc *p, __u64 *value);

/* The pure core of counters_read: adds one group's change between two raw
 * PERF_FORMAT_GROUP readings {nr, time_enabled, time_running, value[nr]} to
 * per-event sums. Member m counts event[m]; its delta is scaled by
 * enabled/running (0 when the group never ran), and enabled/running are
 * added per event so ratios can be formed over any span. */
void counters_scale_group(const uint64_t *prev, const uint64_t *now, const size_t *event,
                          double *scaled, uint64_t *enabled, uint64_t *running);

/* False once the process has exited (a pidfd, so a reused pid is not
 * mistaken for it). */
bool counters_alive(const counters_proc *p);

/* 0 when COUNTERS_SKIP_IDLE is in effect for `p`; otherwise the -errno of
 * why every counters_read does a read() (-EPERM: the locked-memory budget
 * for perf ring buffers is spent), or 0 when the flag was not given. */
int counters_skip_error(const counters_proc *p);

/* Totals since opening: scaled counts and the overall running/enabled ratio. */
void counters_totals(const counters_proc *p, const double **scaled, const double **ratio);

/* ---- RAPL (rapl.c) ------------------------------------------------------- */

typedef struct rapl_zone {
    char name[64];    /* sysfs name: "package-0", "core", "uncore", "dram", "psys" */
    char domain[16];  /* name without the "-N" suffix: "package", "core", ... */
    char id[32];      /* sysfs id, e.g. "intel-rapl:0:1" */
    unsigned package; /* top-level zone index this zone belongs to */
    uint32_t path[2]; /* zone indexes for libpowercap */
    uint32_t depth;
    uint64_t max_energy_range_uj;
    uint64_t last_uj; /* reading at the previous rapl_read */
} rapl_zone;

typedef struct rapl {
    rapl_zone *zone;
    size_t n;        /* 0 when the machine has no RAPL */
    char state[256]; /* one line for people: "4 zones", or why there are none */
} rapl;

/* Finds every zone of every package. A machine without RAPL (or without
 * permission to read energy_uj) is not an error: it returns 0 with n = 0 and
 * the reason in state. */
int rapl_open(rapl **out);
void rapl_close(rapl *r);

/* Reads all zones; delta_j[i] gets the energy of zone i in joules since the
 * previous call (or rapl_open), handling a wrap at max_energy_range_uj. */
int rapl_read(rapl *r, double *delta_j);

/* Sum of delta_j over the zones whose domain is one of `domains`. core and
 * uncore are parts of package, so when package is listed they are skipped
 * and nothing is counted twice (dram is outside package even though sysfs
 * nests it there). */
double rapl_sum_domains(const rapl *r, const double *delta_j, const char *const *domains,
                        size_t n_domains);

/* Energy delta of a counter that went from `prev` to `now` and wraps at
 * `range` (pure; exposed for tests). */
uint64_t rapl_wrap_delta(uint64_t prev, uint64_t now, uint64_t range);

/* ---- Processes (procs.c) ------------------------------------------------
 * Which processes exist, who they are, and when they come and go. A pid is
 * reused, so a process's identity is (boot id, pid, start time). */

#define PROCS_JOB_MAX 64
/* A command line longer than this many bytes is cut, ending in "...": up to
 * 2 MiB per process is anyone's to write, and the daemon keeps, stores and
 * lists it for every process. */
#define PROCS_CMDLINE_MAX 4096

typedef struct procs_info {
    pid_t pid, ppid;
    uint64_t start_ticks; /* field 22 of /proc/PID/stat, clock ticks since boot */
    uid_t uid;            /* real uid */
    char comm[17];
    char *cmdline; /* malloc'd, arguments joined by spaces ("" for kernel threads),
                    * at most PROCS_CMDLINE_MAX bytes */
    char *cgroup;  /* malloc'd, unified-hierarchy path ("/system.slice/x.service") */
    bool kernel_thread;
    /* A batch job id the cgroup path does not show (from the environment):
     * carried by records only, "" when none; procs_read_info leaves it. */
    char job[PROCS_JOB_MAX];
} procs_info;

/* Reads /proc/PID/{stat,status,cmdline,cgroup}. -ESRCH when the process is
 * gone (also when it vanishes half-way). */
int procs_read_info(pid_t pid, procs_info *out);
/* Reads /proc/PID/stat only (pid, ppid, start_ticks, comm, kernel_thread;
 * no strings to clear): a cheap first look before procs_read_info. */
int procs_read_stat(pid_t pid, procs_info *out);
void procs_info_clear(procs_info *info);
/* Every process (thread-group leader) now in /proc, malloc'd. */
int procs_list(pid_t **pids, size_t *n);
/* The kernel's boot id (/proc/sys/kernel/random/boot_id), 36 chars + NUL. */
int procs_boot_id(char out[37]);

typedef enum procs_event_kind {
    PROCS_EV_FORK, /* a new process (not a new thread) */
    PROCS_EV_EXEC,
    PROCS_EV_EXIT, /* the whole process (thread-group leader) exited */
    PROCS_EV_COMM, /* the process's leader renamed itself (prctl PR_SET_NAME) */
} procs_event_kind;

typedef struct procs_event {
    procs_event_kind kind;
    pid_t pid;
    pid_t parent;  /* PROCS_EV_FORK: the parent process */
    int exit_code; /* PROCS_EV_EXIT: wait status */
    char comm[16]; /* PROCS_EV_COMM: the new name, NUL-terminated */
} procs_event;

typedef struct procs_watch procs_watch;

/* Subscribes to the netlink proc connector. Needs CAP_NET_ADMIN: without it
 * returns -EPERM with the reason in err, and callers fall back to rescans. */
int procs_watch_open(procs_watch **out, char *err, size_t errlen);
void procs_watch_close(procs_watch *w);
/* A descriptor that polls readable when events are waiting. */
int procs_watch_fd(const procs_watch *w);
/* Has the kernel drop, before it queues them, the events procs_watch_read
 * would skip (a thread's fork, exit or rename) and, unless `exits`, every
 * exit (for a caller that learns of exits otherwise): they then cost no
 * receive. Replaces the previous filter. */
int procs_watch_filter(procs_watch *w, bool exits);
/* Drains up to `max` events without blocking; *n gets how many. Thread
 * events are filtered out. -ENOBUFS means the kernel dropped events: rescan. */
int procs_watch_read(procs_watch *w, procs_event *ev, size_t max, size_t *n);

/* ---- Traces (trace_write.c, trace_read.c, trace_fields.c): --record and --replay
 * The raw per-tick counter and energy deltas, so a run can be replayed with
 * another model, or hardware events exercised on machines without them.
 * JSON Lines, documented in README.md ("Records and replays"): a header
 * line, then one line per process appearance, per tick and per exit. */

typedef struct trace_header {
    char **events; /* event names of the recorded set */
    size_t n_events;
    char **zone_id, **zone_name; /* RAPL zones ("intel-rapl:0", "package-0") */
    size_t n_zones;
    double rate_hz;
    char boot_id[37];
    /* CLOCK_REALTIME minus CLOCK_MONOTONIC when recording started, in ns (0:
     * unknown). A replay puts tick t at t + offset, in the seconds the live
     * run used, so both store the same rows. */
    int64_t realtime_offset_ns;
} trace_header;

typedef struct trace_proc_delta {
    pid_t pid;
    uint64_t start_ticks;
    double *scaled; /* n_events scaled deltas */
    double *ratio;  /* n_events running/enabled ratios */
} trace_proc_delta;

typedef struct trace_tick {
    uint64_t mono_ns; /* CLOCK_MONOTONIC at the tick */
    uint64_t dt_ns;
    double *energy_j; /* n_zones */
    trace_proc_delta *procs;
    size_t n_procs;
} trace_tick;

typedef enum trace_record_kind { TRACE_TICK, TRACE_PROC, TRACE_EXIT } trace_record_kind;

typedef struct trace_writer trace_writer;
int trace_writer_open(const char *path, const trace_header *h, trace_writer **out, char *err,
                      size_t errlen);
int trace_write_proc(trace_writer *w, const procs_info *info);
int trace_write_exit(trace_writer *w, pid_t pid, uint64_t start_ticks);
/* Writes a tick; the file is flushed once a second of ticks.  The first
 * write error is returned from then on (the file is cut there). */
int trace_write_tick(trace_writer *w, const trace_tick *t);
/* Flushes and closes; returns the first write error, if any. */
int trace_writer_close(trace_writer *w);

typedef struct trace_reader trace_reader;
/* Opens and validates the header; errors name FILE:LINE:COLUMN. */
int trace_reader_open(const char *path, trace_reader **out, char *err, size_t errlen);
const trace_header *trace_reader_header(const trace_reader *r);
/* Next record: *kind says which of tick/proc/exit was filled. The memory
 * stays valid until the next call. Returns 1 for a record, 0 at the end,
 * negative on a malformed line (err names FILE:LINE:COLUMN). */
int trace_read(trace_reader *r, trace_record_kind *kind, trace_tick *tick, procs_info *proc,
               char *err, size_t errlen);
void trace_reader_close(trace_reader *r);

/* ---- Labels of a process (labels.c) ---------------------------------------
 * What a cluster groups energy by: the systemd unit and the batch job a
 * process belongs to. Read once, when a process is first tracked. */

#define LABELS_UNIT_MAX 128
#define LABELS_JOB_MAX PROCS_JOB_MAX

/* The systemd unit of a unified-hierarchy cgroup path: its first component
 * that is not a slice ("/system.slice/ssh.service/x" -> "ssh.service",
 * "/user.slice/user-1000.slice/user@1000.service/app.slice/a.scope" ->
 * "user@1000.service"), or "" when there is none. Pure. */
void labels_unit(const char *cgroup, char out[LABELS_UNIT_MAX]);
/* The Slurm job id in a cgroup path (the component "job_<id>", as in
 * "/system.slice/slurmstepd.scope/job_42/step_0"), or "". Pure. */
void labels_job_cgroup(const char *cgroup, char out[LABELS_JOB_MAX]);
/* The value of the first of `names` set in /proc/PID/environ, or "" when
 * none is. -ESRCH when the process is gone, -EACCES when it may not be
 * read. */
int labels_job_environ(pid_t pid, char *const *names, size_t n_names, char out[LABELS_JOB_MAX]);
/* The value of the first of `names` set in an environ block (NUL-separated
 * NAME=VALUE strings, `len` bytes), or "". Pure. */
void labels_job_env_block(const char *env, size_t len, char *const *names, size_t n_names,
                          char out[LABELS_JOB_MAX]);

/* ---- The CPU a power meter sees (busy.c) ---------------------------------- */

/* Busy CPU seconds so far: of the whole host from /proc/stat (user, nice,
 * system, irq, softirq, steal) when `cgroup` is NULL, else of that cgroup
 * folder (v2 cpu.stat usage_usec, or v1 cpuacct.usage). Differences of two
 * calls are busy CPUs x seconds. -errno when the file cannot be read,
 * -EBADMSG when it does not parse. */
int sample_busy_cpu_s(const char *cgroup, double *busy_s);

#endif
