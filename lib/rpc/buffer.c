/* rpc buffer: the growable byte buffers behind each connection's input and
 * output, with a hard cap so no client can make the daemon grow without end. */
#include "rpc/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int rpc_buf_reserve(rpc_buf *b, size_t more, size_t limit)
{
    size_t need = b->len + more, cap;
    char *n;

    if (need < b->len || need > limit)
        return -ENOBUFS;
    if (need <= b->cap)
        return 0;
    cap = b->cap ? b->cap : 4096;
    while (cap < need)
        cap *= 2;
    if (cap > limit)
        cap = limit;
    n = realloc(b->data, cap);
    if (!n)
        return -ENOMEM;
    b->data = n;
    b->cap = cap;
    return 0;
}

int rpc_buf_append(rpc_buf *b, const void *data, size_t n, size_t limit)
{
    int r = rpc_buf_reserve(b, n, limit);

    if (r < 0)
        return r;
    memcpy(b->data + b->len, data, n);
    b->len += n;
    return 0;
}

void rpc_buf_consume(rpc_buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}

void rpc_buf_free(rpc_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
