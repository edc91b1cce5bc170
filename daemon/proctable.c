/* proctable: which processes the sampler tracks.
 *
 * Processes are found as they fork (the proc connector's events, handled
 * between ticks so that a child that lives 5 ms is seen; with the bpf
 * backend its hooks' events, handed over at each drain) and by rescans of
 * /proc (every [sampler] rescan_s, at once after the kernel dropped events,
 * and every second without the connector). A process is tracked when
 * [track] wants it and its counters open; an exec or a PR_SET_NAME renames
 * it (its energy from then on goes to the new command's group), and an exit
 * marks it gone: the next tick reads it a last time, then proctable_reap
 * closes it. The systemd unit is read once, when it is first tracked. The
 * batch job comes from the cgroup path (Slurm's job_<id>), else from the
 * [exporter] job_env variables, read at fork and again after each exec (a
 * shell's `export SLURM_JOB_ID=5151; ./burn` sets it only for the exec),
 * else from the parent: children inherit their parent's job. Every tracked
 * process is described to the store and to the --record file. */
#include "sampler-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The part of track_wanted that /proc/PID/stat alone answers. Most
 * processes a busy host forks fail it, so they cost one small read, not the
 * four files of procs_read_info. */
static bool track_wanted_stat(const sampler *s, const procs_info *info)
{
    if (info->kernel_thread)
        return false;
    return !s->comm_re || util_regex_match(s->comm_re, info->comm) > 0;
}

bool proctable_wanted(const sampler *s, const procs_info *info)
{
    const config *c = s->cfg;

    if (!track_wanted_stat(s, info))
        return false;
    if (c->n_track_uids) {
        bool ok = false;
        for (size_t i = 0; i < c->n_track_uids; i++)
            ok |= info->uid == c->track_uids[i];
        if (!ok)
            return false;
    }
    if (c->track_cgroup &&
        (!info->cgroup || strncmp(info->cgroup, c->track_cgroup, strlen(c->track_cgroup)) != 0))
        return false;
    return true;
}

static struct tracked *find(sampler *s, pid_t pid)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->procs[i]->pid == pid && !s->procs[i]->gone)
            return s->procs[i];
    return NULL;
}

void proctable_free_tracked(sampler *s, struct tracked *t)
{
    if (!t)
        return;
    s->be->close(t->ch);
    procs_info_clear(&t->pending);
    free(t); /* its delta and ratio arrays with it */
}

live_proc proctable_to_live(const struct tracked *t)
{
    live_proc p = {.pid = t->pid,
                   .start_time = t->start,
                   .uid = t->uid,
                   .klass = t->klass,
                   .power_w = t->last_w,
                   .standalone_w = t->last_standalone_w,
                   .cpu = t->last_cpu,
                   .total_j = t->total_j,
                   .total_standalone_j = t->total_standalone_j,
                   .total_cpu_s = t->total_cpu_s};

    memcpy(p.comm, t->comm, sizeof(p.comm));
    memcpy(p.unit, t->unit, sizeof(p.unit));
    memcpy(p.job, t->job, sizeof(p.job));
    return p;
}

/* The group a process's energy goes to from now on: after an exec, what it
 * used so far stays with its old command. */
void proctable_join_group(sampler *s, struct tracked *t)
{
    account_settle_idle(s, t);
    t->has_group = groups_find(&s->groups, t->uid, t->comm, t->unit, t->job, &t->group) == 0;
    if (!t->has_group)
        log_warning("out of memory: the exporter does not count pid %d", (int)t->pid);
}

/* A recording carries the job a replay cannot read from the environment;
 * one in the cgroup path the record carries is left to the replay to read
 * there (the path was parsed once, when the process was first tracked). */
static void record_proc(sampler *s, const procs_info *info, const struct tracked *t)
{
    procs_info rec = *info;

    snprintf(rec.job, sizeof(rec.job), "%s", info->cgroup && t->job_in_cgroup ? "" : t->job);
    trace_write_proc(s->rec, &rec);
}

/* A tracked process's description (new, or renamed) to the store, and to the
 * recording. */
static void describe_tracked(sampler *s, const struct tracked *t, const procs_info *info)
{
    store_proc_info pi = {.t_ns = sampler_clock(s),
                          .pid = t->pid,
                          .start_time = t->start,
                          .comm = info->comm,
                          .cmdline = info->cmdline,
                          .cgroup = info->cgroup,
                          .job = t->job,
                          .uid = info->uid};
    store_push_proc_info(s->st, &pi);
    if (s->rec)
        record_proc(s, info, t);
}

/* A child outside any job of its own takes its parent's, if the parent is
 * tracked (a job's shell and everything it starts); one whose cgroup was
 * never read (adopted after it exited) takes its unit too, since a child
 * starts in its parent's cgroup. */
static void inherit_labels(sampler *s, struct tracked *t, pid_t ppid, bool job, bool unit)
{
    for (size_t i = 0; ppid > 0 && i < s->n; i++)
        if (s->procs[i]->pid == ppid && !s->procs[i]->gone) {
            if (job)
                memcpy(t->job, s->procs[i]->job, sizeof(t->job));
            if (unit)
                memcpy(t->unit, s->procs[i]->unit, sizeof(t->unit));
            return;
        }
}

/* After an exec: the job the new environment names, unless the cgroup
 * gave one. True when it changed. An environment without the variables
 * keeps the job it had (inherited, or set before). */
static bool reread_job(sampler *s, struct tracked *t)
{
    char job[LABELS_JOB_MAX] = "";

    if (t->job_in_cgroup || !t->ch || s->cfg->n_job_env == 0)
        return false;
    labels_job_environ(t->pid, s->cfg->job_env, s->cfg->n_job_env, job);
    if (!job[0] || strcmp(job, t->job) == 0)
        return false;
    memcpy(t->job, job, sizeof(t->job));
    return true;
}

int proctable_add(sampler *s, const procs_info *info, backend_handle *ch)
{
    /* One allocation: under churn a process is tracked and dropped within
     * a few ticks, and each allocation is one more per process start. */
    struct tracked *t = calloc(1, sizeof(*t) + 2 * s->es->n * sizeof(double));

    if (!t)
        return -ENOMEM;
    t->delta = (double *)(t + 1);
    t->ratio = t->delta + s->es->n;
    if (s->n == s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 64;
        struct tracked **n = realloc(s->procs, ncap * sizeof(*n));
        double *rates = realloc(s->rates, ncap * (s->m->n_events + 1) * sizeof(double));
        double *ev_part = realloc(s->ev_part, ncap * (s->m->n_events + 1) * sizeof(double));
        attrib_proc *ap = realloc(s->ap, ncap * sizeof(*ap));
        struct quiet *q = realloc(s->quiet, ncap * sizeof(*q));
        struct tracked **act = realloc(s->active, ncap * sizeof(*act));
        if (n)
            s->procs = n;
        if (rates)
            s->rates = rates;
        if (ev_part)
            s->ev_part = ev_part;
        if (ap)
            s->ap = ap;
        if (q)
            s->quiet = q;
        if (act)
            s->active = act;
        if (!n || !rates || !ev_part || !ap || !q || !act) {
            proctable_free_tracked(s, t);
            return -ENOMEM;
        }
        s->cap = ncap;
    }
    t->pid = info->pid;
    t->start = info->start_ticks;
    t->uid = info->uid;
    memcpy(t->comm, info->comm, sizeof(t->comm));
    t->ch = ch;
    t->klass = s->zero_class;
    account_mark_idle(s, t);
    labels_unit(info->cgroup, t->unit);
    labels_job_cgroup(info->cgroup, t->job);
    t->job_in_cgroup = t->job[0] != '\0';
    /* An adopted process (proctable_adopt) has exited, and has no cmdline:
     * its pid may be another process's by now. */
    if (!t->job[0] && ch && info->cmdline)
        labels_job_environ(info->pid, s->cfg->job_env, s->cfg->n_job_env, t->job);
    else if (!t->job[0]) /* a replay: the recording's */
        snprintf(t->job, sizeof(t->job), "%s", info->job);
    if (ch && (!t->job[0] || !info->cgroup))
        inherit_labels(s, t, info->ppid, !t->job[0], !info->cgroup);
    proctable_join_group(s, t);
    s->quiet[s->n].word = NULL;
    s->procs[s->n++] = t;
    if (s->rep && s->last_ns == 0) {
        t->pending = *info;
        t->pending.cmdline = info->cmdline ? strdup(info->cmdline) : NULL;
        t->pending.cgroup = info->cgroup ? strdup(info->cgroup) : NULL;
        t->info_pending = true;
        return 0;
    }
    describe_tracked(s, t, info);
    return 0;
}

/* Once: a process whose counters must be read every tick, and why. */
static void warn_unskippable(sampler *s, pid_t pid, const backend_handle *ch)
{
    int r = s->be->skip_error(ch);

    if (r == 0 || r == -ESRCH || s->skip_warned)
        return;
    s->skip_warned = true;
    log_warning("pid %d and others like it are read every tick: no context-switch buffer (%s%s)",
                (int)pid, strerror(-r),
                r == -EPERM ? ": locked memory; raise LimitMEMLOCK= or perf_event_mlock_kb" : "");
}

/* Starts tracking `pid` if the config wants it. A process that is already
 * gone, or that we may not watch, is skipped without a log line: it is the
 * normal fate of short-lived processes and shows up as unattributed CPU.
 * The error says why, for the fork handler's count of misses. */
static int track_untracked_pid(sampler *s, pid_t pid)
{
    procs_info info = {0};
    backend_handle *ch = NULL;
    char err[UTIL_ERRLEN];
    int r;

    if ((r = procs_read_stat(pid, &info)) < 0 || !track_wanted_stat(s, &info))
        return r;
    if ((r = procs_read_info(pid, &info)) < 0)
        return r;
    if (proctable_wanted(s, &info)) {
        r = s->be->open(s->es, pid, info.start_ticks, -1, &ch, err, sizeof(err));
        if (r == 0)
            warn_unskippable(s, pid, ch);
        if (r == 0 && (r = proctable_add(s, &info, ch)) < 0)
            s->be->close(ch);
        else if (r == -EMFILE && !s->fd_warned) {
            /* Once: past the limit every start would say the same. */
            log_warning("not tracking pid %d (%s), nor further processes until descriptors "
                        "are free again: %s",
                        (int)pid, info.comm, err);
            s->fd_warned = true;
        } else if (r < 0 && r != -ESRCH && r != -EACCES && r != -EPERM && r != -EMFILE)
            log_warning("not tracking pid %d (%s): %s", (int)pid, info.comm, err);
    }
    procs_info_clear(&info);
    return r;
}

int proctable_adopt(sampler *s, const backend_orphan *o)
{
    procs_info info = {.pid = o->pid, .ppid = o->ppid, .start_ticks = o->start, .uid = o->uid};
    backend_handle *ch = NULL;
    char err[UTIL_ERRLEN];
    struct tracked *t;

    snprintf(info.comm, sizeof(info.comm), "%s", o->comm);
    /* The cache's string, not info's to free (nothing here frees it). */
    info.cgroup = (char *)cgroupids_path(s->cgids, o->cgroup_id, util_now_ns(CLOCK_MONOTONIC));
    if (!proctable_wanted(s, &info))
        return 0;
    if (s->adopted >= SAMPLER_MAX_ADOPT || store_push_room(s->st) < SAMPLER_ADOPT_ROOM)
        return -EAGAIN;
    if (s->be->open(s->es, o->pid, o->start, -1, &ch, err, sizeof(err)) < 0) {
        s->procs_missed++;
        return 0;
    }
    if (proctable_add(s, &info, ch) < 0) {
        s->be->close(ch);
        s->procs_missed++;
        return 0;
    }
    s->adopted++;
    /* Its fork, still waiting to be looked at, is done with. */
    for (size_t i = 0; i < s->n_forked; i++)
        if (s->forked[i].pid == o->pid)
            s->forked[i].pid = 0;
    t = s->procs[s->n - 1];
    t->gone = s->reap_pending = true;
    return 1;
}

/* 0 when the process is tracked or the config does not want it; else why
 * it could not be (-ESRCH: gone before its counters were open). */
static int track_pid(sampler *s, pid_t pid)
{
    return find(s, pid) ? 0 : track_untracked_pid(s, pid);
}

static void refresh_comm(sampler *s, pid_t pid, bool exec);

static int cmp_pid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

/* Tracked pids, sorted: a rescan looks every /proc entry up in it rather
 * than walking all tracked processes per entry (quadratic at 1000). */
static pid_t *tracked_sorted(const sampler *s, size_t *n)
{
    pid_t *v = malloc((s->n ? s->n : 1) * sizeof(pid_t));

    *n = 0;
    if (!v)
        return NULL;
    for (size_t i = 0; i < s->n; i++)
        if (!s->procs[i]->gone)
            v[(*n)++] = s->procs[i]->pid;
    qsort(v, *n, sizeof(pid_t), cmp_pid);
    return v;
}

void proctable_rescan(sampler *s)
{
    pid_t *pids, *known;
    size_t n, n_known;

    /* Exits the connector missed (or all of them without it) come first: a
     * pid reused since then is a new process, to be tracked in this scan,
     * not taken for the one that exited. Without process events (neither
     * the connector nor the backend's), execs too, so commands get their
     * new names. */
    for (size_t i = 0; i < s->n; i++) {
        if (s->procs[i]->ch && !s->be->alive(s->procs[i]->ch))
            s->procs[i]->gone = s->reap_pending = true;
        else if (!s->watch && !s->be_events)
            refresh_comm(s, s->procs[i]->pid, false);
    }
    if (procs_list(&pids, &n) < 0)
        return;
    known = tracked_sorted(s, &n_known);
    for (size_t i = 0; i < n; i++) {
        if (!known)
            track_pid(s, pids[i]);
        else if (!bsearch(&pids[i], known, n_known, sizeof(pid_t), cmp_pid))
            track_untracked_pid(s, pids[i]);
    }
    free(known);
    free(pids);
}

/* A tracked process's new name or job: stored, recorded, and its energy
 * from now on goes to the new group. `exec`: it has just exec'd, so its
 * environment may name another job. */
static void rename_tracked(sampler *s, struct tracked *t, const procs_info *info, bool exec)
{
    bool renamed = strcmp(t->comm, info->comm) != 0;
    bool moved = (exec || renamed) && reread_job(s, t);

    if (!renamed && !moved)
        return;
    memcpy(t->comm, info->comm, sizeof(t->comm));
    proctable_join_group(s, t);
    describe_tracked(s, t, info);
}

static void refresh_comm(sampler *s, pid_t pid, bool exec)
{
    struct tracked *t = find(s, pid);
    procs_info info = {0};

    if (!t) {
        track_pid(s, pid); /* an exec may make a process match [track] */
        return;
    }
    if (procs_read_info(pid, &info) == 0)
        rename_tracked(s, t, &info, exec);
    procs_info_clear(&info);
}

/* PR_SET_NAME: the event carries the name, because a process that renames
 * itself and exits at once has no /proc entry left to read it from. */
static void comm_event(sampler *s, const procs_event *ev)
{
    struct tracked *t = find(s, ev->pid);
    procs_info info = {.pid = ev->pid};

    if (!t) {
        track_pid(s, ev->pid); /* the new name may match [track] comm */
        return;
    }
    info.start_ticks = t->start;
    info.uid = t->uid;
    snprintf(info.comm, sizeof(info.comm), "%s", ev->comm);
    rename_tracked(s, t, &info, false);
}

/* With a backend that drains: `pid`, untracked, is looked at after the
 * second drain from now (proctable_track_forked) rather than now; false
 * when the list cannot grow (then it is looked at now). */
static bool defer(sampler *s, pid_t pid)
{
    /* [track] cgroup needs the path, which an adopted process has only
     * through the cgroup cache. */
    if (!s->be->drain || (s->cfg->track_cgroup && !s->cgids))
        return false;
    if (s->n_forked == s->cap_forked) {
        size_t ncap = s->cap_forked ? s->cap_forked * 2 : 256;
        struct forked *v = realloc(s->forked, ncap * sizeof(*v));
        if (!v)
            return false;
        s->forked = v;
        s->cap_forked = ncap;
    }
    s->forked[s->n_forked++] = (struct forked){.pid = pid, .drain = s->n_drains};
    return true;
}

void proctable_track_forked(sampler *s)
{
    size_t k = 0;

    for (size_t i = 0; i < s->n_forked; i++) {
        bool known = s->forked[i].pid == 0; /* adopted */
        if (s->forked[i].drain == s->n_drains && !known) {
            s->forked[k++] = s->forked[i]; /* told of since the previous drain */
            continue;
        }
        /* Adopted ones are gone already: any entry with the pid will do. */
        for (size_t j = 0; j < s->n && !known; j++)
            known = s->procs[j]->pid == s->forked[i].pid;
        if (!known)
            track_untracked_pid(s, s->forked[i].pid);
    }
    s->n_forked = k;
    s->n_drains++;
}

void proctable_event(sampler *s, const procs_event *ev)
{
    struct tracked *t;

    /* An untracked process's events wait for a drain a whole tick later:
     * by then one that lived less has exited and is adopted with what the
     * backend recorded (no /proc reads), and one that lives on is read
     * once, whatever it did meanwhile. */
    if (ev->kind != PROCS_EV_EXIT && !find(s, ev->pid) && defer(s, ev->pid))
        return;
    switch (ev->kind) {
    case PROCS_EV_FORK:
        /* Only a fork counts a miss: the other events of a process that
         * was already missed would count it again. A backend that drains
         * the kernel's counts adopts it when it has exited (proctable_adopt). */
        if (track_pid(s, ev->pid) < 0 && !s->be->drain)
            s->procs_missed++;
        break;
    case PROCS_EV_EXEC:
        refresh_comm(s, ev->pid, true);
        break;
    case PROCS_EV_COMM:
        comm_event(s, ev);
        break;
    case PROCS_EV_EXIT:
        /* The kernel keeps the final counts until the counters close: the
         * next tick reads them once more, then proctable_reap() closes them. */
        if ((t = find(s, ev->pid)))
            t->gone = s->reap_pending = true;
        break;
    }
}

/* The kernel dropped events (the connector's queue or the backend's ring
 * overflowed): rescan at the next tick to find the processes they told of,
 * and count it for GetStatus. */
void proctable_events_lost(sampler *s)
{
    if (s->connector_overruns++ == 0)
        log_warning("%s: process events were lost; rescanning /proc (GetStatus counts these)",
                    s->watch ? "proc connector overrun"
                             : "the counter backend's event ring was full");
    s->next_rescan_ns = 0;
}

/* Handles waiting proc events until none is left or until `until_ns`
 * (CLOCK_MONOTONIC) has passed, so that a flood of them cannot push a tick
 * past its deadline; what is left waits for the next call. */
void proctable_drain_events(sampler *s, uint64_t until_ns)
{
    procs_event ev[SAMPLER_MAX_EVENTS];
    size_t n;
    int r;

    if (!s->watch)
        return;
    do {
        r = procs_watch_read(s->watch, ev, SAMPLER_MAX_EVENTS, &n);
        for (size_t i = 0; i < n; i++)
            proctable_event(s, &ev[i]);
        if (r == -ENOBUFS)
            proctable_events_lost(s);
        else if (r < 0)
            return;
    } while ((r == -ENOBUFS || n == SAMPLER_MAX_EVENTS) && util_now_ns(CLOCK_MONOTONIC) < until_ns);
}

/* Drops processes that exited, after their final tick was accounted. */
void proctable_reap(sampler *s)
{
    size_t k = 0;

    if (!s->reap_pending)
        return;
    s->reap_pending = false;
    for (size_t i = 0; i < s->n; i++) {
        struct tracked *t = s->procs[i];
        if (!t->gone) {
            s->quiet[k] = s->quiet[i];
            s->procs[k++] = t;
            continue;
        }
        account_settle_idle(s, t);
        live_proc p = proctable_to_live(t);
        p.exited_mono_ns = util_now_ns(CLOCK_MONOTONIC);
        if (groups_recent_add(&s->recent, &p) < 0)
            log_warning("out of memory: the exporter drops pid %d's series", (int)t->pid);
        s->n_exited++;
        store_push_proc_exit(s->st, t->pid, t->start, sampler_clock(s));
        if (s->rec)
            trace_write_exit(s->rec, t->pid, t->start);
        proctable_free_tracked(s, t);
    }
    s->n = k;
}

struct tracked *proctable_find_start(sampler *s, pid_t pid, uint64_t start)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->procs[i]->pid == pid && s->procs[i]->start == start)
            return s->procs[i];
    return NULL;
}

/* Descriptions of replayed processes that came before the first tick. */
void proctable_push_pending_infos(sampler *s)
{
    for (size_t i = 0; i < s->n; i++) {
        struct tracked *t = s->procs[i];
        if (!t->info_pending)
            continue;
        store_proc_info pi = {.t_ns = sampler_clock(s),
                              .pid = t->pid,
                              .start_time = t->start,
                              .comm = t->pending.comm,
                              .cmdline = t->pending.cmdline,
                              .cgroup = t->pending.cgroup,
                              .job = t->job,
                              .uid = t->pending.uid};
        store_push_proc_info(s->st, &pi);
        procs_info_clear(&t->pending);
        t->info_pending = false;
    }
}
