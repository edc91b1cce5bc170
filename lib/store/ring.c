/* ring: the bounded queue between the sampling thread and the writer.
 *
 * One producer and one consumer, no locks: the producer owns head, the
 * consumer owns tail, and each publishes its index with release ordering
 * after touching the records, so neither side can ever wait on the other. */
#include "store/store-internal.h"

#include <errno.h>
#include <stdlib.h>

int ring_init(ring *q, size_t capacity)
{
    size_t cap = 1;

    while (cap < capacity)
        cap <<= 1;
    q->slot = calloc(cap, sizeof(*q->slot));
    if (!q->slot)
        return -ENOMEM;
    q->mask = cap - 1;
    atomic_init(&q->head, 0);
    atomic_init(&q->tail, 0);
    return 0;
}

void ring_free(ring *q)
{
    free(q->slot);
    q->slot = NULL;
}

bool ring_reserve(ring *q, size_t n, size_t *first, size_t *used)
{
    size_t head = atomic_load_explicit(&q->head, memory_order_relaxed);
    size_t tail = atomic_load_explicit(&q->tail, memory_order_acquire);

    if (q->mask + 1 - (head - tail) < n)
        return false;
    *first = head;
    *used = head - tail + n;
    return true;
}

void ring_publish(ring *q, size_t n)
{
    size_t head = atomic_load_explicit(&q->head, memory_order_relaxed);

    atomic_store_explicit(&q->head, head + n, memory_order_release);
}

size_t ring_room(ring *q)
{
    size_t head = atomic_load_explicit(&q->head, memory_order_relaxed);
    size_t tail = atomic_load_explicit(&q->tail, memory_order_acquire);

    return q->mask + 1 - (head - tail);
}

size_t ring_readable(ring *q, size_t *first)
{
    size_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
    size_t head = atomic_load_explicit(&q->head, memory_order_acquire);

    *first = tail;
    return head - tail;
}

void ring_release(ring *q, size_t n)
{
    size_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);

    atomic_store_explicit(&q->tail, tail + n, memory_order_release);
}
