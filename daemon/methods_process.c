/* methods_process: ListProcesses, GetProcess and GetHistory, the queries
 * over stored processes and their seconds. */
#include "methods-internal.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int m_list_processes(rpc_call *call, json_object *params, const rpc_peer *peer, void *u)
{
    daemon_ctx *ctx = u;
    double window = methods_param_double(params, "window_s", 10);
    const char *sort = methods_param_string(params, "sort");
    store_process_query q = {.uid = -1, .sort = STORE_SORT_ENERGY};
    store_process *p;
    size_t n;
    char err[UTIL_ERRLEN];
    int r;

    CHECK_PARAMS(call, params, OPT_IN("window_s", FLOAT, 1, P_SPAN_MAX), OPT("sort", STRING),
                 OPT_IN("limit", INT, 0, P_PAGE_MAX), OPT_IN("uid", INT, 0, P_UID_MAX),
                 OPT("comm", STRING), OPT("include_exited", BOOL),
                 OPT_IN("offset", INT, 0, P_TIME_MAX), OPT("job", STRING));
    if (methods_other_uid(params, peer))
        return rpc_error(call, RPC_ERR_PERMISSION_DENIED, NULL);
    if (sort && strcmp(sort, "power") == 0)
        q.sort = STORE_SORT_POWER;
    else if (sort && strcmp(sort, "cpu") == 0)
        q.sort = STORE_SORT_CPU;
    else if (sort && strcmp(sort, "energy") != 0)
        return rpc_error_invalid_parameter(call, "sort");
    q.until = methods_data_now_s(ctx) + 1;
    q.since = q.until - (int64_t)ceil(window);
    size_t page = (size_t)methods_param_double(params, "limit", 0);
    page = page ? page : (size_t)P_PAGE_MAX;
    q.limit = page + 1; /* one more: is there a next page? */
    q.offset = (size_t)methods_param_double(params, "offset", 0);
    q.uid = methods_param_present(params, "uid") ? (int64_t)methods_param_double(params, "uid", -1)
                                                 : -1;
    if (!peer->privileged)
        q.uid = peer->uid; /* others see only their own */
    q.comm_regex = methods_param_string(params, "comm");
    q.job = methods_param_string(params, "job");
    /* Exited processes are listed unless asked not to. */
    q.only_running = methods_param_present(params, "include_exited") &&
                     !json_object_get_boolean(json_object_object_get(params, "include_exited"));
    if ((r = methods_reader(ctx, call)) < 0)
        return 0;
    methods_sync_store(ctx);
    r = store_list_processes(ctx->reader, &q, &p, &n, err, sizeof(err));
    if (r == -EINVAL && q.comm_regex)
        return methods_invalid_regex(call, q.comm_regex);
    if (r < 0)
        return methods_store_failed(ctx, call, r, err);
    json_object *a = json_object_new_array();
    user_cache users = {0};
    reply_budget budget;
    size_t shown = 0, got = n;
    bool more = n > page;
    n = more ? page : n;
    methods_reply_budget_init(&budget);
    pthread_mutex_lock(&ctx->lock);
    for (; shown < n; shown++) {
        json_object *o =
            methods_stored_json(&p[shown], ctx->model, (double)(q.until - q.since), true, &users);
        if (!methods_reply_budget_take(&budget, o)) { /* the page ends at the reply's bytes */
            json_object_put(o);
            more = true;
            break;
        }
        json_object_array_add(a, o);
    }
    pthread_mutex_unlock(&ctx->lock);
    store_processes_free(p, got);
    if (shown == 0 && more) {
        json_object_put(a);
        return methods_reply_too_large(call, "offset",
                                       "the process at offset %zu alone takes more than %d bytes",
                                       q.offset, REPLY_MAX_BYTES - REPLY_RESERVE_BYTES);
    }
    json_object *reply = json_object_new_object();
    json_object_object_add(reply, "window_s", json_object_new_double((double)(q.until - q.since)));
    json_object_object_add(reply, "processes", a);
    json_object_object_add(reply, "next_offset",
                           more ? json_object_new_int64((int64_t)(q.offset + shown)) : NULL);
    return rpc_reply(call, reply);
}

static int no_such_process(rpc_call *call, int pid)
{
    json_object *e = json_object_new_object();
    json_object_object_add(e, "pid", json_object_new_int(pid));
    return rpc_error(call, "io.wattprof.Monitor.NoSuchProcess", e);
}

/* Which calibrations the host's seconds were attributed under while the
 * process was seen, into *out.  A failed read fails the call (err says why):
 * an empty list would read as "none", and a stopped one as a short list. */
static int process_calibrations(daemon_ctx *ctx, const store_process *p, json_object **out,
                                char *err, size_t errlen)
{
    int64_t end = (p->exit_time ? p->exit_time : p->last_seen) + 1;
    store_calib_change *v;
    size_t n;
    int r;

    if ((r = store_calibration_changes(ctx->reader, p->first_seen, end, &v, &n, err, errlen)) < 0)
        return r;
    json_object *a = json_object_new_array();
    for (size_t i = 0; i < n; i++) {
        json_object *c = json_object_new_object();
        json_object_object_add(c, "t", json_object_new_double((double)v[i].t));
        json_object_object_add(c, "idle_source",
                               v[i].idle_source[0] ? json_object_new_string(v[i].idle_source)
                                                   : NULL);
        json_object_object_add(c, "fitted",
                               v[i].calib_t ? json_object_new_double((double)v[i].calib_t) : NULL);
        json_object_array_add(a, c);
    }
    free(v);
    *out = a;
    return 0;
}

int m_get_process(rpc_call *call, json_object *params, const rpc_peer *peer, void *u)
{
    daemon_ctx *ctx = u;
    int pid = (int)methods_param_double(params, "pid", -1);
    double series_s = methods_param_double(params, "series_s", 60);
    store_process p;
    store_second *ser;
    size_t n;
    char err[UTIL_ERRLEN];

    CHECK_PARAMS(call, params, REQ_IN("pid", INT, 1, P_PID_MAX),
                 OPT_IN("series_s", FLOAT, 1, P_SPAN_MAX));
    if (methods_reader(ctx, call) < 0)
        return 0;
    methods_sync_store(ctx);
    int r =
        store_get_process(ctx->reader, pid, 0, (int64_t)series_s, &p, &ser, &n, err, sizeof(err));
    if (r == -ENOENT)
        return no_such_process(call, pid);
    if (r < 0)
        return methods_store_failed(ctx, call, r, err);
    if (!peer->privileged && p.uid != (int64_t)peer->uid) {
        store_process_free(&p);
        free(ser);
        return no_such_process(call, pid); /* not theirs: as if absent */
    }
    json_object *calibrations;
    if ((r = process_calibrations(ctx, &p, &calibrations, err, sizeof(err))) < 0) {
        store_process_free(&p);
        free(ser);
        return methods_store_failed(ctx, call, r, err);
    }
    json_object *reply = json_object_new_object(), *classes = json_object_new_array();
    json_object *series = json_object_new_array();
    user_cache users = {0};
    reply_budget budget;
    bool fits = true;
    methods_reply_budget_init(&budget);
    pthread_mutex_lock(&ctx->lock);
    json_object *process = methods_stored_json(&p, ctx->model, 0, false, &users);
    json_object_object_add(reply, "process", process);
    json_object_object_add(reply, "classes", classes);
    json_object_object_add(reply, "calibrations", calibrations);
    json_object_object_add(reply, "series", series);
    json_object_object_add(reply, "model", methods_model_json(ctx->model, true, NAN));
    fits = methods_reply_budget_take(&budget, process) &&
           methods_reply_budget_take(&budget, calibrations);
    int last = -2;
    for (size_t i = 0; fits && i < n; i++) {
        json_object *smp = json_object_new_object();
        if (ser[i].klass != last) {
            json_object *c = json_object_new_object();
            json_object_object_add(c, "t", json_object_new_double((double)ser[i].t));
            json_object_object_add(
                c, "class", json_object_new_string(methods_class_name(ctx->model, ser[i].klass)));
            json_object_array_add(classes, c);
            fits = methods_reply_budget_take(&budget, c);
            last = ser[i].klass;
        }
        json_object_object_add(smp, "t", json_object_new_double((double)ser[i].t));
        json_object_object_add(smp, "energy_j", json_object_new_double(ser[i].attributed_j));
        json_object_object_add(smp, "power_w", json_object_new_double(ser[i].attributed_j));
        json_object_object_add(smp, "cpu", json_object_new_double(ser[i].cpu_s));
        json_object_object_add(smp, "measured_j", NULL);
        json_object_array_add(series, smp);
        fits = fits && methods_reply_budget_take(&budget, smp);
    }
    pthread_mutex_unlock(&ctx->lock);
    store_process_free(&p);
    free(ser);
    if (!fits) { /* not pageable: the caller asks for fewer seconds */
        json_object_put(reply);
        return methods_reply_too_large(
            call, "series_s", "the %zu seconds of the series (series_s %g) take more than %d bytes",
            n, series_s, REPLY_MAX_BYTES);
    }
    return rpc_reply(call, reply);
}

static void history_calibration(json_object *s, const store_point *p)
{
    json_object_object_add(s, "idle_source",
                           p->idle_source[0] ? json_object_new_string(p->idle_source) : NULL);
    json_object_object_add(s, "fitted",
                           p->calib_t ? json_object_new_double((double)p->calib_t) : NULL);
    json_object_object_add(s, "calibrations", json_object_new_int(p->calibrations));
}

static int history_query(daemon_ctx *ctx, rpc_call *call, json_object *params, const rpc_peer *peer,
                         store_history_query *q)
{
    int kinds = methods_param_present(params, "pid") + methods_param_present(params, "comm") +
                methods_param_present(params, "uid") + methods_param_present(params, "job") +
                (methods_param_present(params, "host") &&
                 json_object_get_boolean(json_object_object_get(params, "host")));

    if (kinds != 1) {
        rpc_error_invalid_parameter_why(
            call, "pid",
            "exactly one of pid, comm, uid, job or host: true is needed, "
            "%d given",
            kinds);
        return -EINVAL;
    }
    q->since = (int64_t)floor(methods_param_double(params, "since", 0));
    q->until =
        (int64_t)ceil(methods_param_double(params, "until", (double)methods_data_now_s(ctx) + 1));
    if (q->until <= q->since) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "since", json_object_new_double((double)q->since));
        json_object_object_add(e, "until", json_object_new_double((double)q->until));
        json_object_object_add(e, "reason", json_object_new_string("until is not after since"));
        rpc_error(call, "io.wattprof.Monitor.InvalidTimeRange", e);
        return -EINVAL;
    }
    double step =
        methods_param_double(params, "step_s", ceil((double)(q->until - q->since) / 1000));
    if (!(step >= 1) && !(peer->privileged && step > 0)) {
        rpc_error_invalid_parameter_why(call, "step_s", "step_s is %g, not %s", step,
                                        peer->privileged ? "above 0" : "1 or more");
        return -EINVAL;
    }
    q->step = step < 1 ? 1 : (int64_t)step;
    if (methods_param_present(params, "pid")) {
        q->by = STORE_HISTORY_PID;
        q->pid = (pid_t)methods_param_double(params, "pid", 0);
    } else if (methods_param_present(params, "comm")) {
        q->by = STORE_HISTORY_COMM;
        q->comm = methods_param_string(params, "comm");
    } else if (methods_param_present(params, "job")) {
        q->by = STORE_HISTORY_JOB;
        q->job = methods_param_string(params, "job");
    } else if (methods_param_present(params, "uid")) {
        q->by = STORE_HISTORY_UID;
        q->uid = (int64_t)methods_param_double(params, "uid", -1);
    } else {
        q->by = STORE_HISTORY_HOST;
    }
    if (!peer->privileged && q->by == STORE_HISTORY_UID && q->uid != (int64_t)peer->uid) {
        rpc_error(call, RPC_ERR_PERMISSION_DENIED, NULL);
        return -EPERM;
    }
    return 0;
}

/* covered_s of a process, command, user or job history: the host's, bucket
 * by bucket (the seconds the daemon sampled), since a process's own rows
 * cannot tell a second it did not run from one the daemon did not see.
 * -ETIME (err says why) when the call's time budget ran out. */
static int history_coverage(daemon_ctx *ctx, const store_history_query *q, store_point *pts,
                            size_t n, char *err, size_t errlen)
{
    store_history_query hq = *q;
    store_point *host;
    size_t nh, j = 0;
    int r;

    hq.by = STORE_HISTORY_HOST;
    if ((r = store_history(ctx->reader, &hq, &host, &nh, err, errlen)) < 0) {
        if (r == -ETIME)
            return r;
        log_warning("GetHistory: the host's coverage of the buckets: %s", err);
        for (size_t i = 0; i < n; i++)
            pts[i].covered_s = NAN;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        while (j < nh && host[j].t < pts[i].t)
            j++;
        pts[i].covered_s = j < nh && host[j].t == pts[i].t ? host[j].covered_s : 0;
    }
    free(host);
    return 0;
}

int m_get_history(rpc_call *call, json_object *params, const rpc_peer *peer, void *u)
{
    daemon_ctx *ctx = u;
    store_history_query q = {0};
    store_point *pts;
    size_t n;
    char err[UTIL_ERRLEN];
    int r;

    CHECK_PARAMS(call, params, OPT_IN("pid", INT, 1, P_PID_MAX), OPT("comm", STRING),
                 OPT_IN("uid", INT, 0, P_UID_MAX), OPT("host", BOOL), OPT("job", STRING),
                 REQ_IN("since", FLOAT, 0, P_TIME_MAX), OPT_IN("until", FLOAT, 0, P_TIME_MAX),
                 OPT_IN("step_s", FLOAT, 0, P_SPAN_MAX));
    if (history_query(ctx, call, params, peer, &q) < 0)
        return 0;
    if (methods_reader(ctx, call) < 0)
        return 0;
    if (!peer->privileged && (q.by == STORE_HISTORY_PID || q.by == STORE_HISTORY_COMM)) {
        /* Unprivileged: a pid or command history only over their own uid. */
        if (q.by == STORE_HISTORY_PID) {
            store_process p;
            store_second *ser = NULL;
            size_t ns;
            r = store_get_process(ctx->reader, q.pid, 0, 0, &p, &ser, &ns, err, sizeof(err));
            if (r < 0 && r != -ENOENT)
                return methods_store_failed(ctx, call, r, err);
            bool mine = r == 0 && p.uid == (int64_t)peer->uid;
            if (r == 0)
                store_process_free(&p);
            free(ser);
            if (!mine)
                return no_such_process(call, q.pid);
        } else {
            /* A command spans users; per-user narrowing is not offered. */
            return rpc_error(call, RPC_ERR_PERMISSION_DENIED, NULL);
        }
    }
    methods_sync_store(ctx);
    /* Read before the query: what it reads holds at least this much. */
    int64_t as_of = store_flushed_at(ctx->st);
    if (q.by == STORE_HISTORY_JOB &&
        (r = methods_job_visible(ctx, q.job, peer, err, sizeof(err))) <= 0)
        return r < 0 ? methods_store_failed(ctx, call, r, err)
                     : rpc_error(call, RPC_ERR_PERMISSION_DENIED, NULL);
    r = store_history(ctx->reader, &q, &pts, &n, err, sizeof(err));
    if (r == -EINVAL && q.by == STORE_HISTORY_COMM)
        return methods_invalid_regex(call, q.comm);
    if (r == 0 && q.by != STORE_HISTORY_HOST &&
        (r = history_coverage(ctx, &q, pts, n, err, sizeof(err))) < 0)
        free(pts);
    if (r < 0)
        return methods_store_failed(ctx, call, r, err);
    json_object *a = json_object_new_array(), *reply = json_object_new_object();
    reply_budget budget;
    size_t i;
    methods_reply_budget_init(&budget);
    for (i = 0; i < n; i++) {
        json_object *s = json_object_new_object();
        bool host = q.by == STORE_HISTORY_HOST;
        double e = host ? pts[i].host_j : pts[i].attributed_j;
        json_object_object_add(s, "t", json_object_new_double((double)pts[i].t));
        json_object_object_add(s, "energy_j", json_object_new_double(e));
        json_object_object_add(s, "power_w", json_object_new_double(e / (double)q.step));
        json_object_object_add(s, "cpu", json_object_new_double(pts[i].cpu_s / (double)q.step));
        /* Measured only when RAPL measured every second of the bucket. */
        json_object_object_add(s, "measured_j",
                               host && pts[i].measured ? json_object_new_double(pts[i].host_j)
                                                       : NULL);
        json_object_object_add(s, "covered_s", methods_num_or_null(pts[i].covered_s));
        if (host) /* the calibration of the bucket's last second */
            history_calibration(s, &pts[i]);
        if (!methods_reply_budget_take(&budget, s)) { /* the page ends at the reply's bytes */
            json_object_put(s);
            break;
        }
        json_object_array_add(a, s);
    }
    /* Buckets start at since + k x step_s: the next page's since keeps them. */
    json_object_object_add(reply, "next_since",
                           i < n ? json_object_new_double((double)pts[i].t) : NULL);
    free(pts);
    json_object_object_add(reply, "step_s", json_object_new_double((double)q.step));
    json_object_object_add(reply, "samples", a);
    json_object_object_add(reply, "as_of",
                           as_of > 0 ? json_object_new_double((double)as_of / 1e9) : NULL);
    return rpc_reply(call, reply);
}
