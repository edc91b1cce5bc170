/* Unit tests for lib/rpc: framing and message parsing, interface
 * definitions, and dispatch through a real server thread and the C client
 * over Unix sockets in a temporary directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h> /* after the three it needs */

#include "rpc/internal.h"
#include "rpc/rpc.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- framing and messages ---- */

static rpc_buf buf_of(const char *data, size_t n)
{
    rpc_buf b = {0};

    assert_int_equal(rpc_buf_append(&b, data, n, 1 << 20), 0);
    return b;
}

static void test_frame_next(void **state)
{
    rpc_buf b = buf_of("{}\0{\"a\"", 7);
    const char *msg;
    size_t len;

    assert_int_equal(rpc_frame_next(&b, 100, &msg, &len), 1);
    assert_int_equal(len, 2);
    assert_memory_equal(msg, "{}", 2);
    rpc_buf_consume(&b, len + 1);
    assert_int_equal(rpc_frame_next(&b, 100, &msg, &len), 0); /* partial: wait */
    assert_int_equal(rpc_frame_next(&b, 3, &msg, &len), -E2BIG);
    rpc_buf_free(&b);
}

static void test_frame_limit_is_exact(void **state)
{
    char data[12];
    const char *msg;
    size_t len;
    rpc_buf b;

    memset(data, 'x', sizeof(data));
    data[10] = '\0'; /* a 10-byte message */
    b = buf_of(data, 11);
    assert_int_equal(rpc_frame_next(&b, 10, &msg, &len), 1);
    assert_int_equal(len, 10);
    assert_int_equal(rpc_frame_next(&b, 9, &msg, &len), -E2BIG);
    rpc_buf_free(&b);
    b = buf_of(data, 10); /* 10 bytes, no terminator yet: may still end at 10 */
    assert_int_equal(rpc_frame_next(&b, 10, &msg, &len), 0);
    rpc_buf_free(&b);
    memset(data, 'x', sizeof(data));
    b = buf_of(data, 11); /* 11 bytes without a terminator: over the limit */
    assert_int_equal(rpc_frame_next(&b, 10, &msg, &len), -E2BIG);
    rpc_buf_free(&b);
}

static void test_buffer_cap(void **state)
{
    rpc_buf b = {0};

    assert_int_equal(rpc_buf_append(&b, "abcd", 4, 6), 0);
    assert_int_equal(rpc_buf_append(&b, "ef", 2, 6), 0);
    assert_int_equal(rpc_buf_append(&b, "g", 1, 6), -ENOBUFS);
    assert_int_equal(b.len, 6);
    rpc_buf_consume(&b, 4);
    assert_memory_equal(b.data, "ef", 2);
    rpc_buf_free(&b);
}

/* Parses a call from a C string (the terminator is the message's NUL). */
static int parse(const char *text, rpc_call_hdr *h, const char **field)
{
    char why[256];
    int r = rpc_msg_parse_call(text, strlen(text), h, field, why, sizeof(why));

    if (r < 0)
        assert_true(why[0] != '\0');
    return r;
}

static void test_parse_call(void **state)
{
    rpc_call_hdr h;
    const char *field;

    assert_int_equal(
        parse("{\"method\":\"a.b.C\",\"parameters\":{\"x\":1},\"more\":true}", &h, &field), 0);
    assert_string_equal(h.method, "a.b.C");
    assert_true(h.more);
    assert_false(h.oneway);
    assert_int_equal(json_object_get_int(json_object_object_get(h.params, "x")), 1);
    rpc_call_hdr_free(&h);
    assert_int_equal(parse("{\"method\":\"a.B\",\"oneway\":true}", &h, &field), 0);
    assert_true(h.oneway);
    assert_int_equal(json_object_object_length(h.params), 0);
    rpc_call_hdr_free(&h);
}

static void test_parse_call_errors_name_the_field(void **state)
{
    static const struct {
        const char *text, *field;
    } cases[] = {
        {"{\"method\":", ""},
        {"[]", ""},
        {"{\"method\":\"a.B\"} x", ""},
        {"", ""},
        {"{\"method\":\"a.\xff\"}", ""},     /* JSON text must be UTF-8 */
        {"{\"method\":\"a.\xc1\xbf\"}", ""}, /* overlong, which json-c lets by */
        {"{}", "method"},
        {"{\"method\":1}", "method"},
        {"{\"method\":\"a.B\",\"parameters\":[1]}", "parameters"},
        {"{\"method\":\"a.B\",\"more\":1}", "more"},
        {"{\"method\":\"a.B\",\"oneway\":\"no\"}", "oneway"},
    };
    rpc_call_hdr h;
    const char *field;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(parse(cases[i].text, &h, &field), -EBADMSG);
        assert_string_equal(field, cases[i].field);
        assert_null(h.obj);
    }
}

static void test_utf8_is_strict(void **state)
{
    static const struct {
        const char *s;
        size_t bad;
    } cases[] = {
        {"plain", 5},
        {"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9}, /* é € U+1F600 */
        {"a\xc1\xbf", 1},                            /* overlong '?' */
        {"ab\xe0\x80\xaf", 2},                       /* overlong '/' */
        {"\xed\xa0\x80", 0},                         /* a surrogate */
        {"\xf4\x90\x80\x80", 0},                     /* past U+10FFFF */
        {"x\x80", 1},                                /* a lone continuation */
        {"\xe2\x82", 0},                             /* cut short */
        {"\xff", 0},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_int_equal(util_utf8_check(cases[i].s, strlen(cases[i].s)), cases[i].bad);
}

/* A string that is not UTF-8 (a process may name itself "bad\xffname") is
 * sent with U+FFFD for each bad byte, so the peer's strict parser takes the
 * message; valid text, escapes included, is sent as it is. */
static void test_messages_are_utf8(void **state)
{
    json_object *p = json_object_new_object();
    char *text, why[128];
    size_t len;

    json_object_object_add(p, "comm", json_object_new_string("bad\xffname"));
    json_object_object_add(p, "cmdline",
                           json_object_new_string("a\xc1\xbf \xed\xa0\x80 \xc3\xa9\"\n"));
    assert_int_equal(rpc_msg_reply(p, false, &text, &len), 0);
    assert_int_equal(len, strlen(text) + 1);
    assert_int_equal(util_utf8_check(text, len - 1), len - 1);
    json_object *back = rpc_json_parse(text, len - 1, why, sizeof(why));
    assert_non_null(back);
    json_object *params = json_object_object_get(back, "parameters");
    assert_string_equal(json_object_get_string(json_object_object_get(params, "comm")),
                        "bad\xef\xbf\xbdname");
    assert_string_equal(
        json_object_get_string(json_object_object_get(params, "cmdline")),
        "a\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xc3\xa9\"\n");
    json_object_put(back);
    free(text);
}

static void test_build_messages(void **state)
{
    json_object *p = json_object_new_object();
    char *text;
    size_t len;

    json_object_object_add(p, "n", json_object_new_int(3));
    assert_int_equal(rpc_msg_reply(p, true, &text, &len), 0);
    assert_int_equal(len, strlen(text) + 1); /* the NUL is part of the message */
    assert_string_equal(text, "{\"parameters\":{\"n\":3},\"continues\":true}");
    free(text);
    assert_int_equal(rpc_msg_reply(NULL, false, &text, &len), 0);
    assert_string_equal(text, "{\"parameters\":{}}");
    free(text);
    assert_int_equal(rpc_msg_error("x.Y.Z", NULL, &text, &len), 0);
    assert_string_equal(text, "{\"error\":\"x.Y.Z\",\"parameters\":{}}");
    free(text);
    assert_int_equal(rpc_msg_call("x.Y", NULL, true, false, &text, &len), 0);
    assert_string_equal(text, "{\"method\":\"x.Y\",\"parameters\":{},\"more\":true}");
    free(text);
}

/* ---- interface definitions ---- */

static void test_idl_monitor(void **state)
{
    static const char *methods[] = {"GetStatus", "ListProcesses", "GetProcess", "GetHistory",
                                    "Subscribe", "ListJobs",      "ListModels", "ReloadModels"};
    rpc_idl idl;
    char err[UTIL_ERRLEN];

    assert_int_equal(rpc_idl_scan(rpc_monitor_interface, &idl, err, sizeof(err)), 0);
    assert_string_equal(idl.name, "io.wattprof.Monitor");
    assert_int_equal(idl.n_methods, 8);
    for (size_t i = 0; i < 8; i++)
        assert_string_equal(idl.methods[i], methods[i]);
    assert_true(strstr(idl.text, "error NoSuchProcess (pid: int)") != NULL);
    rpc_idl_free(&idl);
}

static void test_idl_field_named_method_is_not_a_method(void **state)
{
    rpc_idl idl;

    assert_int_equal(rpc_idl_scan("# c\ninterface a.b\ntype T (method: string)\n"
                                  "method Go(x: (method: int)) -> ()\n",
                                  &idl, NULL, 0),
                     0);
    assert_int_equal(idl.n_methods, 1);
    assert_true(rpc_idl_declares(&idl, "Go"));
    assert_false(rpc_idl_declares(&idl, "string"));
    rpc_idl_free(&idl);
}

static void test_idl_errors(void **state)
{
    static const struct {
        const char *text, *err;
    } cases[] = {
        {"method A() -> ()", "interface definition must start with 'interface NAME'"},
        {"interface nodots\n", "bad interface name 'nodots'"},
        {"interface a..b\n", "bad interface name 'a..b'"},
        {"interface a.b\nmethod lower() -> ()\n", "interface a.b: bad method name after 'method'"},
        {"interface a.b\nmethod A( -> ()\n", "interface a.b: unbalanced brackets"},
    };
    rpc_idl idl;
    char err[UTIL_ERRLEN];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(rpc_idl_scan(cases[i].text, &idl, err, sizeof(err)), -EINVAL);
        assert_string_equal(err, cases[i].err);
    }
}

/* ---- server and client over a real socket ---- */

struct fixture {
    char dir[64], path[128];
    rpc_server *srv;
    pthread_mutex_t lock;
    rpc_call *held;        /* a call a handler kept for later */
    int again_rc, more_rc; /* what echo's extra answers returned (server thread) */
};

static int h_echo(rpc_call *call, json_object *params, const rpc_peer *peer, void *ud)
{
    static const rpc_param_spec spec[] = {{.name = "text", .type = RPC_T_STRING},
                                          {.name = "n", .type = RPC_T_FLOAT, .optional = true}};
    int r = rpc_params_check(call, params, spec, 2);
    json_object *out;

    if (r < 0)
        return r;
    out = json_object_new_object();
    json_object_object_add(out, "text", json_object_get(json_object_object_get(params, "text")));
    json_object_object_add(out, "uid", json_object_new_int64(peer->uid));
    json_object_object_add(out, "pid", json_object_new_int64(peer->pid));
    struct fixture *f = ud;
    r = rpc_reply(call, out);
    /* A second final answer is refused, and so is a stream reply; the test
     * checks these on its own thread, where cmocka can fail. */
    f->again_rc = rpc_reply(call, NULL);
    f->more_rc = rpc_reply_more(call, NULL);
    return r;
}

static int h_errno(rpc_call *call, json_object *params, const rpc_peer *peer, void *ud)
{
    return -(int)json_object_get_int(json_object_object_get(params, "errno"));
}

static int h_forget(rpc_call *call, json_object *params, const rpc_peer *peer, void *ud)
{
    return 0; /* neither answers nor keeps the call */
}

static int h_hold(rpc_call *call, json_object *params, const rpc_peer *peer, void *ud)
{
    struct fixture *f = ud;

    pthread_mutex_lock(&f->lock);
    f->held = rpc_call_ref(call);
    pthread_mutex_unlock(&f->lock);
    return 0;
}

static rpc_call *wait_held(struct fixture *f)
{
    for (int i = 0; i < 5000; i++) {
        rpc_call *c;
        pthread_mutex_lock(&f->lock);
        c = f->held;
        f->held = NULL;
        pthread_mutex_unlock(&f->lock);
        if (c)
            return c;
        usleep(1000);
    }
    fail_msg("no call was held");
    return NULL;
}

static const char test_idl[] = "interface io.wattprof.Unit\n"
                               "method Echo(text: string, n: ?float) -> (text: string)\n"
                               "method Errno(errno: int) -> ()\n"
                               "method Forget() -> ()\n"
                               "method Hold() -> ()\n"
                               "method Missing() -> ()\n";

static int start_server(struct fixture *f, unsigned max_clients)
{
    rpc_server_config cfg = {.vendor = "v",
                             .product = "p",
                             .version = "9",
                             .url = "u",
                             .priv_gid = (gid_t)-1,
                             .max_clients = max_clients};
    char err[UTIL_ERRLEN];
    int fd;

    assert_int_equal(rpc_listen_unix(f->path, 0600, &fd, err, sizeof(err)), 0);
    assert_int_equal(rpc_server_new(&cfg, fd, &f->srv), 0);
    assert_int_equal(rpc_server_add_interface(f->srv, test_idl, err, sizeof(err)), 0);
    assert_int_equal(rpc_server_add_method(f->srv, "io.wattprof.Unit.Echo", h_echo, f), 0);
    assert_int_equal(rpc_server_add_method(f->srv, "io.wattprof.Unit.Errno", h_errno, f), 0);
    assert_int_equal(rpc_server_add_method(f->srv, "io.wattprof.Unit.Forget", h_forget, f), 0);
    assert_int_equal(rpc_server_add_method(f->srv, "io.wattprof.Unit.Hold", h_hold, f), 0);
    assert_int_equal(rpc_server_add_method(f->srv, "io.wattprof.Other.X", h_echo, f), -ENOENT);
    assert_int_equal(rpc_server_add_method(f->srv, "io.wattprof.Unit.Echo", h_echo, f), -EEXIST);
    return rpc_server_start(f->srv);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    strcpy(f->dir, "/tmp/wattprof-rpc-unit-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/s.sock", f->dir);
    pthread_mutex_init(&f->lock, NULL);
    assert_int_equal(start_server(f, 8), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    rpc_server_free(f->srv);
    unlink(f->path);
    rmdir(f->dir);
    pthread_mutex_destroy(&f->lock);
    free(f);
    return 0;
}

static rpc_client *connect_to(struct fixture *f)
{
    rpc_client *c;
    char err[UTIL_ERRLEN];

    assert_int_equal(rpc_client_connect(f->path, &c, err, sizeof(err)), 0);
    return c;
}

/* One call and its reply; params may be NULL. */
static int call(rpc_client *c, const char *method, const char *params_json, unsigned flags,
                rpc_reply_msg *r)
{
    json_object *p = params_json ? json_tokener_parse(params_json) : NULL;
    char err[UTIL_ERRLEN];
    int rc = rpc_client_call(c, method, p, flags, 2000, err, sizeof(err));

    json_object_put(p);
    if (rc < 0)
        return rc;
    return rpc_client_read(c, 2000, r, err, sizeof(err));
}

static const char *param_str(const rpc_reply_msg *r, const char *key)
{
    return json_object_get_string(json_object_object_get(r->params, key));
}

static void test_get_info_and_echo(void **state)
{
    struct fixture *f = *state;
    rpc_client *c = connect_to(f);
    rpc_reply_msg r;

    assert_int_equal(call(c, "org.varlink.service.GetInfo", NULL, 0, &r), 0);
    assert_null(r.error);
    assert_string_equal(param_str(&r, "product"), "p");
    assert_string_equal(json_object_to_json_string(json_object_object_get(r.params, "interfaces")),
                        "[ \"org.varlink.service\", \"io.wattprof.Unit\" ]");
    rpc_reply_msg_clear(&r);
    assert_int_equal(call(c, "io.wattprof.Unit.Echo", "{\"text\":\"hi\",\"n\":2}", 0, &r), 0);
    assert_null(r.error);
    assert_false(r.continues);
    assert_string_equal(param_str(&r, "text"), "hi");
    assert_int_equal(json_object_get_int(json_object_object_get(r.params, "uid")), getuid());
    assert_int_equal(json_object_get_int(json_object_object_get(r.params, "pid")), getpid());
    rpc_reply_msg_clear(&r);
    assert_int_equal(f->again_rc, -EALREADY);
    assert_int_equal(f->more_rc, -EINVAL);
    rpc_client_free(c);
}

/* The error a call gets, and the parameter it names under key. */
static void expect_error(rpc_client *c, const char *method, const char *params, const char *error,
                         const char *key, const char *value)
{
    rpc_reply_msg r;

    assert_int_equal(call(c, method, params, 0, &r), 0);
    assert_non_null(r.error);
    assert_string_equal(r.error, error);
    if (key)
        assert_string_equal(param_str(&r, key), value);
    rpc_reply_msg_clear(&r);
}

static void test_dispatch_errors(void **state)
{
    struct fixture *f = *state;
    rpc_client *c = connect_to(f);

    expect_error(c, "io.wattprof.Unit.Nope", NULL, RPC_ERR_METHOD_NOT_FOUND, "method",
                 "io.wattprof.Unit.Nope");
    expect_error(c, "io.wattprof.Unit.Missing", NULL, RPC_ERR_METHOD_NOT_IMPLEMENTED, "method",
                 "io.wattprof.Unit.Missing");
    expect_error(c, "no.Such.Method", NULL, RPC_ERR_INTERFACE_NOT_FOUND, "interface", "no.Such");
    expect_error(c, "NoDot", NULL, RPC_ERR_INTERFACE_NOT_FOUND, "interface", "");
    expect_error(c, "io.wattprof.Unit.Echo", "{\"text\":1}", RPC_ERR_INVALID_PARAMETER, "parameter",
                 "text");
    expect_error(c, "io.wattprof.Unit.Echo", "{\"text\":\"a\",\"n\":\"1\"}",
                 RPC_ERR_INVALID_PARAMETER, "parameter", "n");
    expect_error(c, "io.wattprof.Unit.Echo", "{\"text\":\"a\",\"z\":0}", RPC_ERR_INVALID_PARAMETER,
                 "parameter", "z");
    expect_error(c, "io.wattprof.Unit.Echo", "{}", RPC_ERR_INVALID_PARAMETER, "parameter", "text");
    /* Negative returns map to the standard errors. */
    expect_error(c, "io.wattprof.Unit.Errno", "{\"errno\":1}", RPC_ERR_PERMISSION_DENIED, NULL,
                 NULL);
    expect_error(c, "io.wattprof.Unit.Errno", "{\"errno\":13}", RPC_ERR_PERMISSION_DENIED, NULL,
                 NULL);
    expect_error(c, "io.wattprof.Unit.Errno", "{\"errno\":22}", RPC_ERR_INVALID_PARAMETER,
                 "parameter", "");
    expect_error(c, "io.wattprof.Unit.Errno", "{\"errno\":95}", RPC_ERR_METHOD_NOT_IMPLEMENTED,
                 "method", "io.wattprof.Unit.Errno");
    rpc_client_free(c);
}

static void test_other_errno_and_forgotten_calls_close(void **state)
{
    struct fixture *f = *state;
    rpc_client *c = connect_to(f);
    rpc_reply_msg r;

    assert_int_equal(call(c, "io.wattprof.Unit.Errno", "{\"errno\":5}", 0, &r), -ECONNRESET);
    rpc_client_free(c);
    c = connect_to(f);
    assert_int_equal(call(c, "io.wattprof.Unit.Forget", NULL, 0, &r), -ECONNRESET);
    rpc_client_free(c);
}

struct pusher {
    rpc_call *call;
    int n;
    int failures, after_rc; /* checked by the test thread */
};

static void *push_main(void *arg)
{
    struct pusher *p = arg;

    for (int i = 1; i <= p->n; i++) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "i", json_object_new_int(i));
        if ((i < p->n ? rpc_reply_more(p->call, o) : rpc_reply(p->call, o)) != 0)
            p->failures++;
    }
    p->after_rc = rpc_reply_more(p->call, NULL);
    rpc_call_unref(p->call);
    return NULL;
}

static void test_stream_from_another_thread(void **state)
{
    struct fixture *f = *state;
    rpc_client *c = connect_to(f);
    struct pusher p = {.n = 50};
    pthread_t t;
    rpc_reply_msg r;
    char err[UTIL_ERRLEN];

    assert_int_equal(
        rpc_client_call(c, "io.wattprof.Unit.Hold", NULL, RPC_CALL_MORE, 1000, err, sizeof(err)),
        0);
    p.call = wait_held(f);
    assert_true(rpc_call_more(p.call));
    assert_string_equal(rpc_call_method(p.call), "io.wattprof.Unit.Hold");
    assert_int_equal(pthread_create(&t, NULL, push_main, &p), 0);
    for (int i = 1; i <= 50; i++) {
        assert_int_equal(rpc_client_read(c, 2000, &r, err, sizeof(err)), 0);
        assert_int_equal(json_object_get_int(json_object_object_get(r.params, "i")), i);
        assert_int_equal(r.continues, i < 50);
        rpc_reply_msg_clear(&r);
    }
    pthread_join(t, NULL);
    assert_int_equal(p.failures, 0);
    assert_int_equal(p.after_rc, -EALREADY);
    /* The connection takes the next call once the stream has ended. */
    assert_int_equal(call(c, "io.wattprof.Unit.Echo", "{\"text\":\"next\"}", 0, &r), 0);
    assert_string_equal(param_str(&r, "text"), "next");
    rpc_reply_msg_clear(&r);
    rpc_client_free(c);
}

static void test_client_timeout_and_departure(void **state)
{
    struct fixture *f = *state;
    rpc_client *c = connect_to(f);
    rpc_reply_msg r;
    rpc_call *held;
    char err[UTIL_ERRLEN];

    assert_int_equal(rpc_client_call(c, "io.wattprof.Unit.Hold", NULL, 0, 1000, err, sizeof(err)),
                     0);
    held = wait_held(f);
    assert_int_equal(rpc_client_read(c, 100, &r, err, sizeof(err)), -ETIMEDOUT);
    assert_string_equal(err, "no reply within 100 ms");
    assert_false(rpc_call_closed(held));
    rpc_client_free(c);
    for (int i = 0; i < 2000 && !rpc_call_closed(held); i++)
        usleep(1000);
    assert_true(rpc_call_closed(held));
    assert_int_equal(rpc_reply(held, NULL), -ECONNRESET);
    rpc_call_unref(held);
}

static void test_held_call_outlives_the_server(void **state)
{
    struct fixture *f = *state;
    rpc_client *c = connect_to(f);
    rpc_call *held;
    char err[UTIL_ERRLEN];

    assert_int_equal(
        rpc_client_call(c, "io.wattprof.Unit.Hold", NULL, RPC_CALL_MORE, 1000, err, sizeof(err)),
        0);
    held = wait_held(f);
    rpc_server_free(f->srv);
    f->srv = NULL;
    assert_true(rpc_call_closed(held));
    assert_true(rpc_reply_more(held, NULL) < 0);
    rpc_call_unref(held); /* frees the queue: ASan checks nothing leaks or is used after */
    rpc_client_free(c);
}

/* The sampling thread's side: pushing to a subscriber that never reads costs
 * a queue append, never a wait, and ends with the subscriber dropped. */
static void test_push_to_stalled_subscriber_never_blocks(void **state)
{
    struct fixture *f = *state;
    rpc_client *c = connect_to(f);
    rpc_call *held;
    rpc_server_stats st;
    uint64_t worst = 0;
    char err[UTIL_ERRLEN], pad[200];
    int i, r = 0;

    memset(pad, 'p', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    assert_int_equal(
        rpc_client_call(c, "io.wattprof.Unit.Hold", NULL, RPC_CALL_MORE, 1000, err, sizeof(err)),
        0);
    held = wait_held(f);
    for (i = 0; i < 1000000 && r == 0; i++) {
        json_object *o = json_object_new_object();
        uint64_t t0;
        json_object_object_add(o, "pad", json_object_new_string(pad));
        t0 = util_now_ns(CLOCK_MONOTONIC);
        r = rpc_reply_more(held, o);
        t0 = util_now_ns(CLOCK_MONOTONIC) - t0;
        worst = t0 > worst ? t0 : worst;
        if (i % 1000 == 999)
            usleep(100); /* a publisher has a pace; let the server thread run */
    }
    /* 1 MiB of unsent output at about 230 bytes a reply, plus what the
     * socket holds: dropped after some thousands of replies. */
    print_message("dropped after %d replies; slowest rpc_reply_more %.1f us\n", i,
                  (double)worst / 1e3);
    assert_int_equal(r, -ECONNRESET);
    assert_true(i < 100000);
    assert_true(worst < 50000000ull); /* ns; a wait on the client would be forever */
    rpc_server_get_stats(f->srv, &st);
    assert_int_equal(st.dropped, 1);
    rpc_call_unref(held);
    rpc_client_free(c);
}

static void test_max_clients(void **state)
{
    struct fixture *f = *state;
    rpc_client *c[9];
    rpc_reply_msg r;
    rpc_server_stats st;

    for (int i = 0; i < 8; i++) {
        c[i] = connect_to(f);
        assert_int_equal(call(c[i], "org.varlink.service.GetInfo", NULL, 0, &r), 0);
        rpc_reply_msg_clear(&r);
    }
    c[8] = connect_to(f); /* the kernel accepts; the server closes it at once */
    assert_int_equal(call(c[8], "org.varlink.service.GetInfo", NULL, 0, &r), -ECONNRESET);
    rpc_server_get_stats(f->srv, &st);
    assert_int_equal(st.clients, 8);
    assert_int_equal(st.refused, 1);
    for (int i = 0; i < 9; i++)
        rpc_client_free(c[i]);
}

static void test_oneway(void **state)
{
    struct fixture *f = *state;
    rpc_client *c = connect_to(f);
    json_object *p = json_tokener_parse("{\"text\":\"quiet\"}");
    rpc_reply_msg r;
    char err[UTIL_ERRLEN];

    assert_int_equal(
        rpc_client_call(c, "io.wattprof.Unit.Echo", p, RPC_CALL_ONEWAY, 1000, err, sizeof(err)), 0);
    json_object_put(p);
    /* The first reply on the connection is the second call's. */
    assert_int_equal(call(c, "io.wattprof.Unit.Echo", "{\"text\":\"loud\"}", 0, &r), 0);
    assert_string_equal(param_str(&r, "text"), "loud");
    rpc_reply_msg_clear(&r);
    rpc_client_free(c);
}

/* ---- sockets, peers, activation ---- */

static void test_peer_credentials(void **state)
{
    int sv[2];
    rpc_peer p;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_int_equal(rpc_peer_get(sv[0], (gid_t)-1, &p), 0);
    assert_int_equal(p.uid, getuid());
    assert_int_equal(p.gid, getgid());
    assert_int_equal(p.pid, getpid());
    assert_int_equal(p.privileged, getuid() == 0);
    assert_int_equal(rpc_peer_get(sv[0], getgid(), &p), 0);
    assert_true(p.privileged); /* its primary group is the configured one */
    close(sv[0]);
    close(sv[1]);
}

static void test_listen_unix(void **state)
{
    struct fixture *f = *state;
    char path[200], err[UTIL_ERRLEN], longpath[200];
    struct stat st;
    int fd, fd2;

    /* A live server keeps its socket. */
    assert_int_equal(rpc_listen_unix(f->path, 0600, &fd, err, sizeof(err)), -EADDRINUSE);
    snprintf(longpath, sizeof(longpath), "%s: another server is listening there", f->path);
    assert_string_equal(err, longpath);
    /* A stale one is replaced, with the mode asked for. */
    snprintf(path, sizeof(path), "%s/stale.sock", f->dir);
    assert_int_equal(rpc_listen_unix(path, 0666, &fd, err, sizeof(err)), 0);
    close(fd);
    assert_int_equal(rpc_listen_unix(path, 0640, &fd2, err, sizeof(err)), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    close(fd2);
    unlink(path);
    /* A file that is not a socket is never removed. */
    snprintf(path, sizeof(path), "%s/file", f->dir);
    close(open(path, O_CREAT | O_WRONLY, 0600));
    assert_int_equal(rpc_listen_unix(path, 0666, &fd, err, sizeof(err)), -EEXIST);
    assert_int_equal(access(path, F_OK), 0);
    unlink(path);
    memset(longpath, 'a', 150);
    longpath[150] = '\0';
    assert_int_equal(rpc_listen_unix(longpath, 0666, &fd, err, sizeof(err)), -ENAMETOOLONG);
    assert_true(strstr(err, "socket path longer than 107 bytes") != NULL);
}

static void test_listen_activated(void **state)
{
    char err[UTIL_ERRLEN], pid[32];
    int fd, p[2];

    unsetenv("LISTEN_FDS");
    assert_int_equal(rpc_listen_activated(&fd, err, sizeof(err)), 0);
    /* fds 3 and 4 open, as systemd would pass them, but pipes, not sockets */
    assert_int_equal(pipe(p), 0);
    assert_int_equal(dup2(p[0], 3), 3);
    assert_int_equal(dup2(p[1], 4), 4);
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    setenv("LISTEN_PID", pid, 1);
    setenv("LISTEN_FDS", "2", 1);
    assert_int_equal(rpc_listen_activated(&fd, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "socket activation: expected one socket, systemd passed 2");
    setenv("LISTEN_PID", pid, 1);
    setenv("LISTEN_FDS", "1", 1);
    assert_int_equal(rpc_listen_activated(&fd, err, sizeof(err)), -EINVAL);
    assert_true(strstr(err, "not a listening Unix stream socket") != NULL);
    assert_null(getenv("LISTEN_FDS")); /* not passed on to children */
    close(3);
    close(4);
    if (p[0] > 4)
        close(p[0]);
    if (p[1] > 4)
        close(p[1]);
}

static void test_client_errors(void **state)
{
    struct fixture *f = *state;
    char path[200], err[UTIL_ERRLEN], want[300];
    rpc_client *c;
    rpc_reply_msg r;
    int lfd, s;

    snprintf(path, sizeof(path), "%s/none.sock", f->dir);
    assert_int_equal(rpc_client_connect(path, &c, err, sizeof(err)), -ENOENT);
    snprintf(want, sizeof(want), "%s: no server is listening there (No such file or directory)",
             path);
    assert_string_equal(err, want);
    /* A peer that answers with something that is not Varlink. */
    snprintf(path, sizeof(path), "%s/bad.sock", f->dir);
    assert_int_equal(rpc_listen_unix(path, 0600, &lfd, err, sizeof(err)), 0);
    assert_int_equal(rpc_client_connect(path, &c, err, sizeof(err)), 0);
    s = accept(lfd, NULL, NULL);
    assert_true(s >= 0);
    assert_int_equal(write(s, "[1]\0{\"parameters\":3}\0nope\0", 26), 26);
    assert_int_equal(rpc_client_read(c, 1000, &r, err, sizeof(err)), -EBADMSG);
    assert_string_equal(err, "reply: not a Varlink reply object");
    assert_int_equal(rpc_client_read(c, 1000, &r, err, sizeof(err)), -EBADMSG);
    assert_int_equal(rpc_client_read(c, 1000, &r, err, sizeof(err)), -EBADMSG);
    assert_true(strncmp(err, "reply: malformed JSON", 21) == 0);
    close(s);
    assert_int_equal(rpc_client_read(c, 1000, &r, err, sizeof(err)), -ECONNRESET);
    rpc_client_free(c);
    close(lfd);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_next),
        cmocka_unit_test(test_frame_limit_is_exact),
        cmocka_unit_test(test_buffer_cap),
        cmocka_unit_test(test_parse_call),
        cmocka_unit_test(test_parse_call_errors_name_the_field),
        cmocka_unit_test(test_utf8_is_strict),
        cmocka_unit_test(test_build_messages),
        cmocka_unit_test(test_messages_are_utf8),
        cmocka_unit_test(test_idl_monitor),
        cmocka_unit_test(test_idl_field_named_method_is_not_a_method),
        cmocka_unit_test(test_idl_errors),
        cmocka_unit_test(test_peer_credentials),
        cmocka_unit_test(test_listen_activated),
        cmocka_unit_test_setup_teardown(test_get_info_and_echo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dispatch_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_errno_and_forgotten_calls_close, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_stream_from_another_thread, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_timeout_and_departure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_held_call_outlives_the_server, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_to_stalled_subscriber_never_blocks, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_max_clients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oneway, setup, teardown),
        cmocka_unit_test_setup_teardown(test_listen_unix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
