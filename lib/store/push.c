/* push: the sampling thread's side of the store.
 *
 * Every function copies its record into the queue and returns; a full queue
 * drops the record and counts it. Nothing here blocks, locks or touches the
 * disk; only store_push_proc_info allocates (for its strings). */
#include "store/store-internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Reserves n records or counts them dropped. */
static bool reserve(store *s, size_t n, size_t *first)
{
    size_t used, hw;

    if (!ring_reserve(&s->queue, n, first, &used)) {
        atomic_fetch_add_explicit(&s->dropped, n, memory_order_relaxed);
        return false;
    }
    hw = atomic_load_explicit(&s->high_water, memory_order_relaxed);
    if (used > hw)
        atomic_store_explicit(&s->high_water, used, memory_order_relaxed);
    return true;
}

static void publish(store *s, size_t n)
{
    ring_publish(&s->queue, n);
    atomic_fetch_add_explicit(&s->pushed, n, memory_order_relaxed);
}

/* Reserves one record and clears it. */
static store_item *one(store *s, int kind, int64_t t_ns)
{
    size_t first;
    store_item *it;

    if (!reserve(s, 1, &first))
        return NULL;
    it = ring_slot(&s->queue, first);
    memset(it, 0, sizeof(*it));
    it->kind = kind;
    it->t_ns = t_ns;
    return it;
}

static bool bad_time(int64_t t_ns)
{
    return t_ns < 0;
}

size_t store_push_room(store *s)
{
    return ring_room(&s->queue);
}

int store_push_proc(store *s, const store_proc_tick *t)
{
    store_item *it;

    if (bad_time(t->t_ns) || t->klass < 0 || t->klass > 255)
        return -EINVAL;
    it = one(s, ITEM_PROC, t->t_ns);
    if (!it)
        return -EAGAIN;
    it->pid = t->pid;
    it->klass = t->klass;
    it->model_id = t->model_id;
    it->u.proc.start_time = t->start_time;
    it->u.proc.attributed_j = t->attributed_j;
    it->u.proc.standalone_j = t->standalone_j;
    it->u.proc.cpu_s = t->cpu_s;
    publish(s, 1);
    return 0;
}

const char *const store_idle_sources[STORE_IDLE_SOURCES] = {NULL, "fitted", "stored", "model",
                                                            "percentile"};

int store_push_host(store *s, const store_host_tick *t)
{
    store_item *it;
    size_t source = 0;

    if (t->idle_source)
        for (source = 1; source < STORE_IDLE_SOURCES; source++)
            if (strcmp(t->idle_source, store_idle_sources[source]) == 0)
                break;
    int64_t age = t->t_ns / 1000000000 - t->calib_t;

    if (bad_time(t->t_ns) || !(t->dt_s >= 0) || source == STORE_IDLE_SOURCES)
        return -EINVAL;
    it = one(s, ITEM_HOST, t->t_ns);
    if (!it)
        return -EAGAIN;
    it->measured = t->measured;
    it->model_id = t->model_id;
    it->u.host.dt_s = t->dt_s;
    it->u.host.host_j = t->host_j;
    it->u.host.idle_j = t->idle_j;
    it->u.host.attributed_j = t->attributed_j;
    it->u.host.unattributed_j = t->unattributed_j;
    it->u.host.modeled_j = t->modeled_j;
    it->klass = (uint8_t)source;
    /* A fit stamped after the tick (the clock stepped back) counts as of
     * the tick; one older than a record can say is recorded as none. */
    it->pid = t->calib_t <= 0 || age > INT32_MAX ? -1 : age < 0 ? 0 : (int32_t)age;
    publish(s, 1);
    return 0;
}

int store_push_domain(store *s, int64_t t_ns, const char *domain, double measured_j,
                      double modeled_j)
{
    size_t len = domain ? strlen(domain) : 0;
    store_item *it;

    if (bad_time(t_ns) || len == 0 || len >= STORE_DOMAIN_LEN)
        return -EINVAL;
    it = one(s, ITEM_DOMAIN, t_ns);
    if (!it)
        return -EAGAIN;
    memcpy(it->u.domain.name, domain, len + 1);
    it->u.domain.measured_j = measured_j;
    it->u.domain.modeled_j = modeled_j;
    publish(s, 1);
    return 0;
}

int store_push_calibration(store *s, int64_t t_ns, double dt_s, int32_t model_id, int klass,
                           const double *rates, size_t n_rates)
{
    size_t n_items = (n_rates + CALIB_PER_ITEM - 1) / CALIB_PER_ITEM, first;

    if (bad_time(t_ns) || !(dt_s >= 0) || klass < 0 || klass >= STORE_MAX_CLASSES || n_rates == 0 ||
        n_rates > STORE_MAX_EVENTS)
        return -EINVAL;
    if (!reserve(s, n_items, &first))
        return -EAGAIN;
    for (size_t i = 0; i < n_items; i++) {
        store_item *it = ring_slot(&s->queue, first + i);
        size_t off = i * CALIB_PER_ITEM;
        size_t n = n_rates - off < CALIB_PER_ITEM ? n_rates - off : CALIB_PER_ITEM;

        memset(it, 0, sizeof(*it));
        it->kind = ITEM_CALIB;
        it->t_ns = t_ns;
        it->klass = klass;
        it->model_id = model_id;
        it->off = off;
        it->n = n;
        it->n_events = n_rates;
        it->u.calib.dt_s = dt_s;
        memcpy(it->u.calib.rate, rates + off, n * sizeof(double));
    }
    publish(s, n_items);
    return 0;
}

void store_proc_info_blob_free(struct proc_info_blob *b)
{
    free(b); /* its strings with it */
}

/* `in` copied to *at, which moves past it; NULL stays NULL. */
static char *copy_or_null(const char *in, char **at)
{
    char *out = *at;

    if (!in)
        return NULL;
    size_t n = strlen(in) + 1;
    memcpy(out, in, n);
    *at += n;
    return out;
}

int store_push_proc_info(store *s, const store_proc_info *info)
{
    const char *job = info->job && info->job[0] ? info->job : NULL;
    struct proc_info_blob *b;
    store_item *it;

    if (bad_time(info->t_ns))
        return -EINVAL;
    /* One allocation for the blob and its strings: under churn every
     * process start pushes one, and five allocations and frees each were
     * about 3 % of the daemon's time (a profile at 1,000 starts/s). */
    size_t len = sizeof(*b) + (info->comm ? strlen(info->comm) + 1 : 0) +
                 (info->cmdline ? strlen(info->cmdline) + 1 : 0) +
                 (info->cgroup ? strlen(info->cgroup) + 1 : 0) + (job ? strlen(job) + 1 : 0);
    if (!(b = malloc(len)))
        return -ENOMEM;
    char *at = (char *)(b + 1);
    b->uid = info->uid;
    b->comm = copy_or_null(info->comm, &at);
    b->cmdline = copy_or_null(info->cmdline, &at);
    b->cgroup = copy_or_null(info->cgroup, &at);
    b->job = copy_or_null(job, &at);
    it = one(s, ITEM_INFO, info->t_ns);
    if (!it) {
        store_proc_info_blob_free(b);
        return -EAGAIN;
    }
    it->pid = info->pid;
    it->u.proc_id.start_time = info->start_time;
    it->u.proc_id.info = b;
    publish(s, 1);
    return 0;
}

int store_push_proc_exit(store *s, pid_t pid, uint64_t start_time, int64_t t_ns)
{
    store_item *it;

    if (bad_time(t_ns))
        return -EINVAL;
    it = one(s, ITEM_EXIT, t_ns);
    if (!it)
        return -EAGAIN;
    it->pid = pid;
    it->u.proc_id.start_time = start_time;
    publish(s, 1);
    return 0;
}
