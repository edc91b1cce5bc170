/* rpc client: a blocking-with-timeout Varlink client, for the wattprof
 * commands that query the daemon.  One call at a time; a "more" call's
 * replies are read one by one until one comes without "continues". */
#include "rpc/internal.h"

#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CLIENT_MAX_REPLY (64u * 1024 * 1024)

struct rpc_client {
    int fd;
    rpc_buf in;
};

int rpc_client_connect(const char *path, rpc_client **out, char *err, size_t errlen)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    rpc_client *c;
    int fd;

    if (strlen(path) >= sizeof(sa.sun_path))
        return util_err(err, errlen, -ENAMETOOLONG, "%s: socket path too long", path);
    strcpy(sa.sun_path, path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return util_err(err, errlen, -errno, "socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int r = -errno;
        close(fd);
        if (r == -ENOENT || r == -ECONNREFUSED)
            return util_err(err, errlen, r, "%s: no server is listening there (%s)", path,
                            strerror(-r));
        return util_err(err, errlen, r, "%s: %s", path, strerror(-r));
    }
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
        int r = -errno;
        close(fd);
        return util_err(err, errlen, r, "%s: %s", path, strerror(-r));
    }
    c = calloc(1, sizeof(*c));
    if (!c) {
        close(fd);
        return -ENOMEM;
    }
    c->fd = fd;
    *out = c;
    return 0;
}

void rpc_client_free(rpc_client *c)
{
    if (!c)
        return;
    close(c->fd);
    rpc_buf_free(&c->in);
    free(c);
}

int rpc_client_fd(const rpc_client *c)
{
    return c->fd;
}

/* Milliseconds left until deadline (ns; 0 = none), for poll(). */
static int remaining_ms(uint64_t deadline)
{
    uint64_t now;

    if (deadline == 0)
        return -1;
    now = util_now_ns(CLOCK_MONOTONIC);
    return now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
}

static uint64_t deadline_after(int timeout_ms)
{
    return timeout_ms < 0 ? 0 : util_now_ns(CLOCK_MONOTONIC) + (uint64_t)timeout_ms * 1000000u + 1;
}

/* Waits for the socket to be ready for `events`; -ETIMEDOUT past deadline. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
    struct pollfd p = {.fd = fd, .events = events};

    for (;;) {
        int n = poll(&p, 1, remaining_ms(deadline));
        if (n > 0)
            return 0;
        if (n == 0)
            return -ETIMEDOUT;
        if (errno != EINTR)
            return -errno;
    }
}

static int send_all(int fd, const char *text, size_t len, uint64_t deadline)
{
    while (len > 0) {
        ssize_t n = send(fd, text, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            int r;
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                return -errno;
            r = wait_fd(fd, POLLOUT, deadline);
            if (r < 0)
                return r;
            continue;
        }
        text += n;
        len -= (size_t)n;
    }
    return 0;
}

int rpc_client_call(rpc_client *c, const char *method, json_object *params, unsigned flags,
                    int timeout_ms, char *err, size_t errlen)
{
    char *text;
    size_t len;
    int r = rpc_msg_call(method, params ? json_object_get(params) : NULL, flags & RPC_CALL_MORE,
                         flags & RPC_CALL_ONEWAY, &text, &len);

    if (r < 0)
        return util_err(err, errlen, r, "%s: %s", method, strerror(-r));
    r = send_all(c->fd, text, len, deadline_after(timeout_ms));
    free(text);
    if (r == -EPIPE || r == -ECONNRESET)
        return util_err(err, errlen, -ECONNRESET, "%s: the server closed the connection", method);
    if (r < 0)
        return util_err(err, errlen, r, "%s: sending the call: %s", method, strerror(-r));
    return 0;
}

void rpc_reply_msg_clear(rpc_reply_msg *r)
{
    json_object_put(r->params);
    free(r->error);
    memset(r, 0, sizeof(*r));
}

/* Fills r from one message's text (len bytes, NUL at text[len]). */
static int parse_reply(const char *text, size_t len, rpc_reply_msg *r, char *err, size_t errlen)
{
    char why[256];
    json_object *obj = rpc_json_parse(text, len, why, sizeof(why)), *v;

    if (!obj)
        return util_err(err, errlen, -EBADMSG, "reply: %s", why);
    if (!json_object_is_type(obj, json_type_object))
        goto bad;
    if (json_object_object_get_ex(obj, "error", &v) && v) {
        if (!json_object_is_type(v, json_type_string))
            goto bad;
        r->error = strdup(json_object_get_string(v));
    }
    if (json_object_object_get_ex(obj, "parameters", &v) && v) {
        if (!json_object_is_type(v, json_type_object))
            goto bad;
        r->params = json_object_get(v);
    } else {
        r->params = json_object_new_object();
    }
    if (json_object_object_get_ex(obj, "continues", &v) && v) {
        if (!json_object_is_type(v, json_type_boolean))
            goto bad;
        r->continues = json_object_get_boolean(v);
    }
    json_object_put(obj);
    return 0;
bad:
    json_object_put(obj);
    rpc_reply_msg_clear(r);
    return util_err(err, errlen, -EBADMSG, "reply: not a Varlink reply object");
}

int rpc_client_read(rpc_client *c, int timeout_ms, rpc_reply_msg *r, char *err, size_t errlen)
{
    uint64_t deadline = deadline_after(timeout_ms);
    const char *msg;
    size_t len;

    memset(r, 0, sizeof(*r));
    for (;;) {
        int f = rpc_frame_next(&c->in, CLIENT_MAX_REPLY, &msg, &len), w;
        ssize_t n;
        if (f > 0) {
            f = parse_reply(msg, len, r, err, errlen);
            rpc_buf_consume(&c->in, len + 1);
            return f;
        }
        if (f < 0 || rpc_buf_reserve(&c->in, 1, CLIENT_MAX_REPLY + 1) < 0)
            return util_err(err, errlen, -E2BIG, "reply larger than %u bytes", CLIENT_MAX_REPLY);
        n = recv(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len, MSG_DONTWAIT);
        if (n > 0) {
            c->in.len += (size_t)n;
            continue;
        }
        if (n == 0 || errno == ECONNRESET)
            return util_err(err, errlen, -ECONNRESET, "the server closed the connection");
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN)
            return util_err(err, errlen, -errno, "reading the reply: %s", strerror(errno));
        w = wait_fd(c->fd, POLLIN, deadline);
        if (w == -ETIMEDOUT)
            return util_err(err, errlen, w, "no reply within %d ms", timeout_ms);
        if (w < 0)
            return util_err(err, errlen, w, "waiting for the reply: %s", strerror(-w));
    }
}
