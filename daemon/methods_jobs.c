/* methods_jobs: ListJobs, the batch jobs of this node (Slurm's job ids),
 * from their processes' stored rows.  Who sees what is as for processes:
 * root and the configured group see every job, anyone else their own. */
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
        o, "user", json_object_new_string(j->uid >= 0 ? cached_user(users, (uid_t)j->uid) : ""));
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

int m_list_jobs(rpc_call *call, json_object *params, const rpc_peer *peer, void *u)
{
    daemon_ctx *ctx = u;
    store_job_query q = {.uid = -1};
    store_job *jobs;
    size_t n;
    char err[UTIL_ERRLEN];

    CHECK_PARAMS(call, params, OPT_IN("since", FLOAT, 0, P_TIME_MAX),
                 OPT_IN("until", FLOAT, 0, P_TIME_MAX), OPT_IN("uid", INT, 0, P_UID_MAX),
                 OPT("job", STRING), OPT_IN("offset", INT, 0, P_TIME_MAX));
    if (other_uid(params, peer))
        return rpc_error(call, RPC_ERR_PERMISSION_DENIED, NULL);
    q.since = (int64_t)floor(param_double(params, "since", 0));
    q.until = (int64_t)ceil(param_double(params, "until", (double)data_now_s(ctx) + 1));
    if (q.until <= q.since) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "since", json_object_new_double((double)q.since));
        json_object_object_add(e, "until", json_object_new_double((double)q.until));
        json_object_object_add(e, "reason", json_object_new_string("until is not after since"));
        return rpc_error(call, "io.wattprof.Monitor.InvalidTimeRange", e);
    }
    q.uid = param_present(params, "uid") ? (int64_t)param_double(params, "uid", -1) : -1;
    if (!peer->privileged)
        q.uid = peer->uid; /* others see only their own */
    q.job = param_string(params, "job");
    if (reader(ctx, call) < 0)
        return 0;
    sync_store(ctx);
    int r;
    if ((r = store_list_jobs(ctx->reader, &q, &jobs, &n, err, sizeof(err))) < 0)
        return store_failed(ctx, call, r, err);
    json_object *a = json_object_new_array(), *reply = json_object_new_object();
    user_cache users = {0};
    reply_budget budget;
    size_t offset = (size_t)param_double(params, "offset", 0), i;
    reply_budget_init(&budget);
    for (i = offset; i < n; i++) {
        json_object *o = job_json(&jobs[i], &users);
        if (!reply_budget_take(&budget, o)) { /* the page ends at the reply's bytes */
            json_object_put(o);
            break;
        }
        json_object_array_add(a, o);
    }
    store_jobs_free(jobs, n);
    json_object_object_add(reply, "jobs", a);
    json_object_object_add(reply, "next_offset", i < n ? json_object_new_int64((int64_t)i) : NULL);
    return rpc_reply(call, reply);
}

int methods_job_visible(daemon_ctx *ctx, const char *job, const rpc_peer *peer, char *err,
                        size_t errlen)
{
    store_job_query q = {.since = 0, .until = data_now_s(ctx) + 1, .uid = -1, .job = job};
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
