/* groups: what wattprofd keeps of processes that ended, for the exporter.
 *
 * A cluster asks for energy per command, user, unit and job, and a counter
 * must never go backwards: the energy of a process that ends is folded into
 * the totals of its group, which live as long as the daemon. Per-pid
 * series are only for the few processes with the most energy, so of ended
 * processes only those are kept, and only for a grace period (long enough
 * for a scrape to see their final value). */
#include "daemon.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool groups_match(const group_total *g, const live_proc *p)
{
    return g->uid == p->uid && strcmp(g->comm, p->comm) == 0 && strcmp(g->unit, p->unit) == 0 &&
           strcmp(g->job, p->job) == 0;
}

static group_total *groups_find(groups *g, const live_proc *p)
{
    for (size_t i = 0; i < g->n; i++)
        if (groups_match(&g->v[i], p))
            return &g->v[i];
    if (g->n == g->cap) {
        size_t ncap = g->cap ? g->cap * 2 : 16;
        group_total *n = realloc(g->v, ncap * sizeof(*n));
        if (!n)
            return NULL;
        g->v = n;
        g->cap = ncap;
    }
    group_total *t = &g->v[g->n++];
    memset(t, 0, sizeof(*t));
    t->uid = p->uid;
    memcpy(t->comm, p->comm, sizeof(t->comm));
    memcpy(t->unit, p->unit, sizeof(t->unit));
    memcpy(t->job, p->job, sizeof(t->job));
    return t;
}

int groups_add(groups *g, const live_proc *p, bool live)
{
    group_total *t = groups_find(g, p);

    if (!t)
        return -ENOMEM;
    t->energy_j += p->total_j - p->base_j;
    t->standalone_j += p->total_standalone_j - p->base_standalone_j;
    t->cpu_s += p->total_cpu_s - p->base_cpu_s;
    if (live)
        t->power_w += p->power_w;
    return 0;
}

int groups_copy(groups *dst, const groups *src)
{
    group_total *v = malloc((src->n ? src->n : 1) * sizeof(*v));

    if (!v)
        return -ENOMEM;
    if (src->n)
        memcpy(v, src->v, src->n * sizeof(*v));
    groups_free(dst);
    dst->v = v;
    dst->n = dst->cap = src->n;
    return 0;
}

void groups_free(groups *g)
{
    free(g->v);
    memset(g, 0, sizeof(*g));
}

int recent_add(recent_exits *r, const live_proc *p)
{
    size_t low = 0;

    if (r->cap == 0)
        return 0;
    if (!r->v && !(r->v = calloc(r->cap, sizeof(*r->v))))
        return -ENOMEM;
    if (r->n < r->cap) {
        r->v[r->n++] = *p;
        return 0;
    }
    for (size_t i = 1; i < r->n; i++)
        if (r->v[i].total_j < r->v[low].total_j)
            low = i;
    if (p->total_j > r->v[low].total_j)
        r->v[low] = *p;
    return 0;
}

void recent_expire(recent_exits *r, uint64_t before_mono_ns)
{
    size_t k = 0;

    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].exited_mono_ns > before_mono_ns)
            r->v[k++] = r->v[i];
    r->n = k;
}

void recent_free(recent_exits *r)
{
    free(r->v);
    memset(r, 0, sizeof(*r));
}
