/* wattprof.bpf.c: the kernel side of wattprofd's bpf counter backend.
 *
 * The daemon opens each event of its set once per CPU and puts the file
 * descriptors in `events` (index: event * nr_cpus + cpu). At every context
 * switch the counters' change since the previous switch on that CPU is
 * added to the outgoing task's process entry in `procs`, keyed by thread
 * group id and start time; a timer event per CPU (the daemon's tick
 * period) does the same for the task that is running, so a process that
 * never leaves its CPU is counted by tick time too. perf::TASK-CLOCK is
 * taken from each thread's scheduler run time instead (what rusage gives).
 * Keys carry pids as the daemon's pid namespace sees them. Fork, exec and exit
 * create, rename and close entries: a process that lives a millisecond
 * has one, and after its exit the entry keeps its final counts until the
 * daemon has taken them (it deletes the entry). */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "wattprof.h"

#define PF_KTHREAD 0x00200000

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 nr_cpus = 1;
const volatile __u32 nr_events = 0;
/* The daemon's pid namespace (the inode of /proc/self/ns/pid): keys carry
 * pids as the daemon sees them in /proc, and a process it cannot see has
 * no entry. */
const volatile __u32 pidns_inum = 0;
/* The set's perf::TASK-CLOCK, counted from the scheduler's own run time of
 * each thread (se.sum_exec_runtime, what rusage reports) rather than from
 * the per-CPU clock event, which on a virtual machine also runs while the
 * hypervisor has the CPU (steal); ~0: none. */
const volatile __u32 task_clock = ~0u;

#define MAX_PIDNS_LEVEL 8 /* nesting of pid namespaces looked through */

struct {
    __uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
    __uint(key_size, sizeof(__u32));
    __uint(value_size, sizeof(__u32));
    __uint(max_entries, WATTPROF_BPF_MAX_CPUS *WATTPROF_BPF_MAX_EVENTS);
} events SEC(".maps");

/* Per CPU: the counters' values at the previous switch. */
struct last {
    __u64 counter[WATTPROF_BPF_MAX_EVENTS];
    __u64 enabled[WATTPROF_BPF_MAX_EVENTS];
    __u64 running[WATTPROF_BPF_MAX_EVENTS];
};

/* Per thread, kept with the task: the run time already added to its
 * process, so that each call adds what the thread ran since, whichever CPU
 * it ran on and whatever switches were not seen (a per-CPU baseline lost a
 * slice whenever the switch into a task was not the last one seen there);
 * and, from its exit hook on, its process's key: once its parent has
 * reaped it the pid is detached and the key can no longer be made, but its
 * final switch still has run time to add. */
struct seen {
    __u64 runtime;
    struct wattprof_key key;
    __u32 keyed;
};

struct {
    __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, int);
    __type(value, struct seen);
} seen SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct last);
} last SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, WATTPROF_BPF_MAX_PROCS);
    __type(key, struct wattprof_key);
    __type(value, struct wattprof_proc);
} procs SEC(".maps");

/* Counts the daemon reads: entries that did not fit, counter reads that
 * failed. */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 2);
    __type(key, __u32);
    __type(value, __u64);
} errors SEC(".maps");

static void count_error(__u32 which)
{
    __u64 *v = bpf_map_lookup_elem(&errors, &which);

    if (v)
        __sync_fetch_and_add(v, 1);
}

/* The thread group id of `leader` in the daemon's pid namespace; 0 when
 * it is not visible there. */
static __always_inline __u32 ns_tgid(struct task_struct *leader)
{
    struct pid *pid = BPF_CORE_READ(leader, thread_pid);
    unsigned int level = BPF_CORE_READ(pid, level);

    for (unsigned int i = 0; i < MAX_PIDNS_LEVEL; i++) {
        if (i > level)
            break;
        struct upid u;
        if (bpf_core_read(&u, sizeof(u), &pid->numbers[i]) < 0)
            return 0;
        if (BPF_CORE_READ(u.ns, ns.inum) == pidns_inum)
            return (__u32)u.nr;
    }
    return 0;
}

static __always_inline bool make_key(struct task_struct *t, struct wattprof_key *k)
{
    struct task_struct *leader = BPF_CORE_READ(t, group_leader);

    if (BPF_CORE_READ(t, flags) & PF_KTHREAD)
        return false;
    k->tgid = ns_tgid(leader);
    k->pad = 0;
    k->start = BPF_CORE_READ(leader, start_boottime) / (1000000000ull / WATTPROF_BPF_TICKS_PER_S);
    return k->tgid != 0;
}

static __always_inline struct wattprof_proc *entry(struct task_struct *t, struct wattprof_key *k,
                                                   bool create)
{
    struct wattprof_proc *p = bpf_map_lookup_elem(&procs, k), init = {};

    if (p || !create)
        return p;
    init.uid = BPF_CORE_READ(t, cred, uid.val);
    init.cgroup_id = BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
    bpf_probe_read_kernel_str(init.comm, sizeof(init.comm), BPF_CORE_READ(t, group_leader, comm));
    if (bpf_map_update_elem(&procs, k, &init, BPF_NOEXIST) < 0 && !bpf_map_lookup_elem(&procs, k)) {
        count_error(0);
        return NULL;
    }
    return bpf_map_lookup_elem(&procs, k);
}

/* Event e's change on this CPU since the previous call, scaled by its
 * enabled/running time; false when it cannot be read. `ran`: what the
 * task ran since its previous call, for task-clock. */
static __always_inline bool delta(struct last *l, __u32 e, __u32 cpu, __u64 ran, __u64 *dc,
                                  __u64 *de, __u64 *dr)
{
    struct bpf_perf_event_value v;

    if (e == task_clock) {
        *dc = *de = *dr = ran;
        return true;
    }
    if (bpf_perf_event_read_value(&events, e * nr_cpus + cpu, &v, sizeof(v)) < 0) {
        count_error(1);
        return false;
    }
    *dc = v.counter - l->counter[e];
    *de = v.enabled - l->enabled[e];
    *dr = v.running - l->running[e];
    l->counter[e] = v.counter;
    l->enabled[e] = v.enabled;
    l->running[e] = v.running;
    if (*dr && *dr < *de)
        *dc = *dc * *de / *dr;
    return true;
}

/* What t ran since the previous call for it, from its own run time; a
 * thread first seen here (it ran before the programs were loaded) starts
 * from now. */
static __always_inline __u64 ran_since(struct task_struct *t, struct seen **sp)
{
    __u64 runtime = BPF_CORE_READ(t, se.sum_exec_runtime), ran = 0;
    struct seen *s = bpf_task_storage_get(&seen, t, 0, 0);

    if (s) {
        ran = runtime - s->runtime;
    } else {
        struct seen init = {.runtime = runtime};
        s = bpf_task_storage_get(&seen, t, &init, BPF_LOCAL_STORAGE_GET_F_CREATE);
    }
    if (s)
        s->runtime = runtime;
    *sp = s;
    return ran;
}

/* The counters' change on this CPU since the previous call, added to t's
 * process (none for the idle task or a kernel thread). A task that has
 * exited only adds to an entry that is still there. */
static __always_inline void account(struct task_struct *t, bool create)
{
    __u32 zero = 0, cpu = bpf_get_smp_processor_id();
    struct last *l = bpf_map_lookup_elem(&last, &zero);
    __u64 dc, de, dr, ran = 0;
    struct wattprof_proc *p = NULL;
    struct seen *s = NULL;
    struct wattprof_key k;

    if (!l)
        return;
    if (task_clock != ~0u && !(BPF_CORE_READ(t, flags) & PF_KTHREAD))
        ran = ran_since(t, &s);
    if (make_key(t, &k))
        p = entry(t, &k, create);
    else if (s && s->keyed && BPF_CORE_READ(t, exit_state))
        p = bpf_map_lookup_elem(&procs, &s->key);
    if (!p) {
        for (__u32 e = 0; e < WATTPROF_BPF_MAX_EVENTS && e < nr_events; e++)
            delta(l, e, cpu, ran, &dc, &de, &dr);
    } else {
        for (__u32 e = 0; e < WATTPROF_BPF_MAX_EVENTS && e < nr_events; e++) {
            if (!delta(l, e, cpu, ran, &dc, &de, &dr))
                continue;
            __sync_fetch_and_add(&p->count[e], dc);
            __sync_fetch_and_add(&p->enabled[e], de);
            __sync_fetch_and_add(&p->running[e], dr);
        }
        __sync_fetch_and_add(&p->updates, 1);
    }
}

SEC("tp_btf/sched_switch")
int BPF_PROG(wattprof_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
    /* A dead task's last switch must not bring back an entry already taken. */
    account(prev, BPF_CORE_READ(prev, exit_state) == 0);
    return 0;
}

/* The per-CPU timer: the running task's share up to now. */
SEC("perf_event")
int wattprof_timer(void *ctx)
{
    struct task_struct *t = bpf_get_current_task_btf();

    account(t, true);
    return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(wattprof_fork, struct task_struct *parent, struct task_struct *child)
{
    struct wattprof_key k;
    struct seen init = {0}; /* a new thread has run nothing yet */

    bpf_task_storage_get(&seen, child, &init, BPF_LOCAL_STORAGE_GET_F_CREATE);
    if (BPF_CORE_READ(child, pid) == BPF_CORE_READ(child, tgid) && make_key(child, &k))
        entry(child, &k, true);
    return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(wattprof_exec, struct task_struct *t)
{
    struct wattprof_key k;
    struct wattprof_proc *p;

    if (make_key(t, &k) && (p = entry(t, &k, true)))
        bpf_probe_read_kernel_str(p->comm, sizeof(p->comm), t->comm);
    return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(wattprof_exit, struct task_struct *t)
{
    struct wattprof_key k;
    struct wattprof_proc *p;

    if (BPF_CORE_READ(t, signal, live.counter) != 0 || !make_key(t, &k))
        return 0;
    /* The last thread: what it ran since its last switch, then the mark,
     * with the name it ended with (PR_SET_NAME has no hook here); its key
     * is kept for its final switch. */
    struct seen *s = bpf_task_storage_get(&seen, t, 0, 0);
    if (s) {
        s->key = k;
        s->keyed = 1;
    }
    account(t, true);
    if ((p = bpf_map_lookup_elem(&procs, &k))) {
        bpf_probe_read_kernel_str(p->comm, sizeof(p->comm), BPF_CORE_READ(t, group_leader, comm));
        p->exited = 1;
    }
    return 0;
}
