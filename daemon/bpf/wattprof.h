/* bpf/wattprof.h: what the BPF side of wattprofd's bpf counter backend
 * (wattprof.bpf.c) and its user side (backend-bpf.c) share: the key and
 * value of the per-process map. Plain C types, so that both the BPF
 * compilation (vmlinux.h) and the daemon's (linux/types.h) read it. */
#ifndef WATTPROF_BPF_SHARED_H
#define WATTPROF_BPF_SHARED_H

#define WATTPROF_BPF_MAX_EVENTS 8     /* events counted per process */
#define WATTPROF_BPF_MAX_PROCS 16384  /* processes in the map at once */
#define WATTPROF_BPF_MAX_CPUS 1024    /* the events array: event * cpus + cpu */
#define WATTPROF_BPF_TICKS_PER_S 100  /* USER_HZ: /proc/PID/stat's start time unit */
#define WATTPROF_BPF_MAX_PIDS 4194304 /* PID_MAX_LIMIT: the wanted bitmap's size in bits */

/* Where an event of the set is counted from: the per-CPU counter, read at
 * each switch, or a field the scheduler keeps in each thread (what rusage
 * reports), which costs no counter read. */
enum wattprof_source {
    WATTPROF_SRC_COUNTER,    /* bpf_perf_event_read_value on the per-CPU event */
    WATTPROF_SRC_RUNTIME,    /* perf::TASK-CLOCK: se.sum_exec_runtime */
    WATTPROF_SRC_SWITCHES,   /* perf::CONTEXT-SWITCHES: nvcsw + nivcsw */
    WATTPROF_SRC_MIGRATIONS, /* perf::CPU-MIGRATIONS: se.nr_migrations */
    WATTPROF_SRC_FAULTS,     /* perf::PAGE-FAULTS: min_flt + maj_flt */
};

/* A process: its thread group id and start time in USER_HZ ticks since
 * boot, as /proc/PID/stat field 22 gives it, so a reused pid is another key. */
struct wattprof_key {
    __u32 tgid;
    __u32 pad;
    __u64 start;
};

struct wattprof_proc {
    __u64 count[WATTPROF_BPF_MAX_EVENTS];   /* scaled by enabled/running per interval */
    __u64 enabled[WATTPROF_BPF_MAX_EVENTS]; /* ns the event was enabled while it ran */
    __u64 running[WATTPROF_BPF_MAX_EVENTS]; /* ns of those it was counted */
    __u64 updates;                          /* times counts were added: changes when it ran */
    __u64 cgroup_id;
    __u32 uid;
    __u32 exited; /* the whole thread group has exited */
    __u32 ppid;   /* its parent's thread group id when the entry was made; 0: not visible */
    __u32 finals; /* final records sent (wattprof_final) */
    __u64 queued; /* the drain generation it was last named in the changed ring for */
    __u64 sent;   /* the drain generation its counts were last put in the ring for */
    char comm[16];
};

/* What a record of the changed ring says of its process. */
enum wattprof_change_kind {
    WATTPROF_CH_RAN,    /* its entry has new counts since the previous drain */
    WATTPROF_CH_EXITED, /* it has exited: its entry holds its final counts (the daemon's own
                         * mark, for an exit it looks the entry up for: the ring has FINAL) */
    WATTPROF_CH_FORK,   /* it is new (forked; not a new thread) */
    WATTPROF_CH_EXEC,   /* it has exec'd */
    WATTPROF_CH_COMM,   /* its leader was renamed (PR_SET_NAME, /proc/PID/comm): comm */
    WATTPROF_CH_COUNTS, /* a wanted process's counts at a switch or timer (wattprof_counts) */
    WATTPROF_CH_FINAL,  /* it has exited: its entry as its last thread left it (wattprof_final) */
};

/* A record of the changed ring, in the order things happened. Fork, exec
 * and rename records stand in for the proc connector's events, so the
 * daemon does not open it with this backend. */
struct wattprof_change {
    struct wattprof_key key;
    __u32 kind; /* enum wattprof_change_kind */
    __u32 pad;
    char comm[16]; /* WATTPROF_CH_COMM: the new name */
};

/* One event's totals in a record of the ring. */
struct wattprof_ev {
    __u64 count, enabled, running;
};

/* The counts of a process the daemon reads (its bit set in `wanted`), as
 * the programs left them at its first switch away (or timer run) of a
 * drain generation: the daemon takes them from the ring and looks up no
 * entry for a process that ran once since the previous drain (one that
 * ran again is also named, and looked up). A record holds the events of the set only (its size:
 * WATTPROF_COUNTS_SIZE). Written while other threads of the process may
 * add, so each field is at most the entry's at the time; a later record's
 * field is not always larger than an earlier one's (the daemon keeps the
 * largest). */
struct wattprof_counts {
    struct wattprof_key key;
    __u32 kind; /* WATTPROF_CH_COUNTS */
    __u32 pad;
    __u64 updates;
    struct wattprof_ev ev[WATTPROF_BPF_MAX_EVENTS];
};

#define WATTPROF_COUNTS_SIZE(n_events) (32 + 24 * (n_events))

/* A process that has exited, as its entry stood at a final switch of one
 * of its threads (one that switched after its exit hook marked the entry):
 * what the daemon needs to read or adopt it without looking the entry up.
 * The entry stays until the daemon deletes it (in a batch); a thread that
 * switches after this sends another record, with `finals` one more, and
 * the daemon keeps the largest of each field as for wattprof_counts. */
struct wattprof_final {
    struct wattprof_key key;
    __u32 kind;   /* WATTPROF_CH_FINAL */
    __u32 finals; /* 1: the process's first such record */
    __u64 updates;
    __u64 cgroup_id;
    __u32 uid;
    __u32 ppid;
    char comm[16];
    struct wattprof_ev ev[WATTPROF_BPF_MAX_EVENTS];
};

#define WATTPROF_FINAL_SIZE(n_events) (64 + 24 * (n_events))

#define WATTPROF_BPF_RING_BYTES (1u << 20) /* the changed ring: ~21,000 records */

#endif
