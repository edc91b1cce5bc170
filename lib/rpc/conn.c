/* rpc conn: one client connection, on the server thread: reading and framing
 * its calls one at a time, buffering and sending its replies within the
 * bounds, and closing it. */
#include "rpc/internal.h"

#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define READS_PER_WAKEUP 16

void rpc_conn_end_call(struct rpc_conn *conn)
{
    rpc_call *call = conn->call;

    conn->call = NULL;
    call->conn = NULL;
    rpc_call_unref(call);
    conn->active_ns = util_now_ns(CLOCK_MONOTONIC);
}

void rpc_conn_close(struct rpc_conn *conn)
{
    if (conn->dead)
        return;
    epoll_ctl(conn->srv->ep, EPOLL_CTL_DEL, conn->fd, NULL);
    close(conn->fd);
    conn->fd = -1;
    if (conn->call) {
        atomic_store(&conn->call->closed, true);
        rpc_conn_end_call(conn);
    }
    conn->dead = true;
    atomic_fetch_sub(&conn->srv->clients, 1);
}

/* Sends what the socket takes now; closes the connection on a write error. */
static void conn_flush(struct rpc_conn *conn)
{
    while (!conn->dead && conn->out.len > 0) {
        ssize_t n = send(conn->fd, conn->out.data, conn->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                rpc_conn_close(conn);
            return;
        }
        rpc_buf_consume(&conn->out, (size_t)n);
        conn->active_ns = util_now_ns(CLOCK_MONOTONIC);
    }
}

/* Queues a message for the client, dropping a client that does not read:
 * one whose unsent output would pass max_output.  A single reply bigger
 * than the bound still goes to a client that has read everything before it. */
static void conn_send(struct rpc_conn *conn, const char *text, size_t len)
{
    rpc_server *srv = conn->srv;
    int r;

    if (conn->dead)
        return;
    if (conn->out.len + len > srv->max_output)
        conn_flush(conn);
    if (conn->dead)
        return;
    if (conn->out.len > 0 && conn->out.len + len > srv->max_output) {
        if (rpc_noise_allow(srv, conn->peer.uid))
            log_warning("rpc: dropping client (pid %d, uid %u): %zu bytes of output unread, "
                        "limit %zu",
                        (int)conn->peer.pid, (unsigned)conn->peer.uid, conn->out.len + len,
                        srv->max_output);
        atomic_fetch_add(&srv->dropped, 1);
        rpc_conn_close(conn);
        return;
    }
    r = rpc_buf_append(&conn->out, text, len, SIZE_MAX);
    if (r < 0) {
        log_warning("rpc: dropping client (pid %d): %s", (int)conn->peer.pid, strerror(-r));
        rpc_conn_close(conn);
    }
}

void rpc_conn_deliver(struct rpc_conn *conn, rpc_call *call, char *text, size_t len, bool final)
{
    if (!conn->dead && conn->call == call) {
        conn_send(conn, text, len);
        if (final && conn->call == call)
            rpc_conn_end_call(conn);
    }
    free(text);
}

/* Answers a message that is not a valid call, then closes: after a framing
 * error nothing later on the stream can be trusted. */
void rpc_conn_bad_request(struct rpc_conn *conn, const char *field, const char *why)
{
    json_object *p = json_object_new_object();
    char *text;
    size_t len;

    if (rpc_noise_allow(conn->srv, conn->peer.uid))
        log_info("rpc: bad request from pid %d uid %u: %s", (int)conn->peer.pid,
                 (unsigned)conn->peer.uid, why);
    atomic_fetch_add(&conn->srv->bad_requests, 1);
    conn->closing = true;
    if (p) {
        json_object_object_add(p, "parameter", json_object_new_string(field));
        json_object_object_add(p, "reason", json_object_new_string(why));
    }
    if (rpc_msg_error(RPC_ERR_INVALID_PARAMETER, p, &text, &len) == 0) {
        conn_send(conn, text, len);
        free(text);
    }
}

/* Dispatches buffered calls, one at a time, while no call is in progress. */
static void conn_process(struct rpc_conn *conn)
{
    rpc_server *srv = conn->srv;
    const char *msg;
    size_t len;
    char why[128];

    while (!conn->dead && !conn->call && !conn->closing) {
        int r = rpc_frame_next(&conn->in, srv->max_request, &msg, &len);
        if (r == 0)
            break;
        if (r < 0) {
            snprintf(why, sizeof(why), "request larger than %zu bytes", srv->max_request);
            rpc_conn_bad_request(conn, "", why);
            break;
        }
        conn->active_ns = util_now_ns(CLOCK_MONOTONIC);
        rpc_dispatch(conn, msg, len);
        rpc_buf_consume(&conn->in, len + 1);
    }
}

/* Reads while no call is in progress; calls are dispatched as they complete.
 * A bounded number of reads per wakeup, so a client that never stops
 * sending cannot keep the loop from the others (epoll reports it again). */
static void conn_read(struct rpc_conn *conn)
{
    size_t limit = conn->srv->max_request + 1;

    for (int reads = 0;
         reads < READS_PER_WAKEUP && !conn->dead && !conn->call && !conn->closing && !conn->eof;
         reads++) {
        ssize_t n;
        /* A full buffer holds no complete message: conn_process has already
         * answered it as too large, so this only guards the arithmetic. */
        if (rpc_buf_reserve(&conn->in, 1, limit) < 0) {
            rpc_conn_close(conn);
            return;
        }
        n = recv(conn->fd, conn->in.data + conn->in.len, conn->in.cap - conn->in.len, MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                rpc_conn_close(conn);
            return;
        }
        if (n == 0)
            conn->eof = true;
        conn->in.len += (size_t)n;
        conn_process(conn);
    }
}

static void conn_update_events(struct rpc_conn *conn)
{
    struct epoll_event ev = {0};

    ev.events = (!conn->call && !conn->closing && !conn->eof ? EPOLLIN : 0) |
                (conn->out.len > 0 ? EPOLLOUT : 0);
    ev.data.ptr = conn;
    if (ev.events != conn->events && epoll_ctl(conn->srv->ep, EPOLL_CTL_MOD, conn->fd, &ev) == 0)
        conn->events = ev.events;
}

/* After anything happened on a connection: dispatch what waits, send, and
 * close when there is nothing left to do. */
void rpc_conn_after(struct rpc_conn *conn)
{
    conn_process(conn);
    conn_flush(conn);
    if (conn->dead)
        return;
    if (conn->out.len == 0 && !conn->call && (conn->closing || conn->eof)) {
        rpc_conn_close(conn);
        return;
    }
    conn_update_events(conn);
}

void rpc_conn_event(struct rpc_conn *conn, uint32_t events)
{
    if (conn->dead)
        return;
    if (events & EPOLLERR) {
        rpc_conn_close(conn);
        return;
    }
    if (events & (EPOLLIN | EPOLLHUP))
        conn_read(conn);
    if (!conn->dead && (events & EPOLLOUT))
        conn_flush(conn);
    /* Hung up entirely: calls already read (oneway ones) have run; nobody is
     * left to read answers. */
    if (events & EPOLLHUP)
        rpc_conn_close(conn);
    if (!conn->dead)
        rpc_conn_after(conn);
}

void rpc_conn_free(struct rpc_conn *conn)
{
    rpc_buf_free(&conn->in);
    rpc_buf_free(&conn->out);
    free(conn);
}

int rpc_conn_new(rpc_server *srv, int fd, const rpc_peer *peer)
{
    struct rpc_conn *conn = calloc(1, sizeof(*conn));
    struct epoll_event ev = {.events = EPOLLIN};

    if (!conn)
        return -ENOMEM;
    conn->srv = srv;
    conn->fd = fd;
    conn->peer = *peer;
    conn->active_ns = util_now_ns(CLOCK_MONOTONIC);
    ev.data.ptr = conn;
    if (epoll_ctl(srv->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
        int r = -errno;
        free(conn);
        return r;
    }
    conn->events = EPOLLIN;
    conn->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = conn;
    srv->conns = conn;
    atomic_fetch_add(&srv->clients, 1);
    atomic_fetch_add(&srv->accepted, 1);
    return 0;
}
