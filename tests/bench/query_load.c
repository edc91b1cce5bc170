/* Benchmark helper for tests/bench/query-load: many concurrent Varlink
 * clients, and the canned-reply server they are compared against.
 *
 *   load  SOCKET CLIENTS CALLS   CLIENTS threads each connect (lib/rpc's
 *                                client), wait until all are connected,
 *                                then make CALLS calls one after the other,
 *                                alternating io.wattprof.Monitor.GetStatus
 *                                and ListProcesses; prints one JSON object:
 *                                latency p50, p99, max (ms) and calls/s
 *                                of the calls answered, and errors
 *                                (calls not answered within 60 s or
 *                                failed, and those a broken connection
 *                                left unmade). Exits 1 if any.
 *   serve SOCKET STATUS PROCS    the peer: a lib/rpc server with the
 *                                daemon's interface whose GetStatus and
 *                                ListProcesses answer at once with the
 *                                replies in the files STATUS and PROCS
 *                                (captured from the daemon), so the same
 *                                bytes cross the same socket without the
 *                                daemon's work. Runs until SIGTERM. */
#include "rpc/rpc.h"
#include "util/util.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CALL_TIMEOUT_MS 60000

typedef struct load {
    const char *socket;
    int calls;
    pthread_barrier_t start;
} load;

typedef struct client {
    load *l;
    double *ms; /* latency of each call that was answered */
    int done;   /* calls answered */
    int errors; /* calls that failed or were never made after a failure */
    pthread_t thread;
} client;

static int one_call(rpc_client *c, const char *method, json_object *params)
{
    char err[UTIL_ERRLEN];
    rpc_reply_msg r = {0};
    int e = rpc_client_call(c, method, params, 0, CALL_TIMEOUT_MS, err, sizeof(err));

    if (e == 0)
        e = rpc_client_read(c, CALL_TIMEOUT_MS, &r, err, sizeof(err));
    if (e == 0 && r.error)
        e = -EPROTO;
    if (e < 0)
        fprintf(stderr, "%s: %s\n", method, r.error ? r.error : err);
    rpc_reply_msg_clear(&r);
    return e;
}

static void *client_main(void *arg)
{
    client *cl = arg;
    char err[UTIL_ERRLEN];
    rpc_client *c = NULL;
    json_object *none = json_object_new_object(), *ps = json_object_new_object();
    int r = rpc_client_connect(cl->l->socket, &c, err, sizeof(err));

    json_object_object_add(ps, "window_s", json_object_new_int(10));
    if (r < 0) {
        fprintf(stderr, "%s\n", err);
        cl->errors = cl->l->calls;
    }
    pthread_barrier_wait(&cl->l->start);
    for (int k = 0; r == 0 && k < cl->l->calls; k++) {
        uint64_t t0 = util_now_ns(CLOCK_MONOTONIC);
        int e = k % 2 ? one_call(c, "io.wattprof.Monitor.ListProcesses", ps)
                      : one_call(c, "io.wattprof.Monitor.GetStatus", none);
        if (e < 0) { /* a broken connection: the rest are lost too */
            cl->errors += cl->l->calls - k;
            break;
        }
        cl->ms[cl->done++] = (util_now_ns(CLOCK_MONOTONIC) - t0) / 1e6;
    }
    rpc_client_free(c);
    json_object_put(none);
    json_object_put(ps);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int run_load(const char *socket, int n, int calls)
{
    load l = {.socket = socket, .calls = calls};
    client *cl = calloc(n, sizeof(*cl));
    double *all = calloc((size_t)n * calls, sizeof(double));
    int errors = 0, started = 0;

    if (!cl || !all) {
        free(cl);
        free(all);
        return -ENOMEM;
    }
    pthread_barrier_init(&l.start, NULL, n + 1);
    for (; started < n; started++) {
        cl[started] = (client){.l = &l, .ms = all + (size_t)started * calls};
        if (pthread_create(&cl[started].thread, NULL, client_main, &cl[started]) != 0)
            break;
    }
    if (started < n) { /* the barrier would never open: give up loudly */
        fprintf(stderr, "cannot start client thread %d of %d\n", started + 1, n);
        exit(1);
    }
    pthread_barrier_wait(&l.start);
    uint64_t t0 = util_now_ns(CLOCK_MONOTONIC);
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(cl[i].thread, NULL);
        errors += cl[i].errors;
        /* Answered calls to the front, in place: cl[i].ms starts at or
         * after all + total. */
        memmove(all + total, cl[i].ms, cl[i].done * sizeof(double));
        total += cl[i].done;
    }
    double wall = (util_now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
    qsort(all, total, sizeof(double), cmp_double);
    printf("{\"clients\": %d, \"calls\": %zu, \"errors\": %d, \"wall_s\": %.3f,"
           " \"calls_per_s\": %.1f, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f}\n",
           n, total, errors, wall, total / wall, total ? all[total / 2] : 0,
           total ? all[total * 99 / 100] : 0, total ? all[total - 1] : 0);
    pthread_barrier_destroy(&l.start);
    free(cl);
    free(all);
    return errors ? -EPROTO : 0;
}

static int reply_canned(rpc_call *call, json_object *params, const rpc_peer *peer, void *userdata)
{
    return rpc_reply(call, json_object_get(userdata));
}

static json_object *read_reply(const char *path)
{
    json_object *o = json_object_from_file(path);

    if (!o || !json_object_is_type(o, json_type_object)) {
        const char *why = o ? "not a JSON object" : json_util_get_last_err();
        /* json-c's message ends in a newline of its own */
        fprintf(stderr, "%s: cannot use as a reply: %.*s\n", path,
                why ? (int)strcspn(why, "\n") : 10, why ? why : "unreadable");
        json_object_put(o);
        return NULL;
    }
    return o;
}

static int run_serve(const char *socket, const char *status_path, const char *procs_path)
{
    char err[UTIL_ERRLEN];
    rpc_server_config cfg = {.max_clients = 1000, .priv_gid = (gid_t)-1};
    json_object *status = read_reply(status_path), *procs = status ? read_reply(procs_path) : NULL;
    rpc_server *srv = NULL;
    sigset_t set;
    int fd, sig, r = status && procs ? 0 : -EINVAL;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (r == 0 && (r = rpc_listen_unix(socket, 0666, &fd, err, sizeof(err))) < 0)
        fprintf(stderr, "%s\n", err);
    r = r ? r : rpc_server_new(&cfg, fd, &srv);
    if (r == 0 && (r = rpc_server_add_interface(srv, rpc_monitor_interface, err, sizeof(err))) < 0)
        fprintf(stderr, "%s\n", err);
    r = r ? r : rpc_server_add_method(srv, "io.wattprof.Monitor.GetStatus", reply_canned, status);
    r = r ? r
          : rpc_server_add_method(srv, "io.wattprof.Monitor.ListProcesses", reply_canned, procs);
    r = r ? r : rpc_server_start(srv);
    if (r == 0) {
        printf("ready\n");
        fflush(stdout);
        sigwait(&set, &sig);
    }
    rpc_server_free(srv);
    json_object_put(status);
    json_object_put(procs);
    return r;
}

static int positive(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);

    return *s && !*end && v > 0 && v < 10000000 ? (int)v : -1;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int r;

    if (strcmp(mode, "load") == 0 && argc == 5 && positive(argv[3]) > 0 && positive(argv[4]) > 0)
        r = run_load(argv[2], positive(argv[3]), positive(argv[4]));
    else if (strcmp(mode, "serve") == 0 && argc == 5)
        r = run_serve(argv[2], argv[3], argv[4]);
    else {
        fprintf(stderr,
                "usage: %s load SOCKET CLIENTS CALLS | serve SOCKET STATUS.json PROCS.json\n",
                argv[0]);
        return 2;
    }
    return r < 0 ? 1 : 0;
}
