/* rpc-test-server: a small Varlink service on lib/rpc for the integration
 * tests, which talk to it with an independent Python client.  It serves
 * io.wattprof.Test: Echo (answers at once, with the caller's credentials),
 * Counter (a stream answered from another thread, like the daemon's
 * Subscribe), Slow (answered later from another thread), Privileged (root
 * or the configured group only) and Declared (declared, never implemented).
 *
 * usage: rpc-test-server [--socket PATH] [--group NAME] [--max-clients N]
 *                        [--max-output BYTES] [--max-request BYTES]
 * Without --socket it needs a socket from systemd socket activation.  Prints
 * "ready" when it accepts calls; on SIGTERM/SIGINT prints its counters to
 * stderr and exits 0. */
#include "rpc/rpc.h"
#include "util/util.h"

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char test_interface[] =
    "# Methods for testing lib/rpc.\n"
    "interface io.wattprof.Test\n"
    "\n"
    "# Returns text (repeated `repeat` times) and who called.\n"
    "method Echo(text: string, repeat: ?int) -> (text: string, uid: int, gid: int, pid: int,\n"
    "  privileged: bool)\n"
    "\n"
    "# With \"more\": replies n = 1 .. count, one every interval_ms.\n"
    "method Counter(count: int, interval_ms: ?int) -> (n: int)\n"
    "\n"
    "# Replies after ms milliseconds, from another thread.\n"
    "method Slow(ms: int) -> ()\n"
    "\n"
    "# The server's counters (rpc_server_get_stats).\n"
    "method Stats() -> (clients: int, accepted: int, refused: int, dropped: int,\n"
    "  bad_requests: int, calls: int)\n"
    "\n"
    "method Privileged() -> ()\n"
    "method Declared() -> ()\n";

/* One stream or delayed answer owned by the publisher thread. */
struct job {
    struct job *next;
    rpc_call *call;
    long n, count, interval_ms;
    struct timespec due;
};

/* The publisher: a thread that answers calls later, as the daemon's sampling
 * side will for Subscribe. */
struct publisher {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct job *jobs;
    bool stop;
};

static void add_ms(struct timespec *t, long ms)
{
    t->tv_sec += ms / 1000;
    t->tv_nsec += (ms % 1000) * 1000000L;
    if (t->tv_nsec >= 1000000000L) {
        t->tv_sec++;
        t->tv_nsec -= 1000000000L;
    }
}

static bool before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static int publish(struct publisher *pub, rpc_call *call, long count, long interval_ms)
{
    struct job *j = calloc(1, sizeof(*j));

    if (!j)
        return -ENOMEM;
    j->call = rpc_call_ref(call);
    j->count = count;
    j->interval_ms = interval_ms;
    clock_gettime(CLOCK_MONOTONIC, &j->due);
    add_ms(&j->due, interval_ms);
    pthread_mutex_lock(&pub->lock);
    j->next = pub->jobs;
    pub->jobs = j;
    pthread_cond_signal(&pub->wake);
    pthread_mutex_unlock(&pub->lock);
    return 0;
}

/* Sends the next answer of a due job; returns true when the job is over. */
static bool step(struct job *j)
{
    json_object *p = json_object_new_object();
    int r;

    if (rpc_call_closed(j->call)) {
        json_object_put(p);
        return true;
    }
    if (j->count == 0) { /* Slow: one empty answer */
        rpc_reply(j->call, p);
        return true;
    }
    json_object_object_add(p, "n", json_object_new_int64(++j->n));
    r = j->n < j->count ? rpc_reply_more(j->call, p) : rpc_reply(j->call, p);
    add_ms(&j->due, j->interval_ms);
    return r < 0 || j->n >= j->count;
}

static void *publisher_main(void *arg)
{
    struct publisher *pub = arg;

    pthread_mutex_lock(&pub->lock);
    while (!pub->stop) {
        struct timespec now, next = {0};
        struct job **pp = &pub->jobs;
        clock_gettime(CLOCK_MONOTONIC, &now);
        next = now;
        next.tv_sec += 3600;
        while (*pp) {
            struct job *j = *pp;
            if (!before(&now, &j->due) && step(j)) {
                *pp = j->next;
                rpc_call_unref(j->call);
                free(j);
                continue;
            }
            if (before(&j->due, &next))
                next = j->due;
            pp = &j->next;
        }
        pthread_cond_timedwait(&pub->wake, &pub->lock, &next);
    }
    while (pub->jobs) {
        struct job *j = pub->jobs;
        pub->jobs = j->next;
        rpc_call_unref(j->call);
        free(j);
    }
    pthread_mutex_unlock(&pub->lock);
    return NULL;
}

static int echo(rpc_call *call, json_object *params, const rpc_peer *peer, void *userdata)
{
    static const rpc_param_spec spec[] = {{.name = "text", .type = RPC_T_STRING},
                                          {.name = "repeat", .type = RPC_T_INT, .optional = true}};
    json_object *v, *out;
    const char *text;
    int64_t repeat = 1;
    char *buf;
    size_t len;
    int r = rpc_params_check(call, params, spec, 2);

    if (r < 0)
        return r;
    json_object_object_get_ex(params, "text", &v);
    text = json_object_get_string(v);
    if (json_object_object_get_ex(params, "repeat", &v) && v)
        repeat = json_object_get_int64(v);
    len = strlen(text);
    if (repeat < 0 || repeat > 1000000 || (size_t)repeat * len > 64u * 1024 * 1024)
        return rpc_error_invalid_parameter(call, "repeat");
    buf = malloc((size_t)repeat * len + 1);
    if (!buf)
        return -ENOMEM;
    for (int64_t i = 0; i < repeat; i++)
        memcpy(buf + (size_t)i * len, text, len);
    buf[(size_t)repeat * len] = '\0';
    out = json_object_new_object();
    json_object_object_add(out, "text", json_object_new_string(buf));
    free(buf);
    json_object_object_add(out, "uid", json_object_new_int64(peer->uid));
    json_object_object_add(out, "gid", json_object_new_int64(peer->gid));
    json_object_object_add(out, "pid", json_object_new_int64(peer->pid));
    json_object_object_add(out, "privileged", json_object_new_boolean(peer->privileged));
    return rpc_reply(call, out);
}

static int counter(rpc_call *call, json_object *params, const rpc_peer *peer, void *userdata)
{
    static const rpc_param_spec spec[] = {
        {.name = "count", .type = RPC_T_INT},
        {.name = "interval_ms", .type = RPC_T_INT, .optional = true}};
    json_object *v;
    long count, interval = 10;
    int r = rpc_params_check(call, params, spec, 2);

    if (r < 0)
        return r;
    if (!rpc_call_more(call))
        return rpc_error(call, RPC_ERR_EXPECTED_MORE, NULL);
    json_object_object_get_ex(params, "count", &v);
    count = (long)json_object_get_int64(v);
    if (json_object_object_get_ex(params, "interval_ms", &v) && v)
        interval = (long)json_object_get_int64(v);
    if (count < 1 || count > 1000000)
        return rpc_error_invalid_parameter(call, "count");
    if (interval < 0 || interval > 60000)
        return rpc_error_invalid_parameter(call, "interval_ms");
    return publish(userdata, call, count, interval);
}

static int slow(rpc_call *call, json_object *params, const rpc_peer *peer, void *userdata)
{
    static const rpc_param_spec spec[] = {{.name = "ms", .type = RPC_T_INT}};
    json_object *v;
    long ms;
    int r = rpc_params_check(call, params, spec, 1);

    if (r < 0)
        return r;
    json_object_object_get_ex(params, "ms", &v);
    ms = (long)json_object_get_int64(v);
    if (ms < 0 || ms > 60000)
        return rpc_error_invalid_parameter(call, "ms");
    return publish(userdata, call, 0, ms);
}

static int privileged(rpc_call *call, json_object *params, const rpc_peer *peer, void *userdata)
{
    int r = rpc_params_check(call, params, NULL, 0);

    if (r < 0)
        return r;
    return peer->privileged ? rpc_reply(call, NULL) : -EPERM;
}

static int stats(rpc_call *call, json_object *params, const rpc_peer *peer, void *userdata)
{
    rpc_server_stats st;
    json_object *out;
    int r = rpc_params_check(call, params, NULL, 0);

    if (r < 0)
        return r;
    rpc_server_get_stats(userdata, &st);
    out = json_object_new_object();
    json_object_object_add(out, "clients", json_object_new_int64(st.clients));
    json_object_object_add(out, "accepted", json_object_new_int64((int64_t)st.accepted));
    json_object_object_add(out, "refused", json_object_new_int64((int64_t)st.refused));
    json_object_object_add(out, "dropped", json_object_new_int64((int64_t)st.dropped));
    json_object_object_add(out, "bad_requests", json_object_new_int64((int64_t)st.bad_requests));
    json_object_object_add(out, "calls", json_object_new_int64((int64_t)st.calls));
    return rpc_reply(call, out);
}

struct options {
    const char *socket, *group;
    rpc_server_config cfg;
};

static int parse_size(const char *opt, const char *s, size_t *out)
{
    long v;

    if (util_parse_long(s, &v) < 0 || v <= 0) {
        fprintf(stderr, "rpc-test-server: %s: '%s' is not a positive integer\n", opt, s);
        return -EINVAL;
    }
    *out = (size_t)v;
    return 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        {"socket", required_argument, NULL, 's'},      {"group", required_argument, NULL, 'g'},
        {"max-clients", required_argument, NULL, 'c'}, {"max-output", required_argument, NULL, 'o'},
        {"max-request", required_argument, NULL, 'r'}, {0}};
    size_t v;
    int c;

    o->cfg.priv_gid = (gid_t)-1;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            o->socket = optarg;
            break;
        case 'g':
            o->group = optarg;
            break;
        case 'c':
            if (parse_size("--max-clients", optarg, &v) < 0)
                return -EINVAL;
            o->cfg.max_clients = (unsigned)v;
            break;
        case 'o':
            if (parse_size("--max-output", optarg, &o->cfg.max_output) < 0)
                return -EINVAL;
            break;
        case 'r':
            if (parse_size("--max-request", optarg, &o->cfg.max_request) < 0)
                return -EINVAL;
            break;
        default:
            return -EINVAL;
        }
    }
    if (o->group) {
        struct group *g = getgrnam(o->group);
        if (!g) {
            fprintf(stderr, "rpc-test-server: --group: no group named '%s'\n", o->group);
            return -EINVAL;
        }
        o->cfg.priv_gid = g->gr_gid;
    }
    return 0;
}

static int open_socket(const struct options *o, int *fd)
{
    char err[UTIL_ERRLEN];
    int r = rpc_listen_activated(fd, err, sizeof(err));

    if (r == 0 && !o->socket)
        r = util_err(err, sizeof(err), -EINVAL, "no --socket and no socket from systemd");
    else if (r == 0)
        r = rpc_listen_unix(o->socket, 0666, fd, err, sizeof(err));
    if (r < 0)
        fprintf(stderr, "rpc-test-server: %s\n", err);
    return r < 0 ? r : 0;
}

static int add_methods(rpc_server *srv, struct publisher *pub)
{
    char err[UTIL_ERRLEN];
    int r = rpc_server_add_interface(srv, test_interface, err, sizeof(err));

    if (r < 0) {
        fprintf(stderr, "rpc-test-server: %s\n", err);
        return r;
    }
    r = rpc_server_add_interface(srv, rpc_monitor_interface, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "rpc-test-server: io.wattprof.Monitor: %s\n", err);
        return r;
    }
    if ((r = rpc_server_add_method(srv, "io.wattprof.Test.Echo", echo, NULL)) < 0 ||
        (r = rpc_server_add_method(srv, "io.wattprof.Test.Counter", counter, pub)) < 0 ||
        (r = rpc_server_add_method(srv, "io.wattprof.Test.Slow", slow, pub)) < 0 ||
        (r = rpc_server_add_method(srv, "io.wattprof.Test.Stats", stats, srv)) < 0 ||
        (r = rpc_server_add_method(srv, "io.wattprof.Test.Privileged", privileged, NULL)) < 0)
        fprintf(stderr, "rpc-test-server: adding methods: %s\n", strerror(-r));
    return r;
}

/* Serves until SIGTERM or SIGINT. */
static int serve(rpc_server *srv, struct publisher *pub)
{
    pthread_t thread;
    sigset_t set;
    rpc_server_stats st;
    int sig, r;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread starts */
    r = -pthread_create(&thread, NULL, publisher_main, pub);
    if (r == 0)
        r = rpc_server_start(srv);
    if (r < 0) {
        fprintf(stderr, "rpc-test-server: starting: %s\n", strerror(-r));
        return r;
    }
    printf("ready\n");
    fflush(stdout);
    sigwait(&set, &sig);
    rpc_server_stop(srv);
    pthread_mutex_lock(&pub->lock);
    pub->stop = true;
    pthread_cond_signal(&pub->wake);
    pthread_mutex_unlock(&pub->lock);
    pthread_join(thread, NULL);
    rpc_server_get_stats(srv, &st);
    fprintf(stderr,
            "rpc-test-server: accepted %llu refused %llu dropped %llu bad_requests %llu calls "
            "%llu\n",
            (unsigned long long)st.accepted, (unsigned long long)st.refused,
            (unsigned long long)st.dropped, (unsigned long long)st.bad_requests,
            (unsigned long long)st.calls);
    return 0;
}

int main(int argc, char **argv)
{
    struct options o = {0};
    struct publisher pub = {.lock = PTHREAD_MUTEX_INITIALIZER};
    pthread_condattr_t ca;
    rpc_server *srv;
    int fd, r;

    if (parse_options(argc, argv, &o) < 0 || open_socket(&o, &fd) < 0)
        return 2;
    o.cfg.vendor = "wattprof";
    o.cfg.product = "rpc-test-server";
    o.cfg.version = "1";
    o.cfg.url = "https://example.invalid/wattprof";
    r = rpc_server_new(&o.cfg, fd, &srv);
    if (r < 0) {
        fprintf(stderr, "rpc-test-server: %s\n", strerror(-r));
        return 1;
    }
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&pub.wake, &ca);
    r = add_methods(srv, &pub);
    if (r == 0)
        r = serve(srv, &pub);
    rpc_server_free(srv);
    pthread_cond_destroy(&pub.wake);
    return r < 0 ? 1 : 0;
}
