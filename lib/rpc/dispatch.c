/* rpc dispatch: from a parsed call to its handler, and the standard Varlink
 * errors when there is no handler or the handler fails without answering. */
#include "rpc/internal.h"

#include "util/util.h"

#include <errno.h>
#include <string.h>

const rpc_method *rpc_server_find_method(const rpc_server *srv, const char *name)
{
    for (size_t i = 0; i < srv->n_methods; i++)
        if (strcmp(srv->methods[i].name, name) == 0)
            return &srv->methods[i];
    return NULL;
}

const rpc_idl *rpc_server_find_interface(const rpc_server *srv, const char *name, size_t len)
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
    const rpc_idl *idl = rpc_server_find_interface(srv, method, len);
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
            rpc_conn_close(conn);
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
            rpc_conn_end_call(conn);
    } else if (!atomic_load(&call->done) && atomic_load(&call->refs) <= 2) {
        /* Nobody holds the call to answer it later: the client would wait forever. */
        log_error("rpc: %s returned without answering; closing the connection", call->method);
        rpc_conn_close(conn);
    }
}

void rpc_dispatch(struct rpc_conn *conn, const char *msg, size_t len)
{
    rpc_server *srv = conn->srv;
    rpc_call_hdr h;
    rpc_call *call;
    const rpc_method *m;
    const char *field;
    char why[256];
    int r;

    if (rpc_msg_parse_call(msg, len, &h, &field, why, sizeof(why)) < 0) {
        rpc_conn_bad_request(conn, field, why);
        return;
    }
    atomic_fetch_add(&srv->calls, 1);
    if (rpc_call_new(srv->q, h.method, h.more, h.oneway, &call) < 0) {
        rpc_call_hdr_free(&h);
        rpc_conn_close(conn);
        return;
    }
    conn->call = call; /* the connection's reference */
    call->conn = conn;
    rpc_call_ref(call); /* ours, so the call outlives an answer given inside the handler */
    m = rpc_server_find_method(srv, h.method);
    r = m ? m->fn(call, h.params, &conn->peer, m->userdata) : answer_unknown(srv, call, h.method);
    finish_call(conn, call, r);
    rpc_call_unref(call);
    rpc_call_hdr_free(&h);
}
