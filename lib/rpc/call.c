/* rpc call: the life of one method call on the server, and the queue that
 * carries answers made on other threads (a subscription's publisher) to the
 * server thread without ever waiting on a client. */
#include "rpc/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

int rpc_queue_new(rpc_queue **out)
{
    rpc_queue *q = calloc(1, sizeof(*q));

    if (!q)
        return -ENOMEM;
    q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (q->efd < 0) {
        int r = -errno;
        free(q);
        return r;
    }
    pthread_mutex_init(&q->lock, NULL);
    atomic_init(&q->refs, 1);
    atomic_init(&q->running, false);
    atomic_init(&q->pending, false);
    *out = q;
    return 0;
}

void rpc_queue_item_free(rpc_queue_item *it)
{
    rpc_call_unref(it->call);
    free(it->text);
    free(it);
}

static void free_items(rpc_queue_item *it)
{
    while (it) {
        rpc_queue_item *next = it->next;
        rpc_queue_item_free(it);
        it = next;
    }
}

void rpc_queue_unref(rpc_queue *q)
{
    if (!q || atomic_fetch_sub(&q->refs, 1) != 1)
        return;
    free_items(q->head);
    close(q->efd);
    pthread_mutex_destroy(&q->lock);
    free(q);
}

rpc_queue_item *rpc_queue_take(rpc_queue *q)
{
    rpc_queue_item *it;
    uint64_t v;

    /* Consume the eventfd first, then clear `pending`, then take: a push
     * that saw `pending` set appended before it was cleared, so its item is
     * taken here; a push after the clear writes the eventfd again. */
    if (read(q->efd, &v, sizeof(v)) < 0) {
        /* EAGAIN: nothing was signalled; items may still be there. */
    }
    atomic_store(&q->pending, false);
    pthread_mutex_lock(&q->lock);
    it = q->head;
    q->head = q->tail = NULL;
    pthread_mutex_unlock(&q->lock);
    return it;
}

void rpc_queue_close(rpc_queue *q)
{
    rpc_queue_item *it;

    pthread_mutex_lock(&q->lock);
    q->closed = true;
    it = q->head;
    q->head = q->tail = NULL;
    pthread_mutex_unlock(&q->lock);
    free_items(it);
}

/* Hands a message to the server thread; takes text. */
static int queue_push(rpc_call *call, char *text, size_t len, bool final)
{
    rpc_queue *q = call->q;
    rpc_queue_item *it = calloc(1, sizeof(*it));
    uint64_t one = 1;

    if (!it) {
        free(text);
        return -ENOMEM;
    }
    it->call = rpc_call_ref(call);
    it->text = text;
    it->len = len;
    it->final = final;
    pthread_mutex_lock(&q->lock);
    if (q->closed) {
        pthread_mutex_unlock(&q->lock);
        rpc_queue_item_free(it);
        return -ESHUTDOWN;
    }
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    pthread_mutex_unlock(&q->lock);
    /* One wakeup per batch: a syscall per reply would cost the publisher
     * more than the append itself. */
    if (!atomic_exchange(&q->pending, true) && write(q->efd, &one, sizeof(one)) < 0) {
        /* EAGAIN: the counter is full, so it is readable and the server wakes */
    }
    return 0;
}

int rpc_call_new(rpc_queue *q, const char *method, bool more, bool oneway, rpc_call **out)
{
    rpc_call *c = calloc(1, sizeof(*c));

    if (!c || !(c->method = strdup(method))) {
        free(c);
        return -ENOMEM;
    }
    atomic_init(&c->refs, 1);
    atomic_init(&c->done, false);
    atomic_init(&c->closed, false);
    atomic_fetch_add(&q->refs, 1);
    c->q = q;
    c->more = more;
    c->oneway = oneway;
    *out = c;
    return 0;
}

rpc_call *rpc_call_ref(rpc_call *call)
{
    atomic_fetch_add(&call->refs, 1);
    return call;
}

void rpc_call_unref(rpc_call *call)
{
    if (!call || atomic_fetch_sub(&call->refs, 1) != 1)
        return;
    rpc_queue_unref(call->q);
    free(call->method);
    free(call);
}

bool rpc_call_more(const rpc_call *call)
{
    return call->more;
}

const char *rpc_call_method(const rpc_call *call)
{
    return call->method;
}

bool rpc_call_closed(const rpc_call *call)
{
    return atomic_load(&call->closed);
}

static bool on_server_thread(const rpc_queue *q)
{
    return atomic_load(&q->running) && pthread_equal(pthread_self(), q->thread);
}

/* Sends one serialised message of the call (takes text). */
static int send_msg(rpc_call *call, char *text, size_t len, bool final)
{
    if (final ? atomic_exchange(&call->done, true) : atomic_load(&call->done)) {
        free(text);
        return -EALREADY;
    }
    if (atomic_load(&call->closed)) {
        free(text);
        return -ECONNRESET;
    }
    if (call->oneway) {
        free(text);
        return 0;
    }
    if (on_server_thread(call->q)) {
        if (call->conn)
            rpc_conn_deliver(call->conn, call, text, len, final);
        else
            free(text);
        return 0;
    }
    return queue_push(call, text, len, final);
}

int rpc_reply(rpc_call *call, json_object *params)
{
    char *text;
    size_t len;
    int r = rpc_msg_reply(params, false, &text, &len);

    return r < 0 ? r : send_msg(call, text, len, true);
}

int rpc_reply_more(rpc_call *call, json_object *params)
{
    char *text;
    size_t len;
    int r;

    if (!call->more) {
        json_object_put(params);
        return -EINVAL;
    }
    r = rpc_msg_reply(params, true, &text, &len);
    return r < 0 ? r : send_msg(call, text, len, false);
}

int rpc_error(rpc_call *call, const char *name, json_object *params)
{
    char *text;
    size_t len;
    int r = rpc_msg_error(name, params, &text, &len);

    return r < 0 ? r : send_msg(call, text, len, true);
}

int rpc_error_invalid_parameter(rpc_call *call, const char *parameter)
{
    json_object *p = json_object_new_object();

    if (!p)
        return -ENOMEM;
    json_object_object_add(p, "parameter", json_object_new_string(parameter));
    return rpc_error(call, RPC_ERR_INVALID_PARAMETER, p);
}

int rpc_error_invalid_parameter_why(rpc_call *call, const char *parameter, const char *fmt, ...)
{
    json_object *p = json_object_new_object();
    char why[256];
    va_list ap;

    if (!p)
        return -ENOMEM;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    json_object_object_add(p, "parameter", json_object_new_string(parameter));
    json_object_object_add(p, "reason", json_object_new_string(why));
    return rpc_error(call, RPC_ERR_INVALID_PARAMETER, p);
}
