/* methods_jobs: ListJobs, the batch jobs of this node (Slurm's job ids),
 * from their processes' stored rows.  Who sees what is as for processes:
 * root and the configured group see every job, anyone else their own.
 * Pages are by key, not by position: a page ends with the key (start, job)
 * of its last job and the next resumes strictly after it, so a job that
 * starts between two calls neither repeats a job nor pushes one out. */
#include "methods-internal.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_object *job_json(const store_job *j, user_cache *users)
{
    json_object *o = json_object_new_object();
    double span = (double)(j->end - j->start + 1);

    json_object_object_add(o, "job", json_object_new_string(j->job));
    json_object_object_add(o, "uid", json_object_new_int64(j->uid));
    json_object_object_add(
        o, "user",
        json_object_new_string(j->uid >= 0 ? methods_cached_user(users, (uid_t)j->uid) : ""));
    json_object_object_add(o, "start", json_object_new_double((double)j->start));
    json_object_object_add(o, "end", json_object_new_double((double)j->end));
    json_object_object_add(o, "running", json_object_new_boolean(j->running));
    json_object_object_add(o, "processes", json_object_new_int64(j->processes));
    json_object_object_add(o, "energy_j", json_object_new_double(j->energy_j));
    json_object_object_add(o, "power_w", json_object_new_double(j->energy_j / span));
    json_object_object_add(o, "cpu_s", json_object_new_double(j->cpu_s));
    json_object_object_add(o, "node_j", json_object_new_double(j->node_j));
    json_object_object_add(o, "share",
                           j->node_j > 0 ? json_object_new_double(j->energy_j / j->node_j) : NULL);
    return o;
}

/* Jobs asked of the store at a time while a page fills: one statement
 * reads the processes of this many jobs, however many pages there are. */
#define JOBS_CHUNK 1000

/* The job ListJobs' `before` names: {start, job}, the next_before of the
 * page before.  -EINVAL, answered InvalidParameter naming before, when it
 * is not that. */
static int before_param(rpc_call *call, json_object *params, store_job_query *q)
{
    json_object *b = NULL, *start = NULL, *job = NULL;

    if (!json_object_object_get_ex(params, "before", &b) || !b)
        return 0;
    if (json_object_object_length(b) != 2 || !json_object_object_get_ex(b, "start", &start) ||
        !json_object_object_get_ex(b, "job", &job) || !json_object_is_type(job, json_type_string) ||
        !(json_object_is_type(start, json_type_double) ||
          json_object_is_type(start, json_type_int))) {
        rpc_error_invalid_parameter_why(call, "before",
                                        "before is %s, not {\"start\": float, \"job\": string}",
                                        json_object_to_json_string_ext(b, JSON_C_TO_STRING_PLAIN));
        return -EINVAL;
    }
    q->before_start = json_object_get_double(start);
    if (!(q->before_start >= 0 && q->before_start <= P_TIME_MAX)) {
        rpc_error_invalid_parameter_why(call, "before", "before.start is %g, not in [0, %g]",
                                        q->before_start, P_TIME_MAX);
        return -EINVAL;
    }
    q->before_job = json_object_get_string(job);
    return 0;
}

static json_object *job_key(double start, const char *job)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "start", json_object_new_double(start));
    json_object_object_add(o, "job", json_object_new_string(job));
    return o;
}

/* Fills a page with the jobs after q's key, JOBS_CHUNK at a time, until the
 * reply's bytes are spent (*next: the key of its last job, owned by the
 * caller) or the jobs are (*next NULL).  0 or a negative errno (err). */
static int fill_page(daemon_ctx *ctx, store_job_query q, json_object *a, json_object **next,
                     char *err, size_t errlen)
{
    user_cache users = {0};
    reply_budget budget;
    char *last = NULL;
    double last_start = 0;
    bool full = false;
    int r = 0;

    methods_reply_budget_init(&budget);
    q.limit = JOBS_CHUNK;
    *next = NULL;
    while (!full) {
        store_job *jobs;
        size_t n, i;

        if ((r = store_list_jobs(ctx->reader, &q, &jobs, &n, err, errlen)) < 0)
            break;
        for (i = 0; i < n && !full; i++) {
            json_object *o = job_json(&jobs[i], &users);
            if (!methods_reply_budget_take(&budget, o)) { /* the page ends at the reply's bytes */
                json_object_put(o);
                full = true;
                break;
            }
            json_object_array_add(a, o);
        }
        if (i > 0) {
            free(last);
            last = strdup(jobs[i - 1].job);
            last_start = (double)jobs[i - 1].start;
        }
        store_jobs_free(jobs, n);
        if (i > 0 && !last) {
            r = util_err(err, errlen, -ENOMEM, "listing jobs: out of memory");
            break;
        }
        if (n < JOBS_CHUNK)
            break;
        q.before_job = last;
        q.before_start = last_start;
    }
    if (r == 0 && full && last)
        *next = job_key(last_start, last);
    else if (r == 0 && full)
        r = -E2BIG; /* one job alone is past the bytes */
    free(last);
    return r;
}

int m_list_jobs(rpc_call *call, json_object *params, const rpc_peer *peer, void *u)
{
    daemon_ctx *ctx = u;
    store_job_query q = {.uid = -1};
    json_object *a, *reply, *next;
    char err[UTIL_ERRLEN];
    int r;

    CHECK_PARAMS(call, params, OPT_IN("since", FLOAT, 0, P_TIME_MAX),
                 OPT_IN("until", FLOAT, 0, P_TIME_MAX), OPT_IN("uid", INT, 0, P_UID_MAX),
                 OPT("job", STRING), OPT("before", OBJECT));
    if (before_param(call, params, &q) < 0)
        return 0;
    if (methods_other_uid(params, peer))
        return rpc_error(call, RPC_ERR_PERMISSION_DENIED, NULL);
    q.since = (int64_t)floor(methods_param_double(params, "since", 0));
    q.until =
        (int64_t)ceil(methods_param_double(params, "until", (double)methods_data_now_s(ctx) + 1));
    if (q.until <= q.since) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "since", json_object_new_double((double)q.since));
        json_object_object_add(e, "until", json_object_new_double((double)q.until));
        json_object_object_add(e, "reason", json_object_new_string("until is not after since"));
        return rpc_error(call, "io.wattprof.Monitor.InvalidTimeRange", e);
    }
    q.uid = methods_param_present(params, "uid") ? (int64_t)methods_param_double(params, "uid", -1)
                                                 : -1;
    if (!peer->privileged)
        q.uid = peer->uid; /* others see only their own */
    q.job = methods_param_string(params, "job");
    if (methods_reader(ctx, call) < 0)
        return 0;
    methods_sync_store(ctx);
    a = json_object_new_array();
    r = fill_page(ctx, q, a, &next, err, sizeof(err));
    if (r < 0) {
        json_object_put(a);
        if (r == -E2BIG)
            return methods_reply_too_large(call, NULL, "a job's JSON alone is past %d bytes",
                                           REPLY_MAX_BYTES - REPLY_RESERVE_BYTES);
        return methods_store_failed(ctx, call, r, err);
    }
    reply = json_object_new_object();
    json_object_object_add(reply, "jobs", a);
    json_object_object_add(reply, "next_before", next);
    return rpc_reply(call, reply);
}

int methods_job_visible(daemon_ctx *ctx, const char *job, const rpc_peer *peer, char *err,
                        size_t errlen)
{
    store_job_query q = {
        .since = 0, .until = methods_data_now_s(ctx) + 1, .uid = -1, .job = job, .limit = 1};
    store_job *jobs;
    size_t n;
    int r;

    if (peer->privileged)
        return 1;
    if ((r = store_list_jobs(ctx->reader, &q, &jobs, &n, err, errlen)) < 0)
        return r;
    r = n == 0 || jobs[0].uid == (int64_t)peer->uid;
    store_jobs_free(jobs, n);
    return r;
}
