/* counters: per-task perf counter groups, read in one read() per group.
 *
 * Each group is opened with PERF_FORMAT_GROUP | TOTAL_TIME_ENABLED |
 * TOTAL_TIME_RUNNING, so one read() returns every member's count together
 * with how long the group was enabled and how long it was really on the
 * PMU. When the kernel multiplexes groups, running < enabled and the delta
 * is scaled by enabled/running; the ratio is kept so users see how much of
 * a number is estimated.
 *
 * A process's threads that exist before opening are not inherited, so a
 * set of groups is opened per existing thread and their deltas are summed;
 * threads created later are inherited (inherit + inherit_thread).
 *
 * With COUNTERS_SKIP_IDLE a runwatch (runwatch.c) says when no thread has
 * been on a CPU since the previous read; the read() is then skipped and the
 * delta is the zero it would have returned. */
#include "sample/runwatch.h"
#include "sample/sample.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef PERF_FLAG_FD_CLOEXEC
#define PERF_FLAG_FD_CLOEXEC (1UL << 3)
#endif

/* Descriptors counters leave free below the limit of open files. */
#define COUNTERS_FD_RESERVE 256

/* Retries of a group read that fails with ECHILD (see counters_read_group). */
#define COUNTERS_ECHILD_TRIES 10

/* One group of events open on one thread. */
struct counters_group {
    int *fds; /* members in open order; fds[0] is the leader */
    size_t n;
    const size_t *event; /* member i counts event event[i] of the set */
    uint64_t *prev;      /* previous raw reading: {nr, enabled, running, values...} */
};

struct counters_proc {
    const sample_eventset *es;
    pid_t pid;
    int pidfd;                /* readable once the process exits; immune to pid reuse */
    struct counters_group *g; /* n_threads * es->n_groups */
    size_t n_g;
    size_t *members;     /* event indexes ordered by group: shared by all groups */
    size_t *group_first; /* offset of each group's members in `members` */
    size_t *group_size;
    uint64_t *buf; /* read buffer for the largest group */
    size_t buf_words;
    double *total_scaled, *total_ratio;
    uint64_t *total_enabled, *total_running; /* per event */
    runwatch *rw;                            /* NULL: read every time */
    int rw_error;                            /* why there is no runwatch under COUNTERS_SKIP_IDLE */
    long fd_ceiling; /* a counter's descriptor at or above this is refused (EMFILE) */
};

static int counters_layout(counters_proc *p)
{
    const sample_eventset *es = p->es;
    size_t k = 0, largest = 0;

    p->members = calloc(es->n, sizeof(size_t));
    p->group_first = calloc(es->n_groups, sizeof(size_t));
    p->group_size = calloc(es->n_groups, sizeof(size_t));
    if (!p->members || !p->group_first || !p->group_size)
        return -ENOMEM;
    for (unsigned g = 0; g < es->n_groups; g++) {
        p->group_first[g] = k;
        for (size_t i = 0; i < es->n; i++)
            if (es->ev[i].group == g)
                p->members[k++] = i;
        p->group_size[g] = k - p->group_first[g];
        if (p->group_size[g] > largest)
            largest = p->group_size[g];
    }
    p->buf_words = 3 + largest;
    p->buf = calloc(p->buf_words, sizeof(uint64_t));
    p->total_scaled = calloc(es->n, sizeof(double));
    p->total_ratio = calloc(es->n, sizeof(double));
    p->total_enabled = calloc(es->n, sizeof(uint64_t));
    p->total_running = calloc(es->n, sizeof(uint64_t));
    if (!p->buf || !p->total_scaled || !p->total_ratio || !p->total_enabled || !p->total_running)
        return -ENOMEM;
    return 0;
}

static int counters_open_group(counters_proc *p, struct counters_group *grp, unsigned g, pid_t tid,
                               unsigned flags, char *err, size_t errlen)
{
    const sample_eventset *es = p->es;

    grp->n = p->group_size[g];
    grp->event = p->members + p->group_first[g];
    grp->fds = malloc(grp->n * sizeof(int));
    grp->prev = calloc(3 + grp->n, sizeof(uint64_t));
    if (!grp->fds || !grp->prev)
        return -ENOMEM;
    for (size_t m = 0; m < grp->n; m++)
        grp->fds[m] = -1;
    for (size_t m = 0; m < grp->n; m++) {
        const sample_event *ev = &es->ev[grp->event[m]];
        struct perf_event_attr attr = ev->attr;
        attr.read_format =
            PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
        attr.inherit = 1;
        attr.inherit_thread = !(flags & COUNTERS_CHILDREN);
        /* Only the leader's state matters: members follow it. */
        attr.disabled = m == 0 && (flags & COUNTERS_ENABLE_ON_EXEC);
        attr.enable_on_exec = m == 0 && (flags & COUNTERS_ENABLE_ON_EXEC);
        int fd = (int)syscall(SYS_perf_event_open, &attr, tid, -1, m ? grp->fds[0] : -1,
                              PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            return util_err(err, errlen, -e, "event '%s' on task %d: %s", ev->name, (int)tid,
                            strerror(e));
        }
        grp->fds[m] = fd;
        /* The kernel hands out the lowest free descriptor, so one this
         * high means fewer than COUNTERS_FD_RESERVE are left free. */
        if (fd >= p->fd_ceiling)
            return util_err(err, errlen, -EMFILE,
                            "event '%s' on task %d: descriptor %d is within the %d kept free "
                            "below the limit of open files (%ld)",
                            ev->name, (int)tid, fd, COUNTERS_FD_RESERVE,
                            p->fd_ceiling + COUNTERS_FD_RESERVE);
    }
    return 0;
}

/* Where counters stop: the soft limit of open files less a reserve, so that
 * counting many processes never takes the last descriptors from the
 * database, its temporary files and the clients' sockets. */
static long counters_fd_ceiling(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur > (rlim_t)INT_MAX)
        return INT_MAX;
    return (long)rl.rlim_cur - COUNTERS_FD_RESERVE;
}

/* Threads of `pid` now; with COUNTERS_CHILDREN only the task itself. */
static int counters_list_threads(pid_t pid, unsigned flags, pid_t **tids, size_t *n)
{
    char path[64];
    DIR *d;
    struct dirent *de;
    size_t cap = 8;
    pid_t *v = malloc(cap * sizeof(pid_t));

    if (!v)
        return -ENOMEM;
    *n = 0;
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    if ((flags & COUNTERS_CHILDREN) || !(d = opendir(path))) {
        v[(*n)++] = pid;
        *tids = v;
        return 0;
    }
    while ((de = readdir(d))) {
        long tid;
        if (util_parse_long(de->d_name, &tid) < 0)
            continue;
        if (*n == cap) {
            pid_t *nv = realloc(v, (cap *= 2) * sizeof(pid_t));
            if (!nv) {
                closedir(d);
                free(v);
                return -ENOMEM;
            }
            v = nv;
        }
        v[(*n)++] = (pid_t)tid;
    }
    closedir(d);
    *tids = v;
    return *n ? 0 : -ESRCH;
}

int counters_open(const sample_eventset *es, pid_t pid, unsigned flags, counters_proc **out,
                  char *err, size_t errlen)
{
    counters_proc *p = calloc(1, sizeof(*p));
    pid_t *tids = NULL;
    size_t n_tids = 0;
    int r;

    if (!p)
        return -ENOMEM;
    p->es = es;
    p->pid = pid;
    p->fd_ceiling = counters_fd_ceiling();
    p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    r = p->pidfd < 0 ? -errno : counters_layout(p);
    if (r < 0)
        util_err(err, errlen, r, "task %d: %s", (int)pid, strerror(-r));
    if (r == 0)
        r = counters_list_threads(pid, flags, &tids, &n_tids);
    if (r == 0 && !(p->g = calloc(n_tids * es->n_groups, sizeof(*p->g))))
        r = -ENOMEM;
    for (size_t t = 0; r == 0 && t < n_tids; t++)
        for (unsigned g = 0; r == 0 && g < es->n_groups; g++) {
            r = counters_open_group(p, &p->g[p->n_g++], g, tids[t], flags, err, errlen);
            /* A thread that exited between listing and opening is fine. */
            if (r == -ESRCH && tids[t] != pid) {
                r = 0;
                break;
            }
        }
    free(tids);
    if (r < 0) {
        counters_close(p);
        return r;
    }
    /* Opened after the counters: what ran before the first look is in the
     * first read anyway, since a buffer without records means "unknown". */
    if (flags & COUNTERS_SKIP_IDLE)
        p->rw_error = runwatch_open(pid, &p->rw);
    *out = p;
    return 0;
}

void counters_close(counters_proc *p)
{
    if (!p)
        return;
    if (p->pidfd >= 0)
        close(p->pidfd);
    runwatch_close(p->rw);
    for (size_t i = 0; i < p->n_g; i++) {
        struct counters_group *grp = &p->g[i];
        for (size_t m = 0; grp->fds && m < grp->n; m++)
            if (grp->fds[m] >= 0)
                close(grp->fds[m]);
        free(grp->fds);
        free(grp->prev);
    }
    free(p->g);
    free(p->members);
    free(p->group_first);
    free(p->group_size);
    free(p->buf);
    free(p->total_scaled);
    free(p->total_ratio);
    free(p->total_enabled);
    free(p->total_running);
    free(p);
}

int counters_delta_new(const sample_eventset *es, counters_delta *d)
{
    d->scaled = calloc(es->n, sizeof(double));
    d->ratio = calloc(es->n, sizeof(double));
    d->enabled_ns = 0;
    d->skipped = false;
    if (!d->scaled || !d->ratio) {
        counters_delta_free(d);
        return -ENOMEM;
    }
    return 0;
}

void counters_delta_free(counters_delta *d)
{
    free(d->scaled);
    free(d->ratio);
    d->scaled = d->ratio = NULL;
}

void counters_scale_group(const uint64_t *prev, const uint64_t *now, const size_t *event,
                          double *scaled, uint64_t *enabled, uint64_t *running)
{
    uint64_t de = now[1] - prev[1], dr = now[2] - prev[2];

    for (uint64_t m = 0; m < now[0]; m++) {
        uint64_t dv = now[3 + m] - prev[3 + m];
        size_t ev = event[m];
        if (dr > 0)
            scaled[ev] += (double)dv * ((double)de / (double)dr);
        enabled[ev] += de;
        running[ev] += dr;
    }
}

/* Adds one group's change since its previous read to the per-event sums. */
static int counters_read_group(counters_proc *p, struct counters_group *grp, double *scaled,
                               uint64_t *en, uint64_t *run, uint64_t *group0_enabled)
{
    size_t want = (3 + grp->n) * sizeof(uint64_t);
    ssize_t got;

    /* A read of an inherited group can fail with ECHILD while a child
     * task's events are being detached at its exit (kernel 6.18: in about
     * one run in five of a shell starting 20 commands, read every 1 ms).
     * The detach is brief: a retry after a short sleep read the group, the
     * child's counts folded in, every time it was seen (after 0.2-0.3 ms at
     * most); yielding instead took up to 30 tries. */
    for (int tries = 0;; tries++) {
        got = read(grp->fds[0], p->buf, want);
        if (got >= 0 || errno != ECHILD || tries == COUNTERS_ECHILD_TRIES)
            break;
        struct timespec ts = {0, 1000L << tries}; /* 1 us, doubling: 1 ms in all */
        nanosleep(&ts, NULL);
    }
    if (got < 0)
        return -errno;
    if (got == 0) /* group in error state: it could never be scheduled */
        return 0;
    if ((size_t)got != want || p->buf[0] != grp->n)
        return -EIO;
    counters_scale_group(grp->prev, p->buf, grp->event, scaled, en, run);
    if (grp->event == p->members)
        *group0_enabled += p->buf[1] - grp->prev[1];
    memcpy(grp->prev, p->buf, want);
    return 0;
}

/* Whether the read can be skipped; a broken watch is dropped for good. */
static bool counters_unchanged(counters_proc *p)
{
    int r;

    if (!p->rw)
        return false;
    r = runwatch_look(p->rw);
    if (r < 0) {
        p->rw_error = r;
        runwatch_close(p->rw);
        p->rw = NULL;
    }
    return r == 1;
}

int counters_read(counters_proc *p, counters_delta *d)
{
    const size_t n = p->es->n;
    uint64_t en[n], run[n], en_sum = 0;

    memset(en, 0, sizeof(en));
    memset(run, 0, sizeof(run));
    memset(d->scaled, 0, n * sizeof(double));
    d->enabled_ns = 0;
    d->skipped = counters_unchanged(p);
    if (d->skipped) {
        /* What the read would have returned: nothing enabled, nothing run. */
        for (size_t ev = 0; ev < n; ev++)
            d->ratio[ev] = 1.0;
        return 0;
    }
    for (size_t i = 0; i < p->n_g; i++) {
        int r = counters_read_group(p, &p->g[i], d->scaled, en, run, &d->enabled_ns);
        if (r < 0)
            return r;
    }
    for (size_t ev = 0; ev < n; ev++) {
        /* A task that did not run has nothing to scale: report it as fully
         * counted rather than as missing. */
        d->ratio[ev] = en[ev] ? (double)run[ev] / (double)en[ev] : 1.0;
        p->total_scaled[ev] += d->scaled[ev];
        p->total_enabled[ev] += en[ev];
        p->total_running[ev] += run[ev];
        p->total_ratio[ev] = p->total_enabled[ev]
                                 ? (double)p->total_running[ev] / (double)p->total_enabled[ev]
                                 : 1.0;
        en_sum += en[ev];
    }
    if (p->rw)
        runwatch_settle(p->rw, en_sum != 0);
    return 0;
}

int counters_skip_error(const counters_proc *p)
{
    return p->rw ? 0 : p->rw_error;
}

void counters_totals(const counters_proc *p, const double **scaled, const double **ratio)
{
    *scaled = p->total_scaled;
    *ratio = p->total_ratio;
}

bool counters_alive(const counters_proc *p)
{
    /* Not the perf fds: without a ring buffer they always poll POLLHUP. */
    struct pollfd pfd = {.fd = p->pidfd, .events = POLLIN};
    return poll(&pfd, 1, 0) == 0;
}

const __u64 *counters_quiet_word(const counters_proc *p, __u64 *value)
{
    return p->rw ? runwatch_quiet_word(p->rw, value) : NULL;
}
