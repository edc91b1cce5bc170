/* rpc: Varlink over a Unix stream socket, server and client.
 *
 * Messages are JSON objects (json-c), each terminated by a NUL byte.
 * A call is {"method": "iface.Method", "parameters": {...}, "more": bool,
 * "oneway": bool}; a reply is {"parameters": {...}}, with "continues": true
 * on every reply but the last of a "more" call; an error is
 * {"error": "iface.ErrorName", "parameters": {...}}.
 *
 * The server runs in a thread of its own around one epoll loop, with
 * non-blocking sockets, so whoever starts it (the sampling thread) never
 * waits on a client.  A connection handles one call at a time, in order;
 * later calls stay buffered until the current one has its final reply.
 * Method handlers run on the server thread.  A handler answers at once, or
 * keeps the call (rpc_call_ref) and answers later from any thread: replies
 * from other threads go through a queue that wakes the server by an eventfd
 * and never block on a client.
 *
 * Limits that protect the daemon: a request over max_request bytes, or one
 * that is not a well-formed call (malformed or non-UTF-8 JSON, no "method",
 * fields of the wrong type) gets org.varlink.service.InvalidParameter, with
 * "parameter" naming the field at fault ("" for the message as a whole) and
 * a "reason" for a person, and the connection is closed; a client whose unsent output would pass
 * max_output bytes is dropped.  No user can lock the others out: an unprivileged uid holds at
 * most max_clients_per_uid connections, unprivileged peers together at most three quarters of
 * max_clients (the rest is kept for root and the privileged group), and a connection that
 * completes no call for idle_timeout_ms while none is in progress (silent, or sending a message
 * it never finishes) is closed.  A refused connection is accepted, told why (the configured
 * refuse_error with a "reason") and closed.
 *
 * Functions return 0 (or a count) on success and a negative errno on
 * failure; those that take `err` fill it with one line for a person. */
#ifndef WATTPROF_RPC_H
#define WATTPROF_RPC_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define RPC_MAX_REQUEST_DEFAULT (64 * 1024)  /* bytes, NUL excluded */
#define RPC_MAX_OUTPUT_DEFAULT (1024 * 1024) /* unsent bytes per client */
#define RPC_MAX_CLIENTS_DEFAULT 64
#define RPC_MAX_PER_UID_DEFAULT 16

/* The standard errors of org.varlink.service. */
#define RPC_ERR_INTERFACE_NOT_FOUND "org.varlink.service.InterfaceNotFound"
#define RPC_ERR_METHOD_NOT_FOUND "org.varlink.service.MethodNotFound"
#define RPC_ERR_METHOD_NOT_IMPLEMENTED "org.varlink.service.MethodNotImplemented"
#define RPC_ERR_INVALID_PARAMETER "org.varlink.service.InvalidParameter"
#define RPC_ERR_PERMISSION_DENIED "org.varlink.service.PermissionDenied"
#define RPC_ERR_EXPECTED_MORE "org.varlink.service.ExpectedMore"

/* The io.wattprof.Monitor interface definition (lib/rpc/io.wattprof.Monitor.varlink),
 * compiled in so the daemon can register it with rpc_server_add_interface. */
extern const char rpc_monitor_interface[];

/* ---- Peers ---- */

/* Who is on the other end of a connection, from SO_PEERCRED when it connected. */
typedef struct rpc_peer {
    uid_t uid;
    gid_t gid;
    pid_t pid;       /* 0 when the peer is in another pid namespace */
    bool privileged; /* uid 0, or the configured group is its primary or a supplementary group */
} rpc_peer;

/* Fills *peer for a connected Unix socket.  priv_gid is the group whose
 * members count as privileged, or (gid_t)-1 for none.  Supplementary groups
 * come from SO_PEERGROUPS (the peer's groups when it connected), else from
 * getgrouplist() on the user's name. */
int rpc_peer_get(int fd, gid_t priv_gid, rpc_peer *peer);

/* ---- Listening sockets ---- */

/* Creates a listening Unix stream socket at path (non-blocking, close-on-exec)
 * with the given file mode.  A stale socket file nobody answers on is
 * replaced; one a live server answers on gives -EADDRINUSE. */
int rpc_listen_unix(const char *path, mode_t mode, int *fd, char *err, size_t errlen);

/* Socket activation: when systemd passed exactly one listening Unix stream
 * socket (LISTEN_FDS), stores it in *fd and returns 1; returns 0 when none
 * was passed; negative when what was passed is unusable. */
int rpc_listen_activated(int *fd, char *err, size_t errlen);

/* ---- Calls (server side) ---- */

typedef struct rpc_call rpc_call;

/* A method handler, run on the server thread.  It answers with rpc_reply,
 * rpc_reply_more or rpc_error, now or later: to answer later (a stream, or
 * work done by another thread) it takes a reference with rpc_call_ref before
 * it returns.  A negative return without an answer sends the matching
 * standard error: -EINVAL InvalidParameter, -EPERM/-EACCES
 * PermissionDenied, -EOPNOTSUPP MethodNotImplemented; any other errno
 * closes the connection.  params is the call's "parameters" object (never
 * NULL; borrowed for the duration of the handler).  peer is valid for the
 * duration of the handler; copy it to keep it. */
typedef int (*rpc_method_fn)(rpc_call *call, json_object *params, const rpc_peer *peer,
                             void *userdata);

/* Final reply: {"parameters": params}.  Takes ownership of params (NULL
 * sends an empty object).  Any thread.  Returns -EALREADY when the call
 * already had its final answer, -ECONNRESET when its client is gone,
 * -ESHUTDOWN when the server has stopped. */
int rpc_reply(rpc_call *call, json_object *params);

/* A streamed reply with "continues": true, for a call made with "more"
 * (else -EINVAL).  Takes ownership of params.  Any thread; errors as
 * rpc_reply. */
int rpc_reply_more(rpc_call *call, json_object *params);

/* Final error reply {"error": name, "parameters": params}.  Takes ownership
 * of params (NULL: empty object).  Any thread; errors as rpc_reply. */
int rpc_error(rpc_call *call, const char *name, json_object *params);

/* org.varlink.service.InvalidParameter naming the parameter at fault. */
int rpc_error_invalid_parameter(rpc_call *call, const char *parameter);
/* The same with a "reason" for a person (printf format). */
int rpc_error_invalid_parameter_why(rpc_call *call, const char *parameter, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* True when the call asked for a stream ("more": true). */
bool rpc_call_more(const rpc_call *call);

/* The full method name of the call ("io.wattprof.Monitor.Subscribe"). */
const char *rpc_call_method(const rpc_call *call);

/* True once the call's client has disconnected or been dropped, or the
 * server has stopped: a publisher's cue to let go of the call. */
bool rpc_call_closed(const rpc_call *call);

/* Reference counting; each takes and drops one reference, from any thread. */
rpc_call *rpc_call_ref(rpc_call *call);
void rpc_call_unref(rpc_call *call);

/* ---- Parameter checking ---- */

enum rpc_type { RPC_T_INT, RPC_T_FLOAT, RPC_T_STRING, RPC_T_BOOL, RPC_T_OBJECT, RPC_T_ARRAY };

/* One field a method accepts.  RPC_T_FLOAT accepts integers too. */
typedef struct rpc_param_spec {
    const char *name;
    enum rpc_type type;
    bool optional;
    bool ranged;     /* a number that must lie in [min, max] */
    double min, max; /* ranged only */
} rpc_param_spec;

/* Checks params against n specs: every required field present, every field
 * known and of its type (JSON null counts as absent for optional fields),
 * every ranged number within its range.  On the first mismatch replies
 * InvalidParameter naming the field (with a "reason" for a person when it
 * is out of range) and returns -EINVAL, so a handler just returns what
 * this returns. */
int rpc_params_check(rpc_call *call, json_object *params, const rpc_param_spec *spec, size_t n);

/* ---- Server ---- */

typedef struct rpc_server rpc_server;

typedef struct rpc_server_config {
    const char *vendor, *product, *version, *url; /* for GetInfo; NULL reads "" */
    gid_t priv_gid;     /* members are privileged; (gid_t)-1 for nobody but root */
    size_t max_request; /* 0: RPC_MAX_REQUEST_DEFAULT */
    /* Unsent bytes a client may have waiting before it is dropped; a single
     * larger reply still goes to a client with nothing else pending.
     * 0: RPC_MAX_OUTPUT_DEFAULT */
    size_t max_output;
    unsigned max_clients; /* 0: RPC_MAX_CLIENTS_DEFAULT */
    /* Connections one unprivileged uid may hold; 0: RPC_MAX_PER_UID_DEFAULT */
    unsigned max_clients_per_uid;
    /* Closes a connection with no call in progress that completed none for
     * this long; 0: never. */
    unsigned idle_timeout_ms;
    /* The error a refused connection gets, with {"reason": ...}, before it
     * is closed ("iface.TooManyClients"); NULL: closed without a word. */
    const char *refuse_error;
} rpc_server_config;

/* Creates a server that will accept on listen_fd (which it then owns and
 * closes).  Serves org.varlink.service from the start. */
int rpc_server_new(const rpc_server_config *cfg, int listen_fd, rpc_server **out);

/* Registers an interface by its Varlink definition text (copied).  Its name
 * comes from the "interface" line; methods it declares that have no handler
 * answer MethodNotImplemented.  Only before rpc_server_start. */
int rpc_server_add_interface(rpc_server *srv, const char *description, char *err, size_t errlen);

/* Registers the handler of a full method name ("iface.Method"), whose
 * interface must have been added.  Only before rpc_server_start. */
int rpc_server_add_method(rpc_server *srv, const char *method, rpc_method_fn fn, void *userdata);

/* Starts the server thread. */
int rpc_server_start(rpc_server *srv);

/* Stops the server thread and closes every connection: pending calls read as
 * closed and further replies return -ESHUTDOWN.  Safe to call twice. */
void rpc_server_stop(rpc_server *srv);

/* Stops the server if needed and frees it.  Calls that handlers still hold
 * stay valid until their last rpc_call_unref. */
void rpc_server_free(rpc_server *srv);

/* Counters for status and tests; any thread. */
typedef struct rpc_server_stats {
    unsigned clients;      /* connected now */
    uint64_t accepted;     /* connections accepted and served */
    uint64_t refused;      /* connections closed at once for the client limits */
    uint64_t idle_closed;  /* connections closed for idle_timeout_ms */
    uint64_t dropped;      /* clients dropped for output over max_output */
    uint64_t bad_requests; /* oversized or malformed requests */
    uint64_t calls;        /* method calls dispatched */
} rpc_server_stats;
void rpc_server_get_stats(rpc_server *srv, rpc_server_stats *st);

/* ---- Client ---- */

typedef struct rpc_client rpc_client;

/* One reply as the client reads it. */
typedef struct rpc_reply_msg {
    json_object *params; /* owned; an empty object when the reply had none */
    char *error;         /* owned error name, or NULL for a normal reply */
    bool continues;      /* more replies follow for this call */
} rpc_reply_msg;

/* Frees what a reply holds and zeroes it. */
void rpc_reply_msg_clear(rpc_reply_msg *r);

/* Connects to the Unix socket at path.  -ENOENT/-ECONNREFUSED mean no server
 * is there; err says so with the path. */
int rpc_client_connect(const char *path, rpc_client **out, char *err, size_t errlen);

void rpc_client_free(rpc_client *c);

/* Flags for rpc_client_call. */
#define RPC_CALL_MORE 1u
#define RPC_CALL_ONEWAY 2u

/* Sends a call (params borrowed, NULL: {}), waiting at most timeout_ms
 * (-1: forever) for the socket to take it. */
int rpc_client_call(rpc_client *c, const char *method, json_object *params, unsigned flags,
                    int timeout_ms, char *err, size_t errlen);

/* Reads the next reply, waiting at most timeout_ms (-1: forever).  Returns 0
 * with *r filled (check r->error, r->continues), -ETIMEDOUT, -ECONNRESET
 * when the server closed the connection, -EBADMSG for a reply that is not
 * a Varlink message, -E2BIG for one over the client's limit (64 MiB). */
int rpc_client_read(rpc_client *c, int timeout_ms, rpc_reply_msg *r, char *err, size_t errlen);

/* The raw socket, for poll() by callers that multiplex. */
int rpc_client_fd(const rpc_client *c);

#endif
