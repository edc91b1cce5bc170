/* backend-bpf: the sampler's counter backend on per-CPU counters and BPF
 * programs (bpf/wattprof.bpf.c). Each event of the set is opened once per
 * CPU (the software events the scheduler keeps per thread are taken from the
 * thread instead); at every context switch, and on a per-CPU timer each tick
 * period, the kernel adds the counters' change to the running process's
 * entry in one map, keyed by thread group id and start time, and names the
 * process in a ring once per drain generation; an exited process's entry
 * comes in the ring whole, at its threads' last switches (wattprof_final); a
 * process the daemon has a handle for (its pid's bit set in the programs'
 * `wanted` bitmap) has its counts put in the ring instead, at its first
 * switch away of a generation (and is named if it runs again in it). Once a
 * tick the daemon drains (drain): it reads the ring, takes the counts and
 * final records into their handles, looks up the entries the other records
 * name that a handle reads, hands each handle its process's counts, and
 * offers the processes that exited unseen (a 1 ms child) to be adopted (at
 * most as many a tick as the sampler takes: the rest wait for the next
 * drain); the whole map, in batches, the first time and after the ring was
 * full. The ring's fork, exec and rename records go to the sampler as
 * process events (it opens no proc connector with this backend). Taken
 * entries are deleted in batches; one whose adoption was deferred stays, and
 * the next drain reads and deletes it in one call. A read is a subtraction;
 * the quiet word is the handle's count of changes. The cost follows context
 * switches and the processes that ran, not process starts nor the processes
 * that sleep; a tracked process that ran once in a tick costs the daemon no
 * system call, one that switched often one lookup.
 *
 * Built without libbpf (meson -Dbpf=disabled), backend_bpf_load says so and
 * the daemon counts with the perf backend. The contract is in backend.h. */
#include "backend.h"
#include "util/util.h"

#include <errno.h>

#ifdef WATTPROF_BPF

#include "bpf/wattprof.h"
#include "wattprof.skel.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BUCKETS 4096 /* handles by key */
#define CHUNK 1024   /* entries per batch lookup */

struct backend_handle {
    struct wattprof_key key;
    struct backend_handle *next; /* in its bucket */
    __u64 gen;                   /* bumped by each drain that found new counts */
    __u64 read_gen;              /* gen at the previous read */
    struct wattprof_proc cur;    /* as of the latest drain */
    bool taken;                  /* its exited entry was deleted when the drain read it */
    __u64 prev_count[WATTPROF_BPF_MAX_EVENTS], prev_enabled[WATTPROF_BPF_MAX_EVENTS],
        prev_running[WATTPROF_BPF_MAX_EVENTS];
};

/* The one loaded instance: the daemon's, used by its sampling thread only. */
static struct bpf_state {
    struct wattprof_bpf *skel;
    int *fds; /* n_cpus x (n_events + 1: the timer), -1 where not open */
    struct bpf_link **timer_links;
    size_t n_cpus, n_events;
    struct backend_handle *bucket[BUCKETS];
    struct wattprof_key *keys, *dead;
    struct wattprof_proc *vals;
    size_t n_dead, cap_dead;
    /* Entries of closed handles, deleted in one batch before the next
     * drain or open (a reused key must not find the old counts). */
    struct wattprof_key *closed;
    size_t n_closed, cap_closed;
    /* The entry drain_one offers for adoption, for bpf_open. */
    const struct wattprof_key *adopting_key;
    const struct wattprof_proc *adopting;
    /* The changed ring (bpf/wattprof.bpf.c) and its records of a drain,
     * first those whose adoption was deferred. */
    struct ring_buffer *ring;
    struct wattprof_change *changes;
    size_t n_changes, cap_changes;
    /* The final records of a drain (a FINAL change's pad is its index). */
    struct wattprof_final *finals;
    size_t n_finals, cap_finals;
    /* The exited entries the previous drain of the whole map took, sorted:
     * a final record sent just after it read them is not theirs to adopt. */
    struct wattprof_key *swept;
    size_t n_swept;
    __u64 ring_lost; /* the programs' count at the previous drain */
    bool drained;    /* the whole map once: what was there before the ring */
    bool lost;       /* records the daemon had no room for */
} B;

/* By thread group id alone: the handles of one pid (a reused one's old
 * and new process) share a bucket. */
static size_t bucket_of(const struct wattprof_key *k)
{
    return (size_t)k->tgid * 2654435761u % BUCKETS;
}

static struct backend_handle **find(const struct wattprof_key *k)
{
    struct backend_handle **p = &B.bucket[bucket_of(k)];

    while (*p && ((*p)->key.tgid != k->tgid || (*p)->key.start != k->start))
        p = &(*p)->next;
    return p;
}

/* The programs send the counts of a pid whose bit is set at each switch
 * (see wanted in bpf/wattprof.bpf.c); the bit stays while any handle has
 * that pid. */
static __u64 *wanted_word(__u32 tgid, __u64 *bit)
{
    *bit = 1ull << (tgid % 64);
    return tgid < WATTPROF_BPF_MAX_PIDS ? &B.skel->bss->wanted[tgid / 64] : NULL;
}

static void set_wanted(__u32 tgid, bool on)
{
    __u64 bit, *w = wanted_word(tgid, &bit);

    if (w && on)
        __atomic_fetch_or(w, bit, __ATOMIC_RELAXED);
    else if (w)
        __atomic_fetch_and(w, ~bit, __ATOMIC_RELAXED);
}

/* Whether /proc/PID/stat says the process has exited (a zombie its parent
 * has not waited for yet, or gone). */
static bool exited_already(pid_t pid)
{
    char path[64], buf[512], *p;
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return true;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return true;
    buf[n] = '\0';
    p = strrchr(buf, ')');
    return !p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X';
}

/* Deletes `n` entries of the map in batches; a key already gone is skipped. */
static void delete_keys(const struct wattprof_key *keys, size_t n)
{
    int fd = bpf_map__fd(B.skel->maps.procs);

    while (n > 0) {
        __u32 count = (__u32)n;
        if (bpf_map_delete_batch(fd, keys, &count, NULL) == 0)
            return;
        /* count: those deleted before the one that failed (not there). */
        count = count < n ? count + 1 : (__u32)n;
        keys += count;
        n -= count;
    }
}

static void flush_closed(void)
{
    delete_keys(B.closed, B.n_closed);
    B.n_closed = 0;
}

static int bpf_open(const sample_eventset *es, pid_t pid, uint64_t start, int cpu,
                    backend_handle **out, char *err, size_t errlen)
{
    struct wattprof_key k = {.tgid = (__u32)pid, .start = start};
    struct backend_handle *h;

    if (!B.skel)
        return util_err(err, errlen, -ENODEV, "bpf counter backend: pid %d: not loaded", (int)pid);
    if (pid <= 0 || cpu >= 0)
        return util_err(err, errlen, -EOPNOTSUPP,
                        "bpf counter backend: pid %d, CPU %d: only a process can be counted",
                        (int)pid, cpu);
    if (es->n != B.n_events)
        return util_err(err, errlen, -EINVAL,
                        "bpf counter backend: pid %d: %zu events asked, %zu loaded", (int)pid,
                        es->n, B.n_events);
    if (*find(&k))
        return util_err(err, errlen, -EEXIST,
                        "bpf counter backend: pid %d (start %llu): open twice", (int)pid,
                        (unsigned long long)start);
    if (!(h = calloc(1, sizeof(*h))))
        return -ENOMEM;
    h->key = k;
    /* What the kernel counted since the process started is its own: the
     * first read gives it (the drain fills cur before the read). A process
     * with no entry that has exited was taken already (adopted, then found
     * again as a zombie by a /proc rescan): nothing is left to read. */
    h->gen = 1;
    if (B.adopting && B.adopting_key->tgid == k.tgid && B.adopting_key->start == k.start) {
        h->cur = *B.adopting; /* the drain has it: no lookup */
    } else {
        flush_closed();
        if (bpf_map_lookup_elem(bpf_map__fd(B.skel->maps.procs), &k, &h->cur) < 0) {
            h->cur.exited = exited_already(pid);
        } else {
            /* Exited, but its final record (or deferred adoption) is to
             * come: that, into this handle, is its end (see drain_changed). */
            h->cur.exited = 0;
        }
    }
    h->next = B.bucket[bucket_of(&k)];
    B.bucket[bucket_of(&k)] = h;
    set_wanted(k.tgid, true);
    *out = h;
    return 0;
}

static int bpf_read(backend_handle *h, counters_delta *d)
{
    if (h->gen == h->read_gen) {
        d->skipped = true;
        return 0;
    }
    d->skipped = false;
    d->enabled_ns = 0;
    for (size_t e = 0; e < B.n_events; e++) {
        __u64 dc = h->cur.count[e] - h->prev_count[e], de = h->cur.enabled[e] - h->prev_enabled[e],
              dr = h->cur.running[e] - h->prev_running[e];
        d->scaled[e] = (double)dc;
        d->ratio[e] = de ? (double)dr / (double)de : 1.0;
        if (e == 0)
            d->enabled_ns = de;
        h->prev_count[e] = h->cur.count[e];
        h->prev_enabled[e] = h->cur.enabled[e];
        h->prev_running[e] = h->cur.running[e];
    }
    h->read_gen = h->gen;
    return 0;
}

static const __u64 *bpf_quiet_word(const backend_handle *h, __u64 *value)
{
    *value = h->read_gen;
    return &h->gen;
}

static bool bpf_alive(const backend_handle *h)
{
    return !h->cur.exited;
}

static int bpf_skip_error(const backend_handle *h)
{
    return 0;
}

static void bpf_close(backend_handle *h)
{
    if (!h)
        return;
    struct backend_handle **p = find(&h->key);
    if (*p == h)
        *p = h->next;
    if (B.skel) {
        struct backend_handle *o = B.bucket[bucket_of(&h->key)];
        while (o && o->key.tgid != h->key.tgid)
            o = o->next;
        if (!o)
            set_wanted(h->key.tgid, false);
    }
    /* Taken: an exited process's entry goes (unless its drain took it
     * already); a live one's starts again. */
    if (B.skel && !h->taken && B.n_closed == B.cap_closed)
        flush_closed();
    if (B.skel && !h->taken)
        B.closed[B.n_closed++] = h->key;
    free(h);
}

/* For bsearch and qsort of keys. */
static int key_cmp(const void *a, const void *b)
{
    const struct wattprof_key *x = a, *y = b;

    if (x->tgid != y->tgid)
        return x->tgid < y->tgid ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* One entry of the map: to its handle, or offered for adoption once it
 * exited; an exited one nobody takes is deleted after the drain, unless
 * `taken`: the drain deleted it as it read it. False when adopt deferred it
 * (it stays, or is put back, for a later drain). */
static bool drain_one(const struct wattprof_key *k, const struct wattprof_proc *v,
                      backend_adopt_fn adopt, void *ctx, bool taken)
{
    struct backend_handle *h = *find(k);

    if (!h && v->exited && adopt) {
        backend_orphan o = {.pid = (pid_t)k->tgid,
                            .start = k->start,
                            .uid = v->uid,
                            .ppid = (pid_t)v->ppid,
                            .cgroup_id = v->cgroup_id};
        memcpy(o.comm, v->comm, sizeof(o.comm));
        o.comm[sizeof(o.comm) - 1] = '\0';
        B.adopting_key = k;
        B.adopting = v;
        int r = adopt(ctx, &o);
        B.adopting = NULL;
        if (r == -EAGAIN) {
            if (taken) /* back for the drain that adopts it */
                bpf_map_update_elem(bpf_map__fd(B.skel->maps.procs), k, v, BPF_NOEXIST);
            return false;
        }
        h = *find(k);
    }
    if (!h) {
        if (v->exited && !taken && B.n_dead < B.cap_dead)
            B.dead[B.n_dead++] = *k;
        return true;
    }
    h->taken = taken;
    if (v->updates != h->cur.updates || (v->exited && !h->cur.exited)) {
        __u32 exited = h->cur.exited | v->exited; /* once exited, always */
        h->cur = *v;
        h->cur.exited = exited;
        h->gen++;
    }
    return true;
}

/* Every entry of the map, in batches: the first drain, and after the
 * changed ring was full. Deferred adoptions are among them. */
static int drain_all(backend_adopt_fn adopt, void *ctx)
{
    int fd = bpf_map__fd(B.skel->maps.procs);
    struct wattprof_key batch;
    bool first = true;
    int r;

    for (;;) {
        __u32 n = CHUNK;
        r = bpf_map_lookup_batch(fd, first ? NULL : &batch, &batch, B.keys, B.vals, &n, NULL);
        if (r < 0 && r != -ENOENT)
            return r;
        first = false;
        for (__u32 i = 0; i < n; i++) {
            /* Exited, its last thread not yet switched away: its final
             * record is still to come, and takes it. */
            if (B.vals[i].exited && !B.vals[i].finals)
                continue;
            if (!drain_one(&B.keys[i], &B.vals[i], adopt, ctx, false)) {
                if (B.n_changes < B.cap_changes)
                    B.changes[B.n_changes++] =
                        (struct wattprof_change){.key = B.keys[i], .kind = WATTPROF_CH_EXITED};
            } else if (B.vals[i].exited && B.n_swept < WATTPROF_BPF_MAX_PROCS) {
                B.swept[B.n_swept++] = B.keys[i];
            }
        }
        if (r == -ENOENT)
            break;
    }
    qsort(B.swept, B.n_swept, sizeof(*B.swept), key_cmp);
    return 0;
}

/* A wanted process's counts from the ring, into its handle: each field the
 * largest seen (a record written beside another thread's adds may hold an
 * older value of a field than the one before it). */
static void merge_counts(struct backend_handle *h, __u64 updates, const struct wattprof_ev *ev)
{
    if (updates > h->cur.updates)
        h->cur.updates = updates;
    for (size_t e = 0; e < B.n_events; e++) {
        if (ev[e].count > h->cur.count[e])
            h->cur.count[e] = ev[e].count;
        if (ev[e].enabled > h->cur.enabled[e])
            h->cur.enabled[e] = ev[e].enabled;
        if (ev[e].running > h->cur.running[e])
            h->cur.running[e] = ev[e].running;
    }
    h->gen++;
}

static void take_counts(const struct wattprof_counts *c)
{
    struct backend_handle *h = *find(&c->key);

    if (h && c->updates > h->cur.updates)
        merge_counts(h, c->updates, c->ev);
}

/* An exited process's final record: into its handle, or offered for
 * adoption as its entry; false when adopt deferred it (the entry stays for
 * a later drain's lookup). A record after the process's first that no
 * handle reads comes from a thread that switched after the process was
 * taken, and so does one for an entry the previous drain of the whole map
 * took: dropped, as a lookup would find no entry. The entry is deleted in
 * a batch: when the handle closes, or after this drain. */
static bool take_final(const struct wattprof_final *f, backend_adopt_fn adopt, void *ctx)
{
    struct backend_handle *h = *find(&f->key);
    struct wattprof_proc v = {.updates = f->updates,
                              .cgroup_id = f->cgroup_id,
                              .uid = f->uid,
                              .exited = 1,
                              .ppid = f->ppid,
                              .finals = f->finals};

    if (h) {
        merge_counts(h, f->updates, f->ev);
        h->cur.exited = 1;
        return true;
    }
    if (f->finals > 1 ||
        (B.n_swept && bsearch(&f->key, B.swept, B.n_swept, sizeof(*B.swept), key_cmp)))
        return true;
    for (size_t e = 0; e < B.n_events; e++) {
        v.count[e] = f->ev[e].count;
        v.enabled[e] = f->ev[e].enabled;
        v.running[e] = f->ev[e].running;
    }
    memcpy(v.comm, f->comm, sizeof(v.comm));
    return drain_one(&f->key, &v, adopt, ctx, false);
}

_Static_assert(WATTPROF_COUNTS_SIZE(WATTPROF_BPF_MAX_EVENTS) == sizeof(struct wattprof_counts),
               "WATTPROF_COUNTS_SIZE is the record's layout");
_Static_assert(WATTPROF_FINAL_SIZE(WATTPROF_BPF_MAX_EVENTS) == sizeof(struct wattprof_final),
               "WATTPROF_FINAL_SIZE is the record's layout");

/* One record of the changed ring: counts to their handle, the others kept
 * for the drain. */
static int take_change(void *ctx, void *data, size_t size)
{
    const struct wattprof_change *c = data;

    if (size >= WATTPROF_COUNTS_SIZE(B.n_events) && c->kind == WATTPROF_CH_COUNTS) {
        take_counts(data);
        return 0;
    }
    bool final = c->kind == WATTPROF_CH_FINAL;
    if (final && size >= WATTPROF_FINAL_SIZE(B.n_events) && B.n_finals < B.cap_finals &&
        B.n_changes < B.cap_changes) {
        memcpy(&B.finals[B.n_finals], data, WATTPROF_FINAL_SIZE(B.n_events));
        B.changes[B.n_changes++] = (struct wattprof_change){
            .key = c->key, .kind = WATTPROF_CH_FINAL, .pad = (__u32)B.n_finals++};
        return 0;
    }
    if (final || size < sizeof(*c) || B.n_changes == B.cap_changes) {
        B.drained = false; /* cannot be (see load); if it were, look at everything */
        B.lost = true;
        return 0;
    }
    B.changes[B.n_changes++] = *c;
    return 0;
}

/* A fork, exec or rename record, as the proc connector would tell it. */
static void hand_event(const struct wattprof_change *c, backend_event_fn event, void *ctx)
{
    static const procs_event_kind kind[] = {[WATTPROF_CH_FORK] = PROCS_EV_FORK,
                                            [WATTPROF_CH_EXEC] = PROCS_EV_EXEC,
                                            [WATTPROF_CH_COMM] = PROCS_EV_COMM};
    procs_event ev = {.kind = kind[c->kind], .pid = (pid_t)c->key.tgid};

    if (!event)
        return;
    memcpy(ev.comm, c->comm, sizeof(ev.comm));
    ev.comm[sizeof(ev.comm) - 1] = '\0';
    event(ctx, &ev);
}

/* Only the fork, exec and rename records of the ring, in order. */
static void hand_events(backend_event_fn event, void *ctx)
{
    for (size_t i = 0; i < B.n_changes; i++)
        if (B.changes[i].kind >= WATTPROF_CH_FORK && B.changes[i].kind <= WATTPROF_CH_COMM)
            hand_event(&B.changes[i], event, ctx);
}

/* The records of the ring in order: fork, exec and rename ones to `event`;
 * the entries the others name: those with a handle, and exited ones (to
 * adopt or delete); a live process nobody tracks needs no lookup. Exited
 * ones adopt deferred are kept, at the front, for the next drain. */
static void drain_changed(backend_adopt_fn adopt, backend_event_fn event, void *ctx)
{
    int fd = bpf_map__fd(B.skel->maps.procs);
    size_t kept = 0;
    struct wattprof_proc v;

    for (size_t i = 0; i < B.n_changes; i++) {
        const struct wattprof_change *c = &B.changes[i];
        if (c->kind >= WATTPROF_CH_FORK && c->kind <= WATTPROF_CH_COMM) {
            hand_event(c, event, ctx);
            continue;
        }
        if (c->kind == WATTPROF_CH_FINAL) {
            if (!take_final(&B.finals[c->pad], adopt, ctx))
                B.changes[kept++] =
                    (struct wattprof_change){.key = c->key, .kind = WATTPROF_CH_EXITED};
            continue;
        }
        bool exited = c->kind == WATTPROF_CH_EXITED;
        if (!exited && !*find(&c->key))
            continue;
        /* An exited process's entry is read and deleted in one call: its
         * threads have all passed their exit hook, and a dying thread's
         * last switch after this adds to no entry (as after the delete of a
         * taken one). Its final read comes this tick. */
        int r = exited ? bpf_map_lookup_and_delete_elem(fd, &c->key, &v)
                       : bpf_map_lookup_elem(fd, &c->key, &v);
        if (r < 0)
            continue; /* deleted already: an earlier record of a process taken since */
        /* Looked up, not taken: one that has exited since has its final
         * record still to come (or in the next drain's ring), and the
         * handle must be there to take it, or it would be adopted anew and
         * its counts taken twice. */
        if (!exited)
            v.exited = 0;
        if (!drain_one(&c->key, &v, adopt, ctx, exited))
            B.changes[kept++] = *c;
    }
    B.n_changes = kept;
}

static int bpf_drain(backend_adopt_fn adopt, backend_event_fn event, void *ctx)
{
    __u64 lost = __atomic_load_n(&B.skel->bss->ring_lost, __ATOMIC_RELAXED);
    int r = 0;

    flush_closed();
    B.n_dead = 0;
    B.n_finals = 0;
    /* From here on changes go to the next drain's records. */
    __atomic_add_fetch(&B.skel->bss->drain_gen, 1, __ATOMIC_SEQ_CST);
    int consumed = ring_buffer__consume(B.ring);
    if (consumed < 0 || lost != B.ring_lost || !B.drained) {
        /* Records were lost (or none yet): look at everything once; the
         * events among them are gone (the sampler rescans /proc). */
        bool missed = B.drained || consumed < 0 || lost != B.ring_lost || B.lost;
        /* The first time, with nothing lost: the forks and execs since the
         * load still count. The sampler's first rescan came before this
         * drain, and a process started in between (a job launched as the
         * daemon came up) would otherwise be seen only at its exit, without
         * the job its environment names. */
        if (!missed)
            hand_events(event, ctx);
        B.ring_lost = lost;
        B.drained = true;
        B.lost = false;
        B.n_changes = 0;
        B.n_swept = 0;
        r = drain_all(adopt, ctx);
        if (r == 0 && missed)
            r = 1;
    } else {
        drain_changed(adopt, event, ctx);
        B.n_swept = 0;
    }
    delete_keys(B.dead, B.n_dead);
    return r;
}

const backend backend_bpf = {
    .name = "bpf",
    .open = bpf_open,
    .read = bpf_read,
    .quiet_word = bpf_quiet_word,
    .alive = bpf_alive,
    .skip_error = bpf_skip_error,
    .close = bpf_close,
    .drain = bpf_drain,
};

static int perf_event_open(struct perf_event_attr *attr, int cpu)
{
    int fd = (int)syscall(SYS_perf_event_open, attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/* libbpf's own messages would go to stderr; the daemon says what failed. */
static int quiet_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    return 0;
}

/* Event e of the set on every CPU, into the events map. A CPU that is not
 * online (ENODEV) is left out: nothing runs there. */
static int open_event(const sample_eventset *es, size_t e, char *err, size_t errlen)
{
    int map = bpf_map__fd(B.skel->maps.events);

    for (size_t c = 0; c < B.n_cpus; c++) {
        struct perf_event_attr attr = es->ev[e].attr;
        attr.size = sizeof(attr);
        attr.disabled = 0;
        attr.inherit = 0;
        attr.read_format = 0;
        int fd = perf_event_open(&attr, (int)c);
        if (fd == -ENODEV)
            continue;
        if (fd < 0)
            return util_err(err, errlen, fd, "event %s on CPU %zu: %s", es->ev[e].name, c,
                            strerror(-fd));
        B.fds[c * (B.n_events + 1) + e] = fd;
        __u32 idx = (__u32)(e * B.n_cpus + c);
        int r = bpf_map_update_elem(map, &idx, &fd, BPF_ANY);
        if (r < 0)
            return util_err(err, errlen, r, "event %s on CPU %zu: into the map: %s", es->ev[e].name,
                            c, strerror(-r));
    }
    return 0;
}

/* The timer on every CPU that takes the running task's share each period. */
static int attach_timers(uint64_t period_ns, char *err, size_t errlen)
{
    for (size_t c = 0; c < B.n_cpus; c++) {
        struct perf_event_attr attr = {.type = PERF_TYPE_SOFTWARE,
                                       .size = sizeof(attr),
                                       .config = PERF_COUNT_SW_CPU_CLOCK,
                                       .sample_period = period_ns};
        int fd = perf_event_open(&attr, (int)c);
        if (fd == -ENODEV)
            continue;
        if (fd < 0)
            return util_err(err, errlen, fd, "timer on CPU %zu: %s", c, strerror(-fd));
        B.fds[c * (B.n_events + 1) + B.n_events] = fd;
        B.timer_links[c] = bpf_program__attach_perf_event(B.skel->progs.wattprof_timer, fd);
        if (!B.timer_links[c]) {
            int r = -errno;
            B.timer_links[c] = NULL;
            return util_err(err, errlen, r, "timer program on CPU %zu: %s", c, strerror(-r));
        }
    }
    return 0;
}

/* Where the programs count an event from: the software events the
 * scheduler also keeps in each thread from there (no counter read at the
 * switches), the others from their per-CPU counter. */
static __u32 source_of(const char *name)
{
    static const struct {
        const char *name;
        __u32 source;
    } from_task[] = {
        {"perf::TASK-CLOCK", WATTPROF_SRC_RUNTIME},
        {"perf::CONTEXT-SWITCHES", WATTPROF_SRC_SWITCHES},
        {"perf::CPU-MIGRATIONS", WATTPROF_SRC_MIGRATIONS},
        {"perf::PAGE-FAULTS", WATTPROF_SRC_FAULTS},
    };

    for (size_t i = 0; i < sizeof(from_task) / sizeof(from_task[0]); i++)
        if (strcmp(name, from_task[i].name) == 0)
            return from_task[i].source;
    return WATTPROF_SRC_COUNTER;
}

static int load(const sample_eventset *es, uint64_t period_ns, char *err, size_t errlen)
{
    int r, ncpu = libbpf_num_possible_cpus();

    if (ncpu <= 0 || ncpu > WATTPROF_BPF_MAX_CPUS)
        return util_err(err, errlen, -ERANGE, "%d possible CPUs: 1 to %d supported", ncpu,
                        WATTPROF_BPF_MAX_CPUS);
    if (es->n > WATTPROF_BPF_MAX_EVENTS)
        return util_err(err, errlen, -E2BIG, "%zu events: at most %d", es->n,
                        WATTPROF_BPF_MAX_EVENTS);
    B.n_cpus = (size_t)ncpu;
    B.n_events = es->n;
    B.fds = malloc(B.n_cpus * (B.n_events + 1) * sizeof(int));
    B.timer_links = calloc(B.n_cpus, sizeof(*B.timer_links));
    B.keys = calloc(CHUNK, sizeof(*B.keys));
    B.vals = calloc(CHUNK, sizeof(*B.vals));
    B.cap_dead = WATTPROF_BPF_MAX_PROCS;
    B.dead = calloc(B.cap_dead, sizeof(*B.dead));
    B.cap_closed = CHUNK;
    B.closed = calloc(B.cap_closed, sizeof(*B.closed));
    /* Deferred ones and a full ring's worth (a record takes its size and an
     * 8-byte header). */
    B.cap_changes = WATTPROF_BPF_MAX_PROCS + WATTPROF_BPF_RING_BYTES / (sizeof(*B.changes) + 8);
    B.changes = calloc(B.cap_changes, sizeof(*B.changes));
    B.cap_finals = WATTPROF_BPF_RING_BYTES / (WATTPROF_FINAL_SIZE(es->n) + 8);
    B.finals = calloc(B.cap_finals, sizeof(*B.finals));
    B.swept = calloc(WATTPROF_BPF_MAX_PROCS, sizeof(*B.swept));
    if (!B.fds || !B.timer_links || !B.keys || !B.vals || !B.dead || !B.closed || !B.changes ||
        !B.finals || !B.swept)
        return -ENOMEM;
    for (size_t i = 0; i < B.n_cpus * (B.n_events + 1); i++)
        B.fds[i] = -1;
    libbpf_set_print(quiet_print);
    if (!(B.skel = wattprof_bpf__open()))
        return util_err(err, errlen, -errno, "opening the BPF object: %s", strerror(errno));
    B.skel->rodata->nr_cpus = (__u32)B.n_cpus;
    B.skel->rodata->nr_events = (__u32)B.n_events;
    for (size_t e = 0; e < B.n_events; e++) {
        B.skel->rodata->source[e] = source_of(es->ev[e].name);
        B.skel->rodata->nr_counters += B.skel->rodata->source[e] == WATTPROF_SRC_COUNTER;
    }
    struct stat ns;
    if (stat("/proc/self/ns/pid", &ns) < 0)
        return util_err(err, errlen, -errno, "/proc/self/ns/pid: %s", strerror(errno));
    B.skel->rodata->pidns_inum = (__u32)ns.st_ino;
    if ((r = wattprof_bpf__load(B.skel)) < 0)
        return util_err(err, errlen, r, "loading the BPF programs: %s%s", strerror(-r),
                        r == -EPERM ? " (needs CAP_BPF and CAP_PERFMON)" : "");
    for (size_t e = 0; e < B.n_events; e++)
        if (B.skel->rodata->source[e] == WATTPROF_SRC_COUNTER &&
            (r = open_event(es, e, err, errlen)) < 0)
            return r;
    if (!(B.ring = ring_buffer__new(bpf_map__fd(B.skel->maps.changed), take_change, NULL, NULL)))
        return util_err(err, errlen, -errno, "the changed ring: %s", strerror(errno));
    if ((r = wattprof_bpf__attach(B.skel)) < 0)
        return util_err(err, errlen, r, "attaching the BPF programs: %s", strerror(-r));
    return attach_timers(period_ns, err, errlen);
}

int backend_bpf_load(const sample_eventset *es, uint64_t period_ns, char *err, size_t errlen)
{
    char why[UTIL_ERRLEN];
    int r;

    if (B.skel)
        return util_err(err, errlen, -EBUSY, "bpf counter backend: loaded already");
    if ((r = load(es, period_ns, why, sizeof(why))) < 0) {
        if (r == -ENOMEM)
            snprintf(why, sizeof(why), "out of memory");
        backend_bpf_unload();
        return util_err(err, errlen, r, "bpf counter backend: %s", why);
    }
    return 0;
}

void backend_bpf_unload(void)
{
    for (size_t c = 0; B.timer_links && c < B.n_cpus; c++)
        bpf_link__destroy(B.timer_links[c]);
    ring_buffer__free(B.ring);
    wattprof_bpf__destroy(B.skel);
    for (size_t i = 0; B.fds && i < B.n_cpus * (B.n_events + 1); i++)
        if (B.fds[i] >= 0)
            close(B.fds[i]);
    /* Handles stay their owners' to close (close after unload only frees). */
    free(B.fds);
    free(B.timer_links);
    free(B.keys);
    free(B.vals);
    free(B.dead);
    free(B.closed);
    free(B.changes);
    free(B.finals);
    free(B.swept);
    memset(&B, 0, sizeof(B));
}

uint64_t backend_bpf_overflows(void)
{
    __u32 k = 0;
    __u64 v = 0;

    if (B.skel)
        bpf_map_lookup_elem(bpf_map__fd(B.skel->maps.errors), &k, &v);
    return v;
}

bool backend_bpf_wanted(pid_t pid)
{
    __u64 bit, *w = B.skel && pid > 0 ? wanted_word((__u32)pid, &bit) : NULL;

    return w && (__atomic_load_n(w, __ATOMIC_RELAXED) & bit);
}

#else /* built without libbpf */

static int bpf_open(const sample_eventset *es, pid_t pid, uint64_t start, int cpu,
                    backend_handle **out, char *err, size_t errlen)
{
    return util_err(err, errlen, -ENODEV, "bpf counter backend: pid %d: not loaded (not built)",
                    (int)pid);
}

static void bpf_close(backend_handle *h)
{
}

const backend backend_bpf = {.name = "bpf", .open = bpf_open, .close = bpf_close};

int backend_bpf_load(const sample_eventset *es, uint64_t period_ns, char *err, size_t errlen)
{
    return util_err(err, errlen, -EOPNOTSUPP,
                    "bpf counter backend: wattprofd was built without it (meson -Dbpf)");
}

void backend_bpf_unload(void)
{
}

uint64_t backend_bpf_overflows(void)
{
    return 0;
}

bool backend_bpf_wanted(pid_t pid)
{
    return false;
}

#endif
