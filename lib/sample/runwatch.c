/* runwatch: whether any thread of a process can have run since the last
 * look, answered from shared memory without a system call.
 *
 * Reading a counter group costs a read() (about 1.7 us on a VM); most
 * processes on a host sleep through most 20 ms ticks, and for them the read
 * returns exactly what the previous one did. The kernel tells us when a task
 * is switched in or out: a software "dummy" event with context_switch = 1
 * writes a PERF_RECORD_SWITCH into its ring buffer each time (misc has
 * PERF_RECORD_MISC_SWITCH_OUT when it leaves the CPU), and with task = 1 a
 * PERF_RECORD_FORK/EXIT when the task clones or exits. Mapped PROT_READ the
 * buffer is in overwrite mode, so nothing ever has to be consumed.
 *
 * The counting events cannot carry that buffer: they are inherited by new
 * threads, and the kernel refuses to mmap an inherited per-task event
 * (perf_mmap: EINVAL). So there is one non-inherited dummy event per thread,
 * opened on every thread /proc/PID/task lists, and again whenever a FORK
 * record says the process made a new thread.
 *
 * A thread is known to be off the CPU when its last record is a switch-out
 * or its exit. Its counts (and a per-task event's enabled/running times)
 * then cannot change until a switch-in, which moves data_head. A thread
 * whose buffer has no record yet (a sleeper we just opened) is unknown until
 * counters.c sees a read across which no time was enabled and no record
 * arrived (runwatch_settle).
 *
 * Ordering: the switch-out record is written before the task's counters stop,
 * but both happen with interrupts off on that CPU, and read() of an active
 * event is an IPI to it (or takes the context lock), so a read issued after a
 * look that saw the switch-out returns the final counts. */
#include "sample/runwatch.h"

#include <dirent.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/util.h"

#ifndef PERF_FLAG_FD_CLOEXEC
#define PERF_FLAG_FD_CLOEXEC (1UL << 3)
#endif

/* Room left for records the kernel has reserved but not yet published. */
#define RUNWATCH_SLACK 256

enum runwatch_state { RW_UNKNOWN, RW_OFF, RW_ON, RW_EXITED };

struct runwatch_thread {
    pid_t tid;
    int fd;
    struct perf_event_mmap_page *page; /* header page, then one data page */
    uint64_t head;                     /* data_head at the previous look */
    enum runwatch_state state;
};

struct runwatch {
    pid_t pid;
    size_t page_size;
    struct runwatch_thread *t;
    size_t n, cap;
    bool saw_records; /* the latest look found new records */
};

static int runwatch_add_thread(runwatch *w, pid_t tid)
{
    struct perf_event_attr attr = {
        .size = sizeof(attr),
        .type = PERF_TYPE_SOFTWARE,
        .config = PERF_COUNT_SW_DUMMY,
        .context_switch = 1,
        .task = 1,
        /* Needed by unprivileged callers under perf_event_paranoid 2; the
         * switch records do not depend on it. */
        .exclude_kernel = 1,
        .exclude_hv = 1,
    };
    struct runwatch_thread *th;
    int fd;

    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 4;
        struct runwatch_thread *v = realloc(w->t, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        w->t = v;
        w->cap = cap;
    }
    fd = (int)syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0)
        return -errno;
    void *m = mmap(NULL, 2 * w->page_size, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        int e = errno;
        close(fd);
        return -e;
    }
    th = &w->t[w->n++];
    *th = (struct runwatch_thread){.tid = tid, .fd = fd, .page = m, .state = RW_UNKNOWN};
    return 0;
}

/* A tid of an exited thread may come back as a new thread. */
static bool runwatch_has(const runwatch *w, pid_t tid)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->t[i].tid == tid && w->t[i].state != RW_EXITED)
            return true;
    return false;
}

static void runwatch_drop_exited(runwatch *w)
{
    size_t k = 0;

    for (size_t i = 0; i < w->n; i++) {
        if (w->t[i].state == RW_EXITED) {
            munmap(w->t[i].page, 2 * w->page_size);
            close(w->t[i].fd);
        } else {
            w->t[k++] = w->t[i];
        }
    }
    w->n = k;
}

/* Opens a buffer on every thread that has none, listing /proc/PID/task until
 * a listing finds nothing new: a thread made before its creator's buffer
 * existed left no FORK record, but it shows up in the next listing. */
static int runwatch_sync_threads(runwatch *w)
{
    char path[64];
    bool added = true;

    runwatch_drop_exited(w);
    snprintf(path, sizeof(path), "/proc/%d/task", (int)w->pid);
    while (added) {
        DIR *d = opendir(path);
        struct dirent *de;
        int r = 0;

        if (!d)
            return -errno;
        added = false;
        while (r == 0 && (de = readdir(d))) {
            long tid;
            if (util_parse_long(de->d_name, &tid) < 0 || runwatch_has(w, (pid_t)tid))
                continue;
            r = runwatch_add_thread(w, (pid_t)tid);
            if (r == -ESRCH) /* exited since the listing */
                r = 0;
            else if (r == 0)
                added = true;
        }
        closedir(d);
        if (r < 0)
            return r;
    }
    return 0;
}

int runwatch_open(pid_t pid, runwatch **out)
{
    runwatch *w = calloc(1, sizeof(*w));
    int r;

    if (!w)
        return -ENOMEM;
    w->pid = pid;
    w->page_size = (size_t)sysconf(_SC_PAGESIZE);
    r = runwatch_sync_threads(w);
    if (r == 0 && w->n == 0)
        r = -ESRCH;
    if (r < 0) {
        runwatch_close(w);
        return r;
    }
    *out = w;
    return 0;
}

void runwatch_close(runwatch *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n; i++) {
        munmap(w->t[i].page, 2 * w->page_size);
        close(w->t[i].fd);
    }
    free(w->t);
    free(w);
}

/* Copies `len` bytes at ring position `pos`, across the wrap (the data
 * area's size is a power of two, and len never exceeds it). */
static void runwatch_copy(const struct runwatch_thread *th, uint64_t pos, void *dst, size_t len)
{
    const unsigned char *data = (const unsigned char *)th->page + th->page->data_offset;
    uint64_t size = th->page->data_size;
    size_t at = (size_t)(pos & (size - 1)), first = len < size - at ? len : (size_t)(size - at);

    memcpy(dst, data + at, first);
    memcpy((unsigned char *)dst + first, data, len - first);
}

/* One record: updates the thread's state; *new_thread when it cloned a
 * thread of the same process. Returns the record's size, 0 if malformed. */
static size_t runwatch_record(struct runwatch_thread *th, uint64_t pos, bool *new_thread)
{
    struct perf_event_header h;
    struct {
        uint32_t pid, ppid, tid, ptid;
    } task;

    runwatch_copy(th, pos, &h, sizeof(h));
    if (h.size < sizeof(h) || h.size % 8)
        return 0;
    switch (h.type) {
    case PERF_RECORD_SWITCH:
        if (th->state != RW_EXITED)
            th->state = (h.misc & PERF_RECORD_MISC_SWITCH_OUT) ? RW_OFF : RW_ON;
        break;
    case PERF_RECORD_EXIT:
        th->state = RW_EXITED; /* an exiting task leaves no switch-out */
        break;
    case PERF_RECORD_FORK:
        if (h.size < sizeof(h) + sizeof(task))
            return 0;
        runwatch_copy(th, pos + sizeof(h), &task, sizeof(task));
        if (task.pid == task.ppid)
            *new_thread = true;
        break;
    default:
        break;
    }
    return h.size;
}

/* Takes in one thread's new records. Returns true when they cannot all be
 * trusted (overwritten before or while we read them). */
static bool runwatch_take(struct runwatch_thread *th, uint64_t head, bool *new_thread)
{
    uint64_t size = th->page->data_size;
    uint64_t pos = th->head;

    if (head - pos > size - RUNWATCH_SLACK)
        return true;
    while (pos < head) {
        size_t len = runwatch_record(th, pos, new_thread);
        if (len == 0 || len > head - pos)
            return true;
        pos += len;
    }
    /* The records we copied must not have been overwritten meanwhile. */
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&th->page->data_head, __ATOMIC_ACQUIRE) - th->head >
           size - RUNWATCH_SLACK;
}

int runwatch_look(runwatch *w)
{
    bool new_thread = false, lost = false, idle = true;

    w->saw_records = false;
    for (size_t i = 0; i < w->n; i++) {
        struct runwatch_thread *th = &w->t[i];
        uint64_t head = __atomic_load_n(&th->page->data_head, __ATOMIC_ACQUIRE);

        if (head != th->head) {
            w->saw_records = true;
            if (runwatch_take(th, head, &new_thread)) {
                th->state = RW_UNKNOWN;
                lost = true; /* a FORK may be among the lost records */
            }
            th->head = head;
        }
        if (th->state == RW_ON || th->state == RW_UNKNOWN)
            idle = false;
    }
    if (new_thread || lost) {
        int r = runwatch_sync_threads(w);
        if (r < 0 && r != -ENOENT) /* ENOENT: the whole process is gone */
            return r;
        idle = false;
    }
    return idle && !w->saw_records;
}

void runwatch_settle(runwatch *w, bool time_passed)
{
    if (w->saw_records || time_passed)
        return;
    for (size_t i = 0; i < w->n; i++)
        if (w->t[i].state == RW_UNKNOWN)
            w->t[i].state = RW_OFF;
}

const __u64 *runwatch_quiet_word(const runwatch *w, __u64 *value)
{
    if (w->n != 1 || w->t[0].state != RW_OFF)
        return NULL;
    *value = w->t[0].head;
    return &w->t[0].page->data_head;
}
