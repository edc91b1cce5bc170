/* agg: the writer's in-memory per-second rows.
 *
 * The sampler pushes per-tick deltas; the writer folds them here into one
 * accumulator per (process, second), per (second, domain) and per second,
 * so a commit writes one row for each. A second stays here until a record
 * of a later one (the watermark) shows it complete; the commit then writes
 * it and agg_clear forgets it, keeping the second in progress. */
#include "store/store-internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_S 1000000000LL

void agg_init(agg *a)
{
    memset(a, 0, sizeof(*a));
    a->watermark = -1;
    a->oldest = INT64_MAX;
}

/* Grows *v (of *cap elements of size `size`) to hold at least `need`.
 * Small at first: a process's seconds are mostly one or two, and idle
 * processes keep theirs for AGG_IDLE_S. */
static int grow(void **v, size_t *cap, size_t need, size_t size)
{
    size_t ncap = *cap ? *cap : 4;
    void *n;

    if (need <= *cap)
        return 0;
    while (ncap < need)
        ncap *= 2;
    n = realloc(*v, ncap * size);
    if (!n)
        return -ENOMEM;
    *v = n;
    *cap = ncap;
    return 0;
}

static size_t hash(int32_t pid, uint64_t start_time)
{
    uint64_t h = (uint64_t)(uint32_t)pid * 0x9E3779B97F4A7C15ULL ^ start_time;

    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (size_t)h;
}

static int rehash(agg *a, size_t cap)
{
    uint32_t *idx = calloc(cap, sizeof(*idx));

    if (!idx)
        return -ENOMEM;
    for (size_t i = 0; i < a->n_proc; i++) {
        size_t h = hash(a->proc[i].pid, a->proc[i].start_time) & (cap - 1);
        while (idx[h])
            h = (h + 1) & (cap - 1);
        idx[h] = i + 1;
    }
    free(a->index);
    a->index = idx;
    a->index_cap = cap;
    return 0;
}

/* The accumulator of process (pid, start_time), created when new. */
static agg_proc *proc_get(agg *a, int32_t pid, uint64_t start_time)
{
    size_t h, old_cap = a->cap_proc;
    agg_proc *p;

    if ((a->n_proc + 1) * 2 > a->index_cap && rehash(a, a->index_cap ? a->index_cap * 2 : 64) < 0)
        return NULL;
    h = hash(pid, start_time) & (a->index_cap - 1);
    for (; a->index[h]; h = (h + 1) & (a->index_cap - 1)) {
        p = &a->proc[a->index[h] - 1];
        if (p->pid == pid && p->start_time == start_time)
            return p;
    }
    if (grow((void **)&a->proc, &a->cap_proc, a->n_proc + 1, sizeof(*a->proc)) < 0)
        return NULL;
    /* Slots past n_proc keep their series buffers from before the last
     * clear, for reuse; fresh slots start empty. */
    if (a->cap_proc > old_cap)
        memset(a->proc + old_cap, 0, (a->cap_proc - old_cap) * sizeof(*a->proc));
    p = &a->proc[a->n_proc];
    p->pid = pid;
    p->start_time = start_time;
    p->n_sec = 0;
    p->last_t = -1;
    p->row_id = 0;
    p->row_txn = 0;
    p->ev_first = p->ev_last = 0;
    a->index[h] = ++a->n_proc;
    return p;
}

static int add_proc(agg *a, const store_item *it, int64_t t)
{
    agg_proc *p = proc_get(a, it->pid, it->u.proc.start_time);
    agg_sec *e = NULL;

    if (!p)
        return -ENOMEM;
    /* Ticks arrive in time order, so the match is nearly always the last. */
    for (size_t i = p->n_sec; i-- > 0;)
        if (p->sec[i].t == t) {
            e = &p->sec[i];
            break;
        }
    if (!e) {
        if (grow((void **)&p->sec, &p->cap_sec, p->n_sec + 1, sizeof(*p->sec)) < 0)
            return -ENOMEM;
        e = &p->sec[p->n_sec++];
        memset(e, 0, sizeof(*e));
        e->t = t;
        a->rows++;
    }
    if (t > p->last_t)
        p->last_t = t;
    e->attributed_j += it->u.proc.attributed_j;
    e->standalone_j += it->u.proc.standalone_j;
    e->cpu_s += it->u.proc.cpu_s;
    e->klass = it->klass;
    e->model_id = it->model_id;
    return 0;
}

/* The calibration accumulator of second t, created when new. */
static agg_calib *calib_get(agg *a, int64_t t)
{
    agg_calib *c;

    for (size_t i = a->n_calib; i-- > 0;)
        if (a->calib[i].t == t)
            return &a->calib[i];
    if (grow((void **)&a->calib, &a->cap_calib, a->n_calib + 1, sizeof(*a->calib)) < 0)
        return NULL;
    c = &a->calib[a->n_calib++];
    memset(c, 0, sizeof(*c));
    c->t = t;
    return c;
}

static int add_host(agg *a, const store_item *it, int64_t t)
{
    agg_host *h = NULL;
    agg_calib *c;

    for (size_t i = a->n_host; i-- > 0;)
        if (a->host[i].t == t) {
            h = &a->host[i];
            break;
        }
    if (!h) {
        if (grow((void **)&a->host, &a->cap_host, a->n_host + 1, sizeof(*a->host)) < 0)
            return -ENOMEM;
        h = &a->host[a->n_host++];
        memset(h, 0, sizeof(*h));
        h->t = t;
        h->measured = true;
        a->rows++;
    }
    h->dt_s += it->u.host.dt_s;
    h->host_j += it->u.host.host_j;
    h->idle_j += it->u.host.idle_j;
    h->attributed_j += it->u.host.attributed_j;
    h->unattributed_j += it->u.host.unattributed_j;
    h->modeled_j += it->u.host.modeled_j;
    h->measured = h->measured && it->measured;
    h->model_id = it->model_id;
    h->idle_source = store_idle_sources[it->klass];
    h->calib_t = it->pid >= 0 ? t - it->pid : 0;
    c = calib_get(a, t);
    if (!c)
        return -ENOMEM;
    c->duration_s += it->u.host.dt_s;
    return 0;
}

static void add_nan(double *acc, double v)
{
    if (isnan(v))
        return;
    *acc = isnan(*acc) ? v : *acc + v;
}

static int calib_domain(agg *a, int64_t t, const char *name, double j)
{
    agg_calib *c = calib_get(a, t);

    if (!c)
        return -ENOMEM;
    for (size_t i = 0; i < c->n_domains; i++)
        if (strcmp(c->domain[i], name) == 0) {
            c->domain_j[i] += j;
            return 0;
        }
    if (c->n_domains == STORE_MAX_DOMAINS)
        return 0; /* more domains than any machine has: keep the first ones */
    strcpy(c->domain[c->n_domains], name);
    c->domain_j[c->n_domains++] = j;
    return 0;
}

static int add_domain(agg *a, const store_item *it, int64_t t)
{
    agg_domain *d = NULL;

    for (size_t i = a->n_domain; i-- > 0;)
        if (a->domain[i].t == t && strcmp(a->domain[i].name, it->u.domain.name) == 0) {
            d = &a->domain[i];
            break;
        }
    if (!d) {
        if (grow((void **)&a->domain, &a->cap_domain, a->n_domain + 1, sizeof(*a->domain)) < 0)
            return -ENOMEM;
        d = &a->domain[a->n_domain++];
        d->t = t;
        strcpy(d->name, it->u.domain.name);
        d->measured_j = d->modeled_j = NAN;
        a->rows++;
    }
    add_nan(&d->measured_j, it->u.domain.measured_j);
    add_nan(&d->modeled_j, it->u.domain.modeled_j);
    if (!isnan(it->u.domain.measured_j))
        return calib_domain(a, t, it->u.domain.name, it->u.domain.measured_j);
    return 0;
}

static int add_calib(agg *a, const store_item *it, int64_t t)
{
    agg_calib *c = calib_get(a, t);

    if (!c)
        return -ENOMEM;
    /* A new model (or event count) mid-second restarts the rates: one row
     * holds one model's events. */
    if (c->has_rates && (c->model_id != it->model_id || c->n_events != it->n_events)) {
        free(c->sum);
        c->sum = NULL;
        c->has_rates = false;
        c->n_classes = 0;
    }
    if (!c->sum) {
        c->sum = calloc((size_t)STORE_MAX_CLASSES * it->n_events, sizeof(double));
        if (!c->sum)
            return -ENOMEM;
        c->n_events = it->n_events;
        c->model_id = it->model_id;
    }
    if (!c->has_rates)
        a->rows++;
    c->has_rates = true;
    if (it->klass + 1u > c->n_classes)
        c->n_classes = it->klass + 1u;
    for (unsigned i = 0; i < it->n; i++)
        c->sum[it->klass * c->n_events + it->off + i] += it->u.calib.rate[i] * it->u.calib.dt_s;
    return 0;
}

/* An info or exit record, chained to its process's accumulator (made when
 * new) so that a commit writes a new process's row once, with its events and
 * first second together (conn.c). Without memory for the accumulator the
 * event is written on its own. */
static int add_event(agg *a, store_item *it, int64_t t)
{
    agg_proc *p;
    agg_event *e;

    if (grow((void **)&a->event, &a->cap_event, a->n_event + 1, sizeof(*a->event)) < 0)
        return -ENOMEM;
    p = proc_get(a, it->pid, it->u.proc_id.start_time);
    e = &a->event[a->n_event++];
    e->kind = it->kind;
    e->pid = it->pid;
    e->start_time = it->u.proc_id.start_time;
    e->t = t;
    e->info = it->kind == ITEM_INFO ? it->u.proc_id.info : NULL;
    it->u.proc_id.info = NULL;
    e->proc = p ? (size_t)(p - a->proc) + 1 : 0;
    e->next = 0;
    if (p && p->ev_last)
        a->event[p->ev_last - 1].next = a->n_event;
    else if (p)
        p->ev_first = a->n_event;
    if (p)
        p->ev_last = a->n_event;
    a->rows++;
    return 0;
}

int agg_add(agg *a, store_item *it)
{
    int64_t t = it->t_ns / NS_PER_S;

    if (it->kind != ITEM_INFO && it->kind != ITEM_EXIT) {
        if (t > a->watermark)
            a->watermark = t;
        if (t < a->oldest)
            a->oldest = t;
    }
    switch (it->kind) {
    case ITEM_PROC:
        return add_proc(a, it, t);
    case ITEM_HOST:
        return add_host(a, it, t);
    case ITEM_DOMAIN:
        return add_domain(a, it, t);
    case ITEM_CALIB:
        return add_calib(a, it, t);
    case ITEM_INFO:
    case ITEM_EXIT:
        return add_event(a, it, t);
    }
    return -EINVAL;
}

static void clear_events(agg *a)
{
    for (size_t i = 0; i < a->n_event; i++)
        store_proc_info_blob_free(a->event[i].info);
    a->n_event = 0;
}

/* Keeps the process seconds at or after `until`. Processes left with none
 * stay while recently active, so the writer keeps knowing their row ids
 * between seconds; those idle longer move to the end with their buffers,
 * for reuse. */
static void clear_procs(agg *a, int64_t until)
{
    size_t kept = 0;

    for (size_t i = 0; i < a->n_proc; i++) {
        agg_proc *p = &a->proc[i], tmp;
        size_t n = 0;

        p->ev_first = p->ev_last = 0; /* the events are gone */
        for (size_t k = 0; k < p->n_sec; k++)
            if (p->sec[k].t >= until)
                p->sec[n++] = p->sec[k];
        p->n_sec = n;
        a->rows += n;
        for (size_t k = 0; k < n; k++)
            a->oldest = p->sec[k].t < a->oldest ? p->sec[k].t : a->oldest;
        if (n == 0 && p->last_t + AGG_IDLE_S <= a->watermark)
            continue;
        tmp = a->proc[kept];
        a->proc[kept++] = *p;
        *p = tmp;
    }
    a->n_proc = kept;
    if (a->index) {
        memset(a->index, 0, a->index_cap * sizeof(*a->index));
        for (size_t i = 0; i < kept; i++) {
            size_t h = hash(a->proc[i].pid, a->proc[i].start_time) & (a->index_cap - 1);
            while (a->index[h])
                h = (h + 1) & (a->index_cap - 1);
            a->index[h] = i + 1;
        }
    }
}

static void clear_host(agg *a, int64_t until)
{
    size_t kept = 0;

    for (size_t i = 0; i < a->n_domain; i++)
        if (a->domain[i].t >= until)
            a->domain[kept++] = a->domain[i];
    a->n_domain = kept;
    kept = 0;
    for (size_t i = 0; i < a->n_host; i++)
        if (a->host[i].t >= until)
            a->host[kept++] = a->host[i];
    a->n_host = kept;
    a->rows += a->n_domain + a->n_host;
    for (size_t i = 0; i < a->n_domain; i++)
        a->oldest = a->domain[i].t < a->oldest ? a->domain[i].t : a->oldest;
    for (size_t i = 0; i < a->n_host; i++)
        a->oldest = a->host[i].t < a->oldest ? a->host[i].t : a->oldest;
}

static void clear_calib(agg *a, int64_t until)
{
    size_t kept = 0;

    for (size_t i = 0; i < a->n_calib; i++) {
        if (a->calib[i].t < until) {
            free(a->calib[i].sum);
            continue;
        }
        a->calib[kept++] = a->calib[i];
        a->rows += a->calib[i].has_rates;
        a->oldest = a->calib[i].t < a->oldest ? a->calib[i].t : a->oldest;
    }
    a->n_calib = kept;
}

void agg_clear(agg *a, int64_t until, int64_t calib_until)
{
    a->rows = 0;
    a->oldest = INT64_MAX;
    clear_events(a);
    clear_procs(a, until);
    clear_host(a, until);
    clear_calib(a, calib_until);
}

void agg_discard(agg *a)
{
    agg_clear(a, INT64_MAX, INT64_MAX);
}

void agg_free(agg *a)
{
    agg_discard(a);
    for (size_t i = 0; i < a->cap_proc; i++)
        free(a->proc[i].sec);
    free(a->proc);
    free(a->index);
    free(a->domain);
    free(a->host);
    free(a->calib);
    free(a->event);
    agg_init(a);
}
