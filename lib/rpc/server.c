/* rpc server: the Varlink server thread.  One epoll loop owns the listening
 * socket, every connection and the wakeup of the reply queue; all sockets are
 * non-blocking, so a client can only ever cost the daemon memory, and that
 * memory is bounded (max_request in, max_output out, max_clients), and no
 * client can hold a slot it does not use (per-uid shares, idle timeout). */
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
        rpc_conn_free(c);
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

/* Who may take another connection: NULL when `peer` may, else why not.
 * Privileged peers may fill every slot; the unprivileged together leave a
 * quarter of them free, and each uid has a share of its own, so no user
 * can lock out root, the group or the other users. */
static const char *admit(rpc_server *srv, const rpc_peer *peer, char *why, size_t len)
{
    unsigned total = atomic_load(&srv->clients), same_uid = 0, unprivileged = 0;
    unsigned shared = srv->max_clients - srv->max_clients / 4;

    if (total >= srv->max_clients) {
        snprintf(why, len, "%u clients are connected, the most the daemon serves (max_clients)",
                 total);
        return why;
    }
    if (peer->privileged)
        return NULL;
    for (struct rpc_conn *c = srv->conns; c; c = c->next) {
        if (c->dead || c->peer.privileged)
            continue;
        unprivileged++;
        same_uid += c->peer.uid == peer->uid;
    }
    if (same_uid >= srv->max_per_uid)
        snprintf(why, len,
                 "uid %u has %u connections open, the most one user may have "
                 "(max_clients_per_user)",
                 (unsigned)peer->uid, same_uid);
    else if (unprivileged >= shared)
        snprintf(why, len,
                 "%u clients of unprivileged users are connected, the most they may have; "
                 "the other %u slots are kept for root and the daemon's group",
                 unprivileged, srv->max_clients - shared);
    else
        return NULL;
    return why;
}

/* Tells a refused client why (when an error name is configured), then
 * closes.  The reply is small: a fresh socket's buffer takes it whole. */
static void refuse(rpc_server *srv, int fd, const rpc_peer *peer, const char *why)
{
    json_object *p;
    char *text;
    size_t len;

    if (srv->refuse_error && (p = json_object_new_object())) {
        json_object_object_add(p, "reason", json_object_new_string(why));
        if (rpc_msg_error(srv->refuse_error, p, &text, &len) == 0) {
            if (send(fd, text, len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
                /* gone already: the close says the rest */
            }
            free(text);
        }
    }
    atomic_fetch_add(&srv->refused, 1); /* before the client can see the close */
    close(fd);
    /* A flood of clients must not flood the log. */
    if (rpc_noise_allow(srv, peer->uid))
        log_warning("rpc: refusing a connection of pid %d uid %u: %s", (int)peer->pid,
                    (unsigned)peer->uid, why);
}

static void accept_clients(rpc_server *srv)
{
    for (;;) {
        int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), r;
        rpc_peer peer;
        char why[256];
        const char *no;
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN)
                pause_accept(srv, errno);
            return;
        }
        if ((r = rpc_peer_get(fd, srv->priv_gid, &peer)) < 0) {
            log_warning("rpc: dropping a new connection: its credentials: %s", strerror(-r));
            close(fd);
            continue;
        }
        if ((no = admit(srv, &peer, why, sizeof(why)))) {
            refuse(srv, fd, &peer, no);
            continue;
        }
        r = rpc_conn_new(srv, fd, &peer);
        if (r < 0) {
            log_warning("rpc: dropping a new connection: %s", strerror(-r));
            close(fd);
        }
    }
}

/* ---- idle connections ---- */

/* How often idle connections are looked for: a quarter of the timeout, so
 * one is closed at most a quarter late, and at least once a second. */
static uint64_t sweep_period_ns(const rpc_server *srv)
{
    uint64_t p = srv->idle_ns / 4;
    return p < 10000000ull ? 10000000ull : p > 1000000000ull ? 1000000000ull : p;
}

/* Closes connections with no call in progress that made no progress for
 * idle_ns: silent ones and those that never finish a message. */
static void sweep_idle(rpc_server *srv)
{
    uint64_t now = util_now_ns(CLOCK_MONOTONIC);
    unsigned closed = 0;
    rpc_peer first = {0};

    if (srv->idle_ns == 0 || now < srv->next_sweep_ns)
        return;
    srv->next_sweep_ns = now + sweep_period_ns(srv);
    for (struct rpc_conn *c = srv->conns; c; c = c->next) {
        if (c->dead || c->call || now - c->active_ns < srv->idle_ns)
            continue;
        if (closed++ == 0)
            first = c->peer;
        rpc_conn_close(c);
    }
    if (closed == 0)
        return;
    atomic_fetch_add(&srv->idle_closed, closed);
    log_info("rpc: closed %u connection%s idle for %.1f s (the first of pid %d uid %u)", closed,
             closed == 1 ? "" : "s", (double)srv->idle_ns / 1e9, (int)first.pid,
             (unsigned)first.uid);
}

/* The epoll_wait timeout: until accepting resumes or the next sweep. */
static int wait_ms(const rpc_server *srv)
{
    int ms = srv->accept_paused ? ACCEPT_PAUSE_MS : -1;
    uint64_t now, due;

    if (srv->idle_ns == 0 || !srv->conns)
        return ms;
    now = util_now_ns(CLOCK_MONOTONIC);
    due = srv->next_sweep_ns > now ? (srv->next_sweep_ns - now + 999999) / 1000000 : 0;
    return ms < 0 || (uint64_t)ms > due ? (int)due : ms;
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
                rpc_conn_after(conn);
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
        int n = epoll_wait(srv->ep, evs, 32, wait_ms(srv));
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
                rpc_conn_event(evs[i].data.ptr, evs[i].events);
        }
        resume_accept(srv);
        sweep_idle(srv);
        rpc_noise_flush(srv);
        reap(srv);
    }
    for (struct rpc_conn *c = srv->conns; c; c = c->next)
        rpc_conn_close(c);
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
    srv->max_per_uid =
        cfg->max_clients_per_uid ? cfg->max_clients_per_uid : RPC_MAX_PER_UID_DEFAULT;
    srv->idle_ns = (uint64_t)cfg->idle_timeout_ms * 1000000ull;
    srv->vendor = dup_or_empty(cfg->vendor);
    srv->product = dup_or_empty(cfg->product);
    srv->version = dup_or_empty(cfg->version);
    srv->url = dup_or_empty(cfg->url);
    srv->refuse_error = cfg->refuse_error ? strdup(cfg->refuse_error) : NULL;
    r = srv->vendor && srv->product && srv->version && srv->url &&
                (srv->refuse_error || !cfg->refuse_error)
            ? 0
            : -ENOMEM;
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
    if (rpc_server_find_interface(srv, idl.name, strlen(idl.name))) {
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
    if (!dot || !rpc_server_find_interface(srv, method, (size_t)(dot - method)))
        return -ENOENT;
    if (rpc_server_find_method(srv, method))
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
        rpc_conn_free(c);
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
    free(srv->refuse_error);
    free(srv);
}

void rpc_server_get_stats(rpc_server *srv, rpc_server_stats *st)
{
    st->clients = atomic_load(&srv->clients);
    st->accepted = atomic_load(&srv->accepted);
    st->refused = atomic_load(&srv->refused);
    st->idle_closed = atomic_load(&srv->idle_closed);
    st->dropped = atomic_load(&srv->dropped);
    st->bad_requests = atomic_load(&srv->bad_requests);
    st->calls = atomic_load(&srv->calls);
}
