/* fuzz_varlink: the Varlink server of lib/rpc, end to end: framing, the
 * message parser, parameter checks, dispatch and the standard errors.
 *
 * One server runs for the whole fuzzing session, in its own thread, as in
 * the daemon, serving org.varlink.service, the daemon's io.wattprof.Monitor
 * interface (declared, no handlers here: MethodNotImplemented) and
 * io.wattprof.Fuzz, whose handlers cover the ways a handler can answer.
 * Each input is the byte stream of one client connection: it is sent as is
 * (messages are NUL-terminated), the client half-closes, and every reply is
 * read until the server closes.  A server that stops answering is a hang,
 * reported as a crash. */
#include "rpc/rpc.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HANG_MS 10000
#define MAX_STREAM 16

static const char fuzz_interface[] =
    "# Handlers for fuzzing lib/rpc.\n"
    "interface io.wattprof.Fuzz\n"
    "\n"
    "method Echo(text: string, n: ?int, f: ?float, b: ?bool, o: ?object, a: ?[]string)\n"
    "  -> (text: string)\n"
    "method Stream(count: int) -> (n: int)\n"
    "method Fail(code: int) -> ()\n"
    "method Mute() -> ()\n"
    "method Declared() -> ()\n"
    "error Failed (code: int)\n";

static int echo(rpc_call *call, json_object *params, const rpc_peer *peer, void *userdata)
{
    static const rpc_param_spec spec[] = {{.name = "text", .type = RPC_T_STRING},
                                          {.name = "n", .type = RPC_T_INT, .optional = true},
                                          {.name = "f", .type = RPC_T_FLOAT, .optional = true},
                                          {.name = "b", .type = RPC_T_BOOL, .optional = true},
                                          {.name = "o", .type = RPC_T_OBJECT, .optional = true},
                                          {.name = "a", .type = RPC_T_ARRAY, .optional = true}};
    int r = rpc_params_check(call, params, spec, sizeof(spec) / sizeof(spec[0]));

    if (r < 0)
        return r;
    return rpc_reply(call, json_object_get(params));
}

/* Answers count replies at once, on the server thread. */
static int stream(rpc_call *call, json_object *params, const rpc_peer *peer, void *userdata)
{
    static const rpc_param_spec spec[] = {{.name = "count", .type = RPC_T_INT}};
    json_object *v;
    int64_t count;
    int r = rpc_params_check(call, params, spec, 1);

    if (r < 0)
        return r;
    json_object_object_get_ex(params, "count", &v);
    count = json_object_get_int64(v);
    if (count < 1 || count > MAX_STREAM)
        return rpc_error_invalid_parameter(call, "count");
    if (!rpc_call_more(call))
        return rpc_error(call, RPC_ERR_EXPECTED_MORE, NULL);
    for (int64_t i = 1; i < count; i++) {
        json_object *p = json_object_new_object();
        json_object_object_add(p, "n", json_object_new_int64(i));
        if (rpc_reply_more(call, p) < 0)
            return 0;
    }
    return rpc_reply(call, NULL);
}

/* Returns an errno without answering: the dispatcher answers or closes. */
static int fail(rpc_call *call, json_object *params, const rpc_peer *peer, void *userdata)
{
    static const int codes[] = {-EINVAL, -EPERM, -EACCES, -EOPNOTSUPP, -EIO, -ENOMEM};
    static const rpc_param_spec spec[] = {{.name = "code", .type = RPC_T_INT}};
    json_object *v, *p;
    int64_t code;
    int r = rpc_params_check(call, params, spec, 1);

    if (r < 0)
        return r;
    json_object_object_get_ex(params, "code", &v);
    code = json_object_get_int64(v);
    if (code >= 0 && code < (int64_t)(sizeof(codes) / sizeof(codes[0])))
        return codes[code];
    p = json_object_new_object();
    json_object_object_add(p, "code", json_object_new_int64(code));
    return rpc_error(call, "io.wattprof.Fuzz.Failed", p);
}

/* Returns without answering and without keeping the call: a handler bug
 * the server must survive by closing the connection. */
static int mute(rpc_call *call, json_object *params, const rpc_peer *peer, void *userdata)
{
    return 0;
}

static int add(rpc_server *srv, const char *method, rpc_method_fn fn)
{
    int r = rpc_server_add_method(srv, method, fn, NULL);

    if (r < 0)
        fprintf(stderr, "fuzz_varlink: cannot register %s: %s\n", method, strerror(-r));
    return r;
}

/* A listening socket in the abstract namespace: nothing to clean up. */
static int listen_abstract(struct sockaddr_un *sa, socklen_t *salen)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "wattprof-fuzz-%d", (int)getpid());
    *salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(sa->sun_path + 1));
    if (fd < 0 || bind(fd, (struct sockaddr *)sa, *salen) < 0 || listen(fd, 16) < 0) {
        perror("fuzz_varlink: listening socket");
        exit(1);
    }
    return fd;
}

static void start_server(struct sockaddr_un *sa, socklen_t *salen)
{
    rpc_server_config cfg = {
        .vendor = "wattprof", .product = "fuzz", .version = "0", .priv_gid = (gid_t)-1};
    rpc_server *srv;
    char err[256];
    int fd = listen_abstract(sa, salen);

    if (rpc_server_new(&cfg, fd, &srv) < 0 ||
        rpc_server_add_interface(srv, rpc_monitor_interface, err, sizeof(err)) < 0 ||
        rpc_server_add_interface(srv, fuzz_interface, err, sizeof(err)) < 0 ||
        add(srv, "io.wattprof.Fuzz.Echo", echo) < 0 ||
        add(srv, "io.wattprof.Fuzz.Stream", stream) < 0 ||
        add(srv, "io.wattprof.Fuzz.Fail", fail) < 0 ||
        add(srv, "io.wattprof.Fuzz.Mute", mute) < 0 || rpc_server_start(srv) < 0) {
        fprintf(stderr, "fuzz_varlink: cannot start the server\n");
        exit(1);
    }
    /* The server lives until the process exits, as the daemon's does. */
}

/* Sends the input and reads until the server closes; aborts on a hang. */
static void converse(int fd, const uint8_t *data, size_t size)
{
    static char sink[65536];
    size_t sent = 0;
    bool wr_open = true;

    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN | (wr_open ? POLLOUT : 0)};
        int n = poll(&p, 1, HANG_MS);
        if (n == 0) {
            fprintf(stderr, "fuzz_varlink: the server did not answer within %d ms\n", HANG_MS);
            abort();
        }
        if (n < 0)
            continue;
        if (wr_open && (p.revents & (POLLOUT | POLLERR))) {
            ssize_t w = size > sent ? send(fd, data + sent, size - sent, MSG_NOSIGNAL) : 0;
            if (w > 0)
                sent += (size_t)w;
            if (w < 0 || sent == size) {
                shutdown(fd, SHUT_WR);
                wr_open = false;
            }
        }
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t r = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
                return;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct sockaddr_un sa;
    static socklen_t salen;
    int fd;

    if (salen == 0)
        start_server(&sa, &salen);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    if (connect(fd, (struct sockaddr *)&sa, salen) == 0)
        converse(fd, data, size);
    close(fd);
    return 0;
}
