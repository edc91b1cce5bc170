/* rpc internals shared by the files of lib/rpc: byte buffers, framing and
 * message building, interface definitions, and the reply queue that lets
 * any thread answer a call the server thread owns.  Not for programs. */
#ifndef WATTPROF_RPC_INTERNAL_H
#define WATTPROF_RPC_INTERNAL_H

#include "rpc/rpc.h"

#include <pthread.h>
#include <stdatomic.h>

/* ---- buffer.c: a growable byte buffer ---- */

typedef struct rpc_buf {
    char *data;
    size_t len, cap;
} rpc_buf;

/* Makes room for at least `more` bytes past len, never growing cap past
 * `limit` bytes (returns -ENOBUFS when that would be needed). */
int rpc_buf_reserve(rpc_buf *b, size_t more, size_t limit);
int rpc_buf_append(rpc_buf *b, const void *data, size_t n, size_t limit);
/* Drops the first n bytes. */
void rpc_buf_consume(rpc_buf *b, size_t n);
void rpc_buf_free(rpc_buf *b);

/* ---- message.c: framing and messages ---- */

/* Finds the first NUL-terminated message in b.  Returns 1 with *msg and *len
 * (len without the NUL) pointing into b; 0 when more bytes are needed;
 * -E2BIG when no terminator came within max bytes. */
int rpc_frame_next(const rpc_buf *b, size_t max, const char **msg, size_t *len);

/* Parses exactly len bytes as one JSON value (strict); text[len] must be
 * NUL.  NULL with a reason in why on failure. */
json_object *rpc_json_parse(const char *text, size_t len, char *why, size_t whylen);

/* A parsed call; method and params point into obj. */
typedef struct rpc_call_hdr {
    json_object *obj;
    const char *method;
    json_object *params; /* never NULL: an empty object when the call had none */
    bool more, oneway;
} rpc_call_hdr;

/* Parses a call message of len bytes.  On failure returns -EBADMSG and names
 * the field at fault in *field ("" for the message as a whole) with a reason
 * for a person in why. */
int rpc_msg_parse_call(const char *text, size_t len, rpc_call_hdr *h, const char **field, char *why,
                       size_t whylen);
void rpc_call_hdr_free(rpc_call_hdr *h);

/* Serialises a reply, error or call to a malloc'd, NUL-terminated message;
 * *len counts the NUL.  Each takes ownership of params (NULL: {}). */
int rpc_msg_reply(json_object *params, bool continues, char **text, size_t *len);
int rpc_msg_error(const char *name, json_object *params, char **text, size_t *len);
int rpc_msg_call(const char *method, json_object *params, bool more, bool oneway, char **text,
                 size_t *len);

/* ---- idl.c: interface definitions ---- */

typedef struct rpc_idl {
    char *name;     /* "io.wattprof.Monitor" */
    char *text;     /* the definition as registered */
    char **methods; /* declared method names, short form ("GetStatus") */
    size_t n_methods;
} rpc_idl;

/* Reads the interface name and the declared methods from definition text. */
int rpc_idl_scan(const char *text, rpc_idl *idl, char *err, size_t errlen);
bool rpc_idl_declares(const rpc_idl *idl, const char *method);
void rpc_idl_free(rpc_idl *idl);

/* The definition of org.varlink.service itself. */
extern const char rpc_service_interface[];

/* ---- call.c: calls and the reply queue ---- */

struct rpc_conn;

/* Replies made off the server thread wait here until the server thread
 * wakes (eventfd) and sends them.  Calls keep the queue alive, so a
 * publisher holding a call after the server is gone only gets -ESHUTDOWN. */
typedef struct rpc_queue_item {
    struct rpc_queue_item *next;
    rpc_call *call; /* holds a reference */
    char *text;
    size_t len;
    bool final;
} rpc_queue_item;

typedef struct rpc_queue {
    atomic_int refs;
    pthread_mutex_t lock;
    int efd;
    rpc_queue_item *head, *tail;
    bool closed;         /* under lock: the server has stopped */
    atomic_bool pending; /* the eventfd was written since the last take */
    pthread_t thread;    /* the server thread, while running */
    atomic_bool running;
} rpc_queue;

int rpc_queue_new(rpc_queue **out);
void rpc_queue_unref(rpc_queue *q);
/* Takes the pending items (server thread). */
rpc_queue_item *rpc_queue_take(rpc_queue *q);
/* Marks the queue closed and frees what is pending (server thread, on stop). */
void rpc_queue_close(rpc_queue *q);
void rpc_queue_item_free(rpc_queue_item *it);

struct rpc_call {
    atomic_int refs;
    rpc_queue *q;
    struct rpc_conn *conn; /* server thread only: set while this is the connection's call */
    char *method;
    bool more, oneway;
    atomic_bool done;   /* the final answer has been sent */
    atomic_bool closed; /* the client or the server went away */
};

int rpc_call_new(rpc_queue *q, const char *method, bool more, bool oneway, rpc_call **out);

/* ---- conn.c: one client connection (server thread only) ---- */

struct rpc_conn {
    struct rpc_conn *next, *prev;
    rpc_server *srv;
    int fd;
    rpc_peer peer;
    rpc_buf in, out;
    rpc_call *call;     /* the call being answered; later ones wait in `in` */
    uint32_t events;    /* what epoll watches now */
    bool eof;           /* the peer will send nothing more */
    bool closing;       /* close once the output is sent (after a bad request) */
    bool dead;          /* closed; freed at the end of the loop iteration */
    uint64_t active_ns; /* CLOCK_MONOTONIC of the last progress: connected, a call
                           started or ended, output sent (not a partial message) */
};

/* Accepts fd (already non-blocking) of `peer` as a new connection watched
 * by epoll. */
int rpc_conn_new(rpc_server *srv, int fd, const rpc_peer *peer);
/* Handles what epoll reported for the connection. */
void rpc_conn_event(struct rpc_conn *conn, uint32_t events);
/* After anything happened: dispatch what waits, send, close when done. */
void rpc_conn_after(struct rpc_conn *conn);
/* Closes the socket now; the call in progress reads as closed.  The memory
 * stays until rpc_conn_free, so pointers held in this loop turn stay valid. */
void rpc_conn_close(struct rpc_conn *conn);
void rpc_conn_free(struct rpc_conn *conn);
/* Ends the connection's call in progress (its final answer went out). */
void rpc_conn_end_call(struct rpc_conn *conn);
/* Sends a message of the connection's current call (takes text). */
void rpc_conn_deliver(struct rpc_conn *conn, rpc_call *call, char *text, size_t len, bool final);
/* Answers a message that is not a valid call, then closes the connection. */
void rpc_conn_bad_request(struct rpc_conn *conn, const char *field, const char *why);

/* ---- dispatch.c ---- */

typedef struct rpc_method {
    char *name; /* full name, "iface.Method" */
    rpc_method_fn fn;
    void *userdata;
} rpc_method;

/* Runs one call message (len bytes, NUL at msg[len]) of the connection. */
void rpc_dispatch(struct rpc_conn *conn, const char *msg, size_t len);
const rpc_method *rpc_server_find_method(const rpc_server *srv, const char *name);
const rpc_idl *rpc_server_find_interface(const rpc_server *srv, const char *name, size_t len);

/* ---- noise.c: per-uid log rate limit ---- */

#define RPC_NOISE_SLOTS 16 /* uids tracked at once; more take over the oldest */

struct rpc_noise {
    uid_t uid;
    bool used;
    uint64_t since_ns;   /* when the last line about uid was logged */
    uint64_t suppressed; /* lines left out since */
};

/* True when a line about `uid` may be logged now (one a second); else counts
 * it as left out.  A line that is allowed first reports the count. */
bool rpc_noise_allow(rpc_server *srv, uid_t uid);
/* Reports the counts of windows that have ended (server thread, each loop). */
void rpc_noise_flush(rpc_server *srv);

/* ---- server.c ---- */

struct rpc_server {
    char *vendor, *product, *version, *url;
    gid_t priv_gid;
    size_t max_request, max_output;
    unsigned max_clients, max_per_uid;
    uint64_t idle_ns, next_sweep_ns;
    char *refuse_error; /* NULL: refuse without a word */
    int listen_fd, ep;
    rpc_queue *q;
    rpc_idl *ifaces; /* fixed once the thread runs: read there without locks */
    size_t n_ifaces;
    rpc_method *methods;
    size_t n_methods;
    struct rpc_conn *conns;
    pthread_t thread;
    bool started;
    atomic_bool stop;
    bool accept_paused;
    uint64_t accept_resume_ns;
    struct rpc_noise noise[RPC_NOISE_SLOTS];
    atomic_uint clients;
    atomic_uint_fast64_t accepted, refused, idle_closed, dropped, bad_requests, calls;
};

/* service.c: registers org.varlink.service (GetInfo, GetInterfaceDescription). */
int rpc_service_register(rpc_server *srv);

#endif
