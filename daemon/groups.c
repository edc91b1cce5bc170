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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a of the labels, each string with its terminating NUL. */
static uint64_t labels_hash(uid_t uid, const char *comm, const char *unit, const char *job)
{
    const char *field[] = {comm, unit, job};
    uint64_t h = 14695981039346656037ull;

    for (size_t k = 0; k < sizeof(uid); k++)
        h = (h ^ ((uint64_t)uid >> (8 * k) & 0xff)) * 1099511628211ull;
    for (size_t f = 0; f < 3; f++) {
        const unsigned char *c = (const unsigned char *)field[f];
        do
            h = (h ^ *c) * 1099511628211ull;
        while (*c++);
    }
    return h;
}

/* The slot of these labels: the one holding their group, or the free one
 * where it would go. The table is never full, so the probe ends. */
static size_t *slot_of(const groups *g, uid_t uid, const char *comm, const char *unit,
                       const char *job)
{
    size_t mask = g->n_slots - 1, i = (size_t)labels_hash(uid, comm, unit, job) & mask;

    for (;; i = (i + 1) & mask) {
        size_t *sl = &g->slot[i];
        if (*sl == 0)
            return sl;
        const group_total *t = &g->v[*sl - 1];
        if (t->uid == uid && strcmp(t->comm, comm) == 0 && strcmp(t->unit, unit) == 0 &&
            strcmp(t->job, job) == 0)
            return sl;
    }
}

/* Makes room for one more group at most half full, rebuilding the table
 * from g->v when it grows (or was never built, in a copy). */
static int reserve_slots(groups *g)
{
    size_t want = g->n_slots ? g->n_slots : 64;

    while (want < 2 * (g->n + 1))
        want *= 2;
    if (want == g->n_slots)
        return 0;
    size_t *slot = calloc(want, sizeof(*slot));
    if (!slot)
        return -ENOMEM;
    free(g->slot);
    g->slot = slot;
    g->n_slots = want;
    for (size_t i = 0; i < g->n; i++) {
        const group_total *t = &g->v[i];
        *slot_of(g, t->uid, t->comm, t->unit, t->job) = i + 1;
    }
    return 0;
}

int groups_find(groups *g, uid_t uid, const char *comm, const char *unit, const char *job,
                size_t *idx)
{
    size_t *sl;

    if (reserve_slots(g) < 0)
        return -ENOMEM;
    sl = slot_of(g, uid, comm, unit, job);
    if (*sl) {
        *idx = *sl - 1;
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
    /* Keyed as stored: labels longer than their field were cut above. */
    *slot_of(g, t->uid, t->comm, t->unit, t->job) = g->n + 1;
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
    free(g->slot);
    memset(g, 0, sizeof(*g));
}

int groups_recent_add(recent_exits *r, const live_proc *p)
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

void groups_recent_expire(recent_exits *r, uint64_t before_mono_ns)
{
    size_t k = 0;

    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].exited_mono_ns > before_mono_ns)
            r->v[k++] = r->v[i];
    r->n = k;
}

void groups_recent_free(recent_exits *r)
{
    free(r->v);
    memset(r, 0, sizeof(*r));
}
