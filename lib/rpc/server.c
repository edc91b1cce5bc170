/* rpc server: the Varlink server thread.  One epoll loop owns the listening
 * socket, every connection and the wakeup of the reply queue; all sockets are
 * non-blocking, so a client can only ever cost the daemon memory, and that
 * memory is bounded (max_request in, max_output out, max_clients). */
#include "rpc/internal.h"

#include "util/util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ACCEPT_PAUSE_MS 100 /* after EMFILE and friends, before trying accept again */

struct rpc_conn {
    struct rpc_conn *next, *prev;
    rpc_server *srv;
    int fd;
    rpc_peer peer;
    rpc_buf in, out;
    rpc_call *call;  /* the call being answered; later ones wait in `in` */
    uint32_t events; /* what epoll watches now */
    bool eof;        /* the peer will send nothing more */
    bool closing;    /* close once the output is sent (after a bad request) */
    bool dead;       /* closed; freed at the end of the loop iteration */
};

/* ---- connections ---- */

static void conn_end_call(struct rpc_conn *conn)
{
    rpc_call *call = conn->call;

    conn->call = NULL;
    call->conn = NULL;
    rpc_call_unref(call);
}

static void conn_close(struct rpc_conn *conn)
{
    if (conn->dead)
        return;
    epoll_ctl(conn->srv->ep, EPOLL_CTL_DEL, conn->fd, NULL);
    close(conn->fd);
    conn->fd = -1;
    if (conn->call) {
        atomic_store(&conn->call->closed, true);
        conn_end_call(conn);
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
                conn_close(conn);
            return;
        }
        rpc_buf_consume(&conn->out, (size_t)n);
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
        log_warning("rpc: dropping client (pid %d, uid %u): %zu bytes of output unread, "
                    "limit %zu",
                    (int)conn->peer.pid, (unsigned)conn->peer.uid, conn->out.len + len,
                    srv->max_output);
        atomic_fetch_add(&srv->dropped, 1);
        conn_close(conn);
        return;
    }
    r = rpc_buf_append(&conn->out, text, len, SIZE_MAX);
    if (r < 0) {
        log_warning("rpc: dropping client (pid %d): %s", (int)conn->peer.pid, strerror(-r));
        conn_close(conn);
    }
}

void rpc_conn_deliver(struct rpc_conn *conn, rpc_call *call, char *text, size_t len, bool final)
{
    if (!conn->dead && conn->call == call) {
        conn_send(conn, text, len);
        if (final && conn->call == call)
            conn_end_call(conn);
    }
    free(text);
}

/* Answers a message that is not a valid call, then closes: after a framing
 * error nothing later on the stream can be trusted. */
static void conn_bad_request(struct rpc_conn *conn, const char *field, const char *why)
{
    json_object *p = json_object_new_object();
    char *text;
    size_t len;

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

/* ---- dispatch ---- */

static const rpc_method *find_method(const rpc_server *srv, const char *name)
{
    for (size_t i = 0; i < srv->n_methods; i++)
        if (strcmp(srv->methods[i].name, name) == 0)
            return &srv->methods[i];
    return NULL;
}

static const rpc_idl *find_interface(const rpc_server *srv, const char *name, size_t len)
{
    for (size_t i = 0; i < srv->n_ifaces; i++)
        if (strlen(srv->ifaces[i].name) == len && memcmp(srv->ifaces[i].name, name, len) == 0)
            return &srv->ifaces[i];
    return NULL;
}

/* Error for a method with no handler: which one depends on what is declared. */
static int answer_unknown(rpc_server *srv, rpc_call *call, const char *method)
{
    const char *dot = strrchr(method, '.');
    size_t len = dot ? (size_t)(dot - method) : 0;
    const rpc_idl *idl = find_interface(srv, method, len);
    json_object *p = json_object_new_object();

    if (!p)
        return -ENOMEM;
    if (!idl) {
        json_object_object_add(p, "interface", json_object_new_string_len(method, (int)len));
        return rpc_error(call, RPC_ERR_INTERFACE_NOT_FOUND, p);
    }
    json_object_object_add(p, "method", json_object_new_string(method));
    return rpc_error(call,
                     rpc_idl_declares(idl, dot + 1) ? RPC_ERR_METHOD_NOT_IMPLEMENTED
                                                    : RPC_ERR_METHOD_NOT_FOUND,
                     p);
}

/* The standard error for a handler's negative return, or NULL for none. */
static const char *errno_error(int r)
{
    switch (r) {
    case -EINVAL:
        return RPC_ERR_INVALID_PARAMETER;
    case -EPERM:
    case -EACCES:
        return RPC_ERR_PERMISSION_DENIED;
    case -EOPNOTSUPP:
        return RPC_ERR_METHOD_NOT_IMPLEMENTED;
    default:
        return NULL;
    }
}

/* After the handler returned r: answer for it when it did not, and end
 * calls that need no further answer. */
static void finish_call(struct rpc_conn *conn, rpc_call *call, int r)
{
    const char *name = errno_error(r);

    if (conn->dead)
        return;
    if (r < 0 && !atomic_load(&call->done)) {
        json_object *p = json_object_new_object();
        if (!name) {
            log_warning("rpc: %s failed: %s; closing the connection", call->method, strerror(-r));
            json_object_put(p);
            conn_close(conn);
            return;
        }
        if (p && strcmp(name, RPC_ERR_INVALID_PARAMETER) == 0)
            json_object_object_add(p, "parameter", json_object_new_string(""));
        else if (p && strcmp(name, RPC_ERR_METHOD_NOT_IMPLEMENTED) == 0)
            json_object_object_add(p, "method", json_object_new_string(call->method));
        rpc_error(call, name, p);
    }
    if (call->oneway) {
        atomic_store(&call->done, true);
        if (conn->call == call)
            conn_end_call(conn);
    } else if (!atomic_load(&call->done) && atomic_load(&call->refs) <= 2) {
        /* Nobody holds the call to answer it later: the client would wait forever. */
        log_error("rpc: %s returned without answering; closing the connection", call->method);
        conn_close(conn);
    }
}

static void dispatch(struct rpc_conn *conn, const char *msg, size_t len)
{
    rpc_server *srv = conn->srv;
    rpc_call_hdr h;
    rpc_call *call;
    const rpc_method *m;
    const char *field;
    char why[256];
    int r;

    if (rpc_msg_parse_call(msg, len, &h, &field, why, sizeof(why)) < 0) {
        conn_bad_request(conn, field, why);
        return;
    }
    atomic_fetch_add(&srv->calls, 1);
    if (rpc_call_new(srv->q, h.method, h.more, h.oneway, &call) < 0) {
        rpc_call_hdr_free(&h);
        conn_close(conn);
        return;
    }
    conn->call = call; /* the connection's reference */
    call->conn = conn;
    rpc_call_ref(call); /* ours, so the call outlives an answer given inside the handler */
    m = find_method(srv, h.method);
    r = m ? m->fn(call, h.params, &conn->peer, m->userdata) : answer_unknown(srv, call, h.method);
    finish_call(conn, call, r);
    rpc_call_unref(call);
    rpc_call_hdr_free(&h);
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
            conn_bad_request(conn, "", why);
            break;
        }
        dispatch(conn, msg, len);
        rpc_buf_consume(&conn->in, len + 1);
    }
}

/* Reads while no call is in progress; calls are dispatched as they complete. */
static void conn_read(struct rpc_conn *conn)
{
    size_t limit = conn->srv->max_request + 1;

    while (!conn->dead && !conn->call && !conn->closing && !conn->eof) {
        ssize_t n;
        /* A full buffer holds no complete message: conn_process has already
         * answered it as too large, so this only guards the arithmetic. */
        if (rpc_buf_reserve(&conn->in, 1, limit) < 0) {
            conn_close(conn);
            return;
        }
        n = recv(conn->fd, conn->in.data + conn->in.len, conn->in.cap - conn->in.len, MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                conn_close(conn);
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
static void conn_after(struct rpc_conn *conn)
{
    conn_process(conn);
    conn_flush(conn);
    if (conn->dead)
        return;
    if (conn->out.len == 0 && !conn->call && (conn->closing || conn->eof)) {
        conn_close(conn);
        return;
    }
    conn_update_events(conn);
}

static void conn_event(struct rpc_conn *conn, uint32_t events)
{
    if (conn->dead)
        return;
    if (events & EPOLLERR) {
        conn_close(conn);
        return;
    }
    if (events & (EPOLLIN | EPOLLHUP))
        conn_read(conn);
    if (!conn->dead && (events & EPOLLOUT))
        conn_flush(conn);
    /* Hung up entirely: calls already read (oneway ones) have run; nobody is
     * left to read answers. */
    if (events & EPOLLHUP)
        conn_close(conn);
    if (!conn->dead)
        conn_after(conn);
}

static void conn_free(struct rpc_conn *conn)
{
    rpc_buf_free(&conn->in);
    rpc_buf_free(&conn->out);
    free(conn);
}

/* Frees connections closed during this loop iteration. */
static void reap(rpc_server *srv)
{
    struct rpc_conn *c = srv->conns, *next;

    for (; c; c = next) {
        next = c->next;
        if (!c->dead)
            continue;
        if (c->prev)
            c->prev->next = c->next;
        else
            srv->conns = c->next;
        if (c->next)
            c->next->prev = c->prev;
        conn_free(c);
    }
}

/* ---- accepting ---- */

static void pause_accept(rpc_server *srv, int error)
{
    struct epoll_event ev = {.events = 0, .data.ptr = &srv->listen_fd};

    log_warning("rpc: cannot accept connections: %s; retrying in %d ms", strerror(error),
                ACCEPT_PAUSE_MS);
    epoll_ctl(srv->ep, EPOLL_CTL_MOD, srv->listen_fd, &ev);
    srv->accept_paused = true;
    srv->accept_resume_ns = util_now_ns(CLOCK_MONOTONIC) + ACCEPT_PAUSE_MS * 1000000ull;
}

static void resume_accept(rpc_server *srv)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &srv->listen_fd};

    if (!srv->accept_paused || util_now_ns(CLOCK_MONOTONIC) < srv->accept_resume_ns)
        return;
    epoll_ctl(srv->ep, EPOLL_CTL_MOD, srv->listen_fd, &ev);
    srv->accept_paused = false;
}

static void refuse(rpc_server *srv, int fd)
{
    uint64_t now = util_now_ns(CLOCK_MONOTONIC);

    atomic_fetch_add(&srv->refused, 1); /* before the client can see the close */
    close(fd);
    /* One line a second at most: a flood of clients must not flood the log. */
    if (now - srv->refuse_logged_ns >= 1000000000ull || srv->refuse_logged_ns == 0) {
        log_warning("rpc: refusing connections: %u clients connected (max_clients)",
                    srv->max_clients);
        srv->refuse_logged_ns = now;
    }
}

static int add_conn(rpc_server *srv, int fd)
{
    struct rpc_conn *conn = calloc(1, sizeof(*conn));
    struct epoll_event ev = {.events = EPOLLIN};
    int r;

    if (!conn)
        return -ENOMEM;
    conn->srv = srv;
    conn->fd = fd;
    r = rpc_peer_get(fd, srv->priv_gid, &conn->peer);
    ev.data.ptr = conn;
    if (r == 0 && epoll_ctl(srv->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
        r = -errno;
    if (r < 0) {
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

static void accept_clients(rpc_server *srv)
{
    for (;;) {
        int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), r;
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN)
                pause_accept(srv, errno);
            return;
        }
        if (atomic_load(&srv->clients) >= srv->max_clients) {
            refuse(srv, fd);
            continue;
        }
        r = add_conn(srv, fd);
        if (r < 0) {
            log_warning("rpc: dropping a new connection: %s", strerror(-r));
            close(fd);
        }
    }
}

/* ---- the thread ---- */

/* Sends the replies other threads queued. */
static void drain_queue(rpc_server *srv)
{
    rpc_queue_item *it = rpc_queue_take(srv->q), *next;

    for (; it; it = next) {
        struct rpc_conn *conn = it->call->conn;
        next = it->next;
        if (conn) {
            rpc_conn_deliver(conn, it->call, it->text, it->len, it->final);
            it->text = NULL;
            if (!conn->dead)
                conn_after(conn);
        }
        rpc_queue_item_free(it);
    }
}

static void *server_main(void *arg)
{
    rpc_server *srv = arg;
    struct epoll_event evs[32];

    srv->q->thread = pthread_self();
    atomic_store(&srv->q->running, true);
    while (!atomic_load(&srv->stop)) {
        int n = epoll_wait(srv->ep, evs, 32, srv->accept_paused ? ACCEPT_PAUSE_MS : -1);
        if (n < 0 && errno != EINTR) {
            log_error("rpc: epoll_wait: %s; the server stops", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            if (evs[i].data.ptr == &srv->listen_fd)
                accept_clients(srv);
            else if (evs[i].data.ptr == &srv->q)
                drain_queue(srv);
            else
                conn_event(evs[i].data.ptr, evs[i].events);
        }
        resume_accept(srv);
        reap(srv);
    }
    for (struct rpc_conn *c = srv->conns; c; c = c->next)
        conn_close(c);
    reap(srv);
    atomic_store(&srv->q->running, false);
    rpc_queue_close(srv->q);
    return NULL;
}

/* ---- public ---- */

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

static int watch(rpc_server *srv, int fd, void *tag)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = tag};

    return epoll_ctl(srv->ep, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

int rpc_server_new(const rpc_server_config *cfg, int listen_fd, rpc_server **out)
{
    rpc_server *srv = calloc(1, sizeof(*srv));
    int r;

    if (!srv) {
        close(listen_fd);
        return -ENOMEM;
    }
    srv->listen_fd = listen_fd;
    srv->ep = -1;
    srv->priv_gid = cfg->priv_gid;
    srv->max_request = cfg->max_request ? cfg->max_request : RPC_MAX_REQUEST_DEFAULT;
    srv->max_output = cfg->max_output ? cfg->max_output : RPC_MAX_OUTPUT_DEFAULT;
    srv->max_clients = cfg->max_clients ? cfg->max_clients : RPC_MAX_CLIENTS_DEFAULT;
    srv->vendor = dup_or_empty(cfg->vendor);
    srv->product = dup_or_empty(cfg->product);
    srv->version = dup_or_empty(cfg->version);
    srv->url = dup_or_empty(cfg->url);
    r = srv->vendor && srv->product && srv->version && srv->url ? 0 : -ENOMEM;
    if (r == 0)
        r = rpc_queue_new(&srv->q);
    if (r == 0 && (srv->ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
        r = -errno;
    if (r == 0)
        r = watch(srv, listen_fd, &srv->listen_fd);
    if (r == 0)
        r = watch(srv, srv->q->efd, &srv->q);
    if (r == 0)
        r = rpc_service_register(srv);
    if (r < 0) {
        rpc_server_free(srv);
        return r;
    }
    *out = srv;
    return 0;
}

int rpc_server_add_interface(rpc_server *srv, const char *description, char *err, size_t errlen)
{
    rpc_idl idl, *v;
    int r;

    if (srv->started)
        return util_err(err, errlen, -EBUSY, "interfaces must be added before the server starts");
    r = rpc_idl_scan(description, &idl, err, errlen);
    if (r < 0)
        return r;
    if (find_interface(srv, idl.name, strlen(idl.name))) {
        r = util_err(err, errlen, -EEXIST, "interface %s is already registered", idl.name);
        rpc_idl_free(&idl);
        return r;
    }
    v = realloc(srv->ifaces, (srv->n_ifaces + 1) * sizeof(*v));
    if (!v) {
        rpc_idl_free(&idl);
        return -ENOMEM;
    }
    srv->ifaces = v;
    v[srv->n_ifaces++] = idl;
    return 0;
}

int rpc_server_add_method(rpc_server *srv, const char *method, rpc_method_fn fn, void *userdata)
{
    const char *dot = strrchr(method, '.');
    rpc_method *v;

    if (srv->started)
        return -EBUSY;
    if (!dot || !find_interface(srv, method, (size_t)(dot - method)))
        return -ENOENT;
    if (find_method(srv, method))
        return -EEXIST;
    v = realloc(srv->methods, (srv->n_methods + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    srv->methods = v;
    v[srv->n_methods].name = strdup(method);
    if (!v[srv->n_methods].name)
        return -ENOMEM;
    v[srv->n_methods].fn = fn;
    v[srv->n_methods].userdata = userdata;
    srv->n_methods++;
    return 0;
}

int rpc_server_start(rpc_server *srv)
{
    sigset_t all, old;
    int r;

    if (srv->started)
        return -EALREADY;
    if (atomic_load(&srv->stop))
        return -ESHUTDOWN; /* its queue is closed for good */
    /* The thread starts with every signal blocked, so the program's own
     * signal handling (SIGTERM, SIGHUP) never lands on the server thread. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    r = -pthread_create(&srv->thread, NULL, server_main, srv);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r == 0)
        srv->started = true;
    return r;
}

void rpc_server_stop(rpc_server *srv)
{
    uint64_t one = 1;

    if (!srv->started)
        return;
    atomic_store(&srv->stop, true);
    if (write(srv->q->efd, &one, sizeof(one)) < 0) {
        /* a full eventfd counter is readable anyway: the thread wakes */
    }
    pthread_join(srv->thread, NULL);
    srv->started = false;
}

void rpc_server_free(rpc_server *srv)
{
    if (!srv)
        return;
    rpc_server_stop(srv);
    for (struct rpc_conn *c = srv->conns, *next; c; c = next) {
        next = c->next;
        if (c->fd >= 0)
            close(c->fd);
        conn_free(c);
    }
    for (size_t i = 0; i < srv->n_ifaces; i++)
        rpc_idl_free(&srv->ifaces[i]);
    for (size_t i = 0; i < srv->n_methods; i++)
        free(srv->methods[i].name);
    free(srv->ifaces);
    free(srv->methods);
    if (srv->ep >= 0)
        close(srv->ep);
    if (srv->listen_fd >= 0)
        close(srv->listen_fd);
    if (srv->q) {
        /* Never started: nobody else can hold calls, but close for symmetry. */
        rpc_queue_close(srv->q);
        rpc_queue_unref(srv->q);
    }
    free(srv->vendor);
    free(srv->product);
    free(srv->version);
    free(srv->url);
    free(srv);
}

void rpc_server_get_stats(rpc_server *srv, rpc_server_stats *st)
{
    st->clients = atomic_load(&srv->clients);
    st->accepted = atomic_load(&srv->accepted);
    st->refused = atomic_load(&srv->refused);
    st->dropped = atomic_load(&srv->dropped);
    st->bad_requests = atomic_load(&srv->bad_requests);
    st->calls = atomic_load(&srv->calls);
}
