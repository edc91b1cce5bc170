/* groups: the totals wattprofd keeps for the exporter.
 *
 * A cluster asks for energy per command, user, unit and job, and a counter
 * must never go backwards: the sampler adds each tick's energy to the
 * group of the process, and groups live as long as the daemon, so a process
 * that ends leaves its energy there. Per-pid series are only for the few
 * processes with the most energy, so of ended processes only those are
 * kept, and only for a grace period (long enough for a scrape to see their
 * final value). */
#include "daemon.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int groups_find(groups *g, uid_t uid, const char *comm, const char *unit, const char *job,
                size_t *idx)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->v[i].uid == uid && strcmp(g->v[i].comm, comm) == 0 &&
            strcmp(g->v[i].unit, unit) == 0 && strcmp(g->v[i].job, job) == 0) {
            *idx = i;
            return 0;
        }
    if (g->n == g->cap) {
        size_t ncap = g->cap ? g->cap * 2 : 16;
        group_total *n = realloc(g->v, ncap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        g->v = n;
        g->cap = ncap;
    }
    group_total *t = &g->v[g->n];
    memset(t, 0, sizeof(*t));
    t->uid = uid;
    snprintf(t->comm, sizeof(t->comm), "%s", comm);
    snprintf(t->unit, sizeof(t->unit), "%s", unit);
    snprintf(t->job, sizeof(t->job), "%s", job);
    *idx = g->n++;
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
