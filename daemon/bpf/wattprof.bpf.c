/* wattprof.bpf.c: the kernel side of wattprofd's bpf counter backend.
 *
 * The daemon opens each event of its set once per CPU and puts the file
 * descriptors in `events` (index: event * nr_cpus + cpu). At every context
 * switch away from a user task the counters' change since the previous read
 * on that CPU is added to the outgoing task's process entry in `procs`,
 * keyed by thread group id and start time; a timer event per CPU (the
 * daemon's tick period) does the same for the task that is running, so a
 * process that never leaves its CPU is counted by tick time too. The
 * software events the scheduler also keeps per thread are taken from the
 * thread instead (what rusage gives): perf::TASK-CLOCK from its run time,
 * perf::CONTEXT-SWITCHES, perf::CPU-MIGRATIONS and perf::PAGE-FAULTS from
 * its counts; a set of only those reads no counter at all. Keys carry pids
 * as the daemon's pid namespace sees them. Fork, exec and exit create,
 * rename and close entries: a process that lives a millisecond has one, and
 * after its exit the entry keeps its final counts until the daemon has taken
 * them (it deletes the entries in a batch): an exited process's threads put
 * the entry in the ring whole at their switches after its exit
 * (wattprof_final), so the daemon looks nothing up for an exit. Forks,
 * execs, exits and renames are also told in the `changed` ring, in order:
 * the daemon opens no proc connector beside these programs. A process the
 * daemon reads (its bit in `wanted`) has its counts put in that ring at its
 * first switch away of a drain generation, so the daemon looks up no entry
 * for it unless it ran again in that generation; the others are named there
 * once per drain generation, for a lookup if the daemon wants it.
 *
 * A context switch is the hot path (thousands a second on a quiet node),
 * so it does the least it can: each thread's key is made once and kept in
 * its task storage; a switch between two kernel threads (the idle task
 * included) reads nothing, since nobody's count moves there; a switch from
 * a kernel thread to a user task only takes the counters' values as the
 * base (nothing, when no event is read from a counter); a switch between
 * two threads of one process adds nothing yet (the process's next switch
 * away adds it all); task fields are read directly (BTF pointers), not
 * through probe-read helper calls, here and in the fork and exit hooks
 * (once a process each: about 0.4 and 0.2 us a run less than the calls). */
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
/* Each event's source (enum wattprof_source). perf::TASK-CLOCK comes from
 * the scheduler's own run time of each thread (se.sum_exec_runtime, what
 * rusage reports) rather than from the per-CPU clock event, which on a
 * virtual machine also runs while the hypervisor has the CPU (steal); the
 * counts from the thread's fields, bumped where the kernel counts the
 * software events (a page fault retried counts once). */
const volatile __u32 source[WATTPROF_BPF_MAX_EVENTS];
/* How many events are read from the per-CPU counters. */
const volatile __u32 nr_counters = 0;

#define MAX_PIDNS_LEVEL 8 /* nesting of pid namespaces looked through */

struct {
    __uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
    __uint(key_size, sizeof(__u32));
    __uint(value_size, sizeof(__u32));
    __uint(max_entries, WATTPROF_BPF_MAX_CPUS *WATTPROF_BPF_MAX_EVENTS);
} events SEC(".maps");

/* Per CPU: the counters' values at the previous read. */
struct last {
    __u64 counter[WATTPROF_BPF_MAX_EVENTS];
    __u64 enabled[WATTPROF_BPF_MAX_EVENTS];
    __u64 running[WATTPROF_BPF_MAX_EVENTS];
};

/* Per thread, kept with the task: the run time already added to its
 * process, so that each call adds what the thread ran since, whichever CPU
 * it ran on and whatever switches were not seen; and its process's key,
 * made once (at its fork, or when first seen) and still there after its
 * parent has reaped it and the pid can no longer be looked up, when its
 * final switch still has run time to add. */
enum { KEY_UNKNOWN, KEY_MADE, KEY_NONE /* not visible to the daemon */ };
struct fields {
    __u64 runtime, switches, migrations, faults;
};

struct seen {
    struct fields f;
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

/* The processes whose entry changed since the daemon's previous drain,
 * each once per drain generation (and once more when it exits), so that
 * a drain looks up those that ran rather than every process there is. */
struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, WATTPROF_BPF_RING_BYTES);
} changed SEC(".maps");

/* Written by the daemon (mmap'ed): its drain generation, bumped before
 * each drain. Read by it: records the full ring refused, since the load;
 * when this moves the daemon drains the whole map once. */
__u64 drain_gen;
__u64 ring_lost;

/* Written by the daemon (mmap'ed): a bit per thread group id (in the
 * daemon's pid namespace) whose counts it reads. Such a process's counts
 * go in the ring at its first switch away (or timer run) of a drain
 * generation, and the drain takes them from there: no map lookup (a
 * system call each) for a process that ran once since the previous drain.
 * One that runs again in the generation is named as well (once), and
 * looked up. The others are named once per drain generation. */
__u64 wanted[WATTPROF_BPF_MAX_PIDS / 64];

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
 * it is not visible there. The first level (the daemon in the initial
 * namespace, the usual case) is read directly, the others through
 * probe reads. */
static __always_inline __u32 ns_tgid(struct task_struct *leader)
{
    struct pid *pid = leader->thread_pid;
    unsigned int level = pid->level;

    if (pid->numbers[0].ns->ns.inum == pidns_inum)
        return (__u32)pid->numbers[0].nr;
    for (unsigned int i = 1; i < MAX_PIDNS_LEVEL; i++) {
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

/* Tells the daemon what happened to k's process (enum wattprof_change_kind). */
static __always_inline void queue(const struct wattprof_key *k, __u32 kind)
{
    struct wattprof_change c = {.key = *k, .kind = kind};

    if (bpf_ringbuf_output(&changed, &c, sizeof(c), BPF_RB_NO_WAKEUP) < 0)
        __sync_fetch_and_add(&ring_lost, 1);
}

static __always_inline bool is_wanted(__u32 tgid)
{
    __u32 w = tgid / 64;

    if (w >= WATTPROF_BPF_MAX_PIDS / 64)
        return false;
    return (*(volatile __u64 *)&wanted[w] >> (tgid % 64)) & 1;
}

/* p's counts of the set's events, into a record of the ring. */
static __always_inline void copy_counts(struct wattprof_ev *ev, const struct wattprof_proc *p)
{
    for (__u32 e = 0; e < WATTPROF_BPF_MAX_EVENTS && e < nr_events; e++) {
        ev[e].count = p->count[e];
        ev[e].enabled = p->enabled[e];
        ev[e].running = p->running[e];
    }
}

/* Puts p's counts in the ring for the daemon (see wanted). */
static __always_inline void send_counts(const struct wattprof_key *k, const struct wattprof_proc *p)
{
    struct wattprof_counts *c;

    /* nr_events is known when the programs are verified: a constant. */
    if (nr_events > WATTPROF_BPF_MAX_EVENTS)
        return;
    c = bpf_ringbuf_reserve(&changed, WATTPROF_COUNTS_SIZE(nr_events), 0);
    if (!c) {
        __sync_fetch_and_add(&ring_lost, 1);
        return;
    }
    c->key = *k;
    c->kind = WATTPROF_CH_COUNTS;
    c->pad = 0;
    c->updates = p->updates;
    copy_counts(c->ev, p);
    bpf_ringbuf_submit(c, BPF_RB_NO_WAKEUP);
}

/* An exited process's entry, for the daemon to take without a lookup (see
 * wattprof_final); a record the full ring refused leaves the entry for the
 * daemon's drain of the whole map. */
static __always_inline void send_final(const struct wattprof_key *k, struct wattprof_proc *p)
{
    struct wattprof_final *f;
    /* Counted before the record is made: an entry whose record the full
     * ring refused is one the daemon's drain of the whole map takes. An
     * atomic fetch-and-add (BPF ISA v3), so that two threads ending at
     * once on two CPUs cannot both send 1: the daemon adopts the process
     * for the record numbered 1 only, and once. */
    __u32 finals = __sync_fetch_and_add(&p->finals, 1) + 1;

    if (nr_events > WATTPROF_BPF_MAX_EVENTS)
        return;
    f = bpf_ringbuf_reserve(&changed, WATTPROF_FINAL_SIZE(nr_events), 0);
    if (!f) {
        __sync_fetch_and_add(&ring_lost, 1);
        return;
    }
    f->key = *k;
    f->kind = WATTPROF_CH_FINAL;
    f->finals = finals;
    f->updates = p->updates;
    f->cgroup_id = p->cgroup_id;
    f->uid = p->uid;
    f->ppid = p->ppid;
    __builtin_memcpy(f->comm, p->comm, sizeof(f->comm));
    copy_counts(f->ev, p);
    bpf_ringbuf_submit(f, BPF_RB_NO_WAKEUP);
}

static __always_inline bool make_key(struct task_struct *t, struct wattprof_key *k)
{
    struct task_struct *leader = t->group_leader;

    if (t->flags & PF_KTHREAD)
        return false;
    k->tgid = ns_tgid(leader);
    k->pad = 0;
    k->start = leader->start_boottime / (1000000000ull / WATTPROF_BPF_TICKS_PER_S);
    return k->tgid != 0;
}

/* t's counts the scheduler keeps (see source). */
static __always_inline void fields_of(struct task_struct *t, struct fields *f)
{
    f->runtime = t->se.sum_exec_runtime;
    f->switches = t->nvcsw + t->nivcsw;
    f->migrations = t->se.nr_migrations;
    f->faults = t->min_flt + t->maj_flt;
}

/* t's task storage with its key made; NULL when it cannot have one. */
static __always_inline struct seen *seen_of(struct task_struct *t)
{
    struct seen *s = bpf_task_storage_get(&seen, t, 0, 0);

    if (!s) {
        /* A thread first seen here ran before the programs were loaded:
         * its run time counts from now. */
        struct seen init = {};
        fields_of(t, &init.f);
        s = bpf_task_storage_get(&seen, t, &init, BPF_LOCAL_STORAGE_GET_F_CREATE);
        if (!s)
            return NULL;
    }
    if (s->keyed == KEY_UNKNOWN)
        s->keyed = make_key(t, &s->key) ? KEY_MADE : KEY_NONE;
    return s;
}

/* Makes k's entry, with what t's process is (the daemon's fallback when
 * it has exited before the daemon could read /proc); false when the map is
 * full. One made meanwhile (another thread of the process) will do. */
static __always_inline bool make_entry(struct task_struct *t, struct wattprof_key *k)
{
    struct wattprof_proc init = {};

    init.uid = t->cred->uid.val;
    init.ppid = ns_tgid(t->real_parent->group_leader);
    init.cgroup_id = t->cgroups->dfl_cgrp->kn->id;
    bpf_probe_read_kernel_str(init.comm, sizeof(init.comm), t->group_leader->comm);
    if (bpf_map_update_elem(&procs, k, &init, BPF_NOEXIST) < 0 && !bpf_map_lookup_elem(&procs, k)) {
        count_error(0);
        return false;
    }
    return true;
}

static __always_inline struct wattprof_proc *entry(struct task_struct *t, struct wattprof_key *k,
                                                   bool create)
{
    struct wattprof_proc *p = bpf_map_lookup_elem(&procs, k);

    if (p || !create || !make_entry(t, k))
        return p;
    return bpf_map_lookup_elem(&procs, k);
}

/* Event e's change since the previous read: from the thread's fields
 * (`moved`: theirs since its previous call; enabled and running: what it
 * ran), or on this CPU's counter, scaled by its enabled/running time;
 * false when it cannot be read. */
static __always_inline bool delta(struct last *l, __u32 e, __u32 cpu, const struct fields *moved,
                                  __u64 *dc, __u64 *de, __u64 *dr)
{
    struct bpf_perf_event_value v;

    *de = *dr = moved->runtime;
    switch (source[e]) {
    case WATTPROF_SRC_RUNTIME:
        *dc = moved->runtime;
        return true;
    case WATTPROF_SRC_SWITCHES:
        *dc = moved->switches;
        return true;
    case WATTPROF_SRC_MIGRATIONS:
        *dc = moved->migrations;
        return true;
    case WATTPROF_SRC_FAULTS:
        *dc = moved->faults;
        return true;
    }
    if (!l)
        return false;
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

/* The counters' values on this CPU, as the base of the next delta: a user
 * task comes on after a kernel thread, whose counts are nobody's. */
static __always_inline void rebase(void)
{
    __u32 zero = 0, cpu = bpf_get_smp_processor_id();
    struct last *l = bpf_map_lookup_elem(&last, &zero);
    struct fields none = {};
    __u64 dc, de, dr;

    if (!l)
        return;
    for (__u32 e = 0; e < WATTPROF_BPF_MAX_EVENTS && e < nr_events; e++)
        if (source[e] == WATTPROF_SRC_COUNTER)
            delta(l, e, cpu, &none, &dc, &de, &dr);
}

/* The counters' change on this CPU since the previous read, and what user
 * task t ran since its previous call, added to t's process, whose entry it
 * returns (NULL: none). A task that has exited only adds to an entry that
 * is still there. `quiet`: the caller names the process in the ring itself. */
static __always_inline struct wattprof_proc *account(struct task_struct *t, bool create, bool quiet)
{
    __u32 zero = 0, cpu = bpf_get_smp_processor_id();
    struct last *l = NULL;
    struct seen *s = seen_of(t);
    struct wattprof_proc *p = NULL;
    struct fields now, moved = {};
    __u64 dc, de, dr;

    if (nr_counters && !(l = bpf_map_lookup_elem(&last, &zero)))
        return NULL;
    if (s) {
        fields_of(t, &now);
        moved.runtime = now.runtime - s->f.runtime;
        moved.switches = now.switches - s->f.switches;
        moved.migrations = now.migrations - s->f.migrations;
        moved.faults = now.faults - s->f.faults;
        s->f = now;
        if (s->keyed == KEY_MADE)
            p = entry(t, &s->key, create);
    }
    if (!p) {
        if (nr_counters)
            rebase();
        return NULL;
    }
    for (__u32 e = 0; e < WATTPROF_BPF_MAX_EVENTS && e < nr_events; e++) {
        if (!delta(l, e, cpu, &moved, &dc, &de, &dr))
            continue;
        __sync_fetch_and_add(&p->count[e], dc);
        __sync_fetch_and_add(&p->enabled[e], de);
        __sync_fetch_and_add(&p->running[e], dr);
    }
    __sync_fetch_and_add(&p->updates, 1);
    /* A thread of a process that has exited, at a switch after its exit
     * (it has no other kind: its process's exit hook ran in the last of
     * them): the entry goes to the daemon whole, instead of a record that
     * names it for a lookup. */
    if (!quiet && p->exited && t->exit_state) {
        send_final(&s->key, p);
        return p;
    }
    /* After the counts (the locked adds order them before this load): a
     * generation read before the daemon bumped it means its coming drain
     * reads the ring, and looks the entry up, after these counts are in.
     * A process the daemon reads has its counts sent at its first call
     * of a generation, and is named at its second (the drain looks up
     * what it ran after the record): at most one lookup a tick for a
     * process that switches often, none for one that ran once. */
    __u64 gen = *(volatile __u64 *)&drain_gen;
    if (!quiet && p->sent != gen && is_wanted(s->key.tgid)) {
        p->sent = gen;
        send_counts(&s->key, p);
        return p;
    }
    if (p->queued != gen) {
        p->queued = gen;
        if (!quiet)
            queue(&s->key, WATTPROF_CH_RAN);
    }
    return p;
}

static __always_inline bool kernel_thread(struct task_struct *t)
{
    return t->flags & PF_KTHREAD; /* the idle tasks too */
}

SEC("tp_btf/sched_switch")
int BPF_PROG(wattprof_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
    if (kernel_thread(prev)) {
        if (nr_counters && !kernel_thread(next))
            rebase();
        return 0;
    }
    /* A dead thread's last switch must not bring back an entry already
     * taken, and must add its last run time now. */
    if (prev->exit_state == 0 && !kernel_thread(next) && prev->tgid == next->tgid)
        return 0;
    account(prev, prev->exit_state == 0, false);
    return 0;
}

/* The per-CPU timer: the running task's share up to now. */
SEC("perf_event")
int wattprof_timer(void *ctx)
{
    struct task_struct *t = bpf_get_current_task_btf();

    if (!kernel_thread(t))
        account(t, true, false);
    return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(wattprof_fork, struct task_struct *parent, struct task_struct *child)
{
    struct seen *s, init = {0}; /* a new thread's fields start at 0 */

    if (kernel_thread(child))
        return 0;
    s = bpf_task_storage_get(&seen, child, &init, BPF_LOCAL_STORAGE_GET_F_CREATE);
    if (!s)
        return 0;
    s->keyed = make_key(child, &s->key) ? KEY_MADE : KEY_NONE;
    /* A new key: no entry to look up first, nor to look up after. The
     * daemon learns of the new process from its record. */
    if (s->keyed == KEY_MADE && child->pid == child->tgid) {
        make_entry(child, &s->key);
        queue(&s->key, WATTPROF_CH_FORK);
    }
    return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(wattprof_exec, struct task_struct *t)
{
    struct seen *s = seen_of(t);
    struct wattprof_proc *p;

    if (!s || s->keyed != KEY_MADE)
        return 0;
    if ((p = entry(t, &s->key, true)))
        bpf_probe_read_kernel_str(p->comm, sizeof(p->comm), t->comm);
    queue(&s->key, WATTPROF_CH_EXEC);
    return 0;
}

/* A process's leader renamed (prctl PR_SET_NAME, a write to /proc/PID/comm;
 * an exec's own rename is its exec record): the record carries the name,
 * since a process that renames itself and exits at once leaves no /proc
 * entry to read it from. */
SEC("tp_btf/task_rename")
int BPF_PROG(wattprof_rename, struct task_struct *t, const char *comm)
{
    struct wattprof_change c = {.kind = WATTPROF_CH_COMM};
    struct seen *s;

    if (kernel_thread(t) || t->pid != t->tgid || BPF_CORE_READ_BITFIELD_PROBED(t, in_execve))
        return 0;
    if (!(s = seen_of(t)) || s->keyed != KEY_MADE)
        return 0;
    c.key = s->key;
    bpf_probe_read_kernel_str(c.comm, sizeof(c.comm), comm);
    if (bpf_ringbuf_output(&changed, &c, sizeof(c), BPF_RB_NO_WAKEUP) < 0)
        __sync_fetch_and_add(&ring_lost, 1);
    return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(wattprof_exit, struct task_struct *t)
{
    struct wattprof_proc *p;
    struct seen *s;

    if (kernel_thread(t) || t->signal->live.counter != 0)
        return 0;
    /* The last thread: what it ran since its last switch, then the mark,
     * with the name it ended with (PR_SET_NAME has no hook here) and the
     * cgroup it ended in (one it moved to after its fork: a job's step). */
    if (!(s = seen_of(t)) || s->keyed != KEY_MADE)
        return 0;
    if ((p = account(t, true, true))) {
        bpf_probe_read_kernel_str(p->comm, sizeof(p->comm), t->group_leader->comm);
        p->cgroup_id = t->cgroups->dfl_cgrp->kn->id;
        p->exited = 1;
    }
    return 0;
}
