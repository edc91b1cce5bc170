/* backend: how the sampler reads counters, whatever reads them.
 *
 * The sampler opens one handle per tracked process, reads every handle
 * once a tick and closes it after the process's final read; it never looks
 * inside a handle. backend-perf.c is the first implementation: perf_event
 * groups per thread (lib/sample/counters.c). backend-bpf.c counts in the
 * kernel, at context switches, into one map for all processes; it fills
 * the same delta.
 *
 * The contract, for every backend:
 *
 * open     Starts counting the event set `es` on one target: a process
 *          (pid > 0, cpu < 0: its threads, those it has and those it
 *          starts, not its children) or a CPU (pid < 0, cpu >= 0: whatever
 *          runs there). `start` is the process's start time (/proc/PID/stat
 *          field 22), for a backend that tells a reused pid apart by it.
 *          Returns 0 and *out, or -errno and one line in err
 *          naming the target: -ESRCH the process is gone, -EACCES or -EPERM
 *          it may not be watched (both are the normal fate of short-lived
 *          or foreign processes: the sampler counts them, it does not log
 *          them), -EOPNOTSUPP this backend has no such target.
 * read     This tick's change since the previous read (or the open), into
 *          `d` (allocated for `es` by counters_delta_new): per event, in
 *          event-set order, the count scaled by enabled/running time and
 *          the running/enabled ratio (1: never multiplexed, 0: not counted).
 *          d->skipped set: the backend knows nothing ran, the change is
 *          zero and d's arrays are left as they were. A process that exited
 *          is read once more (its final partial interval). Negative: the
 *          target can no longer be read; the sampler stops reading it and
 *          reaps it. Runs 50 times a second for every process that ran: it
 *          must not allocate, block or log.
 * quiet_word
 *          After a read, a word of memory the backend keeps current, with
 *          its content then in *value: while an atomic load of the word
 *          still gives *value, the next read would set d->skipped, and the
 *          sampler may leave it out (most processes sleep through most
 *          ticks, and a load costs less than a call). NULL when there is no
 *          such word; always NULL is correct, only slower.
 * alive    False once the process has exited (a rescan reaps it).
 * skip_error
 *          0 when reads of a target that slept are skipped; else the
 *          -errno of why every read does the work (the sampler says so
 *          once in the log and counts such targets in status).
 * close    Releases everything the handle holds; NULL does nothing.
 * drain    NULL, or once per tick before the reads: takes what the kernel
 *          counted since the previous drain. For each process that exited
 *          without a handle it calls `adopt`, which may open one (the next
 *          read gives its whole count); one not adopted is forgotten, unless
 *          adopt returned -EAGAIN: then a later drain offers it again.
 *          A backend that sees processes start, exec and rename (bpf's
 *          hooks) hands each such event to `event` (NULL: not wanted), in
 *          the order they happened and interleaved with the adoptions, so
 *          that the sampler needs no proc connector beside it. Returns 1
 *          when some of those events were lost (the sampler rescans /proc),
 *          else 0 or -errno.
 *
 * Every call comes from the sampling thread, one at a time. */
#ifndef WATTPROFD_BACKEND_H
#define WATTPROFD_BACKEND_H

#include "sample/sample.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct backend_handle backend_handle;

/* An exited process the kernel side counted that no handle reads. */
typedef struct backend_orphan {
    pid_t pid;
    uint64_t start; /* /proc/PID/stat field 22 */
    uid_t uid;
    pid_t ppid; /* its parent when it started; 0: unknown */
    char comm[16];
    uint64_t cgroup_id; /* its cgroup v2 id (kernfs) when it started; 0: unknown */
} backend_orphan;

typedef int (*backend_adopt_fn)(void *ctx, const backend_orphan *o);
typedef void (*backend_event_fn)(void *ctx, const procs_event *ev);

typedef struct backend {
    const char *name; /* for logs: "perf" */
    int (*open)(const sample_eventset *es, pid_t pid, uint64_t start, int cpu, backend_handle **out,
                char *err, size_t errlen);
    int (*read)(backend_handle *h, counters_delta *d);
    const __u64 *(*quiet_word)(const backend_handle *h, __u64 *value);
    bool (*alive)(const backend_handle *h);
    int (*skip_error)(const backend_handle *h);
    void (*close)(backend_handle *h);
    int (*drain)(backend_adopt_fn adopt, backend_event_fn event, void *ctx);
} backend;

/* perf_event groups per process (backend-perf.c). */
extern const backend backend_perf;

/* Per-CPU counters and BPF programs at context switches (backend-bpf.c).
 * backend_bpf_load opens `es` on every CPU and loads and attaches the
 * programs, with a timer per CPU every period_ns; -errno and why in err
 * when it cannot (built without it, no BTF, no CAP_BPF or CAP_PERFMON, an
 * event that does not open per CPU). One at a time: the backend is the
 * daemon's, and unload releases it. */
extern const backend backend_bpf;
int backend_bpf_load(const sample_eventset *es, uint64_t period_ns, char *err, size_t errlen);
void backend_bpf_unload(void);
/* Processes whose entry did not fit in the kernel's map, since the load. */
uint64_t backend_bpf_overflows(void);
/* Whether the programs put pid's counts in the ring at each switch (a
 * handle is open with that pid), so the drain looks up no entry for it. */
bool backend_bpf_wanted(pid_t pid);

#endif
